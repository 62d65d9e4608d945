// SPDX-License-Identifier: Apache-2.0
/*
 * Which classes a pod's shaping makes, where they live and which ids they
 * take: the one place that knows the tc layout drawn in shaper.h. The
 * plugin, CHECK, `tollgate-ipam show` and the exporter all read it here.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <linux/pkt_sched.h>

#include "lib/util.h"
#include "shaper/internal.h"


uint32_t shaper_egress_classid(const struct shaping *s)
{
	return s->pod_class ? H(1, s->pod_class) : 0;
}

void shaper_ceilings(const struct shaping *s, struct shaper_ceilings *ret)
{
	ret->to_pod = s->ingress_bps ? s->ingress_bps : SHAPER_LINE_BPS;
	ret->to_pod_inet = shaping_min_cap(s->inet_ingress_bps, ret->to_pod);
	ret->node = s->node_egress_bps ? s->node_egress_bps : SHAPER_LINE_BPS;
	ret->ns = shaping_min_cap(s->ns_egress_bps, ret->node);
	ret->pod_inet = shaping_min_cap(s->inet_egress_bps, ret->ns);
}

static struct shaper_class *put(struct shaper_class *c, const char *dev, uint32_t classid,
				uint32_t parent, enum shaper_level level, const char *direction,
				const char *traffic, uint64_t ceil_bps)
{
	snprintf(c->dev, sizeof(c->dev), "%s", dev);
	c->classid = classid;
	c->parent = parent;
	c->level = level;
	c->direction = direction;
	c->traffic = traffic;
	c->ceil_bps = ceil_bps;
	return c + 1;
}

int shaper_pod_classes(const char *host_veth, const struct shaping *s,
		       struct shaper_class ret[SHAPER_POD_CLASSES_MAX])
{
	struct shaper_class *c = ret;
	struct shaper_ceilings ceil;

	shaper_ceilings(s, &ceil);
	if (shaping_pod_ingress(s)) {
		/* 1:2 hangs under 1:1 (made for every shaped ingress), see shaper_pod_add */
		uint32_t ingress_parent = H(1, 1);

		if (s->ingress_bps)
			c = put(c, host_veth, H(1, 1), TC_H_ROOT, SHAPER_POD, "ingress", "all", ceil.to_pod);
		c = put(c, host_veth, SHAPER_INET_INGRESS_CLASS, ingress_parent, SHAPER_POD, "ingress", "internet",
			ceil.to_pod_inet);
		if (s->ingress_bps)
			c = put(c, host_veth, H(1, 3), H(1, 1), SHAPER_POD, "ingress", "internal",
				ceil.to_pod);
	}
	if (s->egress_bps) {
		char ifb[IFNAMSIZ];

		shaper_ifb_name(host_veth, ifb);
		c = put(c, ifb, H(1, 1), TC_H_ROOT, SHAPER_POD, "egress", "all", s->egress_bps);
	}
	if (shaping_inet_egress(s)) {
		c = put(c, SHAPER_INET_IFB, H(1, s->pod_class), H(1, s->ns_class), SHAPER_POD, "egress", "internet",
			ceil.pod_inet);
		c = put(c, SHAPER_INET_IFB, H(1, s->ns_class), H(1, 1), SHAPER_NAMESPACE, "egress",
			"internet", ceil.ns);
		c = put(c, SHAPER_INET_IFB, H(1, 1), TC_H_ROOT, SHAPER_NODE, "egress", "internet", ceil.node);
	}
	return (int)(c - ret);
}

static bool class_taken(const struct shaper_class_holder *others, size_t n, uint16_t id,
			bool ns_class, const char *ns)
{
	for (size_t i = 0; i < n; i++) {
		if (ns_class && others[i].ns_class == id &&
		    strcmp(others[i].k8s_namespace, ns) != 0)
			return true;
		if (!ns_class && others[i].pod_class == id)
			return true;
	}
	return false;
}

/* The first id of [min, max] not taken, probing from `start`. 0 when all are. */
static uint16_t probe(const struct shaper_class_holder *others, size_t n, uint32_t min,
		      uint32_t max, uint32_t start, bool ns_class, const char *ns)
{
	uint32_t span = max - min + 1;

	for (uint32_t k = 0; k < span; k++) {
		uint16_t id = (uint16_t)(min + (start + k) % span);

		if (!class_taken(others, n, id, ns_class, ns))
			return id;
	}
	return 0;
}

int shaper_classes_assign(struct shaping *s, const char *k8s_namespace, uint32_t ip,
			  const struct shaper_class_holder *others, size_t n)
{
	if (!shaping_inet_egress(s)) {
		s->ns_class = s->pod_class = 0;
		return 0;
	}
	/* The namespace's class: shared with its other pods, else a free one near its hash. */
	for (size_t i = 0; i < n && !s->ns_class; i++)
		if (others[i].ns_class && strcmp(others[i].k8s_namespace, k8s_namespace) == 0)
			s->ns_class = others[i].ns_class;
	if (!s->ns_class) {
		uint32_t h = (uint32_t)(hash_fnv1a64(k8s_namespace, strlen(k8s_namespace),
						     FNV1A64_INIT) %
					(SHAPER_NS_CLASS_MAX - SHAPER_NS_CLASS_MIN + 1));

		s->ns_class = probe(others, n, SHAPER_NS_CLASS_MIN, SHAPER_NS_CLASS_MAX, h, true,
				    k8s_namespace);
	}
	/* The pod's: from its address, so it is stable, probing on a (rare) clash. */
	if (!s->pod_class)
		s->pod_class = probe(others, n, SHAPER_POD_CLASS_BASE, SHAPER_POD_CLASS_MAX,
				     ip % (SHAPER_POD_CLASS_MAX - SHAPER_POD_CLASS_BASE + 1), false,
				     NULL);
	return s->ns_class && s->pod_class ? 0 : -ENOSPC;
}
