/*
 * `nicsim capture` against real NICs, read back by tshark and libpcap.
 *
 * The main test drives two hosts through connection set-up, SEND, a
 * multi-packet RDMA WRITE, a multi-packet RDMA READ, a PSN sequence error
 * NAK after a drop injected by the drop-nth rule, an RNR NAK, a remote
 * access error NAK after a forged key, and tear-down, with a pcapng
 * capture running.  Every frame is decoded here from its bytes by fixed
 * offsets (an independent reading of the IBTA layout), its ICRC recomputed
 * by a bitwise CRC, and compared with what tshark reports for it: the
 * protocol stack, BTH opcode, PSN and destination QP, RETH address, R_Key
 * and length, AETH syndrome, ICRC; tshark reports no malformed frame.  The
 * expected sequence of frames is then checked on the decoded list.
 *
 * Then: fault marks in pcapng (comments, the CRC-error flag) against the
 * link's counters; plain pcap with filters, snap length and --count;
 * streaming into tshark live and a reader that goes away; usage and runtime
 * errors; NICSIM_CAPTURE keeping the capture of a failing test and naming
 * it.  tshark is required: CI installs it, so its absence fails the tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "fab_capture.h"
#include "fab_seg.h"
#include "fab_wire.h"
#include "nicsim_mgmt.h"
#include "nstcapture.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstverbs.h"
#include "nstwire.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define ADDR_C "198.18.0.3"
#define WAIT_MS 10000
#define MAX_FRAMES 20000
#define MTU 4096u

/* IBTA opcodes and CM attribute IDs, written out here rather than taken
 * from nicsim's headers. */
enum {
	OP_SEND_ONLY = 0x04,
	OP_WRITE_FIRST = 0x06,
	OP_WRITE_MIDDLE = 0x07,
	OP_WRITE_LAST = 0x08,
	OP_WRITE_ONLY = 0x0a,
	OP_READ_REQUEST = 0x0c,
	OP_READ_RESP_FIRST = 0x0d,
	OP_READ_RESP_MIDDLE = 0x0e,
	OP_READ_RESP_LAST = 0x0f,
	OP_ACK = 0x11,
	OP_UD_SEND_ONLY = 0x64,
	CM_REQ = 0x10,
	CM_REP = 0x13,
	CM_RTU = 0x14,
	CM_DREQ = 0x15,
	CM_DREP = 0x16,
};

static char dir[256], sock_a[300], sock_b[300], sock_c[300];
static const char *const nic_args[] = {"--log-level", "info", NULL};
static struct nst_nic nics[] = {
    {.addr = ADDR_A, .extra = nic_args},
    {.addr = ADDR_B, .extra = nic_args},
    {.addr = ADDR_C, .extra = nic_args},
};
#define NNICS (sizeof(nics) / sizeof(nics[0]))
static uint32_t addr_a, addr_b, addr_c;
static uint16_t next_port = 2000;
static char tshark[512];
static char out[1 << 21]; /* tshark's output */

/* ---- Frames read back ------------------------------------------------------------ */

/* One frame as decoded here from its bytes, and what tshark said of it. */
struct frame {
	uint8_t *data;
	uint32_t caplen, len;
	uint32_t src, dst; /* IPv4, network order */
	int opcode;
	uint32_t destqp, psn;
	bool reth, aeth;
	uint64_t va;
	uint32_t rkey, dmalen;
	uint8_t syndrome;
	uint16_t cm_attr; /* UD to QP 1: the MAD's attribute ID */
	bool icrc_ok;
	char comment[256]; /* tshark's frame.comment */
	bool crc_flag;     /* tshark's frame.packet_flags_crc_error */
};

static struct frame frames[MAX_FRAMES];
static size_t nframes;

