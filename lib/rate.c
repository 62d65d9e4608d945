// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lib/rate.h"
#include "lib/util.h"

static const struct {
	const char *suffix;
	uint64_t mult;
} units[] = {
	{ "Ki", 1ULL << 10 },	{ "Mi", 1ULL << 20 },	   { "Gi", 1ULL << 30 },
	{ "Ti", 1ULL << 40 },	{ "k", 1000ULL },	   { "M", 1000000ULL },
	{ "G", 1000000000ULL }, { "T", 1000000000000ULL }, { "", 1 },
};

/* Fractional digits kept exactly; any further digit must be 0 (10^19 still fits in 64 bits). */
#define FRAC_DIGITS_MAX 19
/* The largest exponent: 10^18 fits in 64 bits, and e19 with any digit is past RATE_MAX_BPS. */
#define EXP10_MAX 18

int rate_parse(const char *s, uint64_t *ret_bps)
{
	return rate_parse_max(s, RATE_MAX_BPS, ret_bps);
}

int rate_parse_max(const char *s, uint64_t max_bps, uint64_t *ret_bps)
{
	uint64_t whole = 0, frac = 0, frac_div = 1, mult = 0;
	unsigned __int128 scaled, value;
	const char *p = s;
	bool too_big = false; /* judged once the whole string is known to be a number */
	int exp10 = 0, digits = 0;
	size_t i;

	if (!s || !*s)
		return -EINVAL;
	if (*p == '+')
		p++;
	if (*p < '0' || *p > '9')
		return -EINVAL; /* also rejects a sign '-' */
	for (; *p >= '0' && *p <= '9'; p++) {
		if (whole > (UINT64_MAX - 9) / 10)
			too_big = true;
		else
			whole = whole * 10 + (uint64_t)(*p - '0');
	}
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		for (; *p >= '0' && *p <= '9'; p++, digits++) {
			if (digits < FRAC_DIGITS_MAX) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				frac_div *= 10;
			} else if (*p != '0') {
				return -EINVAL; /* far below a bit per second */
			}
		}
	}
	if ((*p == 'e' || *p == 'E') && p[1] >= '0' && p[1] <= '9') {
		for (p++; *p >= '0' && *p <= '9'; p++) {
			if (exp10 <= EXP10_MAX)
				exp10 = exp10 * 10 + (*p - '0');
		}
		if (*p)
			return -EINVAL;
		if (exp10 > EXP10_MAX)
			return -ERANGE;
		mult = 1;
		while (exp10--)
			mult *= 10;
	} else {
		for (i = 0; i < ARRAY_SIZE(units); i++)
			if (strcmp(p, units[i].suffix) == 0) {
				mult = units[i].mult;
				break;
			}
		if (!mult)
			return -EINVAL; /* "10Mbps", "1m" (milli), "5 M" ... */
	}
	if (too_big)
		return -ERANGE;
	/* Exact in 128 bits: 10^19 x 10^18 does not fit in 64 (it wrapped before). */
	scaled = (unsigned __int128)frac * mult;
	if (scaled % frac_div)
		return -EINVAL; /* a fraction of a bit per second */
	value = (unsigned __int128)whole * mult + scaled / frac_div;
	if (value < RATE_MIN_BPS || value > max_bps)
		return -ERANGE;
	*ret_bps = (uint64_t)value;
	return 0;
}

int rate_from_json(json_object *v, const char *where, uint64_t *ret_bps, struct tg_err *e)
{
	return rate_from_json_max(v, where, RATE_MAX_BPS, ret_bps, e);
}

int rate_from_json_max(json_object *v, const char *where, uint64_t max_bps, uint64_t *ret_bps,
		       struct tg_err *e)
{
	char most[32];
	int r;

	if (json_object_is_type(v, json_type_int)) {
		int64_t n;

		errno = 0;
		n = json_object_get_int64(v);
		if (errno || n < (int64_t)RATE_MIN_BPS || (uint64_t)n > max_bps)
			return tg_fail(e, CNI_ERR_CONFIG, -ERANGE,
				       "%s is %s bit/s: rates must be %llu..%llu bit/s", where,
				       json_object_to_json_string(v),
				       (unsigned long long)RATE_MIN_BPS,
				       (unsigned long long)max_bps);
		*ret_bps = (uint64_t)n;
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return tg_fail(e, CNI_ERR_CONFIG, -EINVAL,
			       "%s must be a rate in bit/s (an integer, or a string like \"500M\")",
			       where);
	r = rate_parse_max(json_object_get_string(v), max_bps, ret_bps);
	if (r == -ERANGE)
		return tg_fail(e, CNI_ERR_CONFIG, r, "%s \"%.32s\" is out of range (1k..%s bit/s)",
			       where, json_object_get_string(v),
			       rate_format(max_bps, most, sizeof(most)));
	if (r < 0)
		return tg_fail(
			e, CNI_ERR_CONFIG, r,
			"%s \"%.32s\" is not a rate: use bits per second, optionally with k, M, "
			"G, T, Ki, Mi, Gi, Ti (\"500M\", \"1.5G\")",
			where, json_object_get_string(v));
	return 0;
}

const char *rate_format(uint64_t bps, char *buf, size_t size)
{
	if (bps >= 1000000000000ULL && bps % 10000000000ULL == 0)
		snprintf(buf, size,
			 "%g"
			 "T",
			 (double)bps / 1e12);
	else if (bps >= 1000000000ULL && bps % 10000000ULL == 0)
		snprintf(buf, size,
			 "%g"
			 "G",
			 (double)bps / 1e9);
	else if (bps >= 1000000ULL && bps % 10000ULL == 0)
		snprintf(buf, size,
			 "%g"
			 "M",
			 (double)bps / 1e6);
	else if (bps >= 1000ULL && bps % 10ULL == 0)
		snprintf(buf, size,
			 "%g"
			 "k",
			 (double)bps / 1e3);
	else
		snprintf(buf, size, "%llu", (unsigned long long)bps);
	return buf;
}
