// SPDX-License-Identifier: Apache-2.0
/*
 * The node daemon's writes into the host's CNI directories (agent/install.c):
 * a file there is whole or absent after a crash, and so is its name: the
 * temp file is flushed before the rename, the directory after it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/disk_ops.h"
#include "tests/unit/helpers.h"

#include "agent/agent.h"

static void t_write_file_flushes_file_then_directory(void **state)
{
	char dir[] = "/var/tmp/tollgate-install.XXXXXX", path[64], ops[128];
	static const char text[] = "{\"cniVersion\": \"1.0.0\"}\n";
	size_t len = 0;
	char *back;

	assert_non_null(mkdtemp(dir));
	disk_ops_arm();
	assert_int_equal(agent_write_file(dir, "10-tollgate.conflist", text, strlen(text), 0644),
			 0);
	disk_ops_text(ops, sizeof(ops));
	assert_string_equal(ops, "fsync-file rename fsync-dir");
	snprintf(path, sizeof(path), "%s/10-tollgate.conflist", dir);
	back = slurp(path, &len);
	assert_int_equal(len, strlen(text));
	assert_memory_equal(back, text, len);
	free(back);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0); /* nothing else left: no temp file */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_write_file_flushes_file_then_directory),
	};

	return cmocka_run_group_tests_name("install", tests, NULL, NULL);
}
