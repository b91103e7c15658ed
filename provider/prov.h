/*
 * The provider's private state and the functions its files share.
 *
 * One process-wide instance (struct prov, see startup.c for why) holds the
 * handle tables, the NICs this process is attached to, the registrations and
 * the page pin counts.  Two kinds of lock guard it:
 *
 *   prov.lock   the instance: handle tables, socket records' fields marked
 *               "prov.lock", registrations, the NIC list.  Every SPI entry
 *               point takes it; a call that blocks (WSPAccept, a blocking
 *               WSPConnect, WSPGetOverlappedResult with fWait TRUE, a send
 *               or receive without an overlapped structure) drops it while
 *               it waits.  Commands to a NIC are issued only under it, so a
 *               context has at most one command in flight (driver.h).
 *   nic->lock   one per attached NIC context: its rings, its QP slots, the
 *               operations in flight on them, its listeners, and the fields
 *               of the sockets bound to it marked "nic->lock" (connection
 *               state, event selection).  The progress engine (progress.c)
 *               runs under it alone, from any thread that waits or polls.
 *
 * Lock order: prov.lock, then nic->lock, then the driver's own command lock.
 * Nothing takes prov.lock while holding a nic->lock.
 *
 * Objects and their links:
 *   prov_sock   a SOCKET handle (slot table "socks").  Bound: holds one
 *               reference on a prov_nic.  Lists the local-registration
 *               instances (prov_inst) and the RDMA exposures (prov_win) it
 *               holds; closing the socket releases them all.  Connected:
 *               owns one QP slot of its NIC's context (prov_qp).
 *   prov_nic    one attachment (struct nic_host) per NIC per process, shared
 *               by every socket bound to that NIC; detached when the last
 *               socket (or waiter) lets go.  A NIC that stops answering is
 *               marked down: every operation in flight completes with
 *               -ENETDOWN and the attachment is shut down at once.
 *   prov_qp     one QP slot of a context: the QP number, its state, and the
 *               operations posted on its send and receive queues, in order.
 *   prov_mr     one registration entry (cache.c): the pages pinned once and,
 *               while registered, the TPT key.  Hashed by (nic, va, len,
 *               flags, kind) so that the same buffer registered again is
 *               found (R2, R7), indexed by virtual range for invalidation
 *               (R9, R10), and kept unused on an LRU when caching is on.
 *               A local region's slot handle is the WSPRegisterMemory handle.
 *   prov_inst   how many instances of one local region one socket holds, and
 *               how many of that socket's transfers use it (R1); the handle
 *               is valid on a socket only while it holds one (R3).  At 0 the
 *               instance stays, idle, to say the socket cached it (R11).
 *   prov_win    one socket's exposure of a buffer to its peer: a memory
 *               window over a shared region (NIC with windows) or a region
 *               of its own (NIC without); hashed by (socket, va, len, flags).
 *
 * Errors inside the provider are 0 or a negative errno; errmap.c turns them
 * into WSA codes at the SPI boundary and nowhere else.  A few errnos have a
 * provider meaning: PROV_E* below.
 */
#ifndef PROV_H
#define PROV_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "ivtree.h"
#include "nicsim_host.h"
#include "nicsim_provider.h"
#include "pin.h"
#include "slot.h"
#include "ws2san.h"

#define PROV_ENOTINIT ENXIO      /* provider not started: WSANOTINITIALISED */
#define PROV_EVERSION ERANGE     /* version below 2.2: WSAVERNOTSUPPORTED */
#define PROV_EINCOMPLETE ENODATA /* overlapped operation pending: WSA_IO_INCOMPLETE */
#define PROV_ETRYAGAIN ENOMSG    /* accept condition said CF_DEFER: WSATRY_AGAIN */

#define PROV_DIR_MAX 108 /* a socket path must fit sockaddr_un anyway */

