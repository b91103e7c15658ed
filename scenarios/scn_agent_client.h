/*
 * The runner's side of the host agent: start a nicsim-agent attached to a
 * NIC, send it requests, read its replies with a deadline, fork it.  The
 * agent's program is scenarios/agent/agent.c; this header is the reference
 * of the protocol both speak.
 *
 * ---- The agent protocol ------------------------------------------------
 *
 * The runner and an agent talk over one channel: the agent reads requests
 * on its fd 0 and writes replies on its fd 1.  scn_agent_spawn makes both
 * one end of a UNIX stream socket pair (a pipe pair works too, for
 * everything but fork).  Text, one request per line, one reply per line,
 * ASCII: bytes 0x20..0x7e and tabs, '\n' ending each line; a line is at most
 * SCN_AGENT_LINE_MAX bytes with its '\n'.  Words are separated by spaces or
 * tabs.  The agent writes nothing on fd 1 but replies; its diagnostics go to
 * stderr, each line starting "nicsim-agent[PID]: ".
 *
 * Request:  ID VERB ARG...
 *   ID      a decimal number of 1 to 19 digits, chosen by the runner; the
 *           replies to the request carry it.  An ID whose operation is
 *           still pending may not be used again.
 *   ARG     one of:
 *     NAME  [A-Za-z_][A-Za-z0-9_.-]*, at most 63 characters: a socket, a
 *           buffer or a registration handle named by an earlier request.
 *           Sockets, buffers and handles share one set of names, and a
 *           name is given once (a closed socket keeps its name).
 *     N     a number, decimal or 0x hexadecimal, unsigned, no unit
 *     ADDR  an IPv4 address, dotted quad
 *     BLOB  x: followed by an even number of hex digits (either case), at
 *           most SCN_AGENT_BLOB_MAX bytes (x: alone is an empty blob)
 *     k=v   a keyword argument (write, read), after the others, any order
 *   A buffer range is three words BUF OFF LEN, and must lie inside the
 *   buffer as it is now (its length changes with mremap and realloc).
 *
 * Replies:
 *   ID ok [k=v ...]                  done, succeeded
 *   ID err CODE [k=v ...]            done, failed: CODE is the WSA code's
 *                                    name (nicsim_wsa_name) for an SPI call,
 *                                    the errno name (ENOMEM) for a C library
 *                                    call (mmap, munmap, mremap, madvise,
 *                                    realloc, fork)
 *   ID bad TEXT                      the request was refused before anything
 *                                    was done: TEXT says what was wrong
 *   ID pending [k=v ...]             an asynchronous operation started;
 *   ID done ok [k=v ...]             ... later, exactly one of these two
 *   ID done err CODE [k=v ...]
 *   - bad TEXT                       a line without a usable ID
 * Values are words without spaces, except what="..." (socket-error), a
 * quoted string with \" and \\ escapes, always the last.
 *
 * The agent carries out requests one at a time, in order, on one thread;
 * the asynchronous ones (accept, connect, write, read, send, recv, fork,
 * and stream-accept, stream-connect, stream-send, stream-recv)
 * answer `pending` at once and `done` whenever they complete, so a blocked
 * accept or a pending receive never holds later requests back.  Replies of
 * different requests may therefore interleave; match them by ID.
 *
 * Verbs (SPI calls name their function in ws2san.h):
 *   hello                              ok pid=N version=1
 *   startup                            WSPStartupEx(2.2)         ok | err
 *   cleanup                            WSPCleanup                ok | err
 *   socket NAME                        WSPSocket(AF_INET, SOCK_STREAM,
 *                                      IPPROTO_TCP), named NAME  ok | err
 *   bind SOCK ADDR PORT                WSPBind                   ok | err
 *   listen SOCK [BACKLOG]              WSPListen (backlog 8)     ok | err
 *   accept SOCK NAME                   WSPAccept on a thread; the new socket
 *                                      is named NAME   pending, done ok
 *                                      sock=NAME peer=ADDR:PORT | done err
 *   connect SOCK ADDR PORT             WSPConnect on a thread    pending,
 *                                      done ok | done err
 *   close SOCK                         WSPCloseSocket            ok | err;
 *                                      an accept or connect pending on SOCK
 *                                      then ends with done err WSAEINTR (so
 *                                      does every one at the last cleanup)
 *   buffer NAME SIZE mmap|malloc [PATTERN]
 *                                      SIZE bytes (1 .. 1 GiB) from an
 *                                      anonymous private mmap or malloc,
 *                                      filled with PATTERN (default zero):
 *                                      ok addr=0xA len=N
 *   fill BUF OFF LEN PATTERN           write the pattern into the range,
 *                                      its index 0 at OFF         ok
 *     PATTERN is `zero`, `byte B`, `seq N` or `random N` (scn_pattern.h).
 *   register SOCK BUF OFF LEN ACCESS NAME
 *                                      WSPRegisterMemory; the handle is
 *                                      named NAME        ok handle=0xH | err
 *     ACCESS is read, write, readwrite, or a number passed as the flags.
 *   deregister SOCK HANDLE             WSPDeregisterMemory of a handle's
 *                                      NAME, or of a number (forged)  ok | err
 *   register-rdma SOCK BUF OFF LEN ACCESS
 *                                      WSPRegisterRdmaMemory   ok desc=BLOB
 *                                      (the descriptor, 32 bytes) | err
 *   deregister-rdma SOCK BLOB          WSPDeregisterRdmaMemory of the bytes
 *                                      given, whatever their length  ok | err
 *   write SOCK BUF OFF LEN desc=BLOB [at=N] [handle=HANDLE]
 *   read SOCK BUF OFF LEN desc=BLOB [at=N] [handle=HANDLE]
 *                                      WSPRdmaWrite / WSPRdmaRead, overlapped,
 *                                      between the local range and offset at
 *                                      (default 0) of the descriptor, passed
 *                                      exactly as given (truncated or forged
 *                                      ones too).  The local registration is
 *                                      handle, else the newest registration
 *                                      made by `register` on SOCK covering
 *                                      the range and not deregistered, else
 *                                      none (NULL)   pending, done ok bytes=N
 *                                      | done err CODE bytes=N; or err CODE
 *                                      when the post itself fails
 *   send SOCK BUF OFF LEN              WSPSend, overlapped       as write
 *   recv SOCK BUF OFF LEN              WSPRecv, overlapped       as write
 *   cache-callback BUF [OFF LEN]       WSPMemoryRegistrationCacheCallback
 *                                      over the buffer or range  ok | err
 *   cache-stats                        nicsim_cache_stats: ok hits=N misses=N
 *                                      evictions=N invalidations=N entries=N
 *                                      unused=N bytes=N pinned=N flags=0xF
 *                                      | err ENXIO
 *   socket-error SOCK                  nicsim_socket_error: ok wsa=CODE
 *                                      nic_status=N local=ADDR peer=ADDR
 *                                      local_qp=N peer_qp=N what="..."
 *                                      | err CODE (WSAENOTCONN: nothing
 *                                      failed yet)
 *   stream-socket NAME                 nsw_socket (nicsim_switch.h): a stream
 *                                      socket of the switch, named NAME
 *                                      ok | err ENAME (an errno's name)
 *   stream-bind SOCK ADDR PORT         nsw_bind                  ok | err E
 *   stream-listen SOCK BACKLOG PATH    NSW_PATH (PATH: auto, read or write;
 *                                      accepted sockets take it), then
 *                                      nsw_listen (BACKLOG 0: 8)  ok | err E
 *   stream-accept SOCK NAME            nsw_accept on a thread; the new stream
 *                                      socket is named NAME   pending, done ok
 *                                      sock=NAME peer=ADDR:PORT | done err E
 *   stream-connect SOCK ADDR PORT PATH NSW_PATH (unless auto), then
 *                                      nsw_connect, on a thread  pending,
 *                                      done ok | done err E
 *   stream-send SOCK BUF OFF LEN       nsw_send on a thread until every byte
 *                                      is taken   pending, done ok bytes=N |
 *                                      done err E bytes=N (taken before E)
 *   stream-recv SOCK BUF OFF LEN       nsw_recv (MSG_WAITALL) on a thread
 *                                      until the range is full   pending,
 *                                      done ok bytes=N | done err EOF bytes=N
 *                                      (the end of the stream came first) |
 *                                      done err E bytes=N
 *   stream-shutdown SOCK read|write|both   nsw_shutdown          ok | err E
 *   stream-close SOCK                  nsw_close, which ends the calls pending
 *                                      on SOCK (EBADF); the name stays, and
 *                                      later calls on it fail with EBADF
 *                                      ok | err E
 *   stream-info SOCK                   NSW_PATH and NSW_STATS: ok
 *                                      path_out=P path_in=P bytes_sent=N
 *                                      bytes_received=N msgs_sent=N
 *                                      msgs_received=N large_sends=N
 *                                      rdma_ops=N registrations=N
 *                                      credit_updates=N credit_waits=N, P
 *                                      read, write or none (no HELLO yet)
 *     Stream sockets and sockets of the SPI share the names; a verb given
 *     the other kind is refused (bad).  A forked child of an agent that
 *     made a stream socket refuses the stream verbs (bad): the switch's
 *     thread stays in the parent.
 *   munmap BUF                         munmap of a mapped mmap buffer's
 *                                      whole mapping             ok | err
 *   mmap BUF [fixed]                   a new zeroed anonymous mapping at the
 *                                      buffer's address and length:
 *                                      ok addr=0xA | err.  Without fixed,
 *                                      MAP_FIXED_NOREPLACE (err EEXIST while
 *                                      anything is mapped there, the buffer
 *                                      itself included); with fixed on a
 *                                      mapped buffer, MAP_FIXED replacing
 *                                      its mapping in place; with fixed on
 *                                      an unmapped one, MAP_FIXED_NOREPLACE
 *                                      again (the range may be another
 *                                      mapping's by now: never replaced)
 *   mremap BUF SIZE                    mremap of a mapped mmap buffer,
 *                                      MREMAP_MAYMOVE:
 *                                      ok addr=0xA moved=0|1 | err
 *   madvise BUF dontneed|free|remove [OFF LEN]
 *                                      madvise over a mapped mmap buffer's
 *                                      mapping or a range of it (the kernel
 *                                      wants OFF page aligned)   ok | err
 *   free BUF                           free of a malloc buffer   ok
 *   realloc BUF SIZE                   realloc of a malloc buffer:
 *                                      ok addr=0xA moved=0|1 | err ENOMEM
 *   fork                               fork: pending pid=N, then done ok
 *                                      exit=N or done ok signal=NAME when
 *                                      the child ends (see below)
 *   exit N                             ok, then the agent ends at once with
 *                                      status N (0..255), without cleanup:
 *                                      as a process that exits, its NICs
 *                                      release what it held
 *   peek BUF OFF LEN                   ok BLOB: the bytes, LEN at most
 *                                      SCN_AGENT_PEEK_MAX
 *   sum BUF OFF LEN                    ok crc32=0xC len=N: CRC-32 of the
 *                                      range (scn_pattern.h)
 * Memory that is gone: the agent's own accesses (fill, peek, sum) and the
 * memory events (munmap, mremap, madvise, free, realloc) are refused (bad)
 * on a buffer that is unmapped or freed, since its range may belong to
 * something else by now.  SPI calls on an unmapped buffer go ahead with its
 * last address and the provider answers (WSAEFAULT where nothing is mapped
 * there); on a freed malloc buffer they are refused (bad): the C library
 * owns that memory again and a NIC writing into it would corrupt the agent.
 * A buffer keeps the length it was made with (mremap and realloc change
 * it); a buffer's PATTERN index 0 is its first byte.
 *
 * Fork.  The child agent needs a channel of its own: the fork request must
 * arrive with one end of a new UNIX stream socket pair attached (SCM_RIGHTS
 * on the sendmsg carrying the request's line), so fd 0 of the forking agent
 * must be a UNIX socket.  Descriptors that come with requests queue up in
 * order; each fork takes the oldest (send them with fork requests only).  The child makes that socket its fd 0 and fd 1,
 * forgets the parent's pending operations, keeps its names (its sockets are
 * the provider's no more: after a fork the provider starts afresh in the
 * child, which must send `startup` before other SPI calls) and its buffers
 * (copied), and answers requests on the new channel.  The parent answers
 * the fork request on its own channel: `pending pid=N` once forked, `done`
 * when the child ends.  scn_agent_fork does all of this.
 *
 * The agent ends when fd 0 reaches end of file (or a read fails, or a
 * reply cannot be written): it closes its sockets (WSPCleanup as many times
 * as startup succeeded, which completes its overlapped operations and
 * returns its blocked accepts and connects), collects its threads and exits
 * 0, without answering what was pending.  A forked child lives on: it is a
 * host of its own and ends when its own channel does.
 *
 * ---- The client -----------------------------------------------------------
 *
 * An agent handle is used by one thread.  Replies are read into a buffer of
 * the handle: after poll() says scn_agent_fd() is readable, call
 * scn_agent_recv(a, ..., 0) until it returns -EAGAIN; lines it already holds
 * are returned without reading, so also call it before polling again.
 */
