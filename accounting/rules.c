// SPDX-License-Identifier: Apache-2.0
/*
 * The rules of table `inet tollgate` for a config, in chain order: built
 * here as libnftnl rules, compared with the kernel's and written by
 * declare.c (the chains they live in and the sets they look up: table.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/rtnetlink.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_nat.h>

#include "accounting/internal.h"
#include "lib/util.h"

/* meta nfproto ipv4|ipv6 */
static void match_nfproto(struct nftnl_rule *r, uint8_t proto)
{
	acct_rule_add(r, acct_expr_meta(NFT_META_NFPROTO));
	acct_rule_add(r, acct_expr_cmp_eq(&proto, sizeof(proto)));
}

/* A rule of either family. */
static struct nftnl_rule *rule_new_any(const char *chain)
{
	struct nftnl_rule *r = nftnl_rule_alloc();

	if (!r)
		return NULL;
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, ACCT_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	return r;
}

static struct nftnl_rule *rule_new(const char *chain)
{
	struct nftnl_rule *r = rule_new_any(chain);

	/* meta nfproto ipv4: what nft adds for `ip ...` matches in an inet table */
	if (r)
		match_nfproto(r, NFPROTO_IPV4);
	return r;
}

/* Appends a rule to the list (which owns it from now on); the list remembers a failure. */
static int put_rule(struct acct_rule_list *w, struct nftnl_rule *r)
{
	/* a rule that lost an expression is never sent short of it */
	if (acct_rule_spoiled() || !r || w->n >= ACCT_TABLE_RULES_MAX) {
		if (r)
			nftnl_rule_free(r);
		w->failed = true;
		return -ENOMEM;
	}
	w->r[w->n++] = r;
	return 0;
}

void acct_rule_list_free(struct acct_rule_list *w)
{
	for (size_t i = 0; i < w->n; i++)
		nftnl_rule_free(w->r[i]);
	w->n = 0;
}

/* `iif lo return` / `oif lo return`: loopback is neither internal nor internet traffic. */
static struct nftnl_rule *skip_loopback(const char *chain, uint32_t meta_key)
{
	struct nftnl_rule *r = rule_new(chain);
	uint32_t lo = 1; /* the loopback device is ifindex 1 in every namespace */

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_meta(meta_key));
	acct_rule_add(r, acct_expr_cmp_eq(&lo, sizeof(lo)));
	acct_rule_add(r, acct_expr_verdict(NFT_RETURN, NULL));
	return r;
}

/*
 * A counting rule: classify on one address against @internal (class_off 0:
 * the chain already did), then count into the object that a map keyed by the
 * other (pod) address names, or into a named host counter.
 */
static struct nftnl_rule *count_rule(const char *chain, uint32_t class_off, bool internet,
				     uint32_t key_off, const char *map, uint32_t map_id,
				     const char *named)
{
	struct nftnl_rule *r = rule_new(chain);

	if (!r)
		return NULL;
	if (class_off) {
		acct_rule_add(r, acct_expr_ip(class_off));
		acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, internet));
	}
	if (map) {
		acct_rule_add(r, acct_expr_ip(key_off));
		acct_rule_add(r, acct_expr_objref_map(map, map_id));
	} else {
		acct_rule_add(r, acct_expr_counter(named));
	}
	return r;
}

/*
 * ip daddr != @internal meta mark set meta mark | M: (mark & ~M) ^ M sets M
 * and keeps every other bit.
 */
static struct nftnl_rule *mark_rule(const char *chain, uint32_t mark)
{
	struct nftnl_rule *r = rule_new(chain);
	uint32_t mask = ~mark, xor = mark;

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ip(16));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, true));
	acct_rule_add(r, acct_expr_meta(NFT_META_MARK));
	acct_rule_add(r, acct_expr_bitwise32(mask, xor));
	acct_rule_add(r, acct_expr_meta_set(NFT_META_MARK));
	return r;
}

/* In fwd_ingress (source not internal): ip daddr @pods meta priority set <the pods' internet ingress class> */
static struct nftnl_rule *inet_ingress_class_rule(uint32_t classid)
{
	struct nftnl_rule *r = rule_new(ACCT_CHAIN_FWD_INGRESS);

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ip(16));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_PODS, ACCT_ID_PODS, false));
	acct_rule_add(r, acct_expr_immediate32(classid));
	acct_rule_add(r, acct_expr_meta_set(NFT_META_PRIORITY));
	return r;
}

/* In fwd_egress (destination not internal): meta priority set ip saddr map @egress_class */
static struct nftnl_rule *inet_egress_class_rule(void)
{
	struct nftnl_rule *r = rule_new(ACCT_CHAIN_FWD_EGRESS);

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ip(12));
	acct_rule_add(r, acct_expr_map(ACCT_MAP_EGRESS_CLASS, ACCT_ID_EGRESS_CLASS, NFT_REG_1,
				       NFT_REG_1));
	acct_rule_add(r, acct_expr_meta_set(NFT_META_PRIORITY));
	return r;
}

/* [ip saddr|daddr @internal] jump|goto <target> (class_off 0: unconditional) */
static struct nftnl_rule *branch_rule(const char *chain, uint32_t class_off, uint32_t v,
				      const char *target)
{
	struct nftnl_rule *r = rule_new(chain);

	if (!r)
		return NULL;
	if (class_off) {
		acct_rule_add(r, acct_expr_ip(class_off));
		acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, false));
	}
	acct_rule_add(r, acct_expr_verdict(v, target));
	return r;
}

