/*
 * The NIC's port on the fabric: opening it, receiving frames (decode, then
 * hand to the QP or the connection manager), sending frames built in place
 * in a fabric frame, and the timer the transport and connection manager
 * need while the NIC sleeps.
 *
 * A NIC whose run directory has no fabric (no fabric.shm) runs without a
 * port: registration works, connections fail as unreachable.
 */
#include "nic_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "fab_addr.h"

/* The port's UDP side (--udp), with what to do when it cannot be had. */
static int port_udp_open(struct nic *nic)
{
	char a[FAB_ADDR_STRLEN];
	int err = fab_port_udp_open(nic->port);

	fab_addr_format(nic->opts.addr, a, sizeof(a));
	switch (err) {
	case 0:
		nic_info(&nic->log,
			 "--udp: RoCEv2 datagrams on %s port 4791 reach NICs beyond "
			 "this fabric",
			 a);
		return 0;
	case -EPERM:
	case -EACCES:
		nic_err(&nic->log,
			"--udp needs CAP_NET_RAW (raw sockets: the ICRC covers IP header fields "
			"a UDP socket does not show): run nicsimd as root, or give it the "
			"capability (setcap cap_net_raw+ep nicsimd)");
		break;
	case -EADDRNOTAVAIL:
		nic_err(&nic->log,
			"--udp: %s is not an address of any interface here; add it first "
			"(ip addr add %s/15 dev IF)",
			a, a);
		break;
	case -EADDRINUSE:
		nic_err(&nic->log,
			"--udp: UDP port 4791 of %s is taken by another program: another "
			"nicsimd --udp with this address (in another run directory), or an "
			"rdma_rxe device, which binds it on every address of its network "
			"namespace; 'ss -ulpn sport = :4791' shows which. Stop it, or give "
			"this NIC another address",
			a);
		break;
	default: nic_err(&nic->log, "--udp: cannot open the UDP side: %s", strerror(-err));
	}
	return err;
}

int port_open(struct nic *nic)
{
	char path[PATH_MAX + 16];
	struct stat st;
	int err;

	nic->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (nic->timer_fd < 0)
		return -errno;
	nic->timer_src.type = NIC_SRC_TIMER;
	err = nic_epoll_add(nic, nic->timer_fd, EPOLLIN, &nic->timer_src);
	if (err)
		return err;
	snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, nic->opts.dir);
	if (stat(path, &st) < 0) {
		if (nic->opts.udp) {
			nic_err(&nic->log,
				"--udp: no fabric in %s to open a port on: create one first "
				"(nicsim up --dir %s --udp starts NICs on one)",
				nic->opts.dir, nic->opts.dir);
			return -ENOENT;
		}
		nic_info(&nic->log, "no fabric in %s: connections will be refused as unreachable",
			 nic->opts.dir);
		return 0;
	}
	err = fab_open(nic->opts.dir, &nic->fab);
	if (err) {
		nic_err(&nic->log, "cannot open the fabric %s: %s", path, strerror(-err));
		return err;
	}
	err = fab_port_open(nic->fab, nic->opts.addr, &nic->port);
	if (err) {
		nic_err(&nic->log, "cannot open a fabric port for this address: %s",
			strerror(-err));
		return err;
	}
	nic->port_src.type = NIC_SRC_PORT;
	err = nic_epoll_add(nic, fab_port_fd(nic->port), EPOLLIN, &nic->port_src);
	if (err || !nic->opts.udp)
		return err;
	err = port_udp_open(nic);
	if (err)
		return err;
	/* Datagrams are taken by fab_recv; the socket only wakes the loop. */
	nic->udp_src.type = NIC_SRC_PORT;
	return nic_epoll_add(nic, fab_port_udp_fd(nic->port), EPOLLIN, &nic->udp_src);
}

/* ---- Peer NICs' processes ---------------------------------------------------- */

