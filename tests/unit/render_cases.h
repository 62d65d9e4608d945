/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_RENDER_CASES_H
#define TG_TEST_RENDER_CASES_H

/*
 * exporter_render's cases, a temporary data dir for the store and the
 * counters in nf_tables: tests/unit/test_expo.c runs them against the fake
 * (tests/unit/fake_nfnl.h, no kernel, any user), tests/kernel/ktest_expo.c
 * against the kernel's nftables in a network namespace of its own
 * (tests/kernel/nft_kernel.h). Include after one of those two: its nft_fx_*
 * functions make the tables. Each binary adds every case here to its
 * group with add_render_cases().
 *
 * No table -> collector nftables 0 and the rest still rendered; a corrupt
 * store -> collector ipam 0; counters come out with their labels (pods by
 * hostVeth from the store), and a counter made anew (its table deleted and
 * re-created, or the counter alone), with a lower value or one already past
 * the old, never makes a series go backwards, through the growth and
 * compaction of the exporter's table of counters; the same state scraped
 * again is the same page; the pool's addresses, one state each, add up to
 * the held total.
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

#include <cmocka.h>

#include "exporter/exporter.h"
#include "tests/unit/group.h"
#include "tests/unit/helpers.h"

#ifndef NFT_FX_FAKE
#error "include tests/unit/fake_nfnl.h or tests/kernel/nft_kernel.h first"
#endif

/* Tollgate's table, and the counter the cases make anew */
#define T "tollgate"
#define NS_RE "ns_research_egress_internal"

struct render_env {
	char dir[64];
	char net_dir[128];
	struct exporter *ex;
	struct expo page;
};

static int render_setup(void **state)
{
	struct render_env *env;

	/* each test starts without a table (and, against the kernel, in a namespace of its own) */
	nft_fx_reset();
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
	*state = env;
	return 0;
}

static int render_teardown(void **state)
{
	struct render_env *env = *state;

	exporter_free(env->ex);
	expo_free(&env->page);
	tmpdir_remove(env->dir);
	free(env);
	return nft_fx_done();
}

#define ADD_RENDER(fn) add_test_fixture(#fn, fn, render_setup, render_teardown, NULL)

static const char *render(struct render_env *env)
{
	int r;

	expo_reset(&env->page);
	r = exporter_render(env->ex, &env->page);
	assert_int_equal(r, 0);
	assert_false(env->page.overflow);
	return env->page.page.p;
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

	NFT_FX_NEED();
	p = render(env);
	assert_well_formed(p);
	assert_contains(p, "# TYPE tollgate_build_info gauge\ntollgate_build_info{version=\"");
	assert_contains(p, "tollgate_collector_up{collector=\"nftables\"} 0\n");
	assert_contains(p, "tollgate_collector_up{collector=\"ipam\"} 1\n");
	assert_contains(p, "tollgate_ipam_held_addresses 0\n");
	assert_not_contains(p, "state=\"total\"");
	assert_contains(p, "tollgate_ipam_attachments 0\n");
	assert_contains(p, "# TYPE tollgate_scrape_duration_seconds gauge\n");
	assert_contains(p, "tollgate_collector_duration_seconds{collector=\"nftables\"} ");
	assert_not_contains(p, "tollgate_namespace_bytes_total{");
}