/* ct state & bits != 0 */
static void match_ct_state(struct nftnl_rule *r, uint32_t bits)
{
	uint32_t zero = 0;

	acct_rule_add(r, acct_expr_ct(NFT_CT_STATE));
	acct_rule_add(r, acct_expr_bitwise32(bits, zero));
	acct_rule_add(r, acct_expr_cmp(NFT_CMP_NEQ, &zero, sizeof(zero)));
}

/* iifname "<prefix>*": the packet came in from a pod's host link. */
static void match_pod_link(struct nftnl_rule *r, const char *prefix)
{
	acct_rule_add(r, acct_expr_meta(NFT_META_IIFNAME));
	acct_rule_add(r, acct_expr_cmp_eq(prefix, (uint32_t)strlen(prefix)));
}

/* fib daddr type local */
static void match_local(struct nftnl_rule *r)
{
	uint32_t local = RTN_LOCAL;

	acct_rule_add(r, acct_expr_fib_daddr_type());
	acct_rule_add(r, acct_expr_cmp_eq(&local, sizeof(local)));
}

/* ct state new: the first packet of a connection (a refusal never touches an established one) */
static void match_ct_new(struct nftnl_rule *r)
{
	match_ct_state(r, NF_CT_STATE_BIT(IP_CT_NEW));
}

/*
 * Past the internal branch: in fwd_egress `[ct state new] ip saddr vmap
 * @guard_ns` (every packet with destinations, only a connection's first
 * without), in fwd_ingress `ip daddr vmap @guard_in`.
 */
static struct nftnl_rule *guard_jump_rule(enum acct_dir dir, bool only_new)
{
	bool in = dir == ACCT_DIR_INGRESS;
	struct nftnl_rule *r = rule_new(in ? ACCT_CHAIN_FWD_INGRESS : ACCT_CHAIN_FWD_EGRESS);

	if (!r)
		return NULL;
	if (only_new)
		match_ct_new(r);
	acct_rule_add(r, acct_expr_ip(in ? 16 : 12));
	acct_rule_add(r, in ? acct_expr_map(ACCT_MAP_GUARD_IN, ACCT_ID_GUARD_IN, NFT_REG_1,
					    NFT_REG_VERDICT)
			    : acct_expr_map(ACCT_MAP_GUARD, ACCT_ID_GUARD, NFT_REG_1,
					    NFT_REG_VERDICT));
	return r;
}

/*
 * With a ceiling, before anything counts: in fwd_egress_internal `ct state
 * new ip saddr vmap @guard_ns`, in input the same for what comes from a
 * pod's link. With the internet's jump from fwd_egress, every new
 * connection of a pod reaches its namespace's guard chain once, whatever
 * its destination; an internal packet of an established one pays a ct
 * state compare, no lookup.
 */
static struct nftnl_rule *guard_new_jump_rule(const char *chain, const char *prefix)
{
	struct nftnl_rule *r = rule_new(chain);

	if (!r)
		return NULL;
	if (prefix)
		match_pod_link(r, prefix);
	match_ct_new(r);
	acct_rule_add(r, acct_expr_ip(12));
	acct_rule_add(r, acct_expr_map(ACCT_MAP_GUARD, ACCT_ID_GUARD, NFT_REG_1, NFT_REG_VERDICT));
	return r;
}

/*
 * In guard-refuse: `meta l4proto tcp reject with tcp reset` (tcp), else
 * `reject with icmpx admin-prohibited`: the client's connect fails at once.
 */
static struct nftnl_rule *refuse_rule(bool tcp)
{
	struct nftnl_rule *r = rule_new_any(ACCT_CHAIN_GUARD_REFUSE);
	uint8_t proto = IPPROTO_TCP;

	if (!r)
		return NULL;
	if (tcp) {
		acct_rule_add(r, acct_expr_meta(NFT_META_L4PROTO));
		acct_rule_add(r, acct_expr_cmp_eq(&proto, sizeof(proto)));
	}
	acct_rule_add(r, acct_expr_reject(tcp ? NFT_REJECT_TCP_RST : NFT_REJECT_ICMPX_UNREACH,
					  tcp ? 0 : NFT_REJECT_ICMPX_ADMIN_PROHIBITED));
	return r;
}

/*
 * [ct state new] <over> counter name "ns_<namespace>_refused_<why>" goto
 * guard-refuse (takes over); ct state new where every packet comes here.
 */
static struct nftnl_rule *refusal_rule(const char *chain, bool only_new, struct nftnl_expr *over,
				       const char *k8s_namespace, enum acct_refusal why)
{
	struct nftnl_rule *r = rule_new_any(chain);
	char name[ACCT_COUNTER_NAME_MAX];

	/* without its match the rule would refuse every connection: none at all */
	if (!r || !over) {
		if (r)
			nftnl_rule_free(r);
		if (over)
			nftnl_expr_free(over);
		return NULL;
	}
	if (only_new)
		match_ct_new(r);
	acct_rule_add(r, over);
	acct_refused_counter_name(k8s_namespace, why, name);
	acct_rule_add(r, acct_expr_counter(name));
	acct_rule_add(r, acct_expr_verdict(NFT_GOTO, ACCT_CHAIN_GUARD_REFUSE));
	return r;
}

