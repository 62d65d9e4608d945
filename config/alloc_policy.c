// SPDX-License-Identifier: Apache-2.0
/*
 * The allocator's policy file (config/config.h, struct alloc_policy):
 * read strictly, every key known, every value in range, or refused whole.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/budget.h"
#include "config/config.h"
#include "config/internal.h"
#include "lib/cleanup.h"
#include "lib/jsonx.h"
#include "lib/k8sname.h"
#include "lib/rate.h"

/* A cluster budget in bits/s: 1 Pbit/s at most (BUDGET_TOTAL_MAX bytes/s). */
#define POLICY_RATE_MAX_BPS (BUDGET_TOTAL_MAX * 8)

/*
 * Keys this version does not take, and why: a file that asks for more than
 * Tollgate enforces is refused, never half applied.
 */
static const char *not_yet(const char *key)
{
	if (strcmp(key, "destinations") == 0)
		return "destination budgets are not enforced by this version";
	return NULL;
}

/* Every member of o one of keys[] (NULL-terminated), else a refusal naming it. */
static int known_keys(json_object *o, const char *where, const char *const *keys, struct tg_err *e)
{
	json_object_object_foreach(o, k, v)
	{
		const char *why = not_yet(k);
		size_t i = 0;

		(void)v;
		while (keys[i] && strcmp(keys[i], k) != 0)
			i++;
		if (keys[i])
			continue;
		if (why)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s%s%s: %s", where,
				       *where ? "." : "", k, why);
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s%s\"%.64s\" is not a key of %s",
			       where, *where ? "." : "", k, *where ? where : "the policy");
	}
	return 0;
}

/* A namespace's budgets: internetEgress (uploads), internetIngress (downloads), or both. */
static int parse_namespaces(json_object *root, struct budget_set *set, struct tg_err *e)
{
	static const char *const ns_keys[] = { "internetEgress", "internetIngress", NULL };
	json_object *nss = NULL;
	size_t n;
	int r;

	if ((r = jx_object(root, "", "namespaces", &nss, e)) <= 0)
		return r;
	n = (size_t)json_object_object_length(nss);
	if (n > BUDGET_POLICY_NS_MAX)
		return tg_fail(e, CNI_ERR_CONFIG, -E2BIG, "namespaces: %zu budgets, at most %d", n,
			       BUDGET_POLICY_NS_MAX);
	set->d = calloc(n ? BUDGET_DIRS * n : 1, sizeof(*set->d));
	if (!set->d)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	json_object_object_foreach(nss, ns, o)
	{
		char where[96];
		bool any = false;

		snprintf(where, sizeof(where), "namespaces[\"%.63s\"]", ns);
		if (!k8s_dns_label(ns, strlen(ns)))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "namespaces[\"%.64s\"] is not a namespace name (a DNS "
				       "label: a-z, 0-9 and '-', at most 63 characters)",
				       ns);
		if (!o || !json_object_is_type(o, json_type_object))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "%s must be an object like {\"internetIngress\": \"40G\", "
				       "\"internetEgress\": \"20G\"}",
				       where);
		if (known_keys(o, where, ns_keys, e) < 0)
			return -EINVAL;
		for (int d = 0; d < BUDGET_DIRS; d++) {
			char key[128];
			json_object *v;
			uint64_t bps;

			if (!json_object_object_get_ex(o, budget_dir_keys[d], &v))
				continue;
			snprintf(key, sizeof(key), "%s.%s", where, budget_dir_keys[d]);
			if (rate_from_json_max(v, key, POLICY_RATE_MAX_BPS, &bps, e) < 0)
				return -EINVAL;
			snprintf(set->d[set->n].ns, sizeof(set->d[set->n].ns), "%s", ns);
			set->d[set->n].dir = (enum budget_dir)d;
			set->d[set->n++].budget = bps / 8;
			any = true;
		}
		if (!any)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "%s has no budget (internetEgress, internetIngress)", where);
	}
	return 0;
}

static int parse(json_object *root, struct alloc_policy *p, struct tg_err *e)
{
	static const char *const keys[] = { "version", "reportSeconds", "leaseSeconds",
					    "namespaces", NULL };
	int64_t version = 0, report_s = 1, lease_s = 10;
	int r;

	if (!json_object_object_get_ex(root, "version", NULL))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "version is missing (this one reads 1)");
	if (jx_int(root, "", "version", 1, 1, &version, e) < 0 ||
	    known_keys(root, "", keys, e) < 0 ||
	    jx_int(root, "", "reportSeconds", 1, 60, &report_s, e) < 0 ||
	    jx_int(root, "", "leaseSeconds", 2, 3600, &lease_s, e) < 0)
		return -EINVAL;
	if (lease_s < 2 * report_s)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "leaseSeconds %lld must be at least twice reportSeconds (%lld): a "
			       "lease has to outlive one lost answer",
			       (long long)lease_s, (long long)report_s);
	p->report_ms = report_s * 1000;
	p->lease_ms = lease_s * 1000;
	r = parse_namespaces(root, &p->budgets, e);
	if (r < 0)
		return r;
	r = budget_set_seal(&p->budgets, e);
	if (r < 0)
		return r;
	if (budget_set_uploads(&p->budgets, &p->uploads) < 0)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	return 0;
}

int alloc_policy_load_text(const char *path, const char *text, size_t len, struct alloc_policy *ret,
			   struct tg_err *e)
{
	_cleanup_json_ json_object *root = NULL;
	struct alloc_policy p = { 0 };
	struct tg_err pe_err = { 0 };
	int r;

	r = config_read_object(path, text, len, &root, e);
	if (r < 0)
		return r;
	r = parse(root, &p, &pe_err);
	if (r < 0) {
		alloc_policy_free(&p);
		return tg_fail(e, pe_err.code ? pe_err.code : CNI_ERR_CONFIG, r, "%s: %s", path,
			       pe_err.msg);
	}
	*ret = p;
	return 0;
}

void alloc_policy_free(struct alloc_policy *p)
{
	budget_set_free(&p->budgets);
	budget_set_free(&p->uploads);
	*p = (struct alloc_policy){ 0 };
}
