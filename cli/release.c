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
#include "lib/jsonx.h"
#include "lib/nl.h"
#include "lib/util.h"

/* What the plugin's GC does for one attachment: its kernel objects go (node_pod_del). */
static int teardown_attachment(struct nl_sock *sk, const struct ipam_attachment *a)
{
	struct tg_err e = { 0 };
	struct tg_err note = { 0 };
	int r = sk ? node_pod_del(sk, a, &note, &e) : -ENOTCONN;

	if (tg_err_set(&note))
		fprintf(stderr, "tollgate-ipam: %s: %s\n", a->container_id, note.msg);

	if (r < 0)
		fprintf(stderr, "tollgate-ipam: %s: %s\n", a->container_id,
			e.msg[0] ? e.msg : "cannot open a netlink socket");
	return r;
}

/* Releases the attachments (into cool-down) in one locked update of the store. */
static int release_attachments(struct cli *c, const struct ipam_attachment *list, size_t n)
{
	struct tg_err e = { 0 };

	if (node_release(&c->store, &c->state, list, n, &e) < 0) {
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
	tg_nl_route_open(&sk);
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
	r = teardown_attachment(sk, &a);
	if (sk)
		nl_socket_free(sk);
	if (r < 0 || release_attachments(c, &a, 1) < 0)
		return EXIT_PROBLEMS;
	o = attachment_json(&a, time(NULL));
	json_object_object_add(o, "released", json_object_new_boolean(true));
	if (c->json)
		jx_print(stdout, o, JSON_C_TO_STRING_PRETTY);
	else
		printf("released %s (%s/%s, container %.12s)\n", jx_get_str(o, "ip"),
		       jx_get_str(o, "namespace"), jx_get_str(o, "pod"),
		       jx_get_str(o, "containerId"));
	return 0;
}

/* ---- gc ---- */

static void gc_print(const struct cli *c, json_object *arr)
{
	size_t n = json_object_array_length(arr);

	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(arr, i);

		printf("%s %s (%s/%s): network namespace %s is gone\n",
		       c->dry_run ? "would release" : "released", jx_get_str(o, "ip"),
		       jx_get_str(o, "namespace"), jx_get_str(o, "pod"),
		       jx_get_str(o, "netns")[0] ? jx_get_str(o, "netns") : "(none recorded)");
	}
	if (n == 0)
		printf("nothing to collect: every attachment's network namespace exists\n");
}

static void pod_error(void *ctx, const struct ipam_attachment *a, const char *why)
{
	fprintf(stderr, "tollgate-ipam: %s: %s\n", a->container_id, why);
}

int gc_main(struct cli *c)
{
	_cleanup_json_ json_object *arr = json_object_new_array();
	struct node_gc g;
	struct tg_err e = { 0 };
	int rc = 0;

	if (node_gc_find(&c->state, &g) < 0)
		return EXIT_PROBLEMS;
	if (g.n_unseen) {
		fprintf(stderr,
			"tollgate-ipam: %zu attachment(s) name network namespaces in %s, which is "
			"missing or empty here (not mounted in this container?): left alone; a "
			"missing namespace proves nothing where none are visible\n",
			g.n_unseen, g.unseen_dir);
		rc = EXIT_PROBLEMS;
	}
	if (!c->dry_run) {
		struct nl_sock *sk = NULL;

		if (tg_nl_route_open(&sk) < 0) {
			fprintf(stderr, "tollgate-ipam: cannot open a netlink socket\n");
			node_gc_free(&g);
			return EXIT_PROBLEMS;
		}
		if (node_gc_collect(sk, &c->store, &c->state, &g, pod_error, NULL, &e) < 0) {
			fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
			rc = EXIT_PROBLEMS;
		}
		nl_socket_free(sk);
		if (g.kept)
			rc = EXIT_PROBLEMS;
		if (g.retired_classes && !c->json)
			printf("retired %u tc class(es) of %s that no attachment uses\n",
			       g.retired_classes, SHAPER_INET_IFB);
	}
	for (size_t i = 0; i < g.n_stale; i++) {
		json_object *o = attachment_json(&g.stale[i], time(NULL));

		json_object_object_add(o, "released", json_object_new_boolean(!c->dry_run));
		json_object_array_add(arr, o);
	}
	node_gc_free(&g);
	if (c->json)
		jx_print(stdout, arr, JSON_C_TO_STRING_PRETTY);
	else
		gc_print(c, arr);
	return rc;
}
