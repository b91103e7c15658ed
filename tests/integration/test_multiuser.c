/*
 * Who may attach, with real users (docs/security.md).  As root, the test
 * takes unused uids and gids from a high range and runs children as them:
 *
 *   - user A runs two NICs on a fabric of its own and a host program that
 *     registers memory and moves it between them with RDMA WRITE;
 *   - user B, another unprivileged user in no group of A's, tries every path
 *     the threat model lists and is refused each time: A's attach socket,
 *     A's fabric segment and run directory, A's host's memory through
 *     process_vm_readv/writev and /proc/PID/mem, a NIC of B's own pointed
 *     at A's run directory, and a NIC of B's own on B's fabric that tries
 *     to reach A's NIC (where a guessed rkey would be tried): there is no
 *     path to it;
 *   - root's NICs started with --allow-group G: a member of G (G as a
 *     supplementary group, and another with G as primary group) attaches,
 *     registers and moves data both ways, checked byte for byte, and is
 *     refused management and the fabric segment; a user outside G is
 *     refused, by the directory's mode and, past it, by the NIC (DENIED);
 *   - a host of a group member that exits while a child keeps its attach
 *     socket loses its context at once;
 *   - nicsimd refuses --allow-group when it could not reach another user's
 *     memory (no CAP_SYS_PTRACE), and a group that does not exist.
 * At the end A's memory is as A left it and A's transfers still work.
 *
 * Not run as root, the program exits with 77, which ctest reports as a
 * skip (SKIP_RETURN_CODE), never as a pass.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/capability.h>

#include "fab_addr.h"
#include "mgmt_client.h"
#include "nicsim_abi_util.h"
#include "nicsim_host.h"
#include "nicsim_mgmt.h"
#include "nicsim_rundir.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstverbs.h"

#define SKIP_CODE 77
#define WAIT_MS 20000
#define LEN 65536
#define PORT 7

#define ADDR_A1 "198.18.0.1" /* user A's NICs */
#define ADDR_A2 "198.18.0.2"
#define ADDR_B "198.18.0.5"  /* user B's own NIC, on B's fabric */
#define ADDR_S1 "198.18.0.3" /* root's NICs, shared with group G */
#define ADDR_S2 "198.18.0.4"

/* The users: A and B, members M1 (G supplementary) and M2 (G primary) of
 * G, and N outside it. */
static uid_t uid_a, uid_b, uid_m1, uid_m2, uid_n;
static gid_t gid_g;
static char tmp[256], dir_a[300], dir_b[300], dir_s[300];
static char sock_a1[340], sock_a2[340], sock_s1[340], sock_s2[340];
static pid_t nic_a1, nic_a2, nic_s1, nic_s2, owner;
static int owner_go = -1; /* write end: tells the owner to check and end */

/* What the children saw, in memory shared with them. */
struct seen {
	/* the owner (user A's host) */
	pid_t owner_pid;
	uint64_t secret_va;
	uint32_t secret_sum, rkey;
	int owner_setup;  /* 0, or the step that failed */
	int owner_final;  /* 0, or the step that failed */
	int owner_intact; /* 1: its memory as it left it */
	/* user B */
	int b_connect, b_attach, b_list, b_fab_ro, b_fab_rw, b_pvr, b_pvw, b_mem_ro, b_mem_rw;
	int b_pvr_nic; /* process_vm_readv of A's NIC process */
	int b_nic_rc;  /* B's nicsimd pointed at A's run directory */
	char b_nic_out[1024];
	int b_own_nic;   /* B's own NIC started: its pid */
	int b_reach_a;   /* connect from B's NIC to A's NIC's address */
	int b_reach_own; /* and to a listener of B's own on it (the path works) */
	/* member M1 */
	int m_dircheck, m_attach1, m_attach2, m_reg, m_connect, m_write, m_read, m_mgmt, m_mgmt_st,
	    m_fab, m_nic_pid, m_down_rc;
	char m_down_out[1024];
	/* member M2 */
	int m2_attach, m2_reg;
	/* N, outside G */
	int n_connect, n_hello, n_dircheck;
	char n_dirwhy[512];
	/* the orphaned socket */
	pid_t orphan_pid;
	/* a member's host that executed a set-user-ID program */
	int x_said, x_reg;
};
static struct seen *seen;

/* ---- Users ------------------------------------------------------------------------- */

/* Unused ids: nobody has any of base .. base + 7 as uid or gid. */
static bool ids_free(uint32_t base)
{
	for (uint32_t i = 0; i < 8; i++) {
		if (getpwuid((uid_t)(base + i)) || getgrgid((gid_t)(base + i)))
			return false;
	}
	return true;
}

static int pick_ids(void)
{
	uint32_t base = 2100000000u + (uint32_t)(getpid() % 100000) * 16u;

	for (int tries = 0; tries < 100 && !ids_free(base); tries++)
		base += 16;
	if (!ids_free(base))
		return -1;
	uid_a = base;
	uid_b = base + 1;
	uid_m1 = base + 2;
	uid_m2 = base + 3;
	uid_n = base + 4;
	gid_g = base + 5;
	return 0;
}

