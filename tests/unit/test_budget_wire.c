// SPDX-License-Identifier: Apache-2.0
/*
 * The /v1/ wire format of cluster budgets: a report and an answer written
 * and read back are the same; every document the parsers refuse (too big,
 * not JSON, another version, a member missing, twice, of the wrong type or
 * out of range, a bad name, a namespace twice in one direction, too many
 * entries) is refused with CNI_ERR_DECODE and a message that names the
 * member and its index. A budget's direction round trips; an entry without
 * one (what a peer that predates directions writes) is egress.
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

#include "budget/budget.h"
#include "tests/unit/helpers.h"

/* ---- documents ---- */

struct member {
	const char *key, *val;
};

/* The header's example, one member per line, as the agent writes them. */
static const struct member REPORT_TOP[] = {
	{ "version", "1" },
	{ "node", "\"n1\"" },
	{ "seq", "42" },
	{ "budgets", NULL },
};
static const struct member USAGE[] = {
	{ "namespace", "\"datasets\"" }, { "sentBytes", "1250000" },
	{ "intervalMs", "1000" },	 { "saturated", "true" },
	{ "applied", "1250000" },	 { "limit", "125000000" },
	{ "state", "\"granted\"" },	 { "pods", "3" },
	{ "safeShare", "900000" },	 { "nodes", "6" },
};
static const struct member ANSWER_TOP[] = {
	{ "version", "1" },
	{ "leaseMs", "10000" },
	{ "grants", NULL },
};
static const struct member GRANT[] = {
	{ "namespace", "\"datasets\"" },
	{ "grant", "1500000" },
	{ "safeShare", "900000" },
	{ "nodes", "6" },
};

/*
 * An object of members, key's value replaced by val (NULL: key left out;
 * a key not in the list is added at the end); the NULL-valued member is the
 * array `inner`.
 */
static void object(char *out, size_t size, const struct member *m, size_t n, const char *key,
		   const char *val, const char *inner)
{
	size_t len = 0;
	bool found = false;

	len += (size_t)snprintf(out + len, size - len, "{");
	for (size_t i = 0; i < n; i++) {
		const char *v = m[i].val ? m[i].val : inner;

		if (key && strcmp(key, m[i].key) == 0) {
			found = true;
			if (!val)
				continue;
			v = val;
		}
		len += (size_t)snprintf(out + len, size - len, "%s\"%s\":%s", len > 1 ? "," : "",
					m[i].key, v);
	}
	if (key && !found && val)
		len += (size_t)snprintf(out + len, size - len, "%s\"%s\":%s", len > 1 ? "," : "",
					key, val);
	snprintf(out + len, size - len, "}");
}

#define DOC_MAX 8192

/*
 * A report of two budgets ("datasets" and "web"), with one change: at the
 * top (where 't') or in budgets[1] (where 'u').
 */
static char *report_with(char where, const char *key, const char *val)
{
	char *doc = malloc(DOC_MAX), u0[1024], u1[1024], arr[2100];

	assert_non_null(doc);
	object(u0, sizeof(u0), USAGE, ARRAY_SIZE(USAGE), NULL, NULL, NULL);
	object(u1, sizeof(u1), USAGE, ARRAY_SIZE(USAGE), "namespace", "\"web\"", NULL);
	if (where == 'u') {
		char tmp[1024];

		object(tmp, sizeof(tmp), USAGE, ARRAY_SIZE(USAGE), key, val, NULL);
		/* budgets[1] is "web" unless the case is about its namespace */
		if (strcmp(key, "namespace") != 0) {
			char *ns = strstr(tmp, "\"datasets\"");

			if (ns) {
				memmove(ns + 5, ns + 10, strlen(ns + 10) + 1);
				memcpy(ns, "\"web\"", 5);
			}
		}
		snprintf(u1, sizeof(u1), "%s", tmp);
	}
	snprintf(arr, sizeof(arr), "[%s,%s]", u0, u1);
	object(doc, DOC_MAX, REPORT_TOP, ARRAY_SIZE(REPORT_TOP), where == 't' ? key : NULL, val,
	       arr);
	return doc;
}

static char *answer_with(char where, const char *key, const char *val)
{
	char *doc = malloc(DOC_MAX), g0[512], g1[512], arr[1100];

	assert_non_null(doc);
	object(g0, sizeof(g0), GRANT, ARRAY_SIZE(GRANT), NULL, NULL, NULL);
	object(g1, sizeof(g1), GRANT, ARRAY_SIZE(GRANT), "namespace", "\"web\"", NULL);
	if (where == 'g') {
		if (strcmp(key, "namespace") == 0) {
			object(g1, sizeof(g1), GRANT, ARRAY_SIZE(GRANT), key, val, NULL);
		} else {
			char tmp[512];

			object(tmp, sizeof(tmp), GRANT, ARRAY_SIZE(GRANT), key, val, NULL);
			snprintf(g1, sizeof(g1), "{\"namespace\":\"web\",%s", strchr(tmp, ',') + 1);
		}
	}
	snprintf(arr, sizeof(arr), "[%s,%s]", g0, g1);
	object(doc, DOC_MAX, ANSWER_TOP, ARRAY_SIZE(ANSWER_TOP), where == 'a' ? key : NULL, val,
	       arr);
	return doc;
}

/* ---- round trips ---- */

static struct budget_usage usage(const char *ns, uint64_t sent, bool sat, enum budget_state st)
{
	struct budget_usage u = { .sent_bytes = sent,
				  .interval_ms = 1000,
				  .saturated = sat,
				  .applied = 1250000,
				  .limit = 125000000,
				  .state = st,
				  .pods = 3,
				  .safe_share = 900000,
				  .nodes = 6 };

	snprintf(u.ns, sizeof(u.ns), "%s", ns);
	return u;
}

static void assert_usage_equal(const struct budget_usage *a, const struct budget_usage *b)
{
	assert_string_equal(a->ns, b->ns);
	assert_int_equal(a->dir, b->dir);
	assert_int_equal(a->sent_bytes, b->sent_bytes);
	assert_int_equal(a->interval_ms, b->interval_ms);
	assert_int_equal(a->saturated, b->saturated);
	assert_int_equal(a->applied, b->applied);
	assert_int_equal(a->limit, b->limit);
	assert_int_equal(a->state, b->state);
	assert_int_equal(a->pods, b->pods);
	assert_int_equal(a->safe_share, b->safe_share);
	assert_int_equal(a->nodes, b->nodes);
}

static void t_report_round_trip(void **state)
{
	struct budget_usage use[3] = {
		usage("datasets", 1250000, true, BUDGET_GRANTED),
		usage("web", UINT64_MAX, false, BUDGET_LEASE_EXPIRED),
		usage("batch-jobs-2", 0, false, BUDGET_FALLBACK),
	};
	struct budget_report r = { .seq = UINT64_MAX, .use = use, .n = 3 }, back;
	struct tg_err e = { 0 };
	size_t len;
	char *text;

	snprintf(r.node, sizeof(r.node), "aks-nodepool1-12345678-vmss00000a.internal");
	use[1].applied = use[1].limit = use[1].safe_share = BUDGET_RATE_MAX;
	use[1].pods = BUDGET_PODS_MAX;
	use[1].nodes = BUDGET_NODES_MAX;
	use[1].interval_ms = BUDGET_INTERVAL_MAX_MS;
	use[2].interval_ms = 0;
	use[2].safe_share = use[2].nodes = 0;
	assert_int_equal(budget_report_build(&r, &text, &len), 0);
	assert_int_equal(strlen(text), len);
	assert_int_equal(budget_report_parse(text, len, &back, &e), 0);
	assert_string_equal(back.node, r.node);
	assert_int_equal(back.seq, UINT64_MAX);
	assert_int_equal(back.n, 3);
	for (size_t i = 0; i < 3; i++)
		assert_usage_equal(&back.use[i], &use[i]);
	budget_report_free(&back);
	assert_null(back.use);
	free(text);
}

