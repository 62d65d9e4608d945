/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_VERSION_H
#define TG_LIB_VERSION_H

/*
 * What a binary says of its build: the version (VERSION), the commit it was
 * built from (git, at build time; "unknown" outside a checkout) and how
 * (sanitizers, failpoints, the target). Answered by every binary's
 * --version and by tollgate_build_info{version,commit}.
 */

#include <stdio.h>

extern const char tg_build_version[];
extern const char tg_build_commit[];
extern const char tg_build_flags[];

/* "PROG VERSION (commit C; FLAGS)" and a newline. */
void tg_print_version(FILE *f, const char *prog);

#endif
