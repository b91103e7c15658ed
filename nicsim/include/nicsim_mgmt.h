/*
 * Management protocol of ABI version 8 (NIC_ABI_VERSION, nicsim_abi.h): how
 * the nicsim tool reads a NIC's state.  This header holds the protocol
 * only: the messages, their records and the values those carry, each size
 * checked below.  docs/hardware-interface.md section 11 describes it.
 *
 * A management client connects to the NIC's socket, sends struct nic_hello
 * with role NIC_ROLE_MGMT and reads struct nic_hello_reply (no descriptors).
 * It then sends requests (struct nic_mgmt_req), each answered by one or more
 * replies: a struct nic_mgmt_hdr followed by `count` records of the type the
 * request names.  Listings are sent in several messages; the last one carries
 * NIC_MGMT_F_LAST.  The socket is SOCK_SEQPACKET, so one message is one
 * read.  A reply with a status other than NIC_STATUS_OK carries no records
 * and NIC_MGMT_F_LAST.  A message without NIC_MGMT_F_LAST always carries at
 * least one record.  Management is off the data path: the NIC serves it from
 * its event loop between commands.
 *
 * The records have the layout of this ABI version; a NIC that adds a counter
 * to NIC_STATS or a field to a record raises NIC_ABI_VERSION, which the hello
 * exchange checks.
 *
 * Nothing here is the NIC's own state: the NIC keeps its counters, its TPT
 * and its log of refusals in structures of its own and copies them into
 * these records, field by field, when it answers a request.  So a record
 * changes only with the ABI version, whatever the NIC keeps inside.
 */
#ifndef NICSIM_MGMT_H
#define NICSIM_MGMT_H

#include <stdint.h>

#include "nicsim_abi.h"

/*
 * The fields of the stats record (struct nic_stats), in order, each a
 * uint64_t: counters since the NIC started, and figures as they are now
 * (tpt_in_use, tpt_capacity, tpt_high_water, contexts, qps).
 * X(name, description)
 */
