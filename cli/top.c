// SPDX-License-Identifier: Apache-2.0
/*
 * top: which outside prefixes each namespace's internet bytes go to and come
 * from on this node (internetGuard.destinations), as the node's agent has
 * them on /metrics: read from its /destinations, never from the kernel's
 * sets, whose reads would take bytes from the agent's series.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "httpc/httpc.h"
#include "lib/jsonx.h"

#define TOP_BODY_MAX (16u << 20)

/* GET url into *ret (the parsed document); 0, or a message in why. */
static int fetch_json(const char *url, json_object **ret, char *why, size_t why_len)
{
	struct httpc_sync req = {
		.url = url,
		.user_agent = "tollgate-ipam/" TG_VERSION,
		.timeout_ms = 10000,
		.connect_timeout_ms = 2000,
		.max_body = TOP_BODY_MAX,
	};
	struct httpc_answer a;
	struct jx_parse_error pe;
	int r = -1;

	if (httpc_request_sync(&req, &a) < 0) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	if (!a.answered)
		snprintf(why, why_len, "%s", a.too_big ? "answer larger than 16 MiB" : a.error);
	else if (a.status != 200)
		snprintf(why, why_len, "HTTP %ld", a.status);
	else if (jx_parse(a.body, a.len, ret, &pe) < 0 ||
		 !json_object_is_type(jx_get(*ret, "namespaces"), json_type_array))
		snprintf(why, why_len, "not a destinations document");
	else
		r = 0;
	if (r < 0 && *ret) {
		json_object_put(*ret);
		*ret = NULL;
	}
	httpc_answer_free(&a);
	return r;
}

static int by_bytes_desc(const void *a, const void *b)
{
	int64_t x = jx_get_int(*(json_object *const *)a, "bytes");
	int64_t y = jx_get_int(*(json_object *const *)b, "bytes");

	return x < y ? 1 : x > y ? -1 : 0;
}

/* The document for the one namespace asked for (all without), destinations by bytes. */
static json_object *top_json(json_object *doc, const char *only_ns)
{
	json_object *out = json_object_new_array(), *all = jx_get(doc, "namespaces");

	for (size_t i = 0; i < json_object_array_length(all); i++) {
		json_object *book = json_object_array_get_idx(all, i);
		json_object *dsts = jx_get(book, "destinations");

		if (only_ns && strcmp(jx_get_str(book, "namespace"), only_ns) != 0)
			continue;
		if (json_object_is_type(dsts, json_type_array))
			json_object_array_sort(dsts, by_bytes_desc);
		json_object_array_add(out, json_object_get(book));
	}
	return out;
}

static void print_row(const char *ns, const char *dir, const char *dst, int64_t bytes,
		      int64_t total)
{
	printf("%-24s %-8s %-19s %16lld %6.1f%%\n", ns, dir, dst, (long long)bytes,
	       total > 0 ? 100.0 * (double)bytes / (double)total : 0.0);
}

int top_main(struct cli *c)
{
	char url[300], why[256] = "";
	json_object *doc = NULL, *out;
	size_t n;

	snprintf(url, sizeof(url), "%s/destinations", c->agent_url);
	if (fetch_json(url, &doc, why, sizeof(why)) < 0) {
		fprintf(stderr, "tollgate-ipam: cannot read the agent's destinations at %s: %s\n",
			url, why);
		return EXIT_PROBLEMS;
	}
	out = top_json(doc, c->arg);
	n = json_object_array_length(out);
	if (c->json) {
		jx_print(stdout, out, JSON_C_TO_STRING_PRETTY);
	} else if (n == 0 && c->arg) {
		printf("no destinations of namespace %s on this node (is internetGuard.destinations "
		       "on, and has the namespace pods here?)\n",
		       c->arg);
	} else if (n == 0) {
		printf("no destinations on this node (is internetGuard.destinations on?)\n");
	} else {
		printf("%-24s %-8s %-19s %16s %7s\n", "NAMESPACE", "DIR", "DESTINATION", "BYTES",
		       "SHARE");
		for (size_t i = 0; i < n; i++) {
			json_object *book = json_object_array_get_idx(out, i);
			json_object *dsts = jx_get(book, "destinations");
			const char *ns = jx_get_str(book, "namespace"),
				   *dir = jx_get_str(book, "direction");
			int64_t total = jx_get_int(book, "bytes");

			for (size_t k = 0; k < json_object_array_length(dsts); k++) {
				json_object *d = json_object_array_get_idx(dsts, k);

				print_row(ns, dir, jx_get_str(d, "destination"),
					  jx_get_int(d, "bytes"), total);
			}
			print_row(ns, dir, "other", jx_get_int(book, "other"), total);
		}
	}
	json_object_put(out);
	json_object_put(doc);
	return 0;
}
