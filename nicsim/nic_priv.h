/*
 * Internals of the NIC daemon shared by nic.c (event loop), ctx.c (host
 * contexts) and mgmt.c (management clients).  Everything here runs on the
 * NIC's single event-loop thread.
 */
#ifndef NICSIM_NIC_PRIV_H
#define NICSIM_NIC_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "cmd.h"
#include "counters.h"
#include "dma.h"
#include "fab.h"
#include "fab_wire.h"
#include "log.h"
#include "nic.h"
#include "nicsim_abi.h"
#include "nicsim_mgmt.h"
#include "qp.h"
#include "tpt.h"

/* What an epoll event points at. */
enum nic_src_type {
	NIC_SRC_LISTEN,
	NIC_SRC_SIGNAL,
	NIC_SRC_NEW,      /* accepted, waiting for its hello */
	NIC_SRC_CTX,      /* a host context's socket */
	NIC_SRC_DOORBELL, /* a host context's doorbell eventfd */
	NIC_SRC_MGMT,     /* a management client's socket */
	NIC_SRC_PORT,     /* the fabric port's bell */
	NIC_SRC_TIMER,    /* the timerfd for transport and connection timers */
	NIC_SRC_PIDFD,    /* a host context's pidfd: readable once the host exits */
	NIC_SRC_PEER,     /* a pidfd: the process of a peer NIC (port.c) */
};

/* What poll_events found ready (struct nic.woke_by). */
#define NIC_WOKE_BELL 0x1u
#define NIC_WOKE_TIMER 0x2u
#define NIC_WOKE_DOORBELL 0x4u
#define NIC_WOKE_SOCKET 0x8u

struct nic_src {
	enum nic_src_type type;
	void *obj;
};

/*
 * A management client's state (mgmt.c).  Replies are produced one message
 * at a time and only while the socket takes them, so a client that stops
 * reading costs the NIC one message buffer and never a blocked loop: a reply
 * that meets a full socket waits in msg until the socket is writable again
 * (EPOLLOUT).  Requests read meanwhile wait in queue; a client whose queue
 * overflows has stopped reading its replies and is dropped.
 */
#define NIC_MGMT_QUEUE 32u
struct nic_mgmt_client {
	bool busy;                      /* a request is being answered */
	uint16_t op;                    /* its op */
	uint32_t cursor;                /* where its listing goes on (TPT index, context id) */
	uint16_t queue[NIC_MGMT_QUEUE]; /* ops of the requests waiting behind it */
	uint32_t qhead, qlen;
	uint8_t *msg;   /* NIC_MGMT_MSG_MAX bytes */
	size_t msg_len; /* bytes of msg still to send, 0: none */
	void *scratch;  /* the TPT's records of a listing, before conversion */
	bool out_armed; /* EPOLLOUT is in the socket's epoll events */
	/* CLOCK_MONOTONIC ns of the session's last request or reply message:
	 * the session longest without one makes room for a new one. */
	uint64_t last_active;
};

/* A connection that has not said hello yet, or a management client. */
struct nic_conn {
	struct nic_src src;
	int fd;
	uint32_t pid;                 /* SO_PEERCRED */
	uint32_t uid;                 /* SO_PEERCRED: effective uid at connect() */
	uint32_t gid;                 /* SO_PEERCRED: effective gid at connect() */
	bool by_group;                /* another user's, let in by --allow-group */
	uint64_t hello_deadline;      /* CLOCK_MONOTONIC ns; 0 once it said hello */
	struct nic_mgmt_client *mgmt; /* management clients only */
	struct nic_conn *next;
};

/*
 * A kind of log line that a peer can cause at will (a refused or silent
 * connection, a misbehaving management client): at most NIC_LOG_BURST of
 * them are written in NIC_LOG_WINDOW_NS; those past it are only counted,
 * and the next line written after the window says how many were held back.
 */
