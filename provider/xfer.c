/*
 * Data transfer: WSPSend, WSPRecv, WSPRdmaWrite, WSPRdmaRead and
 * WSPGetOverlappedResult.
 *
 * Every call posts exactly one work request on the socket's QP: a send, a
 * receive, an RDMA write or an RDMA read, with one scatter/gather element per
 * buffer (at most NIC_MAX_SGE).  A receive is one receive request holding the
 * caller's buffers, which the next message of the peer fills: the switch
 * posts receives and expects messages to land in them.
 *
 * Local buffers: a send or receive buffer must lie inside one registration
 * made with WSPRegisterMemory that this socket holds (R3), found by address
 * (the last one found is tried first); a receive needs one the NIC may write
 * (MEM_WRITE or MEM_READWRITE).  An RDMA buffer names its registration by
 * the WSABUFEX handle, which must be one this socket holds and must cover
 * the buffer; an RDMA read sink needs MEM_WRITE.  Each operation counts
 * itself in flight on every registration it uses until it completes, and
 * WSPDeregisterMemory refuses (WSAEINVAL) to release a socket's last
 * instance of a registration while that count is not zero (R1).
 *
 * The remote buffer of an RDMA operation is the peer's descriptor
 * (ws2san.h): checked here for its format, for coming from the peer's NIC,
 * for granting the access asked for, and for holding [offset, offset + len);
 * its key is the NIC's to check (R4-R6), and a refusal there completes the
 * operation with WSAECONNRESET and breaks the connection, as on hardware.
 *
 * Errors found here come back from the call; errors the NIC finds complete
 * the operation (errmap.c has the table).  A call that fails changes nothing.
 *
 * Overlapped bookkeeping: the call returns SOCKET_ERROR with WSA_IO_PENDING
 * once the request is posted, with Internal WSA_STATUS_PENDING; the progress
 * engine later writes InternalHigh (bytes), Offset (flags, 0), OffsetHigh
 * (the WSA error or 0) and then Internal (0), and signals hEvent.  Without an
 * overlapped structure the call waits for its own completion.
 */
#include <string.h>

#include "prov.h"

#define WR_ID_RECV (1ull << 63)

/* One operation being assembled. */
struct xfer {
	uint8_t kind; /* enum prov_op_kind */
	uint8_t nsge;
	struct nic_sge sge[NIC_MAX_SGE];
	struct prov_inst *ref[NIC_MAX_SGE];
	uint64_t total;
	uint64_t remote_va;
	uint32_t rkey;
};

static bool covers(const struct prov_mr *mr, uint64_t va, uint64_t len)
{
	return va >= mr->va && len <= mr->len && va - mr->va <= mr->len - len;
}

/* The registration of sk covering [va, va + len), writable by the NIC if write. */
static struct prov_inst *find_covering(struct prov_sock *sk, uint64_t va, uint64_t len, bool write)
{
	struct prov_inst *i = sk->last_inst;

	/* An entry invalidated with its memory (cache.c) covers nothing. */
	if (i && i->mr->tracked && covers(i->mr, va, len) && (!write || (i->mr->flags & MEM_WRITE)))
		return i;
	for (i = sk->insts; i; i = i->sk_next) {
		if (i->mr->tracked && covers(i->mr, va, len) &&
		    (!write || (i->mr->flags & MEM_WRITE))) {
			sk->last_inst = i;
			return i;
		}
	}
	return NULL;
}

/* Add one local buffer (its registration known) to x. */
static void add_sge(struct xfer *x, uint64_t va, uint32_t len, struct prov_inst *inst)
{
	x->sge[x->nsge].va = va;
	x->sge[x->nsge].len = len;
	x->sge[x->nsge].lkey = inst->mr->key;
	x->ref[x->nsge] = inst;
	x->nsge++;
	x->total += len;
}

/* Send and receive buffers: each inside a registration of sk (prov.lock held). */
static int build_bufs(struct prov_sock *sk, const WSABUF *bufs, DWORD count, struct xfer *x)
{
	if (!bufs)
		return -EFAULT;
	if (!count || count > NIC_MAX_SGE)
		return -EINVAL;
	for (DWORD i = 0; i < count; i++) {
		WSABUF b = bufs[i];
		struct prov_inst *inst;

		if (!b.len)
			continue; /* nothing to move: no element needed */
		inst = find_covering(sk, (uintptr_t)b.buf, b.len, x->kind == PROV_OP_RECV);
		if (!b.buf || !inst)
			return -EFAULT;
		add_sge(x, (uintptr_t)b.buf, b.len, inst);
	}
	return 0;
}

