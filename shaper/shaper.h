/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_SHAPER_H
#define TG_SHAPER_H

/*
 * tc shaping of one pod's traffic, through libnl-route-3 (HTB, bfifo, IFB,
 * u32 + mirred; nothing this kernel family lacks):
 *
 *   to the pod      host veth tgX, root HTB 1:
 *                     1:1 the pod's whole ingress (runtimeConfig.bandwidth ingressRate)
 *                     1:2 internet -> pod (internetIngress cap)   <- nft sets priority 1:2
 *                     1:3 internal (default when a whole-pod limit exists; else unshaped)
 *   from the pod    tgX ingress -> u32 match-all -> mirred -> IFB tiX, root HTB 1:
 *                     1:1 egressRate (only with a Kubernetes egress limit)
 *   to the internet uplink clsact egress: u32 pass for each internal CIDR, then
 *                     every other IPv4 packet -> mirred -> IFB tollgate-inet, root HTB 1:
 *                     (unclassified traffic is sent direct, unshaped)
 *                     1:1 node cap -> 1:<ns> namespace cap -> 1:<pod> pod cap
 *                     <- nft sets priority 1:<pod> on the pod's internet-bound packets
 *                     The uplink's own root qdisc is never touched.
 *
 * Who makes what: the node's part (tollgate-inet, its root and 1:1, the
 * uplink's clsact and filters) is declared once for the node by
 * shaper_node_declare; a namespace's class is made by its first pod and kept
 * until shaper_retire_classes finds the namespace without pods (so a pod
 * never attaches under a class being deleted); a pod's classes are its own.
 *
 * Caps nest through HTB borrowing: a class is guaranteed 1% of its ceiling
 * and borrows the rest from its parent, so siblings share what is free in
 * proportion to equal quanta, and no parent's ceiling is ever exceeded.
 */

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"
#include "lib/ip4.h"
#include "lib/shaping.h"

#define SHAPER_INET_INGRESS_CLASS 0x00010002u /* 1:2 on the host veth */
#define SHAPER_INET_IFB "tollgate-inet"	      /* the uplink's internet traffic, shaped */
#define SHAPER_INET_IN_IFB "tollgate-inetdl"  /* the pods' internet downloads, shaped */
#define SHAPER_LINE_BPS 32000000000ULL	      /* "unlimited": the most HTB takes via libnl */
#define SHAPER_NS_CLASS_MAX 0x7ffe	      /* the last namespace class; pods' follow */

/* The classid nftables gives a pod's internet-bound packets: 1:<pod class>, 0: none. */
uint32_t shaper_egress_classid(const struct shaping *s);
/* ... and its downloads (on tollgate-inetdl), 0: none. */
uint32_t shaper_ingress_classid(const struct shaping *s);

/* Who holds uplink classes already (every other shaped attachment). */
struct shaper_class_holder {
	const char *k8s_namespace;
	uint16_t ns_class, pod_class;
};
/*
 * Gives a pod with internet egress shaping its uplink classes, keeping those it
 * has: its namespace's (shared with the namespace's other pods, else a free one
 * near the namespace's hash) and its own (from its address, probing on a
 * clash). Clears them when it shapes no internet egress. -ENOSPC when full.
 */
int shaper_classes_assign(struct shaping *s, const char *k8s_namespace, uint32_t ip,
			  const struct shaper_class_holder *others, size_t n);

/* One class Tollgate makes, where it lives and what it shapes (metric labels). */
enum shaper_level { SHAPER_POD, SHAPER_NAMESPACE, SHAPER_NODE };
struct shaper_class {
	char dev[IFNAMSIZ];
	uint32_t classid;
	uint32_t parent; /* the class it must hang under (TC_H_ROOT: the root) */
	enum shaper_level level;
	const char *direction; /* "egress", "ingress" */
	const char *traffic;   /* "all", "internet", "internal" */
	uint64_t ceil_bps;     /* what its ceiling must be */
	bool budgeted;	       /* a budget's namespace class: ceil_bps is its most */
};
#define SHAPER_POD_CLASSES_MAX 10
/*
 * The classes of one pod's shaping, the pod's own first, then (with internet
 * egress shaping) its namespace's and the node's. Returns how many.
 */
int shaper_pod_classes(const char *host_veth, const struct shaping *s,
		       struct shaper_class ret[SHAPER_POD_CLASSES_MAX]);

struct nl_sock;

/* ---- the node's internet-shaping path ---- */
struct shaper_node {
	int uplink;		      /* ifindex internet traffic leaves by */
	const struct cidr4 *internal; /* passed unshaped */
	size_t n_internal;
	uint64_t node_ceil_bps; /* class 1:1; SHAPER_LINE_BPS: none */
	int mtu;
	bool egress;	      /* tollgate-inet and the uplink's steering */
	bool ingress;	      /* tollgate-inetdl */
	uint64_t in_ceil_bps; /* its class 1:1; SHAPER_LINE_BPS: none */
};
/* What a declaration wrote, by object. */
struct shaper_repairs {
	unsigned ifb, root, node_class, clsact, filters;
};
#define SHAPER_PROBE 1u	  /* read only (but for a missing 1:1): 1 when anything differs */
#define SHAPER_RESTORE 2u /* the tree was broken: classes are to be put back (*ret_lost) */
/*
 * Declares the path: reads the kernel (the IFB, its root, 1:1, the uplink's
 * filters) and changes only what differs; filters make-before-break. With
 * SHAPER_PROBE it only reads, and returns 1 when anything differs, 2 when it
 * had to add a missing 1:1 (declare again with SHAPER_RESTORE). *ret_lost:
 * the root was made anew, SHAPER_RESTORE, or the IFB lacked this
 * declaration's stamp (one cut short after it made the root anew leaves
 * none): every namespace and pod class is to be put back by the caller,
 * which then stamps the declaration (shaper_node_stamp); until then the IFB
 * carries no stamp, so that a declaration cut short puts them back again. *ret_ifb: tollgate-inet's ifindex.
 * Returns 1 when it wrote anything, 0 when all was right, or a negative
 * errno with e set.
 */
