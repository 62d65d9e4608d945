/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_SHAPER_INTERNAL_H
#define TG_SHAPER_INTERNAL_H

#include <stdint.h>

#include "shaper/shaper.h"

/* A tc handle major:minor (1:1 is H(1, 1)). */
#define H(maj, min) (((uint32_t)(maj) << 16) | (uint32_t)(min))

/*
 * The ceilings a pod's shaping gives its classes, bits/s: worked out once
 * (layout.c), so that the classes shaper_pod_add makes and the ones CHECK,
 * `show` and the exporter expect can never disagree. Each cap nests in the
 * one above it; "none" is SHAPER_LINE_BPS.
 */
struct shaper_ceilings {
	uint64_t to_pod;      /* host veth 1:1: all traffic to the pod */
	uint64_t to_pod_inet; /* host veth 1:2: internet -> pod */
	uint64_t node;	      /* tollgate-inet 1:1 */
	uint64_t ns;	      /* tollgate-inet 1:<ns> */
	uint64_t pod_inet;    /* tollgate-inet 1:<pod>: pod -> internet */
};
void shaper_ceilings(const struct shaping *s, struct shaper_ceilings *ret);

/* ---- tc helpers shared by the pod's objects (tc.c) and the node's (node.c) ---- */
struct nl_sock;
struct rtnl_class;
/* ifindex of a device ("" or NULL: the default route's), 0 when missing. */
int tc_ifindex(struct nl_sock *sk, const char *name);
int tc_put_class(struct nl_sock *sk, int ifindex, uint32_t parent, uint32_t id,
		 uint64_t rate_bps, uint64_t ceil_bps, uint64_t burst_bits, int mtu);
int tc_put_class_flags(struct nl_sock *sk, int ifindex, uint32_t parent, uint32_t id,
		       uint64_t rate_bps, uint64_t ceil_bps, uint64_t burst_bits, int mtu,
		       int flags);
int tc_put_htb_root(struct nl_sock *sk, int ifindex, uint32_t defcls);
int tc_put_leaf_queue(struct nl_sock *sk, int ifindex, uint32_t classid, uint64_t ceil_bps,
		      uint32_t queue_ms, int mtu);
/* An IFB, up; group: its link group (0: the default). */
int tc_ensure_ifb(struct nl_sock *sk, const char *name, int mtu, uint32_t group,
		  int *ret_ifindex);
int tc_del_class(struct nl_sock *sk, int ifindex, uint32_t id);
int tc_del_qdisc(struct nl_sock *sk, int ifindex, uint32_t parent);
/* One terminal u32 node: a destination match (mask 0: every packet), passed or redirected. */
struct tc_u32 {
	int ifindex;
	uint32_t parent, handle;	/* handle 0: the kernel numbers it */
	uint16_t prio, protocol;
	uint32_t val, mask;		/* host order */
	int off;			/* of the match in the IP header */
	int redirect;			/* mirred egress redirect to this ifindex; 0: pass */
};
int tc_put_u32(struct nl_sock *sk, const struct tc_u32 *f, int flags);
void tc_fill_stats(struct rtnl_class *c, struct shaper_stats *st);

#endif