/* The header documents the format by example: the builder writes exactly that. */
static void t_report_is_written_as_documented(void **state)
{
	struct budget_usage u = usage("datasets", 1250000, true, BUDGET_GRANTED);
	struct budget_report r = { .node = "n1", .seq = 42, .use = &u, .n = 1 };
	char *text;

	assert_int_equal(budget_report_build(&r, &text, NULL), 0);
	assert_string_equal(text, "{\"version\":1,\"node\":\"n1\",\"seq\":42,"
				  "\"budgets\":[{\"namespace\":\"datasets\",\"sentBytes\":1250000,"
				  "\"intervalMs\":1000,\"saturated\":true,\"applied\":1250000,"
				  "\"limit\":125000000,\"state\":\"granted\",\"pods\":3,"
				  "\"safeShare\":900000,\"nodes\":6}]}");
	free(text);
}

static void t_answer_round_trip(void **state)
{
	struct budget_grant g[2] = {
		{ .ns = "datasets", .grant = 1500000, .safe_share = 900000, .nodes = 6 },
		{ .ns = "web",
		  .grant = BUDGET_RATE_MAX,
		  .safe_share = 1,
		  .nodes = BUDGET_NODES_MAX },
	};
	struct budget_answer a = { .lease_ms = 10000, .g = g, .n = 2 }, back;
	struct tg_err e = { 0 };
	size_t len;
	char *text;

	assert_int_equal(budget_answer_build(&a, &text, &len), 0);
	assert_string_equal(text, "{\"version\":1,\"leaseMs\":10000,\"grants\":["
				  "{\"namespace\":\"datasets\",\"grant\":1500000,"
				  "\"safeShare\":900000,\"nodes\":6},"
				  "{\"namespace\":\"web\",\"grant\":4000000000,\"safeShare\":1,"
				  "\"nodes\":1000000}]}");
	assert_int_equal(budget_answer_parse(text, len, &back, &e), 0);
	assert_int_equal(back.lease_ms, 10000);
	assert_int_equal(back.next_report_ms, 0);
	assert_int_equal(back.n, 2);
	for (size_t i = 0; i < 2; i++) {
		assert_string_equal(back.g[i].ns, g[i].ns);
		assert_int_equal(back.g[i].grant, g[i].grant);
		assert_int_equal(back.g[i].safe_share, g[i].safe_share);
		assert_int_equal(back.g[i].nodes, g[i].nodes);
	}
	budget_answer_free(&back);
	free(text);
	/* an early report asked for: written after the lease, read back; absent is none */
	a.next_report_ms = 260;
	assert_int_equal(budget_answer_build(&a, &text, &len), 0);
	assert_non_null(strstr(text, "{\"version\":1,\"leaseMs\":10000,\"nextReportMs\":260,"));
	assert_int_equal(budget_answer_parse(text, len, &back, &e), 0);
	assert_int_equal(back.next_report_ms, 260);
	budget_answer_free(&back);
	free(text);
}

static void t_empty_documents_round_trip(void **state)
{
	struct budget_report r = { .node = "n1" }, rb;
	struct budget_answer a = { .lease_ms = 1 }, ab;
	struct tg_err e = { 0 };
	size_t len;
	char *text;

	assert_int_equal(budget_report_build(&r, &text, &len), 0);
	assert_int_equal(budget_report_parse(text, len, &rb, &e), 0);
	assert_int_equal(rb.n, 0);
	budget_report_free(&rb);
	free(text);
	assert_int_equal(budget_answer_build(&a, &text, &len), 0);
	assert_int_equal(budget_answer_parse(text, len, &ab, &e), 0);
	assert_int_equal(ab.n, 0);
	budget_answer_free(&ab);
	free(text);
	/* the free functions take what they were given, twice or NULL */
	budget_report_free(&rb);
	budget_report_free(NULL);
	budget_answer_free(NULL);
}

/* A struct filled by hand with a quote in a name still makes JSON (that the parser refuses). */
static void t_build_escapes_what_the_parser_refuses(void **state)
{
	struct budget_report r = { .node = "n\"1\\\n" }, back;
	struct tg_err e = { 0 };
	size_t len;
	char *text;

	assert_int_equal(budget_report_build(&r, &text, &len), 0);
	assert_contains(text, "\"node\":\"n\\\"1\\\\\\u000a\"");
	assert_int_equal(budget_report_parse(text, len, &back, &e), -EINVAL);
	assert_contains(e.msg, "node: ");
	free(text);
}

static void t_unknown_members_are_ignored(void **state)
{
	const char *text = " {\"version\":1,\"future\":{\"x\":[1,2,{\"y\":null}]},\"node\":\"n1\","
			   "\"seq\":0,\"budgets\":[{\"namespace\":\"a\",\"sentBytes\":0,"
			   "\"intervalMs\":0,\"saturated\":false,\"applied\":0,\"limit\":0,"
			   "\"state\":\"fallback\",\"pods\":0,\"safeShare\":0,\"nodes\":0,"
			   "\"rttMs\":1.5,\"note\":\"\\u00e9\"}]}\r\n\t ";
	struct budget_report r;
	struct tg_err e = { 0 };

	assert_int_equal(budget_report_parse(text, strlen(text), &r, &e), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.use[0].ns, "a");
	assert_int_equal(r.use[0].state, BUDGET_FALLBACK);
	budget_report_free(&r);
}

/*
 * The largest of everything: 512 budgets of 63-character names from a
 * 253-character node, each a download's (the longer entry).
 */
static void t_largest_report_parses(void **state)
{
	struct budget_usage *use = calloc(BUDGET_PER_REPORT_MAX, sizeof(*use));
	struct budget_report r = { .use = use, .n = BUDGET_PER_REPORT_MAX }, back;
	struct tg_err e = { 0 };
	size_t len;
	char *text;

	assert_non_null(use);
	for (size_t i = 0; i < BUDGET_NODE_MAX; i++)
		r.node[i] = i % 64 == 63 ? '.' : (char)('a' + i % 26);
	for (size_t i = 0; i < BUDGET_PER_REPORT_MAX; i++) {
		use[i] = usage("x", UINT64_MAX, true, BUDGET_GRANTED);
		memset(use[i].ns, 'z', BUDGET_NS_MAX);
		snprintf(use[i].ns, sizeof(use[i].ns), "%03zu", i);
		use[i].ns[3] = 'z';
		use[i].dir = BUDGET_INGRESS;
	}
	assert_int_equal(budget_report_build(&r, &text, &len), 0);
	assert_true(len <= BUDGET_BODY_MAX);
	assert_int_equal(budget_report_parse(text, len, &back, &e), 0);
	assert_int_equal(back.n, BUDGET_PER_REPORT_MAX);
	assert_int_equal(strlen(back.use[255].ns), BUDGET_NS_MAX);
	assert_int_equal(strlen(back.node), BUDGET_NODE_MAX);
	budget_report_free(&back);
	free(text);
	free(use);
}

static void t_state_names(void **state)
{
	assert_string_equal(budget_state_names[BUDGET_FALLBACK], "fallback");
	assert_string_equal(budget_state_names[BUDGET_GRANTED], "granted");
	assert_string_equal(budget_state_names[BUDGET_LEASE_EXPIRED], "lease-expired");
}

/* ---- what the parsers refuse ---- */

struct bad {
	const char *name;
	char doc;	       /* 'r' a report, 'a' an answer */
	char where;	       /* 't' top of a report, 'u' its budgets[1]; 'a', 'g' the answer's */
	const char *key, *val; /* the change; val NULL: the member left out */
	int err;
	const char *msg; /* in the message */
};

