// SPDX-License-Identifier: Apache-2.0
/*
 * What a node holds of cluster budgets (agent/internal.h): its budgeted
 * namespaces with pods here, read from the store, and their leases.
 *
 * What it holds survives a restart of the agent in <dataDir>/<network>/
 * budgets.json (leases on CLOCK_BOOTTIME): a rolling update does not drop
 * every node to its fallback at once. `tollgate-ipam status` reads it too.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "agent/internal.h"
#include "budget/budget.h"
#include "lib/cleanup.h"
#include "lib/jsonx.h"
#include "lib/replace.h"
#include "lib/util.h"
#include "shaper/shaper.h"

struct agent_budget_ns *agent_budgets_find_ns(struct agent_budgets *b, const char *ns,
					      enum budget_dir dir)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->ns[i].dir == dir && strcmp(b->ns[i].ns, ns) == 0)
			return &b->ns[i];
	return NULL;
}

static struct agent_budget_ns *add_ns(struct agent_budgets *b, const char *ns, enum budget_dir dir,
				      int64_t now_ms)
{
	struct agent_budget_ns *n = agent_budgets_find_ns(b, ns, dir), *grown;

	if (n)
		return n;
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 8;

		grown = realloc(b->ns, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		b->ns = grown;
		b->cap = cap;
	}
	n = &b->ns[b->n++];
	*n = (struct agent_budget_ns){ .dir = dir,
				       .state = BUDGET_FALLBACK,
				       .fallback_since_ms = now_ms };
	snprintf(n->ns, sizeof(n->ns), "%s", ns);
	return n;
}

/*
 * The pod's namespace class in one direction when that direction is under
 * a budget, else 0; *ret_limit its own caps there, bytes/s. Uploads: its
 * class on tollgate-inet. Downloads: the class of the same minor on
 * tollgate-inetdl, once its record says its downloads are shaped there.
 */
static uint16_t budgeted_class(const struct agent *a, const struct ipam_attachment *att,
			       enum budget_dir dir, uint64_t *ret_limit)
{
	const struct shaping *s = &att->shaping;
	uint64_t cap;

	/* by the policy in force, not the pod's record, which a reshape brings after */
	if (!s->ns_class || !node_config_budgeted(&a->cfg, att->k8s_namespace, dir))
		return 0;
	if (dir == BUDGET_EGRESS) {
		if (!shaping_inet_egress(s))
			return 0;
		cap = shaping_min_cap(s->ns_egress_bps, s->node_egress_bps);
	} else {
		if (!shaping_inet_ingress(s))
			return 0;
		cap = shaping_min_cap(s->ns_ingress_bps, s->node_ingress_bps);
	}
	*ret_limit = (cap ? cap : SHAPER_LINE_BPS) / 8;
	return s->ns_class;
}

/*
 * The budgets of namespaces that have pods on this node, from the store:
 * each one's class, pods and own caps, per direction; read again only when
 * the store was replaced or the config changed. Budgets gone from the node
 * (or from the policy) are dropped.
 */
