// SPDX-License-Identifier: Apache-2.0
/*
 * exporter_render against the kernel's nftables (root and the nft binary):
 * counters made with `nft -f` come out with their labels (pods by hostVeth
 * from the store), and a counter made anew (its table deleted and
 * re-created, or the counter alone), with a lower value or one already past
 * the old, never makes a series go backwards; no table -> collector nftables
 * 0 and the rest still rendered; a corrupt store -> collector ipam 0.
 *
 * tests/integration/test_kernel_cases.sh runs this in a network namespace of
 * its own, and the process unshares another before its first table
 * (tests/unit/netns.h): run by hand it never sees the host's tables either.
 * The same cases against a fake nfnetlink, without a kernel, are in
 * tests/unit/test_expo.c.
 */
#include <errno.h>
#include <sched.h>
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

#include "exporter/exporter.h"
#include "tests/unit/helpers.h"
#include "tests/unit/netns.h"

/* ---- exporter_render in a private network namespace ---- */

struct render_env {
	char dir[64];
	char net_dir[128];
	struct exporter *ex;
	struct expo page;
};

static int render_setup(void **state)
{
	struct render_env *env;

	if (!in_private_netns()) {
		*state = NULL;
		return 0;
	}
	env = calloc(1, sizeof(*env));
	if (!env)
		return -1;
	if (!tmpdir_make(env->dir, sizeof(env->dir), "/tmp", "expo")) {
		free(env);
		return -1;
	}
	snprintf(env->net_dir, sizeof(env->net_dir), "%s/tgunit", env->dir);
	if (mkdir(env->net_dir, 0700) < 0) {
		tmpdir_remove(env->dir);
		free(env);
		return -1;
	}
	env->ex = exporter_new(env->dir, "tgunit");
	expo_init(&env->page, 8u << 20);
	/* each test starts without a table */
	nft_quiet("delete table inet tollgate");
	*state = env;
	return 0;
}

static int render_teardown(void **state)
{
	struct render_env *env = *state;

	if (!env)
		return 0;
	exporter_free(env->ex);
	expo_free(&env->page);
	tmpdir_remove(env->dir);
	nft_quiet("delete table inet tollgate");
	free(env);
	return 0;
}

static const char *render(struct render_env *env)
{
	int r;

	expo_reset(&env->page);
	r = exporter_render(env->ex, &env->page);
	assert_int_equal(r, 0);
	assert_false(env->page.overflow);
	return env->page.buf;
}

static void write_state(struct render_env *env, const char *json)
{
	char path[256], tmp[256];

	snprintf(path, sizeof(path), "%s/state.json", env->net_dir);
	snprintf(tmp, sizeof(tmp), "%s/state.json.tmp", env->net_dir);
	write_file(tmp, json, strlen(json));
	assert_int_equal(rename(tmp, path), 0); /* a new inode, as the plugin writes it */
}

/* Every family has # HELP and # TYPE before its first sample; samples are well-formed. */
static void assert_well_formed(const char *page)
{
	char *copy = strdup(page), *save = NULL, *line;
	char last_type[128] = "";

	assert_non_null(copy);
	assert_true(strlen(page) > 0 && page[strlen(page) - 1] == '\n');
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[128];

		if (strncmp(line, "# HELP ", 7) == 0)
			continue;
		if (strncmp(line, "# TYPE ", 7) == 0) {
			if (sscanf(line + 7, "%127s", last_type) != 1)
				fail_msg("bad TYPE line: %s", line);
			continue;
		}
		if (line[0] == '#')
			fail_msg("unexpected comment: %s", line);
		if (sscanf(line, "%127[a-zA-Z0-9_:]", name) != 1)
			fail_msg("bad sample line: %s", line);
		if (strcmp(name, last_type) != 0)
			fail_msg("sample %s outside its family (last TYPE %s)", line, last_type);
		if (!strrchr(line, ' ') || !strrchr(line, ' ')[1])
			fail_msg("sample without value: %s", line);
	}
	free(copy);
}

