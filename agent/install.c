// SPDX-License-Identifier: Apache-2.0
/*
 * The plugin's installation: the binary into the runtime's CNI bin directory
 * and the conflist into its conf directory, each through a temp file in the
 * same directory and a rename, so that kubelet never reads half a file, and
 * the conflist last: the runtime sees the network only once an ADD can
 * succeed (the agent installs after the pool exists and the node is declared).
 * The conflist written is the bytes the agent validated; each write is
 * fsynced, file and then directory, and a temp file a kill left is removed
 * at the next install.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "lib/cleanup.h"
#include "lib/replace.h"
#include "lib/util.h"

#define PLUGIN_MAX (64 << 20)

static int sync_dir(const char *dir);

int agent_write_file(const char *dir, const char *name, const void *buf, size_t len, unsigned mode)
{
	char tmp[4096], path[4096];
	int fd, r;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name) >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* the mode first: the temp name is private, and the file appears whole */
	if (fchmod(fd, mode) < 0) {
		r = -errno;
		close(fd);
		unlink(tmp);
		return r;
	}
	r = tg_file_commit(fd, tmp, path, buf, len, true);
	if (r < 0)
		return r;
	/* The rename itself lasts only once the directory is on disk too. */
	return sync_dir(dir);
}

static int sync_dir(const char *dir)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || fsync(fd) < 0)
		return errno == EINVAL ? 0 : -errno; /* a filesystem that cannot sync a directory */
	return 0;
}

/* A temp file of agent_write_file's for `name`: ".NAME." and mkostemp's six characters. */
static bool is_temp_of(const char *entry, const char *name)
{
	size_t n = strlen(name);

	if (entry[0] != '.' || strncmp(entry + 1, name, n) != 0 || entry[n + 1] != '.' ||
	    strlen(entry + n + 2) != 6)
		return false;
	for (const char *c = entry + n + 2; *c; c++)
		if (!isalnum((unsigned char)*c))
			return false;
	return true;
}

/*
 * Temp files a kill left between mkostemp and rename: removed before the
 * next write (only this agent writes them; one agent runs per node).
 */
static void remove_stale_temps(const char *dir, const char *name)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (is_temp_of(de->d_name, name))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

/* Whether dir/name already holds exactly these bytes (nothing to replace). */
static bool same_file(const char *dir, const char *name, const char *buf, size_t len)
{
	_cleanup_free_ char *have = NULL;
	char path[4096];
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return read_file(path, len + 1, &have, &n) == 0 && n == len && memcmp(have, buf, len) == 0;
}

/* buf: the bytes to install as dir/name. 1 when it wrote them, 0 when they were there. */
static int install_bytes(const char *dir, const char *name, const char *buf, size_t len,
			 unsigned mode, struct tg_err *e)
{
	int r;

	remove_stale_temps(dir, name);
	if (same_file(dir, name, buf, len))
		return 0;
	r = mkdir_p(dir, 0755);
	if (r == 0)
		r = agent_write_file(dir, name, buf, len, mode);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot install %s/%s: %s", dir, name,
			       strerror(-r));
	return 1;
}

static int install_one(const char *src, const char *dir, const char *name, unsigned mode,
		       struct tg_err *e)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r = read_file(src, PLUGIN_MAX, &buf, &len);

	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot read %s: %s", src, strerror(-r));
	return install_bytes(dir, name, buf, len, mode, e);
}

int agent_install(struct agent *a, struct tg_err *e)
{
	int r, wrote = 0;

	if (!a->opt.cni_conf_dir)
		return 0;
	if (a->opt.cni_bin_dir) {
		r = install_one(a->opt.plugin_path, a->opt.cni_bin_dir, "tollgate", 0755, e);
		if (r < 0)
			return r;
		wrote += r;
	}
	/* The bytes that were validated, never the file read again: it may have been swapped since. */
	if (!a->cfg_text)
		return tg_fail(e, CNI_ERR_IO, -ENOENT, "no valid config to install");
	r = install_bytes(a->opt.cni_conf_dir, a->opt.conf_name, a->cfg_text, a->cfg_len, 0644, e);
	if (r < 0)
		return r;
	wrote += r;
	a->stats.installs += wrote > 0;
	a->installed = true;
	return 0;
}
