/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_ACCOUNTING_INTERNAL_H
#define TG_ACCOUNTING_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/set.h>

#include "accounting/accounting.h"

/*
 * The files call one way, down: declare.c (the table against a config)
 * and reconcile.c (the pods' elements against the store) over pods.c (one
 * pod's elements and counters), over each feature's file (guard.c,
 * hostports.c, destinations.c; anti-spoofing's and nodeAccess' rules in
 * antispoof.c and access.c, gathered with the rest by rules.c), over the
 * builders (elems.c, match.c, expr.c, table.c, comment.c, names.c) and the
 * transport (batch.c). A file never calls one above it.
 */

#define ACCT_SET_INTERNAL "internal"
#define ACCT_SET_PODS "pods"
#define ACCT_SET_MASQ "masq"
#define ACCT_MAP_EGRESS_CLASS "egress_class"
/*
 * A pod's address -> tollgate-inetdl's class of its internet downloads:
 * fwd_ingress gives a matched packet that priority and the internet mark
 * (which the pod's veth steers into tollgate-inetdl) in one rule.
 */
#define ACCT_MAP_INGRESS_CLASS "ingress_class"
#define ACCT_SET_POD_SRC "pod_src"
/* nodeAccess: who may reach what (pods of listed namespaces), and whose drop counts where. */
#define ACCT_SET_METADATA_OK "metadata_ok"
#define ACCT_SET_AGENT_OK "agent_ok"
#define ACCT_MAP_METADATA_DROP "metadata_drop"
#define ACCT_MAP_AGENT_DROP "agent_drop"
#define ACCT_MAP_INVALID_DROP "invalid_drop"
#define ACCT_MAP_NEIGHBOUR_DROP "neighbour_drop"
/*
 * nodeAccess.servicePorts: pod address . tcp . entry index, for each entry
 * listing the pod's namespace (typed as a hostPort's key, ipv4_addr .
 * inet_proto . inet_service; the index in the port's place).
 */
#define ACCT_SET_SERVICE_OK "service_ok"
/*
 * The neighbour table is one per node: @nexthops holds the next hops the
 * node resolved lately (which cost the table nothing new), and a pod's
 * element of @nexthop_limit names its namespace's limit of new ones
 * (ns_<namespace>_nexthops).
 */
#define ACCT_SET_NEXTHOPS "nexthops"
#define ACCT_MAP_NEXTHOP_LIMIT "nexthop_limit"
/*
 * internetGuard: a pod's address -> jump to its namespace's chain
 * guard_<namespace> (what it sends to the internet) and guard_in_<namespace>
 * (what it gets from there). A namespace is a DNS label, without '_': the
 * names cannot meet.
 */
/*
 * hostPorts (hostports.c): (protocol, port) -> (pod address, port) for
 * mappings on every address of the node, and (address, protocol, port) ->
 * the same for those on one hostIP; DNAT'd in chains prerouting_nat and
 * output_nat, the pod reaching itself masqueraded in postrouting.
 */
#define ACCT_MAP_HOSTPORT "hostport"
#define ACCT_MAP_HOSTPORT_IP "hostport_ip"
#define ACCT_CHAIN_PREROUTING_NAT "prerouting_nat"
#define ACCT_CHAIN_OUTPUT_NAT "output_nat"
#define ACCT_MAP_GUARD "guard_ns"
#define ACCT_MAP_GUARD_IN "guard_in"
#define ACCT_CHAIN_GUARD_PREFIX "guard_"
#define ACCT_CHAIN_GUARD_IN_PREFIX "guard_in_"
/* Where a guard chain sends what it refuses: a TCP reset (never rate-limited, unlike ICMP), else ICMP. */
#define ACCT_CHAIN_GUARD_REFUSE "guard-refuse"
#define ACCT_GUARD_CHAIN_MAX (sizeof(ACCT_CHAIN_GUARD_IN_PREFIX) + 64)
/* nft's datatype ids, so that `nft list` prints keys and values as what they are */
#define ACCT_NFT_TYPE_IPADDR 7
#define ACCT_NFT_TYPE_CLASSID 23
#define ACCT_NFT_TYPE_IFNAME 41
#define ACCT_NFT_TYPE_INET_PROTO 12
#define ACCT_NFT_TYPE_INET_SERVICE 13
#define ACCT_NFT_TYPE_CONCAT(a, b) ((a) << 6 | (b)) /* nft's TYPE_BITS */
#define ACCT_NFT_RECV_SIZE 16384 /* MNL_SOCKET_BUFFER_SIZE is a runtime value (page size) */

