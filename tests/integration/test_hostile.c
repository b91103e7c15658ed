/*
 * A real nicsimd against hosts that misbehave: random commands through the
 * ring, random bytes over the whole shared segment and into the doorbell,
 * malformed hellos, silent connections, hosts killed while they register,
 * and shared-buffer descriptors and messages of every wrong kind.
 * After each, the NIC must still be alive, serve a well-behaved host, and its
 * TPT occupancy must return to what it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nicsim_host.h"
#include "nicsim_mgmt.h"
#include "nstest.h"
#include "nstnic.h"

#define ADDR "198.18.0.1"
#define WAIT_MS 5000
/* Random commands: this many, and on until every class was seen, within
 * the deadline (each command wakes the NIC: on a loaded machine they can
 * take ten milliseconds each). */
#define MIN_COMMANDS 10000u
#define FUZZ_DEADLINE_MS 60000
/* Random writes over the segment and doorbell. */
#define SCRIBBLE_ROUNDS 50000u

static char dir[256];
static char sock[300];
static struct nst_nic nics[] = {
    {.addr = ADDR, .extra = (const char *const[]){"--tpt-capacity", "100000", NULL}}};
#define NNICS (sizeof(nics) / sizeof(nics[0]))
#define nic (nics[0].pid)
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible from the seed printed at start. */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static void rnd_fill(void *p, size_t n)
{
	unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)rnd();
}

/* A well-behaved host: register, query, deregister. */
static void check_serves_good_host(void)
{
	static char buf[8192];
	struct nic_host *h;
	struct nic_cmd c = {.opcode = NIC_CMD_REG_MR};
	struct nic_cpl cpl;
	uint32_t key;

	NST_REQUIRE_EQ(kill(nic, 0), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
	c.u.reg_mr.va = (uintptr_t)buf;
	c.u.reg_mr.len = sizeof(buf);
	c.u.reg_mr.access = NIC_ACCESS_LOCAL_WRITE;
	NST_EQ(nic_host_cmd(h, &c, &cpl, WAIT_MS), 0);
	NST_EQ(cpl.status, NIC_STATUS_OK);
	key = cpl.key;
	c = (struct nic_cmd){.opcode = NIC_CMD_DEREG_MR};
	c.u.key.key = key;
	NST_EQ(nic_host_cmd(h, &c, &cpl, WAIT_MS), 0);
	NST_EQ(cpl.status, NIC_STATUS_OK);
	nic_host_detach(h);
}

static void test_random_commands(void)
{
	int base = nst_tpt_in_use(sock);
	unsigned counts[NIC_STATUS_MAX_] = {0}, done = 0;
	static const enum nic_status want[] = {
	    NIC_STATUS_OK,         NIC_STATUS_BAD_OPCODE, NIC_STATUS_BAD_FIELD,
	    NIC_STATUS_BAD_ACCESS, NIC_STATUS_BAD_RANGE,  NIC_STATUS_BAD_KEY,
	};
	struct nic_host *h;
	uint64_t end = nst_now_ns() + (uint64_t)FUZZ_DEADLINE_MS * 1000000u;
	char missed[256] = "";
	size_t hit = 0;

	NST_REQUIRE_GE(base, 0);
	NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
	/* MIN_COMMANDS, and on until every class in want[] was seen; the
	 * deadline bounds a NIC that never refuses some class, and a machine
	 * so loaded that fewer commands fit (what is required is the classes). */
	while ((done < MIN_COMMANDS || hit < sizeof(want) / sizeof(want[0])) &&
	       nst_now_ns() < end) {
		struct nic_cmd c;
		struct nic_cpl cpl;
		int err;

		rnd_fill(&c, sizeof(c));
		/* Mostly known opcodes, so that decoding goes past the opcode;
		 * often clean reserved fields and plausible values, so that the
		 * later checks and execution are reached too. */
		if (rnd() % 4)
			c.opcode = (uint16_t)(rnd() % (NIC_CMD_MAX_ + 1));
		if (rnd() % 2) {
			static const size_t used[NIC_CMD_MAX_ + 1] = {[NIC_CMD_REG_MR] = 20,
								      [NIC_CMD_DEREG_MR] = 4,
								      [NIC_CMD_INVALIDATE_MW] = 4,
								      [NIC_CMD_DEALLOC_MW] = 4,
								      [NIC_CMD_BIND_MW] = 32};

			size_t n = c.opcode <= NIC_CMD_MAX_ ? used[c.opcode] : 0;

			c.flags = 0;
			c.reserved0 = 0;
			memset(c.u.raw + n, 0, sizeof(c.u.raw) - n);
			if (rnd() % 2) {
				c.u.reg_mr.len %= 1u << 21;
				c.u.reg_mr.access &= NIC_ACCESS_ALL;
				if (rnd() % 8 == 0)
					c.u.reg_mr.len = 0;
				if (rnd() % 8 == 0)
					c.u.reg_mr.va = UINT64_MAX - rnd() % 65536;
			}
		}
		err = nic_host_cmd(h, &c, &cpl, WAIT_MS);
		NST_REQUIRE_EQ(err, 0);
		NST_REQUIRE_LT(cpl.status, NIC_STATUS_MAX_);
		if (counts[cpl.status]++ == 0) {
			for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
				hit += want[i] == cpl.status;
		}
		done++;
	}
	printf("\n    %u random commands: ok %u, bad opcode %u, bad field %u, bad access %u, "
	       "bad range %u, too large %u, bad key %u\n",
	       done, counts[NIC_STATUS_OK], counts[NIC_STATUS_BAD_OPCODE],
	       counts[NIC_STATUS_BAD_FIELD], counts[NIC_STATUS_BAD_ACCESS],
	       counts[NIC_STATUS_BAD_RANGE], counts[NIC_STATUS_TOO_LARGE],
	       counts[NIC_STATUS_BAD_KEY]);
	/* Every refusal class was reached, and some commands got through. */
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (!counts[want[i]]) {
			size_t n = strlen(missed);

			snprintf(missed + n, sizeof(missed) - n, "%s%s", n ? "; " : " ",
				 nic_status_str(want[i]));
		}
	}
	NST_CHECK_(!missed[0], CU_FALSE,
		   "every class reached in %u commands (%d s at most); never:%s", done,
		   FUZZ_DEADLINE_MS / 1000, missed);
	check_serves_good_host();
	nic_host_detach(h);
	NST_EQ(nst_wait_tpt_in_use(sock, base, WAIT_MS), base);
}

