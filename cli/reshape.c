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
#include "lib/nl.h"

struct reshape {
	const struct node_config *cfg;
	bool dry_run;
	struct shaping *before;		/* each attachment's caps before, by index */
	size_t changed;
};

static bool reshaped(const struct reshape *r, const struct ipam_attachment *a, size_t i)
{
	return memcmp(&r->before[i], &a->shaping, sizeof(r->before[i])) != 0;
}

/* Under the lock: the new caps and uplink classes of every pod, saved unless a dry run. */
static int reshape_update(struct ipam_state *st, void *ctx, struct tg_err *e)
{
	struct reshape *r = ctx;

	r->before = calloc(st->n_att + 1, sizeof(*r->before));
	if (!r->before)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_att; i++) {
		struct ipam_attachment *a = &st->att[i];

		r->before[i] = a->shaping;
		node_shaping_resolve(r->cfg, a->k8s_namespace, &a->shaping);
		if (node_shaping_classes(st, a) < 0)
			return tg_fail(e, CNI_ERR_IO, -ENOSPC, "no free uplink class for %s/%s",
				       a->k8s_namespace, a->pod);
		r->changed += reshaped(r, a, i);
	}
	return !r->dry_run && r->changed ? 1 : 0;
}

static json_object *reshape_json(const struct cli *c, const struct reshape *r)
{
	json_object *arr = json_object_new_array();

	for (size_t i = 0; i < c->state.n_att; i++) {
		const struct ipam_attachment *a = &c->state.att[i];
		json_object *o = attachment_json(a, time(NULL));

		json_object_object_add(o, "changed", json_object_new_boolean(reshaped(r, a, i)));
		json_object_object_add(o, "shaping", shaping_json(&a->shaping));
		json_object_array_add(arr, o);
	}
	return arr;
}

/* Each changed pod's tc classes, then the table: 0, EXIT_PROBLEMS, or -1 when nothing ran. */
static int reshape_apply(struct cli *c, const struct reshape *r)
{
	struct node_uplink up = { .mtu = c->cfg.mtu ? c->cfg.mtu : 1500 };
	struct nl_sock *sk = NULL;
	struct tg_err e = { 0 };
	int rc = 0;

	if (nl_route_open(&sk) < 0) {
		fprintf(stderr, "tollgate-ipam: cannot open a netlink socket\n");
		return -1;
	}
	/* Bursts and quanta are sized for the uplink's MTU, as ADD sized them. */
	if (node_uplink(sk, c->cfg.uplink, c->cfg.mtu, &up, &e) < 0) {
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
		nl_socket_free(sk);
		return -1;
	}
	for (size_t i = 0; i < c->state.n_att; i++) {
		struct ipam_attachment *a = &c->state.att[i];

		if (!reshaped(r, a, i))
			continue;
		if (node_pod_reshape(sk, &c->cfg, &up, a, &r->before[i], &e) < 0) {
			fprintf(stderr, "tollgate-ipam: %s/%s: %s\n", a->k8s_namespace, a->pod,
				e.msg);
			memset(&e, 0, sizeof(e));
			rc = EXIT_PROBLEMS;
		}
	}
	/* The pods' class elements (and node-wide state) as the store now says. */
	if (node_declare(sk, &c->cfg, &up, &c->state, NODE_DECLARE_PODS, NULL, &e) < 0) {
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
		rc = EXIT_PROBLEMS;
	}
	nl_socket_free(sk);
	return rc;
}

static void reshape_print(const struct cli *c, const struct reshape *r, json_object *arr)
{
	for (size_t i = 0; i < json_object_array_length(arr) && !r->dry_run; i++) {
		json_object *o = json_object_array_get_idx(arr, i);
		char line[200];

		if (!json_object_get_boolean(jget(o, "changed")))
			continue;
		shaping_line(jget(o, "shaping"), line, sizeof(line));
		/* The pod, then its shaping indented: names of 63 characters fit 100 columns. */
		printf("%-15s %s/%s\n%16s%s\n", jstr(o, "ip"), jstr(o, "namespace"), jstr(o, "pod"),
		       "", line);
		/* and, for a pod with annotations, which value set each internet cap */
		if (shaping_source_line(jget(o, "shaping"), line, sizeof(line)))
			printf("%16scaps from %s\n", "", line);
	}
	printf("%zu of %zu pods %s\n", r->changed, c->state.n_att,
	       r->dry_run ? "would change (dry run)" : "reshaped");
}

static int reshape_run(struct cli *c, struct reshape *r)
{
	_cleanup_json_ json_object *arr = NULL;
	struct tg_err e = { 0 };
	int rc = 0;

	if (ipam_store_update(&c->store, &c->state, reshape_update, r, &e) < 0) {
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg[0] ? e.msg : "out of memory");
		return EXIT_PROBLEMS;
	}
	if (!r->dry_run && r->changed && (rc = reshape_apply(c, r)) < 0)
		return EXIT_PROBLEMS;
	arr = reshape_json(c, r);
	if (c->json)
		print_json(arr);
	else
		reshape_print(c, r, arr);
	return rc;
}

int reshape_main(struct cli *c)
{
	struct reshape r = { .cfg = &c->cfg, .dry_run = c->dry_run };
	int rc = reshape_run(c, &r);

	free(r.before);
	return rc;
}
