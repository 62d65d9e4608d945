// SPDX-License-Identifier: Apache-2.0
/*
 * Which attachments gc may collect: a netns that is gone where its directory
 * is visible, never one whose directory is missing or empty here (a
 * container without the host's /var/run/netns), and /proc/PID paths only
 * from the host's PID namespace.
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/group.h"

#include "node/node.h"
#include "tests/unit/helpers.h"

static void touch(const char *path)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fclose(f);
}

static void att(struct ipam_state *st, const char *cid, const char *netns)
{
	struct ipam_attachment *a;

	st->att = realloc(st->att, (st->n_att + 1) * sizeof(*st->att));
	assert_non_null(st->att);
	a = &st->att[st->n_att++];
	memset(a, 0, sizeof(*a));
	snprintf(a->container_id, sizeof(a->container_id), "%s", cid);
	snprintf(a->ifname, sizeof(a->ifname), "eth0");
	snprintf(a->netns, sizeof(a->netns), "%s", netns);
	a->ip = 0x0a010000u + (uint32_t)st->n_att;
}

static void t_find_sorts_live_stale_and_unseen(void **state)
{
	char dir[64], live[128], gone[128], empty[128], inempty[160], missing[160];
	struct ipam_state st;
	struct node_gc g;

	assert_true(tmpdir_make(dir, sizeof(dir), "/tmp", "gc"));
	snprintf(live, sizeof(live), "%s/netns-live", dir);
	snprintf(gone, sizeof(gone), "%s/netns-gone", dir);
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	snprintf(inempty, sizeof(inempty), "%s/netns-x", empty);
	snprintf(missing, sizeof(missing), "%s/nowhere/netns-y", dir);
	touch(live);
	assert_int_equal(mkdir(empty, 0700), 0);
	ipam_state_init(&st);
	att(&st, "live", live);
	att(&st, "gone", gone);		/* its directory holds live's: really gone */
	att(&st, "inempty", inempty);	/* an empty directory: not mounted here */
	att(&st, "missing", missing);	/* no directory at all */
	att(&st, "nonetns", "");	/* none recorded: stale */
	assert_int_equal(node_gc_find(&st, &g), 0);
	assert_int_equal(g.n_stale, 2);
	assert_string_equal(g.stale[0].container_id, "gone");
	assert_string_equal(g.stale[1].container_id, "nonetns");
	assert_int_equal(g.n_unseen, 2);
	assert_string_equal(g.unseen_dir, empty);
	node_gc_free(&g);
	ipam_state_free(&st);
	tmpdir_remove(dir);
}

/* /proc/PID/ns/net: judged from the host's PID namespace only. */
static void t_proc_paths_need_the_host_pid_namespace(void **state)
{
	struct stat sb;
	pid_t child;
	int status;

	if (stat("/proc/self/ns/pid", &sb) < 0 || sb.st_ino != 0xEFFFFFFCu)
		skip(); /* not in the host's PID namespace ourselves */
	assert_true(node_netns_dir_visible("/proc/4194303/ns/net"));
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		pid_t inner;

		if (unshare(CLONE_NEWPID) < 0)
			_exit(2);
		inner = fork(); /* the first child of a new PID namespace lives in it */
		if (inner == 0)
			_exit(node_netns_dir_visible("/proc/4194303/ns/net") ? 1 : 0);
		if (inner < 0 || waitpid(inner, &status, 0) < 0)
			_exit(2);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 2);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	ADD(t_find_sorts_live_stale_and_unseen);
	ADD(t_proc_paths_need_the_host_pid_namespace);
	return run_group("gc");
}
