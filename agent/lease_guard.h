/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_AGENT_LEASE_GUARD_H
#define TG_AGENT_LEASE_GUARD_H

/*
 * A budget's lease ends in the kernel on time, whatever the agent's loop
 * is doing (a declaration of thousands of pods, a GC, a slow disk): a
 * thread of its own, with its own netlink socket, sleeps until the
 * earliest lease ends (CLOCK_BOOTTIME, an absolute timer: a stopped agent
 * that resumes lowers at once) and puts that namespace class's ceil at
 * what a lease that ran out leaves. The loop hands it the leases after
 * every answer and period; it does the same lowering itself when it gets
 * there, and reads the ceils back at every report, so a lowering that
 * crosses a renewal in flight lasts at most one period.
 */

#include <stddef.h>
#include <stdint.h>

#include "budget/budget.h"

struct lease_guard_entry {
	uint16_t ns_class;   /* on its direction's IFB */
	enum budget_dir dir; /* egress: tollgate-inet; ingress: tollgate-inetdl */
	int64_t until_ms;    /* CLOCK_BOOTTIME */
	uint64_t after;	     /* bytes/s: the ceil once it ran out */
};

struct lease_guard;

/* The thread started (mtu: for the class's burst). 0 or a negative errno. */
int lease_guard_start(struct lease_guard **ret, int mtu);
/* The leases that run now, replacing the last ones (at most LEASE_GUARD_MAX). */
#define LEASE_GUARD_MAX BUDGET_PER_REPORT_MAX
void lease_guard_set(struct lease_guard *g, const struct lease_guard_entry *e, size_t n);
/* Leases it ended, and lowerings that failed (for the metrics). */
void lease_guard_counts(struct lease_guard *g, uint64_t *ret_fired, uint64_t *ret_failed);
/* Stops the thread and frees it (NULL: nothing). */
void lease_guard_stop(struct lease_guard *g);

#endif
