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
 * And the plugin's cheap signal that the pool ran out: an ADD that found no
 * free address touches <dataDir>/<network>/pool-exhausted; the agent watches
 * the directory and syncs soon.
 */

#include <stdint.h>

#include "lib/cnispec.h"

/* Commands counted: every one but VERSION, which changes nothing. */
#define CNIOPS_CMDS CNI_CMD_VERSION
/* Result codes counted one by one: 0 (success), the CNI codes 1-11, 50, 100; the rest as one. */
#define CNIOPS_CODES 15
#define CNIOPS_FILE "cni-ops"
#define CNIOPS_EXHAUSTED_FILE "pool-exhausted"

struct cniops_counts {
	uint64_t n[CNIOPS_CMDS][CNIOPS_CODES];
};

/* The code a slot counts ("other" for the last). */
const char *cniops_code_name(unsigned slot, char buf[8]);
unsigned cniops_code_slot(int code);
/*
 * Counts one operation in dir's file (created when missing); best effort.
 * A command that is not counted (VERSION) is ignored.
 */
void cniops_record(const char *dir, enum cni_cmd cmd, int code);
/* Reads dir's counters; -ENOENT when no operation was counted yet. */
int cniops_read(const char *dir, struct cniops_counts *ret);
/* Touches dir's pool-exhausted file; best effort. */
void cniops_signal_exhausted(const char *dir);

#endif