#define NIC_LOG_BURST 4u
#define NIC_LOG_WINDOW_NS 10000000000ull
struct nic_ratelog {
	uint64_t since;  /* CLOCK_MONOTONIC ns the window began, 0: none yet */
	uint32_t logged; /* lines written in this window */
	uint32_t held;   /* lines held back since the last one written */
};

/* One host attachment: context = protection domain. */
struct nic_ctx {
	struct nic_src sock_src;
	struct nic_src bell_src;
	struct nic_src pid_src;
	uint32_t id;
	uint32_t pid;
	char comm[16];
	int sock;     /* the attach socket; hang-up = host gone */
	int memfd;    /* the context segment */
	int doorbell; /* eventfd, host -> NIC */
	int irq;      /* eventfd, NIC -> host */
	/* pidfd of the host of another user (--allow-group), -1 otherwise:
	 * the context goes when that process exits, before its pid, which
	 * DMA names, can be another process's. */
	int pidfd;
	/* That host's user and primary group (SO_PEERCRED): the NIC reaches its
	 * memory with those ids' rights alone (struct dma_as); by_group says
	 * as is to be used. */
	bool by_group;
	struct dma_as as;
	struct nic_ctx_hdr *hdr;
	struct nic_cmd *cmdq;
	struct nic_cpl *cplq;
	/* The NIC's own indices, never read back from shared memory. */
	uint32_t cmd_cons;
	uint32_t cpl_prod;
	bool broken;                  /* ring protocol broken: ring no longer read */
	bool dma_ok;                  /* the kernel let the NIC read the host's memory */
	bool dma_denied_logged;       /* ... or refused, and the log said so */
	struct qp *qps[NIC_QP_SLOTS]; /* QP in each slot of the segment */
	bool irq_due;                 /* completions or events posted since the last interrupt */
	uint32_t blocked_key;         /* a DEREG/DEALLOC waiting for DMA to drain */
	struct nic_cpl blocked_cpl;   /* its completion, posted when it drains */
	struct nic_event *eq;
	uint32_t eq_prod;          /* NIC-owned EQ index */
	struct nic_event *eq_wait; /* events waiting for EQ space, oldest first */
	uint32_t eq_nwait, eq_cap;
	/* Shared buffers (ABI 6): descriptors the host sent, oldest first; the
	 * one the SHM_MAP being executed took (-1: none); the maps, sorted by
	 * va and disjoint, and the bytes they hold. */
	int shm_pend[NIC_SHM_PENDING];
	uint32_t shm_npend;
	int shm_fd_now;
	bool shm_full_warned;
	struct dma_map shm[NIC_SHM_MAX];
	uint32_t nshm;
	uint64_t shm_bytes;
	struct nic_ctx *next;
};

/* Frames of a burst unit at most (fab.h: FAB_UNIT_MAX).  Fewer than the
 * fabric takes, so that the receiver can start on a unit while the sender
 * builds the next; units of 4 and of 64 measured no different
 * (docs/transport.md, Burst units). */
#define NIC_UNIT_MAX 16u

/*
 * Received payloads the transport accepted, waiting to be written to host
 * memory in one DMA (qpio.c): consecutive pieces of one QP's buffer, each
 * still in its frame.
 */
#define NIC_RX_BATCH 64u
struct nic_rx_batch {
	struct qp *qp; /* NULL: empty */
	const struct rc_mem *mem;
	uint64_t off, end; /* where the first payload goes, where the next would */
	uint32_t psn;      /* the first payload's packet */
	uint32_t n;
	uint32_t idx[NIC_RX_BATCH];
	struct iovec iov[NIC_RX_BATCH];
};

