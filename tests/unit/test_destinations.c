// SPDX-License-Identifier: Apache-2.0
/*
 * internetGuard.destinations' ledger (exporter/destinations.c) against a
 * model of the kernel: sets that count bytes per prefix (some bytes find a
 * set full and reach only the namespace's counter), takes that reset them,
 * and counters read after each take while traffic goes on. At every settle
 * a namespace's series must sum to its counter exactly, and no series may
 * ever go down.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accounting/internal.h"
#include "exporter/internal.h"

#define MAX_SERIES 256

struct seen_series {
	uint32_t prefix; /* 0: other */
	uint64_t bytes;
};

struct snapshot {
	struct seen_series s[MAX_SERIES];
	size_t n;
	uint64_t total, other, sum;
};

static bool snap_book(const char *ns, enum acct_dir dir, uint64_t total, uint64_t other, void *arg)
{
	struct snapshot *sn = arg;

	if (strcmp(ns, "crawl") != 0 || dir != ACCT_DIR_EGRESS)
		return false;
	sn->total = total;
	sn->other = other;
	sn->sum = other;
	return true;
}

static void snap_series(const char *ns, enum acct_dir dir, uint32_t prefix, uint8_t len,
			uint64_t bytes, void *arg)
{
	struct snapshot *sn = arg;

	(void)ns;
	(void)dir;
	(void)len;
	assert_true(sn->n < MAX_SERIES);
	sn->s[sn->n++] = (struct seen_series){ prefix, bytes };
	sn->sum += bytes;
}

static uint64_t counter_total;

static bool total_fn(const char *ns, enum acct_dir dir, uint64_t *ret, void *arg)
{
	(void)arg;
	if (strcmp(ns, "crawl") != 0 || dir != ACCT_DIR_EGRESS)
		return false;
	*ret = counter_total;
	return true;
}

static void snapshot(struct dst_ledger *l, struct snapshot *sn)
{
	memset(sn, 0, sizeof(*sn));
	dst_ledger_settle(l, total_fn, NULL);
	dst_ledger_visit(l, snap_book, snap_series, sn);
}

static const struct seen_series *find(const struct snapshot *sn, uint32_t prefix)
{
	for (size_t i = 0; i < sn->n; i++)
		if (sn->s[i].prefix == prefix)
			return &sn->s[i];
	return NULL;
}

/* The kernel's set: bytes each prefix counted since the last take. */
#define PREFIXES 40
static uint64_t set_bytes[PREFIXES];

static void send_bytes(unsigned p, uint64_t bytes, bool set_full)
{
	counter_total += bytes;
	if (!set_full)
		set_bytes[p] += bytes;
}

static void take(struct dst_ledger *l, int64_t now_ms, unsigned top)
{
	dst_ledger_begin(l, now_ms);
	assert_int_equal(dst_ledger_set(l, "crawl", ACCT_DIR_EGRESS, 24, top), 0);
	for (unsigned p = 0; p < PREFIXES; p++)
		if (set_bytes[p]) {
			assert_int_equal(dst_ledger_add(l, "crawl", ACCT_DIR_EGRESS,
							0xcb000000u + (p << 8), set_bytes[p]),
					 0);
			set_bytes[p] = 0;
		}
	dst_ledger_end(l, true);
}

/*
 * Random traffic over 40 prefixes (skewed, changing over time, some of it
 * past a full set), takes at random, traffic between a take and the
 * counters' read: the sum is exact and nothing goes down, at every settle.
 */
