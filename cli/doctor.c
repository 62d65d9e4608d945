// SPDX-License-Identifier: Apache-2.0
/*
 * doctor: the store against the kernel of this network namespace (and IMDS).
 * Each check covers one kind of object and adds findings, each with the
 * command that repairs it; the findings are the document, text or --json.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "accounting/accounting.h"
#include "cli/cli.h"
#include "lib/nl.h"
#include "ipam/pool.h"
#include "lib/cleanup.h"
#include "lib/ip4.h"
#include "lib/jsonx.h"

struct doctor {
	const struct cli *c;
	const struct ipam_state *st;
	const struct kview *kv;
	json_object *findings;
	char fix_config[1200]; /* --config FILE [--data-dir D] [--network N] */
};

static void __attribute__((format(printf, 5, 6)))
finding(struct doctor *d, const char *kind, const char *object, const char *detail,
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
	json_object_array_add(d->findings, f);
}

/* The repair command names this store, not the default one. */
static void fix_config(const struct cli *c, char *buf, size_t size)
{
	bool dir = strcmp(c->data_dir, "/run/tollgate") != 0;
	bool net = strcmp(c->network, "tollgate") != 0;

	snprintf(buf, size, "%s%s%s%s",
		 c->config_path ? c->config_path : "/etc/cni/net.d/10-tollgate.conflist",
		 dir ? " --data-dir " : "", dir ? c->data_dir : "", net ? " --network " : "");
	if (net)
		snprintf(buf + strlen(buf), size - strlen(buf), "%s", c->network);
}

/*
 * The store: a corrupt file is reported, never replaced. One a later release
 * wrote is not corrupt: its attachments hold addresses in use, and moving it
 * aside would hand them out again; only that release (or a later one) reads it.
 */
static void check_store(struct doctor *d)
{
	const char *path = d->c->store.path;

	if (d->c->store_ok)
		return;
	if (d->c->store_newer) {
		finding(d, "newer-store", path, d->c->store_error,
			"install the Tollgate release that wrote it (or a later one) on this node; "
			"keep %s as it is: its attachments hold addresses in use",
			path);
		return;
	}
	finding(d, "corrupt-store", path, d->c->store_error,
		"mv %s %s.broken  # the plugin then starts an empty store; "
		"run `tollgate-ipam doctor` again to list the veths to remove",
		path, path);
}

/* tg* veths: each one belongs to an attachment (only judged with a readable store). */
static void check_veths(struct doctor *d)
{
	const struct kview *kv = d->kv;

	for (size_t i = 0; i < kv->n_veths && d->c->store_ok; i++) {
		bool owned = false;

		for (size_t j = 0; j < d->st->n_att && !owned; j++)
			owned = strcmp(d->st->att[j].host_veth, kv->veths[i].name) == 0;
		if (!owned)
			finding(d, "orphan-veth", kv->veths[i].name,
				"a Tollgate veth that no attachment owns", "ip link del %s",
				kv->veths[i].name);
	}
}

/* Host routes through tg* veths: each one leads to an address an attachment holds. */
static void check_routes(struct doctor *d)
{
	const struct kview *kv = d->kv;
	char ip[IP4_STRLEN], obj[200];

	for (size_t i = 0; i < kv->n_routes && d->c->store_ok; i++) {
		const char *dev = "";

		if (ipam_find_ip(d->st, kv->routes[i].ip))
			continue;
		for (size_t j = 0; j < kv->n_veths; j++)
			if (kv->veths[j].ifindex == kv->routes[i].ifindex)
				dev = kv->veths[j].name;
		snprintf(obj, sizeof(obj), "%s/32 dev %s", ip4_format(kv->routes[i].ip, ip), dev);
		finding(d, "orphan-route", obj, "a host route to an address no attachment holds",
			"ip route del %s", obj);
	}
}

/* Table inet tollgate: present with its rules while pods exist; no element without a pod. */
static void check_nft(struct doctor *d)
{
	const struct kview *kv = d->kv;
	char ip[IP4_STRLEN];
	size_t rules = 0;

	if (!kv->table && d->st->n_att)
		finding(d, "missing-table", "inet tollgate",
			"the nftables table is gone (flushed?) while pods exist",
			"tollgate-ipam --config %s doctor --fix", d->fix_config);
	if (kv->table && d->st->n_att && acct_count_rules(&rules) == 0 && rules == 0)
		finding(d, "missing-rules", "inet tollgate",
			"the table's chains are empty (flushed?): no counting, marking, shaping "
			"classes or masquerade",
			"tollgate-ipam --config %s doctor --fix", d->fix_config);
	for (size_t i = 0; i < kv->n_pods && kv->table && d->c->store_ok; i++)
		if (!ipam_find_ip(d->st, kv->pods[i]))
			finding(d, "orphan-nft-element", ip4_format(kv->pods[i], ip),
				"an element of set pods that no attachment holds",
				"for s in pods masq; do "
				"nft delete element inet tollgate $s { %s }; done",
				ip);
}

