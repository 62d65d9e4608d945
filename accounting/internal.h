/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_ACCOUNTING_INTERNAL_H
#define TG_ACCOUNTING_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/set.h>

#include "accounting/accounting.h"

#define SET_INTERNAL "internal"
#define SET_PODS "pods"
#define SET_MASQ "masq"
#define MAP_EGRESS_CLASS "egress_class"
#define NFT_TYPE_IPADDR 7 /* nft's datatype id for ipv4_addr, so `nft list` prints addresses */
#define NFT_TYPE_CLASSID 23
#define NFT_RECV_SIZE 16384 /* MNL_SOCKET_BUFFER_SIZE is a runtime value (page size) */

/* Kernel 6.3's "delete if present" messages; older uapi headers lack them. */
#ifndef NFT_MSG_DESTROYSETELEM
#define NFT_MSG_DESTROYSETELEM 30
#define NFT_MSG_DESTROYOBJ 31
#endif

/* The maps from a pod address to its counters, in the order of enum acct_class. */
extern const char *const acct_ns_maps[ACCT_CLASSES];
extern const char *const acct_pod_maps[ACCT_CLASSES];

/* ---- netlink transport (batch.c) ---- */

struct nft_conn {
	struct mnl_socket *nl;
	uint32_t portid;
};

struct batch {
	char *buf;
	size_t size;
	struct mnl_nlmsg_batch *b;
	uint32_t seq;
	unsigned int acks;	/* messages that asked for an answer */
	bool full;		/* a message did not fit: never send */
};

int nft_conn_open(struct nft_conn *c, size_t bufsize, struct tg_err *e);
void nft_conn_close(struct nft_conn *c);
struct batch *batch_new(size_t size);
void batch_free(struct batch *bt);
void batch_start(struct batch *bt);
struct nlmsghdr *batch_msg(struct batch *bt, uint16_t type, uint16_t flags);
void batch_next(struct batch *bt);
/* 0, or the first negative errno the kernel reported (its extack text in `why`). */
int batch_send(struct nft_conn *c, struct batch *bt, char *why, size_t why_len);
/* One non-dump request; 0 when the kernel answered with the object, -ENOENT when absent. */
int nft_get(struct nft_conn *c, uint16_t type, void (*build)(struct nlmsghdr *, const void *),
	    const void *arg);
/*
 * Sends the request built at the start of buf and runs cb (NULL: none) over
 * every answer until the last (ACK or end of dump), receiving into buf. 0, or
 * a negative errno: the kernel's, or -EIO when cb refused a message.
 */
int nft_request(struct nft_conn *c, char *buf, size_t size, mnl_cb_t cb, void *arg);
int nft_fail(struct tg_err *e, int r, const char *what, const char *why);

/* ---- the table (table.c) ---- */

/* Declares the whole table as `cfg` says, in the batch being built. */
int table_declare(struct batch *bt, const struct acct_config *cfg);
void set_add_key(struct nftnl_set *s, uint32_t ip_host, bool interval_end);
/* counter <name> {}: created when missing, never reset. */
int acct_put_counter(struct batch *bt, const char *name);

#endif
