/*
 * Unit tests of the session protocol's message codec (provider/switch/
 * nss_proto.h, docs/session-protocol.md): a message written byte by byte
 * here, independently of the encoder, decodes to its fields; encode/decode
 * round trips for every type; one targeted fault per refusal; truncation
 * and extension at every length; random bytes never crash the decoder and
 * never decode to a message that breaks the layout; the HELLO body; the
 * credit rule at its edges, across the wrap of seq.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nss_proto.h"
#include "nstest.h"

/* A header with valid fields for type (no descriptor, data as given). */
static struct nss_hdr hdr(uint8_t type, uint32_t data_len)
{
	struct nss_hdr h = {.type = type, .seq = 7, .credit_limit = 40, .data_len = data_len};

	switch (type) {
	case NSS_HELLO:
		h.seq = 0;
		h.data_len = NSS_HELLO_LEN;
		break;
	case NSS_SRC_AVAIL:
		h.rdma_len = 1u << 20;
		h.data_len = data_len ? data_len : 1;
		h.desc_len = 32;
		break;
	case NSS_SINK_AVAIL:
		h.rdma_len = 65536;
		h.desc_len = 32;
		h.data_len = 0;
		break;
	case NSS_RD_DONE:
	case NSS_WR_DONE:
		h.rdma_len = 4096;
		h.data_len = 0;
		break;
	case NSS_SHUTDOWN: h.data_len = 0; break;
	case NSS_ABORT:
		h.arg = NSS_ABORT_PROTOCOL;
		h.data_len = 0;
		break;
	}
	h.stream_off = type == NSS_HELLO ? 0 : 123456789;
	return h;
}

/* A message written field by field, little-endian, as the page lays it out. */
static void test_layout_by_hand(void)
{
	uint8_t m[NSS_HDR_LEN + 32 + 3] = {0};
	struct nss_msg d;
	const char *why;

	m[0] = NSS_SRC_AVAIL;
	m[2] = 32;                                              /* desc_len */
	m[4] = 0x04, m[5] = 0x03, m[6] = 0x02, m[7] = 0x01;     /* seq 0x01020304 */
	m[8] = 0x10;                                            /* credit_limit 16 */
	m[12] = 3;                                              /* data_len */
	m[16] = 0x00, m[17] = 0x00, m[18] = 0x10;               /* rdma_len 1 MiB */
	m[24] = 0x88, m[25] = 0x77, m[26] = 0x66, m[31] = 0x01; /* stream_off */
	for (int i = 0; i < 32; i++)
		m[NSS_HDR_LEN + i] = (uint8_t)(0xa0 + i);
	memcpy(m + NSS_HDR_LEN + 32, "abc", 3);
	NST_REQUIRE_EQ(nss_decode(m, sizeof(m), &d, &why), 0);
	NST_EQ(d.h.type, NSS_SRC_AVAIL);
	NST_EQ_U(d.h.seq, 0x01020304u);
	NST_EQ_U(d.h.credit_limit, 16);
	NST_EQ_U(d.h.data_len, 3);
	NST_EQ_U(d.h.rdma_len, 1u << 20);
	NST_EQ_U(d.h.stream_off, 0x0100000000667788ull);
	NST_TRUE(d.desc == m + NSS_HDR_LEN && d.desc[31] == 0xbf);
	NST_TRUE(d.data && memcmp(d.data, "abc", 3) == 0);
	/* And the encoder writes the same bytes. */
	{
		uint8_t out[sizeof(m)];

		NST_EQ(nss_encode(&d.h, d.desc, d.data, out, sizeof(out)), (long)sizeof(m));
		NST_TRUE(memcmp(out, m, sizeof(m)) == 0);
	}
}

