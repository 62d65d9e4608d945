// SPDX-License-Identifier: Apache-2.0
/* Prometheus text exposition format 0.0.4, written into one bounded buffer. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter/exporter.h"

/* A page's first allocation: at least this much, more when the last page needed more. */
#define EXPO_FIRST 4096

void expo_init(struct expo *x, size_t max)
{
	memset(x, 0, sizeof(*x));
	/* buf's 0 is no bound; a page of at most 0 bytes holds nothing: 1 (the NUL) says so */
	x->page.max = max ? max : 1;
	x->page.first = EXPO_FIRST;
}

void expo_free(struct expo *x)
{
	buf_free(&x->page);
	x->overflow = false;
}

void expo_reset(struct expo *x)
{
	buf_reset(&x->page);
	x->overflow = false;
}

char *expo_take(struct expo *x, size_t *len)
{
	char *buf = buf_take(&x->page, len);

	/* A little room over the last size: the next page may have grown. */
	x->page.first = *len + *len / 8 > EXPO_FIRST ? *len + *len / 8 : EXPO_FIRST;
	x->overflow = false;
	return buf;
}

/* Room for n more bytes and the NUL after them; NULL once the page is past max. */
static char *reserve(struct expo *x, size_t n)
{
	char *p = buf_reserve(&x->page, n);

	if (!p)
		x->overflow = true;
	return p;
}

static void put(struct expo *x, const char *s, size_t n)
{
	char *p = reserve(x, n);

	if (!p)
		return;
	memcpy(p, s, n);
	x->page.len += n;
	x->page.p[x->page.len] = '\0';
}

/* Decimal digits of v, written backwards ending at end; returns the first. */
static char *u64_digits(uint64_t v, char *end)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return end;
}

static void puts_(struct expo *x, const char *s)
{
	put(x, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3))) printf_(struct expo *x, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		put(x, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

void expo_escape(const char *in, char *out, size_t size)
{
	size_t o = 0;

	if (!size)
		return;
	for (; *in; in++) {
		unsigned char c = (unsigned char)*in;
		size_t need = (c == '\\' || c == '"' || c == '\n') ? 2 : 1;

		/* a UTF-8 lead byte: the whole sequence fits or none of it */
		if (c >= 0xc0) {
			size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
			if (o + len + 1 > size)
				break;
		}
		if (o + need + 1 > size)
			break;
		if (need == 2) {
			out[o++] = '\\';
			out[o++] = c == '\n' ? 'n' : (char)c;
		} else {
			out[o++] = (char)c;
		}
	}
	out[o] = '\0';
}

void expo_family(struct expo *x, const char *name, const char *type, const char *help)
{
	/* HELP text escapes only backslash and newline. */
	puts_(x, "# HELP ");
	puts_(x, name);
	put(x, " ", 1);
	for (const char *p = help; *p; p++) {
		if (*p == '\\')
			puts_(x, "\\\\");
		else if (*p == '\n')
			puts_(x, "\\n");
		else
			put(x, p, 1);
	}
	puts_(x, "\n# TYPE ");
	puts_(x, name);
	put(x, " ", 1);
	puts_(x, type);
	put(x, "\n", 1);
}

void expo_labels(struct expo *x, const char *const *labels)
{
	if (!labels || !labels[0])
		return;
	put(x, "{", 1);
	for (size_t i = 0; labels[i] && labels[i + 1]; i += 2) {
		char esc[1024];

		if (i)
			put(x, ",", 1);
		expo_escape(labels[i + 1], esc, sizeof(esc));
		puts_(x, labels[i]);
		puts_(x, "=\"");
		puts_(x, esc);
		put(x, "\"", 1);
	}
	put(x, "}", 1);
}

static void put_name_labels(struct expo *x, const char *name, const char *const *labels)
{
	puts_(x, name);
	expo_labels(x, labels);
	put(x, " ", 1);
}

void expo_sample(struct expo *x, const char *name, const char *const *labels, double value)
{
	put_name_labels(x, name, labels);
	if (isnan(value))
		puts_(x, "NaN");
	else if (isinf(value))
		puts_(x, value > 0 ? "+Inf" : "-Inf");
	else
		printf_(x, "%.15g", value);
	put(x, "\n", 1);
}

void expo_sample_u64(struct expo *x, const char *name, const char *const *labels, uint64_t value)
{
	char digits[24], *d = u64_digits(value, digits + sizeof(digits));

	put_name_labels(x, name, labels);
	put(x, d, (size_t)(digits + sizeof(digits) - d));
	put(x, "\n", 1);
}

void expo_series_u64(struct expo *x, const char *name, size_t name_len, const char *labels,
		     size_t labels_len, uint64_t value)
{
	char digits[24], *d = u64_digits(value, digits + sizeof(digits));
	size_t n_digits = (size_t)(digits + sizeof(digits) - d);
	size_t n = name_len + labels_len + 1 + n_digits + 1;
	char *p = reserve(x, n);

	if (!p)
		return;
	memcpy(p, name, name_len);
	p += name_len;
	memcpy(p, labels, labels_len);
	p += labels_len;
	*p++ = ' ';
	memcpy(p, d, n_digits);
	p += n_digits;
	*p++ = '\n';
	*p = '\0';
	x->page.len += n;
}
