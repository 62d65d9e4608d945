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
 *   trickles in or out meanwhile; then the connection is shut down. Over
 *   TLS the handshake is inside that time: a client that never finishes it
 *   is cut like one that never finishes its request.
 *   (libmicrohttpd's own timeout counts inactivity only: one byte a second
 *   keeps a connection forever.)
 * - memory: `request_memory` bytes for the request line and headers of a
 *   connection (more gets 414 or 431), and no copy of the page: every
 *   response of one page sends the same buffer. Over TLS, GnuTLS's session
 *   state besides: 500 kept-alive connections that had each made one
 *   request held 16.7 KiB each in plain HTTP, 27.3 KiB over TLS (VmRSS).
 * - work: the page is collected at most once per `cache_ms`; requests within
 *   that window share it (and a failed collection answers 500 for as long).
 *   At most `max_pages` pages are alive (the cached one and older ones still
 *   being sent); at that bound a stale cached page is served rather than a
 *   new one collected. Older pages go within `deadline_ms`.
 * - a request body (POST, when there is a `post` callback; every other
 *   method's body is read and dropped): at most `max_body` bytes, held only
 *   while it arrives, and only as much as has arrived: the buffer starts at
 *   1 KiB (or the announced length, if smaller) and doubles as bytes come,
 *   never past the Content-Length or max_body; a client that announces
 *   64 KiB and sends nothing holds nothing. A Content-Length above max_body
 *   is 413 at once, the body never read (the connection then closes); a
 *   chunked body that grows past it is dropped from there on and answered
 *   413 at its end; a POST with neither is 411. A body trickled in is cut
 *   at the deadline like anything else.
 * - all bodies together: `max_bodies_bytes` held by every body being
 *   received, and of those at most `unproven_bodies_bytes` by clients the
 *   `admit` callback did not vouch for. Admission is asked once a POST's
 *   headers are in (its path, its Authorization header, its address),
 *   before any of its body is read: 1 (proven: a token it verified
 *   before), 0 (not proven yet) or -1 (403 at once, the body never read).
 *   A POST that finds no room for its first bytes is answered 503 with
 *   Retry-After: 1 at once, the body never read, and the connection closes;
 *   one whose body outgrows the room left while it arrives is dropped from
 *   there on and answered the same 503 at its end (libmicrohttpd answers
 *   only before a body or after all of it), or cut at the deadline. Either
 *   counts in bodies_refused. So a flood of clients that are not proven,
 *   however many connections and bytes it brings, can hold only its share:
 *   the rest stays for the proven ones.
 * So memory is about max_connections x (request_memory + a socket's
 * bookkeeping [+ a TLS session]) + max_pages x the page size +
 * max_bodies_bytes.
 *
 * TLS: with `tls_cert_file` and `tls_key_file` (PEM) every connection is
 * served over TLS (GnuTLS, through libmicrohttpd); one speaking plain HTTP
 * gets no page, only a failed handshake. The files are read at http_start
 * and again at http_tls_reload: connections accepted after a reload use the
 * new certificate; those of before finish the request they are in and are
 * then closed (an idle one at its deadline), so none keeps serving a
 * certificate that was replaced for longer than a deadline and a request.
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
	unsigned int retry_after_s;   /* a Retry-After header (503/429); 0: none */
	const char *www_authenticate; /* a WWW-Authenticate header (401); NULL: none */
};

/* A POST whose whole body is in, as the post callback sees it. */
struct http_request {
	const char *path; /* without the query string */
	const char *body; /* len bytes, NUL after them (not counted) */
	size_t len;
	const char *authorization; /* the Authorization header's value; NULL: none */
	struct sockaddr_in peer;   /* the client's address */
	bool tls;		   /* arrived over TLS */
};

