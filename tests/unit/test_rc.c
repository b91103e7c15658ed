/*
 * The RC transport engine (nicsim/rc.c), two of them joined by a simulated
 * link: every packet is encoded to a RoCEv2 frame with the wire codec and
 * decoded again on arrival, through a link with latency, loss, duplication,
 * reordering and corruption drawn from a seeded generator.  Each side has a
 * real TPT; memory is this process's.  Time is simulated, so the tests are
 * exact and fast.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fab_wire.h"
#include "nstest.h"
#include "rc.h"
#include "rc_tpt.h"
#include "tpt.h"

#define PAGE 4096u
#define MAXQ 8192u
#define NCQE 4096u

struct frame {
	uint64_t due;
	bool corrupt;
	size_t len;
	uint8_t data[FAB_FRAME_MAX];
};

struct link {
	struct frame *q[MAXQ];
	uint32_t n;
	uint32_t loss_ppm, dup_ppm, reorder_ppm, corrupt_ppm;
	uint64_t latency;
	bool no_frames; /* xmit answers -ENOBUFS, as a NIC with an exhausted pool */
	uint64_t sent, dropped, corrupted, bad_decodes, missed_corruptions;
};

struct side {
	struct rc rc;
	struct tpt *tpt;
	struct tpt_owner owner;
	struct link *out;
	struct nic_recv_wqe rq[256];
	uint32_t rq_head, rq_tail;
	struct nic_cqe cqe[NCQE];
	uint32_t ncqe;
	uint16_t error;
	bool errored;
	uint32_t max_outstanding;
	/* rc_xmit_run as xmit saw it: the run in progress (its memory and the
	 * packets it still promised), the longest, and promises broken. */
	const struct rc_mem *run_mem;
	uint32_t run_left, run_max, run_broken;
};

static struct side A, B;
static struct link ab, ba;
static uint64_t now_ns;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static bool chance(uint32_t ppm)
{
	return ppm && rnd() % 1000000u < ppm;
}

/* ---- rc_ops for one side -------------------------------------------------- */

static void gather(const struct rc_mem *m, uint64_t off, uint8_t *dst, size_t len)
{
	for (uint32_t i = 0; i < m->nseg && len; i++) {
		uint64_t n;

		if (off >= m->seg[i].len) {
			off -= m->seg[i].len;
			continue;
		}
		n = m->seg[i].len - off < len ? m->seg[i].len - off : len;
		memcpy(dst, (const void *)(uintptr_t)(m->seg[i].va + off), n);
		dst += n;
		len -= n;
		off = 0;
	}
}

static void link_push(struct link *l, const struct frame *f)
{
	struct frame *c;

	if (l->n >= MAXQ)
		return;
	c = malloc(sizeof(*c));
	*c = *f;
	if (chance(l->reorder_ppm))
		c->due += l->latency * 3 + rnd() % 5000;
	l->q[l->n++] = c;
}

static int op_xmit(void *arg, struct fab_pkt *pkt, const struct rc_mem *mem, uint64_t off)
{
	struct side *s = arg;
	struct link *l = s->out;
	struct frame f;
	size_t hdr = fab_pkt_hdr_len(pkt->opcode);

	NST_REQUIRE(hdr > 0);
	if (l->no_frames) {
		s->run_left = 0; /* a run may stop short when frames run out */
		return -ENOBUFS;
	}
	if (mem) {
		uint32_t run = rc_xmit_run(&s->rc, mem);

		/* A run goes on with one packet fewer to come, or a new one
		 * starts where the last was kept in full. */
		if (s->run_left ? mem != s->run_mem || run != s->run_left : run == 0)
			s->run_broken++;
		s->run_mem = mem;
		s->run_left = run ? run - 1 : 0;
		if (run > s->run_max)
			s->run_max = run;
		gather(mem, off, f.data + hdr, pkt->payload_len);
	}
	pkt->payload = NULL;
	NST_REQUIRE_EQ(fab_pkt_encode(pkt, f.data, sizeof(f.data), &f.len), 0);
	f.due = now_ns + l->latency;
	f.corrupt = false;
	l->sent++;
	if (l->loss_ppm >= 1000000u || chance(l->loss_ppm)) {
		l->dropped++;
		return 0;
	}
	if (chance(l->corrupt_ppm)) {
		f.data[hdr + rnd() % (f.len - hdr)] ^= (uint8_t)(1u << (rnd() % 8));
		f.corrupt = true;
		l->corrupted++;
	}
	link_push(l, &f);
	if (chance(l->dup_ppm))
		link_push(l, &f);
	return 0;
}

static int op_place(void *arg, const struct rc_mem *m, uint64_t off, const void *buf, size_t len)
{
	const uint8_t *src = buf;

	(void)arg;
	for (uint32_t i = 0; i < m->nseg && len; i++) {
		uint64_t n;

		if (off >= m->seg[i].len) {
			off -= m->seg[i].len;
			continue;
		}
		n = m->seg[i].len - off < len ? m->seg[i].len - off : len;
		memcpy((void *)(uintptr_t)(m->seg[i].va + off), src, n);
		src += n;
		len -= n;
		off = 0;
	}
	return len ? -EFAULT : 0;
}

static void op_release(void *arg, struct rc_mem *m)
{
	rc_tpt_release(((struct side *)arg)->tpt, m, NULL, NULL);
}

static int op_check_local(void *arg, const struct nic_sge *sge, uint32_t n, bool write,
			  struct rc_mem *m, enum nic_tpt_reason *why)
{
	struct side *s = arg;

	return rc_tpt_local(s->tpt, &s->owner, sge, n, write, m, why);
}

static int op_check_remote(void *arg, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
			   struct rc_mem *m, enum nic_tpt_reason *why)
{
	struct side *s = arg;

	return rc_tpt_remote(s->tpt, &s->owner, s->rc.qpn, rkey, va, len, access, m, why);
}

static void op_complete(void *arg, const struct nic_cqe *cqe)
{
	struct side *s = arg;

	NST_REQUIRE(s->ncqe < NCQE);
	s->cqe[s->ncqe++] = *cqe;
}

static int op_take_recv(void *arg, struct nic_recv_wqe *w)
{
	struct side *s = arg;

	if (s->rq_head == s->rq_tail)
		return -EAGAIN;
	*w = s->rq[s->rq_head++ % 256];
	return 0;
}

static void op_error(void *arg, uint16_t status)
{
	struct side *s = arg;

	s->errored = true;
	s->error = status;
}

static const struct rc_ops ops_template = {
    .xmit = op_xmit,
    .place = op_place,
    .check_local = op_check_local,
    .check_remote = op_check_remote,
    .release = op_release,
    .complete = op_complete,
    .take_recv = op_take_recv,
    .error = op_error,
};

/* ---- Harness -------------------------------------------------------------- */

static void link_clear(struct link *l)
{
	for (uint32_t i = 0; i < l->n; i++)
		free(l->q[i]);
	memset(l, 0, sizeof(*l));
	l->latency = 2000;
}

static void setup_with(const struct rc_config *cfg)
{
	struct rc_ops o = ops_template;

	for (int i = 0; i < 2; i++) {
		struct side *s = i ? &B : &A;

		tpt_destroy(s->tpt);
		memset(s, 0, sizeof(*s));
		NST_REQUIRE_EQ(tpt_create(&s->tpt, 1024, PAGE), 0);
		s->owner =
		    (struct tpt_owner){.ctx_id = 1u + (uint32_t)i, .pid = 100u + (uint32_t)i};
	}
	link_clear(&ab);
	link_clear(&ba);
	A.out = &ab;
	B.out = &ba;
	now_ns = 1000000;
	o.arg = &A;
	rc_init(&A.rc, cfg, &o, 0x1002, 0x2003, 0x010012c6, 0x020012c6, 100, 5000);
	o.arg = &B;
	rc_init(&B.rc, cfg, &o, 0x2003, 0x1002, 0x020012c6, 0x010012c6, 5000, 100);
}

