/*
 * nicsim-stream end to end over the kernel's TCP on loopback, which needs
 * no NIC: --loopback with a sweep and --verify, ping-pong and --duration,
 * every field of the JSON report and the text table; a separate server
 * with its clients, one of them cut off by killing the server (the client
 * says what happened and exits 1 long before its test would end); a
 * refused connection; a byte flipped on the way, in each direction, by a
 * proxy of this test, which --verify reports by message and offset on
 * both ends; and the command line's mistakes (exit status 2 and a line
 * that names the option).  Where the switch library is built, the switch
 * transport runs between two NICs beside TCP; where it is not, the tool
 * says so.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nstest.h"
#include "nstnic.h"
#include "nststream.h"

#define RUN_MS 120000 /* one nicsim-stream run, under sanitizers on a busy machine */
#define WAIT_MS 20000 /* a process that should end soon */

static char out[65536];

static int stream_run(const char *const *args)
{
	return nst_run_shown(nst_bin("nicsim-stream"), "nicsim-stream", args, out, sizeof(out),
			     RUN_MS);
}

#define STREAM(...) stream_run((const char *const[]){__VA_ARGS__, NULL})
#define HAS(text, what) \
	NST_CHECK_(strstr((text), (what)) != NULL, CU_FALSE, "output has \"%s\"", (what))

/* ---- Reading the JSON report (nststream.h) --------------------------- */

#define VALUE_IS(obj, key, text) \
	NST_CHECK_(nst_json_value_is(obj, key, text), CU_FALSE, "\"%s\" is %s", key, text)

/* The fields every result object has, with the values they must have. */
static void check_result(const char *obj, const char *transport, const char *test, double size,
			 double count, bool verified)
{
	char want[32];

	snprintf(want, sizeof(want), "\"%s\"", transport);
	VALUE_IS(obj, "transport", want);
	snprintf(want, sizeof(want), "\"%s\"", test);
	VALUE_IS(obj, "test", want);
	NST_EQ(nst_json_num(obj, "size"), size);
	if (count > 0)
		NST_EQ(nst_json_num(obj, "count"), count);
	NST_EQ(nst_json_num(obj, "bytes"),
	       nst_json_num(obj, "count") * size * (strcmp(test, "pingpong") ? 1 : 2));
	NST_TRUE(nst_json_num(obj, "seconds") > 0);
	NST_TRUE(nst_json_num(obj, "gbytes_per_s") >= 0);
	/* Gbit/s is GB/s times 8, each printed to 6 decimals. */
	NST_TRUE(nst_json_num(obj, "gbits_per_s") - 8 * nst_json_num(obj, "gbytes_per_s") < 1e-4 &&
		 8 * nst_json_num(obj, "gbytes_per_s") - nst_json_num(obj, "gbits_per_s") < 1e-4);
	NST_TRUE(nst_json_num(obj, "msgs_per_s") > 0);
	VALUE_IS(obj, "verified", verified ? "true" : "false");
	if (!strcmp(transport, "tcp")) {
		VALUE_IS(obj, "path", "null");
		VALUE_IS(obj, "switch", "null");
	}
	if (!strcmp(test, "stream")) {
		VALUE_IS(obj, "latency_us", "null");
	} else {
		double p50 = nst_json_num(obj, "p50"), p90 = nst_json_num(obj, "p90"),
		       p99 = nst_json_num(obj, "p99"), max = nst_json_num(obj, "max");

		NST_TRUE(p50 > 0 && p50 <= p90 && p90 <= p99 && p99 <= max);
		NST_TRUE(nst_json_num(obj, "mean") > 0 && nst_json_num(obj, "mean") <= max);
	}
}

/* ---- Over TCP, in one command --------------------------------------------- */

static void test_tcp_sweep_verify_json(void)
{
	static const double sizes[] = {64, 4096, 1 << 20};
	const char *obj[8];
	size_t n;

	NST_REQUIRE_EQ(STREAM("--loopback", "--transport", "tcp", "--sweep", "64,4K,1M", "--count",
			      "40", "--verify", "--seed", "7", "--json"),
		       0);
	NST_TRUE(nst_json_balanced(out));
	HAS(out, "{\"tool\":\"nicsim-stream\",");
	HAS(out, "\"seed\":7,");
	HAS(out, "],\"ok\":true}\n");
	n = nst_stream_results(out, obj, 8);
	NST_REQUIRE_EQ(n, 3);
	for (size_t i = 0; i < n; i++)
		check_result(obj[i], "tcp", "stream", sizes[i], 40, true);
}

