// SPDX-License-Identifier: Apache-2.0
/*
 * The accounting table at node scale, in a private network namespace (root
 * only; skipped otherwise):
 *
 * - a rebuild of 400 pods with perPod (~6,000 messages in one transaction,
 *   each acknowledged) succeeds: the answers must all fit the receive buffer;
 * - an ADD that finds the table gone puts every pod of the store back in the
 *   same transaction, also at that scale;
 * - the exporter's reader: -ENOENT without a table, every counter of the
 *   table exactly once per read (names as the accounting module makes them),
 *   the same result read after read on one kept socket, and the values the
 *   kernel holds;
 * - the batch transport: a batch the kernel refuses as a whole (one error
 *   for all its messages) is answered at once, and answers to an earlier
 *   batch left on the socket are never counted as the next batch's.
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
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include "tests/unit/netns.h"

#define PODS 400
#define NAMESPACES 40

static const struct cidr4 internal[] = { { 0x0a000000u, 8 } }; /* 10.0.0.0/8 */

static struct acct_config config(void)
{
	struct acct_config c = { .internal = internal, .n_internal = 1, .masquerade = true,
				  .inet_ingress_classid = 0x10002,
				 .enabled = true, .per_pod = true, .internet_mark = 0x10000,
				 .pod_link_prefix = "tg" };
	return c;
}

/*
 * The rules acct_table_rules builds, as bytes, for a spread of configs: when they
 * change, ACCT_TABLE_LAYOUT must change too (rule stamps are made from it, not from
 * the rules), or nodes declared by the old layout would keep the old rules.
 */
#define LAYOUT_RULES_HASH 0x2d3f68b57f207222ULL

static uint64_t rules_hash(const struct acct_config *cfg, uint64_t h)
{
	struct acct_rule_list w;

	assert_int_equal(acct_table_rules(cfg, &w), 0);
	for (size_t i = 0; i < w.n; i++) {
		char buf[4096] = { 0 };
		struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWRULE, NFPROTO_INET, 0, 0);

		nftnl_rule_nlmsg_build_payload(nlh, w.r[i]);
		h = hash_fnv1a64(mnl_nlmsg_get_payload(nlh), mnl_nlmsg_get_payload_len(nlh), h);
	}
	acct_rule_list_free(&w);
	return h;
}

static void t_layout_version_follows_rules(void **state)
{
	struct acct_config cfg = config();
	uint64_t h = FNV1A64_INIT;

	(void)state;
	h = rules_hash(&cfg, h);
	cfg.per_pod = false;
	h = rules_hash(&cfg, h);
	cfg.enabled = false;
	h = rules_hash(&cfg, h);
	cfg.internet_mark = 0;
	cfg.inet_ingress_classid = 0;
	h = rules_hash(&cfg, h);
	if (h != LAYOUT_RULES_HASH || strcmp(ACCT_TABLE_LAYOUT, "tollgate-table/5") != 0)
		fail_msg("the rules changed (hash %#llx): give ACCT_TABLE_LAYOUT a new version and "
			 "record both here", (unsigned long long)h);
}

struct pods {
	char ns[PODS][16];
	char veth[PODS][16];
	struct acct_pod p[PODS];
};

static struct pods *make_pods(void)
{
	struct pods *ps = calloc(1, sizeof(*ps));

	assert_non_null(ps);
	for (int i = 0; i < PODS; i++) {
		snprintf(ps->ns[i], sizeof(ps->ns[i]), "ns-%02d", i % NAMESPACES);
		snprintf(ps->veth[i], sizeof(ps->veth[i]), "tg%012x", 0xa000u + (unsigned)i);
		ps->p[i] = (struct acct_pod){ .ip = 0x0a010000u + 1 + (uint32_t)i,
					      .k8s_namespace = ps->ns[i], .host_veth = ps->veth[i] };
	}
	return ps;
}

static void drop_table(void)
{
	nft_quiet("delete table inet " ACCT_TABLE);
}

/* ---- reading counters ---- */

