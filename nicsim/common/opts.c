#include "opts.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

int opts_parse_u64(const char *text, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!text || !isdigit((unsigned char)text[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 0);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

int opts_parse_size(const char *text, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!text || !isdigit((unsigned char)text[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	switch (toupper((unsigned char)*end)) {
	case '\0': break;
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	default: return -EINVAL;
	}
	if (*end && end[1] &&
	    !(toupper((unsigned char)end[1]) == 'I' && end[2] == 'B' && !end[3]) &&
	    !(toupper((unsigned char)end[1]) == 'B' && !end[2]))
		return -EINVAL;
	if (shift && v > (~0ull >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}
