// SPDX-License-Identifier: Apache-2.0
/*
 * The accounting module without a kernel: its netlink ends in the fake
 * nf_tables of tests/unit/fake_nfnl.h (libmnl's socket calls wrapped at link
 * time), which parses what it is sent with libnftnl and answers as the
 * kernel does.
 *
 * The cases of tests/unit/acct_cases.h (the reader, the batch transport, a
 * 400-pod rebuild, as tests/kernel/ktest_accounting.c runs them against the
 * kernel), and what only the fake can show or only needs no table:
 *
 * - the rules' bytes pin ACCT_TABLE_LAYOUT; spoofed-packet counter names parse back;
 * - fwd_ingress gives a pod's downloads its @ingress_class priority and the
 *   internet mark in one rule, after the veth's class;
 * - servicePorts: forward and input jump to to_service, where each range of
 *   each entry is matched twice (as translated, as first addressed), and the
 *   largest config fits the rule list;
 * - the reader takes only Tollgate's counters even from a kernel that does
 *   not filter the dump, and reads again after a commit interrupted a read;
 * - an expression that cannot be allocated (nftnl_expr_alloc wrapped at link
 *   time) fails the whole build of the rules: none is sent short of a match.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "accounting/accounting.h"
#include "accounting/internal.h"
#include "lib/cleanup.h"
#include "lib/util.h"

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include "tests/unit/fake_nfnl.h"
#include "tests/unit/acct_cases.h"

/*
 * The rules acct_table_rules builds, as bytes, for a spread of configs: when they
 * change, ACCT_TABLE_LAYOUT must change too (rule stamps are made from it, not from
 * the rules), or nodes declared by the old layout would keep the old rules.
 */
#define LAYOUT_RULES_HASH 0x4d8fcd0f0d9c67baULL

/* The shipped servicePorts: 9618 for monitoring, 2379-2380 for kube-system. */
static const char *const services_mon[] = { "monitoring" };
static const char *const services_sys[] = { "kube-system" };
static void with_services(struct acct_config *cfg)
{
	struct acct_access *a = &cfg->access;

	memset(a->services, 0, sizeof(a->services));
	a->services[0].ports[0] = (struct acct_port_range){ 9618, 9618 };
	a->services[0].n_ports = 1;
	a->services[0].ns[0] = services_mon[0];
	a->services[0].n_ns = 1;
	a->services[1].ports[0] = (struct acct_port_range){ 2379, 2380 };
	a->services[1].n_ports = 1;
	a->services[1].ns[0] = services_sys[0];
	a->services[1].n_ns = 1;
	a->n_services = 2;
}

static uint64_t rules_hash(const struct acct_config *cfg, uint64_t h)
{
	struct acct_rule_list w;

	assert_int_equal(acct_table_rules(cfg, &w), 0);
	for (size_t i = 0; i < w.n; i++) {
		char buf[4096] = { 0 };
		struct nlmsghdr *nlh =
			nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWRULE, NFPROTO_INET, 0, 0);

		nftnl_rule_nlmsg_build_payload(nlh, w.r[i]);
		h = hash_fnv1a64(mnl_nlmsg_get_payload(nlh), mnl_nlmsg_get_payload_len(nlh), h);
	}
	acct_rule_list_free(&w);
	/* and a namespace's guard chains, whose stamps carry the layout too */
	for (int d = 0; cfg->guard.on && d < ACCT_DIRS; d++) {
		assert_int_equal(acct_guard_rules(cfg, "crawl", (enum acct_dir)d, "s", &w), 0);
		for (size_t i = 0; i < w.n; i++) {
			char buf[4096] = { 0 };
			struct nlmsghdr *nlh =
				nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWRULE, NFPROTO_INET, 0, 0);

			nftnl_rule_nlmsg_build_payload(nlh, w.r[i]);
			h = hash_fnv1a64(mnl_nlmsg_get_payload(nlh), mnl_nlmsg_get_payload_len(nlh),
					 h);
		}
		acct_rule_list_free(&w);
	}
	return h;
}

