// SPDX-License-Identifier: Apache-2.0
/*
 * The conflist's nodeAccess (config/internal.h): who may reach the
 * node's and the cloud's services, what no tenant may exhaust of the node,
 * and the ports no hostPort may take.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/internal.h"
#include "lib/jsonx.h"
#include "lib/k8sname.h"
#include "lib/util.h"

/* <where>.<key>: an array of namespace names, at most ACCT_ACCESS_NS_MAX. 1 when given. */
static int parse_ns_list(json_object *o, const char *where, const char *key, const char **ret,
			 size_t *ret_n, struct tg_err *e)
{
	json_object *arr = NULL;
	size_t n;
	int r = jx_string_array(o, where, key, &arr, e);

	if (r <= 0)
		return r;
	n = json_object_array_length(arr);
	if (n > ACCT_ACCESS_NS_MAX)
		return tg_fail(e, CNI_ERR_CONFIG, -E2BIG, "%s.%s lists more than %d namespaces",
			       where, key, ACCT_ACCESS_NS_MAX);
	for (size_t i = 0; i < n; i++) {
		const char *s = json_object_get_string(json_object_array_get_idx(arr, i));

		if (!k8s_dns_label(s, strlen(s)))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "%s.%s[%zu] \"%.64s\" is not a namespace name "
				       "(a DNS label: a-z, 0-9 and '-', at most 63 characters)",
				       where, key, i, s);
		ret[i] = s;
	}
	*ret_n = n;
	return 1;
}

/* ssh, kubelet, kube-proxy's health port, the NodePort range: the node's own services */
static const struct node_port_range port_deny_default[] = {
	{ 22, 22 },
	{ 10250, 10250 },
	{ 10256, 10256 },
	{ 30000, 32767 },
};

/* <where>[i]: a port (a number) or a range ("30000-32767"). */
static int parse_port_range(json_object *v, const char *where, size_t i,
			    struct node_port_range *ret, struct tg_err *e)
{
	unsigned long lo, hi;
	const char *s;
	char *end;

	if (json_object_is_type(v, json_type_int)) {
		int64_t p = json_object_get_int64(v);

		if (p < 1 || p > 65535)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "%s[%zu]: %lld is not a port (1-65535)", where, i,
				       (long long)p);
		*ret = (struct node_port_range){ (uint16_t)p, (uint16_t)p };
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "%s[%zu] must be a port or a range \"LOW-HIGH\"", where, i);
	s = json_object_get_string(v);
	errno = 0;
	lo = strtoul(s, &end, 10);
	if (end != s && *end == '-' && s[0] >= '0' && s[0] <= '9' && end[1] >= '0' && end[1] <= '9')
		hi = strtoul(end + 1, &end, 10);
	else
		hi = 0;
	if (errno || *end || lo < 1 || hi > 65535 || lo > hi)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "%s[%zu]: \"%.32s\" is not a range of ports "
			       "\"LOW-HIGH\" (1-65535, LOW <= HIGH)",
			       where, i, s);
	*ret = (struct node_port_range){ (uint16_t)lo, (uint16_t)hi };
	return 0;
}

static int parse_port_deny(json_object *acc, struct node_config *cfg, struct tg_err *e)
{
	json_object *arr = NULL;
	size_t n;

	if (!acc || !json_object_object_get_ex(acc, "hostPortDeny", &arr)) {
		memcpy(cfg->port_deny, port_deny_default, sizeof(port_deny_default));
		cfg->n_port_deny = ARRAY_SIZE(port_deny_default);
		return 0;
	}
	if (!arr || !json_object_is_type(arr, json_type_array))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "nodeAccess.hostPortDeny must be an array of ports and ranges");
	n = json_object_array_length(arr);
	if (n > NODE_PORT_DENY_MAX)
		return tg_fail(e, CNI_ERR_CONFIG, -E2BIG,
			       "nodeAccess.hostPortDeny lists more than %d entries",
			       NODE_PORT_DENY_MAX);
	for (size_t i = 0; i < n; i++)
		if (parse_port_range(json_object_array_get_idx(arr, i), "nodeAccess.hostPortDeny",
				     i, &cfg->port_deny[i], e) < 0)
			return -EINVAL;
	cfg->n_port_deny = n;
	return 0;
}

/* servicePorts[i].ports: ports and ranges, none overlapping an earlier entry's. */
static int parse_service_ports(json_object *ent, const char *where, struct acct_access *a,
			       struct tg_err *e)
{
	struct acct_service_port *sp = &a->services[a->n_services];
	char at[64];
	json_object *arr = NULL;
	size_t n;

