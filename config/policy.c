// SPDX-License-Identifier: Apache-2.0
/*
 * The conflist's policies (config/internal.h): accounting, shaping, cluster
 * budgets and the internet guard.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/budget.h"
#include "config/config.h"
#include "config/internal.h"
#include "lib/jsonx.h"
#include "lib/k8sname.h"
#include "lib/rate.h"

int config_parse_accounting(json_object *root, struct node_config *cfg, struct tg_err *e)
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
				return tg_fail(
					e, CNI_ERR_CONFIG, -EINVAL,
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
			return tg_fail(
				e, CNI_ERR_CONFIG, -EINVAL,
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
	json_object_object_foreach(o, k, v)
	{
		char path[200];
		uint64_t bps;

		snprintf(path, sizeof(path), "%s[\"%.63s\"]", where, k);
		if (!*k || strlen(k) > 63)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s: not a namespace name",
				       path);
		if (rate_from_json(v, path, &bps, e) < 0)
			return -EINVAL;
	}
	return 0;
}

int config_parse_shaping(json_object *root, struct node_config *cfg, struct tg_err *e)
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
		if (get_rate(eg, "shaping.internetEgress", "node", &cfg->shaping.node_egress, e) <
			    0 ||
		    get_rate(eg, "shaping.internetEgress", "namespaceDefault",
			     &cfg->shaping.ns_egress_default, e) < 0 ||
		    get_rate(eg, "shaping.internetEgress", "podDefault",
			     &cfg->shaping.pod_egress_default, e) < 0 ||
		    jx_object(eg, "shaping.internetEgress", "namespaces", &cfg->shaping.ns_egress,
			      e) < 0)
			return -EINVAL;
		if (cfg->shaping.ns_egress &&
		    check_rate_map(cfg->shaping.ns_egress, "shaping.internetEgress.namespaces", e) <
			    0)
			return -EINVAL;
	}
	if (in) {
		if (get_rate(in, "shaping.internetIngress", "node", &cfg->shaping.node_ingress, e) <
			    0 ||
		    get_rate(in, "shaping.internetIngress", "namespaceDefault",
			     &cfg->shaping.ns_ingress_default, e) < 0 ||
		    get_rate(in, "shaping.internetIngress", "podDefault",
			     &cfg->shaping.pod_ingress_default, e) < 0 ||
		    jx_object(in, "shaping.internetIngress", "namespaces", &cfg->shaping.ns_ingress,
			      e) < 0)
			return -EINVAL;
		if (cfg->shaping.ns_ingress &&
		    check_rate_map(cfg->shaping.ns_ingress, "shaping.internetIngress.namespaces",
				   e) < 0)
			return -EINVAL;
	}
	return 0;
}

int config_parse_budgets(json_object *root, struct node_config *cfg, struct tg_err *e)
{
	struct budget_policy *b = &cfg->budgets;
	json_object *o = NULL;
	int64_t report_s = 1, lease_s = 10, after_s = BUDGET_FALLBACK_AFTER_MS / 1000;
	int r;

	b->report_ms = 1000;
	b->lease_ms = 10000;
	b->fallback_bps = BUDGET_FALLBACK_DEFAULT_BPS;
	b->fallback_after_ms = BUDGET_FALLBACK_AFTER_MS;
	if ((r = jx_object(root, "", "budgets", &o, e)) <= 0)
		return r;
	if (jx_string(o, "budgets", "allocator", &b->allocator, e) < 0 ||
	    jx_int(o, "budgets", "reportSeconds", 1, 60, &report_s, e) < 0 ||
	    jx_int(o, "budgets", "leaseSeconds", 2, 3600, &lease_s, e) < 0 ||
	    get_rate(o, "budgets", "fallback", &b->fallback_bps, e) < 0 ||
	    jx_int(o, "budgets", "fallbackAfterSeconds", 0, 86400, &after_s, e) < 0 ||
	    jx_string(o, "budgets", "tokenFile", &b->token_file, e) < 0 ||
	    jx_string(o, "budgets", "caFile", &b->ca_file, e) < 0)
		return -EINVAL;
	if (json_object_object_get_ex(o, "internetEgress", NULL))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.internetEgress: budgets live in the allocator's policy "
			       "file (tollgate-allocator --policy), not in the conflist, which "
			       "says only how to reach the allocator");
	if (!b->allocator)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.allocator is missing: the allocator's URL is what the "
			       "budgets block is for");
	if (lease_s < 2 * report_s)
		return tg_fail(
			e, CNI_ERR_CONFIG, -EINVAL,
			"budgets.leaseSeconds %lld must be at least twice budgets.reportSeconds (%lld): "
			"a lease has to outlive one lost answer",
			(long long)lease_s, (long long)report_s);
	b->report_ms = report_s * 1000;
	b->lease_ms = lease_s * 1000;
	b->fallback_after_ms = after_s * 1000;
	if (b->allocator && strncmp(b->allocator, "http://", 7) != 0 &&
	    strncmp(b->allocator, "https://", 8) != 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.allocator \"%.64s\" is not an http:// or https:// URL",
			       b->allocator);
	if (b->allocator && (strlen(b->allocator) > 512 || strpbrk(b->allocator, " \t\r\n")))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.allocator is not a URL (blanks, or over 512 characters)");
	/* the token proves the node: never sent where anyone on the path reads it */
	if (b->token_file && strncmp(b->allocator, "https://", 8) != 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.tokenFile needs an https:// budgets.allocator: the node's "
			       "token is not sent in the clear");
	if (b->ca_file && strncmp(b->allocator, "https://", 8) != 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.caFile is for an https:// budgets.allocator");
	if (b->token_file && (b->token_file[0] != '/' || strlen(b->token_file) >= 4096))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.tokenFile \"%.64s\" is not an absolute path",
			       b->token_file);
	if (b->ca_file && (b->ca_file[0] != '/' || strlen(b->ca_file) >= 4096))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "budgets.caFile \"%.64s\" is not an absolute path", b->ca_file);
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
	    jx_int(dst, where, "tracked", ACCT_DST_TRACKED_MIN, ACCT_DST_TRACKED_MAX, &tracked, e) <
		    0)
		return -EINVAL;
	if (top > tracked)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "%s.top (%lld) is more than %s.tracked (%lld)", where,
			       (long long)top, where, (long long)tracked);
	*d = (struct acct_destinations){ .on = true,
					 .top = (uint32_t)top,
					 .prefix_len = (uint8_t)len,
					 .tracked = (uint32_t)tracked };
	return 0;
}

