// SPDX-License-Identifier: Apache-2.0
/*
 * The kernel's side of a node's cluster budgets (agent/internal.h): the
 * budgeted namespaces' classes read (one dump per direction: uploads on
 * tollgate-inet, downloads on tollgate-inetdl, the same minors on both),
 * for a report's counters or a look between reports, and each class's ceil
 * put where its state says (one netlink change per change, no pod
 * touched). The ceil of each state is budget/'s. A direction whose IFB is
 * missing (not declared yet, or a node without a download tree) has no
 * class present: it is neither reported nor set, as a missing class.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <netlink/route/tc.h>

#include "agent/internal.h"
#include "agent/lease_guard.h"
#include "budget/budget.h"
#include "lib/nl.h"
#include "lib/nl_cleanup.h"
#include "lib/util.h"
#include "shaper/shaper.h"

/*
 * A class that sent at least this share of its ceil over a period ran at it;
 * so did one whose pods' queues hold a standing backlog (TCP under a ceil
 * that just moved may send less than it, yet wants more). Overlimits say
 * nothing here: HTB counts one whenever a burst goes past the class's
 * cburst, far below its ceil. TCP held by a ceil sends 0.9 to 0.997 of it
 * (fewer flows, longer round trips: less). The share stays above 1 / the
 * allocator's margin (budget/report.c: a class is granted 1.15 x what it
 * sends, 0.87): a class that got what it asked for must not look held
 * back.
 */
#define SATURATED_SHARE 0.9
#define SATURATED_BACKLOG (4 * 1514)

/*
 * A standing backlog says a class wants more only while it also sends: a
 * class stalled (its ceil's token debt, a peer that does not answer) holds
 * packets it is not sending, and must not ask for a share it cannot use.
 */
#define BACKLOG_SENT_SHARE 0.5

static bool backlogged(const struct agent_budget_ns *n, uint64_t backlog, uint64_t sent,
		       int64_t interval_ms)
{
	return interval_ms > 0 && backlog >= SATURATED_BACKLOG &&
	       (double)sent * 1000 >=
		       BACKLOG_SENT_SHARE * (double)n->kernel_ceil * (double)interval_ms;
}

/*
 * The ceil a namespace's state asks for, bytes/s. Never granted, it sends
 * at the join rate until the allocator has gone unanswered for
 * fallbackAfterSeconds; one whose last pod left, at the join rate too (a
 * pod that comes back starts there, as on a node it never was on).
 */
static uint64_t wanted_ceil(const struct agent *a, const struct agent_budget_ns *n, int64_t now_ms)
{
	const struct budget_policy *p = &a->cfg.budgets;
	uint64_t fallback = n->leaving ? BUDGET_JOIN_RATE
				       : budget_node_fallback(p->fallback_bps / 8,
							      now_ms - n->fallback_since_ms,
							      p->fallback_after_ms);

	return budget_node_ceil(n->state, n->grant, n->safe_share, fallback, n->limit);
}

int agent_budgets_ifindex(struct nl_sock *sk, enum budget_dir dir)
{
	return dir == BUDGET_INGRESS ? shaper_inet_in_ifindex(sk) : shaper_inet_ifindex(sk);
}

static const char *dir_ifb(enum budget_dir dir)
{
	return dir == BUDGET_INGRESS ? SHAPER_INET_IN_IFB : SHAPER_INET_IFB;
}

struct class_read {
	struct agent_budgets *b;
	enum budget_dir dir; /* the IFB dumped */
	int64_t now_ms;
};

