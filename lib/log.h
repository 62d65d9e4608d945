/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_LOG_H
#define TG_LIB_LOG_H

/*
 * The daemons' log records: logfmt on stderr, one line each, written at
 * once, in one format for every Tollgate daemon (a collector parses the
 * agent's and the allocator's the same way):
 *
 *   2026-11-29T08:10:37.274Z level=warn msg="node-wide state repaired" objects=2
 */

#include <stdarg.h>

/* One record: the timestamp, level=<level>, then the fields fmt makes. */
void log_record(const char *level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#endif