static void t_layout_version_follows_rules(void **state)
{
	struct acct_config cfg = config();
	uint64_t h = FNV1A64_INIT;

	(void)state;
	h = rules_hash(&cfg, h);
	/* nodeAccess' ceiling and next-hop rate, with and without the guard */
	cfg.access.ns_connections = 65536;
	cfg.access.neighbours_per_second = 200;
	h = rules_hash(&cfg, h);
	cfg.guard.on = cfg.guard.limits = true;
	cfg.guard.concurrent_default = 100;
	cfg.guard.new_per_second = 10;
	h = rules_hash(&cfg, h);
	cfg.guard.dst = (struct acct_destinations){ true, 10, 24, 1024 };
	h = rules_hash(&cfg, h);
	cfg.access.ns_connections = 0;
	cfg.access.neighbours_per_second = 0;
	cfg.guard.limits = false;
	h = rules_hash(&cfg, h);
	cfg.guard.on = false;
	cfg.per_pod = false;
	h = rules_hash(&cfg, h);
	cfg.enabled = false;
	h = rules_hash(&cfg, h);
	cfg.internet_mark = 0;
	cfg.inet_ingress_classid = 0;
	h = rules_hash(&cfg, h);
	/* nodeAccess.servicePorts: the allocator's port and etcd's range */
	with_services(&cfg);
	h = rules_hash(&cfg, h);
	if (h != LAYOUT_RULES_HASH || strcmp(ACCT_TABLE_LAYOUT, "tollgate-table/18") != 0)
		fail_msg("the rules changed (hash %#llx): give ACCT_TABLE_LAYOUT a new version and "
			 "record both here",
			 (unsigned long long)h);
}

/* nftnl_expr_alloc fails at its expr_fail_at-th call from now (0: never). */
struct nftnl_expr *__real_nftnl_expr_alloc(const char *name);
struct nftnl_expr *__wrap_nftnl_expr_alloc(const char *name);
static unsigned expr_calls, expr_fail_at;

struct nftnl_expr *__wrap_nftnl_expr_alloc(const char *name)
{
	if (expr_fail_at && ++expr_calls == expr_fail_at)
		return NULL;
	return __real_nftnl_expr_alloc(name);
}

/* Builds every rule of a config with the n-th allocation failing; how many allocations it made. */
static unsigned rules_with_failure(const struct acct_config *cfg, unsigned n, int *ret)
{
	struct acct_rule_list w;

	expr_calls = 0;
	expr_fail_at = n;
	*ret = acct_table_rules(cfg, &w);
	expr_fail_at = 0;
	if (*ret == 0)
		acct_rule_list_free(&w);
	else
		assert_int_equal(w.n, 0);
	return expr_calls;
}

static void t_rules_fail_whole_on_allocation_failure(void **state)
{
	struct acct_config cfg = config();
	unsigned total, failed = 0;
	int r;

	(void)state;
	cfg.guard.on = cfg.guard.limits = true;
	cfg.access.metrics_filter = true;
	cfg.access.metrics_port = 9617;
	with_services(&cfg);
	/* control: counted without a failure, every rule built */
	expr_calls = 0;
	expr_fail_at = ~0u;
	total = rules_with_failure(&cfg, ~0u, &r);
	assert_int_equal(r, 0);
	assert_true(total > 100);
	for (unsigned n = 1; n <= total; n++) {
		rules_with_failure(&cfg, n, &r);
		if (r != -ENOMEM)
			fail_msg("allocation %u of %u failed and the rules were still built (%d)",
				 n, total, r);
		failed++;
	}
	assert_int_equal(failed, total);
	/* and the next build, without a failure, is whole again (nothing stale) */
	rules_with_failure(&cfg, 0, &r);
	assert_int_equal(r, 0);
}

/* How many of the rules go to chain `chain`. */
static size_t rules_in(const struct acct_rule_list *w, const char *chain)
{
	size_t n = 0;

	for (size_t i = 0; i < w->n; i++)
		n += strcmp(nftnl_rule_get_str(w->r[i], NFTNL_RULE_CHAIN), chain) == 0;
	return n;
}

/*
 * servicePorts: forward and input jump to to_service; there, each range of
 * each entry twice (the port as translated, as first addressed), every one
 * going to service_deny (counted, then not). Without entries, none of it.
 */
