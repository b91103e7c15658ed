#include "nstnic.h"

#include <string.h>
#include <time.h>

#include "fab.h"
#include "../../nicsim/mgmt_client.h"
#include "fab_addr.h"
#include "nicsim_host.h"
#include "nstcapture.h"
#include "nstest.h"

int nst_tpt_in_use(const char *sock)
{
	struct nic_cmd c = {.opcode = NIC_CMD_QUERY_DEVICE};
	struct nic_host *h;
	struct nic_cpl cpl;
	int n = -1;

	if (nic_host_attach(sock, &h) < 0)
		return -1;
	if (nic_host_cmd(h, &c, &cpl, NIC_HOST_CMD_TIMEOUT_MS) == 0 && cpl.status == NIC_STATUS_OK)
		n = (int)cpl.u.query_device.tpt_in_use;
	nic_host_detach(h);
	return n;
}

int nst_nic_stats(const char *sock, struct nic_stats *out)
{
	struct mgmt_client c;
	int err = mgmt_client_open(&c, sock, 5000);

	if (err)
		return err;
	err = mgmt_client_stats(&c, out);
	mgmt_client_close(&c);
	return err;
}

uint64_t nst_nic_stat(const char *sock, size_t off)
{
	struct nic_stats st;
	uint64_t v = 0;

	if (off + sizeof(v) <= sizeof(st) && nst_nic_stats(sock, &st) == 0)
		memcpy(&v, (const char *)&st + off, sizeof(v));
	return v;
}

uint64_t nst_wait_nic_stat(const char *sock, size_t off, uint64_t min, int timeout_ms)
{
	const struct timespec pause = {.tv_nsec = 2 * 1000000L};
	uint64_t deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;
	uint64_t v;

	/* A bounded back-off between questions to the NIC. */
	while ((v = nst_nic_stat(sock, off)) < min && nst_now_ns() < deadline)
		nanosleep(&pause, NULL);
	return v;
}

int nst_wait_tpt_in_use(const char *sock, int want, int timeout_ms)
{
	const struct timespec pause = {.tv_nsec = 10 * 1000000L};
	uint64_t deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;
	int n;

	while ((n = nst_tpt_in_use(sock)) != want && nst_now_ns() < deadline)
		nanosleep(&pause, NULL);
	return n;
}

int nst_make_fabric(const char *dir, const char *const *addrs)
{
	uint32_t a[64];
	size_t n = 0;
	struct fab_config cfg = {0};
	int rc;

	for (; addrs && addrs[n] && n < 64; n++) {
		int err = fab_addr_parse(addrs[n], &a[n]);

		if (err)
			return err;
	}
	cfg.addrs = a;
	cfg.naddrs = n;
	rc = fab_create(dir, &cfg);
	if (!rc)
		nst_capture_wait(dir); /* NICSIM_CAPTURE: the first frames too */
	return rc;
}

int nst_link_down(const char *dir, uint32_t from, uint32_t to, bool down)
{
	struct fab *f;
	struct fab_link_config cfg;
	int err = fab_open(dir, &f);

	if (err)
		return err;
	fab_link_config_default(&cfg);
	cfg.flags = down ? FAB_LINK_DOWN : 0;
	err = fab_link_set(f, from, to, &cfg, FAB_LF_DOWN);
	fab_close(f);
	return err;
}