/* update @dst_<namespace>_<dir> { ip daddr|saddr & mask }: the set's counter takes the packet */
static struct nftnl_rule *destination_rule(const char *chain, const struct acct_destinations *d,
					   const char *k8s_namespace, enum acct_dir dir)
{
	struct nftnl_rule *r = rule_new_any(chain);
	uint32_t mask = d->prefix_len ? htonl(~0u << (32 - d->prefix_len)) : 0;
	char set[ACCT_COUNTER_NAME_MAX];

	if (!r)
		return NULL;
	acct_dst_set_name(k8s_namespace, dir, set);
	/* the outside end: where egress goes, where ingress comes from */
	acct_rule_add(r, acct_expr_ip(dir == ACCT_DIR_EGRESS ? 16 : 12));
	if (d->prefix_len < 32)
		acct_rule_add(r, acct_expr_bitwise32(mask, 0));
	acct_rule_add(r, acct_expr_dynset_update(set));
	return r;
}

unsigned acct_guard_rules_wanted(const struct acct_config *cfg, const char *k8s_namespace,
				 enum acct_dir dir)
{
	const struct acct_guard *g = &cfg->guard;
	unsigned n = 1 + g->dst.on; /* return, the destination's update */

	if (dir == ACCT_DIR_EGRESS && cfg->access.ns_connections)
		n += 3; /* the ceiling, and the internal and local destinations' returns */
	if (dir == ACCT_DIR_EGRESS && g->limits)
		n += (g->new_per_second != 0) + (acct_guard_concurrent(g, k8s_namespace) != 0);
	return n;
}

int acct_guard_rules(const struct acct_config *cfg, const char *k8s_namespace, enum acct_dir dir,
		     const char *stamp, struct acct_rule_list *bt)
{
	const struct acct_guard *g = &cfg->guard;
	uint32_t concurrent = acct_guard_concurrent(g, k8s_namespace);
	char chain[ACCT_GUARD_CHAIN_MAX];
	struct nftnl_rule *r;
	struct nftnl_expr *ex;
	int err = 0;

	bt->n = 0;
	bt->failed = false;
	acct_guard_chain_name(k8s_namespace, dir, chain);
	/*
	 * The ceiling first, over every new connection of the namespace's pods
	 * (fwd_egress_internal and input jump here with it, as fwd_egress
	 * does); then only what goes to the internet meets the rest.
	 */
	if (dir == ACCT_DIR_EGRESS && cfg->access.ns_connections) {
		err |= put_rule(bt, refusal_rule(chain, true,
						 acct_expr_count_over(cfg->access.ns_connections),
						 k8s_namespace, ACCT_REFUSED_CEILING));
		r = rule_new(chain);
		if (r) {
			acct_rule_add(r, acct_expr_ip(16));
			acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, false));
			acct_rule_add(r, acct_expr_verdict(NFT_RETURN, NULL));
		}
		err |= put_rule(bt, r);
		r = rule_new(chain);
		if (r) {
			match_local(r);
			acct_rule_add(r, acct_expr_verdict(NFT_RETURN, NULL));
		}
		err |= put_rule(bt, r);
	}
	/* Rate first: a connection it refuses never enters the count. */
	if (dir == ACCT_DIR_EGRESS && g->limits && g->new_per_second) {
		/* limit rate over R/second burst R packets */
		ex = acct_expr_limit_over(g->new_per_second, g->new_per_second);
		err |= put_rule(bt, refusal_rule(chain, g->dst.on, ex, k8s_namespace,
						 ACCT_REFUSED_RATE));
	}
	if (dir == ACCT_DIR_EGRESS && g->limits && concurrent) {
		/* ct count over N: this connection included, more than N */
		ex = acct_expr_count_over(concurrent);
		err |= put_rule(bt, refusal_rule(chain, g->dst.on, ex, k8s_namespace,
						 ACCT_REFUSED_CONCURRENT));
	}
	/*
	 * Past every refusal: the set counts only what the namespace's counter
	 * counts too. A full set fails the update, and the packet goes on.
	 */
	if (g->dst.on)
		err |= put_rule(bt, destination_rule(chain, &g->dst, k8s_namespace, dir));
	/* A chain of a namespace without limits still holds a rule: the stamp lives on rules. */
	r = rule_new_any(chain);
	if (r)
		acct_rule_add(r, acct_expr_verdict(NFT_RETURN, NULL));
	err |= put_rule(bt, r);
	for (size_t i = 0; i < bt->n && !err; i++)
		err = acct_rule_comment(bt->r[i], stamp);
	if (err || bt->failed) {
		acct_rule_list_free(bt);
		return -ENOMEM;
	}
	return 0;
}

/* In prerouting_raw, either family: iifname "<prefix>*" jump from_pod */
static struct nftnl_rule *from_pod_rule(const char *prefix)
{
	struct nftnl_rule *r = rule_new_any(ACCT_CHAIN_PREROUTING);

	if (!r)
		return NULL;
	match_pod_link(r, prefix);
	acct_rule_add(r, acct_expr_verdict(NFT_JUMP, ACCT_CHAIN_FROM_POD));
	return r;
}

