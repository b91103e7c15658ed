/*
 * nicsim-agent's main loop: read request lines on fd 0 (with the channel
 * descriptors a fork request brings), check their shape, hand them to the
 * verbs, and answer pending operations as their descriptors become
 * readable.  agent.h draws the design; scn_agent_client.h the protocol.
 */
#include "agent.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long the agent waits, when it ends, for a worker thread whose call
 * closing its socket should have ended at once. */
#define JOIN_WAIT_S 10

void agent_log(const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	fprintf(stderr, "nicsim-agent[%d]: %s\n", (int)getpid(), text);
}

/* Write all of buf on fd 1; a failure ends the agent (nobody reads any more). */
static void put(struct agent *a, const char *buf, size_t len)
{
	while (len && !a->closing) {
		ssize_t n = write(a->out_fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			agent_log("cannot write replies (%s): ending",
				  strerror(n < 0 ? errno : EIO));
			a->closing = true;
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

/* One reply line: id, a space, the text (cut to fit one line), '\n'. */
static void reply_line(struct agent *a, unsigned long long id, const char *text)
{
	char line[SCN_AGENT_LINE_MAX];
	int n;

	if (id)
		n = snprintf(line, sizeof(line) - 1, "%llu %s", id, text);
	else
		n = snprintf(line, sizeof(line) - 1, "- %s", text);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	put(a, line, (size_t)n);
}

void agent_reply(struct agent *a, unsigned long long id, const char *fmt, ...)
{
	char text[SCN_AGENT_LINE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	reply_line(a, id, text);
}

/* "ID bad TEXT" (id 0: "- bad TEXT"), TEXT kept printable whatever it quotes. */
static void vbad(struct agent *a, unsigned long long id, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void vbad(struct agent *a, unsigned long long id, const char *fmt, va_list ap)
{
	char text[600];

	memcpy(text, "bad ", 4);
	vsnprintf(text + 4, sizeof(text) - 4, fmt, ap);
	for (char *c = text; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	reply_line(a, id, text);
}

static void bad_line(struct agent *a, unsigned long long id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void bad_line(struct agent *a, unsigned long long id, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vbad(a, id, fmt, ap);
	va_end(ap);
}

bool agent_bad(const struct agent_req *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vbad(r->a, r->id, fmt, ap);
	va_end(ap);
	return false;
}

void agent_reply_wsa(const struct agent_req *r, int wsa)
{
	agent_reply(r->a, r->id, "err %s", nicsim_wsa_name(wsa));
}

void agent_reply_errno(const struct agent_req *r, int err)
{
	const char *name = strerrorname_np(err);

	agent_reply(r->a, r->id, "err %s", name ? name : "EIO");
}

void agent_ok(const struct agent_req *r)
{
	agent_reply(r->a, r->id, "ok");
}

void agent_ok_or_wsa(const struct agent_req *r, int rc, const int *err)
{
	if (rc)
		agent_reply_wsa(r, *err);
	else
		agent_ok(r);
}

void agent_hex(char *out, const uint8_t *p, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

void *agent_grow(void *table, size_t *cap, size_t n, size_t size)
{
	void *bigger;

	if (n < *cap)
		return table;
	bigger = realloc(table, (*cap ? *cap * 2 : 16) * size);
	if (bigger)
		*cap = *cap ? *cap * 2 : 16;
	return bigger;
}

/* ---- Pending operations --------------------------------------------------- */

struct agent_op *agent_op_new(const struct agent_req *r, enum agent_op_kind kind, SOCKET s)
{
	struct agent_op *op = calloc(1, sizeof(*op));

	if (!op) {
		agent_reply_errno(r, ENOMEM);
		return NULL;
	}
	op->id = r->id;
	op->kind = kind;
	op->s = s;
	op->accepted = INVALID_SOCKET;
	sem_init(&op->started, 0, 0);
	op->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (op->fd < 0) {
		agent_reply_errno(r, errno);
		agent_op_free(op);
		return NULL;
	}
	return op;
}

void agent_signal(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) != sizeof(one))
		agent_log("cannot signal an operation's eventfd (%s)", strerror(errno));
}

void agent_op_add(struct agent *a, struct agent_op *op)
{
	op->next = a->ops;
	a->ops = op;
}

/*
 * Start op's worker thread and answer pending (or err).  Pending is
 * answered once the thread is about to make its call, so that a request
 * that follows (closing the socket) finds the call made, as nearly as one
 * thread can tell of another.
 */
void agent_op_start(const struct agent_req *r, struct agent_op *op, void *(*fn)(void *))
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

void agent_op_free(struct agent_op *op)
{
	if (!op)
		return;
	if (op->fd >= 0)
		close(op->fd);
	sem_destroy(&op->started);
	free(op);
}

bool agent_op_pending(const struct agent *a, unsigned long long id)
{
	for (const struct agent_op *op = a->ops; op; op = op->next)
		if (op->id == id)
			return true;
	return false;
}

bool agent_op_names(const struct agent *a, const char *name)
{
	for (const struct agent_op *op = a->ops; op; op = op->next)
		if ((op->kind == OP_ACCEPT || op->kind == OP_STREAM) && op->name[0] &&
		    !strcmp(op->name, name))
			return true;
	return false;
}

int agent_take_passed(struct agent *a)
{
	int fd;

	if (!a->n_passed)
		return -1;
	fd = a->passed[0];
	memmove(a->passed, a->passed + 1, (size_t)--a->n_passed * sizeof(a->passed[0]));
	return fd;
}

/*
 * In the child of a fork: the new channel becomes fd 0 and fd 1; what was
 * read from the parent's channel and not yet carried out is the parent's.
 * The parent's pending operations are not the child's (no thread of the
 * parent runs here, and the provider forgot the sockets): their records
 * and descriptors go.  Names stay, and buffers are copies.
 */
void agent_become_child(struct agent *a, int chan)
{
	struct agent_op *op = a->ops;

	if (dup2(chan, 0) < 0 || dup2(chan, 1) < 0) {
		agent_log("cannot take the new channel as fd 0 and 1 (%s)", strerror(errno));
		_exit(1);
	}
	if (chan > 1)
		close(chan);
	a->in_fd = 0;
	a->out_fd = 1;
	a->in_is_sock = true;
	a->in_len = 0;
	a->skipping = false;
	while (a->n_passed)
		close(agent_take_passed(a));
	a->startups = 0;
	a->stream_parent = a->stream_parent || a->stream_used;
	a->ops = NULL;
	while (op) {
		struct agent_op *next = op->next;

		agent_op_free(op);
		op = next;
	}
}

/* ---- Reading requests ----------------------------------------------------- */

/* The ID at the start of a line: 1 to 19 digits then a blank or the end; 0 if none. */
static unsigned long long line_id(const char *line, size_t len)
{
	unsigned long long id = 0;
	size_t i = 0;

	for (; i < len && i < 19 && line[i] >= '0' && line[i] <= '9'; i++)
		id = id * 10 + (unsigned)(line[i] - '0');
	if (!i || (i < len && line[i] != ' ' && line[i] != '\t'))
		return 0;
	return id;
}

/* Check one whole line (without its '\n'), split it into words, dispatch it. */
static void handle_line(struct agent *a, char *line, size_t len)
{
	unsigned long long id = line_id(line, len);
	char *words[AGENT_ARGS_MAX + 2];
	int n = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];

		if ((c < 0x20 && c != '\t') || c > 0x7e) {
			bad_line(a, id, "byte 0x%02x at column %zu: requests are printable ASCII",
				 c, i + 1);
			return;
		}
	}
	if (!id) {
		bad_line(a, 0, "a request starts with its ID, a number of 1 to 19 digits (not 0)");
		return;
	}
	line[len] = '\0';
	for (char *save = NULL, *w = strtok_r(line, " \t", &save); w;
	     w = strtok_r(NULL, " \t", &save)) {
		if (n == AGENT_ARGS_MAX + 2) {
			bad_line(a, id, "more than %d words after the verb", AGENT_ARGS_MAX);
			return;
		}
		words[n++] = w;
	}
	if (n < 2) {
		bad_line(a, id, "no verb after the ID");
		return;
	}
	if (agent_op_pending(a, id)) {
		bad_line(a, id, "ID %llu is still pending: every request needs a new ID", id);
		return;
	}
	agent_dispatch(&(struct agent_req){
	    .a = a, .id = id, .verb = words[1], .argc = n - 2, .argv = words + 2});
}

/* Keep channel descriptors that came with the bytes just read. */
static void keep_passed(struct agent *a, struct msghdr *m)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (a->n_passed < AGENT_PASSED_MAX)
				a->passed[a->n_passed++] = fd;
			else
				close(fd);
		}
	}
}

/* Read what fd 0 has (it is readable); false at its end or on an error. */
static bool read_input(struct agent *a)
{
	size_t room = sizeof(a->in) - a->in_len;
	ssize_t n;

	if (a->in_is_sock) {
		union {
			char buf[CMSG_SPACE(sizeof(int) * AGENT_PASSED_MAX)];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = {.iov_base = a->in + a->in_len, .iov_len = room};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = cbuf.buf,
				   .msg_controllen = sizeof(cbuf.buf)};

		n = recvmsg(a->in_fd, &m, MSG_CMSG_CLOEXEC);
		if (n >= 0)
			keep_passed(a, &m);
	} else {
		n = read(a->in_fd, a->in + a->in_len, room);
	}
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n < 0)
		agent_log("cannot read requests (%s): ending", strerror(errno));
	if (n <= 0)
		return false;
	a->in_len += (size_t)n;
	return true;
}

