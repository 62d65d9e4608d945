// SPDX-License-Identifier: Apache-2.0
/* The network configuration: see node/config.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/config.h"
#include "node/config_internal.h"
#include "ipam/ipam.h"
#include "ipam/pool.h"
#include "lib/cleanup.h"
#include "lib/cnispec.h"
#include "lib/jsonx.h"
#include "lib/rate.h"
#include "lib/util.h"

static int copy_path(json_object *o, const char *key, char *dst, size_t size, const char *dflt,
		     struct tg_err *e)
{
	const char *v = dflt;
	int r = jx_string(o, "", key, &v, e);

	if (r < 0)
		return r;
	if (!v)
		return 0;
	if (v[0] != '/')
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s \"%.128s\" must be an absolute path",
			       key, v);
	if (strlen(v) >= size - 64 || strstr(v, "/../") ||
	    (strlen(v) >= 3 && strcmp(v + strlen(v) - 3, "/..") == 0))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s \"%.128s\" is not a usable path", key, v);
	snprintf(dst, size, "%s", v);
	return 0;
}

static int cmp_cidr(const void *a, const void *b)
{
	const struct cidr4 *x = a, *y = b;

	return x->net < y->net ? -1 : x->net > y->net;
}

static int parse_internal(json_object *root, struct node_config *cfg, struct tg_err *e)
{
	json_object *arr = NULL;
	size_t i, n;
	int r;

	r = jx_string_array(root, "", "internalCIDRs", &arr, e);
	if (r < 0)
		return r;
	if (r == 0) {
		cfg->internal[0] = (struct cidr4){ .net = 0x0a000000, .prefix = 8 };
		cfg->n_internal = 1;
		return 0;
	}
	n = json_object_array_length(arr);
	if (n == 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "internalCIDRs is empty: list at least one CIDR (default 10.0.0.0/8)");
	if (n > ACCT_MAX_INTERNAL)
		return tg_fail(e, CNI_ERR_CONFIG, -E2BIG, "internalCIDRs lists more than %d CIDRs",
			       ACCT_MAX_INTERNAL);
	for (i = 0; i < n; i++) {
		const char *s = json_object_get_string(json_object_array_get_idx(arr, i));

		if (cidr4_parse(s, &cfg->internal[i]) < 0)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "internalCIDRs[%zu] \"%.64s\" is not an IPv4 CIDR (a.b.c.d/len, no host bits)",
				       i, s);
	}
	qsort(cfg->internal, n, sizeof(cfg->internal[0]), cmp_cidr);
	for (i = 1; i < n; i++) {
		if (cfg->internal[i].net <= cidr4_last(&cfg->internal[i - 1])) {
			char a[CIDR4_STRLEN], b[CIDR4_STRLEN];

			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "internalCIDRs: %s overlaps %s",
				       cidr4_format(&cfg->internal[i], a),
				       cidr4_format(&cfg->internal[i - 1], b));
		}
	}
	cfg->n_internal = n;
	return 0;
}

/* A static pool holds only addresses a pod can use (lib/ip4.h ip4_unusable_why). */
static int pool_check_usable(const uint32_t *pool, size_t n, struct tg_err *e)
{
	char ip[IP4_STRLEN];

	for (size_t i = 0; i < n; i++) {
		const char *why = ip4_unusable_why(pool[i]);

		if (why)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "ipam.addresses holds %s, which no pod can use: %s; "
				       "list it under ipam.exclude or drop it",
				       ip4_format(pool[i], ip), why);
	}
	return 0;
}