/* Kernel 6.3's "delete if present" messages; older uapi headers lack them. */
#ifndef NFT_MSG_DESTROYSETELEM
#define NFT_MSG_DESTROYCHAIN 27
#define NFT_MSG_DESTROYSET 29
#define NFT_MSG_DESTROYSETELEM 30
#define NFT_MSG_DESTROYOBJ 31
#endif
/* Kernel 6.5's dump of set elements that also resets their counters. */
#ifndef NFT_MSG_GETSETELEM_RESET
#define NFT_MSG_GETSETELEM_RESET 33
#endif

/* The maps from a pod address to its counters, in the order of enum acct_class. */
extern const char *const acct_ns_maps[ACCT_CLASSES];
extern const char *const acct_pod_maps[ACCT_CLASSES];
/* The maps from a pod's host link to its namespace's spoofed-packet counter, by family. */
extern const char *const acct_spoofed_maps[ACCT_FAMILIES];

/* ---- names the module alone makes (names.c, destinations.c) ---- */

/* Whether k8s_namespace is one of list's n names. */
bool acct_ns_listed(const char *const *list, size_t n, const char *k8s_namespace);
/* The concurrent limit of k8s_namespace's pods on this node (0: none). */
uint32_t acct_guard_concurrent(const struct acct_guard *g, const char *k8s_namespace);
/* Counter names: pod_<host veth>_<class>, host_<class> (ns_<namespace>_<class>: accounting.h). */
void acct_pod_counter_name(const char *host_veth, enum acct_class c,
			   char ret[ACCT_COUNTER_NAME_MAX]);
void acct_host_counter_name(enum acct_class c, char ret[ACCT_COUNTER_NAME_MAX]);
/*
 * Packets dropped as spoofed: ns_<namespace>_spoofed_<family>, or with
 * k8s_namespace NULL node_spoofed_<family> (from a pod link no pod holds).
 */
void acct_spoofed_counter_name(const char *k8s_namespace, enum acct_family f,
			       char ret[ACCT_COUNTER_NAME_MAX]);
/* nodeAccess' drops: ns_<namespace>_<drop>_dropped (see enum acct_access_drop). */
void acct_drop_counter_name(const char *k8s_namespace, enum acct_access_drop d,
			    char ret[ACCT_COUNTER_NAME_MAX]);
/*
 * A namespace's limit of new on-link next hops a second on the node
 * (nodeAccess.newNeighboursPerSecond): ns_<namespace>_nexthops, a named
 * limit object its pods' elements of @nexthop_limit name.
 */
void acct_nexthop_limit_name(const char *k8s_namespace, char ret[ACCT_COUNTER_NAME_MAX]);
/* The guard's refusals: ns_<namespace>_refused_<why> (see enum acct_refusal). */
void acct_refused_counter_name(const char *k8s_namespace, enum acct_refusal why,
			       char ret[ACCT_COUNTER_NAME_MAX]);
/* internetGuard.destinations' set of a namespace and direction: dst_<namespace>_<direction>. */
void acct_dst_set_name(const char *k8s_namespace, enum acct_dir dir,
		       char ret[ACCT_COUNTER_NAME_MAX]);
/* The namespace and direction of a set's name; false when it is none of these sets. */
bool acct_dst_set_parse(const char *name, char ret_ns[ACCT_COUNTER_NAME_MAX],
			enum acct_dir *ret_dir);

/* ---- netlink transport (batch.c) ---- */

struct acct_nft_conn {
	struct mnl_socket *nl;
	uint32_t portid;
};

struct acct_batch {
	char *buf;
	size_t size;
	struct mnl_nlmsg_batch *b;
	uint32_t first_seq; /* the begin message's; seq is one past the last used */
	uint32_t seq;
	unsigned int acks; /* messages that asked for an answer */
	bool full;	   /* a message did not fit: never send */
};

