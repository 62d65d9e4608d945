// SPDX-License-Identifier: Apache-2.0
/*
 * The HTTP server of the metrics endpoint: libmicrohttpd without a thread of
 * its own, fed connections that this file accepts.
 *
 * Why accept here rather than let libmicrohttpd listen: its per-IP limit
 * and connection limit cannot keep slots for clients that hold none, and it
 * has no way to close a connection from outside. Accepting here decides
 * admission with the client's address and this table in hand, and keeps
 * each connection's fd and start time so that a sweep can shut down
 * (shutdown(2)) those past their deadline; libmicrohttpd then sees the end
 * of the stream and closes it the usual way, calling back so that the slot
 * frees. Everything runs on the caller's thread, inside http_run(), so the
 * table needs no lock and an fd in it is always the connection's own (it is
 * removed, in the close callback, before libmicrohttpd closes the fd).
 *
 * One inner epoll set holds the listening socket and libmicrohttpd's own
 * epoll fd: the caller sees one descriptor.
 *
 * TLS: libmicrohttpd (GnuTLS) does the handshake on the connections this
 * file hands it, so admission and the deadline hold as for plain HTTP (a
 * handshake that never ends is cut like a request that never ends). It
 * cannot change a running daemon's certificate: a reload starts a new
 * daemon with the new files, which takes every connection accepted from
 * then on; the old one is retired: each of its connections is closed once
 * the response it is in is sent (an idle one at its deadline), and the
 * daemon stops when it has none left.
 *
 * The page: one buffer per collection, wrapped in one libmicrohttpd
 * response that every request within the cache window queues (libmicrohttpd
 * counts the references and sends straight from the buffer); the buffer is
 * freed by the response's free callback when the last connection sending it
 * is done and the cache has moved on.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http/http.h"
#include "http/internal.h"
#include "lib/util.h"

#define ACCEPT_BATCH 64	   /* per http_run: the rest on the next (the fd stays readable) */
#define ACCEPT_REST_MS 100 /* out of descriptors: stop accepting for a moment */
#define BODY_FIRST 1024	   /* a body's first buffer (unless it announced less) */
#define PEM_MAX (1 << 20)  /* a certificate chain or key file; more is not one */

struct page {
	struct http_server *srv;
	char *buf;
	size_t len;
	struct MHD_Response *resp; /* the cache's reference; NULL once dropped */
	int64_t born_ms;
};

/*
 * One libmicrohttpd daemon: the current one takes new connections, retired
 * ones (after a TLS reload) only finish theirs. Its PEM files' text lives
 * as long as it does.
 */
struct daemon {
	struct MHD_Daemon *mhd;
	int epoll_fd; /* libmicrohttpd's, in the server's own epoll set */
	char *cert, *key;
	struct daemon *next; /* the retired ones */
};

struct http_server {
	struct http_config cfg;
	struct daemon *cur;	/* takes every new connection */
	struct daemon *retired; /* finishing theirs */
	bool tls;
	size_t bodies_max, unproven_max;
	char *mhd_msg; /* while a daemon starts: libmicrohttpd's last message (the TLS error) */
	size_t mhd_msg_size;
	int listen_fd, epfd;
	bool listen_armed;
	int64_t accept_rest_ms; /* 0, or no accepting until then */
	struct conntab conns;
	struct strikes *strikes; /* with refusals_per_client */
	struct page *page;	 /* the cached page (holds a reference) */
	bool failed;		 /* the last collection failed, at failed_ms */
	int64_t failed_ms;
	struct http_stats stats;
};

void http_config_defaults(struct http_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->addr.sin_family = AF_INET;
	cfg->addr.sin_port = htons(HTTP_DEFAULT_PORT);
	cfg->addr.sin_addr.s_addr = htonl(INADDR_ANY);
	cfg->max_connections = HTTP_DEFAULT_MAX_CONNECTIONS;
	cfg->per_client = HTTP_DEFAULT_PER_CLIENT;
	cfg->reserve = HTTP_DEFAULT_RESERVE;
	cfg->deadline_ms = HTTP_DEFAULT_DEADLINE_MS;
	cfg->cache_ms = HTTP_DEFAULT_CACHE_MS;
	cfg->max_pages = HTTP_DEFAULT_MAX_PAGES;
	cfg->request_memory = HTTP_DEFAULT_REQUEST_MEMORY;
	cfg->max_body = HTTP_DEFAULT_MAX_BODY;
	cfg->backlog = HTTP_DEFAULT_BACKLOG;
	cfg->page_type = "text/plain";
}

