// SPDX-License-Identifier: Apache-2.0
/* nftables transport: atomic batches over libmnl, answers and extack collected. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <linux/netfilter.h>
#include <libnftnl/common.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>

#include "accounting/internal.h"
#include "lib/extack.h"
#include "lib/failpoint.h"

/* Kernel memory an acknowledgement takes in the receive queue (an skb of its own), with room. */
#define ACK_TRUESIZE 1024u
/* Answers the default receive buffer (about 200 kB) surely holds. */
#define ACKS_IN_DEFAULT_RCVBUF 128u

#ifdef TG_FAILPOINTS
/*
 * Failpoint nft.open.before: this open fails, and the kernel has lost
 * nf_tables from then on: every later open in the process fails as on a
 * kernel without it (mnl_socket_open: EPROTONOSUPPORT), naming the point.
 */
static bool nft_absent;

static int nft_open_failpoint(struct tg_err *e)
{
	if (!nft_absent) {
		int r = TG_FAILPOINT("nft.open.before", e);

		nft_absent = r < 0;
		return r;
	}
	return tg_fail(e, CNI_ERR_IO, -EPROTONOSUPPORT,
		       "failpoint nft.open.before: cannot open nftables netlink socket: %s",
		       strerror(EPROTONOSUPPORT));
}
#else
#define nft_open_failpoint(e) 0
#endif

int acct_nft_open(struct acct_nft_conn *c, size_t bufsize, struct tg_err *e)
{
	int one = 1;
	int r = nft_open_failpoint(e);

	c->nl = NULL;
	if (r < 0)
		return r;
	c->nl = mnl_socket_open(NETLINK_NETFILTER);
	if (!c->nl)
		return tg_fail(e, CNI_ERR_IO, -errno, "cannot open nftables netlink socket: %m");
	if (mnl_socket_bind(c->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		r = -errno;
		mnl_socket_close(c->nl);
		c->nl = NULL;
		return tg_fail(e, CNI_ERR_IO, r, "cannot bind nftables netlink socket: %s",
			       strerror(-r));
	}
	/* Ask for the kernel's own words on failures (extended ack), without our request echoed. */
	mnl_socket_setsockopt(c->nl, NETLINK_EXT_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(c->nl, NETLINK_CAP_ACK, &one, sizeof(one));
	if (bufsize > 200000) {
		/* A rebuild of thousands of pods is one large message: make room (root may force). */
		int sz = (int)(bufsize + 65536);

		setsockopt(mnl_socket_get_fd(c->nl), SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz));
	}
	c->portid = mnl_socket_get_portid(c->nl);
	return 0;
}

void acct_nft_close(struct acct_nft_conn *c)
{
	if (c->nl)
		mnl_socket_close(c->nl);
	c->nl = NULL;
}

struct acct_batch *acct_batch_new(size_t size)
{
	struct acct_batch *bt = calloc(1, sizeof(*bt));

	if (!bt)
		return NULL;
	/* Zeroed so that attribute padding never carries stale bytes to the kernel. */
	bt->buf = calloc(1, size);
	if (!bt->buf) {
		free(bt);
		return NULL;
	}
	bt->size = size;
	return bt;
}

static void batch_stop(struct acct_batch *bt)
{
	if (bt->b)
		mnl_nlmsg_batch_stop(bt->b);
	bt->b = NULL;
}

void acct_batch_free(struct acct_batch *bt)
{
	if (!bt)
		return;
	batch_stop(bt);
	free(bt->buf);
	free(bt);
}

/*
 * Sequence numbers unique within the process: a batch counts only answers
 * that carry one of its own, so a late answer to an earlier batch on the
 * same socket (one that timed out, or the pre-6.3 fallback's first try)
 * is never taken for one of the next batch's.
 */
static uint32_t next_seq;

void acct_batch_start(struct acct_batch *bt)
{
	batch_stop(bt);
	memset(bt->buf, 0, bt->size);
	if (!next_seq)
		next_seq = (uint32_t)time(NULL) | 1u;
	bt->seq = bt->first_seq = next_seq;
	bt->acks = 0;
	bt->full = false;
	/* libmnl writes a message that crosses the limit before refusing it: limit = half. */
	bt->b = mnl_nlmsg_batch_start(bt->buf, bt->size / 2);
	nftnl_batch_begin(mnl_nlmsg_batch_current(bt->b), bt->seq++);
	mnl_nlmsg_batch_next(bt->b);
}

struct nlmsghdr *acct_batch_msg_family(struct acct_batch *bt, uint16_t type, uint16_t flags,
				       uint16_t family)
{
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), type, family,
						     flags | NLM_F_ACK, bt->seq++);

	bt->acks++;
	return nlh;
}

struct nlmsghdr *acct_batch_msg(struct acct_batch *bt, uint16_t type, uint16_t flags)
{
	return acct_batch_msg_family(bt, type, flags, NFPROTO_INET);
}

void acct_batch_next(struct acct_batch *bt)
{
	if (!mnl_nlmsg_batch_next(bt->b))
		bt->full = true;
}

