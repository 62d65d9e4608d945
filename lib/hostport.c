// SPDX-License-Identifier: Apache-2.0
/* A pod's hostPorts: parsed from portMappings, compared, written back. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/hostport.h"
#include "lib/ip4.h"
#include "lib/jsonx.h"

static const struct {
	const char *name;
	uint8_t proto;
} protos[] = { { "tcp", IPPROTO_TCP }, { "udp", IPPROTO_UDP }, { "sctp", IPPROTO_SCTP } };

const char *hostport_proto_name(uint8_t proto)
{
	for (size_t i = 0; i < sizeof(protos) / sizeof(protos[0]); i++)
		if (protos[i].proto == proto)
			return protos[i].name;
	return NULL;
}

bool hostport_overlap(const struct hostport *a, const struct hostport *b)
{
	return a->proto == b->proto && a->host_port == b->host_port &&
	       (a->host_ip == b->host_ip || !a->host_ip || !b->host_ip);
}

bool hostport_equal(const struct hostport *a, const struct hostport *b)
{
	return hostport_overlap(a, b) && a->host_ip == b->host_ip &&
	       a->container_port == b->container_port;
}

bool hostports_have(const struct hostports *list, const struct hostport *m)
{
	for (size_t i = 0; i < list->n; i++)
		if (hostport_equal(&list->m[i], m))
			return true;
	return false;
}

bool hostports_same(const struct hostports *a, const struct hostports *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (!hostports_have(b, &a->m[i]))
			return false;
	return true;
}

const char *hostport_format(const struct hostport *m, char buf[HOSTPORT_STRLEN])
{
	const char *p = hostport_proto_name(m->proto);
	char ip[IP4_STRLEN];

	if (m->host_ip)
		snprintf(buf, HOSTPORT_STRLEN, "%s:%u/%s", ip4_format(m->host_ip, ip), m->host_port,
			 p ? p : "?");
	else
		snprintf(buf, HOSTPORT_STRLEN, "%u/%s", m->host_port, p ? p : "?");
	return buf;
}

/* Member `key` of entry i, any case (Go's decoder, which runtimes' configs are written for). */
static int port_of(json_object *o, const char *where, size_t i, const char *key, bool required,
		   uint16_t *ret, struct tg_err *e)
{
	json_object *v = jx_get_nocase(o, key);
	int64_t n;

	if (!v || json_object_is_type(v, json_type_null)) {
		if (!required)
			return 0;
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s[%zu].%s is missing", where, i, key);
	}
	if (!json_object_is_type(v, json_type_int))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s[%zu].%s must be an integer", where,
			       i, key);
	n = json_object_get_int64(v);
	if (n < 1 || n > 65535)
		return tg_fail(e, CNI_ERR_CONFIG, -ERANGE, "%s[%zu].%s is %lld, must be 1..65535",
			       where, i, key, (long long)n);
	*ret = (uint16_t)n;
	return 0;
}

static int entry_of(json_object *o, const char *where, size_t i, struct hostport *m,
		    struct tg_err *e)
{
	json_object *proto, *ip;
	const char *s;

	memset(m, 0, sizeof(*m));
	if (!json_object_is_type(o, json_type_object))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s[%zu] must be an object", where, i);
	if (port_of(o, where, i, "hostPort", true, &m->host_port, e) < 0 ||
	    port_of(o, where, i, "containerPort", true, &m->container_port, e) < 0)
		return -EINVAL;
	m->proto = IPPROTO_TCP;
	proto = jx_get_nocase(o, "protocol");
	if (proto && !json_object_is_type(proto, json_type_null)) {
		bool known = false;

		if (!json_object_is_type(proto, json_type_string))
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "%s[%zu].protocol must be a string", where, i);
		s = json_object_get_string(proto);
		for (size_t k = 0; k < sizeof(protos) / sizeof(protos[0]) && !known; k++)
			if (strcasecmp(s, protos[k].name) == 0) {
				m->proto = protos[k].proto;
				known = true;
			}
		if (!known)
			return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
				       "%s[%zu].protocol \"%.16s\" is none of tcp, udp, sctp",
				       where, i, s);
	}
	ip = jx_get_nocase(o, "hostIP");
	if (!ip || json_object_is_type(ip, json_type_null))
		return 0;
	if (!json_object_is_type(ip, json_type_string))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s[%zu].hostIP must be a string", where,
			       i);
	s = json_object_get_string(ip);
	if (!s[0] || strcmp(s, "0.0.0.0") == 0)
		return 0;
	if (ip4_parse(s, &m->host_ip) < 0)
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "%s[%zu].hostIP \"%.64s\" is not an IPv4 address (Tollgate serves "
			       "IPv4 pods only)",
			       where, i, s);
	if ((m->host_ip >> 16) == 0xa9fe)
		return tg_fail(
			e, CNI_ERR_CONFIG, -EINVAL,
			"%s[%zu].hostIP \"%s\" is a link-local address: those are the node's "
			"services for pods, which no hostPort may take",
			where, i, s);
	/* 127/8 would need route_localnet on the pod's link: a pod could then reach the node's localhost */
	if ((m->host_ip >> 24) == 127)
		return tg_fail(
			e, CNI_ERR_CONFIG, -EINVAL,
			"%s[%zu].hostIP \"%s\" is a loopback address: a hostPort on loopback "
			"is not supported (it would let pods reach the node's localhost)",
			where, i, s);
	return 0;
}

int hostports_parse(json_object *arr, const char *where, struct hostports *ret, struct tg_err *e)
{
	size_t n;

	memset(ret, 0, sizeof(*ret));
	if (!arr || json_object_is_type(arr, json_type_null))
		return 0;
	if (!json_object_is_type(arr, json_type_array))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL, "%s must be an array", where);
	n = json_object_array_length(arr);
	for (size_t i = 0; i < n; i++) {
		struct hostport m;
		bool dup = false;

		if (entry_of(json_object_array_get_idx(arr, i), where, i, &m, e) < 0)
			return -EINVAL;
		for (size_t k = 0; k < ret->n && !dup; k++) {
			char a[HOSTPORT_STRLEN], b[HOSTPORT_STRLEN];

			dup = hostport_equal(&ret->m[k], &m);
			if (!dup && hostport_overlap(&ret->m[k], &m))
				return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
					       "%s[%zu]: hostPort %s overlaps %s, which goes to "
					       "containerPort %u",
					       where, i, hostport_format(&m, a),
					       hostport_format(&ret->m[k], b),
					       ret->m[k].container_port);
		}
		if (dup)
			continue;
		if (ret->n >= HOSTPORT_MAX)
			return tg_fail(e, CNI_ERR_CONFIG, -E2BIG, "%s holds more than %d mappings",
				       where, HOSTPORT_MAX);
		ret->m[ret->n++] = m;
	}
	return 0;
}

json_object *hostports_to_json(const struct hostports *list)
{
	json_object *arr = json_object_new_array();

	for (size_t i = 0; arr && i < list->n; i++) {
		const struct hostport *m = &list->m[i];
		json_object *o = json_object_new_object();
		char ip[IP4_STRLEN];

		jx_add(o, "hostPort", json_object_new_int(m->host_port));
		jx_add(o, "containerPort", json_object_new_int(m->container_port));
		jx_add(o, "protocol", json_object_new_string(hostport_proto_name(m->proto)));
		if (m->host_ip)
			jx_add(o, "hostIP", json_object_new_string(ip4_format(m->host_ip, ip)));
		json_object_array_add(arr, o);
	}
	return arr;
}