#ifndef SCN_AGENT_CLIENT_H
#define SCN_AGENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SCN_AGENT_LINE_MAX 4096 /* bytes of a request or reply line, '\n' included */
#define SCN_AGENT_BLOB_MAX 256  /* bytes of a BLOB argument */
#define SCN_AGENT_PEEK_MAX 1024 /* bytes one peek returns */

struct scn_agent;

struct scn_agent_spawn {
	const char *program;    /* path of nicsim-agent */
	const char *run_dir;    /* NICSIM_DIR of the agent: the scenario's run directory */
	const char *addr;       /* NICSIM_ADDR of the agent: its NIC's address; NULL: none */
	const char *const *env; /* more NAME=VALUE entries (NICSIM_CACHE=off ...), NULL-ended; may
				     be NULL */
	int stderr_fd;          /* the agent's stderr (a log file), or -1 to share the caller's */
};

/*
 * Start an agent: a child process running program with fd 0 and fd 1 one
 * end of a new socket pair (the other end stays here, close-on-exec), its
 * environment the caller's with NICSIM_DIR, NICSIM_ADDR and the entries of
 * env replacing any of the same names.  *out is the handle.  0 or a negative errno (nothing is left behind then).  The
 * child gets SIGKILL if the thread that spawned it ends (PR_SET_PDEATHSIG).
 */