/* RDMA local buffers: by their WSPRegisterMemory handles (prov.lock held). */
static int build_bufs_ex(struct prov *p, struct prov_sock *sk, const WSABUFEX *bufs, DWORD count,
			 struct xfer *x)
{
	if (!bufs)
		return -EFAULT;
	if (!count || count > NIC_MAX_SGE)
		return -EINVAL;
	for (DWORD i = 0; i < count; i++) {
		WSABUFEX b = bufs[i];
		struct prov_mr *mr = prov_slot_lookup(&p->mrs, (uint64_t)(uintptr_t)b.handle);
		struct prov_inst *inst;

		/* R3: a handle of this process, held by this socket. */
		if (!mr || mr->kind != PROV_MR_LOCAL || !(inst = prov_inst_find(mr, sk)))
			return -EINVAL;
		if (!b.len)
			continue;
		/* Its memory was given back (cache.c): not a buffer any more. */
		if (!b.buf || !mr->tracked || !covers(mr, (uintptr_t)b.buf, b.len))
			return -EFAULT;
		if (x->kind == PROV_OP_READ && !(mr->flags & MEM_WRITE))
			return -EFAULT;
		add_sge(x, (uintptr_t)b.buf, b.len, inst);
	}
	return 0;
}

/*
 * The peer's descriptor for an RDMA operation of x->total bytes at offset
 * (prov.lock held; sk->peer is stable while connected).
 */
static int build_target(const struct prov_sock *sk, const void *desc, DWORD desc_len, DWORD offset,
			struct xfer *x)
{
	struct nicsim_rdma_desc d;
	uint16_t need = x->kind == PROV_OP_WRITE ? MEM_WRITE : MEM_READ;

	if (!desc)
		return -EFAULT;
	if (desc_len != NICSIM_RDMA_DESC_SIZE)
		return -EINVAL;
	memcpy(&d, desc, sizeof(d)); /* read the caller's bytes once */
	if (d.magic != NICSIM_RDMA_DESC_MAGIC || d.version != NICSIM_RDMA_DESC_VERSION ||
	    (d.access & ~MEM_READWRITE) || !(d.access & need) || !d.rkey)
		return -EINVAL;
	/* R4: a descriptor of the peer's NIC (of this connection, the NIC checks). */
	if (d.nic_addr != sk->peer.sin_addr.s_addr)
		return -EINVAL;
	if (offset > d.len || x->total > d.len - offset || d.va + offset < d.va)
		return -EFAULT;
	x->remote_va = d.va + offset;
	x->rkey = d.rkey;
	return 0;
}

/* 0 when sk can post, else why not (nic->lock held). */
static int sock_ready(const struct prov_sock *sk)
{
	if (prov_nic_is_down(sk->nic))
		return -ENETDOWN;
	switch (sk->state) {
	case PROV_SK_CONNECTED: return 0;
	case PROV_SK_DEAD: return sk->err ? sk->err : -ECONNRESET;
	default: return -ENOTCONN;
	}
}

/*
 * Post x on sk's QP for ov (prov.lock held).  0 with the operation in
 * flight, or an error with nothing changed.
 */
