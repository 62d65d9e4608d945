// SPDX-License-Identifier: Apache-2.0
/*
 * The issuer's keys (auth/auth.h): a JWKS document read into libcjose's
 * keys, each with its kid. The document is the API server's
 * (/openid/v1/jwks); its keys are public, so nothing here is secret.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjose/jwk.h>
#include <json-c/json.h>

#include "auth/auth.h"
#include "auth/internal.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/util.h"

void auth_keys_free(struct auth_keys *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n; i++)
		cjose_jwk_release(k->key[i].jwk);
	free(k);
}

size_t auth_keys_count(const struct auth_keys *k)
{
	return k ? k->n : 0;
}

const char *auth_keys_id(const struct auth_keys *k)
{
	return k ? k->id : "";
}

const struct auth_key *auth_keys_find(const struct auth_keys *k, const char *kid)
{
	for (size_t i = 0; k && i < k->n; i++)
		if (strcmp(k->key[i].kid, kid) == 0)
			return &k->key[i];
	return NULL;
}

/*
 * A base64url string of from..to bytes once decoded. libcjose asserts (the
 * process ends) on some malformed key material, so what reaches it is
 * checked first.
 */
static bool b64u_ok(json_object *jk, const char *key, size_t from, size_t to)
{
	const char *v = jx_get_string(jk, key);
	size_t n;

	if (!v)
		return false;
	n = strlen(v);
	if (n % 4 == 1 || n * 3 / 4 < from || n * 3 / 4 > to)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= 'a' && v[i] <= 'z') ||
		      (v[i] >= '0' && v[i] <= '9') || v[i] == '-' || v[i] == '_'))
			return false;
	return true;
}

/* The public members of an RSA key (2048 to 8192 bits) or an EC key of a NIST curve. */
static const char *material_wrong(json_object *jk)
{
	const char *kty = jx_get_string(jk, "kty"), *crv = jx_get_string(jk, "crv");
	size_t c;

	if (jx_get(jk, "d") || jx_get(jk, "p") || jx_get(jk, "k"))
		return "holds private or symmetric key material";
	if (kty && strcmp(kty, "RSA") == 0)
		return b64u_ok(jk, "n", 256, 1024) && b64u_ok(jk, "e", 1, 8)
			       ? NULL
			       : "n and e are not a 2048- to 8192-bit RSA key in base64url";
	if (!kty || strcmp(kty, "EC") != 0)
		return "its kty is neither RSA nor EC (the issuer signs with RSA or EC keys)";
	c = !crv			? 0
	    : strcmp(crv, "P-256") == 0 ? 32
	    : strcmp(crv, "P-384") == 0 ? 48
	    : strcmp(crv, "P-521") == 0 ? 66
					: 0;
	if (!c)
		return "crv is not P-256, P-384 or P-521";
	return b64u_ok(jk, "x", c, c + 1) && b64u_ok(jk, "y", c, c + 1)
		       ? NULL
		       : "x and y are not a point of its curve in base64url";
}

