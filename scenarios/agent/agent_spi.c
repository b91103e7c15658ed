/*
 * The SPI verbs of nicsim-agent: the provider, sockets, accept and connect
 * on worker threads, registrations, and the overlapped data transfers with
 * their completions.  Each checks its arguments (agent_args.c), makes the
 * call and replies; scn_agent_client.h lists them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

#define BACKLOG_DEFAULT 8

/* Room for one more socket, or registration: false if out of memory. */
static bool grow_socks(struct agent *a)
{
	struct agent_sock *t = agent_grow(a->socks, &a->cap_socks, a->n_socks, sizeof(*t));

	if (t)
		a->socks = t;
	return t != NULL;
}

static bool grow_regs(struct agent *a)
{
	struct agent_reg *t = agent_grow(a->regs, &a->cap_regs, a->n_regs, sizeof(*t));

	if (t)
		a->regs = t;
	return t != NULL;
}

/* ---- Provider and sockets ------------------------------------------------- */

void spi_startup(struct agent_req *r)
{
	WSPDATA data;
	WSPPROC_TABLE table;
	int err = WSPStartupEx(MAKEWORD(2, 2), &data, NULL, NULL, &table);

	if (!err)
		r->a->startups++;
	agent_ok_or_wsa(r, err, &err);
}

/*
 * Closing a socket ends a blocking accept or connect on it with WSAEINTR,
 * as Winsock ends a blocking call whose socket another thread closed.  The
 * worker thread may not have entered the provider yet when the close comes
 * (pending is answered just before its call, and the scheduler may hold it
 * off for as long as it likes); its call then finds no socket (WSAENOTSOCK)
 * or, after the last cleanup, no provider (WSANOTINITIALISED).  Both are
 * the same event for the script, so every call pending when its socket was
 * closed here is marked, and worker_done reports it as WSAEINTR whichever
 * way the race went.  all: every socket (the last cleanup closed them).
 */
static void mark_closed(struct agent *a, SOCKET s, bool all)
{
	for (struct agent_op *op = a->ops; op; op = op->next)
		if ((op->kind == OP_ACCEPT || op->kind == OP_CONNECT) && (all || op->s == s))
			op->closed = true;
}

void spi_cleanup(struct agent_req *r)
{
	int err = 0, rc = WSPCleanup(&err);

	if (!rc && r->a->startups > 0 && --r->a->startups == 0)
		mark_closed(r->a, INVALID_SOCKET, true);
	agent_ok_or_wsa(r, rc, &err);
}

bool agent_add_sock(struct agent *a, const char *name, SOCKET s, int stream_fd)
{
	if (!grow_socks(a))
		return false;
	a->socks[a->n_socks] =
	    (struct agent_sock){.s = s, .stream = stream_fd >= 0, .fd = stream_fd};
	snprintf(a->socks[a->n_socks].name, AGENT_NAME_MAX, "%s", name);
	a->n_socks++;
	return true;
}

void spi_socket(struct agent_req *r)
{
	struct agent *a = r->a;
	int err = 0;
	SOCKET s;

	if (!arg_new_name(r, r->argv[0], "socket"))
		return;
	if (!grow_socks(a)) {
		agent_reply_errno(r, ENOMEM);
		return;
	}
	s = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);
	if (s == INVALID_SOCKET) {
		agent_reply_wsa(r, err);
		return;
	}
	agent_add_sock(a, r->argv[0], s, -1); /* room was made above */
	agent_ok(r);
}

void spi_bind(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	struct sockaddr_in sa;
	int err = 0;

	if (!s || !arg_sockaddr(r, r->argv + 1, &sa))
		return;
	agent_ok_or_wsa(r, WSPBind(s->s, (struct sockaddr *)&sa, sizeof(sa), &err), &err);
}

void spi_listen(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	uint64_t backlog = BACKLOG_DEFAULT;
	int err = 0;

	if (!s || (r->argc > 1 && !arg_num(r, r->argv[1], "backlog", INT32_MAX, &backlog)))
		return;
	agent_ok_or_wsa(r, WSPListen(s->s, (int)backlog, &err), &err);
}

