/*
 * `cmake --install` into a private prefix, then the guide's way from there
 * (docs/spi-guide.md, "Build and run"): the installed files are where the
 * guide says; the guide's program, installed as an example's source, builds
 * out of tree with `cc $(pkg-config --cflags --libs nicsim-provider)` and an
 * rpath from pkg-config's libdir; the installed `nicsim up` starts the
 * installed nicsimd; the program moves its 16 MiB both ways with every
 * checksum matching.  The switch the same way: its library, header and
 * nicsim-switch.pc are installed; a stream program (tests/install/
 * stream_echo.c: an echo server and client in one process) builds out of
 * tree with `cc $(pkg-config --cflags --libs nicsim-switch)` and
 * --as-needed, keeps libnicsimsp among its own dependencies ahead of the C
 * library (the provider's memory monitor must come first), and gets every
 * byte echoed back in order.  The installed `nicsim down` stops the NICs.
 *
 * Everything lives in the test's private directory; every wait is bounded;
 * the NICs `nicsim up` started are stopped by `nicsim down`, and killed by
 * pid if that failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nstest.h"

#ifndef NICSIM_CMAKE
#error \
    "NICSIM_CMAKE, NICSIM_BUILD_DIR, NICSIM_CC, NICSIM_TEST_CFLAGS, NICSIM_LIBDIR, NICSIM_ECHO_SRC: see tests/CMakeLists.txt"
#endif

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define WAIT_MS 120000

static char dir[256], prefix[300], run[300], work[300];
static char out[65536];
static pid_t nics[2];

static const char *path_in(char *buf, size_t size, const char *base, const char *rel)
{
	snprintf(buf, size, "%s/%s", base, rel);
	return buf;
}

/* The pids of the NICs `nicsim up` reported ("nic ADDR pid N ..."). */
static void note_nics(const char *text)
{
	size_t n = 0;

	for (const char *p = text; (p = strstr(p, "nic 198.18.0.")) && n < 2; p++) {
		const char *pid = strstr(p, " pid ");

		if (pid)
			nics[n++] = (pid_t)atoi(pid + 5);
	}
}

/* Run a shell command line (bounded), and show it with its result and output. */
static int sh(const char *line, char *buf, size_t size)
{
	const char *argv[] = {"/bin/sh", "-c", line, NULL};
	int rc = nst_run(argv, buf, size, WAIT_MS);

	printf("\n  $ %s -> %d\n%s", line, rc, buf);
	return rc;
}

/*
 * The switch from the installed prefix (its NICs are up): pkg-config's
 * flags, the stream program built with them under --as-needed, its
 * dependencies in the order the provider needs, and its run.
 */
