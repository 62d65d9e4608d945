// SPDX-License-Identifier: Apache-2.0
/* sync, and the reading of what IMDS offers that doctor --imds shares with it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/netlink.h>

#include "cli/cli.h"
#include "ipam/pool.h"
#include "lib/cleanup.h"
#include "lib/ip4.h"
#include "lib/nl.h"
#include "lib/util.h"

/* The uplink (--uplink, the config's, else the default route's interface) and its MAC. */
static int uplink_of(const struct cli *c, struct node_uplink *ret, struct tg_err *e)
{
	const char *name = c->uplink ? c->uplink : "";
	struct nl_sock *sk = NULL;
	int r = nl_route_open(&sk);

	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot open a netlink socket: %s", strerror(-r));
	r = node_uplink(sk, name, 0, ret, e);
	nl_socket_free(sk);
	if (r == 0 && !ret->has_mac)
		r = tg_fail(e, CNI_ERR_IO, ret->ifindex ? -EADDRNOTAVAIL : -ENETUNREACH,
			    "cannot read the MAC of uplink %s: %s",
			    name[0] ? name : "(default route's interface)",
			    ret->ifindex ? "it has no MAC address" : "there is no default route");
	return r;
}

/* A whole file, NUL-terminated, of at most 4 MiB. */
static int read_file(const char *path, char **ret, size_t *ret_len)
{
	FILE *f = fopen(path, "re");
	int r;

	if (!f)
		return -errno;
	r = read_stream(f, 1 << 22, ret, ret_len);
	fclose(f);
	return r == -E2BIG ? -EFBIG : r;
}

/* The network document, from --from-file or from IMDS (retried within budget_s). */
static int imds_document(const struct cli *c, int budget_s, int *attempts, char **ret,
			 size_t *ret_len, struct tg_err *e)
{
	int r;

	if (!c->from_file)
		return imds_fetch(c->imds_url, budget_s, ret, ret_len, attempts, e);
	r = read_file(c->from_file, ret, ret_len);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot read %s: %s", c->from_file, strerror(-r));
	return 0;
}

/* The offered addresses ipam.exclude leaves (it applies to synced pools too), sorted. */
static int imds_keep(const struct cli *c, const struct imds_network *net, uint32_t **ret,
		     size_t *ret_n, struct tg_err *e)
{
	_cleanup_free_ uint32_t *excluded = NULL;
	size_t n_excluded = 0, n = 0;
	uint32_t *keep;
	int r;

	if (c->exclude &&
	    (r = ipam_pool_parse(c->exclude, NULL, "ipam", &excluded, &n_excluded, e)) < 0)
		return r;
	keep = calloc(net->n_addrs + 1, sizeof(*keep));
	if (!keep)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < net->n_addrs; i++)
		if (!ipam_addr_in(excluded, n_excluded, net->addrs[i]))
			keep[n++] = net->addrs[i];
	ipam_addrs_sort(keep, n);
	*ret = keep;
	*ret_n = n;
	return 0;
}

int imds_candidates(const struct cli *c, int budget_s, int *attempts, struct imds_network *net,
		    char upname[IFNAMSIZ], uint32_t **ret, size_t *ret_n, struct tg_err *e)
{
	_cleanup_free_ char *body = NULL;
	struct node_uplink up;
	size_t len = 0;
	int r;

	r = uplink_of(c, &up, e);
	if (r < 0)
		return r;
	memcpy(upname, up.name, IFNAMSIZ);
	r = imds_document(c, budget_s, attempts, &body, &len, e);
	if (r < 0)
		return r;
	r = imds_parse_network(body, len, up.mac, net, e);
	if (r == 0)
		r = imds_keep(c, net, ret, ret_n, e);
	if (r < 0)
		imds_network_free(net);
	return r;
}

/* ---- sync ---- */

struct sync_ctx {
	const uint32_t *seen;
	size_t n_seen;
	const struct imds_network *net;
	struct ipam_sync_report rep;
};

static int sync_update(struct ipam_state *st, void *ctx, struct tg_err *e)
{
	struct sync_ctx *s = ctx;
	int r = ipam_reconcile(st, s->seen, s->n_seen, time_now_ms(), &s->rep, e);

	if (r < 0)
		return r;
	st->node_ip = s->net->node_ip;
	st->subnet = s->net->subnet;
	return 1; /* saved every time: the store records when the pool was last synced */
}

static json_object *sync_json(const struct cli *c, const struct sync_ctx *s, const char *upname,
			      int attempts)
{
	json_object *o = json_object_new_object();
	char ip[IP4_STRLEN], cidr[CIDR4_STRLEN];

	json_object_object_add(o, "network", json_object_new_string(c->network));
	json_object_object_add(o, "source", json_object_new_string("imds"));
	json_object_object_add(o, "uplink", json_object_new_string(upname));
	json_object_object_add(o, "nodeIp",
			       json_object_new_string(ip4_format(s->net->node_ip, ip)));
	json_object_object_add(o, "subnet",
			       json_object_new_string(cidr4_format(&s->net->subnet, cidr)));
	json_object_object_add(o, "seen", json_object_new_int64((int64_t)s->n_seen));
	json_object_object_add(o, "added", json_object_new_int64((int64_t)s->rep.added));
	json_object_object_add(o, "pending", json_object_new_int64((int64_t)s->rep.pending));
	json_object_object_add(o, "removed", json_object_new_int64((int64_t)s->rep.removed));
	json_object_object_add(o, "retired", json_object_new_int64((int64_t)s->rep.retired));
	json_object_object_add(o, "total", json_object_new_int64((int64_t)c->state.n_pool));
	json_object_object_add(o, "attempts", json_object_new_int(attempts));
	return o;
}

static void sync_print(const struct cli *c, json_object *o)
{
	printf("synced %s from %s (uplink %s, node %s in %s)\n", jstr(o, "network"),
	       c->from_file ? c->from_file : c->imds_url, jstr(o, "uplink"), jstr(o, "nodeIp"),
	       jstr(o, "subnet"));
	printf("pool: %lld addresses; %lld added, %lld pending (join when seen again), "
	       "%lld removed (%lld still in use, retired)\n",
	       (long long)jnum(o, "total"), (long long)jnum(o, "added"),
	       (long long)jnum(o, "pending"), (long long)jnum(o, "removed"),
	       (long long)jnum(o, "retired"));
}

int sync_main(struct cli *c)
{
	_cleanup_free_ uint32_t *keep = NULL;
	_cleanup_json_ json_object *o = NULL;
	struct imds_network net = { 0 };
	struct sync_ctx s = { .net = &net };
	struct tg_err e = { 0 };
	char upname[IFNAMSIZ] = "";
	int attempts = 0;

	/* IMDS is read before the lock: a slow or retried fetch never holds up the plugin. */
	if (imds_candidates(c, c->retry_budget_s, &attempts, &net, upname, &keep, &s.n_seen, &e) <
	    0) {
		fprintf(stderr, "tollgate-ipam: %s; the store is unchanged\n", e.msg);
		return EXIT_PROBLEMS;
	}
	s.seen = keep;
	if (ipam_store_update(&c->store, &c->state, sync_update, &s, &e) < 0) {
		imds_network_free(&net);
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
		return EXIT_PROBLEMS;
	}
	o = sync_json(c, &s, upname, attempts);
	imds_network_free(&net);
	if (c->json)
		print_json(o);
	else
		sync_print(c, o);
	return 0;
}
