/*
 * The stream-socket verbs of nicsim-agent: the calls of nicsim_switch.h
 * (libnicsimsw), made as an application makes them.  Their results are
 * errno names (ENOBUFS), as the switch's calls set errno.
 *
 * accept, connect, send and recv block in the switch, so each runs on a
 * worker thread of its own (OP_STREAM), answered pending at once and done
 * when its call returned, as accept and connect of the SPI are.  A send
 * takes the whole range (the switch returns from a blocking send once every
 * byte is taken; a send that moved by RDMA, once the peer has it); a recv
 * waits for the whole range (MSG_WAITALL), and says EOF when the end of the
 * stream came first.  The others are quick and answered at once.
 *
 * The switch starts its own thread on its first socket, which a forked
 * child does not inherit: a child of an agent that used stream sockets
 * refuses the stream verbs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "nicsim_switch.h"

#define BACKLOG_DEFAULT 8

/* The reply of stream-info names these, in struct nsw_stats's order. */
_Static_assert(sizeof(struct nsw_stats) == 9 * sizeof(uint64_t),
	       "stream-info names every field of struct nsw_stats");

/* The switch may be used here: false after replying bad. */
static bool stream_allowed(const struct agent_req *r)
{
	if (!r->a->stream_parent)
		return true;
	return agent_bad(r, "this host was forked from one that used stream sockets, whose "
			    "switch thread stayed in the parent: a forked host cannot use them");
}

/* path: auto, read or write, into the value of NSW_PATH (0: leave it). */
static bool arg_path(const struct agent_req *r, const char *s, int *path)
{
	if (!strcmp(s, "auto"))
		*path = 0;
	else if (!strcmp(s, "read"))
		*path = NSW_PATH_READ;
	else if (!strcmp(s, "write"))
		*path = NSW_PATH_WRITE;
	else
		return agent_bad(r, "path \"%.40s\": auto, read or write", s);
	return true;
}

/* NSW_PATH before the connection exists: 0, or an errno. */
static int set_path(int fd, int path)
{
	if (!path)
		return 0;
	return nsw_setsockopt(fd, NSW_SOL, NSW_PATH, &path, sizeof(path)) ? errno : 0;
}

void stream_socket(struct agent_req *r)
{
	struct agent *a = r->a;
	int fd;

	if (!stream_allowed(r) || !arg_new_name(r, r->argv[0], "stream socket"))
		return;
	/* The switch starts here (its provider and thread) if it has not yet. */
	a->stream_used = true;
	fd = nsw_socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0) {
		agent_reply_errno(r, errno);
		return;
	}
	if (!agent_add_sock(a, r->argv[0], INVALID_SOCKET, fd)) {
		nsw_close(fd);
		agent_reply_errno(r, ENOMEM);
		return;
	}
	agent_ok(r);
}

void stream_bind(struct agent_req *r)
{
	struct agent_sock *s;
	struct sockaddr_in sa;

	if (!stream_allowed(r) || !(s = arg_stream(r, r->argv[0])) ||
	    !arg_sockaddr(r, r->argv + 1, &sa))
		return;
	if (nsw_bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)))
		agent_reply_errno(r, errno);
	else
		agent_ok(r);
}

void stream_listen(struct agent_req *r)
{
	struct agent_sock *s;
	uint64_t backlog;
	int path, err;

	if (!stream_allowed(r) || !(s = arg_stream(r, r->argv[0])) ||
	    !arg_num(r, r->argv[1], "backlog", INT32_MAX, &backlog) ||
	    !arg_path(r, r->argv[2], &path))
		return;
	/* Sockets accepted from it take its path. */
	err = set_path(s->fd, path);
	if (!err && nsw_listen(s->fd, backlog ? (int)backlog : BACKLOG_DEFAULT))
		err = errno;
	if (err)
		agent_reply_errno(r, err);
	else
		agent_ok(r);
}

