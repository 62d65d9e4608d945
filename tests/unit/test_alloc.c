// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator (ipam/alloc.c): ipam_assign, ipam_release, ipam_count,
 * ipam_expire_cooling, ipam_check_boot, ipam_set_pool, ipam_read_boot_id.
 * Pure functions over struct ipam_state; the clock is passed in.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipam/imds.h"
#include "ipam/internal.h"
#include "ipam/ipam.h"
#include "ipam/pool.h"
#include "ipam/store.h"
#include "lib/ip4.h"
#include "tests/unit/helpers.h"

#define T0 1700000000000LL /* an arbitrary "now" in ms */
#define COOL 30000

#define assert_ip(got, want)                                           \
	do {                                                           \
		uint32_t g_ = (got), w_ = ip(want);                    \
		if (g_ != w_)                                          \
			fail_msg("got %s, want %s", ip_str(g_), want); \
	} while (0)

/* A pool of the addresses lo..hi (inclusive), handed to the state. */
static void set_range(struct ipam_state *st, const char *lo, const char *hi)
{
	uint32_t a = ip(lo), b = ip(hi);
	uint32_t *pool = malloc((b - a + 1) * sizeof(*pool));

	assert_non_null(pool);
	for (uint32_t i = 0; i <= b - a; i++)
		pool[i] = a + i;
	ipam_set_pool(st, "static", pool, b - a + 1);
}

static struct ipam_attachment req(const char *cid, const char *ifname)
{
	struct ipam_attachment r;

	memset(&r, 0, sizeof(r));
	snprintf(r.container_id, sizeof(r.container_id), "%s", cid);
	snprintf(r.ifname, sizeof(r.ifname), "%s", ifname);
	snprintf(r.netns, sizeof(r.netns), "/var/run/netns/%s", cid);
	snprintf(r.k8s_namespace, sizeof(r.k8s_namespace), "ns");
	snprintf(r.pod, sizeof(r.pod), "pod-%s", cid);
	snprintf(r.host_veth, sizeof(r.host_veth), "tg0123456789ab");
	r.created = 1700000000;
	return r;
}

/* Assigns and fails the test unless it succeeds; returns the address. */
static uint32_t assign_at(struct ipam_state *st, const char *cid, const char *ifname, int64_t now,
			  int64_t cooldown, bool *existing)
{
	struct ipam_attachment rq = req(cid, ifname), got;
	struct tg_err e = { 0 };
	bool ex = false;
	int r = ipam_assign(st, &rq, now, cooldown, &got, &ex, &e);

	if (r != 0)
		fail_msg("ipam_assign(%s, %s) failed r=%d code=%d: %s", cid, ifname, r, e.code,
			 e.msg);
	if (existing)
		*existing = ex;
	return got.ip;
}

static uint32_t assign(struct ipam_state *st, const char *cid)
{
	return assign_at(st, cid, "eth0", T0, COOL, NULL);
}

static int assign_fails(struct ipam_state *st, const char *cid, int64_t now, int64_t cooldown,
			struct tg_err *e)
{
	struct ipam_attachment rq = req(cid, "eth0"), got;
	bool ex = false;
	size_t before = st->n_att;
	int r;

	memset(e, 0, sizeof(*e));
	memset(&got, 0, sizeof(got));
	r = ipam_assign(st, &rq, now, cooldown, &got, &ex, e);
	if (r == 0)
		fail_msg("ipam_assign(%s) succeeded with %s, want a failure", cid, ip_str(got.ip));
	assert_int_equal(st->n_att, before);
	return r;
}

/* The counts as wanted; and always: the pool's three states sum to it, the four to held. */
static void check_counts(const struct ipam_state *st, int64_t now, int64_t cooldown, size_t pool,
			 size_t allocated, size_t cooling, size_t free_, size_t retired)
{
	struct ipam_counts c;

	assert_int_equal(ipam_count(st, now, cooldown, &c), 0);
	if (c.pool != pool || c.allocated != allocated || c.cooling != cooling || c.free != free_ ||
	    c.retired != retired)
		fail_msg("counts pool=%zu allocated=%zu cooling=%zu free=%zu retired=%zu, want "
			 "%zu %zu %zu %zu %zu",
			 c.pool, c.allocated, c.cooling, c.free, c.retired, pool, allocated,
			 cooling, free_, retired);
	assert_int_equal(c.allocated + c.cooling + c.free, c.pool);
	assert_int_equal(c.allocated + c.cooling + c.free + c.retired, c.held);
}

static int setup(void **state)
{
	struct ipam_state *st = malloc(sizeof(*st));

	if (!st)
		return -1;
	ipam_state_init(st);
	*state = st;
	return 0;
}

