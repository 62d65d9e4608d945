// SPDX-License-Identifier: Apache-2.0
/*
 * The nodes of one budget (budget/alloc.c): dense arrays indexed by name
 * id, and the two lists, live and expired, in the order they were heard;
 * and the budgets by namespace. The lowest of the allocation's files: it
 * calls none of the others.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "budget/internal.h"
#include "lib/util.h"

static struct blist *list_of(struct bslot *b, const struct bnode *nd)
{
	return nd->expired ? &b->expired : &b->live;
}

void list_unlink(struct bslot *b, uint32_t i)
{
	struct bnode *nd = &b->node[i];
	struct blist *l = list_of(b, nd);

	if (nd->prev != NONE)
		b->node[nd->prev].next = nd->next;
	else
		l->head = nd->next;
	if (nd->next != NONE)
		b->node[nd->next].prev = nd->prev;
	else
		l->tail = nd->prev;
	nd->prev = nd->next = NONE;
}

/* At the tail: reports and expiries come in time order. */
void list_append(struct bslot *b, uint32_t i)
{
	struct bnode *nd = &b->node[i];
	struct blist *l = list_of(b, nd);

	nd->prev = l->tail;
	nd->next = NONE;
	if (l->tail != NONE)
		b->node[l->tail].next = i;
	else
		l->head = i;
	l->tail = i;
}

/* Node `from` moved to index `to`: what pointed at it follows. */
static void list_moved(struct bslot *b, uint32_t from, uint32_t to)
{
	struct bnode *nd = &b->node[to];
	struct blist *l = list_of(b, nd);

	if (nd->prev != NONE)
		b->node[nd->prev].next = to;
	else if (l->head == from)
		l->head = to;
	if (nd->next != NONE)
		b->node[nd->next].prev = to;
	else if (l->tail == from)
		l->tail = to;
}

int node_add(struct budget_alloc *a, struct bslot *b, uint32_t id, size_t *ret)
{
	size_t i;

	if (id >= b->n_index) {
		size_t n = max64(a->names.cap, (uint64_t)id + 1);
		uint32_t *grown = realloc(b->index_of, n * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		memset(grown + b->n_index, 0, (n - b->n_index) * sizeof(*grown));
		b->index_of = grown;
		b->n_index = n;
	}
	if (b->n == b->alloc) {
		size_t n = b->alloc ? b->alloc * 2 : 16;
		struct bnode *node = realloc(b->node, n * sizeof(*node));
		struct bhot *hot;

		if (!node)
			return -ENOMEM;
		b->node = node;
		hot = realloc(b->hot, n * sizeof(*hot));
		if (!hot)
			return -ENOMEM;
		b->hot = hot;
		b->alloc = n;
	}
	/* the round never allocates: its scratch grows with the largest budget */
	if (b->n + 1 > a->scratch) {
		size_t n = max64(b->alloc, 2 * a->scratch);
		struct fill_range *range = realloc(a->range, n * sizeof(*range));
		struct fill_hinge *hinge;

		if (!range)
			return -ENOMEM;
		a->range = range;
		hinge = realloc(a->hinge, 2 * n * sizeof(*hinge));
		if (!hinge)
			return -ENOMEM;
		a->hinge = hinge;
		a->scratch = n;
	}
	i = b->n++;
	b->node[i] = (struct bnode){ .id = id, .prev = NONE, .next = NONE };
	b->hot[i] = (struct bhot){ .weight = 1, .flags = HOT_FRESH };
	list_append(b, (uint32_t)i);
	b->index_of[id] = (uint32_t)i + 1;
	names_ref(&a->names, id);
	*ret = i;
	return 0;
}

void node_drop(struct budget_alloc *a, struct bslot *b, size_t i)
{
	struct bnode *nd = &b->node[i];
	size_t last = b->n - 1;

	b->committed -= nd->committed;
	b->safe_held -= nd->safe_held;
	b->granted -= nd->grant;
	b->demand -= b->hot[i].demand;
	b->usage -= nd->rate;
	b->index_of[nd->id] = 0;
	names_unref(&a->names, nd->id);
	list_unlink(b, (uint32_t)i);
	if (i != last) {
		b->node[i] = b->node[last];
		b->hot[i] = b->hot[last];
		b->index_of[b->node[i].id] = (uint32_t)i + 1;
		list_moved(b, (uint32_t)last, (uint32_t)i);
	}
	b->n = last;
}

void slot_release(struct budget_alloc *a, struct bslot *b)
{
	for (size_t i = 0; i < b->n; i++)
		names_unref(&a->names, b->node[i].id);
	free(b->node);
	free(b->hot);
	free(b->index_of);
	memset(b, 0, sizeof(*b));
}

bool budget_alloc_learning(const struct budget_alloc *a, int64_t now_ms)
{
	return !a->heard || now_ms - a->start_ms < a->p.lease_ms;
}

/* ---- budgets by (namespace, direction): each direction its own budget ---- */

size_t ns_home(const char *ns, enum budget_dir dir, size_t mask)
{
	unsigned char d = (unsigned char)dir;

	return (size_t)hash_fnv1a64(&d, 1, hash_fnv1a64(ns, strlen(ns), FNV1A64_INIT)) & mask;
}

struct bslot *find_budget(const struct budget_alloc *a, const char *ns, enum budget_dir dir)
{
	if (!a->ns_slot)
		return NULL;
	for (size_t i = ns_home(ns, dir, a->ns_mask); a->ns_slot[i]; i = (i + 1) & a->ns_mask) {
		struct bslot *b = &a->b[a->ns_slot[i] - 1];

		if (b->dir == dir && strcmp(b->ns, ns) == 0)
			return b;
	}
	return NULL;
}
