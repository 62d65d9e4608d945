// SPDX-License-Identifier: Apache-2.0
/*
 * ADD, DEL, CHECK, STATUS and GC. The store lock is held only around
 * read-modify-write of state.json, never across netlink work: deleting a veth
 * waits for RCU grace periods (~20 ms) and must not delay concurrent ADDs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <netlink/netlink.h>

#include "cni/internal.h"
#include "lib/failpoint.h"
#include "lib/rate.h"
#include "lib/steps.h"
#include "lib/util.h"
#include "node/node.h"
#include "lib/nl.h"
#include "lib/util.h"

struct session {
	struct ipam_store store;
	struct ipam_state state;
	struct nl_sock *sk;
	struct nl_sock *pod_sk; /* in the pod's network namespace (ADD) */
	int netns_fd;
};

static void session_end(struct session *s)
{
	ipam_state_free(&s->state);
	ipam_store_close(&s->store);
	if (s->sk)
		nl_socket_free(s->sk);
	if (s->pod_sk)
		nl_socket_free(s->pod_sk);
	if (s->netns_fd >= 0)
		close(s->netns_fd);
}

static int session_begin(struct session *s, const struct node_config *cfg, struct tg_err *e)
{
	memset(s, 0, sizeof(*s));
	s->netns_fd = -1;
	s->store.lock_fd = -1;
	ipam_state_init(&s->state);
	return ipam_store_open(&s->store, cfg->data_dir, cfg->name, e);
}

static int open_route_socket(struct session *s, struct tg_err *e)
{
	int r = tg_nl_route_open(&s->sk);

	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot open a netlink socket: %s", strerror(-r));
	return 0;
}

static int open_netns(struct session *s, const char *path, struct tg_err *e)
{
	int r = netns_open(path, &s->netns_fd);

	if (r == -ENOENT)
		return tg_fail(e, CNI_ERR_ENV, r, "CNI_NETNS \"%.128s\" does not exist", path);
	if (r < 0)
		return tg_fail(e, CNI_ERR_ENV, r, "CNI_NETNS \"%.128s\" is not a network namespace",
			       path);
	return 0;
}

static int store_update(struct session *s, const struct node_config *cfg, node_update_fn fn,
			void *ctx, struct tg_err *e)
{
	return node_store_update(&s->store, &s->state, cfg, fn, ctx, e);
}

struct assign_ctx {
	const struct node_config *cfg;
	struct ipam_attachment req;
	struct ipam_attachment got;
	bool existing;
	uint32_t prev_last_ip;	    /* the allocator's cursor before this ADD */
	struct hostports old_ports; /* a repeated ADD's: what its record had */
};

/*
 * A hostPort another attachment of the node holds: refused, naming the
 * holder. Retried (11): the holder may be a pod whose DEL has not come yet,
 * as when a StatefulSet's pod is made again under its name.
 */
static int hostports_free(const struct ipam_state *st, const struct ipam_attachment *me,
			  struct tg_err *e)
{
	for (size_t i = 0; i < st->n_att; i++) {
		const struct ipam_attachment *o = &st->att[i];

		if (o == me)
			continue;
		for (size_t k = 0; k < me->ports.n; k++)
			for (size_t j = 0; j < o->ports.n; j++) {
				char mine[HOSTPORT_STRLEN], theirs[HOSTPORT_STRLEN];

				if (!hostport_overlap(&me->ports.m[k], &o->ports.m[j]))
					continue;
				return tg_fail(e, CNI_ERR_TRY_AGAIN, -EADDRINUSE,
					       "hostPort %s is taken on this node: %s of pod %s/%s "
					       "(container %.12s) maps it",
					       hostport_format(&me->ports.m[k], mine),
					       hostport_format(&o->ports.m[j], theirs),
					       o->k8s_namespace, o->pod, o->container_id);
			}
	}
	return 0;
}