static void setup(void)
{
	struct rc_config cfg;

	rc_config_default(&cfg);
	setup_with(&cfg);
}

static uint32_t reg(struct side *s, void *buf, size_t len, uint32_t access)
{
	uint32_t key;

	NST_REQUIRE_EQ(tpt_reg_mr(s->tpt, &s->owner, (uintptr_t)buf, len, access, &key), 0);
	return key;
}

/* A window over buf for the peer, bound to this side's QP. */
static uint32_t expose(struct side *s, void *buf, size_t len, uint32_t remote)
{
	uint32_t mr = reg(s, buf, len, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_MW_BIND), mw, key;

	NST_REQUIRE_EQ(tpt_alloc_mw(s->tpt, &s->owner, &mw), 0);
	NST_REQUIRE_EQ(
	    tpt_bind_mw(s->tpt, &s->owner, mw, mr, (uintptr_t)buf, len, remote, s->rc.qpn, &key),
	    0);
	return key;
}

static void post_recv(struct side *s, uint64_t id, void *buf, uint32_t len, uint32_t lkey)
{
	struct nic_recv_wqe w = {.wr_id = id, .num_sge = 1};

	w.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = len, .lkey = lkey};
	s->rq[s->rq_tail++ % 256] = w;
}

static int post(struct side *s, uint64_t id, uint8_t op, void *buf, uint32_t len, uint32_t lkey,
		uint64_t rva, uint32_t rkey)
{
	struct nic_send_wqe w = {
	    .wr_id = id, .opcode = op, .num_sge = 1, .imm = 0xabcd0000u + (uint32_t)id};

	w.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = len, .lkey = lkey};
	w.remote_va = rva;
	w.rkey = rkey;
	return rc_post_send(&s->rc, &w);
}

/* After a call of s's engine: every packet its runs promised was sent. */
static void run_end(struct side *s)
{
	if (s->run_left)
		s->run_broken++;
	s->run_left = 0;
}

/* Deliver what is due on a link to side s, in order of due time (frames due
 * at the same time in the order they were sent). */
static void deliver(struct link *l, struct side *s)
{
	for (;;) {
		uint32_t best = UINT32_MAX;
		struct frame *f;
		struct fab_pkt pkt;
		enum fab_wire_err why;

		for (uint32_t i = 0; i < l->n; i++) {
			if (l->q[i]->due <= now_ns &&
			    (best == UINT32_MAX || l->q[i]->due < l->q[best]->due))
				best = i;
		}
		if (best == UINT32_MAX)
			return;
		f = l->q[best];
		memmove(&l->q[best], &l->q[best + 1], (l->n - best - 1) * sizeof(l->q[0]));
		l->n--;
		if (fab_pkt_decode(f->data, f->len, &pkt, &why) == 0) {
			l->missed_corruptions += f->corrupt;
			rc_recv(&s->rc, &pkt, now_ns);
			run_end(s);
		} else {
			l->bad_decodes++;
		}
		free(f);
	}
}

/* B's NIC gets no CPU: what is sent to it waits on the link. */
static bool b_stopped;

/* Run both sides until pred() holds or limit_ns of simulated time pass. */
static bool run_until(bool (*pred)(void), uint64_t limit_ns)
{
	uint64_t end = now_ns + limit_ns;

	while (now_ns < end) {
		uint32_t out;

		if (!b_stopped)
			deliver(&ab, &B);
		deliver(&ba, &A);
		rc_progress(&A.rc, now_ns);
		run_end(&A);
		if (!b_stopped) {
			rc_progress(&B.rc, now_ns);
			run_end(&B);
		}
		out = (uint32_t)rc_psn_diff(A.rc.next_psn, A.rc.una_psn);
		if (out > A.max_outstanding)
			A.max_outstanding = out;
		if (pred())
			return true;
		now_ns += 500;
	}
	return pred();
}

static uint32_t want_a, want_b;

static bool cqes_done(void)
{
	return A.ncqe >= want_a && B.ncqe >= want_b;
}

/* ---- Tests ---------------------------------------------------------------- */

static void test_send_recv_sizes(void)
{
	static const uint32_t sizes[] = {0, 1, 4095, 4096, 4097, 65539, 300000};
	static uint8_t src[300000], dst[300000];

	setup();
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t lk = reg(&A, src, sizeof(src), 0);
		uint32_t rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);

		nst_fill(src, sizes[i], (uint32_t)i);
		memset(dst, 0xee, sizeof(dst));
		post_recv(&B, 500 + i, dst, sizeof(dst), rk);
		NST_EQ(post(&A, i, NIC_WR_SEND, src, sizes[i], lk, 0, 0), 0);
		want_a = A.ncqe + 1;
		want_b = B.ncqe + 1;
		NST_REQUIRE(run_until(cqes_done, 1000000000u));
		NST_EQ(A.cqe[A.ncqe - 1].status, NIC_WC_SUCCESS);
		NST_EQ_U(A.cqe[A.ncqe - 1].wr_id, i);
		NST_EQ(B.cqe[B.ncqe - 1].status, NIC_WC_SUCCESS);
		NST_EQ(B.cqe[B.ncqe - 1].opcode, NIC_WC_RECV);
		NST_EQ(B.cqe[B.ncqe - 1].byte_len, sizes[i]);
		NST_EQ_U(B.cqe[B.ncqe - 1].wr_id, 500 + i);
		NST_EQ(memcmp(src, dst, sizes[i]), 0);
		NST_EQ(dst[sizes[i] < sizeof(dst) ? sizes[i] : 0],
		       sizes[i] < sizeof(dst) ? 0xee : dst[0]);
	}
	NST_EQ(ab.bad_decodes + ba.bad_decodes, 0);
}

static void test_write_read_and_immediate(void)
{
	static uint8_t local[200000], remote[200000], back[200000];
	uint32_t lk, bk, rkey;

	setup();
	lk = reg(&A, local, sizeof(local), 0);
	bk = reg(&A, back, sizeof(back), NIC_ACCESS_LOCAL_WRITE);
	rkey = expose(&B, remote, sizeof(remote), NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE);
	nst_fill(local, sizeof(local), 7);
	NST_EQ(post(&A, 1, NIC_WR_RDMA_WRITE, local, 150001, lk, (uintptr_t)remote + 17, rkey), 0);
	NST_EQ(post(&A, 2, NIC_WR_RDMA_READ, back, 150001, bk, (uintptr_t)remote + 17, rkey), 0);
	post_recv(&B, 9, NULL, 0, 0);
	NST_EQ(post(&A, 3, NIC_WR_RDMA_WRITE_IMM, local, 10, lk, (uintptr_t)remote, rkey), 0);
	want_a = 3;
	want_b = 1;
	NST_REQUIRE(run_until(cqes_done, 1000000000u));
	NST_EQ(memcmp(remote + 17, local, 150001), 0);
	NST_EQ(memcmp(back, local, 150001), 0);
	for (int i = 0; i < 3; i++) {
		NST_EQ(A.cqe[i].status, NIC_WC_SUCCESS);
		NST_EQ_U(A.cqe[i].wr_id, (uint64_t)i + 1);
	}
	NST_EQ(A.cqe[0].opcode, NIC_WC_RDMA_WRITE);
	NST_EQ(A.cqe[1].opcode, NIC_WC_RDMA_READ);
	NST_EQ(A.cqe[1].byte_len, 150001);
	NST_EQ(B.cqe[0].opcode, NIC_WC_RECV_RDMA_IMM);
	NST_EQ(B.cqe[0].flags, NIC_WC_F_IMM);
	NST_EQ_U(B.cqe[0].imm, 0xabcd0003u);
	NST_EQ(B.cqe[0].byte_len, 10);
	NST_EQ(memcmp(remote, local, 10), 0);
}

