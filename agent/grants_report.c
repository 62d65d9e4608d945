// SPDX-License-Identifier: Apache-2.0
/*
 * A node's side of cluster budgets (agent.h): every reportSeconds (+-10 %)
 * it reads its budgeted namespaces from the store (grants_store.c) and
 * their classes from the kernel (grants_apply.c: uploads on tollgate-inet,
 * downloads on tollgate-inetdl, each (namespace, direction) a budget), ages
 * leases, puts each class's ceil where its state says, and reports to the
 * allocator; an answer's grants are applied the moment it arrives. The
 * arithmetic (the ceil of each state, the wire format) is budget/'s.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/internal.h"
#include "agent/lease_guard.h"
#include "budget/budget.h"
#include "lib/nl_cleanup.h"
#include "lib/util.h"

bool agent_budgets_enabled(const struct agent *a)
{
	const struct budget_policy *p = &a->cfg.budgets;

	return a->cfg_ok && p->allocator;
}

/*
 * The next report no later than `at_ms`, and never sooner than a quarter
 * period after the last one (nor in the past): at most four a period.
 */
static void report_by(struct agent *a, int64_t at_ms, int64_t now_ms)
{
	struct agent_budgets *b = &a->budgets;
	int64_t floor_ms = b->sent_ms + a->cfg.budgets.report_ms / 4;

	if (at_ms < floor_ms)
		at_ms = floor_ms;
	if (at_ms < now_ms)
		at_ms = now_ms;
	if (at_ms < b->next_ms)
		b->next_ms = at_ms;
}

/*
 * The Authorization header of a report: the node's projected token
 * (budgets.tokenFile), read at each report, since kubelet rotates it in
 * place. 0 with *ret filled ("" without tokenFile), or -errno (a token that
 * cannot be read: the report goes without it and is refused).
 */
static int token_header(struct agent *a, char *ret, size_t size)
{
	const char *path = a->cfg.budgets.token_file;
	char *tok = NULL;
	size_t len = 0, s = 0;
	int r;

	ret[0] = '\0';
	if (!path)
		return 0;
	r = read_file(path, AGENT_TOKEN_MAX, &tok, &len);
	if (r < 0)
		return r;
	while (s < len && (tok[s] == ' ' || tok[s] == '\n' || tok[s] == '\r' || tok[s] == '\t'))
		s++;
	while (len > s && (tok[len - 1] == ' ' || tok[len - 1] == '\n' || tok[len - 1] == '\r' ||
			   tok[len - 1] == '\t'))
		len--;
	if (len == s || memchr(tok + s, '\n', len - s) || memchr(tok + s, '\r', len - s)) {
		free(tok);
		return -EBADMSG;
	}
	snprintf(ret, size, "Authorization: Bearer %.*s", (int)(len - s), tok + s);
	free(tok);
	return 0;
}

/* To the leader a redirect named, else to budgets.allocator (the replicas' Service). */
static int post_report(struct agent *a, const char *body, size_t len, struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;
	const char *base = b->leader[0] ? b->leader : a->cfg.budgets.allocator;
	size_t n = strlen(base);
	char url[BUDGET_URL_MAX + 64], auth[AGENT_TOKEN_MAX + 32];
	int r;

	while (n && base[n - 1] == '/')
		n--;
	if (n + sizeof(BUDGET_REPORT_PATH) > sizeof(url))
		return -ENAMETOOLONG;
	snprintf(url, sizeof(url), "%.*s%s", (int)n, base, BUDGET_REPORT_PATH);
	/* the allocator proves itself with a certificate caFile's CA signed (the system's without) */
	r = httpc_set_tls(b->client, &(struct httpc_tls){ .ca_file = a->cfg.budgets.ca_file });
	if (r < 0)
		return r;
	r = token_header(a, auth, sizeof(auth));
	if (r < 0) {
		b->token_unreadable++;
		if (b->token_logged++ == 0)
			agent_note(notes,
				   "msg=\"budget: the node's token cannot be read: the allocator "
				   "will refuse the reports\" path=%s err=%s",
				   LOGFMT_Q(a->cfg.budgets.token_file), LOGFMT_Q(strerror(-r)));
	} else {
		b->token_logged = 0;
	}
	return httpc_post(b->client, url, body, len, auth[0] ? auth : NULL,
			  AGENT_REPORT_TIMEOUT_MS);
}