static const struct bad bad_cases[] = {
	{ "a report of another version is refused as a protocol error", 'r', 't', "version", "2",
	  -EPROTO, "version: 2 is not a version this side speaks (1)" },
	{ "a report of version 0 is refused as a protocol error", 'r', 't', "version", "0", -EPROTO,
	  "version: 0" },
	{ "a report without a version is refused", 'r', 't', "version", NULL, -EINVAL,
	  "version: missing" },
	{ "a version written as a string is refused", 'r', 't', "version", "\"1\"", -EINVAL,
	  "version: must be an integer, not a string" },
	{ "a report without a node name is refused", 'r', 't', "node", NULL, -EINVAL,
	  "node: missing" },
	{ "a node name that is a number is refused", 'r', 't', "node", "7", -EINVAL,
	  "node: must be a string, not an integer" },
	{ "a node name in capitals is refused", 'r', 't', "node", "\"Node-1\"", -EINVAL,
	  "node: \"Node-1\" is not a node name" },
	{ "a node name starting with a dash is refused", 'r', 't', "node", "\"-n1\"", -EINVAL,
	  "node: \"-n1\"" },
	{ "a node name with an empty label is refused", 'r', 't', "node", "\"a..b\"", -EINVAL,
	  "node: \"a..b\"" },
	{ "a node name ending in a dot is refused", 'r', 't', "node", "\"n1.\"", -EINVAL,
	  "node: \"n1.\"" },
	{ "an empty node name is refused", 'r', 't', "node", "\"\"", -EINVAL, "node: \"\"" },
	{ "a node name with a NUL byte is refused", 'r', 't', "node", "\"n\\u0000x\"", -EINVAL,
	  "node: \"n?x\"" },
	{ "a node name with a space is refused", 'r', 't', "node", "\"n 1\"", -EINVAL,
	  "node: \"n 1\"" },
	{ "a negative seq is refused", 'r', 't', "seq", "-1", -ERANGE, "seq: -1 is negative" },
	{ "a fractional seq is refused", 'r', 't', "seq", "1.5", -EINVAL,
	  "seq: must be an integer, not a fraction" },
	{ "a seq beyond 64 bits is refused, not rounded down", 'r', 't', "seq",
	  "18446744073709551616", -ERANGE, "18446744073709551616 does not fit 64 bits" },
	{ "a report without budgets is refused", 'r', 't', "budgets", NULL, -EINVAL,
	  "budgets: missing" },
	{ "budgets that are an object are refused", 'r', 't', "budgets", "{}", -EINVAL,
	  "budgets: must be an array, not an object" },
	{ "a budget that is not an object is refused", 'r', 't', "budgets", "[{},3]", -EINVAL,
	  "budgets[1]: must be an object, not an integer" },
	{ "a budget without a namespace is refused", 'r', 'u', "namespace", NULL, -EINVAL,
	  "budgets[1].namespace: missing" },
	{ "a namespace in capitals is refused", 'r', 'u', "namespace", "\"Web\"", -EINVAL,
	  "budgets[1].namespace: \"Web\" is not a namespace" },
	{ "a namespace with a dot is refused", 'r', 'u', "namespace", "\"a.b\"", -EINVAL,
	  "budgets[1].namespace: \"a.b\"" },
	{ "a namespace of 64 characters is refused", 'r', 'u', "namespace",
	  "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", -EINVAL,
	  "budgets[1].namespace: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\"" },
	{ "the same namespace twice is refused", 'r', 'u', "namespace", "\"datasets\"", -EINVAL,
	  "budgets[1].namespace: \"datasets\" again (budgets[0] has it)" },
	{ "negative sentBytes are refused", 'r', 'u', "sentBytes", "-1", -ERANGE,
	  "budgets[1].sentBytes: -1 is negative" },
	{ "sentBytes beyond 64 bits are refused", 'r', 'u', "sentBytes",
	  "123456789012345678901234567890", -ERANGE, "does not fit 64 bits" },
	{ "sentBytes written as a string are refused", 'r', 'u', "sentBytes", "\"5\"", -EINVAL,
	  "budgets[1].sentBytes: must be an integer, not a string" },
	{ "an interval over an hour is refused", 'r', 'u', "intervalMs", "3600001", -ERANGE,
	  "budgets[1].intervalMs: 3600001 is more than 3600000" },
	{ "saturated written as a string is refused", 'r', 'u', "saturated", "\"yes\"", -EINVAL,
	  "budgets[1].saturated: must be true or false, not a string" },
	{ "saturated written as a number is refused", 'r', 'u', "saturated", "1", -EINVAL,
	  "budgets[1].saturated: must be true or false, not an integer" },
	{ "an applied ceil over 32 Gbit/s is refused", 'r', 'u', "applied", "4000000001", -ERANGE,
	  "budgets[1].applied: 4000000001 is more than 4000000000" },
	{ "an applied ceil of null is refused", 'r', 'u', "applied", "null", -EINVAL,
	  "budgets[1].applied: must be an integer, not null" },
	{ "a negative applied ceil is refused", 'r', 'u', "applied", "-5", -ERANGE,
	  "budgets[1].applied: -5 is negative" },
	{ "a limit over 32 Gbit/s is refused", 'r', 'u', "limit", "9223372036854775807", -ERANGE,
	  "budgets[1].limit: 9223372036854775807 is more than 4000000000" },
	{ "a limit in exponent notation is refused", 'r', 'u', "limit", "1e6", -EINVAL,
	  "budgets[1].limit: must be an integer, not a fraction" },
	{ "an unknown state is refused", 'r', 'u', "state", "\"expired\"", -EINVAL,
	  "budgets[1].state: \"expired\" is not one of fallback, granted, lease-expired" },
	{ "a state in capitals is refused", 'r', 'u', "state", "\"GRANTED\"", -EINVAL,
	  "budgets[1].state: \"GRANTED\"" },
	{ "a state that is an array is refused", 'r', 'u', "state", "[]", -EINVAL,
	  "budgets[1].state: must be a string, not an array" },
	{ "more than 65535 pods are refused", 'r', 'u', "pods", "65536", -ERANGE,
	  "budgets[1].pods: 65536 is more than 65535" },
	{ "a safe share over 32 Gbit/s is refused", 'r', 'u', "safeShare", "4294967296", -ERANGE,
	  "budgets[1].safeShare: 4294967296 is more than 4000000000" },
	{ "more than a million nodes are refused", 'r', 'u', "nodes", "1000001", -ERANGE,
	  "budgets[1].nodes: 1000001 is more than 1000000" },
	{ "a budget without its pods is refused", 'r', 'u', "pods", NULL, -EINVAL,
	  "budgets[1].pods: missing" },
	{ "a member twice at the top is refused", 'r', 't', "seq", "1,\"seq\":2", -EINVAL,
	  "the document: a member written twice" },
	{ "a member twice in a budget is refused", 'r', 'u', "applied", "1,\"applied\":1", -EINVAL,
	  "budgets[1]: a member written twice" },
	{ "a member twice in an unknown object is refused", 'r', 't', "x", "{\"a\":1,\"a\":1}",
	  -EINVAL, "x: a member written twice" },
	{ "the same name twice, once escaped, is a member twice", 'r', 'u', "pods",
	  "1,\"p\\u006fds\":1", -EINVAL, "budgets[1]: a member written twice" },
	{ "an answer of another version is refused as a protocol error", 'a', 'a', "version", "3",
	  -EPROTO, "version: 3 is not a version" },
	{ "a lease of 0 is refused", 'a', 'a', "leaseMs", "0", -ERANGE, "leaseMs: 0" },
	{ "a lease over an hour is refused", 'a', 'a', "leaseMs", "3600001", -ERANGE,
	  "leaseMs: 3600001 is more than 3600000" },
	{ "a negative lease is refused", 'a', 'a', "leaseMs", "-10000", -ERANGE,
	  "leaseMs: -10000 is negative" },
	{ "an early report asked for as a string is refused", 'a', 'a', "nextReportMs", "\"soon\"",
	  -EINVAL, "nextReportMs: must be an integer, not a string" },
	{ "an early report asked for in the past is refused", 'a', 'a', "nextReportMs", "-1",
	  -ERANGE, "nextReportMs: -1 is negative" },
	{ "an early report asked for over an hour on is refused", 'a', 'a', "nextReportMs",
	  "3600001", -ERANGE, "nextReportMs: 3600001 is more than 3600000" },
	{ "an answer without grants is refused", 'a', 'a', "grants", NULL, -EINVAL,
	  "grants: missing" },
	{ "a grant over 32 Gbit/s is refused", 'a', 'g', "grant", "4000000001", -ERANGE,
	  "grants[1].grant: 4000000001 is more than 4000000000" },
	{ "a grant written as a fraction is refused", 'a', 'g', "grant", "1.0", -EINVAL,
	  "grants[1].grant: must be an integer, not a fraction" },
	{ "a grant without its safe share is refused", 'a', 'g', "safeShare", NULL, -EINVAL,
	  "grants[1].safeShare: missing" },
	{ "a grant's node count over a million is refused", 'a', 'g', "nodes", "1000001", -ERANGE,
	  "grants[1].nodes: 1000001 is more than 1000000" },
	{ "the same namespace granted twice is refused", 'a', 'g', "namespace", "\"datasets\"",
	  -EINVAL, "grants[1].namespace: \"datasets\" again (grants[0] has it)" },
	{ "a grant for a bad namespace is refused", 'a', 'g', "namespace", "\"-x\"", -EINVAL,
	  "grants[1].namespace: \"-x\" is not a namespace" },
	{ "an unknown direction is refused", 'r', 'u', "direction", "\"download\"", -EINVAL,
	  "budgets[1].direction: \"download\" is not one of egress, ingress" },
	{ "a direction in capitals is refused", 'r', 'u', "direction", "\"Ingress\"", -EINVAL,
	  "budgets[1].direction: \"Ingress\"" },
	{ "a direction written as a number is refused", 'r', 'u', "direction", "1", -EINVAL,
	  "budgets[1].direction: must be a string, not an integer" },
	{ "a direction of null is refused", 'r', 'u', "direction", "null", -EINVAL,
	  "budgets[1].direction: must be a string, not null" },
	{ "an empty direction is refused", 'r', 'u', "direction", "\"\"", -EINVAL,
	  "budgets[1].direction: \"\" is not one of" },
	{ "a direction twice in a budget is refused", 'r', 'u', "direction",
	  "\"ingress\",\"direction\":\"egress\"", -EINVAL, "budgets[1]: a member written twice" },
	{ "a grant's unknown direction is refused", 'a', 'g', "direction", "\"up\"", -EINVAL,
	  "grants[1].direction: \"up\" is not one of egress, ingress" },
	{ "directions written as a number is refused", 'r', 't', "directions", "1", -EINVAL,
	  "directions: must be true or false, not an integer" },
};

