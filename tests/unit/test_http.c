// SPDX-License-Identifier: Apache-2.0
/*
 * The metrics endpoint's HTTP server (http/).
 *
 * Pure parts, no kernel: the admission rule (per-client limit, the reserve
 * kept for clients holding no connection, the global limit), the connection
 * table's deadline bookkeeping (expiry, restart after a response, the next
 * wake-up, cut connections never cut twice), and --listen parsing (every
 * accepted form, and malformed ones refused without asking a resolver).
 *
 * The server itself, driven as the caller's event loop drives it, on
 * loopback in a private network namespace (root only): N requests within
 * the cache window cost one collection and get the same bytes; a client
 * trickling its header is cut at the deadline; a kept-alive connection's
 * deadline restarts after each response; per-client and reserve refusals;
 * a full table leaves clients in the backlog until a slot frees; 404, 405
 * with Allow, HEAD, and a failed collection answered 500 once per window.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/group.h"

#include "http/http.h"
#include "http/internal.h"
#include "tests/unit/helpers.h"
#include "tests/unit/netns.h"

/* ---- admission ---- */

static const struct admit_case {
	const char *name;
	unsigned int max, per_client, reserve, used, held;
	enum http_admit want;
} admit_cases[] = {
	{ "empty table", 64, 16, 8, 0, 0, HTTP_ADMIT },
	{ "a client's second", 64, 16, 8, 1, 1, HTTP_ADMIT },
	{ "a client at its limit", 64, 16, 8, 20, 16, HTTP_REFUSE_CLIENT },
	{ "a client past its limit", 64, 16, 8, 20, 17, HTTP_REFUSE_CLIENT },
	{ "holder, just below the reserve", 64, 16, 8, 55, 3, HTTP_ADMIT },
	{ "holder, at the reserve", 64, 16, 8, 56, 3, HTTP_REFUSE_RESERVE },
	{ "holder, inside the reserve", 64, 16, 8, 63, 1, HTTP_REFUSE_RESERVE },
	{ "no connection, at the reserve", 64, 16, 8, 56, 0, HTTP_ADMIT },
	{ "no connection, last slot", 64, 16, 8, 63, 0, HTTP_ADMIT },
	{ "no connection, full", 64, 16, 8, 64, 0, HTTP_REFUSE_FULL },
	{ "holder, full", 64, 16, 8, 64, 2, HTTP_REFUSE_FULL },
	{ "client limit first, even when full", 64, 16, 8, 64, 16, HTTP_REFUSE_CLIENT },
	{ "no reserve: holder takes the last slot", 4, 4, 0, 3, 3, HTTP_ADMIT },
	{ "no reserve: full", 4, 4, 0, 4, 0, HTTP_REFUSE_FULL },
	{ "one per client", 8, 1, 2, 0, 1, HTTP_REFUSE_CLIENT },
};

static void t_admit(void **state)
{
	const struct admit_case *c = *state;

	assert_int_equal(http_admit(c->max, c->per_client, c->reserve, c->used, c->held), c->want);
}

/* 4 bad addresses with 16 connections each never hold the reserve; Prometheus gets in. */
static void t_admit_four_bad_neighbours(void **state)
{
	unsigned int used = 0, held[5] = { 0 };

	(void)state;
	for (int round = 0; round < 16; round++)
		for (int a = 0; a < 4; a++)
			if (http_admit(64, 16, 8, used, held[a]) == HTTP_ADMIT) {
				held[a]++;
				used++;
			}
	assert_int_equal(used, 56);
	assert_int_equal(http_admit(64, 16, 8, used, held[4]), HTTP_ADMIT);
}

/* ---- the connection table ---- */

#define A1 0x0100000a /* 10.0.0.1 in network order on little-endian; any value will do */
#define A2 0x0200000a

