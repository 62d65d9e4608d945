// SPDX-License-Identifier: Apache-2.0
/* Prometheus text exposition format 0.0.4, written into one bounded buffer. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter/exporter.h"

void expo_init(struct expo *x, size_t max)
{
	memset(x, 0, sizeof(*x));
	x->max = max;
}

void expo_free(struct expo *x)
{
	free(x->buf);
	memset(x, 0, sizeof(*x));
}

void expo_reset(struct expo *x)
{
	x->len = 0;
	x->overflow = false;
	if (x->buf)
		x->buf[0] = '\0';
}

static void put(struct expo *x, const char *s, size_t n)
{
	if (x->overflow)
		return;
	if (x->len + n + 1 > x->cap) {
		size_t cap = x->cap ? x->cap : 4096;
		char *grown;

		while (cap < x->len + n + 1)
			cap *= 2;
		if (cap > x->max)
			cap = x->max;
		if (x->len + n + 1 > cap || !(grown = realloc(x->buf, cap))) {
			x->overflow = true;
			return;
		}
		x->buf = grown;
		x->cap = cap;
	}
	memcpy(x->buf + x->len, s, n);
	x->len += n;
	x->buf[x->len] = '\0';
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

static void put_name_labels(struct expo *x, const char *name, const char *const *labels)
{
	puts_(x, name);
	if (labels && labels[0]) {
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
	put_name_labels(x, name, labels);
	printf_(x, "%" PRIu64, value);
	put(x, "\n", 1);
}