static void t_bad(void **state)
{
	const struct bad *c = *state;
	char *doc = c->doc == 'r' ? report_with(c->where, c->key, c->val)
				  : answer_with(c->where, c->key, c->val);
	struct budget_report r = { .n = 99 };
	struct budget_answer a = { .n = 99 };
	struct tg_err e = { 0 };
	int got = c->doc == 'r' ? budget_report_parse(doc, strlen(doc), &r, &e)
				: budget_answer_parse(doc, strlen(doc), &a, &e);

	if (got != c->err)
		fail_msg("%s: got %d (%s), want %d", doc, got, e.msg, c->err);
	assert_int_equal(e.code, CNI_ERR_DECODE);
	assert_contains(e.msg, c->msg);
	/* nothing was handed out */
	assert_int_equal(r.n, 99);
	assert_int_equal(a.n, 99);
	free(doc);
}

/* The unchanged documents of the table parse: each case fails for its change alone. */
static void t_table_documents_parse(void **state)
{
	char *rep = report_with('t', NULL, NULL), *ans = answer_with('a', NULL, NULL);
	struct budget_report r;
	struct budget_answer a;
	struct tg_err e = { 0 };

	assert_int_equal(budget_report_parse(rep, strlen(rep), &r, &e), 0);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.use[1].ns, "web");
	budget_report_free(&r);
	assert_int_equal(budget_answer_parse(ans, strlen(ans), &a, &e), 0);
	assert_int_equal(a.n, 2);
	budget_answer_free(&a);
	free(rep);
	free(ans);
}

struct raw {
	const char *name;
	const char *text;
	int err;
	const char *msg;
};

static const struct raw raw_cases[] = {
	{ "a report that is not JSON is refused", "{\"version\":1,", -EINVAL,
	  "a report is not JSON" },
	{ "a report with bytes after the document is refused",
	  "{\"version\":1,\"node\":\"n1\",\"seq\":1,\"budgets\":[]}x", -EINVAL,
	  "a report is not JSON" },
	{ "a report with a NUL byte after the document is refused",
	  "{\"version\":1,\"node\":\"n1\",\"seq\":1,\"budgets\":[]}\0", -EINVAL, "trailing data" },
	{ "a report in single quotes is refused", "{'version':1}", -EINVAL, "not JSON" },
	{ "a key in single quotes is refused", "{\"version\":1,'node':\"n1\"}", -EINVAL,
	  "byte 13: \"'\" is not JSON here" },
	{ "NaN is refused", "{\"version\":1,\"seq\":NaN}", -EINVAL,
	  "byte 19: \"N\" is not JSON here" },
	{ "Infinity is refused", "{\"version\":1,\"x\":[-Infinity]}", -EINVAL,
	  "\"I\" is not JSON here" },
	{ "a number ending in a dot is refused", "{\"version\":1,\"x\":1.}", -EINVAL,
	  "byte 18: a number ends in '.'" },
	{ "a raw tab in a string is refused", "{\"version\":1,\"node\":\"n\t1\"}", -EINVAL,
	  "byte 22: a control character in a string" },
	{ "a report that is an array is refused", "[1]", -EINVAL,
	  "a report must be an object, not an array" },
	{ "an empty report is refused", "", -EINVAL, "a report is not JSON" },
};

static void t_raw(void **state)
{
	const struct raw *c = *state;
	size_t len = strlen(c->text);
	struct budget_report r;
	struct tg_err e = { 0 };

	/* the NUL case: its NUL is part of the body */
	if (strstr(c->name, "NUL"))
		len++;
	assert_int_equal(budget_report_parse(c->text, len, &r, &e), c->err);
	assert_int_equal(e.code, CNI_ERR_DECODE);
	assert_contains(e.msg, c->msg);
}

static void t_oversized_document_is_refused(void **state)
{
	char *rep = report_with('t', NULL, NULL), *big = malloc(BUDGET_BODY_MAX + 2);
	size_t len = strlen(rep);
	struct budget_report r;
	struct budget_answer a;
	struct tg_err e = { 0 };

	assert_non_null(big);
	/* a valid report padded with blanks to one byte over the limit */
	memset(big, ' ', BUDGET_BODY_MAX + 1);
	memcpy(big, rep, len);
	assert_int_equal(budget_report_parse(big, BUDGET_BODY_MAX + 1, &r, &e), -EINVAL);
	assert_int_equal(e.code, CNI_ERR_DECODE);
	assert_contains(e.msg, "a report of 163841 bytes: at most 163840");
	memset(&e, 0, sizeof(e));
	/* an answer may be larger (it can carry the policy) */
	{
		char *huge = malloc(BUDGET_ANSWER_MAX + 1);

		assert_non_null(huge);
		memset(huge, ' ', BUDGET_ANSWER_MAX + 1);
		assert_int_equal(budget_answer_parse(huge, BUDGET_ANSWER_MAX + 1, &a, &e), -EINVAL);
		assert_contains(e.msg, "an answer of 262145 bytes: at most 262144");
		free(huge);
	}
	/* at the limit it is read */
	assert_int_equal(budget_report_parse(big, BUDGET_BODY_MAX, &r, &e), 0);
	budget_report_free(&r);
	free(big);
	free(rep);
}

