#include "nstnic.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fab.h"
#include "mgmt_client.h"
#include "fab_addr.h"
#include "nicsim_host.h"
#include "nstcapture.h"
#include "nstest.h"
#include "nstnet.h"

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

/* A question to the NIC at sock and its last answer, for nst_wait_until. */
struct stat_wait {
	const char *sock;
	size_t off;
	uint64_t min, v;
};

static bool stat_reached(void *arg)
{
	struct stat_wait *w = arg;

	w->v = nst_nic_stat(w->sock, w->off);
	return w->v >= w->min;
}

uint64_t nst_wait_nic_stat(const char *sock, size_t off, uint64_t min, int timeout_ms)
{
	struct stat_wait w = {.sock = sock, .off = off, .min = min};

	(void)nst_wait_until(stat_reached, &w, timeout_ms, 2);
	return w.v;
}

struct tpt_wait {
	const char *sock;
	int want, n;
};

static bool tpt_reached(void *arg)
{
	struct tpt_wait *w = arg;

	w->n = nst_tpt_in_use(w->sock);
	return w->n == w->want;
}

int nst_wait_tpt_in_use(const char *sock, int want, int timeout_ms)
{
	struct tpt_wait w = {.sock = sock, .want = want};

	(void)nst_wait_until(tpt_reached, &w, timeout_ms, 10);
	return w.n;
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

/*
 * Open the fabric that carries the frames NIC from sends: dir's own, or,
 * when dir has none (the NICs run in network namespaces, each with a
 * directory of its own, nstspidata.h), the one of the directory its socket
 * in dir links to.  The destination gets a slot on it if it has none: a
 * NIC reached over UDP.
 */
static int fabric_of(const char *dir, uint32_t from, uint32_t to, struct fab **f)
{
	char path[PATH_MAX], target[PATH_MAX], a[FAB_ADDR_STRLEN];
	ssize_t n;
	char *slash;
	int err;

	snprintf(path, sizeof(path), "%s/fabric.shm", dir);
	if (access(path, F_OK) == 0)
		return fab_open(dir, f);
	snprintf(path, sizeof(path), "%s/nic-%s.sock", dir, fab_addr_format(from, a, sizeof(a)));
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return -ENOENT;
	target[n] = '\0';
	slash = strrchr(target, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	if (target[0] != '/') {
		if (strlen(dir) + 1 + strlen(target) >= sizeof(path))
			return -ENAMETOOLONG;
		snprintf(path, sizeof(path), "%s/", dir);
		strcat(path, target);
	} else {
		memcpy(path, target, strlen(target) + 1);
	}
	err = fab_open(path, f);
	if (!err && (err = fab_port_claim(*f, to)) < 0)
		fab_close(*f);
	return err;
}

int nst_link_down(const char *dir, uint32_t from, uint32_t to, bool down)
{
	struct fab *f;
	struct fab_link_config cfg;
	int err = fabric_of(dir, from, to, &f);

	if (err)
		return err;
	fab_link_config_default(&cfg);
	cfg.flags = down ? FAB_LINK_DOWN : 0;
	err = fab_link_set(f, from, to, &cfg, FAB_LF_DOWN);
	fab_close(f);
	return err;
}

int nst_nic_state(const char *sock, struct nst_nic_state *st)
{
	struct nic_stats s;
	int err = nst_nic_stats(sock, &s);

	if (err)
		return err;
	st->tpt_in_use = (long long)s.tpt_in_use;
	st->qps = (long long)s.qps;
	st->contexts = (long long)s.contexts;
	return 0;
}

int nst_nics_start(const char *dir, struct nst_nic *nics, size_t n, int timeout_ms)
{
	for (size_t i = 0; i < n; i++) {
		struct nst_nic *x = &nics[i];
		int err;

		snprintf(x->sock, sizeof(x->sock), "%s/nic-%s.sock", x->dir ? x->dir : dir,
			 x->addr);
		x->pid = nst_start_nic_in(x->netns, x->dir ? x->dir : dir, x->addr, x->extra,
					  timeout_ms);
		if (x->pid < 0)
			return x->pid;
		err = nst_nic_state(x->sock, &x->base);
		if (err)
			return err;
	}
	return 0;
}

static bool same_state(const struct nst_nic_state *a, const struct nst_nic_state *b)
{
	return a->tpt_in_use == b->tpt_in_use && a->qps == b->qps && a->contexts == b->contexts;
}

/* A NIC's state read into now (err: how reading it went), to compare with
 * its recorded one. */
struct settle_wait {
	const struct nst_nic *x;
	struct nst_nic_state *now;
	int *err;
};

static bool at_base(void *arg)
{
	struct settle_wait *w = arg;

	*w->err = nst_nic_state(w->x->sock, w->now);
	return !*w->err && same_state(w->now, &w->x->base);
}

/* Wait until the NIC is at its recorded state; the last state seen in now. */
static bool nic_settled(const struct nst_nic *x, int timeout_ms, struct nst_nic_state *now,
			int *err)
{
	struct settle_wait w = {x, now, err};

	/* A bounded wait for a condition: a NIC frees what a closing context
	 * held as its event loop gets to it. */
	return nst_wait_until(at_base, &w, timeout_ms, 5);
}

/* A NIC that stopped answering: how it ended, if it did, and the end of
 * its log (beside its socket), so that a failure on a CI runner explains
 * itself. */
static void say_why_silent(const char *who, const struct nst_nic *x)
{
	char log[sizeof(x->sock) + 8], line[512];
	size_t len = strlen(x->sock);
	siginfo_t si = {0};
	FILE *f;
	long end;

	/* Not reaped (WNOWAIT): whoever stops it still owns the pid. */
	if (x->pid > 0 && waitid(P_PID, (id_t)x->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	    si.si_pid == x->pid)
		fprintf(stderr, "%s: NIC %s (pid %d) has ended: %s %d\n", who, x->addr, (int)x->pid,
			si.si_code == CLD_EXITED ? "exit status" : "signal", si.si_status);
	if (len < 5 || strcmp(x->sock + len - 5, ".sock") != 0)
		return;
	snprintf(log, sizeof(log), "%.*s.log", (int)(len - 5), x->sock);
	f = fopen(log, "r");
	if (!f)
		return;
	/* The last 4 KiB or so. */
	if (fseek(f, 0, SEEK_END) == 0 && (end = ftell(f)) > 4096) {
		fseek(f, end - 4096, SEEK_SET);
		if (!fgets(line, sizeof(line), f)) /* a partial line */
			line[0] = 0;
	} else {
		rewind(f);
	}
	fprintf(stderr, "%s: the end of %s:\n", who, log);
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "  | %s", line);
	fclose(f);
}

static void say_state(const char *who, const struct nst_nic *x, const struct nst_nic_state *now,
		      int err, const char *then)
{
	if (err) {
		fprintf(stderr, "%s: NIC %s does not answer (%s); %s\n", who, x->addr,
			strerror(-err), then);
		say_why_silent(who, x);
	} else
		fprintf(stderr,
			"%s: NIC %s holds %lld TPT entries, %lld QPs, %lld contexts (want %lld, "
			"%lld, %lld), left by an earlier test; %s\n",
			who, x->addr, now->tpt_in_use, now->qps, now->contexts, x->base.tpt_in_use,
			x->base.qps, x->base.contexts, then);
}

bool nst_nics_settled(const struct nst_nic *nics, size_t n, int timeout_ms, const char *who)
{
	bool ok = true;

	for (size_t i = 0; i < n; i++) {
		struct nst_nic_state now;
		int err;

		if (nics[i].pid > 0 && !nic_settled(&nics[i], timeout_ms, &now, &err)) {
			say_state(who, &nics[i], &now, err, "not at its starting state");
			ok = false;
		}
	}
	return ok;
}

int nst_nics_ready(const char *dir, struct nst_nic *nics, size_t n, int timeout_ms)
{
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		struct nst_nic *x = &nics[i];
		struct nst_nic_state now;
		int err;

		if (x->pid <= 0 || nic_settled(x, timeout_ms, &now, &err))
			continue;
		say_state(program_invocation_short_name, x, &now, err, "restarting it");
		nst_stop(x->pid, timeout_ms);
		x->pid = nst_start_nic_in(x->netns, x->dir ? x->dir : dir, x->addr, x->extra,
					  timeout_ms);
		if (x->pid < 0 || !nic_settled(x, timeout_ms, &now, &err)) {
			fprintf(stderr, "%s: NIC %s did not come back as it was\n",
				program_invocation_short_name, x->addr);
			rc = rc ? rc : (x->pid < 0 ? x->pid : -EIO);
		}
	}
	return rc;
}

int nst_memfd_refs(pid_t pid, const char *name, int *fds, int *maps)
{
	char path[64], link[512], line[1024], want[300];
	struct dirent *e;
	DIR *d;
	FILE *f;

	*fds = *maps = 0;
	snprintf(want, sizeof(want), "/memfd:%s ", name);
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		char fd_path[600];
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(fd_path, sizeof(fd_path), "%s/%s", path, e->d_name);
		n = readlink(fd_path, link, sizeof(link) - 2);
		if (n <= 0)
			continue;
		link[n] = ' ';
		link[n + 1] = '\0';
		if (strstr(link, want))
			(*fds)++;
	}
	closedir(d);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = ' ';
		if (strstr(line, want))
			(*maps)++;
	}
	fclose(f);
	return 0;
}