static void stream_echo(void)
{
	char line[4096], want[1024];
	const char *sp, *c;
	int rc;

	NST_REQUIRE_EQ(sh("pkg-config --cflags --libs nicsim-switch", out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "-I%s/include -L%s/" NICSIM_LIBDIR " -lnicsimsw -Wl,--push-state,--no-as-needed "
		 "-lnicsimsp -Wl,--pop-state",
		 prefix, prefix);
	NST_CHECK_(strstr(out, want) != NULL, CU_FALSE,
		   "pkg-config says \"%.240s\", want \"%.240s\"", out, want);
	snprintf(line, sizeof(line),
		 "cd '%s' && cp '" NICSIM_ECHO_SRC "' . && "
		 "$CC -std=c11 -Wall -Wextra -Werror -pthread -o stream_echo stream_echo.c "
		 "-Wl,--as-needed $(pkg-config --cflags --libs nicsim-switch) "
		 "-Wl,-rpath,\"$(pkg-config --variable=libdir nicsim-switch)\" 2>&1",
		 work);
	NST_REQUIRE_EQ(sh(line, out, sizeof(out)), 0);
	/* It calls nothing of libnicsimsp, yet needs it before the C library. */
	snprintf(line, sizeof(line), "readelf -d '%s/stream_echo'", work);
	NST_REQUIRE_EQ(sh(line, out, sizeof(out)), 0);
	NST_TRUE(strstr(out, "[libnicsimsw.so.0]") != NULL);
	sp = strstr(out, "[libnicsimsp.so.0]");
	c = strstr(out, "[libc.so.6]");
	NST_CHECK_(sp && c && sp < c, CU_FALSE,
		   "libnicsimsp.so.0 is not NEEDED ahead of libc.so.6:\n%.400s", out);
	/* Linked with -lnicsimsw alone, it still finds libnicsimsp: the
	 * installed library says where (its RUNPATH), as a program's own
	 * RUNPATH does not reach its libraries' needs. */
	snprintf(line, sizeof(line),
		 "cd '%s' && $CC -std=c11 -pthread -o stream_echo_alone stream_echo.c "
		 "$(pkg-config --cflags nicsim-switch) -L\"$(pkg-config --variable=libdir "
		 "nicsim-switch)\" -lnicsimsw "
		 "-Wl,-rpath,\"$(pkg-config --variable=libdir nicsim-switch)\" 2>&1 && "
		 "ldd ./stream_echo_alone",
		 work);
	NST_REQUIRE_EQ(sh(line, out, sizeof(out)), 0);
	NST_CHECK_(strstr(out, "libnicsimsp.so.0 => /") != NULL, CU_FALSE,
		   "linked with -lnicsimsw alone, libnicsimsp is not found:\n%.400s", out);
	snprintf(line, sizeof(line),
		 "cd '%s' && NICSIM_DIR='%s' ./stream_echo " ADDR_B " " ADDR_A " 7001", work, run);
	rc = sh(line, out, sizeof(out));
	NST_EQ(rc, 0);
	NST_CHECK_(strstr(out, "1048581 bytes: back\necho: ") != NULL &&
		       strstr(out, " bytes back in order\n") != NULL,
		   CU_FALSE, "the echo's output:\n%.400s", out);
}

static void test_install_and_push(void)
{
	static const char *const installed[] = {
	    "bin/nicsimd",
	    "bin/nicsim",
	    "bin/nicsim-push",
	    "bin/nicsim-pingpong",
	    "bin/nicsim-regdemo",
	    "bin/nicsim-agent",
	    "bin/nicsim-stream",
	    "include/ws2san.h",
	    "include/nicsim_provider.h",
	    "include/nicsim_switch.h",
	    NICSIM_LIBDIR "/libnicsimsp.so",
	    NICSIM_LIBDIR "/libnicsimsp.so.0",
	    NICSIM_LIBDIR "/libnicsimsw.so",
	    NICSIM_LIBDIR "/libnicsimsw.so.0",
	    NICSIM_LIBDIR "/pkgconfig/nicsim-provider.pc",
	    NICSIM_LIBDIR "/pkgconfig/nicsim-switch.pc",
	    "share/doc/nicsim/README.md",
	    "share/doc/nicsim/docs/spi-guide.md",
	    "share/doc/nicsim/docs/registration-cache.md",
	    "share/doc/nicsim/examples/push.c",
	};
	static const char *const internal[] = {"include/nicsim_host.h", "include/nicsim_abi.h",
					       "include/nss_proto.h", "include/nss_conn.h",
					       "include/sw.h"};
	const char *cmake[] = {NICSIM_CMAKE, "--install", NICSIM_BUILD_DIR,
			       "--prefix",   prefix,      NULL};
	char path[PATH_MAX], line[4096], exe[PATH_MAX], want[PATH_MAX];
	struct stat st;
	ssize_t n;
	int rc;

	/* Install. */
	rc = nst_run(cmake, out, sizeof(out), WAIT_MS);
	NST_CHECK_(rc == 0, CU_TRUE, "cmake --install -> %d:\n%.240s", rc, out);
	for (size_t i = 0; i < sizeof(installed) / sizeof(installed[0]); i++)
		NST_CHECK_(stat(path_in(path, sizeof(path), prefix, installed[i]), &st) == 0,
			   CU_FALSE, "%.240s installed", path);
	for (size_t i = 0; i < sizeof(internal) / sizeof(internal[0]); i++)
		NST_CHECK_(stat(path_in(path, sizeof(path), prefix, internal[i]), &st) != 0,
			   CU_FALSE, "%.240s is internal, not installed", path);

	/* The scenario host agent runs from the prefix: its rpath finds the library. */
	snprintf(line, sizeof(line), "echo '1 hello' | '%s/bin/nicsim-agent'", prefix);
	NST_EQ(sh(line, out, sizeof(out)), 0);
	NST_CHECK_(strstr(out, "1 ok pid=") != NULL, CU_FALSE, "the installed agent says %.240s",
		   out);

	/* nicsim-stream runs from the prefix (over TCP, which needs no NIC). */
	snprintf(line, sizeof(line),
		 "'%s/bin/nicsim-stream' --loopback --transport tcp --count 5 --verify --json",
		 prefix);
	NST_EQ(sh(line, out, sizeof(out)), 0);
	NST_CHECK_(strstr(out, "],\"ok\":true}") != NULL, CU_FALSE,
		   "the installed nicsim-stream says %.240s", out);

	/* pkg-config names the prefix installed to, with no rpath. */
	snprintf(path, sizeof(path), "%s/" NICSIM_LIBDIR "/pkgconfig", prefix);
	setenv("PKG_CONFIG_PATH", path, 1);
	setenv("CC", NICSIM_CC " " NICSIM_TEST_CFLAGS, 1);
	NST_REQUIRE_EQ(sh("pkg-config --cflags --libs nicsim-provider", out, sizeof(out)), 0);
	snprintf(line, sizeof(line), "-I%s/include -L%s/" NICSIM_LIBDIR " -lnicsimsp", prefix,
		 prefix);
	NST_CHECK_(strstr(out, line) != NULL, CU_FALSE,
		   "pkg-config says \"%.240s\", want \"%.240s\"", out, line);
	NST_TRUE(strstr(out, "rpath") == NULL);

	/* The guide's compile line, out of tree, on the installed source. */
	snprintf(line, sizeof(line),
		 "cd '%s' && cp '%s/share/doc/nicsim/examples/push.c' . && "
		 "$CC -o push push.c $(pkg-config --cflags --libs nicsim-provider) "
		 "-Wl,-rpath,\"$(pkg-config --variable=libdir nicsim-provider)\"",
		 work, prefix);
	NST_REQUIRE_EQ(sh(line, out, sizeof(out)), 0);
	/* Strict C11 too, as the project builds it: the program asks for the
	 * POSIX and Linux names it uses itself, not through -std=gnu*. */
	snprintf(line, sizeof(line),
		 "cd '%s' && $CC -std=c11 -o push-c11 push.c "
		 "$(pkg-config --cflags --libs nicsim-provider) 2>&1",
		 work);
	rc = sh(line, out, sizeof(out));
	NST_CHECK_(rc == 0, CU_FALSE, "push.c with -std=c11 -> %d:\n%.400s", rc, out);

	/* The installed nicsim up starts the installed nicsimd. */
	snprintf(line, sizeof(line), "'%s/bin/nicsim' --dir '%s' up", prefix, run);
	rc = sh(line, out, sizeof(out));
	note_nics(out);
	NST_REQUIRE_EQ(rc, 0);
	NST_REQUIRE(nics[0] > 0 && nics[1] > 0);
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)nics[0]);
	n = readlink(path, exe, sizeof(exe) - 1);
	NST_REQUIRE(n > 0);
	exe[n] = '\0';
	path_in(want, sizeof(want), prefix, "bin/nicsimd");
	NST_CHECK_(!strcmp(exe, want), CU_FALSE, "nicsim up started %.240s, want %.240s", exe,
		   want);

	/* The guide's run: server in the background, client, wait. */
	snprintf(line, sizeof(line),
		 "cd '%s' && export NICSIM_DIR='%s' && "
		 "{ ./push server " ADDR_B " 7000 > server.out 2>&1 & } && "
		 "./push client " ADDR_A " " ADDR_B " 7000 && wait $! && echo SERVER: && "
		 "cat server.out",
		 work, run);
	rc = sh(line, out, sizeof(out));
	NST_EQ(rc, 0);
	NST_CHECK_(strstr(out, "RDMA READ: the server's checksum ") != NULL, CU_FALSE,
		   "the client's check in:\n%.240s", out);
	NST_CHECK_(strstr(out, "SERVER:\nlistening on " ADDR_B ":7000\nconnected\n"
			       "RDMA WRITE: checksum ") != NULL,
		   CU_FALSE, "the server's output in:\n%.240s", out);
	NST_TRUE(strstr(out, "MISMATCH") == NULL);

	stream_echo();

	/* The installed nicsim down stops them. */
	snprintf(line, sizeof(line), "'%s/bin/nicsim' --dir '%s' down", prefix, run);
	NST_EQ(sh(line, out, sizeof(out)), 0);
	NST_TRUE(!nst_pid_alive(nics[0]) && !nst_pid_alive(nics[1]));
}

static int init(void)
{
	if (nst_tmpdir(dir, sizeof(dir), "install") < 0)
		return -1;
	snprintf(prefix, sizeof(prefix), "%s/prefix", dir);
	snprintf(run, sizeof(run), "%s/run", dir);
	snprintf(work, sizeof(work), "%s/work", dir);
	unsetenv("NICSIM_DIR");
	unsetenv("NICSIM_BIN_DIR");
	return mkdir(run, 0700) || mkdir(work, 0700) ? -1 : 0;
}

static int clean(void)
{
	/* Whatever nicsim down did not stop (it failed, or never ran). */
	nst_kill_nicsimds(nics, 2, 10000, "test_install");
	nst_done_with_dir(dir);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"install_and_push", test_install_and_push},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "install", tests, init, clean);
}
