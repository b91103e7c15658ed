/*
 * Host driver (nicsim_host.h): attach to a NIC over its UNIX socket, map the
 * context segment, post commands and wait for their completions.
 *
 * The host owns cmdq.prod and cplq.cons; the driver keeps private copies of
 * both (the shared words are only written, never trusted back) and copies of
 * the geometry validated at attach, so nothing the NIC changes in the header
 * later can make the driver index outside the segment.
 *
 * Waiting: spin on cplq.prod for about NIC_HOST_SPIN_NS, yielding the CPU
 * every few dozen iterations (two cores are shared by every process of a
 * test), then announce host_waiting, fence, re-check, and sleep in poll() on
 * the interrupt eventfd and the socket.  The socket reports the NIC's death
 * (hangup); nic_state reports a context the NIC put in error.
 *
 * Besides nic_host_cmd(), the provider uses the split nic_host_post() and
 * nic_host_wait() (driver.h) to overlap a command with its own work.
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
#define NIC_HOST_NFDS 3          /* memfd, doorbell, interrupt */

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
	uint32_t cpl_cons; /* private copy of cplq.cons */
	uint64_t next_tag; /* tag of the next command */
	uint64_t stale_lo; /* abandoned tags: [stale_lo, stale_hi) */
	uint64_t stale_hi;
	struct nic_hello_reply info;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wait until fd is readable or timeout_ms passes: 0, -ETIMEDOUT, -errno. */
static int wait_readable(int fd, int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
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
	else if (reply->magic != NIC_ABI_MAGIC || reply->abi_version != NIC_ABI_VERSION)
		err = -EPROTO;
	else if (reply->status != NIC_STATUS_OK)
		err = nic_status_errno(reply->status) ? nic_status_errno(reply->status) : -EPROTO;
	else if (nfds != NIC_HOST_NFDS)
		err = -EPROTO;
	if (err)
		close_fds(fds, NIC_HOST_NFDS);
	return err;
}