/* WSPCloseSocket; what was pending on the socket ends (mark_closed). */
void spi_close(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	int err = 0, rc;

	if (!s)
		return;
	rc = WSPCloseSocket(s->s, &err);
	if (!rc)
		mark_closed(r->a, s->s, false);
	agent_ok_or_wsa(r, rc, &err);
}

/* ---- Accept and connect: a blocking call on a worker thread each ---------- */

static void *accept_worker(void *arg)
{
	struct agent_op *op = arg;
	int len = sizeof(op->addr);

	op->err = 0;
	sem_post(&op->started);
	op->accepted = WSPAccept(op->s, (struct sockaddr *)&op->addr, &len, NULL, 0, &op->err);
	if (op->accepted != INVALID_SOCKET)
		op->err = 0;
	agent_signal(op->fd);
	return NULL;
}

static void *connect_worker(void *arg)
{
	struct agent_op *op = arg;
	int err = 0;

	sem_post(&op->started);
	if (WSPConnect(op->s, (struct sockaddr *)&op->addr, sizeof(op->addr), NULL, NULL, NULL,
		       NULL, &err))
		op->err = err ? err : WSAEINVAL;
	else
		op->err = 0;
	agent_signal(op->fd);
	return NULL;
}

void spi_accept(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	struct agent_op *op;

	if (!s || !arg_new_name(r, r->argv[1], "socket"))
		return;
	op = agent_op_new(r, OP_ACCEPT, s->s);
	if (!op)
		return;
	snprintf(op->name, sizeof(op->name), "%s", r->argv[1]);
	agent_op_start(r, op, accept_worker);
}

void spi_connect(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	struct sockaddr_in sa;
	struct agent_op *op;

	if (!s || !arg_sockaddr(r, r->argv + 1, &sa))
		return;
	op = agent_op_new(r, OP_CONNECT, s->s);
	if (!op)
		return;
	op->addr = sa;
	agent_op_start(r, op, connect_worker);
}

/* ---- Registrations ---------------------------------------------------------- */

static bool arg_access(const struct agent_req *r, const char *s, DWORD *flags)
{
	uint64_t n;

	if (!strcmp(s, "read"))
		*flags = MEM_READ;
	else if (!strcmp(s, "write"))
		*flags = MEM_WRITE;
	else if (!strcmp(s, "readwrite"))
		*flags = MEM_READWRITE;
	else if (s[0] >= '0' && s[0] <= '9' && arg_num(r, s, "access", UINT32_MAX, &n))
		*flags = (DWORD)n;
	else
		return s[0] >= '0' && s[0] <= '9'
			   ? false
			   : agent_bad(r, "access \"%.40s\": read, write, readwrite or a number",
				       s);
	return true;
}

void spi_register(struct agent_req *r)
{
	struct agent *a = r->a;
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	struct agent_buf *b;
	size_t off, len;
	DWORD flags;
	HANDLE h;
	int err = 0;

	if (!s || !arg_range(r, r->argv + 1, &b, &off, &len, UINT32_MAX) || !arg_not_freed(r, b) ||
	    !arg_access(r, r->argv[4], &flags) || !arg_new_name(r, r->argv[5], "handle"))
		return;
	if (!grow_regs(a)) {
		agent_reply_errno(r, ENOMEM);
		return;
	}
	h = WSPRegisterMemory(s->s, b->addr + off, (DWORD)len, flags, &err);
	if (!h) {
		agent_reply_wsa(r, err);
		return;
	}
	a->regs[a->n_regs] =
	    (struct agent_reg){.s = s->s, .start = (uintptr_t)(b->addr + off), .len = len, .h = h};
	snprintf(a->regs[a->n_regs].name, AGENT_NAME_MAX, "%s", r->argv[5]);
	a->n_regs++;
	agent_reply(a, r->id, "ok handle=%p", h);
}