void stream_shutdown(struct agent_req *r)
{
	struct agent_sock *s;
	int how;

	if (!stream_allowed(r) || !(s = arg_stream(r, r->argv[0])))
		return;
	if (!strcmp(r->argv[1], "read"))
		how = SHUT_RD;
	else if (!strcmp(r->argv[1], "write"))
		how = SHUT_WR;
	else if (!strcmp(r->argv[1], "both"))
		how = SHUT_RDWR;
	else {
		agent_bad(r, "\"%.40s\": stream-shutdown takes read, write or both", r->argv[1]);
		return;
	}
	if (nsw_shutdown(s->fd, how))
		agent_reply_errno(r, errno);
	else
		agent_ok(r);
}

/*
 * nsw_close: what was sent goes on to the peer (a graceful close), and the
 * calls blocked on the socket return.  The name stays, its descriptor -1:
 * a later call on it fails with EBADF, and never reaches whatever socket
 * the descriptor's number is given to next.
 */
void stream_close(struct agent_req *r)
{
	struct agent_sock *s;
	int fd;

	if (!stream_allowed(r) || !(s = arg_stream(r, r->argv[0])))
		return;
	fd = s->fd;
	s->fd = -1;
	if (nsw_close(fd))
		agent_reply_errno(r, errno);
	else
		agent_ok(r);
}

static const char *path_name(int p)
{
	return p == NSW_PATH_READ ? "read" : p == NSW_PATH_WRITE ? "write" : "none";
}

void stream_info(struct agent_req *r)
{
	struct agent_sock *s;
	struct nsw_stats st;
	socklen_t len = sizeof(int);
	int path = 0;

	if (!stream_allowed(r) || !(s = arg_stream(r, r->argv[0])))
		return;
	if (nsw_getsockopt(s->fd, NSW_SOL, NSW_PATH, &path, &len)) {
		agent_reply_errno(r, errno);
		return;
	}
	len = sizeof(st);
	if (nsw_getsockopt(s->fd, NSW_SOL, NSW_STATS, &st, &len)) {
		agent_reply_errno(r, errno);
		return;
	}
	agent_reply(r->a, r->id,
		    "ok path_out=%s path_in=%s bytes_sent=%llu bytes_received=%llu msgs_sent=%llu "
		    "msgs_received=%llu large_sends=%llu rdma_ops=%llu registrations=%llu "
		    "credit_updates=%llu credit_waits=%llu",
		    path_name(path & 15), path_name(path >> 4 & 15),
		    (unsigned long long)st.bytes_sent, (unsigned long long)st.bytes_received,
		    (unsigned long long)st.msgs_sent, (unsigned long long)st.msgs_received,
		    (unsigned long long)st.large_sends, (unsigned long long)st.rdma_ops,
		    (unsigned long long)st.registrations, (unsigned long long)st.credit_updates,
		    (unsigned long long)st.credit_waits);
}

/* ---- The blocking calls: a worker thread each ----------------------------------- */

static void *stream_worker(void *arg)
{
	struct agent_op *op = arg;
	socklen_t alen = sizeof(op->addr);
	ssize_t n;

	op->err = 0;
	sem_post(&op->started);
	switch (op->call) {
	case SC_ACCEPT:
		op->accepted_fd = nsw_accept(op->sfd, (struct sockaddr *)&op->addr, &alen);
		if (op->accepted_fd < 0)
			op->err = errno;
		break;
	case SC_CONNECT:
		op->err = set_path(op->sfd, op->path);
		if (!op->err &&
		    nsw_connect(op->sfd, (struct sockaddr *)&op->addr, sizeof(op->addr)))
			op->err = errno;
		break;
	case SC_SEND:
		while (op->moved < op->len) {
			n = nsw_send(op->sfd, op->p + op->moved, op->len - op->moved, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				op->err = errno;
				break;
			}
			op->moved += (size_t)n;
		}
		break;
	case SC_RECV:
		while (op->moved < op->len) {
			n = nsw_recv(op->sfd, op->p + op->moved, op->len - op->moved, MSG_WAITALL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				op->err = errno;
				break;
			}
			if (n == 0) {
				op->eof = true;
				break;
			}
			op->moved += (size_t)n;
		}
		break;
	}
	agent_signal(op->fd);
	return NULL;
}

