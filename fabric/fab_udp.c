/*
 * A port's UDP side: its frames as RoCEv2 datagrams on port 4791 of its own
 * address, to and from NICs that are not on this fabric (fab.h, "UDP";
 * docs/fabric.md, "Beyond this machine").
 *
 * Three sockets, all on the port's address:
 *
 *   rx     SOCK_RAW, IPPROTO_UDP, bound to the address: a copy of every UDP
 *          datagram to it, from its IPv4 header on.  The ICRC covers the
 *          IP header's identification and flags, which a UDP socket does
 *          not show, and a peer such as Linux's rdma_rxe sets a new
 *          identification in every packet; so the header has to come with
 *          the datagram.  A classic BPF filter keeps only unfragmented
 *          datagrams to port 4791.
 *   guard  SOCK_DGRAM bound to ADDR:4791 with a filter that keeps nothing:
 *          it claims the port, so the kernel neither answers our peers'
 *          datagrams with ICMP port unreachable nor lets another program
 *          take the port, and binding it checks that the address is
 *          configured on an interface here.
 *   tx     SOCK_RAW, IPPROTO_RAW (IP_HDRINCL): the frame goes out as built,
 *          from its IPv4 header on, so that the packet on the wire is the
 *          one the ICRC was computed over and the one a capture records.
 *          The kernel fills in the header checksum and total length (both
 *          the frame's own values already) and, for a zero identification,
 *          keeps it zero because DF is set (Linux ip_select_ident_segs).
 *          IP_PMTUDISC_PROBE: the interface's MTU bounds a datagram, not a
 *          path MTU learnt from ICMP (see udp_sockets).
 *
 * Received datagrams become frames like any other: an Ethernet header
 * (the fabric's MACs, 02:00:<IPv4>) is written in front of the IPv4 header
 * in a frame of the pool, and the frame is queued for delivery, due at
 * once.  The NIC decodes it with every check a fabric frame gets, the ICRC
 * over the header as it arrived included.  What is refused here, before a
 * frame is made of it, is counted in struct fab_udp_stats.
 *
 * Frames towards an address with no open port on this fabric go out here.
 * When the address is bound to a slot (`nicsim link set` binds it), the
 * link's model decides on each frame as for a fabric frame; frames the
 * model delays wait in a heap of their own until they are due.  Frames
 * sent within a burst (fab_port_hold_kicks) leave together in one
 * sendmmsg call when the burst ends.
 */
#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fab_priv.h"
#include "fab_wire.h"

/* Frames received or sent per system call. */
#define UDP_BATCH 32u
/* Datagrams received and not yet taken by fab_recv, at most. */
#define UDP_WAITING_MAX (2 * UDP_BATCH)
/* Socket buffers: a few milliseconds of traffic at several Gbit/s. */
#define UDP_SOCKBUF (8 << 20)
/* Header of the IPv4 and UDP part of a frame. */
#define IP_UDP_HLEN (FAB_IP4_HLEN + FAB_UDP_HLEN)

struct udp_out {
	uint32_t idx, len, dst;
};

struct fab_udp {
	int rx_fd, tx_fd, guard_fd;
	struct fab_udp_stats st;
	/* Frames taken from the pool to receive into. */
	uint32_t stash[UDP_BATCH];
	uint32_t nstash;
	/* Frames waiting for the next sendmmsg. */
	struct udp_out out[UDP_BATCH];
	uint32_t nout;
	/* Frames a link model delays, a heap by (due_ns, order); src_addr
	 * holds each one's destination. */
	struct fab_heap_ent *timed;
	uint32_t ntimed, captimed;
	uint64_t order;
};

/* ---- Sockets ------------------------------------------------------------------------ */

static int set_filter(int fd, struct sock_filter *code, unsigned short n)
{
	struct sock_fprog prog = {.len = n, .filter = code};

	return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0 ? -errno : 0;
}

/*
 * The receive socket's filter, run on each datagram from its IPv4 header
 * on: keep UDP that is not a fragment (offset and MF zero) and whose
 * destination port is 4791, wherever the IHL puts the UDP header.
 */
