// SPDX-License-Identifier: Apache-2.0
/*
 * nodeAccess' rules in table inet tollgate: what pods reach of the node and
 * the cloud's metadata (chains to_cloud and to_agent, reached from
 * from_pod and, once translated, from forward and input), the control
 * plane's ports (chains to_service and service_deny, from forward and
 * input: servicePorts), the drop of
 * conntrack-invalid packets from pods, and the rate of a namespace's new
 * on-link next hops. The pods' elements they look up: pods.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <netinet/in.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>

#include "accounting/internal.h"
#include "lib/util.h"

/* In from_pod: ip daddr <addr> jump to_cloud */
static struct nftnl_rule *to_cloud_rule(uint32_t addr)
{
	struct nftnl_rule *r = acct_rule_new(ACCT_CHAIN_FROM_POD);

	if (!r)
		return NULL;
	acct_match_daddr(r, addr);
	acct_rule_add(r, acct_expr_verdict(NFT_JUMP, ACCT_CHAIN_TO_CLOUD));
	return r;
}

/* In from_pod: meta l4proto tcp tcp dport <metricsPort> jump to_agent */
static struct nftnl_rule *to_agent_rule(uint16_t port)
{
	struct nftnl_rule *r = acct_rule_new(ACCT_CHAIN_FROM_POD);

	if (!r)
		return NULL;
	acct_match_dport(r, IPPROTO_TCP, port);
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
	struct nftnl_rule *r = acct_rule_new(chain);

	if (!r)
		return NULL;
	acct_match_pod_link(r, prefix);
	acct_match_dport(r, IPPROTO_TCP, port);
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
	struct nftnl_rule *r = acct_rule_new(chain);

	if (!r)
		return NULL;
	acct_match_daddr(r, addr);
	acct_match_pod_link(r, prefix);
	acct_rule_add(r, acct_expr_verdict(NFT_JUMP, ACCT_CHAIN_TO_CLOUD));
	return r;
}

/* ip saddr @<allowed> return: a pod of a listed namespace goes on. */
static struct nftnl_rule *allowed_rule(const char *chain, const char *set, uint32_t id)
{
	struct nftnl_rule *r = acct_rule_new(chain);

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
	struct nftnl_rule *r = acct_rule_new(ACCT_CHAIN_TO_CLOUD);

	if (!r)
		return NULL;
	acct_match_daddr(r, ACCT_WIRESERVER_ADDR);
	acct_match_dport(r, proto, 53);
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
	struct nftnl_rule *r = acct_rule_new(chain);

