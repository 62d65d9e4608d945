// SPDX-License-Identifier: Apache-2.0
/*
 * Leader election: etcd's JSON gateway (etcd/gateway.c: bodies, base64,
 * strict parsers of the answers, etcd's own as it writes them) and the
 * allocator's state machine (allocator/elect.c) driven with those answers
 * and a clock of its own. The invariant every case and the random walk
 * check: a replica grants only before (the send time of the last grant or
 * keepalive etcd answered) + TTL - margin, so never once etcd may have let
 * its lease expire.
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

#include "allocator/elect.h"
#include "etcd/etcd.h"
#include "tests/unit/helpers.h"

#define KEY "/tollgate/allocator/leader"
#define ME "http://10.0.3.7:9618"
#define OTHER "http://10.0.3.8:9618"
#define T0 1000000

/* ---- base64 and the bodies ---- */

static void t_b64_round_trip(void **state)
{
	const char *in[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar", KEY };
	const char *want[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
	char enc[128], dec[128];

	(void)state;
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		etcd_b64_encode(in[i], strlen(in[i]), enc);
		if (i < sizeof(want) / sizeof(want[0]))
			assert_string_equal(enc, want[i]);
		assert_int_equal(etcd_b64_decode(enc, strlen(enc), dec, sizeof(dec)),
				 strlen(in[i]));
		assert_string_equal(dec, in[i]);
	}
	/* not base64: a bad length, a bad character, padding inside, too long for the room */
	assert_int_equal(etcd_b64_decode("Zm9", 3, dec, sizeof(dec)), -1);
	assert_int_equal(etcd_b64_decode("Zm9*", 4, dec, sizeof(dec)), -1);
	assert_int_equal(etcd_b64_decode("Zg==Zm9v", 8, dec, sizeof(dec)), -1);
	/* not canonical: bits under the padding set (another text encodes the same bytes) */
	assert_int_equal(etcd_b64_decode("Zh==", 4, dec, sizeof(dec)), -1);
	assert_int_equal(etcd_b64_decode("Zm9=", 4, dec, sizeof(dec)), -1);
	assert_int_equal(etcd_b64_decode("Zm9vYmFy", 8, dec, 6), -1);
	assert_int_equal(etcd_b64_decode("Zm9vYmFy", 8, dec, 7), 6);
}

static void t_bodies(void **state)
{
	char *b;

	(void)state;
	b = etcd_grant_body(5);
	assert_string_equal(b, "{\"TTL\":\"5\"}");
	free(b);
	b = etcd_lease_body(7587869584859357190LL);
	assert_string_equal(b, "{\"ID\":\"7587869584859357190\"}");
	free(b);
	b = etcd_range_body(KEY);
	assert_string_equal(b, "{\"key\":\"L3RvbGxnYXRlL2FsbG9jYXRvci9sZWFkZXI=\"}");
	free(b);
	b = etcd_campaign_body(KEY, ME, 42);
	assert_string_equal(
		b,
		"{\"compare\":[{\"key\":\"L3RvbGxnYXRlL2FsbG9jYXRvci9sZWFkZXI=\","
		"\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":\"0\"}],"
		"\"success\":[{\"request_put\":{\"key\":\"L3RvbGxnYXRlL2FsbG9jYXRvci9sZWFkZXI=\","
		"\"value\":\"aHR0cDovLzEwLjAuMy43Ojk2MTg=\",\"lease\":\"42\"}}],"
		"\"failure\":[{\"request_range\":{\"key\":\"L3RvbGxnYXRlL2FsbG9jYXRvci9sZWFkZXI=\"}}]}");
	free(b);
}

/* --etcd's list: split, trailing '/' dropped; a bad URL named, too many refused */
static void t_split_urls(void **state)
{
	char urls[ELECT_URLS_MAX][ELECT_URL_MAX + 1];
	const char *bad = NULL;
	size_t n = 0, bad_len = 0;

	(void)state;
	assert_int_equal(
		elect_split_urls("http://e1:2379/,https://e2:2379", urls, &n, &bad, &bad_len), 0);
	assert_int_equal(n, 2);
	assert_string_equal(urls[0], "http://e1:2379");
	assert_string_equal(urls[1], "https://e2:2379");
	assert_int_equal(elect_split_urls("http://e1:2379,,http://e3", urls, &n, &bad, &bad_len),
			 -EINVAL);
	assert_int_equal(bad_len, 0);
	assert_int_equal(elect_split_urls("http://e1,ftp://e2", urls, &n, &bad, &bad_len), -EINVAL);
	assert_int_equal(strncmp(bad, "ftp://e2", bad_len), 0);
	assert_int_equal(elect_split_urls("http://a,http://a,http://a,http://a,http://a,http://a,"
					  "http://a,http://a,http://a,http://a",
					  urls, &n, &bad, &bad_len),
			 -E2BIG);
}

/* ---- etcd's answers, as etcd 3.4's gateway writes them ---- */

#define HDR                                                                                           \
	"\"header\":{\"cluster_id\":\"14841639068965178418\",\"member_id\":\"10276657743932975437\"," \
	"\"revision\":\"%s\",\"raft_term\":\"2\"}"

static char doc_buf[2048];
static const char *doc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *doc(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(doc_buf, sizeof(doc_buf), fmt, ap);
	va_end(ap);
	return doc_buf;
}

static const char *grant_answer(int64_t id, int ttl)
{
	return doc("{" HDR ",\"ID\":\"%lld\",\"TTL\":\"%d\"}", "4", (long long)id, ttl);
}

static const char *keepalive_answer(int64_t id, int ttl)
{
	if (ttl == 0) /* a lease that is gone: TTL left out (its zero value) */
		return doc("{\"result\":{" HDR ",\"ID\":\"%lld\"}}", "9", (long long)id);
	return doc("{\"result\":{" HDR ",\"ID\":\"%lld\",\"TTL\":\"%d\"}}", "9", (long long)id,
		   ttl);
}

static const char *won_answer(const char *rev)
{
	return doc("{" HDR ",\"succeeded\":true,\"responses\":[{\"response_put\":{" HDR "}}]}", rev,
		   rev);
}

/* A key held: value is base64 of the holder's URL. */
static const char *kv_json(const char *holder, int64_t create, int64_t lease)
{
	static char kv[512];
	char v[256];

	etcd_b64_encode(holder, strlen(holder), v);
	snprintf(kv, sizeof(kv),
		 "{\"key\":\"L3RvbGxnYXRlL2FsbG9jYXRvci9sZWFkZXI=\",\"create_revision\":\"%lld\","
		 "\"mod_revision\":\"%lld\",\"version\":\"1\",\"value\":\"%s\",\"lease\":\"%lld\"}",
		 (long long)create, (long long)create, v, (long long)lease);
	return kv;
}

static const char *lost_answer(const char *holder, int64_t create, int64_t lease)
{
	char kv[512];

	snprintf(kv, sizeof(kv), "%s", kv_json(holder, create, lease));
	return doc("{" HDR ",\"responses\":[{\"response_range\":{" HDR
		   ",\"kvs\":[%s],\"count\":\"1\"}}]}",
		   "12", "12", kv);
}

static const char *range_answer(const char *holder, int64_t create, int64_t lease)
{
	char kv[512];

	if (!holder) /* no key: kvs and count left out */
		return doc("{" HDR "}", "13");
	snprintf(kv, sizeof(kv), "%s", kv_json(holder, create, lease));
	return doc("{" HDR ",\"kvs\":[%s],\"count\":\"1\"}", "13", kv);
}

static void t_parsers_read_etcd(void **state)
{
	char why[ETCD_WHY_MAX];
	struct etcd_kv kv;
	int64_t id, ttl, rev;
	bool won;
	const char *d;

	(void)state;
	d = grant_answer(7587869584859357190LL, 5);
	assert_int_equal(etcd_parse_grant(d, strlen(d), &id, &ttl, why), 0);
	assert_int_equal(id, 7587869584859357190LL);
	assert_int_equal(ttl, 5);
	d = keepalive_answer(1, 4);
	assert_int_equal(etcd_parse_keepalive(d, strlen(d), &ttl, why), 0);
	assert_int_equal(ttl, 4);
	d = keepalive_answer(1, 0);
	assert_int_equal(etcd_parse_keepalive(d, strlen(d), &ttl, why), 0);
	assert_int_equal(ttl, 0);
	d = won_answer("17");
	assert_int_equal(etcd_parse_campaign(d, strlen(d), &won, &rev, &kv, why), 0);
	assert_true(won);
	assert_int_equal(rev, 17);
	d = lost_answer(OTHER, 11, 99);
	assert_int_equal(etcd_parse_campaign(d, strlen(d), &won, &rev, &kv, why), 0);
	assert_false(won);
	assert_true(kv.exists);
	assert_int_equal(kv.create_revision, 11);
	assert_int_equal(kv.lease, 99);
	assert_string_equal(kv.value, OTHER);
	d = range_answer(NULL, 0, 0);
	assert_int_equal(etcd_parse_range(d, strlen(d), &kv, why), 0);
	assert_false(kv.exists);
}

static void t_parsers_refuse_garbage(void **state)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{ "", "not JSON" },
		{ "<html>502 Bad Gateway</html>", "not JSON" },
		{ "[1,2]", "not a JSON object" },
		{ "{\"error\":\"etcdserver: requested lease not found\",\"code\":5,"
		  "\"message\":\"etcdserver: requested lease not found\"}",
		  "etcd: etcdserver: requested lease not found" },
		{ "{\"ID\":\"12x\",\"TTL\":\"5\"}", "ID: \"12x\" is not an integer" },
		{ "{\"ID\":true,\"TTL\":\"5\"}", "ID: not an integer" },
		{ "{\"ID\":\"7\"}", "without an ID or a TTL" },
	};
	char why[ETCD_WHY_MAX];
	struct etcd_kv kv;
	int64_t id, ttl, rev;
	const char *d;
	bool won;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		assert_int_equal(etcd_parse_grant(bad[i].text, strlen(bad[i].text), &id, &ttl, why),
				 -EBADMSG);
		assert_contains(why, bad[i].why);
	}
	assert_int_equal(etcd_parse_keepalive("{}", 2, &ttl, why), -EBADMSG);
	assert_contains(why, "without a result");
	assert_int_equal(etcd_parse_campaign("{\"succeeded\":true}", 18, &won, &rev, &kv, why),
			 -EBADMSG);
	assert_contains(why, "without a header");
	/* lost, but no range of the key: who leads is not known */
	assert_int_equal(etcd_parse_campaign("{\"header\":{\"revision\":\"3\"}}", 27, &won, &rev,
					     &kv, why),
			 -EBADMSG);
	assert_contains(why, "without the key's range");
	d = "{\"kvs\":[{\"create_revision\":\"3\",\"value\":\"%%%\"}]}";
	assert_int_equal(etcd_parse_range(d, strlen(d), &kv, why), -EBADMSG);
	assert_contains(why, "kvs[0].value: not base64");
	d = "{\"kvs\":[{\"value\":\"Zm9v\"}]}";
	assert_int_equal(etcd_parse_range(d, strlen(d), &kv, why), -EBADMSG);
	assert_contains(why, "create_revision: missing");
	assert_int_equal(etcd_parse_range("{\"kvs\":{}}", 10, &kv, why), -EBADMSG);
}

