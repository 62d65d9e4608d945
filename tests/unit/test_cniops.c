// SPDX-License-Identifier: Apache-2.0
/*
 * The plugin's operation counters (lib/cniops.h) and how the agent shows
 * them (agent/metrics.c): counts and durations read back as recorded, a
 * duration on a bucket's bound in that bucket, a file an older plugin wrote
 * (the counts alone) read and then extended in place, a file of another
 * layout left whole, and many plugin processes counting into one new file
 * at once without losing an operation.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/helpers.h"

#include "agent/agent.h"
#include "exporter/exporter.h"
#include "lib/cniops.h"

#define MAGIC1 0x54474f5053000001ull /* the counts' layout, as every release wrote it */
#define COUNTS_BYTES 608
#define MS 1000000ll

static char dir[256];

static int setup(void **state)
{
	return tmpdir_make(dir, sizeof(dir), "/tmp", "cniops") ? 0 : -1;
}

static int teardown(void **state)
{
	tmpdir_remove(dir);
	return 0;
}

static void path_in(char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s", dir, CNIOPS_FILE);
}

static void remove_file(void)
{
	char path[300];

	path_in(path, sizeof(path));
	unlink(path);
}

static uint64_t buckets_total(const struct cniops_counts *c, enum cni_cmd cmd)
{
	uint64_t n = 0;

	for (unsigned k = 0; k < CNIOPS_BUCKETS; k++)
		n += c->bucket[cmd][k];
	return n;
}

static void t_bucket_edges(void **state)
{
	/* below and on the first bound: the first bucket */
	assert_int_equal(cniops_bucket_slot(INT64_MIN), 0);
	assert_int_equal(cniops_bucket_slot(-1), 0);
	assert_int_equal(cniops_bucket_slot(0), 0);
	for (unsigned k = 0; k < CNIOPS_BUCKETS - 1; k++) {
		int64_t b = (int64_t)cniops_bucket_ns[k];

		/* a duration equal to a bound is in that bucket (le), a nanosecond more in the next */
		assert_int_equal(cniops_bucket_slot(b), k);
		assert_int_equal(cniops_bucket_slot(b + 1), k + 1);
		assert_int_equal(cniops_bucket_slot(b - 1), k);
		/* the bound and its le label say the same number */
		assert_true(strtod(cniops_bucket_le(k), NULL) * 1e9 == (double)b);
		if (k)
			assert_true(cniops_bucket_ns[k] > cniops_bucket_ns[k - 1]);
	}
	assert_int_equal(cniops_bucket_ns[0], 5 * MS);
	assert_int_equal(cniops_bucket_ns[CNIOPS_BUCKETS - 2], 10000 * MS);
	assert_int_equal(cniops_bucket_slot(10000 * MS + 1), CNIOPS_BUCKETS - 1);
	assert_int_equal(cniops_bucket_slot(INT64_MAX), CNIOPS_BUCKETS - 1);
	assert_string_equal(cniops_bucket_le(0), "0.005");
	assert_string_equal(cniops_bucket_le(CNIOPS_BUCKETS - 1), "+Inf");
}

static void t_round_trip(void **state)
{
	struct cniops_counts c;

	remove_file();
	/* control: nothing counted yet */
	assert_int_equal(cniops_read(dir, &c), -ENOENT);
	assert_false(c.has_durations);

	cniops_record(dir, CNI_CMD_ADD, 0, 3 * MS);
	cniops_record(dir, CNI_CMD_ADD, 0, 5 * MS); /* on the first bound */
	cniops_record(dir, CNI_CMD_ADD, 11, 7 * MS);
	cniops_record(dir, CNI_CMD_DEL, 0, 2000 * MS);
	cniops_record(dir, CNI_CMD_CHECK, 7, 60000 * MS);
	cniops_record(dir, CNI_CMD_GC, 0, -5);		/* a clock that went back: counted as 0 */
	cniops_record(dir, CNI_CMD_VERSION, 0, 1 * MS); /* not counted */
	assert_int_equal(cniops_read(dir, &c), 0);
	assert_true(c.has_durations);

	assert_int_equal(c.n[CNI_CMD_ADD][0], 2);
	assert_int_equal(c.n[CNI_CMD_ADD][11], 1);
	assert_int_equal(c.n[CNI_CMD_DEL][0], 1);
	assert_int_equal(c.n[CNI_CMD_CHECK][7], 1);
	assert_int_equal(c.n[CNI_CMD_GC][0], 1);
	assert_int_equal(c.n[CNI_CMD_STATUS][0], 0);

	/* durations by command, whatever the result */
	assert_int_equal(c.bucket[CNI_CMD_ADD][0], 2); /* 3 ms, 5 ms */
	assert_int_equal(c.bucket[CNI_CMD_ADD][1], 1); /* 7 ms: le 0.01 */
	assert_int_equal(buckets_total(&c, CNI_CMD_ADD), 3);
	assert_int_equal(c.sum_ns[CNI_CMD_ADD], 15 * MS);
	assert_int_equal(c.bucket[CNI_CMD_DEL][8], 1); /* 2 s: le 2.5 */
	assert_int_equal(c.sum_ns[CNI_CMD_DEL], 2000 * MS);
	assert_int_equal(c.bucket[CNI_CMD_CHECK][CNIOPS_BUCKETS - 1], 1);
	assert_int_equal(c.sum_ns[CNI_CMD_CHECK], 60000 * MS);
	assert_int_equal(c.bucket[CNI_CMD_GC][0], 1);
	assert_int_equal(c.sum_ns[CNI_CMD_GC], 0);
	assert_int_equal(buckets_total(&c, CNI_CMD_STATUS), 0);
}

