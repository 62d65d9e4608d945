/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_NODE_UPKEEP_H
#define TG_NODE_UPKEEP_H

/*
 * Passes over the running pods that the node daemon and tollgate-ipam make
 * (never the plugin): the config's caps applied to them (reshape), the
 * collection of attachments whose network namespace is gone, and release.
 */

#include "node/node.h"

/* Told of each pod a maintenance pass could not handle, and why. */
typedef void (*node_pod_error_fn)(void *ctx, const struct ipam_attachment *a, const char *why);

/* ---- the config's shaping applied to running pods (reshape) ---- */
struct node_reshape {
	bool dry_run;
	struct shaping *before; /* each attachment's caps before, by index in st */
	size_t changed;		/* attachments whose caps changed */
	size_t repaired;	/* ... unchanged, left pending by an earlier reshape */
	size_t failed;		/* ... whose classes could not be changed */
	size_t gone;		/* ... whose veth went meanwhile (gc collects them) */
	bool lazy;		/* the table's elements put only when a pod was put right */
};
/*
 * Works out every pod's caps and uplink classes from cfg and saves them under
 * the store's lock (not in a dry run), each changed pod marked pending; then,
 * with the lock released, changes the tc classes of each pending pod (also
 * those an earlier reshape left pending: it stopped after saving), takes
 * the marks of those done off, and puts the table's elements as the store
 * says. Pods an ADD is still plumbing are never pending, so never touched.
 * st holds the state as saved; r->before is NULL when nothing was.
 */
int node_reshape(struct nl_sock *sk, const struct node_config *cfg, struct ipam_store *store,
		 struct ipam_state *st, struct node_reshape *r, node_pod_error_fn on_error,
		 void *ctx, struct tg_err *e);
bool node_reshaped(const struct node_reshape *r, const struct ipam_state *st, size_t i);
void node_reshape_free(struct node_reshape *r);

/* ---- every pod's classes held to its recorded caps (the node daemon's timer) ---- */
struct node_reconcile {
	int64_t grace_s; /* pods recorded this recently are left (an ADD may be making them) */
	size_t checked;	 /* pods whose classes were compared */
	size_t repaired; /* ... that differed and were put right */
	size_t failed;	 /* ... that differed and could not be */
};
/*
 * Compares the classes of every pod of the store (not reshapePending, recorded
 * more than grace_s ago, its veth there) with its recorded caps and puts
 * those that drifted right, in place (shaper_pod_change): a class changed
 * or deleted by hand, a pod an ADD made with an older config's caps after a
 * reshape had recorded the new ones.
 */
int node_reconcile(struct nl_sock *sk, const struct node_config *cfg, struct ipam_store *store,
		   struct node_reconcile *rc, node_pod_error_fn on_error, void *ctx,
		   struct tg_err *e);

/* ---- collection of attachments whose network namespace is gone ---- */
struct node_gc {
	struct ipam_attachment *stale; /* netns gone: to collect */
	size_t n_stale;
	size_t n_unseen;		     /* netns in a directory not visible from here: left */
	char unseen_dir[IPAM_NETNS_MAX + 1]; /* the first such directory */
	size_t released, kept;		     /* kept: teardown failed, address held */
	unsigned retired_classes;
};
/*
 * False when the directory holding netns_path is missing or empty: a mount
 * this process does not see, where a missing netns proves nothing.
 */
bool node_netns_dir_visible(const char *netns_path);
/* Which attachments are stale (g->stale) and which cannot be judged (g->n_unseen). */
int node_gc_find(const struct ipam_state *st, struct node_gc *g);
/*
 * Tears down g->stale, releases those whose teardown worked (into cool-down)
 * and retires uplink classes no attachment uses. st: the state as saved.
 */
int node_gc_collect(struct nl_sock *sk, struct ipam_store *store, struct ipam_state *st,
		    struct node_gc *g, node_pod_error_fn on_error, void *ctx, struct tg_err *e);
void node_gc_free(struct node_gc *g);
/* Releases the attachments (into cool-down) in one locked update of the store. */
int node_release(struct ipam_store *store, struct ipam_state *st,
		 const struct ipam_attachment *list, size_t n, struct tg_err *e);

#endif
