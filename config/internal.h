/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_CONFIG_INTERNAL_H
#define TG_CONFIG_INTERNAL_H

/*
 * Inside the conflist's parser: the parts of it that live in files of their
 * own, each called by node_config_parse in the order the keys are judged
 * (the first refusal is the one reported). Each returns 0 or < 0 with e set
 * (code 7 naming the key); an absent key leaves its defaults.
 */

#include <stdbool.h>

#include <json-c/json.h>

#include "lib/err.h"

struct node_config;

/* budgets.fallback when not given: a node never granted gets 10M. */
#define BUDGET_FALLBACK_DEFAULT_BPS 10000000ULL
/* logMaxBytes: the default, and its bounds (two files of it at most are kept). */
#define NODE_LOG_MAX_BYTES (10 << 20)
#define NODE_LOG_MAX_BYTES_MIN 4096
#define NODE_LOG_MAX_BYTES_MAX (1LL << 30)

/*
 * A config's bytes (named `path` in messages: a file, or "the network
 * configuration" on stdin) as one JSON object, read strictly: at most
 * NODE_CONFIG_MAX, one document, no member twice. Code 6 (or 7 for a
 * member twice) with e; *ret the caller's.
 */
int config_read_object(const char *path, const char *text, size_t len, json_object **ret,
		       struct tg_err *e);
/* config/policy.c: accounting, shaping, budgets, internetGuard. */
int config_parse_accounting(json_object *root, struct node_config *cfg, struct tg_err *e);
int config_parse_shaping(json_object *root, struct node_config *cfg, struct tg_err *e);
int config_parse_budgets(json_object *root, struct node_config *cfg, struct tg_err *e);
int config_parse_guard(json_object *root, struct node_config *cfg, struct tg_err *e);
/* config/access.c: nodeAccess. */
int config_parse_access(json_object *root, struct node_config *cfg, struct tg_err *e);
/* config/runtime.c: runtimeConfig (bandwidth, annotations), cni.dev/valid-attachments. */
int config_parse_runtime(struct node_config *cfg, struct tg_err *e);
int config_parse_gc_list(json_object *root, struct node_config *cfg, struct tg_err *e);

#endif
