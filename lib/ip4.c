// SPDX-License-Identifier: Apache-2.0
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ip4.h"
#include "lib/util.h"

int ip4_parse(const char *s, uint32_t *ret)
{
	struct in_addr a;

	/* inet_pton rejects the shorthand forms ("10.1") that inet_aton accepts. */
	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return -EINVAL;
	*ret = ntohl(a.s_addr);
	return 0;
}

const char *ip4_format(uint32_t ip, char buf[IP4_STRLEN])
{
	snprintf(buf, IP4_STRLEN, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 0xff, (ip >> 8) & 0xff,
		 ip & 0xff);
	return buf;
}

uint32_t cidr4_mask(uint8_t prefix)
{
	return prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
}

int cidr4_parse(const char *s, struct cidr4 *ret)
{
	char addr[IP4_STRLEN];
	const char *slash;
	char *end;
	unsigned long len;
	uint32_t ip;
	size_t n;

	if (!s)
		return -EINVAL;
	slash = strchr(s, '/');
	if (!slash)
		return -EINVAL;
	n = (size_t)(slash - s);
	if (n == 0 || n >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, s, n);
	addr[n] = '\0';
	if (ip4_parse(addr, &ip) < 0)
		return -EINVAL;
	if (!slash[1] || slash[1] < '0' || slash[1] > '9')
		return -EINVAL;
	errno = 0;
	len = strtoul(slash + 1, &end, 10);
	if (errno || *end || len > 32)
		return -EINVAL;
	if (ip & ~cidr4_mask((uint8_t)len))
		return -EINVAL; /* host bits set: almost always a typo */
	ret->net = ip;
	ret->prefix = (uint8_t)len;
	return 0;
}

const char *cidr4_format(const struct cidr4 *c, char buf[CIDR4_STRLEN])
{
	char ip[IP4_STRLEN];

	snprintf(buf, CIDR4_STRLEN, "%s/%u", ip4_format(c->net, ip), c->prefix);
	return buf;
}

bool cidr4_contains(const struct cidr4 *c, uint32_t ip)
{
	return (ip & cidr4_mask(c->prefix)) == c->net;
}

const char *ip4_unusable_why(uint32_t ip)
{
	static const struct {
		uint32_t net, mask;
		const char *what;
	} reserved[] = {
		{ 0x00000000u, 0xff000000u, "\"this network\" (0.0.0.0/8)" },
		{ 0x7f000000u, 0xff000000u, "loopback (127.0.0.0/8)" },
		{ 0xa9fe0000u, 0xffff0000u,
		  "link-local (169.254.0.0/16, the pods' gateway is 169.254.1.1)" },
		{ 0xe0000000u, 0xf0000000u, "multicast (224.0.0.0/4)" },
		{ 0xf0000000u, 0xf0000000u, "reserved or broadcast (240.0.0.0/4)" },
	};

	for (size_t k = 0; k < ARRAY_SIZE(reserved); k++)
		if ((ip & reserved[k].mask) == reserved[k].net)
			return reserved[k].what;
	return NULL;
}
