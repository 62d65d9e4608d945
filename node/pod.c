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
#include "lib/failpoint.h"
#include "lib/steps.h"
#include "lib/ip4.h"
#include "lib/util.h"
#include "node/conntrack.h"
#include "node/internal.h"
#include "shaper/shaper.h"

static void plumb_req_of(const struct node_pod *p, struct plumb_req *rq)
{
	memset(rq, 0, sizeof(*rq));
	rq->host_ifname = p->a->host_veth;
	rq->pod_ifname = p->a->ifname;
	rq->netns_fd = p->netns_fd;
	rq->pod_sk = p->pod_sk;
	rq->ip = p->a->ip;
	rq->mtu = p->uplink ? p->uplink->mtu : 1500;
	rq->group = node_link_group(p->a);
	node_pod_mac(p->a->container_id, p->a->ifname, rq->pod_mac);
}

int node_pod_add(struct nl_sock *sk, const struct node_config *cfg, const struct node_pod *p,
		 const struct ipam_state *st, bool repeated, struct tg_err *e)
{
	const struct ipam_attachment *a = p->a;
	struct acct_config acct = node_acct_config(cfg);
	struct acct_pod me = node_acct_pod(a);
	unsigned inet = node_inet_needs(&a->shaping);
	struct plumb_req rq;
	int r, inet_ifb = 0;
	int64_t t;

	/* Node-wide state: read, and written only when missing (first pod, or flushed). */
	plumb_req_of(p, &rq);
	r = node_ensure(sk, cfg, p->uplink, st, inet, &inet_ifb, e);
	if (r == 0)
		r = TG_FAILPOINT("add.node.after", e);
	if (r < 0)
		goto undo; /* a declaration may have restored this pod's class already */
	r = plumb_add(sk, &rq, e);
	if (r < 0)
		goto undo;
	if (shaping_any(&a->shaping)) {
		t = time_mono_ns();
		r = shaper_pod_add(sk, a->host_veth, inet_ifb, rq.group, &a->shaping,
				   cfg->shaping.queue_ms, rq.mtu, e);
		step_done(STEP_TC, t);
		if (r == 0)
			r = TG_FAILPOINT("add.tc.after", e);
		if (r < 0)
			goto undo;
	}
	t = time_mono_ns();
	r = acct_pod_add(&acct, &me, e);
	if (r == -ENOENT) {
		/* The table went away since the probe: declare it again, then retry once. */
		memset(e, 0, sizeof(*e));
		r = node_ensure(sk, cfg, p->uplink, st, inet, &inet_ifb, e);
		if (r == 0)
			r = acct_pod_add(&acct, &me, e);
	}
	step_done(STEP_NFT, t);
	if (r == 0)
		r = TG_FAILPOINT("add.nft.after", e);
	/*
	 * A UDP or SCTP hostPort now mapped: a flow to the node's port older
	 * than the mapping (a client that kept sending while nothing listened)
	 * would carry the client past it, to the node, for as long as it sends.
	 */
	if (r == 0) {
		r = node_ct_forget(0, &a->ports);
		if (r < 0)
			tg_fail(e, CNI_ERR_IO, r,
				"cannot delete the conntrack entries of the pod's UDP/SCTP hostPorts: %s",
				strerror(-r));
		r = r < 0 ? r : 0;
	}
	if (r == 0)
		return 0;
undo:
	/* Put the node back as it was: what this call made goes, in reverse. */
	if (!repeated)
		acct_pod_del(&me, NULL, NULL, NULL);
	shaper_pod_del(sk, a->host_veth, &a->shaping, NULL);
	plumb_del(sk, a->host_veth, NULL);
	return r;
}

bool node_pod_intact(struct nl_sock *sk, const struct node_config *cfg, const struct node_pod *p)
{
	struct acct_config acct = node_acct_config(cfg);
	struct acct_pod me = node_acct_pod(p->a);
	struct plumb_req rq;

	plumb_req_of(p, &rq);
	return plumb_check(sk, &rq, NULL) == 0 && acct_pod_check(&me, &acct, NULL) == 1 &&
	       shaper_pod_check(sk, p->a->host_veth, &p->a->shaping, NULL) == 0;
}

int node_pod_check(struct nl_sock *sk, const struct node_config *cfg, const struct node_pod *p,
		   struct tg_err *e)
{
	struct acct_config acct = node_acct_config(cfg);
	struct acct_pod me = node_acct_pod(p->a);
	struct plumb_req rq;
	char ip[IP4_STRLEN];
	int r;

	plumb_req_of(p, &rq);
	r = plumb_check(sk, &rq, e);
	if (r == 0)
		r = shaper_pod_check(sk, p->a->host_veth, &p->a->shaping, e);
	if (r < 0)
		return r;
	r = acct_pod_check(&me, &acct, e);
	if (r == 0)
		r = tg_fail(
			e, TG_ERR_DRIFT, -ENOENT,
			"drift: the elements of %s in table inet tollgate (sets pods, masq, "
			"pod_src, metadata_ok, agent_ok, maps ns_egress_internal, ingress_class, "
			"metadata_drop, agent_drop, hostport, hostport_ip) do not match the config (masquerade "
			"%s, nodeAccess) or the pod's hostPorts",
			ip4_format(p->a->ip, ip), cfg->masquerade ? "true" : "false");
	return r < 0 ? r : 0;
}