/*
 * iifname . ip saddr != @pod_src goto spoofed: the one lookup every IPv4
 * packet of a pod costs. The key is laid out as nft lays out a
 * concatenation: the link's name fills register 1 (16 bytes), the address
 * follows in register 2.
 */
static struct nftnl_rule *antispoof_rule(void)
{
	struct nftnl_rule *r = rule_new(ACCT_CHAIN_FROM_POD);

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_meta(NFT_META_IIFNAME));
	acct_rule_add(r, acct_expr_ip_to(12, NFT_REG_2));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_POD_SRC, ACCT_ID_POD_SRC, true));
	acct_rule_add(r, acct_expr_verdict(NFT_GOTO, ACCT_CHAIN_SPOOFED));
	return r;
}

/* meta nfproto ipv6 goto spoofed: no IPv6 from pods until dual-stack. */
static struct nftnl_rule *antispoof_ipv6_rule(void)
{
	struct nftnl_rule *r = rule_new_any(ACCT_CHAIN_FROM_POD);

	if (!r)
		return NULL;
	match_nfproto(r, NFPROTO_IPV6);
	acct_rule_add(r, acct_expr_verdict(NFT_GOTO, ACCT_CHAIN_SPOOFED));
	return r;
}

/*
 * In chain spoofed: count to the sender's namespace (the map keyed by its
 * link), else to the node's counter, and drop. The last rule matches
 * whatever is left: a chain reached by goto that ends without a verdict
 * would hand the packet back to the hook's accept policy.
 */
static struct nftnl_rule *spoofed_rule(enum acct_family f, bool by_link, bool last)
{
	struct nftnl_rule *r = rule_new_any(ACCT_CHAIN_SPOOFED);
	char name[ACCT_COUNTER_NAME_MAX];

	if (!r)
		return NULL;
	if (!last)
		match_nfproto(r, f == ACCT_IPV4 ? NFPROTO_IPV4 : NFPROTO_IPV6);
	if (by_link) {
		acct_rule_add(r, acct_expr_meta(NFT_META_IIFNAME));
		acct_rule_add(r, acct_expr_objref_map(acct_spoofed_maps[f], ACCT_ID_SPOOFED_MAPS + f));
	} else {
		acct_spoofed_counter_name(NULL, f, name);
		acct_rule_add(r, acct_expr_counter(name));
	}
	acct_rule_add(r, acct_expr_verdict(NF_DROP, NULL));
	return r;
}

/* ip daddr <addr> (host order) */
static void match_daddr(struct nftnl_rule *r, uint32_t addr)
{
	uint32_t be = htonl(addr);

	acct_rule_add(r, acct_expr_ip(16));
	acct_rule_add(r, acct_expr_cmp_eq(&be, sizeof(be)));
}

/* meta l4proto <proto> th dport <port> */
static void match_dport(struct nftnl_rule *r, uint8_t proto, uint16_t port)
{
	uint16_t be = htons(port);

	acct_rule_add(r, acct_expr_meta(NFT_META_L4PROTO));
	acct_rule_add(r, acct_expr_cmp_eq(&proto, sizeof(proto)));
	acct_rule_add(r, acct_expr_payload_to(NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG_1));
	acct_rule_add(r, acct_expr_cmp_eq(&be, sizeof(be)));
}

/* In from_pod: ip daddr <addr> jump to_cloud */
static struct nftnl_rule *to_cloud_rule(uint32_t addr)
{
	struct nftnl_rule *r = rule_new(ACCT_CHAIN_FROM_POD);

	if (!r)
		return NULL;
	match_daddr(r, addr);
	acct_rule_add(r, acct_expr_verdict(NFT_JUMP, ACCT_CHAIN_TO_CLOUD));
	return r;
}

/* In from_pod: meta l4proto tcp tcp dport <metricsPort> jump to_agent */
static struct nftnl_rule *to_agent_rule(uint16_t port)
{
	struct nftnl_rule *r = rule_new(ACCT_CHAIN_FROM_POD);

	if (!r)
		return NULL;
	match_dport(r, IPPROTO_TCP, port);
	acct_rule_add(r, acct_expr_verdict(NFT_JUMP, ACCT_CHAIN_TO_AGENT));
	return r;
}

/*
 * In forward and input, after DNAT: iifname "<prefix>*" meta l4proto tcp
 * tcp dport <metricsPort> jump to_agent. A Service (or an EndpointSlice a
 * tenant writes itself) whose port is another one reaches the agents' port
 * only once translated, which from_pod, before conntrack, cannot see.
 */
static struct nftnl_rule *to_agent_translated_rule(const char *chain, const char *prefix,
						   uint16_t port)
{
	struct nftnl_rule *r = rule_new(chain);

	if (!r)
		return NULL;
	match_pod_link(r, prefix);
	match_dport(r, IPPROTO_TCP, port);
	acct_rule_add(r, acct_expr_verdict(NFT_JUMP, ACCT_CHAIN_TO_AGENT));
	return r;
}

/*
 * In forward and input, after DNAT: ip daddr <addr> iifname "<prefix>*"
 * jump to_cloud. A Service (or an EndpointSlice a tenant writes) pointing
 * at IMDS or the WireServer reaches them only once translated, which
 * from_pod, before conntrack, cannot see. The address first: it fails
 * fast for every other packet.
 */
