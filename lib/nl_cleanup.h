/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_NL_CLEANUP_H
#define TG_LIB_NL_CLEANUP_H

/*
 * Scoped cleanup of libnl objects: a variable declared with one of these
 * drops its reference when it goes out of scope, NULL or not. Hand one out
 * with TAKE_PTR.
 */

#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/socket.h>
#include <netlink/route/action.h>
#include <netlink/route/addr.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/neighbour.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/route.h>

#include "lib/cleanup.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct nl_addr *, nl_addr_put)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct nl_sock *, nl_socket_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct nl_cache *, nl_cache_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_link *, rtnl_link_put)
/* A veth made by rtnl_link_veth_alloc: the link and its peer together. */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_link *, rtnl_link_veth_release)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_neigh *, rtnl_neigh_put)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_route *, rtnl_route_put)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_nexthop *, rtnl_route_nh_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_addr *, rtnl_addr_put)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_class *, rtnl_class_put)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_qdisc *, rtnl_qdisc_put)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_cls *, rtnl_cls_put)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct rtnl_act *, rtnl_act_put)

#define _cleanup_nl_addr_ _cleanup_(nl_addr_putp)
#define _cleanup_nl_sock_ _cleanup_(nl_socket_freep)
#define _cleanup_nl_cache_ _cleanup_(nl_cache_freep)
#define _cleanup_link_ _cleanup_(rtnl_link_putp)
#define _cleanup_veth_ _cleanup_(rtnl_link_veth_releasep)
#define _cleanup_neigh_ _cleanup_(rtnl_neigh_putp)
#define _cleanup_route_ _cleanup_(rtnl_route_putp)
#define _cleanup_nexthop_ _cleanup_(rtnl_route_nh_freep)
#define _cleanup_rtaddr_ _cleanup_(rtnl_addr_putp)
#define _cleanup_class_ _cleanup_(rtnl_class_putp)
#define _cleanup_qdisc_ _cleanup_(rtnl_qdisc_putp)
#define _cleanup_cls_ _cleanup_(rtnl_cls_putp)
#define _cleanup_act_ _cleanup_(rtnl_act_putp)

#endif