static int parse_ipam(json_object *root, struct node_config *cfg, struct tg_err *e)
{
	json_object *ipam = NULL, *addresses = NULL, *exclude = NULL;
	const char *source = NULL;
	int64_t cooldown = IPAM_DEFAULT_COOLDOWN_MS / 1000;
	int r;

	if ((r = jx_object(root, "", "ipam", &ipam, e)) < 0)
		return r;
	if (!ipam)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "ipam is missing");
	if (jx_string(ipam, "ipam", "source", &source, e) < 0 ||
	    jx_string(ipam, "ipam", "imdsURL", &cfg->imds_url, e) < 0 ||
	    jx_string_array(ipam, "ipam", "addresses", &addresses, e) < 0 ||
	    jx_string_array(ipam, "ipam", "exclude", &exclude, e) < 0 ||
	    jx_int(ipam, "ipam", "cooldownSeconds", 0, 86400, &cooldown, e) < 0)
		return -EINVAL;
	cfg->cooldown_ms = cooldown * 1000;
	cfg->exclude = exclude;
	if (!source)
		source = addresses ? "static" : "imds";
	if (strcmp(source, "static") == 0) {
		cfg->source = IPAM_SOURCE_STATIC;
		if (!addresses || json_object_array_length(addresses) == 0)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "ipam.addresses must list the node's addresses when ipam.source is \"static\"");
		r = ipam_pool_parse(addresses, exclude, "ipam", &cfg->pool, &cfg->n_pool, e);
		if (r == 0)
			r = pool_check_usable(cfg->pool, cfg->n_pool, e);
		if (r < 0)
			return r;
		if (cfg->n_pool == 0)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "ipam.addresses minus ipam.exclude leaves no address");
	} else if (strcmp(source, "imds") == 0) {
		cfg->source = IPAM_SOURCE_IMDS;
		/* exclude is applied by `tollgate-ipam sync`; check its syntax here all the same. */
		r = ipam_pool_parse(exclude, NULL, "ipam", &cfg->pool, &cfg->n_pool, e);
		free(cfg->pool);
		cfg->pool = NULL;
		cfg->n_pool = 0;
		if (r < 0) {
			/* The parser named it "ipam.addresses[i]": this list is ipam.exclude. */
			if (e) {
				char *at = strstr(e->msg, "ipam.addresses");

				if (at)
					memcpy(at, "ipam.exclude  ", 14);
			}
			return r;
		}
	} else {
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "ipam.source \"%.32s\" is not \"static\" or \"imds\"", source);
	}
	return 0;
}

static int parse_accounting(json_object *root, struct node_config *cfg, struct tg_err *e)
{
	json_object *acct = NULL, *mark;
	int r;

	cfg->acct_enabled = true;
	cfg->internet_mark = 0x10000;
	cfg->retain_seconds = 3600;
	if ((r = jx_object(root, "", "accounting", &acct, e)) <= 0)
		return r;
	if (jx_bool(acct, "accounting", "enabled", &cfg->acct_enabled, e) < 0 ||
	    jx_bool(acct, "accounting", "perPod", &cfg->acct_per_pod, e) < 0 ||
	    jx_int(acct, "accounting", "retainSeconds", 0, 30 * 86400, &cfg->retain_seconds, e) < 0)
		return -EINVAL;
	if (json_object_object_get_ex(acct, "internetMark", &mark) && mark) {
		unsigned long long v;
		char *end = NULL;

		if (json_object_is_type(mark, json_type_string)) {
			const char *s = json_object_get_string(mark);

			errno = 0;
			v = strtoull(s, &end, 0);
			if (errno || !*s || *end || v > UINT32_MAX)
				return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
					       "accounting.internetMark \"%.32s\" is not a 32-bit number",
					       s);
		} else if (json_object_is_type(mark, json_type_int)) {
			int64_t n = json_object_get_int64(mark);

			if (n < 0 || n > UINT32_MAX)
				return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
					       "accounting.internetMark is out of range");
			v = (unsigned long long)n;
		} else {
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "accounting.internetMark must be a string like \"0x10000\"");
		}
		if (v == 0)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "accounting.internetMark must not be 0");
		if (v & 0xc000)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "accounting.internetMark 0x%llx collides with kube-proxy's mark bits 0x4000/0x8000",
				       v);
		cfg->internet_mark = (uint32_t)v;
	}
	return 0;
}

/* A rate key of an object: absent is 0. */
static int get_rate(json_object *o, const char *where, const char *key, uint64_t *ret,
		    struct tg_err *e)
{
	json_object *v;
	char path[160];

