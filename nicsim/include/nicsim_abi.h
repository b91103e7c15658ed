/*
 * nicsim host interface, ABI version 8 (NIC_ABI_VERSION): the structures a
 * host driver and the emulated NIC share.  This header is the single source
 * of truth for the layouts described in docs/hardware-interface.md; every
 * size and offset a driver depends on is checked below with _Static_assert.
 *
 * Transport:
 *   - Attach: a SOCK_SEQPACKET UNIX socket "nic-<addr>.sock" in the NIC's run
 *     directory.  The host sends struct nic_hello; the NIC answers with
 *     struct nic_hello_reply and, for NIC_ROLE_HOST, three descriptors passed
 *     with SCM_RIGHTS in this order: the context segment (a memfd), the
 *     doorbell eventfd (host -> NIC) and the interrupt eventfd (NIC -> host).
 *     The socket stays open for the life of the context: when it closes (the
 *     host exited or died), the NIC tears the context down.  Each side
 *     checks the other's SO_PEERCRED: the same effective uid, or root (a
 *     NIC refuses others with NIC_STATUS_DENIED, except hosts of the group
 *     that nicsimd --allow-group names).  After the reply the NIC
 *     sends only one-byte notices, one per NIC_EV_DISCONNECTED or
 *     NIC_EV_QP_ERROR event, which a host may wait for or ignore.
 *   - Context segment: struct nic_ctx_hdr at offset 0, then the command ring
 *     and the completion ring at the offsets the header gives.
 *
 * Rings: power-of-two depth, free-running 32-bit indices, producer and
 * consumer index on separate cache lines, each index written by exactly one
 * side.  A producer fills the entry, then publishes the index with a release
 * store; a consumer observes the index with an acquire load, then reads the
 * entry.  The NIC copies every command out of shared memory before it looks at
 * it and treats every field, and every index the host owns, as hostile.
 *
 * Spinning: a side that waits for the other polls briefly before it sleeps,
 * which is cheap only while the two run on different CPUs.  Each side
 * publishes the CPU it last ran on (nic_cpu, host_cpu); a side that finds the
 * other on its own CPU yields the CPU at every poll instead of spinning, so
 * that the other side runs at once.
 *
 * Queue pairs (ABI 2): a context has NIC_QP_SLOTS fixed slots in its
 * segment, each holding a send queue, a receive queue and a completion queue
 * (rings of the same kind as the command ring).  CREATE_QP puts a slot to
 * use and names the QP by a NIC-wide 24-bit number; the host posts work
 * requests on the send and receive queues and rings the same doorbell; the
 * NIC posts one completion per work request on the slot's completion queue
 * and raises the same interrupt.  Connection events (a request on a
 * listening port, established, refused, disconnected, QP error) arrive on
 * the context's event queue.
 *
 * All multi-byte fields are little-endian (the host and NIC share a machine).
 */
#ifndef NICSIM_ABI_H
#define NICSIM_ABI_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#define NIC_ABI_MAGIC 0x4d43494eu /* "NICM" in memory order */
#define NIC_ABI_VERSION 8u
#define NIC_CACHELINE 64

/*
 * Limits of the attach socket a host can rely on (docs/hardware-interface.md
 * sections 2.2 and 2.7).  A NIC holds at most NIC_MAX_CONTEXTS host
 * contexts, fewer when its descriptor limit allows fewer: a context holds
 * NIC_CTX_FDS descriptors (its socket, its segment, two eventfds and up to
 * NIC_SHM_PENDING shared-buffer descriptors the host sent ahead).  At
 * most NIC_CONN_MAX connections may wait for their hello at once; more wait
 * in the listening socket's backlog until one of these goes.  A connection
 * that has not sent its hello NIC_HELLO_TIMEOUT_MS after it was accepted is
 * answered NIC_STATUS_TIMED_OUT and closed.  Management sessions do not take
 * those places: at most NIC_MGMT_MAX are open at once, and a new one makes
 * room by closing the one that has gone longest without a request or a
 * reply.  A peer of another user is refused at accept, before any hello.
 */
#define NIC_MAX_CONTEXTS 1024u
#define NIC_SHM_PENDING 1u
#define NIC_CTX_FDS (4u + NIC_SHM_PENDING)
#define NIC_CONN_MAX 64u
#define NIC_MGMT_MAX 16u
#define NIC_HELLO_TIMEOUT_MS 3000u

/* Socket file of the NIC with address A (dotted quad) inside its run directory. */
#define NIC_SOCK_PREFIX "nic-"
#define NIC_SOCK_SUFFIX ".sock"
#define NIC_PID_SUFFIX ".pid"

/* ---- Attach handshake -------------------------------------------------- */

enum nic_role {
	NIC_ROLE_HOST = 1, /* a host process: gets a context (protection domain) */
	NIC_ROLE_MGMT = 2, /* a management client (the nicsim CLI): see nicsim_mgmt.h */
};

