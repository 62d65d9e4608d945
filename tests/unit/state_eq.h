/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_STATE_EQ_H
#define TG_TEST_STATE_EQ_H

/*
 * Two stores' states compared member by member, each difference named: the
 * store's round trips (test_store.c) and its earlier formats read and
 * migrated (test_store_versions.c). Static inline: the header compiles on
 * its own and a file using part of it gets no warning.
 */
#include <net/if.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ipam/ipam.h"
#include "lib/ip4.h"
#include "lib/shaping.h"

/*
 * assert_state_equal compares every field of these structs. A field added to
 * one of them must be compared there too; until then these fail the build
 * (they mirror the fields compared; a field that fits in padding slips past).
 */
struct compared_shaping {
	uint64_t ingress_bps, ingress_burst, egress_bps, egress_burst;
	uint64_t annot_inet_egress, annot_inet_ingress;
	uint64_t inet_ingress_bps, inet_egress_bps, ns_egress_bps, node_egress_bps;
	uint64_t ns_ingress_bps, node_ingress_bps;
	uint64_t budget_fallback_bps, budget_in_fallback_bps;
	uint16_t ns_class, pod_class;
	uint32_t inet_in_mark;
};
struct compared_attachment {
	char container_id[IPAM_CONTAINER_ID_MAX + 1];
	char ifname[IFNAMSIZ];
	uint32_t ip;
	char netns[IPAM_NETNS_MAX + 1];
	char k8s_namespace[IPAM_K8S_NAMESPACE_MAX + 1];
	char pod[IPAM_K8S_POD_MAX + 1];
	char host_veth[IFNAMSIZ];
	int64_t created;
	struct compared_shaping shaping;
	struct hostports ports;
	bool reshape_pending;
};
struct compared_cooling {
	uint32_t ip;
	int64_t released_ms;
	int64_t released_wall_ms;
};
struct compared_state {
	int version;
	char boot_id[64];
	char source[16];
	int64_t last_sync_ms;
	uint32_t last_ip;
	uint32_t *pool;
	size_t n_pool;
	uint32_t *pending;
	size_t n_pending;
	uint32_t node_ip;
	struct cidr4 subnet;
	struct ipam_cooling *cooling;
	size_t n_cooling;
	struct ipam_attachment *att;
	size_t n_att;
};
_Static_assert(sizeof(struct shaping) == sizeof(struct compared_shaping),
	       "struct shaping changed: compare the new field in assert_state_equal");
_Static_assert(sizeof(struct ipam_attachment) == sizeof(struct compared_attachment),
	       "struct ipam_attachment changed: compare the new field in assert_state_equal");
_Static_assert(sizeof(struct ipam_state) == sizeof(struct compared_state),
	       "struct ipam_state changed: compare the new field in assert_state_equal");
_Static_assert(sizeof(struct ipam_cooling) == sizeof(struct compared_cooling),
	       "struct ipam_cooling changed: compare the new field in assert_state_equal");

#define assert_field_equal(x, y, what, i, field)                                                  \
	do {                                                                                      \
		if ((uint64_t)(x)->field != (uint64_t)(y)->field)                                 \
			fail_msg("%s %zu: " #field " %llu, expected %llu", (what), (i),           \
				 (unsigned long long)(y)->field, (unsigned long long)(x)->field); \
	} while (0)

/* The shaping of attachment i: y against the expected x. */
static inline void assert_shaping_equal(const struct shaping *x, const struct shaping *y, size_t i)
{
	assert_field_equal(x, y, "attachment", i, ingress_bps);
	assert_field_equal(x, y, "attachment", i, ingress_burst);
	assert_field_equal(x, y, "attachment", i, egress_bps);
	assert_field_equal(x, y, "attachment", i, egress_burst);
	assert_field_equal(x, y, "attachment", i, annot_inet_egress);
	assert_field_equal(x, y, "attachment", i, annot_inet_ingress);
	assert_field_equal(x, y, "attachment", i, inet_ingress_bps);
	assert_field_equal(x, y, "attachment", i, inet_egress_bps);
	assert_field_equal(x, y, "attachment", i, ns_egress_bps);
	assert_field_equal(x, y, "attachment", i, node_egress_bps);
	assert_field_equal(x, y, "attachment", i, budget_fallback_bps);
	assert_field_equal(x, y, "attachment", i, ns_ingress_bps);
	assert_field_equal(x, y, "attachment", i, node_ingress_bps);
	assert_field_equal(x, y, "attachment", i, budget_in_fallback_bps);
	assert_field_equal(x, y, "attachment", i, inet_in_mark);
	assert_field_equal(x, y, "attachment", i, ns_class);
	assert_field_equal(x, y, "attachment", i, pod_class);
}

static inline void assert_state_equal(const struct ipam_state *a, const struct ipam_state *b)
{
	assert_int_equal(a->version, b->version);
	assert_string_equal(a->boot_id, b->boot_id);
	assert_string_equal(a->source, b->source);
	assert_int_equal(a->last_sync_ms, b->last_sync_ms);
	assert_int_equal(a->last_ip, b->last_ip);
	assert_int_equal(a->n_pool, b->n_pool);
	if (a->n_pool)
		assert_memory_equal(a->pool, b->pool, a->n_pool * sizeof(*a->pool));
	assert_int_equal(a->n_pending, b->n_pending);
	if (a->n_pending)
		assert_memory_equal(a->pending, b->pending, a->n_pending * sizeof(*a->pending));
	assert_int_equal(a->node_ip, b->node_ip);
	assert_int_equal(a->subnet.net, b->subnet.net);
	assert_int_equal(a->subnet.prefix, b->subnet.prefix);
	assert_int_equal(a->n_cooling, b->n_cooling);
	for (size_t i = 0; i < a->n_cooling; i++) {
		assert_int_equal(a->cooling[i].ip, b->cooling[i].ip);
		assert_int_equal(a->cooling[i].released_ms, b->cooling[i].released_ms);
		assert_int_equal(a->cooling[i].released_wall_ms, b->cooling[i].released_wall_ms);
	}
	assert_int_equal(a->n_att, b->n_att);
	for (size_t i = 0; i < a->n_att; i++) {
		const struct ipam_attachment *x = &a->att[i], *y = &b->att[i];

		assert_string_equal(x->container_id, y->container_id);
		assert_string_equal(x->ifname, y->ifname);
		assert_int_equal(x->ip, y->ip);
		assert_string_equal(x->netns, y->netns);
		assert_string_equal(x->k8s_namespace, y->k8s_namespace);
		assert_string_equal(x->pod, y->pod);
		assert_string_equal(x->host_veth, y->host_veth);
		assert_int_equal(x->created, y->created);
		assert_shaping_equal(&x->shaping, &y->shaping, i);
		assert_int_equal(x->reshape_pending, y->reshape_pending);
		assert_int_equal(x->ports.n, y->ports.n);
		for (size_t k = 0; k < x->ports.n; k++)
			assert_true(hostport_equal(&x->ports.m[k], &y->ports.m[k]));
	}
}

#endif
