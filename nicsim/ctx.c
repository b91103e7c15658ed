/*
 * Host contexts: creation at attach, the command ring, and teardown.
 *
 * A context is one host attachment and one protection domain.  Its segment
 * is a sealed memfd (the host cannot shrink it under the NIC and make the
 * NIC fault), mapped by both sides.  The NIC keeps its own copies of the
 * indices it owns and treats the indices and entries the host writes as
 * hostile: a producer index more than a ring ahead, or a completion consumer
 * index the NIC never produced, puts the context in NIC_CTX_CMDQ_ERROR and
 * the NIC stops reading its ring; every command is copied out before it is
 * looked at.
 */
#include "nic_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <poll.h>
#include <unistd.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

#include "nicsim_abi_util.h"
#include "nicsim_refusal.h"
#include "nicsim_ring.h"

/* Commands executed per context per pass, so that one busy host cannot
 * starve the others. */
#define CTX_BUDGET 16u

struct nic_ctx *ctx_find(struct nic *nic, uint32_t id)
{
	for (struct nic_ctx *c = nic->ctxs; c; c = c->next) {
		if (c->id == id)
			return c;
	}
	return NULL;
}

/* The program name of pid, as the kernel knows it (not as the host says). */
static void read_comm(uint32_t pid, char comm[16])
{
	char path[64];
	FILE *f;

	snprintf(comm, 16, "?");
	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(comm, 16, f))
		comm[strcspn(comm, "\n")] = '\0';
	fclose(f);
}

static uint32_t next_id(struct nic *nic)
{
	for (;;) {
		uint32_t id = nic->next_ctx_id++;

		if (id && !ctx_find(nic, id))
			return id;
	}
}

static int create_segment(struct nic_ctx *c, uint32_t nic_cpu)
{
	const unsigned seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	struct nic_ctx_hdr *h;

	c->memfd = memfd_create("nicsim-ctx", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (c->memfd < 0)
		return -errno;
	if (ftruncate(c->memfd, NIC_CTX_SEG_SIZE) < 0 || fcntl(c->memfd, F_ADD_SEALS, seals) < 0)
		return -errno;
	h = mmap(NULL, NIC_CTX_SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd, 0);
	if (h == MAP_FAILED)
		return -errno;
	c->hdr = h;
	c->cmdq = (struct nic_cmd *)((char *)h + NIC_CTX_CMDQ_OFF);
	c->cplq = (struct nic_cpl *)((char *)h + NIC_CTX_CPLQ_OFF);
	c->eq = (struct nic_event *)((char *)h + NIC_CTX_EQ_OFF);
	h->magic = NIC_ABI_MAGIC;
	h->abi_version = NIC_ABI_VERSION;
	h->seg_size = NIC_CTX_SEG_SIZE;
	h->ctx_id = c->id;
	h->cmdq_depth = NIC_CMDQ_DEPTH;
	h->cmdq_off = NIC_CTX_CMDQ_OFF;
	h->cplq_off = NIC_CTX_CPLQ_OFF;
	h->eq_off = NIC_CTX_EQ_OFF;
	h->qp_off = NIC_CTX_QP_OFF;
	h->nic_state = NIC_CTX_OK;
	h->nic_cpu = nic_cpu;
	return 0;
}

static int send_reply_fds(struct nic *nic, struct nic_ctx *c)
{
	struct nic_hello_reply r;
	int fds[3] = {c->memfd, c->doorbell, c->irq};
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *cm;

	nic_fill_reply(nic, &r, NIC_STATUS_OK, c->id);
	memset(u.buf, 0, sizeof(u.buf));
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	return sendmsg(c->sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(r) ? 0 : -EIO;
}

/* Every shared buffer of c unmapped, every descriptor it sent closed. */
static void shm_release(struct nic *nic, struct nic_ctx *c)
{
	for (uint32_t i = 0; i < c->nshm; i++)
		munmap(c->shm[i].ptr, (size_t)c->shm[i].len);
	if (nic)
		nic->stats.shm_unmaps += c->nshm;
	c->nshm = 0;
	c->shm_bytes = 0;
	for (uint32_t i = 0; i < c->shm_npend; i++)
		close(c->shm_pend[i]);
	if (nic)
		nic->stats.shm_fds_dropped += c->shm_npend;
	c->shm_npend = 0;
	if (c->shm_fd_now >= 0)
		close(c->shm_fd_now);
	c->shm_fd_now = -1;
}

static void ctx_free(struct nic_ctx *c)
{
	shm_release(NULL, c);
	free(c->eq_wait);
	if (c->hdr)
		munmap(c->hdr, NIC_CTX_SEG_SIZE);
	if (c->memfd >= 0)
		close(c->memfd);
	if (c->doorbell >= 0)
		close(c->doorbell);
	if (c->irq >= 0)
		close(c->irq);
	if (c->sock >= 0)
		close(c->sock);
	if (c->pidfd >= 0)
		close(c->pidfd);
	free(c);
}

/* The effective uid of pid (/proc/PID/status), or -1. */
static int64_t proc_euid(uint32_t pid)
{
	char path[64], line[256];
	unsigned r, e;
	int64_t uid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Uid: %u %u", &r, &e) == 2) {
			uid = e;
			break;
		}
	}
	fclose(f);
	return uid;
}

