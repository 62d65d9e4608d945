// SPDX-License-Identifier: Apache-2.0
/*
 * The scrape: nftables counters (one dump, as series: series.c), the IPAM
 * store (re-read on change: store.c) and the shaper's classes (tc.c),
 * rendered in one page.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "accounting/accounting.h"
#include "exporter/internal.h"
#include "ipam/ipam.h"
#include "ipam/store.h"
#include "lib/version.h"
#include "lib/util.h"

struct exporter *exporter_new(const char *data_dir, const char *network)
{
	struct exporter *ex = calloc(1, sizeof(*ex));

	if (!ex)
		return NULL;
	snprintf(ex->data_dir, sizeof(ex->data_dir), "%s", data_dir);
	snprintf(ex->network, sizeof(ex->network), "%s", network);
	ipam_state_init(&ex->state);
	ex->cooldown_ms = IPAM_DEFAULT_COOLDOWN_MS;
	ex->reader = acct_reader_new();
	ex->tc = tc_collector_new();
	ex->dst = dst_ledger_new();
	if (!ex->reader || !ex->tc || !ex->dst) {
		acct_reader_free(ex->reader);
		tc_collector_free(ex->tc);
		dst_ledger_free(ex->dst);
		free(ex);
		return NULL;
	}
	return ex;
}

void exporter_set_cooldown(struct exporter *ex, int64_t cooldown_ms)
{
	ex->cooldown_ms = cooldown_ms;
}
void exporter_free(struct exporter *ex)
{
	if (!ex)
		return;
	ipam_state_free(&ex->state);
	free(ex->by_veth);
	series_clear(ex);
	free(ex->order);
	acct_reader_free(ex->reader);
	tc_collector_free(ex->tc);
	dst_ledger_free(ex->dst);
	free(ex);
}
static void render_kind(struct exporter *ex, struct expo *x, enum series_kind kind, bool bytes,
			const char *family, const char *help)
{
	size_t flen = strlen(family);

	expo_family(x, family, "counter", help);
	for (size_t k = 0; k < ex->n_order; k++) {
		const struct series *s = &ex->series[ex->order[k]];

		if (s->kind == kind && s->labels)
			expo_series_u64(x, family, flen, s->labels, s->labels_len,
					bytes ? s->bytes : s->packets);
	}
}

static const struct {
	enum series_kind kind;
	bool bytes;
	const char *family, *help;
} counter_families[] = {
	{ SERIES_NS, true, "tollgate_namespace_bytes_total",
	  "IP bytes of pods by Kubernetes namespace, direction and traffic class (internal: "
	  "destination or source in internalCIDRs)." },
	{ SERIES_POD, true, "tollgate_pod_bytes_total",
	  "IP bytes by pod (accounting.perPod), direction and traffic class." },
	{ SERIES_HOST, true, "tollgate_host_bytes_total",
	  "IP bytes of the node itself (and hostNetwork pods) by direction and traffic class." },
	{ SERIES_NS, false, "tollgate_namespace_packets_total",
	  "IP packets of pods by Kubernetes namespace, direction and traffic class." },
	{ SERIES_POD, false, "tollgate_pod_packets_total",
	  "IP packets by pod (accounting.perPod), direction and traffic class." },
	{ SERIES_HOST, false, "tollgate_host_packets_total",
	  "IP packets of the node itself by direction and traffic class." },
	{ SERIES_SPOOFED, false, "tollgate_spoofed_packets_total",
	  "Packets from pods dropped before any counting: a source that is not the sending pod's "
	  "address, or IPv6; by the sender's namespace (no namespace label: from a pod link no "
	  "attachment holds) and family." },
	{ SERIES_METADATA_DROP, false, "tollgate_namespace_metadata_dropped_packets_total",
	  "Packets from pods of namespaces not in nodeAccess.metadataNamespaces to the cloud's "
	  "metadata (IMDS 169.254.169.254, the WireServer 168.63.129.16 but its DNS), dropped; by "
	  "the sender's namespace." },
	{ SERIES_AGENT_DROP, false, "tollgate_namespace_metrics_port_dropped_packets_total",
	  "TCP packets from pods of namespaces not in nodeAccess.metricsNamespaces to "
	  "nodeAccess.metricsPort of the node or of an internal address, and first packets to a "
	  "port of nodeAccess.servicePorts from pods of namespaces its entry does not list, "
	  "dropped; by the sender's namespace." },
	{ SERIES_INVALID_DROP, false, "tollgate_namespace_invalid_dropped_packets_total",
	  "Packets from pods that conntrack could not place in a connection (state invalid: a "
	  "SYN|FIN, an out-of-window segment), dropped before the guard, the counters and the "
	  "masquerade see them; by the sender's namespace." },
	{ SERIES_NEIGHBOUR_DROP, false, "tollgate_namespace_neighbour_dropped_packets_total",
	  "First packets of pods' new connections to an on-link next hop the node had not "
	  "resolved lately, dropped over the namespace's nodeAccess.newNeighboursPerSecond (the "
	  "node's neighbour table is shared by every tenant); by the sender's namespace." },
	{ SERIES_REFUSED, false, "tollgate_namespace_connections_refused_total",
	  "New connections of a namespace's pods refused at their first packet (a TCP reset, "
	  "else ICMP admin-prohibited): reason concurrent or rate, internet connections over "
	  "internetGuard's limits on this node; reason ceiling, connections to any destination "
	  "over the namespace's share of the node's conntrack table "
	  "(nodeAccess.namespaceConnections)." },
	{ SERIES_ARP_DROP, false, "tollgate_pod_arp_dropped_packets_total",
	  "ARP packets from pods' links, dropped before the node's neighbour table sees them "
	  "(pods need no ARP: both ends have permanent entries)." },
};

/*
 * tollgate_namespace_internet_connections for the namespaces the guard is on
 * for (those with refused-connection counters): one conntrack dump.
 */
