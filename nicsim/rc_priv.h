/*
 * Internals of the RC engine shared by its three files: rc.c (set-up, the
 * entry points of rc.h, what both halves touch), rc_req.c (the requester)
 * and rc_resp.c (the responder).  Nothing outside the engine includes this.
 * Every function takes the engine's struct rc, as rc.h describes it, and
 * runs on the caller's thread, as the engine does.
 */
#ifndef NICSIM_RC_PRIV_H
#define NICSIM_RC_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "rc.h"

#define RC_SQ_MASK (NIC_SQ_DEPTH - 1)
#define RC_RD_MASK (RC_MAX_READS - 1)

/* Packets of a message of len bytes (one for 0 bytes). */
uint32_t rc_npkts(const struct rc *rc, uint64_t len);

static inline bool rc_is_read(const struct rc_swqe *w)
{
	return w->wqe.opcode == NIC_WR_RDMA_READ;
}

/* End the TPT grants of mem, if it holds any, and clear it. */
void rc_release(struct rc *rc, struct rc_mem *mem);

/* A packet of this QP's connection with opcode and psn, the rest zero. */
void rc_pkt_base(struct rc *rc, struct fab_pkt *p, uint8_t opcode, uint32_t psn);

/* ---- Requester (rc_req.c) ---- */

/* Post w's completion with status, then end its grants. */
void rc_complete_swqe(struct rc *rc, struct rc_swqe *w, uint16_t status, uint32_t detail);

/* Fail the oldest work request with status, then the QP (rc_fail). */
void rc_fail_head(struct rc *rc, uint16_t status, uint32_t detail);

/* Send the requester's next packet: 1 sent, 0 nothing to send now. */
int rc_req_send_next(struct rc *rc, uint64_t now);

/* An acknowledgement or NAK, or an RDMA READ response, for the requester. */
void rc_req_recv_ack(struct rc *rc, const struct fab_pkt *pkt, uint64_t now);
void rc_req_recv_read_response(struct rc *rc, const struct fab_pkt *pkt, uint64_t now);

/* The end of an RNR wait and the retransmission timer, due at now; the QP
 * may be in error afterwards (the retry count ran out). */
void rc_req_timers(struct rc *rc, uint64_t now);

/* ---- Responder (rc_resp.c) ---- */

/* Send an Acknowledge packet with syndrome for psn: 0, -ENOBUFS, or the
 * transmit's error. */
int rc_send_aeth(struct rc *rc, uint8_t syndrome, uint32_t psn);

/* Send the next queued RDMA READ response: 1 if one was sent. */
int rc_resp_send_read_response(struct rc *rc);

/* Give the held first message to the first receive posted, if there is
 * one now (rc.h). */
void rc_resp_deliver_held(struct rc *rc);

/* A request packet (SEND, RDMA WRITE, RDMA READ request) for the responder. */
void rc_resp_recv_request(struct rc *rc, const struct fab_pkt *pkt, uint8_t flags);

#endif /* NICSIM_RC_PRIV_H */
