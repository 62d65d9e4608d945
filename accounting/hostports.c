// SPDX-License-Identifier: Apache-2.0
/*
 * hostPorts in table inet tollgate: a pod's mappings as elements of maps
 * hostport and hostport_ip, put in with the pod, taken out with it,
 * checked, and put right against the store; and the rules that DNAT by them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <libmnl/libmnl.h>
#include <libnftnl/set.h>

#include "accounting/internal.h"
#include "lib/util.h"

const char *acct_hostport_map(const struct hostport *m)
{
	return m->host_ip ? ACCT_MAP_HOSTPORT_IP : ACCT_MAP_HOSTPORT;
}

size_t acct_hostport_key(const struct hostport *m, uint8_t ret[ACCT_HOSTPORT_KEY_MAX])
{
	uint32_t ip = htonl(m->host_ip);
	uint16_t port = htons(m->host_port);
	size_t n = 0;

	memset(ret, 0, ACCT_HOSTPORT_KEY_MAX);
	if (m->host_ip) {
		memcpy(ret, &ip, 4);
		n = 4;
	}
	ret[n] = m->proto;
	memcpy(ret + n + 4, &port, 2);
	return n + 8;
}

void acct_hostport_data(uint32_t pod_ip, uint16_t port, uint8_t ret[ACCT_HOSTPORT_DATA_LEN])
{
	uint32_t ip = htonl(pod_ip);
	uint16_t be = htons(port);

	memset(ret, 0, ACCT_HOSTPORT_DATA_LEN);
	memcpy(ret, &ip, 4);
	memcpy(ret + 4, &be, 2);
}

int acct_hostport_put_one(struct acct_batch *bt, uint16_t type, uint32_t pod_ip,
			  const struct hostport *m, bool take)
{
	uint8_t key[ACCT_HOSTPORT_KEY_MAX], data[ACCT_HOSTPORT_DATA_LEN];
	size_t n = acct_hostport_key(m, key);
	bool add = type == NFT_MSG_NEWSETELEM;
	int r = 0;

	acct_hostport_data(pod_ip, m->container_port, data);
	if (add && take)
		r = acct_put_elem_key(bt, NFT_MSG_DESTROYSETELEM, acct_hostport_map(m), key, n,
				      NULL, NULL, 0, false);
	return r ? r
		 : acct_put_elem_key(bt, type, acct_hostport_map(m), key, n, NULL,
				     add ? data : NULL, sizeof(data), false);
}

int acct_hostport_put(struct acct_batch *bt, uint16_t type, const struct acct_pod *p, bool take)
{
	int r = 0;

	for (size_t i = 0; p->ports && i < p->ports->n && r == 0; i++)
		r = acct_hostport_put_one(bt, type, p->ip, &p->ports->m[i], take);
	return r;
}

int acct_hostports_del(const struct hostports *gone, struct tg_err *e)
{
	struct acct_nft_conn c = { 0 };
	struct acct_batch *bt = acct_batch_new(4096);
	char why[256] = "";
	int r = bt ? acct_nft_open(&c, 0, e) : tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");

	/* one transaction each: a mapping already gone must not keep the others */
	for (size_t i = 0; r == 0 && i < gone->n; i++) {
		acct_batch_start(bt);
		r = acct_hostport_put_one(bt, NFT_MSG_DELSETELEM, 0, &gone->m[i], false);
		if (r == 0)
			r = acct_batch_send(&c, bt, why, sizeof(why));
		if (r == -ENOENT)
			r = 0;
		else if (r < 0)
			r = acct_nft_fail(e, r, "removing a hostPort from table inet " ACCT_TABLE,
					  why);
	}
	if (bt)
		acct_nft_close(&c);
	acct_batch_free(bt);
	return r;
}

/* ---- reading the maps back ---- */

struct elem_read {
	uint8_t data[ACCT_HOSTPORT_DATA_LEN];
	bool found;
};

