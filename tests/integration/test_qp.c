/*
 * Queue pairs at a real nicsimd, through raw commands: creation in a slot of
 * the context segment, numbering, refusals, and release when the context
 * goes away.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>

#include "nicsim_host.h"
#include "nstest.h"
#include "nstnic.h"

#define ADDR "198.18.0.1"
#define WAIT_MS 5000

static char dir[256], sock[300];
static struct nst_nic nics[] = {{.addr = ADDR, .extra = NULL}};
#define NNICS (sizeof(nics) / sizeof(nics[0]))
#define nic (nics[0].pid)

static uint16_t qp_cmd(struct nic_host *h, uint16_t opcode, uint32_t slot, uint32_t qpn,
		       uint32_t *out)
{
	struct nic_cmd c = {.opcode = opcode};
	struct nic_cpl cpl;

	c.u.qp.slot = slot;
	c.u.qp.qpn = qpn;
	NST_REQUIRE_EQ(nic_host_cmd(h, &c, &cpl, WAIT_MS), 0);
	if (out)
		*out = cpl.key;
	return cpl.status;
}

static struct nic_qp_hdr *slot_hdr(struct nic_host *h, uint32_t slot)
{
	size_t size;
	char *seg = nic_host_segment(h, &size);

	return (struct nic_qp_hdr *)(seg + NIC_CTX_QP_OFF + (size_t)slot * NIC_QP_SLOT_SIZE);
}

static void test_create_and_destroy(void)
{
	struct nic_host *h;
	uint32_t a, b;

	NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
	NST_EQ(qp_cmd(h, NIC_CMD_CREATE_QP, 0, 0, &a), NIC_STATUS_OK);
	NST_EQ(qp_cmd(h, NIC_CMD_CREATE_QP, NIC_QP_SLOTS - 1, 0, &b), NIC_STATUS_OK);
	NST_TRUE(a > 1 && a <= NIC_QPN_MAX && b > 1 && b <= NIC_QPN_MAX && a != b);
	/* The slot header shows the number and state. */
	NST_EQ(slot_hdr(h, 0)->qpn, a);
	NST_EQ(slot_hdr(h, 0)->state, NIC_QPS_INIT);
	NST_EQ(slot_hdr(h, NIC_QP_SLOTS - 1)->qpn, b);
	/* A slot in use, a slot past the end, an unknown number. */
	NST_EQ(qp_cmd(h, NIC_CMD_CREATE_QP, 0, 0, NULL), NIC_STATUS_BAD_QP);
	NST_EQ(qp_cmd(h, NIC_CMD_CREATE_QP, NIC_QP_SLOTS, 0, NULL), NIC_STATUS_BAD_QP);
	NST_EQ(qp_cmd(h, NIC_CMD_DESTROY_QP, 0, a ^ 0x1000, NULL), NIC_STATUS_BAD_QP);
	NST_EQ(qp_cmd(h, NIC_CMD_DESTROY_QP, 0, a, NULL), NIC_STATUS_OK);
	NST_EQ(slot_hdr(h, 0)->state, NIC_QPS_FREE);
	NST_EQ(qp_cmd(h, NIC_CMD_DESTROY_QP, 0, a, NULL), NIC_STATUS_BAD_QP);
	/* The slot is free again; the number is not reused at once. */
	NST_EQ(qp_cmd(h, NIC_CMD_CREATE_QP, 0, 0, &b), NIC_STATUS_OK);
	NST_NE(b, a);
	nic_host_detach(h);
}

static void test_other_context_cannot_destroy(void)
{
	struct nic_host *h, *other;
	uint32_t qpn;

	NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock, &other), 0);
	NST_EQ(qp_cmd(h, NIC_CMD_CREATE_QP, 5, 0, &qpn), NIC_STATUS_OK);
	NST_EQ(qp_cmd(other, NIC_CMD_DESTROY_QP, 0, qpn, NULL), NIC_STATUS_BAD_QP);
	/* Slots are per context: the other one has its own slot 5. */
	NST_EQ(qp_cmd(other, NIC_CMD_CREATE_QP, 5, 0, NULL), NIC_STATUS_OK);
	NST_EQ(qp_cmd(h, NIC_CMD_DESTROY_QP, 0, qpn, NULL), NIC_STATUS_OK);
	nic_host_detach(other);
	nic_host_detach(h);
}

/* In a child: create every slot's QP, report, wait to be killed. */
static int hold_qps(void *arg)
{
	int fd = *(int *)arg;
	struct nic_host *h;

	if (nic_host_attach(sock, &h) < 0)
		return 1;
	for (uint32_t i = 0; i < NIC_QP_SLOTS; i++) {
		struct nic_cmd c = {.opcode = NIC_CMD_CREATE_QP};
		struct nic_cpl cpl;

		c.u.qp.slot = i;
		if (nic_host_cmd(h, &c, &cpl, WAIT_MS) < 0 || cpl.status != NIC_STATUS_OK)
			return 2;
	}
	if (write(fd, "q", 1) != 1)
		return 3;
	pause();
	return 0;
}

/* QPs in use at the NIC, from `nicsim stats --json`. */
static int qps_in_use(void)
{
	const char *argv[] = {nst_bin("nicsim"), "--dir", dir, "stats", "--json", NULL};
	char out[16384];
	const char *p;

	if (nst_run(argv, out, sizeof(out), WAIT_MS) != 0)
		return -1;
	p = strstr(out, "\"qps\":");
	return p ? atoi(p + 6) : -1;
}

static bool qps_back_to(void *before)
{
	return qps_in_use() == *(const int *)before;
}

static void test_qps_released_when_host_dies(void)
{
	int fds[2], before = qps_in_use();
	char c;
	pid_t child;

	NST_REQUIRE_GE(before, 0);
	NST_REQUIRE_EQ(pipe(fds), 0);
	child = nst_fork(hold_qps, &fds[1]);
	NST_REQUIRE_GT(child, 0);
	close(fds[1]);
	NST_REQUIRE_EQ(read(fds[0], &c, 1), 1);
	close(fds[0]);
	NST_EQ(qps_in_use(), before + (int)NIC_QP_SLOTS);
	kill(child, SIGKILL);
	nst_wait(child, WAIT_MS);
	(void)nst_wait_until(qps_back_to, &before, WAIT_MS, 10);
	NST_EQ(qps_in_use(), before);
}

static int init(void)
{
	if (nst_tmpdir(dir, sizeof(dir), "qp") < 0)
		return -1;
	snprintf(sock, sizeof(sock), "%s/nic-" ADDR ".sock", dir);
	return nst_nics_start(dir, nics, NNICS, WAIT_MS) < 0 ? -1 : 0;
}

/* Each test from the NIC as it was started: one a failed test left holding
 * contexts, QPs or TPT entries (or that died) is restarted (nstnic.h). */
static void setup(void)
{
	NST_EQ(nst_nics_ready(dir, nics, NNICS, WAIT_MS), 0);
}

static int clean(void)
{
	return nst_stop_nics_clean(dir, &nic, 1, WAIT_MS);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"create_and_destroy", test_create_and_destroy},
	    {"other_context_cannot_destroy", test_other_context_cannot_destroy},
	    {"qps_released_when_host_dies", test_qps_released_when_host_dies},
	    {NULL, NULL},
	};

	static const struct nst_suite suite = {
	    .name = "qp", .tests = tests, .init = init, .clean = clean, .setup = setup};

	return nst_run_suite(argc, argv, &suite);
}
