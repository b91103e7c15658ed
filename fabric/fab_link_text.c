/*
 * Link settings as text: the words `nicsim link set` takes after SRC DST
 * (and that scenario scripts will take), parsed into a struct
 * fab_link_config plus the FAB_LF_* bits they change, and the reverse.
 *
 *   latency US  jitter US  rate GBIT  loss PCT  dup PCT  reorder PCT
 *   reorder-gap US  corrupt PCT  delay US  delay-pct PCT
 *   drop-nth N|off [opcode NAME|NUM] [qpn N]  down  up  seed N  clear
 *
 * Numbers may have decimals down to the unit the configuration keeps
 * (nanoseconds, Mbit/s, parts per billion).  Settings that would do nothing
 * are refused rather than taken silently: drop-nth 0 (write "drop-nth off"
 * to remove the rule), delay-pct without a non-zero delay in the same
 * words, reorder-gap 0 (the gap is at least 1 ns; leave it out for the
 * default).  Opcodes are printed by the names fab_wire.h gives them
 * ("RC_SEND_ONLY"), which are also what errors suggest.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fab_priv.h"
#include "fab_wire.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* An opcode's name or number (fab.h); "send-only" is RC_SEND_ONLY. */
int fab_link_opcode_parse(const char *text, uint32_t *code)
{
	char name[48];
	unsigned long long v;
	uint8_t op;
	size_t i;
	char *end;

	if (strlen(text) + 4 > sizeof(name))
		return -EINVAL;
	for (i = 0; text[i]; i++)
		name[i] = text[i] == '-' ? '_' : text[i];
	name[i] = '\0';
	if (!strcasecmp(name, "ACK"))
		snprintf(name, sizeof(name), "RC_ACKNOWLEDGE");
	if (fab_opcode_parse(name, &op) == 0) {
		*code = op;
		return 0;
	}
	if (text[0] < '0' || text[0] > '9') {
		memmove(name + 3, name, strlen(name) + 1);
		memcpy(name, "RC_", 3);
		if (fab_opcode_parse(name, &op))
			return -EINVAL;
		*code = op;
		return 0;
	}
	errno = 0;
	v = strtoull(text, &end, 0);
	if (errno || *end || v > 0xff)
		return -EINVAL;
	*code = (uint32_t)v;
	return 0;
}

static const char *opcode_name(uint32_t code)
{
	return fab_opcode_info((uint8_t)code) ? fab_opcode_name((uint8_t)code) : NULL;
}

/* "12" or "12.5" as an integer in units of 10^-decimals, at most max:
 * -EDOM when it has more decimals than that, -ERANGE when over max. */