/* ---- the machine ---- */

struct run {
	struct elect el;
	int64_t now;
	struct elect_request req;
	/* the invariant's reference: the send time of the last renewal etcd answered */
	int64_t renewed_sent;
};

static void start(struct run *r, size_t n_urls)
{
	struct elect_config cfg = { .urls = { "http://e1:2379", "http://e2:2379",
					      "http://e3:2379" },
				    .n_urls = n_urls,
				    .key = KEY,
				    .advertise = ME,
				    .ttl_s = 5 };

	memset(r, 0, sizeof(*r));
	r->now = T0;
	elect_init(&r->el, &cfg, r->now);
}

/* The request due now: its step (ELECT_NONE when none is due). */
static enum elect_step due(struct run *r)
{
	int n = elect_due(&r->el, r->now, &r->req);

	assert_true(n >= 0);
	if (!n)
		return ELECT_NONE;
	free(r->req.body);
	r->req.body = NULL;
	return r->req.step;
}

static int answer(struct run *r, const char *text)
{
	enum elect_step step = r->el.pending;
	int64_t sent = r->el.sent_ms;
	int c = elect_answer(&r->el, r->now, 200, text, strlen(text), NULL);

	if ((step == ELECT_GRANT || step == ELECT_KEEPALIVE) && r->el.lease_sent_ms == sent)
		r->renewed_sent = sent;
	return c;
}