struct nic {
	struct nic_opts opts;
	struct nic_log log;
	struct tpt *tpt;
	struct qp_table qps;
	struct nic_counters stats;
	struct cmd_env env;
	char sock_path[108];
	char pid_path[PATH_MAX];
	bool own_files; /* we created sock_path and pid_path */
	int listen_fd;
	int epoll_fd;
	int signal_fd;
	struct nic_src listen_src;
	struct nic_src signal_src;
	struct nic_ctx *ctxs;
	uint32_t nctx;
	uint32_t next_ctx_id;
	/* Hosts that detached after a registration refused for a system
	 * limit, the last NIC_MGMT_DETACHED_MAX: a ring, oldest at
	 * detached[detached_next] once it is full (mgmt listing). */
	struct nic_mgmt_host_rec detached[NIC_MGMT_DETACHED_MAX];
	uint32_t ndetached, detached_next;
	struct nic_conn *conns;    /* new and management connections */
	uint32_t nconns;           /* how many */
	uint32_t nmgmt;            /* how many of them are management sessions */
	uint32_t max_ctx;          /* contexts that fit the descriptor limit */
	uint64_t fd_limit;         /* RLIMIT_NOFILE soft limit after raising it */
	uint32_t uid;              /* effective uid: peers must match (or be root) */
	uint64_t hello_next;       /* earliest hello deadline of conns, 0: none */
	int reserve_fd;            /* spent to refuse a connection when out of descriptors */
	bool fd_short;             /* out of descriptors: logged once per episode */
	bool listen_paused;        /* listening socket out of epoll until a descriptor frees */
	uint64_t fd_short_refused; /* connections refused in this episode */
	/* Log lines a peer can cause at will, each kind rate-limited. */
	struct nic_ratelog log_denied, log_refused, log_silent, log_evicted, log_mgmt;
	/* The fabric had no frame for data in this pass over the NIC's work,
	 * and this NIC has given none back since: data does not scan the
	 * pool again (an empty pool costs a scan of every frame, and with
	 * many QPs each would scan it in every pass). */
	bool pool_dry;
	bool fabric_damaged;     /* the fabric's header is damaged: logged once per episode */
	uint64_t fabric_checked; /* CLOCK_MONOTONIC_COARSE ns of the last look at it */
	uint32_t cpu;            /* CPU last published in nic_cpu, plus 1 */
	bool stop;
	/* The fabric (NULL when the run directory has none). */
	struct fab *fab;
	struct fab_port *port;
	struct nic_src port_src;
	struct nic_src udp_src; /* the port's UDP receive socket (--udp) */
	int timer_fd;
	struct nic_src timer_src;
	uint64_t timer_armed;    /* deadline the timerfd is set to, 0: none */
	uint32_t woke_by;        /* NIC_WOKE_* bits of the events served by poll_events */
	struct conn_state *conn; /* listeners, pending requests (conn.c) */
	/* The processes of the peer NICs this NIC's connections run to (port.c). */
	struct port_watch **watch;
	uint32_t nwatch, capwatch;
	/* Frames built for one destination and not yet sent: a burst unit
	 * (port.c, fab.h), sent at port_flush. */
	struct {
		uint32_t dst, n;
		uint32_t idx[NIC_UNIT_MAX], len[NIC_UNIT_MAX];
	} unit;
	/* The frame being dispatched (port.c), which qpio.c may keep. */
	struct nic_rx_batch rxb;
	uint32_t rx_idx;
	const uint8_t *rx_data; /* its bytes: only payloads inside may be kept */
	uint32_t rx_len;
	bool rx_keepable, rx_kept;
};

/* ctx.c */
/* by_group: the host is another user's (uid, gid), let in by --allow-group. */
int ctx_attach(struct nic *nic, int fd, uint32_t pid, bool by_group, uint32_t uid, uint32_t gid);
void ctx_detach(struct nic *nic, struct nic_ctx *c, const char *why);
unsigned ctx_poll(struct nic *nic, struct nic_ctx *c);
void ctx_set_sleeping(struct nic *nic, uint32_t v);
bool ctx_share_cpu(struct nic *nic);
struct nic_ctx *ctx_find(struct nic *nic, uint32_t id);

/* Post an event on a context's event queue (queued inside the NIC while the
 * queue is full, never lost). */
