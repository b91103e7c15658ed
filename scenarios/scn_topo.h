/*
 * The scenario runner's topology: a private run directory, the fabric that
 * joins the scenario's NICs, the nicsimd daemons, the capture, and the
 * processes the runner starts.  Private to scenarios/.
 *
 * The run directory is made with mkdtemp under $TMPDIR (or /tmp).  NICs are
 * started with the tool's `nicsim up --nic ADDR` code (cli_up, quiet), one
 * at a time: the first creates the fabric with the scenario's seed, so that
 * every link's seed is the fabric's hash of that seed and the link's two
 * addresses, and the others join it.  The daemons are the runner's
 * children; each is watched through a pidfd.
 *
 * The capture runs in a thread of the runner: it attaches to the fabric's
 * tap in lossless mode, writes every frame to capture.pcapng (with the fault
 * marks as comments), keeps a compact record of each frame for `wait
 * frame` and `expect frames`, writes decisions.log (one line per frame that
 * carries a fault mark: link, the frame's number on the link, the marks),
 * and wakes the event loop through an eventfd when it has handed out
 * frames.  It is a thread, not a child process, because a lossless capture
 * must drain the tap rings while the loop is blocked in poll.
 *
 * Errors: 0 or a negative errno; what went wrong is also written in the
 * `why` buffers the functions take.
 */
#ifndef SCN_TOPO_H
#define SCN_TOPO_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "nicsim_mgmt.h"
#include "timer_opts.h"

#define SCN_WHY_MAX 512

/* A NIC of the scenario and the options of its `nic` line. */
struct scn_nicd {
	const char *name;
	uint32_t addr; /* network order */
	char addr_str[16];
	char tpt_capacity[24]; /* nicsimd --tpt-capacity, "" if not given */
	char max_reg[24];      /* nicsimd --max-reg in bytes, "" if not given */
	bool no_mw;            /* the scenario's no-windows: nicsimd --no-mw */
	bool no_rdma_read;
	char timer[NIC_TIMER_OPTS]
		  [12]; /* nicsimd's timer options (timer_opts.h order), "" if not given */
	pid_t pid;      /* 0 when not running */
	int pidfd;      /* -1 when not running */
	bool stopped;
};

/* A frame seen on the wire, as `wait frame` and `expect frames` match it. */
struct scn_wire_frame {
	uint32_t src, dst; /* addresses, network order */
	uint32_t qpn;      /* BTH destination QP */
	uint32_t marks;    /* FAB_MARK_* */
	uint64_t link_seq;
	uint64_t ts_ns;   /* CLOCK_MONOTONIC */
	int16_t opcode;   /* BTH opcode, -1 if the headers were not captured */
	int16_t syndrome; /* AETH syndrome, -1 if the frame has no AETH */
	bool rx_drop;
};

#define SCN_CAPTURE_MAX (64ull << 20) /* capture.pcapng's default limit */

struct scn_capture {
	pthread_t thread;
	bool inited; /* lock initialised (scn_capture_start ran) */
	bool running;
	int wake_fd; /* eventfd: frames were added */
	pthread_mutex_t lock;
	struct scn_wire_frame *frames; /* under lock */
	size_t nframes, cap_frames;
	uint64_t not_captured;
	int err;         /* the thread's first error, under lock */
	uint64_t passes; /* passes over the rings made, under lock */
	atomic_int stop; /* set by the loop's thread: the capture thread ends */
	struct fab_cap *cap;
	FILE *pcapng, *decisions;
	int64_t mono_to_real;
	/* capture.pcapng stops growing at pcap_max bytes (about: records
	 * are counted as written); the frames not written are counted. */
	uint64_t pcap_max, pcap_bytes, pcap_cut;
	uint64_t pcap_cut_ns; /* when the first frame was left out (CLOCK_MONOTONIC) */
};

struct scn_topo {
	char dir[PATH_MAX]; /* the run directory; "" before it exists */
	uint64_t seed;
	uint64_t capture_max; /* capture.pcapng's limit in bytes; 0: SCN_CAPTURE_MAX */
	struct fab *fab;
	struct scn_nicd *nics;
	size_t nnics;
	struct scn_capture capture;
	unsigned fab_renewals; /* times a restart found a new fabric (scn_topo_nic_start) */
};

/* Make the private run directory (t->dir) below parent (NULL: $TMPDIR,
 * else /tmp).  Returns 0 or a negative errno. */
int scn_topo_make_dir(struct scn_topo *t, const char *parent, char *why, size_t size);

/* Whether the socket of a NIC at addr_str ("198.18.0.1") fits in a UNIX
 * socket's path below t->dir, made below parent as scn_topo_make_dir
 * says: 0, or -ENAMETOOLONG with why (which of TMPDIR and --dir is too
 * long, its limit, what to do). */
