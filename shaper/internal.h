/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_SHAPER_INTERNAL_H
#define TG_SHAPER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <netlink/route/tc.h>

#include "shaper/shaper.h"

/*
 * tc handles major:minor are libnl's TC_HANDLE (netlink/route/tc.h): class 1:1
 * is TC_HANDLE(1, 1), the root qdisc 1: is TC_HANDLE(1, 0).
 */

/* The minors of tollgate-inet's classes: namespaces' (up to SHAPER_NS_CLASS_MAX), then pods'. */
#define SHAPER_NS_CLASS_MIN 0x0002
#define SHAPER_POD_CLASS_BASE 0x8000
#define SHAPER_POD_CLASS_MAX 0xfffe
/*
 * The guaranteed rate of a pod's internet class under a budgeted namespace:
 * HTB lets every class send at its own rate whatever its parents' ceils, so
 * the pods' rates must add up to far less than any grant (250 pods: 2 Mbit/s).
 * Above it they borrow from the namespace class, whose ceil is the grant.
 */
#define SHAPER_BUDGET_POD_RATE_BPS 8000ULL
/* ... and its leaf queue holds queueLatencyMs at this many times the fallback. */
#define SHAPER_BUDGET_QUEUE_X 10

/* The IFB of a pod: its host veth's name with "ti" for "tg". */
void shaper_ifb_name(const char *host_veth, char ret[IFNAMSIZ]);

/*
 * The ceilings a pod's shaping gives its classes, bits/s: worked out once
 * (layout.c), so that the classes shaper_pod_add makes and the ones CHECK,
 * `show` and the exporter expect can never disagree. Each cap nests in the
 * one above it; "none" is SHAPER_LINE_BPS.
 */
struct shaper_ceilings {
	uint64_t to_pod;      /* host veth 1:1: all traffic to the pod */
	uint64_t to_pod_inet; /* host veth 1:2: internet -> pod */
	uint64_t node;	      /* tollgate-inet 1:1 */
	uint64_t ns;	      /* tollgate-inet 1:<ns> */
	uint64_t pod_inet;    /* tollgate-inet 1:<pod>: pod -> internet */
	uint64_t node_in;     /* tollgate-inetdl 1:1 */
	uint64_t ns_in;	      /* tollgate-inetdl 1:<ns> */
	uint64_t pod_in;      /* tollgate-inetdl 1:<pod>: internet -> pod */
};
void shaper_ceilings(const struct shaping *s, struct shaper_ceilings *ret);

/*
 * A pod's shaping as the kernel objects it is made of, in the order they are
 * made (layout.c): shaper_pod_add makes them one by one, and
 * shaper_pod_classes lists the classes among them, so that what is made
 * and what CHECK, `show` and the exporter expect come from one description.
 */
enum shaper_obj {
	SHAPER_OBJ_IFB,	     /* an IFB `dev`, up, in the pod's link group */
	SHAPER_OBJ_ROOT,     /* HTB 1: at the root of `dev`; id: its default class's minor */
	SHAPER_OBJ_CLASS,    /* HTB class `id` under `parent` */
	SHAPER_OBJ_QUEUE,    /* the bfifo leaf of class `id` */
	SHAPER_OBJ_REDIRECT, /* the ingress of `dev`: every packet mirred to `to` */
	SHAPER_OBJ_STEER, /* the egress of `dev`: packets with the internet mark mirred to `to` */
	SHAPER_OBJ_DECLARED, /* a class the node's declaration makes: listed, never made here */
};
/* The failpoint checked once a step is made (test builds). */
enum shaper_point {
	SHAPER_AT_NONE,
	SHAPER_AT_INGRESS,  /* tc.pod.ingress.after */
	SHAPER_AT_IFB,	    /* tc.pod.ifb.after */
	SHAPER_AT_EGRESS,   /* tc.pod.egress.after */
	SHAPER_AT_NS_CLASS, /* tc.pod.ns-class.after */
	SHAPER_AT_INET,	    /* tc.pod.inet.after */
	SHAPER_AT_INET_IN,  /* tc.pod.inet-in.after */
	SHAPER_AT_STEER,    /* tc.pod.steer.after */
};
struct shaper_step {
	enum shaper_obj obj;
	char dev[IFNAMSIZ];
	char to[IFNAMSIZ]; /* SHAPER_OBJ_REDIRECT, SHAPER_OBJ_STEER: the IFB */
	uint32_t mark;	   /* SHAPER_OBJ_STEER: the mark it steers by */
	uint32_t id;
	uint32_t parent;     /* as the kernel reports it: TC_H_ROOT for a top class */
	uint64_t rate_bps;   /* 0: 1% of the ceiling */
	uint64_t ceil_bps;   /* a class's ceiling, a queue's class's */
	uint64_t burst_bits; /* 0: derived from the ceiling */
	/*
	 * The bucket of the guaranteed rate; 0: the burst. A pod's class under
	 * a budgeted namespace keeps one packet: what a leaf sends out of its
	 * own rate passes whatever its parent's ceil and is charged to the
	 * parent as debt, and a burst's worth of it at a join rate's ceil is a
	 * debt of tens of seconds that stalls the class after it is granted.
	 */
	uint64_t rate_burst_bits;
	bool listed; /* one of shaper_pod_classes' */
	/*
	 * A namespace class under a cluster budget: made at start_bps when
	 * missing, never replaced (its ceil is the grant, the agent's), and
	 * right as long as its ceil is at most ceil_bps.
	 */
	bool budgeted;
	uint64_t start_bps;
	enum shaper_level level;
	const char *direction, *traffic;
	enum shaper_point point;
};
#define SHAPER_POD_STEPS_MAX 24
/* The steps of one pod's shaping; returns how many. */
int shaper_pod_steps(const char *host_veth, const struct shaping *s,
		     struct shaper_step ret[SHAPER_POD_STEPS_MAX]);
