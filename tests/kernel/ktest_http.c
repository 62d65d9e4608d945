// SPDX-License-Identifier: Apache-2.0
/*
 * The metrics endpoint's HTTP server (http/) itself, driven as the caller's
 * event loop drives it, on loopback in a private network namespace (root):
 * N requests within the cache window cost one collection and get the same
 * bytes; a client trickling its header is cut at the deadline; a kept-alive
 * connection's deadline restarts after each response; per-client and
 * reserve refusals; a full table leaves clients in the backlog until a slot
 * frees; 404, 405 with Allow, HEAD; POST bodies (length, chunked, too
 * large, length required, keep-alive, trickled); and a failed collection
 * answered 500 once per window. The pure parts (admission, the connection
 * table, --listen) are tests/unit/test_http.c's.
 *
 * tests/integration/test_kernel_cases.sh runs this in a network namespace of
 * its own, and the process unshares another before its first server
 * (tests/unit/netns.h): run by hand it never listens on the host.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "tests/kernel/http_srv.h"
#include "tests/unit/group.h"
#include "tests/unit/helpers.h"

static const char GET_METRICS[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

static void t_server_page_shared(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	char buf[1024];
	int fds[10];

	NEED_NETNS();
	start(f);
	for (int i = 0; i < 10; i++) {
		fds[i] = client(f, "127.0.0.1");
		say(fds[i], GET_METRICS);
	}
	for (int i = 0; i < 10; i++) {
		assert_true(read_all(f, fds[i], buf, sizeof(buf), 2000));
		assert_contains(buf, "HTTP/1.1 200");
		assert_contains(buf, "Content-Type: text/plain; version=0.0.4");
		assert_contains(buf, "\r\n\r\npage 1\n");
		close(fds[i]);
	}
	assert_int_equal(f->collects, 1);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.collections, 1);
	assert_int_equal(st.cache_hits, 9);
	drive(f, 20);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.connections, 0);
	assert_int_equal(st.pages, 1); /* the cached one */
}

static void t_server_cache_expires(void **state)
{
	struct srv_fx *f = *state;
	char buf[1024];
	int fd;

	NEED_NETNS();
	f->cfg.cache_ms = 100;
	start(f);
	fd = client(f, "127.0.0.1");
	say(fd, GET_METRICS);
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "page 1\n");
	close(fd);
	drive(f, 150);
	fd = client(f, "127.0.0.1");
	say(fd, GET_METRICS);
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "page 2\n");
	close(fd);
	assert_int_equal(f->collects, 2);
}

static void t_server_no_cache(void **state)
{
	struct srv_fx *f = *state;
	char buf[1024];

	NEED_NETNS();
	f->cfg.cache_ms = 0;
	start(f);
	for (int i = 1; i <= 3; i++) {
		int fd = client(f, "127.0.0.1");
		char want[16];

		say(fd, GET_METRICS);
		assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
		snprintf(want, sizeof(want), "page %d\n", i);
		assert_contains(buf, want);
		close(fd);
	}
	assert_int_equal(f->collects, 3);
}

/* One header byte every 50 ms: cut at the 300 ms deadline, not kept alive by the trickle. */
static void t_server_deadline_cuts_trickle(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	const char *req = GET_METRICS;
	int64_t t0, next;
	size_t sent = 0;
	char c;
	int fd;

	NEED_NETNS();
	f->cfg.deadline_ms = 300;
	start(f);
	fd = client(f, "127.0.0.1");
	t0 = next = mono_ms();
	for (;;) {
		ssize_t n = recv(fd, &c, 1, 0);

		if (n == 0 || (n < 0 && errno == ECONNRESET))
			break;
		assert_true(n < 0);
		if (mono_ms() >= next && sent < 20) {
			if (send(fd, req + sent, 1, MSG_NOSIGNAL) == 1)
				sent++;
			next += 50;
		}
		assert_true(mono_ms() - t0 < 2000);
		turn(f, 10);
	}
	/* between the deadline and a sweep later (a turn is at most 10 ms here) */
	assert_true(mono_ms() - t0 >= 290);
	assert_true(mono_ms() - t0 < 600);
	assert_true(sent >= 4 && sent < 20);
	close(fd);
	drive(f, 20);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.deadline_closed, 1);
	assert_int_equal(st.connections, 0);
	assert_int_equal(f->collects, 0);
}

/* Kept alive: each response restarts the clock; an idle one is closed a deadline later. */
static void t_server_keepalive_restart(void **state)
{
	struct srv_fx *f = *state;
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
	char buf[1024];
	int64_t t0;
	int fd;

	NEED_NETNS();
	f->cfg.deadline_ms = 400;
	start(f);
	fd = client(f, "127.0.0.1");
	t0 = mono_ms();
	for (int i = 0; i < 3; i++) {
		say(fd, req);
		assert_true(read_response(f, fd, buf, sizeof(buf), 1000));
		assert_contains(buf, "HTTP/1.1 200");
		drive(f, 250);
	}
	/* 750+ ms after accept and still served: the deadline ran from each response */
	assert_true(mono_ms() - t0 >= 750);
	assert_true(read_all(f, fd, buf, sizeof(buf), 1000));
	close(fd);
}

