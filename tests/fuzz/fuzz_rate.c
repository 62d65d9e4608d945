// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer, differential: rate_parse against the exact reference of
 * tests/unit/rate_ref.h (GMP rationals), the same comparison as
 * tests/unit/test_rate_diff.c's. Any string accepted by one and not the
 * other, a different value, a refusal other than -EINVAL or -ERANGE, or
 * -ERANGE for what is no number at all, aborts, naming the string and why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/rate.h"
#include "tests/unit/rate_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[256];
	const char *why;

	if (size >= sizeof(s))
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	why = ref_rate_mismatch(s, NULL);
	if (why) {
		fprintf(stderr, "\"%s\": %s\n", s, why);
		abort();
	}
	return 0;
}
