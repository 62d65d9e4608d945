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

#include "budget/budget.h"
#include "lib/cleanup.h"
#include "lib/util.h"
#include "shaper/internal.h"

uint32_t shaper_egress_classid(const struct shaping *s)
{
	return shaping_inet_egress(s) && s->pod_class ? TC_HANDLE(1, s->pod_class) : 0;
}

void shaper_ceilings(const struct shaping *s, struct shaper_ceilings *ret)
{
	ret->to_pod = s->ingress_bps ? s->ingress_bps : SHAPER_LINE_BPS;
	ret->to_pod_inet = shaping_min_cap(s->inet_ingress_bps, ret->to_pod);
	ret->node = s->node_egress_bps ? s->node_egress_bps : SHAPER_LINE_BPS;
	ret->ns = shaping_min_cap(s->ns_egress_bps, ret->node);
	ret->pod_inet = shaping_min_cap(s->inet_egress_bps, ret->ns);
	ret->node_in = s->node_ingress_bps ? s->node_ingress_bps : SHAPER_LINE_BPS;
	ret->ns_in = shaping_min_cap(s->ns_ingress_bps, ret->node_in);
	ret->pod_in = shaping_min_cap(s->inet_ingress_bps, ret->ns_in);
}

uint32_t shaper_ingress_classid(const struct shaping *s)
{
	return shaping_inet_ingress(s) && s->pod_class ? TC_HANDLE(1, s->pod_class) : 0;
}

void shaper_ifb_name(const char *host_veth, char ret[IFNAMSIZ])
{
	snprintf(ret, IFNAMSIZ, "ti%s", host_veth + (host_veth[0] && host_veth[1] ? 2 : 0));
}

const char *const shaper_level_what[3] = {
	[SHAPER_POD] = "the pod's",
	[SHAPER_NAMESPACE] = "its namespace's",
	[SHAPER_NODE] = "the node's",
};

/* Appends one step; `c` is the next free one. */
static struct shaper_step *add_step(struct shaper_step *c, enum shaper_obj obj, const char *dev,
				    uint32_t id, uint32_t parent)
{
	*c = (struct shaper_step){ .obj = obj, .id = id, .parent = parent };
	snprintf(c->dev, sizeof(c->dev), "%s", dev);
	return c;
}

static struct shaper_step *class_step(struct shaper_step *c, const char *dev, uint32_t id,
				      uint32_t parent, enum shaper_level level,
				      const char *direction, const char *traffic, uint64_t ceil_bps)
{
	add_step(c, SHAPER_OBJ_CLASS, dev, id, parent);
	c->level = level;
	c->direction = direction;
	c->traffic = traffic;
	c->ceil_bps = ceil_bps;
	c->listed = true;
	return c;
}

/* The leaf queue of the class just described. */
static struct shaper_step *queue_step(struct shaper_step *c, const struct shaper_step *of)
{
	add_step(c, SHAPER_OBJ_QUEUE, of->dev, of->id, 0);
	c->ceil_bps = of->ceil_bps;
	return c;
}

/*
 * Downloads: the namespace's class and the pod's on tollgate-inetdl (the
 * same minors as on tollgate-inet), then the veth's steering, which sends
 * them there only once nftables marks the pod's packets: the classes are in
 * place before the first packet comes.
 */
