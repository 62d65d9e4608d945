// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator's HTTP side: POST /v1/report (a node's report in, its
 * grants out), the metrics page, the probes and an index.
 *
 * A report that is not one (bad JSON, a wrong type, an out-of-range value,
 * over BUDGET_BODY_MAX, another version) is answered 400 with one line
 * saying why, counted by reason, and changes nothing: it never reaches the
 * allocation state.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/internal.h"
#include "lib/util.h"
#include "lib/version.h"

static const char text_type[] = "text/plain; charset=utf-8";
static const char json_ctype[] = "application/json";

static const char index_html[] =
	"<!DOCTYPE html>\n<html><head><title>Tollgate allocator</title></head><body>\n"
	"<h1>Tollgate allocator</h1>\n<ul>\n<li>POST /v1/report (the nodes' reports)</li>\n"
	"<li><a href=\"metrics\">/metrics</a> (Prometheus text format 0.0.4)</li>\n"
	"<li><a href=\"healthz\">/healthz</a></li>\n<li><a href=\"readyz\">/readyz</a></li>\n"
	"</ul>\n</body></html>\n";

static const char *const result_names[ALLOC_REPORT_RESULTS] = {
	[ALLOC_REPORT_OK] = "ok",
	[ALLOC_REPORT_MALFORMED] = "malformed",
	[ALLOC_REPORT_OVERSIZED] = "oversized",
	[ALLOC_REPORT_VERSION] = "version",
	[ALLOC_REPORT_REDIRECTED] = "redirected",
	[ALLOC_REPORT_NO_LEADER] = "no-leader",
	[ALLOC_REPORT_UNAUTHENTICATED] = "unauthenticated",
	[ALLOC_REPORT_FORBIDDEN] = "forbidden",
	[ALLOC_REPORT_BUSY] = "busy",
};

/*
 * A replica that does not lead: 307 to the leader it knows (the nodes
 * report there until that fails), 503 while it knows none. Nothing of the
 * report is kept.
 */
static const char no_leader[] =
	"no leader: this replica does not grant, and knows of none that does\n";

static void not_leading(struct app *app, struct http_reply *ret)
{
	struct alloc_elect_view v;
	struct budget_redirect d;
	size_t len;
	char *text;

	alloc_elect_view(app, &v);
	d = (struct budget_redirect){ .epoch = (uint64_t)v.leader_epoch };
	/* (this replica's own term, not yet taken up by the loop: no redirect to itself) */
	if (v.leader_known && !v.leading && budget_leader_url_ok(v.leader, strlen(v.leader))) {
		snprintf(d.leader, sizeof(d.leader), "%s", v.leader);
		/* the header is added once this returns: kept here till then */
		snprintf(app->redirect_to, sizeof(app->redirect_to), "%s", v.leader);
		if (budget_redirect_build(&d, &text, &len) == 0) {
			free(app->redirect);
			app->redirect = text;
			app->stats.reports[ALLOC_REPORT_REDIRECTED]++;
			*ret = (struct http_reply){ .status = 307,
						    .content_type = json_ctype,
						    .body = text,
						    .len = len,
						    .location = app->redirect_to };
			return;
		}
	}
	app->stats.reports[ALLOC_REPORT_NO_LEADER]++;
	*ret = (struct http_reply){ .status = 503,
				    .content_type = text_type,
				    .body = no_leader,
				    .len = sizeof(no_leader) - 1 };
}

static void route(void *cls, const char *path, struct http_reply *ret)
{
	(void)cls;
	if (strcmp(path, "/metrics") == 0) {
		ret->page = true;
	} else if (strcmp(path, "/healthz") == 0) {
		*ret = (struct http_reply){ .status = 200,
					    .content_type = text_type,
					    .body = "ok\n",
					    .len = 3 };
	} else if (strcmp(path, "/readyz") == 0) {
		/* serving means the config is loaded and the socket listens */
		*ret = (struct http_reply){ .status = 200,
					    .content_type = text_type,
					    .body = "ready\n",
					    .len = 6 };
	} else if (strcmp(path, BUDGET_REPORT_PATH) == 0) {
		*ret = (struct http_reply){ .status = 405,
					    .content_type = text_type,
					    .body = "POST a report\n",
					    .len = 14 };
	} else if (strcmp(path, "/") == 0) {
		*ret = (struct http_reply){ .status = 200,
					    .content_type = "text/html; charset=utf-8",
					    .body = index_html,
					    .len = sizeof(index_html) - 1 };
	}
}

