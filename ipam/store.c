// SPDX-License-Identifier: Apache-2.0
/*
 * The on-disk store: <dataDir>/<network>/state.json, replaced atomically
 * (lib/replace.h: temp file, fsync, rename, directory fsync) under an exclusive flock on
 * <dataDir>/<network>/lock. Readers need no lock: rename is atomic. On tmpfs
 * (the default /run/tollgate) the fsyncs are skipped, they cost ~5 ms on a
 * disk and buy nothing in RAM.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <json-c/printbuf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipam/store.h"
#include "lib/cleanup.h"
#include "lib/failpoint.h"
#include "lib/jsonx.h"
#include "lib/replace.h"
#include "lib/util.h"

#define STATE_FILE_MAX (64 << 20)

static int store_paths(struct ipam_store *s, const char *data_dir, const char *network,
		       struct tg_err *e)
{
	memset(s, 0, sizeof(*s));
	s->lock_fd = -1;
	s->cache_fd = -1;
	if ((size_t)snprintf(s->dir, sizeof(s->dir), "%s/%s", data_dir, network) >=
	    sizeof(s->dir) - 16)
		return tg_fail(e, CNI_ERR_CONFIG, -ENAMETOOLONG, "dataDir \"%s\" is too long",
			       data_dir);
	snprintf(s->path, sizeof(s->path), "%s/" IPAM_STORE_FILE, s->dir);
	return 0;
}

/*
 * A directory others can write to lets them replace the store (and with it
 * which addresses are free): refused, naming the directory and its mode. A
 * sticky directory (/tmp's 1777) only lets them replace their own files.
 */
static int dir_private(const char *dir, struct tg_err *e)
{
	struct stat sb;

	if (stat(dir, &sb) < 0)
		return tg_fail(e, CNI_ERR_IO, -errno, "cannot stat %s: %m", dir);
	if (!S_ISDIR(sb.st_mode))
		return tg_fail(e, CNI_ERR_IO, -ENOTDIR, "%s is not a directory", dir);
	if (sb.st_uid != geteuid() && sb.st_uid != 0)
		return tg_fail(e, CNI_ERR_IO, -EPERM,
			       "%s belongs to uid %u: the store's directories must belong to root",
			       dir, (unsigned)sb.st_uid);
	if ((sb.st_mode & (S_IWGRP | S_IWOTH)) && !(sb.st_mode & S_ISVTX))
		return tg_fail(
			e, CNI_ERR_IO, -EPERM,
			"%s is writable by others (mode %04o): anyone could replace the store; "
			"make it writable by root alone (chmod go-w)",
			dir, (unsigned)(sb.st_mode & 07777));
	return 0;
}

int ipam_store_open(struct ipam_store *s, const char *data_dir, const char *network,
		    struct tg_err *e)
{
	char lock[sizeof(s->dir) + 8], cache[sizeof(s->dir) + 16];
	int r = store_paths(s, data_dir, network, e);

	if (r < 0)
		return r;
	r = mkdir_p(s->dir, 0700);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot create %s: %s", s->dir, strerror(-r));
	r = dir_private(data_dir, e);
	if (r == 0)
		r = dir_private(s->dir, e);
	if (r < 0)
		return r;
	snprintf(lock, sizeof(lock), "%s/lock", s->dir);
	s->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->lock_fd < 0)
		return tg_fail(e, CNI_ERR_IO, -errno, "cannot open %s: %m", lock);
	s->durable = tg_dir_durable(s->dir);
	/* Without its cache the store still works, one parse slower (ipam/snapshot.h). */
	snprintf(cache, sizeof(cache), "%s/state.cache", s->dir);
	if (!s->durable)
		s->cache_fd = open(cache, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	return 0;
}

int ipam_store_open_readonly(struct ipam_store *s, const char *data_dir, const char *network,
			     struct tg_err *e)
{
	return store_paths(s, data_dir, network, e);
}