struct seen {
	size_t n, calls;
	char (*names)[ACCT_COUNTER_NAME_MAX];
	uint64_t *packets, *bytes, *ids;
};

static void on_counter(const struct acct_counter_sample *c, void *arg)
{
	struct seen *s = arg;

	s->calls++;
	if (s->n >= 8 * PODS || c->name_len >= ACCT_COUNTER_NAME_MAX)
		return;
	memcpy(s->names[s->n], c->name, c->name_len);
	s->names[s->n][c->name_len] = '\0';
	s->packets[s->n] = c->packets;
	s->bytes[s->n] = c->bytes;
	s->ids[s->n] = c->id;
	s->n++;
}

static struct seen *seen_new(void)
{
	struct seen *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	s->names = calloc(8 * PODS, sizeof(*s->names));
	s->packets = calloc(8 * PODS, sizeof(*s->packets));
	s->bytes = calloc(8 * PODS, sizeof(*s->bytes));
	s->ids = calloc(8 * PODS, sizeof(*s->ids));
	assert_true(s->names && s->packets && s->bytes && s->ids);
	return s;
}

static void seen_free(struct seen *s)
{
	free(s->names);
	free(s->packets);
	free(s->bytes);
	free(s->ids);
	free(s);
}

static long find(const struct seen *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->names[i], name) == 0)
			return (long)i;
	return -1;
}

/* Every counter the table must hold is there, once. */
static void assert_all_counters(const struct seen *s, const struct pods *ps)
{
	char name[ACCT_COUNTER_NAME_MAX];

	assert_int_equal(s->n, (size_t)PODS * ACCT_CLASSES + NAMESPACES * (ACCT_CLASSES + ACCT_FAMILIES) +
				       ACCT_CLASSES + ACCT_FAMILIES);
	for (int c = 0; c < ACCT_CLASSES; c++) {
		for (int i = 0; i < PODS; i++) {
			acct_pod_counter_name(ps->veth[i], c, name);
			if (find(s, name) < 0)
				fail_msg("counter %s missing", name);
		}
		for (int i = 0; i < NAMESPACES; i++) {
			acct_ns_counter_name(ps->ns[i], c, name);
			if (find(s, name) < 0)
				fail_msg("counter %s missing", name);
		}
	}
	for (int f = 0; f < ACCT_FAMILIES; f++) {
		acct_spoofed_counter_name(NULL, f, name);
		if (find(s, name) < 0)
			fail_msg("counter %s missing", name);
		for (int i = 0; i < NAMESPACES; i++) {
			acct_spoofed_counter_name(ps->ns[i], f, name);
			if (find(s, name) < 0)
				fail_msg("counter %s missing", name);
		}
	}
	for (size_t i = 0; i < s->n; i++)
		for (size_t j = i + 1; j < s->n; j++)
			if (strcmp(s->names[i], s->names[j]) == 0)
				fail_msg("counter %s listed twice", s->names[i]);
}

/* What the scale tests share: 400 pods, a reader, what it saw; no table at start or end. */
struct scale {
	struct acct_config cfg;
	struct pods *ps;
	struct acct_reader *rd;
	struct seen *s;
	struct tg_err e;
};

static int scale_setup(void **state)
{
	struct scale *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->cfg = config();
	f->ps = make_pods();
	f->rd = acct_reader_new();
	f->s = seen_new();
	if (!f->rd) {
		seen_free(f->s);
		free(f->ps);
		free(f);
		return -1;
	}
	if (in_private_netns())
		drop_table();
	*state = f;
	return 0;
}

static int scale_teardown(void **state)
{
	struct scale *f = *state;

	if (in_private_netns())
		drop_table();
	acct_reader_free(f->rd);
	seen_free(f->s);
	free(f->ps);
	free(f);
	return 0;
}

