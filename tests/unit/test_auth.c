// SPDX-License-Identifier: Apache-2.0
/*
 * auth/: a node's token verified offline. Keys are made and tokens signed
 * here with libcjose (tests/integration/sa_token.py mints them
 * independently, with PyJWT, as the API server does). Each refusal is
 * shown against a token that differs from an accepted one in that one
 * thing, so that none passes for another reason.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjose/cjose.h>

#include "auth/auth.h"
#include "lib/err.h"

#define ISS "https://kubernetes.default.svc.cluster.local"
#define SUB "system:serviceaccount:kube-system:tollgate"
#define NOW 1800000000LL

static cjose_jwk_t *rsa, *rsa_other, *ec;

static const struct auth_want want = { ISS, AUTH_AUDIENCE, SUB };

static cjose_jwk_t *with_kid(cjose_jwk_t *k, const char *kid)
{
	assert_non_null(k);
	assert_true(cjose_jwk_set_kid(k, kid, strlen(kid), NULL));
	return k;
}

static int setup(void **state)
{
	static const uint8_t e[] = { 1, 0, 1 };

	(void)state;
	rsa = with_kid(cjose_jwk_create_RSA_random(2048, e, sizeof(e), NULL), "rsa-1");
	rsa_other = with_kid(cjose_jwk_create_RSA_random(2048, e, sizeof(e), NULL), "rsa-1");
	ec = with_kid(cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, NULL), "ec-1");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	cjose_jwk_release(rsa);
	cjose_jwk_release(rsa_other);
	cjose_jwk_release(ec);
	return 0;
}

/* The JWKS of the public halves of keys (NULL-terminated), with extra members per key. */
static struct auth_keys *keys_of(const char *extra, ...)
{
	char doc[16384] = "{\"keys\":[";
	struct tg_err e = { 0 };
	struct auth_keys *k = NULL;
	cjose_jwk_t *j;
	va_list ap;
	int r;

	va_start(ap, extra);
	for (int i = 0; (j = va_arg(ap, cjose_jwk_t *)); i++) {
		char *pub = cjose_jwk_to_json(j, false, NULL);

		assert_non_null(pub);
		pub[strlen(pub) - 1] = '\0'; /* the closing brace: extra goes before it */
		snprintf(doc + strlen(doc), sizeof(doc) - strlen(doc), "%s%s%s}", i ? "," : "", pub,
			 extra);
		free(pub);
	}
	va_end(ap);
	strcat(doc, "]}");
	r = auth_keys_parse(doc, strlen(doc), &k, &e);
	if (r < 0)
		fail_msg("%s: %s", doc, e.msg);
	return k;
}

/* A token signed by key with alg, its claims the JSON given. */
static char *sign(cjose_jwk_t *key, const char *alg, const char *kid, const char *claims)
{
	cjose_header_t *h = cjose_header_new(NULL);
	cjose_jws_t *jws;
	const char *ser = NULL;
	char *out;

	assert_true(cjose_header_set(h, CJOSE_HDR_ALG, alg, NULL));
	if (kid)
		assert_true(cjose_header_set(h, CJOSE_HDR_KID, kid, NULL));
	jws = cjose_jws_sign(key, h, (const uint8_t *)claims, strlen(claims), NULL);
	assert_non_null(jws);
	assert_true(cjose_jws_export(jws, &ser, NULL));
	out = strdup(ser);
	cjose_jws_release(jws);
	cjose_header_release(h);
	return out;
}

/* The claims of the agent's token on node `node`, with one member replaced (or added). */
static char *claims(char *buf, size_t size, const char *iss, const char *aud, long long exp,
		    const char *sub, const char *node)
{
	snprintf(buf, size,
		 "{\"aud\":%s,\"exp\":%lld,\"iat\":%lld,\"iss\":\"%s\",\"nbf\":%lld,"
		 "\"kubernetes.io\":{\"namespace\":\"kube-system\",%s\"pod\":{\"name\":"
		 "\"tollgate-x1\",\"uid\":\"u1\"},\"serviceaccount\":{\"name\":\"tollgate\","
		 "\"uid\":\"u2\"}},\"sub\":\"%s\"}",
		 aud, exp, exp - 3600, iss, exp - 3600, node, sub);
	return buf;
}

#define GOOD_NODE "\"node\":{\"name\":\"node-7\",\"uid\":\"u3\"},"

static enum auth_result verify(const struct auth_keys *k, const char *tok, struct auth_identity *id,
			       char *why)
{
	return auth_verify(k, &want, tok, strlen(tok), NOW, id, why, 256);
}