/* Largest single transfer (SO_MAX_RDMA_SIZE), also capped by the NIC's max_reg_len. */
#define PROV_MAX_XFER (1u << 30)
#define PROV_RDMA_THRESHOLD_DEFAULT (64u << 10)
/*
 * Waiting: spin before sleeping, and the longest single sleep before a
 * re-check.  A send/receive round trip between two hosts takes 20-30 us here
 * and a cross-core wake-up 30 us each way, so a waiter spins (yielding) a
 * little longer than one round trip, as long as the NIC spins (nicsimd
 * --spin-us): measured with nicsim-pingpong, 8 B half round trip median
 * 12-14 us and p99 75-125 us with 20 us of spin, 8-12 us and p99 30-50 us
 * with 50 us.
 */
#define PROV_SPIN_NS 50000u
#define PROV_WAIT_SLICE_MS 1000
/* A thread that polls without waiting checks that the NIC lives this often. */
#define PROV_CHECK_NS (50u * 1000000u)
/* Bounds on connection set-up beyond the NIC's own timers. */
#define PROV_CONNECT_TIMEOUT_MS 60000
#define PROV_ACCEPT_TIMEOUT_MS 10000

#define prov_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

struct prov_sock;
struct prov_inst;
struct prov_win;

/* A command in flight: the progress engine fills cpl and err. */
struct prov_cmd {
	struct nic_cmd cmd;
	struct nic_cpl cpl;
	int err; /* -EAGAIN until the completion came; 0, or -EPROTO for a broken ring */
};

enum prov_op_kind {
	PROV_OP_SEND = 1,
	PROV_OP_RECV = 2,
	PROV_OP_WRITE = 3,
	PROV_OP_READ = 4,
};

/* One posted work request and the overlapped operation it completes. */
struct prov_op {
	LPWSAOVERLAPPED ov;
	int event;      /* the eventfd to signal at completion, or -1 */
	uint32_t bytes; /* send and RDMA: the request's length */
	uint8_t kind;   /* enum prov_op_kind */
	uint8_t nref;
	struct prov_inst *ref[NIC_MAX_SGE]; /* registrations whose in-flight count it holds */
};

enum prov_qp_state {
	PROV_QP_FREE = 0,       /* slot unused, or reserved while CREATE_QP runs */
	PROV_QP_INIT = 1,       /* created, not connected (also after a failed connect) */
	PROV_QP_CONNECTING = 2, /* CONNECT sent: CONNECTED or CONN_FAILED will follow */
	PROV_QP_ACCEPTING = 3,  /* ACCEPT sent: CONNECTED or CONN_FAILED will follow */
	PROV_QP_CONNECTED = 4,
	PROV_QP_DEAD = 5, /* disconnected or in error: posts fail with the socket's error */
};

/* A QP slot of a context; guarded by nic->lock. */
struct prov_qp {
	struct prov_sock *sock; /* owner; NULL while the slot is free */
	uint32_t slot;
	uint32_t qpn;      /* 0 until CREATE_QP completed */
	uint32_t peer_qpn; /* the peer's QP number, once connected */
	uint32_t state;    /* enum prov_qp_state */
	bool closing;      /* the socket is closing: completions are dropped */
	/* The peer disconnected (its DREQ came): it needs no disconnect from us. */
	bool peer_gone;
	/* The QP failed while connected: a DISCONNECT must tell the peer (progress.c). */
	bool disc_want;
	/* Free-running counts of work requests posted and completed, per queue. */
	uint32_t sq_post, sq_done, rq_post, rq_done;
	uint32_t reads;     /* RDMA reads outstanding: sends are fenced behind them */
	struct prov_op *sq; /* NIC_SQ_DEPTH operations, then NIC_RQ_DEPTH for rq */
	struct prov_op *rq;
};

struct prov_nic {
	struct prov_nic *next; /* prov.lock */
	struct nic_host *host;
	uint32_t addr; /* IPv4, network byte order */
	uint32_t caps; /* NIC_CAP_* */
	uint64_t max_reg_len;
	uint32_t users; /* prov.lock: sockets bound, plus threads waiting */
	/* The registration cache's counters for this NIC, in the context
	 * header (host-owned): written under prov.lock, read by the NIC. */
	struct nic_host_cache_stats *hstats;
	uint32_t down; /* atomic: stopped answering, every command fails */

