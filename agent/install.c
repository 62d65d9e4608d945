// SPDX-License-Identifier: Apache-2.0
/*
 * The plugin's installation: the binary into the runtime's CNI bin directory
 * and the conflist into its conf directory, each through a temp file in the
 * same directory and a rename, so that kubelet never reads half a file, and
 * the conflist last: the runtime sees the network only once an ADD can
 * succeed (the agent installs after the pool exists and the node is declared).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "lib/cleanup.h"
#include "lib/util.h"

#define PLUGIN_MAX (64 << 20)

int agent_write_file(const char *dir, const char *name, const void *buf, size_t len,
		     unsigned mode)
{
	char tmp[4096], path[4096];
	int fd, r;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, name) >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = write_all(fd, buf, len);
	if (r == 0 && fchmod(fd, mode) < 0)
		r = -errno;
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
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

static int install_one(const char *src, const char *dir, const char *name, unsigned mode,
		       struct tg_err *e)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r = read_file(src, PLUGIN_MAX, &buf, &len);

	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot read %s: %s", src, strerror(-r));
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
	r = install_one(a->opt.config_path, a->opt.cni_conf_dir, a->opt.conf_name, 0644, e);
	if (r < 0)
		return r;
	wrote += r;
	a->stats.installs += wrote > 0;
	a->installed = true;
	return 0;
}
