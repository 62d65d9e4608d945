// SPDX-License-Identifier: Apache-2.0
/*
 * Address lists: ip4_parse / cidr4_parse and friends (lib/ip4.h), and
 * ipam_pool_parse / ipam_pool_to_ranges (ipam/ipam.h).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/group.h"

#include "ipam/imds.h"
#include "ipam/internal.h"
#include "ipam/ipam.h"
#include "ipam/pool.h"
#include "ipam/store.h"
#include "lib/ip4.h"
#include "tests/unit/helpers.h"

/* Builds a JSON array of strings from a NULL-terminated list. */
static json_object *strs(const char *const *list)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; list && list[i]; i++)
		json_object_array_add(a, json_object_new_string(list[i]));
	return a;
}

#define LIST(...) ((const char *const[]){ __VA_ARGS__, NULL })

struct pool {
	uint32_t *a;
	size_t n;
	struct tg_err e;
	int r;
};

static void pool_parse(struct pool *p, const char *const *add, const char *const *exc)
{
	json_object *ja = strs(add), *je = exc ? strs(exc) : NULL;

	memset(p, 0, sizeof(*p));
	p->r = ipam_pool_parse(ja, je, "ipam", &p->a, &p->n, &p->e);
	json_object_put(ja);
	if (je)
		json_object_put(je);
}

static void pool_ok(struct pool *p, const char *const *add, const char *const *exc)
{
	pool_parse(p, add, exc);
	if (p->r != 0)
		fail_msg("ipam_pool_parse failed (r=%d code=%d): %s", p->r, p->e.code, p->e.msg);
}

static void pool_free(struct pool *p)
{
	free(p->a);
	p->a = NULL;
}

static void assert_pool(const struct pool *p, const char *const *want)
{
	size_t n = 0;

	while (want[n])
		n++;
	if (p->n != n)
		fail_msg("pool has %zu addresses, want %zu", p->n, n);
	for (size_t i = 0; i < n; i++) {
		char got[IP4_STRLEN];

		if (p->a[i] != ip(want[i]))
			fail_msg("pool[%zu] = %s, want %s", i, ip4_format(p->a[i], got), want[i]);
	}
}

static void assert_sorted_unique(const struct pool *p)
{
	for (size_t i = 1; i < p->n; i++)
		if (p->a[i - 1] >= p->a[i])
			fail_msg("pool not sorted/unique at %zu", i);
}

/* ---------------- lib/ip4 ---------------- */

static void t_ip4_parse_valid(void **state)
{
	uint32_t a;

	assert_int_equal(ip4_parse("10.1.2.3", &a), 0);
	assert_int_equal(a, 0x0a010203); /* host byte order */
	assert_int_equal(ip4_parse("0.0.0.0", &a), 0);
	assert_int_equal(a, 0);
	assert_int_equal(ip4_parse("255.255.255.255", &a), 0);
	assert_int_equal(a, 0xffffffffu);
	assert_int_equal(ip4_parse("169.254.1.1", &a), 0);
	assert_int_equal(a, 0xa9fe0101u);
}

static void t_ip4_parse_rejects(void **state)
{
	static const char *const bad[] = {
		"10.1",
		"10",
		"256.0.0.1",
		" 10.0.0.1",
		"10.0.0.1 ",
		"10.0.0.1\n",
		"",
		"1.2.3.4.5",
		"a.b.c.d",
		"10.0.0.-1",
		"0x0a.0.0.1",
		"10.0.0.01",
		"10..0.1",
		"10.0.0.",
		".10.0.0.1",
		"10.0.0.1/32",
		"10.0.0.1-10.0.0.2",
		"::1",
		"10.0.0.256",
		"1.2.3.4\t",
		"+1.2.3.4",
	};
	uint32_t a = 0x12345678;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (ip4_parse(bad[i], &a) != -EINVAL)
			fail_msg("ip4_parse(\"%s\") accepted", bad[i]);
	assert_int_equal(a, 0x12345678); /* untouched on failure */
	assert_int_equal(ip4_parse(NULL, &a), -EINVAL);
}

