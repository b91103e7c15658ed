/*
 * Unit tests of the scenario language's front end (scenarios/scn_ast.h):
 * every statement parsed into the fields the runner reads, parameters and
 * includes, and a table of bad scripts each with the exact message it must
 * produce.  The test works in a private directory (its working directory)
 * so that messages name files as "bad.scn".
 */
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "fab_wire.h"
#include "nstest.h"
#include "scn.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static char tmp[256];
static struct scn_diag diag;

static void write_file(const char *name, const char *text, size_t len)
{
	FILE *f = fopen(name, "wb");

	NST_REQUIRE(f != NULL);
	NST_REQUIRE(fwrite(text, 1, len, f) == len);
	NST_REQUIRE(fclose(f) == 0);
}

static void put(const char *name, const char *text)
{
	write_file(name, text, strlen(text));
}

/* Parse and check name; print the messages so a failing test shows them. */
static int parse_check(const char *name, const struct scn_defines *defs, struct scn_script **s)
{
	int rc;

	scn_diag_init(&diag);
	rc = scn_parse_file(name, defs, s, &diag);
	if (!rc) {
		rc = scn_check(*s, &diag);
		if (rc) {
			scn_script_free(*s);
			*s = NULL;
		}
	}
	if (diag.n) {
		printf("\n  messages for %s:\n", name);
		scn_diag_print(&diag, stdout);
	}
	return rc;
}

/* Every statement of the language, in the order the runner gets them. */
static const char every_stmt[] =
    "# A read-only registration refuses RDMA writes.\n"
    "# More of the intent.\n"
    "seed 42\n"
    "param SIZE = 64KiB   # a comment after a value\n"
    "include \"common/two.scn\"\n"
    "timeout 30s\n"
    "link a -> b latency 10us loss 1%\n"
    "link a <-> b rate 10 jitter 2.5us\n"
    "host h1 on a\n"
    "host h2 on b cache off\n"
    "program pp on b \"nicsim-pingpong --server --size ${SIZE} --peer ${a.addr} \\\"q\\\"\"\n"
    "capture off\n"
    "\n"
    "h1: startup\n"
    "h1: socket -> s\n"
    "h1: bind s a 7000\n"
    "h1: listen s 8\n"
    "h1: accept s -> c1 &\n"
    "h2: socket -> t\n"
    "h2: bind t b 0\n"
    "h2: connect t a 7000 -> conn & \\\n"
    "\n" /* a continued line may be followed by a blank one */
    "wait conn within 2s\n"
    "wait c1\n"
    "h1: buffer x 1MiB fill seq 7\n"
    "h1: buffer m 64KiB fill byte 0xAB malloc\n"
    "h1: register c1 x -> hx\n"
    "h1: register c1 x[0..4KiB] read -> hr\n"
    "h1: register-rdma c1 x readwrite -> d\n"
    "h2: buffer y 1MiB fill random 9\n"
    "h2: write t y[0..${SIZE}] d[0] -> w1\n"
    "h2: read t y d[4KiB] len 4KiB\n"
    "h2: send t y[0..100] -> s1 &\n"
    "h1: recv c1 x[0..4KiB] -> r1 = ok\n"
    "wait s1 = WSAECONNRESET within 1s\n"
    "desc bad = d with rkey 0x1234\n"
    "desc late = d with va +4KiB\n"
    "desc cut = d truncated 16\n"
    "desc ro = d with access read\n"
    "desc rw = d with access readwrite\n"
    "fault f1 a -> b drop-nth 3 opcode RC_RDMA_WRITE_MIDDLE\n"
    "fault f2 a -> b loss 30% for 200ms\n"
    "fault f3 a <-> b down for 40 frames\n"
    "fault f4 a -> b corrupt 5% after w1\n"
    "fault f5 a -> b dup 10% at +50ms optional\n"
    "heal f2\n"
    "mark m0\n"
    "wait counter a.retransmits >= 3 within 2s\n"
    "wait frame a -> b opcode ACK syndrome NAK-REMOTE-ACCESS within 1s\n"
    "start pp\n"
    "wait pp output \"bandwidth\" within 5s\n"
    "expect pp output /check(sum)?s \\/ match/\n"
    "settle 100ms no frame a -> b qpn 17\n"
    "expect h1 x[0..64KiB] == seq 9\n"
    "expect h1 x[0..64KiB] == h2 y[0..64KiB]\n"
    "expect h1 x[64KiB..] unchanged\n"
    "expect h1 x checksum 0x1234abcd\n"
    "expect tpt b entries == 0\n"
    "expect tpt b entries in 1..3 of h2\n"
    "expect tpt a key d invalid\n"
    "expect counter a.retransmits delta >= 1\n"
    "expect counter a.retransmits delta from m0 != 0\n"
    "expect counter b.rnr_naks < 2\n"
    "expect refusal b reason stale-key from a\n"
    "expect frames b -> a opcode ACK syndrome NAK-REMOTE-ACCESS count == 1\n"
    "h1: deregister-rdma c1 d\n"
    "h1: deregister c1 hx = WSAEINVAL\n"
    "h1: cache-callback x[0..4KiB]\n"
    "h1: munmap x\n"
    "h1: mmap x\n"
    "h1: mremap x 2MiB\n"
    "h1: madvise x[0..2MiB] remove\n"
    "h1: free m\n"
    "h1: realloc m 1MiB = any\n"
    "h1: close c1\n"
    "h1: fork -> h3\n"
    "h3: exit 3\n"
    "h1: cleanup\n"
    "kill pp TERM\n"
    "wait pp exit 0 within 5s\n"
    "kill h1\n"
    "wait h1 exit within 1s\n"
    "stop nic b\n"
    "cont nic b\n"
    "kill nic b\n"
    "restart nic b\n";

static const char two_nics[] = "# two NICs\n"
			       "nic a 198.18.0.1\n"
			       "nic b 198.18.0.2 no-windows no-rdma-read tpt-capacity 64 \\\n"
			       "      max-reg 1MiB retry-count 1 ack-timeout 8\n";

static const struct scn_stmt *next(const struct scn_script *s, size_t *i, enum scn_stmt_kind kind)
{
	const struct scn_stmt *st;

	NST_REQUIRE(*i < s->nstmts);
	st = &s->stmts[(*i)++];
	NST_CHECK_(st->kind == kind, CU_TRUE, "statement %zu (%s:%u \"%s\"): kind %s, want %s",
		   *i - 1, st->loc.file, st->loc.line, st->text, scn_stmt_kind_name(st->kind),
		   scn_stmt_kind_name(kind));
	return st;
}

/* Strings: both printed in full on failure (they may be longer than an
 * assertion's message holds). */
static bool str_eq(const char *got, const char *want, const char *expr, int line)
{
	if (!strcmp(got, want))
		return true;
	printf("\n  line %d: %s\n    got  \"%s\"\n    want \"%s\"\n", line, expr, got, want);
	return false;
}

#define STR_EQ(a, b) NST_CHECK_(str_eq((a), (b), #a, __LINE__), CU_FALSE, "%s == %s", #a, #b)

