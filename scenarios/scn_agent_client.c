/*
 * The runner's side of the host agent protocol (scn_agent_client.h): start
 * agents, send requests, read replies with deadlines, fork, end.
 */
#include "scn_agent_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SEND_WAIT_MS 10000 /* longest wait for the agent to take a request's bytes */
#define ASIDE_MAX 64       /* reply lines scn_agent_wait keeps for later */

extern char **environ;

struct scn_agent {
	int fd;
	pid_t pid;
	bool spawned; /* our child (scn_agent_spawn), or a forked agent's */
	bool eof;
	long long next_id;
	char in[2 * SCN_AGENT_LINE_MAX];
	size_t in_len;
	bool skipping; /* dropping the rest of a line too long for in */
	char *aside[ASIDE_MAX];
	int n_aside;
};

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static int left_ms(uint64_t deadline)
{
	uint64_t now = now_ms();

	return now >= deadline ? 0 : (int)(deadline - now);
}

static struct scn_agent *agent_new(int fd)
{
	struct scn_agent *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->fd = fd;
	a->next_id = 1;
	return a;
}

/* Whether the NAME=VALUE entry var sets the same name as the entry set. */
static bool same_name(const char *var, const char *set)
{
	size_t n = strcspn(set, "=");

	return !strncmp(var, set, n) && var[n] == '=';
}

/* Whether the caller's entry var gives way to one the agent gets. */
static bool overridden(const char *var, const struct scn_agent_spawn *how)
{
	if (same_name(var, "NICSIM_DIR=") || same_name(var, "NICSIM_ADDR="))
		return true;
	for (size_t i = 0; how->env && how->env[i]; i++)
		if (same_name(var, how->env[i]))
			return true;
	return false;
}

/* The agent's environment: the caller's without the names set here, then those. */
static char **agent_env(const struct scn_agent_spawn *how, char *dir_var, char *addr_var)
{
	size_t n = 0, extra = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	while (how->env && how->env[extra])
		extra++;
	env = calloc(n + extra + 3, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!overridden(environ[i], how))
			env[k++] = environ[i];
	env[k++] = dir_var;
	if (addr_var)
		env[k++] = addr_var;
	for (size_t i = 0; i < extra; i++)
		env[k++] = (char *)how->env[i];
	return env;
}