/*
 * A refused report, logged once per ALLOC_REFUSED_LOG_MS with how many more
 * came since (a broken agent on every node must not flood the log).
 */
static void refused(struct app *app, enum alloc_report_result why, struct http_reply *ret)
{
	static const unsigned int status[ALLOC_REPORT_RESULTS] = {
		[ALLOC_REPORT_UNAUTHENTICATED] = 401,
		[ALLOC_REPORT_FORBIDDEN] = 403,
		[ALLOC_REPORT_BUSY] = 503,
	};
	int64_t now = time_mono_ms();
	size_t n;

	app->stats.reports[why]++;
	if (!app->refused_logged_ms || now - app->refused_logged_ms >= ALLOC_REFUSED_LOG_MS) {
		tg_log(TG_LOG_WARN, "msg=\"report refused\" result=%s err=%s refused_since=%llu",
		       result_names[why], LOGFMT_Q(app->reason),
		       (unsigned long long)app->refused_since_log);
		app->refused_logged_ms = now;
		app->refused_since_log = 0;
	} else {
		app->refused_since_log++;
	}
	n = strlen(app->reason);
	if (n + 1 < sizeof(app->reason))
		app->reason[n++] = '\n';
	*ret = (struct http_reply){ .status = status[why] ? status[why] : 400,
				    .content_type = text_type,
				    .body = app->reason,
				    .len = n };
	if (why == ALLOC_REPORT_BUSY)
		ret->retry_after_s = 10;
	if (why == ALLOC_REPORT_UNAUTHENTICATED)
		ret->www_authenticate = "Bearer realm=\"" AUTH_AUDIENCE
					"\", error=\"invalid_token\"";
}

/* The node an Authorization header's token proves (trust.c); without --jwks, any. false: refused. */
static bool authenticated(struct app *app, const char *authorization, struct auth_identity *ret,
			  struct http_reply *reply)
{
	char why[256];
	enum auth_result r;

	if (!app->trust.on)
		return true;
	r = alloc_trust_verify(app, authorization, ret, why, sizeof(why));
	if (r == AUTH_OK)
		return true;
	snprintf(app->reason, sizeof(app->reason) - 1, "unauthenticated (%s): %s",
		 auth_result_names[r], why);
	refused(app, ALLOC_REPORT_UNAUTHENTICATED, reply);
	return false;
}

static void post(void *cls, const struct http_request *req, struct http_reply *ret)
{
	struct app *app = cls;
	const char *path = req->path, *body = req->body;
	size_t len = req->len;
	struct budget_report rep;
	struct budget_answer ans;
	struct auth_identity who = { 0 };
	struct tg_err e = { 0 };
	char *text;
	size_t tlen;
	int r;

	if (strcmp(path, BUDGET_REPORT_PATH) != 0)
		return; /* 404 */
	/* before a byte of the body is parsed: a stranger's report costs a lookup */
	if (!authenticated(app, req->authorization, &who, ret))
		return;
	if (len > BUDGET_BODY_MAX) {
		snprintf(app->reason, sizeof(app->reason) - 1,
			 "report of %zu bytes: at most %d are read", len, BUDGET_BODY_MAX);
		refused(app, ALLOC_REPORT_OVERSIZED, ret);
		return;
	}
	r = budget_report_parse(body, len, &rep, &e);
	if (r < 0) {
		snprintf(app->reason, sizeof(app->reason) - 1, "%s",
			 e.msg[0] ? e.msg : strerror(-r));
		refused(app, r == -EPROTO ? ALLOC_REPORT_VERSION : ALLOC_REPORT_MALFORMED, ret);
		return;
	}
	/* a node speaks for itself alone */
	if (app->trust.on && strcmp(rep.node, who.node) != 0) {
		snprintf(app->reason, sizeof(app->reason) - 1,
			 "forbidden: the token is node \"%s\"'s, the report speaks for \"%.253s\"",
			 who.node, rep.node);
		budget_report_free(&rep);
		refused(app, ALLOC_REPORT_FORBIDDEN, ret);
		return;
	}
	/* asked at the answer itself: a term whose renewal is late grants nothing more */
	if (!alloc_leading(app)) {
		budget_report_free(&rep);
		not_leading(app, ret);
		return;
	}
	r = budget_alloc_report(app->ba, &rep, time_mono_ms(), &ans);
	ans.epoch = app->elect_on ? (uint64_t)app->term.epoch : 0;
	/*
	 * the policy when the node holds another: borrowed for the text, never
	 * freed here; to a node that predates directions, its uploads alone
	 */
	{
		const struct budget_set *p = rep.directions ? &app->pol.budgets : &app->pol.uploads;

		if (strcmp(rep.policy, p->id) != 0)
			ans.policy = *p;
	}
	budget_report_free(&rep);
	if (r == 0) {
		r = budget_answer_build(&ans, &text, &tlen);
		ans.policy = (struct budget_set){ 0 };
		budget_answer_free(&ans);
	}
	if (r == -ENOSPC) {
		snprintf(app->reason, sizeof(app->reason) - 1,
			 "busy: the allocator remembers %u nodes, its --max-nodes, and this one is "
			 "not among them",
			 app->cli.max_nodes);
		refused(app, ALLOC_REPORT_BUSY, ret);
		return;
	}
	if (r < 0) {
		app->stats.report_failures++;
		*ret = (struct http_reply){ .status = 503,
					    .content_type = text_type,
					    .body = "out of memory\n",
					    .len = 14 };
		return;
	}
	app->stats.reports[ALLOC_REPORT_OK]++;
	alloc_term_granted(app);
	/* the server copies it when this returns; it goes with the next answer */
	free(app->answer);
	app->answer = text;
	*ret = (struct http_reply){ .status = 200,
				    .content_type = json_ctype,
				    .body = text,
				    .len = tlen };
}

