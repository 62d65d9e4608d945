// SPDX-License-Identifier: Apache-2.0
/*
 * tollgate-ipam: the operator's view of the node's address pool.
 *
 *   tollgate-ipam [--data-dir D] [--network N] [--json] VERB [ARGS]
 *
 * Each verb builds one JSON document; --json prints it, otherwise the same
 * document is rendered as a table, so text and JSON never disagree.
 * Exit status: 0 ok, 1 problems found (or the verb failed), 2 usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/route.h>

#include "accounting/accounting.h"
#include "ipam/imds.h"
#include "ipam/ipam.h"
#include "ipam/pool.h"
#include "ipam/store.h"
#include "lib/cleanup.h"
#include "lib/ip4.h"
#include "lib/nl.h"
#include "lib/rate.h"
#include "lib/util.h"
#include "node/node.h"
#include "shaper/shaper.h"

#define EXIT_PROBLEMS 1
#define EXIT_USAGE 2

struct cli {
	const char *data_dir;
	const char *network;
	const char *config_path;
	const char *uplink;
	const char *imds_url;
	const char *from_file;
	int retry_budget_s;
	bool json;
	bool imds_check;
	bool fix;
	int64_t cooldown_ms;
	json_object *exclude;
	struct node_config cfg;
	struct ipam_store store;
	struct ipam_state state;
};

static void usage(FILE *f)
{
	fputs("usage: tollgate-ipam [--data-dir DIR] [--network NAME] [--config FILE] [--json] VERB [ARGS]\n"
	      "\n"
	      "verbs:\n"
	      "  status                       pool size, allocated, free, cooling, warnings\n"
	      "  list                         every attachment: IP, namespace/pod, container, veth, age\n"
	      "  show IP|NAMESPACE/POD|CONTAINERID\n"
	      "                               one attachment and its kernel objects\n"
	      "  sync [--imds-url URL] [--from-file F] [--uplink IF] [--retry-budget S]\n"
	      "                               refresh the pool from Azure IMDS\n"
	      "  release IP|CONTAINERID [--force]\n"
	      "                               give an address back (--force tears down a live veth)\n"
	      "  gc [--dry-run]               release attachments whose network namespace is gone\n"
	      "  doctor [--imds] [--fix]      store vs kernel (and IMDS): leaks, orphans, fixes\n"
	      "  reshape [--dry-run]          apply the config's shaping policy to running pods\n"
	      "\n"
	      "defaults: --data-dir /run/tollgate --network tollgate; --config reads both, the\n"
	      "uplink, imdsURL and exclude from a conflist. `tollgate-ipam VERB --help` describes a verb.\n"
	      "exit status: 0 ok, 1 problems found, 2 usage error\n",
	      f);
}

static const char *verb_help(const char *verb)
{
	if (strcmp(verb, "status") == 0)
		return "usage: tollgate-ipam status\n"
		       "Pool size, addresses allocated, free and cooling down, addresses in use that\n"
		       "left the pool (retired), addresses seen once by sync (pending), the pool's\n"
		       "source and last sync, and warnings. Exit 1 when there is a warning.\n";
	if (strcmp(verb, "list") == 0)
		return "usage: tollgate-ipam list\n"
		       "Every attachment: IP, namespace/pod, container ID, interface, host veth, age.\n";
	if (strcmp(verb, "show") == 0)
		return "usage: tollgate-ipam show IP|NAMESPACE/POD|CONTAINERID\n"
		       "One attachment from the store, with the state of its kernel objects:\n"
		       "netns, host veth, host route, nftables element. Exit 1 when one is missing.\n";
	if (strcmp(verb, "sync") == 0)
		return "usage: tollgate-ipam sync [--imds-url URL] [--from-file FILE] [--uplink IF]\n"
		       "                          [--retry-budget SECONDS]\n"
		       "Reads the uplink's secondary addresses from Azure IMDS (or FILE, an IMDS\n"
		       "network document) and folds them into the pool. The first sync of an empty\n"
		       "pool takes them all; later, a new address joins when two syncs in a row see\n"
		       "it. 429, 410, 5xx and timeouts are retried with back-off (1 s doubling to\n"
		       "10 s) within the budget (default 70 s). On any failure the store is untouched.\n";
	if (strcmp(verb, "release") == 0)
		return "usage: tollgate-ipam release IP|CONTAINERID [--force]\n"
		       "Removes the attachment from the store. Refuses while its host veth exists,\n"
		       "unless --force, which deletes the veth and the nftables elements first.\n";
	if (strcmp(verb, "gc") == 0)
		return "usage: tollgate-ipam gc [--dry-run]\n"
		       "Releases every attachment whose network namespace path no longer exists,\n"
		       "tearing down what is left of it. --dry-run only lists them.\n";
	if (strcmp(verb, "reshape") == 0)
		return "usage: tollgate-ipam --config FILE reshape [--dry-run]\n"
		       "Applies the shaping policy of FILE (shaping.internetEgress/internetIngress)\n"
		       "to every running pod without restarting it: recomputes each pod's caps (its\n"
		       "own runtimeConfig limits and annotations are kept), replaces its tc classes\n"
		       "and its nftables class element, and records the result in the store. The\n"
		       "node agent runs it when the CNI config changes.\n";
	if (strcmp(verb, "doctor") == 0)
		return "usage: tollgate-ipam doctor [--imds] [--fix]\n"
		       "Cross-checks the store against the kernel of this network namespace: tg*\n"
		       "veths, host routes, the inet tollgate table and its elements, and pool\n"
		       "addresses configured on the uplink. --imds also compares the pool with IMDS.\n"
		       "Each finding comes with the command that repairs it. Exit 1 on findings.\n"
		       "--fix (with --config) declares the nftables table again with every pod of\n"
		       "the store: the repair for missing-table and missing-nft-element.\n";
	return NULL;
}

static void print_json(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
						       JSON_C_TO_STRING_NOSLASHESCAPE));
}

static const char *str(json_object *o, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !v)
		return "";
	return json_object_get_string(v);
}

static int64_t num(json_object *o, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !v)
		return 0;
	return json_object_get_int64(v);
}

static void format_age(int64_t secs, char *buf, size_t size)
{
	if (secs < 0)
		secs = 0;
	if (secs < 120)
		snprintf(buf, size, "%llds", (long long)secs);
	else if (secs < 7200)
		snprintf(buf, size, "%lldm", (long long)(secs / 60));
	else if (secs < 172800)
		snprintf(buf, size, "%lldh", (long long)(secs / 3600));
	else
		snprintf(buf, size, "%lldd", (long long)(secs / 86400));
}

/* Reads the store without a lock (rename makes every read whole) and without creating it. */
static int load(struct cli *c, char *err, size_t err_size)
{
	struct tg_err e = { 0 };
	struct ipam_store ro;

	if (ipam_store_open_readonly(&ro, c->data_dir, c->network, &e) < 0) {
		snprintf(err, err_size, "--data-dir is too long");
		return -ENAMETOOLONG;
	}
	if (ipam_store_load(&ro, &c->state, &e) < 0) {
		snprintf(err, err_size, "%s", e.msg);
		return -EIO;
	}
	return 0;
}

