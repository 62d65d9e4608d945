// SPDX-License-Identifier: Apache-2.0
/* hostPorts: runtimeConfig.portMappings parsed and refused, compared, written back, and laid out as keys. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <netinet/in.h>
#include <cmocka.h>

#include "accounting/internal.h"
#include "lib/hostport.h"
#include "lib/jsonx.h"

static int parse(const char *json, struct hostports *ret, struct tg_err *e)
{
	json_object *o = json_tokener_parse(json);
	int r;

	assert_non_null(o);
	r = hostports_parse(o, "runtimeConfig.portMappings", ret, e);
	json_object_put(o);
	return r;
}

static void t_containerd_shape(void **state)
{
	struct hostports p;
	struct tg_err e = { 0 };

	(void)state;
	/* containerd's go-cni capitalises the keys, and sends HostIP "" */
	assert_int_equal(
		parse("[{\"HostPort\":8080,\"ContainerPort\":18080,\"Protocol\":\"tcp\",\"HostIP\":\"\"},"
		      "{\"hostPort\":53,\"containerPort\":5353,\"protocol\":\"UDP\",\"hostIP\":\"10.0.0.5\"},"
		      "{\"hostPort\":9,\"containerPort\":9}]",
		      &p, &e),
		0);
	assert_int_equal(p.n, 3);
	assert_int_equal(p.m[0].host_port, 8080);
	assert_int_equal(p.m[0].container_port, 18080);
	assert_int_equal(p.m[0].proto, IPPROTO_TCP);
	assert_int_equal(p.m[0].host_ip, 0);
	assert_int_equal(p.m[1].proto, IPPROTO_UDP);
	assert_int_equal(p.m[1].host_ip, 0x0a000005u);
	assert_int_equal(p.m[2].proto, IPPROTO_TCP); /* absent: tcp */
}

static void t_absent_and_duplicates(void **state)
{
	struct hostports p;
	struct tg_err e = { 0 };

	(void)state;
	assert_int_equal(hostports_parse(NULL, "x", &p, &e), 0);
	assert_int_equal(p.n, 0);
	assert_int_equal(parse("[]", &p, &e), 0);
	assert_int_equal(p.n, 0);
	/* the same mapping twice (two containers declaring it) counts once; 0.0.0.0 is every address */
	assert_int_equal(parse("[{\"hostPort\":80,\"containerPort\":8080},"
			       "{\"hostPort\":80,\"containerPort\":8080,\"hostIP\":\"0.0.0.0\"}]",
			       &p, &e),
			 0);
	assert_int_equal(p.n, 1);
	/* the same port on two protocols, or on two addresses, is two mappings */
	assert_int_equal(parse("[{\"hostPort\":80,\"containerPort\":80,\"protocol\":\"tcp\"},"
			       "{\"hostPort\":80,\"containerPort\":80,\"protocol\":\"udp\"},"
			       "{\"hostPort\":81,\"containerPort\":81,\"hostIP\":\"10.0.0.1\"},"
			       "{\"hostPort\":81,\"containerPort\":82,\"hostIP\":\"10.0.0.2\"}]",
			       &p, &e),
			 0);
	assert_int_equal(p.n, 4);
}

static void t_refused(void **state)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
		{ "{}", "runtimeConfig.portMappings must be an array" },
		{ "[1]", "runtimeConfig.portMappings[0] must be an object" },
		{ "[{\"containerPort\":80}]", "runtimeConfig.portMappings[0].hostPort is missing" },
		{ "[{\"hostPort\":80}]", "runtimeConfig.portMappings[0].containerPort is missing" },
		{ "[{\"hostPort\":\"80\",\"containerPort\":80}]", "hostPort must be an integer" },
		{ "[{\"hostPort\":65536,\"containerPort\":80}]",
		  "hostPort is 65536, must be 1..65535" },
		{ "[{\"hostPort\":80,\"containerPort\":0}]",
		  "containerPort is 0, must be 1..65535" },
		{ "[{\"hostPort\":80,\"containerPort\":80,\"protocol\":\"icmp\"}]",
		  "is none of tcp, udp, sctp" },
		{ "[{\"hostPort\":80,\"containerPort\":80,\"protocol\":6}]",
		  "protocol must be a string" },
		{ "[{\"hostPort\":80,\"containerPort\":80,\"hostIP\":\"fd00::1\"}]",
		  "is not an IPv4 address" },
		{ "[{\"hostPort\":80,\"containerPort\":80,\"hostIP\":\"127.0.0.53\"}]",
		  "is a loopback address" },
		{ "[{\"hostPort\":80,\"containerPort\":80},{\"hostPort\":80,\"containerPort\":81,\"hostIP\":\"10.0.0.1\"}]",
		  "runtimeConfig.portMappings[1]: hostPort 10.0.0.1:80/tcp overlaps 80/tcp, which goes to containerPort 80" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hostports p;
		struct tg_err e = { 0 };

		assert_int_not_equal(parse(cases[i].json, &p, &e), 0);
		assert_int_equal(e.code, CNI_ERR_CONFIG);
		if (!strstr(e.msg, cases[i].msg))
			fail_msg("%s: \"%s\" lacks \"%s\"", cases[i].json, e.msg, cases[i].msg);
	}
}

