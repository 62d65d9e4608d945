/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_BUF_H
#define TG_LIB_BUF_H

#include <stdbool.h>
#include <stddef.h>

/*
 * A growable byte buffer, always NUL-terminated once written to: the
 * metrics page, the wire format's documents, an HTTP answer, a file read
 * whole. The capacity doubles from `first`; past `max` (or out of memory)
 * the buffer fails, and every later write is dropped, so a writer checks
 * once at the end. Zero-initialised, it is empty, unbounded and starts at
 * 512 bytes.
 */
struct buf {
	char *p;
	size_t len, cap;
	size_t max;   /* the most it may hold, its NUL included; 0: no bound */
	size_t first; /* the first allocation; 0: 512 */
	bool failed;  /* past max, or out of memory */
	bool too_big; /* ... past max */
};

/* Room for n more bytes and a NUL after them (at p + len); NULL once failed. */
char *buf_reserve(struct buf *b, size_t n);
void buf_add(struct buf *b, const void *s, size_t n);
void buf_puts(struct buf *b, const char *s);
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Empty again, keeping the memory. */
void buf_reset(struct buf *b);
/*
 * Hands the bytes over (the caller frees them; NULL when nothing was
 * written) and leaves b empty, with max and first as they were.
 */
char *buf_take(struct buf *b, size_t *ret_len);
void buf_free(struct buf *b);

#endif