/* A handle: a registration's name, or a number (a forged handle). */
static bool arg_handle(const struct agent_req *r, const char *s, HANDLE *h, struct agent_reg **reg)
{
	uint64_t n;

	*reg = NULL;
	if (s[0] >= '0' && s[0] <= '9') {
		if (!arg_num(r, s, "handle", UINTPTR_MAX, &n))
			return false;
		*h = (HANDLE)(uintptr_t)n;
		return true;
	}
	*reg = arg_reg(r, s);
	if (*reg)
		*h = (*reg)->h;
	return *reg != NULL;
}

void spi_deregister(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	struct agent_reg *reg;
	HANDLE h;
	int err = 0, rc;

	if (!s || !arg_handle(r, r->argv[1], &h, &reg))
		return;
	rc = WSPDeregisterMemory(s->s, h, &err);
	if (!rc && reg)
		reg->released = true;
	agent_ok_or_wsa(r, rc, &err);
}

void spi_register_rdma(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	uint8_t desc[SCN_AGENT_BLOB_MAX];
	char text[2 * SCN_AGENT_BLOB_MAX + 1];
	DWORD flags, dlen = sizeof(desc);
	struct agent_buf *b;
	size_t off, len;
	int err = 0;

	if (!s || !arg_range(r, r->argv + 1, &b, &off, &len, UINT32_MAX) || !arg_not_freed(r, b) ||
	    !arg_access(r, r->argv[4], &flags))
		return;
	if (WSPRegisterRdmaMemory(s->s, b->addr + off, (DWORD)len, flags, desc, &dlen, &err)) {
		agent_reply_wsa(r, err);
		return;
	}
	agent_hex(text, desc, dlen < sizeof(desc) ? dlen : sizeof(desc));
	agent_reply(r->a, r->id, "ok desc=x:%s", text);
}

void spi_deregister_rdma(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	uint8_t desc[SCN_AGENT_BLOB_MAX];
	size_t dlen;
	int err = 0;

	if (!s || !arg_blob(r, r->argv[1], desc, &dlen))
		return;
	agent_ok_or_wsa(r, WSPDeregisterRdmaMemory(s->s, desc, (DWORD)dlen, &err), &err);
}

void spi_cache_callback(struct agent_req *r)
{
	struct agent_buf *b;
	size_t off = 0, len;
	int err = 0;

	if (r->argc == 2) { /* BUF, or BUF OFF LEN */
		arg_count(r, 1, 1);
		return;
	}
	if (r->argc == 3) {
		if (!arg_range(r, r->argv, &b, &off, &len, UINT64_MAX))
			return;
	} else {
		b = arg_buf(r, r->argv[0]);
		if (!b)
			return;
		len = b->len;
	}
	agent_ok_or_wsa(r, WSPMemoryRegistrationCacheCallback(b->addr + off, len, &err), &err);
}

void spi_cache_stats(struct agent_req *r)
{
	struct nicsim_cache_stats st;
	int rc = nicsim_cache_stats(&st);

	if (rc) {
		agent_reply_errno(r, -rc);
		return;
	}
	agent_reply(r->a, r->id,
		    "ok hits=%llu misses=%llu evictions=%llu invalidations=%llu entries=%llu "
		    "unused=%llu bytes=%llu pinned=%llu flags=0x%x",
		    (unsigned long long)st.hits, (unsigned long long)st.misses,
		    (unsigned long long)st.evictions, (unsigned long long)st.invalidations,
		    (unsigned long long)st.entries, (unsigned long long)st.unused,
		    (unsigned long long)st.bytes, (unsigned long long)st.bytes_pinned, st.flags);
}

