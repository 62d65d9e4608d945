/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_ACCOUNTING_H
#define TG_ACCOUNTING_H

/*
 * The nftables table `inet tollgate`, owned wholly by Tollgate and changed
 * only in atomic batches (libnftnl + libmnl, never the nft binary):
 *
 *   set internal { type ipv4_addr; flags interval; }    internalCIDRs
 *   set pods, set masq { type ipv4_addr; }              every pod / pods to masquerade
 *   map ns_<class>  { type ipv4_addr : counter; }       pod address -> its namespace's counter
 *   map pod_<class> { type ipv4_addr : counter; }       pod address -> its own (accounting.perPod)
 *   counter ns_<namespace>_<class>, host_<class>, pod_<host veth>_<class>
 *   map egress_class { type ipv4_addr : classid; }     pod -> its uplink HTB class
 *   map ingress_class { type ipv4_addr : classid; }    pod -> its class on tollgate-inetdl
 *   chain prerouting: a pod's link (named <prefix>*) jumps to from_pod;
 *     chains from_pod, output: internet-bound packets get internetMark
 *   chain forward: jumps to fwd_egress (classified by destination) and
 *     fwd_ingress (by source), which go to fwd_*_internal on @internal: one
 *     interval lookup per direction; `meta priority` picks the shaper's HTB
 *     class there (see shaper.h); in fwd_ingress a pod's element of
 *     @ingress_class also gives its downloads internetMark, which its veth
 *     steers into tollgate-inetdl
 *   chains fwd_*, input, output: counting; chain postrouting: masquerade
 *   set pod_src { type ifname . ipv4_addr; }            host link . the pod's address
 *   map spoofed_<family> { type ifname : counter; }     host link -> ns_<namespace>_spoofed_<family>
 *   chain from_pod, first: a packet whose link . source is not in
 *     @pod_src, and any IPv6, goes to chain spoofed: counted to the
 *     sender's namespace (node_spoofed_<family> when the link is no known
 *     pod's) and dropped, before conntrack (raw priority), NAT, the mark,
 *     counting or shaping
 *   nodeAccess (from_pod, after anti-spoofing: the source is the pod's own):
 *   set metadata_ok, agent_ok { type ipv4_addr; }     pods of listed namespaces
 *   map metadata_drop, agent_drop { type ipv4_addr : counter; }
 *                                                     pod -> ns_<namespace>_metadata_dropped / _agent_dropped
 *   chain to_cloud: IMDS and the WireServer (but its DNS) for @metadata_ok only
 *   chain to_agent: TCP to metricsPort of a local or internal address for
 *     @agent_ok only (with metricsNamespaces set)
 *
 *   internetGuard (guard.c):
 *   map guard_ns, guard_in { type ipv4_addr : verdict; }
 *                                                     pod -> jump guard_<namespace>, guard_in_<namespace>
 *   chain guard_<namespace>: rate limit and ct count over the namespace's
 *     new internet connections (fwd_egress), refusals counted in
 *     ns_<namespace>_refused_<why> and answered by chain guard-refuse;
 *     then, with destinations, `update @dst_<namespace>_egress { ip daddr & mask }`
 *   chain guard_in_<namespace> (fwd_ingress): the same for ip saddr
 *   set dst_<namespace>_<direction> { type ipv4_addr; size tracked;
 *     flags dynamic,timeout; counter }: bytes per destination prefix
 *
 *   hostPorts (hostports.c):
 *   map hostport { type inet_proto . inet_service : ipv4_addr . inet_service; }
 *   map hostport_ip { type ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service; }
 *   chains prerouting_nat, output_nat (dstnat), for a local destination
 *     alone: `ip daddr . meta l4proto . th dport dnat to @hostport_ip`,
 *     then outside 127/8 and 169.254/16 `meta l4proto . th dport dnat to
 *     @hostport`; chain postrouting:
 *     a DNAT'd packet going back to the pod that sent it (oifname . ip
 *     saddr in @pod_src) is masqueraded, so that its answer comes back
 *     through the node
 *
 * and table `arp tollgate`, declared in the same batch: chain input drops
 * every ARP packet from a pod's link, counted in node_arp_dropped.
 *
 * <class> is egress_internal, egress_internet, ingress_internal or
 * ingress_internet; <family> ipv4 or ipv6. A packet costs one hash lookup
 * per map, whatever the number of pods. Namespace counters outlive their
 * pods: bytes stay with the namespace until the node reboots.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"
#include "lib/hostport.h"
#include "lib/ip4.h"

#define ACCT_TABLE "tollgate"
#define ACCT_MAX_INTERNAL 64
#define ACCT_COUNTER_NAME_MAX 128

enum acct_class {
	ACCT_EGRESS_INTERNAL,
	ACCT_EGRESS_INTERNET,
	ACCT_INGRESS_INTERNAL,
	ACCT_INGRESS_INTERNET,
	ACCT_CLASSES,
};

/* What a pod sent that is not its own (its address is not the source, or IPv6). */
enum acct_family {
	ACCT_IPV4,
	ACCT_IPV6,
	ACCT_FAMILIES,
};
extern const char *const acct_family_names[ACCT_FAMILIES]; /* "ipv4", "ipv6" */

