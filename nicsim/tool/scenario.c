/*
 * `nicsim scenario` (scenario.h): parse the command line, then call the
 * scenario library (scn.h).  Each subcommand is one entry of a table: its
 * name, its help and the function that runs it with the words and options
 * after its name.
 */
#include "scenario.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "scn.h"
#include "scn_run.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The command line after `scenario SUBCOMMAND`: paths and -D overrides. */
struct scn_args {
	const char **paths;
	size_t npaths;
	struct scn_define *defs;
	size_t ndefs;
	bool help;
	bool run_opt;            /* an option only `run` takes was given */
	struct scn_run_opts run; /* run's options */
};

struct scn_subcmd {
	const char *name;
	const char *args; /* the words it takes after its name */
	const char *summary;
	const char *text;
	int (*run)(const struct scn_args *a);
};

static int run_check(const struct scn_args *a);
static int run_run(const struct scn_args *a);

static const struct scn_subcmd subcmds[] = {
    {"check", "PATH... [-D NAME=VALUE]...", "parse scenario scripts and check their names",
     "Reads each scenario file (PATH: a file, or a directory searched recursively\n"
     "for *.scn, in name order), expands its includes and ${NAME} parameters, and\n"
     "checks it: statements and their arguments, numbers and units, names defined\n"
     "once and before use with the right kind (a socket where a socket is wanted),\n"
     "set-up before the first step, NIC addresses, link settings as 'nicsim link\n"
     "set' takes them, buffer ranges, every '&' operation waited for. Nothing is\n"
     "started. Every error is printed on stderr as FILE:LINE:COL: what was wrong.\n"
     "\n"
     "  -D NAME=VALUE   give parameter NAME this value (as the runner would);\n"
     "                  -D SEED=N sets the seed\n"
     "\n"
     "Exit status: 0 every script is good (warnings are printed), 2 a usage error\n"
     "or a script with errors. docs/scenarios.md describes the language.",
     run_check},
    {"run", "PATH... [OPTIONS]", "run scenario scripts",
     "Checks every file first (nothing starts if one is bad), then runs each\n"
     "scenario in a private run directory under $TMPDIR: its NICs (nicsimd), its\n"
     "host agents (nicsim-agent), its programs, faults and expectations, with the\n"
     "capture on. Prints the seed first, with the command that replays the run;\n"
     "a failure as FILE:LINE: step, then expected and actual, and the run\n"
     "directory kept (NIC logs, capture.pcapng, decisions.log). Every process it\n"
     "started is ended whatever happens (SIGINT and SIGTERM included).\n"
     "\n"
     "  -D NAME=VALUE   give parameter NAME this value\n"
     "  --seed N        the seed of every scenario (default: its `seed`, else random)\n"
     "  -j N            run N scenarios at a time (default 1)\n"
     "  --timeout S     each scenario's whole budget in seconds (default: its `timeout`)\n"
     "  --slow F        multiply every time bound by F (a slow machine)\n"
     "  --keep          keep the run directories of passed scenarios too\n"
     "  -v              a line per step with its elapsed time\n"
     "  --tap           TAP 14 on stdout\n"
     "  --junit FILE    JUnit XML to FILE\n"
     "\n"
     "Exit status: 0 every scenario passed, 1 one failed (or the run was\n"
     "interrupted), 2 a usage error or a bad script.",
     run_run},
};

static void usage_scenario(FILE *f)
{
	size_t i;

	fprintf(f, "usage: nicsim scenario SUBCOMMAND PATH... [OPTIONS]\n\n"
		   "Scenario scripts (.scn): a topology, host calls, faults, waits and\n"
		   "expectations in one file (docs/scenarios.md).\n\n");
	for (i = 0; i < ARRAY_SIZE(subcmds); i++)
		fprintf(f, "  scenario %-7s %s\n", subcmds[i].name, subcmds[i].summary);
	fprintf(f, "\n'nicsim scenario SUBCOMMAND --help' describes each.\n");
}

static void usage_subcmd(FILE *f, const struct scn_subcmd *c)
{
	fprintf(f, "usage: nicsim scenario %s %s\n\n%s\n\n%s\n", c->name, c->args, c->summary,
		c->text);
}

