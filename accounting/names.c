// SPDX-License-Identifier: Apache-2.0
/* Counter names: written when the table is declared, read back by the exporter. */
#include <stdio.h>
#include <string.h>

#include "accounting/internal.h"

const char *const acct_class_names[ACCT_CLASSES] = {
	"egress_internal",
	"egress_internet",
	"ingress_internal",
	"ingress_internet",
};
const char *const acct_class_direction[ACCT_CLASSES] = { "egress", "egress", "ingress", "ingress" };
const char *const acct_class_traffic[ACCT_CLASSES] = { "internal", "internet", "internal",
						       "internet" };
const char *const acct_dir_names[ACCT_DIRS] = { "egress", "ingress" };

const char *const acct_family_names[ACCT_FAMILIES] = { "ipv4", "ipv6" };

void acct_ns_counter_name(const char *k8s_namespace, enum acct_class c,
			  char ret[ACCT_COUNTER_NAME_MAX])
{
	/* Namespaces are DNS labels: no '_', so the name splits back unambiguously. */
	snprintf(ret, ACCT_COUNTER_NAME_MAX, "ns_%s_%s", k8s_namespace, acct_class_names[c]);
}

void acct_pod_counter_name(const char *host_veth, enum acct_class c,
			   char ret[ACCT_COUNTER_NAME_MAX])
{
	snprintf(ret, ACCT_COUNTER_NAME_MAX, "pod_%s_%s", host_veth, acct_class_names[c]);
}

void acct_host_counter_name(enum acct_class c, char ret[ACCT_COUNTER_NAME_MAX])
{
	snprintf(ret, ACCT_COUNTER_NAME_MAX, "host_%s", acct_class_names[c]);
}

void acct_spoofed_counter_name(const char *k8s_namespace, enum acct_family f,
			       char ret[ACCT_COUNTER_NAME_MAX])
{
	if (k8s_namespace)
		snprintf(ret, ACCT_COUNTER_NAME_MAX, "ns_%s_spoofed_%s", k8s_namespace,
			 acct_family_names[f]);
	else
		snprintf(ret, ACCT_COUNTER_NAME_MAX, "node_spoofed_%s", acct_family_names[f]);
}

/* "<prefix><middle>_<class>": the middle into ret, the class into *cls. */
static bool split_counter_name(const char *name, size_t nlen, const char *prefix,
			       char ret[ACCT_COUNTER_NAME_MAX], enum acct_class *cls)
{
	size_t plen = strlen(prefix);

	if (nlen < plen || memcmp(name, prefix, plen) != 0)
		return false;
	for (int c = 0; c < ACCT_CLASSES; c++) {
		size_t clen = strlen(acct_class_names[c]), mlen;

		if (nlen < plen + clen + 1 || name[nlen - clen - 1] != '_' ||
		    memcmp(name + nlen - clen, acct_class_names[c], clen) != 0)
			continue;
		mlen = nlen - plen - clen - 1;
		if (mlen >= ACCT_COUNTER_NAME_MAX)
			return false;
		memcpy(ret, name + plen, mlen);
		ret[mlen] = '\0';
		*cls = (enum acct_class)c;
		return true;
	}
	return false;
}

enum acct_owner acct_counter_parse(const char *name, size_t name_len,
				   char ret_owner[ACCT_COUNTER_NAME_MAX],
				   enum acct_class *ret_class)
{
	if (split_counter_name(name, name_len, "ns_", ret_owner, ret_class))
		return ACCT_OWNER_NAMESPACE;
	if (split_counter_name(name, name_len, "pod_", ret_owner, ret_class))
		return ACCT_OWNER_POD;
	/* "host_<class>" splits as prefix "host", an empty middle. */
	if (split_counter_name(name, name_len, "host", ret_owner, ret_class) && !ret_owner[0])
		return ACCT_OWNER_HOST;
	return ACCT_OWNER_NONE;
}

/*
 * "ns_<namespace><suffix>" (namespaces hold no '_'): the namespace into
 * ret_owner. False when name is not of that form.
 */
