/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_IPAM_INTERNAL_H
#define TG_IPAM_INTERNAL_H

/* Inside the IPAM module (and its tests): the store's format and the limits it checks. */

#include <stddef.h>

#include "ipam/ipam.h"

#define IPAM_STATE_VERSION 1 /* the store's format (ipam/store.h) */
#define IPAM_POOL_MAX 65536  /* addresses in one pool */
#define IPAM_ATTACHMENTS_MAX 65536

/* The first line of `path`: -ENODATA when it is empty (ipam_read_boot_id's, testable). */
int ipam_read_boot_id_from(const char *path, char *buf, size_t size);

#endif
