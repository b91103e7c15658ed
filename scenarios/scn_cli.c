/*
 * `nicsim scenario` (scn_cli_main in scn.h): parse the command line, then
 * call the rest of the library.  Each subcommand is one entry of a table: its
 * name, its help, its options and the function that runs it with the paths,
 * the -D overrides and its options' values (struct scn_args).  The options
 * are parsed and listed in the help from the table, so a subcommand is one
 * function and one entry.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "nicsim_rundir.h"
#include "scn.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* An option of a subcommand: --name (or -n for a one-letter name). */
struct scn_opt {
	const char *name;
	const char *arg; /* what its value is; NULL for a flag */
	const char *help;
};

#define SCN_OPTS_MAX 16

/* The command line after `scenario SUBCOMMAND`: paths, -D overrides (every
 * subcommand takes them), and the values of the subcommand's own options
 * by their index in its table ("" for a flag given, NULL when absent). */
struct scn_args {
	const char **paths;
	size_t npaths;
	struct scn_define *defs;
	size_t ndefs;
	const char *val[SCN_OPTS_MAX];
	const char *dir; /* --dir D before `scenario` */
	bool help;
};

struct scn_subcmd {
	const char *name;
	const char *args; /* the words it takes after its name */
	const char *summary;
	const char *text;
	int (*run)(const struct scn_args *a);
	const struct scn_opt *opts; /* its own options, ending with {NULL} */
};

static int run_check(const struct scn_args *a);
static int run_run(const struct scn_args *a);

/* The runner's options (SCN.md), parsed here so that `run` is one function. */
enum run_opt {
	RUN_SEED,
	RUN_JOBS,
	RUN_TIMEOUT,
	RUN_SLOW,
	RUN_KEEP,
	RUN_VERBOSE,
	RUN_TAP,
	RUN_JUNIT,
	RUN_DIR,
	RUN_CAPTURE_MAX
};

static const struct scn_opt run_opts[] = {
    [RUN_SEED] = {"seed", "N", "the seed of every scenario (default: its 'seed', else random)"},
    [RUN_JOBS] = {"j", "N", "run N scenarios at a time, each in its own run directory"},
    [RUN_TIMEOUT] = {"timeout", "S", "each scenario's whole budget in seconds"},
    [RUN_SLOW] = {"slow", "F", "multiply every time bound by F"},
    [RUN_KEEP] = {"keep", NULL, "keep every run directory, passed or not"},
    [RUN_VERBOSE] = {"v", NULL, "print each step as it runs, with its time"},
    [RUN_TAP] = {"tap", NULL, "TAP 14 on stdout"},
    [RUN_JUNIT] = {"junit", "FILE", "write JUnit XML to FILE"},
    [RUN_DIR] = {"dir", "D", "make the run directories below D (default: $TMPDIR, else /tmp)"},
    [RUN_CAPTURE_MAX] = {"capture-max", "SIZE",
			 "stop writing capture.pcapng at SIZE (64MiB default; KiB, MiB, GiB)"},
    {NULL, NULL, NULL},
};

/* check starts nothing: --dir, the tool's common option, is taken and has
 * no effect there. */
enum check_opt { CHECK_DIR };

static const struct scn_opt check_opts[] = {
    [CHECK_DIR] = {"dir", "D", "accepted as by every command; check starts nothing"},
    {NULL, NULL, NULL},
};

_Static_assert(ARRAY_SIZE(run_opts) <= SCN_OPTS_MAX, "scn_args holds every option's value");

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
     "Exit status: 0 every script is good (warnings are printed), 2 a usage error\n"
     "or a script with errors. docs/scenarios.md describes the language.",
     run_check, check_opts},
    {"run", "PATH... [-D NAME=VALUE]... [OPTIONS]", "run scenario scripts",
     "Checks every file first (nothing starts if one is bad), then runs each\n"
     "scenario in a private run directory under $TMPDIR: its NICs (nicsimd), its\n"
     "host agents (nicsim-agent), its programs, faults and expectations, with the\n"
     "capture on. Prints the seed first, with the command that replays the run;\n"
     "a failure as FILE:LINE: step, then expected and actual, and the run\n"
     "directory kept (NIC logs, capture.pcapng, decisions.log). Every process it\n"
     "started is ended whatever happens (SIGINT and SIGTERM included).\n"
     "\n"
     "Exit status: 0 every scenario passed, 1 one failed (or the run was\n"
     "interrupted), 2 a usage error or a bad script. docs/scenario-runner.md\n"
     "describes what the runner does, prints and keeps.",
     run_run, run_opts},
};

