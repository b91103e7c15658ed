/*
 * Run directory of a set of emulated NICs: the one resolver that nicsimd,
 * the nicsim tool and the provider use (scripts ask `nicsim dir`).
 *
 * One directory holds, per NIC with address A (dotted quad), the listening
 * socket nic-A.sock, the pid file nic-A.pid that nicsimd writes once it
 * listens, and, for NICs started by `nicsim up`, the log nic-A.log; the
 * fabric's segment and bells; and the lock file that `nicsim up` and
 * `nicsim down` hold while they change the directory.
 *
 * Where: an explicit option, else $NICSIM_DIR, else $XDG_RUNTIME_DIR/nicsim
 * when $XDG_RUNTIME_DIR is valid (an absolute path to an existing directory
 * that the user owns and nobody else may write to: the XDG base directory
 * specification says to fall back otherwise), else /tmp/nicsim-<uid>.  A
 * relative option or $NICSIM_DIR is taken from the working directory and
 * made absolute at once, so that the tool, nicsimd (which runs in "/") and
 * the provider name the same directory.
 *
 * Whose: the default /tmp/nicsim-<uid> is predictable, so another local
 * user can create it first.  Every program checks the directory before it
 * uses it (nic_run_dir_check): it must be a directory, not a symbolic link,
 * owned by the effective user, and writable by no one else (group and
 * other write bits clear: at most mode 0755); and every directory on the
 * way to it must be root's or the user's and, if others may write to it,
 * sticky (as /tmp is), so that nobody can rename it away and plant another.
 * Files in it are opened with O_NOFOLLOW.
 *
 * Shared with a group: a NIC started with --allow-group G (as root, or
 * with CAP_SYS_PTRACE: docs/security.md) gives the directory to group G
 * (mode 0750, group G: nic_run_dir_share) and its sockets too (0660), so
 * that members of G can reach its attach sockets; nothing in it becomes
 * writable by them.  Such a directory, root's, passes the check for a
 * member of G (a host program of another user), as nobody but root can
 * change it.
 *
 * A small static library (nicsim_rundir) that links nothing else, so that
 * the provider can use it without the NIC.  Errors: 0 or a negative errno.
 */
#ifndef NICSIM_RUNDIR_H
#define NICSIM_RUNDIR_H

#include <stddef.h>
#include <stdint.h>

#define NIC_LOG_SUFFIX ".log"
/* NICs one nicsimd may serve (nicsimd --addr given more than once). */
#define NIC_GROUP_MAX 16u
#define NIC_RUN_LOCK "nicsim.lock" /* held by `nicsim up` and `nicsim down` */

/* Mode bits a run directory must not have: written by group or others. */
#define NIC_RUN_DIR_FORBIDDEN 022

/* Room for a message of nic_run_dir_check(). */
#define NIC_RUN_WHY_MAX 4352

/*
 * The run directory: opt if not NULL, else $NICSIM_DIR, else
 * $XDG_RUNTIME_DIR/nicsim (when $XDG_RUNTIME_DIR is valid, see the top),
 * else /tmp/nicsim-<uid>.  Empty environment variables count as unset;
 * trailing slashes and leading "./" are dropped; a relative path is joined
 * to the working directory (no link is resolved).  The path need not exist.
 * Returns 0, -EINVAL for an empty opt, -ENAMETOOLONG if it does not fit, or
 * getcwd's error.
 */
int nic_run_dir(char *buf, size_t size, const char *opt);

/*
 * How nic_run_dir() without an option chooses, in words for a diagnostic:
 * "from $NICSIM_DIR", "from $XDG_RUNTIME_DIR, ...", or "the default: ..."
 * with why $XDG_RUNTIME_DIR was not used (not set, not an absolute path,
 * not an existing directory, owned by another user, writable by others).
 */
void nic_run_dir_origin(char *buf, size_t size);

