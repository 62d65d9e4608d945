// SPDX-License-Identifier: Apache-2.0
/*
 * A node's side of cluster budgets in both directions (agent/grants_*.c,
 * agent/lease_guard.c), against a fake kernel and a fake allocator cut in
 * at link time (shaper/'s class reads and ceils, the netlink socket, the
 * HTTP client): a namespace's uploads are its class on tollgate-inet, its
 * downloads the class of the same minor on tollgate-inetdl; each is read,
 * reported, granted, set, lowered by the lease guard, kept in budgets.json
 * and shown on /metrics as a budget of its own, and a download grant never
 * touches the uploads' class. A node without tollgate-inetdl (or a class
 * gone) reports and sets nothing there.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <netlink/route/tc.h>
#include <netlink/socket.h>

#include "tests/unit/group.h"
#include "tests/unit/helpers.h"

#include "agent/internal.h"
#include "agent/lease_guard.h"
#include "budget/budget.h"
#include "cni/internal.h"
#include "exporter/exporter.h"
#include "httpc/httpc.h"
#include "ipam/store.h"
#include "lib/jsonx.h"
#include "lib/util.h"
#include "shaper/shaper.h"

/* ---- the fake kernel: two IFBs, their classes ---- */

#define IF_INET 10
#define IF_INET_IN 11
#define CLASSES 8

struct fclass {
	uint32_t classid, parent;
	uint64_t ceil_bps, rate_bps, bytes, backlog;
	bool set_fails_enoent; /* gone between the dump and the change */
};

static struct fkernel {
	bool inet_in; /* tollgate-inetdl exists */
	struct fclass cls[2][CLASSES];
	size_t n[2];
	unsigned sets[2]; /* ceils changed on each */
} K;

static int ifb_of(int ifindex)
{
	if (ifindex == IF_INET)
		return 0;
	if (ifindex == IF_INET_IN && K.inet_in)
		return 1;
	return -1;
}

static struct fclass *fclass_add(int ifb, uint16_t minor, uint16_t parent_minor, uint64_t ceil)
{
	struct fclass *c = &K.cls[ifb][K.n[ifb]++];

	*c = (struct fclass){ .classid = TC_HANDLE(1, minor),
			      .parent = TC_HANDLE(1, parent_minor),
			      .ceil_bps = ceil };
	return c;
}

static struct fclass *fclass_find(int ifb, uint16_t minor)
{
	for (size_t i = 0; i < K.n[ifb]; i++)
		if (K.cls[ifb][i].classid == (uint32_t)TC_HANDLE(1, minor))
			return &K.cls[ifb][i];
	return NULL;
}

int __wrap_tg_nl_route_open(struct nl_sock **ret);
int __wrap_tg_nl_route_open(struct nl_sock **ret)
{
	*ret = nl_socket_alloc();
	return *ret ? 0 : -ENOMEM;
}

int __wrap_shaper_inet_ifindex(struct nl_sock *sk);
int __wrap_shaper_inet_ifindex(struct nl_sock *sk)
{
	(void)sk;
	return IF_INET;
}

int __wrap_shaper_inet_in_ifindex(struct nl_sock *sk);
int __wrap_shaper_inet_in_ifindex(struct nl_sock *sk)
{
	(void)sk;
	return K.inet_in ? IF_INET_IN : 0;
}

int __wrap_shaper_dump_classes(struct nl_sock *sk, int ifindex, shaper_class_fn fn, void *arg);
int __wrap_shaper_dump_classes(struct nl_sock *sk, int ifindex, shaper_class_fn fn, void *arg)
{
	int k = ifb_of(ifindex);

	(void)sk;
	if (k < 0)
		return 0;
	for (size_t i = 0; i < K.n[k]; i++) {
		const struct fclass *c = &K.cls[k][i];
		struct shaper_stats st = { .classid = c->classid,
					   .parent = c->parent,
					   .ceil_bps = c->ceil_bps,
					   .rate_bps = c->rate_bps,
					   .bytes = c->bytes,
					   .backlog = c->backlog };

		fn(&st, arg);
	}
	return 0;
}

int __wrap_shaper_ns_set_ceil(struct nl_sock *sk, int inet_ifb, uint16_t ns_class,
			      uint64_t ceil_bps, int mtu);
