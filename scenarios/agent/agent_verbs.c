/*
 * The verbs of nicsim-agent: one function per request kind, each checking
 * its arguments (agent_args.c), making the SPI or C library call, and
 * replying.  scn_agent_client.h lists them with their arguments and
 * replies.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "fab_wire.h"

#define BUFFER_MAX (1ull << 30) /* the largest buffer an agent makes */
#define BACKLOG_DEFAULT 8

/*
 * Room for one more element in a table of n elements of size bytes, *cap
 * of them allocated: the table (moved, perhaps), or NULL if out of memory
 * (the old one is untouched).
 */
static void *grow(void *table, size_t *cap, size_t n, size_t size)
{
	void *bigger;

	if (n < *cap)
		return table;
	bigger = realloc(table, (*cap ? *cap * 2 : 16) * size);
	if (bigger)
		*cap = *cap ? *cap * 2 : 16;
	return bigger;
}

/* Room for one more socket, buffer, registration: false if out of memory. */
static bool grow_socks(struct agent *a)
{
	struct agent_sock *t = grow(a->socks, &a->cap_socks, a->n_socks, sizeof(*t));

	if (t)
		a->socks = t;
	return t != NULL;
}

static bool grow_bufs(struct agent *a)
{
	struct agent_buf *t = grow(a->bufs, &a->cap_bufs, a->n_bufs, sizeof(*t));

	if (t)
		a->bufs = t;
	return t != NULL;
}

static bool grow_regs(struct agent *a)
{
	struct agent_reg *t = grow(a->regs, &a->cap_regs, a->n_regs, sizeof(*t));

	if (t)
		a->regs = t;
	return t != NULL;
}

static size_t page_round(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (n + page - 1) / page * page;
}

static void ok(const struct agent_req *r)
{
	agent_reply(r->a, r->id, "ok");
}

/*
 * ok, or err with the WSA code, after an SPI call that returns 0 or
 * SOCKET_ERROR: *err is read after the call (an argument would not be).
 */
static void ok_or_wsa(const struct agent_req *r, int rc, const int *err)
{
	if (rc)
		agent_reply_wsa(r, *err);
	else
		ok(r);
}

/* ---- Provider and sockets ------------------------------------------------- */

static void v_hello(struct agent_req *r)
{
	agent_reply(r->a, r->id, "ok pid=%d version=1", (int)getpid());
}

static void v_startup(struct agent_req *r)
{
	WSPDATA data;
	WSPPROC_TABLE table;
	int err = WSPStartupEx(MAKEWORD(2, 2), &data, NULL, NULL, &table);

	if (!err)
		r->a->startups++;
	ok_or_wsa(r, err, &err);
}

static void v_cleanup(struct agent_req *r)
{
	int err = 0, rc = WSPCleanup(&err);

	if (!rc && r->a->startups > 0)
		r->a->startups--;
	ok_or_wsa(r, rc, &err);
}

static bool add_sock(struct agent *a, const char *name, SOCKET s)
{
	if (!grow_socks(a))
		return false;
	a->socks[a->n_socks] = (struct agent_sock){.s = s};
	snprintf(a->socks[a->n_socks].name, AGENT_NAME_MAX, "%s", name);
	a->n_socks++;
	return true;
}

static void v_socket(struct agent_req *r)
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
	add_sock(a, r->argv[0], s); /* room was made above */
	ok(r);
}

/* ADDR PORT at words[0..2) into *sa. */
static bool arg_sockaddr(const struct agent_req *r, char **words, struct sockaddr_in *sa)
{
	uint64_t port;

	*sa = (struct sockaddr_in){.sin_family = AF_INET};
	if (!arg_addr(r, words[0], &sa->sin_addr) || !arg_num(r, words[1], "port", 65535, &port))
		return false;
	sa->sin_port = htons((uint16_t)port);
	return true;
}

