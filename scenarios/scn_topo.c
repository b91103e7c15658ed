/*
 * The scenario runner's topology: run directory, NICs, links, counters and
 * the capture thread (scn_topo.h).
 */

#include "scn_topo.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fab.h"
#include "fab_addr.h"
#include "fab_capture.h"
#include "fab_wire.h"
#include "mgmt_client.h"
#include "nicsim_rundir.h"
#include "pcapng.h"

#define NIC_TERM_MS 2000     /* a NIC's SIGTERM before SIGKILL at teardown */
#define MGMT_TIMEOUT_MS 2000 /* one counter, TPT or faults request */
#define CAP_IDLE_NS 1000000L /* the capture thread's sleep after an empty pass */
#define CAP_COPY_BYTES 65536u

uint64_t scn_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int scn_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* ---- The run directory ---------------------------------------------------- */

int scn_topo_make_dir(struct scn_topo *t, const char *parent, char *why, size_t size)
{
	const char *tmp = parent ? parent : getenv("TMPDIR");

	if (!tmp || !*tmp)
		tmp = "/tmp";
	if ((size_t)snprintf(t->dir, sizeof(t->dir), "%s/nicsim-scn-XXXXXX", tmp) >=
	    sizeof(t->dir)) {
		t->dir[0] = '\0';
		snprintf(why, size, "%s %s is too long for a run directory",
			 parent ? "--dir" : "TMPDIR", tmp);
		return -ENAMETOOLONG;
	}
	if (!mkdtemp(t->dir)) {
		int err = errno;

		snprintf(why, size, "cannot make a run directory under %s: %s (%s)", tmp,
			 strerror(err),
			 parent ? "make it, or name another with --dir" : "set TMPDIR");
		t->dir[0] = '\0';
		return -err;
	}
	return 0;
}