static int teardown(void **state)
{
	ipam_state_free(*state);
	free(*state);
	return 0;
}

/* ---- init / pool ---- */

static void t_init_is_empty(void **state)
{
	struct ipam_state *st = *state;

	assert_int_equal(st->version, IPAM_STATE_VERSION);
	assert_int_equal(st->n_pool, 0);
	assert_int_equal(st->n_att, 0);
	assert_int_equal(st->n_cooling, 0);
	assert_string_equal(st->boot_id, "");
	assert_string_equal(st->source, "");
	check_counts(st, T0, COOL, 0, 0, 0, 0, 0);
}

static void t_set_pool_replaces(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.4");
	assert_int_equal(st->n_pool, 4);
	assert_string_equal(st->source, "static");
	uint32_t *p = malloc(2 * sizeof(*p));
	assert_non_null(p);
	p[0] = ip("10.2.0.1");
	p[1] = ip("10.2.0.2");
	ipam_set_pool(st, "imds", p, 2); /* the old pool is freed (ASan would see a leak) */
	assert_ptr_equal(st->pool, p);
	assert_int_equal(st->n_pool, 2);
	assert_string_equal(st->source, "imds");
	assert_ip(assign(st, "a"), "10.2.0.1");
}

/* ---- assign ---- */

static void t_assign_first_address(void **state)
{
	struct ipam_state *st = *state;
	struct ipam_attachment rq = req("c1", "eth0"), got;
	struct tg_err e = { 0 };
	bool ex = true;

	set_range(st, "10.1.0.10", "10.1.0.14");
	assert_int_equal(ipam_assign(st, &rq, T0, COOL, &got, &ex, &e), 0);
	assert_false(ex);
	assert_ip(got.ip, "10.1.0.10");
	assert_string_equal(got.container_id, "c1");
	assert_string_equal(got.ifname, "eth0");
	assert_string_equal(got.netns, "/var/run/netns/c1");
	assert_string_equal(got.k8s_namespace, "ns");
	assert_string_equal(got.pod, "pod-c1");
	assert_string_equal(got.host_veth, "tg0123456789ab");
	assert_int_equal(got.created, 1700000000);
	assert_int_equal(st->n_att, 1);
	assert_memory_equal(&st->att[0], &got, sizeof(got));
	assert_ip(st->last_ip, "10.1.0.10");
	assert_int_equal(e.code, 0);
}

static void t_assign_ignores_requested_ip(void **state)
{
	struct ipam_state *st = *state;
	struct ipam_attachment rq = req("c1", "eth0"), got;
	bool ex;

	set_range(st, "10.1.0.10", "10.1.0.14");
	rq.ip = ip("10.9.9.9");
	assert_int_equal(ipam_assign(st, &rq, T0, COOL, &got, &ex, NULL), 0);
	assert_ip(got.ip, "10.1.0.10");
	assert_ip(st->att[0].ip, "10.1.0.10");
}

static void t_assign_distinct_addresses(void **state)
{
	struct ipam_state *st = *state;
	char cid[32];

	set_range(st, "10.1.0.1", "10.1.0.50");
	for (int i = 0; i < 50; i++) {
		snprintf(cid, sizeof(cid), "c%d", i);
		assign(st, cid);
	}
	assert_int_equal(st->n_att, 50);
	for (size_t i = 0; i < 50; i++)
		for (size_t j = i + 1; j < 50; j++)
			assert_true(st->att[i].ip != st->att[j].ip);
	check_counts(st, T0, COOL, 50, 50, 0, 0, 0);
}

static void t_assign_idempotent(void **state)
{
	struct ipam_state *st = *state;
	bool ex = false;
	uint32_t a, b;

	set_range(st, "10.1.0.1", "10.1.0.5");
	a = assign_at(st, "c1", "eth0", T0, COOL, &ex);
	assert_false(ex);
	b = assign_at(st, "c1", "eth0", T0 + 5, COOL, &ex);
	assert_true(ex);
	assert_int_equal(a, b);
	assert_int_equal(st->n_att, 1);
	assert_int_equal(st->last_ip, a);
}

static void t_assign_idempotent_returns_stored_record(void **state)
{
	struct ipam_state *st = *state;
	struct ipam_attachment rq = req("c1", "eth0"), got;
	bool ex;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assign(st, "c1");
	/* a retried ADD with other details gets the stored attachment back */
	snprintf(rq.pod, sizeof(rq.pod), "other");
	assert_int_equal(ipam_assign(st, &rq, T0, COOL, &got, &ex, NULL), 0);
	assert_true(ex);
	assert_string_equal(got.pod, "pod-c1");
	assert_int_equal(st->n_att, 1);
}