static void t_render_corrupt_store(void **state)
{
	struct render_env *env = *state;
	const char *p;

	NFT_FX_NEED();
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
	write_state(env,
		    "{\"version\":1,\"bootId\":\"b\",\"pool\":{\"source\":\"static\","
		    "\"addresses\":[\"10.1.0.10-10.1.0.19\"]},\"cooling\":[],\"attachments\":[]}");
	p = render(env);
	assert_contains(p, "tollgate_collector_up{collector=\"ipam\"} 1\n");
	assert_contains(p, "tollgate_ipam_held_addresses 10\n");
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

#define assert_lines(page, prefix, want)                                                  \
	do {                                                                              \
		size_t got_ = lines_starting((page), (prefix));                           \
		if (got_ != (size_t)(want))                                               \
			fail_msg("%zu lines start with %s, expected %zu", got_, (prefix), \
				 (size_t)(want));                                         \
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

#define STATE_TWO_PODS                                                                            \
	"{\"version\":1,\"bootId\":\"b\",\"pool\":{\"source\":\"static\",\"lastSyncMs\":"         \
	"1764403200500,\"addresses\":[\"10.1.0.10-10.1.0.19\"]},\"cooling\":[],\"attachments\":[" \
	"{\"containerId\":\"c1\",\"ifname\":\"eth0\",\"ip\":\"10.1.0.10\",\"netns\":\"/x\","      \
	"\"namespace\":\"research\",\"pod\":\"trainer-0\",\"hostVeth\":\"tg000000000001\","       \
	"\"created\":1},"                                                                         \
	"{\"containerId\":\"c2\",\"ifname\":\"eth0\",\"ip\":\"10.1.0.11\",\"netns\":\"/x\","      \
	"\"namespace\":\"\",\"pod\":\"we\\\"ird\\\\pod\",\"hostVeth\":\"tg000000000002\","        \
	"\"created\":1}]}"

static void t_render_counters_with_labels(void **state)
{
	struct render_env *env = *state;
	const char *p;

	NFT_FX_NEED();
	write_state(env, STATE_TWO_PODS);
	nft_fx_batch_begin();
	nft_fx_add_counter(T, "ns_research_egress_internal", 3, 300);
	nft_fx_add_counter(T, "ns_research_ingress_internet", 1, 18446744073709551615ull);
	nft_fx_add_counter(T, "ns__egress_internet", 2, 200);
	nft_fx_add_counter(T, "pod_tg000000000001_egress_internal", 3, 300);
	nft_fx_add_counter(T, "pod_tg000000000002_egress_internet", 2, 200);
	nft_fx_add_counter(T, "pod_tg0000000000ff_egress_internet", 9, 900);
	nft_fx_add_counter(T, "host_ingress_internal", 5, 500);
	nft_fx_add_counter(T, "unrelated", 7, 700);
	nft_fx_batch_end();
	p = render(env);
	assert_well_formed(p);
	assert_contains(p, "tollgate_collector_up{collector=\"nftables\"} 1\n");
	assert_contains(
		p, "tollgate_namespace_bytes_total{namespace=\"research\",direction=\"egress\","
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
	assert_contains(
		p, "tollgate_host_bytes_total{direction=\"ingress\",traffic=\"internal\"} 500\n");
	assert_contains(
		p, "tollgate_host_packets_total{direction=\"ingress\",traffic=\"internal\"} 5\n");
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

#define assert_sample(page, prefix, want)                                 \
	do {                                                              \
		unsigned long long got_ = sample_value((page), (prefix)); \
		if (got_ != (unsigned long long)(want))                   \
			fail_msg("%s%llu, expected %llu", (prefix), got_, \
				 (unsigned long long)(want));             \
	} while (0)

#define NS_EI \
	"tollgate_namespace_bytes_total{namespace=\"research\",direction=\"egress\",traffic=\"internal\"} "
#define NS_EI_P \
	"tollgate_namespace_packets_total{namespace=\"research\",direction=\"egress\",traffic=\"internal\"} "

/* n pods' counters (pod_tg<hex>_egress_internal, i + 1 bytes each) added to the table, at once. */
static void add_pod_counters(size_t n)
{
	char name[64];

	nft_fx_batch_begin();
	for (size_t i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "pod_tg%012zx_egress_internal", i + 0x100);
		nft_fx_add_counter(T, name, 1, i + 1);
	}
	nft_fx_batch_end();
}

/* The page of the store's two pods, with NS_RE at 3 packets and 300 bytes. */
static const char *render_research(struct render_env *env)
{
	write_state(env, STATE_TWO_PODS);
	nft_fx_add_counter(T, NS_RE, 3, 300);
	return render(env);
}

/* Tollgate's table deleted and made anew with NS_RE alone, in one transaction. */
static void table_anew(uint64_t packets, uint64_t bytes)
{
	nft_fx_batch_begin();
	nft_fx_del_table(T);
	nft_fx_add_counter(T, NS_RE, packets, bytes);
	nft_fx_batch_end();
}

static void t_render_monotonic_across_rebuild(void **state)
{
	struct render_env *env = *state;
	const char *p;

	NFT_FX_NEED();
	p = render_research(env);
	assert_sample(p, NS_EI, 300);
	/* table deleted (scraped while it is missing): nothing served for it */
	nft_fx_del_table(T);
	p = render(env);
	assert_not_contains(p, NS_EI);
	/* rebuilt from 0 and counting again: the old 300 is carried */
	nft_fx_add_counter(T, NS_RE, 1, 100);
	p = render(env);
	assert_sample(p, NS_EI, 400);
	assert_sample(p, NS_EI_P, 4);
	/* flushed again (without a scrape in between) */
	table_anew(1, 50);
	p = render(env);
	assert_sample(p, NS_EI, 450);
	assert_sample(p, NS_EI_P, 5);
	/*
	 * made anew and already past the last value seen (50) by the next
	 * scrape: a new counter all the same, its 60 come on top
	 */
	nft_fx_batch_begin();
	nft_fx_del_counter(T, NS_RE);
	nft_fx_add_counter(T, NS_RE, 2, 60);
	nft_fx_batch_end();
	p = render(env);
	assert_sample(p, NS_EI, 510);
	assert_sample(p, NS_EI_P, 7);
	p = render(env);
	assert_sample(p, NS_EI, 510);
	/*
	 * the table made anew with the same objects in the same order (their
	 * handles start again): still a new counter
	 */
	table_anew(4, 90);
	p = render(env);
	assert_sample(p, NS_EI, 600);
	assert_sample(p, NS_EI_P, 11);
}

static void t_render_table_deleted_collector_down(void **state)
{
	struct render_env *env = *state;
	const char *p;

	NFT_FX_NEED();
	p = render_research(env);
	assert_contains(p, "tollgate_collector_up{collector=\"nftables\"} 1\n");
	nft_fx_del_table(T);
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
	const char *p;

	NFT_FX_NEED();
	write_state(env, STATE_TWO_PODS);
	nft_fx_add_counter(T, NS_RE, 10, 1000);
	p = render(env);
	assert_sample(p, NS_EI, 1000);
	table_anew(1, 1);
	p = render(env);
	assert_sample(p, NS_EI, 1001);

	add_pod_counters(n);
	p = render(env);
	assert_sample(p, NS_EI, 1001);
	/* the pods go away: the exporter forgets their counters (a new table: 2 more bytes) */
	table_anew(1, 2);
	p = render(env);
	assert_sample(p, NS_EI, 1003);
	p = render(env);
	assert_sample(p, NS_EI, 1003);
	/* and they come back, again */
	add_pod_counters(n);
	p = render(env);
	assert_sample(p, NS_EI, 1003);
}

static void t_render_repeated_is_stable(void **state)
{
	/* 200 scrapes of the same state give the same counter lines */
	struct render_env *env = *state;
	char *first;

	NFT_FX_NEED();
	write_state(env, STATE_TWO_PODS);
	nft_fx_batch_begin();
	nft_fx_add_counter(T, NS_RE, 3, 300);
	nft_fx_add_counter(T, "pod_tg000000000001_egress_internal", 3, 300);
	nft_fx_batch_end();
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

/* The page's tollgate_ipam_addresses samples added up, and how many there are. */
static unsigned long long states_sum(const char *page, size_t *ret_n)
{
	static const char name[] = "tollgate_ipam_addresses{state=\"";
	unsigned long long sum = 0;

	*ret_n = 0;
	for (const char *l = strstr(page, name); l; l = strstr(l + 1, name)) {
		const char *v = strchr(l, ' ');

		assert_non_null(v);
		sum += strtoull(v + 1, NULL, 10);
		++*ret_n;
	}
	return sum;
}

/*
 * A store with an address in every state: the four states are the page's
 * only samples of the family and add up to the held total; the config's
 * cool-down decides cooling from free.
 */
static void t_render_address_states(void **state)
{
	struct render_env *env = *state;
	char json[1024];
	const char *p;
	size_t n;

	NFT_FX_NEED();
	/* .10 allocated, .11 released just now (cooling), .12-.19 free, 10.1.0.50 retired */
	snprintf(
		json, sizeof(json),
		"{\"version\":1,\"bootId\":\"b\",\"pool\":{\"source\":\"static\","
		"\"addresses\":[\"10.1.0.10-10.1.0.19\"]},\"cooling\":[{\"ip\":\"10.1.0.11\","
		"\"releasedMs\":%lld,\"releasedBootMs\":%lld}],\"attachments\":["
		"{\"containerId\":\"c1\",\"ifname\":\"eth0\",\"ip\":\"10.1.0.10\",\"netns\":\"/x\","
		"\"namespace\":\"a\",\"pod\":\"p1\",\"hostVeth\":\"tg000000000001\",\"created\":1},"
		"{\"containerId\":\"c2\",\"ifname\":\"eth0\",\"ip\":\"10.1.0.50\",\"netns\":\"/x\","
		"\"namespace\":\"a\",\"pod\":\"p2\",\"hostVeth\":\"tg000000000002\",\"created\":1}]}",
		(long long)time_now_ms(), (long long)time_boot_ms());
	write_state(env, json);
	p = render(env);
	assert_well_formed(p);
	assert_sample(p, "tollgate_ipam_addresses{state=\"allocated\"} ", 1);
	assert_sample(p, "tollgate_ipam_addresses{state=\"cooling\"} ", 1);
	assert_sample(p, "tollgate_ipam_addresses{state=\"free\"} ", 8);
	assert_sample(p, "tollgate_ipam_addresses{state=\"retired\"} ", 1);
	assert_sample(p, "\ntollgate_ipam_held_addresses ", 11);
	assert_int_equal(states_sum(p, &n), 11);
	assert_int_equal(n, 4);
	/* a config without a cool-down: the released address is free, the sum the same */
	exporter_set_cooldown(env->ex, 0);
	p = render(env);
	assert_sample(p, "tollgate_ipam_addresses{state=\"cooling\"} ", 0);
	assert_sample(p, "tollgate_ipam_addresses{state=\"free\"} ", 9);
	assert_int_equal(states_sum(p, &n), 11);
	assert_sample(p, "\ntollgate_ipam_held_addresses ", 11);
}

/* Every case above, in each binary's group. */
static inline void add_render_cases(void)
{
	ADD_RENDER(t_render_no_table_no_store);
	ADD_RENDER(t_render_corrupt_store);
	ADD_RENDER(t_render_counters_with_labels);
	ADD_RENDER(t_render_table_deleted_collector_down);
	ADD_RENDER(t_render_monotonic_across_rebuild);
	ADD_RENDER(t_render_many_counters_keep_offsets);
	ADD_RENDER(t_render_repeated_is_stable);
	ADD_RENDER(t_render_address_states);
}

#endif
