// SPDX-License-Identifier: Apache-2.0
/*
 * The pool from Azure IMDS: imds_parse_network on the recorded answers in
 * tests/fixtures/imds/ (read relative to the repo root, where tests/run.sh
 * runs; TG_FIXTURE_DIR overrides), and ipam_reconcile, which folds one
 * sync's addresses into the pool: the first sync takes all, a new address
 * joins only after two syncs in a row, a glitch never joins, and an address
 * that left the pool while in use stays with its pod (retired) and is never
 * handed out again.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/group.h"

#include "ipam/imds.h"
#include "ipam/ipam.h"
#include "ipam/pool.h"
#include "ipam/store.h"
#include "lib/ip4.h"
#include "tests/unit/helpers.h"

#define T0 1700000000000LL

/* The uplink of every fixture: IMDS writes it "000D3AF806EC". */
static const uint8_t UPLINK_MAC[6] = { 0x00, 0x0d, 0x3a, 0xf8, 0x06, 0xec };

/* ---- fixtures ---- */

/* Reads tests/fixtures/imds/NAME whole; *len gets its size. Caller frees. */
static char *fixture(const char *name, size_t *len)
{
	const char *dir = getenv("TG_FIXTURE_DIR");
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir && *dir ? dir : "tests/fixtures/imds", name);
	if (access(path, R_OK) != 0)
		fail_msg("cannot open fixture %s (run from the repository root, or set "
			 "TG_FIXTURE_DIR): %s",
			 path, strerror(errno));
	return slurp(path, len);
}

static int parse_fixture(const char *name, const uint8_t mac[6], struct imds_network *n,
			 struct tg_err *e)
{
	size_t len;
	char *body = fixture(name, &len);
	int r;

	memset(e, 0, sizeof(*e));
	r = imds_parse_network(body, len, mac, n, e);
	free(body);
	return r;
}

/* Asserts n's addresses are exactly `want` (dotted strings, ascending). */
static void assert_addrs(const struct imds_network *n, const char *const *want, size_t n_want)
{
	if (n->n_addrs != n_want) {
		char got[1024] = "";

		for (size_t i = 0; i < n->n_addrs && strlen(got) < sizeof(got) - 20; i++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got), " %s",
				 ip_str(n->addrs[i]));
		fail_msg("expected %zu addresses, got %zu:%s", n_want, n->n_addrs, got);
	}
	for (size_t i = 0; i < n_want; i++)
		if (n->addrs[i] != ip(want[i]))
			fail_msg("address %zu: expected %s, got %s", i, want[i],
				 ip_str(n->addrs[i]));
}

static void assert_subnet(const struct imds_network *n, const char *net, int prefix)
{
	char c[CIDR4_STRLEN];

	if (n->subnet.net != ip(net) || n->subnet.prefix != prefix)
		fail_msg("subnet: expected %s/%d, got %s", net, prefix,
			 cidr4_format(&n->subnet, c));
}

static void assert_node_ip(const struct imds_network *n, const char *want)
{
	if (n->node_ip != ip(want))
		fail_msg("node IP: expected %s, got %s", want, ip_str(n->node_ip));
	for (size_t i = 0; i < n->n_addrs; i++)
		if (n->addrs[i] == n->node_ip)
			fail_msg("the node's own address %s is among the pod addresses", want);
}

static void assert_ok(int r, const struct tg_err *e)
{
	if (r != 0)
		fail_msg("imds_parse_network: r=%d code=%d msg=%s", r, e->code, e->msg);
}

/* ---- imds_parse_network: good answers ---- */

static void t_parse_one_nic(void **state)
{
	static const char *const want[] = { "10.0.0.5", "10.0.0.6",  "10.0.0.7",  "10.0.0.8",
					    "10.0.0.9", "10.0.0.10", "10.0.0.11", "10.0.0.12" };
	struct imds_network n;
	struct tg_err e;

	assert_ok(parse_fixture("one_nic.json", UPLINK_MAC, &n, &e), &e);
	assert_node_ip(&n, "10.0.0.4");
	/* listed out of order in the answer: sorted */
	assert_addrs(&n, want, ARRAY_SIZE(want));
	assert_subnet(&n, "10.0.0.0", 24);
	imds_network_free(&n);
	assert_null(n.addrs);
	assert_int_equal(n.n_addrs, 0);
}

