/*
 * stream_server.c: nicsim-stream's server: it listens, takes one client
 * at a time, and answers its tests (stream_wire.h): receives, checks and
 * for ping-pong sends back each message, and reports what arrived.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stream_data.h"
#include "stream_wire.h"

/* ---- The server --------------------------------------------------------- */

struct server_conn {
	const struct stream_backend *be;
	const struct stream_opts *o;
	int s;
	char peer[32];
	uint8_t *buf;
	size_t buf_len;
	/* The test under way. */
	bool in_test;
	struct ctl test;
	uint64_t seq, msgs, bytes, sum;
	bool bad;
	uint64_t bad_msg;
	struct sdata_diff diff;
	/* The connection's totals. */
	unsigned tests;
	uint64_t total_bytes;
};

/* "tcp: the 4 KiB stream test of the client ADDR: receiving a message:
 * Connection reset by peer" */
static int server_io_fail(struct server_conn *sc, int rc, const char *doing)
{
	char text[256], size[32];

	if (rc == PEER_CLOSED && !sc->in_test) {
		stream_err("%s: the client %s closed the connection without saying goodbye (it "
			   "ended or failed)",
			   sc->be->name, sc->peer);
		return 1;
	}
	if (rc == PEER_CLOSED)
		snprintf(text, sizeof(text), "the client closed the connection");
	else
		wire_why(sc->be, "recv", rc, text, sizeof(text));
	if (sc->in_test)
		stream_err("%s: the %s %s test of the client %s: %s: %s", sc->be->name,
			   stream_size_str(sc->test.size, size, sizeof(size)),
			   wire_mode_name(sc->test.mode == MODE_PINGPONG), sc->peer, doing, text);
	else
		stream_err("%s: the client %s: %s: %s", sc->be->name, sc->peer, doing, text);
	return 1;
}

static int server_reply(struct server_conn *sc, struct ctl *c)
{
	int rc = wire_send_ctl(sc->be, sc->s, c);

	return rc ? server_io_fail(sc, rc, "answering") : 0;
}

static int server_test(struct server_conn *sc, const struct ctl *c)
{
	struct ctl reply = {.kind = K_READY, .status = CS_OK};
	char size[32];

	if ((c->mode != MODE_STREAM && c->mode != MODE_PINGPONG) || (c->flags & ~F_VERIFY) ||
	    !c->size || c->size > STREAM_MAX_SIZE) {
		stream_err("%s: the client %s asked for a test this server does not run (mode "
			   "%u, flags 0x%x, size %" PRIu64 "): is it a nicsim-stream of another "
			   "version?",
			   sc->be->name, sc->peer, c->mode, c->flags, c->size);
		reply.status = CS_BAD;
		server_reply(sc, &reply);
		return 1;
	}
	if (wire_buf_reserve(&sc->buf, &sc->buf_len, c->size)) {
		stream_err("%s: no memory for the client's %s messages", sc->be->name,
			   stream_size_str(c->size, size, sizeof(size)));
		reply.status = CS_NOMEM;
		server_reply(sc, &reply);
		return 1;
	}
	sc->test = *c;
	sc->in_test = true;
	sc->seq = sc->msgs = sc->bytes = sc->sum = 0;
	sc->bad = false;
	stream_watch_arm("%s server: serving the %s %s test of %s", sc->be->name,
			 stream_size_str(c->size, size, sizeof(size)),
			 wire_mode_name(c->mode == MODE_PINGPONG), sc->peer);
	return server_reply(sc, &reply);
}

/* One message of the test: received, checked, and for ping-pong sent back. */
static int server_message(struct server_conn *sc)
{
	const struct ctl *t = &sc->test;
	bool verify = t->flags & F_VERIFY;
	uint64_t msg_sum;
	int rc;

	rc = wire_recv_all(sc->be, sc->s, sc->buf, t->size);
	if (rc)
		return server_io_fail(sc, rc, "receiving a message");
	if (verify) {
		struct sdata_diff d;

		if (sdata_check(sc->buf, t->size, t->seed, SDATA_TO_SERVER, sc->seq, &msg_sum,
				&d) &&
		    !sc->bad) {
			char size[32];

			sc->bad = true;
			sc->bad_msg = sc->seq;
			sc->diff = d;
			stream_err("%s: message %" PRIu64 " of the %s %s test from %s differs at "
				   "byte %zu: got 0x%02x, expected 0x%02x (seed %" PRIu64 ")",
				   sc->be->name, sc->seq,
				   stream_size_str(t->size, size, sizeof(size)),
				   wire_mode_name(t->mode == MODE_PINGPONG), sc->peer, d.off, d.got,
				   d.want, t->seed);
		}
		sc->sum = sdata_fold(sc->sum, msg_sum);
	}
	if (t->mode == MODE_PINGPONG) {
		if (verify)
			sdata_fill(sc->buf, t->size, t->seed, SDATA_TO_CLIENT, sc->seq);
		rc = wire_send_all(sc->be, sc->s, sc->buf, t->size);
		if (rc)
			return server_io_fail(sc, rc, "sending a message back");
	}
	sc->seq++;
	sc->msgs++;
	sc->bytes += t->size;
	sc->total_bytes += t->size;
	return 0;
}

