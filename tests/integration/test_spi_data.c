/*
 * Data through the SPI (ws2san.h) against real nicsimd processes joined by
 * a fabric: WSPSend/WSPRecv, WSPRdmaWrite and WSPRdmaRead with checksummed
 * data from 1 byte to 64 MiB at random offsets between two hosts (two NICs,
 * one process) and between two processes on one host (a child process on
 * the same NIC).  The NICs and helpers are the test_spi_* fixture
 * (nstspidata.h); every test leaves the TPT occupancy of the NICs where it
 * found it (R11).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fab_addr.h"
#include "nicsim_mgmt.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstspidata.h"

/* ---- Data integrity ------------------------------------------------------------ */

struct side {
	SOCKET s;
	uint8_t *src, *dst; /* REGION bytes each */
	HANDLE hsrc, hdst;
	bool shared; /* src and dst from nicsim_buffer_alloc */
};

static void side_open(struct side *sd, SOCKET s, bool shared)
{
	sd->s = s;
	sd->shared = shared;
	if (shared) {
		NST_REQUIRE_EQ(nicsim_buffer_alloc(REGION, (void **)&sd->src), 0);
		NST_REQUIRE_EQ(nicsim_buffer_alloc(REGION, (void **)&sd->dst), 0);
	} else {
		sd->src = map(REGION);
		sd->dst = map(REGION);
	}
	NST_REQUIRE(sd->src != NULL && sd->dst != NULL);
	sd->hsrc = reg(s, sd->src, REGION, MEM_READ);
	sd->hdst = reg(s, sd->dst, REGION, MEM_READWRITE);
}

static void side_close(struct side *sd)
{
	dereg(sd->s, sd->hsrc);
	dereg(sd->s, sd->hdst);
	if (sd->shared) {
		NST_EQ(nicsim_buffer_free(sd->src), 0);
		NST_EQ(nicsim_buffer_free(sd->dst), 0);
		NST_EQ(nicsim_buffer_free(sd->dst), WSAEINVAL); /* not one any more */
	} else {
		munmap(sd->src, REGION);
		munmap(sd->dst, REGION);
	}
	close_socket(sd->s);
}

/* Send/receive, RDMA write and RDMA read of every size between two sockets. */
static void integrity(SOCKET s_a, SOCKET s_b, bool shared)
{
	struct side a, b;
	uint64_t t0 = nst_now_ns();

	side_open(&a, s_a, shared);
	side_open(&b, s_b, shared);
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t len = sizes[i], oa = rnd() % (2 * PAGE), ob = rnd() % (2 * PAGE);
		struct nicsim_rdma_desc d;
		WSAOVERLAPPED ova, ovb;
		DWORD n = 0;

		/* Send/receive: b posts first, a sends. */
		nst_fill(a.src + oa, len, (uint32_t)i + 1);
		NST_REQUIRE_EQ(post_recv(b.s, b.dst + ob, len, &ovb), WSA_IO_PENDING);
		NST_REQUIRE_EQ(post_send(a.s, a.src + oa, len, &ova), WSA_IO_PENDING);
		NST_EQ(ov_wait(a.s, &ova, &n), 0);
		NST_EQ(n, len);
		NST_EQ(ov_wait(b.s, &ovb, &n), 0);
		NST_EQ(n, len);
		NST_EQ_U(nst_sum32(b.dst + ob, len), nst_sum32(a.src + oa, len));

		/* RDMA write from a into b's exposed buffer at an offset. */
		nst_fill(a.src + oa, len, (uint32_t)i + 100);
		memset(b.dst, 0, REGION);
		NST_REQUIRE_EQ(expose(b.s, b.dst, REGION, MEM_WRITE, &d), 0);
		NST_REQUIRE_EQ(post_rdma(a.s, true, a.src + oa, len, a.hsrc, &d, ob, &ova),
			       WSA_IO_PENDING);
		NST_EQ(ov_wait(a.s, &ova, &n), 0);
		NST_EQ(n, len);
		NST_EQ_U(nst_sum32(b.dst + ob, len), nst_sum32(a.src + oa, len));
		NST_EQ(b.dst[ob + len], 0); /* nothing past the end */
		unexpose(b.s, &d);

		/* RDMA read by a of b's exposed buffer at an offset. */
		nst_fill(b.dst + ob, len, (uint32_t)i + 200);
		NST_REQUIRE_EQ(expose(b.s, b.dst, REGION, MEM_READ, &d), 0);
		NST_REQUIRE_EQ(post_rdma(a.s, false, a.dst + oa, len, a.hdst, &d, ob, &ova),
			       WSA_IO_PENDING);
		NST_EQ(ov_wait(a.s, &ova, &n), 0);
		NST_EQ(n, len);
		NST_EQ_U(nst_sum32(a.dst + oa, len), nst_sum32(b.dst + ob, len));
		unexpose(b.s, &d);
	}
	printf("\n    3 x %zu sizes, 1 B .. 64 MiB: %.0f ms ", NSIZES,
	       (double)(nst_now_ns() - t0) / 1e6);
	side_close(&a);
	side_close(&b);
}

