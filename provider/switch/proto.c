/* The session protocol's message codec (nss_proto.h). */
#include "nss_proto.h"

#include <errno.h>
#include <string.h>

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* One field of a wire layout: its offset on the wire, its size (1, 2, 4 or
 * 8 bytes) and where it lives in the host-order struct. */
struct field {
	uint8_t off, size;
	uint16_t at;
};

#define F(wire_off, type, member)                                             \
	{                                                                     \
		wire_off, sizeof(((type *)0)->member), offsetof(type, member) \
	}
/* The header's offsets are those of the asserted wire struct. */
#define H(member) F(offsetof(struct nss_wire_hdr, member), struct nss_hdr, member)
static const struct field hdr_fields[] = {
    H(type),     H(flags),    H(desc_len), H(seq),        H(credit_limit),
    H(data_len), H(rdma_len), H(arg),      H(stream_off),
};
#undef H
static const struct field hello_fields[] = {
    F(4, struct nss_hello, version),    F(6, struct nss_hello, features),
    F(8, struct nss_hello, recv_count), F(12, struct nss_hello, recv_size),
    F(16, struct nss_hello, max_rdma),  F(20, struct nss_hello, rdma_threshold),
    F(24, struct nss_hello, desc_len),  F(26, struct nss_hello, xfers),
};
#undef F
#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

/* The value of field f of struct s, and the reverse. */
static uint64_t load(const void *s, const struct field *f)
{
	const char *at = (const char *)s + f->at;
	uint8_t v1;
	uint16_t v2;
	uint32_t v4;
	uint64_t v8;

	switch (f->size) {
	case 1: memcpy(&v1, at, 1); return v1;
	case 2: memcpy(&v2, at, 2); return v2;
	case 4: memcpy(&v4, at, 4); return v4;
	default: memcpy(&v8, at, 8); return v8;
	}
}

static void store(void *s, const struct field *f, uint64_t v)
{
	char *at = (char *)s + f->at;
	uint8_t v1 = (uint8_t)v;
	uint16_t v2 = (uint16_t)v;
	uint32_t v4 = (uint32_t)v;

	switch (f->size) {
	case 1: memcpy(at, &v1, 1); break;
	case 2: memcpy(at, &v2, 2); break;
	case 4: memcpy(at, &v4, 4); break;
	default: memcpy(at, &v, 8);
	}
}

/* The n fields of s (a host-order struct) onto the wire at p, little-endian. */
static void put_fields(uint8_t *p, const void *s, const struct field *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = load(s, &f[i]);

		for (unsigned k = 0; k < f[i].size; k++)
			p[f[i].off + k] = (uint8_t)(v >> (8 * k));
	}
}

/* The n fields at p (little-endian) into s. */
static void get_fields(const uint8_t *p, void *s, const struct field *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = 0;

		for (unsigned k = 0; k < f[i].size; k++)
			v |= (uint64_t)p[f[i].off + k] << (8 * k);
		store(s, &f[i], v);
	}
}

static size_t pad8(size_t n)
{
	return (n + 7u) & ~(size_t)7u;
}

size_t nss_msg_len(uint16_t desc_len, uint32_t data_len)
{
	return NSS_HDR_LEN + pad8(desc_len) + (size_t)data_len;
}

/* What a header must be for its type, whatever the connection's state:
 * NULL if it is well formed, else why not. */
static const char *check(const struct nss_hdr *h)
{
	bool desc_ok = h->type == NSS_SRC_AVAIL || h->type == NSS_SINK_AVAIL;
	bool rdma = h->type == NSS_SRC_AVAIL || h->type == NSS_SINK_AVAIL ||
		    h->type == NSS_RD_DONE || h->type == NSS_WR_DONE;

	if (h->type < NSS_HELLO || h->type >= NSS_TYPE_MAX_)
		return "unknown message type";
	if (h->flags)
		return "flags other than 0 (versions 1 and 2 have none)";
	if (h->desc_len > NSS_DESC_MAX)
		return "descriptor longer than 256 bytes";
	if (h->desc_len && !desc_ok)
		return "a descriptor on a type that carries none";
	if (h->type == NSS_SINK_AVAIL && !h->desc_len)
		return "SINK_AVAIL without a descriptor";
	if (rdma != (h->rdma_len != 0))
		return rdma ? "a transfer of 0 bytes" : "rdma_len on a type that moves nothing";
	if (h->type == NSS_ABORT ? h->arg == 0 || h->arg >= NSS_ABORT_MAX_ : h->arg != 0)
		return h->type == NSS_ABORT ? "ABORT without a known reason" : "arg other than 0";
	switch (h->type) {
	case NSS_HELLO:
		if (h->seq != 0)
			return "HELLO that is not the first message";
		if (h->data_len < NSS_HELLO_LEN || h->data_len > NSS_HELLO_MAX)
			return "HELLO body not 64 to 256 bytes";
		if (h->stream_off)
			return "HELLO with a stream offset";
		break;
	case NSS_DATA: break;
	case NSS_SRC_AVAIL:
		if (h->data_len == 0)
			return "SRC_AVAIL without its first byte inline";
		break;
	default:
		if (h->data_len)
			return "data on a type that carries none";
	}
	/* The stream cannot run past 2^64: the last byte concerned must exist. */
	if (h->stream_off > UINT64_MAX - h->data_len - h->rdma_len)
		return "stream offset and lengths past 2^64";
	return NULL;
}

