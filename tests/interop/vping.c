/*
 * vping: a peer for nicsim's interoperation checks, run inside the
 * Soft-RoCE (rdma_rxe) virtual machine.  It speaks the protocol of rping
 * (librdmacm's example) over librdmacm and libibverbs, so that it talks to
 * rping itself and to nicsim's own rping, and it adds what rping lacks:
 * buffers of 1 byte to 16 MiB, several sizes in one connection, and keys
 * forged on purpose to check that the peer refuses them.
 *
 * It is compiled in the virtual machine only (the host has no verbs
 * headers), not by the project's build:
 *
 *   gcc -std=gnu11 -O2 -Wall -Wextra -Werror -o vping vping.c -lrdmacm -libverbs
 *
 * Usage:
 *
 *   vping -s [-a ADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V]
 *            [--forge-rkey read|write] [--timeout SECONDS]
 *   vping -c -a ADDR [-I SRCADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V]
 *            [--sizes LIST] [--expect-broken] [--timeout SECONDS]
 *
 *   -s, -c         server or client
 *   -a ADDR        address to listen on (server; default any) or to reach
 *   -I SRCADDR     the client's source address
 *   -p PORT        rdma_cm port in the TCP port space (default 7174)
 *   -C COUNT       client: pings to do (default 1); server: pings the client
 *                  must do before it disconnects (default: any number)
 *   -S SIZE        client: bytes per ping, 1 to 16777216 (default 64)
 *   --sizes LIST   client: one ping per size of the comma-separated LIST,
 *                  in order, in one connection (instead of -S and -C)
 *   -v             print each ping's data (when it is at most 256 bytes)
 *   -V             check each ping's data (the client: the bytes written
 *                  back; the server: the bytes read, against the pattern)
 *   --forge-rkey read|write
 *                  server: invert the low byte of the client's rkey for the
 *                  first RDMA READ (read), or for the first RDMA WRITE after
 *                  a correct READ (write); succeed only if that operation
 *                  completes with IBV_WC_REM_ACCESS_ERR
 *   --expect-broken
 *                  client: succeed only if the connection breaks before the
 *                  pings are done (against a server that forges keys).  It
 *                  prints what it saw, in order: rdma_rxe moves the QP whose
 *                  key was forged to the error state at once, so its
 *                  receive is flushed before the server disconnects
 *   --timeout SECONDS
 *                  bound on each wait for a CM event or a completion
 *                  (default 60)
 *
 * Exit status: 0 success, 1 failure, 2 usage error.  The last line on
 * stdout sums up the run, e.g. "vping: client: 10 pings of 65536 bytes,
 * data verified".
 *
 * The protocol (rping's).  rdma_cm with an RC QP; the connection's
 * responder resources and initiator depth are 1, retry count and RNR retry
 * count 7; no private data.  Every message is a SEND of exactly 16 bytes:
 * a big-endian 64-bit buffer address, 32-bit rkey and 32-bit size.  Each
 * side keeps one receive posted at all times: the first before it connects
 * or accepts, each next one as soon as the previous completes, so always
 * before the send whose answer it awaits.  Ping i (from 0) of SIZE bytes:
 *
 *   1. The client fills its start buffer with the pattern of ping i: the
 *      text "rdma-ping-<i>: " (cut to SIZE - 1 bytes), then the letters
 *      from 65 + i % 58 upward, wrapping from 122 back to 65, and a 0 as
 *      last byte.  It fills its rdma buffer with 0xa5 and sends
 *      {start buffer, its rkey, SIZE}.
 *   2. The server RDMA READs SIZE bytes from there and sends a "go ahead"
 *      (16 bytes whose content means nothing).
 *   3. The client sends {rdma buffer, its rkey, SIZE}.
 *   4. The server RDMA WRITEs the bytes it read there and sends another
 *      "go ahead".
 *   5. The client compares its rdma buffer with its start buffer.
 *
 * After its last ping the client disconnects; the server ends when it sees
 * RDMA_CM_EVENT_DISCONNECTED.  The server learns each ping's size from the
 * message, so a client may change sizes from one ping to the next.
 *
 * One thread: every wait polls the CM event channel and the CQ's
 * completion channel with poll(), bounded by the timeout.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define DEFAULT_PORT 7174
#define DEFAULT_SIZE 64u
#define MAX_SIZE (16u * 1024 * 1024)
#define MAX_SIZES 1024
#define PRINT_MAX 256u /* -v prints a ping's data up to this size */
#define SENTINEL 0xa5
#define RESOLVE_MS 2000
#define GRACE_MS 10000 /* how long a broken client waits to see the rest */
#define CQ_DEPTH 32
#define SQ_DEPTH 16
#define INBOX 8
#define CM_QUEUE 8
#define LOG_LINES 16

#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE 2

enum wrid { WRID_RECV = 1, WRID_SEND, WRID_RDMA };

/* What a data-phase wait ended with. */
enum wait_result {
	WAIT_OK,
	WAIT_DISCONNECTED, /* the peer disconnected (RDMA_CM_EVENT_DISCONNECTED) */
	WAIT_BROKEN,       /* a completion failed, or another CM event came */
	WAIT_TIMEOUT,
	WAIT_ERROR, /* a local call failed or the peer broke the protocol */
};

/* The 16-byte message, as on the wire. */
struct wire_msg {
	uint64_t addr; /* big-endian */
	uint32_t rkey; /* big-endian */
	uint32_t size; /* big-endian */
};

_Static_assert(sizeof(struct wire_msg) == 16, "rping's message is 16 bytes");

/* A received message, in host order. */
struct msg {
	uint64_t addr;
	uint32_t rkey;
	uint32_t size;
};

struct cm_note {
	enum rdma_cm_event_type type;
	int status;
};

struct vp {
	/* Options. */
	bool server;
	const char *addr;
	const char *src;
	unsigned port;
	long count; /* -1: not given */
	uint32_t sizes[MAX_SIZES];
	int nsizes;
	uint32_t size;   /* -S */
	unsigned npings; /* the client's: -C, or the number of --sizes */
	bool sizes_given, size_given;
	bool verbose, validate;
	int forge; /* 0, 'r' or 'w' */
	bool expect_broken;
	int timeout_ms;
	const char *who; /* "client" or "server" */

	/* rdma_cm. */
	struct rdma_event_channel *ec;
	struct rdma_cm_id *listen_id;
	struct rdma_cm_id *id;
	bool connected, disconnect_sent;
	struct cm_note cmq[CM_QUEUE];
	int cmq_n;

