/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_HOSTPORT_H
#define TG_LIB_HOSTPORT_H

/*
 * A pod's hostPorts: what the runtime passed in runtimeConfig.portMappings
 * (the portMappings capability), kept with the attachment in the store, and
 * put into table inet tollgate by accounting/ (DNAT from the node's
 * addresses, or from hostIP, to the pod). One record for the three, in the
 * members CNI gives it: hostPort, containerPort, protocol, hostIP.
 */

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "lib/err.h"

#define HOSTPORT_MAX 32 /* a pod's mappings; kubelet's pods rarely have more than a few */

struct hostport {
	uint32_t host_ip; /* host order; 0: every address of the node */
	uint16_t host_port;
	uint16_t container_port;
	uint8_t proto; /* IPPROTO_TCP, IPPROTO_UDP or IPPROTO_SCTP */
};

struct hostports {
	struct hostport m[HOSTPORT_MAX];
	uint8_t n;
};

/* "tcp", "udp", "sctp"; NULL for another protocol. */
const char *hostport_proto_name(uint8_t proto);
/*
 * Whether two mappings take the same packets: the same protocol and host
 * port, and the same host address or either on every address.
 */
bool hostport_overlap(const struct hostport *a, const struct hostport *b);
bool hostport_equal(const struct hostport *a, const struct hostport *b);
/* Whether `list` holds a mapping equal to m. */
bool hostports_have(const struct hostports *list, const struct hostport *m);
/* Whether two lists hold the same mappings, in any order (field by field: no padding compared). */
bool hostports_same(const struct hostports *a, const struct hostports *b);
/* "8080/tcp", "10.0.0.5:8080/udp" */
#define HOSTPORT_STRLEN 32
const char *hostport_format(const struct hostport *m, char buf[HOSTPORT_STRLEN]);

/*
 * Parses a portMappings array (`where` names it in messages): each entry's
 * hostPort and containerPort 1..65535, protocol tcp, udp or sctp in any case
 * (absent: tcp), hostIP absent, "", "0.0.0.0" (every address) or an IPv4
 * address that is not loopback. Identical entries count once; two that
 * overlap with other targets are refused. CNI_ERR_CONFIG naming the entry.
 */
int hostports_parse(json_object *arr, const char *where, struct hostports *ret, struct tg_err *e);
/* The array hostports_parse reads (hostIP only when set). */
json_object *hostports_to_json(const struct hostports *list);

#endif
