// SPDX-License-Identifier: Apache-2.0
/*
 * state.json serialisation (ipam_state_to_json / ipam_state_from_json) and
 * the on-disk store (ipam_store_open / lock / load / save): round trips,
 * modes, corrupt files that must be refused and left untouched, and many
 * processes updating one store under the lock without losing an update.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/group.h"

#include "ipam/imds.h"
#include "ipam/internal.h"
#include "ipam/ipam.h"
#include "ipam/pool.h"
#include "ipam/store.h"
#include "lib/ip4.h"
#include "tests/unit/helpers.h"
#include "tests/unit/state_eq.h"
#include "tests/unit/disk_ops.h"
#include "tests/unit/store_fx.h"

#define T0 1700000000000LL

/* ---- temp dirs ---- */

/* Files of the store's directory named like a temp file of state.json. */
static int temp_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += strncmp(de->d_name, "state.json.", 11) == 0;
	closedir(d);
	return n;
}

static int setup(void **state)
{
	return fx_setup_in(state, "/tmp", "store");
}

/* ---- a rich state ---- */

static void add_att(struct ipam_state *st, const char *cid, const char *ifname, const char *a)
{
	struct ipam_attachment *x;

	st->att = realloc(st->att, (st->n_att + 1) * sizeof(*st->att));
	assert_non_null(st->att);
	x = &st->att[st->n_att++];
	memset(x, 0, sizeof(*x));
	snprintf(x->container_id, sizeof(x->container_id), "%s", cid);
	snprintf(x->ifname, sizeof(x->ifname), "%s", ifname);
	x->ip = ip(a);
	snprintf(x->netns, sizeof(x->netns), "/var/run/netns/cni-%s", cid);
	snprintf(x->k8s_namespace, sizeof(x->k8s_namespace), "team-%s", cid);
	snprintf(x->pod, sizeof(x->pod), "trainer-%s-0", cid);
	snprintf(x->host_veth, sizeof(x->host_veth), "tg%012x", (unsigned)st->n_att);
	x->created = 1700000000 + (int64_t)st->n_att;
	x->reshape_pending = st->n_att % 3 == 0; /* a reshape left some half done */
}

static void rich_state(struct ipam_state *st)
{
	uint32_t *pool = malloc(40 * sizeof(*pool));
	size_t n = 0;

	ipam_state_init(st);
	assert_non_null(pool);
	for (uint32_t i = 10; i <= 40; i++)
		if (i != 11)
			pool[n++] = ip("10.1.0.0") + i;
	for (uint32_t i = 65; i <= 70; i++)
		pool[n++] = ip("10.1.0.0") + i;
	ipam_set_pool(st, "static", pool, n);
	snprintf(st->boot_id, sizeof(st->boot_id), "3c2e6e5e-1111-2222-3333-444455556666");
	st->last_sync_ms = T0 - 5000;
	st->last_ip = ip("10.1.0.14");
	add_att(st, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "eth0",
		"10.1.0.10");
	add_att(st, "c2", "net1", "10.1.0.12");
	add_att(st, "c3", "eth0", "10.1.0.99"); /* retired: outside the pool */
	/* an attachment with empty optional fields (pod without CNI_ARGS names) */
	add_att(st, "c4", "eth0", "10.1.0.13");
	st->att[3].k8s_namespace[0] = '\0';
	st->att[3].pod[0] = '\0';
	st->att[3].netns[0] = '\0';
	/*
	 * Shaping: every field of the first attachment non-zero and different
	 * from the others (a swapped pair of keys shows); the second has only a
	 * Kubernetes limit; the others none.
	 */
	st->att[0].shaping = (struct shaping){
		.ingress_bps = 20000000,
		.ingress_burst = 160001,
		.egress_bps = 30000000,
		.egress_burst = 240002,
		.annot_inet_egress = 50000000,
		.annot_inet_ingress = 40000000,
		.inet_ingress_bps = 45000000,
		.inet_egress_bps = 55000000,
		.ns_egress_bps = 200000000,
		.node_egress_bps = 10000000000ULL,
		.budget_fallback_bps = 10000000,
		.ns_class = 0x0002,
		.pod_class = 0x8003,
	};
	st->att[1].shaping = (struct shaping){ .egress_bps = 70000000, .egress_burst = 8750 };
	/* hostPorts: every protocol, on every address and on one */
	st->att[0].ports = (struct hostports){
		.n = 3,
		.m = { { .host_port = 8080, .container_port = 80, .proto = IPPROTO_TCP },
		       { .host_port = 53,
			 .container_port = 5353,
			 .proto = IPPROTO_UDP,
			 .host_ip = ip("10.0.0.5") },
		       { .host_port = 9, .container_port = 9, .proto = IPPROTO_SCTP } }
	};
	st->cooling = calloc(2, sizeof(*st->cooling));
	assert_non_null(st->cooling);
	st->cooling[0] = (struct ipam_cooling){ .ip = ip("10.1.0.14"),
						.released_ms = 5000 - 100,
						.released_wall_ms = T0 - 100 };
	st->cooling[1] = (struct ipam_cooling){ .ip = ip("10.1.0.66"),
						.released_ms = 5000,
						.released_wall_ms = T0 };
	st->n_cooling = 2;
	/* what IMDS sync keeps beside the pool: addresses seen once, the node's own, its subnet */
	st->pending = calloc(3, sizeof(*st->pending));
	assert_non_null(st->pending);
	st->pending[0] = ip("10.1.0.71");
	st->pending[1] = ip("10.1.0.72");
	st->pending[2] = ip("10.1.0.80");
	st->n_pending = 3;
	st->node_ip = ip("10.1.0.4");
	st->subnet = (struct cidr4){ .net = ip("10.1.0.0"), .prefix = 24 };
}

/* ---- serialisation ---- */

static void t_json_round_trip(void **state)
{
	struct ipam_state a, b;
	struct tg_err e = { 0 };
	json_object *j;

	rich_state(&a);
	j = ipam_state_to_json(&a);
	assert_non_null(j);
	assert_int_equal(ipam_state_from_json(j, &b, &e), 0);
	assert_int_equal(e.code, 0);
	assert_state_equal(&a, &b);
	json_object_put(j);
	ipam_state_free(&a);
	ipam_state_free(&b);
}