static void t_ip4_format(void **state)
{
	char buf[IP4_STRLEN];

	assert_string_equal(ip4_format(0x0a010203, buf), "10.1.2.3");
	assert_string_equal(ip4_format(0, buf), "0.0.0.0");
	assert_string_equal(ip4_format(0xffffffffu, buf), "255.255.255.255");
	assert_ptr_equal(ip4_format(1, buf), buf);
}

static void t_ip4_round_trip(void **state)
{
	static const uint32_t v[] = { 1, 0x7f000001, 0xc0a80001, 0xfffffffe, 0x0a00ff00 };

	for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
		char buf[IP4_STRLEN];
		uint32_t back;

		assert_int_equal(ip4_parse(ip4_format(v[i], buf), &back), 0);
		assert_int_equal(back, v[i]);
	}
}

static void t_cidr4_parse_valid(void **state)
{
	struct cidr4 c;

	assert_int_equal(cidr4_parse("10.0.0.0/8", &c), 0);
	assert_int_equal(c.net, 0x0a000000);
	assert_int_equal(c.prefix, 8);
	assert_int_equal(cidr4_parse("0.0.0.0/0", &c), 0);
	assert_int_equal(c.net, 0);
	assert_int_equal(c.prefix, 0);
	assert_int_equal(cidr4_parse("10.1.2.3/32", &c), 0);
	assert_int_equal(c.net, 0x0a010203);
	assert_int_equal(c.prefix, 32);
	assert_int_equal(cidr4_parse("172.16.0.0/12", &c), 0);
	assert_int_equal(c.prefix, 12);
	assert_int_equal(cidr4_parse("10.1.0.64/28", &c), 0);
	assert_int_equal(c.net, ip("10.1.0.64"));
	assert_int_equal(c.prefix, 28);
}

static void t_cidr4_parse_rejects(void **state)
{
	static const char *const bad[] = {
		"10.0.0.0/33",
		"10.0.0.1/8",
		"10.1.2.3/24",
		"10.0.0.0",
		"10.0.0.0/",
		"/8",
		"10.0.0.0/-1",
		"10.0.0.0/+8",
		"10.0.0.0/8x",
		"10.0.0.0/ 8",
		"10.0.0.0 /8",
		"10.0/8",
		"10.0.0.0/8/8",
		"",
		"/",
		" 10.0.0.0/8",
		"10.0.0.0/8 ",
		"256.0.0.0/8",
		"10.0.0.0/4294967304",
		"10.0.0.0/99999999999999999999999",
		"a.b.c.d/8",
		"0.0.0.1/0",
	};
	struct cidr4 c = { .net = 0x12345678, .prefix = 7 };

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (cidr4_parse(bad[i], &c) == 0)
			fail_msg("cidr4_parse(\"%s\") accepted", bad[i]);
	assert_int_equal(c.net, 0x12345678);
	assert_int_equal(c.prefix, 7);
	assert_true(cidr4_parse(NULL, &c) < 0);
}

static void t_cidr4_helpers(void **state)
{
	struct cidr4 c;
	char buf[CIDR4_STRLEN];

	assert_int_equal(cidr4_mask(0), 0);
	assert_int_equal(cidr4_mask(1), 0x80000000u);
	assert_int_equal(cidr4_mask(8), 0xff000000u);
	assert_int_equal(cidr4_mask(31), 0xfffffffeu);
	assert_int_equal(cidr4_mask(32), 0xffffffffu);
	assert_int_equal(cidr4_parse("10.1.0.64/28", &c), 0);
	assert_int_equal(cidr4_last(&c), ip("10.1.0.79"));
	assert_true(cidr4_contains(&c, ip("10.1.0.64")));
	assert_true(cidr4_contains(&c, ip("10.1.0.79")));
	assert_false(cidr4_contains(&c, ip("10.1.0.80")));
	assert_false(cidr4_contains(&c, ip("10.1.0.63")));
	assert_string_equal(cidr4_format(&c, buf), "10.1.0.64/28");
	assert_int_equal(cidr4_parse("0.0.0.0/0", &c), 0);
	assert_int_equal(cidr4_last(&c), 0xffffffffu);
	assert_true(cidr4_contains(&c, 0xffffffffu));
	assert_string_equal(cidr4_format(&c, buf), "0.0.0.0/0");
	assert_int_equal(cidr4_parse("255.255.255.255/32", &c), 0);
	assert_string_equal(cidr4_format(&c, buf), "255.255.255.255/32");
	assert_int_equal(cidr4_last(&c), 0xffffffffu);
}

