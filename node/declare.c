// SPDX-License-Identifier: Apache-2.0
/*
 * The node-wide declaration: what every pod of the node shares, declared from
 * the config by this one function and never rewritten per pod. The table's
 * skeleton (accounting/), the internet-shaping path (shaper/) and sysctls.
 * Each part reads the kernel once and changes only what differs.
 *
 * The node daemon runs it at start, on config change and on a timer; the
 * plugin first probes (a few reads) and declares only when something is
 * missing or the config changed, under a node-wide lock so that concurrent
 * first ADDs do the work once.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "accounting/accounting.h"
#include "lib/failpoint.h"
#include "lib/nl.h"
#include "lib/steps.h"
#include "lib/sysctls.h"
#include "lib/util.h"
#include "node/internal.h"
#include "shaper/shaper.h"

/*
 * 1 when set to its floor or pinned value (lib/sysctls.h), 0 when it
 * already satisfies it or is absent here (the neighbour table's thresholds
 * exist only in the host's first network namespace; ip_forward and the
 * conf/ ones always do), negative errno.
 */
static int sysctl_set(const struct tg_sysctl_floor *s, bool probe)
{
	char path[256], val[32];
	long cur;
	int fd, n;
	int got = tg_sysctl_read("/proc/sys", s, &cur);

	if (got == -ENOENT && s->min > 1)
		return 0;
	if (got == 0 && tg_sysctl_ok(s, cur))
		return 0;
	if (probe)
		return 1;
	tg_sysctl_path("/proc/sys", s, path, sizeof(path));
	n = snprintf(val, sizeof(val), "%ld\n", s->min);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, (size_t)n) != n) {
		int r = -errno;

		close(fd);
		return r;
	}
	close(fd);
	return 1;
}

/*
 * The ceiling of a namespace's tracked connections when the config names
 * none: a share of the node's conntrack table (nf_conntrack_max, the same
 * in every network namespace); the kernel's default table when conntrack
 * is not loaded yet.
 */
static uint32_t ns_connections_default(void)
{
	char line[32];
	long max = 262144;

	if (read_line_file("/proc/sys/net/netfilter/nf_conntrack_max", line, sizeof(line)) > 0) {
		char *end;
		long v = strtol(line, &end, 10);

		if (end != line && v > 0)
			max = v;
	}
	return (uint32_t)(max / ACCT_NS_CONNECTIONS_SHARE > 0 ? max / ACCT_NS_CONNECTIONS_SHARE
							      : 1);
}

struct acct_config node_acct_config(const struct node_config *cfg)
{
	struct acct_access access = cfg->access;
	struct acct_guard guard = cfg->guard;

	if (cfg->ns_connections_default)
		access.ns_connections = ns_connections_default();
	/* the ceiling is the first rule of each namespace's guard chain */
	guard.on = guard.on || access.ns_connections;
	return (struct acct_config){
		.internal = cfg->internal,
		.n_internal = cfg->n_internal,
		.masquerade = cfg->masquerade,
		.enabled = cfg->acct_enabled,
		.per_pod = cfg->acct_per_pod,
		.internet_mark = cfg->internet_mark,
		.inet_ingress_classid = SHAPER_INET_INGRESS_CLASS,
		.pod_link_prefix = NODE_VETH_PREFIX,
		.access = access,
		.guard = guard,
	};
}

struct acct_pod node_acct_pod(const struct ipam_attachment *a)
{
	return (struct acct_pod){
		.ip = a->ip,
		.k8s_namespace = a->k8s_namespace,
		.host_veth = a->host_veth,
		.egress_classid = shaper_egress_classid(&a->shaping),
		.ingress_classid = shaper_ingress_classid(&a->shaping),
		.ports = &a->ports,
	};
}

bool node_shapes_inet(const struct node_config *cfg)
{
	const struct shaping_policy *p = &cfg->shaping;

	return p->node_egress || p->ns_egress_default || p->pod_egress_default ||
	       (p->ns_egress && json_object_object_length(p->ns_egress) > 0) ||
	       cfg->budgets.allocator;
}

bool node_shapes_inet_in(const struct node_config *cfg)
{
	const struct shaping_policy *p = &cfg->shaping;

	return p->node_ingress || p->ns_ingress_default || p->pod_ingress_default ||
	       (p->ns_ingress && json_object_object_length(p->ns_ingress) > 0) ||
	       cfg->budgets.allocator;
}

unsigned node_inet_needs(const struct shaping *s)
{
	return (shaping_inet_egress(s) ? NODE_DECLARE_INET : 0) |
	       (shaping_inet_ingress(s) ? NODE_DECLARE_INET_IN : 0);
}