static void test_two_hosts_integrity(void)
{
	SOCKET a, b;

	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	integrity(a, b, false);
}

/*
 * The same between buffers from nicsim_buffer_alloc: every byte arrives,
 * and the NICs copied through their maps of the buffers (dma_shm), not only
 * through process_vm_readv/process_vm_writev.  A buffer is refused before
 * WSPStartupEx and after it was freed.
 */
static void test_two_hosts_shared_buffers(void)
{
	const size_t shm_off = offsetof(struct nic_stats, dma_shm);
	uint64_t a0 = nst_nic_stat(spi_nics[0].sock, shm_off);
	uint64_t b0 = nst_nic_stat(spi_nics[1].sock, shm_off);
	enum { EARLY = 1 << 20 };
	uint8_t *early, *src = map(EARLY);
	struct nicsim_rdma_desc d;
	WSAOVERLAPPED ov;
	HANDLE hsrc;
	uint64_t b1;
	SOCKET a, b;

	/* A buffer made before the sockets: a NIC the provider attaches to
	 * afterwards maps it too. */
	NST_REQUIRE_EQ(nicsim_buffer_alloc(EARLY, (void **)&early), 0);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	NST_REQUIRE(src != NULL);
	hsrc = reg(a, src, EARLY, MEM_READ);
	nst_fill(src, EARLY, 5);
	b1 = nst_nic_stat(spi_nics[1].sock, shm_off);
	NST_REQUIRE_EQ(expose(b, early, EARLY, MEM_WRITE, &d), 0);
	NST_REQUIRE_EQ(post_rdma(a, true, src, EARLY, hsrc, &d, 0, &ov), WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ov, NULL), 0);
	NST_EQ_U(nst_sum32(early, EARLY), nst_sum32(src, EARLY));
	NST_GT(nst_nic_stat(spi_nics[1].sock, shm_off), b1);
	unexpose(b, &d);
	dereg(a, hsrc);
	munmap(src, EARLY);
	NST_EQ(nicsim_buffer_free(early), 0);

	integrity(a, b, true);
	NST_GT(nst_nic_stat(spi_nics[0].sock, shm_off), a0);
	NST_GT(nst_nic_stat(spi_nics[1].sock, shm_off), b0);
	{
		void *buf = (void *)1;

		NST_EQ(nicsim_buffer_alloc(0, &buf), WSAEINVAL);
		NST_TRUE(buf == NULL);
		NST_EQ(nicsim_buffer_alloc(4096, NULL), WSAEFAULT);
		NST_EQ(nicsim_buffer_free(&buf), WSAEINVAL);
	}
}

