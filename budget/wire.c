// SPDX-License-Identifier: Apache-2.0
/*
 * The /v1/ wire format (budget/budget.h). Documents are written with
 * snprintf into one buffer (the allocator answers ~22,500 reports a second:
 * no json-c tree per answer) and read strictly, from any bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/budget.h"
#include "lib/buf.h"
#include "lib/jsonx.h"
#include "lib/k8sname.h"
#include "lib/util.h"

const char *const budget_state_names[BUDGET_STATES] = {
	[BUDGET_FALLBACK] = "fallback",
	[BUDGET_GRANTED] = "granted",
	[BUDGET_LEASE_EXPIRED] = "lease-expired",
};

const char *const budget_dir_names[BUDGET_DIRS] = {
	[BUDGET_EGRESS] = "egress",
	[BUDGET_INGRESS] = "ingress",
};

const char *const budget_dir_keys[BUDGET_DIRS] = {
	[BUDGET_EGRESS] = "internetEgress",
	[BUDGET_INGRESS] = "internetIngress",
};

int budget_dir_parse(const char *name, size_t n, enum budget_dir *ret)
{
	for (int i = 0; i < BUDGET_DIRS; i++)
		if (strlen(budget_dir_names[i]) == n && memcmp(budget_dir_names[i], name, n) == 0) {
			*ret = (enum budget_dir)i;
			return 0;
		}
	return -EINVAL;
}

/* ---- writing ---- */

/*
 * A JSON string. The names the parsers accept need no escape; a struct
 * filled by hand still makes a valid document (that the parser refuses).
 */
static void put_str(struct buf *b, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	if (!buf_reserve(b, n * 6 + 2))
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

static int done(struct buf *b, char **ret, size_t *ret_len)
{
	if (b->failed || !b->p) {
		buf_free(b);
		return -ENOMEM;
	}
	*ret = buf_take(b, ret_len);
	return 0;
}

static const char *state_name(enum budget_state st)
{
	return (unsigned)st < BUDGET_STATES ? budget_state_names[st] : budget_state_names[0];
}

/*
 * An entry's direction: written for downloads only, so that an upload's
 * entry is what a peer that predates directions reads.
 */
static void put_dir(struct buf *b, enum budget_dir dir)
{
	if (dir == BUDGET_INGRESS)
		buf_printf(b, ",\"direction\":\"%s\"", budget_dir_names[BUDGET_INGRESS]);
}

int budget_report_build(const struct budget_report *r, char **ret, size_t *ret_len)
{
	struct buf b = { 0 };

	buf_printf(&b, "{\"version\":%d,\"node\":", BUDGET_WIRE_VERSION);
	put_str(&b, r->node, sizeof(r->node));
	buf_printf(&b, ",\"seq\":%" PRIu64, r->seq);
	if (r->policy[0]) {
		buf_printf(&b, ",\"policy\":");
		put_str(&b, r->policy, sizeof(r->policy));
	}
	if (r->directions)
		buf_printf(&b, ",\"directions\":true");
	buf_printf(&b, ",\"budgets\":[");
	for (size_t i = 0; i < r->n; i++) {
		const struct budget_usage *u = &r->use[i];

		buf_printf(&b, "%s{\"namespace\":", i ? "," : "");
		put_str(&b, u->ns, sizeof(u->ns));
		put_dir(&b, u->dir);
		buf_printf(&b,
			   ",\"sentBytes\":%" PRIu64 ",\"intervalMs\":%" PRIu32 ",\"saturated\":%s"
			   ",\"applied\":%" PRIu64 ",\"limit\":%" PRIu64 ",\"state\":\"%s\""
			   ",\"pods\":%" PRIu32 ",\"safeShare\":%" PRIu64 ",\"nodes\":%" PRIu32 "}",
			   u->sent_bytes, u->interval_ms, u->saturated ? "true" : "false",
			   u->applied, u->limit, state_name(u->state), u->pods, u->safe_share,
			   u->nodes);
	}
	buf_printf(&b, "]}");
	return done(&b, ret, ret_len);
}

int budget_answer_build(const struct budget_answer *a, char **ret, size_t *ret_len)
{
	struct buf b = { 0 };

	buf_printf(&b, "{\"version\":%d,\"leaseMs\":%" PRId64, BUDGET_WIRE_VERSION, a->lease_ms);
	if (a->next_report_ms > 0)
		buf_printf(&b, ",\"nextReportMs\":%" PRId64, a->next_report_ms);
	if (a->epoch > 0)
		buf_printf(&b, ",\"epoch\":%" PRIu64, a->epoch);
	buf_printf(&b, ",\"grants\":[");
	for (size_t i = 0; i < a->n; i++) {
		const struct budget_grant *g = &a->g[i];

		buf_printf(&b, "%s{\"namespace\":", i ? "," : "");
		put_str(&b, g->ns, sizeof(g->ns));
		put_dir(&b, g->dir);
		buf_printf(&b,
			   ",\"grant\":%" PRIu64 ",\"safeShare\":%" PRIu64 ",\"nodes\":%" PRIu32
			   "}",
			   g->grant, g->safe_share, g->nodes);
	}
	buf_printf(&b, "]");
	if (a->policy.id[0]) {
		buf_printf(&b, ",\"policy\":{\"id\":");
		put_str(&b, a->policy.id, sizeof(a->policy.id));
		buf_printf(&b, ",\"namespaces\":[");
		/* one entry a namespace: its directions' budgets (the set is sorted) */
		for (size_t i = 0; i < a->policy.n; i++) {
			const struct budget_def *d = &a->policy.d[i];
			bool same = i && strcmp(a->policy.d[i - 1].ns, d->ns) == 0;

			if (!same) {
				buf_printf(&b, "%s{\"namespace\":", i ? "}," : "");
				put_str(&b, d->ns, sizeof(d->ns));
			}
			buf_printf(&b, ",\"%s\":%" PRIu64,
				   budget_dir_keys[(unsigned)d->dir < BUDGET_DIRS ? d->dir : 0],
				   d->budget);
		}
		if (a->policy.n)
			buf_printf(&b, "}");
		buf_printf(&b, "]}");
	}
	buf_printf(&b, "}");
	return done(&b, ret, ret_len);
}

int budget_redirect_build(const struct budget_redirect *d, char **ret, size_t *ret_len)
{
	struct buf b = { 0 };

	buf_printf(&b, "{\"version\":%d,\"leader\":", BUDGET_WIRE_VERSION);
	put_str(&b, d->leader, sizeof(d->leader));
	buf_printf(&b, ",\"epoch\":%" PRIu64 "}", d->epoch);
	return done(&b, ret, ret_len);
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
	budget_set_free(&a->policy);
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
			   jx_type_name(v, true));
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
			   where, JX_SHOWN(s, n), BUDGET_NS_MAX);
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
		enum budget_dir dir;
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