static void render_guard(struct exporter *ex, struct expo *x)
{
	static const char family[] = "tollgate_namespace_internet_connections";
	char(*names)[ACCT_COUNTER_NAME_MAX] = NULL;
	struct ct_pod *pods = NULL;
	uint64_t *counts = NULL;
	size_t n_ns = 0, n_pods = 0;

	for (size_t k = 0; k < ex->n_order; k++)
		n_ns += ex->series[ex->order[k]].kind == SERIES_REFUSED;
	if (!n_ns)
		return;
	names = calloc(n_ns, sizeof(*names));
	counts = calloc(n_ns, sizeof(*counts));
	pods = calloc(ex->state.n_att + 1, sizeof(*pods));
	if (!names || !counts || !pods)
		goto out;
	n_ns = 0;
	for (size_t k = 0; k < ex->n_order; k++) {
		const struct series *s = &ex->series[ex->order[k]];
		enum acct_refusal why;

		if (s->kind == SERIES_REFUSED &&
		    acct_refused_parse(s->name, s->name_len, names[n_ns], &why) ==
			    ACCT_OWNER_NAMESPACE &&
		    why == ACCT_REFUSED_CONCURRENT)
			n_ns++;
	}
	for (size_t i = 0; i < ex->state.n_att; i++)
		for (size_t j = 0; j < n_ns; j++)
			if (strcmp(ex->state.att[i].k8s_namespace, names[j]) == 0) {
				pods[n_pods++] =
					(struct ct_pod){ ex->state.att[i].ip, (uint32_t)j };
				break;
			}
	if (ct_count_internet(pods, n_pods, n_ns, counts) < 0)
		goto out;
	expo_family(
		x, family, "gauge",
		"Connections a guarded namespace's pods hold to internet destinations on this node "
		"(conntrack flows, as internetGuard counts them against its limit).");
	for (size_t j = 0; j < n_ns; j++) {
		const char *l[] = { "namespace", names[j], NULL };

		expo_sample_u64(x, family, l, counts[j]);
	}
out:
	free(names);
	free(counts);
	free(pods);
}