int nst_link_faults(const char *dir, uint32_t a, uint32_t b, uint32_t loss_ppb, uint32_t dup_ppb,
		    uint32_t reorder_ppb, uint32_t corrupt_ppb, bool down)
{
	struct fab_link_config cfg;
	int err = 0;

	fab_link_config_default(&cfg);
	cfg.loss_ppb = loss_ppb;
	cfg.dup_ppb = dup_ppb;
	cfg.reorder_ppb = reorder_ppb;
	cfg.corrupt_ppb = corrupt_ppb;
	cfg.flags = down ? FAB_LINK_DOWN : 0;
	for (int dirn = 0; dirn < 2 && !err; dirn++) {
		uint32_t from = dirn ? b : a, to = dirn ? a : b;
		struct fab *f;

		err = fabric_of(dir, from, to, &f);
		if (err)
			break;
		err = fab_link_set(f, from, to, &cfg, FAB_LF_ALL & ~FAB_LF_SEED);
		fab_close(f);
	}
	return err;
}

int nst_nics_udp(const char *dir, struct nst_nic *nics, size_t n, struct nst_net *net,
		 const char *unreachable)
{
	char why[128], path[PATH_MAX], link[PATH_MAX], target[PATH_MAX];

	if (n > NST_NET_MAX)
		return -EINVAL;
	if (!nst_net_available(why, sizeof(why))) {
		fprintf(stderr, "cannot make the test network: %s\n", why);
		return -EPERM;
	}
	if (nst_net_up(net, (unsigned)n, 1500) < 0)
		return -EIO;
	for (size_t i = 0; i < n; i++) {
		struct nst_nic *x = &nics[i];
		const char *one[] = {x->addr, NULL};
		const char **extra;
		size_t k = 0, e = 0;
		char *own;

		/* Host i+1 of the network has address 198.18.0.(i+1). */
		snprintf(path, sizeof(path), "198.18.0.%zu", i + 1);
		if (strcmp(path, x->addr) != 0)
			return -EINVAL;
		snprintf(path, sizeof(path), "%s/host-%s", dir, x->addr);
		own = strdup(path);
		while (x->extra && x->extra[e])
			e++;
		extra = calloc(e + 2, sizeof(*extra));
		if (!own || !extra || mkdir(own, 0700) < 0 || nst_make_fabric(own, one) < 0)
			return -EIO;
		for (; k < e; k++)
			extra[k] = x->extra[k];
		extra[k] = "--udp";
		x->extra = extra;
		x->netns = net->host[i + 1];
		x->dir = own;
		snprintf(link, sizeof(link), "%s/nic-%s.sock", dir, x->addr);
		snprintf(target, sizeof(target), "host-%s/nic-%s.sock", x->addr, x->addr);
		if (symlink(target, link) < 0)
			return -errno;
		if (unreachable &&
		    nst_net_ip(x->netns, (const char *const[]){"route", "add", "unreachable",
							       unreachable, NULL}) != 0)
			return -EIO;
	}
	return 0;
}
