/*
 * libFuzzer target of the management protocol's parsers: the replies the
 * tool's client reads from a NIC (nicsim/tool/mgmt_client.c,
 * mgmt_client_list: headers, record counts, the listing across messages)
 * and the requests the NIC reads from a client (nicsim/mgmt.c,
 * mgmt_req_valid).  The client talks over a socket pair in this process:
 * the fuzzed replies wait in the socket before it asks, and the other end
 * is shut for writing after them, so it never waits.
 *
 * Input: one byte choosing the listing (STATS, TPT, FAULTS or HOSTS, and
 * so the record size), then messages, each a 2-byte little-endian length
 * and that many bytes (the last one takes what is left).
 *
 * What it asserts (__builtin_trap): the client returns 0 with the records
 * the messages carried, in order, and no more than MGMT_CLIENT_MAX_RECORDS
 * (NULL for none), or a negative errno with a reason and nothing
 * allocated; it never waits (-ETIMEDOUT comes only from a reply with the
 * status NIC_STATUS_TIMED_OUT).  Each message, taken as a request, passes
 * mgmt_req_valid only if it is 16 bytes with the magic and zero reserved
 * fields.  Seeds: tests/fuzz/corpus/mgmt/ (listings of each kind).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mgmt_client.h"
#include "nic_priv.h"
#include "nicsim_mgmt.h"
#include "fuzz.h"

static const struct {
	uint16_t op;
	size_t rec_size;
} kinds[] = {
    {NIC_MGMT_STATS, sizeof(struct nic_stats)},
    {NIC_MGMT_TPT, sizeof(struct nic_mgmt_tpt_rec)},
    {NIC_MGMT_FAULTS, sizeof(struct nic_mgmt_fault_rec)},
    {NIC_MGMT_HOSTS, sizeof(struct nic_mgmt_host_rec)},
};

/* The NIC's check of a request, against its definition. */
static void check_request(const uint8_t *msg, size_t len)
{
	struct nic_mgmt_req req;
	size_t k = len < sizeof(req) ? len : sizeof(req);
	bool zero = true;

	memset(&req, 0, sizeof(req));
	memcpy(&req, msg, k);
	for (size_t i = 0; i < sizeof(req.reserved); i++)
		zero &= req.reserved[i] == 0;
	CHECK(mgmt_req_valid(&req, len) ==
	      (len == sizeof(req) && req.magic == NIC_ABI_MAGIC && !req.reserved0 && zero));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char buf[NIC_MGMT_MSG_MAX], records[1u << 16];
	struct mgmt_client c;
	size_t at = 1, carried = 0, count = 0, rec_size;
	void *recs = NULL;
	uint16_t op;
	int sv[2], rc;

	if (size < 1)
		return 0;
	op = kinds[data[0] % 4].op;
	rec_size = kinds[data[0] % 4].rec_size;
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	/* The replies, queued before the request; and what they carry past
	 * their headers, which a listing must return in order. */
	while (at < size) {
		size_t len = size - at;

		if (len >= 2) {
			size_t want = (size_t)(data[at] | data[at + 1] << 8);

			at += 2;
			len = size - at < want ? size - at : want;
		} else {
			at = size; /* a lone byte: an empty message */
			len = 0;
		}
		check_request(data + at, len);
		if (send(sv[1], data + at, len, MSG_NOSIGNAL) != (ssize_t)len)
			break;
		if (len > sizeof(struct nic_mgmt_hdr) &&
		    carried + len - sizeof(struct nic_mgmt_hdr) <= sizeof(records)) {
			memcpy(records + carried, data + at + sizeof(struct nic_mgmt_hdr),
			       len - sizeof(struct nic_mgmt_hdr));
			carried += len - sizeof(struct nic_mgmt_hdr);
		}
		at += len;
	}
	CHECK(shutdown(sv[1], SHUT_WR) == 0);

	memset(&c, 0, sizeof(c));
	c.fd = sv[0];
	c.timeout_ms = 60000; /* never reached: every answer is already there */
	c.buf = buf;
	rc = mgmt_client_list(&c, op, rec_size, &recs, &count);
	if (rc == 0) {
		CHECK(count <= MGMT_CLIENT_MAX_RECORDS && (count == 0) == (recs == NULL));
		CHECK(count * rec_size <= carried &&
		      (!count || !memcmp(recs, records, count * rec_size)));
	} else {
		/* -ETIMEDOUT only as the NIC's own refusal, never from waiting. */
		CHECK(rc < 0 && (rc != -ETIMEDOUT || c.status == NIC_STATUS_TIMED_OUT) && c.what &&
		      !recs && !count);
	}
	free(recs);
	close(sv[0]);
	close(sv[1]);
	return 0;
}
