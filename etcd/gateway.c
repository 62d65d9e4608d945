// SPDX-License-Identifier: Apache-2.0
/*
 * etcd's v3 JSON gateway: request bodies and strict parsers (etcd/etcd.h).
 * The gateway is grpc-gateway over etcd's protobuf API: int64s are written
 * as strings, members that hold their zero value (false, 0, an empty list)
 * are left out, and a failed call is {"error":..,"message":..,"code":..}.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "etcd/etcd.h"
#include "lib/jsonx.h"

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void etcd_b64_encode(const void *src, size_t n, char *dst)
{
	const unsigned char *s = src;
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		dst[o++] = b64_alphabet[v >> 18 & 63];
		dst[o++] = b64_alphabet[v >> 12 & 63];
		dst[o++] = i + 1 < n ? b64_alphabet[v >> 6 & 63] : '=';
		dst[o++] = i + 2 < n ? b64_alphabet[v & 63] : '=';
	}
	dst[o] = '\0';
}

static int b64_value(char c)
{
	const char *p = c ? strchr(b64_alphabet, c) : NULL;

	return p ? (int)(p - b64_alphabet) : -1;
}

long etcd_b64_decode(const char *src, size_t n, char *dst, size_t size)
{
	size_t o = 0;

	if (n % 4)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		size_t pad = 0;

		for (size_t k = 0; k < 4; k++) {
			if (src[i + k] == '=' && i + 4 == n && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad || (v[k] = b64_value(src[i + k])) < 0)
				return -1;
		}
		/* canonical only: the bits padding leaves over are zero */
		if ((pad == 1 && (v[2] & 3)) || (pad == 2 && (v[1] & 15)))
			return -1;
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
			     (uint32_t)v[3];
		unsigned char b[3] = { (unsigned char)(w >> 16), (unsigned char)(w >> 8),
				       (unsigned char)w };

		if (o + 3 - pad >= size)
			return -1;
		memcpy(dst + o, b, 3 - pad);
		o += 3 - pad;
	}
	dst[o] = '\0';
	return (long)o;
}

static char *printed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *printed(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&s, fmt, ap);
	va_end(ap);
	return r < 0 ? NULL : s;
}

#define B64_ROOM(n) (4 * (((n) + 2) / 3) + 1)

char *etcd_grant_body(int64_t ttl_s)
{
	return printed("{\"TTL\":\"%" PRId64 "\"}", ttl_s);
}

char *etcd_lease_body(int64_t lease_id)
{
	return printed("{\"ID\":\"%" PRId64 "\"}", lease_id);
}

char *etcd_campaign_body(const char *key, const char *value, int64_t lease_id)
{
	char k[B64_ROOM(ETCD_KEY_MAX)], v[B64_ROOM(ETCD_VALUE_MAX)];

	if (strlen(key) > ETCD_KEY_MAX || strlen(value) > ETCD_VALUE_MAX)
		return NULL;
	etcd_b64_encode(key, strlen(key), k);
	etcd_b64_encode(value, strlen(value), v);
	return printed("{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"result\":\"EQUAL\","
		       "\"create_revision\":\"0\"}],"
		       "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"%s\","
		       "\"lease\":\"%" PRId64 "\"}}],"
		       "\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}",
		       k, k, v, lease_id, k);
}

char *etcd_range_body(const char *key)
{
	char k[B64_ROOM(ETCD_KEY_MAX)];

	if (strlen(key) > ETCD_KEY_MAX)
		return NULL;
	etcd_b64_encode(key, strlen(key), k);
	return printed("{\"key\":\"%s\"}", k);
}

/* ---- reading ---- */

