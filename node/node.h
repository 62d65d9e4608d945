/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_NODE_H
#define TG_NODE_H

/*
 * This node's kernel objects, as the config and the store describe them.
 *
 *   one attachment   veth pair, addresses, routes, neighbours (plumbing),
 *                    its nftables elements (accounting/) and tc classes
 *                    (shaper/): made by node_pod_add, which undoes its own
 *                    work when it fails, and removed by node_pod_del
 *   node-wide state  node_declare: the table's skeleton, the internet-shaping
 *                    path, sysctls, declared once from the config and
 *                    never rewritten per pod (node_ensure: the plugin's probe)
 *   the store        node_store_update: the one lock/load/change/save cycle
 *   the policy       which caps a pod gets, which uplink classes it takes
 *
 * The plugin (cni/), the operator CLI (cli/) and the exporter sit above this
 * layer and never reach past it into each other. What only the node daemon
 * and the CLI run has faces of its own: node/upkeep.h (reshape, collection,
 * release of running pods) and node/sync.h (the pool from IMDS). Errors are negative errno
 * with the details in struct tg_err; nothing here logs.
 */

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "ipam/ipam.h"
#include "ipam/store.h"
#include "lib/err.h"
#include "lib/shaping.h"

#define NODE_GATEWAY 0xa9fe0101u /* 169.254.1.1: every pod's on-link next hop */

struct nl_sock;

/*
 * The host end of an attachment: "tg" + 12 hex digits of a hash of
 * (containerID, ifname). Anti-spoofing takes every link named "tg*" for a
 * pod's: no other link of the node may be named so (node_uplink refuses one).
 */
void node_veth_name(const char *container_id, const char *ifname, char ret[IFNAMSIZ]);
/* Whether a link name is one node_veth_name gives. */
bool node_is_veth_name(const char *name);
/* The pod end's MAC, from the same hash; every host end has node_host_mac (as Calico does). */
void node_pod_mac(const char *container_id, const char *ifname, uint8_t ret[6]);
extern const uint8_t node_host_mac[6];

/* ---- the uplink ---- */
struct node_uplink {
	char name[IFNAMSIZ]; /* "" when there is none */
	int ifindex;	     /* 0 when there is none */
	int mtu;	     /* the configured MTU, else the uplink's, else 1500 */
	uint8_t mac[6];	     /* picks the uplink's NIC out of an IMDS document */
	bool has_mac;
};
/*
 * The named uplink (error 7 when it does not exist), or with name "" the
 * default route's interface, else none. mtu: the configured MTU, 0 for the
 * uplink's. One link read: the plugin, reshape and sync all resolve it here.
 */
int node_uplink(struct nl_sock *sk, const char *name, int mtu, struct node_uplink *ret,
		struct tg_err *e);

/* ---- node-wide state ---- */
#include "accounting/accounting.h"
#include "shaper/shaper.h"

/* What a declaration wrote, by object (the node daemon counts repairs). */
struct node_repairs {
	struct acct_repairs nft;
	struct shaper_repairs tc;
	unsigned sysctls;
	unsigned classes_restored; /* pod classes put back after the root was made anew */
	unsigned sysctls_readonly; /* below their floor, on a read-only /proc/sys: left as they are */
};
/* Whether the config shapes internet egress at all (else the path waits for a pod that needs it). */
bool node_shapes_inet(const struct node_config *cfg);
/* ... and downloads (tollgate-inetdl). */
bool node_shapes_inet_in(const struct node_config *cfg);
/* The flags of a declaration (more inside the node layer: node/internal.h). */
#define NODE_DECLARE_PODS 2u /* every attachment's nft elements put (back) in */
/*
 * A sysctl on a read-only /proc/sys is skipped and counted in
 * sysctls_readonly instead of failing the declaration: the node agent in its
 * container (runtimes mount /proc/sys read-only in an unprivileged one, with
 * CAP_NET_ADMIN or not). The plugin, run on the host, raises ip_forward at the
 * ADD that finds it low.
 */
#define NODE_DECLARE_SYSCTL_RO 8u
/*
 * node_declare with the attachments as the store holds them, read under its
 * lock and declared before it is released: a table made anew gets every
 * pod's elements back, and a pod deleted meanwhile (a DEL finishing, during
 * a long reshape) cannot get its elements back from an older read. A
 * declaration that finds everything in place only reads, about 1 ms.
 */
int node_declare_from_store(struct nl_sock *sk, const struct node_config *cfg,
			    const struct node_uplink *up, struct ipam_store *store, unsigned flags,
			    struct node_repairs *ret, struct tg_err *e);

/* ---- the store ---- */
typedef int (*node_update_fn)(struct ipam_state *st, void *ctx, struct tg_err *e);
/*
 * lock, load, bring the state up to date (a new boot drops every attachment,
 * the static pool follows cfg, expired cool-downs go), fn, save when anything
 * changed (fn returns > 0 when it changed something), unlock. Nothing slow
 * runs under the lock: fn only edits the state in memory.
 */