int acct_nft_open(struct acct_nft_conn *c, size_t bufsize, struct tg_err *e);
void acct_nft_close(struct acct_nft_conn *c);
struct acct_batch *acct_batch_new(size_t size);
void acct_batch_free(struct acct_batch *bt);
void acct_batch_start(struct acct_batch *bt);
struct nlmsghdr *acct_batch_msg(struct acct_batch *bt, uint16_t type, uint16_t flags);
/* The same for a table of another family (NFPROTO_ARP). */
struct nlmsghdr *acct_batch_msg_family(struct acct_batch *bt, uint16_t type, uint16_t flags,
				       uint16_t family);
void acct_batch_next(struct acct_batch *bt);
/* 0, or the first negative errno the kernel reported (its extack text in `why`). */
int acct_batch_send(struct acct_nft_conn *c, struct acct_batch *bt, char *why, size_t why_len);
/* One non-dump request; 0 when the kernel answered with the object, -ENOENT when absent. */
int acct_nft_get(struct acct_nft_conn *c, uint16_t type,
		 void (*build)(struct nlmsghdr *, const void *), const void *arg);
/*
 * Sends the request built at the start of buf and runs cb (NULL: none) over
 * every answer until the last (ACK or end of dump), receiving into buf. 0, or
 * a negative errno: the kernel's, or -EIO when cb refused a message.
 */
int acct_nft_request(struct acct_nft_conn *c, char *buf, size_t size, mnl_cb_t cb, void *arg);
/*
 * The same, cb seeing also answers the kernel flagged interrupted (a commit
 * during the dump): a reset dump's elements are zeroed whether or not.
 */
int acct_nft_request_all(struct acct_nft_conn *c, char *buf, size_t size, mnl_cb_t cb, void *arg);
int acct_nft_fail(struct tg_err *e, int r, const char *what, const char *why);

/* ---- expressions (expr.c): what the table's rules and arp.c's are built of ---- */

struct nftnl_rule;
struct nftnl_expr;

/*
 * Adds ex to r; a NULL ex (its builder could not allocate) spoils the
 * rule: acct_rule_spoiled() says so once (and forgets), and whoever
 * collects the rule drops it and fails, never sends it short of a match.
 */
void acct_rule_add(struct nftnl_rule *r, struct nftnl_expr *ex);
bool acct_rule_spoiled(void);
/* Each NULL when it cannot allocate. Loads go to register 1 unless a dreg is named. */
struct nftnl_expr *acct_expr_meta(uint32_t key);
struct nftnl_expr *acct_expr_meta_to(uint32_t key, uint32_t dreg);
struct nftnl_expr *acct_expr_meta_set(uint32_t key); /* meta <key> set reg1 */
struct nftnl_expr *acct_expr_cmp(uint32_t op, const void *data, uint32_t len);
struct nftnl_expr *acct_expr_cmp_eq(const void *data, uint32_t len);
struct nftnl_expr *acct_expr_bitwise32(uint32_t mask,
				       uint32_t xor); /* reg1 = (reg1 & mask) ^ xor */
struct nftnl_expr *acct_expr_payload_to(uint32_t base, uint32_t offset, uint32_t len,
					uint32_t dreg);
/* 12: ip saddr, 16: ip daddr */
struct nftnl_expr *acct_expr_ip(uint32_t offset);
struct nftnl_expr *acct_expr_ip_to(uint32_t offset, uint32_t dreg);
/* reg1 [!]in @set */
struct nftnl_expr *acct_expr_lookup(const char *set, uint32_t id, bool invert);
/* dreg = sreg's value in @map (NFT_REG_VERDICT: a verdict map) */
struct nftnl_expr *acct_expr_map(const char *map, uint32_t id, uint32_t sreg, uint32_t dreg);
/* counter|limit name reg1 map @map: the object the map names (its type is the map's) */
struct nftnl_expr *acct_expr_objref_map(const char *map, uint32_t id);
/* counter name "<name>" */
struct nftnl_expr *acct_expr_counter(const char *name);
/* A verdict; `chain` names the target of a jump or goto. */
struct nftnl_expr *acct_expr_verdict(uint32_t v, const char *chain);
struct nftnl_expr *acct_expr_immediate32(uint32_t value); /* reg1 = value */
struct nftnl_expr *acct_expr_ct(uint32_t key);		  /* reg1 = ct <key> */
struct nftnl_expr *acct_expr_plain(const char *name);	  /* masq, counter: no attributes */
struct nftnl_expr *acct_expr_reject(uint32_t type, uint8_t code);
struct nftnl_expr *acct_expr_dynset_update(const char *set); /* update @set { reg1 } */
/* limit rate over <per_second>/second burst <burst> packets */
struct nftnl_expr *acct_expr_limit_over(uint64_t per_second, uint32_t burst);
struct nftnl_expr *acct_expr_count_over(uint32_t n); /* ct count over n */
struct nftnl_expr *acct_expr_fib_daddr_type(void);   /* reg1 = fib daddr type */
/* <op> @set { reg1 } */
struct nftnl_expr *acct_expr_dynset(const char *set, uint32_t id, uint32_t op);
struct nftnl_expr *acct_expr_rt_nexthop4(void); /* reg1 = rt ip nexthop */
/* dnat ip to reg_addr : reg_port */
struct nftnl_expr *acct_expr_dnat4(uint32_t reg_addr, uint32_t reg_port);

