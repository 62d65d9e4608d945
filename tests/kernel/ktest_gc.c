// SPDX-License-Identifier: Apache-2.0
/*
 * /proc/PID netns paths are judged from the host's PID namespace only, seen
 * from a real PID namespace of our own (unshare(CLONE_NEWPID): root).
 * tests/integration/test_kernel_cases.sh runs this in a throwaway network
 * namespace; tests/unit/test_gc.c checks the same decision without a kernel,
 * through a link-time seam.
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

#include "node/upkeep.h"
#include "tests/unit/helpers.h"

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
	ADD(t_proc_paths_need_the_host_pid_namespace);
	return run_group("gc in a PID namespace");
}