int __wrap_shaper_ns_set_ceil(struct nl_sock *sk, int inet_ifb, uint16_t ns_class,
			      uint64_t ceil_bps, int mtu)
{
	int k = ifb_of(inet_ifb);
	struct fclass *c = k < 0 ? NULL : fclass_find(k, ns_class);

	(void)sk;
	(void)mtu;
	if (k < 0)
		return -ENODEV;
	if (!c || c->set_fails_enoent)
		return -ENOENT;
	c->ceil_bps = ceil_bps;
	K.sets[k]++;
	return 0;
}

/* ---- the fake allocator: the report posted, the answer handed back ---- */

static struct fhttp {
	char *posted; /* the last report's body */
	const char *answer;
} H;

static struct httpc *const FAKE_CLIENT = (struct httpc *)&H;

int __wrap_httpc_set_tls(struct httpc *c, const struct httpc_tls *tls);
int __wrap_httpc_set_tls(struct httpc *c, const struct httpc_tls *tls)
{
	(void)c;
	(void)tls;
	return 0;
}

bool __wrap_httpc_busy(const struct httpc *c);
bool __wrap_httpc_busy(const struct httpc *c)
{
	(void)c;
	return false;
}

int __wrap_httpc_post(struct httpc *c, const char *url, const char *body, size_t len,
		      const char *header, int timeout_ms);
int __wrap_httpc_post(struct httpc *c, const char *url, const char *body, size_t len,
		      const char *header, int timeout_ms)
{
	(void)c;
	(void)url;
	(void)header;
	(void)timeout_ms;
	free(H.posted);
	H.posted = strndup(body, len);
	return H.posted ? 0 : -ENOMEM;
}

int __wrap_httpc_take(struct httpc *c, long *ret_status, const char **ret_body, size_t *ret_len,
		      char *why, size_t why_len);
int __wrap_httpc_take(struct httpc *c, long *ret_status, const char **ret_body, size_t *ret_len,
		      char *why, size_t why_len)
{
	(void)c;
	(void)why;
	(void)why_len;
	if (!H.answer)
		return 0;
	*ret_status = 200;
	*ret_body = H.answer;
	*ret_len = strlen(H.answer);
	H.answer = NULL;
	return 1;
}

void __wrap_httpc_free(struct httpc *c);
void __wrap_httpc_free(struct httpc *c)
{
	(void)c; /* the fake client: nothing to free */
}

/* ---- the node: a store of two namespaces' pods, the policy heard ---- */

#define MB 1000000ULL
#define NS_CLASS 5  /* datasets' minor, on both trees */
#define WEB_CLASS 6 /* web's, uploads only */

struct fx {
	char tmp[64];
	struct agent a;
};

static const char conf[] =
	"{\"cniVersion\":\"1.1.0\",\"name\":\"net\",\"type\":\"tollgate\","
	"\"ipam\":{\"source\":\"static\",\"addresses\":[\"10.1.0.10-10.1.0.40\"]},"
	"\"budgets\":{\"allocator\":\"http://10.0.0.9:9618\",\"fallback\":\"10M\"}}";

static void pod(struct ipam_attachment *att, const char *id, uint32_t ip, const char *ns,
		uint16_t ns_class, uint16_t pod_class, bool in_tree)
{
	*att = (struct ipam_attachment){ .ip = ip, .created = 1 };
	snprintf(att->container_id, sizeof(att->container_id), "%s", id);
	snprintf(att->ifname, sizeof(att->ifname), "eth0");
	snprintf(att->k8s_namespace, sizeof(att->k8s_namespace), "%s", ns);
	snprintf(att->pod, sizeof(att->pod), "p-%s", id);
	snprintf(att->host_veth, sizeof(att->host_veth), "tg%s", id);
	snprintf(att->netns, sizeof(att->netns), "/var/run/netns/%s", id);
	att->shaping = (struct shaping){ .ns_egress_bps = 80 * MB,
					 .node_egress_bps = 1000 * MB,
					 .ns_ingress_bps = 400 * MB,
					 .node_ingress_bps = 2000 * MB,
					 .budget_fallback_bps = 10 * MB,
					 .budget_in_fallback_bps = in_tree ? 10 * MB : 0,
					 .ns_class = ns_class,
					 .pod_class = pod_class,
					 .inet_in_mark = in_tree ? 0x10000 : 0 };
}