/* Carry out every whole line read; a line too long is answered and skipped. */
static void handle_input(struct agent *a)
{
	size_t start = 0;

	while (!a->closing) {
		char *nl = memchr(a->in + start, '\n', a->in_len - start);
		size_t len;

		if (!nl)
			break;
		len = (size_t)(nl - (a->in + start));
		if (a->skipping)
			a->skipping = false; /* the end of the long line */
		else
			handle_line(a, a->in + start, len);
		if (!a->in_len)
			return; /* a forked child dropped the parent's input */
		start += len + 1;
	}
	memmove(a->in, a->in + start, a->in_len - start);
	a->in_len -= start;
	if (a->in_len == sizeof(a->in)) {
		/* A full buffer without '\n': the line is too long. */
		if (!a->skipping)
			bad_line(a, line_id(a->in, a->in_len),
				 "a line longer than %d bytes: the rest of it is ignored",
				 SCN_AGENT_LINE_MAX - 1);
		a->skipping = true;
		a->in_len = 0;
	}
}

/* ---- The loop --------------------------------------------------------------- */

static void serve(struct agent *a)
{
	struct pollfd *fds = NULL;
	size_t cap = 0;

	while (!a->closing) {
		size_t n = 1;
		int rc;

		for (struct agent_op *op = a->ops; op; op = op->next)
			n++;
		if (n > cap) {
			struct pollfd *bigger = realloc(fds, n * 2 * sizeof(*fds));

			if (!bigger) {
				agent_log("out of memory: ending");
				break;
			}
			fds = bigger;
			cap = n * 2;
		}
		fds[0] = (struct pollfd){.fd = a->in_fd, .events = POLLIN};
		n = 1;
		for (struct agent_op *op = a->ops; op; op = op->next)
			fds[n++] = (struct pollfd){.fd = op->fd, .events = POLLIN};
		rc = poll(fds, n, -1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0) {
			agent_log("poll failed (%s): ending", strerror(errno));
			break;
		}
		/* Completions first: each found by its descriptor, which may have
		 * moved in the list since poll (a fork's child empties it). */
		for (size_t i = 1; i < n && !a->closing; i++) {
			struct agent_op **pp = &a->ops;

			if (!fds[i].revents)
				continue;
			while (*pp && (*pp)->fd != fds[i].fd)
				pp = &(*pp)->next;
			if (*pp) {
				struct agent_op *op = *pp;

				*pp = op->next;
				op->next = NULL;
				agent_op_done(a, op); /* frees it, or puts it back */
			}
		}
		if (fds[0].revents && !a->closing) {
			if (!read_input(a))
				break;
			handle_input(a);
		}
	}
	free(fds);
}