static void t_rebuild_400_pods(void **state)
{
	struct scale *f = *state;

	NEED_NETNS_NFT();
	if (acct_declare(&f->cfg, f->ps->p, PODS, ACCT_DECLARE_PODS, NULL, &f->e) < 0)
		fail_msg("rebuild of %d pods: %s", PODS, f->e.msg);
	assert_int_equal(acct_reader_read(f->rd, on_counter, f->s), 0);
	assert_all_counters(f->s, f->ps);
	/* again, over the same socket: the same counters */
	f->s->n = f->s->calls = 0;
	assert_int_equal(acct_reader_read(f->rd, on_counter, f->s), 0);
	assert_all_counters(f->s, f->ps);
}

static void t_add_rebuilds_missing_table(void **state)
{
	struct scale *f = *state;
	struct acct_repairs rep;

	NEED_NETNS_NFT();
	/* the table is gone: declaring it brings back every pod of the store */
	assert_int_equal(acct_declared(&f->cfg), 0);
	if (acct_declare(&f->cfg, f->ps->p, PODS, 0, &rep, &f->e) != 1)
		fail_msg("declaration with a rebuild of %d pods: %s", PODS, f->e.msg);
	assert_int_equal(rep.table, 1);
	assert_int_equal(acct_reader_read(f->rd, on_counter, f->s), 0);
	assert_all_counters(f->s, f->ps);
	/* declared: the probe says so, and a second declaration writes nothing */
	assert_int_equal(acct_declared(&f->cfg), 1);
	assert_int_equal(acct_declare(&f->cfg, f->ps->p, PODS, 0, &rep, &f->e), 0);
	assert_int_equal(rep.table + rep.sets + rep.chains + rep.rules + rep.internal, 0);
}

/* Another internalCIDRs list: only the set internal is written, the rules stay. */
static void t_declare_changes_only_what_differs(void **state)
{
	struct scale *f = *state;
	struct cidr4 two[2] = { { 0x0a000000u, 8 }, { 0xc0a80000u, 16 } };
	struct acct_config cfg = f->cfg;
	struct acct_repairs rep;

	NEED_NETNS_NFT();
	assert_int_equal(acct_declare(&f->cfg, NULL, 0, 0, &rep, &f->e), 1);
	cfg.internal = two;
	cfg.n_internal = 2;
	assert_int_equal(acct_declared(&cfg), 0);
	assert_int_equal(acct_declare(&cfg, NULL, 0, 0, &rep, &f->e), 1);
	assert_int_equal(rep.internal, 1);
	assert_int_equal(rep.rules + rep.chains + rep.sets + rep.table, 0);
	assert_int_equal(acct_declared(&cfg), 1);
	assert_int_equal(acct_declared(&f->cfg), 0);
	/* per-pod counting adds rules to some chains: only those chains are written */
	cfg.per_pod = !cfg.per_pod;
	assert_int_equal(acct_declare(&cfg, NULL, 0, 0, &rep, &f->e), 1);
	assert_true(rep.rules > 0);
	assert_int_equal(rep.internal + rep.chains + rep.sets + rep.table, 0);
	assert_int_equal(acct_declared(&cfg), 1);
}

static void t_reader_without_table(void **state)
{
	struct acct_reader *rd = acct_reader_new();
	struct seen *s = seen_new();

	(void)state;
	NEED_NETNS_NFT();
	drop_table();
	assert_int_equal(acct_reader_read(rd, on_counter, s), -ENOENT);
	assert_int_equal(s->calls, 0);
	/* a table with no counters is empty, not missing */
	nft_apply("add table inet " ACCT_TABLE "\n");
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_int_equal(s->calls, 0);
	acct_reader_free(rd);
	seen_free(s);
	drop_table();
}

