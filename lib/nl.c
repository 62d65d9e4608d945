// SPDX-License-Identifier: Apache-2.0
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/addr.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/errno.h>
#include <netlink/socket.h>

#include "lib/cleanup.h"
#include "lib/nl.h"
#include "lib/util.h"

int tg_nl_to_errno(int nlerr)
{
	static const int map[][2] = {
		{ NLE_NOMEM, ENOMEM },
		{ NLE_EXIST, EEXIST },
		{ NLE_INVAL, EINVAL },
		{ NLE_RANGE, ERANGE },
		{ NLE_OPNOTSUPP, EOPNOTSUPP },
		{ NLE_AGAIN, EAGAIN },
		{ NLE_BUSY, EBUSY },
		{ NLE_NODEV, ENODEV },
		{ NLE_OBJ_NOTFOUND, ENOENT },
		{ NLE_PERM, EPERM },
		{ NLE_NOACCESS, EACCES },
		{ NLE_NOADDR, EADDRNOTAVAIL },
		{ NLE_SRCRT_NOSUPPORT, EOPNOTSUPP },
		{ NLE_MSGSIZE, EMSGSIZE },
		{ NLE_INTR, EINTR },
		{ NLE_BAD_SOCK, EBADF },
		{ NLE_AF_NOSUPPORT, EAFNOSUPPORT },
		{ NLE_PROTO_MISMATCH, EPROTO },
		{ NLE_NOATTR, ENODATA },
		{ NLE_MSG_TRUNC, EMSGSIZE },
		{ NLE_IMMUTABLE, EPERM },
		{ NLE_DUMP_INTR, EINTR },
	};
	int code = nlerr < 0 ? -nlerr : nlerr;

	if (code == 0)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(map); i++)
		if (map[i][0] == code)
			return -map[i][1];
	return -EIO;
}

/*
 * The kernel's text for the last refusal acked on this thread's route
 * sockets, with the error it came with (as tg_nl_to_errno gives it): what
 * tg_fail_kernel adds to the message of the step that failed.
 */
static __thread struct {
	int err;
	char msg[sizeof(((struct tg_err *)0)->kernel)];
} last_ack;

/* libnl's error callback: keep the kernel's text, then fail the request as libnl would. */
static int keep_ext_ack(struct sockaddr_nl *who, struct nlmsgerr *err, void *arg)
{
	/* libnl calls this with the payload of a whole NLMSG_ERROR message. */
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)((const char *)err - NLMSG_HDRLEN);

	last_ack.err = tg_nl_to_errno(nl_syserr2nlerr(err->error));
	tg_nl_ext_ack_msg(nlh, nlh->nlmsg_len, last_ack.msg, sizeof(last_ack.msg));
	return NL_STOP;
}

int tg_nl_route_open(struct nl_sock **ret)
{
	struct nl_sock *sk = nl_socket_alloc();
	int one = 1, r;

	if (!sk)
		return -ENOMEM;
	r = nl_connect(sk, NETLINK_ROUTE);
	if (r == 0)
		r = nl_socket_modify_err_cb(sk, NL_CB_CUSTOM, keep_ext_ack, NULL);
	if (r < 0) {
		nl_socket_free(sk);
		return tg_nl_to_errno(r);
	}
	/*
	 * Extended acks, as iproute2 asks for them: the kernel says why it
	 * refused (kernels before 4.12 ignore it and say nothing). Capped: the
	 * request does not come back with the answer.
	 */
	setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	*ret = sk;
	return 0;
}

int tg_nl_route_open_in(int netns_fd, struct nl_sock **ret)
{
	_cleanup_close_ int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int r, back;

	if (self < 0)
		return -errno;
	/* A socket stays in the namespace it was created in: enter, connect, come back. */
	if (setns(netns_fd, CLONE_NEWNET) < 0)
		return -errno;
	r = tg_nl_route_open(ret);
	back = setns(self, CLONE_NEWNET);
	if (back < 0) {
		/* Staying in the pod's namespace would be far worse than failing. */
		if (r == 0)
			nl_socket_free(*ret);
		return -errno;
	}
	return r;
}

struct nl_addr *tg_nl_addr_ip4(uint32_t ip, int prefix)
{
	uint32_t be = htonl(ip);
	struct nl_addr *a = nl_addr_build(AF_INET, &be, sizeof(be));

	if (a)
		nl_addr_set_prefixlen(a, prefix);
	return a;
}

int netns_open(const char *path, int *ret_fd)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET) {
		close(fd);
		return -EINVAL;
	}
	*ret_fd = fd;
	return 0;
}

static int route_oif_cb(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *nlh = nlmsg_hdr(msg);
	struct nlattr *tb[RTA_MAX + 1];

	if (nlh->nlmsg_type == RTM_NEWROUTE &&
	    nlmsg_parse(nlh, sizeof(struct rtmsg), tb, RTA_MAX, NULL) == 0 && tb[RTA_OIF])
		*(int *)arg = (int)nla_get_u32(tb[RTA_OIF]);
	return NL_STOP;
}

/*
 * The interface the node would use for internet traffic: one FIB lookup
 * (RTM_GETROUTE without NLM_F_DUMP; no packet is sent). A dump of the main
 * table would cost O(pods), since every pod has a /32 route there.
 */
int tg_nl_default_route_ifindex(struct nl_sock *sk, int *ret)
{
	struct rtmsg rtm = { .rtm_family = AF_INET, .rtm_dst_len = 32 };
	uint32_t probe = htonl(0xc6336401); /* 198.51.100.1 (TEST-NET-2), looked up only */
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETROUTE, 0);
	struct nl_cb *cb = NULL;
	int oif = 0, r = -NLE_NOMEM;

	if (!msg)
		return r;
	if (nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO) < 0 ||
	    nla_put_u32(msg, RTA_DST, probe) < 0)
		goto out;
	cb = nl_socket_get_cb(sk);
	if (!cb)
		goto out;
	{
		struct nl_cb *mine = nl_cb_clone(cb);

		nl_cb_put(cb);
		cb = mine;
	}
	if (!cb)
		goto out;
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, route_oif_cb, &oif);
	r = nl_send_auto(sk, msg);
	if (r >= 0)
		r = nl_recvmsgs(sk, cb);
	/* libnl asked for an ACK too: consume it so the next request reads its own answer. */
	if (r >= 0)
		r = nl_wait_for_ack(sk);
	if (r >= 0)
		*ret = oif;
out:
	if (cb)
		nl_cb_put(cb);
	nlmsg_free(msg);
	return r < 0 ? tg_nl_to_errno(r) : 0;
}

int tg_fail_kernel(struct tg_err *e, int neg_errno, const char *fmt, ...)
{
	int r = neg_errno < 0 ? neg_errno : -neg_errno;
	bool first = e && e->code == 0;
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (!last_ack.msg[0] || last_ack.err != r)
		return tg_fail(e, CNI_ERR_IO, r, "%s: %s", what, strerror(-r));
	tg_fail(e, CNI_ERR_IO, r, "%s: %s: %s", what, strerror(-r), last_ack.msg);
	if (first)
		snprintf(e->kernel, sizeof(e->kernel), "%s", last_ack.msg);
	last_ack.msg[0] = '\0';
	return r;
}
