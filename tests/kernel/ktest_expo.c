// SPDX-License-Identifier: Apache-2.0
/*
 * exporter_render against the kernel's nftables (root and the nft binary):
 * the cases of tests/unit/render_cases.h, which tests/unit/test_expo.c runs
 * against the fake nf_tables, their counters made here with `nft -f`.
 *
 * tests/integration/test_kernel_cases.sh runs this in a network namespace of
 * its own, and the process unshares another before its first table
 * (tests/unit/netns.h): run by hand it never sees the host's tables either.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/kernel/nft_kernel.h"
#include "tests/unit/render_cases.h"

int main(void)
{
	add_render_cases();
	return run_group("exporter_render in a network namespace");
}