/* The report of this period: one entry per budgeted namespace with pods here. */
static int build_report(struct agent *a, char **ret, size_t *ret_len)
{
	struct agent_budgets *b = &a->budgets;
	struct budget_usage use[BUDGET_PER_REPORT_MAX];
	struct budget_report rep = { .seq = ++b->seq, .directions = true, .use = use };

	snprintf(rep.node, sizeof(rep.node), "%s", a->opt.node_name);
	memcpy(rep.policy, b->heard.id, sizeof(rep.policy));
	for (size_t i = 0; i < b->n && rep.n < BUDGET_PER_REPORT_MAX; i++) {
		const struct agent_budget_ns *n = &b->ns[i];

		if (n->leaving) {
			use[rep.n] =
				(struct budget_usage){ .dir = n->dir, .state = BUDGET_FALLBACK };
			snprintf(use[rep.n].ns, sizeof(use[rep.n].ns), "%s", n->ns);
			rep.n++;
			continue;
		}
		if (!n->present)
			continue;
		use[rep.n] = (struct budget_usage){
			.dir = n->dir,
			.sent_bytes = n->sent,
			.interval_ms = n->interval_ms,
			.saturated = n->saturated,
			/* HTB lets its pods' guaranteed rates through whatever the ceil */
			.applied = n->kernel_ceil > n->floor ? n->kernel_ceil : n->floor,
			.limit = n->limit,
			.state = n->state,
			.pods = n->pods,
			.safe_share = n->safe_share,
			.nodes = n->nodes,
		};
		snprintf(use[rep.n].ns, sizeof(use[rep.n].ns), "%s", n->ns);
		rep.n++;
	}
	return budget_report_build(&rep, ret, ret_len);
}

/*
 * The leases that run, handed to the lease guard: each granted class's
 * ceil once its lease ends, lowered by the guard's thread on time.
 */
static void guard_leases(struct agent *a)
{
	struct agent_budgets *b = &a->budgets;
	struct lease_guard_entry e[LEASE_GUARD_MAX];
	size_t k = 0;

	for (size_t i = 0; i < b->n && k < LEASE_GUARD_MAX; i++) {
		const struct agent_budget_ns *n = &b->ns[i];

		if (n->state != BUDGET_GRANTED || !n->ns_class)
			continue;
		e[k++] = (struct lease_guard_entry){
			.ns_class = n->ns_class,
			.dir = n->dir,
			.until_ms = n->lease_until_ms,
			.after = budget_node_ceil(BUDGET_LEASE_EXPIRED, n->grant, n->safe_share, 0,
						  n->limit),
		};
	}
	lease_guard_set(b->guard, e, k);
}

/* ---- the task ---- */

int64_t agent_budgets_next_ms(const struct agent *a)
{
	const struct agent_budgets *b = &a->budgets;
	int64_t next = b->next_ms;

	if (!agent_budgets_enabled(a))
		return INT64_MAX;
	if (b->sent_ms && b->probe_ms < next)
		next = b->probe_ms;
	/* a lease ends on time, not at the next report; a fallback starts on time */
	for (size_t i = 0; i < b->n; i++) {
		const struct agent_budget_ns *n = &b->ns[i];
		int64_t at = n->fallback_since_ms + a->cfg.budgets.fallback_after_ms;

		if (n->state == BUDGET_GRANTED && n->lease_until_ms < next)
			next = n->lease_until_ms;
		if (n->state == BUDGET_FALLBACK && !n->leaving && !n->fallback_on && at < next)
			next = at;
	}
	return next;
}

/* Leases that ran out between reports: their ceils go down now (a fallback's up). */
static void expire_due(struct agent *a, int64_t now_ms, struct agent_notes *notes)
{
	struct tg_err e = { 0 };

	if (!agent_budgets_age_leases(a, now_ms))
		return;
	if (agent_budgets_read_and_apply(a, false, now_ms, notes, &e) < 0)
		agent_note(notes,
			   "msg=\"budget: a lease ran out and the ceil could not be lowered\" "
			   "err=%s",
			   LOGFMT_Q(e.msg));
	agent_budgets_save_state(a, now_ms);
}

