// SPDX-License-Identifier: Apache-2.0
#include "lib/steps.h"
#include "lib/util.h"

const char *const step_names[STEP_COUNT] = {
	"config", "store", "node", "veth", "pod", "routes", "tc", "nft", "result",
};

static int64_t spent[STEP_COUNT];

int64_t step_done(enum step s, int64_t t0)
{
	int64_t now = time_mono_ns();

	if (s < STEP_COUNT)
		spent[s] += now - t0;
	return now;
}

int64_t step_ns(enum step s)
{
	return s < STEP_COUNT ? spent[s] : 0;
}
