/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_IPAM_POOL_H
#define TG_IPAM_POOL_H

/* Address lists: the config's ranges, CIDRs and single addresses; sorted arrays. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "lib/err.h"

/*
 * Expands "a-b" ranges, CIDRs and single addresses into a sorted unique array
 * and removes `exclude` (same syntax). A CIDR of /30 or wider loses its
 * network and broadcast addresses, as host-local does. Errors name
 * "<where>.addresses[i]".
 */
int ipam_pool_parse(json_object *addresses, json_object *exclude, const char *where,
		    uint32_t **ret_pool, size_t *ret_n, struct tg_err *e);
/* Writes the pool back as compact "a-b" ranges. */
json_object *ipam_pool_to_ranges(const uint32_t *pool, size_t n);

/* Sorted address arrays: membership (bsearch), and sorting in place. */
bool ipam_addr_in(const uint32_t *sorted, size_t n, uint32_t ip);
void ipam_addrs_sort(uint32_t *a, size_t n);

#endif