long nss_encode(const struct nss_hdr *h, const void *desc, const void *data, void *buf, size_t cap)
{
	size_t len = nss_msg_len(h->desc_len, h->data_len);
	uint8_t *p = buf;

	if (check(h) || (h->desc_len && !desc) || (h->data_len && !data))
		return -EINVAL;
	if (len > cap)
		return -EMSGSIZE;
	memset(p, 0, NSS_HDR_LEN + pad8(h->desc_len));
	put_fields(p, h, hdr_fields, NFIELDS(hdr_fields));
	if (h->desc_len)
		memcpy(p + NSS_HDR_LEN, desc, h->desc_len);
	if (h->data_len)
		memcpy(p + NSS_HDR_LEN + pad8(h->desc_len), data, h->data_len);
	return (long)len;
}

int nss_decode(const void *buf, size_t len, struct nss_msg *m, const char **why)
{
	const uint8_t *p = buf;
	struct nss_hdr *h = &m->h;
	size_t at;

	memset(m, 0, sizeof(*m));
	*why = NULL;
	if (len < NSS_HDR_LEN) {
		*why = "shorter than the header";
		return -EPROTO;
	}
	get_fields(p, h, hdr_fields, NFIELDS(hdr_fields));
	*why = check(h);
	if (*why)
		return -EPROTO;
	/* The lengths are checked against what arrived, the fields being at
	 * most 256 and 2^32 - 1: no sum below can wrap a size_t of 64 bits,
	 * and on 32 bits data_len is compared alone first. */
	at = NSS_HDR_LEN + pad8(h->desc_len);
	if (at > len || h->data_len != len - at) {
		*why = at > len || h->data_len > len - at ? "lengths that run past the message"
							  : "bytes after the message's data";
		return -EPROTO;
	}
	for (size_t i = NSS_HDR_LEN + h->desc_len; i < at; i++) {
		if (p[i]) {
			*why = "padding after the descriptor not zero";
			return -EPROTO;
		}
	}
	m->desc = h->desc_len ? p + NSS_HDR_LEN : NULL;
	m->data = h->data_len ? p + at : NULL;
	return 0;
}

void nss_hello_encode(const struct nss_hello *h, uint8_t out[NSS_HELLO_LEN])
{
	memset(out, 0, NSS_HELLO_LEN);
	put32(out, NSS_HELLO_MAGIC);
	put_fields(out, h, hello_fields, NFIELDS(hello_fields));
}

int nss_hello_decode(const uint8_t *data, size_t len, struct nss_hello *h, const char **why)
{
	memset(h, 0, sizeof(*h));
	*why = NULL;
	if (len < NSS_HELLO_LEN || len > NSS_HELLO_MAX)
		*why = "HELLO body not 64 to 256 bytes";
	else if (get32(data) != NSS_HELLO_MAGIC)
		*why = "HELLO magic is not NSSP";
	if (*why)
		return -EPROTO;
	get_fields(data, h, hello_fields, NFIELDS(hello_fields));
	if (h->version == 0)
		*why = "HELLO of version 0";
	else if (h->version <= NSS_VERSION && (h->features & ~(NSS_F_CAN_READ | NSS_F_READABLE)))
		*why = "HELLO feature bits versions 1 and 2 do not have";
	else if (h->recv_count < NSS_MIN_RECVS)
		*why = "fewer than 4 receives posted";
	else if (h->recv_count > NSS_MAX_RECVS)
		*why = "more than 2^30 receives posted";
	else if (h->recv_size < NSS_MIN_RECV_SIZE)
		*why = "receives smaller than 512 bytes";
	else if (h->desc_len > NSS_DESC_MAX)
		*why = "descriptors longer than 256 bytes";
	else if (h->max_rdma < NSS_MIN_RDMA)
		*why = "a largest RDMA under 4 KiB";
	/* Reserved: from byte 26 in version 1, from 27 in version 2 (xfers);
	 * a later version's are its own. */
	for (size_t i = h->version == 1 ? 26 : 27;
	     !*why && h->version <= NSS_VERSION && i < NSS_HELLO_LEN; i++)
		if (data[i])
			*why = "HELLO reserved bytes not zero";
	return *why ? -EPROTO : 0;
}

uint32_t nss_hello_xfers(const struct nss_hello *h)
{
	return h->xfers == 0 ? 1 : h->xfers > NSS_XFERS_MAX ? NSS_XFERS_MAX : h->xfers;
}

bool nss_may_send(uint8_t type, bool has_data, uint32_t seq, uint32_t credit_limit)
{
	uint32_t need;

	switch (type) {
	case NSS_ABORT: return true;
	case NSS_DATA: need = has_data ? 3 : 1; break;
	case NSS_SRC_AVAIL:
	case NSS_SINK_AVAIL: need = 3; break;
	case NSS_RD_DONE:
	case NSS_WR_DONE:
	case NSS_SHUTDOWN: need = 2; break;
	case NSS_HELLO: return seq == 0;
	default: return false;
	}
	/* avail = credit_limit - seq + 1 credits are left before this one. */
	return !nss_after(seq, credit_limit) && credit_limit - seq + 1 >= need;
}