static bool ns_with_suffix(const char *name, size_t name_len, const char *suffix,
			   char ret_owner[ACCT_COUNTER_NAME_MAX])
{
	size_t slen = strlen(suffix), mlen;

	if (name_len < slen + 3 || memcmp(name + name_len - slen, suffix, slen) != 0 ||
	    memcmp(name, "ns_", 3) != 0)
		return false;
	mlen = name_len - slen - 3;
	if (mlen >= ACCT_COUNTER_NAME_MAX || memchr(name + 3, '_', mlen))
		return false;
	memcpy(ret_owner, name + 3, mlen);
	ret_owner[mlen] = '\0';
	return true;
}

enum acct_owner acct_spoofed_parse(const char *name, size_t name_len,
				   char ret_owner[ACCT_COUNTER_NAME_MAX],
				   enum acct_family *ret_family)
{
	for (int f = 0; f < ACCT_FAMILIES; f++) {
		char suffix[32];
		size_t slen = (size_t)snprintf(suffix, sizeof(suffix), "_spoofed_%s",
					       acct_family_names[f]);

		if (name_len < slen || memcmp(name + name_len - slen, suffix, slen) != 0)
			continue;
		*ret_family = (enum acct_family)f;
		if (name_len == slen + 4 && memcmp(name, "node", 4) == 0) {
			ret_owner[0] = '\0';
			return ACCT_OWNER_HOST;
		}
		return ns_with_suffix(name, name_len, suffix, ret_owner) ? ACCT_OWNER_NAMESPACE
									 : ACCT_OWNER_NONE;
	}
	return ACCT_OWNER_NONE;
}

const char *const acct_drop_names[ACCT_DROPS] = { "metadata", "agent", "invalid", "neighbour" };

void acct_drop_counter_name(const char *k8s_namespace, enum acct_access_drop d,
			    char ret[ACCT_COUNTER_NAME_MAX])
{
	snprintf(ret, ACCT_COUNTER_NAME_MAX, "ns_%s_%s_dropped", k8s_namespace, acct_drop_names[d]);
}

enum acct_owner acct_drop_parse(const char *name, size_t name_len,
				char ret_owner[ACCT_COUNTER_NAME_MAX],
				enum acct_access_drop *ret_drop)
{
	for (int d = 0; d < ACCT_DROPS; d++) {
		char suffix[32];

		snprintf(suffix, sizeof(suffix), "_%s_dropped", acct_drop_names[d]);
		if (!ns_with_suffix(name, name_len, suffix, ret_owner))
			continue;
		*ret_drop = (enum acct_access_drop)d;
		return ACCT_OWNER_NAMESPACE;
	}
	return ACCT_OWNER_NONE;
}

const char *const acct_refusal_names[ACCT_REFUSALS] = { "concurrent", "rate", "ceiling" };

void acct_nexthop_limit_name(const char *k8s_namespace, char ret[ACCT_COUNTER_NAME_MAX])
{
	snprintf(ret, ACCT_COUNTER_NAME_MAX, "ns_%s_nexthops", k8s_namespace);
}

void acct_refused_counter_name(const char *k8s_namespace, enum acct_refusal why,
			       char ret[ACCT_COUNTER_NAME_MAX])
{
	snprintf(ret, ACCT_COUNTER_NAME_MAX, "ns_%s_refused_%s", k8s_namespace,
		 acct_refusal_names[why]);
}

enum acct_owner acct_refused_parse(const char *name, size_t name_len,
				   char ret_owner[ACCT_COUNTER_NAME_MAX],
				   enum acct_refusal *ret_why)
{
	for (int w = 0; w < ACCT_REFUSALS; w++) {
		char suffix[32];

		snprintf(suffix, sizeof(suffix), "_refused_%s", acct_refusal_names[w]);
		if (!ns_with_suffix(name, name_len, suffix, ret_owner))
			continue;
		*ret_why = (enum acct_refusal)w;
		return ACCT_OWNER_NAMESPACE;
	}
	return ACCT_OWNER_NONE;
}

uint32_t acct_guard_concurrent(const struct acct_guard *g, const char *k8s_namespace)
{
	for (size_t i = 0; i < g->n_ns && k8s_namespace; i++)
		if (strcmp(g->ns[i], k8s_namespace) == 0)
			return g->ns_concurrent[i];
	return g->concurrent_default;
}

bool acct_ns_listed(const char *const *list, size_t n, const char *k8s_namespace)
{
	for (size_t i = 0; i < n && k8s_namespace; i++)
		if (strcmp(list[i], k8s_namespace) == 0)
			return true;
	return false;
}