static void test_tcp_pingpong(void)
{
	const char *obj[2];

	NST_REQUIRE_EQ(STREAM("--loopback", "--transport", "tcp", "--pingpong", "--count", "300",
			      "--verify", "--json"),
		       0);
	NST_TRUE(nst_json_balanced(out));
	NST_REQUIRE_EQ(nst_stream_results(out, obj, 2), 1);
	check_result(obj[0], "tcp", "pingpong", 8, 300, true);
	/* --size applies to ping-pong too. */
	NST_REQUIRE_EQ(STREAM("--loopback", "--transport", "tcp", "--pingpong", "--size", "3000",
			      "--count", "50", "--verify", "--json"),
		       0);
	NST_REQUIRE_EQ(nst_stream_results(out, obj, 2), 1);
	check_result(obj[0], "tcp", "pingpong", 3000, 50, true);
}

/* A duration runs at least that long and counts what it did. */
static void test_tcp_duration(void)
{
	const char *obj[2];

	NST_REQUIRE_EQ(
	    STREAM("--loopback", "--transport", "tcp", "--size", "4K", "--duration", "1", "--json"),
	    0);
	NST_REQUIRE_EQ(nst_stream_results(out, obj, 2), 1);
	check_result(obj[0], "tcp", "stream", 4096, 0, false);
	NST_GE(nst_json_num(obj[0], "count"), 1);
	NST_TRUE(nst_json_num(obj[0], "seconds") >= 1.0 && nst_json_num(obj[0], "seconds") < 60);
}

static void test_text_table(void)
{
	NST_REQUIRE_EQ(STREAM("--loopback", "--transport", "tcp", "--sweep", "64,1K", "--count",
			      "20", "--verify", "--seed", "99"),
		       0);
	HAS(out, "--verify: data from seed 99\n");
	HAS(out, "transport     size    messages   seconds     GB/s   Gbit/s      msgs/s");
	HAS(out, "tcp           64 B          20 ");
	HAS(out, "tcp          1 KiB          20 ");
	NST_REQUIRE_EQ(STREAM("--loopback", "--transport", "tcp", "--pingpong", "--count", "20"),
		       0);
	HAS(out, "round trips");
	HAS(out, "p50 us   p90 us   p99 us   max us");
	HAS(out, "tcp            8 B          20 ");
}

/* ---- A server of its own, and a proxy ---------------------------------------- */

struct proxy {
	int listen_fd;
	uint16_t server_port;
	int dir;       /* 0: from the client to the server, 1: back */
	uint64_t off;  /* which byte of that direction to flip (~0: none) */
	int notify_fd; /* gets a byte once notify_after bytes went to the server */
	uint64_t notify_after;
};

static int proxy_main(void *arg);

/* A proxy child for p (its listening socket made here), reached at addr. */
static pid_t start_proxy(struct proxy *p, char *addr, size_t size)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	pid_t pid;

	p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->listen_fd < 0)
		return -errno;
	if (bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a)) || listen(p->listen_fd, 1) ||
	    getsockname(p->listen_fd, (struct sockaddr *)&a, &alen)) {
		close(p->listen_fd);
		return -errno;
	}
	pid = nst_fork(proxy_main, p);
	close(p->listen_fd);
	snprintf(addr, size, "127.0.0.1:%u", ntohs(a.sin_port));
	return pid;
}

/* Start `nicsim-stream --server --transport tcp --bind 127.0.0.1:0` plus
 * extra (NULL or one option); its port in *port, its output on *fd. */
static pid_t start_server(const char *extra, uint16_t *port, int *fd, char *buf, size_t size,
			  size_t *len)
{
	const char *argv[] = {nst_bin("nicsim-stream"),
			      "--server",
			      "--transport",
			      "tcp",
			      "--bind",
			      "127.0.0.1:0",
			      extra,
			      NULL};
	unsigned p = 0;
	const char *at;
	pid_t pid = nst_spawn_output(argv, NULL, fd);

	*len = 0;
	buf[0] = '\0';
	if (pid < 0)
		return pid;
	if (!nst_read_until(*fd, buf, size, len, " (tcp)\n", WAIT_MS) ||
	    !(at = strstr(buf, "listening on 127.0.0.1:")) ||
	    sscanf(at, "listening on 127.0.0.1:%u", &p) != 1 || !p || p > 65535) {
		printf("server said: %s\n", buf);
		nst_stop(pid, WAIT_MS);
		close(*fd);
		return -EPROTO;
	}
	*port = (uint16_t)p;
	return pid;
}