	/* Verbs. */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct wire_msg recv_buf, send_buf;
	struct ibv_mr *recv_mr, *send_mr;
	char *start_buf, *rdma_buf, *expect_buf;
	uint32_t buf_size;
	struct ibv_mr *start_mr, *rdma_mr;

	/* Completions seen and not yet consumed. */
	struct msg inbox[INBOX];
	int inbox_n;
	int sends_out;
	bool rdma_done;
	enum ibv_wc_status rdma_status;
	bool recv_failed, send_failed, protocol_error;
	bool hard_failure; /* a completion failed other than by a flush */
	bool disconnected, cm_failed;

	/* What went wrong, in order and when (from t0), for the report of a failure. */
	double t0;
	char log[LOG_LINES][200];
	int log_n;
};

static const char *prog = "vping";

static double now_s(void);

static void say(const struct vp *vp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct vp *vp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An error message on stderr, prefixed with the program and the role. */
static void say(const struct vp *vp, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: %s: ", prog, vp->who);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Keeps one line of what happened, printed if the run fails or breaks. */
static void note(struct vp *vp, const char *fmt, ...)
{
	va_list ap;

	if (vp->log_n >= LOG_LINES)
		return;
	char *line = vp->log[vp->log_n++];
	int n = snprintf(line, sizeof(vp->log[0]), "[%.3f s] ", now_s() - vp->t0);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(vp->log[0]) - (size_t)n, fmt, ap);
	va_end(ap);
}

static void print_log(const struct vp *vp)
{
	for (int i = 0; i < vp->log_n; i++)
		say(vp, "%s", vp->log[i]);
}

static const char *status_text(int status, char *buf, size_t len)
{
	if (status < 0)
		snprintf(buf, len, "status %d: %s", status, strerror(-status));
	else
		snprintf(buf, len, "status %d", status);
	return buf;
}

/* ---- time ---------------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the pattern ----------------------------------------------------------- */

/*
 * Fills buf with the data of ping `ping`: "rdma-ping-<ping>: " cut to the
 * size, letters from 'A' + ping % 58 upward (wrapping from 'z' to 'A'),
 * and a 0 as last byte.
 */
static void fill_pattern(char *buf, uint32_t size, unsigned ping)
{
	int text = snprintf(buf, size, "rdma-ping-%u: ", ping);
	unsigned char c = (unsigned char)(65 + ping % 58);

	for (uint32_t i = text < 0 ? 0 : (uint32_t)text; i < size; i++) {
		buf[i] = (char)c;
		c = c >= 122 ? 65 : c + 1;
	}
	buf[size - 1] = 0;
}

/* Whether size bytes got differ from want; says where, for ping, if so. */
static bool data_differs(struct vp *vp, unsigned ping, const char *got, const char *want,
			 uint32_t size)
{
	uint32_t i = 0;

	if (memcmp(got, want, size) == 0)
		return false;
	while (i < size && got[i] == want[i])
		i++;
	say(vp, "ping %u (%u bytes): data mismatch at byte %u (0x%02x, expected 0x%02x)", ping,
	    size, i, (unsigned char)got[i], (unsigned char)want[i]);
	return true;
}

/* ---- completions and CM events ------------------------------------------ */

static int post_recv(struct vp *vp)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)&vp->recv_buf,
	    .length = sizeof(vp->recv_buf),
	    .lkey = vp->recv_mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = WRID_RECV, .sg_list = &sge, .num_sge = 1};
	struct ibv_recv_wr *bad;
	int rc = ibv_post_recv(vp->qp, &wr, &bad);

	if (rc) {
		say(vp, "ibv_post_recv: %s", strerror(rc));
		return -rc;
	}
	return 0;
}

static void handle_wc(struct vp *vp, const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR)
		vp->hard_failure = true;
	/* The opcode of a failed completion is undefined: wr_id tells the kind. */
	switch (wc->wr_id) {
	case WRID_RECV:
		if (wc->status != IBV_WC_SUCCESS) {
			note(vp, "receive completed with status '%s' (%d)",
			     ibv_wc_status_str(wc->status), wc->status);
			vp->recv_failed = true;
			return;
		}
		if (wc->byte_len != sizeof(struct wire_msg)) {
			note(vp, "received %u bytes, expected %zu", wc->byte_len,
			     sizeof(struct wire_msg));
			vp->protocol_error = true;
			return;
		}
		if (vp->inbox_n >= INBOX) {
			note(vp, "the peer sent %d messages unanswered; the protocol allows one",
			     INBOX + 1);
			vp->protocol_error = true;
			return;
		}
		vp->inbox[vp->inbox_n++] = (struct msg){
		    .addr = be64toh(vp->recv_buf.addr),
		    .rkey = be32toh(vp->recv_buf.rkey),
		    .size = be32toh(vp->recv_buf.size),
		};
		/* Copied out: the buffer can take the next message. */
		if (post_recv(vp))
			vp->protocol_error = true;
		return;
	case WRID_SEND:
		vp->sends_out--;
		if (wc->status != IBV_WC_SUCCESS) {
			note(vp, "send completed with status '%s' (%d)",
			     ibv_wc_status_str(wc->status), wc->status);
			vp->send_failed = true;
		}
		return;
	case WRID_RDMA:
		vp->rdma_done = true;
		vp->rdma_status = wc->status;
		return;
	default:
		note(vp, "a completion with unknown wr_id %" PRIu64, (uint64_t)wc->wr_id);
		vp->protocol_error = true;
		return;
	}
}

static int drain_cq(struct vp *vp)
{
	struct ibv_wc wc[8];
	int n, total = 0;

	if (!vp->cq)
		return 0;
	while ((n = ibv_poll_cq(vp->cq, 8, wc)) > 0) {
		for (int i = 0; i < n; i++)
			handle_wc(vp, &wc[i]);
		total += n;
	}
	if (n < 0) {
		note(vp, "ibv_poll_cq failed (%d)", n);
		vp->protocol_error = true;
	}
	return total;
}

