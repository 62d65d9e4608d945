/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_EXPORTER_INTERNAL_H
#define TG_EXPORTER_INTERNAL_H

/* Between the exporter's collectors; not part of its public face. */

#include <stddef.h>
#include <stdint.h>

#include "exporter/exporter.h"
#include "ipam/ipam.h"

/* The shaper collector (tc.c): the HTB classes Tollgate made for the store's pods. */
struct tc_collector;
struct tc_collector *tc_collector_new(void);
void tc_collector_free(struct tc_collector *tc);
/*
 * Reads the classes of every shaped pod, its namespace and the node, and
 * renders the tollgate_shaper_* families. `store` changes whenever st was
 * loaded again. Returns 0, or a negative errno with nothing rendered.
 */
int tc_collect(struct tc_collector *tc, const struct ipam_state *st, uint64_t store,
	       struct expo *x);

/*
 * The internet guard's gauge (conntrack.c): counts[ns] gets the connections
 * to internet destinations (outside set `internal`) that the pods of index
 * `ns` hold, from one conntrack dump. pods is sorted in place. 0 or a
 * negative errno.
 */
struct ct_pod {
	uint32_t ip;	/* first: the sort key */
	uint32_t ns;	/* < n_ns */
};
int ct_count_internet(struct ct_pod *pods, size_t n_pods, size_t n_ns, uint64_t *counts);

#endif