/* ---------------- ipam_pool_parse ---------------- */

static void t_pool_range(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.10-10.1.0.13"), NULL);
	assert_pool(&p, LIST("10.1.0.10", "10.1.0.11", "10.1.0.12", "10.1.0.13"));
	pool_free(&p);
}

static void t_pool_range_single_address(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.10-10.1.0.10"), NULL);
	assert_pool(&p, LIST("10.1.0.10"));
	pool_free(&p);
}

static void t_pool_range_across_octets(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.254-10.1.1.1"), NULL);
	assert_pool(&p, LIST("10.1.0.254", "10.1.0.255", "10.1.1.0", "10.1.1.1"));
	pool_free(&p);
}

static void t_pool_range_is_taken_whole(void **state)
{
	struct pool p;

	/* a range is not a subnet: .0 and .255 stay */
	pool_ok(&p, LIST("10.1.0.0-10.1.0.255"), NULL);
	assert_int_equal(p.n, 256);
	assert_int_equal(p.a[0], ip("10.1.0.0"));
	assert_int_equal(p.a[255], ip("10.1.0.255"));
	pool_free(&p);
}

static void t_pool_single(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.9"), NULL);
	assert_pool(&p, LIST("10.1.0.9"));
	pool_free(&p);
}

static void t_pool_top_of_address_space(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("255.255.255.253-255.255.255.255"), NULL);
	assert_pool(&p, LIST("255.255.255.253", "255.255.255.254", "255.255.255.255"));
	pool_free(&p);
}

static void t_pool_cidr_drops_network_and_broadcast(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.64/28"), NULL);
	assert_int_equal(p.n, 14);
	assert_int_equal(p.a[0], ip("10.1.0.65"));
	assert_int_equal(p.a[13], ip("10.1.0.78"));
	pool_free(&p);
	pool_ok(&p, LIST("10.1.0.0/24"), NULL);
	assert_int_equal(p.n, 254);
	assert_int_equal(p.a[0], ip("10.1.0.1"));
	assert_int_equal(p.a[253], ip("10.1.0.254"));
	pool_free(&p);
}

static void t_pool_cidr_30(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.8/30"), NULL);
	assert_pool(&p, LIST("10.1.0.9", "10.1.0.10"));
	pool_free(&p);
}

static void t_pool_cidr_29(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.8/29"), NULL);
	assert_pool(&p, LIST("10.1.0.9", "10.1.0.10", "10.1.0.11", "10.1.0.12", "10.1.0.13",
			     "10.1.0.14"));
	pool_free(&p);
}

static void t_pool_cidr_31_taken_whole(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.8/31"), NULL);
	assert_pool(&p, LIST("10.1.0.8", "10.1.0.9"));
	pool_free(&p);
}

static void t_pool_cidr_32_is_one_address(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.8/32"), NULL);
	assert_pool(&p, LIST("10.1.0.8"));
	pool_free(&p);
}

static void t_pool_mixed_sorted(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.20", "10.1.0.1", "10.1.0.8/31", "10.1.0.5-10.1.0.6"), NULL);
	assert_pool(&p,
		    LIST("10.1.0.1", "10.1.0.5", "10.1.0.6", "10.1.0.8", "10.1.0.9", "10.1.0.20"));
	pool_free(&p);
}

static void t_pool_duplicates_merged(void **state)
{
	struct pool p;

	pool_ok(&p,
		LIST("10.1.0.1-10.1.0.5", "10.1.0.3-10.1.0.8", "10.1.0.4", "10.1.0.8/32",
		     "10.1.0.1-10.1.0.5"),
		NULL);
	assert_pool(&p, LIST("10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4", "10.1.0.5", "10.1.0.6",
			     "10.1.0.7", "10.1.0.8"));
	pool_free(&p);
}

