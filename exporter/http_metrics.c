// SPDX-License-Identifier: Apache-2.0
/*
 * The metrics endpoint's own families: what the HTTP server refused, cut
 * and collected, so that a starved or hammered endpoint shows on the page
 * that Prometheus does get.
 */
#include "exporter/exporter.h"
#include "http/http.h"

void exporter_render_http(struct expo *x, const struct http_stats *st)
{
	static const char *const client[] = { "reason", "client", NULL };
	static const char *const reserve[] = { "reason", "reserve", NULL };
	static const char *const benched[] = { "reason", "benched", NULL };

	expo_family(x, "tollgate_scrape_collections_total", "counter",
		    "Pages collected for /metrics, this one included; requests within the page "
		    "cache window share one.");
	expo_sample_u64(x, "tollgate_scrape_collections_total", NULL, st->collections);
	expo_family(x, "tollgate_scrape_cache_hits_total", "counter",
		    "Requests for /metrics answered with a page collected for an earlier request.");
	expo_sample_u64(x, "tollgate_scrape_cache_hits_total", NULL, st->cache_hits);
	expo_family(x, "tollgate_http_connections", "gauge",
		    "Open connections to the metrics endpoint.");
	expo_sample_u64(x, "tollgate_http_connections", NULL, st->connections);
	expo_family(x, "tollgate_http_connections_refused_total", "counter",
		    "Connections closed at accept: the client address held its share (client), "
		    "only the slots kept for clients holding none were left (reserve), or the "
		    "address had too many requests refused in the last second (benched).");
	expo_sample_u64(x, "tollgate_http_connections_refused_total", client, st->refused_client);
	expo_sample_u64(x, "tollgate_http_connections_refused_total", reserve, st->refused_reserve);
	expo_sample_u64(x, "tollgate_http_connections_refused_total", benched, st->refused_benched);
	expo_family(x, "tollgate_http_deadline_closed_total", "counter",
		    "Connections shut down because their request and response took longer than "
		    "the deadline (slow or stalled clients).");
	expo_sample_u64(x, "tollgate_http_deadline_closed_total", NULL, st->deadline_closed);
}