/* ---- the page ---- */

/* libmicrohttpd's last reference went: nobody sends this page any more. */
static void page_free(void *cls)
{
	struct page *p = cls;

	p->srv->stats.pages--;
	free(p->buf);
	free(p);
}

static void page_drop(struct page *p)
{
	struct MHD_Response *resp;

	if (!p || !p->resp)
		return;
	resp = p->resp;
	p->resp = NULL;
	MHD_destroy_response(resp); /* may call page_free */
}

static int page_collect(struct http_server *srv, int64_t now, struct page **ret)
{
	struct page *p;
	char *buf = NULL;
	size_t len = 0;
	int r;

	srv->stats.collections++;
	r = srv->cfg.collect(srv->cfg.collect_cls, &buf, &len);
	if (r >= 0 && (!buf || !len))
		r = -ENODATA;
	if (r < 0) {
		free(buf);
		return r;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		free(buf);
		return -ENOMEM;
	}
	*p = (struct page){ .srv = srv, .buf = buf, .len = len, .born_ms = now };
	p->resp = MHD_create_response_from_buffer_with_free_callback_cls(len, buf, page_free, p);
	if (!p->resp) {
		free(buf);
		free(p);
		return -ENOMEM;
	}
	srv->stats.pages++;
	if (MHD_add_response_header(p->resp, MHD_HTTP_HEADER_CONTENT_TYPE, srv->cfg.page_type) !=
	    MHD_YES) {
		page_drop(p);
		return -ENOMEM;
	}
	*ret = p;
	return 0;
}

/*
 * The page for a request now: the cached one while it is young, else a new
 * collection, except when max_pages are alive (then the cached one, stale).
 */
static int page_get(struct http_server *srv, struct page **ret)
{
	int64_t now = time_mono_ms();
	struct page *p;
	int r;

	if (srv->page && now - srv->page->born_ms < (int64_t)srv->cfg.cache_ms) {
		srv->stats.cache_hits++;
		*ret = srv->page;
		return 0;
	}
	if (srv->failed && now - srv->failed_ms < (int64_t)srv->cfg.cache_ms)
		return -EIO;
	if (srv->page && srv->stats.pages >= srv->cfg.max_pages) {
		srv->stats.cache_hits++;
		*ret = srv->page;
		return 0;
	}
	r = page_collect(srv, now, &p);
	if (r < 0) {
		srv->stats.collection_failures++;
		srv->failed = true;
		srv->failed_ms = now;
		return r;
	}
	srv->failed = false;
	page_drop(srv->page);
	srv->page = p;
	*ret = p;
	return 0;
}

/* ---- requests ---- */

static const char text_type[] = "text/plain; charset=utf-8";

/*
 * The markers a request's context holds (*req_cls) besides a body being
 * read: the request was announced (the server itself), it was answered
 * before its body was read, its chunked body outgrew max_body, or its body
 * outgrew the room all bodies share; in the last three, what still comes of
 * the body is dropped.
 */
static char answered, overgrown, crowded;

/*
 * A POST body as it arrives: cap bytes held (one more for a NUL), grown as
 * bytes come, never past `want` (the Content-Length, or max_body when
 * chunked); counted in the server's held bytes (and its unproven ones).
 */
struct body {
	char *buf;
	size_t len, cap, want;
	bool proven;
};

/* Room for `add` more bytes of a body: the cap of all, and the share of the unproven. */
static bool bodies_room(const struct http_server *srv, bool proven, size_t add)
{
	if (add > srv->bodies_max - srv->stats.bodies_bytes)
		return false;
	return proven || add <= srv->unproven_max - srv->stats.unproven_bytes;
}

static void bodies_count(struct http_server *srv, bool proven, size_t add, bool take)
{
	if (take) {
		srv->stats.bodies_bytes += add;
		if (!proven)
			srv->stats.unproven_bytes += add;
	} else {
		srv->stats.bodies_bytes -= add;
		if (!proven)
			srv->stats.unproven_bytes -= add;
	}
}

static void body_free(struct http_server *srv, struct body *b)
{
	if (!b)
		return;
	bodies_count(srv, b->proven, b->cap, false);
	free(b->buf);
	free(b);
}

/*
 * Grows b for `more` bytes: twice its size (at least BODY_FIRST) as long as
 * the room allows, else just what it needs. Returns 0, -ENOSPC when the room
 * is not there, -ENOMEM.
 */
