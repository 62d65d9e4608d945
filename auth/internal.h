/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_AUTH_INTERNAL_H
#define TG_AUTH_INTERNAL_H

/* Between auth/'s files: the key set (keys.c) that token.c verifies with. */

#include <stdint.h>

#include <cjose/jwk.h>

#include "auth/auth.h"

struct auth_key {
	char kid[128];
	char alg[16]; /* the JWKS's "alg" for the key; "": any of its type */
	cjose_jwk_kty_t kty;
	cjose_jwk_t *jwk;
};

struct auth_keys {
	size_t n;
	uint64_t hash; /* over each key's JSON */
	char id[17];
	struct auth_key key[AUTH_KEYS_MAX];
};

/* The key named kid; NULL: none. */
const struct auth_key *auth_keys_find(const struct auth_keys *k, const char *kid);

#endif