static int filter_roce(int fd)
{
	struct sock_filter code[] = {
	    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9), /* protocol */
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 6),
	    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 6), /* flags and fragment offset */
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x3fff, 4, 0),
	    BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 0), /* X = IHL * 4 */
	    BPF_STMT(BPF_LD | BPF_H | BPF_IND, 2),  /* UDP destination port */
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FAB_ROCE_PORT, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, 0xffff),
	    BPF_STMT(BPF_RET | BPF_K, 0),
	};

	return set_filter(fd, code, sizeof(code) / sizeof(code[0]));
}

static int filter_none(int fd)
{
	struct sock_filter code[] = {BPF_STMT(BPF_RET | BPF_K, 0)};

	return set_filter(fd, code, 1);
}

static void sockbuf(int fd, int opt)
{
	int v = UDP_SOCKBUF;

	/* The FORCE variant passes the system's limit (root); the plain one
	 * is capped by it. */
	if (setsockopt(fd, SOL_SOCKET, opt == SO_RCVBUF ? SO_RCVBUFFORCE : SO_SNDBUFFORCE, &v,
		       sizeof(v)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
}

static int udp_sockets(struct fab_udp *u, uint32_t addr)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = addr};
	int one = 1, err;

	u->guard_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (u->guard_fd < 0)
		return -errno;
	err = filter_none(u->guard_fd);
	if (err)
		return err;
	sa.sin_port = htons(FAB_ROCE_PORT);
	if (bind(u->guard_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	sa.sin_port = 0;

	u->rx_fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_UDP);
	if (u->rx_fd < 0)
		return -errno;
	err = filter_roce(u->rx_fd);
	if (err)
		return err;
	/* A raw socket bound to an address gets only datagrams to it. */
	if (bind(u->rx_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	sockbuf(u->rx_fd, SO_RCVBUF);

	u->tx_fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_RAW);
	if (u->tx_fd < 0)
		return -errno;
	if (setsockopt(u->tx_fd, IPPROTO_IP, IP_HDRINCL, &one, sizeof(one)) < 0)
		return -errno;
	/*
	 * Judge each datagram by the interface's MTU, not by what the kernel
	 * has learnt of the path: a connection's MTU is fixed when it is made
	 * (CM REQ), as on a RoCE NIC, which ignores ICMP.  Otherwise one
	 * ICMP "fragmentation needed", which anyone can forge without seeing
	 * the traffic, would make the kernel refuse every larger datagram of
	 * the connections already made (EMSGSIZE) until they die of retries.
	 */
	if (setsockopt(u->tx_fd, IPPROTO_IP, IP_MTU_DISCOVER, &(int){IP_PMTUDISC_PROBE},
		       sizeof(int)) < 0)
		return -errno;
	sockbuf(u->tx_fd, SO_SNDBUF);
	return 0;
}

static void udp_free(struct fab_udp *u)
{
	if (u->rx_fd >= 0)
		close(u->rx_fd);
	if (u->tx_fd >= 0)
		close(u->tx_fd);
	if (u->guard_fd >= 0)
		close(u->guard_fd);
	free(u->timed);
	free(u);
}

int fab_port_udp_open(struct fab_port *p)
{
	struct fab_udp *u;
	int err;

	if (p->udp)
		return -EALREADY;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->rx_fd = u->tx_fd = u->guard_fd = -1;
	u->captimed = p->fab->nframes;
	u->timed = calloc(u->captimed, sizeof(*u->timed));
	if (!u->timed) {
		udp_free(u);
		return -ENOMEM;
	}
	err = udp_sockets(u, p->addr);
	if (err) {
		udp_free(u);
		return err;
	}
	p->udp = u;
	return 0;
}

void fab_port_udp_close(struct fab_port *p)
{
	struct fab_udp *u = p->udp;

	if (!u)
		return;
	/* The frames it held go back with the port's (fab_port_close). */
	p->udp = NULL;
	udp_free(u);
}

int fab_port_udp_fd(const struct fab_port *p)
{
	return p->udp ? p->udp->rx_fd : -1;
}

int fab_port_udp_stats(const struct fab_port *p, struct fab_udp_stats *st)
{
	if (!p->udp)
		return -ENOENT;
	*st = p->udp->st;
	return 0;
}

/* ---- Path MTU ----------------------------------------------------------------------- */

/* IPv4 + UDP + BTH + the longest headers before a payload (RETH, ImmDt) +
 * ICRC: what a full packet adds to its payload. */
#define ROCE_OVERHEAD (IP_UDP_HLEN + FAB_BTH_LEN + FAB_RETH_LEN + FAB_IMMDT_LEN + FAB_ICRC_LEN)

uint32_t fab_ib_mtu_for(uint32_t ip_mtu)
{
	for (uint32_t mtu = FAB_MTU; mtu >= 256; mtu /= 2)
		if (mtu + ROCE_OVERHEAD <= ip_mtu)
			return mtu;
	return 0;
}

uint32_t fab_port_path_mtu(struct fab_port *p, uint32_t dst)
{
	struct sockaddr_in sa = {
	    .sin_family = AF_INET, .sin_port = htons(FAB_ROCE_PORT), .sin_addr.s_addr = dst};
	int d = fab_slot_find(p->fab, dst), fd, ip_mtu = 0;
	socklen_t sl = sizeof(ip_mtu);
	uint32_t mtu;

	if (!p->udp ||
	    (d >= 0 && __atomic_load_n(&p->fab->ports[d].state, __ATOMIC_ACQUIRE) == FAB_PORT_OPEN))
		return FAB_MTU;
	/* The route's MTU, as the kernel knows it: a connected UDP socket
	 * asks (IP_MTU), and nothing is sent. */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 1024;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockopt(fd, IPPROTO_IP, IP_MTU, &ip_mtu, &sl) < 0)
		ip_mtu = 1500;
	close(fd);
	mtu = fab_ib_mtu_for((uint32_t)ip_mtu);
	return mtu ? mtu : 256;
}

/* ---- Sending ------------------------------------------------------------------------ */

/* Count a failed datagram by its errno; the kind of error a caller sees. */
static int tx_failed(struct fab_udp *u, int err)
{
	switch (err) {
	case EMSGSIZE: u->st.tx_too_big++; return -EMSGSIZE;
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
	case EADDRNOTAVAIL: u->st.tx_unreachable++; return -EHOSTUNREACH;
	case EAGAIN:
	case ENOBUFS:
	case ENOMEM: u->st.tx_nobufs++; return -ENOBUFS;
	default: u->st.tx_errors++; return -EIO;
	}
}

/*
 * Send what waits in the batch, in one call when the kernel takes them
 * all.  A datagram it refuses is counted and skipped.  The frames go back
 * to the pool.  Returns the error of the last datagram if it failed
 * (what fab_send reports for a frame sent alone), else 0.
 */
static int udp_flush(struct fab_port *p)
{
	struct fab_udp *u = p->udp;
	struct mmsghdr msg[UDP_BATCH];
	struct iovec iov[UDP_BATCH];
	struct sockaddr_in to[UDP_BATCH];
	uint32_t i = 0, n = u->nout;
	int last = 0;

	if (!n)
		return 0;
	memset(msg, 0, sizeof(msg[0]) * n);
	for (uint32_t k = 0; k < n; k++) {
		to[k] =
		    (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = u->out[k].dst};
		iov[k].iov_base = fab_frame_at(p->fab, u->out[k].idx) + FAB_ETH_HLEN;
		iov[k].iov_len = u->out[k].len - FAB_ETH_HLEN;
		msg[k].msg_hdr.msg_name = &to[k];
		msg[k].msg_hdr.msg_namelen = sizeof(to[k]);
		msg[k].msg_hdr.msg_iov = &iov[k];
		msg[k].msg_hdr.msg_iovlen = 1;
	}
	while (i < n) {
		int r = sendmmsg(u->tx_fd, msg + i, n - i, MSG_DONTWAIT);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			/* The first of the rest failed: skip it, go on. */
			last = tx_failed(u, errno);
			i++;
			continue;
		}
		for (int k = 0; k < r; k++) {
			u->st.tx_datagrams++;
			u->st.tx_bytes += iov[i + (uint32_t)k].iov_len;
		}
		i += (uint32_t)r;
		last = 0;
	}
	for (uint32_t k = 0; k < n; k++)
		fab_port_release(p, u->out[k].idx);
	u->nout = 0;
	return last;
}