/* 8 MiB of writes, sends and reads intact over a bad link. */
static void test_lossy_link(void)
{
	static uint8_t src[1u << 20], dst[1u << 20], rb[1u << 20];
	struct rc_config cfg;
	uint32_t lk, rk, rkey, rbk;
	uint32_t ops = 0;

	rc_config_default(&cfg);
	cfg.timeout_ns = 200000;
	cfg.retry_cnt = 1000;
	setup_with(&cfg);
	for (int i = 0; i < 2; i++) {
		struct link *l = i ? &ba : &ab;

		l->loss_ppm = 50000;
		l->dup_ppm = 10000;
		l->reorder_ppm = 10000;
		l->corrupt_ppm = 1000;
	}
	lk = reg(&A, src, sizeof(src), 0);
	rbk = reg(&A, rb, sizeof(rb), NIC_ACCESS_LOCAL_WRITE);
	rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);
	rkey = expose(&B, dst, sizeof(dst), NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE);
	for (int round = 0; round < 8; round++) {
		uint8_t op = round % 3 == 0   ? NIC_WR_SEND
			     : round % 3 == 1 ? NIC_WR_RDMA_WRITE
					      : NIC_WR_RDMA_READ;

		nst_fill(src, sizeof(src), (uint32_t)round + 100);
		if (op == NIC_WR_RDMA_READ) {
			memset(rb, 0, sizeof(rb));
			NST_EQ(post(&A, 100 + (uint64_t)round, op, rb, sizeof(rb), rbk,
				    (uintptr_t)dst, rkey),
			       0);
		} else {
			if (op == NIC_WR_SEND)
				post_recv(&B, 200 + (uint64_t)round, dst, sizeof(dst), rk);
			NST_EQ(post(&A, 100 + (uint64_t)round, op, src, sizeof(src), lk,
				    (uintptr_t)dst, rkey),
			       0);
		}
		ops++;
		want_a = ops;
		want_b = B.ncqe + (op == NIC_WR_SEND);
		if (!run_until(cqes_done, 20000000000ull) || A.cqe[A.ncqe - 1].status)
			printf(
			    "\n    round %d op %u: A %u cqes (last status %u), una %u next %u "
			    "retries %u timeouts %llu; B epsn %u reads %u..%u dup %llu oos %llu\n",
			    round, op, A.ncqe, A.ncqe ? A.cqe[A.ncqe - 1].status : 0, A.rc.una_psn,
			    A.rc.next_psn, A.rc.retries, (unsigned long long)A.rc.st.timeouts,
			    B.rc.epsn, B.rc.rd_head, B.rc.rd_tail,
			    (unsigned long long)B.rc.st.duplicates,
			    (unsigned long long)B.rc.st.out_of_seq);
		NST_REQUIRE(A.ncqe >= want_a);
		NST_EQ(A.cqe[A.ncqe - 1].status, NIC_WC_SUCCESS);
		if (op == NIC_WR_RDMA_READ)
			NST_EQ(memcmp(rb, dst, sizeof(dst)), 0);
		else
			NST_EQ(memcmp(src, dst, sizeof(dst)), 0);
	}
	printf("\n    8 MiB over 5%% loss, 1%% dup, 1%% reorder, 0.1%% corrupt: %llu + %llu "
	       "frames, %llu dropped, %llu corrupt (%llu refused by the ICRC), %llu "
	       "go-back-N, %llu timeouts\n",
	       (unsigned long long)ab.sent, (unsigned long long)ba.sent,
	       (unsigned long long)(ab.dropped + ba.dropped),
	       (unsigned long long)(ab.corrupted + ba.corrupted),
	       (unsigned long long)(ab.bad_decodes + ba.bad_decodes),
	       (unsigned long long)A.rc.st.retransmits, (unsigned long long)A.rc.st.timeouts);
	NST_TRUE(A.rc.st.retransmits > 0);
	/* Every corrupted copy, and nothing else, was refused by its ICRC. */
	NST_EQ(ab.missed_corruptions + ba.missed_corruptions, 0);
	NST_TRUE(ab.bad_decodes + ba.bad_decodes >= ab.corrupted + ba.corrupted);
	NST_TRUE(!A.errored && !B.errored);
	NST_TRUE(A.max_outstanding <= cfg.window);
	NST_EQ(A.run_broken + B.run_broken, 0);
}

/*
 * rc_xmit_run, which bounds the DMA engine's read-ahead, against what the
 * engine then sends: a write of more packets than the window starts with a
 * run of a whole window, a read's responses go out as one run, and no run
 * stops short of what it promised.
 */
