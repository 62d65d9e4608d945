/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_CONFIG_CONFIG_H
#define TG_CONFIG_CONFIG_H

/*
 * The network configuration: the plugin reads it from stdin, tollgate-ipam,
 * the node agent and the allocator from a conflist: one parser for all of
 * them, with no kernel code (what a default needs of the node, such as the
 * conntrack table's size, node/ resolves). Every
 * key is checked before anything is changed; unknown keys are ignored (CNI
 * convention), a known key of the wrong type or with an invalid value is
 * error 7 naming the key.
 */

#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "accounting/accounting.h"
#include "budget/budget.h"
#include "lib/err.h"
#include "lib/hostport.h"
#include "lib/ip4.h"
#include "lib/shaping.h"

#define NODE_CONFIG_MAX (1 << 20) /* bytes of one network configuration */
#define TG_NETWORK_NAME_MAX 128

enum ipam_source { IPAM_SOURCE_STATIC, IPAM_SOURCE_IMDS };

/* shaping.* : the internet caps of pods, namespaces and the node; bits/s, 0 = none. */
struct shaping_policy {
	uint64_t node_egress;	      /* internetEgress.node */
	uint64_t ns_egress_default;   /* internetEgress.namespaceDefault */
	uint64_t pod_egress_default;  /* internetEgress.podDefault */
	json_object *ns_egress;	      /* internetEgress.namespaces {ns: rate}, validated */
	uint64_t node_ingress;	      /* internetIngress.node */
	uint64_t ns_ingress_default;  /* internetIngress.namespaceDefault */
	uint64_t pod_ingress_default; /* internetIngress.podDefault */
	json_object *ns_ingress;      /* internetIngress.namespaces {ns: rate}, validated */
	uint32_t queue_ms;	      /* queueLatencyMs: leaf queues hold this much at the rate */
};

/*
 * budgets.* : how the node reaches the cluster budgets' allocator (DESIGN
 * "Cluster budgets"). Which namespaces have budgets is the allocator's
 * policy, heard in its answers: `heard` (the agent's, or budgets.json's
 * for the plugin; NULL or id "": none heard yet). Rates bits/s as
 * everywhere in the config; the wire and budget/ speak bytes/s.
 */
struct budget_policy {
	const char *allocator;	   /* the allocator's base URL; NULL: no budgets */
	int64_t report_ms;	   /* reportSeconds */
	int64_t lease_ms;	   /* leaseSeconds: the longest lease the node takes */
	uint64_t fallback_bps;	   /* a node never granted (default 10M) */
	int64_t fallback_after_ms; /* ... once unanswered this long (fallbackAfterSeconds) */
	const char *token_file;	   /* tokenFile: the agent's projected token; NULL: none sent */
	const char *ca_file;	   /* caFile: what signed the allocator's certificate */
	const struct budget_set *heard; /* the caller's */
};

/* nodeAccess.hostPortDeny: ports of the node's own services that no hostPort takes. */
#define NODE_PORT_DENY_MAX 32
struct node_port_range {
	uint16_t lo, hi;
};

struct node_config {
	json_object *root; /* owns every json_object below */
	const char *cni_version;
	int version; /* cni_version_parse(cni_version) */
	const char *name;
	int mtu;	       /* 0: the uplink's */
	char uplink[IFNAMSIZ]; /* "": the default route's interface */
	struct cidr4 internal[ACCT_MAX_INTERNAL];
	size_t n_internal;
	bool masquerade;
	char data_dir[PATH_MAX];
	char log_file[PATH_MAX];
	int64_t log_max_bytes; /* logFile is rotated (to logFile.1) past this size */
	enum ipam_source source;
	const char *imds_url;
	json_object *exclude; /* ipam.exclude as given */
	uint32_t *pool;	      /* static source: the expanded address list */
	size_t n_pool;
	int64_t cooldown_ms;
	bool acct_enabled, acct_per_pod;
	int64_t retain_seconds; /* accounting.retainSeconds: a namespace's counters after its last pod */
	uint32_t internet_mark;
	struct shaping_policy shaping;
	struct acct_access access;   /* nodeAccess (its lists point into root) */
	bool ns_connections_default; /* namespaceConnections not given: a share of the table */
	struct node_port_range port_deny[NODE_PORT_DENY_MAX]; /* nodeAccess.hostPortDeny */
	size_t n_port_deny;
	struct budget_policy budgets;
	struct acct_guard guard; /* internetGuard.connections (its names point into root) */
	/* runtimeConfig.bandwidth and the pod's annotations (its caps are resolved per namespace) */
	struct shaping request;
	json_object *prev_result;
	json_object *runtime_config;
	json_object *valid_attachments;
};

