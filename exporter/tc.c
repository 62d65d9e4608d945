// SPDX-License-Identifier: Apache-2.0
/*
 * The shaper collector: statistics of the HTB classes Tollgate made (see
 * shaper/shaper.h), one netlink dump per device that holds some:
 *   the uplink's IFB tollgate-inet  1:1 node, 1:<ns> namespace, 1:<pod> pod
 *                                   (internet egress): one dump for them all
 *   a pod's host veth               1:1 all, 1:2 internet, 1:3 internal ingress
 *   a pod's IFB ti<hash>            1:1 all egress
 * Only devices of pods the store says are shaped are read. Class counters
 * start again when a class is made again (a reshape, a pod re-created).
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter/internal.h"
#include "lib/nl.h"
#include "lib/util.h"
#include "shaper/shaper.h"

#define LEVELS (SHAPER_NODE + 1)

struct tc_row {
	enum shaper_level level;
	const char *k8s_namespace, *pod, *direction, *traffic;
	struct shaper_stats st;
};

/* Devices to read, by name, with their ifindex once known (kept across scrapes). */
struct tc_dev {
	char name[IFNAMSIZ];
	int ifindex;
};

struct tc_collector {
	struct nl_sock *sk;
	struct tc_dev *devs; /* sorted by name */
	size_t n_devs;
	uint64_t devs_store; /* the store generation they were listed for */
	struct tc_row *rows;
	size_t n_rows, cap_rows;
	struct shaper_stats *classes; /* the device being read */
	size_t n_classes, cap_classes;
	int err;
};

struct tc_collector *tc_collector_new(void)
{
	return calloc(1, sizeof(struct tc_collector));
}

void tc_collector_free(struct tc_collector *tc)
{
	if (!tc)
		return;
	if (tc->sk)
		nl_socket_free(tc->sk);
	free(tc->rows);
	free(tc->classes);
	free(tc->devs);
	free(tc);
}

static void on_class(const struct shaper_stats *st, void *arg)
{
	struct tc_collector *tc = arg;

	if (!array_grow(&tc->classes, &tc->cap_classes, tc->n_classes, sizeof(*tc->classes), 16)) {
		tc->err = -ENOMEM;
		return;
	}
	tc->classes[tc->n_classes++] = *st;
}

static int cmp_dev(const void *a, const void *b)
{
	return strcmp(((const struct tc_dev *)a)->name, ((const struct tc_dev *)b)->name);
}

static struct tc_dev *find_dev(struct tc_dev *devs, size_t n, const char *name)
{
	struct tc_dev key = { 0 };

	if (!n)
		return NULL; /* bsearch wants an array, even an empty one */
	snprintf(key.name, sizeof(key.name), "%s", name);
	return bsearch(&key, devs, n, sizeof(*devs), cmp_dev);
}

/*
 * Lists the devices the store's shaped pods use, keeping the ifindex already
 * known for each: resolving a name costs three system calls, and a scrape may
 * read hundreds of devices.
 */
static int list_devices(struct tc_collector *tc, const struct ipam_state *st, uint64_t store)
{
	struct tc_dev *devs = calloc(3 * st->n_att + 2, sizeof(*devs));
	size_t n = 0, inet_listed = 0, in_listed = 0;

	if (!devs)
		return -ENOMEM;
	for (size_t i = 0; i < st->n_att; i++) {
		struct shaper_class cls[SHAPER_POD_CLASSES_MAX];
		int k = shaper_pod_classes(st->att[i].host_veth, &st->att[i].shaping, cls);

		for (int j = 0; j < k; j++) {
			bool inet = strcmp(cls[j].dev, SHAPER_INET_IFB) == 0,
			     in = strcmp(cls[j].dev, SHAPER_INET_IN_IFB) == 0;

			/* A pod's classes of one device come together; the node's IFBs once. */
			if ((inet && inet_listed++) || (in && in_listed++) ||
			    (j && strcmp(cls[j].dev, cls[j - 1].dev) == 0))
				continue;
			memcpy(devs[n++].name, cls[j].dev, IFNAMSIZ);
		}
	}
	qsort(devs, n, sizeof(*devs), cmp_dev);
	for (size_t i = 0; i < n; i++) {
		const struct tc_dev *old = find_dev(tc->devs, tc->n_devs, devs[i].name);

		devs[i].ifindex = old ? old->ifindex : 0;
	}
	free(tc->devs);
	tc->devs = devs;
	tc->n_devs = n;
	tc->devs_store = store;
	return 0;
}

