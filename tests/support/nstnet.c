/*
 * Test networks in network namespaces (nstnet.h).
 */
#include "nstnet.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nstest.h"

#define NETNS_DIR "/run/netns"

static struct nst_net *live[4]; /* removed at exit */

/* Remove namespace name as `ip netns del` does: its mount, then its file. */
static void ns_remove(const char *name)
{
	char path[sizeof(NETNS_DIR) + 256 + 1];

	if (!name[0])
		return;
	snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
	umount2(path, MNT_DETACH);
	unlink(path);
}

/* Namespaces of test processes that are gone ("nst-<pid>-..."). */
static void remove_stale(void)
{
	DIR *d = opendir(NETNS_DIR);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char *end;
		long pid;

		if (strncmp(e->d_name, "nst-", 4) != 0)
			continue;
		pid = strtol(e->d_name + 4, &end, 10);
		/* Its test process is gone (ESRCH; EPERM: it lives). */
		if (pid > 0 && *end == '-' && kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			ns_remove(e->d_name);
	}
	closedir(d);
}

/* Run argv (NULL-terminated); its exit status or a negative errno.  Its
 * output is kept and shown only when it fails. */
static int run(const char *const *argv)
{
	/* What it prints, kept in memory (dup2 makes the child's copy keep it). */
	int fd = memfd_create("nstnet-out", MFD_CLOEXEC), status;
	pid_t pid;

	if (fd < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(fd);
		return -errno;
	}
	if (pid == 0) {
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	status = nst_wait(pid, 30000);
	if (status < 0) {
		kill(pid, SIGKILL);
		nst_wait(pid, 5000);
		close(fd);
		return -ETIMEDOUT;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		char buf[2048];
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

		fprintf(stderr, "nstnet: failed (status 0x%x):", status);
		for (const char *const *a = argv; *a; a++)
			fprintf(stderr, " %s", *a);
		fprintf(stderr, "\n%.*s", n > 0 ? (int)n : 0, buf);
	}
	close(fd);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -EINTR;
}

int nst_net_ip(const char *ns, const char *const *argv)
{
	const char *a[32] = {"ip", "-n", ns};
	size_t n = 3;

	for (; *argv && n < 31; argv++)
		a[n++] = *argv;
	a[n] = NULL;
	return run(a);
}

#define IP(ns, ...) nst_net_ip((ns), (const char *const[]){__VA_ARGS__, NULL})

bool nst_net_available(char *why, size_t size)
{
	static const char *const probe[] = {"ip", "-V", NULL};

	if (geteuid() != 0) {
		snprintf(why, size, "not root: network namespaces need CAP_SYS_ADMIN");
		return false;
	}
	if (run(probe) != 0) {
		snprintf(why, size, "iproute2's ip is not installed");
		return false;
	}
	return true;
}

static int ns_add(char *name)
{
	const char *const argv[] = {"ip", "netns", "add", name, NULL};
	int rc = run(argv);

	if (rc)
		return rc < 0 ? rc : -EIO;
	nst_guard_netns(name);
	return 0;
}

static void at_exit(void)
{
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (live[i])
			nst_net_down(live[i]);
}

static int link_host(struct nst_net *net, unsigned i, const char *peer_ns, const char *peer,
		     const char *mtu)
{
	char addr[32];

	snprintf(addr, sizeof(addr), "198.18.0.%u/15", i);
	if (IP(peer_ns, "link", "add", peer, "mtu", mtu, "type", "veth", "peer", "name", "eth0",
	       "mtu", mtu, "netns", net->host[i]) ||
	    IP(net->host[i], "addr", "add", addr, "dev", "eth0") ||
	    IP(net->host[i], "link", "set", "eth0", "up") ||
	    IP(net->host[i], "link", "set", "lo", "up"))
		return -EIO;
	return 0;
}

int nst_net_up(struct nst_net *net, unsigned n, unsigned mtu)
{
	static bool registered;
	char prefix[32], m[16];
	uint64_t seed = nst_now_ns() ^ ((uint64_t)getpid() << 32);
	int rc = 0;

	memset(net, 0, sizeof(*net));
	if (n < 1 || n > NST_NET_MAX)
		return -EINVAL;
	remove_stale();
	snprintf(prefix, sizeof(prefix), "nst-%d-%06x", (int)getpid(),
		 (unsigned)(nst_splitmix64(&seed) & 0xffffff));
	snprintf(m, sizeof(m), "%u", mtu ? mtu : 1500);
	net->n = n;
	for (unsigned i = 1; i <= n && !rc; i++) {
		snprintf(net->host[i], NST_NET_NAME, "%s-h%u", prefix, i);
		rc = ns_add(net->host[i]);
	}
	if (!registered) {
		atexit(at_exit);
		registered = true;
	}
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
		if (!live[i]) {
			live[i] = net;
			break;
		}
	}
	net->up = true;
	if (rc)
		goto fail;
	if (n == 2) {
		/* Two hosts: one cable, no bridge. */
		if (IP(net->host[1], "link", "add", "eth0", "mtu", m, "type", "veth", "peer",
		       "name", "eth0", "mtu", m, "netns", net->host[2]) ||
		    IP(net->host[1], "addr", "add", "198.18.0.1/15", "dev", "eth0") ||
		    IP(net->host[2], "addr", "add", "198.18.0.2/15", "dev", "eth0"))
			goto fail;
		for (unsigned i = 1; i <= 2; i++)
			if (IP(net->host[i], "link", "set", "eth0", "up") ||
			    IP(net->host[i], "link", "set", "lo", "up"))
				goto fail;
		return 0;
	}
	snprintf(net->bridge, NST_NET_NAME, "%s-br", prefix);
	if (ns_add(net->bridge) || IP(net->bridge, "link", "add", "br0", "type", "bridge") ||
	    IP(net->bridge, "link", "set", "br0", "up"))
		goto fail;
	for (unsigned i = 1; i <= n; i++) {
		char port[16];

		snprintf(port, sizeof(port), "p%u", i);
		if (link_host(net, i, net->bridge, port, m) ||
		    IP(net->bridge, "link", "set", port, "master", "br0") ||
		    IP(net->bridge, "link", "set", port, "up"))
			goto fail;
	}
	return 0;
fail:
	nst_net_down(net);
	return -EIO;
}

void nst_net_down(struct nst_net *net)
{
	if (!net->up)
		return;
	for (unsigned i = 1; i <= net->n; i++)
		ns_remove(net->host[i]);
	ns_remove(net->bridge);
	net->up = false;
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (live[i] == net)
			live[i] = NULL;
}

int nst_net_enter(const char *ns)
{
	char path[sizeof(NETNS_DIR) + NST_NET_NAME + 1];
	int fd, rc;

	snprintf(path, sizeof(path), NETNS_DIR "/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = setns(fd, CLONE_NEWNET) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

pid_t nst_net_spawn(const char *ns, const char *const *argv, const char *log)
{
	pid_t parent = getpid(), pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		if (ns && nst_net_enter(ns) < 0)
			_exit(126);
		if (log) {
			int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

			if (fd >= 0) {
				dup2(fd, STDOUT_FILENO);
				dup2(fd, STDERR_FILENO);
			}
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}
