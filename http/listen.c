// SPDX-License-Identifier: Apache-2.0
/*
 * --listen: where the metrics endpoint binds. On a node that is usually the
 * node's own address (the DaemonSet passes status.hostIP), so that the port
 * is not also open on every other interface of the host network namespace.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "http/http.h"

/* "1..65535" in decimal, nothing else (no sign, no spaces, no leading zero run past 5 digits). */
static int parse_port(const char *s, uint16_t *ret)
{
	unsigned long v = 0;
	size_t n = strlen(s);

	if (n == 0 || n > 5)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	*ret = (uint16_t)v;
	return 0;
}

/* A DNS name as a resolver accepts it; anything else never reaches getaddrinfo. */
static bool host_name_ok(const char *s)
{
	size_t n = strlen(s);
	bool alpha = false;

	if (n == 0 || n > 253 || s[0] == '-' || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
			alpha = true;
		else if (!((c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'))
			return false;
	}
	/* All digits and dots is a malformed address ("10.0.0"), not a name. */
	return alpha;
}

static int resolve4(const char *host, struct in_addr *ret)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	int r = getaddrinfo(host, NULL, &hints, &res);

	switch (r) {
	case 0:
		break;
	case EAI_AGAIN:
		return -EAGAIN;
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_SYSTEM:
		return errno ? -errno : -EIO;
	default: /* EAI_NONAME, EAI_NODATA, EAI_ADDRFAMILY, EAI_FAIL, ... */
		return -ENOENT;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
		if (ai->ai_family == AF_INET && ai->ai_addrlen >= sizeof(struct sockaddr_in)) {
			*ret = ((const struct sockaddr_in *)ai->ai_addr)->sin_addr;
			freeaddrinfo(res);
			return 0;
		}
	freeaddrinfo(res);
	return -ENOENT;
}

int http_parse_listen(const char *s, uint16_t default_port, struct sockaddr_in *ret)
{
	char host[256];
	const char *colon;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint16_t port = default_port;
	size_t hlen;
	int r;

	if (!s || !*s)
		return -EINVAL;
	/* "[::1]:80", "::1", "fe80::1%eth0:80": IPv6 is not served. */
	if (strchr(s, '[') || strchr(s, ']'))
		return -EAFNOSUPPORT;
	colon = strchr(s, ':');
	if (colon && strchr(colon + 1, ':'))
		return -EAFNOSUPPORT;
	if (colon) {
		r = parse_port(colon + 1, &port);
		if (r < 0)
			return r;
		hlen = (size_t)(colon - s);
	} else {
		if (default_port == 0)
			return -EINVAL;
		hlen = strlen(s);
	}
	if (hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hlen);
	host[hlen] = '\0';

	sa.sin_port = htons(port);
	if (!host[0]) {
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
	} else if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		if (!host_name_ok(host))
			return -EINVAL;
		r = resolve4(host, &sa.sin_addr);
		if (r < 0)
			return r;
	}
	*ret = sa;
	return 0;
}

static const char *listen_problem(int r)
{
	switch (r) {
	case -EAFNOSUPPORT:
		return ": IPv6 is not served; give an IPv4 address or a name with one";
	case -ENOENT:
		return ": the name has no IPv4 address";
	case -EAGAIN:
		return ": the resolver did not answer; try again";
	case -EINVAL:
		return " is not ADDR:PORT, :PORT or HOST:PORT (port 1-65535)";
	default:
		return NULL;
	}
}

int http_listen_explain(int r, const char *s, char *buf, size_t size)
{
	const char *why = listen_problem(r);

	/* another error: strerror's text, after ": " */
	snprintf(buf, size, "--listen \"%s\"%s%s", s, why ? why : ": ", why ? "" : strerror(-r));
	return r == -EAFNOSUPPORT || r == -EINVAL ? 2 : 1;
}
