// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer, differential: rate_parse against the exact reference of
 * tests/unit/rate_ref.h (GMP rationals). Any string accepted by one and
 * not the other, a different value, or -ERANGE for what is no number at
 * all, aborts.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/rate.h"
#include "tests/unit/rate_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[256];
	uint64_t got = 0, want = 0;
	int r, w;

	if (size >= sizeof(s))
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	r = rate_parse(s, &got);
	w = ref_rate_parse(s, &want);
	if ((r == 0) != (w == 0) || (r == 0 && got != want) || (w == -EINVAL && r != -EINVAL))
		abort();
	return 0;
}