static void test_garbage_segment_and_doorbell(void)
{
	int base = nst_tpt_in_use(sock);
	struct nic_host *h;
	size_t size;
	unsigned char *seg;
	unsigned rounds;

	NST_REQUIRE_GE(base, 0);
	NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
	seg = nic_host_segment(h, &size);
	NST_REQUIRE(seg != NULL);
	NST_REQUIRE_EQ(size, NIC_CTX_SEG_SIZE);
	/* A number of rounds, not a time: a loaded machine does as much. */
	for (rounds = 0; rounds < SCRIBBLE_ROUNDS;) {
		uint64_t v = rnd();
		size_t off = rnd() % size, n = 1 + rnd() % 512;

		if (off + n > size)
			n = size - off;
		rnd_fill(seg + off, n);
		/* Any value, including ones the eventfd refuses or that would
		 * overflow it: the host's write fails, the NIC must not care. */
		if (write(nic_host_doorbell_fd(h), &v, sizeof(v)) < 0 && errno != EINVAL &&
		    errno != EAGAIN)
			NST_TRUE(0);
		/* Now and then the NIC gets the CPU to read what was written:
		 * a pace, not a synchronisation. */
		if (++rounds % 64 == 0)
			nst_sleep_ms(1);
	}
	printf("\n    %u rounds of random bytes over the segment and doorbell\n", rounds);
	check_serves_good_host();
	nic_host_detach(h);
	NST_EQ(nst_wait_tpt_in_use(sock, base, WAIT_MS), base);
}

/* Send raw bytes as a hello and read the reply's status (-1: no reply). */
static int raw_hello(const void *msg, size_t len)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct nic_hello_reply r;
	struct timeval tv = {.tv_sec = 5};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), status = -1;

	strcpy(sa.sun_path, sock);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    send(fd, msg, len, MSG_NOSIGNAL) == (ssize_t)len &&
	    recv(fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r) && r.magic == NIC_ABI_MAGIC)
		status = r.status;
	close(fd);
	return status;
}