static void t_service_port_rules(void **state)
{
	struct acct_config cfg = config();
	struct acct_rule_list w, none;
	size_t fwd, in;

	(void)state;
	assert_int_equal(acct_table_rules(&cfg, &none), 0);
	assert_int_equal(rules_in(&none, "to_service"), 0);
	assert_int_equal(rules_in(&none, "service_deny"), 0);
	fwd = rules_in(&none, "forward");
	in = rules_in(&none, "input");
	with_services(&cfg);
	cfg.access.services[1].ports[1] = (struct acct_port_range){ 6443, 6443 };
	cfg.access.services[1].n_ports = 2;
	assert_int_equal(acct_table_rules(&cfg, &w), 0);
	assert_int_equal(rules_in(&w, "forward"), fwd + 1);
	assert_int_equal(rules_in(&w, "input"), in + 1);
	assert_int_equal(rules_in(&w, "to_service"), 2 * 3);
	assert_int_equal(rules_in(&w, "service_deny"), 2);
	assert_int_equal(w.n, none.n + 2 + 6 + 2);
	acct_rule_list_free(&w);
	/* the most a config may ask: every entry with every range, and room to spare */
	for (size_t i = 0; i < ACCT_SERVICE_PORTS_MAX; i++) {
		cfg.access.services[i].n_ports = ACCT_SERVICE_RANGES_MAX;
		for (size_t k = 0; k < ACCT_SERVICE_RANGES_MAX; k++)
			cfg.access.services[i].ports[k] =
				(struct acct_port_range){ (uint16_t)(1000 + 10 * i + k),
							  (uint16_t)(1000 + 10 * i + k) };
	}
	cfg.access.n_services = ACCT_SERVICE_PORTS_MAX;
	cfg.access.metrics_filter = true;
	cfg.guard.on = cfg.guard.limits = true;
	cfg.access.ns_connections = 65536;
	cfg.access.neighbours_per_second = 200;
	assert_int_equal(acct_table_rules(&cfg, &w), 0);
	assert_int_equal(rules_in(&w, "to_service"),
			 2 * ACCT_SERVICE_PORTS_MAX * ACCT_SERVICE_RANGES_MAX);
	acct_rule_list_free(&w);
	acct_rule_list_free(&none);
}

/* One expression of a rule, as the download-class test reads it back. */
struct expr_seen {
	char name[16];
	uint32_t a, b, c, d; /* per kind: see expr_of */
	char set[32];
	uint32_t mask, xor;
};