int scn_agent_spawn(const struct scn_agent_spawn *how, struct scn_agent **out);

/*
 * Send a request: the next ID of this handle, a space, then the text
 * printf makes of fmt (no newline in it).  Returns the ID used (> 0), or a
 * negative errno: -EINVAL (a newline in the text, or a line longer than
 * SCN_AGENT_LINE_MAX), -EPIPE (the agent is gone), -ETIMEDOUT (it took no
 * bytes for 10 s).  IDs start at 1 and count up per handle.
 */
long long scn_agent_request(struct scn_agent *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * The same, with an ID of the caller's choice and the line as given (raw:
 * a test may send broken ones; the line gets a '\n' unless it ends with
 * one).  0 or a negative errno as scn_agent_request.
 */
int scn_agent_send_raw(struct scn_agent *a, const char *line, size_t len);

/*
 * The next reply line, without its '\n', NUL-terminated in line[0..size):
 * returns its length, or -EAGAIN (no whole line within timeout_ms; 0: do not
 * wait), -EPIPE (the agent closed its end and every line was returned),
 * -EMSGSIZE (a line longer than size: dropped).
 */
int scn_agent_recv(struct scn_agent *a, char *line, size_t size, int timeout_ms);

/*
 * Wait up to timeout_ms for the next reply to request id, putting lines of
 * other requests aside (up to 64; scn_agent_recv returns them later, oldest
 * first).  Its length, or a negative errno as scn_agent_recv (-EAGAIN on
 * the deadline, -ENOBUFS if too many lines were put aside).  A `pending`
 * reply is returned like any other: wait again for the `done`.
 */