static void test_bad_hellos(void)
{
	struct nic_hello good = {
	    .magic = NIC_ABI_MAGIC, .abi_version = NIC_ABI_VERSION, .role = NIC_ROLE_HOST};
	struct nic_hello h;
	static unsigned char big[4096];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int silent;

	/* A connection that never says hello does not hold the NIC up. */
	strcpy(sa.sun_path, sock);
	silent = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	NST_REQUIRE_EQ(connect(silent, (struct sockaddr *)&sa, sizeof(sa)), 0);

	NST_EQ(raw_hello(&good, 10), NIC_STATUS_BAD_HELLO);
	h = good;
	h.magic ^= 1;
	NST_EQ(raw_hello(&h, sizeof(h)), NIC_STATUS_BAD_HELLO);
	h = good;
	h.abi_version = 99;
	NST_EQ(raw_hello(&h, sizeof(h)), NIC_STATUS_BAD_VERSION);
	h = good;
	h.role = 7;
	NST_EQ(raw_hello(&h, sizeof(h)), NIC_STATUS_BAD_HELLO);
	h = good;
	h.reserved[47] = 1;
	NST_EQ(raw_hello(&h, sizeof(h)), NIC_STATUS_BAD_HELLO);
	memcpy(big, &good, sizeof(good));
	NST_EQ(raw_hello(big, sizeof(big)), NIC_STATUS_BAD_HELLO);
	for (int i = 0; i < 50; i++) {
		rnd_fill(&h, sizeof(h));
		NST_NE(raw_hello(&h, sizeof(h)), NIC_STATUS_OK);
	}
	check_serves_good_host();
	close(silent);
}

/* Register and deregister for ever; ready_fd gets a byte after the first
 * command, so that the kill finds the child at work. */
static int churn(void *arg, int ready_fd)
{
	static char buf[1 << 16];
	struct nic_host *h;
	bool told = false;

	(void)arg;
	if (nic_host_attach(sock, &h) < 0)
		return 1;
	for (;;) {
		struct nic_cmd c = {.opcode = NIC_CMD_REG_MR};
		struct nic_cpl cpl;

		c.u.reg_mr.va = (uintptr_t)buf + (rnd() % 4096);
		c.u.reg_mr.len = 1 + rnd() % 4096;
		if (nic_host_cmd(h, &c, &cpl, WAIT_MS) < 0)
			return 2;
		if (!told) {
			told = write(ready_fd, "r", 1) == 1;
			close(ready_fd);
		}
		/* Leave about half registered, so that teardown has work. */
		if (cpl.status == NIC_STATUS_OK && rnd() % 2) {
			c = (struct nic_cmd){.opcode = NIC_CMD_DEREG_MR};
			c.u.key.key = cpl.key;
			if (nic_host_cmd(h, &c, &cpl, WAIT_MS) < 0)
				return 3;
		}
	}
}

static void test_killed_while_registering(void)
{
	int base = nst_tpt_in_use(sock);

	NST_REQUIRE_GE(base, 0);
	for (int i = 0; i < 5; i++) {
		pid_t child = nst_fork_ready(churn, NULL, WAIT_MS);
		int status;

		NST_REQUIRE_GT(child, 0);
		/* Once it registers: a random moment of its work is what is
		 * tested, so this sleep is the test's, not a synchronisation. */
		nst_sleep_ms((int)(rnd() % 60));
		NST_EQ(kill(child, SIGKILL), 0);
		status = nst_wait(child, WAIT_MS);
		NST_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		NST_EQ(nst_wait_tpt_in_use(sock, base, WAIT_MS), base);
	}
	check_serves_good_host();
}

/* ---- Shared buffers ------------------------------------------------------- */

#define SHM_NAME "nst-hostile-shm"
#define SHM_VA 0x7e0000000000ull /* any page-aligned address: a name for the map */

