#include "mgmt_client.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nicsim_abi_util.h"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fail(struct mgmt_client *c, int rc, const char *what)
{
	c->what = what;
	return rc;
}

/* Wait until fd is ready for events, or deadline (monotonic ms) passes.
 * Readiness includes errors and hang-ups: the next call reports them. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd p = {.fd = fd, .events = events};
	int64_t left;
	int n;

	for (;;) {
		left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* Connect the non-blocking socket c->fd to path by deadline.  A UNIX socket
 * whose backlog is full answers EAGAIN rather than EINPROGRESS: retry. */
static int connect_by(struct mgmt_client *c, const struct sockaddr_un *sa, int64_t deadline)
{
	socklen_t len;
	int rc, err;

	for (;;) {
		if (connect(c->fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
			return 0;
		err = errno;
		if (err == EINTR)
			continue;
		if (err == EAGAIN) {
			if (now_ms() >= deadline)
				return fail(c, -ETIMEDOUT, "the NIC's listen backlog stayed full");
			sleep_ms(5);
			continue;
		}
		if (err != EINPROGRESS)
			break;
		rc = wait_fd(c->fd, POLLOUT, deadline);
		if (rc)
			return fail(c, rc, "connecting to the NIC's socket");
		len = sizeof(err);
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len))
			err = errno;
		if (!err)
			return 0;
		break;
	}
	if (err == ENOENT)
		return fail(c, -ENOENT, "no socket file");
	if (err == ECONNREFUSED)
		return fail(c, -ECONNREFUSED, "nobody listening on the socket (stale socket file)");
	return fail(c, -err, "cannot connect to the NIC's socket");
}

static int send_by(struct mgmt_client *c, const void *msg, size_t len, int64_t deadline)
{
	ssize_t n;
	int rc;

	for (;;) {
		n = send(c->fd, msg, len, MSG_NOSIGNAL);
		if (n == (ssize_t)len)
			return 0;
		if (n >= 0)
			return fail(c, -EPROTO, "short send on a packet socket");
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			rc = wait_fd(c->fd, POLLOUT, deadline);
			if (rc)
				return fail(c, rc, "the NIC did not accept a request in time");
			continue;
		}
		if (errno == EPIPE || errno == ECONNRESET)
			return fail(c, -ECONNRESET, "the NIC closed the connection");
		return fail(c, -errno, "sending to the NIC");
	}
}

/* Close every descriptor in m's control data; true if there was any. */
static int close_passed_fds(struct msghdr *m)
{
	struct cmsghdr *h;
	size_t i, nfds;
	int found = 0, fd;

	for (h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		nfds = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfds; i++) {
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
			close(fd);
		}
		found = 1;
	}
	return found;
}

/* Receive one message into c->buf by deadline; returns its length. */
static ssize_t recv_by(struct mgmt_client *c, int64_t deadline)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} ctl;
	struct iovec iov = {.iov_base = c->buf, .iov_len = NIC_MGMT_MSG_MAX};
	struct msghdr m;
	ssize_t n;
	int rc;

	for (;;) {
		memset(&m, 0, sizeof(m));
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof(ctl.buf);
		n = recvmsg(c->fd, &m, MSG_CMSG_CLOEXEC);
		if (n > 0)
			break;
		if (n == 0)
			return fail(c, -ECONNRESET, "the NIC closed the connection");
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			rc = wait_fd(c->fd, POLLIN, deadline);
			if (rc)
				return fail(c, rc, "no answer from the NIC in time");
			continue;
		}
		if (errno == ECONNRESET)
			return fail(c, -ECONNRESET, "the NIC closed the connection");
		return fail(c, -errno, "receiving from the NIC");
	}
	if (close_passed_fds(&m) || (m.msg_flags & MSG_CTRUNC))
		return fail(c, -EPROTO, "the NIC passed descriptors to a management client");
	if (m.msg_flags & MSG_TRUNC)
		return fail(c, -EMSGSIZE, "a reply longer than NIC_MGMT_MSG_MAX");
	return n;
}

static int hello(struct mgmt_client *c, int64_t deadline)
{
	struct nic_hello h = {
	    .magic = NIC_ABI_MAGIC,
	    .abi_version = NIC_ABI_VERSION,
	    .role = NIC_ROLE_MGMT,
	    .pid = (uint32_t)getpid(),
	};
	struct nic_hello_reply *r = &c->hello;
	ssize_t n;
	int rc;

	rc = send_by(c, &h, sizeof(h), deadline);
	/* A NIC that refuses this process at once (another user's) answers
	 * and closes before the hello arrives: its answer, still queued on
	 * this socket, says why, where the failed send says only EPIPE. */
	if (rc && rc != -ECONNRESET)
		return rc;
	n = recv_by(c, deadline);
	if (n < 0 && rc)
		return rc;
	if (n < 0)
		return (int)n;
	if ((size_t)n != sizeof(*r))
		return fail(c, -EPROTO, "a hello reply of the wrong size");
	memcpy(r, c->buf, sizeof(*r));
	if (r->magic != NIC_ABI_MAGIC)
		return fail(c, -EPROTO, "a hello reply with a bad magic (not a nicsim NIC?)");
	if (r->status != NIC_STATUS_OK) {
		c->status = r->status;
		return fail(c, nic_status_errno(r->status), "the NIC refused the hello");
	}
	if (r->abi_version != NIC_ABI_VERSION)
		return fail(c, -EPROTO, "a hello reply with another ABI version");
	return 0;
}

