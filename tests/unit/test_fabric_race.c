/*
 * The fabric against a process that races it.  Every process that can open
 * fabric.shm can write any byte of it at any moment, also between two reads
 * a port makes of the same field.  Here a second process maps the segment
 * and keeps flipping what the ports read (frame metadata, ring entries, ring
 * indices, pending bits, link configurations, the sender's link state,
 * holder words, frame headers, the capture's switch, ring positions and
 * records) between the value that passes the checks and one that does not,
 * while one port sends and another receives, decodes and captures.  A field
 * read twice, checked in one read and used in the other, is then used
 * unchecked sooner or later; under AddressSanitizer that is a report, and
 * the bounds the sanitizer cannot see (the segment is one mapping) are
 * checked here.  The ports must go on working, their counters must show what
 * they refused, and after the racer stops the fabric must carry frames
 * intact again.
 *
 * The second test races the decoder alone: a frame flips between two valid
 * packets of the same length (different opcodes and PSNs), and every packet
 * the decoder accepts must be one of the two, never a mixture of a header it
 * checked and a header it read again.
 *
 * Both racers are forked processes writing shared mappings, never threads:
 * the races are the point, and ThreadSanitizer is not to see them.  They
 * stop when told (a flag in a shared page), die with the test
 * (PR_SET_PDEATHSIG), and end by themselves after RACER_MAX_MS.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "fab_capture.h"
#include "fab_wire.h"
#include "nstest.h"

#define A_ADDR "198.18.0.1" /* slot 1 */
#define B_ADDR "198.18.0.2" /* slot 2 */
#define A_SLOT 1u
#define B_SLOT 2u
#define MAX_PORTS 8u
#define NFRAMES 1024u
#define QPN 0x000123u
#define PAYLOAD 64u
#define BATCH 32u
#define MIN_ROUNDS 3000u
#define RACE_MS 40000u     /* the longest the ports are raced, waiting for every refusal */
#define RACER_MAX_MS 90000 /* a racer nobody stops ends by itself */
#define STOP_MS 10000
#define MIN_DECODES 20000u
#define MIN_OVERLAPS 64u

static char tmp[256];
static uint32_t a_addr, b_addr;

/* ---- The racers' side ------------------------------------------------------------- */

/* The page a racer shares with the test: the stop flag and what it did. */
struct race_ctl {
	uint32_t stop;
	uint32_t mapped;
	uint64_t actions;
};

/* A racer's end: the test asked it to stop, or it ran too long. */
static bool racer_done(volatile struct race_ctl *ctl, uint64_t deadline)
{
	return ctl->stop || nst_now_ns() > deadline;
}

/* Die with the test, even one killed by a signal. */
static int racer_start(volatile struct race_ctl *ctl, uint64_t seed)
{
	pid_t parent = getppid();

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		return 1;
	(void)ctl;
	(void)seed;
	return 0;
}

/* ---- The test's side --------------------------------------------------------------- */

/* Tell the racer to stop and reap it; kill it if it does not. */
static void racer_stop(volatile struct race_ctl *ctl, pid_t pid)
{
	ctl->stop = 1;
	if (nst_wait(pid, STOP_MS) < 0)
		nst_stop(pid, STOP_MS);
}

/*
 * Run the test and its racer on two different CPUs (when there are two), so
 * that they race rather than take turns on one; *old gets the test's CPUs,
 * for pin_undo.
 */
static void pin_apart(pid_t racer, cpu_set_t *old)
{
	CPU_ZERO(old);
	if (sched_getaffinity(0, sizeof(*old), old) < 0 || CPU_COUNT(old) < 2)
		return;
	nst_pin(racer, 1);
	nst_pin(0, 0);
}

static void pin_undo(const cpu_set_t *old)
{
	if (CPU_COUNT(old) >= 2)
		sched_setaffinity(0, sizeof(*old), old);
}

static uint32_t make_frame(uint8_t *buf, uint32_t src, uint32_t dst, uint8_t opcode, uint32_t psn,
			   uint32_t payload_len, const uint8_t *payload)
{
	struct fab_pkt pkt;
	size_t len = 0;

	NST_REQUIRE_EQ(fab_pkt_init(&pkt, opcode), 0);
	pkt.src_ip = src;
	pkt.dst_ip = dst;
	pkt.udp_sport = fab_udp_sport(QPN);
	pkt.dest_qpn = QPN;
	pkt.psn = psn & FAB_MASK24;
	if (pkt.has_reth) {
		pkt.va = 0x1000;
		pkt.rkey = 0xabcd;
		pkt.dma_len = payload_len;
	}
	pkt.payload = payload;
	pkt.payload_len = payload_len;
	NST_REQUIRE_EQ(fab_pkt_encode(&pkt, buf, FAB_SLOT_BYTES, &len), 0);
	return (uint32_t)len;
}

/* ---- The decoder against a racing writer ----------------------------------------- */

/* The frame the decoder reads and its two versions, shared with the racer. */
struct frame_race {
	struct race_ctl ctl;
	uint32_t len, ndiff;
	uint16_t diff[64]; /* offsets at which the versions differ */
	uint8_t v[2][FAB_SLOT_BYTES];
	uint8_t frame[FAB_SLOT_BYTES];
};

