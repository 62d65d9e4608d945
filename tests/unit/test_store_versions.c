// SPDX-License-Identifier: Apache-2.0
/*
 * The store's format versions: every shape state.json has had, each written
 * by the release that wrote it (tests/fixtures/store/, read relative to the
 * repo root, where tests/run.sh runs), is read field by field, is left as it
 * is by reads and updates that change nothing, and takes the current format
 * at the next write, loading back identical. A later version than this
 * build's is refused, naming both versions, and the file is left untouched.
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

#include "tests/unit/group.h"

#include "ipam/internal.h"
#include "ipam/ipam.h"
#include "ipam/store.h"
#include "lib/cleanup.h"
#include "lib/ip4.h"
#include "tests/unit/helpers.h"
#include "tests/unit/state_eq.h"
#include "tests/unit/store_fx.h"

/* ---- the fixtures ---- */

enum layout {
	INDENTED,     /* JSON_C_TO_STRING_PRETTY, until 58c0033 */
	ONE_LINE,     /* JSON_C_TO_STRING_PLAIN, 58c0033 until 313ff53 */
	LINE_PER_ATT, /* the head, then one attachment per line: 313ff53 on, the current one */
};

struct fixture {
	const char *file;
	bool imds;	     /* pool from IMDS syncs: pending, nodeIp, subnet (2de77bb on) */
	bool shaping;	     /* attachments[].shaping (22bbd21 on) */
	bool pending_member; /* pool.pending written (2de77bb on), even when empty */
	enum layout layout;
};

static const struct fixture fixtures[] = {
	{ "v1-32e4650.json", false, false, false, INDENTED },
	{ "v1-2de77bb.json", true, false, true, INDENTED },
	{ "v1-22bbd21.json", false, true, true, INDENTED },
	{ "v1-58c0033.json", true, true, true, ONE_LINE },
	{ "v1-313ff53.json", false, true, true, LINE_PER_ATT },
};

static void fixture_path(const char *name, char *buf, size_t size)
{
	const char *dir = getenv("TG_STORE_FIXTURES");

	snprintf(buf, size, "%s/%s", dir && *dir ? dir : "tests/fixtures/store", name);
}

static char *fixture_read(const char *name, size_t *len)
{
	char path[512];

	fixture_path(name, path, sizeof(path));
	if (access(path, R_OK) != 0)
		fail_msg("fixture %s is missing (tests run from the repo root)", path);
	return slurp(path, len);
}

/*
 * What every fixture's writer was given (tests/fixtures/store/make-fixture.c):
 * four pods added, the fourth deleted (its address cooling down); the first
 * two shaped where the release recorded shaping.
 */
static void expect_shaping(struct shaping *s, size_t i)
{
	memset(s, 0, sizeof(*s));
	if (i == 0) {
		*s = (struct shaping){ .ingress_bps = 10000000,
				       .ingress_burst = 800000,
				       .egress_bps = 20000000,
				       .egress_burst = 1600000,
				       .inet_ingress_bps = 8000000,
				       .inet_egress_bps = 5000000,
				       .ns_egress_bps = 50000000,
				       .node_egress_bps = 200000000,
				       .ns_class = 0x1d3c,
				       .pod_class = 0x8a41 };
	} else if (i == 1) {
		*s = (struct shaping){ .annot_inet_egress = 2000000,
				       .annot_inet_ingress = 3000000,
				       .inet_ingress_bps = 3000000,
				       .inet_egress_bps = 2000000,
				       .ns_egress_bps = 50000000,
				       .node_egress_bps = 200000000,
				       .ns_class = 0x1d3c,
				       .pod_class = 0x9e07 };
	}
}

static const struct {
	const char *cid, *ns, *pod, *veth, *netns, *ip;
	int64_t created;
} pods[] = {
	{ "4f1c2a7be0d94c3f8a1b5e6d7c8f9a01", "team-a", "web-0", "tg412b3f97a47d",
	  "/var/run/netns/cni-4f1c2a7b", "10.77.0.10", 1764590400 },
	{ "9a8b7c6d5e4f40312a1b0c9d8e7f6a52", "team-a", "web-1", "tg44c260e95660",
	  "/var/run/netns/cni-9a8b7c6d", "10.77.0.11", 1764590401 },
	{ "c0ffee00d15ea5e0b1e55ed0ddba1103", "team-b", "batch-7f9c2", "tg97cefecbf756",
	  "/var/run/netns/cni-c0ffee00", "10.77.0.12", 1764590402 },
};

