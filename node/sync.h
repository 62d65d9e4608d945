/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_NODE_SYNC_H
#define TG_NODE_SYNC_H

/*
 * The pool from IMDS (node/sync.c, linked with the IMDS client into the
 * node daemon and tollgate-ipam only: the plugin makes no network call).
 */

#include "ipam/imds.h"
#include "node/node.h"

struct node_sync_source {
	const char *uplink; /* NULL or "": the default route's interface */
	const char *imds_url;
	const char *from_file; /* a saved network document instead of IMDS */
	json_object *exclude;  /* ipam.exclude: never pool addresses */
	int budget_s;	       /* IMDS retries within this many seconds */
};
/* What IMDS offers: the uplink's secondary addresses without the node's own and ipam.exclude. */
struct node_sync_offer {
	struct imds_network net; /* with the node's address and subnet */
	char uplink[IFNAMSIZ];
	uint32_t *addrs; /* sorted */
	size_t n_addrs;
	size_t n_refused; /* offered but no pod's: outside the subnet, the node's, unusable */
	uint32_t refused; /* the first of them */
	const char *refused_why;
	int attempts; /* IMDS requests made */
};
/* The document from src (a file, or IMDS asked with the blocking client), then its offer. */
int node_imds_offer(const struct node_sync_source *src, struct node_sync_offer *ret,
		    struct tg_err *e);
/* The offer of a network document already fetched (the node daemon's loop fetches it). */
int node_imds_offer_from(const struct node_sync_source *src, const char *body, size_t len,
			 struct node_sync_offer *ret, struct tg_err *e);
void node_imds_offer_free(struct node_sync_offer *o);
/* Folds an offer into the pool (ipam_reconcile) under the store's lock; always saved. */
int node_sync(struct ipam_store *store, struct ipam_state *st, const struct node_sync_offer *o,
	      struct ipam_sync_report *ret, struct tg_err *e);

#endif