static int expr_of(struct nftnl_expr *ex, void *p)
{
	struct expr_seen **at = p;
	struct expr_seen *x = (*at)++;
	const char *name = nftnl_expr_get_str(ex, NFTNL_EXPR_NAME);
	uint32_t len = 0;
	const void *v;

	snprintf(x->name, sizeof(x->name), "%s", name);
	if (strcmp(name, "payload") == 0) {
		x->a = nftnl_expr_get_u32(ex, NFTNL_EXPR_PAYLOAD_BASE);
		x->b = nftnl_expr_get_u32(ex, NFTNL_EXPR_PAYLOAD_OFFSET);
		x->c = nftnl_expr_get_u32(ex, NFTNL_EXPR_PAYLOAD_LEN);
		x->d = nftnl_expr_get_u32(ex, NFTNL_EXPR_PAYLOAD_DREG);
	} else if (strcmp(name, "lookup") == 0) {
		snprintf(x->set, sizeof(x->set), "%s",
			 nftnl_expr_get_str(ex, NFTNL_EXPR_LOOKUP_SET));
		x->a = nftnl_expr_get_u32(ex, NFTNL_EXPR_LOOKUP_SREG);
		x->b = nftnl_expr_is_set(ex, NFTNL_EXPR_LOOKUP_DREG)
			       ? nftnl_expr_get_u32(ex, NFTNL_EXPR_LOOKUP_DREG)
			       : 0;
		x->c = nftnl_expr_is_set(ex, NFTNL_EXPR_LOOKUP_FLAGS)
			       ? nftnl_expr_get_u32(ex, NFTNL_EXPR_LOOKUP_FLAGS)
			       : 0;
		x->d = nftnl_expr_get_u32(ex, NFTNL_EXPR_LOOKUP_SET_ID);
	} else if (strcmp(name, "meta") == 0) {
		x->a = nftnl_expr_get_u32(ex, NFTNL_EXPR_META_KEY);
		x->b = nftnl_expr_is_set(ex, NFTNL_EXPR_META_SREG)
			       ? nftnl_expr_get_u32(ex, NFTNL_EXPR_META_SREG)
			       : 0;
		x->c = nftnl_expr_is_set(ex, NFTNL_EXPR_META_DREG)
			       ? nftnl_expr_get_u32(ex, NFTNL_EXPR_META_DREG)
			       : 0;
	} else if (strcmp(name, "bitwise") == 0) {
		x->a = nftnl_expr_get_u32(ex, NFTNL_EXPR_BITWISE_SREG);
		x->b = nftnl_expr_get_u32(ex, NFTNL_EXPR_BITWISE_DREG);
		x->c = nftnl_expr_get_u32(ex, NFTNL_EXPR_BITWISE_LEN);
		v = nftnl_expr_get(ex, NFTNL_EXPR_BITWISE_MASK, &len);
		if (v && len == 4)
			memcpy(&x->mask, v, 4);
		v = nftnl_expr_get(ex, NFTNL_EXPR_BITWISE_XOR, &len);
		if (v && len == 4)
			memcpy(&x->xor, v, 4);
	} else if (strcmp(name, "cmp") == 0) {
		x->a = nftnl_expr_get_u32(ex, NFTNL_EXPR_CMP_SREG);
		x->b = nftnl_expr_get_u32(ex, NFTNL_EXPR_CMP_OP);
		v = nftnl_expr_get(ex, NFTNL_EXPR_CMP_DATA, &len);
		if (v && len >= 1)
			x->c = *(const uint8_t *)v;
	} else if (strcmp(name, "immediate") == 0) {
		x->a = nftnl_expr_get_u32(ex, NFTNL_EXPR_IMM_DREG);
		v = nftnl_expr_get(ex, NFTNL_EXPR_IMM_DATA, &len);
		if (v && len == 4)
			memcpy(&x->b, v, 4);
	}
	return 0;
}

/* A rule's expressions, at most 10 of them; how many it has. */
static size_t exprs_of(struct nftnl_rule *r, struct expr_seen ret[10])
{
	struct expr_seen *at = ret;
	struct nftnl_expr_iter *it = nftnl_expr_iter_create(r);
	struct nftnl_expr *ex;

	assert_non_null(it);
	memset(ret, 0, 10 * sizeof(*ret));
	while ((ex = nftnl_expr_iter_next(it)) != NULL) {
		assert_true(at < ret + 10);
		expr_of(ex, &at);
	}
	nftnl_expr_iter_destroy(it);
	return (size_t)(at - ret);
}

/* The index of fwd_ingress's rule whose lookup names `set` (-1: none). */
static long fwd_ingress_rule_on(const struct acct_rule_list *w, const char *set)
{
	for (size_t i = 0; i < w->n; i++) {
		struct expr_seen x[10];
		size_t n;

		if (strcmp(nftnl_rule_get_str(w->r[i], NFTNL_RULE_CHAIN), "fwd_ingress") != 0)
			continue;
		n = exprs_of(w->r[i], x);
		for (size_t k = 0; k < n; k++)
			if (strcmp(x[k].name, "lookup") == 0 && strcmp(x[k].set, set) == 0)
				return (long)i;
	}
	return -1;
}

/*
 * Downloads of a pod in tollgate-inetdl's tree: fwd_ingress' rule after
 * the pods' veth class (ip daddr @pods meta priority set 1:2) is `meta
 * priority set ip daddr map @ingress_class meta mark set meta mark | M`:
 * the lookup's result in the priority, then the mark's bit set and every
 * other kept, all in one rule (a miss stops it before either). Without an
 * internet mark there is no rule: a priority of the tree on the veth
 * would name a class the veth does not have.
 */
