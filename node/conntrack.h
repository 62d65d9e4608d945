/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_NODE_CONNTRACK_H
#define TG_NODE_CONNTRACK_H

/*
 * The node's conntrack table (IPv4, every zone), through
 * libnetfilter_conntrack: walked (the exporter's internet-connection gauge)
 * and pruned. A flow outlives the pod it was made for: a hostPort's DNAT or
 * a masquerade binding keeps sending the released address whatever a peer
 * sends on, to whoever holds the address next. So every flow that involves
 * an address goes when the address is released, and a UDP or SCTP hostPort's
 * flows go when it is mapped and unmapped (kubelet does the same), so that
 * an older flow to the node's port cannot bypass the new mapping.
 * Errors are negative errno; a table the kernel has not loaded is empty.
 */

#include <stdint.h>

#include "lib/hostport.h"

struct node_ct_flow {
	uint8_t proto;		     /* IPPROTO_* */
	uint32_t orig_src, orig_dst; /* host order */
	uint32_t reply_src, reply_dst;
	uint16_t orig_dport; /* host order; 0 without ports */
	int tcp_state;	     /* TCP_CONNTRACK_*; -1: not TCP, or not known */
};

typedef void (*node_ct_visit_fn)(const struct node_ct_flow *f, void *ctx);
/* Every IPv4 flow of the table, once. */
int node_ct_walk(node_ct_visit_fn fn, void *ctx);
/*
 * Deletes, in one dump, every flow with `ip` (0: none) as source or
 * destination of either direction (a hostPort's DNAT, a masquerade
 * binding, a flow straight to it), and every flow to a UDP or SCTP hostPort
 * of `ports` (NULL: none; TCP ones need nothing, a new connection finds the
 * new mapping): its protocol and destination port, to its hostIP or,
 * without one, to any address of the node outside 127/8 and 169.254/16
 * (where the mappings apply). Returns how many went.
 */
int node_ct_forget(uint32_t ip, const struct hostports *ports);

#endif
