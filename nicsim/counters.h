/*
 * The NIC's live counters: what it counts as it works, incremented where
 * the event happens (struct nic.stats, cmd_env.stats).  This is the NIC's
 * own state, not a message: mgmt.c copies it, field by field, into the
 * stats record of the management protocol (struct nic_stats,
 * nicsim_mgmt.h) when a client asks, adding the figures that are not
 * counted but looked up then (TPT occupancy and refusals, contexts and QPs
 * now).  A counter here may be added, renamed or dropped without changing
 * the protocol; mgmt.c's conversion then says what the record shows.
 *
 * Every counter is a uint64_t that only grows, except sleep_max_us (the
 * largest value seen).  The meaning of each is the description of the
 * field of the same name in NIC_STATS (nicsim_mgmt.h).
 *
 * Threading: the counters belong to the NIC's event-loop thread.
 */
#ifndef NICSIM_COUNTERS_H
#define NICSIM_COUNTERS_H

#include <stdint.h>

/* X(name) */
#define NIC_COUNTERS(X)           \
	X(attaches)               \
	X(detaches)               \
	X(attach_refused)         \
	X(mgmt_sessions)          \
	X(doorbells)              \
	X(interrupts)             \
	X(cmds)                   \
	X(cmds_failed)            \
	X(cmd_nop)                \
	X(cmd_query_device)       \
	X(cmd_reg_mr)             \
	X(cmd_dereg_mr)           \
	X(cmd_alloc_mw)           \
	X(cmd_bind_mw)            \
	X(cmd_invalidate_mw)      \
	X(cmd_dealloc_mw)         \
	X(cmd_create_qp)          \
	X(cmd_destroy_qp)         \
	X(cmd_conn)               \
	X(err_bad_opcode)         \
	X(err_bad_field)          \
	X(err_bad_access)         \
	X(err_bad_range)          \
	X(err_too_large)          \
	X(err_tpt_full)           \
	X(err_bad_key)            \
	X(err_bad_state)          \
	X(err_busy)               \
	X(err_not_supported)      \
	X(err_bad_qp)             \
	X(err_no_resources)       \
	X(err_conn)               \
	X(cmdq_errors)            \
	X(rx_frames)              \
	X(rx_bad_frames)          \
	X(rx_no_qp)               \
	X(tx_frames)              \
	X(dest_ring_full)         \
	X(tx_unreachable)         \
	X(cm_rx)                  \
	X(cm_bad)                 \
	X(conn_established)       \
	X(conn_refused)           \
	X(disconnects)            \
	X(qp_errors)              \
	X(retransmits)            \
	X(timeouts)               \
	X(rnr_naks)               \
	X(naks_sent)              \
	X(dma_faults)             \
	X(dma_calls)              \
	X(dma_frames)             \
	X(dma_ahead_unused)       \
	X(cq_overruns)            \
	X(invalidations_deferred) \
	X(loop_polls)             \
	X(sleeps)                 \
	X(sleep_aborts)           \
	X(wake_bell)              \
	X(wake_timer)             \
	X(wake_doorbell)          \
	X(wake_socket)            \
	X(wake_idle)              \
	X(sleep_us)               \
	X(sleep_max_us)           \
	X(dreq_unanswered)        \
	X(conn_requests_expired)  \
	X(attach_denied)          \
	X(hello_timeouts)         \
	X(accept_refused)         \
	X(mgmt_dropped)           \
	X(mgmt_evicted)           \
	X(fabric_damaged)         \
	X(frame_pool_empty)       \
	X(first_msg_held)         \
	X(first_msg_dropped)      \
	X(cmd_shm_map)            \
	X(cmd_shm_unmap)          \
	X(shm_maps)               \
	X(shm_unmaps)             \
	X(shm_fds_dropped)        \
	X(shm_bad_msgs)           \
	X(dma_shm)                \
	X(duplicates)

/*
 * retransmits, timeouts, rnr_naks, naks_sent, first_msg_held,
 * first_msg_dropped and duplicates hold what the QPs that are gone counted; a live QP keeps
 * its own until it ends (qpio_account).
 */
struct nic_counters {
#define NIC_COUNTER_FIELD(name) uint64_t name;
	NIC_COUNTERS(NIC_COUNTER_FIELD)
#undef NIC_COUNTER_FIELD
};

#endif /* NICSIM_COUNTERS_H */