static void handle_cm_event(struct vp *vp, struct rdma_cm_event *ev)
{
	char st[80];

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && vp->id && ev->id != vp->id) {
		/* One connection at a time: refuse the others. */
		say(vp, "rejecting a second connection request");
		rdma_reject(ev->id, NULL, 0);
		return;
	}
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		vp->id = ev->id;
	if (vp->cmq_n < CM_QUEUE)
		vp->cmq[vp->cmq_n++] = (struct cm_note){ev->event, ev->status};
	if (ev->event == RDMA_CM_EVENT_DISCONNECTED) {
		vp->disconnected = true;
		note(vp, "CM event %s", rdma_event_str(ev->event));
	} else if (vp->connected) {
		vp->cm_failed = true;
		note(vp, "CM event %s (%s)", rdma_event_str(ev->event),
		     status_text(ev->status, st, sizeof(st)));
	}
}

/*
 * Handles whatever is ready, waiting for something until the deadline.
 * Returns 0 when something may have changed, -ETIMEDOUT at the deadline,
 * another negative errno when poll or the channels fail.
 */
static int pump(struct vp *vp, int64_t deadline)
{
	struct pollfd fds[2] = {{.fd = vp->ec->fd, .events = POLLIN}};
	int nfds = 1;

	if (drain_cq(vp) > 0)
		return 0;
	if (vp->cc) {
		fds[1] = (struct pollfd){.fd = vp->cc->fd, .events = POLLIN};
		nfds = 2;
	}
	int64_t left = deadline - now_ms();
	if (left <= 0)
		return -ETIMEDOUT;
	int n = poll(fds, nfds, left > INT_MAX ? INT_MAX : (int)left);
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		say(vp, "poll: %s", strerror(errno));
		return -errno;
	}
	if (n == 0)
		return -ETIMEDOUT;
	if (fds[0].revents & POLLIN) {
		struct rdma_cm_event *ev;

		if (rdma_get_cm_event(vp->ec, &ev) == 0) {
			handle_cm_event(vp, ev);
			struct rdma_cm_id *extra =
			    ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && ev->id != vp->id ? ev->id
											   : NULL;
			rdma_ack_cm_event(ev);
			if (extra)
				rdma_destroy_id(extra);
		} else if (errno != EAGAIN) {
			say(vp, "rdma_get_cm_event: %s", strerror(errno));
			return -errno;
		}
	}
	if (nfds == 2 && (fds[1].revents & POLLIN)) {
		struct ibv_cq *cq;
		void *ctx;

		if (ibv_get_cq_event(vp->cc, &cq, &ctx) == 0) {
			ibv_ack_cq_events(cq, 1);
			/* Armed again before the next drain: no completion is missed. */
			int rc = ibv_req_notify_cq(vp->cq, 0);
			if (rc) {
				say(vp, "ibv_req_notify_cq: %s", strerror(rc));
				return -rc;
			}
		} else if (errno != EAGAIN) {
			say(vp, "ibv_get_cq_event: %s", strerror(errno));
			return -errno;
		}
	}
	return 0;
}

static int set_nonblocking(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/*
 * Waits for the CM event `want`; any other event is an error.  `what`
 * names what is awaited, for the messages.
 */
static int wait_cm(struct vp *vp, enum rdma_cm_event_type want, const char *what)
{
	int64_t deadline = now_ms() + vp->timeout_ms;
	char st[80];

	for (;;) {
		if (vp->cmq_n > 0) {
			struct cm_note got = vp->cmq[0];

			memmove(vp->cmq, vp->cmq + 1, --vp->cmq_n * sizeof(vp->cmq[0]));
			if (got.type == want)
				return 0;
			say(vp, "%s: got %s (%s)", what, rdma_event_str(got.type),
			    status_text(got.status, st, sizeof(st)));
			return -EPROTO;
		}
		int rc = pump(vp, deadline);
		if (rc == -ETIMEDOUT) {
			say(vp, "timed out after %d s waiting for %s (%s)", vp->timeout_ms / 1000,
			    rdma_event_str(want), what);
			return rc;
		}
		if (rc)
			return rc;
	}
}

/* What broke the connection, if anything did. */
static bool broken(const struct vp *vp)
{
	return vp->recv_failed || vp->send_failed || vp->disconnected || vp->cm_failed;
}

static enum wait_result broken_result(const struct vp *vp)
{
	if (vp->disconnected && !vp->recv_failed && !vp->send_failed && !vp->cm_failed)
		return WAIT_DISCONNECTED;
	return WAIT_BROKEN;
}

static bool have_msg(const struct vp *vp)
{
	return vp->inbox_n > 0;
}

static bool rdma_done(const struct vp *vp)
{
	return vp->rdma_done;
}

static bool sends_done(const struct vp *vp)
{
	return vp->sends_out == 0;
}

/*
 * Pumps events until done(vp) holds, the connection breaks, a protocol
 * error is seen or the timeout passes (then says it was waiting for what).
 */
static enum wait_result wait_until(struct vp *vp, bool (*done)(const struct vp *), const char *what)
{
	int64_t deadline = now_ms() + vp->timeout_ms;

	for (;;) {
		if (vp->protocol_error)
			return WAIT_ERROR;
		if (done(vp))
			return WAIT_OK;
		if (broken(vp))
			return broken_result(vp);
		int rc = pump(vp, deadline);
		if (rc == -ETIMEDOUT) {
			say(vp, "timed out after %d s waiting for %s", vp->timeout_ms / 1000, what);
			return WAIT_TIMEOUT;
		}
		if (rc)
			return WAIT_ERROR;
	}
}

/* Waits for the next message from the peer. */
static enum wait_result wait_msg(struct vp *vp, struct msg *m, const char *what)
{
	enum wait_result w = wait_until(vp, have_msg, what);

	if (w == WAIT_OK) {
		*m = vp->inbox[0];
		memmove(vp->inbox, vp->inbox + 1, --vp->inbox_n * sizeof(vp->inbox[0]));
	}
	return w;
}

/* Waits for the completion of the RDMA READ or WRITE posted last. */
static enum wait_result wait_rdma(struct vp *vp, const char *what)
{
	return wait_until(vp, rdma_done, what);
}

/*
 * Waits for the completion of an RDMA operation with a forged key, whatever
 * the connection does meanwhile: the peer refuses the key with a NAK and
 * breaks the connection, and its disconnect may be seen here before the
 * completion that carries the refusal.
 */
static enum wait_result wait_rdma_forged(struct vp *vp, const char *what)
{
	int64_t deadline = now_ms() + vp->timeout_ms;

	while (!vp->rdma_done) {
		int rc = pump(vp, deadline);

		if (rc == -ETIMEDOUT) {
			say(vp, "timed out after %d s waiting for %s", vp->timeout_ms / 1000, what);
			return WAIT_TIMEOUT;
		}
		if (rc)
			return WAIT_ERROR;
	}
	return WAIT_OK;
}

/* Waits until no send is outstanding, so that the send buffer is free. */
static enum wait_result wait_sends(struct vp *vp, const char *what)
{
	char about[160];

	snprintf(about, sizeof(about), "the completion of %s", what);
	return wait_until(vp, sends_done, about);
}

/* ---- verbs ------------------------------------------------------------------ */

static int post_send_msg(struct vp *vp, uint64_t addr, uint32_t rkey, uint32_t size)
{
	vp->send_buf = (struct wire_msg){htobe64(addr), htobe32(rkey), htobe32(size)};
	struct ibv_sge sge = {
	    .addr = (uintptr_t)&vp->send_buf,
	    .length = sizeof(vp->send_buf),
	    .lkey = vp->send_mr->lkey,
	};
	struct ibv_send_wr wr = {
	    .wr_id = WRID_SEND,
	    .sg_list = &sge,
	    .num_sge = 1,
	    .opcode = IBV_WR_SEND,
	    .send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;
	int rc = ibv_post_send(vp->qp, &wr, &bad);

	if (rc) {
		say(vp, "ibv_post_send (SEND): %s", strerror(rc));
		return -rc;
	}
	vp->sends_out++;
	return 0;
}

static int post_rdma(struct vp *vp, enum ibv_wr_opcode op, uint32_t len, uint64_t raddr,
		     uint32_t rkey)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)vp->rdma_buf,
	    .length = len,
	    .lkey = vp->rdma_mr->lkey,
	};
	struct ibv_send_wr wr = {
	    .wr_id = WRID_RDMA,
	    .sg_list = &sge,
	    .num_sge = 1,
	    .opcode = op,
	    .send_flags = IBV_SEND_SIGNALED,
	    .wr.rdma = {.remote_addr = raddr, .rkey = rkey},
	};
	struct ibv_send_wr *bad;

	vp->rdma_done = false;
	int rc = ibv_post_send(vp->qp, &wr, &bad);
	if (rc) {
		say(vp, "ibv_post_send (%s): %s",
		    op == IBV_WR_RDMA_READ ? "RDMA READ" : "RDMA WRITE", strerror(rc));
		return -rc;
	}
	return 0;
}