static struct nftnl_rule *to_cloud_translated_rule(const char *chain, const char *prefix,
						   uint32_t addr)
{
	struct nftnl_rule *r = rule_new(chain);

	if (!r)
		return NULL;
	match_daddr(r, addr);
	match_pod_link(r, prefix);
	acct_rule_add(r, acct_expr_verdict(NFT_JUMP, ACCT_CHAIN_TO_CLOUD));
	return r;
}

/* ip saddr @<allowed> return: a pod of a listed namespace goes on. */
static struct nftnl_rule *allowed_rule(const char *chain, const char *set, uint32_t id)
{
	struct nftnl_rule *r = rule_new(chain);

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ip(12));
	acct_rule_add(r, acct_expr_lookup(set, id, false));
	acct_rule_add(r, acct_expr_verdict(NFT_RETURN, NULL));
	return r;
}

/* In to_cloud: ip daddr 168.63.129.16 meta l4proto <proto> th dport 53 return (DNS) */
static struct nftnl_rule *wireserver_dns_rule(uint8_t proto)
{
	struct nftnl_rule *r = rule_new(ACCT_CHAIN_TO_CLOUD);

	if (!r)
		return NULL;
	match_daddr(r, ACCT_WIRESERVER_ADDR);
	match_dport(r, proto, 53);
	acct_rule_add(r, acct_expr_verdict(NFT_RETURN, NULL));
	return r;
}

enum deny_when { DENY_ALWAYS, DENY_INTERNAL, DENY_LOCAL };

/*
 * [ip daddr @internal | fib daddr type local] [counter name ip saddr map @<map>] drop.
 * Counted: a pod without an element in the map (none should be) breaks the
 * rule and meets the uncounted one after it.
 */
static struct nftnl_rule *deny_rule(const char *chain, enum deny_when when, const char *map,
				    uint32_t map_id)
{
	struct nftnl_rule *r = rule_new(chain);

	if (!r)
		return NULL;
	if (when == DENY_INTERNAL) {
		acct_rule_add(r, acct_expr_ip(16));
		acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, false));
	} else if (when == DENY_LOCAL) {
		match_local(r);
	}
	if (map) {
		acct_rule_add(r, acct_expr_ip(12));
		acct_rule_add(r, acct_expr_objref_map(map, map_id));
	}
	acct_rule_add(r, acct_expr_verdict(NF_DROP, NULL));
	return r;
}

/*
 * In forward and input: iifname "<prefix>*" ct state invalid [counter name
 * ip saddr map @invalid_drop] drop. What conntrack cannot place (a SYN|FIN,
 * an out-of-window segment) never reaches the guard, whose refusals look
 * only at new connections, nor the masquerade, which would send it out with
 * the node's address; kube-proxy drops the same in its own forward chain.
 */
static struct nftnl_rule *invalid_rule(const char *chain, const char *prefix, bool counted)
{
	struct nftnl_rule *r = rule_new(chain);

	if (!r)
		return NULL;
	match_pod_link(r, prefix);
	match_ct_state(r, NF_CT_STATE_INVALID_BIT);
	if (counted) {
		acct_rule_add(r, acct_expr_ip(12));
		acct_rule_add(r, acct_expr_objref_map(ACCT_MAP_INVALID_DROP, ACCT_ID_INVALID_DROP));
	}
	acct_rule_add(r, acct_expr_verdict(NF_DROP, NULL));
	return r;
}

/*
 * In forward: iifname "<prefix>*" oifname != "<prefix>*" ct state new rt ip
 * nexthop != @nexthops limit name ip saddr map @nexthop_limit counter name
 * ip saddr map @neighbour_drop drop, then the same match without the limit
 * adding the next hop to @nexthops. A forwarded connection to an on-link
 * address makes the node resolve it: a neighbour entry, in a table one per
 * node. A pod that walks a large on-link subnet would fill it ("neighbor
 * table overflow") and cut the node off from new peers; a next hop resolved
 * lately costs nothing new, and pods' own links hold permanent entries.
 * A full @nexthops remembers nothing more: every new next hop then meets
 * the namespace's rate.
 */
static struct nftnl_rule *new_nexthop_rule(const char *prefix, bool limit)
{
	struct nftnl_rule *r = rule_new("forward");

	if (!r)
		return NULL;
	match_pod_link(r, prefix);
	acct_rule_add(r, acct_expr_meta(NFT_META_OIFNAME));
	acct_rule_add(r, acct_expr_cmp(NFT_CMP_NEQ, prefix, (uint32_t)strlen(prefix)));
	match_ct_new(r);
	acct_rule_add(r, acct_expr_rt_nexthop4());
	if (limit) {
		acct_rule_add(r, acct_expr_lookup(ACCT_SET_NEXTHOPS, ACCT_ID_NEXTHOPS, true));
		acct_rule_add(r, acct_expr_ip(12));
		acct_rule_add(r, acct_expr_objref_map(ACCT_MAP_NEXTHOP_LIMIT, ACCT_ID_NEXTHOP_LIMIT));
		acct_rule_add(r, acct_expr_objref_map(ACCT_MAP_NEIGHBOUR_DROP, ACCT_ID_NEIGHBOUR_DROP));
		acct_rule_add(r, acct_expr_verdict(NF_DROP, NULL));
	} else {
		acct_rule_add(r, acct_expr_dynset(ACCT_SET_NEXTHOPS, ACCT_ID_NEXTHOPS,
						  NFT_DYNSET_OP_ADD));
	}
	return r;
}