/* Every type round-trips, with its descriptor padded to 8 and its data after. */
static void test_round_trip_every_type(void)
{
	uint8_t desc[NSS_DESC_MAX], data[300], buf[1024];

	nst_fill(desc, sizeof(desc), 1);
	nst_fill(data, sizeof(data), 2);
	for (uint8_t t = NSS_HELLO; t < NSS_TYPE_MAX_; t++) {
		for (uint16_t dl = 0; dl <= 40; dl += 5) {
			struct nss_hdr h = hdr(t, t == NSS_DATA ? 17 : 5);
			struct nss_msg m;
			const char *why = NULL;
			long n;
			int rc;

			if (t == NSS_SRC_AVAIL || t == NSS_SINK_AVAIL)
				h.desc_len = t == NSS_SINK_AVAIL && !dl ? 1 : dl;
			else if (dl)
				continue;
			n = nss_encode(&h, desc, data, buf, sizeof(buf));
			NST_CHECK_(n > 0, CU_FALSE, "type %u desc %u: encode %ld", t, h.desc_len,
				   n);
			if (n <= 0)
				continue;
			NST_EQ((size_t)n, nss_msg_len(h.desc_len, h.data_len));
			/* The data starts on 8 bytes: only it can make the length odd. */
			NST_EQ(((size_t)n - h.data_len) & 7u, 0);
			rc = nss_decode(buf, (size_t)n, &m, &why);
			NST_CHECK_(rc == 0, CU_FALSE, "type %u: %s", t, why ? why : "");
			NST_TRUE(memcmp(&m.h, &h, sizeof(h)) == 0);
			NST_TRUE(!h.desc_len || memcmp(m.desc, desc, h.desc_len) == 0);
			NST_TRUE(!h.data_len || memcmp(m.data, data, h.data_len) == 0);
		}
	}
}