	if (!json_object_object_get_ex(o, key, &v) || !v)
		return 0;
	snprintf(path, sizeof(path), "%s.%s", where, key);
	return rate_from_json(v, path, ret, e);
}

/* {"namespace": rate, ...}: every key a namespace name, every value a rate. */
static int check_rate_map(json_object *o, const char *where, struct tg_err *e)
{
	json_object_object_foreach(o, k, v) {
		char path[200];
		uint64_t bps;

		snprintf(path, sizeof(path), "%s[\"%.63s\"]", where, k);
		if (!*k || strlen(k) > 63)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s: not a namespace name", path);
		if (rate_from_json(v, path, &bps, e) < 0)
			return -EINVAL;
	}
	return 0;
}

static int parse_shaping(json_object *root, struct node_config *cfg, struct tg_err *e)
{
	json_object *sh = NULL, *eg = NULL, *in = NULL;
	int64_t q = 20;
	int r;

	cfg->shaping.queue_ms = 20;
	if ((r = jx_object(root, "", "shaping", &sh, e)) <= 0)
		return r;
	if (jx_object(sh, "shaping", "internetEgress", &eg, e) < 0 ||
	    jx_object(sh, "shaping", "internetIngress", &in, e) < 0 ||
	    jx_int(sh, "shaping", "queueLatencyMs", 1, 1000, &q, e) < 0)
		return -EINVAL;
	cfg->shaping.queue_ms = (uint32_t)q;
	if (eg) {
		if (get_rate(eg, "shaping.internetEgress", "node", &cfg->shaping.node_egress, e) < 0 ||
		    get_rate(eg, "shaping.internetEgress", "namespaceDefault",
			     &cfg->shaping.ns_egress_default, e) < 0 ||
		    get_rate(eg, "shaping.internetEgress", "podDefault",
			     &cfg->shaping.pod_egress_default, e) < 0 ||
		    jx_object(eg, "shaping.internetEgress", "namespaces", &cfg->shaping.ns_egress,
			      e) < 0)
			return -EINVAL;
		if (cfg->shaping.ns_egress &&
		    check_rate_map(cfg->shaping.ns_egress, "shaping.internetEgress.namespaces", e) < 0)
			return -EINVAL;
	}
	if (in) {
		if (get_rate(in, "shaping.internetIngress", "podDefault",
			     &cfg->shaping.pod_ingress_default, e) < 0 ||
		    jx_object(in, "shaping.internetIngress", "namespaces", &cfg->shaping.ns_ingress,
			      e) < 0)
			return -EINVAL;
		if (cfg->shaping.ns_ingress &&
		    check_rate_map(cfg->shaping.ns_ingress, "shaping.internetIngress.namespaces", e) < 0)
			return -EINVAL;
	}
	return 0;
}

static int parse_budgets(json_object *root, struct node_config *cfg, struct tg_err *e)
{
	struct budget_policy *b = &cfg->budgets;
	json_object *o = NULL;
	int64_t report_s = 1, lease_s = 10;
	int r;

	b->report_ms = 1000;
	b->lease_ms = 10000;
	b->fallback_bps = BUDGET_FALLBACK_DEFAULT_BPS;
	if ((r = jx_object(root, "", "budgets", &o, e)) <= 0)
		return r;
	if (jx_string(o, "budgets", "allocator", &b->allocator, e) < 0 ||
	    jx_int(o, "budgets", "reportSeconds", 1, 60, &report_s, e) < 0 ||
	    jx_int(o, "budgets", "leaseSeconds", 2, 3600, &lease_s, e) < 0 ||
	    get_rate(o, "budgets", "fallback", &b->fallback_bps, e) < 0 ||
	    jx_object(o, "budgets", "internetEgress", &b->egress, e) < 0)
		return -EINVAL;
	if (lease_s < 2 * report_s)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.leaseSeconds %lld must be at least twice budgets.reportSeconds (%lld): "
			       "a lease has to outlive one lost answer",
			       (long long)lease_s, (long long)report_s);
	b->report_ms = report_s * 1000;
	b->lease_ms = lease_s * 1000;
	if (b->allocator && strncmp(b->allocator, "http://", 7) != 0 &&
	    strncmp(b->allocator, "https://", 8) != 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.allocator \"%.64s\" is not an http:// or https:// URL",
			       b->allocator);
	if (b->allocator && (strlen(b->allocator) > 512 || strpbrk(b->allocator, " \t\r\n")))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.allocator is not a URL (blanks, or over 512 characters)");
	if (!b->egress)
		return 0;
	json_object_object_foreach(b->egress, k, v) {
		(void)v;
		if (!node_ns_name_ok(k))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "budgets.internetEgress[\"%.64s\"] is not a namespace name "
				       "(a DNS label: a-z, 0-9 and '-', at most 63 characters)", k);
	}
	if (check_rate_map(b->egress, "budgets.internetEgress", e) < 0)
		return -EINVAL;
	if (json_object_object_length(b->egress) > 0 && !b->allocator)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.allocator is missing: budgets.internetEgress needs an allocator");
	return 0;
}

