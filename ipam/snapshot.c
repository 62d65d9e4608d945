// SPDX-License-Identifier: Apache-2.0
/*
 * state.cache: a header, then the body (attachments, cooling records, pool,
 * pending addresses, each attachment's text span in state.json and hash).
 * Written in place under the store's lock: the header's magic is cleared,
 * the body written, then the header, so a write cut short by a kill leaves a
 * header that does not match. The hash of state.json's bytes catches a
 * state.json replaced by anything else. Only on tmpfs (the store's default):
 * after a power cut on a disk, the pages could reach it in any order.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ipam/internal.h"
#include "ipam/snapshot.h"

#define SNAPSHOT_MAGIC "TGCACHE"

struct snapshot_head {
	char magic[8];
	char build[24]; /* TG_VERSION: another build's cache is not read */
	uint32_t layout, state_version;
	uint32_t att_size, cooling_size;
	uint64_t json_len, json_hash;
	uint64_t body_len;
	uint64_t n_att, n_cooling, n_pool, n_pending;
	int64_t last_sync_ms;
	uint32_t last_ip, node_ip;
	uint32_t subnet_net, subnet_prefix;
	char boot_id[64];
	char source[16];
};

static void head_identity(struct snapshot_head *h)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, SNAPSHOT_MAGIC, sizeof(h->magic));
	strncpy(h->build, TG_VERSION, sizeof(h->build) - 1);
	h->layout = IPAM_SNAPSHOT_LAYOUT;
	h->state_version = IPAM_STATE_VERSION;
	h->att_size = sizeof(struct ipam_attachment);
	h->cooling_size = sizeof(struct ipam_cooling);
}

/* Body size for these counts; 0 when they are out of bounds. */
static uint64_t body_size(const struct snapshot_head *h)
{
	if (h->n_att > IPAM_ATTACHMENTS_MAX || h->n_cooling > IPAM_POOL_MAX ||
	    h->n_pool > IPAM_POOL_MAX || h->n_pending > IPAM_POOL_MAX)
		return 0;
	return h->n_att *
		       (sizeof(struct ipam_attachment) + 2 * sizeof(uint32_t) + sizeof(uint64_t)) +
	       h->n_cooling * sizeof(struct ipam_cooling) +
	       (h->n_pool + h->n_pending) * sizeof(uint32_t);
}

/* The body's parts, in file order. */
#define BODY_PARTS 6
static void body_iov(struct iovec *iov, const struct snapshot_head *h, void *att, void *cooling,
		     void *pool, void *pending, void *span, void *sum)
{
	iov[0] = (struct iovec){ att, h->n_att * sizeof(struct ipam_attachment) };
	iov[1] = (struct iovec){ cooling, h->n_cooling * sizeof(struct ipam_cooling) };
	iov[2] = (struct iovec){ pool, h->n_pool * sizeof(uint32_t) };
	iov[3] = (struct iovec){ pending, h->n_pending * sizeof(uint32_t) };
	iov[4] = (struct iovec){ span, h->n_att * 2 * sizeof(uint32_t) };
	iov[5] = (struct iovec){ sum, h->n_att * sizeof(uint64_t) };
}

uint64_t ipam_snapshot_sum(const struct ipam_attachment *a)
{
	return XXH3_64bits(a, sizeof(*a));
}

/* malloc of at least one byte: the state's arrays are never NULL (ipam_state_free). */
static void *alloc_n(uint64_t n, size_t size)
{
	return malloc(n ? n * size : 1);
}

int ipam_snapshot_read(int fd, char **json, size_t len, struct ipam_state *st,
		       struct ipam_snapshot *snap)
{
	struct snapshot_head h, want;
	struct ipam_state got;
	struct iovec iov[BODY_PARTS];
	uint32_t *span = NULL;
	uint64_t *sum = NULL, size;

