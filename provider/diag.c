/*
 * Errors that lead to their cause: why a socket's connection broke
 * (nicsim_socket_error, nicsim_provider.h) and the diagnostic output that
 * NICSIM_DEBUG=1 turns on.
 *
 * The record.  The first failure that breaks a connected socket's
 * connection is kept in the socket (prov_sock.broke, under nic->lock): the
 * NIC's status, both ends and a sentence naming the refusal and the command
 * that shows more.  The NIC reports a failed work request twice, as the
 * failed completion and as the QP_ERROR event, and the provider may take
 * the event first (it drains the event queue before the completion queues);
 * the completion then adds which operation failed.  A QP that went to error
 * with a remote error but never failed an operation of its own is the side
 * whose NIC refused the peer's request: its sentence says so and points at
 * this NIC.  Whoever asks runs progress first, so that a completion the NIC
 * has posted is taken before the record is read.
 *
 * The output.  NICSIM_DEBUG is read once, as the library loads, into a flag
 * nothing writes afterwards; every print is behind one test of that flag
 * (PROV_DBG), so that the output costs nothing when it is off.  Lines go to
 * stderr only, each starting "nicsimsp: ", written with one call so that
 * threads do not interleave within a line.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nicsim_rundir.h"
#include "prov.h"

bool prov_debug;

__attribute__((constructor)) static void debug_load(void)
{
	const char *v = getenv("NICSIM_DEBUG");

	prov_debug = v && !strcmp(v, "1");
}

void prov_dbg_print(const char *fmt, ...)
{
	char text[1024], line[1024];
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	n = (size_t)vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if ((int)n < 0)
		return;
	/* One line, whatever the paths and names in it hold. */
	memcpy(line, "nicsimsp: ", 10);
	nic_escape(line + 10, sizeof(line) - 11, text);
	n = strlen(line);
	line[n++] = '\n';
	fwrite(line, 1, n, stderr);
}

const char *prov_addr_str(uint32_t addr, char buf[16])
{
	struct in_addr in = {.s_addr = addr};

	if (!inet_ntop(AF_INET, &in, buf, 16))
		snprintf(buf, 16, "?");
	return buf;
}

void prov_dbg_addrs(const char *dir, char *buf, size_t size)
{
	uint32_t addrs[PROV_MAX_NICS];
	size_t n, len = 0;
	char a[16];

	buf[0] = '\0';
	prov_nic_addrs(dir, addrs, PROV_MAX_NICS, &n);
	if (n == 0) {
		snprintf(buf, size, "no NIC socket (nic-ADDR.sock)");
		return;
	}
	for (size_t i = 0; i < n && i < PROV_MAX_NICS && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "",
					prov_addr_str(addrs[i], a));
	if (n > PROV_MAX_NICS && len < size)
		snprintf(buf + len, size - len, " and %zu more", n - PROV_MAX_NICS);
}

void prov_dbg_run_dir(const char *dir, const char *refused)
{
	char origin[NIC_RUN_WHY_MAX], found[1024];

	nic_run_dir_origin(origin, sizeof(origin));
	if (!dir[0] && refused) {
		prov_dbg_print("looking for NICs: none: %s (%s)", refused, origin);
		return;
	}
	if (!dir[0]) {
		prov_dbg_print("looking for NICs: none: the run directory could not be "
			       "resolved (%s)",
			       origin);
		return;
	}
	prov_dbg_addrs(dir, found, sizeof(found));
	prov_dbg_print("looking for NICs in %s (%s): found %s", dir, origin, found);
}

static const char *op_name(unsigned kind)
{
	switch (kind) {
	case PROV_OP_SEND: return "send";
	case PROV_OP_RECV: return "receive";
	case PROV_OP_WRITE: return "RDMA WRITE";
	case PROV_OP_READ: return "RDMA READ";
	default: return "operation";
	}
}

/*
 * The sentence of a record: which refusal, and where to look next.  op is
 * the failed operation (enum prov_op_kind), 0 when none of this socket's
 * failed (the QP went to error for the peer's request, or the connection
 * ended).
 */