/*
 * An application that unmaps a shared buffer itself (munmap, not
 * nicsim_buffer_free) and later has other memory at the same address: the
 * NICs must reach the new memory, not the buffer they had mapped there, and
 * nicsim_buffer_free must no longer take the address for the buffer (it would
 * unmap the new memory).
 */
static void test_shared_buffer_unmapped_by_app(void)
{
	enum { LEN = 1 << 20 };
	uint8_t *buf, *src = map(LEN), *again;
	struct nicsim_rdma_desc d;
	WSAOVERLAPPED ov;
	HANDLE hsrc;
	SOCKET a, b;

	NST_REQUIRE(src != NULL);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	NST_REQUIRE_EQ(nicsim_buffer_alloc(LEN, (void **)&buf), 0);
	memset(buf, 0xee, LEN);
	NST_REQUIRE_EQ(munmap(buf, LEN), 0);
	again = mmap(buf, LEN, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	NST_REQUIRE(again == buf);
	hsrc = reg(a, src, LEN, MEM_READ);
	nst_fill(src, LEN, 77);
	NST_REQUIRE_EQ(expose(b, again, LEN, MEM_WRITE, &d), 0);
	NST_REQUIRE_EQ(post_rdma(a, true, src, LEN, hsrc, &d, 0, &ov), WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ov, NULL), 0);
	NST_EQ_U(nst_sum32(again, LEN), nst_sum32(src, LEN));
	unexpose(b, &d);
	dereg(a, hsrc);
	NST_EQ(nicsim_buffer_free(again), WSAEINVAL);
	NST_EQ(munmap(again, LEN), 0);
	munmap(src, LEN);
	close_socket(a);
	close_socket(b);
}

/*
 * Misuse of nicsim_buffer_free and nicsim_buffer_alloc is refused, never
 * crashes; a buffer freed while exposed to the peer ends the peer's access
 * cleanly (its RDMA WRITE fails, nothing lands in the memory that went).
 */
static void test_shared_buffer_misuse(void)
{
	enum { LEN = 1 << 16 };
	uint8_t *buf, *src = map(LEN);
	void *heap = malloc(64), *huge = NULL;
	struct nicsim_rdma_desc d;
	WSAOVERLAPPED ov;
	HANDLE hsrc;
	SOCKET a, b;
	int rc;

	NST_REQUIRE(src != NULL && heap != NULL);
	NST_REQUIRE_EQ(nicsim_buffer_alloc(LEN, (void **)&buf), 0);
	NST_EQ(nicsim_buffer_free(NULL), WSAEINVAL);
	NST_EQ(nicsim_buffer_free(buf + 4096), WSAEINVAL);
	NST_EQ(nicsim_buffer_free(heap), WSAEINVAL);
	free(heap);
	NST_EQ(nicsim_buffer_alloc(SIZE_MAX, &huge), WSAEINVAL);
	NST_TRUE(huge == NULL);
	/* Too large for the NICs to map: ordinary memory to them, or refused. */
	rc = nicsim_buffer_alloc((size_t)1 << 40, &huge);
	NST_TRUE(rc == 0 || rc == WSAENOBUFS);
	if (rc == 0)
		NST_EQ(nicsim_buffer_free(huge), 0);

	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	hsrc = reg(a, src, LEN, MEM_READ);
	NST_REQUIRE_EQ(expose(b, buf, LEN, MEM_WRITE, &d), 0);
	NST_EQ(nicsim_buffer_free(buf), 0);
	NST_EQ(nicsim_buffer_free(buf), WSAEINVAL);
	rc = post_rdma(a, true, src, LEN, hsrc, &d, 0, &ov);
	if (rc == WSA_IO_PENDING)
		rc = ov_wait(a, &ov, NULL);
	NST_TRUE(rc != 0);
	unexpose(b, &d);
	dereg(a, hsrc);
	munmap(src, LEN);
	close_socket(a);
	close_socket(b);

	/* Freed while an RDMA WRITE into it is in flight: the write completes
	 * before the memory goes or fails; either way nothing else breaks. */
	{
		enum { INFLIGHT = 16 << 20 };
		uint8_t *big, *bsrc = map(INFLIGHT);

		NST_REQUIRE(bsrc != NULL);
		NST_REQUIRE_EQ(nicsim_buffer_alloc(INFLIGHT, (void **)&big), 0);
		NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
		hsrc = reg(a, bsrc, INFLIGHT, MEM_READ);
		NST_REQUIRE_EQ(expose(b, big, INFLIGHT, MEM_WRITE, &d), 0);
		NST_REQUIRE_EQ(post_rdma(a, true, bsrc, INFLIGHT, hsrc, &d, 0, &ov),
			       WSA_IO_PENDING);
		NST_EQ(nicsim_buffer_free(big), 0);
		rc = ov_wait(a, &ov, NULL);
		NST_TRUE(rc == 0 || rc == WSAECONNRESET);
		unexpose(b, &d);
		dereg(a, hsrc);
		munmap(bsrc, INFLIGHT);
		close_socket(a);
		close_socket(b);
	}
}

