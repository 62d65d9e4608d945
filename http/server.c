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
 * The page: one buffer per collection, wrapped in one libmicrohttpd
 * response that every request within the cache window queues (libmicrohttpd
 * counts the references and sends straight from the buffer); the buffer is
 * freed by the response's free callback when the last connection sending it
 * is done and the cache has moved on.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http/http.h"
#include "http/internal.h"
#include "lib/util.h"

#define ACCEPT_BATCH 64	   /* per http_run: the rest on the next (the fd stays readable) */
#define ACCEPT_REST_MS 100 /* out of descriptors: stop accepting for a moment */

struct page {
	struct http_server *srv;
	char *buf;
	size_t len;
	struct MHD_Response *resp; /* the cache's reference; NULL once dropped */
	int64_t born_ms;
};

struct http_server {
	struct http_config cfg;
	struct MHD_Daemon *mhd;
	int listen_fd, epfd;
	bool listen_armed;
	int64_t accept_rest_ms; /* 0, or no accepting until then */
	struct conntab conns;
	struct page *page; /* the cached page (holds a reference) */
	bool failed;	   /* the last collection failed, at failed_ms */
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
 * before its body was read, or its chunked body outgrew max_body; in both
 * of the last, what still comes of the body is dropped.
 */
static char answered, overgrown;

/* A POST body as it arrives, bounded by max_body (one byte more for a NUL). */
struct body {
	char *buf;
	size_t len, cap;
};

static void body_free(struct body *b)
{
	if (!b)
		return;
	free(b->buf);
	free(b);
}

static enum MHD_Result queue_reply(const struct http_server *srv, struct MHD_Connection *conn,
				   unsigned int status, const char *type, const char *body,
				   size_t len, bool copy, const char *location)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		len, (void *)body, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
	enum MHD_Result r;

	if (!resp)
		return MHD_NO;
	if (type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (location)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, location);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
					srv->cfg.post ? "GET, HEAD, POST" : "GET, HEAD");
	r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result queue_static(const struct http_server *srv, struct MHD_Connection *conn,
				    unsigned int status, const char *type, const char *body,
				    size_t len, bool copy)
{
	return queue_reply(srv, conn, status, type, body, len, copy, NULL);
}

#define QUEUE_TEXT(srv, conn, status, text) \
	queue_static(srv, conn, status, text_type, text, sizeof(text) - 1, false)

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

/* A POST announced: its length known (or chunked) and within bounds, a buffer for it. */
static enum MHD_Result post_begin(struct http_server *srv, struct MHD_Connection *conn,
				  void **req_cls)
{
	const char *cl =
		MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_TRANSFER_ENCODING);
	unsigned long long n = 0;
	struct body *b;
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
	b = calloc(1, sizeof(*b));
	if (!b)
		return MHD_NO;
	b->cap = (size_t)n;
	b->buf = malloc(b->cap + 1);
	if (!b->buf) {
		free(b);
		return MHD_NO;
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
	enum MHD_Result r;

	if (*size) {
		size_t n = *size;

		*size = 0;
		if (n > srv->cfg.max_body - b->len) {
			body_free(b);
			*req_cls = &overgrown;
			return MHD_YES;
		}
		if (b->len + n > b->cap) {
			size_t cap = b->cap * 2 > b->len + n ? b->cap * 2 : b->len + n;
			char *p;

			if (cap < 1024)
				cap = 1024;
			if (cap > srv->cfg.max_body)
				cap = srv->cfg.max_body;
			p = realloc(b->buf, cap + 1);
			if (!p)
				return MHD_NO; /* freed with the request (on_completed) */
			b->buf = p;
			b->cap = cap;
		}
		memcpy(b->buf + b->len, data, n);
		b->len += n;
		return MHD_YES;
	}
	b->buf[b->len] = '\0';
	srv->cfg.post(srv->cfg.post_cls, url, b->buf, b->len, &reply);
	body_free(b);
	*req_cls = &answered;
	if (!reply.status)
		return QUEUE_TEXT(srv, conn, MHD_HTTP_NOT_FOUND, "not found\n");
	/* the callback's buffer need not outlive the call: copied */
	r = queue_reply(srv, conn, reply.status, reply.content_type, reply.body ? reply.body : "",
			reply.body ? reply.len : 0, true, reply.location);
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
			return post_begin(srv, conn, req_cls);
		*req_cls = srv;
		return MHD_YES;
	}
	if (*req_cls == &answered || (*req_cls == &overgrown && *upload_size)) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*req_cls == &overgrown)
		return too_large(srv, conn, req_cls);
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
	return queue_reply(srv, conn, reply.status, reply.content_type,
			   reply.body ? reply.body : "", reply.body ? reply.len : 0, reply.copy,
			   reply.location);
}