static struct ibv_mr *reg(struct vp *vp, void *buf, size_t len, int access, const char *what)
{
	struct ibv_mr *mr = ibv_reg_mr(vp->pd, buf, len, access);

	if (!mr)
		say(vp, "ibv_reg_mr of %s (%zu bytes): %s", what, len, strerror(errno));
	return mr;
}

#define RDMA_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)

/* A buffer of len bytes and its registration, in place of the old ones. */
static int grow_buffer(struct vp *vp, char **buf, struct ibv_mr **mr, uint32_t len,
		       const char *what)
{
	if (*mr)
		ibv_dereg_mr(*mr);
	*mr = NULL;
	free(*buf);
	*buf = malloc(len);
	if (!*buf) {
		say(vp, "out of memory for %s (%u bytes)", what, len);
		return -ENOMEM;
	}
	*mr = reg(vp, *buf, len, RDMA_ACCESS, what);
	return *mr ? 0 : -ENOMEM;
}

/* Makes sure the buffers hold len bytes: a bigger size gets bigger ones. */
static int ensure_buffers(struct vp *vp, uint32_t len)
{
	if (len <= vp->buf_size)
		return 0;
	vp->buf_size = 0;
	if (grow_buffer(vp, &vp->rdma_buf, &vp->rdma_mr, len, "rdma_buf"))
		return -ENOMEM;
	if (!vp->server && grow_buffer(vp, &vp->start_buf, &vp->start_mr, len, "start_buf"))
		return -ENOMEM;
	if (vp->server && vp->validate) {
		free(vp->expect_buf);
		vp->expect_buf = malloc(len);
		if (!vp->expect_buf) {
			say(vp, "out of memory for the expected data (%u bytes)", len);
			return -ENOMEM;
		}
	}
	vp->buf_size = len;
	return 0;
}

/* PD, completion channel, CQ, QP on the connection's device; the first receive. */
static int setup_qp(struct vp *vp)
{
	struct ibv_context *dev = vp->id->verbs;
	int rc;

	vp->pd = ibv_alloc_pd(dev);
	if (!vp->pd) {
		say(vp, "ibv_alloc_pd: %s", strerror(errno));
		return -ENOMEM;
	}
	vp->cc = ibv_create_comp_channel(dev);
	if (!vp->cc) {
		say(vp, "ibv_create_comp_channel: %s", strerror(errno));
		return -ENOMEM;
	}
	rc = set_nonblocking(vp->cc->fd);
	if (rc) {
		say(vp, "making the completion channel non-blocking: %s", strerror(-rc));
		return rc;
	}
	vp->cq = ibv_create_cq(dev, CQ_DEPTH, NULL, vp->cc, 0);
	if (!vp->cq) {
		say(vp, "ibv_create_cq: %s", strerror(errno));
		return -ENOMEM;
	}
	rc = ibv_req_notify_cq(vp->cq, 0);
	if (rc) {
		say(vp, "ibv_req_notify_cq: %s", strerror(rc));
		return -rc;
	}
	struct ibv_qp_init_attr attr = {
	    .send_cq = vp->cq,
	    .recv_cq = vp->cq,
	    .cap = {.max_send_wr = SQ_DEPTH,
		    .max_recv_wr = 2,
		    .max_send_sge = 1,
		    .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	};
	if (rdma_create_qp(vp->id, vp->pd, &attr)) {
		say(vp, "rdma_create_qp: %s", strerror(errno));
		return -errno;
	}
	vp->qp = vp->id->qp;
	vp->recv_mr = reg(vp, &vp->recv_buf, sizeof(vp->recv_buf), IBV_ACCESS_LOCAL_WRITE,
			  "the receive buffer");
	vp->send_mr = reg(vp, &vp->send_buf, sizeof(vp->send_buf), 0, "the send buffer");
	if (!vp->recv_mr || !vp->send_mr)
		return -ENOMEM;
	return post_recv(vp);
}

static void conn_param(struct rdma_conn_param *p)
{
	*p = (struct rdma_conn_param){
	    .responder_resources = 1,
	    .initiator_depth = 1,
	    .retry_count = 7,
	    .rnr_retry_count = 7,
	};
}

/*
 * Ends the connection: rdma_disconnect (which also answers a peer's
 * disconnect request), then, unless the peer's disconnect was seen already,
 * a bounded wait for RDMA_CM_EVENT_DISCONNECTED.
 */
static int disconnect(struct vp *vp)
{
	if (!vp->connected)
		return 0;
	vp->connected = false;
	if (!vp->disconnect_sent) {
		vp->disconnect_sent = true;
		if (rdma_disconnect(vp->id)) {
			say(vp, "rdma_disconnect: %s", strerror(errno));
			return -errno;
		}
	}
	int64_t deadline = now_ms() + vp->timeout_ms;
	while (!vp->disconnected) {
		int rc = pump(vp, deadline);
		if (rc == -ETIMEDOUT) {
			say(vp,
			    "timed out after %d s waiting for RDMA_CM_EVENT_DISCONNECTED "
			    "(after rdma_disconnect)",
			    vp->timeout_ms / 1000);
			return rc;
		}
		if (rc)
			return rc;
	}
	return 0;
}

static void teardown(struct vp *vp)
{
	if (vp->qp)
		rdma_destroy_qp(vp->id);
	if (vp->start_mr)
		ibv_dereg_mr(vp->start_mr);
	if (vp->rdma_mr)
		ibv_dereg_mr(vp->rdma_mr);
	if (vp->recv_mr)
		ibv_dereg_mr(vp->recv_mr);
	if (vp->send_mr)
		ibv_dereg_mr(vp->send_mr);
	if (vp->cq)
		ibv_destroy_cq(vp->cq);
	if (vp->cc)
		ibv_destroy_comp_channel(vp->cc);
	if (vp->pd)
		ibv_dealloc_pd(vp->pd);
	if (vp->id)
		rdma_destroy_id(vp->id);
	if (vp->listen_id)
		rdma_destroy_id(vp->listen_id);
	if (vp->ec)
		rdma_destroy_event_channel(vp->ec);
	free(vp->start_buf);
	free(vp->rdma_buf);
	free(vp->expect_buf);
}

/* Parses a numeric address (or a name) with the port; 0 or a negative errno. */
static int parse_addr(struct vp *vp, const char *text, unsigned port, struct sockaddr_storage *ss)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC}, *res;
	int rc = getaddrinfo(text, NULL, &hints, &res);

	if (rc) {
		say(vp, "address %s: %s", text, gai_strerror(rc));
		return -EINVAL;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
	else if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
	else {
		say(vp, "address %s: neither IPv4 nor IPv6", text);
		return -EINVAL;
	}
	return 0;
}

