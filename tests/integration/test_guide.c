/*
 * The guide's program (docs/spi-guide.md; the build extracts it into
 * nicsim-push) runs as the guide says: a server on one NIC, a client on
 * another, RDMA WRITE then RDMA READ of 16 MiB, every checksum matching,
 * both exiting 0; and it says what failed when there is no NIC to bind to.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nstest.h"
#include "nstnic.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define WAIT_MS 60000

static char dir[256];
static pid_t nic_a = -1, nic_b = -1;

/* Start nicsim-push with args in the test's run directory; its output (stdout
 * and stderr) comes through *out_fd.  The pid, or a negative errno. */
static pid_t start_push(const char *const *args, int *out_fd)
{
	static char env_dir[300];
	const char *argv[8] = {nst_bin("nicsim-push")};
	size_t n = 1;

	for (; *args && n < 7; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	snprintf(env_dir, sizeof(env_dir), "NICSIM_DIR=%s", dir);
	return nst_spawn_output(argv, (const char *const[]){env_dir, NULL}, out_fd);
}

static void expect(const char *who, const char *out, const char *what)
{
	NST_CHECK_(strstr(out, what) != NULL, CU_FALSE, "%s says \"%s\"; its output:\n%s", who,
		   what, out);
}

static int count(const char *s, const char *what)
{
	int n = 0;

	for (; (s = strstr(s, what)); s++)
		n++;
	return n;
}

static void test_push_write_then_read(void)
{
	char sout[8192] = "", cout[8192] = "";
	size_t slen = 0, clen = 0;
	int sfd = -1, cfd = -1;
	pid_t srv, cli;

	srv = start_push((const char *const[]){"server", ADDR_B, "7000", NULL}, &sfd);
	NST_REQUIRE(srv > 0);
	/* The client would retry while nobody listens; the test waits anyway. */
	NST_CHECK_(nst_read_until(sfd, sout, sizeof(sout), &slen, "listening on", WAIT_MS), CU_TRUE,
		   "the server did not listen; its output:\n%s", sout);
	cli = start_push((const char *const[]){"client", ADDR_A, ADDR_B, "7000", NULL}, &cfd);
	NST_REQUIRE(cli > 0);
	NST_TRUE(nst_read_until(cfd, cout, sizeof(cout), &clen, NULL, WAIT_MS));
	NST_TRUE(nst_read_until(sfd, sout, sizeof(sout), &slen, NULL, WAIT_MS));
	close(cfd);
	close(sfd);
	NST_EQ(nst_wait(cli, WAIT_MS), 0);
	NST_EQ(nst_wait(srv, WAIT_MS), 0);
	printf("\n  server:\n%s  client:\n%s", sout, cout);
	expect("the server", sout, "connected\n");
	expect("the server", sout, "RDMA WRITE: checksum ");
	expect("the server", sout, "RDMA READ: 16777216 bytes in 16 chunks");
	expect("the client", cout, "RDMA WRITE: 16777216 bytes in 16 chunks");
	expect("the client", cout, "RDMA READ: the server's checksum ");
	/* Two checks on the server, one on the client, all matching. */
	NST_EQ(count(sout, ": match\n"), 2);
	NST_EQ(count(cout, ": match\n"), 1);
	NST_EQ(count(sout, "MISMATCH") + count(cout, "MISMATCH"), 0);
	expect("the client", cout, "\ndone\n");
	expect("the server", sout, "\ndone\n");
}

/* No NIC at the address: the call that failed and its error, exit 1. */
static void test_no_nic_names_the_call(void)
{
	char out[4096] = "";
	size_t len = 0;
	int fd = -1, status;
	pid_t pid = start_push((const char *const[]){"server", "198.18.0.9", "7001", NULL}, &fd);

	NST_REQUIRE(pid > 0);
	NST_TRUE(nst_read_until(fd, out, sizeof(out), &len, NULL, WAIT_MS));
	close(fd);
	status = nst_wait(pid, WAIT_MS);
	NST_TRUE(WIFEXITED(status));
	NST_EQ(WEXITSTATUS(status), 1);
	expect("push", out, "push: WSPBind failed: WSAEADDRNOTAVAIL (10049)");
}

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, NULL};

	if (nst_tmpdir(dir, sizeof(dir), "guide") < 0 || nst_make_fabric(dir, addrs) < 0)
		return -1;
	nic_a = nst_start_nic(dir, ADDR_A, NULL, WAIT_MS);
	nic_b = nst_start_nic(dir, ADDR_B, NULL, WAIT_MS);
	return nic_a > 0 && nic_b > 0 ? 0 : -1;
}

static int clean(void)
{
	const pid_t pids[] = {nic_a, nic_b};

	return nst_stop_nics_clean(dir, pids, 2, WAIT_MS);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"push_write_then_read", test_push_write_then_read},
	    {"no_nic_names_the_call", test_no_nic_names_the_call},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "guide", tests, init, clean);
}
