/*
 * libFuzzer target of the scenario parser and checker (scenarios/): any
 * bytes, parsed from memory as a script, must give a script or messages,
 * never a crash, a hang, a leak or an out-of-bounds access.  Includes are
 * refused (SCN_PARSE_NO_INCLUDE): the fuzzer never reads files.  A fixed
 * set of -D values lets ${NAME} expansion run too.
 *
 * Built only with a compiler that has libFuzzer (clang); ctest runs it
 * briefly over the repository's scenarios and the seeds beside this file
 * (label fuzz).  A longer run by hand:
 *   build/ci-clang/bin/fuzz_scn_parse -max_total_time=600 DIR tests/fuzz/corpus/scn_parse
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "scn_ast.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct scn_define d[] = {{"SIZE", "4KiB"}, {"SEED", "1"}, {"X", "${X}"}};
	static const struct scn_defines defs = {d, 3};
	static struct scn_diag diag;
	struct scn_script *s = NULL;

	scn_diag_init(&diag);
	if (scn_parse_buffer("fuzz.scn", data, size, &defs, SCN_PARSE_NO_INCLUDE, &s, &diag) == 0) {
		scn_check(s, &diag);
		scn_script_free(s);
	}
	return 0;
}