static int body_grow(struct http_server *srv, struct body *b, size_t more)
{
	size_t need = b->len + more, cap = b->cap * 2;
	char *p;

	if (need <= b->cap)
		return 0;
	if (cap < BODY_FIRST)
		cap = BODY_FIRST;
	if (cap < need)
		cap = need;
	if (cap > b->want)
		cap = b->want;
	if (cap < need)
		return -ENOSPC; /* not reached: libmicrohttpd gives no more than announced */
	if (!bodies_room(srv, b->proven, cap - b->cap)) {
		cap = need;
		if (!bodies_room(srv, b->proven, cap - b->cap))
			return -ENOSPC;
	}
	p = realloc(b->buf, cap + 1);
	if (!p)
		return -ENOMEM;
	bodies_count(srv, b->proven, cap - b->cap, true);
	b->buf = p;
	b->cap = cap;
	return 0;
}

/* A reply's extra headers: the ones the callbacks may ask for, and close. */
struct reply_headers {
	const char *location, *www_authenticate;
	unsigned int retry_after_s;
	bool close;
};

static enum MHD_Result queue_reply(const struct http_server *srv, struct MHD_Connection *conn,
				   unsigned int status, const char *type, const char *body,
				   size_t len, bool copy, const struct reply_headers *h)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		len, (void *)body, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
	enum MHD_Result r;
	char num[24];

	if (!resp)
		return MHD_NO;
	if (type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (h && h->location)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, h->location);
	if (h && h->www_authenticate)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					h->www_authenticate);
	if (h && h->retry_after_s) {
		snprintf(num, sizeof(num), "%u", h->retry_after_s);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, num);
	}
	if (h && h->close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
					srv->cfg.post ? "GET, HEAD, POST" : "GET, HEAD");
	r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

/* The callback's reply: its headers with it. */
static enum MHD_Result queue_callers(const struct http_server *srv, struct MHD_Connection *conn,
				     const struct http_reply *rep, bool copy)
{
	struct reply_headers h = { .location = rep->location,
				   .www_authenticate = rep->www_authenticate,
				   .retry_after_s = rep->retry_after_s };

	return queue_reply(srv, conn, rep->status, rep->content_type, rep->body ? rep->body : "",
			   rep->body ? rep->len : 0, copy, &h);
}

#define QUEUE_TEXT(srv, conn, status, text) \
	queue_reply(srv, conn, status, text_type, text, sizeof(text) - 1, false, NULL)

/*
 * A body that will not fit is refused before it is read, from its
 * Content-Length, at once; libmicrohttpd closes the connection after the
 * answer, as the rest of the body is never read. (A chunked body that
 * outgrows max_body cannot be answered then: libmicrohttpd queues a
 * response only before the body or after all of it. The rest is dropped as
 * it comes and the 413 sent at its end, or the deadline cuts it.)
 */
static enum MHD_Result too_large(struct http_server *srv, struct MHD_Connection *conn,
				 void **req_cls)
{
	srv->stats.body_too_large++;
	*req_cls = &answered;
	return QUEUE_TEXT(srv, conn, MHD_HTTP_CONTENT_TOO_LARGE, "request body too large\n");
}

/* No room for a body among the others: come back in a second (and on another connection). */
static enum MHD_Result no_room(struct http_server *srv, struct MHD_Connection *conn, void **req_cls)
{
	static const char text[] = "too many request bodies at once; retry\n";
	const struct reply_headers h = { .retry_after_s = 1, .close = true };

	*req_cls = &answered;
	return queue_reply(srv, conn, MHD_HTTP_SERVICE_UNAVAILABLE, text_type, text,
			   sizeof(text) - 1, false, &h);
}

static void peer_of(struct MHD_Connection *conn, struct sockaddr_in *ret)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

	memset(ret, 0, sizeof(*ret));
	if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
		memcpy(ret, ci->client_addr, sizeof(*ret));
}

static const char *authorization_of(struct MHD_Connection *conn)
{
	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
}

/*
 * A POST announced: its length known (or chunked) and within bounds, the
 * client admitted, room for its first bytes. Nothing is held yet: the
 * buffer comes with the bytes.
 */