static void t_pool_exclude_ip(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.10-10.1.0.14"), LIST("10.1.0.11"));
	assert_pool(&p, LIST("10.1.0.10", "10.1.0.12", "10.1.0.13", "10.1.0.14"));
	pool_free(&p);
}

static void t_pool_exclude_range(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.10-10.1.0.20"), LIST("10.1.0.12-10.1.0.18"));
	assert_pool(&p, LIST("10.1.0.10", "10.1.0.11", "10.1.0.19", "10.1.0.20"));
	pool_free(&p);
}

static void t_pool_exclude_cidr_whole(void **state)
{
	struct pool p;

	/* an exclude CIDR removes every address it covers, network and broadcast included */
	pool_ok(&p, LIST("10.1.0.0-10.1.0.9"), LIST("10.1.0.0/30", "10.1.0.8/31"));
	assert_pool(&p, LIST("10.1.0.4", "10.1.0.5", "10.1.0.6", "10.1.0.7"));
	pool_free(&p);
}

static void t_pool_exclude_outside_pool_is_harmless(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.1-10.1.0.3"), LIST("192.168.0.0/16", "10.1.0.4"));
	assert_pool(&p, LIST("10.1.0.1", "10.1.0.2", "10.1.0.3"));
	pool_free(&p);
}

static void t_pool_exclude_everything(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.1-10.1.0.3"), LIST("10.1.0.0/24"));
	assert_int_equal(p.n, 0);
	pool_free(&p);
}

static void t_pool_empty_and_null(void **state)
{
	struct pool p;
	struct tg_err e = { 0 };
	uint32_t *a = NULL;
	size_t n = 99;

	pool_ok(&p, LIST(NULL), NULL);
	assert_int_equal(p.n, 0);
	pool_free(&p);
	assert_int_equal(ipam_pool_parse(NULL, NULL, "ipam", &a, &n, &e), 0);
	assert_int_equal(n, 0);
	free(a);
}

struct bad_entry {
	const char *name;
	const char *const *add;
	const char *const *exc;
	const char *needle;
};

static void t_pool_bad(void **state)
{
	const struct bad_entry *b = *state;
	struct pool p;

	pool_parse(&p, b->add, b->exc);
	if (p.r >= 0)
		fail_msg("accepted");
	assert_int_equal(p.e.code, CNI_ERR_CONFIG);
	assert_contains(p.e.msg, b->needle);
	assert_null(p.a);
}

static const struct bad_entry bad_entries[] = {
	{ "bad: word", LIST("10.1.0.1", "bogus"), NULL, "ipam.addresses[1]" },
	{ "bad: empty string", LIST(""), NULL, "ipam.addresses[0]" },
	{ "bad: reversed range", LIST("10.1.0.9-10.1.0.1"), NULL, "ipam.addresses[0]" },
	{ "bad: range without end", LIST("10.1.0.1-"), NULL, "ipam.addresses[0]" },
	{ "bad: range without start", LIST("-10.1.0.1"), NULL, "ipam.addresses[0]" },
	{ "bad: dash only", LIST("10.1.0.1", "10.1.0.2", "-"), NULL, "ipam.addresses[2]" },
	{ "bad: three-part range", LIST("10.1.0.1-10.1.0.2-10.1.0.3"), NULL, "ipam.addresses[0]" },
	{ "bad: range with spaces", LIST("10.1.0.1 - 10.1.0.3"), NULL, "ipam.addresses[0]" },
	{ "bad: range of CIDRs", LIST("10.1.0.0/24-10.1.1.0/24"), NULL, "ipam.addresses[0]" },
	{ "bad: prefix 33", LIST("10.1.0.0/33"), NULL, "ipam.addresses[0]" },
	{ "bad: CIDR host bits", LIST("10.1.0.1/24"), NULL, "ipam.addresses[0]" },
	{ "bad: short address", LIST("10.1"), NULL, "ipam.addresses[0]" },
	{ "bad: octet 256", LIST("10.1.0.256"), NULL, "ipam.addresses[0]" },
	{ "bad: leading space", LIST(" 10.1.0.1"), NULL, "ipam.addresses[0]" },
	{ "bad: IPv6", LIST("fd00::1"), NULL, "ipam.addresses[0]" },
	{ "bad: exclude word", LIST("10.1.0.1"), LIST("10.1.0.1", "nope"), "ipam.exclude[1]" },
	{ "bad: exclude reversed range", LIST("10.1.0.1"), LIST("10.1.0.5-10.1.0.4"),
	  "ipam.exclude[0]" },
	{ "bad: too many addresses (/15)", LIST("10.0.0.0/15"), NULL, "ipam.addresses" },
	{ "bad: too many addresses (/8)", LIST("10.0.0.0/8"), NULL, "ipam.addresses" },
	{ "bad: too many addresses (whole space)", LIST("0.0.0.0/0"), NULL, "ipam.addresses" },
	{ "bad: too many addresses (range)", LIST("0.0.0.0-255.255.255.255"), NULL,
	  "ipam.addresses" },
	{ "bad: too many addresses (sum of entries)",
	  LIST("10.1.0.0-10.1.127.255", "10.2.0.0-10.2.127.255", "10.3.0.0"), NULL,
	  "ipam.addresses" },
};

