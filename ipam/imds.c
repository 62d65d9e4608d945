// SPDX-License-Identifier: Apache-2.0
/*
 * The node's alias pool from Azure IMDS:
 *   GET {imdsURL}/metadata/instance/network?api-version=2021-02-01
 *   Metadata: true
 * All values are strings; interfaces come in no guaranteed order, so the
 * uplink is found by MAC (written without separators, "000D3AF806EC"). The
 * interface's first address is the node's own and is never a pod's.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "httpc/httpc.h"
#include "ipam/imds.h"
#include "ipam/internal.h"
#include "ipam/ipam.h"
#include "ipam/pool.h"
#include "lib/cleanup.h"
#include "lib/ip4.h"
#include "lib/jsonx.h"
#include "lib/util.h"

#define IMDS_PATH "/metadata/instance/network?api-version=2021-02-01"

static int parse_mac(const char *s, uint8_t mac[6])
{
	int n = 0;

	/* IMDS omits separators; tolerate ':' and '-' all the same. */
	for (; *s && n < 12; s++) {
		int v;

		if (*s == ':' || *s == '-')
			continue;
		if (!isxdigit((unsigned char)*s))
			return -EINVAL;
		v = isdigit((unsigned char)*s) ? *s - '0' : (tolower((unsigned char)*s) - 'a' + 10);
		if (n % 2 == 0)
			mac[n / 2] = (uint8_t)(v << 4);
		else
			mac[n / 2] |= (uint8_t)v;
		n++;
	}
	return n == 12 && !*s ? 0 : -EINVAL;
}

/* A document IMDS should not have sent: "IMDS answer: <what>". */
#define bad_answer(e, fmt, ...) tg_fail(e, CNI_ERR_IO, -EBADMSG, "IMDS answer: " fmt, ##__VA_ARGS__)

/* The interface whose MAC is the uplink's (IMDS lists them in no promised order). */
static int find_nic(json_object *ifs, const uint8_t mac[6], json_object **ret, struct tg_err *e)
{
	size_t n = json_object_array_length(ifs);
	char macs[256] = "", want[18];

	for (size_t i = 0; i < n; i++) {
		json_object *it = json_object_array_get_idx(ifs, i);
		const char *m = jx_get_string(it, "macAddress");
		uint8_t got[6];

		if (!m)
			continue;
		if (strlen(macs) + strlen(m) + 2 < sizeof(macs))
			snprintf(macs + strlen(macs), sizeof(macs) - strlen(macs), "%s%s",
				 macs[0] ? " " : "", m);
		if (parse_mac(m, got) == 0 && memcmp(got, mac, 6) == 0) {
			*ret = it;
			return 0;
		}
	}
	snprintf(want, sizeof(want), "%02X%02X%02X%02X%02X%02X", mac[0], mac[1], mac[2], mac[3],
		 mac[4], mac[5]);
	return tg_fail(e, CNI_ERR_IO, -ENOENT,
		       "IMDS lists no interface with the uplink's MAC %s (it lists: %s)", want,
		       macs[0] ? macs : "none");
}

/* ipv4.ipAddress: the first is the node's own, the others are the pool (sorted). */
static int read_addresses(json_object *ipv4, struct imds_network *ret, struct tg_err *e)
{
	_cleanup_free_ uint32_t *out = NULL;
	json_object *addrs;
	size_t n, n_out = 0;

	if (!json_object_object_get_ex(ipv4, "ipAddress", &addrs) ||
	    !json_object_is_type(addrs, json_type_array))
		return bad_answer(e, "%s", "the uplink's interface has no ipv4.ipAddress list");
	n = json_object_array_length(addrs);
	if (n == 0)
		return bad_answer(e, "%s", "the uplink's ipv4.ipAddress list is empty");
	if (n > IPAM_POOL_MAX)
		return bad_answer(e, "%s", "the uplink lists too many addresses");
	out = calloc(n, sizeof(*out));
	if (!out)
		return tg_fail(e, CNI_ERR_IO, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const char *s =
			jx_get_string(json_object_array_get_idx(addrs, i), "privateIpAddress");
		uint32_t ip;

		if (!s)
			return bad_answer(e, "%s",
					  "an ipAddress entry has no privateIpAddress string");
		if (ip4_parse(s, &ip) < 0)
			return bad_answer(e, "privateIpAddress \"%.40s\" is not an IPv4 address",
					  s);
		if (i == 0)
			ret->node_ip = ip; /* the primary: the node's own */
		else
			out[n_out++] = ip;
	}
	ipam_addrs_sort(out, n_out);
	ret->addrs = TAKE_PTR(out);
	ret->n_addrs = n_out;
	return 0;
}

/* ipv4.subnet[0]: address and prefix (a string in practice; a number is accepted too). */
static int read_subnet(json_object *ipv4, struct cidr4 *ret, struct tg_err *e)
{
	json_object *subnets, *sn, *pv;
	const char *a;
	char cidr[40];
	long prefix = -1;

	if (!json_object_object_get_ex(ipv4, "subnet", &subnets) ||
	    !json_object_is_type(subnets, json_type_array) ||
	    json_object_array_length(subnets) == 0)
		return bad_answer(e, "%s", "the uplink's interface has no ipv4.subnet");
	sn = json_object_array_get_idx(subnets, 0);
	a = jx_get_string(sn, "address");
	if (json_object_object_get_ex(sn, "prefix", &pv)) {
		if (json_object_is_type(pv, json_type_string)) {
			char *end;

			prefix = strtol(json_object_get_string(pv), &end, 10);
			if (*end || end == json_object_get_string(pv))
				prefix = -1;
		} else if (json_object_is_type(pv, json_type_int)) {
			prefix = json_object_get_int(pv);
		}
	}
	if (!a || prefix < 0 || prefix > 32)
		return bad_answer(e, "%s", "ipv4.subnet needs an address and a prefix of 0..32");
	snprintf(cidr, sizeof(cidr), "%s/%ld", a, prefix);
	if (cidr4_parse(cidr, ret) < 0)
		return bad_answer(e, "ipv4.subnet \"%s\" is not a valid subnet", cidr);
	return 0;
}

