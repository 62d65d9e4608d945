// SPDX-License-Identifier: Apache-2.0
/*
 * The invariant of cluster budgets, by property test: at every instant the
 * sum of what the nodes may be applying is at most the budget.
 *
 * A seeded PRNG drives a simulated cluster of up to NODES_MAX nodes through
 * 1,000,000 events (~1.5 s, ~4 s under ASan and UBSan; TG_BUDGET_EVENTS
 * sets another count, TG_BUDGET_SEED another world, TG_BUDGET_DUMP=N
 * prints what every node holds at event N, to follow a violation):
 * reports, answers delayed, lost or given up on, nodes joining, leaving,
 * going silent and coming back, leases running out as time passes, the
 * allocator restarting (a new one, which learns), demands jumping, the
 * budget shrinking and growing back, a namespace's last pod leaving a node
 * and pods coming back; and the failures an agent meets:
 *
 *   - an agent dies (SIGKILL, OOM, a crash loop, a DaemonSet rollout whose
 *     new pod is slow to start): the node's kernel keeps the ceil the agent
 *     last set (a grant in full: nothing lowers it when its lease runs
 *     out) and the node reports no more. Either for good, or a new agent
 *     process starts after a while (1 s to 4 min): it reads the kernel's
 *     ceil and reports it as applied, with the state, safe share and node
 *     count it kept in budgets.json; either it checks its lease first
 *     (lowering the ceil if it ran out) or it reports first. Half the
 *     rollouts stop it with SIGTERM first: it lowers its granted classes
 *     to their safe share (and keeps them so in budgets.json). Half the
 *     time the agent is the one whose node applies the most of a budget,
 *     and the others then want it all;
 *   - an agent stalls (SIGSTOP, CPU throttling, a long task in its loop)
 *     for 0.5 to 3 leases: the kernel keeps its ceil throughout; on resume
 *     the agent's first act is the lease check (it lowers to
 *     budget_node_ceil(BUDGET_LEASE_EXPIRED, ...) if the lease ran out),
 *     then it takes an answer that arrived meanwhile only if its client's
 *     timeout had not passed, and reports (its victims chosen as deaths');
 *   - a join wave: 100 to 450 nodes join at once (removed after 20 to 60
 *     s; at most NODES_MAX in all), with a high config
 *     fallback (a tenth of the budget per node), once the nodes there are
 *     have wanted more than the budget for a while (the budget in full use);
 *   - a namespace leaves a node (its last pod goes: the node reports it
 *     once with no pod and nothing applied) and, half the time, comes back
 *     within 5 s;
 *   - the allocator unreachable (every report times out) for 1 to 3
 *     minutes (a tenth of the time longer: the fourth hole below), and 1
 *     to 40 nodes joining at once meanwhile.
 *
 * The nodes behave as the agent does:
 *
 *   - a node reports every second (+-20 %), one request at a time; it
 *     applies a grant only when the answer arrives, within its client's
 *     timeout (a later answer is dropped, never applied);
 *   - its lease runs from when it sent the request; once it ran out the
 *     node applies budget_node_ceil(BUDGET_LEASE_EXPIRED, ...);
 *   - a namespace never granted on the node (it just arrived, or came back
 *     after it left) applies budget_node_fallback(the config's fallback,
 *     unanswered, FALLBACK_AFTER_MS): the join rate, until nothing answered
 *     the node for FALLBACK_AFTER_MS since the later of the namespace's
 *     arrival and the node's last answered report;
 *   - it reports what it applies, its state, and the safe share and node
 *     count of its last answer; a namespace whose last pod left, once more
 *     with no pod and nothing applied, then no longer.
 *
 * After every event, per budget: the sum over the nodes of what each may
 * be applying (what its kernel applies; the larger of that and the grant
 * on its way while an answer is in flight that it may still take) is at
 * most the budget. A shrink cannot act at once: until the sum has first
 * come within the new capacity (budget less the reserve, which nodes
 * joining at the join rate use before they are heard), the bound is the
 * old budget; the test checks that it does come within, in forget_ms (of
 * the shrink, or of the last instant one of the last three holes below
 * was open).
 *
 * The bound has documented holes, each a node that the allocator cannot
 * know of, or what arrives faster than the reserve can prove free, or the
 * config's fallback that the docs say no bound covers:
 *   - a node not heard for longer than forget_ms (cut off, its agent dead,
 *     the allocator unreachable) is forgotten by the allocator while its
 *     kernel still applies what the agent last set. Such a node is
 *     modelled as gone (it applies nothing) a little before the allocator
 *     would forget it;
 *   - a node silent that last got an answer before the budget was lowered
 *     holds a safe share of the old budget; if the allocator restarts
 *     before that node is forgotten, the new one counts the shares of the
 *     nodes it has not heard against the budget it has. So from such a
 *     restart until forget_ms after the shrink, the bound is the budget
 *     before it;
 *   - a new allocator keeps capacity back for nodes it has not heard only
 *     when a node it heard says it held a grant: if the first nodes it
 *     hears past its learning are all new (or ones whose namespace just
 *     left), it takes the cluster for a new one, and a node that held a
 *     grant and that it has not heard yet (cut off, its agent stopped, or
 *     slower to report once the allocator is reachable again) holds what
 *     it holds unseen. So from then until forget_ms after the restart, the
 *     bound is the budget plus what those nodes may apply then (it only
 *     falls);
 *   - a namespace never granted on a node that nothing answered for
 *     FALLBACK_AFTER_MS applies the config's fallback, which no bound
 *     covers (the budget alerts report it). Here FALLBACK_AFTER_MS is
 *     beyond the unreachable periods of the bound check; a tenth of them
 *     last past it, and a node cut off from its joining on stays unheard
 *     past it too. From the first such node the bound is the budget plus
 *     the fallbacks of every node that went to it, until none applies it
 *     any more and the sum is back within the budget (the allocator, once
 *     it hears them, takes back what they applied as decreases come); the
 *     test checks that this comes within forget_ms;
 *   - a node whose agent is stopped (dead or stalled) and that a new
 *     allocator has not heard since it started holds its grant in its
 *     kernel, where the new allocator keeps back only its safe share
 *     (what a live agent falls to once its lease ran out). From the
 *     restart (or from when the agent stops, if it is later) the bound is
 *     the budget plus what each such node applies beyond its safe share,
 *     until they are heard or gone and the sum is back within the budget
 *     (within forget_ms);
 *   - the reserve holds the join rate of reserve / BUDGET_JOIN_RATE
 *     namespaces arriving at once (560 for web here, 168 once it shrank to
 *     30 %): before their first answer, and after it while the allocator,
 *     with nothing free beside them, keeps them at the join rate until the
 *     others' decreases make room (within a lease here). A larger wave
 *     overshoots by the rest. While it does, the bound is the budget plus
 *     the most the joiners were beyond the reserve, until the sum is back
 *     within the budget (within forget_ms).
 *
 * The control: the same world whose nodes apply the config's fallback at
 * once, as agents did before the join rate, with no hole for it, and a
 * wave joining a minute in: the check must see the bound broken (~20x).
 */
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