static void t_pool_where_names_the_key(void **state)
{
	json_object *a = strs(LIST("10.0.0.1", "10.0.0.2", "x"));
	struct tg_err e = { 0 };
	uint32_t *pool = NULL;
	size_t n = 0;

	assert_true(ipam_pool_parse(a, NULL, "state.pool", &pool, &n, &e) < 0);
	assert_int_equal(e.code, CNI_ERR_CONFIG);
	assert_contains(e.msg, "state.pool.addresses[2]");
	assert_contains(e.msg, "\"x\"");
	json_object_put(a);
}

/* An entry that is not a string (a store's file may hold anything): refused by index. */
static void t_pool_non_string_entries(void **state)
{
	const char *docs[] = { "[\"10.0.0.1\",null]", "[7]", "[\"10.0.0.1\",[\"10.0.0.2\"]]" };
	const char *want[] = { "ipam.addresses[1] must be a string",
			       "ipam.addresses[0] must be a string",
			       "ipam.addresses[1] must be a string" };
	uint32_t *pool = NULL;
	size_t n = 0;

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		json_object *a = json_tokener_parse(docs[i]), *x = json_tokener_parse("[null]");
		struct tg_err e = { 0 };

		assert_true(ipam_pool_parse(a, NULL, "ipam", &pool, &n, &e) < 0);
		assert_int_equal(e.code, CNI_ERR_CONFIG);
		assert_contains(e.msg, want[i]);
		/* and in the exclusions (the fuzzer's find: {"exclude": [null]}) */
		e = (struct tg_err){ 0 };
		json_object_put(a);
		a = strs(LIST("10.0.0.1"));
		assert_true(ipam_pool_parse(a, x, "ipam", &pool, &n, &e) < 0);
		assert_contains(e.msg, "ipam.exclude[0] must be a string");
		json_object_put(a);
		json_object_put(x);
	}
}

static void t_pool_exactly_max(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.1.0.0-10.1.255.255"), NULL);
	assert_int_equal(p.n, IPAM_POOL_MAX);
	assert_int_equal(p.a[0], ip("10.1.0.0"));
	assert_int_equal(p.a[IPAM_POOL_MAX - 1], ip("10.1.255.255"));
	assert_sorted_unique(&p);
	pool_free(&p);
}

static void t_pool_max_plus_one(void **state)
{
	struct pool p;

	pool_parse(&p, LIST("10.1.0.0-10.1.255.255", "10.2.0.0"), NULL);
	assert_true(p.r < 0);
	assert_int_equal(p.e.code, CNI_ERR_CONFIG);
	assert_contains(p.e.msg, "ipam.addresses");
	assert_null(p.a);
}