static int assign_fn(struct ipam_state *st, void *p, struct tg_err *e)
{
	struct assign_ctx *c = p;
	struct ipam_attachment *a;
	struct shaping before;
	int r;

	c->prev_last_ip = st->last_ip;
	r = ipam_assign(st, &c->req, time_boot_ms(), c->cfg->cooldown_ms, &c->got, &c->existing, e);

	if (r < 0)
		return r;
	/* The shaping this ADD asks for replaces the recorded one; its classes stay. */
	a = (struct ipam_attachment *)ipam_find(st, c->req.container_id, c->req.ifname);
	before = a->shaping;
	c->old_ports = a->ports;
	a->ports = c->req.ports;
	if (hostports_free(st, a, e) < 0) {
		if (!c->existing)
			ipam_release(st, a->container_id, a->ifname, time_boot_ms(), false, NULL);
		else
			a->ports = c->old_ports;
		return -EADDRINUSE;
	}
	/*
	 * A repeated ADD whose mappings changed: what the record gives up goes
	 * now, under the lock, before another pod can be given the port.
	 */
	if (c->existing && node_pod_unmap(a, &c->old_ports, e) < 0) {
		a->ports = c->old_ports;
		return -EIO;
	}
	a->shaping = c->req.shaping;
	a->shaping.ns_class = before.ns_class;
	a->shaping.pod_class = before.pod_class;
	if (node_shaping_classes(st, a) < 0) {
		if (!c->existing)
			ipam_release(st, a->container_id, a->ifname, time_boot_ms(), false, NULL);
		else
			a->shaping = before, a->ports = c->old_ports;
		return tg_fail(e, CNI_ERR_TRY_AGAIN, -ENOSPC,
			       "no free traffic class on the uplink for internet shaping");
	}
	c->got = *a;
	return !c->existing || memcmp(&before, &a->shaping, sizeof(before)) != 0 ||
	       !hostports_same(&c->old_ports, &a->ports);
}

struct release_ctx {
	const char *container_id;
	const char *ifname;
	bool cool;
	int released;
	/* An ADD undone: the cursor goes back from its address, unless another ADD moved it. */
	uint32_t undo_ip, undo_last_ip;
	struct acct_conn *held; /* node_pod_forget's socket, closed after the store's lock */
	struct tg_err flows;	/* conntrack entries left behind (reported, not a failure) */
};

static int release_fn(struct ipam_state *st, void *p, struct tg_err *e)
{
	struct release_ctx *c = p;
	const struct ipam_attachment *a = ipam_find(st, c->container_id, c->ifname);

	if (a && node_pod_forget(a, &c->held, &c->flows, e) < 0)
		return -EIO;
	c->released = ipam_release(st, c->container_id, c->ifname, time_boot_ms(), c->cool, NULL);
	if (c->released > 0 && c->undo_ip && st->last_ip == c->undo_ip)
		st->last_ip = c->undo_last_ip;
	return c->released;
}

/*
 * A DEL without a record (a repeated DEL): prevResult's address, if no one
 * holds it now, loses its elements; checked and removed under the store's
 * lock, so that an ADD given the address meanwhile keeps its own.
 */
struct orphan_ctx {
	uint32_t ip;
	bool removed;
	struct acct_conn *held;
	struct tg_err flows;
};

static int orphan_fn(struct ipam_state *st, void *p, struct tg_err *e)
{
	struct orphan_ctx *c = p;
	struct ipam_attachment gone = { .ip = c->ip };

	if (ipam_find_ip(st, c->ip))
		return 0;
	if (node_pod_forget(&gone, &c->held, &c->flows, e) < 0)
		return -EIO;
	c->removed = true;
	return 0;
}

/*
 * What succeeded with a caveat (conntrack entries left, no nf_tables to
 * clear): the runtime logs stderr; the call still succeeds.
 */
static void note_report(const char *cmd, const struct cni_env *env, const struct tg_err *note)
{
	if (tg_err_set(note))
		fprintf(stderr, "tollgate: %s of %.64s/%s: %s\n", cmd, env->container_id,
			env->ifname, note->msg);
}

static json_object *add_result_json(const struct node_config *cfg, const struct cni_env *env,
				    const struct ipam_attachment *a, int mtu)
{
	uint8_t pod_mac[6];
	struct cni_add_result res = {
		.host_veth = a->host_veth,
		.host_mac = node_host_mac,
		.ifname = env->ifname,
		.pod_mac = pod_mac,
		.netns = env->netns,
		.ip = a->ip,
		.mtu = mtu,
	};

	node_pod_mac(a->container_id, a->ifname, pod_mac);
	return cni_result_render(cfg->cni_version, cfg->version, &res);
}

