/*
 * stream_tcp.c: the kernel's TCP as a nicsim-stream backend, the reference
 * the switch is measured against.  Thin wrappers where the C library's
 * declarations differ from the table's (glibc's transparent sockaddr
 * unions), and the socket options that make the comparison fair: no Nagle
 * delay (the switch sends small messages at once), close-on-exec, no
 * SIGPIPE.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stream.h"

static int tcp_socket(int domain, int type, int protocol)
{
	return socket(domain, type | SOCK_CLOEXEC, protocol);
}

static int tcp_bind(int s, const struct sockaddr *addr, socklen_t len)
{
	return bind(s, addr, len);
}

static int tcp_accept(int s, struct sockaddr *addr, socklen_t *len)
{
	return accept4(s, addr, len, SOCK_CLOEXEC);
}

static int tcp_connect(int s, const struct sockaddr *addr, socklen_t len)
{
	return connect(s, addr, len);
}

static ssize_t tcp_send(int s, const void *buf, size_t len, int flags)
{
	return send(s, buf, len, flags | MSG_NOSIGNAL);
}

static int tcp_getsockname(int s, struct sockaddr *addr, socklen_t *len)
{
	return getsockname(s, addr, len);
}

static int tcp_prepare(int s, const struct stream_opts *o, enum stream_prep when, const char **what)
{
	int one = 1;

	(void)o;
	if (when == PREP_LISTEN) {
		/* A server started again at once finds its port free. */
		*what = "SO_REUSEADDR";
		return setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	}
	*what = "TCP_NODELAY";
	return setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static const char *tcp_advice(const char *call, int err)
{
	if (err == ECONNREFUSED)
		return "nothing listens there: start a server with 'nicsim-stream --server "
		       "--transport tcp'";
	if (err == ECONNRESET)
		return "the peer closed abortively or died";
	if (err == EADDRINUSE)
		return "another program listens on that port: choose another with ADDR:PORT";
	if (err == EADDRNOTAVAIL && call[0] == 'b')
		return "no interface of this machine has that address";
	return NULL;
}

const struct stream_backend stream_tcp_backend = {
    .name = "tcp",
    .socket = tcp_socket,
    .bind = tcp_bind,
    .listen = listen,
    .accept = tcp_accept,
    .connect = tcp_connect,
    .send = tcp_send,
    .recv = recv,
    .shutdown = shutdown,
    .close = close,
    .getsockopt = getsockopt,
    .setsockopt = setsockopt,
    .getsockname = tcp_getsockname,
    .prepare = tcp_prepare,
    .path = NULL,
    .stats = NULL,
    .cache = NULL,
    .advice = tcp_advice,
};
