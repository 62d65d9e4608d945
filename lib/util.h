/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_UTIL_H
#define TG_LIB_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The number of elements of an array (an array, not a pointer to one). */
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

int64_t time_now_ms(void); /* wall clock, for records that outlive the process */
/*
 * CLOCK_BOOTTIME: never stepped, counts suspend, starts at boot. For the
 * store's cool-downs: valid within one boot, as every record in the store is.
 */
int64_t time_boot_ms(void);
int64_t time_mono_ns(void); /* for durations */
int64_t time_mono_ms(void); /* for deadlines and schedules */
/*
 * Exponential back-off: first_ms after the first failure, doubled for each
 * one after it, never over max_ms (failures: those before this one).
 */
int64_t backoff_ms(int64_t first_ms, int64_t max_ms, unsigned failures);
uint64_t hash_fnv1a64(const void *data, size_t len, uint64_t seed);
#define FNV1A64_INIT 0xcbf29ce484222325ULL
/*
 * Room for one more element in a growing array: `arrp` points at the array
 * pointer, which holds n elements of elem bytes in *cap. The capacity
 * doubles (starting at first). False when out of memory; the array is then
 * as it was.
 */
bool array_grow(void *arrp, size_t *cap, size_t n, size_t elem, size_t first);
/* Strict name check: [A-Za-z0-9][A-Za-z0-9_.-]* up to max bytes. */
bool name_is_safe(const char *s, size_t max);
/*
 * Reads f to its end into a NUL-terminated buffer the caller frees; -E2BIG
 * when it holds more than max bytes.
 */
int read_stream(FILE *f, size_t max, char **ret, size_t *ret_len);
/* read_stream of a whole file (opened O_CLOEXEC); a negative errno when it cannot be read. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len);
/* read_file, opened with open(2)'s flags added (O_NOFOLLOW: a symlink is refused, -ELOOP). */
int read_file_flags(const char *path, int flags, size_t max, char **ret, size_t *ret_len);
/*
 * A logfmt value: src in double quotes, `"` and `\` escaped, control
 * characters as blanks (one record stays on one line), cut to fit dst
 * (always NUL-terminated when size >= 3). Returns dst.
 */
const char *logfmt_quote(char *dst, size_t size, const char *src);
/* logfmt_quote into a buffer that lives as long as the enclosing block. */
#define LOGFMT_QUOTE_MAX 1100
#define LOGFMT_Q(src) logfmt_quote((char[LOGFMT_QUOTE_MAX]){ 0 }, LOGFMT_QUOTE_MAX, (src))
/* write(2) until every byte is written (or a negative errno). */
int write_all(int fd, const void *buf, size_t n);
/* Reads a small text file (one line), trimmed. */
int read_line_file(const char *path, char *buf, size_t size);
/* mkdir -p with the given mode for each created component. */
int mkdir_p(const char *path, unsigned mode);

#endif