static void shaper_node_of(const struct node_config *cfg, const struct node_uplink *up,
			   unsigned flags, struct shaper_node *ret)
{
	*ret = (struct shaper_node){
		.uplink = up ? up->ifindex : 0,
		.internal = cfg->internal,
		.n_internal = cfg->n_internal,
		.node_ceil_bps = cfg->shaping.node_egress ? cfg->shaping.node_egress
							  : SHAPER_LINE_BPS,
		.mtu = up ? up->mtu : 1500,
		.egress = node_shapes_inet(cfg) || (flags & NODE_DECLARE_INET),
		.ingress = node_shapes_inet_in(cfg) || (flags & NODE_DECLARE_INET_IN),
		.in_ceil_bps = cfg->shaping.node_ingress ? cfg->shaping.node_ingress
							 : SHAPER_LINE_BPS,
	};
}

/* After a root was made anew: every pod's classes on the node's IFBs go back in. */
static int restore_classes(struct nl_sock *sk, const struct node_config *cfg,
			   const struct node_uplink *up, const struct ipam_state *st, int ifb,
			   unsigned *restored, struct tg_err *e)
{
	for (size_t i = 0; st && i < st->n_att; i++) {
		const struct ipam_attachment *a = &st->att[i];
		const struct shaping inet = a->shaping;

		if ((!shaping_inet_egress(&inet) && !shaping_inet_ingress(&inet)) ||
		    !inet.pod_class)
			continue;
		/* Only the part on the node's IFBs: the pod's own devices kept theirs. */
		if (shaper_pod_restore(sk, a->host_veth, ifb, &inet, cfg->shaping.queue_ms,
				       up ? up->mtu : 1500, e) < 0)
			return -EIO;
		(*restored)++;
	}
	return 0;
}

static struct acct_pod *acct_pods_of(const struct ipam_state *st)
{
	struct acct_pod *all = calloc((st ? st->n_att : 0) + 1, sizeof(*all));

	for (size_t i = 0; all && st && i < st->n_att; i++)
		all[i] = node_acct_pod(&st->att[i]);
	return all;
}

int node_declare(struct nl_sock *sk, const struct node_config *cfg, const struct node_uplink *up,
		 const struct ipam_state *st, unsigned flags, struct node_repairs *ret,
		 struct tg_err *e)
{
	struct node_repairs rep = { 0 };
	struct acct_config acct = node_acct_config(cfg);
	struct acct_pod *all = acct_pods_of(st);
	bool lost = false;
	int r = 0, ifb = 0;

	if (!all)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < tg_sysctl_floors_n && r >= 0; i++) {
		r = sysctl_set(&tg_sysctl_floors[i], false);
		if (r == -EROFS && (flags & NODE_DECLARE_SYSCTL_RO)) {
			rep.sysctls_readonly++;
			r = 0;
		} else if (r < 0)
			r = tg_fail(e, CNI_ERR_IO, r, "cannot set %s: %s", tg_sysctl_floors[i].name,
				    strerror(-r));
		else
			rep.sysctls += (unsigned)r;
	}
	if (r >= 0)
		r = TG_FAILPOINT("declare.nft.before", e);
	if (r >= 0)
		r = acct_declare(&acct, all, st ? st->n_att : 0,
				 flags & NODE_DECLARE_PODS ? ACCT_DECLARE_PODS : 0, &rep.nft, e);
	/* Every pod's elements as the store says: missing ones back, stray ones out. */
	if (r >= 0 && st)
		r = acct_pods_reconcile(&acct, all, st->n_att, &rep.nft.pods_added,
					&rep.nft.pods_removed, e);
	if (r >= 0)
		r = TG_FAILPOINT("declare.nft.after", e);
	if (r >= 0 && (node_shapes_inet(cfg) || node_shapes_inet_in(cfg) ||
		       (flags & (NODE_DECLARE_INET | NODE_DECLARE_INET_IN)))) {
		struct shaper_node sn;

		shaper_node_of(cfg, up, flags, &sn);
		r = shaper_node_declare(sk, &sn, flags & NODE_DECLARE_RESTORE ? SHAPER_RESTORE : 0,
					&rep.tc, &lost, &ifb, e);
		if (r >= 0)
			r = TG_FAILPOINT("declare.tc.after", e);
		if (r >= 0 && lost)
			r = restore_classes(sk, cfg, up, st, ifb, &rep.classes_restored, e);
		if (r >= 0 && lost)
			r = TG_FAILPOINT("declare.restore.after", e);
		if (r >= 0 && lost)
			r = shaper_node_stamp(sk, &sn, ifb, e);
	}
	free(all);
	if (ret)
		*ret = rep;
	return r < 0 ? r : 0;
}

int node_declare_from_store(struct nl_sock *sk, const struct node_config *cfg,
			    const struct node_uplink *up, struct ipam_store *store, unsigned flags,
			    struct node_repairs *ret, struct tg_err *e)
{
	struct ipam_state st = { 0 };
	int r = TG_FAILPOINT("declare.store.before", e);

	if (r == 0)
		r = ipam_store_lock(store, e);

	if (r < 0)
		return r;
	r = ipam_store_load(store, &st, e);
	if (r == 0)
		r = node_declare(sk, cfg, up, &st, flags, ret, e);
	ipam_store_unlock(store);
	ipam_state_free(&st);
	return r;
}

