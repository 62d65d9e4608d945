// SPDX-License-Identifier: Apache-2.0
/*
 * Results and errors in the shape of the requested cniVersion
 * (cni_result_render, cni_error_render), the address of our interface in a
 * prevResult (cni_prev_result_ip), and cni_version_parse.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/group.h"

#include "cni/cni.h"
#include "cni/internal.h"
#include "tests/unit/helpers.h"

static const uint8_t HOST_MAC[6] = { 0xee, 0xee, 0xee, 0xee, 0xee, 0xee };
static const uint8_t POD_MAC[6] = { 0x0a, 0x58, 0x0A, 0x01, 0x00, 0xff };

static struct cni_add_result sample(void)
{
	struct cni_add_result r = {
		.host_veth = "tg0123456789ab",
		.host_mac = HOST_MAC,
		.ifname = "eth0",
		.pod_mac = POD_MAC,
		.netns = "/var/run/netns/cni-1234",
		.ip = 0x0a01000a, /* 10.1.0.10 */
		.mtu = 1450,
	};
	return r;
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	if (!json_object_object_get_ex(o, key, &v))
		fail_msg("no \"%s\" in %s", key, json_object_to_json_string(o));
	return v;
}

static bool has(json_object *o, const char *key)
{
	return json_object_object_get_ex(o, key, NULL);
}

static const char *str(json_object *o, const char *key)
{
	json_object *v = get(o, key);

	assert_true(json_object_is_type(v, json_type_string));
	return json_object_get_string(v);
}

static json_object *render(const char *v)
{
	struct cni_add_result r = sample();
	json_object *res = cni_result_render(v, cni_version_parse(v), &r);

	assert_non_null(res);
	return res;
}

/* ---- cni_version_parse ---- */

static void t_version_parse_supported(void **state)
{
	assert_int_equal(cni_version_parse("0.3.0"), 300);
	assert_int_equal(cni_version_parse("0.3.1"), 301);
	assert_int_equal(cni_version_parse("0.4.0"), 400);
	assert_int_equal(cni_version_parse("1.0.0"), 10000);
	assert_int_equal(cni_version_parse("1.1.0"), 10100);
}

static void t_version_parse_unsupported(void **state)
{
	static const char *const bad[] = { "0.1.0",  "0.2.0",	"0.5.0",  "1.2.0",  "2.0.0",
					   "1.1",    "1",	"",	  "v1.1.0", "1.1.0 ",
					   " 1.1.0", "1.1.0.0", "01.1.0", "1.01.0" };

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (cni_version_parse(bad[i]) != -1)
			fail_msg("cni_version_parse(\"%s\") accepted", bad[i]);
	assert_int_equal(cni_version_parse(NULL), -1);
}

/* The plugin's answer to VERSION with `config` on stdin ("" for none), parsed. */
static json_object *version_answer(const char *config)
{
	char *text = NULL;
	size_t len = 0;
	FILE *in = fmemopen((void *)config, strlen(config), "r");
	FILE *out = open_memstream(&text, &len);
	json_object *o;
	int rc;

	assert_non_null(in);
	assert_non_null(out);
	assert_int_equal(setenv("CNI_COMMAND", "VERSION", 1), 0);
	rc = cni_run(in, out);
	unsetenv("CNI_COMMAND");
	fclose(in);
	fclose(out);
	assert_int_equal(rc, 0);
	o = json_tokener_parse(text);
	if (!o)
		fail_msg("VERSION printed no JSON document: %s", text);
	free(text);
	return o;
}

/*
 * What a runtime learns from VERSION: the versions of the design (CNI 1.1.0,
 * and the 0.3.x, 0.4.0 and 1.0.0 configs), oldest first, each one a config
 * may name; the answer in the spec's version, or the config's when it names
 * one.
 */