/* Host -> NIC, first message on the socket. */
struct nic_hello {
	uint32_t magic;       /* NIC_ABI_MAGIC */
	uint16_t abi_version; /* NIC_ABI_VERSION */
	uint16_t role;        /* enum nic_role */
	uint32_t pid;         /* informational only: the NIC uses SO_PEERCRED */
	uint32_t reserved0;   /* must be 0 */
	uint8_t reserved[48]; /* must be 0 */
};

/* NIC capabilities (nic_hello_reply.caps, QUERY_DEVICE). */
#define NIC_CAP_MW 0x1u        /* memory windows: remote access revocable alone */
#define NIC_CAP_RDMA_READ 0x2u /* the NIC serves RDMA READ requests */

/* NIC -> host, answer to struct nic_hello.  status is an enum nic_status. */
struct nic_hello_reply {
	uint32_t magic;
	uint16_t abi_version;
	uint16_t status;
	uint32_t nic_pid;      /* informational: the host trusts SO_PEERCRED's pid */
	uint32_t ctx_id;       /* context (protection domain) number, 0 for mgmt */
	uint32_t nic_addr;     /* IPv4 address, network byte order */
	uint32_t caps;         /* NIC_CAP_* */
	uint32_t tpt_capacity; /* entries */
	uint32_t page_size;    /* bytes */
	uint64_t max_reg_len;  /* largest single registration, bytes */
	uint64_t seg_size;     /* size of the context segment (memfd) */
	uint8_t reserved[16];
};

/* ---- Status codes (commands and handshake) ------------------------------ */

enum nic_status {
	NIC_STATUS_OK = 0,
	NIC_STATUS_BAD_OPCODE = 1,     /* unknown opcode */
	NIC_STATUS_BAD_FIELD = 2,      /* a reserved field or flag not zero */
	NIC_STATUS_BAD_ACCESS = 3,     /* unknown access bit or invalid combination */
	NIC_STATUS_BAD_RANGE = 4,      /* zero length, or va + len wraps */
	NIC_STATUS_TOO_LARGE = 5,      /* longer than max_reg_len */
	NIC_STATUS_TPT_FULL = 6,       /* no free TPT entry */
	NIC_STATUS_BAD_KEY = 7,        /* index out of range, stale key, or not this PD's */
	NIC_STATUS_BAD_STATE = 8,      /* entry not in a state that allows the command */
	NIC_STATUS_BUSY = 9,           /* entry in use (windows bound to a region) */
	NIC_STATUS_BAD_VERSION = 10,   /* handshake: ABI version not supported */
	NIC_STATUS_BAD_HELLO = 11,     /* handshake: malformed hello */
	NIC_STATUS_NO_RESOURCES = 12,  /* handshake: NIC cannot create a context */
	NIC_STATUS_NOT_SUPPORTED = 13, /* capability switched off on this NIC */
	NIC_STATUS_BAD_QP = 14,        /* no such QP or slot here, or slot in use */
	NIC_STATUS_ADDR_IN_USE = 15,   /* LISTEN: the port is taken on this NIC */
	NIC_STATUS_CONN_REFUSED = 16,  /* nobody listens there, or the peer rejected */
	NIC_STATUS_UNREACHABLE = 17,   /* no NIC with that address on the fabric */
	NIC_STATUS_TIMED_OUT = 18,     /* no answer to the connection request (or reply) */
	NIC_STATUS_BAD_CONN = 19,      /* ACCEPT/REJECT: no such pending request */
	NIC_STATUS_DENIED = 20,        /* handshake: the peer runs as another user */
	NIC_STATUS_NO_DMA = 21,        /* REG_MR: the kernel refuses the NIC the host's memory */
	NIC_STATUS_MAX_
};

/* ---- TPT keys and access ----------------------------------------------- */

/*
 * A key is (24-bit index << 8) | 8-bit key byte.  Index 0 is never used, so 0
 * is never a valid key.  The key byte changes each time an index is reused
 * (registration, window bind), so a stale key never matches a live entry
 * until the byte wraps after 256 reuses of the same index (as on hardware).
 */
#define NIC_KEY_INDEX(k) ((uint32_t)(k) >> 8)
#define NIC_KEY_BYTE(k) ((uint32_t)(k)&0xffu)
#define NIC_KEY_MAKE(idx, b) (((uint32_t)(idx) << 8) | ((uint32_t)(b)&0xffu))
#define NIC_TPT_MAX_CAPACITY ((1u << 24) - 1u)

/* Access bits; local read is always implied. */
#define NIC_ACCESS_LOCAL_WRITE 0x1u
#define NIC_ACCESS_REMOTE_READ 0x2u
#define NIC_ACCESS_REMOTE_WRITE 0x4u
#define NIC_ACCESS_MW_BIND 0x8u /* windows may be bound to this region */
#define NIC_ACCESS_ALL 0xfu

/* Connection number meaning "no connection" (a window not yet bound to one). */
#define NIC_QPN_NONE 0u

/* ---- Commands ---------------------------------------------------------- */