static void t_server_limits(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	char buf[256];
	int a[3], b[2], c, d;

	NEED_NETNS();
	f->cfg.max_connections = 4;
	f->cfg.per_client = 2;
	f->cfg.reserve = 1;
	start(f);
	for (int i = 0; i < 3; i++)
		a[i] = client(f, "127.0.0.2");
	drive(f, 50);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.connections, 2);
	assert_int_equal(st.refused_client, 1);
	/* .3: the first gets in, its second would take the reserve */
	b[0] = client(f, "127.0.0.3");
	drive(f, 30);
	b[1] = client(f, "127.0.0.3");
	drive(f, 30);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.connections, 3);
	assert_int_equal(st.refused_reserve, 1);
	/* .4 holds nothing: the reserve is its */
	c = client(f, "127.0.0.4");
	drive(f, 30);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.connections, 4);
	/* full: .5 waits in the backlog, neither accepted nor refused */
	d = client(f, "127.0.0.5");
	drive(f, 50);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.connections, 4);
	assert_int_equal(st.accepted, 4);
	assert_int_equal(st.refused_client + st.refused_reserve, 2);
	/* a slot frees: .5 is taken and served */
	close(a[0]);
	say(d, GET_METRICS);
	assert_true(read_all(f, d, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 200");
	http_get_stats(f->srv, &st);
	assert_int_equal(st.accepted, 5);
	close(d);
	close(a[1]);
	close(a[2]);
	close(b[0]);
	close(b[1]);
	close(c);
}

static void t_server_methods_paths(void **state)
{
	struct srv_fx *f = *state;
	char buf[1024];
	int fd;

	NEED_NETNS();
	start(f);
	fd = client(f, "127.0.0.1");
	say(fd,
	    "POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 405");
	assert_contains(buf, "Allow: GET, HEAD");
	close(fd);
	fd = client(f, "127.0.0.1");
	say(fd, "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 404");
	close(fd);
	fd = client(f, "127.0.0.1");
	say(fd, "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 200");
	assert_contains(buf, "Content-Length: 7");
	assert_not_contains(buf, "page 1");
	close(fd);
	fd = client(f, "127.0.0.1");
	say(fd, "GET /healthz HTTP/1.0\r\n\r\n");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, " 200 ");
	assert_contains(buf, "\r\n\r\nok\n");
	close(fd);
}

/* ---- POST ---- */

/* Bytes 0..255 over and over, NULs included: what a body must come back as. */
static void pattern(char *buf, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)((i * 7 + seed) & 0xff);
}

/* Sends all of buf on a non-blocking socket, driving the server meanwhile. */
static void say_all(struct srv_fx *f, int fd, const char *buf, size_t n)
{
	size_t sent = 0;
	int64_t end = mono_ms() + 3000;

	while (sent < n) {
		ssize_t k = send(fd, buf + sent, n - sent, MSG_NOSIGNAL);

		if (k > 0)
			sent += (size_t)k;
		else
			assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		assert_true(mono_ms() < end);
		turn(f, 5);
	}
}

static void post_head(int fd, const char *path, size_t len, const char *extra)
{
	char head[512];

	snprintf(head, sizeof(head),
		 "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\n%s\r\n",
		 path, len, extra ? extra : "");
	say(fd, head);
}

/* A 40 kB body with every byte value, sent in pieces: the callback gets exactly it. */
static void t_server_post_body(void **state)
{
	struct srv_fx *f = *state;
	enum { N = 40000 };
	char *body = malloc(N), buf[1024];
	int fd;

	NEED_NETNS();
	assert_non_null(body);
	f->cfg.post = fx_post;
	start(f);
	pattern(body, N, 3);
	fd = client(f, "127.0.0.1");
	post_head(fd, "/v1/report", N, "Connection: close\r\n");
	for (size_t off = 0; off < N; off += 9999) {
		say_all(f, fd, body + off, off + 9999 > N ? N - off : 9999);
		drive(f, 20);
	}
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 200");
	assert_contains(buf, "Content-Type: application/json");
	assert_contains(buf, "\r\n\r\npost 1: 40000 bytes\n");
	assert_int_equal(f->posts, 1);
	assert_string_equal(f->post_path, "/v1/report");
	assert_int_equal(f->post_len, N);
	assert_memory_equal(f->post_body, body, N);
	assert_true(f->post_nul);
	close(fd);
	free(body);
}

/* Chunked, without a Content-Length: the chunks joined, nothing of the framing. */
static void t_server_post_chunked(void **state)
{
	struct srv_fx *f = *state;
	char buf[1024];
	int fd;

	NEED_NETNS();
	f->cfg.post = fx_post;
	start(f);
	fd = client(f, "127.0.0.1");
	say(fd, "POST /v1/report HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
		"Connection: close\r\n\r\n5\r\nhello\r\n");
	drive(f, 30);
	say(fd, "7\r\n, world\r\n0\r\n\r\n");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 200");
	assert_int_equal(f->posts, 1);
	assert_int_equal(f->post_len, 12);
	assert_memory_equal(f->post_body, "hello, world", 12);
	close(fd);
}

/*
 * Past max_body: 413 from the Content-Length alone, before any of the body
 * is sent (so it was never waited for), and the connection closes; a chunked
 * body that grows past it, at its end, never handed to the callback; a body
 * of exactly max_body is taken.
 */