static void t_too_many(void **state)
{
	char buf[4096] = "[", *last;
	struct hostports p;
	struct tg_err e = { 0 };

	(void)state;
	for (int i = 0; i <= HOSTPORT_MAX; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
			 "%s{\"hostPort\":%d,\"containerPort\":80}", i ? "," : "", 1000 + i);
	strcat(buf, "]");
	assert_int_not_equal(parse(buf, &p, &e), 0);
	assert_non_null(strstr(e.msg, "more than 32 mappings"));
	/* the control: one fewer is taken */
	last = strrchr(buf, '{') - 1; /* the comma before the last entry */
	last[0] = ']';
	last[1] = '\0';
	assert_int_equal(parse(buf, &p, &e), 0);
	assert_int_equal(p.n, HOSTPORT_MAX);
}

static void t_round_trip(void **state)
{
	struct hostports p, q;
	struct tg_err e = { 0 };
	json_object *o;

	(void)state;
	assert_int_equal(
		parse("[{\"hostPort\":8080,\"containerPort\":80,\"protocol\":\"sctp\"},"
		      "{\"hostPort\":53,\"containerPort\":53,\"protocol\":\"udp\",\"hostIP\":\"10.0.0.5\"}]",
		      &p, &e),
		0);
	o = hostports_to_json(&p);
	assert_string_equal(
		json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
		"[{\"hostPort\":8080,\"containerPort\":80,\"protocol\":\"sctp\"},"
		"{\"hostPort\":53,\"containerPort\":53,\"protocol\":\"udp\",\"hostIP\":\"10.0.0.5\"}]");
	assert_int_equal(hostports_parse(o, "state", &q, &e), 0);
	json_object_put(o);
	assert_int_equal(q.n, 2);
	for (size_t i = 0; i < p.n; i++)
		assert_true(hostports_have(&q, &p.m[i]));
	assert_true(hostports_same(&p, &q));
	/* the control: one mapping fewer is another list */
	q.n--;
	assert_false(hostports_same(&p, &q));
}

static void t_overlap(void **state)
{
	const struct hostport any = { 0, 80, 8080, IPPROTO_TCP };
	const struct hostport one = { 0x0a000001u, 80, 9090, IPPROTO_TCP };
	const struct hostport other = { 0x0a000002u, 80, 9090, IPPROTO_TCP };
	const struct hostport udp = { 0, 80, 8080, IPPROTO_UDP };
	char buf[HOSTPORT_STRLEN];

	(void)state;
	assert_true(hostport_overlap(&any, &one)); /* every address includes 10.0.0.1 */
	assert_true(hostport_overlap(&one, &any));
	assert_false(hostport_overlap(&one, &other));
	assert_false(hostport_overlap(&any, &udp));
	assert_false(hostport_equal(&any, &one));
	assert_string_equal(hostport_format(&one, buf), "10.0.0.1:80/tcp");
	assert_string_equal(hostport_format(&udp, buf), "80/udp");
}

/* The key and value as nft's concatenations lay them out: each part in a 4-byte register. */
static void t_key_layout(void **state)
{
	const struct hostport any = { 0, 8080, 80, IPPROTO_TCP };
	const struct hostport one = { 0x0a000001u, 53, 5353, IPPROTO_UDP };
	static const uint8_t any_key[] = { 6, 0, 0, 0, 0x1f, 0x90, 0, 0 };
	static const uint8_t one_key[] = { 10, 0, 0, 1, 17, 0, 0, 0, 0, 53, 0, 0 };
	static const uint8_t data[] = { 10, 1, 0, 10, 0x14, 0xe9, 0, 0 };
	uint8_t k[ACCT_HOSTPORT_KEY_MAX], d[ACCT_HOSTPORT_DATA_LEN];

	(void)state;
	assert_int_equal(acct_hostport_key(&any, k), sizeof(any_key));
	assert_memory_equal(k, any_key, sizeof(any_key));
	assert_string_equal(acct_hostport_map(&any), "hostport");
	assert_int_equal(acct_hostport_key(&one, k), sizeof(one_key));
	assert_memory_equal(k, one_key, sizeof(one_key));
	assert_string_equal(acct_hostport_map(&one), "hostport_ip");
	acct_hostport_data(0x0a01000au, 5353, d);
	assert_memory_equal(d, data, sizeof(data));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_containerd_shape), cmocka_unit_test(t_absent_and_duplicates),
		cmocka_unit_test(t_refused),	      cmocka_unit_test(t_too_many),
		cmocka_unit_test(t_round_trip),	      cmocka_unit_test(t_overlap),
		cmocka_unit_test(t_key_layout),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
