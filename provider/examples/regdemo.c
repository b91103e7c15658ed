/*
 * nicsim-regdemo: memory registration through the SAN SPI, end to end.
 *
 * Starts the provider, binds a socket to a NIC, asks WSPIoctl for the
 * extension functions (as a switch does), registers a 1 MiB buffer for local
 * use, connects the socket to a listener of the same NIC (a buffer is
 * exposed to a connection's peer, so exposing needs one) and exposes a
 * 64 KiB buffer for remote reads, optionally holds them so that `nicsim
 * show tpt` can list them, then releases everything.  Exits 0
 * when every step worked, 1 otherwise, 2 on a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "nicsim_provider.h"
#include "ws2san.h"

#define LOCAL_LEN (1u << 20)
#define RDMA_LEN (64u << 10)

struct demo {
	const char *addr;
	long hold_ms;
	WSPPROC_TABLE procs;
	SOCKET s;
	LPFN_WSPREGISTERMEMORY reg;
	LPFN_WSPDEREGISTERMEMORY dereg;
	LPFN_WSPREGISTERRDMAMEMORY reg_rdma;
	LPFN_WSPDEREGISTERRDMAMEMORY dereg_rdma;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: nicsim-regdemo [--dir D] [--addr A] [--hold-ms N] [--help]\n"
		   "\n"
		   "Registers a 1 MiB local buffer and a 64 KiB RDMA buffer with the NIC at\n"
		   "address A through the SAN SPI, holds them N ms, and releases them.\n"
		   "\n"
		   "  --dir D       run directory of the NICs (sets NICSIM_DIR)\n"
		   "  --addr A      NIC address to bind to (default 198.18.0.1)\n"
		   "  --hold-ms N   keep the registrations N ms (default 0), so that\n"
		   "                `nicsim show tpt` can show them\n"
		   "  --help        this text\n");
}

static void fail(const char *what, int wsa)
{
	fprintf(stderr, "nicsim-regdemo: %s failed: %s (%d)\n", what, nicsim_wsa_name(wsa), wsa);
}

static void explain_bind(const struct demo *d, int wsa)
{
	char dir[256];
	int err = nicsim_run_dir(dir, sizeof(dir));

	/* A run directory the provider refused (it said why) is no place
	 * to start a NIC in: say so, not "start one". */
	if (err == WSAEACCES) {
		fprintf(stderr,
			"nicsim-regdemo: no usable run directory: choose another with --dir "
			"or NICSIM_DIR\n");
		return;
	}
	if (err)
		snprintf(dir, sizeof(dir), "(unresolvable run directory)");
	if (wsa == WSAEADDRNOTAVAIL)
		fprintf(stderr,
			"nicsim-regdemo: no NIC with address %s in %s\n"
			"  start one with `nicsim up` (or `nicsimd --dir %s --addr %s`), or\n"
			"  point --dir / NICSIM_DIR at the run directory of a running NIC\n",
			d->addr, dir, dir, d->addr);
	else if (wsa == WSAENETDOWN)
		fprintf(stderr,
			"nicsim-regdemo: the NIC %s in %s refused the attach or does not answer\n"
			"  (a line above says why when it refused; NICSIM_DEBUG=1 says more);\n"
			"  if it is not running, restart it with `nicsim down` and `nicsim up`\n",
			d->addr, dir);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Ask WSPIoctl for one extension function, as a switch does. */
static int get_ext(struct demo *d, GUID guid, void *fn, const char *name)
{
	DWORD got = 0;
	int err = 0;

	if (d->procs.lpWSPIoctl(d->s, SIO_GET_EXTENSION_FUNCTION_POINTER, &guid, sizeof(guid), fn,
				sizeof(void (*)(void)), &got, NULL, NULL, NULL, &err)) {
		fail(name, err);
		return -1;
	}
	return 0;
}

/* The accepting side of connect_to_self, on a thread of its own: the
 * connection is made while both calls are under way. */
struct acceptor {
	const WSPPROC_TABLE *procs;
	SOCKET l, s;
	int err;
};

