/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_STORE_FX_H
#define TG_TEST_STORE_FX_H

/*
 * A store of its own for each test: a temporary directory holding
 * <tmp>/data/net/state.json, made by the setup and removed by the teardown,
 * and a locked save and load on it. Include after cmocka.h.
 */
#include <linux/magic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/vfs.h>

#include "ipam/store.h"
#include "tests/unit/helpers.h"

struct fx {
	char tmp[64];	 /* mkdtemp */
	char data[128];	 /* <tmp>/data (created by the store) */
	char dir[256];	 /* <data>/net */
	char path[320];	 /* <dir>/state.json */
	const void *row; /* the table row of a table-driven case */
};

static inline int fx_setup_in(void **state, const char *parent, const char *prefix)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->row = *state; /* cmocka hands the case's initial state to setup */
	if (!tmpdir_make(f->tmp, sizeof(f->tmp), parent, prefix)) {
		free(f);
		return -1;
	}
	snprintf(f->data, sizeof(f->data), "%s/data", f->tmp);
	snprintf(f->dir, sizeof(f->dir), "%s/net", f->data);
	snprintf(f->path, sizeof(f->path), "%s/state.json", f->dir);
	*state = f;
	return 0;
}

/* On tmpfs, as /run/tollgate: the store keeps its cache (state.cache) there. */
static inline int fx_setup_tmpfs(void **state, const char *prefix)
{
	struct statfs sfs;

	if (statfs("/dev/shm", &sfs) < 0 || sfs.f_type != TMPFS_MAGIC)
		return -1;
	return fx_setup_in(state, "/dev/shm", prefix);
}

/*
 * On a disk, as a dataDir on persistent storage: $TG_DISK_DIR, else /var/tmp
 * (on disk by the FHS; /tmp often is a tmpfs). A parent that turns out to be
 * a tmpfs or ramfs fails the test: it would check the tmpfs case twice and
 * the on-disk one never.
 */
static inline int fx_setup_disk(void **state, const char *prefix)
{
	const char *parent = getenv("TG_DISK_DIR");
	struct statfs sfs;

	if (!parent || !parent[0])
		parent = "/var/tmp";
	if (statfs(parent, &sfs) < 0) {
		print_error("statfs(%s) failed: %m: set TG_DISK_DIR to a directory on disk\n",
			    parent);
		return -1;
	}
	if (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC) {
		print_error("%s is a %s, not a disk: set TG_DISK_DIR to a directory on disk\n",
			    parent, sfs.f_type == TMPFS_MAGIC ? "tmpfs" : "ramfs");
		return -1;
	}
	return fx_setup_in(state, parent, prefix);
}

static inline int fx_teardown(void **state)
{
	struct fx *f = *state;

	tmpdir_remove(f->tmp);
	free(f);
	return 0;
}

static inline void fx_open_store(struct fx *f, struct ipam_store *s)
{
	struct tg_err e = { 0 };

	if (ipam_store_open(s, f->data, "net", &e) != 0)
		fail_msg("ipam_store_open: code %d: %s", e.code, e.msg);
}

/* lock, load, unlock; returns whether the load came from the cache. */
static inline bool locked_load(struct ipam_store *s, struct ipam_state *st)
{
	struct tg_err e = { 0 };

	assert_int_equal(ipam_store_lock(s, &e), 0);
	assert_int_equal(ipam_store_load(s, st, &e), 0);
	ipam_store_unlock(s);
	return s->snap.json != NULL;
}

static inline void locked_save(struct ipam_store *s, const struct ipam_state *st)
{
	struct tg_err e = { 0 };

	assert_int_equal(ipam_store_lock(s, &e), 0);
	assert_int_equal(ipam_store_save(s, st, &e), 0);
	ipam_store_unlock(s);
}

#endif
