// SPDX-License-Identifier: Apache-2.0
/* tollgate: the CNI plugin binary. */
#include <stdio.h>

#include "cni/cni.h"

int main(void)
{
	return cni_run(stdin, stdout);
}