static uint32_t be(const uint8_t *p, int n)
{
	uint32_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* The fields of a frame by their offsets: Ethernet 14, IPv4 20, UDP 8, BTH
 * at 42 (opcode, destination QP at +5, PSN at +9), then RETH (VA, R_Key,
 * length) or AETH (syndrome, MSN) at 54 as the opcode says, DETH and the
 * MAD (attribute ID at +16) for UD.  The frame has at least 54 bytes. */
static void decode_here(struct frame *f)
{
	const uint8_t *d = f->data;
	uint32_t n = f->caplen;

	memcpy(&f->src, d + 26, 4);
	memcpy(&f->dst, d + 30, 4);
	f->opcode = d[42];
	f->destqp = be(d + 47, 3);
	f->psn = be(d + 51, 3);
	switch (f->opcode) {
	case OP_WRITE_FIRST:
	case OP_WRITE_ONLY:
	case 0x0b: /* RDMA WRITE Only with Immediate */
	case OP_READ_REQUEST:
		if (n < 70)
			break;
		f->reth = true;
		f->va = (uint64_t)be(d + 54, 4) << 32 | be(d + 58, 4);
		f->rkey = be(d + 62, 4);
		f->dmalen = be(d + 66, 4);
		break;
	case OP_READ_RESP_FIRST:
	case OP_READ_RESP_LAST:
	case 0x10: /* RDMA READ Response Only */
	case OP_ACK:
		f->aeth = n >= 58;
		f->syndrome = f->aeth ? d[54] : 0;
		break;
	case OP_UD_SEND_ONLY: f->cm_attr = n >= 80 ? (uint16_t)be(d + 62 + 16, 2) : 0; break;
	default: break;
	}
	f->icrc_ok = n == f->len && nst_icrc(d, f->len - 4) == nst_wire_icrc(d, f->len);
}

static void frames_free(void)
{
	for (size_t i = 0; i < nframes; i++)
		free(frames[i].data);
	nframes = 0;
}

/* Read a pcap or pcapng file with libpcap and decode every frame. */
static void frames_load(const char *path)
{
	char err[PCAP_ERRBUF_SIZE] = "";
	struct pcap_pkthdr *h;
	const u_char *d;
	pcap_t *p;

	frames_free();
	p = pcap_open_offline_with_tstamp_precision(path, PCAP_TSTAMP_PRECISION_NANO, err);
	NST_CHECK_(p != NULL, CU_TRUE, "libpcap cannot read %s: %s", path, err);
	while (nframes < MAX_FRAMES && pcap_next_ex(p, &h, &d) == 1) {
		struct frame *f = &frames[nframes++];

		*f = (struct frame){.caplen = h->caplen, .len = h->len};
		f->data = calloc(1, h->len > h->caplen ? h->len : h->caplen);
		NST_REQUIRE(f->data != NULL);
		memcpy(f->data, d, h->caplen);
		if (h->caplen >= 54)
			decode_here(f);
	}
	pcap_close(p);
}

/* ---- tshark ------------------------------------------------------------------------- */

static bool find_tshark(void)
{
	const char *path = getenv("PATH");
	char *copy, *dirp, *save;
	bool found = false;

	copy = strdup(path ? path : "/usr/bin:/bin");
	if (!copy)
		return false;
	for (dirp = strtok_r(copy, ":", &save); dirp && !found; dirp = strtok_r(NULL, ":", &save)) {
		snprintf(tshark, sizeof(tshark), "%s/tshark", dirp);
		found = access(tshark, X_OK) == 0;
	}
	free(copy);
	return found;
}

#define REQUIRE_TSHARK()                                                \
	NST_CHECK_(tshark[0], CU_TRUE,                                  \
		   "tshark is not installed (scripts/lib.sh lists it; " \
		   "CI installs it)")

/* Run tshark on path with the extra arguments; its output in out. */
static int run_tshark(const char *path, const char *const *extra)
{
	const char *argv[64] = {tshark, "-r", path, "--disable-protocol", "rpcordma"};
	size_t n = 5;

	for (; extra && *extra && n < 63; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	return nst_run(argv, out, sizeof(out), 60000);
}

/* The lines of out that are tshark's records (not its warnings): those
 * starting with a digit.  Each call gives the next one, NULL at the end. */
static char *next_record(char **cursor)
{
	char *line, *nl;

	while (**cursor) {
		line = *cursor;
		nl = strchr(line, '\n');
		if (nl) {
			*nl = '\0';
			*cursor = nl + 1;
		} else {
			*cursor = line + strlen(line);
		}
		if (line[0] >= '0' && line[0] <= '9')
			return line;
	}
	return NULL;
}

/* Split a tab-separated line in place. */
static size_t split(char *line, char **fields, size_t max)
{
	size_t n = 0;

	while (n < max) {
		fields[n++] = line;
		line = strchr(line, '\t');
		if (!line)
			break;
		*line++ = '\0';
	}
	return n;
}

static uint64_t num(const char *s)
{
	return strtoull(s, NULL, 0);
}

enum {
	T_NUMBER,
	T_PROTOCOLS,
	T_OPCODE,
	T_PSN,
	T_DESTQP,
	T_VA,
	T_RKEY,
	T_DMALEN,
	T_SYNDROME,
	T_ATTR,
	T_ICRC,
	T_COMMENT,
	T_CRC_FLAG,
	T_COUNT
};

/*
 * tshark's view of every frame of path, compared field by field with the
 * decoding here; frame.comment and the CRC-error flag are stored.  Also:
 * no malformed frame.
 */
static void compare_with_tshark(const char *path)
{
	static const char *const fields[] = {
	    "-T", "fields",
	    "-E", "occurrence=f",
	    "-e", "frame.number",
	    "-e", "frame.protocols",
	    "-e", "infiniband.bth.opcode",
	    "-e", "infiniband.bth.psn",
	    "-e", "infiniband.bth.destqp",
	    "-e", "infiniband.reth.va",
	    "-e", "infiniband.reth.r_key",
	    "-e", "infiniband.reth.dmalen",
	    "-e", "infiniband.aeth.syndrome",
	    "-e", "infiniband.mad.attributeid",
	    "-e", "infiniband.invariant.crc",
	    "-e", "frame.comment",
	    "-e", "frame.packet_flags_crc_error",
	    NULL,
	};
	static const char *const malformed[] = {"-Y", "_ws.malformed", "-T", "fields",
						"-e", "frame.number",  NULL};
	char *cursor = out, *line, *t[T_COUNT];
	size_t seen = 0;

	REQUIRE_TSHARK();
	NST_REQUIRE_EQ(run_tshark(path, fields), 0);
	while ((line = next_record(&cursor))) {
		struct frame *f;
		uint32_t icrc;

		NST_REQUIRE_EQ(split(line, t, T_COUNT), T_COUNT);
		NST_REQUIRE(num(t[T_NUMBER]) == seen + 1 && seen < nframes);
		f = &frames[seen++];
		NST_CHECK_(strstr(t[T_PROTOCOLS], ":udp:infiniband") != NULL, CU_FALSE,
			   "frame %zu decoded as InfiniBand (protocols %.200s)", seen,
			   t[T_PROTOCOLS]);
		NST_EQ(num(t[T_OPCODE]), f->opcode);
		NST_EQ(num(t[T_PSN]), f->psn);
		NST_EQ(num(t[T_DESTQP]), f->destqp);
		NST_EQ(*t[T_VA] != '\0', f->reth);
		NST_EQ_U(num(t[T_VA]), f->va);
		NST_EQ_U(num(t[T_RKEY]), f->rkey);
		NST_EQ(num(t[T_DMALEN]), f->dmalen);
		NST_EQ(*t[T_SYNDROME] != '\0', f->aeth);
		NST_EQ(num(t[T_SYNDROME]), f->syndrome);
		if (f->opcode == OP_UD_SEND_ONLY)
			NST_EQ(num(t[T_ATTR]), f->cm_attr);
		/* tshark shows the ICRC's 4 bytes as a big-endian number. */
		icrc = (uint32_t)num(t[T_ICRC]);
		NST_EQ_U(__builtin_bswap32(icrc), nst_wire_icrc(f->data, f->len));
		snprintf(f->comment, sizeof(f->comment), "%s", t[T_COMMENT]);
		f->crc_flag = !strcmp(t[T_CRC_FLAG], "1") || !strcmp(t[T_CRC_FLAG], "True");
	}
	NST_EQ(seen, nframes);
	NST_REQUIRE_EQ(run_tshark(path, malformed), 0);
	cursor = out;
	line = next_record(&cursor);
	NST_CHECK_(line == NULL, CU_FALSE,
		   "tshark finds no malformed frame in %.200s (first: %.100s)", path,
		   line ? line : "");
}

/* ---- Captures ---------------------------------------------------------------------- */

/* Start `nicsim capture --dir dir ARGS...` with stdout to stdout_fd (or
 * /dev/null) and stderr to dir/capture.log, and wait until it is attached. */
static pid_t capture_start(const char *const *args, int stdout_fd)
{
	char log[600];
	pid_t pid;

	snprintf(log, sizeof(log), "%s/capture.log", dir);
	pid = nst_capture_spawn(dir, args, stdout_fd, log, true);
	NST_REQUIRE_GT(pid, 0);
	NST_CHECK_(nst_capture_attached(dir, pid, WAIT_MS), CU_TRUE,
		   "the capture attached (log: %.300s)", log);
	return pid;
}

/* Wait for a capture to end (after sig, if not 0); its exit status, or -1
 * if it was killed; its messages in log_text. */
static int capture_end(pid_t pid, int sig, char *log_text, size_t size)
{
	char log[600];
	int status, fd;
	ssize_t n;

	if (sig)
		kill(pid, sig);
	status = nst_wait(pid, WAIT_MS);
	if (status == -ETIMEDOUT) {
		kill(pid, SIGKILL);
		nst_wait(pid, 5000);
	}
	snprintf(log, sizeof(log), "%s/capture.log", dir);
	fd = open(log, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, log_text, size - 1) : -1;
	if (fd >= 0)
		close(fd);
	log_text[n > 0 ? n : 0] = '\0';
	return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Enhanced packet blocks in the pcapng file so far (a block the capture is
 * still writing is not counted). */
static size_t pcapng_frames(const char *file)
{
	static uint8_t buf[16 << 20];
	size_t len = 0, off = 0, n = 0;
	ssize_t r;
	int fd = open(file, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	while (len < sizeof(buf) && (r = read(fd, buf + len, sizeof(buf) - len)) > 0)
		len += (size_t)r;
	close(fd);
	while (off + 12 <= len) {
		uint32_t type, blen;

		memcpy(&type, buf + off, 4);
		memcpy(&blen, buf + off + 4, 4);
		if (blen < 12 || blen % 4 || off + blen > len)
			break;
		n += type == 6;
		off += blen;
	}
	return n;
}

/* Frames NICs A and B have sent so far. */
static uint64_t sent_ab(void)
{
	return nst_nic_stat(sock_a, NST_STAT(tx_frames)) +
	       nst_nic_stat(sock_b, NST_STAT(tx_frames));
}

struct caught_up {
	const char *file;
	uint64_t want;
	size_t got;
};

static bool has_frames(void *arg)
{
	struct caught_up *c = arg;

	c->got = pcapng_frames(c->file);
	return c->got >= c->want;
}

/* Wait (bounded) until the pcapng capture in file holds at least the frames
 * A and B sent since they had sent base: the capture has caught up. */
static void capture_caught_up(const char *file, uint64_t base)
{
	struct caught_up c = {.file = file, .want = sent_ab() - base};

	(void)nst_wait_until(has_frames, &c, WAIT_MS, 2);
	NST_GE(c.got, c.want);
}

/* ---- Traffic ------------------------------------------------------------------------ */

struct pair {
	struct nic_host *ha, *hb;
	struct nst_qp a, b;
};

static uint8_t *map(size_t n)
{
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	NST_REQUIRE(p != MAP_FAILED);
	return p;
}

static void connect_pair(struct pair *p, const char *sock_of_b, uint32_t b_addr)
{
	NST_REQUIRE_EQ(nic_host_attach(sock_a, &p->ha), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_of_b, &p->hb), 0);
	NST_REQUIRE_EQ(nst_qp_create(p->ha, 0, &p->a), 0);
	NST_REQUIRE_EQ(nst_qp_create(p->hb, 0, &p->b), 0);
	NST_REQUIRE_EQ(nst_connect_pair(&p->a, &p->b, b_addr, next_port++), 0);
}

/* Post a work request on qp with one scatter/gather element. */
static void post(struct nst_qp *qp, uint8_t op, void *buf, uint32_t len, uint32_t lkey,
		 uint64_t rva, uint32_t rkey)
{
	struct nic_send_wqe w = {.wr_id = len, .opcode = op, .num_sge = 1};

	w.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = len, .lkey = lkey};
	w.remote_va = rva;
	w.rkey = rkey;
	NST_REQUIRE_EQ(nst_post_send(qp, &w), 0);
}

static void post_recv(struct nst_qp *qp, void *buf, uint32_t len, uint32_t lkey)
{
	struct nic_recv_wqe r = {.wr_id = len, .num_sge = 1};

	r.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = len, .lkey = lkey};
	NST_REQUIRE_EQ(nst_post_recv(qp, &r), 0);
}

/* The next completion of qp must have status want. */
static void completes(struct nst_qp *qp, int want)
{
	struct nic_cqe c;

	NST_REQUIRE_EQ(nst_poll_cq(qp, &c, WAIT_MS), 0);
	NST_EQ(c.status, want);
}

/* Change link A -> B: the fields of cfg that fields selects. */
static void set_link_ab(const struct fab_link_config *cfg, uint32_t fields)
{
	struct fab *f;

	NST_REQUIRE_EQ(fab_open(dir, &f), 0);
	NST_EQ(fab_link_set(f, addr_a, addr_b, cfg, fields), 0);
	fab_close(f);
}

/* Drop-nth on link A -> B: the nth frame with opcode to qpn (0: off). */
static void drop_nth(uint32_t nth, uint32_t opcode, uint32_t qpn)
{
	struct fab_link_config cfg;

	fab_link_config_default(&cfg);
	cfg.nth = nth;
	cfg.nth_opcode = opcode;
	cfg.nth_qpn = qpn;
	set_link_ab(&cfg, FAB_LF_NTH);
}

/* ---- The sequence ----------------------------------------------------------------- */

/* What the next expected frame looks like: -1 for "any". */
struct want {
	const char *what;
	uint32_t src;
	int opcode;
	int64_t psn, qp;
	int syn_lo, syn_hi; /* AETH syndrome range */
	int cm_attr;
	const char *comment; /* its comment contains this (NULL: anything) */
};

#define ANY -1

/* The first frame from index *i on that matches w (*i moves past it), or
 * the test fails. */
static struct frame *expect(size_t *i, const struct want *w)
{
	for (; *i < nframes; (*i)++) {
		struct frame *f = &frames[*i];

		if (f->src != w->src || (w->opcode != ANY && f->opcode != w->opcode) ||
		    (w->psn != ANY && f->psn != (uint32_t)w->psn) ||
		    (w->qp != ANY && f->destqp != (uint32_t)w->qp) ||
		    (w->syn_lo != ANY &&
		     (!f->aeth || f->syndrome < w->syn_lo || f->syndrome > w->syn_hi)) ||
		    (w->cm_attr != ANY && f->cm_attr != w->cm_attr) ||
		    (w->comment && !strstr(f->comment, w->comment)))
			continue;
		return &frames[(*i)++];
	}
	NST_CHECK_(false, CU_TRUE, "no frame in the capture: %s", w->what);
	return NULL;
}

/* A CM message (UD SEND Only to QP 1) with attribute attr. */
static void cm(size_t *i, const char *what, uint32_t src, int attr)
{
	const struct want w = {what, src, OP_UD_SEND_ONLY, ANY, 1, ANY, ANY, attr, NULL};

	expect(i, &w);
}

/* An RC frame with opcode, PSN (24 bits of psn) and destination QP. */
static struct frame *rc(size_t *i, const char *what, uint32_t src, int opcode, uint32_t psn,
			uint32_t qp, const char *comment)
{
	const struct want w = {what, src, opcode, psn & 0xffffff, qp, ANY, ANY, ANY, comment};

	return expect(i, &w);
}

/* The same with an AETH whose syndrome is within [lo, hi]. */
static void acked(size_t *i, const char *what, uint32_t src, int opcode, uint32_t psn, uint32_t qp,
		  int lo, int hi)
{
	const struct want w = {what, src, opcode, psn & 0xffffff, qp, lo, hi, ANY, NULL};

	expect(i, &w);
}

/* AETH syndromes: ACK (any credit count), RNR NAK (any timer), NAKs. */
#define SYN_ACK 0x00, 0x1f
#define SYN_RNR 0x20, 0x3f
#define SYN_PSN_SEQ 0x60, 0x60
#define SYN_ACCESS 0x62, 0x62

static void test_two_hosts_every_kind_of_frame(void)
{
	const size_t big = 64u << 10;
	const uint32_t write_len = 3 * MTU + 100, read_len = 2 * MTU + 50;
	char file[600], log[4096];
	uint8_t *src = map(big), *dst = map(big), *back = map(big);
	uint32_t lk, bk, dmr, rkey, p0, forged;
	uint64_t rnr, cm_a, det_b;
	struct frame *f;
	struct pair p;
	struct nic_event ev;
	char *cursor, *line;
	size_t i = 0, j;
	pid_t cap;

	REQUIRE_TSHARK();
	snprintf(file, sizeof(file), "%s/all.pcapng", dir);
	cap = capture_start((const char *const[]){"-w", file, NULL}, -1);

	/* Set-up, SEND, WRITE, READ. */
	connect_pair(&p, sock_b, addr_b);
	lk = nst_reg(p.ha, src, big, 0);
	bk = nst_reg(p.ha, back, big, NIC_ACCESS_LOCAL_WRITE);
	dmr = nst_reg(p.hb, dst, big, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_MW_BIND);
	rkey = nst_window(p.hb, dmr, dst, big, NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE,
			  p.b.qpn);
	NST_REQUIRE(lk && bk && dmr && rkey);
	nst_fill(src, big, 3);
	post_recv(&p.b, dst, MTU, dmr);
	post(&p.a, NIC_WR_SEND, src, 100, lk, 0, 0);
	completes(&p.a, NIC_WC_SUCCESS);
	completes(&p.b, NIC_WC_SUCCESS);
	post(&p.a, NIC_WR_RDMA_WRITE, src, write_len, lk, (uintptr_t)dst, rkey);
	completes(&p.a, NIC_WC_SUCCESS);
	post(&p.a, NIC_WR_RDMA_READ, back, read_len, bk, (uintptr_t)dst + 8, rkey);
	completes(&p.a, NIC_WC_SUCCESS);
	NST_EQ(memcmp(back, src + 8, read_len), 0);

	/* A WRITE whose middle packet the link drops: a PSN sequence error
	 * NAK, then the requester goes back. */
	drop_nth(1, OP_WRITE_MIDDLE, p.b.qpn);
	post(&p.a, NIC_WR_RDMA_WRITE, src, 3 * MTU, lk, (uintptr_t)dst + 4 * MTU, rkey);
	completes(&p.a, NIC_WC_SUCCESS);
	NST_EQ(memcmp(dst + 4 * MTU, src, 3 * MTU), 0);
	drop_nth(0, FAB_ANY, FAB_ANY);

	/* A SEND before the receive is posted: RNR NAKs until it is (the
	 * receive is posted once A has had one). */
	rnr = nst_nic_stat(sock_a, NST_STAT(rnr_naks));
	post(&p.a, NIC_WR_SEND, src, 64, lk, 0, 0);
	NST_GE(nst_wait_nic_stat(sock_a, NST_STAT(rnr_naks), rnr + 1, WAIT_MS), rnr + 1);
	post_recv(&p.b, dst, MTU, dmr);
	completes(&p.a, NIC_WC_SUCCESS);
	completes(&p.b, NIC_WC_SUCCESS);

	/* A forged key: remote access error, both QPs in error. */
	forged = rkey ^ 0x55;
	post(&p.a, NIC_WR_RDMA_WRITE, src, 200, lk, (uintptr_t)dst, forged);
	completes(&p.a, NIC_WC_REM_ACCESS_ERR);
	NST_REQUIRE_EQ(nst_next_event(p.hb, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_QP_ERROR);

	/* Tear-down: each context's end disconnects its QP.  A's DREQ, then
	 * B's DREP back at A (a CM message A receives), before B's context
	 * goes; B's QP is closed by then, so B's end sends nothing. */
	cm_a = nst_nic_stat(sock_a, NST_STAT(cm_rx));
	det_b = nst_nic_stat(sock_b, NST_STAT(detaches));
	nic_host_detach(p.ha);
	NST_GE(nst_wait_nic_stat(sock_a, NST_STAT(cm_rx), cm_a + 1, WAIT_MS), cm_a + 1);
	nic_host_detach(p.hb);
	NST_GE(nst_wait_nic_stat(sock_b, NST_STAT(detaches), det_b + 1, WAIT_MS), det_b + 1);
	NST_EQ(capture_end(cap, SIGINT, log, sizeof(log)), 0);
	NST_CHECK_(strstr(log, "frames captured, 0 not captured") != NULL, CU_FALSE,
		   "capture summary: %.400s", log);

	frames_load(file);
	NST_REQUIRE_GT(nframes, 20);
	compare_with_tshark(file);
	for (j = 0; j < nframes; j++)
		NST_CHECK_(frames[j].icrc_ok, CU_FALSE, "frame %zu: ICRC matches", j + 1);

	/* The expected frames, in order. */
	cm(&i, "CM REQ", addr_a, CM_REQ);
	/* tshark's reading of the REP's starting PSN: the first PSN B expects,
	 * so A's first SEND's (the REQ's is the first PSN A expects). */
	NST_REQUIRE_EQ(
	    run_tshark(file, (const char *const[]){"-Y", "infiniband.cm.rep", "-T", "fields", "-e",
						   "infiniband.cm.rep.startpsn", NULL}),
	    0);
	cursor = out;
	line = next_record(&cursor);
	NST_REQUIRE(line != NULL);
	p0 = (uint32_t)num(line);
	cm(&i, "CM REP", addr_b, CM_REP);
	cm(&i, "CM RTU", addr_a, CM_RTU);
	rc(&i, "SEND Only", addr_a, OP_SEND_ONLY, p0, p.b.qpn, NULL);
	acked(&i, "its ACK", addr_b, OP_ACK, p0, p.a.qpn, SYN_ACK);
	f = rc(&i, "WRITE First", addr_a, OP_WRITE_FIRST, p0 + 1, p.b.qpn, NULL);
	NST_EQ_U(f->va, (uintptr_t)dst);
	NST_EQ_U(f->rkey, rkey);
	NST_EQ(f->dmalen, write_len);
	rc(&i, "WRITE Middle", addr_a, OP_WRITE_MIDDLE, p0 + 2, p.b.qpn, NULL);
	rc(&i, "WRITE Middle", addr_a, OP_WRITE_MIDDLE, p0 + 3, p.b.qpn, NULL);
	rc(&i, "WRITE Last", addr_a, OP_WRITE_LAST, p0 + 4, p.b.qpn, NULL);
	acked(&i, "its ACK", addr_b, OP_ACK, p0 + 4, p.a.qpn, SYN_ACK);
	f = rc(&i, "READ Request", addr_a, OP_READ_REQUEST, p0 + 5, p.b.qpn, NULL);
	NST_EQ_U(f->va, (uintptr_t)dst + 8);
	NST_EQ_U(f->rkey, rkey);
	NST_EQ(f->dmalen, read_len);
	acked(&i, "READ Response First", addr_b, OP_READ_RESP_FIRST, p0 + 5, p.a.qpn, SYN_ACK);
	rc(&i, "READ Response Middle", addr_b, OP_READ_RESP_MIDDLE, p0 + 6, p.a.qpn, NULL);
	acked(&i, "READ Response Last", addr_b, OP_READ_RESP_LAST, p0 + 7, p.a.qpn, SYN_ACK);
	f = rc(&i, "WRITE First", addr_a, OP_WRITE_FIRST, p0 + 8, p.b.qpn, NULL);
	NST_EQ(f->dmalen, 3 * MTU);
	j = i;
	rc(&i, "WRITE Middle dropped", addr_a, OP_WRITE_MIDDLE, p0 + 9, p.b.qpn,
	   "nicsim: dropped (drop-nth rule)");
	NST_EQ(i, j + 1); /* right after the First */
	rc(&i, "WRITE Last", addr_a, OP_WRITE_LAST, p0 + 10, p.b.qpn, NULL);
	acked(&i, "NAK: PSN sequence error", addr_b, OP_ACK, p0 + 9, p.a.qpn, SYN_PSN_SEQ);
	rc(&i, "WRITE Middle again", addr_a, OP_WRITE_MIDDLE, p0 + 9, p.b.qpn,
	   "nicsim: retransmission");
	rc(&i, "WRITE Last again", addr_a, OP_WRITE_LAST, p0 + 10, p.b.qpn, "retransmission");
	acked(&i, "its ACK", addr_b, OP_ACK, p0 + 10, p.a.qpn, SYN_ACK);
	rc(&i, "SEND Only", addr_a, OP_SEND_ONLY, p0 + 11, p.b.qpn, NULL);
	acked(&i, "RNR NAK", addr_b, OP_ACK, p0 + 11, p.a.qpn, SYN_RNR);
	rc(&i, "SEND Only again", addr_a, OP_SEND_ONLY, p0 + 11, p.b.qpn, "retransmission");
	acked(&i, "its ACK", addr_b, OP_ACK, p0 + 11, p.a.qpn, SYN_ACK);
	f = rc(&i, "WRITE Only, forged key", addr_a, OP_WRITE_ONLY, p0 + 12, p.b.qpn, NULL);
	NST_EQ_U(f->rkey, forged);
	NST_EQ(f->dmalen, 200);
	acked(&i, "NAK: remote access error", addr_b, OP_ACK, p0 + 12, p.a.qpn, SYN_ACCESS);
	cm(&i, "CM DREQ", addr_a, CM_DREQ);
	cm(&i, "CM DREP", addr_b, CM_DREP);
	/* Nothing was corrupted or duplicated: no such flags or comments. */
	for (j = 0; j < nframes; j++) {
		NST_TRUE(!frames[j].crc_flag);
		NST_TRUE(!strstr(frames[j].comment, "duplicate"));
	}
	frames_free();
	munmap(src, big);
	munmap(dst, big);
	munmap(back, big);
}

/* Fault rules on link A -> B, in parts per billion. */
static void faults(uint32_t loss, uint32_t dup, uint32_t corrupt, uint32_t delay)
{
	struct fab_link_config cfg;

	fab_link_config_default(&cfg);
	cfg.loss_ppb = loss;
	cfg.dup_ppb = dup;
	cfg.corrupt_ppb = corrupt;
	cfg.delay_ppb = delay;
	cfg.delay_ns = delay ? 20000 : 0;
	set_link_ab(&cfg,
		    FAB_LF_LOSS | FAB_LF_DUP | FAB_LF_CORRUPT | FAB_LF_DELAY | FAB_LF_DELAY_PPB);
}

static struct fab_link_stats link_ab(void)
{
	struct fab_link_stats st;
	struct fab *f;

	NST_REQUIRE_EQ(fab_open(dir, &f), 0);
	NST_REQUIRE_EQ(fab_link_stats(f, addr_a, addr_b, &st), 0);
	fab_close(f);
	return st;
}

static size_t count_comment(const char *text)
{
	size_t n = 0;

	for (size_t i = 0; i < nframes; i++)
		n += strstr(frames[i].comment, text) != NULL;
	return n;
}

/* The same, without the copies the dup rule made (they carry the marks of
 * their original too). */
static size_t count_originals(const char *text)
{
	size_t n = 0;

	for (size_t i = 0; i < nframes; i++)
		n += strstr(frames[i].comment, text) && !strstr(frames[i].comment, "duplicate");
	return n;
}

static void test_fault_marks_in_pcapng(void)
{
	const size_t len = 64u << 10;
	struct fab_link_stats st0, st1;
	uint8_t *src = map(len), *dst = map(len);
	char file[600], log[4096];
	size_t i;
	uint32_t lk, dmr, rkey;
	uint64_t sent0;
	struct pair p;
	pid_t cap;

	REQUIRE_TSHARK();
	connect_pair(&p, sock_b, addr_b);
	lk = nst_reg(p.ha, src, len, 0);
	dmr = nst_reg(p.hb, dst, len, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_MW_BIND);
	rkey = nst_window(p.hb, dmr, dst, len, NIC_ACCESS_REMOTE_WRITE, p.b.qpn);
	NST_REQUIRE(lk && dmr && rkey);
	nst_fill(src, len, 11);
	snprintf(file, sizeof(file), "%s/faults.pcapng", dir);
	cap = capture_start((const char *const[]){"-w", file, NULL}, -1);
	st0 = link_ab();
	sent0 = sent_ab();
	faults(30000000, 30000000, 20000000, 30000000); /* 3 %, 3 %, 2 %, 3 % */
	/* 64 KiB at a time, each once the capture has caught up: it keeps up
	 * however little CPU it gets. */
	for (int k = 0; k < 40; k++) {
		post(&p.a, NIC_WR_RDMA_WRITE, src, (uint32_t)len, lk, (uintptr_t)dst, rkey);
		completes(&p.a, NIC_WC_SUCCESS);
		capture_caught_up(file, sent0);
	}
	faults(0, 0, 0, 0);
	st1 = link_ab();
	NST_EQ(memcmp(dst, src, len), 0);
	NST_EQ(capture_end(cap, SIGINT, log, sizeof(log)), 0);
	NST_CHECK_(strstr(log, " 0 not captured") != NULL, CU_FALSE, "capture summary: %.400s",
		   log);
	frames_load(file);
	compare_with_tshark(file);

	/* Each mark as often as the link counted it. */
	NST_EQ(count_comment("dropped (loss rule)"), st1.tx.dropped_loss - st0.tx.dropped_loss);
	NST_EQ(count_comment("duplicate (dup rule)"), st1.tx.duplicated - st0.tx.duplicated);
	NST_EQ(count_originals("delayed (delay rule)"), st1.tx.delayed - st0.tx.delayed);
	NST_GT(st1.tx.dropped_loss, st0.tx.dropped_loss);
	NST_GT(st1.tx.duplicated, st0.tx.duplicated);
	NST_GT(count_comment("retransmission"), 0);
	/* Corrupted frames: flagged, commented, and their ICRC fails; every
	 * other frame's ICRC holds. */
	for (i = 0; i < nframes; i++) {
		bool corrupt = strstr(frames[i].comment, "corrupted (corrupt rule") != NULL;

		NST_EQ(frames[i].crc_flag, corrupt);
		NST_EQ(frames[i].icrc_ok, !corrupt);
	}
	NST_EQ(count_originals("corrupted (corrupt rule"), st1.tx.corrupted - st0.tx.corrupted);
	NST_GT(st1.tx.corrupted, st0.tx.corrupted);
	printf("\n    %zu frames: %zu lost, %zu duplicated, %zu corrupted, %zu delayed, %zu "
	       "retransmitted\n",
	       nframes, count_comment("dropped (loss"), count_comment("duplicate"),
	       count_originals("corrupted"), count_originals("delayed"),
	       count_comment("retransmission"));
	frames_free();
	nic_host_detach(p.ha);
	nic_host_detach(p.hb);
	munmap(src, len);
	munmap(dst, len);
}

/* ---- pcap, filters, count ---------------------------------------------------------- */

static void test_pcap_filters_snaplen_count(void)
{
	uint8_t *buf = map(1 << 16);
	char file[600], log[4096], qp[16];
	uint32_t magic = 0, lk, rk;
	uint64_t cm_a;
	struct pair ab, ac;
	pid_t cap;
	int fd;

	REQUIRE_TSHARK();
	connect_pair(&ab, sock_b, addr_b);
	connect_pair(&ac, sock_c, addr_c);
	lk = nst_reg(ab.ha, buf, 1 << 16, 0);
	rk = nst_reg(ab.hb, buf, 1 << 16, NIC_ACCESS_LOCAL_WRITE);
	NST_REQUIRE(lk && rk);

	/* Only SENDs to B's QP, 80 bytes of each, and stop after 3. */
	snprintf(file, sizeof(file), "%s/sends.pcap", dir);
	snprintf(qp, sizeof(qp), "%u", ab.b.qpn);
	cap = capture_start((const char *const[]){"-w", file, "--host", ADDR_B, "--qp", qp,
						  "--opcode", "send-only", "--snaplen", "80",
						  "--count", "3", NULL},
			    -1);
	for (int k = 0; k < 5; k++) {
		post_recv(&ab.b, buf, 1 << 16, rk);
		post(&ab.a, NIC_WR_SEND, buf, 1000 + (uint32_t)k, lk, 0, 0);
		completes(&ab.a, NIC_WC_SUCCESS);
		completes(&ab.b, NIC_WC_SUCCESS);
	}
	/* It stops by itself after the third. */
	NST_EQ(capture_end(cap, 0, log, sizeof(log)), 0);
	NST_CHECK_(strstr(log, "3 frames captured") != NULL, CU_FALSE, "summary: %.400s", log);
	fd = open(file, O_RDONLY);
	NST_REQUIRE_GE(fd, 0);
	NST_EQ(read(fd, &magic, 4), 4);
	close(fd);
	NST_EQ_U(magic, 0xa1b23c4du); /* libpcap's nanosecond pcap */
	frames_load(file);
	NST_REQUIRE_EQ(nframes, 3);
	for (size_t i = 0; i < nframes; i++) {
		NST_EQ(frames[i].caplen, 80);
		NST_EQ(frames[i].opcode, OP_SEND_ONLY);
		NST_EQ(frames[i].destqp, ab.b.qpn);
		NST_EQ_U(frames[i].dst, addr_b);
		NST_GT(frames[i].len, 1000);
	}
	REQUIRE_TSHARK();
	NST_REQUIRE_EQ(run_tshark(file, (const char *const[]){"-T", "fields", "-e", "frame.len",
							      "-e", "frame.cap_len", "-e",
							      "infiniband.bth.opcode", NULL}),
		       0);
	{
		char *cursor = out, *line, *t[3];
		size_t n = 0;

		while ((line = next_record(&cursor))) {
			NST_REQUIRE_EQ(split(line, t, 3), 3);
			NST_EQ(num(t[0]), frames[n].len);
			NST_EQ(num(t[1]), 80);
			NST_EQ(num(t[2]), OP_SEND_ONLY);
			n++;
		}
		NST_EQ(n, 3);
	}

	/* --host: the frames of the pair A-C only. */
	snprintf(file, sizeof(file), "%s/c.pcap", dir);
	cap = capture_start((const char *const[]){"-w", file, "--host", ADDR_C, NULL}, -1);
	post_recv(&ab.b, buf, 1 << 16, rk);
	post(&ab.a, NIC_WR_SEND, buf, 10, lk, 0, 0);
	completes(&ab.a, NIC_WC_SUCCESS);
	completes(&ab.b, NIC_WC_SUCCESS);
	cm_a = nst_nic_stat(sock_a, NST_STAT(cm_rx));
	nic_host_detach(ac.ha); /* DREQ to C, DREP from C */
	NST_GE(nst_wait_nic_stat(sock_a, NST_STAT(cm_rx), cm_a + 1, WAIT_MS), cm_a + 1);
	NST_EQ(capture_end(cap, SIGTERM, log, sizeof(log)), 0);
	frames_load(file);
	NST_GE(nframes, 2);
	for (size_t i = 0; i < nframes; i++)
		NST_TRUE(frames[i].src == addr_c || frames[i].dst == addr_c);
	frames_free();
	nic_host_detach(ac.hb);
	nic_host_detach(ab.ha);
	nic_host_detach(ab.hb);
	munmap(buf, 1 << 16);
}

/* ---- Bulk transfers: every frame, a stopped capture, filters ----------------------- */

#define BULK (32u << 20) /* bytes of one bulk transfer */
#define BULK_POST (1u << 20)

static struct fab_link_stats link_of(uint32_t src, uint32_t dst)
{
	struct fab_link_stats st;
	struct fab *f;

	NST_REQUIRE_EQ(fab_open(dir, &f), 0);
	NST_REQUIRE_EQ(fab_link_stats(f, src, dst, &st), 0);
	fab_close(f);
	return st;
}

/* Frames offered to the links between A and B, both ways: every frame a
 * port sent or a rule dropped, each of which a capture records. */
static uint64_t offered_ab(void)
{
	return link_of(addr_a, addr_b).tx.frames + link_of(addr_b, addr_a).tx.frames;
}

/* Frames in a pcap or pcapng file, and of them those with BTH opcode op
 * (-1: none counted). */
static size_t count_pcap(const char *path, int op, size_t *with_op)
{
	char err[PCAP_ERRBUF_SIZE] = "";
	struct pcap_pkthdr *h;
	const u_char *d;
	size_t n = 0;
	pcap_t *p;

	*with_op = 0;
	p = pcap_open_offline(path, err);
	NST_CHECK_(p != NULL, CU_TRUE, "libpcap cannot read %s: %s", path, err);
	while (pcap_next_ex(p, &h, &d) == 1) {
		n++;
		*with_op += op >= 0 && h->caplen > 42 && d[42] == op;
	}
	pcap_close(p);
	return n;
}

/* A (registered) and B's window over bulk bytes, connected. */
struct bulk {
	struct pair p;
	uint8_t *src, *dst;
	uint32_t lk, rkey;
};

static void bulk_setup(struct bulk *b)
{
	uint32_t dmr;

	b->src = map(BULK);
	b->dst = map(BULK);
	connect_pair(&b->p, sock_b, addr_b);
	b->lk = nst_reg(b->p.ha, b->src, BULK, 0);
	dmr = nst_reg(b->p.hb, b->dst, BULK, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_MW_BIND);
	b->rkey = nst_window(b->p.hb, dmr, b->dst, BULK, NIC_ACCESS_REMOTE_WRITE, b->p.b.qpn);
	NST_REQUIRE(b->lk && dmr && b->rkey);
	nst_fill(b->src, BULK, 29);
}

/* BULK bytes from A to B by RDMA WRITE, BULK_POST at a time; checked. */
static void bulk_write(struct bulk *b)
{
	memset(b->dst, 0, BULK);
	for (uint32_t off = 0; off < BULK; off += BULK_POST) {
		post(&b->p.a, NIC_WR_RDMA_WRITE, b->src + off, BULK_POST, b->lk,
		     (uintptr_t)b->dst + off, b->rkey);
		completes(&b->p.a, NIC_WC_SUCCESS);
	}
	NST_EQ(memcmp(b->dst, b->src, BULK), 0);
}

static void bulk_done(struct bulk *b)
{
	nic_host_detach(b->p.ha);
	nic_host_detach(b->p.hb);
	munmap(b->src, BULK);
	munmap(b->dst, BULK);
}

/* The count after "text" in the capture's messages (0 if absent). */
static unsigned long long count_before(const char *log, const char *text)
{
	const char *at = strstr(log, text);
	const char *p = at;

	if (!at)
		return 0;
	while (p > log && p[-1] == ' ')
		p--;
	while (p > log && p[-1] >= '0' && p[-1] <= '9')
		p--;
	return strtoull(p, NULL, 10);
}

static void test_bulk_transfer_every_frame(void)
{
	char file[600], log[8192];
	uint64_t before, offered;
	struct bulk b;
	size_t n, ops;
	pid_t cap;

	bulk_setup(&b);
	snprintf(file, sizeof(file), "%s/bulk.pcap", dir);
	before = offered_ab();
	cap = capture_start((const char *const[]){"-w", file, NULL}, -1);
	/* 32 MiB as fast as the NICs go: far more than the capture's rings
	 * hold (1 MiB a port), written to a file. */
	bulk_write(&b);
	offered = offered_ab() - before;
	NST_EQ(capture_end(cap, SIGINT, log, sizeof(log)), 0);
	n = count_pcap(file, -1, &ops);
	printf("\n    32 MiB by RDMA WRITE: %llu frames offered to the links, %zu in the capture; "
	       "%.300s",
	       (unsigned long long)offered, n, log);
	NST_EQ(n, offered);
	NST_EQ(count_before(log, " frames captured"), offered);
	NST_CHECK_(strstr(log, " 0 not captured") != NULL, CU_FALSE, "summary: %.400s", log);
	NST_GT(offered, BULK / MTU);
	unlink(file);
	bulk_done(&b);
}

static void test_stopped_capture_holds_back_for_the_bound(void)
{
	char file[600], log[8192];
	uint64_t before, offered, t0, took;
	unsigned long long captured, missed;
	struct bulk b;
	size_t n, ops;
	pid_t cap;

	bulk_setup(&b);
	snprintf(file, sizeof(file), "%s/stopped.pcap", dir);
	before = offered_ab();
	cap = capture_start((const char *const[]){"-w", file, NULL}, -1);
	NST_REQUIRE_EQ(kill(cap, SIGSTOP), 0);
	/* The capture is stopped: the NICs wait for it for FAB_TAP_STALL_NS
	 * (from its last pass), then leave frames out, and the transfer
	 * completes. */
	t0 = nst_now_ns();
	bulk_write(&b);
	took = nst_now_ns() - t0;
	offered = offered_ab() - before;
	NST_REQUIRE_EQ(kill(cap, SIGCONT), 0);
	NST_EQ(capture_end(cap, SIGINT, log, sizeof(log)), 0);
	captured = count_before(log, " frames captured");
	missed = count_before(log, " not captured,");
	if (!missed)
		missed = count_before(log, " not captured\n");
	n = count_pcap(file, -1, &ops);
	printf("\n    32 MiB with the capture stopped: %.0f ms; %llu frames offered, %zu in the "
	       "capture; %.600s",
	       (double)took / 1e6, (unsigned long long)offered, n, log);
	NST_TRUE(took < FAB_TAP_STALL_NS + 8000000000ull);
	NST_EQ(n, captured);
	NST_GT(missed, 0);
	NST_EQ(captured + missed, offered);
	NST_CHECK_(strstr(log, "not captured because the capture made no progress") != NULL,
		   CU_FALSE, "the summary says why and what to do: %.400s", log);
	NST_EQ(count_before(log, " not captured because the capture made no progress"), missed);
	unlink(file);
	bulk_done(&b);
}

static void test_written_mode_named_in_summary(void)
{
	uint32_t lossy = FAB_TAP_F_LOSSY;
	char file[600], path[600], log[8192];
	unsigned long long missed;
	struct bulk b;
	pid_t cap;
	int fd;

	bulk_setup(&b);
	snprintf(file, sizeof(file), "%s/mode.pcap", dir);
	snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, dir);
	cap = capture_start((const char *const[]){"-w", file, NULL}, -1);
	NST_REQUIRE_EQ(kill(cap, SIGSTOP), 0);
	/* Another process turns the lossless capture's mode lossy while it is
	 * stopped: the NICs leave frames out without waiting, and the summary
	 * must say that the mode was written, not the rings' positions. */
	fd = open(path, O_RDWR | O_CLOEXEC);
	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(pwrite(fd, &lossy, sizeof(lossy), offsetof(struct fab_seg_hdr, tap_flags)),
		       (ssize_t)sizeof(lossy));
	close(fd);
	bulk_write(&b);
	NST_REQUIRE_EQ(kill(cap, SIGCONT), 0);
	NST_EQ(capture_end(cap, SIGINT, log, sizeof(log)), 0);
	printf("\n    %.600s", log);
	missed = count_before(log, " not captured because the NICs found their capture rings full");
	NST_GT(missed, 0);
	NST_CHECK_(strstr(log, "(the capture's mode (lossless) was written by something other "
			       "than nicsim)") != NULL,
		   CU_FALSE, "the summary names the mode: %.400s", log);
	NST_CHECK_(strstr(log, "positions") == NULL, CU_FALSE,
		   "the summary blames no position: %.400s", log);
	unlink(file);
	bulk_done(&b);
}

/* The capture counters of the ports of A and B, summed. */
static struct fab_cap_port_counters cap_counts_ab(void)
{
	struct fab_cap_port_counters a, b;
	struct fab *f;

	NST_REQUIRE_EQ(fab_open(dir, &f), 0);
	NST_REQUIRE_EQ(fab_cap_port_counters(f, addr_a, &a), 0);
	NST_REQUIRE_EQ(fab_cap_port_counters(f, addr_b, &b), 0);
	fab_close(f);
	return (struct fab_cap_port_counters){.records = a.records + b.records,
					      .not_captured = a.not_captured + b.not_captured,
					      .stalled = a.stalled + b.stalled};
}

static void test_killed_capture_holds_no_one(void)
{
	struct fab_cap_port_counters c0, c1;
	struct fab_cap_status cs;
	char file[600];
	struct bulk b;
	struct fab *f;
	pid_t cap;
	int st;

	bulk_setup(&b);
	snprintf(file, sizeof(file), "%s/killed.pcap", dir);
	cap = capture_start((const char *const[]){"-w", file, NULL}, -1);
	c0 = cap_counts_ab();
	/* Killed within its second of grace: the ports must not wait that
	 * second out, nor leave frames out as if it had stalled; they find
	 * its lock gone and turn the tap off. */
	NST_REQUIRE_EQ(kill(cap, SIGKILL), 0);
	st = nst_wait(cap, WAIT_MS);
	NST_TRUE(st >= 0 && WIFSIGNALED(st));
	bulk_write(&b);
	c1 = cap_counts_ab();
	NST_REQUIRE_EQ(fab_open(dir, &f), 0);
	fab_cap_status(f, &cs);
	fab_close(f);
	printf(
	    "\n    a killed capture: %llu records written after, %llu left out, %llu as stalled; "
	    "tap %s\n",
	    (unsigned long long)(c1.records - c0.records),
	    (unsigned long long)(c1.not_captured - c0.not_captured),
	    (unsigned long long)(c1.stalled - c0.stalled), cs.attached ? "still attached" : "off");
	NST_TRUE(!cs.attached);
	NST_EQ(c1.stalled, c0.stalled);
	NST_EQ(c1.not_captured, c0.not_captured);
	unlink(file);
	bulk_done(&b);
}

static void test_lossy_filter_before_drops(void)
{
	char file[600], log[8192];
	struct bulk b;
	size_t n, lasts;
	pid_t cap;

	bulk_setup(&b);
	snprintf(file, sizeof(file), "%s/lasts.pcap", dir);
	/* Lossy, and as little CPU as the capture can be given: the WRITE
	 * Last frames alone (one per post) are few enough never to fill A's
	 * ring, since the frames the filter turns away take no room in it. */
	cap = capture_start((const char *const[]){"-w", file, "--lossy", "--cpu", "1", "--opcode",
						  "RDMA_WRITE_LAST", NULL},
			    -1);
	bulk_write(&b);
	NST_EQ(capture_end(cap, SIGINT, log, sizeof(log)), 0);
	n = count_pcap(file, OP_WRITE_LAST, &lasts);
	printf("\n    32 MiB, --lossy --cpu 1 --opcode RDMA_WRITE_LAST: %zu frames; %.300s", n,
	       log);
	NST_EQ(lasts, n);
	NST_GE(n, BULK / BULK_POST);
	NST_CHECK_(strstr(log, " 0 not captured") != NULL, CU_FALSE, "summary: %.400s", log);
	NST_GT(count_before(log, " filtered out"), BULK / MTU - BULK / BULK_POST);
	unlink(file);
	bulk_done(&b);
}

/* ---- Live into tshark --------------------------------------------------------------- */

/* Whether text has a line that is exactly line. */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static void test_live_into_tshark_and_reader_gone(void)
{
	const char *targv[] = {
	    tshark, "-r", "-", "-l", "-T", "fields", "-e", "infiniband.bth.opcode", NULL};
	uint8_t *buf = map(4096);
	int to_tshark[2], from_tshark[2], status;
	char log[4096], got[8192];
	uint64_t deadline;
	size_t used = 0;
	uint32_t lk, rk;
	struct pair p;
	pid_t cap, ts;

	REQUIRE_TSHARK();
	connect_pair(&p, sock_b, addr_b);
	lk = nst_reg(p.ha, buf, 4096, 0);
	rk = nst_reg(p.hb, buf, 4096, NIC_ACCESS_LOCAL_WRITE);
	NST_REQUIRE(lk && rk);
	NST_REQUIRE_EQ(pipe2(to_tshark, O_CLOEXEC), 0);
	NST_REQUIRE_EQ(pipe2(from_tshark, O_CLOEXEC), 0);
	fflush(NULL);
	ts = fork();
	if (ts == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		dup2(to_tshark[0], STDIN_FILENO);
		dup2(from_tshark[1], STDOUT_FILENO);
		if (null >= 0)
			dup2(null, STDERR_FILENO); /* its warning about running as root */
		execv(targv[0], (char *const *)targv);
		_exit(127);
	}
	NST_REQUIRE_GT(ts, 0);
	close(to_tshark[0]);
	close(from_tshark[1]);
	cap = capture_start((const char *const[]){"-w", "-", NULL}, to_tshark[1]);
	close(to_tshark[1]);

	/* A SEND shows up in tshark's output while the capture runs. */
	post_recv(&p.b, buf, 4096, rk);
	post(&p.a, NIC_WR_SEND, buf, 77, lk, 0, 0);
	completes(&p.a, NIC_WC_SUCCESS);
	completes(&p.b, NIC_WC_SUCCESS);
	deadline = nst_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	fcntl(from_tshark[0], F_SETFL, O_NONBLOCK);
	got[0] = '\0';
	while (!has_line(got, "4") && nst_now_ns() < deadline) {
		ssize_t n = read(from_tshark[0], got + used, sizeof(got) - used - 1);

		if (n > 0)
			used += (size_t)n;
		got[used] = '\0';
		if (n <= 0) {
			struct pollfd pfd = {.fd = from_tshark[0], .events = POLLIN};

			poll(&pfd, 1, 100); /* until tshark writes, bounded by the deadline */
		}
	}
	NST_CHECK_(has_line(got, "4"), CU_FALSE,
		   "tshark showed the SEND Only (opcode 4) live; it printed: %.300s", got);
	NST_TRUE(nst_pid_alive(cap));
	/* The reader goes away: the capture ends by itself, cleanly. */
	kill(ts, SIGKILL);
	nst_wait(ts, WAIT_MS);
	close(from_tshark[0]);
	status = capture_end(cap, 0, log, sizeof(log));
	NST_EQ(status, 0);
	NST_CHECK_(strstr(log, "reader of the output went away") != NULL, CU_FALSE, "log: %.400s",
		   log);
	NST_TRUE(strstr(log, "frames captured") != NULL);
	nic_host_detach(p.ha);
	nic_host_detach(p.hb);
	munmap(buf, 4096);
}

/* ---- Errors ---------------------------------------------------------------------------- */

static int nicsim_out(const char *const *args)
{
	const char *argv[32] = {nst_bin("nicsim")};
	size_t n = 1;

	for (; *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	return nst_run(argv, out, sizeof(out), WAIT_MS);
}

#define NICSIM(...) nicsim_out((const char *const[]){__VA_ARGS__, NULL})
#define OUT_HAS(text) NST_CHECK_(strstr(out, (text)) != NULL, CU_FALSE, "output has \"%s\"", (text))

static void test_usage_and_errors(void)
{
	char empty[600], log[4096];
	pid_t cap;

	NST_EQ(NICSIM("capture", "--help"), 0);
	OUT_HAS("--snaplen N");
	OUT_HAS("docs/capture.md");
	NST_EQ(NICSIM("help", "capture"), 0);
	OUT_HAS("usage: nicsim capture");
	NST_EQ(NICSIM("--help"), 0);
	OUT_HAS("capture");
	NST_EQ(NICSIM("capture", "--dir", dir, "--opcode", "BOGUS"), 2);
	OUT_HAS("--opcode BOGUS");
	NST_EQ(NICSIM("capture", "--dir", dir, "--snaplen", "0"), 2);
	NST_EQ(NICSIM("capture", "--dir", dir, "--host", "10.0.0.1"), 2);
	OUT_HAS("198.18.0.0/15");
	NST_EQ(NICSIM("capture", "--dir", dir, "--format", "csv", "-w", "x"), 2);
	NST_EQ(NICSIM("capture", "--dir", dir, "--hosts", "2"), 2);
	NST_EQ(NICSIM("capture", "--dir", dir, "extra"), 2);
	/* --cpu limits a capture that may leave frames out: --lossy only. */
	NST_EQ(NICSIM("capture", "--dir", dir, "--cpu", "50", "-w", "/dev/null"), 2);
	OUT_HAS("--lossy");
	NST_EQ(NICSIM("capture", "--help"), 0);
	OUT_HAS("--lossy");
	/* No fabric there. */
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	NST_REQUIRE_EQ(mkdir(empty, 0700), 0);
	NST_EQ(NICSIM("capture", "--dir", empty, "-w", "-"), 1);
	OUT_HAS("no fabric in");
	/* A write error is reported, not swallowed. */
	NST_EQ(NICSIM("capture", "--dir", dir, "-w", "/dev/full"), 1);
	OUT_HAS("cannot write /dev/full");
	/* An output that cannot be created: no claim to be capturing first. */
	NST_EQ(NICSIM("capture", "--dir", dir, "-w", "/nonexistent/x.pcap"), 1);
	OUT_HAS("cannot create /nonexistent/x.pcap");
	NST_CHECK_(strstr(out, "capturing the fabric") == NULL, CU_FALSE, "output: %.400s", out);
	/* One capture at a time; one killed leaves the place free. */
	cap = capture_start((const char *const[]){"-w", "/dev/null", NULL}, -1);
	NST_EQ(NICSIM("capture", "--dir", dir, "-w", "/dev/null"), 1);
	OUT_HAS("another capture");
	NST_EQ(capture_end(cap, SIGKILL, log, sizeof(log)), -1);
	cap = capture_start((const char *const[]){"-w", "/dev/null", NULL}, -1);
	NST_EQ(capture_end(cap, SIGTERM, log, sizeof(log)), 0);
	NST_CHECK_(strstr(log, "0 frames captured, 0 not captured") != NULL, CU_FALSE,
		   "log: %.400s", log);
}

/* ---- One name per counter ------------------------------------------------------------ */

/* The number after the word name in text (name followed by spaces): the
 * value a command printed for a counter; -1 if it printed none. */
static long long value_after(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; (p = strstr(p, name)); p++) {
		if ((p == text || p[-1] == ' ' || p[-1] == '\n') && p[n] == ' ') {
			p += n;
			while (*p == ' ')
				p++;
			if (*p >= '0' && *p <= '9')
				return strtoll(p, NULL, 10);
		}
	}
	return -1;
}

/* The two lines of link show's text from the one starting with head: the
 * link's settings and its counters ("" if absent). */
static const char *link_lines(const char *text, const char *head)
{
	static char lines[1024];
	const char *at = strstr(text, head), *end;

	lines[0] = '\0';
	if (!at)
		return lines;
	end = strchr(at, '\n');
	end = end ? strchr(end + 1, '\n') : NULL;
	snprintf(lines, sizeof(lines), "%.*s", end ? (int)(end - at) : (int)strlen(at), at);
	return lines;
}

/*
 * The sends the fabric refuses for a full ring are dest_ring_full in both
 * `nicsim stats` (per NIC) and `nicsim link show` (per link), with the same
 * value: a fabric whose rings hold 4 frames, NIC B stopped while A writes.
 */
static void test_counter_names_agree(void)
{
	char sub[300], sa[400], sb[400], stats_out[sizeof(out)];
	struct fab_config cfg = {.ring_depth = 4};
	uint32_t a[2] = {addr_a, addr_b};
	long long in_stats, in_link;
	pid_t na, nb;
	struct bulk b;

	snprintf(sub, sizeof(sub), "%s/names", dir);
	NST_REQUIRE_EQ(mkdir(sub, 0700), 0);
	cfg.addrs = a;
	cfg.naddrs = 2;
	NST_REQUIRE_EQ(fab_create(sub, &cfg), 0);
	na = nst_start_nic(sub, ADDR_A, NULL, WAIT_MS);
	nb = nst_start_nic(sub, ADDR_B, NULL, WAIT_MS);
	NST_REQUIRE(na > 0 && nb > 0);
	snprintf(sa, sizeof(sa), "%s/nic-%s.sock", sub, ADDR_A);
	snprintf(sb, sizeof(sb), "%s/nic-%s.sock", sub, ADDR_B);
	b.src = map(BULK_POST);
	b.dst = map(BULK_POST);
	NST_REQUIRE_EQ(nic_host_attach(sa, &b.p.ha), 0);
	NST_REQUIRE_EQ(nic_host_attach(sb, &b.p.hb), 0);
	NST_REQUIRE_EQ(nst_qp_create(b.p.ha, 0, &b.p.a), 0);
	NST_REQUIRE_EQ(nst_qp_create(b.p.hb, 0, &b.p.b), 0);
	NST_REQUIRE_EQ(nst_connect_pair(&b.p.a, &b.p.b, addr_b, next_port++), 0);
	b.lk = nst_reg(b.p.ha, b.src, BULK_POST, 0);
	b.rkey = nst_window(
	    b.p.hb, nst_reg(b.p.hb, b.dst, BULK_POST, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_MW_BIND),
	    b.dst, BULK_POST, NIC_ACCESS_REMOTE_WRITE, b.p.b.qpn);
	NST_REQUIRE(b.lk && b.rkey);
	/* B stopped: A's ring towards it fills after 4 frames, and the fabric
	 * refuses A's next sends until B drains it. */
	NST_REQUIRE_EQ(kill(nb, SIGSTOP), 0);
	post(&b.p.a, NIC_WR_RDMA_WRITE, b.src, BULK_POST, b.lk, (uintptr_t)b.dst, b.rkey);
	NST_GE(nst_wait_nic_stat(sa, NST_STAT(dest_ring_full), 1, WAIT_MS), 1);
	NST_REQUIRE_EQ(kill(nb, SIGCONT), 0);
	completes(&b.p.a, NIC_WC_SUCCESS);
	NST_EQ(memcmp(b.dst, b.src, BULK_POST), 0);
	/* Quiet now: both commands read the same refusals. */
	NST_EQ(NICSIM("stats", "--dir", sub, "--nic", ADDR_A), 0);
	snprintf(stats_out, sizeof(stats_out), "%s", out);
	NST_EQ(NICSIM("link", "show", "--dir", sub, "--nic", ADDR_A), 0);
	in_stats = value_after(stats_out, "dest_ring_full");
	in_link = value_after(link_lines(out, "link " ADDR_A " -> " ADDR_B ":"), "dest_ring_full");
	printf("\n    dest_ring_full: %lld in nicsim stats, %lld in nicsim link show\n", in_stats,
	       in_link);
	NST_GT(in_stats, 0);
	NST_EQ(in_stats, in_link);
	NST_EQ((uint64_t)in_stats, nst_nic_stat(sa, NST_STAT(dest_ring_full)));
	/* The old names, which said "delayed" in one and "dropped" in the
	 * other, are gone. */
	NST_TRUE(!strstr(stats_out, "tx_no_frame") && !strstr(out, "dropped_full"));
	nic_host_detach(b.p.ha);
	nic_host_detach(b.p.hb);
	munmap(b.src, BULK_POST);
	munmap(b.dst, BULK_POST);
	NST_TRUE(nst_stop_clean(na, WAIT_MS));
	NST_TRUE(nst_stop_clean(nb, WAIT_MS));
}

/* ---- NICSIM_CAPTURE -------------------------------------------------------------------- */

/* The child test programs below: a run directory, a fabric, frames, and a
 * verdict.  Run as `test_capture harness-fail` or `harness-pass`. */
static bool harness_fails;
static char harness_dir[256];

/* Make a fabric in fab_dir and send n SEND Only frames from A to B on it,
 * PSNs psn0 on. */
static void harness_frames(const char *fab_dir, int n, uint32_t psn0)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, NULL};
	struct fab_port *pa, *pb;
	struct fab_pkt pkt;
	struct fab *fab;
	struct fab_rx rx;
	uint32_t idx;
	size_t len;
	void *data;

	NST_REQUIRE_EQ(nst_make_fabric(fab_dir, addrs), 0);
	NST_REQUIRE_EQ(fab_open(fab_dir, &fab), 0);
	NST_REQUIRE_EQ(fab_port_open(fab, addr_a, &pa), 0);
	NST_REQUIRE_EQ(fab_port_open(fab, addr_b, &pb), 0);
	for (int k = 0; k < n; k++) {
		NST_REQUIRE_EQ(fab_frame_get(pa, &idx, &data), 0);
		fab_pkt_init(&pkt, OP_SEND_ONLY);
		pkt.src_ip = addr_a;
		pkt.dst_ip = addr_b;
		pkt.dest_qpn = 0x42;
		pkt.psn = psn0 + (uint32_t)k;
		pkt.payload = (const uint8_t *)"hello";
		pkt.payload_len = 5;
		NST_REQUIRE_EQ(fab_pkt_encode(&pkt, data, FAB_SLOT_BYTES, &len), 0);
		NST_REQUIRE_EQ(fab_send(pa, idx, (uint32_t)len, addr_b), 0);
	}
	/* Their records stay in the capture rings, which the capture drains
	 * when it stops. */
	while (fab_recv(pb, &rx) == 0)
		fab_rx_done(pb, rx.idx);
	fab_port_close(pa);
	fab_port_close(pb);
	fab_close(fab);
}