/* The last line on stdout: e.g. "vping: client: 10 pings of 65536 bytes, data verified". */
static void summary(const struct vp *vp, unsigned pings, uint32_t min, uint32_t max, double secs)
{
	char sizes[40] = "";

	if (pings > 0 && min == max)
		snprintf(sizes, sizeof(sizes), " of %u byte%s", max, max == 1 ? "" : "s");
	else if (pings > 0)
		snprintf(sizes, sizeof(sizes), " of %u..%u bytes", min, max);
	printf("%s: %s: %u ping%s%s, data %s, %.3f s\n", prog, vp->who, pings,
	       pings == 1 ? "" : "s", sizes, vp->validate ? "verified" : "not verified (no -V)",
	       secs);
}

/* ---- the client --------------------------------------------------------- */

/*
 * After a sign of a broken connection, waits a little to see the rest of
 * it (the flushed receive and the CM event), then says what happened.
 */
static void report_break(struct vp *vp, unsigned ping, const char *what)
{
	int64_t deadline = now_ms() + (vp->timeout_ms < GRACE_MS ? vp->timeout_ms : GRACE_MS);

	while (!((vp->recv_failed || vp->send_failed) && (vp->disconnected || vp->cm_failed))) {
		/* Answering the peer's disconnect moves the QP to error: it flushes. */
		if (vp->disconnected && !vp->disconnect_sent) {
			vp->disconnect_sent = true;
			if (rdma_disconnect(vp->id))
				note(vp, "rdma_disconnect: %s", strerror(errno));
		}
		if (pump(vp, deadline))
			break;
	}
	say(vp, "ping %u: the connection broke while waiting for %s:", ping, what);
	print_log(vp);
	if (!vp->disconnected && !vp->cm_failed)
		say(vp, "(no CM event came within %d s)", GRACE_MS / 1000);
	if (!vp->recv_failed && !vp->send_failed)
		say(vp, "(no failed completion came within %d s)", GRACE_MS / 1000);
}

/*
 * One ping of size bytes: the advertisement of the start buffer, the
 * go-ahead, that of the rdma buffer, the go-ahead.  On failure `what` names
 * what was awaited.
 */
static enum wait_result client_ping(struct vp *vp, unsigned ping, uint32_t size, char *what,
				    size_t len)
{
	struct msg m;
	enum wait_result w;

	fill_pattern(vp->start_buf, size, ping);
	memset(vp->rdma_buf, SENTINEL, size);

	snprintf(what, len, "the first send of ping %u", ping);
	w = wait_sends(vp, what);
	if (w != WAIT_OK)
		return w;
	if (post_send_msg(vp, (uintptr_t)vp->start_buf, vp->start_mr->rkey, size))
		return WAIT_ERROR;
	snprintf(what, len, "the go-ahead after the RDMA READ of ping %u", ping);
	w = wait_msg(vp, &m, what);
	if (w != WAIT_OK)
		return w;
	snprintf(what, len, "the first send of ping %u", ping);
	w = wait_sends(vp, what);
	if (w != WAIT_OK)
		return w;
	if (post_send_msg(vp, (uintptr_t)vp->rdma_buf, vp->rdma_mr->rkey, size))
		return WAIT_ERROR;
	snprintf(what, len, "the go-ahead after the RDMA WRITE of ping %u", ping);
	return wait_msg(vp, &m, what);
}