static int fail_req(struct run *r, const char *why)
{
	return elect_answer(&r->el, r->now, 0, NULL, 0, why);
}

static void invariant(const struct run *r)
{
	if (elect_leading(&r->el, r->now))
		assert_true(r->now < r->renewed_sent + 5000 - r->el.margin_ms);
}

static void win(struct run *r, int64_t lease, const char *rev)
{
	assert_int_equal(due(r), ELECT_GRANT);
	r->now += 3;
	assert_int_equal(answer(r, grant_answer(lease, 5)), 0);
	assert_int_equal(due(r), ELECT_CAMPAIGN);
	r->now += 2;
	assert_int_equal(answer(r, won_answer(rev)), ELECT_WON);
}

static void t_wins_and_renews(void **state)
{
	struct run r;

	(void)state;
	start(&r, 1);
	win(&r, 77, "7");
	assert_true(elect_leading(&r.el, r.now));
	assert_int_equal(r.el.epoch, 7);
	/* the deadline counts from the grant's send time, not from its answer */
	assert_int_equal(r.el.lead_until_ms, T0 + 5000 - r.el.margin_ms);
	assert_string_equal(r.el.leader, ME);
	/* nothing until a third of the TTL, then a keepalive, then a check of the key */
	assert_int_equal(due(&r), ELECT_NONE);
	r.now = T0 + 5000 / 3;
	assert_int_equal(due(&r), ELECT_KEEPALIVE);
	r.now += 40;
	assert_int_equal(answer(&r, keepalive_answer(77, 5)), 0);
	assert_int_equal(r.el.lead_until_ms, T0 + 5000 / 3 + 5000 - r.el.margin_ms);
	r.now = elect_next_ms(&r.el);
	assert_int_equal(due(&r), ELECT_CHECK);
	assert_int_equal(answer(&r, range_answer(ME, 7, 77)), 0);
	assert_true(elect_leading(&r.el, r.now));
	invariant(&r);
	/* a clean shutdown revokes the lease and ends the term at once */
	assert_int_equal(elect_resign(&r.el, r.now, &r.req), 1);
	assert_int_equal(r.req.step, ELECT_REVOKE);
	assert_string_equal(r.req.url, "http://e1:2379/v3/lease/revoke");
	assert_string_equal(r.req.body, "{\"ID\":\"77\"}");
	free(r.req.body);
	assert_false(elect_leading(&r.el, r.now));
	assert_int_equal(r.el.stats.step_downs, 0);
}

