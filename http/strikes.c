// SPDX-License-Identifier: Apache-2.0
/* Strikes (http/internal.h): addresses refused often, benched at accept for a while. */
#include <string.h>

#include "http/internal.h"
#include "lib/util.h"

#define WAYS 4 /* slots an address may take: its bucket's */

static size_t bucket(uint32_t addr)
{
	return (size_t)(hash_fnv1a64(&addr, sizeof(addr), FNV1A64_INIT) %
			(HTTP_STRIKES_MAX / WAYS)) *
	       WAYS;
}

static struct http_strike *find(struct strikes *s, uint32_t addr, bool take)
{
	size_t b = bucket(addr);
	struct http_strike *old = &s->slot[b];

	for (size_t i = b; i < b + WAYS; i++) {
		if (s->slot[i].addr == addr)
			return &s->slot[i];
		if (s->slot[i].window_ms < old->window_ms)
			old = &s->slot[i];
	}
	if (!take)
		return NULL;
	*old = (struct http_strike){ .addr = addr };
	return old;
}

bool strikes_add(struct strikes *s, uint32_t addr, unsigned int limit, int64_t now_ms)
{
	struct http_strike *k;

	if (!limit || !addr)
		return false;
	k = find(s, addr, true);
	if (now_ms - k->window_ms >= HTTP_STRIKE_WINDOW_MS) {
		k->window_ms = now_ms;
		k->n = 0;
	}
	if (++k->n <= limit || k->benched_until_ms > now_ms)
		return false;
	/* benched for the rest of this window and the whole next one */
	k->benched_until_ms = k->window_ms + 2 * HTTP_STRIKE_WINDOW_MS;
	return true;
}

bool strikes_benched(const struct strikes *s, uint32_t addr, int64_t now_ms)
{
	const struct http_strike *k = find((struct strikes *)s, addr, false);

	return k && k->benched_until_ms > now_ms;
}