/* ---- the table's skeleton (table.c) and its rules (rules.c) ---- */

/*
 * What a set is keyed by: a pod's address, its host link's name, or both;
 * a hostPort's protocol and port, on every address or on one.
 */
enum acct_set_key {
	ACCT_KEY_ADDR,
	ACCT_KEY_LINK,
	ACCT_KEY_LINK_ADDR,
	ACCT_KEY_HOSTPORT,
	ACCT_KEY_HOSTPORT_IP,
};

/* Set ids let rules in the same transaction refer to sets created in it. */
enum {
	ACCT_ID_INTERNAL = 1,
	ACCT_ID_PODS,
	ACCT_ID_MASQ,
	ACCT_ID_EGRESS_CLASS,
	ACCT_ID_NS_MAPS,
	ACCT_ID_POD_MAPS = ACCT_ID_NS_MAPS + ACCT_CLASSES,
	ACCT_ID_POD_SRC = ACCT_ID_POD_MAPS + ACCT_CLASSES,
	ACCT_ID_SPOOFED_MAPS,
	ACCT_ID_METADATA_OK = ACCT_ID_SPOOFED_MAPS + ACCT_FAMILIES,
	ACCT_ID_AGENT_OK,
	ACCT_ID_METADATA_DROP,
	ACCT_ID_AGENT_DROP,
	ACCT_ID_GUARD,
	ACCT_ID_GUARD_IN,
	ACCT_ID_HOSTPORT,
	ACCT_ID_HOSTPORT_IP,
	ACCT_ID_INVALID_DROP,
	ACCT_ID_NEIGHBOUR_DROP,
	ACCT_ID_NEXTHOP_LIMIT,
	ACCT_ID_NEXTHOPS,
	ACCT_ID_SERVICE_OK,
	ACCT_ID_INGRESS_CLASS,
};

struct acct_set_def {
	const char *name;
	uint32_t id; /* lets rules of the same transaction name a set made in it */
	uint32_t flags;
	enum acct_set_key key;
	bool verdicts;	    /* a verdict map (NFT_SET_MAP): key -> jump */
	uint32_t obj_type;  /* NFT_SET_OBJECT: the objects it names (0: counters) */
	uint32_t size;	    /* at most this many elements (0: no bound) */
	uint32_t timeout_s; /* its elements' default timeout (NFT_SET_TIMEOUT) */
};
#define ACCT_TABLE_SETS 29
extern const struct acct_set_def acct_table_sets[ACCT_TABLE_SETS];

struct acct_chain_def {
	const char *name;
	const char *type; /* NULL: a regular chain, reached by jump or goto */
	uint32_t hook;
	int32_t prio;
};
#define ACCT_TABLE_CHAINS 18
extern const struct acct_chain_def acct_table_chains[ACCT_TABLE_CHAINS];

/*
 * Forwarded packets are classified once per direction: `forward` jumps to
 * fwd_egress (by destination) and fwd_ingress (by source), each of which
 * looks @internal up once and goes to its *_internal chain on a match. Two
 * interval lookups a packet, however many counting rules follow.
 */
#define ACCT_CHAIN_FWD_EGRESS "fwd_egress"
#define ACCT_CHAIN_FWD_EGRESS_INTERNAL "fwd_egress_internal"
#define ACCT_CHAIN_FWD_INGRESS "fwd_ingress"
#define ACCT_CHAIN_FWD_INGRESS_INTERNAL "fwd_ingress_internal"

