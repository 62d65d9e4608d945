// SPDX-License-Identifier: Apache-2.0
/*
 * The kernel's extended-ack text (lib/nl.c): parsed from error messages
 * built here by hand. Its way from a tc request the kernel refuses to the
 * CNI error object is tests/kernel/ktest_nlerr.c's (root, a network
 * namespace of its own).
 */
#include <errno.h>
#include <linux/netlink.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lib/nl.h"
#include "tests/unit/helpers.h"

/* An NLMSG_ERROR answer to a request of `req_len` bytes, with TLVs after it. */
struct ack_buf {
	union {
		struct nlmsghdr nlh;
		char bytes[512];
	};
	size_t len;
};

static void ack_begin(struct ack_buf *b, int error, bool capped, size_t req_payload)
{
	struct nlmsgerr *err;
	size_t off;

	memset(b, 0, sizeof(*b));
	b->nlh.nlmsg_type = NLMSG_ERROR;
	b->nlh.nlmsg_flags = NLM_F_ACK_TLVS | (capped ? NLM_F_CAPPED : 0);
	err = NLMSG_DATA(&b->nlh);
	err->error = error;
	err->msg.nlmsg_len = (uint32_t)(NLMSG_HDRLEN + req_payload);
	err->msg.nlmsg_type = RTM_NEWQDISC;
	/* The request's payload, when not capped: bytes the parser must step over. */
	off = sizeof(*err) + (capped ? 0 : req_payload);
	memset((char *)err + sizeof(*err), 0x5a, capped ? 0 : req_payload);
	b->len = NLMSG_HDRLEN + NLMSG_ALIGN(off);
	b->nlh.nlmsg_len = (uint32_t)b->len;
}

static void ack_attr(struct ack_buf *b, uint16_t type, const void *data, size_t n)
{
	struct nlattr *a = (struct nlattr *)(b->bytes + b->len);

	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + n);
	memcpy((char *)a + NLA_HDRLEN, data, n);
	b->len += NLA_ALIGN(a->nla_len);
	b->nlh.nlmsg_len = (uint32_t)b->len;
}

static void t_capped(void **state)
{
	static const char text[] = "Specified class not found";
	uint32_t offs = 20;
	struct ack_buf b;
	char out[256];

	(void)state;
	ack_begin(&b, -ENOENT, true, 24);
	/* Other attributes before and after the message are skipped. */
	ack_attr(&b, NLMSGERR_ATTR_OFFS, &offs, sizeof(offs));
	ack_attr(&b, NLMSGERR_ATTR_MSG, text, sizeof(text));
	ack_attr(&b, NLMSGERR_ATTR_OFFS, &offs, sizeof(offs));
	assert_int_equal(nl_ext_ack_msg(&b.nlh, b.len, out, sizeof(out)), strlen(text));
	assert_string_equal(out, text);
}

static void t_uncapped(void **state)
{
	static const char text[] = "Exclusivity flag on, cannot modify";
	struct ack_buf b;
	char out[256];

	(void)state;
	/* An unaligned request: the TLVs start at the next 4-byte boundary. */
	ack_begin(&b, -EEXIST, false, 37);
	ack_attr(&b, NLMSGERR_ATTR_MSG, text, sizeof(text));
	nl_ext_ack_msg(&b.nlh, b.len, out, sizeof(out));
	assert_string_equal(out, text);
	/* Cut to the buffer it is given, still a string. */
	nl_ext_ack_msg(&b.nlh, b.len, out, 8);
	assert_string_equal(out, "Exclusi");
}

static void t_none(void **state)
{
	static const char text[] = "not a string";
	struct ack_buf b;
	char out[64] = "stale";

	(void)state;
	/* No TLVs flagged: nothing, whatever follows. */
	ack_begin(&b, -EINVAL, true, 0);
	ack_attr(&b, NLMSGERR_ATTR_MSG, "x", 2);
	b.nlh.nlmsg_flags &= (uint16_t)~NLM_F_ACK_TLVS;
	assert_int_equal(nl_ext_ack_msg(&b.nlh, b.len, out, sizeof(out)), 0);
	assert_string_equal(out, "");
	/* A message without its NUL inside the attribute. */
	ack_begin(&b, -EINVAL, true, 0);
	ack_attr(&b, NLMSGERR_ATTR_MSG, text, strlen(text));
	assert_int_equal(nl_ext_ack_msg(&b.nlh, b.len, out, sizeof(out)), 0);
	/* A header claiming more than was received. */
	ack_begin(&b, -EINVAL, true, 0);
	ack_attr(&b, NLMSGERR_ATTR_MSG, "x", 2);
	assert_int_equal(nl_ext_ack_msg(&b.nlh, b.len - 4, out, sizeof(out)), 0);
	/* A request length that points past the message. */
	ack_begin(&b, -EINVAL, false, 8);
	ack_attr(&b, NLMSGERR_ATTR_MSG, "x", 2);
	((struct nlmsgerr *)NLMSG_DATA(&b.nlh))->msg.nlmsg_len = 4000;
	assert_int_equal(nl_ext_ack_msg(&b.nlh, b.len, out, sizeof(out)), 0);
	/* Not an error message at all. */
	ack_begin(&b, 0, true, 0);
	ack_attr(&b, NLMSGERR_ATTR_MSG, "x", 2);
	b.nlh.nlmsg_type = RTM_NEWLINK;
	assert_int_equal(nl_ext_ack_msg(&b.nlh, b.len, out, sizeof(out)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_capped),
		cmocka_unit_test(t_uncapped),
		cmocka_unit_test(t_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