static void t_server_post_too_large(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	char buf[1024], body[1001];
	int fd;

	NEED_NETNS();
	f->cfg.post = fx_post;
	f->cfg.max_body = 1000;
	start(f);
	fd = client(f, "127.0.0.1");
	post_head(fd, "/v1/report", 1001, NULL);
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 413");
	close(fd);
	/* the same with Expect: 100-continue (curl's way with big bodies): no 100 first */
	fd = client(f, "127.0.0.1");
	post_head(fd, "/v1/report", 5000000, "Expect: 100-continue\r\n");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_not_contains(buf, "100 Continue");
	assert_contains(buf, "HTTP/1.1 413");
	close(fd);
	fd = client(f, "127.0.0.1");
	say(fd, "POST /v1/report HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
	memset(body, 'a', sizeof(body));
	/* 3 chunks of 400 bytes: past 1000, the rest dropped, 413 at the end */
	for (int i = 0; i < 3; i++) {
		char chunk[420];

		memcpy(chunk, "190\r\n", 5);
		memcpy(chunk + 5, body, 400);
		memcpy(chunk + 405, "\r\n", 2);
		say_all(f, fd, chunk, 407);
		drive(f, 10);
	}
	say(fd, "0\r\n\r\n");
	/* all of it read: the connection may stay */
	assert_true(read_response(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 413");
	close(fd);
	assert_int_equal(f->posts, 0);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.body_too_large, 3);
	/* exactly max_body */
	fd = client(f, "127.0.0.1");
	post_head(fd, "/v1/report", 1000, "Connection: close\r\n");
	say_all(f, fd, body, 1000);
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 200");
	assert_int_equal(f->post_len, 1000);
	close(fd);
	drive(f, 20);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.connections, 0);
}

/* Neither Content-Length nor chunked: 411 (a body would be read as the next request). */
static void t_server_post_length_required(void **state)
{
	struct srv_fx *f = *state;
	char buf[1024];
	int fd;

	NEED_NETNS();
	f->cfg.post = fx_post;
	start(f);
	fd = client(f, "127.0.0.1");
	say(fd, "POST /v1/report HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 411");
	assert_int_equal(f->posts, 0);
	close(fd);
}

/* Without a post callback POST is 405 as before; with one, other methods name it in Allow. */
static void t_server_post_methods(void **state)
{
	struct srv_fx *f = *state;
	char buf[1024];
	int fd;

	NEED_NETNS();
	start(f);
	fd = client(f, "127.0.0.1");
	post_head(fd, "/v1/report", 2, "Connection: close\r\n");
	say(fd, "{}");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 405");
	assert_contains(buf, "Allow: GET, HEAD\r\n");
	close(fd);
	http_free(f->srv);
	f->srv = NULL;
	f->cfg.post = fx_post;
	start(f);
	fd = client(f, "127.0.0.1");
	say(fd,
	    "PUT /v1/report HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 405");
	assert_contains(buf, "Allow: GET, HEAD, POST\r\n");
	close(fd);
	/* a path the callback does not know: 404, the body still handed to it */
	fd = client(f, "127.0.0.1");
	post_head(fd, "/nope", 2, "Connection: close\r\n");
	say(fd, "{}");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 404");
	assert_int_equal(f->posts, 1);
	/* GET of the same server is routed as before */
	close(fd);
	fd = client(f, "127.0.0.1");
	say(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "\r\n\r\nok\n");
	close(fd);
}

/* Several POSTs (and a GET) on one kept-alive connection: each body its own, one accept. */
static void t_server_post_keepalive(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	char body[3000], buf[1024], want[64];
	int fd;

	NEED_NETNS();
	f->cfg.post = fx_post;
	start(f);
	fd = client(f, "127.0.0.1");
	for (int i = 1; i <= 5; i++) {
		size_t n = (size_t)i * 500;

		pattern(body, n, (unsigned int)i);
		post_head(fd, "/v1/report", n, NULL);
		say_all(f, fd, body, n);
		assert_true(read_response(f, fd, buf, sizeof(buf), 2000));
		assert_contains(buf, "HTTP/1.1 200");
		assert_not_contains(buf, "Connection: close");
		snprintf(want, sizeof(want), "post %d: %zu bytes\n", i, n);
		assert_contains(buf, want);
		assert_int_equal(f->post_len, n);
		assert_memory_equal(f->post_body, body, n);
		if (i == 3) {
			say(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
			assert_true(read_response(f, fd, buf, sizeof(buf), 2000));
			assert_contains(buf, "\r\n\r\nok\n");
		}
	}
	http_get_stats(f->srv, &st);
	assert_int_equal(st.accepted, 1);
	assert_int_equal(st.connections, 1);
	assert_int_equal(f->posts, 5);
	close(fd);
}

/* A body trickled a byte every 50 ms is cut at the 300 ms deadline; the callback never runs. */
static void t_server_post_trickle_deadline(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	int64_t t0, next;
	size_t sent = 0;
	char c;
	int fd;

	NEED_NETNS();
	f->cfg.post = fx_post;
	f->cfg.deadline_ms = 300;
	start(f);
	fd = client(f, "127.0.0.1");
	t0 = next = mono_ms();
	post_head(fd, "/v1/report", 100, NULL);
	for (;;) {
		ssize_t n = recv(fd, &c, 1, 0);

		if (n == 0 || (n < 0 && errno == ECONNRESET))
			break;
		assert_true(n < 0);
		if (mono_ms() >= next && sent < 100) {
			if (send(fd, "x", 1, MSG_NOSIGNAL) == 1)
				sent++;
			next += 50;
		}
		assert_true(mono_ms() - t0 < 2000);
		turn(f, 10);
	}
	assert_true(mono_ms() - t0 >= 290);
	assert_true(mono_ms() - t0 < 600);
	assert_true(sent >= 4 && sent < 20);
	close(fd);
	drive(f, 20);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.deadline_closed, 1);
	assert_int_equal(st.connections, 0);
	assert_int_equal(f->posts, 0);
}

/* ---- the request, admission, bodies held ---- */

/*
 * The post callback gets the Authorization header, the client's address
 * and port, and that it came in plain; admit was asked the same before the
 * body. A reply's Retry-After and WWW-Authenticate go out as headers, and a
 * plain reply has neither.
 */
static void t_server_post_request(void **state)
{
	struct srv_fx *f = *state;
	struct sockaddr_in me;
	socklen_t len = sizeof(me);
	char buf[1024];
	int fd;

	NEED_NETNS();
	f->cfg.post = fx_post;
	f->cfg.admit = fx_admit;
	start(f);
	fd = client(f, "127.0.0.7");
	assert_int_equal(getsockname(fd, (struct sockaddr *)&me, &len), 0);
	post_head(fd, "/v1/report", 2, "Authorization: Bearer abc.def-1\r\nConnection: close\r\n");
	say(fd, "{}");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 200");
	assert_not_contains(buf, "Retry-After");
	assert_not_contains(buf, "WWW-Authenticate");
	close(fd);
	assert_int_equal(f->admits, 1);
	assert_string_equal(f->admit_auth, "Bearer abc.def-1");
	assert_int_equal(f->admit_peer.sin_addr.s_addr, me.sin_addr.s_addr);
	assert_string_equal(f->post_auth, "Bearer abc.def-1");
	assert_int_equal(f->post_peer.sin_family, AF_INET);
	assert_int_equal(f->post_peer.sin_addr.s_addr, me.sin_addr.s_addr);
	assert_int_equal(f->post_peer.sin_port, me.sin_port);
	assert_false(f->post_tls);
	/* no header: NULL */
	fd = client(f, "127.0.0.7");
	post_head(fd, "/v1/report", 2, "Connection: close\r\n");
	say(fd, "{}");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 200");
	close(fd);
	assert_string_equal(f->post_auth, "(none)");
	assert_string_equal(f->admit_auth, "(none)");
	/* the reply's own headers */
	fd = client(f, "127.0.0.7");
	post_head(fd, "/v1/auth", 2, "Connection: close\r\n");
	say(fd, "{}");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 401");
	assert_contains(buf, "\r\nWWW-Authenticate: Bearer realm=\"tollgate\"\r\n");
	close(fd);
	fd = client(f, "127.0.0.7");
	post_head(fd, "/v1/busy", 2, "Connection: close\r\n");
	say(fd, "{}");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 503");
	assert_contains(buf, "\r\nRetry-After: 7\r\n");
	close(fd);
	assert_int_equal(f->posts, 4);
}

/* admit -1: 403 before the body, which is never read nor handed to the callback. */
static void t_server_admit_refused(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	char buf[1024];
	int fd;

	NEED_NETNS();
	f->cfg.post = fx_post;
	f->cfg.admit = fx_admit;
	start(f);
	fd = client(f, "127.0.0.1");
	post_head(fd, "/v1/report", 50000, "Authorization: Bearer refused\r\n");
	/* answered and closed without a byte of the body sent */
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 403");
	close(fd);
	assert_int_equal(f->posts, 0);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.admit_refused, 1);
	assert_int_equal(st.bodies_bytes, 0);
	/* the callback's own refusal: its status, headers and body, the body never read */
	fd = client(f, "127.0.0.1");
	post_head(fd, "/v1/report", 50000, "Authorization: Bearer stranger\r\n");
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 401");
	assert_contains(buf, "WWW-Authenticate: Bearer realm=\"test\"");
	assert_contains(buf, "who are you");
	close(fd);
	assert_int_equal(f->posts, 0);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.admit_refused, 2);
}