	pthread_mutex_t lock; /* the context's mutex; guards everything below */
	pthread_cond_t cond;  /* CLOCK_MONOTONIC; broadcast after any progress */
	bool sleeping;        /* a thread sleeps in nic_host_await() */
	uint32_t wake_seq;    /* atomic: bumped to wake the sleeper */
	uint32_t slots_used;  /* bit i: slot i holds a QP whose CQ is drained */
	struct prov_qp qp[NIC_QP_SLOTS];
	struct prov_sock *listeners;
	struct prov_cmd *cmd; /* the command in flight, if any */
	/* The progress engine's own command (a DISCONNECT owed to a peer),
	 * in flight when cmd points to it; see prov_nic_bg_next(). */
	struct prov_cmd bg;
	uint64_t next_check_ns; /* when a poller next checks that the NIC lives */
	/* The event thread (progress.c) serves event objects nobody waits in the
	 * provider for; it watches only while ev_socks or ev_ops is not 0. */
	uint32_t ev_socks; /* bound sockets with WSPEventSelect interest */
	uint32_t ev_ops;   /* operations in flight with an hEvent */
	bool ev_watch;     /* a connection was established: watch for its end */
	bool ev_started, ev_stop;
	int ev_kick; /* eventfd: wakes the event thread while it watches, -1: none */
	pthread_t ev_thread;
};

enum prov_sock_state {
	PROV_SK_IDLE = 0,
	PROV_SK_LISTENING = 1,
	PROV_SK_CONNECTING = 2,
	PROV_SK_CONNECTED = 3,
	PROV_SK_DEAD = 4, /* was connected: disconnected, in error, or its NIC is down */
};

/* A connection request waiting for WSPAccept. */
struct prov_req {
	uint64_t conn_id;
	uint32_t peer_addr; /* network byte order */
	uint16_t peer_port; /* host byte order, as on the event queue */
	uint16_t local_port;
};

struct prov_sock {
	struct prov_slot_hdr slot;
	/* prov.lock */
	bool bound;
	struct sockaddr_in local;
	struct prov_nic *nic;        /* set when bound */
	struct prov_inst *insts;     /* local registration instances held */
	struct prov_inst *idle;      /* instances of cached entries it registered (R11) */
	struct prov_win *wins;       /* RDMA exposures */
	struct prov_inst *last_inst; /* last registration a send or receive found */
	uint32_t rdma_threshold;     /* SO_RDMA_THRESHOLD_SIZE */
	/* nic->lock once bound (prov.lock alone before); qp and peer are written
	 * under both locks and may be read under either. */
	uint32_t state; /* enum prov_sock_state */
	int err;        /* why a connect failed, or why the connection died */
	bool closing;
	bool nonblocking;
	struct prov_qp *qp;
	struct sockaddr_in peer;
	uint16_t backlog;
	uint32_t req_head, req_count;
	struct prov_req reqs[NIC_EQ_DEPTH];
	struct prov_sock *lnext; /* in nic->listeners */
	WSAEVENT event;          /* WSPEventSelect */
	long ev_mask, ev_seen;
	int ev_err[FD_MAX_EVENTS];
	bool ev_counted; /* counted in nic->ev_socks */
	/* nic->lock: the first failure that broke the connection (diag.c). */
	bool broke_set;
	bool broke_shown; /* NICSIM_DEBUG: printed */
	uint8_t broke_op; /* enum prov_op_kind of the failed operation, 0: none */
	struct nicsim_socket_error broke;
};

enum prov_mr_kind {
	PROV_MR_LOCAL = 1,   /* WSPRegisterMemory, shared per process and NIC */
	PROV_MR_RDMA = 2,    /* windows are bound to it, shared per process and NIC */
	PROV_MR_PRIVATE = 3, /* one exposure's own region (NIC without windows) */
};

/*
 * A registration entry (see cache.c for its life): the pinned pages of
 * [va, va + len) and, while registered, the NIC's key.  users counts who
 * uses it now; tracked is the cache's own reference, held while the entry is
 * in prov.mr_hash, the interval index and the monitor's filter.  An entry
 * nobody uses stays tracked (cached, on the LRU) when caching is on, and is
 * released otherwise.  An entry the memory monitor or the cache callback
 * invalidated while in use is no longer tracked, registered or pinned: its
 * users still hold its handle, and the last of them frees it.
 */