int shaper_node_declare(struct nl_sock *sk, const struct shaper_node *n, unsigned flags,
			struct shaper_repairs *rep, bool *ret_lost, int *ret_ifb, struct tg_err *e);
/* Marks tollgate-inet (ifb) declared from n, once the lost classes are back. */
int shaper_node_stamp(struct nl_sock *sk, const struct shaper_node *n, int ifb, struct tg_err *e);
/*
 * Deletes the classes of tollgate-inet whose minor is not in `keep`, and of
 * tollgate-inetdl not in `keep_in` (the namespace and pod classes of every
 * attachment shaped in that direction): namespaces that have no pod
 * left, and leaks. The caller holds the store's lock, so no ADD can be
 * attaching under a class deleted here.
 */
int shaper_retire_classes(struct nl_sock *sk, const uint16_t *keep, const uint16_t *keep_in,
			  size_t n_keep, size_t n_keep_in, unsigned *ret_retired);

/*
 * Installs (or replaces) the pod's qdiscs, classes and filters, on a node
 * whose path is declared. Its namespace's class is made when missing and
 * otherwise left as it is (shared; its rate is the reshape's to set). inet_ifb: tollgate-inet's ifindex (0: looked up).
 * group: the link group the pod's IFB joins (its host veth's, so that one
 * request deletes both). queue_ms sizes the leaf queues; mtu sizes bursts
 * and quanta.
 */
int shaper_pod_add(struct nl_sock *sk, const char *host_veth, int inet_ifb, uint32_t group,
		   const struct shaping *s, uint32_t queue_ms, int mtu, struct tg_err *e);
/*
 * Puts back the pod's classes on the node's IFBs only (after a root was made
 * anew): its own devices, which may not exist yet, are left as they are.
 */
int shaper_pod_restore(struct nl_sock *sk, const char *host_veth, int inet_ifb,
		       const struct shaping *s, uint32_t queue_ms, int mtu, struct tg_err *e);
/*
 * A running pod's classes from `old` (as recorded; NULL: unknown) to `s`, make
 * before break: every class of `s` is changed in place or made (the
 * namespace's too: a reshape owns its rate), and only then what `s` no longer
 * has is removed. A failure midway leaves each class at its old caps or its
 * new ones, never the pod without; a rerun finishes the change. In two
 * phases where the pod's nftables elements change between them (a download
 * class moved from its veth to tollgate-inetdl).
 */
#define SHAPER_MAKE 1u	/* the classes of s made or changed in place */
#define SHAPER_BREAK 2u /* what s no longer has removed (once nftables points at the new) */
#define SHAPER_CHANGE (SHAPER_MAKE | SHAPER_BREAK)
int shaper_pod_change(struct nl_sock *sk, const char *host_veth, uint32_t group,
		      const struct shaping *old, const struct shaping *s, uint32_t queue_ms,
		      int mtu, unsigned phases, struct tg_err *e);
/* tollgate-inet's ifindex, 0 when it is missing. */
int shaper_inet_ifindex(struct nl_sock *sk);
/* tollgate-inetdl's ifindex, 0 when it is missing. */
int shaper_inet_in_ifindex(struct nl_sock *sk);
/*
 * A budgeted namespace's class on tollgate-inet (ifindex inet_ifb) to
 * ceil_bps, its grant: one change in place (its guaranteed rate 1% of it,
 * its burst scaled to it); no pod's class is touched. -ENOENT when the class
 * is missing (its namespace's first pod makes it).
 */
int shaper_ns_set_ceil(struct nl_sock *sk, int inet_ifb, uint16_t ns_class, uint64_t ceil_bps,
		       int mtu);
/* Removes the pod's IFB and its class on tollgate-inet (the veth's qdiscs go with the veth). */
int shaper_pod_del(struct nl_sock *sk, const char *host_veth, const struct shaping *s,
		   struct tg_err *e);
/*
 * 0 when the kernel holds what the spec asks for (each class, its ceiling and
 * the class it hangs under), TG_ERR_DRIFT naming the difference.
 */
int shaper_pod_check(struct nl_sock *sk, const char *host_veth, const struct shaping *s,
		     struct tg_err *e);

struct shaper_stats {
	uint32_t classid;
	uint64_t rate_bps, ceil_bps;
	uint64_t bytes, packets, drops, overlimits;
	uint64_t backlog; /* bytes queued in a leaf class now */
	uint32_t parent;
};
/*
 * Statistics of the pod's own classes (shaper_pod_classes, level SHAPER_POD),
 * each beside its class; returns how many exist (at most SHAPER_POD_CLASSES_MAX).
 */
int shaper_pod_stats(struct nl_sock *sk, const char *host_veth, const struct shaping *s,
		     struct shaper_class ret_class[SHAPER_POD_CLASSES_MAX],
		     struct shaper_stats ret[SHAPER_POD_CLASSES_MAX]);

/*
 * Every class of one device in one dump (the exporter's read): fn gets each.
 * Returns 0 (a device that is gone has none), or a negative errno.
 */
typedef void (*shaper_class_fn)(const struct shaper_stats *st, void *arg);
int shaper_dump_classes(struct nl_sock *sk, int ifindex, shaper_class_fn fn, void *arg);

#endif