/*
 * A pidfd of the host at the other end of sock, whose SO_PEERCRED said pid
 * and uid: from SO_PEERPIDFD where the kernel has it (Linux 6.5: exactly
 * that process), else pidfd_open(pid), kept only if the process it names
 * still runs as uid (checked while the pidfd shows it alive), so that a pid
 * reused by another user's process since the connect is never taken for
 * the host.  0, or -ESRCH, or pidfd_open's error.
 */
static int host_pidfd(int sock, uint32_t pid, uint32_t uid, int *out)
{
	struct pollfd p;
	socklen_t len = sizeof(int);
	int fd = -1;

	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 && fd >= 0) {
		*out = fd;
		return 0;
	}
	fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	if (fd < 0)
		return errno == ESRCH ? -ESRCH : -errno;
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	if (proc_euid(pid) != (int64_t)uid || poll(&p, 1, 0) != 0) {
		close(fd);
		return -ESRCH;
	}
	*out = fd;
	return 0;
}

int ctx_attach(struct nic *nic, int fd, uint32_t pid, bool by_group, uint32_t uid, uint32_t gid)
{
	struct nic_ctx *c;
	int err;

	if (nic->nctx >= nic->max_ctx) {
		nic->stats.attach_refused++;
		nic_warn(&nic->log,
			 "refused attach from pid %u: %u contexts already, as many as fit "
			 "(at most %u, and %u descriptors each within the limit of %llu)",
			 pid, nic->nctx, NIC_MAX_CONTEXTS, NIC_CTX_FDS,
			 (unsigned long long)nic->fd_limit);
		nic_send_reply(nic, fd, NIC_STATUS_NO_RESOURCES, 0);
		return -ENOSPC;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->sock = -1; /* the caller closes fd on failure */
	c->memfd = c->doorbell = c->irq = c->pidfd = -1;
	c->shm_fd_now = -1;
	c->id = next_id(nic);
	c->pid = pid;
	read_comm(pid, c->comm);
	/*
	 * A NIC that may reach another user's memory (--allow-group needs
	 * CAP_SYS_PTRACE) must not go on naming a pid once its process is
	 * gone: a child that inherited the attach socket would keep the
	 * context, and the pid could come back as someone else's process.
	 */
	if (by_group) {
		c->by_group = true;
		c->as = (struct dma_as){.uid = uid, .gid = gid};
		err = host_pidfd(fd, pid, uid, &c->pidfd);
		if (err < 0) {
			nic_warn(&nic->log, "refused attach from pid %u of uid %u: %s", pid, uid,
				 err == -ESRCH
				     ? "the process is gone, or its pid is another's now"
				     : "pidfd_open failed (a NIC shared with a group needs "
				       "Linux 5.3 or later)");
			goto fail;
		}
	}
	err = create_segment(c, nic->cpu);
	if (err < 0)
		goto fail;
	c->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	c->irq = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->doorbell < 0 || c->irq < 0) {
		err = -errno;
		goto fail;
	}
	c->sock_src = (struct nic_src){.type = NIC_SRC_CTX, .obj = c};
	c->bell_src = (struct nic_src){.type = NIC_SRC_DOORBELL, .obj = c};
	c->sock = fd;
	err = send_reply_fds(nic, c);
	if (err < 0)
		goto fail_sock;
	err = nic_epoll_add(nic, fd, EPOLLIN | EPOLLRDHUP, &c->sock_src);
	if (err < 0)
		goto fail_sock;
	err = nic_epoll_add(nic, c->doorbell, EPOLLIN, &c->bell_src);
	if (err < 0)
		goto fail_sock;
	c->pid_src = (struct nic_src){.type = NIC_SRC_PIDFD, .obj = c};
	if (c->pidfd >= 0 && (err = nic_epoll_add(nic, c->pidfd, EPOLLIN, &c->pid_src)) < 0)
		goto fail_sock;
	c->next = nic->ctxs;
	nic->ctxs = c;
	nic->nctx++;
	nic->stats.attaches++;
	nic_info(&nic->log, "context %u attached: pid %u (%s)", c->id, c->pid, c->comm);
	return 0;
fail_sock:
	c->sock = -1; /* closed by the caller */
	epoll_ctl(nic->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
fail:
	nic->stats.attach_refused++;
	if (err == -EMFILE && nic->opts.fd_share > 1)
		nic_warn(&nic->log,
			 "attach from pid %u failed: %s (descriptor limit %llu, shared by the %u "
			 "NICs of this process; this NIC holds %u contexts)",
			 pid, strerror(-err), (unsigned long long)nic->fd_limit, nic->opts.fd_share,
			 nic->nctx);
	else
		nic_warn(&nic->log, "attach from pid %u failed: %s", pid, strerror(-err));
	nic_send_reply(nic, fd, NIC_STATUS_NO_RESOURCES, 0);
	ctx_free(c);
	return err;
}

/*
 * Keep what c's host published of its registration cache when its last
 * registration was refused for a limit of the system, so that `nicsim
 * show hosts` can still say why after the program has exited.  The
 * counters are the host's own words, copied as they are: the tool formats
 * the numbers itself.
 */
static void keep_refusal(struct nic *nic, const struct nic_ctx *c)
{
	struct nic_mgmt_host_rec *r;
	struct nic_host_cache_stats cache;

	if (!c->hdr)
		return;
	memcpy(&cache, &c->hdr->host_cache, sizeof(cache));
	if (cache.magic != NIC_HOST_CACHE_MAGIC || cache.refusal == NIC_REFUSAL_NONE)
		return;
	if (nic->ndetached < NIC_MGMT_DETACHED_MAX) {
		r = &nic->detached[nic->ndetached++];
	} else {
		r = &nic->detached[nic->detached_next];
		nic->detached_next = (nic->detached_next + 1) % NIC_MGMT_DETACHED_MAX;
	}
	*r = (struct nic_mgmt_host_rec){
	    .ctx_id = c->id, .pid = c->pid, .flags = NIC_MGMT_HOST_DETACHED, .cache = cache};
	memcpy(r->comm, c->comm, sizeof(r->comm));
}

void ctx_detach(struct nic *nic, struct nic_ctx *c, const char *why)
{
	uint32_t released;

	for (struct nic_ctx **p = &nic->ctxs; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			break;
		}
	}
	nic->nctx--;
	nic->stats.detaches++;
	keep_refusal(nic, c);
	conn_ctx_gone(nic, c);
	for (uint32_t i = 0; i < NIC_QP_SLOTS; i++) {
		if (c->qps[i])
			conn_qp_destroy(nic, c->qps[i]);
	}
	released = tpt_release_owner(nic->tpt, c->id);
	nic_info(&nic->log,
		 "context %u detached: pid %u (%s), %s; released %u TPT entries, %u shared buffers",
		 c->id, c->pid, c->comm, why, released, c->nshm);
	/* Its QPs are gone, and with them every DMA that could use a map. */
	shm_release(nic, c);
	/* Closing the descriptors removes them from the epoll set. */
	ctx_free(c);
}