/* Two clients in turn, then one whose server is killed under it. */
static void test_server_and_reset(void)
{
	char sout[16384], addr[32];
	const char *cargv[16];
	size_t slen, clen = 0;
	uint16_t port;
	int sfd, cfd, status;
	pid_t srv, cli;
	char cout[8192] = "";

	srv = start_server(NULL, &port, &sfd, sout, sizeof(sout), &slen);
	NST_REQUIRE(srv > 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	NST_EQ(STREAM("--client", addr, "--transport", "tcp", "--sweep", "64,64K", "--count", "50",
		      "--verify"),
	       0);
	NST_EQ(STREAM("--client", addr, "--transport", "tcp", "--pingpong", "--count", "50"), 0);
	/* The server says goodbye to each: two tests of (10 + 50) messages
	 * of 64 B and 64 KiB, then one of 8-byte pings. */
	NST_TRUE(nst_read_until(sfd, sout, sizeof(sout), &slen, "1 test, 480 bytes received\n",
				WAIT_MS));
	HAS(sout, "2 tests, 3936000 bytes received\n");

	/* A long test, and the server killed once the client is in it. */
	cargv[0] = nst_bin("nicsim-stream");
	cargv[1] = "--client";
	cargv[2] = addr;
	cargv[3] = "--transport";
	cargv[4] = "tcp";
	cargv[5] = "--duration";
	cargv[6] = "600";
	cargv[7] = NULL;
	cli = nst_spawn_output(cargv, NULL, &cfd);
	NST_REQUIRE(cli > 0);
	slen = 0;
	NST_TRUE(nst_read_until(sfd, sout, sizeof(sout), &slen, " connected\n", WAIT_MS));
	HAS(sout, "client 127.0.0.1:");
	kill(srv, SIGKILL);
	status = nst_wait(srv, WAIT_MS);
	NST_TRUE(WIFSIGNALED(status));
	/* The client ends at once, saying why, not after its 600 s. */
	nst_read_until(cfd, cout, sizeof(cout), &clen, NULL, WAIT_MS);
	status = nst_wait(cli, WAIT_MS);
	printf("client said: %s\n", cout);
	NST_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	HAS(cout, "nicsim-stream: tcp: the 64 KiB stream test with the server ");
	NST_TRUE(strstr(cout, "Connection reset by peer (the peer closed abortively or died)") ||
		 strstr(cout, "Broken pipe") || strstr(cout, "the server closed the connection"));
	close(sfd);
	close(cfd);
}

/* The server killed in the middle of the data, once 64 MiB have passed a
 * proxy: the client says it lost the server while sending, and ends. */
static void test_server_killed_midway(void)
{
	struct proxy p = {.off = ~0ull, .notify_after = 64u << 20};
	char sout[4096], cout[8192] = "", addr[32], c;
	size_t slen, clen = 0;
	int sfd, cfd, fds[2], status;
	pid_t srv, prox, cli;

	srv = start_server("--once", &p.server_port, &sfd, sout, sizeof(sout), &slen);
	NST_REQUIRE(srv > 0);
	NST_REQUIRE(pipe(fds) == 0);
	p.notify_fd = fds[1];
	prox = start_proxy(&p, addr, sizeof(addr));
	close(fds[1]);
	NST_REQUIRE(prox > 0);
	cli =
	    nst_spawn_output((const char *const[]){nst_bin("nicsim-stream"), "--client", addr,
						   "--transport", "tcp", "--duration", "600", NULL},
			     NULL, &cfd);
	NST_REQUIRE(cli > 0);
	{
		struct pollfd pf = {.fd = fds[0], .events = POLLIN};

		NST_TRUE(poll(&pf, 1, WAIT_MS) == 1 && read(fds[0], &c, 1) == 1);
	}
	kill(srv, SIGKILL);
	status = nst_wait(srv, WAIT_MS);
	NST_TRUE(WIFSIGNALED(status));
	nst_read_until(cfd, cout, sizeof(cout), &clen, NULL, WAIT_MS);
	status = nst_wait(cli, WAIT_MS);
	printf("client said: %s\n", cout);
	NST_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	HAS(cout, "nicsim-stream: tcp: the 64 KiB stream test with the server ");
	NST_TRUE(strstr(cout, ": sending a message: ") || strstr(cout, ": starting a batch: "));
	NST_TRUE(strstr(cout, "Connection reset by peer (the peer closed abortively or died)") ||
		 strstr(cout, "Broken pipe") || strstr(cout, "the server closed the connection"));
	nst_wait(prox, WAIT_MS);
	close(fds[0]);
	close(sfd);
	close(cfd);
}

/* Interrupted (as by ^C) in the middle of a long run: the tool says so,
 * its JSON report still ends as a document, and it exits with 128 + 2, as
 * a shell reports a process SIGINT ended. */
static void test_interrupted(void)
{
	char cout[8192] = "";
	size_t clen = 0;
	int cfd, status;
	pid_t cli = nst_spawn_output((const char *const[]){nst_bin("nicsim-stream"), "--loopback",
							   "--transport", "tcp", "--duration",
							   "600", "--json", NULL},
				     NULL, &cfd);

	NST_REQUIRE(cli > 0);
	NST_TRUE(nst_read_until(cfd, cout, sizeof(cout), &clen, "\"results\":[", WAIT_MS));
	kill(cli, SIGINT);
	nst_read_until(cfd, cout, sizeof(cout), &clen, NULL, WAIT_MS);
	status = nst_wait(cli, WAIT_MS);
	if (status == -ETIMEDOUT)
		status = nst_stop(cli, WAIT_MS);
	NST_CHECK_(WIFEXITED(status) && WEXITSTATUS(status) == 130, CU_FALSE,
		   "exit status 0x%x, want exit 130; it said: %s", status, cout);
	HAS(cout, "nicsim-stream: interrupted by SIGINT\n");
	HAS(cout, "],\"ok\":false,\"error\":\"interrupted by SIGINT\"}");
	/* stderr shares the pipe: the document is the lines stdout said. */
	{
		char doc[sizeof(cout)];
		size_t n = 0;

		for (char *line = cout, *nl; *line; line = nl + 1) {
			nl = strchr(line, '\n');
			if (!nl)
				nl = line + strlen(line) - 1;
			if (strncmp(line, "nicsim-stream: ", 15) != 0) {
				memcpy(doc + n, line, (size_t)(nl + 1 - line));
				n += (size_t)(nl + 1 - line);
			}
		}
		doc[n] = 0;
		NST_TRUE(nst_json_balanced(doc));
	}
	close(cfd);
}

/* A port nobody listens on: bound, then closed. */
static uint16_t free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);

	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(s, (struct sockaddr *)&a, &len)) {
		if (s >= 0)
			close(s);
		return 0;
	}
	close(s);
	return ntohs(a.sin_port);
}