static void t_json_round_trip_through_text(void **state)
{
	struct ipam_state a, b;
	struct tg_err e = { 0 };
	json_object *j, *k;

	rich_state(&a);
	/* odd but legal characters in free-text fields survive */
	snprintf(a.att[1].netns, sizeof(a.att[1].netns), "/proc/123/ns/net \"quoted\" \\ é");
	snprintf(a.att[1].pod, sizeof(a.att[1].pod), "p.o-d_1");
	memset(a.att[2].container_id, 'x', IPAM_CONTAINER_ID_MAX);
	a.att[2].container_id[IPAM_CONTAINER_ID_MAX] = '\0';
	memset(a.att[2].pod, 'p', IPAM_K8S_POD_MAX);
	a.att[2].pod[IPAM_K8S_POD_MAX] = '\0';
	memset(a.att[2].k8s_namespace, 'n', IPAM_K8S_NAMESPACE_MAX);
	a.att[2].k8s_namespace[IPAM_K8S_NAMESPACE_MAX] = '\0';
	snprintf(a.att[2].ifname, sizeof(a.att[2].ifname), "abcdefghijklmno");
	j = ipam_state_to_json(&a);
	k = json_tokener_parse(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY));
	assert_non_null(k);
	assert_int_equal(ipam_state_from_json(k, &b, &e), 0);
	assert_state_equal(&a, &b);
	json_object_put(j);
	json_object_put(k);
	ipam_state_free(&a);
	ipam_state_free(&b);
}

static void t_json_round_trip_empty(void **state)
{
	struct ipam_state a, b;
	struct tg_err e = { 0 };
	json_object *j;

	ipam_state_init(&a);
	j = ipam_state_to_json(&a);
	assert_non_null(j);
	assert_int_equal(ipam_state_from_json(j, &b, &e), 0);
	assert_state_equal(&a, &b);
	json_object_put(j);
	ipam_state_free(&b);
}

static void t_json_shape(void **state)
{
	struct ipam_state a;
	json_object *j, *v, *pool, *arr, *att;

	rich_state(&a);
	j = ipam_state_to_json(&a);
	assert_true(json_object_object_get_ex(j, "version", &v));
	assert_int_equal(json_object_get_int(v), IPAM_STATE_VERSION);
	assert_true(json_object_object_get_ex(j, "bootId", &v));
	assert_string_equal(json_object_get_string(v), "3c2e6e5e-1111-2222-3333-444455556666");
	assert_true(json_object_object_get_ex(j, "pool", &pool));
	assert_true(json_object_object_get_ex(pool, "source", &v));
	assert_string_equal(json_object_get_string(v), "static");
	assert_true(json_object_object_get_ex(pool, "addresses", &arr));
	/* compact ranges: 10-10, 12-40, 65-70 */
	assert_int_equal(json_object_array_length(arr), 3);
	assert_string_equal(json_object_get_string(json_object_array_get_idx(arr, 0)),
			    "10.1.0.10-10.1.0.10");
	assert_string_equal(json_object_get_string(json_object_array_get_idx(arr, 1)),
			    "10.1.0.12-10.1.0.40");
	assert_true(json_object_object_get_ex(j, "cooling", &arr));
	assert_int_equal(json_object_array_length(arr), 2);
	assert_true(json_object_object_get_ex(json_object_array_get_idx(arr, 0), "ip", &v));
	assert_string_equal(json_object_get_string(v), "10.1.0.14");
	/* the wall clock, for earlier readers; the boot clock, which the cool-down runs on */
	assert_true(json_object_object_get_ex(json_object_array_get_idx(arr, 0), "releasedMs", &v));
	assert_int_equal(json_object_get_int64(v), T0 - 100);
	assert_true(
		json_object_object_get_ex(json_object_array_get_idx(arr, 0), "releasedBootMs", &v));
	assert_int_equal(json_object_get_int64(v), 5000 - 100);
	assert_true(json_object_object_get_ex(j, "attachments", &arr));
	assert_int_equal(json_object_array_length(arr), 4);
	att = json_object_array_get_idx(arr, 1);
	assert_true(json_object_object_get_ex(att, "containerId", &v));
	assert_string_equal(json_object_get_string(v), "c2");
	assert_true(json_object_object_get_ex(att, "ifname", &v));
	assert_string_equal(json_object_get_string(v), "net1");
	assert_true(json_object_object_get_ex(att, "ip", &v));
	assert_string_equal(json_object_get_string(v), "10.1.0.12");
	assert_true(json_object_object_get_ex(att, "netns", &v));
	assert_true(json_object_object_get_ex(att, "namespace", &v));
	assert_string_equal(json_object_get_string(v), "team-c2");
	assert_true(json_object_object_get_ex(att, "pod", &v));
	assert_true(json_object_object_get_ex(att, "hostVeth", &v));
	assert_true(json_object_object_get_ex(att, "created", &v));
	json_object_put(j);
	ipam_state_free(&a);
}

/* Every malformed document is refused with code 5 (I/O: a corrupt store). */
struct bad_doc {
	const char *name;
	const char *json;
};