static void t_stops_granting_before_the_lease_can_expire(void **state)
{
	struct run r;
	int changes = 0;

	(void)state;
	start(&r, 3);
	win(&r, 77, "7");
	/* etcd stops answering: every renewal fails, each on the next URL */
	for (r.now = T0 + 5000 / 3; r.now < T0 + 10000; r.now += 10) {
		invariant(&r);
		changes |= elect_tick(&r.el, r.now);
		if (due(&r) != ELECT_NONE)
			assert_int_equal(fail_req(&r, "Connection timed out"), 0);
	}
	assert_int_equal(changes, ELECT_LOST);
	assert_false(elect_leading(&r.el, r.now));
	assert_false(elect_leading(&r.el, T0 + 5000 - r.el.margin_ms));
	assert_true(r.el.stats.failures[ELECT_KEEPALIVE] >= 3);
	assert_int_equal(r.el.stats.step_downs, 1);
	assert_contains(r.el.step_down_why, "could not be renewed in time");
	/* the URLs were tried in turn */
	assert_true(r.el.stats.failures[ELECT_KEEPALIVE] + r.el.stats.failures[ELECT_GRANT] > 3);
	/* control: with the renewals answered it would still lead then */
	start(&r, 1);
	win(&r, 77, "7");
	for (r.now = T0; r.now < T0 + 10000; r.now += 10) {
		enum elect_step s = due(&r);

		if (s == ELECT_KEEPALIVE)
			assert_int_equal(answer(&r, keepalive_answer(77, 5)), 0);
		else if (s == ELECT_CHECK)
			assert_int_equal(answer(&r, range_answer(ME, 7, 77)), 0);
		assert_int_equal(elect_tick(&r.el, r.now), 0);
		invariant(&r);
	}
	assert_true(elect_leading(&r.el, r.now));
}

