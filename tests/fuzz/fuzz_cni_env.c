// SPDX-License-Identifier: Apache-2.0
/* libFuzzer: CNI_ARGS (and the container ID and ifname) as the runtime passes them. */
#include <stdlib.h>
#include <string.h>

#include "cni/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	size_t half;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	/* the first part (to a NUL, if any) is CNI_ARGS, what follows the ifname */
	half = strlen(s);
	setenv("CNI_COMMAND", "ADD", 1);
	setenv("CNI_CONTAINERID", "0123456789abcdef", 1);
	setenv("CNI_NETNS", "/var/run/netns/fuzz", 1);
	setenv("CNI_PATH", "/opt/cni/bin", 1);
	setenv("CNI_ARGS", s, 1);
	setenv("CNI_IFNAME", half < size ? s + half + 1 : "eth0", 1);
	{
		struct cni_env env;
		struct tg_err e = { 0 };

		if (cni_env_command(&env, &e) == 0)
			cni_env_parse(&env, &e);
	}
	free(s);
	return 0;
}
