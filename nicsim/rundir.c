/* The run-directory resolver (nicsim_rundir.h). */
#include "nicsim_rundir.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "nicsim_abi.h"
#include "nicsim_refusal.h"

/* The result of snprintf(buf, size, ...) = n: -ENAMETOOLONG when truncated. */
static int put_path(size_t size, int n)
{
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * Whether $XDG_RUNTIME_DIR (env) is a runtime directory the specification
 * lets us use: an absolute path to a directory that the user owns and that
 * nobody else may write to.  Anything else is not valid, and the
 * specification says to fall back rather than create or use it.
 */
static const char *xdg_unusable(const char *env)
{
	struct stat st;

	if (!env || !*env)
		return "not set";
	if (env[0] != '/')
		return "not an absolute path";
	if (stat(env, &st) < 0 || !S_ISDIR(st.st_mode))
		return "not an existing directory";
	if (st.st_uid != geteuid())
		return "owned by another user";
	if (st.st_mode & NIC_RUN_DIR_FORBIDDEN)
		return "writable by others";
	return NULL;
}

static bool xdg_valid(const char *env)
{
	return xdg_unusable(env) == NULL;
}

void nic_run_dir_origin(char *buf, size_t size)
{
	const char *nd = getenv("NICSIM_DIR"), *xdg = getenv("XDG_RUNTIME_DIR");
	const char *why = xdg_unusable(xdg);

	if (!buf || !size)
		return;
	if (nd && *nd)
		snprintf(buf, size, "from $NICSIM_DIR");
	else if (!why)
		snprintf(buf, size, "from $XDG_RUNTIME_DIR, $NICSIM_DIR not set");
	else if (!xdg || !*xdg)
		snprintf(buf, size, "the default: $NICSIM_DIR and $XDG_RUNTIME_DIR not set");
	else
		snprintf(buf, size, "the default: $NICSIM_DIR not set, $XDG_RUNTIME_DIR=%s %s", xdg,
			 why);
}

int nic_run_dir(char *buf, size_t size, const char *opt)
{
	const char *env, *path;
	char tmp[64];
	size_t len;
	int rc;

	if (!buf || size == 0)
		return -EINVAL;
	if (opt) {
		if (!*opt)
			return -EINVAL;
		path = opt;
		rc = 0;
	} else if ((env = getenv("NICSIM_DIR")) && *env) {
		path = env;
		rc = 0;
	} else if (xdg_valid(env = getenv("XDG_RUNTIME_DIR"))) {
		rc = put_path(size, snprintf(buf, size, "%s/nicsim", env));
		path = NULL;
	} else {
		snprintf(tmp, sizeof(tmp), "/tmp/nicsim-%u", (unsigned)getuid());
		path = tmp;
		rc = 0;
	}
	if (path && path[0] == '/') {
		rc = put_path(size, snprintf(buf, size, "%s", path));
	} else if (path) {
		/* Relative to the working directory, made absolute now: nicsimd
		 * runs in "/", and every program must name the same directory. */
		char cwd[PATH_MAX];

		while (path[0] == '.' && path[1] == '/')
			for (path += 2; *path == '/'; path++)
				;
		if (!getcwd(cwd, sizeof(cwd)))
			return errno == ERANGE ? -ENAMETOOLONG : -errno;
		if (!*path || !strcmp(path, "."))
			rc = put_path(size, snprintf(buf, size, "%s", cwd));
		else
			rc = put_path(size,
				      snprintf(buf, size, "%s%s%s", cwd, cwd[1] ? "/" : "", path));
	}
	if (rc)
		return rc;
	len = strlen(buf);
	while (len > 1 && buf[len - 1] == '/')
		buf[--len] = '\0';
	return 0;
}

int nic_run_dir_make(const char *dir)
{
	struct stat st;
	int err;

	if (!dir || !*dir)
		return -EINVAL;
	if (mkdir(dir, 0700) == 0)
		return 0;
	err = errno;
	/* An existing parent may refuse mkdir with EACCES or EROFS rather than
	 * EEXIST; what matters is whether the directory is there.  lstat: a
	 * link is not followed here, and nic_run_dir_check() refuses it. */
	if (lstat(dir, &st) == 0)
		return S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode) ? 0 : -ENOTDIR;
	return -err;
}

/* snprintf into why, when the caller wants a message. */
#define WHY(...)                                              \
	do {                                                  \
		if (why && why_size)                          \
			snprintf(why, why_size, __VA_ARGS__); \
	} while (0)

/* What a user can do about a directory that is not theirs to change. */
#define CHOOSE "choose another with --dir or NICSIM_DIR, or set XDG_RUNTIME_DIR"

