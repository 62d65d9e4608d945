/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_SHAPING_H
#define TG_LIB_SHAPING_H

/*
 * One pod's shaping: what its request asked for and the caps it got. The
 * store keeps it with the attachment (so DEL, CHECK and reshape need no
 * config) and shaper/ applies it: one record for both, never converted.
 * Rates are bits per second, bursts bits; 0 means "none".
 */

#include <stdbool.h>
#include <stdint.h>

struct shaping {
	/* runtimeConfig.bandwidth (kubelet's annotations): all of the pod's traffic */
	uint64_t ingress_bps, ingress_burst;
	uint64_t egress_bps, egress_burst;
	/* tollgate.io/internet-{egress,ingress}-bandwidth pod annotations */
	uint64_t annot_inet_egress, annot_inet_ingress;
	/* the internet caps the policy resolved to */
	uint64_t inet_ingress_bps;	/* internet -> pod */
	uint64_t inet_egress_bps;	/* pod -> internet */
	uint64_t ns_egress_bps;		/* its namespace's internet egress cap */
	uint64_t node_egress_bps;	/* the node's internet egress cap */
	uint16_t ns_class, pod_class;	/* uplink HTB minors, 0 when unused */
};

static inline bool shaping_pod_ingress(const struct shaping *s)
{
	return s->ingress_bps || s->inet_ingress_bps;
}

static inline bool shaping_inet_egress(const struct shaping *s)
{
	return s->inet_egress_bps || s->ns_egress_bps || s->node_egress_bps;
}

static inline bool shaping_any(const struct shaping *s)
{
	return shaping_pod_ingress(s) || s->egress_bps || shaping_inet_egress(s);
}

#endif
