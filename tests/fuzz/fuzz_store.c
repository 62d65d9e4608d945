// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer: state.json as the store reads it. Whatever parses must write
 * back to a document that parses to the same state.
 */
#include <stdlib.h>
#include <string.h>

#include "ipam/store.h"
#include "lib/jsonx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_object *root, *again = NULL;
	struct jx_parse_error pe;
	struct ipam_state st, st2;
	struct tg_err e = { 0 };

	if (size > (1 << 20) || jx_parse((const char *)data, size, &root, &pe) < 0)
		return 0;
	if (ipam_state_from_json(root, &st, &e) == 0) {
		again = ipam_state_to_json(&st);
		if (!again || ipam_state_from_json(again, &st2, &e) != 0)
			abort(); /* what the store read, it must be able to write and read again */
		if (st.n_att != st2.n_att || st.n_pool != st2.n_pool ||
		    st.n_cooling != st2.n_cooling ||
		    (st.n_pool && memcmp(st.pool, st2.pool, st.n_pool * sizeof(*st.pool)) != 0))
			abort();
		ipam_state_free(&st2);
		ipam_state_free(&st);
		json_object_put(again);
	}
	json_object_put(root);
	return 0;
}
