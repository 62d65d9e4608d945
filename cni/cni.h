/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_CNI_H
#define TG_CNI_H

/*
 * The CNI plugin: protocol (environment, stdin config, results, errors),
 * commands, and the netns/veth plumbing of one pod.
 *
 * cni_run() is the whole plugin; main() only hands it the process's
 * environment and streams. It writes exactly one JSON document to `out`
 * (the result or the CNI error object) and returns the exit status.
 */

#include <stdio.h>

#define CNI_SPEC_VERSION "1.1.0"

int cni_run(FILE *in, FILE *out);

#endif