static void v_bind(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	struct sockaddr_in sa;
	int err = 0;

	if (!s || !arg_sockaddr(r, r->argv + 1, &sa))
		return;
	ok_or_wsa(r, WSPBind(s->s, (struct sockaddr *)&sa, sizeof(sa), &err), &err);
}

static void v_listen(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	uint64_t backlog = BACKLOG_DEFAULT;
	int err = 0;

	if (!s || (r->argc > 1 && !arg_num(r, r->argv[1], "backlog", INT32_MAX, &backlog)))
		return;
	ok_or_wsa(r, WSPListen(s->s, (int)backlog, &err), &err);
}

static void v_close(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	int err = 0;

	if (s)
		ok_or_wsa(r, WSPCloseSocket(s->s, &err), &err);
}

/* ---- Accept and connect: a blocking call on a worker thread each ---------- */

static void signal_fd(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) != sizeof(one))
		agent_log("cannot signal an operation's eventfd (%s)", strerror(errno));
}

static void *accept_worker(void *arg)
{
	struct agent_op *op = arg;
	int len = sizeof(op->addr);

	op->err = 0;
	sem_post(&op->started);
	op->accepted = WSPAccept(op->s, (struct sockaddr *)&op->addr, &len, NULL, 0, &op->err);
	if (op->accepted != INVALID_SOCKET)
		op->err = 0;
	signal_fd(op->fd);
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
	signal_fd(op->fd);
	return NULL;
}

/* A new operation with an eventfd, or NULL after replying err. */
static struct agent_op *new_op(const struct agent_req *r, enum agent_op_kind kind, SOCKET s)
{
	struct agent_op *op = agent_op_new(r->a, r->id, kind);

	if (op)
		op->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!op || op->fd < 0) {
		agent_reply_errno(r, op ? errno : ENOMEM);
		agent_op_free(op);
		return NULL;
	}
	op->s = s;
	return op;
}

/*
 * Start op's worker thread and answer pending (or err).  Pending is
 * answered once the thread is about to make its call, so that a request
 * that follows (closing the socket) finds the call made, as nearly as one
 * thread can tell of another.
 */
static void start_worker(const struct agent_req *r, struct agent_op *op, void *(*fn)(void *))
{
	int rc = pthread_create(&op->thread, NULL, fn, op);

	if (rc) {
		agent_reply_errno(r, rc);
		agent_op_free(op);
		return;
	}
	while (sem_wait(&op->started) && errno == EINTR)
		;
	agent_op_add(r->a, op);
	agent_reply(r->a, r->id, "pending");
}

static void v_accept(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	struct agent_op *op;

	if (!s || !arg_new_name(r, r->argv[1], "socket"))
		return;
	op = new_op(r, OP_ACCEPT, s->s);
	if (!op)
		return;
	snprintf(op->name, sizeof(op->name), "%s", r->argv[1]);
	start_worker(r, op, accept_worker);
}

static void v_connect(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	struct sockaddr_in sa;
	struct agent_op *op;

	if (!s || !arg_sockaddr(r, r->argv + 1, &sa))
		return;
	op = new_op(r, OP_CONNECT, s->s);
	if (!op)
		return;
	op->addr = sa;
	start_worker(r, op, connect_worker);
}

/* ---- Buffers ---------------------------------------------------------------- */