enum nic_opcode {
	NIC_CMD_NOP = 0,           /* completes with OK; for liveness and latency */
	NIC_CMD_QUERY_DEVICE = 1,  /* -> cpl.query_device */
	NIC_CMD_REG_MR = 2,        /* register a region of the host's address space */
	NIC_CMD_DEREG_MR = 3,      /* invalidate a region (drains DMA first) */
	NIC_CMD_ALLOC_MW = 4,      /* allocate an unbound memory window */
	NIC_CMD_BIND_MW = 5,       /* bind a window to part of a region: new key */
	NIC_CMD_INVALIDATE_MW = 6, /* revoke the window's remote access at once */
	NIC_CMD_DEALLOC_MW = 7,    /* free a window */
	NIC_CMD_CREATE_QP = 8,     /* put a QP slot to use: cpl.key = QP number */
	NIC_CMD_DESTROY_QP = 9,    /* flush and free a QP (its slot becomes free) */
	NIC_CMD_LISTEN = 10,       /* accept connection requests to a port */
	NIC_CMD_UNLISTEN = 11,     /* stop; requests not yet accepted are rejected */
	NIC_CMD_CONNECT = 12,      /* connect a QP in INIT to a port of another NIC */
	NIC_CMD_ACCEPT = 13,       /* accept a CONN_REQUEST event's request on a QP */
	NIC_CMD_REJECT = 14,       /* reject a CONN_REQUEST event's request */
	NIC_CMD_DISCONNECT = 15,   /* close a connection; both QPs go to CLOSED */
	NIC_CMD_SHM_MAP = 16,      /* map a memfd the host sent as a shared buffer (ABI 6) */
	NIC_CMD_SHM_UNMAP = 17,    /* drop a shared buffer (ABI 6) */
	NIC_CMD_MAX_
};

struct nic_cmd_reg_mr {
	uint64_t va;     /* start of the region in the host's address space */
	uint64_t len;    /* bytes, > 0, va + len must not wrap */
	uint32_t access; /* NIC_ACCESS_* */
	uint32_t reserved;
};

struct nic_cmd_key {
	uint32_t key; /* DEREG_MR, INVALIDATE_MW, DEALLOC_MW: the entry's key */
	uint32_t reserved;
};

struct nic_cmd_bind_mw {
	uint32_t mw_key; /* window from ALLOC_MW or a previous bind */
	uint32_t mr_key; /* region the window is bound to; needs NIC_ACCESS_MW_BIND */
	uint64_t va;     /* window start, inside the region */
	uint64_t len;    /* window length, > 0, inside the region */
	uint32_t access; /* NIC_ACCESS_REMOTE_READ and/or _REMOTE_WRITE only */
	uint32_t qpn;    /* connection allowed to use it; NIC_QPN_NONE = none yet */
};

/*
 * QP flags (CREATE_QP, ABI 5).  NIC_QP_F_HOLD_FIRST: a SEND (with or without
 * immediate data) of at most NIC_HOLD_MAX bytes, in one packet, that
 * arrives while no receive has been posted and no message has yet taken a
 * receive on the QP, is kept by the NIC, acknowledged as delivered, and
 * completes the first receive the host posts (with the usual checks of
 * that receive).  Any other message without a receive gets RNR NAKs.
 */
#define NIC_QP_F_HOLD_FIRST 0x1u
/*
 * NIC_QP_F_RECV_INLINE (ABI 6): a SEND (with or without immediate data) of
 * at most NIC_RECV_INLINE_MAX bytes, in one packet, is not written to the
 * receive's buffers: the NIC checks the receive as always and puts the
 * bytes beside its completion (the CQ data entry of the same index, at
 * NIC_QP_CQ_DATA_OFF), flagged NIC_WC_F_INLINE; the host copies them into
 * the receive's buffers as it takes the completion.  Receives complete in
 * the order they were posted, so the host finds the buffers in its own copy
 * of the k-th receive it posted; it must keep that receive's ring entry
 * (or a copy) until then.  What mlx5's scatter-to-CQE does, for the same
 * reason: a small message then costs the NIC no DMA write.
 */
#define NIC_QP_F_RECV_INLINE 0x2u
#define NIC_QP_F_ALL 0x3u
#define NIC_HOLD_MAX 256u
#define NIC_RECV_INLINE_MAX 64u

struct nic_cmd_qp {
	uint32_t slot;  /* CREATE_QP: slot index, 0 .. NIC_QP_SLOTS - 1 */
	uint32_t qpn;   /* DESTROY_QP: the QP number CREATE_QP returned */
	uint32_t flags; /* CREATE_QP: NIC_QP_F_* (ABI 5); DESTROY_QP: 0 */
	uint32_t reserved;
};

/* LISTEN, UNLISTEN. */
struct nic_cmd_listen {
	uint16_t port;    /* 1 .. 65535 */
	uint16_t backlog; /* requests pending at once, 1 .. NIC_EQ_DEPTH; 0 for UNLISTEN */
	uint32_t reserved;
};

/* CONNECT, ACCEPT, REJECT, DISCONNECT. */
struct nic_cmd_conn {
	uint32_t qpn;      /* CONNECT, ACCEPT, DISCONNECT: the local QP; REJECT: 0 */
	uint32_t dst_addr; /* CONNECT: the peer NIC's address, network byte order; else 0 */
	uint16_t dst_port; /* CONNECT: the peer's listening port; else 0 */
	uint16_t src_port; /* CONNECT: this side's port (0: the NIC picks one); else 0 */
	uint32_t reserved;
	uint64_t conn_id; /* ACCEPT, REJECT: from the CONN_REQUEST event; else 0 */
};

