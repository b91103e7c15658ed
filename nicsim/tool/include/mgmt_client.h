/*
 * Management client: the CLI's side of nicsim_mgmt.h.
 *
 * mgmt_client_open() connects to a NIC's socket, says hello as
 * NIC_ROLE_MGMT and checks the reply; the request functions send one
 * struct nic_mgmt_req and collect every reply message up to the one that
 * carries NIC_MGMT_F_LAST.  The NIC is treated as untrusted input: every
 * message's length, magic, op and record count is checked, descriptors it
 * should not send are refused, and listings are capped in size.
 *
 * Every socket operation is bounded by the client's timeout: open as a whole,
 * and each message of a reply (a long listing may take several timeouts in
 * total, as long as the NIC keeps sending).
 *
 * Errors: 0 or a negative errno.  On failure, mgmt_client.what says in words
 * what went wrong (a static string), and mgmt_client.status holds the NIC's
 * status when the NIC refused (nic_status_str() names it).
 */
#ifndef NICSIM_MGMT_CLIENT_H
#define NICSIM_MGMT_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "nicsim_abi.h"
#include "nicsim_mgmt.h"

/* Longest listing accepted from a NIC, in records: a TPT cannot hold more. */
#define MGMT_CLIENT_MAX_RECORDS NIC_TPT_MAX_CAPACITY

struct mgmt_client {
	int fd;
	int timeout_ms;
	struct nic_hello_reply hello; /* the NIC's reply, valid after open */
	unsigned status;              /* NIC status of the last refusal, else OK */
	const char *what;             /* what failed last, or NULL */
	unsigned char *buf;           /* one message, NIC_MGMT_MSG_MAX bytes */
};

/*
 * Connect to the NIC listening at sock_path and complete the handshake
 * within timeout_ms.  On success the client owns a socket and a buffer
 * (mgmt_client_close() releases them); on failure nothing is left open.
 * Returns 0, -ENOENT (no socket file), -ECONNREFUSED (nobody listening),
 * -ETIMEDOUT, -EPROTO (malformed or foreign reply), -ENAMETOOLONG, -ENOMEM,
 * or the NIC's refusal mapped with nic_status_errno().
 */
int mgmt_client_open(struct mgmt_client *c, const char *sock_path, int timeout_ms);

/* Close the connection; accepts a client that was never opened or closed. */
void mgmt_client_close(struct mgmt_client *c);

/* The NIC's counters.  Returns 0 or an error as for mgmt_client_list(). */
int mgmt_client_stats(struct mgmt_client *c, struct nic_stats *stats);

/*
 * Send request op and collect the records of every reply message, each
 * rec_size bytes, into a malloc'ed array (*recs, NULL when *count is 0;
 * the caller frees it).  Returns 0, -ETIMEDOUT, -ECONNRESET (the NIC closed
 * the connection), -EPROTO (a malformed reply), -EMSGSIZE (a message over
 * NIC_MGMT_MSG_MAX), -E2BIG (more than MGMT_CLIENT_MAX_RECORDS), -ENOMEM, or
 * the NIC's error status mapped with nic_status_errno().  On failure *recs
 * is NULL and *count 0.
 */
int mgmt_client_list(struct mgmt_client *c, uint16_t op, size_t rec_size, void **recs,
		     size_t *count);

/* Typed forms of mgmt_client_list(). */
int mgmt_client_tpt(struct mgmt_client *c, struct nic_mgmt_tpt_rec **recs, size_t *count);
int mgmt_client_faults(struct mgmt_client *c, struct nic_mgmt_fault_rec **recs, size_t *count);

#endif /* NICSIM_MGMT_CLIENT_H */
