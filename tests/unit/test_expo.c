// SPDX-License-Identifier: Apache-2.0
/*
 * The metrics' text writer (exporter/expo.c) and collectors
 * (exporter/collect.c).
 *
 * expo_*: the exact bytes of the Prometheus text format 0.0.4 — HELP/TYPE
 * lines, samples with and without labels, label escaping (backslash, double
 * quote, newline), cutting long values without splitting an escape or a UTF-8
 * sequence and without writing past the buffer, float formatting including
 * NaN and +/-Inf, u64 extremes, and the page limit (`max`): overflow is
 * sticky, the buffer never grows past max, reset clears it.
 *
 * exporter_render, its nftables in the fake nf_tables of
 * tests/unit/fake_nfnl.h and a temporary data dir (the same cases against
 * the kernel's nftables: tests/kernel/ktest_expo.c): no table -> collector
 * nftables 0 and the rest still rendered; a corrupt store -> collector ipam
 * 0; counters come out with their labels (pods by hostVeth from the store),
 * and a counter made anew (its table deleted and re-created, or the counter
 * alone), with a lower value or one already past the old, never makes a
 * series go backwards.
 */
#include <errno.h>
#include <math.h>
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
#include "tests/unit/fake_nfnl.h"

#define PAGE (1u << 20)

/* A page with one thing written by `fn`, compared to `want` byte for byte. */
#define assert_page(want, ...)                                                   \
	do {                                                                     \
		struct expo x_;                                                  \
		expo_init(&x_, PAGE);                                            \
		__VA_ARGS__;                                                     \
		assert_false(x_.overflow);                                       \
		assert_non_null(x_.buf);                                         \
		assert_string_equal(x_.buf, (want));                             \
		assert_int_equal(x_.len, strlen(want));                          \
		expo_free(&x_);                                                  \
	} while (0)

/* ---- expo_escape ---- */

static void escape_eq(const char *in, const char *want)
{
	char out[256];

	expo_escape(in, out, sizeof(out));
	assert_string_equal(out, want);
}

static void t_escape_plain(void **state)
{
	escape_eq("", "");
	escape_eq("research", "research");
	escape_eq("kube-system", "kube-system");
	escape_eq("trainer-0.worker_1", "trainer-0.worker_1");
	/* UTF-8 and other bytes pass through untouched */
	escape_eq("d\xc3\xa9j\xc3\xa0", "d\xc3\xa9j\xc3\xa0");
	/* only backslash, quote and newline are escaped: tab and CR stay */
	escape_eq("a\tb\rc", "a\tb\rc");
}

static void t_escape_specials(void **state)
{
	escape_eq("\\", "\\\\");
	escape_eq("\"", "\\\"");
	escape_eq("\n", "\\n");
	escape_eq("a\\b\"c\nd", "a\\\\b\\\"c\\nd");
	escape_eq("\\\\\"\"\n\n", "\\\\\\\\\\\"\\\"\\n\\n");
	escape_eq("C:\\path\\", "C:\\\\path\\\\");
	escape_eq("say \"hi\"", "say \\\"hi\\\"");
}

/* True when s ends inside an escape: an odd run of trailing backslashes. */
static bool ends_in_split_escape(const char *s)
{
	size_t n = strlen(s), run = 0;

	while (run < n && s[n - 1 - run] == '\\')
		run++;
	return run % 2 == 1;
}

/* True when s is valid UTF-8 (no sequence cut at the end). */
static bool utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		int len = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3
				      : (*p & 0xf8) == 0xf0 ? 4 : 0;

		if (!len)
			return false;
		for (int i = 1; i < len; i++)
			if ((p[i] & 0xc0) != 0x80)
				return false;
		p += len;
	}
	return true;
}