static void t_too_many_budgets_are_refused(void **state)
{
	char *doc = malloc(BUDGET_BODY_MAX), *p = doc;
	struct budget_report r;
	struct tg_err e = { 0 };

	assert_non_null(doc);
	p += sprintf(p, "{\"version\":1,\"node\":\"n1\",\"seq\":1,\"budgets\":[");
	for (int i = 0; i <= BUDGET_PER_REPORT_MAX; i++)
		p += sprintf(p, "%s{}", i ? "," : "");
	sprintf(p, "]}");
	assert_int_equal(budget_report_parse(doc, strlen(doc), &r, &e), -EINVAL);
	assert_contains(e.msg, "budgets: 513 entries, at most 512");
	free(doc);
}

/* Hostile bytes in a name are shown printable and cut, never copied raw into a log. */
static void t_messages_show_hostile_bytes_safely(void **state)
{
	const char *doc = "{\"version\":1,\"node\":\"\\u001b[31mred\\nline\\\"quoted\\\" "
			  "and a long tail that goes on and on and on\",\"seq\":1,\"budgets\":[]}";
	struct budget_report r;
	struct tg_err e = { 0 };

	assert_int_equal(budget_report_parse(doc, strlen(doc), &r, &e), -EINVAL);
	assert_contains(e.msg, "node: \"?[31mred?line?quoted? and a long tail that go...\"");
	for (const char *c = e.msg; *c; c++)
		assert_true(*c >= 0x20 && *c < 0x7f);
}

/* A term's epoch rides on the answer; a follower's redirect names the leader. */
static void t_epoch_and_redirect(void **state)
{
	struct budget_answer a = { .lease_ms = 10000, .epoch = 7 }, back;
	struct budget_redirect d = { .leader = "http://10.0.3.7:9618", .epoch = 7 }, db;
	struct tg_err e = { 0 };
	size_t len;
	char *text;

	(void)state;
	assert_int_equal(budget_answer_build(&a, &text, &len), 0);
	assert_string_equal(text, "{\"version\":1,\"leaseMs\":10000,\"epoch\":7,\"grants\":[]}");
	assert_int_equal(budget_answer_parse(text, len, &back, &e), 0);
	assert_int_equal(back.epoch, 7);
	budget_answer_free(&back);
	free(text);
	/* no election: no epoch written, 0 read */
	a.epoch = 0;
	assert_int_equal(budget_answer_build(&a, &text, &len), 0);
	assert_null(strstr(text, "epoch"));
	assert_int_equal(budget_answer_parse(text, len, &back, &e), 0);
	assert_int_equal(back.epoch, 0);
	budget_answer_free(&back);
	free(text);
	assert_int_equal(budget_redirect_build(&d, &text, &len), 0);
	assert_string_equal(text,
			    "{\"version\":1,\"leader\":\"http://10.0.3.7:9618\",\"epoch\":7}");
	assert_int_equal(budget_redirect_parse(text, len, &db, &e), 0);
	assert_string_equal(db.leader, d.leader);
	assert_int_equal(db.epoch, 7);
	free(text);
}

static void t_bad_redirects_are_refused(void **state)
{
	static const struct {
		const char *doc, *msg;
	} bad[] = {
		{ "{\"version\":1,\"epoch\":7}", "leader: missing" },
		{ "{\"version\":1,\"leader\":\"http://a:1\"}", "epoch: missing" },
		{ "{\"version\":1,\"leader\":\"ftp://a:1\",\"epoch\":1}", "is not a URL" },
		{ "{\"version\":1,\"leader\":\"http://\",\"epoch\":1}", "is not a URL" },
		{ "{\"version\":1,\"leader\":\"http://a b\",\"epoch\":1}", "is not a URL" },
		{ "{\"version\":1,\"leader\":\"http://a\\nb\",\"epoch\":1}", "is not a URL" },
		{ "{\"version\":1,\"leader\":\"http://a:1\",\"epoch\":-1}",
		  "epoch: -1 is negative" },
		{ "{\"version\":1,\"leader\":7,\"epoch\":1}", "leader: must be a string" },
		{ "{\"version\":2,\"leader\":\"http://a:1\",\"epoch\":1}", "not a version" },
		{ "{\"version\":1,\"leaseMs\":1,\"epoch\":\"7\",\"grants\":[]}", NULL },
	};
	struct budget_redirect d;
	struct budget_answer a;
	struct tg_err e;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(&e, 0, sizeof(e));
		if (!bad[i].msg) {
			/* an answer whose epoch is not a number */
			assert_int_equal(budget_answer_parse(bad[i].doc, strlen(bad[i].doc), &a,
							     &e),
					 -EINVAL);
			assert_contains(e.msg, "epoch: must be an integer");
			continue;
		}
		assert_true(budget_redirect_parse(bad[i].doc, strlen(bad[i].doc), &d, &e) < 0);
		assert_contains(e.msg, bad[i].msg);
	}
	/* a URL of 256 bytes is one too many */
	{
		char doc[400], url[300];

		memset(url, 'a', sizeof(url));
		memcpy(url, "http://", 7);
		url[256] = '\0';
		snprintf(doc, sizeof(doc), "{\"version\":1,\"leader\":\"%s\",\"epoch\":1}", url);
		assert_int_equal(budget_redirect_parse(doc, strlen(doc), &d, &e), -EINVAL);
		url[255] = '\0';
		snprintf(doc, sizeof(doc), "{\"version\":1,\"leader\":\"%s\",\"epoch\":1}", url);
		assert_int_equal(budget_redirect_parse(doc, strlen(doc), &d, &e), 0);
	}
}

/* A policy of n namespaces "ns-<i>" of budget (i + 1) x 1000, sealed. */
static void policy_of(struct budget_set *set, size_t n)
{
	struct tg_err e = { 0 };

	set->d = calloc(n ? n : 1, sizeof(*set->d));
	assert_non_null(set->d);
	set->n = n;
	for (size_t i = 0; i < n; i++) {
		snprintf(set->d[i].ns, sizeof(set->d[i].ns), "ns-%zu", i);
		set->d[i].budget = (i + 1) * 1000;
	}
	assert_int_equal(budget_set_seal(set, &e), 0);
}

/*
 * The policy both ways: a report names the one it holds, an answer carries
 * one whole; the largest policy fits an answer with the most grants.
 */