/*
 * Become uid with primary group gid and the n supplementary groups: real,
 * effective, saved and filesystem ids all of them, nothing of root's left.
 * Dumpable again (a change of credentials clears it), so that the kernel's
 * own rules, not that flag, decide who may reach this process; and still
 * killed when the test's thread ends (the change clears that too).
 */
static int become(uid_t uid, gid_t gid, const gid_t *groups, size_t n)
{
	if (setgroups(n, groups) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0)
		return -errno;
	if (getuid() != uid || geteuid() != uid || getegid() != gid)
		return -EPERM;
	prctl(PR_SET_DUMPABLE, 1);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	return 0;
}

/* ---- Small helpers ----------------------------------------------------------------- */

static int raw_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* The status of the NIC's answer to a hello of role on fd, or a negative errno. */
static int hello_status(int fd, uint16_t role)
{
	struct nic_hello h = {.magic = NIC_ABI_MAGIC,
			      .abi_version = NIC_ABI_VERSION,
			      .role = role,
			      .pid = (uint32_t)getpid()};
	struct nic_hello_reply r;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	/* A NIC that refuses at accept may have closed before the hello
	 * goes (EPIPE): its answer is there to read either way. */
	if (send(fd, &h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h) && errno != EPIPE)
		return -errno;
	if (poll(&p, 1, WAIT_MS) != 1)
		return -ETIMEDOUT;
	n = recv(fd, &r, sizeof(r), MSG_DONTWAIT);
	if (n != (ssize_t)sizeof(r) || r.magic != NIC_ABI_MAGIC)
		return -EPROTO;
	return r.status;
}

static int open_errno(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

/* Post w on qp and wait for its completion: 0, or a negative errno / WC status. */
static int post_wait(struct nst_qp *qp, const struct nic_send_wqe *w)
{
	struct nic_cqe c;
	int err = nst_post_send(qp, w);

	if (!err)
		err = nst_poll_cq(qp, &c, WAIT_MS);
	if (!err && c.status != NIC_WC_SUCCESS)
		err = 1000 + c.status;
	return err;
}

/* REG_MR of [buf, buf + len): the NIC's status; *key the key. */
static int reg(struct nic_host *h, void *buf, uint64_t len, uint32_t access, uint32_t *key)
{
	struct nic_cmd c = {.opcode = NIC_CMD_REG_MR};

	c.u.reg_mr.va = (uintptr_t)buf;
	c.u.reg_mr.len = len;
	c.u.reg_mr.access = access;
	*key = 0;
	return nst_cmd(h, &c, key);
}

/*
 * A transfer between two contexts of this process on NICs at s1 and s2
 * (s2's address addr2): RDMA WRITE of src into dst, then RDMA READ of dst
 * into back, each checked byte for byte.  0, or the step that failed (and
 * *fail_at which it was, as the caller counts).
 */
struct pair {
	struct nic_host *h1, *h2;
	struct nst_qp q1, q2;
	uint8_t *src, *dst, *back;
	uint32_t src_key, dst_key, back_key, rkey;
};

static int pair_open(struct pair *p, const char *s1, const char *s2, uint32_t addr2)
{
	memset(p, 0, sizeof(*p));
	if (nic_host_attach(s1, &p->h1) || nic_host_attach(s2, &p->h2))
		return 1;
	p->src = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	p->dst = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	p->back = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->src == MAP_FAILED || p->dst == MAP_FAILED || p->back == MAP_FAILED)
		return 2;
	nst_fill(p->src, LEN, 1);
	memset(p->dst, 0, LEN);
	memset(p->back, 0, LEN);
	if (reg(p->h1, p->src, LEN, NIC_ACCESS_LOCAL_WRITE, &p->src_key) ||
	    reg(p->h1, p->back, LEN, NIC_ACCESS_LOCAL_WRITE, &p->back_key) ||
	    reg(p->h2, p->dst, LEN, NIC_ACCESS_ALL, &p->dst_key))
		return 3;
	if (nst_qp_create(p->h1, 0, &p->q1) || nst_qp_create(p->h2, 0, &p->q2))
		return 4;
	if (nst_connect_pair(&p->q1, &p->q2, addr2, PORT))
		return 5;
	p->rkey = nst_window(p->h2, p->dst_key, p->dst, LEN,
			     NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE, p->q2.qpn);
	return p->rkey ? 0 : 6;
}

/* One round: src filled from seed, written to dst, read back. */
static int pair_round(struct pair *p, uint32_t seed, uint64_t id)
{
	struct nic_send_wqe w;

	nst_fill(p->src, LEN, seed);
	w = nst_swqe(id, NIC_WR_RDMA_WRITE, p->src, LEN, p->src_key, (uintptr_t)p->dst, p->rkey);
	if (post_wait(&p->q1, &w))
		return 10;
	if (memcmp(p->src, p->dst, LEN))
		return 11;
	memset(p->back, 0, LEN);
	w = nst_swqe(id + 1, NIC_WR_RDMA_READ, p->back, LEN, p->back_key, (uintptr_t)p->dst,
		     p->rkey);
	if (post_wait(&p->q1, &w))
		return 12;
	return memcmp(p->back, p->src, LEN) ? 13 : 0;
}

