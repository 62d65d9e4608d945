// SPDX-License-Identifier: Apache-2.0
/*
 * The strict reader of every JSON document Tollgate reads (lib/jsonx.h):
 * json-c's tree, then passes over the text for what json-c lets through.
 * The last of two members of one name silently wins in json-c's tree, so
 * the members written are counted in the text and matched against the
 * tree's: fewer in the tree means a name twice, which is then looked for by
 * name (only on that path: a valid document costs one pass and one walk).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jsonx.h"
#include "lib/util.h"

/* json-c nests at most 32 deep (JSON_TOKENER_DEFAULT_DEPTH) */
#define JX_DEPTH_MAX 64

const char *jx_shown(char *dst, size_t size, const char *s, size_t n)
{
	size_t o = 0, max = size - 4;

	for (size_t i = 0; i < n && o < max; i++)
		dst[o++] = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' ? s[i] : '?';
	if (o == max && n > max)
		memcpy(dst + o - 3, "...", 3);
	dst[o] = '\0';
	return dst;
}

static int refuse(struct jx_parse_error *pe, int neg_errno, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int refuse(struct jx_parse_error *pe, int neg_errno, size_t at, const char *fmt, ...)
{
	va_list ap;

	*pe = (struct jx_parse_error){ .at = at, .exact = true };
	va_start(ap, fmt);
	vsnprintf(pe->text, sizeof(pe->text), fmt, ap);
	va_end(ap);
	pe->why = pe->text;
	return neg_errno;
}

/*
 * The index past a string that opens at t[i] (json-c takes keys in single
 * quotes too, unless JX_EXACT refuses them).
 */
static size_t past_string(const char *t, size_t len, size_t i)
{
	char q = t[i];

	for (i++; i < len && t[i] != q; i++)
		i += t[i] == '\\';
	return i + 1;
}

/* Members written: each ':' outside a string is one. */
static size_t text_members(const char *t, size_t len)
{
	size_t members = 0, i = 0;

	while (i < len) {
		if (t[i] == '"' || t[i] == '\'') {
			i = past_string(t, len, i);
			continue;
		}
		members += t[i] == ':';
		i++;
	}
	return members;
}

/*
 * JX_EXACT: one pass over the text (a document json-c took) refuses what
 * json-c lets through and counts the members written.
 */
static int scan(const char *t, size_t len, size_t *ret_members, struct jx_parse_error *pe)
{
	size_t members = 0, i = 0;

	while (i < len) {
		char c = t[i];

		if (c == '"') {
			for (i++; i < len && t[i] != '"'; i++) {
				if ((unsigned char)t[i] < 0x20)
					return refuse(pe, -EBADMSG, i,
						      "a control character in a string");
				if (t[i] == '\\')
					i++;
			}
			i++;
		} else if (c == ':') {
			members++;
			i++;
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			size_t start = i, digits;
			bool neg = c == '-';

			if (neg)
				i++;
			while (i < len && t[i] >= '0' && t[i] <= '9')
				i++;
			digits = i - start - neg;
			if (i < len && (t[i] == '.' || t[i] == 'e' || t[i] == 'E')) {
				if (t[i] == '.' &&
				    (i + 1 >= len || t[i + 1] < '0' || t[i + 1] > '9'))
					return refuse(pe, -EBADMSG, i, "a number ends in '.'");
				while (i < len && strchr("0123456789.eE+-", t[i]))
					i++;
				continue;
			}
			/* no leading zeros in JSON: the digits' count orders them */
			if (digits > 20 ||
			    (digits == 20 && !neg &&
			     memcmp(t + start, "18446744073709551615", 20) > 0) ||
			    (neg && (digits > 19 ||
				     (digits == 19 &&
				      memcmp(t + start + 1, "9223372036854775808", 19) > 0))))
				return refuse(pe, -ERANGE, start, "%s does not fit 64 bits",
					      JX_SHOWN(t + start, i - start));
		} else if (strchr(" \t\n\r{}[],truefalsn", c)) {
			i++;
		} else {
			return refuse(pe, -EBADMSG, i, "\"%s\" is not JSON here", JX_SHOWN(&c, 1));
		}
	}
	*ret_members = members;
	return 0;
}

static size_t tree_members(json_object *o)
{
	size_t n = 0;

	if (json_object_is_type(o, json_type_object)) {
		json_object_object_foreach(o, k, v)
		{
			(void)k;
			n += 1 + tree_members(v);
		}
	} else if (json_object_is_type(o, json_type_array)) {
		size_t len = json_object_array_length(o);

		for (size_t i = 0; i < len; i++)
			n += tree_members(json_object_array_get_idx(o, i));
	}
	return n;
}

/*
 * The first object, in the order they open, with fewer members in the tree
 * than in the text: the text's member counts are matched against the tree's
 * in one walk (up to there both list the same objects).
 */
struct dup_walk {
	const uint32_t *count;
	size_t n, k;
	char path[64];
};

static bool find_object(json_object *o, struct dup_walk *w, size_t path_len)
{
	if (json_object_is_type(o, json_type_object)) {
		if (w->k >= w->n || w->count[w->k++] != (uint32_t)json_object_object_length(o))
			return true;
		json_object_object_foreach(o, k, v)
		{
			snprintf(w->path + path_len, sizeof(w->path) - path_len, "%s%s",
				 path_len ? "." : "", JX_SHOWN(k, strlen(k)));
			if (find_object(v, w, strlen(w->path)))
				return true;
		}
	} else if (json_object_is_type(o, json_type_array)) {
		size_t len = json_object_array_length(o);

		for (size_t i = 0; i < len; i++) {
			snprintf(w->path + path_len, sizeof(w->path) - path_len, "[%zu]", i);
			if (find_object(json_object_array_get_idx(o, i), w, strlen(w->path)))
				return true;
		}
	}
	w->path[path_len] = '\0';
	return false;
}

/* The members written in each object, in the order the objects open; NULL: no memory. */
static uint32_t *object_counts(const char *t, size_t len, size_t *ret_n)
{
	int64_t stack[JX_DEPTH_MAX];
	size_t depth = 0, objects = 0, i;
	uint32_t *count;

	for (i = 0; i < len; i++) {
		if (t[i] == '"' || t[i] == '\'')
			i = past_string(t, len, i) - 1;
		else
			objects += t[i] == '{';
	}
	count = calloc(objects + 1, sizeof(*count));
	if (!count)
		return NULL;
	objects = 0;
	for (i = 0; i < len; i++) {
		if (t[i] == '"' || t[i] == '\'') {
			i = past_string(t, len, i) - 1;
		} else if ((t[i] == '{' || t[i] == '[') && depth < JX_DEPTH_MAX) {
			stack[depth++] = t[i] == '{' ? (int64_t)objects++ : -1;
		} else if ((t[i] == '}' || t[i] == ']') && depth > 0) {
			depth--;
		} else if (t[i] == ':' && depth > 0 && stack[depth - 1] >= 0) {
			count[stack[depth - 1]]++;
		}
	}
	*ret_n = objects;
	return count;
}

/* A key as json-c reads it (escapes undone); it took the document, so it takes the key. */
static json_object *key_name(const char *s, size_t n)
{
	json_tokener *tok = json_tokener_new();
	json_object *name;

	if (!tok)
		return NULL;
	name = json_tokener_parse_ex(tok, s, n > INT_MAX ? INT_MAX : (int)n);
	json_tokener_free(tok);
	if (name && !json_object_is_type(name, json_type_string)) {
		json_object_put(name);
		name = NULL;
	}
	return name;
}

/*
 * The name written twice in the k-th object to open: its keys, in the
 * order written and read as json-c reads them (escapes and all), until one
 * comes again. 0, or -ENOMEM.
 */
static int name_twice(const char *t, size_t len, size_t k, struct jx_parse_error *pe)
{
	json_object *seen = json_object_new_object();
	size_t depth = 0, objects = 0, key = 0, key_end = 0, i;
	bool in = false;
	int r = 0;

	if (!seen)
		return -ENOMEM;
	for (i = 0; i < len; i++) {
		if (t[i] == '"' || t[i] == '\'') {
			key = i;
			i = past_string(t, len, i) - 1;
			key_end = i + 1;
		} else if (t[i] == '{' || t[i] == '[') {
			if (!in && t[i] == '{' && objects++ == k) {
				in = true;
				depth = 0;
			}
			depth++;
		} else if (t[i] == '}' || t[i] == ']') {
			if (in && --depth == 0)
				break;
		} else if (in && t[i] == ':' && depth == 1 && key_end <= len) {
			json_object *name = key_name(t + key, key_end - key);

			if (!name) {
				r = -ENOMEM;
				break;
			}
			if (json_object_object_get_ex(seen, json_object_get_string(name), NULL)) {
				pe->at = key;
				/* an empty name is shown as written */
				if (json_object_get_string_len(name) == 0)
					snprintf(pe->key, sizeof(pe->key), "\"\"");
				else
					jx_shown(pe->key, sizeof(pe->key),
						 json_object_get_string(name),
						 (size_t)json_object_get_string_len(name));
				snprintf(pe->member, sizeof(pe->member), "%s%s%s", pe->object,
					 pe->object[0] ? "." : "", pe->key);
				json_object_put(name);
				break;
			}
			json_object_object_add(seen, json_object_get_string(name), NULL);
			json_object_put(name);
		}
	}
	json_object_put(seen);
	return r;
}

/* Which member is written twice: the object (a walk of the tree), then the name (of the text). */
static int twice(const char *t, size_t len, json_object *root, struct jx_parse_error *pe)
{
	struct dup_walk w = { 0 };
	uint32_t *count;
	size_t n = 0;
	int r;

	*pe = (struct jx_parse_error){ .twice = true };
	count = object_counts(t, len, &n);
	if (!count)
		return -ENOMEM;
	w.count = count;
	w.n = n;
	find_object(root, &w, 0);
	free(count);
	memcpy(pe->object, w.path, sizeof(pe->object));
	r = w.k > 0 ? name_twice(t, len, w.k - 1, pe) : 0;
	if (r < 0)
		return r;
	if (!pe->member[0])
		snprintf(pe->member, sizeof(pe->member), "%s",
			 pe->object[0] ? pe->object : "a member");
	snprintf(pe->text, sizeof(pe->text), "%s is written twice", pe->member);
	pe->why = pe->text;
	return -EBADMSG;
}

int jx_parse_ex(const char *text, size_t len, unsigned flags, json_object **ret,
		struct jx_parse_error *ret_err)
{
	json_tokener *tok;
	json_object *root;
	size_t end, members = 0;
	int r;

	if (len > INT_MAX) {
		*ret_err = (struct jx_parse_error){ .why = "too large" };
		return -EBADMSG;
	}
	tok = json_tokener_new();
	if (!tok)
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	root = json_tokener_parse_ex(tok, text, (int)len);
	end = json_tokener_get_parse_end(tok);
	if (!root || json_tokener_get_error(tok) != json_tokener_success) {
		*ret_err = (struct jx_parse_error){ .why = json_tokener_error_desc(
							    json_tokener_get_error(tok)),
						    .at = end };
		json_tokener_free(tok);
		json_object_put(root);
		return -EBADMSG;
	}
	json_tokener_free(tok);
	/* json-c stops at a NUL byte as at the end of the text. */
	for (size_t i = end; i < len; i++)
		if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r') {
			*ret_err = (struct jx_parse_error){ .why = "trailing data",
							    .at = i,
							    .trailing = true };
			json_object_put(root);
			return -EBADMSG;
		}
	if (flags & JX_EXACT) {
		r = scan(text, len, &members, ret_err);
		if (r < 0)
			goto fail;
	} else {
		members = text_members(text, len);
	}
	if (members != tree_members(root)) {
		r = twice(text, len, root, ret_err);
		goto fail;
	}
	*ret = root;
	return 0;
fail:
	json_object_put(root);
	return r;
}

json_object *jx_read_file(const char *path)
{
	struct jx_parse_error pe;
	json_object *root = NULL;
	size_t len;
	char *text;

	if (read_file(path, SIZE_MAX, &text, &len) < 0)
		return NULL;
	if (jx_parse(text, len, &root, &pe) < 0)
		root = NULL;
	free(text);
	return root;
}

int jx_fail_twice(struct tg_err *e, const struct jx_parse_error *pe)
{
	return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s at byte %zu", pe->why, pe->at);
}
