// SPDX-License-Identifier: Apache-2.0
/*
 * The accounting module without a kernel: its netlink ends in the fake
 * nf_tables of tests/unit/fake_nfnl.h (libmnl's socket calls wrapped at link
 * time), which parses what it is sent with libnftnl and answers as the
 * kernel does.
 *
 * - the rules' bytes pin ACCT_TABLE_LAYOUT; spoofed-packet counter names parse back;
 * - the exporter's reader: -ENOENT without a table, an empty table is no
 *   error, every counter once with its values (u64 extremes), only Tollgate's
 *   table and only counters even from a kernel that does not filter the dump,
 *   ids that stay with an object and change when it (or its table) is made
 *   anew, and a read that a commit interrupted is read again;
 * - the batch transport: a batch refused as a whole (one error for all its
 *   messages) is answered at once, and answers to an earlier batch left on
 *   the socket are never counted as the next batch's;
 * - a rebuild of 400 pods with perPod on a node without the table sends
 *   the table and every counter of every pod and namespace, once, in one
 *   transaction, and reads back as such.
 *
 * What needs the kernel's own answers (the same cases against nftables, the
 * 400-pod transaction fitting the receive buffer, a declaration that changes
 * only what differs) is tests/kernel/ktest_accounting.c.
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
#include "tests/unit/acct_fx.h"
#include "tests/unit/fake_nfnl.h"

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

static int fake_setup(void **state)
{
	fake_nfnl_reset();
	return 0;
}

/* Every socket the module opened it closed again. */
static int fake_teardown(void **state)
{
	if (fake.socks_open != 0) {
		print_error("%u fake nfnetlink sockets left open\n", fake.socks_open);
		return -1;
	}
	return 0;
}

/* ---- the counter reader ---- */

static void t_reader_without_table(void **state)
{
	struct acct_reader *rd = acct_reader_new();
	struct seen *s = seen_new();

	assert_int_equal(acct_reader_read(rd, on_counter, s), -ENOENT);
	assert_int_equal(s->calls, 0);
	/* a table with no counters is empty, not missing */
	fake_add_table(ACCT_TABLE);
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_int_equal(s->calls, 0);
	acct_reader_free(rd);
	seen_free(s);
}

static void t_reader_values(void **state)
{
	struct acct_reader *rd = acct_reader_new();
	struct seen *s = seen_new();
	long i;

	fake_add_counter(ACCT_TABLE, "ns_a_egress_internal", 3, 4500);
	fake_add_counter(ACCT_TABLE, "host_ingress_internet", UINT64_MAX, UINT64_MAX);
	fake_add_counter("other", "ns_b_egress_internal", 1, 1);
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
}

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

