/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_AUTH_H
#define TG_AUTH_H

/*
 * Who a node's report comes from: a bound service-account token that the
 * API server minted for the node's agent (projected with the audience
 * AUTH_AUDIENCE), verified offline against the cluster's service-account
 * issuer keys (a JWKS document, as the API server publishes it at
 * /openid/v1/jwks).
 *
 * A token proves a node only when all of it holds: the signature by a key
 * of the set (RS256/384/512, PS256/384/512 or ES256/384/512, the key's type
 * matching; libcjose checks the signature, OpenSSL under it), the issuer,
 * the audience, its time (nbf <= now < exp), the subject (the agents'
 * service account: any pod can have a token of any audience projected, so
 * the audience alone proves nothing) and the node claim
 * (kubernetes.io -> node -> name) that the API server writes for a pod's
 * own node. The token's exp bounds what it proves; the API server revokes
 * nothing offline, so tokens are asked short (an hour).
 *
 * Verifying costs a signature check (tens of microseconds for RSA-2048):
 * a token is verified once, then found in a cache keyed by its SHA-256,
 * until its exp or a new key set.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUTH_AUDIENCE "tollgate-allocator"
#define AUTH_DEFAULT_ISSUER "https://kubernetes.default.svc.cluster.local"
#define AUTH_DEFAULT_SUBJECT "system:serviceaccount:kube-system:tollgate"
#define AUTH_KEYS_MAX 64     /* keys in one JWKS document */
#define AUTH_JWKS_MAX 262144 /* bytes of a JWKS document */
#define AUTH_TOKEN_MAX 4096  /* bytes of a token */
#define AUTH_NODE_MAX 253    /* a node's name: a DNS subdomain */
#define AUTH_SKEW_S 60	     /* clocks may differ this much for nbf and iat */

struct tg_err;

/* ---- the issuer's keys ---- */

struct auth_keys;

/*
 * A JWKS document ({"keys": [...]}) read whole: every signing key of a
 * supported type imported (encryption keys, "use": "enc", are skipped);
 * none, a key without "kid", a kid twice, more than AUTH_KEYS_MAX keys or a
 * key libcjose refuses is an error naming it. 0 or a negative errno (e says
 * why).
 */
int auth_keys_parse(const char *json, size_t len, struct auth_keys **ret, struct tg_err *e);
void auth_keys_free(struct auth_keys *k);
size_t auth_keys_count(const struct auth_keys *k);
/* A digest of the set's keys (16 hex digits): which set is in force. */
const char *auth_keys_id(const struct auth_keys *k);

/* ---- one token ---- */

/* What a token must say, besides its signature. */
struct auth_want {
	const char *issuer;
	const char *audience; /* AUTH_AUDIENCE */
	const char *subject;  /* "system:serviceaccount:<namespace>:<name>" */
};

enum auth_result {
	AUTH_OK,
	AUTH_MALFORMED,	  /* not a compact JWS with JSON claims */
	AUTH_ALGORITHM,	  /* an algorithm other than the above, or not the key's */
	AUTH_UNKNOWN_KEY, /* a kid that is not in the set */
	AUTH_SIGNATURE,	  /* the signature does not verify */
	AUTH_ISSUER,
	AUTH_AUDIENCE_WRONG,
	AUTH_EXPIRED,
	AUTH_NOT_YET, /* nbf (or iat) in the future */
	AUTH_SUBJECT, /* another service account's */
	AUTH_NO_NODE, /* no node claim: not a pod's bound token */
	AUTH_RESULTS
};
/* A word for each (metrics' and logs' label): "ok", "malformed", ... */
extern const char *const auth_result_names[AUTH_RESULTS];

struct auth_identity {
	char node[AUTH_NODE_MAX + 1];
	int64_t exp; /* unix seconds */
};

/*
 * Verifies token (len bytes, not NUL-terminated necessarily) at now (unix
 * seconds). AUTH_OK fills *ret; otherwise why (may be NULL) says what is
 * wrong in a line.
 */
enum auth_result auth_verify(const struct auth_keys *k, const struct auth_want *w,
			     const char *token, size_t len, int64_t now, struct auth_identity *ret,
			     char *why, size_t why_size);

/* ---- tokens verified ---- */

struct auth_cache;

/* At most max tokens (a power of two is not needed); NULL without memory. */
struct auth_cache *auth_cache_new(size_t max);
void auth_cache_free(struct auth_cache *c);
/* Whether token was verified before and has not expired at now; *ret (may be NULL) its identity. */
bool auth_cache_find(struct auth_cache *c, const char *token, size_t len, int64_t now,
		     struct auth_identity *ret);
/*
 * Remembers a verified token. When full, an expired entry or else the one
 * that expires first makes room. 0 or -ENOMEM.
 */
int auth_cache_put(struct auth_cache *c, const char *token, size_t len,
		   const struct auth_identity *id, int64_t now);
/* Forgets every token (a new key set: a key gone takes its tokens with it). */
void auth_cache_clear(struct auth_cache *c);
size_t auth_cache_count(const struct auth_cache *c);

/*
 * The token of an Authorization header's value: "Bearer <token>" (the scheme
 * case-insensitive, one or more spaces). NULL for anything else; *ret_len
 * its length.
 */
const char *auth_bearer(const char *authorization, size_t *ret_len);

#endif
