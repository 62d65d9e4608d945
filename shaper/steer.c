// SPDX-License-Identifier: Apache-2.0
/*
 * A pod's downloads into tollgate-inetdl: the host veth's clsact egress
 * hook holds one cls_bpf filter, a classic BPF program of five instructions
 * that matches a packet whose mark has the internet mark, and a mirred
 * action that redirects it to the IFB. nftables gives that mark (and the
 * pod's class as the packet's priority) only to a pod's internet packets,
 * after the node undid the masquerade, so internal traffic never meets the
 * shared queues. The IFB hands a packet back to the device that redirected
 * it, past this hook; mirred does that where bpf_redirect would not.
 *
 * libnl knows no "bpf" classifier: the message is libnl's, with the
 * classifier's options added through its attribute API and the action
 * through rtnl_act_fill.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/tc_act/tc_mirred.h>
#include <string.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/route/act/mirred.h>
#include <netlink/route/action.h>
#include <netlink/route/classifier.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/tc.h>

#include "lib/nl.h"
#include "lib/nl_cleanup.h"
#include "lib/util.h"
#include "shaper/internal.h"

#define STEER_PRIO 1
#define STEER_HANDLE 1

static struct rtnl_qdisc *hook_qdisc(int ifindex, const char *kind)
{
	struct rtnl_qdisc *q = rtnl_qdisc_alloc();

	if (!q)
		return NULL;
	rtnl_tc_set_ifindex(TC_CAST(q), ifindex);
	rtnl_tc_set_parent(TC_CAST(q), TC_H_CLSACT);
	rtnl_tc_set_handle(TC_CAST(q), TC_H_MAKE(TC_H_CLSACT, 0));
	if (rtnl_tc_set_kind(TC_CAST(q), kind) < 0) {
		rtnl_qdisc_put(q);
		return NULL;
	}
	return q;
}

int shaper_put_clsact(struct nl_sock *sk, int ifindex)
{
	_cleanup_qdisc_ struct rtnl_qdisc *q = hook_qdisc(ifindex, "clsact");
	_cleanup_qdisc_ struct rtnl_qdisc *old = NULL;
	int r;

	if (!q)
		return -ENOMEM;
	r = tg_nl_to_errno(rtnl_qdisc_add(sk, q, NLM_F_CREATE | NLM_F_EXCL));
	if (r != -EEXIST)
		return r;
	/*
	 * Pods attached by an older version have an ingress qdisc there (the
	 * kernel deletes it only when the kind named is its own, and refuses
	 * to replace it with clsact): it goes, and the caller puts its
	 * redirect back under the clsact.
	 */
	old = hook_qdisc(ifindex, "ingress");
	if (!old)
		return -ENOMEM;
	r = tg_nl_to_errno(rtnl_qdisc_delete(sk, old));
	if (r == -EINVAL || r == -ENOENT)
		return 0; /* a clsact already */
	if (r < 0)
		return r;
	return tg_nl_to_errno(rtnl_qdisc_add(sk, q, NLM_F_CREATE | NLM_F_EXCL));
}

/* mark & m ? match (the filter's action) : no match. */
static void steer_program(uint32_t m, struct sock_filter prog[5])
{
	const struct sock_filter p[5] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_AD_OFF + SKF_AD_MARK)),
		BPF_STMT(BPF_ALU | BPF_AND | BPF_K, m),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, m, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0xffffffffu), /* -1: matched, the default class */
		BPF_STMT(BPF_RET | BPF_K, 0),		/* 0: no match */
	};

	memcpy(prog, p, sizeof(p));
}

static struct rtnl_cls *steer_cls(int ifindex)
{
	struct rtnl_cls *cls = rtnl_cls_alloc();

	if (!cls)
		return NULL;
	rtnl_tc_set_ifindex(TC_CAST(cls), ifindex);
	rtnl_tc_set_parent(TC_CAST(cls), SHAPER_CLSACT_EGRESS);
	rtnl_tc_set_handle(TC_CAST(cls), STEER_HANDLE);
	rtnl_cls_set_prio(cls, STEER_PRIO);
	rtnl_cls_set_protocol(cls, ETH_P_IP);
	if (rtnl_tc_set_kind(TC_CAST(cls), "bpf") < 0) {
		rtnl_cls_put(cls);
		return NULL;
	}
	return cls;
}

int shaper_put_steer(struct nl_sock *sk, int ifindex, uint32_t mark, int ifb)
{
	_cleanup_cls_ struct rtnl_cls *cls = steer_cls(ifindex);
	_cleanup_act_ struct rtnl_act *act = rtnl_act_alloc();
	struct nl_msg *msg = NULL;
	struct sock_filter prog[5];
	struct nlattr *opts;
	int r;

	if (!cls || !act || rtnl_tc_set_kind(TC_CAST(act), "mirred") < 0)
		return -ENOMEM;
	rtnl_mirred_set_action(act, TCA_EGRESS_REDIR);
	rtnl_mirred_set_policy(act, TC_ACT_STOLEN);
	rtnl_mirred_set_ifindex(act, (uint32_t)ifb);
	steer_program(mark, prog);
	r = rtnl_cls_build_add_request(cls, NLM_F_CREATE | NLM_F_REPLACE, &msg);
	if (r < 0)
		return tg_nl_to_errno(r);
	opts = nla_nest_start(msg, TCA_OPTIONS);
	if (!opts || nla_put_u16(msg, TCA_BPF_OPS_LEN, ARRAY_SIZE(prog)) < 0 ||
	    nla_put(msg, TCA_BPF_OPS, sizeof(prog), prog) < 0 ||
	    rtnl_act_fill(msg, TCA_BPF_ACT, act) < 0) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	nla_nest_end(msg, opts);
	r = nl_send_sync(sk, msg); /* frees msg */
	return tg_nl_to_errno(r);
}

int shaper_del_steer(struct nl_sock *sk, int ifindex)
{
	_cleanup_cls_ struct rtnl_cls *cls = steer_cls(ifindex);
	int r;

	if (!cls)
		return -ENOMEM;
	r = tg_nl_to_errno(rtnl_cls_delete(sk, cls, 0));
	return r == -ENOENT || r == -EINVAL || r == -ENODEV ? 0 : r;
}

struct steer_seen {
	bool found;
};

static void each_steer(struct nl_object *o, void *arg)
{
	struct steer_seen *s = arg;
	struct rtnl_cls *c = (struct rtnl_cls *)o;

	if (rtnl_cls_get_prio(c) == STEER_PRIO &&
	    strcmp(rtnl_tc_get_kind(TC_CAST(c)) ?: "", "bpf") == 0 &&
	    rtnl_tc_get_handle(TC_CAST(c)) == STEER_HANDLE)
		s->found = true;
}

int shaper_steer_check(struct nl_sock *sk, int ifindex, int ifb)
{
	_cleanup_nl_cache_ struct nl_cache *cache = NULL;
	struct steer_seen seen = { false };
	int r = tg_nl_to_errno(rtnl_cls_alloc_cache(sk, ifindex, SHAPER_CLSACT_EGRESS, &cache));

	(void)ifb; /* libnl does not parse cls_bpf's action: the filter's presence is read */
	if (r == -EINVAL || r == -ENOENT || r == -EOPNOTSUPP)
		return 0;
	if (r < 0)
		return r;
	nl_cache_foreach(cache, each_steer, &seen);
	return seen.found;
}