void ctx_interrupt(struct nic *nic, struct nic_ctx *c)
{
	ring_fence();
	if (ring_flag_get(&c->hdr->host_waiting) &&
	    write(c->irq, &(uint64_t){1}, sizeof(uint64_t)) > 0)
		nic->stats.interrupts++;
}

/* Move waiting events into the EQ while it has room; true if any moved. */
static bool eq_flush(struct nic_ctx *c)
{
	uint32_t cons = ring_observe(&c->hdr->eq.cons), moved = 0;

	/* A consumer index the NIC never produced: treat the queue as full
	 * until the host puts it right (events wait, none is lost). */
	while (moved < c->eq_nwait && ring_count(c->eq_prod, cons) < NIC_EQ_DEPTH) {
		c->eq[c->eq_prod & (NIC_EQ_DEPTH - 1)] = c->eq_wait[moved++];
		c->eq_prod++;
	}
	if (!moved)
		return false;
	memmove(c->eq_wait, c->eq_wait + moved, (c->eq_nwait - moved) * sizeof(*c->eq_wait));
	c->eq_nwait -= moved;
	ring_publish(&c->hdr->eq.prod, c->eq_prod);
	return true;
}

/*
 * Tell the host of an event that ends a connection on its attach socket as
 * well (one byte, the event type), whether or not it waits for the
 * interrupt: a host that is not in a call learns that its operations were
 * flushed without polling.  Best effort: a host that never reads the socket
 * fills it, and the notices beyond are dropped (the events are not).
 */
