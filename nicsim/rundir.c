/* The run-directory resolver (nicsim_rundir.h). */
#include "nicsim_rundir.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* snprintf into why, when the caller wants a message. */
#define WHY(...)                                              \
	do {                                                  \
		if (why && why_size)                          \
			snprintf(why, why_size, __VA_ARGS__); \
	} while (0)

/*
 * Whether the directories that lead to dir are safe: nobody but root and us
 * can rename or replace anything in them, so what was checked stays what is
 * used.  Each one (dir made absolute, not resolved) must be owned by root or
 * us and, if group or others may write to it, sticky (as /tmp is); a link
 * on the way must be root's or ours.  0, or -EPERM with why.
 */
static int check_parents(const char *dir, uid_t me, char *why, size_t why_size)
{
	char path[PATH_MAX];
	struct stat st;
	size_t len;
	char *p;

	if (dir[0] == '/') {
		if (put_path(sizeof(path), snprintf(path, sizeof(path), "%s", dir)))
			return -ENAMETOOLONG;
	} else {
		if (!getcwd(path, sizeof(path)))
			return -errno;
		len = strlen(path);
		if (put_path(sizeof(path) - len,
			     snprintf(path + len, sizeof(path) - len, "/%s", dir)))
			return -ENAMETOOLONG;
	}
	/* Every proper prefix, up to and including "/". */
	while ((p = strrchr(path, '/'))) {
		const char *anc = p == path ? "/" : path;

		p[p == path ? 1 : 0] = '\0';
		if (lstat(anc, &st) < 0)
			continue; /* the run directory's own lstat reports it */
		if (S_ISLNK(st.st_mode) && st.st_uid != 0 && st.st_uid != me) {
			WHY("run directory %s is reached through %s, a link that uid %u owns", dir,
			    anc, (unsigned)st.st_uid);
			return -EPERM;
		}
		if (S_ISLNK(st.st_mode) && stat(anc, &st) < 0)
			continue;
		if (st.st_uid != 0 && st.st_uid != me) {
			WHY("run directory %s is inside %s, which uid %u owns", dir, anc,
			    (unsigned)st.st_uid);
			return -EPERM;
		}
		if ((st.st_mode & NIC_RUN_DIR_FORBIDDEN) && !(st.st_mode & S_ISVTX)) {
			WHY("run directory %s is inside %s, which has mode %04o: group or others "
			    "may replace what is in it",
			    dir, anc, (unsigned)(st.st_mode & 07777));
			return -EPERM;
		}
		if (anc[0] == '/' && anc[1] == '\0')
			break;
	}
	return 0;
}

int nic_run_dir_check(const char *dir, char *why, size_t why_size)
{
	uid_t me = geteuid();
	struct stat st;

	if (why && why_size)
		why[0] = '\0';
	if (!dir || !*dir) {
		WHY("no run directory given");
		return -EINVAL;
	}
	/* lstat: a link planted where the directory should be is refused,
	 * never followed, whatever it points to. */
	if (lstat(dir, &st) < 0) {
		int err = errno;

		WHY("run directory %s: %s", dir, strerror(err));
		return -err;
	}
	if (S_ISLNK(st.st_mode)) {
		WHY("run directory %s is a symbolic link", dir);
		return -ELOOP;
	}
	if (!S_ISDIR(st.st_mode)) {
		WHY("run directory %s is not a directory", dir);
		return -ENOTDIR;
	}
	if (st.st_uid != me) {
		WHY("run directory %s is owned by uid %u, not you (%u)", dir, (unsigned)st.st_uid,
		    (unsigned)me);
		return -EPERM;
	}
	if (st.st_mode & NIC_RUN_DIR_FORBIDDEN) {
		WHY("run directory %s has mode %04o: group or others may write to it "
		    "(at most 0755 is allowed; chmod go-w)",
		    dir, (unsigned)(st.st_mode & 07777));
		return -EACCES;
	}
	return check_parents(dir, me, why, why_size);
}

int nic_run_file(char *buf, size_t size, const char *dir, uint32_t addr, const char *suffix)
{
	struct in_addr in = {.s_addr = addr};
	char a[INET_ADDRSTRLEN];

	if (!inet_ntop(AF_INET, &in, a, sizeof(a)))
		return -EINVAL;
	return put_path(size, snprintf(buf, size, "%s/" NIC_SOCK_PREFIX "%s%s", dir, a, suffix));
}
