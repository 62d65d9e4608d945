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
#include "lib/cleanup.h"
#include "lib/nl.h"
#include "lib/util.h"

struct session {
	struct ipam_store store;
	struct ipam_state state;
	struct nl_sock *sk;
	int netns_fd;
};

static void session_end(struct session *s)
{
	ipam_state_free(&s->state);
	ipam_store_close(&s->store);
	if (s->sk)
		nl_socket_free(s->sk);
	if (s->netns_fd >= 0)
		close(s->netns_fd);
}

static int session_begin(struct session *s, const struct tg_config *cfg, struct tg_err *e)
{
	memset(s, 0, sizeof(*s));
	s->netns_fd = -1;
	s->store.lock_fd = -1;
	ipam_state_init(&s->state);
	return ipam_store_open(&s->store, cfg->data_dir, cfg->name, e);
}

static int open_route_socket(struct session *s, struct tg_err *e)
{
	int r = nl_route_open(&s->sk);

	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot open a netlink socket: %s", strerror(-r));
	return 0;
}

/*
 * Internet shaping sits on the uplink: it must exist before anything is
 * changed. `ifindex` is the uplink when the MTU lookup already found it (0:
 * none), or negative when it was not looked up.
 */
static bool uplink_known(struct nl_sock *sk, const struct tg_config *cfg, int ifindex,
			 struct tg_err *e)
{
	int mtu;

	if (ifindex < 0 && cfg->uplink[0] && cni_uplink_mtu(sk, cfg->uplink, &mtu, &ifindex, e) < 0)
		return false; /* a named uplink that does not exist */
	if (ifindex < 0 && nl_default_route_ifindex(sk, &ifindex) < 0)
		ifindex = 0;
	if (!ifindex)
		tg_fail(e, CNI_ERR_CONFIG, -ENODEV,
			"shaping.internetEgress needs an uplink: set \"uplink\" or a default route");
	return ifindex > 0;
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

/*
 * Under the lock: a new boot id drops every attachment (they died with the
 * boot), and the static pool follows the config. Returns 1 when the state
 * changed and must be saved.
 */
static int refresh_state(struct ipam_state *st, const struct tg_config *cfg, int64_t now_ms,
			 struct tg_err *e)
{
	char boot_id[64];
	int changed = 0, r;

	r = ipam_read_boot_id(boot_id, sizeof(boot_id));
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r, "cannot read the boot id: %s", strerror(-r));
	if (strcmp(st->boot_id, boot_id) != 0) {
		ipam_check_boot(st, boot_id);
		changed = 1;
	}
	if (cfg->source == IPAM_SOURCE_STATIC &&
	    (st->n_pool != cfg->n_pool || strcmp(st->source, "static") != 0 ||
	     memcmp(st->pool, cfg->pool, cfg->n_pool * sizeof(*cfg->pool)) != 0)) {
		uint32_t *copy = malloc(cfg->n_pool * sizeof(*copy));

		if (!copy)
			return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
		memcpy(copy, cfg->pool, cfg->n_pool * sizeof(*copy));
		ipam_set_pool(st, "static", copy, cfg->n_pool);
		changed = 1;
	}
	if (st->n_cooling) {
		size_t before = st->n_cooling;

		ipam_expire_cooling(st, now_ms, cfg->cooldown_ms);
		changed |= before != st->n_cooling;
	}
	return changed;
}

/* lock → load → fn → save (when fn changed something) → unlock */
typedef int (*update_fn)(struct ipam_state *st, void *ctx, struct tg_err *e);

static int store_update(struct session *s, const struct tg_config *cfg, update_fn fn, void *ctx,
			struct tg_err *e)
{
	int64_t now = time_now_ms();
	int r, changed;

	r = ipam_store_lock(&s->store, e);
	if (r < 0)
		return r;
	ipam_state_free(&s->state);
	r = ipam_store_load(&s->store, &s->state, e);
	if (r < 0)
		goto out;
	r = refresh_state(&s->state, cfg, now, e);
	if (r < 0)
		goto out;
	changed = r;
	r = fn(&s->state, ctx, e);
	if (r < 0)
		goto out;
	if (changed || r > 0)
		r = ipam_store_save(&s->store, &s->state, e);
out:
	ipam_store_unlock(&s->store);
	return r < 0 ? r : 0;
}

struct assign_ctx {
	const struct tg_config *cfg;
	struct ipam_attachment req;
	struct ipam_attachment got;
	bool existing;
};

