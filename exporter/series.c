// SPDX-License-Identifier: Apache-2.0
/*
 * One series per nftables counter, kept across scrapes: its labels are
 * written once (again only when the store changes, for pods), so a scrape
 * copies one prepared string per sample. Counters never go backwards while
 * the node runs; the kernel's start again when a counter is made anew (the
 * table rebuilt, a retired namespace back), and then the last value seen is
 * carried as an offset. A new counter is known by its object id, not by a
 * lower value: one that has already passed the old value between two
 * scrapes would otherwise swallow it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "accounting/accounting.h"
#include "exporter/internal.h"
#include "lib/util.h"

void series_clear(struct exporter *ex)
{
	for (size_t i = 0; i < ex->n_series; i++)
		free(ex->series[i].labels);
	free(ex->series);
	free(ex->index);
	ex->series = NULL;
	ex->index = NULL;
	ex->n_series = ex->cap_series = ex->index_cap = 0;
}
/* Writes the series' label set; labels NULL when it is not to be shown. */
static void set_labels(struct series *s, const char *const *labels)
{
	struct expo x;

	free(s->labels);
	s->labels = NULL;
	s->labels_len = 0;
	if (!labels)
		return;
	expo_init(&x, 8192);
	expo_labels(&x, labels);
	/* Kept for the life of the series: exactly as long as it is. */
	if (!x.overflow && x.page.p && (s->labels = strndup(x.page.p, x.page.len)))
		s->labels_len = x.page.len;
	expo_free(&x);
}
/* What a counter's name says: namespace, pod (labels from the store) or the node. */
static void classify(struct exporter *ex, struct series *s)
{
	char owner[ACCT_COUNTER_NAME_MAX];
	enum acct_owner who = acct_counter_parse(s->name, s->name_len, owner, &s->cls);
	enum acct_family fam;
	const char *dir, *traffic;

	s->kind = SERIES_OTHER;
	if (who == ACCT_OWNER_NONE) {
		/* Spoofed packets: by the sender's namespace, or (no namespace label) by no known pod. */
		enum acct_access_drop drop;
		enum acct_refusal why;

		who = acct_spoofed_parse(s->name, s->name_len, owner, &fam);
		if (who != ACCT_OWNER_NONE) {
			const char *l[] = { "namespace", owner, "family", acct_family_names[fam],
					    NULL };

			s->kind = SERIES_SPOOFED;
			set_labels(s, who == ACCT_OWNER_NAMESPACE ? l : l + 2);
			return;
		}
		/* The internet guard's refusals, by namespace and reason. */
		if (acct_refused_parse(s->name, s->name_len, owner, &why) == ACCT_OWNER_NAMESPACE) {
			const char *l[] = { "namespace", owner, "reason", acct_refusal_names[why],
					    NULL };

			s->kind = SERIES_REFUSED;
			set_labels(s, l);
			return;
		}
		/* nodeAccess' drops, by the sender's namespace; ARP from pods, node-wide. */
		if (acct_drop_parse(s->name, s->name_len, owner, &drop) == ACCT_OWNER_NAMESPACE) {
			const char *l[] = { "namespace", owner, NULL };

			static const enum series_kind kinds[ACCT_DROPS] = {
				[ACCT_DROP_METADATA] = SERIES_METADATA_DROP,
				[ACCT_DROP_AGENT] = SERIES_AGENT_DROP,
				[ACCT_DROP_INVALID] = SERIES_INVALID_DROP,
				[ACCT_DROP_NEIGHBOUR] = SERIES_NEIGHBOUR_DROP,
			};

			s->kind = kinds[drop];
			set_labels(s, l);
		} else if (s->name_len == strlen(ACCT_ARP_COUNTER) &&
			   memcmp(s->name, ACCT_ARP_COUNTER, s->name_len) == 0) {
			/* no labels: an empty label set, which is shown */
			s->kind = SERIES_ARP_DROP;
			set_labels(s, NULL);
			s->labels = strdup("");
		}
		return;
	}
	dir = acct_class_direction[s->cls];
	traffic = acct_class_traffic[s->cls];
	if (who == ACCT_OWNER_NAMESPACE) {
		const char *l[] = { "namespace", owner, "direction", dir, "traffic", traffic, NULL };

		s->kind = SERIES_NS;
		set_labels(s, l);
	} else if (who == ACCT_OWNER_POD) {
		const struct ipam_attachment *a = by_veth(ex, owner);
		const char *l[] = { "namespace", a ? a->k8s_namespace : "",
				    "pod",	 a ? a->pod : "",
				    "direction", dir,
				    "traffic",	 traffic,
				    NULL };

		s->kind = SERIES_POD;
		s->labels_store = ex->store_generation;
		/* A counter whose pod the store no longer has is not shown. */
		set_labels(s, a ? l : NULL);
	} else if (who == ACCT_OWNER_HOST) {
		const char *l[] = { "direction", dir, "traffic", traffic, NULL };

		s->kind = SERIES_HOST;
		set_labels(s, l);
	}
}

static uint64_t name_hash(const char *name, size_t len)
{
	return hash_fnv1a64(name, len, FNV1A64_INIT);
}

static int index_rebuild(struct exporter *ex, size_t cap)
{
	uint32_t *idx = calloc(cap, sizeof(*idx));

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < ex->n_series; i++) {
		size_t mask = cap - 1, j;

		for (j = name_hash(ex->series[i].name, ex->series[i].name_len) & mask; idx[j];
		     j = (j + 1) & mask)
			;
		idx[j] = (uint32_t)i + 1;
	}
	free(ex->index);
	ex->index = idx;
	ex->index_cap = cap;
	return 0;
}