static int post(struct prov_sock *sk, struct xfer *x, LPWSAOVERLAPPED ov, int event)
{
	struct prov_nic *nic = sk->nic;
	bool recv = x->kind == PROV_OP_RECV;
	struct prov_qp *qp;
	struct prov_op *op;
	uint32_t *posted, idx;
	int err;

	pthread_mutex_lock(&nic->lock);
	err = sock_ready(sk);
	if (err)
		goto out;
	qp = sk->qp;
	posted = recv ? &qp->rq_post : &qp->sq_post;
	/* One completion per request: never more outstanding than the queue holds. */
	if (recv ? qp->rq_post - qp->rq_done >= NIC_RQ_DEPTH
		 : qp->sq_post - qp->sq_done >= NIC_SQ_DEPTH) {
		prov_progress(nic);
		err = sock_ready(sk);
		if (err)
			goto out;
		if (recv ? qp->rq_post - qp->rq_done >= NIC_RQ_DEPTH
			 : qp->sq_post - qp->sq_done >= NIC_SQ_DEPTH) {
			err = -ENOBUFS;
			goto out;
		}
	}
	idx = *posted;
	if (recv) {
		struct nic_recv_wqe w = {.wr_id = WR_ID_RECV | idx, .num_sge = x->nsge};

		memcpy(w.sge, x->sge, sizeof(x->sge[0]) * x->nsge);
		err = nic_host_post_recv(nic->host, qp->slot, &w);
	} else {
		struct nic_send_wqe w = {.wr_id = idx, .num_sge = x->nsge};

		switch (x->kind) {
		case PROV_OP_SEND:
			w.opcode = NIC_WR_SEND;
			/* A send after an RDMA read (e.g. "read done") waits for the read. */
			if (qp->reads)
				w.flags = NIC_WR_F_FENCE;
			break;
		case PROV_OP_WRITE: w.opcode = NIC_WR_RDMA_WRITE; break;
		default: w.opcode = NIC_WR_RDMA_READ; break;
		}
		w.remote_va = x->remote_va;
		w.rkey = x->rkey;
		if (x->kind != PROV_OP_READ && x->total <= NIC_MAX_INLINE) {
			/* Small: the bytes travel in the request, and the NIC
			 * reads no memory for them (build_bufs checked that each
			 * buffer lies in a registration of this socket). */
			uint32_t at = 0;

			w.flags |= NIC_WR_F_INLINE;
			w.num_sge = 0;
			w.inline_len = (uint32_t)x->total;
			for (uint32_t i = 0; i < x->nsge; i++) {
				memcpy(w.inline_data + at, (const void *)(uintptr_t)x->sge[i].va,
				       x->sge[i].len);
				at += x->sge[i].len;
			}
		} else {
			memcpy(w.sge, x->sge, sizeof(x->sge[0]) * x->nsge);
		}
		err = nic_host_post_send(nic->host, qp->slot, &w);
	}
	if (err) {
		/* -EAGAIN cannot happen (outstanding is bounded above): a broken NIC. */
		prov_nic_fail(nic, -ENETDOWN);
		err = -ENETDOWN;
		goto out;
	}
	/* Nobody can complete the request before this lock is released. */
	op = recv ? &qp->rq[idx & (NIC_RQ_DEPTH - 1)] : &qp->sq[idx & (NIC_SQ_DEPTH - 1)];
	op->ov = ov;
	op->event = event;
	op->bytes = (uint32_t)x->total;
	op->kind = x->kind;
	op->nref = x->nsge;
	for (uint32_t i = 0; i < x->nsge; i++) {
		op->ref[i] = x->ref[i];
		__atomic_fetch_add(&x->ref[i]->inflight, 1, __ATOMIC_RELAXED);
	}
	if (x->kind == PROV_OP_READ)
		qp->reads++;
	(*posted)++;
	ov->InternalHigh = 0;
	ov->Offset = 0;
	ov->OffsetHigh = 0;
	__atomic_store_n(&ov->Internal, (ULONG_PTR)WSA_STATUS_PENDING, __ATOMIC_RELAXED);
	if (event >= 0)
		prov_ev_op_add(nic);
out:
	pthread_mutex_unlock(&nic->lock);
	return err;
}

static bool ov_pending(const WSAOVERLAPPED *ov)
{
	return __atomic_load_n(&ov->Internal, __ATOMIC_ACQUIRE) == WSA_STATUS_PENDING;
}

struct ov_wait {
	const WSAOVERLAPPED *ov;
};

static int ov_done(void *arg)
{
	return !ov_pending(((struct ov_wait *)arg)->ov);
}

/* Is ov an operation in flight on sk?  (nic->lock held) */
static bool ov_known(const struct prov_sock *sk, const WSAOVERLAPPED *ov)
{
	const struct prov_qp *qp = sk->qp;

	if (!qp)
		return false;
	for (uint32_t i = qp->sq_done; i != qp->sq_post; i++)
		if (qp->sq[i & (NIC_SQ_DEPTH - 1)].ov == ov)
			return true;
	for (uint32_t i = qp->rq_done; i != qp->rq_post; i++)
		if (qp->rq[i & (NIC_RQ_DEPTH - 1)].ov == ov)
			return true;
	return false;
}

/*
 * Wait until ov completes (prov.lock held on entry and return, dropped
 * meanwhile).  The operation always completes: by the NIC, by the socket's
 * close (aborted) or by the NIC's death (WSAENETDOWN); each slice is bounded.
 */
static void wait_ov(struct prov *p, struct prov_sock *sk, const WSAOVERLAPPED *ov)
{
	struct prov_nic *nic = sk->nic;
	struct ov_wait w = {.ov = ov};

	/* sk may be closed while the lock is dropped: hold its NIC instead. */
	nic->users++;
	while (ov_pending(ov)) {
		uint64_t slice = nic_host_now_ns() + (uint64_t)PROV_WAIT_SLICE_MS * 1000000u;

		p->waiters++;
		pthread_mutex_lock(&nic->lock);
		prov_unlock(p);
		prov_nic_wait(nic, ov_done, &w, slice, true);
		pthread_mutex_unlock(&nic->lock);
		p = prov_lock();
		p->waiters--;
	}
	prov_nic_put(p, nic);
}

