/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_CLI_H
#define TG_CLI_H

/*
 * tollgate-ipam's insides: what main.c parsed (struct cli), one handler per
 * verb, and the helpers the verbs share (common.c). Each verb builds one JSON
 * document and prints it either as JSON or as text read from that document.
 */

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "config/config.h"
#include "ipam/imds.h"
#include "ipam/ipam.h"
#include "ipam/store.h"
#include "lib/err.h"
#include "lib/shaping.h"
#include "node/node.h"
#include "node/sync.h"
#include "node/upkeep.h"

#define EXIT_PROBLEMS 1
#define EXIT_USAGE 2

struct cli {
	const char *data_dir;
	const char *network;
	const char *config_path;
	const char *uplink;
	const char *imds_url;
	const char *from_file;
	const char *arg;       /* the verb's operand (show, release, top) */
	const char *agent_url; /* top: the node agent's HTTP endpoint */
	char agent_url_buf[64];
	int retry_budget_s;
	bool json;
	bool imds_check;
	bool fix;
	bool force;
	bool dry_run;
	bool store_ok;	  /* false: the store did not load (doctor goes on) */
	bool store_newer; /* ... because a later release wrote it (format version) */
	char store_error[600];
	int64_t cooldown_ms;
	json_object *exclude;
	struct node_config cfg;
	struct ipam_store store;
	struct ipam_state state; /* loaded before the verb runs, unless sync */
};

/* The verbs: an exit status, 0, EXIT_PROBLEMS or EXIT_USAGE. */
int status_main(struct cli *c);
int list_main(struct cli *c);
int show_main(struct cli *c);
int sync_main(struct cli *c);
int release_main(struct cli *c);
int gc_main(struct cli *c);
int doctor_main(struct cli *c);
int reshape_main(struct cli *c);
int top_main(struct cli *c);
int validate_main(struct cli *c);

/* ---- JSON documents and their text form ---- */

void format_age(int64_t secs, char *buf, size_t size);
json_object *attachment_json(const struct ipam_attachment *a, int64_t now_s);
/* One line of caps, from a shaping_view_json() object (lib/shaping.h). */
void shaping_line(json_object *shaping, char *buf, size_t size);
/* Which value set each internet cap, config or annotation; true when the pod has an annotation. */
bool shaping_source_line(json_object *shaping, char *buf, size_t size);
/* A shell command within 100 columns, long ones continued with " \\". */
void print_command(const char *lead, const char *cmd);

/* IP, NAMESPACE/POD or (a unique prefix of) a container ID; complains on stderr. */
int cli_find(const struct cli *c, const char *key, size_t *ret);

/* ---- what the kernel of this network namespace holds ---- */

struct kveth {
	char name[IFNAMSIZ];
	int ifindex;
};

struct kroute {
	uint32_t ip;
	int ifindex;
};

struct kview {
	struct kveth *veths;
	size_t n_veths;
	struct kroute *routes; /* /32 routes of the main table through a tg* veth */
	size_t n_routes;
	uint32_t *pods; /* set pods of table inet tollgate */
	size_t n_pods;
	bool table;
	uint32_t *uplink_addrs;
	uint8_t *uplink_prefixes;
	size_t n_uplink;
	char uplink[IFNAMSIZ];
};

int kview_load(struct kview *k, const char *uplink);
void kview_free(struct kview *k);
int kview_veth(const struct kview *k, const char *name);
bool kview_route(const struct kview *k, uint32_t ip, int ifindex);
bool kview_pod(const struct kview *k, uint32_t ip);

/* Where sync and doctor --imds read what IMDS offers: the options, else the config. */
struct node_sync_source cli_sync_source(const struct cli *c, int budget_s);

#endif