static void v_buffer(struct agent_req *r)
{
	struct agent *a = r->a;
	struct scn_pattern pat = {.kind = SCN_PATTERN_ZERO};
	struct agent_buf b = {.state = BUF_LIVE};
	uint64_t size;

	if (!arg_new_name(r, r->argv[0], "buffer") ||
	    !arg_num(r, r->argv[1], "size", BUFFER_MAX, &size))
		return;
	if (!size) {
		agent_bad(r, "a buffer of 0 bytes: at least 1");
		return;
	}
	if (!strcmp(r->argv[2], "mmap"))
		b.kind = BUF_MMAP;
	else if (!strcmp(r->argv[2], "malloc"))
		b.kind = BUF_MALLOC;
	else {
		agent_bad(r, "buffer kind \"%.40s\": mmap or malloc", r->argv[2]);
		return;
	}
	if (r->argc > 3 && !arg_pattern(r, r->argv + 3, r->argc - 3, &pat))
		return;
	if (!grow_bufs(a)) {
		agent_reply_errno(r, ENOMEM);
		return;
	}
	b.len = (size_t)size;
	if (b.kind == BUF_MMAP) {
		b.map_len = page_round(b.len);
		b.addr = mmap(NULL, b.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		if (b.addr == MAP_FAILED) {
			agent_reply_errno(r, errno);
			return;
		}
	} else {
		b.addr = malloc(b.len);
		if (!b.addr) {
			agent_reply_errno(r, ENOMEM);
			return;
		}
	}
	scn_pattern_fill(&pat, 0, b.addr, b.len);
	snprintf(b.name, sizeof(b.name), "%s", r->argv[0]);
	a->bufs[a->n_bufs++] = b;
	agent_reply(a, r->id, "ok addr=%p len=%zu", (void *)b.addr, b.len);
}

static void v_fill(struct agent_req *r)
{
	struct scn_pattern pat;
	struct agent_buf *b;
	size_t off, len;

	if (!arg_range(r, r->argv, &b, &off, &len, UINT64_MAX) || !arg_touchable(r, b) ||
	    !arg_pattern(r, r->argv + 3, r->argc - 3, &pat))
		return;
	scn_pattern_fill(&pat, 0, b->addr + off, len);
	ok(r);
}

static void hex(char *out, const uint8_t *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static void v_peek(struct agent_req *r)
{
	char text[2 * SCN_AGENT_PEEK_MAX + 1];
	struct agent_buf *b;
	size_t off, len;

	if (!arg_range(r, r->argv, &b, &off, &len, SCN_AGENT_PEEK_MAX) || !arg_touchable(r, b))
		return;
	hex(text, b->addr + off, len);
	agent_reply(r->a, r->id, "ok x:%s", text);
}

static void v_sum(struct agent_req *r)
{
	struct agent_buf *b;
	size_t off, len;

	if (!arg_range(r, r->argv, &b, &off, &len, UINT64_MAX) || !arg_touchable(r, b))
		return;
	agent_reply(r->a, r->id, "ok crc32=0x%08x len=%zu", fab_crc32(0, b->addr + off, len), len);
}

/* The buffer named by words[0], of the kind the verb needs. */
static struct agent_buf *arg_buf_of(const struct agent_req *r, const char *name,
				    enum agent_buf_kind kind)
{
	struct agent_buf *b = arg_buf(r, name);

	if (b && b->kind != kind) {
		agent_bad(r, "%s needs a%s buffer: %s is from %s", r->verb,
			  kind == BUF_MMAP ? "n mmap" : " malloc", b->name,
			  b->kind == BUF_MMAP ? "mmap" : "malloc");
		return NULL;
	}
	return b;
}

static void v_munmap(struct agent_req *r)
{
	struct agent_buf *b = arg_buf_of(r, r->argv[0], BUF_MMAP);

	/* Unmapped already: its range may be someone else's by now. */
	if (!b || !arg_touchable(r, b))
		return;
	if (munmap(b->addr, b->map_len)) {
		agent_reply_errno(r, errno);
		return;
	}
	b->state = BUF_UNMAPPED;
	ok(r);
}

/*
 * A new mapping at the buffer's address.  Where the buffer is mapped,
 * `fixed` replaces its own mapping (MAP_FIXED, the memory changing under
 * whatever registered it); where it was unmapped, the range may have been
 * taken since (a later buffer, the C library), so the mapping is always
 * made with MAP_FIXED_NOREPLACE and fails with EEXIST rather than replace
 * what is there.
 */
static void v_mmap(struct agent_req *r)
{
	struct agent_buf *b = arg_buf_of(r, r->argv[0], BUF_MMAP);
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
	void *p;

	if (!b)
		return;
	if (r->argc > 1 && strcmp(r->argv[1], "fixed")) {
		agent_bad(r, "mmap's option \"%.40s\": only fixed", r->argv[1]);
		return;
	}
	if (r->argc > 1 && b->state == BUF_LIVE)
		flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
	p = mmap(b->addr, b->map_len, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED) {
		agent_reply_errno(r, errno);
		return;
	}
	if (p != b->addr) { /* a kernel that took MAP_FIXED_NOREPLACE as a hint */
		munmap(p, b->map_len);
		agent_reply_errno(r, EEXIST);
		return;
	}
	b->state = BUF_LIVE;
	agent_reply(r->a, r->id, "ok addr=%p", p);
}

static void v_mremap(struct agent_req *r)
{
	struct agent_buf *b = arg_buf_of(r, r->argv[0], BUF_MMAP);
	uint64_t size;
	size_t map_len;
	void *p;

	if (!b || !arg_touchable(r, b) || !arg_num(r, r->argv[1], "size", BUFFER_MAX, &size))
		return;
	if (!size) {
		agent_bad(r, "mremap to 0 bytes: use munmap");
		return;
	}
	map_len = page_round((size_t)size);
	p = mremap(b->addr, b->map_len, map_len, MREMAP_MAYMOVE);
	if (p == MAP_FAILED) {
		agent_reply_errno(r, errno);
		return;
	}
	agent_reply(r->a, r->id, "ok addr=%p moved=%d", p, p != b->addr);
	b->addr = p;
	b->len = (size_t)size;
	b->map_len = map_len;
}

/*
 * madvise over an mmap buffer or a range of it.  Only mmap buffers: the
 * kernel rounds the range out to whole pages, which stay inside the
 * buffer's own mapping, while around a malloc block they would reach the
 * C library's memory.
 */
static void v_madvise(struct agent_req *r)
{
	static const struct {
		const char *name;
		int advice;
	} advices[] = {{"dontneed", MADV_DONTNEED}, {"free", MADV_FREE}, {"remove", MADV_REMOVE}};
	struct agent_buf *b;
	size_t off = 0, len, i;

	if (r->argc == 3) { /* BUF ADV, or BUF ADV OFF LEN */
		arg_count(r, 2, 2);
		return;
	}
	for (i = 0; i < sizeof(advices) / sizeof(advices[0]); i++)
		if (!strcmp(r->argv[1], advices[i].name))
			break;
	if (i == sizeof(advices) / sizeof(advices[0])) {
		agent_bad(r, "advice \"%.40s\": dontneed, free or remove", r->argv[1]);
		return;
	}
	b = arg_buf_of(r, r->argv[0], BUF_MMAP);
	if (!b || !arg_touchable(r, b))
		return;
	len = b->map_len;
	if (r->argc == 4) {
		char *words[3] = {r->argv[0], r->argv[2], r->argv[3]};

		if (!arg_range(r, words, &b, &off, &len, UINT64_MAX))
			return;
	}
	if (madvise(b->addr + off, len, advices[i].advice)) {
		agent_reply_errno(r, errno);
		return;
	}
	ok(r);
}

static void v_free(struct agent_req *r)
{
	struct agent_buf *b = arg_buf_of(r, r->argv[0], BUF_MALLOC);

	if (!b || !arg_touchable(r, b))
		return;
	free(b->addr);
	b->state = BUF_FREED;
	ok(r);
}

static void v_realloc(struct agent_req *r)
{
	struct agent_buf *b = arg_buf_of(r, r->argv[0], BUF_MALLOC);
	uint64_t size;
	void *p;

	if (!b || !arg_touchable(r, b) || !arg_num(r, r->argv[1], "size", BUFFER_MAX, &size))
		return;
	if (!size) {
		agent_bad(r, "realloc to 0 bytes: use free");
		return;
	}
	p = realloc(b->addr, (size_t)size);
	if (!p) {
		agent_reply_errno(r, ENOMEM);
		return;
	}
	agent_reply(r->a, r->id, "ok addr=%p moved=%d", p, p != (void *)b->addr);
	b->addr = p;
	b->len = (size_t)size;
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

static void v_register(struct agent_req *r)
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

static void v_deregister(struct agent_req *r)
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
	ok_or_wsa(r, rc, &err);
}

static void v_register_rdma(struct agent_req *r)
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
	hex(text, desc, dlen < sizeof(desc) ? dlen : sizeof(desc));
	agent_reply(r->a, r->id, "ok desc=x:%s", text);
}

static void v_deregister_rdma(struct agent_req *r)
{
	struct agent_sock *s = arg_sock(r, r->argv[0]);
	uint8_t desc[SCN_AGENT_BLOB_MAX];
	size_t dlen;
	int err = 0;

	if (!s || !arg_blob(r, r->argv[1], desc, &dlen))
		return;
	ok_or_wsa(r, WSPDeregisterRdmaMemory(s->s, desc, (DWORD)dlen, &err), &err);
}

static void v_cache_callback(struct agent_req *r)
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
	ok_or_wsa(r, WSPMemoryRegistrationCacheCallback(b->addr + off, len, &err), &err);
}

