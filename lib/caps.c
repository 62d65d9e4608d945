// SPDX-License-Identifier: Apache-2.0
/* A daemon's capabilities cut down (lib/caps.h). */
#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/caps.h"

int caps_keep_only(uint32_t keep, bool bounding_too)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };

	/* First, while CAP_SETPCAP may still be effective. */
	if (bounding_too && prctl(PR_CAPBSET_READ, CAP_SETPCAP, 0, 0, 0) == 1)
		for (int c = 0; c <= CAP_LAST_CAP; c++)
			if (c >= 32 || !(keep & (1u << c)))
				prctl(PR_CAPBSET_DROP, c, 0, 0, 0); /* EPERM: harmless */
	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	data[0].effective &= keep;
	data[0].permitted &= keep;
	data[0].inheritable = 0;
	data[1].effective = data[1].permitted = data[1].inheritable = 0;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ? -errno : 0;
}