int scn_topo_nic_path_check(const struct scn_topo *t, const char *parent, const char *addr_str,
			    char *why, size_t size)
{
	const size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
	const char *tmp = parent ? parent : getenv("TMPDIR");
	size_t len = strlen(t->dir) + strlen("/nic-") + strlen(addr_str) + strlen(".sock");
	size_t room, plen;

	if (len <= max)
		return 0;
	if (!tmp || !*tmp)
		tmp = "/tmp";
	plen = strlen(tmp);
	/* What the parent may have: the socket's path without the parent. */
	room = len - plen < max ? max - (len - plen) : 0;
	snprintf(why, size,
		 "the NIC's socket %s/nic-%s.sock would be %zu bytes, over the %zu a UNIX "
		 "socket's path may have: %s %s is %zu bytes and may be at most %zu here; %s",
		 t->dir, addr_str, len, max, parent ? "--dir" : "TMPDIR", tmp, plen, room,
		 parent ? "name a shorter --dir" : "set TMPDIR to a shorter directory (e.g. /tmp)");
	return -ENAMETOOLONG;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(path) < 0 && errno != ENOENT ? -1 : 0;
	return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

int scn_rmtree(const char *dir)
{
	if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
		return errno ? -errno : -EIO;
	return 0;
}

/* ---- NICs ------------------------------------------------------------------- */

struct scn_nicd *scn_topo_nic(struct scn_topo *t, const char *name)
{
	for (size_t i = 0; i < t->nnics; i++)
		if (!strcmp(t->nics[i].name, name))
			return &t->nics[i];
	return NULL;
}

struct scn_nicd *scn_topo_nic_addr(struct scn_topo *t, uint32_t addr)
{
	for (size_t i = 0; i < t->nnics; i++)
		if (t->nics[i].addr == addr)
			return &t->nics[i];
	return NULL;
}

/* Whether a and b describe the same fabric segment (one creation). */
static bool same_fabric(struct fab *a, struct fab *b)
{
	struct fab_info ia, ib;

	return !fab_info(a, &ia) && !fab_info(b, &ib) && ia.created_ns == ib.created_ns &&
	       ia.creator_pid == ib.creator_pid && ia.seed == ib.seed;
}

static int cap_run(struct scn_topo *t, char *why, size_t size);
static void cap_halt(struct scn_capture *c);

/*
 * The fabric in t->dir is a new one (made when a NIC started while no NIC
 * ran): carry over the configuration of every link between the scenario's
 * NICs (the `link` lines and the faults armed), move the capture to the
 * new tap, and use the new mapping from now on.  The link counters and
 * frame numbers start again from zero.  0, or an error with why.
 */
static int fabric_renewed(struct scn_topo *t, struct fab *fresh, char *why, size_t size)
{
	struct fab_link_config cfg;
	bool capturing = t->capture.running;
	int rc;

	/* The NICs not started yet get their ports now, so that their links
	 * can be set (fab_port_claim); their `restart nic` joins them. */
	for (size_t i = 0; i < t->nnics; i++) {
		rc = fab_port_claim(fresh, t->nics[i].addr);
		if (rc) {
			snprintf(why, size, "cannot bind NIC %s on the new fabric: %s",
				 t->nics[i].name, strerror(-rc));
			fab_close(fresh);
			return rc;
		}
	}
	for (size_t i = 0; i < t->nnics; i++)
		for (size_t j = 0; j < t->nnics; j++) {
			if (i == j || fab_link_get(t->fab, t->nics[i].addr, t->nics[j].addr, &cfg))
				continue;
			rc =
			    fab_link_set(fresh, t->nics[i].addr, t->nics[j].addr, &cfg, FAB_LF_ALL);
			if (rc) {
				snprintf(why, size,
					 "cannot set link %s -> %s on the new fabric: %s",
					 t->nics[i].name, t->nics[j].name, strerror(-rc));
				fab_close(fresh);
				return rc;
			}
		}
	if (capturing)
		cap_halt(&t->capture);
	fab_close(t->fab);
	t->fab = fresh;
	t->fab_renewals++;
	return capturing ? cap_run(t, why, size) : 0;
}

int scn_topo_nic_start(struct scn_topo *t, struct scn_nicd *n, char *why, size_t size)
{
	char err[NIC_RUN_WHY_MAX];
	struct cli_opts o;
	struct fab *fresh;
	pid_t pid = 0;
	int rc;

	memset(&o, 0, sizeof(o));
	snprintf(o.dir, sizeof(o.dir), "%s", t->dir);
	o.nic_set = true;
	o.nic = n->addr;
	o.hosts = 1;
	o.tpt_capacity = n->tpt_capacity[0] ? n->tpt_capacity : NULL;
	o.max_reg = n->max_reg[0] ? n->max_reg : NULL;
	o.no_mw = n->no_mw;
	o.no_rdma_read = n->no_rdma_read;
	for (size_t i = 0; i < NIC_TIMER_OPTS; i++)
		o.timer[i] = n->timer[i][0] ? n->timer[i] : NULL;
	o.seed_set = true;
	o.seed = t->seed;
	o.quiet = true;
	o.up_pids = &pid;
	/* What `nicsim up` would say on stderr goes into the report, at the
	 * NIC's line; its log is named only when there is one. */
	cli_err_capture(err, sizeof(err));
	rc = cli_up(&o);
	cli_err_capture(NULL, 0);
	if (rc != CLI_EXIT_OK || pid <= 0) {
		char log[sizeof(t->dir) + 32];
		struct stat st;
		int len;

		snprintf(log, sizeof(log), "%s/nic-%s.log", t->dir, n->addr_str);
		len = snprintf(why, size, "NIC %s (%s) did not start: %s", n->name, n->addr_str,
			       err[0] ? err : "nicsim up failed");
		if (len >= 0 && (size_t)len < size && !stat(log, &st) && st.st_size > 0)
			snprintf(why + len, size - (size_t)len, " (its log: %s)", log);
		return -EIO;
	}
	n->pid = pid;
	n->stopped = false;
	n->pidfd = scn_pidfd_open(pid);
	if (n->pidfd < 0) {
		rc = -errno;
		snprintf(why, size, "pidfd_open of NIC %s: %s", n->name, strerror(errno));
		return rc;
	}
	/* The fabric as it is now: when no NIC was running, `nicsim up` made a
	 * new one in place of the one the runner has mapped. */
	rc = fab_open(t->dir, &fresh);
	if (rc) {
		snprintf(why, size, "cannot open the fabric in %s: %s", t->dir, strerror(-rc));
		return rc;
	}
	if (!t->fab) {
		t->fab = fresh;
		return 0;
	}
	if (same_fabric(t->fab, fresh)) {
		fab_close(fresh);
		return 0;
	}
	return fabric_renewed(t, fresh, why, size);
}

bool scn_topo_nic_reap(struct scn_nicd *n)
{
	int status;
	pid_t w;

	if (n->pid <= 0)
		return true;
	do
		w = waitpid(n->pid, &status, WNOHANG);
	while (w < 0 && errno == EINTR);
	if (w == 0)
		return false;
	n->pid = 0;
	if (n->pidfd >= 0)
		close(n->pidfd);
	n->pidfd = -1;
	return true;
}

/* Wait up to ms for the NIC to exit, on its pidfd. */
static bool nic_wait_exit(struct scn_nicd *n, int ms)
{
	struct pollfd p = {.fd = n->pidfd, .events = POLLIN};
	uint64_t deadline = scn_now_ns() + (uint64_t)ms * 1000000u;
	int64_t left;

	while (!scn_topo_nic_reap(n)) {
		left = (int64_t)(deadline - scn_now_ns()) / 1000000;
		if (left <= 0 || n->pidfd < 0)
			return false;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			return false;
	}
	return true;
}

int scn_topo_nic_signal(struct scn_topo *t, struct scn_nicd *n, int sig)
{
	(void)t;
	if (n->pid <= 0 || scn_topo_nic_reap(n))
		return -ESRCH;
	if (kill(n->pid, sig) < 0)
		return -errno;
	if (sig == SIGSTOP)
		n->stopped = true;
	else if (sig == SIGCONT)
		n->stopped = false;
	else if (sig == SIGKILL)
		nic_wait_exit(n, NIC_TERM_MS);
	return 0;
}

/* ---- Links ------------------------------------------------------------------ */

int scn_topo_link_set(struct scn_topo *t, uint32_t src, uint32_t dst, const char *const *words,
		      size_t nwords, char *why, size_t size)
{
	struct fab_link_config cfg;
	uint32_t fields = 0;
	char err[256];
	int rc;

	if (fab_link_parse(words, nwords, &cfg, &fields, err, sizeof(err))) {
		snprintf(why, size, "%s", err);
		return -EINVAL;
	}
	if (!t->fab) {
		snprintf(why, size, "no fabric is running");
		return -ENOENT;
	}
	rc = fab_link_set(t->fab, src, dst, &cfg, fields);
	if (rc)
		snprintf(why, size, "cannot change the link: %s", strerror(-rc));
	return rc;
}

int scn_topo_link_clear(struct scn_topo *t, uint32_t src, uint32_t dst)
{
	struct fab_link_config cfg;

	if (!t->fab)
		return 0;
	fab_link_config_default(&cfg);
	return fab_link_set(t->fab, src, dst, &cfg, FAB_LF_ALL & ~FAB_LF_SEED);
}

int scn_topo_link_stats(struct scn_topo *t, uint32_t src, uint32_t dst, struct fab_link_stats *st)
{
	if (!t->fab)
		return -ENOENT;
	return fab_link_stats(t->fab, src, dst, st);
}

/* ---- Management requests ------------------------------------------------------ */

static const char *const counter_names[] = {
#define SCN_X_NAME(name, desc) #name,
    NIC_STATS(SCN_X_NAME)
#undef SCN_X_NAME
};

int scn_topo_counter_index(const char *name)
{
	for (size_t i = 0; i < sizeof(counter_names) / sizeof(counter_names[0]); i++)
		if (!strcmp(counter_names[i], name))
			return (int)i;
	return -ENOENT;
}

static int mgmt_open(struct scn_topo *t, struct scn_nicd *n, struct mgmt_client *c)
{
	char sock[PATH_MAX];

	if ((size_t)snprintf(sock, sizeof(sock), "%s/" NIC_SOCK_PREFIX "%s" NIC_SOCK_SUFFIX, t->dir,
			     n->addr_str) >= sizeof(sock))
		return -ENAMETOOLONG;
	return mgmt_client_open(c, sock, MGMT_TIMEOUT_MS);
}

int scn_topo_stats(struct scn_topo *t, struct scn_nicd *n, struct nic_stats *st, char *why,
		   size_t size)
{
	struct mgmt_client c;
	int rc;

	rc = mgmt_open(t, n, &c);
	if (!rc) {
		rc = mgmt_client_stats(&c, st);
		mgmt_client_close(&c);
	}
	if (rc)
		snprintf(why, size, "NIC %s (%s) does not answer a stats request: %s", n->name,
			 n->addr_str, strerror(-rc));
	return rc;
}

/* A listing of NIC n (mgmt_client_list's contract). */
static int topo_list(struct scn_topo *t, struct scn_nicd *n, uint16_t op, size_t rec_size,
		     void **recs, size_t *count)
{
	struct mgmt_client c;
	int rc;

	*recs = NULL;
	*count = 0;
	rc = mgmt_open(t, n, &c);
	if (rc)
		return rc;
	rc = mgmt_client_list(&c, op, rec_size, recs, count);
	mgmt_client_close(&c);
	return rc;
}

int scn_topo_tpt(struct scn_topo *t, struct scn_nicd *n, struct nic_mgmt_tpt_rec **recs,
		 size_t *count)
{
	void *v;
	int rc = topo_list(t, n, NIC_MGMT_TPT, sizeof(**recs), &v, count);

	*recs = v;
	return rc;
}

int scn_topo_faults(struct scn_topo *t, struct scn_nicd *n, struct nic_mgmt_fault_rec **recs,
		    size_t *count)
{
	void *v;
	int rc = topo_list(t, n, NIC_MGMT_FAULTS, sizeof(**recs), &v, count);

	*recs = v;
	return rc;
}

/* ---- The capture thread ----------------------------------------------------- */

static void frame_parse(struct scn_wire_frame *f, const struct fab_cap_rec *r)
{
	const uint8_t *bth = r->data + FAB_ETH_HLEN + FAB_IP4_HLEN + FAB_UDP_HLEN;
	const struct fab_opcode_info *info;

	f->opcode = -1;
	f->syndrome = -1;
	if (r->caplen < FAB_HDR_BASE)
		return;
	f->opcode = bth[0];
	f->qpn = fab_get24(bth + 5);
	info = fab_opcode_info(bth[0]);
	if (info && (info->hdrs & FAB_HDR_AETH) && !(info->hdrs & (FAB_HDR_RETH | FAB_HDR_DETH)) &&
	    r->caplen >= FAB_HDR_BASE + FAB_AETH_LEN)
		f->syndrome = bth[FAB_BTH_LEN];
}

static int on_cap_record(void *arg, const struct fab_cap_rec *r)
{
	struct scn_capture *c = arg;
	char note[320], s[FAB_ADDR_STRLEN], d[FAB_ADDR_STRLEN];
	struct scn_wire_frame f = {.src = r->src,
				   .dst = r->dst,
				   .marks = r->marks,
				   .link_seq = r->link_seq,
				   .ts_ns = r->ts_ns,
				   .rx_drop = r->rx_drop};
	struct scn_wire_frame *grown;
	size_t ncap;

	frame_parse(&f, r);
	fab_cap_describe(r->marks, r->rx_drop, note, sizeof(note));
	/* The file stops at its limit (a flood of frames once wrote 288 MB
	 * a second); the frames stay in the list `wait frame` looks at. */
	if (c->pcapng && c->pcap_bytes >= c->pcap_max) {
		if (!c->pcap_cut++)
			c->pcap_cut_ns = r->ts_ns;
	} else if (c->pcapng) {
		/* An enhanced packet block: 32 bytes, the data padded to 4,
		 * the options (comment, flags, drop count) and the end. */
		c->pcap_bytes += 64 + ((r->caplen + 3u) & ~3u) + strlen(note);
		pcapng_packet(c->pcapng,
			      &(struct pcapng_pkt){
				  .ifid = 0,
				  .ts_ns = r->ts_ns + (uint64_t)c->mono_to_real,
				  .data = r->data,
				  .caplen = r->caplen,
				  .len = r->len,
				  .flags = r->marks & FAB_MARK_CORRUPTED ? PCAPNG_CRC_ERROR : 0,
				  .dropcount = r->lost_before,
				  .comment = note,
			      });
	}
	/* Only what a seed decides: the marks of the link's rules, by the
	 * frame's number on its link (not its time, which varies run to run). */
	if (c->decisions && (r->marks || r->rx_drop))
		fprintf(c->decisions, "%s -> %s frame %llu: %s\n",
			fab_addr_format(r->src, s, sizeof(s)),
			fab_addr_format(r->dst, d, sizeof(d)), (unsigned long long)r->link_seq,
			note + strspn(note, "nicsim: "));
	pthread_mutex_lock(&c->lock);
	if (c->nframes == c->cap_frames) {
		ncap = c->cap_frames ? 2 * c->cap_frames : 1024;
		grown = realloc(c->frames, ncap * sizeof(*grown));
		if (!grown) {
			c->err = c->err ? c->err : -ENOMEM;
			pthread_mutex_unlock(&c->lock);
			return 0;
		}
		c->frames = grown;
		c->cap_frames = ncap;
	}
	c->frames[c->nframes++] = f;
	c->not_captured += r->lost_before;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static size_t cap_pass(struct scn_capture *c)
{
	uint64_t one = 1;
	size_t n = 0;

	fab_cap_read(c->cap, on_cap_record, c, &n);
	pthread_mutex_lock(&c->lock);
	c->passes++;
	pthread_mutex_unlock(&c->lock);
	if (n && write(c->wake_fd, &one, sizeof(one)) < 0) {
		/* The counter is full: the loop is woken anyway. */
	}
	return n;
}

static void *cap_main(void *arg)
{
	struct scn_capture *c = arg;
	struct timespec idle = {.tv_nsec = CAP_IDLE_NS};

	while (!atomic_load(&c->stop))
		if (!cap_pass(c))
			nanosleep(&idle, NULL);
	/* Records being written as the tap went off, then the last pass. */
	fab_cap_stop(c->cap);
	nanosleep(&idle, NULL);
	cap_pass(c);
	return NULL;
}

/* Attach the capture to t->fab's tap and start its thread. */
static int cap_run(struct scn_topo *t, char *why, size_t size)
{
	struct scn_capture *c = &t->capture;
	struct fab_cap_config cfg = {.copy_bytes = CAP_COPY_BYTES};
	int rc;

	atomic_store(&c->stop, 0);
	rc = fab_cap_attach_cfg(t->fab, &cfg, &c->cap);
	if (rc) {
		snprintf(why, size, "cannot attach the capture to the fabric: %s", strerror(-rc));
		return rc;
	}
	rc = pthread_create(&c->thread, NULL, cap_main, c);
	if (rc) {
		snprintf(why, size, "cannot start the capture thread: %s", strerror(rc));
		return -rc;
	}
	c->running = true;
	return 0;
}

/* End the capture thread after a last pass and detach from the tap; the
 * files and the frames stay. */
static void cap_halt(struct scn_capture *c)
{
	if (c->running) {
		atomic_store(&c->stop, 1);
		pthread_join(c->thread, NULL);
		c->running = false;
	}
	fab_cap_detach(c->cap);
	c->cap = NULL;
}

int scn_capture_start(struct scn_topo *t, char *why, size_t size)
{
	struct scn_capture *c = &t->capture;
	char path[PATH_MAX + 32];
	struct timespec mono, real;
	int rc;

	memset(c, 0, sizeof(*c));
	c->wake_fd = -1;
	c->pcap_max = t->capture_max ? t->capture_max : SCN_CAPTURE_MAX;
	pthread_mutex_init(&c->lock, NULL);
	c->inited = true;
	snprintf(path, sizeof(path), "%s/decisions.log", t->dir);
	c->decisions = fopen(path, "we");
	if (!c->decisions) {
		rc = -errno;
		snprintf(why, size, "cannot create %s: %s", path, strerror(-rc));
		return rc;
	}
	snprintf(path, sizeof(path), "%s/capture.pcapng", t->dir);
	c->pcapng = fopen(path, "we");
	if (!c->pcapng || pcapng_begin(c->pcapng, "nicsim scenario") ||
	    pcapng_interface(c->pcapng, "fabric", CAP_COPY_BYTES)) {
		snprintf(why, size, "cannot write %s", path);
		return -EIO;
	}
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	c->mono_to_real =
	    ((int64_t)real.tv_sec - mono.tv_sec) * 1000000000 + (real.tv_nsec - mono.tv_nsec);
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake_fd < 0) {
		rc = -errno;
		snprintf(why, size, "eventfd: %s", strerror(-rc));
		return rc;
	}
	return cap_run(t, why, size);
}

void scn_capture_stop(struct scn_topo *t)
{
	struct scn_capture *c = &t->capture;

	cap_halt(c);
	if (c->pcapng)
		fclose(c->pcapng);
	if (c->decisions)
		fclose(c->decisions);
	c->pcapng = c->decisions = NULL;
}

size_t scn_capture_scan(struct scn_topo *t, size_t *from,
			void (*fn)(void *arg, const struct scn_wire_frame *f), void *arg)
{
	struct scn_capture *c = &t->capture;
	size_t n = 0;

	pthread_mutex_lock(&c->lock);
	for (; *from < c->nframes; (*from)++, n++)
		fn(arg, &c->frames[*from]);
	pthread_mutex_unlock(&c->lock);
	return n;
}

void scn_capture_sync(struct scn_topo *t)
{
	struct scn_capture *c = &t->capture;
	struct timespec gap = {.tv_nsec = CAP_IDLE_NS / 2};
	uint64_t p0, p, deadline = scn_now_ns() + 200000000ull;

	if (!c->running)
		return;
	pthread_mutex_lock(&c->lock);
	p0 = c->passes;
	pthread_mutex_unlock(&c->lock);
	do {
		nanosleep(&gap, NULL);
		pthread_mutex_lock(&c->lock);
		p = c->passes;
		pthread_mutex_unlock(&c->lock);
	} while (p < p0 + 2 && scn_now_ns() < deadline);
}

size_t scn_capture_count(struct scn_topo *t)
{
	size_t n;

	pthread_mutex_lock(&t->capture.lock);
	n = t->capture.nframes;
	pthread_mutex_unlock(&t->capture.lock);
	return n;
}

void scn_capture_ack(struct scn_topo *t)
{
	uint64_t v;

	if (t->capture.wake_fd >= 0 && read(t->capture.wake_fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing to clear. */
	}
}

/* ---- Teardown ----------------------------------------------------------------- */

/* Milliseconds from now to deadline (CLOCK_MONOTONIC ns), 0 once past. */
static int left_ms(uint64_t deadline)
{
	uint64_t now = scn_now_ns();

	return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

void scn_topo_destroy(struct scn_topo *t, bool keep)
{
	char lock[PATH_MAX];
	struct scn_nicd *n;
	uint64_t deadline;
	size_t i;

	scn_capture_stop(t);
	for (i = 0; i < t->nnics; i++) {
		n = &t->nics[i];
		if (n->pid <= 0 || scn_topo_nic_reap(n))
			continue;
		if (n->stopped)
			kill(n->pid, SIGCONT);
		kill(n->pid, SIGTERM);
	}
	/* One deadline for every NIC, then SIGKILL for those left, and one
	 * more: stuck NICs cost NIC_TERM_MS once, however many. */
	deadline = scn_now_ns() + NIC_TERM_MS * 1000000ull;
	for (i = 0; i < t->nnics; i++) {
		n = &t->nics[i];
		if (n->pid > 0)
			nic_wait_exit(n, left_ms(deadline));
	}
	for (i = 0; i < t->nnics; i++)
		if (t->nics[i].pid > 0)
			kill(t->nics[i].pid, SIGKILL);
	deadline = scn_now_ns() + NIC_TERM_MS * 1000000ull;
	for (i = 0; i < t->nnics; i++) {
		n = &t->nics[i];
		if (n->pid > 0)
			nic_wait_exit(n, left_ms(deadline));
	}
	if (t->capture.wake_fd >= 0)
		close(t->capture.wake_fd);
	t->capture.wake_fd = -1;
	if (t->capture.inited) {
		free(t->capture.frames);
		t->capture.frames = NULL;
		t->capture.nframes = t->capture.cap_frames = 0;
		pthread_mutex_destroy(&t->capture.lock);
		t->capture.inited = false;
	}
	fab_close(t->fab);
	t->fab = NULL;
	if (!t->dir[0])
		return;
	/* The NICs are stopped: the fabric segment (tens of MB), its FIFOs
	 * and the run directory's lock serve no one any more, kept or not.
	 * A kept directory holds only the artefacts (logs, capture,
	 * decisions.log). */
	fab_destroy_files(t->dir);
	if (snprintf(lock, sizeof(lock), "%s/%s", t->dir, NIC_RUN_LOCK) < (int)sizeof(lock))
		unlink(lock);
	if (!keep) {
		scn_rmtree(t->dir);
		t->dir[0] = '\0';
	}
}
