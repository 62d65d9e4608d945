/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_SHAPER_INTERNAL_H
#define TG_SHAPER_INTERNAL_H

#include <stdint.h>

#include "shaper/shaper.h"

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

#endif
