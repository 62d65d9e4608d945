/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_NODE_CONFIG_INTERNAL_H
#define TG_NODE_CONFIG_INTERNAL_H

/* Inside the conflist's parser: the parts of it that live in files of their own. */

#include <stdbool.h>

#include <json-c/json.h>

#include "lib/err.h"

struct node_config;

/* nodeAccess (node/config_access.c): its defaults when absent; code 7 naming the key. */
int node_config_parse_access(json_object *root, struct node_config *cfg, struct tg_err *e);

#endif
