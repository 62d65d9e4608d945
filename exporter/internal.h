/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_EXPORTER_INTERNAL_H
#define TG_EXPORTER_INTERNAL_H

/* Between the exporter's collectors; not part of its public face. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accounting/accounting.h"
#include "exporter/exporter.h"
#include "ipam/ipam.h"
#include "ipam/store.h"

/* The shaper collector (tc.c): the HTB classes Tollgate made for the store's pods. */
struct tc_collector;
struct tc_collector *tc_collector_new(void);
void tc_collector_free(struct tc_collector *tc);
/*
 * Reads the classes of every shaped pod, its namespace and the node, and
 * renders the tollgate_shaper_* families. `store` changes whenever st was
 * loaded again. Returns 0, or a negative errno with nothing rendered.
 */
int tc_collect(struct tc_collector *tc, const struct ipam_state *st, uint64_t store,
	       struct expo *x);

/*
 * The internet guard's gauge (conntrack.c): counts[ns] gets the connections
 * to internet destinations (outside set `internal`) that the pods of index
 * `ns` hold, from one conntrack dump. pods is sorted in place. 0 or a
 * negative errno.
 */
struct ct_pod {
	uint32_t ip; /* first: the sort key */
	uint32_t ns; /* < n_ns */
};
int ct_count_internet(struct ct_pod *pods, size_t n_pods, size_t n_ns, uint64_t *counts);

/*
 * internetGuard.destinations' ledger (destinations.c): the kernel's
 * destination sets taken into per-prefix series that only grow and, with
 * `other`, sum to each namespace's internet bytes.
 */
struct dst_ledger;
struct dst_ledger *dst_ledger_new(void);
void dst_ledger_free(struct dst_ledger *l);
/* Takes what every set counted since the last take (a reset read). 0 or a negative errno. */
int dst_ledger_take(struct dst_ledger *l, int64_t now_ms);
/*
 * A take from given samples (what dst_ledger_take does with the kernel's):
 * begin, each set, each element's bytes since the last take, end (complete:
 * every set was read, so a book not seen is gone).
 */
void dst_ledger_begin(struct dst_ledger *l, int64_t now_ms);
int dst_ledger_set(struct dst_ledger *l, const char *ns, enum acct_dir dir, uint8_t prefix_len,
		   uint32_t top);
int dst_ledger_add(struct dst_ledger *l, const char *ns, enum acct_dir dir, uint32_t prefix,
		   uint64_t bytes);
void dst_ledger_end(struct dst_ledger *l, bool complete);
/*
 * At a scrape, after the counters' read: total gives a namespace's internet
 * bytes in a direction (false: not read, the book is not shown).
 */
typedef bool (*dst_total_fn)(const char *ns, enum acct_dir dir, uint64_t *ret, void *arg);
void dst_ledger_settle(struct dst_ledger *l, dst_total_fn total, void *arg);
/* What the last settle showed: each book (false: skip its series), then its top prefixes. */
typedef bool (*dst_book_fn)(const char *ns, enum acct_dir dir, uint64_t total, uint64_t other,
			    void *arg);
typedef void (*dst_series_fn)(const char *ns, enum acct_dir dir, uint32_t prefix,
			      uint8_t prefix_len, uint64_t bytes, void *arg);
void dst_ledger_visit(const struct dst_ledger *l, dst_book_fn book, dst_series_fn series,
		      void *arg);
/* Prefixes the ledger holds, all books together (what bounds its memory). */
size_t dst_ledger_entries(const struct dst_ledger *l);
/* "203.0.113.0/24" */
#define DST_LABEL_MAX 24
void dst_prefix_label(uint32_t prefix, uint8_t prefix_len, char ret[DST_LABEL_MAX]);

/*
 * The scrape's state (collect.c): one series per nftables counter, kept
 * across scrapes (series.c), and the IPAM store read on change (store.c).
 */
enum series_kind {
	SERIES_OTHER,
	SERIES_NS,
	SERIES_POD,
	SERIES_HOST,
	SERIES_SPOOFED,
	SERIES_METADATA_DROP,
	SERIES_AGENT_DROP,
	SERIES_INVALID_DROP,
	SERIES_NEIGHBOUR_DROP,
	SERIES_ARP_DROP,
	SERIES_REFUSED
};

struct series {
	char name[ACCT_COUNTER_NAME_MAX];
	size_t name_len;
	enum series_kind kind;
	enum acct_class cls;
	char *labels; /* {...} as written after the family name; NULL: not shown */
	size_t labels_len;
	uint64_t labels_store; /* store generation they were written for (pods only) */
	uint64_t id;	       /* the kernel object read last (acct_counter_sample.id) */
	uint64_t last_bytes, last_packets, off_bytes, off_packets;
	uint64_t bytes, packets; /* this scrape, with offsets */
	uint64_t seen;		 /* scrape generation */
};

struct exporter {
	char data_dir[2048];
	char network[160];
	struct ipam_state state;
	const struct ipam_attachment **by_veth; /* state's attachments sorted by host veth */
	struct ipam_store_stamp state_stamp;	/* of the state loaded */
	uint64_t store_generation;		/* bumped on every store load */
	struct acct_reader *reader;
	struct tc_collector *tc;
	struct dst_ledger *dst; /* internetGuard.destinations */
	struct series *series;	/* dense; index[] maps names to positions */
	size_t n_series, cap_series;
	uint32_t *index; /* open addressing: position + 1, 0 = empty */
	size_t index_cap;
	uint32_t *order; /* this scrape's series, in the kernel's order */
	size_t n_order, cap_order;
	size_t n_prev; /* order[] entries still valid from the last scrape */
	int read_err;
	uint64_t generation;
	int64_t cooldown_ms; /* the config's: what "cooling" means */
};

/* The series (series.c): the counters read into them, their labels and pods. */
void series_clear(struct exporter *ex);
const struct series *series_find(const struct exporter *ex, const char *name);
void series_compact(struct exporter *ex);
void relabel_pods(struct exporter *ex);
int read_counters(struct exporter *ex);

/* The store (store.c): state.json re-read when it was replaced, pods by host veth. */
int refresh_store(struct exporter *ex);
const struct ipam_attachment *by_veth(const struct exporter *ex, const char *veth);

#endif