static void t_policy_round_trip(void **state)
{
	struct budget_report r = { .node = "n1", .seq = 1 }, rb;
	struct budget_grant g[BUDGET_PER_REPORT_MAX];
	struct budget_answer a = { .lease_ms = 10000 }, back;
	struct tg_err e = { 0 };
	size_t len;
	char *text;

	(void)state;
	/* none held: no member */
	assert_int_equal(budget_report_build(&r, &text, &len), 0);
	assert_null(strstr(text, "policy"));
	assert_int_equal(budget_report_parse(text, len, &rb, &e), 0);
	assert_string_equal(rb.policy, "");
	budget_report_free(&rb);
	free(text);
	snprintf(r.policy, sizeof(r.policy), "0123456789abcdef");
	assert_int_equal(budget_report_build(&r, &text, &len), 0);
	assert_non_null(strstr(text, "\"seq\":1,\"policy\":\"0123456789abcdef\","));
	assert_int_equal(budget_report_parse(text, len, &rb, &e), 0);
	assert_string_equal(rb.policy, "0123456789abcdef");
	budget_report_free(&rb);
	free(text);

	policy_of(&a.policy, 2);
	assert_int_equal(budget_answer_build(&a, &text, &len), 0);
	{
		char want[256];

		snprintf(want, sizeof(want),
			 "\"grants\":[],\"policy\":{\"id\":\"%s\",\"namespaces\":["
			 "{\"namespace\":\"ns-0\",\"internetEgress\":1000},"
			 "{\"namespace\":\"ns-1\",\"internetEgress\":2000}]}}",
			 a.policy.id);
		assert_non_null(strstr(text, want));
	}
	assert_int_equal(budget_answer_parse(text, len, &back, &e), 0);
	assert_string_equal(back.policy.id, a.policy.id);
	assert_int_equal(back.policy.n, 2);
	assert_int_equal(back.policy.d[1].budget, 2000);
	budget_answer_free(&back);
	free(text);
	budget_set_free(&a.policy);

	/*
	 * the most namespaces a policy has, each with a budget in both
	 * directions, the most grants (downloads'), the longest names
	 */
	policy_of(&a.policy, 2 * BUDGET_POLICY_NS_MAX);
	for (size_t i = 0; i < 2 * BUDGET_POLICY_NS_MAX; i++) {
		memset(a.policy.d[i].ns, 'a', BUDGET_NS_MAX);
		snprintf(a.policy.d[i].ns + BUDGET_NS_MAX - 5, 6, "%05zu", i / 2);
		a.policy.d[i].dir = i % 2 ? BUDGET_INGRESS : BUDGET_EGRESS;
		a.policy.d[i].budget = BUDGET_TOTAL_MAX;
	}
	assert_int_equal(budget_set_seal(&a.policy, &e), 0);
	for (size_t i = 0; i < BUDGET_PER_REPORT_MAX; i++) {
		g[i] = (struct budget_grant){ .dir = BUDGET_INGRESS,
					      .grant = BUDGET_RATE_MAX,
					      .safe_share = BUDGET_RATE_MAX,
					      .nodes = BUDGET_NODES_MAX };
		memcpy(g[i].ns, a.policy.d[2 * i].ns, sizeof(g[i].ns));
	}
	a.g = g;
	a.n = BUDGET_PER_REPORT_MAX;
	a.next_report_ms = BUDGET_INTERVAL_MAX_MS;
	a.epoch = BUDGET_EPOCH_MAX;
	assert_int_equal(budget_answer_build(&a, &text, &len), 0);
	assert_true(len <= BUDGET_ANSWER_MAX);
	assert_int_equal(budget_answer_parse(text, len, &back, &e), 0);
	assert_int_equal(back.policy.n, 2 * BUDGET_POLICY_NS_MAX);
	budget_answer_free(&back);
	free(text);
	budget_set_free(&a.policy);
}

/* A policy a node must not act on: refused whole, the answer with it. */
static void t_bad_policies_are_refused(void **state)
{
	static const struct {
		const char *policy, *msg;
	} bad[] = {
		{ "[]", "policy: must be an object" },
		{ "{\"namespaces\":[]}", "policy.id: missing" },
		{ "{\"id\":\"0123\",\"namespaces\":[]}", "is not a policy id" },
		{ "{\"id\":\"0123456789ABCDEF\",\"namespaces\":[]}", "is not a policy id" },
		{ "{\"id\":\"0123456789abcdef\"}", "policy.namespaces: missing" },
		{ "{\"id\":\"0123456789abcdef\",\"namespaces\":[]}",
		  "is not the id of its namespaces" },
		{ "{\"id\":\"0123456789abcdef\",\"namespaces\":[{\"namespace\":\"a\",\"internetEgress\":0}]}",
		  "policy.namespaces[0].internetEgress: 0" },
		{ "{\"id\":\"0123456789abcdef\",\"namespaces\":[{\"namespace\":\"a\",\"internetEgress\":"
		  "125000000000001}]}",
		  "policy.namespaces[0].internetEgress" },
		{ "{\"id\":\"0123456789abcdef\",\"namespaces\":[{\"namespace\":\"A\",\"internetEgress\":1}]}",
		  "policy.namespaces[0].namespace" },
		{ "{\"id\":\"0123456789abcdef\",\"namespaces\":[{\"namespace\":\"a\",\"internetEgress\":1},"
		  "{\"namespace\":\"a\",\"internetEgress\":2}]}",
		  "policy.namespaces[1].namespace: \"a\" again (policy.namespaces[0] has it)" },
	};
	struct tg_err e = { 0 };
	struct budget_answer a;
	char doc[512];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		snprintf(doc, sizeof(doc),
			 "{\"version\":1,\"leaseMs\":1,\"grants\":[],\"policy\":%s}",
			 bad[i].policy);
		memset(&e, 0, sizeof(e));
		if (budget_answer_parse(doc, strlen(doc), &a, &e) == 0 ||
		    !strstr(e.msg, bad[i].msg))
			fail_msg("policy %zu: %s: \"%s\"", i, doc, e.msg);
	}
	/* a report's id */
	snprintf(doc, sizeof(doc),
		 "{\"version\":1,\"node\":\"n\",\"seq\":1,\"policy\":7,\"budgets\":[]}");
	{
		struct budget_report r;

		memset(&e, 0, sizeof(e));
		assert_true(budget_report_parse(doc, strlen(doc), &r, &e) < 0);
		assert_contains(e.msg, "policy: must be a string");
	}
}

/*
 * One namespace in both directions: two entries, each with its own numbers,
 * the download's marked "direction":"ingress" and the upload's written as
 * before directions (no member), so that a peer of the previous version
 * reads the uploads it knows.
 */
static void t_directions_round_trip(void **state)
{
	struct budget_usage use[3] = {
		usage("datasets", 1250000, true, BUDGET_GRANTED),
		usage("datasets", 9000000, false, BUDGET_LEASE_EXPIRED),
		usage("web", 0, false, BUDGET_FALLBACK),
	};
	struct budget_grant g[2] = {
		{ .ns = "datasets", .grant = 1500000, .safe_share = 900000, .nodes = 6 },
		{ .ns = "datasets",
		  .dir = BUDGET_INGRESS,
		  .grant = 4000000,
		  .safe_share = 3000000,
		  .nodes = 5 },
	};
	struct budget_report r = { .node = "n1", .seq = 7, .use = use, .n = 3 }, rb;
	struct budget_answer a = { .lease_ms = 10000, .g = g, .n = 2 }, ab;
	struct tg_err e = { 0 };
	size_t len;
	char *text;

	(void)state;
	use[1].dir = BUDGET_INGRESS;
	use[1].applied = 5000000;
	use[2].dir = BUDGET_INGRESS;
	r.directions = true;
	assert_int_equal(budget_report_build(&r, &text, &len), 0);
	assert_contains(text, "\"seq\":7,\"directions\":true,\"budgets\":[");
	assert_contains(text, "{\"namespace\":\"datasets\",\"sentBytes\":1250000,");
	assert_contains(text, "{\"namespace\":\"datasets\",\"direction\":\"ingress\","
			      "\"sentBytes\":9000000,");
	assert_contains(text, "{\"namespace\":\"web\",\"direction\":\"ingress\",");
	assert_null(strstr(text, "egress"));
	assert_int_equal(budget_report_parse(text, len, &rb, &e), 0);
	assert_true(rb.directions);
	assert_int_equal(rb.n, 3);
	for (size_t i = 0; i < 3; i++)
		assert_usage_equal(&rb.use[i], &use[i]);
	budget_report_free(&rb);
	free(text);

	assert_int_equal(budget_answer_build(&a, &text, &len), 0);
	assert_string_equal(text, "{\"version\":1,\"leaseMs\":10000,\"grants\":["
				  "{\"namespace\":\"datasets\",\"grant\":1500000,"
				  "\"safeShare\":900000,\"nodes\":6},"
				  "{\"namespace\":\"datasets\",\"direction\":\"ingress\","
				  "\"grant\":4000000,\"safeShare\":3000000,\"nodes\":5}]}");
	assert_int_equal(budget_answer_parse(text, len, &ab, &e), 0);
	assert_int_equal(ab.n, 2);
	for (size_t i = 0; i < 2; i++) {
		assert_string_equal(ab.g[i].ns, g[i].ns);
		assert_int_equal(ab.g[i].dir, g[i].dir);
		assert_int_equal(ab.g[i].grant, g[i].grant);
		assert_int_equal(ab.g[i].safe_share, g[i].safe_share);
		assert_int_equal(ab.g[i].nodes, g[i].nodes);
	}
	budget_answer_free(&ab);
	free(text);
}