void agent_budgets_tick(struct agent *a, int64_t now_ms, double rnd, struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;
	int64_t period = a->cfg.budgets.report_ms;
	struct tg_err e = { 0 };
	char *body = NULL;
	size_t len = 0;
	int r;

	if (now_ms < b->next_ms && now_ms >= b->probe_ms && b->sent_ms) {
		b->probe_ms = now_ms + period / 4;
		if (agent_budgets_probe_flipped(a, now_ms))
			report_by(a, now_ms, now_ms);
	}
	if (now_ms < b->next_ms) {
		expire_due(a, now_ms, notes);
		return;
	}
	/* +-10 %: a fleet started together does not report in step */
	b->next_ms = now_ms + period - period / 10 + (int64_t)(rnd * (double)(period / 5));
	b->probe_ms = now_ms + period / 4;
	if (!b->restored) {
		b->restored = true;
		agent_budgets_restore_state(a, now_ms);
	}
	if (agent_budgets_refresh_namespaces(a, now_ms, &e) < 0) {
		agent_note(notes, "msg=\"budget: the store could not be read\" err=%s",
			   LOGFMT_Q(e.msg));
		return;
	}
	agent_budgets_age_leases(a, now_ms);
	guard_leases(a);
	if (agent_budgets_read_and_apply(a, true, now_ms, notes, &e) < 0)
		agent_note(notes, "msg=\"budget: the classes could not be read\" err=%s",
			   LOGFMT_Q(e.msg));
	if (b->dirty)
		agent_budgets_save_state(a, now_ms);
	if (!b->client || httpc_busy(b->client) || !a->opt.node_name)
		return;
	if (build_report(a, &body, &len) < 0)
		return;
	r = post_report(a, body, len, notes);
	free(body);
	if (r < 0) {
		b->reports_failed++;
		return;
	}
	b->sent_ms = now_ms;
}

/*
 * A replica that does not lead said where the leader is: the report goes
 * there at once, and the next ones too until one fails. A redirect of an
 * older term than one seen is a stale replica's and is not followed; nor
 * is a fourth in one report period (replicas that disagree, or that still
 * name a leader that is gone), until the next period.
 */
static void redirected(struct agent *a, const char *body, size_t len, int64_t now_ms,
		       struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;
	struct budget_redirect d;
	struct tg_err e = { 0 };

	if (budget_redirect_parse(body, len, &d, &e) < 0) {
		b->answers_rejected++;
		agent_note(notes, "msg=\"budget: the allocator's redirect was refused\" err=%s",
			   LOGFMT_Q(e.msg));
		return;
	}
	if (d.epoch < b->epoch_seen) {
		b->answers_stale++;
		return;
	}
	/* from https, only to https: the leader proves itself as the Service did */
	if (strncmp(a->cfg.budgets.allocator, "https://", 8) == 0 &&
	    strncmp(d.leader, "https://", 8) != 0) {
		b->answers_rejected++;
		agent_note(notes,
			   "msg=\"budget: a redirect to a leader without TLS was refused\" "
			   "leader=%s",
			   LOGFMT_Q(d.leader));
		return;
	}
	b->redirects++;
	if (now_ms - b->redirects_period_ms >= a->cfg.budgets.report_ms) {
		b->redirects_period_ms = now_ms;
		b->redirects_in_row = 0;
	}
	if (++b->redirects_in_row > 3)
		return;
	if (strcmp(b->leader, d.leader) != 0)
		agent_note(notes, "msg=\"budget: reporting to the leader\" leader=%s epoch=%llu",
			   LOGFMT_Q(d.leader), (unsigned long long)d.epoch);
	snprintf(b->leader, sizeof(b->leader), "%s", d.leader);
	b->next_ms = now_ms;
}

void agent_budgets_store_changed(struct agent *a, int64_t now_ms)
{
	if (!agent_budgets_enabled(a))
		return;
	/* (20 ms: the plugin's other writes of the call land first) */
	report_by(a, now_ms + 20, now_ms);
}