/* Queue one frame for the next sendmmsg; flushes a full batch. */
static void udp_queue(struct fab_port *p, uint32_t idx, uint32_t len, uint32_t dst)
{
	struct fab_udp *u = p->udp;

	if (u->nout == UDP_BATCH)
		udp_flush(p);
	u->out[u->nout++] = (struct udp_out){.idx = idx, .len = len, .dst = dst};
}

/* Whether the frame's own IPv4 header says it goes from this port to dst,
 * as a datagram the kernel will send unchanged. */
static bool frame_sendable(const struct fab_port *p, const uint8_t *f, uint32_t len, uint32_t dst)
{
	const struct fab_ip4_hdr *ip = (const void *)(f + FAB_ETH_HLEN);
	uint32_t s, d;

	if (len < FAB_FRAME_MIN || len > FAB_SLOT_BYTES || ip->ver_ihl != 0x45 ||
	    ip->proto != FAB_IPPROTO_UDP || fab_get16(ip->tot_len) != len - FAB_ETH_HLEN)
		return false;
	memcpy(&s, ip->saddr, 4);
	memcpy(&d, ip->daddr, 4);
	return s == p->addr && d == dst;
}

/* One frame after the model: now, or when its link says it arrives. */
static void udp_place(struct fab_port *p, uint32_t idx, uint32_t len, uint32_t dst, uint64_t now,
		      uint64_t due)
{
	struct fab_udp *u = p->udp;

	if (due > now && u->ntimed < u->captimed) {
		struct fab_heap_ent e = {
		    .due_ns = due, .order = u->order++, .idx = idx, .len = len, .src_addr = dst};

		fab_heap_push(u->timed, &u->ntimed, &e);
		return;
	}
	udp_queue(p, idx, len, dst);
}

