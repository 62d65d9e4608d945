// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer: etcd's answers as the allocator's election reads them (any
 * bytes: whatever answers at etcd's address writes them), and base64. A
 * parsed key's value is a NUL-terminated string within its bound; what
 * decodes encodes back to the same text.
 */
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_kv(const struct etcd_kv *kv)
{
	if (strnlen(kv->value, sizeof(kv->value)) >= sizeof(kv->value))
		abort();
	if (kv->exists && kv->create_revision <= 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	char why[ETCD_WHY_MAX], dec[ETCD_VALUE_MAX + 1], enc[2 * ETCD_VALUE_MAX + 8];
	struct etcd_kv kv;
	int64_t id, ttl, rev;
	bool won;
	long n;

	if (etcd_parse_grant(text, size, &id, &ttl, why) == 0 && (id == 0 || ttl <= 0))
		abort();
	etcd_parse_keepalive(text, size, &ttl, why);
	if (etcd_parse_campaign(text, size, &won, &rev, &kv, why) == 0) {
		if (rev <= 0)
			abort();
		check_kv(&kv);
	}
	if (etcd_parse_range(text, size, &kv, why) == 0)
		check_kv(&kv);
	n = etcd_b64_decode(text, size, dec, sizeof(dec));
	if (n >= 0) {
		etcd_b64_encode(dec, (size_t)n, enc);
		if (strlen(enc) != size || memcmp(enc, text, size) != 0)
			abort();
	}
	return 0;
}