/* Every size from 1 to 80: NUL-terminated, inside `size`, no byte written past it. */
static void escape_cut_sweep(const char *in)
{
	for (size_t size = 1; size <= 80; size++) {
		char buf[128];

		memset(buf, 0x5a, sizeof(buf));
		expo_escape(in, buf, size);
		if (!memchr(buf, '\0', size))
			fail_msg("size %zu: output not NUL-terminated inside the buffer", size);
		for (size_t i = size; i < sizeof(buf); i++)
			if (buf[i] != 0x5a)
				fail_msg("size %zu: byte %zu written past the buffer", size, i);
		if (ends_in_split_escape(buf))
			fail_msg("size %zu: cut in the middle of an escape: \"%s\"", size, buf);
	}
}

static void t_escape_cut_never_overflows(void **state)
{
	escape_cut_sweep("abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"
			 "0123456789abcdefghijklmnopqrstuvwxyz");
	escape_cut_sweep("\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\");
	escape_cut_sweep("\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"");
	escape_cut_sweep("\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n");
	escape_cut_sweep("a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd "
			 "a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd");
}

static void t_escape_cut_is_a_prefix(void **state)
{
	/* What fits is the escaped input's prefix, as long as possible (minus an escape). */
	const char *in = "ab\"cd\\ef\ngh";
	const char *full = "ab\\\"cd\\\\ef\\ngh";

	for (size_t size = 1; size <= strlen(full) + 1; size++) {
		char out[64];

		expo_escape(in, out, size);
		if (strncmp(out, full, strlen(out)) != 0)
			fail_msg("size %zu: \"%s\" is not a prefix of \"%s\"", size, out, full);
		if (strlen(out) + 4 < size)
			fail_msg("size %zu: only %zu bytes kept", size, strlen(out));
	}
	/* "cut to fit": what fits is not cut */
	for (size_t size = strlen(full) + 1; size < 64; size++) {
		char out[64];

		expo_escape(in, out, size);
		if (strcmp(out, full) != 0)
			fail_msg("size %zu (the %zu-byte escaped value fits): \"%s\" cut to \"%s\"", size,
				 strlen(full), full, out);
	}
	{
		char out[4];

		expo_escape("abc", out, sizeof(out));
		assert_string_equal(out, "abc");
	}
}

static void t_escape_long_input(void **state)
{
	/* a 100,000-byte value into a 1,024-byte buffer */
	size_t n = 100000;
	char *in = malloc(n + 1), out[1024 + 16];

	assert_non_null(in);
	for (size_t i = 0; i < n; i++)
		in[i] = "a\"\\\nb"[i % 5];
	in[n] = '\0';
	memset(out, 0x5a, sizeof(out));
	expo_escape(in, out, 1024);
	assert_true(strlen(out) < 1024);
	assert_true(strlen(out) > 1000);
	assert_false(ends_in_split_escape(out));
	for (size_t i = 1024; i < sizeof(out); i++)
		assert_int_equal((unsigned char)out[i], 0x5a);
	free(in);
}

static void t_escape_cut_keeps_utf8_whole(void **state)
{
	/* A value cut in the middle of a multi-byte character is not valid UTF-8,
	 * and Prometheus rejects the whole page for it. */
	const char *in = "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
			 "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"
			 "\xf0\x9f\x90\xb3\xf0\x9f\x90\xb3\xf0\x9f\x90\xb3";

	for (size_t size = 1; size <= 48; size++) {
		char out[64];

		expo_escape(in, out, size);
		if (!utf8_valid(out))
			fail_msg("size %zu: cut inside a UTF-8 sequence (%zu bytes kept)", size,
				 strlen(out));
	}
}

static void t_escape_size_zero_writes_nothing(void **state)
{
	char buf[4] = { 0x5a, 0x5a, 0x5a, 0x5a };

	/* like snprintf(buf, 0, ...): no room, nothing written */
	expo_escape("abc", buf, 0);
	if ((unsigned char)buf[0] != 0x5a)
		fail_msg("expo_escape(in, out, 0) wrote out[0] = 0x%02x", (unsigned char)buf[0]);
}

/* ---- expo_family ---- */

static void t_family_exact(void **state)
{
	assert_page("# HELP tollgate_x_total Bytes.\n# TYPE tollgate_x_total counter\n",
		    expo_family(&x_, "tollgate_x_total", "counter", "Bytes."));
	assert_page("# HELP g A gauge with \"quotes\".\n# TYPE g gauge\n",
		    expo_family(&x_, "g", "gauge", "A gauge with \"quotes\"."));
}

static void t_family_help_escapes(void **state)
{
	/* HELP escapes backslash and newline only */
	assert_page("# HELP m a\\\\b\\nc \"d\"\n# TYPE m untyped\n",
		    expo_family(&x_, "m", "untyped", "a\\b\nc \"d\""));
	assert_page("# HELP m \n# TYPE m gauge\n", expo_family(&x_, "m", "gauge", ""));
}

/* ---- expo_sample / expo_sample_u64 ---- */

static void t_sample_no_labels(void **state)
{
	assert_page("m 1\n", expo_sample(&x_, "m", NULL, 1));
	const char *const empty[] = { NULL };

	assert_page("m 1\n", expo_sample(&x_, "m", empty, 1));
	assert_page("m 0\n", expo_sample_u64(&x_, "m", NULL, 0));
	assert_page("m 0\n", expo_sample_u64(&x_, "m", empty, 0));
}

static void t_sample_labels(void **state)
{
	const char *const one[] = { "collector", "nftables", NULL };
	const char *const three[] = { "namespace", "research", "direction", "egress", "traffic",
				      "internal", NULL };
	const char *const empty_value[] = { "namespace", "", NULL };

	assert_page("tollgate_collector_up{collector=\"nftables\"} 1\n",
		    expo_sample(&x_, "tollgate_collector_up", one, 1));
	assert_page("tollgate_namespace_bytes_total{namespace=\"research\",direction=\"egress\","
		    "traffic=\"internal\"} 28000\n",
		    expo_sample_u64(&x_, "tollgate_namespace_bytes_total", three, 28000));
	assert_page("m{namespace=\"\"} 3\n", expo_sample_u64(&x_, "m", empty_value, 3));
}

static void t_sample_label_values_escaped(void **state)
{
	const char *const l[] = { "pod", "we\"ird\\na\nme", "ns", "x", NULL };

	assert_page("m{pod=\"we\\\"ird\\\\na\\nme\",ns=\"x\"} 7\n", expo_sample_u64(&x_, "m", l, 7));
	assert_page("m{pod=\"we\\\"ird\\\\na\\nme\",ns=\"x\"} 0.5\n", expo_sample(&x_, "m", l, 0.5));
}

static void t_sample_long_label_value_stays_well_formed(void **state)
{
	size_t n = 50000;
	char *v = malloc(n + 1);
	const char *l[] = { "pod", v, "ns", "x", NULL };
	struct expo x;
	const char *close;

	assert_non_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = i % 2 ? '"' : '\\';
	v[n] = '\0';
	expo_init(&x, PAGE);
	expo_sample_u64(&x, "m", l, 9);
	assert_false(x.overflow);
	/* m{pod="<cut value>",ns="x"} 9\n */
	assert_memory_equal(x.buf, "m{pod=\"", 7);
	close = strstr(x.buf, "\",ns=\"x\"} 9\n");
	assert_non_null(close);
	assert_int_equal((size_t)(close - x.buf) + strlen("\",ns=\"x\"} 9\n"), x.len);
	{
		/* the value part has no unescaped quote and ends on a whole escape */
		size_t vlen = (size_t)(close - (x.buf + 7));
		char *val = strndup(x.buf + 7, vlen);

		assert_false(ends_in_split_escape(val));
		for (size_t i = 0; i < vlen; i += 2)
			assert_int_equal(val[i], '\\');
		free(val);
	}
	expo_free(&x);
	free(v);
}

static void t_sample_float_formats(void **state)
{
	assert_page("m 0\n", expo_sample(&x_, "m", NULL, 0));
	assert_page("m 1\n", expo_sample(&x_, "m", NULL, 1));
	assert_page("m -2\n", expo_sample(&x_, "m", NULL, -2));
	assert_page("m 1.5\n", expo_sample(&x_, "m", NULL, 1.5));
	assert_page("m 0.000607542\n", expo_sample(&x_, "m", NULL, 0.000607542));
	assert_page("m 1e+20\n", expo_sample(&x_, "m", NULL, 1e20));
	assert_page("m 1764403200.123\n", expo_sample(&x_, "m", NULL, 1764403200.123));
	assert_page("m 1.79769313486232e+308\n", expo_sample(&x_, "m", NULL, 1.7976931348623157e308));
	assert_page("m 4.94065645841247e-324\n", expo_sample(&x_, "m", NULL, 4.9406564584124654e-324));
}

static void t_sample_nan_inf(void **state)
{
	const char *const l[] = { "a", "b", NULL };

	assert_page("m NaN\n", expo_sample(&x_, "m", NULL, NAN));
	assert_page("m NaN\n", expo_sample(&x_, "m", NULL, -NAN));
	assert_page("m +Inf\n", expo_sample(&x_, "m", NULL, INFINITY));
	assert_page("m -Inf\n", expo_sample(&x_, "m", NULL, -INFINITY));
	assert_page("m{a=\"b\"} +Inf\n", expo_sample(&x_, "m", l, HUGE_VAL));
}

static void t_sample_u64_extremes(void **state)
{
	const char *const l[] = { "a", "b", NULL };

	assert_page("m 18446744073709551615\n", expo_sample_u64(&x_, "m", NULL, UINT64_MAX));
	assert_page("m{a=\"b\"} 9007199254740993\n",
		    expo_sample_u64(&x_, "m", l, 9007199254740993ull)); /* not a double */
	assert_page("m 4294967296\n", expo_sample_u64(&x_, "m", NULL, 4294967296ull));
}

/* A label set written once and reused per sample gives the bytes expo_sample_u64 gives. */
static void t_series_matches_sample(void **state)
{
	const char *const l[] = { "namespace", "we\"ird", "traffic", "internet", NULL };
	const uint64_t vals[] = { 0, 7, 1000000, UINT64_MAX };
	struct expo lab, a, b;

	expo_init(&lab, PAGE);
	expo_labels(&lab, l);
	assert_string_equal(lab.buf, "{namespace=\"we\\\"ird\",traffic=\"internet\"}");
	expo_init(&a, PAGE);
	expo_init(&b, PAGE);
	for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
		expo_series_u64(&a, "tollgate_x_total", 16, lab.buf, lab.len, vals[i]);
		expo_sample_u64(&b, "tollgate_x_total", l, vals[i]);
	}
	assert_false(a.overflow);
	assert_string_equal(a.buf, b.buf);
	assert_int_equal(a.len, b.len);
	expo_free(&lab);
	expo_free(&a);
	expo_free(&b);
	/* no labels: nothing between the name and the value */
	assert_page("m 5\n", expo_labels(&x_, NULL); expo_series_u64(&x_, "m", 1, "", 0, 5));
}

static void t_series_respects_max(void **state)
{
	struct expo x;
	size_t before;

	expo_init(&x, 32);
	expo_series_u64(&x, "tollgate_namespace_bytes_total", 30, "{a=\"b\"}", 7, 1);
	assert_true(x.overflow);
	assert_true(x.len < 32);
	before = x.len;
	expo_series_u64(&x, "m", 1, "", 0, 1);
	assert_int_equal(x.len, before); /* sticky */
	expo_free(&x);
}

/* expo_take hands the page over and the next one starts at about its size. */
static void t_take_hands_over(void **state)
{
	struct expo x;
	size_t len = 0;
	char *page;

	expo_init(&x, PAGE);
	for (int i = 0; i < 1000; i++)
		expo_sample_u64(&x, "tollgate_some_series_total", NULL, (uint64_t)i);
	page = expo_take(&x, &len);
	assert_non_null(page);
	assert_int_equal(len, strlen(page));
	assert_true(len > 20000);
	assert_null(x.buf);
	assert_int_equal(x.len, 0);
	expo_sample_u64(&x, "m", NULL, 1);
	assert_string_equal(x.buf, "m 1\n");
	assert_true(x.cap >= len); /* one allocation for a page like the last */
	free(page);
	expo_free(&x);
	expo_init(&x, PAGE);
	assert_null(expo_take(&x, &len));
	assert_int_equal(len, 0);
}

static void t_page_concatenates(void **state)
{
	const char *const l[] = { "state", "free", NULL };

	assert_page("# HELP a A.\n# TYPE a gauge\na 1\na{state=\"free\"} 2\n# HELP b B.\n"
		    "# TYPE b counter\nb 3\n",
		    expo_family(&x_, "a", "gauge", "A."); expo_sample(&x_, "a", NULL, 1);
		    expo_sample_u64(&x_, "a", l, 2); expo_family(&x_, "b", "counter", "B.");
		    expo_sample_u64(&x_, "b", NULL, 3));
}

/* ---- buffer and limit ---- */

static void t_init_reset_free(void **state)
{
	struct expo x;

	expo_init(&x, 1000);
	assert_null(x.buf);
	assert_int_equal(x.len, 0);
	assert_int_equal(x.max, 1000);
	assert_false(x.overflow);
	expo_reset(&x); /* before anything was written */
	assert_int_equal(x.len, 0);
	expo_free(&x);
	expo_free(&x); /* twice is fine */
	assert_null(x.buf);
}

/* Writes samples until the page overflows; checks the invariants after each. */
static size_t fill_until_overflow(struct expo *x, size_t limit_lines)
{
	const char *const l[] = { "namespace", "research-team-with-a-long-name", "pod",
				  "trainer-0123456789", NULL };
	size_t lines = 0;

	while (!x->overflow && lines < limit_lines) {
		size_t before = x->len;

		expo_sample_u64(x, "tollgate_pod_bytes_total", l, 1234567890123ull + lines);
		lines++;
		if (x->buf) {
			assert_true(x->cap <= x->max);
			assert_true(x->len < x->cap);
			assert_int_equal(strlen(x->buf), x->len);
		}
		assert_true(x->len >= before);
	}
	return lines;
}

static void t_overflow_is_sticky_and_bounded(void **state)
{
	struct expo x;
	size_t len_at_overflow, lines;

	expo_init(&x, 64 * 1024);
	lines = fill_until_overflow(&x, 1u << 20);
	assert_true(x.overflow);
	assert_true(lines > 100);
	assert_non_null(x.buf);
	assert_true(x.cap <= x.max);
	assert_true(x.len < x.max);
	assert_int_equal(strlen(x.buf), x.len);
	len_at_overflow = x.len;
	/* nothing more is written once the page is cut */
	expo_sample(&x, "m", NULL, 1);
	expo_sample_u64(&x, "m", NULL, 1);
	expo_family(&x, "m", "gauge", "M.");
	assert_true(x.overflow);
	assert_int_equal(x.len, len_at_overflow);
	assert_int_equal(strlen(x.buf), len_at_overflow);

	/* reset: empty, writable again, with the same limit */
	expo_reset(&x);
	assert_false(x.overflow);
	assert_int_equal(x.len, 0);
	assert_string_equal(x.buf, "");
	expo_sample(&x, "m", NULL, 1);
	assert_string_equal(x.buf, "m 1\n");
	assert_false(x.overflow);
	fill_until_overflow(&x, 1u << 20);
	assert_true(x.overflow);
	assert_true(x.cap <= x.max);
	expo_free(&x);
}

static void t_overflow_tiny_max(void **state)
{
	/* a limit below one line: overflow at once, never a byte past max */
	for (size_t max = 0; max <= 64; max += 8) {
		struct expo x;

		expo_init(&x, max);
		expo_sample_u64(&x, "tollgate_namespace_bytes_total", NULL, UINT64_MAX);
		expo_sample_u64(&x, "tollgate_namespace_bytes_total", NULL, UINT64_MAX);
		assert_true(x.overflow);
		assert_true(x.cap <= max);
		assert_true(x.len == 0 || x.len < max);
		expo_free(&x);
	}
}

static void t_overflow_huge_single_write(void **state)
{
	/* one write larger than max: overflow, nothing written */
	char *help = malloc(300000);
	struct expo x;

	assert_non_null(help);
	memset(help, 'h', 299999);
	help[299999] = '\0';
	expo_init(&x, 128 * 1024);
	expo_sample(&x, "before", NULL, 1);
	expo_family(&x, "m", "gauge", help);
	assert_true(x.overflow);
	assert_true(x.cap <= x.max);
	assert_true(x.len < x.max);
	assert_int_equal(strlen(x.buf), x.len);
	expo_free(&x);
	free(help);
}

static void t_content_below_max_fits(void **state)
{
	/* The limit is max bytes, not the power of two below it: a page of
	 * 5,000 bytes fits in max 6,000 (and 12,000 in 12,289). */
	static const size_t maxes[][2] = { { 6000, 5000 }, { 12289, 12000 }, { 4096, 4000 } };

	for (size_t k = 0; k < 3; k++) {
		struct expo x;
		char help[80];

		/* "# HELP l <79 x>\n# TYPE l g\n" is 100 bytes */
		memset(help, 'x', 79);
		help[79] = '\0';
		expo_init(&x, maxes[k][0]);
		bool overflow;
		size_t len;

		for (size_t i = 0; i < maxes[k][1] / 100; i++)
			expo_family(&x, "l", "g", help);
		overflow = x.overflow;
		len = x.len;
		expo_free(&x);
		if (overflow)
			fail_msg("max %zu: page of %zu bytes reported as overflow at %zu bytes",
				 maxes[k][0], maxes[k][1], len);
		assert_int_equal(len, maxes[k][1]);
	}
}

/*
 * ---- exporter_render, its nftables in the fake nf_tables ----
 *
 * The counters come from tests/unit/fake_nfnl.h (libmnl's socket calls
 * wrapped at link time), the shaper's rtnetlink is cut at nl_route_open
 * (wrapped as well: no socket, collector shaper 0). The same cases against
 * the kernel's nftables are tests/kernel/ktest_expo.c.
 */

struct nl_sock;
int __wrap_nl_route_open(struct nl_sock **ret);

int __wrap_nl_route_open(struct nl_sock **ret)
{
	return -EOPNOTSUPP;
}

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

	/* each test starts without a table */
	fake_nfnl_reset();
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

	if (!env)
		return 0;
	exporter_free(env->ex);
	expo_free(&env->page);
	tmpdir_remove(env->dir);
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

	write_state(env, STATE_TWO_PODS);
	fake_add_counter(T, "ns_research_egress_internal", 3, 300);
	fake_add_counter(T, "ns_research_ingress_internet", 1, 18446744073709551615ull);
	fake_add_counter(T, "ns__egress_internet", 2, 200);
	fake_add_counter(T, "pod_tg000000000001_egress_internal", 3, 300);
	fake_add_counter(T, "pod_tg000000000002_egress_internet", 2, 200);
	fake_add_counter(T, "pod_tg0000000000ff_egress_internet", 9, 900);
	fake_add_counter(T, "host_ingress_internal", 5, 500);
	fake_add_counter(T, "unrelated", 7, 700);
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
/* n pods' counters (pod_tg<hex>_egress_internal, i + 1 bytes each) added to the table. */
static void add_pod_counters(size_t n)
{
	char name[64];

	for (size_t i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "pod_tg%012zx_egress_internal", i + 0x100);
		fake_add_counter(T, name, 1, i + 1);
	}
}