/*
 * Everything from a pod's link goes from `prerouting_raw` to `from_pod`
 * first: anti-spoofing (one lookup of (input link, source) per packet,
 * whatever the number of pods), then nodeAccess, then the internet mark.
 * The chain hooks prerouting at raw priority (-300), before conntrack
 * (-200): a forged packet that matches a connection of another pod (its
 * reply direction, a RST) would otherwise update that connection's entry
 * (seen-reply, state, timeout) before it is dropped. It is still the one
 * prerouting hook of the table (the chain at -150 it replaces is deleted
 * where an older layout left it). With the check before it, the mark needs
 * no lookup in @pods.
 */
#define ACCT_CHAIN_PREROUTING "prerouting_raw"
#define ACCT_CHAIN_PREROUTING_OLD "prerouting" /* layouts up to 5, at -150: deleted */
#define ACCT_PRIO_RAW -300
#define ACCT_CHAIN_FROM_POD "from_pod"
#define ACCT_CHAIN_SPOOFED "spoofed"
/*
 * nodeAccess, reached from from_pod only for packets to the cloud's
 * metadata addresses and (with metricsNamespaces) TCP to metricsPort: every
 * other packet costs two compares and a protocol compare.
 */
#define ACCT_CHAIN_TO_CLOUD "to_cloud"
#define ACCT_CHAIN_TO_AGENT "to_agent"
/*
 * servicePorts: forward (to an internal address) and input jump to
 * to_service for a pod's new TCP connections; a port of an entry whose
 * @service_ok element the pod lacks, as translated or as first addressed,
 * goes to service_deny, which counts it in @agent_drop and drops it.
 */
#define ACCT_CHAIN_TO_SERVICE "to_service"
#define ACCT_CHAIN_SERVICE_DENY "service_deny"

/* Table arp tollgate (arp.c): its one chain drops ARP from pods' links. */
#define ACCT_ARP_CHAIN "input"
#define ACCT_ARP_LAYOUT "tollgate-arp/1"
struct acct_batch;
struct acct_nft_conn;
/* 1 when the table holds cfg's chain and rule, 0 when not (missing too), negative errno. */
int acct_arp_read(struct acct_nft_conn *c, const struct acct_config *cfg);
/* Makes the table, its chain, counter and rule (idempotent: every message creates or replaces). */
int acct_arp_put(struct acct_batch *bt, const struct acct_config *cfg);

/*
 * The version of the rules acct_table_rules builds: part of every rule's stamp, so
 * that a node declared by an older layout is declared again. Change it with
 * every change of a rule (tests/unit/test_accounting.c checks it moves).
 */
#define ACCT_TABLE_LAYOUT "tollgate-table/18"

/* Every rule the config asks for, in chain order. */
#define ACCT_TABLE_RULES_MAX 240 /* 2 * 8 * 8 of them servicePorts' at most */
struct acct_rule_list {
	struct nftnl_rule *r[ACCT_TABLE_RULES_MAX];
	size_t n;
	bool failed;
};
int acct_table_rules(const struct acct_config *cfg, struct acct_rule_list *ret);
/*
 * Each feature's rules of the table, appended to the list in chain order
 * (acct_table_rules calls them in turn): anti-spoofing (antispoof.c),
 * nodeAccess (access.c), internetGuard's jumps and refusals (guard.c),
 * hostPorts' DNAT (hostports.c). 0, or -ENOMEM with the list marked failed.
 */
int acct_antispoof_rules(struct acct_rule_list *list, const struct acct_config *cfg);
int acct_access_rules(struct acct_rule_list *list, const struct acct_config *cfg);
int acct_guard_jump_rules(struct acct_rule_list *list, const struct acct_config *cfg);
int acct_hostport_rules(struct acct_rule_list *list);
/* Sets a rule's comment (what declarations compare: the stamp of what made it). */
int acct_rule_comment(struct nftnl_rule *r, const char *text);
/*
 * The comment a dumped rule or set carries in its userdata attribute a
 * (NFTA_RULE_USERDATA, NFTA_SET_USERDATA), of type NFTNL_UDATA_RULE_COMMENT
 * or NFTNL_UDATA_SET_COMMENT: copied NUL-terminated into buf. False when
 * there is none, or it does not fit (comment.c, with acct_rule_comment).
 */
bool acct_udata_comment(const struct nlattr *a, uint8_t type, char *buf, size_t size);
void acct_rule_list_free(struct acct_rule_list *w);