#define NIC_STATS(X)                                                                      \
	X(attaches, "host contexts created")                                              \
	X(detaches, "host contexts torn down")                                            \
	X(attach_refused, "attaches refused (bad hello, version, resources)")             \
	X(mgmt_sessions, "management clients served")                                     \
	X(doorbells, "doorbell wake-ups")                                                 \
	X(interrupts, "interrupts raised to hosts")                                       \
	X(cmds, "commands executed")                                                      \
	X(cmds_failed, "commands completed with an error status")                         \
	X(cmd_nop, "NOP commands")                                                        \
	X(cmd_query_device, "QUERY_DEVICE commands")                                      \
	X(cmd_reg_mr, "REG_MR commands")                                                  \
	X(cmd_dereg_mr, "DEREG_MR commands")                                              \
	X(cmd_alloc_mw, "ALLOC_MW commands")                                              \
	X(cmd_bind_mw, "BIND_MW commands")                                                \
	X(cmd_invalidate_mw, "INVALIDATE_MW commands")                                    \
	X(cmd_dealloc_mw, "DEALLOC_MW commands")                                          \
	X(cmd_create_qp, "CREATE_QP commands")                                            \
	X(cmd_destroy_qp, "DESTROY_QP commands")                                          \
	X(cmd_conn, "LISTEN, UNLISTEN, CONNECT, ACCEPT, REJECT, DISCONNECT commands")     \
	X(err_bad_opcode, "commands with an unknown opcode")                              \
	X(err_bad_field, "commands with a non-zero reserved field")                       \
	X(err_bad_access, "commands with invalid access bits")                            \
	X(err_bad_range, "commands with an empty or wrapping range")                      \
	X(err_too_large, "registrations over the size limit")                             \
	X(err_tpt_full, "allocations refused: TPT full")                                  \
	X(err_bad_key, "commands naming an invalid, stale or foreign key")                \
	X(err_bad_state, "commands on an entry in the wrong state")                       \
	X(err_busy, "commands on an entry still in use")                                  \
	X(err_not_supported, "commands for a capability switched off")                    \
	X(err_bad_qp, "commands naming a bad QP or slot")                                 \
	X(err_no_resources, "commands refused: NIC out of resources")                     \
	X(err_conn, "connection commands refused (port in use, no such request)")         \
	X(cmdq_errors, "contexts whose command ring protocol broke")                      \
	X(tpt_refusals, "TPT accesses refused")                                           \
	X(tpt_in_use, "TPT entries in use now")                                           \
	X(tpt_capacity, "TPT capacity")                                                   \
	X(tpt_high_water, "most TPT entries ever in use at once")                         \
	X(contexts, "host contexts attached now")                                         \
	X(qps, "queue pairs in use now")                                                  \
	X(rx_frames, "frames received from the fabric")                                   \
	X(rx_bad_frames, "frames refused by the wire decoder (ICRC, framing)")            \
	X(rx_no_qp, "frames for a QP that does not exist or is not connected")            \
	X(tx_frames, "frames sent to the fabric")                                         \
	X(dest_ring_full,                                                                 \
	  "sends the fabric refused: the destination's ring was full (sent again)")       \
	X(tx_unreachable, "frames to an address no NIC serves")                           \
	X(cm_rx, "connection messages received")                                          \
	X(cm_bad, "connection messages refused")                                          \
	X(conn_established, "connections established")                                    \
	X(conn_refused, "connection requests refused or failed")                          \
	X(disconnects, "connections closed")                                              \
	X(qp_errors, "QPs that went to error")                                            \
	X(retransmits, "go-back-N restarts of QP requesters")                             \
	X(timeouts, "retransmission timeouts")                                            \
	X(rnr_naks, "RNR NAKs received")                                                  \
	X(naks_sent, "NAKs sent (sequence, access, invalid, operational)")                \
	X(dma_faults, "DMA transfers the host's memory refused")                          \
	X(dma_calls, "DMA system calls (process_vm_readv/writev)")                        \
	X(dma_frames, "frame payloads moved by DMA")                                      \
	X(dma_ahead_unused, "frames read ahead for packets then not sent")                \
	X(cq_overruns, "completions lost to a full completion queue")                     \
	X(invalidations_deferred, "DEREG_MR/DEALLOC_MW held until in-flight DMA drained") \
	X(loop_polls, "event loop passes over rings, fabric and timers")                  \
	X(sleeps, "times the event loop slept in epoll_wait")                             \
	X(sleep_aborts, "sleeps called off: work found at the last look")                 \
	X(wake_bell, "sleeps ended by the fabric bell")                                   \
	X(wake_timer, "sleeps ended by the timer (transport, CM, frame due)")             \
	X(wake_doorbell, "sleeps ended by a host doorbell")                               \
	X(wake_socket, "sleeps ended by a socket or signal")                              \
	X(wake_idle, "sleeps after which the first pass found no work")                   \
	X(sleep_us, "microseconds asleep in epoll_wait")                                  \
	X(sleep_max_us, "longest single sleep, microseconds")                             \
	X(dreq_unanswered, "disconnect requests the peer never answered")                 \
	X(conn_requests_expired, "connection requests dropped unaccepted: sender quit")   \
	X(attach_denied, "connections refused: the peer runs as another user")            \
	X(hello_timeouts, "connections closed: no hello in time")                         \
	X(accept_refused, "connections refused at once: no descriptor left for them")     \
	X(mgmt_dropped, "management clients dropped: requests piled up unread")           \
	X(mgmt_evicted, "management sessions closed to make room for a new one")          \
	X(fabric_damaged, "times the fabric segment was found damaged (link down)")       \
	X(frame_pool_empty, "sends held back: the fabric had no free frame (sent again)") \
	X(first_msg_held, "first messages held until a receive was posted")               \
	X(first_msg_dropped, "held first messages dropped: the QP ended first")           \
	X(cmd_shm_map, "SHM_MAP commands")                                                \
	X(cmd_shm_unmap, "SHM_UNMAP commands")                                            \
	X(shm_maps, "shared buffers mapped (SHM_MAP)")                                    \
	X(shm_unmaps, "shared buffers unmapped (SHM_UNMAP or the context's end)")         \
	X(shm_fds_dropped, "shared-buffer descriptors closed unmapped (refused, extra)")  \
	X(shm_bad_msgs, "attach-socket messages that broke the shared-buffer protocol")   \
	X(dma_shm, "DMA pieces copied through shared buffers, no system call")            \
	X(duplicates, "requests that came again (retransmitted, replayed): not redone")   \
	X(udp_rx_datagrams, "UDP: datagrams received on port 4791 of this address")       \
	X(udp_rx_bytes, "UDP: bytes of them, from the IPv4 header on")                    \
	X(udp_rx_short, "UDP: dropped, shorter than any RoCEv2 packet")                   \
	X(udp_rx_oversize, "UDP: dropped, longer than a frame")                           \
	X(udp_rx_not_roce, "UDP: dropped, IP options or a fragment")                      \
	X(udp_rx_bad_length, "UDP: dropped, IP or UDP length differs from what arrived")  \
	X(udp_rx_wrong_dst, "UDP: dropped, to another address")                           \
	X(udp_rx_nobuf, "UDP: times datagrams waited for a free frame")                   \
	X(udp_tx_datagrams, "UDP: datagrams sent")                                        \
	X(udp_tx_bytes, "UDP: bytes of them, from the IPv4 header on")                    \
	X(udp_tx_refused, "UDP: frames not sent, their IPv4 header was not this NIC's")   \
	X(udp_tx_unreachable, "UDP: datagrams the kernel could not route")                \
	X(udp_tx_too_big, "UDP: datagrams over the interface's MTU")                      \
	X(udp_tx_nobufs, "UDP: datagrams dropped, the socket's buffer was full")          \
	X(udp_tx_errors, "UDP: datagrams refused for another reason")

