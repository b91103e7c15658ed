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

#endif /* NICSIM_FUZZ_H */