static void t_parse_three_nics_by_mac(void **state)
{
	static const char *const want[] = { "10.0.0.20", "10.0.0.21", "10.0.0.22" };
	struct imds_network n;
	struct tg_err e;

	/* the uplink's interface is the last of three */
	assert_ok(parse_fixture("three_nics.json", UPLINK_MAC, &n, &e), &e);
	assert_node_ip(&n, "10.0.0.4");
	assert_addrs(&n, want, ARRAY_SIZE(want));
	assert_subnet(&n, "10.0.0.0", 24);
	imds_network_free(&n);
}

static void t_parse_three_nics_other_mac(void **state)
{
	/* the second interface in the answer (first secondary NIC) */
	static const uint8_t mac[6] = { 0x00, 0x0d, 0x3a, 0xf8, 0x0a, 0x01 };
	static const char *const want[] = { "10.0.1.5", "10.0.1.6" };
	struct imds_network n;
	struct tg_err e;

	assert_ok(parse_fixture("three_nics.json", mac, &n, &e), &e);
	assert_node_ip(&n, "10.0.1.4");
	assert_addrs(&n, want, ARRAY_SIZE(want));
	assert_subnet(&n, "10.0.1.0", 26);
	imds_network_free(&n);
}

static void t_parse_ipv6_ignored(void **state)
{
	static const char *const want[] = { "10.0.0.5", "10.0.0.6" };
	struct imds_network n;
	struct tg_err e;

	assert_ok(parse_fixture("ipv6.json", UPLINK_MAC, &n, &e), &e);
	assert_node_ip(&n, "10.0.0.4");
	assert_addrs(&n, want, ARRAY_SIZE(want));
	assert_subnet(&n, "10.0.0.0", 24);
	imds_network_free(&n);
}

static void t_parse_prefix_string(void **state)
{
	static const char *const want[] = { "10.240.0.32", "10.240.0.33" };
	struct imds_network n;
	struct tg_err e;

	assert_ok(parse_fixture("prefix_string.json", UPLINK_MAC, &n, &e), &e);
	assert_node_ip(&n, "10.240.0.4");
	assert_addrs(&n, want, ARRAY_SIZE(want));
	assert_subnet(&n, "10.240.0.0", 24);
	imds_network_free(&n);
}

static void t_parse_mac_lowercase(void **state)
{
	struct imds_network n;
	struct tg_err e;

	assert_ok(parse_fixture("mac_lowercase.json", UPLINK_MAC, &n, &e), &e);
	assert_node_ip(&n, "10.0.0.4");
	assert_int_equal(n.n_addrs, 8);
	imds_network_free(&n);
}

/* Only the primary address: a valid answer with an empty pool of pod addresses. */
static void t_parse_primary_only(void **state)
{
	static const char body[] =
		"{\"interface\":[{\"ipv4\":{\"ipAddress\":[{\"privateIpAddress\":\"10.0.0.4\","
		"\"publicIpAddress\":\"\"}],\"subnet\":[{\"address\":\"10.0.0.0\",\"prefix\":\"24\"}]},"
		"\"ipv6\":{\"ipAddress\":[]},\"macAddress\":\"000D3AF806EC\"}]}";
	struct imds_network n;
	struct tg_err e = { 0 };

	assert_ok(imds_parse_network(body, strlen(body), UPLINK_MAC, &n, &e), &e);
	assert_int_equal(n.node_ip, ip("10.0.0.4"));
	assert_int_equal(n.n_addrs, 0);
	imds_network_free(&n);
}

/* The body is not NUL-terminated by curl's contract: only `len` bytes count. */
static void t_parse_honours_len(void **state)
{
	size_t len;
	char *body = fixture("one_nic.json", &len);
	char *big = malloc(len + 32);
	struct imds_network n;
	struct tg_err e = { 0 };

	assert_non_null(big);
	memcpy(big, body, len);
	memcpy(big + len, "GARBAGE AFTER THE DOCUMENT", 27);
	assert_ok(imds_parse_network(big, len, UPLINK_MAC, &n, &e), &e);
	assert_int_equal(n.n_addrs, 8);
	imds_network_free(&n);
	free(big);
	free(body);
}