static const struct scn_subcmd *find_subcmd(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(subcmds); i++)
		if (!strcmp(subcmds[i].name, name))
			return &subcmds[i];
	return NULL;
}

/* The index of the word `scenario` when it is the command (only options or
 * `help` before it), else 0. */
static int scenario_word(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "scenario"))
			return i;
		if (argv[i][0] != '-' && strcmp(argv[i], "help"))
			return 0;
	}
	return 0;
}

bool cli_scenario_cmd(int argc, char **argv)
{
	return scenario_word(argc, argv) > 0;
}

/* A -D value: NAME=VALUE, NAME a word of the language. */
static int add_define(struct scn_args *a, const char *text)
{
	const char *eq = strchr(text, '=');
	size_t i, len = eq ? (size_t)(eq - text) : 0;

	for (i = 0; i < len; i++) {
		char c = text[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
		      (i && ((c >= '0' && c <= '9') || c == '.' || c == '-'))))
			break;
	}
	if (!eq || !len || i < len || len >= SCN_NAME_MAX) {
		cli_err("-D %s: expected NAME=VALUE, NAME a word such as SIZE", text);
		return CLI_EXIT_USAGE;
	}
	a->defs[a->ndefs].name = strndup(text, len);
	if (!a->defs[a->ndefs].name) {
		cli_err("out of memory");
		return CLI_EXIT_FAIL;
	}
	a->defs[a->ndefs++].value = eq + 1;
	return 0;
}

/* An option of `run` with a value. */
static int run_option(struct scn_args *a, const char *opt, const char *val)
{
	unsigned long long u;
	double d;
	char *end;

	a->run_opt = true;
	if (!strcmp(opt, "--junit")) {
		a->run.junit = val;
		return 0;
	}
	errno = 0;
	if (!strcmp(opt, "--seed") || !strcmp(opt, "-j")) {
		u = strtoull(val, &end, 0);
		if (errno || end == val || *end || val[0] == '-' ||
		    (!strcmp(opt, "-j") && (u < 1 || u > 64))) {
			cli_err("%s %s: expected %s", opt, val,
				!strcmp(opt, "-j") ? "a number of scenarios from 1 to 64"
						   : "a number (decimal or 0x hex)");
			return CLI_EXIT_USAGE;
		}
		if (!strcmp(opt, "-j")) {
			a->run.jobs = (unsigned)u;
		} else {
			a->run.seed_set = true;
			a->run.seed = u;
		}
		return 0;
	}
	d = strtod(val, &end);
	if (errno || end == val || *end || !(d > 0) || d > 1e6) {
		cli_err("%s %s: expected a positive number%s", opt, val,
			!strcmp(opt, "--slow") ? " (a factor, e.g. 2 or 1.5)" : " of seconds");
		return CLI_EXIT_USAGE;
	}
	if (!strcmp(opt, "--slow"))
		a->run.slow = d;
	else
		a->run.timeout_s = d;
	return 0;
}

static int parse_args(int argc, char **argv, int from, struct scn_args *a)
{
	bool words_only = false;
	const char *arg;
	int i, rc;

	a->paths = calloc((size_t)argc, sizeof(*a->paths));
	a->defs = calloc((size_t)argc, sizeof(*a->defs));
	if (!a->paths || !a->defs) {
		cli_err("out of memory");
		return CLI_EXIT_FAIL;
	}
	for (i = from; i < argc; i++) {
		arg = argv[i];
		if (words_only || arg[0] != '-' || !arg[1]) {
			a->paths[a->npaths++] = arg;
			continue;
		}
		if (!strcmp(arg, "--")) {
			words_only = true;
		} else if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			a->help = true;
		} else if (!strcmp(arg, "-D")) {
			if (i + 1 == argc) {
				cli_err("-D needs NAME=VALUE");
				return CLI_EXIT_USAGE;
			}
			rc = add_define(a, argv[++i]);
			if (rc)
				return rc;
		} else if (!strncmp(arg, "-D", 2)) {
			rc = add_define(a, arg + 2);
			if (rc)
				return rc;
		} else if (!strcmp(arg, "--keep") || !strcmp(arg, "-v") ||
			   !strcmp(arg, "--verbose") || !strcmp(arg, "--tap")) {
			a->run_opt = true;
			if (!strcmp(arg, "--keep"))
				a->run.keep = true;
			else if (!strcmp(arg, "--tap"))
				a->run.tap = true;
			else
				a->run.verbose = true;
		} else if (!strcmp(arg, "--seed") || !strcmp(arg, "-j") ||
			   !strcmp(arg, "--timeout") || !strcmp(arg, "--slow") ||
			   !strcmp(arg, "--junit")) {
			if (i + 1 == argc) {
				cli_err("%s needs a value; see 'nicsim scenario run --help'", arg);
				return CLI_EXIT_USAGE;
			}
			rc = run_option(a, arg, argv[++i]);
			if (rc)
				return rc;
		} else {
			cli_err("unknown option '%s'; see 'nicsim scenario --help'", arg);
			return CLI_EXIT_USAGE;
		}
	}
	return 0;
}

