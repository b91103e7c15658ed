/*
 * NICSIM_CAPTURE=DIR: a packet capture of every run directory a test or
 * benchmark makes.  nst_tmpdir starts `nicsim capture --follow` on the
 * directory it creates (so fabrics made in it or in a directory directly
 * below it are captured), writing DIR/<program>-<directory>.pcapng and its
 * messages to the same name with .log.  nst_done_with_dir, nst_rmtree and
 * the end of the suite stop it: the capture is deleted when every test
 * passed, kept and named on stderr when one failed.  Without NICSIM_CAPTURE
 * these functions do nothing.  Tests that run captures of their own unset
 * it first (one capture per fabric at a time).
 */
#ifndef NSTCAPTURE_H
#define NSTCAPTURE_H

#include <stdbool.h>
#include <sys/types.h>

/* Start a capture of run directory dir (nst_tmpdir calls it). */
void nst_capture_start(const char *dir);

/* Stop the capture started for dir, if any: keep it when failed, else
 * delete it.  Only the process that started it stops it. */
void nst_capture_stop(const char *dir, bool failed);

/* Stop every capture this process started. */
void nst_capture_stop_all(bool failed);

/* After creating the fabric of dir: wait (at most a few seconds) until the
 * capture following dir, or its parent, has attached to it, so that the
 * test's first frames are in it. */
void nst_capture_wait(const char *dir);

/*
 * Start `nicsim capture --dir dir ARGS...` (args NULL-terminated), its
 * stdout to out_fd (or /dev/null when out_fd < 0) and its stderr to the file
 * log.  With parent_death, it gets SIGTERM when the calling thread ends.
 * Returns the pid or a negative errno.  Any test may use it.
 */
pid_t nst_capture_spawn(const char *dir, const char *const *args, int out_fd, const char *log,
			bool parent_death);

/* Whether the capture pid attached to the fabric of dir within timeout_ms
 * (false at once if it ended). */
bool nst_capture_attached(const char *dir, pid_t pid, int timeout_ms);

#endif /* NSTCAPTURE_H */
