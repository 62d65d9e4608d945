// SPDX-License-Identifier: Apache-2.0
/* The CNI spec's commands and versions (lib/cnispec.h). */
#include <stddef.h>
#include <string.h>

#include "lib/cnispec.h"

const char *const cni_cmd_names[CNI_CMDS] = {
	[CNI_CMD_ADD] = "ADD",	     [CNI_CMD_DEL] = "DEL", [CNI_CMD_CHECK] = "CHECK",
	[CNI_CMD_STATUS] = "STATUS", [CNI_CMD_GC] = "GC",   [CNI_CMD_VERSION] = "VERSION",
};

const char *const cni_versions[] = { "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0", NULL };

int cni_version_parse(const char *v)
{
	static const int codes[] = { 300, 301, 400, 10000, 10100 };

	for (size_t i = 0; cni_versions[i]; i++)
		if (v && strcmp(v, cni_versions[i]) == 0)
			return codes[i];
	return -1;
}