static void t_assign_idempotent_when_full(void **state)
{
	struct ipam_state *st = *state;
	bool ex = false;

	set_range(st, "10.1.0.1", "10.1.0.2");
	assign(st, "c1");
	assign(st, "c2");
	assert_ip(assign_at(st, "c2", "eth0", T0, COOL, &ex), "10.1.0.2");
	assert_true(ex);
}

static void t_assign_other_ifname_new_ip(void **state)
{
	struct ipam_state *st = *state;
	bool ex = true;
	uint32_t a, b;

	set_range(st, "10.1.0.1", "10.1.0.5");
	a = assign_at(st, "c1", "eth0", T0, COOL, NULL);
	b = assign_at(st, "c1", "net1", T0, COOL, &ex);
	assert_false(ex);
	assert_true(a != b);
	assert_int_equal(st->n_att, 2);
	assert_non_null(ipam_find(st, "c1", "eth0"));
	assert_non_null(ipam_find(st, "c1", "net1"));
	assert_int_equal(ipam_find(st, "c1", "net1")->ip, b);
}

static void t_assign_other_container_new_ip(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assert_ip(assign(st, "c1"), "10.1.0.1");
	assert_ip(assign(st, "c2"), "10.1.0.2");
	/* container IDs are compared whole, not by prefix */
	assert_ip(assign(st, "c"), "10.1.0.3");
	assert_ip(assign(st, "c10"), "10.1.0.4");
}

static void t_find_and_find_ip(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assign(st, "c1");
	assign(st, "c2");
	assert_null(ipam_find(st, "c3", "eth0"));
	assert_null(ipam_find(st, "c1", "eth1"));
	assert_string_equal(ipam_find_ip(st, ip("10.1.0.2"))->container_id, "c2");
	assert_null(ipam_find_ip(st, ip("10.1.0.3")));
}

/* ---- exhaustion ---- */

static void t_exhaustion(void **state)
{
	struct ipam_state *st = *state;
	struct tg_err e;

	set_range(st, "10.1.0.1", "10.1.0.3");
	assign(st, "c1");
	assign(st, "c2");
	assign(st, "c3");
	assert_int_equal(assign_fails(st, "c4", T0, COOL, &e), -ENOSPC);
	assert_int_equal(e.code, CNI_ERR_TRY_AGAIN);
	assert_int_equal(e.code, 11);
	assert_contains(e.msg, "3 of 3");
	assert_contains(e.msg, "0 cooling");
	check_counts(st, T0, COOL, 3, 3, 0, 0, 0);
}

static void t_exhaustion_counts_cooling(void **state)
{
	struct ipam_state *st = *state;
	struct tg_err e;

	set_range(st, "10.1.0.1", "10.1.0.3");
	assign(st, "c1");
	assign(st, "c2");
	assign(st, "c3");
	assert_int_equal(ipam_release(st, "c2", "eth0", T0, true, NULL), 1);
	assert_int_equal(assign_fails(st, "c4", T0 + 1000, COOL, &e), -ENOSPC);
	assert_int_equal(e.code, 11);
	assert_contains(e.msg, "2 of 3");
	assert_contains(e.msg, "1 cooling");
}

static void t_empty_pool(void **state)
{
	struct ipam_state *st = *state;
	struct tg_err e;

	assert_int_equal(assign_fails(st, "c1", T0, COOL, &e), -ENOSPC);
	assert_int_equal(e.code, 11);
	assert_contains(e.msg, "empty");
}

static void t_exhaustion_null_err(void **state)
{
	struct ipam_state *st = *state;
	struct ipam_attachment rq = req("c2", "eth0"), got;
	bool ex;

	set_range(st, "10.1.0.1", "10.1.0.1");
	assign(st, "c1");
	assert_int_equal(ipam_assign(st, &rq, T0, COOL, &got, &ex, NULL), -ENOSPC);
}

/* ---- release ---- */

static void t_release(void **state)
{
	struct ipam_state *st = *state;
	struct ipam_attachment gone;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assign(st, "c1");
	assign(st, "c2");
	assign(st, "c3");
	memset(&gone, 0, sizeof(gone));
	assert_int_equal(ipam_release(st, "c2", "eth0", T0, true, &gone), 1);
	assert_string_equal(gone.container_id, "c2");
	assert_ip(gone.ip, "10.1.0.2");
	assert_string_equal(gone.pod, "pod-c2");
	assert_int_equal(st->n_att, 2);
	assert_null(ipam_find(st, "c2", "eth0"));
	/* the others are intact */
	assert_ip(ipam_find(st, "c1", "eth0")->ip, "10.1.0.1");
	assert_ip(ipam_find(st, "c3", "eth0")->ip, "10.1.0.3");
	assert_string_equal(ipam_find(st, "c3", "eth0")->pod, "pod-c3");
	assert_int_equal(st->n_cooling, 1);
	assert_ip(st->cooling[0].ip, "10.1.0.2");
	assert_int_equal(st->cooling[0].released_ms, T0);
}