static void v_cache_stats(struct agent_req *r)
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

static void v_socket_error(struct agent_req *r)
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
		signal_fd(op->fd);
	agent_op_add(r->a, op);
	agent_reply(r->a, r->id, "pending");
}

static void v_send_recv(struct agent_req *r)
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
	op = new_op(r, OP_OVERLAPPED, s->s);
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

static void v_rdma(struct agent_req *r)
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
	op = new_op(r, OP_OVERLAPPED, s->s);
	if (!op)
		return;
	op->ov.hEvent = op->fd;
	rc = write ? WSPRdmaWrite(s->s, &wb, 1, desc, (DWORD)dlen, (DWORD)at, &n, 0, &op->ov, NULL,
				  NULL, &err)
		   : WSPRdmaRead(s->s, &wb, 1, desc, (DWORD)dlen, (DWORD)at, &n, 0, &op->ov, NULL,
				 NULL, &err);
	posted(r, op, rc, err);
}

/* ---- Processes ----------------------------------------------------------------- */

/* A forked child's waiter: reap it, then signal its operation. */
static void *fork_waiter(void *arg)
{
	struct agent_op *op = arg;

	while (waitpid(op->pid, &op->status, 0) < 0) {
		if (errno != EINTR) {
			op->status = -errno;
			break;
		}
	}
	signal_fd(op->fd);
	return NULL;
}