int agent_budgets_refresh_namespaces(struct agent *a, int64_t now_ms, struct tg_err *e)
{
	struct agent_budgets *b = &a->budgets;
	struct ipam_state st = { 0 };
	struct ipam_store store;
	size_t keep = 0;
	int r = ipam_store_open_readonly(&store, a->cfg.data_dir, a->cfg.name, e), changed;

	if (r < 0)
		return r;
	if (b->cfg_hash != a->cfg_hash || strcmp(b->scanned, b->heard.id) != 0)
		b->store.looked = false; /* which namespaces have budgets may have changed */
	changed = ipam_store_stamp_changed(&store, &b->store);
	if (changed < 0) {
		ipam_store_close(&store);
		return tg_fail(e, CNI_ERR_IO, changed, "the store: %s", strerror(-changed));
	}
	if (changed && b->store.present) {
		r = ipam_store_load(&store, &st, e);
		if (r < 0) {
			ipam_store_close(&store);
			b->store.looked = false; /* again at the next tick */
			ipam_state_free(&st);
			return r;
		}
	}
	ipam_store_close(&store);
	if (changed) {
		b->cfg_hash = a->cfg_hash;
		memcpy(b->scanned, b->heard.id, sizeof(b->scanned));
		for (size_t i = 0; i < b->n; i++)
			b->ns[i].pods = 0;
	}
	for (size_t i = 0; i < st.n_att; i++) {
		const struct ipam_attachment *att = &st.att[i];

		for (int d = 0; d < BUDGET_DIRS; d++) {
			struct agent_budget_ns *n;
			uint64_t limit = 0;
			uint16_t cls = budgeted_class(a, att, (enum budget_dir)d, &limit);

			if (!cls)
				continue;
			n = add_ns(b, att->k8s_namespace, (enum budget_dir)d, now_ms);
			if (!n) {
				ipam_state_free(&st);
				b->store.looked = false;
				return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
			}
			n->ns_class = cls;
			n->pods++;
			n->limit = limit;
		}
	}
	ipam_state_free(&st);
	/*
	 * A namespace whose last pod left: said once more in a report (no
	 * pod, nothing applied) so that the allocator frees its share at
	 * once; its class, empty until gc retires it, goes down to the
	 * fallback meanwhile, like a class a new pod's ADD would make.
	 */
	for (size_t i = 0; i < b->n; i++) {
		struct agent_budget_ns *n = &b->ns[i];

		if (n->pods == 0 && n->leaving)
			continue; /* said: gone */
		/* its budget is gone: its class is the namespace's own again (the reshape's) */
		if (n->pods == 0 && !node_config_budgeted(&a->cfg, n->ns, n->dir))
			continue;
		if (n->pods == 0 && !n->leaving) {
			n->leaving = true;
			n->state = BUDGET_FALLBACK;
			n->grant = n->safe_share = 0;
			n->nodes = 0;
		} else if (n->leaving) {
			/* back before it was dropped: it arrives again */
			n->leaving = false;
			n->fallback_since_ms = now_ms;
			n->fallback_on = false;
		}
		b->ns[keep++] = *n;
	}
	if (keep != b->n)
		b->dirty = true;
	b->n = keep;
	return 0;
}

bool agent_budgets_age_leases(struct agent *a, int64_t now_ms)
{
	struct agent_budgets *b = &a->budgets;
	int64_t after = a->cfg.budgets.fallback_after_ms;
	bool due = false;

	for (size_t i = 0; i < b->n; i++) {
		struct agent_budget_ns *n = &b->ns[i];

		if (n->state == BUDGET_GRANTED && now_ms >= n->lease_until_ms) {
			n->state = BUDGET_LEASE_EXPIRED;
			b->lease_expiries++;
			b->dirty = due = true;
		}
		if (n->state == BUDGET_FALLBACK && !n->leaving && !n->fallback_on &&
		    now_ms - n->fallback_since_ms >= after) {
			n->fallback_on = true;
			due = true;
		}
	}
	return due;
}

/* ---- budgets.json: what the node holds, for a restart and for tollgate-ipam ---- */

static void state_path(const struct agent *a, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s", a->cfg.data_dir, a->cfg.name);
}

void agent_budgets_save_state(struct agent *a, int64_t now_ms)
{
	struct agent_budgets *b = &a->budgets;
	_cleanup_json_ json_object *o = json_object_new_object();
	json_object *arr = json_object_new_array();
	char dir[PATH_MAX + 256];
	const char *text;

	if (!o || !arr) {
		json_object_put(arr);
		return;
	}
	jx_add(o, "version", json_object_new_int(1));
	jx_add(o, "node", json_object_new_string(a->opt.node_name ? a->opt.node_name : ""));
	jx_add(o, "allocator", json_object_new_string(a->cfg.budgets.allocator));
	jx_add(o, "bootMs", json_object_new_int64(now_ms));
	jx_add(o, "epoch", json_object_new_int64((int64_t)b->epoch_seen));
	jx_add(o, "updated", json_object_new_int64((int64_t)time(NULL)));
	for (size_t i = 0; i < b->n; i++) {
		const struct agent_budget_ns *n = &b->ns[i];
		json_object *e = json_object_new_object();

		jx_add(e, "namespace", json_object_new_string(n->ns));
		jx_add(e, "direction", json_object_new_string(budget_dir_names[n->dir]));
		jx_add(e, "state", json_object_new_string(budget_state_names[n->state]));
		jx_add(e, "grant", json_object_new_int64((int64_t)n->grant));
		jx_add(e, "safeShare", json_object_new_int64((int64_t)n->safe_share));
		jx_add(e, "nodes", json_object_new_int64(n->nodes));
		jx_add(e, "applied", json_object_new_int64((int64_t)n->kernel_ceil));
		jx_add(e, "limit", json_object_new_int64((int64_t)n->limit));
		jx_add(e, "leaseUntilBootMs", json_object_new_int64(n->lease_until_ms));
		jx_add(e, "fallbackSinceBootMs", json_object_new_int64(n->fallback_since_ms));
		jx_add(e, "pods", json_object_new_int64(n->pods));
		json_object_array_add(arr, e);
	}
	jx_add(o, "namespaces", arr);
	if (b->heard.id[0])
		jx_add(o, "policy", budget_policy_to_json(&b->heard));
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY);
	state_path(a, dir, sizeof(dir));
	/* Only this node's one agent writes it: one writer, the store's fixed temp name. */
	if (tg_file_replace(dir, BUDGET_NODE_FILE, text, strlen(text), tg_dir_durable(dir)) == 0)
		b->dirty = false;
}