static void t_render_no_table_no_store(void **state)
{
	struct render_env *env = *state;
	const char *p;

	NEED_NETNS();
	p = render(env);
	assert_well_formed(p);
	assert_contains(p, "# TYPE tollgate_build_info gauge\ntollgate_build_info{version=\"");
	assert_contains(p, "tollgate_collector_up{collector=\"nftables\"} 0\n");
	assert_contains(p, "tollgate_collector_up{collector=\"ipam\"} 1\n");
	assert_contains(p, "tollgate_ipam_addresses{state=\"total\"} 0\n");
	assert_contains(p, "tollgate_ipam_attachments 0\n");
	assert_contains(p, "# TYPE tollgate_scrape_duration_seconds gauge\n");
	assert_contains(p, "tollgate_collector_duration_seconds{collector=\"nftables\"} ");
	assert_not_contains(p, "tollgate_namespace_bytes_total{");
}

static void t_render_corrupt_store(void **state)
{
	struct render_env *env = *state;
	const char *p;

	NEED_NETNS();
	write_state(env, "{\"version\":1,\"attachments\":[{\"containerId\":");
	p = render(env);
	assert_well_formed(p);
	assert_contains(p, "tollgate_collector_up{collector=\"ipam\"} 0\n");
	assert_contains(p, "tollgate_build_info{");
	assert_not_contains(p, "tollgate_ipam_addresses{");
	/* again (a corrupt file is re-read, not cached as good) */
	p = render(env);
	assert_contains(p, "tollgate_collector_up{collector=\"ipam\"} 0\n");
	/* fixed: back to 1 */
	write_state(env, "{\"version\":1,\"bootId\":\"b\",\"pool\":{\"source\":\"static\","
			 "\"addresses\":[\"10.1.0.10-10.1.0.19\"]},\"cooling\":[],\"attachments\":[]}");
	p = render(env);
	assert_contains(p, "tollgate_collector_up{collector=\"ipam\"} 1\n");
	assert_contains(p, "tollgate_ipam_addresses{state=\"total\"} 10\n");
	assert_contains(p, "tollgate_ipam_addresses{state=\"free\"} 10\n");
}

/* Lines of the page that start with `prefix` (a family's name and "{", a label set...). */
static size_t lines_starting(const char *page, const char *prefix)
{
	size_t n = 0, len = strlen(prefix);

	for (const char *l = page; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		n += strncmp(l, prefix, len) == 0;
	return n;
}

#define assert_lines(page, prefix, want)                                                   \
	do {                                                                               \
		size_t got_ = lines_starting((page), (prefix));                            \
		if (got_ != (size_t)(want))                                                \
			fail_msg("%zu lines start with %s, expected %zu", got_, (prefix),  \
				 (size_t)(want));                                          \
	} while (0)

/* No sample line (a line not starting with '#') has exactly `value` as its value. */
static void assert_no_sample_valued(const char *page, const char *value)
{
	size_t vlen = strlen(value);

	for (const char *l = page; l && *l;) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);

		if (l[0] != '#' && len > vlen && l[len - vlen - 1] == ' ' &&
		    memcmp(l + len - vlen, value, vlen) == 0)
			fail_msg("a sample has the value %s: %.*s", value, (int)len, l);
		l = end ? end + 1 : NULL;
	}
}

