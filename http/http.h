/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_HTTP_H
#define TG_HTTP_H

/*
 * The HTTP server of the agent's metrics endpoint and of the allocator:
 * libmicrohttpd driven from the caller's own event loop (no thread of its
 * own), hardened for a port that pods on the node (or every node of the
 * cluster) can reach.
 *
 * The caller adds http_fd() to its epoll set (EPOLLIN), waits at most
 * http_timeout_ms(), and calls http_run() whenever it wakes up, readable or
 * not. http_run() accepts, enforces the limits below and lets libmicrohttpd
 * do its work; it never blocks.
 *
 * What a client can hold, whatever it sends:
 * - connections: `max_connections` in all and `per_client` per client
 *   address; once only `reserve` slots are left, they go only to addresses
 *   that hold no connection, so a scraper that comes with one connection at
 *   a time (Prometheus) finds a slot while each bad neighbour is capped.
 *   Connections past those limits are closed as soon as they are accepted;
 *   while every slot is held, nothing is accepted and new clients wait in
 *   the kernel's backlog, in order, for the next free slot.
 * - time: `deadline_ms` from accept (or from the end of the previous
 *   response on a kept-alive connection) to the end of the response, whatever
 *   trickles in or out meanwhile; then the connection is shut down.
 *   (libmicrohttpd's own timeout counts inactivity only: one byte a second
 *   keeps a connection forever.)
 * - memory: `request_memory` bytes for the request line and headers of a
 *   connection (more gets 414 or 431), and no copy of the page: every
 *   response of one page sends the same buffer.
 * - work: the page is collected at most once per `cache_ms`; requests within
 *   that window share it (and a failed collection answers 500 for as long).
 *   At most `max_pages` pages are alive (the cached one and older ones still
 *   being sent); at that bound a stale cached page is served rather than a
 *   new one collected. Older pages go within `deadline_ms`.
 * - a request body (POST, when there is a `post` callback; every other
 *   method's body is read and dropped): at most `max_body` bytes, held only
 *   while it arrives. A Content-Length above it is 413 at once, the body
 *   never read (the connection then closes); a chunked body that grows
 *   past it is dropped from there on and answered 413 at its end; a POST
 *   with neither is 411. A body trickled in is cut at the deadline like
 *   anything else.
 * So memory is about max_connections x (request_memory + a socket's
 * bookkeeping) + max_pages x the page size, plus max_body for each POST
 * whose body is arriving.
 *
 * Methods other than GET and HEAD (and POST with a post callback) get 405
 * (Allow: GET, HEAD[, POST]); HEAD is GET without the body. IPv4 only.
 */

#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_DEFAULT_PORT 9617
#define HTTP_DEFAULT_MAX_CONNECTIONS 64
#define HTTP_DEFAULT_PER_CLIENT 16
#define HTTP_DEFAULT_RESERVE 8
#define HTTP_DEFAULT_DEADLINE_MS 10000 /* Prometheus' default scrape_timeout */
#define HTTP_DEFAULT_CACHE_MS 1000
#define HTTP_DEFAULT_REQUEST_MEMORY 16384
#define HTTP_DEFAULT_MAX_PAGES 3
#define HTTP_DEFAULT_MAX_BODY 65536
#define HTTP_DEFAULT_BACKLOG 256

/* What a path answers; filled by the route callback. */
struct http_reply {
	unsigned int status; /* 0: 404 */
	const char *content_type;
	const char *body; /* body and len, unless page */
	size_t len;
	bool copy;	      /* body is the caller's: copied (else it must outlive the server) */
	bool page;	      /* answer with the shared page (see collect) */
	const char *location; /* a Location header (a redirect's); NULL: none */
};

/* Called for GET and HEAD of any path (without the query string). */
typedef void (*http_route_fn)(void *cls, const char *path, struct http_reply *ret);
/*
 * Called for POST of any path once its whole body is in: `len` bytes (NUL
 * after them, not counted). The reply's body is copied as soon as the call
 * returns (`copy` and `page` are not looked at): it need only live until
 * then. status 0: 404.
 */
