/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TG_LIB_RATE_H
#define TG_LIB_RATE_H

#include <stdint.h>
#include <json-c/json.h>

#include "lib/err.h"

/* HTB takes rates as 32-bit bytes per second through libnl: 32 Gbit/s at most. */
#define RATE_MAX_BPS 32000000000ULL
#define RATE_MIN_BPS 1000ULL

/*
 * A rate in bits per second, as kubelet parses the bandwidth annotations: an
 * integer, or a Kubernetes quantity ("500M", "1.5G", "100Mi", "10k", "2e9").
 * Its value is exact: a decimal number times its unit (k M G T: powers of
 * 1000; Ki Mi Gi Ti: of 1024; eN: 10^N), taken when it is a whole number of
 * bit/s. Anything that is not such a number, zero, negative, fractional bits
 * and unknown units ("10Mbps") are -EINVAL; values out of
 * RATE_MIN_BPS..RATE_MAX_BPS are -ERANGE. Limits: at most 19 significant
 * fractional digits (-EINVAL past them), exponents up to e18 (-ERANGE).
 */
int rate_parse(const char *s, uint64_t *ret_bps);
/* The same up to max_bps rather than RATE_MAX_BPS (a cluster-wide budget). */
int rate_parse_max(const char *s, uint64_t max_bps, uint64_t *ret_bps);
/* The same from a JSON string or integer; errors (code 7) name `where`. */
int rate_from_json(json_object *v, const char *where, uint64_t *ret_bps, struct tg_err *e);
int rate_from_json_max(json_object *v, const char *where, uint64_t max_bps, uint64_t *ret_bps,
		       struct tg_err *e);
/* "1.5G", "100M", "64k" or plain bits, for messages and the CLI. */
const char *rate_format(uint64_t bps, char *buf, size_t size);

#endif
