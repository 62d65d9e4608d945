// SPDX-License-Identifier: Apache-2.0
/*
 * The /v1/ wire format (budget/budget.h). Documents are written with
 * snprintf into one buffer (the allocator answers ~22,500 reports a second:
 * no json-c tree per answer) and read strictly, from any bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/budget.h"
#include "lib/jsonx.h"
#include "lib/k8sname.h"
#include "lib/util.h"

const char *const budget_state_names[BUDGET_STATES] = {
	[BUDGET_FALLBACK] = "fallback",
	[BUDGET_GRANTED] = "granted",
	[BUDGET_LEASE_EXPIRED] = "lease-expired",
};

/* ---- writing ---- */

struct wbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static bool wbuf_room(struct wbuf *b, size_t more)
{
	char *grown;
	size_t cap = b->cap;

	if (b->oom)
		return false;
	if (b->len + more < b->cap)
		return true;
	while (b->len + more >= cap)
		cap = cap ? cap * 2 : 512;
	grown = realloc(b->p, cap);
	if (!grown) {
		b->oom = true;
		return false;
	}
	b->p = grown;
	b->cap = cap;
	return true;
}

static void __attribute__((format(printf, 2, 3))) put(struct wbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!wbuf_room(b, 128))
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true;
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		if (!wbuf_room(b, (size_t)n + 1))
			return;
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

/*
 * A JSON string. The names the parsers accept need no escape; a struct
 * filled by hand still makes a valid document (that the parser refuses).
 */
static void put_str(struct wbuf *b, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	if (!wbuf_room(b, n * 6 + 3))
		return;
	b->p[b->len++] = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			b->p[b->len++] = '\\';
			b->p[b->len++] = (char)c;
		} else if (c < 0x20) {
			b->len += (size_t)snprintf(b->p + b->len, 7, "\\u%04x", c);
		} else {
			b->p[b->len++] = (char)c;
		}
	}
	b->p[b->len++] = '"';
	b->p[b->len] = '\0';
}

static int wbuf_done(struct wbuf *b, char **ret, size_t *ret_len)
{
	if (b->oom || !b->p) {
		free(b->p);
		return -ENOMEM;
	}
	*ret = b->p;
	if (ret_len)
		*ret_len = b->len;
	return 0;
}

static const char *state_name(enum budget_state st)
{
	return (unsigned)st < BUDGET_STATES ? budget_state_names[st] : budget_state_names[0];
}

int budget_report_build(const struct budget_report *r, char **ret, size_t *ret_len)
{
	struct wbuf b = { 0 };

	put(&b, "{\"version\":%d,\"node\":", BUDGET_WIRE_VERSION);
	put_str(&b, r->node, sizeof(r->node));
	put(&b, ",\"seq\":%" PRIu64 ",\"budgets\":[", r->seq);
	for (size_t i = 0; i < r->n; i++) {
		const struct budget_usage *u = &r->use[i];

		put(&b, "%s{\"namespace\":", i ? "," : "");
		put_str(&b, u->ns, sizeof(u->ns));
		put(&b,
		    ",\"sentBytes\":%" PRIu64 ",\"intervalMs\":%" PRIu32 ",\"saturated\":%s"
		    ",\"applied\":%" PRIu64 ",\"limit\":%" PRIu64 ",\"state\":\"%s\""
		    ",\"pods\":%" PRIu32 ",\"safeShare\":%" PRIu64 ",\"nodes\":%" PRIu32 "}",
		    u->sent_bytes, u->interval_ms, u->saturated ? "true" : "false", u->applied,
		    u->limit, state_name(u->state), u->pods, u->safe_share, u->nodes);
	}
	put(&b, "]}");
	return wbuf_done(&b, ret, ret_len);
}

int budget_answer_build(const struct budget_answer *a, char **ret, size_t *ret_len)
{
	struct wbuf b = { 0 };

	put(&b, "{\"version\":%d,\"leaseMs\":%" PRId64, BUDGET_WIRE_VERSION, a->lease_ms);
	if (a->next_report_ms > 0)
		put(&b, ",\"nextReportMs\":%" PRId64, a->next_report_ms);
	if (a->epoch > 0)
		put(&b, ",\"epoch\":%" PRIu64, a->epoch);
	put(&b, ",\"grants\":[");
	for (size_t i = 0; i < a->n; i++) {
		const struct budget_grant *g = &a->g[i];

		put(&b, "%s{\"namespace\":", i ? "," : "");
		put_str(&b, g->ns, sizeof(g->ns));
		put(&b, ",\"grant\":%" PRIu64 ",\"safeShare\":%" PRIu64 ",\"nodes\":%" PRIu32 "}",
		    g->grant, g->safe_share, g->nodes);
	}
	put(&b, "]}");
	return wbuf_done(&b, ret, ret_len);
}