struct port_watch {
	struct nic_src src;
	uint32_t addr, pid, gen; /* the peer port's owner when the watch began */
	int fd;                  /* pidfd of pid */
	uint32_t refs;           /* QPs watching, plus one while it fires */
	bool gone;               /* fired: no new QP may join it */
};

static int pidfd_of(uint32_t pid)
{
#ifdef SYS_pidfd_open
	int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);

	if (fd >= 0)
		(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd < 0 ? -errno : fd;
#else
	(void)pid;
	return -ENOSYS;
#endif
}

bool port_src_is_watch(const struct nic *nic, const struct nic_src *src)
{
	for (uint32_t i = 0; i < nic->nwatch; i++)
		if (src == &nic->watch[i]->src)
			return true;
	return false;
}

static void watch_put(struct nic *nic, struct port_watch *w)
{
	if (--w->refs)
		return;
	for (uint32_t i = 0; i < nic->nwatch; i++) {
		if (nic->watch[i] == w) {
			nic->watch[i] = nic->watch[--nic->nwatch];
			break;
		}
	}
	close(w->fd); /* also leaves the epoll set */
	free(w);
	nic_fd_freed(nic);
}

/* A new watch of the process pid that owns the port of addr (generation gen). */
static struct port_watch *watch_new(struct nic *nic, uint32_t addr, uint32_t pid, uint32_t gen)
{
	struct port_watch *w;
	uint32_t pid2, gen2;
	int fd = pidfd_of(pid);