/*
 * A policy other than the one held: taken (the answer's arrays move into
 * the node's), kept in budgets.json, and the running pods reshaped to it
 * (agent_budgets_policy_new). Namespaces that got a budget go to the join
 * rate until their next answer; those that lost one leave the budgets.
 */
static void heard(struct agent *a, struct budget_set *policy, int64_t now_ms,
		  struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;

	if (strcmp(policy->id, b->heard.id) == 0)
		return;
	agent_note(notes, "msg=\"budget: the allocator's policy\" policy=%s was=%s budgets=%zu",
		   policy->id, b->heard.id[0] ? b->heard.id : "none", policy->n);
	budget_set_free(&b->heard);
	b->heard = *policy;
	*policy = (struct budget_set){ 0 };
	b->policy_new = b->dirty = true;
	/* the namespaces as this policy has them, at once */
	report_by(a, now_ms, now_ms);
}

void agent_budgets_answer(struct agent *a, int64_t now_ms, struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;
	struct budget_answer ans = { 0 };
	struct tg_err e = { 0 };
	const char *body;
	char why[256];
	long status;
	size_t len;
	int r = b->client ? httpc_take(b->client, &status, &body, &len, why, sizeof(why)) : 0;

	if (r == 0)
		return;
	if (r < 0 && status == 307) {
		redirected(a, body, len, now_ms, notes);
		return;
	}
	if (r < 0 && (status == 401 || status == 403)) {
		/* this node's credentials, not the allocator: said once per stretch */
		b->reports_refused++;
		if (b->reports_refused_logged++ == 0)
			agent_note(notes,
				   "msg=\"budget: the allocator refused this node's token\" "
				   "status=%ld token=%s answer=%s",
				   status,
				   LOGFMT_Q(a->cfg.budgets.token_file
						    ? a->cfg.budgets.token_file
						    : "(none: budgets.tokenFile)"),
				   LOGFMT_Q(len ? body : ""));
		return;
	}
	b->reports_refused_logged = 0;
	if (r < 0 && b->leader[0]) {
		/* the leader reported to is gone or no longer leads: the Service finds the next */
		agent_note(notes,
			   "msg=\"budget: the leader did not answer; reporting to the "
			   "allocator's address\" leader=%s allocator=%s err=%s",
			   LOGFMT_Q(b->leader), LOGFMT_Q(a->cfg.budgets.allocator), LOGFMT_Q(why));
		b->leader[0] = '\0';
		b->next_ms = now_ms;
	}
	if (r < 0) {
		b->reports_failed++;
		/* once per failing stretch, not once a second */
		if (b->reports_failed_logged++ == 0)
			agent_note(notes,
				   "msg=\"budget: the allocator did not answer; leases run out, "
				   "networking goes on\" allocator=%s err=%s",
				   LOGFMT_Q(a->cfg.budgets.allocator), LOGFMT_Q(why));
		return;
	}
	if (budget_answer_parse(body, len, &ans, &e) < 0) {
		b->answers_rejected++;
		agent_note(notes, "msg=\"budget: the allocator's answer was refused\" err=%s",
			   LOGFMT_Q(e.msg));
		return;
	}
	/* never a longer lease than this node's config takes (budgets.leaseSeconds) */
	if (ans.lease_ms > a->cfg.budgets.lease_ms)
		ans.lease_ms = a->cfg.budgets.lease_ms;
	if (ans.epoch && ans.epoch < b->epoch_seen) {
		/*
		 * A deposed leader's late answer: its grants are not this term's.
		 * Such answers end within that leader's etcd TTL; older terms
		 * answering for three leases on end mean the terms started
		 * again (the replicas moved to a new etcd), and are taken.
		 */
		if (!b->stale_since_ms)
			b->stale_since_ms = now_ms;
		if (now_ms - b->stale_since_ms < 3 * ans.lease_ms) {
			b->answers_stale++;
			budget_answer_free(&ans);
			return;
		}
		agent_note(
			notes,
			"msg=\"budget: only older terms have answered for three leases: "
			"the allocator's terms started again (a new etcd?)\" epoch=%llu was=%llu",
			(unsigned long long)ans.epoch, (unsigned long long)b->epoch_seen);
		b->epoch_seen = ans.epoch;
		b->dirty = true;
	}
	b->stale_since_ms = 0;
	b->redirects_in_row = 0;
	if (ans.epoch > b->epoch_seen) {
		b->epoch_seen = ans.epoch;
		b->dirty = true;
	}
	if (b->reports_failed_logged)
		agent_note(notes, "msg=\"budget: the allocator answers again\" failed_reports=%llu",
			   (unsigned long long)b->reports_failed_logged);
	b->reports_failed_logged = 0;
	b->reports_ok++;
	if (ans.policy.id[0])
		heard(a, &ans.policy, now_ms, notes);
	/* the allocator wants to hear sooner while grants move: never over the period */
	if (ans.next_report_ms > 0) {
		int64_t period = a->cfg.budgets.report_ms;
		int64_t soon = now_ms + (ans.next_report_ms < period / 10 ? period / 10
					 : ans.next_report_ms < period	  ? ans.next_report_ms
									  : period);

		if (soon < b->next_ms)
			b->next_ms = soon;
	}
	for (size_t i = 0; i < ans.n; i++) {
		struct agent_budget_ns *n = agent_budgets_find_ns(b, ans.g[i].ns, ans.g[i].dir);
		const struct budget_def *def;

		if (!n || n->leaving)
			continue;
		/* the lease runs from when the report left: it never outlives the allocator's view */
		n->state = BUDGET_GRANTED;
		n->grant = ans.g[i].grant;
		/* never more than the whole budget of the policy held */
		def = budget_set_find(&b->heard, n->ns, n->dir);
		if (def && n->grant > def->budget)
			n->grant = def->budget;
		n->safe_share = ans.g[i].safe_share;
		n->nodes = ans.g[i].nodes;
		n->lease_until_ms = b->sent_ms + ans.lease_ms;
		b->dirty = true;
	}
	budget_answer_free(&ans);
	agent_budgets_age_leases(a, now_ms);
	/* the guard knows of the renewed leases before the new ceils go in */
	guard_leases(a);
	if (agent_budgets_read_and_apply(a, false, now_ms, notes, &e) < 0)
		agent_note(notes, "msg=\"budget: a grant could not be applied\" err=%s",
			   LOGFMT_Q(e.msg));
	if (b->dirty)
		agent_budgets_save_state(a, now_ms);
}

