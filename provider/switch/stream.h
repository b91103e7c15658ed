/*
 * stream.h: nicsim-stream's parts (docs/stream-sockets.md, "nicsim-stream").
 *
 *   stream.c          main: the roles, the server children of --loopback and
 *                     --tcp, the order of the tests, the exit status
 *   stream_args.c     the command line and --help
 *   stream_client.c   the client's tests over one connection, measured
 *   stream_server.c   the server that answers them
 *   stream_wire.c     what passes between the two besides the data, and
 *                     the moving of bytes (stream_wire.h)
 *   stream_watch.c    errors, and the watchdog that bounds every wait
 *   stream_report.c   results as text or JSON
 *   stream_data.c     the data of --verify (stream_data.h)
 *   stream_tcp.c      the kernel's TCP as a backend
 *   stream_nsw.c      the switch (libnicsimsw) as a backend
 *
 * Both transports run the same code through a table of the socket calls
 * (struct stream_backend), whose functions behave as the BSD calls of the
 * same names: -1 and errno on failure.
 */
#ifndef NICSIM_STREAM_H
#define NICSIM_STREAM_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "nicsim_switch.h"

#define STREAM_PROG "nicsim-stream"
#define STREAM_PORT 7472              /* the server's port unless told */
#define STREAM_MAX_SIZES 32           /* sizes in one --sweep */
#define STREAM_MAX_SIZE (1ull << 30)  /* the largest message */
#define STREAM_MAX_COUNT (1ull << 32) /* --count, --warmup: bytes stay below 2^62 */
#define STREAM_MAX_DURATION 86400     /* --duration, seconds */
#define STREAM_MAX_TIMEOUT 3600       /* --timeout, seconds */

/* Transports, as bits of stream_opts.transports, in the order they run. */
enum stream_transport { ST_SWITCH = 1, ST_TCP = 2 };

/* What --path asks of the switch. */
enum stream_path_req { SP_AUTO, SP_READ, SP_WRITE };

enum stream_role { ROLE_NONE, ROLE_SERVER, ROLE_CLIENT, ROLE_LOOPBACK };

struct stream_opts {
	enum stream_role role;
	unsigned transports;  /* ST_* bits */
	bool tcp_on_loopback; /* --tcp: TCP against a server of this command on 127.0.0.1 */
	bool once;            /* the server ends after its first client */
	bool pingpong, verify, json, quiet;
	enum stream_path_req path;
	/* --bind: the server's listening address, the client's own; the
	 * client's --client address; --loopback's two ends. */
	struct sockaddr_in bind, peer;
	bool bind_set;
	uint64_t sizes[STREAM_MAX_SIZES];
	unsigned nsizes;
	uint64_t count;    /* messages (ping-pong: round trips) per size; 0: by size */
	unsigned duration; /* seconds per size instead of a count; 0: none */
	uint64_t warmup;   /* untimed messages before each size */
	uint64_t seed;     /* --verify's (stream.c draws one unless seed_set) */
	bool seed_set;
	uint64_t rdma_threshold, max_rdma; /* 0: the switch's own */
	unsigned timeout_s;                /* nothing moving this long is an error */
};

/* When a backend's prepare() is called. */
enum stream_prep {
	PREP_LISTEN,   /* a server's socket, before bind */
	PREP_CONNECT,  /* a client's socket, before bind */
	PREP_ACCEPTED, /* a socket accept returned */
};

/* The socket calls of one transport. */
struct stream_backend {
	const char *name; /* "switch" or "tcp", as the results name it */
	int (*socket)(int domain, int type, int protocol);
	int (*bind)(int s, const struct sockaddr *addr, socklen_t len);
	int (*listen)(int s, int backlog);
	int (*accept)(int s, struct sockaddr *addr, socklen_t *len);
	int (*connect)(int s, const struct sockaddr *addr, socklen_t len);
	ssize_t (*send)(int s, const void *buf, size_t len, int flags);
	ssize_t (*recv)(int s, void *buf, size_t len, int flags);
	int (*shutdown)(int s, int how);
	int (*close)(int s);
	int (*getsockopt)(int s, int level, int name, void *val, socklen_t *len);
	int (*setsockopt)(int s, int level, int name, const void *val, socklen_t len);
	int (*getsockname)(int s, struct sockaddr *addr, socklen_t *len);
	/* Options for a socket (see enum stream_prep): 0, or -1 and errno
	 * with *what naming the option that failed. */
	int (*prepare)(int s, const struct stream_opts *o, enum stream_prep when,
		       const char **what);
	/* The switch's path of each direction of a connected socket
	 * (NSW_PATH_*, 0 while not known); NULL for a transport without. */
	int (*path)(int s, int *sending, int *receiving);
	/* The switch's counters of a connected socket; NULL if none. */
	int (*stats)(int s, struct nsw_stats *st);
	/* The provider's registration cache of this process: registrations
	 * it served without pinning or registering (hits) and those it did
	 * not (misses); NULL if none. */
	int (*cache)(uint64_t *hits, uint64_t *misses);
	/* What to do about errno err of call ("bind", "connect", "send"
	 * for any transfer), in one line, or NULL when strerror says it
	 * all. */
	const char *(*advice)(const char *call, int err);
};

