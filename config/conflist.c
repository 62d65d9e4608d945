// SPDX-License-Identifier: Apache-2.0
/*
 * The network configuration (config/config.h): the conflist's entry found,
 * decoded and parsed key by key; the top-level keys and ipam here, the
 * policies (config/policy.c), nodeAccess (config/access.c) and what the
 * runtime passes (config/runtime.c) in files of their own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/internal.h"
#include "ipam/ipam.h"
#include "ipam/pool.h"
#include "lib/cleanup.h"
#include "lib/cnispec.h"
#include "lib/jsonx.h"
#include "lib/util.h"

static int copy_path(json_object *o, const char *key, char *dst, size_t size, const char *dflt,
		     struct tg_err *e)
{
	const char *v = dflt;
	int r = jx_string(o, "", key, &v, e);

	if (r < 0)
		return r;
	if (!v)
		return 0;
	if (v[0] != '/')
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s \"%.128s\" must be an absolute path",
			       key, v);
	if (strlen(v) >= size - 64 || strstr(v, "/../") ||
	    (strlen(v) >= 3 && strcmp(v + strlen(v) - 3, "/..") == 0))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s \"%.128s\" is not a usable path",
			       key, v);
	snprintf(dst, size, "%s", v);
	return 0;
}

static int cmp_cidr(const void *a, const void *b)
{
	const struct cidr4 *x = a, *y = b;

	return x->net < y->net ? -1 : x->net > y->net;
}

static int parse_internal(json_object *root, struct node_config *cfg, struct tg_err *e)
{
	json_object *arr = NULL;
	size_t i, n;
	int r;

	r = jx_string_array(root, "", "internalCIDRs", &arr, e);
	if (r < 0)
		return r;
	if (r == 0) {
		cfg->internal[0] = (struct cidr4){ .net = 0x0a000000, .prefix = 8 };
		cfg->n_internal = 1;
		return 0;
	}
	n = json_object_array_length(arr);
	if (n == 0)
		return tg_fail(
			e, CNI_ERR_CONFIG, -EINVAL,
			"internalCIDRs is empty: list at least one CIDR (default 10.0.0.0/8)");
	if (n > ACCT_MAX_INTERNAL)
		return tg_fail(e, CNI_ERR_CONFIG, -E2BIG, "internalCIDRs lists more than %d CIDRs",
			       ACCT_MAX_INTERNAL);
	for (i = 0; i < n; i++) {
		const char *s = json_object_get_string(json_object_array_get_idx(arr, i));

		if (cidr4_parse(s, &cfg->internal[i]) < 0)
			return tg_fail(
				e, CNI_ERR_CONFIG, -EINVAL,
				"internalCIDRs[%zu] \"%.64s\" is not an IPv4 CIDR (a.b.c.d/len, no host bits)",
				i, s);
	}
	qsort(cfg->internal, n, sizeof(cfg->internal[0]), cmp_cidr);
	for (i = 1; i < n; i++) {
		if (cfg->internal[i].net <= cidr4_last(&cfg->internal[i - 1])) {
			char a[CIDR4_STRLEN], b[CIDR4_STRLEN];

			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "internalCIDRs: %s overlaps %s",
				       cidr4_format(&cfg->internal[i], a),
				       cidr4_format(&cfg->internal[i - 1], b));
		}
	}
	cfg->n_internal = n;
	return 0;
}

/* A static pool holds only addresses a pod can use (lib/ip4.h ip4_unusable_why). */
static int pool_check_usable(const uint32_t *pool, size_t n, struct tg_err *e)
{
	char ip[IP4_STRLEN];

	for (size_t i = 0; i < n; i++) {
		const char *why = ip4_unusable_why(pool[i]);

		if (why)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "ipam.addresses holds %s, which no pod can use: %s; "
				       "list it under ipam.exclude or drop it",
				       ip4_format(pool[i], ip), why);
	}
	return 0;
}