static void t_download_class_rule(void **state)
{
	struct acct_config cfg = config();
	struct acct_rule_list w;
	struct expr_seen x[10];
	long veth, tree;
	size_t n;

	(void)state;
	assert_int_equal(acct_table_rules(&cfg, &w), 0);
	veth = fwd_ingress_rule_on(&w, "pods");
	tree = fwd_ingress_rule_on(&w, "ingress_class");
	assert_true(veth >= 0);
	assert_true(tree > veth);
	/* the next rule of fwd_ingress after the veth's class */
	for (long i = veth + 1; i < tree; i++)
		assert_string_not_equal(nftnl_rule_get_str(w.r[i], NFTNL_RULE_CHAIN),
					"fwd_ingress");
	/* control: the veth's rule reads back as what it is */
	n = exprs_of(w.r[veth], x);
	assert_int_equal(n, 6);
	assert_string_equal(x[4].name, "immediate");
	assert_int_equal(x[4].b, cfg.inet_ingress_classid);
	assert_string_equal(x[5].name, "meta");
	assert_int_equal(x[5].a, NFT_META_PRIORITY);
	n = exprs_of(w.r[tree], x);
	assert_int_equal(n, 8);
	/* meta nfproto ipv4 */
	assert_string_equal(x[0].name, "meta");
	assert_int_equal(x[0].a, NFT_META_NFPROTO);
	assert_string_equal(x[1].name, "cmp");
	assert_int_equal(x[1].b, NFT_CMP_EQ);
	assert_int_equal(x[1].c, NFPROTO_IPV4);
	/* ip daddr -> reg 1 */
	assert_string_equal(x[2].name, "payload");
	assert_int_equal(x[2].a, NFT_PAYLOAD_NETWORK_HEADER);
	assert_int_equal(x[2].b, 16);
	assert_int_equal(x[2].c, 4);
	assert_int_equal(x[2].d, NFT_REG_1);
	/* map @ingress_class reg 1 -> reg 1, not inverted */
	assert_string_equal(x[3].name, "lookup");
	assert_int_equal(x[3].a, NFT_REG_1);
	assert_int_equal(x[3].b, NFT_REG_1);
	assert_int_equal(x[3].c, 0);
	assert_int_equal(x[3].d, ACCT_ID_INGRESS_CLASS);
	/* meta priority set reg 1 */
	assert_string_equal(x[4].name, "meta");
	assert_int_equal(x[4].a, NFT_META_PRIORITY);
	assert_int_equal(x[4].b, NFT_REG_1);
	/* meta mark -> reg 1, (reg & ~M) ^ M, meta mark set reg 1 */
	assert_string_equal(x[5].name, "meta");
	assert_int_equal(x[5].a, NFT_META_MARK);
	assert_int_equal(x[5].c, NFT_REG_1);
	assert_string_equal(x[6].name, "bitwise");
	assert_int_equal(x[6].a, NFT_REG_1);
	assert_int_equal(x[6].b, NFT_REG_1);
	assert_int_equal(x[6].c, 4);
	assert_int_equal(x[6].mask, ~cfg.internet_mark);
	assert_int_equal(x[6].xor, cfg.internet_mark);
	assert_string_equal(x[7].name, "meta");
	assert_int_equal(x[7].a, NFT_META_MARK);
	assert_int_equal(x[7].b, NFT_REG_1);
	acct_rule_list_free(&w);
	/* a config without the veth's class still has it; without a mark, none */
	cfg.inet_ingress_classid = 0;
	assert_int_equal(acct_table_rules(&cfg, &w), 0);
	assert_int_equal(fwd_ingress_rule_on(&w, "pods"), -1);
	assert_true(fwd_ingress_rule_on(&w, "ingress_class") >= 0);
	acct_rule_list_free(&w);
	cfg.internet_mark = 0;
	assert_int_equal(acct_table_rules(&cfg, &w), 0);
	assert_int_equal(fwd_ingress_rule_on(&w, "ingress_class"), -1);
	acct_rule_list_free(&w);
}

