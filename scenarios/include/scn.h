/*
 * The scenario library's public entry (nicsim_scenario): what
 * `nicsim scenario` calls.  The language's data model, for the parts of the
 * library and the host agent, is scn_ast.h.
 *
 *   scn_find_files  the scenario files a command line names: files as
 *                   given, directories searched recursively for *.scn,
 *                   each directory's files sorted by name
 *   scn_check_files parse and check each (nothing is started): every error
 *                   as "file:line:col: message" on err
 *   scn_cli_main    `nicsim scenario`, the whole command line
 */
#ifndef SCN_H
#define SCN_H

#include <stddef.h>
#include <stdio.h>

#include "scn_ast.h"
#include "scn_run.h" /* scn_run(): `nicsim scenario run` */

/* A list of paths; scn_files_free() frees it and its strings. */
struct scn_files {
	char **path;
	size_t n;
};

/*
 * The files paths[0..n) name: a file is taken as it is (whatever its name),
 * a directory gives every *.scn below it, depth first, sorted by name at
 * each level (symbolic links to directories are not followed).  Paths that
 * do not exist or cannot be read are reported in diag.  Returns 0 when
 * every path was readable (out may still be empty: a directory without
 * scenarios), -ENOENT (or another errno) after reporting one that was not,
 * or -ENOMEM.  out is filled either way; free it.
 */
int scn_find_files(const char *const *paths, size_t n, struct scn_files *out,
		   struct scn_diag *diag);

void scn_files_free(struct scn_files *files);

/*
 * Parse and check every file of files with the -D overrides defs (may be
 * NULL), printing each file's messages on err as soon as it is done.
 * Returns 0 when every file is good (warnings allowed), -EINVAL when one
 * or more have errors, -ENOMEM.
 */
int scn_check_files(const struct scn_files *files, const struct scn_defines *defs, FILE *err);

/*
 * `nicsim scenario check|run ...`: argv is the nicsim tool's whole command
 * line, whose command is `scenario` (or `help scenario`); its options come
 * after the word `scenario`.  Returns the exit status: 0 every script is
 * good (check) or every scenario passed (run), 1 a scenario failed, 2 a
 * usage error or a script with errors (each printed as file:line:col:
 * message on stderr).  The runner starts NICs with the tool's own code
 * (cli_up), so the tool does not link this library: the nicsim program
 * hands this function to cli_main.
 */
int scn_cli_main(int argc, char **argv);

/*
 * Where re (an ERE) has a back-reference, \1 to \9 outside a bracket
 * expression, or NULL.  POSIX EREs have none; glibc takes them as an
 * extension, and matching them is exponential in the line's length (a
 * program's output line could stall the run far past every deadline), so
 * the checker refuses them and the runner never compiles one.
 */
const char *scn_ere_backref(const char *re);

#endif /* SCN_H */