/* Every member of the state, against what the fixture's writer was given. */
static void assert_fixture_state(const struct fixture *fx, const struct ipam_state *st)
{
	assert_int_equal(st->version, IPAM_STATE_VERSION);
	assert_string_equal(st->boot_id, "5b0c1f9e-2d47-4a8b-9c31-7e6f0a2d4b58");
	assert_string_equal(st->source, fx->imds ? "imds" : "static");
	assert_int_equal(st->last_sync_ms, fx->imds ? 1764590100000LL : 0);
	assert_int_equal(st->n_pool, 10);
	for (size_t i = 0; i < st->n_pool; i++)
		assert_int_equal(st->pool[i], ip("10.77.0.10") + i);
	assert_int_equal(st->n_pending, fx->imds ? 1 : 0);
	if (fx->imds)
		assert_int_equal(st->pending[0], ip("10.77.0.30"));
	assert_int_equal(st->node_ip, fx->imds ? ip("10.77.0.4") : 0);
	assert_int_equal(st->subnet.net, fx->imds ? ip("10.77.0.0") : 0);
	assert_int_equal(st->subnet.prefix, fx->imds ? 24 : 0);
	assert_int_equal(st->last_ip, ip("10.77.0.13"));
	assert_int_equal(st->n_cooling, 1);
	assert_int_equal(st->cooling[0].ip, ip("10.77.0.13"));
	assert_int_equal(st->cooling[0].released_wall_ms, 1764590404000LL);
	{
		/* no releasedBootMs in a version 1 file of these releases: the wall clock's rest, carried over */
		int64_t wall_rest = time_now_ms() - 1764590404000LL,
			boot_rest = time_boot_ms() - st->cooling[0].released_ms;

		if (wall_rest < time_boot_ms())
			assert_in_range(boot_rest, wall_rest - 2000, wall_rest + 2000);
		else /* released before this boot, as the wall clock tells: at the boot */
			assert_int_equal(st->cooling[0].released_ms, 0);
	}
	assert_int_equal(st->n_att, ARRAY_SIZE(pods));
	for (size_t i = 0; i < st->n_att; i++) {
		const struct ipam_attachment *a = &st->att[i];
		struct shaping want;

		assert_string_equal(a->container_id, pods[i].cid);
		assert_string_equal(a->ifname, "eth0");
		assert_int_equal(a->ip, ip(pods[i].ip));
		assert_string_equal(a->netns, pods[i].netns);
		assert_string_equal(a->k8s_namespace, pods[i].ns);
		assert_string_equal(a->pod, pods[i].pod);
		assert_string_equal(a->host_veth, pods[i].veth);
		assert_int_equal(a->created, pods[i].created);
		expect_shaping(&want, fx->shaping ? i : SIZE_MAX);
		assert_shaping_equal(&want, &a->shaping, i);
		assert_false(a->reshape_pending); /* no earlier format had it */
	}
}

/* The fixture is the shape its row says (it was not rewritten by anything). */
static void assert_layout(const char *text, size_t len, enum layout layout, size_t n_att)
{
	size_t lines = 0;

	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	switch (layout) {
	case INDENTED:
		assert_true(lines > n_att + 2);
		assert_non_null(strstr(text, "{\n  \"version\":1,\n"));
		break;
	case ONE_LINE:
		assert_int_equal(lines, 1);
		break;
	case LINE_PER_ATT:
		assert_int_equal(lines, n_att + 2);
		break;
	}
}

/*
 * The current format, checked without the writer: one line for the head,
 * ending in the opening of "attachments", one line per attachment, each an
 * object of its own, and "]}" on the last; "version" is this build's.
 */