static void t_supported_versions_list(void **state)
{
	static const char *const want[] = { "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0" };
	json_object *o = version_answer(""), *list = get(o, "supportedVersions");

	assert_string_equal(str(o, "cniVersion"), "1.1.0");
	assert_true(json_object_is_type(list, json_type_array));
	assert_int_equal(json_object_array_length(list), ARRAY_SIZE(want));
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		json_object *v = json_object_array_get_idx(list, i);

		assert_true(json_object_is_type(v, json_type_string));
		assert_string_equal(json_object_get_string(v), want[i]);
		assert_true(cni_version_parse(want[i]) > 0);
	}
	json_object_put(o);
	o = version_answer("{\"cniVersion\":\"0.4.0\",\"name\":\"n\",\"type\":\"tollgate\"}");
	assert_string_equal(str(o, "cniVersion"), "0.4.0");
	assert_int_equal(json_object_array_length(get(o, "supportedVersions")), ARRAY_SIZE(want));
	json_object_put(o);
}

/* ---- cni_result_render ---- */

static void t_result_1_1_0(void **state)
{
	json_object *res = render("1.1.0"), *ifs, *h, *p, *ips, *a, *routes, *rt;

	assert_string_equal(str(res, "cniVersion"), "1.1.0");
	ifs = get(res, "interfaces");
	assert_int_equal(json_object_array_length(ifs), 2);
	h = json_object_array_get_idx(ifs, 0);
	p = json_object_array_get_idx(ifs, 1);
	assert_string_equal(str(h, "name"), "tg0123456789ab");
	assert_string_equal(str(h, "mac"), "ee:ee:ee:ee:ee:ee");
	assert_false(has(h, "sandbox"));
	assert_string_equal(str(p, "name"), "eth0");
	assert_string_equal(str(p, "mac"), "0a:58:0a:01:00:ff");
	assert_string_equal(str(p, "sandbox"), "/var/run/netns/cni-1234");
	/* 1.1.0 interfaces carry the MTU */
	assert_int_equal(json_object_get_int(get(h, "mtu")), 1450);
	assert_int_equal(json_object_get_int(get(p, "mtu")), 1450);
	ips = get(res, "ips");
	assert_int_equal(json_object_array_length(ips), 1);
	a = json_object_array_get_idx(ips, 0);
	assert_string_equal(str(a, "address"), "10.1.0.10/32");
	assert_string_equal(str(a, "gateway"), "169.254.1.1");
	assert_int_equal(json_object_get_int(get(a, "interface")), 1);
	assert_false(has(a, "version"));
	routes = get(res, "routes");
	assert_int_equal(json_object_array_length(routes), 1);
	rt = json_object_array_get_idx(routes, 0);
	assert_string_equal(str(rt, "dst"), "0.0.0.0/0");
	assert_string_equal(str(rt, "gw"), "169.254.1.1");
	assert_true(json_object_is_type(get(res, "dns"), json_type_object));
	json_object_put(res);
}

static void t_result_1_0_0(void **state)
{
	json_object *res = render("1.0.0"), *ifs, *a;

	assert_string_equal(str(res, "cniVersion"), "1.0.0");
	ifs = get(res, "interfaces");
	assert_false(has(json_object_array_get_idx(ifs, 0), "mtu"));
	assert_false(has(json_object_array_get_idx(ifs, 1), "mtu"));
	a = json_object_array_get_idx(get(res, "ips"), 0);
	assert_false(has(a, "version"));
	assert_string_equal(str(a, "address"), "10.1.0.10/32");
	assert_string_equal(str(a, "gateway"), "169.254.1.1");
	json_object_put(res);
}

static void check_0x(const char *v)
{
	json_object *res = render(v), *ifs, *a;

	assert_string_equal(str(res, "cniVersion"), v);
	a = json_object_array_get_idx(get(res, "ips"), 0);
	assert_string_equal(str(a, "version"), "4");
	assert_string_equal(str(a, "address"), "10.1.0.10/32");
	assert_string_equal(str(a, "gateway"), "169.254.1.1");
	assert_int_equal(json_object_get_int(get(a, "interface")), 1);
	ifs = get(res, "interfaces");
	assert_false(has(json_object_array_get_idx(ifs, 1), "mtu"));
	assert_string_equal(str(json_object_array_get_idx(get(res, "routes"), 0), "gw"),
			    "169.254.1.1");
	json_object_put(res);
}

