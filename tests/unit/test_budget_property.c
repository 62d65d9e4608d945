// SPDX-License-Identifier: Apache-2.0
/*
 * The invariant of cluster budgets, by property test: at every instant the
 * sum of what the nodes may be applying is at most the budget.
 *
 * A seeded PRNG drives a simulated cluster through 3,000,000 events (~2 s,
 * ~3 s under ASan and UBSan; TG_BUDGET_EVENTS sets another count,
 * TG_BUDGET_SEED another world): reports, answers delayed, lost or given
 * up on, nodes joining, leaving, going silent and coming back, leases
 * running out as time passes, the allocator restarting (a new one, which
 * learns), demands jumping, the budget shrinking and growing back, a
 * namespace's last pod leaving a node and pods coming back. The nodes
 * behave as the agent does:
 *
 *   - a node reports every second (+-20 %), one request at a time; it
 *     applies a grant only when the answer arrives, within its client's
 *     timeout (a later answer is dropped, never applied);
 *   - its lease runs from when it sent the request; once it ran out the
 *     node applies budget_node_ceil(BUDGET_LEASE_EXPIRED, ...); before its
 *     first answer it applies the fallback;
 *   - it reports what it applies, its state, and the safe share and node
 *     count of its last answer; a namespace whose last pod left, once more
 *     with no pod and nothing applied, then no longer.
 *
 * After every event, per budget: the sum over the nodes of what each may
 * be applying (what it applies; the larger of that and the grant on its
 * way while an answer is in flight) is at most the budget. A shrink cannot
 * act at once: until the sum has first come within the new capacity
 * (budget less the reserve, which nodes joining in fallback use before
 * they are heard), the bound is the old budget; the test checks that it
 * does come within.
 *
 * The bound has two documented holes, both a node that the allocator
 * cannot know of:
 *   - a node silent for longer than forget_ms is forgotten by the
 *     allocator while it still applies its safe share. Such a node is
 *     modelled as gone (it applies nothing) a little before the allocator
 *     would forget it;
 *   - a node silent that last got an answer before the budget was lowered
 *     holds a safe share of the old budget; if the allocator restarts
 *     before that node is
 *     forgotten, the new one counts the shares of the nodes it has
 *     not heard against the budget it has. So from such a restart until
 *     forget_ms after the shrink, the bound is the budget before it;
 *   - a new allocator keeps capacity back for nodes it has not heard only
 *     when a node it heard says it held a grant: if every node it hears is
 *     new (or one whose namespace just left), it takes the cluster for a
 *     new one, and a node silent since before it started holds what it
 *     held unseen. So from such a restart, for forget_ms, the bound is the
 *     budget plus what those silent nodes may apply then (it only falls).
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
#define NODES_MAX 24
#define REPORT_MS 1000
#define ROUND_MS 1000
#define TIMEOUT_MS 2000 /* the agent's client gives up on an answer */

#define EVENTS_DEFAULT 3000000

static const char *const NS[NB] = { "datasets", "web" };
static const uint64_t BUDGET[NB] = { 100 * MB, 7 * MB };
/* What a node applies before its first grant: the joiners at once fit in the reserve. */
static const uint64_t FALLBACK[NB] = { 100000, 7000 };

struct held {
	enum budget_state st;
	uint64_t grant, safe;
	uint32_t nodes;
	int64_t lease_end;   /* from when it sent the request answered */
	int64_t answer_sent; /* when it sent that request */
	uint64_t demand;     /* what its pods want */
	bool gone;	     /* the namespace has no pod on the node: it sends nothing */
	bool leaving;	     /* ... and says so in its next report (then no more) */
};