/*
 * refusals_per_client 2: a third refusal in a second benches the address:
 * its next connection is closed at accept, before any byte is answered.
 */
static void t_server_benched(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	char buf[1024];
	int fd;

	NEED_NETNS();
	f->cfg.post = fx_post;
	f->cfg.admit = fx_admit;
	f->cfg.refusals_per_client = 2;
	start(f);
	for (int i = 0; i < 3; i++) {
		fd = client(f, "127.0.0.1");
		post_head(fd, "/v1/report", 100, "Authorization: Bearer refused\r\n");
		assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
		assert_contains(buf, "HTTP/1.1 403");
		close(fd);
	}
	fd = client(f, "127.0.0.1");
	post_head(fd, "/v1/report", 100, "Authorization: Bearer proven\r\n");
	/* closed with nothing said: no status line */
	read_all(f, fd, buf, sizeof(buf), 2000);
	assert_null(strstr(buf, "HTTP/1.1"));
	close(fd);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.admit_refused, 3);
	assert_int_equal(st.refused_benched, 1);
	assert_int_equal(f->posts, 0);
}

/*
 * 150 connections announce 64 KiB bodies: nothing is held until bytes
 * come, then 1 KiB each for their first 10 bytes (where the whole
 * announced length was allocated up front before: 9.8 MB); a body that
 * arrives grows with it; a short one holds its length; all of it goes
 * when the connections do.
 */
