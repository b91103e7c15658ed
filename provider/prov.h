/*
 * The provider's private state and the functions its files share.
 *
 * One process-wide instance (struct prov, see startup.c for why) holds
 * everything: the sockets, the NICs this process is attached to, the
 * registrations and the page pin counts.  One mutex, prov.lock, guards all of
 * it; every SPI entry point takes it once, for the whole call, NIC round
 * trips included (nic_host_cmd serialises per NIC anyway, and a
 * registration is two round trips of about a microsecond).
 *
 * Objects and their links:
 *   prov_sock   a SOCKET handle (slot table "socks").  Bound: holds one
 *               reference on a prov_nic.  Lists the local-registration
 *               instances (prov_inst) and the RDMA exposures (prov_win) it
 *               holds; closing the socket releases them all.
 *   prov_nic    one attachment (struct nic_host) per NIC per process, shared
 *               by every socket bound to that NIC; detached when the last
 *               socket goes, or at once when the NIC stops answering.
 *   prov_mr     one NIC registration (TPT region): the pages pinned once and
 *               the key.  Shared regions are hashed by (nic, va, len, flags,
 *               kind) so that the same buffer registered again is found (R2).
 *               A local region's slot handle is the WSPRegisterMemory handle.
 *   prov_inst   how many instances of one local region one socket holds;
 *               the handle is valid on a socket only while it holds one (R3).
 *   prov_win    one socket's exposure of a buffer to its peer: a memory
 *               window over a shared region (NIC with windows) or a region
 *               of its own (NIC without); hashed by (socket, va, len, flags).
 *
 * Errors inside the provider are 0 or a negative errno; errmap.c turns them
 * into WSA codes at the SPI boundary and nowhere else.  Two errnos have a
 * provider meaning: PROV_ENOTINIT and PROV_EVERSION below.
 */
#ifndef PROV_H
#define PROV_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "nicsim_host.h"
#include "pin.h"
#include "slot.h"
#include "ws2san.h"

#define PROV_ENOTINIT ENXIO  /* provider not started: WSANOTINITIALISED */
#define PROV_EVERSION ERANGE /* version below 2.2: WSAVERNOTSUPPORTED */

#define PROV_DIR_MAX 108 /* a socket path must fit sockaddr_un anyway */

#define prov_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

struct prov_nic {
	struct prov_nic *next;
	struct nic_host *host; /* NULL once down */
	uint32_t addr;         /* IPv4, network byte order */
	uint32_t caps;         /* NIC_CAP_* */
	uint64_t max_reg_len;
	uint32_t users; /* sockets bound to it */
	bool down;      /* stopped answering: every command fails */
};

struct prov_inst;
struct prov_win;

struct prov_sock {
	struct prov_slot_hdr slot;
	bool bound;
	struct sockaddr_in local;
	struct prov_nic *nic;    /* set when bound */
	struct prov_inst *insts; /* local registration instances held */
	struct prov_win *wins;   /* RDMA exposures */
};

enum prov_mr_kind {
	PROV_MR_LOCAL = 1,   /* WSPRegisterMemory, shared per process and NIC */
	PROV_MR_RDMA = 2,    /* windows are bound to it, shared per process and NIC */
	PROV_MR_PRIVATE = 3, /* one exposure's own region (NIC without windows) */
};

struct prov_mr {
	struct prov_slot_hdr slot;
	struct prov_hnode hnode; /* in prov.mr_hash unless PRIVATE */
	struct prov_nic *nic;
	uint64_t va, len;
	uint32_t flags;          /* MEM_* as registered: part of the key */
	uint32_t kind;           /* enum prov_mr_kind */
	uint32_t access;         /* NIC_ACCESS_* */
	uint32_t key;            /* TPT key */
	uint32_t refs;           /* LOCAL: instances; RDMA: windows; PRIVATE: 1 */
	struct prov_inst *insts; /* LOCAL: per-socket instance counts */
};

struct prov_inst {
	struct prov_mr *mr;
	struct prov_sock *sock;
	uint32_t count;
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
	struct prov_win *sk_prev, *sk_next;
};

