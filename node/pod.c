// SPDX-License-Identifier: Apache-2.0
/*
 * One attachment's kernel objects: its routed veth (plumb.c), its tc classes
 * (shaper/) and its nftables elements (accounting/). Made in that order, so
 * that a pod is counted only once its path exists; undone in reverse.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "accounting/accounting.h"
#include "node/internal.h"
#include "shaper/shaper.h"

static struct acct_config acct_config_of(const struct node_config *cfg)
{
	return (struct acct_config){
		.internal = cfg->internal,
		.n_internal = cfg->n_internal,
		.masquerade = cfg->masquerade,
		.enabled = cfg->acct_enabled,
		.per_pod = cfg->acct_per_pod,
		.internet_mark = cfg->internet_mark,
		.inet_ingress_classid = SHAPER_INET_INGRESS_CLASS,
	};
}

static struct acct_pod acct_pod_of(const struct ipam_attachment *a)
{
	return (struct acct_pod){
		.ip = a->ip,
		.k8s_namespace = a->k8s_namespace,
		.host_veth = a->host_veth,
		.egress_classid = shaper_egress_classid(&a->shaping),
	};
}

/* Every attachment of the store, for a table that must be declared again. */
static struct acct_pod *acct_pods_of(const struct ipam_state *st)
{
	struct acct_pod *all = calloc(st->n_att + 1, sizeof(*all));

	for (size_t i = 0; all && i < st->n_att; i++)
		all[i] = acct_pod_of(&st->att[i]);
	return all;
}

static void plumb_req_of(const struct node_pod *p, struct plumb_req *rq)
{
	memset(rq, 0, sizeof(*rq));
	rq->host_ifname = p->a->host_veth;
	rq->pod_ifname = p->a->ifname;
	rq->netns_fd = p->netns_fd;
	rq->ip = p->a->ip;
	rq->mtu = p->uplink ? p->uplink->mtu : 1500;
	node_pod_mac(p->a->container_id, p->a->ifname, rq->pod_mac);
}

/* Where internet traffic leaves: resolved once per call (node_uplink), 0 when unknown. */
static int uplink_ifindex(const struct node_uplink *up)
{
	return up ? up->ifindex : 0;
}

int node_pod_add(struct nl_sock *sk, const struct node_config *cfg, const struct node_pod *p,
		 const struct ipam_state *st, bool repeated, struct tg_err *e)
{
	const struct ipam_attachment *a = p->a;
	struct acct_config acct = acct_config_of(cfg);
	struct acct_pod me = acct_pod_of(a), *all = NULL;
	struct plumb_req rq;
	int r;

	plumb_req_of(p, &rq);
	r = plumb_enable_forwarding(e);
	if (r < 0)
		goto undo;
	r = plumb_add(sk, &rq, e);
	if (r < 0)
		goto undo;
	if (shaping_any(&a->shaping)) {
		r = shaper_pod_add(sk, a->host_veth, uplink_ifindex(p->uplink), &a->shaping,
				   cfg->internal, cfg->n_internal, cfg->shaping.queue_ms, rq.mtu,
				   e);
		if (r < 0)
			goto undo;
	}
	/* Every pod, for the rebuild of a table someone flushed. */
	all = acct_pods_of(st);
	r = all ? acct_pod_add(&acct, &me, all, st->n_att, e)
		: tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	free(all);
	if (r == 0)
		return 0;
undo:
	/* Put the node back as it was: what this call made goes, in reverse. */
	if (!repeated)
		acct_pod_del(&me, NULL);
	shaper_pod_del(sk, a->host_veth, &a->shaping, NULL);
	plumb_del(sk, a->host_veth, NULL);
	return r;
}

bool node_pod_intact(struct nl_sock *sk, const struct node_config *cfg, const struct node_pod *p)
{
	struct acct_pod me = acct_pod_of(p->a);
	struct plumb_req rq;

	plumb_req_of(p, &rq);
	return plumb_check(sk, &rq, NULL) == 0 && acct_pod_check(&me, cfg->masquerade, NULL) == 1 &&
	       shaper_pod_check(sk, p->a->host_veth, &p->a->shaping, NULL) == 0;
}

int node_pod_check(struct nl_sock *sk, const struct node_config *cfg, const struct node_pod *p,
		   struct tg_err *e)
{
	struct acct_pod me = acct_pod_of(p->a);
	struct plumb_req rq;
	char ip[IP4_STRLEN];
	int r;

	plumb_req_of(p, &rq);
	r = plumb_check(sk, &rq, e);
	if (r == 0)
		r = shaper_pod_check(sk, p->a->host_veth, &p->a->shaping, e);
	if (r < 0)
		return r;
	r = acct_pod_check(&me, cfg->masquerade, e);
	if (r == 0)
		r = tg_fail(e, TG_ERR_DRIFT, -ENOENT,
			    "drift: the elements of %s in table inet tollgate (sets pods, masq, "
			    "map ns_egress_internal) do not match the config (masquerade %s)",
			    ip4_format(p->a->ip, ip), cfg->masquerade ? "true" : "false");
	return r < 0 ? r : 0;
}

int node_pod_del(struct nl_sock *sk, const struct ipam_attachment *a, struct tg_err *e)
{
	struct acct_pod me = acct_pod_of(a);
	int first = 0, r;

	if (a->ip)
		first = acct_pod_del(&me, e);
	/* The IFB goes even without a record; uplink classes need the record's ids. */
	r = shaper_pod_del(sk, a->host_veth, &a->shaping, e);
	if (r < 0 && !first)
		first = r;
	r = plumb_del(sk, a->host_veth, e);
	return first ? first : r;
}

int node_pod_reshape(struct nl_sock *sk, const struct node_config *cfg,
		     const struct node_uplink *up, const struct ipam_attachment *a,
		     const struct shaping *old, struct tg_err *e)
{
	const struct shaping *now = &a->shaping;

	/* Old classes out, new ones in: a pod is unshaped for a few ms at most. */
	if (old->pod_class && old->pod_class != now->pod_class)
		shaper_pod_del(sk, a->host_veth, old, NULL);
	if (shaper_pod_reset(sk, a->host_veth, e) < 0)
		return -EIO;
	if (!now->egress_bps && shaper_pod_del(sk, a->host_veth, NULL, e) < 0)
		return -EIO;
	if (!shaping_any(now))
		return 0;
	return shaper_pod_add(sk, a->host_veth, uplink_ifindex(up), now, cfg->internal,
			      cfg->n_internal, cfg->shaping.queue_ms, up ? up->mtu : 1500, e);
}

int node_table_rebuild(const struct node_config *cfg, const struct ipam_state *st, struct tg_err *e)
{
	struct acct_config acct = acct_config_of(cfg);
	struct acct_pod *all = acct_pods_of(st);
	int r;

	if (!all)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	r = acct_rebuild(&acct, all, st->n_att, e);
	free(all);
	return r;
}