static void t_sums_exact_and_monotonic(void **state)
{
	struct dst_ledger *l = dst_ledger_new();
	struct snapshot prev, now;
	int64_t t = 0;
	unsigned entered = 0, left = 0;

	(void)state;
	srandom(7);
	counter_total = 0;
	memset(set_bytes, 0, sizeof(set_bytes));
	memset(&prev, 0, sizeof(prev));
	for (int round = 0; round < 20000; round++) {
		/* the favourite prefixes change every 2,000 rounds */
		unsigned hot = (unsigned)(round / 2000) * 3 % PREFIXES;

		for (int k = 0; k < 5; k++) {
			unsigned p = random() % 4 ? (hot + random() % 3) % PREFIXES
						  : (unsigned)(random() % PREFIXES);

			send_bytes(p, 40 + (uint64_t)(random() % 1500), random() % 10 == 0);
		}
		t += 100 + random() % 900;
		if (random() % 3)
			continue;
		take(l, t, 5);
		/* between the take and the counters' read, more traffic: the total has it, no set yet */
		send_bytes((unsigned)(random() % PREFIXES), 1000, false);
		snapshot(l, &now);
		assert_int_equal(now.total, counter_total);
		assert_int_equal(now.sum, counter_total);
		assert_true(now.n <= 5);
		assert_true(now.other >= prev.other);
		for (size_t i = 0; i < now.n; i++) {
			const struct seen_series *was = find(&prev, now.s[i].prefix);

			if (was)
				assert_true(now.s[i].bytes >= was->bytes);
			else
				entered++;
		}
		for (size_t i = 0; i < prev.n; i++)
			left += find(&now, prev.s[i].prefix) == NULL;
		prev = now;
	}
	/* the control: the top did change, so the checks above saw prefixes come and go */
	assert_true(entered > 5);
	assert_true(left > 0);
	dst_ledger_free(l);
}

/* At rest, the top series hold exactly what was sent to them once they were in the top. */
static void t_top_holds_what_was_sent(void **state)
{
	struct dst_ledger *l = dst_ledger_new();
	struct snapshot sn;

	(void)state;
	counter_total = 0;
	memset(set_bytes, 0, sizeof(set_bytes));
	/* prefix 1 sends most, 2 next, 3..9 a little: top 2 is {1, 2} */
	for (unsigned p = 1; p < 10; p++)
		send_bytes(p, p == 1 ? 90000 : p == 2 ? 50000 : 1000, false);
	take(l, 1000, 2);
	snapshot(l, &sn);
	assert_int_equal(sn.n, 2);
	assert_non_null(find(&sn, 0xcb000100u));
	assert_non_null(find(&sn, 0xcb000200u));
	assert_int_equal(find(&sn, 0xcb000100u)->bytes, 90000);
	assert_int_equal(find(&sn, 0xcb000200u)->bytes, 50000);
	assert_int_equal(sn.other, 7 * 1000);
	/* prefix 3 grows a little past prefix 2's score: not enough to take its place */
	send_bytes(3, 55000, false);
	take(l, 2000, 2);
	snapshot(l, &sn);
	assert_null(find(&sn, 0xcb000300u));
	/* well past it: it comes in, 2 leaves with its bytes into other */
	send_bytes(3, 200000, false);
	take(l, 3000, 2);
	snapshot(l, &sn);
	assert_non_null(find(&sn, 0xcb000300u));
	assert_null(find(&sn, 0xcb000200u));
	assert_int_equal(find(&sn, 0xcb000300u)->bytes, 200000);
	assert_int_equal(sn.other, 7 * 1000 + 50000 + 55000);
	assert_int_equal(sn.sum, counter_total);
	dst_ledger_free(l);
}

/* Prefixes out of every set for two minutes are forgotten: memory follows what the sets hold. */
static void t_memory_follows_the_sets(void **state)
{
	struct dst_ledger *l = dst_ledger_new();
	int64_t t = 0;
	size_t most = 0;

	(void)state;
	/* 100,000 destinations, 1,000 new ones every 10 s (a set of 1,024) */
	for (uint32_t d = 0; d < 100000; d += 1000) {
		t += 10000;
		dst_ledger_begin(l, t);
		dst_ledger_set(l, "crawl", ACCT_DIR_EGRESS, 32, 10);
		for (uint32_t k = 0; k < 1000; k++)
			assert_int_equal(dst_ledger_add(l, "crawl", ACCT_DIR_EGRESS,
							0xc6120000u + d + k, 100 + k),
					 0);
		dst_ledger_end(l, true);
		if (dst_ledger_entries(l) > most)
			most = dst_ledger_entries(l);
	}
	/* what two minutes and a take of sets bring, and no more */
	assert_true(most <= 14 * 1000);
	assert_true(most >= 12 * 1000);
	dst_ledger_free(l);
}

