/*
 * nicsim-agent, the scenario runner's host agent, driven over its protocol
 * (scn_agent_client.h) as the runner drives it: two agents on two NICs
 * connect, register, pass a descriptor and move data by RDMA WRITE and
 * READ; a stale, a forged and a truncated descriptor fail as the SPI says;
 * memory events reach the registration cache; a forked agent answers on its
 * own channel; and no line, however malformed, stops an agent.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fab_wire.h"
#include "nstest.h"
#include "nstnic.h"
#include "ws2san.h"
#include "scn_agent_client.h"
#include "scn_pattern.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define WAIT_MS 20000
#define REPLY_MAX SCN_AGENT_LINE_MAX

static char dir[256];
static struct nst_nic nics[2] = {{.addr = ADDR_A}, {.addr = ADDR_B}};

static struct scn_agent *spawn(const char *addr)
{
	struct scn_agent_spawn how = {
	    .program = nst_bin("nicsim-agent"), .run_dir = dir, .addr = addr, .stderr_fd = -1};
	struct scn_agent *a = NULL;
	int rc = scn_agent_spawn(&how, &a);

	NST_CHECK_(rc == 0, CU_TRUE, "spawning nicsim-agent for %.140s: %.140s", addr,
		   strerror(-rc));
	return a;
}

/* The reply (the words after the ID) of a request, waited for past `pending`. */
static const char *call(struct scn_agent *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *call(struct scn_agent *a, const char *fmt, ...)
{
	static char replies[4][REPLY_MAX];
	static int next;
	char *line = replies[next++ % 4], text[REPLY_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	n = scn_agent_call(a, line, REPLY_MAX, WAIT_MS, "%s", text);
	if (n < 0) {
		snprintf(line, REPLY_MAX, "(no reply to \"%.140s\": %s)", text, strerror(-n));
		return line;
	}
	return strchr(line, ' ') ? strchr(line, ' ') + 1 : line;
}

/* The reply of a request begins with want (whole words). */
static bool begins(const char *reply, const char *want)
{
	size_t n = strlen(want);

	return !strncmp(reply, want, n) && (reply[n] == '\0' || reply[n] == ' ');
}

#define EXPECT(a, want, ...)                                       \
	do {                                                       \
		const char *got_ = call((a), __VA_ARGS__);         \
		NST_CHECK_(begins(got_, want), CU_FALSE,           \
			   "request %.140s: got \"%.140s\", want " \
			   "\"%.140s ...\"",                       \
			   #__VA_ARGS__, got_, want);              \
	} while (0)

/* A reply's k=v value (the reply from call()). */
static bool value(const char *reply, const char *key, char *val, size_t size)
{
	char line[REPLY_MAX];
	struct scn_reply r;

	snprintf(line, sizeof(line), "1 %s", reply);
	return !scn_reply_parse(line, &r) && scn_reply_get(&r, key, val, size);
}

/* The CRC-32 the agent's `sum` reports for n bytes of pattern p from index 0. */
static uint32_t pattern_crc(enum scn_pattern_kind kind, uint64_t arg, size_t n)
{
	struct scn_pattern p = {.kind = kind, .arg = arg};
	uint8_t *b = malloc(n);
	uint32_t crc;

	NST_REQUIRE(b != NULL);
	scn_pattern_fill(&p, 0, b, n);
	crc = fab_crc32(0, b, n);
	free(b);
	return crc;
}

static void expect_sum(struct scn_agent *a, const char *buf, size_t len, uint32_t want)
{
	const char *got = call(a, "sum %s 0 %zu", buf, len);
	char crc[32], wants[32];

	snprintf(wants, sizeof(wants), "0x%08x", want);
	NST_CHECK_(value(got, "crc32", crc, sizeof(crc)) && !strcmp(crc, wants), CU_FALSE,
		   "sum of %.140s: got \"%.140s\", want crc32=%.140s", buf, got, wants);
}

/* h1 on A accepts sock_name on port, h2 on B connects t to it. */
static void connect_pair(struct scn_agent *h1, struct scn_agent *h2, unsigned port,
			 const char *sock_name)
{
	char line[REPLY_MAX];
	long long id;

	EXPECT(h1, "ok", "socket l%u", port);
	EXPECT(h1, "ok", "bind l%u %s %u", port, ADDR_A, port);
	EXPECT(h1, "ok", "listen l%u", port);
	id = scn_agent_request(h1, "accept l%u %s", port, sock_name);
	NST_REQUIRE(id > 0);
	NST_REQUIRE(scn_agent_wait(h1, id, line, sizeof(line), WAIT_MS) > 0);
	NST_CHECK_(strstr(line, " pending") != NULL, CU_TRUE, "accept: %.140s", line);
	EXPECT(h2, "ok", "socket t%u", port);
	EXPECT(h2, "ok", "bind t%u %s 0", port, ADDR_B);
	EXPECT(h2, "done ok", "connect t%u %s %u", port, ADDR_A, port);
	NST_REQUIRE(scn_agent_wait(h1, id, line, sizeof(line), WAIT_MS) > 0);
	NST_CHECK_(strstr(line, " done ok sock=") != NULL && strstr(line, "peer=" ADDR_B ":"),
		   CU_TRUE, "accept's end: %.140s", line);
}

/* The descriptor h1 exposes of buffer x (64 KiB) on socket sock, as x:HEX. */
static void expose(struct scn_agent *h1, const char *sock, const char *access, char *desc,
		   size_t size)
{
	const char *got = call(h1, "register-rdma %s x 0 65536 %s", sock, access);

	NST_CHECK_(begins(got, "ok") && value(got, "desc", desc, size), CU_TRUE,
		   "register-rdma: %.140s", got);
	NST_EQ(strlen(desc), 2 + 2 * NICSIM_RDMA_DESC_SIZE);
}

static void end_agent(struct scn_agent *a)
{
	int status = scn_agent_close(a, WAIT_MS);

	NST_CHECK_(WIFEXITED(status) && WEXITSTATUS(status) == 0, CU_FALSE,
		   "the agent ended with status 0x%x, want exit 0", status);
}

/*
 * Two agents, h1 on A and h2 on B, connected (h1's socket c1, h2's tPORT);
 * h1 exposes its buffer x (64 KiB, zero) with x_access into desc, h2 has
 * its buffer y (64 KiB, seq y_seq) registered with y_access.
 */
static void two_hosts(struct scn_agent **h1, struct scn_agent **h2, unsigned port,
		      const char *x_access, unsigned y_seq, const char *y_access, char *desc,
		      size_t size)
{
	*h1 = spawn(ADDR_A);
	*h2 = spawn(ADDR_B);
	EXPECT(*h1, "ok", "startup");
	EXPECT(*h2, "ok", "startup");
	connect_pair(*h1, *h2, port, "c1");
	EXPECT(*h1, "ok", "buffer x 65536 mmap");
	expose(*h1, "c1", x_access, desc, size);
	EXPECT(*h2, "ok", "buffer y 65536 mmap seq %u", y_seq);
	EXPECT(*h2, "ok", "register t%u y 0 65536 %s hy", port, y_access);
}

/*
 * The whole path a scenario takes: connect, expose, write and read by RDMA
 * with the descriptor carried from one agent to the other, check the bytes,
 * then deregister the exposure: the same descriptor is stale, the write
 * fails with WSAECONNRESET and nicsim_socket_error names a remote access
 * error.
 */
static void test_rdma_with_a_carried_descriptor(void)
{
	struct scn_agent *h1, *h2;
	char desc[128], what[200];
	const char *got;

	two_hosts(&h1, &h2, 7100, "readwrite", 9, "readwrite", desc, sizeof(desc));
	EXPECT(h2, "done ok bytes=65536", "write t7100 y 0 65536 desc=%s", desc);
	expect_sum(h1, "x", 65536, pattern_crc(SCN_PATTERN_SEQ, 9, 65536));
	EXPECT(h1, "ok x:0100000009000000", "peek x 8 8"); /* seq 9, word 1 */

	/* RDMA READ of what h1 changed, into y's first 4 KiB. */
	EXPECT(h1, "ok", "fill x 0 4096 random 5");
	EXPECT(h2, "done ok bytes=4096", "read t7100 y 0 4096 desc=%s at=0", desc);
	expect_sum(h2, "y", 4096, pattern_crc(SCN_PATTERN_RANDOM, 5, 4096));
	/* And at an offset: x[4096..8192) still holds seq 9 from index 4096. */
	EXPECT(h2, "done ok bytes=16", "read t7100 y 0 16 desc=%s at=4096", desc);
	EXPECT(h2, "ok x:0002000009000000", "peek y 0 8");

	/* Stale: deregistered, the peer's access ends at once (R8). */
	EXPECT(h1, "ok", "deregister-rdma c1 %s", desc);
	EXPECT(h2, "done err WSAECONNRESET", "write t7100 y 0 100 desc=%s", desc);
	got = call(h2, "socket-error t7100");
	NST_CHECK_(begins(got, "ok wsa=WSAECONNRESET nic_status=7"), CU_FALSE,
		   "socket-error: %.140s", got);
	NST_CHECK_(value(got, "what", what, sizeof(what)) && strstr(what, "remote access"),
		   CU_FALSE, "socket-error's sentence names a remote access error: %.140s", got);
	end_agent(h1);
	end_agent(h2);
}

/* A descriptor with its rkey changed, and one cut to 16 bytes. */
static void test_forged_and_truncated_descriptors(void)
{
	struct scn_agent *h1, *h2;
	char desc[128], forged[128], what[200];
	const char *got;

	two_hosts(&h1, &h2, 7101, "write", 2, "read", desc, sizeof(desc));

	/* Truncated: refused by the post itself, the connection stays. */
	snprintf(forged, sizeof(forged), "%.34s", desc); /* x: and 16 bytes */
	EXPECT(h2, "err WSAEINVAL", "write t7101 y 0 100 desc=%s", forged);
	EXPECT(h2, "err WSAENOTCONN", "socket-error t7101");
	EXPECT(h2, "done ok bytes=100", "write t7101 y 0 100 desc=%s", desc);

	/* Forged: the rkey (bytes 12..15) changed; the peer's NIC refuses it. */
	snprintf(forged, sizeof(forged), "%s", desc);
	for (int i = 2 + 2 * 12; i < 2 + 2 * 16; i++)
		forged[i] = forged[i] == 'f' ? '0' : 'f';
	EXPECT(h2, "done err WSAECONNRESET", "write t7101 y 0 100 desc=%s", forged);
	got = call(h2, "socket-error t7101");
	NST_CHECK_(value(got, "what", what, sizeof(what)) && strstr(what, "remote access"),
		   CU_FALSE, "socket-error: %.140s", got);
	/* The broken connection refuses later posts at once. */
	EXPECT(h2, "err WSAECONNRESET", "write t7101 y 0 100 desc=%s", desc);
	end_agent(h1);
	end_agent(h2);
}

/* The first reply to request id (pending, for an asynchronous one). */
static void expect_reply(struct scn_agent *a, long long id, const char *want)
{
	char line[REPLY_MAX];
	int n = scn_agent_wait(a, id, line, sizeof(line), WAIT_MS);

	NST_CHECK_(n > 0 && strchr(line, ' ') && begins(strchr(line, ' ') + 1, want), CU_FALSE,
		   "request %lld: got \"%.140s\" (%d), want \"%.140s ...\"", id, n > 0 ? line : "",
		   n, want);
}

/*
 * Messages: a receive stays pending while later requests go on, completes
 * with the message's length when the peer sends, and closing a socket
 * completes what is pending on it (WSA_OPERATION_ABORTED), as closing the
 * listener ends a blocked accept (WSAEINTR).
 */
static void test_send_and_recv(void)
{
	struct scn_agent *h1 = spawn(ADDR_A), *h2 = spawn(ADDR_B);
	long long rx, rx2, acc;

	EXPECT(h1, "ok", "startup");
	EXPECT(h2, "ok", "startup");
	connect_pair(h1, h2, 7103, "c1");
	EXPECT(h1, "ok", "buffer x 8192 mmap");
	EXPECT(h1, "ok", "register c1 x 0 4096 readwrite hx");
	EXPECT(h2, "ok", "buffer y 8192 malloc random 77");
	EXPECT(h2, "ok", "register t7103 y 0 8192 read hy");
	rx = scn_agent_request(h1, "recv c1 x 0 4096");
	expect_reply(h1, rx, "pending");
	EXPECT(h1, "ok", "hello"); /* not held back by the receive */
	EXPECT(h2, "done ok bytes=1000", "send t7103 y 0 1000");
	expect_reply(h1, rx, "done ok bytes=1000");
	expect_sum(h1, "x", 1000, pattern_crc(SCN_PATTERN_RANDOM, 77, 1000));
	/* A send from a range no registration of the socket covers. */
	EXPECT(h1, "err WSAEFAULT", "send c1 x 4000 200");
	EXPECT(h1, "ok", "deregister c1 hx");
	EXPECT(h1, "err WSAEFAULT", "recv c1 x 0 4096");

	/* Pending operations end with their socket. */
	EXPECT(h1, "ok", "register c1 x 0 8192 readwrite hx3");
	rx2 = scn_agent_request(h1, "recv c1 x 0 4096");
	expect_reply(h1, rx2, "pending");
	acc = scn_agent_request(h1, "accept l7103 c9");
	expect_reply(h1, acc, "pending");
	EXPECT(h1, "ok", "close c1");
	expect_reply(h1, rx2, "done err WSA_OPERATION_ABORTED");
	EXPECT(h1, "ok", "close l7103");
	/*
	 * WSAEINTR whether the close found the accept blocked in the provider
	 * or came before the agent's worker thread made the call (the agent
	 * answers pending just before it, and a loaded machine may hold the
	 * thread off): closing the socket ends what is pending on it.
	 */
	expect_reply(h1, acc, "done err WSAEINTR");
	EXPECT(h1, "err WSAENOTSOCK", "close c1");
	/* The last cleanup closes every socket: an accept pending then ends
	 * as when its listener is closed. */
	EXPECT(h1, "ok", "socket l7104");
	EXPECT(h1, "ok", "bind l7104 %s 7104", ADDR_A);
	EXPECT(h1, "ok", "listen l7104");
	acc = scn_agent_request(h1, "accept l7104 c10");
	expect_reply(h1, acc, "pending");
	EXPECT(h1, "ok", "cleanup");
	expect_reply(h1, acc, "done err WSAEINTR");
	EXPECT(h1, "err WSANOTINITIALISED", "cleanup");
	end_agent(h1);
	end_agent(h2);
}

/*
 * The switch's stream sockets: accept and connect with a path asked for,
 * a send and a receive of 1 MiB on worker threads (later requests go on
 * meanwhile), the switch's account of them, a receive that meets the end
 * of the stream, one that its socket's close ends, and a forked child,
 * which has no switch thread, refusing them.
 */
static void test_stream_sockets(void)
{
	struct scn_agent *h1 = spawn(ADDR_A), *h2 = spawn(ADDR_B), *child = NULL;
	char line[REPLY_MAX], pid[32], val[32];
	long long acc, rx, fk;
	struct scn_reply r;
	const char *got;

	EXPECT(h1, "ok", "stream-socket l");
	EXPECT(h1, "ok", "stream-bind l %s 7110", ADDR_A);
	EXPECT(h1, "ok", "stream-listen l 0 auto");
	acc = scn_agent_request(h1, "stream-accept l c");
	expect_reply(h1, acc, "pending");
	EXPECT(h1, "ok", "hello"); /* not held back by the accept */
	EXPECT(h2, "ok", "stream-socket t");
	EXPECT(h2, "ok", "stream-bind t %s 0", ADDR_B);
	EXPECT(h2, "done ok", "stream-connect t %s 7110 write", ADDR_A);
	NST_REQUIRE(scn_agent_wait(h1, acc, line, sizeof(line), WAIT_MS) > 0);
	NST_CHECK_(strstr(line, " done ok sock=c peer=" ADDR_B ":") != NULL, CU_TRUE,
		   "stream-accept's end: %.140s", line);

	EXPECT(h1, "ok", "buffer x 1048576 mmap");
	EXPECT(h2, "ok", "buffer y 1048576 mmap seq 5");
	rx = scn_agent_request(h1, "stream-recv c x 0 1048576");
	expect_reply(h1, rx, "pending");
	EXPECT(h1, "ok", "hello"); /* not held back by the receive */
	EXPECT(h2, "done ok bytes=1048576", "stream-send t y 0 1048576");
	expect_reply(h1, rx, "done ok bytes=1048576");
	expect_sum(h1, "x", 1048576, pattern_crc(SCN_PATTERN_SEQ, 5, 1048576));
	/* t asked for the write path into it; out of it, h1 reads. */
	got = call(h2, "stream-info t");
	NST_CHECK_(begins(got, "ok") && strstr(got, "path_out=read path_in=write") &&
		       strstr(got, " large_sends=1 ") && strstr(got, " bytes_sent=1048576 "),
		   CU_FALSE, "stream-info t: %.300s", got);
	got = call(h1, "stream-info c");
	NST_CHECK_(value(got, "bytes_received", val, sizeof(val)) && !strcmp(val, "1048576") &&
		       strstr(got, "path_out=write path_in=read"),
		   CU_FALSE, "stream-info c: %.300s", got);

	/* The kinds of socket do not mix. */
	EXPECT(h2, "bad", "send t y 0 10");
	EXPECT(h2, "bad", "stream-send nosuch y 0 10");
	EXPECT(h2, "bad", "stream-connect t %s 7110 sideways", ADDR_A);
	EXPECT(h2, "done err EISCONN", "stream-connect t %s 7110 auto", ADDR_A);
	EXPECT(h2, "done err EISCONN", "stream-connect t %s 7110 write", ADDR_A);

	/* After the peer's half-close, the end of the stream. */
	EXPECT(h2, "ok", "stream-shutdown t write");
	EXPECT(h1, "done err EOF bytes=0", "stream-recv c x 0 10");
	/* A receive pending when its socket is closed ends. */
	rx = scn_agent_request(h2, "stream-recv t y 0 10");
	expect_reply(h2, rx, "pending");
	EXPECT(h2, "ok", "stream-close t");
	expect_reply(h2, rx, "done err EBADF bytes=0");
	EXPECT(h2, "err EBADF", "stream-info t");
	EXPECT(h2, "err EBADF", "stream-close t");
	/* So does an accept pending on a listener that is closed. */
	acc = scn_agent_request(h1, "stream-accept l c2");
	expect_reply(h1, acc, "pending");
	EXPECT(h1, "ok", "stream-close l");
	expect_reply(h1, acc, "done err");

	/* A child of an agent whose switch runs has no switch thread. */
	fk = scn_agent_fork(h1, &child);
	NST_REQUIRE(fk > 0 && child != NULL);
	NST_REQUIRE(scn_agent_wait(h1, fk, line, sizeof(line), WAIT_MS) > 0);
	NST_CHECK_(!scn_reply_parse(line, &r) && r.kind == SCN_REPLY_PENDING &&
		       scn_reply_get(&r, "pid", pid, sizeof(pid)),
		   CU_TRUE, "fork: %.140s", line);
	scn_agent_set_pid(child, atoi(pid));
	EXPECT(child, "bad", "stream-socket u");
	EXPECT(child, "bad", "stream-info c");
	NST_EQ(scn_agent_close(child, WAIT_MS), 0);
	NST_REQUIRE(scn_agent_wait(h1, fk, line, sizeof(line), WAIT_MS) > 0);
	NST_CHECK_(strstr(line, " done ok exit=0") != NULL, CU_FALSE, "the child's end: %.140s",
		   line);
	/* Ending closes the stream sockets still open (c). */
	end_agent(h1);
	end_agent(h2);
}

/* The value of a counter of `cache-stats`. */
static long long cache_stat(struct scn_agent *a, const char *key)
{
	const char *got = call(a, "cache-stats");
	char v[32];

	NST_CHECK_(value(got, key, v, sizeof(v)), CU_FALSE, "cache-stats has %.140s: %.140s", key,
		   got);
	return atoll(v);
}

/*
 * Memory events on named buffers reach the provider's memory monitor: a
 * cached registration is dropped when its buffer is unmapped or freed, the
 * buffer can be mapped again at the same address, and the agent refuses to
 * touch memory that is gone.
 */
static void test_memory_events(void)
{
	struct scn_agent *h = spawn(ADDR_A);
	char addr[32], again[32];
	long long inval;
	const char *got;

	EXPECT(h, "ok", "startup");
	EXPECT(h, "ok", "socket s");
	EXPECT(h, "ok", "bind s %s 0", ADDR_A);
	got = call(h, "buffer x 65536 mmap seq 3");
	NST_REQUIRE(value(got, "addr", addr, sizeof(addr)));
	EXPECT(h, "ok", "register s x 0 65536 readwrite hx");
	EXPECT(h, "ok", "deregister s hx");
	EXPECT(h, "err WSAEINVAL", "deregister s hx"); /* released */
	NST_EQ(cache_stat(h, "unused"), 1);            /* cached (R7) */
	inval = cache_stat(h, "invalidations");

	/* munmap drops the cached registration (R10); mmap at the same address. */
	EXPECT(h, "ok", "munmap x");
	NST_EQ(cache_stat(h, "invalidations"), inval + 1);
	NST_EQ(cache_stat(h, "entries"), 0);
	EXPECT(h, "bad", "peek x 0 8");
	EXPECT(h, "bad", "munmap x");
	got = call(h, "mmap x");
	NST_CHECK_(value(got, "addr", again, sizeof(again)) && !strcmp(addr, again), CU_FALSE,
		   "mmap x at %.140s: %.140s", addr, got);
	EXPECT(h, "ok x:0000000000000000", "peek x 0 8");
	EXPECT(h, "err EEXIST", "mmap x");
	EXPECT(h, "ok", "mmap x fixed");

	/* A registration in use, then its memory replaced under it. */
	EXPECT(h, "ok", "register s x 0 4096 read hx2");
	EXPECT(h, "ok", "madvise x dontneed");
	EXPECT(h, "err EINVAL", "madvise x remove"); /* private anonymous memory */
	EXPECT(h, "ok", "mremap x 131072");
	EXPECT(h, "ok", "sum x 0 131072");

	/* malloc'd buffers: free and realloc. */
	EXPECT(h, "ok", "buffer m 200000 malloc byte 0xab");
	EXPECT(h, "ok x:abababab", "peek m 199996 4");
	EXPECT(h, "ok", "register s m 0 200000 read hm");
	EXPECT(h, "ok", "deregister s hm");
	inval = cache_stat(h, "invalidations");
	EXPECT(h, "ok", "free m");
	NST_EQ(cache_stat(h, "invalidations"), inval + 1);
	EXPECT(h, "bad", "peek m 0 4");
	EXPECT(h, "bad", "free m");
	EXPECT(h, "bad", "register s m 0 100 read hm2");
	EXPECT(h, "bad", "madvise m dontneed");
	EXPECT(h, "ok", "buffer n 1000 malloc seq 1");
	EXPECT(h, "ok", "realloc n 3000000");
	expect_sum(h, "n", 1000, pattern_crc(SCN_PATTERN_SEQ, 1, 1000));
	/* The cache callback drops what is cached in a range (R9), and only that. */
	EXPECT(h, "err WSAEINVAL", "cache-callback n");
	EXPECT(h, "ok", "register s n 0 1000 readwrite hn");
	EXPECT(h, "ok", "deregister s hn");
	EXPECT(h, "ok", "cache-callback n 0 1");
	EXPECT(h, "err WSAEINVAL", "cache-callback n");
	end_agent(h);
}

/*
 * The agent's environment: the run directory and the entries the runner
 * gives (a host's `cache off`), which win over the caller's own.
 */
static void test_environment(void)
{
	static const char *const env[] = {"NICSIM_CACHE=off", NULL};
	struct scn_agent_spawn how = {.program = nst_bin("nicsim-agent"),
				      .run_dir = dir,
				      .addr = ADDR_A,
				      .env = env,
				      .stderr_fd = -1};
	struct scn_agent *h = NULL;
	char flags[32];
	const char *got;

	setenv("NICSIM_CACHE", "on", 1);
	NST_REQUIRE_EQ(scn_agent_spawn(&how, &h), 0);
	unsetenv("NICSIM_CACHE");
	EXPECT(h, "ok", "startup");
	EXPECT(h, "ok", "socket s");
	EXPECT(h, "ok", "bind s %s 0", ADDR_A); /* the NIC of NICSIM_DIR */
	EXPECT(h, "ok", "buffer x 4096 mmap");
	EXPECT(h, "ok", "register s x 0 4096 read hx");
	EXPECT(h, "ok", "deregister s hx");
	got = call(h, "cache-stats");
	NST_CHECK_(value(got, "flags", flags, sizeof(flags)) && !(strtoul(flags, NULL, 0) & 1),
		   CU_FALSE, "NICSIM_CACHE=off reached the agent: %.140s", got);
	NST_EQ(cache_stat(h, "unused"), 0);
	end_agent(h);
}

/* A forked agent answers on its own channel and its end reaches the parent. */
static void test_fork(void)
{
	struct scn_agent *h = spawn(ADDR_A), *child = NULL;
	char line[REPLY_MAX], pid[32];
	struct scn_reply r;
	long long id;
	const char *got;

	EXPECT(h, "ok", "startup");
	EXPECT(h, "ok", "buffer x 4096 mmap seq 4");
	id = scn_agent_fork(h, &child);
	NST_REQUIRE(id > 0 && child != NULL);
	NST_REQUIRE(scn_agent_wait(h, id, line, sizeof(line), WAIT_MS) > 0);
	NST_CHECK_(!scn_reply_parse(line, &r) && r.kind == SCN_REPLY_PENDING &&
		       scn_reply_get(&r, "pid", pid, sizeof(pid)),
		   CU_TRUE, "fork: %.140s", line);
	scn_agent_set_pid(child, atoi(pid));
	got = call(child, "hello");
	NST_CHECK_(begins(got, "ok") && strstr(got, pid), CU_FALSE,
		   "the child's hello: %.140s (pid %.140s)", got, pid);
	EXPECT(child, "ok x:0000000004000000", "peek x 0 8"); /* memory copied */
	/* A host of its own: the provider starts afresh in the child. */
	EXPECT(child, "ok", "startup");
	EXPECT(child, "ok", "socket s");
	EXPECT(child, "ok", "bind s %s 0", ADDR_A);
	EXPECT(child, "ok", "register s x 0 4096 readwrite hx");
	/* The parent goes on meanwhile. */
	EXPECT(h, "ok", "fill x 0 8 byte 1");
	EXPECT(child, "ok x:0000000004000000", "peek x 0 8");
	EXPECT(child, "ok", "exit 7");
	NST_REQUIRE(scn_agent_wait(h, id, line, sizeof(line), WAIT_MS) > 0);
	NST_CHECK_(strstr(line, " done ok exit=7") != NULL, CU_FALSE, "the fork's end: %.140s",
		   line);
	NST_EQ(scn_agent_recv(child, line, sizeof(line), WAIT_MS), -EPIPE);
	NST_EQ(scn_agent_close(child, WAIT_MS), 0);
	/* Without a channel passed with it, a fork is refused. */
	NST_EQ(scn_agent_send_raw(h, "900 fork", 8), 0);
	NST_TRUE(scn_agent_wait(h, 900, line, sizeof(line), WAIT_MS) > 0 &&
		 begins(line, "900 bad"));
	end_agent(h);
}

/* `exit N` ends the agent with N; closing the channel ends it with 0 even
 * while an accept blocks. */
static void test_exit_and_end_of_requests(void)
{
	struct scn_agent *h = spawn(ADDR_A);
	char line[REPLY_MAX];
	uint64_t t0;
	long long id;
	int status;

	EXPECT(h, "ok", "exit 3");
	status = scn_agent_close(h, WAIT_MS);
	NST_TRUE(WIFEXITED(status));
	NST_EQ(WEXITSTATUS(status), 3);

	h = spawn(ADDR_A);
	EXPECT(h, "ok", "startup");
	EXPECT(h, "ok", "socket l");
	EXPECT(h, "ok", "bind l %s 7102", ADDR_A);
	EXPECT(h, "ok", "listen l");
	id = scn_agent_request(h, "accept l c");
	NST_TRUE(scn_agent_wait(h, id, line, sizeof(line), WAIT_MS) > 0 && strstr(line, "pending"));
	EXPECT(h, "ok", "hello"); /* not held back by the accept */
	t0 = nst_now_ns();
	end_agent(h);
	NST_LT((nst_now_ns() - t0) / 1000000, 5000);
}

/* Requests that are wrong in every way get `bad`, and the agent goes on. */
static void test_malformed_requests(void)
{
	static const char *const lines[] = {
	    "",
	    "   ",
	    "hello",
	    "0 hello",
	    "12345678901234567890 hello",
	    "x1 hello",
	    "5",
	    "5 frobnicate",
	    "5 hello extra",
	    "5 socket",
	    "5 socket 9lives",
	    "5 socket a-name-that-is-far-too-long-to-be-a-name-because-it-has-more-than-63",
	    "5 bind nosuch 1.2.3.4 0",
	    "5 buffer b 0 mmap",
	    "5 buffer b 99999999999999999999 mmap",
	    "5 buffer b 0x mmap",
	    "5 buffer b 12abc mmap",
	    "5 buffer b 100 heap",
	    "5 buffer b 100 mmap seq",
	    "5 buffer b 100 mmap byte 256",
	    "5 buffer b 100 mmap stripes 3",
	    "5 peek nosuch 0 1",
	    "5 peek q 0 101",
	    "5 peek q 100 1",
	    "5 peek q 18446744073709551615 2",
	    "5 peek q 0 2000",
	    "5 deregister-rdma s x:0",
	    "5 deregister-rdma s x:zz",
	    "5 deregister-rdma s 00ff",
	    "5 write s q 0 1 desc=x:00 at=-1",
	    "5 write s q 0 1",
	    "5 write s q 0 1 desc=x:00 color=red",
	    "5 register s q 0 10 everything h",
	    "5 register s q 0 10 read q",
	    "5 madvise q dontneed 0",
	    "5 mmap q sideways",
	    "5 free q",
	    "5 exit 256",
	    "5 listen s -1",
	};
	struct scn_agent *h = spawn(ADDR_A);
	char line[REPLY_MAX], big[10000];
	uint64_t rng = 42;

	EXPECT(h, "ok", "startup");
	EXPECT(h, "ok", "socket s");
	EXPECT(h, "ok", "buffer q 100 mmap");
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		NST_EQ(scn_agent_send_raw(h, lines[i], strlen(lines[i])), 0);
		NST_EQ(scn_agent_recv(h, line, sizeof(line), WAIT_MS) > 0, 1);
		NST_CHECK_(strstr(line, " bad ") && (begins(line, "-") || begins(line, "5")),
			   CU_FALSE,
			   "\"%.140s\" got \"%.140s\", want \"5 bad ...\" or \"- bad ...\"",
			   lines[i], line);
	}
	/* A line too long, one with a NUL, one with a byte above 0x7e. */
	memset(big, 'a', sizeof(big));
	memcpy(big, "6 hello ", 8);
	NST_EQ(scn_agent_send_raw(h, big, sizeof(big)), 0);
	NST_EQ(scn_agent_recv(h, line, sizeof(line), WAIT_MS) > 0, 1);
	NST_CHECK_(begins(line, "6 bad") && strstr(line, "longer than"), CU_FALSE, "%.140s", line);
	NST_EQ(scn_agent_send_raw(h, "7 hel\0lo", 8), 0);
	NST_EQ(scn_agent_recv(h, line, sizeof(line), WAIT_MS) > 0, 1);
	NST_CHECK_(begins(line, "7 bad") && strstr(line, "0x00"), CU_FALSE, "%.140s", line);
	NST_EQ(scn_agent_send_raw(h, "8 peek q 0 \xc3\xa9", 13), 0);
	NST_EQ(scn_agent_recv(h, line, sizeof(line), WAIT_MS) > 0, 1);
	NST_CHECK_(begins(line, "8 bad"), CU_FALSE, "%.140s", line);

	/*
	 * Fuzz: random verbs with random words, and random bytes.  Every line
	 * gets a first reply (for the asynchronous ones, `pending`, their done
	 * coming later), and the agent lives through all of them.
	 */
	{
		static const char *const verbs[] = {
		    "hello",          "startup",     "socket",        "bind",
		    "listen",         "accept",      "connect",       "close",
		    "buffer",         "fill",        "peek",          "sum",
		    "register",       "deregister",  "register-rdma", "deregister-rdma",
		    "write",          "read",        "send",          "recv",
		    "cache-callback", "cache-stats", "socket-error",  "munmap",
		    "mmap",           "mremap",      "madvise",       "free",
		    "realloc",        "cleanup",     "nope"};
		static const char *const words[] = {"s",
						    "q",
						    "b1",
						    "b2",
						    "m1",
						    "h1",
						    "mmap",
						    "malloc",
						    "seq",
						    "random",
						    "byte",
						    "zero",
						    "read",
						    "write",
						    "readwrite",
						    "dontneed",
						    "free",
						    "remove",
						    "fixed",
						    ADDR_A,
						    ADDR_B,
						    "1.2.3.4",
						    "x:",
						    "x:00",
						    "x:0102030405060708",
						    "desc=x:00",
						    "at=7",
						    "handle=h1",
						    "handle=0x10",
						    "0",
						    "1",
						    "7",
						    "4096",
						    "65535",
						    "0x1000",
						    "18446744073709551615",
						    "-1",
						    "\"",
						    "=",
						    "x:zz"};
		int replied = 0;

		for (int i = 0; i < 3000; i++) {
			char req[512];
			size_t n;
			long long id = 1000 + i;
			int nw = (int)(nst_splitmix64(&rng) % 8);

			n = (size_t)snprintf(
			    req, sizeof(req), "%lld %s", id,
			    verbs[nst_splitmix64(&rng) % (sizeof(verbs) / sizeof(verbs[0]))]);
			for (int w = 0; w < nw; w++) {
				uint64_t pick = nst_splitmix64(&rng);

				if (pick % 10 == 0) /* a random small number */
					n += (size_t)snprintf(req + n, sizeof(req) - n, " %u",
							      (unsigned)(pick >> 8) % 70000);
				else
					n += (size_t)snprintf(
					    req + n, sizeof(req) - n, " %s",
					    words[(pick >> 8) %
						  (sizeof(words) / sizeof(words[0]))]);
			}
			if (i % 50 == 49) /* raw random bytes after the ID */
				for (int k = 0; k < 20; k++) {
					char c = (char)(nst_splitmix64(&rng) & 0xff);

					req[n++] = c == '\n' ? ' ' : c;
				}
			NST_REQUIRE(scn_agent_send_raw(h, req, n) == 0);
			/* The first reply to this request (others may come first). */
			for (;;) {
				int len = scn_agent_recv(h, line, sizeof(line), WAIT_MS);

				NST_CHECK_(len > 0, CU_TRUE, "no reply to \"%.*s\": %d", (int)n,
					   req, len);
				if (strtoll(line, NULL, 10) == id || begins(line, "-"))
					break;
			}
			replied++;
		}
		NST_EQ(replied, 3000);
	}
	EXPECT(h, "ok", "hello");
	end_agent(h);
}

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, NULL};

	if (nst_tmpdir(dir, sizeof(dir), "agent") < 0 || nst_make_fabric(dir, addrs) < 0)
		return -1;
	return nst_nics_start(dir, nics, 2, WAIT_MS);
}

static int clean(void)
{
	const pid_t pids[] = {nics[0].pid, nics[1].pid};

	return nst_stop_nics_clean(dir, pids, 2, WAIT_MS);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"rdma_with_a_carried_descriptor", test_rdma_with_a_carried_descriptor},
	    {"forged_and_truncated_descriptors", test_forged_and_truncated_descriptors},
	    {"send_and_recv", test_send_and_recv},
	    {"stream_sockets", test_stream_sockets},
	    {"memory_events", test_memory_events},
	    {"environment", test_environment},
	    {"fork", test_fork},
	    {"exit_and_end_of_requests", test_exit_and_end_of_requests},
	    {"malformed_requests", test_malformed_requests},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "agent", tests, init, clean);
}