typedef void (*http_post_fn)(void *cls, const char *path, const char *body, size_t len,
			     struct http_reply *ret);
/*
 * Collects a new page: a malloc'ed buffer the server then owns and frees.
 * Returns 0, or a negative errno (the request gets 500).
 */
typedef int (*http_collect_fn)(void *cls, char **ret_buf, size_t *ret_len);
/* libmicrohttpd's own diagnostics (malformed requests and the like). */
typedef void (*http_log_fn)(void *cls, const char *fmt, va_list ap);

struct http_config {
	struct sockaddr_in addr;
	unsigned int max_connections, per_client, reserve;
	unsigned int
		backlog; /* listen(2)'s; 0: HTTP_DEFAULT_BACKLOG (the kernel caps it at somaxconn) */
	unsigned int deadline_ms;
	unsigned int cache_ms; /* 0: every request collects */
	unsigned int max_pages;
	size_t request_memory;
	http_route_fn route;
	void *route_cls;
	http_post_fn post; /* NULL: POST is 405 like any other method */
	void *post_cls;
	size_t max_body; /* bytes of a POST's body */
	http_collect_fn collect;
	void *collect_cls;
	const char *page_type; /* Content-Type of the page */
	http_log_fn log;       /* NULL: none */
	void *log_cls;
};

/* What the server did, for the caller's metrics. */
struct http_stats {
	uint64_t accepted;
	uint64_t refused_client;  /* the address held per_client connections */
	uint64_t refused_reserve; /* only the reserve was left and the address held one */
	uint64_t deadline_closed; /* shut down at their deadline */
	uint64_t collections;	  /* pages collected (the one being collected included) */
	uint64_t collection_failures;
	uint64_t cache_hits;	  /* requests answered with a page collected earlier */
	uint64_t body_too_large;  /* POSTs refused with 413 */
	unsigned int connections; /* open now */
	unsigned int pages;	  /* alive now */
};

struct http_server;

/* Defaults above, every address on HTTP_DEFAULT_PORT, no callbacks. */
void http_config_defaults(struct http_config *cfg);
/*
 * Binds and listens. Returns 0, -EINVAL for a config that cannot work
 * (reserve >= max_connections, no route, a page without collect, a post
 * callback with max_body 0), or the
 * negative errno of what failed (bind: -EADDRINUSE, -EADDRNOTAVAIL, ...).
 */
int http_start(const struct http_config *cfg, struct http_server **ret);
/* Closes every connection and the socket; pages go once nothing sends them. */
void http_free(struct http_server *srv);
/* One descriptor for the caller's epoll set, readable when there is work. */
int http_fd(const struct http_server *srv);
/* Milliseconds the caller may wait before the next http_run(); -1: no limit. */
int http_timeout_ms(struct http_server *srv);
/* Does what is due. Returns 0, or a negative errno when accepting failed. */
int http_run(struct http_server *srv);
void http_get_stats(const struct http_server *srv, struct http_stats *ret);

/*
 * --listen: "ADDR:PORT", ":PORT" (every address), "HOST:PORT" (a name,
 * resolved once, here, to its first IPv4 address), or ADDR or HOST alone
 * (default_port). Returns 0; -EINVAL for bad syntax or port; -EAFNOSUPPORT
 * for an IPv6 address; -ENOENT when the name has no IPv4 address; -EAGAIN
 * when the resolver could not answer now.
 */
int http_parse_listen(const char *s, uint16_t default_port, struct sockaddr_in *ret);
/*
 * What is wrong with the --listen value `s` that http_parse_listen refused
 * with r, written to buf (`--listen "s": the name has no IPv4 address`)
 * for the daemon's message; returns the exit status: 2 for a usage error
 * (the caller then prints its usage for -EINVAL), 1 for a name that cannot
 * be resolved now.
 */
int http_listen_explain(int r, const char *s, char *buf, size_t size);

#endif