static void *accept_main(void *arg)
{
	struct acceptor *a = arg;

	a->s = a->procs->lpWSPAccept(a->l, NULL, NULL, NULL, 0, &a->err);
	return NULL;
}

/* Connect d->s to a listener of its own NIC; *peer gets the accepted socket. */
static int connect_to_self(struct demo *d, SOCKET *peer)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct acceptor a;
	pthread_t t;
	SOCKET l;
	uint16_t port;
	int err = 0, rc = 1;

	*peer = INVALID_SOCKET;
	inet_pton(AF_INET, d->addr, &sin.sin_addr);
	l = d->procs.lpWSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);
	if (l == INVALID_SOCKET) {
		fail("WSPSocket", err);
		return 1;
	}
	for (port = 7100; port < 7164; port++) {
		sin.sin_port = htons(port);
		if (!d->procs.lpWSPBind(l, (struct sockaddr *)&sin, sizeof(sin), &err))
			break;
	}
	if (port == 7164 || d->procs.lpWSPListen(l, 1, &err)) {
		fail(port == 7164 ? "WSPBind (listener)" : "WSPListen", err);
		goto out;
	}
	a = (struct acceptor){.procs = &d->procs, .l = l, .s = INVALID_SOCKET};
	if (pthread_create(&t, NULL, accept_main, &a)) {
		fprintf(stderr, "nicsim-regdemo: no thread to accept the connection\n");
		goto out;
	}
	if (d->procs.lpWSPConnect(d->s, (struct sockaddr *)&sin, sizeof(sin), NULL, NULL, NULL,
				  NULL, &err)) {
		/* The acceptor may wait for good: the process ends soon. */
		pthread_detach(t);
		fail("WSPConnect", err);
		return 1;
	}
	pthread_join(t, NULL);
	*peer = a.s;
	if (*peer == INVALID_SOCKET) {
		fail("WSPAccept", a.err);
		goto out;
	}
	printf("connected to %s port %u\n", d->addr, (unsigned)port);
	rc = 0;
out:
	d->procs.lpWSPCloseSocket(l, &err);
	return rc;
}

