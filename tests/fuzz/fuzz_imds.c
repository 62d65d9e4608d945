// SPDX-License-Identifier: Apache-2.0
/* libFuzzer: an IMDS network document, for the uplink's MAC of the test fixtures. */
#include <stddef.h>
#include <stdint.h>

#include "ipam/imds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t mac[6] = { 0x00, 0x0d, 0x3a, 0xf8, 0x06, 0xec };
	struct imds_network net = { 0 };
	struct tg_err e = { 0 };

	if (imds_parse_network((const char *)data, size, mac, &net, &e) == 0)
		imds_network_free(&net);
	return 0;
}
