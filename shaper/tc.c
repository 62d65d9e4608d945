// SPDX-License-Identifier: Apache-2.0
/* The tc objects of shaper.h, through libnl-route-3. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/tc_act/tc_mirred.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <netlink/route/act/mirred.h>
#include <netlink/route/action.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/fifo.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/tc.h>

#include "lib/cleanup.h"
#include "lib/failpoint.h"
#include "lib/nl.h"
#include "lib/nl_cleanup.h"
#include "lib/util.h"
#include "shaper/internal.h"

/* Failures read "tc: <what>: <strerror>". */
#define tc_fail(e, r, fmt, ...) tg_fail_kernel(e, r, "tc: " fmt, ##__VA_ARGS__)

int shaper_ifindex(struct nl_sock *sk, const char *name)
{
	_cleanup_link_ struct rtnl_link *l = NULL;
	int idx;

	if (!name || !*name)
		return tg_nl_default_route_ifindex(sk, &idx) < 0 ? 0 : idx;
	if (rtnl_link_get_kernel(sk, 0, name, &l) < 0)
		return 0;
	return rtnl_link_get_ifindex(l);
}

static uint32_t bytes_per_s(uint64_t bps)
{
	uint64_t b = bps / 8;

	return b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

static uint32_t clamp32(uint64_t v, uint64_t lo, uint64_t hi)
{
	return (uint32_t)(v < lo ? lo : v > hi ? hi : v);
}

/*
 * An HTB class: `ceil_bps` is the cap; the guaranteed rate is 1% of it unless
 * `rate_bps` says otherwise. Bursts of 4 ms at the ceiling (at least two
 * packets) keep accuracy at high rates without letting short transfers run
 * unshaped; quanta follow the ceiling so siblings share evenly. The
 * guaranteed rate's own bucket is rate_burst_bits (at least a packet; 0:
 * the burst).
 */
int shaper_put_class(struct nl_sock *sk, int ifindex, uint32_t parent, uint32_t id,
		     uint64_t rate_bps, uint64_t ceil_bps, uint64_t burst_bits,
		     uint64_t rate_burst_bits, int mtu)
{
	return shaper_put_class_flags(sk, ifindex, parent, id, rate_bps, ceil_bps, burst_bits,
				      rate_burst_bits, mtu, NLM_F_CREATE | NLM_F_REPLACE);
}

int shaper_put_class_flags(struct nl_sock *sk, int ifindex, uint32_t parent, uint32_t id,
			   uint64_t rate_bps, uint64_t ceil_bps, uint64_t burst_bits,
			   uint64_t rate_burst_bits, int mtu, int flags)
{
	_cleanup_class_ struct rtnl_class *c = rtnl_class_alloc();
	uint32_t ceil = bytes_per_s(ceil_bps);
	uint32_t rate = bytes_per_s(rate_bps ? rate_bps : ceil_bps / 100);
	uint64_t pkt = (uint64_t)mtu + 14;
	uint32_t burst = burst_bits ? clamp32(burst_bits / 8, pkt, UINT32_MAX)
				    : clamp32((uint64_t)ceil * 4 / 1000, 2 * pkt, UINT32_MAX);
	int r;

	if (!c)
		return -ENOMEM;
	if (rate < 125)
		rate = 125; /* 1 kbit/s: HTB needs a positive rate */
	rtnl_tc_set_ifindex(TC_CAST(c), ifindex);
	rtnl_tc_set_parent(TC_CAST(c), parent);
	rtnl_tc_set_handle(TC_CAST(c), id);
	r = tg_nl_to_errno(rtnl_tc_set_kind(TC_CAST(c), "htb"));
	if (r < 0)
		return r;
	rtnl_htb_set_rate(c, rate);
	rtnl_htb_set_ceil(c, ceil);
	rtnl_htb_set_rbuffer(c, rate_burst_bits ? clamp32(rate_burst_bits / 8, pkt, burst) : burst);
	rtnl_htb_set_cbuffer(c, burst);
	rtnl_htb_set_quantum(c, clamp32(ceil / 1000, pkt, 200000));
	return tg_nl_to_errno(rtnl_class_add(sk, c, flags));
}

static int find_class(struct nl_sock *sk, int ifindex, uint32_t id, struct shaper_stats *st);

/*
 * The HTB root 1: of one of Tollgate's own devices. An existing root is kept
 * when it is ours (HTB 1: with class 1:1); anything else (the default qdisc,
 * a root left without 1:1) is deleted and made anew: HTB refuses to replace
 * itself in place ("Change operation not supported").
 */
int shaper_put_htb_root(struct nl_sock *sk, int ifindex, uint32_t defcls)
{
	_cleanup_qdisc_ struct rtnl_qdisc *q = rtnl_qdisc_alloc();
	int r;

	if (!q)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	rtnl_tc_set_parent(TC_CAST(q), TC_H_ROOT);
	rtnl_tc_set_handle(TC_CAST(q), TC_HANDLE(1, 0));
	r = tg_nl_to_errno(rtnl_tc_set_kind(TC_CAST(q), "htb"));
	if (r < 0)
		return r;
	/* A default that names no class sends unclassified packets direct, unshaped. */
	rtnl_htb_set_defcls(q, defcls);
	rtnl_htb_set_rate2quantum(q, 10);
	r = tg_nl_to_errno(rtnl_qdisc_add(sk, q, NLM_F_CREATE | NLM_F_EXCL));
	if (r != -EEXIST)
		return r;
	if (find_class(sk, ifindex, TC_HANDLE(1, 1), NULL))
		return 0;
	r = shaper_del_qdisc(sk, ifindex, TC_H_ROOT);
	if (r < 0)
		return r;
	return tg_nl_to_errno(rtnl_qdisc_add(sk, q, NLM_F_CREATE | NLM_F_EXCL));
}

/*
 * A leaf's queue: bfifo holding queue_ms at the class's ceiling, and at least
 * 192 KiB: TCP hands over GSO super-packets of up to 64 KiB, and a queue that
 * cannot hold three of them drops whole bursts at low rates (10 Mbit/s ran at
 * 73-91 % of its cap with 25 kB). Below ~80 Mbit/s this floor, not queue_ms,
 * bounds the added latency.
 */
int shaper_put_leaf_queue(struct nl_sock *sk, int ifindex, uint32_t classid, uint64_t ceil_bps,
			  uint32_t queue_ms, int mtu)
{
	_cleanup_qdisc_ struct rtnl_qdisc *q = rtnl_qdisc_alloc();
	uint64_t limit = (uint64_t)bytes_per_s(ceil_bps) * queue_ms / 1000;
	int r;

	if (!q)
		return -ENOMEM;
	if (limit < 3ULL * 65536)
		limit = 3ULL * 65536;
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	/* No handle: the kernel picks a free one (1:1's leaf must not be "1:"). */
	rtnl_tc_set_parent(TC_CAST(q), classid);
	r = tg_nl_to_errno(rtnl_tc_set_kind(TC_CAST(q), "bfifo"));
	if (r < 0)
		return r;
	rtnl_qdisc_fifo_set_limit(q, (int)(limit > INT32_MAX ? INT32_MAX : limit));
	return tg_nl_to_errno(rtnl_qdisc_add(sk, q, NLM_F_CREATE | NLM_F_REPLACE));
}

int shaper_ensure_ifb(struct nl_sock *sk, const char *name, int mtu, uint32_t group,
		      int *ret_ifindex)
{
	_cleanup_link_ struct rtnl_link *l = rtnl_link_alloc();
	_cleanup_link_ struct rtnl_link *cur = NULL, *chg = NULL;
	int r;

	if (!l)
		return -ENOMEM;
	rtnl_link_set_name(l, name);
	rtnl_link_set_type(l, "ifb");
	rtnl_link_set_mtu(l, (unsigned int)mtu);
	rtnl_link_set_flags(l, IFF_UP);
	if (group)
		rtnl_link_set_group(l, group);
	r = tg_nl_to_errno(rtnl_link_add(sk, l, NLM_F_CREATE | NLM_F_EXCL));
	if (r < 0 && r != -EEXIST)
		return r;
	*ret_ifindex = shaper_ifindex(sk, name);
	if (!*ret_ifindex)
		return -ENODEV;
	if (r == 0)
		return 0;
	/* Left by an earlier ADD of this attachment: make sure it is up. */
	cur = rtnl_link_alloc();
	chg = rtnl_link_alloc();
	if (!cur || !chg)
		return -ENOMEM;
	rtnl_link_set_ifindex(cur, *ret_ifindex);
	rtnl_link_set_flags(chg, IFF_UP);
	return tg_nl_to_errno(rtnl_link_change(sk, cur, chg, 0));
}

int shaper_put_u32(struct nl_sock *sk, const struct shaper_u32 *f, int flags)
{
	_cleanup_cls_ struct rtnl_cls *cls = rtnl_cls_alloc();
	_cleanup_act_ struct rtnl_act *act = NULL;
	int r;

	if (!cls)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(cls), f->ifindex);
	rtnl_tc_set_parent(TC_CAST(cls), f->parent);
	if (f->handle)
		rtnl_tc_set_handle(TC_CAST(cls), f->handle);
	r = tg_nl_to_errno(rtnl_tc_set_kind(TC_CAST(cls), "u32"));
	if (r < 0)
		return r;
	rtnl_cls_set_prio(cls, f->prio);
	rtnl_cls_set_protocol(cls, f->protocol);
	/* libnl takes the key and mask in host order; mask 0 matches every packet */
	rtnl_u32_add_key_uint32(cls, f->val, f->mask, f->mask ? f->off : 0, 0);
	rtnl_u32_set_cls_terminal(cls);
	if (f->redirect) {
		act = rtnl_act_alloc();
		if (!act || rtnl_tc_set_kind(TC_CAST(act), "mirred") < 0)
			return -ENOMEM;
		rtnl_mirred_set_action(act, TCA_EGRESS_REDIR);
		rtnl_mirred_set_policy(act, TC_ACT_STOLEN);
		rtnl_mirred_set_ifindex(act, (uint32_t)f->redirect);
		r = tg_nl_to_errno(rtnl_u32_add_action(cls, act));
		if (r < 0)
			return r;
	}
	return tg_nl_to_errno(rtnl_cls_add(sk, cls, flags));
}