/* datasets: two pods, downloads on tollgate-inetdl; web: one, downloads not there yet. */
static void store_write(struct fx *f)
{
	struct ipam_attachment att[3];
	struct ipam_state st;
	struct ipam_store s;
	struct tg_err e = { 0 };

	ipam_state_init(&st);
	pod(&att[0], "aaaa", 0x0a01000a, "datasets", NS_CLASS, 20, true);
	pod(&att[1], "bbbb", 0x0a01000b, "datasets", NS_CLASS, 21, true);
	pod(&att[2], "cccc", 0x0a01000c, "web", WEB_CLASS, 22, false);
	st.att = att;
	st.n_att = 3;
	assert_int_equal(ipam_store_open(&s, f->a.cfg.data_dir, "net", &e), 0);
	assert_int_equal(ipam_store_lock(&s, &e), 0);
	assert_int_equal(ipam_store_save(&s, &st, &e), 0);
	ipam_store_unlock(&s);
	ipam_store_close(&s);
}

/* datasets: 1 GB/s up, 500 MB/s down; web: 100 MB/s in both directions. */
static void policy_heard(struct agent *a)
{
	struct budget_set *h = &a->budgets.heard;
	static const struct budget_def d[4] = {
		{ .ns = "datasets", .budget = 1000 * MB },
		{ .ns = "datasets", .dir = BUDGET_INGRESS, .budget = 500 * MB },
		{ .ns = "web", .budget = 100 * MB },
		{ .ns = "web", .dir = BUDGET_INGRESS, .budget = 100 * MB },
	};
	struct tg_err e = { 0 };

	h->d = calloc(4, sizeof(*h->d));
	assert_non_null(h->d);
	memcpy(h->d, d, sizeof(d));
	h->n = 4;
	assert_int_equal(budget_set_seal(h, &e), 0);
	a->cfg.budgets.heard = h;
}

static void kernel_reset(bool inet_in)
{
	memset(&K, 0, sizeof(K));
	K.inet_in = inet_in;
	for (int k = 0; k < 2; k++) {
		fclass_add(k, 1, 0, 0);
		/* the namespace classes at the fallback an ADD gives them, 10 Mbit/s */
		fclass_add(k, NS_CLASS, 1, 10 * MB);
		fclass_add(k, 20, NS_CLASS, 10 * MB);
		fclass_add(k, 21, NS_CLASS, 10 * MB);
	}
	fclass_add(0, WEB_CLASS, 1, 10 * MB);
	fclass_add(0, 22, WEB_CLASS, 10 * MB);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct tg_err e = { 0 };

	if (!f || !tmpdir_make(f->tmp, sizeof(f->tmp), "/tmp", "budget-agent"))
		return -1;
	if (cni_config_read(conf, strlen(conf), CNI_CMD_ADD, &f->a.cfg, &e) < 0) {
		print_error("config: %s\n", e.msg);
		return -1;
	}
	snprintf(f->a.cfg.data_dir, sizeof(f->a.cfg.data_dir), "%s/data", f->tmp);
	f->a.cfg_ok = true;
	f->a.opt.node_name = "n1";
	f->a.budgets.client = FAKE_CLIENT;
	f->a.budgets.restored = true; /* nothing to restore before the first tick */
	policy_heard(&f->a);
	store_write(f);
	kernel_reset(true);
	memset(&H, 0, sizeof(H));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	agent_budgets_free(&f->a);
	node_config_free(&f->a.cfg);
	tmpdir_remove(f->tmp);
	free(H.posted);
	H.posted = NULL;
	free(f);
	return 0;
}

static struct agent_budget_ns *entry(struct agent *a, const char *ns, enum budget_dir dir)
{
	return agent_budgets_find_ns(&a->budgets, ns, dir);
}

static void notes_free(struct agent_notes *n)
{
	agent_notes_clear(n);
}

/* A tick at now_ms: namespaces, classes read, ceils applied, the report posted. */
static void tick(struct agent *a, int64_t now_ms)
{
	struct agent_notes notes = { 0 };

	a->budgets.next_ms = now_ms;
	a->budgets.sent_ms = 0;
	agent_budgets_tick(a, now_ms, 0.5, &notes);
	notes_free(&notes);
}