/* One fault per refusal: each is named, and the encoder refuses it too. */
static void test_each_refusal(void)
{
	uint8_t buf[1024], desc[64] = {1};
	struct nss_msg m;
	const char *why;
	/* Each spoiled field, against the sentence that names it. */
	struct {
		struct nss_hdr h;
		const char *want;
	} bad[16];
	size_t n = 0;

	bad[n].h = hdr(NSS_DATA, 4), bad[n].h.type = 0, bad[n++].want = "unknown message type";
	bad[n].h = hdr(NSS_DATA, 4), bad[n].h.type = NSS_TYPE_MAX_,
	bad[n++].want = "unknown message type";
	bad[n].h = hdr(NSS_DATA, 4), bad[n].h.flags = 1, bad[n++].want = "flags";
	bad[n].h = hdr(NSS_SRC_AVAIL, 4), bad[n].h.desc_len = NSS_DESC_MAX + 1,
	bad[n++].want = "longer than 256";
	bad[n].h = hdr(NSS_DATA, 4), bad[n].h.desc_len = 8, bad[n++].want = "carries none";
	bad[n].h = hdr(NSS_SINK_AVAIL, 0), bad[n].h.desc_len = 0,
	bad[n++].want = "without a descriptor";
	bad[n].h = hdr(NSS_RD_DONE, 0), bad[n].h.rdma_len = 0, bad[n++].want = "0 bytes";
	bad[n].h = hdr(NSS_DATA, 4), bad[n].h.rdma_len = 9, bad[n++].want = "moves nothing";
	bad[n].h = hdr(NSS_ABORT, 0), bad[n].h.arg = 0, bad[n++].want = "known reason";
	bad[n].h = hdr(NSS_ABORT, 0), bad[n].h.arg = NSS_ABORT_MAX_, bad[n++].want = "known reason";
	bad[n].h = hdr(NSS_DATA, 4), bad[n].h.arg = 1, bad[n++].want = "arg other than 0";
	bad[n].h = hdr(NSS_HELLO, 0), bad[n].h.seq = 1, bad[n++].want = "not the first";
	bad[n].h = hdr(NSS_HELLO, 0), bad[n].h.data_len = 63, bad[n++].want = "64 to 256";
	bad[n].h = hdr(NSS_SRC_AVAIL, 0), bad[n].h.data_len = 0, bad[n++].want = "first byte";
	bad[n].h = hdr(NSS_WR_DONE, 0), bad[n].h.data_len = 2, bad[n++].want = "carries none";
	bad[n].h = hdr(NSS_DATA, 4), bad[n].h.stream_off = UINT64_MAX - 2,
	bad[n++].want = "past 2^64";
	for (size_t i = 0; i < n; i++) {
		uint8_t raw[2048] = {0};
		struct nss_hdr *h = &bad[i].h;
		size_t len = nss_msg_len(h->desc_len > NSS_DESC_MAX ? 0 : h->desc_len, h->data_len);

		NST_EQ(nss_encode(h, desc, raw, buf, sizeof(buf)), -EINVAL);
		/* Written by hand, the decoder refuses it with its sentence. */
		raw[0] = h->type;
		raw[1] = h->flags;
		raw[2] = (uint8_t)h->desc_len, raw[3] = (uint8_t)(h->desc_len >> 8);
		for (int k = 0; k < 4; k++) {
			raw[4 + k] = (uint8_t)(h->seq >> (8 * k));
			raw[12 + k] = (uint8_t)(h->data_len >> (8 * k));
			raw[16 + k] = (uint8_t)(h->rdma_len >> (8 * k));
			raw[20 + k] = (uint8_t)(h->arg >> (8 * k));
		}
		for (int k = 0; k < 8; k++)
			raw[24 + k] = (uint8_t)(h->stream_off >> (8 * k));
		NST_EQ(nss_decode(raw, len, &m, &why), -EPROTO);
		NST_CHECK_(why && strstr(why, bad[i].want), CU_FALSE,
			   "case %zu: said \"%s\", want %s", i, why ? why : "(nothing)",
			   bad[i].want);
	}
	/* Non-zero padding after a descriptor. */
	{
		struct nss_hdr h = hdr(NSS_SINK_AVAIL, 0);
		long len;

		h.desc_len = 5;
		len = nss_encode(&h, desc, NULL, buf, sizeof(buf));
		NST_REQUIRE(len > 0);
		buf[NSS_HDR_LEN + 6] = 1;
		NST_EQ(nss_decode(buf, (size_t)len, &m, &why), -EPROTO);
		NST_TRUE(why && strstr(why, "padding"));
	}
	/* Too small a buffer to encode into. */
	{
		struct nss_hdr h = hdr(NSS_DATA, 100);

		NST_EQ(nss_encode(&h, NULL, NULL, buf, sizeof(buf)), -EINVAL); /* no data given */
		NST_EQ(nss_encode(&h, NULL, buf, buf + 512, 100), -EMSGSIZE);
	}
}

/* A valid message cut short or extended by any number of bytes is refused. */
static void test_truncated_and_extended(void)
{
	uint8_t desc[40], data[70], buf[512];
	struct nss_hdr h = hdr(NSS_SRC_AVAIL, 70);
	struct nss_msg m;
	const char *why;
	long n;

	nst_fill(desc, sizeof(desc), 3);
	nst_fill(data, sizeof(data), 4);
	h.desc_len = 37;
	n = nss_encode(&h, desc, data, buf, sizeof(buf));
	NST_REQUIRE(n > 0);
	for (long len = 0; len < n; len++)
		NST_CHECK_(nss_decode(buf, (size_t)len, &m, &why) == -EPROTO, CU_FALSE,
			   "%ld of %ld bytes accepted", len, n);
	for (long extra = 1; extra < 16; extra++) {
		NST_EQ(nss_decode(buf, (size_t)(n + extra), &m, &why), -EPROTO);
		NST_TRUE(why && strstr(why, "after the message"));
	}
	NST_EQ(nss_decode(buf, (size_t)n, &m, &why), 0);
}

/*
 * Random bytes, and random changes to valid messages: the decoder never
 * reads past len (ASan builds check) and every message it accepts has its
 * parts inside the buffer and re-encodes to the same bytes.
 */