/* One member of "keys": imported, or skipped (0) when it is not a signing key. */
static int take_key(struct auth_keys *k, json_object *jk, size_t i, struct tg_err *e)
{
	const char *kid = jx_get_string(jk, "kid"), *use = jx_get_string(jk, "use");
	const char *alg = jx_get_string(jk, "alg");
	const char *text, *why;
	cjose_err cerr = { 0 };
	cjose_jwk_t *jwk;
	struct auth_key *key;

	if (!json_object_is_type(jk, json_type_object))
		return tg_fail(e, CNI_ERR_DECODE, -EINVAL, "keys[%zu] is not an object", i);
	if (use && strcmp(use, "sig") != 0)
		return 0;
	if (!kid || !kid[0] || strlen(kid) >= sizeof(key->kid))
		return tg_fail(
			e, CNI_ERR_DECODE, -EINVAL,
			"keys[%zu] has no kid (or one over %zu bytes): tokens name their key "
			"by it",
			i, sizeof(key->kid) - 1);
	if (auth_keys_find(k, kid))
		return tg_fail(e, CNI_ERR_DECODE, -EINVAL,
			       "keys[%zu]: kid \"%.64s\" is there twice", i, kid);
	if (alg && strlen(alg) >= sizeof(key->alg))
		return tg_fail(e, CNI_ERR_DECODE, -EINVAL,
			       "keys[%zu]: alg \"%.16s...\" is no algorithm", i, alg);
	if (k->n == AUTH_KEYS_MAX)
		return tg_fail(e, CNI_ERR_DECODE, -E2BIG, "more than %d signing keys",
			       AUTH_KEYS_MAX);
	if ((why = material_wrong(jk)))
		return tg_fail(e, CNI_ERR_DECODE, -EINVAL, "keys[%zu] (kid \"%.64s\"): %s", i, kid,
			       why);
	text = json_object_to_json_string_ext(jk, JSON_C_TO_STRING_PLAIN);
	jwk = cjose_jwk_import(text, strlen(text), &cerr);
	if (!jwk)
		return tg_fail(e, CNI_ERR_DECODE, -EINVAL, "keys[%zu] (kid \"%.64s\"): %s", i, kid,
			       cerr.message ? cerr.message : "not a key libcjose reads");
	key = &k->key[k->n];
	key->jwk = jwk;
	key->kty = cjose_jwk_get_kty(jwk, NULL);
	if (key->kty != CJOSE_JWK_KTY_RSA && key->kty != CJOSE_JWK_KTY_EC) {
		cjose_jwk_release(jwk);
		return tg_fail(
			e, CNI_ERR_DECODE, -EINVAL,
			"keys[%zu] (kid \"%.64s\") is a symmetric key: the issuer signs with "
			"RSA or EC keys",
			i, kid);
	}
	snprintf(key->kid, sizeof(key->kid), "%s", kid);
	snprintf(key->alg, sizeof(key->alg), "%s", alg ? alg : "");
	k->n++;
	k->hash = hash_fnv1a64(text, strlen(text) + 1, k->hash);
	return 0;
}

int auth_keys_parse(const char *json, size_t len, struct auth_keys **ret, struct tg_err *e)
{
	struct jx_parse_error pe = { 0 };
	json_object *root = NULL, *keys;
	struct auth_keys *k;
	size_t n;
	int r;

	if (len > AUTH_JWKS_MAX)
		return tg_fail(e, CNI_ERR_DECODE, -E2BIG,
			       "a JWKS document of %zu bytes: at most %d", len, AUTH_JWKS_MAX);
	r = jx_parse(json, len, &root, &pe);
	if (r < 0)
		return r == -ENOMEM ? r
				    : tg_fail(e, CNI_ERR_DECODE, r, "not JSON: %s at byte %zu",
					      pe.why, pe.at);
	keys = jx_get(root, "keys");
	if (!json_object_is_type(keys, json_type_array)) {
		json_object_put(root);
		return tg_fail(e, CNI_ERR_DECODE, -EINVAL,
			       "not a JWKS document: no \"keys\" array");
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		json_object_put(root);
		return -ENOMEM;
	}
	k->hash = FNV1A64_INIT;
	n = json_object_array_length(keys);
	for (size_t i = 0; i < n; i++) {
		r = take_key(k, json_object_array_get_idx(keys, i), i, e);
		if (r < 0) {
			auth_keys_free(k);
			json_object_put(root);
			return r;
		}
	}
	json_object_put(root);
	if (!k->n) {
		auth_keys_free(k);
		return tg_fail(e, CNI_ERR_DECODE, -ENOKEY, "the JWKS document has no signing key");
	}
	snprintf(k->id, sizeof(k->id), "%016llx", (unsigned long long)k->hash);
	*ret = k;
	return 0;
}
