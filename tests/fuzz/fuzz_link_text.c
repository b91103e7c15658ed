/*
 * libFuzzer target of the link-rule text (fabric/fab_link_text.c): the
 * words `nicsim link set SRC DST ...` takes, as fab_link_parse reads them.
 *
 * Input: text, split into words at bytes up to ' ' (spaces, tabs, newlines,
 * NUL and other control bytes), at most 64 words.
 *
 * What it asserts (__builtin_trap): parsing gives 0 or -EINVAL with a
 * message; settings it accepts are described (fab_link_describe) in words
 * that parse again to the same settings (the seed aside, which the
 * description leaves out), so what `nicsim show links` prints can be given
 * back to `nicsim link set`.  Seeds: tests/fuzz/corpus/link_text/.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fab.h"
#include "fab_seg.h"
#include "fuzz.h"

#define MAX_WORDS 64u

/* Split text (NUL-terminated, changed in place) into words. */
static size_t split(char *text, const char **words)
{
	size_t n = 0;
	char *p = text;

	while (*p && n < MAX_WORDS) {
		while (*p && (unsigned char)*p <= ' ')
			p++;
		if (!*p)
			break;
		words[n++] = p;
		while ((unsigned char)*p > ' ')
			p++;
		if (*p)
			*p++ = '\0';
	}
	return n;
}

/* The settings a link behaves by: everything but the seed and its flag. */
static bool same_rules(const struct fab_link_config *a, const struct fab_link_config *b)
{
	return a->latency_ns == b->latency_ns && a->jitter_ns == b->jitter_ns &&
	       a->delay_ns == b->delay_ns && a->reorder_gap_ns == b->reorder_gap_ns &&
	       a->rate_mbps == b->rate_mbps && a->loss_ppb == b->loss_ppb &&
	       a->dup_ppb == b->dup_ppb && a->reorder_ppb == b->reorder_ppb &&
	       a->corrupt_ppb == b->corrupt_ppb &&
	       /* The share of delayed frames means nothing without a delay. */
	       (!a->delay_ns || a->delay_ppb == b->delay_ppb) && a->nth == b->nth &&
	       a->nth_opcode == b->nth_opcode && a->nth_qpn == b->nth_qpn &&
	       (a->flags & FAB_LINK_DOWN) == (b->flags & FAB_LINK_DOWN);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char text[4097], desc[1024];
	const char *words[MAX_WORDS], *words2[MAX_WORDS];
	struct fab_link_config cfg, cfg2, def;
	char err[256], err2[256];
	uint32_t fields, fields2;
	size_t n, n2;
	int rc;

	if (size >= sizeof(text))
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	n = split(text, words);

	rc = fab_link_parse(words, n, &cfg, &fields, err, sizeof(err));
	CHECK(rc == 0 || (rc == -EINVAL && err[0] && strlen(err) < sizeof(err)));
	if (rc)
		return 0;

	fab_link_describe(&cfg, desc, sizeof(desc));
	CHECK(strlen(desc) < sizeof(desc) - 1); /* never cut short */
	n2 = split(desc, words2);
	if (n2 == 0) {
		/* Nothing differs from the default. */
		fab_link_config_default(&def);
		CHECK(same_rules(&cfg, &def));
		return 0;
	}
	CHECK(fab_link_parse(words2, n2, &cfg2, &fields2, err2, sizeof(err2)) == 0);
	CHECK(same_rules(&cfg, &cfg2));
	return 0;
}
