// SPDX-License-Identifier: Apache-2.0
/* tollgate: the CNI plugin binary. */
#include <stdio.h>
#include <string.h>

#include "cni/cni.h"
#include "lib/version.h"

/* The runtime passes no argument (CNI_COMMAND says what to do); a person may ask --version. */
int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--version") == 0) {
		tg_print_version(stdout, "tollgate");
		return 0;
	}
	return cni_run(stdin, stdout);
}