/*
 * tgX's ingress hook (its clsact, which also steers downloads): every packet
 * from the pod goes through the IFB (redirected, then shaped).
 */
static int redirect_to_ifb(struct nl_sock *sk, int ifindex, int ifb_index)
{
	/* 800::800, fixed: a repeat replaces it */
	struct shaper_u32 f = { .ifindex = ifindex,
				.parent = SHAPER_CLSACT_INGRESS,
				.handle = 0x80000800u,
				.prio = 1,
				.protocol = ETH_P_ALL,
				.redirect = ifb_index };
	int r = shaper_put_clsact(sk, ifindex);

	return r < 0 ? r : shaper_put_u32(sk, &f, NLM_F_CREATE | NLM_F_REPLACE);
}

/* The devices a pod's steps name, each looked up once. */
struct step_dev {
	char name[IFNAMSIZ];
	int ifindex;
	bool made; /* by a step (the pod's IFB): found once that step ran */
};
struct step_devs {
	struct step_dev d[4]; /* the host veth, the pod's IFB, tollgate-inet, tollgate-inetdl */
	size_t n;
};

static struct step_dev *dev_slot(struct step_devs *v, const char *name)
{
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->d[i].name, name) == 0)
			return &v->d[i];
	if (v->n == ARRAY_SIZE(v->d))
		return NULL;
	v->d[v->n] = (struct step_dev){ .ifindex = 0 };
	snprintf(v->d[v->n].name, sizeof(v->d[v->n].name), "%s", name);
	return &v->d[v->n++];
}

