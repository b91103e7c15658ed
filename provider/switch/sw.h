/*
 * The switch's internals (libnicsimsw): one struct sw_sock per stream
 * socket, the engine that runs the session protocol over it (engine.c) and
 * the calls of nicsim_switch.h (sock.c), with the process-wide state
 * (lib.c).  The switch reaches the SAN provider only through the
 * procedure table WSPStartupEx filled and the extension functions WSPIoctl
 * handed out (sw_spi), as the Windows switch does.
 *
 * Locking: sw_lib.lock guards the descriptor table and every socket's
 * reference count; sk->lock guards everything else of a socket.  SPI calls
 * are made with sk->lock held; the provider never calls back.
 */
#ifndef NSW_SW_H
#define NSW_SW_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>

#include "nicsim_switch.h"
#include "nss_conn.h"
#include "ws2san.h"

#define SW_STAGING (1u << 20) /* the staging buffer's size, at least */
#define SW_ZC_MIN (64u << 10) /* a reader's room worth taking a chunk into directly */
#define SW_XFERS 2u           /* large transfers outstanding, each way */

/* The provider, as the switch sees it. */
struct sw_spi {
	WSPPROC_TABLE t;
	LPFN_WSPREGISTERMEMORY reg;
	LPFN_WSPDEREGISTERMEMORY dereg;
	LPFN_WSPREGISTERRDMAMEMORY reg_rdma;
	LPFN_WSPDEREGISTERRDMAMEMORY dereg_rdma;
	LPFN_WSPRDMAWRITE rdma_write;
	LPFN_WSPRDMAREAD rdma_read; /* NULL if the provider has none */
};
extern struct sw_spi sw_spi;

/* A control-message buffer and the operation that uses it. */
struct sw_slot {
	WSAOVERLAPPED ov;
	uint8_t *buf;
	bool busy; /* tx: a send is in flight; rx: posted, or held for the application */
};

/* Bytes waiting for the application, in stream order. */
struct sw_piece {
	const uint8_t *p;
	uint32_t len;
	int32_t slot; /* the receive slot holding them, or -1 - k: bounce buffer k */
};

enum sw_state { SW_NEW, SW_LISTEN, SW_CONNECTING, SW_CONNECTED, SW_DOWN };

struct sw_sock {
	int fd;    /* the application's handle: an eventfd it may poll */
	int evfd;  /* overlapped completions' event (hEvent) */
	int netfd; /* the SPI's event object of network events (WSPEventSelect) */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned refs;     /* under sw_lib.lock: calls inside, plus the table's */
	bool closing;      /* nsw_close began: no new reference */
	bool ready;        /* fd is signalled */
	enum sw_state st;  /* under lock from here on */
	SOCKET spi;        /* INVALID_SOCKET once closed */
	bool bound;        /* WSPBind done */
	bool accept_ready; /* FD_ACCEPT seen, WSPAccept not yet refused */
	bool connect_done; /* a non-blocking connect finished (SO_ERROR says how) */
	int so_error;      /* positive errno for SO_ERROR */
	int err;           /* the connection failed: every call gets this errno */
	int close_code;    /* FD_CLOSE's WSA code; -1 before FD_CLOSE */
	int post_err; /* a post found the connection ended (WSA code): writers get it, reap says how */
	bool rd_shut, wr_shut;
	bool want_write; /* a send would have blocked: signal fd when it may go */
	bool eof_told;   /* a recv returned end-of-file */
	bool zc_reader;  /* a reader waits with room to take a chunk straight */
	/* A reader's call took the completions' eventfd from the progress
	 * thread (direct) and, while direct_waiting, sleeps on it. */
	bool direct, direct_waiting;
	pthread_t direct_owner;
	/* The chunk that went straight into a reader's buffer (sw_zc_begin). */
	uint32_t zc_got; /* landed: its bytes, for the reader to count */
	HANDLE zc_h;     /* read path: the reader's buffer registered */

	/* Options. */
	bool nonblock;
	int sndbuf, rcvbuf;
	uint32_t threshold, max_rdma; /* as set; max_rdma 0: the SPI's */
	int path_pref;                /* 0, or NSW_PATH_WRITE: do not read as a sink */
	uint64_t rcvtimeo_ns, sndtimeo_ns;
	struct sockaddr_in local, peer;

	/* The connection. */
	struct nss_conn pc;
	uint32_t nrecv, nsend, rsize; /* receives and sends of rsize bytes each */
	uint8_t *ctl;                 /* (nrecv + nsend) * rsize bytes, registered */
	HANDLE ctl_h;
	struct sw_slot *rx, *tx;
	uint32_t *postq; /* rx slots in the order posted: completions come so */
	uint32_t pq_head, pq_len;
	struct sw_piece *dq; /* the application's bytes (ring of nrecv + 1) */
	uint32_t dq_head, dq_len;
	uint32_t out_max, in_max; /* the largest RDMA of each direction */
	uint32_t out_threshold;

