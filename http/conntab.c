// SPDX-License-Identifier: Apache-2.0
/*
 * Who holds which connection and since when: the admission rule and the
 * deadline bookkeeping of the HTTP server. A table of at most
 * max_connections (64) slots, scanned linearly: smaller and faster than
 * any index at that size.
 */
#include <errno.h>
#include <stdlib.h>

#include "http/internal.h"

enum http_admit http_admit(unsigned int max, unsigned int per_client, unsigned int reserve,
			   unsigned int used, unsigned int held)
{
	if (held >= per_client)
		return HTTP_REFUSE_CLIENT;
	if (used >= max)
		return HTTP_REFUSE_FULL;
	/* The reserve: a scraper that holds nothing always finds a slot. */
	if (held > 0 && used + reserve >= max)
		return HTTP_REFUSE_RESERVE;
	return HTTP_ADMIT;
}

int conntab_init(struct conntab *t, unsigned int cap)
{
	t->slots = calloc(cap ? cap : 1, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	for (unsigned int i = 0; i < cap; i++)
		t->slots[i].fd = -1;
	t->cap = cap;
	t->used = 0;
	return 0;
}

void conntab_free(struct conntab *t)
{
	free(t->slots);
	t->slots = NULL;
	t->cap = t->used = 0;
}

unsigned int conntab_held(const struct conntab *t, uint32_t addr)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < t->cap; i++)
		n += t->slots[i].fd >= 0 && t->slots[i].addr == addr;
	return n;
}

struct http_conn *conntab_add(struct conntab *t, int fd, uint32_t addr, int64_t now_ms)
{
	if (fd < 0)
		return NULL;
	for (unsigned int i = 0; i < t->cap; i++) {
		struct http_conn *c = &t->slots[i];

		if (c->fd >= 0)
			continue;
		*c = (struct http_conn){ .fd = fd, .addr = addr, .start_ms = now_ms };
		t->used++;
		return c;
	}
	return NULL;
}

struct http_conn *conntab_find(struct conntab *t, int fd)
{
	if (fd < 0)
		return NULL;
	for (unsigned int i = 0; i < t->cap; i++)
		if (t->slots[i].fd == fd)
			return &t->slots[i];
	return NULL;
}

void conntab_remove(struct conntab *t, struct http_conn *c)
{
	if (!c || c->fd < 0)
		return;
	*c = (struct http_conn){ .fd = -1 };
	t->used--;
}

void conntab_restart(struct http_conn *c, int64_t now_ms)
{
	if (c && !c->cut)
		c->start_ms = now_ms;
}

unsigned int conntab_expire(struct conntab *t, int64_t now_ms, unsigned int deadline_ms, int *fds,
			    unsigned int max)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < t->cap && n < max; i++) {
		struct http_conn *c = &t->slots[i];

		if (c->fd < 0 || c->cut || now_ms - c->start_ms < (int64_t)deadline_ms)
			continue;
		c->cut = true;
		fds[n++] = c->fd;
	}
	return n;
}

int64_t conntab_next_deadline(const struct conntab *t, unsigned int deadline_ms)
{
	int64_t next = INT64_MAX;

	for (unsigned int i = 0; i < t->cap; i++) {
		const struct http_conn *c = &t->slots[i];

		if (c->fd >= 0 && !c->cut && c->start_ms + (int64_t)deadline_ms < next)
			next = c->start_ms + (int64_t)deadline_ms;
	}
	return next;
}