/* ---- Processes of the users ----------------------------------------------------------- */

struct nic_as {
	uid_t uid;
	gid_t gid;
	const char *dir, *addr;
};

/* In a child: exec nicsimd as a->uid, its stderr in its run directory's log. */
static int nic_as_main(void *arg)
{
	const struct nic_as *a = arg;
	char log[400];
	int fd;

	if (become(a->uid, a->gid, NULL, 0) < 0)
		return 120;
	snprintf(log, sizeof(log), "%s/nic-%s.log", a->dir, a->addr);
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		dup2(fd, STDERR_FILENO);
		close(fd);
	}
	execl(nst_bin("nicsimd"), "nicsimd", "--dir", a->dir, "--addr", a->addr, (char *)NULL);
	return 127;
}

struct pid_file {
	char path[400];
	pid_t pid;
};

static bool pid_file_names(void *arg)
{
	const struct pid_file *p = arg;

	return nst_read_pid_file(p->path) == p->pid;
}

/* Start nicsimd as user a->uid; its pid once it listens, or -1. */
static pid_t start_nic_as(const struct nic_as *a)
{
	struct pid_file pf;

	pf.pid = nst_fork(nic_as_main, (void *)a);
	if (pf.pid <= 0)
		return -1;
	snprintf(pf.path, sizeof(pf.path), "%s/nic-%s.pid", a->dir, a->addr);
	if (!nst_wait_until(pid_file_names, &pf, WAIT_MS, 5)) {
		nst_stop(pf.pid, WAIT_MS);
		return -1;
	}
	return pf.pid;
}

struct fabric_as {
	uid_t uid;
	const char *dir;
	const char *const *addrs;
};

static int fabric_as_main(void *arg)
{
	const struct fabric_as *f = arg;

	if (become(f->uid, f->uid, NULL, 0) < 0)
		return 120;
	return nst_make_fabric(f->dir, f->addrs) ? 1 : 0;
}

/*
 * User A's host: two contexts, memory registered, one transfer checked;
 * then (ready) wait for the word to check that nothing changed its memory,
 * and move data once more.
 */
static int owner_main(void *arg, int ready_fd)
{
	int go = *(int *)arg;
	struct pollfd p = {.fd = go, .events = POLLIN};
	struct pair pr;
	char c;
	int err;

	if (become(uid_a, uid_a, NULL, 0) < 0)
		return 120;
	seen->owner_pid = getpid();
	err = pair_open(&pr, sock_a1, sock_a2, fab_addr_host(2));
	if (!err)
		err = pair_round(&pr, 0x5eed, 1);
	seen->owner_setup = err;
	seen->secret_va = (uintptr_t)pr.dst;
	seen->secret_sum = pr.dst ? nst_sum32(pr.dst, LEN) : 0;
	seen->rkey = pr.rkey;
	if (write(ready_fd, "r", 1) != 1)
		return 121;
	if (err)
		return 1;
	/* The test's word, or its end (the pipe closes), bounded. */
	if (poll(&p, 1, 10 * WAIT_MS) != 1 || read(go, &c, 1) != 1)
		return 122;
	seen->owner_intact =
	    nst_sum32(pr.dst, LEN) == seen->secret_sum && memcmp(pr.dst, pr.src, LEN) == 0;
	seen->owner_final = pair_round(&pr, 0xbeef, 3);
	nic_host_detach(pr.h1);
	nic_host_detach(pr.h2);
	return seen->owner_final || !seen->owner_intact;
}