static void test_every_statement(void)
{
	const struct scn_stmt *st;
	struct scn_script *s = NULL;
	size_t i = 0;
	uint32_t addr;

	NST_REQUIRE(mkdir("common", 0700) == 0 || errno == EEXIST);
	put("common/two.scn", two_nics);
	put("every.scn", every_stmt);
	NST_REQUIRE_EQ(parse_check("every.scn", NULL, &s), 0);
	/* The only message: the fault at a time. */
	NST_EQ(diag.errors, 0);
	NST_EQ(diag.warnings, 1);
	STR_EQ(diag.msg[0].text, "every.scn:45:1: warning: fault 'f5' starts at a time: timing "
				 "depends on the machine; prefer 'after NAME' (an event)");
	STR_EQ(s->title, "A read-only registration refuses RDMA writes.");
	NST_TRUE(s->seed_set);
	NST_EQ_U(s->seed, 42);
	NST_EQ_U(s->timeout_ns, 30000000000ull);
	NST_TRUE(!s->capture);
	NST_EQ(s->nnics, 2);
	NST_EQ(s->nlinks, 2);
	NST_EQ(s->nhosts, 2);
	NST_EQ(s->nprograms, 1);
	NST_EQ(s->nparams, 1);
	NST_EQ(s->nfiles, 2);

	st = next(s, &i, SCN_SEED);
	NST_EQ_U(st->u.seed, 42);
	st = next(s, &i, SCN_PARAM);
	STR_EQ(st->name, "SIZE");
	STR_EQ(st->u.param.value, "64KiB");
	NST_TRUE(!st->u.param.overridden);
	st = next(s, &i, SCN_NIC);
	STR_EQ(st->loc.file, "common/two.scn");
	NST_EQ(st->loc.line, 2);
	NST_REQUIRE(fab_addr_parse("198.18.0.1", &addr) == 0);
	NST_EQ_U(st->u.nic.addr, addr);
	NST_EQ(st->u.nic.timer[NIC_TOPT_RETRY_COUNT], -1);
	st = next(s, &i, SCN_NIC);
	STR_EQ(st->name, "b");
	NST_TRUE(st->u.nic.no_windows && st->u.nic.no_rdma_read);
	NST_EQ(st->u.nic.tpt_capacity, 64);
	NST_EQ_U(st->u.nic.max_reg, 1u << 20);
	NST_EQ(st->u.nic.timer[NIC_TOPT_RETRY_COUNT], 1);
	NST_EQ(st->u.nic.timer[NIC_TOPT_ACK_TIMEOUT], 8);
	NST_EQ(st->u.nic.timer[NIC_TOPT_RNR_RETRY], -1);
	st = next(s, &i, SCN_TIMEOUT);
	STR_EQ(st->loc.file, "every.scn");
	st = next(s, &i, SCN_LINK);
	STR_EQ(st->u.link.ends.src, "a");
	STR_EQ(st->u.link.ends.dst, "b");
	NST_TRUE(!st->u.link.ends.both);
	NST_EQ(st->u.link.words.n, 4);
	STR_EQ(st->u.link.words.word[1], "10");
	STR_EQ(st->u.link.words.word[3], "1");
	st = next(s, &i, SCN_LINK);
	NST_TRUE(st->u.link.ends.both);
	STR_EQ(st->u.link.words.word[1], "10");
	STR_EQ(st->u.link.words.word[3], "2.500");
	st = next(s, &i, SCN_HOST);
	NST_EQ(st->u.host.cache, -1);
	st = next(s, &i, SCN_HOST);
	STR_EQ(st->u.host.nic, "b");
	NST_EQ(st->u.host.cache, 0);
	st = next(s, &i, SCN_PROGRAM);
	STR_EQ(st->u.program.command,
	       "nicsim-pingpong --server --size 64KiB --peer 198.18.0.1 \"q\"");
	st = next(s, &i, SCN_CAPTURE);
	NST_TRUE(!st->u.flag);

	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_STARTUP);
	STR_EQ(st->u.call.host, "h1");
	NST_EQ(st->result.kind, SCN_RES_OK);
	NST_TRUE(!st->has_result);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_SOCKET);
	STR_EQ(st->name, "s");
	NST_EQ(st->name_loc.col, 15);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_BIND);
	STR_EQ(st->u.call.sock, "s");
	STR_EQ(st->u.call.nic, "a");
	NST_EQ(st->u.call.port, 7000);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_LISTEN);
	NST_EQ(st->u.call.backlog, 8);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_ACCEPT);
	STR_EQ(st->name, "c1");
	NST_TRUE(st->async);
	next(s, &i, SCN_CALL); /* socket -> t */
	next(s, &i, SCN_CALL); /* bind t b 0 */
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_CONNECT);
	NST_TRUE(st->async);
	STR_EQ(st->text, "h2: connect t a 7000 -> conn &");
	st = next(s, &i, SCN_WAIT_OP);
	NST_EQ(st->loc.line, 23); /* after the continued line and the blank one */
	STR_EQ(st->u.target, "conn");
	NST_EQ_U(st->within_ns, 2000000000ull);
	st = next(s, &i, SCN_WAIT_OP);
	NST_EQ_U(st->within_ns, 0);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_BUFFER);
	STR_EQ(st->name, "x");
	NST_EQ_U(st->u.call.size, 1u << 20);
	NST_EQ(st->u.call.fill.kind, SCN_PATTERN_SEQ);
	NST_EQ_U(st->u.call.fill.arg, 7);
	NST_TRUE(!st->u.call.use_malloc);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.fill.kind, SCN_PATTERN_BYTE);
	NST_EQ_U(st->u.call.fill.arg, 0xab);
	NST_TRUE(st->u.call.use_malloc);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_REGISTER);
	NST_EQ(st->u.call.local.form, SCN_RANGE_WHOLE);
	NST_EQ(st->u.call.access, SCN_ACCESS_READWRITE);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.local.form, SCN_RANGE_SPAN);
	NST_EQ_U(st->u.call.local.off, 0);
	NST_EQ_U(st->u.call.local.end, 4096);
	NST_EQ(st->u.call.access, SCN_ACCESS_READ);
	STR_EQ(st->name, "hr");
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_REGISTER_RDMA);
	STR_EQ(st->name, "d");
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.fill.kind, SCN_PATTERN_RANDOM);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_WRITE);
	NST_EQ_U(st->u.call.local.end, 65536);
	STR_EQ(st->u.call.remote.name, "d");
	NST_EQ(st->u.call.remote.form, SCN_RANGE_AT);
	NST_EQ_U(st->u.call.remote.off, 0);
	STR_EQ(st->name, "w1");
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_READ);
	NST_EQ_U(st->u.call.remote.off, 4096);
	NST_EQ_U(st->u.call.size, 4096);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_SEND);
	NST_EQ_U(st->u.call.local.end, 100);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_RECV);
	NST_TRUE(st->has_result);
	NST_EQ(st->result.kind, SCN_RES_OK);
	st = next(s, &i, SCN_WAIT_OP);
	NST_EQ(st->result.kind, SCN_RES_WSA);
	NST_EQ(st->result.code, 10054);
	STR_EQ(st->result.name, "WSAECONNRESET");
	st = next(s, &i, SCN_DESC);
	STR_EQ(st->u.desc.base, "d");
	NST_EQ(st->u.desc.field, SCN_DF_RKEY);
	NST_EQ_U(st->u.desc.value, 0x1234);
	st = next(s, &i, SCN_DESC);
	NST_EQ(st->u.desc.field, SCN_DF_VA);
	NST_TRUE(st->u.desc.relative && !st->u.desc.negative);
	NST_EQ_U(st->u.desc.value, 4096);
	st = next(s, &i, SCN_DESC);
	NST_EQ(st->u.desc.field, SCN_DF_TRUNCATED);
	NST_EQ_U(st->u.desc.value, 16);
	/* An access written as a word is the descriptor's MEM_* value. */
	st = next(s, &i, SCN_DESC);
	NST_EQ(st->u.desc.field, SCN_DF_ACCESS);
	NST_EQ_U(st->u.desc.value, 1);
	st = next(s, &i, SCN_DESC);
	NST_EQ_U(st->u.desc.value, 3);
	st = next(s, &i, SCN_FAULT);
	STR_EQ(st->name, "f1");
	NST_EQ(st->u.fault.words.n, 4);
	STR_EQ(st->u.fault.words.word[0], "drop-nth");
	STR_EQ(st->u.fault.words.word[3], "RC_RDMA_WRITE_MIDDLE");
	NST_EQ(st->u.fault.start, SCN_FAULT_NOW);
	NST_EQ(st->u.fault.end, SCN_FAULT_UNTIL_HEAL);
	st = next(s, &i, SCN_FAULT);
	STR_EQ(st->u.fault.words.word[1], "30");
	NST_EQ(st->u.fault.end, SCN_FAULT_FOR_TIME);
	NST_EQ_U(st->u.fault.for_ns, 200000000ull);
	st = next(s, &i, SCN_FAULT);
	NST_TRUE(st->u.fault.ends.both);
	NST_EQ(st->u.fault.words.n, 1);
	NST_EQ(st->u.fault.end, SCN_FAULT_FOR_FRAMES);
	NST_EQ_U(st->u.fault.for_frames, 40);
	st = next(s, &i, SCN_FAULT);
	NST_EQ(st->u.fault.start, SCN_FAULT_AFTER);
	STR_EQ(st->u.fault.after, "w1");
	st = next(s, &i, SCN_FAULT);
	NST_EQ(st->u.fault.start, SCN_FAULT_AT);
	NST_EQ_U(st->u.fault.at_ns, 50000000ull);
	NST_TRUE(st->optional);
	st = next(s, &i, SCN_HEAL);
	STR_EQ(st->u.target, "f2");
	st = next(s, &i, SCN_MARK);
	STR_EQ(st->name, "m0");
	st = next(s, &i, SCN_WAIT_COUNTER);
	STR_EQ(st->u.counter.nic, "a");
	STR_EQ(st->u.counter.counter, "retransmits");
	NST_EQ(st->u.counter.cmp.op, SCN_CMP_GE);
	NST_EQ_U(st->u.counter.cmp.a, 3);
	st = next(s, &i, SCN_WAIT_FRAME);
	NST_EQ(st->u.frames.filter.opcode, FAB_OP_ACKNOWLEDGE);
	NST_EQ(st->u.frames.filter.syndrome, FAB_AETH_NAK | FAB_NAK_REMOTE_ACCESS_ERROR);
	NST_EQ(st->u.frames.filter.qpn, -1);
	st = next(s, &i, SCN_START);
	STR_EQ(st->u.target, "pp");
	st = next(s, &i, SCN_WAIT_OUTPUT);
	STR_EQ(st->u.output.text, "bandwidth");
	NST_TRUE(!st->u.output.regex);
	st = next(s, &i, SCN_EXPECT_OUTPUT);
	STR_EQ(st->u.output.text, "check(sum)?s / match");
	NST_TRUE(st->u.output.regex);
	st = next(s, &i, SCN_SETTLE);
	NST_EQ_U(st->u.settle.ns, 100000000ull);
	NST_TRUE(st->u.settle.no_frame);
	NST_EQ(st->u.settle.filter.qpn, 17);
	st = next(s, &i, SCN_EXPECT_MEM);
	NST_EQ(st->u.mem.check, SCN_MEM_PATTERN);
	NST_EQ(st->u.mem.pattern.kind, SCN_PATTERN_SEQ);
	st = next(s, &i, SCN_EXPECT_MEM);
	NST_EQ(st->u.mem.check, SCN_MEM_PEER);
	STR_EQ(st->u.mem.peer_host, "h2");
	STR_EQ(st->u.mem.peer.name, "y");
	st = next(s, &i, SCN_EXPECT_MEM);
	NST_EQ(st->u.mem.check, SCN_MEM_UNCHANGED);
	NST_EQ(st->u.mem.range.form, SCN_RANGE_FROM);
	NST_EQ_U(st->u.mem.range.off, 65536);
	st = next(s, &i, SCN_EXPECT_MEM);
	NST_EQ(st->u.mem.check, SCN_MEM_CHECKSUM);
	NST_EQ_U(st->u.mem.checksum, 0x1234abcd);
	st = next(s, &i, SCN_EXPECT_TPT);
	NST_TRUE(!st->u.tpt.key);
	NST_EQ(st->u.tpt.cmp.op, SCN_CMP_EQ);
	st = next(s, &i, SCN_EXPECT_TPT);
	NST_EQ(st->u.tpt.cmp.op, SCN_CMP_IN);
	NST_EQ_U(st->u.tpt.cmp.a, 1);
	NST_EQ_U(st->u.tpt.cmp.b, 3);
	STR_EQ(st->u.tpt.host, "h2");
	st = next(s, &i, SCN_EXPECT_TPT);
	NST_TRUE(st->u.tpt.key);
	NST_EQ(st->u.tpt.state, SCN_TPT_INVALID);
	st = next(s, &i, SCN_EXPECT_COUNTER);
	NST_TRUE(st->u.counter.delta);
	STR_EQ(st->u.counter.mark, "");
	st = next(s, &i, SCN_EXPECT_COUNTER);
	STR_EQ(st->u.counter.mark, "m0");
	NST_EQ(st->u.counter.cmp.op, SCN_CMP_NE);
	st = next(s, &i, SCN_EXPECT_COUNTER);
	NST_TRUE(!st->u.counter.delta);
	NST_EQ(st->u.counter.cmp.op, SCN_CMP_LT);
	st = next(s, &i, SCN_EXPECT_REFUSAL);
	STR_EQ(st->u.refusal.reason, "stale-key");
	NST_EQ(st->u.refusal.reason_code, 2); /* NIC_TPT_R_STALE_KEY */
	STR_EQ(st->u.refusal.from, "a");
	st = next(s, &i, SCN_EXPECT_FRAMES);
	STR_EQ(st->u.frames.filter.link.src, "b");
	NST_EQ(st->u.frames.count.op, SCN_CMP_EQ);
	NST_EQ_U(st->u.frames.count.a, 1);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_DEREGISTER_RDMA);
	STR_EQ(st->u.call.target, "d");
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_DEREGISTER);
	NST_EQ(st->result.code, 10022);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_CACHE_CALLBACK);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_MUNMAP);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_MMAP);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_MREMAP);
	NST_EQ_U(st->u.call.size, 2u << 20);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_MADVISE);
	NST_EQ(st->u.call.advice, SCN_ADV_REMOVE);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_FREE);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_REALLOC);
	NST_EQ(st->result.kind, SCN_RES_ANY);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_CLOSE);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_FORK);
	STR_EQ(st->name, "h3");
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_EXIT);
	STR_EQ(st->u.call.host, "h3");
	NST_EQ(st->u.call.exit_code, 3);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_CLEANUP);
	st = next(s, &i, SCN_KILL);
	STR_EQ(st->u.kill.target, "pp");
	NST_EQ(st->u.kill.signal, 15);
	st = next(s, &i, SCN_WAIT_EXIT);
	NST_TRUE(st->u.exit.has_code);
	NST_EQ(st->u.exit.code, 0);
	st = next(s, &i, SCN_KILL);
	NST_EQ(st->u.kill.signal, 9);
	st = next(s, &i, SCN_WAIT_EXIT);
	NST_TRUE(!st->u.exit.has_code);
	st = next(s, &i, SCN_STOP_NIC);
	STR_EQ(st->u.target, "b");
	next(s, &i, SCN_CONT_NIC);
	next(s, &i, SCN_KILL_NIC);
	next(s, &i, SCN_RESTART_NIC);
	NST_EQ(i, s->nstmts);
	scn_script_free(s);
}

