/* Parsing of numeric command-line values shared by nicsimd and nicsim. */
#ifndef NICSIM_OPTS_H
#define NICSIM_OPTS_H

#include <stdint.h>

/* A decimal (or 0x hex) unsigned integer, whole string: 0 or -EINVAL/-ERANGE. */
int opts_parse_u64(const char *text, uint64_t *out);

/* A size with an optional binary suffix K, M, G or T (e.g. "64K" = 65536). */
int opts_parse_size(const char *text, uint64_t *out);

#endif /* NICSIM_OPTS_H */