	/* The in stream's large transfers (this side is the sink), oldest
	 * first, as their SRC_AVAILs came: the oldest one's head has gone to
	 * the application, each later one's waits in its receive until the
	 * transfers before it have landed (as many as this side's HELLO
	 * allows, SW_XFERS). */
	struct sw_in {
		uint32_t slot; /* the receive holding the head */
		const uint8_t *head;
		uint32_t head_len;
		uint64_t off;             /* the stream offset of the RDMA part */
		uint64_t len;             /* ... its bytes */
		uint64_t started, landed; /* ... given to chunks, and landed */
		uint16_t desc_len;        /* read path: the source's descriptor */
		uint8_t desc[NSS_DESC_MAX];
	} xin[SW_XFERS];
	uint32_t nin;
	/* The chunks moving, oldest first, each the stream's bytes after the
	 * one before: into a bounce buffer, or the first one straight into a
	 * reader's buffer.  They land in order. */
	struct sw_chunk {
		int bounce; /* the bounce buffer, or -1: the reader's */
		uint32_t len;
		bool op; /* read path: the read is in flight */
		WSAOVERLAPPED ov;
		bool sink_due; /* write path: its SINK_AVAIL is still to send */
		bool exposed;  /* write path: bdesc exposes the reader's buffer, for this chunk */
		uint8_t bdesc[NICSIM_RDMA_DESC_SIZE];
	} ch[SW_XFERS]; /* a ring: ch_head is the oldest */
	uint32_t ch_head, nch;
	uint32_t done_due; /* read path: bytes landed that no RD_DONE has covered yet */
	struct sw_bounce {
		uint8_t *buf;
		bool shared;  /* from nicsim_buffer_alloc */
		HANDLE h;     /* read path: registered for reading into */
		bool exposed; /* write path: desc exposes it, for the connection's life */
		uint8_t desc[NICSIM_RDMA_DESC_SIZE];
		bool busy; /* holds bytes the application has not taken */
	} bnc[SW_XFERS];
	uint32_t bounce_len;
	bool bnc_short; /* a second bounce buffer could not be had: one will do */

	/* The out stream's large transfers (this side is the source), oldest
	 * first: as many outstanding as the peer's HELLO allows, at most
	 * SW_XFERS (one staging buffer each). */
	struct sw_out {
		const uint8_t *rdma; /* the bytes after the inline head */
		uint32_t len;
		bool exposed; /* read path: desc exposes them (until the transfer ends) */
		uint8_t desc[NICSIM_RDMA_DESC_SIZE];
		HANDLE h;    /* write path: registered for the NIC to read */
		bool staged; /* from staging buffer stg, whose registration stays */
		int stg;
		uint64_t base; /* the stream offset of rdma[0] */
	} out[SW_XFERS];
	uint32_t nout;
	int out_err; /* a transfer failed: positive errno for a sender waiting on it */
	/* Write path: the peer's SINK_AVAILs, oldest first, in a ring (writes
	 * in flight keep their place): each one's write is posted as soon as
	 * it comes, and its WR_DONE goes, in order, once the write completed. */
	struct sw_sink {
		uint64_t off;
		uint32_t len;
		uint16_t desc_len;
		uint8_t desc[NSS_DESC_MAX];
		enum { SW_SINK_NEW, SW_SINK_WRITING, SW_SINK_WRITTEN } st;
		WSAOVERLAPPED ov;
	} sinks[NSS_XFERS_MAX];
	uint32_t sink_head, nsinks;

	/* Large sends that fit are copied to a staging buffer and sent from
	 * it (non-blocking ones always), one buffer per transfer outstanding;
	 * a copied send that cannot start yet (credit, a send slot) waits in
	 * pend.  They stay registered, and on the read path exposed, for the
	 * connection's life, as they hold only bytes already sent to the
	 * peer. */
	struct sw_stage {
		uint8_t *buf;
		bool shared; /* from nicsim_buffer_alloc */
		bool exposed;
		uint8_t desc[NICSIM_RDMA_DESC_SIZE];
		HANDLE h; /* write path: registered for the NIC to read */
	} stg[SW_XFERS];
	uint32_t staging_len;
	struct {
		bool on;       /* a copied send waits to start */
		int stg;       /* in this staging buffer */
		uint32_t head; /* its first bytes, which go inline */
		uint32_t len;  /* all its bytes */
		uint8_t head_bytes[4096];
	} pend;
	bool shutdown_due;
	bool abort_due;
	uint32_t abort_reason;

	struct nsw_stats stats;
};

/* engine.c */
int sw_conn_start(struct sw_sock *sk);
void sw_progress(struct sw_sock *sk);
void sw_event(struct sw_sock *sk, bool net);
void sw_fail(struct sw_sock *sk, int err);
void sw_abort(struct sw_sock *sk, uint32_t reason, int err);
void sw_teardown(struct sw_sock *sk);
void sw_consumed(struct sw_sock *sk, uint32_t bytes);
void sw_bounce_free(struct sw_sock *sk);
int sw_zc_begin(struct sw_sock *sk, uint8_t *dst, uint32_t len);
int sw_send_small(struct sw_sock *sk, const uint8_t *p, uint32_t len);
int sw_large_begin(struct sw_sock *sk, const uint8_t *p, uint32_t len);
int sw_large_copy(struct sw_sock *sk, const uint8_t *p, uint32_t len);
void sw_staging_free(struct sw_sock *sk);
uint32_t sw_staging_cap(const struct sw_sock *sk);
int sw_ctl_flush(struct sw_sock *sk);
bool sw_tx_free(struct sw_sock *sk);
void sw_update_ready(struct sw_sock *sk);
void sw_ready_reset(struct sw_sock *sk);
int sw_errno_of(int wsa);

/* lib.c */
int sw_init(void);
struct sw_sock *sw_get(int fd);
void sw_put(struct sw_sock *sk);
int sw_add(struct sw_sock *sk);
void sw_closing(struct sw_sock *sk);
void sw_watch(struct sw_sock *sk, bool on);
void sw_remove(struct sw_sock *sk);
uint64_t sw_now_ns(void);

#endif /* NSW_SW_H */
