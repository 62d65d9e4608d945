// SPDX-License-Identifier: Apache-2.0
/*
 * The accounting table against the kernel's nftables (root and the nft
 * binary). tests/integration/test_kernel_cases.sh runs this in a network
 * namespace of its own, and the process unshares another before its first
 * table (tests/unit/netns.h): run by hand it never sees the host's tables
 * either.
 *
 * The cases of tests/unit/acct_cases.h, which tests/unit/test_accounting.c
 * runs against the fake nf_tables, here against the kernel's (the reader,
 * the batch transport, a 400-pod rebuild whose ~6,000 answers must fit the
 * receive buffer); and one that needs the kernel's rules: another
 * internalCIDRs list, or perPod turned over, writes only what differs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/kernel/nft_kernel.h"
#include "tests/unit/acct_cases.h"

/* Another internalCIDRs list: only the set internal is written, the rules stay. */
static void t_declare_changes_only_what_differs(void **state)
{
	struct cidr4 two[2] = { { 0x0a000000u, 8 }, { 0xc0a80000u, 16 } };
	struct acct_config base = config(), cfg = base;
	struct acct_repairs rep;
	struct tg_err e = { 0 };

	NFT_FX_NEED();
	assert_int_equal(acct_declare(&base, NULL, 0, 0, &rep, &e), 1);
	cfg.internal = two;
	cfg.n_internal = 2;
	assert_int_equal(acct_declared(&cfg), 0);
	assert_int_equal(acct_declare(&cfg, NULL, 0, 0, &rep, &e), 1);
	assert_int_equal(rep.internal, 1);
	assert_int_equal(rep.rules + rep.chains + rep.sets + rep.table, 0);
	assert_int_equal(acct_declared(&cfg), 1);
	assert_int_equal(acct_declared(&base), 0);
	/* per-pod counting adds rules to some chains: only those chains are written */
	cfg.per_pod = !cfg.per_pod;
	assert_int_equal(acct_declare(&cfg, NULL, 0, 0, &rep, &e), 1);
	assert_true(rep.rules > 0);
	assert_int_equal(rep.internal + rep.chains + rep.sets + rep.table, 0);
	assert_int_equal(acct_declared(&cfg), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		NFT_CASE(t_reader_without_table),
		NFT_CASE(t_reader_values),
		NFT_CASE(t_reader_ids),
		NFT_CASE(t_batch_refused_whole_answers_at_once),
		NFT_CASE(t_batch_ignores_earlier_answers),
		NFT_CASE(t_batch_reports_the_first_error),
		NFT_CASE(t_rebuild_400_pods),
		NFT_CASE(t_declare_changes_only_what_differs),
		NFT_CASE(t_add_rebuilds_missing_table),
	};

	return cmocka_run_group_tests_name("accounting in a network namespace", tests, NULL, NULL);
}
