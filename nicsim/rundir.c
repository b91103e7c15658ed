#include "rundir.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fab_addr.h"
#include "nicsim_abi.h"

/* The result of snprintf(buf, size, ...) = n: -ENAMETOOLONG when truncated. */
static int put_path(size_t size, int n)
{
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return 0;
}

int nic_run_dir(char *buf, size_t size, const char *opt)
{
	const char *env;
	size_t len;
	int rc;

	if (!buf || size == 0)
		return -EINVAL;
	if (opt) {
		if (!*opt)
			return -EINVAL;
		rc = put_path(size, snprintf(buf, size, "%s", opt));
	} else if ((env = getenv("NICSIM_DIR")) && *env) {
		rc = put_path(size, snprintf(buf, size, "%s", env));
	} else if ((env = getenv("XDG_RUNTIME_DIR")) && env[0] == '/') {
		/* The XDG base directory specification says relative paths are
		 * invalid and must be ignored. */
		rc = put_path(size, snprintf(buf, size, "%s/nicsim", env));
	} else {
		rc = put_path(size, snprintf(buf, size, "/tmp/nicsim-%u", (unsigned)getuid()));
	}
	if (rc)
		return rc;
	len = strlen(buf);
	while (len > 1 && buf[len - 1] == '/')
		buf[--len] = '\0';
	return 0;
}

/* mkdir that succeeds when path already is a directory. */
static int make_one(const char *path)
{
	struct stat st;
	int err;

	if (mkdir(path, 0700) == 0)
		return 0;
	err = errno;
	/* An existing parent may refuse mkdir with EACCES or EROFS rather than
	 * EEXIST; what matters is whether it is a directory. */
	if (stat(path, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	return -err;
}

int nic_run_dir_make(const char *dir)
{
	char path[PATH_MAX];
	char *p;
	int rc;

	if (!dir || !*dir)
		return -EINVAL;
	rc = put_path(sizeof(path), snprintf(path, sizeof(path), "%s", dir));
	if (rc)
		return rc;
	for (p = path + 1; *p; p++) {
		if (*p != '/' || p[-1] == '/')
			continue;
		*p = '\0';
		rc = make_one(path);
		*p = '/';
		if (rc)
			return rc;
	}
	return make_one(path);
}

int nic_run_file(char *buf, size_t size, const char *dir, uint32_t addr, const char *suffix)
{
	char a[FAB_ADDR_STRLEN];

	fab_addr_format(addr, a, sizeof(a));
	return put_path(size, snprintf(buf, size, "%s/" NIC_SOCK_PREFIX "%s%s", dir, a, suffix));
}

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

int nic_run_dir_list(const char *dir, const char *suffix, uint32_t **addrs, size_t *count)
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
