// SPDX-License-Identifier: Apache-2.0
/*
 * The CNI_* environment: cni_env_command and cni_env_parse.
 * Every failure is CNI error 4 and names the variable.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cni/internal.h"
#include "tests/unit/helpers.h"

static const char *const VARS[] = { "CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS",
				    "CNI_IFNAME",  "CNI_PATH",	      "CNI_ARGS" };

static void clear_env(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(VARS); i++)
		unsetenv(VARS[i]);
}

/* A complete, valid environment for `cmd`, as kubelet/containerd set it. */
static void base_env(const char *cmd)
{
	clear_env();
	setenv("CNI_COMMAND", cmd, 1);
	setenv("CNI_CONTAINERID",
	       "3f1d2c0b4a5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8", 1);
	setenv("CNI_NETNS", "/var/run/netns/cni-1234", 1);
	setenv("CNI_IFNAME", "eth0", 1);
	setenv("CNI_PATH", "/opt/cni/bin", 1);
	setenv("CNI_ARGS",
	       "IgnoreUnknown=1;K8S_POD_NAMESPACE=datasets;K8S_POD_NAME=loader-7d9f-x2k4p;"
	       "K8S_POD_INFRA_CONTAINER_ID=3f1d2c0b4a5e;K8S_POD_UID=0a1b2c3d-1111-2222-3333-444455556666",
	       1);
}

static int setup(void **state)
{
	clear_env();
	return 0;
}

static int teardown(void **state)
{
	clear_env();
	return 0;
}

/* Runs cni_env_command + cni_env_parse; returns the first failure. */
static int run(struct cni_env *env, struct tg_err *e)
{
	int r;

	memset(e, 0, sizeof(*e));
	r = cni_env_command(env, e);
	if (r < 0)
		return r;
	return cni_env_parse(env, e);
}

static void expect_ok(struct cni_env *env)
{
	struct tg_err e;
	int r = run(env, &e);

	if (r != 0)
		fail_msg("rejected (r=%d code=%d): %s", r, e.code, e.msg);
}

static void expect_4(const char *needle)
{
	struct cni_env env;
	struct tg_err e;
	int r = run(&env, &e);

	if (r >= 0)
		fail_msg("accepted, want error 4 naming %s", needle);
	assert_int_equal(e.code, CNI_ERR_ENV);
	assert_int_equal(e.code, 4);
	assert_contains(e.msg, needle);
}

/* ---- CNI_COMMAND ---- */

static void t_command_each(void **state)
{
	static const struct {
		const char *name;
		enum cni_cmd cmd;
	} cmds[] = { { "ADD", CNI_CMD_ADD },	 { "DEL", CNI_CMD_DEL },
		     { "CHECK", CNI_CMD_CHECK }, { "STATUS", CNI_CMD_STATUS },
		     { "GC", CNI_CMD_GC },	 { "VERSION", CNI_CMD_VERSION } };

	for (size_t i = 0; i < 6; i++) {
		struct cni_env env;
		struct tg_err e = { 0 };

		setenv("CNI_COMMAND", cmds[i].name, 1);
		assert_int_equal(cni_env_command(&env, &e), 0);
		assert_int_equal(env.cmd, cmds[i].cmd);
		assert_string_equal(env.cmd_name, cmds[i].name);
	}
}

static void t_command_missing(void **state)
{
	struct cni_env env;
	struct tg_err e = { 0 };

	assert_true(cni_env_command(&env, &e) < 0);
	assert_int_equal(e.code, 4);
	assert_contains(e.msg, "CNI_COMMAND");
}

static void t_command_empty(void **state)
{
	setenv("CNI_COMMAND", "", 1);
	expect_4("CNI_COMMAND");
}

static void t_command_unknown(void **state)
{
	static const char *const bad[] = { "add",    "Add",    "ADD ", " ADD",
					   "DELETE", "UPDATE", "FOO",  "ADD\n" };

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		setenv("CNI_COMMAND", bad[i], 1);
		expect_4("CNI_COMMAND");
	}
}

/* ---- a full valid environment ---- */

static void t_add_full(void **state)
{
	struct cni_env env;

	base_env("ADD");
	expect_ok(&env);
	assert_int_equal(env.cmd, CNI_CMD_ADD);
	assert_string_equal(env.container_id,
			    "3f1d2c0b4a5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8");
	assert_string_equal(env.netns, "/var/run/netns/cni-1234");
	assert_string_equal(env.ifname, "eth0");
	assert_string_equal(env.path, "/opt/cni/bin");
	assert_string_equal(env.k8s_namespace, "datasets");
	assert_string_equal(env.pod, "loader-7d9f-x2k4p");
}