static int run_client(struct vp *vp)
{
	struct sockaddr_storage dst, src;
	struct rdma_conn_param cp;
	char what[120];
	uint32_t max = vp->size, min = UINT32_MAX;
	enum wait_result w;

	if (parse_addr(vp, vp->addr, vp->port, &dst))
		return EXIT_FAIL;
	if (vp->src && parse_addr(vp, vp->src, 0, &src))
		return EXIT_FAIL;
	if (rdma_create_id(vp->ec, &vp->id, NULL, RDMA_PS_TCP)) {
		say(vp, "rdma_create_id: %s", strerror(errno));
		return EXIT_FAIL;
	}
	if (rdma_resolve_addr(vp->id, vp->src ? (struct sockaddr *)&src : NULL,
			      (struct sockaddr *)&dst, RESOLVE_MS)) {
		say(vp, "rdma_resolve_addr %s: %s", vp->addr, strerror(errno));
		return EXIT_FAIL;
	}
	snprintf(what, sizeof(what), "resolving address %s", vp->addr);
	if (wait_cm(vp, RDMA_CM_EVENT_ADDR_RESOLVED, what))
		return EXIT_FAIL;
	if (rdma_resolve_route(vp->id, RESOLVE_MS)) {
		say(vp, "rdma_resolve_route %s: %s", vp->addr, strerror(errno));
		return EXIT_FAIL;
	}
	snprintf(what, sizeof(what), "resolving the route to %s", vp->addr);
	if (wait_cm(vp, RDMA_CM_EVENT_ROUTE_RESOLVED, what))
		return EXIT_FAIL;
	if (setup_qp(vp))
		return EXIT_FAIL;
	if (vp->sizes_given) {
		max = 0;
		for (int i = 0; i < vp->nsizes; i++)
			max = vp->sizes[i] > max ? vp->sizes[i] : max;
	}
	if (ensure_buffers(vp, max))
		return EXIT_FAIL;
	conn_param(&cp);
	if (rdma_connect(vp->id, &cp)) {
		say(vp, "rdma_connect %s port %u: %s", vp->addr, vp->port, strerror(errno));
		return EXIT_FAIL;
	}
	snprintf(what, sizeof(what), "connecting to %s port %u", vp->addr, vp->port);
	if (wait_cm(vp, RDMA_CM_EVENT_ESTABLISHED, what))
		return EXIT_FAIL;
	vp->connected = true;

	double t0 = now_s();
	unsigned ping = 0;
	for (; ping < vp->npings; ping++) {
		uint32_t size = vp->sizes_given ? vp->sizes[ping] : vp->size;

		min = size < min ? size : min;
		w = client_ping(vp, ping, size, what, sizeof(what));
		if (w == WAIT_DISCONNECTED || w == WAIT_BROKEN) {
			report_break(vp, ping, what);
			if (vp->expect_broken) {
				printf("%s: client: the connection broke at ping %u, as expected\n",
				       prog, ping);
				return EXIT_OK;
			}
			return EXIT_FAIL;
		}
		if (w != WAIT_OK) {
			print_log(vp);
			return EXIT_FAIL;
		}
		if (vp->validate && data_differs(vp, ping, vp->rdma_buf, vp->start_buf, size))
			return EXIT_FAIL;
		if (vp->verbose && size <= PRINT_MAX)
			printf("ping data: %.*s\n", (int)size, vp->rdma_buf);
	}
	double secs = now_s() - t0;

	if (wait_sends(vp, "the last send") != WAIT_OK) {
		print_log(vp);
		return EXIT_FAIL;
	}
	if (disconnect(vp))
		return EXIT_FAIL;
	if (vp->expect_broken) {
		say(vp, "expected the connection to break, but all %u pings succeeded", ping);
		return EXIT_FAIL;
	}
	summary(vp, ping, min, max, secs);
	return EXIT_OK;
}

/* ---- the server --------------------------------------------------------- */

/* Reports the outcome of an RDMA operation with a forged key. */
static int forge_outcome(struct vp *vp, const char *op, uint32_t rkey)
{
	bool ok = vp->rdma_status == IBV_WC_REM_ACCESS_ERR;

	printf("%s: server: %s with forged rkey 0x%x completed with status '%s' (%d)%s\n", prog, op,
	       rkey, ibv_wc_status_str(vp->rdma_status), vp->rdma_status,
	       ok ? "" : "; expected 'remote access error'");
	return ok ? EXIT_OK : EXIT_FAIL;
}

/* One server-side wait's failure: says what happened, returns EXIT_FAIL. */
static int server_fail(struct vp *vp, enum wait_result w, unsigned ping, const char *what)
{
	if (w == WAIT_DISCONNECTED)
		say(vp, "ping %u: the client disconnected while the server waited for %s", ping,
		    what);
	else if (w == WAIT_BROKEN)
		say(vp, "ping %u: the connection broke while the server waited for %s:", ping,
		    what);
	print_log(vp);
	return EXIT_FAIL;
}

/* Once the last send has gone, tell the client it may go on (an empty
 * message): EXIT_OK, or the exit code of the failure. */
static int server_go_ahead(struct vp *vp, unsigned ping)
{
	char what[64];
	enum wait_result w;

	snprintf(what, sizeof(what), "the go-ahead of ping %u", ping);
	w = wait_sends(vp, what);
	if (w != WAIT_OK)
		return server_fail(vp, w, ping, what);
	return post_send_msg(vp, 0, 0, 0) ? EXIT_FAIL : EXIT_OK;
}

/*
 * One RDMA READ or WRITE of the server, with the client's rkey forged when
 * --forge-rkey names this operation: posts it, waits, and judges it.  *done
 * says the run ends here (the forged operation's outcome, or a failure),
 * with the exit status returned.
 */
static int server_rdma(struct vp *vp, enum ibv_wr_opcode op, unsigned ping, uint32_t len,
		       uint64_t addr, uint32_t rkey, bool *done)
{
	bool read = op == IBV_WR_RDMA_READ;
	bool forged = vp->forge == (read ? 'r' : 'w');
	const char *name = read ? "RDMA READ" : "RDMA WRITE";
	char what[96];
	enum wait_result w;

	*done = true;
	if (forged)
		rkey ^= 0xff;
	if (post_rdma(vp, op, len, addr, rkey))
		return EXIT_FAIL;
	snprintf(what, sizeof(what), "the %s of ping %u (%u bytes)", name, ping, len);
	w = forged ? wait_rdma_forged(vp, what) : wait_rdma(vp, what);
	if (w != WAIT_OK)
		return server_fail(vp, w, ping, what);
	if (forged)
		return forge_outcome(vp, name, rkey);
	if (vp->rdma_status != IBV_WC_SUCCESS) {
		say(vp,
		    "ping %u: %s of %u bytes %s 0x%" PRIx64 " rkey 0x%x completed with status '%s' "
		    "(%d)",
		    ping, name, len, read ? "from" : "to", addr, rkey,
		    ibv_wc_status_str(vp->rdma_status), vp->rdma_status);
		print_log(vp);
		return EXIT_FAIL;
	}
	*done = false;
	return EXIT_OK;
}