int scn_agent_wait(struct scn_agent *a, long long id, char *line, size_t size, int timeout_ms);

/*
 * scn_agent_request then scn_agent_wait for the first reply that is not
 * `pending` (a `done` for an asynchronous request).  The reply's length or
 * a negative errno.
 */
int scn_agent_call(struct scn_agent *a, char *line, size_t size, int timeout_ms, const char *fmt,
		   ...) __attribute__((format(printf, 5, 6)));

/*
 * Fork the agent: send request `ID fork` with one end of a new socket pair,
 * and make *child a handle on the other end.  Returns the ID (its
 * `pending pid=N` reply gives the child's pid: pass it to
 * scn_agent_set_pid), or a negative errno (*child is NULL then).  The child
 * is the agent's child, not the caller's: wait for its end through the fork
 * request's `done`, or the end of file on its channel.
 */
long long scn_agent_fork(struct scn_agent *a, struct scn_agent **child);
void scn_agent_set_pid(struct scn_agent *a, pid_t pid);

/* The descriptor to poll for replies (POLLIN), and the agent's pid (0 for a
 * forked one until scn_agent_set_pid). */
int scn_agent_fd(const struct scn_agent *a);
pid_t scn_agent_pid(const struct scn_agent *a);

/*
 * End an agent and free the handle (NULL is accepted): close the channel
 * (the agent then cleans up and exits), wait up to timeout_ms for it to
 * end, else SIGKILL it.  Returns the wait status of a spawned agent, 0 for
 * a forked one once it ended (or at once if its pid is not known), or a
 * negative errno (-ECHILD: it could not be reaped, -ETIMEDOUT: it outlived
 * even SIGKILL for 10 s).
 */