/*
 * A request ended: a body still held goes; after a response, a kept-alive
 * connection's next request gets a full deadline.
 */
static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct http_server *srv = cls;
	const union MHD_ConnectionInfo *ci;

	if (*req_cls && *req_cls != srv && *req_cls != &answered && *req_cls != &overgrown)
		body_free(*req_cls);
	*req_cls = NULL;
	if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
		return;
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (ci && ci->socket_context)
		conntab_restart(&srv->conns, ci->socket_context, time_mono_ms());
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

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct http_server *srv = cls;

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
	if (MHD_add_connection(srv->mhd, fd, (const struct sockaddr *)sa, sizeof(*sa)) != MHD_YES &&
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

int http_timeout_ms(struct http_server *srv)
{
	MHD_UNSIGNED_LONG_LONG mhd_ms;
	int64_t now = time_mono_ms(), t = -1, next;

	if (MHD_get_timeout(srv->mhd, &mhd_ms) == MHD_YES)
		t = mhd_ms > INT_MAX ? INT_MAX : (int64_t)mhd_ms;
	next = conntab_next_deadline(&srv->conns, srv->cfg.deadline_ms);
	if (next != INT64_MAX) {
		next = next > now ? next - now : 0;
		if (t < 0 || next < t)
			t = next;
	}
	if (srv->accept_rest_ms) {
		next = srv->accept_rest_ms > now ? srv->accept_rest_ms - now : 0;
		if (t < 0 || next < t)
			t = next;
	}
	return t > INT_MAX ? INT_MAX : (int)t;
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
	MHD_run(srv->mhd); /* closes connections: slots free */
	listen_arm(srv, !srv->accept_rest_ms && srv->conns.used < srv->conns.cap);
	return r;
}

void http_get_stats(const struct http_server *srv, struct http_stats *ret)
{
	*ret = srv->stats;
	ret->connections = srv->conns.used;
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
	const union MHD_DaemonInfo *di;
	struct epoll_event ev = { .events = EPOLLIN };
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET;
	int r;

	if (!cfg->route || !cfg->collect || !cfg->max_connections || !cfg->per_client ||
	    cfg->reserve >= cfg->max_connections || !cfg->deadline_ms || !cfg->max_pages ||
	    cfg->request_memory < 1024 ||
	    (cfg->post && (!cfg->max_body || cfg->max_body >= SIZE_MAX)))
		return -EINVAL;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->cfg = *cfg;
	srv->listen_fd = srv->epfd = -1;
	r = conntab_init(&srv->conns, cfg->max_connections);
	if (r < 0)
		goto fail;
	if (cfg->log)
		flags |= MHD_USE_ERROR_LOG;
	/*
	 * libmicrohttpd's own limits only back ours up: admission is decided
	 * before a connection reaches it. Its idle timeout (whole seconds) is
	 * the deadline rounded up, in case a sweep comes late.
	 */
	srv->mhd = MHD_start_daemon(
		flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
		MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned int)((cfg->deadline_ms + 999) / 1000), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
		cfg->request_memory, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
	if (!srv->mhd) {
		r = -EIO;
		goto fail;
	}
	di = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!di || di->epoll_fd < 0) {
		r = -EIO;
		goto fail;
	}
	srv->listen_fd = listen_on(&cfg->addr, cfg->backlog ? cfg->backlog : HTTP_DEFAULT_BACKLOG);
	if (srv->listen_fd < 0) {
		r = srv->listen_fd;
		goto fail;
	}
	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srv->epfd < 0) {
		r = -errno;
		goto fail;
	}
	ev.data.fd = di->epoll_fd;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, di->epoll_fd, &ev) < 0) {
		r = -errno;
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
	/* Closes every connection (their slots free through on_connection). */
	if (srv->mhd)
		MHD_stop_daemon(srv->mhd);
	page_drop(srv->page);
	if (srv->epfd >= 0)
		close(srv->epfd);
	conntab_free(&srv->conns);
	free(srv);
}