static int read_elem(struct nftnl_set_elem *el, void *p)
{
	struct elem_read *q = p;
	uint32_t len = 0;
	const void *d = nftnl_set_elem_get(el, NFTNL_SET_ELEM_DATA, &len);

	if (d && len == ACCT_HOSTPORT_DATA_LEN) {
		memcpy(q->data, d, len);
		q->found = true;
	}
	return 0;
}

static int read_elem_cb(const struct nlmsghdr *nlh, void *p)
{
	return acct_foreach_elem(nlh, read_elem, p);
}

int acct_hostport_check(struct acct_nft_conn *c, const struct acct_pod *p)
{
	for (size_t i = 0; p->ports && i < p->ports->n; i++) {
		const struct hostport *m = &p->ports->m[i];
		struct acct_elem_query q = { .set = acct_hostport_map(m) };
		uint8_t want[ACCT_HOSTPORT_DATA_LEN];
		struct elem_read got = { 0 };
		int r;

		q.key_len = acct_hostport_key(m, q.key);
		r = acct_nft_get_elem(c, &q, read_elem_cb, &got);
		if (r == -ENOENT)
			return 0;
		if (r < 0)
			return r;
		acct_hostport_data(p->ip, m->container_port, want);
		if (!got.found || memcmp(got.data, want, sizeof(want)) != 0)
			return 0;
	}
	return 1;
}

/* ---- against the store ---- */

struct map_elem {
	uint8_t key[ACCT_HOSTPORT_KEY_MAX];
	uint8_t data[ACCT_HOSTPORT_DATA_LEN];
	uint8_t map; /* 0: hostport, 1: hostport_ip */
	uint8_t key_len;
	bool matched;
};

struct map_dump {
	struct map_elem *v;
	size_t n, cap;
	uint8_t map;
	int err;
};

static int collect_map_elem(struct nftnl_set_elem *el, void *p)
{
	struct map_dump *d = p;
	uint32_t klen = 0, dlen = 0;
	const void *k = nftnl_set_elem_get(el, NFTNL_SET_ELEM_KEY, &klen);
	const void *v = nftnl_set_elem_get(el, NFTNL_SET_ELEM_DATA, &dlen);
	struct map_elem *e;

	if (!k || klen > ACCT_HOSTPORT_KEY_MAX)
		return 0;
	if (!array_grow(&d->v, &d->cap, d->n, sizeof(*d->v), 16)) {
		d->err = -ENOMEM;
		return -1;
	}
	e = &d->v[d->n++];
	memset(e, 0, sizeof(*e));
	memcpy(e->key, k, klen);
	e->key_len = (uint8_t)klen;
	if (v && dlen == ACCT_HOSTPORT_DATA_LEN)
		memcpy(e->data, v, dlen);
	e->map = d->map;
	return 0;
}

static int collect_cb(const struct nlmsghdr *nlh, void *p)
{
	return acct_foreach_elem(nlh, collect_map_elem, p);
}

static int dump_map(struct acct_nft_conn *c, const char *map, uint8_t which, struct map_dump *d)
{
	char buf[ACCT_NFT_RECV_SIZE] = { 0 };
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_INET,
						     NLM_F_DUMP | NLM_F_ACK, 1);
	int r;

	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, ACCT_TABLE);
	mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, map);
	d->map = which;
	r = acct_nft_request(c, buf, sizeof(buf), collect_cb, d);
	return r < 0 && d->err ? d->err : r;
}

int acct_hostports_forget_on(struct acct_nft_conn *c, uint32_t pod_ip, char *why, size_t why_len)
{
	static const char *const maps[2] = { ACCT_MAP_HOSTPORT, ACCT_MAP_HOSTPORT_IP };
	struct map_dump d = { 0 };
	struct acct_batch *bt = NULL;
	uint32_t be = htonl(pod_ip);
	unsigned n = 0;
	int r = 0;

	for (uint8_t k = 0; k < 2 && r == 0; k++)
		r = dump_map(c, maps[k], k, &d);
	if (r == 0 && !(bt = acct_batch_new(ACCT_BATCH_BASE)))
		r = -ENOMEM;
	if (r == 0)
		acct_batch_start(bt);
	for (size_t i = 0; r == 0 && i < d.n; i++) {
		if (memcmp(d.v[i].data, &be, 4) != 0)
			continue;
		r = acct_put_elem_key(bt, NFT_MSG_DELSETELEM, maps[d.v[i].map], d.v[i].key,
				      d.v[i].key_len, NULL, NULL, 0, false);
		n++;
	}
	if (r == 0 && n)
		r = acct_batch_send(c, bt, why, why_len);
	acct_batch_free(bt);
	free(d.v);
	return r;
}