/* "egress_internal", ... in enum order; and each class's two halves */
extern const char *const acct_class_names[ACCT_CLASSES];
extern const char *const acct_class_direction[ACCT_CLASSES]; /* "egress", "ingress" */
extern const char *const acct_class_traffic[ACCT_CLASSES];   /* "internal", "internet" */

/*
 * nodeAccess: what pods reach of the node and the cloud's metadata. Names
 * are DNS labels (config/access.c checks them); the lists point into the config.
 */
#define ACCT_ACCESS_NS_MAX 64
#define ACCT_IMDS_ADDR 0xa9fea9feu	 /* 169.254.169.254 */
#define ACCT_WIRESERVER_ADDR 0xa83f8110u /* 168.63.129.16 */
/*
 * nodeAccess.servicePorts: the control plane's ports (the allocator's,
 * etcd's), each entry's TCP ports reachable on internal and the node's own
 * addresses, before and after DNAT, only from pods of its namespaces.
 */
#define ACCT_SERVICE_PORTS_MAX 8  /* entries */
#define ACCT_SERVICE_RANGES_MAX 8 /* ports and ranges of one entry */
struct acct_port_range {
	uint16_t lo, hi;
};
struct acct_service_port {
	struct acct_port_range ports[ACCT_SERVICE_RANGES_MAX];
	size_t n_ports;
	const char *ns[ACCT_ACCESS_NS_MAX]; /* none: no pod reaches them */
	size_t n_ns;
};
struct acct_access {
	const char *metadata_ns[ACCT_ACCESS_NS_MAX]; /* reach IMDS and the WireServer */
	size_t n_metadata_ns;
	const char *metrics_ns[ACCT_ACCESS_NS_MAX]; /* reach metricsPort */
	size_t n_metrics_ns;
	bool metrics_filter; /* metricsNamespaces was given */
	uint16_t metrics_port;
	uint32_t ns_connections; /* a namespace's tracked connections on the node; 0: no ceiling */
	uint32_t neighbours_per_second; /* a namespace's new on-link next hops a second; 0: any */
	struct acct_service_port services[ACCT_SERVICE_PORTS_MAX]; /* servicePorts */
	size_t n_services;
};
/* The ceiling of a namespace's tracked connections when the config names none: a quarter of the table. */
#define ACCT_NS_CONNECTIONS_SHARE 4
#define ACCT_NEIGHBOURS_PER_SECOND_DEFAULT 200
#define ACCT_NEIGHBOURS_BURST 10    /* seconds of the rate a namespace may spend at once */
#define ACCT_NEXTHOPS_TRACKED 65536 /* next hops the node remembers resolving */
#define ACCT_NEXTHOP_TIMEOUT_S 60 /* and for how long: a neighbour entry's reachable + stale time */

/*
 * internetGuard.destinations: bytes per (namespace, destination prefix,
 * direction) of internet traffic, in one set per namespace and direction of
 * at most `tracked` prefixes, each forgotten ACCT_DST_TIMEOUT_S after its
 * last packet.
 */
#define ACCT_DST_TOP_DEFAULT 10
#define ACCT_DST_TOP_MAX 100
#define ACCT_DST_PREFIX_DEFAULT 24
#define ACCT_DST_TRACKED_DEFAULT 1024
#define ACCT_DST_TRACKED_MIN 16
#define ACCT_DST_TRACKED_MAX 65536
#define ACCT_DST_TIMEOUT_S 60
struct acct_destinations {
	bool on;	    /* internetGuard.destinations was given */
	uint32_t top;	    /* prefixes exported per namespace and direction */
	uint8_t prefix_len; /* what a destination is: its address & this mask */
	uint32_t tracked;   /* the kernel set's size */
};

/*
 * internetGuard.connections: what a namespace's pods on this node together
 * may open to internet destinations. 0 is no limit. Names point into the config.
 */