static enum MHD_Result post_begin(struct http_server *srv, struct MHD_Connection *conn,
				  const char *url, void **req_cls)
{
	const char *cl =
		MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_TRANSFER_ENCODING);
	unsigned long long n = 0;
	struct sockaddr_in peer;
	struct body *b;
	int proven = 0;
	char *end;

	if (cl) {
		/* libmicrohttpd refused a malformed one already (400) */
		errno = 0;
		n = strtoull(cl, &end, 10);
		if (errno || end == cl)
			n = ULLONG_MAX;
	} else if (!te) {
		/* no length and not chunked: whatever follows would be taken for a request */
		*req_cls = &answered;
		return QUEUE_TEXT(srv, conn, MHD_HTTP_LENGTH_REQUIRED, "length required\n");
	}
	if (n > srv->cfg.max_body)
		return too_large(srv, conn, req_cls);
	if (srv->cfg.admit) {
		struct http_reply no = { 0 };

		peer_of(conn, &peer);
		proven =
			srv->cfg.admit(srv->cfg.admit_cls, url, authorization_of(conn), &peer, &no);
		if (proven < 0) {
			const struct reply_headers h = { .www_authenticate = no.www_authenticate,
							 .retry_after_s = no.retry_after_s,
							 .close = true };

			srv->stats.admit_refused++;
			if (srv->strikes)
				strikes_add(srv->strikes, peer.sin_addr.s_addr,
					    srv->cfg.refusals_per_client, time_mono_ms());
			*req_cls = &answered;
			if (!no.status)
				return QUEUE_TEXT(srv, conn, MHD_HTTP_FORBIDDEN, "forbidden\n");
			return queue_reply(srv, conn, no.status,
					   no.content_type ? no.content_type : text_type,
					   no.body ? no.body : "", no.body ? no.len : 0, true, &h);
		}
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return MHD_NO;
	b->want = cl ? (size_t)n : srv->cfg.max_body;
	b->proven = proven > 0;
	if (!bodies_room(srv, b->proven, b->want < BODY_FIRST ? b->want : BODY_FIRST)) {
		free(b);
		srv->stats.bodies_refused++;
		return no_room(srv, conn, req_cls);
	}
	*req_cls = b;
	return MHD_YES;
}

/* More of a POST's body, or (*upload_size 0) its end: then the callback answers. */
static enum MHD_Result post_more(struct http_server *srv, struct MHD_Connection *conn,
				 const char *url, void **req_cls, const char *data, size_t *size)
{
	struct body *b = *req_cls;
	struct http_reply reply = { 0 };
	struct http_request req = { .path = url, .tls = srv->tls };
	enum MHD_Result r;
	int e;

	if (*size) {
		size_t n = *size;

		*size = 0;
		if (n > srv->cfg.max_body - b->len) {
			body_free(srv, b);
			*req_cls = &overgrown;
			return MHD_YES;
		}
		e = body_grow(srv, b, n);
		if (e == -ENOSPC) {
			body_free(srv, b);
			srv->stats.bodies_refused++;
			*req_cls = &crowded;
			return MHD_YES;
		}
		if (e < 0)
			return MHD_NO; /* freed with the request (on_completed) */
		memcpy(b->buf + b->len, data, n);
		b->len += n;
		return MHD_YES;
	}
	if (b->buf)
		b->buf[b->len] = '\0';
	req.body = b->buf ? b->buf : "";
	req.len = b->len;
	req.authorization = authorization_of(conn);
	peer_of(conn, &req.peer);
	srv->cfg.post(srv->cfg.post_cls, &req, &reply);
	body_free(srv, b);
	*req_cls = &answered;
	if (!reply.status)
		return QUEUE_TEXT(srv, conn, MHD_HTTP_NOT_FOUND, "not found\n");
	/* the callback's buffer need not outlive the call: copied */
	r = queue_callers(srv, conn, &reply, true);
	return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_size, void **req_cls)
{
	struct http_server *srv = cls;
	struct http_reply reply = { 0 };
	struct page *p;

	(void)version;
	/* The first call only announces the request; answer on the last. */
	if (!*req_cls) {
		if (srv->cfg.post && strcmp(method, MHD_HTTP_METHOD_POST) == 0)
			return post_begin(srv, conn, url, req_cls);
		*req_cls = srv;
		return MHD_YES;
	}
	if (*req_cls == &answered ||
	    ((*req_cls == &overgrown || *req_cls == &crowded) && *upload_size)) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*req_cls == &overgrown)
		return too_large(srv, conn, req_cls);
	if (*req_cls == &crowded)
		return no_room(srv, conn, req_cls);
	if (*req_cls != srv)
		return post_more(srv, conn, url, req_cls, upload_data, upload_size);
	if (*upload_size) {
		*upload_size = 0; /* a body is never wanted: drop it */
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return QUEUE_TEXT(srv, conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
	srv->cfg.route(srv->cfg.route_cls, url, &reply);
	if (reply.page) {
		if (page_get(srv, &p) < 0)
			return QUEUE_TEXT(srv, conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
					  "scrape failed\n");
		return MHD_queue_response(conn, MHD_HTTP_OK, p->resp);
	}
	if (!reply.status)
		return QUEUE_TEXT(srv, conn, MHD_HTTP_NOT_FOUND, "not found\n");
	return queue_callers(srv, conn, &reply, reply.copy);
}

/*
 * A request ended: a body still held goes; after a response, a kept-alive
 * connection's next request gets a full deadline, but on a retired daemon
 * (its certificate replaced) the connection is closed instead: the client
 * comes back to the current one.
 */
static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct http_server *srv = cls;
	const union MHD_ConnectionInfo *ci, *di;
	struct http_conn *c;

	if (*req_cls && *req_cls != srv && *req_cls != &answered && *req_cls != &overgrown &&
	    *req_cls != &crowded)
		body_free(srv, *req_cls);
	*req_cls = NULL;
	if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
		return;
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	c = ci ? ci->socket_context : NULL;
	if (!c)
		return;
	di = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON);
	if (di && srv->cur && di->daemon != srv->cur->mhd) {
		if (!c->cut) {
			conntab_cut(&srv->conns, c);
			shutdown(c->fd, SHUT_RDWR);
		}
		return;
	}
	conntab_restart(&srv->conns, c, time_mono_ms());
}

