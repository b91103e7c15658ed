/*
 * Host driver (nicsim_host.h): attach to a NIC over its UNIX socket, map the
 * context segment, post commands and work requests, take completions and
 * events, and wait for the NIC.
 *
 * The host owns cmdq.prod, cplq.cons, eq.cons and, per QP slot, sq.prod,
 * rq.prod and cq.cons; the driver keeps private copies of all of them (the
 * shared words are only written, never trusted back) and copies of the
 * geometry validated at attach, so nothing the NIC changes in the header
 * later can make the driver index outside the segment.  The private
 * consumer indices are read lock-free by nic_host_pending(), so they are
 * stored with relaxed atomics.
 *
 * Waiting (nic_host_await, the one wait of this driver, used for commands
 * and by the provider's progress engine alike): spin on the caller's ready
 * function for about spin_ns, yielding the CPU every few dozen iterations
 * (two cores are shared by every process of a test) and at once when the NIC
 * polls on this CPU; then announce host_waiting, fence, re-check, and sleep
 * in poll() on the interrupt eventfd and the socket.  The socket reports the
 * NIC's death (hangup); nic_state reports a context the NIC put in error.
 * A yield that takes more than a moment means other tasks wait for this CPU:
 * each further yield would cost a whole time slice of theirs (and on an
 * EEVDF scheduler pushes this thread's deadline a slice later every time),
 * so the waiter stops spinning and sleeps, and for a while
 * (NIC_HOST_CONTENDED_NS) its waits do not yield: they spin only while the
 * NIC runs on another CPU, and sleep at once when it shares this one.
 *
 * Besides nic_host_cmd(), the provider uses the split nic_host_post() and
 * nic_host_cmd_poll() (driver.h) to overlap a command with its own work and
 * to wait for it with its own progress engine.
 *
 * A command that timed out stays posted; its completion may still arrive.
 * Such tags are remembered as abandoned (one range, since commands are
 * serialised) and their late completions are consumed and dropped, so a
 * timeout does not desynchronise the rings.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "nicsim_host.h"
#include "nicsim_ring.h"

#define NIC_HOST_SPIN_NS 20000u  /* spin this long before sleeping */
#define NIC_HOST_YIELD_EVERY 32u /* sched_yield() every so many spins */
/* A sched_yield() longer than this gave the CPU to another task's slice. */
#define NIC_HOST_YIELD_SLOW_NS 200000u
/* After such a yield, waits do not yield for this long. */
#define NIC_HOST_CONTENDED_NS 100000000u
#define NIC_HOST_NFDS 3 /* memfd, doorbell, interrupt */

struct nic_host {
	pthread_mutex_t lock; /* serialises posting and waiting */
	int sock;
	int db_fd;  /* doorbell: host -> NIC */
	int irq_fd; /* interrupt: NIC -> host */
	void *seg;
	size_t seg_size;
	struct nic_ctx_hdr *hdr;
	struct nic_cmd *cmdq;
	struct nic_cpl *cplq;
	uint32_t depth;    /* validated at attach */
	uint32_t cmd_prod; /* private copy of cmdq.prod */
	uint32_t cpl_cons; /* private copy of cplq.cons (relaxed atomic) */
	uint64_t next_tag; /* tag of the next command */
	uint64_t stale_lo; /* abandoned tags: [stale_lo, stale_hi) */
	uint64_t stale_hi;
	uint64_t contended_until; /* now_ns() before which waits do not spin */
	struct nic_hello_reply info;
	/* The shared buffers nic_host_shm_alloc made and the NIC maps (under
	 * lock): nic_host_shm_free unmaps only one of them, exactly as
	 * allocated, never memory the caller got elsewhere. */
	struct host_shm {
		void *addr;
		size_t len;
	} shm[NIC_SHM_MAX];
	uint32_t nshm;
	/* Queue pairs and events (ABI 2); the caller serialises their use. */
	struct nic_event *eq;
	char *qp_base;    /* slot 0 */
	uint32_t eq_cons; /* private copy of eq.cons (relaxed atomic) */
	struct host_qp {
		uint32_t sq_prod, rq_prod;
		uint32_t cq_cons; /* relaxed atomic */
		uint32_t rq_done; /* receive completions taken (recv_inline) */
		bool recv_inline; /* NIC_QP_F_RECV_INLINE */
	} qp[NIC_QP_SLOTS];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wait until fd is ready for events (POLLIN or POLLOUT) or timeout_ms
 * passes: 0, -ETIMEDOUT, -errno. */
static int wait_ready(int fd, short events, int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = events};
		uint64_t now = now_ns();
		int r;

		if (now >= deadline)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)((deadline - now + 999999u) / 1000000u));
		if (r > 0)
			return 0;
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* Wait until fd is readable or timeout_ms passes: 0, -ETIMEDOUT, -errno. */
static int wait_readable(int fd, int timeout_ms)
{
	return wait_ready(fd, POLLIN, timeout_ms);
}

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/*
 * Receive the hello reply and exactly NIC_HOST_NFDS descriptors.  Every
 * descriptor that arrives is either returned in fds or closed.
 */
