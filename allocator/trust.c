// SPDX-License-Identifier: Apache-2.0
/*
 * Who may report (allocator/internal.h): each report's bearer token checked
 * against the cluster's service-account issuer keys (auth/auth.h), which
 * come from --jwks: a file (re-read when its directory changes, as a
 * ConfigMap's does, and on SIGHUP) or a URL (the API server's
 * /openid/v1/jwks, fetched in the loop every ALLOC_JWKS_REFRESH_MS and
 * soon after a token names a key the set does not have: the issuer
 * rotated). A set that cannot be read or fetched leaves the one in force.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocator/internal.h"
#include "httpc/httpc.h"
#include "lib/version.h"
#include "lib/util.h"

bool alloc_trust_url(const char *jwks)
{
	return strncmp(jwks, "https://", 8) == 0 || strncmp(jwks, "http://", 7) == 0;
}

/* A set read or fetched: taken when it differs from the one in force. */
static int take_keys(struct app *app, const char *text, size_t len, const char *from)
{
	struct alloc_trust *t = &app->trust;
	struct auth_keys *k = NULL;
	struct tg_err e = { 0 };
	int r = auth_keys_parse(text, len, &k, &e);

	if (r < 0) {
		t->jwks_errors++;
		tg_log(TG_LOG_ERROR,
		       "msg=\"the issuer's keys were refused; the set in force stays\" jwks=%s "
		       "err=%s keys=%zu",
		       LOGFMT_Q(from), LOGFMT_Q(e.msg[0] ? e.msg : strerror(-r)),
		       auth_keys_count(t->keys));
		return r;
	}
	t->jwks_loads++;
	if (t->keys && strcmp(auth_keys_id(t->keys), auth_keys_id(k)) == 0) {
		auth_keys_free(k);
		return 0;
	}
	tg_log(TG_LOG_INFO, "msg=\"the issuer's keys\" jwks=%s keys=%zu set=%s was=%s",
	       LOGFMT_Q(from), auth_keys_count(k), auth_keys_id(k),
	       t->keys ? auth_keys_id(t->keys) : "none");
	auth_keys_free(t->keys);
	t->keys = k;
	/* a key gone takes its tokens with it */
	auth_cache_clear(t->cache);
	return 1;
}

int alloc_trust_reload(struct app *app, bool hup)
{
	struct alloc_trust *t = &app->trust;
	char *text = NULL;
	size_t len = 0;
	int r;

	if (!t->on)
		return 0;
	if (t->url) {
		/* SIGHUP: the operator's way to have a URL's set now */
		if (hup)
			t->fetch_ms = time_mono_ms();
		return 0;
	}
	r = read_file(app->cli.jwks, AUTH_JWKS_MAX, &text, &len);
	if (r < 0) {
		t->jwks_errors++;
		tg_log(TG_LOG_ERROR,
		       "msg=\"the issuer's keys cannot be read; the set in force stays\" jwks=%s "
		       "err=%s",
		       LOGFMT_Q(app->cli.jwks), LOGFMT_Q(strerror(-r)));
		return r;
	}
	r = take_keys(app, text, len, app->cli.jwks);
	free(text);
	return r;
}

int alloc_trust_setup(struct app *app)
{
	struct alloc_trust *t = &app->trust;
	const struct alloc_cli *cli = &app->cli;

	if (!cli->jwks)
		return 0;
	t->on = true;
	t->url = alloc_trust_url(cli->jwks);
	snprintf(t->subject, sizeof(t->subject), "system:serviceaccount:%s", cli->agent_account);
	t->want = (struct auth_want){ .issuer = cli->issuer,
				      .audience = AUTH_AUDIENCE,
				      .subject = t->subject };
	t->cache = auth_cache_new(ALLOC_TOKENS_MAX);
	if (!t->cache)
		return -ENOMEM;
	/* a file must be there at the start: a typo in the path is found now, not by the nodes */
	if (!t->url && alloc_trust_reload(app, false) < 0)
		return -EINVAL;
	return 0;
}