static void answer(struct agent *a, const char *body, int64_t now_ms)
{
	struct agent_notes notes = { 0 };

	H.answer = body;
	agent_budgets_answer(a, now_ms, &notes);
	assert_null(H.answer);
	for (size_t i = 0; i < notes.n; i++)
		if (strstr(notes.line[i], "refused"))
			fail_msg("%s", notes.line[i]);
	notes_free(&notes);
}

/* ---- the cases ---- */

/*
 * From the store: datasets in both directions (one class minor, its caps
 * per direction), web's uploads alone (its downloads are not on
 * tollgate-inetdl yet, whatever the policy).
 */
static void t_namespaces_per_direction(void **state)
{
	struct fx *f = *state;
	struct agent *a = &f->a;
	struct tg_err e = { 0 };

	assert_int_equal(agent_budgets_refresh_namespaces(a, 1000, &e), 0);
	assert_int_equal(a->budgets.n, 3);
	assert_non_null(entry(a, "datasets", BUDGET_EGRESS));
	assert_non_null(entry(a, "datasets", BUDGET_INGRESS));
	assert_non_null(entry(a, "web", BUDGET_EGRESS));
	assert_null(entry(a, "web", BUDGET_INGRESS));
	assert_int_equal(entry(a, "datasets", BUDGET_EGRESS)->ns_class, NS_CLASS);
	assert_int_equal(entry(a, "datasets", BUDGET_INGRESS)->ns_class, NS_CLASS);
	assert_int_equal(entry(a, "datasets", BUDGET_INGRESS)->pods, 2);
	/* each direction's own caps: 80 Mbit/s up, 400 Mbit/s down */
	assert_int_equal(entry(a, "datasets", BUDGET_EGRESS)->limit, 10 * MB);
	assert_int_equal(entry(a, "datasets", BUDGET_INGRESS)->limit, 50 * MB);
}

/* A policy with datasets' downloads alone: its uploads are not a budget. */
static void t_policy_of_one_direction(void **state)
{
	struct fx *f = *state;
	struct agent *a = &f->a;
	struct budget_set *h = &a->budgets.heard;
	struct tg_err e = { 0 };

	h->d[0] = (struct budget_def){ .ns = "datasets", .dir = BUDGET_INGRESS, .budget = MB };
	h->n = 1;
	assert_int_equal(budget_set_seal(h, &e), 0);
	assert_int_equal(agent_budgets_refresh_namespaces(a, 1000, &e), 0);
	assert_int_equal(a->budgets.n, 1);
	assert_non_null(entry(a, "datasets", BUDGET_INGRESS));
}

/*
 * Two ticks a second apart: each direction's counters from its own IFB
 * (1 MB up, 40 MB down), both classes held to the join rate until an
 * answer, and the report says both, the download's marked ingress.
 */
static void t_counters_and_report(void **state)
{
	struct fx *f = *state;
	struct agent *a = &f->a;
	struct budget_report r;
	struct tg_err e = { 0 };
	const struct budget_usage *up = NULL, *down = NULL;

	tick(a, 1000);
	fclass_find(0, NS_CLASS)->bytes += MB;
	fclass_find(1, NS_CLASS)->bytes += 40 * MB;
	fclass_find(1, 20)->backlog = 20000;
	tick(a, 2000);
	assert_int_equal(entry(a, "datasets", BUDGET_EGRESS)->sent, MB);
	assert_int_equal(entry(a, "datasets", BUDGET_INGRESS)->sent, 40 * MB);
	/* the join rate on both trees (10 kbit/s) */
	assert_int_equal(fclass_find(0, NS_CLASS)->ceil_bps, BUDGET_JOIN_RATE * 8);
	assert_int_equal(fclass_find(1, NS_CLASS)->ceil_bps, BUDGET_JOIN_RATE * 8);
	assert_int_equal(fclass_find(0, WEB_CLASS)->ceil_bps, BUDGET_JOIN_RATE * 8);
	assert_non_null(H.posted);
	assert_contains(H.posted, "\"direction\":\"ingress\"");
	/* it takes download budgets: the allocator sends it the whole policy */
	assert_contains(H.posted, "\"directions\":true");
	assert_int_equal(budget_report_parse(H.posted, strlen(H.posted), &r, &e), 0);
	assert_int_equal(r.n, 3);
	for (size_t i = 0; i < r.n; i++) {
		if (strcmp(r.use[i].ns, "datasets") != 0)
			continue;
		if (r.use[i].dir == BUDGET_INGRESS)
			down = &r.use[i];
		else
			up = &r.use[i];
	}
	assert_non_null(up);
	assert_non_null(down);
	assert_int_equal(up->sent_bytes, MB);
	assert_int_equal(down->sent_bytes, 40 * MB);
	assert_int_equal(down->interval_ms, 1000);
	assert_int_equal(down->limit, 50 * MB);
	assert_int_equal(down->pods, 2);
	/* backlogged and sending: it wants more; the uploads' class does not */
	assert_true(down->saturated);
	budget_report_free(&r);
}