/* ---- the metrics page ---- */

/*
 * The per-budget families: one sample per budget of the config, in its
 * order, labelled by namespace and direction (egress: uploads, ingress:
 * downloads; the two are separate budgets and never add up).
 */
enum view_field { V_BUDGET, V_GRANTED, V_COMMITTED, V_DEMAND, V_USAGE, V_SAFE_SHARE, V_NODES };

static const struct view_family {
	const char *name, *help;
	enum view_field field;
} view_families[] = {
	{ "tollgate_allocator_budget_bytes_per_second",
	  "A namespace's cluster-wide internet budget in one direction (the policy's "
	  "internetEgress: direction egress; internetIngress: direction ingress).",
	  V_BUDGET },
	{ "tollgate_allocator_granted_bytes_per_second",
	  "Sum of the grants last sent to the nodes.", V_GRANTED },
	{ "tollgate_allocator_committed_bytes_per_second",
	  "Sum of what the nodes may be applying (a lowered grant counts at its old value until "
	  "the node reports it applied or its lease ran out); at most the budget.",
	  V_COMMITTED },
	{ "tollgate_allocator_demand_bytes_per_second", "Sum of the nodes' demand estimates.",
	  V_DEMAND },
	{ "tollgate_allocator_usage_bytes_per_second",
	  "Sum of the rates the nodes last reported sending.", V_USAGE },
	{ "tollgate_allocator_safe_share_bytes_per_second",
	  "What a node whose lease ran out falls to: budget x 0.9 / nodes holding grants.",
	  V_SAFE_SHARE },
	{ "tollgate_allocator_nodes", "Nodes holding grants of the budget.", V_NODES },
};

static uint64_t view_value(const struct budget_view *v, enum view_field f)
{
	switch (f) {
	case V_BUDGET:
		return v->budget;
	case V_GRANTED:
		return v->granted;
	case V_COMMITTED:
		return v->committed;
	case V_DEMAND:
		return v->demand;
	case V_USAGE:
		return v->usage;
	case V_SAFE_SHARE:
		return v->safe_share;
	case V_NODES:
		return v->nodes;
	}
	return 0;
}

/* Leader election's families (--etcd only). */
static void render_election(struct app *app, struct expo *x)
{
	struct alloc_elect_view v;
	const struct alloc_elect_view *el = &v;

	alloc_elect_view(app, &v);
	expo_family(x, "tollgate_allocator_epoch", "gauge",
		    "The term of the leader this replica knows of (the election key's revision in "
		    "etcd; grants carry it); 0: none known.");
	expo_sample_u64(x, "tollgate_allocator_epoch", NULL,
			el->leading || el->leader_known ? (uint64_t)el->leader_epoch : 0);
	expo_family(x, "tollgate_allocator_etcd_up", "gauge",
		    "1 when etcd answered this replica's last request.");
	expo_sample_u64(x, "tollgate_allocator_etcd_up", NULL, el->etcd_ok);
	expo_family(x, "tollgate_allocator_etcd_requests_total", "counter",
		    "Requests to etcd's JSON gateway, by step of the election and result.");
	for (int i = ELECT_GRANT; i < ELECT_STEPS; i++) {
		const char *ok[] = { "step", elect_step_names[i], "result", "ok", NULL };
		const char *err[] = { "step", elect_step_names[i], "result", "error", NULL };

		expo_sample_u64(x, "tollgate_allocator_etcd_requests_total", ok,
				el->stats.requests[i] - el->stats.failures[i]);
		expo_sample_u64(x, "tollgate_allocator_etcd_requests_total", err,
				el->stats.failures[i]);
	}
	expo_family(x, "tollgate_allocator_terms_total", "counter",
		    "Terms this replica won (campaigns on the election key).");
	expo_sample_u64(x, "tollgate_allocator_terms_total", NULL, el->stats.terms);
	expo_family(x, "tollgate_allocator_step_downs_total", "counter",
		    "Terms that ended other than by a clean shutdown (the lease not renewed in "
		    "time, or the key lost).");
	expo_sample_u64(x, "tollgate_allocator_step_downs_total", NULL, el->stats.step_downs);
}

