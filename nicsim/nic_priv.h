/*
 * Internals of the NIC daemon shared by nic.c (event loop), ctx.c (host
 * contexts) and mgmt.c (management clients).  Everything here runs on the
 * NIC's single event-loop thread.
 */
#ifndef NICSIM_NIC_PRIV_H
#define NICSIM_NIC_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd.h"
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
};

struct nic_src {
	enum nic_src_type type;
	void *obj;
};

/* A connection that has not said hello yet, or a management client. */
struct nic_conn {
	struct nic_src src;
	int fd;
	uint32_t pid; /* SO_PEERCRED */
	struct nic_conn *next;
};

/* One host attachment: context = protection domain. */
struct nic_ctx {
	struct nic_src sock_src;
	struct nic_src bell_src;
	uint32_t id;
	uint32_t pid;
	char comm[16];
	int sock;     /* the attach socket; hang-up = host gone */
	int memfd;    /* the context segment */
	int doorbell; /* eventfd, host -> NIC */
	int irq;      /* eventfd, NIC -> host */
	struct nic_ctx_hdr *hdr;
	struct nic_cmd *cmdq;
	struct nic_cpl *cplq;
	/* The NIC's own indices, never read back from shared memory. */
	uint32_t cmd_cons;
	uint32_t cpl_prod;
	bool broken;                  /* ring protocol broken: ring no longer read */
	struct qp *qps[NIC_QP_SLOTS]; /* QP in each slot of the segment */
	struct nic_ctx *next;
};

struct nic {
	struct nic_opts opts;
	struct nic_log log;
	struct tpt *tpt;
	struct qp_table qps;
	struct nic_stats stats;
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
	struct nic_conn *conns; /* new and management connections */
	uint32_t cpu;           /* CPU last published in nic_cpu, plus 1 */
	bool stop;
};

/* ctx.c */
int ctx_attach(struct nic *nic, int fd, uint32_t pid);
void ctx_detach(struct nic *nic, struct nic_ctx *c, const char *why);
unsigned ctx_poll(struct nic *nic, struct nic_ctx *c);
void ctx_set_sleeping(struct nic *nic, uint32_t v);
bool ctx_share_cpu(struct nic *nic);
struct nic_ctx *ctx_find(struct nic *nic, uint32_t id);

/* ctx.c: QP commands of a context (cmd_env's qp_create/qp_destroy). */
int ctx_qp_create(void *nic, void *ctx, uint32_t slot, uint32_t *qpn);
int ctx_qp_destroy(void *nic, void *ctx, uint32_t qpn);

/* mgmt.c */
void mgmt_serve(struct nic *nic, struct nic_conn *conn);
void mgmt_fill_stats(struct nic *nic, struct nic_stats *out);

/* nic.c */
int nic_epoll_add(struct nic *nic, int fd, uint32_t events, struct nic_src *src);
void nic_conn_close(struct nic *nic, struct nic_conn *conn);
/* Send a hello reply with no descriptors (refusals, management). */
int nic_send_reply(struct nic *nic, int fd, uint16_t status, uint32_t ctx_id);
void nic_fill_reply(struct nic *nic, struct nic_hello_reply *r, uint16_t status, uint32_t ctx_id);

#endif /* NICSIM_NIC_PRIV_H */