int fab_udp_send(struct fab_port *p, uint32_t idx, uint32_t len, uint32_t dst)
{
	struct fab *fab = p->fab;
	struct fab_udp *u = p->udp;
	uint8_t *data = fab_frame_at(fab, idx);
	struct fab_verdict v = {0};
	uint32_t dup_idx;
	uint64_t now;
	int d;

	if (!frame_sendable(p, data, len, dst)) {
		u->st.tx_refused++;
		fab_port_release(p, idx);
		return -EINVAL;
	}
	d = fab_slot_find(fab, dst);
	if (d < 0) {
		/* No link configured towards dst: straight out. */
		now = fab_now_ns();
		fab_port_tap(p, idx, len, p->addr, dst, 0, now, now, 0, false);
		udp_queue(p, idx, len, dst);
		return p->holding ? 0 : udp_flush(p);
	}
	{
		struct fab_seg_link *l = fab_link_at(fab, p->slot, (uint32_t)d);
		struct fab_tx *t = &p->tx[d];

		if (!fab_link_view_refresh(fab, l, p->slot, (uint32_t)d, &t->view))
			FAB_PORT_COUNT(p, bad_config);
		now = fab_now_ns();
		fab_link_decide(l, &t->view, data, len, now, &v);
	}
	if (v.marks & FAB_MARKS_DROP) {
		fab_port_tap(p, idx, len, p->addr, dst, v.marks, now, 0, v.link_seq, false);
		fab_port_release(p, idx);
		return 0;
	}
	if (v.marks & FAB_MARK_CORRUPTED)
		data[v.corrupt_bit / 8] ^= (uint8_t)(1u << (v.corrupt_bit % 8));
	fab_port_tap(p, idx, len, p->addr, dst, v.marks, now, v.due_ns, v.link_seq, false);
	if (v.duplicate && fab_frame_get(p, &dup_idx, NULL) == 0) {
		memcpy(fab_frame_at(fab, dup_idx), data, len);
		fab_count(&fab_link_at(fab, p->slot, (uint32_t)d)->tx.duplicated, 1);
		fab_port_tap(p, dup_idx, len, p->addr, dst, v.marks | FAB_MARK_DUPLICATE, now,
			     v.due_ns, v.link_seq, false);
		udp_place(p, idx, len, dst, now, v.due_ns);
		udp_place(p, dup_idx, len, dst, now, v.due_ns);
	} else {
		if (v.duplicate)
			fab_count(&fab_link_at(fab, p->slot, (uint32_t)d)->tx.dup_nobuf, 1);
		udp_place(p, idx, len, dst, now, v.due_ns);
	}
	return p->holding || u->nout == 0 ? 0 : udp_flush(p);
}