static void render(struct app *app, struct expo *x)
{
	static const char *const version[] = { "version", tg_build_version, "commit",
					       tg_build_commit, NULL };
	size_t n = budget_alloc_views(app->ba, app->views, app->pol.budgets.n);
	struct http_stats st;

	if (n > app->pol.budgets.n)
		n = app->pol.budgets.n;
	http_get_stats(app->http, &st);
	expo_family(x, "tollgate_build_info", "gauge", "The running build; always 1.");
	expo_sample_u64(x, "tollgate_build_info", version, 1);
	expo_family(x, "tollgate_allocator_policy_info", "gauge",
		    "1 for the policy in force: its id (what answers carry to the nodes, and "
		    "tollgate_budget_policy_info shows each node holds) and its budgets.");
	{
		char count[16];

		snprintf(count, sizeof(count), "%zu", app->pol.budgets.n);
		expo_sample_u64(x, "tollgate_allocator_policy_info",
				(const char *const[]){ "policy", app->pol.budgets.id, "budgets",
						       count, NULL },
				1);
	}
	expo_family(x, "tollgate_allocator_leader", "gauge",
		    "1 when this replica grants (without leader election: always).");
	expo_sample_u64(x, "tollgate_allocator_leader", NULL, alloc_leading(app));
	if (app->elect_on)
		render_election(app, x);
	expo_family(x, "tollgate_allocator_learning", "gauge",
		    "1 for one lease after a start (or a new leaseSeconds): each node is granted "
		    "only what it reports holding.");
	expo_sample_u64(x, "tollgate_allocator_learning", NULL,
			budget_alloc_learning(app->ba, time_mono_ms()));
	/* a replica that does not lead allocates nothing: only the leader's are the budgets' */
	if (!alloc_leading(app))
		n = 0;
	for (size_t f = 0; f < ARRAY_SIZE(view_families); f++) {
		const struct view_family *vf = &view_families[f];

		expo_family(x, vf->name, "gauge", vf->help);
		for (size_t i = 0; i < n; i++) {
			const char *const labels[] = { "namespace", app->views[i].ns, "direction",
						       budget_dir_names[app->views[i].dir], NULL };

			expo_sample_u64(x, vf->name, labels, view_value(&app->views[i], vf->field));
		}
	}
	expo_family(x, "tollgate_allocator_reports_total", "counter",
		    "Reports received, by result: ok (answered with grants), malformed, oversized "
		    "(over the wire's limit, the HTTP server's 413s included), version (one this "
		    "allocator does not speak), redirected (to the leader), no-leader, "
		    "unauthenticated (no valid token of the agents', 401), forbidden (a token of "
		    "another node, 403) or busy (no room for more bodies in flight, or a new node "
		    "past --max-nodes: 503); only ok "
		    "changes anything.");
	for (int i = 0; i < ALLOC_REPORT_RESULTS; i++) {
		const char *labels[] = { "result", result_names[i], NULL };
		uint64_t v = app->stats.reports[i];

		if (i == ALLOC_REPORT_OVERSIZED)
			v += st.body_too_large;
		if (i == ALLOC_REPORT_BUSY)
			v += st.bodies_refused;
		expo_sample_u64(x, "tollgate_allocator_reports_total", labels, v);
	}
	expo_family(x, "tollgate_allocator_report_failures_total", "counter",
		    "Good reports that could not be answered (out of memory: 503).");
	expo_sample_u64(x, "tollgate_allocator_report_failures_total", NULL,
			app->stats.report_failures);
	expo_family(x, "tollgate_allocator_rounds_total", "counter", "Allocation rounds run.");
	expo_sample_u64(x, "tollgate_allocator_rounds_total", NULL, app->stats.rounds);
	expo_family(x, "tollgate_allocator_round_duration_seconds", "gauge",
		    "How long the last allocation round took.");
	expo_sample(x, "tollgate_allocator_round_duration_seconds", NULL, app->stats.round_seconds);
	expo_family(
		x, "tollgate_allocator_policy_reloads_total", "counter",
		"Policy file changes read, by result: ok, or error (refused whole: the policy in force stays).");
	{
		static const char *const ok[] = { "result", "ok", NULL };
		static const char *const err[] = { "result", "error", NULL };

		expo_sample_u64(x, "tollgate_allocator_policy_reloads_total", ok,
				app->stats.reloads - app->stats.reload_errors);
		expo_sample_u64(x, "tollgate_allocator_policy_reloads_total", err,
				app->stats.reload_errors);
	}
	expo_family(x, "tollgate_allocator_report_bodies_bytes", "gauge",
		    "Bytes held now by report bodies being received, by client: proven (a token "
		    "verified before) or unproven (at most a quarter of the cap).");
	expo_sample_u64(x, "tollgate_allocator_report_bodies_bytes",
			(const char *const[]){ "client", "proven", NULL },
			st.bodies_bytes - st.unproven_bytes);
	expo_sample_u64(x, "tollgate_allocator_report_bodies_bytes",
			(const char *const[]){ "client", "unproven", NULL }, st.unproven_bytes);
	alloc_trust_render(app, x);
	exporter_render_http(x, &st);
}

