// SPDX-License-Identifier: Apache-2.0
/* status, list, show: reading the store (and, for show, the kernel); nothing changes. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <netlink/netlink.h>

#include "budget/budget.h"
#include "cli/cli.h"
#include "lib/cleanup.h"
#include "lib/ip4.h"
#include "lib/jsonx.h"
#include "lib/nl.h"
#include "lib/rate.h"
#include "lib/util.h"
#include "shaper/shaper.h"

static bool jbool(json_object *o, const char *key)
{
	return json_object_get_boolean(jx_get(o, key));
}

/* ---- status ---- */

static json_object *status_warnings(const struct ipam_counts *n, bool stale)
{
	json_object *warn = json_object_new_array();

	if (n->pool == 0)
		json_object_array_add(warn,
				      json_object_new_string(
					      "the pool is empty: pods cannot start "
					      "(run `tollgate-ipam sync` or set ipam.addresses)"));
	else if (n->free == 0)
		json_object_array_add(
			warn,
			json_object_new_string(
				"no free address: the next ADD fails (see `tollgate-ipam list`)"));
	if (n->retired)
		json_object_array_add(
			warn,
			json_object_new_string(
				"pods hold addresses that left the pool; they are not handed out again"));
	if (stale)
		json_object_array_add(warn,
				      json_object_new_string(
					      "the store is from an earlier boot: "
					      "its attachments are stale and go at the next ADD"));
	return warn;
}

static void add_int(json_object *o, const char *key, int64_t v)
{
	json_object_object_add(o, key, json_object_new_int64(v));
}

/* Budgets of both directions, for budgets_json's `dirs`. */
#define DIRS_ALL ((1u << BUDGET_EGRESS) | (1u << BUDGET_INGRESS))

/*
 * The node's cluster budgets as the agent last wrote them (budgets.json in
 * the store's directory): each namespace's direction (egress: uploads,
 * ingress: downloads; an entry written before directions is egress), state,
 * grant and ceil, and how long its lease has left; only the directions in
 * the mask dirs. An empty array when the agent reports none.
 */
static json_object *budgets_json(const struct cli *c, const char *only_ns, unsigned dirs)
{
	char path[PATH_MAX + 300];
	_cleanup_json_ json_object *f = NULL;
	json_object *arr = json_object_new_array(), *ns = NULL;
	int64_t now = time_boot_ms();

	snprintf(path, sizeof(path), "%s/%s/%s", c->data_dir, c->network, BUDGET_NODE_FILE);
	f = jx_read_file(path);
	if (!f || !json_object_object_get_ex(f, "namespaces", &ns) ||
	    !json_object_is_type(ns, json_type_array))
		return arr;
	for (size_t i = 0; i < json_object_array_length(ns); i++) {
		json_object *e = json_object_array_get_idx(ns, i), *b;
		int64_t until = jx_get_int(e, "leaseUntilBootMs");
		const char *d = jx_get_str(e, "direction");
		enum budget_dir dir = BUDGET_EGRESS;

		if (only_ns && strcmp(jx_get_str(e, "namespace"), only_ns) != 0)
			continue;
		if (d[0] && budget_dir_parse(d, strlen(d), &dir) < 0)
			continue;
		if (!(dirs & (1u << dir)))
			continue;
		b = json_object_new_object();
		json_object_object_add(b, "namespace",
				       json_object_new_string(jx_get_str(e, "namespace")));
		json_object_object_add(b, "direction",
				       json_object_new_string(budget_dir_names[dir]));
		json_object_object_add(b, "state", json_object_new_string(jx_get_str(e, "state")));
		add_int(b, "grantBytesPerSecond", jx_get_int(e, "grant"));
		add_int(b, "ceilBytesPerSecond", jx_get_int(e, "applied"));
		add_int(b, "safeShareBytesPerSecond", jx_get_int(e, "safeShare"));
		add_int(b, "nodes", jx_get_int(e, "nodes"));
		add_int(b, "leaseRemainingMs",
			strcmp(jx_get_str(e, "state"), "granted") == 0 && until > now ? until - now
										      : 0);
		json_object_array_add(arr, b);
	}
	return arr;
}

/*
 * The allocator's policy the agent last heard ({"id", "budgets": how many,
 * a namespace's uploads and downloads two}; null before it heard one, or
 * without budgets.json).
 */