/* True for an answer to one of this batch's messages (its begin and end included). */
static bool answers_batch(const struct nlmsghdr *nlh, const struct acct_nft_conn *c,
			  const struct acct_batch *bt)
{
	return nlh->nlmsg_type == NLMSG_ERROR && nlh->nlmsg_pid == c->portid &&
	       nlh->nlmsg_seq - bt->first_seq < bt->seq - bt->first_seq;
}

/*
 * Sends the batch and collects one answer per message. nfnetlink handles a
 * batch inside sendmsg(), so every answer is queued when it returns: once
 * the kernel has reported a failure, an empty queue means no more answers
 * are coming (a batch it refuses as a whole, or one that ran out of memory,
 * is answered by a single error, not one per message).
 */
int acct_batch_send(struct acct_nft_conn *c, struct acct_batch *bt, char *why, size_t why_len)
{
	char buf[ACCT_NFT_RECV_SIZE];
	unsigned int got = 0;
	int first = 0;

	if (bt->full)
		return -ENOBUFS;
	nftnl_batch_end(mnl_nlmsg_batch_current(bt->b), bt->seq++);
	acct_batch_next(bt);
	if (bt->full)
		return -ENOBUFS;
	next_seq = bt->seq + 1;
	if (bt->acks > ACKS_IN_DEFAULT_RCVBUF) {
		/*
		 * nfnetlink answers every message of the batch before sendmsg()
		 * returns: the receive buffer must hold every answer at once, or
		 * the kernel drops them and reports ENOBUFS (a rebuild of a few
		 * hundred pods is thousands of messages).
		 */
		int sz = (int)(bt->acks * ACK_TRUESIZE);

		if (setsockopt(mnl_socket_get_fd(c->nl), SOL_SOCKET, SO_RCVBUFFORCE, &sz,
			       sizeof(sz)) < 0)
			setsockopt(mnl_socket_get_fd(c->nl), SOL_SOCKET, SO_RCVBUF, &sz,
				   sizeof(sz));
	}
	if (mnl_socket_sendto(c->nl, mnl_nlmsg_batch_head(bt->b), mnl_nlmsg_batch_size(bt->b)) < 0)
		return -errno;
	while (got < bt->acks) {
		struct pollfd p = { .fd = mnl_socket_get_fd(c->nl), .events = POLLIN };
		struct nlmsghdr *nlh;
		ssize_t n;
		int len;

		if (poll(&p, 1, first ? 0 : 5000) <= 0)
			return first ? first : -ETIMEDOUT;
		n = mnl_socket_recvfrom(c->nl, buf, sizeof(buf));
		if (n < 0)
			return first ? first : -errno;
		len = (int)n;
		for (nlh = (struct nlmsghdr *)buf; mnl_nlmsg_ok(nlh, len);
		     nlh = mnl_nlmsg_next(nlh, &len)) {
			const struct nlmsgerr *err;

			if (!answers_batch(nlh, c, bt))
				continue;
			got++;
			err = mnl_nlmsg_get_payload(nlh);
			if (err->error && !first) {
				first = err->error;
				if (why)
					tg_nl_ext_ack_msg(nlh, nlh->nlmsg_len, why, why_len);
			}
		}
	}
	return first;
}

int acct_nft_get(struct acct_nft_conn *c, uint16_t type,
		 void (*build)(struct nlmsghdr *, const void *), const void *arg)
{
	char buf[ACCT_NFT_RECV_SIZE] = { 0 };
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, type, NFPROTO_INET, NLM_F_ACK, 1);

	build(nlh, arg);
	return acct_nft_request(c, buf, sizeof(buf), NULL, NULL);
}

static int request(struct acct_nft_conn *c, char *buf, size_t size, mnl_cb_t cb, void *arg,
		   bool keep_interrupted)
{
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
	uint32_t seq = nlh->nlmsg_seq;

	if (mnl_socket_sendto(c->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(c->nl, buf, size);
		int r, left = (int)n;

		if (n < 0)
			return -errno;
		/* libmnl refuses a message flagged interrupted before cb sees it */
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf;
		     keep_interrupted && mnl_nlmsg_ok(h, left); h = mnl_nlmsg_next(h, &left))
			h->nlmsg_flags &= (uint16_t)~NLM_F_DUMP_INTR;
		errno = 0;
		r = mnl_cb_run(buf, (size_t)n, seq, c->portid, cb, arg);
		if (r < 0)
			return errno ? -errno : -EIO;
		if (r == MNL_CB_STOP)
			return 0;
	}
}

int acct_nft_request(struct acct_nft_conn *c, char *buf, size_t size, mnl_cb_t cb, void *arg)
{
	return request(c, buf, size, cb, arg, false);
}

int acct_nft_request_all(struct acct_nft_conn *c, char *buf, size_t size, mnl_cb_t cb, void *arg)
{
	return request(c, buf, size, cb, arg, true);
}

int acct_nft_fail(struct tg_err *e, int r, const char *what, const char *why)
{
	bool first = e && e->code == 0;

	tg_fail(e, CNI_ERR_IO, r, "nftables: %s failed: %s%s%s", what, strerror(-r),
		why && why[0] ? ": " : "", why ? why : "");
	if (first && why)
		snprintf(e->kernel, sizeof(e->kernel), "%s", why);
	return r < 0 ? r : -r;
}