/* Frames on the run directory's fabric, then on a fabric in a directory
 * below it (the capture follows both), then the verdict. */
static void harness_test(void)
{
	char sub[300];

	NST_REQUIRE_EQ(nst_tmpdir(harness_dir, sizeof(harness_dir), "harn"), 0);
	harness_frames(harness_dir, 5, 0);
	snprintf(sub, sizeof(sub), "%s/sub", harness_dir);
	NST_REQUIRE_EQ(mkdir(sub, 0700), 0);
	harness_frames(sub, 3, 5);
	NST_CHECK_(!harness_fails, CU_FALSE, "deliberate failure (harness-fail)");
	nst_done_with_dir(harness_dir);
}

static int harness_main(int argc, char **argv, bool fail)
{
	static const struct nst_test tests[] = {{"harness", harness_test}, {NULL, NULL}};

	harness_fails = fail;
	fab_addr_parse(ADDR_A, &addr_a);
	fab_addr_parse(ADDR_B, &addr_b);
	return nst_main(argc > 2 ? 2 : 1, argv + 1, "harness", tests, NULL, NULL);
}

/* Lines of out that are exactly line. */
static size_t count_lines(const char *line)
{
	static char copy[sizeof(out)];
	char *cursor = copy, *l;
	size_t n = 0;

	snprintf(copy, sizeof(copy), "%s", out);
	while ((l = next_record(&cursor)))
		n += !strcmp(l, line);
	return n;
}

