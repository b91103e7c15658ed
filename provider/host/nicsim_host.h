/*
 * Host driver for a nicsim NIC: attach to a NIC, post commands on the
 * context's command ring and wait for their completions.
 *
 * This is the layer the provider (ws2san.h) is built on; tests and benchmarks
 * use it directly to talk to a NIC without the provider's own checks.  It is
 * internal: libnicsimsp does not export it and it is not installed; tests
 * link the driver library (nicsim_host) themselves.
 *
 * One struct nic_host is one attachment: one context, one protection domain.
 * nic_host_cmd() may be called from several threads; it serialises posting
 * and waiting with a mutex.  Waiting spins briefly (yielding the CPU), then
 * sleeps on the interrupt eventfd; every wait is bounded.
 *
 * Queue pairs and events (ABI 2): the driver keeps the host's private copies
 * of the indices it owns (SQ and RQ producers, CQ and EQ consumers) and
 * offers posting, polling and waiting on them.  These calls take no lock:
 * the caller serialises all of them per attachment (the provider holds its
 * per-context mutex), except nic_host_pending(), nic_host_kick() and
 * nic_host_check(), which any thread may call at any time.  A waiter uses
 * nic_host_await(), the same spin-then-sleep that commands use; only one
 * thread per attachment may be inside it at a time, because host_waiting is
 * a single flag (a second sleeper could clear it under the first one).
 *
 * Errors: 0 or a negative errno.  Command failures are reported as the NIC's
 * status in the completion; nic_status_errno() (nicsim_abi_util.h) maps them.
 */
#ifndef NICSIM_HOST_H
#define NICSIM_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "nicsim_abi.h"
#include "nicsim_abi_util.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nic_host;

/* Default bound on a command's round trip before the NIC is declared gone. */
#define NIC_HOST_CMD_TIMEOUT_MS 5000

/*
 * Attach to the NIC listening on the UNIX socket at path.  The NIC must run
 * as this process's effective user or as root (SO_PEERCRED); then
 * prctl(PR_SET_PTRACER, pid) with the pid the kernel names for it (also
 * given back as nic_host_info()->nic_pid) lets the NIC reach this process's
 * memory.  Returns 0, or -ENOENT/-ECONNREFUSED (no NIC there), -EACCES (the
 * listener runs as another user: nothing was sent to it), -EPROTO (the NIC
 * answered something malformed), -EPROTONOSUPPORT (the NIC speaks another
 * ABI version), -ENOMEM, or the NIC's
 * refusal mapped with nic_status_errno() (-EACCES too: it refused this
 * process's user).
 */
int nic_host_attach(const char *path, struct nic_host **out);

/* Detach: unmaps the segment and closes the socket; the NIC then tears the
 * context down.  Accepts NULL. */
void nic_host_detach(struct nic_host *h);

/* What the NIC said in its hello reply. */
const struct nic_hello_reply *nic_host_info(const struct nic_host *h);

/*
 * Post one command and wait for its completion (cmd->tag is overwritten).
 * Returns 0 with *cpl filled (check cpl->status), -ETIMEDOUT if no
 * completion came within timeout_ms, -ENETDOWN if the NIC went away or put
 * the context in error.
 */
int nic_host_cmd(struct nic_host *h, struct nic_cmd *cmd, struct nic_cpl *cpl, int timeout_ms);

/* ---- Queue pairs and events ------------------------------------------------ */

/*
 * Start using slot's rings after its CREATE_QP completed: the NIC reset the
 * slot, so the host's indices restart at 0.  flags are the QP's, as
 * CREATE_QP gave them: with NIC_QP_F_RECV_INLINE, nic_host_poll_cq copies
 * each small SEND from beside its completion into its receive's buffers,
 * and a receive's ring entry is kept (not reused) until its completion has
 * been taken.  0, or -EINVAL for a bad slot.
 */
int nic_host_qp_open(struct nic_host *h, uint32_t slot, uint32_t flags);

/*
 * Copy one work request into the slot's send or receive queue, publish it
 * and ring the doorbell if the NIC sleeps.  0, -EINVAL (bad slot),
 * -EAGAIN (the queue holds NIC_SQ_DEPTH/NIC_RQ_DEPTH requests the NIC has
 * not taken), -ENETDOWN (the doorbell is gone or the context is in error).
 * The NIC judges the request's contents.
 */
int nic_host_post_send(struct nic_host *h, uint32_t slot, const struct nic_send_wqe *wqe);
int nic_host_post_recv(struct nic_host *h, uint32_t slot, const struct nic_recv_wqe *wqe);

/*
 * Take the next completion of slot, or the next event of the context:
 * 1 with *out filled, 0 when there is none, -EPROTO when the NIC's producer
 * index claims more entries than the ring holds, -EINVAL for a bad slot.
 * A receive completion with NIC_WC_F_INLINE has its data in the receive's
 * buffers by the time it is returned (the flag stays set).
 */
int nic_host_poll_cq(struct nic_host *h, uint32_t slot, struct nic_cqe *out);