static void t_server_bodies_held_as_arrived(void **state)
{
	enum { N = 150 };
	struct srv_fx *f = *state;
	struct http_stats st;
	static char big[40000];
	int fds[N], small;

	NEED_NETNS();
	f->cfg.post = fx_post;
	f->cfg.max_connections = N + 10;
	f->cfg.per_client = N + 10;
	f->cfg.reserve = 1;
	start(f);
	for (int i = 0; i < N; i++) {
		fds[i] = client(f, "127.0.0.1");
		post_head(fds[i], "/v1/report", 65536, NULL);
		if (i % 16 == 0)
			drive(f, 5);
	}
	drive(f, 200);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.connections, N);
	assert_int_equal(st.bodies_bytes, 0);
	for (int i = 0; i < N; i++)
		say(fds[i], "0123456789");
	drive(f, 200);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.bodies_bytes, (size_t)N * 1024);
	assert_int_equal(st.unproven_bytes, st.bodies_bytes);
	/* the stat follows what arrives: one body takes 40 kB more */
	memset(big, 'x', sizeof(big));
	say_all(f, fds[0], big, sizeof(big));
	drive(f, 100);
	http_get_stats(f->srv, &st);
	assert_true(st.bodies_bytes >= (size_t)(N - 1) * 1024 + 40010);
	assert_true(st.bodies_bytes <= (size_t)(N - 1) * 1024 + 65536);
	/* a body of 10 bytes never holds more than 10 */
	small = client(f, "127.0.0.1");
	post_head(small, "/v1/report", 10, NULL);
	drive(f, 50);
	say(small, "01234");
	{
		size_t before = st.bodies_bytes;

		drive(f, 100);
		http_get_stats(f->srv, &st);
		assert_int_equal(st.bodies_bytes, before + 10);
	}
	close(small);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	drive(f, 200);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.connections, 0);
	assert_int_equal(st.bodies_bytes, 0);
	assert_int_equal(st.unproven_bytes, 0);
	assert_int_equal(f->posts, 0);
}

/* n unproven clients (127.0.0.2) each announce 4096 and send 1000 bytes: 1 KiB held each. */
static void hold_unproven(struct srv_fx *f, int *fds, int n)
{
	char part[1000];

	memset(part, 'u', sizeof(part));
	for (int i = 0; i < n; i++) {
		fds[i] = client(f, "127.0.0.2");
		post_head(fds[i], "/v1/report", 4096, NULL);
		drive(f, 10);
		say_all(f, fds[i], part, sizeof(part));
	}
	drive(f, 100);
}

/* A proven client's 4096-byte report; returns what it was answered. */
static void post_proven(struct srv_fx *f, char *buf, size_t size)
{
	char body[4096];
	int fd = client(f, "127.0.0.3");

	pattern(body, sizeof(body), 9);
	post_head(fd, "/v1/report", sizeof(body),
		  "Authorization: Bearer proven\r\nConnection: close\r\n");
	drive(f, 20);
	/* a refused one is closed before its body: what is not sent is not waited for */
	for (size_t off = 0; off < sizeof(body); off += 1024) {
		if (send(fd, body + off, 1024, MSG_NOSIGNAL) != 1024)
			break;
		drive(f, 5);
	}
	assert_true(read_all(f, fd, buf, size, 2000));
	close(fd);
}

/*
 * All bodies 8 KiB, the unproven ones 4 KiB: four unproven clients fill
 * their share; a fifth is answered 503 Retry-After: 1 at once and closed;
 * a proven client's report still goes through whole; one of the four that
 * grows past the share is dropped and answered 503 at its end. Control: with
 * no admit callback nobody is proven, and the same report is refused.
 */