#define STATE_TWO_PODS                                                                         \
	"{\"version\":1,\"bootId\":\"b\",\"pool\":{\"source\":\"static\",\"lastSyncMs\":"      \
	"1764403200500,\"addresses\":[\"10.1.0.10-10.1.0.19\"]},\"cooling\":[],\"attachments\":[" \
	"{\"containerId\":\"c1\",\"ifname\":\"eth0\",\"ip\":\"10.1.0.10\",\"netns\":\"/x\","     \
	"\"namespace\":\"research\",\"pod\":\"trainer-0\",\"hostVeth\":\"tg000000000001\","      \
	"\"created\":1},"                                                                        \
	"{\"containerId\":\"c2\",\"ifname\":\"eth0\",\"ip\":\"10.1.0.11\",\"netns\":\"/x\","     \
	"\"namespace\":\"\",\"pod\":\"we\\\"ird\\\\pod\",\"hostVeth\":\"tg000000000002\","      \
	"\"created\":1}]}"

static void t_render_counters_with_labels(void **state)
{
	struct render_env *env = *state;
	const char *p;

	NEED_NETNS_NFT();
	write_state(env, STATE_TWO_PODS);
	nft_apply("table inet tollgate {\n"
		  " counter ns_research_egress_internal { packets 3 bytes 300 }\n"
		  " counter ns_research_ingress_internet { packets 1 bytes 18446744073709551615 }\n"
		  " counter ns__egress_internet { packets 2 bytes 200 }\n"
		  " counter pod_tg000000000001_egress_internal { packets 3 bytes 300 }\n"
		  " counter pod_tg000000000002_egress_internet { packets 2 bytes 200 }\n"
		  " counter pod_tg0000000000ff_egress_internet { packets 9 bytes 900 }\n"
		  " counter host_ingress_internal { packets 5 bytes 500 }\n"
		  " counter unrelated { packets 7 bytes 700 }\n"
		  "}\n");
	p = render(env);
	assert_well_formed(p);
	assert_contains(p, "tollgate_collector_up{collector=\"nftables\"} 1\n");
	assert_contains(p, "tollgate_namespace_bytes_total{namespace=\"research\",direction=\"egress\","
			   "traffic=\"internal\"} 300\n");
	assert_contains(p, "tollgate_namespace_packets_total{namespace=\"research\",direction="
			   "\"egress\",traffic=\"internal\"} 3\n");
	assert_contains(p, "tollgate_namespace_bytes_total{namespace=\"research\",direction="
			   "\"ingress\",traffic=\"internet\"} 18446744073709551615\n");
	assert_contains(p, "tollgate_namespace_bytes_total{namespace=\"\",direction=\"egress\","
			   "traffic=\"internet\"} 200\n");
	assert_contains(p, "tollgate_pod_bytes_total{namespace=\"research\",pod=\"trainer-0\","
			   "direction=\"egress\",traffic=\"internal\"} 300\n");
	/* store values are escaped */
	assert_contains(p, "tollgate_pod_bytes_total{namespace=\"\",pod=\"we\\\"ird\\\\pod\","
			   "direction=\"egress\",traffic=\"internet\"} 200\n");
	/*
	 * A pod counter whose veth is not in the store has no labels to show: the
	 * pod families hold exactly the two pods of the store, no series with
	 * empty pod labels, and no sample anywhere carries its 9 packets / 900 bytes.
	 */
	assert_lines(p, "tollgate_pod_bytes_total{", 2);
	assert_lines(p, "tollgate_pod_packets_total{", 2);
	assert_lines(p, "tollgate_pod_bytes_total{namespace=\"\",pod=\"\",", 0);
	assert_lines(p, "tollgate_pod_packets_total{namespace=\"\",pod=\"\",", 0);
	assert_no_sample_valued(p, "900");
	assert_no_sample_valued(p, "9");
	assert_contains(p, "tollgate_host_bytes_total{direction=\"ingress\",traffic=\"internal\"} 500\n");
	assert_contains(p, "tollgate_host_packets_total{direction=\"ingress\",traffic=\"internal\"} 5\n");
	/* a counter of no known kind ("unrelated") is no series of any family */
	assert_lines(p, "tollgate_namespace_bytes_total{", 3);
	assert_lines(p, "tollgate_namespace_packets_total{", 3);
	assert_lines(p, "tollgate_host_bytes_total{", 1);
	assert_lines(p, "tollgate_host_packets_total{", 1);
	assert_no_sample_valued(p, "700");
	assert_no_sample_valued(p, "7");
	assert_contains(p, "tollgate_ipam_attachments 2\n");
	assert_contains(p, "tollgate_ipam_addresses{state=\"allocated\"} 2\n");
	assert_contains(p, "tollgate_ipam_last_sync_timestamp_seconds 1764403200.5\n");
}