/*
 * Every device a step works on that no step makes must be there before the
 * first change: the pod's host veth, tollgate-inet (inet_ifb: known already).
 */
static int resolve_devs(struct nl_sock *sk, const struct shaper_step *st, int n, int inet_ifb,
			struct step_devs *v, struct tg_err *e)
{
	for (int i = 0; i < n; i++) {
		const char *dev = st[i].dev;
		struct step_dev *d;

		if (st[i].obj == SHAPER_OBJ_DECLARED)
			continue;
		d = dev_slot(v, dev);
		if (!d)
			return tg_fail(e, CNI_ERR_IO, -E2BIG, "tc: too many devices");
		if (st[i].obj == SHAPER_OBJ_IFB)
			d->made = true;
		if (d->made || d->ifindex)
			continue;
		if (strcmp(dev, SHAPER_INET_IFB) == 0 && inet_ifb > 0)
			d->ifindex = inet_ifb;
		else
			d->ifindex = shaper_ifindex(sk, dev);
		if (d->ifindex)
			continue;
		if (strcmp(dev, SHAPER_INET_IFB) == 0 || strcmp(dev, SHAPER_INET_IN_IFB) == 0)
			return tg_fail(e, CNI_ERR_IO, -ENODEV, "tc: %s is missing", dev);
		return tg_fail(e, CNI_ERR_IO, -ENODEV, "tc: host veth %s is missing", dev);
	}
	return 0;
}