static int recv_reply(int sock, struct nic_hello_reply *reply, int *fds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * (NIC_HOST_NFDS + 4))];
	} ctl;
	struct iovec iov = {.iov_base = reply, .iov_len = sizeof(*reply)};
	struct msghdr msg = {
	    .msg_iov = &iov,
	    .msg_iovlen = 1,
	    .msg_control = ctl.buf,
	    .msg_controllen = sizeof(ctl.buf),
	};
	int nfds = 0, err = 0;
	ssize_t n;

	for (int i = 0; i < NIC_HOST_NFDS; i++)
		fds[i] = -1;
	err = wait_readable(sock, NIC_HOST_CMD_TIMEOUT_MS);
	if (err)
		return err;
	do {
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		size_t cnt;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < cnt; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (nfds < NIC_HOST_NFDS)
				fds[nfds] = fd;
			else
				close(fd);
			nfds++;
		}
	}
	if (n == 0)
		err = -ECONNRESET;
	else if ((size_t)n != sizeof(*reply) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		err = -EPROTO;
	else if (reply->magic != NIC_ABI_MAGIC)
		err = -EPROTO;
	else if (reply->abi_version != NIC_ABI_VERSION || reply->status == NIC_STATUS_BAD_VERSION)
		err = -EPROTONOSUPPORT;
	else if (reply->status != NIC_STATUS_OK)
		err = nic_status_errno(reply->status) ? nic_status_errno(reply->status) : -EPROTO;
	else if (nfds != NIC_HOST_NFDS)
		err = -EPROTO;
	if (err)
		close_fds(fds, NIC_HOST_NFDS);
	return err;
}

/*
 * Who serves the socket: the kernel's word (SO_PEERCRED, taken when the NIC
 * listened), never the NIC's reply.  A NIC reads and writes this process's
 * memory, and this process lets it (PR_SET_PTRACER), so it must run as this
 * process's effective user, or as root (which may do so anyway: trusting it
 * grants nothing new).  A NIC of another user could be anyone's listener
 * planted in a run directory; it is refused with -EACCES before a byte is
 * sent to it.  *pid gets the NIC's pid (0 if the kernel could not name it in
 * this pid namespace).
 */
static int check_nic_peer(int sock, uint32_t *pid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	if (cred.uid != geteuid() && cred.uid != 0)
		return -EACCES;
	*pid = cred.pid > 0 ? (uint32_t)cred.pid : 0;
	return 0;
}

/* Check the segment header against the geometry this driver was built for. */
static int check_segment(struct nic_host *h)
{
	const struct nic_ctx_hdr *hdr = h->hdr;

	if (hdr->magic != NIC_ABI_MAGIC || hdr->abi_version != NIC_ABI_VERSION ||
	    hdr->seg_size != h->seg_size || hdr->ctx_id != h->info.ctx_id ||
	    hdr->cmdq_depth != NIC_CMDQ_DEPTH || hdr->cmdq_off != NIC_CTX_CMDQ_OFF ||
	    hdr->cplq_off != NIC_CTX_CPLQ_OFF || hdr->eq_off != NIC_CTX_EQ_OFF ||
	    hdr->qp_off != NIC_CTX_QP_OFF)
		return -EPROTO;
	h->depth = NIC_CMDQ_DEPTH;
	h->cmdq = (struct nic_cmd *)((char *)h->seg + NIC_CTX_CMDQ_OFF);
	h->cplq = (struct nic_cpl *)((char *)h->seg + NIC_CTX_CPLQ_OFF);
	h->eq = (struct nic_event *)((char *)h->seg + NIC_CTX_EQ_OFF);
	h->qp_base = (char *)h->seg + NIC_CTX_QP_OFF;
	h->eq_cons = ring_own(&h->hdr->eq.cons);
	if (ring_count(ring_observe(&h->hdr->eq.prod), h->eq_cons) > NIC_EQ_DEPTH)
		return -EPROTO;
	/* Start from the indices as the NIC left them; both rings must be empty. */
	h->cmd_prod = ring_own(&h->hdr->cmdq.prod);
	h->cpl_cons = ring_own(&h->hdr->cplq.cons);
	if (ring_observe(&h->hdr->cmdq.cons) != h->cmd_prod ||
	    ring_observe(&h->hdr->cplq.prod) != h->cpl_cons || h->cmd_prod != h->cpl_cons)
		return -EPROTO;
	return 0;
}