/* Whom a class belongs to, for messages: "the pod's", "its namespace's", "the node's". */
extern const char *const shaper_level_what[3];

/* ---- shaper_*: tc helpers shared by the pod's objects (tc.c) and the node's (node.c) ---- */
struct nl_sock;
struct rtnl_class;
/* ifindex of a device ("" or NULL: the default route's), 0 when missing. */
int shaper_ifindex(struct nl_sock *sk, const char *name);
int shaper_put_class(struct nl_sock *sk, int ifindex, uint32_t parent, uint32_t id,
		     uint64_t rate_bps, uint64_t ceil_bps, uint64_t burst_bits,
		     uint64_t rate_burst_bits, int mtu);
int shaper_put_class_flags(struct nl_sock *sk, int ifindex, uint32_t parent, uint32_t id,
			   uint64_t rate_bps, uint64_t ceil_bps, uint64_t burst_bits,
			   uint64_t rate_burst_bits, int mtu, int flags);
int shaper_put_htb_root(struct nl_sock *sk, int ifindex, uint32_t defcls);
int shaper_put_leaf_queue(struct nl_sock *sk, int ifindex, uint32_t classid, uint64_t ceil_bps,
			  uint32_t queue_ms, int mtu);
/* An IFB, up; group: its link group (0: the default). */
int shaper_ensure_ifb(struct nl_sock *sk, const char *name, int mtu, uint32_t group,
		      int *ret_ifindex);
int shaper_del_class(struct nl_sock *sk, int ifindex, uint32_t id);
int shaper_del_qdisc(struct nl_sock *sk, int ifindex, uint32_t parent);
/* One terminal u32 node: a destination match (mask 0: every packet), passed or redirected. */
struct shaper_u32 {
	int ifindex;
	uint32_t parent, handle; /* handle 0: the kernel numbers it */
	uint16_t prio, protocol;
	uint32_t val, mask; /* host order */
	int off;	    /* of the match in the IP header */
	int redirect;	    /* mirred egress redirect to this ifindex; 0: pass */
};
int shaper_put_u32(struct nl_sock *sk, const struct shaper_u32 *f, int flags);

/* ---- a host veth's clsact (steer.c) ---- */
#define SHAPER_CLSACT_INGRESS TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS)
#define SHAPER_CLSACT_EGRESS TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS)
/* The veth's clsact, kept when it is there. */
int shaper_put_clsact(struct nl_sock *sk, int ifindex);
/*
 * The veth's egress hook: every IPv4 packet whose mark has all of `mark`
 * mirred to ifb (its downloads to tollgate-inetdl), replaced in place.
 */
int shaper_put_steer(struct nl_sock *sk, int ifindex, uint32_t mark, int ifb);
/* Removes it (0 when it is not there). */
int shaper_del_steer(struct nl_sock *sk, int ifindex);
/* 1 when the veth's egress hook steers to ifb, 0 when not, or a negative errno. */
int shaper_steer_check(struct nl_sock *sk, int ifindex, int ifb);
void shaper_fill_stats(struct rtnl_class *c, struct shaper_stats *st);

#endif
