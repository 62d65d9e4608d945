/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_ACCT_CASES_H
#define TG_TEST_ACCT_CASES_H

/*
 * The accounting cases that hold alike against the fake nf_tables and the
 * kernel's: tests/unit/test_accounting.c runs them against the fake
 * (tests/unit/fake_nfnl.h, no kernel, any user), tests/kernel/ktest_accounting.c
 * against nftables in a network namespace of its own (tests/kernel/nft_kernel.h).
 * Include after one of those two: its nft_fx_* functions make the tables.
 * Each binary lists every case here (an unlisted one is an unused function,
 * which the build refuses), between NFT_CASE's setup and teardown.
 *
 * - the exporter's reader: -ENOENT without a table, an empty table is no
 *   error, every counter once with its values (u64 extremes), only
 *   Tollgate's table, ids that stay with an object and change when it (or
 *   its table) is made anew;
 * - the batch transport: a batch refused as a whole (one error for all its
 *   messages) is answered at once and keeps nothing, answers to an earlier
 *   batch left on the socket are never counted as the next batch's, and a
 *   failed message is the batch's answer;
 * - a rebuild of 400 pods with perPod on a node without the table, with
 *   and without ACCT_DECLARE_PODS: the table and every counter of every pod
 *   and namespace, once, at zero, read after read on one socket (the
 *   kernel's ~6,000 acknowledgements fitting the receive buffer). The fake
 *   also sees the transaction itself; the kernel, which keeps the rules,
 *   also says the table is then declared and a second declaration writes
 *   nothing.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>

#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include "accounting/accounting.h"
#include "accounting/internal.h"
#include "tests/unit/acct_fx.h"

#ifndef NFT_FX_FAKE
#error "include tests/unit/fake_nfnl.h or tests/kernel/nft_kernel.h first"
#endif

static int nft_case_setup(void **state)
{
	nft_fx_reset();
	return 0;
}

static int nft_case_teardown(void **state)
{
	return nft_fx_done();
}

#define NFT_CASE(fn) cmocka_unit_test_setup_teardown(fn, nft_case_setup, nft_case_teardown)

/* ---- the counter reader ---- */

static void t_reader_without_table(void **state)
{
	struct acct_reader *rd;
	struct seen *s;

	NFT_FX_NEED();
	rd = acct_reader_new();
	s = seen_new();
	assert_int_equal(acct_reader_read(rd, on_counter, s), -ENOENT);
	assert_int_equal(s->calls, 0);
	/* a table with no counters is empty, not missing */
	nft_fx_add_table(ACCT_TABLE);
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_int_equal(s->calls, 0);
	acct_reader_free(rd);
	seen_free(s);
}