static void notify_conn_end(struct nic_ctx *c, uint8_t type)
{
	if (send(c->sock, &type, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)
		return;
}

void ctx_event(struct nic *nic, struct nic_ctx *c, const struct nic_event *ev)
{
	if (c->eq_nwait == c->eq_cap) {
		uint32_t cap = c->eq_cap ? 2 * c->eq_cap : 16;
		struct nic_event *w = realloc(c->eq_wait, cap * sizeof(*w));

		if (!w) {
			nic_err(&nic->log, "context %u: out of memory for an event; dropped",
				c->id);
			return;
		}
		c->eq_wait = w;
		c->eq_cap = cap;
	}
	c->eq_wait[c->eq_nwait++] = *ev;
	if (eq_flush(c))
		ctx_interrupt(nic, c);
	if (ev->type == NIC_EV_DISCONNECTED || ev->type == NIC_EV_QP_ERROR)
		notify_conn_end(c, (uint8_t)ev->type);
}

/* A DEREG_MR or DEALLOC_MW whose entry had DMA in flight has drained. */
void ctx_drained(struct nic *nic, uint32_t key)
{
	for (struct nic_ctx *c = nic->ctxs; c; c = c->next) {
		if (c->blocked_key != key)
			continue;
		c->blocked_key = 0;
		c->cplq[c->cpl_prod & (NIC_CMDQ_DEPTH - 1)] = c->blocked_cpl;
		c->cpl_prod++;
		ring_publish(&c->hdr->cplq.prod, c->cpl_prod);
		ctx_interrupt(nic, c);
		return;
	}
}

void ctx_set_sleeping(struct nic *nic, uint32_t v)
{
	for (struct nic_ctx *c = nic->ctxs; c; c = c->next)
		ring_flag_set(&c->hdr->nic_sleeping, v);
	ring_fence();
}

/*
 * Publish the CPU the NIC polls on (when it changed) and tell whether a host
 * that waits for a completion is on the same CPU: spinning would then only
 * delay it.
 */
bool ctx_share_cpu(struct nic *nic)
{
	int cpu = sched_getcpu();
	uint32_t me = cpu < 0 ? 0 : (uint32_t)cpu + 1;
	bool shared = false;

	for (struct nic_ctx *c = nic->ctxs; c; c = c->next) {
		if (me != nic->cpu)
			ring_flag_set(&c->hdr->nic_cpu, me);
		/* A host asleep on the interrupt needs no CPU. */
		if (me && ring_flag_get(&c->hdr->host_cpu) == me &&
		    !ring_flag_get(&c->hdr->host_waiting))
			shared = true;
	}
	nic->cpu = me;
	return shared;
}

static void ctx_fault(struct nic *nic, struct nic_ctx *c, uint32_t detail, const char *what)
{
	c->broken = true;
	__atomic_store_n(&c->hdr->nic_error, detail, __ATOMIC_RELAXED);
	__atomic_store_n(&c->hdr->nic_state, NIC_CTX_CMDQ_ERROR, __ATOMIC_RELEASE);
	nic->stats.cmdq_errors++;
	nic_warn(&nic->log, "context %u (pid %u %s): command ring error: %s; ring stopped", c->id,
		 c->pid, c->comm, what);
	/* Wake a host that waits for a completion so that it sees the error. */
	if (write(c->irq, &(uint64_t){1}, sizeof(uint64_t)) > 0)
		nic->stats.interrupts++;
}

/* ---- Shared buffers (ABI 6) ---------------------------------------------- */

/* Descriptors one message may bring that the NIC looks at; the kernel
 * closes any beyond them (and says MSG_CTRUNC). */
#define SHM_MSG_FDS 4u

static void close_fds(const int *fds, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		close(fds[i]);
}

/*
 * One message from the socket: a shared-buffer descriptor is queued (or
 * closed when NIC_SHM_PENDING wait already); anything else closes what it
 * carried and breaks the context's protocol, as a broken command ring does.
 */
static int sock_read_one(struct nic *nic, struct nic_ctx *c)
{
	char buf[NIC_SHM_MSG_LEN + 8];
	union {
		char b[CMSG_SPACE(SHM_MSG_FDS * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr msg = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
	int fds[SHM_MSG_FDS * 2];
	uint32_t nfd = 0;
	bool other = false, good;
	ssize_t n = recvmsg(c->sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -ECONNRESET;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) {
			other = true;
			continue;
		}
		for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
			if (nfd < SHM_MSG_FDS * 2)
				fds[nfd++] = fd;
			else
				close(fd); /* cannot happen: the buffer holds fewer */
		}
	}
	/* End of file (or an empty message, which no host sends). */
	if (n == 0 && nfd == 0 && !other && !(msg.msg_flags & MSG_CTRUNC))
		return -ECONNRESET;
	good = n == NIC_SHM_MSG_LEN && !memcmp(buf, NIC_SHM_MSG_MAGIC, NIC_SHM_MSG_LEN) &&
	       nfd == 1 && !other && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
	if (!good) {
		char what[160];

		close_fds(fds, nfd);
		nic->stats.shm_fds_dropped += nfd;
		nic->stats.shm_bad_msgs++;
		if (c->broken)
			return 1;
		snprintf(what, sizeof(what),
			 "a message of %zd bytes with %u descriptors%s on the attach socket is "
			 "not a shared-buffer descriptor",
			 n, nfd, other || (msg.msg_flags & MSG_CTRUNC) ? " (and more)" : "");
		ctx_fault(nic, c, NIC_CTX_ERR_SOCKET, what);
		return 1;
	}
	if (c->shm_npend == NIC_SHM_PENDING) {
		close(fds[0]);
		nic->stats.shm_fds_dropped++;
		if (!c->shm_full_warned)
			nic_warn(&nic->log,
				 "context %u (pid %u %s): more than %u shared-buffer descriptors "
				 "sent ahead of SHM_MAP; closed the extra ones",
				 c->id, c->pid, c->comm, NIC_SHM_PENDING);
		c->shm_full_warned = true;
		return 1;
	}
	c->shm_pend[c->shm_npend++] = fds[0];
	return 1;
}

int ctx_sock_read(struct nic *nic, struct nic_ctx *c, unsigned max)
{
	int r = 0;

	for (unsigned i = 0; i < max; i++) {
		r = sock_read_one(nic, c);
		if (r <= 0)
			return r;
	}
	return r;
}

/* Whether fd may back a shared buffer the NIC maps: NIC_STATUS_OK or the
 * status SHM_MAP completes with. */
static uint16_t shm_check_fd(int fd, uint64_t len)
{
	const int need = F_SEAL_SHRINK | F_SEAL_SEAL;
	int seals = fcntl(fd, F_GET_SEALS), fl = fcntl(fd, F_GETFL);
	int no_write = F_SEAL_WRITE;
	struct statfs sfs;
	struct stat st;

#ifdef F_SEAL_FUTURE_WRITE
	no_write |= F_SEAL_FUTURE_WRITE;
#endif
	/* Only memfds take seals; one of hugetlbfs could fault for want of
	 * huge pages, and the NIC must be able to write through its map. */
	if (seals < 0 || (seals & need) != need || (seals & no_write))
		return NIC_STATUS_BAD_ACCESS;
	if (fl < 0 || (fl & O_ACCMODE) != O_RDWR)
		return NIC_STATUS_BAD_ACCESS;
	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != TMPFS_MAGIC)
		return NIC_STATUS_BAD_ACCESS;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return NIC_STATUS_BAD_ACCESS;
	if (st.st_size < 0 || (uint64_t)st.st_size < len)
		return NIC_STATUS_TOO_LARGE;
	return NIC_STATUS_OK;
}

static uint16_t shm_map(struct nic *nic, struct nic_ctx *c, uint64_t va, uint64_t len)
{
	uint16_t status;
	uint32_t at = 0;
	void *p;

	if (c->shm_fd_now < 0)
		return NIC_STATUS_BAD_STATE;
	status = shm_check_fd(c->shm_fd_now, len);
	if (status != NIC_STATUS_OK)
		return status;
	/* The maps are sorted by va: at is where this one goes. */
	while (at < c->nshm && c->shm[at].va < va)
		at++;
	if ((at > 0 && c->shm[at - 1].va + c->shm[at - 1].len > va) ||
	    (at < c->nshm && va + len > c->shm[at].va))
		return NIC_STATUS_BUSY;
	if (c->nshm == NIC_SHM_MAX || len > NIC_SHM_MAX_BYTES - c->shm_bytes)
		return NIC_STATUS_NO_RESOURCES;
	p = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, c->shm_fd_now, 0);
	if (p == MAP_FAILED) {
		nic_warn(&nic->log, "context %u: cannot map a shared buffer of %llu bytes: %s",
			 c->id, (unsigned long long)len, strerror(errno));
		return NIC_STATUS_NO_RESOURCES;
	}
	close(c->shm_fd_now);
	c->shm_fd_now = -1;
	memmove(&c->shm[at + 1], &c->shm[at], (c->nshm - at) * sizeof(c->shm[0]));
	c->shm[at] = (struct dma_map){.va = va, .len = len, .ptr = p};
	c->nshm++;
	c->shm_bytes += len;
	nic->stats.shm_maps++;
	return NIC_STATUS_OK;
}

