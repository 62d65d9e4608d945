// SPDX-License-Identifier: Apache-2.0
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"

char *buf_reserve(struct buf *b, size_t n)
{
	if (b->failed)
		return NULL;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : b->first ? b->first : 512;
		char *grown;

		while (cap < b->len + n + 1)
			cap *= 2;
		if (b->max && cap > b->max)
			cap = b->max;
		if (b->len + n + 1 > cap) {
			b->failed = b->too_big = true;
			return NULL;
		}
		grown = realloc(b->p, cap);
		if (!grown) {
			b->failed = true;
			return NULL;
		}
		b->p = grown;
		b->cap = cap;
	}
	return b->p + b->len;
}

void buf_add(struct buf *b, const void *s, size_t n)
{
	char *p = buf_reserve(b, n);

	if (!p)
		return;
	memcpy(p, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void buf_puts(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	char *p;
	int n;

	/* most writes fit in what is left, or in 128 more: one vsnprintf */
	p = buf_reserve(b, 128);
	if (!p)
		return;
	va_start(ap, fmt);
	n = vsnprintf(p, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = true;
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		p = buf_reserve(b, (size_t)n);
		if (!p) {
			b->p[b->len] = '\0';
			return;
		}
		va_start(ap, fmt);
		vsnprintf(p, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	b->failed = b->too_big = false;
	if (b->p)
		b->p[0] = '\0';
}

char *buf_take(struct buf *b, size_t *ret_len)
{
	char *p = b->p;

	if (ret_len)
		*ret_len = b->len;
	b->p = NULL;
	b->len = b->cap = 0;
	b->failed = b->too_big = false;
	return p;
}

void buf_free(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
	b->failed = b->too_big = false;
}