/* Parameters: -D overrides, a -D alone, ${NIC.addr}, ${SEED}, ${RUN_DIR}. */
static void test_params(void)
{
	static const struct scn_define d[] = {{"SIZE", "1MiB"}, {"PORT", "7001"}, {"SEED", "7"}};
	struct scn_defines defs = {d, 3};
	struct scn_script *s = NULL;
	const struct scn_stmt *st;

	put("params.scn", "param SIZE = 64KiB\n"
			  "nic a 198.18.0.7\n"
			  "host h1 on a\n"
			  "program p on a \"run --seed ${SEED} --dir ${RUN_DIR} --to ${a.addr}\"\n"
			  "h1: buffer x ${SIZE}\n"
			  "h1: socket -> s\n"
			  "h1: bind s a ${PORT}\n");
	NST_REQUIRE_EQ(parse_check("params.scn", &defs, &s), 0);
	NST_TRUE(s->params[0]->u.param.overridden);
	STR_EQ(s->params[0]->u.param.value, "1MiB");
	NST_EQ_U(s->seed, 7);
	STR_EQ(s->programs[0]->u.program.command, "run --seed 7 --dir ${RUN_DIR} --to 198.18.0.7");
	st = &s->stmts[4];
	NST_EQ_U(st->u.call.size, 1u << 20);
	/* A byte made by ${SIZE} points at its '$'. */
	NST_EQ(scn_stmt_word_loc(st, "1MiB").col, 14);
	NST_EQ(s->stmts[6].u.call.port, 7001);
	scn_script_free(s);

	/* Without a seed, `check` reads ${SEED} as 0 (a run gives its own). */
	put("noseed.scn", "nic a 198.18.0.7\nprogram p on a \"x ${SEED}\"\n");
	NST_REQUIRE_EQ(parse_check("noseed.scn", NULL, &s), 0);
	NST_TRUE(!s->seed_set);
	STR_EQ(s->programs[0]->u.program.command, "x 0");
	scn_script_free(s);
}

/* A parameter's value is at most 255 bytes, written or given by -D. */
static void test_param_limit(void)
{
	static char text[1024], value[300];
	struct scn_define d[] = {{"P", value}};
	const struct scn_defines defs = {d, 1};
	struct scn_script *s = NULL;

	memset(value, 'v', 255);
	snprintf(text, sizeof(text), "param P = %.255s\nparam Q = \"%.255s\"\n", value, value);
	put("plim.scn", text);
	NST_REQUIRE_EQ(parse_check("plim.scn", NULL, &s), 0);
	NST_EQ(strlen(s->params[0]->u.param.value), 255);
	NST_EQ(strlen(s->params[1]->u.param.value), 255);
	scn_script_free(s);

	memset(value, 'v', 256);
	snprintf(text, sizeof(text), "param P = %s\nparam Q = \"%s\"\n", value, value);
	put("plim.scn", text);
	NST_EQ(parse_check("plim.scn", NULL, &s), -EINVAL);
	NST_REQUIRE_EQ(diag.n, 2);
	STR_EQ(diag.msg[0].text, "plim.scn:1:11: the value of parameter 'P' is 256 bytes: a "
				 "parameter's value is at most 255 bytes");
	STR_EQ(diag.msg[1].text, "plim.scn:2:11: the value of parameter 'Q' is 256 bytes: a "
				 "parameter's value is at most 255 bytes");

	put("plim.scn", "param P = 1\n");
	NST_EQ(parse_check("plim.scn", &defs, &s), -EINVAL);
	NST_REQUIRE_EQ(diag.n, 1);
	STR_EQ(diag.msg[0].text, "plim.scn:1:11: -D P: the value is 256 bytes: a parameter's "
				 "value is at most 255 bytes");
}

/* Parse path for a run with seed; the program's command. */
static const char *run_command(const char *path, const struct scn_defines *defs,
			       const struct scn_run_seed *seed, struct scn_script **s)
{
	scn_diag_init(&diag);
	*s = NULL;
	if (scn_parse_file_run(path, defs, seed, s, &diag) || !(*s)->nprograms) {
		scn_diag_print(&diag, stdout);
		return "(parse failed)";
	}
	return (*s)->programs[0]->u.program.command;
}

/* ${SEED} is the seed the scenario runs with, wherever the file sets it:
 * --seed N, else -D SEED=N, else its `seed N`, else the run's random one. */
static void test_seed_param(void)
{
	static const struct scn_define d[] = {{"SEED", "0x5"}};
	const struct scn_defines defs = {d, 1};
	const struct scn_run_seed given = {
	    .given = true, .seed = 9, .default_set = true, .seed_default = 77};
	const struct scn_run_seed random = {.default_set = true, .seed_default = 77};
	struct scn_script *s = NULL;

	/* A use before the `seed` line gets the file's seed too. */
	put("sd.scn", "param S = ${SEED}\n"
		      "nic a 198.18.0.1\n"
		      "program p on a \"echo ${SEED} ${S} ${RUN_DIR}\"\n"
		      "seed 42\n"
		      "host h on a\n"
		      "h: buffer x 4KiB fill random ${SEED}\n");
	STR_EQ(run_command("sd.scn", NULL, NULL, &s), "echo 42 42 ${RUN_DIR}");
	NST_EQ_U(s->seed, 42);
	NST_EQ_U(s->stmts[5].u.call.fill.arg, 42);
	NST_EQ(diag.n, 0);
	scn_script_free(s);
	STR_EQ(run_command("sd.scn", NULL, &random, &s), "echo 42 42 ${RUN_DIR}");
	NST_EQ_U(s->seed, 42);
	scn_script_free(s);
	STR_EQ(run_command("sd.scn", NULL, &given, &s), "echo 9 9 ${RUN_DIR}");
	NST_EQ_U(s->seed, 9);
	NST_EQ_U(s->stmts[5].u.call.fill.arg, 9);
	scn_script_free(s);
	STR_EQ(run_command("sd.scn", &defs, &random, &s), "echo 5 5 ${RUN_DIR}");
	NST_EQ_U(s->seed, 5);
	scn_script_free(s);
	STR_EQ(run_command("sd.scn", &defs, &given, &s), "echo 9 9 ${RUN_DIR}");
	NST_EQ_U(s->seed, 9);
	scn_script_free(s);

	/* No seed in the file: the run's random one. */
	put("sd.scn", "nic a 198.18.0.1\nprogram p on a \"echo ${SEED}\"\n");
	STR_EQ(run_command("sd.scn", NULL, &random, &s), "echo 77");
	NST_TRUE(s->seed_set);
	NST_EQ_U(s->seed, 77);
	scn_script_free(s);
	STR_EQ(run_command("sd.scn", NULL, &given, &s), "echo 9");
	scn_script_free(s);

	/* Parsed again for the seed: each message still comes once. */
	put("sd.scn", "nic a 198.18.0.1\nprogram p on a \"${SEED}\"\nseed 3\nbogus\n");
	scn_diag_init(&diag);
	NST_EQ(scn_parse_file_run("sd.scn", NULL, &random, &s, &diag), -EINVAL);
	NST_TRUE(s == NULL);
	NST_EQ(diag.n, 1);
	NST_EQ(diag.errors, 1);
	STR_EQ(diag.msg[0].text, "sd.scn:4:1: unknown statement 'bogus'");
}