/* User B: every way at A's NICs, fabric and memory; each refused. */
static int intruder_main(void *arg)
{
	const char *const addrs_b[] = {ADDR_B, NULL};
	const char *const *none = NULL;
	char path[400];
	struct nic_host *h = NULL;
	unsigned char byte = 0x5a;
	struct iovec local = {.iov_base = &byte, .iov_len = 1};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)seen->secret_va, .iov_len = 1};
	DIR *d;
	int fd;

	(void)arg;
	if (become(uid_b, uid_b, NULL, 0) < 0)
		return 120;
	/* A's attach socket, raw and through the driver. */
	fd = raw_connect(sock_a1);
	seen->b_connect = fd < 0 ? fd : 0;
	if (fd >= 0)
		close(fd);
	seen->b_attach = nic_host_attach(sock_a1, &h);
	nic_host_detach(h);
	h = NULL;
	/* A's run directory and fabric segment. */
	d = opendir(dir_a);
	seen->b_list = d ? 0 : -errno;
	if (d)
		closedir(d);
	snprintf(path, sizeof(path), "%s/fabric.shm", dir_a);
	seen->b_fab_ro = open_errno(path, O_RDONLY);
	seen->b_fab_rw = open_errno(path, O_RDWR);
	/* A's host's memory, straight. */
	seen->b_pvr = process_vm_readv(seen->owner_pid, &local, 1, &remote, 1, 0) < 0 ? -errno : 0;
	seen->b_pvw = process_vm_writev(seen->owner_pid, &local, 1, &remote, 1, 0) < 0 ? -errno : 0;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)seen->owner_pid);
	seen->b_mem_ro = open_errno(path, O_RDONLY);
	seen->b_mem_rw = open_errno(path, O_RDWR);
	remote.iov_base = (void *)(uintptr_t)0x400000; /* anything: refused before any address */
	seen->b_pvr_nic = process_vm_readv(nic_a1, &local, 1, &remote, 1, 0) < 0 ? -errno : 0;
	/* A NIC of B's own in A's run directory. */
	seen->b_nic_rc = nst_run(
	    (const char *const[]){nst_bin("nicsimd"), "--dir", dir_a, "--addr", ADDR_B, NULL},
	    seen->b_nic_out, sizeof(seen->b_nic_out), WAIT_MS);
	/* A NIC of B's own on B's fabric: A's NIC is not on it. */
	if (nst_make_fabric(dir_b, addrs_b) == 0) {
		pid_t nic = nst_start_nic(dir_b, ADDR_B, none, WAIT_MS);
		char sock[400];

		seen->b_own_nic = nic;
		snprintf(sock, sizeof(sock), "%s/nic-%s.sock", dir_b, ADDR_B);
		if (nic > 0 && nic_host_attach(sock, &h) == 0) {
			struct nst_qp q, l;

			if (nst_qp_create(h, 0, &q) == 0)
				seen->b_reach_a = nst_connect(&q, fab_addr_host(1), PORT);
			/* The same path works within B's fabric: the refusal
			 * above is the fabric's, not a broken NIC's. */
			if (nst_qp_create(h, 1, &l) == 0 && nst_qp_create(h, 2, &q) == 0)
				seen->b_reach_own =
				    nst_connect_pair(&q, &l, fab_addr_host(5), PORT);
			nic_host_detach(h);
		}
		if (nic > 0)
			nst_stop(nic, WAIT_MS);
	}
	return 0;
}

/* Member M1 of G (supplementary): a host on root's shared NICs. */
static int member_main(void *arg)
{
	char why[NIC_RUN_WHY_MAX], path[400];
	struct mgmt_client mc;
	struct pair pr;
	int err;

	(void)arg;
	if (become(uid_m1, uid_m1, &gid_g, 1) < 0)
		return 120;
	/* The provider's check of the run directory lets it use root's shared one. */
	seen->m_dircheck = nic_run_dir_check(dir_s, why, sizeof(why));
	if (seen->m_dircheck)
		fprintf(stderr, "member: %s\n", why);
	err = pair_open(&pr, sock_s1, sock_s2, fab_addr_host(4));
	seen->m_attach1 = pr.h1 != NULL;
	seen->m_attach2 = pr.h2 != NULL;
	seen->m_reg = err == 0 || err > 3;
	seen->m_connect = err;
	if (!err) {
		seen->m_write = pair_round(&pr, 0x1234, 1);
		seen->m_read = pair_round(&pr, 0x4321, 3);
	} else {
		seen->m_write = seen->m_read = -1;
	}
	seen->m_nic_pid = pr.h1 ? (int)nic_host_info(pr.h1)->nic_pid : 0;
	nic_host_detach(pr.h1);
	nic_host_detach(pr.h2);
	/* Management: refused. */
	seen->m_mgmt = mgmt_client_open(&mc, sock_s1, WAIT_MS);
	seen->m_mgmt_st = mc.status;
	mgmt_client_close(&mc);
	/* The fabric segment: root's alone. */
	snprintf(path, sizeof(path), "%s/fabric.shm", dir_s);
	seen->m_fab = open_errno(path, O_RDONLY);
	/* Stopping root's NICs: refused, with what to do instead. */
	seen->m_down_rc =
	    nst_run((const char *const[]){nst_bin("nicsim"), "down", "--dir", dir_s, NULL},
		    seen->m_down_out, sizeof(seen->m_down_out), WAIT_MS);
	return 0;
}

/* Member M2, G its primary group: attaches and registers. */
static int member2_main(void *arg)
{
	struct nic_host *h = NULL;
	uint32_t key;
	void *buf;

	(void)arg;
	if (become(uid_m2, gid_g, NULL, 0) < 0)
		return 120;
	seen->m2_attach = nic_host_attach(sock_s1, &h);
	if (seen->m2_attach)
		return 0;
	buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	seen->m2_reg = buf == MAP_FAILED ? -1 : reg(h, buf, LEN, NIC_ACCESS_LOCAL_WRITE, &key);
	nic_host_detach(h);
	return 0;
}

/* N, outside G, fully itself: the directory's mode stops it. */
static int outsider_main(void *arg)
{
	int fd;

	(void)arg;
	if (become(uid_n, uid_n, NULL, 0) < 0)
		return 120;
	/* What its tools and host programs are told. */
	seen->n_dircheck = nic_run_dir_check(dir_s, seen->n_dirwhy, sizeof(seen->n_dirwhy));
	fd = raw_connect(sock_s1);
	seen->n_connect = fd < 0 ? fd : 0;
	if (fd >= 0)
		close(fd);
	return 0;
}

