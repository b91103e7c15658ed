/*
 * nicsim-pingpong, the example, end to end: a short run between two NICs
 * succeeds without a single RNR NAK (the client's hello, sent as soon as it
 * is connected, is held by the server's NIC until the server posts its
 * first receive), and a run whose server is killed in the middle ends with a
 * clear error and exit status 1, having left no overlapped operation
 * pending on memory it no longer owns and nothing leaked (under
 * AddressSanitizer, a receive completed by WSPCleanup into a returned stack
 * frame, or a leak, is reported, and makes the client exit with status 86
 * here).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nstest.h"
#include "nicsim_mgmt.h"
#include "nstnic.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define WAIT_MS 20000

static char dir[256], sock_a[300], sock_b[300];
static pid_t nic_a = -1, nic_b = -1;
static unsigned next_port = 7500;

/*
 * Start nicsim-pingpong with args (NULL-terminated), in the test's run
 * directory; its stdout and stderr go to *out_fd (a pipe).  The pid.
 */
static pid_t start_pingpong(const char *const *args, int *out_fd)
{
	static char asan_opts[600];
	const char *asan = getenv("ASAN_OPTIONS");
	const char *argv[16];
	size_t n = 0;

	argv[n++] = nst_bin("nicsim-pingpong");
	argv[n++] = "--dir";
	argv[n++] = dir;
	for (; *args && n < 15; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	/* An AddressSanitizer report must not pass for the example's own
	 * failure; an operation completed into a returned frame is one. */
	snprintf(asan_opts, sizeof(asan_opts),
		 "ASAN_OPTIONS=%s%sexitcode=86:detect_stack_use_after_return=1", asan ? asan : "",
		 asan ? ":" : "");
	return nst_spawn_output(argv, (const char *const[]){asan_opts, NULL}, out_fd);
}

/* RNR NAKs received by either NIC so far. */
static uint64_t rnr_naks(void)
{
	return nst_nic_stat(sock_a, NST_STAT(rnr_naks)) + nst_nic_stat(sock_b, NST_STAT(rnr_naks));
}

static void test_short_run(void)
{
	char port[16], out[8192] = "", sout[8192] = "";
	size_t len = 0, slen = 0;
	int fd, sfd;
	pid_t srv, cli;
	uint64_t rnr0 = rnr_naks();

	snprintf(port, sizeof(port), "%u", next_port++);
	srv = start_pingpong(
	    (const char *const[]){"--server", "--addr", ADDR_B, "--port", port, NULL}, &sfd);
	NST_REQUIRE(srv > 0);
	/* The client tries until the server listens: refused until then. */
	for (int tries = 0; tries < 200; tries++) {
		int status;

		cli = start_pingpong((const char *const[]){"--client", "--peer", ADDR_B, "--addr",
							   ADDR_A, "--port", port, "--iters", "100",
							   "--rdma-size", "65536", NULL},
				     &fd);
		NST_REQUIRE(cli > 0);
		len = 0;
		nst_read_until(fd, out, sizeof(out), &len, NULL, WAIT_MS);
		close(fd);
		status = nst_wait(cli, WAIT_MS);
		if (!strstr(out, "WSAECONNREFUSED")) {
			NST_EQ(status, 0);
			break;
		}
		poll(NULL, 0, 10);
	}
	NST_TRUE(strstr(out, "RDMA write checksum matches") != NULL);
	nst_read_until(sfd, sout, sizeof(sout), &slen, NULL, WAIT_MS);
	close(sfd);
	NST_EQ(nst_wait(srv, WAIT_MS), 0);
	if (!strstr(out, "checksum matches"))
		fprintf(stderr, "\nclient:\n%s\nserver:\n%s\n", out, sout);
	/* Every message found its receive, or (the first) the NIC's hold. */
	NST_EQ_U(rnr_naks(), rnr0);
}

static void test_server_killed(void)
{
	char port[16], out[65536] = "";
	size_t len = 0;
	int fd = -1, sfd, status = -1;
	pid_t srv, cli = -1;
	bool connected = false;

	snprintf(port, sizeof(port), "%u", next_port++);
	srv = start_pingpong(
	    (const char *const[]){"--server", "--addr", ADDR_B, "--port", port, NULL}, &sfd);
	NST_REQUIRE(srv > 0);
	for (int tries = 0; tries < 200 && !connected; tries++) {
		cli = start_pingpong((const char *const[]){"--client", "--peer", ADDR_B, "--addr",
							   ADDR_A, "--port", port, "--iters",
							   "10000000", NULL},
				     &fd);
		NST_REQUIRE(cli > 0);
		len = 0;
		connected = nst_read_until(fd, out, sizeof(out), &len, "connected to", WAIT_MS);
		if (!connected) {
			close(fd);
			nst_wait(cli, WAIT_MS);
			poll(NULL, 0, 10);
		}
	}
	NST_REQUIRE(connected);
	/* Mid-run (ten million round trips take minutes): the server goes. */
	NST_EQ(kill(srv, SIGKILL), 0);
	nst_wait(srv, WAIT_MS);
	nst_read_until(fd, out, sizeof(out), &len, NULL, WAIT_MS);
	close(fd);
	close(sfd);
	status = nst_wait(cli, WAIT_MS);
	if (status == -ETIMEDOUT)
		nst_stop(cli, WAIT_MS);
	printf("\n    client: %s", strstr(out, "nicsim-pingpong:") ? strstr(out, "nicsim-pingpong:")
								   : "(no error line) ");
	NST_TRUE(status >= 0 && WIFEXITED(status));
	NST_EQ(WEXITSTATUS(status), 1);
	NST_TRUE(strstr(out, "nicsim-pingpong: ") != NULL);
	NST_TRUE(strstr(out, "AddressSanitizer") == NULL);
	if (strstr(out, "AddressSanitizer"))
		fprintf(stderr, "\n%s\n", out);
}

/* With no NIC at --addr, client and server say so once, with what to do,
 * and never report a failure with "no error". */
static void test_no_nic(void)
{
	static char out[8192];
	const char *cli[] = {nst_bin("nicsim-pingpong"),
			     "--dir",
			     dir,
			     "--client",
			     "--peer",
			     ADDR_B,
			     "--addr",
			     "198.18.0.9",
			     "--iters",
			     "1",
			     NULL};
	const char *srv[] = {
	    nst_bin("nicsim-pingpong"), "--dir", dir, "--server", "--addr", "198.18.0.9", NULL};
	const char *const *runs[] = {cli, srv};

	for (size_t i = 0; i < 2; i++) {
		int rc = nst_run(runs[i], out, sizeof(out), WAIT_MS);

		printf("\n  %s -> %d\n%s", i ? "server" : "client", rc, out);
		NST_EQ(rc, 1);
		NST_CHECK_(strstr(out, "no NIC with address 198.18.0.9 in ") != NULL, CU_FALSE,
			   "output: %.400s", out);
		NST_CHECK_(strstr(out, "nicsim up") != NULL, CU_FALSE, "output: %.400s", out);
		NST_CHECK_(strstr(out, "no error") == NULL, CU_FALSE, "output: %.400s", out);
		NST_CHECK_(strstr(out, "WSAEADDRNOTAVAIL") == NULL, CU_FALSE, "output: %.400s",
			   out);
	}
}

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, NULL};

	if (nst_tmpdir(dir, sizeof(dir), "pingpong") < 0 || nst_make_fabric(dir, addrs) < 0)
		return -1;
	snprintf(sock_a, sizeof(sock_a), "%s/nic-" ADDR_A ".sock", dir);
	snprintf(sock_b, sizeof(sock_b), "%s/nic-" ADDR_B ".sock", dir);
	nic_a = nst_start_nic(dir, ADDR_A, NULL, WAIT_MS);
	nic_b = nst_start_nic(dir, ADDR_B, NULL, WAIT_MS);
	return nic_a > 0 && nic_b > 0 ? 0 : -1;
}

static int clean(void)
{
	int rc = 0;

	if (!nst_stop_clean(nic_a, WAIT_MS) || !nst_stop_clean(nic_b, WAIT_MS))
		rc = -1;
	nst_done_with_dir(dir);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"short_run", test_short_run},
	    {"server_killed", test_server_killed},
	    {"no_nic", test_no_nic},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "pingpong", tests, init, clean);
}
