/* The NICs of a run directory, by the names of their files (cli.h). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fab_addr.h"
#include "nicsim_abi.h"

static int cmp_addr(const void *a, const void *b)
{
	uint32_t x = ntohl(*(const uint32_t *)a), y = ntohl(*(const uint32_t *)b);

	return (x > y) - (x < y);
}

/* The address in a name nic-<addr><suffix>, or -EINVAL for any other name. */
static int name_addr(const char *name, const char *suffix, uint32_t *addr)
{
	size_t plen = strlen(NIC_SOCK_PREFIX), slen = strlen(suffix), len = strlen(name);
	char text[FAB_ADDR_STRLEN];

	if (len <= plen + slen || len - plen - slen >= sizeof(text))
		return -EINVAL;
	if (strncmp(name, NIC_SOCK_PREFIX, plen) || strcmp(name + len - slen, suffix))
		return -EINVAL;
	memcpy(text, name + plen, len - plen - slen);
	text[len - plen - slen] = '\0';
	return fab_addr_parse(text, addr);
}

int cli_dir_list(const char *dir, const char *suffix, uint32_t **addrs, size_t *count)
{
	uint32_t *list = NULL, *grown, addr;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int rc = 0;

	*addrs = NULL;
	*count = 0;
	d = opendir(dir);
	if (!d)
		return -errno;
	for (;;) {
		/* readdir reports errors only through errno. */
		errno = 0;
		de = readdir(d);
		if (!de) {
			rc = errno ? -errno : 0;
			break;
		}
		if (name_addr(de->d_name, suffix, &addr))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			grown = realloc(list, cap * sizeof(*list));
			if (!grown) {
				rc = -ENOMEM;
				break;
			}
			list = grown;
		}
		list[n++] = addr;
	}
	closedir(d);
	if (rc) {
		free(list);
		return rc;
	}
	if (n)
		qsort(list, n, sizeof(*list), cmp_addr);
	*addrs = list;
	*count = n;
	return 0;
}