#define MB 1000000ULL
#define NB 2 /* budgets */
#define NODES_MAX 512
#define REPORT_MS 1000
#define ROUND_MS 1000
#define TIMEOUT_MS 2000 /* the agent's client gives up on an answer */
/* the nodes' budgets.fallbackAfterSeconds: past the unreachable periods modelled */
#define FALLBACK_AFTER_MS 240000 /* below the default: met before forget_ms */
#define UNREACHABLE_MAX_MS 180000

#define EVENTS_DEFAULT 1000000

static const char *const NS[NB] = { "datasets", "web" };
/* web: its reserve (5 %) holds every node at the join rate at once */
static const uint64_t BUDGET[NB] = { 100 * MB, 14 * MB };
/* The config's fallback: high, a tenth of the budget per node. */
static const uint64_t FALLBACK[NB] = { 10 * MB, 1400000 };

struct held {
	enum budget_state st;
	uint64_t grant, safe;
	uint32_t nodes;
	int64_t lease_end;   /* from when it sent the request answered */
	int64_t answer_sent; /* when it sent that request */
	int64_t arrived;     /* the namespace on the node: its class made */
	int64_t first_grant; /* its first answer (INT64_MIN: none yet) */
	int64_t back_at;     /* gone: when its pods come back (INT64_MAX: not soon) */
	uint64_t demand;     /* what its pods want */
	bool gone;	     /* the namespace has no pod on the node: it sends nothing */
	bool leaving;	     /* ... and says so in its next report (then no more) */
	bool at_config;	     /* at the last check: at the config's fallback (the hole) */
	bool stopped;	     /* stopped, unseen by the allocator since it started (a hole) */
	bool heard;	     /* the allocator heard it since it arrived (or since its start) */
};

struct agent {
	bool alive, silent;
	/* the agent stopped (stalled or dead): the kernel keeps kceil */
	bool frozen, dead;
	int64_t resume_at; /* the agent stalled resumes, the dead one's successor starts */
	uint64_t kceil[NB];
	bool kconfig[NB]; /* kceil is the config's fallback */
	int64_t leave_at; /* a node of a wave is removed (INT64_MAX: no) */
	char name[32];
	uint32_t pods;
	uint64_t limit;
	struct held b[NB];
	int64_t next_report, last_report;
	int64_t last_heard;    /* by the allocator: a report that reached it */
	int64_t last_answered; /* an answer it took (INT64_MIN: none) */
	/* the request on its way or its answer: */
	bool waiting;	      /* a request sent, no answer or timeout yet */
	int64_t sent, arrive; /* arrive: INT64_MAX when the answer is lost */
	bool answered;	      /* the allocator answered (it may be on its way) */
	struct budget_grant ans[NB];
	bool has[NB];
	int64_t lease_ms;
};

struct world {
	uint64_t rnd;
	int64_t now, next_round;
	struct budget_alloc *a;
	struct budget_params p;
	struct agent n[NODES_MAX];
	int hi; /* the slots above are all empty */
	uint64_t budget[NB];
	uint64_t shrunk_from[NB]; /* 0, or the budget before a shrink not yet absorbed */
	int64_t shrunk_at[NB];
	uint64_t lowered_from[NB]; /* the most the budget was within forget_ms */
	int64_t lowered_until[NB];
	uint64_t guard[NB]; /* the second hole's bound, until guard_until */
	int64_t guard_until[NB];
	uint64_t unseen[NB]; /* the third hole's: more than the budget, until */
	int64_t unseen_until[NB];
	bool pending[NB];	/* a new allocator has not heard a node that held a grant yet */
	uint64_t at_config[NB]; /* the fourth's: the fallbacks of nodes that went to it */
	int64_t at_config_last[NB];
	uint64_t stopped[NB]; /* the fifth's: what stopped agents hold beyond their safe share */
	int64_t stopped_last[NB];
	uint64_t crowd[NB]; /* the sixth's: the most the unheard joiners were beyond the reserve */
	int64_t crowd_last[NB];
	int64_t holes_last[NB]; /* the fourth to sixth last open */
	int64_t unreachable_until;
	int64_t wave_at; /* INT64_MAX: none due */
	int wave_n;
	unsigned long events, names;
	double worst;	    /* sum / bound */
	double worst_plain; /* sum / budget, while no hole nor shrink is open */
	unsigned long worst_event, violations, dump_at;
	int64_t worst_t;
	int worst_k;
	double util_sum;
	unsigned long util_n;
	unsigned long restarts, shrinks, joins, leaves, silences, lost, ns_left, unseen_restarts;
	unsigned long lowered_restarts, deaths, comebacks, stalls, waves, wave_joins, unreachable,
		ns_back, config_holes, stopped_holes, crowd_holes, terms;
	int most_alive;
	int64_t restart_at;
};