int scn_agent_spawn(const struct scn_agent_spawn *how, struct scn_agent **out)
{
	char *dir_var = NULL, *addr_var = NULL, **env = NULL;
	char *const argv[] = {"nicsim-agent", NULL};
	struct scn_agent *a = NULL;
	pid_t parent = getpid();
	int sv[2] = {-1, -1}, err = -ENOMEM;

	*out = NULL;
	if (!how || !how->program || !how->run_dir)
		return -EINVAL;
	if (asprintf(&dir_var, "NICSIM_DIR=%s", how->run_dir) < 0) {
		dir_var = NULL;
		goto fail;
	}
	if (how->addr && asprintf(&addr_var, "NICSIM_ADDR=%s", how->addr) < 0) {
		addr_var = NULL;
		goto fail;
	}
	env = agent_env(how, dir_var, addr_var);
	if (!env)
		goto fail;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		err = -errno;
		goto fail;
	}
	a = agent_new(sv[0]);
	if (!a)
		goto fail;
	a->pid = fork();
	if (a->pid < 0) {
		err = -errno;
		goto fail;
	}
	if (a->pid == 0) {
		/* Only async-signal-safe calls from here to exec. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		if (dup2(sv[1], 0) < 0 || dup2(sv[1], 1) < 0 ||
		    (how->stderr_fd >= 0 && dup2(how->stderr_fd, 2) < 0))
			_exit(127);
		execve(how->program, argv, env);
		_exit(127);
	}
	close(sv[1]);
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	a->spawned = true;
	free(env);
	free(dir_var);
	free(addr_var);
	*out = a;
	return 0;
fail:
	free(a);
	if (sv[0] >= 0) {
		close(sv[0]);
		close(sv[1]);
	}
	free(env);
	free(dir_var);
	free(addr_var);
	return err;
}

/* Send all of buf, the first chunk with fd_pass attached if it is >= 0. */
static int send_all(struct scn_agent *a, const char *buf, size_t len, int fd_pass)
{
	uint64_t deadline = now_ms() + SEND_WAIT_MS;

	while (len) {
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		struct pollfd p = {.fd = a->fd, .events = POLLOUT};
		ssize_t n;

		if (fd_pass >= 0) {
			struct cmsghdr *c;

			memset(&cbuf, 0, sizeof(cbuf));
			m.msg_control = cbuf.buf;
			m.msg_controllen = sizeof(cbuf.buf);
			c = CMSG_FIRSTHDR(&m);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &fd_pass, sizeof(int));
		}
		n = sendmsg(a->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			fd_pass = -1;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return errno == ECONNRESET ? -EPIPE : -errno;
		if (!left_ms(deadline))
			return -ETIMEDOUT;
		poll(&p, 1, left_ms(deadline));
	}
	return 0;
}

/* "ID text\n" into line; its length, or -EINVAL. */
static int format_request(char *line, size_t size, long long id, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static int format_request(char *line, size_t size, long long id, const char *fmt, va_list ap)
{
	int head = snprintf(line, size, "%lld ", id), n;

	n = vsnprintf(line + head, size - (size_t)head, fmt, ap);
	if (n < 0 || (size_t)(head + n) >= size - 1 || memchr(line, '\n', (size_t)(head + n)))
		return -EINVAL;
	line[head + n] = '\n';
	return head + n + 1;
}

static long long vrequest(struct scn_agent *a, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static long long vrequest(struct scn_agent *a, const char *fmt, va_list ap)
{
	char line[SCN_AGENT_LINE_MAX + 1];
	long long id = a->next_id;
	int n = format_request(line, sizeof(line), id, fmt, ap), rc;

	if (n < 0)
		return n;
	rc = send_all(a, line, (size_t)n, -1);
	if (rc)
		return rc;
	a->next_id++;
	return id;
}

long long scn_agent_request(struct scn_agent *a, const char *fmt, ...)
{
	va_list ap;
	long long id;

	va_start(ap, fmt);
	id = vrequest(a, fmt, ap);
	va_end(ap);
	return id;
}

int scn_agent_send_raw(struct scn_agent *a, const char *line, size_t len)
{
	int rc = send_all(a, line, len, -1);

	if (!rc && (!len || line[len - 1] != '\n'))
		rc = send_all(a, "\n", 1, -1);
	return rc;
}

/*
 * The next line from the channel (not the lines put aside), waiting until
 * deadline: its length, -EAGAIN, -EPIPE, -EMSGSIZE.
 */
static int read_line(struct scn_agent *a, char *line, size_t size, uint64_t deadline)
{
	for (;;) {
		char *nl = memchr(a->in, '\n', a->in_len);
		struct pollfd p = {.fd = a->fd, .events = POLLIN};
		ssize_t n;

		if (nl) {
			size_t len = (size_t)(nl - a->in);
			bool skipped = a->skipping, fits = len < size;

			if (fits && !skipped) {
				memcpy(line, a->in, len);
				line[len] = '\0';
			}
			memmove(a->in, nl + 1, a->in_len - len - 1);
			a->in_len -= len + 1;
			a->skipping = false;
			if (skipped || !fits)
				return -EMSGSIZE;
			return (int)len;
		}
		if (a->in_len == sizeof(a->in)) {
			a->in_len = 0;
			a->skipping = true;
		}
		if (a->eof)
			return -EPIPE;
		n = read(a->fd, a->in + a->in_len, sizeof(a->in) - a->in_len);
		if (n > 0) {
			a->in_len += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			a->eof = true; /* ECONNRESET and the like: the agent is gone */
			continue;
		}
		if (!left_ms(deadline))
			return -EAGAIN;
		poll(&p, 1, left_ms(deadline));
	}
}

/* Take line i of those put aside into line[0..size): its length or -EMSGSIZE. */
static int take_aside(struct scn_agent *a, int i, char *line, size_t size)
{
	char *l = a->aside[i];
	size_t len = strlen(l);

	memmove(a->aside + i, a->aside + i + 1, (size_t)(--a->n_aside - i) * sizeof(a->aside[0]));
	if (len < size)
		memcpy(line, l, len + 1);
	free(l);
	return len < size ? (int)len : -EMSGSIZE;
}

int scn_agent_recv(struct scn_agent *a, char *line, size_t size, int timeout_ms)
{
	if (a->n_aside)
		return take_aside(a, 0, line, size);
	return read_line(a, line, size, now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0));
}

/* The ID a reply line starts with (0 for "-" or none). */
static long long line_id(const char *line)
{
	char *end;
	long long id = strtoll(line, &end, 10);

	return end != line && *end == ' ' ? id : 0;
}

int scn_agent_wait(struct scn_agent *a, long long id, char *line, size_t size, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);

	for (int i = 0; i < a->n_aside; i++)
		if (line_id(a->aside[i]) == id)
			return take_aside(a, i, line, size);
	for (;;) {
		int n = read_line(a, line, size, deadline);

		if (n < 0 || line_id(line) == id)
			return n;
		if (a->n_aside == ASIDE_MAX)
			return -ENOBUFS;
		a->aside[a->n_aside] = strdup(line);
		if (!a->aside[a->n_aside])
			return -ENOMEM;
		a->n_aside++;
	}
}

int scn_agent_call(struct scn_agent *a, char *line, size_t size, int timeout_ms, const char *fmt,
		   ...)
{
	uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	struct scn_reply r;
	va_list ap;
	long long id;
	int n;

	va_start(ap, fmt);
	id = vrequest(a, fmt, ap);
	va_end(ap);
	if (id < 0)
		return (int)id;
	do {
		n = scn_agent_wait(a, id, line, size, left_ms(deadline));
	} while (n >= 0 && !scn_reply_parse(line, &r) && r.kind == SCN_REPLY_PENDING);
	return n;
}

long long scn_agent_fork(struct scn_agent *a, struct scn_agent **child)
{
	char line[32];
	long long id = a->next_id;
	int sv[2], n, rc;

	*child = NULL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	*child = agent_new(sv[0]);
	if (!*child) {
		close(sv[0]);
		close(sv[1]);
		return -ENOMEM;
	}
	fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
	n = snprintf(line, sizeof(line), "%lld fork\n", id);
	rc = send_all(a, line, (size_t)n, sv[1]);
	close(sv[1]); /* the agent has its own copy now */
	if (rc) {
		scn_agent_close(*child, 0);
		*child = NULL;
		return rc;
	}
	a->next_id++;
	return id;
}

void scn_agent_set_pid(struct scn_agent *a, pid_t pid)
{
	a->pid = pid;
}

int scn_agent_fd(const struct scn_agent *a)
{
	return a->fd;
}

pid_t scn_agent_pid(const struct scn_agent *a)
{
	return a->pid;
}

int scn_agent_kill(struct scn_agent *a, int sig)
{
	if (a->pid <= 0)
		return -ESRCH;
	return kill(a->pid, sig) ? -errno : 0;
}

/*
 * Wait up to timeout_ms for a process to end: on its pidfd if there is one,
 * else (a system without pidfd_open, valgrind) by looking every 5 ms.  For
 * our own child, reap it and return its wait status; for another's, 0 once
 * it ended.  -ETIMEDOUT if it did not end in time, -ECHILD if it cannot be
 * reaped.
 */
static int wait_end(pid_t pid, int pidfd, bool child, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);

	for (;;) {
		struct pollfd p = {.fd = pidfd, .events = POLLIN};
		int status;

		if (child) {
			pid_t r = waitpid(pid, &status, WNOHANG);

			if (r == pid)
				return status;
			if (r < 0 && errno != EINTR)
				return -ECHILD;
		} else if (pidfd >= 0 ? poll(&p, 1, 0) == 1 : kill(pid, 0) < 0 && errno == ESRCH) {
			return 0;
		}
		if (!left_ms(deadline))
			return -ETIMEDOUT;
		if (pidfd >= 0)
			poll(&p, 1, left_ms(deadline));
		else
			nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
	}
}