/*
 * Fork: the child takes the channel that came with the request; the parent
 * answers pending with its pid and, through a waiter thread (a thread
 * rather than a pidfd, which valgrind cannot follow), done when it ends.
 */
static void v_fork(struct agent_req *r)
{
	struct agent *a = r->a;
	int chan = agent_take_passed(a);
	struct agent_op *op;
	pid_t pid;
	int rc;

	if (chan < 0) {
		agent_bad(r, "fork needs the child's channel: send the request on a UNIX socket "
			     "with a socket attached (SCM_RIGHTS)");
		return;
	}
	op = new_op(r, OP_FORK, INVALID_SOCKET);
	if (!op) {
		close(chan);
		return;
	}
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		agent_reply_errno(r, errno);
		close(chan);
		agent_op_free(op);
		return;
	}
	if (pid == 0) {
		agent_op_free(op);
		agent_become_child(a, chan);
		return;
	}
	close(chan);
	op->pid = pid;
	rc = pthread_create(&op->thread, NULL, fork_waiter, op);
	agent_reply(a, r->id, "pending pid=%d", (int)pid);
	if (rc) {
		agent_log("cannot start a thread to wait for child %d (%s): its end will not be "
			  "reported",
			  (int)pid, strerror(rc));
		agent_op_free(op);
		return;
	}
	agent_op_add(a, op);
}

