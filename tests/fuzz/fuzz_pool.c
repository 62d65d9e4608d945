// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer: address pools and CIDRs as the config gives them
 * ({"addresses": [...], "exclude": [...]}). A pool that parses is sorted,
 * free of duplicates and of excluded addresses, and survives its own
 * compact form ("a-b" ranges) unchanged; every CIDR that parses prints back
 * to one that parses to the same.
 */
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ipam/pool.h"
#include "lib/ip4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_pool(json_object *addresses, json_object *exclude)
{
	uint32_t *pool = NULL, *again = NULL, *excluded = NULL;
	size_t n = 0, n2 = 0, n_ex = 0;
	struct tg_err e = { 0 };
	json_object *ranges;

	if (ipam_pool_parse(addresses, exclude, "ipam", &pool, &n, &e) != 0)
		return;
	for (size_t i = 1; i < n; i++)
		if (pool[i - 1] >= pool[i])
			abort(); /* sorted, unique */
	if (exclude && ipam_pool_parse(exclude, NULL, "ipam", &excluded, &n_ex, &e) == 0)
		for (size_t i = 0; i < n; i++)
			if (ipam_addr_in(excluded, n_ex, pool[i]))
				abort(); /* an excluded address handed out */
	ranges = ipam_pool_to_ranges(pool, n);
	if (!ranges)
		abort();
	if (n && (ipam_pool_parse(ranges, NULL, "ipam", &again, &n2, &e) != 0 || n2 != n ||
		  memcmp(again, pool, n * sizeof(*pool)) != 0))
		abort(); /* the compact form is the same pool */
	json_object_put(ranges);
	free(pool);
	free(again);
	free(excluded);
}

static void check_cidrs(json_object *addresses)
{
	size_t n = json_object_is_type(addresses, json_type_array)
			   ? json_object_array_length(addresses)
			   : 0;

	for (size_t i = 0; i < n; i++) {
		const char *s = json_object_get_string(json_object_array_get_idx(addresses, i));
		struct cidr4 c, c2;
		char buf[CIDR4_STRLEN];

		if (!s || cidr4_parse(s, &c) != 0)
			continue;
		if (cidr4_parse(cidr4_format(&c, buf), &c2) != 0 || c2.net != c.net ||
		    c2.prefix != c.prefix)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_tokener *tok = json_tokener_new();
	json_object *root = NULL, *addresses = NULL, *exclude = NULL;

	if (!tok || size > 4096)
		goto out;
	root = json_tokener_parse_ex(tok, (const char *)data, (int)size);
	if (!root || !json_object_object_get_ex(root, "addresses", &addresses))
		goto out;
	json_object_object_get_ex(root, "exclude", &exclude);
	check_pool(addresses, exclude);
	check_cidrs(addresses);
out:
	json_object_put(root);
	if (tok)
		json_tokener_free(tok);
	return 0;
}