int scn_topo_nic_path_check(const struct scn_topo *t, const char *parent, const char *addr_str,
			    char *why, size_t size);

/*
 * Start NIC n in t->dir with its options (creating the fabric with t->seed
 * if it is the first NIC running), and open the fabric if t->fab is NULL.
 * A NIC started again while no other NIC runs (`restart nic` after every
 * NIC was killed) finds a new fabric, made by `nicsim up` with the same
 * seed: the runner then maps it instead of the old one, sets every link
 * between the scenario's NICs as it was on the old one (initial settings
 * and armed faults), moves the capture to its tap (same files, same list
 * of frames) and counts t->fab_renewals up; link counters and frame numbers
 * on the links start again from zero.  Returns 0 or a negative errno with
 * why filled in (the tool's own message goes to stderr).
 */
int scn_topo_nic_start(struct scn_topo *t, struct scn_nicd *n, char *why, size_t size);

/* Send sig to NIC n's daemon (SIGKILL, SIGSTOP, SIGCONT); a NIC killed is
 * reaped at once.  0, or -ESRCH if it is not running. */
int scn_topo_nic_signal(struct scn_topo *t, struct scn_nicd *n, int sig);

/* Whether NIC n's daemon has exited (reaping it); a poll on n->pidfd
 * becomes readable then. */
bool scn_topo_nic_reap(struct scn_nicd *n);

/* Find a NIC by name or address; NULL if none. */
struct scn_nicd *scn_topo_nic(struct scn_topo *t, const char *name);
struct scn_nicd *scn_topo_nic_addr(struct scn_topo *t, uint32_t addr);

/*
 * Apply link settings in the words of `nicsim link set` (after SRC DST) to
 * the directed link src -> dst.  Returns 0 or -EINVAL/-ENOENT with why.
 */
int scn_topo_link_set(struct scn_topo *t, uint32_t src, uint32_t dst, const char *const *words,
		      size_t nwords, char *why, size_t size);

/* Put link src -> dst back to the defaults, its seed kept (a heal).  A
 * missing fabric is not an error. */
int scn_topo_link_clear(struct scn_topo *t, uint32_t src, uint32_t dst);

/* The counters of link src -> dst, and the frames drop-nth matched. */
struct fab_link_stats;
int scn_topo_link_stats(struct scn_topo *t, uint32_t src, uint32_t dst, struct fab_link_stats *st);

/* Every counter of NIC n (struct nic_stats).  0 or the management
 * client's error, with why. */
int scn_topo_stats(struct scn_topo *t, struct scn_nicd *n, struct nic_stats *st, char *why,
		   size_t size);

/* The index of a counter of `nicsim stats` in struct nic_stats read as an
 * array of uint64_t, or -ENOENT. */
int scn_topo_counter_index(const char *name);

/* The NIC's TPT entries, or the faults it recorded (mgmt_client_list's
 * contract: *recs malloc'ed, the caller frees). */
int scn_topo_tpt(struct scn_topo *t, struct scn_nicd *n, struct nic_mgmt_tpt_rec **recs,
		 size_t *count);
int scn_topo_faults(struct scn_topo *t, struct scn_nicd *n, struct nic_mgmt_fault_rec **recs,
		    size_t *count);

/* Start the capture thread: capture.pcapng and decisions.log in t->dir. */
int scn_capture_start(struct scn_topo *t, char *why, size_t size);

/* Stop it after a last pass; the files are closed.  Idempotent. */
void scn_capture_stop(struct scn_topo *t);

/*
 * Copy the frames captured from index *from on into the caller's matcher:
 * fn is called for each with the lock held (it must not block); *from
 * moves past them.  Returns the number of frames visited.
 */
size_t scn_capture_scan(struct scn_topo *t, size_t *from,
			void (*fn)(void *arg, const struct scn_wire_frame *f), void *arg);

/* Wait (bounded) until the capture thread has made two passes over the
 * rings since the call: every frame sent before it is then in the list. */
void scn_capture_sync(struct scn_topo *t);

/* How many frames the capture has handed out so far. */
size_t scn_capture_count(struct scn_topo *t);

/* Clear the capture's eventfd after a wake-up. */
void scn_capture_ack(struct scn_topo *t);

/*
 * End everything the topology started, by pid: NICs SIGTERM then SIGKILL
 * after a bound, the capture stopped, the fabric closed; then the run
 * directory removed unless keep.  Safe on a half-built topology, and twice.
 */
void scn_topo_destroy(struct scn_topo *t, bool keep);

/* Remove a directory tree (the run directory).  0 or a negative errno. */
int scn_rmtree(const char *dir);

/* pidfd_open(2); -1 with errno where the kernel lacks it. */
int scn_pidfd_open(pid_t pid);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t scn_now_ns(void);

#endif /* SCN_TOPO_H */
