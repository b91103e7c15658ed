/*
 * The verbs of nicsim-agent: the table the main loop dispatches requests
 * through (the SPI verbs are in agent_spi.c, the memory ones in
 * agent_mem.c), the process verbs (fork, exit), and the completions of
 * pending operations.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"

/* ---- Processes ----------------------------------------------------------------- */

static void v_hello(struct agent_req *r)
{
	agent_reply(r->a, r->id, "ok pid=%d version=1", (int)getpid());
}

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
	agent_signal(op->fd);
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
	op = agent_op_new(r, OP_FORK, INVALID_SOCKET);
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
	agent_ok(r);
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
    {"startup", 0, 0, spi_startup},
    {"cleanup", 0, 0, spi_cleanup},
    {"socket", 1, 1, spi_socket},
    {"bind", 3, 3, spi_bind},
    {"listen", 1, 2, spi_listen},
    {"accept", 2, 2, spi_accept},
    {"connect", 3, 3, spi_connect},
    {"close", 1, 1, spi_close},
    {"buffer", 3, 5, mem_buffer},
    {"fill", 4, 5, mem_fill},
    {"peek", 3, 3, mem_peek},
    {"sum", 3, 3, mem_sum},
    {"register", 6, 6, spi_register},
    {"deregister", 2, 2, spi_deregister},
    {"register-rdma", 5, 5, spi_register_rdma},
    {"deregister-rdma", 2, 2, spi_deregister_rdma},
    {"write", 5, 7, spi_rdma},
    {"read", 5, 7, spi_rdma},
    {"send", 4, 4, spi_send_recv},
    {"recv", 4, 4, spi_send_recv},
    {"cache-callback", 1, 3, spi_cache_callback},
    {"cache-stats", 0, 0, spi_cache_stats},
    {"socket-error", 1, 1, spi_socket_error},
    {"munmap", 1, 1, mem_munmap},
    {"mmap", 1, 2, mem_mmap},
    {"mremap", 2, 2, mem_mremap},
    {"madvise", 2, 4, mem_madvise},
    {"free", 1, 1, mem_free},
    {"realloc", 2, 2, mem_realloc},
    {"fork", 0, 0, v_fork},
    {"exit", 1, 1, v_exit},
    {"stream-socket", 1, 1, stream_socket},
    {"stream-bind", 3, 3, stream_bind},
    {"stream-listen", 3, 3, stream_listen},
    {"stream-accept", 2, 2, stream_accept},
    {"stream-connect", 4, 4, stream_connect},
    {"stream-send", 4, 4, stream_send_recv},
    {"stream-recv", 4, 4, stream_send_recv},
    {"stream-shutdown", 2, 2, stream_shutdown},
    {"stream-close", 1, 1, stream_close},
    {"stream-info", 1, 1, stream_info},
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
	case OP_OVERLAPPED:
	case OP_ACCEPT:
	case OP_CONNECT: spi_op_done(a, op); return;
	case OP_FORK: fork_done(a, op); return;
	case OP_STREAM: stream_op_done(a, op); return;
	}
}