static void t_render_monotonic_across_rebuild(void **state)
{
	struct render_env *env = *state;
	const char *p;

	write_state(env, STATE_TWO_PODS);
	fake_add_counter(T, NS_RE, 3, 300);
	p = render(env);
	assert_sample(p, NS_EI, 300);
	/* table deleted (scraped while it is missing): nothing served for it */
	fake_del_table(T);
	p = render(env);
	assert_not_contains(p, NS_EI);
	/* rebuilt from 0 and counting again: the old 300 is carried */
	fake_add_counter(T, NS_RE, 1, 100);
	p = render(env);
	assert_sample(p, NS_EI, 400);
	assert_sample(p, NS_EI_P, 4);
	/* flushed again (without a scrape in between) */
	fake_del_table(T);
	fake_add_counter(T, NS_RE, 1, 50);
	p = render(env);
	assert_sample(p, NS_EI, 450);
	assert_sample(p, NS_EI_P, 5);
	/*
	 * made anew and already past the last value seen (50) by the next
	 * scrape: a new counter all the same, its 60 come on top
	 */
	fake_del_counter(T, NS_RE);
	fake_add_counter(T, NS_RE, 2, 60);
	p = render(env);
	assert_sample(p, NS_EI, 510);
	assert_sample(p, NS_EI_P, 7);
	p = render(env);
	assert_sample(p, NS_EI, 510);
	/*
	 * the table made anew with the same objects in the same order (their
	 * handles start again): still a new counter
	 */
	fake_del_table(T);
	fake_add_counter(T, NS_RE, 4, 90);
	p = render(env);
	assert_sample(p, NS_EI, 600);
	assert_sample(p, NS_EI_P, 11);
}

