/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_NETNS_H
#define TG_TEST_NETNS_H

/*
 * Unit tests that need kernel objects (nftables, tc) move the whole test
 * process into a network namespace of its own first: nothing they make is
 * ever seen by the host, and it all goes with the process.
 */

#include <sched.h>
#include <stdbool.h>
#include <unistd.h>

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

#endif
