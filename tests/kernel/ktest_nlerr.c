// SPDX-License-Identifier: Apache-2.0
/*
 * The kernel's extended-ack text (lib/nl.c) carried from a tc request the
 * kernel refuses to the CNI error object, in a network namespace of the
 * test's own (root). Parsing the text out of error messages built by hand is
 * tests/unit/test_nlerr.c's.
 *
 * tests/integration/test_kernel_cases.sh runs this in a network namespace of
 * its own, and the process unshares another before its first link
 * (tests/unit/netns.h): run by hand it never touches the host's links.
 */
#include <errno.h>
#include <linux/if_ether.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/tc.h>

#include "cni/internal.h"
#include "lib/nl.h"
#include "lib/nl_cleanup.h"
#include "shaper/internal.h"
#include "tests/unit/helpers.h"
#include "tests/unit/netns.h"

/*
 * A host veth whose clsact already holds another tool's filter where the
 * pod's egress shaping puts its redirect (priority 1 of the ingress hook,
 * another protocol): the kernel refuses the redirect, and says why. That
 * text ends the step's message and reaches the CNI error object.
 */
static void t_kernel_text_reaches_cni_error(void **state)
{
	_cleanup_nl_sock_ struct nl_sock *sk = NULL;
	_cleanup_json_ json_object *obj = NULL;
	struct shaping s = { .egress_bps = 10000000 };
	struct shaper_u32 other = { .parent = SHAPER_CLSACT_INGRESS,
				    .prio = 1,
				    .protocol = ETH_P_IP };
	struct tg_err e = { 0 };
	json_object *msg;
	char want[600];
	int idx = 0, r;

	(void)state;
	NEED_NETNS_TC();
	assert_int_equal(tg_nl_route_open(&sk), 0);
	/* The "host veth": an IFB will do, tc treats it alike. */
	assert_int_equal(shaper_ensure_ifb(sk, "tg00000000beef", 1500, 0, &idx), 0);
	assert_int_equal(shaper_put_clsact(sk, idx), 0);
	other.ifindex = idx;
	assert_int_equal(shaper_put_u32(sk, &other, NLM_F_CREATE | NLM_F_EXCL), 0);

	r = shaper_pod_add(sk, "tg00000000beef", 0, 0, &s, 50, 1500, &e);
	assert_true(r < 0);
	assert_int_equal(e.code, CNI_ERR_IO);
	if (!e.kernel[0])
		fail_msg("no extack text from the kernel: \"%s\"", e.msg);
	/* "<step>: <strerror>: <kernel's text>" */
	snprintf(want, sizeof(want),
		 "tc: redirecting traffic from the pod on tg00000000beef to "
		 "ti00000000beef: %s: %s",
		 strerror(-r), e.kernel);
	assert_string_equal(e.msg, want);
	print_message("# %s\n", e.msg);

	obj = cni_error_render("1.0.0", &e);
	assert_non_null(obj);
	assert_true(json_object_object_get_ex(obj, "msg", &msg));
	assert_contains(json_object_get_string(msg), e.kernel);

	/* The text went with that failure: a later one does not borrow it. */
	memset(&e, 0, sizeof(e));
	tg_fail_kernel(&e, r, "another step");
	assert_string_equal(e.kernel, "");
	snprintf(want, sizeof(want), "another step: %s", strerror(-r));
	assert_string_equal(e.msg, want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_kernel_text_reaches_cni_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
