/*
 * NICs as the provider sees them: found by address in the run directory
 * (one socket per NIC, named by nic_sock_path()), attached lazily on the
 * first bind, shared by every socket bound to the same NIC, detached when the
 * last such socket closes.
 *
 * A NIC that stops answering (a command times out, the socket hangs up, the
 * context is put in error) is marked down and its attachment shut down at
 * once (progress.c, prov_nic_fail): that makes the NIC tear the context
 * down, so none of its TPT entries can outlive the provider's knowledge of
 * them.  The segment stays mapped until the last reference goes, because
 * other threads may still be looking at its rings.  Later commands fail with
 * -ENETDOWN; the records of the down NIC are released as their sockets close.
 * A new bind to the same address attaches afresh.
 *
 * Commands are issued under the provider lock only, one at a time per NIC.
 * Their completions are waited for through the progress engine
 * (prov_nic_wait), so that a thread running a command also drains events
 * and completions, and so that it shares the one sleeper of the context with
 * the threads waiting for data.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "driver.h"
#include "nicsim_rundir.h"
#include "prov.h"

/* Address of a socket file named "nic-<dotted quad>.sock", or -EINVAL. */
static int parse_sock_name(const char *name, uint32_t *addr)
{
	size_t plen = strlen(NIC_SOCK_PREFIX), slen = strlen(NIC_SOCK_SUFFIX);
	size_t len = strlen(name);
	char quad[INET_ADDRSTRLEN];
	struct in_addr in;

	if (len <= plen + slen || len - plen - slen >= sizeof(quad))
		return -EINVAL;
	if (strncmp(name, NIC_SOCK_PREFIX, plen) || strcmp(name + len - slen, NIC_SOCK_SUFFIX))
		return -EINVAL;
	memcpy(quad, name + plen, len - plen - slen);
	quad[len - plen - slen] = '\0';
	if (inet_pton(AF_INET, quad, &in) != 1)
		return -EINVAL;
	*addr = in.s_addr;
	return 0;
}

static int addr_cmp(const void *a, const void *b)
{
	uint32_t x = ntohl(*(const uint32_t *)a), y = ntohl(*(const uint32_t *)b);

	return x < y ? -1 : x > y;
}

int prov_nic_addrs(const char *dir, uint32_t *addrs, size_t max, size_t *count)
{
	DIR *d = dir[0] ? opendir(dir) : NULL;
	struct dirent *de;
	size_t n = 0;

	*count = 0;
	if (!d)
		return 0; /* no directory: no NIC */
	while ((de = readdir(d))) {
		struct stat st;
		uint32_t a;

		if (de->d_type != DT_SOCK && de->d_type != DT_UNKNOWN && de->d_type != DT_LNK)
			continue;
		if (parse_sock_name(de->d_name, &a) || a == htonl(INADDR_ANY))
			continue;
		/* A link to a NIC's socket elsewhere (a NIC with a run directory
		 * of its own) counts as the socket itself. */
		if (de->d_type == DT_LNK &&
		    (fstatat(dirfd(d), de->d_name, &st, 0) < 0 || !S_ISSOCK(st.st_mode)))
			continue;
		if (n < max)
			addrs[n] = a;
		n++;
	}
	closedir(d);
	qsort(addrs, n < max ? n : max, sizeof(*addrs), addr_cmp);
	*count = n;
	return 0;
}

/* What INADDR_ANY means: the NIC with the lowest address in the directory. */
static int lowest_nic(const char *dir, uint32_t *addr)
{
	uint32_t all[PROV_MAX_NICS];
	size_t n;

	prov_nic_addrs(dir, all, PROV_MAX_NICS, &n);
	if (!n)
		return -EADDRNOTAVAIL;
	if (n > PROV_MAX_NICS) {
		/* More than fit: look at them all for the lowest. */
		uint32_t *big = malloc(n * sizeof(*big));

		if (!big)
			return -ENOBUFS;
		prov_nic_addrs(dir, big, n, &n);
		*addr = big[0];
		free(big);
		return 0;
	}
	*addr = all[0];
	return 0;
}

/* NICSIM_DEBUG: why no NIC serves addr, and which NICs there are. */
static void dbg_no_nic(const struct prov *p, uint32_t addr)
{
	char a[16], found[1024];

	if (!p->dir[0]) {
		prov_dbg_print("bind to %s: WSAEADDRNOTAVAIL: no usable run directory (see the "
			       "lines above)",
			       prov_addr_str(addr, a));
		return;
	}
	prov_dbg_addrs(p->dir, found, sizeof(found));
	prov_dbg_print("bind to %s: WSAEADDRNOTAVAIL: no NIC with that address in %s; found %s",
		       prov_addr_str(addr, a), p->dir, found);
}

