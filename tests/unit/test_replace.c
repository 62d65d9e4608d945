// SPDX-License-Identifier: Apache-2.0
/*
 * A file replaced whole or not at all (lib/replace.h), as the store writes
 * state.json and the node daemon budgets.json: one fixed temp name beside
 * the file, flushed before the rename, the directory after it; a temp file
 * a killed write left is replaced by the next write, never accumulated.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/disk_ops.h"
#include "tests/unit/helpers.h"

#include "lib/replace.h"

#define NAME "budgets.json"

struct fx {
	char dir[256], path[320], tmp[330];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	/* /var/tmp: a disk, where the flushes are what a crash needs */
	if (!f || !tmpdir_make(f->dir, sizeof(f->dir), "/var/tmp", "replace"))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/" NAME, f->dir);
	snprintf(f->tmp, sizeof(f->tmp), "%s" TG_REPLACE_SUFFIX, f->path);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	tmpdir_remove(f->dir);
	free(f);
	return 0;
}

/* Entries of dir other than . and .. */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

static void assert_holds(const char *path, const char *text)
{
	size_t len = 0;
	char *back = slurp(path, &len);

	assert_int_equal(len, strlen(text));
	assert_memory_equal(back, text, len);
	free(back);
}

/* The temp file is flushed before the rename, the directory after it; its name is fixed. */
static void t_flushes_file_renames_then_flushes_dir(void **state)
{
	struct fx *f = *state;
	static const char text[] = "{\"epoch\": 3}\n";
	char ops[128];
	struct stat sb;

	disk_ops_arm();
	assert_int_equal(tg_file_replace(f->dir, NAME, text, strlen(text), true), 0);
	disk_ops_text(ops, sizeof(ops));
	assert_string_equal(ops, "fsync-file rename fsync-dir");
	assert_string_equal(disk_ops.rename_from, f->tmp);
	assert_string_equal(disk_ops.rename_to, f->path);
	assert_holds(f->path, text);
	assert_int_equal(stat(f->path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
	assert_int_equal(entries(f->dir), 1); /* no temp file left */
	/* a second write, the same name again */
	disk_ops_arm();
	assert_int_equal(tg_file_replace(f->dir, NAME, "{}\n", 3, true), 0);
	disk_ops_text(ops, sizeof(ops));
	assert_string_equal(ops, "fsync-file rename fsync-dir");
	assert_string_equal(disk_ops.rename_from, f->tmp);
	assert_holds(f->path, "{}\n");
	assert_int_equal(entries(f->dir), 1);
}

/* On tmpfs (durable false) the flushes buy nothing: the rename alone. */
static void t_not_durable_renames_only(void **state)
{
	struct fx *f = *state;
	char ops[128];

	disk_ops_arm();
	assert_int_equal(tg_file_replace(f->dir, NAME, "{}\n", 3, false), 0);
	disk_ops_text(ops, sizeof(ops));
	assert_string_equal(ops, "rename");
	assert_string_equal(disk_ops.rename_from, f->tmp);
	assert_holds(f->path, "{}\n");
}

/*
 * Writes SIGKILLed before their rename leave the temp file (here, three
 * times over, each time torn): the next write replaces it and the file
 * takes the new bytes; what is left is the file alone, never a pile of
 * temp files.
 */
static void t_killed_writes_temp_file_is_replaced(void **state)
{
	struct fx *f = *state;
	static const char text[] = "{\"namespaces\": []}\n";

	assert_int_equal(tg_file_replace(f->dir, NAME, "{\"old\": 1}\n", 11, true), 0);
	for (int i = 0; i < 3; i++) {
		write_file(f->tmp, "{\"namesp", 8); /* a write killed mid-way */
		assert_int_equal(entries(f->dir), 2);
		assert_holds(f->path, "{\"old\": 1}\n"); /* the file is still the old one, whole */
	}
	disk_ops_arm();
	assert_int_equal(tg_file_replace(f->dir, NAME, text, strlen(text), true), 0);
	disk_ops.armed = false;
	assert_string_equal(disk_ops.rename_from, f->tmp);
	assert_holds(f->path, text);
	assert_int_equal(entries(f->dir), 1);
}

/* A symlink planted under the temp name is removed, never followed. */
static void t_planted_symlink_is_not_followed(void **state)
{
	struct fx *f = *state;
	char target[340];

	snprintf(target, sizeof(target), "%s/elsewhere", f->dir);
	write_file(target, "keep\n", 5);
	assert_int_equal(symlink(target, f->tmp), 0);
	assert_int_equal(tg_file_replace(f->dir, NAME, "{}\n", 3, true), 0);
	assert_holds(target, "keep\n");
	assert_holds(f->path, "{}\n");
	assert_int_equal(entries(f->dir), 2); /* the file and the untouched target */
}

/* A directory there cannot be removed: a name of its own, and nothing left behind. */
static void t_directory_at_temp_name(void **state)
{
	struct fx *f = *state;

	assert_int_equal(mkdir(f->tmp, 0700), 0);
	assert_int_equal(tg_file_replace(f->dir, NAME, "{}\n", 3, true), 0);
	assert_holds(f->path, "{}\n");
	assert_int_equal(rmdir(f->tmp), 0);
	assert_int_equal(entries(f->dir), 1);
}

/* A write that cannot happen leaves the file as it was and no temp file. */
static void t_failure_leaves_the_file(void **state)
{
	struct fx *f = *state;
	char missing[300];

	snprintf(missing, sizeof(missing), "%s/gone", f->dir);
	assert_int_equal(tg_file_replace(missing, NAME, "{}\n", 3, true), -ENOENT);
	assert_int_equal(entries(f->dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_flushes_file_renames_then_flushes_dir, setup,
						teardown),
		cmocka_unit_test_setup_teardown(t_not_durable_renames_only, setup, teardown),
		cmocka_unit_test_setup_teardown(t_killed_writes_temp_file_is_replaced, setup,
						teardown),
		cmocka_unit_test_setup_teardown(t_planted_symlink_is_not_followed, setup, teardown),
		cmocka_unit_test_setup_teardown(t_directory_at_temp_name, setup, teardown),
		cmocka_unit_test_setup_teardown(t_failure_leaves_the_file, setup, teardown),
	};

	return cmocka_run_group_tests_name("replace", tests, NULL, NULL);
}