/* A member twice is a refused answer (json-c would keep the last); another member is not. */
static void t_parse_member_twice(void **state)
{
	size_t len;
	char *body = fixture("one_nic.json", &len);
	char *doc = malloc(len + 32);
	struct imds_network n = { 0 };
	struct tg_err e = { 0 };
	const char *p = strchr(body, '{');

	(void)state;
	assert_non_null(doc);
	assert_non_null(p);
	snprintf(doc, len + 32, "{\"interface\":[],%s", p + 1);
	assert_true(imds_parse_network(doc, strlen(doc), UPLINK_MAC, &n, &e) < 0);
	assert_int_equal(e.code, CNI_ERR_IO);
	assert_contains(e.msg, "IMDS answer: interface is written twice");
	assert_null(n.addrs);
	snprintf(doc, len + 32, "{\"other\":[],%s", p + 1);
	assert_ok(imds_parse_network(doc, strlen(doc), UPLINK_MAC, &n, &e), &e);
	assert_int_equal(n.n_addrs, 8);
	imds_network_free(&n);
	free(doc);
	free(body);
}

/* Only whitespace may follow the document: json-c stops at a NUL byte, the parser does not. */
static void t_parse_trailing_data(void **state)
{
	size_t len;
	char *body = fixture("one_nic.json", &len);
	char *big = malloc(len + 32), at[32];
	struct imds_network n = { 0 };
	struct tg_err e = { 0 };

	assert_non_null(big);
	memcpy(big, body, len);
	memcpy(big + len, " \n\0GARBAGE", 11);
	assert_true(imds_parse_network(big, len + 11, UPLINK_MAC, &n, &e) < 0);
	assert_int_equal(e.code, CNI_ERR_IO);
	snprintf(at, sizeof(at), "trailing data at byte %zu", len + 2);
	assert_contains(e.msg, at);
	assert_null(n.addrs);
	memcpy(big + len, " \n\t\r", 4);
	assert_ok(imds_parse_network(big, len + 4, UPLINK_MAC, &n, &e), &e);
	assert_int_equal(n.n_addrs, 8);
	imds_network_free(&n);
	free(big);
	free(body);
}

/* ---- imds_parse_network: bad answers ---- */

struct bad_case {
	const char *name; /* the test's name */
	const char *file; /* fixture, or NULL for `body` */
	const char *body;
	const uint8_t *mac;	/* NULL: UPLINK_MAC */
	const char *needles[3]; /* the message must contain each (case-sensitive) */
};

static const uint8_t OTHER_MAC[6] = { 0x00, 0x0d, 0x3a, 0x00, 0x00, 0x99 };

static const struct bad_case bad_cases[] = {
	{ "parse_garbage_not_json", "garbage.json", NULL, NULL, { "JSON" } },
	{ "parse_truncated_json", "truncated.json", NULL, NULL, { "JSON" } },
	{ "parse_missing_subnet", "missing_subnet.json", NULL, NULL, { "subnet" } },
	{ "parse_empty_ipaddress_list",
	  "empty_ipaddress.json",
	  NULL,
	  NULL,
	  { "ipAddress", "empty" } },
	{ "parse_no_nic_with_uplink_mac",
	  "three_nics.json",
	  NULL,
	  OTHER_MAC,
	  { "000D3A000099", "MAC" } },
	{ "parse_empty_body", NULL, "", NULL, { "JSON" } },
	{ "parse_json_array_not_object", NULL, "[]", NULL, { "interface" } },
	{ "parse_no_interface_list", NULL, "{\"compute\":{}}", NULL, { "interface" } },
	{ "parse_empty_subnet_list",
	  NULL,
	  "{\"interface\":[{\"ipv4\":{\"ipAddress\":[{\"privateIpAddress\":\"10.0.0.4\"},"
	  "{\"privateIpAddress\":\"10.0.0.5\"}],\"subnet\":[]},\"macAddress\":\"000D3AF806EC\"}]}",
	  NULL,
	  { "subnet" } },
	{ "parse_subnet_without_prefix",
	  NULL,
	  "{\"interface\":[{\"ipv4\":{\"ipAddress\":[{\"privateIpAddress\":\"10.0.0.4\"},"
	  "{\"privateIpAddress\":\"10.0.0.5\"}],\"subnet\":[{\"address\":\"10.0.0.0\"}]},"
	  "\"macAddress\":\"000D3AF806EC\"}]}",
	  NULL,
	  { "prefix" } },
	{ "parse_prefix_out_of_range",
	  NULL,
	  "{\"interface\":[{\"ipv4\":{\"ipAddress\":[{\"privateIpAddress\":\"10.0.0.4\"},"
	  "{\"privateIpAddress\":\"10.0.0.5\"}],\"subnet\":[{\"address\":\"10.0.0.0\","
	  "\"prefix\":\"33\"}]},\"macAddress\":\"000D3AF806EC\"}]}",
	  NULL,
	  { "prefix" } },
	{ "parse_bad_private_ip",
	  NULL,
	  "{\"interface\":[{\"ipv4\":{\"ipAddress\":[{\"privateIpAddress\":\"10.0.0.4\"},"
	  "{\"privateIpAddress\":\"10.0.0.300\"}],\"subnet\":[{\"address\":\"10.0.0.0\","
	  "\"prefix\":\"24\"}]},\"macAddress\":\"000D3AF806EC\"}]}",
	  NULL,
	  { "10.0.0.300" } },
	{ "parse_no_ipv4",
	  NULL,
	  "{\"interface\":[{\"ipv6\":{\"ipAddress\":[]},\"macAddress\":\"000D3AF806EC\"}]}",
	  NULL,
	  { "ipAddress" } },
};