#define ACCT_GUARD_NS_MAX 256
struct acct_guard {
	bool on;			   /* internetGuard given: each namespace has its chains */
	bool limits;			   /* internetGuard.connections was given */
	struct acct_destinations dst;	   /* internetGuard.destinations */
	uint32_t concurrent_default;	   /* namespaceDefault */
	const char *ns[ACCT_GUARD_NS_MAX]; /* namespaces, with their own limits */
	uint32_t ns_concurrent[ACCT_GUARD_NS_MAX];
	size_t n_ns;
	uint32_t new_per_second; /* newPerSecond */
};

/* Which way a pod's traffic goes: what it sends, what it gets. */
enum acct_dir { ACCT_DIR_EGRESS, ACCT_DIR_INGRESS, ACCT_DIRS };
extern const char *const acct_dir_names[ACCT_DIRS]; /* "egress", "ingress" */

struct acct_config {
	const struct cidr4 *internal; /* sorted, non-overlapping */
	size_t n_internal;
	bool masquerade;
	bool enabled; /* counting rules */
	bool per_pod;
	uint32_t internet_mark;
	uint32_t inet_ingress_classid; /* tc class of internet -> pod traffic on a pod's veth, 0: none */
	const char *pod_link_prefix; /* what every pod's host link is named by, and no other link */
	struct acct_access access;
	struct acct_guard guard;
};

struct acct_pod {
	uint32_t ip;
	const char *k8s_namespace; /* "" when the runtime did not say */
	const char *host_veth;	 /* its host link: what it may send from; names its own counters */
	uint32_t egress_classid; /* uplink HTB class of its internet traffic, 0: none */
	/*
	 * tollgate-inetdl's class of its internet downloads (0: none): its
	 * element of @ingress_class gives the packets that priority and the
	 * internet mark, which the pod's veth steers into tollgate-inetdl.
	 */
	uint32_t ingress_classid;
	const struct hostports *ports; /* its hostPorts; NULL: none */
};

/* Counter names: ns_<namespace>_<class> (pods' own and the host's: internal.h). */
void acct_ns_counter_name(const char *k8s_namespace, enum acct_class c,
			  char ret[ACCT_COUNTER_NAME_MAX]);
/*
 * Packets nodeAccess dropped: ns_<namespace>_metadata_dropped (IMDS, the
 * WireServer), ns_<namespace>_agent_dropped (metricsPort),
 * ns_<namespace>_invalid_dropped (conntrack-invalid packets from pods),
 * ns_<namespace>_neighbour_dropped (new connections to an on-link next hop
 * the node has not resolved lately, over the namespace's rate);
 * node_arp_dropped (ARP from pods, in table arp tollgate).
 */
enum acct_access_drop {
	ACCT_DROP_METADATA,
	ACCT_DROP_AGENT,
	ACCT_DROP_INVALID,
	ACCT_DROP_NEIGHBOUR,
	ACCT_DROPS
};
/* "metadata", "agent", "invalid", "neighbour" */
extern const char *const acct_drop_names[ACCT_DROPS];
#define ACCT_ARP_COUNTER "node_arp_dropped"
/*
 * Connections the guard refused: ns_<namespace>_refused_concurrent (internet,
 * over its concurrent limit), ns_<namespace>_refused_rate (internet, over
 * newPerSecond), ns_<namespace>_refused_ceiling (any destination, over
 * nodeAccess.namespaceConnections).
 */
enum acct_refusal {
	ACCT_REFUSED_CONCURRENT,
	ACCT_REFUSED_RATE,
	ACCT_REFUSED_CEILING,
	ACCT_REFUSALS
};
extern const char *const acct_refusal_names[ACCT_REFUSALS]; /* "concurrent", "rate", "ceiling" */
/* ACCT_OWNER_NAMESPACE (the namespace in ret_owner) and why; ACCT_OWNER_NONE otherwise. */
enum acct_owner acct_refused_parse(const char *name, size_t name_len,
				   char ret_owner[ACCT_COUNTER_NAME_MAX],
				   enum acct_refusal *ret_why);
/* ACCT_OWNER_NAMESPACE (the namespace in ret_owner) and which drop; ACCT_OWNER_NONE otherwise. */
enum acct_owner acct_drop_parse(const char *name, size_t name_len,
				char ret_owner[ACCT_COUNTER_NAME_MAX],
				enum acct_access_drop *ret_drop);
/* Whose a counter is, read back from its name (the exporter's labels). */
enum acct_owner { ACCT_OWNER_NONE, ACCT_OWNER_NAMESPACE, ACCT_OWNER_POD, ACCT_OWNER_HOST };
/*
 * Splits a counter name (name_len bytes, not NUL-terminated) into its owner
 * (the namespace, the pod's host veth, "" for the host) and its class.
 * ACCT_OWNER_NONE when the name is none of Tollgate's.
 */
