// SPDX-License-Identifier: Apache-2.0
/*
 * One pod's routed data path, through libnl-route-3:
 *   host: tgXXXXXXXXXXXX (veth) ── route IP/32 scope link, permanent neighbour
 *   pod:  eth0 IP/32 ── 169.254.1.1 on-link (permanent neighbour), default via it
 * Static neighbours on both ends: no ARP, no proxy_arp, no bridge.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/inet6.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/route.h>

#include "lib/cleanup.h"
#include "lib/failpoint.h"
#include "lib/nl.h"
#include "lib/nl_cleanup.h"
#include "lib/steps.h"
#include "lib/util.h"
#include "node/internal.h"

const uint8_t node_host_mac[6] = { 0xee, 0xee, 0xee, 0xee, 0xee, 0xee };

static uint64_t attachment_hash(const char *container_id, const char *ifname)
{
	uint64_t h = hash_fnv1a64(container_id, strlen(container_id) + 1, FNV1A64_INIT);

	return hash_fnv1a64(ifname, strlen(ifname), h);
}

void node_veth_name(const char *container_id, const char *ifname, char ret[IFNAMSIZ])
{
	snprintf(ret, IFNAMSIZ, NODE_VETH_PREFIX "%012llx",
		 (unsigned long long)(attachment_hash(container_id, ifname) & 0xffffffffffffULL));
}

bool node_is_veth_name(const char *name)
{
	size_t n = strlen(name);

	return n == 14 && strncmp(name, NODE_VETH_PREFIX, 2) == 0 &&
	       strspn(name + 2, "0123456789abcdef") == 12;
}

void node_pod_mac(const char *container_id, const char *ifname, uint8_t ret[6])
{
	uint64_t h = attachment_hash(container_id, ifname) >> 16;

	ret[0] = 0x0a; /* locally administered, unicast */
	for (int i = 5; i >= 1; i--, h >>= 8)
		ret[i] = (uint8_t)h;
}

int node_uplink(struct nl_sock *sk, const char *name, int mtu, struct node_uplink *ret,
		struct tg_err *e)
{
	_cleanup_link_ struct rtnl_link *link = NULL;
	struct nl_addr *mac;
	int ifindex = 0, r;

	memset(ret, 0, sizeof(*ret));
	ret->mtu = mtu ? mtu : 1500;
	if (name[0]) {
		r = tg_nl_to_errno(rtnl_link_get_kernel(sk, 0, name, &link));
		if (r == -ENODEV || r == -ENOENT)
			return tg_fail(e, CNI_ERR_CONFIG, -ENODEV,
				       "uplink \"%s\" does not exist on this node", name);
		if (r < 0)
			return tg_fail_kernel(e, r, "cannot read uplink \"%s\"", name);
	} else {
		/* No uplink configured: the interface of the default route, else none. */
		if (tg_nl_default_route_ifindex(sk, &ifindex) < 0 || ifindex == 0)
			return 0;
		r = tg_nl_to_errno(rtnl_link_get_kernel(sk, ifindex, NULL, &link));
		if (r < 0)
			return tg_fail_kernel(e, r, "%s",
					      "cannot read the default route's interface");
	}
	if (strncmp(rtnl_link_get_name(link), NODE_VETH_PREFIX, strlen(NODE_VETH_PREFIX)) == 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "uplink \"%s\" is named like a pod's link (" NODE_VETH_PREFIX "*): "
			       "anti-spoofing would drop what it receives; rename it",
			       rtnl_link_get_name(link));
	if (!mtu)
		ret->mtu = (int)rtnl_link_get_mtu(link);
	ret->ifindex = rtnl_link_get_ifindex(link);
	snprintf(ret->name, sizeof(ret->name), "%s", rtnl_link_get_name(link));
	mac = rtnl_link_get_addr(link);
	if (mac && nl_addr_get_len(mac) == 6) {
		memcpy(ret->mac, nl_addr_get_binary_addr(mac), 6);
		ret->has_mac = true;
	}
	return 0;
}

