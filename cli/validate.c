// SPDX-License-Identifier: Apache-2.0
/*
 * validate FILE: whether a conflist (or a single plugin config) would be
 * taken, judged by the parser the plugin and the node agent run, so the
 * answer and its message are theirs: to check an edit of the ConfigMap
 * before it rolls out to every node.
 */
#include <stdio.h>

#include "cli/cli.h"
#include "lib/jsonx.h"

int validate_main(struct cli *c)
{
	struct node_config cfg = { 0 };
	struct tg_err e = { 0 };
	int r = node_config_load_file(c->arg, &cfg, &e);
	json_object *o = json_object_new_object();

	if (!o) {
		node_config_free(&cfg);
		fprintf(stderr, "tollgate-ipam: out of memory\n");
		return EXIT_PROBLEMS;
	}
	jx_add(o, "file", json_object_new_string(c->arg));
	jx_add(o, "accepted", json_object_new_boolean(r == 0));
	if (r == 0) {
		jx_add(o, "name", json_object_new_string(cfg.name ? cfg.name : ""));
		jx_add(o, "cniVersion",
		       json_object_new_string(cfg.cni_version ? cfg.cni_version : ""));
	} else {
		/* the CNI error object's members, as the plugin would answer */
		jx_add(o, "code", json_object_new_int(e.code ? e.code : CNI_ERR_IO));
		jx_add(o, "msg", json_object_new_string(e.msg));
		if (e.details[0])
			jx_add(o, "details", json_object_new_string(e.details));
	}
	if (c->json)
		jx_print(stdout, o, JSON_C_TO_STRING_PRETTY);
	else
		node_config_verdict(stdout, c->arg, r, &cfg, &e);
	json_object_put(o);
	node_config_free(&cfg);
	return r == 0 ? 0 : EXIT_PROBLEMS;
}
