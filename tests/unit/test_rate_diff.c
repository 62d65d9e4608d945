// SPDX-License-Identifier: Apache-2.0
/*
 * rate_parse against an exact reference (tests/unit/rate_ref.h, GMP
 * rationals): the same strings accepted, the same bit/s for each, and every
 * string that is no number of the grammar refused as -EINVAL, never -ERANGE
 * (a number that is both fractional and out of range may be either).
 * The strings: every edge the contract names, then 400,000 drawn from the
 * grammar's pieces (signs, leading and trailing zeros, long digit runs,
 * every unit, exponents, near-misses) with a fixed seed, so that a failure
 * is reproducible.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lib/rate.h"
#include "tests/unit/rate_ref.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

static void put_digits(char *b, size_t *len, size_t cap, size_t n, int zeros_bias)
{
	for (size_t i = 0; i < n && *len + 1 < cap; i++)
		b[(*len)++] = (char)('0' + (rnd(4) < (uint32_t)zeros_bias ? 0 : rnd(10)));
}

/* One string from the grammar's pieces, sometimes bent out of it. */
static void draw(char *b, size_t cap)
{
	static const char *const suffixes[] = { "",   "k",  "M",   "G",	 "T",	 "Ki", "Mi",
						"Gi", "Ti", "K",   "m",	 "Mbps", "i",  " ",
						"e",  "E",  "e-3", "kk", "MiB",	 "g",  "t" };
	static const size_t whole_len[] = { 0, 1, 1, 2, 3, 4, 6, 9, 10, 11, 12, 19, 20, 21, 30 };
	size_t len = 0;

	switch (rnd(12)) {
	case 0:
		b[len++] = '+';
		break;
	case 1:
		b[len++] = '-';
		break;
	case 2:
		b[len++] = ' ';
		break;
	default:
		break;
	}
	put_digits(b, &len, cap, whole_len[rnd(sizeof(whole_len) / sizeof(whole_len[0]))],
		   (int)rnd(4));
	if (rnd(2)) {
		b[len++] = '.';
		put_digits(b, &len, cap, rnd(26), (int)rnd(4));
	}
	if (rnd(4) == 0) {
		b[len++] = rnd(2) ? 'e' : 'E';
		if (rnd(8) == 0)
			b[len++] = '0';
		put_digits(b, &len, cap, 1 + rnd(3), 0);
		if (rnd(10) == 0)
			b[len++] = 'x';
	} else {
		const char *sfx = suffixes[rnd(sizeof(suffixes) / sizeof(suffixes[0]))];

		for (; *sfx && len + 1 < cap; sfx++)
			b[len++] = *sfx;
	}
	if (len && rnd(40) == 0)
		b[rnd((uint32_t)len)] = (char)(' ' + rnd(95)); /* a stray character anywhere */
	b[len] = '\0';
}

/* Fails the test on any disagreement with the reference; rate_parse's return. */
static int check_one(const char *s)
{
	int r = 0;
	const char *why = ref_rate_mismatch(s, &r);

	if (why)
		fail_msg("\"%s\": %s", s, why);
	return r;
}

static void t_edges(void **state)
{
	static const char *const edges[] = {
		"1000",
		"999",
		"32000000000",
		"32000000001",
		"32G",
		"32.000000000000000001G",
		"31.999999999G",
		"1k",
		"0.999k",
		"1.000k",
		"0.0000000009094947017729282379150390625Ti",
		"29.802322387695312Gi",
		"29.8023223876953125Gi",
		"0.95367431640625Mi",
		"1e3",
		"1e18",
		"1e19",
		"0e19",
		"1e0000000000000000000009",
		"0.00000000001e20",
		"3.2e10",
		"3.2e10x",
		"99999999999999999999",
		"99999999999999999999x",
		"1e99x",
		"18446744073709551615",
		"18446744073709551616",
		"1.5000000000000000000G",
		"1.50000000000000000001G",
		"1.0000000000000000001G",
		"0.1441152e18",
		"+5M",
		"++5M",
		"5M+",
		"5.M",
		".5M",
		"5..M",
		"",
		"+",
		".",
		"e9",
		"1e",
		"1e+9",
		"1e-9",
		"1 k",
		" 1k",
		"1k ",
		"0x10M",
		"1_000k",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		check_one(edges[i]);
}

static void t_drawn(void **state)
{
	char b[128];
	size_t accepted = 0;

	(void)state;
	for (int i = 0; i < 400000; i++) {
		draw(b, sizeof(b));
		accepted += check_one(b) == 0;
	}
	/* the draw must reach both sides, or it proves little */
	print_message("%zu of 400000 drawn strings are rates\n", accepted);
	assert_true(accepted > 10000 && accepted < 390000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_edges),
		cmocka_unit_test(t_drawn),
	};

	return cmocka_run_group_tests_name("rate_diff", tests, NULL, NULL);
}