static int step_point(enum shaper_point fp, struct tg_err *e)
{
	switch (fp) {
	case SHAPER_AT_NONE:
		return 0;
	case SHAPER_AT_INGRESS:
		return TG_FAILPOINT("tc.pod.ingress.after", e);
	case SHAPER_AT_IFB:
		return TG_FAILPOINT("tc.pod.ifb.after", e);
	case SHAPER_AT_EGRESS:
		return TG_FAILPOINT("tc.pod.egress.after", e);
	case SHAPER_AT_NS_CLASS:
		return TG_FAILPOINT("tc.pod.ns-class.after", e);
	case SHAPER_AT_INET:
		return TG_FAILPOINT("tc.pod.inet.after", e);
	case SHAPER_AT_INET_IN:
		return TG_FAILPOINT("tc.pod.inet-in.after", e);
	case SHAPER_AT_STEER:
		return TG_FAILPOINT("tc.pod.steer.after", e);
	}
	return 0;
}

/* Makes one step; on failure e names it: object, class id, device. */
static int make_step(struct nl_sock *sk, const struct shaper_step *st, struct step_devs *v,
		     uint32_t group, uint32_t queue_ms, int mtu, bool own_ns, struct tg_err *e)
{
	struct step_dev *d = dev_slot(v, st->dev), *to;
	uint32_t id = st->id, parent = st->parent == TC_H_ROOT ? TC_HANDLE(1, 0) : st->parent;
	int r;

	if (!d)
		return tg_fail(e, CNI_ERR_IO, -E2BIG, "tc: too many devices");
	switch (st->obj) {
	case SHAPER_OBJ_IFB:
		r = shaper_ensure_ifb(sk, st->dev, mtu, group, &d->ifindex);
		return r < 0 ? tc_fail(e, r, "creating %s", st->dev) : 0;
	case SHAPER_OBJ_ROOT:
		r = shaper_put_htb_root(sk, d->ifindex, id);
		return r < 0 ? tc_fail(e, r, "adding the HTB root 1: of %s", st->dev) : 0;
	case SHAPER_OBJ_CLASS:
		/*
		 * A namespace's class is shared state: an ADD makes it where it is
		 * missing and leaves one that is there as it is (the agent may have
		 * set it from a newer config than this ADD's); only a reshape, the
		 * class's owner, changes its rate.
		 */
		if (st->level == SHAPER_NAMESPACE && (!own_ns || st->budgeted)) {
			/* Under a budget its ceil is the grant: the agent's, never a reshape's. */
			r = shaper_put_class_flags(sk, d->ifindex, parent, id, st->rate_bps,
						   st->budgeted ? st->start_bps : st->ceil_bps,
						   st->burst_bits, 0, mtu,
						   NLM_F_CREATE | NLM_F_EXCL);
			r = r == -EEXIST ? 0 : r;
		} else {
			r = shaper_put_class(sk, d->ifindex, parent, id, st->rate_bps, st->ceil_bps,
					     st->burst_bits, st->rate_burst_bits, mtu);
		}
		return r < 0 ? tc_fail(e, r, "adding class %x:%x (%s %s %s) under %x:%x on %s",
				       id >> 16, id & 0xffff, shaper_level_what[st->level],
				       st->direction, st->traffic, parent >> 16, parent & 0xffff,
				       st->dev)
			     : 0;
	case SHAPER_OBJ_QUEUE:
		r = shaper_put_leaf_queue(sk, d->ifindex, id, st->ceil_bps, queue_ms, mtu);
		return r < 0 ? tc_fail(e, r, "adding the bfifo queue of class %x:%x on %s",
				       id >> 16, id & 0xffff, st->dev)
			     : 0;
	case SHAPER_OBJ_REDIRECT:
		to = dev_slot(v, st->to);
		r = to && to->ifindex ? redirect_to_ifb(sk, d->ifindex, to->ifindex) : -ENODEV;
		return r < 0 ? tc_fail(e, r, "redirecting traffic from the pod on %s to %s",
				       st->dev, st->to)
			     : 0;
	case SHAPER_OBJ_STEER:
		to = dev_slot(v, st->to);
		r = to && to->ifindex ? shaper_put_clsact(sk, d->ifindex) : -ENODEV;
		if (r == 0)
			r = shaper_put_steer(sk, d->ifindex, st->mark, to->ifindex);
		return r < 0 ? tc_fail(e, r, "steering downloads to the pod on %s to %s", st->dev,
				       st->to)
			     : 0;
	case SHAPER_OBJ_DECLARED:
		return 0;
	}
	return 0;
}