	if (!r)
		return NULL;
	if (when == DENY_INTERNAL) {
		acct_rule_add(r, acct_expr_ip(16));
		acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, false));
	} else if (when == DENY_LOCAL) {
		acct_match_local(r);
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
	struct nftnl_rule *r = acct_rule_new(chain);

	if (!r)
		return NULL;
	acct_match_pod_link(r, prefix);
	acct_match_ct_state(r, NF_CT_STATE_INVALID_BIT);
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
	struct nftnl_rule *r = acct_rule_new("forward");

	if (!r)
		return NULL;
	acct_match_pod_link(r, prefix);
	acct_rule_add(r, acct_expr_meta(NFT_META_OIFNAME));
	acct_rule_add(r, acct_expr_cmp(NFT_CMP_NEQ, prefix, (uint32_t)strlen(prefix)));
	acct_match_ct_new(r);
	acct_rule_add(r, acct_expr_rt_nexthop4());
	if (limit) {
		acct_rule_add(r, acct_expr_lookup(ACCT_SET_NEXTHOPS, ACCT_ID_NEXTHOPS, true));
		acct_rule_add(r, acct_expr_ip(12));
		acct_rule_add(r,
			      acct_expr_objref_map(ACCT_MAP_NEXTHOP_LIMIT, ACCT_ID_NEXTHOP_LIMIT));
		acct_rule_add(r, acct_expr_objref_map(ACCT_MAP_NEIGHBOUR_DROP,
						      ACCT_ID_NEIGHBOUR_DROP));
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
static int access_rules(struct acct_rule_list *list, const struct acct_config *cfg)
{
	static const uint32_t cloud[] = { ACCT_IMDS_ADDR, ACCT_WIRESERVER_ADDR };
	const char *prefix = cfg->pod_link_prefix;
	uint16_t port = cfg->access.metrics_port;
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(cloud); i++) {
		r |= acct_rule_list_add(list, to_cloud_rule(cloud[i]));
		/* first in their chains: nothing is counted of what they drop */
		r |= acct_rule_list_add(list,
					to_cloud_translated_rule("forward", prefix, cloud[i]));
		r |= acct_rule_list_add(list, to_cloud_translated_rule("input", prefix, cloud[i]));
	}
	r |= acct_rule_list_add(list, allowed_rule(ACCT_CHAIN_TO_CLOUD, ACCT_SET_METADATA_OK,
						   ACCT_ID_METADATA_OK));
	r |= acct_rule_list_add(list, wireserver_dns_rule(IPPROTO_UDP));
	r |= acct_rule_list_add(list, wireserver_dns_rule(IPPROTO_TCP));
	r |= acct_rule_list_add(list, deny_rule(ACCT_CHAIN_TO_CLOUD, DENY_ALWAYS,
						ACCT_MAP_METADATA_DROP, ACCT_ID_METADATA_DROP));
	r |= acct_rule_list_add(list, deny_rule(ACCT_CHAIN_TO_CLOUD, DENY_ALWAYS, NULL, 0));
	if (!cfg->access.metrics_filter)
		return r ? -ENOMEM : 0;
	r |= acct_rule_list_add(list, to_agent_rule(port));
	/* first in their chains: nothing is counted of what they drop */
	r |= acct_rule_list_add(list, to_agent_translated_rule("forward", prefix, port));
	r |= acct_rule_list_add(list, to_agent_translated_rule("input", prefix, port));
	r |= acct_rule_list_add(list, allowed_rule(ACCT_CHAIN_TO_AGENT, ACCT_SET_AGENT_OK,
						   ACCT_ID_AGENT_OK));
	r |= acct_rule_list_add(list, deny_rule(ACCT_CHAIN_TO_AGENT, DENY_INTERNAL,
						ACCT_MAP_AGENT_DROP, ACCT_ID_AGENT_DROP));
	r |= acct_rule_list_add(list, deny_rule(ACCT_CHAIN_TO_AGENT, DENY_LOCAL,
						ACCT_MAP_AGENT_DROP, ACCT_ID_AGENT_DROP));
	r |= acct_rule_list_add(list, deny_rule(ACCT_CHAIN_TO_AGENT, DENY_INTERNAL, NULL, 0));
	r |= acct_rule_list_add(list, deny_rule(ACCT_CHAIN_TO_AGENT, DENY_LOCAL, NULL, 0));
	return r ? -ENOMEM : 0;
}

/*
 * nodeAccess.servicePorts. A pod's element of @service_ok: its address .
 * tcp . the entry's index (in the port's place) for each entry whose
 * namespaces hold the pod's; index, not port, so that a removal needs no
 * config (acct_service_ok_elem with every index).
 */
static size_t service_ok_key(uint32_t ip, size_t entry, uint8_t ret[ACCT_HOSTPORT_KEY_MAX])
{
	uint32_t be = htonl(ip);
	uint16_t idx = htons((uint16_t)entry);

	memset(ret, 0, ACCT_HOSTPORT_KEY_MAX);
	memcpy(ret, &be, 4);
	ret[4] = IPPROTO_TCP;
	memcpy(ret + 8, &idx, 2);
	return 12;
}

int acct_service_ok_elem(struct acct_batch *bt, uint16_t type, uint32_t ip, size_t entry)
{
	uint8_t key[ACCT_HOSTPORT_KEY_MAX];
	size_t n = service_ok_key(ip, entry, key);

	return acct_put_elem_key(bt, type, ACCT_SET_SERVICE_OK, key, n, NULL, NULL, 0, false);
}

int acct_put_service_ok(struct acct_batch *bt, const struct acct_config *cfg,
			const struct acct_pod *p)
{
	const struct acct_access *a = &cfg->access;
	int r = 0;

	for (size_t i = 0; i < a->n_services; i++)
		if (acct_ns_listed(a->services[i].ns, a->services[i].n_ns, p->k8s_namespace))
			r |= acct_service_ok_elem(bt, NFT_MSG_NEWSETELEM, p->ip, i);
	return r ? -ENOMEM : 0;
}

/* Register dreg = len bytes of data, the rest of its 4 zeroed by the kernel: a part of a concatenation. */
static struct nftnl_expr *immediate_to(uint32_t dreg, const void *data, uint32_t len)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("immediate");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_IMM_DREG, dreg);
	nftnl_expr_set(ex, NFTNL_EXPR_IMM_DATA, data, len);
	return ex;
}

/* reg1 = ct original proto-dst: the port the connection was first addressed to, before any DNAT */
static struct nftnl_expr *ct_original_dport(void)
{
	struct nftnl_expr *ex = nftnl_expr_alloc("ct");

	if (!ex)
		return NULL;
	nftnl_expr_set_u32(ex, NFTNL_EXPR_CT_KEY, NFT_CT_PROTO_DST);
	nftnl_expr_set_u8(ex, NFTNL_EXPR_CT_DIR, 0); /* IP_CT_DIR_ORIGINAL */
	nftnl_expr_set_u32(ex, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	return ex;
}

/*
 * In forward (to an internal address) and input (to the node's own):
 * iifname "<prefix>*" meta l4proto tcp ct state new [ip daddr @internal]
 * jump to_service. A connection's first packet, after DNAT: its port as
 * translated and as first addressed are both there to see.
 */
static struct nftnl_rule *to_service_rule(const char *chain, const char *prefix, bool internal)
{
	struct nftnl_rule *r = acct_rule_new(chain);
	uint8_t tcp = IPPROTO_TCP;