static void t_result_0_4_0(void **state)
{
	check_0x("0.4.0");
}

static void t_result_0_3_1(void **state)
{
	check_0x("0.3.1");
}

static void t_result_0_3_0(void **state)
{
	check_0x("0.3.0");
}

static void t_result_interface_index_names_pod_side(void **state)
{
	static const char *const versions[] = { "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0" };

	for (size_t i = 0; i < 5; i++) {
		json_object *res = render(versions[i]);
		json_object *a = json_object_array_get_idx(get(res, "ips"), 0);
		int idx = json_object_get_int(get(a, "interface"));
		json_object *itf = json_object_array_get_idx(get(res, "interfaces"), (size_t)idx);

		assert_non_null(itf);
		assert_string_equal(str(itf, "name"), "eth0");
		assert_true(has(itf, "sandbox"));
		json_object_put(res);
	}
}

static void t_result_other_address_and_ifname(void **state)
{
	struct cni_add_result r = sample();
	json_object *res, *a;

	r.ip = 0xfffffffe;
	r.ifname = "net1";
	res = cni_result_render("1.1.0", 10100, &r);
	a = json_object_array_get_idx(get(res, "ips"), 0);
	assert_string_equal(str(a, "address"), "255.255.255.254/32");
	assert_string_equal(str(json_object_array_get_idx(get(res, "interfaces"), 1), "name"),
			    "net1");
	json_object_put(res);
}

static void t_result_round_trips_through_prev_result(void **state)
{
	static const char *const versions[] = { "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0" };

	for (size_t i = 0; i < 5; i++) {
		json_object *res = render(versions[i]);
		json_object *back = json_tokener_parse(json_object_to_json_string(res));
		uint32_t got = 0;

		assert_non_null(back);
		assert_int_equal(cni_prev_result_ip(back, "eth0", &got), 0);
		assert_int_equal(got, ip("10.1.0.10"));
		/* the host veth is not our pod interface */
		assert_int_equal(cni_prev_result_ip(back, "tg0123456789ab", &got), -ENOENT);
		json_object_put(back);
		json_object_put(res);
	}
}

/* ---- cni_error_render ---- */

static void t_error_fields(void **state)
{
	struct tg_err e = { .code = 7 };
	json_object *o;

	snprintf(e.msg, sizeof(e.msg), "mtu is 0, must be 68..65535");
	snprintf(e.details, sizeof(e.details), "see the README");
	o = cni_error_render("0.4.0", &e);
	assert_non_null(o);
	assert_string_equal(str(o, "cniVersion"), "0.4.0");
	assert_int_equal(json_object_get_int(get(o, "code")), 7);
	assert_true(json_object_is_type(get(o, "code"), json_type_int));
	assert_string_equal(str(o, "msg"), "mtu is 0, must be 68..65535");
	assert_string_equal(str(o, "details"), "see the README");
	assert_int_equal(json_object_object_length(o), 4);
	json_object_put(o);
}

static void t_error_defaults(void **state)
{
	struct tg_err e = { 0 };
	json_object *o = cni_error_render(NULL, &e);

	assert_non_null(o);
	/* no version known (config undecodable): the spec version */
	assert_string_equal(str(o, "cniVersion"), CNI_SPEC_VERSION);
	/* never code 0, never an empty message */
	assert_true(json_object_get_int(get(o, "code")) != 0);
	assert_true(strlen(str(o, "msg")) > 0);
	assert_string_equal(str(o, "details"), "");
	json_object_put(o);
}

