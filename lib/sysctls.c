// SPDX-License-Identifier: Apache-2.0
/* The node's sysctl floors (lib/sysctls.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sysctls.h"
#include "lib/util.h"

/* Big flat subnets: thousands of neighbours (at 7,500 nodes "neighbor table overflow"). */
const struct tg_sysctl_floor tg_sysctl_floors[] = {
	{ "net.ipv4.ip_forward", 1, true },
	{ "net.ipv4.neigh.default.gc_thresh1", 80000, false },
	{ "net.ipv4.neigh.default.gc_thresh2", 90000, false },
	{ "net.ipv4.neigh.default.gc_thresh3", 100000, false },
};
const size_t tg_sysctl_floors_n = ARRAY_SIZE(tg_sysctl_floors);

int tg_sysctl_path(const char *proc_sys, const struct tg_sysctl_floor *f, char *buf, size_t size)
{
	size_t n = (size_t)snprintf(buf, size, "%s/%s", proc_sys, f->name);

	if (n >= size)
		return -ENAMETOOLONG;
	/* net.ipv4.ip_forward -> net/ipv4/ip_forward (no sysctl name holds a '/') */
	for (char *c = buf + (n - strlen(f->name)); *c; c++)
		if (*c == '.')
			*c = '/';
	return 0;
}

int tg_sysctl_read(const char *proc_sys, const struct tg_sysctl_floor *f, long *ret)
{
	char path[512], line[32], *end;
	int r = tg_sysctl_path(proc_sys, f, path, sizeof(path));

	if (r < 0)
		return r;
	r = read_line_file(path, line, sizeof(line));
	if (r < 0)
		return r;
	errno = 0;
	*ret = strtol(line, &end, 10);
	return errno || end == line ? -EBADMSG : 0;
}