/* Table arp tollgate's one rule drops ARP from pods: short of its iifname match, all ARP. */
static void t_arp_rule_fails_whole_on_allocation_failure(void **state)
{
	struct acct_config cfg = config();
	unsigned total;

	(void)state;
	for (unsigned n = 1;; n++) {
		struct acct_batch *bt = acct_batch_new(16384);
		int r;

		assert_non_null(bt);
		acct_batch_start(bt);
		expr_calls = 0;
		expr_fail_at = n;
		r = acct_arp_put(bt, &cfg);
		total = expr_calls;
		expr_fail_at = 0;
		acct_batch_free(bt);
		if (n > total) {
			assert_int_equal(r, 0); /* control: no failure, the rule is built */
			break;
		}
		if (r != -ENOMEM)
			fail_msg("allocation %u of the ARP rule failed and it was still built", n);
	}
	assert_int_equal(total, 4);
}

/* The guard's gauge classifies a destination against set internal's ranges. */
static void t_ranges_have(void **state)
{
	const struct acct_range r[] = { { 0x0a000000, 0x0affffff },
					{ 0xac100000, 0xac1fffff },
					{ 0xfffffff0, 0xffffffff } };

	(void)state;
	assert_true(acct_ranges_have(r, 3, 0x0a000000));
	assert_true(acct_ranges_have(r, 3, 0x0affffff));
	assert_false(acct_ranges_have(r, 3, 0x0b000000));
	assert_false(acct_ranges_have(r, 3, 0x09ffffff));
	assert_true(acct_ranges_have(r, 3, 0xac1f0001));
	assert_false(acct_ranges_have(r, 3, 0xcb00710a)); /* 203.0.113.10 */
	assert_true(acct_ranges_have(r, 3, 0xffffffff));
	assert_false(acct_ranges_have(r, 0, 0x0a000001));
}

/* Refused-connection counters name their namespace and reason, and nothing else parses as one. */
static void t_refused_names_round_trip(void **state)
{
	char name[ACCT_COUNTER_NAME_MAX], owner[ACCT_COUNTER_NAME_MAX];
	enum acct_refusal why;
	enum acct_class cls;

	(void)state;
	for (int w = 0; w < ACCT_REFUSALS; w++) {
		acct_refused_counter_name("crawl-2", (enum acct_refusal)w, name);
		assert_int_equal(acct_refused_parse(name, strlen(name), owner, &why),
				 ACCT_OWNER_NAMESPACE);
		assert_string_equal(owner, "crawl-2");
		assert_int_equal(why, w);
		assert_int_equal(acct_counter_parse(name, strlen(name), owner, &cls),
				 ACCT_OWNER_NONE);
	}
	acct_ns_counter_name("crawl", ACCT_EGRESS_INTERNET, name);
	assert_int_equal(acct_refused_parse(name, strlen(name), owner, &why), ACCT_OWNER_NONE);
	assert_int_equal(acct_refused_parse("ns_a_b_refused_rate", 19, owner, &why),
			 ACCT_OWNER_NONE);
}

/* ---- the counter reader ---- */

/* A kernel that does not filter the dump: other tables' objects, and objects not counters, are skipped. */
static void t_reader_unfiltered_dump(void **state)
{
	struct acct_reader *rd = acct_reader_new();
	struct seen *s = seen_new();

	fake.unfiltered = true;
	fake_add_counter("other", "ns_b_egress_internal", 1, 1);
	fake_add_counter(ACCT_TABLE, "ns_a_egress_internal", 3, 4500);
	fake_add_obj(ACCT_TABLE, "ns_a_quota", NFT_OBJECT_QUOTA, 5, 6);
	fake_add_counter("other", "ns_c_egress_internal", 2, 2);
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_int_equal(s->n, 1);
	assert_string_equal(s->names[0], "ns_a_egress_internal");
	assert_int_equal(s->bytes[0], 4500);
	acct_reader_free(rd);
	seen_free(s);
}

/*
 * A commit between the table's GET and the dump may be the table made anew:
 * that read is dropped and made again, and reports each counter once.
 */
