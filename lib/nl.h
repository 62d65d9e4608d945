/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_NL_H
#define TG_LIB_NL_H

/* libnl-route helpers shared by the plugin, the CLI and the exporter. */

#include <stdint.h>
#include <netlink/netlink.h>

#include "lib/err.h"
#include "lib/extack.h"

/*
 * The one place where libnl's -NLE_* codes become negative errno values:
 * every libnl call's result goes through it where the call is made, so no
 * -NLE_* value travels further than that line.
 */
int tg_nl_to_errno(int nlerr);
/*
 * A connected NETLINK_ROUTE socket in the current network namespace, with
 * extended acks on (NETLINK_EXT_ACK, NETLINK_CAP_ACK): the text the kernel
 * gives with a refusal is kept for tg_fail_kernel.
 */
int tg_nl_route_open(struct nl_sock **ret);
/* A connected NETLINK_ROUTE socket inside the network namespace `netns_fd`. */
int tg_nl_route_open_in(int netns_fd, struct nl_sock **ret);
/* An nl_addr for an IPv4 host-order address with a prefix length. */
struct nl_addr *tg_nl_addr_ip4(uint32_t ip, int prefix);

/* The interface of the IPv4 default route (one FIB lookup, no dump); 0 when none. */
int tg_nl_default_route_ifindex(struct nl_sock *sk, int *ret);

/*
 * Records a failed kernel step, CNI code 5: "<what>: <strerror>", followed by
 * ": <the kernel's text>" when the last refusal the kernel acked on this
 * thread's route sockets carried one for the same error (the text is then
 * in e->kernel too, and used up). Returns neg_errno.
 */
int tg_fail_kernel(struct tg_err *e, int neg_errno, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Opens a network namespace path, checking that it really is one. */
int netns_open(const char *path, int *ret_fd);

#endif