/*
 * Every step made or put right in place: HTB changes an existing class's
 * rate and ceil where it stands, a leaf's bfifo its limit, and a root that
 * is ours is kept, so a step that finds its object there changes it without
 * a moment in which the pod is not shaped.
 */
static bool on_node_ifb(const struct shaper_step *st)
{
	return strcmp(st->dev, SHAPER_INET_IFB) == 0 || strcmp(st->dev, SHAPER_INET_IN_IFB) == 0;
}

static int put_steps(struct nl_sock *sk, const char *host_veth, int inet_ifb, uint32_t group,
		     const struct shaping *s, uint32_t queue_ms, int mtu, bool own_ns,
		     bool node_only, struct tg_err *e)
{
	struct shaper_step st[SHAPER_POD_STEPS_MAX];
	struct step_devs devs = { .n = 0 };
	int n = shaper_pod_steps(host_veth, s, st), r, k = 0;

	/* Only the classes on the node's IFBs: the pod's own devices are left as they are. */
	for (int i = 0; i < n; i++)
		if (!node_only || on_node_ifb(&st[i]))
			st[k++] = st[i];
	n = k;
	r = resolve_devs(sk, st, n, inet_ifb, &devs, e);
	for (int i = 0; i < n && r == 0; i++) {
		r = make_step(sk, &st[i], &devs, group, queue_ms, mtu, own_ns, e);
		if (r == 0)
			r = step_point(st[i].point, e);
	}
	return r;
}

int shaper_inet_ifindex(struct nl_sock *sk)
{
	return shaper_ifindex(sk, SHAPER_INET_IFB);
}

int shaper_inet_in_ifindex(struct nl_sock *sk)
{
	return shaper_ifindex(sk, SHAPER_INET_IN_IFB);
}

int shaper_ns_set_ceil(struct nl_sock *sk, int inet_ifb, uint16_t ns_class, uint64_t ceil_bps,
		       int mtu)
{
	/* NLM_F_REPLACE without NLM_F_CREATE: a change of the class that is there, or -ENOENT. */
	return shaper_put_class_flags(sk, inet_ifb, TC_HANDLE(1, 1), TC_HANDLE(1, ns_class), 0,
				      ceil_bps, 0, 0, mtu, NLM_F_REPLACE);
}

int shaper_pod_add(struct nl_sock *sk, const char *host_veth, int inet_ifb, uint32_t group,
		   const struct shaping *s, uint32_t queue_ms, int mtu, struct tg_err *e)
{
	return put_steps(sk, host_veth, inet_ifb, group, s, queue_ms, mtu, false, false, e);
}

int shaper_pod_restore(struct nl_sock *sk, const char *host_veth, int inet_ifb,
		       const struct shaping *s, uint32_t queue_ms, int mtu, struct tg_err *e)
{
	return put_steps(sk, host_veth, inet_ifb, 0, s, queue_ms, mtu, false, true, e);
}

/* Deletes the filters of one priority under `parent` (0 when there are none). */
static int del_filters(struct nl_sock *sk, int ifindex, uint32_t parent, uint16_t prio,
		       uint16_t protocol)
{
	_cleanup_cls_ struct rtnl_cls *cls = rtnl_cls_alloc();
	int r;

	if (!cls)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(cls), ifindex);
	rtnl_tc_set_parent(TC_CAST(cls), parent);
	rtnl_cls_set_prio(cls, prio);
	rtnl_cls_set_protocol(cls, protocol);
	r = tg_nl_to_errno(rtnl_cls_delete(sk, cls, 0));
	return r == -ENOENT || r == -EINVAL || r == -ENODEV ? 0 : r;
}