struct prov {
	pthread_mutex_t lock;
	uint32_t starts;        /* WSPStartupEx calls not yet undone by WSPCleanup */
	uint32_t epoch;         /* first starts so far: seeds handle generations */
	char dir[PROV_DIR_MAX]; /* run directory; "" if it could not be resolved */
	struct prov_nic *nics;
	struct prov_slots socks, mrs, wins;
	struct prov_hash mr_hash, win_hash;
	struct prov_inst *inst_free; /* recycled instance records */
	struct prov_pins pins;
};

/* startup.c: the instance, locked; unlock it when done. */
struct prov *prov_lock(void);
void prov_unlock(struct prov *p);

/* errmap.c: the one place where errnos become WSA codes. */
int prov_wsa_error(int err);
/* Report err (negative errno) through lpErrno (if not NULL); SOCKET_ERROR. */
int prov_fail(int err, LPINT lpErrno);

/* socket.c */
/* The live socket s names: 0, -PROV_ENOTINIT, -ENOTSOCK. */
int prov_sock_get(struct prov *p, SOCKET s, struct prov_sock **out);
/* Close every socket (WSPCleanup). */
void prov_sock_close_all(struct prov *p);

/* nic.c */
/*
 * Attach to (or share the attachment of) the NIC serving addr (network
 * order; INADDR_ANY: the lowest address in the run directory) and take a
 * reference.  0, -EADDRNOTAVAIL, -ENETDOWN, -ENOBUFS.
 */
int prov_nic_get(struct prov *p, uint32_t addr, struct prov_nic **out);
void prov_nic_put(struct prov *p, struct prov_nic *nic);
/*
 * Run one command.  0 (and *key from the completion if key is not NULL),
 * the NIC's status as nic_status_errno() maps it, or -ENETDOWN when the NIC
 * does not answer (it is then marked down and detached).
 */
int prov_nic_exec(struct prov_nic *nic, struct nic_cmd *cmd, uint32_t *key);
/*
 * The two halves of prov_nic_exec, to overlap a command with the caller's
 * own work (driver.h: one command in flight per NIC, under the provider
 * lock).  prov_nic_wait takes the posted cmd (its tag and opcode).
 */
int prov_nic_post(struct prov_nic *nic, struct nic_cmd *cmd);
int prov_nic_wait(struct prov_nic *nic, const struct nic_cmd *cmd, uint32_t *key);

/* mr.c: regions (see the top of mr.c). */
/* Checks shared by both registration calls: 0, -ENOTCONN, -EINVAL, -EFAULT, -ENETDOWN. */
int prov_check_buffer(const struct prov_sock *sk, const void *buf, uint32_t len, uint32_t flags);
struct prov_mr *prov_mr_find(struct prov *p, const struct prov_nic *nic, uint64_t va, uint64_t len,
			     uint32_t flags, uint32_t kind);
int prov_mr_create(struct prov *p, struct prov_nic *nic, uint64_t va, uint64_t len, uint32_t flags,
		   uint32_t kind, uint32_t access, bool nic_writes, struct prov_mr **out);
int prov_mr_dereg(struct prov *p, struct prov_mr *mr, bool force);
void prov_mr_free(struct prov *p, struct prov_mr *mr);

/* register.c, rdma.c */
int prov_reg_local(struct prov *p, struct prov_sock *sk, void *buf, uint32_t len, uint32_t flags,
		   uint64_t *handle);
int prov_dereg_local(struct prov *p, struct prov_sock *sk, uint64_t handle);
int prov_reg_rdma(struct prov *p, struct prov_sock *sk, void *buf, uint32_t len, uint32_t flags,
		  struct nicsim_rdma_desc *desc);
int prov_dereg_rdma(struct prov *p, struct prov_sock *sk, const struct nicsim_rdma_desc *desc);
/* Release everything a closing socket holds, whatever the NIC says. */
void prov_sock_release_regs(struct prov *p, struct prov_sock *sk);
void prov_sock_release_wins(struct prov *p, struct prov_sock *sk);
/* Free the recycled instance records (WSPCleanup). */
void prov_reg_fini(struct prov *p);

#endif /* PROV_H */
