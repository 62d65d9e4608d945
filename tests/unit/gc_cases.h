/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_GC_CASES_H
#define TG_TEST_GC_CASES_H

/*
 * gc's /proc/PID netns paths are judged from the host's PID namespace only:
 * the case, written once. tests/unit/test_gc.c runs it with the PID
 * namespace told through a link-time seam on stat; tests/kernel/ktest_gc.c
 * from real namespaces of its own (root). Each defines gc_judge_from(),
 * which judges one attachment at /proc/4194303/ns/net (a PID above the
 * kernel's limit: never a live process) as seen from the host's PID
 * namespace, a container's, or without /proc, by gc_judge() here.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "node/upkeep.h"

/* The kernel's inode of the initial PID namespace (PROC_PID_INIT_INO, include/linux/proc_ns.h). */
#define HOST_PID_NS_INO 0xEFFFFFFCu
#define GC_PROC_PATH "/proc/4194303/ns/net"

enum gc_view { GC_FROM_HOST, GC_FROM_CONTAINER, GC_WITHOUT_PROC };

/* What gc made of the attachment; plain data, as it may come from a child process. */
struct gc_judged {
	bool visible;	  /* node_netns_dir_visible */
	bool stale_is_it; /* the stale one, if any, is that attachment */
	size_t n_stale, n_unseen;
};

static void gc_judge_from(enum gc_view v, struct gc_judged *ret);

/* Judges the attachment from wherever this process is; no assertion (it may run in a child). */
static int gc_judge(struct gc_judged *ret)
{
	struct ipam_state st;
	struct node_gc g;
	int r;

	ipam_state_init(&st);
	st.att = calloc(1, sizeof(*st.att));
	if (!st.att)
		return -ENOMEM;
	st.n_att = 1;
	snprintf(st.att[0].container_id, sizeof(st.att[0].container_id), "procpath");
	snprintf(st.att[0].ifname, sizeof(st.att[0].ifname), "eth0");
	snprintf(st.att[0].netns, sizeof(st.att[0].netns), "%s", GC_PROC_PATH);
	st.att[0].ip = 0x0a010001u;
	memset(ret, 0, sizeof(*ret));
	ret->visible = node_netns_dir_visible(GC_PROC_PATH);
	r = node_gc_find(&st, &g);
	if (r == 0) {
		ret->n_stale = g.n_stale;
		ret->n_unseen = g.n_unseen;
		ret->stale_is_it = g.n_stale == 0 ||
				   strcmp(g.stale[0].container_id, "procpath") == 0;
		node_gc_free(&g);
	}
	ipam_state_free(&st);
	return r;
}

/* /proc/PID/ns/net: judged from the host's PID namespace only. */
static void t_proc_paths_need_the_host_pid_namespace(void **state)
{
	struct gc_judged j;

	/* the host's: that process is gone, and its attachment is stale */
	gc_judge_from(GC_FROM_HOST, &j);
	assert_true(j.visible);
	assert_int_equal(j.n_stale, 1);
	assert_int_equal(j.n_unseen, 0);
	assert_true(j.stale_is_it);
	/* a PID namespace of a container: the host's processes are not seen, nothing is collected */
	gc_judge_from(GC_FROM_CONTAINER, &j);
	assert_false(j.visible);
	assert_int_equal(j.n_stale, 0);
	assert_int_equal(j.n_unseen, 1);
	/* no /proc to ask: not judged either */
	gc_judge_from(GC_WITHOUT_PROC, &j);
	assert_false(j.visible);
	assert_int_equal(j.n_stale, 0);
	assert_int_equal(j.n_unseen, 1);
}

#endif