/* The pod's class on one of the node's IFBs. */
static int del_node_class(struct nl_sock *sk, const char *ifb, uint16_t minor, struct tg_err *e)
{
	int dev = shaper_ifindex(sk, ifb), r;

	r = dev && minor ? shaper_del_class(sk, dev, TC_HANDLE(1, minor)) : 0;
	return r < 0 ? tc_fail(e, r, "deleting class 1:%x on %s", minor, ifb) : 0;
}

/* Break: what `s` no longer has goes, now that its own objects are in force. */
static int break_old(struct nl_sock *sk, const char *host_veth, const struct shaping *old,
		     const struct shaping *s, struct tg_err *e)
{
	int veth = shaper_ifindex(sk, host_veth), r = 0;

	if (veth && !shaping_pod_ingress(s)) {
		r = shaper_del_qdisc(sk, veth, TC_H_ROOT);
		if (r < 0)
			return tc_fail(e, r, "removing the root qdisc of %s", host_veth);
	}
	if (!s->egress_bps) {
		/* The redirect first, so that no packet is sent to an IFB that is going. */
		if (veth)
			r = shaping_inet_ingress(s)
				    ? del_filters(sk, veth, SHAPER_CLSACT_INGRESS, 1, ETH_P_ALL)
				    : shaper_del_qdisc(sk, veth, TC_H_CLSACT);
		if (r < 0)
			return tc_fail(e, r, "removing the redirect of %s", host_veth);
		r = shaper_pod_del(sk, host_veth, NULL, e);
		if (r < 0)
			return r;
	}
	if (veth && !shaping_inet_ingress(s) && s->egress_bps) {
		r = shaper_del_steer(sk, veth);
		if (r < 0)
			return tc_fail(e, r, "removing the steering of downloads on %s", host_veth);
	}
	if (!old)
		return 0;
	if (shaping_inet_egress(old) && (!shaping_inet_egress(s) || old->pod_class != s->pod_class))
		r = del_node_class(sk, SHAPER_INET_IFB, old->pod_class, e);
	if (r == 0 && shaping_inet_ingress(old) &&
	    (!shaping_inet_ingress(s) || old->pod_class != s->pod_class))
		r = del_node_class(sk, SHAPER_INET_IN_IFB, old->pod_class, e);
	return r;
}

int shaper_pod_change(struct nl_sock *sk, const char *host_veth, uint32_t group,
		      const struct shaping *old, const struct shaping *s, uint32_t queue_ms,
		      int mtu, unsigned phases, struct tg_err *e)
{
	int r;

	/* Make: the new caps over the old classes, in place. */
	if ((phases & SHAPER_MAKE) && shaping_any(s)) {
		r = put_steps(sk, host_veth, 0, group, s, queue_ms, mtu, true, false, e);
		if (r < 0)
			return r;
	}
	if (!(phases & SHAPER_BREAK))
		return 0;
	r = TG_FAILPOINT("tc.pod.change.after", e);
	if (r < 0)
		return r;
	return break_old(sk, host_veth, old, s, e);
}

int shaper_del_class(struct nl_sock *sk, int ifindex, uint32_t id)
{
	_cleanup_class_ struct rtnl_class *c = rtnl_class_alloc();
	int r;

	if (!c)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(c), ifindex);
	rtnl_tc_set_handle(TC_CAST(c), id);
	rtnl_tc_set_kind(TC_CAST(c), "htb");
	r = tg_nl_to_errno(rtnl_class_delete(sk, c));
	return r == -ENOENT || r == -ENODEV || r == -EINVAL ? 0 : r;
}

int shaper_pod_del(struct nl_sock *sk, const char *host_veth, const struct shaping *s,
		   struct tg_err *e)
{
	_cleanup_link_ struct rtnl_link *l = rtnl_link_alloc();
	char ifb[IFNAMSIZ];
	int r, first = 0;