static void describe(struct nicsim_socket_error *e, unsigned op)
{
	char local[16], peer[16];
	const char *o = op_name(op);
	char *w = e->what;
	size_t n = sizeof(e->what);

	prov_addr_str(e->local_addr, local);
	prov_addr_str(e->peer_addr, peer);
	switch (e->nic_status) {
	case NIC_WC_REM_ACCESS_ERR:
		if (op)
			snprintf(
			    w, n,
			    "%s refused by the peer's NIC: remote access error (a key, range or "
			    "access right); run `nicsim show faults --nic %s`",
			    o, peer);
		else
			snprintf(
			    w, n,
			    "this NIC refused the peer's RDMA: remote access error (a key, range "
			    "or access right); run `nicsim show faults --nic %s`",
			    local);
		break;
	case NIC_WC_REM_INV_REQ_ERR:
		if (op)
			snprintf(
			    w, n,
			    "%s refused by the peer's NIC: remote invalid request (malformed, too "
			    "long, or RDMA READ not served); see nic-%s.log",
			    o, peer);
		else
			snprintf(
			    w, n,
			    "this NIC refused an invalid request of the peer's (malformed, too "
			    "long, or RDMA READ not served); see nic-%s.log",
			    local);
		break;
	case NIC_WC_REM_OP_ERR:
		if (op)
			snprintf(
			    w, n,
			    "%s failed at the peer's NIC: remote operational error (it could not "
			    "reach its host's memory); see nic-%s.log",
			    o, peer);
		else
			snprintf(w, n,
				 "this NIC could not reach this process's memory for the peer's "
				 "request (remote operational error); see nic-%s.log",
				 local);
		break;
	case NIC_WC_BAD_RESP_ERR:
		snprintf(w, n,
			 "%s: bad response from the peer's NIC; see nic-%s.log and nic-%s.log", o,
			 peer, local);
		break;
	case NIC_WC_RETRY_EXC_ERR:
		snprintf(w, n,
			 "%s: retry exceeded: the peer did not answer (its process, NIC or link is "
			 "gone); run `nicsim link show --nic %s`",
			 o, peer);
		break;
	case NIC_WC_RNR_RETRY_EXC_ERR:
		snprintf(
		    w, n,
		    "%s: RNR retry exceeded: the peer posted no receive in time (post receives "
		    "before the peer sends)",
		    o);
		break;
	case NIC_WC_LOC_LEN_ERR:
		snprintf(
		    w, n,
		    "%s: local length error: the message was longer than the receive's buffers", o);
		break;
	case NIC_WC_LOC_PROT_ERR:
		snprintf(w, n,
			 "%s: local protection error: this NIC refused a local buffer or key; run "
			 "`nicsim show faults --nic %s`",
			 o, local);
		break;
	case NIC_WC_LOC_QP_OP_ERR:
		snprintf(w, n, "%s: local QP operation error: this NIC found the request malformed",
			 o);
		break;
	case NIC_WC_WR_FLUSH_ERR: snprintf(w, n, "%s flushed", o); break;
	case 0:
		if (e->wsa_error == WSAENETDOWN)
			snprintf(w, n, "this NIC (%s) stopped answering; see nic-%s.log", local,
				 local);
		else if (e->wsa_error == WSAECONNABORTED)
			snprintf(
			    w, n,
			    "the peer (%s) never confirmed the connection: its process, NIC or "
			    "the link is gone; run `nicsim link show --nic %s`",
			    peer, peer);
		else
			snprintf(w, n,
				 "the peer (%s) closed the connection, or its side failed: ask "
				 "nicsim_socket_error on its socket",
				 peer);
		break;
	default:
		snprintf(w, n, "%s failed with NIC status %u, unknown to this provider", o,
			 e->nic_status);
		break;
	}
}

static void dbg_broke(const struct prov_sock *sk)
{
	const struct nicsim_socket_error *e = &sk->broke;
	char local[16], peer[16];

	prov_dbg_print("connection %s qp %u - %s port %u qp %u broke (%s): %s",
		       prov_addr_str(e->local_addr, local), e->local_qp,
		       prov_addr_str(e->peer_addr, peer), ntohs(sk->peer.sin_port), e->peer_qp,
		       nicsim_wsa_name(e->wsa_error), e->what);
}