static json_object *attachment_json(const struct ipam_attachment *a, int64_t now_s)
{
	json_object *o = json_object_new_object();
	char ip[IP4_STRLEN];

	json_object_object_add(o, "ip", json_object_new_string(ip4_format(a->ip, ip)));
	json_object_object_add(o, "namespace", json_object_new_string(a->k8s_namespace));
	json_object_object_add(o, "pod", json_object_new_string(a->pod));
	json_object_object_add(o, "containerId", json_object_new_string(a->container_id));
	json_object_object_add(o, "ifname", json_object_new_string(a->ifname));
	json_object_object_add(o, "hostVeth", json_object_new_string(a->host_veth));
	json_object_object_add(o, "netns", json_object_new_string(a->netns));
	json_object_object_add(o, "created", json_object_new_int64(a->created));
	json_object_object_add(o, "ageSeconds", json_object_new_int64(now_s - a->created));
	return o;
}


/* ---- what the kernel of this network namespace holds ---- */

struct kveth {
	char name[IFNAMSIZ];
	int ifindex;
};

struct kroute {
	uint32_t ip;
	int ifindex;
};

struct kview {
	struct kveth *veths;
	size_t n_veths;
	struct kroute *routes;		/* /32 routes of the main table through a tg* veth */
	size_t n_routes;
	uint32_t *pods;			/* set pods of table inet tollgate */
	size_t n_pods;
	bool table;
	uint32_t *uplink_addrs;
	uint8_t *uplink_prefixes;
	size_t n_uplink;
	char uplink[IFNAMSIZ];
};

static void kview_free(struct kview *k)
{
	free(k->veths);
	free(k->routes);
	free(k->pods);
	free(k->uplink_addrs);
	free(k->uplink_prefixes);
	memset(k, 0, sizeof(*k));
}

static uint32_t addr_ip4(struct nl_addr *a)
{
	uint32_t be = 0;

	if (a && nl_addr_get_len(a) == 4)
		memcpy(&be, nl_addr_get_binary_addr(a), 4);
	return ntohl(be);
}

static int kview_load(struct kview *k, const char *uplink)
{
	struct nl_sock *sk = NULL;
	struct nl_cache *links = NULL, *routes = NULL, *addrs = NULL;
	struct nl_object *o;
	int uplink_ifindex = 0, r;
	size_t cap;

	memset(k, 0, sizeof(*k));
	r = nl_route_open(&sk);
	if (r < 0)
		return r;
	if (rtnl_link_alloc_cache(sk, AF_UNSPEC, &links) < 0 ||
	    rtnl_route_alloc_cache(sk, AF_INET, 0, &routes) < 0 ||
	    rtnl_addr_alloc_cache(sk, &addrs) < 0) {
		r = -EIO;
		goto out;
	}
	cap = (size_t)nl_cache_nitems(links) + 1;
	k->veths = calloc(cap, sizeof(*k->veths));
	k->routes = calloc((size_t)nl_cache_nitems(routes) + 1, sizeof(*k->routes));
	k->uplink_addrs = calloc((size_t)nl_cache_nitems(addrs) + 1, sizeof(*k->uplink_addrs));
	k->uplink_prefixes = calloc((size_t)nl_cache_nitems(addrs) + 1, 1);
	if (!k->veths || !k->routes || !k->uplink_addrs || !k->uplink_prefixes) {
		r = -ENOMEM;
		goto out;
	}
	if (uplink && *uplink) {
		uplink_ifindex = rtnl_link_name2i(links, uplink);
	} else {
		nl_default_route_ifindex(sk, &uplink_ifindex);
	}
	if (uplink_ifindex)
		rtnl_link_i2name(links, uplink_ifindex, k->uplink, sizeof(k->uplink));
	for (o = nl_cache_get_first(links); o; o = nl_cache_get_next(o)) {
		struct rtnl_link *l = (struct rtnl_link *)o;
		const char *name = rtnl_link_get_name(l), *type = rtnl_link_get_type(l);

		if (name && node_is_veth_name(name) && type &&
		    strcmp(type, "veth") == 0) {
			snprintf(k->veths[k->n_veths].name, IFNAMSIZ, "%s", name);
			k->veths[k->n_veths++].ifindex = rtnl_link_get_ifindex(l);
		}
	}
	for (o = nl_cache_get_first(routes); o; o = nl_cache_get_next(o)) {
		struct rtnl_route *rt = (struct rtnl_route *)o;
		struct nl_addr *dst = rtnl_route_get_dst(rt);
		int oif;

		if (rtnl_route_get_table(rt) != RT_TABLE_MAIN || !dst ||
		    nl_addr_get_prefixlen(dst) != 32 || rtnl_route_get_nnexthops(rt) != 1)
			continue;
		oif = rtnl_route_nh_get_ifindex(rtnl_route_nexthop_n(rt, 0));
		for (size_t i = 0; i < k->n_veths; i++)
			if (k->veths[i].ifindex == oif) {
				k->routes[k->n_routes].ip = addr_ip4(dst);
				k->routes[k->n_routes++].ifindex = oif;
				break;
			}
	}
	for (o = nl_cache_get_first(addrs); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;

		if (uplink_ifindex && rtnl_addr_get_ifindex(a) == uplink_ifindex &&
		    rtnl_addr_get_family(a) == AF_INET) {
			k->uplink_prefixes[k->n_uplink] = (uint8_t)rtnl_addr_get_prefixlen(a);
			k->uplink_addrs[k->n_uplink++] = addr_ip4(rtnl_addr_get_local(a));
		}
	}
	r = acct_list_set("pods", &k->pods, &k->n_pods, NULL);
	k->table = r == 0;
	r = r == -ENOENT ? 0 : r;
out:
	if (links)
		nl_cache_free(links);
	if (routes)
		nl_cache_free(routes);
	if (addrs)
		nl_cache_free(addrs);
	nl_socket_free(sk);
	return r;
}

static int kview_veth(const struct kview *k, const char *name)
{
	for (size_t i = 0; i < k->n_veths; i++)
		if (strcmp(k->veths[i].name, name) == 0)
			return k->veths[i].ifindex;
	return 0;
}

static bool kview_route(const struct kview *k, uint32_t ip, int ifindex)
{
	for (size_t i = 0; i < k->n_routes; i++)
		if (k->routes[i].ip == ip && (!ifindex || k->routes[i].ifindex == ifindex))
			return true;
	return false;
}

static bool kview_pod(const struct kview *k, uint32_t ip)
{
	for (size_t i = 0; i < k->n_pods; i++)
		if (k->pods[i] == ip)
			return true;
	return false;
}