void scn_agent_hangup(struct scn_agent *a)
{
	if (!a || a->fd < 0)
		return;
	close(a->fd); /* the agent reads the end of its requests: it cleans up and exits */
	a->fd = -1;
	a->eof = true;
}

int scn_agent_close(struct scn_agent *a, int timeout_ms)
{
	int pidfd = -1, rc = 0;

	if (!a)
		return 0;
	if (a->pid > 0)
		pidfd = (int)syscall(SYS_pidfd_open, a->pid, 0);
	scn_agent_hangup(a);
	if (a->pid > 0) {
		rc = wait_end(a->pid, pidfd, a->spawned, timeout_ms);
		if (rc == -ETIMEDOUT) {
			kill(a->pid, SIGKILL);
			rc = wait_end(a->pid, pidfd, a->spawned, 10000);
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	for (int i = 0; i < a->n_aside; i++)
		free(a->aside[i]);
	free(a);
	return rc;
}

/* ---- Replies ----------------------------------------------------------------- */

/* The word at *p (advanced past it and the blanks after) into w[0..size). */
static bool next_word(const char **p, char *w, size_t size)
{
	size_t n = strcspn(*p, " \t");

	if (!n || n >= size)
		return false;
	memcpy(w, *p, n);
	w[n] = '\0';
	*p += n;
	*p += strspn(*p, " \t");
	return true;
}

int scn_reply_parse(const char *line, struct scn_reply *r)
{
	const char *p = line;
	char w[40];

	memset(r, 0, sizeof(*r));
	if (!next_word(&p, w, sizeof(w)))
		return -EINVAL;
	if (strcmp(w, "-")) {
		char *end;

		r->id = strtoll(w, &end, 10);
		if (*end || r->id <= 0)
			return -EINVAL;
	}
	if (!next_word(&p, w, sizeof(w)))
		return -EINVAL;
	if (!strcmp(w, "ok")) {
		r->kind = SCN_REPLY_OK;
	} else if (!strcmp(w, "bad")) {
		r->kind = SCN_REPLY_BAD;
	} else if (!strcmp(w, "pending")) {
		r->kind = SCN_REPLY_PENDING;
	} else if (!strcmp(w, "err")) {
		r->kind = SCN_REPLY_ERR;
		if (!next_word(&p, r->code, sizeof(r->code)))
			return -EINVAL;
	} else if (!strcmp(w, "done")) {
		if (!next_word(&p, w, sizeof(w)))
			return -EINVAL;
		if (!strcmp(w, "ok")) {
			r->kind = SCN_REPLY_DONE_OK;
		} else if (!strcmp(w, "err")) {
			r->kind = SCN_REPLY_DONE_ERR;
			if (!next_word(&p, r->code, sizeof(r->code)))
				return -EINVAL;
		} else {
			return -EINVAL;
		}
	} else {
		return -EINVAL;
	}
	if (!r->id && r->kind != SCN_REPLY_BAD)
		return -EINVAL;
	r->rest = p;
	return 0;
}

bool scn_reply_get(const struct scn_reply *r, const char *key, char *val, size_t size)
{
	size_t klen = strlen(key);

	for (const char *p = r->rest; p && *p;) {
		bool match = !strncmp(p, key, klen) && p[klen] == '=';
		const char *v = strchr(p, '=');
		size_t n = 0;

		if (!v || v > p + strcspn(p, " \t")) { /* a word without '=' */
			p += strcspn(p, " \t");
			p += strspn(p, " \t");
			continue;
		}
		v++;
		if (*v == '"') { /* quoted: \" and \\ escape */
			for (v++; *v && *v != '"'; v++) {
				if (*v == '\\' && v[1])
					v++;
				if (match && n + 1 < size)
					val[n] = *v;
				n++;
			}
			p = *v ? v + 1 : v;
		} else {
			n = strcspn(v, " \t");
			if (match && n < size)
				memcpy(val, v, n);
			p = v + n;
		}
		if (match) {
			if (n >= size)
				return false;
			val[n] = '\0';
			return true;
		}
		p += strspn(p, " \t");
	}
	return false;
}