/*
 * Shared buffers (ABI 6).  A host may keep buffers in memory it shares with
 * the NIC: the DMA engine then copies to and from them through its own
 * mapping instead of reaching into the host's address space with a system
 * call.  It changes only how the NIC reaches memory the TPT allowed: a
 * buffer is still registered with REG_MR, and every key check stays.
 *
 * Before SHM_MAP the host sends, on its attach socket, one message of
 * NIC_SHM_MSG_LEN bytes (NIC_SHM_MSG_MAGIC) carrying exactly one
 * descriptor with SCM_RIGHTS: a memfd at least len bytes long, sealed with
 * at least F_SEAL_SHRINK and F_SEAL_SEAL, which it has mapped MAP_SHARED at
 * va.  The NIC keeps at most NIC_SHM_PENDING such descriptors waiting (it
 * closes, and counts, one more); each SHM_MAP takes the oldest, whatever
 * its outcome.  Any other message on the socket (other bytes, no or more
 * descriptors, other ancillary data) breaks the protocol: the NIC closes
 * what it carried and puts the context in NIC_CTX_CMDQ_ERROR, as for a
 * broken command ring.  SHM_MAP fails with:
 *   NIC_STATUS_BAD_STATE    no descriptor waiting;
 *   NIC_STATUS_BAD_ACCESS   not a memfd, or without F_SEAL_SHRINK and
 *                           F_SEAL_SEAL;
 *   NIC_STATUS_TOO_LARGE    the memfd is shorter than len;
 *   NIC_STATUS_BAD_RANGE    va or len not page-aligned, len 0, or va + len
 *                           wraps;
 *   NIC_STATUS_BUSY         the range overlaps a map of the context;
 *   NIC_STATUS_NO_RESOURCES NIC_SHM_MAX maps already, more than
 *                           NIC_SHM_MAX_BYTES in all, or the NIC could not
 *                           map it.
 * SHM_UNMAP names the start of a map (else NIC_STATUS_BAD_RANGE); it
 * completes once no DMA of the NIC uses the mapping.  The NIC writes into
 * the memfd at the offsets of va: a host that maps something else at va
 * only changes what its own transfers see.  Maps end with the context.
 */
#define NIC_SHM_MSG_MAGIC "NICSHM1"
#define NIC_SHM_MSG_LEN 8u
#define NIC_SHM_MAX 64u
#define NIC_SHM_MAX_BYTES (1ull << 36)

struct nic_cmd_shm {
	uint64_t va;  /* the map's start in the host's address space */
	uint64_t len; /* SHM_MAP: bytes, page-aligned, > 0; SHM_UNMAP: 0 */
};

/* One command: 64 bytes.  tag is echoed in the completion. */
struct nic_cmd {
	uint16_t opcode; /* enum nic_opcode */
	uint16_t flags;  /* must be 0 */
	uint32_t reserved0;
	uint64_t tag;
	union {
		struct nic_cmd_reg_mr reg_mr;
		struct nic_cmd_key key;
		struct nic_cmd_bind_mw bind_mw;
		struct nic_cmd_qp qp;
		struct nic_cmd_listen listen;
		struct nic_cmd_conn conn;
		struct nic_cmd_shm shm;
		uint8_t raw[48]; /* bytes past the opcode's fields must be 0 */
	} u;
};

struct nic_cpl_query_device {
	uint32_t abi_version;
	uint32_t caps;
	uint32_t tpt_capacity;
	uint32_t tpt_in_use;
	uint64_t max_reg_len;
	uint32_t page_size;
	uint32_t ctx_id;
	uint32_t nic_addr; /* network byte order */
	uint8_t reserved[12];
};

/* One completion: 64 bytes. */
struct nic_cpl {
	uint64_t tag;    /* the command's tag */
	uint16_t opcode; /* the command's opcode (as read) */
	uint16_t status; /* enum nic_status */
	uint32_t key;    /* REG_MR, ALLOC_MW, BIND_MW: the new key; CREATE_QP: QP number */
	union {
		struct nic_cpl_query_device query_device;
		uint8_t raw[48];
	} u;
};

/* ---- Work requests, completions, events ---------------------------------- */

/* Index pair of one ring; the producer owns prod, the consumer owns cons. */
struct nic_ring_idx {
	alignas(NIC_CACHELINE) uint32_t prod;
	alignas(NIC_CACHELINE) uint32_t cons;
};

#define NIC_QP_SLOTS 32u
#define NIC_SQ_DEPTH 128u
#define NIC_RQ_DEPTH 128u
#define NIC_CQ_DEPTH 256u /* one completion per work request of both queues */
#define NIC_EQ_DEPTH 64u
#define NIC_MAX_SGE 4u
#define NIC_QPN_MAX 0xffffffu /* QP numbers are 24 bits; 0 and 1 are reserved */