/* How many memfds of shared buffers this process has open. */
static int buffer_fds(void)
{
	char path[64], target[256];
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = 0;
		n += strstr(target, "memfd:nicsim-buffer") != NULL;
	}
	return n;
}

/*
 * A child made by fork shares a buffer with its parent (it writes what the
 * parent reads) and keeps none of the provider's memfds open.
 */
static void test_shared_buffer_fork(void)
{
	uint8_t *buf;
	int status = -1;
	pid_t pid;

	NST_REQUIRE_EQ(nicsim_buffer_alloc(4096, (void **)&buf), 0);
	NST_EQ(buffer_fds(), 1);
	pid = fork();
	NST_REQUIRE(pid >= 0);
	if (pid == 0) {
		buf[0] = 42;
		_exit(buffer_fds() == 0 ? 0 : 1);
	}
	NST_EQ(waitpid(pid, &status, 0), pid);
	NST_TRUE(WIFEXITED(status));
	NST_EQ(WEXITSTATUS(status), 0);
	NST_EQ(buf[0], 42);
	NST_EQ(nicsim_buffer_free(buf), 0);
	NST_EQ(buffer_fds(), 0);
}

struct alloc_loop {
	int rounds, failed;
};

static void *alloc_main(void *arg)
{
	struct alloc_loop *l = arg;

	for (int i = 0; i < l->rounds; i++) {
		uint8_t *buf;

		if (nicsim_buffer_alloc((size_t)(i % 4 + 1) * 4096, (void **)&buf) != 0) {
			l->failed++;
			continue;
		}
		buf[0] = (uint8_t)i;
		if (nicsim_buffer_free(buf) != 0)
			l->failed++;
	}
	return NULL;
}

/*
 * Buffers made and given back by several threads while sockets connect
 * (attaching NICs, which map every buffer) and close: every call succeeds,
 * no memfd stays open, and the connections are made (the maps' waits for
 * the NIC must not take the wake-ups WSPAccept waits for, nor hold up the
 * accept until a connecting thread's sleep ends: see
 * test_shared_buffer_in_accept).  Nothing paces the threads.
 */
static void test_shared_buffer_threads(void)
{
	struct alloc_loop l[3];
	pthread_t t[3];

	for (int i = 0; i < 3; i++) {
		l[i] = (struct alloc_loop){.rounds = 200};
		NST_REQUIRE_EQ(pthread_create(&t[i], NULL, alloc_main, &l[i]), 0);
	}
	for (int i = 0; i < 3; i++) {
		SOCKET a, b;

		NST_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
		close_socket(a);
		close_socket(b);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		NST_EQ(l[i].failed, 0);
	}
	NST_EQ(buffer_fds(), 0);
}

