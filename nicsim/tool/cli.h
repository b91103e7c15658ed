/*
 * The nicsim command-line tool: start, stop and inspect the emulated NICs of
 * a run directory (nicsim_rundir.h).
 *
 *   nicsim [--dir D] [--nic ADDR] COMMAND [OPTIONS]
 *     up, down, show tpt, show faults, show hosts, stats, link show,
 *     link set, dir, capture, help
 *
 * cli_main() parses the command line and runs one command; cli.c holds the
 * parser, the help, the read-only commands (show, stats) and the link
 * commands (which read and write the fabric segment directly, not through a
 * NIC), updown.c starts and stops daemons and creates and removes the
 * fabric.  Options may come before or after the command.
 *
 * Exit status: 0 success, 1 a runtime failure (a NIC not answering, a daemon
 * that would not start), 2 a usage error (unknown command or option, a bad
 * value, an address outside 198.18.0.0/15, a run directory whose socket
 * paths do not fit a UNIX socket address).  Errors go to stderr, naming
 * what was wrong.
 */
#ifndef NICSIM_CLI_H
#define NICSIM_CLI_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "timer_opts.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* Bounds on the waits for NICs, in milliseconds. */
#define CLI_TIMEOUT_MS 5000     /* one management exchange */
#define CLI_UP_TIMEOUT_MS 10000 /* `nicsim up`: every NIC answering */
#define CLI_DOWN_TERM_MS 5000   /* `nicsim down`: SIGTERM to exit */
#define CLI_DEFAULT_HOSTS 2u
#define CLI_MAX_HOSTS 256u /* FAB_MAX_PORTS: one fabric port per NIC */

/* The parsed command line.  Values passed on to nicsimd stay text; they are
 * checked here with the parsers nicsimd uses (opts.h, log.h). */
struct cli_opts {
	char dir[PATH_MAX]; /* run directory, resolved with nic_run_dir() */
	bool nic_set;       /* --nic given */
	uint32_t nic;       /* its address, network byte order */
	bool json;
	unsigned hosts;
	const char *tpt_capacity;
	const char *max_reg;
	const char *log_level;
	bool no_mw;
	bool no_rdma_read;
	bool udp;                          /* nicsimd --udp */
	const char *allow_group;           /* nicsimd --allow-group, as typed */
	bool remote;                       /* link set: DST is beyond the fabric */
	bool one_process;                  /* up: one nicsimd serves every NIC */
	const char *timer[NIC_TIMER_OPTS]; /* as typed, NULL when not given */
	int timeout_ms;                    /* --timeout-ms, or 0 for the command's default */
	bool seed_set;                     /* --seed given */
	uint64_t seed;                     /* the fabric's seed */
	const char *const *args;           /* words after the command ("link set": SRC DST ...) */
	size_t nargs;
	/* For a program that calls cli_up() as a library (the scenario
	 * runner): quiet makes up and down print nothing on stdout and no
	 * notes on stderr (errors still go there), and up_pids, when not NULL, receives the pid of each NIC
	 * started, in address order (o->hosts of them, or one with --nic).
	 * The daemons are then the caller's children, to reap. */
	bool quiet;
	pid_t *up_pids;
};

/*
 * Run the nicsim tool; returns the exit status.  scenario runs `nicsim
 * scenario`, handed the whole command line: the scenario library's
 * scn_cli_main (scn.h).  That library starts its NICs with cli_up, so this
 * one does not link it and the nicsim program passes the entry in; NULL
 * makes `scenario` an unknown command.
 */
int cli_main(int argc, char **argv, int (*scenario)(int argc, char **argv));

/*
 * The index in argv of the word cmd when it is the command of the command
 * line (only options or `help` before it), else 0.  For the commands that
 * parse their own command line.
 */
int cli_command_at(int argc, char **argv, const char *cmd);

/* Whether arg is one of the tool's common options ("--nic", "--dir=D"),
 * for a command that parses its own to say which do not apply to it. */
bool cli_is_option(const char *arg);

/* "nicsim VERSION (ABI N)" and a newline on f: what --version prints. */
void cli_version(FILE *f);

/* ---- Shared by cli.c and updown.c ---------------------------------------- */

/* "nicsim: <message>\n" on stderr, or kept (cli_err_capture). */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * For a program that calls the tool as a library (the scenario runner,
 * which reports a NIC's failure to start in its own report): while buf is
 * not NULL, cli_err appends its messages to buf (NUL-terminated, "; "
 * between two, cut at size) instead of printing them.  NULL prints again.
 * Not thread-safe: one caller at a time.
 */
void cli_err_capture(char *buf, size_t size);

/*
 * Check that o->dir is safe to use (nic_run_dir_check): 0 when it is, or
 * does not exist; otherwise says what is wrong and what to do, and returns
 * the check's error.
 */
int cli_dir_check(const struct cli_opts *o);

/*
 * The message for a file of the run directory that open(O_NOFOLLOW) refused
 * with ELOOP: path is a link, which is never followed, and the user's to
 * remove (the directory is theirs: nic_run_dir_check).  A static buffer.
 */
const char *cli_link_planted(const char *path);

/*
 * Socket path of the NIC with address addr in o->dir.  When it does not fit
 * a sockaddr_un, prints why and returns -ENAMETOOLONG.
 */
int cli_sock_path(const struct cli_opts *o, uint32_t addr, char *buf, size_t size);

/*
 * Addresses (network byte order) of every file named nic-<addr><suffix> in
 * dir whose <addr> is a valid fabric address, sorted in ascending address
 * order.  Other names are ignored.  *addrs is malloc'ed (NULL when *count is
 * 0); the caller frees it.  Returns 0, -ENOENT if dir does not exist,
 * -ENOTDIR, -ENOMEM or opendir's error.
 */
int cli_dir_list(const char *dir, const char *suffix, uint32_t **addrs, size_t *count);

/*
 * Path of the program name beside the running program (/proc/self/exe),
 * else on PATH, into buf; exe_dir gets the running program's directory ("" if
 * unknown), for messages.  0 or -ENOENT.
 */
int cli_find_program(const char *name, char *buf, size_t size, char *exe_dir, size_t exe_dir_size);

/* `nicsim up` and `nicsim down`; they return the exit status. */
int cli_up(struct cli_opts *o);
int cli_down(struct cli_opts *o);

#endif /* NICSIM_CLI_H */
