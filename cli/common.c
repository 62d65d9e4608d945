// SPDX-License-Identifier: Apache-2.0
/* Helpers every verb shares: text formatting, the kernel view. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/route.h>

#include "accounting/accounting.h"
#include "cli/cli.h"
#include "lib/ip4.h"
#include "lib/jsonx.h"
#include "lib/nl.h"
#include "lib/rate.h"
#include "lib/util.h"

/* ---- JSON documents and their text form ---- */

void format_age(int64_t secs, char *buf, size_t size)
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

json_object *attachment_json(const struct ipam_attachment *a, int64_t now_s)
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

/* A rate, or "-" when there is no cap. */
static const char *rate_or_dash(json_object *o, const char *key, char *buf, size_t size)
{
	uint64_t bps = (uint64_t)jx_get_int(o, key);

	return bps ? rate_format(bps, buf, size) : "-";
}

void shaping_line(json_object *sh, char *buf, size_t size)
{
	char a[24], b[24], c[24], g[24], d[24], f[24];

	snprintf(buf, size,
		 "internet egress %s (namespace %s), internet ingress %s (namespace %s), pod %s "
		 "in / %s out",
		 rate_or_dash(sh, "internetEgress", a, sizeof(a)),
		 rate_or_dash(sh, "namespaceInternetEgress", b, sizeof(b)),
		 rate_or_dash(sh, "internetIngress", c, sizeof(c)),
		 rate_or_dash(sh, "namespaceInternetIngress", g, sizeof(g)),
		 rate_or_dash(sh, "ingressRate", d, sizeof(d)),
		 rate_or_dash(sh, "egressRate", f, sizeof(f)));
}

/* "config", "annotation" or "config (annotation 32G ignored)": above the cap, an annotation is. */
static const char *source_text(json_object *sh, const char *from, const char *annot, char *buf,
			       size_t size)
{
	uint64_t a = (uint64_t)jx_get_int(sh, annot);
	char r[24];

	if (strcmp(jx_get_str(sh, from), "annotation") == 0)
		snprintf(buf, size, "annotation");
	else if (a)
		snprintf(buf, size, "config (annotation %s ignored)", rate_format(a, r, sizeof(r)));
	else
		snprintf(buf, size, "config");
	return buf;
}

bool shaping_source_line(json_object *sh, char *buf, size_t size)
{
	char e[80], i[80];

	snprintf(buf, size, "egress: %s; ingress: %s",
		 source_text(sh, "internetEgressFrom", "internetEgressAnnotation", e, sizeof(e)),
		 source_text(sh, "internetIngressFrom", "internetIngressAnnotation", i, sizeof(i)));
	return jx_get_int(sh, "internetEgressAnnotation") ||
	       jx_get_int(sh, "internetIngressAnnotation");
}

void print_command(const char *lead, const char *cmd)
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

/* ---- finding an attachment ---- */

static bool attachment_matches(const struct ipam_attachment *a, const char *key)
{
	const char *slash = strchr(key, '/');
	uint32_t ip;

	if (ip4_parse(key, &ip) == 0)
		return a->ip == ip;
	if (slash)
		return strncmp(a->k8s_namespace, key, (size_t)(slash - key)) == 0 &&
		       a->k8s_namespace[slash - key] == '\0' && strcmp(a->pod, slash + 1) == 0;
	return strncmp(a->container_id, key, strlen(key)) == 0;
}

int cli_find(const struct cli *c, const char *key, size_t *ret)
{
	size_t hits = 0;

	for (size_t i = 0; i < c->state.n_att; i++) {
		if (attachment_matches(&c->state.att[i], key)) {
			*ret = i;
			hits++;
		}
	}
	if (hits == 0) {
		fprintf(stderr, "tollgate-ipam: no attachment matches \"%s\"\n", key);
		return -ENOENT;
	}
	if (hits > 1) {
		fprintf(stderr,
			"tollgate-ipam: \"%s\" matches several attachments; be more precise\n",
			key);
		return -EEXIST;
	}
	return 0;
}

/* ---- the kernel view ---- */

void kview_free(struct kview *k)
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

