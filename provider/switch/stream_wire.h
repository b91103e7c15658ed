/*
 * stream_wire.h: what passes between nicsim-stream's client and server.
 *
 * The client drives; the server answers.  Between them, on the same
 * stream as the data, go 80-byte control records (little-endian, below):
 *
 *   client                          server
 *   TEST {mode, flags, size, seed}  -> READY {status}
 *   BATCH {count} + count messages     (ping-pong: each one sent back)
 *   SYNC                            -> SYNCED: the warm-up is over
 *   BATCH {count} + ...                (as many batches as the client wants)
 *   END                             -> RESULT {messages and bytes since
 *                                      SYNC, checksum of the whole test,
 *                                      the first difference found}
 *   ... the next TEST, or BYE: the server closes the connection.
 *
 * Counting messages in batches lets the client run for a duration without
 * the server knowing how many messages will come, and costs one record
 * per batch, not per message.  The timed part runs from SYNCED to RESULT
 * (ping-pong: to the last answer), so it ends when the server has every
 * byte, not when the client has handed them over.  The messages' bytes
 * with --verify are stream_data.h's.
 */
#ifndef NICSIM_STREAM_WIRE_H
#define NICSIM_STREAM_WIRE_H

#include "stream.h"

#define CTL_MAGIC 0x4d54534eu /* "NSTM" read little-endian */
#define CTL_SIZE 80

enum ctl_kind {
	K_TEST = 1,
	K_BATCH = 2,
	K_SYNC = 3,
	K_END = 4,
	K_BYE = 5,
	K_READY = 17,
	K_SYNCED = 18,
	K_RESULT = 19,
};

enum ctl_status { CS_OK = 0, CS_MISMATCH = 1, CS_NOMEM = 2, CS_BAD = 3 };
enum { MODE_STREAM = 1, MODE_PINGPONG = 2 };
#define F_VERIFY 1u

/*
 * A record as the code uses it.  On the stream: magic (u32 at 0), kind,
 * mode, flags, status (u8 at 4..7), then u64s at 8 (size), 16 (count), 24
 * (seed), 32 (bytes), 40 (sum), 48 (bad_msg), 56 (bad_off), then bad_got
 * and bad_want (u8 at 64, 65), zeros to 80.
 */
struct ctl {
	uint8_t kind, mode, flags, status;
	uint64_t size, count, seed, bytes, sum, bad_msg, bad_off;
	uint8_t bad_got, bad_want;
};

/* wire_recv_all: end-of-file came before the bytes. */
#define PEER_CLOSED 1

/* All len bytes: 0, or a negative errno. */
int wire_send_all(const struct stream_backend *be, int s, const void *buf, size_t len);
/* All len bytes: 0, PEER_CLOSED, or a negative errno. */
int wire_recv_all(const struct stream_backend *be, int s, void *buf, size_t len);
int wire_send_ctl(const struct stream_backend *be, int s, const struct ctl *c);
/* 0, PEER_CLOSED, -EPROTO (not a record), or a negative errno. */
int wire_recv_ctl(const struct stream_backend *be, int s, struct ctl *c);

/* strerror of a negative errno of call, with the backend's advice. */
const char *wire_why(const struct stream_backend *be, const char *call, int rc, char *buf,
		     size_t len);

/* Make *buf (page-aligned, *cur bytes) at least len bytes long, keeping it
 * if it is: 0 or -ENOMEM.  wire_buf_free accepts an empty one. */
int wire_buf_reserve(uint8_t **buf, size_t *cur, size_t len);
void wire_buf_free(uint8_t **buf, size_t *cur);

/* "stream" or "ping-pong". */
const char *wire_mode_name(bool pingpong);

#endif /* NICSIM_STREAM_WIRE_H */