static json_object *policy_json(const struct cli *c)
{
	char path[PATH_MAX + 300];
	_cleanup_json_ json_object *f = NULL;
	json_object *p, *o, *nss;
	int64_t n = 0;

	snprintf(path, sizeof(path), "%s/%s/%s", c->data_dir, c->network, BUDGET_NODE_FILE);
	f = jx_read_file(path);
	if (!f || !json_object_object_get_ex(f, "policy", &p) ||
	    !json_object_object_get_ex(p, "namespaces", &nss))
		return NULL;
	o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(jx_get_str(p, "id")));
	for (size_t i = 0; i < json_object_array_length(nss); i++)
		for (int d = 0; d < BUDGET_DIRS; d++)
			n += json_object_object_get_ex(json_object_array_get_idx(nss, i),
						       budget_dir_keys[d], NULL);
	add_int(o, "budgets", n);
	return o;
}

/* Bytes/s as Mbit/s for people: grants are rarely round numbers. */
static void mbit(int64_t bytes_per_s, char *buf, size_t size)
{
	snprintf(buf, size, "%.1fM", (double)bytes_per_s * 8 / 1e6);
}

/*
 * "datasets egress: granted 120.0M (lease 8.2 s left), ceil 120.0M, 6 nodes
 * hold grants"
 */
static void budget_line(json_object *b, char *buf, size_t size)
{
	char grant[24], ceil[24];

	mbit(jx_get_int(b, "grantBytesPerSecond"), grant, sizeof(grant));
	mbit(jx_get_int(b, "ceilBytesPerSecond"), ceil, sizeof(ceil));
	if (strcmp(jx_get_str(b, "state"), "fallback") == 0)
		snprintf(buf, size, "%s %s: fallback (never granted), ceil %s",
			 jx_get_str(b, "namespace"), jx_get_str(b, "direction"), ceil);
	else
		snprintf(buf, size,
			 "%s %s: %s %s (lease %.1f s left), ceil %s, %lld nodes hold grants",
			 jx_get_str(b, "namespace"), jx_get_str(b, "direction"),
			 jx_get_str(b, "state"), grant,
			 (double)jx_get_int(b, "leaseRemainingMs") / 1000, ceil,
			 (long long)jx_get_int(b, "nodes"));
}

static json_object *status_json(struct cli *c)
{
	json_object *o = json_object_new_object();
	struct ipam_state *st = &c->state;
	struct ipam_counts n;
	char boot[64] = "", ip[IP4_STRLEN] = "", cidr[CIDR4_STRLEN] = "";
	bool stale = ipam_read_boot_id(boot, sizeof(boot)) == 0 && st->boot_id[0] &&
		     strcmp(boot, st->boot_id) != 0;

	/* After a reboot the recorded attachments are gone: count them as the next ADD will. */
	if (stale)
		ipam_check_boot(st, boot);
	if (ipam_count(st, time_boot_ms(), c->cooldown_ms, &n) < 0) {
		json_object_put(o);
		return NULL;
	}
	if (st->node_ip)
		ip4_format(st->node_ip, ip);
	if (st->subnet.net)
		cidr4_format(&st->subnet, cidr);
	json_object_object_add(o, "network", json_object_new_string(c->network));
	json_object_object_add(o, "source", json_object_new_string(st->source));
	/* total: the pool, as sync's total says; held: the four states' sum (ipam/ipam.h) */
	add_int(o, "total", (int64_t)n.pool);
	add_int(o, "allocated", (int64_t)n.allocated);
	add_int(o, "free", (int64_t)n.free);
	add_int(o, "cooling", (int64_t)n.cooling);
	add_int(o, "retired", (int64_t)n.retired);
	add_int(o, "held", (int64_t)n.held);
	add_int(o, "pending", (int64_t)st->n_pending);
	/*
	 * Pods the pool can give an address to: every pool address can be one
	 * pod's (the node's own is never in it), a retired one never again.
	 * kubelet's --max-pods counts hostNetwork pods too, which take none.
	 */
	add_int(o, "maxPodsFromPool", (int64_t)n.pool);
	add_int(o, "lastSyncMs", st->last_sync_ms);
	json_object_object_add(o, "nodeIp", json_object_new_string(ip));
	json_object_object_add(o, "subnet", json_object_new_string(cidr));
	json_object_object_add(o, "warnings", status_warnings(&n, stale));
	json_object_object_add(o, "budgets", budgets_json(c, NULL, DIRS_ALL));
	json_object_object_add(o, "budgetPolicy", policy_json(c));
	return o;
}

