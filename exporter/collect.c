// SPDX-License-Identifier: Apache-2.0
/* The collectors: nftables counters (one dump) and the IPAM store (re-read on change). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "accounting/accounting.h"
#include "exporter/exporter.h"
#include "ipam/ipam.h"
#include "lib/util.h"

#define EXPORTER_VERSION TG_VERSION

/*
 * Counters never go backwards while the node runs. The kernel's do when the
 * table is flushed and rebuilt; then the last value seen is carried as an
 * offset, per counter name.
 */
struct mono {
	char name[ACCT_COUNTER_NAME_MAX];
	uint64_t last_bytes, last_packets, off_bytes, off_packets;
	uint64_t seen;			/* scrape generation */
	bool used;
};

struct exporter {
	char data_dir[2048];
	char network[160];
	struct ipam_state state;
	const struct ipam_attachment **by_veth;	/* state's attachments sorted by host veth */
	bool state_loaded;
	struct stat state_stat;
	struct mono *mono;		/* open addressing, power-of-two size */
	size_t mono_cap, mono_used;
	uint64_t generation;
};

struct exporter *exporter_new(const char *data_dir, const char *network)
{
	struct exporter *ex = calloc(1, sizeof(*ex));

	if (!ex)
		return NULL;
	snprintf(ex->data_dir, sizeof(ex->data_dir), "%s", data_dir);
	snprintf(ex->network, sizeof(ex->network), "%s", network);
	ipam_state_init(&ex->state);
	return ex;
}

void exporter_free(struct exporter *ex)
{
	if (!ex)
		return;
	ipam_state_free(&ex->state);
	free(ex->by_veth);
	free(ex->mono);
	free(ex);
}

static struct mono *mono_slot(struct exporter *ex, const char *name)
{
	size_t mask, i;

	if (ex->mono_used * 2 >= ex->mono_cap) {
		size_t cap = ex->mono_cap ? ex->mono_cap * 2 : 256;
		struct mono *old = ex->mono, *grown = calloc(cap, sizeof(*grown));
		size_t old_cap = ex->mono_cap;

		if (!grown)
			return NULL;
		ex->mono = grown;
		ex->mono_cap = cap;
		ex->mono_used = 0;
		for (i = 0; i < old_cap; i++)
			if (old[i].used) {
				struct mono *m = mono_slot(ex, old[i].name);

				if (m)
					*m = old[i];
			}
		free(old);
	}
	mask = ex->mono_cap - 1;
	for (i = hash_fnv1a64(name, strlen(name), FNV1A64_INIT) & mask;; i = (i + 1) & mask) {
		struct mono *m = &ex->mono[i];

		if (!m->used) {
			memset(m, 0, sizeof(*m));
			snprintf(m->name, sizeof(m->name), "%s", name);
			m->used = true;
			ex->mono_used++;
			return m;
		}
		if (strcmp(m->name, name) == 0)
			return m;
	}
}

static void monotonic(struct exporter *ex, struct acct_counter *c)
{
	struct mono *m = mono_slot(ex, c->name);

	if (!m)
		return;
	if (m->seen && (c->bytes < m->last_bytes || c->packets < m->last_packets)) {
		m->off_bytes += m->last_bytes;
		m->off_packets += m->last_packets;
	}
	m->last_bytes = c->bytes;
	m->last_packets = c->packets;
	m->seen = ex->generation;
	c->bytes += m->off_bytes;
	c->packets += m->off_packets;
}

/*
 * Forgets counters the kernel no longer has (deleted pods), so memory follows
 * the live set: when they are half the table, rebuild it with the rest.
 */
static void mono_compact(struct exporter *ex)
{
	struct mono *old = ex->mono;
	size_t old_cap = ex->mono_cap, gone = 0, i;

	for (i = 0; i < old_cap; i++)
		gone += old[i].used && old[i].seen != ex->generation;
	if (gone == 0 || gone * 2 < ex->mono_used)
		return;
	ex->mono = NULL;
	ex->mono_cap = 0;
	ex->mono_used = 0;
	for (i = 0; i < old_cap; i++)
		if (old[i].used && old[i].seen == ex->generation) {
			struct mono *m = mono_slot(ex, old[i].name);

			if (m)
				*m = old[i];
		}
	free(old);
}

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