static void test_subst_run_dir(void)
{
	char *t = scn_subst_run_dir("a ${RUN_DIR}/x ${RUN_DIR}${RUN_DIR} $RUN_DIR", "/tmp/r");

	NST_REQUIRE(t != NULL);
	STR_EQ(t, "a /tmp/r/x /tmp/r/tmp/r $RUN_DIR");
	free(t);
	t = scn_subst_run_dir("none", "/d");
	NST_REQUIRE(t != NULL);
	STR_EQ(t, "none");
	free(t);
}

/* Units, decimals and bounds of numbers. */
static void test_numbers(void)
{
	struct scn_script *s = NULL;

	put("num.scn", "timeout 1.5s\n"
		       "nic a 198.18.0.1\n"
		       "host h on a\n"
		       "h: buffer b1 0x1000\n"
		       "h: buffer b2 3G\n"
		       "h: buffer b3 100B\n"
		       "h: buffer b4 18446744073709551615\n"
		       "h: buffer b5 1K within 250ns\n"
		       "h: buffer b6 2M within 0.001ms\n");
	/* The parser's numbers: the checker refuses buffers past 1 GiB. */
	scn_diag_init(&diag);
	NST_REQUIRE_EQ(scn_parse_file("num.scn", NULL, &s, &diag), 0);
	NST_EQ_U(s->timeout_ns, 1500000000ull);
	NST_EQ_U(s->stmts[3].u.call.size, 0x1000);
	NST_EQ_U(s->stmts[4].u.call.size, 3ull << 30);
	NST_EQ_U(s->stmts[5].u.call.size, 100);
	NST_EQ_U(s->stmts[6].u.call.size, UINT64_MAX);
	NST_EQ_U(s->stmts[7].u.call.size, 1024);
	NST_EQ_U(s->stmts[7].within_ns, 250);
	NST_EQ_U(s->stmts[8].within_ns, 1000);
	scn_script_free(s);
}

struct bad {
	const char *what;
	const char *text; /* bad.scn */
	const char *msg;  /* the first message, exactly */
};

#define SETUP "nic a 198.18.0.1\nnic b 198.18.0.2\nhost h1 on a\nhost h2 on b\n"