static void t_parse_bad(void **state)
{
	const struct bad_case *c = *state;
	struct imds_network n = { 0 };
	struct tg_err e = { 0 };
	int r;

	if (c->file) {
		r = parse_fixture(c->file, c->mac ? c->mac : UPLINK_MAC, &n, &e);
	} else {
		r = imds_parse_network(c->body, strlen(c->body), c->mac ? c->mac : UPLINK_MAC, &n,
				       &e);
	}
	if (r >= 0)
		fail_msg("%s: accepted (r=%d, %zu addresses)", c->name, r, n.n_addrs);
	assert_true(e.code != 0);
	if (strlen(e.msg) < 10)
		fail_msg("%s: message too short to help: \"%s\"", c->name, e.msg);
	for (size_t i = 0; i < ARRAY_SIZE(c->needles) && c->needles[i]; i++)
		assert_contains(e.msg, c->needles[i]);
	/* nothing handed back on failure */
	assert_null(n.addrs);
	assert_int_equal(n.n_addrs, 0);
}

/* ---- ipam_reconcile ---- */

/* A sorted array of dotted addresses (test helper; caller frees). */
static uint32_t *addrs_of(const char *const *s, size_t n)
{
	uint32_t *a = calloc(n + 1, sizeof(*a));

	assert_non_null(a);
	for (size_t i = 0; i < n; i++)
		a[i] = ip(s[i]);
	return a;
}

static bool pool_has(const struct ipam_state *st, const char *a)
{
	for (size_t i = 0; i < st->n_pool; i++)
		if (st->pool[i] == ip(a))
			return true;
	return false;
}

static bool pending_has(const struct ipam_state *st, const char *a)
{
	for (size_t i = 0; i < st->n_pending; i++)
		if (st->pending[i] == ip(a))
			return true;
	return false;
}

static void assert_pool_sorted_unique(const struct ipam_state *st)
{
	for (size_t i = 1; i < st->n_pool; i++)
		if (st->pool[i - 1] >= st->pool[i])
			fail_msg("pool not sorted/unique at %zu", i);
}

static void sync_list(struct ipam_state *st, const char *const *s, size_t n, int64_t now,
		      struct ipam_sync_report *rep)
{
	uint32_t *seen = addrs_of(s, n);
	struct tg_err e = { 0 };
	int r = ipam_reconcile(st, seen, n, now, rep, &e);

	if (r != 0)
		fail_msg("ipam_reconcile: r=%d code=%d msg=%s", r, e.code, e.msg);
	assert_pool_sorted_unique(st);
	free(seen);
}
#define SYNC(st, list, now, rep) sync_list((st), (list), ARRAY_SIZE(list), (now), (rep))

static const char *const BASE[] = { "10.0.0.5", "10.0.0.6", "10.0.0.7" };
static const char *const BASE_PLUS_8[] = { "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.8" };
static const char *const BASE_PLUS_9[] = { "10.0.0.5", "10.0.0.6", "10.0.0.7", "10.0.0.9" };
static const char *const BASE_MINUS_6[] = { "10.0.0.5", "10.0.0.7" };