static void test_xmit_runs(void)
{
	enum { WLEN = 2 * 1024 * 1024 + 100, RLEN = 64 * 1024 + 1 };
	static uint8_t src[WLEN], remote[WLEN], back[RLEN];
	struct rc_config cfg;
	uint32_t lk, bk, rkey;

	setup();
	rc_config_default(&cfg);
	lk = reg(&A, src, sizeof(src), 0);
	bk = reg(&A, back, sizeof(back), NIC_ACCESS_LOCAL_WRITE);
	rkey = expose(&B, remote, sizeof(remote), NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE);
	nst_fill(src, sizeof(src), 11);
	NST_EQ(post(&A, 1, NIC_WR_RDMA_WRITE, src, WLEN, lk, (uintptr_t)remote, rkey), 0);
	want_a = 1;
	want_b = 0;
	NST_REQUIRE(run_until(cqes_done, 1000000000u));
	NST_EQ(A.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(memcmp(src, remote, WLEN), 0);
	/* 513 packets: the first run fills the window. */
	NST_EQ(A.run_max, cfg.window);
	NST_EQ(post(&A, 2, NIC_WR_RDMA_READ, back, RLEN, bk, (uintptr_t)remote + 5, rkey), 0);
	want_a = 2;
	NST_REQUIRE(run_until(cqes_done, 1000000000u));
	NST_EQ(A.cqe[1].status, NIC_WC_SUCCESS);
	NST_EQ(memcmp(back, remote + 5, RLEN), 0);
	NST_EQ(B.run_max, (RLEN + cfg.mtu - 1) / cfg.mtu);
	NST_EQ(A.run_broken + B.run_broken, 0);
}

static bool a_timed_out(void)
{
	return A.rc.st.timeouts > 0;
}

/*
 * After a retransmission timeout the requester resends only an
 * acknowledgement's worth of packets, not a whole window on top of the one
 * the receiver may still be working through; each acknowledgement that
 * makes progress doubles that, back to the full window.
 */
static void test_timeout_resends_less(void)
{
	enum { LEN = 4 * 1024 * 1024 };
	static uint8_t src[LEN], remote[LEN];
	struct rc_config cfg;
	uint32_t lk, rkey;

	setup();
	rc_config_default(&cfg);
	lk = reg(&A, src, sizeof(src), 0);
	rkey = expose(&B, remote, sizeof(remote), NIC_ACCESS_REMOTE_WRITE);
	nst_fill(src, sizeof(src), 12);
	NST_EQ(post(&A, 1, NIC_WR_RDMA_WRITE, src, LEN, lk, (uintptr_t)remote, rkey), 0);
	ab.loss_ppm = 1000000;
	NST_REQUIRE(run_until(a_timed_out, 1000000000u));
	NST_EQ((uint32_t)rc_psn_diff(A.rc.next_psn, A.rc.una_psn), cfg.ack_every);
	NST_EQ(A.rc.cwnd, cfg.ack_every);
	ab.loss_ppm = 0;
	want_a = 1;
	want_b = 0;
	NST_REQUIRE(run_until(cqes_done, 1000000000u));
	NST_EQ(A.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(memcmp(src, remote, LEN), 0);
	NST_EQ(A.rc.cwnd, cfg.window);
}

/* A read of more responses than the window: it waits for the window to
 * drain, then goes out alone. */
static void test_read_larger_than_window(void)
{
	static uint8_t remote[40000], back[40000], small[100];
	struct rc_config cfg;
	uint32_t bk, sk, rkey;

	rc_config_default(&cfg);
	cfg.mtu = 1024;
	cfg.window = 8;
	setup_with(&cfg);
	bk = reg(&A, back, sizeof(back), NIC_ACCESS_LOCAL_WRITE);
	sk = reg(&A, small, sizeof(small), 0);
	rkey = expose(&B, remote, sizeof(remote), NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE);
	nst_fill(remote, sizeof(remote), 4);
	NST_EQ(post(&A, 1, NIC_WR_RDMA_WRITE, small, 100, sk, (uintptr_t)remote + 39000, rkey), 0);
	NST_EQ(post(&A, 2, NIC_WR_RDMA_READ, back, sizeof(back), bk, (uintptr_t)remote, rkey), 0);
	want_a = 2;
	want_b = 0;
	NST_REQUIRE(run_until(cqes_done, 100000000));
	NST_EQ(A.cqe[1].status, NIC_WC_SUCCESS);
	NST_EQ(memcmp(back, remote, sizeof(back)), 0);
}

/*
 * A responder too busy to answer a read before the requester's timer fires
 * (here: out of frames) gets the read again at each timeout.  Each
 * duplicate asks for what the queued read will send anyway: it is sent once,
 * not once per timeout.
 */
static void test_duplicate_read_sent_once(void)
{
	static uint8_t remote[32 * 1024], back[32 * 1024];
	struct rc_config cfg;
	uint32_t bk, rkey;

	rc_config_default(&cfg);
	cfg.mtu = 1024;
	cfg.timeout_ns = 5000;
	setup_with(&cfg);
	bk = reg(&A, back, sizeof(back), NIC_ACCESS_LOCAL_WRITE);
	rkey = expose(&B, remote, sizeof(remote), NIC_ACCESS_REMOTE_READ);
	nst_fill(remote, sizeof(remote), 21);
	ba.no_frames = true;
	NST_EQ(post(&A, 1, NIC_WR_RDMA_READ, back, sizeof(back), bk, (uintptr_t)remote, rkey), 0);
	want_a = 1;
	want_b = 0;
	NST_TRUE(!run_until(cqes_done, 60000));
	NST_TRUE(A.rc.st.timeouts >= 3);
	NST_EQ(B.rc.st.reads_rewound, A.rc.st.timeouts);
	ba.no_frames = false;
	NST_REQUIRE(run_until(cqes_done, 100000000));
	NST_EQ(A.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(memcmp(back, remote, sizeof(back)), 0);
	NST_EQ(ba.sent, 32);
	NST_EQ(B.rc.st.bytes_sent, sizeof(remote));
}

/*
 * A timeout while the acknowledgements are still on their way: the
 * requester goes back, cannot resend yet (no frames), and the late
 * acknowledgements of the first transmission -- beyond the rewound transmit
 * position -- still complete the work request, with nothing sent twice.
 */
static void test_late_acks_after_go_back(void)
{
	static uint8_t src[64 * 1024], dst[64 * 1024];
	struct rc_config cfg;
	uint32_t lk, rkey;

	rc_config_default(&cfg);
	cfg.mtu = 1024;
	cfg.ack_every = 8;
	cfg.timeout_ns = 5000;
	setup_with(&cfg);
	ba.latency = 20000; /* acknowledgements come back after the timeout */
	lk = reg(&A, src, sizeof(src), 0);
	rkey = expose(&B, dst, sizeof(dst), NIC_ACCESS_REMOTE_WRITE);
	nst_fill(src, sizeof(src), 9);
	NST_EQ(post(&A, 1, NIC_WR_RDMA_WRITE, src, sizeof(src), lk, (uintptr_t)dst, rkey), 0);
	want_a = 1;
	want_b = 0;
	/* Everything goes out at once; then the frames run out, and the timer
	 * fires before any acknowledgement is back. */
	NST_TRUE(!run_until(cqes_done, 3000));
	NST_EQ(ab.sent, 64);
	ab.no_frames = true;
	NST_TRUE(!run_until(cqes_done, 5000));
	NST_EQ(A.rc.st.timeouts, 1);
	NST_EQ(A.rc.next_psn, A.rc.una_psn);
	NST_REQUIRE(run_until(cqes_done, 100000));
	NST_EQ(A.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(ab.sent, 64);
	NST_EQ(A.rc.una_psn, A.rc.max_psn);
	NST_EQ(A.rc.timer, 0);
	NST_EQ(memcmp(src, dst, sizeof(dst)), 0);
	/* Work posted afterwards starts where the acknowledged data ended. */
	ab.no_frames = false;
	nst_fill(src, sizeof(src), 10);
	NST_EQ(post(&A, 2, NIC_WR_RDMA_WRITE, src, sizeof(src), lk, (uintptr_t)dst, rkey), 0);
	want_a = 2;
	NST_REQUIRE(run_until(cqes_done, 1000000));
	NST_EQ(A.cqe[1].status, NIC_WC_SUCCESS);
	NST_EQ(memcmp(src, dst, sizeof(dst)), 0);
	NST_TRUE(!A.errored && !B.errored);
}

static bool both_errored(void);

/* A receive taken for a message that never finishes completes flushed. */
static void test_held_receive_flushed_on_error(void)
{
	static uint8_t src[20000], dst[20000];
	uint32_t lk, rk;

	setup();
	lk = reg(&A, src, sizeof(src), 0);
	rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);
	post_recv(&B, 42, dst, sizeof(dst), rk);
	ab.loss_ppm = 0;
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, sizeof(src), lk, 0, 0), 0);
	/* Deliver the first packet only, then break the responder. */
	rc_progress(&A.rc, now_ns);
	now_ns += ab.latency;
	{
		struct frame *f = ab.q[0];
		struct fab_pkt pkt;
		enum fab_wire_err why;

		NST_REQUIRE(ab.n > 1);
		NST_REQUIRE_EQ(fab_pkt_decode(f->data, f->len, &pkt, &why), 0);
		rc_recv(&B.rc, &pkt, now_ns);
	}
	NST_TRUE(B.rc.have_rwqe);
	rc_fail(&B.rc, NIC_WC_WR_FLUSH_ERR);
	NST_EQ(B.ncqe, 1);
	NST_EQ_U(B.cqe[0].wr_id, 42);
	NST_EQ(B.cqe[0].status, NIC_WC_WR_FLUSH_ERR);
	NST_EQ(B.cqe[0].opcode, NIC_WC_RECV);
}

/* ---- The first message (cfg.hold_first) ---------------------------------- */

static void setup_hold(uint32_t mtu)
{
	struct rc_config cfg;

	rc_config_default(&cfg);
	cfg.hold_first = true;
	cfg.timeout_ns = 1000000; /* 1 ms: retransmissions come quickly */
	if (mtu)
		cfg.mtu = mtu;
	setup_with(&cfg);
}

static bool a_done(void)
{
	return A.ncqe >= want_a;
}

static bool a_errored(void);

static bool b_errored(void)
{
	return B.errored;
}

/*
 * A first SEND of up to NIC_HOLD_MAX bytes with no receive posted is held:
 * acknowledged at once, no RNR NAK, nothing completed at the responder
 * until the first receive is posted, which then completes with it (its
 * immediate data too).  A second message with no receive draws RNR NAKs as
 * before, and goes to the second receive.
 */
static void test_first_message_held(void)
{
	static uint8_t src[1000], dst[2][1000];
	uint32_t lk, rk;

	setup_hold(0);
	lk = reg(&A, src, sizeof(src), 0);
	rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);
	nst_fill(src, sizeof(src), 7);
	memset(dst, 0xee, sizeof(dst));
	NST_EQ(post(&A, 1, NIC_WR_SEND_IMM, src, NIC_HOLD_MAX, lk, 0, 0), 0);
	want_a = 1;
	NST_REQUIRE(run_until(a_done, 100000000));
	NST_EQ(A.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(B.ncqe, 0);
	NST_EQ(B.rc.st.first_held, 1);
	NST_EQ(B.rc.st.rnr_naks_sent, 0);
	/* The second: RNR NAKs while no receive is posted. */
	NST_EQ(post(&A, 2, NIC_WR_SEND, src + 300, 500, lk, 0, 0), 0);
	want_a = 2;
	NST_TRUE(!run_until(a_done, 20000000));
	NST_TRUE(B.rc.st.rnr_naks_sent > 0);
	NST_EQ(B.rc.st.first_held, 1);
	NST_EQ(B.ncqe, 0);
	/* The first receive gets the held message, the second the second. */
	post_recv(&B, 10, dst[0], sizeof(dst[0]), rk);
	post_recv(&B, 11, dst[1], sizeof(dst[1]), rk);
	want_a = 2;
	want_b = 2;
	NST_REQUIRE(run_until(cqes_done, 100000000));
	NST_EQ(A.cqe[1].status, NIC_WC_SUCCESS);
	NST_EQ_U(B.cqe[0].wr_id, 10);
	NST_EQ(B.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(B.cqe[0].byte_len, NIC_HOLD_MAX);
	NST_EQ(B.cqe[0].flags, NIC_WC_F_IMM);
	NST_EQ_U(B.cqe[0].imm, 0xabcd0001u);
	NST_EQ(memcmp(dst[0], src, NIC_HOLD_MAX), 0);
	NST_EQ(dst[0][NIC_HOLD_MAX], 0xee);
	NST_EQ_U(B.cqe[1].wr_id, 11);
	NST_EQ(B.cqe[1].byte_len, 500);
	NST_EQ(B.cqe[1].flags, 0);
	NST_EQ(memcmp(dst[1], src + 300, 500), 0);
	NST_TRUE(!A.errored && !B.errored);
}

/* Posted in the same step as a later message arrives: the held message
 * still takes the first receive, the later one the second. */
static void test_first_message_before_later_ones(void)
{
	static uint8_t src[100], dst[2][100];
	uint32_t lk, rk;

	setup_hold(0);
	lk = reg(&A, src, sizeof(src), 0);
	rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);
	nst_fill(src, sizeof(src), 8);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, 10, lk, 0, 0), 0);
	want_a = 1;
	NST_REQUIRE(run_until(a_done, 100000000));
	/* The second reaches B before B's engine looks at its receives. */
	post_recv(&B, 20, dst[0], sizeof(dst[0]), rk);
	post_recv(&B, 21, dst[1], sizeof(dst[1]), rk);
	NST_EQ(post(&A, 2, NIC_WR_SEND, src + 10, 20, lk, 0, 0), 0);
	rc_progress(&A.rc, now_ns);
	now_ns += ab.latency;
	deliver(&ab, &B);
	NST_EQ(B.ncqe, 2);
	NST_EQ_U(B.cqe[0].wr_id, 20);
	NST_EQ(B.cqe[0].byte_len, 10);
	NST_EQ_U(B.cqe[1].wr_id, 21);
	NST_EQ(B.cqe[1].byte_len, 20);
	NST_EQ(memcmp(dst[0], src, 10), 0);
	NST_EQ(memcmp(dst[1], src + 10, 20), 0);
	NST_EQ(B.rc.st.rnr_naks_sent, 0);
}