/* Check the segment header against the geometry this driver was built for. */
static int check_segment(struct nic_host *h)
{
	const struct nic_ctx_hdr *hdr = h->hdr;

	if (hdr->magic != NIC_ABI_MAGIC || hdr->abi_version != NIC_ABI_VERSION ||
	    hdr->seg_size != h->seg_size || hdr->ctx_id != h->info.ctx_id ||
	    hdr->cmdq_depth != NIC_CMDQ_DEPTH || hdr->cmdq_off != NIC_CTX_CMDQ_OFF ||
	    hdr->cplq_off != NIC_CTX_CPLQ_OFF)
		return -EPROTO;
	h->depth = NIC_CMDQ_DEPTH;
	h->cmdq = (struct nic_cmd *)((char *)h->seg + NIC_CTX_CMDQ_OFF);
	h->cplq = (struct nic_cpl *)((char *)h->seg + NIC_CTX_CPLQ_OFF);
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
	do {
		n = send(h->sock, &hello, sizeof(hello), MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		err = -errno;
		goto fail;
	}
	if ((size_t)n != sizeof(hello)) {
		err = -EPROTO;
		goto fail;
	}
	err = recv_reply(h->sock, &h->info, fds);
	if (err)
		goto fail;
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
	 * Let the NIC reach this process's memory where Yama restricts ptrace.
	 * Without Yama prctl fails with EINVAL and nothing is needed.
	 */
	(void)prctl(PR_SET_PTRACER, (unsigned long)h->info.nic_pid, 0, 0, 0);
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

/* 0 while the context is usable, -ENETDOWN once the NIC put it in error. */
static int ctx_state(const struct nic_host *h)
{
	return ring_flag_get(&h->hdr->nic_state) == NIC_CTX_OK ? 0 : -ENETDOWN;
}

/*
 * Sleep until the interrupt fires, the socket reports something or
 * deadline passes.  Returns 0 to re-check the ring, -ENETDOWN, -ETIMEDOUT.
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
	if (pfd[1].revents & POLLIN) {
		char buf[64];
		/* The NIC sends nothing after the hello: EOF means it is gone. */
		ssize_t n = recv(h->sock, buf, sizeof(buf), MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return -ENETDOWN;
	}
	if (pfd[0].revents & (POLLERR | POLLNVAL))
		return -ENETDOWN;
	if (pfd[0].revents & POLLIN) {
		uint64_t v;
		/* Only this thread (under h->lock) reads the interrupt eventfd. */
		if (read(h->irq_fd, &v, sizeof(v)) < 0 && errno != EAGAIN && errno != EINTR)
			return -ENETDOWN;
	}
	return 0;
}

/*
 * A wait's clock.  The clock is read only once a wait is not instant (after
 * the first batch of spins), so a fast round trip costs no clock reads; the
 * deadline then counts from that first read.
 */
struct wait_clock {
	int timeout_ms;
	uint64_t deadline; /* 0: not started */
	uint64_t spin_end; /* 0: spin phase not started */
};

/* Publish the CPU this waiter runs on (plus 1; 0 if unknown) when it changed. */
static uint32_t publish_cpu(struct nic_host *h)
{
	int cpu = sched_getcpu();
	uint32_t me = cpu < 0 ? 0 : (uint32_t)cpu + 1;

	if (ring_flag_get(&h->hdr->host_cpu) != me)
		ring_flag_set(&h->hdr->host_cpu, me);
	return me;
}

/* Wait until a completion is available: 0, -ENETDOWN, -ETIMEDOUT, -EPROTO. */
static int wait_cpl(struct nic_host *h, struct wait_clock *w)
{
	uint32_t prod, me = publish_cpu(h);

	for (;;) {
		int err;

		for (uint32_t i = 1;; i++) {
			prod = ring_observe(&h->hdr->cplq.prod);
			if (prod != h->cpl_cons)
				goto ready;
			/* The NIC polls on this CPU: let it run rather than spin. */
			if (me && ring_flag_get(&h->hdr->nic_cpu) == me) {
				sched_yield();
				me = publish_cpu(h);
			}
			if (i % NIC_HOST_YIELD_EVERY == 0) {
				uint64_t now = now_ns();

				if (!w->deadline)
					w->deadline = now + (uint64_t)w->timeout_ms * 1000000u;
				if (!w->spin_end)
					w->spin_end = now + NIC_HOST_SPIN_NS;
				if (now >= w->spin_end)
					break;
				sched_yield();
			}
			ring_cpu_relax();
		}

		err = ctx_state(h);
		if (err)
			return err;
		/* Dekker handshake with the NIC: flag, fence, re-check, sleep. */
		ring_flag_set(&h->hdr->host_waiting, 1);
		ring_fence();
		prod = ring_observe(&h->hdr->cplq.prod);
		if (prod != h->cpl_cons) {
			ring_flag_set(&h->hdr->host_waiting, 0);
			goto ready;
		}
		err = sleep_for_irq(h, w->deadline);
		ring_flag_set(&h->hdr->host_waiting, 0);
		if (err)
			return err;
		err = ctx_state(h);
		if (err)
			return err;
		w->spin_end = 0; /* woken: spin briefly again before sleeping */
	}
ready:
	if (ring_count(prod, h->cpl_cons) > h->depth)
		return -EPROTO;
	return 0;
}

/* Remember a command given up on, so that its late completion is dropped. */
static void abandon(struct nic_host *h, uint64_t tag)
{
	if (h->stale_lo == h->stale_hi)
		h->stale_lo = tag;
	h->stale_hi = tag + 1;
}

/* Post one command (h->lock held): 0 with cmd->tag set, -ENETDOWN, -EBUSY. */
static int post_locked(struct nic_host *h, struct nic_cmd *cmd)
{
	int err = ctx_state(h);

	if (err)
		return err;
	/*
	 * Commands posted and completions not yet consumed: bounded by the depth
	 * of both rings (they differ from zero only after a timeout).
	 */
	if (ring_count(h->cmd_prod, h->cpl_cons) >= h->depth ||
	    ring_count(h->cmd_prod, ring_observe(&h->hdr->cmdq.cons)) >= h->depth)
		return -EBUSY;
	cmd->tag = h->next_tag++;
	memcpy(&h->cmdq[h->cmd_prod & (h->depth - 1)], cmd, sizeof(*cmd));
	h->cmd_prod++;
	ring_publish(&h->hdr->cmdq.prod, h->cmd_prod);
	ring_fence();
	if (ring_flag_get(&h->hdr->nic_sleeping)) {
		uint64_t one = 1;
		/* EAGAIN (counter saturated) still leaves the NIC woken. */
		if (write(h->db_fd, &one, sizeof(one)) < 0 && errno != EAGAIN && errno != EINTR) {
			abandon(h, cmd->tag);
			return -ENETDOWN;
		}
	}
	return 0;
}

/* Wait for the completion of the command tagged tag (h->lock held). */
static int wait_locked(struct nic_host *h, uint64_t tag, struct nic_cpl *cpl, int timeout_ms)
{
	struct wait_clock w = {.timeout_ms = timeout_ms};
	int err;

	for (;;) {
		err = wait_cpl(h, &w);
		if (err)
			break;
		memcpy(cpl, &h->cplq[h->cpl_cons & (h->depth - 1)], sizeof(*cpl));
		h->cpl_cons++;
		ring_publish(&h->hdr->cplq.cons, h->cpl_cons);
		if (cpl->tag == tag) {
			/* Once every posted command's completion is consumed, none is stale. */
			if (h->cpl_cons == h->cmd_prod)
				h->stale_lo = h->stale_hi = 0;
			return 0;
		}
		if (cpl->tag >= h->stale_lo && cpl->tag < h->stale_hi)
			continue; /* late completion of an abandoned command */
		err = -EPROTO;
		break;
	}
	/* The command stays posted; drop its completion if it ever comes. */
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

int nic_host_wait(struct nic_host *h, uint64_t tag, struct nic_cpl *cpl, int timeout_ms)
{
	int err;

	pthread_mutex_lock(&h->lock);
	err = wait_locked(h, tag, cpl, timeout_ms);
	pthread_mutex_unlock(&h->lock);
	return err;
}