/* Ties libmicrohttpd's connections to the table: started (by fd) and closed. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct http_server *srv = cls;
	const union MHD_ConnectionInfo *ci;
	struct http_conn *c;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		c = ci ? conntab_find(&srv->conns, ci->connect_fd) : NULL;
		if (c && !c->owner) {
			c->owner = conn;
			*socket_context = c;
		}
		return;
	}
	c = *socket_context;
	/* The slot is this connection's only while it names it as owner. */
	if (code == MHD_CONNECTION_NOTIFY_CLOSED && c && c->owner == conn)
		conntab_remove(&srv->conns, c);
	*socket_context = NULL;
}

/* libmicrohttpd's messages are printf formats of its own */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct http_server *srv = cls;
	va_list copy;

	if (srv->mhd_msg) {
		va_copy(copy, ap);
		vsnprintf(srv->mhd_msg, srv->mhd_msg_size, fmt, copy);
		va_end(copy);
	}
	if (srv->cfg.log)
		srv->cfg.log(srv->cfg.log_cls, fmt, ap);
}

/* ---- accepting ---- */

/*
 * The listening socket is in the inner epoll set only while a connection
 * can be taken: not while every slot is held (the next clients wait in the
 * kernel's backlog, in order, until a slot frees, rather than be turned
 * away), nor for a moment after running out of descriptors.
 */
static void listen_arm(struct http_server *srv, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = srv->listen_fd };

	if (on == srv->listen_armed)
		return;
	if (epoll_ctl(srv->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, srv->listen_fd,
		      on ? &ev : NULL) == 0)
		srv->listen_armed = on;
}

static void admit(struct http_server *srv, int fd, const struct sockaddr_in *sa)
{
	const struct http_config *cfg = &srv->cfg;
	struct http_conn *c = conntab_find(&srv->conns, fd);
	unsigned int held;

	/*
	 * The kernel handed this number out again, so whatever the table
	 * still holds under it is gone (never expected: libmicrohttpd reports
	 * every close); its slot must not be cut or counted in its stead.
	 */
	if (c)
		conntab_remove(&srv->conns, c);
	if (srv->strikes && strikes_benched(srv->strikes, sa->sin_addr.s_addr, time_mono_ms())) {
		srv->stats.refused_benched++;
		close(fd);
		return;
	}
	held = conntab_held(&srv->conns, sa->sin_addr.s_addr);

	switch (http_admit(cfg->max_connections, cfg->per_client, cfg->reserve, srv->conns.used,
			   held)) {
	case HTTP_ADMIT:
		break;
	case HTTP_REFUSE_CLIENT:
		srv->stats.refused_client++;
		close(fd);
		return;
	case HTTP_REFUSE_RESERVE:
		srv->stats.refused_reserve++;
		close(fd);
		return;
	case HTTP_REFUSE_FULL: /* not reached: nothing is accepted while full */
		close(fd);
		return;
	}
	c = conntab_add(&srv->conns, fd, sa->sin_addr.s_addr, time_mono_ms());
	if (!c) {
		close(fd);
		return;
	}
	srv->stats.accepted++;
	/* libmicrohttpd closes fd itself when it fails. */
	if (MHD_add_connection(srv->cur->mhd, fd, (const struct sockaddr *)sa, sizeof(*sa)) !=
		    MHD_YES &&
	    c->fd == fd && !c->owner)
		conntab_remove(&srv->conns, c);
}

