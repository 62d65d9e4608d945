/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_CNIOPS_H
#define TG_LIB_CNIOPS_H

/*
 * CNI operations by command and result code, counted by the plugin where the
 * agent reads them: <dataDir>/<network>/cni-ops, a small file of counters the
 * plugin increments in place through a shared mapping (an atomic add: no
 * lock, no fsync, no log parsing; about 15 us an operation). On tmpfs it dies
 * with the boot like the store; the agent's series start over then.
 *
 * The file's layout only ever grows at its end, each part stamped on its own:
 * the counts (layout 1, the first 608 bytes, as every release wrote them),
 * then the durations (a histogram per command: fixed buckets and a sum). A
 * plugin of this release extends a file an older one made and counts into
 * both parts; an older plugin still counts into the first, which an older
 * agent still reads. A file with counts and no durations reads as counts
 * alone.
 *
 * And the plugin's cheap signal that the pool ran out: an ADD that found no
 * free address touches <dataDir>/<network>/pool-exhausted; the agent watches
 * the directory and syncs soon.
 */

#include <stdbool.h>
#include <stdint.h>

#include "lib/cnispec.h"

/* Commands counted: every one but VERSION, which changes nothing. */
#define CNIOPS_CMDS CNI_CMD_VERSION
/* Result codes counted one by one: 0 (success), the CNI codes 1-11, 50, 100; the rest as one. */
#define CNIOPS_CODES 15
/*
 * Duration buckets, by upper bound (a duration equal to a bound is in its
 * bucket, as Prometheus' `le` says): 5 ms to 10 s, then +Inf. An ADD takes
 * a few ms on a declared node; one that waits on the store's lock or on a
 * first declaration, tens to hundreds; kubelet gives up after minutes.
 */
#define CNIOPS_BUCKETS 12
extern const uint64_t cniops_bucket_ns[CNIOPS_BUCKETS - 1];
#define CNIOPS_FILE "cni-ops"
#define CNIOPS_EXHAUSTED_FILE "pool-exhausted"

struct cniops_counts {
	uint64_t n[CNIOPS_CMDS][CNIOPS_CODES];
	/* false: a file of an older plugin, counts alone (the rest is zero) */
	bool has_durations;
	/* per command: operations by bucket (not cumulative), and their durations' sum */
	uint64_t bucket[CNIOPS_CMDS][CNIOPS_BUCKETS];
	uint64_t sum_ns[CNIOPS_CMDS];
};

/* The code a slot counts ("other" for the last). */
const char *cniops_code_name(unsigned slot, char buf[8]);
unsigned cniops_code_slot(int code);
/* The bucket of a duration: the first whose bound it does not exceed, else the last (+Inf). */
unsigned cniops_bucket_slot(int64_t duration_ns);
/* A bucket's bound as Prometheus' `le` writes it ("0.005" ... "10", "+Inf"). */
const char *cniops_bucket_le(unsigned slot);
/*
 * Counts one operation that took duration_ns (a negative one counts as 0)
 * in dir's file (created, or extended, when needed); best effort. A command
 * that is not counted (VERSION) is ignored.
 */
void cniops_record(const char *dir, enum cni_cmd cmd, int code, int64_t duration_ns);
/* Reads dir's counters (all zero on failure); -ENOENT when no operation was counted yet. */
int cniops_read(const char *dir, struct cniops_counts *ret);
/* Touches dir's pool-exhausted file; best effort. */
void cniops_signal_exhausted(const char *dir);

#endif