/*
 * nodeAccess, after anti-spoofing (the source is the pod's own): the
 * cloud's metadata for pods of metadataNamespaces (and the WireServer's DNS
 * for every pod), metricsPort of the node or of any internal address for
 * pods of metricsNamespaces, when that is set.
 */
static int put_access(struct acct_rule_list *bt, const struct acct_config *cfg)
{

	static const uint32_t cloud[] = { ACCT_IMDS_ADDR, ACCT_WIRESERVER_ADDR };
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cloud); i++) {
		r |= put_rule(bt, to_cloud_rule(cloud[i]));
		/* first in their chains: nothing is counted of what they drop */
		r |= put_rule(bt, to_cloud_translated_rule("forward", cfg->pod_link_prefix, cloud[i]));
		r |= put_rule(bt, to_cloud_translated_rule("input", cfg->pod_link_prefix, cloud[i]));
	}
	r |= put_rule(bt, allowed_rule(ACCT_CHAIN_TO_CLOUD, ACCT_SET_METADATA_OK,
				       ACCT_ID_METADATA_OK));
	r |= put_rule(bt, wireserver_dns_rule(IPPROTO_UDP));
	r |= put_rule(bt, wireserver_dns_rule(IPPROTO_TCP));
	r |= put_rule(bt, deny_rule(ACCT_CHAIN_TO_CLOUD, DENY_ALWAYS, ACCT_MAP_METADATA_DROP,
				    ACCT_ID_METADATA_DROP));
	r |= put_rule(bt, deny_rule(ACCT_CHAIN_TO_CLOUD, DENY_ALWAYS, NULL, 0));
	if (!cfg->access.metrics_filter)
		return r ? -ENOMEM : 0;
	r |= put_rule(bt, to_agent_rule(cfg->access.metrics_port));
	/* first in their chains: nothing is counted of what they drop */
	r |= put_rule(bt, to_agent_translated_rule("forward", cfg->pod_link_prefix,
						   cfg->access.metrics_port));
	r |= put_rule(bt, to_agent_translated_rule("input", cfg->pod_link_prefix,
						   cfg->access.metrics_port));
	r |= put_rule(bt, allowed_rule(ACCT_CHAIN_TO_AGENT, ACCT_SET_AGENT_OK, ACCT_ID_AGENT_OK));
	r |= put_rule(bt, deny_rule(ACCT_CHAIN_TO_AGENT, DENY_INTERNAL, ACCT_MAP_AGENT_DROP,
				    ACCT_ID_AGENT_DROP));
	r |= put_rule(bt, deny_rule(ACCT_CHAIN_TO_AGENT, DENY_LOCAL, ACCT_MAP_AGENT_DROP,
				    ACCT_ID_AGENT_DROP));
	r |= put_rule(bt, deny_rule(ACCT_CHAIN_TO_AGENT, DENY_INTERNAL, NULL, 0));
	r |= put_rule(bt, deny_rule(ACCT_CHAIN_TO_AGENT, DENY_LOCAL, NULL, 0));
	return r ? -ENOMEM : 0;
}

/*
 * A hostPort's DNAT: [ip daddr .] meta l4proto . th dport, one 32-bit
 * register each from NFT_REG32_00 on, looked up in the map, whose value
 * (address . port) lands in the next two registers, which dnat reads.
 * Only for a local destination: a packet the node forwards keeps its
 * destination, even to an address a pod named as its hostIP (or it would
 * take its neighbours' traffic to that address). On every address, outside
 * 127/8 and 169.254/16: loopback would need route_localnet on the pods'
 * links (which lets a pod reach the node's localhost), and link-local
 * addresses of the node are its services for pods (a node-local DNS cache
 * on 169.254.20.10, a credentials agent), which no pod's hostPort may take.
 */
static struct nftnl_rule *hostport_rule(const char *chain, bool by_ip)
{
	struct nftnl_rule *r = rule_new(chain);
	uint32_t reg = NFT_REG32_00;

	if (!r)
		return NULL;
	if (!by_ip) {
		static const uint32_t nets[][2] = { { 0x7f000000u, 0xff000000u },	/* 127/8 */
						    { 0xa9fe0000u, 0xffff0000u } };	/* 169.254/16 */

		for (size_t i = 0; i < ARRAY_SIZE(nets); i++) {
			uint32_t net = htonl(nets[i][0]);

			acct_rule_add(r, acct_expr_ip(16));
			acct_rule_add(r, acct_expr_bitwise32(htonl(nets[i][1]), 0));
			acct_rule_add(r, acct_expr_cmp(NFT_CMP_NEQ, &net, sizeof(net)));
		}
	}
	/* a hostIP that is not the node's must not catch what the node forwards to that address */
	match_local(r);
	if (by_ip)
		acct_rule_add(r, acct_expr_ip_to(16, reg++));
	acct_rule_add(r, acct_expr_meta_to(NFT_META_L4PROTO, reg++));
	acct_rule_add(r, acct_expr_payload_to(NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, reg++));
	acct_rule_add(r, by_ip ? acct_expr_map(ACCT_MAP_HOSTPORT_IP, ACCT_ID_HOSTPORT_IP,
					       NFT_REG32_00, reg)
			       : acct_expr_map(ACCT_MAP_HOSTPORT, ACCT_ID_HOSTPORT, NFT_REG32_00,
					       reg));
	acct_rule_add(r, acct_expr_dnat4(reg, reg + 1));
	return r;
}