void alloc_trust_free(struct app *app)
{
	struct alloc_trust *t = &app->trust;

	httpc_free(t->client);
	auth_keys_free(t->keys);
	auth_cache_free(t->cache);
	memset(t, 0, sizeof(*t));
}

/* ---- a URL's set, fetched in the loop ---- */

int alloc_trust_start(struct app *app, int epfd)
{
	struct alloc_trust *t = &app->trust;
	int r;

	if (!t->on || !t->url)
		return 0;
	r = httpc_new(epfd, "tollgate-allocator/" TG_VERSION, AUTH_JWKS_MAX, &t->client);
	if (r < 0)
		return r;
	r = httpc_set_tls(t->client, &(struct httpc_tls){ .ca_file = app->cli.jwks_ca });
	t->fetch_ms = time_mono_ms();
	return r;
}

bool alloc_trust_has_socket(const struct app *app, int fd)
{
	return app->trust.client && httpc_has_socket(app->trust.client, fd);
}

void alloc_trust_socket(struct app *app, int fd, uint32_t events)
{
	httpc_socket(app->trust.client, fd, events);
}

/* The bearer header of --jwks-token, read at each fetch (kubelet rotates it). */
static void fetch(struct app *app, int64_t now)
{
	struct alloc_trust *t = &app->trust;
	char header[AUTH_TOKEN_MAX + 32] = "", *tok = NULL;
	size_t len = 0;
	int r;

	t->fetch_ms = now + ALLOC_JWKS_REFRESH_MS;
	if (app->cli.jwks_token) {
		r = read_file(app->cli.jwks_token, AUTH_TOKEN_MAX, &tok, &len);
		if (r < 0) {
			t->jwks_errors++;
			tg_log(TG_LOG_ERROR, "msg=\"--jwks-token cannot be read\" path=%s err=%s",
			       LOGFMT_Q(app->cli.jwks_token), LOGFMT_Q(strerror(-r)));
			t->fetch_ms = now + ALLOC_JWKS_RETRY_MS;
			return;
		}
		while (len && (tok[len - 1] == '\n' || tok[len - 1] == ' ' || tok[len - 1] == '\r'))
			len--;
		snprintf(header, sizeof(header), "Authorization: Bearer %.*s", (int)len, tok);
		free(tok);
	}
	r = httpc_get(t->client, app->cli.jwks, header[0] ? header : NULL, ALLOC_JWKS_TIMEOUT_MS);
	if (r < 0) {
		t->jwks_errors++;
		t->fetch_ms = now + ALLOC_JWKS_RETRY_MS;
	}
}

void alloc_trust_run(struct app *app)
{
	struct alloc_trust *t = &app->trust;
	int64_t now = time_mono_ms();
	const char *body;
	char why[256];
	long status;
	size_t len;
	int r;

	if (!t->client)
		return;
	httpc_run_timer(t->client);
	r = httpc_take(t->client, &status, &body, &len, why, sizeof(why));
	if (r > 0 && take_keys(app, body, len, app->cli.jwks) >= 0) {
		t->fetch_failing = false;
	} else if (r != 0) {
		if (r < 0) {
			t->jwks_errors++;
			if (!t->fetch_failing)
				tg_log(TG_LOG_ERROR,
				       "msg=\"the issuer's keys cannot be fetched; the set in force "
				       "stays\" jwks=%s status=%ld err=%s keys=%zu",
				       LOGFMT_Q(app->cli.jwks), status, LOGFMT_Q(why),
				       auth_keys_count(t->keys));
		}
		t->fetch_failing = true;
		/* none yet: every report is refused until a set comes, so sooner */
		t->fetch_ms = now + (t->keys ? ALLOC_JWKS_RETRY_MS : ALLOC_JWKS_RETRY_MS / 5);
	}
	if (!httpc_busy(t->client) && now >= t->fetch_ms)
		fetch(app, now);
}

int alloc_trust_timeout_ms(const struct app *app)
{
	const struct alloc_trust *t = &app->trust;
	int64_t w;
	int c;

	if (!t->client)
		return -1;
	w = httpc_busy(t->client) ? 60000 : t->fetch_ms - time_mono_ms();
	w = w < 0 ? 0 : w > 60000 ? 60000 : w;
	c = httpc_timeout_ms(t->client);
	return c >= 0 && c < w ? c : (int)w;
}

