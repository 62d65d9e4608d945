// SPDX-License-Identifier: Apache-2.0
/*
 * Who holds which connection and since when: the admission rule and the
 * deadline bookkeeping of the HTTP server. The agent's endpoint holds 64
 * connections; the allocator's, one per node of the cluster (tens of
 * thousands, each kept alive and asking every second): so nothing here
 * scans the table. Slots come from a free list, an fd finds its slot
 * through an index, an address its count through a small hash, and the
 * connections whose deadline runs are kept in start order (a start is
 * always "now", so an insertion lands at the tail), which makes the next
 * deadline the head and an expiry a walk from it.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "http/internal.h"

#define NIL UINT_MAX

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

/* ---- the addresses' counts: open addressing, linear probing ---- */

static unsigned int held_bucket(const struct conntab *t, uint32_t addr)
{
	/* Fibonacci hashing (the product's top bits): one subnet's addresses spread out. */
	return (unsigned int)((addr * 2654435769u) >> t->held_shift);
}

static struct http_held *held_find(const struct conntab *t, uint32_t addr)
{
	for (unsigned int i = held_bucket(t, addr);; i = (i + 1) & t->held_mask) {
		struct http_held *h = &t->held[i];

		if (h->n == 0)
			return NULL;
		if (h->addr == addr)
			return h;
	}
}

/* The table has twice as many buckets as slots: there is always an empty one. */
static void held_inc(struct conntab *t, uint32_t addr)
{
	unsigned int i = held_bucket(t, addr);

	while (t->held[i].n && t->held[i].addr != addr)
		i = (i + 1) & t->held_mask;
	t->held[i].addr = addr;
	t->held[i].n++;
}

/* One fewer; an address that holds none leaves, the entries after it shifted back. */
static void held_dec(struct conntab *t, uint32_t addr)
{
	struct http_held *h = held_find(t, addr);
	unsigned int i, j;

	if (!h || --h->n)
		return;
	i = (unsigned int)(h - t->held);
	for (j = (i + 1) & t->held_mask; t->held[j].n; j = (j + 1) & t->held_mask) {
		unsigned int home = held_bucket(t, t->held[j].addr);

		/* j's entry may fill the hole at i unless its home lies in (i, j] */
		if (((j - home) & t->held_mask) >= ((j - i) & t->held_mask)) {
			t->held[i] = t->held[j];
			i = j;
		}
	}
	t->held[i] = (struct http_held){ 0 };
}

/* ---- the deadline order ---- */

static void order_unlink(struct conntab *t, struct http_conn *c)
{
	unsigned int self = (unsigned int)(c - t->slots);

	if (c->prev == NIL && t->head != self)
		return; /* not in the order */
	if (c->prev == NIL)
		t->head = c->next;
	else
		t->slots[c->prev].next = c->next;
	if (c->next == NIL)
		t->tail = c->prev;
	else
		t->slots[c->next].prev = c->prev;
	c->prev = c->next = NIL;
}

/* After the last connection that started no later: the tail, but for a clock that went back. */
static void order_insert(struct conntab *t, struct http_conn *c)
{
	unsigned int self = (unsigned int)(c - t->slots), after = t->tail;

	while (after != NIL && t->slots[after].start_ms > c->start_ms)
		after = t->slots[after].prev;
	c->prev = after;
	c->next = after == NIL ? t->head : t->slots[after].next;
	if (after == NIL)
		t->head = self;
	else
		t->slots[after].next = self;
	if (c->next == NIL)
		t->tail = self;
	else
		t->slots[c->next].prev = self;
}

/* ---- the table ---- */

int conntab_init(struct conntab *t, unsigned int cap)
{
	unsigned int buckets = 16, shift = 28;

	*t = (struct conntab){ .free_head = NIL, .head = NIL, .tail = NIL };
	if (cap > UINT_MAX / 4)
		return -EINVAL;
	while (buckets < 2 * cap) {
		buckets *= 2;
		shift--;
	}
	t->slots = calloc(cap ? cap : 1, sizeof(*t->slots));
	t->held = calloc(buckets, sizeof(*t->held));
	if (!t->slots || !t->held) {
		conntab_free(t);
		return -ENOMEM;
	}
	t->held_mask = buckets - 1;
	t->held_shift = shift;
	/* in reverse, so that the first connection takes slot 0 */
	for (unsigned int i = cap; i-- > 0;) {
		t->slots[i] = (struct http_conn){ .fd = -1, .prev = NIL, .next = t->free_head };
		t->free_head = i;
	}
	t->cap = cap;
	return 0;
}