static uint16_t shm_unmap(struct nic *nic, struct nic_ctx *c, uint64_t va)
{
	uint32_t i = 0;

	while (i < c->nshm && c->shm[i].va != va)
		i++;
	if (i == c->nshm)
		return NIC_STATUS_BAD_RANGE;
	/* Payloads held for this context may go to the map: write them now.
	 * Nothing else keeps a pointer into it (qpio.c reads the maps at each
	 * transfer). */
	qpio_rx_write_ctx(nic, c);
	munmap(c->shm[i].ptr, (size_t)c->shm[i].len);
	c->shm_bytes -= c->shm[i].len;
	memmove(&c->shm[i], &c->shm[i + 1], (c->nshm - i - 1) * sizeof(c->shm[0]));
	c->nshm--;
	nic->stats.shm_unmaps++;
	return NIC_STATUS_OK;
}

/*
 * The NIC reaches a host's memory with process_vm_readv/writev, which the
 * kernel allows only where this process may ptrace the host: Yama's
 * ptrace_scope (the provider declares the NIC its tracer with
 * PR_SET_PTRACER, enough at scope 1 only), a host that is not dumpable or
 * another user's without CAP_SYS_PTRACE here, a security module.  Left to
 * the first transfer, such a refusal would break a connection with a local
 * protection error; checked at registration, the registration fails and the
 * host can say which rule to change.  One byte at va is read, for each
 * registration until one read succeeds: the rules seldom change while a
 * host is attached, and a read that fails otherwise (va not mapped: the
 * host's own pinning refuses that) decides nothing.
 */