/* A file as a plugin of an earlier release leaves it: the magic and the counts, 608 bytes. */
static void write_older_file(uint64_t magic, uint64_t adds_ok)
{
	uint64_t words[COUNTS_BYTES / 8] = { 0 };
	char path[300];

	words[0] = magic;
	words[1 + CNI_CMD_ADD * CNIOPS_CODES + 0] = adds_ok;
	words[1 + CNI_CMD_DEL * CNIOPS_CODES + 0] = 4;
	path_in(path, sizeof(path));
	write_file(path, (const char *)words, sizeof(words));
}

static void t_older_file_read_then_extended(void **state)
{
	struct cniops_counts c;
	char path[300], *raw;
	size_t len;
	uint64_t w;

	remove_file();
	write_older_file(MAGIC1, 9);
	assert_int_equal(cniops_read(dir, &c), 0);
	assert_int_equal(c.n[CNI_CMD_ADD][0], 9);
	assert_int_equal(c.n[CNI_CMD_DEL][0], 4);
	assert_false(c.has_durations);
	assert_int_equal(buckets_total(&c, CNI_CMD_ADD), 0);

	/* this release's plugin counts into it: the counts go on, the durations start */
	cniops_record(dir, CNI_CMD_ADD, 0, 20 * MS);
	assert_int_equal(cniops_read(dir, &c), 0);
	assert_int_equal(c.n[CNI_CMD_ADD][0], 10);
	assert_int_equal(c.n[CNI_CMD_DEL][0], 4);
	assert_true(c.has_durations);
	assert_int_equal(buckets_total(&c, CNI_CMD_ADD), 1);
	assert_int_equal(c.bucket[CNI_CMD_ADD][2], 1); /* le 0.025 */
	assert_int_equal(c.sum_ns[CNI_CMD_ADD], 20 * MS);

	/* what an older agent reads is still layout 1 at the same offsets */
	path_in(path, sizeof(path));
	raw = slurp(path, &len);
	assert_true(len > COUNTS_BYTES);
	memcpy(&w, raw, 8);
	assert_true(w == MAGIC1);
	memcpy(&w, raw + 8 * (1 + CNI_CMD_ADD * CNIOPS_CODES), 8);
	assert_int_equal(w, 10);
	free(raw);
}

static void t_other_layout_left_whole(void **state)
{
	struct cniops_counts c;
	char path[300], *before, *after;
	size_t n_before, n_after;

	remove_file();
	write_older_file(MAGIC1 + 1, 9); /* a layout this release does not know */
	path_in(path, sizeof(path));
	before = slurp(path, &n_before);
	cniops_record(dir, CNI_CMD_ADD, 0, 1 * MS);
	after = slurp(path, &n_after);
	/* grown with zeros at most: not a byte of it changed */
	assert_true(n_after >= n_before);
	assert_memory_equal(before, after, n_before);
	for (size_t i = n_before; i < n_after; i++)
		assert_int_equal(after[i], 0);
	free(before);
	free(after);
	assert_int_equal(cniops_read(dir, &c), -EBADMSG);
	assert_int_equal(c.n[CNI_CMD_ADD][0], 0);
	assert_false(c.has_durations);

	/* a file too short for the counts */
	write_file(path, "TGOPS", 5);
	assert_int_equal(cniops_read(dir, &c), -EBADMSG);
}

#define WRITERS 8
#define PER_WRITER 400

struct writer {
	int start_fd;
	int id;
};

/* One plugin process: waits for the start, then counts its operations. */
static int writer_main(void *arg)
{
	const struct writer *w = arg;
	char go;

	if (read(w->start_fd, &go, 1) != 1)
		return 2;
	for (int i = 0; i < PER_WRITER; i++)
		cniops_record(dir, i % 2 ? CNI_CMD_DEL : CNI_CMD_ADD, 0,
			      (int64_t)(w->id + 1) * MS - i % 3);
	return 0;
}