void conntab_free(struct conntab *t)
{
	free(t->slots);
	free(t->by_fd);
	free(t->held);
	*t = (struct conntab){ .free_head = NIL, .head = NIL, .tail = NIL };
}

unsigned int conntab_held(const struct conntab *t, uint32_t addr)
{
	const struct http_held *h = t->held ? held_find(t, addr) : NULL;

	return h ? h->n : 0;
}

/* Room in the fd index for fd. */
static bool index_fits(struct conntab *t, int fd)
{
	size_t n = t->n_fd ? t->n_fd : 64;
	unsigned int *p;

	if ((size_t)fd < t->n_fd)
		return true;
	while (n <= (size_t)fd)
		n *= 2;
	p = realloc(t->by_fd, n * sizeof(*p));
	if (!p)
		return false;
	for (size_t i = t->n_fd; i < n; i++)
		p[i] = 0;
	t->by_fd = p;
	t->n_fd = n;
	return true;
}

struct http_conn *conntab_add(struct conntab *t, int fd, uint32_t addr, int64_t now_ms)
{
	unsigned int i = t->free_head;
	struct http_conn *c;

	if (fd < 0 || i == NIL || !index_fits(t, fd))
		return NULL;
	c = &t->slots[i];
	t->free_head = c->next;
	*c = (struct http_conn){ .fd = fd,
				 .addr = addr,
				 .start_ms = now_ms,
				 .prev = NIL,
				 .next = NIL };
	order_insert(t, c);
	t->by_fd[fd] = i + 1;
	held_inc(t, addr);
	t->used++;
	return c;
}

struct http_conn *conntab_find(struct conntab *t, int fd)
{
	struct http_conn *c;

	if (fd < 0 || (size_t)fd >= t->n_fd || !t->by_fd[fd])
		return NULL;
	c = &t->slots[t->by_fd[fd] - 1];
	return c->fd == fd ? c : NULL;
}

void conntab_remove(struct conntab *t, struct http_conn *c)
{
	unsigned int self;

	if (!c || c->fd < 0)
		return;
	self = (unsigned int)(c - t->slots);
	order_unlink(t, c);
	if ((size_t)c->fd < t->n_fd && t->by_fd[c->fd] == self + 1)
		t->by_fd[c->fd] = 0;
	held_dec(t, c->addr);
	*c = (struct http_conn){ .fd = -1, .prev = NIL, .next = t->free_head };
	t->free_head = self;
	t->used--;
}

void conntab_restart(struct conntab *t, struct http_conn *c, int64_t now_ms)
{
	if (!c || c->fd < 0 || c->cut)
		return;
	order_unlink(t, c);
	c->start_ms = now_ms;
	order_insert(t, c);
}

void conntab_cut(struct conntab *t, struct http_conn *c)
{
	if (!c || c->fd < 0 || c->cut)
		return;
	order_unlink(t, c);
	c->cut = true;
}

unsigned int conntab_expire(struct conntab *t, int64_t now_ms, unsigned int deadline_ms, int *fds,
			    unsigned int max)
{
	unsigned int n = 0;

	while (n < max && t->head != NIL) {
		struct http_conn *c = &t->slots[t->head];

		if (now_ms - c->start_ms < (int64_t)deadline_ms)
			break;
		order_unlink(t, c);
		c->cut = true;
		fds[n++] = c->fd;
	}
	return n;
}

int64_t conntab_next_deadline(const struct conntab *t, unsigned int deadline_ms)
{
	if (t->head == NIL)
		return INT64_MAX;
	return t->slots[t->head].start_ms + (int64_t)deadline_ms;
}
