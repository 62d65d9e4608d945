// SPDX-License-Identifier: Apache-2.0
/*
 * The IPAM store as the scrape sees it: state.json loaded again only when it
 * was replaced, and its attachments indexed by host veth (what pod
 * counters are named by).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "exporter/internal.h"
#include "ipam/ipam.h"
#include "ipam/store.h"

static int cmp_veth(const void *a, const void *b)
{
	return strcmp((*(const struct ipam_attachment *const *)a)->host_veth,
		      (*(const struct ipam_attachment *const *)b)->host_veth);
}

/* Pod counters are named by host veth: index the attachments once per store load. */
static void index_by_veth(struct exporter *ex)
{
	free(ex->by_veth);
	ex->by_veth = calloc(ex->state.n_att + 1, sizeof(*ex->by_veth));
	if (!ex->by_veth)
		return;
	for (size_t i = 0; i < ex->state.n_att; i++)
		ex->by_veth[i] = &ex->state.att[i];
	qsort(ex->by_veth, ex->state.n_att, sizeof(*ex->by_veth), cmp_veth);
}

/* Re-reads state.json only when it was replaced. */
int refresh_store(struct exporter *ex)
{
	struct ipam_store ro;
	struct ipam_state fresh;
	struct tg_err e = { 0 };
	int r;

	if (ipam_store_open_readonly(&ro, ex->data_dir, ex->network, &e) < 0)
		return -ENAMETOOLONG;
	r = ipam_store_stamp_changed(&ro, &ex->state_stamp);
	if (r <= 0)
		return r;
	if (!ex->state_stamp.present) {
		/* No store yet: a node without pods. */
		ipam_state_free(&ex->state);
	} else if (ipam_store_load(&ro, &fresh, &e) < 0) {
		ex->state_stamp.looked = false; /* again at the next scrape */
		return -EBADMSG;
	} else {
		ipam_state_free(&ex->state);
		ex->state = fresh;
	}
	index_by_veth(ex);
	ex->store_generation++;
	return 0;
}

const struct ipam_attachment *by_veth(const struct exporter *ex, const char *veth)
{
	struct ipam_attachment key;
	const struct ipam_attachment *kp = &key, *const * hit;

	if (!ex->by_veth || strlen(veth) >= sizeof(key.host_veth))
		return NULL;
	memcpy(key.host_veth, veth, strlen(veth) + 1);
	hit = bsearch(&kp, ex->by_veth, ex->state.n_att, sizeof(*ex->by_veth), cmp_veth);
	return hit ? *hit : NULL;
}
