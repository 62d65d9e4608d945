// SPDX-License-Identifier: Apache-2.0
/*
 * Collection of attachments whose network namespace is gone (tollgate-ipam
 * gc; the node daemon on a timer): each one's kernel objects go first, then
 * its address, into cool-down; then the uplink classes no attachment uses.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/cleanup.h"
#include "lib/failpoint.h"
#include "lib/util.h"
#include "node/internal.h"
#include "node/node.h"

/* The directory part of a netns path: "/var/run/netns/cni-1" -> "/var/run/netns". */
static void netns_dir(const char *path, char *buf, size_t size)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (n >= size)
		n = size - 1;
	memcpy(buf, path, n);
	buf[n] = '\0';
}

/* A directory that exists and holds at least one entry. */
static bool dir_populated(const char *dir)
{
	DIR *d = opendir(dir[0] ? dir : "/");
	struct dirent *de;
	bool any = false;

	if (!d)
		return false;
	while (!any && (de = readdir(d)))
		any = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return any;
}

/* The kernel's fixed inode number of the initial PID namespace (PROC_PID_INIT_INO). */
#define PID_NS_INIT_INO 0xEFFFFFFCu

bool node_netns_dir_visible(const char *netns_path)
{
	char dir[IPAM_NETNS_MAX + 1];

	/*
	 * /proc/PID/ns/net goes with its process: a missing one is simply gone,
	 * as long as this process sees the host's processes at all (the host's
	 * PID namespace; a container without hostPID sees only its own).
	 */
	if (strncmp(netns_path, "/proc/", 6) == 0) {
		struct stat sb;

		return stat("/proc/self/ns/pid", &sb) == 0 && sb.st_ino == PID_NS_INIT_INO;
	}
	netns_dir(netns_path, dir, sizeof(dir));
	return dir_populated(dir);
}

int node_gc_find(const struct ipam_state *st, struct node_gc *g)
{
	memset(g, 0, sizeof(*g));
	g->stale = calloc(st->n_att + 1, sizeof(*g->stale));
	if (!g->stale)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_att; i++) {
		const struct ipam_attachment *a = &st->att[i];
		struct stat sb;

		if (a->netns[0] && stat(a->netns, &sb) == 0)
			continue;
		/*
		 * Gone, or not visible from here: a netns directory that is
		 * missing or empty while attachments name it is a mount this
		 * process does not see (a container without /var/run/netns), not
		 * every pod dying at once. Collecting would tear down live pods.
		 */
		if (a->netns[0] && !node_netns_dir_visible(a->netns)) {
			if (!g->unseen_dir[0])
				netns_dir(a->netns, g->unseen_dir, sizeof(g->unseen_dir));
			g->n_unseen++;
			continue;
		}
		g->stale[g->n_stale++] = *a;
	}
	return 0;
}

struct release_ctx {
	const struct ipam_attachment *list;
	size_t n;
};

int node_release_locked(struct ipam_state *st, const struct ipam_attachment *list, size_t n,
			struct tg_err *e)
{
	int released = 0;

	for (size_t i = 0; i < n; i++) {
		const struct ipam_attachment *a;

		if (!list[i].container_id[0])
			continue; /* not torn down: kept */
		a = ipam_find(st, list[i].container_id, list[i].ifname);
		if (a && node_pod_forget(a, NULL, NULL, e) < 0)
			continue; /* kept: the next collection finishes it */
		released += ipam_release(st, list[i].container_id, list[i].ifname, time_boot_ms(),
					 true, NULL);
	}
	return released;
}

static int release_update(struct ipam_state *st, void *ctx, struct tg_err *e)
{
	const struct release_ctx *rc = ctx;

	return node_release_locked(st, rc->list, rc->n, e);
}

int node_release(struct ipam_store *store, struct ipam_state *st,
		 const struct ipam_attachment *list, size_t n, struct tg_err *e)
{
	struct release_ctx ctx = { .list = list, .n = n };

	return n ? ipam_store_update(store, st, release_update, &ctx, e) : 0;
}

int node_gc_collect(struct nl_sock *sk, struct ipam_store *store, struct ipam_state *st,
		    struct node_gc *g, node_pod_error_fn on_error, void *ctx, struct tg_err *e)
{
	_cleanup_free_ struct ipam_attachment *torn = calloc(g->n_stale + 1, sizeof(*torn));
	size_t gone = 0;
	int r;

	if (!torn)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < g->n_stale; i++) {
		struct tg_err pe = { 0 };

		/* Kept when its teardown fails: its address must not go to another pod. */
		/* no warning to pass on: without nf_tables the agent's declaration fails first */
		if (node_pod_del(sk, &g->stale[i], NULL, &pe) < 0) {
			g->kept++;
			if (on_error)
				on_error(ctx, &g->stale[i], pe.msg);
		} else {
			torn[gone++] = g->stale[i];
		}
	}
	r = TG_FAILPOINT("maint.gc.release.before", e);
	if (r == 0)
		r = node_release(store, st, torn, gone, e);
	if (r == 0)
		r = TG_FAILPOINT("maint.gc.release.after", e);
	if (r < 0)
		return r;
	g->released = gone;
	/*
	 * Namespace classes outlive their last pod (an ADD may be attaching
	 * under one): retired here, under the store's lock, so that no ADD can
	 * be assigned one meanwhile.
	 */
	r = ipam_store_lock(store, e);
	if (r < 0)
		return r;
	ipam_state_free(st);
	r = ipam_store_load(store, st, e);
	if (r == 0)
		r = TG_FAILPOINT("maint.gc.retire.before", e);
	if (r == 0)
		r = node_retire(sk, st, &g->retired_classes, e);
	ipam_store_unlock(store);
	return r;
}

void node_gc_free(struct node_gc *g)
{
	free(g->stale);
	g->stale = NULL;
	g->n_stale = 0;
}