	/* The IFB is deleted whatever the spec says: DEL must work without the store too. */
	shaper_ifb_name(host_veth, ifb);
	if (l)
		first = TG_FAILPOINT("tc.pod.del.ifb.before", e);
	if (l && first == 0) {
		rtnl_link_set_name(l, ifb);
		r = tg_nl_to_errno(rtnl_link_delete(sk, l));
		if (r < 0 && r != -ENODEV && r != -ENOENT)
			first = tc_fail(e, r, "deleting %s", ifb);
	}
	/*
	 * Its classes on the node's IFBs; the namespace's class stays: another
	 * ADD may be attaching its pod under it right now. shaper_retire_classes
	 * removes it once the store says the namespace has no pod left.
	 */
	for (int i = 0; s && s->pod_class && i < 2; i++) {
		const char *ifb_name = i ? SHAPER_INET_IN_IFB : SHAPER_INET_IFB;
		int up;

		if (!(i ? shaping_inet_ingress(s) : shaping_inet_egress(s)))
			continue;
		up = shaper_ifindex(sk, ifb_name);
		if (!up)
			continue;
		r = TG_FAILPOINT("tc.pod.del.class.before", e);
		if (r == 0)
			r = shaper_del_class(sk, up, TC_HANDLE(1, s->pod_class));
		if (r < 0 && !first)
			first = tc_fail(e, r, "deleting class 1:%x on %s", s->pod_class, ifb_name);
	}
	return first;
}

int shaper_del_qdisc(struct nl_sock *sk, int ifindex, uint32_t parent)
{
	_cleanup_qdisc_ struct rtnl_qdisc *q = rtnl_qdisc_alloc();
	int r;

	if (!q)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	rtnl_tc_set_parent(TC_CAST(q), parent);
	r = tg_nl_to_errno(rtnl_qdisc_delete(sk, q));
	return r == -ENOENT || r == -EINVAL || r == -ENODEV ? 0 : r;
}

void shaper_fill_stats(struct rtnl_class *c, struct shaper_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->classid = rtnl_tc_get_handle(TC_CAST(c));
	st->rate_bps = (uint64_t)rtnl_htb_get_rate(c) * 8;
	st->ceil_bps = (uint64_t)rtnl_htb_get_ceil(c) * 8;
	st->bytes = rtnl_tc_get_stat(TC_CAST(c), RTNL_TC_BYTES);
	st->packets = rtnl_tc_get_stat(TC_CAST(c), RTNL_TC_PACKETS);
	st->drops = rtnl_tc_get_stat(TC_CAST(c), RTNL_TC_DROPS);
	st->overlimits = rtnl_tc_get_stat(TC_CAST(c), RTNL_TC_OVERLIMITS);
	st->backlog = rtnl_tc_get_stat(TC_CAST(c), RTNL_TC_BACKLOG);
	st->parent = rtnl_tc_get_parent(TC_CAST(c));
}

/*
 * The classes of one device, dumped once and looked up as often as needed
 * (tollgate-inet holds a class per shaped pod: one dump, not one per lookup).
 */
struct class_view {
	int ifindex;
	struct nl_cache *cache;
	char dev[IFNAMSIZ]; /* the device last named (view_dev_class) */
	int dev_ifindex;
};

static void view_free(struct class_view *v)
{
	if (v->cache)
		nl_cache_free(v->cache);
	v->cache = NULL;
}

static int view_class(struct nl_sock *sk, struct class_view *v, int ifindex, uint32_t id,
		      struct shaper_stats *st, uint32_t *ret_parent)
{
	_cleanup_class_ struct rtnl_class *c = NULL;

	if (!v->cache || v->ifindex != ifindex) {
		view_free(v);
		v->ifindex = ifindex;
		if (rtnl_class_alloc_cache(sk, ifindex, &v->cache) < 0) {
			v->cache = NULL;
			return 0;
		}
	}
	c = rtnl_class_get(v->cache, ifindex, id);
	if (!c)
		return 0;
	if (st)
		shaper_fill_stats(c, st);
	if (ret_parent)
		*ret_parent = rtnl_tc_get_parent(TC_CAST(c));
	return 1;
}

/* A class of the device named `dev`: the name is resolved once while lookups stay on it. */
static int view_dev_class(struct nl_sock *sk, struct class_view *v, const char *dev, uint32_t id,
			  struct shaper_stats *st, uint32_t *ret_parent)
{
	if (strcmp(v->dev, dev) != 0) {
		snprintf(v->dev, sizeof(v->dev), "%s", dev);
		v->dev_ifindex = shaper_ifindex(sk, dev);
	}
	return v->dev_ifindex && view_class(sk, v, v->dev_ifindex, id, st, ret_parent);
}

static int find_class(struct nl_sock *sk, int ifindex, uint32_t id, struct shaper_stats *st)
{
	struct class_view v = { 0 };
	int found = view_class(sk, &v, ifindex, id, st, NULL);

	view_free(&v);
	return found;
}

