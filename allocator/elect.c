// SPDX-License-Identifier: Apache-2.0
/* Leader election on etcd: the state machine (allocator/elect.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/elect.h"
#include "budget/budget.h"

const char *const elect_step_names[ELECT_STEPS] = {
	[ELECT_NONE] = "none",		 [ELECT_GRANT] = "grant", [ELECT_CAMPAIGN] = "campaign",
	[ELECT_KEEPALIVE] = "keepalive", [ELECT_CHECK] = "check", [ELECT_RANGE] = "range",
	[ELECT_REVOKE] = "revoke",
};

int elect_split_urls(const char *list, char urls[ELECT_URLS_MAX][ELECT_URL_MAX + 1], size_t *ret_n,
		     const char **bad, size_t *bad_len)
{
	const char *p = list;

	*ret_n = 0;
	for (;;) {
		size_t len = strcspn(p, ",");
		char *u;

		if (!budget_leader_url_ok(p, len) || len > ELECT_URL_MAX) {
			*bad = p;
			*bad_len = len;
			return -EINVAL;
		}
		if (*ret_n == ELECT_URLS_MAX)
			return -E2BIG;
		u = urls[(*ret_n)++];
		snprintf(u, ELECT_URL_MAX + 1, "%.*s", (int)len, p);
		while (*u && u[strlen(u) - 1] == '/')
			u[strlen(u) - 1] = '\0';
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

void elect_init(struct elect *el, const struct elect_config *cfg, int64_t now_ms)
{
	memset(el, 0, sizeof(*el));
	el->cfg = *cfg;
	el->next_ms = now_ms;
	el->lease_ttl_ms = cfg->ttl_s * 1000;
	/*
	 * Room for a keepalive's flight and clocks that run at slightly
	 * different rates: a fifth of the TTL, at least half a second.
	 */
	el->margin_ms = el->lease_ttl_ms / 5 > 500 ? el->lease_ttl_ms / 5 : 500;
}

static int64_t renew_every_ms(const struct elect *el)
{
	return el->lease_ttl_ms / 3;
}

/* A request's timeout: a leader's renewal must fail well within its margin. */
static int timeout_ms(const struct elect *el)
{
	int64_t t = el->margin_ms / 2;

	return t > 2000 ? 2000 : t < 200 ? 200 : (int)t;
}

static void end_term(struct elect *el, const char *why)
{
	el->leading = false;
	el->leader_known = false;
	el->epoch = 0;
	el->revoke_id = el->lease_id;
	el->lease_id = 0;
	el->stats.step_downs++;
	snprintf(el->step_down_why, sizeof(el->step_down_why), "%s", why);
}

int elect_tick(struct elect *el, int64_t now_ms)
{
	if (el->leading && now_ms >= el->lead_until_ms) {
		end_term(el, "the etcd lease could not be renewed in time");
		return ELECT_LOST;
	}
	return 0;
}

bool elect_leading(const struct elect *el, int64_t now_ms)
{
	return el->leading && now_ms < el->lead_until_ms;
}

int64_t elect_next_ms(const struct elect *el)
{
	int64_t t = el->pending ? el->sent_ms + timeout_ms(el) : el->next_ms;

	return el->leading && el->lead_until_ms < t ? el->lead_until_ms : t;
}

static int request(struct elect *el, int64_t now_ms, enum elect_step step, char *body,
		   struct elect_request *req)
{
	static const char *const paths[ELECT_STEPS] = {
		[ELECT_GRANT] = ETCD_PATH_GRANT,	 [ELECT_CAMPAIGN] = ETCD_PATH_TXN,
		[ELECT_KEEPALIVE] = ETCD_PATH_KEEPALIVE, [ELECT_CHECK] = ETCD_PATH_RANGE,
		[ELECT_RANGE] = ETCD_PATH_RANGE,	 [ELECT_REVOKE] = ETCD_PATH_REVOKE,
	};

	if (!body)
		return -ENOMEM;
	req->step = step;
	snprintf(req->url, sizeof(req->url), "%s%s", el->cfg.urls[el->url], paths[step]);
	req->body = body;
	req->timeout_ms = timeout_ms(el);
	el->pending = step;
	el->sent_ms = now_ms;
	el->stats.requests[step]++;
	return 1;
}

int elect_due(struct elect *el, int64_t now_ms, struct elect_request *req)
{
	if (el->pending || now_ms < el->next_ms)
		return 0;
	/* a lease kept for a campaign's retry that may have run out since */
	if (!el->leading && el->lease_id &&
	    now_ms >= el->lease_sent_ms + el->lease_ttl_ms - el->margin_ms)
		el->lease_id = 0;
	if (el->leading) {
		if (el->check_next)
			return request(el, now_ms, ELECT_CHECK, etcd_range_body(el->cfg.key), req);
		return request(el, now_ms, ELECT_KEEPALIVE, etcd_lease_body(el->lease_id), req);
	}
	if (el->revoke_id)
		return request(el, now_ms, ELECT_REVOKE, etcd_lease_body(el->revoke_id), req);
	if (el->lease_id)
		return request(el, now_ms, ELECT_CAMPAIGN,
			       etcd_campaign_body(el->cfg.key, el->cfg.advertise, el->lease_id),
			       req);
	if (el->leader_known)
		return request(el, now_ms, ELECT_RANGE, etcd_range_body(el->cfg.key), req);
	/* nobody known to lead: try to */
	return request(el, now_ms, ELECT_GRANT, etcd_grant_body(el->cfg.ttl_s), req);
}

int elect_resign(struct elect *el, int64_t now_ms, struct elect_request *req)
{
	int64_t id = el->lease_id;

	if (!el->leading || !id)
		return 0;
	el->leading = false;
	el->leader_known = false;
	el->lease_id = 0;
	el->pending = ELECT_NONE;
	return request(el, now_ms, ELECT_REVOKE, etcd_lease_body(id), req);
}