/* Send len bytes with nfds descriptors on h's attach socket. */
static void sock_send(struct nic_host *h, const void *data, size_t len, const int *fds,
		      unsigned nfds)
{
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u = {0};
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

	if (nfds) {
		struct cmsghdr *cm;

		m.msg_control = u.b;
		m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	NST_REQUIRE_EQ(sendmsg(nic_host_notify_fd(h), &m, MSG_NOSIGNAL), (ssize_t)len);
}

static void send_fd(struct nic_host *h, int fd)
{
	sock_send(h, NIC_SHM_MSG_MAGIC, NIC_SHM_MSG_LEN, &fd, 1);
}

/* A memfd of size bytes with these seals (0: none). */
static int memfd(size_t size, unsigned seals)
{
	int fd = memfd_create(SHM_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(ftruncate(fd, (off_t)size), 0);
	if (seals)
		NST_REQUIRE_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

static uint16_t shm_cmd(struct nic_host *h, uint16_t op, uint64_t va, uint64_t len)
{
	struct nic_cmd c = {.opcode = op};
	struct nic_cpl cpl;

	c.u.shm.va = va;
	c.u.shm.len = len;
	NST_REQUIRE_EQ(nic_host_cmd(h, &c, &cpl, WAIT_MS), 0);
	return cpl.status;
}

/* SHM_MAP of [va, va + len) with fd sent just before: the NIC's status. */
static uint16_t map_with(struct nic_host *h, int fd, uint64_t va, uint64_t len)
{
	send_fd(h, fd);
	return shm_cmd(h, NIC_CMD_SHM_MAP, va, len);
}

/* The NIC holds nothing of the test's memfds: no descriptor, no mapping. */
static bool nic_holds_no_memfd(void *arg)
{
	int fds, maps;

	(void)arg;
	return nst_memfd_refs(nic, SHM_NAME, &fds, &maps) == 0 && fds == 0 && maps == 0;
}

static void check_nic_holds(int want_fds, int want_maps)
{
	int fds, maps;

	NST_REQUIRE_EQ(nst_memfd_refs(nic, SHM_NAME, &fds, &maps), 0);
	NST_EQ(fds, want_fds);
	NST_EQ(maps, want_maps);
}

/*
 * Every refusal of SHM_MAP, each with its own status, each descriptor
 * closed by the NIC whatever the outcome; a map the host makes afterwards
 * still works; detaching leaves the NIC holding nothing.
 */
static void test_shm_map_refusals(void)
{
	const unsigned sealed = F_SEAL_SHRINK | F_SEAL_SEAL;
	const long page = sysconf(_SC_PAGESIZE);
	struct nic_host *h;
	int good = memfd(4 * (size_t)page, sealed), fd, p[2];
	char path[64];
	uint64_t dropped;

	NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
	/* No descriptor sent. */
	NST_EQ(shm_cmd(h, NIC_CMD_SHM_MAP, SHM_VA, (uint64_t)page), NIC_STATUS_BAD_STATE);
	/* Unsealed, or without one of the two seals required. */
	fd = memfd(4 * (size_t)page, 0);
	NST_EQ(map_with(h, fd, SHM_VA, (uint64_t)page), NIC_STATUS_BAD_ACCESS);
	close(fd);
	fd = memfd(4 * (size_t)page, F_SEAL_SHRINK);
	NST_EQ(map_with(h, fd, SHM_VA, (uint64_t)page), NIC_STATUS_BAD_ACCESS);
	close(fd);
	fd = memfd(4 * (size_t)page, F_SEAL_SEAL);
	NST_EQ(map_with(h, fd, SHM_VA, (uint64_t)page), NIC_STATUS_BAD_ACCESS);
	close(fd);
	/* Sealed against writes: the NIC could not write through it. */
	fd = memfd(4 * (size_t)page, F_SEAL_WRITE | sealed);
	NST_EQ(map_with(h, fd, SHM_VA, (uint64_t)page), NIC_STATUS_BAD_ACCESS);
	close(fd);
	/* The right memfd, opened read-only. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", good);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	NST_REQUIRE(fd >= 0);
	NST_EQ(map_with(h, fd, SHM_VA, (uint64_t)page), NIC_STATUS_BAD_ACCESS);
	close(fd);
	/* Not a memfd at all. */
	NST_REQUIRE_EQ(pipe2(p, O_CLOEXEC), 0);
	NST_EQ(map_with(h, p[0], SHM_VA, (uint64_t)page), NIC_STATUS_BAD_ACCESS);
	close(p[0]);
	close(p[1]);
	/* Shorter than the map. */
	NST_EQ(map_with(h, good, SHM_VA, 8 * (uint64_t)page), NIC_STATUS_TOO_LARGE);
	/* Unaligned, empty, wrapping. */
	NST_EQ(map_with(h, good, SHM_VA + 8, (uint64_t)page), NIC_STATUS_BAD_RANGE);
	NST_EQ(map_with(h, good, SHM_VA, (uint64_t)page + 1), NIC_STATUS_BAD_RANGE);
	NST_EQ(map_with(h, good, SHM_VA, 0), NIC_STATUS_BAD_RANGE);
	NST_EQ(map_with(h, good, UINT64_MAX - (uint64_t)page + 1, 2 * (uint64_t)page),
	       NIC_STATUS_BAD_RANGE);
	/* Overlapping a map, from either side or inside. */
	NST_EQ(map_with(h, good, SHM_VA + 2 * (uint64_t)page, 2 * (uint64_t)page), NIC_STATUS_OK);
	NST_EQ(map_with(h, good, SHM_VA + (uint64_t)page, 2 * (uint64_t)page), NIC_STATUS_BUSY);
	NST_EQ(map_with(h, good, SHM_VA + 3 * (uint64_t)page, 2 * (uint64_t)page), NIC_STATUS_BUSY);
	NST_EQ(map_with(h, good, SHM_VA + 3 * (uint64_t)page, (uint64_t)page), NIC_STATUS_BUSY);
	NST_EQ(map_with(h, good, SHM_VA, 2 * (uint64_t)page), NIC_STATUS_OK); /* adjacent */
	check_nic_holds(0, 2);
	/* NIC_SHM_MAX maps, then no more. */
	for (unsigned i = 2; i < NIC_SHM_MAX; i++)
		NST_REQUIRE_EQ(map_with(h, good, SHM_VA + (uint64_t)(i + 8) * 4 * (uint64_t)page,
					(uint64_t)page),
			       NIC_STATUS_OK);
	NST_EQ(map_with(h, good, SHM_VA + 1024 * 4 * (uint64_t)page, (uint64_t)page),
	       NIC_STATUS_NO_RESOURCES);
	check_nic_holds(0, (int)NIC_SHM_MAX);
	/* Unmapping one makes room again. */
	NST_EQ(shm_cmd(h, NIC_CMD_SHM_UNMAP, SHM_VA, 0), NIC_STATUS_OK);
	NST_EQ(map_with(h, good, SHM_VA + 1024 * 4 * (uint64_t)page, (uint64_t)page),
	       NIC_STATUS_OK);
	/* More descriptors sent ahead than wait: the extra one is closed. */
	dropped = nst_nic_stat(sock, NST_STAT(shm_fds_dropped));
	for (unsigned i = 0; i <= NIC_SHM_PENDING; i++)
		send_fd(h, good);
	NST_EQ(shm_cmd(h, NIC_CMD_SHM_UNMAP, SHM_VA + 1024 * 4 * (uint64_t)page, 0), NIC_STATUS_OK);
	NST_EQ_U(nst_wait_nic_stat(sock, NST_STAT(shm_fds_dropped), dropped + 1, WAIT_MS),
		 dropped + 1);
	check_nic_holds((int)NIC_SHM_PENDING, (int)NIC_SHM_MAX - 1);
	for (unsigned i = 0; i < NIC_SHM_PENDING; i++)
		NST_EQ(shm_cmd(h, NIC_CMD_SHM_MAP, SHM_VA + (2048 + i) * 4 * (uint64_t)page,
			       (uint64_t)page),
		       i == 0 ? NIC_STATUS_OK : NIC_STATUS_NO_RESOURCES);
	NST_EQ(shm_cmd(h, NIC_CMD_SHM_MAP, SHM_VA, (uint64_t)page), NIC_STATUS_BAD_STATE);
	check_nic_holds(0, (int)NIC_SHM_MAX);
	NST_EQ(nic_host_check(h), 0);
	nic_host_detach(h);
	close(good);
	NST_TRUE(nst_wait_until(nic_holds_no_memfd, NULL, WAIT_MS, 5));
	check_serves_good_host();
}

static bool ctx_broken(void *arg)
{
	return nic_host_check(arg) == -ENETDOWN;
}

/*
 * Messages on the attach socket that are not one shared-buffer descriptor
 * with its magic: the NIC closes every descriptor they carried and puts
 * the context in error (NIC_CTX_ERR_SOCKET); other contexts go on.
 */
static void test_shm_bad_messages(void)
{
	const long page = sysconf(_SC_PAGESIZE);
	int good = memfd((size_t)page, F_SEAL_SHRINK | F_SEAL_SEAL);
	const int two[] = {good, good};
	static const char junk[] = "not a descriptor";
	struct nic_host *bystander;
	void *buf;

	NST_REQUIRE_EQ(nic_host_attach(sock, &bystander), 0);
	NST_REQUIRE_EQ(nic_host_shm_alloc(bystander, 3 * (size_t)page, &buf), 0);
	for (unsigned kind = 0; kind < 5; kind++) {
		uint64_t bad = nst_nic_stat(sock, NST_STAT(shm_bad_msgs));
		struct nic_host *h;
		struct nic_ctx_hdr *hdr;
		size_t size;

		NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
		hdr = nic_host_segment(h, &size);
		switch (kind) {
		case 0: sock_send(h, NIC_SHM_MSG_MAGIC, NIC_SHM_MSG_LEN, two, 2); break;
		case 1: sock_send(h, junk, sizeof(junk), NULL, 0); break;
		case 2: sock_send(h, "NICSHM2", NIC_SHM_MSG_LEN, &good, 1); break;
		case 3: sock_send(h, NIC_SHM_MSG_MAGIC, NIC_SHM_MSG_LEN, NULL, 0); break;
		default: sock_send(h, junk, sizeof(junk), &good, 1); break;
		}
		/* Read by the NIC as the socket turns readable, or by an SHM_MAP. */
		if (kind == 3) {
			struct nic_cmd c = {.opcode = NIC_CMD_SHM_MAP};
			struct nic_cpl cpl;
			int err;

			c.u.shm.va = SHM_VA;
			c.u.shm.len = (uint64_t)page;
			/* -ENETDOWN when the NIC read the message first. */
			err = nic_host_cmd(h, &c, &cpl, WAIT_MS);
			NST_TRUE(err == 0 || err == -ENETDOWN);
		}
		NST_TRUE(nst_wait_until(ctx_broken, h, WAIT_MS, 2));
		NST_EQ(hdr->nic_state, NIC_CTX_CMDQ_ERROR);
		NST_EQ(hdr->nic_error, NIC_CTX_ERR_SOCKET);
		NST_EQ_U(nst_nic_stat(sock, NST_STAT(shm_bad_msgs)), bad + 1);
		/* It carried descriptors: none of them stays in the NIC. */
		check_nic_holds(0, 0);
		nic_host_detach(h);
		NST_EQ(nic_host_check(bystander), 0);
	}
	NST_EQ(nic_host_shm_free(bystander, buf, 3 * (size_t)page), 0);
	nic_host_detach(bystander);
	close(good);
	check_serves_good_host();
}

static bool nic_fds_at_most(void *arg)
{
	int n = nst_fd_count(nic);

	return n >= 0 && n <= *(const int *)arg;
}

/*
 * Descriptors of every other kind a hostile host may send as a shared
 * buffer: each refused (BAD_ACCESS) and closed, none left in the NIC; the
 * context still works, and a later good map does.
 */
static void test_shm_other_descriptors(void)
{
	const long page = sysconf(_SC_PAGESIZE);
	const unsigned sealed = F_SEAL_SHRINK | F_SEAL_SEAL;
	int good = memfd(4 * (size_t)page, sealed), fds[12], n = 0, sv[2], before;
	const int base = nst_fd_count(nic);
	char path[64], shm_path[64];
	struct nic_host *h;

	NST_REQUIRE(base > 0);
	NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
	NST_REQUIRE_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	fds[n++] = sv[0];
	fds[n++] = eventfd(0, EFD_CLOEXEC);
	fds[n++] = open("/dev/zero", O_RDWR | O_CLOEXEC);
	fds[n++] = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", good);
	fds[n++] = open(path, O_PATH | O_CLOEXEC);
	fds[n++] = open(path, O_WRONLY | O_CLOEXEC);
	/* A plain file of tmpfs, not a memfd: it takes no seals. */
	snprintf(shm_path, sizeof(shm_path), "/dev/shm/%s-%d", SHM_NAME, (int)getpid());
	fds[n++] = open(shm_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fds[n - 1] >= 0) {
		NST_EQ(ftruncate(fds[n - 1], 4 * page), 0);
		unlink(shm_path);
	}
#ifdef F_SEAL_FUTURE_WRITE
	fds[n++] = memfd(4 * (size_t)page, sealed | F_SEAL_FUTURE_WRITE);
#endif
	/* Huge pages could fault for want of them: refused where the
	 * machine makes such a memfd at all. */
	fds[n] = memfd_create(SHM_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
	if (fds[n] >= 0) {
		if (ftruncate(fds[n], 2 << 20) == 0 && fcntl(fds[n], F_ADD_SEALS, sealed) == 0)
			n++;
		else
			close(fds[n]);
	}
	before = nst_fd_count(nic);
	NST_REQUIRE(before > 0);
	for (int i = 0; i < n; i++) {
		NST_REQUIRE(fds[i] >= 0);
		NST_CHECK_(map_with(h, fds[i], SHM_VA, (uint64_t)page) == NIC_STATUS_BAD_ACCESS,
			   CU_FALSE, "descriptor %d of %d was not refused", i, n);
		close(fds[i]);
	}
	close(sv[1]);
	NST_EQ(nst_fd_count(nic), before);
	check_nic_holds(0, 0);
	/* With SCM_CREDENTIALS beside it, which the NIC does not ask for: the
	 * message is the descriptor still, and the map works. */
	{
		union {
			char b[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
			struct cmsghdr align;
		} u = {0};
		struct ucred cr = {.pid = getpid(), .uid = getuid(), .gid = getgid()};
		struct iovec iov = {.iov_base = (void *)NIC_SHM_MSG_MAGIC,
				    .iov_len = NIC_SHM_MSG_LEN};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = u.b,
				   .msg_controllen = sizeof(u.b)};
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &good, sizeof(int));
		cm = CMSG_NXTHDR(&m, cm);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_CREDENTIALS;
		cm->cmsg_len = CMSG_LEN(sizeof(cr));
		memcpy(CMSG_DATA(cm), &cr, sizeof(cr));
		NST_REQUIRE_EQ(sendmsg(nic_host_notify_fd(h), &m, MSG_NOSIGNAL),
			       (ssize_t)NIC_SHM_MSG_LEN);
		NST_EQ(shm_cmd(h, NIC_CMD_SHM_MAP, SHM_VA, (uint64_t)page), NIC_STATUS_OK);
	}
	check_nic_holds(0, 1);
	NST_EQ(nic_host_check(h), 0);
	nic_host_detach(h);
	close(good);
	NST_TRUE(nst_wait_until(nic_holds_no_memfd, NULL, WAIT_MS, 5));
	NST_CHECK_(nst_wait_until(nic_fds_at_most, (void *)&base, WAIT_MS, 5), CU_FALSE,
		   "the NIC holds %d descriptors, %d before", nst_fd_count(nic), base);
	check_serves_good_host();
}

/*
 * One host's descriptor is never another's: a second context of the same
 * process, whose SHM_MAP has no descriptor of its own, gets BAD_STATE and
 * leaves the first's waiting descriptor for the first's SHM_MAP.
 */
static void test_shm_other_context(void)
{
	const long page = sysconf(_SC_PAGESIZE);
	int good = memfd((size_t)page, F_SEAL_SHRINK | F_SEAL_SEAL);
	struct nic_host *a, *b;

	NST_REQUIRE_EQ(nic_host_attach(sock, &a), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock, &b), 0);
	send_fd(a, good);
	NST_EQ(shm_cmd(b, NIC_CMD_SHM_MAP, SHM_VA, (uint64_t)page), NIC_STATUS_BAD_STATE);
	NST_EQ(shm_cmd(a, NIC_CMD_SHM_MAP, SHM_VA, (uint64_t)page), NIC_STATUS_OK);
	NST_EQ(shm_cmd(b, NIC_CMD_SHM_UNMAP, SHM_VA, 0), NIC_STATUS_BAD_RANGE);
	check_nic_holds(0, 1);
	nic_host_detach(b);
	check_nic_holds(0, 1);
	nic_host_detach(a);
	close(good);
	NST_TRUE(nst_wait_until(nic_holds_no_memfd, NULL, WAIT_MS, 5));
}

/* A host that maps buffers, sends one more descriptor without its
 * SHM_MAP, then waits to be killed. */
static int shm_killed_child(void *arg, int ready_fd)
{
	const long page = sysconf(_SC_PAGESIZE);
	struct nic_host *h;
	int fd;

	(void)arg;
	if (nic_host_attach(sock, &h))
		return 1;
	fd = memfd_create(SHM_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, 64 * page) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL))
		return 1;
	for (unsigned i = 0; i < 8; i++)
		if (map_with(h, fd, SHM_VA + i * 64 * (uint64_t)page, 64 * (uint64_t)page) !=
		    NIC_STATUS_OK)
			return 1;
	send_fd(h, fd);
	close(fd);
	if (write(ready_fd, "r", 1) != 1)
		return 1;
	for (;;)
		pause();
}