static void t_server_bodies_cap(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	char buf[1024], rest[3096];
	int u[5];

	NEED_NETNS();
	f->cfg.post = fx_post;
	f->cfg.admit = fx_admit;
	f->cfg.max_body = 4096;
	f->cfg.max_bodies_bytes = 8192;
	f->cfg.unproven_bodies_bytes = 4096;
	start(f);
	hold_unproven(f, u, 4);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.unproven_bytes, 4096);
	assert_int_equal(st.bodies_bytes, 4096);
	assert_int_equal(st.bodies_refused, 0);
	/* the fifth: no room for its first bytes */
	u[4] = client(f, "127.0.0.2");
	post_head(u[4], "/v1/report", 4096, NULL);
	assert_true(read_all(f, u[4], buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 503");
	assert_contains(buf, "\r\nRetry-After: 1\r\n");
	close(u[4]);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.bodies_refused, 1);
	/* the proven one: 4096 bytes beside the unproven 4096 */
	post_proven(f, buf, sizeof(buf));
	assert_contains(buf, "HTTP/1.1 200");
	assert_contains(buf, "post 1: 4096 bytes");
	assert_int_equal(f->post_len, 4096);
	assert_string_equal(f->post_auth, "Bearer proven");
	/* one of the four grows past the share: dropped, 503 at its end */
	memset(rest, 'u', sizeof(rest));
	say_all(f, u[0], rest, sizeof(rest));
	assert_true(read_all(f, u[0], buf, sizeof(buf), 2000));
	assert_contains(buf, "HTTP/1.1 503");
	assert_contains(buf, "\r\nRetry-After: 1\r\n");
	close(u[0]);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.bodies_refused, 2);
	assert_int_equal(st.unproven_bytes, 3072);
	assert_int_equal(f->posts, 1);
	for (int i = 1; i < 4; i++)
		close(u[i]);
	drive(f, 100);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.bodies_bytes, 0);

	/* control: nobody proven, the same report finds the share full */
	http_free(f->srv);
	f->srv = NULL;
	f->cfg.admit = NULL;
	start(f);
	hold_unproven(f, u, 4);
	post_proven(f, buf, sizeof(buf));
	assert_contains(buf, "HTTP/1.1 503");
	assert_int_equal(f->posts, 1);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.bodies_refused, 1);
	for (int i = 0; i < 4; i++)
		close(u[i]);
}

/* ---- TLS ---- */

/*
 * Certificates minted for the run with openssl: two CAs, and a server
 * certificate from each for 127.0.0.1 (subjectAltName IP), in a directory
 * removed at the end.
 */
static char tls_dir[64];

static const char MINT[] =
	"set -e; cd '%s'; printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext; "
	"for n in 1 2; do "
	"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
	"-keyout ca$n.key -out ca$n.pem -subj /CN=tollgate-test-ca$n; "
	"openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
	"-keyout srv$n.key -out srv$n.csr -subj /CN=tollgate-test-server; "
	"openssl x509 -req -in srv$n.csr -CA ca$n.pem -CAkey ca$n.key -CAcreateserial "
	"-days 2 -extfile san.ext -out srv$n.pem; "
	"done >/dev/null 2>&1";

static const char *tls_file(const char *name)
{
	static char paths[8][128];
	static int next;
	char *p = paths[next++ % 8];

	if (!tls_dir[0]) {
		char cmd[sizeof(MINT) + 64];

		snprintf(tls_dir, sizeof(tls_dir), "/tmp/tg-ktest-tls-XXXXXX");
		assert_non_null(mkdtemp(tls_dir));
		snprintf(cmd, sizeof(cmd), MINT, tls_dir);
		assert_int_equal(system(cmd), 0);
	}
	snprintf(p, 128, "%s/%s", tls_dir, name);
	return p;
}

static void copy_file(const char *from, const char *to)
{
	char buf[8192];
	FILE *in = fopen(from, "r"), *out = fopen(to, "w");
	size_t n;

	assert_non_null(in);
	assert_non_null(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		assert_int_equal(fwrite(buf, 1, n, out), n);
	fclose(in);
	assert_int_equal(fclose(out), 0);
}

static void tls_on(struct srv_fx *f, const char *cert, const char *key)
{
	f->cfg.tls_cert_file = tls_file(cert);
	f->cfg.tls_key_file = tls_file(key);
}

struct fetched {
	CURLcode code;
	long status;
	long connects; /* new connections it took (0: one reused) */
	char body[1024];
	size_t len;
	char err[CURL_ERROR_SIZE];
};

static size_t fetched_write(char *data, size_t size, size_t n, void *cls)
{
	struct fetched *r = cls;
	size_t k = size * n;

	if (k > sizeof(r->body) - 1 - r->len)
		k = sizeof(r->body) - 1 - r->len;
	memcpy(r->body + r->len, data, k);
	r->len += k;
	r->body[r->len] = '\0';
	return size * n;
}

/*
 * libcurl fetches https://127.0.0.1:port/path (POSTs `post` when not NULL,
 * with `auth` as its Authorization; a GET sends `auth` as a header line of
 * its own) trusting only the CA file `ca`, while
 * the server is driven; through `m`, whose connections outlive the call.
 */
static void fetch(struct srv_fx *f, CURLM *m, const char *ca, const char *path, const char *post,
		  const char *auth, struct fetched *ret)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[128], hdr[256];
	int running = 1, left;
	int64_t end = mono_ms() + 5000;
	CURLMsg *msg;

	memset(ret, 0, sizeof(*ret));
	ret->code = CURLE_OPERATION_TIMEDOUT;
	assert_non_null(h);
	snprintf(url, sizeof(url), "https://127.0.0.1:%u%s", f->port, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CAINFO, ca);
	curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 4000L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ret->err);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, fetched_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, ret);
	if (post) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, post);
		if (auth) {
			snprintf(hdr, sizeof(hdr), "Authorization: %s", auth);
			hdrs = curl_slist_append(hdrs, hdr);
		}
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	} else if (auth) {
		hdrs = curl_slist_append(hdrs, auth); /* a GET's: a header line of its own */
	}
	if (hdrs)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	assert_int_equal(curl_multi_add_handle(m, h), CURLM_OK);
	while (running && mono_ms() < end) {
		curl_multi_perform(m, &running);
		if (!running)
			break;
		curl_multi_wait(m, NULL, 0, 5, NULL);
		turn(f, 5);
	}
	while ((msg = curl_multi_info_read(m, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
			ret->code = msg->data.result;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &ret->status);
	curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &ret->connects);
	curl_multi_remove_handle(m, h);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
}

