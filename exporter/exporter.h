/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_EXPORTER_H
#define TG_EXPORTER_H

/*
 * The collectors of tollgate-agent's /metrics and their Prometheus text-format writer
 * (exposition format 0.0.4). The HTTP side is http/http.h, tied to them in
 * exporter/main.c.
 *
 * A scrape reads the nftables counters in one netlink dump, the store only
 * when it changed, and the tc classes of the pods the store says are shaped;
 * labels come from the store (written at ADD time from CNI_ARGS), never from
 * the API server.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"

/* ---- the text writer ---- */

struct expo {
	struct buf page; /* first: the size the last page needed (expo_take) */
	bool overflow;	 /* past its max: the page is cut and the scrape fails */
};

void expo_init(struct expo *x, size_t max);
void expo_free(struct expo *x);
void expo_reset(struct expo *x);
/*
 * Hands the page over (the caller frees it) and leaves x empty, ready for a
 * page of about the same size in one allocation. NULL when nothing was written.
 */
char *expo_take(struct expo *x, size_t *len);
/* # HELP and # TYPE lines of a family. */
void expo_family(struct expo *x, const char *name, const char *type, const char *help);
/*
 * One sample. `labels` alternates names and values, NULL-terminated; values
 * are escaped (backslash, double quote, newline) as the format requires.
 */
void expo_sample(struct expo *x, const char *name, const char *const *labels, double value);
void expo_sample_u64(struct expo *x, const char *name, const char *const *labels, uint64_t value);
/* A label set as it appears after a metric name: {a="1",b="2"}; nothing when empty. */
void expo_labels(struct expo *x, const char *const *labels);
/*
 * One sample from a label set written earlier by expo_labels: the hot path of
 * a scrape, one copy per sample.
 */
void expo_series_u64(struct expo *x, const char *name, size_t name_len, const char *labels,
		     size_t labels_len, uint64_t value);
/* Escapes a label value into `out` (always NUL-terminated, cut to fit). */
void expo_escape(const char *in, char *out, size_t size);

/* ---- collectors ---- */

struct exporter;

struct exporter *exporter_new(const char *data_dir, const char *network);
void exporter_free(struct exporter *ex);
/* The config's cool-down, which tells cooling addresses from free ones (default 30 s). */
void exporter_set_cooldown(struct exporter *ex, int64_t cooldown_ms);
/* Renders every family into x. Returns 0, or -EIO when nothing could be collected. */
int exporter_render(struct exporter *ex, struct expo *x);
/*
 * Takes what internetGuard.destinations' sets counted since the last take:
 * every render does, and the node daemon between scrapes, so that no entry
 * expires with bytes untaken. 0 or a negative errno.
 */
int exporter_take_destinations(struct exporter *ex);
/*
 * The same destination series as a JSON document (tollgate-agent's
 * /destinations, which tollgate-ipam top reads), from a read of its own:
 * {"namespaces": [{"namespace", "direction", "bytes", "other",
 * "destinations": [{"destination", "bytes"}]}]}. *ret is malloc'ed.
 */
int exporter_destinations_json(struct exporter *ex, char **ret, size_t *ret_len);

/* ---- the endpoint's own health ---- */

struct http_stats;
/*
 * The HTTP server's counters (http/http.h): collections and cache hits of
 * the page, open and refused connections, deadline closes.
 */
void exporter_render_http(struct expo *x, const struct http_stats *st);

#endif
