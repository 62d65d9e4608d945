/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_NETNS_H
#define TG_TEST_NETNS_H

/*
 * Unit tests that need kernel objects (nftables, tc) move the whole test
 * process into a network namespace of its own first: nothing they make is
 * ever seen by the host, and it all goes with the process.
 */

#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

/* True once the process runs in a fresh network namespace (root only). */
static inline bool in_private_netns(void)
{
	static int done = -1;

	if (done < 0)
		done = geteuid() == 0 && unshare(CLONE_NEWNET) == 0;
	return done == 1;
}

static inline bool have_nft(void)
{
	return access("/usr/sbin/nft", X_OK) == 0 || access("/sbin/nft", X_OK) == 0;
}

/* Skips the running test unless the process has a network namespace of its own. */
#define NEED_NETNS()                                                          \
	do {                                                                  \
		if (!in_private_netns()) {                                    \
			print_message("needs root (unshare CLONE_NEWNET)\n"); \
			skip();                                               \
		}                                                             \
	} while (0)

/*
 * ...and tc's netlink messages, which qemu-user (the arm64 build's tests,
 * TG_UNIT_QEMU_USER=1) does not translate: such a case runs in the native builds.
 */
#define NEED_NETNS_TC()                                                     \
	do {                                                                \
		const char *q_ = getenv("TG_UNIT_QEMU_USER");               \
		if (q_ && q_[0] == '1') {                                   \
			print_message("tc netlink: not under qemu-user\n"); \
			skip();                                             \
		}                                                           \
		NEED_NETNS();                                               \
	} while (0)

/* ...and the nft binary, which sets tables and counters up. */
#define NEED_NETNS_NFT()                                         \
	do {                                                     \
		NEED_NETNS();                                    \
		if (!have_nft()) {                               \
			print_message("needs the nft binary\n"); \
			skip();                                  \
		}                                                \
	} while (0)

/*
 * `nft ARGS` with its output dropped, for cleanups: a table may well be
 * absent. Only ever inside the private namespace, never on the host's tables.
 */
static inline void nft_quiet(const char *args)
{
	char cmd[512];

	if (!in_private_netns())
		return;
	snprintf(cmd, sizeof(cmd), "nft %s >/dev/null 2>&1", args);
	if (system(cmd)) {
		/* absent: fine */
	}
}

/* Loads a ruleset with `nft -f -` (private namespace only); fails the test when nft refuses it. */
static inline void nft_apply(const char *rules)
{
	FILE *p;

	if (!in_private_netns())
		fail_msg("nft_apply outside a private network namespace");
	p = popen("nft -f - 2>&1", "w");
	assert_non_null(p);
	fputs(rules, p);
	if (pclose(p) != 0)
		fail_msg("nft -f failed for:\n%s", rules);
}

#endif