	head_identity(&want);
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(&h, &want, offsetof(struct snapshot_head, json_len)) != 0 || h.json_len != len ||
	    h.json_hash != XXH3_64bits(*json, len))
		return 0;
	size = body_size(&h);
	if (!size || size != h.body_len || !memchr(h.boot_id, 0, sizeof(h.boot_id)) ||
	    !memchr(h.source, 0, sizeof(h.source)))
		return 0;
	ipam_state_init(&got);
	got.att = alloc_n(h.n_att, sizeof(*got.att));
	got.cooling = alloc_n(h.n_cooling, sizeof(*got.cooling));
	got.pool = alloc_n(h.n_pool, sizeof(*got.pool));
	got.pending = h.n_pending ? alloc_n(h.n_pending, sizeof(*got.pending)) : NULL;
	span = alloc_n(2 * h.n_att, sizeof(*span));
	sum = alloc_n(h.n_att, sizeof(*sum));
	if (!got.att || !got.cooling || !got.pool || (h.n_pending && !got.pending) || !span || !sum)
		goto miss;
	body_iov(iov, &h, got.att, got.cooling, got.pool, got.pending, span, sum);
	if (preadv(fd, iov, BODY_PARTS, sizeof(h)) != (ssize_t)size)
		goto miss;
	for (uint64_t i = 0; i < 2 * h.n_att; i++)
		if (span[i] > len || (i && span[i] < span[i - 1]))
			goto miss;
	memcpy(got.boot_id, h.boot_id, sizeof(got.boot_id));
	memcpy(got.source, h.source, sizeof(got.source));
	got.last_sync_ms = h.last_sync_ms;
	got.last_ip = h.last_ip;
	got.node_ip = h.node_ip;
	got.subnet.net = h.subnet_net;
	got.subnet.prefix = (uint8_t)h.subnet_prefix;
	got.n_att = h.n_att;
	got.n_cooling = h.n_cooling;
	got.n_pool = h.n_pool;
	got.n_pending = h.n_pending;
	*st = got;
	snap->json = *json;
	*json = NULL;
	snap->span = span;
	snap->sum = sum;
	snap->n_att = h.n_att;
	return 1;
miss:
	ipam_state_free(&got);
	free(span);
	free(sum);
	return 0;
}

void ipam_snapshot_write(int fd, const char *json, size_t len, const struct ipam_state *st,
			 const uint32_t *span, const uint64_t *sum)
{
	struct snapshot_head h;
	struct iovec iov[BODY_PARTS];

	head_identity(&h);
	h.json_len = len;
	h.json_hash = XXH3_64bits(json, len);
	h.n_att = st->n_att;
	h.n_cooling = st->n_cooling;
	h.n_pool = st->n_pool;
	h.n_pending = st->n_pending;
	h.body_len = body_size(&h);
	h.last_sync_ms = st->last_sync_ms;
	h.last_ip = st->last_ip;
	h.node_ip = st->node_ip;
	h.subnet_net = st->subnet.net;
	h.subnet_prefix = st->subnet.prefix;
	memcpy(h.boot_id, st->boot_id, sizeof(h.boot_id));
	memcpy(h.source, st->source, sizeof(h.source));
	if (!h.body_len)
		goto drop;
	body_iov(iov, &h, st->att, st->cooling, st->pool, st->pending, (void *)span, (void *)sum);
	if (pwrite(fd, &(char[sizeof(h.magic)]){ 0 }, sizeof(h.magic), 0) ==
		    (ssize_t)sizeof(h.magic) &&
	    pwritev(fd, iov, BODY_PARTS, sizeof(h)) == (ssize_t)h.body_len &&
	    ftruncate(fd, (off_t)(sizeof(h) + h.body_len)) == 0 &&
	    pwrite(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h))
		return;
drop:
	/* A write that failed midway (a full tmpfs): no cache rather than half of one. */
	if (ftruncate(fd, 0) < 0)
		return;
}

const char *ipam_snapshot_text(const struct ipam_snapshot *snap, uint64_t sum, size_t *hint,
			       size_t *ret_len)
{
	/* Updates keep the order and remove a few: look a little ahead of the last match. */
	for (size_t k = *hint; k < snap->n_att && k < *hint + 8; k++) {
		if (snap->sum[k] != sum)
			continue;
		*hint = k + 1;
		*ret_len = snap->span[2 * k + 1] - snap->span[2 * k];
		return snap->json + snap->span[2 * k];
	}
	return NULL;
}

void ipam_snapshot_free(struct ipam_snapshot *snap)
{
	free(snap->json);
	free(snap->span);
	free(snap->sum);
	memset(snap, 0, sizeof(*snap));
}