static void t_check_and_del_full(void **state)
{
	struct cni_env env;

	base_env("CHECK");
	expect_ok(&env);
	assert_int_equal(env.cmd, CNI_CMD_CHECK);
	base_env("DEL");
	expect_ok(&env);
	assert_int_equal(env.cmd, CNI_CMD_DEL);
	assert_string_equal(env.k8s_namespace, "datasets");
}

static void t_status_gc_version_need_only_command(void **state)
{
	static const char *const cmds[] = { "STATUS", "GC", "VERSION" };

	for (size_t i = 0; i < 3; i++) {
		struct cni_env env;

		clear_env();
		setenv("CNI_COMMAND", cmds[i], 1);
		expect_ok(&env);
	}
}

/* ---- CNI_CONTAINERID ---- */

static void t_container_id_missing(void **state)
{
	base_env("ADD");
	unsetenv("CNI_CONTAINERID");
	expect_4("CNI_CONTAINERID");
	base_env("DEL");
	unsetenv("CNI_CONTAINERID");
	expect_4("CNI_CONTAINERID");
	base_env("CHECK");
	unsetenv("CNI_CONTAINERID");
	expect_4("CNI_CONTAINERID");
}

static void t_container_id_invalid(void **state)
{
	static const char *const bad[] = { "",	     "abc/def", "/abc", ".hidden", "..",    ".",
					   "../etc", "-abc",	"_abc", "abc def", "abc;x", "abc\n",
					   "abc:1",  "a\\b",	"ab*",	"é" };

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		base_env("ADD");
		setenv("CNI_CONTAINERID", bad[i], 1);
		expect_4("CNI_CONTAINERID");
	}
}

static void t_container_id_256_chars(void **state)
{
	char id[257];

	memset(id, 'a', 256);
	id[256] = '\0';
	base_env("ADD");
	setenv("CNI_CONTAINERID", id, 1);
	expect_4("CNI_CONTAINERID");
}

static void t_container_id_valid(void **state)
{
	static const char *const good[] = { "a", "0", "abc_def.ghi-jkl", "A1.b2_C3-d4", "x.." };
	char id[256];
	struct cni_env env;

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		base_env("ADD");
		setenv("CNI_CONTAINERID", good[i], 1);
		expect_ok(&env);
		assert_string_equal(env.container_id, good[i]);
	}
	memset(id, 'f', 255);
	id[255] = '\0';
	base_env("ADD");
	setenv("CNI_CONTAINERID", id, 1);
	expect_ok(&env);
	assert_int_equal(strlen(env.container_id), 255);
}

/* ---- CNI_IFNAME ---- */

static void t_ifname_missing(void **state)
{
	base_env("ADD");
	unsetenv("CNI_IFNAME");
	expect_4("CNI_IFNAME");
	base_env("DEL");
	unsetenv("CNI_IFNAME");
	expect_4("CNI_IFNAME");
}

static void t_ifname_invalid(void **state)
{
	static const char *const bad[] = {
		"",   "abcdefghijklmnop", "et/h0",  "eth:0", "eth 0", ".",
		"..", "eth\t0",		  "eth0\n", " eth0"
	};

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		base_env("ADD");
		setenv("CNI_IFNAME", bad[i], 1);
		expect_4("CNI_IFNAME");
	}
}

static void t_ifname_valid(void **state)
{
	static const char *const good[] = { "eth0", "net1",	"abcdefghijklmno",
					    "e",    "eth0.100", "veth-pod_1" };
	struct cni_env env;

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		base_env("ADD");
		setenv("CNI_IFNAME", good[i], 1);
		expect_ok(&env);
		assert_string_equal(env.ifname, good[i]);
	}
}

/* ---- CNI_NETNS ---- */

static void t_netns_required_on_add_and_check(void **state)
{
	base_env("ADD");
	unsetenv("CNI_NETNS");
	expect_4("CNI_NETNS");
	base_env("ADD");
	setenv("CNI_NETNS", "", 1);
	expect_4("CNI_NETNS");
	base_env("CHECK");
	unsetenv("CNI_NETNS");
	expect_4("CNI_NETNS");
}