/* What the accept condition of test_shared_buffer_in_accept does. */
struct cond_buffers {
	int rounds, calls, failed;
};

/*
 * Make and give back shared buffers while the connecting thread of this
 * process waits for its connection (asleep on NIC A's interrupt): every
 * buffer is mapped and unmapped by NICs A and B.
 */
static int WSPAPI buffers_condition(LPWSABUF caller, LPWSABUF caller_data, LPQOS sqos, LPQOS gqos,
				    LPWSABUF callee, LPWSABUF callee_data, GROUP *g, DWORD_PTR data)
{
	struct cond_buffers *cb = (struct cond_buffers *)data;

	(void)caller;
	(void)caller_data;
	(void)sqos;
	(void)gqos;
	(void)callee;
	(void)callee_data;
	(void)g;
	cb->calls++;
	for (int i = 0; i < cb->rounds; i++) {
		uint8_t *buf;

		if (nicsim_buffer_alloc(4096, (void **)&buf) != 0) {
			cb->failed++;
			continue;
		}
		buf[0] = (uint8_t)i;
		if (nicsim_buffer_free(buf) != 0)
			cb->failed++;
	}
	return CF_ACCEPT;
}

struct cond_accept {
	SOCKET l, s;
	int err;
	struct cond_buffers *cb;
};

static void *buffers_accept_main(void *arg)
{
	struct cond_accept *a = arg;

	a->s = WSPAccept(a->l, NULL, NULL, buffers_condition, (DWORD_PTR)a->cb, &a->err);
	return NULL;
}

/*
 * Shared buffers made and given back while a connection of the same process
 * is being set up, here by the accept condition, between the request and
 * the answer: each map and unmap is a NIC command, and it must not wait for
 * the connecting thread's sleep on the NIC's interrupt to end (which ends
 * only when the answer comes, or a second later), since that thread waits
 * for this very answer: the connection would come too late for the
 * connecting NIC, whose CM gives up after a few seconds of retries.
 */
static void test_shared_buffer_in_accept(void)
{
	uint16_t port = next_port++;
	struct cond_buffers cb = {.rounds = 8};
	struct cond_accept a = {.s = INVALID_SOCKET, .cb = &cb};
	SOCKET c = sock_on(ADDR_A, 0);
	pthread_t t;
	int err = 0;

	a.l = sock_on(ADDR_B, port);
	NST_REQUIRE(a.l != INVALID_SOCKET && c != INVALID_SOCKET);
	NST_REQUIRE_EQ(WSPListen(a.l, 4, &err), 0);
	NST_REQUIRE_EQ(pthread_create(&t, NULL, buffers_accept_main, &a), 0);
	NST_EQ(try_connect(c, ADDR_B, port), 0);
	pthread_join(t, NULL);
	NST_EQ(cb.calls, 1);
	NST_EQ(cb.failed, 0);
	NST_TRUE(a.s != INVALID_SOCKET);
	NST_EQ(a.s == INVALID_SOCKET ? a.err : 0, 0);
	if (a.s != INVALID_SOCKET)
		close_socket(a.s);
	close_socket(c);
	close_socket(a.l);
	NST_EQ(buffer_fds(), 0);
}