static void t_reader_reads_again_after_a_commit(void **state)
{
	struct acct_reader *rd = acct_reader_new();
	struct seen *s = seen_new();

	fake_add_counter(ACCT_TABLE, "ns_a_egress_internal", 3, 4500);
	fake.bump_gen_on_gettable = 2;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_int_equal(fake.bump_gen_on_gettable, 0);
	assert_int_equal(s->calls, 1);
	assert_int_equal(s->bytes[0], 4500);
	/* a generation that never holds still: the reader gives up, saying why */
	s->n = s->calls = 0;
	fake.bump_gen_on_gettable = 1000;
	assert_int_equal(acct_reader_read(rd, on_counter, s), -EINTR);
	assert_int_equal(s->calls, 0);
	acct_reader_free(rd);
	seen_free(s);
}

/* Spoofed-packet counters read back as what they count, and no other counter does. */
static void t_spoofed_names_round_trip(void **state)
{
	static const char *const namespaces[] = {
		"",
		"mallory",
		"kube-system",
		"a23456789012345678901234567890123456789012345678901234567890123",
	};
	char name[ACCT_COUNTER_NAME_MAX], owner[ACCT_COUNTER_NAME_MAX];
	enum acct_family f;
	enum acct_class c;

	(void)state;
	for (int fam = 0; fam < ACCT_FAMILIES; fam++) {
		for (size_t i = 0; i < ARRAY_SIZE(namespaces); i++) {
			acct_spoofed_counter_name(namespaces[i], fam, name);
			assert_int_equal(acct_spoofed_parse(name, strlen(name), owner, &f),
					 ACCT_OWNER_NAMESPACE);
			assert_string_equal(owner, namespaces[i]);
			assert_int_equal(f, fam);
			assert_int_equal(acct_counter_parse(name, strlen(name), owner, &c),
					 ACCT_OWNER_NONE);
		}
		acct_spoofed_counter_name(NULL, fam, name);
		assert_int_equal(acct_spoofed_parse(name, strlen(name), owner, &f),
				 ACCT_OWNER_HOST);
		assert_int_equal(f, fam);
		assert_int_equal(acct_counter_parse(name, strlen(name), owner, &c),
				 ACCT_OWNER_NONE);
	}
	for (int k = 0; k < ACCT_CLASSES; k++) {
		acct_ns_counter_name("mallory", k, name);
		assert_int_equal(acct_spoofed_parse(name, strlen(name), owner, &f),
				 ACCT_OWNER_NONE);
		acct_host_counter_name(k, name);
		assert_int_equal(acct_spoofed_parse(name, strlen(name), owner, &f),
				 ACCT_OWNER_NONE);
	}
	/* not Tollgate's: a namespace holds no '_'; nothing before "node" */
	static const char *const foreign[] = { "ns_a_b_spoofed_ipv4", "xnode_spoofed_ipv4",
					       "spoofed_ipv4", "_spoofed_ipv6",
					       "ns_a_spoofed_ipv5" };
	for (size_t i = 0; i < ARRAY_SIZE(foreign); i++)
		assert_int_equal(acct_spoofed_parse(foreign[i], strlen(foreign[i]), owner, &f),
				 ACCT_OWNER_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_layout_version_follows_rules),
		cmocka_unit_test(t_rules_fail_whole_on_allocation_failure),
		cmocka_unit_test(t_arp_rule_fails_whole_on_allocation_failure),
		cmocka_unit_test(t_service_port_rules),
		cmocka_unit_test(t_download_class_rule),
		cmocka_unit_test(t_spoofed_names_round_trip),
		cmocka_unit_test(t_ranges_have),
		cmocka_unit_test(t_refused_names_round_trip),
		NFT_CASE(t_reader_without_table),
		NFT_CASE(t_reader_values),
		NFT_CASE(t_reader_unfiltered_dump),
		NFT_CASE(t_reader_ids),
		NFT_CASE(t_reader_reads_again_after_a_commit),
		NFT_CASE(t_batch_refused_whole_answers_at_once),
		NFT_CASE(t_batch_ignores_earlier_answers),
		NFT_CASE(t_batch_reports_the_first_error),
		NFT_CASE(t_rebuild_400_pods),
		NFT_CASE(t_add_rebuilds_missing_table),
	};

	return cmocka_run_group_tests_name("accounting", tests, NULL, NULL);
}
