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
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include "nicsim_refusal.h"
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

static void publish_refusal(struct nic_host_cache_stats *h, uint32_t kind, uint32_t err,
			    uint64_t limit, uint64_t in_use, uint64_t need);

/* Bytes this process has locked, as the kernel counts them against
 * RLIMIT_MEMLOCK (VmLck); fallback, when /proc cannot say: the pins. */
static uint64_t locked_bytes(const struct prov *p)
{
	char line[128];
	uint64_t kib = 0;
	bool found = false;
	FILE *f = fopen("/proc/self/status", "re");

	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "VmLck: %" SCNu64, &kib) == 1;
	if (f)
		fclose(f);
	return found ? kib * 1024 : (uint64_t)prov_pins_pages(&p->pins) << p->pins.page_shift;
}

void prov_refused_memlock(struct prov *p, struct prov_nic *nic, uint64_t va, uint64_t len)
{
	uint64_t limit = UINT64_MAX, in_use = locked_bytes(p), need = p->pins.lock_need;
	uint32_t err = (uint32_t)p->pins.lock_errno;
	struct rlimit rl;
	char why[512];

	if (!err && !need) {
		PROV_DBG("registration of %llu bytes at 0x%llx refused: the provider cannot count "
			 "more pins (no memory for its table, or a page pinned 2^32 - 1 times)",
			 (unsigned long long)len, (unsigned long long)va);
		return;
	}
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		limit = (uint64_t)rl.rlim_cur;
	publish_refusal(nic->hstats, NIC_REFUSAL_MEMLOCK, err, limit, in_use, need);
	if (prov_debug)
		prov_dbg_print("registration of %llu bytes at 0x%llx refused: cannot pin (mlock: "
			       "%s), even after evicting the cache: %s",
			       (unsigned long long)len, (unsigned long long)va, strerror((int)err),
			       nic_refusal_text(NIC_REFUSAL_MEMLOCK, err, limit, in_use, need, why,
						sizeof(why)));
}

/* Yama's ptrace_scope, or UINT64_MAX when the kernel has no Yama. */
static uint64_t ptrace_scope(void)
{
	unsigned scope;
	bool found;
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");

	if (!f)
		return UINT64_MAX;
	found = fscanf(f, "%u", &scope) == 1;
	fclose(f);
	return found ? scope : UINT64_MAX;
}

/* One refusal into h, the host-owned counters the NIC reports. */
static void publish_refusal(struct nic_host_cache_stats *h, uint32_t kind, uint32_t err,
			    uint64_t limit, uint64_t in_use, uint64_t need)
{
	struct timespec now;

	if (!h)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	/* Display only: the NIC copies the fields, each one store. */
	__atomic_store_n(&h->refusal_errno, err, __ATOMIC_RELAXED);
	__atomic_store_n(&h->refusal_limit, limit, __ATOMIC_RELAXED);
	__atomic_store_n(&h->refusal_in_use, in_use, __ATOMIC_RELAXED);
	__atomic_store_n(&h->refusal_needed, need, __ATOMIC_RELAXED);
	__atomic_store_n(&h->refusal_ns, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&h->refusals, h->refusals + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->refusal, kind, __ATOMIC_RELEASE);
}

void prov_refused_ptrace(struct prov_nic *nic, uint64_t va, uint64_t len)
{
	uint64_t scope = ptrace_scope(), flags = 0;
	char why[512], a[16];

	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 1)
		flags |= NIC_REFUSAL_F_NOT_DUMPABLE;
	/* The driver names the NIC its tracer only when the kernel said its pid. */
	if (!nic_host_info(nic->host)->nic_pid)
		flags |= NIC_REFUSAL_F_NO_TRACER;
	publish_refusal(nic->hstats, NIC_REFUSAL_PTRACE, EPERM, scope, flags, 0);
	PROV_DBG("registration of %llu bytes at 0x%llx refused by NIC %s (pid %u): it may not "
		 "read this process's memory: %s",
		 (unsigned long long)len, (unsigned long long)va, prov_addr_str(nic->addr, a),
		 (unsigned)nic_host_info(nic->host)->nic_pid,
		 nic_refusal_text(NIC_REFUSAL_PTRACE, EPERM, scope, flags, 0, why, sizeof(why)));
}