static void t_a_lost_lease_or_key_ends_the_term(void **state)
{
	struct run r;

	(void)state;
	start(&r, 1);
	win(&r, 77, "7");
	r.now = elect_next_ms(&r.el);
	assert_int_equal(due(&r), ELECT_KEEPALIVE);
	assert_int_equal(answer(&r, keepalive_answer(77, 0)), ELECT_LOST);
	assert_contains(r.el.step_down_why, "lease is gone");
	assert_false(elect_leading(&r.el, r.now));
	/* again, and this time the key is someone else's at the check */
	start(&r, 1);
	win(&r, 77, "7");
	r.now = elect_next_ms(&r.el);
	assert_int_equal(due(&r), ELECT_KEEPALIVE);
	assert_int_equal(answer(&r, keepalive_answer(77, 5)), 0);
	r.now = elect_next_ms(&r.el);
	assert_int_equal(due(&r), ELECT_CHECK);
	assert_int_equal(answer(&r, range_answer(OTHER, 9, 88)), ELECT_LOST);
	assert_contains(r.el.step_down_why, "another's");
	assert_true(r.el.leader_known);
	assert_string_equal(r.el.leader, OTHER);
	assert_int_equal(r.el.leader_epoch, 9);
}

/* A term ended by a late renewal revokes its lease once etcd answers: its key goes at once. */
static void t_an_ended_term_revokes_its_lease(void **state)
{
	struct run r;

	(void)state;
	start(&r, 1);
	win(&r, 77, "7");
	for (r.now = T0 + 5000 / 3; elect_tick(&r.el, r.now) != ELECT_LOST; r.now += 10)
		if (due(&r) != ELECT_NONE)
			assert_int_equal(fail_req(&r, "Connection timed out"), 0);
	/* etcd answers again: the old lease first, however often that fails */
	r.now += 2 * ELECT_RETRY_MS;
	assert_int_equal(due(&r), ELECT_REVOKE);
	assert_string_equal(r.req.url, "http://e1:2379/v3/lease/revoke");
	assert_int_equal(elect_answer(&r.el, r.now, 503, "{}", 2, "HTTP 503"), 0);
	r.now += 2 * ELECT_RETRY_MS;
	assert_int_equal(due(&r), ELECT_REVOKE);
	/* gone already (etcd let it expire): done as well */
	assert_int_equal(
		elect_answer(&r.el, r.now, 404,
			     "{\"error\":\"etcdserver: requested lease not found\",\"code\":5}", 60,
			     "HTTP 404"),
		0);
	assert_int_equal(r.el.revoke_id, 0);
	assert_int_equal(due(&r), ELECT_GRANT);
	/* a clean revoke ends it the same way */
	start(&r, 1);
	win(&r, 78, "9");
	r.now = elect_next_ms(&r.el);
	assert_int_equal(due(&r), ELECT_KEEPALIVE);
	assert_int_equal(answer(&r, keepalive_answer(78, 5)), 0);
	r.now = elect_next_ms(&r.el);
	assert_int_equal(due(&r), ELECT_CHECK);
	assert_int_equal(answer(&r, range_answer(OTHER, 12, 5)), ELECT_LOST);
	/* (following the new holder from its next read on) */
	r.now += ELECT_POLL_MS;
	assert_int_equal(due(&r), ELECT_REVOKE);
	assert_string_equal(r.req.url, "http://e1:2379/v3/lease/revoke");
	assert_int_equal(answer(&r, doc("{" HDR "}", "13")), 0);
	assert_int_equal(due(&r), ELECT_RANGE);
}