void agent_budgets_stop(struct agent *a, int64_t now_ms, struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;
	struct tg_err e = { 0 };
	size_t lowered = 0;

	if (!agent_budgets_enabled(a))
		return;
	for (size_t i = 0; i < b->n; i++) {
		struct agent_budget_ns *n = &b->ns[i];

		if (n->state == BUDGET_GRANTED) {
			n->state = BUDGET_LEASE_EXPIRED;
			b->dirty = true;
			lowered++;
		}
	}
	if (!lowered)
		return;
	if (agent_budgets_read_and_apply(a, true, now_ms, notes, &e) < 0)
		agent_note(notes, "msg=\"budget: stopping, the ceils could not be lowered\" err=%s",
			   LOGFMT_Q(e.msg));
	else
		agent_note(notes,
			   "msg=\"budget: stopping; granted budgets lowered to their safe "
			   "share\" budgets=%zu",
			   lowered);
	agent_budgets_save_state(a, now_ms);
}

void agent_budgets_free(struct agent *a)
{
	lease_guard_stop(a->budgets.guard);
	httpc_free(a->budgets.client);
	nl_socket_free(a->budgets.sk);
	free(a->budgets.ns);
	budget_set_free(&a->budgets.heard);
	memset(&a->budgets, 0, sizeof(a->budgets));
}

/* ---- /metrics ---- */

