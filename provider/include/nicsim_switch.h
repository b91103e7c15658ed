/*
 * nicsim_switch.h: stream sockets over the nicsim SAN (libnicsimsw).
 *
 * The switch turns a byte stream into the session protocol of
 * docs/session-protocol.md: small sends travel inside control messages,
 * large ones by RDMA straight from the application's buffer.  It is a
 * client of the SAN SPI (ws2san.h) only, as the Windows switch is of a SAN
 * provider, and needs a running NIC (`nicsim up`) as any SPI program does.
 *
 * The calls mirror the BSD socket calls of the same names: they return -1
 * and set errno on failure, and an accepted or new socket is a small
 * non-negative integer.  That integer is a file descriptor of the process
 * (an eventfd the library owns) so that poll(), select() and epoll take it
 * beside the application's other descriptors: it reads as ready (POLLIN)
 * whenever the socket may have something for the application: data or
 * end-of-file to read, a connection to accept, a connect finished, room to
 * send again after a send that would have blocked, or an error, and stays
 * so until a call on the socket fails with EAGAIN: after POLLIN, call until
 * EAGAIN before waiting again.  POLLIN is a hint, never a promise; POLLOUT
 * is always reported (an eventfd is always writable) and means nothing.  Close a socket with
 * nsw_close() only, never with close().
 *
 * Every call is thread-safe.  Progress (credits, RDMA, done messages, the
 * peer's close) happens in a thread of the library whether or not the
 * application is inside a call.
 *
 * A child made by fork() does not inherit the switch, as it does not
 * inherit the provider: the parent's sockets are not the child's (the
 * child's copies of their descriptors are closed, and calls on them fail
 * with EBADF), the parent's connections go on undisturbed, and the child's
 * first nsw_socket starts a switch of its own.
 *
 * Addresses are IPv4 sockaddr_in: the address of a NIC (as `nicsim up`
 * prints it) and a port.  The library starts the SPI on first use; the run
 * directory is found as for every SPI program ($NICSIM_DIR, ...).
 *
 * A waiting call is not interrupted by a signal (there is no EINTR): bound
 * it with SO_RCVTIMEO or SO_SNDTIMEO, or poll a non-blocking socket.  A
 * socket holds three descriptors of the process (the one it is, and two
 * the library waits on), which count against RLIMIT_NOFILE.  A process has
 * at most 32 connections on each NIC (ENOBUFS beyond), and a listener
 * refuses the requests beyond its backlog (at most 64) at once.
 */
