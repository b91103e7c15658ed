/*
 * Raw verbs for tests: queue pairs, work requests, completions and events
 * of a context, driven straight through the host interface (nicsim_abi.h)
 * without the provider, so that a test can post exactly what it wants --
 * including what the provider would refuse -- and see what the NIC does.
 * Waits are bounded; the NIC is woken as the datasheet says.
 */
#ifndef NSTVERBS_H
#define NSTVERBS_H

#include <stdbool.h>
#include <stdint.h>

#include "nicsim_host.h"

struct nst_qp {
	struct nic_host *h;
	uint32_t slot, qpn;
	struct nic_qp_hdr *hdr;
	struct nic_send_wqe *sq;
	struct nic_recv_wqe *rq;
	struct nic_cqe *cq;
	const uint8_t *cq_data; /* beside cq: NIC_QP_F_RECV_INLINE */
	uint32_t flags;         /* NIC_QP_F_* it was created with */
	uint32_t sq_prod, rq_prod, cq_cons;
	uint32_t rq_done; /* receive completions taken */
};

/* One command: returns its status (enum nic_status), *key gets cpl.key. */
int nst_cmd(struct nic_host *h, struct nic_cmd *cmd, uint32_t *key);

int nst_qp_create(struct nic_host *h, uint32_t slot, struct nst_qp *qp);
/* With CREATE_QP flags (NIC_QP_F_*): with NIC_QP_F_RECV_INLINE, taking a
 * completion copies a small SEND into its receive's buffers, as the host
 * library does, and a receive's ring entry is kept until then. */
int nst_qp_create_flags(struct nic_host *h, uint32_t slot, uint32_t flags, struct nst_qp *qp);
int nst_post_send(struct nst_qp *qp, const struct nic_send_wqe *wqe);
/* A send work request of one SGE (len bytes at buf, lkey) with work
 * request id id and opcode op, for RDMA the remote rva and rkey. */
struct nic_send_wqe nst_swqe(uint64_t id, uint8_t op, void *buf, uint32_t len, uint32_t lkey,
			     uint64_t rva, uint32_t rkey);
int nst_post_recv(struct nst_qp *qp, const struct nic_recv_wqe *wqe);
/* The next completion if there is one (true), without waiting. */
bool nst_take_cqe(struct nst_qp *qp, struct nic_cqe *cqe);
/* The next completion within timeout_ms: 0 or -ETIMEDOUT. */
int nst_poll_cq(struct nst_qp *qp, struct nic_cqe *cqe, int timeout_ms);
/*
 * For benchmarks: the next completion, 0 if it succeeded, -EIO (said on
 * stderr) if it failed, -ETIMEDOUT after timeout_ms.  nst_sleep_cq sleeps
 * on the NIC's interrupt meanwhile (for bandwidth, with requests in
 * flight); nst_spin_cq polls and yields the CPU every 64 looks (for
 * latency, where a sleep and its wake-up would be most of what is measured).
 */
int nst_sleep_cq(struct nst_qp *qp, struct nic_cqe *c, int timeout_ms);
/* A completion's status as 0, or -EIO with the failure said on stderr. */
int nst_cqe_ok(const struct nic_cqe *c);
int nst_spin_cq(struct nst_qp *qp, struct nic_cqe *c, int timeout_ms);
/* The next event of the context within timeout_ms: 0 or -ETIMEDOUT. */
int nst_next_event(struct nic_host *h, struct nic_event *ev, int timeout_ms);

/* Register [buf, buf + len) with access; returns the key or 0. */
uint32_t nst_reg(struct nic_host *h, void *buf, uint64_t len, uint32_t access);
/* A window over a region for remote access on one QP: returns its key or 0. */
uint32_t nst_window(struct nic_host *h, uint32_t mr_key, void *buf, uint64_t len, uint32_t remote,
		    uint32_t qpn);

/*
 * Passive side in one call: LISTEN on port (backlog 1), then, once
 * listening, write one byte to ready_fd (if >= 0), wait for the request and
 * ACCEPT it on qp.  0, a negative errno, or the failing command's status.
 */
int nst_accept_one(struct nst_qp *qp, uint16_t port, int ready_fd);

/* Active side: CONNECT qp to port of the NIC at addr and wait for CONNECTED. */
int nst_connect(struct nst_qp *qp, uint32_t addr, uint16_t port);

/*
 * Connect two QPs through their NICs: b listens on port, a connects, b
 * accepts.  0 when both saw CONNECTED.
 */
int nst_connect_pair(struct nst_qp *a, struct nst_qp *b, uint32_t b_addr, uint16_t port);

#endif /* NSTVERBS_H */
