// SPDX-License-Identifier: Apache-2.0
/*
 * Rates (lib/rate.c), the shaping keys of the config and runtimeConfig, and
 * how a pod's caps are resolved (node/shaping.c), annotations that only lower
 * them: no kernel needed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cni/internal.h"
#include "node/internal.h"
#include "shaper/internal.h"
#include "shaper/shaper.h"
#include "lib/rate.h"
#include "tests/unit/helpers.h"

static void t_rate_valid(void **state)
{
	static const struct {
		const char *in;
		uint64_t bps;
	} ok[] = {
		{ "500M", 500000000ULL },
		{ "1.5G", 1500000000ULL },
		{ "100Mi", 104857600ULL },
		{ "10k", 10000ULL },
		{ "2e9", 2000000000ULL },
		{ "1000", 1000ULL },
		{ "32G", 32000000000ULL },
		{ "1.25k", 1250ULL },
		{ "+5M", 5000000ULL },
		/* trailing zeros past 12 digits (the product used to wrap around 64 bits) */
		{ "1.50000000000G", 1500000000ULL },
		{ "1.5000000000000000000000000G", 1500000000ULL },
		{ "0.000000001e18", 1000000000ULL },
		{ "2.5e3", 2500ULL },
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		uint64_t v = 0;

		if (rate_parse(ok[i].in, &v) != 0 || v != ok[i].bps)
			fail_msg("rate_parse(\"%s\") = %llu, want %llu", ok[i].in,
				 (unsigned long long)v, (unsigned long long)ok[i].bps);
	}
}

static void t_rate_invalid(void **state)
{
	static const char *const bad[] = {
		"", "-5", "0", "10Mbps", "1m", "abc", "1.5", "5 M", "M", "1e", "1e99", "33G",
		"99999999999999999999", "100", "0.5k", "1..5M",
		/* 1.44e17 bit/s, once accepted as 11.9 Gbit/s (a 64-bit wrap) */
		"0.1441152e18",
		/* sub-bit digits beyond those kept exactly */
		"1.00000000000000000000001G"
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		uint64_t v = 0;

		if (rate_parse(bad[i], &v) == 0)
			fail_msg("rate_parse(\"%s\") accepted as %llu", bad[i],
				 (unsigned long long)v);
	}
}

static void t_rate_format(void **state)
{
	char buf[32];

	(void)state;
	assert_string_equal(rate_format(100000000ULL, buf, sizeof(buf)), "100M");
	assert_string_equal(rate_format(1500000000ULL, buf, sizeof(buf)), "1.5G");
	assert_string_equal(rate_format(64000ULL, buf, sizeof(buf)), "64k");
	assert_string_equal(rate_format(1234ULL, buf, sizeof(buf)), "1234");
}

#define BASE "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"ipam\":{\"addresses\":[\"10.1.0.1\"]}"

static int parse(const char *json, struct node_config *cfg, struct tg_err *e)
{
	memset(e, 0, sizeof(*e));
	return cni_config_read(json, strlen(json), CNI_CMD_ADD, cfg, e);
}

static void t_shaping_parsed(void **state)
{
	const char *json = BASE ",\"shaping\":{\"internetEgress\":{\"node\":\"10G\","
				"\"namespaceDefault\":\"2G\",\"podDefault\":1000000000,"
				"\"namespaces\":{\"datasets\":\"5G\"}},"
				"\"internetIngress\":{\"node\":\"20G\",\"namespaceDefault\":\"4G\","
				"\"podDefault\":\"500M\",\"namespaces\":{\"datasets\":\"2G\"}},"
				"\"queueLatencyMs\":15}}";
	struct node_config cfg;
	struct tg_err e;
	struct shaping s;

	(void)state;
	assert_int_equal(parse(json, &cfg, &e), 0);
	assert_int_equal(cfg.shaping.node_egress, 10000000000ULL);
	assert_int_equal(cfg.shaping.ns_egress_default, 2000000000ULL);
	assert_int_equal(cfg.shaping.pod_egress_default, 1000000000ULL);
	assert_int_equal(cfg.shaping.pod_ingress_default, 500000000ULL);
	assert_int_equal(cfg.shaping.ns_ingress_default, 4000000000ULL);
	assert_int_equal(cfg.shaping.node_ingress, 20000000000ULL);
	assert_int_equal(cfg.shaping.queue_ms, 15);
	/* The namespace override wins over the default; other namespaces get the default. */
	node_shaping_request(&cfg, "datasets", &s);
	assert_int_equal(s.ns_egress_bps, 5000000000ULL);
	/* Downloads nest like uploads: the namespace's entry caps its pods together. */
	assert_int_equal(s.ns_ingress_bps, 2000000000ULL);
	assert_int_equal(s.inet_ingress_bps, 500000000ULL);
	assert_int_equal(s.node_ingress_bps, 20000000000ULL);
	assert_int_equal(s.inet_in_mark, 0x10000);
	assert_int_equal(s.inet_egress_bps, 1000000000ULL);
	assert_int_equal(s.node_egress_bps, 10000000000ULL);
	node_shaping_request(&cfg, "research", &s);
	assert_int_equal(s.ns_egress_bps, 2000000000ULL);
	assert_int_equal(s.ns_ingress_bps, 4000000000ULL);
	assert_int_equal(s.inet_ingress_bps, 500000000ULL);
	node_config_free(&cfg);
}