/*
 * What is not held: a first message over NIC_HOLD_MAX draws RNR NAKs and
 * goes to the receive posted later; a receive posted first takes a first
 * message of any size; a message after one that took a receive is not the
 * first.  At an MTU of 256 a message of NIC_HOLD_MAX bytes is one packet,
 * and held.
 */
static void test_what_is_not_held(void)
{
	static uint8_t src[5000], dst[5000];
	uint32_t lk, rk;

	setup_hold(0);
	lk = reg(&A, src, sizeof(src), 0);
	rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);
	nst_fill(src, sizeof(src), 9);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, NIC_HOLD_MAX + 1, lk, 0, 0), 0);
	want_a = 1;
	want_b = 1;
	NST_TRUE(!run_until(a_done, 20000000));
	NST_TRUE(B.rc.st.rnr_naks_sent > 0);
	post_recv(&B, 30, dst, sizeof(dst), rk);
	NST_REQUIRE(run_until(cqes_done, 100000000));
	NST_EQ(B.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(B.cqe[0].byte_len, NIC_HOLD_MAX + 1);
	NST_EQ(memcmp(dst, src, NIC_HOLD_MAX + 1), 0);
	NST_EQ(B.rc.st.first_held, 0);
	/* The first message took a receive: the next small one is not held. */
	NST_EQ(post(&A, 2, NIC_WR_SEND, src, 10, lk, 0, 0), 0);
	want_a = 2;
	NST_TRUE(!run_until(a_done, 20000000));
	NST_EQ(B.rc.st.first_held, 0);

	/* A receive posted first: a first message of several packets. */
	setup_hold(0);
	lk = reg(&A, src, sizeof(src), 0);
	rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);
	post_recv(&B, 31, dst, sizeof(dst), rk);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, sizeof(src), lk, 0, 0), 0);
	want_a = 1;
	want_b = 1;
	NST_REQUIRE(run_until(cqes_done, 100000000));
	NST_EQ(B.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(B.cqe[0].byte_len, sizeof(src));
	NST_EQ(B.rc.st.first_held + B.rc.st.rnr_naks_sent, 0);

	/* The smallest MTU: NIC_HOLD_MAX bytes are one packet. */
	setup_hold(256);
	lk = reg(&A, src, sizeof(src), 0);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, NIC_HOLD_MAX, lk, 0, 0), 0);
	want_a = 1;
	NST_REQUIRE(run_until(a_done, 100000000));
	NST_EQ(B.rc.st.first_held, 1);

	/* Without the flag, nothing is held. */
	setup();
	lk = reg(&A, src, sizeof(src), 0);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, 10, lk, 0, 0), 0);
	want_a = 1;
	NST_TRUE(!run_until(a_done, 20000000));
	NST_EQ(B.rc.st.first_held, 0);
	NST_TRUE(B.rc.st.rnr_naks_sent > 0);
}

/*
 * The held SEND is retransmitted (its ACKs lost): the copies are duplicates,
 * acknowledged again, and the first receive completes once.
 */
static void test_held_message_duplicates(void)
{
	static uint8_t src[100], dst[2][100];
	uint32_t lk, rk;

	setup_hold(0);
	lk = reg(&A, src, sizeof(src), 0);
	rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);
	nst_fill(src, sizeof(src), 10);
	ba.loss_ppm = 1000000;
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, 64, lk, 0, 0), 0);
	want_a = 1;
	NST_TRUE(!run_until(a_done, 5000000));
	NST_TRUE(A.rc.st.timeouts > 0);
	NST_TRUE(B.rc.st.duplicates > 0);
	ba.loss_ppm = 0;
	NST_REQUIRE(run_until(a_done, 100000000));
	NST_EQ(A.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(B.rc.st.first_held, 1);
	post_recv(&B, 40, dst[0], sizeof(dst[0]), rk);
	post_recv(&B, 41, dst[1], sizeof(dst[1]), rk);
	want_b = 1;
	NST_REQUIRE(run_until(cqes_done, 100000000));
	NST_TRUE(!run_until(a_errored, 5000000));
	NST_EQ(B.ncqe, 1);
	NST_EQ(B.cqe[0].byte_len, 64);
	NST_EQ(memcmp(dst[0], src, 64), 0);
}

/*
 * The first receive is checked as for a message arriving then: too short,
 * LOC_LEN_ERR; a bad key, LOC_PROT_ERR; and the QP goes to error without a
 * NAK (the sender's SEND was acknowledged).  A QP that fails or closes
 * with a message held drops it, counted.
 */