/* One class of a direction's IFB: a budgeted namespace's counters and ceil. */
static void on_class(const struct shaper_stats *st, void *arg)
{
	struct class_read *cr = arg;

	for (size_t i = 0; i < cr->b->n; i++) {
		struct agent_budget_ns *n = &cr->b->ns[i];

		if (n->dir != cr->dir)
			continue;
		if (st->parent == (uint32_t)TC_HANDLE(1, n->ns_class)) {
			/* one of its pods' classes */
			n->backlog += st->backlog;
			n->floor += st->rate_bps / 8;
		}
		if (st->classid != (uint32_t)TC_HANDLE(1, n->ns_class))
			continue;
		n->present = true;
		n->kernel_ceil = st->ceil_bps / 8;
		if (n->counted && st->bytes >= n->bytes && cr->now_ms > n->at_ms) {
			uint64_t sent = st->bytes - n->bytes;
			uint64_t interval = (uint64_t)(cr->now_ms - n->at_ms);

			n->sent = sent;
			n->interval_ms = (uint32_t)(interval > UINT32_MAX ? UINT32_MAX : interval);
			n->saturated = (double)sent * 1000 >=
				       SATURATED_SHARE * (double)n->kernel_ceil * (double)interval;
		} else {
			n->sent = 0;
			n->interval_ms = 0;
			n->saturated = false;
		}
		n->bytes = n->probe_bytes = st->bytes;
		n->overlimits = st->overlimits;
		n->at_ms = n->probe_ms = cr->now_ms;
		n->counted = true;
	}
}

/*
 * Between reports, a look at the classes every quarter period: a class
 * that was saturated at the last report and now sends less than half its
 * ceil (its traffic stopped), or one that was not and now runs at its
 * ceil (its traffic came, or a lower grant holds it), is worth telling the
 * allocator now rather than at the next period: capacity changes hands a
 * period sooner.
 */
#define FLIP_IDLE_SHARE 0.5

struct probe_read {
	struct agent_budgets *b;
	enum budget_dir dir;
	int64_t now_ms;
	uint64_t *backlog; /* per namespace, of its pods' classes */
	uint64_t *sent;
	int64_t *interval;
};

static void on_probe(const struct shaper_stats *st, void *arg)
{
	struct probe_read *pr = arg;

	for (size_t i = 0; i < pr->b->n; i++) {
		struct agent_budget_ns *n = &pr->b->ns[i];

		if (n->dir != pr->dir)
			continue;
		if (st->parent == (uint32_t)TC_HANDLE(1, n->ns_class))
			pr->backlog[i] += st->backlog;
		if (st->classid != (uint32_t)TC_HANDLE(1, n->ns_class) || !n->counted)
			continue;
		if (st->bytes >= n->probe_bytes && pr->now_ms > n->probe_ms) {
			pr->sent[i] = st->bytes - n->probe_bytes;
			pr->interval[i] = pr->now_ms - n->probe_ms;
		}
		n->probe_bytes = st->bytes;
		n->probe_ms = pr->now_ms;
	}
}

/* The loop's netlink socket, opened on first use (and after a failure). */
static int budget_sock(struct agent_budgets *b, struct nl_sock **ret)
{
	int r = b->sk ? 0 : tg_nl_route_open(&b->sk);

	*ret = b->sk;
	return r;
}

/* After a failed exchange: what is left unread on it goes with it. */
static void budget_sock_drop(struct agent_budgets *b)
{
	nl_socket_free(b->sk);
	b->sk = NULL;
}

/* Whether a class's use flipped since the last report (see FLIP_IDLE_SHARE). */
bool agent_budgets_probe_flipped(struct agent *a, int64_t now_ms)
{
	struct agent_budgets *b = &a->budgets;
	struct nl_sock *sk;
	uint64_t backlog[BUDGET_PER_REPORT_MAX] = { 0 }, sent[BUDGET_PER_REPORT_MAX] = { 0 };
	int64_t interval[BUDGET_PER_REPORT_MAX] = { 0 };
	struct probe_read pr = { .b = b,
				 .now_ms = now_ms,
				 .backlog = backlog,
				 .sent = sent,
				 .interval = interval };
	bool flipped = false;

	if (b->n > BUDGET_PER_REPORT_MAX || budget_sock(b, &sk) < 0)
		return false;
	for (int d = 0; d < BUDGET_DIRS; d++) {
		int ifb = agent_budgets_ifindex(sk, (enum budget_dir)d);

		pr.dir = (enum budget_dir)d;
		if (!ifb)
			continue;
		if (shaper_dump_classes(sk, ifb, on_probe, &pr) < 0) {
			budget_sock_drop(b);
			return false;
		}
	}
	for (size_t i = 0; i < b->n; i++) {
		const struct agent_budget_ns *n = &b->ns[i];
		double at_ceil = (double)n->kernel_ceil * (double)interval[i];

		if (!n->counted || n->leaving || interval[i] <= 0)
			continue;
		if (n->saturated)
			flipped |= (double)sent[i] * 1000 < FLIP_IDLE_SHARE * at_ceil;
		else
			flipped |= (double)sent[i] * 1000 >= SATURATED_SHARE * at_ceil ||
				   backlogged(n, backlog[i], sent[i], interval[i]);
	}
	return flipped;
}

