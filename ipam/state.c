// SPDX-License-Identifier: Apache-2.0
/* state.json <-> struct ipam_state. The format is documented in docs/configuration.md, "The store". */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipam/internal.h"
#include "ipam/ipam.h"
#include "ipam/pool.h"
#include "ipam/store.h"
#include "lib/hostport.h"
#include "lib/ip4.h"
#include "lib/jsonx.h"
#include "lib/util.h"

static void add_str(json_object *o, const char *k, const char *v)
{
	jx_add(o, k, json_object_new_string(v));
}

static void add_ip(json_object *o, const char *k, uint32_t ip)
{
	char buf[IP4_STRLEN];

	add_str(o, k, ip4_format(ip, buf));
}

json_object *ipam_state_head_to_json(const struct ipam_state *st)
{
	json_object *root = json_object_new_object();
	json_object *pool = json_object_new_object();
	json_object *cooling = json_object_new_array();
	json_object *atts = json_object_new_array();
	size_t i;

	if (!root || !pool || !cooling || !atts) {
		json_object_put(root);
		json_object_put(pool);
		json_object_put(cooling);
		json_object_put(atts);
		return NULL;
	}
	jx_add(root, "version", json_object_new_int(IPAM_STATE_VERSION));
	add_str(root, "bootId", st->boot_id);
	add_str(pool, "source", st->source);
	jx_add(pool, "lastSyncMs", json_object_new_int64(st->last_sync_ms));
	jx_add(pool, "addresses", ipam_pool_to_ranges(st->pool, st->n_pool));
	jx_add(pool, "pending", ipam_pool_to_ranges(st->pending, st->n_pending));
	if (st->node_ip)
		add_ip(pool, "nodeIp", st->node_ip);
	if (st->subnet.prefix || st->subnet.net) {
		char c[CIDR4_STRLEN];

		add_str(pool, "subnet", cidr4_format(&st->subnet, c));
	}
	jx_add(root, "pool", pool);
	add_ip(root, "lastIp", st->last_ip);
	for (i = 0; i < st->n_cooling; i++) {
		json_object *c = json_object_new_object();

		add_ip(c, "ip", st->cooling[i].ip);
		jx_add(c, "releasedMs", json_object_new_int64(st->cooling[i].released_wall_ms));
		jx_add(c, "releasedBootMs", json_object_new_int64(st->cooling[i].released_ms));
		json_object_array_add(cooling, c);
	}
	jx_add(root, "cooling", cooling);
	jx_add(root, "attachments", atts);
	return root;
}

json_object *ipam_attachment_to_json(const struct ipam_attachment *a)
{
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	add_str(o, "containerId", a->container_id);
	add_str(o, "ifname", a->ifname);
	add_ip(o, "ip", a->ip);
	add_str(o, "netns", a->netns);
	add_str(o, "namespace", a->k8s_namespace);
	add_str(o, "pod", a->pod);
	add_str(o, "hostVeth", a->host_veth);
	jx_add(o, "created", json_object_new_int64(a->created));
	if (memcmp(&a->shaping, &(struct shaping){ 0 }, sizeof(a->shaping)) != 0)
		jx_add(o, "shaping", shaping_to_json(&a->shaping));
	if (a->reshape_pending)
		jx_add(o, "reshapePending", json_object_new_boolean(true));
	if (a->ports.n)
		jx_add(o, "ports", hostports_to_json(&a->ports));
	return o;
}

json_object *ipam_state_to_json(const struct ipam_state *st)
{
	json_object *root = ipam_state_head_to_json(st), *atts;

	if (!root || !json_object_object_get_ex(root, "attachments", &atts)) {
		json_object_put(root);
		return NULL;
	}
	for (size_t i = 0; i < st->n_att; i++)
		json_object_array_add(atts, ipam_attachment_to_json(&st->att[i]));
	return root;
}