static int cmp_classid(const void *a, const void *b)
{
	uint32_t x = ((const struct shaper_stats *)a)->classid;
	uint32_t y = ((const struct shaper_stats *)b)->classid;

	return x < y ? -1 : x > y;
}

static int dump_device(struct tc_collector *tc, int ifindex)
{
	int r;

	tc->n_classes = 0;
	r = shaper_dump_classes(tc->sk, ifindex, on_class, tc);
	if (r == 0 && !tc->err)
		qsort(tc->classes, tc->n_classes, sizeof(*tc->classes), cmp_classid);
	return r < 0 ? r : tc->err;
}

/* Reads every class of the device into tc->classes (none when it is gone). */
static int read_device(struct tc_collector *tc, const char *name)
{
	struct tc_dev *d = find_dev(tc->devs, tc->n_devs, name);
	int r, fresh;

	tc->n_classes = 0;
	if (!d)
		return 0;
	if (!d->ifindex && !(d->ifindex = (int)if_nametoindex(name)))
		return 0; /* gone (a pod leaving): nothing to show */
	r = dump_device(tc, d->ifindex);
	if (r < 0 || tc->n_classes)
		return r;
	/* No classes: the device may have been made again under the same name. */
	fresh = (int)if_nametoindex(name);
	if (!fresh || fresh == d->ifindex)
		return 0;
	d->ifindex = fresh;
	return dump_device(tc, fresh);
}

/* A class of the device read last (tollgate-inet holds one per shaped pod: sorted, searched). */
static const struct shaper_stats *class_of(const struct tc_collector *tc, uint32_t classid)
{
	struct shaper_stats key = { .classid = classid };

	if (!tc->n_classes)
		return NULL; /* bsearch wants an array, even an empty one */
	return bsearch(&key, tc->classes, tc->n_classes, sizeof(key), cmp_classid);
}

static void add_row(struct tc_collector *tc, const struct ipam_attachment *a,
		    const struct shaper_class *cls)
{
	const struct shaper_stats *st = class_of(tc, cls->classid);
	struct tc_row *row;

	if (!st)
		return;
	if (!array_grow(&tc->rows, &tc->cap_rows, tc->n_rows, sizeof(*tc->rows), 64)) {
		tc->err = -ENOMEM;
		return;
	}
	row = &tc->rows[tc->n_rows++];
	row->level = cls->level;
	row->k8s_namespace = cls->level == SHAPER_NODE ? "" : a->k8s_namespace;
	row->pod = cls->level == SHAPER_POD ? a->pod : "";
	row->direction = cls->direction;
	row->traffic = cls->traffic;
	row->st = *st;
}

static bool node_ifb(const char *dev)
{
	return strcmp(dev, SHAPER_INET_IFB) == 0 || strcmp(dev, SHAPER_INET_IN_IFB) == 0;
}

/*
 * One of the node's IFBs (tollgate-inet: uploads, tollgate-inetdl:
 * downloads): the node's class once, each namespace's once and each pod's,
 * in one dump. Listed only when a pod shapes its internet traffic that way.
 */
static int read_node_ifb(struct tc_collector *tc, const struct ipam_state *st, const char *ifb)
{
	uint64_t ns_seen[(SHAPER_NS_CLASS_MAX + 64) / 64] = { 0 };
	int node_seen = 0;
	int r = read_device(tc, ifb);

	if (r < 0 || !tc->n_classes)
		return r;
	for (size_t i = 0; i < st->n_att; i++) {
		const struct ipam_attachment *a = &st->att[i];
		struct shaper_class cls[SHAPER_POD_CLASSES_MAX];
		int n = shaper_pod_classes(a->host_veth, &a->shaping, cls);

		for (int j = 0; j < n; j++) {
			uint16_t minor = (uint16_t)cls[j].classid;

			if (strcmp(cls[j].dev, ifb) != 0)
				continue;
			if (cls[j].level == SHAPER_NODE && node_seen++)
				continue;
			if (cls[j].level == SHAPER_NAMESPACE) {
				uint64_t bit = 1ull << (minor % 64);

				if (minor > SHAPER_NS_CLASS_MAX || (ns_seen[minor / 64] & bit))
					continue;
				ns_seen[minor / 64] |= bit;
			}
			add_row(tc, a, &cls[j]);
		}
	}
	return tc->err;
}