static void t_render_table_deleted_collector_down(void **state)
{
	struct render_env *env = *state;
	const char *p;

	write_state(env, STATE_TWO_PODS);
	fake_add_counter(T, NS_RE, 3, 300);
	p = render(env);
	assert_contains(p, "tollgate_collector_up{collector=\"nftables\"} 1\n");
	fake_del_table(T);
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

	write_state(env, STATE_TWO_PODS);
	fake_add_counter(T, NS_RE, 10, 1000);
	p = render(env);
	assert_sample(p, NS_EI, 1000);
	fake_del_table(T);
	fake_add_counter(T, NS_RE, 1, 1);
	p = render(env);
	assert_sample(p, NS_EI, 1001);

	add_pod_counters(n);
	p = render(env);
	assert_sample(p, NS_EI, 1001);
	/* the pods go away: the exporter forgets their counters (a new table: 2 more bytes) */
	fake_del_table(T);
	fake_add_counter(T, NS_RE, 1, 2);
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

	write_state(env, STATE_TWO_PODS);
	fake_add_counter(T, NS_RE, 3, 300);
	fake_add_counter(T, "pod_tg000000000001_egress_internal", 3, 300);
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
	ADD(t_escape_plain);
	ADD(t_escape_specials);
	ADD(t_escape_cut_never_overflows);
	ADD(t_escape_cut_is_a_prefix);
	ADD(t_escape_long_input);
	ADD(t_escape_cut_keeps_utf8_whole);
	ADD(t_escape_size_zero_writes_nothing);
	ADD(t_family_exact);
	ADD(t_family_help_escapes);
	ADD(t_sample_no_labels);
	ADD(t_sample_labels);
	ADD(t_sample_label_values_escaped);
	ADD(t_sample_long_label_value_stays_well_formed);
	ADD(t_sample_float_formats);
	ADD(t_sample_nan_inf);
	ADD(t_sample_u64_extremes);
	ADD(t_series_matches_sample);
	ADD(t_series_respects_max);
	ADD(t_take_hands_over);
	ADD(t_page_concatenates);
	ADD(t_init_reset_free);
	ADD(t_overflow_is_sticky_and_bounded);
	ADD(t_overflow_tiny_max);
	ADD(t_overflow_huge_single_write);
	ADD(t_content_below_max_fits);
	ADD_RENDER(t_render_no_table_no_store);
	ADD_RENDER(t_render_corrupt_store);
	ADD_RENDER(t_render_counters_with_labels);
	ADD_RENDER(t_render_table_deleted_collector_down);
	ADD_RENDER(t_render_monotonic_across_rebuild);
	ADD_RENDER(t_render_many_counters_keep_offsets);
	ADD_RENDER(t_render_repeated_is_stable);
	return run_group("expo");
}