static int accept_some(struct http_server *srv)
{
	for (int i = 0; i < ACCEPT_BATCH && srv->conns.used < srv->conns.cap; i++) {
		struct sockaddr_in sa;
		socklen_t len = sizeof(sa);
		int fd = accept4(srv->listen_fd, (struct sockaddr *)&sa, &len,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			switch (errno) {
			case EAGAIN:
				return 0;
			case EINTR:
			case ECONNABORTED:
			case EPROTO:
			case EPERM: /* a firewall said no */
				continue;
			case EMFILE:
			case ENFILE:
			case ENOBUFS:
			case ENOMEM:
				/* The socket stays readable: a busy loop unless it rests. */
				srv->accept_rest_ms = time_mono_ms() + ACCEPT_REST_MS;
				return -errno;
			default:
				return -errno;
			}
		}
		if (len != sizeof(sa) || sa.sin_family != AF_INET) {
			close(fd);
			continue;
		}
		admit(srv, fd, &sa);
	}
	return 0;
}

/* ---- the loop's side ---- */

int http_fd(const struct http_server *srv)
{
	return srv->epfd;
}

static void min_timeout(int64_t *t, int64_t next)
{
	if (*t < 0 || next < *t)
		*t = next;
}

int http_timeout_ms(struct http_server *srv)
{
	MHD_UNSIGNED_LONG_LONG mhd_ms;
	int64_t now = time_mono_ms(), t = -1, next;

	for (struct daemon *d = srv->cur; d; d = d == srv->cur ? srv->retired : d->next)
		if (MHD_get_timeout(d->mhd, &mhd_ms) == MHD_YES)
			min_timeout(&t, mhd_ms > INT_MAX ? INT_MAX : (int64_t)mhd_ms);
	next = conntab_next_deadline(&srv->conns, srv->cfg.deadline_ms);
	if (next != INT64_MAX)
		min_timeout(&t, next > now ? next - now : 0);
	if (srv->accept_rest_ms)
		min_timeout(&t, srv->accept_rest_ms > now ? srv->accept_rest_ms - now : 0);
	return t > INT_MAX ? INT_MAX : (int)t;
}

static void daemon_free(struct http_server *srv, struct daemon *d);

/* Runs the retired daemons; one whose last connection closed stops. */
static void run_retired(struct http_server *srv)
{
	struct daemon **pp = &srv->retired;

	while (*pp) {
		struct daemon *d = *pp;
		const union MHD_DaemonInfo *di;

		MHD_run(d->mhd);
		di = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
		if (di && di->num_connections == 0) {
			*pp = d->next;
			daemon_free(srv, d);
			continue;
		}
		pp = &d->next;
	}
}

int http_run(struct http_server *srv)
{
	int fds[64];
	unsigned int n;
	int64_t now = time_mono_ms();
	int r = 0;

	if (srv->accept_rest_ms && now >= srv->accept_rest_ms)
		srv->accept_rest_ms = 0;
	if (!srv->accept_rest_ms)
		r = accept_some(srv);
	/* Past the deadline: end the stream; libmicrohttpd closes it below. */
	do {
		n = conntab_expire(&srv->conns, now, srv->cfg.deadline_ms, fds, ARRAY_SIZE(fds));
		for (unsigned int i = 0; i < n; i++)
			shutdown(fds[i], SHUT_RDWR);
		srv->stats.deadline_closed += n;
	} while (n == ARRAY_SIZE(fds));
	MHD_run(srv->cur->mhd); /* closes connections: slots free */
	run_retired(srv);
	listen_arm(srv, !srv->accept_rest_ms && srv->conns.used < srv->conns.cap);
	return r;
}

void http_get_stats(const struct http_server *srv, struct http_stats *ret)
{
	*ret = srv->stats;
	ret->connections = srv->conns.used;
}

/* ---- the TLS files ---- */