static void t_follows_then_campaigns_when_the_key_is_gone(void **state)
{
	struct run r;

	(void)state;
	start(&r, 1);
	assert_int_equal(due(&r), ELECT_GRANT);
	assert_int_equal(answer(&r, grant_answer(5, 5)), 0);
	assert_int_equal(due(&r), ELECT_CAMPAIGN);
	assert_int_equal(answer(&r, lost_answer(OTHER, 11, 99)), 0);
	assert_false(elect_leading(&r.el, r.now));
	assert_true(r.el.leader_known);
	assert_string_equal(r.el.leader, OTHER);
	assert_int_equal(r.el.leader_epoch, 11);
	assert_int_equal(r.el.lease_id, 0);
	/* polls the key once a second */
	assert_int_equal(due(&r), ELECT_NONE);
	r.now += ELECT_POLL_MS;
	assert_int_equal(due(&r), ELECT_RANGE);
	assert_int_equal(answer(&r, range_answer(OTHER, 11, 99)), 0);
	r.now += ELECT_POLL_MS;
	assert_int_equal(due(&r), ELECT_RANGE);
	/* the leader's key expired: campaign at once */
	assert_int_equal(answer(&r, range_answer(NULL, 0, 0)), 0);
	assert_false(r.el.leader_known);
	assert_int_equal(due(&r), ELECT_GRANT);
	assert_int_equal(answer(&r, grant_answer(6, 5)), 0);
	assert_int_equal(due(&r), ELECT_CAMPAIGN);
	assert_int_equal(answer(&r, won_answer("20")), ELECT_WON);
	assert_int_equal(r.el.epoch, 20);
}

static void t_a_retried_campaign_that_had_won(void **state)
{
	struct run r;

	(void)state;
	start(&r, 2);
	assert_int_equal(due(&r), ELECT_GRANT);
	assert_int_equal(answer(&r, grant_answer(5, 5)), 0);
	assert_int_equal(due(&r), ELECT_CAMPAIGN);
	/* the answer is lost: the put may have landed */
	assert_int_equal(fail_req(&r, "Operation timed out"), 0);
	r.now += 2 * ELECT_RETRY_MS;
	assert_int_equal(due(&r), ELECT_CAMPAIGN);
	assert_string_equal(r.req.url, "http://e2:2379/v3/kv/txn");
	/* it had: the key holds this replica's URL on its lease */
	assert_int_equal(answer(&r, lost_answer(ME, 15, 5)), ELECT_WON);
	assert_int_equal(r.el.epoch, 15);
	/* a key of this URL on another lease (a term it ended) is nobody's to follow */
	start(&r, 1);
	assert_int_equal(due(&r), ELECT_GRANT);
	assert_int_equal(answer(&r, grant_answer(6, 5)), 0);
	assert_int_equal(due(&r), ELECT_CAMPAIGN);
	assert_int_equal(answer(&r, lost_answer(ME, 15, 5)), 0);
	assert_false(elect_leading(&r.el, r.now));
	assert_false(r.el.leader_known);
}