/* Copy len bytes of a small SEND (at most NIC_RECV_INLINE_MAX) into the
 * buffers of receive r, in SGE order: what nic_host_poll_cq does for a
 * completion with NIC_WC_F_INLINE, for a caller that reads its CQ itself. */
void nic_host_scatter(const struct nic_recv_wqe *r, const uint8_t *data, uint32_t len);
int nic_host_poll_event(struct nic_host *h, struct nic_event *out);

/*
 * True when the event queue, the completion ring of commands or the CQ of a
 * slot in slot_mask (bit i: slot i) holds entries not yet taken.  A hint for
 * a waiter's ready function: lock-free, any thread.
 */
int nic_host_pending(const struct nic_host *h, uint32_t slot_mask);

/* Monotonic clock in nanoseconds, the clock of every deadline below. */
uint64_t nic_host_now_ns(void);

/*
 * Wait for the NIC: spin for up to spin_ns calling ready(arg) (yielding the
 * CPU, at once when the NIC polls on this CPU), then announce host_waiting,
 * fence, call ready(arg) again, and sleep on the interrupt eventfd and the
 * attach socket until deadline_ns.  Returns 0 once ready(arg) is true or
 * after any wake-up (an interrupt, nic_host_kick(), a signal): the caller
 * re-checks its own condition and calls again; -ETIMEDOUT at the deadline;
 * -ENETDOWN when the NIC hung up or put the context in error.  ready runs
 * without any driver lock and must be cheap.  One thread per attachment.
 */
int nic_host_await(struct nic_host *h, int (*ready)(void *arg), void *arg, uint64_t deadline_ns,
		   uint32_t spin_ns);

/* Wake the thread sleeping in nic_host_await() (a spurious interrupt). */
void nic_host_kick(struct nic_host *h);

/*
 * Without blocking: 0 while the NIC is attached and the context usable,
 * -ENETDOWN once the socket hung up or the context is in error.
 */
int nic_host_check(struct nic_host *h);

/*
 * Shut the attach socket down (the NIC tears the context down, as at
 * detach) but keep the segment mapped, so that threads still looking at the
 * rings stay safe until nic_host_detach().  Later waits fail with -ENETDOWN.
 */
void nic_host_shutdown(struct nic_host *h);

/*
 * Connection ends without waiting: the NIC also sends a one-byte notice on
 * the attach socket for every NIC_EV_DISCONNECTED and NIC_EV_QP_ERROR it
 * posts, whether or not the host waits for the interrupt.  A thread that is
 * not waiting for anything else may poll() nic_host_notify_fd() for POLLIN,
 * then call nic_host_notify_drain() and take the events.  Other waiters of
 * the context may consume a notice first (they look at the socket too):
 * the event queue, not the notice, is what counts.
 * nic_host_notify_drain() returns how many notices it read, or -ENETDOWN
 * when the NIC is gone (end of file, hang-up, error).
 */
int nic_host_notify_fd(const struct nic_host *h);
int nic_host_notify_drain(struct nic_host *h);

/*
 * Shared buffers (ABI 6): memory the NIC maps too, so that its DMA engine
 * copies to and from it without a system call.  nic_host_shm_alloc rounds
 * len up to the page size, makes a sealed memfd of that size, maps it here,
 * sends it to the NIC and has the NIC map it (SHM_MAP): 0 with *addr set,
 * or a negative errno (-ENETDOWN: the NIC is gone; the NIC's refusal mapped
 * with nic_status_errno()), with everything undone.  The buffer is not
 * registered: register it with REG_MR like any other memory.
 * nic_host_shm_free (addr and len as allocated) has the NIC drop it
 * (SHM_UNMAP, which waits for the NIC's DMA to it), then unmaps it here
 * whatever the NIC answered; deregister it first.  Anything else (an
 * address or length other than allocated, a buffer freed already) is
 * -EINVAL and unmaps nothing.  At most NIC_SHM_MAX buffers at a time
 * (-ENOMEM beyond).  Thread-safe.
 */
int nic_host_shm_alloc(struct nic_host *h, size_t len, void **addr);
int nic_host_shm_free(struct nic_host *h, void *addr, size_t len);
/*
 * The two halves of those, for a caller that keeps the memfd itself (to map
 * one buffer into several NICs): send fd (a sealed memfd of at least len
 * bytes, mapped by the caller at addr) and have the NIC map it for addr;
 * and have the NIC drop the map at addr.  0 or a negative errno, as above.
 * The caller keeps fd; the NIC gets its own reference.
 */
int nic_host_shm_map(struct nic_host *h, int fd, void *addr, size_t len);
int nic_host_shm_unmap(struct nic_host *h, void *addr);

/*
 * Raw access for tests that play a hostile host: the mapped context segment,
 * its size, and the doorbell eventfd.
 */
void *nic_host_segment(struct nic_host *h, size_t *size);
int nic_host_doorbell_fd(const struct nic_host *h);

#ifdef __cplusplus
}
#endif

#endif /* NICSIM_HOST_H */
