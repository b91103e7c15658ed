/*
 * nicsim-agent: the host agent of scenarios, a process attached to its NIC
 * through the provider that makes the SPI calls and memory events the
 * runner asks for, one request line at a time (the protocol is in
 * scn_agent_client.h).
 *
 * One thread reads requests on fd 0, carries them out in order and writes
 * every reply on fd 1.  Operations that complete later (overlapped data
 * calls, accept and connect, a forked child's end) are kept in a list of
 * pending operations, each with a descriptor that becomes readable when it
 * completes: the eventfd the provider signals (WSAOVERLAPPED.hEvent), the
 * eventfd a worker thread signals after its blocking WSPAccept,
 * WSPConnect, waitpid (of a forked child) or call of the switch's stream
 * sockets (nsw_accept, nsw_connect, nsw_send, nsw_recv) returned.  The
 * main loop polls fd 0 and those descriptors together.  Worker threads touch only their own
 * operation; replies are written by the main thread alone.
 *
 * Names (sockets, buffers, registration handles) are the runner's: each
 * table maps a name to what the agent made.  Nothing here is freed before
 * the agent ends but pending operations, so a name stays valid (its socket
 * may be closed, its buffer unmapped: the provider then answers).
 */
#ifndef NICSIM_AGENT_H
#define NICSIM_AGENT_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nicsim_provider.h"
#include "scn_agent_client.h"
#include "scn_pattern.h"
#include "ws2san.h"

#define AGENT_NAME_MAX 64  /* a name's bytes with its NUL */
#define AGENT_ARGS_MAX 16  /* words of a request after its verb */
#define AGENT_PASSED_MAX 8 /* channel descriptors received and not yet used */

/* A socket: the SPI's (s), or a stream socket of the switch (stream, fd). */
struct agent_sock {
	char name[AGENT_NAME_MAX];
	SOCKET s;
	bool stream; /* a stream socket (nicsim_switch.h): fd, and s is INVALID_SOCKET */
	int fd;      /* the stream socket's descriptor; -1 once stream-close closed it */
};

enum agent_buf_kind { BUF_MMAP, BUF_MALLOC };
enum agent_buf_state { BUF_LIVE, BUF_UNMAPPED, BUF_FREED };

struct agent_buf {
	char name[AGENT_NAME_MAX];
	enum agent_buf_kind kind;
	enum agent_buf_state state;
	uint8_t *addr;
	size_t len;     /* the buffer's bytes, as requested */
	size_t map_len; /* an mmap buffer's mapping: len rounded up to pages */
};

/* One successful `register`: the handle and what it covers. */
struct agent_reg {
	char name[AGENT_NAME_MAX];
	SOCKET s;
	uintptr_t start;
	size_t len;
	HANDLE h;
	bool released; /* deregistered through this name */
};

enum agent_op_kind { OP_OVERLAPPED, OP_ACCEPT, OP_CONNECT, OP_FORK, OP_STREAM };

/* What an OP_STREAM worker does: one blocking call of the switch. */
enum agent_stream_call { SC_ACCEPT, SC_CONNECT, SC_SEND, SC_RECV };

struct agent_op {
	struct agent_op *next;
	unsigned long long id;
	enum agent_op_kind kind;
	int fd; /* readable when done: eventfd, or the child's pidfd */
	SOCKET s;
	WSAOVERLAPPED ov; /* OP_OVERLAPPED: the provider writes it */
	/* OP_ACCEPT, OP_CONNECT: the worker thread's call and its result. */
	pthread_t thread;
	sem_t started;           /* posted by the thread just before its call */
	struct sockaddr_in addr; /* connect: where to; accept: the peer */
	SOCKET accepted;
	int err;
	bool closed;               /* a `close` of its socket came while it was pending */
	char name[AGENT_NAME_MAX]; /* accept: the new socket's name */
	pid_t pid;                 /* OP_FORK: the child, reaped by the thread */
	int status;                /* OP_FORK: its wait status, or a negative errno */
	/* OP_STREAM: the call on stream socket sfd, and how it ended (err: an
	 * errno, 0 for success; eof: a receive met the end of the stream). */
	enum agent_stream_call call;
	int sfd;
	int path; /* connect: NSW_PATH to set first, 0 for none */
	int accepted_fd;
	uint8_t *p; /* send, recv: the range, and the bytes moved so far */
	size_t len, moved;
	bool eof;
};