/*
 * An answer's grants, each to its direction's class: the downloads' on
 * tollgate-inetdl, the uploads' on tollgate-inet; a later answer that
 * moves the download grant alone changes nothing on tollgate-inet; a
 * grant over the policy's download budget or the namespace's download
 * cap is held to them.
 */
static void t_grants_to_their_trees(void **state)
{
	struct fx *f = *state;
	struct agent *a = &f->a;
	unsigned inet_sets;

	tick(a, 1000);
	answer(a,
	       "{\"version\":1,\"leaseMs\":10000,\"grants\":["
	       "{\"namespace\":\"datasets\",\"grant\":2000000,\"safeShare\":1000000,\"nodes\":3},"
	       "{\"namespace\":\"datasets\",\"direction\":\"ingress\",\"grant\":30000000,"
	       "\"safeShare\":20000000,\"nodes\":3},"
	       "{\"namespace\":\"web\",\"direction\":\"ingress\",\"grant\":7000000,"
	       "\"safeShare\":1,\"nodes\":1}]}",
	       1100);
	assert_int_equal(entry(a, "datasets", BUDGET_EGRESS)->state, BUDGET_GRANTED);
	assert_int_equal(entry(a, "datasets", BUDGET_EGRESS)->grant, 2 * MB);
	assert_int_equal(entry(a, "datasets", BUDGET_INGRESS)->state, BUDGET_GRANTED);
	assert_int_equal(entry(a, "datasets", BUDGET_INGRESS)->grant, 30 * MB);
	assert_int_equal(fclass_find(0, NS_CLASS)->ceil_bps, 2 * MB * 8);
	assert_int_equal(fclass_find(1, NS_CLASS)->ceil_bps, 30 * MB * 8);
	/* web's uploads were not granted: still at the join rate */
	assert_int_equal(entry(a, "web", BUDGET_EGRESS)->state, BUDGET_FALLBACK);
	assert_int_equal(fclass_find(0, WEB_CLASS)->ceil_bps, BUDGET_JOIN_RATE * 8);

	/* the download grant moves, the upload grant is the same: tollgate-inet untouched */
	inet_sets = K.sets[0];
	answer(a,
	       "{\"version\":1,\"leaseMs\":10000,\"grants\":["
	       "{\"namespace\":\"datasets\",\"grant\":2000000,\"safeShare\":1000000,\"nodes\":3},"
	       "{\"namespace\":\"datasets\",\"direction\":\"ingress\",\"grant\":45000000,"
	       "\"safeShare\":20000000,\"nodes\":3}]}",
	       2100);
	assert_int_equal(fclass_find(1, NS_CLASS)->ceil_bps, 45 * MB * 8);
	assert_int_equal(fclass_find(0, NS_CLASS)->ceil_bps, 2 * MB * 8);
	assert_int_equal(K.sets[0], inet_sets);
	assert_int_equal(entry(a, "datasets", BUDGET_EGRESS)->grant, 2 * MB);

	/* over the namespace's download cap (50 MB/s): held to it */
	answer(a,
	       "{\"version\":1,\"leaseMs\":10000,\"grants\":["
	       "{\"namespace\":\"datasets\",\"direction\":\"ingress\",\"grant\":400000000,"
	       "\"safeShare\":20000000,\"nodes\":3}]}",
	       3100);
	assert_int_equal(fclass_find(1, NS_CLASS)->ceil_bps, 50 * MB * 8);
	/* over the policy's download budget (a smaller one heard): held to the budget */
	a->budgets.heard.d[1].budget = 3 * MB;
	answer(a,
	       "{\"version\":1,\"leaseMs\":10000,\"grants\":["
	       "{\"namespace\":\"datasets\",\"direction\":\"ingress\",\"grant\":40000000,"
	       "\"safeShare\":20000000,\"nodes\":3}]}",
	       4100);
	assert_int_equal(entry(a, "datasets", BUDGET_INGRESS)->grant, 3 * MB);
	assert_int_equal(fclass_find(1, NS_CLASS)->ceil_bps, 3 * MB * 8);
	assert_int_equal(fclass_find(0, NS_CLASS)->ceil_bps, 2 * MB * 8);
}