static int copy_str(json_object *o, const char *where, const char *key, char *dst, size_t size,
		    bool required, struct tg_err *e)
{
	const char *v = NULL;
	int r = jx_string(o, where, key, &v, e);

	if (r < 0)
		return r;
	if (r == 0) {
		if (required)
			return tg_fail(e, CNI_ERR_IO, -EBADMSG, "%s.%s is missing", where, key);
		dst[0] = '\0';
		return 0;
	}
	if (strlen(v) >= size)
		return tg_fail(e, CNI_ERR_IO, -EBADMSG, "%s.%s is too long", where, key);
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

static int get_ip(json_object *o, const char *where, const char *key, uint32_t *ret,
		  struct tg_err *e)
{
	char buf[IP4_STRLEN];
	int r = copy_str(o, where, key, buf, sizeof(buf), true, e);

	if (r < 0)
		return r;
	if (ip4_parse(buf, ret) < 0)
		return tg_fail(e, CNI_ERR_IO, -EBADMSG, "%s.%s \"%s\" is not an IPv4 address",
			       where, key, buf);
	return 0;
}

static int pool_from_json(json_object *pool, struct ipam_state *st, struct tg_err *e)
{
	json_object *arr = NULL;
	const char *sn = NULL;

	if (copy_str(pool, "state.pool", "source", st->source, sizeof(st->source), false, e) < 0 ||
	    jx_int(pool, "state.pool", "lastSyncMs", 0, INT64_MAX, &st->last_sync_ms, e) < 0 ||
	    jx_string_array(pool, "state.pool", "addresses", &arr, e) < 0)
		return -EBADMSG;
	if (arr && ipam_pool_parse(arr, NULL, "state.pool", &st->pool, &st->n_pool, e) < 0)
		return -EBADMSG;
	arr = NULL;
	if (jx_string_array(pool, "state.pool", "pending", &arr, e) < 0)
		return -EBADMSG;
	if (arr && ipam_pool_parse(arr, NULL, "state.pool", &st->pending, &st->n_pending, e) < 0)
		return -EBADMSG;
	if (json_object_object_get_ex(pool, "nodeIp", NULL) &&
	    get_ip(pool, "state.pool", "nodeIp", &st->node_ip, e) < 0)
		return -EBADMSG;
	if (jx_string(pool, "state.pool", "subnet", &sn, e) < 0)
		return -EBADMSG;
	if (sn && cidr4_parse(sn, &st->subnet) < 0)
		return tg_fail(e, CNI_ERR_IO, -EBADMSG, "state.pool.subnet \"%s\" is not a CIDR",
			       sn);
	return 0;
}

static int cooling_from_json(json_object *root, struct ipam_state *st, struct tg_err *e)
{
	json_object *arr = NULL;
	size_t n;

	json_object_object_get_ex(root, "cooling", &arr);
	if (arr && !json_object_is_type(arr, json_type_array))
		return tg_fail(e, CNI_ERR_IO, -EBADMSG, "state.cooling is not an array");
	n = arr ? json_object_array_length(arr) : 0;
	st->cooling = calloc(n ? n : 1, sizeof(*st->cooling));
	if (!st->cooling)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(arr, i);
		struct ipam_cooling *k = &st->cooling[i];
		int boot = 0;

		if (get_ip(c, "state.cooling[]", "ip", &k->ip, e) < 0 ||
		    jx_int(c, "state.cooling[]", "releasedMs", 0, INT64_MAX, &k->released_wall_ms,
			   e) < 0 ||
		    (boot = jx_int(c, "state.cooling[]", "releasedBootMs", 0, INT64_MAX,
				   &k->released_ms, e)) < 0)
			return -EBADMSG;
		/*
		 * An earlier writer kept the wall clock alone: its rest, as far as
		 * the wall clock can tell, carried over onto the boot clock (at
		 * most back to the boot: the store is of this boot).
		 */
		if (!boot) {
			k->released_ms = time_boot_ms() - (time_now_ms() - k->released_wall_ms);
			if (k->released_ms < 0)
				k->released_ms = 0;
		}
	}
	st->n_cooling = n;
	return 0;
}

static int attachment_from_json(json_object *o, size_t i, struct ipam_attachment *a,
				struct tg_err *e)
{
	const char *w = "state.attachments[]";
	json_object *sh = NULL, *ports = NULL;
	struct tg_err pe = { 0 };

