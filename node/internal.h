/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_NODE_INTERNAL_H
#define TG_NODE_INTERNAL_H

/*
 * Inside the node layer: one pod's routed data path (plumb.c), and the
 * steps node.h's verbs share (the plugin's probe, class retirement, a
 * running pod's reshape).
 */

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/err.h"
#include "node/node.h"
#include "node/upkeep.h"

struct plumb_req {
	const char *host_ifname;
	const char *pod_ifname;
	int netns_fd;
	uint32_t ip;
	int mtu;
	uint8_t pod_mac[6];
	uint32_t group;		/* the link group of the pod's host devices (its address) */
	struct nl_sock *pod_sk; /* a socket in the pod's namespace, NULL: opened here */
};

int plumb_add(struct nl_sock *sk, const struct plumb_req *rq, struct tg_err *e);
/* A link's ifindex (and its flags) by name; -ENODEV (or another -errno) when there is none. */
int plumb_ifindex(struct nl_sock *sk, const char *name, unsigned int *flags, int *ret);
/* Deletes the host veth (the pod end goes with it); already gone is success. */
int plumb_del(struct nl_sock *sk, const char *host_ifname, struct tg_err *e);
/*
 * Deletes every device of a link group in one request: the kernel retires
 * them in one batch, one set of RCU waits for all. -ENODEV when none is in it.
 */
int plumb_del_group(struct nl_sock *sk, uint32_t group);
/* 0 when everything is in place, TG_ERR_DRIFT naming the first difference otherwise. */
int plumb_check(struct nl_sock *sk, const struct plumb_req *rq, struct tg_err *e);

/*
 * The link group of a pod's host devices (veth, IFB): its address, unique
 * on the node while the attachment lives, so that one request deletes them
 * together.
 */
static inline uint32_t node_link_group(const struct ipam_attachment *a)
{
	return a->ip;
}

/* ---- node-wide state, inside the node layer (node.h has the public flags) ---- */
/* The "tg" of node_veth_name's host ends (node.h). */
#define NODE_VETH_PREFIX "tg"
#define NODE_DECLARE_INET 1u	 /* the internet-shaping path even if the config shapes none */
#define NODE_DECLARE_INET_IN 16u /* tollgate-inetdl even if the config shapes no downloads */
#define NODE_DECLARE_RESTORE 4u	 /* the class tree was broken: every pod's classes put back */
/*
 * Declares what every pod of the node shares, as cfg says: sysctls
 * (ip_forward, neighbour table sizes: raised, never lowered;
 * accept_source_route: pinned to 0), the nftables
 * table's skeleton and, when internet egress is shaped, the path through
 * tollgate-inet. Each part reads the kernel once and writes only what
 * differs (make-before-break for the uplink's filters). `st` (may be NULL)
 * gives the attachments to put back when the table or the HTB root had to be
 * made anew.
 */
int node_declare(struct nl_sock *sk, const struct node_config *cfg, const struct node_uplink *up,
		 const struct ipam_state *st, unsigned flags, struct node_repairs *ret,
		 struct tg_err *e);

/* ---- called inside the node layer only (node_pod_add, node_gc_collect, node_reshape) ---- */
/*
 * The plugin's: probes (reads only) and, when something is missing or was
 * declared for another config, declares under the node's lock
 * (<dataDir>/node.lock) so concurrent first ADDs do it once. need_inet: the
 * paths this pod needs (node_inet_needs). *ret_ifb: tollgate-inet's ifindex
 * when the path is declared.
 */
int node_ensure(struct nl_sock *sk, const struct node_config *cfg, const struct node_uplink *up,
		const struct ipam_state *st, unsigned need_inet, int *ret_ifb, struct tg_err *e);
/* What a pod's shaping needs of the node: NODE_DECLARE_INET, NODE_DECLARE_INET_IN. */
unsigned node_inet_needs(const struct shaping *s);

/*
 * Deletes tollgate-inet's namespace classes that no attachment of `st` uses
 * any more (and leaked pod classes). Call with the store locked, `st` just
 * loaded under that lock: then no ADD is attaching under a class it deletes.
 */
int node_retire(struct nl_sock *sk, const struct ipam_state *st, unsigned *ret_retired,
		struct tg_err *e);

/* Changes a running pod's tc classes from `old` (as recorded) to a->shaping, make before break. */
int node_pod_reshape(struct nl_sock *sk, const struct node_config *cfg,
		     const struct node_uplink *up, const struct ipam_attachment *a,
		     const struct shaping *old, struct tg_err *e);

/* The accounting layer's view of the config and of one attachment (declare.c). */
struct acct_config node_acct_config(const struct node_config *cfg);
struct acct_pod node_acct_pod(const struct ipam_attachment *a);

/*
 * Fills the caps of `s` from the policy and its annotations, keeping its
 * pod-specific inputs (reshape). An annotation only lowers a cap: one above
 * the config's is ignored (shaping_inet_*_source() in lib/shaping.h say which applied).
 */
void node_shaping_resolve(const struct node_config *cfg, const char *k8s_namespace,
			  struct shaping *s);

#endif
