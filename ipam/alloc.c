// SPDX-License-Identifier: Apache-2.0
/* The allocator: pure functions over struct ipam_state, no I/O. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipam/internal.h"
#include "ipam/ipam.h"
#include "ipam/pool.h"
#include "lib/cleanup.h"
#include "lib/ip4.h"
#include "lib/util.h"

void ipam_state_init(struct ipam_state *st)
{
	memset(st, 0, sizeof(*st));
	st->version = IPAM_STATE_VERSION;
}

void ipam_state_free(struct ipam_state *st)
{
	free(st->pool);
	free(st->pending);
	free(st->cooling);
	free(st->att);
	ipam_state_init(st);
}

const struct ipam_attachment *ipam_find(const struct ipam_state *st, const char *container_id,
					const char *ifname)
{
	for (size_t i = 0; i < st->n_att; i++)
		if (strcmp(st->att[i].container_id, container_id) == 0 &&
		    strcmp(st->att[i].ifname, ifname) == 0)
			return &st->att[i];
	return NULL;
}

const struct ipam_attachment *ipam_find_ip(const struct ipam_state *st, uint32_t ip)
{
	for (size_t i = 0; i < st->n_att; i++)
		if (st->att[i].ip == ip)
			return &st->att[i];
	return NULL;
}

void ipam_set_pool(struct ipam_state *st, const char *source, uint32_t *pool, size_t n)
{
	free(st->pool);
	st->pool = pool;
	st->n_pool = n;
	snprintf(st->source, sizeof(st->source), "%s", source);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

bool ipam_in_pool(const struct ipam_state *st, uint32_t ip)
{
	return ipam_addr_in(st->pool, st->n_pool, ip);
}

static bool still_cooling(const struct ipam_cooling *c, int64_t now_ms, int64_t cooldown_ms)
{
	return now_ms - c->released_ms < cooldown_ms && now_ms >= c->released_ms;
}

void ipam_expire_cooling(struct ipam_state *st, int64_t now_ms, int64_t cooldown_ms)
{
	size_t i, out = 0;

	for (i = 0; i < st->n_cooling; i++)
		if (still_cooling(&st->cooling[i], now_ms, cooldown_ms))
			st->cooling[out++] = st->cooling[i];
	st->n_cooling = out;
}

/* Sorted list of addresses that must not be handed out now: in use or cooling down. */
static uint32_t *busy_list(const struct ipam_state *st, int64_t now_ms, int64_t cooldown_ms,
			   size_t *ret_n)
{
	uint32_t *busy = malloc((st->n_att + st->n_cooling + 1) * sizeof(*busy));
	size_t n = 0, i;

	if (!busy)
		return NULL;
	for (i = 0; i < st->n_att; i++)
		busy[n++] = st->att[i].ip;
	for (i = 0; i < st->n_cooling; i++)
		if (still_cooling(&st->cooling[i], now_ms, cooldown_ms))
			busy[n++] = st->cooling[i].ip;
	qsort(busy, n, sizeof(*busy), cmp_u32);
	*ret_n = n;
	return busy;
}

int ipam_assign(struct ipam_state *st, const struct ipam_attachment *req, int64_t now_ms,
		int64_t cooldown_ms, struct ipam_attachment *ret, bool *ret_existing,
		struct tg_err *e)
{
	const struct ipam_attachment *old = ipam_find(st, req->container_id, req->ifname);
	_cleanup_free_ uint32_t *busy = NULL;
	struct ipam_attachment *grown;
	size_t n_busy, start = 0, k;
	struct ipam_counts c;

	if (old) {
		*ret = *old;
		*ret_existing = true;
		return 0;
	}
	if (st->n_pool == 0)
		return tg_fail(
			e, CNI_ERR_TRY_AGAIN, -ENOSPC,
			"the address pool is empty: run `tollgate-ipam sync` or set ipam.addresses");
	if (st->n_att >= IPAM_ATTACHMENTS_MAX)
		return tg_fail(e, CNI_ERR_TRY_AGAIN, -ENOSPC, "too many attachments (%d)",
			       IPAM_ATTACHMENTS_MAX);
	busy = busy_list(st, now_ms, cooldown_ms, &n_busy);
	/* bsearch() must not see a NULL array, even an empty one. */
	if (!busy)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");

	/* Start after the last address handed out so a released one rests as long as possible. */
	while (start < st->n_pool && st->pool[start] <= st->last_ip)
		start++;
	for (k = 0; k < st->n_pool; k++) {
		uint32_t ip = st->pool[(start + k) % st->n_pool];

		if (bsearch(&ip, busy, n_busy, sizeof(ip), cmp_u32))
			continue;
		grown = realloc(st->att, (st->n_att + 1) * sizeof(*st->att));
		if (!grown)
			return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
		st->att = grown;
		st->att[st->n_att] = *req;
		st->att[st->n_att].ip = ip;
		*ret = st->att[st->n_att];
		st->n_att++;
		st->last_ip = ip;
		*ret_existing = false;
		return 0;
	}
	ipam_count(st, now_ms, cooldown_ms, &c);
	return tg_fail(e, CNI_ERR_TRY_AGAIN, -ENOSPC,
		       "no free address: %zu of %zu in use, %zu cooling down after release "
		       "(see `tollgate-ipam list`)",
		       c.allocated, c.pool, c.cooling);
}