static void t_release_unknown(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assign(st, "c1");
	assert_int_equal(ipam_release(st, "c2", "eth0", T0, true, NULL), 0);
	assert_int_equal(ipam_release(st, "c1", "eth1", T0, true, NULL), 0);
	assert_int_equal(st->n_att, 1);
	assert_int_equal(st->n_cooling, 0);
	/* releasing twice: the second time finds nothing */
	assert_int_equal(ipam_release(st, "c1", "eth0", T0, true, NULL), 1);
	assert_int_equal(ipam_release(st, "c1", "eth0", T0, true, NULL), 0);
	assert_int_equal(st->n_att, 0);
	assert_int_equal(st->n_cooling, 1);
}

static void t_release_only_the_named_ifname(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assign_at(st, "c1", "eth0", T0, COOL, NULL);
	assign_at(st, "c1", "net1", T0, COOL, NULL);
	assert_int_equal(ipam_release(st, "c1", "net1", T0, false, NULL), 1);
	assert_non_null(ipam_find(st, "c1", "eth0"));
	assert_null(ipam_find(st, "c1", "net1"));
}

static void t_release_last_and_first(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assign(st, "c1");
	assign(st, "c2");
	assign(st, "c3");
	assert_int_equal(ipam_release(st, "c3", "eth0", T0, false, NULL), 1);
	assert_int_equal(ipam_release(st, "c1", "eth0", T0, false, NULL), 1);
	assert_int_equal(st->n_att, 1);
	assert_string_equal(st->att[0].container_id, "c2");
	assert_int_equal(ipam_release(st, "c2", "eth0", T0, false, NULL), 1);
	assert_int_equal(st->n_att, 0);
	check_counts(st, T0, COOL, 5, 0, 0, 5, 0);
}

/* ---- cool-down ---- */

static void t_cooldown_blocks_reuse(void **state)
{
	struct ipam_state *st = *state;
	struct tg_err e;

	set_range(st, "10.1.0.1", "10.1.0.2");
	assign(st, "a");
	assign(st, "b");
	assert_int_equal(ipam_release(st, "a", "eth0", T0 + 1000, true, NULL), 1);
	/* 1 ms before the cool-down ends: still resting */
	assert_int_equal(assign_fails(st, "c", T0 + 1000 + COOL - 1, COOL, &e), -ENOSPC);
	assert_int_equal(e.code, 11);
	check_counts(st, T0 + 1000 + COOL - 1, COOL, 2, 1, 1, 0, 0);
	/* exactly when it ends: handed out again */
	check_counts(st, T0 + 1000 + COOL, COOL, 2, 1, 0, 1, 0);
	assert_ip(assign_at(st, "c", "eth0", T0 + 1000 + COOL, COOL, NULL), "10.1.0.1");
}

static void t_cooldown_prefers_rested_address(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.3");
	assign(st, "a"); /* .1 */
	assign(st, "b"); /* .2 */
	assert_int_equal(ipam_release(st, "a", "eth0", T0, true, NULL), 1);
	/* .1 rests, .3 is free: .3 */
	assert_ip(assign_at(st, "c", "eth0", T0 + 10, COOL, NULL), "10.1.0.3");
}

static void t_release_without_cooling(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.1");
	assign(st, "a");
	assert_int_equal(ipam_release(st, "a", "eth0", T0, false, NULL), 1);
	assert_int_equal(st->n_cooling, 0);
	assert_ip(assign_at(st, "b", "eth0", T0, COOL, NULL), "10.1.0.1");
}

static void t_cooldown_zero(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.1");
	assign_at(st, "a", "eth0", T0, 0, NULL);
	assert_int_equal(ipam_release(st, "a", "eth0", T0, true, NULL), 1);
	check_counts(st, T0, 0, 1, 0, 0, 1, 0);
	assert_ip(assign_at(st, "b", "eth0", T0, 0, NULL), "10.1.0.1");
}