/*
 * What an agent and an allocator of the version before directions write:
 * every entry without "direction", read as egress; "egress" written out
 * is the same.
 */
static void t_entries_without_direction_are_egress(void **state)
{
	static const char old_report[] =
		"{\"version\":1,\"node\":\"n1\",\"seq\":42,\"policy\":\"5f0c2a9e81d3b447\","
		"\"budgets\":[{\"namespace\":\"datasets\",\"sentBytes\":1250000,"
		"\"intervalMs\":1000,\"saturated\":true,\"applied\":1250000,"
		"\"limit\":125000000,\"state\":\"granted\",\"pods\":3,"
		"\"safeShare\":900000,\"nodes\":6},{\"namespace\":\"web\",\"direction\":"
		"\"egress\",\"sentBytes\":1,\"intervalMs\":1000,\"saturated\":false,"
		"\"applied\":1,\"limit\":1,\"state\":\"granted\",\"pods\":1,"
		"\"safeShare\":1,\"nodes\":1}]}";
	static const char old_answer[] =
		"{\"version\":1,\"leaseMs\":10000,\"grants\":[{\"namespace\":\"datasets\","
		"\"grant\":1500000,\"safeShare\":900000,\"nodes\":6}],"
		"\"policy\":{\"id\":\"%s\",\"namespaces\":[{\"namespace\":\"datasets\","
		"\"internetEgress\":2500000000}]}}";
	struct budget_def d = { .ns = "datasets", .budget = 2500000000ULL };
	struct budget_set set = { .d = &d, .n = 1 };
	struct budget_report r;
	struct budget_answer a;
	struct tg_err e = { 0 };
	char doc[1024];

	(void)state;
	assert_int_equal(budget_report_parse(old_report, strlen(old_report), &r, &e), 0);
	/* a node of that version: sent the policy's uploads alone */
	assert_false(r.directions);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.use[0].dir, BUDGET_EGRESS);
	assert_int_equal(r.use[0].sent_bytes, 1250000);
	assert_int_equal(r.use[1].dir, BUDGET_EGRESS);
	budget_report_free(&r);
	assert_int_equal(budget_set_seal(&set, &e), 0);
	snprintf(doc, sizeof(doc), old_answer, set.id);
	assert_int_equal(budget_answer_parse(doc, strlen(doc), &a, &e), 0);
	assert_int_equal(a.n, 1);
	assert_int_equal(a.g[0].dir, BUDGET_EGRESS);
	assert_int_equal(a.policy.n, 1);
	assert_int_equal(a.policy.d[0].dir, BUDGET_EGRESS);
	assert_true(a.policy.d[0].budget == 2500000000ULL);
	budget_answer_free(&a);
}

/*
 * A (namespace, direction) twice is refused, in whatever way the direction
 * is written; the same namespace in the two directions is not.
 */
static void t_budget_twice_in_one_direction(void **state)
{
	static const struct {
		const char *a, *b, *msg; /* the two entries' direction members */
	} cases[] = {
		{ "", ",\"direction\":\"egress\"",
		  "budgets[1].namespace: \"datasets\" again (budgets[0] has it)" },
		{ ",\"direction\":\"ingress\"", ",\"direction\":\"ingress\"",
		  "budgets[1].namespace: \"datasets\" ingress again (budgets[0] has it)" },
		{ ",\"direction\":\"ingress\"", "", NULL },
		{ ",\"direction\":\"egress\"", ",\"direction\":\"ingress\"", NULL },
	};
	static const char entry[] =
		"{\"namespace\":\"datasets\"%s,\"sentBytes\":1,\"intervalMs\":1000,"
		"\"saturated\":false,\"applied\":1,\"limit\":1,\"state\":\"granted\","
		"\"pods\":1,\"safeShare\":1,\"nodes\":1}";
	static const char grant[] = "{\"namespace\":\"datasets\"%s,\"grant\":1,\"safeShare\":1,"
				    "\"nodes\":1}";

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char e0[512], e1[512], doc[1200];
		struct budget_report r;
		struct budget_answer a;
		struct tg_err e = { 0 };
		int got;

		snprintf(e0, sizeof(e0), entry, cases[i].a);
		snprintf(e1, sizeof(e1), entry, cases[i].b);
		snprintf(doc, sizeof(doc),
			 "{\"version\":1,\"node\":\"n1\",\"seq\":1,\"budgets\":[%s,%s]}", e0, e1);
		got = budget_report_parse(doc, strlen(doc), &r, &e);
		if (!cases[i].msg) {
			if (got != 0)
				fail_msg("case %zu: %s: %s", i, doc, e.msg);
			assert_int_not_equal(r.use[0].dir, r.use[1].dir);
			budget_report_free(&r);
		} else {
			assert_int_equal(got, -EINVAL);
			assert_contains(e.msg, cases[i].msg);
		}
		snprintf(e0, sizeof(e0), grant, cases[i].a);
		snprintf(e1, sizeof(e1), grant, cases[i].b);
		snprintf(doc, sizeof(doc), "{\"version\":1,\"leaseMs\":1,\"grants\":[%s,%s]}", e0,
			 e1);
		memset(&e, 0, sizeof(e));
		got = budget_answer_parse(doc, strlen(doc), &a, &e);
		if (!cases[i].msg) {
			if (got != 0)
				fail_msg("case %zu: %s: %s", i, doc, e.msg);
			assert_int_not_equal(a.g[0].dir, a.g[1].dir);
			budget_answer_free(&a);
		} else {
			assert_int_equal(got, -EINVAL);
			assert_contains(e.msg, "grants[1].namespace: \"datasets\"");
		}
	}
}

/*
 * A policy with download budgets: one entry a namespace with the budget of
 * each direction it has, read back into one budget a direction; the id
 * is the same on both sides, and budgets.json's form (to_json) reads back
 * the same.
 */
static void t_policy_directions_round_trip(void **state)
{
	struct budget_def d[4] = {
		{ .ns = "web", .budget = 1000 },
		{ .ns = "datasets", .dir = BUDGET_INGRESS, .budget = 5000000000ULL },
		{ .ns = "datasets", .budget = 2500000000ULL },
		{ .ns = "mirror", .dir = BUDGET_INGRESS, .budget = 125000000 },
	};
	struct budget_answer a = { .lease_ms = 10000 }, back;
	struct budget_set again = { 0 };
	struct tg_err e = { 0 };
	json_object *o;
	char want[512];
	size_t len;
	char *text;

	(void)state;
	a.policy = (struct budget_set){ .d = d, .n = 4 };
	assert_int_equal(budget_set_seal(&a.policy, &e), 0);
	assert_int_equal(budget_answer_build(&a, &text, &len), 0);
	snprintf(want, sizeof(want),
		 "\"policy\":{\"id\":\"%s\",\"namespaces\":["
		 "{\"namespace\":\"datasets\",\"internetEgress\":2500000000,"
		 "\"internetIngress\":5000000000},"
		 "{\"namespace\":\"mirror\",\"internetIngress\":125000000},"
		 "{\"namespace\":\"web\",\"internetEgress\":1000}]}}",
		 a.policy.id);
	assert_contains(text, want);
	assert_int_equal(budget_answer_parse(text, len, &back, &e), 0);
	assert_string_equal(back.policy.id, a.policy.id);
	assert_int_equal(back.policy.n, 4);
	for (size_t i = 0; i < 4; i++) {
		assert_string_equal(back.policy.d[i].ns, a.policy.d[i].ns);
		assert_int_equal(back.policy.d[i].dir, a.policy.d[i].dir);
		assert_true(back.policy.d[i].budget == a.policy.d[i].budget);
	}
	assert_null(budget_set_find(&back.policy, "mirror", BUDGET_EGRESS));
	assert_true(budget_set_find(&back.policy, "mirror", BUDGET_INGRESS)->budget == 125000000);
	budget_answer_free(&back);
	free(text);

	o = budget_policy_to_json(&a.policy);
	assert_non_null(o);
	assert_int_equal(json_object_array_length(json_object_object_get(o, "namespaces")), 3);
	assert_int_equal(budget_policy_from_json(o, &again, &e), 0);
	assert_string_equal(again.id, a.policy.id);
	assert_int_equal(again.n, 4);
	budget_set_free(&again);
	json_object_put(o);
}