struct prov_mr {
	struct prov_slot_hdr slot;
	struct prov_hnode hnode;             /* in prov.mr_hash while tracked */
	struct prov_ivnode ivn;              /* in prov.cache.index while tracked */
	struct prov_mr *lru_prev, *lru_next; /* on prov.cache's LRU while tracked and unused */
	struct prov_nic *nic;
	uint64_t va, len;
	uint32_t flags;  /* MEM_* as registered: part of the key */
	uint32_t kind;   /* enum prov_mr_kind */
	uint32_t access; /* NIC_ACCESS_* */
	uint32_t key;    /* TPT key while registered */
	uint32_t users;  /* LOCAL: instances; RDMA: windows; PRIVATE: 1 while exposed */
	bool tracked;    /* the cache's reference */
	bool registered; /* key is live at the NIC */
	bool pinned;     /* holds one pin of each of its pages */
	bool lru;        /* on the LRU */
	/* Per socket that registered it: LOCAL instances (count 0: the socket's
	 * cached, idle instance); RDMA and PRIVATE: idle instances only, the
	 * exposures themselves being the sockets' prov_win records. */
	struct prov_inst *insts;
	struct prov_win *wins; /* RDMA: the windows bound over it */
};

struct prov_inst {
	struct prov_mr *mr;
	struct prov_sock *sock;
	uint32_t count;    /* 0: idle, on sk->idle; else on sk->insts */
	uint32_t inflight; /* this socket's transfers using it (R1): atomic, see register.c */
	struct prov_inst *mr_next;
	struct prov_inst *sk_prev, *sk_next;
};

struct prov_win {
	struct prov_slot_hdr slot;
	struct prov_hnode hnode; /* in prov.win_hash */
	struct prov_sock *sock;
	struct prov_mr *mr;
	uint64_t va, len;
	uint32_t flags;  /* MEM_* as registered */
	uint32_t mw_key; /* the window's current key (= rkey); 0 without windows */
	uint32_t rkey;
	uint32_t refs;
	bool dead; /* invalidated with its buffer: no NIC state left, only the record */
	struct prov_win *sk_prev, *sk_next;
	struct prov_win *mr_next; /* in mr->wins (windows only) */
};

/*
 * The registration cache (cache.c, docs/registration-cache.md): every
 * tracked entry by virtual range, the unused ones in LRU order, the limits
 * and the counters.  Guarded by prov.lock.
 */
struct prov_cache {
	bool enabled;         /* unused entries are kept (configuration and monitor) */
	bool warned;          /* the "caching off" warning was printed */
	uint64_t max_entries; /* tracked entries beyond which unused ones are evicted */
	uint64_t max_bytes;   /* likewise for the bytes they cover */
	struct prov_ivtree index;
	struct prov_mr *lru_head, *lru_tail; /* unused entries, least recently used first */
	struct nic_host_cache_stats stats;   /* process-wide; per NIC in each context header */
};

/* A buffer the application shares with its NICs (buffers.c). */
struct prov_buf {
	struct prov_buf *next; /* prov.lock */
	void *va;
	size_t len;
	int fd; /* the memfd, kept to map the buffer into NICs attached later */
};

struct prov {
	pthread_mutex_t lock;
	uint32_t waiters;       /* threads waiting with the lock dropped */
	bool stopping;          /* the last WSPCleanup waits for them */
	uint32_t starts;        /* WSPStartupEx calls not yet undone by WSPCleanup */
	uint32_t epoch;         /* first starts so far: seeds handle generations */
	char dir[PROV_DIR_MAX]; /* run directory; "" if it could not be resolved */
	struct prov_nic *nics;
	struct prov_slots socks, mrs, wins;
	struct prov_hash mr_hash, win_hash;
	struct prov_inst *inst_free; /* recycled instance records */
	struct prov_pins pins;
	struct prov_cache cache;
	struct prov_buf *bufs; /* nicsim_buffer_alloc's, until nicsim_buffer_free */
};