/* Called for GET and HEAD of any path (without the query string). */
typedef void (*http_route_fn)(void *cls, const char *path, struct http_reply *ret);
/*
 * Called for POST of any path once its whole body is in. The request's
 * strings live until the call returns. The reply's body is copied as soon as
 * the call returns (`copy` and `page` are not looked at): it need only live
 * until then. status 0: 404.
 */
typedef void (*http_post_fn)(void *cls, const struct http_request *req, struct http_reply *ret);
/*
 * Called once a POST's headers are in, before any of its body is read:
 * 1: the client is proven (e.g. its token verified), 0: not yet, -1:
 * refuse now, the body never read and the connection closed after the
 * answer: *refusal (its status, body, WWW-Authenticate, Retry-After; the
 * body copied when this returns), or 403 when it is left with status 0.
 * See "all bodies together".
 */
typedef int (*http_admit_fn)(void *cls, const char *path, const char *authorization,
			     const struct sockaddr_in *peer, struct http_reply *refusal);
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
	/*
	 * Requests an address may have refused by the admit callback in a
	 * second; past them its connections are closed at accept until the
	 * next second ends, before libmicrohttpd or TLS spends anything on
	 * them (a client the callback proves is never refused, so never
	 * benched). 0: no limit.
	 */
	unsigned int refusals_per_client;
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
	size_t max_bodies_bytes; /* bytes held by all bodies being received; 0: max_connections x max_body */
	size_t unproven_bodies_bytes; /* of those, what clients not proven (admit 0) may hold; 0: half of max_bodies_bytes */
	http_admit_fn admit; /* NULL: every POST is "not proven" */
	void *admit_cls;
	const char *tls_cert_file, *tls_key_file; /* PEM; both NULL: plain HTTP */
	/*
	 * Where http_start and http_tls_reload write why they refused the TLS
	 * files ("--tls-cert /etc/x.pem: ..."), NUL-terminated; NULL: nowhere.
	 * Left "" for any other failure.
	 */
	char *tls_err;
	size_t tls_err_size;
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
	uint64_t refused_benched; /* the address earned more than refusals_per_client */
	uint64_t deadline_closed; /* shut down at their deadline */
	uint64_t collections;	  /* pages collected (the one being collected included) */
	uint64_t collection_failures;
	uint64_t cache_hits;	  /* requests answered with a page collected earlier */
	uint64_t body_too_large;  /* POSTs refused with 413 */
	uint64_t bodies_refused;  /* POSTs refused with 503: no room left for their bodies */
	uint64_t admit_refused;	  /* POSTs the admit callback refused (its answer, or 403) */
	size_t bodies_bytes;	  /* held now by the bodies being received */
	size_t unproven_bytes;	  /* of those, by clients not proven */
	unsigned int connections; /* open now */
	unsigned int pages;	  /* alive now */
};

struct http_server;

/* Defaults above, every address on HTTP_DEFAULT_PORT, no callbacks. */
void http_config_defaults(struct http_config *cfg);
/*
 * Binds and listens. Returns 0, -EINVAL for a config that cannot work
 * (reserve >= max_connections, no route, a page without collect, a post
 * callback with max_body 0, a TLS certificate without its key or the other
 * way round), or the negative errno of what failed (bind: -EADDRINUSE,
 * -EADDRNOTAVAIL, ...). The TLS files: -ENOENT, -EACCES, ... (reading
 * them), -EFBIG (over 1 MiB), -EBADMSG (not PEM, or a certificate and key
 * GnuTLS refuses: malformed, or a key that is not the certificate's),
 * -EOPNOTSUPP (libmicrohttpd built without TLS); then cfg->tls_err says
 * which file and what is wrong.
 */
int http_start(const struct http_config *cfg, struct http_server **ret);
/*
 * Reads the TLS files again (the same paths): new connections get the new
 * certificate, the ones already open are closed after the request they are
 * in. Returns 0, or what http_start would for the files (cfg->tls_err says
 * it), the old certificate then still served; -EINVAL for a server without
 * TLS.
 */
int http_tls_reload(struct http_server *srv);
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