static void tls_say(const struct http_server *srv, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void tls_say(const struct http_server *srv, const char *fmt, ...)
{
	va_list ap;

	if (!srv->cfg.tls_err || !srv->cfg.tls_err_size)
		return;
	va_start(ap, fmt);
	vsnprintf(srv->cfg.tls_err, srv->cfg.tls_err_size, fmt, ap);
	va_end(ap);
}

/*
 * A PEM file's text, NUL-terminated, that holds a `-----BEGIN <label>`
 * block whose label ends with `label_end` ("CERTIFICATE", "PRIVATE KEY").
 */
static int read_pem(const struct http_server *srv, const char *what, const char *path,
		    const char *label_end, char **ret)
{
	struct stat st;
	char *buf = NULL, *p;
	size_t len = 0;
	bool found = false;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		tls_say(srv, "%s %s: %s", what, path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		tls_say(srv, "%s %s: %s", what, path, strerror(-r));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		tls_say(srv, "%s %s: not a regular file", what, path);
		goto out;
	}
	if (st.st_size > PEM_MAX) {
		r = -EFBIG;
		tls_say(srv, "%s %s: %lld bytes, more than a PEM file of it can be (%d)", what,
			path, (long long)st.st_size, PEM_MAX);
		goto out;
	}
	buf = malloc(PEM_MAX + 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, PEM_MAX + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			tls_say(srv, "%s %s: %s", what, path, strerror(-r));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > PEM_MAX) {
			r = -EFBIG;
			tls_say(srv, "%s %s: more than %d bytes", what, path, PEM_MAX);
			goto out;
		}
	}
	buf[len] = '\0';
	for (p = strstr(buf, "-----BEGIN "); p && !found; p = strstr(p + 1, "-----BEGIN ")) {
		const char *end = strstr(p + 11, "-----");
		size_t n = strlen(label_end);

		found = end && (size_t)(end - p) >= 11 + n && memcmp(end - n, label_end, n) == 0;
	}
	if (!found) {
		r = -EBADMSG;
		tls_say(srv, "%s %s: not PEM, or no \"-----BEGIN ...%s-----\" block in it", what,
			path, label_end);
		goto out;
	}
	/* kept as long as the daemon: no more than the file */
	p = realloc(buf, len + 1);
	*ret = p ? p : buf;
	buf = NULL;
	r = 0;
out:
	if (buf) {
		explicit_bzero(buf, len);
		free(buf);
	}
	close(fd);
	return r;
}

/* ---- the daemons ---- */

static void daemon_free(struct http_server *srv, struct daemon *d)
{
	if (!d)
		return;
	if (d->epoll_fd >= 0 && srv->epfd >= 0)
		epoll_ctl(srv->epfd, EPOLL_CTL_DEL, d->epoll_fd, NULL);
	/* Closes every connection (their slots free through on_connection). */
	if (d->mhd)
		MHD_stop_daemon(d->mhd);
	free(d->cert);
	if (d->key) {
		explicit_bzero(d->key, strlen(d->key));
		free(d->key);
	}
	free(d);
}

/*
 * A libmicrohttpd daemon of the server's settings, in its epoll set; over
 * TLS with the files read now.
 */
static int daemon_start(struct http_server *srv, struct daemon **ret)
{
	const struct http_config *cfg = &srv->cfg;
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG;
	struct MHD_OptionItem opts[16];
	struct epoll_event ev = { .events = EPOLLIN };
	const union MHD_DaemonInfo *di;
	struct daemon *d;
	char msg[256] = "";
	unsigned int n = 0;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->epoll_fd = -1;
	if (srv->tls) {
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			tls_say(srv, "TLS: libmicrohttpd was built without it");
			r = -EOPNOTSUPP;
			goto fail;
		}
		r = read_pem(srv, "TLS certificate", cfg->tls_cert_file, "CERTIFICATE", &d->cert);
		if (r < 0)
			goto fail;
		r = read_pem(srv, "TLS key", cfg->tls_key_file, "PRIVATE KEY", &d->key);
		if (r < 0)
			goto fail;
		flags |= MHD_USE_TLS;
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, d->cert };
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, d->key };
	}
	/*
	 * libmicrohttpd's own limits only back ours up: admission is decided
	 * before a connection reaches it. Its idle timeout (whole seconds) is
	 * the deadline rounded up, in case a sweep comes late.
	 */
	opts[n++] =
		(struct MHD_OptionItem){ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, srv };
	opts[n++] =
		(struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections, NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT,
					     (intptr_t)((cfg->deadline_ms + 999) / 1000), NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT,
					     (intptr_t)cfg->request_memory, NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection,
					     srv };
	opts[n++] =
		(struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, srv };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	/* what libmicrohttpd says while it starts is why it did not (GnuTLS' word on the files) */
	srv->mhd_msg = msg;
	srv->mhd_msg_size = sizeof(msg);
	d->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_ARRAY, opts,
				  MHD_OPTION_END);
	srv->mhd_msg = NULL;
	if (!d->mhd) {
		if (srv->tls) {
			msg[strcspn(msg, "\n")] = '\0';
			tls_say(srv, "TLS certificate %s and key %s: refused (%s)",
				cfg->tls_cert_file, cfg->tls_key_file,
				msg[0] ? msg : "libmicrohttpd did not say why");
			r = -EBADMSG;
		} else {
			r = -EIO;
		}
		goto fail;
	}
	di = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!di || di->epoll_fd < 0) {
		r = -EIO;
		goto fail;
	}
	ev.data.fd = di->epoll_fd;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, di->epoll_fd, &ev) < 0) {
		r = -errno;
		goto fail;
	}
	d->epoll_fd = di->epoll_fd;
	*ret = d;
	return 0;