/* A set of another prefix length starts its book again; a set gone from a whole take takes its book. */
static void t_books_follow_their_sets(void **state)
{
	struct dst_ledger *l = dst_ledger_new();
	struct snapshot sn;

	(void)state;
	counter_total = 500;
	dst_ledger_begin(l, 1000);
	dst_ledger_set(l, "crawl", ACCT_DIR_EGRESS, 24, 3);
	dst_ledger_add(l, "crawl", ACCT_DIR_EGRESS, 0xcb007100u, 500);
	dst_ledger_end(l, true);
	snapshot(l, &sn);
	assert_int_equal(sn.n, 1);
	dst_ledger_begin(l, 2000);
	dst_ledger_set(l, "crawl", ACCT_DIR_EGRESS, 16, 3);
	dst_ledger_end(l, true);
	snapshot(l, &sn);
	assert_int_equal(sn.n, 0);
	assert_int_equal(sn.other, 500);
	/* a take that failed midway keeps what it did not see */
	dst_ledger_begin(l, 3000);
	dst_ledger_end(l, false);
	snapshot(l, &sn);
	assert_int_equal(sn.total, 500);
	dst_ledger_begin(l, 4000);
	dst_ledger_end(l, true);
	snapshot(l, &sn);
	assert_int_equal(sn.total, 0); /* no book: not shown */
	assert_int_equal(dst_ledger_add(l, "crawl", ACCT_DIR_EGRESS, 1, 1), -ENOENT);
	dst_ledger_free(l);
}

static void t_prefix_label(void **state)
{
	char buf[DST_LABEL_MAX];

	(void)state;
	dst_prefix_label(0xcb007100u, 24, buf);
	assert_string_equal(buf, "203.0.113.0/24");
	dst_prefix_label(0xffffffffu, 32, buf);
	assert_string_equal(buf, "255.255.255.255/32");
}

/* Set names carry the namespace and direction; nothing else parses as one. */
static void t_set_names_round_trip(void **state)
{
	char name[ACCT_COUNTER_NAME_MAX], ns[ACCT_COUNTER_NAME_MAX];
	enum acct_dir dir;

	(void)state;
	acct_dst_set_name("crawl", ACCT_DIR_INGRESS, name);
	assert_string_equal(name, "dst_crawl_ingress");
	assert_true(acct_dst_set_parse(name, ns, &dir));
	assert_string_equal(ns, "crawl");
	assert_int_equal(dir, ACCT_DIR_INGRESS);
	acct_dst_set_name("", ACCT_DIR_EGRESS, name);
	assert_true(acct_dst_set_parse(name, ns, &dir));
	assert_string_equal(ns, "");
	assert_int_equal(dir, ACCT_DIR_EGRESS);
	assert_false(acct_dst_set_parse("dst_a_b_egress", ns, &dir));
	assert_false(acct_dst_set_parse("dst_crawl_sideways", ns, &dir));
	assert_false(acct_dst_set_parse("ns_crawl_egress", ns, &dir));
	assert_false(acct_dst_set_parse("dst_egress", ns, &dir));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_sums_exact_and_monotonic),
		cmocka_unit_test(t_top_holds_what_was_sent),
		cmocka_unit_test(t_memory_follows_the_sets),
		cmocka_unit_test(t_books_follow_their_sets),
		cmocka_unit_test(t_prefix_label),
		cmocka_unit_test(t_set_names_round_trip),
	};

	return cmocka_run_group_tests_name("destinations", tests, NULL, NULL);
}