/* A counter's id stays while the object lives and changes when it is made anew, table and all. */
static void t_reader_ids(void **state)
{
	struct acct_reader *rd = acct_reader_new();
	struct seen *s = seen_new();
	uint64_t a, b;

	fake_add_counter(ACCT_TABLE, "a", 0, 0);
	fake_add_counter(ACCT_TABLE, "b", 0, 0);
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_int_equal(s->n, 2);
	a = id_of(s, "a"), b = id_of(s, "b");
	assert_true(a != b);
	s->n = s->calls = 0;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_true(id_of(s, "a") == a && id_of(s, "b") == b);
	/* a made anew: a new id; b kept */
	fake_del_counter(ACCT_TABLE, "a");
	fake_add_counter(ACCT_TABLE, "a", 0, 0);
	s->n = s->calls = 0;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_true(id_of(s, "a") != a && id_of(s, "b") == b);
	a = id_of(s, "a");
	/* the table made anew with the same objects in the same order (their handles start again) */
	fake_del_table(ACCT_TABLE);
	fake_add_counter(ACCT_TABLE, "b", 0, 0);
	fake_add_counter(ACCT_TABLE, "a", 0, 0);
	fake_del_table(ACCT_TABLE);
	fake_add_counter(ACCT_TABLE, "a", 0, 0);
	fake_add_counter(ACCT_TABLE, "b", 0, 0);
	s->n = s->calls = 0;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_true(id_of(s, "a") != a && id_of(s, "b") != b);
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

/* ---- the batch transport ---- */

/* Adds a table message (NEWTABLE or DELTABLE) named `name` to the batch. */
static void put_table(struct acct_batch *bt, uint16_t type, const char *name)
{
	struct nlmsghdr *nlh = acct_batch_msg(bt, type, type == NFT_MSG_NEWTABLE ? NLM_F_CREATE : 0);
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
	assert_int_equal(fake.committed, 0);
	assert_null(fake_table_find(&fake.m, "tg_refused_a"));
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
	assert_non_null(fake_table_find(&fake.m, "tg_stale_b"));
	nftnl_table_free(t);
	mnl_nlmsg_batch_stop(raw);
	acct_nft_close(&c);
	acct_batch_free(bt);
}

/* A failed message is the batch's answer, and nothing of the batch is kept. */
static void t_batch_reports_the_first_error(void **state)
{
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt = acct_batch_new(16384);

	assert_int_equal(acct_nft_open(&c, 0, NULL), 0);
	acct_batch_start(bt);
	put_table(bt, NFT_MSG_NEWTABLE, "tg_kept_not");
	put_table(bt, NFT_MSG_DELTABLE, "tg_absent");
	assert_int_equal(acct_batch_send(&c, bt, NULL, 0), -ENOENT);
	assert_null(fake_table_find(&fake.m, "tg_kept_not"));
	acct_nft_close(&c);
	acct_batch_free(bt);
}

/* ---- a rebuild at node scale, as the transaction says ---- */

/* The table is gone: declaring it brings back every pod of the store, counters and all. */
static void check_rebuild(unsigned flags)
{
	struct acct_config cfg = config();
	struct pods *ps = make_pods();
	struct acct_reader *rd = acct_reader_new();
	struct seen *s = seen_new();
	struct acct_repairs rep;
	struct tg_err e = { 0 };

	assert_int_equal(acct_declared(&cfg), 0);
	if (acct_declare(&cfg, ps->p, PODS, flags, &rep, &e) != 1)
		fail_msg("declaration with a rebuild of %d pods: %s", PODS, e.msg);
	assert_int_equal(rep.table, 1);
	/* one transaction, committed: the table, and thousands of messages */
	assert_int_equal(fake.batches, 1);
	assert_int_equal(fake.committed, 1);
	assert_int_equal(fake.counts[NFT_MSG_NEWTABLE], 1);
	assert_true(fake.messages > 10 * PODS);
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_all_counters(s, ps);
	/* again, over the same socket: the same counters */
	s->n = s->calls = 0;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_all_counters(s, ps);
	/* counters start at zero */
	for (size_t i = 0; i < s->n; i++)
		assert_true(s->packets[i] == 0 && s->bytes[i] == 0);
	acct_reader_free(rd);
	seen_free(s);
	free(ps);
}

static void t_rebuild_400_pods(void **state)
{
	check_rebuild(ACCT_DECLARE_PODS);
}

static void t_add_rebuilds_missing_table(void **state)
{
	check_rebuild(0);
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

#define FAKE_TEST(fn) cmocka_unit_test_setup_teardown(fn, fake_setup, fake_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_layout_version_follows_rules),
		cmocka_unit_test(t_spoofed_names_round_trip),
		FAKE_TEST(t_reader_without_table),
		FAKE_TEST(t_reader_values),
		FAKE_TEST(t_reader_unfiltered_dump),
		FAKE_TEST(t_reader_ids),
		FAKE_TEST(t_reader_reads_again_after_a_commit),
		FAKE_TEST(t_batch_refused_whole_answers_at_once),
		FAKE_TEST(t_batch_ignores_earlier_answers),
		FAKE_TEST(t_batch_reports_the_first_error),
		FAKE_TEST(t_rebuild_400_pods),
		FAKE_TEST(t_add_rebuilds_missing_table),
	};

	return cmocka_run_group_tests_name("accounting", tests, NULL, NULL);
}