/* ---- a report's token ---- */

enum auth_result alloc_trust_verify(struct app *app, const char *authorization,
				    struct auth_identity *ret, char *why, size_t size)
{
	struct alloc_trust *t = &app->trust;
	int64_t now = time(NULL), mono;
	enum auth_result r;
	const char *tok;
	size_t len = 0;

	tok = auth_bearer(authorization, &len);
	if (!tok) {
		snprintf(why, size,
			 "no bearer token: the node's projected service-account token "
			 "(budgets.tokenFile) proves it");
		r = AUTH_MALFORMED;
		goto out;
	}
	if (auth_cache_find(t->cache, tok, len, now, ret)) {
		t->cache_hits++;
		return AUTH_OK;
	}
	if (!t->keys) {
		snprintf(why, size, "the issuer's keys are not known yet (--jwks)");
		r = AUTH_UNKNOWN_KEY;
		goto out;
	}
	r = auth_verify(t->keys, &t->want, tok, len, now, ret, why, size);
	if (r == AUTH_OK) {
		t->verified++;
		auth_cache_put(t->cache, tok, len, ret, now);
		return AUTH_OK;
	}
	mono = time_mono_ms();
	/* a key the set does not have: the issuer may have rotated, fetched again soon */
	if (r == AUTH_UNKNOWN_KEY && t->client && t->fetch_ms > mono + ALLOC_JWKS_UNKNOWN_MS &&
	    mono - t->unknown_fetch_ms >= ALLOC_JWKS_UNKNOWN_MS) {
		t->unknown_fetch_ms = mono;
		t->fetch_ms = mono;
	}
out:
	t->refused[r]++;
	return r;
}

bool alloc_trust_proven(struct app *app, const char *authorization)
{
	struct alloc_trust *t = &app->trust;
	const char *tok;
	size_t len = 0;

	if (!t->on)
		return false;
	tok = auth_bearer(authorization, &len);
	return tok && auth_cache_find(t->cache, tok, len, time(NULL), NULL);
}

void alloc_trust_render(struct app *app, struct expo *x)
{
	struct alloc_trust *t = &app->trust;

	if (!t->on)
		return;
	expo_family(x, "tollgate_allocator_auth_keys", "gauge",
		    "Signing keys of the service-account issuer in force (--jwks); 0: none yet, "
		    "every report refused.");
	expo_sample_u64(x, "tollgate_allocator_auth_keys", NULL, auth_keys_count(t->keys));
	expo_family(x, "tollgate_allocator_auth_jwks_loads_total", "counter",
		    "Reads or fetches of --jwks, by result (error: the set in force stays).");
	expo_sample_u64(x, "tollgate_allocator_auth_jwks_loads_total",
			(const char *const[]){ "result", "ok", NULL }, t->jwks_loads);
	expo_sample_u64(x, "tollgate_allocator_auth_jwks_loads_total",
			(const char *const[]){ "result", "error", NULL }, t->jwks_errors);
	expo_family(x, "tollgate_allocator_auth_tokens", "gauge",
		    "Node tokens verified and remembered (each verified once, until it expires).");
	expo_sample_u64(x, "tollgate_allocator_auth_tokens", NULL, auth_cache_count(t->cache));
	expo_family(x, "tollgate_allocator_auth_verifications_total", "counter",
		    "Tokens whose signature was checked and held (a report with a token seen "
		    "before is not checked again).");
	expo_sample_u64(x, "tollgate_allocator_auth_verifications_total", NULL, t->verified);
	expo_family(x, "tollgate_allocator_auth_refusals_total", "counter",
		    "Reports refused for their token (401), by reason.");
	for (int i = AUTH_OK + 1; i < AUTH_RESULTS; i++)
		expo_sample_u64(x, "tollgate_allocator_auth_refusals_total",
				(const char *const[]){ "reason", auth_result_names[i], NULL },
				t->refused[i]);
}