	if (!json_object_is_type(o, json_type_object))
		return tg_fail(e, CNI_ERR_IO, -EBADMSG, "state.attachments[%zu] is not an object",
			       i);
	if (copy_str(o, w, "containerId", a->container_id, sizeof(a->container_id), true, e) < 0 ||
	    copy_str(o, w, "ifname", a->ifname, sizeof(a->ifname), true, e) < 0 ||
	    get_ip(o, w, "ip", &a->ip, e) < 0 ||
	    copy_str(o, w, "netns", a->netns, sizeof(a->netns), false, e) < 0 ||
	    copy_str(o, w, "namespace", a->k8s_namespace, sizeof(a->k8s_namespace), false, e) < 0 ||
	    copy_str(o, w, "pod", a->pod, sizeof(a->pod), false, e) < 0 ||
	    copy_str(o, w, "hostVeth", a->host_veth, sizeof(a->host_veth), false, e) < 0 ||
	    jx_int(o, w, "created", 0, INT64_MAX, &a->created, e) < 0 ||
	    jx_object(o, w, "shaping", &sh, e) < 0 ||
	    (sh && shaping_from_json(sh, "state.attachments[].shaping", &a->shaping, e) < 0) ||
	    jx_bool(o, w, "reshapePending", &a->reshape_pending, e) < 0)
		return -EBADMSG;
	json_object_object_get_ex(o, "ports", &ports);
	if (hostports_parse(ports, "state.attachments[].ports", &a->ports, &pe) < 0)
		return tg_fail(e, CNI_ERR_IO, -EBADMSG, "%s", pe.msg);
	return 0;
}

static int attachments_from_json(json_object *root, struct ipam_state *st, struct tg_err *e)
{
	json_object *arr = NULL;
	size_t n;

	if (!json_object_object_get_ex(root, "attachments", &arr) ||
	    !json_object_is_type(arr, json_type_array))
		return tg_fail(e, CNI_ERR_IO, -EBADMSG,
			       "state.attachments is missing or not an array");
	n = json_object_array_length(arr);
	if (n > IPAM_ATTACHMENTS_MAX)
		return tg_fail(e, CNI_ERR_IO, -EBADMSG, "state holds too many attachments");
	st->att = calloc(n ? n : 1, sizeof(*st->att));
	if (!st->att)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (attachment_from_json(json_object_array_get_idx(arr, i), i, &st->att[i], e) < 0)
			return -EBADMSG;
	st->n_att = n;
	return 0;
}

/*
 * Format versions. Every version ever written is read: its document is
 * brought forward one version at a time (state_formats[v].forward turns a
 * version v document into version v + 1's, in place) to the current one,
 * the only one parsed into struct ipam_state and the only one written. So an
 * earlier file takes the current format at the store's next write, never on
 * a read. A later version than this build's is refused (-EPROTO), never
 * guessed at: its writer knew something this build does not.
 *
 * Version 1 is every file written so far. Its members were only ever added,
 * each optional and absent meaning what the earlier writer meant (none):
 * pool.pending, pool.nodeIp and pool.subnet (imds pools), then
 * attachments[].shaping, then attachments[].reshapePending (an earlier
 * reader ignores it: a reshape it left half done stays so until the next
 * reshape of a build that reads it), then cooling[].releasedBootMs (the
 * cool-down on the boot clock; releasedMs keeps its wall-clock meaning for
 * earlier readers), then attachments[].ports (the pod's hostPorts; an
 * earlier reader ignores them, and a later declaration's reconcile takes
 * out the elements of a pod its DEL did not know to remove). Its layout changed (indented, one
 * line, one attachment per line), which JSON does not see. tests/fixtures/store/ holds
 * a file of each shape, written by the release that wrote it.
 *
 * A change an earlier reader would misread (a member renamed, retyped or
 * given a new meaning; a second address per attachment) needs a new version:
 * raise IPAM_STATE_VERSION, add its entry (the size check below fails the
 * build until there is one) and give the previous version its forward step
 * (without one every read of that version fails, and with it the tests of
 * tests/fixtures/store/); keep a fixture the previous release wrote.
 */