enum acct_owner acct_counter_parse(const char *name, size_t name_len,
				   char ret_owner[ACCT_COUNTER_NAME_MAX],
				   enum acct_class *ret_class);
/*
 * The same for spoofed-packet counters: ACCT_OWNER_NAMESPACE (the namespace
 * in ret_owner) or ACCT_OWNER_HOST (sender unknown), and the family;
 * ACCT_OWNER_NONE when the name is no spoofed-packet counter.
 */
enum acct_owner acct_spoofed_parse(const char *name, size_t name_len,
				   char ret_owner[ACCT_COUNTER_NAME_MAX],
				   enum acct_family *ret_family);

/* What a declaration wrote, by object (the node daemon counts repairs). */
struct acct_repairs {
	unsigned table, sets, chains, rules, internal; /* both tables' */
	unsigned pods_added, pods_removed;	       /* acct_pods_reconcile's */
};
#define ACCT_DECLARE_PODS 1u /* put every pod of `all` back even when no set was lost */
/*
 * Declares the table's skeleton as cfg says: reads the kernel once, writes
 * only what differs in one atomic batch (rules are replaced chain by chain;
 * a chain that is right is not touched). When sets had to be made anew, or
 * with ACCT_DECLARE_PODS, the pods of `all` go (back) in with it. Returns 1
 * when it wrote anything, 0 when the table was right, or a negative errno.
 */
int acct_declare(const struct acct_config *cfg, const struct acct_pod *all, size_t n_all,
		 unsigned flags, struct acct_repairs *ret, struct tg_err *e);
/* 1 when the table holds cfg's skeleton (a rule dump and the set internal), 0 when not, <0 error. */
int acct_declared(const struct acct_config *cfg);
/*
 * Adds the pod's elements and counters (additions only, on a declared
 * table; but its element of @ingress_class, which is made what
 * pod->ingress_classid says: another value replaced in the same
 * transaction, deleted for 0). -ENOENT when the table lacks a set this
 * config uses.
 */
int acct_pod_add(const struct acct_config *cfg, const struct acct_pod *pod, struct tg_err *e);
/*
 * Removes the pod's elements and own counters, and every hostPort element
 * whose value is its address, whatever the key (a record that did not know
 * them, a DEL without one): a key proves nothing once the store has let
 * another pod take the port, an address rests its cool-down before anyone
 * gets it again. Anything already gone is fine. With `keep`, the nftables socket is handed back open: closing it
 * waits out the kernel's RCU grace period for the deletion, so a caller
 * closes it (acct_conn_close) after its own slow work. A kernel without
 * nf_tables holds no element to remove: that is success, and `warn` (may
 * be NULL) says so for the caller to pass on.
 */
struct acct_conn;
int acct_pod_del(const struct acct_pod *pod, struct acct_conn **keep, struct tg_err *warn,
		 struct tg_err *e);
void acct_conn_close(struct acct_conn *held);
/*
 * Takes the mappings of `gone` out of the hostPort maps (by key; an absent
 * one is fine): what a repeated ADD no longer asks for. Call with the store
 * locked, the record no longer holding them.
 */
int acct_hostports_del(const struct hostports *gone, struct tg_err *e);

/*
 * Deletes namespaces' counters (bytes and packets of every class, spoofed
 * packets of each family): the node daemon retires a namespace this way once
 * it has had no pod for accounting.retainSeconds. One transaction per 128
 * namespaces; when one is still pointed at (-EBUSY), one namespace at a time.
 * Call with the store locked and the namespaces without attachments, so no
 * ADD is adding a pod that would count to them (one that comes later makes
 * them anew). *ret_retired: how many went.
 */
int acct_retire_namespaces(const char *const *names, size_t n, size_t *ret_retired,
			   struct tg_err *e);
/*
 * Makes namespaces' counters (every class, spoofed packets of each family)
 * where they are missing, and leaves existing ones as they are: the node
 * daemon keeps a namespace without pods counted until it retires it, also
 * after the table was made anew (which makes counters for pods' namespaces
 * only). -ENOENT (through e) when the table is missing.
 */
int acct_keep_namespaces(const char *const *names, size_t n, struct tg_err *e);
/*
 * 1 when the pod's elements (anti-spoofing's and nodeAccess' too: in
 * @metadata_ok and @agent_ok exactly when cfg lists its namespace; in
 * @ingress_class with its ingress_classid, or not at all for 0) are as
 * cfg and the pod say, 0 when not, negative on error.
 */