static void t_pool_large_sorted_unique(void **state)
{
	struct pool p;

	pool_ok(&p, LIST("10.3.0.0/20", "10.1.0.0/18", "10.1.32.0-10.1.70.0", "10.3.0.5"),
		LIST("10.1.50.0/24"));
	assert_sorted_unique(&p);
	for (size_t i = 0; i < p.n; i++)
		assert_false(p.a[i] >= ip("10.1.50.0") && p.a[i] <= ip("10.1.50.255"));
	/*
	 * 10.1.0.1 .. 10.1.70.0 (the /18 loses 10.1.0.0; its broadcast 10.1.63.255 is
	 * inside the range) minus 256, plus 10.3.0.1 .. 10.3.15.254.
	 */
	assert_int_equal(p.n, (70 * 256 + 1 - 1) - 256 + 4094);
	assert_int_equal(p.a[0], ip("10.1.0.1"));
	assert_int_equal(p.a[p.n - 1], ip("10.3.15.254"));
	pool_free(&p);
}

/* ---------------- ipam_pool_to_ranges ---------------- */

static void assert_ranges(json_object *arr, const char *const *want)
{
	size_t n = 0;

	while (want[n])
		n++;
	assert_non_null(arr);
	assert_true(json_object_is_type(arr, json_type_array));
	if (json_object_array_length(arr) != n)
		fail_msg("%zu ranges, want %zu: %s", json_object_array_length(arr), n,
			 json_object_to_json_string(arr));
	for (size_t i = 0; i < n; i++)
		assert_string_equal(json_object_get_string(json_object_array_get_idx(arr, i)),
				    want[i]);
}

static void t_to_ranges_compacts(void **state)
{
	const uint32_t pool[] = { ip("10.1.0.1"), ip("10.1.0.2"), ip("10.1.0.3"),
				  ip("10.1.0.5"), ip("10.1.0.7"), ip("10.1.0.8") };
	json_object *r = ipam_pool_to_ranges(pool, 6);

	assert_ranges(r, LIST("10.1.0.1-10.1.0.3", "10.1.0.5-10.1.0.5", "10.1.0.7-10.1.0.8"));
	json_object_put(r);
}

/* Not an array (the config's reader refuses it first; any caller gets an error, not an abort). */
static void t_not_an_array(void **state)
{
	json_object *str = json_object_new_string("10.2.0.0/30"), *arr = json_object_new_array();
	struct tg_err e = { 0 };
	uint32_t *a = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(ipam_pool_parse(str, NULL, "ipam", &a, &n, &e), -EINVAL);
	assert_int_equal(e.code, CNI_ERR_CONFIG);
	assert_contains(e.msg, "ipam.addresses must be an array");
	memset(&e, 0, sizeof(e));
	assert_int_equal(ipam_pool_parse(arr, str, "ipam", &a, &n, &e), -EINVAL);
	assert_contains(e.msg, "ipam.exclude must be an array");
	json_object_put(str);
	json_object_put(arr);
}

static void t_to_ranges_empty(void **state)
{
	json_object *r = ipam_pool_to_ranges(NULL, 0);

	assert_non_null(r);
	assert_int_equal(json_object_array_length(r), 0);
	json_object_put(r);
}

static void t_to_ranges_across_octets_and_top(void **state)
{
	const uint32_t pool[] = { ip("10.1.0.255"), ip("10.1.1.0"), ip("255.255.255.254"),
				  ip("255.255.255.255") };
	json_object *r = ipam_pool_to_ranges(pool, 4);

	assert_ranges(r, LIST("10.1.0.255-10.1.1.0", "255.255.255.254-255.255.255.255"));
	json_object_put(r);
}

static void t_round_trip(void **state)
{
	struct pool p, q;
	json_object *r;

	pool_ok(&p, LIST("10.1.0.10-10.1.0.40", "10.1.0.64/28", "10.2.0.1", "10.1.0.42"),
		LIST("10.1.0.11", "10.1.0.70-10.1.0.72"));
	r = ipam_pool_to_ranges(p.a, p.n);
	assert_non_null(r);
	memset(&q, 0, sizeof(q));
	q.r = ipam_pool_parse(r, NULL, "state.pool", &q.a, &q.n, &q.e);
	assert_int_equal(q.r, 0);
	assert_int_equal(q.n, p.n);
	assert_memory_equal(q.a, p.a, p.n * sizeof(*p.a));
	json_object_put(r);
	pool_free(&p);
	pool_free(&q);
}

