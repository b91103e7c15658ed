/*
 * NICs in separate network namespaces, every frame a UDP datagram
 * (nicsimd --udp; docs/fabric.md, "Beyond this machine"): what crosses the
 * wire and what the NICs make of datagrams from anyone who can reach them.
 *
 * The fixture is the SPI suites' with --udp (nstspidata.h): NICs A to D
 * (198.18.0.1 to .4) each in a namespace of its own on one Ethernet segment
 * of 1500-byte links.  The test watches the segment from inside B's
 * namespace with a packet socket on B's eth0, and plays the attacker from
 * C's namespace (C's NIC has nothing to do with it): a raw socket there can
 * send any datagram, with any source address, to B.
 *
 *   - wire: every datagram of a connection, a transfer each way and its
 *     set-up, is a RoCEv2 packet whose ICRC is right over the IP header as
 *     it crossed the wire (identification 0, DF, TTL 64 as the kernel sent
 *     it), and the CM REQ asks for the path MTU the 1500-byte link carries
 *     (1024), which the data packets then use;
 *   - jumbo links: with 9000-byte links between A and B, a new connection
 *     uses 4096;
 *   - bad datagrams (short, oversized, wrong lengths, wrong ICRC, to a QP
 *     that is not there, from a host that is not the peer) are counted and
 *     dropped, and the connection they aimed at works on, its data intact;
 *   - a replayed SEND is a duplicate: answered, not delivered again;
 *   - a flood of bad datagrams does not starve a transfer;
 *   - the link rules on the UDP path: loss, duplicates, reordering and
 *     corruption towards B are met by the transport, the data intact, and
 *     counted on A's fabric;
 *   - a forged ICMP "fragmentation needed" does not stop a connection
 *     that was made with a larger MTU;
 *   - a NIC whose UDP port is taken, or whose address is on no interface,
 *     stops at once and says what to do;
 *   - a rule on a link from a NIC beyond the fabric, which never applies,
 *     is set with a note that says so.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "fab_cm.h"
#include "fab_wire.h"
#include "nicsim_mgmt.h"
#include "nstest.h"
#include "nstnet.h"
#include "nstnic.h"
#include "nstspidata.h"

#define NS_A (spi_net.host[1])
#define NS_B (spi_net.host[2])
#define NS_C (spi_net.host[3])
#define WIRE_MAX 16384u /* frames kept from one look at the wire */

/* ---- Sockets in other namespaces -------------------------------------------------- */

/* Run fn(arg) with this thread in namespace ns, then back: 0, or -1 if the
 * thread could not go there (fn not run). */
static int in_ns(const char *ns, void (*fn)(void *arg), void *arg)
{
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);

	if (self < 0)
		return -1;
	if (nst_net_enter(ns) < 0) {
		close(self);
		return -1;
	}
	fn(arg);
	if (setns(self, CLONE_NEWNET) < 0)
		abort(); /* the rest of the test would run in the wrong place */
	close(self);
	return 0;
}

struct sock_req {
	int domain, type, proto;
	const char *ifname; /* a packet socket: bound to it */
	int fd;
};