/*
 * What a follower learnt of the key: its holder, or nobody (campaign next).
 * A key that still names this replica is a term it has ended: nobody
 * leads until it expires.
 */
static void follow(struct elect *el, const struct etcd_kv *kv, int64_t now_ms)
{
	el->leader_known = kv->exists && strcmp(kv->value, el->cfg.advertise) != 0;
	if (kv->exists) {
		el->leader_epoch = kv->create_revision;
		snprintf(el->leader, sizeof(el->leader), "%s", kv->value);
		el->next_ms = now_ms + ELECT_POLL_MS;
	} else {
		el->next_ms = now_ms;
	}
}

static int failed(struct elect *el, enum elect_step step, int64_t now_ms, const char *why)
{
	el->stats.failures[step]++;
	el->etcd_ok = false;
	snprintf(el->last_error, sizeof(el->last_error), "%s: %s (%s)", elect_step_names[step], why,
		 el->cfg.urls[el->url]);
	el->url = (el->url + 1) % el->cfg.n_urls;
	/* a leader retries its renewal at once; the others need not hurry */
	el->next_ms = now_ms + (el->leading ? ELECT_RETRY_MS : 2 * ELECT_RETRY_MS);
	return 0;
}

/* A campaign's answer: ELECT_WON, 0 (another leads), or -EBADMSG with bad. */
static int campaigned(struct elect *el, int64_t now_ms, const char *text, size_t len, char *bad)
{
	struct etcd_kv kv;
	int64_t rev = 0;
	bool won = false;
	int r = etcd_parse_campaign(text, len, &won, &rev, &kv, bad);

	if (r < 0)
		return r;
	/* a retried campaign whose first try had won: the key holds this lease */
	if (!won && kv.exists && kv.lease == el->lease_id &&
	    strcmp(kv.value, el->cfg.advertise) == 0) {
		won = true;
		rev = kv.create_revision;
	}
	if (!won) {
		/* lost: the lease is not needed, the holder is the leader */
		el->lease_id = 0;
		follow(el, &kv, now_ms);
		el->etcd_ok = true;
		return 0;
	}
	el->leading = true;
	el->epoch = rev;
	el->lead_until_ms = el->lease_sent_ms + el->lease_ttl_ms - el->margin_ms;
	el->leader_known = true;
	el->leader_epoch = rev;
	snprintf(el->leader, sizeof(el->leader), "%s", el->cfg.advertise);
	el->check_next = false;
	el->next_ms = el->lease_sent_ms + renew_every_ms(el);
	el->stats.terms++;
	el->etcd_ok = true;
	return ELECT_WON;
}

int elect_answer(struct elect *el, int64_t now_ms, long status, const char *text, size_t len,
		 const char *why)
{
	bool ok = status == 200;
	enum elect_step step = el->pending;
	int64_t sent = el->sent_ms, ttl_s = 0, id = 0;
	char bad[ETCD_WHY_MAX];
	struct etcd_kv kv;
	int r = 0;

	if (!step)
		return 0;
	el->pending = ELECT_NONE;
	/* an ended term's lease, revoked, or gone already (404: etcd's "lease not found") */
	if (step == ELECT_REVOKE && (ok || status == 404)) {
		el->revoke_id = 0;
		el->next_ms = now_ms;
		el->etcd_ok = true;
		return 0;
	}
	if (!ok)
		return failed(el, step, now_ms, why && *why ? why : "no answer");
	switch (step) {
	case ELECT_GRANT:
		if ((r = etcd_parse_grant(text, len, &id, &ttl_s, bad)) < 0)
			break;
		el->lease_id = id;
		el->lease_ttl_ms = ttl_s * 1000;
		el->lease_sent_ms = sent;
		el->next_ms = now_ms;
		break;
	case ELECT_CAMPAIGN:
		r = campaigned(el, now_ms, text, len, bad);
		if (r == ELECT_WON)
			return r;
		break;
	case ELECT_KEEPALIVE:
		if ((r = etcd_parse_keepalive(text, len, &ttl_s, bad)) < 0)
			break;
		if (!el->leading)
			break;
		if (ttl_s <= 0) {
			end_term(el, "etcd says the lease is gone");
			el->next_ms = now_ms;
			el->etcd_ok = true;
			return ELECT_LOST;
		}
		el->lease_sent_ms = sent;
		el->lease_ttl_ms = ttl_s * 1000;
		if (sent + el->lease_ttl_ms - el->margin_ms > el->lead_until_ms)
			el->lead_until_ms = sent + el->lease_ttl_ms - el->margin_ms;
		el->check_next = true;
		el->next_ms = sent + renew_every_ms(el) / 2;
		break;
	case ELECT_CHECK:
		if ((r = etcd_parse_range(text, len, &kv, bad)) < 0)
			break;
		if (!el->leading)
			break;
		if (!kv.exists || kv.create_revision != el->epoch || kv.lease != el->lease_id) {
			end_term(el, kv.exists ? "the election key is another's"
					       : "the election key is gone");
			follow(el, &kv, now_ms);
			el->etcd_ok = true;
			return ELECT_LOST;
		}
		el->check_next = false;
		el->next_ms = el->lease_sent_ms + renew_every_ms(el);
		break;
	case ELECT_RANGE:
		if ((r = etcd_parse_range(text, len, &kv, bad)) < 0)
			break;
		follow(el, &kv, now_ms);
		break;
	case ELECT_REVOKE:
	case ELECT_NONE:
	case ELECT_STEPS:
		break;
	}
	if (r < 0)
		return failed(el, step, now_ms, bad);
	el->etcd_ok = true;
	return 0;
}