int nic_host_attach(const char *path, struct nic_host **out)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct nic_hello hello = {
	    .magic = NIC_ABI_MAGIC,
	    .abi_version = NIC_ABI_VERSION,
	    .role = NIC_ROLE_HOST,
	    .pid = (uint32_t)getpid(),
	};
	int fds[NIC_HOST_NFDS] = {-1, -1, -1};
	struct nic_host *h;
	struct stat st;
	uint32_t nic_pid = 0;
	ssize_t n;
	int err;

	if (!path || !out)
		return -EINVAL;
	*out = NULL;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->sock = h->db_fd = h->irq_fd = -1;
	h->seg = MAP_FAILED;
	h->next_tag = 1;
	err = pthread_mutex_init(&h->lock, NULL);
	if (err) {
		free(h);
		return -err;
	}

	h->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (h->sock < 0) {
		err = -errno;
		goto fail;
	}
	if (connect(h->sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = -errno;
		goto fail;
	}
	err = check_nic_peer(h->sock, &nic_pid);
	if (err)
		goto fail;
	do {
		n = send(h->sock, &hello, sizeof(hello), MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		err = -errno;
		/* A NIC that refuses this process at once (another user's)
		 * answers and closes before the hello arrives: its answer
		 * says why. */
		if (err == -EPIPE) {
			int why = recv_reply(h->sock, &h->info, fds);

			if (why < 0 && h->info.magic == NIC_ABI_MAGIC)
				err = why;
		}
		goto fail;
	}
	if ((size_t)n != sizeof(hello)) {
		err = -EPROTO;
		goto fail;
	}
	err = recv_reply(h->sock, &h->info, fds);
	if (err)
		goto fail;
	/* The reply's pid is the NIC's say-so; the kernel's is the one used. */
	h->info.nic_pid = nic_pid;
	h->db_fd = fds[1];
	h->irq_fd = fds[2];

	/* Map only a segment of exactly the size this ABI defines. */
	if (h->info.seg_size != NIC_CTX_SEG_SIZE || fstat(fds[0], &st) < 0 ||
	    !S_ISREG(st.st_mode) || (uint64_t)st.st_size < h->info.seg_size) {
		err = -EPROTO;
		goto fail;
	}
	h->seg_size = NIC_CTX_SEG_SIZE;
	h->seg = mmap(NULL, h->seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	if (h->seg == MAP_FAILED) {
		err = -errno;
		goto fail;
	}
	close(fds[0]);
	fds[0] = -1;
	h->hdr = h->seg;
	err = check_segment(h);
	if (err)
		goto fail;

	/*
	 * Let the NIC, the process SO_PEERCRED named, reach this process's
	 * memory where Yama restricts ptrace.  Without Yama prctl fails with
	 * EINVAL and nothing is needed.  Pid 0 would clear the setting.
	 */
	if (nic_pid)
		(void)prctl(PR_SET_PTRACER, (unsigned long)nic_pid, 0, 0, 0);
	*out = h;
	return 0;

fail:
	if (fds[0] >= 0)
		close(fds[0]);
	nic_host_detach(h);
	return err;
}

void nic_host_detach(struct nic_host *h)
{
	if (!h)
		return;
	if (h->seg != MAP_FAILED)
		munmap(h->seg, h->seg_size);
	if (h->irq_fd >= 0)
		close(h->irq_fd);
	if (h->db_fd >= 0)
		close(h->db_fd);
	if (h->sock >= 0)
		close(h->sock);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

const struct nic_hello_reply *nic_host_info(const struct nic_host *h)
{
	return &h->info;
}

void *nic_host_segment(struct nic_host *h, size_t *size)
{
	if (size)
		*size = h->seg_size;
	return h->seg;
}

int nic_host_doorbell_fd(const struct nic_host *h)
{
	return h->db_fd;
}

uint64_t nic_host_now_ns(void)
{
	return now_ns();
}

/* Relaxed atomics for the private indices that nic_host_pending() reads. */
static uint32_t idx_get(const uint32_t *i)
{
	return __atomic_load_n(i, __ATOMIC_RELAXED);
}

static void idx_set(uint32_t *i, uint32_t v)
{
	__atomic_store_n(i, v, __ATOMIC_RELAXED);
}

/* 0 while the context is usable, -ENETDOWN once the NIC put it in error. */
static int ctx_state(const struct nic_host *h)
{
	return ring_flag_get(&h->hdr->nic_state) == NIC_CTX_OK ? 0 : -ENETDOWN;
}

/*
 * Look at the socket without blocking: -ENETDOWN on hangup, error or end of
 * file, else 0.  After the hello the NIC sends only notices of connection
 * ends (nic_host_notify_drain); one read here takes one of them.
 */
static int sock_state(struct nic_host *h)
{
	struct pollfd pfd = {.fd = h->sock, .events = POLLIN};
	char buf[64];
	ssize_t n;

	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	if (pfd.revents & (POLLHUP | POLLERR | POLLNVAL))
		return -ENETDOWN;
	n = recv(h->sock, buf, sizeof(buf), MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return -ENETDOWN;
	return 0;
}

int nic_host_check(struct nic_host *h)
{
	int err = ctx_state(h);

	return err ? err : sock_state(h);
}

int nic_host_notify_fd(const struct nic_host *h)
{
	return h->sock;
}

int nic_host_notify_drain(struct nic_host *h)
{
	char buf[64];
	int n = 0;

	for (;;) {
		ssize_t r = recv(h->sock, buf, sizeof(buf), MSG_DONTWAIT);

		if (r > 0) {
			n++;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return n;
		return -ENETDOWN; /* end of file or an error: the NIC is gone */
	}
}

void nic_host_shutdown(struct nic_host *h)
{
	/* shutdown, not close: a poll() on the descriptor in another thread
	 * sees the hangup, and the number cannot be reused under it. */
	shutdown(h->sock, SHUT_RDWR);
}

void nic_host_kick(struct nic_host *h)
{
	uint64_t one = 1;

	/* The interrupt eventfd is ours to write too: any value is a wake-up.
	 * EAGAIN (counter saturated) still leaves it readable. */
	if (write(h->irq_fd, &one, sizeof(one)) < 0 && errno != EAGAIN && errno != EINTR)
		return;
}

/*
 * Sleep until the interrupt fires, the socket reports something or
 * deadline passes.  Returns 0 to re-check the rings, -ENETDOWN, -ETIMEDOUT.
 */
static int sleep_for_irq(struct nic_host *h, uint64_t deadline)
{
	struct pollfd pfd[2] = {
	    {.fd = h->irq_fd, .events = POLLIN},
	    {.fd = h->sock, .events = POLLIN},
	};
	uint64_t now = now_ns();
	int r;

	if (now >= deadline)
		return -ETIMEDOUT;
	r = poll(pfd, 2, (int)((deadline - now + 999999u) / 1000000u));
	if (r < 0)
		return errno == EINTR ? 0 : -ENETDOWN;
	if (pfd[1].revents & (POLLHUP | POLLERR | POLLNVAL))
		return -ENETDOWN;
	if ((pfd[1].revents & POLLIN) && sock_state(h))
		return -ENETDOWN;
	if (pfd[0].revents & (POLLERR | POLLNVAL))
		return -ENETDOWN;
	if (pfd[0].revents & POLLIN) {
		uint64_t v;
		/* Only the one waiter of this attachment reads the interrupt. */
		if (read(h->irq_fd, &v, sizeof(v)) < 0 && errno != EAGAIN && errno != EINTR)
			return -ENETDOWN;
	}
	return 0;
}

/* Publish the CPU this waiter runs on (plus 1; 0 if unknown) when it changed. */
static uint32_t publish_cpu(struct nic_host *h)
{
	int cpu = sched_getcpu();
	uint32_t me = cpu < 0 ? 0 : (uint32_t)cpu + 1;

	if (ring_flag_get(&h->hdr->host_cpu) != me)
		ring_flag_set(&h->hdr->host_cpu, me);
	return me;
}

/*
 * Give the CPU away once.  False when that took long enough that other tasks
 * ran: the CPU is contended, and this attachment's waits stop yielding for
 * NIC_HOST_CONTENDED_NS (waits of several threads may race on the word; any
 * of their values will do).
 */
static bool yield_cheap(struct nic_host *h)
{
	uint64_t t0 = now_ns(), t1;

	sched_yield();
	t1 = now_ns();
	if (t1 - t0 < NIC_HOST_YIELD_SLOW_NS)
		return true;
	__atomic_store_n(&h->contended_until, t1 + NIC_HOST_CONTENDED_NS, __ATOMIC_RELAXED);
	return false;
}

int nic_host_await(struct nic_host *h, int (*ready)(void *arg), void *arg, uint64_t deadline_ns,
		   uint32_t spin_ns)
{
	uint64_t contended = __atomic_load_n(&h->contended_until, __ATOMIC_RELAXED);
	uint32_t me = publish_cpu(h);
	uint64_t spin_end = 0;
	int err;

	/* The CPU was contended lately: spin without yielding, and only while
	 * the NIC runs on another CPU. */
	if (contended && now_ns() >= contended) {
		__atomic_store_n(&h->contended_until, 0, __ATOMIC_RELAXED);
		contended = 0;
	}
	/*
	 * The clock is read only after the first batch of polls, so a wait
	 * that ends at once costs no clock read.
	 */
	for (uint32_t i = 1; spin_ns; i++) {
		if (ready(arg))
			return 0;
		/* The NIC polls on this CPU: let it run rather than spin. */
		if (me && ring_flag_get(&h->hdr->nic_cpu) == me) {
			if (contended || !yield_cheap(h))
				break;
			me = publish_cpu(h);
		}
		if (i % NIC_HOST_YIELD_EVERY == 0) {
			uint64_t now = now_ns();

			if (!spin_end)
				spin_end = now + spin_ns;
			if (now >= spin_end || now >= deadline_ns ||
			    (!contended && !yield_cheap(h)))
				break;
		}
		ring_cpu_relax();
	}

	err = ctx_state(h);
	if (err)
		return err;
	/* Dekker handshake with the NIC: flag, fence, re-check, sleep. */
	ring_flag_set(&h->hdr->host_waiting, 1);
	ring_fence();
	if (ready(arg)) {
		ring_flag_set(&h->hdr->host_waiting, 0);
		return 0;
	}
	err = sleep_for_irq(h, deadline_ns);
	ring_flag_set(&h->hdr->host_waiting, 0);
	return err ? err : ctx_state(h);
}

/* Ring the doorbell after publishing a producer index, if the NIC sleeps. */
static int doorbell(struct nic_host *h)
{
	ring_fence();
	if (ring_flag_get(&h->hdr->nic_sleeping)) {
		uint64_t one = 1;
		/* EAGAIN (counter saturated) still leaves the NIC woken. */
		if (write(h->db_fd, &one, sizeof(one)) < 0 && errno != EAGAIN && errno != EINTR)
			return -ENETDOWN;
	}
	return 0;
}

/* ---- Commands --------------------------------------------------------------- */

/* Remember a command given up on, so that its late completion is dropped. */
static void abandon(struct nic_host *h, uint64_t tag)
{
	if (h->stale_lo == h->stale_hi)
		h->stale_lo = tag;
	h->stale_hi = tag + 1;
}

/* Whether a command can be posted now (h->lock held): 0, -ENETDOWN, -EBUSY. */
static int post_room_locked(struct nic_host *h)
{
	uint32_t cons = idx_get(&h->cpl_cons);
	int err = ctx_state(h);

	if (err)
		return err;
	/*
	 * Commands posted and completions not yet consumed: bounded by the depth
	 * of both rings (they differ from zero only after a timeout).
	 */
	if (ring_count(h->cmd_prod, cons) >= h->depth ||
	    ring_count(h->cmd_prod, ring_observe(&h->hdr->cmdq.cons)) >= h->depth)
		return -EBUSY;
	return 0;
}

/* Post one command (h->lock held): 0 with cmd->tag set, -ENETDOWN, -EBUSY. */
static int post_locked(struct nic_host *h, struct nic_cmd *cmd)
{
	int err = post_room_locked(h);

	if (err)
		return err;
	cmd->tag = h->next_tag++;
	memcpy(&h->cmdq[h->cmd_prod & (h->depth - 1)], cmd, sizeof(*cmd));
	h->cmd_prod++;
	ring_publish(&h->hdr->cmdq.prod, h->cmd_prod);
	err = doorbell(h);
	if (err)
		abandon(h, cmd->tag);
	return err;
}

/* Completions waiting in the ring (h->lock held, or a lock-free hint). */
static int cpl_ready(void *arg)
{
	struct nic_host *h = arg;

	return ring_observe(&h->hdr->cplq.prod) != idx_get(&h->cpl_cons);
}

/*
 * Take completions until tag's (h->lock held): 0 with *cpl, -EAGAIN (not
 * there yet), -EPROTO (a completion of no command waited for, or an
 * implausible producer index).
 */
static int take_locked(struct nic_host *h, uint64_t tag, struct nic_cpl *cpl)
{
	for (;;) {
		uint32_t cons = idx_get(&h->cpl_cons);
		uint32_t prod = ring_observe(&h->hdr->cplq.prod);

		if (prod == cons)
			return -EAGAIN;
		if (ring_count(prod, cons) > h->depth)
			return -EPROTO;
		memcpy(cpl, &h->cplq[cons & (h->depth - 1)], sizeof(*cpl));
		idx_set(&h->cpl_cons, cons + 1);
		ring_publish(&h->hdr->cplq.cons, cons + 1);
		if (cpl->tag == tag) {
			/* Once every posted command's completion is consumed, none is stale. */
			if (cons + 1 == h->cmd_prod)
				h->stale_lo = h->stale_hi = 0;
			return 0;
		}
		if (cpl->tag < h->stale_lo || cpl->tag >= h->stale_hi)
			return -EPROTO;
		/* A late completion of an abandoned command: drop it. */
	}
}

/* Wait for the completion of the command tagged tag (h->lock held). */
static int wait_locked(struct nic_host *h, uint64_t tag, struct nic_cpl *cpl, int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
	int err;

	for (;;) {
		err = take_locked(h, tag, cpl);
		if (err != -EAGAIN)
			break;
		err = nic_host_await(h, cpl_ready, h, deadline, NIC_HOST_SPIN_NS);
		if (err)
			break;
	}
	/* The command stays posted; drop its completion if it ever comes. */
	if (err)
		abandon(h, tag);
	return err;
}

int nic_host_cmd(struct nic_host *h, struct nic_cmd *cmd, struct nic_cpl *cpl, int timeout_ms)
{
	int err;

	if (!h || !cmd || !cpl || timeout_ms < 0)
		return -EINVAL;
	pthread_mutex_lock(&h->lock);
	err = post_locked(h, cmd);
	if (!err)
		err = wait_locked(h, cmd->tag, cpl, timeout_ms);
	pthread_mutex_unlock(&h->lock);
	return err;
}

int nic_host_post(struct nic_host *h, struct nic_cmd *cmd)
{
	int err;

	pthread_mutex_lock(&h->lock);
	err = post_locked(h, cmd);
	pthread_mutex_unlock(&h->lock);
	return err;
}

int nic_host_cmd_poll(struct nic_host *h, uint64_t tag, struct nic_cpl *cpl)
{
	int err;

	pthread_mutex_lock(&h->lock);
	err = take_locked(h, tag, cpl);
	pthread_mutex_unlock(&h->lock);
	return err;
}

void nic_host_cmd_abandon(struct nic_host *h, uint64_t tag)
{
	pthread_mutex_lock(&h->lock);
	abandon(h, tag);
	pthread_mutex_unlock(&h->lock);
}

/* ---- Queue pairs and events ------------------------------------------------- */

static struct nic_qp_hdr *qp_hdr(struct nic_host *h, uint32_t slot)
{
	return (struct nic_qp_hdr *)(h->qp_base + (size_t)slot * NIC_QP_SLOT_SIZE);
}

int nic_host_qp_open(struct nic_host *h, uint32_t slot, uint32_t flags)
{
	if (slot >= NIC_QP_SLOTS)
		return -EINVAL;
	h->qp[slot].sq_prod = 0;
	h->qp[slot].rq_prod = 0;
	h->qp[slot].rq_done = 0;
	h->qp[slot].recv_inline = (flags & NIC_QP_F_RECV_INLINE) != 0;
	idx_set(&h->qp[slot].cq_cons, 0);
	return 0;
}

/*
 * The one posting path of both work queues: room is judged by the NIC's
 * consumer index (a request is taken before it completes, so a caller that
 * bounds its requests not yet completed never sees -EAGAIN); on a
 * recv_inline QP, a receive's entry is kept until its completion is taken.
 */
static int post_wqe(struct nic_host *h, uint32_t slot, bool recv, const void *wqe)
{
	struct nic_qp_hdr *q;
	struct nic_ring_idx *ri;
	uint32_t *prod, depth;
	char *ring;
	int err;

	if (slot >= NIC_QP_SLOTS)
		return -EINVAL;
	err = ctx_state(h);
	if (err)
		return err;
	q = qp_hdr(h, slot);
	if (recv) {
		ri = &q->rq;
		prod = &h->qp[slot].rq_prod;
		depth = NIC_RQ_DEPTH;
		ring = (char *)q + NIC_QP_RQ_OFF;
	} else {
		ri = &q->sq;
		prod = &h->qp[slot].sq_prod;
		depth = NIC_SQ_DEPTH;
		ring = (char *)q + NIC_QP_SQ_OFF;
	}
	_Static_assert(sizeof(struct nic_send_wqe) == sizeof(struct nic_recv_wqe), "one wqe size");
	if (ring_count(*prod, ring_observe(&ri->cons)) >= depth ||
	    (recv && h->qp[slot].recv_inline && ring_count(*prod, h->qp[slot].rq_done) >= depth))
		return -EAGAIN;
	memcpy(ring + (size_t)(*prod & (depth - 1)) * sizeof(struct nic_send_wqe), wqe,
	       sizeof(struct nic_send_wqe));
	(*prod)++;
	ring_publish(&ri->prod, *prod);
	return doorbell(h);
}

int nic_host_post_send(struct nic_host *h, uint32_t slot, const struct nic_send_wqe *wqe)
{
	return post_wqe(h, slot, false, wqe);
}

int nic_host_post_recv(struct nic_host *h, uint32_t slot, const struct nic_recv_wqe *wqe)
{
	return post_wqe(h, slot, true, wqe);
}

void nic_host_scatter(const struct nic_recv_wqe *r, const uint8_t *data, uint32_t len)
{
	if (len > NIC_RECV_INLINE_MAX)
		len = NIC_RECV_INLINE_MAX; /* the NIC wrote no more */
	for (uint32_t i = 0; i < r->num_sge && i < NIC_MAX_SGE && len; i++) {
		uint32_t n = r->sge[i].len < len ? r->sge[i].len : len;

		memcpy((void *)(uintptr_t)r->sge[i].va, data, n);
		data += n;
		len -= n;
	}
}

/* Take one entry of a NIC-produced ring into out: 1, 0 (empty), -EPROTO. */
static int take_entry(struct nic_ring_idx *ri, uint32_t *cons, const void *ring, uint32_t depth,
		      size_t size, void *out)
{
	uint32_t c = idx_get(cons);
	uint32_t prod = ring_observe(&ri->prod);

	if (prod == c)
		return 0;
	if (ring_count(prod, c) > depth)
		return -EPROTO;
	memcpy(out, (const char *)ring + (size_t)(c & (depth - 1)) * size, size);
	idx_set(cons, c + 1);
	ring_publish(&ri->cons, c + 1);
	return 1;
}

int nic_host_poll_cq(struct nic_host *h, uint32_t slot, struct nic_cqe *out)
{
	struct host_qp *hq;
	struct nic_qp_hdr *q;
	uint32_t c, prod;

	if (slot >= NIC_QP_SLOTS)
		return -EINVAL;
	q = qp_hdr(h, slot);
	hq = &h->qp[slot];
	if (!hq->recv_inline)
		return take_entry(&q->cq, &hq->cq_cons, (char *)q + NIC_QP_CQ_OFF, NIC_CQ_DEPTH,
				  sizeof(*out), out);
	/* As take_entry, with a small SEND's data copied out of the entry
	 * beside the completion before the NIC may reuse it. */
	c = idx_get(&hq->cq_cons);
	prod = ring_observe(&q->cq.prod);
	if (prod == c)
		return 0;
	if (ring_count(prod, c) > NIC_CQ_DEPTH)
		return -EPROTO;
	memcpy(out, (char *)q + NIC_QP_CQ_OFF + (size_t)(c & (NIC_CQ_DEPTH - 1)) * sizeof(*out),
	       sizeof(*out));
	if (out->opcode == NIC_WC_RECV || out->opcode == NIC_WC_RECV_RDMA_IMM) {
		const struct nic_recv_wqe *r =
		    (const struct nic_recv_wqe *)((char *)q + NIC_QP_RQ_OFF) +
		    (hq->rq_done & (NIC_RQ_DEPTH - 1));

		if (out->status == NIC_WC_SUCCESS && (out->flags & NIC_WC_F_INLINE))
			nic_host_scatter(r,
					 (const uint8_t *)q + NIC_QP_CQ_DATA_OFF +
					     (size_t)(c & (NIC_CQ_DEPTH - 1)) * NIC_RECV_INLINE_MAX,
					 out->byte_len);
		hq->rq_done++;
	}
	idx_set(&hq->cq_cons, c + 1);
	ring_publish(&q->cq.cons, c + 1);
	return 1;
}

int nic_host_poll_event(struct nic_host *h, struct nic_event *out)
{
	return take_entry(&h->hdr->eq, &h->eq_cons, h->eq, NIC_EQ_DEPTH, sizeof(*out), out);
}

int nic_host_pending(const struct nic_host *h, uint32_t slot_mask)
{
	if (ring_observe(&h->hdr->eq.prod) != idx_get(&h->eq_cons) ||
	    ring_observe(&h->hdr->cplq.prod) != idx_get(&h->cpl_cons))
		return 1;
	while (slot_mask) {
		uint32_t slot = (uint32_t)__builtin_ctz(slot_mask);
		const struct nic_qp_hdr *q =
		    (const struct nic_qp_hdr *)(h->qp_base + (size_t)slot * NIC_QP_SLOT_SIZE);

		if (ring_observe(&q->cq.prod) != idx_get(&h->qp[slot].cq_cons))
			return 1;
		slot_mask &= slot_mask - 1;
	}
	return 0;
}

/* ---- Shared buffers (ABI 6) ------------------------------------------------ */

/* Send fd on the attach socket as a shared-buffer descriptor. */
static int send_shm_fd(struct nic_host *h, int fd)
{
	char magic[NIC_SHM_MSG_LEN];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = magic, .iov_len = sizeof(magic)};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *cm;
	ssize_t n;

	memcpy(magic, NIC_SHM_MSG_MAGIC, sizeof(magic));
	memset(u.buf, 0, sizeof(u.buf));
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	for (;;) {
		int err;

		n = sendmsg(h->sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return errno == EPIPE || errno == ECONNRESET ? -ENETDOWN : -errno;
		/* A NIC that does not read its socket is as gone as one that
		 * does not answer a command. */
		err = wait_ready(h->sock, POLLOUT, NIC_HOST_CMD_TIMEOUT_MS);
		if (err)
			return err;
	}
	return n == (ssize_t)sizeof(magic) ? 0 : -EIO;
}

/* SHM_MAP or SHM_UNMAP under h->lock: the NIC's status as an errno. */
static int shm_cmd_locked(struct nic_host *h, uint16_t opcode, uint64_t va, uint64_t len)
{
	struct nic_cmd cmd = {.opcode = opcode};
	struct nic_cpl cpl;
	int err;

	cmd.u.shm.va = va;
	cmd.u.shm.len = len;
	err = post_locked(h, &cmd);
	if (!err)
		err = wait_locked(h, cmd.tag, &cpl, NIC_HOST_CMD_TIMEOUT_MS);
	return err ? err : nic_status_errno(cpl.status);
}

static int shm_map_locked(struct nic_host *h, int fd, void *addr, size_t len);

int nic_host_shm_alloc(struct nic_host *h, size_t len, void **addr)
{
	const unsigned seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	long page = sysconf(_SC_PAGESIZE);
	void *p = MAP_FAILED;
	int fd, err;

	if (!h || !addr || len == 0 || page <= 0 || len > SIZE_MAX - (size_t)page)
		return -EINVAL;
	*addr = NULL;
	len = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
	fd = memfd_create("nicsim-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) < 0 || fcntl(fd, F_ADD_SEALS, seals) < 0) {
		err = -errno;
		goto out;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		err = -errno;
		goto out;
	}
	pthread_mutex_lock(&h->lock);
	/* The NIC maps no more than this per context. */
	if (h->nshm == NIC_SHM_MAX)
		err = -ENOMEM;
	else
		err = shm_map_locked(h, fd, p, len);
	if (!err)
		h->shm[h->nshm++] = (struct host_shm){.addr = p, .len = len};
	pthread_mutex_unlock(&h->lock);
out:
	close(fd);
	if (err) {
		if (p != MAP_FAILED)
			munmap(p, len);
		return err;
	}
	*addr = p;
	return 0;
}

int nic_host_shm_map(struct nic_host *h, int fd, void *addr, size_t len)
{
	int err;

	if (!h || fd < 0 || !addr || len == 0)
		return -EINVAL;
	pthread_mutex_lock(&h->lock);
	err = shm_map_locked(h, fd, addr, len);
	pthread_mutex_unlock(&h->lock);
	return err;
}

/* Send fd and map it at addr (h->lock held, so that the descriptor and its
 * SHM_MAP go together: no other command of this attachment comes between
 * them). */
static int shm_map_locked(struct nic_host *h, int fd, void *addr, size_t len)
{
	int err;

	/* Once the descriptor is sent, its SHM_MAP must be posted: else the
	 * NIC would give it to the next SHM_MAP.  So the ring must have room
	 * first (the other failures of posting mean the context is gone). */
	err = post_room_locked(h);
	if (!err)
		err = send_shm_fd(h, fd);
	if (!err) {
		err = shm_cmd_locked(h, NIC_CMD_SHM_MAP, (uintptr_t)addr, len);
		/* A map that completes late (after the deadline) must not
		 * outlive this failure: the NIC executes commands in order. */
		if (err == -ETIMEDOUT) {
			struct nic_cmd undo = {.opcode = NIC_CMD_SHM_UNMAP,
					       .u.shm.va = (uintptr_t)addr};

			if (post_locked(h, &undo) == 0)
				abandon(h, undo.tag);
		}
	}
	return err;
}

int nic_host_post_shm_map(struct nic_host *h, int fd, struct nic_cmd *cmd)
{
	int err;

	pthread_mutex_lock(&h->lock);
	/* As in shm_map_locked: room first, so that a descriptor once sent
	 * is always followed by its SHM_MAP. */
	err = post_room_locked(h);
	if (!err)
		err = send_shm_fd(h, fd);
	if (!err)
		err = post_locked(h, cmd);
	pthread_mutex_unlock(&h->lock);
	return err;
}

int nic_host_shm_unmap(struct nic_host *h, void *addr)
{
	int err;

	if (!h || !addr)
		return -EINVAL;
	pthread_mutex_lock(&h->lock);
	err = shm_cmd_locked(h, NIC_CMD_SHM_UNMAP, (uintptr_t)addr, 0);
	pthread_mutex_unlock(&h->lock);
	return err;
}

int nic_host_shm_free(struct nic_host *h, void *addr, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	uint32_t i;
	int err;

	if (!h || !addr || len == 0 || page <= 0 || len > SIZE_MAX - (size_t)page ||
	    (uintptr_t)addr % (size_t)page)
		return -EINVAL;
	len = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
	pthread_mutex_lock(&h->lock);
	for (i = 0; i < h->nshm; i++)
		if (h->shm[i].addr == addr && h->shm[i].len == len)
			break;
	/* Not a buffer of this attachment as allocated (another address or
	 * length, or freed already): nothing is touched, so that a mistaken
	 * call cannot unmap memory the caller still uses. */
	if (i == h->nshm) {
		pthread_mutex_unlock(&h->lock);
		return -EINVAL;
	}
	h->shm[i] = h->shm[--h->nshm];
	err = shm_cmd_locked(h, NIC_CMD_SHM_UNMAP, (uintptr_t)addr, 0);
	pthread_mutex_unlock(&h->lock);
	/* Unmapped here whatever the NIC said: a NIC that is gone holds
	 * nothing, and one that answers late has its own mapping. */
	munmap(addr, len);
	return err;
}