/*
 * budgets.json holds each budget with its direction, and an agent that
 * starts again takes both back as they were; an entry written before
 * directions comes back as the uploads'.
 */
static void t_budgets_json_per_direction(void **state)
{
	struct fx *f = *state;
	struct agent *a = &f->a;
	struct agent b = { 0 };
	char path[PATH_MAX + 64];
	json_object *o, *arr;
	int ingress = 0, egress = 0;

	tick(a, 1000);
	answer(a,
	       "{\"version\":1,\"leaseMs\":10000,\"grants\":["
	       "{\"namespace\":\"datasets\",\"grant\":2000000,\"safeShare\":1000000,\"nodes\":3},"
	       "{\"namespace\":\"datasets\",\"direction\":\"ingress\",\"grant\":30000000,"
	       "\"safeShare\":20000000,\"nodes\":3}]}",
	       1100);
	snprintf(path, sizeof(path), "%s/net/%s", a->cfg.data_dir, BUDGET_NODE_FILE);
	o = jx_read_file(path);
	assert_non_null(o);
	assert_true(json_object_object_get_ex(o, "namespaces", &arr));
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *e = json_object_array_get_idx(arr, i);

		if (strcmp(jx_get_str(e, "namespace"), "datasets") != 0)
			continue;
		if (strcmp(jx_get_str(e, "direction"), "ingress") == 0) {
			ingress++;
			assert_int_equal(jx_get_int(e, "grant"), 30 * MB);
		} else {
			assert_string_equal(jx_get_str(e, "direction"), "egress");
			egress++;
			assert_int_equal(jx_get_int(e, "grant"), 2 * MB);
		}
	}
	assert_int_equal(ingress, 1);
	assert_int_equal(egress, 1);
	/* the policy kept with it has the download budgets */
	assert_contains(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
			"\"internetIngress\":500000000");
	json_object_put(o);

	/* an agent started again */
	b.cfg = a->cfg;
	b.cfg_ok = true;
	b.budgets.heard = a->budgets.heard;
	b.cfg.budgets.heard = &b.budgets.heard;
	agent_budgets_restore_state(&b, 1200);
	assert_non_null(agent_budgets_find_ns(&b.budgets, "datasets", BUDGET_INGRESS));
	assert_int_equal(agent_budgets_find_ns(&b.budgets, "datasets", BUDGET_INGRESS)->grant,
			 30 * MB);
	assert_int_equal(agent_budgets_find_ns(&b.budgets, "datasets", BUDGET_INGRESS)->state,
			 BUDGET_GRANTED);
	assert_int_equal(agent_budgets_find_ns(&b.budgets, "datasets", BUDGET_EGRESS)->grant,
			 2 * MB);
	free(b.budgets.ns);

	/* a file of the version before directions: its entries are uploads */
	{
		char text[512];
		FILE *fp = fopen(path, "w");

		assert_non_null(fp);
		snprintf(text, sizeof(text),
			 "{\"version\":1,\"bootMs\":1000,\"namespaces\":[{\"namespace\":"
			 "\"datasets\",\"state\":\"granted\",\"grant\":4000000,\"safeShare\":1,"
			 "\"nodes\":2,\"leaseUntilBootMs\":9000}]}");
		fputs(text, fp);
		fclose(fp);
		memset(&b.budgets, 0, sizeof(b.budgets));
		b.budgets.heard = a->budgets.heard;
		agent_budgets_restore_state(&b, 1200);
		assert_int_equal(b.budgets.n, 1);
		assert_int_equal(b.budgets.ns[0].dir, BUDGET_EGRESS);
		assert_int_equal(b.budgets.ns[0].grant, 4 * MB);
		free(b.budgets.ns);
	}
}