static const struct bad_doc bad_docs[] = {
	{ "from_json: array", "[]" },
	{ "from_json: no version", "{\"attachments\":[]}" },
	{ "from_json: version 2", "{\"version\":2,\"attachments\":[]}" },
	{ "from_json: version 0", "{\"version\":0,\"attachments\":[]}" },
	{ "from_json: version string", "{\"version\":\"1\",\"attachments\":[]}" },
	{ "from_json: no attachments", "{\"version\":1}" },
	{ "from_json: attachments object", "{\"version\":1,\"attachments\":{}}" },
	{ "from_json: attachment not object", "{\"version\":1,\"attachments\":[5]}" },
	{ "from_json: attachment bad ip",
	  "{\"version\":1,\"attachments\":[{\"containerId\":\"a\",\"ifname\":\"eth0\",\"ip\":\"10.1.0.300\"}]}" },
	{ "from_json: attachment ip number",
	  "{\"version\":1,\"attachments\":[{\"containerId\":\"a\",\"ifname\":\"eth0\",\"ip\":167837706}]}" },
	{ "from_json: attachment without ip",
	  "{\"version\":1,\"attachments\":[{\"containerId\":\"a\",\"ifname\":\"eth0\"}]}" },
	{ "from_json: attachment without containerId",
	  "{\"version\":1,\"attachments\":[{\"ifname\":\"eth0\",\"ip\":\"10.1.0.1\"}]}" },
	{ "from_json: attachment ifname too long",
	  "{\"version\":1,\"attachments\":[{\"containerId\":\"a\",\"ifname\":\"abcdefghijklmnop\",\"ip\":\"10.1.0.1\"}]}" },
	{ "from_json: attachment created negative",
	  "{\"version\":1,\"attachments\":[{\"containerId\":\"a\",\"ifname\":\"eth0\",\"ip\":\"10.1.0.1\",\"created\":-1}]}" },
	{ "from_json: attachment created string",
	  "{\"version\":1,\"attachments\":[{\"containerId\":\"a\",\"ifname\":\"eth0\",\"ip\":\"10.1.0.1\",\"created\":\"now\"}]}" },
	{ "from_json: pool addresses bad",
	  "{\"version\":1,\"pool\":{\"addresses\":[\"10.1.0.1-x\"]},\"attachments\":[]}" },
	{ "from_json: pool not object", "{\"version\":1,\"pool\":[],\"attachments\":[]}" },
	{ "from_json: cooling not array", "{\"version\":1,\"cooling\":{},\"attachments\":[]}" },
	{ "from_json: cooling bad ip",
	  "{\"version\":1,\"cooling\":[{\"ip\":\"x\",\"releasedMs\":1}],\"attachments\":[]}" },
	{ "from_json: cooling element not object",
	  "{\"version\":1,\"cooling\":[\"10.1.0.1\"],\"attachments\":[]}" },
	{ "from_json: lastIp bad", "{\"version\":1,\"lastIp\":\"10.1\",\"attachments\":[]}" },
	{ "from_json: bootId number", "{\"version\":1,\"bootId\":7,\"attachments\":[]}" },
};

static void t_from_json_bad(void **state)
{
	const struct bad_doc *d = *state;
	json_object *j = json_tokener_parse(d->json);
	struct ipam_state st;
	struct tg_err e = { 0 };

	size_t n_att, n_pool;
	int r;

	assert_non_null(j);
	r = ipam_state_from_json(j, &st, &e);
	/* the state is left empty and freeable */
	n_att = st.n_att;
	n_pool = st.n_pool;
	ipam_state_free(&st);
	json_object_put(j); /* before any assertion: a failing case must not leak */
	if (r >= 0)
		fail_msg("accepted: %s", d->json);
	if (e.code != CNI_ERR_IO)
		fail_msg("code %d, want 5 (%s) for %s", e.code, e.msg, d->json);
	assert_true(e.msg[0] != '\0');
	assert_int_equal(n_att, 0);
	assert_int_equal(n_pool, 0);
}

static void t_from_json_minimal(void **state)
{
	json_object *j = json_tokener_parse("{\"version\":1,\"attachments\":[],\"unknownKey\":{}}");
	struct ipam_state st;
	struct tg_err e = { 0 };

	assert_int_equal(ipam_state_from_json(j, &st, &e), 0);
	assert_int_equal(st.version, 1);
	assert_int_equal(st.n_att, 0);
	assert_int_equal(st.n_pool, 0);
	assert_int_equal(st.n_cooling, 0);
	assert_string_equal(st.boot_id, "");
	ipam_state_free(&st);
	json_object_put(j);
}

/* ---- the store ---- */