/*
 * ct status dnat oifname . ip saddr @pod_src masquerade: a pod that reached
 * its own hostPort gets its packet back from the node's address, so that
 * its answer goes through the node and its DNAT is undone there.
 */
static struct nftnl_rule *hairpin_rule(void)
{
	struct nftnl_rule *r = rule_new("postrouting");
	uint32_t dnat = IPS_DST_NAT, zero = 0;

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ct(NFT_CT_STATUS));
	acct_rule_add(r, acct_expr_bitwise32(dnat, zero));
	acct_rule_add(r, acct_expr_cmp(NFT_CMP_NEQ, &zero, sizeof(zero)));
	acct_rule_add(r, acct_expr_meta(NFT_META_OIFNAME));
	acct_rule_add(r, acct_expr_ip_to(12, NFT_REG_2));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_POD_SRC, ACCT_ID_POD_SRC, false));
	acct_rule_add(r, acct_expr_plain("masq"));
	return r;
}

static struct nftnl_rule *masquerade_rule(void)
{
	struct nftnl_rule *r = rule_new("postrouting");

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ip(12));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_MASQ, ACCT_ID_MASQ, false));
	acct_rule_add(r, acct_expr_ip(16));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, true));
	acct_rule_add(r, acct_expr_plain("masq"));
	return r;
}

/* The pod counting rules of one chain: egress keyed by saddr, ingress by daddr. */
static int put_pod_counting(struct acct_rule_list *bt, const char *chain, bool egress, bool ingress,
			    const char *const maps[], uint32_t first_id)
{
	int r = 0;

	if (egress) {
		r |= put_rule(bt, count_rule(chain, 16, false, 12, maps[ACCT_EGRESS_INTERNAL],
					     first_id + ACCT_EGRESS_INTERNAL, NULL));
		r |= put_rule(bt, count_rule(chain, 16, true, 12, maps[ACCT_EGRESS_INTERNET],
					     first_id + ACCT_EGRESS_INTERNET, NULL));
	}
	if (ingress) {
		r |= put_rule(bt, count_rule(chain, 12, false, 16, maps[ACCT_INGRESS_INTERNAL],
					     first_id + ACCT_INGRESS_INTERNAL, NULL));
		r |= put_rule(bt, count_rule(chain, 12, true, 16, maps[ACCT_INGRESS_INTERNET],
					     first_id + ACCT_INGRESS_INTERNET, NULL));
	}
	return r ? -ENOMEM : 0;
}

/* Forwarded traffic's counting rules, in the chains that classified it already. */
static int put_fwd_counting(struct acct_rule_list *bt, const char *const maps[], uint32_t first_id)
{
	static const struct {
		const char *chain;
		enum acct_class cls;
		uint32_t key_off;	/* the pod's address: source going out, destination coming in */
	} rules[] = {
		{ ACCT_CHAIN_FWD_EGRESS_INTERNAL, ACCT_EGRESS_INTERNAL, 12 },
		{ ACCT_CHAIN_FWD_EGRESS, ACCT_EGRESS_INTERNET, 12 },
		{ ACCT_CHAIN_FWD_INGRESS_INTERNAL, ACCT_INGRESS_INTERNAL, 16 },
		{ ACCT_CHAIN_FWD_INGRESS, ACCT_INGRESS_INTERNET, 16 },
	};
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(rules); i++)
		r |= put_rule(bt, count_rule(rules[i].chain, 0, false, rules[i].key_off,
					     maps[rules[i].cls], first_id + rules[i].cls, NULL));
	return r ? -ENOMEM : 0;
}

