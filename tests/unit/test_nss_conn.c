/*
 * Unit tests of the session protocol's connection state (provider/switch/
 * nss_conn.h): two connections, A and B, exchange every kind of message
 * through the codec as two switches would, on both paths; the credit rule
 * holds them back and reposting lets them go; and each out-of-place message
 * a hostile or broken peer could send is refused with its sentence, leaving
 * the state as it was.
 */
#include <errno.h>
#include <string.h>

#include "nss_conn.h"
#include "nstest.h"

static uint8_t wire[1024];
static const uint8_t desc[32] = {1, 2, 3};
static uint8_t data[256];

static struct nss_hello hello(bool can_read, uint32_t recvs)
{
	return (struct nss_hello){.version = NSS_VERSION,
				  .features = (can_read ? NSS_F_CAN_READ : 0) | NSS_F_READABLE,
				  .recv_count = recvs,
				  .recv_size = 4096,
				  .max_rdma = 1u << 20,
				  .rdma_threshold = 65536,
				  .desc_len = sizeof(desc)};
}

/* Encode h as from's message, decode it and give it to to: nss_conn_rx's
 * result, with *why. */
static int pass(struct nss_conn *from, const struct nss_hdr *h, struct nss_conn *to,
		const char **why)
{
	uint8_t body[NSS_HELLO_LEN];
	struct nss_msg m;
	uint32_t reason;
	long n;

	if (h->type == NSS_HELLO)
		nss_hello_encode(&from->local, body);
	n = nss_encode(h, desc, h->type == NSS_HELLO ? body : data, wire, sizeof(wire));
	NST_REQUIRE(n > 0);
	NST_REQUIRE_EQ(nss_decode(wire, (size_t)n, &m, why), 0);
	return nss_conn_rx(to, &m, why, &reason);
}

/* A and B connected: both HELLOs exchanged, each side taking xfers large
 * transfers outstanding as a sink (0 in the HELLO: one). */
static void connect_x(struct nss_conn *a, bool a_reads, struct nss_conn *b, bool b_reads,
		      uint32_t recvs, uint8_t xfers)
{
	struct nss_hello ha = hello(a_reads, recvs), hb = hello(b_reads, recvs);
	struct nss_hdr h;
	const char *why;

	ha.xfers = hb.xfers = xfers;
	nss_conn_init(a, &ha);
	nss_conn_init(b, &hb);
	NST_REQUIRE_EQ(nss_conn_data_hdr(a, 0, &h), -EPROTO); /* HELLO first */
	NST_REQUIRE_EQ(nss_conn_hello_hdr(a, &h), 0);
	NST_REQUIRE_EQ(pass(a, &h, b, &why), 0);
	NST_REQUIRE_EQ(nss_conn_data_hdr(a, 5, &h), -EAGAIN); /* B's credit not known */
	NST_REQUIRE_EQ(nss_conn_hello_hdr(b, &h), 0);
	NST_REQUIRE_EQ(pass(b, &h, a, &why), 0);
	NST_EQ(a->out_path, b_reads ? NSS_PATH_READ : NSS_PATH_WRITE);
	NST_EQ(b->in_path, a->out_path);
}

static void connect(struct nss_conn *a, bool a_reads, struct nss_conn *b, bool b_reads,
		    uint32_t recvs)
{
	connect_x(a, a_reads, b, b_reads, recvs, 0);
}

static bool same_dir(const struct nss_dir *x, const struct nss_dir *y)
{
	return x->off == y->off && x->end == y->end && x->nxfer == y->nxfer &&
	       !memcmp(x->xq, y->xq, sizeof(x->xq)) && x->nsink == y->nsink &&
	       !memcmp(x->sq, y->sq, sizeof(x->sq)) && x->shut == y->shut &&
	       x->synced == y->synced && x->nstarts == y->nstarts &&
	       !memcmp(x->starts, y->starts, sizeof(x->starts));
}

/* The state two connections hold, field by field (structs have padding). */
static bool same_state(const struct nss_conn *x, const struct nss_conn *y)
{
	return x->hello_in == y->hello_in && x->hello_out == y->hello_out &&
	       x->in_path == y->in_path && x->out_path == y->out_path && x->in_seq == y->in_seq &&
	       x->out_seq == y->out_seq && x->peer_limit == y->peer_limit && x->limit == y->limit &&
	       x->advertised == y->advertised && x->aborted == y->aborted &&
	       same_dir(&x->in, &y->in) && same_dir(&x->out, &y->out);
}

