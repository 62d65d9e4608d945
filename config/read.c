// SPDX-License-Identifier: Apache-2.0
/* A config's JSON, read strictly (config/internal.h): stdin's, a conflist's, the allocator's policy's. */
#include <errno.h>

#include "config/config.h"
#include "config/internal.h"
#include "lib/jsonx.h"

int config_read_object(const char *path, const char *text, size_t len, json_object **ret,
		       struct tg_err *e)
{
	struct jx_parse_error pe;
	json_object *root = NULL;
	int r;

	if (len > NODE_CONFIG_MAX)
		return tg_fail(e, CNI_ERR_DECODE, -E2BIG, "%s is larger than 1 MiB", path);
	/* one document, nothing but blanks after it */
	r = jx_parse(text, len, &root, &pe);
	if (r == -ENOMEM)
		return tg_fail(e, CNI_ERR_IO, r, "out of memory");
	if (r < 0 && pe.twice)
		return jx_fail_twice(e, &pe);
	if (r < 0 && pe.trailing)
		return tg_fail(e, CNI_ERR_DECODE, r, "%s has trailing data at byte %zu", path,
			       pe.at);
	if (r < 0)
		return tg_fail(e, CNI_ERR_DECODE, r, "%s is not valid JSON: %s at byte %zu", path,
			       pe.why, pe.at);
	if (!json_object_is_type(root, json_type_object)) {
		json_object_put(root);
		return tg_fail(e, CNI_ERR_DECODE, -EBADMSG, "%s is not a JSON object", path);
	}
	*ret = root;
	return 0;
}