int imds_parse_network(const char *body, size_t len, const uint8_t mac[6], struct imds_network *ret,
		       struct tg_err *e)
{
	_cleanup_json_ json_object *root = NULL;
	json_object *ifs, *nic = NULL, *ipv4;
	struct jx_parse_error pe;
	int r;

	memset(ret, 0, sizeof(*ret));
	r = jx_parse(body, len, &root, &pe);
	if (r == -ENOMEM)
		return tg_fail(e, CNI_ERR_IO, r, "out of memory");
	if (r < 0 && pe.twice)
		return bad_answer(e, "%s at byte %zu", pe.why, pe.at);
	if (r < 0 && pe.trailing)
		return tg_fail(e, CNI_ERR_IO, r, "IMDS answer has trailing data at byte %zu",
			       pe.at);
	if (r < 0)
		return tg_fail(e, CNI_ERR_IO, r,
			       "IMDS answer is not valid JSON (%zu bytes; cut short?)", len);
	if (!json_object_is_type(root, json_type_object) ||
	    !json_object_object_get_ex(root, "interface", &ifs) ||
	    !json_object_is_type(ifs, json_type_array))
		return bad_answer(e, "%s", "no \"interface\" list");
	r = find_nic(ifs, mac, &nic, e);
	if (r < 0)
		return r;
	if (!json_object_object_get_ex(nic, "ipv4", &ipv4))
		return bad_answer(e, "%s", "the uplink's interface has no ipv4.ipAddress list");
	r = read_addresses(ipv4, ret, e);
	if (r == 0)
		r = read_subnet(ipv4, &ret->subnet, e);
	if (r < 0)
		imds_network_free(ret);
	return r;
}

void imds_network_free(struct imds_network *n)
{
	free(n->addrs);
	memset(n, 0, sizeof(*n));
}

int imds_url(const char *base_url, char *buf, size_t size)
{
	return (size_t)snprintf(buf, size, "%s%s", base_url, IMDS_PATH) >= size ? -ENAMETOOLONG : 0;
}

bool imds_retryable(long status)
{
	return status == 0 || status == 429 || status == 410 || status >= 500;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* One GET of url; left_ms is what is left of the budget. */
static int get(const char *url, int64_t left_ms, struct httpc_answer *ret)
{
	/* A request never outlives the budget: 5 s at most, less when less is left. */
	long total = left_ms < IMDS_REQUEST_TIMEOUT_MS ? (long)(left_ms > 200 ? left_ms : 200)
						       : (long)IMDS_REQUEST_TIMEOUT_MS;
	/* IMDS is link-local: never through a proxy, never redirected. */
	struct httpc_sync req = {
		.url = url,
		.user_agent = "tollgate/" TG_VERSION,
		.header = "Metadata: true",
		.timeout_ms = (int)total,
		.connect_timeout_ms = total < 2000 ? (int)total : 2000,
		.max_body = IMDS_BODY_MAX,
	};

	return httpc_request_sync(&req, ret);
}

int imds_fetch(const char *base_url, int budget_s, char **ret_body, size_t *ret_len,
	       int *ret_attempts, struct tg_err *e)
{
	char url[1024];
	int64_t start = time_mono_ms();
	int attempts = 0;

	if (imds_url(base_url, url, sizeof(url)) < 0)
		return tg_fail(e, CNI_ERR_CONFIG, -ENAMETOOLONG, "IMDS URL is too long");
	for (;;) {
		struct httpc_answer a;
		char why[160];
		bool retry;
		int64_t wait;
		int r;

		attempts++;
		r = get(url, (int64_t)budget_s * 1000 - (time_mono_ms() - start), &a);
		if (r == -ENOMEM)
			return tg_fail(e, CNI_ERR_IO, r, "out of memory");
		if (r < 0)
			return tg_fail(e, CNI_ERR_IO, -EIO, "cannot initialise libcurl");
		if (a.ok) {
			*ret_body = a.body;
			*ret_len = a.len;
			if (ret_attempts)
				*ret_attempts = attempts;
			return 0;
		}
		if (a.too_big)
			snprintf(why, sizeof(why), "the answer is larger than %d bytes",
				 IMDS_BODY_MAX);
		else if (!a.answered)
			snprintf(why, sizeof(why), "%s", a.error);
		else
			snprintf(why, sizeof(why), "HTTP %ld", a.status);
		/*
		 * Retried with exponential back-off from 1 s, honouring
		 * Retry-After, within the budget.
		 */
		retry = !a.too_big && imds_retryable(a.answered ? a.status : 0);
		/* An absurd Retry-After (past the budget) ends the tries; it never wraps to "now". */
		if (a.retry_after_s > budget_s)
			wait = ((int64_t)budget_s + 1) * 1000;
		else
			wait = a.retry_after_s > 0
				       ? (int64_t)a.retry_after_s * 1000
				       : backoff_ms(1000, 10000, (unsigned)attempts - 1);
		httpc_answer_free(&a);
		if (!retry || time_mono_ms() - start + wait > (int64_t)budget_s * 1000)
			return tg_fail(e, CNI_ERR_IO, -EIO, "IMDS %s: %s (after %d request%s)", url,
				       why, attempts, attempts == 1 ? "" : "s");
		sleep_ms(wait);
	}
}