void spi_socket_error(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	struct nicsim_socket_error e;
	char what[2 * sizeof(e.what) + 1], local[INET_ADDRSTRLEN], peer[INET_ADDRSTRLEN];
	size_t n = 0;
	int rc;

	if (!s)
		return;
	rc = nicsim_socket_error(s->s, &e);
	if (rc) {
		agent_reply_wsa(r, rc);
		return;
	}
	/* The sentence, quoted: \" and \\ escaped, anything unprintable a space. */
	for (size_t i = 0; i < sizeof(e.what) && e.what[i]; i++) {
		char c = e.what[i];

		if (c == '"' || c == '\\')
			what[n++] = '\\';
		what[n++] = c >= 0x20 && c <= 0x7e ? c : ' ';
	}
	what[n] = '\0';
	inet_ntop(AF_INET, &e.local_addr, local, sizeof(local));
	inet_ntop(AF_INET, &e.peer_addr, peer, sizeof(peer));
	agent_reply(r->a, r->id,
		    "ok wsa=%s nic_status=%u local=%s peer=%s local_qp=%u peer_qp=%u what=\"%s\"",
		    nicsim_wsa_name(e.wsa_error), e.nic_status, local, peer, e.local_qp, e.peer_qp,
		    what);
}

/* ---- Data transfer: overlapped, answered when the provider signals ------------ */

/* Answer an overlapped post: err if the call failed, else pending. */
static void posted(const struct agent_req *r, struct agent_op *op, int rc, int err)
{
	if (rc == SOCKET_ERROR && err != WSA_IO_PENDING) {
		agent_reply_wsa(r, err);
		agent_op_free(op);
		return;
	}
	/* Done at once (not what the provider does today): make sure the loop sees it. */
	if (rc == 0 && __atomic_load_n(&op->ov.Internal, __ATOMIC_ACQUIRE) != WSA_STATUS_PENDING)
		agent_signal(op->fd);
	agent_op_add(r->a, op);
	agent_reply(r->a, r->id, "pending");
}

void spi_send_recv(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	bool send = !strcmp(r->verb, "send");
	struct agent_buf *b;
	struct agent_op *op;
	size_t off, len;
	WSABUF wb;
	DWORD n = 0, flags = 0;
	int err = 0, rc;

	if (!s || !arg_range(r, r->argv + 1, &b, &off, &len, UINT32_MAX) || !arg_not_freed(r, b))
		return;
	op = agent_op_new(r, OP_OVERLAPPED, s->s);
	if (!op)
		return;
	op->ov.hEvent = op->fd;
	wb = (WSABUF){.len = (ULONG)len, .buf = (char *)b->addr + off};
	rc = send ? WSPSend(s->s, &wb, 1, &n, 0, &op->ov, NULL, NULL, &err)
		  : WSPRecv(s->s, &wb, 1, &n, &flags, &op->ov, NULL, NULL, &err);
	posted(r, op, rc, err);
}

/* The local registration of an RDMA call: handle=, else the newest covering one. */
static bool rdma_handle(const struct agent_req *r, const char *given, SOCKET s, uintptr_t start,
			size_t len, HANDLE *h)
{
	struct agent_reg *reg;

	if (given)
		return arg_handle(r, given, h, &reg);
	*h = NULL;
	for (size_t i = r->a->n_regs; i-- > 0;) {
		reg = &r->a->regs[i];
		if (!reg->released && reg->s == s && reg->start <= start &&
		    start + len <= reg->start + reg->len) {
			*h = reg->h;
			break;
		}
	}
	return true;
}

