/*
 * libFuzzer target: the session protocol's message decoder (provider/switch/
 * nss_proto.h) on arbitrary bytes.  A message it accepts must lie within the
 * input and encode back to the same bytes; a HELLO's body is decoded too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nss_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static uint8_t out[1u << 16];
	struct nss_hello hello;
	struct nss_msg m;
	const char *why;

	if (nss_decode(d, n, &m, &why) != 0)
		return 0;
	if (nss_msg_len(m.h.desc_len, m.h.data_len) != n || n > sizeof(out) ||
	    nss_encode(&m.h, m.desc, m.data, out, sizeof(out)) != (long)n || memcmp(out, d, n))
		abort();
	if (m.h.type == NSS_HELLO)
		(void)nss_hello_decode(m.data, m.h.data_len, &hello, &why);
	return 0;
}
