/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_JSONX_H
#define TG_LIB_JSONX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <json-c/json.h>

#include "lib/err.h"

/*
 * Typed, validated reads of JSON members. Each returns 1 when the key is
 * present and valid, 0 when it is absent (or null), and a negative errno with
 * a CNI code 7 error naming "<where>.<key>" when it has the wrong type or an
 * invalid value. Unknown keys are never looked at, as the CNI spec asks.
 */

/*
 * Adds a member whose key is a string literal and new to the object: json-c
 * then neither copies the key nor looks for an old member (the store writes
 * thousands of them per save).
 */
static inline void jx_add(json_object *obj, const char *literal_key, json_object *val)
{
	json_object_object_add_ex(obj, literal_key, val,
				  JSON_C_OBJECT_ADD_KEY_IS_NEW | JSON_C_OBJECT_KEY_IS_CONSTANT);
}

/*
 * One whole JSON document, text[0, len), parsed strictly (lib/jsonx_strict.c):
 * json-c's strict mode, only whitespace (space, tab, newline, carriage
 * return) after it, and no member written twice in one object (json-c would
 * keep the last: `{"mtu":1500,"mtu":9000}` reads as 9000). With JX_EXACT,
 * what json-c lets through even strict is refused as well: a key in single
 * quotes, NaN, Infinity, "1.", a raw control character in a string, an
 * integer that does not fit 64 bits (json-c reads the nearest that does).
 * 0 and *ret, the caller's to put; -ENOMEM; -ERANGE (JX_EXACT, a number
 * too big) or -EBADMSG with *ret_err saying why and where.
 */
#define JX_EXACT 1u
struct jx_parse_error {
	const char *why;  /* json-c's reason, "trailing data", or what was refused */
	size_t at;	  /* the byte offset it is at */
	bool trailing;	  /* a whole document, followed by more than whitespace */
	bool exact;	  /* refused by JX_EXACT's reading */
	bool twice;	  /* a member written twice: why is "<member> is written twice" */
	char object[64];  /* ... in this object ("plugins[0]"; "" at the top) */
	char key[52];	  /* ... by this name ("mtu") */
	char member[120]; /* ... as a path ("plugins[0].mtu") */
	char text[160];	  /* what why points at when it is not a constant */
};
int jx_parse_ex(const char *text, size_t len, unsigned flags, json_object **ret,
		struct jx_parse_error *ret_err);
static inline int jx_parse(const char *text, size_t len, json_object **ret,
			   struct jx_parse_error *ret_err)
{
	return jx_parse_ex(text, len, 0, ret, ret_err);
}

/*
 * A file the program wrote itself, read whole and parsed as strictly (a
 * member twice, trailing data: as if the file were not there). NULL when
 * it cannot be read or parsed; else the caller's to put.
 */
json_object *jx_read_file(const char *path);

/*
 * A member written twice as an invalid configuration (CNI code 7), worded
 * as the other code 7 errors: "plugins[0].mtu is written twice at byte 40".
 */
int jx_fail_twice(struct tg_err *e, const struct jx_parse_error *pe);

/*
 * What a JSON value is, for a message: "a string", "an object"... exact:
 * numbers as "an integer" or "a fraction" (the wire format's exact reading
 * tells them apart), else both "a number".
 */
const char *jx_type_name(json_object *v, bool exact);

/* A peer's bytes in a message: printable ASCII only ('"' too is not), cut at size - 4. */
const char *jx_shown(char *dst, size_t size, const char *s, size_t n);
#define JX_SHOWN(s, n) jx_shown((char[52]){ 0 }, 52, (s), (n))

/*
 * Writes o and a newline: json-c's JSON_C_TO_STRING_* flags (PLAIN for a
 * program, PRETTY for a person); '/' is never escaped.
 */
void jx_print(FILE *out, json_object *o, int flags);

int jx_string(json_object *obj, const char *where, const char *key, const char **ret,
	      struct tg_err *e);
int jx_bool(json_object *obj, const char *where, const char *key, bool *ret, struct tg_err *e);
int jx_int(json_object *obj, const char *where, const char *key, int64_t min, int64_t max,
	   int64_t *ret, struct tg_err *e);
int jx_object(json_object *obj, const char *where, const char *key, json_object **ret,
	      struct tg_err *e);
/* An array whose every element is a string. */
int jx_string_array(json_object *obj, const char *where, const char *key, json_object **ret,
		    struct tg_err *e);
/*
 * Loose reads, for a document the program built itself (tollgate-ipam reads
 * its own back for the text form): no type check, and an absent or null
 * member reads as NULL, "" or 0. json-c converts a value of another type.
 */
json_object *jx_get(json_object *obj, const char *key);
const char *jx_get_str(json_object *obj, const char *key);
int64_t jx_get_int(json_object *obj, const char *key);
/* A string member as it is: NULL when absent, null or of another type (no conversion). */
const char *jx_get_string(json_object *obj, const char *key);
/*
 * An integer member written as a JSON integer or as a string of decimal
 * digits (proto3's JSON for 64-bit integers, as etcd's gateway writes
 * them); absent or null: 0. -EINVAL for another type, -EBADMSG for a
 * string that is not one integer of 64 bits.
 */
int jx_get_int64_text(json_object *obj, const char *key, int64_t *ret);
/* Member lookup ignoring ASCII case, as Go's JSON decoder does for runtimeConfig. */
json_object *jx_get_nocase(json_object *obj, const char *key);

#endif