static void check(const struct auth_keys *k, cjose_jwk_t *key, const char *alg, const char *kid,
		  const char *cl, enum auth_result expect)
{
	char *tok = sign(key, alg, kid, cl), why[256] = "";
	struct auth_identity id = { 0 };
	enum auth_result r = verify(k, tok, &id, why);

	if (r != expect)
		fail_msg("%s: got %s (%s), expected %s", cl, auth_result_names[r], why,
			 auth_result_names[expect]);
	if (r == AUTH_OK)
		assert_string_equal(id.node, "node-7");
	free(tok);
}

static void test_accepts_and_refuses_each_claim(void **state)
{
	struct auth_keys *k = keys_of("", rsa, ec, NULL);
	char c[2048];

	(void)state;
	assert_int_equal(auth_keys_count(k), 2);
	check(k, rsa, "RS256", "rsa-1",
	      claims(c, sizeof(c), ISS, "[\"" AUTH_AUDIENCE "\"]", NOW + 600, SUB, GOOD_NODE),
	      AUTH_OK);
	check(k, rsa, "PS256", "rsa-1",
	      claims(c, sizeof(c), ISS, "\"" AUTH_AUDIENCE "\"", NOW + 600, SUB, GOOD_NODE),
	      AUTH_OK);
	check(k, ec, "ES256", "ec-1",
	      claims(c, sizeof(c), ISS, "[\"x\",\"" AUTH_AUDIENCE "\"]", NOW + 600, SUB, GOOD_NODE),
	      AUTH_OK);
	/* each claim wrong alone */
	check(k, rsa, "RS256", "rsa-1",
	      claims(c, sizeof(c), "https://evil", "[\"" AUTH_AUDIENCE "\"]", NOW + 600, SUB,
		     GOOD_NODE),
	      AUTH_ISSUER);
	check(k, rsa, "RS256", "rsa-1",
	      claims(c, sizeof(c), ISS, "[\"https://kubernetes.default.svc\"]", NOW + 600, SUB,
		     GOOD_NODE),
	      AUTH_AUDIENCE_WRONG);
	check(k, rsa, "RS256", "rsa-1",
	      claims(c, sizeof(c), ISS, "[\"" AUTH_AUDIENCE "\"]", NOW, SUB, GOOD_NODE),
	      AUTH_EXPIRED);
	check(k, rsa, "RS256", "rsa-1",
	      claims(c, sizeof(c), ISS, "[\"" AUTH_AUDIENCE "\"]", NOW + 3600 + AUTH_SKEW_S + 5,
		     SUB, GOOD_NODE),
	      AUTH_NOT_YET);
	/* any pod can have a token of this audience projected: its own account's */
	check(k, rsa, "RS256", "rsa-1",
	      claims(c, sizeof(c), ISS, "[\"" AUTH_AUDIENCE "\"]", NOW + 600,
		     "system:serviceaccount:team-a:default", GOOD_NODE),
	      AUTH_SUBJECT);
	check(k, rsa, "RS256", "rsa-1",
	      claims(c, sizeof(c), ISS, "[\"" AUTH_AUDIENCE "\"]", NOW + 600, SUB, ""),
	      AUTH_NO_NODE);
	check(k, rsa, "RS256", "rsa-1",
	      claims(c, sizeof(c), ISS, "[\"" AUTH_AUDIENCE "\"]", NOW + 600, SUB,
		     "\"node\":{\"name\":\"Node_7\"},"),
	      AUTH_NO_NODE);
	/* the key: another key under the issuer's kid, a kid it does not have, none */
	check(k, rsa_other, "RS256", "rsa-1",
	      claims(c, sizeof(c), ISS, "[\"" AUTH_AUDIENCE "\"]", NOW + 600, SUB, GOOD_NODE),
	      AUTH_SIGNATURE);
	check(k, rsa, "RS256", "rsa-2",
	      claims(c, sizeof(c), ISS, "[\"" AUTH_AUDIENCE "\"]", NOW + 600, SUB, GOOD_NODE),
	      AUTH_UNKNOWN_KEY);
	check(k, rsa, "RS256", NULL,
	      claims(c, sizeof(c), ISS, "[\"" AUTH_AUDIENCE "\"]", NOW + 600, SUB, GOOD_NODE),
	      AUTH_UNKNOWN_KEY);
	/* an EC key's kid with an RSA algorithm */
	check(k, rsa, "RS256", "ec-1",
	      claims(c, sizeof(c), ISS, "[\"" AUTH_AUDIENCE "\"]", NOW + 600, SUB, GOOD_NODE),
	      AUTH_ALGORITHM);
	auth_keys_free(k);
}