/*
 * Each class of one direction's IFB (ifindex ifb) to what its state asks
 * for: one change where it differs. A class gone since the dump (-ENOENT)
 * is a missing class: its namespace's next pod makes it.
 */
static void apply_ceils(struct agent *a, struct nl_sock *sk, enum budget_dir dir, int ifb,
			int64_t now_ms, struct agent_notes *notes)
{
	struct agent_budgets *b = &a->budgets;
	int mtu = a->cfg.mtu ? a->cfg.mtu : 1500;

	for (size_t i = 0; i < b->n; i++) {
		struct agent_budget_ns *n = &b->ns[i];
		uint64_t want = wanted_ceil(a, n, now_ms);
		int r;

		if (n->dir != dir || !n->present || n->kernel_ceil == want)
			continue;
		r = shaper_ns_set_ceil(sk, ifb, n->ns_class, want * 8, mtu);
		if (r == -ENOENT) {
			n->present = false;
			continue;
		}
		if (r < 0) {
			b->ceil_failures++;
			agent_note(notes,
				   "msg=\"budget: setting a namespace's ceil failed\" namespace=%s "
				   "direction=%s ceil_bytes_per_second=%llu err=%s",
				   LOGFMT_Q(n->ns), budget_dir_names[n->dir],
				   (unsigned long long)want, LOGFMT_Q(strerror(-r)));
			continue;
		}
		n->kernel_ceil = want;
		b->ceil_changes++;
		b->dirty = true;
	}
}

/* Reads the classes (with_counters: a report's counters too) and applies every ceil. */
int agent_budgets_read_and_apply(struct agent *a, bool with_counters, int64_t now_ms,
				 struct agent_notes *notes, struct tg_err *e)
{
	struct agent_budgets *b = &a->budgets;
	struct nl_sock *sk;
	struct class_read cr = { .b = b, .now_ms = now_ms };
	uint64_t fired, failed;
	int r = budget_sock(b, &sk);

	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "netlink: %s", strerror(-r));
	/*
	 * When the lease guard lowered a class since the last look, what the
	 * loop believes of the ceils is stale (a renewal that crossed it would
	 * look applied): every class is put again.
	 */
	lease_guard_counts(b->guard, &fired, &failed);
	if (fired != b->guard_fired) {
		b->guard_fired = fired;
		for (size_t i = 0; i < b->n; i++)
			b->ns[i].kernel_ceil = 0;
	}
	if (with_counters)
		for (size_t i = 0; i < b->n; i++) {
			b->ns[i].present = false;
			b->ns[i].backlog = 0;
			b->ns[i].floor = 0;
		}
	for (int d = 0; d < BUDGET_DIRS; d++) {
		enum budget_dir dir = (enum budget_dir)d;
		int ifb = agent_budgets_ifindex(sk, dir);

		if (!ifb)
			continue; /* no such IFB yet: the declaration makes it */
		if (with_counters) {
			cr.dir = dir;
			r = shaper_dump_classes(sk, ifb, on_class, &cr);
			if (r < 0) {
				budget_sock_drop(b);
				return tg_fail(e, CNI_ERR_IO, r, "reading the classes of %s: %s",
					       dir_ifb(dir), strerror(-r));
			}
			for (size_t i = 0; i < b->n; i++)
				if (b->ns[i].dir == dir &&
				    backlogged(&b->ns[i], b->ns[i].backlog, b->ns[i].sent,
					       b->ns[i].interval_ms))
					b->ns[i].saturated = true;
		}
		apply_ceils(a, sk, dir, ifb, now_ms, notes);
	}
	return 0;
}