static int assign_fn(struct ipam_state *st, void *p, struct tg_err *e)
{
	struct assign_ctx *c = p;
	struct ipam_attachment *a;
	struct shaping before;
	int r = ipam_assign(st, &c->req, time_now_ms(), c->cfg->cooldown_ms, &c->got, &c->existing, e);

	if (r < 0)
		return r;
	/* The shaping this ADD asks for replaces the recorded one; its classes stay. */
	a = (struct ipam_attachment *)ipam_find(st, c->req.container_id, c->req.ifname);
	before = a->shaping;
	a->shaping = c->req.shaping;
	a->shaping.ns_class = before.ns_class;
	a->shaping.pod_class = before.pod_class;
	if (cni_shaping_classes(st, a) < 0) {
		if (!c->existing)
			ipam_release(st, a->container_id, a->ifname, time_now_ms(), false, NULL);
		else
			a->shaping = before;
		return tg_fail(e, CNI_ERR_TRY_AGAIN, -ENOSPC,
			       "no free traffic class on the uplink for internet shaping");
	}
	c->got = *a;
	return !c->existing || memcmp(&before, &a->shaping, sizeof(before)) != 0;
}

struct release_ctx {
	const char *container_id;
	const char *ifname;
	bool cool;
	int released;
};

static int release_fn(struct ipam_state *st, void *p, struct tg_err *e)
{
	struct release_ctx *c = p;

	c->released = ipam_release(st, c->container_id, c->ifname, time_now_ms(), c->cool, NULL);
	return c->released;
}

int cmd_add(const struct cni_env *env, const struct tg_config *cfg, json_object **ret,
	    char ret_ip[IP4_STRLEN], struct tg_err *e)
{
	struct session s;
	struct assign_ctx ac = { .cfg = cfg };
	struct acct_config acct = cni_config_acct(cfg);
	struct plumb_req rq = { 0 };
	struct cni_add_result res;
	struct acct_pod me;
	struct shaping spec;
	_cleanup_free_ struct acct_pod *all = NULL;
	int mtu = cfg->mtu, uplink = -1, r;

	r = session_begin(&s, cfg, e);
	if (r < 0)
		goto out;
	/* Everything that can be refused is checked before the first change. */
	r = open_netns(&s, env->netns, e);
	if (r < 0)
		goto out;
	r = open_route_socket(&s, e);
	if (r < 0)
		goto out;
	if (!mtu && (r = cni_uplink_mtu(s.sk, cfg->uplink, &mtu, &uplink, e)) < 0)
		goto out;

	snprintf(ac.req.container_id, sizeof(ac.req.container_id), "%s", env->container_id);
	snprintf(ac.req.ifname, sizeof(ac.req.ifname), "%s", env->ifname);
	snprintf(ac.req.netns, sizeof(ac.req.netns), "%s", env->netns);
	snprintf(ac.req.k8s_namespace, sizeof(ac.req.k8s_namespace), "%s", env->k8s_namespace);
	snprintf(ac.req.pod, sizeof(ac.req.pod), "%s", env->pod);
	plumb_host_veth_name(env->container_id, env->ifname, ac.req.host_veth);
	ac.req.created = time(NULL);
	cni_shaping_of_request(cfg, env->k8s_namespace, &ac.req.shaping);
	spec = ac.req.shaping;
	if (shaping_inet_egress(&spec) && !uplink_known(s.sk, cfg, uplink, e)) {
		r = -ENODEV;
		goto out;
	}

	r = store_update(&s, cfg, assign_fn, &ac, e);
	if (r < 0)
		goto out;
	ip4_format(ac.got.ip, ret_ip);
	spec = ac.got.shaping;
	me = cni_acct_pod(&ac.got);

	rq.host_ifname = ac.got.host_veth;
	rq.pod_ifname = env->ifname;
	rq.netns_fd = s.netns_fd;
	rq.ip = ac.got.ip;
	rq.mtu = mtu;
	plumb_pod_mac(env->container_id, env->ifname, rq.pod_mac);

	r = plumb_enable_forwarding(e);
	if (r < 0)
		goto undo;
	/* A repeated ADD leaves a healthy attachment as it is. */
	if (ac.existing && plumb_check(s.sk, &rq, NULL) == 0 &&
	    acct_pod_check(&me, cfg->masquerade, NULL) == 1 &&
	    shaper_pod_check(s.sk, ac.got.host_veth, &spec, NULL) == 0)
		goto done;
	r = plumb_add(s.sk, &rq, e);
	if (r < 0)
		goto undo;
	if (shaping_any(&spec)) {
		r = shaper_pod_add(s.sk, ac.got.host_veth, cfg->uplink, &spec, cfg->internal,
				   cfg->n_internal, cfg->shaping.queue_ms, mtu, e);
		if (r < 0)
			goto undo;
	}
	/* Every pod, for the rebuild of a table someone flushed. */
	all = cni_acct_pods(&s.state);
	r = all ? acct_pod_add(&acct, &me, all, s.state.n_att, e)
		: tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	if (r < 0)
		goto undo;
done:
	res = (struct cni_add_result){
		.host_veth = ac.got.host_veth,
		.host_mac = plumb_host_mac,
		.ifname = env->ifname,
		.pod_mac = rq.pod_mac,
		.netns = env->netns,
		.ip = ac.got.ip,
		.mtu = mtu,
	};
	*ret = cni_result_render(cfg->cni_version, cfg->version, &res);
	if (!*ret)
		r = tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	goto out;

undo:
	/* Put the node back as it was: kernel objects first, then the address. */
	if (!ac.existing)
		acct_pod_del(&me, NULL);
	shaper_pod_del(s.sk, ac.got.host_veth, &spec, NULL);
	plumb_del(s.sk, ac.got.host_veth, NULL);
	if (!ac.existing) {
		struct release_ctx rc = { env->container_id, env->ifname, false, 0 };

		store_update(&s, cfg, release_fn, &rc, NULL);
	}
out:
	session_end(&s);
	return r;
}