static void assert_current_format(const char *text, size_t len, size_t n_att)
{
	_cleanup_json_ json_object *root = json_tokener_parse(text);
	json_object *v, *pool;
	const char *p = text;

	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "version", &v));
	assert_int_equal(json_object_get_int(v), IPAM_STATE_VERSION);
	assert_true(json_object_object_get_ex(root, "pool", &pool));
	assert_true(json_object_object_get_ex(pool, "pending", NULL));
	assert_layout(text, len, LINE_PER_ATT, n_att);
	p = strchr(p, '\n');
	assert_non_null(p);
	assert_memory_equal(p - 15, "\"attachments\":[\n", 16);
	for (size_t i = 0; i < n_att; i++) {
		const char *end = strchr(p + 1, '\n');
		size_t n = (size_t)(end - p - 1) - (i + 1 < n_att); /* without the "," */
		char *line = strndup(p + 1, n);
		json_object *o = json_tokener_parse(line);

		assert_non_null(o);
		assert_true(json_object_is_type(o, json_type_object));
		json_object_put(o);
		free(line);
		p = end;
	}
	assert_string_equal(p, "\n]}\n");
}

/* ---- temp stores ---- */

static int setup(void **state)
{
	return fx_setup_in(state, "/tmp", "storever");
}

/* On tmpfs, as /run/tollgate: the store keeps its cache (state.cache) there. */
static int setup_tmpfs(void **state)
{
	return fx_setup_tmpfs(state, "storever");
}

/* The fixture in place of the store's file, as an upgrade finds it. */
static char *put_fixture(struct fx *f, const char *name, size_t *len)
{
	char *text = fixture_read(name, len);

	write_file(f->path, text, *len);
	return text;
}

static int changed(struct ipam_state *st, void *ctx, struct tg_err *e)
{
	return 1;
}

static int unchanged(struct ipam_state *st, void *ctx, struct tg_err *e)
{
	return 0;
}

/* ---- every earlier shape ---- */

/* The fixture is the shape its row says, and parses to what its writer was given. */
static void t_fixture_reads(void **state)
{
	const struct fixture *fx = *state;
	size_t len;
	_cleanup_free_ char *text = fixture_read(fx->file, &len);
	_cleanup_json_ json_object *root = json_tokener_parse(text);
	struct ipam_state st;
	struct tg_err e = { 0 };

	assert_layout(text, len, fx->layout, ARRAY_SIZE(pods));
	assert_non_null(root);
	assert_int_equal(json_object_object_get_ex(json_object_object_get(root, "pool"), "pending",
						   NULL),
			 fx->pending_member);
	assert_int_equal(strstr(text, "\"shaping\"") != NULL, fx->shaping);
	if (ipam_state_from_json(root, &st, &e) != 0)
		fail_msg("%s: %s", fx->file, e.msg);
	assert_fixture_state(fx, &st);
	ipam_state_free(&st);
}

/*
 * Reads leave an earlier file as it is, the lock-free one and an update that
 * changes nothing alike; the next write brings it to the current format,
 * which loads back identical.
 */
static void t_fixture_migrates_on_write(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state st, back;
	struct tg_err e = { 0 };
	size_t len, len2;
	_cleanup_free_ char *orig = NULL, *now = NULL, *saved = NULL;

	fx_open_store(f, &s);
	orig = put_fixture(f, ((const struct fixture *)f->row)->file, &len);
	/* read-only paths */
	assert_int_equal(ipam_store_load(&s, &st, &e), 0);
	assert_fixture_state(f->row, &st);
	assert_int_equal(ipam_store_update(&s, &st, unchanged, NULL, &e), 0);
	assert_fixture_state(f->row, &st);
	now = slurp(f->path, &len2);
	assert_int_equal(len2, len);
	assert_memory_equal(now, orig, len);
	/* the next write */
	assert_int_equal(ipam_store_update(&s, &st, changed, NULL, &e), 0);
	saved = slurp(f->path, &len2);
	assert_current_format(saved, len2, st.n_att);
	ipam_state_free(&st);
	ipam_store_close(&s);
	/* a fresh process: no cache, the file alone */
	fx_open_store(f, &s);
	assert_int_equal(ipam_store_load(&s, &back, &e), 0);
	assert_fixture_state(f->row, &back);
	ipam_store_close(&s);
	/* and exactly what the fixture read as */
	{
		_cleanup_json_ json_object *root = json_tokener_parse(orig);

		assert_int_equal(ipam_state_from_json(root, &st, &e), 0);
	}
	assert_state_equal(&st, &back);
	ipam_state_free(&st);
	ipam_state_free(&back);
}