static struct shaper_step *inet_ingress_steps(struct shaper_step *c, const char *host_veth,
					      const struct shaping *s,
					      const struct shaper_ceilings *ceil)
{
	struct shaper_step *k;

	k = class_step(c++, SHAPER_INET_IN_IFB, TC_HANDLE(1, s->ns_class), TC_HANDLE(1, 1),
		       SHAPER_NAMESPACE, "ingress", "internet", ceil->ns_in);
	if (s->budget_in_fallback_bps) {
		k->budgeted = true;
		k->start_bps = shaping_min_cap(BUDGET_JOIN_RATE * 8, ceil->ns_in);
	}
	k = class_step(c++, SHAPER_INET_IN_IFB, TC_HANDLE(1, s->pod_class),
		       TC_HANDLE(1, s->ns_class), SHAPER_POD, "ingress", "internet", ceil->pod_in);
	k = queue_step(c++, k);
	k->point = SHAPER_AT_INET_IN;
	if (s->budget_in_fallback_bps) {
		/* As for uploads (see there): a packet's own rate, a queue sized for grants. */
		k[-1].rate_bps = shaping_min_cap(SHAPER_BUDGET_POD_RATE_BPS, ceil->pod_in);
		k[-1].rate_burst_bits = 1;
		k->ceil_bps = shaping_min_cap(SHAPER_BUDGET_QUEUE_X * s->budget_in_fallback_bps,
					      ceil->pod_in);
	}
	k = add_step(c++, SHAPER_OBJ_STEER, host_veth, 0, 0);
	snprintf(k->to, sizeof(k->to), "%s", SHAPER_INET_IN_IFB);
	k->mark = s->inet_in_mark;
	k->point = SHAPER_AT_STEER;
	k = class_step(c++, SHAPER_INET_IN_IFB, TC_HANDLE(1, 1), TC_H_ROOT, SHAPER_NODE, "ingress",
		       "internet", ceil->node_in);
	k->obj = SHAPER_OBJ_DECLARED;
	return c;
}

int shaper_pod_steps(const char *host_veth, const struct shaping *s,
		     struct shaper_step ret[SHAPER_POD_STEPS_MAX])
{
	struct shaper_step *c = ret, *k;
	struct shaper_ceilings ceil;

	shaper_ceilings(s, &ceil);
	if (shaping_pod_ingress(s)) {
		/* Internal traffic is only classified (1:3) when a whole-pod limit applies. */
		add_step(c++, SHAPER_OBJ_ROOT, host_veth, s->ingress_bps ? 3 : 0, TC_H_ROOT);
		/* 1:1 is made for every shaped ingress (1:2 hangs under it), listed with a limit. */
		k = class_step(c++, host_veth, TC_HANDLE(1, 1), TC_H_ROOT, SHAPER_POD, "ingress",
			       "all", ceil.to_pod);
		k->rate_bps = ceil.to_pod;
		k->burst_bits = s->ingress_burst;
		k->listed = s->ingress_bps != 0;
		if (!shaping_inet_ingress(s) && s->inet_ingress_bps) {
			/* A record of the older layout: downloads capped on the veth itself. */
			k = class_step(c++, host_veth, SHAPER_INET_INGRESS_CLASS, TC_HANDLE(1, 1),
				       SHAPER_POD, "ingress", "internet", ceil.to_pod_inet);
			k = queue_step(c++, k);
		}
		if (s->ingress_bps) {
			k = class_step(c++, host_veth, TC_HANDLE(1, 3), TC_HANDLE(1, 1), SHAPER_POD,
				       "ingress", "internal", ceil.to_pod);
			k = queue_step(c++, k);
		}
		k->point = SHAPER_AT_INGRESS;
	}
	if (s->egress_bps) {
		char ifb[IFNAMSIZ];

		shaper_ifb_name(host_veth, ifb);
		add_step(c++, SHAPER_OBJ_IFB, ifb, 0, 0)->point = SHAPER_AT_IFB;
		add_step(c++, SHAPER_OBJ_ROOT, ifb, 1, TC_H_ROOT);
		k = class_step(c++, ifb, TC_HANDLE(1, 1), TC_H_ROOT, SHAPER_POD, "egress", "all",
			       s->egress_bps);
		k->rate_bps = s->egress_bps;
		k->burst_bits = s->egress_burst;
		queue_step(c++, k);
		k = add_step(c++, SHAPER_OBJ_REDIRECT, host_veth, 0, 0);
		snprintf(k->to, sizeof(k->to), "%s", ifb);
		k->point = SHAPER_AT_EGRESS;
	}
	if (shaping_inet_egress(s)) {
		/*
		 * Under the node's declared root and class 1:1: the namespace's class
		 * (made by its first pod, kept while a pod may attach under it), then
		 * the pod's. Nothing node-wide is made here.
		 */
		k = class_step(c++, SHAPER_INET_IFB, TC_HANDLE(1, s->ns_class), TC_HANDLE(1, 1),
			       SHAPER_NAMESPACE, "egress", "internet", ceil.ns);
		k->point = SHAPER_AT_NS_CLASS;
		if (s->budget_fallback_bps) {
			/*
			 * A namespace arriving on the node sends at the join rate
			 * until the allocator answers for it (the agent then
			 * moves the ceil): never more than can be proven free.
			 */
			k->budgeted = true;
			k->start_bps = shaping_min_cap(BUDGET_JOIN_RATE * 8, ceil.ns);
		}
		k = class_step(c++, SHAPER_INET_IFB, TC_HANDLE(1, s->pod_class),
			       TC_HANDLE(1, s->ns_class), SHAPER_POD, "egress", "internet",
			       ceil.pod_inet);
		k = queue_step(c++, k);
		k->point = SHAPER_AT_INET;
		if (s->budget_fallback_bps) {
			k[-1].rate_bps = shaping_min_cap(SHAPER_BUDGET_POD_RATE_BPS, ceil.pod_inet);
			k[-1].rate_burst_bits = 1; /* a packet (internal.h) */
			/*
			 * Its queue is sized for what a grant lets through, not the
			 * pod's own cap: a grant far below it would turn a queue of
			 * the cap's queueLatencyMs into seconds of delay.
			 */
			k->ceil_bps = shaping_min_cap(
				SHAPER_BUDGET_QUEUE_X * s->budget_fallback_bps, ceil.pod_inet);
		}
		k = class_step(c++, SHAPER_INET_IFB, TC_HANDLE(1, 1), TC_H_ROOT, SHAPER_NODE,
			       "egress", "internet", ceil.node);
		k->obj = SHAPER_OBJ_DECLARED;
	}
	if (shaping_inet_ingress(s))
		c = inet_ingress_steps(c, host_veth, s, &ceil);
	return (int)(c - ret);
}

