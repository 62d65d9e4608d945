// SPDX-License-Identifier: Apache-2.0
/*
 * One token verified (auth/auth.h): its header's algorithm and key, its
 * signature (libcjose), then its claims (json-c), in that order, so that
 * nothing of a token is believed before its signature is.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjose/header.h>
#include <cjose/jws.h>
#include <json-c/json.h>

#include "auth/auth.h"
#include "auth/internal.h"
#include "lib/jsonx.h"
#include "lib/k8sname.h"
#include "lib/util.h"

const char *const auth_result_names[AUTH_RESULTS] = {
	[AUTH_OK] = "ok",
	[AUTH_MALFORMED] = "malformed",
	[AUTH_ALGORITHM] = "algorithm",
	[AUTH_UNKNOWN_KEY] = "unknown-key",
	[AUTH_SIGNATURE] = "signature",
	[AUTH_ISSUER] = "issuer",
	[AUTH_AUDIENCE_WRONG] = "audience",
	[AUTH_EXPIRED] = "expired",
	[AUTH_NOT_YET] = "not-yet-valid",
	[AUTH_SUBJECT] = "subject",
	[AUTH_NO_NODE] = "no-node",
};

/* The algorithms an issuer signs service-account tokens with, and their keys' type. */
static const struct {
	const char *alg;
	cjose_jwk_kty_t kty;
} algs[] = {
	{ "RS256", CJOSE_JWK_KTY_RSA }, { "RS384", CJOSE_JWK_KTY_RSA },
	{ "RS512", CJOSE_JWK_KTY_RSA }, { "PS256", CJOSE_JWK_KTY_RSA },
	{ "PS384", CJOSE_JWK_KTY_RSA }, { "PS512", CJOSE_JWK_KTY_RSA },
	{ "ES256", CJOSE_JWK_KTY_EC },	{ "ES384", CJOSE_JWK_KTY_EC },
	{ "ES512", CJOSE_JWK_KTY_EC },
};