static int verb_status(struct cli *c)
{
	_cleanup_json_ json_object *o = json_object_new_object();
	json_object *warn = json_object_new_array();
	struct ipam_counts n;
	char boot[64] = "", ip[IP4_STRLEN], cidr[CIDR4_STRLEN];
	int64_t now = time_now_ms();
	bool stale = ipam_read_boot_id(boot, sizeof(boot)) == 0 && c->state.boot_id[0] &&
		     strcmp(boot, c->state.boot_id) != 0;

	/* After a reboot the recorded attachments are gone: count them as the next ADD will. */
	if (stale)
		ipam_check_boot(&c->state, boot);
	ipam_count(&c->state, now, c->cooldown_ms, &n);
	json_object_object_add(o, "network", json_object_new_string(c->network));
	json_object_object_add(o, "source", json_object_new_string(c->state.source));
	json_object_object_add(o, "total", json_object_new_int64((int64_t)n.total));
	json_object_object_add(o, "allocated", json_object_new_int64((int64_t)n.allocated));
	json_object_object_add(o, "free", json_object_new_int64((int64_t)n.free));
	json_object_object_add(o, "cooling", json_object_new_int64((int64_t)n.cooling));
	json_object_object_add(o, "retired", json_object_new_int64((int64_t)n.retired));
	json_object_object_add(o, "pending", json_object_new_int64((int64_t)c->state.n_pending));
	json_object_object_add(o, "lastSyncMs", json_object_new_int64(c->state.last_sync_ms));
	json_object_object_add(o, "nodeIp", json_object_new_string(
					       c->state.node_ip ? ip4_format(c->state.node_ip, ip) : ""));
	json_object_object_add(o, "subnet", json_object_new_string(
					       c->state.subnet.net ? cidr4_format(&c->state.subnet, cidr) : ""));
	if (n.total == 0)
		json_object_array_add(warn, json_object_new_string(
			"the pool is empty: pods cannot start (run `tollgate-ipam sync` or set ipam.addresses)"));
	else if (n.free == 0)
		json_object_array_add(warn, json_object_new_string(
			"no free address: the next ADD fails (see `tollgate-ipam list`)"));
	if (n.retired)
		json_object_array_add(warn, json_object_new_string(
			"pods hold addresses that left the pool; they are not handed out again"));
	if (stale)
		json_object_array_add(warn, json_object_new_string(
			"the store is from an earlier boot: its attachments are stale and go at the next ADD"));
	json_object_object_add(o, "warnings", warn);
	if (c->json) {
		print_json(o);
	} else {
		char sync[64] = "never";

		if (c->state.last_sync_ms) {
			time_t t = (time_t)(c->state.last_sync_ms / 1000);
			struct tm tm;

			gmtime_r(&t, &tm);
			strftime(sync, sizeof(sync), "%Y-%m-%dT%H:%M:%SZ", &tm);
		}
		printf("network    %s\n", c->network);
		printf("source     %s\n", c->state.source[0] ? c->state.source : "-");
		printf("last sync  %s\n", sync);
		if (c->state.node_ip)
			printf("node       %s in %s\n", ip, cidr);
		printf("addresses  %zu total, %zu allocated, %zu free, %zu cooling down, %zu retired, "
		       "%zu pending\n",
		       n.total, n.allocated, n.free, n.cooling, n.retired, c->state.n_pending);
		for (size_t i = 0; i < json_object_array_length(warn); i++)
			printf("warning    %s\n",
			       json_object_get_string(json_object_array_get_idx(warn, i)));
	}
	return json_object_array_length(warn) ? EXIT_PROBLEMS : 0;
}

static void print_table_row(json_object *a)
{
	char pod[80], cid[14], age[32];

	snprintf(pod, sizeof(pod), "%s/%s", str(a, "namespace"), str(a, "pod"));
	snprintf(cid, sizeof(cid), "%.12s", str(a, "containerId"));
	format_age(num(a, "ageSeconds"), age, sizeof(age));
	printf("%-15s  %-30.30s  %-12s  %-6.6s  %-14s  %5s%s\n", str(a, "ip"), pod, cid,
	       str(a, "ifname"), str(a, "hostVeth"), age,
	       json_object_object_get_ex(a, "retired", NULL) ? " retired" : "");
}

static int verb_list(struct cli *c)
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
		print_json(arr);
		return 0;
	}
	printf("%-15s  %-30s  %-12s  %-6s  %-14s  %5s\n", "IP", "NAMESPACE/POD", "CONTAINER",
	       "IFNAME", "HOST VETH", "AGE");
	for (size_t i = 0; i < json_object_array_length(arr); i++)
		print_table_row(json_object_array_get_idx(arr, i));
	return 0;
}

/* IP, namespace/pod, or a container ID (or a unique prefix of one). */
static int find(const struct ipam_state *st, const char *key, size_t *ret)
{
	uint32_t ip;
	size_t i, hits = 0;
	const char *slash = strchr(key, '/');

	for (i = 0; i < st->n_att; i++) {
		const struct ipam_attachment *a = &st->att[i];
		bool match;

		if (ip4_parse(key, &ip) == 0)
			match = a->ip == ip;
		else if (slash)
			match = strncmp(a->k8s_namespace, key, (size_t)(slash - key)) == 0 &&
				a->k8s_namespace[slash - key] == '\0' && strcmp(a->pod, slash + 1) == 0;
		else
			match = strncmp(a->container_id, key, strlen(key)) == 0;
		if (match) {
			*ret = i;
			hits++;
		}
	}
	if (hits == 0)
		return -ENOENT;
	return hits == 1 ? 0 : -EEXIST;
}

static int find_or_complain(struct cli *c, const char *key, size_t *idx)
{
	int r = find(&c->state, key, idx);

	if (r == -ENOENT)
		fprintf(stderr, "tollgate-ipam: no attachment matches \"%s\"\n", key);
	else if (r == -EEXIST)
		fprintf(stderr, "tollgate-ipam: \"%s\" matches several attachments; be more precise\n",
			key);
	return r;
}

static bool link_exists(struct nl_sock *sk, const char *name)
{
	struct rtnl_link *link = NULL;

	if (!sk || rtnl_link_get_kernel(sk, 0, name, &link) < 0)
		return false;
	rtnl_link_put(link);
	return true;
}

static json_object *shaping_json(const struct shaping *s)
{
	json_object *o = json_object_new_object();
	struct {
		const char *key;
		uint64_t v;
	} f[] = {
		{ "ingressRate", s->ingress_bps },	    { "egressRate", s->egress_bps },
		{ "internetIngress", s->inet_ingress_bps }, { "internetEgress", s->inet_egress_bps },
		{ "namespaceInternetEgress", s->ns_egress_bps },
		{ "nodeInternetEgress", s->node_egress_bps },
	};

	for (size_t i = 0; i < ARRAY_SIZE(f); i++)
		json_object_object_add(o, f[i].key, json_object_new_int64((int64_t)f[i].v));
	return o;
}

static void shaping_line(const struct shaping *s, char *buf, size_t size)
{
	char a[24], b[24], c[24], d[24], f[24];

	snprintf(buf, size, "internet egress %s (namespace %s), internet ingress %s, pod %s in / %s out",
		 s->inet_egress_bps ? rate_format(s->inet_egress_bps, a, sizeof(a)) : "-",
		 s->ns_egress_bps ? rate_format(s->ns_egress_bps, b, sizeof(b)) : "-",
		 s->inet_ingress_bps ? rate_format(s->inet_ingress_bps, c, sizeof(c)) : "-",
		 s->ingress_bps ? rate_format(s->ingress_bps, d, sizeof(d)) : "-",
		 s->egress_bps ? rate_format(s->egress_bps, f, sizeof(f)) : "-");
}