/* A scatter/gather element: part of a registered region, by its local key. */
struct nic_sge {
	uint64_t va;
	uint32_t len;
	uint32_t lkey;
};

enum nic_wr_opcode {
	NIC_WR_SEND = 1,
	NIC_WR_SEND_IMM = 2,
	NIC_WR_RDMA_WRITE = 3,
	NIC_WR_RDMA_WRITE_IMM = 4,
	NIC_WR_RDMA_READ = 5,
};

#define NIC_WR_F_FENCE 0x1u     /* start only after earlier RDMA READs completed */
#define NIC_WR_F_SOLICITED 0x2u /* solicited event at the receiver */
/*
 * The payload is in the work request itself: inline_len bytes (at most
 * NIC_MAX_INLINE) of inline_data, in place of the SGEs (num_sge 0).  SEND,
 * SEND_IMM, RDMA_WRITE and RDMA_WRITE_IMM only.  The NIC copies the bytes
 * when it takes the request off the send queue, so the host may reuse its
 * buffer once the request is posted, and no local key is involved: the NIC
 * reads nothing of the host's memory for it.  What IBV_SEND_INLINE is to
 * verbs, and for the same reason: a small message costs no DMA read.
 */
#define NIC_WR_F_INLINE 0x4u /* ABI 6 */
#define NIC_MAX_INLINE 96u

/* Send queue entry: 128 bytes.  RDMA operations name the remote buffer by
 * remote_va and rkey; the local buffers are the SGEs (the sink for a read),
 * or, with NIC_WR_F_INLINE, the payload itself. */
struct nic_send_wqe {
	uint64_t wr_id;  /* returned in the completion */
	uint8_t opcode;  /* enum nic_wr_opcode */
	uint8_t flags;   /* NIC_WR_F_* */
	uint8_t num_sge; /* 0 .. NIC_MAX_SGE */
	uint8_t reserved0;
	uint32_t imm; /* _IMM opcodes: immediate data, delivered to the receiver */
	uint64_t remote_va;
	uint32_t rkey;
	uint32_t inline_len; /* NIC_WR_F_INLINE: bytes of inline_data; else 0 */
	union {
		struct {
			struct nic_sge sge[NIC_MAX_SGE];
			uint8_t reserved2[32];
		};
		uint8_t inline_data[NIC_MAX_INLINE];
	};
};

/* Receive queue entry: 128 bytes. */
struct nic_recv_wqe {
	uint64_t wr_id;
	uint8_t num_sge;
	uint8_t reserved0[23];
	struct nic_sge sge[NIC_MAX_SGE];
	uint8_t reserved1[32];
};

enum nic_wc_status {
	NIC_WC_SUCCESS = 0,
	NIC_WC_LOC_LEN_ERR = 1,        /* the message does not fit the receive buffers */
	NIC_WC_LOC_QP_OP_ERR = 2,      /* malformed work request */
	NIC_WC_LOC_PROT_ERR = 3,       /* a local key or local DMA failed its check */
	NIC_WC_WR_FLUSH_ERR = 4,       /* flushed: the QP went to error or was destroyed */
	NIC_WC_BAD_RESP_ERR = 5,       /* unexpected response from the peer */
	NIC_WC_REM_INV_REQ_ERR = 6,    /* peer NAK: invalid request */
	NIC_WC_REM_ACCESS_ERR = 7,     /* peer NAK: remote access error */
	NIC_WC_REM_OP_ERR = 8,         /* peer NAK: remote operational error */
	NIC_WC_RETRY_EXC_ERR = 9,      /* no answer within the retry limit */
	NIC_WC_RNR_RETRY_EXC_ERR = 10, /* peer had no receive buffer within the limit */
	NIC_WC_MAX_
};

enum nic_wc_opcode {
	NIC_WC_SEND = 1,
	NIC_WC_RDMA_WRITE = 2,
	NIC_WC_RDMA_READ = 3,
	NIC_WC_RECV = 4,
	NIC_WC_RECV_RDMA_IMM = 5,
};

#define NIC_WC_F_IMM 0x1u    /* imm is valid */
#define NIC_WC_F_INLINE 0x2u /* the data is the CQ data entry's (NIC_QP_F_RECV_INLINE) */

/* Completion queue entry: 32 bytes. */
struct nic_cqe {
	uint64_t wr_id;
	uint16_t status; /* enum nic_wc_status */
	uint8_t opcode;  /* enum nic_wc_opcode */
	uint8_t flags;   /* NIC_WC_F_* */
	uint32_t byte_len;
	uint32_t imm;
	uint32_t qpn;
	uint32_t detail; /* error detail: enum nic_tpt_reason or NAK code */
	uint32_t reserved;
};

/* Event queue entry: 32 bytes. */
enum nic_event_type {
	NIC_EV_CONN_REQUEST = 1, /* a peer asks to connect to a listening port */
	NIC_EV_CONNECTED = 2,    /* qpn is connected (RTS) */
	NIC_EV_CONN_FAILED = 3,  /* qpn's connect failed: status says why */
	NIC_EV_DISCONNECTED = 4, /* qpn's peer disconnected */
	NIC_EV_QP_ERROR = 5,     /* qpn went to error: status is the nic_wc_status */
};