int node_store_update(struct ipam_store *store, struct ipam_state *st,
		      const struct node_config *cfg, node_update_fn fn, void *ctx,
		      struct tg_err *e);
/* The refresh node_store_update runs; 1 when it changed the state. */
int node_state_refresh(struct ipam_state *st, const struct node_config *cfg, int64_t now_ms,
		       struct tg_err *e);

/* ---- shaping policy ---- */
/* A pod's shaping for this request: its runtimeConfig and annotations, and the caps they give. */
void node_shaping_request(const struct node_config *cfg, const char *k8s_namespace,
			  struct shaping *ret);
/*
 * The allocator's policy as this node's agent last heard it (BUDGET_NODE_FILE
 * in the network's data directory), into ret; ret when there is one, NULL
 * when none was heard (no file, or one that does not hold a valid policy):
 * what node_config_budgeted's `heard` takes.
 */
const struct budget_set *node_budgets_heard(const struct node_config *cfg, struct budget_set *ret);
/* Uplink classes for a pod with internet egress shaping (under the store lock); -ENOSPC: full. */
int node_shaping_classes(const struct ipam_state *st, struct ipam_attachment *a);

/* ---- one attachment's kernel objects ---- */
struct node_pod {
	const struct ipam_attachment *a;
	int netns_fd;		/* the pod's network namespace */
	struct nl_sock *pod_sk; /* a socket in it (node_pod_ifname_check's), or NULL */
	const struct node_uplink *uplink;
};
/*
 * Whether the pod may get `ifname`, checked before anything is recorded: 0
 * when it has no interface of that name, or when the one it has is this
 * attachment's own pod end (a repeated ADD; its MAC is node_pod_mac's);
 * -EEXIST with e set when another interface holds the name. *ret_sk: the
 * socket in the pod's namespace, for node_pod to reuse (caller frees).
 */
int node_pod_ifname_check(int netns_fd, const char *container_id, const char *ifname,
			  struct nl_sock **ret_sk, struct tg_err *e);
/*
 * Plumbs, shapes and accounts one pod, after node_ensure: when node-wide
 * state is missing (someone flushed the table) it is declared, and every
 * attachment of `st` put back with it; on a declared node nothing
 * node-wide is written. On failure
 * everything this call made is removed again; a `repeated` ADD keeps the
 * accounting elements the pod already had.
 */
int node_pod_add(struct nl_sock *sk, const struct node_config *cfg, const struct node_pod *p,
		 const struct ipam_state *st, bool repeated, struct tg_err *e);
/* True when every object of the pod is in place (a repeated ADD then changes nothing). */
bool node_pod_intact(struct nl_sock *sk, const struct node_config *cfg, const struct node_pod *p);
/* 0 when every object is as recorded, TG_ERR_DRIFT naming the first difference. */
int node_pod_check(struct nl_sock *sk, const struct node_config *cfg, const struct node_pod *p,
		   struct tg_err *e);
/*
 * Removes what the kernel holds for one attachment: its nft elements and own
 * counters, its shaping (IFB, its class on tollgate-inet; its namespace's
 * class stays for node_retire) and its veth. Works from the derived names alone when the record
 * is all but empty (DEL without a store entry). Anything already gone is
 * fine; every step runs and the first error is returned. `warn` (may be
 * NULL): what succeeded with a caveat (acct_pod_del's), for the caller to
 * report.
 */
int node_pod_del(struct nl_sock *sk, const struct ipam_attachment *a, struct tg_err *warn,
		 struct tg_err *e);
/*
 * The mappings of `old` that the attachment no longer has (by key and
 * value), taken out: a repeated ADD's, under the store's lock, before the
 * record that gives the ports up is saved; the UDP/SCTP ones' conntrack
 * entries with them (best effort: the port's next mapping deletes them too).
 */
int node_pod_unmap(const struct ipam_attachment *a, const struct hostports *old, struct tg_err *e);
/*
 * The pod's table elements and own counters removed once more, with the
 * store locked, just before its address is released (by DEL, an ADD's undo,
 * GC): a declaration from the store between the teardown and the release
 * found the pod still recorded and may have put them back. Its hostPorts
 * go by value, here as in the teardown (acct_pod_del). Absent ones are
 * fine. With `keep`, the nftables socket comes back open (acct_pod_del).
 * Then every conntrack entry of the address and of its UDP/SCTP hostPorts
 * goes (node/conntrack.h), so that the next owner of the address gets
 * nothing of this pod's flows; that failing does not keep the address:
 * `warn` (may be NULL) says why.
 */
struct acct_conn;
int node_pod_forget(const struct ipam_attachment *a, struct acct_conn **keep, struct tg_err *warn,
		    struct tg_err *e);
void node_conn_close(struct acct_conn *held);
/*
 * The same inside an update the caller holds: each attachment's elements
 * forgotten (node_pod_forget), then its address released; entries with an
 * empty containerID, and ones that cannot be forgotten, are kept (conntrack
 * entries that cannot be deleted do not keep one). Returns how many were
 * released.
 */
int node_release_locked(struct ipam_state *st, const struct ipam_attachment *list, size_t n,
			struct tg_err *e);

#endif