/* Killed with maps and a descriptor waiting: the NIC keeps none of them. */
static void test_shm_killed_holder(void)
{
	int before = nst_fd_count(nic), fds, maps;
	pid_t child;

	for (unsigned round = 0; round < 3; round++) {
		child = nst_fork_ready(shm_killed_child, NULL, WAIT_MS);
		NST_REQUIRE_GT(child, 0);
		NST_REQUIRE_EQ(nst_memfd_refs(nic, SHM_NAME, &fds, &maps), 0);
		NST_EQ(maps, 8);
		NST_EQ(kill(child, SIGKILL), 0);
		NST_TRUE(WIFSIGNALED(nst_wait(child, WAIT_MS)));
		NST_TRUE(nst_wait_until(nic_holds_no_memfd, NULL, WAIT_MS, 5));
	}
	NST_CHECK_(nst_wait_until(nic_fds_at_most, &before, WAIT_MS, 5), CU_FALSE,
		   "the NIC holds %d descriptors, %d before", nst_fd_count(nic), before);
	check_serves_good_host();
}

static bool self_holds_no_shm(void)
{
	int fds, maps;

	return nst_memfd_refs(getpid(), "nicsim-shm", &fds, &maps) == 0 && fds == 0 && maps == 0;
}

/*
 * The host library: a buffer is whole pages, mapped by the NIC until it is
 * freed; freeing what is not a buffer as allocated is refused and unmaps
 * nothing; on a context in error the
 * allocation fails and leaves nothing behind, in the host or the NIC.
 */