int mgmt_client_open(struct mgmt_client *c, const char *sock_path, int timeout_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int64_t deadline;
	int rc;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
	if (strlen(sock_path) >= sizeof(sa.sun_path))
		return fail(c, -ENAMETOOLONG, "socket path too long for a UNIX socket");
	strcpy(sa.sun_path, sock_path);
	deadline = now_ms() + c->timeout_ms;
	c->buf = malloc(NIC_MGMT_MSG_MAX);
	if (!c->buf)
		return fail(c, -ENOMEM, "out of memory");
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		rc = fail(c, -errno, "cannot create a socket");
		goto out;
	}
	rc = connect_by(c, &sa, deadline);
	if (!rc)
		rc = hello(c, deadline);
out:
	if (rc) {
		const char *what = c->what;
		unsigned status = c->status;

		mgmt_client_close(c);
		c->what = what;
		c->status = status;
	}
	return rc;
}

void mgmt_client_close(struct mgmt_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	c->fd = -1;
	c->buf = NULL;
}

int mgmt_client_list(struct mgmt_client *c, uint16_t op, size_t rec_size, void **recs,
		     size_t *count)
{
	struct nic_mgmt_req req = {.magic = NIC_ABI_MAGIC, .op = op};
	struct nic_mgmt_hdr hdr;
	unsigned char *list = NULL, *grown;
	size_t n = 0, cap = 0;
	ssize_t len;
	int rc;

	*recs = NULL;
	*count = 0;
	c->status = NIC_STATUS_OK;
	c->what = NULL;
	if (c->fd < 0 || !c->buf)
		return fail(c, -ENOTCONN, "not connected");
	if (rec_size == 0)
		return fail(c, -EINVAL, "zero record size");
	rc = send_by(c, &req, sizeof(req), now_ms() + c->timeout_ms);
	if (rc)
		return rc;
	for (;;) {
		len = recv_by(c, now_ms() + c->timeout_ms);
		if (len < 0) {
			rc = (int)len;
			break;
		}
		rc = -EPROTO;
		if ((size_t)len < sizeof(hdr)) {
			fail(c, rc, "a reply shorter than its header");
			break;
		}
		memcpy(&hdr, c->buf, sizeof(hdr));
		if (hdr.magic != NIC_ABI_MAGIC) {
			fail(c, rc, "a reply with a bad magic");
			break;
		}
		if (hdr.op != op) {
			fail(c, rc, "a reply to another request");
			break;
		}
		if (hdr.status != NIC_STATUS_OK) {
			c->status = hdr.status;
			rc = fail(c, nic_status_errno(hdr.status), "the NIC refused the request");
			break;
		}
		if (hdr.flags & ~NIC_MGMT_F_LAST) {
			fail(c, rc, "a reply with unknown flags");
			break;
		}
		if ((uint64_t)hdr.count * rec_size != (uint64_t)len - sizeof(hdr)) {
			fail(c, rc, "a reply whose record count does not match its length");
			break;
		}
		/* Every message but the last must carry records, so that the
		 * record cap also bounds the number of messages. */
		if (hdr.count == 0 && !(hdr.flags & NIC_MGMT_F_LAST)) {
			fail(c, rc, "an empty reply that is not the last");
			break;
		}
		if (hdr.count > MGMT_CLIENT_MAX_RECORDS - n) {
			rc = fail(c, -E2BIG, "a listing longer than any TPT");
			break;
		}
		if (n + hdr.count > cap) {
			cap = cap ? cap : 64;
			while (cap < n + hdr.count)
				cap *= 2;
			grown = cap <= SIZE_MAX / rec_size ? realloc(list, cap * rec_size) : NULL;
			if (!grown) {
				rc = fail(c, -ENOMEM, "out of memory");
				break;
			}
			list = grown;
		}
		if (hdr.count) /* list is still NULL after only empty messages */
			memcpy(list + n * rec_size, c->buf + sizeof(hdr),
			       (size_t)hdr.count * rec_size);
		n += hdr.count;
		if (hdr.flags & NIC_MGMT_F_LAST) {
			rc = 0;
			break;
		}
	}
	if (rc) {
		free(list);
		return rc;
	}
	if (n == 0) {
		free(list);
		list = NULL;
	}
	*recs = list;
	*count = n;
	return 0;
}

int mgmt_client_stats(struct mgmt_client *c, struct nic_stats *stats)
{
	void *recs;
	size_t n;
	int rc;

	rc = mgmt_client_list(c, NIC_MGMT_STATS, sizeof(*stats), &recs, &n);
	if (rc)
		return rc;
	if (n != 1) {
		free(recs);
		return fail(c, -EPROTO, "a stats reply without exactly one record");
	}
	memcpy(stats, recs, sizeof(*stats));
	free(recs);
	return 0;
}

int mgmt_client_tpt(struct mgmt_client *c, struct nic_mgmt_tpt_rec **recs, size_t *count)
{
	void *v;
	int rc;

	rc = mgmt_client_list(c, NIC_MGMT_TPT, sizeof(**recs), &v, count);
	*recs = v;
	return rc;
}

int mgmt_client_faults(struct mgmt_client *c, struct nic_mgmt_fault_rec **recs, size_t *count)
{
	void *v;
	int rc;

	rc = mgmt_client_list(c, NIC_MGMT_FAULTS, sizeof(**recs), &v, count);
	*recs = v;
	return rc;
}
