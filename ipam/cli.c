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
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include "accounting/accounting.h"
#include "ipam/ipam.h"
#include "lib/cleanup.h"
#include "lib/ip4.h"
#include "lib/nl.h"
#include "lib/util.h"

#define EXIT_PROBLEMS 1
#define EXIT_USAGE 2

struct cli {
	const char *data_dir;
	const char *network;
	bool json;
	int64_t cooldown_ms;
	struct ipam_store store;
	struct ipam_state state;
};

static void usage(FILE *f)
{
	fputs("usage: tollgate-ipam [--data-dir DIR] [--network NAME] [--json] VERB [ARGS]\n"
	      "\n"
	      "verbs:\n"
	      "  status                       pool size, allocated, free, cooling, warnings\n"
	      "  list                         every attachment: IP, namespace/pod, container, veth, age\n"
	      "  show IP|NAMESPACE/POD|CONTAINERID\n"
	      "                               one attachment and its kernel objects\n"
	      "  release IP|CONTAINERID [--force]\n"
	      "                               give an address back (--force tears down a live veth)\n"
	      "  gc [--dry-run]               release attachments whose network namespace is gone\n"
	      "\n"
	      "defaults: --data-dir /run/tollgate --network tollgate\n"
	      "`tollgate-ipam VERB --help` describes one verb.\n",
	      f);
}