/* Connection limits: at most ten million (a node's conntrack table holds far fewer). */
#define GUARD_LIMIT_MAX 10000000

/* internetGuard.destinations: {"top": N, "prefixLength": L, "tracked": S} */
static int parse_destinations(json_object *o, struct acct_destinations *d, struct tg_err *e)
{
	static const char where[] = "internetGuard.destinations";
	json_object *dst = NULL;
	int64_t top = ACCT_DST_TOP_DEFAULT, len = ACCT_DST_PREFIX_DEFAULT,
		tracked = ACCT_DST_TRACKED_DEFAULT;
	int r;

	if ((r = jx_object(o, "internetGuard", "destinations", &dst, e)) <= 0)
		return r;
	if (jx_int(dst, where, "top", 1, ACCT_DST_TOP_MAX, &top, e) < 0 ||
	    jx_int(dst, where, "prefixLength", 8, 32, &len, e) < 0 ||
	    jx_int(dst, where, "tracked", ACCT_DST_TRACKED_MIN, ACCT_DST_TRACKED_MAX, &tracked,
		   e) < 0)
		return -EINVAL;
	if (top > tracked)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "%s.top (%lld) is more than %s.tracked (%lld)", where,
			       (long long)top, where, (long long)tracked);
	*d = (struct acct_destinations){ .on = true, .top = (uint32_t)top,
					 .prefix_len = (uint8_t)len, .tracked = (uint32_t)tracked };
	return 0;
}

/*
 * internetGuard: "connections" {"namespaceDefault": N, "namespaces": {ns: N},
 * "newPerSecond": R} and "destinations".
 */
static int parse_guard(json_object *root, struct node_config *cfg, struct tg_err *e)
{
	struct acct_guard *g = &cfg->guard;
	json_object *o = NULL, *conns = NULL, *per_ns = NULL;
	int64_t dflt = 0, rate = 0;
	int r;

	if ((r = jx_object(root, "", "internetGuard", &o, e)) <= 0)
		return r;
	if ((r = parse_destinations(o, &g->dst, e)) < 0)
		return r;
	g->on = g->dst.on;
	if ((r = jx_object(o, "internetGuard", "connections", &conns, e)) < 0)
		return r;
	if (r == 0)
		return 0;
	if (jx_int(conns, "internetGuard.connections", "namespaceDefault", 1, GUARD_LIMIT_MAX, &dflt,
		   e) < 0 ||
	    jx_int(conns, "internetGuard.connections", "newPerSecond", 1, GUARD_LIMIT_MAX, &rate,
		   e) < 0 ||
	    jx_object(conns, "internetGuard.connections", "namespaces", &per_ns, e) < 0)
		return -EINVAL;
	g->on = g->limits = true;
	g->concurrent_default = (uint32_t)dflt;
	g->new_per_second = (uint32_t)rate;
	if (!per_ns)
		return 0;
	if (json_object_object_length(per_ns) > ACCT_GUARD_NS_MAX)
		return tg_fail(e, CNI_ERR_CONFIG, -E2BIG,
			       "internetGuard.connections.namespaces lists more than %d namespaces",
			       ACCT_GUARD_NS_MAX);
	json_object_object_foreach(per_ns, k, v) {
		int64_t n;

		if (!node_ns_name_ok(k))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "internetGuard.connections.namespaces[\"%.64s\"] is not a namespace "
				       "name (a DNS label: a-z, 0-9 and '-', at most 63 characters)", k);
		if (!json_object_is_type(v, json_type_int) ||
		    (n = json_object_get_int64(v)) < 0 || n > GUARD_LIMIT_MAX)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "internetGuard.connections.namespaces[\"%s\"] must be a whole "
				       "number of connections from 0 (no limit) to %d",
				       k, GUARD_LIMIT_MAX);
		g->ns[g->n_ns] = k;
		g->ns_concurrent[g->n_ns++] = (uint32_t)n;
	}
	return 0;
}