static void req_for(struct ipam_attachment *req, const char *cid)
{
	memset(req, 0, sizeof(*req));
	snprintf(req->container_id, sizeof(req->container_id), "%s", cid);
	snprintf(req->ifname, sizeof(req->ifname), "eth0");
	snprintf(req->netns, sizeof(req->netns), "/var/run/netns/%s", cid);
	snprintf(req->k8s_namespace, sizeof(req->k8s_namespace), "default");
	snprintf(req->pod, sizeof(req->pod), "pod-%s", cid);
	snprintf(req->host_veth, sizeof(req->host_veth), "tg%012x", (unsigned)strlen(cid));
	req->created = T0 / 1000;
}

/* Assigns until the pool is exhausted; returns how many were handed out, and fails if `never` is one. */
static size_t fill(struct ipam_state *st, const char *prefix, int64_t now, const char *never)
{
	size_t n = 0;

	for (;;) {
		struct ipam_attachment req, got;
		struct tg_err e = { 0 };
		bool existing = false;
		char cid[64], a[IP4_STRLEN];

		snprintf(cid, sizeof(cid), "%s-%zu", prefix, n);
		req_for(&req, cid);
		if (ipam_assign(st, &req, now, 0, &got, &existing, &e) < 0) {
			assert_int_equal(e.code, CNI_ERR_TRY_AGAIN);
			return n;
		}
		assert_false(existing);
		if (never && got.ip == ip(never))
			fail_msg("%s handed out to %s", never, cid);
		if (!pool_has(st, ip4_format(got.ip, a)))
			fail_msg("%s handed out although not in the pool", a);
		if (++n > 1000)
			fail_msg("allocator never runs out");
	}
}

static void t_reconcile_first_sync_takes_all(void **state)
{
	struct ipam_state st;
	struct ipam_sync_report rep;

	ipam_state_init(&st);
	SYNC(&st, BASE, T0, &rep);
	assert_int_equal(st.n_pool, 3);
	for (size_t i = 0; i < ARRAY_SIZE(BASE); i++)
		assert_true(pool_has(&st, BASE[i]));
	assert_int_equal(st.n_pending, 0);
	assert_int_equal(rep.added, 3);
	assert_int_equal(rep.pending, 0);
	assert_int_equal(rep.removed, 0);
	assert_int_equal(rep.retired, 0);
	assert_string_equal(st.source, "imds");
	assert_int_equal(st.last_sync_ms, T0);
	/* usable at once */
	assert_int_equal(fill(&st, "a", T0, NULL), 3);
	ipam_state_free(&st);
}

static void t_reconcile_unchanged(void **state)
{
	struct ipam_state st;
	struct ipam_sync_report rep;

	ipam_state_init(&st);
	SYNC(&st, BASE, T0, &rep);
	SYNC(&st, BASE, T0 + 60000, &rep);
	assert_int_equal(st.n_pool, 3);
	assert_int_equal(st.n_pending, 0);
	assert_int_equal(rep.added, 0);
	assert_int_equal(rep.pending, 0);
	assert_int_equal(rep.removed, 0);
	assert_int_equal(rep.retired, 0);
	assert_int_equal(st.last_sync_ms, T0 + 60000);
	ipam_state_free(&st);
}

static void t_reconcile_new_address_needs_two_syncs(void **state)
{
	struct ipam_state st;
	struct ipam_sync_report rep;
	struct ipam_counts c;

	ipam_state_init(&st);
	SYNC(&st, BASE, T0, &rep);

	SYNC(&st, BASE_PLUS_8, T0 + 1000, &rep);
	assert_false(pool_has(&st, "10.0.0.8"));
	assert_true(pending_has(&st, "10.0.0.8"));
	assert_int_equal(st.n_pool, 3);
	assert_int_equal(rep.added, 0);
	assert_int_equal(rep.pending, 1);
	ipam_count(&st, T0 + 1000, 0, &c);
	assert_int_equal(c.pool, 3); /* pending is not in the pool */
	assert_int_equal(c.free, 3);
	/* not handed out while pending */
	assert_int_equal(fill(&st, "a", T0 + 1000, "10.0.0.8"), 3);

	SYNC(&st, BASE_PLUS_8, T0 + 2000, &rep);
	assert_true(pool_has(&st, "10.0.0.8"));
	assert_false(pending_has(&st, "10.0.0.8"));
	assert_int_equal(st.n_pending, 0);
	assert_int_equal(rep.added, 1);
	assert_int_equal(rep.pending, 0);
	assert_int_equal(st.n_pool, 4);
	/* and now it is the one free address */
	assert_int_equal(fill(&st, "b", T0 + 2000, NULL), 1);
	assert_non_null(ipam_find_ip(&st, ip("10.0.0.8")));
	assert_int_equal(st.last_sync_ms, T0 + 2000);
	ipam_state_free(&st);
}

