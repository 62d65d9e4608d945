// SPDX-License-Identifier: Apache-2.0
/* sync: what IMDS offers the uplink (node/sync.c), folded into the pool. */
#include <stdio.h>

#include "cli/cli.h"
#include "lib/cleanup.h"
#include "lib/ip4.h"
#include "lib/jsonx.h"

struct node_sync_source cli_sync_source(const struct cli *c, int budget_s)
{
	return (struct node_sync_source){ .uplink = c->uplink,
					  .imds_url = c->imds_url,
					  .from_file = c->from_file,
					  .exclude = c->exclude,
					  .budget_s = budget_s };
}

static json_object *sync_json(const struct cli *c, const struct node_sync_offer *offer,
			      const struct ipam_sync_report *rep)
{
	json_object *o = json_object_new_object();
	char ip[IP4_STRLEN], cidr[CIDR4_STRLEN];

	json_object_object_add(o, "network", json_object_new_string(c->network));
	json_object_object_add(o, "source", json_object_new_string("imds"));
	json_object_object_add(o, "uplink", json_object_new_string(offer->uplink));
	json_object_object_add(o, "nodeIp",
			       json_object_new_string(ip4_format(offer->net.node_ip, ip)));
	json_object_object_add(o, "subnet",
			       json_object_new_string(cidr4_format(&offer->net.subnet, cidr)));
	json_object_object_add(o, "seen", json_object_new_int64((int64_t)offer->n_addrs));
	json_object_object_add(o, "added", json_object_new_int64((int64_t)rep->added));
	json_object_object_add(o, "pending", json_object_new_int64((int64_t)rep->pending));
	json_object_object_add(o, "removed", json_object_new_int64((int64_t)rep->removed));
	json_object_object_add(o, "retired", json_object_new_int64((int64_t)rep->retired));
	json_object_object_add(o, "total", json_object_new_int64((int64_t)c->state.n_pool));
	json_object_object_add(o, "attempts", json_object_new_int(offer->attempts));
	json_object_object_add(o, "refused", json_object_new_int64((int64_t)offer->n_refused));
	return o;
}

static void sync_print(const struct cli *c, json_object *o)
{
	printf("synced %s from %s (uplink %s, node %s in %s)\n", jx_get_str(o, "network"),
	       c->from_file ? c->from_file : c->imds_url, jx_get_str(o, "uplink"),
	       jx_get_str(o, "nodeIp"), jx_get_str(o, "subnet"));
	printf("pool: %lld addresses; %lld added, %lld pending (join when seen again), "
	       "%lld removed (%lld still in use, retired)\n",
	       (long long)jx_get_int(o, "total"), (long long)jx_get_int(o, "added"),
	       (long long)jx_get_int(o, "pending"), (long long)jx_get_int(o, "removed"),
	       (long long)jx_get_int(o, "retired"));
}

int sync_main(struct cli *c)
{
	_cleanup_json_ json_object *o = NULL;
	struct node_sync_source src = cli_sync_source(c, c->retry_budget_s);
	struct node_sync_offer offer;
	struct ipam_sync_report rep;
	struct tg_err e = { 0 };

	/* IMDS is read before the lock: a slow or retried fetch never holds up the plugin. */
	if (node_imds_offer(&src, &offer, &e) < 0) {
		fprintf(stderr, "tollgate-ipam: %s; the store is unchanged\n", e.msg);
		return EXIT_PROBLEMS;
	}
	if (node_sync(&c->store, &c->state, &offer, &rep, &e) < 0) {
		node_imds_offer_free(&offer);
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
		return EXIT_PROBLEMS;
	}
	if (offer.n_refused) {
		char ip[IP4_STRLEN];

		fprintf(stderr,
			"tollgate-ipam: IMDS offered %zu address(es) no pod can have, left out of the "
			"pool (first: %s, %s)\n",
			offer.n_refused, ip4_format(offer.refused, ip), offer.refused_why);
	}
	o = sync_json(c, &offer, &rep);
	node_imds_offer_free(&offer);
	if (c->json)
		jx_print(stdout, o, JSON_C_TO_STRING_PRETTY);
	else
		sync_print(c, o);
	return 0;
}
