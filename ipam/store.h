/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_IPAM_STORE_H
#define TG_IPAM_STORE_H

/*
 * The store: <dataDir>/<network>/state.json, written atomically (temp file,
 * fsync off tmpfs, rename) under an exclusive flock on <dataDir>/<network>/lock;
 * readers need no lock. The format carries a version number.
 */

#include <stdbool.h>
#include <sys/stat.h>
#include <json-c/json.h>

#include "ipam/ipam.h"
#include "ipam/snapshot.h"
#include "lib/err.h"

/* ---- serialisation ---- */

json_object *ipam_state_to_json(const struct ipam_state *st);
/* The state without its attachments ("attachments" last, empty), and one attachment. */
json_object *ipam_state_head_to_json(const struct ipam_state *st);
json_object *ipam_attachment_to_json(const struct ipam_attachment *a);
/*
 * Reads every format version up to IPAM_STATE_VERSION, migrating an earlier
 * one forward in memory (ipam_state_migrate); the writers above write only
 * the current one. -EPROTO, naming both versions: a later version than this
 * build's. -EBADMSG: anything else that is not a state.
 */
int ipam_state_from_json(json_object *root, struct ipam_state *st, struct tg_err *e);
/* Brings a version `from` document forward, step by step, to IPAM_STATE_VERSION (in place). */
int ipam_state_migrate(json_object *root, int64_t from, struct tg_err *e);

/* ---- the store: <dataDir>/<network>/{state.json,lock} ---- */

#define IPAM_STORE_FILE "state.json"

struct ipam_store {
	char dir[4096];
	char path[4096 + 32];
	int lock_fd;
	int cache_fd;		   /* state.cache, used only under the lock */
	struct ipam_snapshot snap; /* what the last locked load read from it */
	bool durable;		   /* fsync needed: not on tmpfs */
	bool locked;
};

/* Opens the store for writing (creates its directory, 0700, and lock file). */
int ipam_store_open(struct ipam_store *s, const char *data_dir, const char *network,
		    struct tg_err *e);
/* Opens an existing store for reading only: creates nothing, takes no lock. */
int ipam_store_open_readonly(struct ipam_store *s, const char *data_dir, const char *network,
			     struct tg_err *e);
void ipam_store_close(struct ipam_store *s);
/*
 * What a reader that keeps a loaded state (the exporter, the agent's
 * budgets) compares to know whether state.json was replaced since: one
 * stat. The store is written by rename (a new inode); size and mtime catch
 * any other write. A zero stamp has never looked.
 */
struct ipam_store_stamp {
	bool looked;
	bool present; /* state.json was there */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};
/*
 * 1 when state.json differs from *stamp (first look, replaced, appeared or
 * gone), *stamp updated; 0 when it is the same; a negative errno when it
 * cannot be looked at (not ENOENT: no store is a store without pods).
 */
int ipam_store_stamp_changed(const struct ipam_store *s, struct ipam_store_stamp *stamp);
int ipam_store_lock(struct ipam_store *s, struct tg_err *e);
void ipam_store_unlock(struct ipam_store *s);
/*
 * Missing file: an empty state. Corrupt file: CNI code 5, never replaced.
 * Under the lock, a matching state.cache stands in for parsing the JSON.
 */
int ipam_store_load(struct ipam_store *s, struct ipam_state *st, struct tg_err *e);
int ipam_store_save(struct ipam_store *s, const struct ipam_state *st, struct tg_err *e);

/*
 * lock, load, fn, save (when fn returns > 0: it changed the state), unlock.
 * fn only edits the state in memory: nothing slow runs under the lock.
 */
typedef int (*ipam_update_fn)(struct ipam_state *st, void *ctx, struct tg_err *e);
int ipam_store_update(struct ipam_store *s, struct ipam_state *st, ipam_update_fn fn, void *ctx,
		      struct tg_err *e);

#endif
