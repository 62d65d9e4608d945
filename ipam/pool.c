// SPDX-License-Identifier: Apache-2.0
/* Address lists: "a-b" ranges, CIDRs and single addresses. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipam/internal.h"
#include "ipam/ipam.h"
#include "ipam/pool.h"
#include "lib/cleanup.h"
#include "lib/ip4.h"

#define POOL_EXPAND_MAX (1 << 20)

struct span {
	uint32_t lo, hi;
};

static int parse_entry(const char *s, bool is_exclude, struct span *ret)
{
	struct cidr4 c;
	const char *dash = strchr(s, '-');

	if (dash) {
		char a[IP4_STRLEN];
		size_t n = (size_t)(dash - s);
		uint32_t lo, hi;

		if (n == 0 || n >= sizeof(a))
			return -EINVAL;
		memcpy(a, s, n);
		a[n] = '\0';
		if (ip4_parse(a, &lo) < 0 || ip4_parse(dash + 1, &hi) < 0)
			return -EINVAL;
		if (lo > hi)
			return -ERANGE;
		ret->lo = lo;
		ret->hi = hi;
		return 0;
	}
	if (strchr(s, '/')) {
		if (cidr4_parse(s, &c) < 0)
			return -EINVAL;
		ret->lo = c.net;
		ret->hi = cidr4_last(&c);
		/* Like host-local: a subnet's network and broadcast addresses are not for pods. */
		if (!is_exclude && c.prefix <= 30) {
			ret->lo++;
			ret->hi--;
		}
		return 0;
	}
	if (ip4_parse(s, &ret->lo) < 0)
		return -EINVAL;
	ret->hi = ret->lo;
	return 0;
}

static int parse_list(json_object *list, const char *where, const char *key, bool is_exclude,
		      struct span **ret, size_t *ret_n, struct tg_err *e)
{
	size_t i, n;
	_cleanup_free_ struct span *spans = NULL;

	/* The config's reader checks the type first; every caller gets the same answer. */
	if (list && !json_object_is_type(list, json_type_array))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s.%s must be an array of strings",
			       where, key);
	n = list ? json_object_array_length(list) : 0;
	spans = calloc(n ? n : 1, sizeof(*spans));
	if (!spans)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (i = 0; i < n; i++) {
		json_object *v = json_object_array_get_idx(list, i);
		const char *s = json_object_get_string(v);
		int r;

		/* the config's reader checks this too; a store's file may hold anything */
		if (!json_object_is_type(v, json_type_string))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s.%s[%zu] must be a string",
				       where, key, i);
		r = parse_entry(s, is_exclude, &spans[i]);

		if (r == -ERANGE)
			return tg_fail(e, CNI_ERR_CONFIG, r,
				       "%s.%s[%zu] \"%s\": range start is after its end", where,
				       key, i, s);
		if (r < 0)
			return tg_fail(
				e, CNI_ERR_CONFIG, r,
				"%s.%s[%zu] \"%s\" is not an IPv4 address, a-b range or CIDR",
				where, key, i, s);
	}
	*ret = TAKE_PTR(spans);
	*ret_n = n;
	return 0;
}

int ipam_pool_parse(json_object *addresses, json_object *exclude, const char *where,
		    uint32_t **ret_pool, size_t *ret_n, struct tg_err *e)
{
	_cleanup_free_ struct span *add = NULL, *exc = NULL;
	_cleanup_free_ uint32_t *pool = NULL;
	size_t n_add = 0, n_exc = 0, i, j, n = 0, out = 0;
	uint64_t total = 0;
	int r;

	r = parse_list(addresses, where, "addresses", false, &add, &n_add, e);
	if (r < 0)
		return r;
	r = parse_list(exclude, where, "exclude", true, &exc, &n_exc, e);
	if (r < 0)
		return r;
	/* Bound the expansion first; the pool limit applies after duplicates and excludes. */
	for (i = 0; i < n_add; i++) {
		total += (uint64_t)add[i].hi - add[i].lo + 1;
		if (total > POOL_EXPAND_MAX)
			return tg_fail(e, CNI_ERR_CONFIG, -E2BIG,
				       "%s.addresses spans more than %d addresses", where,
				       POOL_EXPAND_MAX);
	}
	pool = malloc((total ? total : 1) * sizeof(*pool));
	if (!pool)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (i = 0; i < n_add; i++)
		for (uint64_t a = add[i].lo; a <= add[i].hi; a++)
			pool[n++] = (uint32_t)a;
	ipam_addrs_sort(pool, n);
	for (i = 0; i < n; i++) {
		bool excluded = false;

		if (out > 0 && pool[out - 1] == pool[i])
			continue;
		for (j = 0; j < n_exc && !excluded; j++)
			excluded = pool[i] >= exc[j].lo && pool[i] <= exc[j].hi;
		if (!excluded)
			pool[out++] = pool[i];
	}
	if (out > IPAM_POOL_MAX)
		return tg_fail(e, CNI_ERR_CONFIG, -E2BIG,
			       "%s.addresses holds %zu addresses, more than %d", where, out,
			       IPAM_POOL_MAX);
	*ret_pool = TAKE_PTR(pool);
	*ret_n = out;
	return 0;
}

json_object *ipam_pool_to_ranges(const uint32_t *pool, size_t n)
{
	json_object *arr = json_object_new_array();
	size_t i = 0;

	if (!arr)
		return NULL;
	while (i < n) {
		char lo[IP4_STRLEN], hi[IP4_STRLEN], buf[2 * IP4_STRLEN + 1];
		size_t j = i;

		while (j + 1 < n && pool[j + 1] == pool[j] + 1)
			j++;
		snprintf(buf, sizeof(buf), "%s-%s", ip4_format(pool[i], lo),
			 ip4_format(pool[j], hi));
		json_object_array_add(arr, json_object_new_string(buf));
		i = j + 1;
	}
	return arr;
}

static int cmp_addr(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

bool ipam_addr_in(const uint32_t *sorted, size_t n, uint32_t ip)
{
	return n && bsearch(&ip, sorted, n, sizeof(ip), cmp_addr) != NULL;
}

void ipam_addrs_sort(uint32_t *a, size_t n)
{
	/* A pool from ranges comes in order: one pass, not glibc's merge sort and its buffer. */
	for (size_t i = 1; i < n; i++)
		if (a[i - 1] > a[i]) {
			qsort(a, n, sizeof(*a), cmp_addr);
			return;
		}
}
