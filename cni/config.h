/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_CNI_CONFIG_H
#define TG_CNI_CONFIG_H

/*
 * The network configuration, as the plugin reads it from stdin and as
 * tollgate-ipam reads it from a conflist (--config): one parser for both.
 */

#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

#include "accounting/accounting.h"
#include "lib/err.h"
#include "lib/ip4.h"
#include "lib/shaping.h"

#define CNI_STDIN_MAX (1 << 20)
#define TG_NETWORK_NAME_MAX 128

enum cni_cmd { CMD_ADD, CMD_DEL, CMD_CHECK, CMD_STATUS, CMD_GC, CMD_VERSION };

/* ---- versions ---- */
/* Encodes "a.b.c" as a*10000+b*100+c; -1 when not a version Tollgate speaks. */
int cni_version_parse(const char *v);
extern const char *const cni_supported_versions[];

/* ---- configuration ---- */
enum ipam_source { IPAM_SOURCE_STATIC, IPAM_SOURCE_IMDS };

/* shaping.* : internet caps, bits per second, 0 = none. */
struct tg_shaping {
	uint64_t node_egress;		/* internetEgress.node */
	uint64_t ns_egress_default;	/* internetEgress.namespaceDefault */
	uint64_t pod_egress_default;	/* internetEgress.podDefault */
	json_object *ns_egress;		/* internetEgress.namespaces {ns: rate}, validated */
	uint64_t pod_ingress_default;	/* internetIngress.podDefault */
	json_object *ns_ingress;	/* internetIngress.namespaces: per-pod cap in that namespace */
	uint32_t queue_ms;		/* queueLatencyMs: leaf queues hold this much at the rate */
};

struct tg_config {
	json_object *root;		/* owns every json_object below */
	const char *cni_version;
	int version;
	const char *name;
	int mtu;			/* 0: the uplink's */
	char uplink[IFNAMSIZ];
	struct cidr4 internal[ACCT_MAX_INTERNAL];
	size_t n_internal;
	bool masquerade;
	char data_dir[PATH_MAX];
	char log_file[PATH_MAX];
	enum ipam_source source;
	const char *imds_url;
	json_object *exclude;		/* ipam.exclude as given */
	uint32_t *pool;			/* static source: the expanded address list */
	size_t n_pool;
	int64_t cooldown_ms;
	bool acct_enabled, acct_per_pod;
	uint32_t internet_mark;
	struct tg_shaping shaping;
	/* runtimeConfig.bandwidth and the pod's annotations (its caps are resolved per namespace) */
	struct shaping request;
	json_object *prev_result;
	json_object *runtime_config;
	json_object *valid_attachments;
};

/* Decodes and validates the whole config before anything is changed. */
int cni_config_parse(const char *text, size_t len, enum cni_cmd cmd, struct tg_config *cfg,
		     struct tg_err *e);
void cni_config_free(struct tg_config *cfg);

/*
 * A conflist's Tollgate entry (the plugin whose "type" is "tollgate", with the
 * list's name and cniVersion) or a single plugin config, from a file.
 */
int cni_config_load_file(const char *path, struct tg_config *cfg, struct tg_err *e);
struct shaping;
/* Fills the caps of `s` from the config, keeping its pod-specific inputs (reshape). */
void cni_shaping_resolve(const struct tg_config *cfg, const char *ns, struct shaping *s);
struct ipam_state;
struct ipam_attachment;
/* Uplink HTB classes for a pod with internet egress shaping (under the store lock). */
int cni_shaping_classes(const struct ipam_state *st, struct ipam_attachment *a);
/* What the accounting module needs of an attachment (the table is rebuilt from all of them). */
struct acct_pod cni_acct_pod(const struct ipam_attachment *a);
struct acct_pod *cni_acct_pods(const struct ipam_state *st);
/* What the accounting module needs of the config. */
struct acct_config cni_config_acct(const struct tg_config *cfg);
struct nl_sock;
/*
 * The uplink's MTU (the named one, else the default route's interface, else
 * 1500) and its ifindex (0 when there is none).
 */
int cni_uplink_mtu(struct nl_sock *sk, const char *uplink, int *ret, int *ret_ifindex,
		     struct tg_err *e);
/*
 * Removes what the kernel holds for one attachment: its nft elements
 * and own counters, its shaping (IFB, uplink class; the namespace's class with
 * its last pod) and its veth. Anything already gone is fine; every step runs
 * and the first error is returned. GC, and the CLI's release and gc.
 */
int cni_teardown(struct nl_sock *sk, const struct ipam_attachment *a, struct tg_err *e);

#endif