int ipam_release(struct ipam_state *st, const char *container_id, const char *ifname,
		 int64_t now_ms, bool cool, struct ipam_attachment *ret_removed)
{
	const struct ipam_attachment *a = ipam_find(st, container_id, ifname);
	size_t idx;

	if (!a)
		return 0;
	idx = (size_t)(a - st->att);
	if (ret_removed)
		*ret_removed = *a;
	if (cool) {
		struct ipam_cooling *grown =
			realloc(st->cooling, (st->n_cooling + 1) * sizeof(*st->cooling));

		/* Without memory for the record the address is simply free at once. */
		if (grown) {
			st->cooling = grown;
			/* padding zeroed too: the store's cache writes the record as bytes */
			memset(&st->cooling[st->n_cooling], 0, sizeof(st->cooling[0]));
			st->cooling[st->n_cooling].ip = a->ip;
			st->cooling[st->n_cooling].released_ms = now_ms;
			st->cooling[st->n_cooling].released_wall_ms = time_now_ms();
			st->n_cooling++;
		}
	}
	memmove(&st->att[idx], &st->att[idx + 1], (st->n_att - idx - 1) * sizeof(*st->att));
	st->n_att--;
	return 1;
}

/* Sorts and drops repeats: n after. */
static size_t sort_unique(uint32_t *a, size_t n)
{
	size_t out = 0;

	qsort(a, n, sizeof(*a), cmp_u32);
	for (size_t i = 0; i < n; i++)
		if (out == 0 || a[out - 1] != a[i])
			a[out++] = a[i];
	return out;
}

int ipam_count(const struct ipam_state *st, int64_t now_ms, int64_t cooldown_ms,
	       struct ipam_counts *ret)
{
	/* distinct addresses: a store may hold two records of one (two cool-downs) */
	_cleanup_free_ uint32_t *used = malloc((st->n_att + 1) * sizeof(*used));
	_cleanup_free_ uint32_t *resting = malloc((st->n_cooling + 1) * sizeof(*resting));
	size_t n_used = 0, n_resting = 0, i;

	memset(ret, 0, sizeof(*ret));
	if (!used || !resting)
		return -ENOMEM;
	for (i = 0; i < st->n_att; i++)
		used[n_used++] = st->att[i].ip;
	for (i = 0; i < st->n_cooling; i++)
		if (still_cooling(&st->cooling[i], now_ms, cooldown_ms))
			resting[n_resting++] = st->cooling[i].ip;
	n_used = sort_unique(used, n_used);
	n_resting = sort_unique(resting, n_resting);
	for (i = 0; i < st->n_pool; i++) {
		if (ipam_addr_in(used, n_used, st->pool[i]))
			ret->allocated++;
		else if (ipam_addr_in(resting, n_resting, st->pool[i]))
			ret->cooling++;
		else
			ret->free++;
	}
	for (i = 0; i < n_used; i++)
		ret->retired += !ipam_in_pool(st, used[i]);
	ret->pool = ret->allocated + ret->cooling + ret->free;
	ret->held = ret->pool + ret->retired;
	return 0;
}

size_t ipam_check_boot(struct ipam_state *st, const char *boot_id)
{
	size_t dropped = 0;

	if (strcmp(st->boot_id, boot_id) == 0)
		return 0;
	if (st->boot_id[0]) {
		dropped = st->n_att;
		st->n_att = 0;
		st->n_cooling = 0;
	}
	snprintf(st->boot_id, sizeof(st->boot_id), "%s", boot_id);
	return dropped;
}

int ipam_read_boot_id_from(const char *path, char *buf, size_t size)
{
	int r = read_line_file(path, buf, size);

	if (r == 0)
		return -ENODATA;
	return r < 0 ? r : 0;
}

int ipam_read_boot_id(char *buf, size_t size)
{
	return ipam_read_boot_id_from("/proc/sys/kernel/random/boot_id", buf, size);
}

int ipam_reconcile(struct ipam_state *st, const uint32_t *seen_in, size_t n_in, int64_t now_ms,
		   struct ipam_sync_report *ret, struct tg_err *e)
{
	_cleanup_free_ uint32_t *pool = malloc((st->n_pool + n_in + 1) * sizeof(*pool));
	_cleanup_free_ uint32_t *pending = malloc((n_in + 1) * sizeof(*pending));
	_cleanup_free_ uint32_t *seen = malloc((n_in + 1) * sizeof(*seen));
	bool first = st->n_pool == 0;
	size_t i, n = 0, n_pool = 0, n_pending = 0;

	memset(ret, 0, sizeof(*ret));
	if (!pool || !pending || !seen)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	/* Sorted and unique, whatever order the source listed them in. */
	if (n_in)
		memcpy(seen, seen_in, n_in * sizeof(*seen));
	qsort(seen, n_in, sizeof(*seen), cmp_u32);
	for (i = 0; i < n_in; i++)
		if (n == 0 || seen[n - 1] != seen[i])
			seen[n++] = seen[i];
	for (i = 0; i < n; i++) {
		if (first || ipam_addr_in(st->pool, st->n_pool, seen[i])) {
			pool[n_pool++] = seen[i];
		} else if (ipam_addr_in(st->pending, st->n_pending, seen[i])) {
			pool[n_pool++] = seen[i]; /* seen twice in a row: real */
			ret->added++;
		} else {
			pending[n_pending++] = seen[i];
		}
	}
	if (first)
		ret->added = n_pool;
	for (i = 0; i < st->n_pool; i++) {
		if (ipam_addr_in(seen, n, st->pool[i]))
			continue;
		ret->removed++;
		if (ipam_find_ip(st, st->pool[i]))
			ret->retired++;
	}
	qsort(pool, n_pool, sizeof(*pool), cmp_u32);
	free(st->pool);
	free(st->pending);
	st->pool = TAKE_PTR(pool);
	st->n_pool = n_pool;
	st->pending = TAKE_PTR(pending);
	st->n_pending = n_pending;
	st->last_sync_ms = now_ms;
	snprintf(st->source, sizeof(st->source), "imds");
	ret->pending = n_pending;
	return 0;
}