/*
 * After a restart: the grants whose leases still run (same boot, CLOCK_BOOTTIME)
 * come back as they were, a lease that ran out meanwhile as expired.
 */
void agent_budgets_restore_state(struct agent *a, int64_t now_ms)
{
	struct agent_budgets *b = &a->budgets;
	char dir[PATH_MAX + 256], path[PATH_MAX + 300];
	_cleanup_json_ json_object *o = NULL;
	json_object *arr, *v;
	int64_t boot_ms = 0;

	state_path(a, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, BUDGET_NODE_FILE);
	o = jx_read_file(path);
	if (!o || !json_object_object_get_ex(o, "namespaces", &arr) ||
	    !json_object_is_type(arr, json_type_array))
		return;
	/* a file from before this boot says nothing of this one */
	if (json_object_object_get_ex(o, "bootMs", &v))
		boot_ms = json_object_get_int64(v);
	if (boot_ms <= 0 || boot_ms > now_ms)
		return;
	/* the newest term seen outlives a restart: a deposed leader's answer stays refused */
	if (json_object_object_get_ex(o, "epoch", &v) && json_object_get_int64(v) > 0)
		b->epoch_seen = (uint64_t)json_object_get_int64(v);
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *e = json_object_array_get_idx(arr, i), *f;
		const char *ns, *state;
		enum budget_dir bdir = BUDGET_EGRESS;
		struct agent_budget_ns *n;

		if (!json_object_object_get_ex(e, "namespace", &f) ||
		    !json_object_is_type(f, json_type_string))
			continue;
		ns = json_object_get_string(f);
		/* a file from before directions holds uploads only */
		if (json_object_object_get_ex(e, "direction", &f) &&
		    (!json_object_is_type(f, json_type_string) ||
		     budget_dir_parse(json_object_get_string(f),
				      (size_t)json_object_get_string_len(f), &bdir) < 0))
			continue;
		if (strlen(ns) > BUDGET_NS_MAX || !node_config_budgeted(&a->cfg, ns, bdir))
			continue;
		if (!json_object_object_get_ex(e, "state", &f))
			continue;
		state = json_object_get_string(f);
		n = add_ns(b, ns, bdir, now_ms);
		if (!n)
			return;
		n->state = BUDGET_FALLBACK;
		for (int s = 0; s < BUDGET_STATES; s++)
			if (state && strcmp(state, budget_state_names[s]) == 0)
				n->state = (enum budget_state)s;
#define GET_U64(key, dst)                                                          \
	if (json_object_object_get_ex(e, key, &f) && json_object_get_int64(f) > 0) \
	dst = (uint64_t)json_object_get_int64(f)
		GET_U64("grant", n->grant);
		GET_U64("safeShare", n->safe_share);
		GET_U64("limit", n->limit);
#undef GET_U64
		if (json_object_object_get_ex(e, "nodes", &f))
			n->nodes = (uint32_t)json_object_get_int64(f);
		if (json_object_object_get_ex(e, "leaseUntilBootMs", &f))
			n->lease_until_ms = json_object_get_int64(f);
		/* never granted: its time without an answer goes on from where it was */
		if (json_object_object_get_ex(e, "fallbackSinceBootMs", &f) &&
		    json_object_get_int64(f) > 0 && json_object_get_int64(f) <= now_ms)
			n->fallback_since_ms = json_object_get_int64(f);
		n->pods = 1; /* until the store says */
	}
	agent_budgets_age_leases(a, now_ms);
}