/*
 * Whether the directories that lead to dir are safe: nobody but root and us
 * can rename or replace anything in them, so what was checked stays what is
 * used.  Each one (dir is absolute, not resolved) must be owned by root or
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
			WHY("run directory %s is reached through %s, a link that uid %u owns "
			    "and could point elsewhere at any time: " CHOOSE,
			    dir, anc, (unsigned)st.st_uid);
			return -EPERM;
		}
		if (S_ISLNK(st.st_mode) && stat(anc, &st) < 0)
			continue;
		if (st.st_uid != 0 && st.st_uid != me) {
			WHY("run directory %s is inside %s, which uid %u owns and could replace "
			    "it at any time: " CHOOSE,
			    dir, anc, (unsigned)st.st_uid);
			return -EPERM;
		}
		if ((st.st_mode & NIC_RUN_DIR_FORBIDDEN) && !(st.st_mode & S_ISVTX)) {
			WHY("run directory %s is inside %s, which has mode %04o: group or others "
			    "may replace what is in it; chmod go-w %s, or " CHOOSE,
			    dir, anc, (unsigned)(st.st_mode & 07777), anc);
			return -EPERM;
		}
		if (anc[0] == '/' && anc[1] == '\0')
			break;
	}
	return 0;
}

int nic_in_group(uint32_t gid)
{
	gid_t *list;
	int n, found = 0;

	if (getgid() == (gid_t)gid || getegid() == (gid_t)gid)
		return 1;
	n = getgroups(0, NULL);
	if (n <= 0)
		return 0;
	list = calloc((size_t)n, sizeof(*list));
	if (!list)
		return 0;
	n = getgroups(n, list);
	for (int i = 0; i < n && !found; i++)
		found = list[i] == (gid_t)gid;
	free(list);
	return found;
}

/*
 * A directory of root's that a NIC started with --allow-group shared with
 * one of our groups (nic_run_dir_share): no write for the group, nothing at
 * all for others, search for the group.  Only root can change what is in
 * it, and root is trusted anyway.
 */
static bool shared_with_us(const struct stat *st)
{
	return st->st_uid == 0 && S_ISDIR(st->st_mode) && !(st->st_mode & 027) &&
	       (st->st_mode & S_IXGRP) && nic_in_group((uint32_t)st->st_gid);
}

int nic_group_parse(const char *text, uint32_t *gid, char *why, size_t why_size)
{
	char buf[4096], shown[128];
	struct group gr, *found = NULL;
	char *end;
	unsigned long long v;
	int err;

	if (why && why_size)
		why[0] = '\0';
	if (!text || !*text) {
		WHY("no group given: give a group's name or a numeric gid");
		return -EINVAL;
	}
	nic_escape(shown, sizeof(shown), text);
	err = getgrnam_r(text, &gr, buf, sizeof(buf), &found);
	if (err == 0 && found) {
		*gid = (uint32_t)found->gr_gid;
		return 0;
	}
	if (text[0] >= '0' && text[0] <= '9') {
		errno = 0;
		v = strtoull(text, &end, 10);
		if (errno || *end || v >= (gid_t)-1) {
			WHY("group %s: not a group name, nor a gid below %u", shown,
			    (unsigned)(gid_t)-1);
			return -EINVAL;
		}
		*gid = (uint32_t)v;
		return 0;
	}
	WHY("no group is named %s (getent group %s finds none): give an existing group's name "
	    "or a numeric gid",
	    shown, shown);
	return -ENOENT;
}

int nic_run_dir_share(const char *dir, uint32_t gid, char *why, size_t why_size)
{
	struct stat st;
	int fd, err = 0;

	if (why && why_size)
		why[0] = '\0';
	/* O_NOFOLLOW | O_DIRECTORY: the directory checked, never a link put
	 * in its place since. */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		WHY("cannot open run directory %s to share it with group %u: %s", dir,
		    (unsigned)gid, strerror(-err));
		return err;
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
	} else if (st.st_gid != (gid_t)gid && fchown(fd, (uid_t)-1, (gid_t)gid) < 0) {
		err = -errno;
		WHY("cannot give run directory %s to group %u: %s (only root, or a member of the "
		    "group, may): choose a group you are in, or start the NIC as root",
		    dir, (unsigned)gid, strerror(-err));
	} else if (fchmod(fd, 0750) < 0) {
		err = -errno;
	}
	if (err < 0 && why && why_size && !why[0])
		WHY("cannot share run directory %s with group %u: %s", dir, (unsigned)gid,
		    strerror(-err));
	close(fd);
	return err;
}

