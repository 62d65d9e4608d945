/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_LOG_H
#define TG_LIB_LOG_H

/*
 * The daemons' log: logfmt on stderr, one record per line, written at
 * once, in one format for every Tollgate daemon (a collector parses the
 * agent's and the allocator's the same way):
 *
 *   2026-11-29T08:10:37.274Z level=warn msg="node-wide state repaired" objects=2
 *
 * Written by a daemon's own layer only (its setup and loop); the modules
 * below return what they have to say.
 */

enum tg_log_level { TG_LOG_ERROR, TG_LOG_WARN, TG_LOG_INFO };

/* --log-level's value: error, warn or info; -EINVAL for anything else. */
int tg_log_level_parse(const char *s, enum tg_log_level *ret);
/* Records above lvl are dropped (info by default). */
void tg_log_set_level(enum tg_log_level lvl);
/* fmt: the record's fields (msg="..." first); the timestamp and level= come first. */
void tg_log(enum tg_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