static void t_concurrent_plugins(void **state)
{
	struct cniops_counts c;
	pid_t pids[WRITERS];
	int start[2];
	uint64_t sum_add = 0;

	remove_file();
	assert_int_equal(pipe(start), 0);
	for (int i = 0; i < WRITERS; i++) {
		struct writer w = { .start_fd = start[0], .id = i };

		pids[i] = child_start(writer_main, &w);
	}
	/* all at once, on a file none has made yet: creation, growth and stamps race too */
	for (int i = 0; i < WRITERS; i++)
		assert_int_equal(write(start[1], "g", 1), 1);
	for (int i = 0; i < WRITERS; i++)
		assert_int_equal(child_wait(pids[i], "writer"), 0);
	close(start[0]);
	close(start[1]);

	assert_int_equal(cniops_read(dir, &c), 0);
	assert_true(c.has_durations);
	assert_int_equal(c.n[CNI_CMD_ADD][0], WRITERS * PER_WRITER / 2);
	assert_int_equal(c.n[CNI_CMD_DEL][0], WRITERS * PER_WRITER / 2);
	assert_int_equal(buckets_total(&c, CNI_CMD_ADD), WRITERS * PER_WRITER / 2);
	assert_int_equal(buckets_total(&c, CNI_CMD_DEL), WRITERS * PER_WRITER / 2);
	/* writers 0-4 take up to 1-5 ms (le 0.005, writer 4 on the bound), 5-7 up to 6-8 ms (le 0.01) */
	assert_int_equal(c.bucket[CNI_CMD_ADD][0] + c.bucket[CNI_CMD_DEL][0], 5 * PER_WRITER);
	assert_int_equal(c.bucket[CNI_CMD_ADD][1] + c.bucket[CNI_CMD_DEL][1], 3 * PER_WRITER);
	for (int w = 0; w < WRITERS; w++)
		for (int i = 0; i < PER_WRITER; i += 2)
			sum_add += (uint64_t)((w + 1) * MS - i % 3);
	assert_int_equal(c.sum_ns[CNI_CMD_ADD], sum_add);
}

/* ---- the agent's page ---- */

static char *render(void)
{
	static struct agent a;
	struct expo x;
	char *page;
	size_t len;

	memset(&a, 0, sizeof(a));
	snprintf(a.cfg.data_dir, sizeof(a.cfg.data_dir), "%s", dir);
	a.cfg.name = ".";
	a.opt.metrics_only = true;
	expo_init(&x, 1 << 20);
	agent_render_metrics(&a, &x);
	page = expo_take(&x, &len);
	expo_free(&x);
	assert_non_null(page);
	return page;
}

static void t_page_histogram(void **state)
{
	char *page;

	remove_file();
	cniops_record(dir, CNI_CMD_ADD, 0, 4 * MS);
	cniops_record(dir, CNI_CMD_ADD, 0, 30 * MS);
	cniops_record(dir, CNI_CMD_ADD, 11, 12000 * MS);
	page = render();
	assert_contains(page, "# TYPE tollgate_cni_operation_duration_seconds histogram\n");
	/* cumulative, every bucket, +Inf and _count the total, the sum in seconds */
	assert_contains(
		page,
		"tollgate_cni_operation_duration_seconds_bucket{command=\"ADD\",le=\"0.005\"} 1\n");
	assert_contains(
		page,
		"tollgate_cni_operation_duration_seconds_bucket{command=\"ADD\",le=\"0.025\"} 1\n");
	assert_contains(
		page,
		"tollgate_cni_operation_duration_seconds_bucket{command=\"ADD\",le=\"0.05\"} 2\n");
	assert_contains(
		page,
		"tollgate_cni_operation_duration_seconds_bucket{command=\"ADD\",le=\"10\"} 2\n");
	assert_contains(
		page,
		"tollgate_cni_operation_duration_seconds_bucket{command=\"ADD\",le=\"+Inf\"} 3\n");
	assert_contains(page,
			"tollgate_cni_operation_duration_seconds_sum{command=\"ADD\"} 12.034\n");
	assert_contains(page, "tollgate_cni_operation_duration_seconds_count{command=\"ADD\"} 3\n");
	assert_contains(page, "tollgate_cni_operations_total{command=\"ADD\",code=\"11\"} 1\n");
	/* no series for a command never run */
	assert_not_contains(page, "command=\"DEL\"");
	free(page);

	/* an older plugin's file: the counts, the family without series */
	remove_file();
	write_older_file(MAGIC1, 9);
	page = render();
	assert_contains(page, "tollgate_cni_operations_total{command=\"ADD\",code=\"0\"} 9\n");
	assert_contains(page, "# TYPE tollgate_cni_operation_duration_seconds histogram\n");
	assert_not_contains(page, "tollgate_cni_operation_duration_seconds_");
	free(page);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_bucket_edges),
		cmocka_unit_test(t_round_trip),
		cmocka_unit_test(t_older_file_read_then_extended),
		cmocka_unit_test(t_other_layout_left_whole),
		cmocka_unit_test(t_concurrent_plugins),
		cmocka_unit_test(t_page_histogram),
	};

	return cmocka_run_group_tests_name("cniops", tests, setup, teardown);
}
