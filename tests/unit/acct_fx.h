/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_TEST_ACCT_FX_H
#define TG_TEST_ACCT_FX_H

/*
 * What the accounting tests share, kernel-free (tests/unit/test_accounting.c,
 * against the fake nfnetlink of tests/unit/fake_nfnl.h) and in a network
 * namespace (tests/kernel/ktest_accounting.c), and their shared cases
 * (tests/unit/acct_cases.h): a config with perPod, 400 pods in 40
 * namespaces, and what a counter reader saw. Include after cmocka.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accounting/accounting.h"
#include "accounting/internal.h"

#define PODS 400
#define NAMESPACES 40

static const struct cidr4 acct_fx_internal[] = { { 0x0a000000u, 8 } }; /* 10.0.0.0/8 */

static inline struct acct_config config(void)
{
	struct acct_config c = { .internal = acct_fx_internal,
				 .n_internal = 1,
				 .masquerade = true,
				 .inet_ingress_classid = 0x10002,
				 .enabled = true,
				 .per_pod = true,
				 .internet_mark = 0x10000,
				 .pod_link_prefix = "tg" };
	return c;
}

struct pods {
	char ns[PODS][16];
	char veth[PODS][16];
	struct acct_pod p[PODS];
};

static inline struct pods *make_pods(void)
{
	struct pods *ps = calloc(1, sizeof(*ps));

	assert_non_null(ps);
	for (int i = 0; i < PODS; i++) {
		snprintf(ps->ns[i], sizeof(ps->ns[i]), "ns-%02d", i % NAMESPACES);
		snprintf(ps->veth[i], sizeof(ps->veth[i]), "tg%012x", 0xa000u + (unsigned)i);
		ps->p[i] = (struct acct_pod){ .ip = 0x0a010000u + 1 + (uint32_t)i,
					      .k8s_namespace = ps->ns[i],
					      .host_veth = ps->veth[i] };
	}
	return ps;
}

/* ---- reading counters ---- */

struct seen {
	size_t n, calls;
	char (*names)[ACCT_COUNTER_NAME_MAX];
	uint64_t *packets, *bytes, *ids;
};

static inline void on_counter(const struct acct_counter_sample *c, void *arg)
{
	struct seen *s = arg;

	s->calls++;
	if (s->n >= 8 * PODS || c->name_len >= ACCT_COUNTER_NAME_MAX)
		return;
	memcpy(s->names[s->n], c->name, c->name_len);
	s->names[s->n][c->name_len] = '\0';
	s->packets[s->n] = c->packets;
	s->bytes[s->n] = c->bytes;
	s->ids[s->n] = c->id;
	s->n++;
}

static inline struct seen *seen_new(void)
{
	struct seen *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	s->names = calloc(8 * PODS, sizeof(*s->names));
	s->packets = calloc(8 * PODS, sizeof(*s->packets));
	s->bytes = calloc(8 * PODS, sizeof(*s->bytes));
	s->ids = calloc(8 * PODS, sizeof(*s->ids));
	assert_true(s->names && s->packets && s->bytes && s->ids);
	return s;
}

static inline void seen_free(struct seen *s)
{
	free(s->names);
	free(s->packets);
	free(s->bytes);
	free(s->ids);
	free(s);
}

static inline long find(const struct seen *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->names[i], name) == 0)
			return (long)i;
	return -1;
}

/* The id the reader gave the counter of that name; fails the test if it read none. */
static inline uint64_t id_of(const struct seen *s, const char *name)
{
	long i = find(s, name);

	if (i < 0)
		fail_msg("counter %s not read", name);
	return s->ids[i];
}

/* The reader saw a counter of that name; fails the test if not. */
static inline void assert_counter_read(const struct seen *s, const char *name)
{
	if (find(s, name) < 0)
		fail_msg("counter %s missing", name);
}

/* Every counter the table must hold is there, once. */
static inline void assert_all_counters(const struct seen *s, const struct pods *ps)
{
	char name[ACCT_COUNTER_NAME_MAX];

	/* pods' own, namespaces' (classes, spoofed, nodeAccess' drops), the host's, ARP's */
	assert_int_equal(s->n, (size_t)PODS * ACCT_CLASSES +
				       NAMESPACES * (ACCT_CLASSES + ACCT_FAMILIES + ACCT_DROPS) +
				       ACCT_CLASSES + ACCT_FAMILIES + 1);
	assert_counter_read(s, ACCT_ARP_COUNTER);
	for (int c = 0; c < ACCT_CLASSES; c++) {
		for (int i = 0; i < PODS; i++) {
			acct_pod_counter_name(ps->veth[i], c, name);
			assert_counter_read(s, name);
		}
		for (int i = 0; i < NAMESPACES; i++) {
			acct_ns_counter_name(ps->ns[i], c, name);
			assert_counter_read(s, name);
		}
	}
	for (int f = 0; f < ACCT_FAMILIES; f++) {
		acct_spoofed_counter_name(NULL, f, name);
		assert_counter_read(s, name);
		for (int i = 0; i < NAMESPACES; i++) {
			acct_spoofed_counter_name(ps->ns[i], f, name);
			assert_counter_read(s, name);
		}
	}
	for (size_t i = 0; i < s->n; i++)
		for (size_t j = i + 1; j < s->n; j++)
			if (strcmp(s->names[i], s->names[j]) == 0)
				fail_msg("counter %s listed twice", s->names[i]);
}

#endif