/* Re-reads state.json only when it was replaced (rename gives it a new inode). */
static int refresh_store(struct exporter *ex)
{
	struct ipam_store ro = { .lock_fd = -1 };
	struct ipam_state fresh;
	struct tg_err e = { 0 };
	struct stat sb;

	snprintf(ro.dir, sizeof(ro.dir), "%s/%s", ex->data_dir, ex->network);
	snprintf(ro.path, sizeof(ro.path), "%s/state.json", ro.dir);
	if (stat(ro.path, &sb) < 0) {
		if (errno != ENOENT)
			return -errno;
		/* No store yet: a node without pods. */
		ipam_state_free(&ex->state);
		ex->state_loaded = true;
		memset(&ex->state_stat, 0, sizeof(ex->state_stat));
		index_by_veth(ex);
		return 0;
	}
	if (ex->state_loaded && sb.st_ino == ex->state_stat.st_ino &&
	    sb.st_size == ex->state_stat.st_size &&
	    sb.st_mtim.tv_sec == ex->state_stat.st_mtim.tv_sec &&
	    sb.st_mtim.tv_nsec == ex->state_stat.st_mtim.tv_nsec)
		return 0;
	if (ipam_store_load(&ro, &fresh, &e) < 0)
		return -EBADMSG;
	ipam_state_free(&ex->state);
	ex->state = fresh;
	ex->state_stat = sb;
	ex->state_loaded = true;
	index_by_veth(ex);
	return 0;
}

static const char *const directions[ACCT_CLASSES] = { "egress", "egress", "ingress", "ingress" };
static const char *const traffics[ACCT_CLASSES] = { "internal", "internet", "internal",
						     "internet" };

/* Splits "<prefix><middle>_<class>" into middle and class. */
static bool split_name(const char *name, const char *prefix, char *middle, size_t size,
		       enum acct_class *cls)
{
	size_t plen = strlen(prefix), nlen = strlen(name);

	if (strncmp(name, prefix, plen) != 0)
		return false;
	for (int c = 0; c < ACCT_CLASSES; c++) {
		size_t clen = strlen(acct_class_names[c]);

		if (nlen >= plen + clen + 1 && strcmp(name + nlen - clen, acct_class_names[c]) == 0 &&
		    name[nlen - clen - 1] == '_') {
			size_t mlen = nlen - plen - clen - 1;

			if (mlen >= size)
				return false;
			memcpy(middle, name + plen, mlen);
			middle[mlen] = '\0';
			*cls = (enum acct_class)c;
			return true;
		}
	}
	return false;
}

static const struct ipam_attachment *by_veth(const struct exporter *ex, const char *veth)
{
	struct ipam_attachment key;
	const struct ipam_attachment *kp = &key, *const *hit;

	if (!ex->by_veth || strlen(veth) >= sizeof(key.host_veth))
		return NULL;
	memcpy(key.host_veth, veth, strlen(veth) + 1);
	hit = bsearch(&kp, ex->by_veth, ex->state.n_att, sizeof(*ex->by_veth), cmp_veth);
	return hit ? *hit : NULL;
}

static void render_counters(struct exporter *ex, struct expo *x, struct acct_counter *ctr,
			    size_t n, bool bytes)
{
	const char *kind = bytes ? "bytes" : "packets";
	char family[64], middle[ACCT_COUNTER_NAME_MAX];
	enum acct_class cls;
	size_t i;

	snprintf(family, sizeof(family), "tollgate_namespace_%s_total", kind);
	expo_family(x, family, "counter",
		    bytes ? "IP bytes of pods by Kubernetes namespace, direction and traffic class "
			    "(internal: destination or source in internalCIDRs)."
			  : "IP packets of pods by Kubernetes namespace, direction and traffic class.");
	for (i = 0; i < n; i++)
		if (split_name(ctr[i].name, "ns_", middle, sizeof(middle), &cls)) {
			const char *l[] = { "namespace", middle, "direction", directions[cls],
					    "traffic", traffics[cls], NULL };

			expo_sample_u64(x, family, l, bytes ? ctr[i].bytes : ctr[i].packets);
		}
	snprintf(family, sizeof(family), "tollgate_pod_%s_total", kind);
	expo_family(x, family, "counter",
		    bytes ? "IP bytes by pod (accounting.perPod), direction and traffic class."
			  : "IP packets by pod (accounting.perPod), direction and traffic class.");
	for (i = 0; i < n; i++)
		if (split_name(ctr[i].name, "pod_", middle, sizeof(middle), &cls)) {
			const struct ipam_attachment *a = by_veth(ex, middle);
			const char *l[] = { "namespace", a ? a->k8s_namespace : "", "pod",
					    a ? a->pod : "", "direction", directions[cls],
					    "traffic", traffics[cls], NULL };

			if (a)
				expo_sample_u64(x, family, l, bytes ? ctr[i].bytes : ctr[i].packets);
		}
	snprintf(family, sizeof(family), "tollgate_host_%s_total", kind);
	expo_family(x, family, "counter",
		    bytes ? "IP bytes of the node itself (and hostNetwork pods) by direction and "
			    "traffic class."
			  : "IP packets of the node itself by direction and traffic class.");
	for (i = 0; i < n; i++)
		if (split_name(ctr[i].name, "host", middle, sizeof(middle), &cls) && !middle[0]) {
			const char *l[] = { "direction", directions[cls], "traffic", traffics[cls],
					    NULL };

			expo_sample_u64(x, family, l, bytes ? ctr[i].bytes : ctr[i].packets);
		}
}