static void test_refused(void)
{
	char addr[32];
	uint16_t port = free_port();

	NST_REQUIRE(port != 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	NST_EQ(STREAM("--client", addr, "--transport", "tcp"), 1);
	HAS(out, "nicsim-stream: tcp: cannot connect to ");
	HAS(out, ": Connection refused (nothing listens there: start a server with "
		 "'nicsim-stream --server --transport tcp')\n");
	/* No table for a run that never connected. */
	NST_TRUE(strstr(out, "transport     size") == NULL);
	/* The report is still one document, saying why it ended. */
	NST_EQ(STREAM("--client", addr, "--transport", "tcp", "--json"), 1);
	HAS(out, "\"results\":[\n");
	HAS(out, "],\"ok\":false,\"error\":\"tcp: cannot connect to ");
}

/* A server that takes the connection (the kernel's backlog does) and never
 * answers: the watchdog ends the client after --timeout, saying what it
 * waited for, and the JSON report still ends. */
static void test_silent_server(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	char addr[32];
	uint64_t t0;
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	NST_REQUIRE(l >= 0);
	NST_REQUIRE(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 4) == 0 &&
		    getsockname(l, (struct sockaddr *)&a, &alen) == 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(a.sin_port));
	t0 = nst_now_ns();
	NST_EQ(STREAM("--client", addr, "--transport", "tcp", "--timeout", "1", "--json"), 1);
	NST_LT((nst_now_ns() - t0) / 1000000, WAIT_MS);
	HAS(out, "nicsim-stream: tcp: running the 64 KiB stream test with 127.0.0.1:");
	HAS(out, ": nothing has moved for 1 s, giving up (--timeout sets how long to wait)\n");
	HAS(out, "],\"ok\":false,\"error\":\"tcp: running the 64 KiB stream test with ");
	close(l);
}