static void test_random_input(void)
{
	uint8_t buf[600], out[600], desc[64] = {5}, data[200] = {6};
	unsigned seed = 12345;

	for (int round = 0; round < 200000; round++) {
		size_t len = (size_t)rand_r(&seed) % sizeof(buf);
		struct nss_msg m;
		const char *why;

		if (round % 2) {
			struct nss_hdr h = hdr((uint8_t)(1 + round % (NSS_TYPE_MAX_ - 1)), 50);
			long n = nss_encode(&h, desc, data, buf, sizeof(buf));

			NST_REQUIRE(n > 0);
			len = (size_t)n;
			buf[(size_t)rand_r(&seed) % len] ^= (uint8_t)(1u << (rand_r(&seed) % 8));
		} else {
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)rand_r(&seed);
		}
		if (nss_decode(buf, len, &m, &why) != 0) {
			NST_TRUE(why != NULL);
			continue;
		}
		NST_TRUE(nss_msg_len(m.h.desc_len, m.h.data_len) == len);
		NST_TRUE(nss_encode(&m.h, m.desc, m.data, out, sizeof(out)) == (long)len);
		NST_TRUE(memcmp(out, buf, len) == 0);
	}
}

static void test_hello(void)
{
	struct nss_hello h = {.version = 1,
			      .features = NSS_F_CAN_READ,
			      .recv_count = 16,
			      .recv_size = 4096,
			      .max_rdma = 1u << 30,
			      .rdma_threshold = 65536,
			      .desc_len = 32},
			 d;
	uint8_t b[NSS_HELLO_MAX] = {0};
	const char *why;

	nss_hello_encode(&h, b);
	NST_TRUE(memcmp(b, "NSSP", 4) == 0);
	NST_EQ(nss_hello_decode(b, NSS_HELLO_LEN, &d, &why), 0);
	NST_EQ(d.version, h.version);
	NST_EQ(d.features, h.features);
	NST_EQ_U(d.recv_count, h.recv_count);
	NST_EQ_U(d.recv_size, h.recv_size);
	NST_EQ_U(d.max_rdma, h.max_rdma);
	NST_EQ_U(d.rdma_threshold, h.rdma_threshold);
	NST_EQ(d.desc_len, h.desc_len);
	/* A later version's longer body with bits of its own is read. */
	b[4] = NSS_VERSION + 1, b[6] = 0xff, b[30] = 7, b[100] = 9;
	NST_EQ(nss_hello_decode(b, 128, &d, &why), 0);
	NST_EQ(d.version, NSS_VERSION + 1);
	/* Version 2 has xfers at byte 26; in version 1 it is reserved. */
	nss_hello_encode(&h, b);
	b[4] = 2, b[26] = 2;
	NST_EQ(nss_hello_decode(b, NSS_HELLO_LEN, &d, &why), 0);
	NST_EQ(d.xfers, 2);
	NST_EQ_U(nss_hello_xfers(&d), 2);
	b[26] = 255;
	NST_EQ(nss_hello_decode(b, NSS_HELLO_LEN, &d, &why), 0);
	NST_EQ_U(nss_hello_xfers(&d), NSS_XFERS_MAX);
	b[4] = 1;
	NST_EQ(nss_hello_decode(b, NSS_HELLO_LEN, &d, &why), -EPROTO);
	NST_CHECK_(why && strstr(why, "reserved"), CU_FALSE, "version 1, byte 26: %s",
		   why ? why : "(nothing)");
	nss_hello_encode(&h, b);
	{
		static const struct {
			size_t at;
			uint8_t v;
			const char *want;
		} bad[] = {{0, 'X', "magic"},      {4, 0, "version 0"}, {6, 4, "feature bits"},
			   {8, 3, "fewer than 4"}, {13, 0, "512"},      {25, 2, "256 bytes"},
			   {40, 1, "reserved"}};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			uint8_t c[NSS_HELLO_LEN];

			memcpy(c, b, sizeof(c));
			c[bad[i].at] = bad[i].v;
			if (bad[i].at == 4)
				c[5] = 0;
			NST_EQ(nss_hello_decode(c, sizeof(c), &d, &why), -EPROTO);
			NST_CHECK_(why && strstr(why, bad[i].want), CU_FALSE, "byte %zu: %s",
				   bad[i].at, why ? why : "(nothing)");
		}
		NST_EQ(nss_hello_decode(b, NSS_HELLO_LEN - 1, &d, &why), -EPROTO);
		NST_EQ(nss_hello_decode(b, NSS_HELLO_MAX + 1, &d, &why), -EPROTO);
	}
	/* A largest RDMA of 4 KiB at least: a large send's inline head and the
	 * RDMA after it are split by it. */
	h.max_rdma = NSS_MIN_RDMA - 1;
	nss_hello_encode(&h, b);
	NST_EQ(nss_hello_decode(b, NSS_HELLO_LEN, &d, &why), -EPROTO);
	NST_TRUE(why && strstr(why, "under 4 KiB"));
	h.max_rdma = NSS_MIN_RDMA;
	nss_hello_encode(&h, b);
	NST_EQ(nss_hello_decode(b, NSS_HELLO_LEN, &d, &why), 0);
	/* Receives, at most 2^30: a credit limit of recv_count - 1 must stay
	 * ahead of seq 1 in serial arithmetic. */
	h.recv_count = NSS_MAX_RECVS + 1;
	nss_hello_encode(&h, b);
	NST_EQ(nss_hello_decode(b, NSS_HELLO_LEN, &d, &why), -EPROTO);
	NST_TRUE(why && strstr(why, "more than 2^30"));
	h.recv_count = NSS_MAX_RECVS;
	nss_hello_encode(&h, b);
	NST_EQ(nss_hello_decode(b, NSS_HELLO_LEN, &d, &why), 0);
}