/*
 * Two steps, so that the plugin can refuse a command its cniVersion does not
 * have before anything else is judged: decode reads the JSON and cniVersion,
 * parse every other key. Both leave cfg for node_config_free.
 */
int node_config_decode(const char *text, size_t len, struct node_config *cfg, struct tg_err *e);
int node_config_parse(struct node_config *cfg, struct tg_err *e);
void node_config_free(struct node_config *cfg);
/*
 * The pod's hostPorts from runtimeConfig.portMappings (ADD's alone: a DEL
 * or CHECK goes by the store's record, whatever the runtime passes), none
 * on the node's metricsPort. CNI_ERR_CONFIG naming the entry.
 */
int node_config_ports(const struct node_config *cfg, struct hostports *ret, struct tg_err *e);
/* The "type" of Tollgate's entry in a conflist. */
#define NODE_PLUGIN_TYPE "tollgate"
/*
 * A conflist's Tollgate entry (the plugin whose "type" is "tollgate", with the
 * list's name and cniVersion) or a single plugin config, from a file.
 */
int node_config_load_file(const char *path, struct node_config *cfg, struct tg_err *e);
/*
 * What a load of path said, in one line: "PATH: accepted (network N,
 * cniVersion V)" or "PATH: refused (CNI error C): MSG" (tollgate-ipam
 * validate, tollgate-agent --check).
 */
void node_config_verdict(FILE *f, const char *path, int r, const struct node_config *cfg,
			 const struct tg_err *e);
/*
 * Whether a namespace's internet traffic in one direction (uploads,
 * BUDGET_EGRESS; downloads, BUDGET_INGRESS) is under a cluster budget on
 * this node: the policy heard says so, or the node reports to an allocator
 * and has heard none yet (it cannot know, so it holds every namespace to
 * what the allocator can prove free until the first answer says).
 */
bool node_config_budgeted(const struct node_config *cfg, const char *ns, enum budget_dir dir);
/*
 * node_config_load_file for a conflist's bytes already read (len of them),
 * named `path` in messages: the node daemon validates exactly the bytes it
 * then installs.
 */
int node_config_load_text(const char *path, const char *text, size_t len, struct node_config *cfg,
			  struct tg_err *e);

/*
 * The allocator's policy file (tollgate-allocator --policy; DESIGN "Cluster
 * budgets"):
 *   {"version": 1, "reportSeconds": 1, "leaseSeconds": 10,
 *    "namespaces": {"datasets": {"internetEgress": "20G", "internetIngress": "40G"}}}
 * Parsed with no kernel code (the allocator links none). Every key known
 * (a misspelt one, or one this version does not enforce, is refused, never
 * ignored), rates as in the conflist up to 1 Pbit/s, at most
 * BUDGET_POLICY_NS_MAX namespaces. A refusal is CNI code 6 (not JSON) or 7
 * with e naming the file and the key.
 */
struct alloc_policy {
	struct budget_set budgets; /* namespaces.*.internet{Egress,Ingress}, bytes/s, sealed */
	/* its uploads alone: what a node that predates directions is sent */
	struct budget_set uploads;
	int64_t report_ms; /* reportSeconds: the nodes' period (the rounds' is a quarter) */
	int64_t lease_ms;  /* leaseSeconds: a grant's lease */
};
int alloc_policy_load_text(const char *path, const char *text, size_t len, struct alloc_policy *ret,
			   struct tg_err *e);
void alloc_policy_free(struct alloc_policy *p);

#endif
