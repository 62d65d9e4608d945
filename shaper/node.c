// SPDX-License-Identifier: Apache-2.0
/*
 * The node's internet-shaping path (see shaper.h): IFB tollgate-inet with its
 * HTB root 1: and node class 1:1, the uplink's clsact and the u32 filters on
 * its egress hook that steer internet-bound packets into the IFB. Declared
 * for the whole node: read once, compared, and changed only where it differs.
 *
 * The steering filters are replaced make-before-break: they live in one of
 * two priorities; a new set goes into the free one, pass filters first and
 * the redirect last, and only then is the old priority deleted, in one
 * message. At every moment each packet meets either the old set or the new.
 */
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/msg.h>
#include <netlink/route/act/mirred.h>
#include <netlink/route/action.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/tc.h>

#include "lib/failpoint.h"
#include "lib/nl.h"
#include "lib/nl_cleanup.h"
#include "lib/util.h"
#include "shaper/internal.h"

#define CLSACT_EGRESS TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS)
#define STEER_PRIO_A 1
#define STEER_PRIO_B 2
#define STEER_MAX 65 /* internalCIDRs (at most 64) and the redirect */

#define tc_fail(e, r, fmt, ...) tg_fail_kernel(e, r, "tc: " fmt, ##__VA_ARGS__)

/* ---- the steering filters ---- */

struct steer {
	uint32_t val, mask; /* destination match, host order; mask 0: every packet */
	int redirect;	    /* mirred to this ifindex, 0: pass */
};

static size_t steer_want(const struct shaper_node *n, int ifb, struct steer ret[STEER_MAX])
{
	size_t k = 0;

	for (size_t i = 0; i < n->n_internal && k + 1 < STEER_MAX; i++)
		if (n->internal[i].prefix)
			ret[k++] = (struct steer){ n->internal[i].net,
						   cidr4_mask(n->internal[i].prefix), 0 };
	ret[k++] = (struct steer){ 0, 0, ifb };
	return k;
}

struct steer_seen {
	struct steer f[STEER_MAX + 1];
	uint32_t node[STEER_MAX + 1];
	size_t n;     /* STEER_MAX + 1: more than any config makes */
	bool foreign; /* something at this priority that is not a u32 node of ours */
};

static void seen_add(struct steer_seen *s, struct rtnl_cls *c)
{
	uint32_t h = rtnl_tc_get_handle(TC_CAST(c)), val = 0, mask = 0;
	int off = 0, offmask = 0;
	struct rtnl_act *act;
	size_t at;

	if (strcmp(rtnl_tc_get_kind(TC_CAST(c)) ?: "", "u32") != 0) {
		s->foreign = true;
		return;
	}
	if (TC_U32_NODE(h) == 0)
		return; /* the hash table itself */
	if (s->n > STEER_MAX)
		return;
	if (rtnl_u32_get_key(c, 0, &val, &mask, &off, &offmask) < 0) {
		val = mask = 0;
		off = 0;
	}
	act = rtnl_u32_get_action(c);
	/* Kept in node order: u32 matches a hash bucket's nodes in that order. */
	for (at = s->n; at > 0 && s->node[at - 1] > TC_U32_NODE(h); at--) {
		s->f[at] = s->f[at - 1];
		s->node[at] = s->node[at - 1];
	}
	s->f[at] =
		(struct steer){ ntohl(val), ntohl(mask),
				act && strcmp(rtnl_tc_get_kind(TC_CAST(act)) ?: "", "mirred") == 0
					? (int)rtnl_mirred_get_ifindex(act)
					: 0 };
	if (mask && off != 16)
		s->f[at].mask = 1; /* a match elsewhere in the packet: never equal */
	s->node[at] = TC_U32_NODE(h);
	s->n++;
}

struct filters_seen {
	struct steer_seen prio[2]; /* STEER_PRIO_A, STEER_PRIO_B */
};

static void each_filter(struct nl_object *o, void *arg)
{
	struct filters_seen *fs = arg;
	struct rtnl_cls *c = (struct rtnl_cls *)o;
	uint16_t prio = rtnl_cls_get_prio(c);

	if (prio == STEER_PRIO_A || prio == STEER_PRIO_B)
		seen_add(&fs->prio[prio - STEER_PRIO_A], c);
}

