#include "nstspi.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "nstest.h"
#include "nstnic.h"

int nst_spi_startup(void)
{
	WSPDATA data;
	WSPPROC_TABLE table;

	return WSPStartupEx(MAKEWORD(2, 2), &data, NULL, NULL, &table);
}

SOCKET nst_spi_bound(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int err = 0;
	SOCKET s;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return INVALID_SOCKET;
	s = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);
	if (s != INVALID_SOCKET && WSPBind(s, (const struct sockaddr *)&sa, sizeof(sa), &err)) {
		WSPCloseSocket(s, &err);
		s = INVALID_SOCKET;
	}
	return s;
}

/* The connecting side runs in a thread while the caller accepts. */
struct dialer {
	SOCKET s;
	struct sockaddr_in to;
	int err;
};

static void *dial(void *arg)
{
	struct dialer *d = arg;

	d->err = 0;
	if (WSPConnect(d->s, (const struct sockaddr *)&d->to, sizeof(d->to), NULL, NULL, NULL, NULL,
		       &d->err) == 0)
		d->err = 0;
	return NULL;
}

int nst_spi_pair(const char *srv_addr, const char *cli_addr, uint16_t port, SOCKET *srv,
		 SOCKET *cli)
{
	struct dialer d = {.to = {.sin_family = AF_INET, .sin_port = htons(port)}};
	SOCKET l = nst_spi_bound(srv_addr, port);
	int err = 0, aerr = 0;
	pthread_t t;

	*srv = *cli = INVALID_SOCKET;
	d.s = nst_spi_bound(cli_addr, 0);
	inet_pton(AF_INET, srv_addr, &d.to.sin_addr);
	if (l == INVALID_SOCKET || d.s == INVALID_SOCKET || WSPListen(l, 4, &err) ||
	    pthread_create(&t, NULL, dial, &d)) {
		if (l != INVALID_SOCKET)
			WSPCloseSocket(l, &aerr);
		if (d.s != INVALID_SOCKET)
			WSPCloseSocket(d.s, &aerr);
		return err ? err : WSAENOBUFS;
	}
	*srv = WSPAccept(l, NULL, NULL, NULL, 0, &aerr);
	pthread_join(t, NULL);
	WSPCloseSocket(l, &err);
	if (*srv != INVALID_SOCKET && !d.err) {
		*cli = d.s;
		return 0;
	}
	if (*srv != INVALID_SOCKET)
		WSPCloseSocket(*srv, &err);
	WSPCloseSocket(d.s, &err);
	*srv = INVALID_SOCKET;
	return d.err ? d.err : aerr;
}

int nst_spi_rdma(SOCKET s, bool write, void *buf, uint32_t len, HANDLE h,
		 const struct nicsim_rdma_desc *d)
{
	WSABUFEX b = {.len = len, .buf = buf, .handle = h};
	WSAOVERLAPPED ov;
	DWORD n = 0, flags = 0;
	int err = 0, rc;

	memset(&ov, 0, sizeof(ov));
	rc = write ? WSPRdmaWrite(s, &b, 1, (void *)d, sizeof(*d), 0, &n, 0, &ov, NULL, NULL, &err)
		   : WSPRdmaRead(s, &b, 1, (void *)d, sizeof(*d), 0, &n, 0, &ov, NULL, NULL, &err);
	if (rc && err != WSA_IO_PENDING)
		return err;
	err = 0;
	return WSPGetOverlappedResult(s, &ov, &n, TRUE, &flags, &err) ? 0 : err;
}

int nst_spi_known_state(const char *dir, struct nst_nic *nics, size_t n, void (*end_others)(void),
			int timeout_ms)
{
	const char *me = program_invocation_short_name;
	int err = 0;

	if (nst_nics_settled(nics, n, timeout_ms, me))
		return 0;
	fprintf(stderr, "%s: closing every socket and the other processes first\n", me);
	WSPCleanup(&err);
	if (end_others)
		end_others();
	err = nst_nics_ready(dir, nics, n, timeout_ms);
	if (nst_spi_startup() != 0 || err) {
		fprintf(stderr, "%s: the NICs and the SPI could not be made as they were\n", me);
		return -EIO;
	}
	return 0;
}

uint8_t *nst_spi_registered(SOCKET s, size_t len)
{
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int err = 0;

	if (m == MAP_FAILED)
		return NULL;
	if (!WSPRegisterMemory(s, m, (DWORD)len, MEM_READWRITE, &err)) {
		munmap(m, len);
		return NULL;
	}
	return m;
}

static bool ov_done(void *ov)
{
	return __atomic_load_n(&((const WSAOVERLAPPED *)ov)->Internal, __ATOMIC_ACQUIRE) !=
	       WSA_STATUS_PENDING;
}

double nst_spi_ov_wait_memory(const WSAOVERLAPPED *ov, int ms)
{
	uint64_t t0 = nst_now_ns();

	if (!nst_wait_until(ov_done, (void *)ov, ms, 1))
		return -1;
	return (double)(nst_now_ns() - t0) / 1e6;
}