uint64_t node_config_budget(const struct node_config *cfg, const char *ns)
{
	json_object *v;
	uint64_t bps = 0;

	if (cfg->budgets.egress && json_object_object_get_ex(cfg->budgets.egress, ns, &v) && v)
		rate_from_json(v, "", &bps, NULL); /* validated when the config was parsed */
	return bps;
}

/* containerd's "no burst" (2^32-1 bits, ~512 MiB) would leave short transfers unshaped. */
#define BURST_UNSET 4294967295ULL
#define BURST_MAX (512ULL * 1024 * 1024 * 8)

static int bw_pair(json_object *bw, const char *rate_key, const char *burst_key,
		   uint64_t *ret_rate, uint64_t *ret_burst, struct tg_err *e)
{
	json_object *rv = jx_get_nocase(bw, rate_key), *bv = jx_get_nocase(bw, burst_key);
	char path[80];
	int64_t burst;

	/* containerd sends all four keys; 0 (like null) means "no limit", as for the Go plugin. */
	if (bv && (json_object_is_type(bv, json_type_null) ||
		   (json_object_is_type(bv, json_type_int) && json_object_get_int64(bv) == 0)))
		bv = NULL;
	if (rv && (json_object_is_type(rv, json_type_null) ||
		   (json_object_is_type(rv, json_type_int) && json_object_get_int64(rv) == 0)))
		rv = NULL;
	if (rv) {
		snprintf(path, sizeof(path), "runtimeConfig.bandwidth.%s", rate_key);
		if (rate_from_json(rv, path, ret_rate, e) < 0)
			return -EINVAL;
	}
	if (!bv)
		return 0;
	if (!json_object_is_type(bv, json_type_int))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "runtimeConfig.bandwidth.%s must be an integer number of bits", burst_key);
	burst = json_object_get_int64(bv);
	if (burst <= 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "runtimeConfig.bandwidth.%s must be positive", burst_key);
	if ((uint64_t)burst == BURST_UNSET)
		return 0;
	if (!rv)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "runtimeConfig.bandwidth.%s is set without %s", burst_key, rate_key);
	if ((uint64_t)burst > BURST_MAX)
		return tg_fail(e, CNI_ERR_CONFIG, -ERANGE,
			       "runtimeConfig.bandwidth.%s is larger than %llu bits (512 MiB)", burst_key,
			       (unsigned long long)BURST_MAX);
	*ret_burst = (uint64_t)burst;
	return 0;
}