/*
 * N as far as sockets tell (SO_PEERCRED and SO_PEERGROUPS report the
 * effective ids and the groups) with root's filesystem access kept: past
 * the directory's mode, the NIC itself must refuse it.
 */
static int outsider_past_dir_main(void *arg)
{
	int fd;

	(void)arg;
	if (setgroups(0, NULL) < 0 || setresgid((gid_t)-1, uid_n, (gid_t)-1) < 0 ||
	    setresuid((uid_t)-1, uid_n, (uid_t)-1) < 0)
		return 120;
	setfsuid(0);
	if (setfsuid(0) != 0)
		return 121;
	fd = raw_connect(sock_s1);
	if (fd < 0)
		return 122;
	seen->n_hello = hello_status(fd, NIC_ROLE_HOST);
	close(fd);
	return 0;
}

/*
 * A member's host that forks a child holding its attach socket, and exits:
 * the NIC must drop the context now, not when the child goes.  The child
 * ends when the test's pipe closes (or it is killed by pid).
 */
static int orphan_main(void *arg)
{
	const int *hold = arg;
	struct nic_host *h = NULL;
	pid_t child;

	if (become(uid_m1, uid_m1, &gid_g, 1) < 0)
		return 120;
	if (nic_host_attach(sock_s2, &h))
		return 1;
	child = fork();
	if (child == 0) {
		struct pollfd p = {.fd = hold[0], .events = POLLIN};

		close(hold[1]);
		/* Not tied to the parent's death: it must outlive it. */
		prctl(PR_SET_PDEATHSIG, 0);
		poll(&p, 1, 10 * WAIT_MS);
		_exit(0);
	}
	seen->orphan_pid = child;
	return child > 0 ? 0 : 2;
}

/*
 * The set-user-ID program a member's host executes: this binary, made
 * root's and set-user-ID, run with SETUID_HOLDER: it reads a file only
 * root may read into memory, prints that memory's address, and waits for
 * its stdin to close (or to be killed).
 */
#define SETUID_HOLDER "--setuid-holder"
static char holder_path[340], holder_secret[340];

static int setuid_holder(const char *file)
{
	static char secret[4096];
	struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
	int fd = open(file, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || read(fd, secret, sizeof(secret) - 1) <= 0)
		return 1;
	close(fd);
	printf("%p\n", (void *)secret);
	fflush(stdout);
	poll(&p, 1, 6 * WAIT_MS);
	return 0;
}

/*
 * Member M1's host X attaches to S1, forks, and executes the set-user-ID
 * program; its child, which keeps X's context, asks the NIC to register the
 * program's memory: the NIC reaches a host's memory with its user's rights
 * only, so the registration is refused (NO_DMA), as a transfer would be.
 */
static int setuid_host_main(void *arg)
{
	struct nic_host *h = NULL;
	int out[2], in[2];
	pid_t child;

	(void)arg;
	if (become(uid_m1, uid_m1, &gid_g, 1) < 0)
		return 120;
	if (nic_host_attach(sock_s1, &h) || pipe(out) < 0 || pipe(in) < 0)
		return 1;
	fflush(NULL); /* nothing of the test's output goes to the pipe */
	child = fork();
	if (child == 0) {
		char line[64] = "";
		FILE *f;
		uint32_t key;

		close(out[1]);
		close(in[0]); /* in[1] held: the program waits for it to close */
		f = fdopen(out[0], "r");
		seen->x_said = f && fgets(line, sizeof(line), f) != NULL;
		if (seen->x_said)
			seen->x_reg = reg(h, (void *)(uintptr_t)strtoull(line, NULL, 16), 64,
					  NIC_ACCESS_LOCAL_WRITE, &key);
		kill(getppid(), SIGKILL);
		_exit(0);
	}
	if (child < 0 || dup2(out[1], STDOUT_FILENO) < 0 || dup2(in[0], STDIN_FILENO) < 0)
		return 2;
	close(out[0]);
	close(in[1]);
	execl(holder_path, holder_path, SETUID_HOLDER, holder_secret, (char *)NULL);
	return 127;
}

/* ---- Tests ------------------------------------------------------------------------- */

static int run_child(int (*fn)(void *), void *arg)
{
	pid_t pid = nst_fork(fn, arg);

	return pid > 0 ? nst_wait(pid, 6 * WAIT_MS) : -1;
}

static long long stat_of(const char *sock, size_t off)
{
	return (long long)nst_nic_stat(sock, off);
}

/* The NIC at sock (a char *) holds no host context. */
static bool no_contexts(void *sock)
{
	return stat_of(sock, NST_STAT(contexts)) == 0;
}

