// SPDX-License-Identifier: Apache-2.0
/*
 * Set elements of table inet tollgate, whatever feature they serve: one
 * element's message into a batch, one element asked for by key, and the
 * elements of an answer walked. What a pod's elements are: pods.c,
 * guard.c, hostports.c.
 */
#include <errno.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <libmnl/libmnl.h>
#include <libnftnl/set.h>

#include "accounting/internal.h"

struct nftnl_set *acct_set_ref(const char *name)
{
	struct nftnl_set *s = nftnl_set_alloc();

	if (!s)
		return NULL;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, ACCT_TABLE);
	nftnl_set_set_str(s, NFTNL_SET_NAME, name);
	return s;
}

int acct_put_elem_key(struct acct_batch *bt, uint16_t type, const char *set, const void *key,
		      size_t key_len, const char *counter, const void *data, size_t data_len,
		      bool replace)
{
	struct nftnl_set *s = acct_set_ref(set);
	struct nftnl_set_elem *el = nftnl_set_elem_alloc();
	struct nlmsghdr *nlh;

	if (!s || !el) {
		if (s)
			nftnl_set_free(s);
		if (el)
			nftnl_set_elem_free(el);
		return -ENOMEM;
	}
	nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, key, (uint32_t)key_len);
	if (counter)
		nftnl_set_elem_set_str(el, NFTNL_SET_ELEM_OBJREF, counter);
	if (data)
		nftnl_set_elem_set(el, NFTNL_SET_ELEM_DATA, data, (uint32_t)data_len);
	nftnl_set_elem_add(s, el);
	nlh = acct_batch_msg(bt, type,
			     type != NFT_MSG_NEWSETELEM ? 0
			     : replace			? NLM_F_CREATE | NLM_F_REPLACE
							: NLM_F_CREATE);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	acct_batch_next(bt);
	return 0;
}

int acct_put_elem(struct acct_batch *bt, uint16_t type, const char *set, uint32_t ip,
		  const char *counter)
{
	uint8_t key[ACCT_KEY_MAX];
	size_t n = acct_set_key_of(ACCT_KEY_ADDR, NULL, ip, key);

	return acct_put_elem_key(bt, type, set, key, n, counter, NULL, 0, false);
}

static void build_getelem(struct nlmsghdr *nlh, const void *arg)
{
	const struct acct_elem_query *q = arg;
	struct nftnl_set *s = acct_set_ref(q->set);
	struct nftnl_set_elem *el = nftnl_set_elem_alloc();

	if (!s || !el) {
		if (s)
			nftnl_set_free(s);
		if (el)
			nftnl_set_elem_free(el);
		return;
	}
	nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, q->key, (uint32_t)q->key_len);
	nftnl_set_elem_add(s, el);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
}

int acct_nft_get_elem(struct acct_nft_conn *c, const struct acct_elem_query *q, mnl_cb_t cb,
		      void *arg)
{
	char buf[ACCT_NFT_RECV_SIZE] = { 0 };
	struct nlmsghdr *nlh =
		nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_ACK, 1);

	build_getelem(nlh, q);
	return acct_nft_request(c, buf, sizeof(buf), cb, arg);
}

int acct_foreach_elem(const struct nlmsghdr *nlh, int (*fn)(struct nftnl_set_elem *, void *),
		      void *p)
{
	struct nftnl_set *s = nftnl_set_alloc();
	int r = MNL_CB_OK;

	if (!s)
		return MNL_CB_ERROR;
	if (nftnl_set_elems_nlmsg_parse(nlh, s) == 0)
		nftnl_set_elem_foreach(s, fn, p);
	else
		r = MNL_CB_ERROR;
	nftnl_set_free(s);
	return r;
}