	if (fd < 0)
		return NULL;
	/* The pid was read before the pidfd was made: it names the port's
	 * owner only if the port still has that owner now. */
	if (fab_port_owner(nic->fab, addr, &pid2, &gen2) || pid2 != pid || gen2 != gen)
		goto fail;
	if (nic->nwatch == nic->capwatch) {
		uint32_t cap = nic->capwatch ? 2 * nic->capwatch : 8;
		struct port_watch **a = realloc(nic->watch, cap * sizeof(*a));

		if (!a)
			goto fail;
		nic->watch = a;
		nic->capwatch = cap;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		goto fail;
	*w = (struct port_watch){.src = {.type = NIC_SRC_PEER, .obj = w},
				 .addr = addr,
				 .pid = pid,
				 .gen = gen,
				 .fd = fd};
	if (nic_epoll_add(nic, fd, EPOLLIN, &w->src)) {
		free(w);
		goto fail;
	}
	nic->watch[nic->nwatch++] = w;
	return w;
fail:
	close(fd);
	return NULL;
}

void port_peer_watch(struct nic *nic, struct qp *qp)
{
	struct port_watch *w = NULL;
	uint32_t pid, gen;

	port_peer_unwatch(nic, qp);
	/* Only a peer with a port on this fabric, in another process. */
	if (!nic->fab || qp->peer_addr == nic->opts.addr ||
	    fab_port_owner(nic->fab, qp->peer_addr, &pid, &gen) || pid == (uint32_t)getpid())
		return;
	for (uint32_t i = 0; i < nic->nwatch && !w; i++) {
		struct port_watch *x = nic->watch[i];

		if (!x->gone && x->addr == qp->peer_addr && x->pid == pid && x->gen == gen)
			w = x;
	}
	if (!w)
		w = watch_new(nic, qp->peer_addr, pid, gen);
	if (!w) {
		nic_dbg(&nic->log,
			"QP %u: the peer NIC's process is not watched (no pidfd): its death "
			"is found by the retry budget",
			qp->qpn);
		return;
	}
	w->refs++;
	qp->peer_watch = w;
}

void port_peer_unwatch(struct nic *nic, struct qp *qp)
{
	struct port_watch *w = qp->peer_watch;

	if (!w)
		return;
	qp->peer_watch = NULL;
	watch_put(nic, w);
}

void port_peer_event(struct nic *nic, struct port_watch *w)
{
	char a[FAB_ADDR_STRLEN];

	if (w->gone)
		return;
	w->gone = true;
	w->refs++; /* the QPs closed below let go of it */
	nic_info(&nic->log,
		 "the NIC at %s (pid %u) has ended without closing its connections: "
		 "closing this NIC's connections to it",
		 fab_addr_format(w->addr, a, sizeof(a)), w->pid);
	conn_peer_gone(nic, w);
	watch_put(nic, w);
}

uint32_t port_path_mtu(struct nic *nic, uint32_t dst)
{
	return nic->port ? fab_port_path_mtu(nic->port, dst) : FAB_MTU;
}

void port_close(struct nic *nic)
{
	/* Watches left by QPs that never stopped (the NIC is ending). */
	while (nic->nwatch) {
		struct port_watch *w = nic->watch[--nic->nwatch];

		close(w->fd);
		free(w);
	}
	free(nic->watch);
	nic->watch = NULL;
	nic->capwatch = 0;
	nic->unit.n = 0; /* fab_port_close frees the frames it held */
	fab_port_close(nic->port);
	nic->port = NULL;
	fab_close(nic->fab);
	nic->fab = NULL;
	if (nic->timer_fd >= 0)
		close(nic->timer_fd);
	nic->timer_fd = -1;
}

int port_frame_get(struct nic *nic, uint32_t *idx, uint8_t **data, bool ctl)
{
	void *d;

	if (!nic->port) {
		nic->stats.tx_unreachable++;
		return -EHOSTUNREACH;
	}
	if ((!ctl && nic->pool_dry) ||
	    (ctl ? fab_frame_get_ctl : fab_frame_get)(nic->port, idx, &d)) {
		nic->pool_dry = true;
		nic->stats.frame_pool_empty++;
		return -ENOBUFS;
	}
	*data = d;
	return 0;
}

void port_frame_put(struct nic *nic, uint32_t idx)
{
	fab_frame_put(nic->port, idx);
}

_Static_assert(NIC_UNIT_MAX <= FAB_UNIT_MAX, "a unit the fabric takes");

void port_flush(struct nic *nic)
{
	struct fab_unit_res res;

	if (!nic->unit.n)
		return;
	fab_send_unit(nic->port, nic->unit.idx, nic->unit.len, nic->unit.n, nic->unit.dst, &res);
	nic->unit.n = 0;
	nic->stats.tx_frames += res.sent;
	nic->stats.dest_ring_full += res.ring_full;
	nic->stats.tx_unreachable += res.unreachable;
}

bool port_unit_join(struct nic *nic, uint32_t dst)
{
	if (nic->unit.n && (nic->unit.dst != dst || nic->unit.n == NIC_UNIT_MAX))
		port_flush(nic);
	if (nic->unit.n)
		return true;
	/* A unit that would be split (a rule, a tap callback, a full ring) is not
	 * built: its frames go one by one with their ICRCs, as before. */
	if (!nic->port || fab_unit_whole(nic->port, dst) != 1)
		return false;
	nic->unit.dst = dst;
	return true;
}

void port_unit_add(struct nic *nic, uint32_t idx, uint32_t len)
{
	nic->unit.idx[nic->unit.n] = idx;
	nic->unit.len[nic->unit.n] = len;
	nic->unit.n++;
}

int port_send(struct nic *nic, uint32_t idx, uint32_t len, uint32_t dst)
{
	int err;

	port_flush(nic);
	err = fab_send(nic->port, idx, len, dst);

	if (err == -ENOBUFS)
		nic->stats.dest_ring_full++;
	else if (err == -EHOSTUNREACH)
		nic->stats.tx_unreachable++;
	else if (!err)
		nic->stats.tx_frames++;
	return err;
}

int port_xmit(struct nic *nic, uint32_t dst, int (*fill)(void *arg, uint8_t *frame, size_t cap),
	      void *arg)
{
	uint32_t idx;
	uint8_t *data;
	int len, err;

	err = port_frame_get(nic, &idx, &data, true);
	if (err)
		return err;
	len = fill(arg, data, FAB_SLOT_BYTES);
	if (len < 0) {
		port_frame_put(nic, idx);
		return len;
	}
	return port_send(nic, idx, (uint32_t)len, dst);
}

/* One received frame: decode it and hand it on. */
static void dispatch(struct nic *nic, const struct fab_rx *rx, uint64_t now)
{
	struct fab_pkt pkt;
	enum fab_wire_err why;
	struct qp *qp;

	if (fab_pkt_decode_opt(rx->data, rx->len, &pkt, &why, rx->no_icrc ? FAB_PKT_NO_ICRC : 0) <
	    0) {
		nic->stats.rx_bad_frames++;
		nic_dbg(&nic->log, "frame from fabric slot %u refused: %s", rx->idx,
			fab_wire_err_str(why));
		return;
	}
	if (pkt.dst_ip != nic->opts.addr || pkt.src_ip != rx->src) {
		nic->stats.rx_bad_frames++;
		return;
	}
	if (pkt.dest_qpn == 1) {
		conn_rx(nic, &pkt);
		return;
	}
	qp = qp_find(&nic->qps, pkt.dest_qpn);
	nic_dbg(&nic->log, "rx %s psn %u qpn %u len %u syn 0x%x%s", fab_opcode_name(pkt.opcode),
		pkt.psn, pkt.dest_qpn, pkt.payload_len, pkt.syndrome, qp ? "" : " (no such QP)");
	if (!qp || qp->state != NIC_QPS_RTS || qp->peer_addr != pkt.src_ip) {
		nic->stats.rx_no_qp++;
		return;
	}
	qpio_rx(nic, qp, &pkt, now);
}

/*
 * Look at the fabric's header, at most once a second while the NIC runs: a
 * segment written over by some other process loses frames without any of
 * this NIC's checks failing (no frame arrives to be refused), so without
 * this look the NIC would stay silent while its connections fail.  Said
 * once when found damaged (and counted in fabric_damaged), once when sound
 * again.
 */
static void port_check(struct nic *nic)
{
	struct timespec ts;
	uint64_t t;
	bool bad;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (nic->fabric_checked && t - nic->fabric_checked < 1000000000u)
		return;
	nic->fabric_checked = t;
	bad = fab_check(nic->fab) < 0;
	if (bad && !nic->fabric_damaged) {
		nic->stats.fabric_damaged++;
		nic_warn(&nic->log,
			 "the fabric segment %s/" FAB_SEG_FILE " is damaged (its header no "
			 "longer describes a nicsim fabric of this version): frames may be lost "
			 "and connections fail; recreate the fabric (nicsim down, then nicsim up)",
			 nic->opts.dir);
	} else if (!bad && nic->fabric_damaged) {
		nic_info(&nic->log, "the fabric segment's header is sound again");
	}
	nic->fabric_damaged = bad;
}

unsigned port_poll(struct nic *nic)
{
	unsigned n = 0;
	struct fab_rx rx;
	uint64_t now = 0;

	if (!nic->port)
		return 0;
	port_check(nic);
	/* A bounded batch, so that host rings get their turn.  The transport
	 * arms its timers from the time it is given, and handling a frame can
	 * take tens of microseconds (an ACK lets the requester send a window's
	 * worth), so the clock is read again every few frames rather than for
	 * each (a read costs more than the rest of a delivery). */
	while (n < 64 && fab_recv(nic->port, &rx) == 0) {
		if (n % 8 == 0)
			now = fab_now_ns();
		n++;
		nic->stats.rx_frames++;
		/* The data path may keep the frame to write its payload to
		 * host memory in a batch (qpio.c); it gives it back then. */
		nic->rx_idx = rx.idx;
		nic->rx_data = rx.data;
		nic->rx_len = rx.len;
		nic->rx_keepable = true;
		nic->rx_kept = false;
		dispatch(nic, &rx, now);
		nic->rx_keepable = false;
		if (!nic->rx_kept) {
			fab_rx_done(nic->port, rx.idx);
			nic->pool_dry = false;
		}
	}
	qpio_rx_flush(nic);
	return n;
}