static int verb_show(struct cli *c, const char *key)
{
	_cleanup_json_ json_object *o = NULL;
	json_object *k;
	const struct ipam_attachment *a;
	struct kview kv;
	struct stat sb;
	size_t idx;
	bool veth, route, elem, ns, pooled;
	int ifindex, rc = 0;

	if (find_or_complain(c, key, &idx) < 0)
		return EXIT_PROBLEMS;
	a = &c->state.att[idx];
	if (kview_load(&kv, c->uplink) < 0) {
		fprintf(stderr, "tollgate-ipam: cannot read the kernel's links, routes and tables\n");
		return EXIT_PROBLEMS;
	}
	ifindex = kview_veth(&kv, a->host_veth);
	veth = ifindex != 0;
	route = veth && kview_route(&kv, a->ip, ifindex);
	elem = kview_pod(&kv, a->ip);
	ns = a->netns[0] && stat(a->netns, &sb) == 0;
	pooled = ipam_in_pool(&c->state, a->ip);
	kview_free(&kv);
	o = attachment_json(a, time(NULL));
	k = json_object_new_object();
	json_object_object_add(k, "netns", json_object_new_boolean(ns));
	json_object_object_add(k, "hostVeth", json_object_new_boolean(veth));
	json_object_object_add(k, "hostRoute", json_object_new_boolean(route));
	json_object_object_add(k, "nftElement", json_object_new_boolean(elem));
	json_object_object_add(o, "inPool", json_object_new_boolean(pooled));
	json_object_object_add(o, "kernel", k);
	{
		struct shaping sp = a->shaping;
		struct shaper_class classes[SHAPER_POD_CLASSES_MAX];
		struct shaper_stats stats[SHAPER_POD_CLASSES_MAX];
		struct nl_sock *sk = NULL;
		json_object *sh = shaping_json(&a->shaping), *sa = json_object_new_array();
		int n = 0;

		if (shaping_any(&sp) && nl_route_open(&sk) == 0) {
			n = shaper_pod_stats(sk, a->host_veth, &sp, classes, stats);
			nl_socket_free(sk);
		}
		for (int i = 0; i < n; i++) {
			json_object *so = json_object_new_object();
			char cls[16];

			snprintf(cls, sizeof(cls), "%x:%x", stats[i].classid >> 16,
				 stats[i].classid & 0xffff);
			json_object_object_add(so, "device", json_object_new_string(classes[i].dev));
			json_object_object_add(so, "direction",
					       json_object_new_string(classes[i].direction));
			json_object_object_add(so, "traffic", json_object_new_string(classes[i].traffic));
			json_object_object_add(so, "class", json_object_new_string(cls));
			json_object_object_add(so, "ceil", json_object_new_int64((int64_t)stats[i].ceil_bps));
			json_object_object_add(so, "bytes", json_object_new_int64((int64_t)stats[i].bytes));
			json_object_object_add(so, "packets",
					       json_object_new_int64((int64_t)stats[i].packets));
			json_object_object_add(so, "drops", json_object_new_int64((int64_t)stats[i].drops));
			json_object_object_add(so, "overlimits",
					       json_object_new_int64((int64_t)stats[i].overlimits));
			json_object_array_add(sa, so);
		}
		json_object_object_add(sh, "classes", sa);
		json_object_object_add(o, "shaping", sh);
	}
	if (!veth || !route || !elem || !ns)
		rc = EXIT_PROBLEMS;
	if (c->json) {
		print_json(o);
		return rc;
	}
	printf("ip          %s%s\n", str(o, "ip"), pooled ? "" : " (retired: left the pool)");
	printf("pod         %s/%s\n", a->k8s_namespace, a->pod);
	printf("container   %s\n", a->container_id);
	printf("ifname      %s\n", a->ifname);
	printf("netns       %s (%s)\n", a->netns[0] ? a->netns : "-", ns ? "present" : "gone");
	printf("host veth   %s (%s)\n", a->host_veth, veth ? "present" : "MISSING");
	printf("host route  %s/32 dev %s (%s)\n", str(o, "ip"), a->host_veth,
	       route ? "present" : "MISSING");
	printf("nft element %s in set inet tollgate pods (%s)\n", str(o, "ip"),
	       elem ? "present" : "MISSING");
	{
		json_object *sh, *cls;
		char line[200];

		shaping_line(&a->shaping, line, sizeof(line));
		printf("shaping     %s\n", line);
		json_object_object_get_ex(o, "shaping", &sh);
		json_object_object_get_ex(sh, "classes", &cls);
		for (size_t i = 0; i < json_object_array_length(cls); i++) {
			json_object *x = json_object_array_get_idx(cls, i);
			char ceil[24];

			printf("  class %-7s on %-15s ceil %-6s sent %llu B %llu pkt, dropped %llu, "
			       "overlimits %llu\n",
			       str(x, "class"), str(x, "device"),
			       rate_format((uint64_t)num(x, "ceil"), ceil, sizeof(ceil)),
			       (unsigned long long)num(x, "bytes"), (unsigned long long)num(x, "packets"),
			       (unsigned long long)num(x, "drops"),
			       (unsigned long long)num(x, "overlimits"));
		}
	}
	return rc;
}

/* What the plugin's GC does for one attachment: its kernel objects go (node_pod_del). */
static int teardown(struct nl_sock *sk, const struct ipam_attachment *a)
{
	struct tg_err e = { 0 };
	int r = sk ? node_pod_del(sk, a, &e) : -ENOTCONN;

	if (r < 0)
		fprintf(stderr, "tollgate-ipam: %s: %s\n", a->container_id,
			e.msg[0] ? e.msg : "cannot open a netlink socket");
	return r;
}

/* Releases the attachments (into cool-down) in one locked update of the store. */
static int release(struct cli *c, const struct ipam_attachment *list, size_t n)
{
	struct tg_err e = { 0 };
	int r = 0;

	if (!n)
		return 0;
	if (ipam_store_lock(&c->store, &e) < 0)
		goto fail;
	ipam_state_free(&c->state);
	if (ipam_store_load(&c->store, &c->state, &e) < 0)
		goto fail;
	for (size_t i = 0; i < n; i++)
		r += ipam_release(&c->state, list[i].container_id, list[i].ifname, time_now_ms(),
				  true, NULL);
	if (r > 0 && ipam_store_save(&c->store, &c->state, &e) < 0)
		goto fail;
	ipam_store_unlock(&c->store);
	return 0;
fail:
	ipam_store_unlock(&c->store);
	fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
	return -EIO;
}

static int verb_release(struct cli *c, const char *key, bool force)
{
	struct ipam_attachment a;
	struct nl_sock *sk = NULL;
	char ip[IP4_STRLEN];
	bool live;
	size_t idx;
	int r;

	if (find_or_complain(c, key, &idx) < 0)
		return EXIT_PROBLEMS;
	a = c->state.att[idx];
	nl_route_open(&sk);
	live = link_exists(sk, a.host_veth);
	if (live && !force) {
		fprintf(stderr,
			"tollgate-ipam: %s is still plumbed (veth %s exists); releasing it would hand "
			"a live address to another pod. Delete the pod, or use --force to tear it down.\n",
			ip4_format(a.ip, ip), a.host_veth);
		nl_socket_free(sk);
		return EXIT_PROBLEMS;
	}
	/* Without a veth only the nft elements are left; with --force the veth goes too. */
	r = teardown(sk, &a);
	if (sk)
		nl_socket_free(sk);
	if (r < 0 || release(c, &a, 1) < 0)
		return EXIT_PROBLEMS;
	if (c->json) {
		_cleanup_json_ json_object *o = attachment_json(&a, time(NULL));

		json_object_object_add(o, "released", json_object_new_boolean(true));
		print_json(o);
	} else {
		printf("released %s (%s/%s, container %.12s)\n", ip4_format(a.ip, ip),
		       a.k8s_namespace, a.pod, a.container_id);
	}
	return 0;
}

