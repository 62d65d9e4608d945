// SPDX-License-Identifier: Apache-2.0
/*
 * reshape: the config's shaping policy applied to running pods. The new caps
 * are worked out and saved under the store's lock; the tc classes and the
 * nftables table change after it, so the lock is never held across netlink.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <netlink/netlink.h>

#include "cli/cli.h"
#include "lib/cleanup.h"
#include "lib/jsonx.h"
#include "lib/nl.h"

static json_object *reshape_json(const struct cli *c, const struct node_reshape *r)
{
	json_object *arr = json_object_new_array();

	for (size_t i = 0; i < c->state.n_att; i++) {
		const struct ipam_attachment *a = &c->state.att[i];
		json_object *o = attachment_json(a, time(NULL));

		json_object_object_add(o, "changed",
				       json_object_new_boolean(node_reshaped(r, &c->state, i)));
		json_object_object_add(o, "shaping", shaping_view_json(&a->shaping));
		json_object_array_add(arr, o);
	}
	return arr;
}

static void reshape_print(const struct cli *c, const struct node_reshape *r, json_object *arr)
{
	for (size_t i = 0; i < json_object_array_length(arr) && !r->dry_run; i++) {
		json_object *o = json_object_array_get_idx(arr, i);
		char line[200];

		if (!json_object_get_boolean(jx_get(o, "changed")))
			continue;
		shaping_line(jx_get(o, "shaping"), line, sizeof(line));
		/* The pod, then its shaping indented: names of 63 characters fit 100 columns. */
		printf("%-15s %s/%s\n%16s%s\n", jx_get_str(o, "ip"), jx_get_str(o, "namespace"),
		       jx_get_str(o, "pod"), "", line);
		/* and, for a pod with annotations, which value set each internet cap */
		if (shaping_source_line(jx_get(o, "shaping"), line, sizeof(line)))
			printf("%16scaps from %s\n", "", line);
	}
	printf("%zu of %zu pods %s\n", r->changed, c->state.n_att,
	       r->dry_run ? "would change (dry run)" : "reshaped");
	if (r->repaired)
		printf("%zu pods' classes put right (an earlier reshape had not finished them)\n",
		       r->repaired);
	if (r->gone)
		printf("%zu pods gone meanwhile (their veth no longer exists)\n", r->gone);
}

static void pod_error(void *ctx, const struct ipam_attachment *a, const char *why)
{
	fprintf(stderr, "tollgate-ipam: %s/%s: %s\n", a->k8s_namespace, a->pod, why);
}

int reshape_main(struct cli *c)
{
	_cleanup_json_ json_object *arr = NULL;
	struct node_reshape r = { .dry_run = c->dry_run };
	struct nl_sock *sk = NULL;
	struct tg_err e = { 0 };
	int rc;

	if (!c->dry_run && tg_nl_route_open(&sk) < 0) {
		fprintf(stderr, "tollgate-ipam: cannot open a netlink socket\n");
		return EXIT_PROBLEMS;
	}
	rc = node_reshape(sk, &c->cfg, &c->store, &c->state, &r, pod_error, NULL, &e);
	if (sk)
		nl_socket_free(sk);
	if (rc < 0)
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg[0] ? e.msg : "out of memory");
	if (!r.before)
		return EXIT_PROBLEMS;
	arr = reshape_json(c, &r);
	if (c->json)
		jx_print(stdout, arr, JSON_C_TO_STRING_PRETTY);
	else
		reshape_print(c, &r, arr);
	node_reshape_free(&r);
	return rc < 0 || r.failed ? EXIT_PROBLEMS : 0;
}
