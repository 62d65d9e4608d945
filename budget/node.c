// SPDX-License-Identifier: Apache-2.0
/* A node's side of a budget: the ceil it applies (budget/budget.h). */
#include "budget/budget.h"

uint64_t budget_node_ceil(enum budget_state st, uint64_t grant, uint64_t safe_share,
			  uint64_t fallback, uint64_t limit)
{
	uint64_t c;

	switch (st) {
	case BUDGET_GRANTED:
		c = grant;
		break;
	case BUDGET_LEASE_EXPIRED:
		/* 0: the answer carried none, the grant stands */
		c = safe_share && safe_share < grant ? safe_share : grant;
		break;
	default:
		c = fallback;
		break;
	}
	return limit && c > limit ? limit : c;
}

uint64_t budget_node_fallback(uint64_t fallback, int64_t unanswered_ms, int64_t after_ms)
{
	if (unanswered_ms >= after_ms)
		return fallback;
	return fallback < BUDGET_JOIN_RATE ? fallback : BUDGET_JOIN_RATE;
}