static void t_expire_cooling(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assign(st, "a");
	assign(st, "b");
	assign(st, "c");
	assert_int_equal(ipam_release(st, "a", "eth0", T0, true, NULL), 1);
	assert_int_equal(ipam_release(st, "b", "eth0", T0 + 10000, true, NULL), 1);
	assert_int_equal(ipam_release(st, "c", "eth0", T0 + 20000, true, NULL), 1);
	assert_int_equal(st->n_cooling, 3);
	ipam_expire_cooling(st, T0 + 25000, COOL);
	assert_int_equal(st->n_cooling, 3);
	ipam_expire_cooling(st, T0 + 30000, COOL); /* a's record is exactly 30 s old */
	assert_int_equal(st->n_cooling, 2);
	assert_ip(st->cooling[0].ip, "10.1.0.2");
	assert_ip(st->cooling[1].ip, "10.1.0.3");
	ipam_expire_cooling(st, T0 + 45000, COOL);
	assert_int_equal(st->n_cooling, 1);
	assert_ip(st->cooling[0].ip, "10.1.0.3");
	assert_int_equal(st->cooling[0].released_ms, T0 + 20000);
	ipam_expire_cooling(st, T0 + 50000, COOL);
	assert_int_equal(st->n_cooling, 0);
	check_counts(st, T0 + 50000, COOL, 5, 0, 0, 5, 0);
}

static void t_expire_cooling_with_zero_cooldown(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assign(st, "a");
	assert_int_equal(ipam_release(st, "a", "eth0", T0, true, NULL), 1);
	ipam_expire_cooling(st, T0, 0);
	assert_int_equal(st->n_cooling, 0);
}

static void t_counts_while_cooling(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.10");
	assign(st, "a");
	assign(st, "b");
	assign(st, "c");
	assert_int_equal(ipam_release(st, "b", "eth0", T0, true, NULL), 1);
	check_counts(st, T0 + 1, COOL, 10, 2, 1, 7, 0);
	check_counts(st, T0 + COOL, COOL, 10, 2, 0, 8, 0);
}

/* ---- round robin ---- */

static void t_round_robin_next_after_last(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assert_ip(assign(st, "a"), "10.1.0.1");
	assert_ip(assign(st, "b"), "10.1.0.2");
	assert_int_equal(ipam_release(st, "a", "eth0", T0, false, NULL), 1);
	/* .1 is free at once (no cool-down record) but the next one after .2 comes first */
	assert_ip(assign(st, "c"), "10.1.0.3");
	assert_ip(st->last_ip, "10.1.0.3");
}

static void t_round_robin_wraps(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assign(st, "a");
	assign(st, "b");
	assign(st, "c");
	assign(st, "d");
	assert_ip(assign(st, "e"), "10.1.0.5");
	assert_int_equal(ipam_release(st, "b", "eth0", T0, false, NULL), 1);
	assert_int_equal(ipam_release(st, "d", "eth0", T0, false, NULL), 1);
	/* after .5 the search wraps to the start: .1 is held, .2 is free */
	assert_ip(assign(st, "f"), "10.1.0.2");
	assert_ip(assign(st, "g"), "10.1.0.4");
}

static void t_round_robin_skips_cooling(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.4");
	assign(st, "a");
	assign(st, "b");
	assign(st, "c");
	assign(st, "d");
	assert_int_equal(ipam_release(st, "a", "eth0", T0, true, NULL), 1);
	assert_int_equal(ipam_release(st, "b", "eth0", T0 + COOL, true, NULL), 1);
	/* at T0+COOL: .1 has rested, .2 is cooling */
	assert_ip(assign_at(st, "e", "eth0", T0 + COOL, COOL, NULL), "10.1.0.1");
}

static void t_round_robin_sparse_pool(void **state)
{
	struct ipam_state *st = *state;
	uint32_t *p = malloc(3 * sizeof(*p));

	assert_non_null(p);
	p[0] = ip("10.1.0.10");
	p[1] = ip("10.1.0.20");
	p[2] = ip("10.1.0.30");
	ipam_set_pool(st, "static", p, 3);
	st->last_ip = ip("10.1.0.15"); /* a hint between pool addresses */
	assert_ip(assign(st, "a"), "10.1.0.20");
	assert_ip(assign(st, "b"), "10.1.0.30");
	assert_ip(assign(st, "c"), "10.1.0.10");
}

static void t_round_robin_hint_outside_pool(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.3");
	st->last_ip = ip("10.9.0.0"); /* beyond every pool address: start over */
	assert_ip(assign(st, "a"), "10.1.0.1");
	st->last_ip = ip("1.0.0.0"); /* before every pool address */
	assert_ip(assign(st, "b"), "10.1.0.2");
}

static void t_round_robin_full_cycle(void **state)
{
	struct ipam_state *st = *state;
	char cid[32];

	/* assign and release one at a time: every address is used once before any repeats */
	set_range(st, "10.1.0.1", "10.1.0.8");
	for (int i = 0; i < 16; i++) {
		uint32_t a;

		snprintf(cid, sizeof(cid), "c%d", i);
		a = assign(st, cid);
		assert_int_equal(a, ip("10.1.0.1") + (uint32_t)(i % 8));
		assert_int_equal(ipam_release(st, cid, "eth0", T0, false, NULL), 1);
	}
}

