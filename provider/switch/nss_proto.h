/*
 * The session protocol's messages (docs/session-protocol.md, versions 1 and 2):
 * the header and its wire layout, the HELLO body, and the checks a
 * receiver makes of one message on its own.  The checks that need the
 * connection's state (the next seq, the credit limit, where the stream
 * stands, which types the state allows) are the switch's; this codec only
 * guarantees that a decoded message is well formed: every length inside
 * the message, every field in range for its type.
 *
 * On the wire every field is little-endian at the offsets of struct
 * nss_wire_hdr, whatever the machine; the codec reads and writes them byte
 * by byte and never casts a received buffer.
 */
#ifndef NSS_PROTO_H
#define NSS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSS_VERSION 2u /* version 2 adds HELLO's xfers (byte 26, reserved in version 1) */
#define NSS_HDR_LEN 32u
#define NSS_DESC_MAX 256u           /* bytes of RDMA descriptor a message may carry */
#define NSS_HELLO_LEN 64u           /* the HELLO body of version 1 */
#define NSS_HELLO_MAX 256u          /* a negotiation message's data, at most */
#define NSS_HELLO_MAGIC 0x5053534eu /* "NSSP" in memory order */
#define NSS_MIN_RECVS 4u            /* receives a side posts for its peer, at least */
#define NSS_MAX_RECVS (1u << 30)    /* ... at most: seq compares in serial arithmetic */
#define NSS_MIN_RECV_SIZE 512u
#define NSS_MIN_RDMA 4096u      /* a side's max_rdma, at least */
#define NSS_MIN_THRESHOLD 2048u /* a direction's RDMA threshold, at least (section 5) */
#define NSS_F_CAN_READ 0x1u     /* HELLO features: this side reads as a sink */
#define NSS_F_READABLE 0x2u     /* ... and its NIC serves the peer's RDMA READs */
#define NSS_XFERS_MAX 8u        /* large transfers a direction may have outstanding, at most */

enum nss_type {
	NSS_HELLO = 1,
	NSS_DATA = 2,       /* data_len 0: a credit update */
	NSS_SRC_AVAIL = 3,  /* a large send begins; a descriptor on the read path */
	NSS_SINK_AVAIL = 4, /* write path: rdma_len writable bytes, its descriptor */
	NSS_RD_DONE = 5,
	NSS_WR_DONE = 6,
	NSS_SHUTDOWN = 7, /* stream_off: the length of the stream */
	NSS_ABORT = 8,    /* arg: enum nss_abort */
	NSS_TYPE_MAX_
};

enum nss_abort {
	NSS_ABORT_PROTOCOL = 1,
	NSS_ABORT_BAD_HELLO = 2,
	NSS_ABORT_CREDIT = 3,
	NSS_ABORT_NO_MEMORY = 4,
	NSS_ABORT_CLOSED = 5,
	NSS_ABORT_MAX_
};

/* The header on the wire: every field little-endian. */
struct nss_wire_hdr {
	uint8_t type;
	uint8_t flags;
	uint8_t desc_len[2];
	uint8_t seq[4];
	uint8_t credit_limit[4];
	uint8_t data_len[4];
	uint8_t rdma_len[4];
	uint8_t arg[4];
	uint8_t stream_off[8];
};

_Static_assert(sizeof(struct nss_wire_hdr) == NSS_HDR_LEN, "the header is 32 bytes");
_Static_assert(offsetof(struct nss_wire_hdr, desc_len) == 2, "desc_len at 2");
_Static_assert(offsetof(struct nss_wire_hdr, seq) == 4, "seq at 4");
_Static_assert(offsetof(struct nss_wire_hdr, credit_limit) == 8, "credit_limit at 8");
_Static_assert(offsetof(struct nss_wire_hdr, data_len) == 12, "data_len at 12");
_Static_assert(offsetof(struct nss_wire_hdr, rdma_len) == 16, "rdma_len at 16");
_Static_assert(offsetof(struct nss_wire_hdr, arg) == 20, "arg at 20");
_Static_assert(offsetof(struct nss_wire_hdr, stream_off) == 24, "stream_off at 24");

/* The header's fields, in host order. */
struct nss_hdr {
	uint8_t type;
	uint8_t flags;
	uint16_t desc_len;
	uint32_t seq;
	uint32_t credit_limit;
	uint32_t data_len;
	uint32_t rdma_len;
	uint32_t arg;
	uint64_t stream_off;
};

/* A decoded message: its header, and where its descriptor and data lie in
 * the buffer it was decoded from. */
struct nss_msg {
	struct nss_hdr h;
	const uint8_t *desc; /* desc_len bytes, or NULL */
	const uint8_t *data; /* data_len bytes, or NULL */
};

/* The HELLO body (the data of a HELLO message), in host order. */
struct nss_hello {
	uint16_t version;
	uint16_t features; /* NSS_F_* */
	uint32_t recv_count;
	uint32_t recv_size;
	uint32_t max_rdma;
	uint32_t rdma_threshold;
	uint16_t desc_len;
	uint8_t xfers; /* large transfers this side takes outstanding as a sink; 0: 1 */
};

/* The large transfers a HELLO's side takes outstanding as a sink: its
 * xfers, 0 read as 1, at most NSS_XFERS_MAX (on version 2 or later: the
 * connection's nss_conn says which version runs). */
uint32_t nss_hello_xfers(const struct nss_hello *h);

/* Bytes a message with desc_len bytes of descriptor and data_len of data takes. */
size_t nss_msg_len(uint16_t desc_len, uint32_t data_len);

/*
 * Write the message h describes into buf (cap bytes): the header, desc_len
 * bytes of desc, zero padding to 8, data_len bytes of data.  The bytes
 * written, -EMSGSIZE (does not fit cap), or -EINVAL (h is not a message
 * nss_decode would accept).
 */
long nss_encode(const struct nss_hdr *h, const void *desc, const void *data, void *buf, size_t cap);

/*
 * Read and check one message of len bytes.  0 with *m filled (pointing into
 * buf), or -EPROTO with *why (a static sentence) saying what was wrong.
 */
int nss_decode(const void *buf, size_t len, struct nss_msg *m, const char **why);

/* The HELLO body into out (NSS_HELLO_LEN bytes). */
void nss_hello_encode(const struct nss_hello *h, uint8_t out[NSS_HELLO_LEN]);

/*
 * Read and check a HELLO body of len bytes (a HELLO's data): 0, or -EPROTO
 * with *why.  A later version's body is accepted (its first NSS_HELLO_LEN
 * bytes read): the two sides then run the lower version.
 */
int nss_hello_decode(const uint8_t *data, size_t len, struct nss_hello *h, const char **why);

/* Serial-number order of 32-bit counters (RFC 1982): a after b. */
static inline bool nss_after(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

/*
 * The credit rule (docs/session-protocol.md section 4): whether a message of
 * type, carrying application data or not, may go out as seq under the
 * peer's credit_limit.  Data and the start of a transfer need 3 credits,
 * a done message or SHUTDOWN 2, a credit update (DATA without data) 1;
 * ABORT needs none.
 */
bool nss_may_send(uint8_t type, bool has_data, uint32_t seq, uint32_t credit_limit);

#endif /* NSS_PROTO_H */