static void test_nicsim_capture_env(void)
{
	const char *argv[] = {"/proc/self/exe", "harness-fail", NULL};
	char root[600], self[PATH_MAX], path[PATH_MAX + 8], *kept, *end, *left;
	struct stat st;
	ssize_t n;

	REQUIRE_TSHARK();
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	NST_REQUIRE_GT(n, 0);
	self[n] = '\0';
	argv[0] = self;
	snprintf(root, sizeof(root), "%s/captures", dir);
	setenv("NICSIM_CAPTURE", root, 1);
	/* A failing test keeps its capture and names it. */
	NST_EQ(nst_run(argv, out, sizeof(out), 60000), 1);
	kept = strstr(out, "capture kept: ");
	NST_CHECK_(kept != NULL, CU_TRUE, "the failing test names its capture: %.400s", out);
	/* It kept its run directory too: ours to remove. */
	left = strstr(out, "test files kept in ");
	NST_REQUIRE(left != NULL);
	left += strlen("test files kept in ");
	end = strchr(left, ' ');
	NST_REQUIRE(end != NULL);
	*end = '\0';
	nst_rmtree(left);
	kept += strlen("capture kept: ");
	end = strchr(kept, ' ');
	NST_REQUIRE(end != NULL);
	*end = '\0';
	NST_TRUE(!strncmp(kept, root, strlen(root)));
	NST_TRUE(strstr(kept, "test_capture-ns-harn-") != NULL);
	NST_REQUIRE_EQ(stat(kept, &st), 0);
	frames_load(kept);
	NST_EQ(nframes, 8);
	for (size_t i = 0; i < nframes; i++) {
		NST_EQ(frames[i].opcode, OP_SEND_ONLY);
		NST_EQ(frames[i].psn, i);
		NST_TRUE(frames[i].icrc_ok);
	}
	frames_free();
	/* The two fabrics are two interfaces of the pcapng file. */
	NST_REQUIRE_EQ(run_tshark(kept, (const char *const[]){"-T", "fields", "-e",
							      "frame.interface_id", NULL}),
		       0);
	NST_EQ(count_lines("0"), 5);
	NST_EQ(count_lines("1"), 3);
	unlink(kept);
	snprintf(path, sizeof(path), "%s.log", kept);
	NST_EQ(unlink(path), 0);
	/* A passing one leaves nothing behind. */
	argv[1] = "harness-pass";
	NST_EQ(nst_run(argv, out, sizeof(out), 60000), 0);
	NST_TRUE(strstr(out, "capture kept") == NULL);
	NST_EQ(rmdir(root), 0); /* empty */
	unsetenv("NICSIM_CAPTURE");
}