/*
 * Each attachment: its netns, host veth, host route and set element, in that
 * order; a gone netns or veth explains the rest, so nothing after it is reported.
 */
static void check_attachment(struct doctor *d, const struct ipam_attachment *a)
{
	const struct cli *c = d->c;
	int ifindex = kview_veth(d->kv, a->host_veth);
	char ip[IP4_STRLEN], obj[200];
	struct stat sb;

	ip4_format(a->ip, ip);
	if (a->netns[0] && stat(a->netns, &sb) < 0 && !node_netns_dir_visible(a->netns)) {
		/* Not gone: not visible from here (gc refuses to collect it as well). */
		finding(d, "unseen-netns", ip,
			"the directory of the pod's network namespace is missing or empty here",
			"run doctor where %.200s is mounted (the node's host namespace)", a->netns);
		return;
	}
	if (a->netns[0] && stat(a->netns, &sb) < 0) {
		finding(d, "stale-netns", ip, "the pod's network namespace is gone",
			"tollgate-ipam --data-dir %s --network %s gc", c->data_dir, c->network);
		return;
	}
	if (!ifindex) {
		finding(d, "missing-veth", ip, "the attachment's host veth is gone",
			"tollgate-ipam --data-dir %s --network %s release %s --force", c->data_dir,
			c->network, ip);
		return;
	}
	if (!kview_route(d->kv, a->ip, ifindex)) {
		snprintf(obj, sizeof(obj), "%s/32 dev %s", ip, a->host_veth);
		finding(d, "missing-route", obj, "the host route to the pod is gone",
			"ip route replace %s scope link", obj);
	}
	if (d->kv->table && !kview_pod(d->kv, a->ip))
		finding(d, "missing-nft-element", ip, "the pod is missing from set pods",
			"tollgate-ipam --config %s doctor --fix", d->fix_config);
	if (a->reshape_pending)
		finding(d, "reshape-pending", ip,
			"a reshape saved the pod's new caps and stopped before changing its classes",
			"tollgate-ipam --config %s reshape", d->fix_config);
}

/* Uplink addresses: a pool address there (other than the node's own) steals the pod's traffic. */
static void check_uplink(struct doctor *d)
{
	const struct kview *kv = d->kv;
	char ip[IP4_STRLEN], obj[200];

	for (size_t i = 0; i < kv->n_uplink; i++) {
		uint32_t addr = kv->uplink_addrs[i];

		if (!ipam_in_pool(d->st, addr) || addr == d->st->node_ip)
			continue;
		snprintf(obj, sizeof(obj), "%s/%u dev %s", ip4_format(addr, ip),
			 kv->uplink_prefixes[i], kv->uplink);
		finding(d, "uplink-address", obj,
			"a pool address sits on the uplink (cloud-init adds IMDS secondaries): "
			"pods break",
			"ip addr del %s  # and stop cloud-init from adding it", obj);
	}
}

/* IMDS pool drift: what IMDS offers against the pool, either way. */
static void check_imds(struct doctor *d)
{
	const struct cli *c = d->c;
	struct node_sync_source src = cli_sync_source(c, 10);
	struct node_sync_offer offer;
	struct tg_err e = { 0 };
	char detail[200];
	size_t missing = 0, extra = 0;

	if (node_imds_offer(&src, &offer, &e) < 0) {
		finding(d, "pool-drift", c->imds_url, e.msg[0] ? e.msg : "cannot read IMDS",
			"check IMDS, then tollgate-ipam sync");
		return;
	}
	for (size_t i = 0; i < offer.n_addrs; i++)
		missing += !ipam_in_pool(d->st, offer.addrs[i]);
	for (size_t i = 0; i < d->st->n_pool; i++)
		extra += !ipam_addr_in(offer.addrs, offer.n_addrs, d->st->pool[i]);
	node_imds_offer_free(&offer);
	if (!missing && !extra)
		return;
	snprintf(detail, sizeof(detail),
		 "IMDS lists %zu address(es) the pool lacks; the pool has %zu IMDS no longer lists",
		 missing, extra);
	finding(d, "pool-drift", c->network, detail,
		"tollgate-ipam --data-dir %s --network %s sync", c->data_dir, c->network);
}

