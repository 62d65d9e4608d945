// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer: a cluster budget report, answer and redirect as the allocator
 * and the agent read them (any bytes: a peer writes them). Whatever parses must
 * write back to a document that parses to the same report or answer, within
 * the size cap.
 */
#include <stdlib.h>
#include <string.h>

#include "budget/budget.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool usage_equal(const struct budget_usage *a, const struct budget_usage *b)
{
	return strcmp(a->ns, b->ns) == 0 && a->dir == b->dir && a->sent_bytes == b->sent_bytes &&
	       a->interval_ms == b->interval_ms && a->saturated == b->saturated &&
	       a->applied == b->applied && a->limit == b->limit && a->state == b->state &&
	       a->pods == b->pods && a->safe_share == b->safe_share && a->nodes == b->nodes;
}

static void report(const char *text, size_t size)
{
	struct budget_report r, again;
	struct tg_err e = { 0 };
	size_t len;
	char *out;

	if (budget_report_parse(text, size, &r, &e) != 0)
		return;
	if (budget_report_build(&r, &out, &len) != 0)
		abort();
	/* what was read is written back within the cap, and reads the same */
	if (len > BUDGET_BODY_MAX || budget_report_parse(out, len, &again, &e) != 0)
		abort();
	if (strcmp(r.node, again.node) != 0 || r.seq != again.seq || r.n != again.n ||
	    r.directions != again.directions || strcmp(r.policy, again.policy) != 0)
		abort();
	for (size_t i = 0; i < r.n; i++)
		if (!usage_equal(&r.use[i], &again.use[i]))
			abort();
	budget_report_free(&again);
	budget_report_free(&r);
	free(out);
}

static void answer(const char *text, size_t size)
{
	struct budget_answer a, again;
	struct tg_err e = { 0 };
	size_t len;
	char *out;

	if (budget_answer_parse(text, size, &a, &e) != 0)
		return;
	if (budget_answer_build(&a, &out, &len) != 0)
		abort();
	if (len > BUDGET_ANSWER_MAX || budget_answer_parse(out, len, &again, &e) != 0)
		abort();
	if (a.lease_ms != again.lease_ms || a.next_report_ms != again.next_report_ms ||
	    a.epoch != again.epoch || a.n != again.n || strcmp(a.policy.id, again.policy.id) != 0 ||
	    a.policy.n != again.policy.n)
		abort();
	/* sorted by (namespace, direction), each once */
	for (size_t i = 0; i < a.policy.n; i++)
		if (strcmp(a.policy.d[i].ns, again.policy.d[i].ns) != 0 ||
		    a.policy.d[i].dir != again.policy.d[i].dir ||
		    a.policy.d[i].budget != again.policy.d[i].budget ||
		    (i && (strcmp(a.policy.d[i - 1].ns, a.policy.d[i].ns) > 0 ||
			   (strcmp(a.policy.d[i - 1].ns, a.policy.d[i].ns) == 0 &&
			    a.policy.d[i - 1].dir >= a.policy.d[i].dir))))
			abort();
	for (size_t i = 0; i < a.n; i++)
		if (strcmp(a.g[i].ns, again.g[i].ns) != 0 || a.g[i].dir != again.g[i].dir ||
		    a.g[i].grant != again.g[i].grant ||
		    a.g[i].safe_share != again.g[i].safe_share || a.g[i].nodes != again.g[i].nodes)
			abort();
	budget_answer_free(&again);
	budget_answer_free(&a);
	free(out);
}

static void redirect(const char *text, size_t size)
{
	struct budget_redirect d, again;
	struct tg_err e = { 0 };
	size_t len;
	char *out;

	if (budget_redirect_parse(text, size, &d, &e) != 0)
		return;
	if (!budget_leader_url_ok(d.leader, strlen(d.leader)) ||
	    budget_redirect_build(&d, &out, &len) != 0)
		abort();
	if (budget_redirect_parse(out, len, &again, &e) != 0 ||
	    strcmp(d.leader, again.leader) != 0 || d.epoch != again.epoch)
		abort();
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	report((const char *)data, size);
	answer((const char *)data, size);
	redirect((const char *)data, size);
	return 0;
}