static const char *verb_help(const char *verb)
{
	if (strcmp(verb, "status") == 0)
		return "usage: tollgate-ipam status\n"
		       "Pool size, addresses allocated, free and cooling down, addresses in use that\n"
		       "left the pool (retired), the pool's source and last sync, and warnings.\n";
	if (strcmp(verb, "list") == 0)
		return "usage: tollgate-ipam list\n"
		       "Every attachment: IP, namespace/pod, container ID, interface, host veth, age.\n";
	if (strcmp(verb, "show") == 0)
		return "usage: tollgate-ipam show IP|NAMESPACE/POD|CONTAINERID\n"
		       "One attachment from the store, with the state of its kernel objects:\n"
		       "host veth, host route, nftables element. Exit 1 when one is missing.\n";
	if (strcmp(verb, "release") == 0)
		return "usage: tollgate-ipam release IP|CONTAINERID [--force]\n"
		       "Removes the attachment from the store. Refuses while its host veth exists,\n"
		       "unless --force, which deletes the veth and the nftables element first.\n";
	if (strcmp(verb, "gc") == 0)
		return "usage: tollgate-ipam gc [--dry-run]\n"
		       "Releases every attachment whose network namespace path no longer exists,\n"
		       "tearing down what is left of it. --dry-run only lists them.\n";
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

static int load(struct cli *c, bool create)
{
	struct tg_err e = { 0 };
	char path[4096];
	struct stat sb;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s/state.json", c->data_dir, c->network) >=
	    sizeof(path)) {
		fprintf(stderr, "tollgate-ipam: --data-dir is too long\n");
		return -ENAMETOOLONG;
	}
	if (!create && stat(path, &sb) < 0) {
		/* Nothing recorded yet: an empty state, and no directory created as a side effect. */
		ipam_state_init(&c->state);
		c->store.lock_fd = -1;
		return 0;
	}
	if (ipam_store_open(&c->store, c->data_dir, c->network, &e) < 0 ||
	    ipam_store_load(&c->store, &c->state, &e) < 0) {
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
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

static bool in_pool(const struct ipam_state *st, uint32_t ip)
{
	for (size_t i = 0; i < st->n_pool; i++)
		if (st->pool[i] == ip)
			return true;
	return false;
}

static int verb_status(struct cli *c)
{
	_cleanup_json_ json_object *o = json_object_new_object();
	json_object *warn = json_object_new_array();
	struct ipam_counts n;
	char boot[64] = "";
	int64_t now = time_now_ms();

	ipam_count(&c->state, now, c->cooldown_ms, &n);
	json_object_object_add(o, "network", json_object_new_string(c->network));
	json_object_object_add(o, "source", json_object_new_string(c->state.source));
	json_object_object_add(o, "total", json_object_new_int64((int64_t)n.total));
	json_object_object_add(o, "allocated", json_object_new_int64((int64_t)n.allocated));
	json_object_object_add(o, "free", json_object_new_int64((int64_t)n.free));
	json_object_object_add(o, "cooling", json_object_new_int64((int64_t)n.cooling));
	json_object_object_add(o, "retired", json_object_new_int64((int64_t)n.retired));
	json_object_object_add(o, "lastSyncMs", json_object_new_int64(c->state.last_sync_ms));
	if (n.total == 0)
		json_object_array_add(warn, json_object_new_string(
			"the pool is empty: pods cannot start (run `tollgate-ipam sync` or set ipam.addresses)"));
	else if (n.free == 0)
		json_object_array_add(warn, json_object_new_string("no free address: the next ADD fails"));
	if (n.retired)
		json_object_array_add(warn, json_object_new_string(
			"some pods hold addresses that left the pool; they are not handed out again"));
	if (ipam_read_boot_id(boot, sizeof(boot)) == 0 && c->state.boot_id[0] &&
	    strcmp(boot, c->state.boot_id) != 0)
		json_object_array_add(warn, json_object_new_string(
			"the store is from an earlier boot: its attachments are dropped at the next ADD"));
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
		printf("addresses  %zu total, %zu allocated, %zu free, %zu cooling down, %zu retired\n",
		       n.total, n.allocated, n.free, n.cooling, n.retired);
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
	printf("%-15s  %-36.36s  %-12s  %-6.6s  %-14s  %5s%s\n", str(a, "ip"), pod, cid,
	       str(a, "ifname"), str(a, "hostVeth"), age,
	       json_object_object_get_ex(a, "retired", NULL) ? "  retired" : "");
}

static int verb_list(struct cli *c)
{
	_cleanup_json_ json_object *arr = json_object_new_array();
	int64_t now = time(NULL);

	for (size_t i = 0; i < c->state.n_att; i++) {
		json_object *a = attachment_json(&c->state.att[i], now);

		if (!in_pool(&c->state, c->state.att[i].ip))
			json_object_object_add(a, "retired", json_object_new_boolean(true));
		json_object_array_add(arr, a);
	}
	if (c->json) {
		print_json(arr);
		return 0;
	}
	printf("%-15s  %-36s  %-12s  %-6s  %-14s  %5s\n", "IP", "NAMESPACE/POD", "CONTAINER",
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

static int verb_show(struct cli *c, const char *key)
{
	_cleanup_json_ json_object *o = NULL;
	json_object *k = json_object_new_object();
	struct nl_sock *sk = NULL;
	const struct ipam_attachment *a;
	struct stat sb;
	size_t idx;
	bool veth, elem, ns;
	int rc = 0;

	if (find_or_complain(c, key, &idx) < 0)
		return EXIT_PROBLEMS;
	a = &c->state.att[idx];
	o = attachment_json(a, time(NULL));
	nl_route_open(&sk);
	veth = link_exists(sk, a->host_veth);
	/* In set pods, whichever its masquerade setting. */
	elem = acct_pod_check(a->ip, false, NULL) == 1 || acct_pod_check(a->ip, true, NULL) == 1;
	ns = a->netns[0] && stat(a->netns, &sb) == 0;
	if (sk)
		nl_socket_free(sk);
	json_object_object_add(k, "hostVeth", json_object_new_boolean(veth));
	json_object_object_add(k, "nftElement", json_object_new_boolean(elem));
	json_object_object_add(k, "netns", json_object_new_boolean(ns));
	json_object_object_add(o, "inPool", json_object_new_boolean(in_pool(&c->state, a->ip)));
	json_object_object_add(o, "kernel", k);
	if (!veth || !elem || !ns)
		rc = EXIT_PROBLEMS;
	if (c->json) {
		print_json(o);
		return rc;
	}
	printf("ip          %s%s\n", str(o, "ip"), in_pool(&c->state, a->ip) ? "" : " (retired: left the pool)");
	printf("pod         %s/%s\n", a->k8s_namespace, a->pod);
	printf("container   %s\n", a->container_id);
	printf("ifname      %s\n", a->ifname);
	printf("netns       %s (%s)\n", a->netns[0] ? a->netns : "-", ns ? "present" : "gone");
	printf("host veth   %s (%s)\n", a->host_veth, veth ? "present" : "MISSING");
	printf("nft element %s in set inet tollgate pods (%s)\n", str(o, "ip"),
	       elem ? "present" : "MISSING");
	return rc;
}

static int teardown(const struct ipam_attachment *a)
{
	struct tg_err e = { 0 };
	struct nl_sock *sk = NULL;
	struct rtnl_link *link;
	int r;

	r = acct_pod_del(a->ip, &e);
	if (r < 0) {
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
		return r;
	}
	r = nl_route_open(&sk);
	if (r < 0)
		return r;
	link = rtnl_link_alloc();
	rtnl_link_set_name(link, a->host_veth);
	r = nl_to_errno(rtnl_link_delete(sk, link));
	rtnl_link_put(link);
	nl_socket_free(sk);
	return r == -ENODEV || r == -ENOENT ? 0 : r;
}

static int release_one(struct cli *c, const char *container_id, const char *ifname)
{
	struct tg_err e = { 0 };
	int r;

	if (ipam_store_lock(&c->store, &e) < 0)
		goto fail;
	ipam_state_free(&c->state);
	if (ipam_store_load(&c->store, &c->state, &e) < 0)
		goto fail;
	r = ipam_release(&c->state, container_id, ifname, time_now_ms(), true, NULL);
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

	if (find_or_complain(c, key, &idx) < 0)
		return EXIT_PROBLEMS;
	a = c->state.att[idx];
	nl_route_open(&sk);
	live = link_exists(sk, a.host_veth);
	if (sk)
		nl_socket_free(sk);
	if (live && !force) {
		fprintf(stderr,
			"tollgate-ipam: %s is still plumbed (veth %s exists); releasing it would hand "
			"a live address to another pod. Delete the pod, or use --force to tear it down.\n",
			ip4_format(a.ip, ip), a.host_veth);
		return EXIT_PROBLEMS;
	}
	if (force && teardown(&a) < 0)
		return EXIT_PROBLEMS;
	if (release_one(c, a.container_id, a.ifname) < 0)
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
	_cleanup_free_ struct ipam_attachment *stale = NULL;
	size_t n = 0, i;
	int rc = 0;

	stale = calloc(c->state.n_att ? c->state.n_att : 1, sizeof(*stale));
	if (!stale)
		return EXIT_PROBLEMS;
	for (i = 0; i < c->state.n_att; i++) {
		struct stat sb;

		if (!c->state.att[i].netns[0] || stat(c->state.att[i].netns, &sb) < 0)
			stale[n++] = c->state.att[i];
	}
	for (i = 0; i < n; i++) {
		json_object *o = attachment_json(&stale[i], time(NULL));

		if (!dry_run && (teardown(&stale[i]) < 0 ||
				 release_one(c, stale[i].container_id, stale[i].ifname) < 0))
			rc = EXIT_PROBLEMS;
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

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "data-dir", required_argument, NULL, 'd' },
		{ "network", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "force", no_argument, NULL, 'f' },
		{ "dry-run", no_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli c = { .data_dir = "/run/tollgate", .network = "tollgate",
			 .cooldown_ms = IPAM_DEFAULT_COOLDOWN_MS };
	bool help = false, force = false, dry_run = false;
	const char *verb, *arg = NULL;
	int opt, rc;

	c.store.lock_fd = -1;
	while ((opt = getopt_long(argc, argv, "+d:n:jh", opts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			c.data_dir = optarg;
			break;
		case 'n':
			c.network = optarg;
			break;
		case 'j':
			c.json = true;
			break;
		case 'h':
			help = true;
			break;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(help ? stdout : stderr);
		return help ? 0 : EXIT_USAGE;
	}
	verb = argv[optind];
	/* Options may also follow the verb, in any order: `tollgate-ipam release X --force`. */
	argc -= optind;
	argv += optind;
	optind = 0; /* makes glibc's getopt start afresh, in permuting mode */
	while ((opt = getopt_long(argc, argv, "d:n:jh", opts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			c.data_dir = optarg;
			break;
		case 'n':
			c.network = optarg;
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
		default:
			return EXIT_USAGE;
		}
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
	if (optind < argc)
		arg = argv[optind++];
	if (optind < argc || ((strcmp(verb, "show") == 0 || strcmp(verb, "release") == 0) != !!arg) ||
	    (force && strcmp(verb, "release") != 0) || (dry_run && strcmp(verb, "gc") != 0)) {
		fputs(verb_help(verb), stderr);
		return EXIT_USAGE;
	}
	if (!name_is_safe(c.network, 128)) {
		fprintf(stderr, "tollgate-ipam: --network \"%s\" is not a valid network name\n",
			c.network);
		return EXIT_USAGE;
	}
	if (load(&c, strcmp(verb, "release") == 0 || strcmp(verb, "gc") == 0) < 0)
		return EXIT_PROBLEMS;
	if (strcmp(verb, "status") == 0)
		rc = verb_status(&c);
	else if (strcmp(verb, "list") == 0)
		rc = verb_list(&c);
	else if (strcmp(verb, "show") == 0)
		rc = verb_show(&c, arg);
	else if (strcmp(verb, "release") == 0)
		rc = verb_release(&c, arg, force);
	else
		rc = verb_gc(&c, dry_run);
	ipam_state_free(&c.state);
	ipam_store_close(&c.store);
	return rc;
}