/*
 * Whether the node holds what cfg declares (read only): 0 when it does, 1
 * when not, 2 when the probe had to give the HTB root its 1:1 back (a
 * declaration with NODE_DECLARE_RESTORE then puts every class right).
 * ip_forward, the table's rules and set internal, and with `inet` the path.
 */
static int node_probe(struct nl_sock *sk, const struct node_config *cfg,
		      const struct node_uplink *up, unsigned inet, int *ret_ifb)
{
	struct acct_config acct = node_acct_config(cfg);
	int r = sysctl_set(&tg_sysctl_floors[0], true); /* ip_forward */

	if (r == 0)
		r = acct_declared(&acct) == 1 ? 0 : 1;
	if (r == 0 && inet) {
		struct shaper_node sn;

		shaper_node_of(cfg, up, inet, &sn);
		r = shaper_node_declare(sk, &sn, SHAPER_PROBE, NULL, NULL, ret_ifb, NULL);
		r = r == 0 || r == 2 ? r : 1;
	}
	return r;
}

static int node_lock(const struct node_config *cfg, struct tg_err *e)
{
	char path[PATH_MAX + 16];
	int fd;

	if (snprintf(path, sizeof(path), "%s/node.lock", cfg->data_dir) >= (int)sizeof(path))
		return tg_fail(e, CNI_ERR_CONFIG, -ENAMETOOLONG, "dataDir is too long");
	if (mkdir_p(cfg->data_dir, 0700) < 0)
		return tg_fail(e, CNI_ERR_IO, -errno, "cannot create %s: %m", cfg->data_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return tg_fail(e, CNI_ERR_IO, -errno, "cannot open %s: %m", path);
	if (flock(fd, LOCK_EX) < 0) {
		int r = -errno;

		close(fd);
		return tg_fail(e, CNI_ERR_IO, r, "cannot lock %s: %s", path, strerror(-r));
	}
	return fd;
}

/*
 * The pods as the store holds them under its lock now, not as the caller
 * last read them: a DEL or ADD since then must not be undone by the sets.
 */
static int declare_from_store_now(struct nl_sock *sk, const struct node_config *cfg,
				  const struct node_uplink *up, unsigned flags, struct tg_err *e)
{
	struct ipam_store store;
	int r = ipam_store_open(&store, cfg->data_dir, cfg->name, e);

	if (r == 0)
		r = node_declare_from_store(sk, cfg, up, &store, flags, NULL, e);
	ipam_store_close(&store);
	return r;
}

int node_ensure(struct nl_sock *sk, const struct node_config *cfg, const struct node_uplink *up,
		const struct ipam_state *st, unsigned need_inet, int *ret_ifb, struct tg_err *e)
{
	unsigned inet = need_inet | (node_shapes_inet(cfg) ? NODE_DECLARE_INET : 0) |
			(node_shapes_inet_in(cfg) ? NODE_DECLARE_INET_IN : 0);
	int64_t t0 = time_mono_ns();
	int r, fd;

	unsigned flags = inet;

	*ret_ifb = 0;
	r = node_probe(sk, cfg, up, inet, ret_ifb);
	if (r == 0) {
		step_done(STEP_NODE, t0);
		return 0;
	}
	/* Missing or declared for another config: once, whoever comes first. */
	fd = node_lock(cfg, e);
	if (fd < 0)
		return fd;
	flags |= r == 2 ? NODE_DECLARE_RESTORE : 0;
	r = node_probe(sk, cfg, up, inet, ret_ifb);
	flags |= r == 2 ? NODE_DECLARE_RESTORE : 0;
	if (r != 0 || (flags & NODE_DECLARE_RESTORE)) {
		r = declare_from_store_now(sk, cfg, up, flags, e);
		if (r == 0 && inet)
			r = node_probe(sk, cfg, up, inet, ret_ifb) == 0
				    ? 0
				    : tg_fail(e, CNI_ERR_IO, -EAGAIN,
					      "the node's internet-shaping path changed while "
					      "it was declared");
	}
	close(fd);
	step_done(STEP_NODE, t0);
	return r;
}

int node_retire(struct nl_sock *sk, const struct ipam_state *st, unsigned *ret_retired,
		struct tg_err *e)
{
	uint16_t *keep = calloc(4 * st->n_att + 1, sizeof(*keep)), *keep_in;
	size_t n = 0, n_in = 0;
	int r;

	if (!keep)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	keep_in = keep + 2 * st->n_att;
	for (size_t i = 0; i < st->n_att; i++) {
		const struct shaping *s = &st->att[i].shaping;

		if (!s->pod_class)
			continue;
		if (shaping_inet_egress(s)) {
			keep[n++] = s->ns_class;
			keep[n++] = s->pod_class;
		}
		if (shaping_inet_ingress(s)) {
			keep_in[n_in++] = s->ns_class;
			keep_in[n_in++] = s->pod_class;
		}
	}
	r = shaper_retire_classes(sk, keep, keep_in, n, n_in, ret_retired);
	free(keep);
	return r < 0 ? tg_fail_kernel(e, r, "tc: retiring classes of %s", SHAPER_INET_IFB) : 0;
}