fail:
	daemon_free(srv, d);
	return r;
}

int http_tls_reload(struct http_server *srv)
{
	struct daemon *d;
	int r;

	if (srv->cfg.tls_err && srv->cfg.tls_err_size)
		srv->cfg.tls_err[0] = '\0';
	if (!srv->tls)
		return -EINVAL;
	r = daemon_start(srv, &d);
	if (r < 0)
		return r;
	srv->cur->next = srv->retired;
	srv->retired = srv->cur;
	srv->cur = d;
	return 0;
}

/* ---- start and stop ---- */

static int listen_on(const struct sockaddr_in *addr, unsigned int backlog)
{
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int r;

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0 ||
	    listen(fd, backlog > INT_MAX ? INT_MAX : (int)backlog) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

int http_start(const struct http_config *cfg, struct http_server **ret)
{
	struct http_server *srv;
	int r;

	if (cfg->tls_err && cfg->tls_err_size)
		cfg->tls_err[0] = '\0';
	if (!cfg->route || !cfg->collect || !cfg->max_connections || !cfg->per_client ||
	    cfg->reserve >= cfg->max_connections || !cfg->deadline_ms || !cfg->max_pages ||
	    cfg->request_memory < 1024 ||
	    (cfg->post && (!cfg->max_body || cfg->max_body >= SIZE_MAX)))
		return -EINVAL;
	if (!cfg->tls_cert_file != !cfg->tls_key_file) {
		if (cfg->tls_err && cfg->tls_err_size)
			snprintf(cfg->tls_err, cfg->tls_err_size,
				 "TLS: a certificate needs its key, and a key its certificate");
		return -EINVAL;
	}
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->cfg = *cfg;
	srv->tls = cfg->tls_cert_file != NULL;
	srv->listen_fd = srv->epfd = -1;
	srv->bodies_max = cfg->max_bodies_bytes;
	if (!srv->bodies_max)
		srv->bodies_max = cfg->max_body > SIZE_MAX / cfg->max_connections
					  ? SIZE_MAX
					  : cfg->max_body * cfg->max_connections;
	srv->unproven_max = cfg->unproven_bodies_bytes ? cfg->unproven_bodies_bytes
						       : srv->bodies_max / 2;
	if (srv->unproven_max > srv->bodies_max)
		srv->unproven_max = srv->bodies_max;
	r = conntab_init(&srv->conns, cfg->max_connections);
	if (r < 0)
		goto fail;
	if (cfg->refusals_per_client && !(srv->strikes = calloc(1, sizeof(*srv->strikes)))) {
		r = -ENOMEM;
		goto fail;
	}
	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srv->epfd < 0) {
		r = -errno;
		goto fail;
	}
	r = daemon_start(srv, &srv->cur);
	if (r < 0)
		goto fail;
	srv->listen_fd = listen_on(&cfg->addr, cfg->backlog ? cfg->backlog : HTTP_DEFAULT_BACKLOG);
	if (srv->listen_fd < 0) {
		r = srv->listen_fd;
		goto fail;
	}
	listen_arm(srv, true);
	if (!srv->listen_armed) {
		r = -errno;
		goto fail;
	}
	*ret = srv;
	return 0;
fail:
	http_free(srv);
	return r;
}

void http_free(struct http_server *srv)
{
	if (!srv)
		return;
	if (srv->listen_fd >= 0)
		close(srv->listen_fd);
	while (srv->retired) {
		struct daemon *d = srv->retired;

		srv->retired = d->next;
		daemon_free(srv, d);
	}
	daemon_free(srv, srv->cur);
	page_drop(srv->page);
	if (srv->epfd >= 0)
		close(srv->epfd);
	conntab_free(&srv->conns);
	free(srv->strikes);
	free(srv);
}