/* The page, collected for the HTTP server; run from the loop (http_run). */
static int collect(void *cls, char **ret_buf, size_t *ret_len)
{
	struct app *app = cls;
	size_t len;
	char *buf;

	expo_reset(&app->page);
	render(app, &app->page);
	if (app->page.overflow) {
		tg_log(TG_LOG_ERROR, "msg=\"scrape failed\" err=\"the page outgrew its bound\"");
		return -ENOBUFS;
	}
	buf = expo_take(&app->page, &len);
	if (!buf)
		return -ENODATA;
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

/*
 * Before a byte of a report's body is read: its token verified (or found
 * verified before). A stranger's report is refused here, its body never
 * read: a flood of them costs a header and at most a signature each.
 */
static int admit(void *cls, const char *path, const char *authorization,
		 const struct sockaddr_in *peer, struct http_reply *refusal)
{
	struct app *app = cls;
	struct auth_identity who;

	(void)peer;
	if (!app->trust.on || strcmp(path, BUDGET_REPORT_PATH) != 0)
		return 0;
	if (authenticated(app, authorization, &who, refusal))
		return 1;
	return -1;
}

void alloc_http_config(struct app *app, struct http_config *hc)
{
	hc->route = route;
	hc->route_cls = app;
	hc->post = post;
	hc->post_cls = app;
	/*
	 * Twice the wire's limit: a report a little over it is read and
	 * answered 400 saying so; one far over is refused unread (413).
	 */
	hc->max_body = 2 * BUDGET_BODY_MAX;
	hc->admit = admit;
	hc->admit_cls = app;
	/*
	 * Bodies in flight: a node's report is a few hundred bytes, so these
	 * hold thousands at once; strangers (no token verified before) hold at
	 * most a quarter, so that a flood of them never keeps the nodes out.
	 */
	hc->max_bodies_bytes = ALLOC_BODIES_BYTES;
	/*
	 * A node's report is refused once in a while (a token not rotated):
	 * an address refused more than this a second is a flood, benched.
	 */
	hc->refusals_per_client = ALLOC_REFUSALS_PER_CLIENT;
	hc->unproven_bodies_bytes = ALLOC_BODIES_BYTES / 4;
	hc->tls_cert_file = app->cli.tls_cert;
	hc->tls_key_file = app->cli.tls_key;
	hc->collect = collect;
	hc->collect_cls = app;
	hc->page_type = "text/plain; version=0.0.4; charset=utf-8";
	/* Prometheus and the probes: a page is cheap, and each scrape sees the last round */
	hc->cache_ms = 0;
	/* the last slots go to addresses holding none (the scraper, the probes) */
	hc->reserve = hc->max_connections > 256 ? 64 : hc->max_connections / 4;
	/* a node's report and its answer: a few hundred bytes of headers */
	hc->request_memory = 8192;
	/*
	 * After a restart every node reconnects within one report period: the
	 * kernel holds that burst (up to net.core.somaxconn) rather than fall
	 * back to SYN cookies and retries seconds later.
	 */
	hc->backlog = 4096;
}
