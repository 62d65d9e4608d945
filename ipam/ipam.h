/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_IPAM_H
#define TG_IPAM_H

/*
 * IPAM: the node's pool of alias addresses, the attachments that hold them,
 * and the on-disk store that keeps both across plugin invocations.
 *
 * The state is plain data (struct ipam_state); the allocator works on it in
 * memory and the store reads and writes it atomically under a flock. Callers
 * lock, load, change, save and unlock; nothing slow (netlink) ever happens
 * while the lock is held.
 */

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "lib/err.h"
#include "lib/ip4.h"
#include "lib/shaping.h"

#define IPAM_STATE_VERSION 1
#define IPAM_POOL_MAX 65536		/* addresses in one pool */
#define IPAM_ATTACHMENTS_MAX 65536
#define IPAM_CONTAINER_ID_MAX 255
#define IPAM_NETNS_MAX 255
#define IPAM_K8S_NAMESPACE_MAX 63	/* a DNS-1123 label */
#define IPAM_K8S_POD_MAX 253		/* a DNS-1123 subdomain */
#define IPAM_DEFAULT_COOLDOWN_MS 30000

struct ipam_attachment {
	char container_id[IPAM_CONTAINER_ID_MAX + 1];
	char ifname[IFNAMSIZ];
	uint32_t ip;
	char netns[IPAM_NETNS_MAX + 1];
	char k8s_namespace[IPAM_K8S_NAMESPACE_MAX + 1];
	char pod[IPAM_K8S_POD_MAX + 1];
	char host_veth[IFNAMSIZ];
	int64_t created;		/* unix seconds */
	struct shaping shaping;
};

struct ipam_cooling {
	uint32_t ip;
	int64_t released_ms;
};

struct ipam_state {
	int version;
	char boot_id[64];
	char source[16];		/* "static", "imds" or "" before the first pool */
	int64_t last_sync_ms;
	uint32_t last_ip;		/* round-robin hint: reuse the longest-free address */
	uint32_t *pool;			/* sorted, unique */
	size_t n_pool;
	uint32_t *pending;		/* seen by one sync, not yet in the pool */
	size_t n_pending;
	uint32_t node_ip;		/* imds: the uplink's own address, never a pod's */
	struct cidr4 subnet;		/* imds: the uplink's subnet */
	struct ipam_cooling *cooling;
	size_t n_cooling;
	struct ipam_attachment *att;
	size_t n_att;
};

/* ---- address lists ---- */

/*
 * Expands "a-b" ranges, CIDRs and single addresses into a sorted unique array
 * and removes `exclude` (same syntax). A CIDR of /30 or wider loses its
 * network and broadcast addresses, as host-local does. Errors name
 * "<where>.addresses[i]".
 */
int ipam_pool_parse(json_object *addresses, json_object *exclude, const char *where,
		    uint32_t **ret_pool, size_t *ret_n, struct tg_err *e);
/* Writes the pool back as compact "a-b" ranges. */
json_object *ipam_pool_to_ranges(const uint32_t *pool, size_t n);

/* ---- state and allocator (pure, no I/O) ---- */

void ipam_state_init(struct ipam_state *st);
void ipam_state_free(struct ipam_state *st);
const struct ipam_attachment *ipam_find(const struct ipam_state *st, const char *container_id,
					const char *ifname);
const struct ipam_attachment *ipam_find_ip(const struct ipam_state *st, uint32_t ip);
bool ipam_in_pool(const struct ipam_state *st, uint32_t ip);
/* Sorted address arrays: membership (bsearch), and sorting in place. */
bool ipam_addr_in(const uint32_t *sorted, size_t n, uint32_t ip);
void ipam_addrs_sort(uint32_t *a, size_t n);
/* Replaces the pool (taking ownership of `pool`). In-use addresses outside it stay with their pods. */
void ipam_set_pool(struct ipam_state *st, const char *source, uint32_t *pool, size_t n);
/*
 * Gives `req` an address: the one it already holds (same containerID+ifname,
 * *ret_existing = true), or the next free address after the last one handed
 * out that is neither in use nor cooling down. -ENOSPC when none is free.
 */