/*
 * internetGuard: "connections" {"namespaceDefault": N, "namespaces": {ns: N},
 * "newPerSecond": R} and "destinations".
 */
int config_parse_guard(json_object *root, struct node_config *cfg, struct tg_err *e)
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
	if (jx_int(conns, "internetGuard.connections", "namespaceDefault", 1, GUARD_LIMIT_MAX,
		   &dflt, e) < 0 ||
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
	json_object_object_foreach(per_ns, k, v)
	{
		int64_t n;

		if (!k8s_dns_label(k, strlen(k)))
			return tg_fail(
				e, CNI_ERR_CONFIG, -EINVAL,
				"internetGuard.connections.namespaces[\"%.64s\"] is not a namespace "
				"name (a DNS label: a-z, 0-9 and '-', at most 63 characters)",
				k);
		if (!json_object_is_type(v, json_type_int) || (n = json_object_get_int64(v)) < 0 ||
		    n > GUARD_LIMIT_MAX)
			return tg_fail(
				e, CNI_ERR_CONFIG, -EINVAL,
				"internetGuard.connections.namespaces[\"%s\"] must be a whole "
				"number of connections from 0 (no limit) to %d",
				k, GUARD_LIMIT_MAX);
		g->ns[g->n_ns] = k;
		g->ns_concurrent[g->n_ns++] = (uint32_t)n;
	}
	return 0;
}

bool node_config_budgeted(const struct node_config *cfg, const char *ns, enum budget_dir dir)
{
	const struct budget_set *h = cfg->budgets.heard;

	if (!cfg->budgets.allocator)
		return false;
	return !h || !h->id[0] || budget_set_find(h, ns, dir) != NULL;
}