void spi_rdma(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	bool write = !strcmp(r->verb, "write");
	uint8_t desc[SCN_AGENT_BLOB_MAX];
	const char *handle = NULL;
	bool have_desc = false;
	uint64_t at = 0;
	struct agent_buf *b;
	struct agent_op *op;
	size_t off, len, dlen = 0;
	WSABUFEX wb;
	DWORD n = 0;
	int err = 0, rc;

	if (!s || !arg_range(r, r->argv + 1, &b, &off, &len, UINT32_MAX) || !arg_not_freed(r, b))
		return;
	for (int i = 4; i < r->argc; i++) {
		char *w = r->argv[i];

		if (!strncmp(w, "desc=", 5)) {
			if (!arg_blob(r, w + 5, desc, &dlen))
				return;
			have_desc = true;
		} else if (!strncmp(w, "at=", 3)) {
			if (!arg_num(r, w + 3, "at", UINT32_MAX, &at))
				return;
		} else if (!strncmp(w, "handle=", 7)) {
			handle = w + 7;
		} else {
			{
				agent_bad(r, "\"%.40s\": %s takes desc=, at= and handle=", w,
					  r->verb);
				return;
			}
		}
	}
	if (!have_desc) {
		agent_bad(r, "%s needs desc=x:HEX, the peer's descriptor", r->verb);
		return;
	}
	wb = (WSABUFEX){.len = (ULONG)len, .buf = (char *)b->addr + off};
	if (!rdma_handle(r, handle, s->s, (uintptr_t)wb.buf, len, &wb.handle))
		return;
	op = agent_op_new(r, OP_OVERLAPPED, s->s);
	if (!op)
		return;
	op->ov.hEvent = op->fd;
	rc = write ? WSPRdmaWrite(s->s, &wb, 1, desc, (DWORD)dlen, (DWORD)at, &n, 0, &op->ov, NULL,
				  NULL, &err)
		   : WSPRdmaRead(s->s, &wb, 1, desc, (DWORD)dlen, (DWORD)at, &n, 0, &op->ov, NULL,
				 NULL, &err);
	posted(r, op, rc, err);
}

/* ---- Completions ------------------------------------------------------------ */

static void overlapped_done(struct agent *a, struct agent_op *op)
{
	DWORD bytes = 0, flags = 0;
	uint64_t count;
	int err = 0;

	if (read(op->fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		agent_log("cannot reset an operation's eventfd (%s)", strerror(errno));
	if (__atomic_load_n(&op->ov.Internal, __ATOMIC_ACQUIRE) == WSA_STATUS_PENDING) {
		agent_op_add(a, op); /* not done yet: keep waiting */
		return;
	}
	if (!WSPGetOverlappedResult(op->s, &op->ov, &bytes, FALSE, &flags, &err) &&
	    (err == WSAENOTSOCK || err == WSANOTINITIALISED || err == WSAEINVAL)) {
		/* The socket is gone (closed, cleaned up): its fields say the same. */
		err = (int)op->ov.OffsetHigh;
		bytes = (DWORD)op->ov.InternalHigh;
	}
	if (err)
		agent_reply(a, op->id, "done err %s bytes=%u", nicsim_wsa_name(err), bytes);
	else
		agent_reply(a, op->id, "done ok bytes=%u", bytes);
	agent_op_free(op);
}

static void worker_done(struct agent *a, struct agent_op *op)
{
	char peer[INET_ADDRSTRLEN];
	int err = 0;

	pthread_join(op->thread, NULL);
	if (op->closed && (op->err == WSAENOTSOCK || op->err == WSANOTINITIALISED))
		op->err = WSAEINTR; /* closed before its call began (mark_closed) */
	if (op->err) {
		agent_reply(a, op->id, "done err %s", nicsim_wsa_name(op->err));
	} else if (op->kind == OP_CONNECT) {
		agent_reply(a, op->id, "done ok");
	} else if (!agent_add_sock(a, op->name, op->accepted, -1)) {
		WSPCloseSocket(op->accepted, &err);
		agent_reply(a, op->id, "done err %s", nicsim_wsa_name(WSAENOBUFS));
	} else {
		inet_ntop(AF_INET, &op->addr.sin_addr, peer, sizeof(peer));
		agent_reply(a, op->id, "done ok sock=%s peer=%s:%u", op->name, peer,
			    ntohs(op->addr.sin_port));
	}
	agent_op_free(op);
}

void spi_op_done(struct agent *a, struct agent_op *op)
{
	if (op->kind == OP_OVERLAPPED)
		overlapped_done(a, op);
	else
		worker_done(a, op);
}
