// SPDX-License-Identifier: Apache-2.0
/* The node's sysctl floors (lib/sysctls.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sysctls.h"
#include "lib/util.h"

#define NEIGH_WHY "big subnets overflow the neighbour table"
/*
 * Big flat subnets: thousands of neighbours (at 7,500 nodes "neighbor table
 * overflow"). Source routing: a packet carrying its own route (IPv4 LSRR/SSRR)
 * would have the node forward it where the sender says, past the routes and
 * policy the node declares; the kernel honours it only where both `all` and
 * the interface's own setting allow, and a new interface takes `default`.
 */
const struct tg_sysctl_floor tg_sysctl_floors[] = {
	{ "net.ipv4.ip_forward", 1, false, "pods reach nothing beyond the node", true },
	{ "net.ipv4.neigh.default.gc_thresh1", 80000, false, NEIGH_WHY, false },
	{ "net.ipv4.neigh.default.gc_thresh2", 90000, false, NEIGH_WHY, false },
	{ "net.ipv4.neigh.default.gc_thresh3", 100000, false, NEIGH_WHY, false },
	{ "net.ipv4.conf.all.accept_source_route", 0, true,
	  "the node forwards source-routed packets where their sender says", false },
	{ "net.ipv4.conf.default.accept_source_route", 0, true,
	  "the node forwards source-routed packets where their sender says", false },
};
const size_t tg_sysctl_floors_n = ARRAY_SIZE(tg_sysctl_floors);

bool tg_sysctl_ok(const struct tg_sysctl_floor *f, long v)
{
	return f->exact ? v == f->min : v >= f->min;
}

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