/*
 * Post x for ov; without an overlapped structure, post it for own and wait
 * until it completes.  0 or -errno (nothing posted).
 */
static int start(struct prov *p, struct prov_sock *sk, struct xfer *x, LPWSAOVERLAPPED ov,
		 WSAOVERLAPPED *own)
{
	int err;

	if (ov)
		return post(sk, x, ov, ov->hEvent > 0 ? (int)ov->hEvent : -1);
	err = post(sk, x, own, -1);
	if (!err)
		wait_ov(p, sk, own);
	return err;
}

/*
 * The SPI's answer for a data call: the call's own error; WSA_IO_PENDING
 * for an overlapped call that started; the result of one that waited.
 */
static int report(int err, const WSAOVERLAPPED *ov, const WSAOVERLAPPED *own, LPDWORD bytes,
		  LPINT lpErrno)
{
	if (err)
		return prov_fail(err, lpErrno);
	if (ov) {
		if (bytes)
			*bytes = 0;
		if (lpErrno)
			*lpErrno = WSA_IO_PENDING;
		return SOCKET_ERROR;
	}
	if (own->OffsetHigh) {
		if (lpErrno)
			*lpErrno = (INT)own->OffsetHigh;
		return SOCKET_ERROR;
	}
	if (bytes)
		*bytes = (DWORD)own->InternalHigh;
	return 0;
}

static int check_common(struct prov_sock *sk, LPWSAOVERLAPPED_COMPLETION_ROUTINE routine)
{
	/* Completion routines are APCs on Windows: not served (ws2san.h). */
	if (routine)
		return -EOPNOTSUPP;
	if (!sk->nic)
		return -ENOTCONN;
	return 0;
}

/*
 * The rest of WSPSend and WSPRecv once their own checks gave err: the
 * buffers, their size, the start, and the report; releases the provider.
 */
static int send_recv(struct prov *p, struct prov_sock *sk, int err, uint8_t kind, LPWSABUF bufs,
		     DWORD count, LPWSAOVERLAPPED ov, LPDWORD bytes, LPINT lpErrno)
{
	struct xfer x = {.kind = kind};
	WSAOVERLAPPED own = {.hEvent = WSA_INVALID_EVENT};

	if (!err)
		err = build_bufs(sk, bufs, count, &x);
	if (!err && x.total > prov_nic_max_xfer(sk->nic))
		err = -EMSGSIZE;
	if (!err)
		err = start(p, sk, &x, ov, &own);
	prov_unlock(p);
	return report(err, ov, &own, bytes, lpErrno);
}

int WSPAPI WSPSend(SOCKET s, LPWSABUF lpBuffers, DWORD dwBufferCount, LPDWORD lpNumberOfBytesSent,
		   DWORD dwFlags, LPWSAOVERLAPPED lpOverlapped,
		   LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine, LPWSATHREADID lpThreadId,
		   LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	(void)lpThreadId;
	if (!err)
		err = check_common(sk, lpCompletionRoutine);
	if (!err && dwFlags)
		err = -EOPNOTSUPP; /* MSG_OOB, MSG_PARTIAL, ...: not for a SAN */
	return send_recv(p, sk, err, PROV_OP_SEND, lpBuffers, dwBufferCount, lpOverlapped,
			 lpNumberOfBytesSent, lpErrno);
}

int WSPAPI WSPRecv(SOCKET s, LPWSABUF lpBuffers, DWORD dwBufferCount, LPDWORD lpNumberOfBytesRecvd,
		   LPDWORD lpFlags, LPWSAOVERLAPPED lpOverlapped,
		   LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine, LPWSATHREADID lpThreadId,
		   LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	(void)lpThreadId;
	if (!err)
		err = check_common(sk, lpCompletionRoutine);
	if (!err && !lpFlags)
		err = -EFAULT;
	else if (!err && *lpFlags)
		err = -EOPNOTSUPP; /* MSG_PEEK, MSG_OOB, ... */
	return send_recv(p, sk, err, PROV_OP_RECV, lpBuffers, dwBufferCount, lpOverlapped,
			 lpNumberOfBytesRecvd, lpErrno);
}