static void t_garbage_never_makes_a_leader(void **state)
{
	static const char *const junk[] = {
		"",
		"{",
		"null",
		"[]",
		"{\"header\":{\"revision\":\"x\"}}",
		"{\"succeeded\":true}",
		"{\"error\":\"etcdserver: no leader\",\"code\":14}",
		"{\"header\":{\"revision\":\"3\"},\"succeeded\":\"yes\"}",
	};
	struct run r;

	(void)state;
	start(&r, 3);
	for (int i = 0; i < 400; i++, r.now += 50) {
		enum elect_step s = due(&r);

		if (s == ELECT_GRANT)
			answer(&r, grant_answer(5, 5)); /* leases are granted, campaigns get junk */
		else if (s != ELECT_NONE)
			assert_int_equal(answer(&r, junk[i % (sizeof(junk) / sizeof(junk[0]))]), 0);
		assert_false(elect_leading(&r.el, r.now));
	}
	assert_true(r.el.stats.failures[ELECT_CAMPAIGN] > 10);
	assert_false(r.el.etcd_ok);
	assert_contains(r.el.last_error, "campaign: ");
}

/* Random answers, failures and delays: the invariant holds at every step. */
static void t_random_walk_keeps_the_invariant(void **state)
{
	struct run r;
	unsigned int seed = 12345;
	int64_t lease = 100;
	int terms = 0;

	(void)state;
	start(&r, 3);
	for (int i = 0; i < 200000; i++) {
		enum elect_step s;
		unsigned int x = (unsigned int)rand_r(&seed);

		r.now += x % 200;
		if (elect_tick(&r.el, r.now) == ELECT_LOST)
			assert_false(elect_leading(&r.el, r.now));
		s = due(&r);
		if (s == ELECT_NONE) {
			invariant(&r);
			continue;
		}
		r.now += x % 7 == 0 ? 1500 : x % 40; /* some answers take long */
		if (x % 5 == 0) {
			fail_req(&r, "timeout");
		} else if (s == ELECT_GRANT) {
			answer(&r, grant_answer(++lease, 5));
		} else if (s == ELECT_CAMPAIGN) {
			if (x % 3 == 0)
				answer(&r, lost_answer(OTHER, 3, 9));
			else if (answer(&r, won_answer("30")) == ELECT_WON)
				terms++;
		} else if (s == ELECT_KEEPALIVE) {
			answer(&r, keepalive_answer(lease, x % 11 == 0 ? 0 : 5));
		} else if (s == ELECT_CHECK) {
			answer(&r, range_answer(ME, r.el.epoch, x % 13 == 0 ? 1 : r.el.lease_id));
		} else if (s == ELECT_RANGE) {
			answer(&r, range_answer(x % 2 ? OTHER : NULL, 3, 9));
		} else if (s == ELECT_REVOKE) {
			answer(&r, doc("{" HDR "}", "31"));
		}
		invariant(&r);
	}
	assert_true(terms > 100);
	assert_true(r.el.stats.step_downs > 50);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_b64_round_trip),
		cmocka_unit_test(t_bodies),
		cmocka_unit_test(t_split_urls),
		cmocka_unit_test(t_parsers_read_etcd),
		cmocka_unit_test(t_parsers_refuse_garbage),
		cmocka_unit_test(t_wins_and_renews),
		cmocka_unit_test(t_stops_granting_before_the_lease_can_expire),
		cmocka_unit_test(t_a_lost_lease_or_key_ends_the_term),
		cmocka_unit_test(t_an_ended_term_revokes_its_lease),
		cmocka_unit_test(t_follows_then_campaigns_when_the_key_is_gone),
		cmocka_unit_test(t_a_retried_campaign_that_had_won),
		cmocka_unit_test(t_garbage_never_makes_a_leader),
		cmocka_unit_test(t_random_walk_keeps_the_invariant),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
