/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_IPAM_H
#define TG_IPAM_H

/*
 * IPAM: the node's pool of alias addresses and the attachments that hold
 * them. The state is plain data (struct ipam_state); the allocator works on
 * it in memory, with no I/O. ipam/store.h keeps it on disk, ipam/pool.h
 * parses address lists, ipam/imds.h reads the pool from Azure IMDS;
 * ipam/internal.h has the module's own limits.
 */

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "lib/err.h"
#include "lib/hostport.h"
#include "lib/ip4.h"
#include "lib/shaping.h"

#define IPAM_CONTAINER_ID_MAX 255
#define IPAM_NETNS_MAX 255
#define IPAM_K8S_NAMESPACE_MAX 63 /* a DNS-1123 label */
#define IPAM_K8S_POD_MAX 253	  /* a DNS-1123 subdomain */
#define IPAM_DEFAULT_COOLDOWN_MS 30000

struct ipam_attachment {
	char container_id[IPAM_CONTAINER_ID_MAX + 1];
	char ifname[IFNAMSIZ];
	uint32_t ip;
	char netns[IPAM_NETNS_MAX + 1];
	char k8s_namespace[IPAM_K8S_NAMESPACE_MAX + 1];
	char pod[IPAM_K8S_POD_MAX + 1];
	char host_veth[IFNAMSIZ];
	int64_t created; /* unix seconds */
	struct shaping shaping;
	struct hostports ports; /* its hostPorts (runtimeConfig.portMappings) */
	/*
	 * A reshape saved new caps and has not yet put the pod's classes right:
	 * the next reshape finishes it. Only a reshape sets it, so it never
	 * takes a pod that an ADD is still plumbing for one left half done.
	 */
	bool reshape_pending;
};

/*
 * A released address resting. Its cool-down runs on CLOCK_BOOTTIME
 * (time_boot_ms): a wall-clock step (NTP, a hand-set clock) neither ends it
 * early nor stretches it. The store is of one boot (its bootId), and so is
 * this time. The wall-clock time is kept for earlier readers of the store.
 */
struct ipam_cooling {
	uint32_t ip;
	int64_t released_ms;	  /* CLOCK_BOOTTIME ms */
	int64_t released_wall_ms; /* wall clock ms, as "releasedMs" has always been */
};

struct ipam_state {
	int version;
	char boot_id[64];
	char source[16]; /* "static", "imds" or "" before the first pool */
	int64_t last_sync_ms;
	uint32_t last_ip; /* round-robin hint: reuse the longest-free address */
	uint32_t *pool;	  /* sorted, unique */
	size_t n_pool;
	uint32_t *pending; /* seen by one sync, not yet in the pool */
	size_t n_pending;
	uint32_t node_ip;    /* imds: the uplink's own address, never a pod's */
	struct cidr4 subnet; /* imds: the uplink's subnet */
	struct ipam_cooling *cooling;
	size_t n_cooling;
	struct ipam_attachment *att;
	size_t n_att;
};

/* ---- state and allocator (pure, no I/O) ---- */

void ipam_state_init(struct ipam_state *st);
void ipam_state_free(struct ipam_state *st);
const struct ipam_attachment *ipam_find(const struct ipam_state *st, const char *container_id,
					const char *ifname);
const struct ipam_attachment *ipam_find_ip(const struct ipam_state *st, uint32_t ip);
bool ipam_in_pool(const struct ipam_state *st, uint32_t ip);
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
/*
 * Removes an attachment; its address cools down when `cool`. Returns 1 if
 * found, 0 if not. Here and in every cool-down call, now_ms is time_boot_ms().
 */
int ipam_release(struct ipam_state *st, const char *container_id, const char *ifname,
		 int64_t now_ms, bool cool, struct ipam_attachment *ret_removed);
/* Drops cool-down records that have expired. */
void ipam_expire_cooling(struct ipam_state *st, int64_t now_ms, int64_t cooldown_ms);
/*
 * The addresses the node holds, each counted once and in one state:
 *   allocated  in the pool, held by an attachment
 *   cooling    in the pool, held by none, released less than cooldown_ms ago
 *   free       in the pool, neither: the next ADD may have it
 *   retired    held by an attachment, no longer in the pool (it left the
 *              NIC or the config; never handed out again)
 * pool = allocated + cooling + free (what ADD hands out from; the node's
 * own address and pending ones are never in it); held = pool + retired,
 * the sum of the four.
 */
struct ipam_counts {
	size_t pool, held;
	size_t allocated, cooling, free, retired;
};
/* 0, or -ENOMEM (the counts are then all zero). */
int ipam_count(const struct ipam_state *st, int64_t now_ms, int64_t cooldown_ms,
	       struct ipam_counts *ret);
/*
 * After a reboot every attachment is stale (its veth and netns died with the
 * boot): when boot_id differs from the recorded one, drop them all and
 * return how many were dropped.
 */
size_t ipam_check_boot(struct ipam_state *st, const char *boot_id);
/*
 * The current boot id (/proc/sys/kernel/random/boot_id). Nothing in the
 * environment can stand in for it: a faked reboot would free every address.
 */
int ipam_read_boot_id(char *buf, size_t size);

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

#endif