int budget_redirect_build(const struct budget_redirect *d, char **ret, size_t *ret_len)
{
	struct wbuf b = { 0 };

	put(&b, "{\"version\":%d,\"leader\":", BUDGET_WIRE_VERSION);
	put_str(&b, d->leader, sizeof(d->leader));
	put(&b, ",\"epoch\":%" PRIu64 "}", d->epoch);
	return wbuf_done(&b, ret, ret_len);
}

void budget_report_free(struct budget_report *r)
{
	if (!r)
		return;
	free(r->use);
	r->use = NULL;
	r->n = 0;
}

void budget_answer_free(struct budget_answer *a)
{
	if (!a)
		return;
	free(a->g);
	a->g = NULL;
	a->n = 0;
}

/* ---- reading ---- */

static int bad(struct tg_err *e, int neg_errno, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad(struct tg_err *e, int neg_errno, const char *fmt, ...)
{
	char msg[sizeof(e->msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return tg_fail(e, CNI_ERR_DECODE, neg_errno, "%s", msg);
}

/* A peer's bytes in a message: printable ASCII only, cut at 48. */
static const char *shown(char *dst, size_t size, const char *s, size_t n)
{
	size_t o = 0, max = size - 4;

	for (size_t i = 0; i < n && o < max; i++)
		dst[o++] = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' ? s[i] : '?';
	if (o == max && n > max)
		memcpy(dst + o - 3, "...", 3);
	dst[o] = '\0';
	return dst;
}
#define SHOWN(s, n) shown((char[52]){ 0 }, 52, (s), (n))

static const char *type_name(json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_boolean:
		return "a boolean";
	case json_type_double:
		return "a fraction";
	case json_type_int:
		return "an integer";
	case json_type_object:
		return "an object";
	case json_type_array:
		return "an array";
	case json_type_string:
		return "a string";
	default:
		return "null";
	}
}

/* "budgets[3].applied", or "applied" at the top. */
struct member {
	char path[48];
};

static const char *member(struct member *m, const char *where, const char *key)
{
	snprintf(m->path, sizeof(m->path), "%s%s%s", where, *where ? "." : "", key);
	return m->path;
}

static int get(json_object *obj, const char *where, const char *key, json_type want,
	       const char *want_name, json_object **ret, struct tg_err *e)
{
	struct member m;
	json_object *v;

	if (!json_object_object_get_ex(obj, key, &v))
		return bad(e, -EINVAL, "%s: missing", member(&m, where, key));
	if (!json_object_is_type(v, want))
		return bad(e, -EINVAL, "%s: must be %s, not %s", member(&m, where, key), want_name,
			   type_name(v));
	*ret = v;
	return 0;
}

static int get_uint(json_object *obj, const char *where, const char *key, uint64_t max,
		    uint64_t *ret, struct tg_err *e)
{
	struct member m;
	json_object *v;
	uint64_t n;
	int r;

	r = get(obj, where, key, json_type_int, "an integer", &v, e);
	if (r < 0)
		return r;
	/* get_uint64 reads a negative number as 0 */
	if (json_object_get_int64(v) < 0)
		return bad(e, -ERANGE, "%s: %" PRId64 " is negative", member(&m, where, key),
			   json_object_get_int64(v));
	n = json_object_get_uint64(v);
	if (n > max)
		return bad(e, -ERANGE, "%s: %" PRIu64 " is more than %" PRIu64,
			   member(&m, where, key), n, max);
	*ret = n;
	return 0;
}

static int get_u32(json_object *obj, const char *where, const char *key, uint32_t max,
		   uint32_t *ret, struct tg_err *e)
{
	uint64_t n;
	int r = get_uint(obj, where, key, max, &n, e);

	if (r == 0)
		*ret = (uint32_t)n;
	return r;
}

static int get_str(json_object *obj, const char *where, const char *key, const char **ret,
		   size_t *ret_len, struct tg_err *e)
{
	json_object *v;
	int r = get(obj, where, key, json_type_string, "a string", &v, e);

	if (r < 0)
		return r;
	*ret = json_object_get_string(v);
	*ret_len = (size_t)json_object_get_string_len(v);
	return 0;
}

static int get_ns(json_object *obj, const char *where, char ret[BUDGET_NS_MAX + 1],
		  struct tg_err *e)
{
	const char *s;
	size_t n;
	int r = get_str(obj, where, "namespace", &s, &n, e);

	if (r < 0)
		return r;
	if (!k8s_dns_label(s, n))
		return bad(e, -EINVAL,
			   "%s.namespace: \"%s\" is not a namespace (a DNS label: a-z, 0-9 and "
			   "'-', at most %d)",
			   where, SHOWN(s, n), BUDGET_NS_MAX);
	memcpy(ret, s, n);
	ret[n] = '\0';
	return 0;
}

/*
 * The namespaces of one document so far: open addressing over at least
 * twice as many slots as entries. Says which entry had the name first.
 */
struct ns_set {
	size_t mask;
	struct {
		const char *ns;
		size_t at;
	} slot[];
};

static struct ns_set *ns_set_new(size_t n)
{
	size_t slots = 16;
	struct ns_set *set;

	while (slots < 2 * n)
		slots *= 2;
	set = calloc(1, sizeof(*set) + slots * sizeof(set->slot[0]));
	if (set)
		set->mask = slots - 1;
	return set;
}

static bool ns_seen(struct ns_set *set, const char *ns, size_t at, size_t *ret_first)
{
	size_t i = (size_t)hash_fnv1a64(ns, strlen(ns), FNV1A64_INIT) & set->mask;

	for (; set->slot[i].ns; i = (i + 1) & set->mask)
		if (strcmp(set->slot[i].ns, ns) == 0) {
			*ret_first = set->slot[i].at;
			return true;
		}
	set->slot[i].ns = ns;
	set->slot[i].at = at;
	return false;
}

/*
 * What json-c lets through, even strict: the last of two members of one
 * name silently wins, an integer too big for 64 bits reads as the nearest
 * that fits, and a key may be in single quotes, a number NaN, Infinity or
 * "1.", a string may hold raw control characters. One pass over the text
 * (a document json-c took) refuses the rest and counts the members
 * written; fewer members in the tree means a name twice.
 */
static int scan(const char *t, size_t len, size_t *ret_members, struct tg_err *e)
{
	size_t members = 0, i = 0;

	while (i < len) {
		char c = t[i];

		if (c == '"') {
			for (i++; i < len && t[i] != '"'; i++) {
				if ((unsigned char)t[i] < 0x20)
					return bad(e, -EINVAL,
						   "byte %zu: a control character in a string", i);
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
				if (t[i] == '.' && (i + 1 >= len || t[i + 1] < '0' || t[i + 1] > '9'))
					return bad(e, -EINVAL, "byte %zu: a number ends in '.'", i);
				while (i < len && strchr("0123456789.eE+-", t[i]))
					i++;
				continue;
			}
			/* no leading zeros in JSON: the digits' count orders them */
			if (digits > 20 || (digits == 20 && !neg &&
					    memcmp(t + start, "18446744073709551615", 20) > 0) ||
			    (neg && (digits > 19 ||
				     (digits == 19 &&
				      memcmp(t + start + 1, "9223372036854775808", 19) > 0))))
				return bad(e, -ERANGE, "byte %zu: %s does not fit 64 bits", start,
					   SHOWN(t + start, i - start));
		} else if (strchr(" \t\n\r{}[],truefalsn", c)) {
			i++;
		} else {
			return bad(e, -EINVAL, "byte %zu: \"%s\" is not JSON here", i, SHOWN(&c, 1));
		}
	}
	*ret_members = members;
	return 0;
}

static size_t tree_members(json_object *o)
{
	size_t n = 0;

	if (json_object_is_type(o, json_type_object)) {
		json_object_object_foreach(o, k, v) {
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
 * in one walk (up to there both list the same objects). Only for the
 * message: scan() already knows that there is one.
 */
struct dup_walk {
	const uint32_t *count;
	size_t n, k;
	char path[64];
};

static bool find_dup(json_object *o, struct dup_walk *w, size_t path_len)
{
	if (json_object_is_type(o, json_type_object)) {
		if (w->k >= w->n || w->count[w->k++] != (uint32_t)json_object_object_length(o))
			return true;
		json_object_object_foreach(o, k, v) {
			snprintf(w->path + path_len, sizeof(w->path) - path_len, "%s%s",
				 path_len ? "." : "", SHOWN(k, strlen(k)));
			if (find_dup(v, w, strlen(w->path)))
				return true;
		}
	} else if (json_object_is_type(o, json_type_array)) {
		size_t len = json_object_array_length(o);

		for (size_t i = 0; i < len; i++) {
			snprintf(w->path + path_len, sizeof(w->path) - path_len, "[%zu]", i);
			if (find_dup(json_object_array_get_idx(o, i), w, strlen(w->path)))
				return true;
		}
	}
	w->path[path_len] = '\0';
	return false;
}

static int dup_member(const char *t, size_t len, json_object *root, struct tg_err *e)
{
	/* json-c nests at most 32 deep (JSON_TOKENER_DEFAULT_DEPTH) */
	int64_t stack[64];
	size_t depth = 0, objects = 0, i;
	struct dup_walk w = { 0 };
	uint32_t *count;

	for (i = 0; i < len; i++) {
		if (t[i] == '"') {
			for (i++; i < len && t[i] != '"'; i++)
				i += t[i] == '\\';
		} else if (t[i] == '{') {
			objects++;
		}
	}
	count = calloc(objects + 1, sizeof(*count));
	if (!count)
		return -ENOMEM;
	objects = 0;
	for (i = 0; i < len; i++) {
		if (t[i] == '"') {
			for (i++; i < len && t[i] != '"'; i++)
				i += t[i] == '\\';
		} else if ((t[i] == '{' || t[i] == '[') && depth < ARRAY_SIZE(stack)) {
			stack[depth++] = t[i] == '{' ? (int64_t)objects++ : -1;
		} else if ((t[i] == '}' || t[i] == ']') && depth > 0) {
			depth--;
		} else if (t[i] == ':' && depth > 0 && stack[depth - 1] >= 0) {
			count[stack[depth - 1]]++;
		}
	}
	w.count = count;
	w.n = objects;
	find_dup(root, &w, 0);
	free(count);
	return bad(e, -EINVAL, "%s: a member written twice", w.path[0] ? w.path : "the document");
}

/* The whole document: size, JSON, version, then no member twice, no number too big. */
static int parse_doc(const char *text, size_t len, const char *what, json_object **ret,
		     struct tg_err *e)
{
	struct jx_parse_error pe;
	json_object *root, *v;
	size_t members = 0;
	int64_t version;
	int r;

	if (len > BUDGET_BODY_MAX)
		return bad(e, -EINVAL, "%s of %zu bytes: at most %d", what, len, BUDGET_BODY_MAX);
	r = jx_parse(text, len, &root, &pe);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return bad(e, -EINVAL, "%s is not JSON: %s at byte %zu", what, pe.why, pe.at);
	if (!json_object_is_type(root, json_type_object)) {
		r = bad(e, -EINVAL, "%s must be an object, not %s", what, type_name(root));
		goto fail;
	}
	r = get(root, "", "version", json_type_int, "an integer", &v, e);
	if (r < 0)
		goto fail;
	version = json_object_get_int64(v);
	if (version != BUDGET_WIRE_VERSION) {
		r = bad(e, -EPROTO, "version: %" PRId64 " is not a version this side speaks (%d)",
			version, BUDGET_WIRE_VERSION);
		goto fail;
	}
	r = scan(text, len, &members, e);
	if (r < 0)
		goto fail;
	if (members != tree_members(root)) {
		r = dup_member(text, len, root, e);
		goto fail;
	}
	*ret = root;
	return 0;
fail:
	json_object_put(root);
	return r;
}

/* The array `key` of objects, at most BUDGET_PER_REPORT_MAX. */
static int get_entries(json_object *root, const char *key, json_object **ret, size_t *ret_n,
		       struct tg_err *e)
{
	json_object *arr;
	size_t n;
	int r = get(root, "", key, json_type_array, "an array", &arr, e);

	if (r < 0)
		return r;
	n = json_object_array_length(arr);
	if (n > BUDGET_PER_REPORT_MAX)
		return bad(e, -EINVAL, "%s: %zu entries, at most %d", key, n,
			   BUDGET_PER_REPORT_MAX);
	for (size_t i = 0; i < n; i++)
		if (!json_object_is_type(json_object_array_get_idx(arr, i), json_type_object))
			return bad(e, -EINVAL, "%s[%zu]: must be an object, not %s", key, i,
				   type_name(json_object_array_get_idx(arr, i)));
	*ret = arr;
	*ret_n = n;
	return 0;
}

static int get_state(json_object *obj, const char *where, enum budget_state *ret,
		     struct tg_err *e)
{
	const char *s;
	size_t n;
	int r = get_str(obj, where, "state", &s, &n, e);

	if (r < 0)
		return r;
	for (int i = 0; i < BUDGET_STATES; i++)
		if (strlen(budget_state_names[i]) == n && memcmp(budget_state_names[i], s, n) == 0) {
			*ret = (enum budget_state)i;
			return 0;
		}
	return bad(e, -EINVAL, "%s.state: \"%s\" is not one of fallback, granted, lease-expired",
		   where, SHOWN(s, n));
}

static int parse_usage(json_object *o, const char *where, struct budget_usage *u,
		       struct tg_err *e)
{
	uint64_t interval;
	json_object *v;
	int r;

	if ((r = get_ns(o, where, u->ns, e)) < 0 ||
	    (r = get_uint(o, where, "sentBytes", UINT64_MAX, &u->sent_bytes, e)) < 0 ||
	    (r = get_uint(o, where, "intervalMs", BUDGET_INTERVAL_MAX_MS, &interval, e)) < 0 ||
	    (r = get(o, where, "saturated", json_type_boolean, "true or false", &v, e)) < 0)
		return r;
	u->interval_ms = (uint32_t)interval;
	u->saturated = json_object_get_boolean(v);
	if ((r = get_uint(o, where, "applied", BUDGET_RATE_MAX, &u->applied, e)) < 0 ||
	    (r = get_uint(o, where, "limit", BUDGET_RATE_MAX, &u->limit, e)) < 0 ||
	    (r = get_state(o, where, &u->state, e)) < 0 ||
	    (r = get_u32(o, where, "pods", BUDGET_PODS_MAX, &u->pods, e)) < 0 ||
	    (r = get_uint(o, where, "safeShare", BUDGET_RATE_MAX, &u->safe_share, e)) < 0 ||
	    (r = get_u32(o, where, "nodes", BUDGET_NODES_MAX, &u->nodes, e)) < 0)
		return r;
	return 0;
}

static int parse_grant(json_object *o, const char *where, struct budget_grant *g,
		       struct tg_err *e)
{
	int r;

	if ((r = get_ns(o, where, g->ns, e)) < 0 ||
	    (r = get_uint(o, where, "grant", BUDGET_RATE_MAX, &g->grant, e)) < 0 ||
	    (r = get_uint(o, where, "safeShare", BUDGET_RATE_MAX, &g->safe_share, e)) < 0 ||
	    (r = get_u32(o, where, "nodes", BUDGET_NODES_MAX, &g->nodes, e)) < 0)
		return r;
	return 0;
}

int budget_report_parse(const char *text, size_t len, struct budget_report *ret, struct tg_err *e)
{
	struct budget_report rep = { 0 };
	json_object *root, *arr;
	struct ns_set *seen = NULL;
	const char *node;
	size_t node_len, first;
	int r;

	r = parse_doc(text, len, "a report", &root, e);
	if (r < 0)
		return r;
	if ((r = get_str(root, "", "node", &node, &node_len, e)) < 0)
		goto out;
	if (!k8s_dns_subdomain(node, node_len)) {
		r = bad(e, -EINVAL,
			"node: \"%s\" is not a node name (a DNS subdomain: a-z, 0-9, '-' and '.', "
			"at most %d)",
			SHOWN(node, node_len), BUDGET_NODE_MAX);
		goto out;
	}
	memcpy(rep.node, node, node_len);
	rep.node[node_len] = '\0';
	if ((r = get_uint(root, "", "seq", UINT64_MAX, &rep.seq, e)) < 0 ||
	    (r = get_entries(root, "budgets", &arr, &rep.n, e)) < 0)
		goto out;
	seen = ns_set_new(rep.n);
	rep.use = calloc(rep.n ? rep.n : 1, sizeof(*rep.use));
	if (!seen || !rep.use) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < rep.n; i++) {
		char where[32];

		snprintf(where, sizeof(where), "budgets[%zu]", i);
		r = parse_usage(json_object_array_get_idx(arr, i), where, &rep.use[i], e);
		if (r < 0)
			goto out;
		if (ns_seen(seen, rep.use[i].ns, i, &first)) {
			r = bad(e, -EINVAL, "%s.namespace: \"%s\" again (budgets[%zu] has it)",
				where, rep.use[i].ns, first);
			goto out;
		}
	}
	*ret = rep;
	rep.use = NULL;
	r = 0;
out:
	free(rep.use);
	free(seen);
	json_object_put(root);
	return r;
}

int budget_answer_parse(const char *text, size_t len, struct budget_answer *ret, struct tg_err *e)
{
	struct budget_answer ans = { 0 };
	json_object *root, *arr;
	struct ns_set *seen = NULL;
	uint64_t lease, next = 0;
	size_t first;
	int r;

	r = parse_doc(text, len, "an answer", &root, e);
	if (r < 0)
		return r;
	if ((r = get_uint(root, "", "leaseMs", BUDGET_LEASE_MAX_MS, &lease, e)) < 0 ||
	    (json_object_object_get_ex(root, "nextReportMs", NULL) &&
	     (r = get_uint(root, "", "nextReportMs", BUDGET_INTERVAL_MAX_MS, &next, e)) < 0) ||
	    (json_object_object_get_ex(root, "epoch", NULL) &&
	     (r = get_uint(root, "", "epoch", BUDGET_EPOCH_MAX, &ans.epoch, e)) < 0) ||
	    (r = get_entries(root, "grants", &arr, &ans.n, e)) < 0)
		goto out;
	if (lease == 0) {
		r = bad(e, -ERANGE, "leaseMs: 0: a grant must last");
		goto out;
	}
	ans.lease_ms = (int64_t)lease;
	ans.next_report_ms = (int64_t)next;
	seen = ns_set_new(ans.n);
	ans.g = calloc(ans.n ? ans.n : 1, sizeof(*ans.g));
	if (!seen || !ans.g) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ans.n; i++) {
		char where[32];

		snprintf(where, sizeof(where), "grants[%zu]", i);
		r = parse_grant(json_object_array_get_idx(arr, i), where, &ans.g[i], e);
		if (r < 0)
			goto out;
		if (ns_seen(seen, ans.g[i].ns, i, &first)) {
			r = bad(e, -EINVAL, "%s.namespace: \"%s\" again (grants[%zu] has it)", where,
				ans.g[i].ns, first);
			goto out;
		}
	}
	*ret = ans;
	ans.g = NULL;
	r = 0;
out:
	free(ans.g);
	free(seen);
	json_object_put(root);
	return r;
}

bool budget_leader_url_ok(const char *s, size_t n)
{
	size_t scheme = 0;

	if (n >= 7 && strncmp(s, "http://", 7) == 0)
		scheme = 7;
	else if (n >= 8 && strncmp(s, "https://", 8) == 0)
		scheme = 8;

	if (!scheme || n == scheme || n > BUDGET_URL_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f || s[i] == '"' || s[i] == '\\')
			return false;
	return true;
}

int budget_redirect_parse(const char *text, size_t len, struct budget_redirect *ret,
			  struct tg_err *e)
{
	struct budget_redirect d = { 0 };
	json_object *root;
	const char *url;
	size_t url_len;
	int r;

	r = parse_doc(text, len, "a redirect", &root, e);
	if (r < 0)
		return r;
	if ((r = get_str(root, "", "leader", &url, &url_len, e)) < 0 ||
	    (r = get_uint(root, "", "epoch", BUDGET_EPOCH_MAX, &d.epoch, e)) < 0)
		goto out;
	if (!budget_leader_url_ok(url, url_len)) {
		r = bad(e, -EINVAL,
			"leader: \"%s\" is not a URL (http:// or https://, printable, at most %d)",
			SHOWN(url, url_len), BUDGET_URL_MAX);
		goto out;
	}
	memcpy(d.leader, url, url_len);
	d.leader[url_len] = '\0';
	*ret = d;
out:
	json_object_put(root);
	return r;
}