int plumb_ifindex(struct nl_sock *sk, const char *name, unsigned int *flags, int *ret)
{
	_cleanup_link_ struct rtnl_link *link = NULL;
	int r = tg_nl_to_errno(rtnl_link_get_kernel(sk, 0, name, &link));

	if (r < 0)
		return r;
	*ret = rtnl_link_get_ifindex(link);
	if (flags)
		*flags = rtnl_link_get_flags(link);
	return 0;
}

static int add_neigh(struct nl_sock *sk, int ifindex, uint32_t ip, const uint8_t mac[6])
{
	_cleanup_neigh_ struct rtnl_neigh *n = rtnl_neigh_alloc();
	_cleanup_nl_addr_ struct nl_addr *dst = tg_nl_addr_ip4(ip, 32);
	_cleanup_nl_addr_ struct nl_addr *ll = nl_addr_build(AF_LLC, mac, 6);

	if (!n || !dst || !ll)
		return -ENOMEM;
	rtnl_neigh_set_ifindex(n, ifindex);
	rtnl_neigh_set_family(n, AF_INET);
	rtnl_neigh_set_dst(n, dst);
	rtnl_neigh_set_lladdr(n, ll);
	rtnl_neigh_set_state(n, NUD_PERMANENT);
	return tg_nl_to_errno(rtnl_neigh_add(sk, n, NLM_F_CREATE | NLM_F_REPLACE));
}

static int add_route(struct nl_sock *sk, int ifindex, uint32_t dst_ip, int prefix, uint32_t gw,
		     uint8_t scope)
{
	_cleanup_route_ struct rtnl_route *rt = rtnl_route_alloc();
	_cleanup_nexthop_ struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	_cleanup_nl_addr_ struct nl_addr *dst = tg_nl_addr_ip4(dst_ip, prefix);
	_cleanup_nl_addr_ struct nl_addr *via = gw ? tg_nl_addr_ip4(gw, 32) : NULL;

	if (!rt || !nh || !dst || (gw && !via))
		return -ENOMEM;
	rtnl_route_set_family(rt, AF_INET);
	rtnl_route_set_table(rt, RT_TABLE_MAIN);
	rtnl_route_set_scope(rt, scope);
	rtnl_route_set_protocol(rt, RTPROT_STATIC);
	rtnl_route_set_dst(rt, dst);
	rtnl_route_nh_set_ifindex(nh, ifindex);
	if (via)
		rtnl_route_nh_set_gateway(nh, via);
	rtnl_route_add_nexthop(rt, TAKE_PTR(nh)); /* owned by the route now */
	return tg_nl_to_errno(rtnl_route_add(sk, rt, NLM_F_CREATE | NLM_F_REPLACE));
}

static int create_veth(struct nl_sock *sk, const struct plumb_req *rq)
{
	_cleanup_veth_ struct rtnl_link *veth = rtnl_link_veth_alloc();
	_cleanup_nl_addr_ struct nl_addr *hmac = nl_addr_build(AF_LLC, node_host_mac, 6);
	_cleanup_nl_addr_ struct nl_addr *pmac = nl_addr_build(AF_LLC, rq->pod_mac, 6);
	struct rtnl_link *peer;

	if (!veth || !hmac || !pmac)
		return -ENOMEM;
	rtnl_link_set_name(veth, rq->host_ifname);
	rtnl_link_set_mtu(veth, (unsigned int)rq->mtu);
	rtnl_link_set_addr(veth, hmac);
	rtnl_link_set_flags(veth, IFF_UP);
	rtnl_link_set_group(veth, rq->group);
	peer = rtnl_link_veth_get_peer(veth);
	/* The pod end is born in the pod's namespace under its final name. */
	rtnl_link_set_name(peer, rq->pod_ifname);
	rtnl_link_set_mtu(peer, (unsigned int)rq->mtu);
	rtnl_link_set_addr(peer, pmac);
	rtnl_link_set_ns_fd(peer, rq->netns_fd);
	rtnl_link_put(peer); /* the reference get_peer took */
	return tg_nl_to_errno(rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL));
}

