/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_GROUP_H
#define TG_TEST_GROUP_H

/*
 * A cmocka group assembled at run time, for tests made from tables of cases:
 * add_test()/ADD() in main, then `return run_group("name");`.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#define GROUP_MAX_TESTS 512

static struct CMUnitTest group_tests[GROUP_MAX_TESTS];
static size_t group_n;

static inline void add_test_fixture(const char *name, CMUnitTestFunction fn,
				    CMFixtureFunction setup, CMFixtureFunction teardown,
				    void *state)
{
	if (group_n >= GROUP_MAX_TESTS)
		abort();
	group_tests[group_n++] = (struct CMUnitTest){ .name = name,
						      .test_func = fn,
						      .setup_func = setup,
						      .teardown_func = teardown,
						      .initial_state = state };
}

static inline void add_test(const char *name, CMUnitTestFunction fn, void *state)
{
	add_test_fixture(name, fn, NULL, NULL, state);
}

#define ADD(fn) add_test(#fn, fn, NULL)

static inline int run_group(const char *name)
{
	return _cmocka_run_group_tests(name, group_tests, group_n, NULL, NULL);
}

#endif