static int parse_runtime(struct node_config *cfg, struct tg_err *e)
{
	json_object *bw = jx_get_nocase(cfg->runtime_config, "bandwidth");
	json_object *ann = jx_get_nocase(cfg->runtime_config, "io.kubernetes.cri.pod-annotations");

	if (bw && !json_object_is_type(bw, json_type_null)) {
		if (!json_object_is_type(bw, json_type_object))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "runtimeConfig.bandwidth must be an object");
		if (bw_pair(bw, "ingressRate", "ingressBurst", &cfg->request.ingress_bps,
			    &cfg->request.ingress_burst, e) < 0 ||
		    bw_pair(bw, "egressRate", "egressBurst", &cfg->request.egress_bps,
			    &cfg->request.egress_burst, e) < 0)
			return -EINVAL;
	}
	if (ann && !json_object_is_type(ann, json_type_null)) {
		static const char *const keys[] = { "tollgate.io/internet-egress-bandwidth",
						    "tollgate.io/internet-ingress-bandwidth" };
		uint64_t *dst[] = { &cfg->request.annot_inet_egress, &cfg->request.annot_inet_ingress };
		json_object *v;

		if (!json_object_is_type(ann, json_type_object))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "runtimeConfig[\"io.kubernetes.cri.pod-annotations\"] must be an object");
		for (int i = 0; i < 2; i++) {
			char path[120];

			if (!json_object_object_get_ex(ann, keys[i], &v) || !v)
				continue;
			snprintf(path, sizeof(path), "pod annotation %s", keys[i]);
			if (!json_object_is_type(v, json_type_string))
				return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s must be a string", path);
			if (rate_from_json(v, path, dst[i], e) < 0)
				return -EINVAL;
		}
	}
	return 0;
}

int node_config_ports(const struct node_config *cfg, struct hostports *ret, struct tg_err *e)
{
	if (hostports_parse(jx_get_nocase(cfg->runtime_config, "portMappings"),
			    "runtimeConfig.portMappings", ret, e) < 0)
		return -EINVAL;
	for (size_t i = 0; i < ret->n; i++) {
		uint16_t p = ret->m[i].host_port;

		/* the node's port of the agent, which a pod would otherwise take over */
		if (cfg->access.metrics_port && p == cfg->access.metrics_port)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "runtimeConfig.portMappings[%zu]: hostPort %u is the node's "
				       "metricsPort, which no pod may take", i, cfg->access.metrics_port);
		/* its other services: ssh, kubelet, NodePorts (nodeAccess.hostPortDeny) */
		for (size_t j = 0; j < cfg->n_port_deny; j++)
			if (p >= cfg->port_deny[j].lo && p <= cfg->port_deny[j].hi)
				return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
					       "runtimeConfig.portMappings[%zu]: hostPort %u is in "
					       "nodeAccess.hostPortDeny (%u-%u: the node's own "
					       "services), which no pod may take",
					       i, p, cfg->port_deny[j].lo, cfg->port_deny[j].hi);
	}
	return 0;
}

static int parse_gc_list(json_object *root, struct node_config *cfg, struct tg_err *e)
{
	json_object *arr;
	size_t i, n;

	if (!json_object_object_get_ex(root, "cni.dev/valid-attachments", &arr) || !arr)
		return 0;
	if (!json_object_is_type(arr, json_type_array))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "cni.dev/valid-attachments must be an array");
	n = json_object_array_length(arr);
	for (i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(arr, i);
		const char *cid = NULL, *ifn = NULL;

		if (!json_object_is_type(o, json_type_object) ||
		    jx_string(o, "cni.dev/valid-attachments[]", "containerID", &cid, e) < 0 ||
		    jx_string(o, "cni.dev/valid-attachments[]", "ifname", &ifn, e) < 0 || !cid ||
		    !ifn)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "cni.dev/valid-attachments[%zu] must be an object with string "
				       "containerID and ifname",
				       i);
	}
	cfg->valid_attachments = arr;
	return 0;
}