/*
 * No tollgate-inetdl on the node (before its tree is declared): the
 * downloads' entries have no class present, are neither reported nor set,
 * and nothing fails; the uploads go on. A download class gone between
 * the dump and the change (-ENOENT) is a missing class, not a failure.
 */
static void t_missing_download_tree(void **state)
{
	struct fx *f = *state;
	struct agent *a = &f->a;
	struct budget_report r;
	struct tg_err e = { 0 };

	K.inet_in = false;
	tick(a, 1000);
	tick(a, 2000);
	assert_int_equal(K.sets[1], 0);
	assert_false(entry(a, "datasets", BUDGET_INGRESS)->present);
	assert_true(entry(a, "datasets", BUDGET_EGRESS)->present);
	assert_int_equal(a->budgets.ceil_failures, 0);
	assert_int_equal(budget_report_parse(H.posted, strlen(H.posted), &r, &e), 0);
	for (size_t i = 0; i < r.n; i++)
		assert_int_equal(r.use[i].dir, BUDGET_EGRESS);
	assert_int_equal(r.n, 2);
	budget_report_free(&r);
	/* a grant for it changes nothing there, and nothing fails */
	answer(a,
	       "{\"version\":1,\"leaseMs\":10000,\"grants\":["
	       "{\"namespace\":\"datasets\",\"direction\":\"ingress\",\"grant\":30000000,"
	       "\"safeShare\":20000000,\"nodes\":3}]}",
	       2100);
	assert_int_equal(K.sets[1], 0);
	assert_int_equal(a->budgets.ceil_failures, 0);

	/* the tree comes; its class goes between the dump and the change */
	K.inet_in = true;
	fclass_find(1, NS_CLASS)->set_fails_enoent = true;
	tick(a, 3000);
	assert_int_equal(a->budgets.ceil_failures, 0);
	assert_false(entry(a, "datasets", BUDGET_INGRESS)->present);
	/* back: set at the next tick (the control: the same path sets it when it is there) */
	fclass_find(1, NS_CLASS)->set_fails_enoent = false;
	tick(a, 4000);
	assert_int_equal(fclass_find(1, NS_CLASS)->ceil_bps, 30 * MB * 8);
	assert_int_equal(a->budgets.ceil_failures, 0);
}

/* SIGTERM: every granted budget, of both directions, down to min(grant, safe share). */
static void t_stop_lowers_both_directions(void **state)
{
	struct fx *f = *state;
	struct agent *a = &f->a;
	struct agent_notes notes = { 0 };

	tick(a, 1000);
	answer(a,
	       "{\"version\":1,\"leaseMs\":10000,\"grants\":["
	       "{\"namespace\":\"datasets\",\"grant\":2000000,\"safeShare\":1000000,\"nodes\":3},"
	       "{\"namespace\":\"datasets\",\"direction\":\"ingress\",\"grant\":30000000,"
	       "\"safeShare\":20000000,\"nodes\":3}]}",
	       1100);
	agent_budgets_stop(a, 1200, &notes);
	assert_contains(notes.line[0], "budgets=2");
	notes_free(&notes);
	assert_int_equal(fclass_find(0, NS_CLASS)->ceil_bps, 1 * MB * 8);
	assert_int_equal(fclass_find(1, NS_CLASS)->ceil_bps, 20 * MB * 8);
	assert_int_equal(entry(a, "datasets", BUDGET_INGRESS)->state, BUDGET_LEASE_EXPIRED);
}

/* The metrics: each budget a series with its direction. */
static void t_metrics_carry_direction(void **state)
{
	struct fx *f = *state;
	struct agent *a = &f->a;
	struct expo x;
	size_t len;
	char *page;

	tick(a, 1000);
	answer(a,
	       "{\"version\":1,\"leaseMs\":10000,\"grants\":["
	       "{\"namespace\":\"datasets\",\"grant\":2000000,\"safeShare\":1000000,\"nodes\":3},"
	       "{\"namespace\":\"datasets\",\"direction\":\"ingress\",\"grant\":30000000,"
	       "\"safeShare\":20000000,\"nodes\":3}]}",
	       1100);
	expo_init(&x, 1 << 20);
	agent_budgets_render(a, &x);
	page = expo_take(&x, &len);
	assert_non_null(page);
	assert_contains(page, "tollgate_budget_grant_bytes_per_second{namespace=\"datasets\","
			      "direction=\"egress\"} 2000000\n");
	assert_contains(page, "tollgate_budget_grant_bytes_per_second{namespace=\"datasets\","
			      "direction=\"ingress\"} 30000000\n");
	assert_contains(page, "tollgate_budget_ceil_bytes_per_second{namespace=\"datasets\","
			      "direction=\"ingress\"} 30000000\n");
	assert_contains(page, "tollgate_budget_state{namespace=\"datasets\",direction=\"ingress\","
			      "state=\"granted\"} 1\n");
	assert_contains(page, "tollgate_budget_state{namespace=\"web\",direction=\"egress\","
			      "state=\"fallback\"} 1\n");
	free(page);
	expo_free(&x);
}

