// SPDX-License-Identifier: Apache-2.0
/* The policy's budgets as the nodes hear them (budget/budget.h, struct budget_set). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/budget.h"
#include "lib/jsonx.h"
#include "lib/util.h"

/* By namespace, then direction (egress first). */
static int by_ns(const void *a, const void *b)
{
	const struct budget_def *x = a, *y = b;
	int c = strcmp(x->ns, y->ns);

	if (c)
		return c;
	return (x->dir > y->dir) - (x->dir < y->dir);
}

int budget_set_seal(struct budget_set *s, struct tg_err *e)
{
	uint64_t h = FNV1A64_INIT;

	if (s->n)
		qsort(s->d, s->n, sizeof(*s->d), by_ns);
	for (size_t i = 0; i < s->n; i++) {
		uint64_t v = s->d[i].budget;
		unsigned char le[8];

		if ((unsigned)s->d[i].dir >= BUDGET_DIRS)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "namespace \"%s\": direction %d is not one", s->d[i].ns,
				       (int)s->d[i].dir);
		if (i && by_ns(&s->d[i - 1], &s->d[i]) == 0)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "namespace \"%s\" twice%s%s",
				       s->d[i].ns, s->d[i].dir == BUDGET_EGRESS ? "" : " for ",
				       s->d[i].dir == BUDGET_EGRESS ? ""
								    : budget_dir_keys[s->d[i].dir]);
		/*
		 * the name with its NUL, a download's direction (one byte: an upload
		 * has none, its digest what it was before directions), then the
		 * budget's 8 bytes (little end first)
		 */
		for (int k = 0; k < 8; k++)
			le[k] = (unsigned char)(v >> (8 * k));
		h = hash_fnv1a64(s->d[i].ns, strlen(s->d[i].ns) + 1, h);
		if (s->d[i].dir != BUDGET_EGRESS) {
			unsigned char dir = (unsigned char)s->d[i].dir;

			h = hash_fnv1a64(&dir, 1, h);
		}
		h = hash_fnv1a64(le, sizeof(le), h);
	}
	snprintf(s->id, sizeof(s->id), "%016" PRIx64, h);
	return 0;
}

const struct budget_def *budget_set_find(const struct budget_set *s, const char *ns,
					 enum budget_dir dir)
{
	struct budget_def key = { .dir = dir };

	if (!s || !s->n || strlen(ns) > BUDGET_NS_MAX)
		return NULL;
	snprintf(key.ns, sizeof(key.ns), "%s", ns);
	return bsearch(&key, s->d, s->n, sizeof(*s->d), by_ns);
}

int budget_set_uploads(const struct budget_set *s, struct budget_set *ret)
{
	struct budget_set u = { .d = calloc(s->n ? s->n : 1, sizeof(*u.d)) };
	struct tg_err e = { 0 };

	if (!u.d)
		return -ENOMEM;
	for (size_t i = 0; i < s->n; i++)
		if (s->d[i].dir == BUDGET_EGRESS)
			u.d[u.n++] = s->d[i];
	/* a subset of a sealed set: sorted, each once */
	if (budget_set_seal(&u, &e) < 0) {
		budget_set_free(&u);
		return -EINVAL;
	}
	*ret = u;
	return 0;
}

void budget_set_free(struct budget_set *s)
{
	if (!s)
		return;
	free(s->d);
	*s = (struct budget_set){ 0 };
}

json_object *budget_policy_to_json(const struct budget_set *s)
{
	json_object *o = json_object_new_object(), *arr = json_object_new_array();

	if (!o || !arr) {
		json_object_put(o);
		json_object_put(arr);
		return NULL;
	}
	jx_add(o, "id", json_object_new_string(s->id));
	/* one entry a namespace, with its directions' budgets (the set is sorted) */
	for (size_t i = 0; i < s->n;) {
		json_object *d = json_object_new_object();
		size_t k = i;

		jx_add(d, "namespace", json_object_new_string(s->d[i].ns));
		for (; k < s->n && strcmp(s->d[k].ns, s->d[i].ns) == 0; k++)
			jx_add(d,
			       budget_dir_keys[(unsigned)s->d[k].dir < BUDGET_DIRS ? s->d[k].dir
										   : 0],
			       json_object_new_int64((int64_t)s->d[k].budget));
		json_object_array_add(arr, d);
		i = k;
	}
	jx_add(o, "namespaces", arr);
	return o;
}