int cmd_del(const struct cni_env *env, const struct tg_config *cfg, char ret_ip[IP4_STRLEN],
	    struct tg_err *e)
{
	struct session s;
	struct release_ctx rc = { env->container_id, env->ifname, true, 0 };
	char host_veth[IFNAMSIZ];
	const struct ipam_attachment *a;
	struct shaping spec = { 0 };
	uint32_t ip = 0;
	int r, first = 0;

	r = session_begin(&s, cfg, e);
	if (r < 0)
		goto out;
	/* A lock-free read is enough to learn what to tear down. */
	r = ipam_store_load(&s.store, &s.state, e);
	if (r < 0)
		goto out;
	plumb_host_veth_name(env->container_id, env->ifname, host_veth);
	a = ipam_find(&s.state, env->container_id, env->ifname);
	if (a) {
		spec = a->shaping;
		ip = a->ip;
	} else if (cni_prev_result_ip(cfg->prev_result, env->ifname, &ip) == 0 &&
		 ipam_find_ip(&s.state, ip))
		ip = 0; /* a repeated DEL: the address already belongs to another pod */

	r = open_route_socket(&s, e);
	if (r < 0)
		goto out;
	/* Every step runs; the first error is the one reported. */
	if (ip) {
		ip4_format(ip, ret_ip);
		struct acct_pod p = { .ip = ip, .k8s_namespace = "", .host_veth = host_veth };

		first = acct_pod_del(&p, e);
	}
	/* The IFB goes even without a record; uplink classes need the record's ids. */
	r = shaper_pod_del(s.sk, host_veth, a ? &spec : NULL, e);
	if (r < 0 && !first)
		first = r;
	r = plumb_del(s.sk, host_veth, e);
	if (r < 0 && !first)
		first = r;
	if (a || ip) {
		r = store_update(&s, cfg, release_fn, &rc, e);
		if (r < 0 && !first)
			first = r;
	}
	r = first;
out:
	session_end(&s);
	return r;
}

int cmd_check(const struct cni_env *env, const struct tg_config *cfg, char ret_ip[IP4_STRLEN],
	      struct tg_err *e)
{
	struct session s;
	const struct ipam_attachment *a;
	struct plumb_req rq = { 0 };
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
	if (cfg->prev_result && cni_prev_result_ip(cfg->prev_result, env->ifname, &prev_ip) == 0 &&
	    prev_ip != a->ip) {
		char p[IP4_STRLEN];

		r = tg_fail(e, TG_ERR_DRIFT, -EINVAL,
			    "drift: prevResult gives %s but the store holds %s", ip4_format(prev_ip, p),
			    ret_ip);
		goto out;
	}
	r = open_netns(&s, env->netns, e);
	if (r < 0)
		goto out;
	r = open_route_socket(&s, e);
	if (r < 0)
		goto out;
	rq.host_ifname = a->host_veth;
	rq.pod_ifname = env->ifname;
	rq.netns_fd = s.netns_fd;
	rq.ip = a->ip;
	r = plumb_check(s.sk, &rq, e);
	if (r < 0)
		goto out;
	{
		/* The recorded shaping must be what this config asks for, and be in the kernel. */
		struct shaping want;
		struct shaping spec = a->shaping;

		cni_shaping_of_request(cfg, a->k8s_namespace, &want);
		if (want.ingress_bps != a->shaping.ingress_bps ||
		    want.egress_bps != a->shaping.egress_bps ||
		    want.inet_ingress_bps != a->shaping.inet_ingress_bps ||
		    want.inet_egress_bps != a->shaping.inet_egress_bps ||
		    want.ns_egress_bps != a->shaping.ns_egress_bps ||
		    want.node_egress_bps != a->shaping.node_egress_bps) {
			r = tg_fail(e, TG_ERR_DRIFT, -EINVAL,
				    "drift: the pod's shaping differs from its config (run "
				    "`tollgate-ipam reshape` after a policy change)");
			goto out;
		}
		r = shaper_pod_check(s.sk, a->host_veth, &spec, e);
		if (r < 0)
			goto out;
	}
	{
		struct acct_pod p = cni_acct_pod(a);

		r = acct_pod_check(&p, cfg->masquerade, e);
	}
	if (r == 0)
		r = tg_fail(e, TG_ERR_DRIFT, -ENOENT,
			    "drift: the elements of %s in table inet tollgate (sets pods, masq, map "
			    "ns_egress_internal) do not match the config (masquerade %s)",
			    ret_ip, cfg->masquerade ? "true" : "false");
	r = r < 0 ? r : 0;
out:
	session_end(&s);
	return r;
}