/* A pod's own devices: its host veth (traffic to it) and its IFB (traffic from it). */
static int read_pod(struct tc_collector *tc, const struct ipam_attachment *a)
{
	struct shaper_class cls[SHAPER_POD_CLASSES_MAX];
	int n = shaper_pod_classes(a->host_veth, &a->shaping, cls), r;

	for (int j = 0; j < n; j++) {
		if (node_ifb(cls[j].dev))
			continue;
		/* Classes of one device come together: one dump serves them. */
		if (!j || strcmp(cls[j].dev, cls[j - 1].dev) != 0) {
			r = read_device(tc, cls[j].dev);
			if (r < 0)
				return r;
		}
		add_row(tc, a, &cls[j]);
	}
	return tc->err;
}

enum tc_value { VAL_BYTES, VAL_PACKETS, VAL_DROPS, VAL_OVERLIMITS, VAL_LIMIT, VALUES };

static const struct {
	const char *suffix, *type, *help;
} values[VALUES] = {
	[VAL_BYTES] = { "sent_bytes_total", "counter", "Bytes the shaper's class sent." },
	[VAL_PACKETS] = { "sent_packets_total", "counter", "Packets the shaper's class sent." },
	[VAL_DROPS] = { "dropped_packets_total", "counter",
			"Packets the shaper's class dropped (its queue was full)." },
	[VAL_OVERLIMITS] = { "overlimits_total", "counter",
			     "Times the shaper's class held a packet back at its limit." },
	[VAL_LIMIT] = { "limit_bytes_per_second", "gauge",
			"The class's configured limit (HTB ceil); absent when unlimited." },
};

static const char *const level_names[LEVELS] = { "pod", "namespace", "node" };
static const char *const level_help[LEVELS] = {
	" Per pod, by direction and traffic (all, internet, internal).",
	" Per namespace and direction: the internet cap its pods share.",
	" The node's internet cap, by direction.",
};

static void render(const struct tc_collector *tc, struct expo *x)
{
	for (int lv = 0; lv < LEVELS; lv++) {
		for (int v = 0; v < VALUES; v++) {
			char family[96], help[192];

			snprintf(family, sizeof(family), "tollgate_shaper_%s_%s", level_names[lv],
				 values[v].suffix);
			snprintf(help, sizeof(help), "%s%s", values[v].help, level_help[lv]);
			expo_family(x, family, values[v].type, help);
			for (size_t i = 0; i < tc->n_rows; i++) {
				const struct tc_row *row = &tc->rows[i];
				const char *pod[] = { "namespace", row->k8s_namespace,
						      "pod",	   row->pod,
						      "direction", row->direction,
						      "traffic",   row->traffic,
						      NULL };
				const char *ns[] = { "namespace", row->k8s_namespace, "direction",
						     row->direction, NULL };
				const char *node[] = { "direction", row->direction, NULL };
				const uint64_t vals[VALUES] = { row->st.bytes, row->st.packets,
								row->st.drops, row->st.overlimits,
								row->st.ceil_bps / 8 };

				if ((int)row->level != lv)
					continue;
				if (v == VAL_LIMIT && row->st.ceil_bps >= SHAPER_LINE_BPS)
					continue;
				expo_sample_u64(x, family,
						lv == SHAPER_POD	 ? pod
						: lv == SHAPER_NAMESPACE ? ns
									 : node,
						vals[v]);
			}
		}
	}
}

int tc_collect(struct tc_collector *tc, const struct ipam_state *st, uint64_t store, struct expo *x)
{
	int r;

	tc->n_rows = 0;
	tc->err = 0;
	if (!tc->sk && (r = tg_nl_route_open(&tc->sk)) < 0)
		return r;
	if ((!tc->devs || tc->devs_store != store) && (r = list_devices(tc, st, store)) < 0)
		return r;
	r = read_node_ifb(tc, st, SHAPER_INET_IFB);
	if (r == 0)
		r = read_node_ifb(tc, st, SHAPER_INET_IN_IFB);
	for (size_t i = 0; i < st->n_att && r == 0; i++)
		r = read_pod(tc, &st->att[i]);
	if (r < 0) {
		/* A socket that failed mid-dump may hold stale answers: start afresh next time. */
		nl_socket_free(tc->sk);
		tc->sk = NULL;
		return r;
	}
	render(tc, x);
	return 0;
}