/* ---- A byte flipped on the way ----------------------------------------------- */

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A child: one connection from the client to the server, relayed, with one
 * byte flipped; ends when either side closes, or after WAIT_MS of quiet. */
static int proxy_main(void *arg)
{
	const struct proxy *p = arg;
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(p->server_port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct pollfd fds[2] = {{.fd = p->listen_fd, .events = POLLIN}};
	uint64_t done[2] = {0, 0};
	static char buf[65536];

	if (poll(fds, 1, WAIT_MS) != 1)
		return 1;
	fds[0].fd = accept(p->listen_fd, NULL, NULL);
	fds[1].fd = socket(AF_INET, SOCK_STREAM, 0);
	fds[1].events = POLLIN;
	if (fds[0].fd < 0 || fds[1].fd < 0 || connect(fds[1].fd, (struct sockaddr *)&a, sizeof(a)))
		return 2;
	for (;;) {
		if (poll(fds, 2, WAIT_MS) <= 0)
			return 3;
		for (int i = 0; i < 2; i++) {
			ssize_t r;

			if (!fds[i].revents)
				continue;
			r = read(fds[i].fd, buf, sizeof(buf));
			if (r <= 0)
				return 0;
			if (i == p->dir && p->off >= done[i] && p->off < done[i] + (uint64_t)r)
				buf[p->off - done[i]] ^= (char)0xff;
			if (i == 0 && p->notify_fd >= 0 && done[0] < p->notify_after &&
			    done[0] + (uint64_t)r >= p->notify_after &&
			    write(p->notify_fd, "!", 1) != 1)
				return 4;
			done[i] += (uint64_t)r;
			if (write_all(fds[1 - i].fd, buf, (size_t)r))
				return 0;
		}
	}
}

/*
 * Run a client with args through a proxy that flips byte off of direction
 * dir, against a server of its own (--once); the client must fail with
 * client_says, the server's output must hold server_says (NULL: no
 * demand), and both end.
 */
static void flipped(int dir, uint64_t off, const char *const *args, const char *client_says,
		    const char *server_says)
{
	struct proxy p = {.dir = dir, .off = off, .notify_fd = -1};
	const char *argv[32];
	char sout[16384], addr[32];
	size_t slen, n = 0;
	int sfd, status;
	pid_t srv, prox;

	srv = start_server("--once", &p.server_port, &sfd, sout, sizeof(sout), &slen);
	NST_REQUIRE(srv > 0);
	prox = start_proxy(&p, addr, sizeof(addr));
	NST_REQUIRE(prox > 0);
	argv[n++] = "--client";
	argv[n++] = addr;
	argv[n++] = "--transport";
	argv[n++] = "tcp";
	while (*args && n < 31)
		argv[n++] = *args++;
	argv[n] = NULL;
	NST_EQ(stream_run(argv), 1);
	HAS(out, client_says);
	status = nst_wait(prox, WAIT_MS);
	NST_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The server ends with its client, having said what it saw. */
	nst_read_until(sfd, sout, sizeof(sout), &slen, NULL, WAIT_MS);
	printf("server said: %s\n", sout);
	if (server_says)
		HAS(sout, server_says);
	status = nst_wait(srv, WAIT_MS);
	NST_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	close(sfd);
}

/* Client to server: TEST, SYNC and BATCH (80 bytes each), then 4 KiB
 * messages: byte 100 of message 1 is byte 3 * 80 + 4096 + 100. */
static void test_verify_to_server(void)
{
	flipped(0, 3 * 80 + 4096 + 100,
		(const char *const[]){"--size", "4K", "--count", "4", "--warmup", "0", "--verify",
				      "--seed", "11", NULL},
		"nicsim-stream: tcp: the server 127.0.0.1:",
		"message 1 of the 4 KiB stream test from 127.0.0.1:");
	HAS(out, " found message 1 of the 4 KiB stream test different at byte 100: got 0x");
	HAS(out, ", expected 0x");
	HAS(out, " (seed 11)\n");
}

/* Server to client: READY and SYNCED (80 bytes each), then the answers of
 * a ping-pong: byte 5 of answer 2 is byte 2 * 80 + 2 * 8 + 5. */
static void test_verify_to_client(void)
{
	flipped(1, 2 * 80 + 2 * 8 + 5,
		(const char *const[]){"--pingpong", "--count", "4", "--warmup", "0", "--verify",
				      "--seed", "12", NULL},
		"nicsim-stream: tcp: answer 2 of the 8 B ping-pong test from 127.0.0.1:", NULL);
	HAS(out, " differs at byte 5: got 0x");
	HAS(out, " (seed 12)\n");
}

/* Without --verify nothing is checked: the same flip passes. */
static void test_no_verify_no_check(void)
{
	struct proxy p = {.dir = 0, .off = 3 * 80 + 4096 + 100, .notify_fd = -1};
	char sout[4096], addr[32];
	size_t slen;
	int sfd, status;
	pid_t srv, prox;

	srv = start_server("--once", &p.server_port, &sfd, sout, sizeof(sout), &slen);
	NST_REQUIRE(srv > 0);
	prox = start_proxy(&p, addr, sizeof(addr));
	NST_REQUIRE(prox > 0);
	NST_EQ(STREAM("--client", addr, "--transport", "tcp", "--size", "4K", "--count", "4",
		      "--warmup", "0"),
	       0);
	NST_EQ(nst_wait(prox, WAIT_MS), 0);
	status = nst_wait(srv, WAIT_MS);
	NST_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(sfd);
}

/* ---- The command line ----------------------------------------------------------- */

static void test_help(void)
{
	NST_EQ(STREAM("--help"), 0);
	HAS(out, "usage: nicsim-stream --server [--bind ADDR[:PORT]] [--once] [OPTIONS]\n");
	HAS(out, "       nicsim-stream --loopback [ADDR_A ADDR_B[:PORT]] [OPTIONS]\n");
	HAS(out, "  --path P ");
	HAS(out, "Examples:\n");
	HAS(out, "Exit status: 0 success");
}

static void test_bad_flags(void)
{
	static const struct {
		const char *args[8];
		const char *says;
	} cases[] = {
	    {{NULL}, "say which end to run: --server, --client ADDR or --loopback"},
	    {{"--loopback", "--bogus"}, "unknown option '--bogus'"},
	    {{"--loopback", "--bogus=3"}, "unknown option '--bogus'"},
	    {{"--loopback", "--verify", "extra"}, "unexpected argument 'extra'"},
	    {{"--loopback", "--size"}, "--size needs a value"},
	    {{"--loopback", "--size", "12Q"}, "--size 12Q: expected a size from 1 to 1G"},
	    {{"--loopback", "--size", "2G"}, "--size 2G: expected a size from 1 to 1G"},
	    {{"--loopback", "--size", "0"}, "--size 0: expected a size from 1 to 1G"},
	    {{"--loopback", "--size", "1K", "--size", "2K"}, "--size given twice"},
	    {{"--loopback", "--size", "1K", "--sweep"}, "--size and --sweep exclude each other"},
	    {{"--loopback", "--sweep", "64,,1K"}, "--sweep 64,,1K: expected sizes separated by"},
	    {{"--loopback", "--count", "0"}, "--count 0: expected a whole number from 1 to"},
	    {{"--loopback", "--count", "5000000000"},
	     "--count 5000000000: expected a whole number from 1 to 4294967296"},
	    {{"--loopback", "--count", "5", "--duration", "1"},
	     "--count and --duration exclude each other"},
	    {{"--loopback", "--duration", "1.5"}, "--duration 1.5: expected a whole number"},
	    {{"--loopback", "--timeout", "0"}, "--timeout 0: expected a whole number from 1"},
	    {{"--loopback", "--pingpong=1"}, "--pingpong takes no value"},
	    {{"--server", "--client", "1.2.3.4"},
	     "--server, --client and --loopback exclude each other"},
	    {{"--client", "nohost"}, "--client nohost: expected an IPv4 address with an optional"},
	    {{"--client", "1.2.3.4:99999"}, "--client 1.2.3.4:99999: expected a port from 0 to"},
	    {{"--client", "1.2.3.4:0"}, "--client: port 0 names no server"},
	    {{"--client", "1.2.3.4", "--once"}, "--once applies to --server only"},
	    {{"--server", "--size", "1K"}, "--size is the client's"},
	    {{"--server", "--tcp"}, "--tcp is the client's"},
	    {{"--server", "--transport", "both"}, "a server serves one transport"},
	    {{"--loopback", "198.18.0.1"}, "--loopback 198.18.0.1: give two addresses"},
	    {{"--loopback", "1.2.3.4:5", "1.2.3.5"}, "expected an address without a port"},
	    {{"--loopback", "--bind", "1.2.3.4"}, "--bind does not apply to --loopback"},
	    {{"--loopback", "--transport", "udp"}, "--transport udp: expected switch, tcp or both"},
	    {{"--loopback", "--transport", "tcp", "--tcp"}, "there is nothing to add"},
	    {{"--loopback", "--transport", "tcp", "--path", "read"},
	     "--path applies to the switch"},
	    {{"--loopback", "--transport", "tcp", "--rdma-threshold", "4K"},
	     "--rdma-threshold applies to the switch"},
	    {{"--loopback", "--path", "sideways"}, "--path sideways: expected read, write or auto"},
	    {{"--loopback", "--max-rdma", "1K"}, "--max-rdma 1K: expected a size from 4K to 1G"},
	    {{"--loopback", "--rdma-threshold", "1K"},
	     "--rdma-threshold 1K: expected a size from 2K to 1G"},
	    {{"--loopback", "198.18.0.1", "198.18.0.2:0"},
	     "--loopback 198.18.0.2:0: a switch server needs a port: the switch cannot say "
	     "which port 0 would give"},
	    {{"--server", "--bind", "198.18.0.2:0"},
	     "--bind 198.18.0.2:0: a switch server needs a port: the switch cannot say which "
	     "port 0 would give"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		NST_EQ(stream_run(cases[i].args), 2);
		HAS(out, cases[i].says);
		HAS(out, "; see 'nicsim-stream --help'\n");
		/* One line, and no run. */
		NST_TRUE(strchr(out, '\n') == out + strlen(out) - 1);
	}
}

/* ---- The switch ------------------------------------------------------------------ */

static char dir[256];
static pid_t nics[2];

/* Two NICs of this test's own on one fabric, for the switch. */
static int suite_init(void)
{
	const char *const addrs[] = {"198.18.0.1", "198.18.0.2", NULL};

	if (nst_tmpdir(dir, sizeof(dir), "stream") || nst_make_fabric(dir, addrs) < 0)
		return -1;
	nics[0] = nst_start_nic(dir, "198.18.0.1", NULL, WAIT_MS);
	nics[1] = nst_start_nic(dir, "198.18.0.2", NULL, WAIT_MS);
	return nics[0] > 0 && nics[1] > 0 ? 0 : -1;
}

static int suite_clean(void)
{
	return nst_stop_nics_clean(dir, nics, 2, WAIT_MS);
}

/* Both transports, each size, both directions checked, in one command. */
static void test_switch_beside_tcp(void)
{
	static const double sizes[] = {64, 65536, 1 << 20};
	const char *obj[8];

	NST_REQUIRE_EQ(STREAM("--dir", dir, "--loopback", "--tcp", "--sweep", "64,64K,1M",
			      "--count", "20", "--verify", "--json"),
		       0);
	NST_TRUE(nst_json_balanced(out));
	NST_REQUIRE_EQ(nst_stream_results(out, obj, 8), 6);
	for (size_t i = 0; i < 6; i++) {
		check_result(obj[i], i % 2 ? "tcp" : "switch", "stream", sizes[i / 2], 20, true);
		if (i % 2)
			continue;
		NST_TRUE(nst_json_value_is(obj[i], "to_server", "\"read\"") ||
			 nst_json_value_is(obj[i], "to_server", "\"write\""));
		NST_TRUE(nst_json_field(obj[i], "large_sends") &&
			 nst_json_field(obj[i], "registrations"));
	}
	NST_REQUIRE_EQ(STREAM("--dir", dir, "--loopback", "--tcp", "--pingpong", "--count", "100",
			      "--verify", "--json"),
		       0);
	NST_REQUIRE_EQ(nst_stream_results(out, obj, 8), 2);
	check_result(obj[0], "switch", "pingpong", 8, 100, true);
	check_result(obj[1], "tcp", "pingpong", 8, 100, true);
	/* --path write: neither side reads, and the report says so. */
	NST_REQUIRE_EQ(STREAM("--dir", dir, "--loopback", "--path", "write", "--size", "1M",
			      "--count", "8", "--verify", "--json"),
		       0);
	NST_REQUIRE_EQ(nst_stream_results(out, obj, 8), 1);
	NST_TRUE(nst_json_value_is(obj[0], "to_server", "\"write\"") &&
		 nst_json_value_is(obj[0], "to_client", "\"write\""));
}

/* A client with no NIC to connect from, or to a NIC that does not exist:
 * each error says what to do. */
static void test_no_such_nic(void)
{
	char empty[300];

	snprintf(empty, sizeof(empty), "%s/empty", dir);
	NST_REQUIRE(mkdir(empty, 0700) == 0 || errno == EEXIST);
	NST_EQ(STREAM("--dir", empty, "--client", "198.18.0.2"), 1);
	HAS(out, "cannot connect to 198.18.0.2:7472: Cannot assign requested address (no NIC "
		 "to connect from in ");
	HAS(out, ": start NICs with `nicsim up`, or point --dir or NICSIM_DIR at the run "
		 "directory of running ones)\n");
	NST_EQ(STREAM("--dir", "/nonexistent/nicsim-run", "--client", "198.18.0.2"), 1);
	HAS(out, "(the run directory /nonexistent/nicsim-run does not exist: start NICs with "
		 "`nicsim up`, or point --dir or NICSIM_DIR at the run directory of running "
		 "ones)\n");
	NST_EQ(STREAM("--dir", dir, "--client", "198.18.0.9"), 1);
	HAS(out, "cannot connect to 198.18.0.9:7472: No route to host (no NIC with that "
		 "address is on this side's fabric: `nicsim link show` lists its ports)\n");
	rmdir(empty);
}

/* The separate server and client of the examples: `--server --bind ADDR`
 * with no port listens on 7472, where `--client ADDR` connects. */
static void test_server_bind_default_port(void)
{
	const char *sargv[] = {nst_bin("nicsim-stream"),
			       "--dir",
			       dir,
			       "--server",
			       "--bind",
			       "198.18.0.2",
			       "--once",
			       NULL};
	char sout[4096] = "";
	size_t slen = 0;
	int sfd, status;
	pid_t srv = nst_spawn_output(sargv, NULL, &sfd);

	NST_REQUIRE(srv > 0);
	if (!nst_read_until(sfd, sout, sizeof(sout), &slen, " (switch)\n", RUN_MS))
		printf("server said: %s\n", sout);
	HAS(sout, "listening on 198.18.0.2:7472 (switch)\n");
	NST_EQ(STREAM("--dir", dir, "--client", "198.18.0.2", "--bind", "198.18.0.1", "--size",
		      "1M", "--count", "5", "--verify"),
	       0);
	if (!strstr(sout, "listening on 198.18.0.2:7472"))
		nst_stop(srv, WAIT_MS);
	status = nst_wait(srv, RUN_MS);
	if (status == -ETIMEDOUT)
		status = nst_stop(srv, WAIT_MS);
	nst_read_until(sfd, sout, sizeof(sout), &slen, NULL, WAIT_MS);
	printf("server said: %s\n", sout);
	NST_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(sfd);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"help", test_help},
	    {"bad_flags", test_bad_flags},
	    {"tcp_sweep_verify_json", test_tcp_sweep_verify_json},
	    {"tcp_pingpong", test_tcp_pingpong},
	    {"tcp_duration", test_tcp_duration},
	    {"text_table", test_text_table},
	    {"server_and_reset", test_server_and_reset},
	    {"server_killed_midway", test_server_killed_midway},
	    {"interrupted", test_interrupted},
	    {"refused", test_refused},
	    {"silent_server", test_silent_server},
	    {"verify_to_server", test_verify_to_server},
	    {"verify_to_client", test_verify_to_client},
	    {"no_verify_no_check", test_no_verify_no_check},
	    {"switch_beside_tcp", test_switch_beside_tcp},
	    {"server_bind_default_port", test_server_bind_default_port},
	    {"no_such_nic", test_no_such_nic},
	    {NULL, NULL},
	};

	/* The proxy writes to sockets its peers may have closed. */
	signal(SIGPIPE, SIG_IGN);
	return nst_main(argc, argv, "stream_tool", tests, suite_init, suite_clean);
}