struct nic_event {
	uint16_t type;      /* enum nic_event_type */
	uint16_t status;    /* CONN_FAILED: enum nic_status; QP_ERROR: nic_wc_status */
	uint32_t qpn;       /* the QP concerned, 0 for CONN_REQUEST */
	uint64_t conn_id;   /* CONN_REQUEST: names the request in ACCEPT/REJECT */
	uint32_t peer_addr; /* network byte order */
	uint16_t peer_port;
	uint16_t local_port;
	uint32_t peer_qpn; /* CONNECTED: the peer's QP number (ABI 5) */
	uint8_t reserved[4];
};

/* QP states, written by the NIC in the slot header. */
enum nic_qp_state {
	NIC_QPS_FREE = 0,
	NIC_QPS_INIT = 1,       /* created, not connected: receives may be posted */
	NIC_QPS_CONNECTING = 2, /* connection being set up */
	NIC_QPS_RTS = 3,        /* connected: both queues are served */
	NIC_QPS_ERROR = 4,      /* fatal error: work requests complete flushed */
	NIC_QPS_CLOSED = 5,     /* disconnected */
};

/* Per-slot header: the QP's identity and state (NIC-owned) and the indices
 * of its three rings (SQ and RQ: host produces; CQ: NIC produces). */
struct nic_qp_hdr {
	uint32_t qpn;   /* NIC-owned: 0 while the slot is free */
	uint32_t state; /* NIC-owned: enum nic_qp_state */
	uint32_t error; /* NIC-owned: enum nic_wc_status that sent it to ERROR */
	uint32_t reserved0;
	alignas(NIC_CACHELINE) struct nic_ring_idx sq;
	struct nic_ring_idx rq;
	struct nic_ring_idx cq;
};

/* Slot layout: header, send queue, receive queue, completion queue. */
#define NIC_QP_HDR_SIZE 512u
#define NIC_QP_SQ_OFF NIC_QP_HDR_SIZE
#define NIC_QP_RQ_OFF (NIC_QP_SQ_OFF + NIC_SQ_DEPTH * sizeof(struct nic_send_wqe))
#define NIC_QP_CQ_OFF (NIC_QP_RQ_OFF + NIC_RQ_DEPTH * sizeof(struct nic_recv_wqe))
#define NIC_QP_CQ_DATA_OFF (NIC_QP_CQ_OFF + NIC_CQ_DEPTH * sizeof(struct nic_cqe))
#define NIC_QP_SLOT_SIZE (NIC_QP_CQ_DATA_OFF + NIC_CQ_DEPTH * NIC_RECV_INLINE_MAX)

/* ---- Context segment ---------------------------------------------------- */

/*
 * The host's registration-cache counters (host-owned, in the context header
 * at NIC_CTX_HOST_CACHE_OFF): the provider publishes them for `nicsim show
 * hosts`; the NIC only copies them out for management and trusts nothing in
 * them.  Zero until the host publishes (magic).  Each field is written with
 * one aligned 64-bit (or 32-bit) store.
 */
#define NIC_HOST_CACHE_MAGIC 0x48435243u /* "CRCH" in memory order */
#define NIC_HOST_CACHE_ON 0x1u           /* unused registrations are kept (cached) */
#define NIC_HOST_CACHE_MONITOR 0x2u      /* the memory monitor sees unmaps */
#define NIC_HOST_CACHE_FREE 0x4u         /* ... and frees of malloc blocks */

struct nic_host_cache_stats {
	uint32_t magic;         /* NIC_HOST_CACHE_MAGIC once published */
	uint32_t flags;         /* NIC_HOST_CACHE_* */
	uint64_t hits;          /* registrations served without pinning or registering */
	uint64_t misses;        /* registrations that pinned and registered */
	uint64_t evictions;     /* unused entries released: limits, full TPT, pin limit */
	uint64_t invalidations; /* entries dropped because their memory changed */
	uint64_t entries;       /* registrations tracked now, in use or cached */
	uint64_t unused;        /* of which cached and unused */
	uint64_t bytes;         /* bytes the tracked registrations cover */
	uint64_t bytes_pinned;  /* bytes of pages the process has pinned (all NICs) */
	/* The last registration on this NIC refused for a limit of the system
	 * (nicsim_refusal.h says what each field means for each kind). */
	uint32_t refusal;        /* enum nic_refusal, NIC_REFUSAL_NONE if none yet */
	uint32_t refusal_errno;  /* what the kernel answered (EPERM, ENOMEM, ...) */
	uint64_t refusals;       /* registrations refused for such limits so far */
	uint64_t refusal_limit;  /* the limit's value then (UINT64_MAX: unlimited) */
	uint64_t refusal_in_use; /* how much of it the process used then */
	uint64_t refusal_needed; /* how much more the registration needed */
	uint64_t refusal_ns;     /* CLOCK_REALTIME of the refusal */
	uint8_t reserved[8];
};

/* Context state, written by the NIC only. */
enum nic_ctx_state {
	NIC_CTX_OK = 0,
	NIC_CTX_CMDQ_ERROR = 1, /* the host broke the command ring protocol */
};