static void t_bandwidth_any_case(void **state)
{
	static const char *const spellings[] = {
		BASE
		",\"runtimeConfig\":{\"bandwidth\":{\"ingressRate\":100000000,"
		"\"ingressBurst\":200000,\"egressRate\":50000000,\"egressBurst\":4294967295}}}",
		BASE
		",\"runtimeConfig\":{\"Bandwidth\":{\"IngressRate\":100000000,"
		"\"IngressBurst\":200000,\"EgressRate\":50000000,\"EgressBurst\":4294967295}}}",
	};
	(void)state;
	for (size_t i = 0; i < 2; i++) {
		struct node_config cfg;
		struct tg_err e;

		assert_int_equal(parse(spellings[i], &cfg, &e), 0);
		assert_int_equal(cfg.request.ingress_bps, 100000000ULL);
		assert_int_equal(cfg.request.ingress_burst, 200000ULL);
		assert_int_equal(cfg.request.egress_bps, 50000000ULL);
		/* containerd's 2^32-1 bits means "no burst given": derived from the rate */
		assert_int_equal(cfg.request.egress_burst, 0);
		node_config_free(&cfg);
	}
}

/* containerd's go-cni sends every key; zeros mean "no limit" for that direction. */
static void t_bandwidth_zero_is_unset(void **state)
{
	const char *json = BASE
		",\"runtimeConfig\":{\"bandwidth\":{\"IngressRate\":0,"
		"\"IngressBurst\":0,\"EgressRate\":30000000,\"EgressBurst\":4294967295}}}";
	struct node_config cfg;
	struct tg_err e;

	(void)state;
	assert_int_equal(parse(json, &cfg, &e), 0);
	assert_int_equal(cfg.request.ingress_bps, 0);
	assert_int_equal(cfg.request.ingress_burst, 0);
	assert_int_equal(cfg.request.egress_bps, 30000000ULL);
	node_config_free(&cfg);
}

static void t_annotations(void **state)
{
	const char *json = BASE
		",\"shaping\":{\"internetEgress\":{\"podDefault\":\"1G\"}},"
		"\"runtimeConfig\":{\"io.kubernetes.cri.pod-annotations\":{"
		"\"tollgate.io/internet-egress-bandwidth\":\"50M\","
		"\"tollgate.io/internet-ingress-bandwidth\":\"20M\",\"other\":\"x\"}}}";
	struct node_config cfg;
	struct tg_err e;
	struct shaping s;

	(void)state;
	assert_int_equal(parse(json, &cfg, &e), 0);
	node_shaping_request(&cfg, "research", &s);
	assert_int_equal(s.inet_egress_bps, 50000000ULL);
	assert_int_equal(s.inet_ingress_bps, 20000000ULL);
	node_config_free(&cfg);
}