/* Value of the first line starting with `prefix` (the sample's name and labels). */
static unsigned long long sample_value(const char *page, const char *prefix)
{
	const char *s = strstr(page, prefix);

	if (!s)
		fail_msg("no sample %s on the page (%zu bytes)", prefix, strlen(page));
	/* cppcheck-suppress nullPointerArithmeticRedundantCheck ; fail_msg() does not return */
	return strtoull(s + strlen(prefix), NULL, 10);
}

#define assert_sample(page, prefix, want)                                                  \
	do {                                                                               \
		unsigned long long got_ = sample_value((page), (prefix));                  \
		if (got_ != (unsigned long long)(want))                                    \
			fail_msg("%s%llu, expected %llu", (prefix), got_,                  \
				 (unsigned long long)(want));                              \
	} while (0)

#define NS_EI "tollgate_namespace_bytes_total{namespace=\"research\",direction=\"egress\",traffic=\"internal\"} "
#define NS_EI_P "tollgate_namespace_packets_total{namespace=\"research\",direction=\"egress\",traffic=\"internal\"} "

static void t_render_monotonic_across_rebuild(void **state)
{
	struct render_env *env = *state;
	const char *p;

	NEED_NETNS_NFT();
	write_state(env, STATE_TWO_PODS);
	nft_apply("table inet tollgate { counter ns_research_egress_internal { packets 3 bytes 300; }; }\n");
	p = render(env);
	assert_sample(p, NS_EI, 300);
	/* table deleted (scraped while it is missing): nothing served for it */
	nft_apply("delete table inet tollgate\n");
	p = render(env);
	assert_not_contains(p, NS_EI);
	/* rebuilt from 0 and counting again: the old 300 is carried */
	nft_apply("table inet tollgate { counter ns_research_egress_internal { packets 1 bytes 100; }; }\n");
	p = render(env);
	assert_sample(p, NS_EI, 400);
	assert_sample(p, NS_EI_P, 4);
	/* flushed again (without a scrape in between) */
	nft_apply("delete table inet tollgate\n"
		  "table inet tollgate { counter ns_research_egress_internal { packets 1 bytes 50; }; }\n");
	p = render(env);
	assert_sample(p, NS_EI, 450);
	assert_sample(p, NS_EI_P, 5);
	/*
	 * made anew and already past the last value seen (50) by the next
	 * scrape: a new counter all the same, its 60 come on top
	 */
	nft_apply("delete counter inet tollgate ns_research_egress_internal\n"
		  "add counter inet tollgate ns_research_egress_internal { packets 2 bytes 60 }\n");
	p = render(env);
	assert_sample(p, NS_EI, 510);
	assert_sample(p, NS_EI_P, 7);
	p = render(env);
	assert_sample(p, NS_EI, 510);
	/*
	 * the table made anew with the same objects in the same order (their
	 * handles start again): still a new counter
	 */
	nft_apply("delete table inet tollgate\n"
		  "table inet tollgate { counter ns_research_egress_internal { packets 4 bytes 90; }; }\n");
	p = render(env);
	assert_sample(p, NS_EI, 600);
	assert_sample(p, NS_EI_P, 11);
}