static void t_open_creates_dir_and_lock(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct stat sb;
	char lock[400];

	fx_open_store(f, &s);
	assert_string_equal(s.dir, f->dir);
	assert_string_equal(s.path, f->path);
	assert_int_equal(stat(f->dir, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(sb.st_mode & 07777, 0700);
	assert_int_equal(stat(f->data, &sb), 0); /* created on the way */
	snprintf(lock, sizeof(lock), "%s/lock", f->dir);
	assert_int_equal(stat(lock, &sb), 0);
	assert_true(S_ISREG(sb.st_mode));
	assert_int_equal(sb.st_mode & 07777, 0600);
	assert_true(s.lock_fd >= 0);
	assert_false(s.locked);
	/* no state file until the first save */
	assert_int_equal(access(f->path, F_OK), -1);
	ipam_store_close(&s);
	assert_int_equal(s.lock_fd, -1);
}

static void t_open_existing_dir(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;

	fx_open_store(f, &s);
	ipam_store_close(&s);
	fx_open_store(f, &s);
	ipam_store_close(&s);
}

static void t_open_fails_under_a_file(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct tg_err e = { 0 };
	char file[128];

	snprintf(file, sizeof(file), "%s/plainfile", f->tmp);
	write_file(file, "x", 1);
	assert_true(ipam_store_open(&s, file, "net", &e) < 0);
	assert_int_equal(e.code, CNI_ERR_IO);
	assert_contains(e.msg, file);
	ipam_store_close(&s);
}

static void t_open_too_long(void **state)
{
	struct ipam_store s;
	struct tg_err e = { 0 };
	char *dir = malloc(5000);

	assert_non_null(dir);
	dir[0] = '/';
	memset(dir + 1, 'd', 4990);
	dir[4991] = '\0';
	assert_true(ipam_store_open(&s, dir, "net", &e) < 0);
	assert_true(e.code == CNI_ERR_CONFIG || e.code == CNI_ERR_IO);
	ipam_store_close(&s);
	free(dir);
}

static void t_load_missing_is_empty(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state st;
	struct tg_err e = { 0 };

	fx_open_store(f, &s);
	assert_int_equal(ipam_store_load(&s, &st, &e), 0);
	assert_int_equal(e.code, 0);
	assert_int_equal(st.version, IPAM_STATE_VERSION);
	assert_int_equal(st.n_att, 0);
	assert_int_equal(st.n_pool, 0);
	assert_int_equal(st.n_cooling, 0);
	assert_string_equal(st.boot_id, "");
	ipam_state_free(&st);
	ipam_store_close(&s);
}

static void t_save_load_round_trip(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state a, b;
	struct tg_err e = { 0 };
	struct stat sb;

	rich_state(&a);
	fx_open_store(f, &s);
	assert_int_equal(ipam_store_lock(&s, &e), 0);
	assert_true(s.locked);
	assert_int_equal(ipam_store_save(&s, &a, &e), 0);
	ipam_store_unlock(&s);
	assert_false(s.locked);
	assert_int_equal(stat(f->path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
	/* no temp file left behind */
	assert_int_equal(temp_files(f->dir), 0);
	assert_int_equal(ipam_store_load(&s, &b, &e), 0);
	assert_state_equal(&a, &b);
	ipam_state_free(&a);
	ipam_state_free(&b);
	ipam_store_close(&s);
}

/* The stamp says whether state.json was replaced since a reader last looked. */
static void t_stamp_changes_with_each_save(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_store_stamp stamp = { 0 };
	struct ipam_state a;
	struct tg_err e = { 0 };

	rich_state(&a);
	fx_open_store(f, &s);
	/* no store yet: the first look is a change, the second not */
	assert_int_equal(ipam_store_stamp_changed(&s, &stamp), 1);
	assert_false(stamp.present);
	assert_int_equal(ipam_store_stamp_changed(&s, &stamp), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(ipam_store_lock(&s, &e), 0);
		assert_int_equal(ipam_store_save(&s, &a, &e), 0);
		ipam_store_unlock(&s);
		/* each save, even of the same state, is a new file */
		assert_int_equal(ipam_store_stamp_changed(&s, &stamp), 1);
		assert_true(stamp.present);
		assert_int_equal(ipam_store_stamp_changed(&s, &stamp), 0);
	}
	/* gone: a change again */
	assert_int_equal(unlink(f->path), 0);
	assert_int_equal(ipam_store_stamp_changed(&s, &stamp), 1);
	assert_false(stamp.present);
	ipam_state_free(&a);
	ipam_store_close(&s);
}

/* A directory planted (or left) where a fixed temp name would be does not stop a save. */
static void t_save_ignores_a_planted_temp_name(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state a, b;
	struct tg_err e = { 0 };
	char planted[400];

	fx_open_store(f, &s);
	snprintf(planted, sizeof(planted), "%s.tmp", f->path);
	assert_int_equal(mkdir(planted, 0700), 0);
	ipam_state_init(&a);
	ipam_state_init(&b);
	assert_int_equal(ipam_store_lock(&s, &e), 0);
	assert_int_equal(ipam_store_save(&s, &a, &e), 0);
	ipam_store_unlock(&s);
	assert_int_equal(ipam_store_load(&s, &b, &e), 0);
	assert_int_equal(rmdir(planted), 0);
	assert_int_equal(temp_files(f->dir), 0);
	ipam_state_free(&a);
	ipam_state_free(&b);
	ipam_store_close(&s);
}

/*
 * A save SIGKILLed between its temp file and the rename leaves that file:
 * the next save removes it, so a crash storm leaves at most one behind.
 */
static void t_save_removes_a_killed_saves_temp_file(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state a, b;
	struct tg_err e = { 0 };
	char left[400];
	FILE *fp;

	fx_open_store(f, &s);
	snprintf(left, sizeof(left), "%s.tmp", f->path);
	fp = fopen(left, "w");
	assert_non_null(fp);
	fputs("{\"version\": 1, \"attachm", fp);
	fclose(fp);
	assert_int_equal(temp_files(f->dir), 1);
	rich_state(&a);
	ipam_state_init(&b);
	assert_int_equal(ipam_store_lock(&s, &e), 0);
	assert_int_equal(ipam_store_save(&s, &a, &e), 0);
	ipam_store_unlock(&s);
	assert_int_equal(temp_files(f->dir), 0);
	assert_int_equal(ipam_store_load(&s, &b, &e), 0);
	assert_int_equal(b.n_att, a.n_att);
	ipam_state_free(&a);
	ipam_state_free(&b);
	ipam_store_close(&s);
}

static void t_saved_file_is_json_with_version(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state a;
	struct tg_err e = { 0 };
	json_object *j, *v;
	size_t len;
	char *text;

	rich_state(&a);
	fx_open_store(f, &s);
	assert_int_equal(ipam_store_save(&s, &a, &e), 0);
	text = slurp(f->path, &len);
	assert_true(len > 0);
	assert_int_equal(text[len - 1], '\n');
	j = json_tokener_parse(text);
	assert_non_null(j);
	assert_true(json_object_object_get_ex(j, "version", &v));
	assert_int_equal(json_object_get_int(v), 1);
	json_object_put(j);
	free(text);
	ipam_state_free(&a);
	ipam_store_close(&s);
}

static void t_save_replaces(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state a, b;
	struct tg_err e = { 0 };

	rich_state(&a);
	fx_open_store(f, &s);
	assert_int_equal(ipam_store_save(&s, &a, &e), 0);
	assert_int_equal(ipam_release(&a, "c2", "net1", T0, true, NULL), 1);
	assert_int_equal(ipam_store_save(&s, &a, &e), 0);
	assert_int_equal(ipam_store_load(&s, &b, &e), 0);
	assert_int_equal(b.n_att, 3);
	assert_null(ipam_find(&b, "c2", "net1"));
	assert_int_equal(b.n_cooling, 3);
	ipam_state_free(&a);
	ipam_state_free(&b);
	ipam_store_close(&s);
}

static void t_save_restores_mode(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state a;
	struct tg_err e = { 0 };
	struct stat sb;

	ipam_state_init(&a);
	fx_open_store(f, &s);
	assert_int_equal(ipam_store_save(&s, &a, &e), 0);
	assert_int_equal(chmod(f->path, 0644), 0);
	assert_int_equal(ipam_store_save(&s, &a, &e), 0);
	assert_int_equal(stat(f->path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
	ipam_store_close(&s);
}

static void t_save_load_tolerates_trailing_whitespace(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state st;
	struct tg_err e = { 0 };
	const char *doc = "{\"version\":1,\"attachments\":[]}\n\n  \n";

	fx_open_store(f, &s);
	write_file(f->path, doc, strlen(doc));
	assert_int_equal(ipam_store_load(&s, &st, &e), 0);
	ipam_state_free(&st);
	ipam_store_close(&s);
}

static void t_lock_is_exclusive(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct tg_err e = { 0 };
	char lock[400];
	int fd;

	fx_open_store(f, &s);
	snprintf(lock, sizeof(lock), "%s/lock", f->dir);
	fd = open(lock, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(ipam_store_lock(&s, &e), 0);
	/* another open file description cannot take it */
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), -1);
	assert_int_equal(errno, EWOULDBLOCK);
	ipam_store_unlock(&s);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	assert_int_equal(flock(fd, LOCK_UN), 0);
	/* close releases a held lock too */
	assert_int_equal(ipam_store_lock(&s, &e), 0);
	ipam_store_close(&s);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	close(fd);
}

static void t_unlock_twice_is_harmless(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;

	fx_open_store(f, &s);
	ipam_store_unlock(&s);
	ipam_store_unlock(&s);
	ipam_store_close(&s);
	ipam_store_close(&s);
}

/* The disk operations of one locked save of a rich state, as "fsync-file rename ...". */
static void save_ops(struct ipam_store *s, char *buf, size_t size)
{
	struct ipam_state a;

	rich_state(&a);
	assert_int_equal(ipam_store_lock(s, &(struct tg_err){ 0 }), 0);
	disk_ops_arm();
	assert_int_equal(ipam_store_save(s, &a, &(struct tg_err){ 0 }), 0);
	disk_ops_text(buf, size);
	ipam_store_unlock(s);
	ipam_state_free(&a);
}

/*
 * On a disk a save survives a crash: the new file is flushed before it
 * replaces the old one, and the directory after (DESIGN.md "On disk").
 */
static void t_durable_on_disk(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	char ops[256];

	fx_open_store(f, &s);
	assert_true(s.durable);
	save_ops(&s, ops, sizeof(ops));
	assert_string_equal(ops, "fsync-file rename fsync-dir");
	ipam_store_close(&s);
}

/* fsync only where it buys something: not on tmpfs (the default /run/tollgate). */
static void t_not_durable_on_tmpfs(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	char ops[256];

	fx_open_store(f, &s);
	assert_false(s.durable);
	assert_true(s.cache_fd >= 0); /* and the cache instead (t_cache_matches_the_json) */
	save_ops(&s, ops, sizeof(ops));
	assert_string_equal(ops, "rename");
	ipam_store_close(&s);
}

/* ---- corrupt files: refused with code 5, never replaced ---- */

struct corrupt {
	const char *name;
	const char *text; /* NULL: special, see t_corrupt */
};

static const struct corrupt corrupts[] = {
	{ "corrupt: garbage", "this is not json\n" },
	{ "corrupt: binary", "\x7f"
			     "ELF\x02\x01\x01\x00\x00\x00" },
	{ "corrupt: empty file", "" },
	{ "corrupt: truncated", NULL },
	/* a later version is not corrupt (test_store_versions.c); 0 was never written */
	{ "corrupt: version 0", "{\"version\":0,\"bootId\":\"x\",\"attachments\":[]}\n" },
	{ "corrupt: attachment with bad ip",
	  "{\"version\":1,\"attachments\":[{\"containerId\":\"a\",\"ifname\":\"eth0\",\"ip\":\"10.1.0.999\"}]}\n" },
	{ "corrupt: trailing garbage", "{\"version\":1,\"attachments\":[]}\nxyz" },
	{ "corrupt: two documents",
	  "{\"version\":1,\"attachments\":[]}{\"version\":1,\"attachments\":[]}" },
	/* json-c would keep the last: a store written twice over is not trusted */
	{ "corrupt: a member twice", "{\"version\":1,\"attachments\":[],\"attachments\":[]}\n" },
	{ "corrupt: top-level array", "[{\"version\":1,\"attachments\":[]}]\n" },
	{ "corrupt: attachments missing", "{\"version\":1}\n" },
	{ "corrupt: version 0", "{\"version\":0,\"attachments\":[]}\n" },
};

static void t_corrupt(void **state)
{
	struct fx *f = *state;
	const struct corrupt *c = f->row;
	struct ipam_store s;
	struct ipam_state st;
	struct tg_err e = { 0 };
	char *before, *after;
	size_t n_before, n_after;
	struct stat sb1, sb2;

	fx_open_store(f, &s);
	if (c->text) {
		write_file(f->path, c->text, strlen(c->text));
	} else {
		/* a valid file cut in the middle */
		struct ipam_state a;
		char *full;
		size_t len;

		rich_state(&a);
		assert_int_equal(ipam_store_save(&s, &a, &e), 0);
		ipam_state_free(&a);
		full = slurp(f->path, &len);
		write_file(f->path, full, len / 2);
		free(full);
	}
	before = slurp(f->path, &n_before);
	assert_int_equal(stat(f->path, &sb1), 0);

	assert_int_equal(ipam_store_lock(&s, &e), 0);
	if (ipam_store_load(&s, &st, &e) >= 0)
		fail_msg("a corrupt state file was loaded");
	ipam_store_unlock(&s);
	assert_int_equal(e.code, CNI_ERR_IO);
	assert_contains(e.msg, f->path);
	assert_contains(e.msg, "corrupt");
	assert_contains(e.msg, "tollgate-ipam doctor");
	/* nothing was allocated that needs freeing, and freeing is harmless */
	assert_int_equal(st.n_att, 0);
	ipam_state_free(&st);

	after = slurp(f->path, &n_after);
	assert_int_equal(stat(f->path, &sb2), 0);
	assert_int_equal(n_before, n_after);
	assert_memory_equal(before, after, n_before);
	assert_int_equal(sb1.st_ino, sb2.st_ino); /* not replaced either */
	assert_int_equal(temp_files(f->dir), 0);
	free(before);
	free(after);
	ipam_store_close(&s);
}

static void t_unreadable_is_an_error(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state st;
	struct tg_err e = { 0 };

	fx_open_store(f, &s);
	/* a directory where the file should be: open works, read fails */
	assert_int_equal(mkdir(f->path, 0700), 0);
	assert_true(ipam_store_load(&s, &st, &e) < 0);
	assert_int_equal(e.code, CNI_ERR_IO);
	ipam_state_free(&st);
	ipam_store_close(&s);
}

static void t_symlink_not_followed(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state st;
	struct tg_err e = { 0 };
	char target[128];

	fx_open_store(f, &s);
	snprintf(target, sizeof(target), "%s/elsewhere.json", f->tmp);
	write_file(target, "{\"version\":1,\"attachments\":[]}", 31);
	assert_int_equal(symlink(target, f->path), 0);
	assert_true(ipam_store_load(&s, &st, &e) < 0);
	assert_int_equal(e.code, CNI_ERR_IO);
	ipam_state_free(&st);
	ipam_store_close(&s);
}

/* ---- concurrent writers ---- */

#define WRITERS 8
#define ROUNDS 25

struct writer_arg {
	const char *data_dir;
	int id;
};

/* One writer process; its exit status names the step that failed. */
static int writer(void *arg)
{
	const struct writer_arg *w = arg;
	const char *data_dir = w->data_dir;
	int id = w->id;
	struct ipam_store s;
	struct tg_err e = { 0 };

	if (ipam_store_open(&s, data_dir, "net", &e) < 0)
		return 2;
	for (int r = 0; r < ROUNDS; r++) {
		struct ipam_state st;
		struct ipam_attachment rq, got;
		bool ex = true;

		memset(&rq, 0, sizeof(rq));
		snprintf(rq.container_id, sizeof(rq.container_id), "w%d-r%d", id, r);
		snprintf(rq.ifname, sizeof(rq.ifname), "eth0");
		if (ipam_store_lock(&s, &e) < 0)
			return 3;
		if (ipam_store_load(&s, &st, &e) < 0)
			return 4;
		if (ipam_assign(&st, &rq, T0, 0, &got, &ex, &e) < 0 || ex)
			return 5;
		if (ipam_store_save(&s, &st, &e) < 0)
			return 6;
		ipam_store_unlock(&s);
		ipam_state_free(&st);
		if (r % 3 == id % 3)
			usleep(100);
	}
	ipam_store_close(&s);
	return 0;
}

static void t_concurrent_writers(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state st;
	struct tg_err e = { 0 };
	pid_t pids[WRITERS];
	struct writer_arg args[WRITERS];
	uint32_t *pool = malloc(65534 * sizeof(*pool));

	/* seed the store with a big pool (10.8.0.1 - 10.8.255.254) */
	assert_non_null(pool);
	for (uint32_t i = 0; i < 65534; i++)
		pool[i] = ip("10.8.0.1") + i;
	ipam_state_init(&st);
	ipam_set_pool(&st, "static", pool, 65534);
	fx_open_store(f, &s);
	assert_int_equal(ipam_store_save(&s, &st, &e), 0);
	ipam_state_free(&st);

	for (int i = 0; i < WRITERS; i++) {
		args[i] = (struct writer_arg){ .data_dir = f->data, .id = i };
		pids[i] = child_start(writer, &args[i]);
	}
	for (int i = 0; i < WRITERS; i++) {
		int rc = child_wait(pids[i], "a writer");

		if (rc != 0)
			fail_msg("writer %d failed at step %d", i, rc);
	}

	assert_int_equal(ipam_store_load(&s, &st, &e), 0);
	assert_int_equal(st.n_pool, 65534);
	assert_int_equal(st.n_att, WRITERS * ROUNDS);
	for (int i = 0; i < WRITERS; i++)
		for (int r = 0; r < ROUNDS; r++) {
			char cid[32];

			snprintf(cid, sizeof(cid), "w%d-r%d", i, r);
			if (!ipam_find(&st, cid, "eth0"))
				fail_msg("attachment %s was lost", cid);
		}
	/* 200 distinct addresses: sort a copy and look for neighbours */
	uint32_t ips[WRITERS * ROUNDS];
	for (size_t i = 0; i < st.n_att; i++)
		ips[i] = st.att[i].ip;
	for (size_t i = 1; i < st.n_att; i++)
		for (size_t j = i; j > 0 && ips[j - 1] > ips[j]; j--) {
			uint32_t t = ips[j];

			ips[j] = ips[j - 1];
			ips[j - 1] = t;
		}
	for (size_t i = 1; i < st.n_att; i++)
		assert_true(ips[i - 1] != ips[i]);
	/* round robin from the start of the pool: exactly the first 200 addresses */
	assert_int_equal(ips[0], ip("10.8.0.1"));
	assert_int_equal(ips[WRITERS * ROUNDS - 1], ip("10.8.0.1") + WRITERS * ROUNDS - 1);
	ipam_state_free(&st);
	ipam_store_close(&s);
}

/* A dataDir or network directory others can write to is refused, naming it; a sticky one is not. */
static void t_open_refuses_dirs_others_can_write(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct tg_err e = { 0 };
	const char *dirs[] = { f->data, f->dir };

	fx_open_store(f, &s);
	ipam_store_close(&s);
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		for (unsigned mode = 0; mode < 3; mode++) {
			unsigned m = mode == 0 ? 0777 : mode == 1 ? 0770 : 0757;

			memset(&e, 0, sizeof(e));
			assert_int_equal(chmod(dirs[i], m), 0);
			assert_int_equal(ipam_store_open(&s, f->data, "net", &e), -EPERM);
			assert_int_equal(e.code, CNI_ERR_IO);
			assert_non_null(strstr(e.msg, dirs[i]));
			assert_non_null(strstr(e.msg, "writable by others"));
			ipam_store_close(&s);
		}
		/* sticky, as /tmp: others may not replace what is not theirs */
		assert_int_equal(chmod(dirs[i], 01777), 0);
		fx_open_store(f, &s);
		ipam_store_close(&s);
		assert_int_equal(chmod(dirs[i], 0700), 0);
	}
}

/* ---- the cache (state.cache, ipam/snapshot.h): used on tmpfs, under the lock ---- */

/* Stores on tmpfs (the default /run/tollgate) keep a cache; /tmp may not be one. */
static int setup_tmpfs(void **state)
{
	return fx_setup_tmpfs(state, "store");
}

/* Stores on a disk: fsync'd, no cache. */
static int setup_disk(void **state)
{
	return fx_setup_disk(state, "store");
}

static void cache_path(const struct fx *f, char *buf, size_t size)
{
	snprintf(buf, size, "%s/state.cache", f->dir);
}

/* A locked load reads the cache, and gives exactly what parsing state.json gives. */
static void t_cache_matches_the_json(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state a, b, c;
	struct stat sb;
	char cache[400];

	rich_state(&a);
	fx_open_store(f, &s);
	assert_false(s.durable);
	locked_save(&s, &a);
	cache_path(f, cache, sizeof(cache));
	assert_int_equal(stat(cache, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
	assert_true(sb.st_size > (off_t)(a.n_att * sizeof(*a.att)));
	assert_true(locked_load(&s, &b));
	assert_state_equal(&a, &b);
	/* a reader without the lock parses state.json and never looks at the cache */
	assert_int_equal(ipam_store_load(&s, &c, NULL), 0);
	assert_null(s.snap.json);
	assert_state_equal(&a, &c);
	ipam_state_free(&a);
	ipam_state_free(&b);
	ipam_state_free(&c);
	ipam_store_close(&s);
}

/* The lines of state.json's attachments, split at "\n". */
static size_t att_lines(char *text, char **lines, size_t max)
{
	size_t n = 0;
	char *save = NULL;

	for (char *l = strtok_r(text, "\n", &save); l && n < max; l = strtok_r(NULL, "\n", &save))
		if (strncmp(l, "{\"containerId\"", 14) == 0)
			lines[n++] = l;
	return n;
}

/*
 * An update rewrites only what changed: every other attachment keeps its
 * exact text (one per line), the changed one is new, and the file still
 * parses to the state in memory.
 */
static void t_cache_keeps_unchanged_text(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state a, b, c;
	char *t1, *t2, *l1[8], *l2[8];
	size_t len;

	rich_state(&a);
	fx_open_store(f, &s);
	locked_save(&s, &a);
	t1 = slurp(f->path, &len);
	assert_true(locked_load(&s, &b));
	snprintf(b.att[1].pod, sizeof(b.att[1].pod), "renamed-pod");
	b.att[3].shaping.egress_bps = 1000000;
	locked_save(&s, &b);
	t2 = slurp(f->path, &len);
	assert_int_equal(att_lines(t1, l1, 8), 4);
	assert_int_equal(att_lines(t2, l2, 8), 4);
	assert_string_equal(l1[0], l2[0]);
	assert_string_equal(l1[2], l2[2]);
	assert_string_not_equal(l1[1], l2[1]);
	assert_non_null(strstr(l2[1], "\"pod\":\"renamed-pod\""));
	assert_non_null(strstr(l2[3], "\"egressRate\":1000000"));
	assert_int_equal(ipam_store_load(&s, &c, NULL), 0);
	assert_state_equal(&b, &c);
	free(t1);
	free(t2);
	ipam_state_free(&a);
	ipam_state_free(&b);
	ipam_state_free(&c);
	ipam_store_close(&s);
}

/* ADD appends, DEL removes: the cache follows a store through many updates. */
static void t_cache_follows_updates(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state st, parsed;
	char cid[16];

	fx_open_store(f, &s);
	ipam_state_init(&st);
	locked_save(&s, &st);
	ipam_state_free(&st);
	for (int round = 0; round < 40; round++) {
		bool hit = locked_load(&s, &st);

		assert_true(round == 0 || hit);
		snprintf(cid, sizeof(cid), "c%d", round);
		add_att(&st, cid, "eth0", "10.9.0.0");
		st.att[st.n_att - 1].ip += (uint32_t)round;
		if (round % 3 == 2)
			ipam_release(&st, st.att[st.n_att / 2].container_id, "eth0", T0, true,
				     NULL);
		locked_save(&s, &st);
		assert_int_equal(ipam_store_load(&s, &parsed, NULL), 0);
		assert_state_equal(&st, &parsed);
		ipam_state_free(&parsed);
		ipam_state_free(&st);
	}
	ipam_store_close(&s);
}

/* Overwrites the file's bytes at `off` in place (same inode, same size). */
static void poke(const char *path, off_t off, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, bytes, n, off), (ssize_t)n);
	close(fd);
}

/* state.json changed by anything else, even in place at the same size: the cache is not used. */
static void t_cache_ignored_after_an_edit(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state a, b;
	char *text, *at;
	size_t len;

	rich_state(&a);
	fx_open_store(f, &s);
	locked_save(&s, &a);
	text = slurp(f->path, &len);
	at = strstr(text, "trainer-c2-0");
	assert_non_null(at);
	poke(f->path, (off_t)(at - text), "trainer-c2-9", 12);
	assert_false(locked_load(&s, &b));
	assert_string_equal(b.att[1].pod, "trainer-c2-9");
	free(text);
	ipam_state_free(&a);
	ipam_state_free(&b);
	ipam_store_close(&s);
}

/* A cache cut short, cleared, of another build or emptied is not used; the store still loads. */
static void t_cache_damaged_is_ignored(void **state)
{
	struct fx *f = *state;
	char cache[400];
	struct stat sb;

	cache_path(f, cache, sizeof(cache));
	for (int how = 0; how < 4; how++) {
		struct ipam_store s;
		struct ipam_state a, b;

		rich_state(&a);
		fx_open_store(f, &s);
		locked_save(&s, &a);
		assert_int_equal(stat(cache, &sb), 0);
		switch (how) {
		case 0: /* a write cut short after the body */
			assert_int_equal(truncate(cache, sb.st_size / 2), 0);
			break;
		case 1: /* a write cut short before the header: its magic cleared */
			poke(cache, 0, "\0\0\0\0\0\0\0\0", 8);
			break;
		case 2: /* written by another build */
			poke(cache, 8, "0.0.0-other", 11);
			break;
		default:
			assert_int_equal(truncate(cache, 0), 0);
		}
		assert_false(locked_load(&s, &b));
		assert_state_equal(&a, &b);
		/* the next save writes a good one */
		locked_save(&s, &b);
		ipam_state_free(&b);
		assert_true(locked_load(&s, &b));
		assert_state_equal(&a, &b);
		ipam_state_free(&a);
		ipam_state_free(&b);
		ipam_store_close(&s);
	}
}

/* On a disk (fsync'd store) there is no cache: its pages could land in any order. */
static void t_cache_only_on_tmpfs(void **state)
{
	struct fx *f = *state;
	struct ipam_store s;
	struct ipam_state a, b;
	char cache[400];

	fx_open_store(f, &s);
	rich_state(&a);
	locked_save(&s, &a);
	cache_path(f, cache, sizeof(cache));
	assert_int_equal(access(cache, F_OK), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(s.cache_fd, -1);
	/* a locked load parses state.json */
	assert_false(locked_load(&s, &b));
	assert_state_equal(&a, &b);
	ipam_state_free(&a);
	ipam_state_free(&b);
	ipam_store_close(&s);
}

/*
 * The cache copies attachments' text as an older write left it: a change to
 * how an attachment is written (or to the struct) must bump
 * IPAM_SNAPSHOT_LAYOUT, so that no cache of the old layout is read. Update
 * both numbers together.
 */
#define PINNED_LAYOUT 6
#define PINNED_ATT_TEXT                                                                          \
	"{\"containerId\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"," \
	"\"ifname\":\"eth0\",\"ip\":\"10.1.0.10\",\"netns\":\"/var/run/netns/cni-"               \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\"namespace\":"      \
	"\"team-0123456789abcdef0123456789abcdef0123456789abcdef0123456789\",\"pod\":"           \
	"\"trainer-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef-0\","        \
	"\"hostVeth\":\"tg000000000001\",\"created\":1700000001,\"shaping\":{\"ingressRate\":"   \
	"20000000,\"ingressBurst\":160001,\"egressRate\":30000000,\"egressBurst\":240002,"       \
	"\"annotationInternetEgress\":50000000,\"annotationInternetIngress\":40000000,"          \
	"\"internetIngress\":45000000,\"internetEgress\":55000000,\"namespaceInternetEgress\":"  \
	"200000000,\"nodeInternetEgress\":10000000000,\"budgetFallback\":10000000,"              \
	"\"namespaceClass\":2,\"podClass\":32771},\"ports\":[{\"hostPort\":8080,"                \
	"\"containerPort\":80,\"protocol\":\"tcp\"},{\"hostPort\":53,\"containerPort\":5353,"    \
	"\"protocol\":\"udp\",\"hostIP\":\"10.0.0.5\"},{\"hostPort\":9,\"containerPort\":9,"     \
	"\"protocol\":\"sctp\"}]}"
#define PINNED_ATT_SIZE 1392

static void t_cache_layout_follows_the_text(void **state)
{
	struct ipam_state a;
	json_object *o;

	const char *text;

	rich_state(&a);
	o = ipam_attachment_to_json(&a.att[0]);
	assert_non_null(o);
	text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							 JSON_C_TO_STRING_NOSLASHESCAPE);
	if (strcmp(text, PINNED_ATT_TEXT) != 0 || sizeof(struct ipam_attachment) != PINNED_ATT_SIZE)
		fail_msg("an attachment's text or struct changed (%zu bytes, %s): bump "
			 "IPAM_SNAPSHOT_LAYOUT and update PINNED_* here",
			 sizeof(struct ipam_attachment), text);
	assert_int_equal(IPAM_SNAPSHOT_LAYOUT, PINNED_LAYOUT);
	json_object_put(o);
	ipam_state_free(&a);
}

/* ---- the group ---- */

/* Most store tests run in a fresh data directory (setup/fx_teardown). */
#define ADD_STORE(fn) add_test_fixture(#fn, fn, setup, fx_teardown, NULL)

int main(void)
{
	ADD(t_json_round_trip);
	ADD(t_json_round_trip_through_text);
	ADD(t_json_round_trip_empty);
	ADD(t_json_shape);
	ADD(t_from_json_minimal);
	for (size_t i = 0; i < ARRAY_SIZE(bad_docs); i++)
		add_test(bad_docs[i].name, t_from_json_bad, (void *)&bad_docs[i]);
	ADD_STORE(t_open_creates_dir_and_lock);
	ADD_STORE(t_open_existing_dir);
	ADD_STORE(t_open_fails_under_a_file);
	ADD_STORE(t_open_too_long);
	ADD_STORE(t_open_refuses_dirs_others_can_write);
	ADD_STORE(t_load_missing_is_empty);
	ADD_STORE(t_save_load_round_trip);
	ADD_STORE(t_saved_file_is_json_with_version);
	ADD_STORE(t_save_ignores_a_planted_temp_name);
	ADD_STORE(t_save_removes_a_killed_saves_temp_file);
	ADD_STORE(t_save_replaces);
	ADD_STORE(t_stamp_changes_with_each_save);
	ADD_STORE(t_save_restores_mode);
	ADD_STORE(t_save_load_tolerates_trailing_whitespace);
	ADD_STORE(t_lock_is_exclusive);
	ADD_STORE(t_unlock_twice_is_harmless);
#define ADD_DISK(fn) add_test_fixture(#fn, fn, setup_disk, fx_teardown, NULL)
#define ADD_TMPFS(fn) add_test_fixture(#fn, fn, setup_tmpfs, fx_teardown, NULL)
	ADD_DISK(t_durable_on_disk);
	ADD_TMPFS(t_not_durable_on_tmpfs);
	for (size_t i = 0; i < ARRAY_SIZE(corrupts); i++)
		add_test_fixture(corrupts[i].name, t_corrupt, setup, fx_teardown,
				 (void *)&corrupts[i]);
	ADD_STORE(t_unreadable_is_an_error);
	ADD_STORE(t_symlink_not_followed);
	ADD_STORE(t_concurrent_writers);
	ADD_TMPFS(t_cache_matches_the_json);
	ADD_TMPFS(t_cache_keeps_unchanged_text);
	ADD_TMPFS(t_cache_follows_updates);
	ADD_TMPFS(t_cache_ignored_after_an_edit);
	ADD_TMPFS(t_cache_damaged_is_ignored);
	ADD_DISK(t_cache_only_on_tmpfs);
	ADD(t_cache_layout_follows_the_text);
	return run_group("store");
}