extern const struct stream_backend stream_tcp_backend;
extern const struct stream_backend stream_switch_backend;

/* One size's result over one transport. */
struct stream_result {
	const char *transport;
	bool pingpong, verify;
	uint64_t size;
	uint64_t msgs;  /* timed messages (ping-pong: round trips) */
	uint64_t bytes; /* timed payload bytes, both directions */
	double seconds;
	/* Ping-pong: half round trips in microseconds. */
	double lat_p50, lat_p90, lat_p99, lat_max, lat_mean;
	/* The switch's path of each direction (NSW_PATH_*, 0 unknown), -1
	 * for a transport without. */
	int path_to_server, path_to_client;
	bool have_stats;
	struct nsw_stats stats; /* the client socket's, during the timed part */
	bool have_cache;
	uint64_t cache_hits, cache_misses; /* the client process's, during the timed part */
};

/* ---- stream_args.c ------------------------------------------------------ */

/* Parse the command line into o.  0: run; 1: --help printed (exit 0); 2:
 * a usage error printed (exit 2). */
int stream_parse_args(int argc, char **argv, struct stream_opts *o);

/* "64 KiB", "1000 B": size in the unit it is a whole number of. */
const char *stream_size_str(uint64_t size, char *buf, size_t len);

/* "198.18.0.2:7472" */
const char *stream_addr_str(const struct sockaddr_in *a, char *buf, size_t len);

/* ---- stream_watch.c ----------------------------------------------------- */

/* Everything failing prints one line on stderr through this, which also
 * keeps the last one for the JSON report. */
void stream_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *stream_last_err(void);
/* Put prefix (kept, not copied) before every later error of this process. */
void stream_err_prefix(const char *prefix);

/*
 * The watchdog: a thread that, once nothing has moved for timeout_s while
 * it is armed, says what was waiting, calls the on_timeout function (the
 * JSON report's end) and ends the process with exit status 1.  Every send
 * or receive that moves bytes counts as movement, and so does arming it.
 * start: 0 or a negative errno.
 */
int stream_watch_start(unsigned timeout_s);
/* Take SIGINT, SIGTERM and SIGHUP now, before the watchdog thread starts:
 * it acts on one that came meanwhile as soon as it runs.  0 or -errno. */
int stream_watch_take_signals(void);
/* The signal taken (SIGINT, SIGTERM, SIGHUP), or 0. */
int stream_watch_signalled(void);
/* If a signal was taken: say so, end the report (the timeout's callback)
 * and exit with 128 plus its number. */
void stream_watch_check_signal(void);
void stream_watch_stop(void);
/* In a child just forked: forget the parent's watchdog, its pipe and its
 * signal handlers. */
void stream_watch_forked(void);
void stream_watch_arm(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void stream_watch_disarm(void);
void stream_watch_on_timeout(void (*fn)(void));
/* Bytes moved: the watchdog's sign of life. */
void stream_watch_tick(void);

/* Monotonic clock, ns. */
uint64_t stream_now_ns(void);

/* ---- stream_server.c, stream_client.c ----------------------------------- */

/*
 * The server: listen on addr (port 0: any; the port is written to ready_fd
 * as 2 bytes little-endian once it listens, or, with ready_fd -1, printed),
 * then answer clients one at a time, or the first one only with o->once.
 * Returns 0, or 1 after an error (printed).
 */
int stream_serve(const struct stream_backend *be, const struct stream_opts *o,
		 const struct sockaddr_in *addr, int ready_fd);

struct stream_conn;

/* Connect to peer from local (port 0: any); NULL after saying why. */
struct stream_conn *stream_connect(const struct stream_backend *be, const struct stream_opts *o,
				   const struct sockaddr_in *local, const struct sockaddr_in *peer);

/* Run one size's test; 0 with *r filled, or 1 after saying why (the
 * connection is then of no further use). */
int stream_test(struct stream_conn *c, const struct stream_opts *o, uint64_t size,
		struct stream_result *r);

/* Close c (NULL: nothing to do).  When ok, first say goodbye and wait for
 * the server to end the connection cleanly: 1 after saying why that
 * failed, else 0. */
int stream_disconnect(struct stream_conn *c, bool ok);

/* ---- stream_report.c ---------------------------------------------------- */

void stream_report_begin(const struct stream_opts *o);
void stream_report(const struct stream_opts *o, const struct stream_result *r);
/* The end of the report: ok, or the error that ended the run. */
void stream_report_end(const struct stream_opts *o, bool ok);

/* The latency fields of r from n half round trips in nanoseconds (sorted
 * in place). */
void stream_latency(struct stream_result *r, uint64_t *half_rtt_ns, size_t n);

#endif /* NICSIM_STREAM_H */