/* The element of the dump with this key; NULL when none. */
static struct map_elem *map_dump_find(struct map_dump *d, uint8_t map, const uint8_t *key,
				      size_t len)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].map == map && d->v[i].key_len == len &&
		    memcmp(d->v[i].key, key, len) == 0)
			return &d->v[i];
	return NULL;
}

int acct_hostport_reconcile(const struct acct_pod *all, size_t n_all, unsigned *added,
			    unsigned *removed, struct tg_err *e)
{
	static const char *const maps[2] = { ACCT_MAP_HOSTPORT, ACCT_MAP_HOSTPORT_IP };
	struct acct_nft_conn c = { 0 };
	struct map_dump d = { 0 };
	struct acct_batch *bt = NULL;
	unsigned put = 0, del = 0;
	char why[256] = "";
	int r = acct_nft_open(&c, 0, e);

	for (uint8_t k = 0; k < 2 && r == 0; k++) {
		r = dump_map(&c, maps[k], k, &d);
		if (r < 0)
			r = acct_nft_fail(e, r, "listing a map", maps[k]);
	}
	if (r == 0 && !(bt = acct_batch_new(ACCT_BATCH_BASE)))
		r = tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	if (r < 0)
		goto out;
	acct_batch_start(bt);
	/* What the store's pods map: matched where the map holds it with their value, else put in. */
	for (size_t i = 0; i < n_all && r == 0; i++)
		for (size_t j = 0; all[i].ports && j < all[i].ports->n && r == 0; j++) {
			const struct hostport *m = &all[i].ports->m[j];
			uint8_t key[ACCT_HOSTPORT_KEY_MAX], data[ACCT_HOSTPORT_DATA_LEN];
			size_t n = acct_hostport_key(m, key);
			struct map_elem *have = map_dump_find(&d, m->host_ip != 0, key, n);

			acct_hostport_data(all[i].ip, m->container_port, data);
			if (have && memcmp(have->data, data, sizeof(data)) == 0) {
				have->matched = true;
				continue;
			}
			if (have) {
				r = acct_put_elem_key(bt, NFT_MSG_DELSETELEM, maps[have->map], key,
						      n, NULL, NULL, 0, false);
				have->matched = true;
				del++;
			}
			if (r == 0)
				r = acct_put_elem_key(bt, NFT_MSG_NEWSETELEM, acct_hostport_map(m),
						      key, n, NULL, data, sizeof(data), false);
			put++;
		}
	/* What no pod maps: out. */
	for (size_t i = 0; i < d.n && r == 0; i++) {
		if (d.v[i].matched)
			continue;
		r = acct_put_elem_key(bt, NFT_MSG_DELSETELEM, maps[d.v[i].map], d.v[i].key,
				      d.v[i].key_len, NULL, NULL, 0, false);
		del++;
	}
	if (r == 0 && bt->full)
		r = tg_fail(e, CNI_ERR_IO, -ENOBUFS,
			    "too many hostPort elements to put right at once");
	if (r == 0 && (put || del)) {
		r = acct_batch_send(&c, bt, why, sizeof(why));
		if (r < 0)
			r = acct_nft_fail(e, r, "putting hostPorts right in table inet " ACCT_TABLE,
					  why);
	}
	if (r == 0) {
		*added += put;
		*removed += del;
	}
out:
	acct_batch_free(bt);
	acct_nft_close(&c);
	free(d.v);
	return r;
}

/* ---- the rules ---- */