/* startup.c: the instance, locked; unlock it when done. */
struct prov *prov_lock(void);
void prov_unlock(struct prov *p);
/*
 * How many times this thread holds prov.lock (or runs the provider's own
 * event thread): the memory monitor's interposed functions do nothing while
 * it is not 0, since the provider never gives back memory an application
 * registered.
 */
extern __thread unsigned prov_tls_depth __attribute__((tls_model("initial-exec")));
/* The instance without locking it (the memory monitor's fast path). */
struct prov *prov_instance_get(void);

/* cache.c: entries, the LRU, the limits, invalidation (see the top of cache.c). */
/* Read the configuration (environment) and start the monitor: caching on or off. */
void prov_cache_start(struct prov *p);
/* Release every entry (WSPCleanup, after the sockets closed). */
void prov_cache_flush(struct prov *p);
/* Start tracking a new entry (hash, index, monitor filter, counters). */
void prov_cache_track(struct prov *p, struct prov_mr *mr);
/* Count a registration that had to pin and register. */
void prov_cache_miss(struct prov *p, struct prov_nic *nic);
/* A tracked entry found for a registration: one more user (off the LRU at 0 -> 1). */
void prov_cache_use(struct prov *p, struct prov_mr *mr, bool hit);
/*
 * The last user let go of mr (users is 0 now): keep it on the LRU when it is
 * tracked and caching is on, else release it (dead entries: free the record).
 */
void prov_cache_unuse(struct prov *p, struct prov_mr *mr);
/*
 * Release entries nobody uses, least recently used first, to make room:
 * PROV_EVICT_TPT one that holds a TPT entry of nic, PROV_EVICT_PINS one
 * holding pins.  True if one was released.
 */
#define PROV_EVICT_TPT 1
#define PROV_EVICT_PINS 2
bool prov_cache_evict(struct prov *p, struct prov_nic *nic, int need);
/*
 * Drop every entry overlapping [va, va + len) (R9, R10): entries nobody uses
 * are released, entries in use lose their windows, NIC registration and pins
 * and wait for their users.  0, -ENOENT (nothing there), -EFAULT (a NIC
 * could not confirm a release).
 */
int prov_cache_invalidate(struct prov *p, uint64_t va, uint64_t len);
/* R11: release the cached entries a closing socket registered. */
void prov_cache_release_sock(struct prov *p, struct prov_sock *sk);
/* Free mr's record (no NIC work, no pins held); unlinks its idle instances. */
void prov_mr_destroy(struct prov *p, struct prov_mr *mr);
/* Publish the pinned bytes to every NIC's context header after pins changed. */
void prov_cache_pins_changed(struct prov *p);
/* A NIC was attached: start publishing its counters in its context header. */
void prov_cache_attach(struct prov *p, struct prov_nic *nic);

/* buffers.c: a NIC just attached maps every shared buffer (prov.lock held). */
void prov_bufs_attach(struct prov *p, struct prov_nic *nic);
/*
 * buffers.c: the application is about to unmap or replace [addr, addr + len)
 * (prov.lock held): every shared buffer overlapping it stops being one.
 */
void prov_bufs_gone(struct prov *p, uintptr_t addr, size_t len);

/* monitor.c: the memory monitor (docs/registration-cache.md). */
#define PROV_MON_UNMAP 0x1u /* munmap, mremap, madvise, mmap MAP_FIXED, brk, sbrk */
#define PROV_MON_FREE 0x2u  /* free and realloc of malloc blocks */
/*
 * Start the monitor once per process: 0 with what it sees in *flags, or
 * -ENOSYS with the reason in why (the cache must then stay off).
 */
int prov_mon_start(unsigned *flags, char *why, size_t size);
/* The monitor's filter: ranges registrations and shared buffers cover
 * (prov.lock held). */
void prov_mon_add(uint64_t va, uint64_t len);
void prov_mon_del(uint64_t va, uint64_t len);
/* In a forked child: nothing is registered there. */
void prov_mon_reset(void);

/* errmap.c: the one place where errnos become WSA codes. */
int prov_wsa_error(int err);
/* Report err (negative errno) through lpErrno (if not NULL); SOCKET_ERROR. */
int prov_fail(int err, LPINT lpErrno);
/* What a work completion's status means inside the provider (0 or -errno). */
int prov_wc_errno(unsigned status);
/* What a CONN_FAILED event's status means for the connecting socket. */
int prov_conn_errno(unsigned status);

