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
 * The server itself on loopback (a network namespace of its own, root) is
 * tests/kernel/ktest_http.c's; here only its refusal of a configuration it
 * cannot run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/group.h"

#include "http/http.h"
#include "http/internal.h"
#include "tests/unit/helpers.h"

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
	unsigned int who; /* index of the address in pool */
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
			*x = (struct model_conn){ .live = true,
						  .who = x->who,
						  .start = now,
						  .c = x->c };
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
	int want;	  /* 0 or -errno */
	const char *addr; /* when 0 */
	uint16_t port;
} listen_cases[] = {
	{ "10.0.0.1:9617", 0, "10.0.0.1", 9617 },
	{ ":9617", 0, "0.0.0.0", 9617 },
	{ "0.0.0.0:1", 0, "0.0.0.0", 1 },
	{ "255.255.255.255:65535", 0, "255.255.255.255", 65535 },
	{ "127.0.0.1:08080", 0, "127.0.0.1", 8080 },
	{ "10.240.0.4", 0, "10.240.0.4", 9617 }, /* the node address alone */
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

/* ---- the server's configuration, refused before it starts ---- */

/* Stand-ins: http_start only asks that the callbacks be there. */
static void bc_route(void *cls, const char *path, struct http_reply *ret)
{
	(void)cls;
	(void)path;
	(void)ret;
}

static void bc_post(void *cls, const struct http_request *req, struct http_reply *ret)
{
	(void)cls;
	(void)req;
	(void)ret;
}

static int bc_collect(void *cls, char **ret_buf, size_t *ret_len)
{
	(void)cls;
	(void)ret_buf;
	(void)ret_len;
	return -ENOMEM;
}

static void t_server_bad_config(void **state)
{
	struct http_server *s = NULL;
	struct http_config c;

	(void)state;
	http_config_defaults(&c);
	assert_int_equal(http_start(&c, &s), -EINVAL); /* no route */
	c.route = bc_route;
	assert_int_equal(http_start(&c, &s), -EINVAL); /* no collect */
	c.collect = bc_collect;
	c.reserve = c.max_connections;
	assert_int_equal(http_start(&c, &s), -EINVAL);
	c.reserve = 0;
	c.post = bc_post;
	c.max_body = 0;
	assert_int_equal(http_start(&c, &s), -EINVAL); /* a post callback, no body allowed */
	assert_null(s);
}

/*
 * TLS files that cannot be served: refused before anything listens, with
 * an errno for each kind of fault and a message that names the file.
 */
static void t_server_bad_tls(void **state)
{
	char dir[] = "/tmp/tg-http-tls-XXXXXX", cert[64], key[64], none[64], err[256];
	struct http_server *s = NULL;
	struct http_config c;
	FILE *fp;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(none, sizeof(none), "%s/none.pem", dir);
	http_config_defaults(&c);
	c.route = bc_route;
	c.collect = bc_collect;
	c.addr.sin_port = 0;
	c.tls_err = err;
	c.tls_err_size = sizeof(err);

	/* one without the other */
	c.tls_cert_file = cert;
	assert_int_equal(http_start(&c, &s), -EINVAL);
	assert_contains(err, "needs its key");
	/* missing */
	c.tls_key_file = key;
	assert_int_equal(http_start(&c, &s), -ENOENT);
	assert_contains(err, "TLS certificate ");
	assert_contains(err, cert);
	assert_contains(err, "No such file");
	/* not PEM */
	fp = fopen(cert, "w");
	assert_non_null(fp);
	fputs("hello\n", fp);
	fclose(fp);
	assert_int_equal(http_start(&c, &s), -EBADMSG);
	assert_contains(err, cert);
	assert_contains(err, "not PEM");
	/* a certificate block, but not a certificate; the key missing first */
	fp = fopen(cert, "w");
	assert_non_null(fp);
	fputs("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", fp);
	fclose(fp);
	assert_int_equal(http_start(&c, &s), -ENOENT);
	assert_contains(err, "TLS key ");
	assert_contains(err, key);
	fp = fopen(key, "w");
	assert_non_null(fp);
	fputs("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", fp);
	fclose(fp);
	/* both look like PEM: GnuTLS' refusal, naming both */
	assert_int_equal(http_start(&c, &s), -EBADMSG);
	assert_contains(err, cert);
	assert_contains(err, key);
	assert_contains(err, "refused");
	/* a directory is not a file */
	c.tls_key_file = dir;
	assert_int_equal(http_start(&c, &s), -EINVAL);
	assert_contains(err, "not a regular file");
	/* a plain server leaves the message empty */
	c.tls_cert_file = c.tls_key_file = NULL;
	c.reserve = c.max_connections;
	assert_int_equal(http_start(&c, &s), -EINVAL);
	assert_string_equal(err, "");
	assert_null(s);
	unlink(cert);
	unlink(key);
	rmdir(dir);
}

/*
 * Strikes: an address refused more than the limit in a second is benched
 * for the rest of it and the next; another address is not; a flood of
 * addresses fills the fixed table and forgets the quietest.
 */
static void t_strikes(void **state)
{
	struct strikes *k = calloc(1, sizeof(*k));
	const uint32_t a = htonl(0x0a000001), b = htonl(0x0a000002);

	(void)state;
	assert_non_null(k);
	for (int i = 0; i < 3; i++)
		assert_false(strikes_add(k, a, 3, 1000 + i));
	assert_false(strikes_benched(k, a, 1003));
	assert_true(strikes_add(k, a, 3, 1004)); /* the 4th in its second */
	assert_true(strikes_benched(k, a, 1005));
	assert_true(strikes_benched(k, a, 2999));
	assert_false(strikes_benched(k, a, 3000));
	assert_false(strikes_benched(k, b, 1005));
	/* refusals spread over seconds never bench */
	for (int i = 0; i < 10; i++)
		assert_false(strikes_add(k, b, 3, 10000 + i * 400));
	assert_false(strikes_benched(k, b, 14000));
	/* no limit: never */
	for (int i = 0; i < 100; i++)
		assert_false(strikes_add(k, b, 0, 20000));
	/* 100,000 addresses through the table: bounded, and a benched one among the newest holds */
	for (uint32_t i = 0; i < 100000; i++)
		strikes_add(k, htonl(0x0b000000 + i), 1, 30000);
	for (int i = 0; i < 3; i++)
		strikes_add(k, a, 1, 30001);
	assert_true(strikes_benched(k, a, 30002));
	free(k);
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
	ADD(t_strikes);
	for (size_t i = 0; i < ARRAY_SIZE(listen_cases); i++)
		add_test_fixture(listen_cases[i].in[0] ? listen_cases[i].in : "(empty)", t_listen,
				 NULL, NULL, (void *)&listen_cases[i]);
	ADD(t_listen_long_and_no_default);
	ADD(t_server_bad_config);
	ADD(t_server_bad_tls);
	return run_group("http");
}
