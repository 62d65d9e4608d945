// SPDX-License-Identifier: Apache-2.0
/* The plugin: read env and stdin, dispatch, print one JSON document. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cni/cni.h"
#include "cni/internal.h"
#include "lib/cleanup.h"
#include "lib/cniops.h"
#include "lib/failpoint.h"
#include "lib/jsonx.h"
#include "lib/steps.h"
#include "lib/util.h"
#include "node/node.h"

/*
 * For the node daemon's metrics: the operation by command and result code,
 * its duration (from the plugin's first read of its environment to its
 * result written and logged), and, when an ADD found no free address, the
 * signal to sync soon.
 */
static void record_operation(const struct node_config *cfg, enum cni_cmd cmd, int code, int64_t t0)
{
	char dir[PATH_MAX + 256];

	if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", cfg->data_dir, cfg->name) >= sizeof(dir))
		return;
	cniops_record(dir, cmd, code, time_mono_ns() - t0);
	if (cmd == CNI_CMD_ADD && code == CNI_ERR_TRY_AGAIN)
		cniops_signal_exhausted(dir);
}

int cni_config_read(const char *text, size_t len, enum cni_cmd cmd, struct node_config *cfg,
		    struct tg_err *e)
{
	int r = node_config_decode(text, len, cfg, e);

	if (r < 0)
		return r;
	if (cmd == CNI_CMD_CHECK && cfg->version < 400)
		return tg_fail(e, CNI_ERR_VERSION, -EPROTONOSUPPORT,
			       "CHECK needs cniVersion 0.4.0 or later, the config says %s",
			       cfg->cni_version);
	if ((cmd == CNI_CMD_STATUS || cmd == CNI_CMD_GC) && cfg->version < 10100)
		return tg_fail(e, CNI_ERR_VERSION, -EPROTONOSUPPORT,
			       "%s needs cniVersion 1.1.0, the config says %s",
			       cmd == CNI_CMD_GC ? "GC" : "STATUS", cfg->cni_version);
	return cmd == CNI_CMD_VERSION ? 0 : node_config_parse(cfg, e);
}

/* ADD's result, written; an error when it could not be (ADD then undoes itself). */
static int emit_result(json_object *result, void *ctx, struct tg_err *e)
{
	FILE *out = ctx;
	int64_t t = time_mono_ns();
	int r = TG_FAILPOINT("add.result.write", e);

	if (r == 0) {
		jx_print(out, result, JSON_C_TO_STRING_PLAIN);
		if (fflush(out) != 0 || ferror(out))
			r = tg_fail(e, CNI_ERR_IO, -EIO, "cannot write the result: %m");
	}
	step_done(STEP_RESULT, t);
	return r;
}

static json_object *version_info(const char *cni_version)
{
	json_object *o = json_object_new_object(), *arr = json_object_new_array();

	for (size_t i = 0; cni_versions[i]; i++)
		json_object_array_add(arr, json_object_new_string(cni_versions[i]));
	json_object_object_add(o, "cniVersion", json_object_new_string(cni_version));
	json_object_object_add(o, "supportedVersions", arr);
	return o;
}

int cni_run(FILE *in, FILE *out)
{
	struct tg_err err = { 0 };
	struct cni_env env;
	struct node_config cfg = { 0 };
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ json_object *result = NULL;
	char ip[IP4_STRLEN] = "";
	struct shaping shaping = { 0 }; /* ADD's and CHECK's pod, for the log line */
	struct budget_set heard = { 0 };
	const char *version = NULL;
	int64_t t0 = time_mono_ns(), t_step;
	size_t len = 0;
	int r;

	r = cni_env_command(&env, &err);
	if (r < 0)
		goto done;
	r = read_stream(in, NODE_CONFIG_MAX, &text, &len);
	if (r == -E2BIG) {
		r = tg_fail(&err, CNI_ERR_DECODE, r,
			    "the network configuration is larger than %d bytes", NODE_CONFIG_MAX);
		goto done;
	} else if (r < 0) {
		r = tg_fail(&err, CNI_ERR_IO, r, "cannot read stdin: %s", strerror(-r));
		goto done;
	}
	if (env.cmd == CNI_CMD_VERSION) {
		/* VERSION answers even without a usable config. */
		if (len && node_config_decode(text, len, &cfg, NULL) == 0)
			version = cfg.cni_version;
		result = version_info(version ? version : CNI_SPEC_VERSION);
		goto done;
	}
	r = cni_env_parse(&env, &err);
	if (r < 0)
		goto done;
	r = cni_config_read(text, len, env.cmd, &cfg, &err);
	if (cfg.version > 0)
		version = cfg.cni_version;
	/* which namespaces have budgets: the allocator's policy as the agent last heard it */
	if (r == 0 && cfg.budgets.allocator && (env.cmd == CNI_CMD_ADD || env.cmd == CNI_CMD_CHECK))
		cfg.budgets.heard = node_budgets_heard(&cfg, &heard);
	step_done(STEP_CONFIG, t0);
	if (r < 0)
		goto done;

	switch (env.cmd) {
	case CNI_CMD_ADD:
		r = cmd_add(&env, &cfg, emit_result, out, ip, &shaping, &err);
		break;
	case CNI_CMD_DEL:
		r = cmd_del(&env, &cfg, ip, &err);
		break;
	case CNI_CMD_CHECK:
		r = cmd_check(&env, &cfg, ip, &shaping, &err);
		break;
	case CNI_CMD_STATUS:
		r = cmd_status(&cfg, &err);
		break;
	case CNI_CMD_GC:
		r = cmd_gc(&cfg, &err);
		break;
	case CNI_CMD_VERSION:
		break;
	}
done:
	t_step = time_mono_ns();
	if (r < 0) {
		_cleanup_json_ json_object *eo = NULL;

		if (!err.code)
			tg_fail(&err, CNI_ERR_IO, r, "%s", strerror(-r));
		eo = cni_error_render(version, &err);
		if (eo)
			jx_print(out, eo, JSON_C_TO_STRING_PLAIN);
	} else if (result) {
		jx_print(out, result, JSON_C_TO_STRING_PLAIN);
	}
	fflush(out);
	step_done(STEP_RESULT, t_step);
	if (env.cmd == CNI_CMD_ADD && r == 0) {
		char warning[400];

		/* Not an error: the pod starts with the config's cap. The runtime logs stderr. */
		if (cni_annotation_warning(&shaping, warning, sizeof(warning)))
			fprintf(stderr, "tollgate: %s/%s: %s\n", env.k8s_namespace, env.pod,
				warning);
	}
	if (env.cmd_name && env.cmd != CNI_CMD_VERSION)
		cni_log(cfg.log_file, cfg.log_max_bytes, &env, ip, time_mono_ns() - t0, &shaping,
			r < 0 ? &err : NULL);
	if (env.cmd_name && env.cmd != CNI_CMD_VERSION && cfg.name && cfg.data_dir[0])
		record_operation(&cfg, env.cmd, r < 0 ? err.code : 0, t0);
	node_config_free(&cfg);
	budget_set_free(&heard);
	return r < 0 ? 1 : 0;
}
