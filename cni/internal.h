/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_CNI_INTERNAL_H
#define TG_CNI_INTERNAL_H

#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

#include "config/config.h"
#include "ipam/ipam.h"
#include "lib/cnispec.h"
#include "lib/err.h"
#include "lib/ip4.h"

/* ---- environment ---- */
struct cni_env {
	enum cni_cmd cmd;
	const char *cmd_name;
	const char *container_id;
	const char *netns; /* may be empty on DEL */
	const char *ifname;
	const char *path;
	char k8s_namespace[IPAM_K8S_NAMESPACE_MAX + 1];
	char pod[IPAM_K8S_POD_MAX + 1];
};

/* Reads CNI_COMMAND only: the rest depends on the command and the config. */
int cni_env_command(struct cni_env *env, struct tg_err *e);
int cni_env_parse(struct cni_env *env, struct tg_err *e);

/* ---- results ---- */
struct cni_add_result {
	const char *host_veth;
	const uint8_t *host_mac;
	const char *ifname;
	const uint8_t *pod_mac;
	const char *netns;
	uint32_t ip;
	int mtu;
};

json_object *cni_result_render(const char *cni_version, int version,
			       const struct cni_add_result *r);
json_object *cni_error_render(const char *cni_version, const struct tg_err *e);
/* The IPv4 address of interface `ifname` in a prevResult, if it names one. */
int cni_prev_result_ip(json_object *prev, const char *ifname, uint32_t *ret);

/* ---- the network configuration on stdin ---- */
/*
 * node_config_decode and node_config_parse with the protocol's own rules in
 * between: a command the config's cniVersion does not have is refused
 * (CHECK needs 0.4.0, STATUS and GC 1.1.0) before any other key is judged.
 */
int cni_config_read(const char *text, size_t len, enum cni_cmd cmd, struct node_config *cfg,
		    struct tg_err *e);

/* ---- commands ---- */
/*
 * ADD hands its result to emit (which prints it) as its last step: when that
 * fails, the runtime never saw the pod's address and ADD undoes its work.
 */
typedef int (*cni_emit_fn)(json_object *result, void *ctx, struct tg_err *e);
/* ADD and CHECK tell the pod's shaping (*ret_shaping) for the log line, once they know it. */
int cmd_add(const struct cni_env *env, const struct node_config *cfg, cni_emit_fn emit,
	    void *emit_ctx, char ret_ip[IP4_STRLEN], struct shaping *ret_shaping, struct tg_err *e);
int cmd_del(const struct cni_env *env, const struct node_config *cfg, char ret_ip[IP4_STRLEN],
	    struct tg_err *e);
int cmd_check(const struct cni_env *env, const struct node_config *cfg, char ret_ip[IP4_STRLEN],
	      struct shaping *ret_shaping, struct tg_err *e);
int cmd_status(const struct node_config *cfg, struct tg_err *e);
int cmd_gc(const struct node_config *cfg, struct tg_err *e);

/* ---- the per-command log line ---- */
/*
 * `shaping` (or NULL) adds the pod's internet caps in effect and which value
 * set each (inet_egress=5M(config)), and a warning for an annotation that
 * was ignored because it is above the config's cap.
 */
void cni_log(const char *log_file, int64_t max_bytes, const struct cni_env *env, const char *ip,
	     int64_t dur_ns, const struct shaping *shaping, const struct tg_err *e);
/* That warning, "" when none; its length. */
size_t cni_annotation_warning(const struct shaping *s, char *dst, size_t size);

#endif