int node_pod_del(struct nl_sock *sk, const struct ipam_attachment *a, struct tg_err *warn,
		 struct tg_err *e)
{
	struct acct_pod me = node_acct_pod(a);
	struct acct_conn *held = NULL;
	int64_t t = time_mono_ns();
	bool together;
	int first = 0, r;

	first = TG_FAILPOINT("del.nft.before", e);
	if (a->ip && first == 0)
		first = acct_pod_del(&me, &held, warn, e);
	if (first == 0)
		first = TG_FAILPOINT("del.nft.after", e);
	t = step_done(STEP_NFT, t);
	/*
	 * A pod with its own IFB has two devices, and each deletion waits out
	 * the kernel's RCU grace periods (~17-20 ms): one request for its link
	 * group retires both in one batch, with one set of waits.
	 */
	together = a->ip && a->shaping.egress_bps && plumb_del_group(sk, node_link_group(a)) == 0;
	t = step_done(STEP_VETH, t);
	/* The IFB goes even without a record; classes on tollgate-inet need the record's ids. */
	r = TG_FAILPOINT("del.tc.before", e);
	if (r == 0)
		r = shaper_pod_del(sk, a->host_veth, &a->shaping, e);
	if (r == 0)
		r = TG_FAILPOINT("del.tc.after", e);
	if (r < 0 && !first)
		first = r;
	t = step_done(STEP_TC, t);
	r = TG_FAILPOINT("del.veth.before", e);
	if (r == 0)
		r = together ? 0 : plumb_del(sk, a->host_veth, e);
	if (r == 0)
		r = TG_FAILPOINT("del.veth.after", e);
	t = step_done(STEP_VETH, t);
	/* After the veth's own RCU waits, the nftables socket closes without one more. */
	acct_conn_close(held);
	step_done(STEP_NFT, t);
	return first ? first : r;
}

int node_pod_forget(const struct ipam_attachment *a, struct acct_conn **keep, struct tg_err *warn,
		    struct tg_err *e)
{
	struct acct_pod me = node_acct_pod(a);
	char ip[IP4_STRLEN];
	int r = a->ip ? acct_pod_del(&me, keep, warn, e) : 0;

	if (r < 0)
		return r;
	/*
	 * The address's flows, after its elements (no new flow can be DNAT'd
	 * to it now): whatever a peer keeps sending would reach the next
	 * owner through them, and be billed to it. Not a reason to keep the
	 * address: the caller reports it.
	 */
	r = node_ct_forget(a->ip, &a->ports);
	if (r < 0 && warn)
		tg_fail(warn, CNI_ERR_IO, r, "the conntrack entries of %s are left: %s",
			ip4_format(a->ip, ip), strerror(-r));
	return 0;
}

int node_pod_unmap(const struct ipam_attachment *a, const struct hostports *old, struct tg_err *e)
{
	struct hostports gone = { 0 };
	int r;

	for (size_t i = 0; i < old->n; i++)
		if (!hostports_have(&a->ports, &old->m[i]))
			gone.m[gone.n++] = old->m[i];
	if (!gone.n)
		return 0;
	r = acct_hostports_del(&gone, e);
	/* Best effort: the port's next mapping deletes what is left (node_pod_add). */
	if (r == 0)
		node_ct_forget(0, &gone);
	return r;
}

void node_conn_close(struct acct_conn *held)
{
	acct_conn_close(held);
}

int node_pod_reshape(struct nl_sock *sk, const struct node_config *cfg,
		     const struct node_uplink *up, const struct ipam_attachment *a,
		     const struct shaping *old, struct tg_err *e)
{
	const struct shaping *now = &a->shaping;

	/*
	 * Make before break (shaper_pod_change): the new caps go over the old
	 * classes in place, and what they no longer have goes last, so that
	 * at every moment the pod is shaped by its old caps or its new ones.
	 */
	if (TG_FAILPOINT("reshape.pod.before", e) < 0)
		return -EIO;
	if (shaping_inet_egress(now) || shaping_inet_ingress(now)) {
		int inet_ifb = 0;

		/* A policy may shape internet traffic for the first time: the path first. */
		if (node_ensure(sk, cfg, up, NULL, node_inet_needs(now), &inet_ifb, e) < 0)
			return -EIO;
	}
	if (TG_FAILPOINT("reshape.pod.tc.before", e) < 0)
		return -EIO;
	if (shaper_pod_change(sk, a->host_veth, node_link_group(a), old, now, cfg->shaping.queue_ms,
			      up ? up->mtu : 1500, SHAPER_MAKE, e) < 0)
		return -EIO;
	/*
	 * A download class that moves (from the veth's own to tollgate-inetdl,
	 * or between classes) moves with the pod's element of @ingress_class:
	 * in place before the old class goes.
	 */
	if (shaper_ingress_classid(old) != shaper_ingress_classid(now)) {
		struct acct_pod me = node_acct_pod(a);

		if (acct_pod_ingress_class(&me, e) < 0)
			return -EIO;
	}
	return shaper_pod_change(sk, a->host_veth, node_link_group(a), old, now,
				 cfg->shaping.queue_ms, up ? up->mtu : 1500, SHAPER_BREAK, e) < 0
		       ? -EIO
		       : 0;
}