static void t_netns_optional_on_del(void **state)
{
	struct cni_env env;

	base_env("DEL");
	unsetenv("CNI_NETNS");
	expect_ok(&env);
	assert_non_null(env.netns);
	assert_string_equal(env.netns, "");
	base_env("DEL");
	setenv("CNI_NETNS", "", 1);
	expect_ok(&env);
	assert_string_equal(env.netns, "");
}

static void t_netns_too_long(void **state)
{
	char p[300];

	memset(p, 'n', sizeof(p) - 1);
	p[0] = '/';
	p[sizeof(p) - 1] = '\0';
	base_env("ADD");
	setenv("CNI_NETNS", p, 1);
	expect_4("CNI_NETNS");
}

/* ---- CNI_PATH ---- */

static void t_path_required(void **state)
{
	static const char *const cmds[] = { "ADD", "DEL", "CHECK" };

	for (size_t i = 0; i < 3; i++) {
		base_env(cmds[i]);
		unsetenv("CNI_PATH");
		expect_4("CNI_PATH");
		base_env(cmds[i]);
		setenv("CNI_PATH", "", 1);
		expect_4("CNI_PATH");
	}
}

/* ---- CNI_ARGS ---- */

static void t_args_unset_or_empty(void **state)
{
	struct cni_env env;

	base_env("ADD");
	unsetenv("CNI_ARGS");
	expect_ok(&env);
	assert_string_equal(env.k8s_namespace, "");
	assert_string_equal(env.pod, "");
	base_env("ADD");
	setenv("CNI_ARGS", "", 1);
	expect_ok(&env);
	assert_string_equal(env.k8s_namespace, "");
}

static void t_args_ignore_unknown(void **state)
{
	struct cni_env env;

	base_env("ADD");
	setenv("CNI_ARGS", "IgnoreUnknown=1;FOO=bar;K8S_POD_UID=x-y-z;K8S_POD_NAME=web-0", 1);
	expect_ok(&env);
	assert_string_equal(env.pod, "web-0");
	assert_string_equal(env.k8s_namespace, "");
}

static void t_args_unknown_without_ignore(void **state)
{
	struct cni_env env;

	/* DESIGN: keys Tollgate does not use are ignored, IgnoreUnknown or not */
	base_env("ADD");
	setenv("CNI_ARGS", "K8S_POD_NAMESPACE=ns1;SOMETHING_NEW=1", 1);
	expect_ok(&env);
	assert_string_equal(env.k8s_namespace, "ns1");
}

static void t_args_extracts_names_any_order(void **state)
{
	struct cni_env env;

	base_env("ADD");
	setenv("CNI_ARGS", "K8S_POD_NAME=p.q-r;IgnoreUnknown=true;K8S_POD_NAMESPACE=kube-system",
	       1);
	expect_ok(&env);
	assert_string_equal(env.k8s_namespace, "kube-system");
	assert_string_equal(env.pod, "p.q-r");
}

static void t_args_trailing_and_double_semicolons(void **state)
{
	struct cni_env env;

	base_env("ADD");
	setenv("CNI_ARGS", "IgnoreUnknown=1;;K8S_POD_NAMESPACE=ns;", 1);
	expect_ok(&env);
	assert_string_equal(env.k8s_namespace, "ns");
}

static void t_args_value_with_equals(void **state)
{
	struct cni_env env;

	base_env("ADD");
	setenv("CNI_ARGS", "FOO=a=b;K8S_POD_NAME=pod", 1);
	expect_ok(&env);
	assert_string_equal(env.pod, "pod");
}

static void t_args_empty_values(void **state)
{
	struct cni_env env;

	base_env("ADD");
	setenv("CNI_ARGS", "K8S_POD_NAMESPACE=;K8S_POD_NAME=", 1);
	expect_ok(&env);
	assert_string_equal(env.k8s_namespace, "");
	assert_string_equal(env.pod, "");
}

static void t_args_similar_keys_not_taken(void **state)
{
	struct cni_env env;

	base_env("ADD");
	setenv("CNI_ARGS",
	       "K8S_POD_NAMESPACEX=evil;K8S_POD_NAME_SUFFIX=evil;k8s_pod_name=evil;"
	       "K8S_POD_NAMESPACE=good",
	       1);
	expect_ok(&env);
	assert_string_equal(env.k8s_namespace, "good");
	assert_string_equal(env.pod, "");
}