/* ---- a rule's frame and the matches rules share (match.c) ---- */

/* A rule of chain `chain` of table inet tollgate: either family, or IPv4 (meta nfproto ipv4). */
struct nftnl_rule *acct_rule_new_any(const char *chain);
struct nftnl_rule *acct_rule_new(const char *chain);
/*
 * Appends r to the list, which owns it from now on. A NULL or spoiled rule
 * (acct_rule_spoiled) or a full list: r freed, the list marked failed, -ENOMEM.
 */
int acct_rule_list_add(struct acct_rule_list *list, struct nftnl_rule *r);
void acct_match_nfproto(struct nftnl_rule *r, uint8_t proto);  /* meta nfproto ipv4|ipv6 */
void acct_match_ct_state(struct nftnl_rule *r, uint32_t bits); /* ct state & bits != 0 */
void acct_match_ct_new(struct nftnl_rule *r);		       /* ct state new */
/* iifname "<prefix>*": the packet came in from a pod's host link */
void acct_match_pod_link(struct nftnl_rule *r, const char *prefix);
void acct_match_local(struct nftnl_rule *r);		    /* fib daddr type local */
void acct_match_daddr(struct nftnl_rule *r, uint32_t addr); /* ip daddr <addr>, host order */
/* meta l4proto <proto> th dport <port> */
void acct_match_dport(struct nftnl_rule *r, uint8_t proto, uint16_t port);

/* The boundaries of set `internal` (interval sets hold starts and ends). */
struct acct_bound {
	uint32_t key;
	bool end;
};
#define ACCT_TABLE_BOUNDS_MAX (2 * ACCT_MAX_INTERNAL + 1)
size_t acct_table_internal_bounds(const struct acct_config *cfg,
				  struct acct_bound ret[ACCT_TABLE_BOUNDS_MAX]);

/* A set of table inet tollgate keyed as `key` says, to be filled in and sent. */
struct nftnl_set *acct_set_new(const char *name, uint32_t id, uint32_t flags,
			       enum acct_set_key key);
/* Batch writers of the skeleton. */
int acct_table_put_set(struct acct_batch *bt, const struct acct_set_def *d);
int acct_table_put_chain(struct acct_batch *bt, const struct acct_chain_def *d);
/* Any chain message (NFT_MSG_NEWCHAIN with its flags, DELCHAIN, DESTROYCHAIN) for chain d. */
int acct_table_chain_msg(struct acct_batch *bt, const struct acct_chain_def *d, uint16_t msg,
			 uint16_t flags);
int acct_table_flush_chain(struct acct_batch *bt, const char *chain);
int acct_table_put_rule(struct acct_batch *bt, struct nftnl_rule *r);
void acct_table_flush_set(struct acct_batch *bt, const char *set);
int acct_table_put_internal(struct acct_batch *bt, const struct acct_config *cfg);
int acct_table_put_host_counters(struct acct_batch *bt);
/*
 * Batch room: the skeleton, and one pod's 16 to 27 elements and 8 to 12
 * counters (about 3,500 bytes with perPod and a 63-character namespace).
 */
#define ACCT_BATCH_BASE (128 * 1024)
#define ACCT_BATCH_PER_POD 6144
/* One pod's elements and counters (pods.c). */
int acct_put_pod(struct acct_batch *bt, const struct acct_config *cfg, const struct acct_pod *p);
/*
 * Its element of @ingress_class: NEWSETELEM with `classid`, or another
 * message (DELSETELEM, DESTROYSETELEM) by key alone. The kernel keeps an
 * element of another value (-EEXIST): a change deletes it first.
 */
int acct_put_ingress_class(struct acct_batch *bt, uint16_t type, uint32_t ip, uint32_t classid);
/* Only its elements of @metadata_ok and @agent_ok, as cfg's lists say (a declaration re-derives them). */
int acct_put_pod_access(struct acct_batch *bt, const struct acct_config *cfg,
			const struct acct_pod *p);
/* Its elements of @service_ok, as cfg's servicePorts say (access.c). */
int acct_put_service_ok(struct acct_batch *bt, const struct acct_config *cfg,
			const struct acct_pod *p);