static void t_conntab_add_find_remove(void **state)
{
	struct conntab t;
	struct http_conn *c[4];

	(void)state;
	assert_int_equal(conntab_init(&t, 3), 0);
	c[0] = conntab_add(&t, 10, A1, 1000);
	c[1] = conntab_add(&t, 11, A1, 1000);
	c[2] = conntab_add(&t, 12, A2, 1000);
	assert_non_null(c[0]);
	assert_non_null(c[1]);
	assert_non_null(c[2]);
	assert_null(conntab_add(&t, 13, A2, 1000)); /* full */
	assert_null(conntab_add(&t, -1, A2, 1000));
	assert_int_equal(t.used, 3);
	assert_int_equal(conntab_held(&t, A1), 2);
	assert_int_equal(conntab_held(&t, A2), 1);
	assert_ptr_equal(conntab_find(&t, 11), c[1]);
	assert_null(conntab_find(&t, 13));
	assert_null(conntab_find(&t, -1));
	conntab_remove(&t, c[1]);
	conntab_remove(&t, c[1]); /* twice: nothing */
	conntab_remove(&t, NULL);
	assert_int_equal(t.used, 2);
	assert_int_equal(conntab_held(&t, A1), 1);
	assert_null(conntab_find(&t, 11));
	c[3] = conntab_add(&t, 11, A2, 2000); /* the freed slot, fd reused */
	assert_ptr_equal(c[3], c[1]);
	assert_int_equal(c[3]->start_ms, 2000);
	assert_null(c[3]->owner);
	assert_false(c[3]->cut);
	assert_int_equal(conntab_held(&t, A2), 2);
	conntab_free(&t);
}

static void t_conntab_deadlines(void **state)
{
	struct conntab t;
	struct http_conn *a, *b, *c;
	int fds[8];

	(void)state;
	assert_int_equal(conntab_init(&t, 8), 0);
	assert_true(conntab_next_deadline(&t, 1000) == INT64_MAX);
	a = conntab_add(&t, 20, A1, 1000);
	b = conntab_add(&t, 21, A1, 1500);
	c = conntab_add(&t, 22, A2, 1200);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_true(conntab_next_deadline(&t, 1000) == 2000);
	/* not yet: one millisecond before */
	assert_int_equal(conntab_expire(&t, 1999, 1000, fds, 8), 0);
	assert_int_equal(conntab_expire(&t, 2000, 1000, fds, 8), 1);
	assert_int_equal(fds[0], 20);
	assert_true(a->cut);
	/* a cut connection has no deadline left and is never returned again */
	assert_true(conntab_next_deadline(&t, 1000) == 2200);
	assert_int_equal(conntab_expire(&t, 5000, 1000, fds, 8), 2);
	assert_int_equal(conntab_expire(&t, 9000, 1000, fds, 8), 0);
	assert_true(conntab_next_deadline(&t, 1000) == INT64_MAX);
	/* still held until closed */
	assert_int_equal(t.used, 3);
	assert_int_equal(conntab_held(&t, A1), 2);
	conntab_free(&t);
}

static void t_conntab_restart(void **state)
{
	struct conntab t;
	struct http_conn *a;
	int fds[2];

	(void)state;
	assert_int_equal(conntab_init(&t, 2), 0);
	a = conntab_add(&t, 30, A1, 1000);
	/* a response ended at 1900: the next request has until 2900 */
	conntab_restart(&t, a, 1900);
	assert_int_equal(conntab_expire(&t, 2500, 1000, fds, 2), 0);
	assert_true(conntab_next_deadline(&t, 1000) == 2900);
	assert_int_equal(conntab_expire(&t, 2900, 1000, fds, 2), 1);
	/* once cut, a late response does not revive it */
	conntab_restart(&t, a, 3000);
	assert_true(a->cut);
	assert_int_equal(a->start_ms, 1900);
	conntab_restart(&t, NULL, 3000);
	conntab_free(&t);
}

/* More expired than fit: the rest come on the next call, none twice. */
static void t_conntab_expire_bounded(void **state)
{
	struct conntab t;
	int fds[3], seen[10] = { 0 };
	unsigned int n, total = 0;

	(void)state;
	assert_int_equal(conntab_init(&t, 10), 0);
	for (int i = 0; i < 10; i++)
		assert_non_null(conntab_add(&t, 100 + i, A1, 0));
	while ((n = conntab_expire(&t, 50, 10, fds, ARRAY_SIZE(fds))) > 0) {
		assert_true(n <= 3);
		for (unsigned int i = 0; i < n; i++) {
			assert_true(fds[i] >= 100 && fds[i] < 110);
			assert_int_equal(seen[fds[i] - 100]++, 0);
		}
		total += n;
	}
	assert_int_equal(total, 10);
	conntab_free(&t);
}

/*
 * The allocator's size: 25,000 connections from 20,000 addresses under a
 * random mix of accepts, closes, responses (restarts) and expiries, checked
 * against a plain model after every step (counts, the fd index) and, every
 * 997 steps, the next deadline against a full scan of the model.
 */
struct model_conn {
	bool live, cut;
	unsigned int who;	/* index of the address in pool */
	int64_t start;
	struct http_conn *c;
};