/*
 * A hostPort's DNAT: [ip daddr .] meta l4proto . th dport, one 32-bit
 * register each from NFT_REG32_00 on, looked up in the map, whose value
 * (address . port) lands in the next two registers, which dnat reads.
 * Only for a local destination: a packet the node forwards keeps its
 * destination, even to an address a pod named as its hostIP (or it would
 * take its neighbours' traffic to that address). On every address, outside
 * 127/8 and 169.254/16: loopback would need route_localnet on the pods'
 * links (which lets a pod reach the node's localhost), and link-local
 * addresses of the node are its services for pods (a node-local DNS cache
 * on 169.254.20.10, a credentials agent), which no pod's hostPort may take.
 */
static struct nftnl_rule *hostport_rule(const char *chain, bool by_ip)
{
	struct nftnl_rule *r = acct_rule_new(chain);
	uint32_t reg = NFT_REG32_00;

	if (!r)
		return NULL;
	if (!by_ip) {
		static const uint32_t nets[][2] = { { 0x7f000000u, 0xff000000u },   /* 127/8 */
						    { 0xa9fe0000u, 0xffff0000u } }; /* 169.254/16 */

		for (size_t i = 0; i < ARRAY_SIZE(nets); i++) {
			uint32_t net = htonl(nets[i][0]);

			acct_rule_add(r, acct_expr_ip(16));
			acct_rule_add(r, acct_expr_bitwise32(htonl(nets[i][1]), 0));
			acct_rule_add(r, acct_expr_cmp(NFT_CMP_NEQ, &net, sizeof(net)));
		}
	}
	/* a hostIP that is not the node's must not catch what the node forwards to that address */
	acct_match_local(r);
	if (by_ip)
		acct_rule_add(r, acct_expr_ip_to(16, reg++));
	acct_rule_add(r, acct_expr_meta_to(NFT_META_L4PROTO, reg++));
	acct_rule_add(r, acct_expr_payload_to(NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, reg++));
	acct_rule_add(
		r,
		by_ip ? acct_expr_map(ACCT_MAP_HOSTPORT_IP, ACCT_ID_HOSTPORT_IP, NFT_REG32_00, reg)
		      : acct_expr_map(ACCT_MAP_HOSTPORT, ACCT_ID_HOSTPORT, NFT_REG32_00, reg));
	acct_rule_add(r, acct_expr_dnat4(reg, reg + 1));
	return r;
}

/*
 * ct status dnat oifname . ip saddr @pod_src masquerade: a pod that reached
 * its own hostPort gets its packet back from the node's address, so that
 * its answer goes through the node and its DNAT is undone there.
 */
static struct nftnl_rule *hairpin_rule(void)
{
	struct nftnl_rule *r = acct_rule_new("postrouting");
	uint32_t dnat = IPS_DST_NAT, zero = 0;

	if (!r)
		return NULL;
	acct_rule_add(r, acct_expr_ct(NFT_CT_STATUS));
	acct_rule_add(r, acct_expr_bitwise32(dnat, zero));
	acct_rule_add(r, acct_expr_cmp(NFT_CMP_NEQ, &zero, sizeof(zero)));
	acct_rule_add(r, acct_expr_meta(NFT_META_OIFNAME));
	acct_rule_add(r, acct_expr_ip_to(12, NFT_REG_2));
	acct_rule_add(r, acct_expr_lookup(ACCT_SET_POD_SRC, ACCT_ID_POD_SRC, false));
	acct_rule_add(r, acct_expr_plain("masq"));
	return r;
}

int acct_hostport_rules(struct acct_rule_list *list)
{
	int r = 0;

	/* the mappings on one address first, those on every address after */
	r |= acct_rule_list_add(list, hostport_rule(ACCT_CHAIN_PREROUTING_NAT, true));
	r |= acct_rule_list_add(list, hostport_rule(ACCT_CHAIN_PREROUTING_NAT, false));
	r |= acct_rule_list_add(list, hostport_rule(ACCT_CHAIN_OUTPUT_NAT, true));
	r |= acct_rule_list_add(list, hostport_rule(ACCT_CHAIN_OUTPUT_NAT, false));
	r |= acct_rule_list_add(list, hairpin_rule());
	return r ? -ENOMEM : 0;
}