static void status_print(json_object *o)
{
	json_object *budgets = jx_get(o, "budgets");
	json_object *warn = jx_get(o, "warnings");
	int64_t last_sync_ms = jx_get_int(o, "lastSyncMs");
	char sync[64] = "never";

	if (last_sync_ms) {
		time_t t = (time_t)(last_sync_ms / 1000);
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(sync, sizeof(sync), "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	printf("network    %s\n", jx_get_str(o, "network"));
	printf("source     %s\n", jx_get_str(o, "source")[0] ? jx_get_str(o, "source") : "-");
	printf("last sync  %s\n", sync);
	if (jx_get_str(o, "nodeIp")[0])
		printf("node       %s in %s\n", jx_get_str(o, "nodeIp"), jx_get_str(o, "subnet"));
	printf("addresses  %lld held: %lld allocated, %lld free, %lld cooling down, %lld retired; "
	       "%lld pending\n",
	       (long long)jx_get_int(o, "held"), (long long)jx_get_int(o, "allocated"),
	       (long long)jx_get_int(o, "free"), (long long)jx_get_int(o, "cooling"),
	       (long long)jx_get_int(o, "retired"), (long long)jx_get_int(o, "pending"));
	printf("pool       %lld addresses: allocated, free and cooling down (retired ones left it)\n",
	       (long long)jx_get_int(o, "total"));
	printf("max-pods   %lld (pool) + hostNetwork pods (--max-pods counts those too; they need "
	       "no address)\n",
	       (long long)jx_get_int(o, "maxPodsFromPool"));
	if (jx_get(o, "budgetPolicy")) {
		long long n = (long long)jx_get_int(jx_get(o, "budgetPolicy"), "budgets");

		printf("policy     %s: the allocator's, %lld budget%s\n",
		       jx_get_str(jx_get(o, "budgetPolicy"), "id"), n, n == 1 ? "" : "s");
	}
	for (size_t i = 0; i < json_object_array_length(budgets); i++) {
		char line[256];

		budget_line(json_object_array_get_idx(budgets, i), line, sizeof(line));
		printf("budget     %s\n", line);
	}
	for (size_t i = 0; i < json_object_array_length(warn); i++)
		printf("warning    %s\n",
		       json_object_get_string(json_object_array_get_idx(warn, i)));
}

int status_main(struct cli *c)
{
	_cleanup_json_ json_object *o = status_json(c);

	if (!o) {
		fputs("tollgate-ipam: out of memory\n", stderr);
		return EXIT_PROBLEMS;
	}
	if (c->json)
		jx_print(stdout, o, JSON_C_TO_STRING_PRETTY);
	else
		status_print(o);
	return json_object_array_length(jx_get(o, "warnings")) ? EXIT_PROBLEMS : 0;
}

/* ---- list ---- */

static void print_table_row(json_object *a)
{
	char pod[80], cid[14], age[32];

	snprintf(pod, sizeof(pod), "%s/%s", jx_get_str(a, "namespace"), jx_get_str(a, "pod"));
	snprintf(cid, sizeof(cid), "%.12s", jx_get_str(a, "containerId"));
	format_age(jx_get_int(a, "ageSeconds"), age, sizeof(age));
	printf("%-15s  %-30.30s  %-12s  %-6.6s  %-14s  %5s%s\n", jx_get_str(a, "ip"), pod, cid,
	       jx_get_str(a, "ifname"), jx_get_str(a, "hostVeth"), age,
	       json_object_object_get_ex(a, "retired", NULL) ? " retired" : "");
}

int list_main(struct cli *c)
{
	_cleanup_json_ json_object *arr = json_object_new_array();
	int64_t now = time(NULL);

	for (size_t i = 0; i < c->state.n_att; i++) {
		json_object *a = attachment_json(&c->state.att[i], now);

		if (!ipam_in_pool(&c->state, c->state.att[i].ip))
			json_object_object_add(a, "retired", json_object_new_boolean(true));
		json_object_array_add(arr, a);
	}
	if (c->json) {
		jx_print(stdout, arr, JSON_C_TO_STRING_PRETTY);
		return 0;
	}
	printf("%-15s  %-30s  %-12s  %-6s  %-14s  %5s\n", "IP", "NAMESPACE/POD", "CONTAINER",
	       "IFNAME", "HOST VETH", "AGE");
	for (size_t i = 0; i < json_object_array_length(arr); i++)
		print_table_row(json_object_array_get_idx(arr, i));
	return 0;
}

/* ---- show ---- */

/* The attachment's kernel objects, present or not; NULL when the kernel cannot be read. */
static json_object *show_kernel(const struct cli *c, const struct ipam_attachment *a)
{
	json_object *k;
	struct kview kv;
	struct stat sb;
	int ifindex;

	if (kview_load(&kv, c->uplink) < 0)
		return NULL;
	ifindex = kview_veth(&kv, a->host_veth);
	k = json_object_new_object();
	json_object_object_add(k, "netns",
			       json_object_new_boolean(a->netns[0] && stat(a->netns, &sb) == 0));
	json_object_object_add(k, "hostVeth", json_object_new_boolean(ifindex != 0));
	json_object_object_add(k, "hostRoute",
			       json_object_new_boolean(ifindex &&
						       kview_route(&kv, a->ip, ifindex)));
	json_object_object_add(k, "nftElement", json_object_new_boolean(kview_pod(&kv, a->ip)));
	kview_free(&kv);
	return k;
}

static json_object *class_json(const struct shaper_class *cl, const struct shaper_stats *s)
{
	json_object *o = json_object_new_object();
	char cls[16];

	snprintf(cls, sizeof(cls), "%x:%x", s->classid >> 16, s->classid & 0xffff);
	json_object_object_add(o, "device", json_object_new_string(cl->dev));
	json_object_object_add(o, "direction", json_object_new_string(cl->direction));
	json_object_object_add(o, "traffic", json_object_new_string(cl->traffic));
	json_object_object_add(o, "class", json_object_new_string(cls));
	json_object_object_add(o, "ceil", json_object_new_int64((int64_t)s->ceil_bps));
	json_object_object_add(o, "bytes", json_object_new_int64((int64_t)s->bytes));
	json_object_object_add(o, "packets", json_object_new_int64((int64_t)s->packets));
	json_object_object_add(o, "drops", json_object_new_int64((int64_t)s->drops));
	json_object_object_add(o, "overlimits", json_object_new_int64((int64_t)s->overlimits));
	return o;
}

/* The pod's caps and the counters of its tc classes. */
static json_object *show_shaping(const struct ipam_attachment *a)
{
	struct shaping sp = a->shaping;
	struct shaper_class classes[SHAPER_POD_CLASSES_MAX];
	struct shaper_stats stats[SHAPER_POD_CLASSES_MAX];
	struct nl_sock *sk = NULL;
	json_object *sh = shaping_view_json(&a->shaping), *sa = json_object_new_array();
	int n = 0;

	if (shaping_any(&sp) && tg_nl_route_open(&sk) == 0) {
		n = shaper_pod_stats(sk, a->host_veth, &sp, classes, stats);
		nl_socket_free(sk);
	}
	for (int i = 0; i < n; i++)
		json_object_array_add(sa, class_json(&classes[i], &stats[i]));
	json_object_object_add(sh, "classes", sa);
	return sh;
}

static const char *present_or(json_object *k, const char *key, const char *absent)
{
	return jbool(k, key) ? "present" : absent;
}

/* "8080/tcp -> 80, 10.0.0.1:53/udp -> 5353", or "none" */
static void ports_line(json_object *ports, char *buf, size_t size)
{
	size_t n = json_object_array_length(ports), at = 0;

	snprintf(buf, size, "none");
	for (size_t i = 0; i < n && at < size; i++) {
		json_object *m = json_object_array_get_idx(ports, i);
		const char *ip = jx_get_str(m, "hostIP");

		at += (size_t)snprintf(buf + at, size - at, "%s%s%s%lld/%s -> %lld", i ? ", " : "",
				       ip[0] ? ip : "", ip[0] ? ":" : "",
				       (long long)jx_get_int(m, "hostPort"),
				       jx_get_str(m, "protocol"),
				       (long long)jx_get_int(m, "containerPort"));
	}
}

static void show_print(json_object *o)
{
	json_object *k = jx_get(o, "kernel"), *sh = jx_get(o, "shaping"),
		    *cls = jx_get(sh, "classes");
	char line[200];

	printf("ip          %s%s\n", jx_get_str(o, "ip"),
	       jbool(o, "inPool") ? "" : " (retired: left the pool)");
	printf("pod         %s/%s\n", jx_get_str(o, "namespace"), jx_get_str(o, "pod"));
	printf("container   %s\n", jx_get_str(o, "containerId"));
	printf("ifname      %s\n", jx_get_str(o, "ifname"));
	printf("netns       %s (%s)\n", jx_get_str(o, "netns")[0] ? jx_get_str(o, "netns") : "-",
	       present_or(k, "netns", "gone"));
	printf("host veth   %s (%s)\n", jx_get_str(o, "hostVeth"),
	       present_or(k, "hostVeth", "MISSING"));
	printf("host route  %s/32 dev %s (%s)\n", jx_get_str(o, "ip"), jx_get_str(o, "hostVeth"),
	       present_or(k, "hostRoute", "MISSING"));
	printf("nft element %s in set inet tollgate pods (%s)\n", jx_get_str(o, "ip"),
	       present_or(k, "nftElement", "MISSING"));
	ports_line(jx_get(o, "ports"), line, sizeof(line));
	printf("host ports  %s\n", line);
	shaping_line(sh, line, sizeof(line));
	printf("shaping     %s\n", line);
	shaping_source_line(sh, line, sizeof(line));
	printf("caps from   %s\n", line);
	for (size_t i = 0; i < json_object_array_length(jx_get(o, "budgets")); i++) {
		budget_line(json_object_array_get_idx(jx_get(o, "budgets"), i), line, sizeof(line));
		printf("budget      %s\n", line);
	}
	for (size_t i = 0; i < json_object_array_length(cls); i++) {
		json_object *x = json_object_array_get_idx(cls, i);
		char ceil[24];

		printf("  class %-7s on %-15s ceil %-6s sent %llu B %llu pkt, dropped %llu, "
		       "overlimits %llu\n",
		       jx_get_str(x, "class"), jx_get_str(x, "device"),
		       rate_format((uint64_t)jx_get_int(x, "ceil"), ceil, sizeof(ceil)),
		       (unsigned long long)jx_get_int(x, "bytes"),
		       (unsigned long long)jx_get_int(x, "packets"),
		       (unsigned long long)jx_get_int(x, "drops"),
		       (unsigned long long)jx_get_int(x, "overlimits"));
	}
}

int show_main(struct cli *c)
{
	_cleanup_json_ json_object *o = NULL;
	const struct ipam_attachment *a;
	json_object *k;
	size_t idx;

	if (cli_find(c, c->arg, &idx) < 0)
		return EXIT_PROBLEMS;
	a = &c->state.att[idx];
	k = show_kernel(c, a);
	if (!k) {
		fputs("tollgate-ipam: cannot read the kernel's links, routes and tables\n", stderr);
		return EXIT_PROBLEMS;
	}
	o = attachment_json(a, time(NULL));
	json_object_object_add(o, "inPool",
			       json_object_new_boolean(ipam_in_pool(&c->state, a->ip)));
	json_object_object_add(o, "kernel", k);
	json_object_object_add(o, "shaping", show_shaping(a));
	json_object_object_add(o, "ports", hostports_to_json(&a->ports));
	/* the directions its record has under a budget */
	json_object_object_add(
		o, "budgets",
		budgets_json(c, a->k8s_namespace,
			     (a->shaping.budget_fallback_bps ? 1u << BUDGET_EGRESS : 0) |
				     (a->shaping.budget_in_fallback_bps ? 1u << BUDGET_INGRESS
									: 0)));
	if (c->json)
		jx_print(stdout, o, JSON_C_TO_STRING_PRETTY);
	else
		show_print(o);
	if (!jbool(k, "netns") || !jbool(k, "hostVeth") || !jbool(k, "hostRoute") ||
	    !jbool(k, "nftElement"))
		return EXIT_PROBLEMS;
	return 0;
}
