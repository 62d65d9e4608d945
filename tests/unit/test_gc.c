// SPDX-License-Identifier: Apache-2.0
/*
 * Which attachments gc may collect: a netns that is gone where its directory
 * is visible, never one whose directory is missing or empty here (a
 * container without the host's /var/run/netns), and /proc/PID paths only
 * from the host's PID namespace (the case of tests/unit/gc_cases.h, which
 * PID namespace this is told through a link-time seam).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/group.h"

#include "node/upkeep.h"
#include "tests/unit/helpers.h"
#include "tests/unit/gc_cases.h"

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
	att(&st, "gone", gone);	      /* its directory holds live's: really gone */
	att(&st, "inempty", inempty); /* an empty directory: not mounted here */
	att(&st, "missing", missing); /* no directory at all */
	att(&st, "nonetns", "");      /* none recorded: stale */
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

/*
 * Which PID namespace this process is in, as the kernel says it: the link
 * step wraps stat (-Wl,--wrap=stat, see the Makefile), and while a test arms
 * it a stat of /proc/self/ns/pid answers with that test's inode (or error);
 * every other path, and every call unarmed, goes to the real stat. No PID
 * namespace is made here; tests/kernel/ktest_gc.c makes them.
 */
static struct {
	bool armed;
	int err; /* stat fails with it (no /proc) */
	ino_t ino;
	unsigned calls;
} pidns;

int __real_stat(const char *path, struct stat *sb);
int __wrap_stat(const char *path, struct stat *sb);

int __wrap_stat(const char *path, struct stat *sb)
{
	if (!pidns.armed || strcmp(path, "/proc/self/ns/pid") != 0)
		return __real_stat(path, sb);
	pidns.calls++;
	if (pidns.err) {
		errno = pidns.err;
		return -1;
	}
	memset(sb, 0, sizeof(*sb));
	sb->st_mode = S_IFREG | 0444;
	sb->st_ino = pidns.ino;
	return 0;
}

static void gc_judge_from(enum gc_view v, struct gc_judged *ret)
{
	pidns = (typeof(pidns)){ .armed = true };
	if (v == GC_FROM_HOST)
		pidns.ino = HOST_PID_NS_INO;
	else if (v == GC_FROM_CONTAINER)
		pidns.ino = 4026532301u;
	else
		pidns.err = ENOENT;
	assert_int_equal(gc_judge(ret), 0);
	pidns.armed = false;
	/* the seam was asked: what it answered is what the test is about */
	assert_true(pidns.calls > 0);
}

int main(void)
{
	ADD(t_find_sorts_live_stale_and_unseen);
	ADD(t_proc_paths_need_the_host_pid_namespace);
	return run_group("gc");
}