static void test_shm_host_library(void)
{
	const long page = sysconf(_SC_PAGESIZE);
	uint64_t maps0 = nst_nic_stat(sock, NST_STAT(shm_maps));
	uint64_t unmaps0 = nst_nic_stat(sock, NST_STAT(shm_unmaps));
	static const char junk[] = "junk";
	struct nic_host *h;
	void *p = NULL, *plain, *reuse;
	unsigned char vec;

	NST_REQUIRE(self_holds_no_shm());
	NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
	NST_EQ(nic_host_shm_alloc(h, 0, &p), -EINVAL);
	NST_REQUIRE_EQ(nic_host_shm_alloc(h, 1, &p), 0);
	NST_EQ((uintptr_t)p % (uintptr_t)page, 0);
	memset(p, 0x5a, (size_t)page); /* a whole page is there */
	NST_EQ_U(nst_nic_stat(sock, NST_STAT(shm_maps)), maps0 + 1);
	plain =
	    mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NST_REQUIRE(plain != MAP_FAILED);
	memset(plain, 0x33, (size_t)page);
	/* Refused frees touch nothing: not a buffer, inside one, longer
	 * than allocated (which would unmap what follows it). */
	NST_EQ(nic_host_shm_free(h, plain, (size_t)page), -EINVAL);
	NST_EQ(mincore(plain, (size_t)page, &vec), 0); /* still mapped */
	NST_EQ(((volatile uint8_t *)plain)[page - 1], 0x33);
	NST_EQ(nic_host_shm_free(h, (char *)p + 1, 1), -EINVAL);
	NST_EQ(nic_host_shm_free(h, p, 2 * (size_t)page), -EINVAL);
	NST_EQ(((volatile uint8_t *)p)[page - 1], 0x5a);
	NST_EQ_U(nst_nic_stat(sock, NST_STAT(shm_unmaps)), unmaps0);
	NST_EQ(nic_host_shm_free(h, p, 1), 0);
	NST_EQ_U(nst_nic_stat(sock, NST_STAT(shm_unmaps)), unmaps0 + 1);
	NST_TRUE(self_holds_no_shm());
	/* Freed twice: the second is refused, even once the address holds
	 * other memory. */
	reuse = mmap(p, (size_t)page, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	NST_REQUIRE(reuse != MAP_FAILED);
	NST_EQ(nic_host_shm_free(h, p, 1), -EINVAL);
	NST_EQ(mincore(reuse, (size_t)page, &vec), 0);
	NST_EQ(munmap(reuse, (size_t)page), 0);
	NST_EQ(munmap(plain, (size_t)page), 0);
	/* A context in error: nothing is left of a failed allocation. */
	sock_send(h, junk, sizeof(junk), NULL, 0);
	NST_TRUE(nst_wait_until(ctx_broken, h, WAIT_MS, 2));
	p = NULL;
	NST_EQ(nic_host_shm_alloc(h, 3 * (size_t)page, &p), -ENETDOWN);
	NST_EQ(p, NULL);
	NST_TRUE(self_holds_no_shm());
	nic_host_detach(h);
	NST_EQ_U(nst_nic_stat(sock, NST_STAT(shm_maps)), maps0 + 1);
	check_serves_good_host();
}

static int init(void)
{
	const char *seed = getenv("NICSIM_SEED");

	if (seed)
		rng = strtoull(seed, NULL, 0) | 1;
	printf("seed 0x%llx (set NICSIM_SEED to replay)\n", (unsigned long long)rng);
	if (nst_tmpdir(dir, sizeof(dir), "hostile") < 0)
		return -1;
	snprintf(sock, sizeof(sock), "%s/nic-" ADDR ".sock", dir);
	return nst_nics_start(dir, nics, NNICS, WAIT_MS) < 0 ? -1 : 0;
}

/* Each test from the NIC as it was started: one a failed test left holding
 * contexts, QPs or TPT entries (or that died) is restarted (nstnic.h). */
static void setup(void)
{
	NST_EQ(nst_nics_ready(dir, nics, NNICS, WAIT_MS), 0);
}

static int clean(void)
{
	/* The NIC must have survived everything and stopped cleanly. */
	return nst_stop_nics_clean(dir, &nic, 1, WAIT_MS);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"random_commands", test_random_commands},
	    {"garbage_segment_and_doorbell", test_garbage_segment_and_doorbell},
	    {"bad_hellos", test_bad_hellos},
	    {"killed_while_registering", test_killed_while_registering},
	    {"shm_map_refusals", test_shm_map_refusals},
	    {"shm_bad_messages", test_shm_bad_messages},
	    {"shm_host_library", test_shm_host_library},
	    {"shm_other_descriptors", test_shm_other_descriptors},
	    {"shm_other_context", test_shm_other_context},
	    {"shm_killed_holder", test_shm_killed_holder},
	    {NULL, NULL},
	};

	static const struct nst_suite suite = {
	    .name = "hostile", .tests = tests, .init = init, .clean = clean, .setup = setup};

	return nst_run_suite(argc, argv, &suite);
}