static void t_error_every_code(void **state)
{
	static const int codes[] = { 1, 2, 3, 4, 5, 6, 7, 11, 50, 100 };

	for (size_t i = 0; i < ARRAY_SIZE(codes); i++) {
		struct tg_err e = { .code = codes[i] };
		json_object *o;

		snprintf(e.msg, sizeof(e.msg), "failure %d", codes[i]);
		o = cni_error_render("1.1.0", &e);
		assert_int_equal(json_object_get_int(get(o, "code")), codes[i]);
		assert_string_equal(str(o, "msg"), e.msg);
		json_object_put(o);
	}
}

static void t_error_escapes(void **state)
{
	struct tg_err e = { .code = 5 };
	json_object *o, *back;

	snprintf(e.msg, sizeof(e.msg), "state file \"/run/x\" is corrupt\n\ttab \\ and \x01");
	o = cni_error_render("1.1.0", &e);
	back = json_tokener_parse(json_object_to_json_string(o));
	assert_non_null(back);
	assert_string_equal(str(back, "msg"), e.msg);
	json_object_put(back);
	json_object_put(o);
}

/* ---- cni_prev_result_ip ---- */

static uint32_t prev_ip(const char *json, const char *ifname, int *r)
{
	json_object *o = json_tokener_parse(json);
	uint32_t a = 0;

	if (!o)
		fail_msg("bad test JSON: %s", json);
	*r = cni_prev_result_ip(o, ifname, &a);
	json_object_put(o);
	return a;
}

#define MULTI                                                                   \
	"{\"cniVersion\":\"1.1.0\",\"interfaces\":["                            \
	"{\"name\":\"tg0123456789ab\"},{\"name\":\"eth0\",\"sandbox\":\"/x\"}," \
	"{\"name\":\"net1\",\"sandbox\":\"/x\"}],"                              \
	"\"ips\":[{\"address\":\"10.2.0.1/24\",\"interface\":2},"               \
	"{\"address\":\"10.1.0.10/32\",\"gateway\":\"169.254.1.1\",\"interface\":1}]}"

static void t_prev_picks_named_interface(void **state)
{
	int r;

	assert_int_equal(prev_ip(MULTI, "eth0", &r), ip("10.1.0.10"));
	assert_int_equal(r, 0);
	assert_int_equal(prev_ip(MULTI, "net1", &r), ip("10.2.0.1"));
	assert_int_equal(r, 0);
	prev_ip(MULTI, "eth9", &r);
	assert_int_equal(r, -ENOENT);
}

static void t_prev_without_interfaces_takes_first(void **state)
{
	int r;

	assert_int_equal(
		prev_ip("{\"ips\":[{\"address\":\"10.1.0.7/32\"},{\"address\":\"10.1.0.8/32\"}]}",
			"eth0", &r),
		ip("10.1.0.7"));
	assert_int_equal(r, 0);
}

static void t_prev_ip_without_interface_index(void **state)
{
	int r;

	/* an entry that does not say its interface is taken */
	assert_int_equal(prev_ip("{\"interfaces\":[{\"name\":\"eth0\"}],"
				 "\"ips\":[{\"address\":\"10.1.0.9/32\"}]}",
				 "eth0", &r),
			 ip("10.1.0.9"));
	assert_int_equal(r, 0);
}

static void t_prev_0x_shape(void **state)
{
	int r;

	assert_int_equal(
		prev_ip("{\"cniVersion\":\"0.3.1\",\"interfaces\":[{\"name\":\"tgx\"},"
			"{\"name\":\"eth0\",\"sandbox\":\"/x\"}],"
			"\"ips\":[{\"version\":\"4\",\"address\":\"10.1.0.11/32\",\"interface\":1}]}",
			"eth0", &r),
		ip("10.1.0.11"));
	assert_int_equal(r, 0);
}