static void kview_veths(struct kview *k, struct nl_cache *links)
{
	for (struct nl_object *o = nl_cache_get_first(links); o; o = nl_cache_get_next(o)) {
		struct rtnl_link *l = (struct rtnl_link *)o;
		const char *name = rtnl_link_get_name(l), *type = rtnl_link_get_type(l);

		if (name && node_is_veth_name(name) && type && strcmp(type, "veth") == 0) {
			snprintf(k->veths[k->n_veths].name, IFNAMSIZ, "%s", name);
			k->veths[k->n_veths++].ifindex = rtnl_link_get_ifindex(l);
		}
	}
}

/* Only /32 routes of the main table through one of our veths: the pods' host routes. */
static void kview_routes(struct kview *k, struct nl_cache *routes)
{
	for (struct nl_object *o = nl_cache_get_first(routes); o; o = nl_cache_get_next(o)) {
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
}

static void kview_uplink(struct kview *k, struct nl_cache *addrs, int uplink_ifindex)
{
	for (struct nl_object *o = nl_cache_get_first(addrs); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;

		if (uplink_ifindex && rtnl_addr_get_ifindex(a) == uplink_ifindex &&
		    rtnl_addr_get_family(a) == AF_INET) {
			k->uplink_prefixes[k->n_uplink] = (uint8_t)rtnl_addr_get_prefixlen(a);
			k->uplink_addrs[k->n_uplink++] = addr_ip4(rtnl_addr_get_local(a));
		}
	}
}

static int kview_alloc(struct kview *k, struct nl_cache *links, struct nl_cache *routes,
		       struct nl_cache *addrs)
{
	size_t n_addrs = (size_t)nl_cache_nitems(addrs) + 1;

	k->veths = calloc((size_t)nl_cache_nitems(links) + 1, sizeof(*k->veths));
	k->routes = calloc((size_t)nl_cache_nitems(routes) + 1, sizeof(*k->routes));
	k->uplink_addrs = calloc(n_addrs, sizeof(*k->uplink_addrs));
	k->uplink_prefixes = calloc(n_addrs, 1);
	if (!k->veths || !k->routes || !k->uplink_addrs || !k->uplink_prefixes)
		return -ENOMEM;
	return 0;
}

int kview_load(struct kview *k, const char *uplink)
{
	struct nl_sock *sk = NULL;
	struct nl_cache *links = NULL, *routes = NULL, *addrs = NULL;
	int uplink_ifindex = 0, r;

	memset(k, 0, sizeof(*k));
	r = tg_nl_route_open(&sk);
	if (r < 0)
		return r;
	if (rtnl_link_alloc_cache(sk, AF_UNSPEC, &links) < 0 ||
	    rtnl_route_alloc_cache(sk, AF_INET, 0, &routes) < 0 ||
	    rtnl_addr_alloc_cache(sk, &addrs) < 0) {
		r = -EIO;
		goto out;
	}
	r = kview_alloc(k, links, routes, addrs);
	if (r < 0)
		goto out;
	if (uplink && *uplink)
		uplink_ifindex = rtnl_link_name2i(links, uplink);
	else
		tg_nl_default_route_ifindex(sk, &uplink_ifindex);
	if (uplink_ifindex)
		rtnl_link_i2name(links, uplink_ifindex, k->uplink, sizeof(k->uplink));
	kview_veths(k, links);
	kview_routes(k, routes);
	kview_uplink(k, addrs, uplink_ifindex);
	r = acct_list_set("pods", &k->pods, &k->n_pods, NULL);
	k->table = r == 0;
	r = r == -ENOENT ? 0 : r;
out:
	if (r < 0)
		kview_free(k);
	if (links)
		nl_cache_free(links);
	if (routes)
		nl_cache_free(routes);
	if (addrs)
		nl_cache_free(addrs);
	nl_socket_free(sk);
	return r;
}

int kview_veth(const struct kview *k, const char *name)
{
	for (size_t i = 0; i < k->n_veths; i++)
		if (strcmp(k->veths[i].name, name) == 0)
			return k->veths[i].ifindex;
	return 0;
}

bool kview_route(const struct kview *k, uint32_t ip, int ifindex)
{
	for (size_t i = 0; i < k->n_routes; i++)
		if (k->routes[i].ip == ip && (!ifindex || k->routes[i].ifindex == ifindex))
			return true;
	return false;
}

bool kview_pod(const struct kview *k, uint32_t ip)
{
	for (size_t i = 0; i < k->n_pods; i++)
		if (k->pods[i] == ip)
			return true;
	return false;
}