/* A config with this shaping block and these pod annotations ("" : none), resolved for `ns`. */
static void resolve_with(const char *shaping, const char *egress, const char *ingress,
			 const char *ns, struct shaping *ret)
{
	char json[1024], ann[256] = "";
	struct node_config cfg;
	struct tg_err e;

	if (*egress || *ingress)
		snprintf(
			ann, sizeof(ann),
			",\"runtimeConfig\":{\"io.kubernetes.cri.pod-annotations\":{%s%s%s%s%s%s%s}}",
			*egress ? "\"tollgate.io/internet-egress-bandwidth\":\"" : "", egress,
			*egress ? "\"" : "", *egress && *ingress ? "," : "",
			*ingress ? "\"tollgate.io/internet-ingress-bandwidth\":\"" : "", ingress,
			*ingress ? "\"" : "");
	snprintf(json, sizeof(json), BASE ",\"shaping\":%s%s}", shaping, ann);
	if (parse(json, &cfg, &e) != 0)
		fail_msg("config refused: %s (%s)", e.msg, json);
	node_shaping_request(&cfg, ns, ret);
	node_config_free(&cfg);
}

#define CAPS_5M                                                                     \
	"{\"internetEgress\":{\"podDefault\":\"5M\",\"namespaceDefault\":\"20M\"}," \
	"\"internetIngress\":{\"podDefault\":\"8M\",\"namespaces\":{\"datasets\":\"5M\"}}}"

/* An annotation lowers a cap, never raises it; above the cap it is ignored. */
static void t_annotations_only_lower(void **state)
{
	struct shaping s;
	struct shaping_source eg, in;

	(void)state;
	/* Above the caps: the pod is shaped as without the annotation. */
	resolve_with(CAPS_5M, "32G", "32G", "datasets", &s);
	assert_int_equal(s.inet_egress_bps, 5000000ULL);
	assert_int_equal(s.inet_ingress_bps, 8000000ULL); /* its own; the namespace's 5M above */
	assert_int_equal(s.ns_ingress_bps, 5000000ULL);
	assert_int_equal(s.annot_inet_egress, 32000000000ULL);
	eg = shaping_inet_egress_source(&s);
	in = shaping_inet_ingress_source(&s);
	assert_false(eg.annotation);
	assert_true(eg.ignored);
	assert_int_equal(eg.cap_bps, 5000000ULL);
	assert_int_equal(eg.annot_bps, 32000000000ULL);
	assert_false(in.annotation);
	assert_true(in.ignored);
	assert_int_equal(in.cap_bps, 5000000ULL);

	/* Below: the annotation is the cap. */
	resolve_with(CAPS_5M, "2M", "2M", "datasets", &s);
	assert_int_equal(s.inet_egress_bps, 2000000ULL);
	assert_int_equal(s.inet_ingress_bps, 2000000ULL);
	eg = shaping_inet_egress_source(&s);
	in = shaping_inet_ingress_source(&s);
	assert_true(eg.annotation);
	assert_false(eg.ignored);
	assert_int_equal(eg.cap_bps, 2000000ULL);
	assert_true(in.annotation);
	assert_int_equal(in.cap_bps, 2000000ULL);

	/* Equal to the cap: the annotation applies (the same cap). */
	resolve_with(CAPS_5M, "5M", "5M", "datasets", &s);
	assert_int_equal(s.inet_egress_bps, 5000000ULL);
	assert_true(shaping_inet_egress_source(&s).annotation);
	assert_true(shaping_inet_ingress_source(&s).annotation);

	/* No annotation: the config; podDefault under the namespace's internetIngress entry. */
	resolve_with(CAPS_5M, "", "", "datasets", &s);
	assert_int_equal(s.inet_egress_bps, 5000000ULL);
	assert_int_equal(s.inet_ingress_bps, 8000000ULL);
	assert_int_equal(shaping_inet_ingress_source(&s).cap_bps, 5000000ULL);
	eg = shaping_inet_egress_source(&s);
	assert_false(eg.annotation);
	assert_false(eg.ignored);
	assert_int_equal(eg.annot_bps, 0);
	resolve_with(CAPS_5M, "", "", "research", &s);
	assert_int_equal(s.inet_ingress_bps, 8000000ULL);
	assert_int_equal(s.ns_egress_bps, 20000000ULL);

	/* The namespace's ingress entry (5M) bounds, not podDefault (8M). */
	resolve_with(CAPS_5M, "", "6M", "datasets", &s);
	assert_int_equal(s.inet_ingress_bps, 8000000ULL);
	assert_true(shaping_inet_ingress_source(&s).ignored);
	resolve_with(CAPS_5M, "", "6M", "research", &s);
	assert_int_equal(s.inet_ingress_bps, 6000000ULL);
	assert_true(shaping_inet_ingress_source(&s).annotation);
}