/* Policies a node must not act on, of download budgets. */
static void t_bad_direction_policies_are_refused(void **state)
{
	static const struct {
		const char *policy, *msg;
	} bad[] = {
		{ "{\"id\":\"0123456789abcdef\",\"namespaces\":[{\"namespace\":\"a\"}]}",
		  "policy.namespaces[0]: no budget (internetEgress or internetIngress)" },
		{ "{\"id\":\"0123456789abcdef\",\"namespaces\":[{\"namespace\":\"a\","
		  "\"internetIngress\":0}]}",
		  "policy.namespaces[0].internetIngress: 0" },
		{ "{\"id\":\"0123456789abcdef\",\"namespaces\":[{\"namespace\":\"a\","
		  "\"internetIngress\":\"1G\"}]}",
		  "policy.namespaces[0].internetIngress: must be an integer" },
		{ "{\"id\":\"0123456789abcdef\",\"namespaces\":[{\"namespace\":\"a\","
		  "\"internetIngress\":125000000000001}]}",
		  "policy.namespaces[0].internetIngress" },
		/* a namespace is one entry, whatever its directions */
		{ "{\"id\":\"0123456789abcdef\",\"namespaces\":[{\"namespace\":\"a\","
		  "\"internetEgress\":1},{\"namespace\":\"a\",\"internetIngress\":2}]}",
		  "policy.namespaces[1].namespace: \"a\" again (policy.namespaces[0] has it)" },
	};
	struct tg_err e = { 0 };
	struct budget_answer a;
	char doc[512];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		snprintf(doc, sizeof(doc),
			 "{\"version\":1,\"leaseMs\":1,\"grants\":[],\"policy\":%s}",
			 bad[i].policy);
		memset(&e, 0, sizeof(e));
		if (budget_answer_parse(doc, strlen(doc), &a, &e) == 0 ||
		    !strstr(e.msg, bad[i].msg))
			fail_msg("policy %zu: %s: \"%s\"", i, doc, e.msg);
	}
}

/* A policy id tells the two directions apart, and uploads keep theirs. */
static void t_policy_id_by_direction(void **state)
{
	struct budget_def up = { .ns = "datasets", .budget = 1000 },
			  down = { .ns = "datasets", .dir = BUDGET_INGRESS, .budget = 1000 },
			  both[2] = { { .ns = "datasets", .budget = 1000 },
				      { .ns = "datasets", .dir = BUDGET_INGRESS, .budget = 1000 } },
			  twice[2] = { { .ns = "datasets", .dir = BUDGET_INGRESS, .budget = 1 },
				       { .ns = "datasets", .dir = BUDGET_INGRESS, .budget = 2 } };
	struct budget_set s_up = { .d = &up, .n = 1 }, s_down = { .d = &down, .n = 1 },
			  s_both = { .d = both, .n = 2 }, s_twice = { .d = twice, .n = 2 };
	struct tg_err e = { 0 };

	(void)state;
	assert_int_equal(budget_set_seal(&s_up, &e), 0);
	assert_int_equal(budget_set_seal(&s_down, &e), 0);
	assert_int_equal(budget_set_seal(&s_both, &e), 0);
	/* what the version before directions named it: FNV-1a of "datasets", NUL, 1000 in 8 bytes little end first */
	assert_string_equal(s_up.id, "1c255cfce2da5129");
	assert_string_not_equal(s_up.id, s_down.id);
	assert_string_not_equal(s_up.id, s_both.id);
	assert_string_not_equal(s_down.id, s_both.id);
	assert_int_equal(budget_set_seal(&s_twice, &e), -EINVAL);
	assert_contains(e.msg, "namespace \"datasets\" twice for internetIngress");
	/* the uploads alone: what a node that predates directions holds, by its id */
	{
		struct budget_set up_only;

		assert_int_equal(budget_set_uploads(&s_both, &up_only), 0);
		assert_int_equal(up_only.n, 1);
		assert_int_equal(up_only.d[0].dir, BUDGET_EGRESS);
		assert_string_equal(up_only.id, "1c255cfce2da5129");
		budget_set_free(&up_only);
		assert_int_equal(budget_set_uploads(&s_down, &up_only), 0);
		assert_int_equal(up_only.n, 0);
		assert_string_not_equal(up_only.id, s_down.id);
		budget_set_free(&up_only);
	}
}

int main(void)
{
	add_test("a report written and read back is the same", t_report_round_trip, NULL);
	add_test("a report is written as the header documents it",
		 t_report_is_written_as_documented, NULL);
	add_test("an answer is written as documented and reads back the same", t_answer_round_trip,
		 NULL);
	add_test("a report and an answer with no budgets round trip", t_empty_documents_round_trip,
		 NULL);
	add_test("a name the parser refuses is still written as valid JSON",
		 t_build_escapes_what_the_parser_refuses, NULL);
	add_test("unknown members are ignored, whatever they hold", t_unknown_members_are_ignored,
		 NULL);
	add_test("the largest report there can be fits the size cap and parses",
		 t_largest_report_parses, NULL);
	add_test("the states are named as the metrics label them", t_state_names, NULL);
	add_test("the documents the refusals start from parse unchanged", t_table_documents_parse,
		 NULL);
	add_test("a document over the size cap is refused before it is parsed",
		 t_oversized_document_is_refused, NULL);
	add_test("a report of more budgets than the cap is refused", t_too_many_budgets_are_refused,
		 NULL);
	add_test("a message shows a peer's bytes printable and cut",
		 t_messages_show_hostile_bytes_safely, NULL);
	add_test("an answer carries its term's epoch; a redirect names the leader",
		 t_epoch_and_redirect, NULL);
	add_test("a redirect the agent must not follow is refused", t_bad_redirects_are_refused,
		 NULL);
	add_test("a report names its policy, an answer carries one whole, the largest fits",
		 t_policy_round_trip, NULL);
	add_test("a policy a node must not act on is refused with its answer",
		 t_bad_policies_are_refused, NULL);
	add_test("a namespace's two directions round trip as two budgets", t_directions_round_trip,
		 NULL);
	add_test("an entry without a direction (the previous version's) is egress",
		 t_entries_without_direction_are_egress, NULL);
	add_test("a namespace twice in one direction is refused, once a direction is not",
		 t_budget_twice_in_one_direction, NULL);
	add_test("a policy's download budgets round trip, one entry a namespace",
		 t_policy_directions_round_trip, NULL);
	add_test("a policy of download budgets a node must not act on is refused",
		 t_bad_direction_policies_are_refused, NULL);
	add_test("a policy's id tells the directions apart; uploads keep theirs",
		 t_policy_id_by_direction, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(raw_cases); i++)
		add_test(raw_cases[i].name, t_raw, (void *)&raw_cases[i]);
	for (size_t i = 0; i < ARRAY_SIZE(bad_cases); i++)
		add_test(bad_cases[i].name, t_bad, (void *)&bad_cases[i]);
	return run_group("budget_wire");
}