/* ---- retired addresses (pool shrinks while in use) ---- */

static void t_retired_stays_attached(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assign(st, "a");		       /* .1 */
	assign(st, "b");		       /* .2 */
	assign(st, "c");		       /* .3 */
	set_range(st, "10.1.0.2", "10.1.0.5"); /* .1 leaves the pool */
	assert_int_equal(st->n_att, 3);
	assert_ip(ipam_find(st, "a", "eth0")->ip, "10.1.0.1");
	check_counts(st, T0, COOL, 4, 2, 0, 2, 1);
	/* a retried ADD still gets its (retired) address back */
	bool ex = false;
	assert_ip(assign_at(st, "a", "eth0", T0, COOL, &ex), "10.1.0.1");
	assert_true(ex);
}

static void t_retired_never_handed_out_again(void **state)
{
	struct ipam_state *st = *state;
	struct tg_err e;

	set_range(st, "10.1.0.1", "10.1.0.3");
	assign(st, "a"); /* .1 */
	set_range(st, "10.1.0.2", "10.1.0.3");
	assert_int_equal(ipam_release(st, "a", "eth0", T0, false, NULL), 1);
	check_counts(st, T0, COOL, 2, 0, 0, 2, 0);
	assert_ip(assign(st, "b"), "10.1.0.2");
	assert_ip(assign(st, "c"), "10.1.0.3");
	assert_int_equal(assign_fails(st, "d", T0, COOL, &e), -ENOSPC);
	assert_null(ipam_find_ip(st, ip("10.1.0.1")));
}

static void t_retired_release_cooling_not_counted(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.3");
	assign(st, "a");
	assign(st, "b");
	set_range(st, "10.1.0.2", "10.1.0.4");
	check_counts(st, T0, COOL, 3, 1, 0, 2, 1);
	assert_int_equal(ipam_release(st, "a", "eth0", T0, true, NULL), 1);
	/* its cool-down record concerns an address outside the pool */
	check_counts(st, T0 + 1, COOL, 3, 1, 0, 2, 0);
}

/*
 * Every state at once, each address counted once: two cool-down records of
 * one address (a shorter cool-down in an older config let it go out and
 * come back), a record of an address a pod holds again, one of an address
 * outside the pool. The four states sum to what the node holds.
 */
static void t_counts_partition(void **state)
{
	struct ipam_state *st = *state;
	struct ipam_counts c;

	set_range(st, "10.1.0.1", "10.1.0.6");
	assign(st, "a"); /* .1: stays, then retired */
	assign(st, "b"); /* .2: allocated */
	assign(st, "c"); /* .3: released, out again, released: cooling, two records */
	assign(st, "d"); /* .4: released, out again: allocated, with a record */
	assert_int_equal(ipam_release(st, "c", "eth0", T0, true, NULL), 1);
	assert_int_equal(ipam_release(st, "d", "eth0", T0, true, NULL), 1);
	/* cool-down 0: .3 and .4 go out again at once */
	assert_ip(assign_at(st, "c2", "eth0", T0 + 1, 0, NULL), "10.1.0.5");
	assert_ip(assign_at(st, "c3", "eth0", T0 + 1, 0, NULL), "10.1.0.6");
	assert_ip(assign_at(st, "c4", "eth0", T0 + 1, 0, NULL), "10.1.0.3");
	assert_int_equal(ipam_release(st, "c4", "eth0", T0 + 2, true, NULL), 1);
	assert_ip(assign_at(st, "d2", "eth0", T0 + 3, 0, NULL), "10.1.0.4");
	assert_int_equal(ipam_release(st, "c2", "eth0", T0 + 3, false, NULL), 1); /* .5 free */
	assert_int_equal(st->n_cooling, 3);
	/* .1 leaves the pool (its pod stays); .7 joins, free */
	{
		uint32_t *pool = malloc(6 * sizeof(*pool));

		assert_non_null(pool);
		for (int i = 0; i < 6; i++)
			pool[i] = ip("10.1.0.2") + (uint32_t)i;
		ipam_set_pool(st, "static", pool, 6);
	}
	/* .2 .4 .6 allocated; .3 cooling (two records); .5 .7 free; .1 retired */
	check_counts(st, T0 + 4, COOL, 6, 3, 1, 2, 1);
	assert_int_equal(ipam_count(st, T0 + 4, COOL, &c), 0);
	assert_int_equal(c.held, 7);
	/* control: the records' cool-downs over, .3 is free and the sum stays */
	check_counts(st, T0 + 3 + COOL, COOL, 6, 3, 0, 3, 1);
}