/* Egress: the pod's cap in effect is the smallest of its own, its namespace's and the node's. */
static void t_annotations_egress_bounds(void **state)
{
	struct shaping s;
	struct shaping_source eg;

	(void)state;
	/* No pod cap, a 5M namespace: 32G is above what the pod can get, 3M is below. */
	resolve_with("{\"internetEgress\":{\"namespaceDefault\":\"5M\"}}", "32G", "", "a", &s);
	assert_int_equal(s.inet_egress_bps, 0);
	eg = shaping_inet_egress_source(&s);
	assert_true(eg.ignored);
	assert_int_equal(eg.cap_bps, 5000000ULL);
	resolve_with("{\"internetEgress\":{\"namespaceDefault\":\"5M\"}}", "3M", "", "a", &s);
	assert_int_equal(s.inet_egress_bps, 3000000ULL);
	assert_true(shaping_inet_egress_source(&s).annotation);
	/* A pod default above its namespace's cap: 7M would lower neither. */
	resolve_with("{\"internetEgress\":{\"podDefault\":\"10M\",\"namespaceDefault\":\"5M\"}}",
		     "7M", "", "a", &s);
	assert_int_equal(s.inet_egress_bps, 10000000ULL);
	eg = shaping_inet_egress_source(&s);
	assert_true(eg.ignored);
	assert_int_equal(eg.cap_bps, 5000000ULL);
	/* The node's cap too. */
	resolve_with("{\"internetEgress\":{\"node\":\"4M\"}}", "32G", "", "a", &s);
	assert_int_equal(s.inet_egress_bps, 0);
	assert_int_equal(shaping_inet_egress_source(&s).cap_bps, 4000000ULL);

	/* No internet cap configured in a direction: the annotation sets one. */
	resolve_with("{}", "32G", "50M", "a", &s);
	assert_int_equal(s.inet_egress_bps, 32000000000ULL);
	assert_int_equal(s.inet_ingress_bps, 50000000ULL);
	assert_true(shaping_inet_egress_source(&s).annotation);
	assert_true(shaping_inet_ingress_source(&s).annotation);
}

/* reshape resolves a recorded pod again: a cap an annotation raised comes back down. */
static void t_annotations_reshape(void **state)
{
	const char *json = BASE ",\"shaping\":" CAPS_5M "}";
	struct shaping s = {
		/* as an ADD recorded it before annotations were bounded */
		.annot_inet_egress = 32000000000ULL,
		.annot_inet_ingress = 32000000000ULL,
		.inet_egress_bps = 32000000000ULL,
		.inet_ingress_bps = 32000000000ULL,
		.ns_egress_bps = 20000000ULL,
		.ns_class = 3,
		.pod_class = 0x800,
	};
	struct node_config cfg;
	struct tg_err e;

	(void)state;
	/* The record says what the kernel was given: the annotation's 32G into the pod. */
	assert_true(shaping_inet_ingress_source(&s).annotation);
	assert_int_equal(shaping_inet_ingress_source(&s).cap_bps, 32000000000ULL);
	assert_int_equal(parse(json, &cfg, &e), 0);
	node_shaping_resolve(&cfg, "datasets", &s);
	node_config_free(&cfg);
	assert_int_equal(s.inet_egress_bps, 5000000ULL);
	assert_int_equal(s.inet_ingress_bps, 8000000ULL);
	assert_int_equal(s.ns_ingress_bps, 5000000ULL);
	assert_int_equal(s.annot_inet_egress, 32000000000ULL);
	assert_int_equal(s.pod_class, 0x800);
	assert_true(shaping_inet_egress_source(&s).ignored);
	assert_true(shaping_inet_ingress_source(&s).ignored);
}