static void make_sock(void *arg)
{
	struct sock_req *r = arg;
	int big = 8 << 20;

	r->fd = socket(r->domain, r->type | SOCK_CLOEXEC, r->proto);
	if (r->fd < 0)
		return;
	setsockopt(r->fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	setsockopt(r->fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
	if (r->ifname) {
		struct sockaddr_ll ll = {.sll_family = AF_PACKET,
					 .sll_protocol = htons(ETH_P_ALL),
					 .sll_ifindex = (int)if_nametoindex(r->ifname)};

		if (!ll.sll_ifindex || bind(r->fd, (struct sockaddr *)&ll, sizeof(ll)) < 0) {
			close(r->fd);
			r->fd = -1;
		}
	}
}

/* A socket made in namespace ns, or -1. */
static int socket_in(const char *ns, int domain, int type, int proto, const char *ifname)
{
	struct sock_req r = {
	    .domain = domain, .type = type, .proto = proto, .ifname = ifname, .fd = -1};

	return in_ns(ns, make_sock, &r) < 0 ? -1 : r.fd;
}

/* A packet socket that sees every frame on eth0 of namespace ns, both
 * ways (ETH_P_ALL: a socket of one protocol sees only what comes in). */
static int wire_open(const char *ns)
{
	return socket_in(ns, AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL), "eth0");
}

/* A raw socket in ns that sends IPv4 packets as given (IP_HDRINCL). */
static int raw_out(const char *ns)
{
	return socket_in(ns, AF_INET, SOCK_RAW, IPPROTO_RAW, NULL);
}

/* ---- What crossed the wire ---------------------------------------------------------- */

struct frame {
	uint32_t len;
	uint8_t data[FAB_SLOT_BYTES];
};

struct wire {
	struct frame *f;
	size_t n;
};

/* The RoCEv2 frames waiting on packet socket fd (the Ethernet header as on
 * the wire); up to WIRE_MAX. */
static void wire_take(int fd, struct wire *w)
{
	uint8_t buf[FAB_SLOT_BYTES + 64];
	ssize_t n;

	if (!w->f)
		w->f = calloc(WIRE_MAX, sizeof(*w->f));
	while (w->f && (n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		const struct fab_ip4_hdr *ip = (const void *)(buf + FAB_ETH_HLEN);
		const struct fab_udp_hdr *u = (const void *)(buf + FAB_ETH_HLEN + FAB_IP4_HLEN);

		if ((size_t)n < FAB_FRAME_MIN || (size_t)n > FAB_SLOT_BYTES ||
		    ip->ver_ihl != 0x45 || ip->proto != FAB_IPPROTO_UDP ||
		    fab_get16(u->dport) != FAB_ROCE_PORT || w->n == WIRE_MAX)
			continue;
		memcpy(w->f[w->n].data, buf, (size_t)n);
		w->f[w->n++].len = (uint32_t)n;
	}
}

static void wire_free(struct wire *w)
{
	free(w->f);
	w->f = NULL;
	w->n = 0;
}

/* Frame f made a fabric frame (the fabric's MACs in front, as the
 * receiving NIC does) and decoded with every check, the ICRC included. */
static int decode(struct frame *f, struct fab_pkt *pkt, enum fab_wire_err *why)
{
	uint32_t s, d;

	memcpy(&s, f->data + FAB_ETH_HLEN + 12, 4);
	memcpy(&d, f->data + FAB_ETH_HLEN + 16, 4);
	fab_mac_from_ip(d, f->data);
	fab_mac_from_ip(s, f->data + 6);
	return fab_pkt_decode(f->data, f->len, pkt, why);
}

static uint32_t addr_n(const char *a)
{
	uint32_t v = 0;

	fab_addr_parse(a, &v);
	return v;
}

/* Send the IPv4 packet of frame f (from its IP header) out of raw socket
 * fd to its destination. */
static bool send_frame(int fd, const uint8_t *f, uint32_t len)
{
	struct sockaddr_in to = {.sin_family = AF_INET};

	memcpy(&to.sin_addr.s_addr, f + FAB_ETH_HLEN + 16, 4);
	return sendto(fd, f + FAB_ETH_HLEN, len - FAB_ETH_HLEN, 0, (struct sockaddr *)&to,
		      sizeof(to)) == (ssize_t)(len - FAB_ETH_HLEN);
}

static uint64_t stat_of(const char *sock, size_t off)
{
	return nst_nic_stat(sock, off);
}

/* ---- A connection and its traffic ------------------------------------------------------ */

struct pair {
	SOCKET a, b;
	uint8_t *ma, *mb; /* 2 * len each: [0, len) registered, [len, 2 len) exposed */
	HANDLE ha, hb;
	struct nicsim_rdma_desc db;
	uint32_t len;
};

static bool pair_open(struct pair *p, uint32_t len)
{
	memset(p, 0, sizeof(*p));
	p->len = len;
	p->ma = map(2 * (size_t)len);
	p->mb = map(2 * (size_t)len);
	if (!p->ma || !p->mb || connect_pair(ADDR_B, ADDR_A, &p->b, &p->a) != 0)
		return false;
	p->ha = reg(p->a, p->ma, 2 * len, MEM_READWRITE);
	p->hb = reg(p->b, p->mb, len, MEM_READWRITE);
	return p->ha && p->hb && expose(p->b, p->mb + len, len, MEM_READWRITE, &p->db) == 0;
}

static void pair_close(struct pair *p)
{
	if (p->ha)
		dereg(p->a, p->ha);
	if (p->hb)
		dereg(p->b, p->hb);
	if (p->db.len)
		unexpose(p->b, &p->db);
	close_socket(p->a);
	close_socket(p->b);
	munmap(p->ma, 2 * (size_t)p->len);
	munmap(p->mb, 2 * (size_t)p->len);
}

/* An RDMA WRITE of n bytes from A into B (pattern seed), checked at B. */
static bool pair_write(struct pair *p, uint32_t n, uint32_t seed)
{
	WSAOVERLAPPED ov;
	DWORD got = 0;

	nst_fill(p->ma, n, seed);
	if (post_rdma(p->a, true, p->ma, n, p->ha, &p->db, 0, &ov) != WSA_IO_PENDING ||
	    ov_wait(p->a, &ov, &got) != 0 || got != n)
		return false;
	return memcmp(p->mb + p->len, p->ma, n) == 0;
}

/* An RDMA READ of n bytes of B into A, checked. */
static bool pair_read(struct pair *p, uint32_t n, uint32_t seed)
{
	WSAOVERLAPPED ov;
	DWORD got = 0;

	nst_fill(p->mb + p->len, n, seed);
	memset(p->ma + p->len, 0, n);
	if (post_rdma(p->a, false, p->ma + p->len, n, p->ha, &p->db, 0, &ov) != WSA_IO_PENDING ||
	    ov_wait(p->a, &ov, &got) != 0 || got != n)
		return false;
	return memcmp(p->mb + p->len, p->ma + p->len, n) == 0;
}

/* A SEND of n bytes from A to B, received into a receive posted first. */
static bool pair_send(struct pair *p, uint32_t n, uint32_t seed)
{
	WSAOVERLAPPED ovr, ovs;
	DWORD got = 0;

	int r1, r2 = -1, r3 = -1, r4 = -1;

	nst_fill(p->ma, n, seed);
	if ((r1 = post_recv(p->b, p->mb, n, &ovr)) != WSA_IO_PENDING ||
	    (r2 = post_send(p->a, p->ma, n, &ovs)) != WSA_IO_PENDING ||
	    (r3 = ov_wait(p->a, &ovs, NULL)) != 0 || (r4 = ov_wait(p->b, &ovr, &got)) != 0) {
		printf("\n    send of %u: recv %d send %d waits %d %d ", n, r1, r2, r3, r4);
		return false;
	}
	return got == n && memcmp(p->mb, p->ma, n) == 0;
}

/* ---- Tests ------------------------------------------------------------------------------ */

/* What one connection put on the wire: every datagram a RoCEv2 packet
 * whose ICRC holds over the header the kernel sent, the path MTU 1024. */
static void test_wire_headers_icrc_and_mtu(void)
{
	int fd = wire_open(NS_B);
	struct wire w = {0};
	struct pair p;
	size_t data = 0, bad = 0, cm_reqs = 0;
	uint32_t most = 0, most_read = 0;

	NST_REQUIRE(fd >= 0);
	NST_REQUIRE(pair_open(&p, 1u << 20));
	/* Taken after each step: the socket holds a few thousand frames. */
	NST_TRUE(pair_write(&p, 1u << 20, 1));
	wire_take(fd, &w);
	NST_TRUE(pair_read(&p, 1u << 20, 2));
	wire_take(fd, &w);
	NST_TRUE(pair_send(&p, 3000, 3));
	wire_take(fd, &w);
	for (size_t i = 0; i < w.n; i++) {
		const struct fab_ip4_hdr *ip = (const void *)(w.f[i].data + FAB_ETH_HLEN);
		struct fab_pkt pkt;
		enum fab_wire_err why;

		/* As the kernel sent it: DF, identification 0, TTL 64. */
		NST_EQ_U(fab_get16(ip->frag), FAB_IP4_DF);
		NST_EQ_U(fab_get16(ip->id), 0);
		NST_EQ_U(ip->ttl, 64);
		if (decode(&w.f[i], &pkt, &why) < 0) {
			if (bad++ < 3)
				printf("\n    frame %zu refused: %s", i, fab_wire_err_str(why));
			continue;
		}
		if (pkt.dest_qpn == 1) {
			struct fab_cm_msg m;
			enum fab_cm_err cwhy;

			if (fab_cm_decode(&pkt, &m, &cwhy) == 0 && m.type == FAB_CM_REQ) {
				cm_reqs++;
				NST_EQ_U(m.mtu, 1024);
			}
			continue;
		}
		data++;
		if (pkt.opcode == FAB_OP_RDMA_WRITE_MIDDLE && pkt.payload_len > most)
			most = pkt.payload_len;
		if (pkt.opcode == FAB_OP_RDMA_READ_RESPONSE_MIDDLE && pkt.payload_len > most_read)
			most_read = pkt.payload_len;
	}
	printf("\n    %zu datagrams on B's wire, %zu of them data; CM REQs %zu; payloads "
	       "%u (write) %u (read) ",
	       w.n, data, cm_reqs, most, most_read);
	NST_EQ(bad, 0);
	NST_GE(cm_reqs, 1);
	/* 1 MiB each way in 1024-byte packets. */
	NST_GE(data, 2048);
	NST_EQ_U(most, 1024);
	NST_EQ_U(most_read, 1024);
	wire_free(&w);
	pair_close(&p);
	close(fd);
}

/* Links that carry 9000-byte packets: a new connection uses 4096. */
static void test_jumbo_links_take_mtu_4096(void)
{
	const char *const nss[2] = {NS_A, NS_B};
	const char *const ports[2] = {"p1", "p2"};
	int fd = wire_open(NS_B);
	struct wire w = {0};
	struct pair p;
	uint32_t most = 0;

	NST_REQUIRE(fd >= 0);
	for (int i = 0; i < 2; i++) {
		NST_REQUIRE_EQ(
		    nst_net_ip(spi_net.bridge,
			       (const char *const[]){"link", "set", ports[i], "mtu", "9000", NULL}),
		    0);
		NST_REQUIRE_EQ(nst_net_ip(nss[i], (const char *const[]){"link", "set", "eth0",
									"mtu", "9000", NULL}),
			       0);
	}
	NST_TRUE(pair_open(&p, 1u << 20));
	NST_TRUE(pair_write(&p, 1u << 20, 5));
	wire_take(fd, &w);
	for (size_t i = 0; i < w.n; i++) {
		struct fab_pkt pkt;
		enum fab_wire_err why;

		NST_EQ(decode(&w.f[i], &pkt, &why), 0);
		if (pkt.payload_len > most)
			most = pkt.payload_len;
	}
	printf("\n    largest payload on 9000-byte links: %u ", most);
	NST_EQ_U(most, 4096);
	pair_close(&p);
	wire_free(&w);
	close(fd);
	for (int i = 0; i < 2; i++) {
		NST_EQ(nst_net_ip(nss[i], (const char *const[]){"link", "set", "eth0", "mtu",
								"1500", NULL}),
		       0);
		NST_EQ(nst_net_ip(spi_net.bridge, (const char *const[]){"link", "set", ports[i],
									"mtu", "1500", NULL}),
		       0);
	}
}

/* A plain UDP socket of C's, bound to C's address, sending to B:4791. */
static int udp_from_c(void)
{
	struct sockaddr_in me = {.sin_family = AF_INET};
	int fd = socket_in(NS_C, AF_INET, SOCK_DGRAM, 0, NULL);

	me.sin_addr.s_addr = addr_n(ADDR_C);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool udp_to_b(int fd, const void *buf, size_t n)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(FAB_ROCE_PORT)};

	to.sin_addr.s_addr = addr_n(ADDR_B);
	return sendto(fd, buf, n, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)n;
}

/* The first frame of w from A to B with this opcode, or NULL. */
static struct frame *find(struct wire *w, uint8_t opcode)
{
	for (size_t i = 0; i < w->n; i++) {
		struct fab_pkt pkt;
		enum fab_wire_err why;
		struct frame copy = w->f[i];

		if (decode(&copy, &pkt, &why) == 0 && pkt.opcode == opcode &&
		    pkt.src_ip == addr_n(ADDR_A) && pkt.dst_ip == addr_n(ADDR_B))
			return &w->f[i];
	}
	return NULL;
}

#define STAT_B(name) stat_of(sock_b, NST_STAT(name))
#define WAIT_B(name, min) nst_wait_nic_stat(sock_b, NST_STAT(name), (min), WAIT_MS)

/*
 * Datagrams that are not what they claim: each is counted where it is
 * refused, and the connection they aim at carries on, its data intact.
 */
static void test_bad_datagrams_counted_and_dropped(void)
{
	int fd = wire_open(NS_B), raw = raw_out(NS_C), udp = udp_from_c();
	uint8_t junk[6000];
	struct wire w = {0};
	struct frame *send, f;
	struct pair p;
	uint64_t shorts, lens, over, bad, noqp;

	NST_REQUIRE(fd >= 0 && raw >= 0 && udp >= 0);
	NST_REQUIRE(pair_open(&p, 1u << 16));
	NST_REQUIRE(pair_send(&p, 64, 7));
	wire_take(fd, &w);
	send = find(&w, FAB_OP_SEND_ONLY);
	NST_REQUIRE(send != NULL);
	shorts = STAT_B(udp_rx_short);
	lens = STAT_B(udp_rx_bad_length);
	over = STAT_B(udp_rx_oversize);
	bad = STAT_B(rx_bad_frames);
	noqp = STAT_B(rx_no_qp);

	/* Too short to be RoCEv2; longer than any frame (sent in fragments,
	 * which B's kernel puts together). */
	memset(junk, 0x5a, sizeof(junk));
	NST_TRUE(udp_to_b(udp, junk, 10));
	NST_TRUE(udp_to_b(udp, junk, sizeof(junk)));
	NST_EQ_U(WAIT_B(udp_rx_short, shorts + 1), shorts + 1);
	NST_EQ_U(WAIT_B(udp_rx_oversize, over + 1), over + 1);

	/* A's SEND with a UDP length that is not what arrived. */
	f = *send;
	fab_put16(f.data + FAB_ETH_HLEN + FAB_IP4_HLEN + 4, (uint16_t)(f.len - 20));
	NST_TRUE(send_frame(raw, f.data, f.len));
	NST_EQ_U(WAIT_B(udp_rx_bad_length, lens + 1), lens + 1);

	/* ... with a wrong ICRC; with one bit of its payload flipped. */
	f = *send;
	f.data[f.len - 1] ^= 0x01;
	NST_TRUE(send_frame(raw, f.data, f.len));
	f = *send;
	f.data[FAB_HDR_BASE] ^= 0x80;
	NST_TRUE(send_frame(raw, f.data, f.len));
	NST_EQ_U(WAIT_B(rx_bad_frames, bad + 2), bad + 2);

	/* ... to a QP that does not exist; and from C, who is not the peer
	 * (both with a right ICRC). */
	f = *send;
	fab_put24(f.data + FAB_ETH_HLEN + FAB_IP4_HLEN + FAB_UDP_HLEN + 5, 0x7ffff0);
	fab_pkt_icrc_fill(f.data, f.len);
	NST_TRUE(send_frame(raw, f.data, f.len));
	f = *send;
	{
		uint32_t c = addr_n(ADDR_C);
		struct fab_ip4_hdr *ip = (void *)(f.data + FAB_ETH_HLEN);

		memcpy(ip->saddr, &c, 4);
		fab_put16(ip->csum, 0);
		fab_put16(ip->csum, fab_ip4_csum(ip));
		fab_pkt_icrc_fill(f.data, f.len);
	}
	NST_TRUE(send_frame(raw, f.data, f.len));
	NST_EQ_U(WAIT_B(rx_no_qp, noqp + 2), noqp + 2);

	/* Nothing of it reached the connection. */
	NST_TRUE(pair_send(&p, 4000, 8));
	NST_TRUE(pair_write(&p, 1u << 16, 9));
	NST_TRUE(pair_read(&p, 1u << 16, 10));
	pair_close(&p);
	wire_free(&w);
	close(fd);
	close(raw);
	close(udp);
}

/* A SEND captured on the wire and sent again: a duplicate, acknowledged
 * again and not delivered again. */
static void test_replayed_send_is_a_duplicate(void)
{
	int fd = wire_open(NS_B), raw = raw_out(NS_C);
	struct wire w = {0};
	struct frame *send;
	struct pair p;
	WSAOVERLAPPED ov;
	DWORD got = 0, flags = 0;
	uint64_t dups;
	int err = 0;

	NST_REQUIRE(fd >= 0 && raw >= 0);
	NST_REQUIRE(pair_open(&p, 1u << 16));
	NST_REQUIRE(pair_send(&p, 100, 11));
	wire_take(fd, &w);
	send = find(&w, FAB_OP_SEND_ONLY);
	NST_REQUIRE(send != NULL);
	NST_REQUIRE_EQ(post_recv(p.b, p.mb + 200, 100, &ov), WSA_IO_PENDING);
	dups = STAT_B(duplicates);
	NST_TRUE(send_frame(raw, send->data, send->len));
	NST_EQ_U(WAIT_B(duplicates, dups + 1), dups + 1);
	NST_TRUE(!WSPGetOverlappedResult(p.b, &ov, &got, FALSE, &flags, &err));
	NST_EQ(err, WSA_IO_INCOMPLETE);
	/* The next real SEND is the one the receive gets. */
	{
		WSAOVERLAPPED ovs;

		nst_fill(p.ma, 100, 12);
		NST_REQUIRE_EQ(post_send(p.a, p.ma, 100, &ovs), WSA_IO_PENDING);
		NST_EQ(ov_wait(p.a, &ovs, NULL), 0);
	}
	NST_EQ(ov_wait(p.b, &ov, &got), 0);
	NST_EQ(got, 100);
	NST_EQ(memcmp(p.mb + 200, p.ma, 100), 0);
	pair_close(&p);
	wire_free(&w);
	close(fd);
	close(raw);
}

/* The flooder: A's SEND with a wrong ICRC, from C's namespace, as fast as
 * the socket takes it, until killed. */
static void __attribute__((noreturn)) flood(int raw, const struct frame *f)
{
	for (;;)
		send_frame(raw, f->data, f->len);
}

/* Seconds per RDMA WRITE of len, over rounds of them. */
static double write_secs(struct pair *p, uint32_t len, unsigned rounds, bool *ok)
{
	uint64_t t0 = nst_now_ns();

	for (unsigned i = 0; i < rounds; i++)
		*ok = pair_write(p, len, 20 + i) && *ok;
	return (double)(nst_now_ns() - t0) / 1e9;
}

/* A flood of bad datagrams at B: a transfer to B goes on, more slowly. */
static void test_flood_does_not_starve_a_transfer(void)
{
	int fd = wire_open(NS_B), raw = raw_out(NS_C);
	const uint32_t len = 4u << 20;
	struct wire w = {0};
	struct frame *send, f;
	struct pair p;
	double quiet, flooded;
	uint64_t bad0, bad1;
	bool ok = true;
	pid_t pid;

	NST_REQUIRE(fd >= 0 && raw >= 0);
	NST_REQUIRE(pair_open(&p, len));
	NST_REQUIRE(pair_send(&p, 256, 13));
	wire_take(fd, &w);
	close(fd);
	send = find(&w, FAB_OP_SEND_ONLY);
	NST_REQUIRE(send != NULL);
	f = *send;
	f.data[f.len - 1] ^= 0xff;
	quiet = write_secs(&p, len, 4, &ok);
	NST_TRUE(ok);
	bad0 = STAT_B(rx_bad_frames);
	fflush(NULL);
	pid = fork();
	NST_REQUIRE(pid >= 0);
	if (pid == 0)
		flood(raw, &f);
	/* The flood has begun when B counts it. */
	NST_GT(WAIT_B(rx_bad_frames, bad0 + 1000), bad0 + 999);
	flooded = write_secs(&p, len, 4, &ok);
	bad1 = STAT_B(rx_bad_frames);
	kill(pid, SIGKILL);
	nst_wait(pid, WAIT_MS);
	NST_TRUE(ok);
	printf("\n    4 x 4 MiB A -> B: %.0f MB/s quiet, %.0f MB/s under a flood of %llu bad "
	       "datagrams (%.0f per second) ",
	       4.0 * len / quiet / 1e6, 4.0 * len / flooded / 1e6,
	       (unsigned long long)(bad1 - bad0), (double)(bad1 - bad0) / flooded);
	/* Two CPUs for the flooder, two NICs and this process: a share of
	 * them, not nothing. */
	NST_GT(4.0 * len / flooded, 0.05 * 4.0 * len / quiet);
	NST_EQ(pair_send(&p, 512, 14), true);
	pair_close(&p);
	wire_free(&w);
	close(raw);
}

/* The link rules apply to datagrams: loss, duplicates, reordering (frames
 * held in A's NIC until due) and corruption towards B, on A's fabric. */
static void test_link_rules_on_the_udp_path(void)
{
	const uint32_t len = 4u << 20;
	struct fab_link_stats st;
	struct pair p;
	struct fab *fab;
	uint64_t retx, bad;

	NST_REQUIRE(pair_open(&p, len));
	retx = stat_of(sock_a, NST_STAT(retransmits));
	bad = STAT_B(rx_bad_frames);
	NST_REQUIRE_EQ(nst_link_faults(dir, addr_n(ADDR_A), addr_n(ADDR_B), 20000000, 10000000,
				       50000000, 10000000, false),
		       0);
	NST_TRUE(pair_write(&p, len, 15));
	NST_TRUE(pair_read(&p, len, 16));
	NST_TRUE(pair_send(&p, 5000, 18));
	NST_EQ(nst_link_faults(dir, addr_n(ADDR_A), addr_n(ADDR_B), 0, 0, 0, 0, false), 0);
	NST_GT(stat_of(sock_a, NST_STAT(retransmits)), retx);
	NST_GT(STAT_B(rx_bad_frames), bad);
	NST_REQUIRE_EQ(fab_open(spi_nics[0].dir, &fab), 0);
	NST_EQ(fab_link_stats(fab, addr_n(ADDR_A), addr_n(ADDR_B), &st), 0);
	printf("\n    A -> B, of %llu frames: %llu lost, %llu duplicated, %llu reordered, %llu "
	       "corrupted ",
	       (unsigned long long)st.tx.frames, (unsigned long long)st.tx.dropped_loss,
	       (unsigned long long)st.tx.duplicated, (unsigned long long)st.tx.reordered,
	       (unsigned long long)st.tx.corrupted);
	NST_GT(st.tx.dropped_loss, 0);
	NST_GT(st.tx.duplicated, 0);
	NST_GT(st.tx.reordered, 0);
	NST_GT(st.tx.corrupted, 0);
	fab_close(fab);
	NST_TRUE(pair_write(&p, len, 17));
	pair_close(&p);
}

/* A NIC that cannot take its UDP side says why and what to do, and stops. */
static void test_udp_start_errors_say_what_to_do(void)
{
	static const struct {
		const char *addr, *want;
	} cases[] = {
	    /* A's own NIC holds port 4791 of A's address. */
	    {ADDR_A, "another nicsimd --udp with this address"},
	    {ADDR_A, "ss -ulpn"},
	    /* No interface in A's namespace has this address. */
	    {ADDR_NONE, "ip addr add " ADDR_NONE "/15 dev IF"},
	};
	char d[256], log[400], text[4096];

	NST_REQUIRE_EQ(nst_tmpdir(d, sizeof(d), "udpstart"), 0);
	NST_REQUIRE_EQ(nst_make_fabric(d, (const char *const[]){ADDR_A, ADDR_NONE, NULL}), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *argv[] = {
		    nst_bin("nicsimd"), "--addr", cases[i].addr, "--dir", d, "--udp", NULL};
		ssize_t n = -1;
		pid_t pid;
		int st, fd;

		snprintf(log, sizeof(log), "%s/start-%zu.log", d, i);
		pid = nst_net_spawn(NS_A, argv, log);
		NST_REQUIRE_GT(pid, 0);
		st = nst_wait(pid, WAIT_MS);
		NST_TRUE(st >= 0 && WIFEXITED(st));
		NST_EQ(st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, 1);
		fd = open(log, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			n = read(fd, text, sizeof(text) - 1);
			close(fd);
		}
		text[n > 0 ? n : 0] = '\0';
		if (!strstr(text, cases[i].want))
			printf("\n    %s: wanted \"%s\" in:\n%s", cases[i].addr, cases[i].want,
			       text);
		NST_TRUE(strstr(text, cases[i].want) != NULL);
	}
	nst_done_with_dir(d);
}

/* The ones' complement sum of n bytes (n even), as IPv4 and ICMP use it. */
static uint16_t csum16(const uint8_t *b, size_t n)
{
	uint32_t sum = 0;

	for (size_t i = 0; i < n; i += 2)
		sum += (uint32_t)b[i] << 8 | b[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The path MTU that namespace ns's kernel holds for datagrams to dst, or -1. */
static int path_mtu(const char *ns, uint32_t dst)
{
	struct sockaddr_in to = {
	    .sin_family = AF_INET, .sin_port = htons(FAB_ROCE_PORT), .sin_addr.s_addr = dst};
	int fd = socket_in(ns, AF_INET, SOCK_DGRAM, 0, NULL), mtu = -1;
	socklen_t l = sizeof(mtu);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0 ||
	    getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &l) < 0)
		mtu = -1;
	close(fd);
	return mtu;
}

/* Whether A's kernel holds the forged path MTU towards B. */
static bool mtu_forged(void *arg)
{
	(void)arg;
	return path_mtu(NS_A, addr_n(ADDR_B)) == 552;
}

/*
 * An ICMP "fragmentation needed" that anyone on the network can send (here
 * C, who never saw the traffic), saying that A's datagrams to B must be no
 * longer than 552 bytes: A's kernel believes it, but a connection keeps the
 * MTU it was made with (1024, packets of 1084 bytes), as on a RoCE NIC, and
 * its transfers go on.
 */
static void test_forged_icmp_keeps_connections(void)
{
	const uint32_t len = 1u << 20, a = addr_n(ADDR_A), b = addr_n(ADDR_B), c = addr_n(ADDR_C);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr.s_addr = a};
	uint8_t pkt[20 + 8 + 28] = {0}, *q = pkt + 28;
	int raw = raw_out(NS_C);
	uint64_t too_big;
	struct pair p;

	NST_REQUIRE(raw >= 0);
	NST_REQUIRE(pair_open(&p, len));
	NST_REQUIRE(pair_write(&p, len, 21));
	too_big = stat_of(sock_a, NST_STAT(udp_tx_too_big));
	/* IPv4 C -> A, ICMP (the kernel fills in the length and checksum). */
	pkt[0] = 0x45;
	pkt[8] = 64;
	pkt[9] = IPPROTO_ICMP;
	memcpy(pkt + 12, &c, 4);
	memcpy(pkt + 16, &a, 4);
	/* Destination unreachable, fragmentation needed, next-hop MTU 552. */
	pkt[20] = 3;
	pkt[21] = 4;
	fab_put16(pkt + 26, 552);
	/* What it quotes: a datagram of 1084 bytes with DF from A to B:4791. */
	q[0] = 0x45;
	fab_put16(q + 2, 1084);
	fab_put16(q + 6, 0x4000);
	q[8] = 64;
	q[9] = IPPROTO_UDP;
	memcpy(q + 12, &a, 4);
	memcpy(q + 16, &b, 4);
	fab_put16(q + 10, csum16(q, 20));
	fab_put16(q + 20, 0xc123);
	fab_put16(q + 22, FAB_ROCE_PORT);
	fab_put16(q + 24, 1064);
	fab_put16(pkt + 22, csum16(pkt + 20, sizeof(pkt) - 20));
	NST_REQUIRE_EQ(sendto(raw, pkt, sizeof(pkt), 0, (struct sockaddr *)&to, sizeof(to)),
		       (ssize_t)sizeof(pkt));
	/* A's kernel has taken it when its path MTU to B is 552 (no event
	 * says so: asked every millisecond, up to the deadline). */
	NST_TRUE(nst_wait_until(mtu_forged, NULL, WAIT_MS, 1));
	NST_EQ(path_mtu(NS_A, b), 552);
	NST_TRUE(pair_write(&p, len, 22));
	NST_TRUE(pair_read(&p, len, 23));
	NST_EQ_U(stat_of(sock_a, NST_STAT(udp_tx_too_big)), too_big);
	pair_close(&p);
	close(raw);
	/* Forget the forged path MTU: later connections get the link's again. */
	NST_EQ(nst_net_ip(NS_A, (const char *const[]){"route", "flush", "cache", NULL}), 0);
	NST_EQ(path_mtu(NS_A, b), 1500);
}