/*
 * The lease guard lowers each lease on its own direction's IFB; one on a
 * node without tollgate-inetdl is neither a lowering nor a failure.
 */
static void t_lease_guard_per_direction(void **state)
{
	struct lease_guard *g;
	struct lease_guard_entry e[2] = {
		{ .ns_class = NS_CLASS, .dir = BUDGET_EGRESS, .after = 3 * MB },
		{ .ns_class = NS_CLASS, .dir = BUDGET_INGRESS, .after = 7 * MB },
	};
	uint64_t fired = 0, failed = 0;

	(void)state;
	e[0].until_ms = e[1].until_ms = time_boot_ms();
	assert_int_equal(lease_guard_start(&g, 1500), 0);
	lease_guard_set(g, e, 2);
	for (int i = 0; i < 200 && fired + failed < 2; i++) {
		struct timespec ts = { 0, 10000000 };

		nanosleep(&ts, NULL);
		lease_guard_counts(g, &fired, &failed);
	}
	assert_int_equal(fired, 2);
	assert_int_equal(failed, 0);
	assert_int_equal(fclass_find(0, NS_CLASS)->ceil_bps, 3 * MB * 8);
	assert_int_equal(fclass_find(1, NS_CLASS)->ceil_bps, 7 * MB * 8);

	/* without tollgate-inetdl: the upload's lowered, the download's nothing */
	K.inet_in = false;
	e[0].after = 2 * MB;
	e[1].after = 1 * MB;
	e[0].until_ms = e[1].until_ms = time_boot_ms();
	lease_guard_set(g, e, 2);
	for (int i = 0; i < 200 && fired < 3; i++) {
		struct timespec ts = { 0, 10000000 };

		nanosleep(&ts, NULL);
		lease_guard_counts(g, &fired, &failed);
	}
	/* a moment more for the download's, which counts nothing */
	{
		struct timespec ts = { 0, 50000000 };

		nanosleep(&ts, NULL);
	}
	lease_guard_stop(g);
	assert_int_equal(fired, 3);
	assert_int_equal(failed, 0);
	assert_int_equal(fclass_find(0, NS_CLASS)->ceil_bps, 2 * MB * 8);
	assert_int_equal(fclass_find(1, NS_CLASS)->ceil_bps, 7 * MB * 8);
}

int main(void)
{
	add_test_fixture("a namespace's two directions are two budgets on the node",
			 t_namespaces_per_direction, setup, teardown, NULL);
	add_test_fixture("a policy of one direction budgets that direction alone",
			 t_policy_of_one_direction, setup, teardown, NULL);
	add_test_fixture("each direction is read from its own tree and reported",
			 t_counters_and_report, setup, teardown, NULL);
	add_test_fixture("each grant goes to its direction's class; downloads never touch uploads",
			 t_grants_to_their_trees, setup, teardown, NULL);
	add_test_fixture("budgets.json keeps each budget's direction and reads back",
			 t_budgets_json_per_direction, setup, teardown, NULL);
	add_test_fixture("without tollgate-inetdl the downloads are neither reported nor set",
			 t_missing_download_tree, setup, teardown, NULL);
	add_test_fixture("stopping lowers the granted budgets of both directions",
			 t_stop_lowers_both_directions, setup, teardown, NULL);
	add_test_fixture("the metrics carry each budget's direction", t_metrics_carry_direction,
			 setup, teardown, NULL);
	add_test("the lease guard lowers each direction on its own tree",
		 t_lease_guard_per_direction, NULL);
	return run_group("budget_agent");
}
