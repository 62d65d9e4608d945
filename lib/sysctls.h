/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_SYSCTLS_H
#define TG_LIB_SYSCTLS_H

/*
 * The sysctls a Tollgate node needs, as deploy/90-tollgate.conf sets them
 * at boot: most are floors (raised, never lowered), a few are pinned to one
 * value (set either way). The node declaration sets them where it can
 * write /proc/sys (node/declare.c), the agent says which ones stay off
 * where it cannot.
 */

#include <stdbool.h>
#include <stddef.h>

struct tg_sysctl_floor {
	const char *name; /* as sysctl(8) and 90-tollgate.conf write it */
	long min;	  /* the floor, or with `exact` the one value */
	/* Pinned to min: lowered when higher as well as raised when lower. */
	bool exact;
	/* What goes wrong while it is off (the agent's lack says it). */
	const char *why;
	/*
	 * Raised by the plugin on the host at the ADD that finds it low (the
	 * plugin's probe looks at it); else only by a declaration that can
	 * write /proc/sys.
	 */
	bool plugin_raises;
};

extern const struct tg_sysctl_floor tg_sysctl_floors[];
extern const size_t tg_sysctl_floors_n;

/* Whether v satisfies f: at or above its floor, or exactly its value. */
bool tg_sysctl_ok(const struct tg_sysctl_floor *f, long v);
/* Its file under proc_sys ("/proc/sys/net/ipv4/ip_forward"); 0 or -ENAMETOOLONG. */
int tg_sysctl_path(const char *proc_sys, const struct tg_sysctl_floor *f, char *buf, size_t size);
/*
 * The value under proc_sys ("/proc/sys"): 0, -ENOENT when this network
 * namespace has no such sysctl (the neighbour table's thresholds exist in
 * the host's first namespace only), or another negative errno.
 */
int tg_sysctl_read(const char *proc_sys, const struct tg_sysctl_floor *f, long *ret);

#endif