static uint32_t xorshift(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static void t_conntab_model(void **state)
{
	enum { CAP = 25000, FDS = CAP + 500, ADDRS = 20000, DEADLINE = 5000 };
	struct model_conn *m = calloc(FDS, sizeof(*m));
	unsigned int *held = calloc(ADDRS, sizeof(*held)), used = 0;
	uint32_t *pool = calloc(ADDRS, sizeof(*pool));
	uint32_t seed = 12345;
	int64_t now = 1000;
	struct conntab t;
	int fds[16];

	(void)state;
	assert_non_null(m);
	assert_non_null(held);
	assert_non_null(pool);
	/* random addresses (and 0): their buckets collide as real ones do */
	for (unsigned int i = 1; i < ADDRS; i++)
		pool[i] = xorshift(&seed);
	assert_int_equal(conntab_init(&t, CAP), 0);
	for (int step = 0; step < 150000; step++) {
		uint32_t r = xorshift(&seed);
		int fd = (int)(xorshift(&seed) % FDS);
		struct model_conn *x = &m[fd];

		now += r % 3 == 0;
		switch (step < CAP ? 0 : r % 4) {
		case 0: /* accept */
			if (x->live) {
				assert_ptr_equal(conntab_find(&t, fd), x->c);
				break;
			}
			x->who = xorshift(&seed) % ADDRS;
			x->c = conntab_add(&t, fd, pool[x->who], now);
			if (used == CAP) {
				assert_null(x->c);
				break;
			}
			assert_non_null(x->c);
			*x = (struct model_conn){ .live = true, .who = x->who, .start = now, .c = x->c };
			held[x->who]++;
			used++;
			break;
		case 1: /* closed */
			if (!x->live) {
				assert_null(conntab_find(&t, fd));
				break;
			}
			conntab_remove(&t, x->c);
			held[x->who]--;
			used--;
			x->live = false;
			assert_null(conntab_find(&t, fd));
			break;
		case 2: /* a response ended */
			if (!x->live)
				break;
			conntab_restart(&t, x->c, now);
			if (!x->cut)
				x->start = now;
			break;
		default: { /* a sweep */
			unsigned int n = conntab_expire(&t, now, DEADLINE, fds, ARRAY_SIZE(fds));

			for (unsigned int i = 0; i < n; i++) {
				struct model_conn *e = &m[fds[i]];

				assert_true(e->live && !e->cut);
				assert_true(now - e->start >= DEADLINE);
				e->cut = true;
				assert_true(e->c->cut);
			}
			break;
		}
		}
		assert_int_equal(t.used, used);
		if (x->live) {
			assert_int_equal(conntab_held(&t, pool[x->who]), held[x->who]);
			assert_int_equal(x->c->start_ms, x->start);
		}
		if (step % 997 == 0) {
			int64_t next = INT64_MAX;

			for (int i = 0; i < FDS; i++)
				if (m[i].live && !m[i].cut && m[i].start + DEADLINE < next)
					next = m[i].start + DEADLINE;
			assert_true(conntab_next_deadline(&t, DEADLINE) == next);
			for (unsigned int a = 0; a < ADDRS; a += 7)
				assert_int_equal(conntab_held(&t, pool[a]), held[a]);
		}
	}
	conntab_free(&t);
	free(m);
	free(held);
	free(pool);
}

/* ---- --listen ---- */

static const struct listen_case {
	const char *in;
	int want;		/* 0 or -errno */
	const char *addr;	/* when 0 */
	uint16_t port;
} listen_cases[] = {
	{ "10.0.0.1:9617", 0, "10.0.0.1", 9617 },
	{ ":9617", 0, "0.0.0.0", 9617 },
	{ "0.0.0.0:1", 0, "0.0.0.0", 1 },
	{ "255.255.255.255:65535", 0, "255.255.255.255", 65535 },
	{ "127.0.0.1:08080", 0, "127.0.0.1", 8080 },
	{ "10.240.0.4", 0, "10.240.0.4", 9617 },	/* the node address alone */
	{ "localhost:9100", 0, "127.0.0.1", 9100 },
	{ "localhost", 0, "127.0.0.1", 9617 },
	{ "", -EINVAL, NULL, 0 },
	{ ":", -EINVAL, NULL, 0 },
	{ "10.0.0.1:", -EINVAL, NULL, 0 },
	{ ":0", -EINVAL, NULL, 0 },
	{ ":65536", -EINVAL, NULL, 0 },
	{ ":99999", -EINVAL, NULL, 0 },
	{ ":000080", -EINVAL, NULL, 0 },
	{ ":-1", -EINVAL, NULL, 0 },
	{ ":+80", -EINVAL, NULL, 0 },
	{ ": 80", -EINVAL, NULL, 0 },
	{ ":80 ", -EINVAL, NULL, 0 },
	{ ":0x50", -EINVAL, NULL, 0 },
	{ "10.0.0:80", -EINVAL, NULL, 0 },
	{ "10.0.0.256:80", -EINVAL, NULL, 0 },
	{ "1.2.3.4.5:80", -EINVAL, NULL, 0 },
	{ "a b:80", -EINVAL, NULL, 0 },
	{ "-host:80", -EINVAL, NULL, 0 },
	{ ".host:80", -EINVAL, NULL, 0 },
	{ "h\xc3\xa9te:80", -EINVAL, NULL, 0 },
	{ "host/x:80", -EINVAL, NULL, 0 },
	{ "[::1]:9617", -EAFNOSUPPORT, NULL, 0 },
	{ "::1", -EAFNOSUPPORT, NULL, 0 },
	{ "[::]:80", -EAFNOSUPPORT, NULL, 0 },
	{ "fe80::1:80", -EAFNOSUPPORT, NULL, 0 },
	{ "10.0.0.1:80:80", -EAFNOSUPPORT, NULL, 0 },
};

static void t_listen(void **state)
{
	const struct listen_case *c = *state;
	struct sockaddr_in sa, before;
	char got[INET_ADDRSTRLEN];
	int r;

	memset(&sa, 0xa5, sizeof(sa));
	before = sa;
	r = http_parse_listen(c->in, HTTP_DEFAULT_PORT, &sa);
	if (r != c->want)
		fail_msg("\"%s\": %d (%s), expected %d", c->in, r, strerror(-r), c->want);
	if (r < 0) {
		/* ret_ written only on success */
		assert_memory_equal(&sa, &before, sizeof(sa));
		return;
	}
	assert_int_equal(sa.sin_family, AF_INET);
	assert_non_null(inet_ntop(AF_INET, &sa.sin_addr, got, sizeof(got)));
	assert_string_equal(got, c->addr);
	assert_int_equal(ntohs(sa.sin_port), c->port);
}

static void t_listen_long_and_no_default(void **state)
{
	char longname[400];
	struct sockaddr_in sa;

	(void)state;
	memset(longname, 'a', sizeof(longname));
	memcpy(longname + sizeof(longname) - 4, ":80", 4);
	assert_int_equal(http_parse_listen(longname, 9617, &sa), -EINVAL);
	/* without a default port, a bare address is not enough */
	assert_int_equal(http_parse_listen("10.0.0.1", 0, &sa), -EINVAL);
	assert_int_equal(http_parse_listen("10.0.0.1:80", 0, &sa), 0);
	assert_int_equal(http_parse_listen(NULL, 9617, &sa), -EINVAL);
}

/* ---- the server, driven as a caller's loop drives it ---- */

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
	bool post_nul;		/* the body had its NUL after len */
	char reply[64];
};

