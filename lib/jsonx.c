// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <strings.h>

#include "lib/jsonx.h"

const char *jx_type_name(json_object *v, bool exact)
{
	switch (json_object_get_type(v)) {
	case json_type_boolean:
		return "a boolean";
	case json_type_double:
		return exact ? "a fraction" : "a number";
	case json_type_int:
		return exact ? "an integer" : "a number";
	case json_type_object:
		return "an object";
	case json_type_array:
		return "an array";
	case json_type_string:
		return "a string";
	default:
		return "null";
	}
}

void jx_print(FILE *out, json_object *o, int flags)
{
	fputs(json_object_to_json_string_ext(o, flags | JSON_C_TO_STRING_NOSLASHESCAPE), out);
	fputc('\n', out);
}

json_object *jx_get(json_object *obj, const char *key)
{
	json_object *v;

	if (!obj || !json_object_object_get_ex(obj, key, &v))
		return NULL;
	return v;
}

const char *jx_get_str(json_object *obj, const char *key)
{
	json_object *v = jx_get(obj, key);

	return v ? json_object_get_string(v) : "";
}

int64_t jx_get_int(json_object *obj, const char *key)
{
	json_object *v = jx_get(obj, key);

	return v ? json_object_get_int64(v) : 0;
}

static int find_key(json_object *obj, const char *key, json_object **ret)
{
	json_object *v = jx_get(obj, key);

	if (!v)
		return 0;
	*ret = v;
	return 1;
}

static int wrong_type(struct tg_err *e, const char *where, const char *key, const char *want,
		      json_object *v)
{
	return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s%s%s must be %s, not %s", where,
		       *where ? "." : "", key, want, jx_type_name(v, false));
}

int jx_string(json_object *obj, const char *where, const char *key, const char **ret,
	      struct tg_err *e)
{
	json_object *v;

	if (!find_key(obj, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return wrong_type(e, where, key, "a string", v);
	*ret = json_object_get_string(v);
	return 1;
}

int jx_bool(json_object *obj, const char *where, const char *key, bool *ret, struct tg_err *e)
{
	json_object *v;

	if (!find_key(obj, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return wrong_type(e, where, key, "true or false", v);
	*ret = json_object_get_boolean(v);
	return 1;
}

int jx_int(json_object *obj, const char *where, const char *key, int64_t min, int64_t max,
	   int64_t *ret, struct tg_err *e)
{
	json_object *v;
	int64_t n;

	if (!find_key(obj, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_int))
		return wrong_type(e, where, key, "an integer", v);
	errno = 0;
	n = json_object_get_int64(v);
	if (errno || n < min || n > max)
		return tg_fail(e, CNI_ERR_CONFIG, -ERANGE, "%s%s%s is %s, must be %lld..%lld",
			       where, *where ? "." : "", key, json_object_to_json_string(v),
			       (long long)min, (long long)max);
	*ret = n;
	return 1;
}

int jx_object(json_object *obj, const char *where, const char *key, json_object **ret,
	      struct tg_err *e)
{
	json_object *v;

	if (!find_key(obj, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_object))
		return wrong_type(e, where, key, "an object", v);
	*ret = v;
	return 1;
}

int jx_string_array(json_object *obj, const char *where, const char *key, json_object **ret,
		    struct tg_err *e)
{
	json_object *v;
	size_t i, n;

	if (!find_key(obj, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_array))
		return wrong_type(e, where, key, "an array of strings", v);
	n = json_object_array_length(v);
	for (i = 0; i < n; i++) {
		json_object *el = json_object_array_get_idx(v, i);

		if (!json_object_is_type(el, json_type_string))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "%s%s%s[%zu] must be a string, not %s", where,
				       *where ? "." : "", key, i, jx_type_name(el, false));
	}
	*ret = v;
	return 1;
}

const char *jx_get_string(json_object *obj, const char *key)
{
	json_object *v = jx_get(obj, key);

	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

int jx_get_int64_text(json_object *obj, const char *key, int64_t *ret)
{
	json_object *v = jx_get(obj, key);
	const char *s;
	char *end;
	long long n;

	*ret = 0;
	if (!v || json_object_is_type(v, json_type_null))
		return 0;
	if (json_object_is_type(v, json_type_int)) {
		*ret = json_object_get_int64(v);
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return -EINVAL;
	s = json_object_get_string(v);
	errno = 0;
	n = strtoll(s, &end, 10);
	if (!*s || *end || errno || (*s != '-' && (*s < '0' || *s > '9')))
		return -EBADMSG;
	*ret = n;
	return 0;
}

json_object *jx_get_nocase(json_object *obj, const char *key)
{
	if (!obj || !json_object_is_type(obj, json_type_object))
		return NULL;
	json_object_object_foreach(obj, k, v)
	{
		if (strcasecmp(k, key) == 0)
			return v;
	}
	return NULL;
}