static int read_filters(struct nl_sock *sk, int uplink, struct filters_seen *fs)
{
	_cleanup_nl_cache_ struct nl_cache *cache = NULL;
	int r;

	memset(fs, 0, sizeof(*fs));
	/* (A dump under a clsact that is missing is empty, not an error.) */
	r = tg_nl_to_errno(rtnl_cls_alloc_cache(sk, uplink, CLSACT_EGRESS, &cache));
	if (r == -EINVAL || r == -ENOENT || r == -EOPNOTSUPP)
		return 0;
	if (r < 0)
		return r;
	nl_cache_foreach(cache, each_filter, fs);
	return 0;
}

static bool steer_equal(const struct steer_seen *s, const struct steer *want, size_t n)
{
	if (s->foreign || s->n != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s->f[i].val != want[i].val || s->f[i].mask != want[i].mask ||
		    s->f[i].redirect != want[i].redirect)
			return false;
	return true;
}

/* Adds one u32 node at `prio`; the kernel numbers it after the ones already there. */
static int put_steer(struct nl_sock *sk, int uplink, uint16_t prio, const struct steer *f)
{
	struct shaper_u32 u = { .ifindex = uplink,
				.parent = CLSACT_EGRESS,
				.prio = prio,
				.protocol = ETH_P_IP,
				.val = f->val,
				.mask = f->mask,
				.off = 16,
				.redirect = f->redirect };

	return shaper_put_u32(sk, &u, NLM_F_CREATE | NLM_F_EXCL);
}

/* Deletes every filter of one priority in one message (the whole u32 instance). */
static int del_prio(struct nl_sock *sk, int uplink, uint16_t prio)
{
	_cleanup_cls_ struct rtnl_cls *cls = rtnl_cls_alloc();
	int r;

	if (!cls)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(cls), uplink);
	rtnl_tc_set_parent(TC_CAST(cls), CLSACT_EGRESS);
	rtnl_cls_set_prio(cls, prio);
	rtnl_cls_set_protocol(cls, ETH_P_IP);
	r = tg_nl_to_errno(rtnl_cls_delete(sk, cls, 0));
	return r == -ENOENT || r == -EINVAL ? 0 : r;
}

static int put_clsact(struct nl_sock *sk, int uplink)
{
	_cleanup_qdisc_ struct rtnl_qdisc *q = rtnl_qdisc_alloc();
	int r;

	if (!q)
		return -ENOMEM;
	rtnl_tc_set_ifindex(TC_CAST(q), uplink);
	rtnl_tc_set_parent(TC_CAST(q), TC_H_CLSACT);
	rtnl_tc_set_handle(TC_CAST(q), 0xffff0000u);
	r = rtnl_tc_set_kind(TC_CAST(q), "clsact");
	if (r == 0)
		r = rtnl_qdisc_add(sk, q, NLM_F_CREATE | NLM_F_EXCL);
	r = tg_nl_to_errno(r);
	return r == -EEXIST ? 0 : r < 0 ? r : 1;
}

/* The steering as n asks; 1 when it changed anything. */
static int declare_steering(struct nl_sock *sk, const struct shaper_node *n, int ifb,
			    struct shaper_repairs *rep)
{
	struct steer want[STEER_MAX];
	struct filters_seen fs;
	size_t k = steer_want(n, ifb, want);
	int r, cur = -1, target;

	r = read_filters(sk, n->uplink, &fs);
	if (r < 0)
		return r;
	for (int i = 0; i < 2 && cur < 0; i++)
		if (steer_equal(&fs.prio[i], want, k))
			cur = i;
	if (cur >= 0) {
		int other = 1 - cur;

		if (fs.prio[other].n == 0 && !fs.prio[other].foreign)
			return 0;
		/* A set left half-made (or an old one): the right one holds meanwhile. */
		rep->filters++;
		r = del_prio(sk, n->uplink, (uint16_t)(STEER_PRIO_A + other));
		return r < 0 ? r : 1;
	}
	r = put_clsact(sk, n->uplink);
	if (r < 0)
		return r;
	rep->clsact += r > 0;
	/* The new set goes where nothing is; with both taken, the later priority gives way. */
	target = fs.prio[0].n == 0 && !fs.prio[0].foreign ? 0 : 1;
	if (target == 1 && (fs.prio[1].n || fs.prio[1].foreign)) {
		r = del_prio(sk, n->uplink, STEER_PRIO_B);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < k; i++) {
		r = put_steer(sk, n->uplink, (uint16_t)(STEER_PRIO_A + target), &want[i]);
		if (r < 0) {
			del_prio(sk, n->uplink, (uint16_t)(STEER_PRIO_A + target));
			return r;
		}
	}
	rep->filters++;
	if (fs.prio[1 - target].n || fs.prio[1 - target].foreign) {
		r = del_prio(sk, n->uplink, (uint16_t)(STEER_PRIO_A + 1 - target));
		return r < 0 ? r : 1;
	}
	return 1;
}