static void t_render_table_deleted_collector_down(void **state)
{
	struct render_env *env = *state;
	const char *p;

	NEED_NETNS_NFT();
	write_state(env, STATE_TWO_PODS);
	nft_apply("table inet tollgate { counter ns_research_egress_internal { packets 3 bytes 300; }; }\n");
	p = render(env);
	assert_contains(p, "tollgate_collector_up{collector=\"nftables\"} 1\n");
	nft_apply("delete table inet tollgate\n");
	p = render(env);
	assert_well_formed(p);
	assert_contains(p, "tollgate_collector_up{collector=\"nftables\"} 0\n");
	assert_contains(p, "tollgate_collector_up{collector=\"ipam\"} 1\n");
	assert_contains(p, "tollgate_ipam_attachments 2\n");
	assert_not_contains(p, NS_EI);
}

static void t_render_many_counters_keep_offsets(void **state)
{
	/* Grows the exporter's per-counter table past its first size and lets
	 * most counters disappear (pods deleted): the survivors keep their
	 * carried offsets through every rehash and compaction. */
	struct render_env *env = *state;
	const size_t n = 1500;
	size_t cap = 128 * n + 256, len = 0;
	char *rules = malloc(cap);
	const char *p;

	NEED_NETNS_NFT();
	assert_non_null(rules);
	write_state(env, STATE_TWO_PODS);
	nft_apply("table inet tollgate { counter ns_research_egress_internal { packets 10 bytes 1000; }; }\n");
	p = render(env);
	assert_sample(p, NS_EI, 1000);
	nft_apply("delete table inet tollgate\n"
		  "table inet tollgate { counter ns_research_egress_internal { packets 1 bytes 1; }; }\n");
	p = render(env);
	assert_sample(p, NS_EI, 1001);

	len += (size_t)snprintf(rules + len, cap - len, "table inet tollgate {\n");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(rules + len, cap - len,
					" counter pod_tg%012zx_egress_internal { packets 1 bytes %zu }\n",
					i + 0x100, i + 1);
	snprintf(rules + len, cap - len, "}\n");
	nft_apply(rules);
	p = render(env);
	assert_sample(p, NS_EI, 1001);
	/* the pods go away: the exporter forgets their counters (a new table: 2 more bytes) */
	nft_apply("delete table inet tollgate\n"
		  "table inet tollgate { counter ns_research_egress_internal { packets 1 bytes 2; }; }\n");
	p = render(env);
	assert_sample(p, NS_EI, 1003);
	p = render(env);
	assert_sample(p, NS_EI, 1003);
	/* and they come back, again */
	nft_apply(rules);
	p = render(env);
	assert_sample(p, NS_EI, 1003);
	free(rules);
}

static void t_render_repeated_is_stable(void **state)
{
	/* 200 scrapes of the same state give the same counter lines */
	struct render_env *env = *state;
	char *first;

	NEED_NETNS_NFT();
	write_state(env, STATE_TWO_PODS);
	nft_apply("table inet tollgate { counter ns_research_egress_internal { packets 3 bytes 300 }\n"
		  " counter pod_tg000000000001_egress_internal { packets 3 bytes 300; }; }\n");
	first = strdup(render(env));
	assert_non_null(first);
	*strstr(first, "# HELP tollgate_collector_duration_seconds") = '\0';
	for (int i = 0; i < 200; i++) {
		const char *p = render(env);

		if (strncmp(p, first, strlen(first)) != 0)
			fail_msg("scrape %d differs from the first one", i);
	}
	free(first);
}

/* ---- main ---- */

#define ADD_RENDER(fn) add_test_fixture(#fn, fn, render_setup, render_teardown, NULL)

int main(void)
{
	ADD_RENDER(t_render_no_table_no_store);
	ADD_RENDER(t_render_corrupt_store);
	ADD_RENDER(t_render_counters_with_labels);
	ADD_RENDER(t_render_table_deleted_collector_down);
	ADD_RENDER(t_render_monotonic_across_rebuild);
	ADD_RENDER(t_render_many_counters_keep_offsets);
	ADD_RENDER(t_render_repeated_is_stable);
	return run_group("exporter_render in a network namespace");
}