	if (!r)
		return NULL;
	acct_match_pod_link(r, prefix);
	acct_rule_add(r, acct_expr_meta(NFT_META_L4PROTO));
	acct_rule_add(r, acct_expr_cmp_eq(&tcp, sizeof(tcp)));
	acct_match_ct_new(r);
	if (internal) {
		acct_rule_add(r, acct_expr_ip(16));
		acct_rule_add(r, acct_expr_lookup(ACCT_SET_INTERNAL, ACCT_ID_INTERNAL, false));
	}
	acct_rule_add(r, acct_expr_verdict(NFT_JUMP, ACCT_CHAIN_TO_SERVICE));
	return r;
}

/*
 * In to_service: meta l4proto tcp <tcp dport | ct original proto-dst>
 * LOW[-HIGH] ip saddr . meta l4proto . <entry> != @service_ok goto service_deny
 * (the protocol again, which the jump checked, so that `nft list` reads the
 * port as one). One rule a range and
 * a way of seeing the port: a Service's port translated to the entry's,
 * and the entry's translated to another, both meet it.
 */
static struct nftnl_rule *service_port_rule(const struct acct_port_range *pr, size_t entry,
					    bool original)
{
	struct nftnl_rule *r = acct_rule_new(ACCT_CHAIN_TO_SERVICE);
	uint16_t lo = htons(pr->lo), hi = htons(pr->hi), idx = htons((uint16_t)entry);
	uint8_t tcp = IPPROTO_TCP;

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_meta(NFT_META_L4PROTO));
	acct_rule_add(r, acct_expr_cmp_eq(&tcp, sizeof(tcp)));
	if (original)
		acct_rule_add(r, ct_original_dport());
	else
		acct_rule_add(r,
			      acct_expr_payload_to(NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG_1));
	if (pr->lo == pr->hi) {
		acct_rule_add(r, acct_expr_cmp_eq(&lo, sizeof(lo)));
	} else {
		/* network order compares as the numbers do: cmp is a memcmp */
		acct_rule_add(r, acct_expr_cmp(NFT_CMP_GTE, &lo, sizeof(lo)));
		acct_rule_add(r, acct_expr_cmp(NFT_CMP_LTE, &hi, sizeof(hi)));
	}
	acct_rule_add(r, acct_expr_ip_to(12, NFT_REG32_00));
	acct_rule_add(r, acct_expr_meta_to(NFT_META_L4PROTO, NFT_REG32_01)); /* tcp */
	acct_rule_add(r, immediate_to(NFT_REG32_02, &idx, sizeof(idx)));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_SERVICE_OK, ACCT_ID_SERVICE_OK, true));
	acct_rule_add(r, acct_expr_verdict(NFT_GOTO, ACCT_CHAIN_SERVICE_DENY));
	return r;
}

/* In service_deny: [counter name ip saddr map @agent_drop] drop (the metrics port's counter). */
static struct nftnl_rule *service_deny_rule(bool counted)
{
	return deny_rule(ACCT_CHAIN_SERVICE_DENY, DENY_ALWAYS, counted ? ACCT_MAP_AGENT_DROP : NULL,
			 ACCT_ID_AGENT_DROP);
}

static int service_rules(struct acct_rule_list *list, const struct acct_config *cfg)
{
	const struct acct_access *a = &cfg->access;
	int r = 0;

	if (!a->n_services)
		return 0;
	r |= acct_rule_list_add(list, to_service_rule("forward", cfg->pod_link_prefix, true));
	r |= acct_rule_list_add(list, to_service_rule("input", cfg->pod_link_prefix, false));
	for (size_t i = 0; i < a->n_services; i++)
		for (size_t k = 0; k < a->services[i].n_ports; k++)
			for (int original = 0; original < 2; original++)
				r |= acct_rule_list_add(list,
							service_port_rule(&a->services[i].ports[k],
									  i, original));
	/* a pod without an element in @agent_drop (none should be) meets the uncounted rule */
	r |= acct_rule_list_add(list, service_deny_rule(true));
	r |= acct_rule_list_add(list, service_deny_rule(false));
	return r ? -ENOMEM : 0;
}

int acct_access_rules(struct acct_rule_list *list, const struct acct_config *cfg)
{
	const char *prefix = cfg->pod_link_prefix;
	int r = access_rules(list, cfg);

	r |= service_rules(list, cfg);
	/* a pod without an element in @invalid_drop (none should be) meets the uncounted rule */
	for (int counted = 1; counted >= 0; counted--) {
		r |= acct_rule_list_add(list, invalid_rule("forward", prefix, counted));
		r |= acct_rule_list_add(list, invalid_rule("input", prefix, counted));
	}
	/* The node's neighbour table: a namespace's new on-link next hops, at its rate. */
	if (cfg->access.neighbours_per_second) {
		r |= acct_rule_list_add(list, new_nexthop_rule(prefix, true));
		r |= acct_rule_list_add(list, new_nexthop_rule(prefix, false));
	}
	return r ? -ENOMEM : 0;
}