void ctx_event(struct nic *nic, struct nic_ctx *c, const struct nic_event *ev);
/* Raise the context's interrupt if its host waits. */
void ctx_interrupt(struct nic *nic, struct nic_ctx *c);
/* The invalidation of key, deferred for in-flight DMA, is complete. */
void ctx_drained(struct nic *nic, uint32_t key);
/* Read what waits on c's attach socket (at most max messages): shared-buffer
 * descriptors are queued, anything else breaks the protocol.  1 if a
 * message was taken and more may wait, 0 if none waits, -ECONNRESET when
 * the host has gone. */
int ctx_sock_read(struct nic *nic, struct nic_ctx *c, unsigned max);
/* SHM_MAP and SHM_UNMAP, for cmd_execute (cmd_env.shm_exec). */
uint16_t ctx_shm_exec(void *nic, void *ctx, const struct nic_cmd *cmd);
/* REG_MR's check that the kernel lets this NIC reach the host's memory
 * (cmd_env.reg_check): NIC_STATUS_OK or NIC_STATUS_NO_DMA. */
uint16_t ctx_reg_check(void *nic, void *ctx, uint64_t va);

/* Fold the timer t (0: none) into *deadline, the earliest timer of a pass
 * over the NIC (0: none). */
static inline void nic_deadline_min(uint64_t *deadline, uint64_t t)
{
	if (t && (!*deadline || t < *deadline))
		*deadline = t;
}

/* conn.c: QP and connection commands (cmd_env.conn_exec), and CM messages. */
uint16_t conn_exec(void *nic, void *ctx, const struct nic_cmd *cmd, uint32_t *key);
int conn_init(struct nic *nic);
void conn_fini(struct nic *nic);
void conn_rx(struct nic *nic, const struct fab_pkt *pkt);
unsigned conn_timers(struct nic *nic, uint64_t now, uint64_t *deadline);
/* A context is going away: its listeners and pending requests go too. */
void conn_ctx_gone(struct nic *nic, struct nic_ctx *c);
/* The process of a peer NIC ended: every QP watching it through w is
 * closed, NIC_EV_DISCONNECTED with status NIC_STATUS_UNREACHABLE. */
void conn_peer_gone(struct nic *nic, const struct port_watch *w);
/* Tear a QP down: disconnect it if connected, flush, free. */
void conn_qp_destroy(struct nic *nic, struct qp *qp);
/* A packet from qp's peer came on qp: a passive QP stops waiting for the RTU. */
void conn_established(struct nic *nic, struct qp *qp);

/* qpio.c: the data path of a QP. */
void qpio_start(struct nic *nic, struct qp *qp, uint32_t peer_addr, uint32_t peer_qpn,
		uint32_t sq_psn, uint32_t rq_psn);
unsigned qpio_poll(struct nic *nic, struct qp *qp, uint64_t now, uint64_t *deadline);
void qpio_rx(struct nic *nic, struct qp *qp, const struct fab_pkt *pkt, uint64_t now);
/* Stop a QP: state (ERROR or CLOSED), every work request completes flushed. */
void qpio_stop(struct nic *nic, struct qp *qp, enum nic_qp_state state, uint16_t status);
/* Write the received payloads held for a batch to host memory (end of a pass). */
void qpio_rx_flush(struct nic *nic);
/* Write now the payloads held for a QP of context c (before a shared buffer
 * of c is unmapped); a failure fails the QP at the engine's next pass. */
void qpio_rx_write_ctx(struct nic *nic, const struct nic_ctx *c);
/* Add the QP engine's counters to st. */
void qpio_account(struct nic *nic, const struct qp *qp, struct nic_counters *st);

/* port.c: the fabric port. */
int port_open(struct nic *nic);
void port_close(struct nic *nic);
/* Receive and handle a bounded batch of due frames; returns how many. */
unsigned port_poll(struct nic *nic);
/*
 * A peer NIC's death, seen at once on the shared-memory fabric: qp, just
 * connected, watches the process that owns its peer's port (a pidfd in the
 * NIC's epoll set, one per peer process, shared by every QP that runs to
 * it); port_peer_unwatch when it stops.  When that process ends,
 * conn_peer_gone closes every QP that watched it.  A peer reached over UDP,
 * or a fabric where the pidfd cannot be had, is not watched: the retry
 * budget finds it (docs/transport.md, section 6).
 */