static void t_pool_grows(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.1");
	assign(st, "a");
	set_range(st, "10.1.0.1", "10.1.0.3");
	check_counts(st, T0, COOL, 3, 1, 0, 2, 0);
	assert_ip(assign(st, "b"), "10.1.0.2");
	assert_ip(assign(st, "c"), "10.1.0.3");
}

/*
 * An emptied pool (pool NULL, n_pool 0) with an attachment still in place: the
 * counts and a refused assignment. Runs in a child so that a crash or a
 * sanitizer abort fails this case only. Exit codes name the failed check.
 */
static int pool_emptied_child(void *arg)
{
	struct ipam_state st;
	struct ipam_attachment rq, got;
	struct ipam_counts c;
	struct tg_err e = { 0 };
	uint32_t *p = malloc(2 * sizeof(*p));
	bool ex;

	if (!p)
		return 2;
	ipam_state_init(&st);
	p[0] = ip("10.1.0.1");
	p[1] = ip("10.1.0.2");
	ipam_set_pool(&st, "static", p, 2);
	rq = req("a", "eth0");
	if (ipam_assign(&st, &rq, T0, COOL, &got, &ex, &e) != 0 || got.ip != ip("10.1.0.1"))
		return 3;
	rq = req("b", "eth0");
	ipam_set_pool(&st, "imds", NULL, 0);
	ipam_count(&st, T0, COOL, &c);
	if (c.pool != 0 || c.allocated != 0 || c.cooling != 0 || c.free != 0 || c.retired != 1 ||
	    c.held != 1)
		return 4;
	if (ipam_assign(&st, &rq, T0, COOL, &got, &ex, &e) != -ENOSPC || e.code != 11)
		return 5;
	if (!ipam_find(&st, "a", "eth0"))
		return 6;
	if (ipam_release(&st, "a", "eth0", T0, true, NULL) != 1)
		return 7;
	ipam_count(&st, T0 + 1, COOL, &c);
	if (c.pool != 0 || c.cooling != 0 || c.free != 0 || c.retired != 0 || c.held != 0)
		return 8;
	ipam_state_free(&st);
	return 0;
}

static void t_pool_emptied(void **state)
{
	int rc = child_run(pool_emptied_child, NULL, "the emptied-pool checks");

	if (rc != 0)
		fail_msg("check %d failed (1: a sanitizer report is above)", rc);
}

/* ---- counts invariant ---- */

static void t_counts_invariant_random(void **state)
{
	struct ipam_state *st = *state;
	unsigned seed = 12345;
	int64_t now = T0;
	char cid[32];

	set_range(st, "10.1.0.1", "10.1.0.40");
	for (int i = 0; i < 2000; i++) {
		struct ipam_counts c;
		struct ipam_attachment rq, got;
		bool ex;
		int k = (int)(rand_r(&seed) % 60);

		now += rand_r(&seed) % 3000;
		snprintf(cid, sizeof(cid), "c%d", k);
		ipam_expire_cooling(st, now, 5000);
		if (rand_r(&seed) % 2) {
			rq = req(cid, "eth0");
			(void)ipam_assign(st, &rq, now, 5000, &got, &ex, NULL);
		} else {
			(void)ipam_release(st, cid, "eth0", now, true, NULL);
		}
		ipam_count(st, now, 5000, &c);
		assert_int_equal(c.pool, 40);
		assert_int_equal(c.allocated + c.cooling + c.free, c.pool);
		assert_int_equal(c.held, c.pool);
		assert_int_equal(c.allocated, st->n_att);
		assert_int_equal(c.retired, 0);
		/* no two attachments share an address */
		for (size_t x = 0; x < st->n_att; x++)
			for (size_t y = x + 1; y < st->n_att; y++)
				assert_true(st->att[x].ip != st->att[y].ip);
		/* no attachment holds a cooling address */
		for (size_t x = 0; x < st->n_cooling; x++)
			assert_null(ipam_find_ip(st, st->cooling[x].ip));
	}
}

/* ---- boot id ---- */

static void t_boot_first_time_records(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	assign(st, "a");
	assert_int_equal(ipam_check_boot(st, "boot-1"), 0);
	assert_string_equal(st->boot_id, "boot-1");
	assert_int_equal(st->n_att, 1);
}

static void t_boot_same_keeps(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.5");
	ipam_check_boot(st, "boot-1");
	assign(st, "a");
	assign(st, "b");
	assert_int_equal(ipam_release(st, "b", "eth0", T0, true, NULL), 1);
	assert_int_equal(ipam_check_boot(st, "boot-1"), 0);
	assert_int_equal(st->n_att, 1);
	assert_int_equal(st->n_cooling, 1);
}