#define STATE_VERSION_OLDEST 1

static const struct state_format {
	/* cppcheck-suppress unusedStructMember ; read by people, not code */
	const char *shapes; /* what its files look like, for the reader of this table */
	int (*forward)(json_object *root,
		       struct tg_err *e); /* to the next version; NULL: current */
} state_formats[] = {
	[1] = { "every release so far (tests/fixtures/store/v1-*.json)", NULL },
};

_Static_assert(ARRAY_SIZE(state_formats) == IPAM_STATE_VERSION + 1,
	       "a new state version needs its entry (and its predecessor a forward step)");

/*
 * The document's version, checked: 1 and its value when this build reads it
 * (as it is or after migration), -EPROTO naming both versions when it is
 * later than this build's, -EBADMSG when it is no version ever written.
 */
static int state_version(json_object *root, int64_t *ret, struct tg_err *e)
{
	int r = jx_int(root, "state", "version", INT64_MIN, INT64_MAX, ret, e);

	if (r == 0)
		return tg_fail(e, CNI_ERR_IO, -EBADMSG, "state.version is missing");
	if (r < 0)
		return -EBADMSG;
	if (*ret > IPAM_STATE_VERSION)
		return tg_fail(e, CNI_ERR_IO, -EPROTO,
			       "format version %lld, newer than format version %d, the latest this "
			       "build of Tollgate (%s) reads",
			       (long long)*ret, IPAM_STATE_VERSION, TG_VERSION);
	if (*ret < STATE_VERSION_OLDEST)
		return tg_fail(e, CNI_ERR_IO, -EBADMSG,
			       "state.version %lld is no version Tollgate ever wrote (%d to %d)",
			       (long long)*ret, STATE_VERSION_OLDEST, IPAM_STATE_VERSION);
	return 1;
}

int ipam_state_migrate(json_object *root, int64_t from, struct tg_err *e)
{
	if (from < STATE_VERSION_OLDEST || from > IPAM_STATE_VERSION)
		return tg_fail(e, CNI_ERR_IO, -EBADMSG,
			       "state format version %lld is not read here", (long long)from);
	for (int64_t v = from; v < IPAM_STATE_VERSION; v++) {
		const struct state_format *f = &state_formats[v];

		if (!f->forward)
			return tg_fail(e, CNI_ERR_IO, -EBADMSG,
				       "state format version %lld has no step to version %lld",
				       (long long)v, (long long)v + 1);
		if (f->forward(root, e) < 0)
			return -EBADMSG;
		/* Replaced, not added: the writer's jx_add would keep the old member too. */
		json_object_object_add(root, "version", json_object_new_int((int)v + 1));
	}
	return 0;
}

int ipam_state_from_json(json_object *root, struct ipam_state *st, struct tg_err *e)
{
	json_object *pool = NULL;
	int64_t version;
	int r;

	ipam_state_init(st);
	if (!json_object_is_type(root, json_type_object))
		return tg_fail(e, CNI_ERR_IO, -EBADMSG, "the top level is not an object");
	r = state_version(root, &version, e);
	if (r == 1)
		r = ipam_state_migrate(root, version, e);
	if (r < 0)
		goto fail;
	/* From here on the document is in the current version. */
	r = -EBADMSG;
	if (copy_str(root, "state", "bootId", st->boot_id, sizeof(st->boot_id), false, e) < 0 ||
	    jx_object(root, "state", "pool", &pool, e) < 0 ||
	    (pool && pool_from_json(pool, st, e) < 0))
		goto fail;
	if (json_object_object_get_ex(root, "lastIp", NULL) &&
	    get_ip(root, "state", "lastIp", &st->last_ip, e) < 0)
		goto fail;
	if (cooling_from_json(root, st, e) < 0 || attachments_from_json(root, st, e) < 0)
		goto fail;
	return 0;
fail:
	/* Validation errors from jx_* carry code 7; in a state file they mean corruption. */
	if (e)
		e->code = CNI_ERR_IO;
	ipam_state_free(st);
	return r == -EPROTO ? -EPROTO : -EBADMSG;
}
