// SPDX-License-Identifier: Apache-2.0
/* Which caps a pod gets: the config's defaults, its namespace's, its own annotations. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cleanup.h"
#include "lib/jsonx.h"
#include "lib/rate.h"
#include "node/internal.h"
#include "shaper/shaper.h"

static uint64_t ns_rate(json_object *map, const char *ns)
{
	json_object *v;
	uint64_t bps = 0;

	if (map && json_object_object_get_ex(map, ns, &v) && v)
		rate_from_json(v, "", &bps, NULL); /* validated when the config was parsed */
	return bps;
}

/*
 * A tenant writes its pod's annotations: they may lower the pod's internet
 * caps, never raise them. An annotation at most the cap the config gives the
 * pod (or in a direction the config does not cap) becomes the pod's cap; one
 * above it is ignored and the pod is shaped exactly as without it, which
 * shaping_inet_*_source() then reports.
 */
void node_shaping_resolve(const struct node_config *cfg, const char *ns, struct shaping *s)
{
	const struct shaping_policy *c = &cfg->shaping;
	uint64_t v;

	s->node_egress_bps = c->node_egress;
	s->budget_fallback_bps =
		node_config_budgeted(cfg, ns, BUDGET_EGRESS) ? cfg->budgets.fallback_bps : 0;
	s->budget_in_fallback_bps =
		node_config_budgeted(cfg, ns, BUDGET_INGRESS) ? cfg->budgets.fallback_bps : 0;
	v = ns_rate(c->ns_egress, ns);
	s->ns_egress_bps = v ? v : c->ns_egress_default;
	/* The egress cap in effect is the smallest of the pod's, its namespace's and the node's. */
	s->inet_egress_bps = c->pod_egress_default;
	if (shaping_inet_egress_source(s).annotation)
		s->inet_egress_bps = s->annot_inet_egress;
	/* Downloads nest the same way, on tollgate-inetdl. */
	s->node_ingress_bps = c->node_ingress;
	v = ns_rate(c->ns_ingress, ns);
	s->ns_ingress_bps = v ? v : c->ns_ingress_default;
	s->inet_ingress_bps = c->pod_ingress_default;
	if (shaping_inet_ingress_source(s).annotation)
		s->inet_ingress_bps = s->annot_inet_ingress;
	s->inet_in_mark = s->inet_ingress_bps || s->ns_ingress_bps || s->node_ingress_bps ||
					  s->budget_in_fallback_bps
				  ? cfg->internet_mark
				  : 0;
}

const struct budget_set *node_budgets_heard(const struct node_config *cfg, struct budget_set *ret)
{
	_cleanup_json_ json_object *o = NULL;
	char path[PATH_MAX + 300];
	json_object *p;

	snprintf(path, sizeof(path), "%s/%s/%s", cfg->data_dir, cfg->name, BUDGET_NODE_FILE);
	o = jx_read_file(path);
	if (!o || !json_object_object_get_ex(o, "policy", &p) ||
	    budget_policy_from_json(p, ret, NULL) < 0)
		return NULL;
	return ret;
}

void node_shaping_request(const struct node_config *cfg, const char *ns, struct shaping *ret)
{
	*ret = cfg->request;
	ret->ns_class = ret->pod_class = 0;
	node_shaping_resolve(cfg, ns, ret);
}

int node_shaping_classes(const struct ipam_state *st, struct ipam_attachment *a)
{
	struct shaper_class_holder *others;
	size_t n = 0;
	int r;

	if (!shaping_inet_egress(&a->shaping) && !shaping_inet_ingress(&a->shaping))
		return shaper_classes_assign(&a->shaping, a->k8s_namespace, a->ip, NULL, 0);
	others = malloc((st->n_att + 1) * sizeof(*others));
	if (!others)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_att; i++) {
		const struct ipam_attachment *o = &st->att[i];

		if (o != a && (o->shaping.ns_class || o->shaping.pod_class))
			others[n++] = (struct shaper_class_holder){ o->k8s_namespace,
								    o->shaping.ns_class,
								    o->shaping.pod_class };
	}
	r = shaper_classes_assign(&a->shaping, a->k8s_namespace, a->ip, others, n);
	free(others);
	return r;
}