#ifndef NICSIM_SWITCH_H
#define NICSIM_SWITCH_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Options at level NSW_SOL (besides SOL_SOCKET's SO_SNDBUF, SO_RCVBUF,
 * SO_ERROR and SO_TYPE; SO_RCVTIMEO and SO_SNDTIMEO, a struct timeval that
 * bounds the waits of blocking calls, which then fail with EAGAIN, or a
 * connect with EINPROGRESS while it goes on; and IPPROTO_TCP's TCP_NODELAY,
 * accepted and ignored: small sends always go at once).  Every value is an
 * int unless said otherwise.
 *
 * NSW_RDMA_THRESHOLD: the smallest send that moves by RDMA, in bytes
 *   (default: the SPI's SO_RDMA_THRESHOLD_SIZE, 64 KiB; at least 2 KiB,
 *   less is EINVAL).
 * NSW_MAX_RDMA: the largest single RDMA (default and ceiling: the SPI's
 *   SO_MAX_RDMA_SIZE; at least 4 KiB; larger transfers are split).
 * NSW_NONBLOCK: 1 makes every call on the socket fail with EAGAIN (or
 *   EINPROGRESS for connect) instead of waiting; 0 (default) makes them wait.
 * NSW_PATH: get: the path of each direction once connected (0 before the
 *   peer's negotiation message came), NSW_PATH_* of the sending direction in
 *   bits 0-3 and of the receiving one in 4-7.  Set, before connect or
 *   listen: NSW_PATH_WRITE makes this side refuse to read as a sink, so
 *   that data into it takes the write path (a listener's accepted sockets
 *   inherit it); NSW_PATH_READ or 0 (default) let the switch read wherever
 *   both NICs can.
 * NSW_STATS (get only): a struct nsw_stats.
 */
#define NSW_SOL 0x4e53 /* "NS" */
#define NSW_RDMA_THRESHOLD 1
#define NSW_MAX_RDMA 2
#define NSW_NONBLOCK 3
#define NSW_PATH 4
#define NSW_STATS 5

#define NSW_PATH_READ 1  /* the sink reads with RDMA READ */
#define NSW_PATH_WRITE 2 /* the source writes with RDMA WRITE into a buffer the sink advertised */

/* What a connected socket has done so far. */
struct nsw_stats {
	uint64_t bytes_sent, bytes_received; /* taken by nsw_send, and given by nsw_recv */
	uint64_t msgs_sent, msgs_received;   /* control messages */
	uint64_t large_sends;                /* sends that moved by RDMA */
	uint64_t rdma_ops;                   /* RDMA READs and WRITEs this side posted */
	uint64_t registrations;              /* buffers this socket registered or exposed */
	uint64_t credit_updates;             /* credit updates sent */
	uint64_t credit_waits;               /* times a send waited for credit */
};

/*
 * nsw_socket: domain AF_INET, type SOCK_STREAM (| SOCK_NONBLOCK), protocol 0
 * or IPPROTO_TCP.  bind, listen, accept and connect as for TCP, except:
 * listen needs a bind first (EDESTADDRREQ); bind does not check that the
 * port is free, listen does (EADDRINUSE); connect finishes only when the
 * server's nsw_accept takes the connection (there is no queue of finished
 * connections), so a thread must not wait in connect for a listener only it
 * would accept on; and nsw_getsockname gives the address as bound, port 0
 * staying 0 (the SPI does not say which port the NIC gave).  connect and
 * accept return once the SPI connection exists, and the first send waits
 * for the peer's negotiation message.
 *
 * nsw_send and nsw_writev return the bytes taken: all of them when the
 * socket waits, or as many as fit (at least 1, else EAGAIN) when it does
 * not; as TCP's, a send that fails part-way (the peer reset, a timeout)
 * returns the bytes taken before, and the next call the error.  Every
 * send returns with the buffer free to reuse: a small one once its bytes
 * are in control messages, a large one (NSW_RDMA_THRESHOLD or more) once
 * copied to the socket's staging buffers (SO_SNDBUF each, 1 MiB at least)
 * if it fits or SO_SNDTIMEO is set, else once the peer has the bytes.  nsw_recv and nsw_readv return what has arrived, up to
 * len (MSG_WAITALL: all len unless end-of-file or an error comes first), 0
 * at end-of-file.  flags: MSG_DONTWAIT, MSG_WAITALL (recv), MSG_NOSIGNAL
 * (accepted: no signal is ever raised); others give EOPNOTSUPP.
 *
 * errno values beyond the usual: ECONNRESET (the peer closed abortively,
 * died or reset), ECONNABORTED (this side aborted after a protocol error of
 * the peer's: stderr says which), ENETDOWN (this side's NIC is gone),
 * ENOBUFS (a send's buffer could not be registered: nothing of it was sent;
 * or no control buffers), EPIPE (send after shutdown), ENOTCONN.
 */
/*
 * nsw_close is graceful, as close() of a TCP socket: what was sent reaches
 * the peer, then end-of-file; with bytes still unread on this side it
 * resets the connection instead (ECONNRESET at the peer).  It waits for
 * the control messages it owes the peer, and for a large send another
 * thread still has in progress, for at most 5 s, then resets.  Calls of
 * other threads waiting in the socket end: a receive or an accept with
 * EBADF, a send with EPIPE, or ECONNRESET if the close had to reset the
 * connection under it; every later call on the descriptor gets EBADF.
 */
int nsw_socket(int domain, int type, int protocol);
int nsw_bind(int s, const struct sockaddr *addr, socklen_t addrlen);
int nsw_listen(int s, int backlog);
int nsw_accept(int s, struct sockaddr *addr, socklen_t *addrlen);
int nsw_connect(int s, const struct sockaddr *addr, socklen_t addrlen);
ssize_t nsw_send(int s, const void *buf, size_t len, int flags);
ssize_t nsw_recv(int s, void *buf, size_t len, int flags);
ssize_t nsw_writev(int s, const struct iovec *iov, int iovcnt);
ssize_t nsw_readv(int s, const struct iovec *iov, int iovcnt);
int nsw_shutdown(int s, int how);
int nsw_close(int s);
int nsw_getsockopt(int s, int level, int optname, void *optval, socklen_t *optlen);
int nsw_setsockopt(int s, int level, int optname, const void *optval, socklen_t optlen);
int nsw_getsockname(int s, struct sockaddr *addr, socklen_t *addrlen);
int nsw_getpeername(int s, struct sockaddr *addr, socklen_t *addrlen);

#ifdef __cplusplus
}
#endif

#endif /* NICSIM_SWITCH_H */