/* Everything that can be refused is checked before the first change. */
static int add_prepare(struct session *s, const struct cni_env *env, const struct node_config *cfg,
		       struct assign_ctx *ac, struct node_uplink *up, struct tg_err *e)
{
	struct ipam_attachment *req = &ac->req;
	int r = open_netns(s, env->netns, e);
	bool inet;

	if (r == 0)
		r = open_route_socket(s, e);
	/* An interface of that name held by another: refused before the store changes. */
	if (r == 0)
		r = node_pod_ifname_check(s->netns_fd, env->container_id, env->ifname, &s->pod_sk,
					  e);
	if (r < 0)
		return r;
	snprintf(req->container_id, sizeof(req->container_id), "%s", env->container_id);
	snprintf(req->ifname, sizeof(req->ifname), "%s", env->ifname);
	snprintf(req->netns, sizeof(req->netns), "%s", env->netns);
	snprintf(req->k8s_namespace, sizeof(req->k8s_namespace), "%s", env->k8s_namespace);
	snprintf(req->pod, sizeof(req->pod), "%s", env->pod);
	node_veth_name(env->container_id, env->ifname, req->host_veth);
	req->created = time(NULL);
	node_shaping_request(cfg, env->k8s_namespace, &req->shaping);
	r = node_config_ports(cfg, &req->ports, e);
	if (r < 0)
		return r;

	/*
	 * The uplink sizes the MTU and carries internet shaping (the node's path,
	 * declared for every pod once the config shapes any): looked up once, if
	 * needed. A named one is always looked up: a config whose uplink does not
	 * exist fails every ADD alike, not only those that shape.
	 */
	inet = shaping_inet_egress(&req->shaping) || node_shapes_inet(cfg);
	up->mtu = cfg->mtu;
	if (cfg->mtu && !inet && !cfg->uplink[0])
		return 0;
	r = node_uplink(s->sk, cfg->uplink, cfg->mtu, up, e);
	if (r == 0 && inet && !up->ifindex)
		r = tg_fail(
			e, CNI_ERR_CONFIG, -ENODEV,
			"shaping.internetEgress needs an uplink: set \"uplink\" or a default route");
	return r;
}

int cmd_add(const struct cni_env *env, const struct node_config *cfg, cni_emit_fn emit,
	    void *emit_ctx, char ret_ip[IP4_STRLEN], struct shaping *ret_shaping, struct tg_err *e)
{
	struct session s;
	struct assign_ctx ac = { .cfg = cfg };
	struct node_uplink up = { 0 };
	struct node_pod pod;
	struct tg_err note = { 0 };
	json_object *res;
	int r;

	r = session_begin(&s, cfg, e);
	if (r == 0)
		r = add_prepare(&s, env, cfg, &ac, &up, e);
	if (r == 0) {
		*ret_shaping = ac.req.shaping;
		/* Record: the address (the same one again for a repeated ADD) and the shaping. */
		r = store_update(&s, cfg, assign_fn, &ac, e);
	}
	if (r < 0)
		goto out;
	ip4_format(ac.got.ip, ret_ip);
	r = TG_FAILPOINT("add.store.after", e);
	if (r < 0)
		goto undo;

	/* Apply, unless a repeated ADD finds the attachment healthy. */
	pod = (struct node_pod){ .a = &ac.got,
				 .netns_fd = s.netns_fd,
				 .pod_sk = s.pod_sk,
				 .uplink = &up };
	if (!ac.existing || !node_pod_intact(s.sk, cfg, &pod)) {
		r = node_pod_add(s.sk, cfg, &pod, &s.state, ac.existing, e);
		if (r < 0)
			goto undo;
	}

	/* Answer: once the runtime has the result, the pod is its. */
	res = add_result_json(cfg, env, &ac.got, up.mtu);
	r = res ? emit(res, emit_ctx, e) : tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	json_object_put(res);
	if (r == 0)
		goto out;
	if (!ac.existing) {
		node_pod_del(s.sk, &ac.got, &note, NULL);
		note_report("ADD", env, &note);
	}
undo:
	/* node_pod_add took its objects back; a new address goes back too. */
	if (!ac.existing) {
		struct release_ctx rc = { .container_id = env->container_id,
					  .ifname = env->ifname,
					  .undo_ip = ac.got.ip,
					  .undo_last_ip = ac.prev_last_ip };

		store_update(&s, cfg, release_fn, &rc, NULL);
		node_conn_close(rc.held);
		note_report("ADD", env, &rc.flows);
	}
out:
	session_end(&s);
	return r;
}