int nic_run_dir_check(const char *dir, char *why, size_t why_size)
{
	uid_t me = geteuid();
	struct stat st;

	if (why && why_size)
		why[0] = '\0';
	if (!dir || !*dir) {
		WHY("no run directory given: " CHOOSE);
		return -EINVAL;
	}
	/* lstat: a link planted where the directory should be is refused,
	 * never followed, whatever it points to. */
	if (lstat(dir, &st) < 0) {
		int err = errno;

		if (err == ENOENT)
			WHY("run directory %s does not exist", dir);
		else if (err == ENAMETOOLONG)
			WHY("run directory %s: the path is too long: choose a shorter one with "
			    "--dir or NICSIM_DIR",
			    dir);
		else
			WHY("run directory %s: %s: " CHOOSE, dir, strerror(err));
		return -err;
	}
	/* Another user's file where ours should be: it cannot be removed from
	 * a sticky /tmp, and was perhaps put there to take our traffic. */
	if (st.st_uid != me && (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode) || st.st_uid != 0)) {
		WHY("run directory %s is %s owned by uid %u, not you (%u): another user created "
		    "it, perhaps to intercept your NICs%s: " CHOOSE,
		    dir,
		    S_ISLNK(st.st_mode)   ? "a symbolic link"
		    : S_ISDIR(st.st_mode) ? "a directory"
					  : "a file",
		    (unsigned)st.st_uid, (unsigned)me,
		    me ? ", and only they or root can remove it" : "");
		return S_ISLNK(st.st_mode) ? -ELOOP : S_ISDIR(st.st_mode) ? -EPERM : -ENOTDIR;
	}
	if (S_ISLNK(st.st_mode)) {
		WHY("run directory %s is a symbolic link, which nicsim never follows: remove it "
		    "(rm %s), or " CHOOSE,
		    dir, dir);
		return -ELOOP;
	}
	if (!S_ISDIR(st.st_mode)) {
		WHY("run directory %s is not a directory: remove it, or " CHOOSE, dir);
		return -ENOTDIR;
	}
	if (st.st_uid != me && !shared_with_us(&st)) {
		/* root's directory, and we are not root. */
		if (!(st.st_mode & 027) && (st.st_mode & S_IXGRP) && st.st_gid != 0) {
			/* Shaped like a share (--allow-group): name the group. */
			char buf[1024], name[64] = "", group[96];
			struct group gr, *found = NULL;

			if (getgrgid_r(st.st_gid, &gr, buf, sizeof(buf), &found) == 0 && found)
				nic_escape(name, sizeof(name), found->gr_name);
			if (name[0])
				snprintf(group, sizeof(group), "%s, gid %u", name,
					 (unsigned)st.st_gid);
			else
				snprintf(group, sizeof(group), "gid %u", (unsigned)st.st_gid);
			WHY("run directory %s is root's, shared with group %s (mode %04o: NICs "
			    "started with --allow-group), and you (uid %u) are not in that group: "
			    "ask root to add you to it (then log in again), or " CHOOSE,
			    dir, group, (unsigned)(st.st_mode & 07777), (unsigned)me);
			return -EPERM;
		}
		WHY("run directory %s is owned by uid %u, not you (%u): " CHOOSE, dir,
		    (unsigned)st.st_uid, (unsigned)me);
		return -EPERM;
	}
	if (st.st_mode & NIC_RUN_DIR_FORBIDDEN) {
		WHY("run directory %s has mode %04o: group or others may write to it "
		    "(at most 0755 is allowed): chmod go-w %s, or " CHOOSE,
		    dir, (unsigned)(st.st_mode & 07777), dir);
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

char *nic_escape(char *dst, size_t size, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	if (!size)
		return dst;
	for (; *src; src++) {
		unsigned char c = (unsigned char)*src;
		size_t need = c < 0x20 || c == 0x7f ? 4 : c == '\\' ? 2 : 1;

		if (n + need >= size)
			break;
		if (need == 4) {
			dst[n++] = '\\';
			dst[n++] = 'x';
			dst[n++] = hex[c >> 4];
			dst[n++] = hex[c & 0xf];
		} else {
			if (need == 2)
				dst[n++] = '\\';
			dst[n++] = (char)c;
		}
	}
	dst[n] = '\0';
	return dst;
}

const char *nic_run_dir_full(const char *dir, int err, uint64_t need, char *buf, size_t size)
{
	static const char *const fix =
	    "free space there, or choose another run directory with --dir or NICSIM_DIR";
	char d[PATH_MAX], avail[32], total[32], needs[64] = "";
	struct statvfs sv;

	if (!size)
		return buf;
	if (err != -ENOSPC && err != -EDQUOT) {
		snprintf(buf, size, "%s", strerror(-err));
		return buf;
	}
	nic_escape(d, sizeof(d), dir);
	if (need) {
		char n[32];

		snprintf(needs, sizeof(needs), ", %s needed", nic_refusal_size(need, n));
	}
	if (err == -EDQUOT) {
		snprintf(buf, size,
			 "your disk quota on the file system of run directory %s is used up%s "
			 "(quota -s): %s",
			 d, needs, fix);
		return buf;
	}
	if (statvfs(dir, &sv) < 0) {
		snprintf(buf, size, "the file system of run directory %s is full%s (df -h %s): %s",
			 d, needs, d, fix);
		return buf;
	}
	snprintf(buf, size,
		 "the file system of run directory %s has %s free of %s%s (df -h %s): %s", d,
		 nic_refusal_size((uint64_t)sv.f_bavail * sv.f_frsize, avail),
		 nic_refusal_size((uint64_t)sv.f_blocks * sv.f_frsize, total), needs, d, fix);
	return buf;
}