/* Send the delayed frames that are due by now. */
static void udp_send_due(struct fab_port *p, uint64_t now)
{
	struct fab_udp *u = p->udp;
	struct fab_heap_ent e;

	while (u->ntimed && u->timed[0].due_ns <= now) {
		int d = fab_slot_find(p->fab, u->timed[0].src_addr);

		fab_heap_pop(u->timed, &u->ntimed, &e);
		/* A link that went down while the frame was on its way. */
		if (d >= 0) {
			struct fab_seg_link *l = fab_link_at(p->fab, p->slot, (uint32_t)d);

			if (!fab_link_view_refresh(p->fab, l, p->slot, (uint32_t)d, &p->tx[d].view))
				FAB_PORT_COUNT(p, bad_config);
			if (p->tx[d].view.cfg.flags & FAB_LINK_DOWN) {
				fab_count(&l->rx.dropped_down_rx, 1);
				fab_port_tap(p, e.idx, e.len, p->addr, e.src_addr,
					     FAB_MARK_DROP_DOWN, now, e.due_ns, 0, true);
				fab_port_release(p, e.idx);
				continue;
			}
		}
		udp_queue(p, e.idx, e.len, e.src_addr);
	}
	udp_flush(p);
}

void fab_udp_tx_flush(struct fab_port *p)
{
	if (p->udp)
		udp_flush(p);
}

uint64_t fab_udp_next_due_ns(struct fab_port *p)
{
	return p->udp && p->udp->ntimed ? p->udp->timed[0].due_ns : UINT64_MAX;
}

/* ---- Receiving ---------------------------------------------------------------------- */

enum fab_udp_rx fab_udp_rx_judge(const uint8_t *ip, size_t n, bool truncated, uint32_t addr)
{
	const struct fab_ip4_hdr *h = (const void *)ip;
	const struct fab_udp_hdr *uh = (const void *)(ip + FAB_IP4_HLEN);
	uint32_t daddr;

	if (truncated)
		return FAB_UDP_RX_OVERSIZE;
	if (n < FAB_FRAME_MIN - FAB_ETH_HLEN)
		return FAB_UDP_RX_SHORT;
	/* IP options, fragments, or not UDP to 4791: not a RoCEv2 packet of
	 * this fabric (the filter lets through only UDP to 4791). */
	if (h->ver_ihl != 0x45 || (fab_get16(h->frag) & 0x3fff) || h->proto != FAB_IPPROTO_UDP ||
	    fab_get16(uh->dport) != FAB_ROCE_PORT)
		return FAB_UDP_RX_NOT_ROCE;
	if (fab_get16(h->tot_len) != n || fab_get16(uh->len) != n - FAB_IP4_HLEN)
		return FAB_UDP_RX_BAD_LENGTH;
	memcpy(&daddr, h->daddr, 4);
	if (daddr != addr)
		return FAB_UDP_RX_WRONG_DST;
	return FAB_UDP_RX_OK;
}

void fab_udp_rx_eth(uint8_t *frame)
{
	const struct fab_ip4_hdr *ip = (const void *)(frame + FAB_ETH_HLEN);
	struct fab_eth_hdr *eth = (void *)frame;
	uint32_t saddr, daddr;

	memcpy(&saddr, ip->saddr, 4);
	memcpy(&daddr, ip->daddr, 4);
	fab_mac_from_ip(daddr, eth->dst);
	fab_mac_from_ip(saddr, eth->src);
	fab_put16(eth->type, FAB_ETHERTYPE_IPV4);
}

/* The counter of a datagram's judgement; NULL if it is accepted. */
static uint64_t *rx_refuse(struct fab_port *p, const uint8_t *ip, size_t n, int flags)
{
	struct fab_udp_stats *st = &p->udp->st;

	switch (fab_udp_rx_judge(ip, n, flags & MSG_TRUNC, p->addr)) {
	case FAB_UDP_RX_OK: return NULL;
	case FAB_UDP_RX_OVERSIZE: return &st->rx_oversize;
	case FAB_UDP_RX_SHORT: return &st->rx_short;
	case FAB_UDP_RX_NOT_ROCE: return &st->rx_not_roce;
	case FAB_UDP_RX_BAD_LENGTH: return &st->rx_bad_length;
	default: return &st->rx_wrong_dst;
	}
}