/* nic_error with NIC_CTX_CMDQ_ERROR: what the host broke. */
#define NIC_CTX_ERR_PROD 1u   /* command producer index more than a ring ahead */
#define NIC_CTX_ERR_CPL 2u    /* completion consumer index never produced */
#define NIC_CTX_ERR_SOCKET 3u /* attach socket: not a shared-buffer message (ABI 6) */

struct nic_ctx_hdr {
	uint32_t magic;
	uint32_t abi_version;
	uint64_t seg_size;
	uint32_t ctx_id;
	uint32_t cmdq_depth; /* entries in the command ring = completion ring */
	uint64_t cmdq_off;   /* offset of struct nic_cmd[cmdq_depth] */
	uint64_t cplq_off;   /* offset of struct nic_cpl[cmdq_depth] */
	uint64_t eq_off;     /* offset of the event queue (ABI 2) */
	uint64_t qp_off;     /* offset of slot 0; slot i at qp_off + i * NIC_QP_SLOT_SIZE */
	/* NIC-owned words. */
	alignas(NIC_CACHELINE) uint32_t nic_state;    /* enum nic_ctx_state */
	uint32_t nic_error;                           /* detail for nic_state */
	alignas(NIC_CACHELINE) uint32_t nic_sleeping; /* 1: kick the doorbell */
	uint32_t nic_cpu; /* hint: CPU the NIC last polled on, plus 1; 0 unknown */
	/* Host-owned words. */
	alignas(NIC_CACHELINE) uint32_t host_waiting; /* 1: raise the interrupt */
	uint32_t host_cpu; /* hint: CPU the host last waited on, plus 1; 0 unknown */
	/* Host produces commands, NIC consumes them. */
	struct nic_ring_idx cmdq;
	/* NIC produces completions, host consumes them. */
	struct nic_ring_idx cplq;
	/* NIC produces events, host consumes them (ABI 2). */
	struct nic_ring_idx eq;
	/* Host-owned: the registration cache's counters. */
	alignas(NIC_CACHELINE) struct nic_host_cache_stats host_cache;
};

#define NIC_CMDQ_DEPTH 64u
#define NIC_CTX_HDR_SIZE 4096u
#define NIC_CTX_HOST_CACHE_OFF 640u
#define NIC_CTX_CMDQ_OFF NIC_CTX_HDR_SIZE
#define NIC_CTX_CPLQ_OFF (NIC_CTX_CMDQ_OFF + NIC_CMDQ_DEPTH * sizeof(struct nic_cmd))
#define NIC_CTX_EQ_OFF (NIC_CTX_CPLQ_OFF + NIC_CMDQ_DEPTH * sizeof(struct nic_cpl))
#define NIC_CTX_QP_OFF 16384u
#define NIC_CTX_SEG_SIZE (NIC_CTX_QP_OFF + NIC_QP_SLOTS * NIC_QP_SLOT_SIZE)

/* ---- Layout checks ------------------------------------------------------ */

_Static_assert(sizeof(struct nic_hello) == 64, "nic_hello is 64 bytes");
_Static_assert(sizeof(struct nic_hello_reply) == 64, "nic_hello_reply is 64 bytes");
_Static_assert(offsetof(struct nic_hello_reply, max_reg_len) == 32, "max_reg_len at 32");
_Static_assert(sizeof(struct nic_cmd_reg_mr) == 24, "reg_mr is 24 bytes");
_Static_assert(sizeof(struct nic_cmd_bind_mw) == 32, "bind_mw is 32 bytes");
_Static_assert(sizeof(struct nic_cmd) == 64, "nic_cmd is 64 bytes");
_Static_assert(offsetof(struct nic_cmd, tag) == 8, "cmd tag at 8");
_Static_assert(offsetof(struct nic_cmd, u) == 16, "cmd body at 16");
_Static_assert(sizeof(struct nic_cpl_query_device) == 48, "query_device is 48 bytes");
_Static_assert(sizeof(struct nic_cpl) == 64, "nic_cpl is 64 bytes");
_Static_assert(offsetof(struct nic_cpl, key) == 12, "cpl key at 12");
_Static_assert(offsetof(struct nic_cpl, u) == 16, "cpl body at 16");
_Static_assert(sizeof(struct nic_ring_idx) == 128, "ring indices on two cache lines");
_Static_assert(offsetof(struct nic_ring_idx, cons) == 64, "cons on its own line");
_Static_assert(offsetof(struct nic_ctx_hdr, nic_state) == 64, "nic_state at 64");
_Static_assert(offsetof(struct nic_ctx_hdr, nic_sleeping) == 128, "nic_sleeping at 128");
_Static_assert(offsetof(struct nic_ctx_hdr, nic_cpu) == 132, "nic_cpu at 132");
_Static_assert(offsetof(struct nic_ctx_hdr, host_waiting) == 192, "host_waiting at 192");
_Static_assert(offsetof(struct nic_ctx_hdr, host_cpu) == 196, "host_cpu at 196");
_Static_assert(offsetof(struct nic_ctx_hdr, cmdq) == 256, "cmdq indices at 256");
_Static_assert(offsetof(struct nic_ctx_hdr, cplq) == 384, "cplq indices at 384");
_Static_assert(offsetof(struct nic_ctx_hdr, eq) == 512, "eq indices at 512");
_Static_assert(offsetof(struct nic_ctx_hdr, eq_off) == 40, "eq_off at 40");
_Static_assert(offsetof(struct nic_ctx_hdr, qp_off) == 48, "qp_off at 48");
_Static_assert(sizeof(struct nic_host_cache_stats) == 128, "host cache stats: two lines");
_Static_assert(offsetof(struct nic_host_cache_stats, refusal) == 72, "refusal at 72");
_Static_assert(offsetof(struct nic_ctx_hdr, host_cache) == NIC_CTX_HOST_CACHE_OFF,
	       "host cache stats at 640");
