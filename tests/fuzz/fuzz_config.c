// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer: the network config as the plugin reads it from stdin (every
 * command's rules, and an ADD's hostPorts), and the allocator's policy file.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cni/internal.h"
#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum cni_cmd cmds[] = { CNI_CMD_ADD, CNI_CMD_DEL, CNI_CMD_CHECK, CNI_CMD_GC };

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		struct node_config cfg = { 0 };
		struct tg_err e = { 0 };

		/* an ADD reads the pod's hostPorts from runtimeConfig.portMappings too */
		if (cni_config_read((const char *)data, size, cmds[i], &cfg, &e) == 0 &&
		    cmds[i] == CNI_CMD_ADD) {
			struct hostports ports;

			node_config_ports(&cfg, &ports, &e);
		}
		node_config_free(&cfg);
	}
	/* the allocator's policy file, the same bytes: taken whole (sealed) or refused */
	{
		struct alloc_policy p;
		struct tg_err e = { 0 };

		if (alloc_policy_load_text("policy.json", (const char *)data, size, &p, &e) == 0) {
			for (size_t i = 1; i < p.budgets.n; i++)
				if (strcmp(p.budgets.d[i - 1].ns, p.budgets.d[i].ns) >= 0)
					abort();
			if (strlen(p.budgets.id) != BUDGET_POLICY_ID_LEN)
				abort();
			alloc_policy_free(&p);
		}
	}
	return 0;
}
