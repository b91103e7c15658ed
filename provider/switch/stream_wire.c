/*
 * stream_wire.c: nicsim-stream's control records and the moving of bytes
 * (stream_wire.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "stream_wire.h"

/* ---- Control records ---------------------------------------------------- */

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void ctl_encode(const struct ctl *c, uint8_t *b)
{
	memset(b, 0, CTL_SIZE);
	put_u32(b, CTL_MAGIC);
	b[4] = c->kind;
	b[5] = c->mode;
	b[6] = c->flags;
	b[7] = c->status;
	put_u64(b + 8, c->size);
	put_u64(b + 16, c->count);
	put_u64(b + 24, c->seed);
	put_u64(b + 32, c->bytes);
	put_u64(b + 40, c->sum);
	put_u64(b + 48, c->bad_msg);
	put_u64(b + 56, c->bad_off);
	b[64] = c->bad_got;
	b[65] = c->bad_want;
}

/* 0, or -EPROTO when b is not a record (its magic is wrong). */
static int ctl_decode(const uint8_t *b, struct ctl *c)
{
	if ((uint32_t)(b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24) != CTL_MAGIC)
		return -EPROTO;
	*c = (struct ctl){
	    .kind = b[4],
	    .mode = b[5],
	    .flags = b[6],
	    .status = b[7],
	    .size = get_u64(b + 8),
	    .count = get_u64(b + 16),
	    .seed = get_u64(b + 24),
	    .bytes = get_u64(b + 32),
	    .sum = get_u64(b + 40),
	    .bad_msg = get_u64(b + 48),
	    .bad_off = get_u64(b + 56),
	    .bad_got = b[64],
	    .bad_want = b[65],
	};
	return 0;
}

/* ---- Moving bytes ------------------------------------------------------- */

/* All len bytes: 0, or a negative errno. */
int wire_send_all(const struct stream_backend *be, int s, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = be->send(s, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* a send that takes nothing and says no error */
		stream_watch_tick();
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* All len bytes: 0, PEER_CLOSED at end-of-file before them, or a
 * negative errno. */
int wire_recv_all(const struct stream_backend *be, int s, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = be->recv(s, p, len, MSG_WAITALL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return PEER_CLOSED;
		stream_watch_tick();
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int wire_send_ctl(const struct stream_backend *be, int s, const struct ctl *c)
{
	uint8_t b[CTL_SIZE];

	ctl_encode(c, b);
	return wire_send_all(be, s, b, sizeof(b));
}

/* 0, PEER_CLOSED, -EPROTO (not a record), or a negative errno. */
int wire_recv_ctl(const struct stream_backend *be, int s, struct ctl *c)
{
	uint8_t b[CTL_SIZE];
	int rc = wire_recv_all(be, s, b, sizeof(b));

	return rc ? rc : ctl_decode(b, c);
}

/* "Connection reset by peer (advice)" for a negative errno of call. */
const char *wire_why(const struct stream_backend *be, const char *call, int rc, char *buf,
		     size_t len)
{
	const char *advice = be->advice ? be->advice(call, -rc) : NULL;

	snprintf(buf, len, "%s%s%s%s", strerror(-rc), advice ? " (" : "", advice ? advice : "",
		 advice ? ")" : "");
	return buf;
}

/* A page-aligned buffer of len bytes (mmap), or NULL. */
static uint8_t *buf_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Make *buf at least len bytes long, keeping it if it is. */
int wire_buf_reserve(uint8_t **buf, size_t *cur, size_t len)
{
	if (*buf && *cur >= len)
		return 0;
	if (*buf)
		munmap(*buf, *cur);
	*cur = 0;
	*buf = buf_map(len);
	if (!*buf)
		return -ENOMEM;
	*cur = len;
	return 0;
}

void wire_buf_free(uint8_t **buf, size_t *cur)
{
	if (*buf)
		munmap(*buf, *cur);
	*buf = NULL;
	*cur = 0;
}

const char *wire_mode_name(bool pingpong)
{
	return pingpong ? "ping-pong" : "stream";
}