int node_config_decode(const char *text, size_t len, struct node_config *cfg, struct tg_err *e)
{
	struct jx_parse_error pe;
	json_object *root;
	int r;

	memset(cfg, 0, sizeof(*cfg));
	if (len == 0)
		return tg_fail(e, CNI_ERR_DECODE, -ENODATA, "no network configuration on stdin");
	if (len > NODE_CONFIG_MAX)
		return tg_fail(e, CNI_ERR_DECODE, -E2BIG,
			       "the network configuration is larger than %d bytes", NODE_CONFIG_MAX);
	r = jx_parse(text, len, &root, &pe);
	if (r == -ENOMEM)
		return tg_fail(e, CNI_ERR_IO, r, "out of memory");
	if (r < 0 && pe.twice)
		return jx_fail_twice(e, &pe);
	if (r < 0 && pe.trailing)
		return tg_fail(e, CNI_ERR_DECODE, r,
			       "the network configuration has trailing data at byte %zu", pe.at);
	if (r < 0)
		return tg_fail(e, CNI_ERR_DECODE, r,
			       "the network configuration is not valid JSON: %s at byte %zu", pe.why,
			       pe.at);
	cfg->root = root;
	if (!json_object_is_type(root, json_type_object))
		return tg_fail(e, CNI_ERR_DECODE, -EBADMSG,
			       "the network configuration must be a JSON object");

	if ((r = jx_string(root, "", "cniVersion", &cfg->cni_version, e)) < 0)
		return r;
	if (r == 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "cniVersion is missing");
	cfg->version = cni_version_parse(cfg->cni_version);
	if (cfg->version < 0) {
		char list[64] = "";

		for (size_t i = 0, o = 0; cni_versions[i] && o < sizeof(list); i++)
			o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "",
					      cni_versions[i]);
		return tg_fail(e, CNI_ERR_VERSION, -EPROTONOSUPPORT,
			       "cniVersion \"%.32s\" is not supported (supported: %s)",
			       cfg->cni_version, list);
	}
	return 0;
}

int node_config_parse(struct node_config *cfg, struct tg_err *e)
{
	json_object *root = cfg->root;
	const char *uplink = NULL, *type = NULL;
	int64_t mtu = 0;
	int r;

	if ((r = jx_string(root, "", "name", &cfg->name, e)) < 0)
		return r;
	if (r == 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "name is missing");
	if (!name_is_safe(cfg->name, TG_NETWORK_NAME_MAX))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "name \"%.64s\" must match [A-Za-z0-9][A-Za-z0-9_.-]* (at most %d characters)",
			       cfg->name, TG_NETWORK_NAME_MAX);
	/* The runtime found the binary by it; still a key like any other. */
	if ((r = jx_string(root, "", "type", &type, e)) < 0)
		return r;
	if (jx_int(root, "", "mtu", 68, 65535, &mtu, e) < 0)
		return -EINVAL;
	cfg->mtu = (int)mtu;
	if ((r = jx_string(root, "", "uplink", &uplink, e)) < 0)
		return r;
	if (uplink) {
		if (!*uplink || strlen(uplink) >= IFNAMSIZ || strchr(uplink, '/'))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "uplink \"%.32s\" is not a valid interface name", uplink);
		snprintf(cfg->uplink, sizeof(cfg->uplink), "%s", uplink);
	}
	if ((r = parse_internal(root, cfg, e)) < 0)
		return r;
	cfg->masquerade = true;
	if (jx_bool(root, "", "masquerade", &cfg->masquerade, e) < 0)
		return -EINVAL;
	if (copy_path(root, "dataDir", cfg->data_dir, sizeof(cfg->data_dir), "/run/tollgate", e) < 0 ||
	    copy_path(root, "logFile", cfg->log_file, sizeof(cfg->log_file), NULL, e) < 0)
		return -EINVAL;
	cfg->log_max_bytes = NODE_LOG_MAX_BYTES;
	if (jx_int(root, "", "logMaxBytes", NODE_LOG_MAX_BYTES_MIN, NODE_LOG_MAX_BYTES_MAX,
		   &cfg->log_max_bytes, e) < 0)
		return -EINVAL;
	if ((r = parse_ipam(root, cfg, e)) < 0)
		return r;
	if ((r = parse_accounting(root, cfg, e)) < 0)
		return r;
	if ((r = parse_shaping(root, cfg, e)) < 0)
		return r;
	if ((r = node_config_parse_access(root, cfg, e)) < 0)
		return r;
	if ((r = parse_budgets(root, cfg, e)) < 0)
		return r;
	if ((r = parse_guard(root, cfg, e)) < 0)
		return r;
	if (jx_object(root, "", "runtimeConfig", &cfg->runtime_config, e) < 0)
		return -EINVAL;
	if ((r = parse_runtime(cfg, e)) < 0)
		return r;
	if (json_object_object_get_ex(root, "prevResult", &cfg->prev_result) && cfg->prev_result &&
	    !json_object_is_type(cfg->prev_result, json_type_object))
		return tg_fail(e, CNI_ERR_DECODE, -EBADMSG, "prevResult must be a result object");
	if ((r = parse_gc_list(root, cfg, e)) < 0)
		return r;
	return 0;
}