int cmd_del(const struct cni_env *env, const struct node_config *cfg, char ret_ip[IP4_STRLEN],
	    struct tg_err *e)
{
	struct session s;
	struct release_ctx rc = { .container_id = env->container_id,
				  .ifname = env->ifname,
				  .cool = true };
	struct ipam_attachment gone = { 0 };
	const struct ipam_attachment *a;
	struct tg_err why = { 0 }, note = { 0 };
	bool unreadable = false;
	int64_t t;
	int r, first;

	/*
	 * What to tear down. A lock-free read would do, but under the lock (held
	 * for the read alone) the store's cache spares parsing every attachment.
	 */
	t = time_mono_ns();
	r = session_begin(&s, cfg, &why);
	if (r == 0)
		r = TG_FAILPOINT("del.store.before", &why);
	if (r == 0)
		r = ipam_store_lock(&s.store, &why);
	if (r == 0) {
		r = ipam_store_load(&s.store, &s.state, &why);
		ipam_store_unlock(&s.store);
	}
	step_done(STEP_STORE, t);
	if (r < 0) {
		/*
		 * A store this build cannot open or read (its directory unusable,
		 * the file corrupt or written by a newer version) must not keep a
		 * pod from going: what the names and prevResult find is torn
		 * down, the store is left as it is.
		 */
		unreadable = true;
		fprintf(stderr,
			"tollgate: DEL of %.64s/%s without the store (%s): removing what the "
			"container's names and prevResult find; the store is left as it is\n",
			env->container_id, env->ifname, why.msg);
		ipam_state_free(&s.state);
		ipam_state_init(&s.state);
	}
	a = unreadable ? NULL : ipam_find(&s.state, env->container_id, env->ifname);
	if (a)
		gone = *a;
	else if (cni_prev_result_ip(cfg->prev_result, env->ifname, &gone.ip) == 0 && !unreadable) {
		struct orphan_ctx oc = { .ip = gone.ip };
		struct tg_err oe = { 0 };

		/* its elements, under the lock: the address may belong to another pod by now */
		if (store_update(&s, cfg, orphan_fn, &oc, &oe) < 0)
			fprintf(stderr,
				"tollgate: DEL of %.64s/%s: the elements of prevResult's "
				"address are left (%s)\n",
				env->container_id, env->ifname, oe.msg);
		node_conn_close(oc.held);
		note_report("DEL", env, &oc.flows);
		if (oc.removed)
			ip4_format(gone.ip, ret_ip);
		gone.ip = 0; /* the rest goes by the container's names */
	}
	/* The names follow from the container: without a record, they still find its objects. */
	node_veth_name(env->container_id, env->ifname, gone.host_veth);
	if (gone.ip)
		ip4_format(gone.ip, ret_ip);

	r = open_route_socket(&s, e);
	if (r < 0)
		goto out;
	/* Every step runs; the first error is the one reported. */
	first = node_pod_del(s.sk, &gone, &note, e);
	note_report("DEL", env, &note);
	/*
	 * The address goes back to the pool only once its objects are gone:
	 * released next to a live veth or class, it would reach another pod
	 * with them. The runtime retries a DEL that failed.
	 */
	if (!unreadable && (a || gone.ip) && first == 0) {
		r = TG_FAILPOINT("del.release.before", e);
		if (r == 0)
			r = store_update(&s, cfg, release_fn, &rc, e);
		node_conn_close(rc.held);
		note_report("DEL", env, &rc.flows);
		if (r == 0)
			r = TG_FAILPOINT("del.release.after", e);
		if (r < 0)
			first = r;
	}
	r = first;
out:
	session_end(&s);
	return r;
}