static void t_args_max_lengths(void **state)
{
	char args[512], ns[IPAM_K8S_NAMESPACE_MAX + 1], pod[IPAM_K8S_POD_MAX + 1];
	struct cni_env env;

	memset(ns, 'n', IPAM_K8S_NAMESPACE_MAX);
	ns[IPAM_K8S_NAMESPACE_MAX] = '\0';
	memset(pod, 'p', IPAM_K8S_POD_MAX);
	pod[IPAM_K8S_POD_MAX] = '\0';
	snprintf(args, sizeof(args), "K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s", ns, pod);
	base_env("ADD");
	setenv("CNI_ARGS", args, 1);
	expect_ok(&env);
	assert_string_equal(env.k8s_namespace, ns);
	assert_string_equal(env.pod, pod);
}

static void t_args_pair_without_equals(void **state)
{
	static const char *const bad[] = { "IgnoreUnknown", "IgnoreUnknown=1;K8S_POD_NAME",
					   "K8S_POD_NAMESPACE=ns;junk", "=value", "a=b;=c" };

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		base_env("ADD");
		setenv("CNI_ARGS", bad[i], 1);
		expect_4("CNI_ARGS");
	}
}

static void t_args_invalid_namespace(void **state)
{
	static const char *const bad[] = { "K8S_POD_NAMESPACE=bad/ns", "K8S_POD_NAMESPACE=../etc",
					   "K8S_POD_NAMESPACE=a b",    "K8S_POD_NAMESPACE=-ns",
					   "K8S_POD_NAMESPACE=ns\"x",  "K8S_POD_NAMESPACE=.",
					   "K8S_POD_NAMESPACE=ns\n" };

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		base_env("ADD");
		setenv("CNI_ARGS", bad[i], 1);
		expect_4("K8S_POD_NAMESPACE");
	}
}

static void t_args_namespace_too_long(void **state)
{
	char args[128];

	snprintf(args, sizeof(args), "K8S_POD_NAMESPACE=%064d", 0);
	base_env("ADD");
	setenv("CNI_ARGS", args, 1);
	expect_4("K8S_POD_NAMESPACE");
}

static void t_args_invalid_pod(void **state)
{
	char args[300];

	base_env("ADD");
	setenv("CNI_ARGS", "K8S_POD_NAME=web/0", 1);
	expect_4("K8S_POD_NAME");
	memset(args, 'p', sizeof(args) - 1);
	args[sizeof(args) - 1] = '\0';
	memcpy(args, "K8S_POD_NAME=", 13); /* a 286-character name */
	base_env("ADD");
	setenv("CNI_ARGS", args, 1);
	expect_4("K8S_POD_NAME");
}

static void t_args_checked_on_del(void **state)
{
	base_env("DEL");
	setenv("CNI_ARGS", "junk", 1);
	expect_4("CNI_ARGS");
}

/* ---- order: the first problem is the one reported ---- */

static void t_first_error_reported(void **state)
{
	base_env("ADD");
	unsetenv("CNI_CONTAINERID");
	unsetenv("CNI_IFNAME");
	unsetenv("CNI_PATH");
	expect_4("CNI_CONTAINERID");
}

/* ---- the group ---- */

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(t_command_each),
		T(t_command_missing),
		T(t_command_empty),
		T(t_command_unknown),
		T(t_add_full),
		T(t_check_and_del_full),
		T(t_status_gc_version_need_only_command),
		T(t_container_id_missing),
		T(t_container_id_invalid),
		T(t_container_id_256_chars),
		T(t_container_id_valid),
		T(t_ifname_missing),
		T(t_ifname_invalid),
		T(t_ifname_valid),
		T(t_netns_required_on_add_and_check),
		T(t_netns_optional_on_del),
		T(t_netns_too_long),
		T(t_path_required),
		T(t_args_unset_or_empty),
		T(t_args_ignore_unknown),
		T(t_args_unknown_without_ignore),
		T(t_args_extracts_names_any_order),
		T(t_args_trailing_and_double_semicolons),
		T(t_args_value_with_equals),
		T(t_args_empty_values),
		T(t_args_similar_keys_not_taken),
		T(t_args_max_lengths),
		T(t_args_pair_without_equals),
		T(t_args_invalid_namespace),
		T(t_args_namespace_too_long),
		T(t_args_invalid_pod),
		T(t_args_checked_on_del),
		T(t_first_error_reported),
	};

	return cmocka_run_group_tests_name("env", tests, NULL, NULL);
}