/* User A's NICs and host, and the transfer they made. */
static void test_owner_transfers(void)
{
	const char *const addrs[] = {ADDR_A1, ADDR_A2, NULL};
	struct fabric_as f = {uid_a, dir_a, addrs};
	struct nic_as a1 = {uid_a, uid_a, dir_a, ADDR_A1}, a2 = {uid_a, uid_a, dir_a, ADDR_A2};
	int go[2];

	NST_REQUIRE_EQ(run_child(fabric_as_main, &f), 0);
	nic_a1 = start_nic_as(&a1);
	nic_a2 = start_nic_as(&a2);
	NST_REQUIRE_GT(nic_a1, 0);
	NST_REQUIRE_GT(nic_a2, 0);
	NST_REQUIRE_EQ(pipe2(go, O_CLOEXEC), 0);
	owner = nst_fork_ready(owner_main, &go[0], WAIT_MS);
	close(go[0]);
	owner_go = go[1];
	NST_REQUIRE_GT(owner, 0);
	NST_EQ(seen->owner_setup, 0);
	NST_REQUIRE(seen->secret_va != 0);
	NST_EQ(stat_of(sock_a1, NST_STAT(contexts)), 1);
}

static void test_other_user_reaches_nothing(void)
{
	NST_REQUIRE_GT(owner, 0);
	NST_REQUIRE_EQ(run_child(intruder_main, NULL), 0);
	/* A's socket: the run directory (0700) stops B at the path. */
	NST_EQ(seen->b_connect, -EACCES);
	NST_EQ(seen->b_attach, -EACCES);
	NST_EQ(seen->b_list, -EACCES);
	/* The fabric segment: neither read nor inject. */
	NST_EQ(seen->b_fab_ro, -EACCES);
	NST_EQ(seen->b_fab_rw, -EACCES);
	/* A's registered memory and A's NIC, through the kernel. */
	NST_EQ(seen->b_pvr, -EPERM);
	NST_EQ(seen->b_pvw, -EPERM);
	NST_EQ(seen->b_mem_ro, -EACCES);
	NST_EQ(seen->b_mem_rw, -EACCES);
	NST_EQ(seen->b_pvr_nic, -EPERM);
	/* B's NIC in A's run directory: refused, saying whose it is. */
	NST_EQ(seen->b_nic_rc, 1);
	{
		char want[96];

		snprintf(want, sizeof(want), "owned by uid %u, not you (%u)", (unsigned)uid_a,
			 (unsigned)uid_b);
		NST_CHECK_(strstr(seen->b_nic_out, want) != NULL, CU_FALSE,
			   "B's nicsimd in A's directory says '%s': %.300s", want, seen->b_nic_out);
	}
	/* B's own NIC cannot reach A's: no QP of B's ever gets to present a
	 * key there, however well guessed. */
	NST_REQUIRE_GT(seen->b_own_nic, 0);
	NST_NE(seen->b_reach_a, 0);
	NST_EQ(seen->b_reach_own, 0);
	/* Nothing of B's reached A's NICs. */
	NST_EQ(stat_of(sock_a1, NST_STAT(attach_denied)), 0);
	NST_EQ(stat_of(sock_a1, NST_STAT(contexts)), 1);
	NST_EQ(stat_of(sock_a2, NST_STAT(contexts)), 1);
}

static void start_shared(void)
{
	char gid_text[16];
	const char *const addrs[] = {ADDR_S1, ADDR_S2, NULL};
	const char *extra[] = {"--allow-group", gid_text, NULL};

	snprintf(gid_text, sizeof(gid_text), "%u", (unsigned)gid_g);
	NST_REQUIRE_EQ(mkdir(dir_s, 0700), 0);
	NST_REQUIRE_EQ(nst_make_fabric(dir_s, addrs), 0);
	nic_s1 = nst_start_nic(dir_s, ADDR_S1, extra, WAIT_MS);
	nic_s2 = nst_start_nic(dir_s, ADDR_S2, extra, WAIT_MS);
	NST_REQUIRE_GT(nic_s1, 0);
	NST_REQUIRE_GT(nic_s2, 0);
}

static void test_group_member_attaches(void)
{
	struct stat st;
	long long denied, attaches;

	start_shared();
	/* What --allow-group did to the directory and the sockets. */
	NST_REQUIRE_EQ(stat(dir_s, &st), 0);
	NST_EQ_U(st.st_mode & 07777, 0750);
	NST_EQ(st.st_gid, gid_g);
	NST_REQUIRE_EQ(stat(sock_s1, &st), 0);
	NST_EQ_U(st.st_mode & 07777, 0660);
	NST_EQ(st.st_gid, gid_g);
	denied = stat_of(sock_s1, NST_STAT(attach_denied));
	attaches = stat_of(sock_s1, NST_STAT(attaches));

	NST_REQUIRE_EQ(run_child(member_main, NULL), 0);
	NST_EQ(seen->m_dircheck, 0);
	NST_TRUE(seen->m_attach1);
	NST_TRUE(seen->m_attach2);
	NST_TRUE(seen->m_reg);
	NST_EQ(seen->m_connect, 0);
	NST_EQ(seen->m_write, 0);
	NST_EQ(seen->m_read, 0);
	NST_EQ(seen->m_nic_pid, nic_s1);
	NST_EQ(seen->m_mgmt, nic_status_errno(NIC_STATUS_DENIED));
	NST_EQ(seen->m_mgmt_st, NIC_STATUS_DENIED);
	NST_EQ(seen->m_fab, -EACCES);
	NST_EQ(stat_of(sock_s1, NST_STAT(attach_denied)), denied + 1);
	printf("\n    member's nicsim down: exit %d: %s", seen->m_down_rc, seen->m_down_out);
	NST_GT(seen->m_down_rc, 0);
	NST_TRUE(strstr(seen->m_down_out, "belongs to uid 0") != NULL);
	NST_TRUE(strstr(seen->m_down_out, "--dir D or NICSIM_DIR") != NULL);
	NST_TRUE(nst_pid_alive(nic_s1) && nst_pid_alive(nic_s2));

	NST_REQUIRE_EQ(run_child(member2_main, NULL), 0);
	NST_EQ(seen->m2_attach, 0);
	NST_EQ(seen->m2_reg, NIC_STATUS_OK);
	/* Every context of theirs is gone with them. */
	NST_TRUE(nst_wait_until(no_contexts, sock_s1, WAIT_MS, 5));
	NST_TRUE(nst_wait_until(no_contexts, sock_s2, WAIT_MS, 5));
	NST_EQ(stat_of(sock_s1, NST_STAT(attaches)), attaches + 2);
}