static int parse_fixed(const char *s, unsigned decimals, uint64_t max, uint64_t *out)
{
	bool dot = false, digits = false, finer = false;
	unsigned frac = 0;
	uint64_t v = 0;

	for (; *s; s++) {
		if (*s == '.' && !dot) {
			dot = true;
			continue;
		}
		if (*s < '0' || *s > '9')
			return -EINVAL;
		digits = true;
		if (dot && frac == decimals) {
			/* Beyond the unit kept: zeros are harmless. */
			finer |= *s != '0';
			continue;
		}
		frac += dot;
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (!digits)
		return -EINVAL;
	if (finer)
		return -EDOM;
	for (; frac < decimals; frac++) {
		if (v > UINT64_MAX / 10)
			return -ERANGE;
		v *= 10;
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/* A whole number, decimal or 0x hex, at most max. */
static int parse_whole(const char *s, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int fail(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t size, const char *fmt, ...)
{
	va_list ap;

	if (size) {
		va_start(ap, fmt);
		vsnprintf(err, size, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

enum unit { U_US, U_GBIT, U_PCT };

static const struct setting {
	const char *word;
	uint32_t field;
	enum unit unit;
	size_t off; /* of the uint64_t or uint32_t it sets */
	bool wide;  /* uint64_t */
} settings[] = {
    {"latency", FAB_LF_LATENCY, U_US, offsetof(struct fab_link_config, latency_ns), true},
    {"jitter", FAB_LF_JITTER, U_US, offsetof(struct fab_link_config, jitter_ns), true},
    {"rate", FAB_LF_RATE, U_GBIT, offsetof(struct fab_link_config, rate_mbps), false},
    {"loss", FAB_LF_LOSS, U_PCT, offsetof(struct fab_link_config, loss_ppb), false},
    {"dup", FAB_LF_DUP, U_PCT, offsetof(struct fab_link_config, dup_ppb), false},
    {"reorder", FAB_LF_REORDER, U_PCT, offsetof(struct fab_link_config, reorder_ppb), false},
    {"reorder-gap", FAB_LF_REORDER_GAP, U_US, offsetof(struct fab_link_config, reorder_gap_ns),
     true},
    {"corrupt", FAB_LF_CORRUPT, U_PCT, offsetof(struct fab_link_config, corrupt_ppb), false},
    {"delay", FAB_LF_DELAY, U_US, offsetof(struct fab_link_config, delay_ns), true},
    {"delay-pct", FAB_LF_DELAY_PPB, U_PCT, offsetof(struct fab_link_config, delay_ppb), false},
};

static const char *const unit_text[] = {
    [U_US] = "microseconds, e.g. 10 or 2.5, at most 10000000",
    [U_GBIT] = "Gbit/s, e.g. 10 or 0.1, at most 1000 (0: unlimited)",
    [U_PCT] = "a percentage from 0 to 100, e.g. 5 or 0.01",
};

/* The finest step of each unit, as a value takes it. */
static const char *const unit_step[] = {
    [U_US] = "0.001 (1 ns): write at most 3 decimals",
    [U_GBIT] = "0.001 (1 Mbit/s): write at most 3 decimals",
    [U_PCT] = "0.0000001 (one in a billion): write at most 7 decimals",
};

static int parse_value(const struct setting *s, const char *text, struct fab_link_config *cfg)
{
	uint64_t v;
	int rc;

	switch (s->unit) {
	case U_US: rc = parse_fixed(text, 3, FAB_LINK_MAX_NS, &v); break;
	case U_GBIT: rc = parse_fixed(text, 3, FAB_LINK_MAX_MBPS, &v); break;
	default: rc = parse_fixed(text, 7, FAB_PPB_ONE, &v); break;
	}
	if (rc)
		return rc;
	if (s->wide)
		memcpy((char *)cfg + s->off, &v, sizeof(v));
	else
		memcpy((char *)cfg + s->off, &(uint32_t){(uint32_t)v}, sizeof(uint32_t));
	return 0;
}

int fab_link_parse(const char *const *words, size_t n, struct fab_link_config *cfg,
		   uint32_t *fields, char *err, size_t errsize)
{
	const struct setting *s;
	uint32_t mask = 0, seen = 0, bit;
	uint64_t v;
	size_t i, k;
	int rc;

	fab_link_config_default(cfg);
	if (errsize)
		err[0] = '\0';
	for (i = 0; i < n; i++) {
		const char *w = words[i], *val = i + 1 < n ? words[i + 1] : NULL;

		if (!strcmp(w, "clear")) {
			if (i != 0)
				return fail(err, errsize, "'clear' must come first");
			mask |= FAB_LF_ALL & ~FAB_LF_SEED;
			continue;
		}
		if (!strcmp(w, "down") || !strcmp(w, "up")) {
			if (seen & FAB_LF_DOWN)
				return fail(err, errsize, "'down' or 'up' given twice");
			seen |= FAB_LF_DOWN;
			mask |= FAB_LF_DOWN;
			cfg->flags =
			    (cfg->flags & ~FAB_LINK_DOWN) | (w[0] == 'd' ? FAB_LINK_DOWN : 0);
			continue;
		}
		s = NULL;
		for (k = 0; k < ARRAY_SIZE(settings); k++)
			if (!strcmp(w, settings[k].word))
				s = &settings[k];
		if (!s && strcmp(w, "drop-nth") && strcmp(w, "opcode") && strcmp(w, "qpn") &&
		    strcmp(w, "seed"))
			return fail(
			    err, errsize,
			    "unknown setting '%s' (settings: latency, jitter, rate, loss, dup, "
			    "reorder, reorder-gap, corrupt, delay, delay-pct, drop-nth, "
			    "opcode, qpn, down, up, seed, clear)",
			    w);
		if (!val)
			return fail(err, errsize, "'%s' needs a value", w);
		i++;
		if (s) {
			bit = s->field;
			if (seen & bit)
				return fail(err, errsize, "'%s' given twice", w);
			seen |= bit;
			rc = parse_value(s, val, cfg);
			if (rc == -EDOM)
				return fail(err, errsize,
					    "%s %s: finer than the resolution, which is %s", w, val,
					    unit_step[s->unit]);
			if (rc)
				return fail(err, errsize, "%s %s: expected %s", w, val,
					    unit_text[s->unit]);
			if (bit == FAB_LF_REORDER_GAP && !cfg->reorder_gap_ns)
				return fail(err, errsize,
					    "reorder-gap 0: a reordered frame is held back at "
					    "least 0.001 us; leave reorder-gap out for the "
					    "default (50 us)");
			mask |= bit;
			/* A delay alone applies to every frame. */
			if (bit == FAB_LF_DELAY && !(seen & FAB_LF_DELAY_PPB)) {
				cfg->delay_ppb = FAB_PPB_ONE;
				mask |= FAB_LF_DELAY_PPB;
			}
			continue;
		}
		if (!strcmp(w, "drop-nth")) {
			if (seen & FAB_LF_NTH)
				return fail(err, errsize, "'drop-nth' given twice");
			seen |= FAB_LF_NTH;
			if (!strcmp(val, "off")) {
				/* Removes the rule, and its filters with it. */
				cfg->nth = 0;
				mask |= FAB_LF_NTH;
				continue;
			}
			if (parse_whole(val, UINT32_MAX, &v) || !v)
				return fail(
				    err, errsize,
				    "drop-nth %s: expected a frame count from 1 (drop-nth 1 "
				    "drops every frame that matches), or 'drop-nth off' to "
				    "remove the rule",
				    val);
			cfg->nth = (uint32_t)v;
			mask |= FAB_LF_NTH;
		} else if (!strcmp(w, "opcode") || !strcmp(w, "qpn")) {
			if (!(seen & FAB_LF_NTH) || !cfg->nth)
				return fail(
				    err, errsize,
				    "'%s' filters the drop-nth rule: give 'drop-nth N' first", w);
			if (w[0] == 'o' && fab_link_opcode_parse(val, &cfg->nth_opcode))
				return fail(
				    err, errsize,
				    "opcode %s: expected a BTH opcode name such as "
				    "RC_SEND_ONLY, RC_RDMA_WRITE_FIRST or RC_ACKNOWLEDGE (case "
				    "and the RC_ prefix optional, ACK for RC_ACKNOWLEDGE), or "
				    "a number 0..255",
				    val);
			if (w[0] == 'q') {
				if (parse_whole(val, 0xffffff, &v))
					return fail(
					    err, errsize,
					    "qpn %s: expected a queue pair number 0..16777215",
					    val);
				cfg->nth_qpn = (uint32_t)v;
			}
		} else { /* seed */
			if (seen & FAB_LF_SEED)
				return fail(err, errsize, "'seed' given twice");
			seen |= FAB_LF_SEED;
			if (parse_whole(val, UINT64_MAX, &v))
				return fail(err, errsize, "seed %s: expected a whole number", val);
			cfg->seed = v;
			mask |= FAB_LF_SEED;
		}
	}
	if (!mask)
		return fail(err, errsize, "no setting given");
	/* The share applies to a delay given with it; alone it would change
	 * nothing that this command shows. */
	if ((seen & FAB_LF_DELAY_PPB) && !cfg->delay_ns)
		return fail(err, errsize,
			    "delay-pct is the share of frames that 'delay' holds back: give "
			    "it with a non-zero delay, e.g. 'delay 100 delay-pct 50'");
	*fields = mask;
	return 0;
}

/* v in units of 10^-decimals, without trailing zeros: "12.5". */
static void put_fixed(char *buf, size_t size, uint64_t v, unsigned decimals)
{
	uint64_t scale = 1;
	unsigned i, d = decimals;
	uint64_t frac;

	for (i = 0; i < decimals; i++)
		scale *= 10;
	frac = v % scale;
	while (d && frac % 10 == 0 && frac) {
		frac /= 10;
		d--;
	}
	if (frac)
		snprintf(buf, size, "%" PRIu64 ".%0*" PRIu64, v / scale, (int)d, frac);
	else
		snprintf(buf, size, "%" PRIu64, v / scale);
}

struct out {
	char *buf;
	size_t size, len;
};

static void add(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->len >= o->size)
		return;
	if (o->len)
		o->buf[o->len++] = ' ';
	if (o->len >= o->size) {
		o->buf[o->size - 1] = '\0';
		return;
	}
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
	va_end(ap);
	o->len = n < 0 ? o->size : o->len + (size_t)n;
}

const char *fab_link_describe(const struct fab_link_config *cfg, char *buf, size_t size)
{
	struct out o = {.buf = buf, .size = size};
	char num[32];
	const char *name;
	size_t k;

	if (size)
		buf[0] = '\0';
	if (cfg->flags & FAB_LINK_DOWN)
		add(&o, "down");
	for (k = 0; k < ARRAY_SIZE(settings); k++) {
		const struct setting *s = &settings[k];
		uint64_t v = 0;
		uint32_t v32;

		if (s->wide) {
			memcpy(&v, (const char *)cfg + s->off, sizeof(v));
		} else {
			memcpy(&v32, (const char *)cfg + s->off, sizeof(v32));
			v = v32;
		}
		/* The share of delayed frames matters only with a delay, and
		 * says nothing when it is all of them; but a share of 0 must
		 * show, since a delay alone means every frame. */
		if (s->field == FAB_LF_DELAY_PPB) {
			if (!cfg->delay_ns || v == FAB_PPB_ONE)
				continue;
		} else if (!v) {
			continue;
		}
		put_fixed(num, sizeof(num), v, s->unit == U_PCT ? 7 : 3);
		add(&o, "%s %s", s->word, num);
	}
	if (cfg->nth) {
		add(&o, "drop-nth %u", cfg->nth);
		name = cfg->nth_opcode == FAB_ANY ? NULL : opcode_name(cfg->nth_opcode);
		if (name)
			add(&o, "opcode %s", name);
		else if (cfg->nth_opcode != FAB_ANY)
			add(&o, "opcode 0x%02x", cfg->nth_opcode);
		if (cfg->nth_qpn != FAB_ANY)
			add(&o, "qpn %u", cfg->nth_qpn);
	}
	return buf;
}