static void t_reader_values(void **state)
{
	struct acct_reader *rd = acct_reader_new();
	struct seen *s = seen_new();
	long i;

	(void)state;
	NEED_NETNS_NFT();
	drop_table();
	nft_apply("table inet " ACCT_TABLE " {\n"
		  "  counter ns_a_egress_internal { packets 3 bytes 4500 }\n"
		  "  counter host_ingress_internet { packets 18446744073709551615 bytes 18446744073709551615 }\n"
		  "}\n"
		  "table inet other {\n"
		  "  counter ns_b_egress_internal { packets 1 bytes 1 }\n"
		  "}\n");
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_int_equal(s->n, 2); /* only Tollgate's table */
	i = find(s, "ns_a_egress_internal");
	assert_true(i >= 0);
	assert_int_equal(s->packets[i], 3);
	assert_int_equal(s->bytes[i], 4500);
	i = find(s, "host_ingress_internet");
	assert_true(i >= 0);
	assert_true(s->packets[i] == UINT64_MAX && s->bytes[i] == UINT64_MAX);
	acct_reader_free(rd);
	seen_free(s);
	drop_table();
	nft_quiet("delete table inet other");
}

/* The id the reader gave the counter of that name; fails the test if it read none. */
static uint64_t id_of(const struct seen *s, const char *name)
{
	long i = find(s, name);

	if (i < 0)
		fail_msg("counter %s not read", name);
	return s->ids[i];
}

/* A counter's id stays while the object lives and changes when it is made anew, table and all. */
static void t_reader_ids(void **state)
{
	struct acct_reader *rd = acct_reader_new();
	struct seen *s = seen_new();
	uint64_t a, b;

	(void)state;
	NEED_NETNS_NFT();
	drop_table();
	nft_apply("table inet " ACCT_TABLE " {\n counter a { }\n counter b { }\n}\n");
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_int_equal(s->n, 2);
	a = id_of(s, "a"), b = id_of(s, "b");
	assert_true(a != b);
	s->n = s->calls = 0;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_true(id_of(s, "a") == a && id_of(s, "b") == b);
	/* a made anew: a new id; b kept */
	nft_apply("delete counter inet " ACCT_TABLE " a\nadd counter inet " ACCT_TABLE " a\n");
	s->n = s->calls = 0;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_true(id_of(s, "a") != a && id_of(s, "b") == b);
	a = id_of(s, "a");
	/* the table made anew with the same objects in the same order */
	nft_apply("delete table inet " ACCT_TABLE "\n"
		  "table inet " ACCT_TABLE " {\n counter b { }\n counter a { }\n}\n"
		  "delete table inet " ACCT_TABLE "\n"
		  "table inet " ACCT_TABLE " {\n counter a { }\n counter b { }\n}\n");
	s->n = s->calls = 0;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_true(id_of(s, "a") != a && id_of(s, "b") != b);
	acct_reader_free(rd);
	seen_free(s);
	drop_table();
}

/* Spoofed-packet counters read back as what they count, and no other counter does. */
static void t_spoofed_names_round_trip(void **state)
{
	static const char *const namespaces[] = {
		"", "mallory", "kube-system", "a23456789012345678901234567890123456789012345678901234567890123",
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
		assert_int_equal(acct_spoofed_parse(name, strlen(name), owner, &f), ACCT_OWNER_HOST);
		assert_int_equal(f, fam);
		assert_int_equal(acct_counter_parse(name, strlen(name), owner, &c), ACCT_OWNER_NONE);
	}
	for (int k = 0; k < ACCT_CLASSES; k++) {
		acct_ns_counter_name("mallory", k, name);
		assert_int_equal(acct_spoofed_parse(name, strlen(name), owner, &f), ACCT_OWNER_NONE);
		acct_host_counter_name(k, name);
		assert_int_equal(acct_spoofed_parse(name, strlen(name), owner, &f), ACCT_OWNER_NONE);
	}
	/* not Tollgate's: a namespace holds no '_'; nothing before "node" */
	static const char *const foreign[] = { "ns_a_b_spoofed_ipv4", "xnode_spoofed_ipv4",
					       "spoofed_ipv4", "_spoofed_ipv6", "ns_a_spoofed_ipv5" };
	for (size_t i = 0; i < ARRAY_SIZE(foreign); i++)
		assert_int_equal(acct_spoofed_parse(foreign[i], strlen(foreign[i]), owner, &f),
				 ACCT_OWNER_NONE);
}