/* ---- internetGuard.destinations (the ledger: destinations.c) ---- */

/* A namespace's internet bytes in a direction, as this scrape read its counter. */
static bool ns_internet_total(const char *ns, enum acct_dir dir, uint64_t *ret, void *arg)
{
	char name[ACCT_COUNTER_NAME_MAX];
	const struct series *s;

	acct_ns_counter_name(
		ns, dir == ACCT_DIR_EGRESS ? ACCT_EGRESS_INTERNET : ACCT_INGRESS_INTERNET, name);
	s = series_find(arg, name);
	if (s)
		*ret = s->bytes;
	return s != NULL;
}

#define DST_FAMILY "tollgate_namespace_destination_bytes_total"

static bool render_book(const char *ns, enum acct_dir dir, uint64_t total, uint64_t other,
			void *arg)
{
	const char *l[] = { "namespace",	 ns,  "destination", "other", "direction",
			    acct_dir_names[dir], NULL };

	(void)total;
	expo_sample_u64(arg, DST_FAMILY, l, other);
	return true;
}

static void render_prefix(const char *ns, enum acct_dir dir, uint32_t prefix, uint8_t prefix_len,
			  uint64_t bytes, void *arg)
{
	char dst[DST_LABEL_MAX];
	const char *l[] = { "namespace",	 ns,  "destination", dst, "direction",
			    acct_dir_names[dir], NULL };

	dst_prefix_label(prefix, prefix_len, dst);
	expo_sample_u64(arg, DST_FAMILY, l, bytes);
}

static void render_destinations(struct exporter *ex, struct expo *x)
{
	dst_ledger_settle(ex->dst, ns_internet_total, ex);
	expo_family(x, DST_FAMILY, "counter",
		    "IP bytes of a namespace's internet traffic by destination prefix "
		    "(internetGuard.destinations: its top prefixes, each counted from when it "
		    "entered the top, and other); a namespace's series sum to its internet bytes.");
	dst_ledger_visit(ex->dst, render_book, render_prefix, x);
}
struct dst_json {
	json_object *list, *book;
};

static bool json_book(const char *ns, enum acct_dir dir, uint64_t total, uint64_t other, void *arg)
{
	struct dst_json *j = arg;
	json_object *dsts = json_object_new_array();

	j->book = json_object_new_object();
	json_object_object_add(j->book, "namespace", json_object_new_string(ns));
	json_object_object_add(j->book, "direction", json_object_new_string(acct_dir_names[dir]));
	json_object_object_add(j->book, "bytes", json_object_new_int64((int64_t)total));
	json_object_object_add(j->book, "other", json_object_new_int64((int64_t)other));
	json_object_object_add(j->book, "destinations", dsts);
	json_object_array_add(j->list, j->book);
	return true;
}

static void json_prefix(const char *ns, enum acct_dir dir, uint32_t prefix, uint8_t prefix_len,
			uint64_t bytes, void *arg)
{
	struct dst_json *j = arg;
	json_object *d = json_object_new_object(), *dsts = NULL;
	char label[DST_LABEL_MAX];

	(void)ns;
	(void)dir;
	dst_prefix_label(prefix, prefix_len, label);
	json_object_object_add(d, "destination", json_object_new_string(label));
	json_object_object_add(d, "bytes", json_object_new_int64((int64_t)bytes));
	json_object_object_get_ex(j->book, "destinations", &dsts);
	json_object_array_add(dsts, d);
}

int exporter_destinations_json(struct exporter *ex, char **ret, size_t *ret_len)
{
	struct dst_json j = { json_object_new_array(), NULL };
	json_object *doc = json_object_new_object();
	const char *text;
	int r = read_counters(ex);

	if (r == 0) {
		dst_ledger_settle(ex->dst, ns_internet_total, ex);
		dst_ledger_visit(ex->dst, json_book, json_prefix, &j);
	}
	json_object_object_add(doc, "namespaces", j.list);
	text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
	*ret = text ? strdup(text) : NULL;
	*ret_len = *ret ? strlen(*ret) : 0;
	json_object_put(doc);
	if (r < 0) {
		free(*ret);
		*ret = NULL;
		return r;
	}
	return *ret ? 0 : -ENOMEM;
}