/*
 * diag.c: why connections broke, and the diagnostic output.  prov_debug is
 * NICSIM_DEBUG=1, read once as the library loads and never written again;
 * PROV_DBG prints a "nicsimsp: " line on stderr when it is set, at the cost
 * of one test when it is not.
 */
extern bool prov_debug;
void prov_dbg_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define PROV_DBG(...)                                \
	do {                                         \
		if (__builtin_expect(prov_debug, 0)) \
			prov_dbg_print(__VA_ARGS__); \
	} while (0)
/* addr (network order) as a dotted quad in buf. */
const char *prov_addr_str(uint32_t addr, char buf[16]);
/* The addresses of the NICs in dir, as a list for a message. */
void prov_dbg_addrs(const char *dir, char *buf, size_t size);
/* Say where the provider looks for NICs (dir, "" if none; refused: why not). */
void prov_dbg_run_dir(const char *dir, const char *refused);
/*
 * qp's connection failed with err (nic_status: the NIC's NIC_WC_* status, 0
 * for none; op: the enum prov_op_kind that failed, 0 for none): record it in
 * its socket if it is the first failure, or name the operation of the
 * failure recorded (nic->lock held).
 */
void prov_sock_broke(struct prov_qp *qp, int err, unsigned nic_status, unsigned op);
/* Say why a registration call failed with err. */
void prov_dbg_reg(const char *call, const void *buf, uint32_t len, uint32_t flags, int err);
/*
 * A registration on nic refused because mlock failed (the pin table's
 * lock_errno and lock_need): publish which limit, its value and the bytes
 * in question in nic's context header for `nicsim show hosts`, and say so
 * with NICSIM_DEBUG=1 (prov.lock held).
 */
void prov_refused_memlock(struct prov *p, struct prov_nic *nic, uint64_t va, uint64_t len);
/*
 * A registration on nic refused by the NIC with NIC_STATUS_NO_DMA: the
 * kernel does not let the NIC read this process's memory.  Publishes Yama's
 * ptrace_scope (if any) for `nicsim show hosts` and says which rule, and how
 * to change it, with NICSIM_DEBUG=1.
 */
void prov_refused_ptrace(struct prov_nic *nic, uint64_t va, uint64_t len);

/* socket.c */
/* The live socket s names: 0, -PROV_ENOTINIT, -ENOTSOCK. */
int prov_sock_get(struct prov *p, SOCKET s, struct prov_sock **out);
/* Bind sk to the NIC serving name's address (prov.lock held). */
int prov_sock_bind(struct prov *p, struct prov_sock *sk, const struct sockaddr_in *sin);
/* Close a socket with every documented effect (prov.lock held). */
void prov_sock_close(struct prov *p, struct prov_sock *sk);
/* Close every socket (WSPCleanup). */
void prov_sock_close_all(struct prov *p);
/*
 * Wait on sk's NIC until pred(arg) holds (called under nic->lock), the
 * deadline passes or the NIC goes down, with prov.lock dropped meanwhile:
 * prov.lock is held on entry and again on return.  sk may be closed while
 * the lock is dropped: the caller looks it up again by handle.  Returns what
 * prov_nic_wait() returns.
 */
int prov_sock_wait(struct prov *p, struct prov_sock *sk, int (*pred)(void *), void *arg,
		   uint64_t deadline);

/* nic.c */
/*
 * Attach to (or share the attachment of) the NIC serving addr (network
 * order; INADDR_ANY: the lowest address in the run directory) and take a
 * reference.  0, -EADDRNOTAVAIL, -ENETDOWN, -ENOBUFS.
 */
int prov_nic_get(struct prov *p, uint32_t addr, struct prov_nic **out);
/*
 * The addresses of the NICs whose sockets are in dir, ascending: up to max
 * in addrs, and how many there are in *count (which may exceed max).
 */
