/*
 * WSPStartupEx and WSPCleanup, and the provider's one instance.
 *
 * Why one process-wide instance: the SPI has no context parameter.  A switch
 * calls WSPStartupEx, then WSPSocket, WSPRegisterMemory and the rest as plain
 * functions (the extension functions are even handed out as bare pointers),
 * so the state they share has to be found without one.  Conventions forbid
 * scattered globals, so all of it lives in the single struct prov below,
 * guarded by its one mutex; WSPStartupEx/WSPCleanup reference-count it the
 * way Winsock does.
 *
 * Fork: a child does not inherit the provider.  Its copies of the parent's
 * sockets, NIC attachments and registrations name the parent's contexts (and
 * mlock is not inherited), so the child side of pthread_atfork() forgets
 * them all, closing the child's copies of the attachments' descriptors, and
 * the child starts the provider afresh with WSPStartupEx if it wants it.
 * The prepare side takes the provider lock so that no other thread is half
 * way through changing the state being copied.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nicsim_rundir.h"
#include "prov.h"

#define PROV_TAG_SOCK 0x53 /* 'S': SOCKET handles */
#define PROV_TAG_MR 0x4d   /* 'M': WSPRegisterMemory handles */
#define PROV_TAG_WIN 0x57  /* 'W': never handed out */

static struct prov prov_instance = {.lock = PTHREAD_MUTEX_INITIALIZER};

__thread unsigned prov_tls_depth __attribute__((tls_model("initial-exec")));

struct prov *prov_lock(void)
{
	pthread_mutex_lock(&prov_instance.lock);
	prov_tls_depth++;
	return &prov_instance;
}

void prov_unlock(struct prov *p)
{
	prov_tls_depth--;
	pthread_mutex_unlock(&p->lock);
}

struct prov *prov_instance_get(void)
{
	return &prov_instance;
}

/* Free the records and tables (after the registrations were released or forgotten). */
static void free_tables(struct prov *p)
{
	prov_reg_fini(p);
	prov_hash_fini(&p->win_hash);
	prov_hash_fini(&p->mr_hash);
	prov_slots_fini(&p->wins);
	prov_slots_fini(&p->mrs);
	prov_slots_fini(&p->socks);
}

static void fork_prepare(void)
{
	prov_lock();
}

static void fork_parent(void)
{
	prov_unlock(&prov_instance);
}

/*
 * In the child: forget everything (see the top).  No NIC command, no
 * munlock (the child holds no locks), no join of the parent's threads: only
 * the child's own copies of descriptors, mappings and memory are released.
 */
static void fork_child(void)
{
	struct prov *p = &prov_instance;
	uint32_t epoch = p->epoch;
	bool warned = p->cache.warned;

	while (p->nics) {
		struct prov_nic *nic = p->nics;

		p->nics = nic->next;
		nic_host_detach(nic->host);
		if (nic->ev_kick >= 0)
			close(nic->ev_kick);
		for (uint32_t i = 0; i < NIC_QP_SLOTS; i++)
			free(nic->qp[i].sq);
		free(nic);
	}
	/* Shared buffers stay mapped in the child, shared with the parent (as
	 * documented); the child forgets them and closes its copies of their
	 * memfds, which would otherwise stay open in it for good. */
	while (p->bufs) {
		struct prov_buf *b = p->bufs;

		p->bufs = b->next;
		close(b->fd);
		free(b);
	}
	prov_pins_forget(&p->pins);
	/* The records of who registered each region hang off the region's
	 * slot, which free_tables frees whole: free them first. */
	for (uint32_t i = 0; i < p->mrs.hwm; i++) {
		struct prov_mr *mr = prov_slot_at(&p->mrs, i);

		while (mr && mr->insts) {
			struct prov_inst *in = mr->insts;

			mr->insts = in->mr_next;
			free(in);
		}
	}
	free_tables(p);
	prov_mon_reset();
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	p->epoch = epoch;
	p->cache.warned = warned;
	prov_tls_depth = 0;
}