static void t_round_trip_max(void **state)
{
	struct pool p, q;
	json_object *r;

	pool_ok(&p, LIST("10.1.0.0-10.1.255.255"), NULL);
	r = ipam_pool_to_ranges(p.a, p.n);
	assert_ranges(r, LIST("10.1.0.0-10.1.255.255"));
	memset(&q, 0, sizeof(q));
	q.r = ipam_pool_parse(r, NULL, "state.pool", &q.a, &q.n, &q.e);
	assert_int_equal(q.r, 0);
	assert_int_equal(q.n, IPAM_POOL_MAX);
	assert_memory_equal(q.a, p.a, p.n * sizeof(*p.a));
	json_object_put(r);
	pool_free(&p);
	pool_free(&q);
}

static void t_round_trip_sparse(void **state)
{
	/* every other address: as many ranges as addresses */
	uint32_t *pool = malloc(1000 * sizeof(*pool));
	struct pool q;
	json_object *r;

	assert_non_null(pool);
	for (size_t i = 0; i < 1000; i++)
		pool[i] = ip("10.5.0.0") + 2 * (uint32_t)i;
	r = ipam_pool_to_ranges(pool, 1000);
	assert_int_equal(json_object_array_length(r), 1000);
	memset(&q, 0, sizeof(q));
	q.r = ipam_pool_parse(r, NULL, "state.pool", &q.a, &q.n, &q.e);
	assert_int_equal(q.r, 0);
	assert_int_equal(q.n, 1000);
	assert_memory_equal(q.a, pool, 1000 * sizeof(*pool));
	json_object_put(r);
	free(pool);
	pool_free(&q);
}

/* ---- the group ---- */

int main(void)
{
	ADD(t_ip4_parse_valid);
	ADD(t_ip4_parse_rejects);
	ADD(t_ip4_format);
	ADD(t_ip4_round_trip);
	ADD(t_cidr4_parse_valid);
	ADD(t_cidr4_parse_rejects);
	ADD(t_cidr4_helpers);
	ADD(t_pool_range);
	ADD(t_pool_range_single_address);
	ADD(t_pool_range_across_octets);
	ADD(t_pool_range_is_taken_whole);
	ADD(t_pool_single);
	ADD(t_pool_top_of_address_space);
	ADD(t_pool_cidr_drops_network_and_broadcast);
	ADD(t_pool_cidr_30);
	ADD(t_pool_cidr_29);
	ADD(t_pool_cidr_31_taken_whole);
	ADD(t_pool_cidr_32_is_one_address);
	ADD(t_pool_mixed_sorted);
	ADD(t_pool_duplicates_merged);
	ADD(t_pool_exclude_ip);
	ADD(t_pool_exclude_range);
	ADD(t_pool_exclude_cidr_whole);
	ADD(t_pool_exclude_outside_pool_is_harmless);
	ADD(t_pool_exclude_everything);
	ADD(t_pool_empty_and_null);
	ADD(t_pool_where_names_the_key);
	ADD(t_pool_exactly_max);
	ADD(t_pool_non_string_entries);
	ADD(t_pool_max_plus_one);
	ADD(t_pool_large_sorted_unique);
	ADD(t_to_ranges_compacts);
	ADD(t_to_ranges_empty);
	ADD(t_not_an_array);
	ADD(t_to_ranges_across_octets_and_top);
	ADD(t_round_trip);
	ADD(t_round_trip_max);
	ADD(t_round_trip_sparse);
	for (size_t i = 0; i < ARRAY_SIZE(bad_entries); i++)
		add_test(bad_entries[i].name, t_pool_bad, (void *)&bad_entries[i]);
	return run_group("pool");
}
