/*
 * Run directory of a set of emulated NICs.
 *
 * One directory holds, per NIC with address A (dotted quad), the listening
 * socket nic-A.sock, the pid file nic-A.pid that nicsimd writes once it
 * listens, and, for NICs started by `nicsim up`, the log nic-A.log.  The
 * provider, the CLI and nicsimd all find the directory the same way:
 * an explicit option, else $NICSIM_DIR, else $XDG_RUNTIME_DIR/nicsim, else
 * /tmp/nicsim-<uid>.
 *
 * Errors: 0 or a negative errno.
 */
#ifndef NICSIM_RUNDIR_H
#define NICSIM_RUNDIR_H

#include <stddef.h>
#include <stdint.h>

#define NIC_LOG_SUFFIX ".log"

/*
 * The run directory: opt if not NULL, else $NICSIM_DIR, else
 * $XDG_RUNTIME_DIR/nicsim (when that variable holds an absolute path), else
 * /tmp/nicsim-<uid>.  Empty environment variables count as unset; trailing
 * slashes are dropped.  The path is not made absolute and need not exist.
 * Returns 0, -EINVAL for an empty opt, -ENAMETOOLONG if it does not fit.
 */
int nic_run_dir(char *buf, size_t size, const char *opt);

/*
 * Create dir and any missing parents with mode 0700 (mkdir -p).  Returns 0
 * if dir is now a directory (whether or not it existed), -ENOTDIR if it or a
 * parent exists and is not a directory, or mkdir's error.
 */
int nic_run_dir_make(const char *dir);

/*
 * Path of the run-directory file of the NIC with address addr (network byte
 * order): dir/nic-<addr><suffix>, suffix one of NIC_SOCK_SUFFIX,
 * NIC_PID_SUFFIX, NIC_LOG_SUFFIX.  Unlike nic_sock_path() it does not check
 * the sockaddr_un limit.  Returns 0 or -ENAMETOOLONG.
 */
int nic_run_file(char *buf, size_t size, const char *dir, uint32_t addr, const char *suffix);

/*
 * Addresses (network byte order) of every file named nic-<addr><suffix> in
 * dir whose <addr> is a valid fabric address, sorted in ascending address
 * order.  Other names are ignored.  *addrs is malloc'ed (NULL when *count is
 * 0); the caller frees it.  Returns 0, -ENOENT if dir does not exist,
 * -ENOTDIR, -ENOMEM or opendir's error.
 */
int nic_run_dir_list(const char *dir, const char *suffix, uint32_t **addrs, size_t *count);

#endif /* NICSIM_RUNDIR_H */