static bool remote_status(unsigned nic_status)
{
	return nic_status == NIC_WC_REM_ACCESS_ERR || nic_status == NIC_WC_REM_INV_REQ_ERR ||
	       nic_status == NIC_WC_REM_OP_ERR;
}

void prov_sock_broke(struct prov_qp *qp, int err, unsigned nic_status, unsigned op)
{
	struct prov_sock *sk = qp->sock;
	struct nicsim_socket_error *e;

	if (!sk || sk->closing)
		return;
	e = &sk->broke;
	if (sk->broke_set) {
		/* The event came first: the completion names the operation. */
		if (op && !sk->broke_op && remote_status(nic_status) &&
		    e->nic_status == nic_status) {
			sk->broke_op = (uint8_t)op;
			describe(e, op);
		} else if (nic_status != NIC_WC_WR_FLUSH_ERR || sk->broke_shown) {
			return;
		}
		/* Shown once the operation is known, or once flushes say none will be. */
		if (prov_debug && !sk->broke_shown)
			dbg_broke(sk);
		sk->broke_shown = true;
		return;
	}
	/* Only an established connection breaks, and a flush does not break it. */
	if (qp->state != PROV_QP_CONNECTED || nic_status == NIC_WC_WR_FLUSH_ERR)
		return;
	memset(e, 0, sizeof(*e));
	e->wsa_error = prov_wsa_error(err);
	e->nic_status = nic_status;
	e->local_addr = sk->local.sin_addr.s_addr;
	e->peer_addr = sk->peer.sin_addr.s_addr;
	e->local_qp = qp->qpn;
	e->peer_qp = qp->peer_qpn;
	sk->broke_set = true;
	sk->broke_op = (uint8_t)op;
	describe(e, op);
	/* A remote error with requests outstanding: their completion may be
	 * the failure, and will say which operation it was. */
	if (!op && remote_status(nic_status) && qp->sq_post != qp->sq_done)
		return;
	if (prov_debug)
		dbg_broke(sk);
	sk->broke_shown = true;
}

int nicsim_socket_error(SOCKET s, struct nicsim_socket_error *out)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	if (!err && !out)
		err = -EFAULT;
	if (!err && !sk->nic)
		err = -ENOTCONN;
	if (!err) {
		pthread_mutex_lock(&sk->nic->lock);
		/* A completion the NIC posted may name the operation that failed. */
		prov_progress(sk->nic);
		if (sk->broke_set)
			*out = sk->broke;
		else
			err = -ENOTCONN;
		pthread_mutex_unlock(&sk->nic->lock);
	}
	prov_unlock(p);
	return prov_wsa_error(err);
}

void prov_dbg_reg(const char *call, const void *buf, uint32_t len, uint32_t flags, int err)
{
	const char *why;

	switch (-err) {
	case ENOTSOCK: why = "not a socket"; break;
	case PROV_ENOTINIT: why = "WSPStartupEx was not called"; break;
	case ENOTCONN: why = "the socket is not bound to a NIC: bind (or connect) it first"; break;
	case EINVAL:
		why = flags != MEM_READ && flags != MEM_WRITE && flags != MEM_READWRITE
			  ? "flags must be MEM_READ, MEM_WRITE or MEM_READWRITE"
		      : len == 0 ? "the length is 0"
				 : "invalid for this socket (see ws2san.h)";
		break;
	case EFAULT:
		why = "the buffer is NULL, wraps, or is not mapped memory of this process, or the "
		      "descriptor buffer is missing or short";
		break;
	case ENOBUFS: why = "no resources (the line above says which)"; break;
	case ENETDOWN: why = "the NIC stopped answering"; break;
	default: why = strerror(-err); break;
	}
	prov_dbg_print("%s(%p, %u bytes, flags %u) failed: %s: %s", call, buf, len, flags,
		       nicsim_wsa_name(prov_wsa_error(err)), why);
}