#define PROV_MAX_NICS 256
int prov_nic_addrs(const char *dir, uint32_t *addrs, size_t max, size_t *count);
void prov_nic_put(struct prov *p, struct prov_nic *nic);
static inline bool prov_nic_is_down(const struct prov_nic *nic)
{
	return __atomic_load_n(&nic->down, __ATOMIC_ACQUIRE) != 0;
}
/*
 * Run one command (prov.lock held, nic->lock not).  0 (and *key from the
 * completion if key is not NULL), the NIC's status as nic_status_errno()
 * maps it, or -ENETDOWN when the NIC does not answer (it is then marked
 * down, see prov_nic_fail).
 */
int prov_nic_exec(struct prov_nic *nic, struct nic_cmd *cmd, uint32_t *key);
/* SHM_MAP of the memfd fd at va (fd >= 0) or SHM_UNMAP of va, run as
 * prov_nic_exec runs a command (prov.lock held, nic->lock not): 0, the
 * NIC's status as an errno, or -ENETDOWN. */
int prov_nic_shm(struct prov_nic *nic, int fd, void *va, size_t len);
/*
 * The two halves of prov_nic_exec, to overlap a command with the caller's
 * own work (driver.h: one command in flight per NIC, under the provider
 * lock).  Once prov_nic_post() succeeded, prov_nic_cmd_wait() must follow
 * with the same pc, which must live until then: the progress engine takes
 * the completion into it, whichever thread runs it.
 */
int prov_nic_post(struct prov_nic *nic, struct prov_cmd *pc);
int prov_nic_cmd_wait(struct prov_nic *nic, struct prov_cmd *pc, uint32_t *key);
/* The largest single transfer on nic (SO_MAX_RDMA_SIZE). */
uint32_t prov_nic_max_xfer(const struct prov_nic *nic);

/* progress.c: the progress engine of a context (nic->lock held throughout). */
/*
 * Drain the event queue and the completion queue of every QP of the
 * context, and dispatch: completions to their overlapped operations, events
 * to the sockets (connect and accept waiters, event objects).  Marks the NIC
 * down if it broke the ring protocol.  Returns how many entries it took.
 */
int prov_progress(struct prov_nic *nic);
/*
 * If no command is in flight, post the DISCONNECT a QP that failed while
 * connected owes its peer, as the context's own command (nic->bg), whose
 * completion the progress engine takes.  A command of the provider lock's
 * holder waits for it first (prov_nic_post).  The NIC marked down if the
 * post fails.
 */
void prov_nic_bg_next(struct prov_nic *nic);
/* prov_progress(), then, if nothing came, check now and then that the NIC lives. */
void prov_poll(struct prov_nic *nic);
/*
 * Run progress until pred(arg) holds, sleeping in between: one thread per
 * context sleeps on the interrupt (spinning first if spin), the others on
 * nic->cond.  0 when pred held, -ETIMEDOUT at deadline (monotonic ns),
 * -ENETDOWN when the NIC is down (and pred does not hold).
 */
int prov_nic_wait(struct prov_nic *nic, int (*pred)(void *), void *arg, uint64_t deadline,
		  bool spin);
/* Wake every thread waiting on the context so that it re-checks its condition. */
void prov_nic_wake(struct prov_nic *nic);
/*
 * The NIC is gone or broke the protocol: mark it down, complete every
 * operation in flight with err, fail connections and connects, shut the
 * attachment down (the NIC, if alive, tears the context down) and wake
 * everyone.  Idempotent.
 */
void prov_nic_fail(struct prov_nic *nic, int err);
/* Complete op: bookkeeping of its overlapped structure, its event, its references. */
void prov_op_complete(struct prov_nic *nic, struct prov_qp *qp, struct prov_op *op, int err,
		      uint32_t bytes);
/* Complete every operation still posted on qp with err (close, NIC down). */
void prov_qp_abort(struct prov_nic *nic, struct prov_qp *qp, int err);
/* Record network event bit (FD_*_BIT) with err for sk if it selected it; signal its event. */
void prov_sock_notify(struct prov_nic *nic, struct prov_sock *sk, int bit, int err);
/* Count or uncount sk's event-select interest; starts the event thread when needed. */
void prov_sock_ev_update(struct prov_nic *nic, struct prov_sock *sk);
/* Note one more operation with an event in flight (starts the event thread if needed). */
void prov_ev_op_add(struct prov_nic *nic);
/* Stop and join the event thread and close its descriptor (nic->lock not held). */
void prov_ev_stop(struct prov_nic *nic);