static bool ns_seen(struct ns_set *set, const char *ns, enum budget_dir dir, size_t at,
		    size_t *ret_first)
{
	size_t i = (size_t)hash_fnv1a64(ns, strlen(ns), FNV1A64_INIT + dir) & set->mask;

	for (; set->slot[i].ns; i = (i + 1) & set->mask)
		if (set->slot[i].dir == dir && strcmp(set->slot[i].ns, ns) == 0) {
			*ret_first = set->slot[i].at;
			return true;
		}
	set->slot[i].ns = ns;
	set->slot[i].dir = dir;
	set->slot[i].at = at;
	return false;
}

/*
 * The whole document: size, then JSON read exactly (no member twice, no
 * number past 64 bits: lib/jsonx.h), then an object of this version.
 */
static int parse_doc(const char *text, size_t len, size_t max, const char *what, json_object **ret,
		     struct tg_err *e)
{
	struct jx_parse_error pe;
	json_object *root, *v;
	int64_t version;
	int r;

	if (len > max)
		return bad(e, -EINVAL, "%s of %zu bytes: at most %zu", what, len, max);
	r = jx_parse_ex(text, len, JX_EXACT, &root, &pe);
	if (r == -ENOMEM)
		return r;
	if (r < 0 && pe.exact)
		return bad(e, r == -ERANGE ? r : -EINVAL, "byte %zu: %s", pe.at, pe.why);
	if (r < 0 && pe.twice)
		return bad(e, -EINVAL, "%s: a member written twice (\"%s\")",
			   pe.object[0] ? pe.object : "the document", pe.key);
	if (r < 0)
		return bad(e, -EINVAL, "%s is not JSON: %s at byte %zu", what, pe.why, pe.at);
	if (!json_object_is_type(root, json_type_object)) {
		r = bad(e, -EINVAL, "%s must be an object, not %s", what, jx_type_name(root, true));
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
	*ret = root;
	return 0;
fail:
	json_object_put(root);
	return r;
}

/* The array `key` (named `path` in messages) of at most max objects. */
static int get_entries(json_object *root, const char *path, const char *key, size_t max,
		       json_object **ret, size_t *ret_n, struct tg_err *e)
{
	json_object *arr;
	size_t n;
	int r = get(root, path, key, json_type_array, "an array", &arr, e);

	if (r < 0)
		return r;
	n = json_object_array_length(arr);
	if (n > max)
		return bad(e, -EINVAL, "%s%s%s: %zu entries, at most %zu", path, *path ? "." : "",
			   key, n, max);
	for (size_t i = 0; i < n; i++)
		if (!json_object_is_type(json_object_array_get_idx(arr, i), json_type_object))
			return bad(e, -EINVAL, "%s%s%s[%zu]: must be an object, not %s", path,
				   *path ? "." : "", key, i,
				   jx_type_name(json_object_array_get_idx(arr, i), true));
	*ret = arr;
	*ret_n = n;
	return 0;
}

static int get_state(json_object *obj, const char *where, enum budget_state *ret, struct tg_err *e)
{
	const char *s;
	size_t n;
	int r = get_str(obj, where, "state", &s, &n, e);

	if (r < 0)
		return r;
	for (int i = 0; i < BUDGET_STATES; i++)
		if (strlen(budget_state_names[i]) == n &&
		    memcmp(budget_state_names[i], s, n) == 0) {
			*ret = (enum budget_state)i;
			return 0;
		}
	return bad(e, -EINVAL, "%s.state: \"%s\" is not one of fallback, granted, lease-expired",
		   where, JX_SHOWN(s, n));
}

/* "direction", optional: absent, the entry is egress (a peer that predates directions). */
static int get_dir(json_object *obj, const char *where, enum budget_dir *ret, struct tg_err *e)
{
	const char *s;
	size_t n;
	int r;

	*ret = BUDGET_EGRESS;
	if (!json_object_object_get_ex(obj, "direction", NULL))
		return 0;
	r = get_str(obj, where, "direction", &s, &n, e);
	if (r < 0)
		return r;
	if (budget_dir_parse(s, n, ret) < 0)
		return bad(e, -EINVAL, "%s.direction: \"%s\" is not one of egress, ingress", where,
			   JX_SHOWN(s, n));
	return 0;
}

static int parse_usage(json_object *o, const char *where, void *elem, struct tg_err *e)
{
	struct budget_usage *u = elem;
	uint64_t interval;
	json_object *v;
	int r;

	if ((r = get_ns(o, where, u->ns, e)) < 0 || (r = get_dir(o, where, &u->dir, e)) < 0 ||
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

static int parse_grant(json_object *o, const char *where, void *elem, struct tg_err *e)
{
	struct budget_grant *g = elem;
	int r;

	if ((r = get_ns(o, where, g->ns, e)) < 0 || (r = get_dir(o, where, &g->dir, e)) < 0 ||
	    (r = get_uint(o, where, "grant", BUDGET_RATE_MAX, &g->grant, e)) < 0 ||
	    (r = get_uint(o, where, "safeShare", BUDGET_RATE_MAX, &g->safe_share, e)) < 0 ||
	    (r = get_u32(o, where, "nodes", BUDGET_NODES_MAX, &g->nodes, e)) < 0)
		return r;
	return 0;
}

/* A policy entry: one namespace, the budget of each direction it has (0: none). */
struct policy_entry {
	char ns[BUDGET_NS_MAX + 1];
	uint64_t budget[BUDGET_DIRS];
};

static int parse_def(json_object *o, const char *where, void *elem, struct tg_err *e)
{
	struct policy_entry *p = elem;
	bool any = false;
	int r;

	if ((r = get_ns(o, where, p->ns, e)) < 0)
		return r;
	for (int d = 0; d < BUDGET_DIRS; d++) {
		if (!json_object_object_get_ex(o, budget_dir_keys[d], NULL))
			continue;
		r = get_uint(o, where, budget_dir_keys[d], BUDGET_TOTAL_MAX, &p->budget[d], e);
		if (r < 0)
			return r;
		if (p->budget[d] == 0)
			return bad(e, -ERANGE, "%s.%s: 0: a budget must let something through",
				   where, budget_dir_keys[d]);
		any = true;
	}
	if (!any)
		return bad(e, -EINVAL, "%s: no budget (internetEgress or internetIngress)", where);
	return 0;
}

/* A policy's id: BUDGET_POLICY_ID_LEN lowercase hex digits. */
static int get_policy_id(json_object *obj, const char *where, const char *key,
			 char ret[BUDGET_POLICY_ID_LEN + 1], struct tg_err *e)
{
	const char *s;
	size_t n;
	int r = get_str(obj, where, key, &s, &n, e);

	if (r < 0)
		return r;
	if (n != BUDGET_POLICY_ID_LEN || strspn(s, "0123456789abcdef") != n)
		return bad(e, -EINVAL, "%s%s%s: \"%s\" is not a policy id (%d hex digits)", where,
			   *where ? "." : "", key, JX_SHOWN(s, n), BUDGET_POLICY_ID_LEN);
	memcpy(ret, s, n + 1);
	return 0;
}

/*
 * The array `key` of the document: n entries of `size` bytes (allocated,
 * *ret), each parsed by fn, no (namespace, direction) (at ns_off and
 * dir_off in an entry; dir_off NO_DIR: an entry of every direction, named
 * once) named twice.
 */
#define NO_DIR SIZE_MAX
static int parse_entries(json_object *root, const char *path, const char *key, size_t max,
			 size_t size, size_t ns_off, size_t dir_off,
			 int (*fn)(json_object *o, const char *where, void *elem, struct tg_err *e),
			 void **ret, size_t *ret_n, struct tg_err *e)
{
	struct ns_set *seen = NULL;
	char *all = NULL;
	json_object *arr = NULL;
	size_t n = 0, first;
	int r = get_entries(root, path, key, max, &arr, &n, e);

	if (r < 0)
		return r;
	seen = ns_set_new(n);
	all = calloc(n ? n : 1, size);
	if (!seen || !all)
		r = -ENOMEM;
	for (size_t i = 0; i < n && r == 0; i++) {
		const char *ns = all + i * size + ns_off;
		enum budget_dir dir;
		char where[48];

		snprintf(where, sizeof(where), "%s%s%s[%zu]", path, *path ? "." : "", key, i);
		r = fn(json_object_array_get_idx(arr, i), where, all + i * size, e);
		if (r < 0)
			break;
		dir = BUDGET_EGRESS;
		if (dir_off != NO_DIR)
			memcpy(&dir, all + i * size + dir_off, sizeof(dir));
		if (ns_seen(seen, ns, dir, i, &first))
			r = bad(e, -EINVAL, "%s.namespace: \"%s\"%s%s again (%s%s%s[%zu] has it)",
				where, ns, dir == BUDGET_INGRESS ? " " : "",
				dir == BUDGET_INGRESS ? budget_dir_names[dir] : "", path,
				*path ? "." : "", key, first);
	}
	if (r == 0) {
		*ret = all;
		*ret_n = n;
		all = NULL;
	}
	free(all);
	free(seen);
	return r;
}

/*
 * An answer's policy: its namespaces read like every entry, then sealed
 * here, and the id the allocator gave them must be the one they have (a
 * node acts on what it checked, not on a name).
 */
int budget_policy_from_json(json_object *o, struct budget_set *ret, struct tg_err *e)
{
	struct budget_set set = { 0 };
	char id[BUDGET_POLICY_ID_LEN + 1];
	struct policy_entry *p;
	void *d = NULL;
	size_t n = 0;
	int r;

	if (!json_object_is_type(o, json_type_object))
		return bad(e, -EINVAL, "policy: must be an object, not %s", jx_type_name(o, true));
	if ((r = get_policy_id(o, "policy", "id", id, e)) < 0 ||
	    (r = parse_entries(o, "policy", "namespaces", BUDGET_POLICY_NS_MAX, sizeof(*p),
			       offsetof(struct policy_entry, ns), NO_DIR, parse_def, &d, &n, e)) <
		    0)
		return r;
	/* each entry's directions, a budget each */
	p = d;
	set.d = calloc(n ? 2 * n : 1, sizeof(*set.d));
	if (!set.d) {
		free(p);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < BUDGET_DIRS; k++)
			if (p[i].budget[k]) {
				struct budget_def *def = &set.d[set.n++];

				memcpy(def->ns, p[i].ns, sizeof(def->ns));
				def->dir = (enum budget_dir)k;
				def->budget = p[i].budget[k];
			}
	free(p);
	r = budget_set_seal(&set, e);
	if (r == 0 && strcmp(set.id, id) != 0)
		r = bad(e, -EINVAL, "policy.id: \"%s\" is not the id of its namespaces (%s)", id,
			set.id);
	if (r < 0) {
		budget_set_free(&set);
		return r;
	}
	*ret = set;
	return 0;
}

int budget_report_parse(const char *text, size_t len, struct budget_report *ret, struct tg_err *e)
{
	struct budget_report rep = { 0 };
	void *use = NULL;
	json_object *root, *v;
	const char *node;
	size_t node_len;
	int r;

	r = parse_doc(text, len, BUDGET_BODY_MAX, "a report", &root, e);
	if (r < 0)
		return r;
	if ((r = get_str(root, "", "node", &node, &node_len, e)) < 0)
		goto out;
	if (!k8s_dns_subdomain(node, node_len)) {
		r = bad(e, -EINVAL,
			"node: \"%s\" is not a node name (a DNS subdomain: a-z, 0-9, '-' and '.', "
			"at most %d)",
			JX_SHOWN(node, node_len), BUDGET_NODE_MAX);
		goto out;
	}
	memcpy(rep.node, node, node_len);
	rep.node[node_len] = '\0';
	if ((r = get_uint(root, "", "seq", UINT64_MAX, &rep.seq, e)) < 0 ||
	    (json_object_object_get_ex(root, "policy", NULL) &&
	     (r = get_policy_id(root, "", "policy", rep.policy, e)) < 0) ||
	    (json_object_object_get_ex(root, "directions", NULL) &&
	     (r = get(root, "", "directions", json_type_boolean, "true or false", &v, e)) < 0) ||
	    (r = parse_entries(root, "", "budgets", BUDGET_PER_REPORT_MAX, sizeof(*rep.use),
			       offsetof(struct budget_usage, ns),
			       offsetof(struct budget_usage, dir), parse_usage, &use, &rep.n, e)) <
		    0)
		goto out;
	rep.use = use;
	rep.directions = json_object_object_get_ex(root, "directions", &v) &&
			 json_object_get_boolean(v);
	*ret = rep;
out:
	json_object_put(root);
	return r;
}

int budget_answer_parse(const char *text, size_t len, struct budget_answer *ret, struct tg_err *e)
{
	struct budget_answer ans = { 0 };
	uint64_t lease, next = 0;
	void *g = NULL;
	json_object *root, *v;
	int r;

	r = parse_doc(text, len, BUDGET_ANSWER_MAX, "an answer", &root, e);
	if (r < 0)
		return r;
	if ((r = get_uint(root, "", "leaseMs", BUDGET_LEASE_MAX_MS, &lease, e)) < 0 ||
	    (json_object_object_get_ex(root, "nextReportMs", NULL) &&
	     (r = get_uint(root, "", "nextReportMs", BUDGET_INTERVAL_MAX_MS, &next, e)) < 0) ||
	    (json_object_object_get_ex(root, "epoch", NULL) &&
	     (r = get_uint(root, "", "epoch", BUDGET_EPOCH_MAX, &ans.epoch, e)) < 0) ||
	    (r = parse_entries(root, "", "grants", BUDGET_PER_REPORT_MAX, sizeof(*ans.g),
			       offsetof(struct budget_grant, ns),
			       offsetof(struct budget_grant, dir), parse_grant, &g, &ans.n, e)) < 0)
		goto out;
	ans.g = g;
	if (lease == 0)
		r = bad(e, -ERANGE, "leaseMs: 0: a grant must last");
	else if (json_object_object_get_ex(root, "policy", &v))
		r = budget_policy_from_json(v, &ans.policy, e);
	if (r < 0) {
		free(ans.g);
		goto out;
	}
	ans.lease_ms = (int64_t)lease;
	ans.next_report_ms = (int64_t)next;
	*ret = ans;
out:
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

	r = parse_doc(text, len, BUDGET_BODY_MAX, "a redirect", &root, e);
	if (r < 0)
		return r;
	if ((r = get_str(root, "", "leader", &url, &url_len, e)) < 0 ||
	    (r = get_uint(root, "", "epoch", BUDGET_EPOCH_MAX, &d.epoch, e)) < 0)
		goto out;
	if (!budget_leader_url_ok(url, url_len)) {
		r = bad(e, -EINVAL,
			"leader: \"%s\" is not a URL (http:// or https://, printable, at most %d)",
			JX_SHOWN(url, url_len), BUDGET_URL_MAX);
		goto out;
	}
	memcpy(d.leader, url, url_len);
	d.leader[url_len] = '\0';
	*ret = d;
out:
	json_object_put(root);
	return r;
}