/* Drops `,"releasedBootMs":N` (written since cool-downs run on the boot clock), in place. */
static size_t drop_boot_ms(char *text, size_t len)
{
	static const char key[] = ",\"releasedBootMs\":";
	char *at = strstr(text, key), *end;

	assert_non_null(at);
	end = at + strlen(key);
	while (*end == '-' || (*end >= '0' && *end <= '9'))
		end++;
	memmove(at, end, strlen(end) + 1);
	assert_null(strstr(text, key));
	return len - (size_t)(end - at);
}

/*
 * The releases that recorded the same thing wrote it differently: migrated,
 * 22bbd21's indented file is byte for byte what 313ff53 wrote, with the
 * cool-down's boot-clock time that this release adds.
 */
static void t_migrated_equals_current_release(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state st;
	struct tg_err e = { 0 };
	size_t len, cur_len;
	_cleanup_free_ char *old = NULL, *cur = fixture_read("v1-313ff53.json", &cur_len);
	_cleanup_free_ char *saved = NULL;

	fx_open_store(f, &s);
	old = put_fixture(f, "v1-22bbd21.json", &len);
	assert_true(len != cur_len || memcmp(old, cur, len) != 0);
	assert_int_equal(ipam_store_update(&s, &st, changed, NULL, &e), 0);
	saved = slurp(f->path, &len);
	len = drop_boot_ms(saved, len);
	assert_int_equal(len, cur_len);
	assert_memory_equal(saved, cur, len);
	ipam_state_free(&st);
	ipam_store_close(&s);
}

/*
 * On tmpfs the store keeps a cache of the state it last wrote. An earlier
 * file put in place of state.json (a restored backup, a node's store from
 * before an upgrade) is read, never the cache of what was there before.
 */
static void t_fixture_replaces_a_cached_store(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state st;
	struct tg_err e = { 0 };
	size_t len;
	_cleanup_free_ char *text = NULL;

	fx_open_store(f, &s);
	assert_true(s.cache_fd >= 0);
	ipam_state_init(&st);
	snprintf(st.boot_id, sizeof(st.boot_id), "another");
	locked_save(&s, &st);
	ipam_state_free(&st);
	/* cppcheck-suppress unreadVariable ; kept for _cleanup_free_ to free */
	text = put_fixture(f, "v1-2de77bb.json", &len);
	assert_false(locked_load(&s, &st)); /* parsed, not from the cache */
	assert_fixture_state(&fixtures[1], &st);
	/* migrated on the next write, the cache with it: the next locked load uses it */
	assert_int_equal(ipam_store_update(&s, &st, changed, NULL, &e), 0);
	ipam_state_free(&st);
	assert_true(locked_load(&s, &st));
	assert_fixture_state(&fixtures[1], &st);
	ipam_state_free(&st);
	ipam_store_close(&s);
}

/* ---- versions this build does not read ---- */

/* The current fixture with another "version". */
static char *with_version(const char *version, size_t *len)
{
	_cleanup_free_ char *text = fixture_read("v1-313ff53.json", len);
	const char *at = strstr(text, "\"version\":1,");
	char *out;

	assert_non_null(at);
	assert_true(asprintf(&out, "%.*s\"version\":%s,%s", (int)(at - text), text, version,
			     at + strlen("\"version\":1,")) > 0);
	*len = strlen(out);
	return out;
}

/*
 * A later release's file: refused by every load (-EPROTO, CNI code 5), the
 * message naming its version and this build's; never written over, neither
 * by a load nor by an update, and not taken for a corrupt file.
 */