/*
 * Between pings a client's disconnect may show first as flushed work
 * requests (the QP went to error) before the CM event: true if nothing
 * but flushes failed and the DISCONNECTED event follows within the
 * timeout.
 */
static bool disconnect_follows(struct vp *vp)
{
	int64_t deadline = now_ms() + vp->timeout_ms;

	while (!vp->disconnected) {
		if (vp->cm_failed || vp->hard_failure || vp->protocol_error)
			return false;
		if (pump(vp, deadline))
			return false;
	}
	return !vp->cm_failed && !vp->hard_failure && !vp->protocol_error;
}

static int serve(struct vp *vp)
{
	struct msg m;
	char what[120];
	unsigned ping = 0;
	uint32_t min = UINT32_MAX, max = 0;
	enum wait_result w;
	double t0 = now_s();
	bool done;
	int rc;

	for (;; ping++) {
		snprintf(what, sizeof(what), "the RDMA READ advertisement of ping %u", ping);
		w = wait_msg(vp, &m, what);
		if (w == WAIT_DISCONNECTED)
			break;
		if (w == WAIT_BROKEN && disconnect_follows(vp))
			break;
		if (w != WAIT_OK)
			return server_fail(vp, w, ping, what);
		uint32_t len = m.size;
		if (len < 1 || len > MAX_SIZE) {
			say(vp, "ping %u: the client advertises %u bytes; vping serves 1 to %u",
			    ping, len, MAX_SIZE);
			return EXIT_FAIL;
		}
		if (ensure_buffers(vp, len))
			return EXIT_FAIL;
		min = len < min ? len : min;
		max = len > max ? len : max;

		memset(vp->rdma_buf, SENTINEL, len);
		rc = server_rdma(vp, IBV_WR_RDMA_READ, ping, len, m.addr, m.rkey, &done);
		if (done)
			return rc;
		if (vp->validate) {
			fill_pattern(vp->expect_buf, len, ping);
			if (data_differs(vp, ping, vp->rdma_buf, vp->expect_buf, len))
				return EXIT_FAIL;
		}
		if (vp->verbose && len <= PRINT_MAX)
			printf("server ping data: %.*s\n", (int)len, vp->rdma_buf);

		rc = server_go_ahead(vp, ping);
		if (rc != EXIT_OK)
			return rc;
		snprintf(what, sizeof(what), "the RDMA WRITE advertisement of ping %u", ping);
		w = wait_msg(vp, &m, what);
		if (w != WAIT_OK)
			return server_fail(vp, w, ping, what);
		if (m.size < len) {
			say(vp, "ping %u: the client advertises %u bytes to write; it read %u",
			    ping, m.size, len);
			return EXIT_FAIL;
		}
		rc = server_rdma(vp, IBV_WR_RDMA_WRITE, ping, len, m.addr, m.rkey, &done);
		if (done)
			return rc;
		rc = server_go_ahead(vp, ping);
		if (rc != EXIT_OK)
			return rc;
	}
	double secs = now_s() - t0;

	if (vp->forge) {
		say(vp, "the client disconnected after %u pings, before the forged %s", ping,
		    vp->forge == 'r' ? "RDMA READ" : "RDMA WRITE");
		return EXIT_FAIL;
	}
	if (vp->count >= 0 && ping != (unsigned long)vp->count) {
		say(vp, "the client did %u pings; expected %ld (-C)", ping, vp->count);
		return EXIT_FAIL;
	}
	summary(vp, ping, min, max, secs);
	return EXIT_OK;
}

static int run_server(struct vp *vp)
{
	struct sockaddr_storage ss;
	struct rdma_conn_param cp;
	char what[120];

	if (vp->addr) {
		if (parse_addr(vp, vp->addr, vp->port, &ss))
			return EXIT_FAIL;
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		memset(&ss, 0, sizeof(ss));
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)vp->port);
	}
	if (rdma_create_id(vp->ec, &vp->listen_id, NULL, RDMA_PS_TCP)) {
		say(vp, "rdma_create_id: %s", strerror(errno));
		return EXIT_FAIL;
	}
	if (rdma_bind_addr(vp->listen_id, (struct sockaddr *)&ss)) {
		say(vp, "rdma_bind_addr %s port %u: %s", vp->addr ? vp->addr : "0.0.0.0", vp->port,
		    strerror(errno));
		return EXIT_FAIL;
	}
	if (rdma_listen(vp->listen_id, 1)) {
		say(vp, "rdma_listen: %s", strerror(errno));
		return EXIT_FAIL;
	}
	snprintf(what, sizeof(what), "a client on port %u", vp->port);
	if (wait_cm(vp, RDMA_CM_EVENT_CONNECT_REQUEST, what))
		return EXIT_FAIL;
	if (setup_qp(vp))
		return EXIT_FAIL;
	conn_param(&cp);
	if (rdma_accept(vp->id, &cp)) {
		say(vp, "rdma_accept: %s", strerror(errno));
		return EXIT_FAIL;
	}
	if (wait_cm(vp, RDMA_CM_EVENT_ESTABLISHED, "the connection to be established"))
		return EXIT_FAIL;
	vp->connected = true;
	int rc = serve(vp);
	if (disconnect(vp))
		rc = EXIT_FAIL;
	return rc;
}

/* ---- options ---------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s -s [-a ADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V]\n"
		"             [--forge-rkey read|write] [--timeout SECONDS]\n"
		"       %s -c -a ADDR [-I SRCADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V]\n"
		"             [--sizes LIST] [--expect-broken] [--timeout SECONDS]\n"
		"A peer speaking rping's protocol, for buffers of 1 to %u bytes and forged keys.\n"
		"  -s, -c           server or client\n"
		"  -a ADDR          address to listen on (server; default any) or to reach\n"
		"  -I SRCADDR       the client's source address\n"
		"  -p PORT          port (default %u)\n"
		"  -C COUNT         client: pings to do (default 1); server: pings expected\n"
		"  -S SIZE          client: bytes per ping, 1 to %u (default %u)\n"
		"  --sizes LIST     client: one ping per size of LIST (comma-separated)\n"
		"  -v               print each ping's data of at most %u bytes\n"
		"  -V               verify each ping's data\n"
		"  --forge-rkey read|write\n"
		"                   server: forge the rkey of the first READ or WRITE; succeed\n"
		"                   only on a 'remote access error' completion\n"
		"  --expect-broken  client: succeed only if the connection breaks\n"
		"  --timeout SECONDS  bound on each wait (default 60)\n"
		"Exit status: 0 success, 1 failure, 2 usage error.\n",
		prog, prog, MAX_SIZE, DEFAULT_PORT, MAX_SIZE, DEFAULT_SIZE, PRINT_MAX);
}

/* A whole decimal number in [lo, hi], or -1. */
static long parse_num(const char *s, long lo, long hi)
{
	char *end;

	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	return v;
}

