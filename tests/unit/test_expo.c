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
 * tests/unit/fake_nfnl.h and a temporary data dir: the cases of
 * tests/unit/render_cases.h, which tests/kernel/ktest_expo.c runs against
 * the kernel's nftables.
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
#include "tests/unit/render_cases.h"

#define PAGE (1u << 20)

/* A page with one thing written by `fn`, compared to `want` byte for byte. */
#define assert_page(want, ...)                               \
	do {                                                 \
		struct expo x_;                              \
		expo_init(&x_, PAGE);                        \
		__VA_ARGS__;                                 \
		assert_false(x_.overflow);                   \
		assert_non_null(x_.page.p);                  \
		assert_string_equal(x_.page.p, (want));      \
		assert_int_equal(x_.page.len, strlen(want)); \
		expo_free(&x_);                              \
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
		int len = *p < 0x80		? 1
			  : (*p & 0xe0) == 0xc0 ? 2
			  : (*p & 0xf0) == 0xe0 ? 3
			  : (*p & 0xf8) == 0xf0 ? 4
						: 0;

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
	escape_cut_sweep(
		"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"
		"0123456789abcdefghijklmnopqrstuvwxyz");
	escape_cut_sweep(
		"\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\\");
	escape_cut_sweep(
		"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"");
	escape_cut_sweep(
		"\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n");
	escape_cut_sweep(
		"a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd a\\b\"c\nd "
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
			fail_msg("size %zu (the %zu-byte escaped value fits): \"%s\" cut to \"%s\"",
				 size, strlen(full), full, out);
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
	const char *const three[] = { "namespace", "research", "direction", "egress",
				      "traffic",   "internal", NULL };
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

	assert_page("m{pod=\"we\\\"ird\\\\na\\nme\",ns=\"x\"} 7\n",
		    expo_sample_u64(&x_, "m", l, 7));
	assert_page("m{pod=\"we\\\"ird\\\\na\\nme\",ns=\"x\"} 0.5\n",
		    expo_sample(&x_, "m", l, 0.5));
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
	assert_memory_equal(x.page.p, "m{pod=\"", 7);
	close = strstr(x.page.p, "\",ns=\"x\"} 9\n");
	assert_non_null(close);
	assert_int_equal((size_t)(close - x.page.p) + strlen("\",ns=\"x\"} 9\n"), x.page.len);
	{
		/* the value part has no unescaped quote and ends on a whole escape */
		size_t vlen = (size_t)(close - (x.page.p + 7));
		char *val = strndup(x.page.p + 7, vlen);

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
	assert_page("m 1.79769313486232e+308\n",
		    expo_sample(&x_, "m", NULL, 1.7976931348623157e308));
	assert_page("m 4.94065645841247e-324\n",
		    expo_sample(&x_, "m", NULL, 4.9406564584124654e-324));
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
	assert_string_equal(lab.page.p, "{namespace=\"we\\\"ird\",traffic=\"internet\"}");
	expo_init(&a, PAGE);
	expo_init(&b, PAGE);
	for (size_t i = 0; i < ARRAY_SIZE(vals); i++) {
		expo_series_u64(&a, "tollgate_x_total", 16, lab.page.p, lab.page.len, vals[i]);
		expo_sample_u64(&b, "tollgate_x_total", l, vals[i]);
	}
	assert_false(a.overflow);
	assert_string_equal(a.page.p, b.page.p);
	assert_int_equal(a.page.len, b.page.len);
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
	assert_true(x.page.len < 32);
	before = x.page.len;
	expo_series_u64(&x, "m", 1, "", 0, 1);
	assert_int_equal(x.page.len, before); /* sticky */
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
	assert_null(x.page.p);
	assert_int_equal(x.page.len, 0);
	expo_sample_u64(&x, "m", NULL, 1);
	assert_string_equal(x.page.p, "m 1\n");
	assert_true(x.page.cap >= len); /* one allocation for a page like the last */
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
		    expo_family(&x_, "a", "gauge", "A.");
		    expo_sample(&x_, "a", NULL, 1); expo_sample_u64(&x_, "a", l, 2);
		    expo_family(&x_, "b", "counter", "B."); expo_sample_u64(&x_, "b", NULL, 3));
}

/* ---- buffer and limit ---- */

static void t_init_reset_free(void **state)
{
	struct expo x;

	expo_init(&x, 1000);
	assert_null(x.page.p);
	assert_int_equal(x.page.len, 0);
	assert_int_equal(x.page.max, 1000);
	assert_false(x.overflow);
	expo_reset(&x); /* before anything was written */
	assert_int_equal(x.page.len, 0);
	expo_free(&x);
	expo_free(&x); /* twice is fine */
	assert_null(x.page.p);
}

/* Writes samples until the page overflows; checks the invariants after each. */
static size_t fill_until_overflow(struct expo *x, size_t limit_lines)
{
	const char *const l[] = { "namespace", "research-team-with-a-long-name", "pod",
				  "trainer-0123456789", NULL };
	size_t lines = 0;

	while (!x->overflow && lines < limit_lines) {
		size_t before = x->page.len;

		expo_sample_u64(x, "tollgate_pod_bytes_total", l, 1234567890123ull + lines);
		lines++;
		if (x->page.p) {
			assert_true(x->page.cap <= x->page.max);
			assert_true(x->page.len < x->page.cap);
			assert_int_equal(strlen(x->page.p), x->page.len);
		}
		assert_true(x->page.len >= before);
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
	assert_non_null(x.page.p);
	assert_true(x.page.cap <= x.page.max);
	assert_true(x.page.len < x.page.max);
	assert_int_equal(strlen(x.page.p), x.page.len);
	len_at_overflow = x.page.len;
	/* nothing more is written once the page is cut */
	expo_sample(&x, "m", NULL, 1);
	expo_sample_u64(&x, "m", NULL, 1);
	expo_family(&x, "m", "gauge", "M.");
	assert_true(x.overflow);
	assert_int_equal(x.page.len, len_at_overflow);
	assert_int_equal(strlen(x.page.p), len_at_overflow);

	/* reset: empty, writable again, with the same limit */
	expo_reset(&x);
	assert_false(x.overflow);
	assert_int_equal(x.page.len, 0);
	assert_string_equal(x.page.p, "");
	expo_sample(&x, "m", NULL, 1);
	assert_string_equal(x.page.p, "m 1\n");
	assert_false(x.overflow);
	fill_until_overflow(&x, 1u << 20);
	assert_true(x.overflow);
	assert_true(x.page.cap <= x.page.max);
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
		assert_true(x.page.cap <= max);
		assert_true(x.page.len == 0 || x.page.len < max);
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
	assert_true(x.page.cap <= x.page.max);
	assert_true(x.page.len < x.page.max);
	assert_int_equal(strlen(x.page.p), x.page.len);
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
		len = x.page.len;
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
 * The cases of tests/unit/render_cases.h (which tests/kernel/ktest_expo.c
 * runs against the kernel's nftables): the counters come from
 * tests/unit/fake_nfnl.h (libmnl's socket calls wrapped at link time), the
 * shaper's rtnetlink is cut at tg_nl_route_open (wrapped as well: no socket,
 * collector shaper 0).
 */

struct nl_sock;
int __wrap_tg_nl_route_open(struct nl_sock **ret);

int __wrap_tg_nl_route_open(struct nl_sock **ret)
{
	return -EOPNOTSUPP;
}

/* ---- main ---- */

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
	add_render_cases();
	return run_group("expo");
}