static void usage_scenario(FILE *f)
{
	size_t i;

	fprintf(f, "usage: nicsim scenario SUBCOMMAND PATH... [OPTIONS]\n\n"
		   "Scenario scripts (.scn): a topology, host calls, faults, waits and\n"
		   "expectations in one file (docs/scenarios.md).\n\n");
	for (i = 0; i < ARRAY_SIZE(subcmds); i++)
		fprintf(f, "  scenario %-7s %s\n", subcmds[i].name, subcmds[i].summary);
	fprintf(f, "\n'nicsim scenario SUBCOMMAND --help' describes each. --dir D (also\n"
		   "before 'scenario': 'nicsim --dir D scenario run ...') makes the run\n"
		   "directories below D.\n");
}

static void usage_subcmd(FILE *f, const struct scn_subcmd *c)
{
	const struct scn_opt *o;
	char left[32];

	fprintf(f, "usage: nicsim scenario %s %s\n\n%s\n\n%s\n\nOptions:\n", c->name, c->args,
		c->summary, c->text);
	fprintf(f, "  %-16s %s\n", "-D NAME=VALUE",
		"give parameter NAME this value (-D SEED=N: the seed)");
	for (o = c->opts; o->name; o++) {
		snprintf(left, sizeof(left), "%s%s%s%s", o->name[1] ? "--" : "-", o->name,
			 o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "  %-16s %s\n", left, o->help);
	}
	fprintf(f, "  %-16s %s\n", "--help", "show this help");
	fprintf(f,
		"\nThe tool's common options may come before 'scenario' too:\n"
		"'nicsim --dir D scenario %s ...' is 'nicsim scenario %s ... --dir D'.\n",
		c->name, c->name);
}

static const struct scn_subcmd *find_subcmd(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(subcmds); i++)
		if (!strcmp(subcmds[i].name, name))
			return &subcmds[i];
	return NULL;
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

/* One of c's options at argv[*i] ("--name", "--name=V", "-n", "-n V"):
 * its value in a->val; returns 0, or CLI_EXIT_USAGE after saying why. */
static int parse_opt(const struct scn_subcmd *c, int argc, char **argv, int *i, struct scn_args *a)
{
	const char *arg = argv[*i], *name = arg + (arg[1] == '-' ? 2 : 1);
	const char *eq = arg[1] == '-' ? strchr(name, '=') : NULL;
	size_t len = eq ? (size_t)(eq - name) : strlen(name), k;

	for (k = 0; c->opts[k].name; k++) {
		const struct scn_opt *o = &c->opts[k];

		/* "-j4": a one-letter option with its value attached. */
		if (arg[1] != '-' && len > 1 && o->arg && !o->name[1] && o->name[0] == name[0]) {
			a->val[k] = name + 1;
			return 0;
		}
		if (strlen(o->name) != len || strncmp(o->name, name, len) ||
		    (arg[1] == '-') != (len > 1))
			continue;
		if (!o->arg) {
			if (eq) {
				cli_err("option %s takes no value", o->name);
				return CLI_EXIT_USAGE;
			}
			a->val[k] = "";
		} else if (eq) {
			a->val[k] = eq + 1;
		} else if (*i + 1 < argc) {
			a->val[k] = argv[++*i];
		} else {
			cli_err("option %s needs a value (%s)", arg, o->arg);
			return CLI_EXIT_USAGE;
		}
		return 0;
	}
	cli_err("unknown option '%.*s' for 'nicsim scenario %s'; see 'nicsim scenario %s --help'",
		(int)(eq ? (size_t)(eq - arg) : strlen(arg)), arg, c->name, c->name);
	return CLI_EXIT_USAGE;
}

