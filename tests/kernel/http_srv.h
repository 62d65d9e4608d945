/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_HTTP_SRV_H
#define TG_TEST_HTTP_SRV_H

/*
 * The metrics endpoint's HTTP server (http/) driven as a caller's event loop
 * drives it, on loopback in the process's private network namespace
 * (tests/unit/netns.h): the fixture (a server on its own port with
 * recording callbacks) and the clients' helpers of tests/kernel/ktest_http.c.
 *
 * Include in one file of a ktest binary, after cmocka.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "http/internal.h"
#include "tests/unit/netns.h"

struct srv_fx {
	struct http_server *srv;
	struct http_config cfg;
	int collects;
	int collect_result;
	uint16_t port;
	/* what the post callback was given last, and how often it ran */
	int posts;
	char post_path[64];
	char *post_body;
	size_t post_len;
	bool post_nul;	     /* the body had its NUL after len */
	char post_auth[128]; /* its Authorization ("(none)": none) */
	struct sockaddr_in post_peer;
	bool post_tls;
	/* what the admit callback answers (admit_as) and was asked, and how often */
	int admit_as;
	int admits;
	char admit_auth[128];
	struct sockaddr_in admit_peer;
	char reply[64];
};

static inline void fx_route(void *cls, const char *path, struct http_reply *ret)
{
	(void)cls;
	if (strcmp(path, "/metrics") == 0)
		ret->page = true;
	else if (strcmp(path, "/healthz") == 0)
		*ret = (struct http_reply){ .status = 200,
					    .content_type = "text/plain",
					    .body = "ok\n",
					    .len = 3 };
}

/* Records the body; answers "post N: LEN bytes" from a buffer it overwrites on the next call. */
static inline void fx_post(void *cls, const struct http_request *req, struct http_reply *ret)
{
	struct srv_fx *f = cls;
	const char *path = req->path, *body = req->body;
	size_t len = req->len;
	int n;

	f->posts++;
	snprintf(f->post_auth, sizeof(f->post_auth), "%s",
		 req->authorization ? req->authorization : "(none)");
	f->post_peer = req->peer;
	f->post_tls = req->tls;
	snprintf(f->post_path, sizeof(f->post_path), "%s", path);
	free(f->post_body);
	f->post_body = malloc(len ? len : 1);
	assert_non_null(f->post_body);
	memcpy(f->post_body, body, len);
	f->post_len = len;
	f->post_nul = body[len] == '\0';
	if (strcmp(path, "/v1/auth") == 0) {
		*ret = (struct http_reply){ .status = 401,
					    .www_authenticate = "Bearer realm=\"tollgate\"" };
		return;
	}
	if (strcmp(path, "/v1/busy") == 0) {
		*ret = (struct http_reply){ .status = 503, .retry_after_s = 7 };
		return;
	}
	if (strcmp(path, "/v1/report") != 0)
		return; /* 404 */
	n = snprintf(f->reply, sizeof(f->reply), "post %d: %zu bytes\n", f->posts, len);
	*ret = (struct http_reply){ .status = 200,
				    .content_type = "application/json",
				    .body = f->reply,
				    .len = (size_t)n };
}

/* Answers admit_as; "Bearer proven" is always proven, "Bearer refused" refused. */
static inline int fx_admit(void *cls, const char *path, const char *authorization,
			   const struct sockaddr_in *peer)
{
	struct srv_fx *f = cls;

	(void)path;
	f->admits++;
	snprintf(f->admit_auth, sizeof(f->admit_auth), "%s",
		 authorization ? authorization : "(none)");
	f->admit_peer = *peer;
	if (authorization && strcmp(authorization, "Bearer proven") == 0)
		return 1;
	if (authorization && strcmp(authorization, "Bearer refused") == 0)
		return -1;
	return f->admit_as;
}