static void t_reconcile_glitch_never_joins(void **state)
{
	struct ipam_state st;
	struct ipam_sync_report rep;

	ipam_state_init(&st);
	SYNC(&st, BASE, T0, &rep);
	SYNC(&st, BASE_PLUS_9, T0 + 1000, &rep); /* seen once ... */
	assert_true(pending_has(&st, "10.0.0.9"));
	SYNC(&st, BASE, T0 + 2000, &rep); /* ... then gone */
	assert_false(pool_has(&st, "10.0.0.9"));
	assert_false(pending_has(&st, "10.0.0.9"));
	assert_int_equal(st.n_pending, 0);
	assert_int_equal(rep.added, 0);
	assert_int_equal(rep.pending, 0);
	assert_int_equal(rep.removed, 0); /* it was never in the pool */
	/* seen again: pending again, the earlier sighting does not count */
	SYNC(&st, BASE_PLUS_9, T0 + 3000, &rep);
	assert_false(pool_has(&st, "10.0.0.9"));
	assert_true(pending_has(&st, "10.0.0.9"));
	assert_int_equal(rep.added, 0);
	assert_int_equal(fill(&st, "a", T0 + 3000, "10.0.0.9"), 3);
	ipam_state_free(&st);
}

/* Two different new addresses in successive syncs: neither joins. */
static void t_reconcile_alternating_glitches(void **state)
{
	struct ipam_state st;
	struct ipam_sync_report rep;

	ipam_state_init(&st);
	SYNC(&st, BASE, T0, &rep);
	SYNC(&st, BASE_PLUS_8, T0 + 1000, &rep);
	SYNC(&st, BASE_PLUS_9, T0 + 2000, &rep);
	assert_false(pool_has(&st, "10.0.0.8"));
	assert_false(pool_has(&st, "10.0.0.9"));
	assert_false(pending_has(&st, "10.0.0.8"));
	assert_true(pending_has(&st, "10.0.0.9"));
	assert_int_equal(rep.added, 0);
	ipam_state_free(&st);
}

static void t_reconcile_removed_free_address(void **state)
{
	struct ipam_state st;
	struct ipam_sync_report rep;
	struct ipam_counts c;

	ipam_state_init(&st);
	SYNC(&st, BASE, T0, &rep);
	SYNC(&st, BASE_MINUS_6, T0 + 1000, &rep); /* removal needs no confirmation */
	assert_false(pool_has(&st, "10.0.0.6"));
	assert_int_equal(st.n_pool, 2);
	assert_int_equal(rep.removed, 1);
	assert_int_equal(rep.retired, 0);
	ipam_count(&st, T0 + 1000, 0, &c);
	assert_int_equal(c.pool, 2);
	assert_int_equal(c.retired, 0);
	assert_int_equal(fill(&st, "a", T0 + 1000, "10.0.0.6"), 2);
	ipam_state_free(&st);
}