static void fx_route(void *cls, const char *path, struct http_reply *ret)
{
	(void)cls;
	if (strcmp(path, "/metrics") == 0)
		ret->page = true;
	else if (strcmp(path, "/healthz") == 0)
		*ret = (struct http_reply){ .status = 200, .content_type = "text/plain",
					    .body = "ok\n", .len = 3 };
}

/* Records the body; answers "post N: LEN bytes" from a buffer it overwrites on the next call. */
static void fx_post(void *cls, const char *path, const char *body, size_t len,
		    struct http_reply *ret)
{
	struct srv_fx *f = cls;
	int n;

	f->posts++;
	snprintf(f->post_path, sizeof(f->post_path), "%s", path);
	free(f->post_body);
	f->post_body = malloc(len ? len : 1);
	assert_non_null(f->post_body);
	memcpy(f->post_body, body, len);
	f->post_len = len;
	f->post_nul = body[len] == '\0';
	if (strcmp(path, "/v1/report") != 0)
		return; /* 404 */
	n = snprintf(f->reply, sizeof(f->reply), "post %d: %zu bytes\n", f->posts, len);
	*ret = (struct http_reply){ .status = 200, .content_type = "application/json",
				    .body = f->reply, .len = (size_t)n };
}

static int fx_collect(void *cls, char **ret_buf, size_t *ret_len)
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