/* Adds a table message (NEWTABLE or DELTABLE) named `name` to the batch. */
static void put_table(struct acct_batch *bt, uint16_t type, const char *name)
{
	struct nlmsghdr *nlh =
		acct_batch_msg(bt, type, type == NFT_MSG_NEWTABLE ? NLM_F_CREATE : 0);
	struct nftnl_table *t = nftnl_table_alloc();

	assert_non_null(t);
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, name);
	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	acct_batch_next(bt);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void t_batch_refused_whole_answers_at_once(void **state)
{
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt = acct_batch_new(16384);
	struct nfgenmsg *begin;
	double t0;
	int r;

	(void)state;
	NEED_NETNS_NFT();
	assert_int_equal(acct_nft_open(&c, 0, NULL), 0);
	acct_batch_start(bt);
	put_table(bt, NFT_MSG_NEWTABLE, "tg_refused_a");
	put_table(bt, NFT_MSG_NEWTABLE, "tg_refused_b");
	/* A subsystem that does not exist: the kernel answers the begin message alone. */
	begin = mnl_nlmsg_get_payload((struct nlmsghdr *)bt->buf);
	begin->res_id = htons(200);
	t0 = now_s();
	r = acct_batch_send(&c, bt, NULL, 0);
	assert_int_equal(r, -EINVAL);
	/* Waiting out the 5 s poll for answers that never come was the bug. */
	assert_true(now_s() - t0 < 1.0);
	acct_nft_close(&c);
	acct_batch_free(bt);
}

static void t_batch_ignores_earlier_answers(void **state)
{
	char buf[4096] = { 0 };
	struct mnl_nlmsg_batch *raw = mnl_nlmsg_batch_start(buf, sizeof(buf));
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt = acct_batch_new(16384);
	struct nlmsghdr *nlh;
	struct nftnl_table *t = nftnl_table_alloc();

	(void)state;
	NEED_NETNS_NFT();
	nft_quiet("delete table inet tg_stale_b");
	assert_int_equal(acct_nft_open(&c, 0, NULL), 0);
	/* An earlier batch whose answer (ENOENT) stays unread on the socket. */
	nftnl_batch_begin(mnl_nlmsg_batch_current(raw), 77);
	mnl_nlmsg_batch_next(raw);
	nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(raw), NFT_MSG_DELTABLE, NFPROTO_INET,
				    NLM_F_ACK, 78);
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, "tg_stale_absent");
	nftnl_table_nlmsg_build_payload(nlh, t);
	mnl_nlmsg_batch_next(raw);
	nftnl_batch_end(mnl_nlmsg_batch_current(raw), 79);
	mnl_nlmsg_batch_next(raw);
	assert_true(mnl_socket_sendto(c.nl, mnl_nlmsg_batch_head(raw), mnl_nlmsg_batch_size(raw)) > 0);
	/* The next batch succeeds, and says so. */
	acct_batch_start(bt);
	put_table(bt, NFT_MSG_NEWTABLE, "tg_stale_b");
	assert_int_equal(acct_batch_send(&c, bt, NULL, 0), 0);
	nftnl_table_free(t);
	mnl_nlmsg_batch_stop(raw);
	acct_nft_close(&c);
	acct_batch_free(bt);
	nft_quiet("delete table inet tg_stale_b");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_layout_version_follows_rules),
		cmocka_unit_test(t_spoofed_names_round_trip),
		cmocka_unit_test(t_reader_without_table),
		cmocka_unit_test(t_reader_values),
		cmocka_unit_test(t_reader_ids),
		cmocka_unit_test(t_batch_refused_whole_answers_at_once),
		cmocka_unit_test(t_batch_ignores_earlier_answers),
		cmocka_unit_test_setup_teardown(t_rebuild_400_pods, scale_setup, scale_teardown),
		cmocka_unit_test_setup_teardown(t_declare_changes_only_what_differs, scale_setup,
						scale_teardown),
		cmocka_unit_test_setup_teardown(t_add_rebuilds_missing_table, scale_setup,
						scale_teardown),
	};

	return cmocka_run_group_tests_name("accounting", tests, NULL, NULL);
}