static void t_reconcile_removed_in_use_is_retired(void **state)
{
	struct ipam_state st;
	struct ipam_sync_report rep;
	struct ipam_attachment req, got;
	struct ipam_counts c;
	struct tg_err e = { 0 };
	bool existing;
	char held[IP4_STRLEN];
	const char *keep[2];
	size_t k = 0;

	ipam_state_init(&st);
	SYNC(&st, BASE, T0, &rep);
	req_for(&req, "victim");
	assert_int_equal(ipam_assign(&st, &req, T0, 0, &got, &existing, &e), 0);
	ip4_format(got.ip, held);
	for (size_t i = 0; i < ARRAY_SIZE(BASE); i++)
		if (strcmp(BASE[i], held) != 0)
			keep[k++] = BASE[i];
	assert_int_equal(k, 2);

	/* IMDS no longer lists the address the pod holds */
	SYNC(&st, keep, T0 + 1000, &rep);
	assert_int_equal(rep.removed, 1);
	assert_int_equal(rep.retired, 1);
	assert_false(pool_has(&st, held));
	/* the pod keeps it */
	assert_non_null(ipam_find(&st, "victim", "eth0"));
	assert_int_equal(ipam_find(&st, "victim", "eth0")->ip, ip(held));
	ipam_count(&st, T0 + 1000, 0, &c);
	assert_int_equal(c.pool, 2);
	assert_int_equal(c.retired, 1);
	assert_int_equal(c.allocated, 0);
	assert_int_equal(c.free, 2);
	/* a repeated ADD of the same pod still gets its address back */
	assert_int_equal(ipam_assign(&st, &req, T0 + 1000, 0, &got, &existing, &e), 0);
	assert_true(existing);
	assert_int_equal(got.ip, ip(held));

	/* another sync without it: still retired, not counted removed twice */
	SYNC(&st, keep, T0 + 2000, &rep);
	assert_int_equal(rep.removed, 0);
	ipam_count(&st, T0 + 2000, 0, &c);
	assert_int_equal(c.retired, 1);

	/* the pod goes: the address is never handed out again, cool-down or not */
	assert_int_equal(ipam_release(&st, "victim", "eth0", T0 + 3000, true, NULL), 1);
	ipam_count(&st, T0 + 3000, 0, &c);
	assert_int_equal(c.retired, 0);
	assert_int_equal(c.pool, 2);
	assert_int_equal(c.free, 2);
	assert_int_equal(fill(&st, "after", T0 + 100000, held), 2);
	ipam_state_free(&st);
}

/* A retired address that IMDS lists again is a new address: two syncs before it is back. */
static void t_reconcile_retired_comes_back(void **state)
{
	struct ipam_state st;
	struct ipam_sync_report rep;
	struct ipam_attachment req, got;
	struct tg_err e = { 0 };
	bool existing;
	struct ipam_counts c;

	ipam_state_init(&st);
	SYNC(&st, BASE, T0, &rep);
	req_for(&req, "p");
	assert_int_equal(ipam_assign(&st, &req, T0, 0, &got, &existing, &e), 0);
	{
		const char *keep[2];
		size_t k = 0;
		char held[IP4_STRLEN];

		ip4_format(got.ip, held);
		for (size_t i = 0; i < ARRAY_SIZE(BASE); i++)
			if (strcmp(BASE[i], held) != 0)
				keep[k++] = BASE[i];
		SYNC(&st, keep, T0 + 1000, &rep);
	}
	SYNC(&st, BASE, T0 + 2000, &rep);
	assert_int_equal(rep.pending, 1);
	assert_int_equal(st.n_pool, 2);
	SYNC(&st, BASE, T0 + 3000, &rep);
	assert_int_equal(st.n_pool, 3);
	assert_int_equal(rep.added, 1);
	ipam_count(&st, T0 + 3000, 0, &c);
	assert_int_equal(c.retired, 0);
	assert_int_equal(c.allocated, 1);
	ipam_state_free(&st);
}

/* reconcile touches neither attachments nor the cool-down records. */
static void t_reconcile_keeps_attachments(void **state)
{
	struct ipam_state st;
	struct ipam_sync_report rep;
	struct ipam_attachment req, got;
	struct tg_err e = { 0 };
	bool existing;

	ipam_state_init(&st);
	SYNC(&st, BASE, T0, &rep);
	req_for(&req, "x");
	assert_int_equal(ipam_assign(&st, &req, T0, 0, &got, &existing, &e), 0);
	req_for(&req, "y");
	assert_int_equal(ipam_assign(&st, &req, T0, 0, &got, &existing, &e), 0);
	assert_int_equal(ipam_release(&st, "y", "eth0", T0 + 10, true, NULL), 1);
	SYNC(&st, BASE_PLUS_8, T0 + 1000, &rep);
	SYNC(&st, BASE_MINUS_6, T0 + 2000, &rep);
	assert_int_equal(st.n_att, 1);
	assert_string_equal(st.att[0].container_id, "x");
	assert_int_equal(st.n_cooling, 1);
	ipam_state_free(&st);
}

