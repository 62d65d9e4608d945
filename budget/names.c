// SPDX-License-Identifier: Apache-2.0
/*
 * Node names, each held once (a node reports up to BUDGET_PER_REPORT_MAX
 * budgets): a budget's nodes refer to them by a small id, which also
 * indexes each budget's table of its nodes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "budget/budget.h"
#include "budget/internal.h"
#include "lib/util.h"

/*
 * Keyed by a random seed: names come from the nodes (authenticated, but a
 * node picks its own name), and a fixed hash would let names be chosen to
 * land on one probe chain.
 */
static uint32_t home(const struct names *t, const char *name)
{
	return (uint32_t)XXH3_64bits_withSeed(name, strlen(name), t->seed) & t->mask;
}

uint32_t names_find(const struct names *t, const char *name)
{
	if (!t->slot)
		return NAME_NONE;
	for (uint32_t i = home(t, name); t->slot[i]; i = (i + 1) & t->mask)
		if (strcmp(t->name[t->slot[i] - 1], name) == 0)
			return t->slot[i] - 1;
	return NAME_NONE;
}

static void put_slot(struct names *t, uint32_t id)
{
	uint32_t i = home(t, t->name[id]);

	while (t->slot[i])
		i = (i + 1) & t->mask;
	t->slot[i] = id + 1;
}

/* At most half full, so that a probe ends soon. */
static int grow_slots(struct names *t)
{
	uint32_t *old = t->slot, old_n = t->slot ? t->mask + 1 : 0, n = old_n ? old_n * 2 : 64;

	if (n == 0)
		return -ENOMEM;
	if (!old && getrandom(&t->seed, sizeof(t->seed), GRND_NONBLOCK) != sizeof(t->seed))
		t->seed = (uint64_t)time_mono_ns() ^ (uint64_t)(uintptr_t)t;
	t->slot = calloc(n, sizeof(*t->slot));
	if (!t->slot) {
		t->slot = old;
		return -ENOMEM;
	}
	t->mask = n - 1;
	for (uint32_t i = 0; i < old_n; i++)
		if (old[i])
			put_slot(t, old[i] - 1);
	free(old);
	return 0;
}

static int grow_ids(struct names *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 64;
	char **name;
	uint32_t *refs, *free_ids;

	if (cap <= t->cap || cap >= NAME_NONE)
		return -ENOMEM;
	name = realloc(t->name, cap * sizeof(*name));
	if (!name)
		return -ENOMEM;
	t->name = name;
	refs = realloc(t->refs, cap * sizeof(*refs));
	if (!refs)
		return -ENOMEM;
	t->refs = refs;
	free_ids = realloc(t->free_ids, cap * sizeof(*free_ids));
	if (!free_ids)
		return -ENOMEM;
	t->free_ids = free_ids;
	t->cap = cap;
	return 0;
}

int names_add(struct names *t, const char *name, uint32_t *ret_id)
{
	char *copy;
	uint32_t id;

	if ((!t->slot || 2 * (t->used + 1) > t->mask + 1) && grow_slots(t) < 0)
		return -ENOMEM;
	if (!t->n_free && t->n == t->cap && grow_ids(t) < 0)
		return -ENOMEM;
	copy = strndup(name, BUDGET_NODE_MAX);
	if (!copy)
		return -ENOMEM;
	id = t->n_free ? t->free_ids[--t->n_free] : t->n++;
	t->name[id] = copy;
	t->refs[id] = 0;
	put_slot(t, id);
	t->used++;
	*ret_id = id;
	return 0;
}

void names_ref(struct names *t, uint32_t id)
{
	t->refs[id]++;
}

/* Linear probing's deletion: later entries of the run move back into the hole. */
static void drop_slot(struct names *t, uint32_t id)
{
	uint32_t i = home(t, t->name[id]), j, k;

	while (t->slot[i] != id + 1)
		i = (i + 1) & t->mask;
	for (j = i;;) {
		j = (j + 1) & t->mask;
		if (!t->slot[j])
			break;
		k = home(t, t->name[t->slot[j] - 1]);
		/* the entry at j may fill the hole at i when its home is not in (i, j] */
		if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
			t->slot[i] = t->slot[j];
			i = j;
		}
	}
	t->slot[i] = 0;
}

void names_unref(struct names *t, uint32_t id)
{
	if (--t->refs[id])
		return;
	drop_slot(t, id);
	free(t->name[id]);
	t->name[id] = NULL;
	t->free_ids[t->n_free++] = id;
	t->used--;
}

void names_free(struct names *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->name[i]);
	free(t->name);
	free(t->refs);
	free(t->free_ids);
	free(t->slot);
	memset(t, 0, sizeof(*t));
}
