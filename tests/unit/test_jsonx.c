// SPDX-License-Identifier: Apache-2.0
/*
 * The strict reader of every document (lib/jsonx.h): a member written twice
 * in one object is refused with its path and the byte its second key is
 * at, however the name is written; one name in different objects is not
 * twice; JX_EXACT refuses what json-c lets through.
 */
#include <errno.h>
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
#include "tests/unit/helpers.h"

#include "lib/jsonx.h"

struct twice_case {
	const char *name;
	const char *text;
	const char *member; /* NULL: accepted */
	size_t at;
};

static const struct twice_case twice_cases[] = {
	{ "twice: at the top", "{\"mtu\":1500,\"mtu\":9000}", "mtu", 12 },
	{ "twice: in a nested object", "{\"a\":{\"b\":1},\"p\":[{\"t\":1},{\"x\":1,\"x\":2}]}",
	  "p[1].x", 33 },
	{ "twice: once escaped", "{\"pods\":1,\"p\\u006fds\":2}", "pods", 10 },
	{ "twice: a key in single quotes", "{\"a\":1,'a':2}", "a", 7 },
	{ "twice: empty names", "{\"\":1,\"\":2}", "\"\"", 6 },
	{ "twice: a colon in a name is one member", "{\"a:b\":1,\"a\":{\"a:b\":2}}", NULL, 0 },
	{ "twice: one name in two objects", "{\"mtu\":1,\"x\":{\"mtu\":2},\"y\":[{\"mtu\":3}]}",
	  NULL, 0 },
	{ "twice: none", "{\"a\":1,\"b\":[1,2,{}]}", NULL, 0 },
};

static void t_twice(void **state)
{
	const struct twice_case *c = *state;
	struct jx_parse_error pe;
	json_object *root = NULL;
	char why[160];
	int r = jx_parse(c->text, strlen(c->text), &root, &pe);

	if (!c->member) {
		if (r != 0)
			fail_msg("%s: refused: %s", c->text, pe.why);
		json_object_put(root);
		return;
	}
	assert_int_equal(r, -EBADMSG);
	assert_true(pe.twice);
	assert_false(pe.trailing);
	assert_string_equal(pe.member, c->member);
	assert_int_equal(pe.at, c->at);
	snprintf(why, sizeof(why), "%s is written twice", c->member);
	assert_string_equal(pe.why, why);
}

static void t_exact(void **state)
{
	const char *big = "{\"a\":18446744073709551616}";
	const char *fits = "{\"a\":18446744073709551615,\"b\":-9223372036854775808}";
	struct jx_parse_error pe;
	json_object *root = NULL;

	(void)state;
	/* json-c reads the nearest that fits; only JX_EXACT refuses it */
	assert_int_equal(jx_parse(big, strlen(big), &root, &pe), 0);
	json_object_put(root);
	assert_int_equal(jx_parse_ex(big, strlen(big), JX_EXACT, &root, &pe), -ERANGE);
	assert_true(pe.exact);
	assert_int_equal(pe.at, 5);
	assert_contains(pe.why, "does not fit 64 bits");
	assert_int_equal(jx_parse_ex(fits, strlen(fits), JX_EXACT, &root, &pe), 0);
	json_object_put(root);
	assert_int_equal(jx_parse_ex("{\"a\":1,\"a\":1}", 13, JX_EXACT, &root, &pe), -EBADMSG);
	assert_true(pe.twice);
}

static void t_fail_twice_is_a_config_error(void **state)
{
	struct jx_parse_error pe;
	struct tg_err e = { 0 };
	json_object *root = NULL;
	const char *t = "{\"ipam\":{\"exclude\":[],\"exclude\":[]}}";

	(void)state;
	assert_int_equal(jx_parse(t, strlen(t), &root, &pe), -EBADMSG);
	assert_int_equal(jx_fail_twice(&e, &pe), -EINVAL);
	assert_int_equal(e.code, CNI_ERR_CONFIG);
	assert_contains(e.msg, "ipam.exclude is written twice at byte 22");
}

/* A file of the program's own: a member twice reads as no file, as an unparseable one does. */
static void t_read_file(void **state)
{
	char path[] = "/tmp/tg-jsonx-XXXXXX";
	const char *good = "{\"a\":1,\"b\":{\"a\":2}}\n", *twice = "{\"a\":1,\"a\":2}";
	int fd = mkstemp(path);
	json_object *o;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, good, strlen(good)), (ssize_t)strlen(good));
	o = jx_read_file(path);
	assert_non_null(o);
	assert_int_equal(jx_get_int(o, "a"), 1);
	json_object_put(o);
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(pwrite(fd, twice, strlen(twice), 0), (ssize_t)strlen(twice));
	assert_null(jx_read_file(path));
	close(fd);
	unlink(path);
	assert_null(jx_read_file(path));
}

int main(void)
{
	for (size_t i = 0; i < sizeof(twice_cases) / sizeof(twice_cases[0]); i++)
		add_test(twice_cases[i].name, t_twice, (void *)&twice_cases[i]);
	ADD(t_exact);
	ADD(t_fail_twice_is_a_config_error);
	ADD(t_read_file);
	return run_group("jsonx");
}