uint16_t ctx_reg_check(void *nic_arg, void *ctx, uint64_t va)
{
	struct nic *nic = nic_arg;
	struct nic_ctx *c = ctx;
	unsigned char byte;
	const struct dma_seg seg = {.va = va, .len = 1};
	/* A group host's with its own rights (struct dma_as). */
	const struct dma_maps maps = {.as = c->by_group ? &c->as : NULL};
	int err;

	/* Checked at each registration for another user's host: its process
	 * may have executed a program that is no longer its user's to read
	 * (struct dma_as), and its DMA would be refused anyway. */
	if (c->dma_ok && !c->by_group)
		return NIC_STATUS_OK;
	err = dma_read((pid_t)c->pid, &maps, &seg, 1, 0, &byte, 1);
	if (!err) {
		c->dma_ok = true;
		return NIC_STATUS_OK;
	}
	if (err != -EPERM)
		return NIC_STATUS_OK;
	nic->stats.dma_faults++;
	if (!c->dma_denied_logged)
		nic_warn(&nic->log,
			 "context %u (pid %u, %s): registration refused: the kernel does not let "
			 "this NIC read the host's memory (process_vm_readv: EPERM): Yama's "
			 "ptrace_scope, a host that is not dumpable or another user's while this "
			 "NIC lacks CAP_SYS_PTRACE, or a security module; `nicsim show hosts` says "
			 "which",
			 c->id, c->pid, c->comm);
	c->dma_denied_logged = true;
	return NIC_STATUS_NO_DMA;
}

