/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_FAILPOINT_H
#define TG_LIB_FAILPOINT_H

/*
 * Failpoints: a named place before or after a kernel or store step where a
 * test build fails on demand, to prove that every failure is clean (ADD
 * leaves the node as it was, DEL and GC finish on a rerun, a declaration,
 * sync or reshape converges on the next run).
 *
 *   r = TG_FAILPOINT("add.veth.after", e);    0, or -EIO with e naming the point
 *
 * Compiled in only with -DTG_FAILPOINTS (the sanitizer build, never
 * installed); otherwise the macro is the constant 0 and neither the code nor
 * the names reach the binary. Armed by the environment:
 *
 *   TOLLGATE_FAILPOINT=NAME      the first time NAME is reached, it fails
 *   TOLLGATE_FAILPOINT=NAME@N    the Nth time
 *   TOLLGATE_FAILPOINT=list      prints every point of the binary, one a line, and exits 0
 *
 * A name the binary does not hold makes it exit 2 at start: a typo never
 * passes for a point that is not reached. Each use site registers its name
 * in the section tg_failpoints, which is what `list` prints.
 */

#include "lib/err.h"

#ifdef TG_FAILPOINTS
int tg_failpoint_fire(const char *name, struct tg_err *e);
#define TG_FAILPOINT(name, e)                                                                      \
	__extension__({                                                                            \
		static const char *const tg_fp_name_                                               \
			__attribute__((used, section("tg_failpoints"), aligned(sizeof(void *)))) = \
				(name);                                                            \
		tg_failpoint_fire(tg_fp_name_, (e));                                               \
	})
#else
#define TG_FAILPOINT(name, e) 0
#endif

#endif