/* Runs when the library is loaded, before the application's threads. */
__attribute__((constructor)) static void prov_load(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

int nicsim_run_dir(char *buf, size_t size)
{
	int err;

	char why[NIC_RUN_WHY_MAX];

	if (!buf || !size)
		return WSAEFAULT;
	err = nic_run_dir(buf, size, NULL);
	if (err)
		return err == -ENAMETOOLONG ? WSAENOBUFS : WSAEINVAL;
	/* The provider searches no directory this check refuses. */
	err = nic_run_dir_check(buf, why, sizeof(why));
	return err == 0 || err == -ENOENT ? 0 : WSAEACCES;
}

/*
 * The run directory to search for NICs, resolved as nicsimd and the tool
 * resolve it and checked as they check it: a directory that another user
 * owns or may write to could hold a socket planted by that user, so the
 * provider looks for no NIC there (and says why on stderr).
 */
static void find_run_dir(struct prov *p)
{
	char shown[NIC_RUN_WHY_MAX];
	char why[NIC_RUN_WHY_MAX];
	int err;

	if (nic_run_dir(p->dir, sizeof(p->dir), NULL)) {
		char origin[PATH_MAX];

		p->dir[0] = '\0';
		nic_run_dir_origin(origin, sizeof(origin));
		PROV_DBG(
		    "the run directory (%s) does not fit %zu bytes, a socket path's limit with "
		    "the NICs' file names: choose a shorter one with NICSIM_DIR",
		    origin, sizeof(p->dir));
		if (prov_debug)
			prov_dbg_run_dir(p->dir, NULL);
		return;
	}
	err = nic_run_dir_check(p->dir, why, sizeof(why));
	if (err == -ENOENT)
		PROV_DBG("run directory %s does not exist (no NIC was started there)", p->dir);
	if (err == 0 || err == -ENOENT) {
		if (prov_debug)
			prov_dbg_run_dir(p->dir, NULL);
		return;
	}
	/* The program's own name: the provider runs inside an application. */
	fprintf(stderr, "%s: nicsim provider: %s; not searching it for NICs\n",
		program_invocation_short_name, nic_escape(shown, sizeof(shown), why));
	p->dir[0] = '\0';
	if (prov_debug)
		prov_dbg_run_dir(p->dir, why);
}

/*
 * Undo start(); also cleans up after a start() that failed half way.  Closing
 * the sockets wakes every thread blocked on one; they leave within a wait
 * slice, and the records they look at must stay until they have.
 */
static void stop(struct prov *p)
{
	const struct timespec pause = {.tv_nsec = 1000000L};

	p->stopping = true;
	prov_sock_close_all(p);
	for (int i = 0; p->waiters && i < 2 * PROV_WAIT_SLICE_MS; i++) {
		prov_unlock(p);
		nanosleep(&pause, NULL);
		prov_lock();
	}
	/* Closing released every cached entry (R11); be safe, while the NICs answer. */
	prov_cache_flush(p);
	/* Every NIC reference belongs to a socket, so none is left; be safe. */
	while (p->nics) {
		struct prov_nic *nic = p->nics;

		nic->users = 1;
		prov_nic_put(p, nic);
	}
	prov_pins_fini(&p->pins);
	free_tables(p);
	memset(p->dir, 0, sizeof(p->dir));
	p->stopping = false;
}

static int start(struct prov *p)
{
	/* Handles of an earlier start/cleanup cycle must not come back. */
	uint32_t seed = ++p->epoch * 0x9e3779b9u;
	int err;

	/* An unusable directory is not fatal: binding then finds no NIC. */
	find_run_dir(p);
	prov_slots_init(&p->socks, sizeof(struct prov_sock), PROV_TAG_SOCK, seed);
	prov_slots_init(&p->mrs, sizeof(struct prov_mr), PROV_TAG_MR, seed);
	prov_slots_init(&p->wins, sizeof(struct prov_win), PROV_TAG_WIN, seed);
	err = prov_hash_init(&p->mr_hash, 256);
	if (!err)
		err = prov_hash_init(&p->win_hash, 64);
	if (!err)
		err = prov_pins_init(&p->pins);
	if (err) {
		stop(p);
		return err;
	}
	prov_cache_start(p);
	return 0;
}

static void fill_wspdata(LPWSPDATA d)
{
	static const char desc[] = "nicsim SAN service provider (emulated RDMA NIC)";

	memset(d, 0, sizeof(*d));
	d->wVersion = MAKEWORD(2, 2);
	d->wHighVersion = MAKEWORD(2, 2);
	for (size_t i = 0; i < sizeof(desc) - 1 && i < WSPDESCRIPTION_LEN; i++)
		d->szDescription[i] = (WCHAR)desc[i];
}

/* The calls a SAN provider serves; the others' slots stay NULL (ws2san.h). */
static void fill_proc_table(LPWSPPROC_TABLE t)
{
	memset(t, 0, sizeof(*t));
	t->lpWSPAccept = WSPAccept;
	t->lpWSPBind = WSPBind;
	t->lpWSPCleanup = WSPCleanup;
	t->lpWSPCloseSocket = WSPCloseSocket;
	t->lpWSPConnect = WSPConnect;
	t->lpWSPEnumNetworkEvents = WSPEnumNetworkEvents;
	t->lpWSPEventSelect = WSPEventSelect;
	t->lpWSPGetOverlappedResult = WSPGetOverlappedResult;
	t->lpWSPGetSockOpt = WSPGetSockOpt;
	t->lpWSPIoctl = WSPIoctl;
	t->lpWSPListen = WSPListen;
	t->lpWSPRecv = WSPRecv;
	t->lpWSPSend = WSPSend;
	t->lpWSPSetSockOpt = WSPSetSockOpt;
	t->lpWSPSocket = WSPSocket;
}

int WSPAPI WSPStartupEx(WORD wVersionRequested, LPWSPDATA lpWSPData,
			LPWSAPROTOCOL_INFOW lpProtocolInfo, LPWSPUPCALLTABLEEX lpUpcallTable,
			LPWSPPROC_TABLE lpProcTable)
{
	BYTE major = LOBYTE(wVersionRequested), minor = HIBYTE(wVersionRequested);
	struct prov *p;
	int err = 0;

	/* The protocol info and the upcall table are not needed (ws2san.h). */
	(void)lpProtocolInfo;
	(void)lpUpcallTable;
	if (!lpWSPData || !lpProcTable)
		return prov_wsa_error(-EFAULT);
	if (major < 2 || (major == 2 && minor < 2))
		return prov_wsa_error(-PROV_EVERSION);

	p = prov_lock();
	/* A last WSPCleanup still waiting for blocked threads: let it finish. */
	for (int i = 0; p->stopping && i < 4 * PROV_WAIT_SLICE_MS; i++) {
		const struct timespec pause = {.tv_nsec = 1000000L};

		prov_unlock(p);
		nanosleep(&pause, NULL);
		p = prov_lock();
	}
	if (p->stopping)
		err = -ENOBUFS;
	else if (p->starts == UINT32_MAX)
		err = -ENOBUFS;
	else if (p->starts == 0)
		err = start(p);
	if (!err)
		p->starts++;
	prov_unlock(p);
	if (err)
		return prov_wsa_error(err);
	fill_wspdata(lpWSPData);
	fill_proc_table(lpProcTable);
	return 0;
}

int WSPAPI WSPCleanup(LPINT lpErrno)
{
	struct prov *p = prov_lock();
	int err = 0;

	if (!p->starts)
		err = -PROV_ENOTINIT;
	else if (--p->starts == 0)
		stop(p);
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}
