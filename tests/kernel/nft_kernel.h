/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_NFT_KERNEL_H
#define TG_TEST_NFT_KERNEL_H

/*
 * The tables of the shared cases (tests/unit/acct_cases.h, render_cases.h)
 * in the kernel's nftables: what tests/unit/fake_nfnl.h does to its model,
 * done with `nft -f` inside the process's private network namespace
 * (tests/unit/netns.h), never anywhere else. Each call is one transaction,
 * or a part of the one nft_fx_batch_end() commits.
 *
 * Include in one file of a ktest binary, after cmocka.h.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/unit/netns.h"

#define NFT_FX_FAKE 0
/* Each case skips (saying why) unless it has a namespace of its own and nft. */
#define NFT_FX_NEED() NEED_NETNS_NFT()

static struct {
	FILE *f;
	char *buf;
	size_t len;
} nft_fx_script;

/* Every table goes: the namespace is the process's own. */
static inline void nft_fx_reset(void)
{
	nft_quiet("flush ruleset");
}

static inline int nft_fx_done(void)
{
	nft_fx_reset();
	return 0;
}

static inline void nft_fx_batch_begin(void)
{
	assert_null(nft_fx_script.f);
	nft_fx_script.f = open_memstream(&nft_fx_script.buf, &nft_fx_script.len);
	assert_non_null(nft_fx_script.f);
}

static inline void nft_fx_batch_end(void)
{
	assert_non_null(nft_fx_script.f);
	assert_int_equal(fclose(nft_fx_script.f), 0);
	nft_fx_script.f = NULL;
	nft_apply(nft_fx_script.buf);
	free(nft_fx_script.buf);
	nft_fx_script.buf = NULL;
}

/* One line of nft's script: to the batch, or a transaction of its own. */
__attribute__((format(printf, 1, 2))) static inline void nft_fx_cmd(const char *fmt, ...)
{
	bool own = !nft_fx_script.f;
	va_list ap;

	if (own)
		nft_fx_batch_begin();
	va_start(ap, fmt);
	vfprintf(nft_fx_script.f, fmt, ap);
	va_end(ap);
	if (own)
		nft_fx_batch_end();
}

static inline void nft_fx_add_table(const char *table)
{
	nft_fx_cmd("add table inet %s\n", table);
}

static inline void nft_fx_del_table(const char *table)
{
	nft_fx_cmd("delete table inet %s\n", table);
}

static inline bool nft_fx_has_table(const char *table)
{
	char cmd[256];

	if (!in_private_netns())
		fail_msg("nft_fx_has_table outside a private network namespace");
	snprintf(cmd, sizeof(cmd), "nft list table inet %s >/dev/null 2>&1", table);
	return system(cmd) == 0;
}

/* As the fake's: its table made when missing. */
static inline void nft_fx_add_counter(const char *table, const char *name, uint64_t packets,
				      uint64_t bytes)
{
	nft_fx_cmd("add table inet %s\nadd counter inet %s %s { packets %" PRIu64 " bytes %" PRIu64
		   " }\n",
		   table, table, name, packets, bytes);
}

static inline void nft_fx_del_counter(const char *table, const char *name)
{
	nft_fx_cmd("delete counter inet %s %s\n", table, name);
}

#endif