int exporter_render(struct exporter *ex, struct expo *x)
{
	int64_t t0 = time_mono_ns(), t1, t2;
	struct acct_counter *ctr = NULL;
	size_t n = 0;
	int nft_r, ipam_r;
	const char *up_nft[] = { "collector", "nftables", NULL };
	const char *up_ipam[] = { "collector", "ipam", NULL };
	const char *version[] = { "version", EXPORTER_VERSION, NULL };

	ex->generation++;
	nft_r = acct_list_counters(&ctr, &n, NULL);
	t1 = time_mono_ns();
	ipam_r = refresh_store(ex);
	t2 = time_mono_ns();

	expo_family(x, "tollgate_build_info", "gauge", "Tollgate build; the value is always 1.");
	expo_sample(x, "tollgate_build_info", version, 1);
	if (nft_r == 0) {
		for (size_t i = 0; i < n; i++)
			monotonic(ex, &ctr[i]);
		render_counters(ex, x, ctr, n, true);
		render_counters(ex, x, ctr, n, false);
	}
	free(ctr);
	if (ipam_r == 0) {
		struct ipam_counts c;
		const char *states[] = { "total", "allocated", "free", "cooling", "retired" };

		ipam_count(&ex->state, time_now_ms(), IPAM_DEFAULT_COOLDOWN_MS, &c);
		size_t vals[] = { c.total, c.allocated, c.free, c.cooling, c.retired };

		expo_family(x, "tollgate_ipam_addresses", "gauge",
			    "Addresses of the node's pool by state (retired: in use, no longer in "
			    "the pool).");
		for (size_t i = 0; i < 5; i++) {
			const char *l[] = { "state", states[i], NULL };

			expo_sample_u64(x, "tollgate_ipam_addresses", l, vals[i]);
		}
		expo_family(x, "tollgate_ipam_attachments", "gauge", "Pods attached on this node.");
		expo_sample_u64(x, "tollgate_ipam_attachments", NULL, ex->state.n_att);
		expo_family(x, "tollgate_ipam_last_sync_timestamp_seconds", "gauge",
			    "When the pool was last synced from IMDS (0: never).");
		expo_sample(x, "tollgate_ipam_last_sync_timestamp_seconds", NULL,
			    (double)ex->state.last_sync_ms / 1000.0);
	}
	expo_family(x, "tollgate_collector_up", "gauge",
		    "1 when the collector read its source on this scrape.");
	expo_sample(x, "tollgate_collector_up", up_nft, nft_r == 0);
	expo_sample(x, "tollgate_collector_up", up_ipam, ipam_r == 0);
	expo_family(x, "tollgate_collector_duration_seconds", "gauge",
		    "Time each collector took on this scrape.");
	expo_sample(x, "tollgate_collector_duration_seconds", up_nft, (double)(t1 - t0) / 1e9);
	expo_sample(x, "tollgate_collector_duration_seconds", up_ipam, (double)(t2 - t1) / 1e9);
	expo_family(x, "tollgate_scrape_duration_seconds", "gauge",
		    "Time to collect and render this page.");
	expo_sample(x, "tollgate_scrape_duration_seconds", NULL, (double)(time_mono_ns() - t0) / 1e9);

	if (nft_r == 0)
		mono_compact(ex);
	return x->overflow ? -ENOBUFS : 0;
}