struct nic_stats {
#define NIC_STATS_FIELD(name, desc) uint64_t name;
	NIC_STATS(NIC_STATS_FIELD)
#undef NIC_STATS_FIELD
};

enum nic_mgmt_op {
	NIC_MGMT_STATS = 1,    /* -> one struct nic_stats */
	NIC_MGMT_TPT = 2,      /* -> struct nic_mgmt_tpt_rec listing, live entries */
	NIC_MGMT_FAULTS = 3,   /* -> struct nic_mgmt_fault_rec listing, oldest first */
	NIC_MGMT_HOSTS = 4,    /* -> struct nic_mgmt_host_rec listing, one per host context */
	NIC_MGMT_DETACHED = 5, /* -> struct nic_mgmt_host_rec listing, hosts detached after a
				* refusal, oldest first */
};

struct nic_mgmt_req {
	uint32_t magic; /* NIC_ABI_MAGIC */
	uint16_t op;    /* enum nic_mgmt_op */
	uint16_t reserved0;
	uint8_t reserved[8];
};

#define NIC_MGMT_F_LAST 0x1u

struct nic_mgmt_hdr {
	uint32_t magic;
	uint16_t op;     /* the request's op */
	uint16_t status; /* enum nic_status; NIC_STATUS_BAD_OPCODE for an unknown op */
	uint32_t count;  /* records that follow in this message */
	uint32_t flags;  /* NIC_MGMT_F_LAST on the final message */
};

/* Values of a TPT record's type and state (and of a fault record's entry_type, entry_state). */
enum nic_tpt_type { NIC_TPT_MR = 1, NIC_TPT_MW = 2 };
enum nic_tpt_state {
	NIC_TPT_FREE = 0,
	NIC_TPT_VALID = 1,
	NIC_TPT_REVOKED = 2,      /* window invalidated, or allocated and never bound */
	NIC_TPT_INVALIDATING = 3, /* unpublished, draining DMA */
};

struct nic_mgmt_tpt_rec {
	uint32_t key;
	uint8_t type;   /* enum nic_tpt_type */
	uint8_t state;  /* enum nic_tpt_state */
	uint8_t access; /* NIC_ACCESS_* */
	uint8_t reserved0;
	uint64_t va;
	uint64_t len;
	uint32_t ctx_id;
	uint32_t pid;      /* owner process */
	char comm[16];     /* owner program name */
	uint32_t qpn;      /* bound connection (windows) */
	uint32_t mr_key;   /* region a window is bound to */
	uint64_t reg_ns;   /* CLOCK_REALTIME of the registration or bind */
	uint32_t inflight; /* DMA operations in flight */
	uint32_t reserved1;
};

/*
 * TPT refusal reasons, in check order: a fault record's reason, and also the
 * detail of a completion with NIC_WC_LOC_PROT_ERR (nicsim_abi.h).
 */