/*
 * Brings the pod end up. no_ipv6_ll: without an IPv6 link-local address.
 * Tollgate gives pods no IPv6 and drops what they send of it; with an
 * address the pod's kernel would send MLD reports, DAD and router
 * solicitations on its own, counted as spoofed for every pod. The mode
 * goes in with the flags: the address is made only once the link is
 * operationally up (after the link watcher ran), by then the mode is none.
 */
static int pod_link_up(struct nl_sock *sk, int ifindex, bool no_ipv6_ll)
{
	_cleanup_link_ struct rtnl_link *chg = rtnl_link_alloc();
	_cleanup_link_ struct rtnl_link *cur = rtnl_link_alloc();
	int r;

	if (!chg || !cur)
		return -ENOMEM;
	rtnl_link_set_ifindex(cur, ifindex);
	rtnl_link_set_flags(chg, IFF_UP);
	r = no_ipv6_ll ? rtnl_link_inet6_set_addr_gen_mode(chg, IN6_ADDR_GEN_MODE_NONE) : 0;
	if (r == 0)
		r = rtnl_link_change(sk, cur, chg, 0);
	return tg_nl_to_errno(r);
}

static int pod_side(const struct plumb_req *rq, struct tg_err *e)
{
	_cleanup_nl_sock_ struct nl_sock *own = NULL;
	_cleanup_rtaddr_ struct rtnl_addr *addr = NULL;
	_cleanup_nl_addr_ struct nl_addr *local = NULL;
	struct nl_sock *sk = rq->pod_sk;
	unsigned int flags = 0;
	int ifindex, r;

	if (!sk) {
		r = tg_nl_route_open_in(rq->netns_fd, &own);
		if (r < 0)
			return tg_fail(e, CNI_ERR_IO, r,
				       "cannot enter the pod's network namespace: %s",
				       strerror(-r));
		sk = own;
	}
	r = plumb_ifindex(sk, rq->pod_ifname, &flags, &ifindex);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "pod interface %s vanished: %s", rq->pod_ifname,
			       strerror(-r));
	if (!(flags & IFF_UP)) {
		r = pod_link_up(sk, ifindex, true);
		/* No IPv6 on this kernel, or an MTU below IPv6's minimum: no address to keep off. */
		if (r == -EAFNOSUPPORT)
			r = pod_link_up(sk, ifindex, false);
		if (r < 0)
			return tg_fail_kernel(e, r, "cannot bring %s up in the pod",
					      rq->pod_ifname);
	}
	addr = rtnl_addr_alloc();
	local = tg_nl_addr_ip4(rq->ip, 32);
	if (!addr || !local)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	rtnl_addr_set_ifindex(addr, ifindex);
	rtnl_addr_set_family(addr, AF_INET);
	rtnl_addr_set_local(addr, local);
	rtnl_addr_set_prefixlen(addr, 32);
	r = tg_nl_to_errno(rtnl_addr_add(sk, addr, NLM_F_REPLACE));
	if (r < 0)
		return tg_fail_kernel(e, r, "cannot add the pod address on %s", rq->pod_ifname);
	r = TG_FAILPOINT("add.pod.addr.after", e);
	if (r < 0)
		return r;
	r = add_neigh(sk, ifindex, NODE_GATEWAY, node_host_mac);
	if (r < 0)
		return tg_fail_kernel(e, r,
				      "cannot add the gateway's neighbour entry on %s in the pod",
				      rq->pod_ifname);
	r = add_route(sk, ifindex, NODE_GATEWAY, 32, 0, RT_SCOPE_LINK);
	if (r < 0)
		return tg_fail_kernel(e, r, "cannot add the on-link route to 169.254.1.1 on %s",
				      rq->pod_ifname);
	r = add_route(sk, ifindex, 0, 0, NODE_GATEWAY, RT_SCOPE_UNIVERSE);
	if (r < 0)
		return tg_fail_kernel(e, r,
				      "cannot add the pod's default route via 169.254.1.1 on %s",
				      rq->pod_ifname);
	return 0;
}

