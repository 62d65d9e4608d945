// SPDX-License-Identifier: Apache-2.0
/* release and gc: an attachment's kernel objects go first, then its address (into cool-down). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include "cli/cli.h"
#include "lib/cleanup.h"
#include "lib/ip4.h"
#include "lib/nl.h"
#include "lib/util.h"

/* What the plugin's GC does for one attachment: its kernel objects go (node_pod_del). */
static int teardown(struct nl_sock *sk, const struct ipam_attachment *a)
{
	struct tg_err e = { 0 };
	int r = sk ? node_pod_del(sk, a, &e) : -ENOTCONN;

	if (r < 0)
		fprintf(stderr, "tollgate-ipam: %s: %s\n", a->container_id,
			e.msg[0] ? e.msg : "cannot open a netlink socket");
	return r;
}

struct release_ctx {
	const struct ipam_attachment *list;
	size_t n;
};

static int release_update(struct ipam_state *st, void *ctx, struct tg_err *e)
{
	const struct release_ctx *rc = ctx;
	int r = 0;

	(void)e;
	for (size_t i = 0; i < rc->n; i++)
		r += ipam_release(st, rc->list[i].container_id, rc->list[i].ifname, time_now_ms(),
				  true, NULL);
	return r;
}

/* Releases the attachments (into cool-down) in one locked update of the store. */
static int release(struct cli *c, const struct ipam_attachment *list, size_t n)
{
	struct release_ctx ctx = { .list = list, .n = n };
	struct tg_err e = { 0 };

	if (!n)
		return 0;
	if (ipam_store_update(&c->store, &c->state, release_update, &ctx, &e) < 0) {
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
		return -EIO;
	}
	return 0;
}

static bool link_exists(struct nl_sock *sk, const char *name)
{
	struct rtnl_link *link = NULL;

	if (!sk || rtnl_link_get_kernel(sk, 0, name, &link) < 0)
		return false;
	rtnl_link_put(link);
	return true;
}

int release_main(struct cli *c)
{
	_cleanup_json_ json_object *o = NULL;
	struct ipam_attachment a;
	struct nl_sock *sk = NULL;
	char ip[IP4_STRLEN];
	size_t idx;
	int r;

	if (cli_find(c, c->arg, &idx) < 0)
		return EXIT_PROBLEMS;
	a = c->state.att[idx];
	nl_route_open(&sk);
	if (link_exists(sk, a.host_veth) && !c->force) {
		fprintf(stderr,
			"tollgate-ipam: %s is still plumbed (veth %s exists); releasing it would "
			"hand a live address to another pod. Delete the pod, or use --force to "
			"tear it down.\n",
			ip4_format(a.ip, ip), a.host_veth);
		nl_socket_free(sk);
		return EXIT_PROBLEMS;
	}
	/* Without a veth only the nft elements are left; with --force the veth goes too. */
	r = teardown(sk, &a);
	if (sk)
		nl_socket_free(sk);
	if (r < 0 || release(c, &a, 1) < 0)
		return EXIT_PROBLEMS;
	o = attachment_json(&a, time(NULL));
	json_object_object_add(o, "released", json_object_new_boolean(true));
	if (c->json)
		print_json(o);
	else
		printf("released %s (%s/%s, container %.12s)\n", jstr(o, "ip"),
		       jstr(o, "namespace"), jstr(o, "pod"), jstr(o, "containerId"));
	return 0;
}

/* ---- gc ---- */

/* Tears down the stale attachments and releases those whose teardown worked. */
static int gc_collect(struct cli *c, const struct ipam_attachment *stale, size_t n)
{
	_cleanup_free_ struct ipam_attachment *torn = calloc(n ? n : 1, sizeof(*torn));
	struct nl_sock *sk = NULL;
	size_t gone = 0;
	int rc = 0;

	if (!torn)
		return EXIT_PROBLEMS;
	/* One socket for every teardown, one store update for every release. */
	nl_route_open(&sk);
	for (size_t i = 0; i < n; i++) {
		if (teardown(sk, &stale[i]) < 0)
			rc = EXIT_PROBLEMS; /* kept: its address must not go to another pod */
		else
			torn[gone++] = stale[i];
	}
	if (sk)
		nl_socket_free(sk);
	if (release(c, torn, gone) < 0)
		rc = EXIT_PROBLEMS;
	return rc;
}

/*
 * Namespace classes on tollgate-inet outlive their last pod (an ADD may be
 * attaching under one); gc retires those no attachment uses, under the
 * store's lock so that no ADD can be assigned one meanwhile.
 */
static int gc_retire(struct cli *c, unsigned *retired)
{
	struct ipam_state st = { 0 };
	struct nl_sock *sk = NULL;
	struct tg_err e = { 0 };
	int r;

	*retired = 0;
	if (nl_route_open(&sk) < 0)
		return EXIT_PROBLEMS;
	r = ipam_store_lock(&c->store, &e);
	if (r == 0) {
		r = ipam_store_load(&c->store, &st, &e);
		if (r == 0)
			r = node_retire(sk, &st, retired, &e);
		ipam_store_unlock(&c->store);
		ipam_state_free(&st);
	}
	nl_socket_free(sk);
	if (r < 0) {
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
		return EXIT_PROBLEMS;
	}
	return 0;
}

static void gc_print(const struct cli *c, json_object *arr)
{
	size_t n = json_object_array_length(arr);

	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(arr, i);

		printf("%s %s (%s/%s): network namespace %s is gone\n",
		       c->dry_run ? "would release" : "released", jstr(o, "ip"),
		       jstr(o, "namespace"), jstr(o, "pod"),
		       jstr(o, "netns")[0] ? jstr(o, "netns") : "(none recorded)");
	}
	if (n == 0)
		printf("nothing to collect: every attachment's network namespace exists\n");
}

int gc_main(struct cli *c)
{
	_cleanup_json_ json_object *arr = json_object_new_array();
	_cleanup_free_ struct ipam_attachment *stale = NULL;
	size_t n = 0, i;
	int rc = 0;

	stale = calloc(c->state.n_att ? c->state.n_att : 1, sizeof(*stale));
	if (!stale)
		return EXIT_PROBLEMS;
	for (i = 0; i < c->state.n_att; i++) {
		struct stat sb;

		if (!c->state.att[i].netns[0] || stat(c->state.att[i].netns, &sb) < 0)
			stale[n++] = c->state.att[i];
	}
	if (!c->dry_run && n)
		rc = gc_collect(c, stale, n);
	if (!c->dry_run) {
		unsigned retired = 0;
		int r = gc_retire(c, &retired);

		rc = rc ? rc : r;
		if (retired && !c->json)
			printf("retired %u tc class(es) of %s that no attachment uses\n", retired,
			       SHAPER_INET_IFB);
	}
	for (i = 0; i < n; i++) {
		json_object *o = attachment_json(&stale[i], time(NULL));

		json_object_object_add(o, "released", json_object_new_boolean(!c->dry_run));
		json_object_array_add(arr, o);
	}
	if (c->json)
		print_json(arr);
	else
		gc_print(c, arr);
	return rc;
}