static void test_no_algorithm_confusion(void **state)
{
	struct auth_keys *k = keys_of("", rsa, NULL);
	char c[2048], tok[4096], *h, *p, *s;
	char *good;
	size_t hlen = 0;
	cjose_jwk_t *hmac;

	(void)state;
	claims(c, sizeof(c), ISS, "[\"" AUTH_AUDIENCE "\"]", NOW + 600, SUB, GOOD_NODE);
	good = sign(rsa, "RS256", "rsa-1", c);
	/* alg none: the good token's payload, a header that says none, no signature */
	h = cjose_base64url_encode((const uint8_t *)"{\"alg\":\"none\",\"kid\":\"rsa-1\"}", 29, &s,
				   &hlen, NULL)
		    ? s
		    : NULL;
	assert_non_null(h);
	p = strchr(good, '.');
	snprintf(tok, sizeof(tok), "%s%.*s.", h, (int)(strrchr(good, '.') - p), p);
	free(h);
	assert_int_not_equal(verify(k, tok, &(struct auth_identity){ 0 }, NULL), AUTH_OK);
	/* HS256 with the public key's bytes as the secret: refused before any HMAC */
	hmac = with_kid(cjose_jwk_create_oct_spec(
				(const uint8_t *)"0123456789abcdef0123456789abcdef", 32, NULL),
			"rsa-1");
	s = sign(hmac, "HS256", "rsa-1", c);
	assert_int_equal(verify(k, s, &(struct auth_identity){ 0 }, NULL), AUTH_ALGORITHM);
	free(s);
	cjose_jwk_release(hmac);
	/* a byte of the signature changed; the payload changed under the good signature */
	s = strdup(good);
	s[strlen(s) - 2] = s[strlen(s) - 2] == 'A' ? 'B' : 'A';
	assert_int_equal(verify(k, s, &(struct auth_identity){ 0 }, NULL), AUTH_SIGNATURE);
	free(s);
	/* control: the good token itself */
	assert_int_equal(verify(k, good, &(struct auth_identity){ 0 }, NULL), AUTH_OK);
	/* not a JWS at all */
	assert_int_equal(verify(k, "abc", &(struct auth_identity){ 0 }, NULL), AUTH_MALFORMED);
	assert_int_equal(verify(k, "a.b.c d", &(struct auth_identity){ 0 }, NULL), AUTH_MALFORMED);
	free(good);
	auth_keys_free(k);
}

/* 345 base64url characters: no whole number of bytes */
#define N5 "AAAAA"
#define N345                                                                                      \
	N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 \
		N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5  \
			N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5 N5