#define NIC_TPT_REASONS(X)                                                      \
	X(NONE, "no refusal")                                                   \
	X(BAD_INDEX, "key index outside the table")                             \
	X(STALE_KEY, "key byte does not match the entry (stale or forged key)") \
	X(WRONG_PD, "entry belongs to another protection domain")               \
	X(NO_ACCESS, "entry lacks a requested access right")                    \
	X(BAD_STATE, "entry is not valid (deregistered, revoked, draining)")    \
	X(WRONG_QP, "window is bound to another connection")                    \
	X(OUT_OF_RANGE, "access outside the entry's range")

enum nic_tpt_reason {
#define NIC_TPT_REASON_ENUM(name, desc) NIC_TPT_R_##name,
	NIC_TPT_REASONS(NIC_TPT_REASON_ENUM)
#undef NIC_TPT_REASON_ENUM
	    NIC_TPT_R_MAX_
};

struct nic_mgmt_fault_rec {
	uint64_t when_ns;    /* CLOCK_REALTIME of the refusal */
	uint32_t key;        /* key presented */
	uint16_t reason;     /* enum nic_tpt_reason */
	uint8_t access;      /* access requested */
	uint8_t entry_state; /* enum nic_tpt_state of the entry now */
	uint64_t va;         /* range requested */
	uint64_t len;
	uint32_t ctx_id;    /* requester's context */
	uint32_t pid;       /* requester's process */
	uint32_t qpn;       /* requester's connection, NIC_QPN_NONE for local */
	uint32_t entry_key; /* the entry's current key (0: index out of range) */
	uint64_t entry_va;  /* the entry's range */
	uint64_t entry_len;
	uint8_t entry_access;
	uint8_t entry_type; /* enum nic_tpt_type, 0 if index out of range */
	uint8_t reserved0[2];
	uint32_t entry_pid;        /* who last changed the entry */
	uint64_t entry_changed_ns; /* when the entry's key last changed */
	uint32_t entry_ctx_id;
	uint32_t entry_qpn;
	/* ABI 5: for a remote access, the requester across the fabric (qpn
	 * above is the local connection the request arrived on); peer_qpn is
	 * NIC_QPN_NONE for a local access. */
	uint32_t peer_addr; /* network byte order */
	uint32_t peer_qpn;
	uint32_t peer_psn;   /* the request's PSN */
	uint8_t peer_opcode; /* the request's BTH opcode */
	uint8_t reserved1[3];
};

/*
 * One host context: who it is and the registration-cache counters its host
 * publishes in its context header (all zero, magic included, when the host
 * publishes none).  Copied from the host's memory: display only.
 * NIC_MGMT_HOSTS lists the attached ones in context id order.
 * NIC_MGMT_DETACHED lists the last NIC_MGMT_DETACHED_MAX that detached
 * after a registration refused for a limit of the system (cache.refusal),
 * oldest first, with NIC_MGMT_HOST_DETACHED in flags and the counters as
 * they were at the end: a program that failed and exited still says why.
 */
#define NIC_MGMT_HOST_DETACHED 0x1u
#define NIC_MGMT_DETACHED_MAX 8u

struct nic_mgmt_host_rec {
	uint32_t ctx_id;
	uint32_t pid;
	char comm[16];
	uint32_t qps;   /* QP slots in use */
	uint32_t flags; /* NIC_MGMT_HOST_* */
	struct nic_host_cache_stats cache;
};

#define NIC_MGMT_MSG_MAX 65536u

_Static_assert(sizeof(struct nic_mgmt_req) == 16, "mgmt req is 16 bytes");
_Static_assert(sizeof(struct nic_mgmt_hdr) == 16, "mgmt hdr is 16 bytes");
_Static_assert(sizeof(struct nic_mgmt_tpt_rec) == 72, "tpt rec is 72 bytes");
_Static_assert(sizeof(struct nic_mgmt_fault_rec) == 104, "fault rec is 104 bytes");
_Static_assert(sizeof(struct nic_stats) == 840, "stats rec is 105 fields of 8 bytes");
_Static_assert(NIC_TPT_R_MAX_ <= UINT16_MAX, "a reason fits the fault record's field");
_Static_assert(sizeof(struct nic_mgmt_host_rec) == 160, "host rec is 160 bytes");

#endif /* NICSIM_MGMT_H */
