/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_IPAM_IMDS_H
#define TG_IPAM_IMDS_H

/*
 * The pool from Azure IMDS (GET /metadata/instance/network, header
 * Metadata: true). Only tollgate-ipam and the agent link it (libcurl); the
 * plugin never makes a network call.
 */

#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"
#include "lib/ip4.h"

struct imds_network {
	uint32_t node_ip;		/* the uplink's first address: the node's own */
	struct cidr4 subnet;
	uint32_t *addrs;		/* the other addresses, sorted */
	size_t n_addrs;
};

/* Picks the interface whose MAC is `mac` out of an IMDS network document. */
int imds_parse_network(const char *body, size_t len, const uint8_t mac[6],
		       struct imds_network *ret, struct tg_err *e);
void imds_network_free(struct imds_network *n);
/*
 * GETs the network document, retrying 429, 410, 5xx and timeouts with
 * exponential back-off (1 s doubling to 10 s, or Retry-After) for at most
 * budget_s seconds. Never more than one request a second.
 */
int imds_fetch(const char *base_url, int budget_s, char **ret_body, size_t *ret_len,
	       int *ret_attempts, struct tg_err *e);

#endif