/* ---- the IFB, its root and the node class ---- */

/*
 * The declaration's stamp, kept as tollgate-inet's alias: a hash of what it
 * was declared from. A probe reads it with the link (no tc reads: the kernel
 * answers a tc "get" by notifying every tc listener).
 */
static void stamp_of(const struct shaper_node *n, int ifb, char ret[64])
{
	uint64_t h = hash_fnv1a64("tollgate-inet/1", 15, FNV1A64_INIT);

	h = hash_fnv1a64(&n->uplink, sizeof(n->uplink), h);
	h = hash_fnv1a64(&ifb, sizeof(ifb), h);
	h = hash_fnv1a64(&n->node_ceil_bps, sizeof(n->node_ceil_bps), h);
	h = hash_fnv1a64(&n->mtu, sizeof(n->mtu), h);
	for (size_t i = 0; i < n->n_internal; i++) {
		h = hash_fnv1a64(&n->internal[i].net, sizeof(n->internal[i].net), h);
		h = hash_fnv1a64(&n->internal[i].prefix, sizeof(n->internal[i].prefix), h);
	}
	snprintf(ret, 64, "tollgate declared %016llx", (unsigned long long)h);
}

/* tollgate-inetdl's: its node class and MTU are all it is declared from. */
static void stamp_in_of(const struct shaper_node *n, int ifb, char ret[64])
{
	uint64_t h = hash_fnv1a64("tollgate-inetdl/1", 17, FNV1A64_INIT);

	h = hash_fnv1a64(&ifb, sizeof(ifb), h);
	h = hash_fnv1a64(&n->in_ceil_bps, sizeof(n->in_ceil_bps), h);
	h = hash_fnv1a64(&n->mtu, sizeof(n->mtu), h);
	snprintf(ret, 64, "tollgate declared %016llx", (unsigned long long)h);
}

struct ifb_seen {
	int ifindex;  /* 0: missing */
	bool up, htb; /* admin up; root qdisc is HTB */
	char alias[128];
};

static int read_ifb(struct nl_sock *sk, const char *name, struct ifb_seen *ret)
{
	_cleanup_link_ struct rtnl_link *l = NULL;
	int r = tg_nl_to_errno(rtnl_link_get_kernel(sk, 0, name, &l));

	memset(ret, 0, sizeof(*ret));
	if (r == -ENODEV || r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	ret->ifindex = rtnl_link_get_ifindex(l);
	ret->up = rtnl_link_get_flags(l) & IFF_UP;
	ret->htb = strcmp(rtnl_link_get_qdisc(l) ?: "", "htb") == 0;
	snprintf(ret->alias, sizeof(ret->alias), "%s", rtnl_link_get_ifalias(l) ?: "");
	return 0;
}

static int set_alias(struct nl_sock *sk, int ifindex, const char *alias)
{
	_cleanup_link_ struct rtnl_link *cur = rtnl_link_alloc();
	_cleanup_link_ struct rtnl_link *chg = rtnl_link_alloc();

	if (!cur || !chg)
		return -ENOMEM;
	rtnl_link_set_ifindex(cur, ifindex);
	rtnl_link_set_ifalias(chg, alias);
	return tg_nl_to_errno(rtnl_link_change(sk, cur, chg, 0));
}

/* Adds class 1:1 where it is missing: EEXIST (the usual answer) changes nothing. */
static int put_node_class(struct nl_sock *sk, uint64_t ceil_bps, int mtu, int ifb, int flags)
{
	return shaper_put_class_flags(sk, ifb, TC_HANDLE(1, 0), TC_HANDLE(1, 1), ceil_bps, ceil_bps,
				      0, 0, mtu, flags);
}

/*
 * HTB 1: with class 1:1 at the node's ceiling, read in one class dump. A root
 * that is not ours, or that holds classes outside 1:1 (made while 1:1 was
 * missing), is deleted and made anew: its classes are gone then (*lost),
 * and the caller puts every pod's back.
 */
static int declare_root(struct nl_sock *sk, uint64_t ceil_bps, int mtu, int ifb, bool htb,
			struct shaper_repairs *rep, bool *lost)
{
	_cleanup_nl_cache_ struct nl_cache *cache = NULL;
	_cleanup_class_ struct rtnl_class *one = NULL;
	bool stray = false, right = false;
	int r;

	if (htb && rtnl_class_alloc_cache(sk, ifb, &cache) == 0) {
		one = rtnl_class_get(cache, ifb, TC_HANDLE(1, 1));
		for (struct nl_object *o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o))
			stray |= rtnl_tc_get_parent(TC_CAST(o)) == TC_H_ROOT &&
				 rtnl_tc_get_handle(TC_CAST(o)) != TC_HANDLE(1, 1);
		right = one && rtnl_tc_get_parent(TC_CAST(one)) == TC_H_ROOT &&
			(uint64_t)rtnl_htb_get_ceil(one) == ceil_bps / 8;
	}
	if (htb && !stray && right)
		return 0;
	if (htb && !stray) {
		/* 1:1 missing or at another ceiling: put it right in place. */
		r = put_node_class(sk, ceil_bps, mtu, ifb, NLM_F_CREATE | NLM_F_REPLACE);
		if (r == 0) {
			rep->node_class++;
			return 1;
		}
	}
	rep->root++;
	*lost = true;
	r = shaper_del_qdisc(sk, ifb, TC_H_ROOT);
	if (r == 0)
		r = shaper_put_htb_root(sk, ifb, 0);
	if (r == 0)
		r = put_node_class(sk, ceil_bps, mtu, ifb, NLM_F_CREATE | NLM_F_EXCL);
	return r < 0 ? r : 1;
}