/*
 * Over TLS: a client trusting the CA gets the page and its POST through
 * (the callback told it came over TLS, with its Authorization); one
 * trusting another CA fails its handshake and gets nothing; plain HTTP on
 * the TLS port gets no page (and nothing collected). The page is shared and
 * request_memory bounds the headers over TLS as in plain.
 */
static char big_header[20100];

static void t_tls_serves(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	struct fetched r;
	CURLM *m = curl_multi_init();
	char buf[1024];
	int fd;

	NEED_NETNS();
	assert_non_null(m);
	memcpy(big_header, "X-Big: ", 7);
	memset(big_header + 7, 'b', 20000);
	f->cfg.post = fx_post;
	tls_on(f, "srv1.pem", "srv1.key");
	start(f);
	fetch(f, m, tls_file("ca1.pem"), "/healthz", NULL, NULL, &r);
	assert_int_equal(r.code, CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "ok\n");
	fetch(f, m, tls_file("ca1.pem"), "/v1/report", "{\"a\":1}", "Bearer tls.token", &r);
	assert_int_equal(r.code, CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "post 1: 7 bytes\n");
	assert_int_equal(r.connects, 0); /* kept alive */
	assert_true(f->post_tls);
	assert_string_equal(f->post_auth, "Bearer tls.token");
	assert_memory_equal(f->post_body, "{\"a\":1}", 7);
	/* the wrong CA: refused in the handshake, nothing served */
	fetch(f, m, tls_file("ca2.pem"), "/v1/report", "{}", "Bearer x", &r);
	assert_int_equal(r.code, CURLE_PEER_FAILED_VERIFICATION);
	assert_int_equal(r.status, 0);
	assert_int_equal(f->posts, 1);
	/* plain HTTP: no answer of HTTP, no page collected; the server closes */
	fd = client(f, "127.0.0.1");
	say(fd, GET_METRICS);
	assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
	assert_null(strstr(buf, "HTTP/1."));
	close(fd);
	assert_int_equal(f->collects, 0);
	/* ...while the page itself is there over TLS, collected once per window */
	for (int i = 0; i < 3; i++) {
		fetch(f, m, tls_file("ca1.pem"), "/metrics", NULL, NULL, &r);
		assert_int_equal(r.code, CURLE_OK);
		assert_string_equal(r.body, "page 1\n");
	}
	assert_int_equal(f->collects, 1);
	/* request_memory holds over TLS: 20 kB of headers are refused */
	fetch(f, m, tls_file("ca1.pem"), "/healthz", NULL, big_header, &r);
	assert_int_equal(r.code, CURLE_OK);
	assert_int_equal(r.status, 431);
	curl_multi_cleanup(m);
	drive(f, 50);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.connections, 0);
}

/*
 * The limits over TLS: a client that connects and never finishes its
 * handshake (silent, or a ClientHello begun) is cut at the deadline; the
 * per-client limit refuses at accept as for plain HTTP; a request within
 * the deadline is served (the control: the cut is the deadline's).
 */
static void t_tls_limits(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	struct fetched r;
	CURLM *m = curl_multi_init();
	int64_t t0, cut[2] = { 0, 0 };
	int a, b, c;
	char ch;

	NEED_NETNS();
	assert_non_null(m);
	f->cfg.deadline_ms = 300;
	f->cfg.per_client = 2;
	tls_on(f, "srv1.pem", "srv1.key");
	start(f);
	fetch(f, m, tls_file("ca1.pem"), "/healthz", NULL, NULL, &r);
	assert_int_equal(r.code, CURLE_OK);
	curl_multi_cleanup(m);
	drive(f, 50);
	a = client(f, "127.0.0.5");
	b = client(f, "127.0.0.5");
	c = client(f, "127.0.0.5"); /* the third: over per_client */
	t0 = mono_ms();
	/* a TLS record header and a few bytes of a ClientHello, never the rest */
	assert_int_equal(send(b, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11, MSG_NOSIGNAL),
			 11);
	while ((!cut[0] || !cut[1]) && mono_ms() - t0 < 2000) {
		int fds[2] = { a, b };

		for (int i = 0; i < 2; i++) {
			ssize_t n = recv(fds[i], &ch, 1, 0);

			if (!cut[i] && (n == 0 || (n < 0 && errno == ECONNRESET)))
				cut[i] = mono_ms();
		}
		turn(f, 10);
	}
	assert_true(cut[0] && cut[1]);
	for (int i = 0; i < 2; i++) {
		assert_true(cut[i] - t0 >= 280);
		assert_true(cut[i] - t0 < 600);
	}
	drive(f, 20);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.deadline_closed, 2);
	assert_int_equal(st.refused_client, 1);
	assert_int_equal(st.connections, 0);
	close(a);
	close(b);
	close(c);
}

/*
 * http_tls_reload: the same descriptor; a connection kept alive from before
 * is served the request it brings, then closed; every new one gets the new
 * certificate (a client trusting only the old CA fails, one trusting the
 * new CA succeeds). A reload with a broken key fails, says which file, and
 * the certificate of before is still served.
 */