/* The series of a counter this scrape read; NULL when it read none of that name. */
const struct series *series_find(const struct exporter *ex, const char *name)
{
	size_t len = strlen(name), mask, j;

	if (!ex->index_cap)
		return NULL;
	mask = ex->index_cap - 1;
	for (j = name_hash(name, len) & mask; ex->index[j]; j = (j + 1) & mask) {
		const struct series *s = &ex->series[ex->index[j] - 1];

		if (s->name_len == len && memcmp(s->name, name, len) == 0)
			return s->seen == ex->generation ? s : NULL;
	}
	return NULL;
}

/* The series of a counter, made (and classified) on first sight; -1 when out of memory. */
static long series_get(struct exporter *ex, const char *name, size_t len)
{
	size_t mask, j;
	struct series *s;

	if (ex->index_cap) {
		mask = ex->index_cap - 1;
		for (j = name_hash(name, len) & mask; ex->index[j]; j = (j + 1) & mask) {
			s = &ex->series[ex->index[j] - 1];
			if (s->name_len == len && memcmp(s->name, name, len) == 0)
				return (long)ex->index[j] - 1;
		}
	}
	if (!array_grow(&ex->series, &ex->cap_series, ex->n_series, sizeof(*ex->series), 256))
		return -1;
	if ((ex->n_series + 1) * 2 > ex->index_cap &&
	    index_rebuild(ex, ex->index_cap ? ex->index_cap * 2 : 512) < 0)
		return -1;
	s = &ex->series[ex->n_series];
	memset(s, 0, sizeof(*s));
	memcpy(s->name, name, len);
	s->name[len] = '\0';
	s->name_len = len;
	classify(ex, s);
	mask = ex->index_cap - 1;
	for (j = name_hash(name, len) & mask; ex->index[j]; j = (j + 1) & mask)
		;
	ex->index[j] = (uint32_t)ex->n_series + 1;
	return (long)ex->n_series++;
}

static void on_counter(const struct acct_counter_sample *c, void *arg)
{
	struct exporter *ex = arg;
	const char *name = c->name;
	size_t len = c->name_len;
	uint64_t bytes = c->bytes, packets = c->packets;
	struct series *s;
	long i;

	if (len >= ACCT_COUNTER_NAME_MAX)
		return;
	/* The kernel lists the counters in the same order every time: try last scrape's. */
	i = -1;
	if (ex->n_order < ex->n_prev) {
		uint32_t k = ex->order[ex->n_order];

		if (k < ex->n_series && ex->series[k].name_len == len &&
		    memcmp(ex->series[k].name, name, len) == 0)
			i = k;
	}
	if (i < 0)
		i = series_get(ex, name, len);
	if (i < 0) {
		ex->read_err = -ENOMEM;
		return;
	}
	s = &ex->series[i];
	if (s->seen != ex->generation) {
		if (!array_grow(&ex->order, &ex->cap_order, ex->n_order, sizeof(*ex->order), 256)) {
			ex->read_err = -ENOMEM;
			return;
		}
		ex->order[ex->n_order++] = (uint32_t)i;
	}
	if (s->seen && (c->id != s->id || bytes < s->last_bytes || packets < s->last_packets)) {
		s->off_bytes += s->last_bytes;
		s->off_packets += s->last_packets;
	}
	s->id = c->id;
	s->last_bytes = bytes;
	s->last_packets = packets;
	s->seen = ex->generation;
	s->bytes = bytes + s->off_bytes;
	s->packets = packets + s->off_packets;
}

/*
 * Forgets counters the kernel no longer has (deleted pods), so memory follows
 * the live set: when they are half the series, keep only the rest.
 */
void series_compact(struct exporter *ex)
{
	size_t gone = 0, kept = 0, i;

	for (i = 0; i < ex->n_series; i++)
		gone += ex->series[i].seen != ex->generation;
	if (gone == 0 || gone * 2 < ex->n_series)
		return;
	for (i = 0; i < ex->n_series; i++) {
		if (ex->series[i].seen == ex->generation)
			ex->series[kept++] = ex->series[i];
		else
			free(ex->series[i].labels);
	}
	ex->n_series = kept;
	if (index_rebuild(ex, ex->index_cap) < 0) {
		/* Without an index the series cannot be found: start them afresh. */
		series_clear(ex);
	}
	ex->n_order = 0; /* positions moved */
}
/* Pod labels follow the store: rewritten when it was loaded again. */
void relabel_pods(struct exporter *ex)
{
	for (size_t k = 0; k < ex->n_order; k++) {
		struct series *s = &ex->series[ex->order[k]];

		if (s->kind == SERIES_POD && s->labels_store != ex->store_generation)
			classify(ex, s);
	}
}
/* The ledger's new destinations taken in (destinations.c), before the counters are read. */
int exporter_take_destinations(struct exporter *ex)
{
	return dst_ledger_take(ex->dst, time_mono_ms());
}

/*
 * One read of every counter (a scrape's generation): what a take found
 * before it is in what this read finds. 0 or a negative errno.
 */
int read_counters(struct exporter *ex)
{
	int r;

	ex->generation++;
	ex->n_prev = ex->n_order;
	ex->n_order = 0;
	ex->read_err = 0;
	exporter_take_destinations(ex);
	r = acct_reader_read(ex->reader, on_counter, ex);
	return r == 0 ? ex->read_err : r;
}