/* doctor --fix: declares node-wide state again, with every pod of the store (needs the config). */
static int doctor_fix(struct cli *c)
{
	struct node_uplink up = { .mtu = c->cfg.mtu ? c->cfg.mtu : 1500 };
	struct node_repairs rep = { 0 };
	struct ipam_store store = { .lock_fd = -1 };
	struct nl_sock *sk = NULL;
	struct tg_err e = { 0 };
	int r;

	if (!c->config_path) {
		fprintf(stderr, "tollgate-ipam: doctor --fix needs --config (the table follows the "
				"network config)\n");
		return EXIT_USAGE;
	}
	if (tg_nl_route_open(&sk) < 0) {
		fprintf(stderr, "tollgate-ipam: cannot open a netlink socket\n");
		return EXIT_PROBLEMS;
	}
	r = node_uplink(sk, c->cfg.uplink, c->cfg.mtu, &up, &e);
	/*
	 * From the store as it is under its lock (doctor only read it): a pod
	 * ADDed or deleted since that read counts, and no element of another
	 * pod's is taken back.
	 */
	if (r == 0)
		r = ipam_store_open(&store, c->data_dir, c->network, &e);
	if (r == 0) {
		r = node_declare_from_store(sk, &c->cfg, &up, &store, NODE_DECLARE_PODS, &rep, &e);
		ipam_store_close(&store);
	}
	nl_socket_free(sk);
	if (r < 0) {
		fprintf(stderr, "tollgate-ipam: %s\n", e.msg);
		return EXIT_PROBLEMS;
	}
	if (!c->json)
		printf("fixed: table inet tollgate declared again with the store's %zu pods (node-wide "
		       "writes: %u nft rules, %u sets, %u chains, internal set %u, uplink filters %u, "
		       "IFB %u, HTB root %u, node class %u, sysctls %u)\n",
		       c->state.n_att, rep.nft.rules, rep.nft.sets, rep.nft.chains,
		       rep.nft.internal, rep.tc.filters, rep.tc.ifb, rep.tc.root, rep.tc.node_class,
		       rep.sysctls);
	return 0;
}

static void doctor_print(const struct cli *c, json_object *o)
{
	json_object *arr = jx_get(o, "findings");

	if (json_object_array_length(arr) == 0) {
		printf("no problems: %zu attachments match their veths, routes and nft elements\n",
		       c->state.n_att);
		return;
	}
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *f = json_object_array_get_idx(arr, i);

		printf("%-20s %s\n  %s\n", jx_get_str(f, "kind"), jx_get_str(f, "object"),
		       jx_get_str(f, "detail"));
		print_command("  fix: ", jx_get_str(f, "fix"));
	}
}

/* The kernel's side, read once for every check of it. */
static int check_kernel(struct doctor *d)
{
	struct kview kv;

	if (kview_load(&kv, d->c->uplink) < 0) {
		fputs("tollgate-ipam: cannot read the kernel's links, routes and tables\n", stderr);
		return -1;
	}
	d->kv = &kv;
	check_veths(d);
	check_routes(d);
	check_nft(d);
	for (size_t i = 0; i < d->st->n_att; i++)
		check_attachment(d, &d->st->att[i]);
	check_uplink(d);
	d->kv = NULL;
	kview_free(&kv);
	return 0;
}

int doctor_main(struct cli *c)
{
	_cleanup_json_ json_object *arr = json_object_new_array();
	_cleanup_json_ json_object *o = NULL;
	struct doctor d = { .c = c, .st = &c->state, .findings = arr };
	size_t n;
	int rc;

	fix_config(c, d.fix_config, sizeof(d.fix_config));
	check_store(&d);
	if (check_kernel(&d) < 0)
		return EXIT_PROBLEMS;
	if (c->fix && c->store_ok && (rc = doctor_fix(c)) != 0)
		return rc;
	if (c->imds_check && c->store_ok)
		check_imds(&d);
	n = json_object_array_length(arr);
	o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(n == 0));
	json_object_object_add(o, "findings", TAKE_PTR(arr));
	if (c->json)
		jx_print(stdout, o, JSON_C_TO_STRING_PRETTY);
	else
		doctor_print(c, o);
	return n ? EXIT_PROBLEMS : 0;
}