	snprintf(at, sizeof(at), "%s.ports", where);
	if (!json_object_object_get_ex(ent, "ports", &arr))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s is missing", at);
	if (!arr || !json_object_is_type(arr, json_type_array) ||
	    !(n = json_object_array_length(arr)))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "%s must be a non-empty array of ports and ranges", at);
	if (n > ACCT_SERVICE_RANGES_MAX)
		return tg_fail(e, CNI_ERR_CONFIG, -E2BIG, "%s lists more than %d entries", at,
			       ACCT_SERVICE_RANGES_MAX);
	for (size_t i = 0; i < n; i++) {
		struct node_port_range pr;

		if (parse_port_range(json_object_array_get_idx(arr, i), at, i, &pr, e) < 0)
			return -EINVAL;
		/* one entry a port: who may reach it is one list */
		for (size_t j = 0; j <= a->n_services; j++)
			for (size_t k = 0; k < (j < a->n_services ? a->services[j].n_ports : i);
			     k++)
				if (pr.lo <= a->services[j].ports[k].hi &&
				    a->services[j].ports[k].lo <= pr.hi)
					return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
						       "%s[%zu] (%u-%u) overlaps "
						       "nodeAccess.servicePorts[%zu].ports[%zu]",
						       at, i, pr.lo, pr.hi, j, k);
		sp->ports[i] = (struct acct_port_range){ pr.lo, pr.hi };
	}
	sp->n_ports = n;
	return 0;
}

/*
 * nodeAccess.servicePorts: [{ "ports": [9618, "2379-2380"], "namespaces":
 * ["monitoring"] }], at most ACCT_SERVICE_PORTS_MAX entries, each with both
 * keys and no other.
 */
static int parse_services(json_object *acc, struct acct_access *a, struct tg_err *e)
{
	json_object *arr = NULL;
	size_t n;

	if (!json_object_object_get_ex(acc, "servicePorts", &arr))
		return 0;
	if (!arr || !json_object_is_type(arr, json_type_array))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "nodeAccess.servicePorts must be an array of "
			       "{ \"ports\": [...], \"namespaces\": [...] }");
	n = json_object_array_length(arr);
	if (n > ACCT_SERVICE_PORTS_MAX)
		return tg_fail(e, CNI_ERR_CONFIG, -E2BIG,
			       "nodeAccess.servicePorts lists more than %d entries",
			       ACCT_SERVICE_PORTS_MAX);
	for (size_t i = 0; i < n; i++) {
		json_object *ent = json_object_array_get_idx(arr, i);
		struct acct_service_port *sp = &a->services[i];
		char where[48];
		int r;

		snprintf(where, sizeof(where), "nodeAccess.servicePorts[%zu]", i);
		if (!ent || !json_object_is_type(ent, json_type_object))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "%s must be { \"ports\": [...], \"namespaces\": [...] }",
				       where);
		json_object_object_foreach(ent, key, val)
		{
			(void)val;
			if (strcmp(key, "ports") != 0 && strcmp(key, "namespaces") != 0)
				return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
					       "%s: unknown key \"%.64s\" (an entry has \"ports\" "
					       "and \"namespaces\")",
					       where, key);
		}
		if (parse_service_ports(ent, where, a, e) < 0)
			return -EINVAL;
		r = parse_ns_list(ent, where, "namespaces", sp->ns, &sp->n_ns, e);
		if (r < 0)
			return r;
		if (r == 0)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "%s.namespaces is missing (an empty list: no pod)", where);
		a->n_services++;
	}
	return 0;
}

int config_parse_access(json_object *root, struct node_config *cfg, struct tg_err *e)
{
	json_object *acc = NULL;
	int64_t port = 9617, conns = -1, neigh = ACCT_NEIGHBOURS_PER_SECOND_DEFAULT;
	int r;

	cfg->access.metrics_port = 9617;
	cfg->access.neighbours_per_second = ACCT_NEIGHBOURS_PER_SECOND_DEFAULT;
	cfg->ns_connections_default = true;
	if ((r = jx_object(root, "", "nodeAccess", &acc, e)) < 0)
		return r;
	if (parse_port_deny(acc, cfg, e) < 0)
		return -EINVAL;
	if (r == 0)
		return 0;
	if (parse_ns_list(acc, "nodeAccess", "metadataNamespaces", cfg->access.metadata_ns,
			  &cfg->access.n_metadata_ns, e) < 0 ||
	    (r = parse_ns_list(acc, "nodeAccess", "metricsNamespaces", cfg->access.metrics_ns,
			       &cfg->access.n_metrics_ns, e)) < 0 ||
	    jx_int(acc, "nodeAccess", "metricsPort", 1, 65535, &port, e) < 0 ||
	    /* 0: no ceiling, no rate (the node's tables are then any tenant's to fill) */
	    jx_int(acc, "nodeAccess", "namespaceConnections", 0, INT32_MAX, &conns, e) < 0 ||
	    jx_int(acc, "nodeAccess", "newNeighboursPerSecond", 0, 1000000, &neigh, e) < 0 ||
	    parse_services(acc, &cfg->access, e) < 0)
		return -EINVAL;
	cfg->access.metrics_filter = r == 1;
	cfg->access.metrics_port = (uint16_t)port;
	cfg->access.neighbours_per_second = (uint32_t)neigh;
	if (conns >= 0) {
		cfg->ns_connections_default = false;
		cfg->access.ns_connections = (uint32_t)conns;
	}
	return 0;
}