static void t_prev_none(void **state)
{
	uint32_t a = 0x12345678;
	int r;

	assert_int_equal(cni_prev_result_ip(NULL, "eth0", &a), -ENOENT);
	prev_ip("{}", "eth0", &r);
	assert_int_equal(r, -ENOENT);
	prev_ip("{\"ips\":[]}", "eth0", &r);
	assert_int_equal(r, -ENOENT);
	prev_ip("{\"ips\":{}}", "eth0", &r);
	assert_int_equal(r, -ENOENT);
	prev_ip("{\"ips\":\"10.1.0.1/32\"}", "eth0", &r);
	assert_int_equal(r, -ENOENT);
	assert_int_equal(a, 0x12345678);
}

static void t_prev_skips_bad_addresses(void **state)
{
	int r;

	/* bad entries are skipped; a good one after them is found */
	assert_int_equal(
		prev_ip("{\"ips\":[{\"address\":\"garbage/32\"},{\"address\":\"10.1.0.1\"},"
			"{\"address\":5},{\"gateway\":\"1.2.3.4\"},"
			"{\"address\":\"fd00::1/64\"},{\"address\":\"10.1.0.12/32\"}]}",
			"eth0", &r),
		ip("10.1.0.12"));
	assert_int_equal(r, 0);
	prev_ip("{\"ips\":[{\"address\":\"garbage/32\"},{\"address\":\"10.1.0.1\"}]}", "eth0", &r);
	assert_int_equal(r, -ENOENT);
	prev_ip("{\"ips\":[{\"address\":\"1234567890123456789012345/32\"}]}", "eth0", &r);
	assert_int_equal(r, -ENOENT);
}

static void t_prev_index_out_of_range(void **state)
{
	int r;

	prev_ip("{\"interfaces\":[{\"name\":\"eth0\"}],\"ips\":[{\"address\":\"10.1.0.1/32\",\"interface\":5}]}",
		"eth0", &r);
	assert_int_equal(r, -ENOENT);
	prev_ip("{\"interfaces\":[{\"name\":\"eth0\"}],\"ips\":[{\"address\":\"10.1.0.1/32\",\"interface\":-1}]}",
		"eth0", &r);
	assert_int_equal(r, -ENOENT);
}

/*
 * prevResult comes from the runtime: a malformed one must be handled
 * (ignored or refused), never crash the plugin, DEL above all. A part of the
 * wrong type is no information: an interfaces list that is not an array says
 * nothing about which address is ours (the first one is), an interface entry
 * without a string name is not ours, an ips entry that is not an object holds
 * no address. What DEL then removes follows from the answer, so each case
 * says it: the return value, and the address, written only on success. Each
 * document runs in a child so that a crash fails only its case.
 */
struct hostile {
	const char *name;
	const char *json;
	int want;	     /* cni_prev_result_ip's return value */
	const char *want_ip; /* the address it gives; NULL: none (want < 0) */
};

#define HOSTILE_ONE "\"ips\":[{\"address\":\"10.1.0.1/32\",\"interface\":0}]}"

static const struct hostile hostiles[] = {
	{ "prevResult: interfaces is an object", "{\"interfaces\":{\"name\":\"eth0\"}," HOSTILE_ONE,
	  0, "10.1.0.1" },
	{ "prevResult: interfaces is a string", "{\"interfaces\":\"eth0\"," HOSTILE_ONE, 0,
	  "10.1.0.1" },
	{ "prevResult: interface name is null", "{\"interfaces\":[{\"name\":null}]," HOSTILE_ONE,
	  -ENOENT, NULL },
	{ "prevResult: interface name is a number", "{\"interfaces\":[{\"name\":7}]," HOSTILE_ONE,
	  -ENOENT, NULL },
	{ "prevResult: interface entry is a string", "{\"interfaces\":[\"eth0\"]," HOSTILE_ONE,
	  -ENOENT, NULL },
	{ "prevResult: interface entry is null", "{\"interfaces\":[null]," HOSTILE_ONE, -ENOENT,
	  NULL },
	{ "prevResult: ips entry is a string",
	  "{\"interfaces\":[{\"name\":\"eth0\"}],\"ips\":[\"10.1.0.1/32\"]}", -ENOENT, NULL },
	{ "prevResult: ips entry is null", "{\"ips\":[null,{\"address\":\"10.1.0.1/32\"}]}", 0,
	  "10.1.0.1" },
	{ "prevResult: huge interface index",
	  "{\"interfaces\":[{\"name\":\"eth0\"}],\"ips\":[{\"address\":\"10.1.0.1/32\",\"interface\":9223372036854775807}]}",
	  -ENOENT, NULL },
	{ "prevResult: address null", "{\"ips\":[{\"address\":null}]}", -ENOENT, NULL },
};

