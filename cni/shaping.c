// SPDX-License-Identifier: Apache-2.0
/* Which caps a pod gets: the config's defaults, its namespace's, its own annotations. */
#include <errno.h>
#include <string.h>

#include "cni/internal.h"
#include "lib/rate.h"
#include "lib/util.h"

static uint64_t ns_rate(json_object *map, const char *ns)
{
	json_object *v;
	uint64_t bps = 0;

	if (map && json_object_object_get_ex(map, ns, &v) && v)
		rate_from_json(v, "", &bps, NULL); /* validated when the config was parsed */
	return bps;
}

void cni_shaping_resolve(const struct tg_config *cfg, const char *ns, struct shaping *s)
{
	const struct tg_shaping *c = &cfg->shaping;
	uint64_t v;

	s->node_egress_bps = c->node_egress;
	v = ns_rate(c->ns_egress, ns);
	s->ns_egress_bps = v ? v : c->ns_egress_default;
	s->inet_egress_bps = s->annot_inet_egress ? s->annot_inet_egress : c->pod_egress_default;
	/* A namespace entry under internetIngress is the cap of each of its pods. */
	v = ns_rate(c->ns_ingress, ns);
	s->inet_ingress_bps = s->annot_inet_ingress ? s->annot_inet_ingress
			      : v			  ? v
							  : c->pod_ingress_default;
}

void cni_shaping_of_request(const struct tg_config *cfg, const char *ns, struct shaping *s)
{
	*s = cfg->request;
	cni_shaping_resolve(cfg, ns, s);
}

static bool class_used(const struct ipam_state *st, const struct ipam_attachment *self,
		       uint16_t id, bool ns_class, const char *ns)
{
	for (size_t i = 0; i < st->n_att; i++) {
		const struct ipam_attachment *a = &st->att[i];

		if (a == self)
			continue;
		if (ns_class && a->shaping.ns_class == id && strcmp(a->k8s_namespace, ns) != 0)
			return true;
		if (!ns_class && a->shaping.pod_class == id)
			return true;
	}
	return false;
}

int cni_shaping_classes(const struct ipam_state *st, struct ipam_attachment *a)
{
	struct shaping sp = a->shaping;
	uint32_t span, start, k;

	if (!shaping_inet_egress(&sp)) {
		a->shaping.ns_class = a->shaping.pod_class = 0;
		return 0;
	}
	/* The namespace's class: shared with its other pods, else a free one near its hash. */
	if (!a->shaping.ns_class) {
		for (size_t i = 0; i < st->n_att && !a->shaping.ns_class; i++)
			if (&st->att[i] != a && st->att[i].shaping.ns_class &&
			    strcmp(st->att[i].k8s_namespace, a->k8s_namespace) == 0)
				a->shaping.ns_class = st->att[i].shaping.ns_class;
	}
	if (!a->shaping.ns_class) {
		span = SHAPER_NS_CLASS_MAX - SHAPER_NS_CLASS_MIN + 1;
		start = (uint32_t)(hash_fnv1a64(a->k8s_namespace, strlen(a->k8s_namespace),
						FNV1A64_INIT) % span);
		for (k = 0; k < span; k++) {
			uint16_t id = (uint16_t)(SHAPER_NS_CLASS_MIN + (start + k) % span);

			if (!class_used(st, a, id, true, a->k8s_namespace)) {
				a->shaping.ns_class = id;
				break;
			}
		}
	}
	/* The pod's: from its address, so it is stable, probing on a (rare) clash. */
	if (!a->shaping.pod_class) {
		span = 0xfffe - SHAPER_POD_CLASS_BASE + 1;
		start = a->ip % span;
		for (k = 0; k < span; k++) {
			uint16_t id = (uint16_t)(SHAPER_POD_CLASS_BASE + (start + k) % span);

			if (!class_used(st, a, id, false, NULL)) {
				a->shaping.pod_class = id;
				break;
			}
		}
	}
	return a->shaping.ns_class && a->shaping.pod_class ? 0 : -ENOSPC;
}