static void t_bad_inputs(void **state)
{
	static const struct {
		const char *json, *names;
	} bad[] = {
		{ BASE ",\"shaping\":{\"internetEgress\":{\"node\":\"-1G\"}}}",
		  "internetEgress.node" },
		{ BASE ",\"shaping\":{\"internetEgress\":{\"podDefault\":0}}}", "podDefault" },
		{ BASE ",\"shaping\":{\"internetEgress\":{\"namespaceDefault\":\"10Mbps\"}}}",
		  "namespaceDefault" },
		{ BASE ",\"shaping\":{\"internetEgress\":{\"namespaces\":{\"a\":\"fast\"}}}}",
		  "namespaces" },
		{ BASE ",\"shaping\":{\"internetIngress\":{\"podDefault\":\"999999999999G\"}}}",
		  "internetIngress.podDefault" },
		{ BASE ",\"shaping\":{\"internetIngress\":{\"podDefault\":true}}}", "podDefault" },
		{ BASE ",\"shaping\":{\"queueLatencyMs\":0}}", "queueLatencyMs" },
		{ BASE ",\"shaping\":[]}", "shaping" },
		{ BASE ",\"runtimeConfig\":{\"bandwidth\":{\"ingressBurst\":1000}}}",
		  "ingressRate" },
		{ BASE ",\"runtimeConfig\":{\"bandwidth\":{\"egressRate\":-5}}}", "egressRate" },
		{ BASE ",\"runtimeConfig\":{\"bandwidth\":{\"egressRate\":\"abc\"}}}",
		  "egressRate" },
		{ BASE ",\"runtimeConfig\":{\"bandwidth\":{\"ingressRate\":1000000,"
		       "\"ingressBurst\":9999999999}}}",
		  "ingressBurst" },
		{ BASE
		  ",\"runtimeConfig\":{\"bandwidth\":{\"ingressRate\":1000000,\"ingressBurst\":-1}}}",
		  "ingressBurst" },
		{ BASE ",\"runtimeConfig\":{\"bandwidth\":7}}", "bandwidth" },
		{ BASE ",\"runtimeConfig\":{\"io.kubernetes.cri.pod-annotations\":{"
		       "\"tollgate.io/internet-egress-bandwidth\":\"fast\"}}}",
		  "internet-egress-bandwidth" },
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct node_config cfg;
		struct tg_err e;
		int r = parse(bad[i].json, &cfg, &e);

		if (r == 0 || e.code != CNI_ERR_CONFIG || !strstr(e.msg, bad[i].names))
			fail_msg("case %zu: r=%d code=%d msg=\"%s\" (want code 7 naming %s)", i, r,
				 e.code, e.msg, bad[i].names);
		node_config_free(&cfg);
	}
}

static void t_classes(void **state)
{
	struct ipam_state st;
	struct ipam_attachment a[3];

	(void)state;
	ipam_state_init(&st);
	memset(a, 0, sizeof(a));
	for (int i = 0; i < 3; i++) {
		a[i].ip = 0x0a010000u + (uint32_t)i;
		snprintf(a[i].container_id, sizeof(a[i].container_id), "c%d", i);
		snprintf(a[i].k8s_namespace, sizeof(a[i].k8s_namespace), "%s",
			 i < 2 ? "research" : "datasets");
		a[i].shaping.inet_egress_bps = 100000000ULL;
	}
	st.att = a;
	st.n_att = 3;
	for (int i = 0; i < 3; i++)
		assert_int_equal(node_shaping_classes(&st, &a[i]), 0);
	/* One class per namespace, one per pod, pods above the namespace range. */
	assert_int_equal(a[0].shaping.ns_class, a[1].shaping.ns_class);
	assert_int_not_equal(a[0].shaping.ns_class, a[2].shaping.ns_class);
	assert_int_not_equal(a[0].shaping.pod_class, a[1].shaping.pod_class);
	for (int i = 0; i < 3; i++) {
		assert_true(a[i].shaping.ns_class >= SHAPER_NS_CLASS_MIN &&
			    a[i].shaping.ns_class <= SHAPER_NS_CLASS_MAX);
		assert_true(a[i].shaping.pod_class >= SHAPER_POD_CLASS_BASE &&
			    a[i].shaping.pod_class < 0xffff);
	}
	/* No internet egress cap: no classes. */
	a[2].shaping.inet_egress_bps = 0;
	assert_int_equal(node_shaping_classes(&st, &a[2]), 0);
	assert_int_equal(a[2].shaping.pod_class, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_rate_valid),
		cmocka_unit_test(t_rate_invalid),
		cmocka_unit_test(t_rate_format),
		cmocka_unit_test(t_shaping_parsed),
		cmocka_unit_test(t_bandwidth_any_case),
		cmocka_unit_test(t_annotations),
		cmocka_unit_test(t_bad_inputs),
		cmocka_unit_test(t_classes),
		cmocka_unit_test(t_bandwidth_zero_is_unset),
		cmocka_unit_test(t_annotations_only_lower),
		cmocka_unit_test(t_annotations_egress_bounds),
		cmocka_unit_test(t_annotations_reshape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