/* Answer, then end at once (agent.c): no cleanup, as a process that exits. */
static void v_exit(struct agent_req *r)
{
	uint64_t status;

	if (!arg_num(r, r->argv[0], "status", 255, &status))
		return;
	ok(r);
	r->a->exit_status = (int)status;
	r->a->closing = true;
}
/* ---- Dispatch and completions ------------------------------------------------- */

static const struct verb {
	const char *name;
	int min, max; /* argument count */
	void (*fn)(struct agent_req *r);
} verbs[] = {
    {"hello", 0, 0, v_hello},
    {"startup", 0, 0, v_startup},
    {"cleanup", 0, 0, v_cleanup},
    {"socket", 1, 1, v_socket},
    {"bind", 3, 3, v_bind},
    {"listen", 1, 2, v_listen},
    {"accept", 2, 2, v_accept},
    {"connect", 3, 3, v_connect},
    {"close", 1, 1, v_close},
    {"buffer", 3, 5, v_buffer},
    {"fill", 4, 5, v_fill},
    {"peek", 3, 3, v_peek},
    {"sum", 3, 3, v_sum},
    {"register", 6, 6, v_register},
    {"deregister", 2, 2, v_deregister},
    {"register-rdma", 5, 5, v_register_rdma},
    {"deregister-rdma", 2, 2, v_deregister_rdma},
    {"write", 5, 7, v_rdma},
    {"read", 5, 7, v_rdma},
    {"send", 4, 4, v_send_recv},
    {"recv", 4, 4, v_send_recv},
    {"cache-callback", 1, 3, v_cache_callback},
    {"cache-stats", 0, 0, v_cache_stats},
    {"socket-error", 1, 1, v_socket_error},
    {"munmap", 1, 1, v_munmap},
    {"mmap", 1, 2, v_mmap},
    {"mremap", 2, 2, v_mremap},
    {"madvise", 2, 4, v_madvise},
    {"free", 1, 1, v_free},
    {"realloc", 2, 2, v_realloc},
    {"fork", 0, 0, v_fork},
    {"exit", 1, 1, v_exit},
};

void agent_dispatch(struct agent_req *r)
{
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		if (strcmp(r->verb, verbs[i].name))
			continue;
		if (arg_count(r, verbs[i].min, verbs[i].max))
			verbs[i].fn(r);
		return;
	}
	agent_bad(r, "unknown verb \"%.40s\"", r->verb);
}

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
	if (op->err) {
		agent_reply(a, op->id, "done err %s", nicsim_wsa_name(op->err));
	} else if (op->kind == OP_CONNECT) {
		agent_reply(a, op->id, "done ok");
	} else if (!add_sock(a, op->name, op->accepted)) {
		WSPCloseSocket(op->accepted, &err);
		agent_reply(a, op->id, "done err %s", nicsim_wsa_name(WSAENOBUFS));
	} else {
		inet_ntop(AF_INET, &op->addr.sin_addr, peer, sizeof(peer));
		agent_reply(a, op->id, "done ok sock=%s peer=%s:%u", op->name, peer,
			    ntohs(op->addr.sin_port));
	}
	agent_op_free(op);
}

static void fork_done(struct agent *a, struct agent_op *op)
{
	pthread_join(op->thread, NULL);
	if (op->status < 0)
		agent_reply(a, op->id, "done err %s", strerrorname_np(-op->status));
	else if (WIFEXITED(op->status))
		agent_reply(a, op->id, "done ok exit=%d", WEXITSTATUS(op->status));
	else
		agent_reply(a, op->id, "done ok signal=%s", sigabbrev_np(WTERMSIG(op->status)));
	agent_op_free(op);
}

void agent_op_done(struct agent *a, struct agent_op *op)
{
	switch (op->kind) {
	case OP_OVERLAPPED: overlapped_done(a, op); return;
	case OP_ACCEPT:
	case OP_CONNECT: worker_done(a, op); return;
	case OP_FORK: fork_done(a, op); return;
	}
}