static struct agent_op *stream_op(const struct agent_req *r, const struct agent_sock *s,
				  enum agent_stream_call call)
{
	struct agent_op *op = agent_op_new(r, OP_STREAM, INVALID_SOCKET);

	if (!op)
		return NULL;
	op->call = call;
	op->sfd = s->fd;
	op->accepted_fd = -1;
	return op;
}

void stream_accept(struct agent_req *r)
{
	struct agent_sock *s;
	struct agent_op *op;

	if (!stream_allowed(r) || !(s = arg_stream(r, r->argv[0])) ||
	    !arg_new_name(r, r->argv[1], "stream socket"))
		return;
	op = stream_op(r, s, SC_ACCEPT);
	if (!op)
		return;
	snprintf(op->name, sizeof(op->name), "%s", r->argv[1]);
	agent_op_start(r, op, stream_worker);
}

void stream_connect(struct agent_req *r)
{
	struct agent_sock *s;
	struct sockaddr_in sa;
	struct agent_op *op;
	int path;

	if (!stream_allowed(r) || !(s = arg_stream(r, r->argv[0])) ||
	    !arg_sockaddr(r, r->argv + 1, &sa) || !arg_path(r, r->argv[3], &path))
		return;
	op = stream_op(r, s, SC_CONNECT);
	if (!op)
		return;
	op->addr = sa;
	op->path = path; /* set by the worker: its failure is the connect's */
	agent_op_start(r, op, stream_worker);
}

void stream_send_recv(struct agent_req *r)
{
	struct agent_sock *s;
	struct agent_buf *b;
	struct agent_op *op;
	size_t off, len;

	if (!stream_allowed(r) || !(s = arg_stream(r, r->argv[0])) ||
	    !arg_range(r, r->argv + 1, &b, &off, &len, UINT64_MAX) || !arg_not_freed(r, b))
		return;
	op = stream_op(r, s, !strcmp(r->verb, "stream-send") ? SC_SEND : SC_RECV);
	if (!op)
		return;
	op->p = b->addr + off;
	op->len = len;
	agent_op_start(r, op, stream_worker);
}

void stream_op_done(struct agent *a, struct agent_op *op)
{
	char peer[INET_ADDRSTRLEN];
	const char *name = op->err ? strerrorname_np(op->err) : NULL;

	pthread_join(op->thread, NULL);
	if (op->err && !name)
		name = "EIO";
	switch (op->call) {
	case SC_ACCEPT:
		if (op->err) {
			agent_reply(a, op->id, "done err %s", name);
		} else if (!agent_add_sock(a, op->name, INVALID_SOCKET, op->accepted_fd)) {
			nsw_close(op->accepted_fd);
			agent_reply(a, op->id, "done err ENOMEM");
		} else {
			inet_ntop(AF_INET, &op->addr.sin_addr, peer, sizeof(peer));
			agent_reply(a, op->id, "done ok sock=%s peer=%s:%u", op->name, peer,
				    ntohs(op->addr.sin_port));
		}
		break;
	case SC_CONNECT:
		if (op->err)
			agent_reply(a, op->id, "done err %s", name);
		else
			agent_reply(a, op->id, "done ok");
		break;
	case SC_SEND:
	case SC_RECV:
		if (op->err)
			agent_reply(a, op->id, "done err %s bytes=%zu", name, op->moved);
		else if (op->eof)
			agent_reply(a, op->id, "done err EOF bytes=%zu", op->moved);
		else
			agent_reply(a, op->id, "done ok bytes=%zu", op->moved);
		break;
	}
	agent_op_free(op);
}

void stream_close_all(struct agent *a)
{
	/* A forked child's stream sockets are its parent's. */
	if (a->stream_parent)
		return;
	for (size_t i = 0; i < a->n_socks; i++) {
		struct agent_sock *s = &a->socks[i];

		if (s->stream && s->fd >= 0) {
			nsw_close(s->fd);
			s->fd = -1;
		}
	}
}