/* Small data, a large send on the read path, SHUTDOWN: the stream offsets. */
static void test_read_path(void)
{
	struct nss_conn a, b;
	struct nss_hdr h;
	const char *why;

	connect(&a, false, &b, true, 16);
	NST_REQUIRE_EQ(nss_conn_data_hdr(&a, 100, &h), 0);
	NST_EQ_U(h.stream_off, 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_REQUIRE_EQ(nss_conn_src_avail_hdr(&a, 10, 5000, sizeof(desc), &h), 0);
	NST_EQ_U(h.stream_off, 100);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ_U(b.in.off, 110);
	NST_TRUE(nss_dir_xfer(&b.in));
	/* Nothing more from A until it is done; B reads in two parts. */
	NST_EQ(nss_conn_data_hdr(&a, 1, &h), -EPROTO);
	NST_REQUIRE_EQ(nss_conn_rd_done_hdr(&b, 3000, &h), 0);
	NST_REQUIRE_EQ(pass(&b, &h, &a, &why), 0);
	NST_TRUE(nss_dir_xfer(&a.out));
	NST_EQ(nss_conn_rd_done_hdr(&b, 2001, &h), -EPROTO); /* more than is left */
	NST_REQUIRE_EQ(nss_conn_rd_done_hdr(&b, 2000, &h), 0);
	NST_REQUIRE_EQ(pass(&b, &h, &a, &why), 0);
	NST_TRUE(!nss_dir_xfer(&a.out) && !nss_dir_xfer(&b.in));
	NST_EQ_U(a.out.off, 5110);
	NST_EQ_U(b.in.off, 5110);
	NST_REQUIRE_EQ(nss_conn_shutdown_hdr(&a, &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_TRUE(b.in.shut);
	NST_EQ(nss_conn_data_hdr(&a, 1, &h), -EPROTO);
}

/* The write path: SRC_AVAIL without a descriptor, SINK_AVAILs, WR_DONEs. */
static void test_write_path(void)
{
	struct nss_conn a, b;
	struct nss_hdr h;
	const char *why;

	connect(&a, true, &b, false, 16);
	NST_EQ(nss_conn_src_avail_hdr(&a, 1, 4096, sizeof(desc), &h), -EPROTO);
	NST_REQUIRE_EQ(nss_conn_src_avail_hdr(&a, 1, 4096, 0, &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ(nss_conn_wr_done_hdr(&a, &h), -EPROTO); /* no sink yet */
	for (int part = 0; part < 2; part++) {
		NST_REQUIRE_EQ(nss_conn_sink_avail_hdr(&b, 2048, sizeof(desc), &h), 0);
		NST_EQ_U(h.stream_off, 1 + 2048u * (unsigned)part);
		NST_REQUIRE_EQ(pass(&b, &h, &a, &why), 0);
		NST_EQ(nss_conn_sink_avail_hdr(&b, 1, sizeof(desc), &h),
		       -EAGAIN); /* one at a time: B's HELLO allows one */
		NST_REQUIRE_EQ(nss_conn_wr_done_hdr(&a, &h), 0);
		NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	}
	NST_TRUE(!nss_dir_xfer(&a.out) && !nss_dir_xfer(&b.in));
	NST_EQ_U(b.in.off, 4097);
	NST_REQUIRE_EQ(nss_conn_data_hdr(&a, 7, &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ_U(b.in.off, 4104);
}

/* Two large transfers outstanding on the read path, as B's HELLO allows:
 * the second's head comes before the first's RDMA part is done, the
 * RD_DONEs go in stream order, and a third transfer waits. */
static void test_pipelined_read_path(void)
{
	struct nss_conn a, b, before;
	struct nss_hdr h, third;
	const char *why;

	connect_x(&a, false, &b, true, 16, 2);
	NST_REQUIRE_EQ(nss_conn_data_hdr(&a, 100, &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_REQUIRE_EQ(nss_conn_src_avail_hdr(&a, 10, 5000, sizeof(desc), &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ_U(nss_conn_xfer_room(&a), 1);
	NST_REQUIRE_EQ(nss_conn_src_avail_hdr(&a, 20, 3000, sizeof(desc), &h), 0);
	NST_EQ_U(h.stream_off, 5110); /* after the first one's RDMA part */
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ_U(b.in.off, 110);
	NST_EQ_U(b.in.end, 8130);
	NST_EQ_U(nss_dir_xfer_end(&b.in), 5110);
	NST_EQ(nss_conn_src_avail_hdr(&a, 1, 10, sizeof(desc), &h), -EAGAIN);
	NST_EQ(nss_conn_data_hdr(&a, 1, &h), -EPROTO);

	/* A third one forged anyway is refused, and changes nothing. */
	third = (struct nss_hdr){.type = NSS_SRC_AVAIL,
				 .desc_len = sizeof(desc),
				 .seq = a.out_seq,
				 .credit_limit = a.limit,
				 .data_len = 1,
				 .rdma_len = 10,
				 .stream_off = 8130};
	before = b;
	NST_EQ(pass(&a, &third, &b, &why), -EPROTO);
	NST_TRUE(why && strstr(why, "more large transfers outstanding than HELLO allows"));
	NST_TRUE(same_state(&before, &b));

	/* The first one's RD_DONE may not run into the second. */
	NST_EQ(nss_conn_rd_done_hdr(&b, 5001, &h), -EPROTO);
	NST_REQUIRE_EQ(nss_conn_rd_done_hdr(&b, 5000, &h), 0);
	NST_EQ_U(h.stream_off, 110);
	NST_EQ_U(b.in.off, 5130); /* the second's RDMA part: its head came */
	NST_REQUIRE_EQ(pass(&b, &h, &a, &why), 0);
	NST_EQ_U(a.out.off, 5130);
	NST_EQ_U(nss_conn_xfer_room(&a), 1);
	/* A's credit update says where it stands; B knows it is past the
	 * first transfer's RDMA start at least. */
	NST_REQUIRE_EQ(nss_conn_data_hdr(&a, 0, &h), 0);
	NST_EQ_U(h.stream_off, 5130);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_REQUIRE_EQ(nss_conn_rd_done_hdr(&b, 3000, &h), 0);
	NST_EQ_U(h.stream_off, 5130);
	NST_REQUIRE_EQ(pass(&b, &h, &a, &why), 0);
	NST_TRUE(!nss_dir_xfer(&a.out) && !nss_dir_xfer(&b.in));
	NST_EQ_U(a.out.off, 8130);
	NST_EQ_U(b.in.off, 8130);
	NST_REQUIRE_EQ(nss_conn_data_hdr(&a, 2, &h), 0);
	NST_EQ_U(h.stream_off, 8130);
	NST_EQ(pass(&a, &h, &b, &why), 0);
}

/* A's second SRC_AVAIL crosses B's RD_DONE of the first: B has finished
 * the first transfer when the second comes, but A has not heard yet, and
 * its credit update says it still stands at the first one's start. */
static void test_update_behind_finished_transfer(void)
{
	struct nss_conn a, b;
	struct nss_hdr h, rd_done;
	const char *why;

	connect_x(&a, false, &b, true, 16, 2);
	NST_REQUIRE_EQ(nss_conn_src_avail_hdr(&a, 10, 5000, sizeof(desc), &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_REQUIRE_EQ(nss_conn_rd_done_hdr(&b, 5000, &rd_done), 0); /* on its way */
	NST_TRUE(!nss_dir_xfer(&b.in));
	NST_REQUIRE_EQ(nss_conn_src_avail_hdr(&a, 10, 3000, sizeof(desc), &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ_U(b.in.off, 5020);
	NST_REQUIRE_EQ(nss_conn_data_hdr(&a, 0, &h), 0);
	NST_EQ_U(h.stream_off, 10);
	NST_EQ(pass(&a, &h, &b, &why), 0);
	/* An update from before the first transfer's RDMA part is wrong. */
	h.seq++;
	h.stream_off = 9;
	NST_EQ(pass(&a, &h, &b, &why), -EPROTO);
	NST_REQUIRE_EQ(pass(&b, &rd_done, &a, &why), 0);
	NST_EQ_U(a.out.off, 5020);
}

/* A peer of version 1 (byte 26 reserved) and one of version 2 that
 * announces two transfers run version 1: one transfer at a time, both
 * ways. */
static void test_version_1_peer(void)
{
	struct nss_hello ha = hello(false, 16), hb = hello(true, 16);
	struct nss_conn a, b;
	struct nss_hdr h;
	const char *why;

	ha.version = 1;
	hb.xfers = 2;
	nss_conn_init(&a, &ha);
	nss_conn_init(&b, &hb);
	NST_REQUIRE_EQ(nss_conn_hello_hdr(&a, &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_REQUIRE_EQ(nss_conn_hello_hdr(&b, &h), 0);
	NST_REQUIRE_EQ(pass(&b, &h, &a, &why), 0);
	NST_EQ(a.version, 1);
	NST_EQ(b.version, 1);
	NST_EQ_U(nss_conn_xfer_room(&a), 1);
	NST_REQUIRE_EQ(nss_conn_src_avail_hdr(&a, 10, 5000, sizeof(desc), &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ(nss_conn_src_avail_hdr(&a, 10, 5000, sizeof(desc), &h), -EAGAIN);
	/* Forged anyway: B holds A to version 1's one transfer. */
	h.type = NSS_SRC_AVAIL, h.seq = a.out_seq, h.credit_limit = a.limit, h.desc_len = 32;
	h.data_len = 1, h.rdma_len = 10, h.stream_off = 5110;
	NST_EQ(pass(&a, &h, &b, &why), -EPROTO);
	NST_TRUE(why && strstr(why, "a second large transfer before the first is done"));
}

/* Two transfers outstanding on the write path: B offers the second one's
 * RDMA part before the first one's WR_DONE, skipping the second's head;
 * WR_DONEs answer the SINK_AVAILs in order. */
static void test_pipelined_write_path(void)
{
	struct nss_conn a, b, before;
	struct nss_hdr h, bad;
	uint64_t at = 0;
	const char *why;

	connect_x(&a, true, &b, false, 16, 2);
	NST_REQUIRE_EQ(nss_conn_src_avail_hdr(&a, 1, 4096, 0, &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ_U(nss_conn_sink_next(&b, &at), 4096);
	NST_EQ_U(at, 1);
	NST_REQUIRE_EQ(nss_conn_sink_avail_hdr(&b, 4096, sizeof(desc), &h), 0);
	NST_REQUIRE_EQ(pass(&b, &h, &a, &why), 0);
	NST_EQ_U(nss_conn_sink_next(&b, &at), 0); /* all of it offered */
	NST_REQUIRE_EQ(nss_conn_src_avail_hdr(&a, 1, 100, 0, &h), 0);
	NST_EQ_U(h.stream_off, 4097);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ_U(nss_conn_sink_next(&b, &at), 100);
	NST_EQ_U(at, 4098);

	/* A SINK_AVAIL over the second one's head is refused. */
	bad = (struct nss_hdr){.type = NSS_SINK_AVAIL,
			       .desc_len = sizeof(desc),
			       .seq = b.out_seq,
			       .credit_limit = b.limit,
			       .rdma_len = 100,
			       .stream_off = 4097};
	before = a;
	NST_EQ(pass(&b, &bad, &a, &why), -EPROTO);
	NST_TRUE(why && strstr(why, "not where the transfer stands"));
	NST_TRUE(same_state(&before, &a));

	NST_REQUIRE_EQ(nss_conn_sink_avail_hdr(&b, 100, sizeof(desc), &h), 0);
	NST_EQ_U(h.stream_off, 4098);
	NST_REQUIRE_EQ(pass(&b, &h, &a, &why), 0);
	NST_EQ(nss_conn_sink_avail_hdr(&b, 1, sizeof(desc), &h), -EAGAIN); /* two out */

	/* A WR_DONE of the second SINK_AVAIL first is refused. */
	bad = (struct nss_hdr){.type = NSS_WR_DONE,
			       .seq = a.out_seq,
			       .credit_limit = a.limit,
			       .rdma_len = 100,
			       .stream_off = 4098};
	before = b;
	NST_EQ(pass(&a, &bad, &b, &why), -EPROTO);
	NST_TRUE(why && strstr(why, "not the SINK_AVAIL's"));
	NST_TRUE(same_state(&before, &b));

	NST_REQUIRE_EQ(nss_conn_wr_done_hdr(&a, &h), 0);
	NST_EQ_U(h.stream_off, 1);
	NST_EQ_U(h.rdma_len, 4096);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ_U(b.in.off, 4098);
	NST_REQUIRE_EQ(nss_conn_wr_done_hdr(&a, &h), 0);
	NST_EQ_U(h.stream_off, 4098);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_TRUE(!nss_dir_xfer(&a.out) && !nss_dir_xfer(&b.in));
	NST_EQ_U(a.out.off, 4198);
	NST_EQ_U(b.in.off, 4198);
}

/* Credits: A spends B's receives down to the rule's margins; B's reposts
 * and an update let it go on; an update is due when it should be. */
static void test_credits(void)
{
	struct nss_conn a, b;
	struct nss_hdr h;
	const char *why;
	int sent = 0;

	connect(&a, false, &b, true, 8);
	/* B posted 8: HELLO took one, so A has 7; data needs 3 left. */
	while (nss_conn_data_hdr(&a, 1, &h) == 0) {
		NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
		sent++;
	}
	NST_EQ(sent, 5);
	NST_EQ(nss_conn_shutdown_hdr(&a, &h), 0); /* a finishing message: 2 left */
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ(nss_conn_data_hdr(&a, 0, &h), 0); /* the last: an update only */
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_EQ(nss_conn_data_hdr(&a, 0, &h), -EAGAIN);
	/* B took them all and posts again: an update is due at once (A has none). */
	NST_TRUE(!nss_conn_update_due(&b));
	nss_conn_repost(&b);
	NST_TRUE(nss_conn_update_due(&b));
	NST_REQUIRE_EQ(nss_conn_data_hdr(&b, 0, &h), 0);
	NST_REQUIRE_EQ(pass(&b, &h, &a, &why), 0);
	NST_TRUE(!nss_conn_update_due(&b));
	NST_EQ(nss_conn_data_hdr(&a, 0, &h), 0);
}

/* A credit update from the source while the sink's RD_DONE is on its way
 * says where the source stands, behind the sink: taken.  One ahead of the
 * sink, or behind the last data, is refused. */
static void test_update_during_transfer(void)
{
	struct nss_conn a, b, saved;
	struct nss_hdr h, up;
	const char *why;

	connect(&a, true, &b, true, 16);
	NST_REQUIRE_EQ(nss_conn_data_hdr(&a, 10, &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	NST_REQUIRE_EQ(nss_conn_src_avail_hdr(&a, 100, 5000, sizeof(desc), &h), 0);
	NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
	/* B read it all and sent RD_DONE; A has not seen it and sends an update. */
	NST_REQUIRE_EQ(nss_conn_rd_done_hdr(&b, 5000, &h), 0);
	NST_REQUIRE_EQ(nss_conn_data_hdr(&a, 0, &up), 0);
	NST_EQ_U(up.stream_off, 110);
	NST_EQ_U(b.in.off, 5110);
	saved = b;
	NST_EQ(pass(&a, &up, &b, &why), 0);
	/* The same update claiming more than B has, or less than the last data. */
	up.stream_off = 5111;
	NST_EQ(pass(&a, &up, &saved, &why), -EPROTO);
	NST_TRUE(why && strstr(why, "credit update") != NULL);
	up.stream_off = 109;
	NST_EQ(pass(&a, &up, &saved, &why), -EPROTO);
	/* A takes the RD_DONE and goes on. */
	NST_REQUIRE_EQ(pass(&b, &h, &a, &why), 0);
	NST_REQUIRE_EQ(nss_conn_data_hdr(&a, 1, &h), 0);
	NST_EQ_U(h.stream_off, 5110);
	NST_EQ(pass(&a, &h, &b, &why), 0);
}

/* Each out-of-place message is refused with its sentence; the state stays. */
static void test_refusals(void)
{
	static const struct {
		const char *want;
		int kind;
	} cases[] = {
	    {"out of sequence", 0},
	    {"beyond the credit", 1},
	    {"moves backwards", 2},
	    {"not where the stream stands", 3},
	    {"second large transfer", 4},
	    {"without a descriptor", 5},
	    {"SINK_AVAIL with no large transfer", 6},
	    {"RD_DONE on the write path", 7},
	    {"WR_DONE on the read path", 8},
	    {"HELLO after", 9},
	    {"data after SHUTDOWN", 10},
	    {"not HELLO", 11},
	    {"beyond the credit the rule", 12},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct nss_conn a, b, before;
		struct nss_hdr h;
		const char *why = NULL;

		connect(&a, false, &b, true, 8);
		NST_REQUIRE_EQ(nss_conn_data_hdr(&a, 4, &h), 0);
		switch (cases[i].kind) {
		case 0: h.seq++; break;
		case 1: h.seq = b.limit + 1, b.in_seq = h.seq; break;
		case 2: h.credit_limit = b.peer_limit - 1; break;
		case 3: h.stream_off = 9; break;
		case 4:
			NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
			NST_REQUIRE_EQ(nss_conn_src_avail_hdr(&a, 1, 100, sizeof(desc), &h), 0);
			NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
			h.seq++, h.stream_off += 1;
			break;
		case 5:
			h = (struct nss_hdr){.type = NSS_SRC_AVAIL,
					     .seq = h.seq,
					     .credit_limit = h.credit_limit,
					     .data_len = 1,
					     .rdma_len = 10};
			break;
		case 6:
			h = (struct nss_hdr){.type = NSS_SINK_AVAIL,
					     .seq = h.seq,
					     .credit_limit = h.credit_limit,
					     .desc_len = 32,
					     .rdma_len = 10};
			break;
		case 7:
			h = (struct nss_hdr){.type = NSS_RD_DONE,
					     .seq = h.seq,
					     .credit_limit = h.credit_limit,
					     .rdma_len = 10};
			break;
		case 8:
			h = (struct nss_hdr){.type = NSS_WR_DONE,
					     .seq = h.seq,
					     .credit_limit = h.credit_limit,
					     .rdma_len = 10};
			break;
		case 9: h = (struct nss_hdr){.type = NSS_HELLO, .data_len = NSS_HELLO_LEN}; break;
		case 10:
			NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
			NST_REQUIRE_EQ(nss_conn_shutdown_hdr(&a, &h), 0);
			NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
			h.type = NSS_DATA, h.seq++, h.data_len = 3;
			break;
		case 11: nss_conn_init(&b, &b.local); break;
		case 12:
			/* A spends what the rule lets data have; data on the
			 * credits it keeps back for an update is refused. */
			NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
			while (nss_conn_data_hdr(&a, 4, &h) == 0)
				NST_REQUIRE_EQ(pass(&a, &h, &b, &why), 0);
			NST_REQUIRE_EQ(nss_conn_data_hdr(&a, 0, &h), 0);
			h.data_len = 4;
			break;
		}
		before = b;
		NST_EQ(pass(&a, &h, &b, &why), -EPROTO);
		NST_CHECK_(why && strstr(why, cases[i].want), CU_FALSE,
			   "case %zu: said %s, want %s", i, why ? why : "(nothing)", cases[i].want);
		NST_TRUE(same_state(&before, &b));
	}
}

/* The peer's ABORT is reported as such, with its reason. */
static void test_abort(void)
{
	struct nss_conn a, b;
	struct nss_hdr h = {.type = NSS_ABORT, .arg = NSS_ABORT_NO_MEMORY};
	struct nss_msg m;
	const char *why;
	uint32_t reason = 0;
	long n;

	connect(&a, false, &b, true, 8);
	n = nss_encode(&h, NULL, NULL, wire, sizeof(wire));
	NST_REQUIRE(n > 0);
	NST_REQUIRE_EQ(nss_decode(wire, (size_t)n, &m, &why), 0);
	NST_EQ(nss_conn_rx(&b, &m, &why, &reason), -ECONNRESET);
	NST_EQ_U(reason, NSS_ABORT_NO_MEMORY);
	NST_TRUE(b.aborted);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"read_path", test_read_path},
	    {"write_path", test_write_path},
	    {"pipelined_read_path", test_pipelined_read_path},
	    {"pipelined_write_path", test_pipelined_write_path},
	    {"update_behind_finished_transfer", test_update_behind_finished_transfer},
	    {"version_1_peer", test_version_1_peer},
	    {"credits", test_credits},
	    {"refusals", test_refusals},
	    {"update_during_transfer", test_update_during_transfer},
	    {"abort", test_abort},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "nss_conn", tests, NULL, NULL);
}
