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
	uint32_t node_ip; /* the uplink's first address: the node's own */
	struct cidr4 subnet;
	uint32_t *addrs; /* the other addresses, sorted */
	size_t n_addrs;
};

#include <stdbool.h>

/* The largest network document taken (a bigger answer is refused). */
#define IMDS_BODY_MAX (1 << 20)
/* One request's limit: a stalled IMDS costs a try this much at most. */
#define IMDS_REQUEST_TIMEOUT_MS 5000
/* 410: IMDS is not ready yet after the VM started; Azure says to retry for up to 70 s. */
#define IMDS_GONE_RETRY_S 70

/* The network document's URL under base_url; 0 or -ENAMETOOLONG. */
int imds_url(const char *base_url, char *buf, size_t size);
/*
 * Whether an answer is worth asking again for (status 0: no answer at all,
 * a timeout or a refused connection): 429 (throttled: IMDS allows 5
 * requests a second per VM), 410 (not ready yet), 5xx. Anything else will
 * not get better by asking again.
 */
bool imds_retryable(long status);
/* Picks the interface whose MAC is `mac` out of an IMDS network document (the one parser). */
int imds_parse_network(const char *body, size_t len, const uint8_t mac[6], struct imds_network *ret,
		       struct tg_err *e);
void imds_network_free(struct imds_network *n);
/*
 * GETs the network document, retrying 429, 410, 5xx and timeouts with
 * exponential back-off (1 s doubling to 10 s, or Retry-After) for at most
 * budget_s seconds. Never more than one request a second. Blocking: for
 * tollgate-ipam; the node daemon asks with httpc/ from its loop.
 */
int imds_fetch(const char *base_url, int budget_s, char **ret_body, size_t *ret_len,
	       int *ret_attempts, struct tg_err *e);

#endif
