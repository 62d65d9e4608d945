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
	return run_group("http server in a network namespace");
}
