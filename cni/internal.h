/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_CNI_INTERNAL_H
#define TG_CNI_INTERNAL_H

#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

#include "accounting/accounting.h"
#include "cni/config.h"
#include "ipam/ipam.h"
#include "lib/err.h"
#include "lib/ip4.h"
#include "shaper/shaper.h"

#define TG_GATEWAY 0xa9fe0101u /* 169.254.1.1: every pod's on-link next hop */

/* ---- environment ---- */
struct cni_env {
	enum cni_cmd cmd;
	const char *cmd_name;
	const char *container_id;
	const char *netns;	/* may be empty on DEL */
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

/* ---- plumbing (netns and links) ---- */
struct nl_sock;

struct plumb_req {
	const char *host_ifname;
	const char *pod_ifname;
	int netns_fd;
	uint32_t ip;
	int mtu;
	uint8_t pod_mac[6];
};

extern const uint8_t plumb_host_mac[6];
void plumb_host_veth_name(const char *container_id, const char *ifname, char ret[IFNAMSIZ]);
void plumb_pod_mac(const char *container_id, const char *ifname, uint8_t ret[6]);
int plumb_enable_forwarding(struct tg_err *e);
int plumb_add(struct nl_sock *sk, const struct plumb_req *rq, struct tg_err *e);
/* Deletes the host veth (the pod end goes with it); already gone is success. */
int plumb_del(struct nl_sock *sk, const char *host_ifname, struct tg_err *e);
/* 0 when everything is in place, TG_ERR_DRIFT naming the first difference otherwise. */
int plumb_check(struct nl_sock *sk, const struct plumb_req *rq, struct tg_err *e);

/* ---- shaping policy (shaping.c) ---- */
/* The pod-specific inputs (runtimeConfig, annotations) and the caps they resolve to. */
void cni_shaping_of_request(const struct tg_config *cfg, const char *ns, struct shaping *s);

/* ---- commands ---- */
int cmd_add(const struct cni_env *env, const struct tg_config *cfg, json_object **ret,
	    char ret_ip[IP4_STRLEN], struct tg_err *e);
int cmd_del(const struct cni_env *env, const struct tg_config *cfg, char ret_ip[IP4_STRLEN],
	    struct tg_err *e);
int cmd_check(const struct cni_env *env, const struct tg_config *cfg, char ret_ip[IP4_STRLEN],
	      struct tg_err *e);
int cmd_status(const struct tg_config *cfg, struct tg_err *e);
int cmd_gc(const struct tg_config *cfg, struct tg_err *e);

/* ---- the per-command log line ---- */
void cni_log(const char *log_file, const struct cni_env *env, const char *ip, int64_t dur_ns,
	     const struct tg_err *e);

#endif