static void free_args(struct scn_args *a)
{
	size_t i;

	for (i = 0; a->defs && i < a->ndefs; i++)
		free((char *)a->defs[i].name);
	free(a->defs);
	free(a->paths);
}

static int run_check(const struct scn_args *a)
{
	struct scn_defines defs = {a->defs, a->ndefs};
	struct scn_files files;
	struct scn_diag *diag;
	int rc, found;

	if (!a->npaths) {
		cli_err("scenario check: name the files or directories to check");
		return CLI_EXIT_USAGE;
	}
	diag = calloc(1, sizeof(*diag));
	if (!diag) {
		cli_err("out of memory");
		return CLI_EXIT_FAIL;
	}
	found = scn_find_files(a->paths, a->npaths, &files, diag);
	scn_diag_print(diag, stderr);
	free(diag);
	if (found == -ENOMEM) {
		scn_files_free(&files);
		cli_err("out of memory");
		return CLI_EXIT_FAIL;
	}
	if (!files.n && !found) {
		cli_err("scenario check: no .scn file found");
		scn_files_free(&files);
		return CLI_EXIT_USAGE;
	}
	rc = scn_check_files(&files, &defs, stderr);
	scn_files_free(&files);
	if (rc == -ENOMEM) {
		cli_err("out of memory");
		return CLI_EXIT_FAIL;
	}
	return rc || found ? CLI_EXIT_USAGE : CLI_EXIT_OK;
}

static int run_run(const struct scn_args *a)
{
	struct scn_defines defs = {a->defs, a->ndefs};
	struct scn_run_opts o = a->run;

	if (!a->npaths) {
		cli_err("scenario run: name the files or directories to run");
		return CLI_EXIT_USAGE;
	}
	o.defs = &defs;
	return scn_run(a->paths, a->npaths, &o);
}

int cli_scenario(int argc, char **argv)
{
	int at = scenario_word(argc, argv), i;
	const struct scn_subcmd *c = NULL;
	struct scn_args a = {0};
	bool help = false;
	int rc;

	for (i = 1; i < at; i++)
		if (!strcmp(argv[i], "help") || !strcmp(argv[i], "-h") ||
		    !strcmp(argv[i], "--help"))
			help = true;
	/* The subcommand: the first word after `scenario`. */
	for (i = at + 1; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			help = true;
	if (i < argc && !strcmp(argv[i], "help")) {
		help = true;
		i++;
	}
	if (i < argc && argv[i][0] != '-') {
		c = find_subcmd(argv[i]);
		if (!c) {
			cli_err("unknown subcommand 'scenario %s'; see 'nicsim scenario --help'",
				argv[i]);
			return CLI_EXIT_USAGE;
		}
		i++;
	}
	if (!c) {
		if (help) {
			usage_scenario(stdout);
			return CLI_EXIT_OK;
		}
		cli_err("scenario what? 'nicsim scenario check PATH...' or 'run PATH...'");
		usage_scenario(stderr);
		return CLI_EXIT_USAGE;
	}
	rc = parse_args(argc, argv, i, &a);
	if (!rc && a.run_opt && c->run != run_run) {
		cli_err("scenario %s takes -D only; the other options are for 'scenario run'",
			c->name);
		rc = CLI_EXIT_USAGE;
	}
	if (!rc && (help || a.help)) {
		usage_subcmd(stdout, c);
		rc = CLI_EXIT_OK;
	} else if (!rc) {
		rc = c->run(&a);
	}
	free_args(&a);
	return rc;
}