/* One client's connection, until its BYE: 0, or 1 after saying why. */
static int serve_conn(struct server_conn *sc)
{
	for (;;) {
		struct ctl c, reply;
		int rc;

		/* Between tests only the client can go on (stream_watch.c). */
		if (!sc->in_test)
			stream_watch_disarm();
		rc = wire_recv_ctl(sc->be, sc->s, &c);
		if (rc == -EPROTO) {
			stream_err("%s: the client %s sent something that is not a nicsim-stream "
				   "request: is it nicsim-stream at all?",
				   sc->be->name, sc->peer);
			return 1;
		}
		if (rc)
			return server_io_fail(sc, rc, "waiting for a request");
		if (!sc->in_test && c.kind != K_TEST && c.kind != K_BYE) {
			stream_err("%s: the client %s sent request %u outside a test", sc->be->name,
				   sc->peer, c.kind);
			return 1;
		}
		switch (c.kind) {
		case K_TEST:
			if (sc->in_test) {
				stream_err("%s: the client %s began a test inside another",
					   sc->be->name, sc->peer);
				return 1;
			}
			rc = server_test(sc, &c);
			break;
		case K_BATCH:
			for (uint64_t i = 0; i < c.count && !rc; i++)
				rc = server_message(sc);
			break;
		case K_SYNC:
			sc->msgs = sc->bytes = 0;
			reply = (struct ctl){.kind = K_SYNCED};
			rc = server_reply(sc, &reply);
			break;
		case K_END:
			reply = (struct ctl){
			    .kind = K_RESULT,
			    .status = sc->bad ? CS_MISMATCH : CS_OK,
			    .count = sc->msgs,
			    .bytes = sc->bytes,
			    .sum = sc->sum,
			    .bad_msg = sc->bad_msg,
			    .bad_off = sc->diff.off,
			    .bad_got = sc->diff.got,
			    .bad_want = sc->diff.want,
			};
			rc = server_reply(sc, &reply);
			sc->in_test = false;
			sc->tests++;
			break;
		case K_BYE: return 0;
		default:
			stream_err("%s: the client %s sent an unknown request (%u)", sc->be->name,
				   sc->peer, c.kind);
			return 1;
		}
		if (rc)
			return rc;
	}
}

int stream_serve(const struct stream_backend *be, const struct stream_opts *o,
		 const struct sockaddr_in *addr, int ready_fd)
{
	struct sockaddr_in bound = *addr;
	socklen_t blen = sizeof(bound);
	char name[32], text[512];
	const char *what = "";
	int l, rc = 1;

	stream_addr_str(addr, name, sizeof(name));
	l = be->socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0) {
		stream_err("%s: socket: %s", be->name,
			   wire_why(be, "socket", -errno, text, sizeof(text)));
		return 1;
	}
	if (be->prepare(l, o, PREP_LISTEN, &what)) {
		stream_err("%s: setting %s: %s", be->name, what, strerror(errno));
		goto out;
	}
	if (be->bind(l, (const struct sockaddr *)addr, sizeof(*addr))) {
		stream_err("%s: cannot listen on %s: %s", be->name, name,
			   wire_why(be, "bind", -errno, text, sizeof(text)));
		goto out;
	}
	if (be->listen(l, 4)) {
		stream_err("%s: listen on %s: %s", be->name, name,
			   wire_why(be, "listen", -errno, text, sizeof(text)));
		goto out;
	}
	if (be->getsockname(l, (struct sockaddr *)&bound, &blen)) {
		stream_err("%s: getsockname: %s", be->name, strerror(errno));
		goto out;
	}
	stream_addr_str(&bound, name, sizeof(name));
	if (ready_fd >= 0) {
		uint8_t port[2] = {(uint8_t)ntohs(bound.sin_port),
				   (uint8_t)(ntohs(bound.sin_port) >> 8)};

		if (write(ready_fd, port, sizeof(port)) != (ssize_t)sizeof(port)) {
			stream_err("%s: telling the client where the server listens: %s", be->name,
				   strerror(errno));
			goto out;
		}
	} else if (!o->quiet) {
		printf("listening on %s (%s)\n", name, be->name);
	}
	for (;;) {
		struct server_conn sc = {.be = be, .o = o};
		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);

		if (o->once)
			stream_watch_arm("%s server: waiting for the client on %s", be->name, name);
		else
			stream_watch_disarm();
		sc.s = be->accept(l, (struct sockaddr *)&peer, &plen);
		if (sc.s < 0 && errno == EINTR)
			continue;
		if (sc.s < 0) {
			stream_err("%s: accept on %s: %s", be->name, name,
				   wire_why(be, "accept", -errno, text, sizeof(text)));
			rc = 1;
			break;
		}
		stream_addr_str(&peer, sc.peer, sizeof(sc.peer));
		if (!o->quiet)
			printf("client %s connected\n", sc.peer);
		stream_watch_arm("%s server: serving %s", be->name, sc.peer);
		if (be->prepare(sc.s, o, PREP_ACCEPTED, &what)) {
			stream_err("%s: setting %s: %s", be->name, what, strerror(errno));
			rc = 1;
		} else {
			rc = serve_conn(&sc);
		}
		if (!rc && !o->quiet)
			printf("client %s: %u test%s, %" PRIu64 " bytes received\n", sc.peer,
			       sc.tests, sc.tests == 1 ? "" : "s", sc.total_bytes);
		be->close(sc.s);
		wire_buf_free(&sc.buf, &sc.buf_len);
		if (o->once)
			break;
	}
out:
	be->close(l);
	return rc;
}
