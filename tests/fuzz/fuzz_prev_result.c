// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer: prevResult as CHECK and DEL read it (the address of the
 * runtime's interface), given the interface name after a NUL. What is
 * found must be an address the document holds (as json-c writes it back).
 */
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cni/internal.h"
#include "lib/ip4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_tokener *tok = json_tokener_new();
	const char *text = (const char *)data, *ifname = "eth0";
	size_t len = strnlen(text, size);
	json_object *prev = NULL;
	char ifbuf[32], ip[IP4_STRLEN];
	uint32_t addr;

	if (!tok || size > (1 << 16))
		goto out;
	if (len + 1 < size) {
		size_t n = size - len - 1 < sizeof(ifbuf) - 1 ? size - len - 1 : sizeof(ifbuf) - 1;

		memcpy(ifbuf, text + len + 1, n);
		ifbuf[n] = '\0';
		ifname = ifbuf;
	}
	prev = json_tokener_parse_ex(tok, text, (int)len);
	if (prev && cni_prev_result_ip(prev, ifname, &addr) == 0) {
		const char *plain = json_object_to_json_string_ext(
			prev, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

		if (!strstr(plain, ip4_format(addr, ip)))
			abort(); /* an address the document does not hold */
	}
out:
	json_object_put(prev);
	if (tok)
		json_tokener_free(tok);
	return 0;
}