/* One element of @service_ok (NEWSETELEM; removals: every entry < ACCT_SERVICE_PORTS_MAX). */
int acct_service_ok_elem(struct acct_batch *bt, uint16_t type, uint32_t ip, size_t entry);
void acct_set_add_key(struct nftnl_set *s, uint32_t ip_host, bool interval_end);
/* A set element's key: a link name (zero-padded, as `meta iifname` loads it), then an address. */
#define ACCT_KEY_LINK_LEN 16
#define ACCT_KEY_MAX (ACCT_KEY_LINK_LEN + 4)
size_t acct_set_key_of(enum acct_set_key k, const char *link, uint32_t ip_host,
		       uint8_t ret[ACCT_KEY_MAX]);
/* counter <name> {}: created when missing, never reset. */
int acct_put_counter(struct acct_batch *bt, const char *name);
/* A counter message of any kind (NFT_MSG_DELOBJ, NFT_MSG_DESTROYOBJ...) for counter <name>. */
int acct_put_counter_msg(struct acct_batch *bt, const char *name, uint16_t msg, uint16_t flags);
/* Any object's message by name and type (removals: DELOBJ, DESTROYOBJ). */
int acct_put_obj_msg(struct acct_batch *bt, const char *name, uint32_t type, uint16_t msg,
		     uint16_t flags);
/* A limit object, rate over per_second/second burst `burst` packets, made when missing. */
int acct_put_limit(struct acct_batch *bt, const char *name, uint64_t per_second, uint32_t burst);

/* ---- set elements (elems.c): what pods.c, guard.c, hostports.c and reconcile.c share ---- */

/* Set `name` of table inet tollgate, by name alone (to carry elements). */
struct nftnl_set *acct_set_ref(const char *name);
/*
 * One element message: a key into set `set`, with `counter` (an objref map)
 * or `data` (a map's value) when given; a NEWSETELEM with `replace` takes
 * the place of an element of the key with another value.
 */
int acct_put_elem_key(struct acct_batch *bt, uint16_t type, const char *set, const void *key,
		      size_t key_len, const char *counter, const void *data, size_t data_len,
		      bool replace);
/* One element asked for by key: 0 when the kernel has it (cb sees the answer), -ENOENT when not. */
struct acct_elem_query {
	const char *set;
	uint8_t key[ACCT_KEY_MAX];
	size_t key_len;
};
int acct_nft_get_elem(struct acct_nft_conn *c, const struct acct_elem_query *q, mnl_cb_t cb,
		      void *arg);
/* fn over every element of one message of an element dump or get */
int acct_foreach_elem(const struct nlmsghdr *nlh, int (*fn)(struct nftnl_set_elem *, void *),
		      void *p);
/* An element of an address-keyed set, naming `counter` when given (an objref map). */
int acct_put_elem(struct acct_batch *bt, uint16_t type, const char *set, uint32_t ip,
		  const char *counter);
/*
 * hostPorts (hostports.c). A mapping's key in its map (ACCT_KEY_HOSTPORT_IP
 * when it has a hostIP) and its value, laid out as nft lays out a
 * concatenation: each part in a register of its own (4 bytes), network order.
 */
#define ACCT_HOSTPORT_KEY_MAX 12
#define ACCT_HOSTPORT_DATA_LEN 8
const char *acct_hostport_map(const struct hostport *m);
size_t acct_hostport_key(const struct hostport *m, uint8_t ret[ACCT_HOSTPORT_KEY_MAX]);
void acct_hostport_data(uint32_t pod_ip, uint16_t port, uint8_t ret[ACCT_HOSTPORT_DATA_LEN]);
/*
 * The pod's mappings into the batch: NEWSETELEM (an element already there
 * with another pod's value fails the batch with -EEXIST; with `take`, any
 * element of the key is removed first: a declaration putting the store's
 * pods back wins over strays), or their removal by key.
 */
int acct_hostport_put(struct acct_batch *bt, uint16_t type, const struct acct_pod *p, bool take);
int acct_hostport_put_one(struct acct_batch *bt, uint16_t type, uint32_t pod_ip,
			  const struct hostport *m, bool take);
/* 1 when each of the pod's mappings is in its map with the pod's value, 0 when not, <0 error. */
int acct_hostport_check(struct acct_nft_conn *c, const struct acct_pod *p);
/*
 * The maps against the store's pods: missing mappings put in, elements no
 * pod maps (or of another value) taken out, in one batch. Counted into
 * *added and *removed.
 */