struct agent {
	bool alive, silent;
	char name[32];
	uint32_t pods;
	uint64_t limit;
	struct held b[NB];
	int64_t next_report, last_report;
	int64_t last_heard; /* by the allocator: a report that reached it */
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
	uint64_t budget[NB];
	uint64_t shrunk_from[NB]; /* 0, or the budget before a shrink not yet absorbed */
	int64_t shrunk_at[NB];
	uint64_t lowered_from[NB]; /* the most the budget was within forget_ms */
	int64_t lowered_until[NB];
	uint64_t guard[NB]; /* the second hole's bound, until guard_until */
	int64_t guard_until[NB];
	uint64_t unseen[NB]; /* the third hole's: more than the budget, until */
	int64_t unseen_until[NB];
	unsigned long events, names;
	double worst; /* sum / bound */
	double util_sum;
	unsigned long util_n;
	unsigned long restarts, shrinks, joins, leaves, silences, lost, ns_left, unseen_restarts;
	unsigned long lowered_restarts;
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

/* ---- a node ---- */

static enum budget_state state_at(const struct held *h, int64_t now)
{
	if (h->st == BUDGET_GRANTED && now >= h->lease_end)
		return BUDGET_LEASE_EXPIRED;
	return h->st;
}

static uint64_t ceil_at(const struct agent *n, int k, int64_t now)
{
	const struct held *h = &n->b[k];

	return budget_node_ceil(state_at(h, now), h->grant, h->safe, FALLBACK[k], n->limit);
}

/* What it may be applying: its ceil, or the grant on its way if that is more. */
static uint64_t may_apply(const struct agent *n, int k, int64_t now)
{
	uint64_t c;

	if (!n->alive || n->b[k].gone)
		return 0;
	c = ceil_at(n, k, now);
	if (n->waiting && n->answered && n->has[k]) {
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

static void join(struct world *w, struct agent *n)
{
	memset(n, 0, sizeof(*n));
	n->alive = true;
	snprintf(n->name, sizeof(n->name), "node-%lu.pool", w->names++);
	n->pods = (uint32_t)below(w, 12);
	/* a third have caps of their own below the budget */
	n->limit = below(w, 3) == 0 ? BUDGET[0] / 8 + below(w, BUDGET[0] / 4) : 0;
	for (int k = 0; k < NB; k++) {
		n->b[k].st = BUDGET_FALLBACK;
		n->b[k].demand = random_demand(w, k);
	}
	n->next_report = w->now + (int64_t)below(w, REPORT_MS);
	n->last_heard = w->now;
	n->last_report = w->now;
}

static void send_report(struct world *w, struct agent *n)
{
	struct budget_usage use[NB];
	struct budget_report r = { .use = use };
	struct budget_answer ans;
	int64_t interval = w->now - n->last_report, delay;

	for (int k = 0; k < NB; k++) {
		struct held *h = &n->b[k];
		uint64_t c = ceil_at(n, k, w->now);

		/* a namespace that left is reported once: no pod, nothing applied */
		if (h->gone && !h->leaving)
			continue;
		if (h->gone) {
			/* as the agent says it: its class back at the fallback, no answer */
			use[r.n] = (struct budget_usage){ .state = BUDGET_FALLBACK };
			snprintf(use[r.n++].ns, sizeof(use[0].ns), "%s", NS[k]);
			if (!n->silent)
				h->leaving = false;
			continue;
		}
		use[r.n] = (struct budget_usage){
			.sent_bytes = (h->demand < c ? h->demand : c) * (uint64_t)interval / 1000,
			.interval_ms = (uint32_t)interval,
			.saturated = h->demand > c,
			.applied = c,
			.limit = n->limit,
			.state = state_at(h, w->now),
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
	if (n->silent)
		return; /* never reaches the allocator: the client times out */
	assert_int_equal(budget_alloc_report(w->a, &r, w->now, &ans), 0);
	n->last_heard = w->now;
	n->answered = true;
	n->lease_ms = ans.lease_ms;
	for (size_t i = 0; i < ans.n; i++)
		for (int k = 0; k < NB; k++)
			if (strcmp(ans.g[i].ns, NS[k]) == 0) {
				n->ans[k] = ans.g[i];
				n->has[k] = true;
			}
	budget_answer_free(&ans);
	/* on its way for up to 2.5 s (past the timeout: given up on), or lost */
	delay = (int64_t)below(w, 100) < 90 ? (int64_t)below(w, 300) : (int64_t)below(w, 2500);
	n->arrive = chance(w, 30000) ? INT64_MAX : w->now + delay;
	if (n->arrive == INT64_MAX || delay >= TIMEOUT_MS)
		w->lost++;
}

static void answer_arrives(struct agent *n)
{
	for (int k = 0; k < NB; k++) {
		if (!n->has[k])
			continue;
		n->b[k].st = BUDGET_GRANTED;
		n->b[k].grant = n->ans[k].grant;
		n->b[k].safe = n->ans[k].safe_share;
		n->b[k].nodes = n->ans[k].nodes;
		n->b[k].lease_end = n->sent + n->lease_ms;
		n->b[k].answer_sent = n->sent;
	}
	n->waiting = false;
}

/* ---- the invariant ---- */

/* What each node holds, for a failure's message. */
static void dump(const struct world *w, int k)
{
	struct budget_view v[NB];

	budget_alloc_views(w->a, v, NB);
	print_message(
		"# %s: budget %llu, allocator: committed %llu granted %llu nodes %u safe %llu; "
		"%lu restarts, the last %lld ms ago; lowered %lld ms ago from %llu, guard %llu until %+lld\n",
		NS[k], (unsigned long long)w->budget[k], (unsigned long long)v[k].committed,
		(unsigned long long)v[k].granted, v[k].nodes, (unsigned long long)v[k].safe_share,
		w->restarts, (long long)(w->now - w->restart_at),
		(long long)(w->now - w->shrunk_at[k]), (unsigned long long)w->lowered_from[k],
		(unsigned long long)w->guard[k], (long long)(w->guard_until[k] - w->now));
	for (int i = 0; i < NODES_MAX; i++) {
		const struct agent *n = &w->n[i];
		const struct held *h = &n->b[k];

		if (!n->alive)
			continue;
		print_message(
			"#  %-14s may %8llu ceil %8llu %-13s grant %8llu safe %8llu nodes %2u "
			"lease %+7lld silent %d heard %+8lld waiting %d answered %d arrive %+lld "
			"ans %llu demand %llu limit %llu answer_sent %+lld\n",
			n->name, (unsigned long long)may_apply(n, k, w->now),
			(unsigned long long)ceil_at(n, k, w->now),
			budget_state_names[state_at(h, w->now)], (unsigned long long)h->grant,
			(unsigned long long)h->safe, h->nodes, (long long)(h->lease_end - w->now),
			n->silent, (long long)(n->last_heard - w->now), n->waiting, n->answered,
			n->arrive == INT64_MAX ? 0 : (long long)(n->arrive - w->now),
			(unsigned long long)n->ans[k].grant, (unsigned long long)h->demand,
			(unsigned long long)n->limit, (long long)(h->answer_sent - w->now));
	}
}

static void check(struct world *w)
{
	w->events++;
	for (int k = 0; k < NB; k++) {
		uint64_t sum = 0, bound;
		double ratio;

		for (int i = 0; i < NODES_MAX; i++)
			sum += may_apply(&w->n[i], k, w->now);
		/*
		 * Absorbed once the nodes are within the new capacity (the reserve
		 * left for nodes joining in fallback): from then on the new budget.
		 */
		if (w->shrunk_from[k] &&
		    sum <= (uint64_t)((double)w->budget[k] * (1 - w->p.reserve)))
			w->shrunk_from[k] = 0;
		/* a shrink is absorbed within forget_ms (the slowest: a node silent throughout) */
		if (w->shrunk_from[k] && w->now - w->shrunk_at[k] > w->p.forget_ms + 20000)
			fail_msg(
				"t=%lld: %s still at %llu, over its budget %llu since its shrink at %lld",
				(long long)w->now, NS[k], (unsigned long long)sum,
				(unsigned long long)w->budget[k], (long long)w->shrunk_at[k]);
		bound = w->shrunk_from[k] ? w->shrunk_from[k] : w->budget[k];
		if (w->now < w->guard_until[k] && w->guard[k] > bound)
			bound = w->guard[k];
		if (w->now < w->unseen_until[k])
			bound += w->unseen[k];
		ratio = (double)sum / (double)bound;
		if (ratio > w->worst)
			w->worst = ratio;
		if (k == 0 && !w->shrunk_from[k]) {
			w->util_sum += ratio;
			w->util_n++;
		}
		if (sum > bound) {
			dump(w, k);
			fail_msg("event %lu, t=%lld ms: %s: nodes may apply %llu, more than %llu",
				 w->events, (long long)w->now, NS[k], (unsigned long long)sum,
				 (unsigned long long)bound);
		}
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

static void restart(struct world *w)
{
	/* the second hole: a node silent since a shrink, across this restart */
	for (int k = 0; k < NB; k++) {
		if (w->now >= w->lowered_until[k])
			continue;
		for (int i = 0; i < NODES_MAX; i++)
			if (w->n[i].alive && w->n[i].silent && w->n[i].b[k].st != BUDGET_FALLBACK &&
			    w->n[i].b[k].answer_sent <= w->shrunk_at[k]) {
				if (w->guard_until[k] != w->lowered_until[k])
					w->lowered_restarts++;
				w->guard[k] = w->lowered_from[k];
				w->guard_until[k] = w->lowered_until[k];
			}
	}
	/* the third: only new nodes to hear from, and silent ones that held grants */
	for (int k = 0; k < NB; k++) {
		bool held = false;
		uint64_t silent = 0;

		for (int i = 0; i < NODES_MAX; i++) {
			const struct agent *n = &w->n[i];

			if (!n->alive || n->b[k].gone || n->b[k].st == BUDGET_FALLBACK)
				continue;
			if (n->silent)
				silent += may_apply(n, k, w->now);
			else
				held = true;
		}
		if (!held && silent) {
			w->unseen[k] = silent;
			w->unseen_until[k] = w->now + w->p.forget_ms;
			w->unseen_restarts++;
		}
	}
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

	for (int i = 0; i < NODES_MAX; i++)
		c += w->n[i].alive;
	return c;
}

/* Something happens to the cluster (a few times a simulated minute). */
static void perturb(struct world *w)
{
	struct agent *n = &w->n[below(w, NODES_MAX)];
	int k = (int)below(w, NB);

	switch (below(w, 100)) {
	case 0 ... 39: /* a demand jumps */
		if (n->alive)
			n->b[k].demand = random_demand(w, k);
		break;
	case 40 ... 54: /* a node joins (in an empty slot) */
		if (!n->alive && alive_count(w) < NODES_MAX) {
			join(w, n);
			w->joins++;
		}
		break;
	case 55 ... 64: /* a node leaves: it applies nothing from now on */
		if (n->alive && alive_count(w) > 2) {
			n->alive = false;
			w->leaves++;
		}
		break;
	case 65 ... 79: /* a node is cut off, or comes back */
		if (n->alive) {
			n->silent = !n->silent;
			w->silences += n->silent;
		}
		break;
	case 80 ... 83: /* the allocator restarts */
		restart(w);
		break;
	case 84 ... 87: /* the budget shrinks, or grows back */
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
	case 88 ... 93: /* a namespace's last pod leaves the node, or one comes back */
		if (!n->alive)
			break;
		if (!n->b[k].gone) {
			n->b[k].gone = n->b[k].leaving = true;
			w->ns_left++;
		} else {
			/* back: a class made anew, at the fallback */
			n->b[k] = (struct held){ .st = BUDGET_FALLBACK,
						 .demand = random_demand(w, k) };
		}
		break;
	default: /* the pods move: another weight */
		if (n->alive)
			n->pods = (uint32_t)below(w, 12);
		break;
	}
}

static void step(struct world *w)
{
	int64_t next = w->next_round;

	/* the next thing that happens: a report, an answer, a timeout or a round */
	for (int i = 0; i < NODES_MAX; i++) {
		const struct agent *n = &w->n[i];

		if (!n->alive)
			continue;
		if (n->waiting) {
			int64_t end = n->sent + TIMEOUT_MS;

			next = n->arrive < end && n->arrive < next ? n->arrive : next;
			next = end < next ? end : next;
		} else if (n->next_report < next) {
			next = n->next_report;
		}
		for (int k = 0; k < NB; k++)
			if (n->b[k].st == BUDGET_GRANTED && n->b[k].lease_end > w->now &&
			    n->b[k].lease_end < next)
				next = n->b[k].lease_end;
	}
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
	for (int i = 0; i < NODES_MAX; i++) {
		struct agent *n = &w->n[i];

		if (!n->alive)
			continue;
		/* silent past forget_ms (less a round): the bound's hole, the node goes */
		if (n->silent && w->now - n->last_heard >= w->p.forget_ms - 2 * ROUND_MS) {
			n->alive = false;
			w->leaves++;
			check(w);
			continue;
		}
		if (n->waiting && n->answered && n->arrive <= w->now &&
		    n->arrive < n->sent + TIMEOUT_MS) {
			answer_arrives(n);
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
	unsigned long want = events_wanted();
	struct world *w = calloc(1, sizeof(*w));

	assert_non_null(w);
	/* TG_BUDGET_SEED: another world than the one the suite runs */
	run_world(getenv("TG_BUDGET_SEED") ? strtoull(getenv("TG_BUDGET_SEED"), NULL, 0)
					   : 0x70116a7e,
		  want, w);
	print_message(
		"# worst sum/budget ratio: %.4f over %lu events (%.1f simulated hours; mean "
		"use of the budget %.2f; %lu restarts, %lu shrinks, %lu joins, %lu leaves, "
		"%lu silences, %lu namespaces leaving a node, %lu answers lost; the holes: %lu "
		"restarts after a shrink, %lu with only new nodes to hear)\n",
		w->worst, w->events, (double)w->now / 3.6e6, w->util_sum / (double)w->util_n,
		w->restarts, w->shrinks, w->joins, w->leaves, w->silences, w->ns_left, w->lost,
		w->lowered_restarts, w->unseen_restarts);
	assert_true(w->events >= want);
	assert_true(w->worst <= 1.0);
	/* not safe by doing nothing: the budget is put to use */
	assert_true(w->util_sum / (double)w->util_n > 0.5);
	free(w);
}

int main(void)
{
	add_test("the sum of what nodes may apply stays within the budget through random events",
		 t_sum_of_what_nodes_may_apply_stays_within_the_budget, NULL);
	return run_group("budget_property");
}
