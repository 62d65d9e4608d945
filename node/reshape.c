// SPDX-License-Identifier: Apache-2.0
/*
 * The config's shaping policy applied to running pods (tollgate-ipam
 * reshape; the node daemon on a config change). The new caps are worked out
 * and saved under the store's lock; the tc classes and the nftables table
 * change after it, so the lock is never held across netlink.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/failpoint.h"
#include "node/internal.h"
#include "node/node.h"
#include "node/upkeep.h"
#include "shaper/shaper.h"

bool node_reshaped(const struct node_reshape *r, const struct ipam_state *st, size_t i)
{
	return r->before && i < st->n_att &&
	       memcmp(&r->before[i], &st->att[i].shaping, sizeof(r->before[i])) != 0;
}

struct reshape_ctx {
	const struct node_config *cfg;
	struct node_reshape *r;
};

/*
 * Under the lock: the new caps and uplink classes of every pod, saved unless
 * a dry run. A pod whose caps change is marked pending until its classes are
 * put right (reshape_finish); one still marked by an earlier reshape that
 * stopped midway is put right by this one.
 */
static int reshape_update(struct ipam_state *st, void *p, struct tg_err *e)
{
	struct reshape_ctx *c = p;
	struct node_reshape *r = c->r;

	free(r->before);
	r->changed = 0;
	r->before = calloc(st->n_att + 1, sizeof(*r->before));
	if (!r->before)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < st->n_att; i++) {
		struct ipam_attachment *a = &st->att[i];

		r->before[i] = a->shaping;
		node_shaping_resolve(c->cfg, a->k8s_namespace, &a->shaping);
		if (node_shaping_classes(st, a) < 0)
			return tg_fail(e, CNI_ERR_IO, -ENOSPC, "no free uplink class for %s/%s",
				       a->k8s_namespace, a->pod);
		if (node_reshaped(r, st, i)) {
			r->changed++;
			a->reshape_pending = true;
		}
	}
	return !r->dry_run && r->changed ? 1 : 0;
}

/* The pods whose classes this reshape put right (pointers into the state it saved). */
struct reshape_done {
	const struct ipam_attachment **att;
	size_t n;
};

/* Under the lock: the marks of the pods put right come off, unless they were reshaped since. */
static int reshape_finish(struct ipam_state *st, void *p, struct tg_err *e)
{
	const struct reshape_done *done = p;
	int changed = 0;

	(void)e;
	for (size_t i = 0; i < done->n; i++) {
		const struct ipam_attachment *put = done->att[i];
		struct ipam_attachment *a =
			(struct ipam_attachment *)ipam_find(st, put->container_id, put->ifname);

		if (a && a->reshape_pending &&
		    memcmp(&a->shaping, &put->shaping, sizeof(a->shaping)) == 0) {
			a->reshape_pending = false;
			changed = 1;
		}
	}
	return changed;
}

int node_reshape(struct nl_sock *sk, const struct node_config *cfg, struct ipam_store *store,
		 struct ipam_state *st, struct node_reshape *r, node_pod_error_fn on_error,
		 void *ctx, struct tg_err *e)
{
	struct reshape_ctx c = { cfg, r };
	struct node_uplink up = { .mtu = cfg->mtu ? cfg->mtu : 1500 };
	struct reshape_done done = { 0 };
	struct ipam_state now = { 0 };
	int rc;

	rc = ipam_store_update(store, st, reshape_update, &c, e);
	if (rc < 0)
		node_reshape_free(r); /* nothing was saved: no "before" to report */
	if (rc < 0 || r->dry_run)
		return rc;
	rc = TG_FAILPOINT("reshape.store.after", e);
	if (rc < 0)
		return rc;
	/* Bursts and quanta are sized for the uplink's MTU, as ADD sized them. */
	rc = node_uplink(sk, cfg->uplink, cfg->mtu, &up, e);
	if (rc < 0)
		return rc;
	done.att = calloc(st->n_att + 1, sizeof(*done.att));
	if (!done.att)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < st->n_att; i++) {
		const struct ipam_attachment *a = &st->att[i];
		struct tg_err pe = { 0 };

		if (!a->reshape_pending)
			continue;
		r->repaired += !node_reshaped(r, st, i);
		if (node_pod_reshape(sk, cfg, &up, a, &r->before[i], &pe) < 0) {
			int ifindex;

			/* a pod deleted meanwhile (its veth gone) has no classes left to put right */
			if (plumb_ifindex(sk, a->host_veth, NULL, &ifindex) == 0) {
				r->failed++;
				if (on_error)
					on_error(ctx, a, pe.msg);
				continue;
			}
			r->gone++;
		}
		done.att[done.n++] = a;
	}
	/*
	 * The marks of the pods put right come off; then the pods' class
	 * elements (and node-wide state) as the store says now, after tc work
	 * that can take seconds; every run, so that a rerun also puts what a
	 * failed one left undone.
	 */
	if (done.n)
		rc = ipam_store_update(store, &now, reshape_finish, &done, e);
	ipam_state_free(&now);
	free(done.att);
	if (rc == 0 && r->lazy && !done.n)
		return 0; /* nothing was put right: the elements are as the last run left them */
	if (rc == 0)
		rc = TG_FAILPOINT("reshape.declare.before", e);
	if (rc == 0)
		rc = node_declare_from_store(sk, cfg, &up, store, NODE_DECLARE_PODS, NULL, e);
	return rc;
}

int node_reconcile(struct nl_sock *sk, const struct node_config *cfg, struct ipam_store *store,
		   struct node_reconcile *rc, node_pod_error_fn on_error, void *ctx,
		   struct tg_err *e)
{
	struct node_uplink up = { .mtu = cfg->mtu ? cfg->mtu : 1500 };
	struct ipam_state st = { 0 };
	int64_t now = (int64_t)time(NULL);
	int r;

	/* Readers need no lock: each pod is judged by its own record, its classes by the kernel. */
	r = ipam_store_load(store, &st, e);
	if (r == 0 && st.n_att)
		r = node_uplink(sk, cfg->uplink, cfg->mtu, &up, e);
	for (size_t i = 0; r == 0 && i < st.n_att; i++) {
		const struct ipam_attachment *a = &st.att[i];
		struct tg_err pe = { 0 };
		int ifindex;

		if (a->reshape_pending || now - a->created < rc->grace_s ||
		    plumb_ifindex(sk, a->host_veth, NULL, &ifindex) < 0)
			continue;
		rc->checked++;
		if (shaper_pod_check(sk, a->host_veth, &a->shaping, NULL) == 0)
			continue;
		if (shaper_pod_change(sk, a->host_veth, node_link_group(a), &a->shaping,
				      &a->shaping, cfg->shaping.queue_ms, up.mtu, SHAPER_CHANGE,
				      &pe) == 0) {
			rc->repaired++;
			continue;
		}
		/* a pod deleted meanwhile has nothing left to put right */
		if (plumb_ifindex(sk, a->host_veth, NULL, &ifindex) < 0)
			continue;
		rc->failed++;
		if (on_error)
			on_error(ctx, a, pe.msg);
	}
	ipam_state_free(&st);
	return r;
}

void node_reshape_free(struct node_reshape *r)
{
	free(r->before);
	r->before = NULL;
}
