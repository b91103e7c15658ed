/*
 * stream_data.h: the data nicsim-stream sends with --verify, and its checks.
 *
 * Every byte of a message is a function of the run's seed, the direction
 * it travels in and the message's number in its test, so the receiver
 * knows what each byte must be without being told: a byte lost, repeated,
 * reordered or taken from another message (a stale buffer, a transfer
 * delivered twice) shows as a difference at a known message and offset.
 * The generator is xorshift64* seeded per message by splitmix64: cheap
 * enough to run at memory speed, and no two messages alike.
 *
 * A checksum of the bytes as they arrived is kept per direction and test
 * and sent back at the end, so that the sender compares what it sent with
 * what the receiver saw; it is order-sensitive (a Fletcher sum over 64-bit
 * words, folded per message).
 */
#ifndef NICSIM_STREAM_DATA_H
#define NICSIM_STREAM_DATA_H

#include <stddef.h>
#include <stdint.h>

/* The two directions of a connection. */
enum sdata_dir { SDATA_TO_SERVER = 0, SDATA_TO_CLIENT = 1 };

/* Fill len bytes with message seq's data; returns their checksum. */
uint64_t sdata_fill(void *buf, size_t len, uint64_t seed, enum sdata_dir dir, uint64_t seq);

/* Where a received message first differs from what it must hold. */
struct sdata_diff {
	size_t off;   /* offset of the first byte that differs */
	uint8_t got;  /* the byte received there */
	uint8_t want; /* the byte that should be there */
};

/*
 * Check that len bytes hold message seq's data.  Returns 0 if they do, or 1
 * and the first difference in *diff.  Either way *sum is the checksum of
 * the bytes as they are.
 */
int sdata_check(const void *buf, size_t len, uint64_t seed, enum sdata_dir dir, uint64_t seq,
		uint64_t *sum, struct sdata_diff *diff);

/* The checksum of len bytes as they are (sdata_fill's and sdata_check's). */
uint64_t sdata_sum(const void *buf, size_t len);

/* A direction's running checksum after one more message whose checksum is
 * msg_sum (start from 0). */
uint64_t sdata_fold(uint64_t running, uint64_t msg_sum);

#endif /* NICSIM_STREAM_DATA_H */
