// SPDX-License-Identifier: Apache-2.0
/*
 * The accounting table against the kernel's nftables (root and the nft
 * binary). tests/integration/test_kernel_cases.sh runs this in a network
 * namespace of its own, and the process unshares another before its first
 * table (tests/unit/netns.h): run by hand it never sees the host's tables
 * either. The kernel-free halves (the reader and the batch transport against
 * a fake nfnetlink, a rebuild's transaction parsed back) are
 * tests/unit/test_accounting.c.
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
#include "tests/unit/acct_fx.h"
#include "tests/unit/netns.h"

static void drop_table(void)
{
	nft_quiet("delete table inet " ACCT_TABLE);
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

	return cmocka_run_group_tests_name("accounting in a network namespace", tests, NULL, NULL);
}