/* The header does not ask callers for a sorted list: an unsorted one gives the same pool. */
static void t_reconcile_unsorted_input(void **state)
{
	static const char *const shuffled[] = { "10.0.0.7", "10.0.0.5", "10.0.0.6" };
	static const char *const shuffled_minus_6[] = { "10.0.0.7", "10.0.0.5" };
	struct ipam_state st;
	struct ipam_sync_report rep;

	ipam_state_init(&st);
	SYNC(&st, shuffled, T0, &rep);
	assert_int_equal(st.n_pool, 3);
	SYNC(&st, shuffled, T0 + 1000, &rep);
	assert_int_equal(rep.removed, 0);
	assert_int_equal(st.n_pool, 3);
	SYNC(&st, shuffled_minus_6, T0 + 2000, &rep);
	assert_int_equal(rep.removed, 1);
	assert_int_equal(st.n_pool, 2);
	assert_false(pool_has(&st, "10.0.0.6"));
	ipam_state_free(&st);
}

/* From the fixture to the pool, as `tollgate-ipam sync` does it. */
static void t_fixture_to_pool(void **state)
{
	struct imds_network n;
	struct ipam_state st;
	struct ipam_sync_report rep;
	struct tg_err e;

	assert_ok(parse_fixture("one_nic.json", UPLINK_MAC, &n, &e), &e);
	ipam_state_init(&st);
	assert_int_equal(ipam_reconcile(&st, n.addrs, n.n_addrs, T0, &rep, &e), 0);
	assert_int_equal(st.n_pool, 8);
	assert_int_equal(rep.added, 8);
	assert_false(pool_has(&st, "10.0.0.4"));
	assert_int_equal(fill(&st, "f", T0, "10.0.0.4"), 8);
	imds_network_free(&n);
	ipam_state_free(&st);
}

/* pending, node IP and subnet survive the store's JSON round trip */
static void t_pending_round_trip(void **state)
{
	struct ipam_state st, back;
	struct ipam_sync_report rep;
	struct tg_err e = { 0 };
	json_object *j;

	ipam_state_init(&st);
	SYNC(&st, BASE, T0, &rep);
	SYNC(&st, BASE_PLUS_8, T0 + 1000, &rep);
	st.node_ip = ip("10.0.0.4");
	assert_int_equal(cidr4_parse("10.0.0.0/24", &st.subnet), 0);
	snprintf(st.boot_id, sizeof(st.boot_id), "b");
	j = ipam_state_to_json(&st);
	assert_non_null(j);
	ipam_state_init(&back);
	if (ipam_state_from_json(j, &back, &e) != 0)
		fail_msg("from_json: %s", e.msg);
	json_object_put(j);
	assert_int_equal(back.n_pool, 3);
	assert_int_equal(back.n_pending, 1);
	assert_int_equal(back.pending[0], ip("10.0.0.8"));
	assert_int_equal(back.node_ip, ip("10.0.0.4"));
	assert_int_equal(back.subnet.net, ip("10.0.0.0"));
	assert_int_equal(back.subnet.prefix, 24);
	assert_string_equal(back.source, "imds");
	assert_int_equal(back.last_sync_ms, T0 + 1000);
	/* the pending address joins on the next sync after a reload */
	SYNC(&back, BASE_PLUS_8, T0 + 2000, &rep);
	assert_int_equal(rep.added, 1);
	assert_true(pool_has(&back, "10.0.0.8"));
	ipam_state_free(&st);
	ipam_state_free(&back);
}

int main(void)
{
	ADD(t_parse_one_nic);
	ADD(t_parse_three_nics_by_mac);
	ADD(t_parse_three_nics_other_mac);
	ADD(t_parse_ipv6_ignored);
	ADD(t_parse_prefix_string);
	ADD(t_parse_mac_lowercase);
	ADD(t_parse_primary_only);
	ADD(t_parse_honours_len);
	ADD(t_parse_trailing_data);
	ADD(t_parse_member_twice);
	for (size_t i = 0; i < ARRAY_SIZE(bad_cases); i++)
		add_test(bad_cases[i].name, t_parse_bad, (void *)&bad_cases[i]);
	ADD(t_reconcile_first_sync_takes_all);
	ADD(t_reconcile_unchanged);
	ADD(t_reconcile_new_address_needs_two_syncs);
	ADD(t_reconcile_glitch_never_joins);
	ADD(t_reconcile_alternating_glitches);
	ADD(t_reconcile_removed_free_address);
	ADD(t_reconcile_removed_in_use_is_retired);
	ADD(t_reconcile_retired_comes_back);
	ADD(t_reconcile_keeps_attachments);
	ADD(t_reconcile_unsorted_input);
	ADD(t_fixture_to_pool);
	ADD(t_pending_round_trip);
	return run_group("imds");
}
