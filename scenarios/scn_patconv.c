/*
 * The runner's use of the shared pattern generator (scn_pattern.h), in a
 * file of its own: scn_pattern.h and the script's data model (scn_ast.h)
 * each define a pattern type, so no file includes both.
 */
#include <errno.h>

#include "scn_pattern.h"

int scn_run_pattern_fill(const char *name, uint64_t arg, uint64_t first, void *buf, size_t len);

int scn_run_pattern_fill(const char *name, uint64_t arg, uint64_t first, void *buf, size_t len)
{
	struct scn_pattern p;

	if (scn_pattern_from_name(name, arg, &p))
		return -EINVAL;
	scn_pattern_fill(&p, first, buf, len);
	return 0;
}