static void t_reader_values(void **state)
{
	struct acct_reader *rd;
	struct seen *s;
	long i;

	NFT_FX_NEED();
	rd = acct_reader_new();
	s = seen_new();
	nft_fx_batch_begin();
	nft_fx_add_counter(ACCT_TABLE, "ns_a_egress_internal", 3, 4500);
	nft_fx_add_counter(ACCT_TABLE, "host_ingress_internet", UINT64_MAX, UINT64_MAX);
	nft_fx_add_counter("other", "ns_b_egress_internal", 1, 1);
	nft_fx_batch_end();
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

/* A counter's id stays while the object lives and changes when it is made anew, table and all. */
static void t_reader_ids(void **state)
{
	struct acct_reader *rd;
	struct seen *s;
	uint64_t a, b;

	NFT_FX_NEED();
	rd = acct_reader_new();
	s = seen_new();
	nft_fx_batch_begin();
	nft_fx_add_counter(ACCT_TABLE, "a", 0, 0);
	nft_fx_add_counter(ACCT_TABLE, "b", 0, 0);
	nft_fx_batch_end();
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_int_equal(s->n, 2);
	a = id_of(s, "a"), b = id_of(s, "b");
	assert_true(a != b);
	s->n = s->calls = 0;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_true(id_of(s, "a") == a && id_of(s, "b") == b);
	/* a made anew: a new id; b kept */
	nft_fx_batch_begin();
	nft_fx_del_counter(ACCT_TABLE, "a");
	nft_fx_add_counter(ACCT_TABLE, "a", 0, 0);
	nft_fx_batch_end();
	s->n = s->calls = 0;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_true(id_of(s, "a") != a && id_of(s, "b") == b);
	a = id_of(s, "a");
	/* the table made anew with the same objects in the same order (their handles start again) */
	nft_fx_batch_begin();
	nft_fx_del_table(ACCT_TABLE);
	nft_fx_add_counter(ACCT_TABLE, "b", 0, 0);
	nft_fx_add_counter(ACCT_TABLE, "a", 0, 0);
	nft_fx_del_table(ACCT_TABLE);
	nft_fx_add_counter(ACCT_TABLE, "a", 0, 0);
	nft_fx_add_counter(ACCT_TABLE, "b", 0, 0);
	nft_fx_batch_end();
	s->n = s->calls = 0;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_true(id_of(s, "a") != a && id_of(s, "b") != b);
	acct_reader_free(rd);
	seen_free(s);
}

/* ---- the batch transport ---- */

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

/* A connection to nf_tables and a batch started on it, for one case. */
static struct acct_batch *batch_open(struct acct_nft_conn *c)
{
	struct acct_batch *bt = acct_batch_new(16384);

	assert_non_null(bt);
	assert_int_equal(acct_nft_open(c, 0, NULL), 0);
	acct_batch_start(bt);
	return bt;
}

static void batch_close(struct acct_nft_conn *c, struct acct_batch *bt)
{
	acct_nft_close(c);
	acct_batch_free(bt);
}

static void t_batch_refused_whole_answers_at_once(void **state)
{
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt;
	struct nfgenmsg *begin;
	double t0;
	int r;

	NFT_FX_NEED();
	bt = batch_open(&c);
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
#if NFT_FX_FAKE
	assert_int_equal(fake.committed, 0);
#endif
	assert_false(nft_fx_has_table("tg_refused_a"));
	batch_close(&c, bt);
}

static void t_batch_ignores_earlier_answers(void **state)
{
	char buf[4096] = { 0 };
	struct mnl_nlmsg_batch *raw;
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt;
	struct nlmsghdr *nlh;
	struct nftnl_table *t;

	NFT_FX_NEED();
	raw = mnl_nlmsg_batch_start(buf, sizeof(buf));
	t = nftnl_table_alloc();
	assert_non_null(t);
	bt = batch_open(&c);
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
	assert_true(mnl_socket_sendto(c.nl, mnl_nlmsg_batch_head(raw), mnl_nlmsg_batch_size(raw)) >
		    0);
	/* The next batch succeeds, and says so. */
	put_table(bt, NFT_MSG_NEWTABLE, "tg_stale_b");
	assert_int_equal(acct_batch_send(&c, bt, NULL, 0), 0);
	assert_true(nft_fx_has_table("tg_stale_b"));
	nftnl_table_free(t);
	mnl_nlmsg_batch_stop(raw);
	batch_close(&c, bt);
}

/* A failed message is the batch's answer, and nothing of the batch is kept. */
static void t_batch_reports_the_first_error(void **state)
{
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt;
	struct tg_err e = { 0 };
	char why[256] = "unset";

	NFT_FX_NEED();
	bt = batch_open(&c);
	put_table(bt, NFT_MSG_NEWTABLE, "tg_kept_not");
	put_table(bt, NFT_MSG_DELTABLE, "tg_absent");
	assert_int_equal(acct_batch_send(&c, bt, why, sizeof(why)), -ENOENT);
	assert_false(nft_fx_has_table("tg_kept_not"));
	/* the refusal's extended-ack text, whatever there is, goes into the error */
	assert_int_equal(acct_nft_fail(&e, -ENOENT, "deleting", why), -ENOENT);
	assert_string_equal(e.kernel, why);
#if NFT_FX_FAKE
	assert_string_equal(why, FAKE_EXTACK);
	assert_string_equal(e.msg,
			    "nftables: deleting failed: No such file or directory: " FAKE_EXTACK);
#endif
	batch_close(&c, bt);
}

/* ---- a rebuild at node scale ---- */

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
#if NFT_FX_FAKE
	/* one transaction, committed: the table, and thousands of messages */
	assert_int_equal(fake.batches, 1);
	assert_int_equal(fake.committed, 1);
	/* inet tollgate and arp tollgate, in the same transaction */
	assert_int_equal(fake.counts[NFT_MSG_NEWTABLE], 2);
	assert_true(fake.messages > 10 * PODS);
#endif
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_all_counters(s, ps);
	/* again, over the same socket: the same counters */
	s->n = s->calls = 0;
	assert_int_equal(acct_reader_read(rd, on_counter, s), 0);
	assert_all_counters(s, ps);
	/* counters start at zero */
	for (size_t i = 0; i < s->n; i++)
		assert_true(s->packets[i] == 0 && s->bytes[i] == 0);
#if !NFT_FX_FAKE
	/* declared: the probe (a dump of the rules, which the fake keeps none of) says so,
	 * and a second declaration writes nothing */
	assert_int_equal(acct_declared(&cfg), 1);
	assert_int_equal(acct_declare(&cfg, ps->p, PODS, 0, &rep, &e), 0);
	assert_int_equal(rep.table + rep.sets + rep.chains + rep.rules + rep.internal, 0);
#endif
	acct_reader_free(rd);
	seen_free(s);
	free(ps);
}

static void t_rebuild_400_pods(void **state)
{
	NFT_FX_NEED();
	check_rebuild(ACCT_DECLARE_PODS);
}

static void t_add_rebuilds_missing_table(void **state)
{
	NFT_FX_NEED();
	check_rebuild(0);
}

#endif