static void test_held_message_receive_refused(void)
{
	static uint8_t src[300], dst[300];
	uint32_t lk, rk;

	for (int bad_key = 0; bad_key < 2; bad_key++) {
		uint64_t naks;

		setup_hold(0);
		lk = reg(&A, src, sizeof(src), 0);
		rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);
		NST_EQ(post(&A, 1, NIC_WR_SEND, src, 200, lk, 0, 0), 0);
		want_a = 1;
		NST_REQUIRE(run_until(a_done, 100000000));
		naks = B.rc.st.naks_sent;
		memset(dst, 0xee, sizeof(dst));
		post_recv(&B, 50, dst, bad_key ? sizeof(dst) : 199, bad_key ? rk ^ 0x80 : rk);
		NST_REQUIRE(run_until(b_errored, 100000000));
		NST_EQ(B.ncqe, 1);
		NST_EQ(B.cqe[0].status, bad_key ? NIC_WC_LOC_PROT_ERR : NIC_WC_LOC_LEN_ERR);
		NST_EQ(B.cqe[0].byte_len, 0);
		NST_EQ(B.error, B.cqe[0].status);
		NST_EQ(dst[0], 0xee);
		NST_EQ(B.rc.st.naks_sent, naks);
		NST_EQ(B.rc.st.first_dropped, 0);
		NST_EQ(A.cqe[0].status, NIC_WC_SUCCESS);
	}

	/* Failed with the message held: dropped, nothing completed. */
	setup_hold(0);
	lk = reg(&A, src, sizeof(src), 0);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, 20, lk, 0, 0), 0);
	want_a = 1;
	NST_REQUIRE(run_until(a_done, 100000000));
	rc_fail(&B.rc, NIC_WC_WR_FLUSH_ERR);
	NST_EQ(B.rc.st.first_dropped, 1);
	NST_EQ(B.ncqe, 0);
	rc_fail(&B.rc, NIC_WC_WR_FLUSH_ERR);
	NST_EQ(B.rc.st.first_dropped, 1);
}

/* A responder on a NIC without RDMA READ refuses reads. */
static void test_reads_refused_without_the_capability(void)
{
	static uint8_t back[100], remote[100];
	uint32_t bk, rkey;

	setup();
	B.rc.cfg.no_reads = true;
	bk = reg(&A, back, sizeof(back), NIC_ACCESS_LOCAL_WRITE);
	rkey = expose(&B, remote, sizeof(remote), NIC_ACCESS_REMOTE_READ);
	NST_EQ(post(&A, 1, NIC_WR_RDMA_READ, back, sizeof(back), bk, (uintptr_t)remote, rkey), 0);
	NST_REQUIRE(run_until(both_errored, 100000000));
	NST_EQ(A.cqe[0].status, NIC_WC_REM_INV_REQ_ERR);
}

static bool a_errored(void)
{
	return A.errored;
}

static void test_rnr_then_receive_posted(void)
{
	static uint8_t src[100], dst[100];
	struct rc_config cfg;
	uint32_t lk, rk;

	/* A 1 ms timer: its budget, 79 ms, is well inside the 200 ms below. */
	rc_config_default(&cfg);
	cfg.timeout_ns = 1000000;
	setup_with(&cfg);
	lk = reg(&A, src, sizeof(src), 0);
	rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);
	nst_fill(src, sizeof(src), 3);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, sizeof(src), lk, 0, 0), 0);
	want_a = 1;
	want_b = 1;
	/* Nothing to receive into for longer than the retry limit of timeouts
	 * would allow: RNR NAKs are answers, not silence. */
	NST_TRUE(rc_retry_budget_ns(cfg.timeout_ns, cfg.retry_cnt) < 200000000);
	NST_TRUE(!run_until(cqes_done, 200000000));
	NST_TRUE(!A.errored);
	NST_TRUE(B.rc.st.rnr_naks_sent > 0);
	NST_TRUE(A.rc.st.rnr_naks_rcvd > 0);
	post_recv(&B, 2, dst, sizeof(dst), rk);
	NST_REQUIRE(run_until(cqes_done, 100000000));
	NST_EQ(A.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(B.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(memcmp(src, dst, sizeof(dst)), 0);
}

static void test_rnr_retry_exhausted(void)
{
	static uint8_t src[100];
	struct rc_config cfg;
	uint32_t lk;

	rc_config_default(&cfg);
	cfg.rnr_retry = 3;
	setup_with(&cfg);
	lk = reg(&A, src, sizeof(src), 0);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, 10, lk, 0, 0), 0);
	NST_EQ(post(&A, 2, NIC_WR_SEND, src, 10, lk, 0, 0), 0);
	NST_REQUIRE(run_until(a_errored, 100000000));
	NST_EQ(A.error, NIC_WC_RNR_RETRY_EXC_ERR);
	NST_EQ(A.ncqe, 2);
	NST_EQ(A.cqe[0].status, NIC_WC_RNR_RETRY_EXC_ERR);
	NST_EQ(A.cqe[1].status, NIC_WC_WR_FLUSH_ERR);
	NST_EQ(A.rc.st.rnr_naks_rcvd, 4);
}

/* a >= b and a <= b on unsigned 64-bit values, printing both on failure. */
#define GE_U(a, b)                                                                               \
	NST_CHECK_((uint64_t)(a) >= (uint64_t)(b), CU_FALSE, "%s = %llu, want >= %s = %llu", #a, \
		   (unsigned long long)(a), #b, (unsigned long long)(b))
#define LE_U(a, b)                                                                               \
	NST_CHECK_((uint64_t)(a) <= (uint64_t)(b), CU_FALSE, "%s = %llu, want <= %s = %llu", #a, \
		   (unsigned long long)(a), #b, (unsigned long long)(b))

/* When each of A's retransmission timeouts fired (simulated ns), and when A failed. */
static uint64_t timeout_at[16], failed_at;
static uint32_t ntimeouts_seen, ntimeouts_before;

static void timeouts_forget(void)
{
	ntimeouts_seen = 0;
	failed_at = 0;
}

/* A predicate that notes the time of every new timeout and of A's failure. */
static bool note_timeouts(void)
{
	while (ntimeouts_seen < A.rc.st.timeouts && ntimeouts_seen < 16)
		timeout_at[ntimeouts_seen++] = now_ns;
	if (A.errored && !failed_at)
		failed_at = now_ns;
	return A.errored;
}

static bool a_timed_out_thrice(void)
{
	note_timeouts();
	return A.rc.st.timeouts >= 3;
}

static bool a_timed_out_again(void)
{
	note_timeouts();
	return A.rc.st.timeouts > ntimeouts_before;
}

/*
 * Nothing gets through: the timer waits its base, then twice as long after
 * each timeout in a row, up to 16 times the base; the 8th timeout fails the
 * oldest request with RETRY_EXC_ERR after the whole budget (79 bases).
 */
static void test_retry_exceeded_when_link_down(void)
{
	static uint8_t src[10000];
	const uint64_t base = 1000000, step = 500; /* run_until's clock step */
	struct rc_config cfg;
	uint64_t sent, prev;
	uint32_t lk;

	rc_config_default(&cfg);
	cfg.timeout_ns = base;
	setup_with(&cfg);
	ab.loss_ppm = 1000000;
	timeouts_forget();
	lk = reg(&A, src, sizeof(src), 0);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, sizeof(src), lk, 0, 0), 0);
	NST_EQ(post(&A, 2, NIC_WR_SEND, src, 1, lk, 0, 0), 0);
	sent = now_ns; /* the first packets go out at the first step */
	NST_REQUIRE(run_until(note_timeouts, 1000000000u));
	NST_EQ(A.error, NIC_WC_RETRY_EXC_ERR);
	NST_EQ(A.cqe[0].status, NIC_WC_RETRY_EXC_ERR);
	NST_EQ(A.cqe[1].status, NIC_WC_WR_FLUSH_ERR);
	NST_EQ(A.rc.st.timeouts, 7);
	NST_EQ(ntimeouts_seen, 7);
	prev = sent;
	for (uint32_t n = 0; n < 7; n++) {
		uint64_t want = rc_backoff_ns(base, n), got = timeout_at[n] - prev;

		NST_CHECK_(got >= want && got <= want + step, CU_FALSE,
			   "timeout %u came %llu ns after the one before, want %llu", n + 1,
			   (unsigned long long)got, (unsigned long long)want);
		prev = timeout_at[n];
	}
	NST_EQ_U(rc_backoff_ns(base, 7), 16 * base);
	NST_EQ_U(rc_retry_budget_ns(base, 7), 79 * base);
	GE_U(failed_at - sent, rc_retry_budget_ns(base, 7));
	LE_U(failed_at - sent, rc_retry_budget_ns(base, 7) + 8 * step);
	/* Later work requests are refused at once. */
	NST_EQ(post(&A, 3, NIC_WR_SEND, src, 1, lk, 0, 0), -ENOTCONN);
}

