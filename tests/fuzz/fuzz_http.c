// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer: the HTTP server's request path (http/). Each input is sent as
 * raw bytes on a TCP connection to two servers, in a network namespace of
 * the fuzzer's own: one routed as the agent routes (/metrics, /healthz, /;
 * no POST), one as the allocator does (POST bodies up to 1 kB handed to a
 * callback that reads every byte given and checks the bound and the NUL
 * after them). Whatever comes back must be an HTTP answer, the
 * connection must be gone once the client has closed it, and each server
 * must still answer a plain GET afterwards.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/http.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define POST_MAX_BODY 1024

/* the agent's shape, then the allocator's */
static struct http_server *servers[2];
static struct sockaddr_in addrs[2];
static struct http_server *srv; /* the one being fed */

static void route(void *cls, const char *path, struct http_reply *ret)
{
	static const char text[] = "text/plain; charset=utf-8";

	(void)cls;
	if (strcmp(path, "/metrics") == 0)
		ret->page = true;
	else if (strcmp(path, "/healthz") == 0)
		*ret = (struct http_reply){ .status = 200,
					    .content_type = text,
					    .body = "ok\n",
					    .len = 3 };
	else if (strcmp(path, "/") == 0)
		*ret = (struct http_reply){ .status = 200,
					    .content_type = text,
					    .body = "index\n",
					    .len = 6 };
}

/* The body's bytes are all there, within bounds, NUL after them. */
static void post(void *cls, const struct http_request *req, struct http_reply *ret)
{
	static char reply[64];
	const char *path = req->path, *body = req->body;
	size_t len = req->len;
	int n;

	(void)cls;
	if (len > POST_MAX_BODY || body[len] != '\0' || !path)
		abort();
	for (size_t i = 0; i < len; i++)
		reply[0] ^= body[i]; /* every byte given is readable (ASan) */
	n = snprintf(reply, sizeof(reply), "%zu\n", len);
	*ret = (struct http_reply){ .status = 200,
				    .content_type = "text/plain",
				    .body = reply,
				    .len = (size_t)n };
}

static int collect(void *cls, char **ret_buf, size_t *ret_len)
{
	static const char page[] = "# TYPE tollgate_build_info gauge\ntollgate_build_info 1\n";

	(void)cls;
	*ret_buf = strdup(page);
	*ret_len = sizeof(page) - 1;
	return *ret_buf ? 0 : -ENOMEM;
}

/* Runs the server until `until` holds or `ms` pass; true when it held. */
static bool serve_until(bool (*until)(int), int fd, int ms)
{
	for (int waited = 0; waited < ms; waited++) {
		struct pollfd p[2] = { { .fd = http_fd(srv), .events = POLLIN },
				       { .fd = fd, .events = POLLIN } };

		http_run(srv);
		if (until(fd))
			return true;
		poll(p, fd >= 0 ? 2 : 1, 1);
	}
	return false;
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) > 0;
}

static bool no_connections(int fd)
{
	struct http_stats st;

	(void)fd;
	http_get_stats(srv, &st);
	return st.connections == 0;
}

/*
 * The client's address for the next connection: each one closes first, so
 * its port stays in TIME_WAIT for a minute, and thousands of inputs a second
 * would run one address out of ports. 127.1.0.0/16 (all on lo) has ports
 * enough for every rate.
 */
static const struct sockaddr_in *next_source(void)
{
	static struct sockaddr_in sa = { .sin_family = AF_INET };
	static uint32_t host;

	host = (host + 1) % 0xfffe;
	sa.sin_addr.s_addr = htonl(0x7f010001u + host);
	return &sa;
}

/*
 * connect(2) that a signal does not fail: libFuzzer's timer interrupts the
 * wait now and then, while the handshake goes on; then wait for its end.
 */
static int connect_to(int fd, const struct sockaddr_in *sa)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	socklen_t len = sizeof(int);
	int err = 0, n;

	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return 0;
	if (errno != EINTR)
		return -1;
	do
		n = poll(&p, 1, 2000);
	while (n < 0 && errno == EINTR);
	if (n <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		errno = n == 0 ? ETIMEDOUT : err ? err : errno;
		return -1;
	}
	return 0;
}

/* Sends `req`, reads the whole answer into buf (NUL-terminated); its length. */
static size_t exchange(int which, const void *req, size_t len, char *buf, size_t cap)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t got = 0;

	srv = servers[which];
	if (fd < 0 || bind(fd, (struct sockaddr *)next_source(), sizeof(struct sockaddr_in)) < 0 ||
	    connect_to(fd, &addrs[which]) < 0) {
		perror("fuzz_http: client socket");
		abort();
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = send(fd, (const char *)req + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the server may close early on garbage */
		off += (size_t)n;
		http_run(srv);
	}
	shutdown(fd, SHUT_WR);
	while (got + 1 < cap && serve_until(readable, fd, 2000)) {
		ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	if (!serve_until(no_connections, -1, 2000))
		abort(); /* a connection left open after its client closed */
	return got;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct http_config cfg;
	struct ifreq ifr = { .ifr_name = "lo" };
	int s;

	(void)argc, (void)argv;
	/* A namespace of its own: nothing is ever bound on the host's addresses. */
	if (unshare(CLONE_NEWNET) < 0) {
		perror("fuzz_http: unshare(CLONE_NEWNET) (run as root)");
		exit(1);
	}
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		abort();
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		abort();
	close(s);
	for (int i = 0; i < 2; i++) {
		http_config_defaults(&cfg);
		cfg.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		cfg.addr.sin_port = htons(9617 + i);
		cfg.route = route;
		cfg.collect = collect;
		cfg.cache_ms = 0;
		if (i == 1) {
			cfg.post = post;
			cfg.max_body = POST_MAX_BODY;
		}
		if (http_start(&cfg, &servers[i]) < 0)
			abort();
		addrs[i] = cfg.addr;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char plain[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	static unsigned int runs;
	char buf[8192];
	size_t n;

	if (size > 16384)
		return 0;
	for (int i = 0; i < 2; i++) {
		n = exchange(i, data, size, buf, sizeof(buf));
		if (n && strncmp(buf, "HTTP/1.", n < 7 ? n : 7) != 0)
			abort(); /* something that is not an HTTP answer */
	}
	if (++runs % 64 == 0) {
		for (int i = 0; i < 2; i++) {
			/* buf is "" when none came */
			exchange(i, plain, sizeof(plain) - 1, buf, sizeof(buf));
			if (strncmp(buf, "HTTP/1.1 200", 12) != 0)
				abort(); /* the server stopped answering */
		}
	}
	return 0;
}