_Static_assert(sizeof(struct nic_ctx_hdr) <= NIC_CTX_HDR_SIZE, "header fits its page");
_Static_assert(sizeof(struct nic_cmd_qp) == 16, "cmd qp is 16 bytes");
_Static_assert(offsetof(struct nic_cmd_qp, flags) == 8, "qp flags at 8");
_Static_assert(sizeof(struct nic_cmd_listen) == 8, "cmd listen is 8 bytes");
_Static_assert(sizeof(struct nic_cmd_conn) == 24, "cmd conn is 24 bytes");
_Static_assert(offsetof(struct nic_cmd_conn, conn_id) == 16, "conn_id at 16");
_Static_assert(sizeof(struct nic_cmd_shm) == 16, "cmd shm is 16 bytes");
_Static_assert(offsetof(struct nic_cmd_shm, len) == 8, "shm len at 8");
_Static_assert(sizeof(NIC_SHM_MSG_MAGIC) == NIC_SHM_MSG_LEN, "shm message is its magic");
_Static_assert(NIC_SHM_MAX_BYTES *NIC_MAX_CONTEXTS <= (1ull << 46),
	       "every context's maps fit in half of the NIC's address space");
_Static_assert(sizeof(struct nic_sge) == 16, "sge is 16 bytes");
_Static_assert(sizeof(struct nic_send_wqe) == 128, "send wqe is 128 bytes");
_Static_assert(offsetof(struct nic_send_wqe, remote_va) == 16, "remote_va at 16");
_Static_assert(offsetof(struct nic_send_wqe, sge) == 32, "send sges at 32");
_Static_assert(offsetof(struct nic_send_wqe, inline_data) == 32 &&
		   NIC_MAX_INLINE == sizeof(struct nic_send_wqe) - 32,
	       "inline data fills the send wqe from 32");
_Static_assert(sizeof(struct nic_recv_wqe) == 128, "recv wqe is 128 bytes");
_Static_assert(offsetof(struct nic_recv_wqe, sge) == 32, "recv sges at 32");
_Static_assert(sizeof(struct nic_cqe) == 32, "cqe is 32 bytes");
_Static_assert(sizeof(struct nic_event) == 32, "event is 32 bytes");
_Static_assert(offsetof(struct nic_qp_hdr, sq) == 64, "sq indices at 64");
_Static_assert(offsetof(struct nic_qp_hdr, rq) == 192, "rq indices at 192");
_Static_assert(offsetof(struct nic_qp_hdr, cq) == 320, "cq indices at 320");
_Static_assert(sizeof(struct nic_qp_hdr) <= NIC_QP_HDR_SIZE, "qp header fits");
_Static_assert(NIC_QP_SLOT_SIZE == 512 + 128 * 128 + 128 * 128 + 256 * 32 + 256 * 64,
	       "qp slot layout");
_Static_assert(NIC_QP_SLOT_SIZE % 64 == 0, "slots stay cache-line aligned");
_Static_assert(NIC_CTX_EQ_OFF + NIC_EQ_DEPTH * sizeof(struct nic_event) <= NIC_CTX_QP_OFF,
	       "event queue fits before the slots");
_Static_assert(NIC_CQ_DEPTH >= NIC_SQ_DEPTH + NIC_RQ_DEPTH, "a CQ holds every request's cqe");
/* Each depth on its own: x & (x - 1) clears the lowest set bit, so it is 0
 * only for a power of two (or 0, refused separately). */
#define NIC_IS_POW2(x) ((x) != 0 && ((x) & ((x)-1)) == 0)
_Static_assert(NIC_IS_POW2(NIC_SQ_DEPTH), "send queue depth is a power of two");
_Static_assert(NIC_IS_POW2(NIC_RQ_DEPTH), "receive queue depth is a power of two");
_Static_assert(NIC_IS_POW2(NIC_CQ_DEPTH), "completion queue depth is a power of two");
_Static_assert(NIC_IS_POW2(NIC_EQ_DEPTH), "event queue depth is a power of two");
_Static_assert(NIC_IS_POW2(NIC_CMDQ_DEPTH), "command ring depth is a power of two");
_Static_assert(NIC_CTX_SEG_SIZE == 16384 + 32 * 57856, "segment is 1,867,776 bytes");

#endif /* NICSIM_ABI_H */