int plumb_add(struct nl_sock *sk, const struct plumb_req *rq, struct tg_err *e)
{
	int64_t t = time_mono_ns();
	int r, ifindex = 0;

	r = TG_FAILPOINT("add.veth.before", e);
	if (r < 0)
		return r;
	r = create_veth(sk, rq);
	if (r == -EEXIST) {
		/* A veth left by a crashed ADD, or the pod already has this ifname. */
		int gone = plumb_del(sk, rq->host_ifname, NULL);

		r = gone == 0 ? create_veth(sk, rq) : r;
	}
	if (r == -EEXIST)
		return tg_fail(
			e, CNI_ERR_IO, -EEXIST,
			"cannot create the veth pair: the pod already has an interface named %s",
			rq->pod_ifname);
	if (r < 0)
		return tg_fail_kernel(e, r, "cannot create veth %s", rq->host_ifname);
	r = plumb_ifindex(sk, rq->host_ifname, NULL, &ifindex);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "host veth %s vanished: %s", rq->host_ifname,
			       strerror(-r));
	t = step_done(STEP_VETH, t);
	r = TG_FAILPOINT("add.veth.after", e);
	if (r == 0)
		r = pod_side(rq, e);
	t = step_done(STEP_POD, t);
	if (r == 0)
		r = TG_FAILPOINT("add.pod.after", e);
	if (r < 0)
		return r;
	r = add_neigh(sk, ifindex, rq->ip, rq->pod_mac);
	if (r < 0)
		return tg_fail_kernel(e, r, "cannot add the pod's neighbour entry on %s",
				      rq->host_ifname);
	r = TG_FAILPOINT("add.host.neigh.after", e);
	if (r < 0)
		return r;
	r = add_route(sk, ifindex, rq->ip, 32, 0, RT_SCOPE_LINK);
	step_done(STEP_ROUTES, t);
	if (r < 0)
		return tg_fail_kernel(e, r, "cannot add the host route via %s", rq->host_ifname);
	return TG_FAILPOINT("add.host.route.after", e);
}

int plumb_del(struct nl_sock *sk, const char *host_ifname, struct tg_err *e)
{
	_cleanup_link_ struct rtnl_link *link = rtnl_link_alloc();
	int r;

	if (!link)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	rtnl_link_set_name(link, host_ifname);
	r = tg_nl_to_errno(rtnl_link_delete(sk, link));
	if (r == -ENODEV || r == -ENOENT)
		return 0;
	if (r < 0)
		return tg_fail_kernel(e, r, "cannot delete veth %s", host_ifname);
	return 0;
}

int node_pod_ifname_check(int netns_fd, const char *container_id, const char *ifname,
			  struct nl_sock **ret_sk, struct tg_err *e)
{
	_cleanup_link_ struct rtnl_link *l = NULL;
	struct nl_addr *mac;
	uint8_t mine[6];
	int r = tg_nl_route_open_in(netns_fd, ret_sk);

	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot enter the pod's network namespace: %s",
			       strerror(-r));
	r = tg_nl_to_errno(rtnl_link_get_kernel(*ret_sk, 0, ifname, &l));
	if (r == -ENODEV || r == -ENOENT)
		return 0;
	if (r < 0)
		return tg_fail_kernel(e, r, "cannot read the pod's interfaces");
	/* This attachment's own pod end (a repeated ADD) carries the MAC its hash gives. */
	node_pod_mac(container_id, ifname, mine);
	mac = rtnl_link_get_addr(l);
	if (!mac || nl_addr_get_len(mac) != 6 || memcmp(nl_addr_get_binary_addr(mac), mine, 6) != 0)
		return tg_fail(
			e, CNI_ERR_IO, -EEXIST,
			"cannot create the veth pair: the pod already has an interface named %s",
			ifname);
	return 0;
}

int plumb_del_group(struct nl_sock *sk, uint32_t group)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct nl_msg *m = nlmsg_alloc_simple(RTM_DELLINK, 0);
	int r = -ENOMEM;

	if (m && nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO) == 0 &&
	    nla_put_u32(m, IFLA_GROUP, group) == 0)
		r = tg_nl_to_errno(nl_send_sync(sk, m)); /* frees m */
	else
		nlmsg_free(m);
	return r == -ENOENT ? -ENODEV : r;
}