/*
 * The end: close every socket (the last WSPCleanup does), which completes
 * every overlapped operation and makes blocked accepts and connects return;
 * then collect the worker threads and free everything.
 */
static void finish(struct agent *a)
{
	int err;

	/* Stream sockets first: closing them ends the calls their workers
	 * block in, and sends on what the scenario sent (a graceful close). */
	stream_close_all(a);
	while (a->startups > 0) {
		WSPCleanup(&err);
		a->startups--;
	}
	while (a->ops) {
		struct agent_op *op = a->ops;

		a->ops = op->next;
		if (op->kind == OP_FORK) {
			/* The child is a host of its own: stop waiting for it. */
			pthread_cancel(op->thread);
			pthread_join(op->thread, NULL);
		} else if (op->kind == OP_ACCEPT || op->kind == OP_CONNECT ||
			   op->kind == OP_STREAM) {
			struct timespec until;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += JOIN_WAIT_S;
			if (pthread_timedjoin_np(op->thread, NULL, &until)) {
				agent_log("request %llu still blocks in the provider after %d s: "
					  "leaving without it",
					  op->id, JOIN_WAIT_S);
				_exit(1);
			}
		}
		agent_op_free(op);
	}
	while (a->n_passed)
		close(agent_take_passed(a));
	for (size_t i = 0; i < a->n_bufs; i++) {
		struct agent_buf *b = &a->bufs[i];

		if (b->state == BUF_LIVE && b->kind == BUF_MMAP)
			munmap(b->addr, b->map_len);
		else if (b->state == BUF_LIVE)
			free(b->addr);
	}
	free(a->socks);
	free(a->bufs);
	free(a->regs);
}

int main(int argc, char **argv)
{
	static struct agent a = {.in_fd = 0, .out_fd = 1, .exit_status = -1};
	struct stat st;

	(void)argv;
	if (argc > 1) {
		fprintf(stderr, "usage: nicsim-agent\n"
				"  Reads requests on stdin and answers on stdout, one line each:\n"
				"  the scenario runner's host agent (scn_agent_client.h).\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	a.in_is_sock = fstat(0, &st) == 0 && S_ISSOCK(st.st_mode);
	serve(&a);
	if (a.exit_status >= 0)
		_exit(a.exit_status); /* `exit N`: as a process that exits, without cleanup */
	finish(&a);
	/* A child forked from an agent whose switch had started inherited the
	 * switch's exit handler (closing its sockets) but not its thread:
	 * leave without running it. */
	if (a.stream_parent) {
		fflush(NULL);
		_exit(0);
	}
	return 0;
}