/* The credit rule at its edges, and across the wrap of the 32-bit seq. */
static void test_credit_rule(void)
{
	static const uint32_t bases[] = {0, 1000, 0xfffffffeu};

	for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
		uint32_t seq = bases[b];

		/* avail = limit - seq + 1 credits. */
		for (uint32_t avail = 0; avail <= 4; avail++) {
			uint32_t limit = seq + avail - 1;

			NST_EQ(nss_may_send(NSS_DATA, true, seq, limit), avail >= 3);
			NST_EQ(nss_may_send(NSS_SRC_AVAIL, true, seq, limit), avail >= 3);
			NST_EQ(nss_may_send(NSS_SINK_AVAIL, false, seq, limit), avail >= 3);
			NST_EQ(nss_may_send(NSS_RD_DONE, false, seq, limit), avail >= 2);
			NST_EQ(nss_may_send(NSS_WR_DONE, false, seq, limit), avail >= 2);
			NST_EQ(nss_may_send(NSS_SHUTDOWN, false, seq, limit), avail >= 2);
			NST_EQ(nss_may_send(NSS_DATA, false, seq, limit), avail >= 1);
			NST_TRUE(nss_may_send(NSS_ABORT, false, seq, limit));
		}
		NST_TRUE(!nss_may_send(NSS_DATA, false, seq, seq - 100));
	}
	NST_TRUE(nss_may_send(NSS_HELLO, true, 0, 0));
	NST_TRUE(!nss_may_send(NSS_HELLO, true, 1, 100));
	NST_TRUE(!nss_may_send(0, false, 1, 100));
	NST_TRUE(nss_after(1, 0xffffffffu) && !nss_after(0xffffffffu, 1));
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"layout_by_hand", test_layout_by_hand},
	    {"round_trip_every_type", test_round_trip_every_type},
	    {"each_refusal", test_each_refusal},
	    {"truncated_and_extended", test_truncated_and_extended},
	    {"random_input", test_random_input},
	    {"hello", test_hello},
	    {"credit_rule", test_credit_rule},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "nss_proto", tests, NULL, NULL);
}