int acct_hostport_reconcile(const struct acct_pod *all, size_t n_all, unsigned *added,
			    unsigned *removed, struct tg_err *e);
/*
 * Every hostPort element whose value is pod_ip, whatever its key, out in
 * one transaction on c (acct_pod_del's). 0, -ENOENT without the table.
 */
int acct_hostports_forget_on(struct acct_nft_conn *c, uint32_t pod_ip, char *why, size_t why_len);

/* nodeAccess' per-pod drop maps, by enum acct_access_drop */
extern const char *const acct_drop_maps[ACCT_DROPS];

/*
 * ---- internetGuard (guard.c) ----
 *
 * Every namespace with a pod on the node has two chains: guard_<namespace>,
 * reached from fwd_egress for a pod's packets to an internet destination
 * (through @guard_ns; with connections only, for new connections alone),
 * and guard_in_<namespace>, from fwd_ingress for what comes back (through
 * @guard_in, with destinations only). The first holds the connection
 * limits: a rate limit and a ct count, each refusing (reject, counted in
 * ns_<namespace>_refused_<why>) what goes over; rule-level state is per
 * chain, so per namespace and node. Both then count the packet to its
 * destination prefix in set dst_<namespace>_<direction> (destinations on),
 * past every refusal: a set holds only bytes the namespace's counter holds
 * too. The unit appears with the namespace's first pod (made by whoever
 * adds it: the ADD, or a declaration putting pods back) and is rewritten
 * only by a declaration whose config asks for other limits or
 * destinations; it goes when the namespace is retired.
 */
void acct_guard_chain_name(const char *k8s_namespace, enum acct_dir dir,
			   char ret[ACCT_GUARD_CHAIN_MAX]);
/* What the namespace's chains hold for cfg: their rules' comment. */
#define ACCT_GUARD_STAMP_LEN 32
void acct_guard_stamp(const struct acct_config *cfg, const char *k8s_namespace,
		      char ret[ACCT_GUARD_STAMP_LEN]);
/*
 * The namespace's unit into the batch: its counters, chains and sets,
 * created (the egress chain NLM_F_EXCL with `exclusive`, so that a
 * concurrent maker fails the batch with -EEXIST), or with `rewrite` the
 * chains emptied and the sets made anew; then its rules.
 */
int acct_guard_put_chain(struct acct_batch *bt, const struct acct_config *cfg,
			 const char *k8s_namespace, bool exclusive, bool rewrite);
/*
 * The unit's removal, the counters' not included: with `destroy` absent
 * objects are fine; `only` (-1: all) picks one of ACCT_GUARD_OBJECTS: the
 * chains by enum acct_dir, then the sets (ACCT_DIRS + dir).
 */
#define ACCT_GUARD_OBJECTS (2 * ACCT_DIRS)
int acct_guard_put_removal(struct acct_batch *bt, const char *k8s_namespace, bool destroy,
			   int only);
/*
 * internetGuard.destinations (destinations.c): the namespace's set of
 * direction dir, as a message of type msg (NEWSET from cfg's size;
 * DELSET, DESTROYSET by name, cfg unused).
 */
int acct_dst_put_set(struct acct_batch *bt, const struct acct_config *cfg,
		     const char *k8s_namespace, enum acct_dir dir, uint16_t msg);
/*
 * The pod's elements of @guard_ns and @guard_in (NEWSETELEM) or their
 * removal (keys only); `only` (-1: both) picks one by enum acct_dir.
 */
int acct_guard_put_elem(struct acct_batch *bt, uint16_t type, const struct acct_pod *p, int only);
/* 1 when the namespace's egress chain exists, 0 when not, negative errno. */
int acct_guard_chain_exists(struct acct_nft_conn *c, const char *k8s_namespace);
/* 1 when the pod's elements of @guard_ns and @guard_in jump to its namespace's chains, 0 when not. */
int acct_guard_elem_right(struct acct_nft_conn *c, const struct acct_pod *p);
/* Each chain's rules (guard.c), stamped with `stamp`. */
int acct_guard_rules(const struct acct_config *cfg, const char *k8s_namespace, enum acct_dir dir,
		     const char *stamp, struct acct_rule_list *ret);
/* How many rules acct_guard_rules makes (declare.c compares without building them). */
unsigned acct_guard_rules_wanted(const struct acct_config *cfg, const char *k8s_namespace,
				 enum acct_dir dir);

#endif