static bool has_route(struct nl_sock *sk, int ifindex, uint32_t dst_ip, int prefix, uint32_t gw)
{
	_cleanup_nl_cache_ struct nl_cache *routes = NULL;
	struct nl_object *obj;
	bool found = false;

	if (rtnl_route_alloc_cache(sk, AF_INET, 0, &routes) < 0)
		return false;
	for (obj = nl_cache_get_first(routes); obj && !found; obj = nl_cache_get_next(obj)) {
		struct rtnl_route *rt = (struct rtnl_route *)obj;
		struct nl_addr *dst = rtnl_route_get_dst(rt);
		struct rtnl_nexthop *nh;
		uint32_t be;

		if (rtnl_route_get_table(rt) != RT_TABLE_MAIN || rtnl_route_get_nnexthops(rt) != 1)
			continue;
		if ((dst ? nl_addr_get_prefixlen(dst) : 0) != (unsigned)prefix)
			continue;
		if (prefix) {
			memcpy(&be, nl_addr_get_binary_addr(dst), 4);
			if (ntohl(be) != dst_ip)
				continue;
		}
		nh = rtnl_route_nexthop_n(rt, 0);
		if (rtnl_route_nh_get_ifindex(nh) != ifindex)
			continue;
		if (gw) {
			struct nl_addr *via = rtnl_route_nh_get_gateway(nh);

			if (!via || nl_addr_get_len(via) != 4)
				continue;
			memcpy(&be, nl_addr_get_binary_addr(via), 4);
			if (ntohl(be) != gw)
				continue;
		}
		found = true;
	}
	return found;
}

static bool has_addr(struct nl_sock *sk, int ifindex, uint32_t ip)
{
	_cleanup_nl_cache_ struct nl_cache *addrs = NULL;
	struct nl_object *obj;
	bool found = false;

	if (rtnl_addr_alloc_cache(sk, &addrs) < 0)
		return false;
	for (obj = nl_cache_get_first(addrs); obj && !found; obj = nl_cache_get_next(obj)) {
		struct rtnl_addr *a = (struct rtnl_addr *)obj;
		struct nl_addr *local = rtnl_addr_get_local(a);
		uint32_t be;

		if (rtnl_addr_get_ifindex(a) != ifindex || rtnl_addr_get_family(a) != AF_INET ||
		    !local || rtnl_addr_get_prefixlen(a) != 32)
			continue;
		memcpy(&be, nl_addr_get_binary_addr(local), 4);
		found = ntohl(be) == ip;
	}
	return found;
}

/* CHECK's answer: "drift: <what>", code 100. */
#define drift(e, fmt, ...) tg_fail(e, TG_ERR_DRIFT, -ENOENT, "drift: " fmt, ##__VA_ARGS__)

int plumb_check(struct nl_sock *sk, const struct plumb_req *rq, struct tg_err *e)
{
	_cleanup_nl_sock_ struct nl_sock *psk = NULL;
	char ip[IP4_STRLEN];
	unsigned int flags;
	int ifindex, pidx, r;

	ip4_format(rq->ip, ip);
	if (plumb_ifindex(sk, rq->host_ifname, &flags, &ifindex) < 0)
		return drift(e, "host veth %s is missing", rq->host_ifname);
	if (!(flags & IFF_UP))
		return drift(e, "host veth %s is down", rq->host_ifname);
	if (!has_route(sk, ifindex, rq->ip, 32, 0))
		return drift(e, "host route %s/32 dev %s is missing", ip, rq->host_ifname);
	r = tg_nl_route_open_in(rq->netns_fd, &psk);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot enter the pod's network namespace: %s",
			       strerror(-r));
	if (plumb_ifindex(psk, rq->pod_ifname, &flags, &pidx) < 0)
		return drift(e, "pod interface %s is missing", rq->pod_ifname);
	if (!(flags & IFF_UP))
		return drift(e, "pod interface %s is down", rq->pod_ifname);
	if (!has_addr(psk, pidx, rq->ip))
		return drift(e, "pod address %s/32 is missing on %s", ip, rq->pod_ifname);
	if (!has_route(psk, pidx, 0, 0, NODE_GATEWAY))
		return drift(e, "the pod's default route via 169.254.1.1 dev %s is missing",
			     rq->pod_ifname);
	return 0;
}
