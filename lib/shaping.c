// SPDX-License-Identifier: Apache-2.0
/* A pod's shaping record as JSON (lib/shaping.h). */
#include <errno.h>
#include <stddef.h>

#include "lib/jsonx.h"
#include "lib/shaping.h"
#include "lib/util.h"

/* The record's keys, in the order written; `view`: shown by the status view too. */
static const struct {
	const char *key;
	size_t off;
	bool view;
} shaping_keys[] = {
	{ "ingressRate", offsetof(struct shaping, ingress_bps), true },
	{ "ingressBurst", offsetof(struct shaping, ingress_burst), false },
	{ "egressRate", offsetof(struct shaping, egress_bps), true },
	{ "egressBurst", offsetof(struct shaping, egress_burst), false },
	{ "annotationInternetEgress", offsetof(struct shaping, annot_inet_egress), false },
	{ "annotationInternetIngress", offsetof(struct shaping, annot_inet_ingress), false },
	{ "internetIngress", offsetof(struct shaping, inet_ingress_bps), true },
	{ "internetEgress", offsetof(struct shaping, inet_egress_bps), true },
	{ "namespaceInternetEgress", offsetof(struct shaping, ns_egress_bps), true },
	{ "nodeInternetEgress", offsetof(struct shaping, node_egress_bps), true },
	{ "namespaceInternetIngress", offsetof(struct shaping, ns_ingress_bps), true },
	{ "nodeInternetIngress", offsetof(struct shaping, node_ingress_bps), true },
	{ "budgetFallback", offsetof(struct shaping, budget_fallback_bps), true },
	{ "budgetIngressFallback", offsetof(struct shaping, budget_in_fallback_bps), true },
};

static uint64_t key_value(const struct shaping *s, size_t i)
{
	return *(const uint64_t *)((const char *)s + shaping_keys[i].off);
}

json_object *shaping_to_json(const struct shaping *s)
{
	json_object *o = json_object_new_object();

	for (size_t i = 0; i < ARRAY_SIZE(shaping_keys); i++) {
		uint64_t v = key_value(s, i);

		if (v)
			jx_add(o, shaping_keys[i].key, json_object_new_int64((int64_t)v));
	}
	if (s->pod_class) {
		jx_add(o, "namespaceClass", json_object_new_int(s->ns_class));
		jx_add(o, "podClass", json_object_new_int(s->pod_class));
	}
	if (s->inet_in_mark)
		jx_add(o, "internetIngressMark", json_object_new_int64(s->inet_in_mark));
	return o;
}

int shaping_from_json(json_object *o, const char *where, struct shaping *s, struct tg_err *e)
{
	int64_t v;

	for (size_t i = 0; i < ARRAY_SIZE(shaping_keys); i++) {
		v = 0;
		if (jx_int(o, where, shaping_keys[i].key, 0, INT64_MAX, &v, e) < 0)
			return -EBADMSG;
		*(uint64_t *)((char *)s + shaping_keys[i].off) = (uint64_t)v;
	}
	v = 0;
	if (jx_int(o, where, "namespaceClass", 0, 0xffff, &v, e) < 0)
		return -EBADMSG;
	s->ns_class = (uint16_t)v;
	v = 0;
	if (jx_int(o, where, "podClass", 0, 0xffff, &v, e) < 0)
		return -EBADMSG;
	s->pod_class = (uint16_t)v;
	v = 0;
	if (jx_int(o, where, "internetIngressMark", 0, UINT32_MAX, &v, e) < 0)
		return -EBADMSG;
	s->inet_in_mark = (uint32_t)v;
	return 0;
}

json_object *shaping_view_json(const struct shaping *s)
{
	json_object *o = json_object_new_object();
	struct {
		const char *from, *annot;
		struct shaping_source src;
	} g[] = {
		{ "internetIngressFrom", "internetIngressAnnotation",
		  shaping_inet_ingress_source(s) },
		{ "internetEgressFrom", "internetEgressAnnotation", shaping_inet_egress_source(s) },
	};

	for (size_t i = 0; i < ARRAY_SIZE(shaping_keys); i++)
		if (shaping_keys[i].view)
			jx_add(o, shaping_keys[i].key,
			       json_object_new_int64((int64_t)key_value(s, i)));
	/* Which value set each internet cap: an annotation above the config's is ignored. */
	for (size_t i = 0; i < ARRAY_SIZE(g); i++) {
		jx_add(o, g[i].from,
		       json_object_new_string(g[i].src.annotation ? "annotation" : "config"));
		jx_add(o, g[i].annot, json_object_new_int64((int64_t)g[i].src.annot_bps));
	}
	return o;
}