int ipam_assign(struct ipam_state *st, const struct ipam_attachment *req, int64_t now_ms,
		int64_t cooldown_ms, struct ipam_attachment *ret, bool *ret_existing,
		struct tg_err *e);
/* Removes an attachment; its address cools down when `cool`. Returns 1 if found, 0 if not. */
int ipam_release(struct ipam_state *st, const char *container_id, const char *ifname,
		 int64_t now_ms, bool cool, struct ipam_attachment *ret_removed);
/* Drops cool-down records that have expired. */
void ipam_expire_cooling(struct ipam_state *st, int64_t now_ms, int64_t cooldown_ms);
struct ipam_counts {
	size_t total, allocated, cooling, free, retired;
};
void ipam_count(const struct ipam_state *st, int64_t now_ms, int64_t cooldown_ms,
		struct ipam_counts *ret);
/*
 * After a reboot every attachment is stale (its veth and netns died with the
 * boot): when boot_id differs from the recorded one, drop them all and
 * return how many were dropped.
 */
size_t ipam_check_boot(struct ipam_state *st, const char *boot_id);
/* Current boot id: $TOLLGATE_BOOT_ID_FILE, else /proc/sys/kernel/random/boot_id. */
int ipam_read_boot_id(char *buf, size_t size);

/* ---- serialisation ---- */

json_object *ipam_state_to_json(const struct ipam_state *st);
int ipam_state_from_json(json_object *root, struct ipam_state *st, struct tg_err *e);

/* ---- the pool from Azure IMDS ---- */

struct imds_network {
	uint32_t node_ip;		/* the uplink's first address: the node's own */
	struct cidr4 subnet;
	uint32_t *addrs;		/* the other addresses, sorted */
	size_t n_addrs;
};

/* Picks the interface whose MAC is `mac` out of an IMDS network document. */
int imds_parse_network(const char *body, size_t len, const uint8_t mac[6],
		       struct imds_network *ret, struct tg_err *e);
void imds_network_free(struct imds_network *n);
/*
 * GETs the network document, retrying 429, 410, 5xx and timeouts with
 * exponential back-off (1 s doubling to 10 s, or Retry-After) for at most
 * budget_s seconds. Never more than one request a second.
 */
int imds_fetch(const char *base_url, int budget_s, char **ret_body, size_t *ret_len,
	       int *ret_attempts, struct tg_err *e);

/*
 * Folds one sync's addresses into the pool. The first sync of an empty pool
 * takes them all; after that a new address joins only when seen in two syncs
 * in a row (one glitch must not create a false address). Addresses that left
 * are dropped from the pool; one still in use stays with its pod (retired).
 */
struct ipam_sync_report {
	size_t added, pending, removed, retired;
};
int ipam_reconcile(struct ipam_state *st, const uint32_t *seen, size_t n, int64_t now_ms,
		   struct ipam_sync_report *ret, struct tg_err *e);

/* ---- the store: <dataDir>/<network>/{state.json,lock} ---- */

struct ipam_store {
	char dir[4096];
	char path[4096 + 32];
	int lock_fd;
	bool durable;			/* fsync needed: not on tmpfs */
	bool locked;
};

int ipam_store_open(struct ipam_store *s, const char *data_dir, const char *network,
		    struct tg_err *e);
void ipam_store_close(struct ipam_store *s);
int ipam_store_lock(struct ipam_store *s, struct tg_err *e);
void ipam_store_unlock(struct ipam_store *s);
/* Missing file: an empty state. Corrupt file: CNI code 5, never replaced. */
int ipam_store_load(const struct ipam_store *s, struct ipam_state *st, struct tg_err *e);
int ipam_store_save(struct ipam_store *s, const struct ipam_state *st, struct tg_err *e);

#endif