uint16_t ctx_shm_exec(void *nic_arg, void *ctx, const struct nic_cmd *cmd)
{
	struct nic *nic = nic_arg;
	struct nic_ctx *c = ctx;

	if (cmd->opcode == NIC_CMD_SHM_UNMAP)
		return shm_unmap(nic, c, cmd->u.shm.va);
	return shm_map(nic, c, cmd->u.shm.va, cmd->u.shm.len);
}

/*
 * An SHM_MAP about to run takes the oldest descriptor the host sent, reading
 * the socket first if none waits (the command may run before the socket's
 * readiness is served).  It keeps the descriptor only if it maps it.
 */
static void shm_take(struct nic *nic, struct nic_ctx *c)
{
	if (c->shm_npend == 0)
		(void)ctx_sock_read(nic, c, 1);
	if (c->shm_npend == 0 || c->broken)
		return;
	c->shm_fd_now = c->shm_pend[0];
	c->shm_npend--;
	memmove(&c->shm_pend[0], &c->shm_pend[1], c->shm_npend * sizeof(c->shm_pend[0]));
}

static void shm_drop_taken(struct nic *nic, struct nic_ctx *c)
{
	if (c->shm_fd_now < 0)
		return;
	close(c->shm_fd_now);
	c->shm_fd_now = -1;
	nic->stats.shm_fds_dropped++;
}