/*
 * The plugin's probe: reads only, and adds 1:1 where a kill left the root
 * without it (2: then the tree was broken, and the caller declares with
 * SHAPER_RESTORE: classes made meanwhile at the top, or lost with an old
 * root, are put right).
 */
/* tollgate-inetdl as declared (1: not), adding a 1:1 a kill left out (2). */
static int probe_in_path(struct nl_sock *sk, const struct shaper_node *n, int *ret_ifb)
{
	struct ifb_seen ib;
	char stamp[64];
	int r = read_ifb(sk, SHAPER_INET_IN_IFB, &ib);

	if (r < 0)
		return r;
	stamp_in_of(n, ib.ifindex, stamp);
	if (!ib.ifindex || !ib.up || !ib.htb || strcmp(ib.alias, stamp) != 0)
		return 1;
	r = put_node_class(sk, n->in_ceil_bps, n->mtu, ib.ifindex, NLM_F_CREATE | NLM_F_EXCL);
	if (r < 0 && r != -EEXIST)
		return r;
	if (ret_ifb)
		*ret_ifb = ib.ifindex;
	return r == 0 ? 2 : 0;
}

static int probe_inet_path(struct nl_sock *sk, const struct shaper_node *n, int *ret_ifb)
{
	struct steer want[STEER_MAX];
	struct filters_seen fs;
	struct ifb_seen ib;
	char stamp[64];
	size_t k;
	int r = read_ifb(sk, SHAPER_INET_IFB, &ib);

	if (r < 0)
		return r;
	stamp_of(n, ib.ifindex, stamp);
	if (!ib.ifindex || !ib.up || !ib.htb || strcmp(ib.alias, stamp) != 0)
		return 1;
	k = steer_want(n, ib.ifindex, want);
	r = read_filters(sk, n->uplink, &fs);
	if (r < 0)
		return r;
	/* Declared: the right set in one priority, nothing in the other. */
	for (int i = 0; i < 2; i++)
		if (steer_equal(&fs.prio[i], want, k) && fs.prio[1 - i].n == 0 &&
		    !fs.prio[1 - i].foreign) {
			/* A root left without 1:1 would nest namespaces at the top. */
			r = put_node_class(sk, n->node_ceil_bps, n->mtu, ib.ifindex,
					   NLM_F_CREATE | NLM_F_EXCL);
			if (r < 0 && r != -EEXIST)
				return r;
			*ret_ifb = ib.ifindex;
			return r == 0 ? 2 : 0;
		}
	return 1;
}

/* The worse of two probes: an error, then 1 (redeclare), then 2 (restore), then 0. */
static int probe_worse(int a, int b)
{
	if (a < 0 || b < 0)
		return a < 0 ? a : b;
	return a == 1 || b == 1 ? 1 : a > b ? a : b;
}

/*
 * tollgate-inetdl, its root and node class: one declaration of the same
 * kind as tollgate-inet's, without steering (each pod's veth steers its own).
 */