static void test_two_processes_one_host(void)
{
	struct peer pr;
	uint8_t *src = map(REGION), *dst = map(REGION);
	HANDLE hsrc, hdst;

	NST_REQUIRE(src != NULL && dst != NULL);
	NST_REQUIRE(peer_open(&pr, ADDR_A, ADDR_A));
	hsrc = reg(pr.s, src, REGION, MEM_READ);
	hdst = reg(pr.s, dst, REGION, MEM_READWRITE);
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t len = sizes[i], o = rnd() % (2 * PAGE), co = rnd() % (2 * PAGE);
		struct ctl m = {0}, r;
		struct nicsim_rdma_desc desc;
		WSAOVERLAPPED ov, ovd;
		DWORD n = 0;

		/* Send to the child: it posts, says READY, and reports the checksum. */
		nst_fill(src + o, len, (uint32_t)i + 7);
		m.op = CTL_RECV;
		m.len = len;
		m.off = co;
		NST_REQUIRE_EQ(peer_call(&pr, &m, &r), 0);
		NST_REQUIRE_EQ(r.op, CTL_READY);
		NST_REQUIRE_EQ(post_recv(pr.s, pr.in, sizeof(*pr.in), &ov), WSA_IO_PENDING);
		NST_REQUIRE_EQ(post_send(pr.s, src + o, len, &ovd), WSA_IO_PENDING);
		NST_EQ(ov_wait(pr.s, &ovd, NULL), 0);
		NST_EQ(ov_wait(pr.s, &ov, NULL), 0);
		NST_EQ(pr.in->bytes, len);
		NST_EQ_U(pr.in->sum, nst_sum32(src + o, len));

		/* Receive from the child. */
		NST_REQUIRE_EQ(post_recv(pr.s, dst + o, len, &ovd), WSA_IO_PENDING);
		m.op = CTL_SEND;
		m.seed = (uint32_t)i + 9;
		NST_REQUIRE_EQ(send_ctl(pr.s, pr.out, &m), 0);
		NST_EQ(ov_wait(pr.s, &ovd, &n), 0);
		NST_EQ(n, len);
		nst_fill(src + o, len, m.seed);
		NST_EQ_U(nst_sum32(dst + o, len), nst_sum32(src + o, len));

		/* RDMA write into the child's exposed buffer, checked by its checksum. */
		m.op = CTL_EXPOSE;
		m.off = 0;
		m.len = REGION;
		m.flags = MEM_READWRITE;
		m.seed = (uint32_t)i + 11;
		NST_REQUIRE_EQ(peer_call(&pr, &m, &r), 0);
		NST_REQUIRE_EQ(r.err, 0);
		desc = r.desc;
		nst_fill(src + o, len, (uint32_t)i + 13);
		NST_REQUIRE_EQ(post_rdma(pr.s, true, src + o, len, hsrc, &desc, co, &ovd),
			       WSA_IO_PENDING);
		NST_EQ(ov_wait(pr.s, &ovd, &n), 0);
		NST_EQ(n, len);
		m.op = CTL_SUM;
		m.off = co;
		m.len = len;
		NST_REQUIRE_EQ(peer_call(&pr, &m, &r), 0);
		NST_EQ_U(r.sum, nst_sum32(src + o, len));

		/* RDMA read back what was just written. */
		memset(dst + o, 0, len);
		NST_REQUIRE_EQ(post_rdma(pr.s, false, dst + o, len, hdst, &desc, co, &ovd),
			       WSA_IO_PENDING);
		NST_EQ(ov_wait(pr.s, &ovd, &n), 0);
		NST_EQ(n, len);
		NST_EQ_U(nst_sum32(dst + o, len), nst_sum32(src + o, len));
	}
	dereg(pr.s, hsrc);
	dereg(pr.s, hdst);
	peer_close(&pr, true);
	munmap(src, REGION);
	munmap(dst, REGION);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"two_hosts_integrity", test_two_hosts_integrity},
	    {"two_hosts_shared_buffers", test_two_hosts_shared_buffers},
	    {"shared_buffer_unmapped_by_app", test_shared_buffer_unmapped_by_app},
	    {"shared_buffer_misuse", test_shared_buffer_misuse},
	    {"shared_buffer_fork", test_shared_buffer_fork},
	    {"shared_buffer_threads", test_shared_buffer_threads},
	    {"shared_buffer_in_accept", test_shared_buffer_in_accept},
	    {"two_processes_one_host", test_two_processes_one_host},
	    {NULL, NULL},
	};

	return spi_main(argc, argv, "spi_data", tests);
}