int ipam_store_stamp_changed(const struct ipam_store *s, struct ipam_store_stamp *stamp)
{
	struct ipam_store_stamp now = { .looked = true };
	struct stat sb;

	if (stat(s->path, &sb) == 0) {
		now.present = true;
		now.dev = sb.st_dev;
		now.ino = sb.st_ino;
		now.size = sb.st_size;
		now.mtime = sb.st_mtim;
	} else if (errno != ENOENT) {
		return -errno;
	}
	if (stamp->looked && stamp->present == now.present && stamp->dev == now.dev &&
	    stamp->ino == now.ino && stamp->size == now.size &&
	    stamp->mtime.tv_sec == now.mtime.tv_sec && stamp->mtime.tv_nsec == now.mtime.tv_nsec)
		return 0;
	*stamp = now;
	return 1;
}

void ipam_store_close(struct ipam_store *s)
{
	ipam_store_unlock(s);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	if (s->cache_fd >= 0)
		close(s->cache_fd);
	s->lock_fd = s->cache_fd = -1;
	ipam_snapshot_free(&s->snap);
}

int ipam_store_lock(struct ipam_store *s, struct tg_err *e)
{
	int r = TG_FAILPOINT("store.lock.before", e);

	if (r < 0)
		return r;
	/* flock dies with its holder: a killed plugin never leaves a stale lock. */
	while (flock(s->lock_fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return tg_fail(e, CNI_ERR_IO, -errno, "cannot lock %s: %m", s->dir);
	s->locked = true;
	return 0;
}

void ipam_store_unlock(struct ipam_store *s)
{
	if (s->locked && s->lock_fd >= 0)
		flock(s->lock_fd, LOCK_UN);
	s->locked = false;
}

int ipam_store_load(struct ipam_store *s, struct ipam_state *st, struct tg_err *e)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_json_ json_object *root = NULL;
	struct jx_parse_error pe;
	size_t got = 0;
	struct tg_err sub = { 0 };
	int r;

	ipam_state_init(st);
	ipam_snapshot_free(&s->snap);
	if (TG_FAILPOINT("store.load.before", e) < 0)
		return -EIO;
	r = read_file_flags(s->path, O_NOFOLLOW, STATE_FILE_MAX, &buf, &got);
	if (r == -ENOENT)
		return 0;
	if (r == -E2BIG)
		return tg_fail(e, CNI_ERR_IO, -EFBIG, "%s is larger than %d bytes", s->path,
			       STATE_FILE_MAX);
	if (r == -ENOMEM)
		return tg_fail(e, CNI_ERR_IO, r, "out of memory");
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot read %s: %s", s->path, strerror(-r));
	/* Only a lock holder reads the cache: others may catch it mid-write. */
	if (s->locked && s->cache_fd >= 0 &&
	    ipam_snapshot_read(s->cache_fd, &buf, got, st, &s->snap))
		return 0;
	/* Anything but one document (and whitespace) is a torn or edited file. */
	r = jx_parse(buf, got, &root, &pe);
	if (r == -ENOMEM)
		return tg_fail(e, CNI_ERR_IO, r, "out of memory");
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r,
			       "state file %s is corrupt (%s%s at byte %zu); it was left as it is: "
			       "run `tollgate-ipam doctor` to recover",
			       s->path, pe.trailing ? "" : "not valid JSON: ", pe.why, pe.at);
	r = ipam_state_from_json(root, st, &sub);
	if (r == -EPROTO)
		/* Not corrupt: a later release wrote it, and only such a release can use it. */
		return tg_fail(
			e, CNI_ERR_IO, -EPROTO,
			"state file %s has %s: it was written by a later release of Tollgate "
			"and was left as it is: run that release or a later one on this node "
			"(DEL still removes pods without it)",
			s->path, sub.msg);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, -EBADMSG,
			       "state file %s is corrupt (%s); it was left as it is: run "
			       "`tollgate-ipam doctor` to recover",
			       s->path, sub.msg);
	return 0;
}

static int pb_append(struct printbuf *pb, const char *p, size_t n)
{
	return n > INT_MAX || printbuf_memappend(pb, p, (int)n) < 0 ? -ENOMEM : 0;
}