static const struct bad bads[] = {
    {"unknown statement", "tittle \"x\"\n",
     "bad.scn:1:1: unknown statement 'tittle'; did you mean 'title'?"},
    {"unknown call", SETUP "h1: regster x\n",
     "bad.scn:5:5: unknown call 'regster'; did you mean 'register'?"},
    {"call without its colon", SETUP "h1 startup\n",
     "bad.scn:5:1: unknown statement 'h1'; a call is written 'h1: startup ...'"},
    {"bad number", "seed 12ab\n",
     "bad.scn:1:6: bad number '12ab': expected a seed, a whole number without a unit"},
    {"number overflow", "seed 18446744073709551616\n",
     "bad.scn:1:6: number too large: 18446744073709551616 (at most 18446744073709551615)"},
    {"seq over 32 bits", SETUP "h1: buffer x 4KiB fill seq 0x100000000\n",
     "bad.scn:5:28: 0x100000000 is too large for the sequence's number: at most 4294967295 "
     "(0xffffffff)"},
    {"munmap of a range", SETUP "h1: buffer x 8KiB\nh1: munmap x[0..4KiB]\n",
     "bad.scn:6:12: munmap unmaps a whole buffer: write 'munmap x' (to drop the pages of a "
     "part, 'madvise x[...] dontneed')"},
    {"size overflow", SETUP "h1: buffer x 17179869184GiB\n",
     "bad.scn:5:14: number too large: 17179869184GiB (at most 18446744073709551615)"},
    {"time without unit", "timeout 1000\n",
     "bad.scn:1:9: 1000: a time needs a unit (1000ms? 1000us?)"},
    {"time finer than ns", "timeout 1.5ns\n", "bad.scn:1:9: 1.5ns: finer than a nanosecond"},
    {"timeout past a day", "timeout 20000000s\n",
     "bad.scn:1:9: time too large: 20000000s (at most a day, 86400s, as --timeout)"},
    {"within past a day", SETUP "wait counter a.cmd_conn >= 1 within 18446744073s\n",
     "bad.scn:5:37: time too large: 18446744073s (at most a day, 86400s, as --timeout)"},
    {"undefined name", SETUP "h1: close s\n",
     "bad.scn:5:11: 's' is not defined (a socket is wanted)"},
    {"used before defined", SETUP "h1: close s\nh1: socket -> s\n",
     "bad.scn:5:11: 's' is used before it is defined (line 6)"},
    {"wrong kind", SETUP "h1: buffer x 4KiB\nh1: close x\n",
     "bad.scn:6:11: 'x' is a buffer (line 5), not a socket"},
    {"missing include", "include \"nope.scn\"\n",
     "bad.scn:1:9: cannot include \"nope.scn\": No such file or directory (looked for "
     "nope.scn)"},
    {"step before set-up ends", SETUP "h1: startup\nnic c 198.18.0.3\n",
     "bad.scn:6:1: 'nic' is set-up: it must come before the first step (bad.scn:5)"},
    {"duplicate name", SETUP "host h1 on b\n",
     "bad.scn:5:6: 'h1' is defined twice: it is a host at bad.scn:3"},
    {"unknown link setting", SETUP "link a -> b lattency 10us\n",
     "bad.scn:5:13: link settings: unknown setting 'lattency' (settings: latency, jitter, "
     "rate, loss, dup, reorder, reorder-gap, corrupt, delay, delay-pct, drop-nth, opcode, "
     "qpn, down, up, seed, clear)"},
    {"bad link value", SETUP "link a -> b loss 101%\n",
     "bad.scn:5:13: link settings: loss 101: expected a percentage from 0 to 100, e.g. 5 or "
     "0.01"},
    {"bad address", "nic a 10.0.0.1\n",
     "bad.scn:1:7: 10.0.0.1: not a NIC address: nicsim NICs take 198.18.0.1 to "
     "198.19.255.254 (198.18.0.0/15)"},
    {"not an address", "nic a 198.18.0\n",
     "bad.scn:1:7: 198.18.0: not an IPv4 address (expected e.g. 198.18.0.1)"},
    {"same address", "nic a 198.18.0.1\nnic b 198.18.0.1\n",
     "bad.scn:2:7: NIC 'b' has the address 198.18.0.1 of NIC 'a' (line 1): each NIC needs "
     "its own"},
    {"host on an unknown NIC", "host h on z\n",
     "bad.scn:1:11: 'z' is not defined (a NIC is wanted)"},
    {"range past the buffer",
     SETUP "h1: socket -> s\nh1: buffer x 4KiB\n"
	   "h1: register s x[0..8KiB] -> hx\n",
     "bad.scn:7:16: x[0..8192] goes past the end of 'x', which has 4096 bytes (line 6)"},
    {"another host's buffer", SETUP "h1: buffer x 4KiB\nh2: munmap x\n",
     "bad.scn:6:12: buffer 'x' is h1's (line 5), not h2's"},
    {"a child's buffer used by its parent", SETUP "h1: fork -> k\nk: buffer x 4KiB\nh1: munmap x\n",
     "bad.scn:7:12: buffer 'x' is k's (line 6), not h1's"},
    {"& never waited for", SETUP "h1: socket -> s\nh1: accept s -> c &\n",
     "bad.scn:6:1: 'c' is started with '&' but never waited for: add 'wait c' before the "
     "end, or drop the '&'"},
    {"& result used before its wait", SETUP "h1: socket -> s\nh1: accept s -> c &\nh1: close c\n",
     "bad.scn:7:11: 'c' is used before 'wait c' collects it (line 6 started it with '&')"},
    {"& without a name", SETUP "h1: socket -> s\nh1: accept s &\n",
     "bad.scn:6:1: '&' needs '-> NAME', so that a later 'wait NAME' collects the result"},
    {"a socket without a name", SETUP "h1: socket = WSAENETDOWN\n",
     "bad.scn:5:1: 'socket' makes a socket: name it with '-> NAME'"},
    {"& on a call that does not wait", SETUP "h1: startup &\n",
     "bad.scn:5:13: '&' is for calls that complete later (accept, connect, write, read, "
     "send, recv and their stream- forms)"},
    {"unknown counter", SETUP "expect counter a.retransmit == 0\n",
     "bad.scn:5:16: unknown counter 'retransmit'; did you mean 'retransmits'? (the names "
     "'nicsim stats' prints)"},
    {"unknown result", SETUP "h1: startup = WSAEINVALL\n",
     "bad.scn:5:15: unknown result 'WSAEINVALL'; did you mean 'WSAEINVAL'? (ok, any, a WSA "
     "code, or for a stream call an errno name or eof)"},
    {"an errno on a call of the SPI", SETUP "h1: socket -> s\nh1: close s = ENOTSOCK\n",
     "bad.scn:6:15: close is a call of the SPI: its result is a WSA code (WSAENOBUFS ...), "
     "not an errno name; did you mean 'WSAENOTSOCK'?"},
    {"a WSA code on a stream call", SETUP "h1: stream-socket -> s\nh1: stream-close s = WSAEBADF\n",
     "bad.scn:6:22: stream-close is a stream call: its result is an errno name (ENOBUFS, "
     "ECONNRESET ...), not a WSA code; did you mean 'EBADF'?"},
    {"eof on another call",
     SETUP "h1: stream-socket -> s\nh1: buffer x 4KiB\n"
	   "h1: stream-send s x = eof\n",
     "bad.scn:7:23: '= eof' is the result of a stream-recv that met the end of the stream, "
     "not of stream-send"},
    {"eof on the wait of another call",
     SETUP "h1: stream-socket -> s\nh1: buffer x 4KiB\nh1: stream-send s x -> w &\nwait w = eof\n",
     "bad.scn:8:10: '= eof' is the result of a stream-recv that met the end of the stream, "
     "not of stream-send"},
    {"a stream socket in a call of the SPI", SETUP "h1: stream-socket -> s\nh1: listen s\n",
     "bad.scn:6:12: 's' is a stream socket (line 5): its calls are stream-bind, stream-send, "
     "stream-recv ...; listen takes a socket of the SPI, made by socket or accept"},
    {"a socket of the SPI in a stream call", SETUP "h1: socket -> s\nh1: stream-listen s\n",
     "bad.scn:6:19: 's' is a socket of the SPI (line 5): stream-listen takes a stream "
     "socket, made by stream-socket or stream-accept; the SPI's calls are listen"},
    {"a stream socket without a name", SETUP "h1: stream-socket\n",
     "bad.scn:5:1: 'stream-socket' makes a stream socket: name it with '-> NAME'"},
    {"an unknown path", SETUP "h1: stream-socket -> s\nh1: stream-connect s a 7000 path rdma\n",
     "bad.scn:6:34: expected a path: read, write or auto, found 'rdma'"},
    {"an unknown shutdown", SETUP "h1: stream-socket -> s\nh1: stream-shutdown s out\n",
     "bad.scn:6:23: expected what to shut down: read, write or both, found 'out'"},
    {"an unknown statistic", SETUP "h1: stream-socket -> s\nexpect stream s large_send == 1\n",
     "bad.scn:6:17: unknown statistic 'large_send'; did you mean 'large_sends'? (NSW_STATS: "
     "bytes_sent, bytes_received, msgs_sent, msgs_received, large_sends, rdma_ops, "
     "registrations, credit_updates, credit_waits), or 'path'"},
    {"expect stream of a socket of the SPI", SETUP "h1: socket -> s\nexpect stream s path read\n",
     "bad.scn:6:15: 's' is a socket (line 5), not a stream socket"},
    {"expect stream without its socket", SETUP "expect stream\n",
     "bad.scn:5:14: expected a stream socket, found the end of the line"},
    {"another host's stream socket", SETUP "h1: stream-socket -> s\nh2: stream-close s\n",
     "bad.scn:6:18: stream socket 's' is h1's (line 5), not h2's: a stream socket belongs to "
     "the host that made it"},
    {"an accepted stream socket in a forked host",
     SETUP "h1: stream-socket -> s\nh1: stream-accept s -> c &\nwait c\nh1: fork -> k\n"
	   "h1: buffer x 4KiB\nk: stream-send c x\n",
     "bad.scn:10:16: stream socket 'c' is h1's (line 6), not k's: a stream socket belongs to "
     "the host that made it"},
    {"unknown parameter", "title \"${NOPE}\"\n",
     "bad.scn:1:8: unknown parameter '${NOPE}': declare it with 'param NOPE = VALUE' before "
     "this line, or give -D NOPE=VALUE"},
    {"unterminated string", "title \"abc\n", "bad.scn:1:7: a string without its closing \""},
    {"bad escape", "title \"a\\qb\"\n",
     "bad.scn:1:9: unknown escape '\\q': write \\\" \\\\ \\n \\t or \\xHH"},
    {"sleep", "sleep 1s\n",
     "bad.scn:1:1: there is no sleep: wait for an event with a deadline (wait NAME, wait "
     "counter, wait frame ... within T), or 'settle T' to check that nothing happens"},
    {"trailing words", "seed 1 2\n", "bad.scn:1:8: expected the end of the statement, found '2'"},
    {"binary file", "nic a 198.18.0.1\nab\0cd\n",
     "bad.scn:2:3: a NUL byte: this is a binary file, not a scenario (UTF-8 text)"},
    {"invalid UTF-8", "title \"caf\xc3\x28\"\n",
     "bad.scn:1:11: invalid UTF-8 (byte 0xc3): a scenario is UTF-8 text"},
    {"buffer past 1 GiB", SETUP "h1: buffer x 1GiB\nh1: buffer y 1025MiB\n",
     "bad.scn:6:1: buffer 'y' of 1074790400 bytes: a host's buffer is at most 1GiB "
     "(1073741824 bytes); split it into several buffers"},
    {"mremap past 1 GiB", SETUP "h1: buffer x 4KiB\nh1: mremap x 2GiB\n",
     "bad.scn:6:1: buffer 'x' of 2147483648 bytes: a host's buffer is at most 1GiB "
     "(1073741824 bytes); split it into several buffers"},
    {"read len past the local buffer",
     SETUP "h1: socket -> s\nh1: buffer y 64KiB\nh1: register-rdma s y -> d\n"
	   "h1: read s y[60KiB..] d len 4KiB\nh1: read s y[60KiB..] d len 8KiB\n",
     "bad.scn:9:12: read of len 8192 into 'y' at offset 61440 runs past its end: 'y' has "
     "65536 bytes, so at most len 4096 fits there"},
    {"madvise off a page",
     SETUP "h1: buffer y 64KiB\nh1: madvise y[4KiB..] free\n"
	   "h1: madvise y[100..4KiB] dontneed\n",
     "bad.scn:7:13: madvise of y at offset 100: the range must start on a page (a multiple "
     "of the page size, 4096 bytes)"},
    {"madvise ending off a page",
     SETUP "h1: buffer y 10000\nh1: madvise y[4KiB..] free\n"
	   "h1: madvise y[0..5000] dontneed\n",
     "bad.scn:7:13: madvise of y[..5000]: the range must end on a page (a multiple of the "
     "page size, 4096 bytes) or at the buffer's end, since the kernel rounds its length up "
     "to whole pages"},
    {"madvise of a malloc buffer", SETUP "h1: buffer m 8KiB malloc\nh1: madvise m free\n",
     "bad.scn:6:13: madvise needs an mmap buffer: 'm' is a malloc buffer, whose pages are "
     "shared with the C library's"},
    {"a link both ways from a NIC to itself", SETUP "link b <-> b loss 1%\n",
     "bad.scn:5:6: 'b <-> b' is one link, NIC b's to itself: write 'b -> b'"},
    {"heal twice", SETUP "fault f a -> b loss 1% optional\nheal f\nheal f\n",
     "bad.scn:7:6: fault 'f' is healed already (line 6): heal a fault once"},
    {"heal of no fault", SETUP "heal f\n", "bad.scn:5:6: 'f' is not defined (a fault is wanted)"},
    {"fault after a mark", SETUP "mark m\nfault f a -> b loss 1% after m\n",
     "bad.scn:6:30: 'after m': m is a mark made by 'mark' (line 5), which does not end as a "
     "call does; name what a host call made (-> NAME), or declare the fault after that "
     "statement without 'after'"},
    {"fault after a desc",
     SETUP "h1: socket -> s\nh1: buffer y 4KiB\nh1: register-rdma s y -> d\n"
	   "desc e = d truncated 3\nfault f a -> b loss 1% after e\n",
     "bad.scn:9:30: 'after e': e is a descriptor made by 'desc' (line 8), which does not end "
     "as a call does; name what a host call made (-> NAME), or declare the fault after that "
     "statement without 'after'"},
    {"a back-reference in a regex",
     SETUP "program p on a \"true\"\nstart p\nwait p output /^(a*)*\\1b/\n",
     "bad.scn:7:1: /^(a*)*\\1b/: '\\1' is a back-reference, which a POSIX extended regular "
     "expression does not have (and whose matching can take exponential time): match the "
     "text itself, or escape a digit as [1]"},
    {"nested counted repetitions in a regex",
     SETUP "program p on a \"true\"\nstart p\nwait p output /(a{1,255}){1,255}b/\n",
     "bad.scn:7:1: /(a{1,255}){1,255}b/: counted repetitions {M,N} (nested ones multiplied) "
     "make 65025 copies of an atom, more than 255, and matching a line would take seconds: "
     "use smaller counts, or * and + instead"},
    {"a param named SEED", "param SEED = 5\n",
     "bad.scn:1:7: 'SEED' is built in (the seed the scenario runs with): set it with 'seed "
     "N', --seed N or -D SEED=N, or name the parameter otherwise"},
    {"a param named RUN_DIR", "param RUN_DIR = /tmp\n",
     "bad.scn:1:7: 'RUN_DIR' is built in (the run directory): name the parameter otherwise"},
    {"a param named like a NIC's address", "param a.addr = 10.0.0.1\nnic a 198.18.0.1\n",
     "bad.scn:1:7: 'a.addr' is built in (the address of NIC 'a'): give the address on the "
     "nic line, or name the parameter otherwise"},
    {"a NIC's address before the NIC", "title \"${a.addr}\"\nnic b 198.18.0.2\nnic a 198.18.0.1\n",
     "bad.scn:1:8: ${a.addr}: NIC 'a' is declared later, at bad.scn:3: declare it before "
     "this line"},
    {"the address of no NIC", "nic b 198.18.0.2\ntitle \"${a.addr}\"\n",
     "bad.scn:2:8: ${a.addr}: no NIC 'a' is declared before this line: declare it first "
     "with 'nic a ADDR'"},
    {"an rkey past 32 bits",
     SETUP "h1: socket -> s\nh1: buffer y 4KiB\nh1: register-rdma s y -> d\n"
	   "desc e = d with rkey 0xff00000501\n",
     "bad.scn:8:22: 0xff00000501 is too large for an rkey (32 bits): at most 4294967295 "
     "(0xffffffff)"},
    {"a version past 16 bits",
     SETUP "h1: socket -> s\nh1: buffer y 4KiB\nh1: register-rdma s y -> d\n"
	   "desc e = d with version 65536\n",
     "bad.scn:8:25: 65536 is too large for a version (16 bits): at most 65535 (0xffff)"},
    {"a magic past 32 bits",
     SETUP "h1: socket -> s\nh1: buffer y 4KiB\nh1: register-rdma s y -> d\n"
	   "desc e = d with magic 0x100000000\n",
     "bad.scn:8:23: 0x100000000 is too large for a magic (32 bits): at most 4294967295 "
     "(0xffffffff)"},
    {"a NUL escape", "title \"a\\x00b\"\n",
     "bad.scn:1:9: \\x00: a NUL byte is not allowed in a string (a string is C text); use "
     "\\x01..\\xff"},
    {"a link latency past the fabric's", SETUP "link a -> b latency 86400s\n",
     "bad.scn:5:21: latency 86400s: a link's times are at most 10000ms"},
    {"a TPT past its largest", "nic a 198.18.0.1 tpt-capacity 16777216\n",
     "bad.scn:1:31: 16777216 is too large for the TPT's capacity: at most 16777215 "
     "(0xffffff)"},
    {"refusal since no mark", SETUP "expect refusal a reason stale-key from b since m\n",
     "bad.scn:5:48: 'm' is not defined (a mark is wanted)"},
    {"expect tpt key of a handle",
     SETUP "h1: socket -> s\nh1: buffer y 4KiB\nh1: register s y -> hy\n"
	   "expect tpt a key hy valid\n",
     "bad.scn:8:18: 'expect tpt a key hy': 'hy' is a handle, whose key only the provider "
     "knows; name a descriptor (register-rdma ... -> D), or count entries: 'expect tpt a "
     "entries CMP of HOST'"},
};