static int parse_ipam(json_object *root, struct node_config *cfg, struct tg_err *e)
{
	json_object *ipam = NULL, *addresses = NULL, *exclude = NULL;
	const char *source = NULL;
	int64_t cooldown = IPAM_DEFAULT_COOLDOWN_MS / 1000;
	int r;

	if ((r = jx_object(root, "", "ipam", &ipam, e)) < 0)
		return r;
	if (!ipam)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "ipam is missing");
	if (jx_string(ipam, "ipam", "source", &source, e) < 0 ||
	    jx_string(ipam, "ipam", "imdsURL", &cfg->imds_url, e) < 0 ||
	    jx_string_array(ipam, "ipam", "addresses", &addresses, e) < 0 ||
	    jx_string_array(ipam, "ipam", "exclude", &exclude, e) < 0 ||
	    jx_int(ipam, "ipam", "cooldownSeconds", 0, 86400, &cooldown, e) < 0)
		return -EINVAL;
	cfg->cooldown_ms = cooldown * 1000;
	cfg->exclude = exclude;
	if (!source)
		source = addresses ? "static" : "imds";
	if (strcmp(source, "static") == 0) {
		cfg->source = IPAM_SOURCE_STATIC;
		if (!addresses || json_object_array_length(addresses) == 0)
			return tg_fail(
				e, CNI_ERR_CONFIG, -EINVAL,
				"ipam.addresses must list the node's addresses when ipam.source is \"static\"");
		r = ipam_pool_parse(addresses, exclude, "ipam", &cfg->pool, &cfg->n_pool, e);
		if (r == 0)
			r = pool_check_usable(cfg->pool, cfg->n_pool, e);
		if (r < 0)
			return r;
		if (cfg->n_pool == 0)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "ipam.addresses minus ipam.exclude leaves no address");
	} else if (strcmp(source, "imds") == 0) {
		cfg->source = IPAM_SOURCE_IMDS;
		/* exclude is applied by `tollgate-ipam sync`; check its syntax here all the same. */
		r = ipam_pool_parse(exclude, NULL, "ipam", &cfg->pool, &cfg->n_pool, e);
		free(cfg->pool);
		cfg->pool = NULL;
		cfg->n_pool = 0;
		if (r < 0) {
			/* The parser named it "ipam.addresses[i]": this list is ipam.exclude. */
			if (e) {
				char *at = strstr(e->msg, "ipam.addresses");

				if (at)
					memcpy(at, "ipam.exclude  ", 14);
			}
			return r;
		}
	} else {
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "ipam.source \"%.32s\" is not \"static\" or \"imds\"", source);
	}
	return 0;
}

int node_config_decode(const char *text, size_t len, struct node_config *cfg, struct tg_err *e)
{
	json_object *root;
	int r;

	memset(cfg, 0, sizeof(*cfg));
	if (len == 0)
		return tg_fail(e, CNI_ERR_DECODE, -ENODATA, "no network configuration on stdin");
	r = config_read_object("the network configuration", text, len, &root, e);
	if (r < 0)
		return r;
	cfg->root = root;

	if ((r = jx_string(root, "", "cniVersion", &cfg->cni_version, e)) < 0)
		return r;
	if (r == 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "cniVersion is missing");
	cfg->version = cni_version_parse(cfg->cni_version);
	if (cfg->version < 0) {
		char list[64] = "";

		for (size_t i = 0, o = 0; cni_versions[i] && o < sizeof(list); i++)
			o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "",
					      cni_versions[i]);
		return tg_fail(e, CNI_ERR_VERSION, -EPROTONOSUPPORT,
			       "cniVersion \"%.32s\" is not supported (supported: %s)",
			       cfg->cni_version, list);
	}
	return 0;
}