/* NICSIM_DEBUG: why attaching to the NIC at path failed (err from nic_host_attach). */
static void dbg_attach(const char *path, int err)
{
	const char *why;

	switch (-err) {
	case ECONNREFUSED:
	case ENOENT: why = "nobody listens there: the NIC died and left its socket"; break;
	case EACCES:
		why = "denied: the NIC runs as another user (a host attaches only to a NIC of "
		      "its own user or root's), or it refused this user (a NIC serves its own "
		      "user, root, and the groups it was started with --allow-group for)";
		break;
	case EPROTONOSUPPORT:
		why = "version mismatch: the NIC speaks another ABI version (use a nicsimd of "
		      "the same build)";
		break;
	case EPROTO: why = "the NIC answered the hello with something malformed"; break;
	case ECONNRESET: why = "the NIC closed the connection without an answer"; break;
	case ETIMEDOUT: why = "the NIC did not answer the hello in time"; break;
	case ENOMEM: why = "out of memory, or the NIC has no room for another context"; break;
	default: why = strerror(-err); break;
	}
	prov_dbg_print("attach to %s refused: %s", path, why);
}

/* A new record for an attachment: its mutex and its condition variable. */
static struct prov_nic *nic_new(void)
{
	struct prov_nic *nic = calloc(1, sizeof(*nic));
	pthread_condattr_t ca;

	if (!nic)
		return NULL;
	if (pthread_condattr_init(&ca)) {
		free(nic);
		return NULL;
	}
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&nic->cond, &ca)) {
		pthread_condattr_destroy(&ca);
		free(nic);
		return NULL;
	}
	pthread_condattr_destroy(&ca);
	if (pthread_mutex_init(&nic->lock, NULL)) {
		pthread_cond_destroy(&nic->cond);
		free(nic);
		return NULL;
	}
	for (uint32_t i = 0; i < NIC_QP_SLOTS; i++)
		nic->qp[i].slot = i;
	nic->ev_kick = -1;
	return nic;
}

static void nic_free(struct prov_nic *nic)
{
	prov_ev_stop(nic);
	nic_host_detach(nic->host);
	for (uint32_t i = 0; i < NIC_QP_SLOTS; i++)
		free(nic->qp[i].sq);
	pthread_mutex_destroy(&nic->lock);
	pthread_cond_destroy(&nic->cond);
	free(nic);
}

int prov_nic_get(struct prov *p, uint32_t addr, struct prov_nic **out)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const struct nic_hello_reply *info;
	struct prov_nic *nic;
	struct stat st;
	int err;

	if (addr == htonl(INADDR_ANY)) {
		err = lowest_nic(p->dir, &addr);
		if (err == -EADDRNOTAVAIL)
			PROV_DBG("bind to INADDR_ANY: WSAEADDRNOTAVAIL: no NIC socket in the run "
				 "directory %s",
				 p->dir[0] ? p->dir : "(none usable)");
		if (err)
			return err;
	}
	for (nic = p->nics; nic; nic = nic->next) {
		if (!prov_nic_is_down(nic) && nic->addr == addr) {
			nic->users++;
			*out = nic;
			return 0;
		}
	}
	if (!p->dir[0] || nic_sock_path(path, sizeof(path), p->dir, addr) || stat(path, &st) < 0 ||
	    !S_ISSOCK(st.st_mode)) {
		if (prov_debug)
			dbg_no_nic(p, addr);
		return -EADDRNOTAVAIL;
	}

	nic = nic_new();
	if (!nic)
		return -ENOBUFS;
	/* The socket is there, so any failure now is a NIC that is not working. */
	err = nic_host_attach(path, &nic->host);
	if (err) {
		if (prov_debug)
			dbg_attach(path, err);
		nic_free(nic);
		if (err == -EACCES) {
			char shown[512];

			fprintf(stderr,
				"nicsim: %s: not attached: the NIC there runs as another user (a "
				"host attaches only to its own user's or root's NICs), or it "
				"refused this user (a NIC serves its own user, root, and the "
				"groups it was started with --allow-group for)\n",
				nic_escape(shown, sizeof(shown), path));
		}
		return err == -ENOMEM ? -ENOBUFS : -ENETDOWN;
	}
	info = nic_host_info(nic->host);
	if (info->nic_addr != addr) {
		/* A NIC answering under another NIC's name is misconfigured. */
		if (prov_debug) {
			char a[16], b[16];

			prov_dbg_print("attach to %s: WSAENETDOWN: the NIC there has address %s, "
				       "not %s",
				       path, prov_addr_str(info->nic_addr, a),
				       prov_addr_str(addr, b));
		}
		nic_free(nic);
		return -ENETDOWN;
	}
	nic->addr = addr;
	nic->caps = info->caps;
	nic->max_reg_len = info->max_reg_len;
	nic->users = 1;
	nic->next = p->nics;
	p->nics = nic;
	prov_cache_attach(p, nic);
	prov_bufs_attach(p, nic);
	PROV_DBG("attached to NIC %s (%s, pid %u, context %u)", path + strlen(p->dir) + 1, p->dir,
		 (unsigned)info->nic_pid, (unsigned)info->ctx_id);
	*out = nic;
	return 0;
}

void prov_nic_put(struct prov *p, struct prov_nic *nic)
{
	struct prov_nic **pp;

	if (--nic->users)
		return;
	for (pp = &p->nics; *pp; pp = &(*pp)->next) {
		if (*pp == nic) {
			*pp = nic->next;
			break;
		}
	}
	nic_free(nic);
}