/* "5M (annotation)", "10M (config; the annotation 32G is above the cap 5M: ignored)". */
static const char *cap_text(uint64_t bps, const struct shaping_source *src, char *buf, size_t size)
{
	char v[24], a[24], c[24];

	rate_format(bps, v, sizeof(v));
	if (!bps)
		snprintf(v, sizeof(v), "none");
	if (!src)
		snprintf(buf, size, "%s", v);
	else if (src->ignored)
		snprintf(buf, size, "%s (config; the annotation %s is above the cap %s: ignored)",
			 v, rate_format(src->annot_bps, a, sizeof(a)),
			 rate_format(src->cap_bps, c, sizeof(c)));
	else
		snprintf(buf, size, "%s (%s)", v, src->annotation ? "annotation" : "config");
	return buf;
}

/* The first cap the record and the config disagree on, and where the config's comes from. */
static int shaping_drift(const struct shaping *want, const struct shaping *got, struct tg_err *e)
{
	const struct shaping_source eg = shaping_inet_egress_source(want),
				    in = shaping_inet_ingress_source(want);
	const struct {
		const char *what;
		uint64_t want, got;
		const struct shaping_source *src;
	} caps[] = {
		{ "Kubernetes ingress rate", want->ingress_bps, got->ingress_bps, NULL },
		{ "Kubernetes egress rate", want->egress_bps, got->egress_bps, NULL },
		{ "internet ingress cap", want->inet_ingress_bps, got->inet_ingress_bps, &in },
		{ "internet egress cap", want->inet_egress_bps, got->inet_egress_bps, &eg },
		{ "namespace internet egress cap", want->ns_egress_bps, got->ns_egress_bps, NULL },
		{ "node internet egress cap", want->node_egress_bps, got->node_egress_bps, NULL },
		{ "namespace internet ingress cap", want->ns_ingress_bps, got->ns_ingress_bps,
		  NULL },
		{ "node internet ingress cap", want->node_ingress_bps, got->node_ingress_bps,
		  NULL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(caps); i++) {
		char w[120], g[24];

		if (caps[i].want == caps[i].got)
			continue;
		return tg_fail(e, TG_ERR_DRIFT, -EINVAL,
			       "drift: the pod's %s is %s, its config gives %s (run `tollgate-ipam "
			       "reshape` after a policy change)",
			       caps[i].what, cap_text(caps[i].got, NULL, g, sizeof(g)),
			       cap_text(caps[i].want, caps[i].src, w, sizeof(w)));
	}
	return 0;
}

int cmd_check(const struct cni_env *env, const struct node_config *cfg, char ret_ip[IP4_STRLEN],
	      struct shaping *ret_shaping, struct tg_err *e)
{
	struct session s;
	const struct ipam_attachment *a;
	uint32_t prev_ip;
	int r;

	r = session_begin(&s, cfg, e);
	if (r < 0)
		goto out;
	r = ipam_store_load(&s.store, &s.state, e);
	if (r < 0)
		goto out;
	a = ipam_find(&s.state, env->container_id, env->ifname);
	if (!a) {
		r = tg_fail(e, CNI_ERR_UNKNOWN_CONTAINER, -ENOENT,
			    "container %.64s has no attachment on %s in network %s",
			    env->container_id, env->ifname, cfg->name);
		goto out;
	}
	ip4_format(a->ip, ret_ip);
	*ret_shaping = a->shaping;
	if (cfg->prev_result && cni_prev_result_ip(cfg->prev_result, env->ifname, &prev_ip) == 0 &&
	    prev_ip != a->ip) {
		char p[IP4_STRLEN];

		r = tg_fail(e, TG_ERR_DRIFT, -EINVAL,
			    "drift: prevResult gives %s but the store holds %s",
			    ip4_format(prev_ip, p), ret_ip);
		goto out;
	}
	{
		/* The recorded shaping must be what this config asks for. */
		struct shaping want;

		node_shaping_request(cfg, a->k8s_namespace, &want);
		r = shaping_drift(&want, &a->shaping, e);
		if (r < 0)
			goto out;
	}
	r = open_netns(&s, env->netns, e);
	if (r == 0)
		r = open_route_socket(&s, e);
	if (r == 0) {
		struct node_pod pod = { .a = a, .netns_fd = s.netns_fd };

		r = node_pod_check(s.sk, cfg, &pod, e);
	}
out:
	session_end(&s);
	return r;
}

int cmd_status(const struct node_config *cfg, struct tg_err *e)
{
	struct session s;
	struct tg_err sub = { 0 };
	int r;

	r = session_begin(&s, cfg, &sub);
	if (r == 0 && access(s.store.dir, W_OK) < 0)
		r = tg_fail(&sub, CNI_ERR_IO, -errno, "%s is not writable: %m", s.store.dir);
	if (r == 0)
		r = ipam_store_load(&s.store, &s.state, &sub);
	if (r == 0)
		r = node_state_refresh(&s.state, cfg, time_boot_ms(), &sub);
	if (r < 0) {
		r = tg_fail(e, CNI_ERR_NOT_AVAILABLE, r, "not ready: %s", sub.msg);
		goto out;
	}
	/*
	 * Not ready only when no ADD can succeed whatever happens next. A full
	 * pool is not that: a DEL frees an address, and the runtime turns a
	 * STATUS error into a NotReady node whose pods get evicted. ADD answers
	 * a full pool with code 11.
	 */
	if (s.state.n_pool == 0)
		r = tg_fail(
			e, CNI_ERR_NOT_AVAILABLE, -ENOSPC,
			"not ready: the address pool is empty (never synced: run `tollgate-ipam sync`)");
	r = r < 0 ? r : 0;
out:
	session_end(&s);
	return r;
}

static bool in_valid_list(json_object *valid, const struct ipam_attachment *a)
{
	size_t n = valid ? json_object_array_length(valid) : 0;

	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(valid, i), *cid, *ifn;

		if (json_object_object_get_ex(o, "containerID", &cid) &&
		    json_object_object_get_ex(o, "ifname", &ifn) &&
		    strcmp(json_object_get_string(cid), a->container_id) == 0 &&
		    strcmp(json_object_get_string(ifn), a->ifname) == 0)
			return true;
	}
	return false;
}