static int verb_gc(struct cli *c, bool dry_run)
{
	_cleanup_json_ json_object *arr = json_object_new_array();
	_cleanup_free_ struct ipam_attachment *stale = NULL, *torn = NULL;
	size_t n = 0, i;
	int rc = 0;

	stale = calloc(c->state.n_att ? c->state.n_att : 1, sizeof(*stale));
	torn = calloc(c->state.n_att ? c->state.n_att : 1, sizeof(*torn));
	if (!stale || !torn)
		return EXIT_PROBLEMS;
	for (i = 0; i < c->state.n_att; i++) {
		struct stat sb;

		if (!c->state.att[i].netns[0] || stat(c->state.att[i].netns, &sb) < 0)
			stale[n++] = c->state.att[i];
	}
	if (!dry_run && n) {
		/* One socket for every teardown, one store update for every release. */
		struct nl_sock *sk = NULL;
		size_t gone = 0;

		nl_route_open(&sk);
		for (i = 0; i < n; i++) {
			if (teardown(sk, &stale[i]) < 0)
				rc = EXIT_PROBLEMS; /* kept: its address must not go to another pod */
			else
				torn[gone++] = stale[i];
		}
		if (sk)
			nl_socket_free(sk);
		if (release(c, torn, gone) < 0)
			rc = EXIT_PROBLEMS;
	}
	for (i = 0; i < n; i++) {
		json_object *o = attachment_json(&stale[i], time(NULL));

		json_object_object_add(o, "released", json_object_new_boolean(!dry_run));
		json_object_array_add(arr, o);
	}
	if (c->json) {
		print_json(arr);
		return rc;
	}
	for (i = 0; i < n; i++) {
		char ip[IP4_STRLEN];

		printf("%s %s (%s/%s): network namespace %s is gone\n",
		       dry_run ? "would release" : "released", ip4_format(stale[i].ip, ip),
		       stale[i].k8s_namespace, stale[i].pod,
		       stale[i].netns[0] ? stale[i].netns : "(none recorded)");
	}
	if (n == 0)
		printf("nothing to collect: every attachment's network namespace exists\n");
	return rc;
}

/* ---- sync ---- */

static int uplink_mac(const char *uplink, uint8_t mac[6], char name[IFNAMSIZ])
{
	struct nl_sock *sk = NULL;
	struct rtnl_link *link = NULL;
	struct nl_addr *addr;
	int ifindex = 0, r;

	r = nl_route_open(&sk);
	if (r < 0)
		return r;
	if (!uplink || !*uplink) {
		r = nl_default_route_ifindex(sk, &ifindex);
		if (r == 0 && !ifindex)
			r = -ENETUNREACH;
	}
	if (r == 0)
		r = nl_to_errno(rtnl_link_get_kernel(sk, ifindex, ifindex ? NULL : uplink, &link));
	nl_socket_free(sk);
	if (r < 0)
		return r;
	addr = rtnl_link_get_addr(link);
	if (!addr || nl_addr_get_len(addr) != 6) {
		rtnl_link_put(link);
		return -EADDRNOTAVAIL;
	}
	memcpy(mac, nl_addr_get_binary_addr(addr), 6);
	snprintf(name, IFNAMSIZ, "%s", rtnl_link_get_name(link));
	rtnl_link_put(link);
	return 0;
}