static inline int fx_collect(void *cls, char **ret_buf, size_t *ret_len)
{
	struct srv_fx *f = cls;
	char *b;
	int n;

	f->collects++;
	if (f->collect_result < 0)
		return f->collect_result;
	b = malloc(64);
	if (!b)
		return -ENOMEM;
	n = snprintf(b, 64, "page %d\n", f->collects);
	*ret_buf = b;
	*ret_len = (size_t)n;
	return 0;
}

static inline void lo_up(void)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	assert_int_equal(ioctl(fd, SIOCGIFFLAGS, &ifr), 0);
	ifr.ifr_flags |= IFF_UP;
	assert_int_equal(ioctl(fd, SIOCSIFFLAGS, &ifr), 0);
	close(fd);
}

static inline int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One turn of the caller's loop: wait (at most ms) for the server, then run it. */
static inline void turn(struct srv_fx *f, int ms)
{
	struct pollfd p = { .fd = http_fd(f->srv), .events = POLLIN };
	int t = http_timeout_ms(f->srv);

	if (t < 0 || t > ms)
		t = ms;
	poll(&p, 1, t);
	http_run(f->srv);
}

static inline void drive(struct srv_fx *f, int ms)
{
	int64_t end = mono_ms() + ms;

	while (mono_ms() < end)
		turn(f, (int)(end - mono_ms()));
}

static inline int setup_srv(void **state)
{
	static uint16_t next_port = 18000;
	struct srv_fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	*state = f;
	if (!in_private_netns())
		return 0; /* each test skips */
	lo_up();
	http_config_defaults(&f->cfg);
	f->port = next_port++;
	f->cfg.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->cfg.addr.sin_port = htons(f->port);
	f->cfg.route = fx_route;
	f->cfg.collect = fx_collect;
	f->cfg.collect_cls = f;
	f->cfg.page_type = "text/plain; version=0.0.4";
	f->cfg.post_cls = f;
	f->cfg.admit_cls = f;
	return 0;
}

static inline int teardown_srv(void **state)
{
	struct srv_fx *f = *state;

	http_free(f->srv);
	free(f->post_body);
	free(f);
	return 0;
}

static inline void start(struct srv_fx *f)
{
	assert_int_equal(http_start(&f->cfg, &f->srv), 0);
}

/* A non-blocking client from `src` (127.0.0.x), connected (the kernel completes it). */
static inline int client(struct srv_fx *f, const char *src)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(f->port) };
	struct sockaddr_in me = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(inet_pton(AF_INET, src, &me.sin_addr), 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	return fd;
}

static inline void say(int fd, const char *s)
{
	assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/*
 * Reads what the server sent on fd while driving it, until the server
 * closes (returns true) or `ms` pass (false). buf gets it all, NUL-terminated.
 */
static inline bool read_all(struct srv_fx *f, int fd, char *buf, size_t size, int ms)
{
	size_t len = 0;
	int64_t end = mono_ms() + ms;

	buf[0] = '\0';
	while (mono_ms() < end) {
		ssize_t n = recv(fd, buf + len, size - 1 - len, 0);

		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n > 0) {
			len += (size_t)n;
			buf[len] = '\0';
			if (len == size - 1)
				return false;
			continue;
		}
		turn(f, 10);
	}
	return false;
}

/* Reads until the response's body (Content-Length) is complete, or ms pass. */
static inline bool read_response(struct srv_fx *f, int fd, char *buf, size_t size, int ms)
{
	size_t len = 0;
	int64_t end = mono_ms() + ms;

	buf[0] = '\0';
	while (mono_ms() < end) {
		ssize_t n = recv(fd, buf + len, size - 1 - len, 0);
		const char *hdr_end, *cl;

		if (n > 0) {
			len += (size_t)n;
			buf[len] = '\0';
		} else if (n == 0) {
			return false;
		} else {
			turn(f, 10);
		}
		hdr_end = strstr(buf, "\r\n\r\n");
		cl = strcasestr(buf, "Content-Length: ");
		if (hdr_end && cl &&
		    len >= (size_t)(hdr_end + 4 - buf) + strtoul(cl + 16, NULL, 10))
			return true;
	}
	return false;
}

#endif