static int parse_args(const struct scn_subcmd *c, int argc, char **argv, int from,
		      struct scn_args *a)
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
		} else {
			rc = parse_opt(c, argc, argv, &i, a);
			if (rc)
				return rc;
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

/* A number of run's option k, from min to max (whole when integer). */
static int run_number(const struct scn_args *a, enum run_opt k, double min, double max,
		      bool integer, double *v)
{
	const char *text = a->val[k];
	char *end;

	errno = 0;
	*v = integer ? (double)strtoull(text, &end, 0) : strtod(text, &end);
	if (errno || end == text || *end || text[0] == '-' || !(*v >= min && *v <= max)) {
		cli_err("%s%s %s: expected %s from %g to %g", run_opts[k].name[1] ? "--" : "-",
			run_opts[k].name, text, integer ? "a whole number" : "a number", min, max);
		return CLI_EXIT_USAGE;
	}
	return 0;
}

static int run_run(const struct scn_args *a)
{
	struct scn_defines defs = {a->defs, a->ndefs};
	struct scn_run_opts o = {.defs = &defs};
	char dir[PATH_MAX];
	double v;
	char *end;

	if (!a->npaths) {
		cli_err("scenario run: name the files or directories to run");
		return CLI_EXIT_USAGE;
	}
	if (a->val[RUN_SEED]) {
		errno = 0;
		o.seed = strtoull(a->val[RUN_SEED], &end, 0);
		if (errno == ERANGE) {
			cli_err("--seed %s: too large (at most 2^64-1, 18446744073709551615)",
				a->val[RUN_SEED]);
			return CLI_EXIT_USAGE;
		}
		if (errno || end == a->val[RUN_SEED] || *end || a->val[RUN_SEED][0] == '-') {
			cli_err("--seed %s: expected a number (decimal or 0x hex)",
				a->val[RUN_SEED]);
			return CLI_EXIT_USAGE;
		}
		o.seed_set = true;
	}
	if (a->val[RUN_JOBS]) {
		if (run_number(a, RUN_JOBS, 1, 64, true, &v))
			return CLI_EXIT_USAGE;
		o.jobs = (unsigned)v;
	}
	if (a->val[RUN_TIMEOUT]) {
		if (run_number(a, RUN_TIMEOUT, 0.001, 86400, false, &o.timeout_s))
			return CLI_EXIT_USAGE;
	}
	if (a->val[RUN_SLOW]) {
		if (run_number(a, RUN_SLOW, 0.01, 1000, false, &o.slow))
			return CLI_EXIT_USAGE;
	}
	if (a->val[RUN_CAPTURE_MAX]) {
		const char *t = a->val[RUN_CAPTURE_MAX];
		unsigned long long n;
		unsigned shift = 0;

		errno = 0;
		n = strtoull(t, &end, 10);
		if (!strcmp(end, "KiB"))
			shift = 10;
		else if (!strcmp(end, "MiB"))
			shift = 20;
		else if (!strcmp(end, "GiB"))
			shift = 30;
		if (errno || end == t || t[0] == '-' || (*end && !shift) || !n ||
		    n > (1ull << 40) >> shift) {
			cli_err(
			    "--capture-max %s: expected a size from 1 byte to 1024GiB, in bytes or "
			    "with KiB, MiB or GiB (e.g. 256MiB)",
			    t);
			return CLI_EXIT_USAGE;
		}
		o.capture_max = (uint64_t)n << shift;
	}
	o.keep = a->val[RUN_KEEP] != NULL;
	o.verbose = a->val[RUN_VERBOSE] != NULL;
	o.tap = a->val[RUN_TAP] != NULL;
	o.junit = a->val[RUN_JUNIT];
	if (a->val[RUN_DIR] || a->dir) {
		const char *d = a->val[RUN_DIR] ? a->val[RUN_DIR] : a->dir;

		struct stat st;

		if (nic_run_dir(dir, sizeof(dir), d)) {
			cli_err("--dir %s: expected a directory path (not too long)", d);
			return CLI_EXIT_USAGE;
		}
		/* Checked before anything runs: a missing directory is the
		 * command's mistake, not every scenario's failure. */
		if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
			cli_err("--dir %s: %s; create it first or name another", d,
				errno == ENOENT ? "no such directory" : "not a directory");
			return CLI_EXIT_USAGE;
		}
		o.dir = dir;
	}
	return scn_run(a->paths, a->npaths, &o);
}

int scn_cli_main(int argc, char **argv)
{
	int at = cli_command_at(argc, argv, "scenario"), i;
	const struct scn_subcmd *c = NULL;
	struct scn_args a = {0};
	bool help = false;
	int rc;

	/* The tool's common options before `scenario`, as every command
	 * takes them: --dir D (either spelling), --help, --version. */
	for (i = 1; i < at; i++) {
		if (!strcmp(argv[i], "help") || !strcmp(argv[i], "-h") ||
		    !strcmp(argv[i], "--help")) {
			help = true;
		} else if (!strcmp(argv[i], "--version")) {
			cli_version(stdout);
			return CLI_EXIT_OK;
		} else if (!strcmp(argv[i], "--dir") && i + 1 < at) {
			a.dir = argv[++i];
		} else if (!strncmp(argv[i], "--dir=", 6)) {
			a.dir = argv[i] + 6;
		} else if (cli_is_option(argv[i])) {
			cli_err("option %.*s does not apply to 'nicsim scenario'; see 'nicsim "
				"scenario --help'",
				(int)strcspn(argv[i], "="), argv[i]);
			return CLI_EXIT_USAGE;
		} else {
			cli_err("unknown option '%s'; run 'nicsim help'", argv[i]);
			return CLI_EXIT_USAGE;
		}
	}
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
	rc = parse_args(c, argc, argv, i, &a);
	if (!rc && (help || a.help)) {
		usage_subcmd(stdout, c);
		rc = CLI_EXIT_OK;
	} else if (!rc) {
		rc = c->run(&a);
	}
	free_args(&a);
	return rc;
}
