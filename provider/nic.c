/*
 * NICs as the provider sees them: found by address in the run directory
 * (one socket per NIC, named by nic_sock_path()), attached lazily on the
 * first bind, shared by every socket bound to the same NIC, detached when the
 * last such socket closes.
 *
 * A NIC that stops answering (a command times out, the socket hangs up, the
 * context is put in error) is marked down and detached at once: closing the
 * attachment makes the NIC tear the context down, so none of its TPT entries
 * can outlive the provider's knowledge of them.  Later commands fail with
 * -ENETDOWN; the records of the down NIC are released as their sockets close.
 * A new bind to the same address attaches afresh.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "driver.h"
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

/* What INADDR_ANY means: the NIC with the lowest address in the directory. */
static int lowest_nic(const char *dir, uint32_t *addr)
{
	DIR *d = dir[0] ? opendir(dir) : NULL;
	struct dirent *de;
	bool found = false;
	uint32_t best = 0;

	if (!d)
		return -EADDRNOTAVAIL;
	while ((de = readdir(d))) {
		uint32_t a;

		if (de->d_type != DT_SOCK && de->d_type != DT_UNKNOWN)
			continue;
		if (parse_sock_name(de->d_name, &a) || a == htonl(INADDR_ANY))
			continue;
		if (!found || ntohl(a) < ntohl(best))
			best = a;
		found = true;
	}
	closedir(d);
	if (!found)
		return -EADDRNOTAVAIL;
	*addr = best;
	return 0;
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
		if (err)
			return err;
	}
	for (nic = p->nics; nic; nic = nic->next) {
		if (!nic->down && nic->addr == addr) {
			nic->users++;
			*out = nic;
			return 0;
		}
	}
	if (!p->dir[0] || nic_sock_path(path, sizeof(path), p->dir, addr))
		return -EADDRNOTAVAIL;
	if (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return -EADDRNOTAVAIL;

	nic = calloc(1, sizeof(*nic));
	if (!nic)
		return -ENOBUFS;
	/* The socket is there, so any failure now is a NIC that is not working. */
	err = nic_host_attach(path, &nic->host);
	if (err) {
		free(nic);
		return err == -ENOMEM ? -ENOBUFS : -ENETDOWN;
	}
	info = nic_host_info(nic->host);
	if (info->nic_addr != addr) {
		/* A NIC answering under another NIC's name is misconfigured. */
		nic_host_detach(nic->host);
		free(nic);
		return -ENETDOWN;
	}
	nic->addr = addr;
	nic->caps = info->caps;
	nic->max_reg_len = info->max_reg_len;
	nic->users = 1;
	nic->next = p->nics;
	p->nics = nic;
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
	nic_host_detach(nic->host);
	free(nic);
}

static void nic_down(struct prov_nic *nic)
{
	nic->down = true;
	nic_host_detach(nic->host);
	nic->host = NULL;
}

int prov_nic_post(struct prov_nic *nic, struct nic_cmd *cmd)
{
	if (nic->down)
		return -ENETDOWN;
	if (nic_host_post(nic->host, cmd)) {
		nic_down(nic);
		return -ENETDOWN;
	}
	return 0;
}

int prov_nic_wait(struct prov_nic *nic, const struct nic_cmd *cmd, uint32_t *key)
{
	struct nic_cpl cpl;

	if (nic->down)
		return -ENETDOWN;
	if (nic_host_wait(nic->host, cmd->tag, &cpl, NIC_HOST_CMD_TIMEOUT_MS) ||
	    cpl.opcode != cmd->opcode) {
		nic_down(nic);
		return -ENETDOWN;
	}
	if (cpl.status != NIC_STATUS_OK)
		return nic_status_errno(cpl.status);
	if (key)
		*key = cpl.key;
	return 0;
}

int prov_nic_exec(struct prov_nic *nic, struct nic_cmd *cmd, uint32_t *key)
{
	int err = prov_nic_post(nic, cmd);

	return err ? err : prov_nic_wait(nic, cmd, key);
}
