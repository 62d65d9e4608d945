/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_SHAPING_H
#define TG_LIB_SHAPING_H

/*
 * One pod's shaping: what its request asked for and the caps it got. The
 * store keeps it with the attachment (so DEL, CHECK and reshape need no
 * config) and shaper/ applies it: one record for both, never converted.
 * Rates are bits per second, bursts bits; 0 means "none".
 */

#include <stdbool.h>
#include <stdint.h>

struct shaping {
	/* runtimeConfig.bandwidth (kubelet's annotations): all of the pod's traffic */
	uint64_t ingress_bps, ingress_burst;
	uint64_t egress_bps, egress_burst;
	/* tollgate.io/internet-{egress,ingress}-bandwidth pod annotations */
	uint64_t annot_inet_egress, annot_inet_ingress;
	/* the internet caps the policy resolved to */
	uint64_t inet_ingress_bps; /* internet -> pod */
	uint64_t inet_egress_bps;  /* pod -> internet */
	uint64_t ns_egress_bps;	   /* its namespace's internet egress cap */
	uint64_t node_egress_bps;  /* the node's internet egress cap */
	uint64_t ns_ingress_bps;   /* its namespace's internet ingress (download) cap */
	uint64_t node_ingress_bps; /* the node's internet ingress cap */
	/*
	 * Under a cluster budget (budgets.internetEgress): the ceil its
	 * namespace's class starts at when this pod's ADD makes it (the
	 * config's fallback); from then on that ceil is the node's grant, the
	 * agent's to set. 0: the namespace has no budget.
	 */
	uint64_t budget_fallback_bps;
	/* The same for downloads (budgets' internetIngress): tollgate-inetdl's namespace class. */
	uint64_t budget_in_fallback_bps;
	/*
	 * The minors of its namespace's and its own classes, the same on both
	 * trees (tollgate-inet and tollgate-inetdl), 0 when unused.
	 */
	uint16_t ns_class, pod_class;
	/*
	 * Its downloads are shaped on tollgate-inetdl, steered there by this
	 * mark (the config's internetMark, which nftables gives them); 0: not,
	 * or a record written before that tree existed (the host veth's class
	 * 1:2), which a reshape moves over.
	 */
	uint32_t inet_in_mark;
};

/* A root HTB on the host veth: a whole-pod limit, or a download cap of the older layout. */
static inline bool shaping_pod_ingress(const struct shaping *s)
{
	return s->ingress_bps || (!s->inet_in_mark && s->inet_ingress_bps);
}

/* Its downloads go through tollgate-inetdl (its caps, or a budget, say so). */
static inline bool shaping_inet_ingress(const struct shaping *s)
{
	return s->inet_in_mark != 0;
}

static inline bool shaping_inet_egress(const struct shaping *s)
{
	return s->inet_egress_bps || s->ns_egress_bps || s->node_egress_bps ||
	       s->budget_fallback_bps;
}

static inline bool shaping_any(const struct shaping *s)
{
	return shaping_pod_ingress(s) || s->egress_bps || shaping_inet_egress(s) ||
	       shaping_inet_ingress(s);
}

/* The smaller of two caps, where 0 is none. */
static inline uint64_t shaping_min_cap(uint64_t a, uint64_t b)
{
	if (!a || !b)
		return a ? a : b;
	return a < b ? a : b;
}

/*
 * Which value set a pod's internet cap in one direction: the config's, or the
 * pod's annotation. A tenant writes its own annotations, so one only lowers
 * a cap: it applies when it is at most the cap the config gives the pod (and
 * with no cap configured in that direction), otherwise it is ignored and the
 * pod is shaped as without it. Read from the record alone, so that CHECK,
 * `show` and the log say the same without the config.
 */
struct shaping_source {
	bool annotation;    /* the annotation applied */
	bool ignored;	    /* an annotation above the config's cap: the config applied */
	uint64_t annot_bps; /* the annotation, 0 when the pod has none */
	uint64_t cap_bps;   /* the cap in effect (pod, namespace, node); 0: none */
};

static inline struct shaping_source shaping_source_of(uint64_t annot, uint64_t cap)
{
	struct shaping_source r = { .annot_bps = annot, .cap_bps = cap };

	r.annotation = annot && (!cap || annot <= cap);
	r.ignored = annot && !r.annotation;
	return r;
}

/* Internet egress: the pod's class hangs under its namespace's, under the node's. */
static inline struct shaping_source shaping_inet_egress_source(const struct shaping *s)
{
	return shaping_source_of(
		s->annot_inet_egress,
		shaping_min_cap(shaping_min_cap(s->inet_egress_bps, s->ns_egress_bps),
				s->node_egress_bps));
}

/*
 * Internet ingress: the pod's class under its namespace's, under the node's
 * (a record of the older layout: the pod's own cap alone).
 */
static inline struct shaping_source shaping_inet_ingress_source(const struct shaping *s)
{
	return shaping_source_of(
		s->annot_inet_ingress,
		shaping_min_cap(shaping_min_cap(s->inet_ingress_bps, s->ns_ingress_bps),
				s->node_ingress_bps));
}

/* ---- as JSON (shaping.c): the one place that names the record's keys ---- */

struct json_object;
struct tg_err;

/* The store's form (docs/configuration.md, "The store"): every field but those at 0. */
struct json_object *shaping_to_json(const struct shaping *s);
/* The store's form back; a negative errno with a code 7 error naming where.<key>. */
int shaping_from_json(struct json_object *o, const char *where, struct shaping *s,
		      struct tg_err *e);
/*
 * The status view's form: the rates and caps, 0 included, and which value
 * set each internet cap (internet{Ingress,Egress}From, ...Annotation).
 */
struct json_object *shaping_view_json(const struct shaping *s);

#endif
