// SPDX-License-Identifier: Apache-2.0
/*
 * tollgate-allocator: the cluster budgets' allocator (allocator/allocator.h).
 * The options (options.c), then the process set up (setup.c) and one event
 * loop (loop.c) until SIGTERM or SIGINT.
 */
#include "allocator/allocator.h"

int main(int argc, char **argv)
{
	struct alloc_cli cli;
	int r = alloc_parse_options(argc, argv, &cli);

	return r == ALLOC_RUN ? alloc_main(&cli) : r;
}