/* The defaults: 67.1 ms, and a requester that hears nothing gives up after
 * 79 times that, 5.3 s (docs/transport.md and nicsimd --help say so). */
static void test_default_budget(void)
{
	struct rc_config cfg;

	rc_config_default(&cfg);
	NST_EQ_U(cfg.timeout_ns, 67108864u);
	NST_EQ(cfg.retry_cnt, 7);
	NST_EQ(cfg.rnr_retry, 7);
	NST_EQ_U(rc_retry_budget_ns(cfg.timeout_ns, cfg.retry_cnt), 79ull * 67108864u);
	NST_EQ_U(rc_ack_timeout_ns(0), 0);
	NST_EQ_U(rc_ack_timeout_ns(1), 8192);
	NST_EQ_U(rc_ack_timeout_ns(31), 4096ull << 31);
	NST_EQ_U(rc_backoff_ns(4096ull << 31, 100), 4096ull << 35);
}

/*
 * Progress brings the timer back to its base: after three timeouts in a
 * row (the timer then at 8 bases) the link comes back, the transfer
 * completes, and the next loss is noticed one base after its send.
 */
static void test_progress_resets_backoff(void)
{
	static uint8_t src[10000], dst[10000];
	const uint64_t base = 1000000;
	struct rc_config cfg;
	uint64_t sent;
	uint32_t lk, rk;

	rc_config_default(&cfg);
	cfg.timeout_ns = base;
	setup_with(&cfg);
	timeouts_forget();
	lk = reg(&A, src, sizeof(src), 0);
	rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);
	post_recv(&B, 10, dst, sizeof(dst), rk);
	post_recv(&B, 11, dst, sizeof(dst), rk);
	ab.loss_ppm = 1000000;
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, sizeof(src), lk, 0, 0), 0);
	NST_REQUIRE(run_until(a_timed_out_thrice, 100000000));
	NST_EQ(A.rc.st.timeouts, 3);
	NST_EQ(A.rc.retries, 3);
	ab.loss_ppm = 0;
	want_a = 1;
	want_b = 1;
	NST_REQUIRE(run_until(cqes_done, 100000000));
	NST_EQ(A.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(A.rc.retries, 0);
	ab.loss_ppm = 1000000;
	sent = now_ns;
	ntimeouts_before = ntimeouts_seen = (uint32_t)A.rc.st.timeouts;
	NST_EQ(post(&A, 2, NIC_WR_SEND, src, 100, lk, 0, 0), 0);
	NST_REQUIRE(run_until(a_timed_out_again, 100000000));
	GE_U(timeout_at[ntimeouts_before] - sent, base);
	LE_U(timeout_at[ntimeouts_before] - sent, base + 1000);
	NST_EQ(A.errored, false);
}

/* A local ACK timeout of 0 is InfiniBand's "no timer": nothing is sent
 * again and nothing fails, however long the silence. */
static void test_ack_timeout_zero_is_no_timer(void)
{
	static uint8_t src[100];
	struct rc_config cfg;
	uint32_t lk;

	rc_config_default(&cfg);
	cfg.timeout_ns = rc_ack_timeout_ns(0);
	setup_with(&cfg);
	ab.loss_ppm = 1000000;
	lk = reg(&A, src, sizeof(src), 0);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, sizeof(src), lk, 0, 0), 0);
	NST_TRUE(!run_until(a_errored, 100000000));
	NST_EQ(A.rc.st.timeouts, 0);
	NST_EQ(A.rc.st.pkts_sent, 1);
	NST_EQ_U(rc_deadline(&A.rc), 0);
}

/*
 * B's NIC stops (no CPU) for 20 of A's base timeouts, less than A's budget
 * of 79: what A sends waits for it.  A times out and backs off; when B runs
 * again the transfer completes intact, neither QP in error.
 */
static void test_stopped_peer_survives(void)
{
	enum { LEN = 256 * 1024 };
	static uint8_t src[LEN], dst[LEN];
	const uint64_t base = 1000000;
	struct rc_config cfg;
	uint32_t lk, rkey;

	rc_config_default(&cfg);
	cfg.timeout_ns = base;
	setup_with(&cfg);
	lk = reg(&A, src, sizeof(src), 0);
	rkey = expose(&B, dst, sizeof(dst), NIC_ACCESS_REMOTE_WRITE);
	nst_fill(src, sizeof(src), 21);
	NST_EQ(post(&A, 1, NIC_WR_RDMA_WRITE, src, LEN, lk, (uintptr_t)dst, rkey), 0);
	b_stopped = true;
	NST_TRUE(!run_until(a_errored, 20 * base));
	b_stopped = false;
	GE_U(A.rc.st.timeouts, 3);
	NST_EQ(A.errored, false);
	want_a = 1;
	want_b = 0;
	NST_REQUIRE(run_until(cqes_done, 100000000));
	NST_EQ(A.cqe[0].status, NIC_WC_SUCCESS);
	NST_EQ(memcmp(src, dst, LEN), 0);
	NST_EQ(B.errored, false);
}

static bool both_errored(void)
{
	return A.errored && B.errored;
}

/* R4/R6 at the responder: a forged key, a wrong-access key and an
 * out-of-bounds range each fail both QPs and leave the target unchanged. */
static void remote_refusal(uint8_t op, int variant)
{
	static uint8_t src[8192], target[8192], copy[8192];
	uint32_t lk, rkey;
	uint64_t va;
	enum nic_tpt_reason want;
	struct tpt_fault f[TPT_FAULT_LOG];
	size_t nf;

	setup();
	lk = reg(&A, src, sizeof(src), op == NIC_WR_RDMA_READ ? NIC_ACCESS_LOCAL_WRITE : 0);
	rkey = expose(&B, target, 4096,
		      op == NIC_WR_RDMA_READ ? NIC_ACCESS_REMOTE_WRITE : NIC_ACCESS_REMOTE_READ);
	nst_fill(target, sizeof(target), 9);
	memcpy(copy, target, sizeof(copy));
	va = (uintptr_t)target;
	want = NIC_TPT_R_NO_ACCESS;
	if (variant == 1) {
		rkey ^= 0x01; /* forged key byte */
		want = NIC_TPT_R_STALE_KEY;
	} else if (variant == 2) {
		rkey = expose(&B, target, 4096, NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE);
		va += 4000; /* 200 bytes run past the window */
		want = NIC_TPT_R_OUT_OF_RANGE;
	}
	NST_EQ(post(&A, 1, op, src, 200, lk, va, rkey), 0);
	NST_EQ(post(&A, 2, NIC_WR_SEND, src, 1, lk, 0, 0), 0);
	NST_REQUIRE(run_until(both_errored, 100000000));
	NST_EQ(A.cqe[0].status, NIC_WC_REM_ACCESS_ERR);
	NST_EQ(A.cqe[1].status, NIC_WC_WR_FLUSH_ERR);
	NST_EQ(B.error, NIC_WC_REM_ACCESS_ERR);
	NST_EQ(memcmp(target, copy, sizeof(copy)), 0);
	nf = tpt_faults(B.tpt, f, TPT_FAULT_LOG);
	NST_REQUIRE(nf >= 1);
	NST_EQ(f[nf - 1].reason, want);
	NST_EQ(f[nf - 1].qpn, B.rc.qpn);
}

