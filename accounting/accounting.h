/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_ACCOUNTING_H
#define TG_ACCOUNTING_H

/*
 * The nftables table `inet tollgate`, owned wholly by Tollgate and changed
 * only in atomic batches (libnftnl + libmnl, never the nft binary):
 *
 *   set internal  { type ipv4_addr; flags interval; }   internalCIDRs
 *   set pods      { type ipv4_addr; }                   every pod address
 *   set masq      { type ipv4_addr; }                   pods whose config says masquerade
 *   chain postrouting { type nat hook postrouting priority srcnat;
 *       ip saddr @masq ip daddr != @internal masquerade }
 *
 * Per-pod objects are set elements, so the per-packet cost does not grow
 * with the number of pods.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"
#include "lib/ip4.h"

#define ACCT_TABLE "tollgate"
#define ACCT_MAX_INTERNAL 64

struct acct_config {
	const struct cidr4 *internal;	/* sorted, non-overlapping */
	size_t n_internal;
	bool masquerade;
};

/* Adds the pod's elements, creating the table first when it is missing. */
int acct_pod_add(const struct acct_config *cfg, uint32_t ip, struct tg_err *e);
/* Removes the pod's elements; elements or a table already gone are fine. */
int acct_pod_del(uint32_t ip, struct tg_err *e);
/* 1 when the pod's elements are as configured, 0 when not, negative on error. */
int acct_pod_check(uint32_t ip, bool masquerade, struct tg_err *e);

/* Every element of set `set` ("pods", "masq"); -ENOENT when the table or set is missing. */
int acct_list_set(const char *set, uint32_t **ret, size_t *ret_n, struct tg_err *e);

#endif
