/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_ETCD_H
#define TG_ETCD_H

/*
 * etcd v3 through its JSON gateway (POST /v3/..., JSON bodies; keys and
 * values base64, int64s written as strings): the few calls a leader
 * election needs, as request bodies to send and strict parsers of what
 * comes back. No I/O here: the allocator sends them with httpc/httpc.h.
 *
 *   /v3/lease/grant      {"TTL":"10"}            -> {"ID":"...","TTL":"10"}
 *   /v3/lease/keepalive  {"ID":"..."}            -> {"result":{"ID":..,"TTL":"10"}}
 *   /v3/lease/revoke     {"ID":"..."}
 *   /v3/kv/txn           put KEY=VALUE with the lease only if KEY does not
 *                        exist (create_revision 0), else range KEY
 *   /v3/kv/range         {"key":"..."}           -> {"kvs":[{...}]} or none
 *
 * A parser takes any bytes (etcd, or whatever answers in its place): not
 * JSON, an error object ({"error":..,"code":..}), a member of the wrong
 * type, is -EBADMSG with why naming it.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ETCD_KEY_MAX 255
#define ETCD_VALUE_MAX 1024
#define ETCD_WHY_MAX 160

#define ETCD_PATH_GRANT "/v3/lease/grant"
#define ETCD_PATH_KEEPALIVE "/v3/lease/keepalive"
#define ETCD_PATH_REVOKE "/v3/lease/revoke"
#define ETCD_PATH_TXN "/v3/kv/txn"
#define ETCD_PATH_RANGE "/v3/kv/range"

/* The election key as etcd holds it. */
struct etcd_kv {
	bool exists;
	int64_t create_revision; /* the holder's term: its epoch */
	int64_t lease;
	char value[ETCD_VALUE_MAX + 1]; /* the holder's advertise URL */
};

/* Base64 (RFC 4648, padded) of n bytes into dst (room for 4 * ceil(n / 3) + 1). */
void etcd_b64_encode(const void *src, size_t n, char *dst);
/* Decodes into dst (room for size, NUL added); the length, or -1 when not base64 or too long. */
long etcd_b64_decode(const char *src, size_t n, char *dst, size_t size);

/* Request bodies (malloc'ed, NUL-terminated), or NULL when out of memory. */
char *etcd_grant_body(int64_t ttl_s);
char *etcd_lease_body(int64_t lease_id); /* keepalive and revoke */
char *etcd_campaign_body(const char *key, const char *value, int64_t lease_id);
char *etcd_range_body(const char *key);

/* Responses: 0, or -EBADMSG with why (ETCD_WHY_MAX) saying what is wrong. */
int etcd_parse_grant(const char *text, size_t len, int64_t *ret_id, int64_t *ret_ttl, char *why);
/* *ret_ttl 0: the lease is gone (expired or revoked). */
int etcd_parse_keepalive(const char *text, size_t len, int64_t *ret_ttl, char *why);
/*
 * A campaign's answer: *ret_won, and the revision of the store after it
 * (the key's create_revision when won); when lost, the holder in *ret_kv.
 */
int etcd_parse_campaign(const char *text, size_t len, bool *ret_won, int64_t *ret_revision,
			struct etcd_kv *ret_kv, char *why);
int etcd_parse_range(const char *text, size_t len, struct etcd_kv *ret_kv, char *why);

#endif