static void test_outsider_refused(void)
{
	char log[400];
	long long denied;
	FILE *f;
	bool said = false;

	NST_REQUIRE_GT(nic_s1, 0);
	denied = stat_of(sock_s1, NST_STAT(attach_denied));
	NST_REQUIRE_EQ(run_child(outsider_main, NULL), 0);
	NST_EQ(seen->n_connect, -EACCES);
	/* Told the directory is shared with a group it is not in, and what to do. */
	NST_EQ(seen->n_dircheck, -EPERM);
	snprintf(log, sizeof(log), "gid %u", (unsigned)gid_g);
	NST_CHECK_(strstr(seen->n_dirwhy, log) && strstr(seen->n_dirwhy, "not in that group") &&
		       strstr(seen->n_dirwhy, "ask root to add you"),
		   CU_FALSE, "the outsider was told: %.400s", seen->n_dirwhy);
	NST_REQUIRE_EQ(run_child(outsider_past_dir_main, NULL), 0);
	NST_EQ(seen->n_hello, NIC_STATUS_DENIED);
	NST_EQ(stat_of(sock_s1, NST_STAT(attach_denied)), denied + 1);
	NST_EQ(stat_of(sock_s1, NST_STAT(contexts)), 0);
	/* The log says which group would have been let in. */
	snprintf(log, sizeof(log), "%s/nic-%s.log", dir_s, ADDR_S1);
	f = fopen(log, "re");
	if (f) {
		char line[1024], want[64];

		snprintf(want, sizeof(want), "lets in group %u", (unsigned)gid_g);
		while (!said && fgets(line, sizeof(line), f))
			said = strstr(line, want) != NULL;
		fclose(f);
	}
	NST_TRUE(said);
}

static void test_exited_host_detached(void)
{
	int hold[2];
	long long before;

	NST_REQUIRE_GT(nic_s2, 0);
	before = stat_of(sock_s2, NST_STAT(detaches));
	NST_REQUIRE_EQ(pipe2(hold, O_CLOEXEC), 0);
	seen->orphan_pid = 0;
	NST_EQ(run_child(orphan_main, hold), 0);
	close(hold[0]);
	NST_TRUE(seen->orphan_pid > 0 && nst_pid_alive(seen->orphan_pid));
	/* The child still holds the socket; the host process is gone. */
	NST_TRUE(nst_wait_until(no_contexts, sock_s2, WAIT_MS, 5));
	NST_EQ(stat_of(sock_s2, NST_STAT(detaches)), before + 1);
	close(hold[1]); /* the child's cue to go */
	if (seen->orphan_pid > 0 && nst_pid_alive(seen->orphan_pid))
		kill(seen->orphan_pid, SIGKILL);
}