/* What the child saw, in memory it shares with the parent. */
struct hostile_run {
	const struct hostile *h;
	int r;
	uint32_t a;
};

/* The out-parameter's value before the call: a failure must leave it so. */
#define HOSTILE_UNTOUCHED 0xdeadbeefu

/* Exit status 3: the case's JSON does not parse (a test bug). */
static int prev_hostile_child(void *arg)
{
	struct hostile_run *run = arg;
	json_object *o = json_tokener_parse(run->h->json);

	if (!o)
		return 3;
	run->a = HOSTILE_UNTOUCHED;
	run->r = cni_prev_result_ip(o, "eth0", &run->a);
	json_object_put(o);
	return 0;
}

/* Shared with every case's child; mapped once, for the life of the process. */
static struct hostile_run *hostile_run_page(void)
{
	static struct hostile_run *run;

	if (!run) {
		void *p = mmap(NULL, sizeof(*run), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

		assert_true(p != MAP_FAILED);
		run = p;
	}
	return run;
}

/* In a child process, so that a crash fails this case only. */
static void t_prev_hostile(void **state)
{
	const struct hostile *h = *state;
	struct hostile_run *run = hostile_run_page();
	char what[600];
	int rc;

	*run = (struct hostile_run){ .h = h, .r = 1 };
	snprintf(what, sizeof(what), "cni_prev_result_ip on %s", h->json);
	rc = child_run(prev_hostile_child, run, what);
	if (rc != 0)
		fail_msg("child exited %d on %s (a sanitizer report is above)", rc, h->json);
	if (run->r != h->want)
		fail_msg("cni_prev_result_ip returned %d on %s, expected %d", run->r, h->json,
			 h->want);
	if (h->want_ip && run->a != ip(h->want_ip))
		fail_msg("cni_prev_result_ip gave %s on %s, expected %s", ip_str(run->a), h->json,
			 h->want_ip);
	if (!h->want_ip && run->a != HOSTILE_UNTOUCHED)
		fail_msg("cni_prev_result_ip failed on %s but wrote %s to its out-parameter",
			 h->json, ip_str(run->a));
}

/* ---- the group ---- */

int main(void)
{
	ADD(t_version_parse_supported);
	ADD(t_version_parse_unsupported);
	ADD(t_supported_versions_list);
	ADD(t_result_1_1_0);
	ADD(t_result_1_0_0);
	ADD(t_result_0_4_0);
	ADD(t_result_0_3_1);
	ADD(t_result_0_3_0);
	ADD(t_result_interface_index_names_pod_side);
	ADD(t_result_other_address_and_ifname);
	ADD(t_result_round_trips_through_prev_result);
	ADD(t_error_fields);
	ADD(t_error_defaults);
	ADD(t_error_every_code);
	ADD(t_error_escapes);
	ADD(t_prev_picks_named_interface);
	ADD(t_prev_without_interfaces_takes_first);
	ADD(t_prev_ip_without_interface_index);
	ADD(t_prev_0x_shape);
	ADD(t_prev_none);
	ADD(t_prev_skips_bad_addresses);
	ADD(t_prev_index_out_of_range);
	for (size_t i = 0; i < ARRAY_SIZE(hostiles); i++)
		add_test(hostiles[i].name, t_prev_hostile, (void *)&hostiles[i]);
	return run_group("result");
}
