// SPDX-License-Identifier: Apache-2.0
/*
 * /proc/PID netns paths are judged from the host's PID namespace only: the
 * case of tests/unit/gc_cases.h, which tests/unit/test_gc.c runs through a
 * link-time seam, here seen from real namespaces (root): this process in the
 * host's PID namespace, a child in a PID namespace of its own
 * (unshare(CLONE_NEWPID)), and a child whose /proc is an empty tmpfs in a
 * mount namespace of its own (made private first: nothing propagates back).
 * tests/integration/test_kernel_cases.sh runs this in a throwaway network
 * namespace.
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/group.h"
#include "tests/unit/gc_cases.h"

/* In the child: the namespaces of `view`, then gc_judge() in a grandchild, its verdict to `fd`. */
static int judge_in_child(enum gc_view v, int fd)
{
	struct gc_judged j;
	pid_t inner;
	int status;

	if (v == GC_FROM_CONTAINER && unshare(CLONE_NEWPID) < 0)
		return 2;
	if (v == GC_WITHOUT_PROC &&
	    (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	     mount("none", "/proc", "tmpfs", 0, NULL) < 0))
		return 2;
	/* the first child of a new PID namespace lives in it */
	inner = fork();
	if (inner == 0)
		_exit(gc_judge(&j) == 0 && write(fd, &j, sizeof(j)) == (ssize_t)sizeof(j) ? 0 : 2);
	if (inner < 0 || waitpid(inner, &status, 0) < 0)
		return 2;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

static void gc_judge_from(enum gc_view v, struct gc_judged *ret)
{
	struct stat sb;
	int fd[2], status;
	pid_t child;

	if (stat("/proc/self/ns/pid", &sb) < 0 || sb.st_ino != HOST_PID_NS_INO)
		skip(); /* not in the host's PID namespace ourselves */
	if (v == GC_FROM_HOST) {
		assert_int_equal(gc_judge(ret), 0);
		return;
	}
	assert_int_equal(pipe(fd), 0);
	fflush(NULL);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(fd[0]);
		_exit(judge_in_child(v, fd[1]));
	}
	close(fd[1]);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(read(fd[0], ret, sizeof(*ret)), sizeof(*ret));
	close(fd[0]);
}

int main(void)
{
	ADD(t_proc_paths_need_the_host_pid_namespace);
	return run_group("gc in a PID namespace");
}
