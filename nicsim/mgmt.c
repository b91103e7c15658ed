/*
 * Management requests (nicsim_mgmt.h), served from the NIC's event loop.
 * Replies are sent with a bounded send timeout, so a client that stops
 * reading is dropped rather than stalling the NIC.
 */
#include "nic_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define MGMT_SEND_TIMEOUT_MS 2000

void mgmt_fill_stats(struct nic *nic, struct nic_stats *out)
{
	*out = nic->stats;
	out->tpt_refusals = tpt_refusals_total(nic->tpt);
	out->tpt_in_use = tpt_in_use(nic->tpt);
	out->tpt_capacity = tpt_capacity(nic->tpt);
	out->tpt_high_water = tpt_high_water(nic->tpt);
	out->contexts = nic->nctx;
	out->qps = nic->qps.in_use;
	for (uint32_t i = 2; i < QP_MAX; i++) {
		if (nic->qps.by_index[i])
			qpio_account(nic, nic->qps.by_index[i], out);
	}
}

/* Send one reply message: header plus count records of size rec_size. */
static int send_msg(int fd, uint16_t op, uint16_t status, const void *recs, uint32_t count,
		    size_t rec_size, bool last)
{
	struct nic_mgmt_hdr h = {.magic = NIC_ABI_MAGIC,
				 .op = op,
				 .status = status,
				 .count = count,
				 .flags = last ? NIC_MGMT_F_LAST : 0};
	struct iovec iov[2] = {{.iov_base = &h, .iov_len = sizeof(h)},
			       {.iov_base = (void *)recs, .iov_len = count * rec_size}};
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = count ? 2 : 1};
	ssize_t want = (ssize_t)(sizeof(h) + count * rec_size);

	return sendmsg(fd, &msg, MSG_NOSIGNAL) == want ? 0 : -EIO;
}

static void tpt_rec(struct nic *nic, const struct tpt_entry_view *v, struct nic_mgmt_tpt_rec *r)
{
	const struct nic_ctx *c = ctx_find(nic, v->ctx_id);

	memset(r, 0, sizeof(*r));
	r->key = v->key;
	r->type = (uint8_t)v->type;
	r->state = (uint8_t)v->state;
	r->access = (uint8_t)v->access;
	r->va = v->va;
	r->len = v->len;
	r->ctx_id = v->ctx_id;
	r->pid = v->pid;
	memcpy(r->comm, c ? c->comm : "?", c ? sizeof(r->comm) : 2);
	r->qpn = v->qpn;
	r->mr_key = v->mr_key;
	r->reg_ns = v->reg_ns;
	r->inflight = v->inflight;
}

static int send_tpt(struct nic *nic, int fd)
{
	enum {
		PER_MSG = (NIC_MGMT_MSG_MAX - sizeof(struct nic_mgmt_hdr)) /
			  sizeof(struct nic_mgmt_tpt_rec)
	};
	struct tpt_entry_view *views = malloc(PER_MSG * sizeof(*views));
	struct nic_mgmt_tpt_rec *recs = malloc(PER_MSG * sizeof(*recs));
	uint32_t cursor = 0;
	int err = 0;

	if (!views || !recs) {
		err = send_msg(fd, NIC_MGMT_TPT, NIC_STATUS_NO_RESOURCES, NULL, 0, 0, true);
		goto out;
	}
	for (;;) {
		size_t n = tpt_list(nic->tpt, &cursor, views, PER_MSG);

		for (size_t i = 0; i < n; i++)
			tpt_rec(nic, &views[i], &recs[i]);
		err = send_msg(fd, NIC_MGMT_TPT, NIC_STATUS_OK, recs, (uint32_t)n, sizeof(*recs),
			       n == 0);
		if (err < 0 || n == 0)
			break;
	}
out:
	free(views);
	free(recs);
	return err;
}