/* conn.c */
/* Destroy sk's QP, if any, and free its slot (prov.lock held). */
void prov_qp_release(struct prov *p, struct prov_sock *sk);

/* mr.c: regions (see the top of mr.c). */
/* Checks shared by both registration calls: 0, -ENOTCONN, -EINVAL, -EFAULT, -ENETDOWN. */
int prov_check_buffer(const struct prov_sock *sk, const void *buf, uint32_t len, uint32_t flags);
/* The tracked entry of that key; of kind PRIVATE only an unused one. */
struct prov_mr *prov_mr_find(struct prov *p, const struct prov_nic *nic, uint64_t va, uint64_t len,
			     uint32_t flags, uint32_t kind);
/*
 * Pin, register and track a new entry with one user (a cache miss).  A full
 * TPT or a pin refused for lack of locked memory evicts unused entries and
 * tries again.  0, -ENOBUFS, -EFAULT, -ENETDOWN; nothing changed on failure.
 */
int prov_mr_create(struct prov *p, struct prov_nic *nic, uint64_t va, uint64_t len, uint32_t flags,
		   uint32_t kind, uint32_t access, bool nic_writes, struct prov_mr **out);
/* Register a pinned entry again (kind PRIVATE), evicting on a full TPT. */
int prov_mr_reg(struct prov *p, struct prov_mr *mr);
/*
 * Remove mr's NIC registration if it has one.  Unless force, a NIC that
 * refuses because the entry is in use gives -EBUSY with nothing changed.
 * Otherwise 0, or the NIC's error (the registration is then considered gone
 * with the context, as for a NIC that died).
 */
int prov_mr_dereg(struct prov *p, struct prov_mr *mr, bool force);
/* Release an entry nobody uses: NIC registration, pins, tracking, record. */
int prov_mr_release(struct prov *p, struct prov_mr *mr);
/* Drop mr's pins, if it holds them. */
void prov_mr_unpin(struct prov *p, struct prov_mr *mr);
/* The hash of mr's key in prov.mr_hash. */
uint64_t prov_mr_hash(const struct prov_mr *mr);

/* register.c, rdma.c */
int prov_reg_local(struct prov *p, struct prov_sock *sk, void *buf, uint32_t len, uint32_t flags,
		   uint64_t *handle);
int prov_dereg_local(struct prov *p, struct prov_sock *sk, uint64_t handle);
/* The instance of mr that sk holds now (count not 0), or NULL (R3). */
struct prov_inst *prov_inst_find(const struct prov_mr *mr, const struct prov_sock *sk);
/* Note that sk cached mr (an idle instance, for R11); best effort. */
void prov_inst_idle(struct prov *p, struct prov_mr *mr, struct prov_sock *sk);
/* Forget sk's idle instance of mr, if any. */
void prov_inst_unidle(struct prov *p, struct prov_mr *mr, struct prov_sock *sk);
/* Unlink and recycle an instance record. */
void prov_inst_unlink(struct prov *p, struct prov_inst *i);
int prov_reg_rdma(struct prov *p, struct prov_sock *sk, void *buf, uint32_t len, uint32_t flags,
		  struct nicsim_rdma_desc *desc);
int prov_dereg_rdma(struct prov *p, struct prov_sock *sk, const struct nicsim_rdma_desc *desc);
/* Release everything a closing socket holds, whatever the NIC says. */
void prov_sock_release_regs(struct prov *p, struct prov_sock *sk);
void prov_sock_release_wins(struct prov *p, struct prov_sock *sk);
/* Free the recycled instance records (WSPCleanup). */
void prov_reg_fini(struct prov *p);

/* sockopt.c: SIO_ADDRESS_LIST_QUERY for WSPIoctl. */
int prov_address_list(struct prov *p, void *out, DWORD out_len, LPDWORD returned);

#endif /* PROV_H */