/*
 * state.json's text: the state's head, then one attachment per line. An
 * attachment unchanged since the cache was read is copied as the text it
 * was; only new or changed ones go through json-c. span and sum record
 * where each attachment's text lies and its hash, for the next cache.
 */
static int state_text(const struct ipam_store *s, const struct ipam_state *st, struct printbuf *pb,
		      uint32_t *span, uint64_t *sum)
{
	_cleanup_json_ json_object *head = ipam_state_head_to_json(st);
	const int flags = JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE;
	const char *text;
	size_t len, hint = 0;
	int r;

	if (!head)
		return -ENOMEM;
	text = json_object_to_json_string_ext(head, flags);
	len = strlen(text);
	/* The head ends with its empty attachments array: the lines go inside it. */
	if (len < 3 || strcmp(text + len - 3, "[]}") != 0)
		return -EINVAL;
	r = pb_append(pb, text, len - 2);
	for (size_t i = 0; r == 0 && i < st->n_att; i++) {
		_cleanup_json_ json_object *o = NULL;
		const char *t;

		sum[i] = ipam_snapshot_sum(&st->att[i]);
		t = ipam_snapshot_text(&s->snap, sum[i], &hint, &len);

		if (!t) {
			o = ipam_attachment_to_json(&st->att[i]);
			if (!o)
				return -ENOMEM;
			t = json_object_to_json_string_ext(o, flags);
			len = strlen(t);
		}
		r = pb_append(pb, i ? ",\n" : "\n", i ? 2 : 1);
		span[2 * i] = (uint32_t)pb->bpos;
		if (r == 0)
			r = pb_append(pb, t, len);
		span[2 * i + 1] = (uint32_t)pb->bpos;
		if (r == 0 && pb->bpos > STATE_FILE_MAX)
			r = -EFBIG;
	}
	if (r == 0)
		r = pb_append(pb, st->n_att ? "\n]}\n" : "]}\n", st->n_att ? 4 : 3);
	return r;
}

int ipam_store_save(struct ipam_store *s, const struct ipam_state *st, struct tg_err *e)
{
	_cleanup_free_ uint32_t *span = malloc((2 * st->n_att + 1) * sizeof(*span));
	_cleanup_free_ uint64_t *sum = malloc((st->n_att + 1) * sizeof(*sum));
	struct printbuf *pb = printbuf_new();
	int r;

	r = span && sum && pb ? state_text(s, st, pb, span, sum) : -ENOMEM;
	if (r == 0 && TG_FAILPOINT("store.save.before", e) < 0) {
		printbuf_free(pb);
		return -EIO;
	}
	if (r < 0) {
		if (pb)
			printbuf_free(pb);
		return tg_fail(e, CNI_ERR_IO, r, "cannot write %s: %s", s->path, strerror(-r));
	}
	/* Written only under the exclusive lock: one writer, one fixed temp name. */
	r = tg_file_replace(s->dir, IPAM_STORE_FILE, pb->buf, (size_t)pb->bpos, s->durable);
	if (r < 0) {
		printbuf_free(pb);
		return tg_fail(e, CNI_ERR_IO, r, "cannot write %s: %s", s->path, strerror(-r));
	}
	if (s->locked && s->cache_fd >= 0)
		ipam_snapshot_write(s->cache_fd, pb->buf, (size_t)pb->bpos, st, span, sum);
	printbuf_free(pb);
	return 0;
}

int ipam_store_update(struct ipam_store *s, struct ipam_state *st, ipam_update_fn fn, void *ctx,
		      struct tg_err *e)
{
	int r = ipam_store_lock(s, e);

	if (r < 0)
		return r;
	ipam_state_free(st);
	r = ipam_store_load(s, st, e);
	if (r == 0)
		r = fn(st, ctx, e);
	if (r > 0)
		r = ipam_store_save(s, st, e);
	ipam_store_unlock(s);
	return r < 0 ? r : 0;
}