struct gc_ctx {
	const struct node_config *cfg;
	struct ipam_attachment *stale;
	size_t n_stale;
	bool release;
};

/* First pass collects the stale attachments; the second (after teardown) releases them. */
static int gc_fn(struct ipam_state *st, void *p, struct tg_err *e)
{
	struct gc_ctx *c = p;
	size_t i;

	/* Those whose teardown failed have no containerID: kept for the runtime's next GC. */
	if (c->release)
		return node_release_locked(st, c->stale, c->n_stale, e) > 0;
	c->stale = calloc(st->n_att ? st->n_att : 1, sizeof(*c->stale));
	if (!c->stale)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (i = 0; i < st->n_att; i++)
		if (!in_valid_list(c->cfg->valid_attachments, &st->att[i]))
			c->stale[c->n_stale++] = st->att[i];
	return 0;
}

int cmd_gc(const struct node_config *cfg, struct tg_err *e)
{
	struct session s;
	struct gc_ctx gc = { .cfg = cfg };
	int r, first = 0;

	/*
	 * No list is not "nothing is valid": older runtimes (and libcni with a
	 * nil list) send none, and collecting then would tear down every pod.
	 */
	if (!cfg->valid_attachments) {
		fprintf(stderr,
			"tollgate: GC without cni.dev/valid-attachments: nothing collected\n");
		return 0;
	}
	r = session_begin(&s, cfg, e);
	if (r < 0)
		goto out;
	r = store_update(&s, cfg, gc_fn, &gc, e);
	if (r == 0 && gc.n_stale)
		r = TG_FAILPOINT("gc.find.after", e);
	if (r < 0 || gc.n_stale == 0)
		goto out;
	r = open_route_socket(&s, e);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < gc.n_stale; i++) {
		struct tg_err note = { 0 };

		r = node_pod_del(s.sk, &gc.stale[i], &note, e);
		if (tg_err_set(&note))
			fprintf(stderr, "tollgate: GC of %.64s/%s: %s\n", gc.stale[i].container_id,
				gc.stale[i].ifname, note.msg);
		if (r < 0 && !first)
			first = r;
		/* Kept (not released) when its teardown failed: the next GC tries again. */
		if (r < 0)
			gc.stale[i].container_id[0] = '\0';
	}
	gc.release = true;
	r = TG_FAILPOINT("gc.release.before", e);
	if (r == 0)
		r = store_update(&s, cfg, gc_fn, &gc, e);
	if (r == 0)
		r = TG_FAILPOINT("gc.release.after", e);
	if (r == 0)
		r = first;
out:
	free(gc.stale);
	session_end(&s);
	return r;
}