static int parse_sizes(struct vp *vp, const char *list)
{
	char *copy = strdup(list), *save = NULL;

	if (!copy)
		return -ENOMEM;
	vp->nsizes = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long v = parse_num(tok, 1, MAX_SIZE);

		if (v < 0 || vp->nsizes >= MAX_SIZES) {
			fprintf(stderr, "%s: --sizes: '%s' is not a size of 1 to %u bytes%s\n",
				prog, tok, MAX_SIZE, v < 0 ? "" : " (too many sizes)");
			free(copy);
			return -EINVAL;
		}
		vp->sizes[vp->nsizes++] = (uint32_t)v;
	}
	free(copy);
	if (vp->nsizes == 0) {
		fprintf(stderr, "%s: --sizes: the list is empty\n", prog);
		return -EINVAL;
	}
	return 0;
}

#define USAGE_ERROR(...)                                \
	do {                                            \
		fprintf(stderr, "%s: ", prog);          \
		fprintf(stderr, __VA_ARGS__);           \
		fputs(" (--help for usage)\n", stderr); \
		return EXIT_USAGE;                      \
	} while (0)

static int parse_options(struct vp *vp, int argc, char **argv)
{
	enum { OPT_FORGE = 256, OPT_SIZES, OPT_BROKEN, OPT_TIMEOUT, OPT_HELP };
	static const struct option longs[] = {
	    {"forge-rkey", required_argument, NULL, OPT_FORGE},
	    {"sizes", required_argument, NULL, OPT_SIZES},
	    {"expect-broken", no_argument, NULL, OPT_BROKEN},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"help", no_argument, NULL, OPT_HELP},
	    {NULL, 0, NULL, 0},
	};
	int role = 0, op;
	long size = DEFAULT_SIZE, v;

	vp->port = DEFAULT_PORT;
	vp->count = -1;
	vp->timeout_ms = 60000;
	opterr = 0;
	while ((op = getopt_long(argc, argv, ":sca:I:p:C:S:vV", longs, NULL)) != -1) {
		switch (op) {
		case 's':
		case 'c':
			if (role && role != op)
				USAGE_ERROR("give -s or -c, not both");
			role = op;
			break;
		case 'a': vp->addr = optarg; break;
		case 'I': vp->src = optarg; break;
		case 'p':
			v = parse_num(optarg, 1, 65535);
			if (v < 0)
				USAGE_ERROR("-p %s: a port is 1 to 65535", optarg);
			vp->port = (unsigned)v;
			break;
		case 'C':
			vp->count = parse_num(optarg, 0, INT_MAX);
			if (vp->count < 0)
				USAGE_ERROR("-C %s: not a count", optarg);
			break;
		case 'S':
			size = parse_num(optarg, 1, MAX_SIZE);
			if (size < 0)
				USAGE_ERROR("-S %s: a size is 1 to %u bytes", optarg, MAX_SIZE);
			vp->size_given = true;
			break;
		case 'v': vp->verbose = true; break;
		case 'V': vp->validate = true; break;
		case OPT_FORGE:
			if (strcmp(optarg, "read") == 0)
				vp->forge = 'r';
			else if (strcmp(optarg, "write") == 0)
				vp->forge = 'w';
			else
				USAGE_ERROR("--forge-rkey %s: say read or write", optarg);
			break;
		case OPT_SIZES:
			if (parse_sizes(vp, optarg))
				return EXIT_USAGE;
			vp->sizes_given = true;
			break;
		case OPT_BROKEN: vp->expect_broken = true; break;
		case OPT_TIMEOUT:
			v = parse_num(optarg, 1, 86400);
			if (v < 0)
				USAGE_ERROR("--timeout %s: seconds, 1 to 86400", optarg);
			vp->timeout_ms = (int)(v * 1000);
			break;
		case OPT_HELP: usage(stdout); exit(EXIT_OK);
		case ':': USAGE_ERROR("%s needs a value", argv[optind - 1]);
		default: USAGE_ERROR("unknown option %s", argv[optind - 1]);
		}
	}
	if (optind < argc)
		USAGE_ERROR("unexpected argument %s", argv[optind]);
	if (!role)
		USAGE_ERROR("give -s (server) or -c (client)");
	vp->server = role == 's';
	vp->who = vp->server ? "server" : "client";
	if (vp->server) {
		if (vp->src || vp->sizes_given || vp->expect_broken || vp->size_given)
			USAGE_ERROR("-I, -S, --sizes and --expect-broken are for the client "
				    "(the server learns each size from the client)");
		return -1;
	}
	if (!vp->addr)
		USAGE_ERROR("the client needs -a ADDR");
	if (vp->forge)
		USAGE_ERROR("--forge-rkey is for the server");
	if (vp->sizes_given && (vp->size_given || vp->count >= 0))
		USAGE_ERROR("--sizes gives the sizes and the count: no -S or -C with it");
	if (vp->count == 0)
		USAGE_ERROR("-C 0: the client does at least one ping");
	vp->size = (uint32_t)size;
	vp->npings = vp->sizes_given ? (unsigned)vp->nsizes
		     : vp->count < 0 ? 1
				     : (unsigned)vp->count;
	return -1;
}

int main(int argc, char **argv)
{
	static struct vp vp;
	int rc;

	/* Completion lines and data go to stdout in order with the errors. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	vp.who = "?";
	vp.t0 = now_s();
	rc = parse_options(&vp, argc, argv);
	if (rc >= 0)
		return rc;
	vp.ec = rdma_create_event_channel();
	if (!vp.ec) {
		say(&vp, "rdma_create_event_channel: %s", strerror(errno));
		return EXIT_FAIL;
	}
	rc = set_nonblocking(vp.ec->fd);
	if (rc) {
		say(&vp, "making the CM event channel non-blocking: %s", strerror(-rc));
		teardown(&vp);
		return EXIT_FAIL;
	}
	rc = vp.server ? run_server(&vp) : run_client(&vp);
	if (vp.connected && disconnect(&vp))
		rc = EXIT_FAIL;
	teardown(&vp);
	return rc;
}