/*
 * A link from a NIC beyond the fabric (over UDP) carries nothing here, since
 * rules act where frames are sent: setting one says so.
 */
static void test_link_from_a_udp_nic_is_noted(void)
{
	const char *dir_a = spi_nics[0].dir;
	char out[2048];

	/* A rule towards B (--remote) gives B a slot on A's fabric. */
	NST_EQ(nst_run((const char *const[]){nst_bin("nicsim"), "link", "set", "--dir", dir_a,
					     "--remote", ADDR_A, ADDR_B, "latency", "0", NULL},
		       out, sizeof(out), WAIT_MS),
	       0);
	NST_TRUE(strstr(out, "never opened") == NULL);
	NST_EQ(nst_run((const char *const[]){nst_bin("nicsim"), "link", "set", "--dir", dir_a,
					     ADDR_B, ADDR_A, "loss", "50", NULL},
		       out, sizeof(out), WAIT_MS),
	       0);
	if (!strstr(out, ADDR_B " has never opened its port on this fabric"))
		printf("\n    link set B A: %s", out);
	NST_TRUE(strstr(out, ADDR_B " has never opened its port on this fabric") != NULL);
	NST_EQ(nst_run((const char *const[]){nst_bin("nicsim"), "link", "set", "--dir", dir_a,
					     ADDR_B, ADDR_A, "clear", NULL},
		       out, sizeof(out), WAIT_MS),
	       0);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"wire_headers_icrc_and_mtu", test_wire_headers_icrc_and_mtu},
	    {"jumbo_links_take_mtu_4096", test_jumbo_links_take_mtu_4096},
	    {"bad_datagrams_counted_and_dropped", test_bad_datagrams_counted_and_dropped},
	    {"replayed_send_is_a_duplicate", test_replayed_send_is_a_duplicate},
	    {"flood_does_not_starve_a_transfer", test_flood_does_not_starve_a_transfer},
	    {"link_rules_on_the_udp_path", test_link_rules_on_the_udp_path},
	    {"forged_icmp_keeps_connections", test_forged_icmp_keeps_connections},
	    {"udp_start_errors_say_what_to_do", test_udp_start_errors_say_what_to_do},
	    {"link_from_a_udp_nic_is_noted", test_link_from_a_udp_nic_is_noted},
	    {NULL, NULL},
	};

	spi_udp = true;
	return spi_main(argc, argv, "udp", tests);
}