/*
 * Create dir with mode 0700 if it does not exist.  Only dir itself is
 * created, never a missing parent: a parent is where the user chose to put
 * it, and making a tree of directories that nobody checked (or, as root, in
 * any place a variable names) is not the resolver's to do.  Returns 0 if dir
 * now exists as a directory or a link (nic_run_dir_check() refuses a link),
 * -ENOENT if a parent is missing, -ENOTDIR if dir is something else, or
 * mkdir's error.  It does not check who owns it: call nic_run_dir_check()
 * next.
 */
int nic_run_dir_make(const char *dir);

/*
 * Whether dir is safe to use (see the top): 0, or
 *   -ENOENT   it does not exist
 *   -ELOOP    it is a symbolic link
 *   -ENOTDIR  it is not a directory
 *   -EPERM    another user owns it, or a directory on the way to it is
 *             another user's or open to others without the sticky bit
 *   -EACCES   group or others may write to it
 * or lstat's error.  On an error, why (if not NULL) gets the whole message
 * without a program prefix: the directory, what is wrong with it and what
 * the user can do, e.g. "run directory /tmp/nicsim-0 is a directory owned
 * by uid 1000, not you (0): another user created it, ... choose another
 * with --dir or NICSIM_DIR, or set XDG_RUNTIME_DIR".  It never advises to
 * remove what the user cannot remove.
 */
int nic_run_dir_check(const char *dir, char *why, size_t why_size);

/*
 * A group named by text, a name or a number, into *gid.  0, or -ENOENT when
 * no group has that name, or -EINVAL for an empty text or a number out of
 * range; why (if not NULL) then says which and what to give instead, e.g.
 * "no group is named nicsim-users (getent group nicsim-users finds none):
 * give an existing group's name or a numeric gid".
 */
int nic_group_parse(const char *text, uint32_t *gid, char *why, size_t why_size);

/*
 * Share run directory dir (already checked: nic_run_dir_check) with group
 * gid: its group becomes gid and its mode 0750, so members may reach the
 * sockets in it and list it, never write to it.  0, or a negative errno
 * with why (if not NULL) saying what failed and what to do.
 */
int nic_run_dir_share(const char *dir, uint32_t gid, char *why, size_t why_size);

/* Whether this process's real or effective gid, or one of its supplementary
 * groups, is gid. */
int nic_in_group(uint32_t gid);

/*
 * Path of the run-directory file of the NIC with address addr (network byte
 * order): dir/nic-<addr><suffix>, suffix one of NIC_SOCK_SUFFIX,
 * NIC_PID_SUFFIX, NIC_LOG_SUFFIX.  Unlike nic_sock_path() it does not check
 * the sockaddr_un limit.  Returns 0 or -ENAMETOOLONG.
 */
int nic_run_file(char *buf, size_t size, const char *dir, uint32_t addr, const char *suffix);

/*
 * Why a file could not be written in run directory dir when err is -ENOSPC
 * or -EDQUOT: which limit (the file system, or the user's disk quota), how
 * much of it is left (and how much the file needed, when need is not 0),
 * and what to do, e.g. "the file system of run directory /run/user/0 has 0
 * bytes free of 4 MiB (df -h /run/user/0): free space there, or choose
 * another run directory with --dir or NICSIM_DIR".  Into buf (size bytes,
 * always terminated when size is not 0); for any other err, strerror's
 * text.  Returns buf.
 */
const char *nic_run_dir_full(const char *dir, int err, uint64_t need, char *buf, size_t size);

/*
 * src for a message, into dst (size bytes, always terminated when size is
 * not 0, cut if it does not fit): each control character (below 0x20, and
 * DEL) as \xHH, a backslash as \\.  Paths come from the environment and may
 * hold anything: printed raw, a newline in one would start a line that
 * looks like another program's message.  Returns dst.
 */
char *nic_escape(char *dst, size_t size, const char *src);

#endif /* NICSIM_RUNDIR_H */
