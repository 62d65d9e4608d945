// SPDX-License-Identifier: Apache-2.0
/*
 * tollgate-agent: the node daemon (agent/agent.h).
 *
 *   tollgate-agent --config FILE [--data-dir D] [--listen ADDR:PORT]
 *                  [--cni-conf-dir DIR --cni-bin-dir DIR] [--once] [--metrics-only]
 *
 * The options (options.c), the process set up (setup.c), then one thread,
 * one event loop (loop.c) until SIGTERM or SIGINT.
 */
#include "agent/internal.h"

#include <malloc.h>

int main(int argc, char **argv)
{
	/* static: the agent's state (config, store paths, the page) is too big for a stack */
	static struct agent_cli cli;
	static struct app app;
	int r;

	/*
	 * A fixed mmap threshold: the metrics pages (hundreds of kB each) and
	 * a declaration's batch are mapped and go back to the kernel when
	 * freed. glibc would otherwise raise the threshold after the first
	 * such free and carve later pages out of the heap, where they leave
	 * holes: the resident size would depend on the order of frees, not
	 * on what is alive (docs/metrics.md, "Memory bound").
	 */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	/* the lease guard's thread allocates little: no arena of its own */
	mallopt(M_ARENA_MAX, 1);
	r = agent_parse_options(argc, argv, &cli);
	if (r != AGENT_RUN)
		return r;
	if (cli.check)
		return agent_check_config(&cli);
	r = agent_setup(&app, &cli);
	if (r == AGENT_RUN && cli.opt.once)
		r = agent_once(&app);
	if (r == AGENT_RUN)
		r = agent_setup_servers(&app, &cli);
	if (r == AGENT_RUN)
		r = agent_loop(&app);
	agent_teardown(&app);
	return r;
}