uint32_t fab_udp_pull(struct fab_port *p, uint64_t now)
{
	struct fab_udp *u = p->udp;
	struct mmsghdr msg[UDP_BATCH];
	struct iovec iov[UDP_BATCH];
	uint32_t want, waiting, got = 0;
	int r;

	if (!u)
		return 0;
	udp_send_due(p, now);
	/* Room to hand them out, and frames to put them in.  At most
	 * UDP_WAITING_MAX datagrams wait in the port: more would only move
	 * the socket's queue into the pool, where a flood would hold every
	 * frame and each fab_frame_get would scan the pool for a free one.
	 * Datagrams take the frames data may take, so with as many waiting
	 * as those, none is free. */
	if (p->udp_waiting >= UDP_WAITING_MAX)
		return 0;
	want = p->fab->nframes - fab_ctl_frames(p->fab->nframes);
	waiting = fab_port_waiting(p);
	want = waiting < want ? want - waiting : 0;
	if (want > UDP_WAITING_MAX - p->udp_waiting)
		want = UDP_WAITING_MAX - p->udp_waiting;
	if (want > UDP_BATCH)
		want = UDP_BATCH;
	while (u->nstash < want && fab_frame_get(p, &u->stash[u->nstash], NULL) == 0)
		u->nstash++;
	if (u->nstash < want)
		want = u->nstash;
	if (!want) {
		/* None to receive into: the datagrams wait in the socket. */
		u->st.rx_nobuf++;
		return 0;
	}
	memset(msg, 0, sizeof(msg[0]) * want);
	for (uint32_t k = 0; k < want; k++) {
		iov[k].iov_base = fab_frame_at(p->fab, u->stash[u->nstash - 1 - k]) + FAB_ETH_HLEN;
		iov[k].iov_len = FAB_SLOT_BYTES - FAB_ETH_HLEN;
		msg[k].msg_hdr.msg_iov = &iov[k];
		msg[k].msg_hdr.msg_iovlen = 1;
	}
	r = recvmmsg(u->rx_fd, msg, want, MSG_DONTWAIT, NULL);
	if (r <= 0)
		return 0;
	for (int k = 0; k < r; k++) {
		uint32_t idx = u->stash[u->nstash - 1 - (uint32_t)k];
		uint8_t *f = fab_frame_at(p->fab, idx);
		size_t n = msg[k].msg_len;
		uint64_t *refused = rx_refuse(p, f + FAB_ETH_HLEN, n, msg[k].msg_hdr.msg_flags);
		struct fab_ip4_hdr *ip = (void *)(f + FAB_ETH_HLEN);
		struct fab_heap_ent e;
		uint32_t saddr;

		u->st.rx_datagrams++;
		u->st.rx_bytes += n;
		if (refused) {
			(*refused)++;
			continue; /* the frame stays in the stash */
		}
		memcpy(&saddr, ip->saddr, 4);
		fab_udp_rx_eth(f);
		/* Out of the stash: the slot moves down over it. */
		u->stash[u->nstash - 1 - (uint32_t)k] = UINT32_MAX;
		e = (struct fab_heap_ent){.due_ns = now,
					  .sent_ns = now,
					  .idx = idx,
					  .len = (uint32_t)(n + FAB_ETH_HLEN),
					  .src_addr = saddr,
					  .marks = FAB_ENT_UDP};
		fab_port_tap(p, idx, e.len, saddr, p->addr, 0, now, now, 0, false);
		if (fab_port_deliver_later(p, &e)) {
			p->udp_waiting++;
			got++;
		}
	}
	/* Close the stash over the frames handed on. */
	{
		uint32_t j = 0;

		for (uint32_t k = 0; k < u->nstash; k++)
			if (u->stash[k] != UINT32_MAX)
				u->stash[j++] = u->stash[k];
		u->nstash = j;
	}
	return got;
}