unsigned ctx_poll(struct nic *nic, struct nic_ctx *c)
{
	struct nic_ctx_hdr *h = c->hdr;
	const uint32_t mask = NIC_CMDQ_DEPTH - 1;
	const struct tpt_owner owner = {.ctx_id = c->id, .pid = c->pid};
	uint32_t prod, pending, cpl_cons, unread, n;
	char what[128];

	if (c->eq_nwait && eq_flush(c))
		ctx_interrupt(nic, c);
	if (c->broken || c->blocked_key)
		return 0;
	prod = ring_observe(&h->cmdq.prod);
	pending = ring_count(prod, c->cmd_cons);
	if (pending == 0)
		return 0;
	if (pending > NIC_CMDQ_DEPTH) {
		snprintf(what, sizeof(what),
			 "producer index %u is ahead of consumer %u by more than the ring", prod,
			 c->cmd_cons);
		ctx_fault(nic, c, 1, what);
		return 0;
	}
	cpl_cons = ring_observe(&h->cplq.cons);
	unread = ring_count(c->cpl_prod, cpl_cons);
	if (unread > NIC_CMDQ_DEPTH) {
		snprintf(what, sizeof(what),
			 "completion consumer index %u was never produced (producer %u)", cpl_cons,
			 c->cpl_prod);
		ctx_fault(nic, c, 2, what);
		return 0;
	}
	/* Back-pressure: a host that does not consume completions stalls only
	 * its own ring. */
	n = NIC_CMDQ_DEPTH - unread;
	if (n > pending)
		n = pending;
	if (n > CTX_BUDGET)
		n = CTX_BUDGET;
	for (uint32_t i = 0; i < n; i++) {
		struct nic_cmd cmd;
		struct nic_cpl cpl;

		memcpy(&cmd, &c->cmdq[c->cmd_cons & mask], sizeof(cmd));
		c->cmd_cons++;
		/* SHM_MAP consumes a descriptor whatever its outcome, so that the
		 * host's next one goes with its next SHM_MAP. */
		if (cmd.opcode == NIC_CMD_SHM_MAP)
			shm_take(nic, c);
		if (cmd_execute(&nic->env, &owner, c, &cmd, &cpl)) {
			/* An invalidation waiting for DMA to drain: its
			 * completion is posted by ctx_drained(), and later
			 * commands wait behind it so that completions stay
			 * in command order. */
			c->blocked_key = cmd.u.key.key;
			c->blocked_cpl = cpl;
			nic->stats.invalidations_deferred++;
			n = i + 1;
			break;
		}
		if (cpl.status != NIC_STATUS_OK)
			nic_dbg(&nic->log, "context %u: command %u tag %llu failed: %s", c->id,
				cmd.opcode, (unsigned long long)cmd.tag,
				nic_status_str(cpl.status));
		shm_drop_taken(nic, c);
		memcpy(&c->cplq[c->cpl_prod & mask], &cpl, sizeof(cpl));
		c->cpl_prod++;
		/* A message that broke the socket's protocol, read for SHM_MAP:
		 * the ring stops after this completion. */
		if (c->broken) {
			n = i + 1;
			break;
		}
	}
	if (n == 0)
		return 0;
	ring_publish(&h->cmdq.cons, c->cmd_cons);
	ring_publish(&h->cplq.prod, c->cpl_prod);
	ctx_interrupt(nic, c);
	return n;
}
