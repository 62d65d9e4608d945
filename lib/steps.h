/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_STEPS_H
#define TG_LIB_STEPS_H

/*
 * Where one plugin call spends its time: each layer adds the duration of
 * its step, the plugin's log line prints the totals (steps_ms=...), and
 * `make bench` reads them for its per-step breakdown. Process-wide and
 * single-threaded, like the plugin.
 */

#include <stdint.h>

enum step {
	STEP_CONFIG, /* environment, stdin, config parse */
	STEP_STORE,  /* lock, load, save (with its fsyncs) */
	STEP_NODE,   /* node-wide state: the probe, and a declaration when something is missing */
	STEP_VETH,   /* the veth pair: create, or delete (the kernel's RCU waits) */
	STEP_POD,    /* the pod's side: address, gateway neighbour and routes */
	STEP_ROUTES, /* the host side: neighbour and /32 route */
	STEP_TC,     /* qdiscs, classes, filters */
	STEP_NFT,    /* set and map elements, counters */
	STEP_RESULT, /* the result or error, printed */
	STEP_COUNT,
};

extern const char *const step_names[STEP_COUNT];

/* Adds the time since t0 (time_mono_ns) to the step; returns now, the next step's t0. */
int64_t step_done(enum step s, int64_t t0);
/* Nanoseconds spent in the step so far. */
int64_t step_ns(enum step s);

#endif
