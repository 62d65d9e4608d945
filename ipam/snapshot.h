/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_IPAM_SNAPSHOT_H
#define TG_IPAM_SNAPSHOT_H

/*
 * The store's snapshot, <dataDir>/<network>/state.cache: state.json as last
 * parsed, in binary, with where each attachment's JSON text lies in the file.
 * A locked update then reads 250 attachments in microseconds instead of
 * parsing 70 kB of JSON, and writes each unchanged attachment back as the
 * text it was. It is derived and disposable: keyed by a hash of state.json's
 * exact bytes, used only under the store's lock, ignored whenever it does not
 * match (another build, a hand edit, a torn write). state.json stays the
 * authority.
 */

#include <stddef.h>
#include <stdint.h>

#include "ipam/ipam.h"

/*
 * Bump when struct ipam_state's parts or an attachment's JSON text change:
 * a cache of another layout is never read (tests/unit/test_store.c pins the
 * text to this number).
 */
#define IPAM_SNAPSHOT_LAYOUT 6

struct ipam_snapshot {
	char *json;	/* state.json as read; the texts point into it */
	uint32_t *span; /* attachment i's text: json[span[2i], span[2i+1]) */
	uint64_t *sum;	/* attachment i's hash (ipam_snapshot_sum) */
	size_t n_att;
};

/* An attachment's hash: equal hashes, unchanged attachment. */
uint64_t ipam_snapshot_sum(const struct ipam_attachment *a);
/*
 * Fills st from fd's snapshot when it was written for exactly these bytes of
 * state.json (taking ownership of `json` then: it stays in snap). Returns 1 on
 * a match, 0 when there is none (st untouched, json still the caller's).
 */
int ipam_snapshot_read(int fd, char **json, size_t len, struct ipam_state *st,
		       struct ipam_snapshot *snap);
/*
 * Records st, just written as `json`, whose attachment i's text is
 * json[span[2i], span[2i+1]) and hash sum[i]. Best effort: a failure only
 * costs the next update a parse.
 */
void ipam_snapshot_write(int fd, const char *json, size_t len, const struct ipam_state *st,
			 const uint32_t *span, const uint64_t *sum);
/*
 * The JSON text state.json holds for an attachment whose hash is `sum`, when
 * that attachment is unchanged since; NULL otherwise. *hint: where to look
 * first, moved past each match (updates keep the attachments' order).
 */
const char *ipam_snapshot_text(const struct ipam_snapshot *snap, uint64_t sum, size_t *hint,
			       size_t *ret_len);
void ipam_snapshot_free(struct ipam_snapshot *snap);

#endif