static void test_remote_access_refusals(void)
{
	for (int v = 0; v < 3; v++) {
		remote_refusal(NIC_WR_RDMA_WRITE, v);
		remote_refusal(NIC_WR_RDMA_READ, v);
	}
}

static void test_window_bound_to_other_qp(void)
{
	static uint8_t src[64], target[64];
	uint32_t lk, mr, mw, rkey;

	setup();
	lk = reg(&A, src, sizeof(src), 0);
	mr = reg(&B, target, sizeof(target), NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_MW_BIND);
	NST_REQUIRE_EQ(tpt_alloc_mw(B.tpt, &B.owner, &mw), 0);
	NST_REQUIRE_EQ(tpt_bind_mw(B.tpt, &B.owner, mw, mr, (uintptr_t)target, sizeof(target),
				   NIC_ACCESS_REMOTE_WRITE, 0x7777, &rkey),
		       0);
	NST_EQ(post(&A, 1, NIC_WR_RDMA_WRITE, src, 8, lk, (uintptr_t)target, rkey), 0);
	NST_REQUIRE(run_until(both_errored, 100000000));
	NST_EQ(A.cqe[0].status, NIC_WC_REM_ACCESS_ERR);
}

static void test_local_key_refused(void)
{
	static uint8_t src[64];

	setup();
	reg(&A, src, sizeof(src), 0);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, 8, NIC_KEY_MAKE(5000, 1), 0, 0), 0);
	NST_REQUIRE(run_until(a_errored, 100000000));
	NST_EQ(A.cqe[0].status, NIC_WC_LOC_PROT_ERR);
	NST_EQ(A.cqe[0].detail, NIC_TPT_R_BAD_INDEX);
	NST_EQ(ab.sent, 0);
}

static void test_receive_too_small(void)
{
	static uint8_t src[5000], dst[100];
	uint32_t lk, rk;

	setup();
	lk = reg(&A, src, sizeof(src), 0);
	rk = reg(&B, dst, sizeof(dst), NIC_ACCESS_LOCAL_WRITE);
	post_recv(&B, 7, dst, sizeof(dst), rk);
	NST_EQ(post(&A, 1, NIC_WR_SEND, src, sizeof(src), lk, 0, 0), 0);
	NST_REQUIRE(run_until(both_errored, 100000000));
	NST_EQ(B.cqe[0].status, NIC_WC_LOC_LEN_ERR);
	NST_EQ(A.cqe[0].status, NIC_WC_REM_INV_REQ_ERR);
}

static void test_malformed_work_requests(void)
{
	struct nic_send_wqe w = {.wr_id = 1, .opcode = 99};

	setup();
	NST_EQ(rc_post_send(&A.rc, &w), -EINVAL);
	w.opcode = NIC_WR_SEND;
	w.num_sge = NIC_MAX_SGE + 1;
	NST_EQ(rc_post_send(&A.rc, &w), -EINVAL);
	w.num_sge = 0;
	w.flags = 0x80;
	NST_EQ(rc_post_send(&A.rc, &w), -EINVAL);
	w.flags = 0;
	for (uint32_t i = 0; i < NIC_SQ_DEPTH; i++)
		NST_REQUIRE_EQ(rc_post_send(&A.rc, &w), 0);
	NST_EQ(rc_post_send(&A.rc, &w), -ENOSPC);
}

/* Packets with random fields never crash the engine; each side may end in
 * error, which is what a NIC does with a peer that talks nonsense. */
static void test_hostile_packets(void)
{
	static uint8_t payload[FAB_MTU];
	uint64_t refused = 0, errors = 0;

	setup();
	nst_fill(payload, sizeof(payload), 1);
	for (int i = 0; i < 200000; i++) {
		struct fab_pkt p;
		uint8_t op = (uint8_t)(rnd() % 0x18);

		if (fab_pkt_init(&p, op) < 0)
			continue;
		p.psn = (uint32_t)(rnd() % 8 == 0 ? rnd() : B.rc.epsn + rnd() % 3) & FAB_MASK24;
		p.va = rnd();
		p.rkey = (uint32_t)rnd();
		p.dma_len = (uint32_t)rnd();
		p.syndrome = (uint8_t)rnd();
		p.payload = payload;
		p.payload_len = (uint32_t)(rnd() % (FAB_MTU + 2));
		if (p.payload_len > FAB_MTU || !(fab_opcode_info(op)->flags & FAB_OPF_PAYLOAD))
			p.payload_len = rnd() % 2 ? 0 : p.payload_len;
		rc_recv(&B.rc, &p, now_ns);
		rc_recv(&A.rc, &p, now_ns);
		if (i % 64 == 0) {
			rc_progress(&A.rc, now_ns);
			rc_progress(&B.rc, now_ns);
			link_clear(&ab);
			link_clear(&ba);
			if (B.errored || A.errored) {
				refused +=
				    B.rc.st.bad_pkts + B.rc.st.out_of_seq + B.rc.st.duplicates;
				errors++;
				setup();
			}
		}
		now_ns += 100;
	}
	refused += B.rc.st.bad_pkts + B.rc.st.out_of_seq + B.rc.st.duplicates;
	printf("\n    %llu packets refused or ignored, %llu QPs put in error\n",
	       (unsigned long long)refused, (unsigned long long)errors);
	NST_TRUE(refused > 0);
	NST_TRUE(errors > 0);
}

static int clean(void)
{
	tpt_destroy(A.tpt);
	tpt_destroy(B.tpt);
	link_clear(&ab);
	link_clear(&ba);
	return 0;
}

static int init(void)
{
	const char *seed = getenv("NICSIM_SEED");

	if (seed)
		rng = strtoull(seed, NULL, 0) | 1;
	printf("seed 0x%llx (set NICSIM_SEED to replay)\n", (unsigned long long)rng);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"send_recv_sizes", test_send_recv_sizes},
	    {"write_read_and_immediate", test_write_read_and_immediate},
	    {"lossy_link", test_lossy_link},
	    {"xmit_runs", test_xmit_runs},
	    {"timeout_resends_less", test_timeout_resends_less},
	    {"read_larger_than_window", test_read_larger_than_window},
	    {"duplicate_read_sent_once", test_duplicate_read_sent_once},
	    {"held_receive_flushed_on_error", test_held_receive_flushed_on_error},
	    {"reads_refused_without_the_capability", test_reads_refused_without_the_capability},
	    {"late_acks_after_go_back", test_late_acks_after_go_back},
	    {"rnr_then_receive_posted", test_rnr_then_receive_posted},
	    {"first_message_held", test_first_message_held},
	    {"first_message_before_later_ones", test_first_message_before_later_ones},
	    {"what_is_not_held", test_what_is_not_held},
	    {"held_message_duplicates", test_held_message_duplicates},
	    {"held_message_receive_refused", test_held_message_receive_refused},
	    {"rnr_retry_exhausted", test_rnr_retry_exhausted},
	    {"retry_exceeded_when_link_down", test_retry_exceeded_when_link_down},
	    {"default_budget", test_default_budget},
	    {"progress_resets_backoff", test_progress_resets_backoff},
	    {"ack_timeout_zero_is_no_timer", test_ack_timeout_zero_is_no_timer},
	    {"stopped_peer_survives", test_stopped_peer_survives},
	    {"remote_access_refusals", test_remote_access_refusals},
	    {"window_bound_to_other_qp", test_window_bound_to_other_qp},
	    {"local_key_refused", test_local_key_refused},
	    {"receive_too_small", test_receive_too_small},
	    {"malformed_work_requests", test_malformed_work_requests},
	    {"hostile_packets", test_hostile_packets},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "rc", tests, init, clean);
}