int acct_table_rules(const struct acct_config *cfg, struct acct_rule_list *bt)
{
	int r = 0;

	bt->n = 0;
	bt->failed = false;
	if (!cfg->pod_link_prefix || !cfg->pod_link_prefix[0] ||
	    strlen(cfg->pod_link_prefix) >= ACCT_KEY_LINK_LEN)
		return -EINVAL;
	/* A pod sends only as itself, whatever else the config says. */
	r |= put_rule(bt, from_pod_rule(cfg->pod_link_prefix));
	r |= put_rule(bt, antispoof_rule());
	r |= put_rule(bt, antispoof_ipv6_rule());
	r |= put_rule(bt, spoofed_rule(ACCT_IPV4, true, false));
	r |= put_rule(bt, spoofed_rule(ACCT_IPV6, true, false));
	r |= put_rule(bt, spoofed_rule(ACCT_IPV4, false, false));
	r |= put_rule(bt, spoofed_rule(ACCT_IPV6, false, true));
	r |= put_access(bt, cfg);
	/* a pod without an element in @invalid_drop (none should be) meets the uncounted rule */
	for (int counted = 1; counted >= 0; counted--) {
		r |= put_rule(bt, invalid_rule("forward", cfg->pod_link_prefix, counted));
		r |= put_rule(bt, invalid_rule("input", cfg->pod_link_prefix, counted));
	}
	/* The node's neighbour table: a namespace's new on-link next hops, at its rate. */
	if (cfg->access.neighbours_per_second) {
		r |= put_rule(bt, new_nexthop_rule(cfg->pod_link_prefix, true));
		r |= put_rule(bt, new_nexthop_rule(cfg->pod_link_prefix, false));
	}
	/*
	 * Internet-bound packets carry the mark from before routing on. What
	 * reaches the mark in from_pod has its pod's address (anti-spoofing saw
	 * to it): no lookup in @pods to tell a pod's packet.
	 */
	r |= put_rule(bt, skip_loopback("output", NFT_META_OIF));
	if (cfg->internet_mark) {
		r |= put_rule(bt, mark_rule(ACCT_CHAIN_FROM_POD, cfg->internet_mark));
		r |= put_rule(bt, mark_rule("output", cfg->internet_mark));
	}
	/* Forwarded pod traffic: one classification per direction (see ACCT_CHAIN_FWD_EGRESS). */
	r |= put_rule(bt, branch_rule("forward", 0, NFT_JUMP, ACCT_CHAIN_FWD_EGRESS));
	r |= put_rule(bt, branch_rule("forward", 0, NFT_JUMP, ACCT_CHAIN_FWD_INGRESS));
	r |= put_rule(bt, branch_rule(ACCT_CHAIN_FWD_EGRESS, 16, NFT_GOTO,
				      ACCT_CHAIN_FWD_EGRESS_INTERNAL));
	r |= put_rule(bt, branch_rule(ACCT_CHAIN_FWD_INGRESS, 12, NFT_GOTO,
				      ACCT_CHAIN_FWD_INGRESS_INTERNAL));
	/* Internet traffic passes its namespace's guard before it is counted or shaped. */
	if (cfg->guard.on) {
		r |= put_rule(bt, guard_jump_rule(ACCT_DIR_EGRESS, !cfg->guard.dst.on));
		if (cfg->guard.dst.on)
			r |= put_rule(bt, guard_jump_rule(ACCT_DIR_INGRESS, false));
		/*
		 * The node's conntrack table: a namespace's new internal and
		 * local connections pass its guard chain too, whose first rule
		 * is the ceiling (they return before its internet limits).
		 */
		if (cfg->access.ns_connections) {
			r |= put_rule(bt, guard_new_jump_rule(ACCT_CHAIN_FWD_EGRESS_INTERNAL, NULL));
			r |= put_rule(bt, guard_new_jump_rule("input", cfg->pod_link_prefix));
		}
		r |= put_rule(bt, refuse_rule(true));
		r |= put_rule(bt, refuse_rule(false));
	}
	/* The shaper's classes for internet traffic (the classids come with the config). */
	r |= put_rule(bt, inet_egress_class_rule());
	if (cfg->inet_ingress_classid)
		r |= put_rule(bt, inet_ingress_class_rule(cfg->inet_ingress_classid));
	if (cfg->enabled) {
		r |= put_fwd_counting(bt, acct_ns_maps, ACCT_ID_NS_MAPS);
		if (cfg->per_pod)
			r |= put_fwd_counting(bt, acct_pod_maps, ACCT_ID_POD_MAPS);
		/* Pods' traffic with the node itself. */
		r |= put_rule(bt, skip_loopback("input", NFT_META_IIF));
		r |= put_pod_counting(bt, "input", true, false, acct_ns_maps, ACCT_ID_NS_MAPS);
		if (cfg->per_pod)
			r |= put_pod_counting(bt, "input", true, false, acct_pod_maps,
					      ACCT_ID_POD_MAPS);
		r |= put_rule(bt, count_rule("input", 12, false, 0, NULL, 0, "host_ingress_internal"));
		r |= put_rule(bt, count_rule("input", 12, true, 0, NULL, 0, "host_ingress_internet"));
		r |= put_pod_counting(bt, "output", false, true, acct_ns_maps, ACCT_ID_NS_MAPS);
		if (cfg->per_pod)
			r |= put_pod_counting(bt, "output", false, true, acct_pod_maps,
					      ACCT_ID_POD_MAPS);
		r |= put_rule(bt, count_rule("output", 16, false, 0, NULL, 0, "host_egress_internal"));
		r |= put_rule(bt, count_rule("output", 16, true, 0, NULL, 0, "host_egress_internet"));
	}
	/* hostPorts: the mappings on one address first, those on every address after */
	r |= put_rule(bt, hostport_rule(ACCT_CHAIN_PREROUTING_NAT, true));
	r |= put_rule(bt, hostport_rule(ACCT_CHAIN_PREROUTING_NAT, false));
	r |= put_rule(bt, hostport_rule(ACCT_CHAIN_OUTPUT_NAT, true));
	r |= put_rule(bt, hostport_rule(ACCT_CHAIN_OUTPUT_NAT, false));
	r |= put_rule(bt, hairpin_rule());
	r |= put_rule(bt, masquerade_rule());
	if (r || bt->failed) {
		acct_rule_list_free(bt);
		return -ENOMEM;
	}
	return 0;
}