static void test_key_sets(void **state)
{
	struct tg_err e = { 0 };
	struct auth_keys *k = NULL, *k2;
	char *pub = cjose_jwk_to_json(rsa, false, NULL), doc[8192];

	(void)state;
	/* a JWK's "alg" binds the key to it */
	k = keys_of(",\"alg\":\"RS256\",\"use\":\"sig\"", rsa, NULL);
	{
		char c[2048];

		check(k, rsa, "RS256", "rsa-1",
		      claims(c, sizeof(c), ISS, "\"" AUTH_AUDIENCE "\"", NOW + 600, SUB, GOOD_NODE),
		      AUTH_OK);
		check(k, rsa, "PS256", "rsa-1",
		      claims(c, sizeof(c), ISS, "\"" AUTH_AUDIENCE "\"", NOW + 600, SUB, GOOD_NODE),
		      AUTH_ALGORITHM);
	}
	/* the set's id follows its keys, not their order of arrival alone */
	k2 = keys_of("", rsa, ec, NULL);
	assert_string_not_equal(auth_keys_id(k), auth_keys_id(k2));
	auth_keys_free(k2);
	auth_keys_free(k);
	/* refusals, each naming what is wrong */
	static const char *const bad[][2] = {
		{ "[]", "no \"keys\"" },
		{ "{\"keys\":[]}", "no signing key" },
		{ "{\"keys\":[{\"kty\":\"oct\",\"kid\":\"s\",\"k\":\"AAAA\"}]}", "symmetric" },
		{ "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"}]}", "no kid" },
		{ "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"x\",\"n\":\"!!\",\"e\":\"AQAB\"}]}",
		  "keys[0]" },
		{ "{\"keys\":[1]}", "not an object" },
		/* a modulus that is no base64url (libcjose asserts on such) */
		{ "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"x\",\"e\":\"AQAB\",\"n\":\"" N345 "\"}]}",
		  "not a 2048- to 8192-bit RSA key" },
		{ "{\"keys\":[{\"kty\":\"EC\",\"kid\":\"x\",\"crv\":\"P-256\",\"x\":\"AAAA\",\"y\":\"AAAA\"}]}",
		  "not a point" },
		{ "{\"keys\":[{\"kty\":\"EC\",\"kid\":\"x\",\"crv\":\"secp256k1\"}]}", "crv" },
		{ "{\"keys\":", "not JSON" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e = (struct tg_err){ 0 };
		k = NULL;
		assert_true(auth_keys_parse(bad[i][0], strlen(bad[i][0]), &k, &e) < 0);
		assert_null(k);
		if (!strstr(e.msg, bad[i][1]))
			fail_msg("%s: \"%s\" does not say \"%s\"", bad[i][0], e.msg, bad[i][1]);
	}
	/* a kid twice; an encryption key skipped */
	snprintf(doc, sizeof(doc), "{\"keys\":[%s,%s]}", pub, pub);
	e = (struct tg_err){ 0 };
	assert_true(auth_keys_parse(doc, strlen(doc), &k, &e) < 0);
	assert_non_null(strstr(e.msg, "twice"));
	snprintf(doc, sizeof(doc),
		 "{\"keys\":[%s,{\"kty\":\"RSA\",\"use\":\"enc\",\"kid\":\"e\"}]}", pub);
	assert_int_equal(auth_keys_parse(doc, strlen(doc), &k, &e), 0);
	assert_int_equal(auth_keys_count(k), 1);
	auth_keys_free(k);
	free(pub);
}

static void test_cache(void **state)
{
	struct auth_cache *c = auth_cache_new(3);
	struct auth_identity id = { .node = "n1", .exp = NOW + 100 }, got = { 0 };
	char tok[4][8] = { "tok-a", "tok-b", "tok-c", "tok-d" };

	(void)state;
	assert_non_null(c);
	assert_false(auth_cache_find(c, tok[0], 5, NOW, &got));
	assert_int_equal(auth_cache_put(c, tok[0], 5, &id, NOW), 0);
	assert_true(auth_cache_find(c, tok[0], 5, NOW, &got));
	assert_string_equal(got.node, "n1");
	/* another token of the same node is another entry; a prefix is not the token */
	assert_false(auth_cache_find(c, tok[0], 4, NOW, NULL));
	assert_false(auth_cache_find(c, tok[1], 5, NOW, NULL));
	/* expired: not found */
	assert_false(auth_cache_find(c, tok[0], 5, NOW + 100, NULL));
	/* full: the one that expires first makes room */
	id.exp = NOW + 50;
	assert_int_equal(auth_cache_put(c, tok[1], 5, &id, NOW), 0);
	id.exp = NOW + 200;
	assert_int_equal(auth_cache_put(c, tok[2], 5, &id, NOW), 0);
	assert_int_equal(auth_cache_count(c), 3);
	assert_int_equal(auth_cache_put(c, tok[3], 5, &id, NOW), 0);
	assert_int_equal(auth_cache_count(c), 3);
	assert_false(auth_cache_find(c, tok[1], 5, NOW, NULL));
	assert_true(auth_cache_find(c, tok[0], 5, NOW, NULL));
	assert_true(auth_cache_find(c, tok[3], 5, NOW, NULL));
	/* a new key set: every token verified again */
	auth_cache_clear(c);
	assert_int_equal(auth_cache_count(c), 0);
	assert_false(auth_cache_find(c, tok[3], 5, NOW, NULL));
	auth_cache_free(c);
}

static void test_bearer(void **state)
{
	size_t n = 0;
	const char *t;

	(void)state;
	t = auth_bearer("Bearer abc.def.ghi", &n);
	assert_non_null(t);
	assert_int_equal(n, 11);
	t = auth_bearer("bearer   abc ", &n);
	assert_non_null(t);
	assert_int_equal(n, 3);
	assert_null(auth_bearer("Basic dXNlcjpwYXNz", &n));
	assert_null(auth_bearer("Bearer ", &n));
	assert_null(auth_bearer(NULL, &n));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepts_and_refuses_each_claim),
		cmocka_unit_test(test_no_algorithm_confusion),
		cmocka_unit_test(test_key_sets),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_bearer),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