void agent_budgets_render(const struct agent *a, struct expo *x)
{
	const struct agent_budgets *b = &a->budgets;
	static const char grant[] = "tollgate_budget_grant_bytes_per_second";
	static const char state[] = "tollgate_budget_state";
	static const char ceil[] = "tollgate_budget_ceil_bytes_per_second";
	uint64_t fired, failed;

	if (!agent_budgets_enabled(a))
		return;
	expo_family(x, grant, "gauge",
		    "The grant this node holds of its namespace's cluster budget in one direction "
		    "(egress: uploads, ingress: downloads; 0: none yet).");
	for (size_t i = 0; i < b->n; i++)
		expo_sample_u64(x, grant,
				(const char *const[]){ "namespace", b->ns[i].ns, "direction",
						       budget_dir_names[b->ns[i].dir], NULL },
				b->ns[i].grant);
	expo_family(
		x, ceil, "gauge",
		"The ceil in force on the namespace's internet class in one direction (on "
		"tollgate-inet or tollgate-inetdl): the grant, the safe share after a lease ran "
		"out, or the fallback.");
	for (size_t i = 0; i < b->n; i++)
		expo_sample_u64(x, ceil,
				(const char *const[]){ "namespace", b->ns[i].ns, "direction",
						       budget_dir_names[b->ns[i].dir], NULL },
				b->ns[i].kernel_ceil);
	expo_family(x, state, "gauge",
		    "1 for the state each budgeted namespace's direction is in on this node.");
	for (size_t i = 0; i < b->n; i++)
		for (int s = 0; s < BUDGET_STATES; s++)
			expo_sample_u64(
				x, state,
				(const char *const[]){ "namespace", b->ns[i].ns, "direction",
						       budget_dir_names[b->ns[i].dir], "state",
						       budget_state_names[s], NULL },
				b->ns[i].state == (enum budget_state)s);
	expo_family(x, "tollgate_budget_reports_total", "counter",
		    "Reports to the allocator, by result (error: no answer, an HTTP error, or an "
		    "answer refused; redirected: a replica that does not lead named the leader; "
		    "stale: an answer of an older term than one seen, not applied; refused: the "
		    "allocator did not take this node's token, 401 or 403).");
	expo_sample_u64(x, "tollgate_budget_reports_total",
			(const char *const[]){ "result", "ok", NULL }, b->reports_ok);
	expo_sample_u64(x, "tollgate_budget_reports_total",
			(const char *const[]){ "result", "error", NULL },
			b->reports_failed + b->answers_rejected);
	expo_sample_u64(x, "tollgate_budget_reports_total",
			(const char *const[]){ "result", "redirected", NULL }, b->redirects);
	expo_sample_u64(x, "tollgate_budget_reports_total",
			(const char *const[]){ "result", "stale", NULL }, b->answers_stale);
	expo_sample_u64(x, "tollgate_budget_reports_total",
			(const char *const[]){ "result", "refused", NULL }, b->reports_refused);
	expo_family(x, "tollgate_budget_policy_info", "gauge",
		    "1 for the allocator's policy this node holds (policy=\"\": none heard yet, "
		    "every namespace held to the join rate until it is) and its budgets.");
	{
		char n[16];

		snprintf(n, sizeof(n), "%zu", b->heard.n);
		expo_sample_u64(x, "tollgate_budget_policy_info",
				(const char *const[]){ "policy", b->heard.id, "budgets", n, NULL },
				1);
	}
	expo_family(x, "tollgate_budget_epoch", "gauge",
		    "The newest allocator term this node has seen (0: no leader election); an "
		    "answer of an older one is never applied.");
	expo_sample_u64(x, "tollgate_budget_epoch", (const char *const[]){ NULL }, b->epoch_seen);
	expo_family(
		x, "tollgate_budget_ceil_changes_total", "counter",
		"Changes of a budgeted namespace's ceil (one netlink change each), and failures.");
	lease_guard_counts(b->guard, &fired, &failed);
	expo_sample_u64(x, "tollgate_budget_ceil_changes_total",
			(const char *const[]){ "result", "ok", NULL }, b->ceil_changes + fired);
	expo_sample_u64(x, "tollgate_budget_ceil_changes_total",
			(const char *const[]){ "result", "error", NULL },
			b->ceil_failures + failed);
	expo_family(x, "tollgate_budget_lease_expiries_total", "counter",
		    "Grants whose lease ran out without renewal.");
	expo_sample_u64(x, "tollgate_budget_lease_expiries_total", (const char *const[]){ NULL },
			b->lease_expiries);
}
