// SPDX-License-Identifier: Apache-2.0
/*
 * The comments in rules' and sets' userdata: a declaration stamps its rules
 * with what made them, and reads the stamps back to tell what is right.
 */
#include <errno.h>
#include <string.h>
#include <libnftnl/rule.h>
#include <libnftnl/udata.h>

#include "accounting/internal.h"

int acct_rule_comment(struct nftnl_rule *r, const char *stamp)
{
	struct nftnl_udata_buf *u = nftnl_udata_buf_alloc(64);

	if (!u)
		return -ENOMEM;
	nftnl_udata_put_strz(u, NFTNL_UDATA_RULE_COMMENT, stamp);
	nftnl_rule_set_data(r, NFTNL_RULE_USERDATA, nftnl_udata_buf_data(u),
			    nftnl_udata_buf_len(u));
	nftnl_udata_buf_free(u);
	return 0;
}

struct udata_comment {
	uint8_t type;
	char *buf;
	size_t size;
	bool found;
};

static int udata_comment_cb(const struct nftnl_udata *attr, void *data)
{
	struct udata_comment *c = data;
	uint8_t len = nftnl_udata_len(attr);

	if (nftnl_udata_type(attr) != c->type)
		return 0;
	/* The last one counts; one that does not fit is none. */
	c->found = len < c->size;
	if (c->found) {
		memcpy(c->buf, nftnl_udata_get(attr), len);
		c->buf[len] = '\0';
	}
	return 0;
}

bool acct_udata_comment(const struct nlattr *a, uint8_t type, char *buf, size_t size)
{
	struct udata_comment c = { .type = type, .buf = buf, .size = size };

	nftnl_udata_parse(mnl_attr_get_payload(a), mnl_attr_get_payload_len(a), udata_comment_cb,
			  &c);
	return c.found;
}