static uint64_t rnd(struct world *w)
{
	/* splitmix64 */
	uint64_t z = (w->rnd += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t below(struct world *w, uint64_t n)
{
	return rnd(w) % n;
}

static bool chance(struct world *w, unsigned per_million)
{
	return below(w, 1000000) < per_million;
}

static int64_t max_t(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* ---- a node ---- */

static enum budget_state state_at(const struct held *h, int64_t now)
{
	if (h->st == BUDGET_GRANTED && now >= h->lease_end)
		return BUDGET_LEASE_EXPIRED;
	return h->st;
}

/*
 * The control: nodes apply the config's fallback at once (fallbackAfter
 * 0), as agents did before the join rate, with no hole to excuse it; a
 * wave joins a minute in; its first violation is not printed.
 */
static bool control;
static int64_t fallback_after = FALLBACK_AFTER_MS;

/* When a namespace never granted goes from the join rate to the config's fallback. */
static int64_t config_at(const struct agent *n, const struct held *h)
{
	return max_t(h->arrived, n->last_answered) + fallback_after;
}

/* The ceil the (running) agent has set: its lease checked, its fallback timed. */
static uint64_t ceil_at(const struct agent *n, int k, int64_t now)
{
	const struct held *h = &n->b[k];
	int64_t unanswered = now - max_t(h->arrived, n->last_answered);
	uint64_t fb = budget_node_fallback(FALLBACK[k], unanswered, fallback_after);

	return budget_node_ceil(state_at(h, now), h->grant, h->safe, fb, n->limit);
}

/* The ceil in the node's kernel: the agent's, or what it left when it stopped. */
static uint64_t kernel_ceil(const struct agent *n, int k, int64_t now)
{
	return n->frozen ? n->kceil[k] : ceil_at(n, k, now);
}

/* Whether the kernel applies the config's fallback: the fourth hole. */
static bool at_config(const struct agent *n, int k, int64_t now)
{
	const struct held *h = &n->b[k];

	if (!n->alive || h->gone || control)
		return false;
	if (n->frozen)
		return n->kconfig[k];
	return h->st == BUDGET_FALLBACK && now >= config_at(n, h) && FALLBACK[k] > BUDGET_JOIN_RATE;
}

/* What it may be applying: its ceil, or the grant on its way if that is more. */
static uint64_t may_apply(const struct agent *n, int k, int64_t now)
{
	uint64_t c;

	if (!n->alive || n->b[k].gone)
		return 0;
	c = kernel_ceil(n, k, now);
	/* a dead agent takes no answer; a stalled one may on resume, within its timeout */
	if (n->waiting && n->answered && n->has[k] && !n->dead && now < n->sent + TIMEOUT_MS) {
		uint64_t g = budget_node_ceil(BUDGET_GRANTED, n->ans[k].grant, 0, 0, n->limit);

		c = g > c ? g : c;
	}
	return c;
}

static uint64_t random_demand(struct world *w, int k)
{
	/* idle, a little, about a fair share, or far more than the budget */
	switch (below(w, 4)) {
	case 0:
		return 0;
	case 1:
		return below(w, BUDGET[k] / 50 + 1);
	case 2:
		return below(w, BUDGET[k] / 4 + 1);
	default:
		return BUDGET[k] + below(w, BUDGET[k]);
	}
}

static struct held fresh(struct world *w, int k)
{
	return (struct held){ .st = BUDGET_FALLBACK,
			      .arrived = w->now,
			      .first_grant = INT64_MIN,
			      .back_at = INT64_MAX,
			      .demand = random_demand(w, k) };
}

static void join(struct world *w, struct agent *n)
{
	memset(n, 0, sizeof(*n));
	n->alive = true;
	n->resume_at = n->leave_at = INT64_MAX;
	n->last_answered = INT64_MIN;
	snprintf(n->name, sizeof(n->name), "node-%lu.pool", w->names++);
	n->pods = (uint32_t)below(w, 12);
	/* a third have caps of their own below the budget */
	n->limit = below(w, 3) == 0 ? BUDGET[0] / 8 + below(w, BUDGET[0] / 4) : 0;
	for (int k = 0; k < NB; k++)
		n->b[k] = fresh(w, k);
	n->next_report = w->now + (int64_t)below(w, REPORT_MS);
	n->last_heard = w->now;
	n->last_report = w->now;
	if (n - w->n >= w->hi)
		w->hi = (int)(n - w->n) + 1;
}

static bool unreachable(const struct world *w)
{
	return w->now < w->unreachable_until;
}

/*
 * The third hole, as a new allocator decides it: it keeps capacity back
 * for the nodes it has not heard once one it heard says it held a grant;
 * if the first it hears past its learning are all new, it grants as in a
 * new cluster, and the nodes that held grants and that it has not heard
 * (cut off, stopped, or slower to report after the allocator was
 * unreachable) hold what they hold unseen.
 */
static void unseen_hole(struct world *w, const struct agent *n)
{
	for (int k = 0; k < NB; k++) {
		const struct held *h = &n->b[k];
		uint64_t silent = 0;

		if (!w->pending[k] || h->gone)
			continue;
		if (h->st != BUDGET_FALLBACK || h->nodes || h->safe ||
		    w->now - w->restart_at >= w->p.forget_ms) {
			w->pending[k] = false;
			continue;
		}
		if (budget_alloc_learning(w->a, w->now))
			continue; /* it grants only what nodes hold */
		w->pending[k] = false;
		for (int i = 0; i < w->hi; i++) {
			const struct agent *o = &w->n[i];

			if (o->alive && !o->b[k].gone && o->b[k].st != BUDGET_FALLBACK &&
			    !o->b[k].heard)
				silent += may_apply(o, k, w->now);
		}
		if (silent) {
			w->unseen[k] = silent;
			w->unseen_until[k] = w->restart_at + w->p.forget_ms;
			w->unseen_restarts++;
		}
	}
}

static void send_report(struct world *w, struct agent *n)
{
	struct budget_usage use[NB];
	struct budget_report r = { .use = use };
	struct budget_answer ans;
	int64_t interval = w->now - n->last_report, delay;

	for (int k = 0; k < NB; k++) {
		struct held *h = &n->b[k];
		uint64_t c = kernel_ceil(n, k, w->now);

		/* a namespace that left is reported once: no pod, nothing applied */
		if (h->gone && !h->leaving)
			continue;
		if (h->gone) {
			/* no pod: the class has nothing to send, no answer */
			use[r.n] = (struct budget_usage){ .state = BUDGET_FALLBACK };
			snprintf(use[r.n++].ns, sizeof(use[0].ns), "%s", NS[k]);
			if (!n->silent && !unreachable(w))
				h->leaving = false;
			continue;
		}
		use[r.n] = (struct budget_usage){
			.sent_bytes = (h->demand < c ? h->demand : c) * (uint64_t)interval / 1000,
			.interval_ms = (uint32_t)interval,
			.saturated = h->demand > c,
			.applied = c,
			.limit = n->limit,
			/* a new agent reports the kernel's ceil with the state it kept */
			.state = n->frozen ? h->st : state_at(h, w->now),
			.pods = n->pods,
			.safe_share = h->safe,
			.nodes = h->nodes,
		};
		snprintf(use[r.n++].ns, sizeof(use[0].ns), "%s", NS[k]);
	}
	snprintf(r.node, sizeof(r.node), "%s", n->name);
	n->last_report = w->now;
	n->next_report = w->now + REPORT_MS * 8 / 10 + (int64_t)below(w, REPORT_MS * 4 / 10);
	n->waiting = true;
	n->sent = w->now;
	n->answered = false;
	n->arrive = INT64_MAX;
	memset(n->has, 0, sizeof(n->has));
	if (n->silent || unreachable(w))
		return; /* never reaches the allocator: the client times out */
	assert_int_equal(budget_alloc_report(w->a, &r, w->now, &ans), 0);
	n->last_heard = w->now;
	for (int k = 0; k < NB; k++) {
		n->b[k].stopped = false; /* heard: counted at what it applies */
		n->b[k].heard = !n->b[k].gone;
	}
	n->answered = true;
	n->lease_ms = ans.lease_ms;
	for (size_t i = 0; i < ans.n; i++)
		for (int k = 0; k < NB; k++)
			if (strcmp(ans.g[i].ns, NS[k]) == 0) {
				n->ans[k] = ans.g[i];
				n->has[k] = true;
			}
	budget_answer_free(&ans);
	unseen_hole(w, n);
	/* on its way for up to 2.5 s (past the timeout: given up on), or lost */
	delay = (int64_t)below(w, 100) < 90 ? (int64_t)below(w, 300) : (int64_t)below(w, 2500);
	n->arrive = chance(w, 30000) ? INT64_MAX : w->now + delay;
	if (n->arrive == INT64_MAX || delay >= TIMEOUT_MS)
		w->lost++;
}

static void answer_arrives(struct world *w, struct agent *n)
{
	for (int k = 0; k < NB; k++) {
		if (!n->has[k])
			continue;
		if (n->b[k].st == BUDGET_FALLBACK)
			n->b[k].first_grant = w->now;
		n->b[k].st = BUDGET_GRANTED;
		n->b[k].grant = n->ans[k].grant;
		n->b[k].safe = n->ans[k].safe_share;
		n->b[k].nodes = n->ans[k].nodes;
		n->b[k].lease_end = n->sent + n->lease_ms;
		n->b[k].answer_sent = n->sent;
	}
	n->last_answered = w->now;
	n->waiting = false;
}

/*
 * The fifth hole: a node whose agent is stopped and that the allocator has
 * not heard since it started holds what its kernel applies, where the
 * allocator keeps back only its safe share.
 */
static void stopped_unseen(struct world *w, struct agent *n, int k)
{
	struct held *h = &n->b[k];
	uint64_t m = may_apply(n, k, w->now);

	if (!n->frozen || h->gone || h->st == BUDGET_FALLBACK || h->stopped || m <= h->safe)
		return;
	h->stopped = true;
	w->stopped[k] += m - h->safe;
	w->stopped_holes++;
}

/* The agent stops: the kernel keeps what it set. */
static void freeze(struct world *w, struct agent *n)
{
	for (int k = 0; k < NB; k++) {
		n->kceil[k] = n->b[k].gone ? 0 : ceil_at(n, k, w->now);
		n->kconfig[k] = at_config(n, k, w->now);
	}
	n->frozen = true;
	/* not heard since the allocator started (not counted by the third hole) */
	for (int k = 0; k < NB; k++)
		if (w->restarts && n->last_heard < w->restart_at && w->now >= w->unseen_until[k])
			stopped_unseen(w, n, k);
}

/* ---- the invariant ---- */

/* What each node holds, for a failure's message. */
static void dump(const struct world *w, int k)
{
	struct budget_view v[NB];

	budget_alloc_views(w->a, v, NB);
	print_message(
		"# %s: budget %llu, allocator: committed %llu granted %llu nodes %u safe %llu; "
		"%lu restarts, the last %lld ms ago; lowered %lld ms ago from %llu, guard %llu until "
		"%+lld; unseen %llu until %+lld; at config %llu; stopped %llu; crowd %llu; "
		"unreachable until %+lld\n",
		NS[k], (unsigned long long)w->budget[k], (unsigned long long)v[k].committed,
		(unsigned long long)v[k].granted, v[k].nodes, (unsigned long long)v[k].safe_share,
		w->restarts, (long long)(w->now - w->restart_at),
		(long long)(w->now - w->shrunk_at[k]), (unsigned long long)w->lowered_from[k],
		(unsigned long long)w->guard[k], (long long)(w->guard_until[k] - w->now),
		(unsigned long long)w->unseen[k], (long long)(w->unseen_until[k] - w->now),
		(unsigned long long)w->at_config[k], (unsigned long long)w->stopped[k],
		(unsigned long long)w->crowd[k], (long long)(w->unreachable_until - w->now));
	for (int i = 0; i < w->hi; i++) {
		const struct agent *n = &w->n[i];
		const struct held *h = &n->b[k];

		if (!n->alive || !may_apply(n, k, w->now))
			continue;
		print_message(
			"#  %-14s may %8llu ceil %8llu %-13s grant %8llu safe %8llu nodes %3u "
			"lease %+7lld %s%s%ssilent %d heard %+8lld waiting %d answered %d arrive "
			"%+lld ans %llu demand %llu limit %llu answer_sent %+lld\n",
			n->name, (unsigned long long)may_apply(n, k, w->now),
			(unsigned long long)kernel_ceil(n, k, w->now),
			budget_state_names[state_at(h, w->now)], (unsigned long long)h->grant,
			(unsigned long long)h->safe, h->nodes, (long long)(h->lease_end - w->now),
			n->dead ? "DEAD " : "", n->frozen && !n->dead ? "STALLED " : "",
			n->frozen && n->resume_at != INT64_MAX ? "(back soon) " : "", n->silent,
			(long long)(n->last_heard - w->now), n->waiting, n->answered,
			n->arrive == INT64_MAX ? 0 : (long long)(n->arrive - w->now),
			(unsigned long long)n->ans[k].grant, (unsigned long long)h->demand,
			(unsigned long long)n->limit, (long long)(h->answer_sent - w->now));
	}
}

/*
 * The bound broken: the first time with what each node holds, then only
 * counted, so that the run goes on to its worst ratio (the test fails).
 */
__attribute__((format(printf, 3, 4))) static void violation(struct world *w, int k, const char *fmt,
							    ...)
{
	va_list ap;
	char msg[256];

	if (w->violations++ || control)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dump(w, k);
	print_message("# FIRST VIOLATION: %s\n", msg);
}

static void check(struct world *w)
{
	uint64_t sums[NB] = { 0 }, joining[NB] = { 0 };
	bool configs[NB] = { false }, stopped[NB] = { false };

	w->events++;
	/* TG_BUDGET_DUMP: what every node holds at that event, to follow a violation */
	if (w->events == w->dump_at)
		for (int k = 0; k < NB; k++)
			dump(w, k);
	for (int i = 0; i < w->hi; i++) {
		struct agent *n = &w->n[i];

		if (!n->alive)
			continue;
		for (int k = 0; k < NB; k++) {
			uint64_t m = may_apply(n, k, w->now);
			bool c = m && at_config(n, k, w->now);

			sums[k] += m;
			/* the fourth hole: a node gone to the config's fallback */
			if (c && !n->b[k].at_config) {
				w->at_config[k] += m;
				w->config_holes++;
			}
			n->b[k].at_config = c;
			configs[k] |= c;
			stopped[k] |= n->b[k].stopped;
			/*
			 * At the join rate out of the reserve: before its first
			 * answer, and kept at it (nothing free beside it) until
			 * the others' decreases make room, within a lease
			 */
			if (!c && (n->b[k].st == BUDGET_FALLBACK ||
				   (n->b[k].grant <= BUDGET_JOIN_RATE &&
				    w->now - n->b[k].first_grant < w->p.lease_ms)))
				joining[k] += m < BUDGET_JOIN_RATE ? m : BUDGET_JOIN_RATE;
		}
	}
	for (int k = 0; k < NB; k++) {
		uint64_t sum = sums[k], bound,
			 reserve = (uint64_t)((double)w->budget[k] * w->p.reserve);
		uint64_t crowd = joining[k] > reserve ? joining[k] - reserve : 0;
		bool config = configs[k];
		double ratio;

		if (config)
			w->at_config_last[k] = w->now;
		if (stopped[k])
			w->stopped_last[k] = w->now;
		if (crowd) {
			w->crowd_holes += !w->crowd[k];
			w->crowd[k] = crowd > w->crowd[k] ? crowd : w->crowd[k];
			w->crowd_last[k] = w->now;
		}
		/*
		 * Absorbed once the nodes are within the new capacity (the reserve
		 * left for nodes joining at the join rate): from then on the new budget.
		 */
		if (w->shrunk_from[k] &&
		    sum <= (uint64_t)((double)w->budget[k] * (1 - w->p.reserve)))
			w->shrunk_from[k] = 0;
		/*
		 * A shrink is absorbed within forget_ms (the slowest: a node silent
		 * throughout) of the shrink, or of the last instant the fourth to
		 * sixth holes were open (a dead agent unseen by a new allocator
		 * keeps its grant until it is forgotten: their own deadlines).
		 */
		if (w->at_config[k] || w->stopped[k] || w->crowd[k] || config || stopped[k] ||
		    crowd)
			w->holes_last[k] = w->now;
		if (w->shrunk_from[k] &&
		    w->now - max_t(w->shrunk_at[k], w->holes_last[k]) > w->p.forget_ms + 20000)
			violation(
				w, k,
				"t=%lld: %s still at %llu, over its budget %llu since its shrink at "
				"%lld",
				(long long)w->now, NS[k], (unsigned long long)sum,
				(unsigned long long)w->budget[k], (long long)w->shrunk_at[k]);
		bound = w->shrunk_from[k] ? w->shrunk_from[k] : w->budget[k];
		if (w->now < w->guard_until[k] && w->guard[k] > bound)
			bound = w->guard[k];
		if (w->now < w->unseen_until[k])
			bound += w->unseen[k];
		/*
		 * The fourth and the fifth: over once no node is in them any more
		 * and the sum is back within the bound.
		 */
		if (w->at_config[k] && !config && sum <= bound + w->stopped[k] + w->crowd[k])
			w->at_config[k] = 0;
		if (w->stopped[k] && !stopped[k] && sum <= bound + w->at_config[k] + w->crowd[k])
			w->stopped[k] = 0;
		if (w->crowd[k] && !crowd && sum <= bound + w->at_config[k] + w->stopped[k])
			w->crowd[k] = 0;
		if (w->crowd[k] && w->now - w->crowd_last[k] > w->p.forget_ms)
			violation(
				w, k,
				"t=%lld: %s still at %llu, over its budget %llu, since its joiners "
				"were last beyond the reserve at %lld",
				(long long)w->now, NS[k], (unsigned long long)sum,
				(unsigned long long)bound, (long long)w->crowd_last[k]);
		bound += w->crowd[k];
		if (w->stopped[k] && w->now - w->stopped_last[k] > w->p.forget_ms)
			violation(w, k,
				  "t=%lld: %s still at %llu, over its budget %llu, since its last "
				  "stopped agent unseen at %lld",
				  (long long)w->now, NS[k], (unsigned long long)sum,
				  (unsigned long long)bound, (long long)w->stopped_last[k]);
		bound += w->stopped[k];
		if (w->at_config[k] && w->now - w->at_config_last[k] > w->p.forget_ms)
			violation(w, k,
				  "t=%lld: %s still at %llu, over its budget %llu, since its last "
				  "node at the config's fallback at %lld",
				  (long long)w->now, NS[k], (unsigned long long)sum,
				  (unsigned long long)bound, (long long)w->at_config_last[k]);
		bound += w->at_config[k];
		ratio = (double)sum / (double)bound;
		if (ratio > w->worst) {
			w->worst = ratio;
			w->worst_event = w->events;
			w->worst_t = w->now;
			w->worst_k = k;
		}
		if (bound == w->budget[k] && ratio > w->worst_plain)
			w->worst_plain = ratio;
		if (k == 0 && !w->shrunk_from[k]) {
			w->util_sum += ratio;
			w->util_n++;
		}
		if (sum > bound)
			violation(w, k,
				  "event %lu, t=%lld ms: %s: nodes may apply %llu, more than %llu",
				  w->events, (long long)w->now, NS[k], (unsigned long long)sum,
				  (unsigned long long)bound);
	}
}

/* ---- the world ---- */

static void set_budgets(struct world *w)
{
	struct budget_def d[NB] = { 0 };

	for (int k = 0; k < NB; k++) {
		snprintf(d[k].ns, sizeof(d[k].ns), "%s", NS[k]);
		d[k].budget = w->budget[k];
	}
	assert_int_equal(budget_alloc_set(w->a, d, NB), 0);
}

/* A node the allocator will not hear soon: cut off, or its agent stopped. */
static bool unheard(const struct agent *n)
{
	return n->silent || n->frozen;
}

static void restart(struct world *w)
{
	/*
	 * The second hole: a node silent since a shrink, across this restart
	 * (cut off, its agent stopped, or every node while the allocator is
	 * unreachable).
	 */
	for (int k = 0; k < NB; k++) {
		if (w->now >= w->lowered_until[k])
			continue;
		for (int i = 0; i < w->hi; i++)
			if (w->n[i].alive && (unheard(&w->n[i]) || unreachable(w)) &&
			    w->n[i].b[k].st != BUDGET_FALLBACK &&
			    w->n[i].b[k].answer_sent <= w->shrunk_at[k]) {
				if (w->guard_until[k] != w->lowered_until[k])
					w->lowered_restarts++;
				w->guard[k] = w->lowered_from[k];
				w->guard_until[k] = w->lowered_until[k];
			}
	}
	/*
	 * The third: decided when the new allocator hears its first nodes
	 * (unseen_hole); the fifth: agents stopped across the restart.
	 */
	for (int k = 0; k < NB; k++) {
		w->pending[k] = true;
		for (int i = 0; i < w->hi; i++)
			if (w->n[i].alive)
				stopped_unseen(w, &w->n[i], k);
	}
	/* a new allocator has heard no one */
	for (int i = 0; i < w->hi; i++)
		for (int k = 0; k < NB; k++)
			w->n[i].b[k].heard = false;
	budget_alloc_free(w->a);
	w->a = budget_alloc_new(&w->p, w->now);
	assert_non_null(w->a);
	set_budgets(w);
	w->restarts++;
	w->restart_at = w->now;
}

static int alive_count(const struct world *w)
{
	int c = 0;

	for (int i = 0; i < w->hi; i++)
		c += w->n[i].alive;
	return c;
}

/* n nodes join at once in the empty slots; a wave's are removed after a while */
static void join_many(struct world *w, int count, bool wave)
{
	for (int i = 0; i < NODES_MAX && count > 0; i++) {
		struct agent *n = &w->n[i];

		if (n->alive)
			continue;
		join(w, n);
		if (wave)
			n->leave_at = w->now + 20000 + (int64_t)below(w, 40000);
		w->joins++;
		w->wave_joins += wave;
		count--;
	}
	if (alive_count(w) > w->most_alive)
		w->most_alive = alive_count(w);
}

/*
 * Whose agent dies or stalls: n, or half the time the node whose kernel
 * applies the most of budget k, while the others then want it all.
 */
static struct agent *victim(struct world *w, struct agent *n, int k)
{
	struct agent *most = n;

	if (below(w, 2))
		return n;
	for (int i = 0; i < w->hi; i++)
		if (w->n[i].alive && !w->n[i].frozen &&
		    may_apply(&w->n[i], k, w->now) > may_apply(most, k, w->now))
			most = &w->n[i];
	for (int i = 0; i < w->hi; i++)
		if (&w->n[i] != most && below(w, 2))
			w->n[i].b[k].demand = BUDGET[k] + below(w, BUDGET[k]);
	return most;
}

/* Something happens to the cluster (a few times a simulated minute). */
static void perturb(struct world *w)
{
	struct agent *n = &w->n[below(w, 24)]; /* the cluster's own nodes */
	int k = (int)below(w, NB);

	switch (below(w, 1000)) {
	case 0 ... 339: /* a demand jumps */
		if (n->alive)
			n->b[k].demand = random_demand(w, k);
		break;
	case 340 ... 469: /* a node joins (in an empty slot) */
		if (!n->alive) {
			join(w, n);
			w->joins++;
		}
		break;
	case 470 ... 559: /* a node leaves: it applies nothing from now on */
		if (n->alive && alive_count(w) > 2) {
			n->alive = false;
			w->leaves++;
		}
		break;
	case 560 ... 679: /* a node is cut off, or comes back */
		if (n->alive) {
			n->silent = !n->silent;
			w->silences += n->silent;
		}
		break;
	case 680 ... 719: /* the allocator restarts */
		restart(w);
		break;
	case 720 ... 759: /* the budget shrinks, or grows back */
		if (w->budget[k] == BUDGET[k]) {
			w->shrunk_from[k] = w->shrunk_from[k] ? w->shrunk_from[k] : w->budget[k];
			w->shrunk_at[k] = w->now;
			w->lowered_from[k] = w->now < w->lowered_until[k] &&
							     w->lowered_from[k] > w->budget[k]
						     ? w->lowered_from[k]
						     : w->budget[k];
			w->lowered_until[k] = w->now + w->p.forget_ms;
			w->budget[k] = BUDGET[k] * (30 + below(w, 60)) / 100;
			w->shrinks++;
		} else {
			w->budget[k] = BUDGET[k];
		}
		set_budgets(w);
		break;
	case 760 ... 819: /* a namespace's last pod leaves the node, or one comes back */
		if (!n->alive || n->frozen)
			break;
		if (!n->b[k].gone) {
			n->b[k].gone = n->b[k].leaving = true;
			/* half the time a pod comes back soon */
			n->b[k].back_at = below(w, 2) ? w->now + 200 + (int64_t)below(w, 4800)
						      : INT64_MAX;
			w->ns_left++;
		} else {
			/* back: a class made anew, never granted */
			n->b[k] = fresh(w, k);
			w->ns_back++;
		}
		break;
	case 820 ... 869: /* the agent dies: for good, or a new one starts after a while */
		n = victim(w, n, k);
		if (!n->alive || n->frozen)
			break;
		switch (below(w, 10)) {
		case 0 ... 2:
			n->resume_at = INT64_MAX;
			break;
		case 3 ... 6: /* a crash loop's back-off */
			n->resume_at = w->now + 1000 + (int64_t)below(w, 30000);
			break;
		default: /* a rollout's new pod, slow to start */
			n->resume_at = w->now + 10000 + (int64_t)below(w, 230000);
			if (below(w, 2))
				break; /* killed past its grace period */
			/* SIGTERM: its granted classes lowered to their safe share, and kept so */
			for (int j = 0; j < NB; j++)
				if (n->b[j].st == BUDGET_GRANTED)
					n->b[j].st = BUDGET_LEASE_EXPIRED;
			w->terms++;
			break;
		}
		freeze(w, n);
		n->dead = true;
		n->waiting = false; /* its answer reaches no one */
		w->deaths++;
		break;
	case 870 ... 929: /* the agent stalls for 0.5 to 3 leases */
		n = victim(w, n, k);
		if (!n->alive || n->frozen)
			break;
		freeze(w, n);
		n->resume_at =
			w->now + w->p.lease_ms / 2 + (int64_t)below(w, w->p.lease_ms * 5 / 2);
		w->stalls++;
		break;
	case 930 ... 932: /* every node wants more than the budget; a wave joins */
		if (w->wave_at != INT64_MAX)
			break;
		for (int i = 0; i < w->hi; i++)
			for (int j = 0; j < NB; j++)
				w->n[i].b[j].demand = BUDGET[j] + below(w, BUDGET[j]);
		w->wave_at = w->now + 5000 + (int64_t)below(w, 15000);
		w->wave_n = 100 + (int)below(w, 351);
		break;
	case 933 ... 939: /* the allocator unreachable for minutes, nodes joining meanwhile */
		if (unreachable(w))
			break;
		/* a tenth past FALLBACK_AFTER_MS: the fourth hole */
		w->unreachable_until =
			w->now + (below(w, 10)
					  ? 60000 + (int64_t)below(w, UNREACHABLE_MAX_MS - 60000)
					  : FALLBACK_AFTER_MS + 5000 + (int64_t)below(w, 40000));
		if (w->wave_at == INT64_MAX) {
			w->wave_at = w->now + (int64_t)below(w, 60000);
			w->wave_n = 1 + (int)below(w, 40);
		}
		w->unreachable++;
		break;
	default: /* the pods move: another weight */
		if (n->alive && !n->frozen)
			n->pods = (uint32_t)below(w, 12);
		break;
	}
}

/* The agent resumes (stalled), or a new one starts (dead). */
static void resume(struct world *w, struct agent *n)
{
	n->resume_at = INT64_MAX;
	if (n->dead) {
		/* the new agent: no request on its way, its first report has no interval */
		n->dead = false;
		n->last_report = w->now;
		w->comebacks++;
		if (below(w, 2)) {
			/* it reports the kernel's ceil first, then checks its lease */
			send_report(w, n);
			check(w);
		}
		n->frozen = false;
		check(w);
		n->next_report = w->now;
		return;
	}
	/* stalled: the lease check first, then the answer if within its timeout */
	n->frozen = false;
	check(w);
	if (n->waiting && n->answered && n->arrive <= w->now && w->now < n->sent + TIMEOUT_MS) {
		answer_arrives(w, n);
		check(w);
	} else if (n->waiting && w->now >= n->sent + TIMEOUT_MS) {
		n->waiting = false;
		check(w);
	}
	n->next_report = w->now;
}

static int64_t node_next(const struct world *w, const struct agent *n, int64_t next)
{
	if (n->leave_at < next)
		next = n->leave_at;
	if (n->frozen)
		return n->resume_at < next ? n->resume_at : next;
	if (n->waiting) {
		int64_t end = n->sent + TIMEOUT_MS;

		next = n->arrive < end && n->arrive < next ? n->arrive : next;
		next = end < next ? end : next;
	} else if (n->next_report < next) {
		next = n->next_report;
	}
	for (int k = 0; k < NB; k++) {
		const struct held *h = &n->b[k];

		if (h->st == BUDGET_GRANTED && h->lease_end > w->now && h->lease_end < next)
			next = h->lease_end;
		if (h->gone && h->back_at < next)
			next = h->back_at;
		if (!h->gone && h->st == BUDGET_FALLBACK && config_at(n, h) > w->now &&
		    config_at(n, h) < next)
			next = config_at(n, h);
	}
	return next;
}

static void step(struct world *w)
{
	int64_t next = w->next_round;

	/* the next thing that happens: a report, an answer, a timeout or a round */
	for (int i = 0; i < w->hi; i++)
		if (w->n[i].alive)
			next = node_next(w, &w->n[i], next);
	if (w->wave_at < next)
		next = w->wave_at;
	assert_true(next >= w->now);
	w->now = next;
	check(w); /* leases that ran out by now */
	if (w->now >= w->next_round) {
		budget_alloc_round(w->a, w->now);
		w->next_round = w->now + ROUND_MS;
		if (chance(w, 60000))
			perturb(w);
		check(w);
	}
	if (w->now >= w->wave_at) {
		join_many(w, w->wave_n, true);
		w->wave_at = INT64_MAX;
		w->waves++;
		check(w);
	}
	for (int i = 0; i < w->hi; i++) {
		struct agent *n = &w->n[i];

		if (!n->alive)
			continue;
		if (w->now >= n->leave_at) {
			n->alive = false;
			w->leaves++;
			check(w);
			continue;
		}
		/* not heard for forget_ms (less a round): the bound's hole, the node goes */
		if (w->now - n->last_heard >= w->p.forget_ms - 2 * ROUND_MS) {
			n->alive = false;
			w->leaves++;
			check(w);
			continue;
		}
		if (n->frozen) {
			if (w->now < n->resume_at)
				continue;
			resume(w, n);
		}
		for (int k = 0; k < NB; k++)
			if (n->b[k].gone && w->now >= n->b[k].back_at) {
				n->b[k] = fresh(w, k);
				w->ns_back++;
				check(w);
			}
		if (n->waiting && n->answered && n->arrive <= w->now &&
		    n->arrive < n->sent + TIMEOUT_MS) {
			answer_arrives(w, n);
			check(w);
		} else if (n->waiting && w->now >= n->sent + TIMEOUT_MS) {
			n->waiting = false; /* given up on: a late answer is dropped */
			check(w);
		}
		if (!n->waiting && w->now >= n->next_report) {
			send_report(w, n);
			check(w);
		}
	}
	while (w->hi > 0 && !w->n[w->hi - 1].alive)
		w->hi--;
}

static unsigned long events_wanted(void)
{
	const char *s = getenv("TG_BUDGET_EVENTS");

	return s && *s ? strtoul(s, NULL, 10) : EVENTS_DEFAULT;
}

static void run_world(uint64_t seed, unsigned long events, struct world *w)
{
	memset(w, 0, sizeof(*w));
	w->rnd = seed;
	w->wave_at = INT64_MAX;
	w->dump_at = getenv("TG_BUDGET_DUMP") ? strtoul(getenv("TG_BUDGET_DUMP"), NULL, 10) : 0;
	if (control) {
		w->wave_at = 60000;
		w->wave_n = 200;
	}
	budget_params_defaults(&w->p);
	memcpy(w->budget, BUDGET, sizeof(w->budget));
	w->a = budget_alloc_new(&w->p, 0);
	assert_non_null(w->a);
	set_budgets(w);
	for (int i = 0; i < 8; i++)
		join(w, &w->n[i]);
	while (w->events < events)
		step(w);
	budget_alloc_free(w->a);
}

static void t_sum_of_what_nodes_may_apply_stays_within_the_budget(void **state)
{
	static struct world world; /* static: a failed assertion leaks nothing */
	unsigned long want = events_wanted();
	struct world *w = &world;

	/* TG_BUDGET_SEED: another world than the one the suite runs */
	run_world(getenv("TG_BUDGET_SEED") ? strtoull(getenv("TG_BUDGET_SEED"), NULL, 0)
					   : 0x70116a7e,
		  want, w);
	print_message(
		"# worst sum/budget ratio: %.4f (%.4f while no hole nor shrink was open) over %lu "
		"events (%.1f simulated hours; mean "
		"use of the budget %.2f; %lu restarts, %lu shrinks, %lu joins, %lu leaves, "
		"%lu silences, %lu namespaces leaving a node and %lu coming back, %lu answers "
		"lost; %lu agents dead (%lu came back, %lu SIGTERMed), %lu stalled, %lu join "
		"waves (%lu nodes, at most %d at once), %lu periods unreachable; the holes: %lu restarts after a "
		"shrink, %lu with only new nodes to hear, %lu nodes at the config's fallback, %lu "
		"agents stopped unseen by a new allocator, %lu times more joiners than the reserve "
		"holds)\n",
		w->worst, w->worst_plain, w->events, (double)w->now / 3.6e6,
		w->util_sum / (double)w->util_n, w->restarts, w->shrinks, w->joins, w->leaves,
		w->silences, w->ns_left, w->ns_back, w->lost, w->deaths, w->comebacks, w->terms,
		w->stalls, w->waves, w->wave_joins, w->most_alive, w->unreachable,
		w->lowered_restarts, w->unseen_restarts, w->config_holes, w->stopped_holes,
		w->crowd_holes);
	if (w->worst > 1.0)
		print_message(
			"# the worst: %s at event %lu, t=%lld ms; %lu events over the bound\n",
			NS[w->worst_k], w->worst_event, (long long)w->worst_t, w->violations);
	assert_true(w->events >= want);
	assert_int_equal(w->violations, 0);
	assert_true(w->worst <= 1.0);
	/* not safe by doing nothing: the budget is put to use */
	assert_true(w->util_sum / (double)w->util_n > 0.5);
	/* every failure was met */
	assert_true(w->deaths > 0 && w->comebacks > 0 && w->stalls > 0 && w->waves > 0 &&
		    w->unreachable > 0 && w->ns_back > 0);
}

/*
 * The control: the same world with nodes that apply the config's fallback
 * at once (a tenth of the budget), as agents did before the join rate.
 * The join waves overshoot, and the check sees it.
 */
static void t_control_the_config_fallback_at_once_overshoots(void **state)
{
	static struct world world;

	control = true;
	fallback_after = 0;
	run_world(0x70116a7e, 100000, &world);
	control = false;
	fallback_after = FALLBACK_AFTER_MS;
	print_message("# control, the config's fallback at once: worst ratio %.4f, %lu events "
		      "over the bound of %lu, %lu join waves\n",
		      world.worst, world.violations, world.events, world.waves);
	assert_true(world.violations > 0);
	assert_true(world.worst > 1.5);
}

int main(void)
{
	add_test("the sum of what nodes may apply stays within the budget through random events",
		 t_sum_of_what_nodes_may_apply_stays_within_the_budget, NULL);
	add_test("control: nodes at the config's fallback at once overshoot, and the check sees it",
		 t_control_the_config_fallback_at_once_overshoots, NULL);
	return run_group("budget_property");
}