void node_config_free(struct node_config *cfg)
{
	free(cfg->pool);
	if (cfg->root)
		json_object_put(cfg->root);
	memset(cfg, 0, sizeof(*cfg));
}

void node_config_verdict(FILE *f, const char *path, int r, const struct node_config *cfg,
			 const struct tg_err *e)
{
	if (r == 0)
		fprintf(f, "%s: accepted (network %s, cniVersion %s)\n", path,
			cfg->name ? cfg->name : "", cfg->cni_version ? cfg->cni_version : "");
	else
		fprintf(f, "%s: refused (CNI error %d): %s\n", path, e->code ? e->code : CNI_ERR_IO,
			e->msg);
}

int node_config_load_file(const char *path, struct node_config *cfg, struct tg_err *e)
{
	_cleanup_free_ char *file = NULL;
	size_t len;
	int r;

	memset(cfg, 0, sizeof(*cfg));
	r = read_file(path, NODE_CONFIG_MAX, &file, &len);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot read %s: %s", path,
			       r == -E2BIG ? "larger than 1 MiB" : strerror(-r));
	return node_config_load_text(path, file, len, cfg, e);
}

int node_config_load_text(const char *path, const char *file, size_t len, struct node_config *cfg,
			  struct tg_err *e)
{
	_cleanup_json_ json_object *root = NULL;
	json_object *plugins, *entry = NULL, *v;
	struct jx_parse_error pe;
	const char *text;
	int r;

	memset(cfg, 0, sizeof(*cfg));
	if (len > NODE_CONFIG_MAX)
		return tg_fail(e, CNI_ERR_DECODE, -E2BIG, "%s is larger than 1 MiB", path);
	/* as strict as a config on stdin: one document, nothing but blanks after it */
	r = jx_parse(file, len, &root, &pe);
	if (r == -ENOMEM)
		return tg_fail(e, CNI_ERR_IO, r, "out of memory");
	if (r < 0 && pe.twice)
		return jx_fail_twice(e, &pe);
	if (r < 0 && pe.trailing)
		return tg_fail(e, CNI_ERR_DECODE, r, "%s has trailing data at byte %zu", path, pe.at);
	if (r < 0)
		return tg_fail(e, CNI_ERR_DECODE, r, "%s is not valid JSON: %s at byte %zu", path,
			       pe.why, pe.at);
	if (!json_object_is_type(root, json_type_object))
		return tg_fail(e, CNI_ERR_DECODE, -EBADMSG, "%s is not a JSON object", path);
	if (json_object_object_get_ex(root, "plugins", &plugins) &&
	    json_object_is_type(plugins, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(plugins) && !entry; i++) {
			json_object *p = json_object_array_get_idx(plugins, i), *type;

			if (json_object_object_get_ex(p, "type", &type) &&
			    json_object_is_type(type, json_type_string) &&
			    strcmp(json_object_get_string(type), NODE_PLUGIN_TYPE) == 0)
				entry = p;
		}
		if (!entry)
			return tg_fail(e, CNI_ERR_CONFIG, -ENOENT,
				       "%s has no plugin of type \"tollgate\"", path);
		/* As the runtime does: the list's name and version go into the entry. */
		entry = json_object_get(entry);
		if (json_object_object_get_ex(root, "name", &v))
			json_object_object_add(entry, "name", json_object_get(v));
		if (json_object_object_get_ex(root, "cniVersion", &v))
			json_object_object_add(entry, "cniVersion", json_object_get(v));
	} else {
		entry = json_object_get(root);
	}
	text = json_object_to_json_string_ext(entry, JSON_C_TO_STRING_PLAIN);
	r = node_config_decode(text, strlen(text), cfg, e);
	if (r == 0)
		r = node_config_parse(cfg, e);
	json_object_put(entry);
	return r;
}