int node_config_parse(struct node_config *cfg, struct tg_err *e)
{
	json_object *root = cfg->root;
	const char *uplink = NULL, *type = NULL;
	int64_t mtu = 0;
	int r;

	if ((r = jx_string(root, "", "name", &cfg->name, e)) < 0)
		return r;
	if (r == 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "name is missing");
	if (!name_is_safe(cfg->name, TG_NETWORK_NAME_MAX))
		return tg_fail(
			e, CNI_ERR_CONFIG, -EINVAL,
			"name \"%.64s\" must match [A-Za-z0-9][A-Za-z0-9_.-]* (at most %d characters)",
			cfg->name, TG_NETWORK_NAME_MAX);
	/* The runtime found the binary by it; still a key like any other. */
	if ((r = jx_string(root, "", "type", &type, e)) < 0)
		return r;
	if (jx_int(root, "", "mtu", 68, 65535, &mtu, e) < 0)
		return -EINVAL;
	cfg->mtu = (int)mtu;
	if ((r = jx_string(root, "", "uplink", &uplink, e)) < 0)
		return r;
	if (uplink) {
		if (!*uplink || strlen(uplink) >= IFNAMSIZ || strchr(uplink, '/'))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "uplink \"%.32s\" is not a valid interface name", uplink);
		snprintf(cfg->uplink, sizeof(cfg->uplink), "%s", uplink);
	}
	if ((r = parse_internal(root, cfg, e)) < 0)
		return r;
	cfg->masquerade = true;
	if (jx_bool(root, "", "masquerade", &cfg->masquerade, e) < 0)
		return -EINVAL;
	if (copy_path(root, "dataDir", cfg->data_dir, sizeof(cfg->data_dir), "/run/tollgate", e) <
		    0 ||
	    copy_path(root, "logFile", cfg->log_file, sizeof(cfg->log_file), NULL, e) < 0)
		return -EINVAL;
	cfg->log_max_bytes = NODE_LOG_MAX_BYTES;
	if (jx_int(root, "", "logMaxBytes", NODE_LOG_MAX_BYTES_MIN, NODE_LOG_MAX_BYTES_MAX,
		   &cfg->log_max_bytes, e) < 0)
		return -EINVAL;
	if ((r = parse_ipam(root, cfg, e)) < 0)
		return r;
	if ((r = config_parse_accounting(root, cfg, e)) < 0)
		return r;
	if ((r = config_parse_shaping(root, cfg, e)) < 0)
		return r;
	if ((r = config_parse_access(root, cfg, e)) < 0)
		return r;
	if ((r = config_parse_budgets(root, cfg, e)) < 0)
		return r;
	if ((r = config_parse_guard(root, cfg, e)) < 0)
		return r;
	if (jx_object(root, "", "runtimeConfig", &cfg->runtime_config, e) < 0)
		return -EINVAL;
	if ((r = config_parse_runtime(cfg, e)) < 0)
		return r;
	if (json_object_object_get_ex(root, "prevResult", &cfg->prev_result) && cfg->prev_result &&
	    !json_object_is_type(cfg->prev_result, json_type_object))
		return tg_fail(e, CNI_ERR_DECODE, -EBADMSG, "prevResult must be a result object");
	if ((r = config_parse_gc_list(root, cfg, e)) < 0)
		return r;
	return 0;
}

void node_config_free(struct node_config *cfg)
{
	free(cfg->pool);
	if (cfg->root)
		json_object_put(cfg->root);
	memset(cfg, 0, sizeof(*cfg));
}

void node_config_verdict(FILE *f, const char *path, int r, const struct node_config *cfg,
			 const struct tg_err *e)
{
	if (r == 0)
		fprintf(f, "%s: accepted (network %s, cniVersion %s)\n", path,
			cfg->name ? cfg->name : "", cfg->cni_version ? cfg->cni_version : "");
	else
		fprintf(f, "%s: refused (CNI error %d): %s\n", path, e->code ? e->code : CNI_ERR_IO,
			e->msg);
}

int node_config_load_file(const char *path, struct node_config *cfg, struct tg_err *e)
{
	_cleanup_free_ char *file = NULL;
	size_t len;
	int r;

	memset(cfg, 0, sizeof(*cfg));
	r = read_file(path, NODE_CONFIG_MAX, &file, &len);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot read %s: %s", path,
			       r == -E2BIG ? "larger than 1 MiB" : strerror(-r));
	return node_config_load_text(path, file, len, cfg, e);
}

int node_config_load_text(const char *path, const char *file, size_t len, struct node_config *cfg,
			  struct tg_err *e)
{
	_cleanup_json_ json_object *root = NULL;
	json_object *plugins, *entry = NULL, *v;
	const char *text;
	int r;

	memset(cfg, 0, sizeof(*cfg));
	r = config_read_object(path, file, len, &root, e);
	if (r < 0)
		return r;
	if (json_object_object_get_ex(root, "plugins", &plugins) &&
	    json_object_is_type(plugins, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(plugins) && !entry; i++) {
			json_object *p = json_object_array_get_idx(plugins, i), *type;

			if (json_object_object_get_ex(p, "type", &type) &&
			    json_object_is_type(type, json_type_string) &&
			    strcmp(json_object_get_string(type), NODE_PLUGIN_TYPE) == 0)
				entry = p;
		}
		if (!entry)
			return tg_fail(e, CNI_ERR_CONFIG, -ENOENT,
				       "%s has no plugin of type \"tollgate\"", path);
		/* As the runtime does: the list's name and version go into the entry. */
		entry = json_object_get(entry);
		if (json_object_object_get_ex(root, "name", &v))
			json_object_object_add(entry, "name", json_object_get(v));
		if (json_object_object_get_ex(root, "cniVersion", &v))
			json_object_object_add(entry, "cniVersion", json_object_get(v));
	} else {
		entry = json_object_get(root);
	}
	text = json_object_to_json_string_ext(entry, JSON_C_TO_STRING_PLAIN);
	r = node_config_decode(text, strlen(text), cfg, e);
	if (r == 0)
		r = node_config_parse(cfg, e);
	json_object_put(entry);
	return r;
}
