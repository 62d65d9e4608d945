/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_CAPS_H
#define TG_LIB_CAPS_H

#include <stdbool.h>
#include <stdint.h>

/*
 * A daemon's capabilities cut down to what it needs: the effective and
 * permitted sets keep the CAP_* bits of keep (1u << CAP_X, capabilities
 * below 32) and nothing else, the inheritable and ambient sets are
 * emptied, and no_new_privs is set. bounding_too: the bounding set loses
 * the others as well, when CAP_SETPCAP allows it (it stays the runtime's
 * otherwise). 0, or a negative errno.
 */
int caps_keep_only(uint32_t keep, bool bounding_too);

#endif
