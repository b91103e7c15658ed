/*
 * What every libFuzzer target here shares: libFuzzer's entry point, and
 * CHECK, which stops the run on a broken promise of the code under test
 * (the fuzzer keeps the input that did it, as for a crash).
 */
#ifndef NICSIM_FUZZ_H
#define NICSIM_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                          \
	do {                              \
		if (!(c))                 \
			__builtin_trap(); \
	} while (0)

/*
 * fuzz_nss_conn's records: byte 0 is the side (bit 0) and the action (the
 * rest, modulo FZ_CONN_NACTS), bytes 1..3 its argument.
 */
enum fz_conn_act {
	FZ_CONN_DATA,       /* inline data, 1 + arg % 1024 bytes */
	FZ_CONN_CREDIT,     /* a credit update */
	FZ_CONN_SRC_AVAIL,  /* head 1 + arg[0] % 64, RDMA part 1 + (arg[1] | arg[2] << 8) */
	FZ_CONN_SINK_AVAIL, /* 1 + arg % what the transfers have left */
	FZ_CONN_RD_DONE,    /* 1 + arg % what the oldest transfer has left */
	FZ_CONN_WR_DONE,
	FZ_CONN_SHUTDOWN, /* only when arg[0] % 8 == 0 */
	FZ_CONN_REPOST,   /* post a receive again */
	FZ_CONN_TAKE,     /* take the next message that arrived */
	FZ_CONN_FORGE,    /* forge it first: field arg[0] % 7 gets arg[1]; then take it */
	FZ_CONN_NACTS
};

#endif /* NICSIM_FUZZ_H */
