// SPDX-License-Identifier: Apache-2.0
/* The kernel's extended-ack text (lib/extack.h). */
#include <stdio.h>
#include <string.h>

#include <linux/netlink.h>

#include "lib/extack.h"

size_t tg_nl_ext_ack_msg(const struct nlmsghdr *nlh, size_t len, char *buf, size_t size)
{
	const struct nlmsgerr *err;
	const struct nlattr *a;
	size_t off, end;

	if (size)
		buf[0] = '\0';
	if (len < NLMSG_HDRLEN + sizeof(*err) || nlh->nlmsg_len > len ||
	    nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*err) || nlh->nlmsg_type != NLMSG_ERROR ||
	    !(nlh->nlmsg_flags & NLM_F_ACK_TLVS) || size == 0)
		return 0;
	err = NLMSG_DATA(nlh);
	/* The request comes back whole unless the socket asked for it capped. */
	off = sizeof(*err);
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) {
		if (err->msg.nlmsg_len < sizeof(err->msg))
			return 0;
		off += err->msg.nlmsg_len - sizeof(err->msg);
	}
	off = NLMSG_ALIGN(off);
	end = nlh->nlmsg_len - NLMSG_HDRLEN;
	/* every attribute checked against what is left before it is read */
	while (off + NLA_HDRLEN <= end) {
		size_t alen, dlen;
		const char *text;

		a = (const struct nlattr *)((const char *)err + off);
		alen = a->nla_len;
		if (alen < NLA_HDRLEN || alen > end - off)
			return 0;
		dlen = alen - NLA_HDRLEN;
		text = (const char *)a + NLA_HDRLEN;
		if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG && dlen > 0) {
			/* A string attribute: NUL-terminated inside its length. */
			if (strnlen(text, dlen) == dlen)
				return 0;
			snprintf(buf, size, "%s", text);
			return strlen(buf);
		}
		off += NLA_ALIGN(alen);
	}
	return 0;
}