struct dump_arg {
	shaper_class_fn fn;
	void *arg;
};

static void each_class(struct nl_object *o, void *p)
{
	struct dump_arg *d = p;
	struct shaper_stats st;

	shaper_fill_stats((struct rtnl_class *)o, &st);
	d->fn(&st, d->arg);
}

int shaper_dump_classes(struct nl_sock *sk, int ifindex, shaper_class_fn fn, void *arg)
{
	_cleanup_nl_cache_ struct nl_cache *cache = NULL;
	struct dump_arg d = { .fn = fn, .arg = arg };
	int r = tg_nl_to_errno(rtnl_class_alloc_cache(sk, ifindex, &cache));

	if (r < 0)
		return r;
	nl_cache_foreach(cache, each_class, &d);
	return 0;
}

static bool ceil_is(const struct shaper_stats *st, uint64_t bps)
{
	/* HTB keeps bytes/s: compare at that resolution. */
	return st->ceil_bps / 8 == bps / 8;
}

int shaper_pod_check(struct nl_sock *sk, const char *host_veth, const struct shaping *s,
		     struct tg_err *e)
{
	struct shaper_class want[SHAPER_POD_CLASSES_MAX];
	struct class_view v = { 0 };
	struct shaper_stats st;
	uint32_t parent = 0;
	int n = shaper_pod_classes(host_veth, s, want), r = 0;

	for (int i = 0; i < n && r == 0; i++) {
		const struct shaper_class *c = &want[i];

		if (!view_dev_class(sk, &v, c->dev, c->classid, &st, &parent))
			r = tg_fail(e, TG_ERR_DRIFT, -ENOENT,
				    "drift: class %x:%x on %s (%s %s %s) is missing",
				    c->classid >> 16, c->classid & 0xffff, c->dev,
				    shaper_level_what[c->level], c->direction, c->traffic);
		else if (c->budgeted ? st.ceil_bps / 8 > c->ceil_bps / 8
				     : !ceil_is(&st, c->ceil_bps))
			r = tg_fail(
				e, TG_ERR_DRIFT, -EINVAL,
				c->budgeted
					? "drift: class %x:%x on %s (%s %s %s) has ceil %llu bit/s, "
					  "above its cap %llu"
					: "drift: class %x:%x on %s (%s %s %s) has ceil %llu bit/s, not %llu",
				c->classid >> 16, c->classid & 0xffff, c->dev,
				shaper_level_what[c->level], c->direction, c->traffic,
				(unsigned long long)st.ceil_bps, (unsigned long long)c->ceil_bps);
		else if (parent != c->parent)
			r = tg_fail(
				e, TG_ERR_DRIFT, -EINVAL,
				"drift: class %x:%x on %s (%s %s %s) hangs under %x:%x, not %x:%x",
				c->classid >> 16, c->classid & 0xffff, c->dev,
				shaper_level_what[c->level], c->direction, c->traffic, parent >> 16,
				parent & 0xffff, c->parent >> 16, c->parent & 0xffff);
	}
	view_free(&v);
	if (r == 0 && shaping_inet_ingress(s)) {
		int veth = shaper_ifindex(sk, host_veth);

		r = veth ? shaper_steer_check(sk, veth, 0) : 0;
		if (r == 0)
			return tg_fail(e, TG_ERR_DRIFT, -ENOENT,
				       "drift: the steering of downloads on %s to %s is missing",
				       host_veth, SHAPER_INET_IN_IFB);
		r = r < 0 ? tc_fail(e, r, "reading the filters of %s", host_veth) : 0;
	}
	return r;
}

int shaper_pod_stats(struct nl_sock *sk, const char *host_veth, const struct shaping *s,
		     struct shaper_class ret_class[SHAPER_POD_CLASSES_MAX],
		     struct shaper_stats ret[SHAPER_POD_CLASSES_MAX])
{
	struct shaper_class all[SHAPER_POD_CLASSES_MAX];
	struct class_view v = { 0 };
	int n = shaper_pod_classes(host_veth, s, all), found = 0;

	for (int i = 0; i < n; i++)
		if (all[i].level == SHAPER_POD &&
		    view_dev_class(sk, &v, all[i].dev, all[i].classid, &ret[found], NULL))
			ret_class[found++] = all[i];
	view_free(&v);
	return found;
}