static int declare_in_path(struct nl_sock *sk, const struct shaper_node *n, unsigned flags,
			   struct shaper_repairs *rep, bool *lost, int *ret_ifb, bool *stamped,
			   struct tg_err *e)
{
	struct ifb_seen ib;
	char stamp[64];
	int r = read_ifb(sk, SHAPER_INET_IN_IFB, &ib), wrote = 0;

	if (r == 0 && (!ib.ifindex || !ib.up)) {
		rep->ifb++;
		wrote = 1;
		r = shaper_ensure_ifb(sk, SHAPER_INET_IN_IFB, n->mtu, 0, &ib.ifindex);
	}
	if (r < 0)
		return tc_fail(e, r, "creating %s", SHAPER_INET_IN_IFB);
	stamp_in_of(n, ib.ifindex, stamp);
	*lost |= (flags & SHAPER_RESTORE) || strcmp(ib.alias, stamp) != 0;
	r = declare_root(sk, n->in_ceil_bps, n->mtu, ib.ifindex, ib.htb, rep, lost);
	if (r < 0)
		return tc_fail(e, r, "declaring the HTB root and node class of %s",
			       SHAPER_INET_IN_IFB);
	wrote |= r;
	*stamped = strcmp(ib.alias, stamp) == 0;
	*ret_ifb = ib.ifindex;
	return wrote;
}

/* Stamps one IFB (or takes its stamp off while classes are to be put back). */
static int put_stamp(struct nl_sock *sk, const char *name, int ifb, const char *alias,
		     const char *stamp, bool clear, struct tg_err *e)
{
	int r = 0;

	if (clear)
		r = alias[0] ? set_alias(sk, ifb, "") : 0;
	else if (strcmp(alias, stamp) != 0)
		r = set_alias(sk, ifb, stamp);
	return r < 0 ? tc_fail(e, r, "marking %s declared", name) : 0;
}

/* tollgate-inet, its root and node class, and the uplink's steering. */
static int declare_out_path(struct nl_sock *sk, const struct shaper_node *n, unsigned flags,
			    struct shaper_repairs *rep, bool *lost, struct ifb_seen *ib,
			    struct tg_err *e)
{
	char stamp[64];
	int r = read_ifb(sk, SHAPER_INET_IFB, ib), wrote = 0;

	if (r == 0 && (!ib->ifindex || !ib->up)) {
		rep->ifb++;
		wrote = 1;
		r = shaper_ensure_ifb(sk, SHAPER_INET_IFB, n->mtu, 0, &ib->ifindex);
	}
	if (r < 0)
		return tc_fail(e, r, "creating %s", SHAPER_INET_IFB);
	if ((r = TG_FAILPOINT("tc.node.ifb.after", e)) < 0)
		return r;
	/*
	 * Without this declaration's stamp, an earlier one may have been cut
	 * short after it made the root anew: the classes it lost are put back.
	 */
	stamp_of(n, ib->ifindex, stamp);
	*lost |= (flags & SHAPER_RESTORE) || strcmp(ib->alias, stamp) != 0;
	r = declare_root(sk, n->node_ceil_bps, n->mtu, ib->ifindex, ib->htb, rep, lost);
	if (r < 0)
		return tc_fail(e, r, "declaring the HTB root and node class of %s",
			       SHAPER_INET_IFB);
	wrote |= r;
	if ((r = TG_FAILPOINT("tc.node.root.after", e)) < 0)
		return r;
	r = declare_steering(sk, n, ib->ifindex, rep);
	if (r < 0)
		return tc_fail(e, r, "steering internet traffic of the uplink to %s",
			       SHAPER_INET_IFB);
	wrote |= r;
	if ((r = TG_FAILPOINT("tc.node.steer.after", e)) < 0)
		return r;
	return wrote;
}

int shaper_node_declare(struct nl_sock *sk, const struct shaper_node *n, unsigned flags,
			struct shaper_repairs *rep, bool *ret_lost, int *ret_ifb, struct tg_err *e)
{
	struct shaper_repairs local = { 0 };
	struct ifb_seen out = { 0 }, in = { 0 };
	bool lost = false, clear;
	char stamp[64];
	int ifb = 0, r = 0, wrote = 0;