int cmd_status(const struct tg_config *cfg, struct tg_err *e)
{
	struct session s;
	struct ipam_counts c;
	struct tg_err sub = { 0 };
	int r;

	r = session_begin(&s, cfg, &sub);
	if (r == 0 && access(s.store.dir, W_OK) < 0)
		r = tg_fail(&sub, CNI_ERR_IO, -errno, "%s is not writable: %m", s.store.dir);
	if (r == 0)
		r = ipam_store_load(&s.store, &s.state, &sub);
	if (r == 0)
		r = refresh_state(&s.state, cfg, time_now_ms(), &sub);
	if (r < 0) {
		r = tg_fail(e, CNI_ERR_NOT_AVAILABLE, r, "not ready: %s", sub.msg);
		goto out;
	}
	ipam_count(&s.state, time_now_ms(), cfg->cooldown_ms, &c);
	if (c.total == 0)
		r = tg_fail(e, CNI_ERR_NOT_AVAILABLE, -ENOSPC,
			    "not ready: the address pool is empty (run `tollgate-ipam sync`)");
	else if (c.free == 0)
		r = tg_fail(e, CNI_ERR_NOT_AVAILABLE, -ENOSPC,
			    "not ready: no free address (%zu of %zu in use, %zu cooling down)",
			    c.allocated, c.total, c.cooling);
	r = r < 0 ? r : 0;
out:
	session_end(&s);
	return r;
}

static bool listed(json_object *valid, const struct ipam_attachment *a)
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

int cni_teardown(struct nl_sock *sk, const struct ipam_attachment *a, struct tg_err *e)
{
	struct acct_pod p = cni_acct_pod(a);
	struct shaping spec = a->shaping;
	int first = acct_pod_del(&p, e), r;

	r = shaper_pod_del(sk, a->host_veth, &spec, e);
	if (r < 0 && !first)
		first = r;
	r = plumb_del(sk, a->host_veth, e);
	return first ? first : r;
}

struct gc_ctx {
	const struct tg_config *cfg;
	struct ipam_attachment *stale;
	size_t n_stale;
	bool release;
};

/* First pass collects the stale attachments; the second (after teardown) releases them. */
static int gc_fn(struct ipam_state *st, void *p, struct tg_err *e)
{
	struct gc_ctx *c = p;
	size_t i;

	if (c->release) {
		int n = 0;

		for (i = 0; i < c->n_stale; i++)
			n += ipam_release(st, c->stale[i].container_id, c->stale[i].ifname,
					  time_now_ms(), true, NULL);
		return n > 0;
	}
	c->stale = calloc(st->n_att ? st->n_att : 1, sizeof(*c->stale));
	if (!c->stale)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (i = 0; i < st->n_att; i++)
		if (!listed(c->cfg->valid_attachments, &st->att[i]))
			c->stale[c->n_stale++] = st->att[i];
	return 0;
}

int cmd_gc(const struct tg_config *cfg, struct tg_err *e)
{
	struct session s;
	struct gc_ctx gc = { .cfg = cfg };
	int r, first = 0;

	r = session_begin(&s, cfg, e);
	if (r < 0)
		goto out;
	r = store_update(&s, cfg, gc_fn, &gc, e);
	if (r < 0 || gc.n_stale == 0)
		goto out;
	r = open_route_socket(&s, e);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < gc.n_stale; i++) {
		r = cni_teardown(s.sk, &gc.stale[i], e);
		if (r < 0 && !first)
			first = r;
	}
	gc.release = true;
	r = store_update(&s, cfg, gc_fn, &gc, e);
	if (r == 0)
		r = first;
out:
	free(gc.stale);
	session_end(&s);
	return r;
}