static void t_tls_reload(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	struct fetched r;
	CURLM *m = curl_multi_init();
	char cert[128], key[128], err[256];
	int fd0;
	FILE *fp;

	NEED_NETNS();
	assert_non_null(m);
	snprintf(cert, sizeof(cert), "%s", tls_file("cur.pem"));
	snprintf(key, sizeof(key), "%s", tls_file("cur.key"));
	copy_file(tls_file("srv1.pem"), cert);
	copy_file(tls_file("srv1.key"), key);
	f->cfg.tls_cert_file = cert;
	f->cfg.tls_key_file = key;
	f->cfg.tls_err = err;
	f->cfg.tls_err_size = sizeof(err);
	f->cfg.deadline_ms = 3000;
	f->cfg.post = fx_post;
	start(f);
	fd0 = http_fd(f->srv);
	fetch(f, m, tls_file("ca1.pem"), "/healthz", NULL, NULL, &r);
	assert_int_equal(r.code, CURLE_OK);
	assert_int_equal(r.connects, 1);
	copy_file(tls_file("srv2.pem"), cert);
	copy_file(tls_file("srv2.key"), key);
	assert_int_equal(http_tls_reload(f->srv), 0);
	assert_string_equal(err, "");
	assert_int_equal(http_fd(f->srv), fd0);
	/* the kept-alive connection: its request served, then closed */
	fetch(f, m, tls_file("ca1.pem"), "/v1/report", "{}", "Bearer old", &r);
	assert_int_equal(r.code, CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.connects, 0);
	assert_string_equal(f->post_auth, "Bearer old");
	drive(f, 50);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.connections, 0);
	/* new connections: the new certificate */
	fetch(f, m, tls_file("ca1.pem"), "/healthz", NULL, NULL, &r);
	assert_int_equal(r.code, CURLE_PEER_FAILED_VERIFICATION);
	fetch(f, m, tls_file("ca2.pem"), "/healthz", NULL, NULL, &r);
	assert_int_equal(r.code, CURLE_OK);
	assert_int_equal(r.connects, 1);
	/* a broken key: refused, named, the current certificate kept */
	fp = fopen(key, "w");
	assert_non_null(fp);
	fputs("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", fp);
	fclose(fp);
	assert_int_equal(http_tls_reload(f->srv), -EBADMSG);
	assert_contains(err, key);
	fetch(f, m, tls_file("ca2.pem"), "/healthz", NULL, NULL, &r);
	assert_int_equal(r.code, CURLE_OK);
	assert_int_equal(r.connects, 0); /* kept alive across the failed reload */
	/* a missing file: the same */
	assert_int_equal(unlink(cert), 0);
	assert_int_equal(http_tls_reload(f->srv), -ENOENT);
	assert_contains(err, cert);
	curl_multi_cleanup(m);
	drive(f, 50);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.connections, 0);
	unlink(key);
}

static void t_server_collect_fails(void **state)
{
	struct srv_fx *f = *state;
	struct http_stats st;
	char buf[1024];

	NEED_NETNS();
	f->collect_result = -EIO;
	start(f);
	for (int i = 0; i < 3; i++) {
		int fd = client(f, "127.0.0.1");

		say(fd, GET_METRICS);
		assert_true(read_all(f, fd, buf, sizeof(buf), 2000));
		assert_contains(buf, "HTTP/1.1 500");
		close(fd);
	}
	/* once per window, however many ask */
	assert_int_equal(f->collects, 1);
	http_get_stats(f->srv, &st);
	assert_int_equal(st.collection_failures, 1);
	assert_int_equal(st.pages, 0);
}

int main(void)
{
	int r;

	add_test_fixture("t_server_page_shared", t_server_page_shared, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_cache_expires", t_server_cache_expires, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_no_cache", t_server_no_cache, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_deadline_cuts_trickle", t_server_deadline_cuts_trickle,
			 setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_keepalive_restart", t_server_keepalive_restart, setup_srv,
			 teardown_srv, NULL);
	add_test_fixture("t_server_limits", t_server_limits, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_methods_paths", t_server_methods_paths, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_collect_fails", t_server_collect_fails, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_post_body", t_server_post_body, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_post_chunked", t_server_post_chunked, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_post_too_large", t_server_post_too_large, setup_srv,
			 teardown_srv, NULL);
	add_test_fixture("t_server_post_length_required", t_server_post_length_required, setup_srv,
			 teardown_srv, NULL);
	add_test_fixture("t_server_post_methods", t_server_post_methods, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_post_keepalive", t_server_post_keepalive, setup_srv,
			 teardown_srv, NULL);
	add_test_fixture("t_server_post_trickle_deadline", t_server_post_trickle_deadline,
			 setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_post_request", t_server_post_request, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_benched", t_server_benched, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_admit_refused", t_server_admit_refused, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_bodies_held_as_arrived", t_server_bodies_held_as_arrived,
			 setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_bodies_cap", t_server_bodies_cap, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_tls_serves", t_tls_serves, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_tls_limits", t_tls_limits, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_tls_reload", t_tls_reload, setup_srv, teardown_srv, NULL);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	r = run_group("http server in a network namespace");
	if (tls_dir[0]) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tls_dir);
		if (system(cmd) != 0)
			r = 1;
	}
	curl_global_cleanup();
	return r;
}
