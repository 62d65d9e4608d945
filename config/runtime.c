// SPDX-License-Identifier: Apache-2.0
/*
 * What the runtime passes with a command (config/internal.h): runtimeConfig's
 * bandwidth and the pod's annotations, its portMappings, and GC's
 * cni.dev/valid-attachments.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "config/internal.h"
#include "lib/jsonx.h"
#include "lib/rate.h"

/* containerd's "no burst" (2^32-1 bits, ~512 MiB) would leave short transfers unshaped. */
#define BURST_UNSET 4294967295ULL
#define BURST_MAX (512ULL * 1024 * 1024 * 8)

static int bw_pair(json_object *bw, const char *rate_key, const char *burst_key, uint64_t *ret_rate,
		   uint64_t *ret_burst, struct tg_err *e)
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
			       "runtimeConfig.bandwidth.%s must be an integer number of bits",
			       burst_key);
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
			       "runtimeConfig.bandwidth.%s is larger than %llu bits (512 MiB)",
			       burst_key, (unsigned long long)BURST_MAX);
	*ret_burst = (uint64_t)burst;
	return 0;
}

int config_parse_runtime(struct node_config *cfg, struct tg_err *e)
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
		uint64_t *dst[] = { &cfg->request.annot_inet_egress,
				    &cfg->request.annot_inet_ingress };
		json_object *v;

		if (!json_object_is_type(ann, json_type_object))
			return tg_fail(
				e, CNI_ERR_CONFIG, -EINVAL,
				"runtimeConfig[\"io.kubernetes.cri.pod-annotations\"] must be an object");
		for (int i = 0; i < 2; i++) {
			char path[120];

			if (!json_object_object_get_ex(ann, keys[i], &v) || !v)
				continue;
			snprintf(path, sizeof(path), "pod annotation %s", keys[i]);
			if (!json_object_is_type(v, json_type_string))
				return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s must be a string",
					       path);
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
				       "metricsPort, which no pod may take",
				       i, cfg->access.metrics_port);
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

int config_parse_gc_list(json_object *root, struct node_config *cfg, struct tg_err *e)
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
			return tg_fail(
				e, CNI_ERR_CONFIG, -EINVAL,
				"cni.dev/valid-attachments[%zu] must be an object with string "
				"containerID and ifname",
				i);
	}
	cfg->valid_attachments = arr;
	return 0;
}