/* Write the differing bytes of one version, then of the other, and so on. */
static int frame_racer(void *arg, int ready_fd)
{
	struct frame_race *fr = arg;
	volatile struct race_ctl *ctl = &fr->ctl;
	volatile uint8_t *frame = fr->frame;
	uint64_t deadline = nst_now_ns() + (uint64_t)RACER_MAX_MS * 1000000u;
	uint32_t k, i;
	char c = 1;

	if (racer_start(ctl, 0x13198a2e03707344ull) || write(ready_fd, &c, 1) != 1)
		return 1;
	for (k = 0; !racer_done(ctl, deadline); k++) {
		for (i = 0; i < fr->ndiff; i++)
			frame[fr->diff[i]] = fr->v[k & 1][fr->diff[i]];
		ctl->actions++;
	}
	return 0;
}

/* The fields of a decoded packet that the headers decide. */
static bool same_pkt(const struct fab_pkt *x, const struct fab_pkt *y)
{
	return x->opcode == y->opcode && x->psn == y->psn && x->dest_qpn == y->dest_qpn &&
	       x->has_reth == y->has_reth && x->va == y->va && x->rkey == y->rkey &&
	       x->dma_len == y->dma_len && x->pad == y->pad && x->payload == y->payload &&
	       x->payload_len == y->payload_len && x->src_ip == y->src_ip && x->dst_ip == y->dst_ip;
}

static void race_decoder(uint32_t payload_len)
{
	struct frame_race *fr;
	struct fab_pkt want[2], got;
	enum fab_wire_err why;
	uint64_t seen[2] = {0, 0}, refused = 0, mixed = 0, decodes = 0, deadline;
	uint8_t reth_payload[FAB_MTU];
	uint32_t len0, len1, i;
	cpu_set_t cpus;
	pid_t pid;

	fr = mmap(NULL, sizeof(*fr), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	NST_REQUIRE(fr != MAP_FAILED);
	/*
	 * Version 0: RDMA WRITE Only (a RETH, then zeros).  Version 1: SEND Only
	 * of the same length whose payload starts with version 0's RETH bytes.
	 * They differ in the opcode, the PSN and the ICRC alone, so a decoder
	 * that read the opcode twice could mix them without noticing.
	 */
	memset(reth_payload, 0, sizeof(reth_payload));
	len0 = make_frame(fr->v[0], a_addr, b_addr, FAB_OP_RDMA_WRITE_ONLY, 100, payload_len,
			  reth_payload);
	memcpy(reth_payload, fr->v[0] + FAB_HDR_BASE, FAB_RETH_LEN);
	len1 = make_frame(fr->v[1], a_addr, b_addr, FAB_OP_SEND_ONLY, 200,
			  payload_len + FAB_RETH_LEN, reth_payload);
	NST_REQUIRE_EQ(len0, len1);
	fr->len = len0;
	for (i = 0; i < fr->len; i++)
		if (fr->v[0][i] != fr->v[1][i] && fr->ndiff < 64)
			fr->diff[fr->ndiff++] = (uint16_t)i;
	NST_REQUIRE(fr->ndiff >= 3 && fr->ndiff <= 8);
	for (i = 0; i < 2; i++) {
		memcpy(fr->frame, fr->v[i], fr->len);
		NST_REQUIRE_EQ(fab_pkt_decode(fr->frame, fr->len, &want[i], &why), 0);
	}
	pid = nst_fork_ready(frame_racer, fr, STOP_MS);
	NST_REQUIRE(pid > 0);
	pin_apart(pid, &cpus);
	/* Until the racer was met often enough: both versions read, and
	 * MIN_OVERLAPS decodes refused because a rewrite fell between their
	 * reads (where a decoder that reads a header twice would mix). */
	deadline = nst_now_ns() + (uint64_t)RACE_MS * 1000000u;
	while ((decodes < MIN_DECODES || !seen[0] || !seen[1] || refused < MIN_OVERLAPS) &&
	       nst_now_ns() < deadline) {
		for (i = 0; i < 64; i++, decodes++) {
			if (fab_pkt_decode(fr->frame, fr->len, &got, &why))
				refused++;
			else if (same_pkt(&got, &want[0]))
				seen[0]++;
			else if (same_pkt(&got, &want[1]))
				seen[1]++;
			else
				mixed++;
		}
	}
	racer_stop(&fr->ctl, pid);
	pin_undo(&cpus);
	printf("\n    %u-byte frames, %llu decodes against %llu rewrites: version 0 %llu, "
	       "version 1 %llu, refused %llu, mixed %llu",
	       fr->len, (unsigned long long)decodes, (unsigned long long)fr->ctl.actions,
	       (unsigned long long)seen[0], (unsigned long long)seen[1],
	       (unsigned long long)refused, (unsigned long long)mixed);
	NST_EQ(mixed, 0);
	/* The racer was met: both versions were read, and torn ones. */
	NST_TRUE(seen[0] > 0);
	NST_TRUE(seen[1] > 0);
	NST_TRUE(refused > 0);
	munmap(fr, sizeof(*fr));
}

static void test_decoder_against_racing_writer_short(void)
{
	race_decoder(16);
}

static void test_decoder_against_racing_writer_long(void)
{
	race_decoder(FAB_MTU - FAB_RETH_LEN);
}

/* ---- Suite ------------------------------------------------------------------------- */

static int suite_init(void)
{
	if (nst_tmpdir(tmp, sizeof(tmp), "fabrace"))
		return -1;
	fab_addr_parse(A_ADDR, &a_addr);
	fab_addr_parse(B_ADDR, &b_addr);
	return 0;
}

static int suite_clean(void)
{
	nst_done_with_dir(tmp);
	return 0;
}

static const struct nst_test tests[] = {
    {"decoder_against_racing_writer_short", test_decoder_against_racing_writer_short},
    {"decoder_against_racing_writer_long", test_decoder_against_racing_writer_long},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return nst_main(argc, argv, "fabric_race", tests, suite_init, suite_clean);
}