int exporter_render(struct exporter *ex, struct expo *x)
{
	int64_t t0 = time_mono_ns(), t1, t2, t3, t4;
	int nft_r, ipam_r, tc_r = -ENODATA;
	struct ipam_counts c;
	const char *up_nft[] = { "collector", "nftables", NULL };
	const char *up_ipam[] = { "collector", "ipam", NULL };
	const char *up_tc[] = { "collector", "shaper", NULL };
	const char *version[] = { "version", tg_build_version, "commit", tg_build_commit, NULL };

	nft_r = read_counters(ex);
	t1 = time_mono_ns();
	ipam_r = refresh_store(ex);
	if (ipam_r == 0)
		ipam_r = ipam_count(&ex->state, time_boot_ms(), ex->cooldown_ms, &c);
	t2 = time_mono_ns();
	if (nft_r == 0)
		relabel_pods(ex);

	expo_family(x, "tollgate_build_info", "gauge", "Tollgate build; the value is always 1.");
	expo_sample(x, "tollgate_build_info", version, 1);
	if (nft_r == 0) {
		for (size_t i = 0; i < ARRAY_SIZE(counter_families); i++)
			render_kind(ex, x, counter_families[i].kind, counter_families[i].bytes,
				    counter_families[i].family, counter_families[i].help);
		if (ipam_r == 0)
			render_guard(ex, x);
		render_destinations(ex, x);
	}
	t3 = time_mono_ns();
	/* Which pods are shaped, and how, is in the store. */
	if (ipam_r == 0)
		tc_r = tc_collect(ex->tc, &ex->state, ex->store_generation, x);
	t4 = time_mono_ns();
	if (ipam_r == 0) {
		const char *states[] = { "allocated", "free", "cooling", "retired" };
		size_t vals[] = { c.allocated, c.free, c.cooling, c.retired };

		/*
		 * Each address the node holds in one state; the states' sum is a
		 * family of its own (a sum over the states counts no total twice).
		 */
		expo_family(x, "tollgate_ipam_addresses", "gauge",
			    "Addresses the node holds, each in one state: allocated (in the pool, "
			    "a pod's), free (in the pool, to be handed out), cooling (in the pool, "
			    "released within the cool-down), retired (a pod's, no longer in the "
			    "pool). They sum to tollgate_ipam_held_addresses.");
		for (size_t i = 0; i < ARRAY_SIZE(states); i++) {
			const char *l[] = { "state", states[i], NULL };

			expo_sample_u64(x, "tollgate_ipam_addresses", l, vals[i]);
		}
		expo_family(x, "tollgate_ipam_held_addresses", "gauge",
			    "Addresses the node holds: its pool's and the retired ones pods still "
			    "hold (the sum of tollgate_ipam_addresses over its states).");
		expo_sample_u64(x, "tollgate_ipam_held_addresses", NULL, c.held);
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
	expo_sample(x, "tollgate_collector_up", up_tc, tc_r == 0);
	expo_family(x, "tollgate_collector_duration_seconds", "gauge",
		    "Time each collector took on this scrape.");
	expo_sample(x, "tollgate_collector_duration_seconds", up_nft, (double)(t1 - t0) / 1e9);
	expo_sample(x, "tollgate_collector_duration_seconds", up_ipam, (double)(t2 - t1) / 1e9);
	expo_sample(x, "tollgate_collector_duration_seconds", up_tc, (double)(t4 - t3) / 1e9);
	expo_family(x, "tollgate_scrape_duration_seconds", "gauge",
		    "Time to collect and render this page.");
	expo_sample(x, "tollgate_scrape_duration_seconds", NULL,
		    (double)(time_mono_ns() - t0) / 1e9);

	if (nft_r == 0)
		series_compact(ex);
	return x->overflow ? -ENOBUFS : 0;
}