static void t_boot_change_drops_all(void **state)
{
	struct ipam_state *st = *state;

	set_range(st, "10.1.0.1", "10.1.0.3");
	ipam_check_boot(st, "boot-1");
	assign(st, "a");
	assign(st, "b");
	assign(st, "c");
	assert_int_equal(ipam_release(st, "c", "eth0", T0, true, NULL), 1);
	assert_int_equal(ipam_check_boot(st, "boot-2"), 2);
	assert_string_equal(st->boot_id, "boot-2");
	assert_int_equal(st->n_att, 0);
	assert_int_equal(st->n_cooling, 0);
	assert_null(ipam_find(st, "a", "eth0"));
	/* the pool survives and every address is free again */
	assert_int_equal(st->n_pool, 3);
	check_counts(st, T0 + 1, COOL, 3, 0, 0, 3, 0);
	assign_at(st, "x", "eth0", T0 + 1, COOL, NULL);
	assign_at(st, "y", "eth0", T0 + 1, COOL, NULL);
	assign_at(st, "z", "eth0", T0 + 1, COOL, NULL);
	/* and a second call with the new id changes nothing */
	assert_int_equal(ipam_check_boot(st, "boot-2"), 0);
	assert_int_equal(st->n_att, 3);
}

static void t_read_boot_id(void **state)
{
	char dir[64], path[96], buf[64];
	FILE *f;

	assert_true(tmpdir_make(dir, sizeof(dir), "/tmp", "boot"));
	snprintf(path, sizeof(path), "%s/boot_id", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("3c2e6e5e-1111-2222-3333-444455556666\n", f);
	fclose(f);
	assert_int_equal(ipam_read_boot_id_from(path, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "3c2e6e5e-1111-2222-3333-444455556666");
	/* an empty file is no boot id */
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(ipam_read_boot_id_from(path, buf, sizeof(buf)), -ENODATA);
	/* a missing file is an error */
	unlink(path);
	assert_true(ipam_read_boot_id_from(path, buf, sizeof(buf)) < 0);
	assert_int_equal(rmdir(dir), 0);
}

static void t_read_boot_id_kernel(void **state)
{
	char buf[64];

	/* the environment cannot stand in for the kernel's boot id */
	setenv("TOLLGATE_BOOT_ID_FILE", "/nonexistent", 1);
	if (access("/proc/sys/kernel/random/boot_id", R_OK) != 0)
		skip();
	assert_int_equal(ipam_read_boot_id(buf, sizeof(buf)), 0);
	assert_int_equal(strlen(buf), 36); /* a UUID, newline trimmed */
	unsetenv("TOLLGATE_BOOT_ID_FILE");
}

/* ---- the group ---- */

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(t_init_is_empty),
		T(t_set_pool_replaces),
		T(t_assign_first_address),
		T(t_assign_ignores_requested_ip),
		T(t_assign_distinct_addresses),
		T(t_assign_idempotent),
		T(t_assign_idempotent_returns_stored_record),
		T(t_assign_idempotent_when_full),
		T(t_assign_other_ifname_new_ip),
		T(t_assign_other_container_new_ip),
		T(t_find_and_find_ip),
		T(t_exhaustion),
		T(t_exhaustion_counts_cooling),
		T(t_empty_pool),
		T(t_exhaustion_null_err),
		T(t_release),
		T(t_release_unknown),
		T(t_release_only_the_named_ifname),
		T(t_release_last_and_first),
		T(t_cooldown_blocks_reuse),
		T(t_cooldown_prefers_rested_address),
		T(t_release_without_cooling),
		T(t_cooldown_zero),
		T(t_expire_cooling),
		T(t_expire_cooling_with_zero_cooldown),
		T(t_counts_while_cooling),
		T(t_round_robin_next_after_last),
		T(t_round_robin_wraps),
		T(t_round_robin_skips_cooling),
		T(t_round_robin_sparse_pool),
		T(t_round_robin_hint_outside_pool),
		T(t_round_robin_full_cycle),
		T(t_retired_stays_attached),
		T(t_retired_never_handed_out_again),
		T(t_retired_release_cooling_not_counted),
		T(t_counts_partition),
		T(t_pool_grows),
		T(t_pool_emptied),
		T(t_counts_invariant_random),
		T(t_boot_first_time_records),
		T(t_boot_same_keeps),
		T(t_boot_change_drops_all),
		T(t_read_boot_id),
		T(t_read_boot_id_kernel),
	};

	return cmocka_run_group_tests_name("alloc", tests, NULL, NULL);
}