static void lo_up(void)
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

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One turn of the caller's loop: wait (at most ms) for the server, then run it. */
static void turn(struct srv_fx *f, int ms)
{
	struct pollfd p = { .fd = http_fd(f->srv), .events = POLLIN };
	int t = http_timeout_ms(f->srv);

	if (t < 0 || t > ms)
		t = ms;
	poll(&p, 1, t);
	http_run(f->srv);
}

static void drive(struct srv_fx *f, int ms)
{
	int64_t end = mono_ms() + ms;

	while (mono_ms() < end)
		turn(f, (int)(end - mono_ms()));
}

static int setup_srv(void **state)
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
	return 0;
}

static int teardown_srv(void **state)
{
	struct srv_fx *f = *state;

	http_free(f->srv);
	free(f->post_body);
	free(f);
	return 0;
}

static void start(struct srv_fx *f)
{
	assert_int_equal(http_start(&f->cfg, &f->srv), 0);
}

/* A non-blocking client from `src` (127.0.0.x), connected (the kernel completes it). */
static int client(struct srv_fx *f, const char *src)
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

static void say(int fd, const char *s)
{
	assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/*
 * Reads what the server sent on fd while driving it, until the server
 * closes (returns true) or `ms` pass (false). buf gets it all, NUL-terminated.
 */
static bool read_all(struct srv_fx *f, int fd, char *buf, size_t size, int ms)
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
static bool read_response(struct srv_fx *f, int fd, char *buf, size_t size, int ms)
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
		if (hdr_end && cl && len >= (size_t)(hdr_end + 4 - buf) + strtoul(cl + 16, NULL, 10))
			return true;
	}
	return false;
}

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
	say(fd, "POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc");
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
	say(fd, "PUT /v1/report HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}");
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

static void t_server_bad_config(void **state)
{
	struct srv_fx *f = *state;
	struct http_server *s = NULL;
	struct http_config c;

	(void)f;
	http_config_defaults(&c);
	assert_int_equal(http_start(&c, &s), -EINVAL); /* no route */
	c.route = fx_route;
	assert_int_equal(http_start(&c, &s), -EINVAL); /* no collect */
	c.collect = fx_collect;
	c.reserve = c.max_connections;
	assert_int_equal(http_start(&c, &s), -EINVAL);
	c.reserve = 0;
	c.post = fx_post;
	c.max_body = 0;
	assert_int_equal(http_start(&c, &s), -EINVAL); /* a post callback, no body allowed */
	assert_null(s);
}

int main(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(admit_cases); i++)
		add_test_fixture(admit_cases[i].name, t_admit, NULL, NULL, (void *)&admit_cases[i]);
	ADD(t_admit_four_bad_neighbours);
	ADD(t_conntab_add_find_remove);
	ADD(t_conntab_deadlines);
	ADD(t_conntab_restart);
	ADD(t_conntab_expire_bounded);
	ADD(t_conntab_model);
	for (size_t i = 0; i < ARRAY_SIZE(listen_cases); i++)
		add_test_fixture(listen_cases[i].in[0] ? listen_cases[i].in : "(empty)", t_listen,
				 NULL, NULL, (void *)&listen_cases[i]);
	ADD(t_listen_long_and_no_default);
	add_test_fixture("t_server_page_shared", t_server_page_shared, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_cache_expires", t_server_cache_expires, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_no_cache", t_server_no_cache, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_deadline_cuts_trickle", t_server_deadline_cuts_trickle, setup_srv,
			 teardown_srv, NULL);
	add_test_fixture("t_server_keepalive_restart", t_server_keepalive_restart, setup_srv,
			 teardown_srv, NULL);
	add_test_fixture("t_server_limits", t_server_limits, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_methods_paths", t_server_methods_paths, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_collect_fails", t_server_collect_fails, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_bad_config", t_server_bad_config, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_post_body", t_server_post_body, setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_post_chunked", t_server_post_chunked, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_post_too_large", t_server_post_too_large, setup_srv,
			 teardown_srv, NULL);
	add_test_fixture("t_server_post_length_required", t_server_post_length_required,
			 setup_srv, teardown_srv, NULL);
	add_test_fixture("t_server_post_methods", t_server_post_methods, setup_srv, teardown_srv,
			 NULL);
	add_test_fixture("t_server_post_keepalive", t_server_post_keepalive, setup_srv,
			 teardown_srv, NULL);
	add_test_fixture("t_server_post_trickle_deadline", t_server_post_trickle_deadline,
			 setup_srv, teardown_srv, NULL);
	return run_group("http");
}
