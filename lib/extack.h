/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_EXTACK_H
#define TG_LIB_EXTACK_H

/*
 * The kernel's extended ack: the text it sends with a refusal
 * (NETLINK_EXT_ACK), read from the NLMSG_ERROR message itself, for the
 * route sockets (libnl, lib/nl.c) and nftables' batches (libmnl,
 * accounting/batch.c) alike. Plain uapi: no netlink library's headers.
 */

#include <stddef.h>

struct nlmsghdr;
/*
 * The NLMSGERR_ATTR_MSG text of an NLMSG_ERROR message of len bytes (capped
 * or carrying the whole request), copied into buf; "" when it has none.
 * Returns its length.
 */
size_t tg_nl_ext_ack_msg(const struct nlmsghdr *nlh, size_t len, char *buf, size_t size);

#endif