	if (!rep)
		rep = &local;
	if (ret_ifb)
		*ret_ifb = 0;
	if (n->egress && n->uplink <= 0)
		return tg_fail(e, CNI_ERR_CONFIG, -ENODEV,
			       "tc: internet shaping needs an uplink (none is configured and "
			       "there is no default route)");
	if (flags & SHAPER_PROBE) {
		if (n->egress)
			r = probe_inet_path(sk, n, ret_ifb ? ret_ifb : &ifb);
		if (r >= 0 && n->ingress)
			r = probe_worse(r, probe_in_path(sk, n, NULL));
		return r < 0 ? tc_fail(e, r, "reading %s, %s and the uplink's filters",
				       SHAPER_INET_IFB, SHAPER_INET_IN_IFB)
			     : r;
	}
	if (n->egress) {
		r = declare_out_path(sk, n, flags, rep, &lost, &out, e);
		if (r < 0)
			return r;
		wrote |= r;
	}
	if (n->ingress) {
		bool stamped;

		r = declare_in_path(sk, n, flags, rep, &lost, &in.ifindex, &stamped, e);
		if (r < 0)
			return r;
		wrote |= r;
		read_ifb(sk, SHAPER_INET_IN_IFB, &in);
	}
	/*
	 * Last, the stamps: a declaration cut short leaves none, and the next
	 * one does it again. With classes to put back, the caller stamps once
	 * they are (shaper_node_stamp); until then no stamp stays.
	 */
	clear = lost && ret_lost;
	if (n->egress) {
		stamp_of(n, out.ifindex, stamp);
		r = put_stamp(sk, SHAPER_INET_IFB, out.ifindex, out.alias, stamp, clear, e);
	}
	if (r == 0 && n->ingress) {
		stamp_in_of(n, in.ifindex, stamp);
		r = put_stamp(sk, SHAPER_INET_IN_IFB, in.ifindex, in.alias, stamp, clear, e);
	}
	if (r < 0)
		return r;
	if (ret_lost)
		*ret_lost = lost;
	if (ret_ifb)
		*ret_ifb = out.ifindex;
	return wrote ? 1 : 0;
}

int shaper_node_stamp(struct nl_sock *sk, const struct shaper_node *n, int ifb, struct tg_err *e)
{
	char stamp[64];
	int r = 0, in;

	if (n->egress) {
		stamp_of(n, ifb, stamp);
		r = set_alias(sk, ifb, stamp);
		if (r < 0)
			return tc_fail(e, r, "marking %s declared", SHAPER_INET_IFB);
	}
	in = n->ingress ? shaper_ifindex(sk, SHAPER_INET_IN_IFB) : 0;
	if (in) {
		stamp_in_of(n, in, stamp);
		r = set_alias(sk, in, stamp);
	}
	return r < 0 ? tc_fail(e, r, "marking %s declared", SHAPER_INET_IN_IFB) : 0;
}

/* Retires the classes of one IFB whose minor is not kept. */
static int retire_on(struct nl_sock *sk, const char *name, const uint16_t *keep, size_t n_keep,
		     unsigned *retired)
{
	_cleanup_nl_cache_ struct nl_cache *cache = NULL;
	int ifb = shaper_ifindex(sk, name), r;

	if (!ifb)
		return 0;
	r = tg_nl_to_errno(rtnl_class_alloc_cache(sk, ifb, &cache));
	if (r < 0)
		return r;
	/* Pod classes first: HTB keeps a class while it has children. */
	for (int pass = 0; pass < 2; pass++) {
		for (struct nl_object *o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
			uint32_t id = rtnl_tc_get_handle(TC_CAST(o));
			uint16_t minor = (uint16_t)(id & 0xffff);
			bool pod = minor >= SHAPER_POD_CLASS_BASE, kept = false;

			if (id >> 16 != 1 || minor < SHAPER_NS_CLASS_MIN || pod != (pass == 0))
				continue;
			for (size_t i = 0; i < n_keep && !kept; i++)
				kept = keep[i] == minor;
			if (!kept && shaper_del_class(sk, ifb, id) == 0)
				(*retired)++;
		}
	}
	return 0;
}

int shaper_retire_classes(struct nl_sock *sk, const uint16_t *keep, const uint16_t *keep_in,
			  size_t n_keep, size_t n_keep_in, unsigned *ret_retired)
{
	unsigned retired = 0;
	int r = retire_on(sk, SHAPER_INET_IFB, keep, n_keep, &retired);

	if (r == 0)
		r = retire_on(sk, SHAPER_INET_IN_IFB, keep_in, n_keep_in, &retired);
	if (ret_retired)
		*ret_retired = retired;
	return r;
}
