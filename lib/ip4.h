/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_IP4_H
#define TG_LIB_IP4_H

#include <stdbool.h>
#include <stdint.h>

/* IPv4 addresses are kept in host byte order everywhere inside Tollgate. */

#define IP4_STRLEN 16
#define CIDR4_STRLEN 20

struct cidr4 {
	uint32_t net;
	uint8_t prefix;
};

int ip4_parse(const char *s, uint32_t *ret);
const char *ip4_format(uint32_t ip, char buf[IP4_STRLEN]);
/* Accepts "a.b.c.d/len" with len 0..32 and no host bits set. */
int cidr4_parse(const char *s, struct cidr4 *ret);
const char *cidr4_format(const struct cidr4 *c, char buf[CIDR4_STRLEN]);
uint32_t cidr4_mask(uint8_t prefix);
static inline uint32_t cidr4_last(const struct cidr4 *c)
{
	return c->net | ~cidr4_mask(c->prefix);
}
bool cidr4_contains(const struct cidr4 *c, uint32_t ip);
/*
 * Why no pod can use ip, or NULL when one can: "this network" (0/8),
 * loopback, link-local (the pods' gateway 169.254.1.1 is one), multicast,
 * the reserved block with the broadcast address.
 */
const char *ip4_unusable_why(uint32_t ip);

#endif
