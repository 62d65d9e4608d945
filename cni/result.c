// SPDX-License-Identifier: Apache-2.0
/* Results and error objects, in the shape of the requested cniVersion. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cni/cni.h"
#include "cni/internal.h"
#include "lib/util.h"
#include "node/node.h"
#include "lib/ip4.h"

static json_object *mac_string(const uint8_t m[6])
{
	char buf[18];

	snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
		 m[5]);
	return json_object_new_string(buf);
}

json_object *cni_result_render(const char *cni_version, int version, const struct cni_add_result *r)
{
	json_object *res = json_object_new_object();
	json_object *ifs = json_object_new_array();
	json_object *host = json_object_new_object();
	json_object *pod = json_object_new_object();
	json_object *ips = json_object_new_array();
	json_object *ip = json_object_new_object();
	json_object *routes = json_object_new_array();
	json_object *def = json_object_new_object();
	char addr[CIDR4_STRLEN], gw[IP4_STRLEN];
	struct cidr4 c = { .net = r->ip, .prefix = 32 };

	if (!res || !ifs || !host || !pod || !ips || !ip || !routes || !def) {
		json_object *all[] = { res, ifs, host, pod, ips, ip, routes, def };

		for (size_t i = 0; i < ARRAY_SIZE(all); i++)
			json_object_put(all[i]);
		return NULL;
	}
	json_object_object_add(res, "cniVersion", json_object_new_string(cni_version));
	json_object_object_add(host, "name", json_object_new_string(r->host_veth));
	json_object_object_add(host, "mac", mac_string(r->host_mac));
	json_object_object_add(pod, "name", json_object_new_string(r->ifname));
	json_object_object_add(pod, "mac", mac_string(r->pod_mac));
	json_object_object_add(pod, "sandbox", json_object_new_string(r->netns));
	if (version >= 10100) {
		/* CNI 1.1 reports the interface MTU. */
		json_object_object_add(host, "mtu", json_object_new_int(r->mtu));
		json_object_object_add(pod, "mtu", json_object_new_int(r->mtu));
	}
	json_object_array_add(ifs, host);
	json_object_array_add(ifs, pod);
	json_object_object_add(res, "interfaces", ifs);

	if (version < 10000)
		json_object_object_add(ip, "version", json_object_new_string("4"));
	json_object_object_add(ip, "address", json_object_new_string(cidr4_format(&c, addr)));
	json_object_object_add(ip, "gateway", json_object_new_string(ip4_format(NODE_GATEWAY, gw)));
	json_object_object_add(ip, "interface", json_object_new_int(1));
	json_object_array_add(ips, ip);
	json_object_object_add(res, "ips", ips);

	json_object_object_add(def, "dst", json_object_new_string("0.0.0.0/0"));
	json_object_object_add(def, "gw", json_object_new_string(gw));
	json_object_array_add(routes, def);
	json_object_object_add(res, "routes", routes);
	json_object_object_add(res, "dns", json_object_new_object());
	return res;
}

json_object *cni_error_render(const char *cni_version, const struct tg_err *e)
{
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	json_object_object_add(o, "cniVersion",
			       json_object_new_string(cni_version ? cni_version
								  : CNI_SPEC_VERSION));
	json_object_object_add(o, "code", json_object_new_int(e->code ? e->code : CNI_ERR_IO));
	json_object_object_add(o, "msg",
			       json_object_new_string(e->msg[0] ? e->msg : "unknown error"));
	json_object_object_add(o, "details", json_object_new_string(e->details));
	return o;
}

int cni_prev_result_ip(json_object *prev, const char *ifname, uint32_t *ret)
{
	json_object *ifs = NULL, *ips = NULL;
	size_t i, n;

	if (!prev || !json_object_object_get_ex(prev, "ips", &ips) ||
	    !json_object_is_type(ips, json_type_array))
		return -ENOENT;
	if (json_object_object_get_ex(prev, "interfaces", &ifs) &&
	    !json_object_is_type(ifs, json_type_array))
		ifs = NULL;
	n = json_object_array_length(ips);
	for (i = 0; i < n; i++) {
		json_object *ip = json_object_array_get_idx(ips, i), *v;
		char buf[CIDR4_STRLEN + 1];
		const char *addr, *slash;
		uint32_t a;

		if (!json_object_object_get_ex(ip, "address", &v) ||
		    !json_object_is_type(v, json_type_string))
			continue;
		/* Only the address that sits on our interface, when the result says which. */
		if (ifs && json_object_object_get_ex(ip, "interface", &v) &&
		    json_object_is_type(v, json_type_int)) {
			json_object *itf =
				json_object_array_get_idx(ifs, (size_t)json_object_get_int(v));
			json_object *name;

			if (!itf || !json_object_object_get_ex(itf, "name", &name) ||
			    !json_object_is_type(name, json_type_string) ||
			    strcmp(json_object_get_string(name), ifname) != 0)
				continue;
		}
		json_object_object_get_ex(ip, "address", &v);
		addr = json_object_get_string(v);
		slash = strchr(addr, '/');
		if (!slash || (size_t)(slash - addr) >= sizeof(buf))
			continue;
		memcpy(buf, addr, (size_t)(slash - addr));
		buf[slash - addr] = '\0';
		if (ip4_parse(buf, &a) == 0) {
			*ret = a;
			return 0;
		}
	}
	return -ENOENT;
}
