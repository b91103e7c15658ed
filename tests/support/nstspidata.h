/*
 * The fixture the test_spi_* programs share (connections and data through
 * the SPI, ws2san.h, against real nicsimd processes joined by a fabric):
 *
 * NICs A and B (198.18.0.1, .2) with every capability; C (.3) without
 * memory windows and RDMA read, registrations up to 1 MiB; D (.4), for a
 * test to kill.  The suite set-up starts them in a private directory and
 * starts the SPI; each test must leave the TPT occupancy of A, B and C
 * where it found it (R11), which the teardown checks.  Each test starts
 * from the NICs as they were started, checked: if an earlier test failed
 * and left sockets, peers or NIC resources behind, the set-up closes every
 * socket (WSPCleanup) and peer process, restarts a NIC still not back, and
 * starts the SPI again, so that one failure does not fail the next test.  The peer process on
 * the same host is the program itself run with "--child": spi_main handles
 * that.  The names are those of the single program these came from, so the
 * tests read as before.
 */
#ifndef NSTSPIDATA_H
#define NSTSPIDATA_H

#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nicsim_abi.h"
#include "nstest.h"
#include "nstnet.h"
#include "nstnic.h"
#include "nicsim_provider.h"
#include "ws2san.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define ADDR_C "198.18.0.3"
#define ADDR_D "198.18.0.4"
#define ADDR_NONE "198.18.0.9" /* on no fabric port */
#define WAIT_MS 10000
#define PEER_GONE_NS 60000000000ull
#define OV_WAIT_MS 60000 /* ov_wait: longer than any transfer on a loaded machine */
#define PAGE 4096u
#define BIG (64u << 20)
#define REGION (BIG + 2 * PAGE)

extern char dir[256], sock_a[300], sock_b[300], sock_c[300];
/* The NICs (nstnic.h), and their pids by name (0 or less: not running). */
extern struct nst_nic spi_nics[4];
#define nic_a (spi_nics[0].pid)
#define nic_b (spi_nics[1].pid)
#define nic_c (spi_nics[2].pid)
#define nic_d (spi_nics[3].pid)
extern uint16_t next_port;
/* The suite runs with --udp: every NIC in a network namespace of its own,
 * frames as UDP datagrams (nstspidata.c). */
extern bool spi_udp;
/* Its network (nstnet.h): spi_nics[i] is host i + 1. */
extern struct nst_net spi_net;
extern char self_exe[PATH_MAX];

/* Run the tests of one test_spi_* program with the fixture; "--child ADDR
 * PORT" runs the peer process instead. */
int spi_main(int argc, char **argv, const char *name, const struct nst_test *tests);

/* ---- Helpers ------------------------------------------------------------------ */

uint8_t *map(size_t n);
struct sockaddr_in addr_of(const char *addr, uint16_t port);
SOCKET sock_on(const char *addr, uint16_t port);
void close_socket(SOCKET s);

struct acceptor {
	SOCKET l, s;
	int err;
};

void *accept_main(void *arg);

/*
 * A connected pair, blocking on both sides: *srv accepted on NIC srv_addr,
 * *cli connected from NIC cli_addr.  0 or the WSA error of the connect.
 */
int connect_pair(const char *srv_addr, const char *cli_addr, SOCKET *srv, SOCKET *cli);
HANDLE reg(SOCKET s, void *buf, DWORD len, DWORD flags);
void dereg(SOCKET s, HANDLE h);
int expose(SOCKET s, void *buf, DWORD len, DWORD flags, struct nicsim_rdma_desc *d);
void unexpose(SOCKET s, struct nicsim_rdma_desc *d);
int ov_wait(SOCKET s, WSAOVERLAPPED *ov, DWORD *bytes);
int post_send(SOCKET s, void *buf, DWORD len, WSAOVERLAPPED *ov);
int post_recv(SOCKET s, void *buf, DWORD len, WSAOVERLAPPED *ov);
int post_rdma(SOCKET s, bool write, void *buf, DWORD len, HANDLE h,
	      const struct nicsim_rdma_desc *d, DWORD off, WSAOVERLAPPED *ov);
uint32_t rnd(void);

/* Transfer sizes, 1 byte to BIG. */
#define NSIZES ((size_t)8)
extern const uint32_t sizes[NSIZES];

/* ---- Child process: the peer on the same host --------------------------------- */

enum ctl_op {
	CTL_RECV = 1,   /* post a receive of len at off, answer READY, then SUM of what came */
	CTL_SEND = 2,   /* fill [off, off + len) from seed and send it */
	CTL_EXPOSE = 3, /* expose [0, len) with flags (after filling it from seed): DESC */
	CTL_SUM = 4,    /* checksum of [off, off + len): SUM */
	CTL_QUIT = 5,
	CTL_READY = 6,
	CTL_DESC = 7,
	CTL_SUMS = 8,
};

struct ctl {
	uint32_t op, len, off, seed, flags, sum, bytes, err;
	struct nicsim_rdma_desc desc;
};

/* The parent's side of a child connection. */
struct peer {
	pid_t pid;
	SOCKET s;
	uint8_t *ctl;
	HANDLE hctl;
	struct ctl *in, *out;
};

/* Send control message m on s from out, its registered buffer, and wait. */
int send_ctl(SOCKET s, struct ctl *out, const struct ctl *m);
pid_t start_child(const char *addr, uint16_t port);
/* Start a child listening on NIC child_addr and connect to it from NIC mine. */
bool peer_open(struct peer *pr, const char *child_addr, const char *mine);
/* Send m and wait for the answer (its receive posted first). */
int peer_call(struct peer *pr, const struct ctl *m, struct ctl *answer);
void peer_close(struct peer *pr, bool quit);

/* ---- Connecting, events and blocked threads ------------------------------------------------ */

/* WSPConnect s to addr:port: 0 or the WSA error. */
int try_connect(SOCKET s, const char *addr, uint16_t port);
int events_of(SOCKET s, int ev, WSANETWORKEVENTS *ne);
bool event_fires(int fd, int ms);

struct waiter {
	SOCKET s;
	WSAOVERLAPPED *ov;
	void *buf;
	DWORD len, bytes;
	int rc, err;
	uint64_t done_ns;
	pid_t tid; /* set by the thread just before its call */
};

/* Wait until the thread that will set *tid has done so and blocks in its
 * call: what the test does next must find it waiting. */
void wait_until_blocked(pid_t *tid);
void *wait_main(void *arg);
void *blocking_recv_main(void *arg);

#endif /* NSTSPIDATA_H */
