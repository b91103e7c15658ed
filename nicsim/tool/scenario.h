/*
 * `nicsim scenario`: scenario scripts (scenarios/, the nicsim_scenario
 * library), a thin entry to the library.
 *
 *   nicsim scenario check PATH... [-D NAME=VALUE]...
 *   nicsim scenario run PATH... [options]
 *
 * It has options of its own (-D), so cli_main() hands the whole command
 * line over when the command is `scenario` (or `help scenario`), as for
 * `capture`; its options come after the word `scenario`.  Exit status as
 * cli.h, and for `check`: 0 every script is good, 2 a usage error or a
 * script with errors (each printed as file:line:col: message on stderr).
 */
#ifndef NICSIM_SCENARIO_CMD_H
#define NICSIM_SCENARIO_CMD_H

#include <stdbool.h>

/* Whether the command line's command is `scenario` or `help scenario`. */
bool cli_scenario_cmd(int argc, char **argv);

/* Run `nicsim scenario`; returns the exit status. */
int cli_scenario(int argc, char **argv);

#endif /* NICSIM_SCENARIO_CMD_H */