static int read_file(const char *path, char **ret, size_t *ret_len)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f)
		return -errno;
	for (;;) {
		size_t n;

		if (len + 4096 > cap) {
			char *grown;

			cap = cap ? cap * 2 : 8192;
			if (cap > (1 << 22) || !(grown = realloc(buf, cap))) {
				free(buf);
				fclose(f);
				return -EFBIG;
			}
			buf = grown;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	fclose(f);
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

/*
 * What IMDS offers the pool, as sync and doctor --imds both read it: the
 * uplink's secondary addresses (from IMDS, or c->from_file), without the
 * node's own address and without ipam.exclude, sorted. `net` keeps the
 * uplink's node address and subnet; free it with imds_network_free.
 */
static int imds_candidates(struct cli *c, int budget_s, int *attempts, struct imds_network *net,
			   char upname[IFNAMSIZ], uint32_t **ret, size_t *ret_n, struct tg_err *e)
{
	_cleanup_free_ char *body = NULL;
	_cleanup_free_ uint32_t *excluded = NULL;
	size_t len = 0, n_excluded = 0, n = 0;
	uint32_t *keep;
	uint8_t mac[6];
	int r;

	r = uplink_mac(c->uplink, mac, upname);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot read the MAC of uplink %s: %s",
			       c->uplink && *c->uplink ? c->uplink : "(default route's interface)",
			       strerror(-r));
	if (c->from_file) {
		r = read_file(c->from_file, &body, &len);
		if (r < 0)
			return tg_fail(e, CNI_ERR_IO, r, "cannot read %s: %s", c->from_file,
				       strerror(-r));
	} else if ((r = imds_fetch(c->imds_url, budget_s, &body, &len, attempts, e)) < 0) {
		return r;
	}
	if ((r = imds_parse_network(body, len, mac, net, e)) < 0) {
		imds_network_free(net);
		return r;
	}
	/* ipam.exclude applies to synced pools too. */
	if (c->exclude && (r = ipam_pool_parse(c->exclude, NULL, "ipam", &excluded, &n_excluded,
					       e)) < 0) {
		imds_network_free(net);
		return r;
	}
	keep = calloc(net->n_addrs + 1, sizeof(*keep));
	if (!keep) {
		imds_network_free(net);
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < net->n_addrs; i++)
		if (!ipam_addr_in(excluded, n_excluded, net->addrs[i]))
			keep[n++] = net->addrs[i];
	ipam_addrs_sort(keep, n);
	*ret = keep;
	*ret_n = n;
	return 0;
}

static int verb_sync(struct cli *c)
{
	_cleanup_free_ uint32_t *keep = NULL;
	_cleanup_json_ json_object *o = NULL;
	struct imds_network net = { 0 };
	struct ipam_sync_report rep;
	struct tg_err e = { 0 };
	char upname[IFNAMSIZ] = "", ip[IP4_STRLEN], cidr[CIDR4_STRLEN];
	size_t n_keep = 0;
	int attempts = 0;

	if (imds_candidates(c, c->retry_budget_s, &attempts, &net, upname, &keep, &n_keep, &e) < 0) {
		fprintf(stderr, "tollgate-ipam: %s; the store is unchanged\n", e.msg);
		return EXIT_PROBLEMS;
	}
	if (ipam_store_lock(&c->store, &e) < 0)
		goto fail;
	ipam_state_free(&c->state);
	if (ipam_store_load(&c->store, &c->state, &e) < 0 ||
	    ipam_reconcile(&c->state, keep, n_keep, time_now_ms(), &rep, &e) < 0)
		goto fail;
	c->state.node_ip = net.node_ip;
	c->state.subnet = net.subnet;
	if (ipam_store_save(&c->store, &c->state, &e) < 0)
		goto fail;
	ipam_store_unlock(&c->store);

	o = json_object_new_object();
	json_object_object_add(o, "network", json_object_new_string(c->network));
	json_object_object_add(o, "source", json_object_new_string("imds"));
	json_object_object_add(o, "uplink", json_object_new_string(upname));
	json_object_object_add(o, "nodeIp", json_object_new_string(ip4_format(net.node_ip, ip)));
	json_object_object_add(o, "subnet", json_object_new_string(cidr4_format(&net.subnet, cidr)));
	json_object_object_add(o, "seen", json_object_new_int64((int64_t)n_keep));
	json_object_object_add(o, "added", json_object_new_int64((int64_t)rep.added));
	json_object_object_add(o, "pending", json_object_new_int64((int64_t)rep.pending));
	json_object_object_add(o, "removed", json_object_new_int64((int64_t)rep.removed));
	json_object_object_add(o, "retired", json_object_new_int64((int64_t)rep.retired));
	json_object_object_add(o, "total", json_object_new_int64((int64_t)c->state.n_pool));
	json_object_object_add(o, "attempts", json_object_new_int(attempts));
	imds_network_free(&net);
	if (c->json) {
		print_json(o);
		return 0;
	}
	printf("synced %s from %s (uplink %s, node %s in %s)\n", c->network,
	       c->from_file ? c->from_file : c->imds_url, upname, ip, cidr);
	printf("pool: %zu addresses; %zu added, %zu pending (join when seen again), %zu removed "
	       "(%zu still in use, retired)\n",
	       c->state.n_pool, rep.added, rep.pending, rep.removed, rep.retired);
	return 0;
fail:
	ipam_store_unlock(&c->store);
	imds_network_free(&net);
	fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
	return EXIT_PROBLEMS;
}

/* ---- doctor ---- */

static void __attribute__((format(printf, 5, 6)))
finding(json_object *arr, const char *kind, const char *object, const char *detail,
	const char *fix_fmt, ...)
{
	json_object *f = json_object_new_object();
	char fix[300];
	va_list ap;

	va_start(ap, fix_fmt);
	vsnprintf(fix, sizeof(fix), fix_fmt, ap);
	va_end(ap);
	json_object_object_add(f, "kind", json_object_new_string(kind));
	json_object_object_add(f, "object", json_object_new_string(object));
	json_object_object_add(f, "detail", json_object_new_string(detail));
	json_object_object_add(f, "fix", json_object_new_string(fix));
	json_object_array_add(arr, f);
}

/* Prints a shell command within 100 columns, continuing long ones with " \\". */
static void print_command(const char *lead, const char *cmd)
{
	size_t col = strlen(lead), width = 98; /* room for " \\" */
	const char *p = cmd;

	fputs(lead, stdout);
	while (*p) {
		const char *sp = strchr(p, ' ');
		size_t word = sp ? (size_t)(sp - p) : strlen(p);

		if (col > 8 && col + 1 + word > width) {
			fputs(" \\\n        ", stdout);
			col = 8;
		} else if (p != cmd) {
			fputc(' ', stdout);
			col++;
		}
		fwrite(p, 1, word, stdout);
		col += word;
		p += word;
		while (*p == ' ')
			p++;
	}
	fputc('\n', stdout);
}

/* doctor --fix: puts the table back with every pod of the store (needs the config). */
static int doctor_fix(struct cli *c)
{
	struct tg_err e = { 0 };
	int r = node_table_rebuild(&c->cfg, &c->state, &e);

	if (r < 0)
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
	return r;
}

static int verb_doctor(struct cli *c, bool store_ok, const char *store_error)
{
	char fix_config[1200];

	/* The repair command names this store, not the default one. */
	snprintf(fix_config, sizeof(fix_config), "%s%s%s%s",
		 c->config_path ? c->config_path : "/etc/cni/net.d/10-tollgate.conflist",
		 strcmp(c->data_dir, "/run/tollgate") ? " --data-dir " : "",
		 strcmp(c->data_dir, "/run/tollgate") ? c->data_dir : "",
		 strcmp(c->network, "tollgate") ? " --network " : "");
	if (strcmp(c->network, "tollgate"))
		snprintf(fix_config + strlen(fix_config), sizeof(fix_config) - strlen(fix_config),
			 "%s", c->network);
	_cleanup_json_ json_object *o = json_object_new_object();
	json_object *arr = json_object_new_array();
	const struct ipam_state *st = &c->state;
	struct kview kv;
	char ip[IP4_STRLEN], buf[200];
	size_t i, j;

	if (!store_ok) {
		snprintf(buf, sizeof(buf), "%s/%s/state.json", c->data_dir, c->network);
		finding(arr, "corrupt-store", buf, store_error,
			"mv %s %s.broken  # the plugin then starts an empty store; run `tollgate-ipam doctor` "
			"again to list the veths to remove",
			buf, buf);
	}
	if (kview_load(&kv, c->uplink) < 0) {
		fprintf(stderr, "tollgate-ipam: cannot read the kernel's links, routes and tables\n");
		return EXIT_PROBLEMS;
	}
	for (i = 0; i < kv.n_veths; i++) {
		bool owned = false;

		for (j = 0; j < st->n_att && !owned; j++)
			owned = strcmp(st->att[j].host_veth, kv.veths[i].name) == 0;
		if (!owned && store_ok)
			finding(arr, "orphan-veth", kv.veths[i].name,
				"a Tollgate veth that no attachment owns", "ip link del %s",
				kv.veths[i].name);
	}
	for (i = 0; i < kv.n_routes; i++) {
		const struct ipam_attachment *a = ipam_find_ip(st, kv.routes[i].ip);

		if (!a && store_ok) {
			const char *dev = "";

			for (j = 0; j < kv.n_veths; j++)
				if (kv.veths[j].ifindex == kv.routes[i].ifindex)
					dev = kv.veths[j].name;
			snprintf(buf, sizeof(buf), "%s/32 dev %s", ip4_format(kv.routes[i].ip, ip), dev);
			finding(arr, "orphan-route", buf, "a host route to an address no attachment holds",
				"ip route del %s", buf);
		}
	}
	if (!kv.table && st->n_att)
		finding(arr, "missing-table", "inet tollgate",
			"the nftables table is gone (flushed?) while pods exist",
			"tollgate-ipam --config %s doctor --fix", fix_config);
	if (kv.table && st->n_att) {
		size_t rules = 0;

		if (acct_count_rules(&rules) == 0 && rules == 0)
			finding(arr, "missing-rules", "inet tollgate",
				"the table's chains are empty (flushed?): no counting, marking, shaping "
				"classes or masquerade",
				"tollgate-ipam --config %s doctor --fix", fix_config);
	}
	for (i = 0; i < kv.n_pods && kv.table && store_ok; i++)
		if (!ipam_find_ip(st, kv.pods[i]))
			finding(arr, "orphan-nft-element", ip4_format(kv.pods[i], ip),
				"an element of set pods that no attachment holds",
				"for s in pods masq; do nft delete element inet tollgate $s { %s }; done",
				ip);
	for (i = 0; i < st->n_att; i++) {
		const struct ipam_attachment *a = &st->att[i];
		int ifindex = kview_veth(&kv, a->host_veth);
		struct stat sb;

		ip4_format(a->ip, ip);
		if (a->netns[0] && stat(a->netns, &sb) < 0) {
			finding(arr, "stale-netns", ip, "the pod's network namespace is gone",
				"tollgate-ipam --data-dir %s --network %s gc", c->data_dir, c->network);
			continue;
		}
		if (!ifindex) {
			finding(arr, "missing-veth", ip, "the attachment's host veth is gone",
				"tollgate-ipam --data-dir %s --network %s release %s --force", c->data_dir,
				c->network, ip);
			continue;
		}
		if (!kview_route(&kv, a->ip, ifindex)) {
			snprintf(buf, sizeof(buf), "%s/32 dev %s", ip, a->host_veth);
			finding(arr, "missing-route", buf, "the host route to the pod is gone",
				"ip route replace %s scope link", buf);
		}
		if (kv.table && !kview_pod(&kv, a->ip))
			finding(arr, "missing-nft-element", ip, "the pod is missing from set pods",
				"tollgate-ipam --config %s doctor --fix", fix_config);
	}
	for (i = 0; i < kv.n_uplink; i++) {
		if (!ipam_in_pool(st, kv.uplink_addrs[i]) || kv.uplink_addrs[i] == st->node_ip)
			continue;
		snprintf(buf, sizeof(buf), "%s/%u dev %s", ip4_format(kv.uplink_addrs[i], ip),
			 kv.uplink_prefixes[i], kv.uplink);
		finding(arr, "uplink-address", buf,
			"a pool address sits on the uplink (cloud-init adds IMDS secondaries): pods break",
			"ip addr del %s  # and stop cloud-init from adding it", buf);
	}
	kview_free(&kv);
	if (c->fix && store_ok) {
		if (!c->config_path) {
			fprintf(stderr, "tollgate-ipam: doctor --fix needs --config (the table follows the "
					"network config)\n");
			return EXIT_USAGE;
		}
		if (doctor_fix(c) < 0)
			return EXIT_PROBLEMS;
		if (!c->json)
			printf("fixed: table inet tollgate declared again with the store's %zu pods\n",
			       st->n_att);
	}
	if (c->imds_check && store_ok) {
		_cleanup_free_ uint32_t *offered = NULL;
		struct imds_network net = { 0 };
		struct tg_err e = { 0 };
		char upname[IFNAMSIZ];
		size_t n_offered = 0;

		if (imds_candidates(c, 10, NULL, &net, upname, &offered, &n_offered, &e) < 0) {
			finding(arr, "pool-drift", c->imds_url, e.msg[0] ? e.msg : "cannot read IMDS",
				"check IMDS, then tollgate-ipam sync");
		} else {
			size_t missing = 0, extra = 0;

			for (i = 0; i < n_offered; i++)
				missing += !ipam_in_pool(st, offered[i]);
			for (i = 0; i < st->n_pool; i++)
				extra += !ipam_addr_in(offered, n_offered, st->pool[i]);
			if (missing || extra) {
				snprintf(buf, sizeof(buf),
					 "IMDS lists %zu address(es) the pool lacks; the pool has %zu IMDS no "
					 "longer lists",
					 missing, extra);
				finding(arr, "pool-drift", c->network, buf,
					"tollgate-ipam --data-dir %s --network %s sync", c->data_dir,
					c->network);
			}
		}
		imds_network_free(&net);
	}
	json_object_object_add(o, "ok", json_object_new_boolean(json_object_array_length(arr) == 0));
	json_object_object_add(o, "findings", arr);
	if (c->json) {
		print_json(o);
	} else if (json_object_array_length(arr) == 0) {
		printf("no problems: %zu attachments match their veths, routes and nft elements\n",
		       st->n_att);
	} else {
		for (i = 0; i < json_object_array_length(arr); i++) {
			json_object *f = json_object_array_get_idx(arr, i);

			printf("%-20s %s\n  %s\n", str(f, "kind"), str(f, "object"), str(f, "detail"));
			print_command("  fix: ", str(f, "fix"));
		}
	}
	return json_object_array_length(arr) ? EXIT_PROBLEMS : 0;
}

/* ---- reshape ---- */

static int verb_reshape(struct cli *c, bool dry_run)
{
	_cleanup_json_ json_object *arr = json_object_new_array();
	_cleanup_free_ struct shaping *before = NULL;
	struct node_uplink up = { .mtu = c->cfg.mtu ? c->cfg.mtu : 1500 };
	struct nl_sock *sk = NULL;
	struct tg_err e = { 0 };
	size_t i, changed = 0;
	int rc = 0;

	if (ipam_store_lock(&c->store, &e) < 0)
		goto fail;
	ipam_state_free(&c->state);
	if (ipam_store_load(&c->store, &c->state, &e) < 0)
		goto fail;
	before = calloc(c->state.n_att + 1, sizeof(*before));
	if (!before)
		goto fail;
	for (i = 0; i < c->state.n_att; i++) {
		struct ipam_attachment *a = &c->state.att[i];

		before[i] = a->shaping;
		node_shaping_resolve(&c->cfg, a->k8s_namespace, &a->shaping);
		if (node_shaping_classes(&c->state, a) < 0) {
			tg_fail(&e, CNI_ERR_IO, -ENOSPC, "no free uplink class for %s/%s",
				a->k8s_namespace, a->pod);
			goto fail;
		}
		changed += memcmp(&before[i], &a->shaping, sizeof(before[i])) != 0;
	}
	if (!dry_run && changed && ipam_store_save(&c->store, &c->state, &e) < 0)
		goto fail;
	ipam_store_unlock(&c->store);

	if (!dry_run && changed && nl_route_open(&sk) < 0) {
		fprintf(stderr, "tollgate-ipam: cannot open a netlink socket\n");
		return EXIT_PROBLEMS;
	}
	/* Bursts and quanta are sized for the uplink's MTU, as ADD sized them. */
	if (sk && node_uplink(sk, &c->cfg, &up, &e) < 0) {
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
		nl_socket_free(sk);
		return EXIT_PROBLEMS;
	}
	for (i = 0; i < c->state.n_att; i++) {
		struct ipam_attachment *a = &c->state.att[i];
		bool diff = memcmp(&before[i], &a->shaping, sizeof(before[i])) != 0;
		json_object *o = attachment_json(a, time(NULL));
		char line[200];

		json_object_object_add(o, "changed", json_object_new_boolean(diff));
		json_object_object_add(o, "shaping", shaping_json(&a->shaping));
		json_object_array_add(arr, o);
		if (!diff || dry_run)
			continue;
		if (node_pod_reshape(sk, &c->cfg, &up, a, &before[i], &e) < 0) {
			fprintf(stderr, "tollgate-ipam: %s/%s: %s\n", a->k8s_namespace, a->pod, e.msg);
			memset(&e, 0, sizeof(e));
			rc = EXIT_PROBLEMS;
		}
		shaping_line(&a->shaping, line, sizeof(line));
		/* The pod, then its shaping indented: names of 63 characters fit 100 columns. */
		if (!c->json)
			printf("%-15s %s/%s\n%16s%s\n", str(o, "ip"), a->k8s_namespace, a->pod, "", line);
	}
	if (!dry_run && changed) {
		/* The pods' class elements (and the rest of the table) as the store now says. */
		if (node_table_rebuild(&c->cfg, &c->state, &e) < 0) {
			fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
			rc = EXIT_PROBLEMS;
		}
	}
	if (sk)
		nl_socket_free(sk);
	if (c->json)
		print_json(arr);
	else
		printf("%zu of %zu pods %s\n", changed, c->state.n_att,
		       dry_run ? "would change (dry run)" : "reshaped");
	return rc;
fail:
	ipam_store_unlock(&c->store);
	fprintf(stderr, "tollgate-ipam: %s\n", e.msg[0] ? e.msg : "out of memory");
	return EXIT_PROBLEMS;
}

static bool verb_is(const char *verb, const char *name)
{
	return strcmp(verb, name) == 0;
}

/* Settings from --config, where flags did not set them. */
static int apply_config(struct cli *c, bool net_set, bool dir_set)
{
	struct tg_err e = { 0 };

	if (node_config_load_file(c->config_path, &c->cfg, &e) < 0) {
		fprintf(stderr, "tollgate-ipam: --config %s: %s\n", c->config_path, e.msg);
		return -EINVAL;
	}
	if (!net_set)
		c->network = c->cfg.name;
	if (!dir_set)
		c->data_dir = c->cfg.data_dir;
	if (!c->uplink && c->cfg.uplink[0])
		c->uplink = c->cfg.uplink;
	if (!c->imds_url && c->cfg.imds_url)
		c->imds_url = c->cfg.imds_url;
	c->exclude = c->cfg.exclude;
	c->cooldown_ms = c->cfg.cooldown_ms;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "data-dir", required_argument, NULL, 'd' },
		{ "network", required_argument, NULL, 'n' },
		{ "config", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "force", no_argument, NULL, 'f' },
		{ "dry-run", no_argument, NULL, 'r' },
		{ "imds-url", required_argument, NULL, 'u' },
		{ "from-file", required_argument, NULL, 'F' },
		{ "uplink", required_argument, NULL, 'U' },
		{ "retry-budget", required_argument, NULL, 'b' },
		{ "imds", no_argument, NULL, 'I' },
		{ "fix", no_argument, NULL, 'X' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli c = { .data_dir = "/run/tollgate", .network = "tollgate",
			 .cooldown_ms = IPAM_DEFAULT_COOLDOWN_MS, .retry_budget_s = 70 };
	bool help = false, force = false, dry_run = false, net_set = false, dir_set = false;
	bool store_ok = true, needs_arg;
	char store_error[600] = "";
	const char *verb = NULL, *arg = NULL;
	int opt, rc, i;

	c.store.lock_fd = -1;
	/* Options anywhere, the verb and its argument are the non-options. */
	while ((opt = getopt_long(argc, argv, "d:n:c:jh", opts, NULL)) != -1) {
		char *end;

		switch (opt) {
		case 'd':
			c.data_dir = optarg;
			dir_set = true;
			break;
		case 'n':
			c.network = optarg;
			net_set = true;
			break;
		case 'c':
			c.config_path = optarg;
			break;
		case 'j':
			c.json = true;
			break;
		case 'h':
			help = true;
			break;
		case 'f':
			force = true;
			break;
		case 'r':
			dry_run = true;
			break;
		case 'u':
			c.imds_url = optarg;
			break;
		case 'F':
			c.from_file = optarg;
			break;
		case 'U':
			c.uplink = optarg;
			break;
		case 'I':
			c.imds_check = true;
			break;
		case 'X':
			c.fix = true;
			break;
		case 'b':
			c.retry_budget_s = (int)strtol(optarg, &end, 10);
			if (*end || c.retry_budget_s < 0 || c.retry_budget_s > 600) {
				fprintf(stderr, "tollgate-ipam: --retry-budget takes seconds, 0..600\n");
				return EXIT_USAGE;
			}
			break;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	for (i = optind; i < argc; i++) {
		if (!verb)
			verb = argv[i];
		else if (!arg)
			arg = argv[i];
		else {
			fprintf(stderr, "tollgate-ipam: unexpected argument \"%s\"\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!verb) {
		usage(help ? stdout : stderr);
		return help ? 0 : EXIT_USAGE;
	}
	if (!verb_help(verb)) {
		fprintf(stderr, "tollgate-ipam: unknown verb \"%s\"\n\n", verb);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (help) {
		fputs(verb_help(verb), stdout);
		return 0;
	}
	needs_arg = verb_is(verb, "show") || verb_is(verb, "release");
	if (needs_arg != !!arg || (force && !verb_is(verb, "release")) ||
	    (dry_run && !verb_is(verb, "gc") && !verb_is(verb, "reshape")) || ((c.imds_check || c.fix) && !verb_is(verb, "doctor")) ||
	    ((c.from_file || c.retry_budget_s != 70) && !verb_is(verb, "sync"))) {
		fputs(verb_help(verb), stderr);
		return EXIT_USAGE;
	}
	if (c.config_path && apply_config(&c, net_set, dir_set) < 0) {
		node_config_free(&c.cfg);
		return EXIT_USAGE;
	}
	if (!c.imds_url)
		c.imds_url = "http://169.254.169.254";
	if (!name_is_safe(c.network, TG_NETWORK_NAME_MAX)) {
		fprintf(stderr, "tollgate-ipam: --network \"%s\" is not a valid network name\n",
			c.network);
		node_config_free(&c.cfg);
		return EXIT_USAGE;
	}
	if (verb_is(verb, "reshape") && !c.config_path) {
		fputs("tollgate-ipam: reshape needs --config (the policy to apply)\n", stderr);
		node_config_free(&c.cfg);
		return EXIT_USAGE;
	}
	if (verb_is(verb, "sync") || verb_is(verb, "release") || verb_is(verb, "gc") ||
	    verb_is(verb, "reshape")) {
		struct tg_err e = { 0 };

		if (ipam_store_open(&c.store, c.data_dir, c.network, &e) < 0) {
			fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
			node_config_free(&c.cfg);
			return EXIT_PROBLEMS;
		}
	}
	if (!verb_is(verb, "sync") && load(&c, store_error, sizeof(store_error)) < 0) {
		store_ok = false;
		if (!verb_is(verb, "doctor")) {
			fprintf(stderr, "tollgate-ipam: %s\n", store_error);
			node_config_free(&c.cfg);
			ipam_store_close(&c.store);
			return EXIT_PROBLEMS;
		}
	}
	if (verb_is(verb, "status"))
		rc = verb_status(&c);
	else if (verb_is(verb, "list"))
		rc = verb_list(&c);
	else if (verb_is(verb, "show"))
		rc = verb_show(&c, arg);
	else if (verb_is(verb, "release"))
		rc = verb_release(&c, arg, force);
	else if (verb_is(verb, "gc"))
		rc = verb_gc(&c, dry_run);
	else if (verb_is(verb, "sync"))
		rc = verb_sync(&c);
	else if (verb_is(verb, "reshape"))
		rc = verb_reshape(&c, dry_run);
	else
		rc = verb_doctor(&c, store_ok, store_error);
	ipam_state_free(&c.state);
	ipam_store_close(&c.store);
	node_config_free(&c.cfg);
	return rc;
}