/* ---- Suite ------------------------------------------------------------------------------- */

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, ADDR_C, NULL};
	char *socks[] = {sock_a, sock_b, sock_c};
	uint32_t *bin[] = {&addr_a, &addr_b, &addr_c};

	if (!find_tshark())
		tshark[0] = '\0';
	if (nst_tmpdir(dir, sizeof(dir), "cap") < 0 || nst_make_fabric(dir, addrs) < 0)
		return -1;
	for (int k = 0; k < 3; k++) {
		snprintf(socks[k], sizeof(sock_a), "%s/nic-%s.sock", dir, addrs[k]);
		fab_addr_parse(addrs[k], bin[k]);
	}
	return nst_nics_start(dir, nics, NNICS, WAIT_MS) < 0 ? -1 : 0;
}

/* Each test from the NIC as it was started: one a failed test left holding
 * contexts, QPs or TPT entries (or that died) is restarted (nstnic.h). */
static void setup(void)
{
	NST_EQ(nst_nics_ready(dir, nics, NNICS, WAIT_MS), 0);
}

static int clean(void)
{
	bool all = true;

	for (int k = 0; k < 3; k++)
		all &= nst_stop_clean(nics[k].pid, WAIT_MS);
	frames_free();
	if (!all)
		return -1;
	nst_done_with_dir(dir);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"two_hosts_every_kind_of_frame", test_two_hosts_every_kind_of_frame},
	    {"fault_marks_in_pcapng", test_fault_marks_in_pcapng},
	    {"pcap_filters_snaplen_count", test_pcap_filters_snaplen_count},
	    {"bulk_transfer_every_frame", test_bulk_transfer_every_frame},
	    {"stopped_capture_holds_back_for_the_bound",
	     test_stopped_capture_holds_back_for_the_bound},
	    {"killed_capture_holds_no_one", test_killed_capture_holds_no_one},
	    {"written_mode_named_in_summary", test_written_mode_named_in_summary},
	    {"lossy_filter_before_drops", test_lossy_filter_before_drops},
	    {"counter_names_agree", test_counter_names_agree},
	    {"live_into_tshark_and_reader_gone", test_live_into_tshark_and_reader_gone},
	    {"usage_and_errors", test_usage_and_errors},
	    {"nicsim_capture_env", test_nicsim_capture_env},
	    {NULL, NULL},
	};

	if (argc > 1 && !strncmp(argv[1], "harness-", 8))
		return harness_main(argc, argv, !strcmp(argv[1], "harness-fail"));
	/* This program runs its own captures: one per fabric at a time. */
	unsetenv("NICSIM_CAPTURE");
	static const struct nst_suite suite = {
	    .name = "capture", .tests = tests, .init = init, .clean = clean, .setup = setup};

	return nst_run_suite(argc, argv, &suite);
}