static void t_newer_refused_untouched(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state st;
	struct tg_err e = { 0 };
	char want[96];
	size_t len, len2;
	_cleanup_free_ char *text = with_version("99", &len);
	_cleanup_free_ char *after = NULL;

	fx_open_store(f, &s);
	write_file(f->path, text, len);
	assert_int_equal(ipam_store_load(&s, &st, &e), -EPROTO);
	assert_int_equal(e.code, CNI_ERR_IO);
	assert_contains(e.msg, "format version 99");
	snprintf(want, sizeof(want), "format version %d, the latest this build of Tollgate (%s)",
		 IPAM_STATE_VERSION, TG_VERSION);
	assert_contains(e.msg, want);
	assert_contains(e.msg, f->path);
	assert_not_contains(e.msg, "corrupt");
	assert_int_equal(st.n_att, 0);
	e = (struct tg_err){ 0 };
	assert_int_equal(ipam_store_update(&s, &st, changed, NULL, &e), -EPROTO);
	assert_contains(e.msg, "format version 99");
	after = slurp(f->path, &len2);
	assert_int_equal(len2, len);
	assert_memory_equal(after, text, len);
	ipam_store_close(&s);
}

/* From the first release on every file carried "version": 1; none older is read. */
static const struct {
	const char *name, *version;
	int want;
	const char *says;
} versions[] = {
	{ "version 2: a later release", "2", -EPROTO,
	  "format version 2, newer than format version 1" },
	{ "version 1001: a later release", "1001", -EPROTO, "format version 1001, newer" },
	{ "version 0: never written", "0", -EBADMSG,
	  "state.version 0 is no version Tollgate ever wrote" },
	{ "version -1: never written", "-1", -EBADMSG, "state.version -1 is no version" },
	{ "version 1.5: not a version", "1.5", -EBADMSG, "state.version must be an integer" },
	{ "version \"1\": not a version", "\"1\"", -EBADMSG, "state.version must be an integer" },
};

static void t_version(void **state)
{
	size_t i = (size_t)(uintptr_t)*state - 1, len;
	_cleanup_free_ char *text = with_version(versions[i].version, &len);
	_cleanup_json_ json_object *root = json_tokener_parse(text);
	struct ipam_state st;
	struct tg_err e = { 0 };

	assert_non_null(root);
	assert_int_equal(ipam_state_from_json(root, &st, &e), versions[i].want);
	assert_int_equal(e.code, CNI_ERR_IO);
	assert_contains(e.msg, versions[i].says);
	assert_int_equal(st.n_att, 0);
}

/* The chain from the current version is empty: the document is left as it is. */
static void t_migrate_current_is_identity(void **state)
{
	size_t len;
	_cleanup_free_ char *text = fixture_read("v1-313ff53.json", &len);
	_cleanup_json_ json_object *root = json_tokener_parse(text);
	_cleanup_free_ char *before = strdup(json_object_to_json_string(root));
	struct tg_err e = { 0 };

	assert_int_equal(ipam_state_migrate(root, IPAM_STATE_VERSION, &e), 0);
	assert_string_equal(json_object_to_json_string(root), before);
	/* outside the table: refused, the document left alone */
	assert_int_equal(ipam_state_migrate(root, 0, &e), -EBADMSG);
	assert_int_equal(ipam_state_migrate(root, -5, &e), -EBADMSG);
	assert_int_equal(ipam_state_migrate(root, IPAM_STATE_VERSION + 1, &e), -EBADMSG);
	assert_string_equal(json_object_to_json_string(root), before);
}

int main(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(fixtures); i++) {
		char *name;

		if (asprintf(&name, "reads %s field by field", fixtures[i].file) < 0)
			return 1;
		add_test(name, t_fixture_reads, (void *)&fixtures[i]);
		if (asprintf(&name, "%s: left as it is by reads, current format at the next write",
			     fixtures[i].file) < 0)
			return 1;
		add_test_fixture(name, t_fixture_migrates_on_write, setup, fx_teardown,
				 (void *)&fixtures[i]);
	}
	add_test_fixture("22bbd21's file migrated is what the current release writes",
			 t_migrated_equals_current_release, setup, fx_teardown, NULL);
	add_test_fixture("an earlier file in place of a cached store is read, not the cache",
			 t_fixture_replaces_a_cached_store, setup_tmpfs, fx_teardown, NULL);
	add_test_fixture("a later version is refused naming both, the file untouched",
			 t_newer_refused_untouched, setup, fx_teardown, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
		add_test(versions[i].name, t_version, (void *)(uintptr_t)(i + 1));
	ADD(t_migrate_current_is_identity);
	return run_group("store versions");
}