static enum auth_result say(enum auth_result r, char *why, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static enum auth_result say(enum auth_result r, char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	if (why && size) {
		va_start(ap, fmt);
		vsnprintf(why, size, fmt, ap);
		va_end(ap);
	}
	return r;
}

/* Three base64url parts, two dots: anything else is no compact JWS. */
static bool compact_shape(const char *t, size_t len)
{
	unsigned dots = 0;

	for (size_t i = 0; i < len; i++) {
		char c = t[i];

		if (c == '.')
			dots++;
		else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			   (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return false;
	}
	return dots == 2;
}

static bool audience_has(json_object *aud, const char *want)
{
	if (json_object_is_type(aud, json_type_string))
		return strcmp(json_object_get_string(aud), want) == 0;
	if (!json_object_is_type(aud, json_type_array))
		return false;
	for (size_t i = 0; i < json_object_array_length(aud); i++) {
		json_object *a = json_object_array_get_idx(aud, i);

		if (json_object_is_type(a, json_type_string) &&
		    strcmp(json_object_get_string(a), want) == 0)
			return true;
	}
	return false;
}

/* A claim of seconds: 1 with *ret, 0 absent, -1 not an integer. */
static int seconds_claim(json_object *claims, const char *key, int64_t *ret)
{
	json_object *v = jx_get(claims, key);

	if (!v)
		return 0;
	if (!json_object_is_type(v, json_type_int))
		return -1;
	*ret = json_object_get_int64(v);
	return 1;
}

static enum auth_result check_claims(json_object *c, const struct auth_want *w, int64_t now,
				     struct auth_identity *ret, char *why, size_t size)
{
	const char *iss = jx_get_string(c, "iss"), *sub = jx_get_string(c, "sub"), *node;
	int64_t exp = 0, nbf = 0, iat = 0;
	int has_exp = seconds_claim(c, "exp", &exp), has_nbf = seconds_claim(c, "nbf", &nbf);
	int has_iat = seconds_claim(c, "iat", &iat);
	json_object *k8s = jx_get(c, "kubernetes.io"), *jnode;

	if (!iss || strcmp(iss, w->issuer) != 0)
		return say(AUTH_ISSUER, why, size, "issuer \"%.64s\", not \"%.64s\"",
			   iss ? iss : "(none)", w->issuer);
	if (!audience_has(jx_get(c, "aud"), w->audience))
		return say(AUTH_AUDIENCE_WRONG, why, size, "not for the audience \"%s\"",
			   w->audience);
	if (has_exp != 1 || has_nbf < 0 || has_iat < 0)
		return say(AUTH_MALFORMED, why, size,
			   "exp, nbf or iat is not seconds (or exp is "
			   "missing)");
	if (now >= exp)
		return say(AUTH_EXPIRED, why, size, "expired %lld s ago", (long long)(now - exp));
	if ((has_nbf && nbf > now + AUTH_SKEW_S) || (has_iat && iat > now + AUTH_SKEW_S))
		return say(AUTH_NOT_YET, why, size, "not valid before %lld (now %lld)",
			   (long long)(has_nbf ? nbf : iat), (long long)now);
	if (!sub || strcmp(sub, w->subject) != 0)
		return say(AUTH_SUBJECT, why, size, "the token of \"%.96s\", not of \"%.96s\"",
			   sub ? sub : "(none)", w->subject);
	jnode = json_object_is_type(k8s, json_type_object) ? jx_get(k8s, "node") : NULL;
	node = json_object_is_type(jnode, json_type_object) ? jx_get_string(jnode, "name") : NULL;
	if (!node || !k8s_dns_subdomain(node, strlen(node)))
		return say(AUTH_NO_NODE, why, size,
			   "no node name (kubernetes.io.node.name): not a pod's bound token");
	snprintf(ret->node, sizeof(ret->node), "%s", node);
	ret->exp = exp;
	return AUTH_OK;
}

enum auth_result auth_verify(const struct auth_keys *k, const struct auth_want *w,
			     const char *token, size_t len, int64_t now, struct auth_identity *ret,
			     char *why, size_t size)
{
	cjose_err cerr = { 0 };
	cjose_jws_t *jws;
	cjose_header_t *hdr;
	const char *alg, *kid;
	const struct auth_key *key = NULL;
	enum auth_result r;
	uint8_t *payload = NULL;
	size_t plen = 0, a;
	json_object *claims = NULL;
	struct jx_parse_error pe = { 0 };

	if (!len || len > AUTH_TOKEN_MAX || !compact_shape(token, len))
		return say(AUTH_MALFORMED, why, size, "not a compact JWS of at most %d bytes",
			   AUTH_TOKEN_MAX);
	jws = cjose_jws_import(token, len, &cerr);
	if (!jws)
		return say(AUTH_MALFORMED, why, size, "not a JWS: %s",
			   cerr.message ? cerr.message : "libcjose refused it");
	hdr = cjose_jws_get_protected(jws);
	alg = hdr ? cjose_header_get(hdr, CJOSE_HDR_ALG, NULL) : NULL;
	kid = hdr ? cjose_header_get(hdr, CJOSE_HDR_KID, NULL) : NULL;
	for (a = 0; alg && a < ARRAY_SIZE(algs); a++)
		if (strcmp(algs[a].alg, alg) == 0)
			break;
	if (!alg || a == ARRAY_SIZE(algs)) {
		r = say(AUTH_ALGORITHM, why, size,
			"algorithm \"%.16s\": an issuer signs with RS, PS "
			"or ES algorithms",
			alg ? alg : "(none)");
		goto out;
	}
	if (!kid || !(key = auth_keys_find(k, kid))) {
		r = say(AUTH_UNKNOWN_KEY, why, size, "key \"%.64s\" is not one of the issuer's",
			kid ? kid : "(no kid)");
		goto out;
	}
	if (key->kty != algs[a].kty || (key->alg[0] && strcmp(key->alg, alg) != 0)) {
		r = say(AUTH_ALGORITHM, why, size, "algorithm %s is not key \"%.64s\"'s", alg, kid);
		goto out;
	}
	if (!cjose_jws_verify(jws, key->jwk, &cerr)) {
		r = say(AUTH_SIGNATURE, why, size,
			"the signature does not verify with key \"%.64s\"", kid);
		goto out;
	}
	if (!cjose_jws_get_plaintext(jws, &payload, &plen, &cerr) ||
	    jx_parse((const char *)payload, plen, &claims, &pe) < 0 ||
	    !json_object_is_type(claims, json_type_object)) {
		r = say(AUTH_MALFORMED, why, size, "the claims are not a JSON object");
		goto out;
	}
	r = check_claims(claims, w, now, ret, why, size);
out:
	json_object_put(claims);
	cjose_jws_release(jws);
	return r;
}

const char *auth_bearer(const char *authorization, size_t *ret_len)
{
	const char *t;
	size_t n;

	if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return NULL;
	for (t = authorization + 7; *t == ' '; t++)
		;
	n = strlen(t);
	while (n && t[n - 1] == ' ')
		n--;
	if (!n)
		return NULL;
	*ret_len = n;
	return t;
}