int scn_agent_close(struct scn_agent *a, int timeout_ms);

/*
 * Close the agent's channel only (NULL is accepted): it then cleans up and
 * exits, while the caller waits for many agents at once; scn_agent_close
 * still ends it and frees the handle.  scn_agent_fd() is -1 afterwards.
 */
void scn_agent_hangup(struct scn_agent *a);

/* Send sig to the agent (the runner's `kill h1`): 0 or a negative errno. */
int scn_agent_kill(struct scn_agent *a, int sig);

/* ---- Replies --------------------------------------------------------------- */

enum scn_reply_kind {
	SCN_REPLY_OK,      /* ID ok ... */
	SCN_REPLY_ERR,     /* ID err CODE ... */
	SCN_REPLY_BAD,     /* ID bad TEXT, or - bad TEXT (id 0) */
	SCN_REPLY_PENDING, /* ID pending ... */
	SCN_REPLY_DONE_OK, /* ID done ok ... */
	SCN_REPLY_DONE_ERR /* ID done err CODE ... */
};

struct scn_reply {
	long long id; /* 0 for "- bad" */
	enum scn_reply_kind kind;
	char code[40];    /* the CODE of err and done err, else "" */
	const char *rest; /* inside the line: the k=v words, or bad's TEXT */
};

/* Split a reply line: 0, or -EINVAL if it is not one (r is then unusable). */
int scn_reply_parse(const char *line, struct scn_reply *r);

/*
 * The value of key in a reply's k=v words (what="..." unquoted), into
 * val[0..size): true if the key is there and the value fits.
 */
bool scn_reply_get(const struct scn_reply *r, const char *key, char *val, size_t size);

#endif /* SCN_AGENT_CLIENT_H */