uint32_t prov_nic_max_xfer(const struct prov_nic *nic)
{
	return nic->max_reg_len < PROV_MAX_XFER ? (uint32_t)nic->max_reg_len : PROV_MAX_XFER;
}

/* Predicate: the context's own command (prov_nic_bg_next) is not in flight. */
static int bg_idle(void *arg)
{
	const struct prov_nic *nic = arg;

	return nic->cmd != &nic->bg;
}

/* prov_nic_post, for an SHM_MAP with the descriptor fd it maps if fd >= 0. */
static int nic_post(struct prov_nic *nic, struct prov_cmd *pc, int fd)
{
	uint64_t deadline = nic_host_now_ns() + (uint64_t)NIC_HOST_CMD_TIMEOUT_MS * 1000000u;
	int err = 0;

	pc->err = -EAGAIN;
	pthread_mutex_lock(&nic->lock);
	/* The progress engine's DISCONNECT goes first; it takes one round trip. */
	if (nic->cmd == &nic->bg && !prov_nic_is_down(nic)) {
		err = prov_nic_wait(nic, bg_idle, nic, deadline, true);
		if (err && !prov_nic_is_down(nic)) {
			/* No answer in time: the NIC is lost, as in prov_nic_cmd_wait. */
			nic_host_cmd_abandon(nic->host, nic->bg.cmd.tag);
			prov_nic_fail(nic, -ENETDOWN);
		}
	}
	if (err || prov_nic_is_down(nic)) {
		err = -ENETDOWN;
	} else if (nic->cmd) {
		err = -EBUSY; /* a caller broke the one-command rule */
	} else {
		err = fd >= 0 ? nic_host_post_shm_map(nic->host, fd, &pc->cmd)
			      : nic_host_post(nic->host, &pc->cmd);
		if (err) {
			/* A full ring here means completions went missing: the NIC is lost. */
			prov_nic_fail(nic, -ENETDOWN);
			err = -ENETDOWN;
		} else {
			nic->cmd = pc;
		}
	}
	pthread_mutex_unlock(&nic->lock);
	return err;
}

int prov_nic_post(struct prov_nic *nic, struct prov_cmd *pc)
{
	return nic_post(nic, pc, -1);
}

/* Predicate of a command waiter: the progress engine took its completion. */
static int cmd_done(void *arg)
{
	const struct prov_cmd *pc = arg;

	return pc->err != -EAGAIN;
}

int prov_nic_cmd_wait(struct prov_nic *nic, struct prov_cmd *pc, uint32_t *key)
{
	uint64_t deadline = nic_host_now_ns() + (uint64_t)NIC_HOST_CMD_TIMEOUT_MS * 1000000u;
	int err;

	pthread_mutex_lock(&nic->lock);
	err = prov_nic_wait(nic, cmd_done, pc, deadline, true);
	if (nic->cmd == pc)
		nic->cmd = NULL;
	if (!err && (pc->err || pc->cpl.opcode != pc->cmd.opcode))
		err = -EPROTO;
	if (err) {
		/* No answer in time, or a broken ring: the NIC is lost. */
		if (!prov_nic_is_down(nic))
			nic_host_cmd_abandon(nic->host, pc->cmd.tag);
		prov_nic_fail(nic, -ENETDOWN);
	}
	/* A DISCONNECT the progress engine owes a peer may go now. */
	prov_nic_bg_next(nic);
	pthread_mutex_unlock(&nic->lock);
	if (err)
		return -ENETDOWN;
	if (pc->cpl.status != NIC_STATUS_OK)
		return nic_status_errno(pc->cpl.status);
	if (key)
		*key = pc->cpl.key;
	return 0;
}

/*
 * SHM_MAP (fd >= 0) or SHM_UNMAP of the buffer at va, as any other command
 * of the provider's: the progress engine takes the completion, whichever
 * thread runs it.  Waiting for it in the driver instead (nic_host_shm_map)
 * would need the sleeper's role on the interrupt, and a thread asleep there
 * for something else (a WSPConnect waiting for its connection, a WSPAccept
 * for a request) leaves it only when that comes or its slice ends, a second
 * later; meanwhile the caller holds prov.lock, which the other side of that
 * very connection needs to accept it.
 */
int prov_nic_shm(struct prov_nic *nic, int fd, void *va, size_t len)
{
	struct prov_cmd pc = {.cmd.opcode = fd >= 0 ? NIC_CMD_SHM_MAP : NIC_CMD_SHM_UNMAP};
	int err;

	pc.cmd.u.shm.va = (uintptr_t)va;
	pc.cmd.u.shm.len = fd >= 0 ? len : 0;
	err = nic_post(nic, &pc, fd);
	return err ? err : prov_nic_cmd_wait(nic, &pc, NULL);
}

int prov_nic_exec(struct prov_nic *nic, struct nic_cmd *cmd, uint32_t *key)
{
	struct prov_cmd pc = {.cmd = *cmd};
	int err = prov_nic_post(nic, &pc);

	return err ? err : prov_nic_cmd_wait(nic, &pc, key);
}