static void test_setuid_host_refused(void)
{
	char self[PATH_MAX], out[512];
	ssize_t n;
	int fd;

	NST_REQUIRE_GT(nic_s1, 0);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	NST_REQUIRE(n > 0);
	self[n] = '\0';
	snprintf(holder_path, sizeof(holder_path), "%s/holder", tmp);
	snprintf(holder_secret, sizeof(holder_secret), "%s/secret", tmp);
	fd = open(holder_secret, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(write(fd, "root's alone", 12), 12);
	close(fd);
	NST_REQUIRE_EQ(nst_run((const char *const[]){"/bin/cp", self, holder_path, NULL}, out,
			       sizeof(out), WAIT_MS),
		       0);
	NST_REQUIRE_EQ(chmod(holder_path, 04755), 0);
	seen->x_said = 0;
	seen->x_reg = -1;
	run_child(setuid_host_main, NULL);
	NST_TRUE(nst_wait_until(no_contexts, sock_s1, WAIT_MS, 5));
	NST_REQUIRE(seen->x_said);
	NST_EQ(seen->x_reg, NIC_STATUS_NO_DMA);
}

static void test_allow_group_refused(void)
{
	char out[2048], gid_text[16], d[300];
	int rc;

	/* A group nobody has: named in the error, usage status. */
	rc = nst_run((const char *const[]){nst_bin("nicsimd"), "--dir", dir_s, "--allow-group",
					   "no-such-group-nicsim", NULL},
		     out, sizeof(out), WAIT_MS);
	NST_EQ(rc, 2);
	NST_CHECK_(strstr(out, "no group is named no-such-group-nicsim") != NULL, CU_FALSE,
		   "nicsimd names the group: %.400s", out);
	/* Without CAP_SYS_PTRACE: refused, saying why and what to do. */
	snprintf(gid_text, sizeof(gid_text), "%u", (unsigned)gid_g);
	snprintf(d, sizeof(d), "%s/nocap", tmp);
	NST_REQUIRE_EQ(mkdir(d, 0700), 0);
	{
		pid_t nic = nst_start_nic_without(
		    d, "198.18.0.7", (const char *const[]){"--allow-group", gid_text, NULL},
		    CAP_SYS_PTRACE, WAIT_MS);
		char log[400];
		FILE *f;
		bool said = false;

		NST_TRUE(nic < 0);
		snprintf(log, sizeof(log), "%s/nic-198.18.0.7.log", d);
		f = fopen(log, "re");
		if (f) {
			char line[1024];

			while (!said && fgets(line, sizeof(line), f))
				said = strstr(line, "CAP_SYS_PTRACE") &&
				       strstr(line, "Start the NIC as root");
			fclose(f);
		}
		NST_TRUE(said);
	}
}

static void test_owner_intact(void)
{
	int status;

	NST_REQUIRE_GT(owner, 0);
	NST_REQUIRE_EQ(write(owner_go, "g", 1), 1);
	status = nst_wait(owner, 6 * WAIT_MS);
	owner = 0;
	NST_EQ(status, 0);
	NST_EQ(seen->owner_intact, 1);
	NST_EQ(seen->owner_final, 0);
}

/* ---- Suite ------------------------------------------------------------------------- */

static int make_user_dir(char *buf, size_t size, const char *name, uid_t uid)
{
	snprintf(buf, size, "%s/%s", tmp, name);
	if (mkdir(buf, 0700) < 0 || chown(buf, uid, uid) < 0)
		return -1;
	return 0;
}

static int suite_init(void)
{
	seen = mmap(NULL, sizeof(*seen), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (seen == MAP_FAILED || pick_ids() < 0 || nst_tmpdir(tmp, sizeof(tmp), "multiuser"))
		return -1;
	/* Others may pass through the test's directory, not list it. */
	if (chmod(tmp, 0711) < 0 || make_user_dir(dir_a, sizeof(dir_a), "a", uid_a) ||
	    make_user_dir(dir_b, sizeof(dir_b), "b", uid_b))
		return -1;
	snprintf(dir_s, sizeof(dir_s), "%s/shared", tmp);
	snprintf(sock_a1, sizeof(sock_a1), "%s/nic-%s.sock", dir_a, ADDR_A1);
	snprintf(sock_a2, sizeof(sock_a2), "%s/nic-%s.sock", dir_a, ADDR_A2);
	snprintf(sock_s1, sizeof(sock_s1), "%s/nic-%s.sock", dir_s, ADDR_S1);
	snprintf(sock_s2, sizeof(sock_s2), "%s/nic-%s.sock", dir_s, ADDR_S2);
	printf("\n    users: A %u, B %u, members %u and %u of group %u, outsider %u\n",
	       (unsigned)uid_a, (unsigned)uid_b, (unsigned)uid_m1, (unsigned)uid_m2,
	       (unsigned)gid_g, (unsigned)uid_n);
	return 0;
}

static int suite_clean(void)
{
	const pid_t nics[] = {nic_a1, nic_a2, nic_s1, nic_s2};
	int rc = 0;

	if (owner > 0)
		nst_stop(owner, WAIT_MS);
	if (owner_go >= 0)
		close(owner_go);
	for (size_t i = 0; i < 4; i++) {
		if (nics[i] > 0 && !nst_stop_clean(nics[i], WAIT_MS))
			rc = -1;
	}
	nst_done_with_dir(tmp);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"owner_transfers", test_owner_transfers},
	    {"other_user_reaches_nothing", test_other_user_reaches_nothing},
	    {"group_member_attaches", test_group_member_attaches},
	    {"outsider_refused", test_outsider_refused},
	    {"exited_host_detached", test_exited_host_detached},
	    {"setuid_host_refused", test_setuid_host_refused},
	    {"allow_group_refused", test_allow_group_refused},
	    {"owner_intact", test_owner_intact},
	    {NULL, NULL},
	};

	if (argc == 3 && !strcmp(argv[1], SETUID_HOLDER))
		return setuid_holder(argv[2]);
	if (geteuid() != 0) {
		printf("SKIP: test_multiuser needs root: it runs children as other users "
		       "(setuid) to check who may attach\n");
		return SKIP_CODE;
	}
	return nst_main(argc, argv, "multiuser", tests, suite_init, suite_clean);
}
