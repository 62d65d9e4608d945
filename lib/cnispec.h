/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_CNISPEC_H
#define TG_LIB_CNISPEC_H

/*
 * What the CNI spec defines and more than the plugin uses: the commands
 * (the plugin dispatches on them, lib/cniops counts each for the agent) and
 * the versions (the plugin answers them, node/ reads a config's cniVersion).
 * The spec's error codes are lib/err.h's enum cni_code.
 */

/* CNI_COMMAND's values. The counted ones (lib/cniops.h) come before VERSION. */
enum cni_cmd {
	CNI_CMD_ADD,
	CNI_CMD_DEL,
	CNI_CMD_CHECK,
	CNI_CMD_STATUS,
	CNI_CMD_GC,
	CNI_CMD_VERSION
};
#define CNI_CMDS (CNI_CMD_VERSION + 1)
/* Each command's name as CNI_COMMAND spells it (and the agent's metrics label it). */
extern const char *const cni_cmd_names[CNI_CMDS];

/* The CNI versions Tollgate speaks, oldest first, NULL-terminated. */
extern const char *const cni_versions[];
/* Encodes "a.b.c" as a*10000+b*100+c; -1 when not a version Tollgate speaks. */
int cni_version_parse(const char *v);

#endif