/* The listed classes, the pod's own first, then its namespace's and the node's. */
int shaper_pod_classes(const char *host_veth, const struct shaping *s,
		       struct shaper_class ret[SHAPER_POD_CLASSES_MAX])
{
	static const enum shaper_level order[] = { SHAPER_POD, SHAPER_NAMESPACE, SHAPER_NODE };
	struct shaper_step steps[SHAPER_POD_STEPS_MAX];
	int n = shaper_pod_steps(host_veth, s, steps), k = 0;

	for (size_t l = 0; l < ARRAY_SIZE(order); l++)
		for (int i = 0; i < n && k < SHAPER_POD_CLASSES_MAX; i++) {
			const struct shaper_step *c = &steps[i];

			if (!c->listed || c->level != order[l])
				continue;
			ret[k] = (struct shaper_class){ .classid = c->id,
							.parent = c->parent,
							.level = c->level,
							.budgeted = c->budgeted,
							.direction = c->direction,
							.traffic = c->traffic,
							.ceil_bps = c->ceil_bps };
			snprintf(ret[k].dev, sizeof(ret[k].dev), "%s", c->dev);
			k++;
		}
	return k;
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
static uint16_t free_id(const struct shaper_class_holder *others, size_t n, uint32_t min,
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
	if (!shaping_inet_egress(s) && !shaping_inet_ingress(s)) {
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

		s->ns_class = free_id(others, n, SHAPER_NS_CLASS_MIN, SHAPER_NS_CLASS_MAX, h, true,
				      k8s_namespace);
	}
	/* The pod's: from its address, so it is stable, probing on a (rare) clash. */
	if (!s->pod_class)
		s->pod_class = free_id(others, n, SHAPER_POD_CLASS_BASE, SHAPER_POD_CLASS_MAX,
				       ip % (SHAPER_POD_CLASS_MAX - SHAPER_POD_CLASS_BASE + 1),
				       false, NULL);
	return s->ns_class && s->pod_class ? 0 : -ENOSPC;
}