struct port_watch;
void port_peer_watch(struct nic *nic, struct qp *qp);
void port_peer_unwatch(struct nic *nic, struct qp *qp);
/* Its pidfd is readable (the peer's process ended); w may be freed. */
void port_peer_event(struct nic *nic, struct port_watch *w);
/* Whether src is the source of one of nic's watches now (for events fetched
 * before it went: src's address only is compared). */
bool port_src_is_watch(const struct nic *nic, const struct nic_src *src);
/* A free frame (-ENOBUFS, -EHOSTUNREACH without a fabric), counted; ctl:
 * for a packet without payload, which may take the frames kept for those
 * (fab_frame_get_ctl). */
int port_frame_get(struct nic *nic, uint32_t *idx, uint8_t **data, bool ctl);
void port_frame_put(struct nic *nic, uint32_t idx);
/* Send a frame taken with port_frame_get (it is the fabric's after), counted. */
int port_send(struct nic *nic, uint32_t idx, uint32_t len, uint32_t dst);
/*
 * Burst units (fab.h).  port_unit_join: whether the next frame to dst may
 * join the unit being built (sending first one built for elsewhere): it
 * then goes without its ICRC (FAB_PKT_NO_ICRC) to port_unit_add, which
 * cannot fail.  port_flush sends the unit; every other send does so first,
 * so frames keep their order, and the NIC flushes before it waits.
 */
bool port_unit_join(struct nic *nic, uint32_t dst);
/* The largest path MTU frames to dst can use (fab_port_path_mtu). */
uint32_t port_path_mtu(struct nic *nic, uint32_t dst);
void port_unit_add(struct nic *nic, uint32_t idx, uint32_t len);
void port_flush(struct nic *nic);
/* Send a frame built by fill() (which returns its length or a negative errno). */
int port_xmit(struct nic *nic, uint32_t dst, int (*fill)(void *arg, uint8_t *frame, size_t cap),
	      void *arg);

/* mgmt.c */
/* conn has said hello as a management client: set its state up (0 or -ENOMEM). */
int mgmt_start(struct nic *nic, struct nic_conn *conn);
/* Serve the epoll events of a management client; may close it. */
void mgmt_serve(struct nic *nic, struct nic_conn *conn, uint32_t events);
/* A request of n bytes (as received, MSG_TRUNC: the length sent) that the
 * NIC answers: the size of one, the magic, zero reserved fields.  Anything
 * else closes the session.  Any op passes: an unknown one is answered
 * NIC_STATUS_BAD_OPCODE. */
bool mgmt_req_valid(const struct nic_mgmt_req *req, size_t n);
/* Free a management client's state (nic_conn_close). */
void mgmt_free(struct nic_mgmt_client *m);

/* nic.c */
uint64_t nic_now_ns(void);
/*
 * Whether to write one more line of a rate-limited kind (struct
 * nic_ratelog).  When it is, note gets what the line should end with (empty,
 * or how many were held back before it, or that the next ones will be);
 * note is always a string.
 */
bool nic_ratelog(struct nic_ratelog *r, char *note, size_t size);
int nic_epoll_add(struct nic *nic, int fd, uint32_t events, struct nic_src *src);
void nic_conn_close(struct nic *nic, struct nic_conn *conn);
/* A descriptor, or a place among NIC_CONN_MAX connections, was freed: a
 * listening socket paused for lack of them listens again. */
void nic_fd_freed(struct nic *nic);
/* Send a hello reply with no descriptors (refusals, management). */
int nic_send_reply(struct nic *nic, int fd, uint16_t status, uint32_t ctx_id);
void nic_fill_reply(struct nic *nic, struct nic_hello_reply *r, uint16_t status, uint32_t ctx_id);

#endif /* NICSIM_NIC_PRIV_H */