static int send_faults(struct nic *nic, int fd)
{
	struct nic_mgmt_fault_rec *recs = malloc(TPT_FAULT_LOG * sizeof(*recs));
	size_t n;
	int err;

	if (!recs)
		return send_msg(fd, NIC_MGMT_FAULTS, NIC_STATUS_NO_RESOURCES, NULL, 0, 0, true);
	n = tpt_faults(nic->tpt, recs, TPT_FAULT_LOG);
	err = send_msg(fd, NIC_MGMT_FAULTS, NIC_STATUS_OK, recs, (uint32_t)n, sizeof(*recs), true);
	free(recs);
	return err;
}

/* Every host context, with the cache counters its host publishes (copied out). */
static int send_hosts(struct nic *nic, int fd)
{
	enum {
		PER_MSG = (NIC_MGMT_MSG_MAX - sizeof(struct nic_mgmt_hdr)) /
			  sizeof(struct nic_mgmt_host_rec)
	};
	struct nic_mgmt_host_rec *recs = calloc(PER_MSG, sizeof(*recs));
	const struct nic_ctx *c = nic->ctxs;
	int err = 0;

	if (!recs)
		return send_msg(fd, NIC_MGMT_HOSTS, NIC_STATUS_NO_RESOURCES, NULL, 0, 0, true);
	do {
		uint32_t n = 0;

		for (; c && n < PER_MSG; c = c->next, n++) {
			struct nic_mgmt_host_rec *r = &recs[n];

			memset(r, 0, sizeof(*r));
			r->ctx_id = c->id;
			r->pid = c->pid;
			memcpy(r->comm, c->comm, sizeof(r->comm));
			for (uint32_t i = 0; i < NIC_QP_SLOTS; i++)
				r->qps += c->qps[i] != NULL;
			memcpy(&r->cache, &c->hdr->host_cache, sizeof(r->cache));
		}
		err = send_msg(fd, NIC_MGMT_HOSTS, NIC_STATUS_OK, recs, n, sizeof(*recs), !c);
	} while (!err && c);
	free(recs);
	return err;
}

void mgmt_serve(struct nic *nic, struct nic_conn *conn)
{
	struct timeval tv = {.tv_sec = MGMT_SEND_TIMEOUT_MS / 1000,
			     .tv_usec = (MGMT_SEND_TIMEOUT_MS % 1000) * 1000};
	struct nic_mgmt_req req;
	struct nic_stats st;
	ssize_t n = recv(conn->fd, &req, sizeof(req), MSG_DONTWAIT | MSG_TRUNC);
	int err;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		nic_conn_close(nic, conn);
		return;
	}
	if ((size_t)n != sizeof(req) || req.magic != NIC_ABI_MAGIC || req.reserved0 ||
	    memcmp(req.reserved, (uint8_t[sizeof(req.reserved)]){0}, sizeof(req.reserved))) {
		nic_warn(&nic->log, "management client pid %u sent a malformed request", conn->pid);
		send_msg(conn->fd, 0, NIC_STATUS_BAD_FIELD, NULL, 0, 0, true);
		nic_conn_close(nic, conn);
		return;
	}
	/* Replies may be long: let them block, but only for a bounded time. */
	setsockopt(conn->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	switch (req.op) {
	case NIC_MGMT_STATS:
		mgmt_fill_stats(nic, &st);
		err = send_msg(conn->fd, req.op, NIC_STATUS_OK, &st, 1, sizeof(st), true);
		break;
	case NIC_MGMT_TPT: err = send_tpt(nic, conn->fd); break;
	case NIC_MGMT_FAULTS: err = send_faults(nic, conn->fd); break;
	case NIC_MGMT_HOSTS: err = send_hosts(nic, conn->fd); break;
	default: err = send_msg(conn->fd, req.op, NIC_STATUS_BAD_OPCODE, NULL, 0, 0, true); break;
	}
	if (err < 0) {
		nic_warn(&nic->log, "management client pid %u stopped reading; dropped", conn->pid);
		nic_conn_close(nic, conn);
	}
}
