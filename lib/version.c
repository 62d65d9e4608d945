// SPDX-License-Identifier: Apache-2.0
/* The build's version, commit and flags (lib/version.h): set by the Makefile for this file alone. */
#include "lib/version.h"

#ifndef TG_COMMIT
#define TG_COMMIT "unknown"
#endif
#ifndef TG_BUILD_FLAGS
#define TG_BUILD_FLAGS "release"
#endif

const char tg_build_version[] = TG_VERSION;
const char tg_build_commit[] = TG_COMMIT;
const char tg_build_flags[] = TG_BUILD_FLAGS;

void tg_print_version(FILE *f, const char *prog)
{
	fprintf(f, "%s %s (commit %s; %s)\n", prog, tg_build_version, tg_build_commit,
		tg_build_flags);
}
