// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer: what a stranger sends the allocator to be believed (any
 * bytes: the Authorization header is the client's, the JWKS document
 * whatever answers at --jwks's address): a bearer header, a token verified
 * against a set of one RSA and one EC key, a JWKS document read. Nothing a
 * forged token holds is ever taken: only a token these keys signed could
 * be, and the fuzzer cannot sign.
 */
#include <stdlib.h>
#include <string.h>

#include <cjose/cjose.h>

#include "auth/auth.h"
#include "lib/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct auth_keys *keys;

static void make_keys(void)
{
	static const uint8_t e[] = { 1, 0, 1 };
	cjose_jwk_t *k[2] = { cjose_jwk_create_RSA_random(2048, e, sizeof(e), NULL),
			      cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, NULL) };
	char doc[8192] = "{\"keys\":[";
	struct tg_err err = { 0 };

	for (int i = 0; i < 2; i++) {
		char kid[8], *pub;

		snprintf(kid, sizeof(kid), "k%d", i);
		if (!k[i] || !cjose_jwk_set_kid(k[i], kid, strlen(kid), NULL) ||
		    !(pub = cjose_jwk_to_json(k[i], false, NULL)))
			abort();
		strcat(doc, i ? "," : "");
		strcat(doc, pub);
		free(pub);
		cjose_jwk_release(k[i]);
	}
	strcat(doc, "]}");
	if (auth_keys_parse(doc, strlen(doc), &keys, &err) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct auth_want want = { AUTH_DEFAULT_ISSUER, AUTH_AUDIENCE, AUTH_DEFAULT_SUBJECT };
	struct auth_identity id = { 0 };
	struct auth_keys *k = NULL;
	struct tg_err e = { 0 };
	char why[256], *text;
	size_t n = 0;
	const char *tok;

	if (!keys)
		make_keys();
	if (auth_verify(keys, &want, (const char *)data, size, 1800000000, &id, why, sizeof(why)) ==
	    AUTH_OK)
		abort(); /* the fuzzer signed nothing */
	if (auth_keys_parse((const char *)data, size, &k, &e) == 0) {
		if (!auth_keys_count(k) || auth_keys_count(k) > AUTH_KEYS_MAX)
			abort();
		auth_keys_free(k);
	}
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	tok = auth_bearer(text, &n);
	if (tok && (!n || tok + n > text + size))
		abort();
	free(text);
	return 0;
}