static int run(struct demo *d)
{
	const GUID g_reg = WSAID_REGISTERMEMORY, g_dereg = WSAID_DEREGISTERMEMORY;
	const GUID g_reg_rdma = WSAID_REGISTERRDMAMEMORY;
	const GUID g_dereg_rdma = WSAID_DEREGISTERRDMAMEMORY;
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct nicsim_rdma_desc desc;
	void *local = MAP_FAILED, *remote = MAP_FAILED;
	HANDLE handle = NULL;
	SOCKET peer = INVALID_SOCKET;
	DWORD desc_len = 0;
	int err = 0, rc = 1;
	bool exposed = false;

	if (inet_pton(AF_INET, d->addr, &sin.sin_addr) != 1) {
		fprintf(stderr, "nicsim-regdemo: --addr %s is not an IPv4 address\n", d->addr);
		return 2;
	}
	d->s = d->procs.lpWSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);
	if (d->s == INVALID_SOCKET) {
		fail("WSPSocket", err);
		return 1;
	}
	if (d->procs.lpWSPBind(d->s, (struct sockaddr *)&sin, sizeof(sin), &err)) {
		fail("WSPBind", err);
		explain_bind(d, err);
		goto out;
	}
	printf("bound socket 0x%jx to NIC %s (pid %d)\n", (uintmax_t)d->s, d->addr, (int)getpid());
	if (get_ext(d, g_reg, &d->reg, "WSPIoctl(WSPRegisterMemory)") ||
	    get_ext(d, g_dereg, &d->dereg, "WSPIoctl(WSPDeregisterMemory)") ||
	    get_ext(d, g_reg_rdma, &d->reg_rdma, "WSPIoctl(WSPRegisterRdmaMemory)") ||
	    get_ext(d, g_dereg_rdma, &d->dereg_rdma, "WSPIoctl(WSPDeregisterRdmaMemory)"))
		goto out;

	local = mmap(NULL, LOCAL_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	remote = mmap(NULL, RDMA_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (local == MAP_FAILED || remote == MAP_FAILED) {
		perror("nicsim-regdemo: mmap");
		goto out;
	}
	memset(local, 0x5a, LOCAL_LEN);
	memset(remote, 0xa5, RDMA_LEN);

	handle = d->reg(d->s, local, LOCAL_LEN, MEM_READWRITE, &err);
	if (!handle) {
		fail("WSPRegisterMemory", err);
		goto out;
	}
	printf("registered local buffer %p, %u bytes, MEM_READWRITE: handle 0x%jx\n", local,
	       LOCAL_LEN, (uintmax_t)(uintptr_t)handle);

	if (connect_to_self(d, &peer))
		goto out;
	/* A switch learns the descriptor size by asking with a short buffer. */
	if (d->reg_rdma(d->s, remote, RDMA_LEN, MEM_READ, &desc, &desc_len, &err) == 0 ||
	    err != WSAEFAULT) {
		fprintf(stderr,
			"nicsim-regdemo: descriptor size query did not fail as it should\n");
		goto out;
	}
	printf("descriptor size: %u bytes\n", (unsigned)desc_len);
	if (desc_len > sizeof(desc)) {
		fprintf(stderr, "nicsim-regdemo: descriptor larger than expected\n");
		goto out;
	}
	if (d->reg_rdma(d->s, remote, RDMA_LEN, MEM_READ, &desc, &desc_len, &err)) {
		fail("WSPRegisterRdmaMemory", err);
		goto out;
	}
	exposed = true;
	printf("exposed RDMA buffer %p, %u bytes, MEM_READ: rkey 0x%08x\n", remote, RDMA_LEN,
	       (unsigned)desc.rkey);

	if (d->hold_ms > 0) {
		printf("holding the registrations for %ld ms (pid %d)\n", d->hold_ms,
		       (int)getpid());
		fflush(stdout);
		sleep_ms(d->hold_ms);
	}
	rc = 0;

out:
	if (exposed && d->dereg_rdma(d->s, &desc, desc_len, &err)) {
		fail("WSPDeregisterRdmaMemory", err);
		rc = 1;
	}
	if (handle && d->dereg(d->s, handle, &err)) {
		fail("WSPDeregisterMemory", err);
		rc = 1;
	}
	if (rc == 0)
		printf("deregistered both buffers\n");
	if (d->procs.lpWSPCloseSocket(d->s, &err)) {
		fail("WSPCloseSocket", err);
		rc = 1;
	}
	if (peer != INVALID_SOCKET && d->procs.lpWSPCloseSocket(peer, &err)) {
		fail("WSPCloseSocket", err);
		rc = 1;
	}
	if (local != MAP_FAILED)
		munmap(local, LOCAL_LEN);
	if (remote != MAP_FAILED)
		munmap(remote, RDMA_LEN);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"dir", required_argument, NULL, 'd'},
	    {"addr", required_argument, NULL, 'a'},
	    {"hold-ms", required_argument, NULL, 'h'},
	    {"help", no_argument, NULL, 'H'},
	    {NULL, 0, NULL, 0},
	};
	struct demo d = {.addr = "198.18.0.1"};
	WSPDATA data;
	int c, err = 0, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'd':
			if (setenv("NICSIM_DIR", optarg, 1)) {
				perror("nicsim-regdemo: setenv");
				return 1;
			}
			break;
		case 'a': d.addr = optarg; break;
		case 'h':
			errno = 0;
			d.hold_ms = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || d.hold_ms < 0) {
				fprintf(stderr, "nicsim-regdemo: --hold-ms wants a count of ms\n");
				return 2;
			}
			break;
		case 'H': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}

	err = WSPStartupEx(MAKEWORD(2, 2), &data, NULL, NULL, &d.procs);
	if (err) {
		fail("WSPStartupEx", err);
		return 1;
	}
	rc = run(&d);
	if (d.procs.lpWSPCleanup(&err)) {
		fail("WSPCleanup", err);
		rc = rc ? rc : 1;
	}
	return rc;
}