static void test_bad_scripts(void)
{
	struct scn_script *s;
	size_t i, len;

	for (i = 0; i < ARRAY_SIZE(bads); i++) {
		/* The texts may hold a NUL byte: their length is sizeof's. */
		len = strlen(bads[i].text);
		if (!strcmp(bads[i].what, "binary file"))
			len = sizeof("nic a 198.18.0.1\nab\0cd\n") - 1;
		write_file("bad.scn", bads[i].text, len);
		s = NULL;
		printf("\n  %s:", bads[i].what);
		NST_EQ(parse_check("bad.scn", NULL, &s), -EINVAL);
		NST_TRUE(s == NULL);
		NST_REQUIRE(diag.n >= 1);
		NST_CHECK_(str_eq(diag.msg[0].text, bads[i].msg, bads[i].what, __LINE__), CU_FALSE,
			   "%s", bads[i].what);
		scn_script_free(s);
	}
}

/* A /ERE/ regcomp refuses is an error of the script, with regcomp's reason
 * (the C library's words, so the test asks it for them). */
static void test_bad_regex(void)
{
	static const char text[] = SETUP "program p on a \"true\"\nstart p\nexpect p output /[/\n";
	char why[128], want[256];
	struct scn_script *s = NULL;
	regex_t re;
	int rc = regcomp(&re, "[", REG_EXTENDED | REG_NOSUB);

	NST_REQUIRE(rc != 0);
	regerror(rc, &re, why, sizeof(why));
	snprintf(want, sizeof(want),
		 "bad.scn:7:1: /[/ is not a valid extended regular expression: %s", why);
	write_file("bad.scn", text, strlen(text));
	NST_EQ(parse_check("bad.scn", NULL, &s), -EINVAL);
	NST_REQUIRE(diag.n >= 1);
	STR_EQ(diag.msg[0].text, want);
	scn_script_free(s);
}

/* A regex may hold a backslash and a digit as a bracket's members: only
 * \1 to \9 outside brackets are back-references. */
static void test_regex_brackets(void)
{
	static const char text[] =
	    SETUP "program p on a \"true\"\nstart p\n"
		  "wait p output /[\\1]x[]\\2][[:digit:]\\3]\\\\4(a{1,15}){17}[{]{9}/\n";
	struct scn_script *s = NULL;

	write_file("re.scn", text, strlen(text));
	NST_REQUIRE_EQ(parse_check("re.scn", NULL, &s), 0);
	STR_EQ(s->stmts[6].u.output.text, "[\\1]x[]\\2][[:digit:]\\3]\\\\4(a{1,15}){17}[{]{9}");
	scn_script_free(s);
}

/* An unquoted parameter value is the rest of the line as written: a '/'
 * in it starts no regex, and a '#' still starts a comment. */
static void test_param_rest_of_line(void)
{
	struct scn_script *s = NULL;

	put("pv.scn", "param A = /tmp\n"
		      "param B = a/b\n"
		      "param C = ./x.sh --to 1.2 # a comment\n"
		      "param D = \"quoted # kept\"\n"
		      "param E =   64KiB   \n"
		      "param F = x \\\n"
		      "  /y\n"
		      "nic a 198.18.0.1\n"
		      "program p on a \"${A} ${B} ${C} ${D} ${E} ${F}\"\n");
	NST_REQUIRE_EQ(parse_check("pv.scn", NULL, &s), 0);
	NST_REQUIRE_EQ(s->nparams, 6);
	STR_EQ(s->params[0]->u.param.value, "/tmp");
	STR_EQ(s->params[1]->u.param.value, "a/b");
	STR_EQ(s->params[2]->u.param.value, "./x.sh --to 1.2");
	STR_EQ(s->params[3]->u.param.value, "quoted # kept");
	STR_EQ(s->params[4]->u.param.value, "64KiB");
	STR_EQ(s->params[5]->u.param.value, "x   /y");
	STR_EQ(s->programs[0]->u.program.command,
	       "/tmp a/b ./x.sh --to 1.2 quoted # kept 64KiB x   /y");
	scn_script_free(s);
}

/* A UTF-8 byte order mark first in a file is skipped; columns count from
 * the text after it. */
static void test_bom(void)
{
	static const char text[] = "\xef\xbb\xbfnic a 10.0.0.1\n";
	struct scn_script *s = NULL;

	write_file("bom.scn", text, strlen(text));
	NST_EQ(parse_check("bom.scn", NULL, &s), -EINVAL);
	NST_REQUIRE(diag.n >= 1);
	STR_EQ(diag.msg[0].text, "bom.scn:1:7: 10.0.0.1: not a NIC address: nicsim NICs take "
				 "198.18.0.1 to 198.19.255.254 (198.18.0.0/15)");
	put("bom2.scn", "nic a 198.18.0.1 \xef\xbb\xbf\n");
	NST_EQ(parse_check("bom2.scn", NULL, &s), -EINVAL);
	NST_REQUIRE(diag.n >= 1);
	STR_EQ(diag.msg[0].text, "bom2.scn:1:18: a byte order mark (U+FEFF) in the middle of "
				 "the text: delete it");
}

/* More NICs than the fabric has port slots is found by check. */
static void test_too_many_nics(void)
{
	char text[64 * (FAB_DEFAULT_PORTS + 1)], want[160];
	struct scn_script *s = NULL;
	size_t used = 0;
	unsigned i;

	for (i = 1; i <= FAB_DEFAULT_PORTS; i++)
		used += (size_t)snprintf(text + used, sizeof(text) - used, "nic n%u 198.18.0.%u\n",
					 i, i);
	put("nics.scn", text);
	NST_REQUIRE_EQ(parse_check("nics.scn", NULL, &s), 0);
	scn_script_free(s);
	s = NULL;
	snprintf(text + used, sizeof(text) - used, "nic n%u 198.18.1.1\n", i);
	put("nics.scn", text);
	NST_EQ(parse_check("nics.scn", NULL, &s), -EINVAL);
	NST_REQUIRE(diag.n >= 1);
	snprintf(want, sizeof(want),
		 "nics.scn:%u:1: NIC 'n%u' is NIC number %u: a scenario has at most %u NICs "
		 "(the fabric's port slots); split it in two",
		 i, i, i, FAB_DEFAULT_PORTS);
	STR_EQ(diag.msg[0].text, want);
}

/* Files that include each other over and over, with no statement in them,
 * stop at the include limit, at once. */
static void test_include_fan_out(void)
{
	char text[32 * 100 + 1], name[32];
	struct scn_script *s = NULL;
	size_t used;
	int level, k;

	put("fan0.inc", "# nothing\n");
	for (level = 1; level <= 5; level++) {
		used = 0;
		for (k = 0; k < 100; k++)
			used += (size_t)snprintf(text + used, sizeof(text) - used,
						 "include \"fan%d.inc\"\n", level - 1);
		snprintf(name, sizeof(name), "fan%d.inc", level);
		put(name, text);
	}
	put("fan.scn", "nic a 198.18.0.1\ninclude \"fan5.inc\"\n");
	NST_EQ(parse_check("fan.scn", NULL, &s), -EINVAL);
	NST_EQ(diag.errors, 1);
	NST_REQUIRE(diag.n >= 1);
	/* The 1001st include read: 4 on the way down to fan2, then each of
	 * fan2's lines 101 (its own and fan1's 100): 997 = 9 * 101 + 88, the
	 * 87th of fan1's includes after fan2's tenth. */
	STR_EQ(diag.msg[0].text,
	       "fan1.inc:87:1: more than 1000 includes in one scenario (a file included twice "
	       "counts twice, with every include in it): include each file once, at the top "
	       "level");
}