struct agent {
	int in_fd, out_fd;
	bool in_is_sock; /* fd 0 is a UNIX socket: it may carry channels */
	bool closing;    /* fd 0 ended, or fd 1 failed */
	char in[SCN_AGENT_LINE_MAX];
	size_t in_len;
	bool skipping; /* dropping the rest of a line that was too long */
	int passed[AGENT_PASSED_MAX];
	int n_passed;
	int startups;       /* successful startups not yet cleaned up */
	bool stream_used;   /* a stream-socket request started the switch (it has a thread) */
	bool stream_parent; /* a forked child of an agent that had: no stream calls here */
	int exit_status;    /* `exit N` asked to end with N; -1 if not */

	struct agent_sock *socks;
	size_t n_socks, cap_socks;
	struct agent_buf *bufs;
	size_t n_bufs, cap_bufs;
	struct agent_reg *regs;
	size_t n_regs, cap_regs;
	struct agent_op *ops;
};

/* One request being carried out. */
struct agent_req {
	struct agent *a;
	unsigned long long id;
	const char *verb;
	int argc;
	char **argv; /* the words after the verb */
};

/* ---- Replies (agent.c) --------------------------------------------------- */

/* Write "ID " then the formatted text and a newline on fd 1. */
void agent_reply(struct agent *a, unsigned long long id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "ID bad TEXT"; returns false, for `return bad(...)` in checks. */
bool agent_bad(const struct agent_req *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "ID err WSANAME" for an SPI call's error. */
void agent_reply_wsa(const struct agent_req *r, int wsa);
/* "ID err ENAME" for a C library call's errno. */
void agent_reply_errno(const struct agent_req *r, int err);
/* "ID ok". */
void agent_ok(const struct agent_req *r);
/*
 * ok, or err with the WSA code, after an SPI call that returns 0 or
 * SOCKET_ERROR: *err is read after the call (an argument would not be).
 */
void agent_ok_or_wsa(const struct agent_req *r, int rc, const int *err);
/* p[0..n) as 2n lower-case hex digits and a NUL into out. */
void agent_hex(char *out, const uint8_t *p, size_t n);
/*
 * Room for one more element in a table of n elements of size bytes, *cap
 * of them allocated: the table (moved, perhaps), or NULL if out of memory
 * (the old one is untouched).
 */
void *agent_grow(void *table, size_t *cap, size_t n, size_t size);
/* A line on stderr: "nicsim-agent[PID]: TEXT". */
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * A new operation of request r on socket s (or INVALID_SOCKET), with its
 * eventfd: the caller starts it and adds it; it is answered `done` later.
 * NULL after replying err.
 */
struct agent_op *agent_op_new(const struct agent_req *r, enum agent_op_kind kind, SOCKET s);
/* Make an operation's eventfd readable: the loop will find it done. */
void agent_signal(int fd);
void agent_op_add(struct agent *a, struct agent_op *op);
/* Start op's worker thread fn (which posts op->started as it is about to
 * make its call), add op and answer pending; or answer err and free op. */
void agent_op_start(const struct agent_req *r, struct agent_op *op, void *(*fn)(void *));
void agent_op_free(struct agent_op *op);
/* Whether an operation with this ID is pending. */
bool agent_op_pending(const struct agent *a, unsigned long long id);
/* Whether a pending accept will name its socket name. */
bool agent_op_names(const struct agent *a, const char *name);
/* Take the oldest channel descriptor received with a request, or -1. */
int agent_take_passed(struct agent *a);
/* In a forked child: take chan as fd 0 and 1, forget the parent's operations. */
void agent_become_child(struct agent *a, int chan);

/* ---- Arguments (agent_args.c): each false after replying `bad` ------------- */

bool arg_count(const struct agent_req *r, int min, int max);
bool arg_num(const struct agent_req *r, const char *s, const char *what, uint64_t max,
	     uint64_t *out);
bool arg_new_name(const struct agent_req *r, const char *s, const char *what);
bool arg_addr(const struct agent_req *r, const char *s, struct in_addr *out);
/* ADDR PORT at words[0..2) into *sa. */
bool arg_sockaddr(const struct agent_req *r, char **words, struct sockaddr_in *sa);
/* A BLOB (x:HEX) into out[0..SCN_AGENT_BLOB_MAX), its length in *len. */
bool arg_blob(const struct agent_req *r, const char *s, uint8_t *out, size_t *len);
struct agent_sock *arg_sock(const struct agent_req *r, const char *name);
struct agent_buf *arg_buf(const struct agent_req *r, const char *name);
/* BUF OFF LEN: a range inside the buffer as it is now. */
bool arg_range(const struct agent_req *r, char **words, struct agent_buf **buf, size_t *off,
	       size_t *len, uint64_t max_len);
/* The buffer may be read and written by the agent itself (not unmapped or freed). */
bool arg_touchable(const struct agent_req *r, const struct agent_buf *b);
/*
 * The buffer may be given to the provider: not freed (an unmapped one is
 * passed with its last address, and the provider answers).
 */
bool arg_not_freed(const struct agent_req *r, const struct agent_buf *b);
/* PATTERN at words[0..n): zero | byte B | seq N | random N, all of the words. */
bool arg_pattern(const struct agent_req *r, char **words, int n, struct scn_pattern *out);
/* The registration named name, or NULL after replying bad. */
struct agent_reg *arg_reg(const struct agent_req *r, const char *name);
/* The stream socket named name (not one of the SPI), or NULL after replying bad. */
struct agent_sock *arg_stream(const struct agent_req *r, const char *name);

/* ---- Verbs (agent_spi.c, agent_mem.c): one per request kind ---------------- */

void spi_accept(struct agent_req *r);
void spi_bind(struct agent_req *r);
void spi_cache_callback(struct agent_req *r);
void spi_cache_stats(struct agent_req *r);
void spi_cleanup(struct agent_req *r);
void spi_close(struct agent_req *r);
void spi_connect(struct agent_req *r);
void spi_deregister(struct agent_req *r);
void spi_deregister_rdma(struct agent_req *r);
void spi_listen(struct agent_req *r);
void spi_rdma(struct agent_req *r);
void spi_register(struct agent_req *r);
void spi_register_rdma(struct agent_req *r);
void spi_send_recv(struct agent_req *r);
void spi_socket(struct agent_req *r);
void spi_socket_error(struct agent_req *r);
void spi_startup(struct agent_req *r);
/* The reply to a completed overlapped operation, accept or connect. */
void spi_op_done(struct agent *a, struct agent_op *op);
/* Room for one more socket, and adding one: false if out of memory. */
bool agent_add_sock(struct agent *a, const char *name, SOCKET s, int stream_fd);

/* The switch's stream sockets (agent_stream.c). */
void stream_socket(struct agent_req *r);
void stream_bind(struct agent_req *r);
void stream_listen(struct agent_req *r);
void stream_accept(struct agent_req *r);
void stream_connect(struct agent_req *r);
void stream_send_recv(struct agent_req *r);
void stream_shutdown(struct agent_req *r);
void stream_close(struct agent_req *r);
void stream_info(struct agent_req *r);
/* The reply to a completed OP_STREAM operation. */
void stream_op_done(struct agent *a, struct agent_op *op);
/* At the end: close every stream socket still open, which ends the calls
 * blocked on them (their workers are then joined). */
void stream_close_all(struct agent *a);

void mem_buffer(struct agent_req *r);
void mem_fill(struct agent_req *r);
void mem_free(struct agent_req *r);
void mem_madvise(struct agent_req *r);
void mem_mmap(struct agent_req *r);
void mem_mremap(struct agent_req *r);
void mem_munmap(struct agent_req *r);
void mem_peek(struct agent_req *r);
void mem_realloc(struct agent_req *r);
void mem_sum(struct agent_req *r);

/* ---- Dispatch and completions (agent_verbs.c) ------------------------------ */

/* Carry out one request (its words checked for characters and count). */
void agent_dispatch(struct agent_req *r);
/* The reply to a completed operation (the main loop found its fd readable). */
void agent_op_done(struct agent *a, struct agent_op *op);

#endif /* NICSIM_AGENT_H */
