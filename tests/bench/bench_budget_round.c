// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator's cost: a round (every budget aged and water-filled) and a
 * report (one node, every budget), at 1,000, 7,500 and 20,000 nodes that
 * each report 100 budgets. The nodes behave as agents do: each applies the
 * grant it was sent and sends what its pods want, up to that (saturated
 * when they want more); a pod's demand varies by +-10 % a report, and 1 %
 * of them move to a new one each period. Each budget is contended (its
 * nodes want about twice what it has). Every node reports between two
 * rounds, as in the allocator's loop.
 *
 *   build/bench_budget_round [ROUNDS]     (default 10 rounds a size)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget/budget.h"

#define BUDGETS 100
#define MB 1000000ULL

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* What each node's pods want, what it applies and its safe share, per budget. */
struct sim {
	uint32_t *want, *applied, *safe;
};

/* Every node reports every budget once; returns the ms it took. */
static double report_all(struct budget_alloc *a, size_t nodes, struct sim *sim,
			 struct budget_usage *use, int64_t t, uint64_t *seed)
{
	struct budget_report r = { .use = use, .n = BUDGETS };
	double start = now_ms();

	for (size_t i = 0; i < nodes; i++) {
		uint32_t *want = sim->want + i * BUDGETS, *applied = sim->applied + i * BUDGETS;
		uint32_t *safe = sim->safe + i * BUDGETS;
		struct budget_answer ans;

		snprintf(r.node, sizeof(r.node), "aks-pool-%06zu", i);
		r.seq++;
		for (size_t k = 0; k < BUDGETS; k++) {
			uint64_t x = rnd(seed), now;

			if (x % 100 == 0)
				want[k] = (uint32_t)(MB / 10 + (x >> 8) % (2 * MB));
			now = want[k] * (90 + (x >> 40) % 21) / 100;
			use[k].pods = (uint32_t)(1 + i % 8);
			use[k].saturated = now > applied[k];
			use[k].applied = applied[k];
			use[k].sent_bytes = now < applied[k] ? now : applied[k];
			use[k].state = safe[k] ? BUDGET_GRANTED : BUDGET_FALLBACK;
			use[k].safe_share = safe[k];
		}
		if (budget_alloc_report(a, &r, t, &ans) < 0) {
			fprintf(stderr, "bench_budget_round: out of memory\n");
			exit(1);
		}
		for (size_t k = 0; k < ans.n; k++) {
			applied[k] = (uint32_t)ans.g[k].grant;
			safe[k] = (uint32_t)ans.g[k].safe_share;
		}
		budget_answer_free(&ans);
	}
	return now_ms() - start;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 1000, 7500, 20000 };
	int rounds = argc > 1 ? atoi(argv[1]) : 10;
	struct budget_def d[BUDGETS] = { 0 };
	struct budget_usage use[BUDGETS];
	struct budget_params p;

	if (rounds < 1)
		rounds = 1;
	budget_params_defaults(&p);
	for (size_t k = 0; k < BUDGETS; k++) {
		snprintf(d[k].ns, sizeof(d[k].ns), "tenant-%03zu", k);
		d[k].budget = 0;
		use[k] = (struct budget_usage){ .interval_ms = 1000, .limit = 0 };
		memcpy(use[k].ns, d[k].ns, sizeof(use[k].ns));
	}
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		struct budget_alloc *a = budget_alloc_new(&p, 0);
		double round_ms = 0, worst = 0, rep_ms = 0;
		uint64_t seed = 0x9e3779b97f4a7c15ULL;
		struct budget_view v[BUDGETS];
		int64_t t = p.lease_ms;
		struct sim sim = { calloc(sizes[s] * BUDGETS, sizeof(uint32_t)),
				   calloc(sizes[s] * BUDGETS, sizeof(uint32_t)),
				   calloc(sizes[s] * BUDGETS, sizeof(uint32_t)) };

		/* contended: the pods want ~1.1 MB/s on average, the budget is half that */
		for (size_t k = 0; k < BUDGETS; k++)
			d[k].budget = sizes[s] * MB / 2;
		if (!a || !sim.want || !sim.applied || !sim.safe ||
		    budget_alloc_set(a, d, BUDGETS) < 0) {
			fprintf(stderr, "bench_budget_round: out of memory\n");
			return 1;
		}
		for (size_t i = 0; i < sizes[s] * BUDGETS; i++) {
			sim.want[i] = (uint32_t)(MB / 10 + rnd(&seed) % (2 * MB));
			sim.applied[i] = 10000;
		}
		/* past the first rounds, which have no level to start from */
		for (int i = 0; i < 3; i++, t += 1000) {
			budget_alloc_round(a, t);
			report_all(a, sizes[s], &sim, use, t + 1, &seed);
		}
		for (int i = 0; i < rounds; i++) {
			double start, took;

			t += 1000;
			start = now_ms();
			budget_alloc_round(a, t);
			took = now_ms() - start;
			round_ms += took;
			worst = took > worst ? took : worst;
			rep_ms += report_all(a, sizes[s], &sim, use, t + 1, &seed);
		}
		budget_alloc_views(a, v, BUDGETS);
		printf("%5zu nodes x %d budgets: %.2f ms per round (worst %.2f), %.1f us per report "
		       "of %d budgets; %s: %" PRIu32 " nodes, granted %.1f%% of its budget\n",
		       sizes[s], BUDGETS, round_ms / rounds, worst,
		       rep_ms * 1e3 / ((double)rounds * (double)sizes[s]), BUDGETS, v[0].ns,
		       v[0].nodes, 100.0 * (double)v[0].granted / (double)v[0].budget);
		budget_alloc_free(a);
		free(sim.want);
		free(sim.applied);
		free(sim.safe);
	}
	return 0;
}