static int fail(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char *why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, ETCD_WHY_MAX, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

/* The document, an object that is not an error. */
static int doc(const char *text, size_t len, json_object **ret, char *why)
{
	struct jx_parse_error pe;
	json_object *root, *v;
	int r = jx_parse(text, len, &root, &pe);

	if (r == -ENOMEM)
		return fail(why, "out of memory");
	if (r < 0)
		return fail(why, "not JSON: %s at byte %zu", pe.why, pe.at);
	if (!json_object_is_type(root, json_type_object)) {
		json_object_put(root);
		return fail(why, "not a JSON object");
	}
	if (json_object_object_get_ex(root, "error", &v) ||
	    json_object_object_get_ex(root, "code", NULL)) {
		const char *msg = json_object_object_get_ex(root, "message", &v) ||
						  json_object_object_get_ex(root, "error", &v)
					  ? json_object_get_string(v)
					  : "";

		r = fail(why, "etcd: %.100s", msg ? msg : "");
		json_object_put(root);
		return r;
	}
	*ret = root;
	return 0;
}

/* An int64 member: a string of digits (the gateway's) or a JSON integer; absent: 0. */
static int int64_member(json_object *o, const char *key, int64_t *ret, char *why)
{
	int r = jx_get_int64_text(o, key, ret);

	if (r == -EINVAL)
		return fail(why, "%s: not an integer", key);
	if (r < 0)
		return fail(why, "%s: \"%.40s\" is not an integer", key, jx_get_string(o, key));
	return 0;
}

static int parse_kv(json_object *o, struct etcd_kv *kv, char *why)
{
	json_object *v;
	int r;

	memset(kv, 0, sizeof(*kv));
	if (!json_object_is_type(o, json_type_object))
		return fail(why, "kvs[0]: not an object");
	if ((r = int64_member(o, "create_revision", &kv->create_revision, why)) < 0 ||
	    (r = int64_member(o, "lease", &kv->lease, why)) < 0)
		return r;
	if (kv->create_revision <= 0)
		return fail(why, "kvs[0].create_revision: missing");
	if (json_object_object_get_ex(o, "value", &v)) {
		const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v)
									 : NULL;

		if (!s || etcd_b64_decode(s, strlen(s), kv->value, sizeof(kv->value)) < 0)
			return fail(why, "kvs[0].value: not base64 of at most %d bytes",
				    ETCD_VALUE_MAX);
	}
	kv->exists = true;
	return 0;
}

/* A range response's kvs: none, or the key. */
static int parse_kvs(json_object *o, struct etcd_kv *kv, char *why)
{
	json_object *arr;

	memset(kv, 0, sizeof(*kv));
	if (!json_object_object_get_ex(o, "kvs", &arr) || json_object_is_type(arr, json_type_null))
		return 0;
	if (!json_object_is_type(arr, json_type_array))
		return fail(why, "kvs: not an array");
	if (json_object_array_length(arr) == 0)
		return 0;
	return parse_kv(json_object_array_get_idx(arr, 0), kv, why);
}

int etcd_parse_grant(const char *text, size_t len, int64_t *ret_id, int64_t *ret_ttl, char *why)
{
	json_object *root;
	int r = doc(text, len, &root, why);

	if (r < 0)
		return r;
	if ((r = int64_member(root, "ID", ret_id, why)) == 0 &&
	    (r = int64_member(root, "TTL", ret_ttl, why)) == 0 && (*ret_id == 0 || *ret_ttl <= 0))
		r = fail(why, "a lease grant without an ID or a TTL");
	json_object_put(root);
	return r;
}

int etcd_parse_keepalive(const char *text, size_t len, int64_t *ret_ttl, char *why)
{
	json_object *root, *res;
	int r = doc(text, len, &root, why);

	if (r < 0)
		return r;
	if (!json_object_object_get_ex(root, "result", &res) ||
	    !json_object_is_type(res, json_type_object))
		r = fail(why, "a keepalive answer without a result");
	else
		r = int64_member(res, "TTL", ret_ttl, why);
	json_object_put(root);
	return r;
}

int etcd_parse_campaign(const char *text, size_t len, bool *ret_won, int64_t *ret_revision,
			struct etcd_kv *ret_kv, char *why)
{
	json_object *root, *v, *hdr, *rr;
	int r = doc(text, len, &root, why);

	if (r < 0)
		return r;
	memset(ret_kv, 0, sizeof(*ret_kv));
	*ret_won = json_object_object_get_ex(root, "succeeded", &v) &&
		   json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
	if (!json_object_object_get_ex(root, "header", &hdr) ||
	    !json_object_is_type(hdr, json_type_object)) {
		r = fail(why, "a transaction's answer without a header");
		goto out;
	}
	if ((r = int64_member(hdr, "revision", ret_revision, why)) < 0)
		goto out;
	if (*ret_revision <= 0) {
		r = fail(why, "header.revision: missing");
		goto out;
	}
	if (*ret_won)
		goto out;
	/* lost: the failure branch's range says who holds the key */
	if (!json_object_object_get_ex(root, "responses", &v) ||
	    !json_object_is_type(v, json_type_array) || json_object_array_length(v) != 1 ||
	    !json_object_object_get_ex(json_object_array_get_idx(v, 0), "response_range", &rr)) {
		r = fail(why, "a lost campaign's answer without the key's range");
		goto out;
	}
	r = parse_kvs(rr, ret_kv, why);
out:
	json_object_put(root);
	return r;
}

int etcd_parse_range(const char *text, size_t len, struct etcd_kv *ret_kv, char *why)
{
	json_object *root;
	int r = doc(text, len, &root, why);

	if (r < 0)
		return r;
	r = parse_kvs(root, ret_kv, why);
	json_object_put(root);
	return r;
}