static void test_include_cycle_and_depth(void)
{
	struct scn_script *s = NULL;
	char name[32], text[64];
	int i;

	put("cyc-a.scn", "nic a 198.18.0.1\ninclude \"cyc-b.scn\"\n");
	put("cyc-b.scn", "include \"cyc-a.scn\"\n");
	NST_EQ(parse_check("cyc-a.scn", NULL, &s), -EINVAL);
	NST_EQ(diag.errors, 1);
	STR_EQ(diag.msg[0].text, "cyc-b.scn:1:9: include cycle: \"cyc-a.scn\" is being read "
				 "already (it includes this file)");

	/* 17 nested includes: the 17th is refused, the 16th is fine. */
	for (i = 0; i < 17; i++) {
		snprintf(name, sizeof(name), "deep%d.scn", i);
		snprintf(text, sizeof(text), "include \"deep%d.scn\"\n", i + 1);
		put(name, text);
	}
	put("deep17.scn", "nic a 198.18.0.1\n");
	NST_EQ(parse_check("deep0.scn", NULL, &s), -EINVAL);
	NST_EQ(diag.errors, 1);
	STR_EQ(diag.msg[0].text, "deep16.scn:1:1: includes nested deeper than 16");
	NST_REQUIRE_EQ(parse_check("deep1.scn", NULL, &s), 0);
	NST_EQ(s->nstmts, 1);
	NST_EQ(s->nfiles, 17);
	STR_EQ(s->stmts[0].loc.file, "deep17.scn");
	scn_script_free(s);

	/* A FIFO would block a reader: only regular files are read. */
	NST_REQUIRE(mkfifo("fifo.scn", 0600) == 0 || errno == EEXIST);
	put("incfifo.scn", "include \"fifo.scn\"\n");
	NST_EQ(parse_check("incfifo.scn", NULL, &s), -EINVAL);
	STR_EQ(diag.msg[0].text,
	       "incfifo.scn:1:9: cannot include \"fifo.scn\": not a regular file");
	NST_EQ(parse_check("fifo.scn", NULL, &s), -EINVAL);
	STR_EQ(diag.msg[0].text, "fifo.scn: cannot read: not a regular file");

	/* A file of /proc shows size 0 but reads text: it is refused, not
	 * included as empty. */
	put("incproc.scn", "include \"/proc/self/status\"\n");
	NST_EQ(parse_check("incproc.scn", NULL, &s), -EINVAL);
	STR_EQ(diag.msg[0].text,
	       "incproc.scn:1:9: cannot include \"/proc/self/status\": not a regular file on a "
	       "regular filesystem (a file of /proc or /sys shows a size that is not its "
	       "length): copy it to a file first");
	NST_EQ(parse_check("/proc/self/status", NULL, &s), -ESPIPE);
	STR_EQ(diag.msg[0].text,
	       "/proc/self/status: cannot read: not a regular file on a regular filesystem (a "
	       "file of /proc or /sys shows a size that is not its length): copy it to a file "
	       "first");

	/* An include from a subdirectory is relative to the including file. */
	NST_REQUIRE(mkdir("sub", 0700) == 0 || errno == EEXIST);
	put("sub/inner.scn", "nic a 198.18.0.1\n");
	put("sub/outer.scn", "include \"inner.scn\"\n");
	NST_REQUIRE_EQ(parse_check("sub/outer.scn", NULL, &s), 0);
	STR_EQ(s->stmts[0].loc.file, "sub/inner.scn");
	scn_script_free(s);
}

/* wait counter takes delta [from MARK] as expect counter does. */
static void test_wait_counter_delta(void)
{
	struct scn_script *s = NULL;
	const struct scn_counter *k;

	put("wcd.scn", SETUP "mark m\n"
			     "wait counter a.retransmits delta >= 1 within 2s\n"
			     "wait counter b.tx_frames delta from m in 2..5\n");
	NST_REQUIRE_EQ(parse_check("wcd.scn", NULL, &s), 0);
	NST_REQUIRE_EQ(s->nstmts, 7);
	k = &s->stmts[5].u.counter;
	NST_EQ(s->stmts[5].kind, SCN_WAIT_COUNTER);
	NST_TRUE(k->delta);
	STR_EQ(k->mark, "");
	STR_EQ(k->counter, "retransmits");
	NST_EQ(k->cmp.op, SCN_CMP_GE);
	NST_EQ_U(k->cmp.a, 1);
	NST_EQ_U(s->stmts[5].within_ns, 2000000000ull);
	k = &s->stmts[6].u.counter;
	NST_EQ(s->stmts[6].kind, SCN_WAIT_COUNTER);
	NST_TRUE(k->delta);
	STR_EQ(k->mark, "m");
	NST_EQ(k->cmp.op, SCN_CMP_IN);
	NST_EQ_U(k->cmp.b, 5);
	scn_script_free(s);

	/* The mark is taken before the wait, or the wait has no base. */
	put("wcd.scn", SETUP "wait counter a.retransmits delta from m >= 1\nmark m\n");
	NST_EQ(parse_check("wcd.scn", NULL, &s), -EINVAL);
	NST_REQUIRE(diag.n >= 1);
	STR_EQ(diag.msg[0].text, "wcd.scn:5:39: 'm' is used before it is defined (line 6)");
	put("wcd.scn", SETUP "wait counter a.retransmits delta from h1 >= 1\n");
	NST_EQ(parse_check("wcd.scn", NULL, &s), -EINVAL);
	NST_REQUIRE(diag.n >= 1);
	STR_EQ(diag.msg[0].text, "wcd.scn:5:39: 'h1' is a host (line 3), not a mark");
}

/* Messages about names used in an included file name that file and line,
 * and a line of another file by its file too. */
static void test_include_names(void)
{
	struct scn_script *s = NULL;

	put("names.inc", "h1: close x\n"
			 "h1: close s\n"
			 "h1: socket -> s\n"
			 "fault f a -> b loss 1% at +1ms optional\n");
	put("names.scn", "# The names an included file uses.\n"
			 "nic a 198.18.0.1\n"
			 "nic b 198.18.0.2\n"
			 "host h1 on a\n"
			 "h1: buffer x 4KiB\n"
			 "include \"names.inc\"\n"
			 "h1: buffer y 4KiB\n"
			 "h1: close f\n");
	NST_EQ(parse_check("names.scn", NULL, &s), -EINVAL);
	NST_REQUIRE_EQ(diag.n, 4);
	STR_EQ(diag.msg[0].text, "names.inc:1:11: 'x' is a buffer (names.scn:5), not a socket");
	STR_EQ(diag.msg[1].text, "names.inc:2:11: 's' is used before it is defined (line 3)");
	STR_EQ(diag.msg[2].text, "names.inc:4:1: warning: fault 'f' starts at a time: timing "
				 "depends on the machine; prefer 'after NAME' (an event)");
	STR_EQ(diag.msg[3].text, "names.scn:8:11: 'f' is a fault (names.inc:4), not a socket");
	scn_script_free(s);
}

/* A 10 MB line is refused in linear time, and the lines after it parse. */
static void test_long_line(void)
{
	size_t len = 10u << 20;
	char *text = malloc(len + 64);
	struct scn_script *s = NULL;
	uint64_t t0;

	NST_REQUIRE(text != NULL);
	memset(text, 'a', len);
	memcpy(text + len, "\nseed x\n", 8);
	write_file("long.scn", text, len + 8);
	free(text);
	t0 = nst_now_ns();
	NST_EQ(parse_check("long.scn", NULL, &s), -EINVAL);
	/* Linear: well under a second; a quadratic scan would take hours. */
	NST_LT(nst_now_ns() - t0, 10000000000ull);
	NST_EQ(diag.errors, 2);
	STR_EQ(diag.msg[0].text,
	       "long.scn:1:4097: line longer than 4096 bytes; split it with a trailing '\\'");
	STR_EQ(diag.msg[1].text, "long.scn:2:6: expected a seed, found 'x'");
}

/* Errors are collected up to SCN_DIAG_MAX, the rest counted. */
static void test_many_errors(void)
{
	char *text = malloc(100 * 16 + 1), *p = text;
	struct scn_script *s = NULL;
	int i;

	NST_REQUIRE(text != NULL);
	for (i = 0; i < 100; i++)
		p += sprintf(p, "bogus %d\n", i);
	put("many.scn", text);
	free(text);
	NST_EQ(parse_check("many.scn", NULL, &s), -EINVAL);
	NST_EQ(diag.n, SCN_DIAG_MAX);
	NST_EQ(diag.errors, 100); /* every line is read, the messages past the limit counted */
	NST_EQ(diag.dropped, 100 - SCN_DIAG_MAX);
	STR_EQ(diag.msg[49].text, "many.scn:50:1: unknown statement 'bogus'");
}