static int rdma(SOCKET s, uint8_t kind, LPWSABUFEX bufs, DWORD count, LPVOID desc, DWORD desc_len,
		DWORD offset, LPDWORD bytes, LPWSAOVERLAPPED ov,
		LPWSAOVERLAPPED_COMPLETION_ROUTINE routine, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct xfer x = {.kind = kind};
	WSAOVERLAPPED own = {.hEvent = WSA_INVALID_EVENT};
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	if (!err)
		err = check_common(sk, routine);
	if (!err && kind == PROV_OP_READ && !(sk->nic->caps & NIC_CAP_RDMA_READ))
		err = -EOPNOTSUPP;
	if (!err)
		err = build_bufs_ex(p, sk, bufs, count, &x);
	if (!err && x.total > prov_nic_max_xfer(sk->nic))
		err = -EMSGSIZE;
	if (!err) {
		/* The peer is known only once connected; say so before judging its descriptor. */
		pthread_mutex_lock(&sk->nic->lock);
		err = sock_ready(sk);
		pthread_mutex_unlock(&sk->nic->lock);
	}
	if (!err)
		err = build_target(sk, desc, desc_len, offset, &x);
	if (!err)
		err = start(p, sk, &x, ov, &own);
	prov_unlock(p);
	return report(err, ov, &own, bytes, lpErrno);
}

int WSPAPI WSPRdmaWrite(SOCKET s, LPWSABUFEX lpBuffers, DWORD dwBufferCount,
			LPVOID lpTargetBufferDescriptor, DWORD dwTargetDescriptorLength,
			DWORD dwTargetBufferOffset, LPDWORD lpdwNumberOfBytesWritten, DWORD dwFlags,
			LPWSAOVERLAPPED lpOverlapped,
			LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine,
			LPWSATHREADID lpThreadId, LPINT lpErrno)
{
	(void)dwFlags; /* reserved (ws2san.h) */
	(void)lpThreadId;
	return rdma(s, PROV_OP_WRITE, lpBuffers, dwBufferCount, lpTargetBufferDescriptor,
		    dwTargetDescriptorLength, dwTargetBufferOffset, lpdwNumberOfBytesWritten,
		    lpOverlapped, lpCompletionRoutine, lpErrno);
}

int WSPAPI WSPRdmaRead(SOCKET s, LPWSABUFEX lpBuffers, DWORD dwBufferCount,
		       LPVOID lpTargetBufferDescriptor, DWORD dwTargetDescriptorLength,
		       DWORD dwTargetBufferOffset, LPDWORD lpdwNumberOfBytesRead, DWORD dwFlags,
		       LPWSAOVERLAPPED lpOverlapped,
		       LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine,
		       LPWSATHREADID lpThreadId, LPINT lpErrno)
{
	(void)dwFlags;
	(void)lpThreadId;
	return rdma(s, PROV_OP_READ, lpBuffers, dwBufferCount, lpTargetBufferDescriptor,
		    dwTargetDescriptorLength, dwTargetBufferOffset, lpdwNumberOfBytesRead,
		    lpOverlapped, lpCompletionRoutine, lpErrno);
}

BOOL WSPAPI WSPGetOverlappedResult(SOCKET s, LPWSAOVERLAPPED lpOverlapped, LPDWORD lpcbTransfer,
				   BOOL fWait, LPDWORD lpdwFlags, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	DWORD code;
	int err = prov_sock_get(p, s, &sk);

	if (!err && (!lpOverlapped || !lpcbTransfer || !lpdwFlags))
		err = -EFAULT;
	if (!err && ov_pending(lpOverlapped)) {
		struct prov_nic *nic = sk->nic;
		bool known = false;

		if (nic) {
			pthread_mutex_lock(&nic->lock);
			prov_poll(nic);
			known = ov_known(sk, lpOverlapped);
			pthread_mutex_unlock(&nic->lock);
		}
		/* Pending, but not an operation of this socket: waiting would never end. */
		if (ov_pending(lpOverlapped) && !known)
			err = -EINVAL;
		else if (ov_pending(lpOverlapped) && !fWait)
			err = -PROV_EINCOMPLETE;
		else if (ov_pending(lpOverlapped))
			wait_ov(p, sk, lpOverlapped);
	}
	prov_unlock(p);
	if (err) {
		prov_fail(err, lpErrno);
		return FALSE;
	}
	*lpcbTransfer = (DWORD)lpOverlapped->InternalHigh;
	*lpdwFlags = lpOverlapped->Offset;
	code = lpOverlapped->OffsetHigh;
	if (code) {
		if (lpErrno)
			*lpErrno = (INT)code;
		return FALSE;
	}
	return TRUE;
}