int acct_pod_check(const struct acct_pod *pod, const struct acct_config *cfg, struct tg_err *e);
/*
 * The pod's element of @ingress_class made what pod->ingress_classid says
 * (a reshape): another value replaced in one transaction, so that no
 * packet of the pod goes without a class; 0 deletes it (its downloads go
 * back to its veth's class); nothing is written when it is right already.
 * -ENOENT (through e) when the table lacks the map.
 */
int acct_pod_ingress_class(const struct acct_pod *pod, struct tg_err *e);
/*
 * Pods' elements against the store (`all`: every attachment it holds): reads
 * each per-pod set and map once, puts back every pod missing from one,
 * makes each pod's element of @ingress_class its record's (another value
 * replaced, none for 0) and takes out every address no pod holds, in one
 * atomic batch. *ret_added, *ret_removed: the pods put back (and download
 * classes put in or right), and the stray addresses (and classes a record
 * does not have) removed.
 */
int acct_pods_reconcile(const struct acct_config *cfg, const struct acct_pod *all, size_t n_all,
			unsigned *ret_added, unsigned *ret_removed, struct tg_err *e);
/* Every element of set `set` ("pods", "masq"); -ENOENT when the table or set is missing. */
int acct_list_set(const char *set, uint32_t **ret, size_t *ret_n, struct tg_err *e);

/*
 * Set `internal` as the kernel holds it: n ranges [start, end] (host order,
 * inclusive), sorted. -ENOENT when the table is missing.
 */
struct acct_range {
	uint32_t start, end;
};
int acct_list_internal(struct acct_range **ret, size_t *ret_n, struct tg_err *e);
/* Whether ip is in one of the n sorted ranges. */
bool acct_ranges_have(const struct acct_range *r, size_t n, uint32_t ip);

/* How many rules the table's chains hold (0 after `nft flush table`). */
int acct_count_rules(size_t *ret);

/*
 * Reads the table's counters (the exporter keeps one open across scrapes).
 * One dump per read, parsed in place: `fn` gets each counter's name (not
 * NUL-terminated beyond name_len; valid only during the call), its values,
 * and `id`, which names the kernel object: a counter deleted and made anew
 * under the same name (a rebuilt table, a retired namespace back) has
 * another id, even when its new value has already passed the old one.
 */
struct acct_reader;
struct acct_counter_sample {
	const char *name;
	size_t name_len;
	uint64_t packets, bytes;
	uint64_t id; /* the table's handle in the high half, the object's in the low */
};
typedef void (*acct_counter_fn)(const struct acct_counter_sample *c, void *arg);
struct acct_reader *acct_reader_new(void);
void acct_reader_free(struct acct_reader *rd);
/*
 * One dump of every counter of the table. Returns 0, -ENOENT when the table
 * is missing, or another negative errno. A dump the kernel interrupted
 * (the table changed under it) is run again, so fn may see a counter twice:
 * the later call carries the newer values.
 */
int acct_reader_read(struct acct_reader *rd, acct_counter_fn fn, void *arg);

/*
 * internetGuard.destinations' sets, dst_<namespace>_<direction>: one element
 * per destination prefix (the outside address & the prefix mask), holding
 * the bytes and packets of the namespace's internet traffic with it. A
 * packet whose prefix finds the set full is counted by its namespace
 * counter alone, never dropped.
 */
#define ACCT_DST_SET_PREFIX "dst_"
/* A set as its read finds it: whose, and what its config was (kept in the set's comment). */
struct acct_dst_set {
	const char *k8s_namespace; /* valid during the calls */
	enum acct_dir dir;
	uint8_t prefix_len; /* 0: a set without Tollgate's comment */
	uint32_t top;
};
struct acct_dst_visitor {
	void (*set)(const struct acct_dst_set *s, void *arg); /* each set, before its elements */
	/* each element: its prefix (host order), bytes and packets */
	void (*elem)(const struct acct_dst_set *s, uint32_t prefix, uint64_t bytes,
		     uint64_t packets, void *arg);
	void *arg;
};
/*
 * Reads every destination set once; with `reset` each element's counter is
 * zeroed as it is read (NFT_MSG_GETSETELEM_RESET, atomically per element),
 * so that elem gets the bytes since the last such read: the node daemon
 * takes this way, and takes more often than ACCT_DST_TIMEOUT_S so that no
 * entry expires with bytes unread. Without it, a look that changes nothing.
 * *ret_sets (may be NULL): how many sets were read. 0, -ENOENT when the
 * table is missing, or a negative errno (what was visited stays visited).
 */
int acct_dst_read(bool reset, const struct acct_dst_visitor *v, size_t *ret_sets);

#endif