static void test_empty_and_comments(void)
{
	struct scn_script *s = NULL;

	put("empty.scn", "");
	NST_REQUIRE_EQ(parse_check("empty.scn", NULL, &s), 0);
	NST_EQ(s->nstmts, 0);
	NST_EQ(diag.warnings, 1);
	STR_EQ(diag.msg[0].text, "empty.scn: warning: empty scenario: it does nothing");
	scn_script_free(s);

	put("comments.scn", "\n   # the intent # with a hash\r\n\t\n# more\ntitle \"#no\" # yes\n"
			    "# a comment ending in a backslash does not continue \\\n"
			    "seed \"/#\\\n"
			    "\" 3\n");
	NST_EQ(parse_check("comments.scn", NULL, &s), -EINVAL);
	/* The string joined with the line after it; the comment did not. */
	STR_EQ(diag.msg[0].text, "comments.scn:7:6: expected a seed, found \"/#\"");
	put("comments.scn", "\n   # the intent # with a hash\r\n\t\n# more\ntitle \"#no\" # yes\n");
	NST_REQUIRE_EQ(parse_check("comments.scn", NULL, &s), 0);
	NST_EQ(s->nstmts, 1);
	STR_EQ(s->title, "#no");
	scn_script_free(s);
}

/* From memory, includes refused; any bytes are an error or a script. */
/* The switch's calls and the expectations on its stream sockets. */
static void test_stream_statements(void)
{
	static const char text[] = SETUP "h1: stream-socket -> s\n"
					 "h1: stream-bind s a 7000\n"
					 "h1: stream-listen s 4 path write\n"
					 "h1: stream-accept s -> c &\n"
					 "h2: stream-socket -> t\n"
					 "h2: stream-bind t b 0\n"
					 "h2: stream-connect t a 7000 path read -> k\n"
					 "wait c\n"
					 "h2: buffer y 4MiB fill seq 3\n"
					 "h2: stream-send t y -> w &\n"
					 "h1: buffer x 4MiB\n"
					 "h1: stream-recv c x[0..1MiB]\n"
					 "h1: stream-recv c x[1MiB..] -> r = eof\n"
					 "wait w = ECONNRESET\n"
					 "h2: stream-send t y = ENOBUFS\n"
					 "h2: stream-shutdown t both\n"
					 "h2: stream-close t\n"
					 "expect stream t path read\n"
					 "expect stream c path in write\n"
					 "expect stream t large_sends >= 1\n";
	const struct scn_stmt *st;
	struct scn_script *s = NULL;
	size_t i = 0;

	put("stream.scn", text);
	NST_REQUIRE_EQ(parse_check("stream.scn", NULL, &s), 0);
	NST_EQ(diag.errors, 0);
	for (int k = 0; k < 4; k++)
		next(s, &i, k < 2 ? SCN_NIC : SCN_HOST);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_STREAM_SOCKET);
	STR_EQ(st->name, "s");
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_STREAM_BIND);
	STR_EQ(st->u.call.nic, "a");
	NST_EQ(st->u.call.port, 7000);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_STREAM_LISTEN);
	NST_EQ(st->u.call.backlog, 4);
	NST_EQ(st->u.call.path, SCN_PATH_WRITE);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_STREAM_ACCEPT);
	NST_TRUE(st->async);
	next(s, &i, SCN_CALL);
	next(s, &i, SCN_CALL);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_STREAM_CONNECT);
	NST_EQ(st->u.call.path, SCN_PATH_READ);
	STR_EQ(st->name, "k");
	next(s, &i, SCN_WAIT_OP);
	next(s, &i, SCN_CALL);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_STREAM_SEND);
	STR_EQ(st->u.call.local.name, "y");
	next(s, &i, SCN_CALL);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_STREAM_RECV);
	NST_EQ(st->u.call.local.form, SCN_RANGE_SPAN);
	NST_EQ_U(st->u.call.local.end, 1u << 20);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->result.kind, SCN_RES_EOF);
	st = next(s, &i, SCN_WAIT_OP);
	NST_EQ(st->result.kind, SCN_RES_ERRNO);
	NST_EQ(st->result.code, ECONNRESET);
	STR_EQ(st->result.name, "ECONNRESET");
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->result.code, ENOBUFS);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_STREAM_SHUTDOWN);
	NST_EQ(st->u.call.how, SCN_SHUT_BOTH);
	st = next(s, &i, SCN_CALL);
	NST_EQ(st->u.call.verb, SCN_V_STREAM_CLOSE);
	st = next(s, &i, SCN_EXPECT_STREAM);
	STR_EQ(st->u.stream.sock, "t");
	NST_TRUE(st->u.stream.path && st->u.stream.in && st->u.stream.out);
	NST_EQ(st->u.stream.want, SCN_PATH_READ);
	st = next(s, &i, SCN_EXPECT_STREAM);
	NST_TRUE(st->u.stream.in && !st->u.stream.out);
	NST_EQ(st->u.stream.want, SCN_PATH_WRITE);
	st = next(s, &i, SCN_EXPECT_STREAM);
	NST_TRUE(!st->u.stream.path);
	STR_EQ(st->u.stream.stat, "large_sends");
	NST_EQ(st->u.stream.cmp.op, SCN_CMP_GE);
	NST_EQ_U(st->u.stream.cmp.a, 1);
	NST_EQ(i, s->nstmts);
	scn_script_free(s);
}

static void test_buffer(void)
{
	static const char inc[] = "include \"x.scn\"\n";
	struct scn_script *s = NULL;
	unsigned char bytes[512];
	uint64_t seed = 1;
	size_t i, k;

	scn_diag_init(&diag);
	NST_EQ(scn_parse_buffer("mem.scn", inc, sizeof(inc) - 1, NULL, SCN_PARSE_NO_INCLUDE, &s,
				&diag),
	       -EINVAL);
	STR_EQ(diag.msg[0].text, "mem.scn:1:1: include is not allowed here");
	for (k = 0; k < 200; k++) {
		for (i = 0; i < sizeof(bytes); i++)
			bytes[i] = (unsigned char)" \n\\\"#$:{}[]-><&=.0123456789abcnxh"
			    [nst_splitmix64(&seed) % 33];
		scn_diag_init(&diag);
		s = NULL;
		if (scn_parse_buffer("mem.scn", bytes, sizeof(bytes), NULL, SCN_PARSE_NO_INCLUDE,
				     &s, &diag) == 0) {
			scn_check(s, &diag);
			scn_script_free(s);
		}
	}
}

static void test_find_files(void)
{
	const char *paths[] = {"tree", "every.scn"};
	struct scn_files f;
	size_t i;

	NST_REQUIRE(mkdir("tree", 0700) == 0 || errno == EEXIST);
	NST_REQUIRE(mkdir("tree/b", 0700) == 0 || errno == EEXIST);
	NST_REQUIRE(mkdir("tree/a", 0700) == 0 || errno == EEXIST);
	put("tree/z.scn", "");
	put("tree/b/2.scn", "");
	put("tree/b/1.scn", "");
	put("tree/a/notes.txt", "");
	put("tree/a/0.scn", "");
	scn_diag_init(&diag);
	NST_REQUIRE_EQ(scn_find_files(paths, 2, &f, &diag), 0);
	NST_REQUIRE_EQ(f.n, 5);
	{
		static const char *const want[] = {"tree/a/0.scn", "tree/b/1.scn", "tree/b/2.scn",
						   "tree/z.scn", "every.scn"};

		for (i = 0; i < 5; i++)
			STR_EQ(f.path[i], want[i]);
	}
	scn_files_free(&f);
	paths[0] = "missing";
	NST_EQ(scn_find_files(paths, 1, &f, &diag), -ENOENT);
	STR_EQ(diag.msg[0].text, "missing: No such file or directory");
	scn_files_free(&f);
}

/* The parser's patterns are the generator's (scn_pattern.h), the one the
 * host agent fills buffers with: seq 7 names 7 in the high half of each
 * 8-byte word. */
static void test_patterns(void)
{
	struct scn_pattern seq = {SCN_PATTERN_SEQ, 7};
	uint8_t b[16];
	int code = 0;

	scn_pattern_fill(&seq, 0, b, sizeof(b));
	NST_EQ(b[4], 7);
	NST_EQ(b[8], 1);
	NST_EQ(b[0], 0);
	STR_EQ(scn_pattern_name(SCN_PATTERN_SEQ), "seq");

	NST_EQ(scn_wsa_parse("WSAECONNRESET", &code), 0);
	NST_EQ(code, 10054);
	STR_EQ(scn_wsa_name(10022), "WSAEINVAL");
	NST_TRUE(scn_wsa_name(1) == NULL);
	NST_EQ(scn_wsa_parse("EINVAL", &code), -EINVAL);
}

static int init(void)
{
	return nst_suite_dir(tmp, sizeof(tmp), "scn", NST_TMP_CWD);
}

static int clean(void)
{
	return nst_suite_dir_done(tmp);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"every statement", test_every_statement},
	    {"parameters", test_params},
	    {"numbers and units", test_numbers},
	    {"bad scripts", test_bad_scripts},
	    {"include cycle and depth", test_include_cycle_and_depth},
	    {"names used in an included file", test_include_names},
	    {"wait counter delta", test_wait_counter_delta},
	    {"${SEED} is the run's seed", test_seed_param},
	    {"${RUN_DIR} replaced", test_subst_run_dir},
	    {"a parameter's value limit", test_param_limit},
	    {"a bad regular expression", test_bad_regex},
	    {"a regex's brackets", test_regex_brackets},
	    {"a parameter's value is the rest of the line", test_param_rest_of_line},
	    {"a byte order mark", test_bom},
	    {"too many NICs", test_too_many_nics},
	    {"include fan-out", test_include_fan_out},
	    {"a 10 MB line", test_long_line},
	    {"many errors", test_many_errors},
	    {"empty file and comments", test_empty_and_comments},
	    {"from memory", test_buffer},
	    {"stream statements", test_stream_statements},
	    {"files of a directory", test_find_files},
	    {"patterns and WSA codes", test_patterns},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "scn_parse", tests, init, clean);
}
