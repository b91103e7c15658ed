#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "capture.h"
#include "fab.h"
#include "fab_addr.h"
#include "fab_capture.h"
#include "fab_wire.h"
#include "log.h"
#include "mgmt_client.h"
#include "nicsim_abi_util.h"
#include "nicsim_mgmt.h"
#include "nicsim_refusal.h"
#include "opts.h"
#include "nicsim_rundir.h"

#ifndef NICSIM_VERSION
#define NICSIM_VERSION "unknown"
#endif

/* ---- Options and commands ------------------------------------------------ */

enum opt_id {
	OPT_DIR,
	OPT_NIC,
	OPT_JSON,
	OPT_HOSTS,
	OPT_TPT_CAPACITY,
	OPT_MAX_REG,
	OPT_NO_MW,
	OPT_NO_RDMA_READ,
	OPT_ONE_PROCESS,
	OPT_UDP,
	OPT_ALLOW_GROUP,
	OPT_REMOTE,
	OPT_ACK_TIMEOUT, /* the timer options, in the order of nic_timer_opts */
	OPT_RETRY_COUNT,
	OPT_RNR_RETRY,
	OPT_CM_TIMEOUT,
	OPT_CM_RETRIES,
	OPT_RNR_TIMER,
	OPT_LOG_LEVEL,
	OPT_TIMEOUT,
	OPT_SEED,
	OPT_HELP,
	OPT_VERSION,
	OPT_COUNT_
};

#define OPT_BIT(id) (1u << (id))

struct opt_spec {
	const char *name; /* spelled --name */
	enum opt_id id;
	const char *arg; /* what the value is, NULL for a flag */
	const char *help;
};

static const struct opt_spec opt_specs[] = {
    {"dir", OPT_DIR, "D",
     "run directory (default: $NICSIM_DIR, else $XDG_RUNTIME_DIR/nicsim, else /tmp/nicsim-UID)"},
    {"nic", OPT_NIC, "ADDR", "only the NIC with this address (in 198.18.0.0/15)"},
    {"json", OPT_JSON, NULL, "print one JSON document instead of text"},
    {"hosts", OPT_HOSTS, "N", "start N NICs, 198.18.0.1 .. 198.18.0.N (default 2)"},
    {"tpt-capacity", OPT_TPT_CAPACITY, "N", "TPT entries per NIC (default: nicsimd's)"},
    {"max-reg", OPT_MAX_REG, "SIZE", "largest registration, e.g. 65536, 64K, 1G"},
    {"no-mw", OPT_NO_MW, NULL, "NICs without memory windows"},
    {"no-rdma-read", OPT_NO_RDMA_READ, NULL, "NICs that do not serve RDMA READ"},
    {"one-process", OPT_ONE_PROCESS, NULL,
     "serve all the NICs from one nicsimd (one thread): small messages between them take "
     "half the time on a busy machine; bulk transfers share one CPU"},
    {"udp", OPT_UDP, NULL,
     "NICs that also reach NICs beyond this fabric: RoCEv2 datagrams on UDP port 4791 of "
     "their addresses, which must be on interfaces here (needs root; docs/fabric.md)"},
    {"allow-group", OPT_ALLOW_GROUP, "G",
     "let processes of group G (a name or a gid) attach hosts too, not manage the NICs; "
     "NICs started as root only (nicsimd --help, docs/security.md)"},
    {"remote", OPT_REMOTE, NULL,
     "DST is a NIC beyond this fabric, reached over UDP (nicsimd --udp): give it a port "
     "slot here for the link's rules"},
    {"ack-timeout", OPT_ACK_TIMEOUT, "C",
     "local ACK timeout code, 1..31: 4.096 us x 2^C (default: nicsimd's)"},
    {"retry-count", OPT_RETRY_COUNT, "N", "retransmission timeouts before a request fails, 0..7"},
    {"rnr-retry", OPT_RNR_RETRY, "N", "RNR NAKs before a request fails, 0..7 (7: no limit)"},
    {"cm-timeout", OPT_CM_TIMEOUT, "C", "CM response timeout code, 0..31"},
    {"cm-retries", OPT_CM_RETRIES, "N", "CM REQ, REP and DREQ retransmissions, 0..15"},
    {"rnr-timer", OPT_RNR_TIMER, "C",
     "RNR NAK timer code a receiving NIC sends, 0..31 (12: 0.64 ms; default: nicsimd's)"},
    {"log-level", OPT_LOG_LEVEL, "L", "nicsimd log level: error, warn, info or debug"},
    {"timeout-ms", OPT_TIMEOUT, "T", "bound on each wait for a NIC, in ms"},
    {"seed", OPT_SEED, "N",
     "seed of the fabric's fault decisions (default: a random one, printed; the same seed "
     "replays a run)"},
    {"help", OPT_HELP, NULL, "show help and exit"},
    {"version", OPT_VERSION, NULL, "show the version and exit"},
};

static int run_show_tpt(struct cli_opts *o);
static int run_show_faults(struct cli_opts *o);
static int run_show_hosts(struct cli_opts *o);
static int run_stats(struct cli_opts *o);
static int run_link_show(struct cli_opts *o);
static int run_link_set(struct cli_opts *o);
static int run_dir(struct cli_opts *o);

#define QUERY_OPTS (OPT_BIT(OPT_DIR) | OPT_BIT(OPT_NIC) | OPT_BIT(OPT_JSON) | OPT_BIT(OPT_TIMEOUT))

struct cmd_spec {
	const char *name; /* as typed: "up", "show tpt" */
	const char *args; /* the words it takes after its name ("SRC DST ..."), or NULL */
	int (*run)(struct cli_opts *o);
	unsigned opts; /* OPT_BIT()s it accepts besides --help */
	const char *summary;
	const char *text;
};

static const struct cmd_spec cmd_specs[] = {
    {"up", NULL, cli_up,
     OPT_BIT(OPT_DIR) | OPT_BIT(OPT_HOSTS) | OPT_BIT(OPT_TPT_CAPACITY) | OPT_BIT(OPT_MAX_REG) |
	 OPT_BIT(OPT_NO_MW) | OPT_BIT(OPT_NO_RDMA_READ) | OPT_BIT(OPT_ONE_PROCESS) |
	 OPT_BIT(OPT_UDP) | OPT_BIT(OPT_ALLOW_GROUP) | OPT_BIT(OPT_ACK_TIMEOUT) |
	 OPT_BIT(OPT_RETRY_COUNT) | OPT_BIT(OPT_RNR_RETRY) | OPT_BIT(OPT_CM_TIMEOUT) |
	 OPT_BIT(OPT_CM_RETRIES) | OPT_BIT(OPT_RNR_TIMER) | OPT_BIT(OPT_LOG_LEVEL) |
	 OPT_BIT(OPT_TIMEOUT) | OPT_BIT(OPT_SEED) | OPT_BIT(OPT_NIC),
     "start NICs (default: 2 in the default run directory)",
     "Creates the run directory and the fabric that joins its NICs (D/fabric.shm),\n"
     "then starts one nicsimd per NIC, detached, logging to D/nic-ADDR.log. Returns\n"
     "once every NIC answers (bounded by --timeout-ms, default 10000); if one does\n"
     "not, stops them all and shows its log. Refuses to start a NIC whose address is\n"
     "already served in the directory: a second 'nicsim up' exits 1 and starts\n"
     "nothing. --nic ADDR starts just that NIC (instead of --hosts), e.g. to\n"
     "restart one that died while the others run. A fabric that running NICs\n"
     "already use is kept and joined. Prints the fabric's seed: --seed with it replays the run's\n"
     "fault decisions. The timer options go to every nicsimd (nicsimd --help,\n"
     "docs/transport.md \"Timeouts\").\n"
     "\n"
     "--allow-group G goes to every nicsimd: besides this user's and root's, processes\n"
     "whose primary or supplementary group is G may attach as hosts (never manage the\n"
     "NICs); the run directory becomes group G's (mode 0750), the sockets 0660. The\n"
     "NICs must run as root to reach other users' memory (docs/security.md).\n"
     "\n"
     "--one-process starts a single nicsimd that serves every NIC from one thread\n"
     "(its log is the first NIC's). A message from one NIC to another then wakes no\n"
     "other process, which halves a small message's round trip when the hosts and\n"
     "NICs share few CPUs; but the NICs' bulk copies share one CPU, and stopping or\n"
     "killing that process ('nicsim down --nic' included) stops every NIC in it.\n"
     "Use it for latency-bound tests; keep the default for bandwidth and for\n"
     "scenarios that kill a NIC."},
    {"down", NULL, cli_down, OPT_BIT(OPT_DIR) | OPT_BIT(OPT_NIC) | OPT_BIT(OPT_TIMEOUT),
     "stop the NICs of a run directory",
     "Sends SIGTERM to every nicsimd of the run directory (or the one --nic names),\n"
     "waits up to --timeout-ms (default 5000) for each to exit, then SIGKILLs it.\n"
     "A 'nicsim up' or 'nicsim down' already working in the directory finishes\n"
     "first; down waits for it up to --timeout-ms too (default 15000).\n"
     "Removes the pid and socket files of daemons that are gone and, unless --nic\n"
     "was given, the fabric (D/fabric.shm and the ports' bells) once no NIC uses it.\n"
     "--nic of a NIC that 'nicsim up --one-process' started stops its nicsimd, and\n"
     "with it every NIC that nicsimd serves: down says which."},
    {"show tpt", NULL, run_show_tpt, QUERY_OPTS, "list live TPT entries (regions and windows)",
     "One line per live entry of each NIC's translation/protection table: key, type,\n"
     "state, owner context, range, access (lw local write, rr remote read, rw remote\n"
     "write, bind windows; lr when only the implied local read), the window's region\n"
     "and connection, and the owner's pid and program."},
    {"show faults", NULL, run_show_faults, QUERY_OPTS, "list recent TPT refusals, with reasons",
     "The most recent accesses each NIC's TPT refused, oldest first: when, the owner\n"
     "of the connection it came on (pid, context, QP), for a remote access the\n"
     "requester (\"from ADDR qpn N\", with the request's opcode and PSN), which key,\n"
     "which rule refused it, what was asked, and what the entry holds now."},
    {"show hosts", NULL, run_show_hosts, QUERY_OPTS,
     "list host processes attached, with their registration caches",
     "One line per host context of each NIC: context, pid and program, QPs in use,\n"
     "then the registration cache its provider publishes (docs/registration-cache.md):\n"
     "on or off, hits, misses, evictions, invalidations, entries tracked and unused,\n"
     "bytes they cover and bytes pinned. 'cache unknown' when the host publishes none.\n"
     "A host whose last registration was refused for a limit of the system (memlock,\n"
     "ptrace) gets a second line saying which limit, its value and how to raise it;\n"
     "the last 8 such hosts that have detached are still listed, marked 'detached'\n"
     "(--json: under \"detached\"), so a program that failed and exited still says why."},
    {"stats", NULL, run_stats, QUERY_OPTS, "print every counter of each NIC",
     "Every counter of each NIC with its description; --json prints\n"
     "{\"nics\":[{\"addr\":...,\"stats\":{...}}]}."},
    {"link show", NULL, run_link_show, OPT_BIT(OPT_DIR) | OPT_BIT(OPT_NIC) | OPT_BIT(OPT_JSON),
     "show the fabric's ports and links, their settings and counters",
     "Reads the fabric segment D/fabric.shm directly (the NICs need not answer).\n"
     "One line per port (open or closed, its owner, frames it holds, input it\n"
     "refused) and two per directed link: its settings, written as 'nicsim link\n"
     "set' takes them (microseconds, Gbit/s, percent) with its seed, then its\n"
     "counters. --nic shows only the links from or to that address. --json prints\n"
     "{\"fabric\":{...},\"ports\":[...],\"links\":[{\"src\":...,\"dst\":...,\n"
     "\"config\":{...},\"stats\":{...}}]} with times in ns, rates in Mbit/s and\n"
     "shares in parts per billion."},
    {"link set", "SRC DST SETTING...", run_link_set, OPT_BIT(OPT_DIR) | OPT_BIT(OPT_REMOTE),
     "change link settings: latency, rate and fault rules",
     "Changes the directed link from SRC to DST at once, while NICs run. SRC and\n"
     "DST are addresses or 'all' (every port of the fabric; 'all' leaves out a\n"
     "port's link to itself). A DST that is not on the fabric, a NIC that its\n"
     "NICs reach over UDP (nicsimd --udp), gets a slot: the rules then act on\n"
     "the datagrams sent to it (rules act where frames are sent, so a link from\n"
     "such a NIC carries nothing here). Settings not named keep their values:\n"
     "\n"
     "  latency US       propagation delay of every frame\n"
     "  jitter US        plus 0..US at random per frame (frames keep their order)\n"
     "  rate GBIT        serialisation rate, e.g. 10 or 0.1 (0: unlimited)\n"
     "  loss PCT         drop this share of the frames\n"
     "  dup PCT          send a second copy of this share\n"
     "  reorder PCT      hold this share back by the reorder gap: later frames pass\n"
     "  reorder-gap US   how long (default 50)\n"
     "  corrupt PCT      flip one bit after the BTH: the frame fails its ICRC check\n"
     "  delay US         extra delay (plus jitter) for every frame, or for ...\n"
     "  delay-pct PCT    ... this share of them (only with delay)\n"
     "  drop-nth N       drop the Nth frame from now that matches (once, N >= 1);\n"
     "                   'drop-nth off' removes the rule\n"
     "    opcode NAME|NUM  ... with this BTH opcode, named as capture prints it\n"
     "                     (RC_SEND_ONLY, RC_RDMA_WRITE_FIRST, RC_ACKNOWLEDGE; case,\n"
     "                     the RC_ prefix and '-' for '_' optional; ACK)\n"
     "    qpn N            ... to this destination QP\n"
     "  down, up         take the link down (frames sent or in flight are lost), up\n"
     "  seed N           restart the link's random decisions from this seed\n"
     "  clear            every setting back to its default, the seed kept (first)\n"
     "\n"
     "Decimals are allowed (2.5 us, 0.01 %). Each decision depends only on the\n"
     "seed and the frame's number on the link, so the same traffic after the same\n"
     "'seed N' meets the same faults.\n"
     "\n"
     "A DST that is not a NIC of this fabric, reached over UDP (nicsimd --udp), needs\n"
     "--remote: it then gets a port slot here for as long as the fabric exists, and\n"
     "the rules decide on the datagrams SRC sends it. Examples:\n"
     "  nicsim link set 198.18.0.1 198.18.0.2 latency 10 jitter 2 loss 1 seed 42\n"
     "  nicsim link set --remote 198.18.0.1 198.18.7.1 loss 1"},
    {"dir", NULL, run_dir, OPT_BIT(OPT_DIR), "print the run directory",
     "Prints the run directory that the other commands, nicsimd and the provider\n"
     "use, resolved as they resolve it: --dir D, else $NICSIM_DIR, else\n"
     "$XDG_RUNTIME_DIR/nicsim (when $XDG_RUNTIME_DIR is an existing directory of\n"
     "yours that nobody else may write to), else /tmp/nicsim-UID; a relative path\n"
     "is made absolute from the working directory. Scripts ask it rather than\n"
     "resolving the directory themselves: dir=$(nicsim dir). The directory need\n"
     "not exist yet ('nicsim up' creates it, but not its parents). Exits 1,\n"
     "saying why, if it exists but is unsafe to use: a symbolic link, not a\n"
     "directory, owned by another user, or writable by group or others (at most\n"
     "mode 0755 is allowed); every command, nicsimd and the provider refuse such a\n"
     "directory."},
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static char *err_buf;
static size_t err_size;

void cli_err_capture(char *buf, size_t size)
{
	err_buf = size ? buf : NULL;
	err_size = size;
	if (err_buf)
		err_buf[0] = '\0';
}

void cli_err(const char *fmt, ...)
{
	char text[NIC_RUN_WHY_MAX], shown[NIC_RUN_WHY_MAX];
	va_list ap;
	size_t len;

	fflush(stdout);
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (err_buf) {
		len = strlen(err_buf);
		snprintf(err_buf + len, err_size - len, "%s%s", len ? "; " : "", text);
		return;
	}
	/* One line, whatever the paths in it hold (they come from the
	 * environment and the command line). */
	fprintf(stderr, "nicsim: %s\n", nic_escape(shown, sizeof(shown), text));
}

int cli_dir_check(const struct cli_opts *o)
{
	char why[NIC_RUN_WHY_MAX];
	int rc = nic_run_dir_check(o->dir, why, sizeof(why));

	if (rc == 0 || rc == -ENOENT)
		return 0;
	cli_err("%s", why);
	return rc;
}

const char *cli_link_planted(const char *path)
{
	static char msg[PATH_MAX * 2 + 128];

	snprintf(msg, sizeof(msg),
		 "%s is a symbolic link, which nicsim never follows in a run directory: "
		 "remove it (rm %s)",
		 path, path);
	return msg;
}

static int run_dir(struct cli_opts *o)
{
	/* cli_main has checked it. */
	printf("%s\n", o->dir);
	return CLI_EXIT_OK;
}

int cli_sock_path(const struct cli_opts *o, uint32_t addr, char *buf, size_t size)
{
	char a[FAB_ADDR_STRLEN];
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
	int rc;

	rc = nic_sock_path(buf, size, o->dir, addr);
	if (rc) {
		fab_addr_format(addr, a, sizeof(a));
		cli_err("socket path %s/" NIC_SOCK_PREFIX "%s" NIC_SOCK_SUFFIX
			" is too long for a UNIX socket (at most %zu bytes); use a shorter --dir",
			o->dir, a, max);
	}
	return rc;
}

static const struct opt_spec *find_opt(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(opt_specs); i++)
		if (strlen(opt_specs[i].name) == len && !strncmp(opt_specs[i].name, name, len))
			return &opt_specs[i];
	return NULL;
}

static const struct cmd_spec *find_cmd(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cmd_specs); i++)
		if (!strcmp(cmd_specs[i].name, name))
			return &cmd_specs[i];
	return NULL;
}

/* One option of a help text; the description wraps at 80 columns. */
static void print_opt(FILE *f, const struct opt_spec *s)
{
	enum { INDENT = 23, WIDTH = 80 - INDENT };
	const char *text = s->help, *cut;
	char left[40];
	int len;

	snprintf(left, sizeof(left), "--%s%s%s", s->name, s->arg ? " " : "", s->arg ? s->arg : "");
	fprintf(f, "  %-20s ", left);
	while (strlen(text) > WIDTH) {
		for (cut = text + WIDTH; cut > text && *cut != ' '; cut--)
			;
		if (cut == text)
			break;
		len = (int)(cut - text);
		fprintf(f, "%.*s\n%*s", len, text, INDENT, "");
		text = cut + 1;
	}
	fprintf(f, "%s\n", text);
}

static void usage_top(FILE *f)
{
	char dir[PATH_MAX];
	size_t i;

	fprintf(f, "usage: nicsim [--dir D] [--nic ADDR] COMMAND [OPTIONS]\n"
		   "\n"
		   "Starts, stops and inspects emulated nicsim NICs (nicsimd daemons). The NICs\n"
		   "of a run directory are found like the provider finds them: --dir D, else\n"
		   "$NICSIM_DIR, else $XDG_RUNTIME_DIR/nicsim, else /tmp/nicsim-UID.\n");
	if (nic_run_dir(dir, sizeof(dir), NULL) == 0)
		fprintf(f, "Here and now that is %s.\n", dir);
	fprintf(f, "\nCommands:\n");
	for (i = 0; i < ARRAY_SIZE(cmd_specs); i++)
		fprintf(f, "  %-20s %s\n", cmd_specs[i].name, cmd_specs[i].summary);
	fprintf(f, "  %-20s %s\n", "capture", "capture the fabric's frames (pcap, pcapng, tshark)");
	fprintf(f, "  %-20s %s\n", "scenario", "check and run scenario scripts (.scn)");
	fprintf(f, "  %-20s %s\n", "help [COMMAND]", "show help for a command");
	fprintf(f, "\nCommon options (before or after the command):\n");
	print_opt(f, &opt_specs[OPT_DIR]);
	print_opt(f, &opt_specs[OPT_NIC]);
	print_opt(f, &opt_specs[OPT_HELP]);
	print_opt(f, &opt_specs[OPT_VERSION]);
	fprintf(f, "'nicsim [--dir D] scenario run' makes each scenario's private run directory\n"
		   "below D (default: $TMPDIR); --nic does not apply to 'scenario'.\n");
	fprintf(f, "\nExit status: 0 success, 1 failure, 2 usage error.\n");
}

static void usage_cmd(FILE *f, const struct cmd_spec *c)
{
	size_t i;

	fprintf(f, "usage: nicsim %s %s%s[OPTIONS]\n\n%s\n\n%s\n\nOptions:\n", c->name,
		c->args ? c->args : "", c->args ? " " : "", c->summary, c->text);
	for (i = 0; i < ARRAY_SIZE(opt_specs); i++)
		if (c->opts & OPT_BIT(opt_specs[i].id))
			print_opt(f, &opt_specs[i]);
	print_opt(f, &opt_specs[OPT_HELP]);
}

static void usage_link(FILE *f)
{
	fprintf(f,
		"usage: nicsim link show [OPTIONS]\n"
		"       nicsim link set SRC DST SETTING... [OPTIONS]\n\n"
		"  link show  %s\n  link set   %s\n\n"
		"'nicsim link show --help' and 'nicsim link set --help' describe them.\n",
		find_cmd("link show")->summary, find_cmd("link set")->summary);
}

static void usage_show(FILE *f)
{
	fprintf(f,
		"usage: nicsim show tpt|faults|hosts [OPTIONS]\n\n"
		"  show tpt     %s\n  show faults  %s\n  show hosts   %s\n\n"
		"'nicsim show tpt --help' (faults, hosts) describes each.\n",
		find_cmd("show tpt")->summary, find_cmd("show faults")->summary,
		find_cmd("show hosts")->summary);
}

/* ---- Parsing ------------------------------------------------------------- */

struct cmdline {
	const char *words[64];
	size_t nwords;
	const char *val[OPT_COUNT_]; /* value, or "" for a flag that was given */
};

/* Split argv into command words and options; returns 0 or CLI_EXIT_USAGE. */
static int split_args(int argc, char **argv, struct cmdline *cl)
{
	const struct opt_spec *s;
	const char *arg, *eq, *val;
	bool words_only = false;
	int i;

	memset(cl, 0, sizeof(*cl));
	for (i = 1; i < argc; i++) {
		arg = argv[i];
		/* "-3" or "-.5" is a (bad) value for a setting, which says what
		 * it expects, not an option. */
		if (words_only || arg[0] != '-' || !arg[1] || isdigit((unsigned char)arg[1]) ||
		    arg[1] == '.') {
			if (cl->nwords == ARRAY_SIZE(cl->words)) {
				cli_err("too many arguments ('%s'); run 'nicsim help'", arg);
				return CLI_EXIT_USAGE;
			}
			cl->words[cl->nwords++] = arg;
			continue;
		}
		if (!strcmp(arg, "--")) {
			words_only = true;
			continue;
		}
		if (!strcmp(arg, "-h")) {
			cl->val[OPT_HELP] = "";
			continue;
		}
		if (arg[1] != '-') {
			cli_err("unknown option '%s'; run 'nicsim help'", arg);
			return CLI_EXIT_USAGE;
		}
		eq = strchr(arg + 2, '=');
		s = find_opt(arg + 2, eq ? (size_t)(eq - arg - 2) : strlen(arg + 2));
		if (!s) {
			cli_err("unknown option '%.*s'; run 'nicsim help'",
				eq ? (int)(eq - arg) : (int)strlen(arg), arg);
			return CLI_EXIT_USAGE;
		}
		if (!s->arg) {
			if (eq) {
				cli_err("option --%s takes no value", s->name);
				return CLI_EXIT_USAGE;
			}
			val = "";
		} else if (eq) {
			val = eq + 1;
		} else if (i + 1 < argc) {
			val = argv[++i];
		} else {
			cli_err("option --%s needs a value (%s)", s->name, s->arg);
			return CLI_EXIT_USAGE;
		}
		cl->val[s->id] = val;
	}
	return 0;
}

/* Parse an unsigned number within [min, max]; prints the error itself. */
static int parse_num(const char *opt, const char *text, uint64_t min, uint64_t max, uint64_t *v)
{
	if (opts_parse_u64(text, v) < 0 || *v < min || *v > max) {
		cli_err("--%s %s: expected a number from %llu to %llu", opt, text,
			(unsigned long long)min, (unsigned long long)max);
		return CLI_EXIT_USAGE;
	}
	return 0;
}

/* Check and convert the option values for command c; returns 0 or an exit status. */
static int apply_opts(const struct cmdline *cl, const struct cmd_spec *c, struct cli_opts *o)
{
	enum nic_log_level level;
	uint64_t v;
	size_t i;
	int rc;

	for (i = 0; i < ARRAY_SIZE(opt_specs); i++) {
		enum opt_id id = opt_specs[i].id;

		if (cl->val[id] && id != OPT_HELP && id != OPT_VERSION &&
		    !(c->opts & OPT_BIT(id))) {
			cli_err("option --%s does not apply to 'nicsim %s'; see 'nicsim %s --help'",
				opt_specs[i].name, c->name, c->name);
			return CLI_EXIT_USAGE;
		}
	}
	if (cl->val[OPT_NIC]) {
		rc = fab_addr_parse(cl->val[OPT_NIC], &o->nic);
		if (rc == -EADDRNOTAVAIL) {
			cli_err("--nic %s: not a NIC address: nicsim NICs take 198.18.0.1 to "
				"198.19.255.254 (198.18.0.0/15 without its network and broadcast "
				"addresses)",
				cl->val[OPT_NIC]);
			return CLI_EXIT_USAGE;
		}
		if (rc) {
			cli_err("--nic %s: not an IPv4 address (expected e.g. 198.18.0.1)",
				cl->val[OPT_NIC]);
			return CLI_EXIT_USAGE;
		}
		o->nic_set = true;
	}
	o->json = cl->val[OPT_JSON] != NULL;
	o->hosts = CLI_DEFAULT_HOSTS;
	if (cl->val[OPT_HOSTS] && cl->val[OPT_NIC]) {
		cli_err("--hosts and --nic: give one (--nic ADDR starts just that NIC)");
		return CLI_EXIT_USAGE;
	}
	if (cl->val[OPT_HOSTS]) {
		rc = parse_num("hosts", cl->val[OPT_HOSTS], 1, CLI_MAX_HOSTS, &v);
		if (rc)
			return rc;
		o->hosts = (unsigned)v;
	}
	if (cl->val[OPT_TPT_CAPACITY]) {
		rc = parse_num("tpt-capacity", cl->val[OPT_TPT_CAPACITY], 1, NIC_TPT_MAX_CAPACITY,
			       &v);
		if (rc)
			return rc;
		o->tpt_capacity = cl->val[OPT_TPT_CAPACITY];
	}
	if (cl->val[OPT_MAX_REG]) {
		if (opts_parse_size(cl->val[OPT_MAX_REG], &v) < 0 || v == 0) {
			cli_err("--max-reg %s: expected a size such as 65536, 64K or 1G",
				cl->val[OPT_MAX_REG]);
			return CLI_EXIT_USAGE;
		}
		o->max_reg = cl->val[OPT_MAX_REG];
	}
	if (cl->val[OPT_LOG_LEVEL]) {
		if (nic_log_level_parse(cl->val[OPT_LOG_LEVEL], &level) < 0) {
			cli_err("--log-level %s: expected error, warn, info or debug",
				cl->val[OPT_LOG_LEVEL]);
			return CLI_EXIT_USAGE;
		}
		o->log_level = cl->val[OPT_LOG_LEVEL];
	}
	for (i = 0; i < NIC_TIMER_OPTS; i++) {
		const struct nic_timer_opt_spec *t = &nic_timer_opts[i];
		const char *text = cl->val[OPT_ACK_TIMEOUT + i];

		if (!text)
			continue;
		rc = parse_num(t->name, text, t->min, t->max, &v);
		if (rc)
			return rc;
		o->timer[i] = text;
	}
	o->no_mw = cl->val[OPT_NO_MW] != NULL;
	o->no_rdma_read = cl->val[OPT_NO_RDMA_READ] != NULL;
	o->one_process = cl->val[OPT_ONE_PROCESS] != NULL;
	o->udp = cl->val[OPT_UDP] != NULL;
	if (cl->val[OPT_ALLOW_GROUP]) {
		char why[NIC_RUN_WHY_MAX];
		uint32_t gid;

		if (nic_group_parse(cl->val[OPT_ALLOW_GROUP], &gid, why, sizeof(why)) < 0) {
			cli_err("--allow-group: %s", why);
			return CLI_EXIT_USAGE;
		}
		o->allow_group = cl->val[OPT_ALLOW_GROUP];
	}
	o->remote = cl->val[OPT_REMOTE] != NULL;
	if (cl->val[OPT_SEED]) {
		rc = parse_num("seed", cl->val[OPT_SEED], 0, UINT64_MAX, &o->seed);
		if (rc)
			return rc;
		o->seed_set = true;
	}
	if (cl->val[OPT_TIMEOUT]) {
		rc = parse_num("timeout-ms", cl->val[OPT_TIMEOUT], 1, 3600000, &v);
		if (rc)
			return rc;
		o->timeout_ms = (int)v;
	}
	rc = nic_run_dir(o->dir, sizeof(o->dir), cl->val[OPT_DIR]);
	if (rc == -EINVAL) {
		cli_err("--dir needs a directory path");
		return CLI_EXIT_USAGE;
	}
	if (rc == -ENAMETOOLONG) {
		cli_err("run directory path too long: %s: choose a shorter one with --dir or "
			"NICSIM_DIR",
			cl->val[OPT_DIR] ? cl->val[OPT_DIR] : "");
		return CLI_EXIT_USAGE;
	}
	if (rc) {
		/* A relative path needs the working directory, which may be gone. */
		cli_err("cannot resolve a relative run directory (working directory: %s): give an "
			"absolute --dir or NICSIM_DIR",
			strerror(-rc));
		return CLI_EXIT_FAIL;
	}
	return 0;
}

int cli_command_at(int argc, char **argv, const char *cmd)
{
	const struct opt_spec *s;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], cmd))
			return i;
		/* The value of an option before the command ("--dir D") is
		 * not the command. */
		if (!strncmp(argv[i], "--", 2) && argv[i][2] && !strchr(argv[i], '=')) {
			s = find_opt(argv[i] + 2, strlen(argv[i] + 2));
			if (s && s->arg)
				i++;
			continue;
		}
		if (argv[i][0] != '-' && strcmp(argv[i], "help"))
			return 0;
	}
	return 0;
}

bool cli_is_option(const char *arg)
{
	const char *eq = strchr(arg, '=');

	return !strncmp(arg, "--", 2) &&
	       find_opt(arg + 2, eq ? (size_t)(eq - arg - 2) : strlen(arg + 2)) != NULL;
}

void cli_version(FILE *f)
{
	fprintf(f, "nicsim %s (ABI %u)\n", NICSIM_VERSION, NIC_ABI_VERSION);
}

int cli_main(int argc, char **argv, int (*scenario)(int argc, char **argv))
{
	const struct cmd_spec *c;
	struct cmdline cl;
	struct cli_opts *o;
	char name[32];
	size_t used;
	int rc;

	/* `capture` has options of its own: it parses its command line. */
	if (cli_capture_cmd(argc, argv))
		return cli_capture(argc, argv);
	/* So has `scenario`. */
	if (scenario && cli_command_at(argc, argv, "scenario"))
		return scenario(argc, argv);
	rc = split_args(argc, argv, &cl);
	if (rc)
		return rc;
	if (cl.val[OPT_VERSION]) {
		cli_version(stdout);
		return CLI_EXIT_OK;
	}
	if (cl.nwords == 0) {
		if (cl.val[OPT_HELP]) {
			usage_top(stdout);
			return CLI_EXIT_OK;
		}
		cli_err("no command given");
		usage_top(stderr);
		return CLI_EXIT_USAGE;
	}
	if (!strcmp(cl.words[0], "help")) {
		if (cl.nwords == 1) {
			usage_top(stdout);
			return CLI_EXIT_OK;
		}
		if (!strcmp(cl.words[1], "show") && cl.nwords == 2) {
			usage_show(stdout);
			return CLI_EXIT_OK;
		}
		if (!strcmp(cl.words[1], "link") && cl.nwords == 2) {
			usage_link(stdout);
			return CLI_EXIT_OK;
		}
		snprintf(name, sizeof(name), "%s%s%s", cl.words[1], cl.nwords > 2 ? " " : "",
			 cl.nwords > 2 ? cl.words[2] : "");
		c = cl.nwords <= 3 ? find_cmd(name) : NULL;
		if (!c) {
			cli_err("no help for unknown command '%s'; run 'nicsim help'", name);
			return CLI_EXIT_USAGE;
		}
		usage_cmd(stdout, c);
		return CLI_EXIT_OK;
	}
	if (!strcmp(cl.words[0], "show")) {
		if (cl.nwords < 2) {
			if (cl.val[OPT_HELP]) {
				usage_show(stdout);
				return CLI_EXIT_OK;
			}
			cli_err("show what? 'nicsim show tpt', 'faults' or 'hosts'");
			return CLI_EXIT_USAGE;
		}
		if (strcmp(cl.words[1], "tpt") && strcmp(cl.words[1], "faults") &&
		    strcmp(cl.words[1], "hosts")) {
			cli_err("cannot show '%s': 'nicsim show tpt', 'faults' or 'hosts'",
				cl.words[1]);
			return CLI_EXIT_USAGE;
		}
		snprintf(name, sizeof(name), "show %s", cl.words[1]);
		used = 2;
	} else if (!strcmp(cl.words[0], "link")) {
		if (cl.nwords < 2) {
			if (cl.val[OPT_HELP]) {
				usage_link(stdout);
				return CLI_EXIT_OK;
			}
			cli_err("link what? 'nicsim link show' or 'nicsim link set SRC DST "
				"SETTING...'");
			return CLI_EXIT_USAGE;
		}
		if (strcmp(cl.words[1], "show") && strcmp(cl.words[1], "set")) {
			cli_err("cannot link '%s': 'nicsim link show' or 'nicsim link set'",
				cl.words[1]);
			return CLI_EXIT_USAGE;
		}
		snprintf(name, sizeof(name), "link %s", cl.words[1]);
		used = 2;
	} else {
		snprintf(name, sizeof(name), "%s", cl.words[0]);
		used = 1;
	}
	c = find_cmd(name);
	if (!c) {
		cli_err("unknown command '%s'; run 'nicsim help'", cl.words[0]);
		return CLI_EXIT_USAGE;
	}
	if (cl.val[OPT_HELP]) {
		usage_cmd(stdout, c);
		return CLI_EXIT_OK;
	}
	if (cl.nwords > used && !c->args) {
		cli_err("unexpected argument '%s' to 'nicsim %s'", cl.words[used], c->name);
		return CLI_EXIT_USAGE;
	}
	/* struct cli_opts holds a PATH_MAX buffer: keep it off the stack. */
	o = calloc(1, sizeof(*o));
	if (!o) {
		cli_err("out of memory");
		return CLI_EXIT_FAIL;
	}
	o->args = cl.words + used;
	o->nargs = cl.nwords - used;
	rc = apply_opts(&cl, c, o);
	/* Every command works in the run directory: none in one that another
	 * user controls (nicsim_rundir.h). */
	if (!rc && cli_dir_check(o))
		rc = CLI_EXIT_FAIL;
	if (!rc)
		rc = c->run(o);
	free(o);
	if (fflush(stdout) == EOF || ferror(stdout)) {
		cli_err("cannot write the output: %s", strerror(errno));
		rc = CLI_EXIT_FAIL;
	}
	return rc;
}

/* ---- Formatting ---------------------------------------------------------- */

static const char *access_str(unsigned access, char *buf, size_t size)
{
	static const struct {
		unsigned bit;
		const char *name;
	} bits[] = {
	    {NIC_ACCESS_LOCAL_WRITE, "lw"},
	    {NIC_ACCESS_REMOTE_READ, "rr"},
	    {NIC_ACCESS_REMOTE_WRITE, "rw"},
	    {NIC_ACCESS_MW_BIND, "bind"},
	};
	size_t i, len = 0;

	buf[0] = '\0';
	for (i = 0; i < ARRAY_SIZE(bits); i++)
		if (access & bits[i].bit)
			len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? "," : "",
						bits[i].name);
	if (access & ~NIC_ACCESS_ALL)
		len += (size_t)snprintf(buf + len, size - len, "%s0x%x", len ? "," : "",
					access & ~NIC_ACCESS_ALL);
	if (!len)
		snprintf(buf, size, "lr");
	return buf;
}

static const char *type_str(unsigned type)
{
	switch (type) {
	case NIC_TPT_MR: return "mr";
	case NIC_TPT_MW: return "mw";
	default: return "unknown";
	}
}

static const char *state_str(unsigned state)
{
	switch (state) {
	case NIC_TPT_FREE: return "free";
	case NIC_TPT_VALID: return "valid";
	case NIC_TPT_REVOKED: return "revoked";
	case NIC_TPT_INVALIDATING: return "invalidating";
	default: return "unknown";
	}
}

static const char *const reason_names[] = {
#define REASON_NAME(name, desc) #name,
    NIC_TPT_REASONS(REASON_NAME)
#undef REASON_NAME
};

static const char *const reason_texts[] = {
#define REASON_TEXT(name, desc) desc,
    NIC_TPT_REASONS(REASON_TEXT)
#undef REASON_TEXT
};

/*
 * The length of the UTF-8 character at s (at most n bytes), 0 if the bytes
 * there are not one (a stray, overlong or cut sequence, a surrogate); its
 * code point in *cp.
 */
static size_t utf8_char(const unsigned char *s, size_t n, uint32_t *cp)
{
	static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
	size_t len = s[0] >= 0xf0 && s[0] <= 0xf4   ? 4
		     : s[0] >= 0xe0 && s[0] <= 0xef ? 3
		     : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
						    : 0;

	if (!len || len > n)
		return 0;
	*cp = s[0] & (0x7fu >> len);
	for (size_t k = 1; k < len; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (s[k] & 0x3fu);
	}
	if (*cp < min[len] || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
		return 0;
	return len;
}

/*
 * A program name from a NIC record: at most 16 bytes, maybe unterminated.
 * Any process names itself (PR_SET_NAME), and this goes to a terminal:
 * each control character is shown as '?', the C1 ones (U+0080 to U+009F,
 * which a terminal may take as CSI and the like) and those that break or
 * reorder the line (line and paragraph separators, bidirectional marks,
 * embeddings, overrides and isolates) included, and so is each byte that
 * is not part of a UTF-8 character.
 */
static const char *comm_str(const char comm[16], char buf[17])
{
	const unsigned char *s = (const unsigned char *)comm;
	size_t i = 0, o = 0, len;
	uint32_t cp;

	while (i < 16 && s[i]) {
		if (s[i] < 0x80) {
			buf[o++] = s[i] < 0x20 || s[i] == 0x7f ? '?' : (char)s[i];
			i++;
			continue;
		}
		len = utf8_char(s + i, strnlen(comm + i, 16 - i), &cp);
		if (!len || cp <= 0x9f || cp == 0x200e || cp == 0x200f ||
		    (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) {
			buf[o++] = '?';
			i += len ? len : 1;
			continue;
		}
		memcpy(buf + o, s + i, len);
		o += len;
		i += len;
	}
	buf[o] = '\0';
	return buf;
}

/* "2026-11-21 14:02:03.123456" (local time), or the time of day alone. */
static const char *time_str(uint64_t ns, bool with_date, char *buf, size_t size)
{
	time_t s = (time_t)(ns / 1000000000u);
	struct tm tm;
	size_t len;

	if (!localtime_r(&s, &tm)) {
		snprintf(buf, size, "@%llu", (unsigned long long)ns);
		return buf;
	}
	len = strftime(buf, size, with_date ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &tm);
	snprintf(buf + len, size - len, ".%06u", (unsigned)(ns % 1000000000u / 1000u));
	return buf;
}

static bool same_day(uint64_t a_ns, uint64_t b_ns)
{
	time_t a = (time_t)(a_ns / 1000000000u), b = (time_t)(b_ns / 1000000000u);
	struct tm ta, tb;

	if (!localtime_r(&a, &ta) || !localtime_r(&b, &tb))
		return false;
	return ta.tm_year == tb.tm_year && ta.tm_yday == tb.tm_yday;
}

/* A JSON string: escapes quotes, backslashes, control characters and bytes
 * over 0x7e (read as Latin-1), so that the document is valid UTF-8. */
static void json_str(const char *s, size_t max)
{
	size_t i;

	putchar('"');
	for (i = 0; i < max && s[i]; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch > 0x7e)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

/* ---- Talking to the NICs ------------------------------------------------- */

/* What one command does with one NIC: fetch, then print (nothing printed
 * when the fetch fails).  Returns 0 or the client's negative errno. */
typedef int (*nic_query_fn)(const struct cli_opts *o, struct mgmt_client *c, const char *addr);

/* The NICs a query command addresses, sorted; prints why there are none. */
static int query_targets(const struct cli_opts *o, uint32_t **addrs, size_t *n)
{
	int rc;

	if (o->nic_set) {
		*addrs = malloc(sizeof(**addrs));
		if (!*addrs) {
			cli_err("out of memory");
			return CLI_EXIT_FAIL;
		}
		**addrs = o->nic;
		*n = 1;
		return 0;
	}
	rc = cli_dir_list(o->dir, NIC_SOCK_SUFFIX, addrs, n);
	if (rc == -ENOENT) {
		cli_err("no NICs in %s: the directory does not exist; 'nicsim up --dir %s' "
			"starts them",
			o->dir, o->dir);
		return CLI_EXIT_FAIL;
	}
	if (rc) {
		cli_err("cannot read run directory %s: %s", o->dir, strerror(-rc));
		return CLI_EXIT_FAIL;
	}
	if (*n == 0) {
		cli_err("no NICs in %s (no " NIC_SOCK_PREFIX "*" NIC_SOCK_SUFFIX
			" there); 'nicsim up --dir %s' starts them",
			o->dir, o->dir);
		return CLI_EXIT_FAIL;
	}
	return 0;
}

/* Describe a failed exchange with the NIC at addr in words, on stderr and
 * into buf (for --json). */
static void report_failure(const struct cli_opts *o, const struct mgmt_client *c, int rc,
			   const char *addr, const char *path, char *buf, size_t size)
{
	if (rc == -ENOENT)
		snprintf(buf, size,
			 "no NIC %s in %s (no " NIC_SOCK_PREFIX "%s" NIC_SOCK_SUFFIX
			 " there); 'nicsim up' starts NICs",
			 addr, o->dir, addr);
	else if (rc == -ECONNREFUSED)
		snprintf(buf, size,
			 "NIC %s not answering: nobody listens on %s (a stale socket; "
			 "'nicsim down' removes it)",
			 addr, path);
	else if (rc == -ETIMEDOUT)
		snprintf(buf, size, "NIC %s not answering within %d ms: %s", addr, c->timeout_ms,
			 c->what ? c->what : "timed out");
	else if (c->status == NIC_STATUS_DENIED) {
		struct stat st;
		char owner[48] = "";

		/* The socket is the NIC's own: its owner is the user it runs as. */
		if (stat(path, &st) == 0)
			snprintf(owner, sizeof(owner), " (uid %u)", (unsigned)st.st_uid);
		snprintf(buf, size,
			 "NIC %s refused you (uid %u): only the user it runs as%s and root may "
			 "manage it (show, stats); a group it lets attach hosts "
			 "(--allow-group) may not: ask that user or root",
			 addr, (unsigned)getuid(), owner);
	} else if (c->status != NIC_STATUS_OK)
		snprintf(buf, size, "NIC %s: %s: %s", addr, c->what ? c->what : "refused",
			 nic_status_str(c->status));
	else
		snprintf(buf, size, "NIC %s: %s (%s)", addr, c->what ? c->what : "failed",
			 strerror(-rc));
	cli_err("%s", buf);
}

/* Run fn on every addressed NIC; --json wraps the results in one document. */
static int for_each_nic(struct cli_opts *o, nic_query_fn fn)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)], addr[FAB_ADDR_STRLEN];
	char why[PATH_MAX + 512];
	struct mgmt_client c;
	uint32_t *addrs;
	size_t i, n;
	int rc, status = CLI_EXIT_OK;

	if (!o->timeout_ms)
		o->timeout_ms = CLI_TIMEOUT_MS;
	rc = query_targets(o, &addrs, &n);
	if (rc)
		return rc;
	/* Check every path before printing anything. */
	for (i = 0; i < n; i++) {
		if (cli_sock_path(o, addrs[i], path, sizeof(path))) {
			free(addrs);
			return CLI_EXIT_USAGE;
		}
	}
	if (o->json)
		printf("{\"nics\":[");
	for (i = 0; i < n; i++) {
		fab_addr_format(addrs[i], addr, sizeof(addr));
		cli_sock_path(o, addrs[i], path, sizeof(path));
		if (o->json && i)
			putchar(',');
		if (o->json)
			putchar('\n');
		rc = mgmt_client_open(&c, path, o->timeout_ms);
		if (!rc) {
			rc = fn(o, &c, addr);
			mgmt_client_close(&c);
		}
		if (!rc)
			continue;
		report_failure(o, &c, rc, addr, path, why, sizeof(why));
		if (o->json) {
			printf("{\"addr\":\"%s\",\"error\":", addr);
			json_str(why, sizeof(why));
			putchar('}');
		}
		status = CLI_EXIT_FAIL;
	}
	if (o->json)
		printf("\n]}\n");
	free(addrs);
	return status;
}

/* ---- stats --------------------------------------------------------------- */

static const struct stat_desc {
	const char *name;
	const char *desc;
	size_t off;
} stat_descs[] = {
#define STAT_DESC(name, desc) {#name, desc, offsetof(struct nic_stats, name)},
    NIC_STATS(STAT_DESC)
#undef STAT_DESC
};

static uint64_t stat_value(const struct nic_stats *s, const struct stat_desc *d)
{
	uint64_t v;

	memcpy(&v, (const char *)s + d->off, sizeof(v));
	return v;
}

static int query_stats(const struct cli_opts *o, struct mgmt_client *c, const char *addr)
{
	struct nic_stats s;
	int name_w = 0, val_w = 1, w;
	char num[24];
	size_t i;
	int rc;

	rc = mgmt_client_stats(c, &s);
	if (rc)
		return rc;
	if (o->json) {
		printf("{\"addr\":\"%s\",\"pid\":%u,\"stats\":{", addr, (unsigned)c->hello.nic_pid);
		for (i = 0; i < ARRAY_SIZE(stat_descs); i++)
			printf("%s\"%s\":%llu", i ? "," : "", stat_descs[i].name,
			       (unsigned long long)stat_value(&s, &stat_descs[i]));
		printf("}}");
		return 0;
	}
	for (i = 0; i < ARRAY_SIZE(stat_descs); i++) {
		w = (int)strlen(stat_descs[i].name);
		name_w = w > name_w ? w : name_w;
		w = snprintf(num, sizeof(num), "%llu",
			     (unsigned long long)stat_value(&s, &stat_descs[i]));
		val_w = w > val_w ? w : val_w;
	}
	printf("nic %s (pid %u)\n", addr, (unsigned)c->hello.nic_pid);
	for (i = 0; i < ARRAY_SIZE(stat_descs); i++)
		printf("  %-*s %*llu  %s\n", name_w, stat_descs[i].name, val_w,
		       (unsigned long long)stat_value(&s, &stat_descs[i]), stat_descs[i].desc);
	return 0;
}

static int run_stats(struct cli_opts *o)
{
	return for_each_nic(o, query_stats);
}

/* ---- show tpt ------------------------------------------------------------ */

static int query_tpt(const struct cli_opts *o, struct mgmt_client *c, const char *addr)
{
	struct nic_mgmt_tpt_rec *recs, *r;
	char acc[48], comm[17];
	size_t i, n;
	int rc;

	rc = mgmt_client_tpt(c, &recs, &n);
	if (rc)
		return rc;
	if (o->json)
		printf("{\"addr\":\"%s\",\"pid\":%u,\"tpt\":[", addr, (unsigned)c->hello.nic_pid);
	else if (n == 0)
		printf("nic %s: no live TPT entries\n", addr);
	for (i = 0; i < n; i++) {
		r = &recs[i];
		access_str(r->access, acc, sizeof(acc));
		if (o->json) {
			printf("%s\n {\"key\":%u,\"type\":\"%s\",\"state\":\"%s\",\"ctx\":%u,"
			       "\"va\":%llu,\"len\":%llu,\"access\":\"%s\"",
			       i ? "," : "", r->key, type_str(r->type), state_str(r->state),
			       r->ctx_id, (unsigned long long)r->va, (unsigned long long)r->len,
			       acc);
			if (r->type == NIC_TPT_MW)
				printf(",\"mr\":%u,\"qpn\":%u", r->mr_key, r->qpn);
			printf(",\"inflight\":%u,\"reg_ns\":%llu,\"pid\":%u,\"comm\":", r->inflight,
			       (unsigned long long)r->reg_ns, r->pid);
			json_str(r->comm, sizeof(r->comm));
			putchar('}');
			continue;
		}
		printf("nic %s key 0x%06x type %s state %s ctx %u va 0x%llx len %llu access %s",
		       addr, r->key, type_str(r->type), state_str(r->state), r->ctx_id,
		       (unsigned long long)r->va, (unsigned long long)r->len, acc);
		if (r->type == NIC_TPT_MW && r->mr_key == 0)
			printf(" unbound");
		else if (r->type == NIC_TPT_MW && r->qpn == NIC_QPN_NONE)
			printf(" mr 0x%06x qpn none", r->mr_key);
		else if (r->type == NIC_TPT_MW)
			printf(" mr 0x%06x qpn %u", r->mr_key, r->qpn);
		if (r->inflight)
			printf(" inflight %u", r->inflight);
		/* The program name goes last: it may contain spaces. */
		printf(" pid %u comm %s\n", r->pid, comm_str(r->comm, comm));
	}
	if (o->json)
		printf("]}");
	free(recs);
	return 0;
}

static int run_show_tpt(struct cli_opts *o)
{
	return for_each_nic(o, query_tpt);
}

/* ---- show faults --------------------------------------------------------- */

static void print_fault_json(const struct nic_mgmt_fault_rec *f)
{
	char when[64], acc[48];

	printf("{\"time\":\"%s\",\"when_ns\":%llu,\"pid\":%u,\"ctx\":%u,\"qpn\":%u,\"key\":%u,",
	       time_str(f->when_ns, true, when, sizeof(when)), (unsigned long long)f->when_ns,
	       f->pid, f->ctx_id, f->qpn, f->key);
	printf("\"reason\":\"%s\",\"reason_text\":\"%s\",",
	       f->reason < NIC_TPT_R_MAX_ ? reason_names[f->reason] : "UNKNOWN",
	       f->reason < NIC_TPT_R_MAX_ ? reason_texts[f->reason] : "unknown reason");
	printf("\"access\":\"%s\",\"va\":%llu,\"len\":%llu,",
	       access_str(f->access, acc, sizeof(acc)), (unsigned long long)f->va,
	       (unsigned long long)f->len);
	/* The remote requester, null for a local access. */
	if (f->peer_qpn != NIC_QPN_NONE) {
		char peer[FAB_ADDR_STRLEN];

		printf("\"requester\":{\"addr\":\"%s\",\"qpn\":%u,\"psn\":%u,\"opcode\":\"%s\"},",
		       fab_addr_format(f->peer_addr, peer, sizeof(peer)), f->peer_qpn, f->peer_psn,
		       fab_opcode_name(f->peer_opcode));
	} else {
		printf("\"requester\":null,");
	}
	printf("\"entry\":{\"key\":%u,\"state\":\"%s\",\"ctx\":%u,\"qpn\":%u,\"va\":%llu,"
	       "\"len\":%llu,\"access\":\"%s\",\"pid\":%u,\"changed_ns\":%llu}}",
	       f->entry_key, state_str(f->entry_state), f->entry_ctx_id, f->entry_qpn,
	       (unsigned long long)f->entry_va, (unsigned long long)f->entry_len,
	       access_str(f->entry_access, acc, sizeof(acc)), f->entry_pid,
	       (unsigned long long)f->entry_changed_ns);
}

/*
 * One refusal in words: when, whose connection (and, for a remote access,
 * the requester across the fabric: its address, QP, and the request's opcode
 * and PSN), which key, the rule that refused it, what was asked, and what
 * the entry holds now, e.g.
 *   198.18.0.1 2026-11-21 14:02:03.123456 pid 4242 (ctx 3, qpn 17) from
 *   198.18.0.2 qpn 18 (RDMA_WRITE_ONLY psn 8321) key 0x000105: key
 *   byte does not match the entry (stale or forged key); wanted rr va 0x...
 *   len 4096; entry now key 0x000106 state valid ctx 3 va 0x... len ...
 *   access lw,rr; key changed 14:01:59.000001 by pid 4242
 */
static void print_fault_text(const char *addr, const struct nic_mgmt_fault_rec *f)
{
	char when[64], changed[64], acc[48];

	printf("%s %s pid %u (ctx %u", addr, time_str(f->when_ns, true, when, sizeof(when)), f->pid,
	       f->ctx_id);
	if (f->qpn != NIC_QPN_NONE)
		printf(", qpn %u", f->qpn);
	printf(")");
	/* A remote access: the peer that sent it, and which packet. */
	if (f->peer_qpn != NIC_QPN_NONE) {
		char peer[FAB_ADDR_STRLEN];

		printf(" from %s qpn %u (%s psn %u)",
		       fab_addr_format(f->peer_addr, peer, sizeof(peer)), f->peer_qpn,
		       fab_opcode_name(f->peer_opcode), f->peer_psn);
	}
	printf(" key 0x%06x: ", f->key);
	if (f->reason < NIC_TPT_R_MAX_)
		printf("%s", reason_texts[f->reason]);
	else
		printf("unknown reason %u", f->reason);
	printf("; wanted %s va 0x%llx len %llu", access_str(f->access, acc, sizeof(acc)),
	       (unsigned long long)f->va, (unsigned long long)f->len);
	if (f->entry_key == 0) {
		printf("; no entry at index %u\n", NIC_KEY_INDEX(f->key));
		return;
	}
	printf("; entry now key 0x%06x state %s ctx %u va 0x%llx len %llu access %s", f->entry_key,
	       state_str(f->entry_state), f->entry_ctx_id, (unsigned long long)f->entry_va,
	       (unsigned long long)f->entry_len, access_str(f->entry_access, acc, sizeof(acc)));
	if (f->entry_qpn != NIC_QPN_NONE)
		printf(" qpn %u", f->entry_qpn);
	if (f->entry_changed_ns)
		printf("; key changed %s by pid %u",
		       time_str(f->entry_changed_ns, !same_day(f->entry_changed_ns, f->when_ns),
				changed, sizeof(changed)),
		       f->entry_pid);
	putchar('\n');
}

static int query_faults(const struct cli_opts *o, struct mgmt_client *c, const char *addr)
{
	struct nic_mgmt_fault_rec *recs;
	size_t i, n;
	int rc;

	rc = mgmt_client_faults(c, &recs, &n);
	if (rc)
		return rc;
	if (o->json) {
		printf("{\"addr\":\"%s\",\"pid\":%u,\"faults\":[", addr,
		       (unsigned)c->hello.nic_pid);
		for (i = 0; i < n; i++) {
			printf("%s\n ", i ? "," : "");
			print_fault_json(&recs[i]);
		}
		printf("]}");
	} else if (n == 0) {
		printf("nic %s: no TPT refusals recorded\n", addr);
	} else {
		for (i = 0; i < n; i++)
			print_fault_text(addr, &recs[i]);
	}
	free(recs);
	return 0;
}

static int run_show_faults(struct cli_opts *o)
{
	return for_each_nic(o, query_faults);
}

/* ---- show hosts ---------------------------------------------------------- */

static void print_host(const struct cli_opts *o, const char *addr,
		       const struct nic_mgmt_host_rec *r, bool first)
{
	const struct nic_host_cache_stats *h = &r->cache;
	const struct {
		const char *name;
		uint64_t v;
	} f[] = {{"hits", h->hits},           {"misses", h->misses},
		 {"evictions", h->evictions}, {"invalidations", h->invalidations},
		 {"entries", h->entries},     {"unused", h->unused},
		 {"bytes", h->bytes},         {"bytes_pinned", h->bytes_pinned},
		 {"refusals", h->refusals}};
	bool known = h->magic == NIC_HOST_CACHE_MAGIC, on = h->flags & NIC_HOST_CACHE_ON;
	bool refused = known && h->refusal != NIC_REFUSAL_NONE;
	char comm[17], why[512];

	if (refused)
		nic_refusal_text(h->refusal, h->refusal_errno, h->refusal_limit, h->refusal_in_use,
				 h->refusal_needed, why, sizeof(why));

	if (!o->json && (r->flags & NIC_MGMT_HOST_DETACHED)) {
		/* Gone: only why it was refused matters now. */
		if (refused)
			printf("nic %s ctx %u pid %u (detached, comm %s) last refusal: %s\n", addr,
			       r->ctx_id, r->pid, comm_str(r->comm, comm), why);
		return;
	}
	if (o->json) {
		printf("%s\n {\"ctx\":%u,\"pid\":%u,\"comm\":", first ? "" : ",", r->ctx_id,
		       r->pid);
		json_str(r->comm, sizeof(r->comm));
		printf(",\"qps\":%u,\"cache\":", r->qps);
		if (known)
			printf("{\"on\":%s,\"monitor\":%s", on ? "true" : "false",
			       h->flags & NIC_HOST_CACHE_MONITOR ? "true" : "false");
		for (size_t i = 0; known && i < ARRAY_SIZE(f); i++)
			printf(",\"%s\":%llu", f[i].name, (unsigned long long)f[i].v);
		if (refused) {
			printf(",\"last_refusal\":{\"kind\":%u,\"errno\":%u,\"limit\":%llu,"
			       "\"in_use\":%llu,\"needed\":%llu,\"when_ns\":%llu,\"what\":",
			       h->refusal, h->refusal_errno, (unsigned long long)h->refusal_limit,
			       (unsigned long long)h->refusal_in_use,
			       (unsigned long long)h->refusal_needed,
			       (unsigned long long)h->refusal_ns);
			json_str(why, sizeof(why));
			printf("}");
		}
		printf("%s}", known ? "}" : "null");
		return;
	}
	printf("nic %s ctx %u pid %u qps %u cache %s", addr, r->ctx_id, r->pid, r->qps,
	       !known ? "unknown"
	       : on   ? "on"
		      : "off");
	if (known && !(h->flags & NIC_HOST_CACHE_MONITOR))
		printf(" (no monitor)");
	for (size_t i = 0; known && i < ARRAY_SIZE(f); i++)
		printf(" %s %llu", f[i].name, (unsigned long long)f[i].v);
	/* The program name goes last: it may contain spaces. */
	printf(" comm %s\n", comm_str(r->comm, comm));
	/* Why the host's last registration was refused for a system limit:
	 * numbers from the host, formatted here, so nothing it wrote is echoed. */
	if (refused)
		printf("nic %s ctx %u pid %u last refusal: %s\n", addr, r->ctx_id, r->pid, why);
}

static int query_hosts(const struct cli_opts *o, struct mgmt_client *c, const char *addr)
{
	const size_t size = sizeof(struct nic_mgmt_host_rec);
	void *recs, *gone = NULL;
	size_t n, ngone = 0, i;
	int rc = mgmt_client_list(c, NIC_MGMT_HOSTS, size, &recs, &n);

	/* Then the detached ones kept for their refusal (none from a NIC that
	 * predates them: it does not know the request). */
	if (!rc) {
		rc = mgmt_client_list(c, NIC_MGMT_DETACHED, size, &gone, &ngone);
		if (rc && c->status == NIC_STATUS_BAD_OPCODE)
			rc = 0;
	}
	if (!rc && o->json)
		printf("{\"addr\":\"%s\",\"pid\":%u,\"hosts\":[", addr, (unsigned)c->hello.nic_pid);
	else if (!rc && n == 0)
		printf("nic %s: no hosts attached\n", addr);
	for (i = 0; !rc && i < n; i++)
		print_host(o, addr, (struct nic_mgmt_host_rec *)recs + i, i == 0);
	if (!rc && o->json)
		printf("],\"detached\":[");
	for (i = 0; !rc && i < ngone; i++)
		print_host(o, addr, (struct nic_mgmt_host_rec *)gone + i, i == 0);
	if (!rc && o->json)
		printf("]}");
	free(recs);
	free(gone);
	return rc;
}

static int run_show_hosts(struct cli_opts *o)
{
	return for_each_nic(o, query_hosts);
}

/* ---- link show, link set --------------------------------------------------- */

/* Map the fabric of o->dir; prints why not.  Returns 0 or an exit status. */
static int link_fabric_open(const struct cli_opts *o, struct fab **fab)
{
	int rc = fab_open(o->dir, fab);

	if (rc == -ENOENT)
		cli_err("no fabric in %s (no " FAB_SEG_FILE " there); 'nicsim up --dir %s' "
			"creates it",
			o->dir, o->dir);
	else if (rc == -EPROTO)
		cli_err("%s/" FAB_SEG_FILE " is not a nicsim fabric of this version (or is "
			"damaged); 'nicsim down' then 'nicsim up' make a new one",
			o->dir);
	else if (rc == -ELOOP) {
		char path[PATH_MAX + 16];

		snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, o->dir);
		cli_err("%s", cli_link_planted(path));
	} else if (rc == -EACCES)
		cli_err("cannot open the fabric %s/" FAB_SEG_FILE ": %s: it is readable only by "
			"the user who started its NICs (and root), who may show and set links; a "
			"group they let attach hosts (--allow-group) may not",
			o->dir, strerror(-rc));
	else if (rc)
		cli_err("cannot open the fabric %s/" FAB_SEG_FILE ": %s", o->dir, strerror(-rc));
	return rc ? CLI_EXIT_FAIL : 0;
}

static bool link_wanted(const struct cli_opts *o, uint32_t src, uint32_t dst)
{
	return !o->nic_set || src == o->nic || dst == o->nic;
}

/* A port's own loop-back link is shown only when it was used or changed. */
static bool link_shown(const struct fab_link_config *cfg, const struct fab_link_stats *st,
		       uint32_t src, uint32_t dst)
{
	char text[8];

	return src != dst || st->tx.frames || fab_link_describe(cfg, text, sizeof(text))[0];
}

static void print_port_text(const struct fab_port_info *p, const struct fab_cap_port_counters *cc)
{
	char a[FAB_ADDR_STRLEN], when[64];
	bool any = false;

	printf("port %s ", fab_addr_format(p->addr, a, sizeof(a)));
	if (p->live)
		printf("open by pid %u since %s", p->pid,
		       time_str(p->opened_ns, true, when, sizeof(when)));
	else if (p->open)
		printf("open, but its owner (pid %u) is gone: reopening reclaims its frames",
		       p->pid);
	else if (p->gen)
		printf("closed (last owner pid %u)", p->pid);
	else
		printf("never opened");
	printf("; holds %u frames\n", p->frames_held);
#define PORT_COUNTER(name, desc)                                                   \
	if (p->counters.name) {                                                    \
		printf("%s %s %llu", any ? "," : "  refused or reclaimed:", #name, \
		       (unsigned long long)p->counters.name);                      \
		any = true;                                                        \
	}
	FAB_PORT_COUNTERS(PORT_COUNTER)
#undef PORT_COUNTER
	if (any)
		putchar('\n');
	/* The names nicsim capture's summary and docs/capture.md use. */
	if (cc->records || cc->not_captured || cc->filtered)
		printf("  capture: records %llu not_captured %llu (stalled %llu) filtered %llu\n",
		       (unsigned long long)cc->records, (unsigned long long)cc->not_captured,
		       (unsigned long long)cc->stalled, (unsigned long long)cc->filtered);
}

/* The fabric's capture, if one ever attached: who, how, and whether it
 * keeps up (a lossless capture whose last pass is old holds no one back). */
static void print_capture_text(const struct fab_cap_status *cs)
{
	char a[FAB_ADDR_STRLEN];

	if (!cs->ever)
		return;
	if (!cs->attached) {
		printf("capture: none attached (the last one was pid %u)\n", cs->pid);
		return;
	}
	printf("capture: pid %u, %s", cs->pid,
	       cs->lossy ? "lossy (the ports never wait for it)"
			 : "lossless (the ports wait for it while it makes progress)");
	if (cs->filter.host_set)
		printf(", host %s", fab_addr_format(cs->filter.host, a, sizeof(a)));
	if (cs->filter.qpn_set)
		printf(", qp %u", cs->filter.qpn);
	if (cs->filter.opcode_set)
		printf(", opcode %s", fab_opcode_name(cs->filter.opcode));
	printf("; last pass %.3f s ago%s\n", (double)cs->last_pass_ns / 1e9,
	       !cs->lossy && cs->last_pass_ns >= FAB_TAP_STALL_NS
		   ? ": stalled, the ports no longer wait for it and leave frames out "
		     "(counted as stalled)"
		   : "");
}

/*
 * What is wrong with the counters of a link as read from the segment, one
 * sentence per value that cannot be (fab_link_stats), each ended by '\0';
 * the number of them.  Values another process scribbled must not pass for
 * real ones.
 */
static size_t link_stats_problems(const struct fab_link_stats *st, uint32_t ring_depth, char *buf,
				  size_t size)
{
	size_t n = 0, used = 0;
	int len;

#define PROBLEM(...)                                                                     \
	do {                                                                             \
		len = used < size ? snprintf(buf + used, size - used, __VA_ARGS__) : -1; \
		if (len >= 0 && (size_t)len < size - used) {                             \
			used += (size_t)len + 1;                                         \
			n++;                                                             \
		}                                                                        \
	} while (0)
#define TX_COUNTER(name, desc)                                                                \
	if (strcmp(#name, "frames") && strcmp(#name, "bytes") && st->tx.name > st->tx.frames) \
		PROBLEM("%s %llu is more than the frames offered (%llu)", #name,              \
			(unsigned long long)st->tx.name, (unsigned long long)st->tx.frames);
	FAB_LINK_TX_COUNTERS(TX_COUNTER)
#undef TX_COUNTER
	if (st->tx.bytes / FAB_SLOT_BYTES > st->tx.frames)
		PROBLEM("bytes %llu is more than %u per frame offered (%llu)",
			(unsigned long long)st->tx.bytes, FAB_SLOT_BYTES,
			(unsigned long long)st->tx.frames);
	if (st->ring_bad)
		PROBLEM("queued: ring positions producer %u, consumer %u are impossible for a ring "
			"of %u",
			st->prod, st->cons, ring_depth);
#undef PROBLEM
	return n;
}

/* A link's settings (as `link set` takes them) and seed; then, when st is
 * not NULL, its counters: the three main ones always, the others if not 0.
 * cfg_why: what is wrong with a configuration the segment holds that is out
 * of range, else NULL; problems: nprob sentences from link_stats_problems. */
static void print_link_text(uint32_t src, uint32_t dst, const struct fab_link_config *cfg,
			    const char *cfg_why, const struct fab_link_stats *st,
			    const char *problems, size_t nprob)
{
	char s[FAB_ADDR_STRLEN], d[FAB_ADDR_STRLEN], text[512];

	fab_addr_format(src, s, sizeof(s));
	fab_addr_format(dst, d, sizeof(d));
	if (cfg_why) {
		printf("link %s -> %s: configuration invalid: %s (the fabric segment was written "
		       "outside nicsim; the ports keep the last valid settings; 'nicsim link set "
		       "%s %s clear' "
		       "rewrites it)\n",
		       s, d, cfg_why, s, d);
	} else {
		fab_link_describe(cfg, text, sizeof(text));
		printf("link %s -> %s: %s%s%s seed %llu\n", s, d,
		       cfg->flags & FAB_LINK_DOWN ? "" : "up",
		       cfg->flags & FAB_LINK_DOWN || !text[0] ? "" : " ", text,
		       (unsigned long long)cfg->seed);
	}
	if (!st)
		return;
	for (size_t i = 0; i < nprob; i++, problems += strlen(problems) + 1)
		printf("  counters invalid: %s\n", problems);
	printf("  frames %llu bytes %llu delivered %llu queued %u",
	       (unsigned long long)st->tx.frames, (unsigned long long)st->tx.bytes,
	       (unsigned long long)st->rx.delivered, st->queued);
	/* The counters the docs name (docs/fabric.md, docs/capture.md) are
	 * always printed, so that a 0 can be read; the others when not 0. */
	printf(" dest_ring_full %llu", (unsigned long long)st->tx.dest_ring_full);
#define TX_COUNTER(name, desc)                                                  \
	if (st->tx.name && strcmp(#name, "frames") && strcmp(#name, "bytes") && \
	    strcmp(#name, "dest_ring_full"))                                    \
		printf(" %s %llu", #name, (unsigned long long)st->tx.name);
#define RX_COUNTER(name, desc)                         \
	if (st->rx.name && strcmp(#name, "delivered")) \
		printf(" %s %llu", #name, (unsigned long long)st->rx.name);
	FAB_LINK_TX_COUNTERS(TX_COUNTER)
	FAB_LINK_RX_COUNTERS(RX_COUNTER)
#undef TX_COUNTER
#undef RX_COUNTER
	if (!cfg_why && cfg->nth)
		printf(" nth_matched %u", st->nth_matched);
	putchar('\n');
}

static void print_link_json(uint32_t src, uint32_t dst, const struct fab_link_config *cfg,
			    const char *cfg_why, const struct fab_link_stats *st,
			    const char *problems, size_t nprob)
{
	char s[FAB_ADDR_STRLEN], d[FAB_ADDR_STRLEN], text[512];

	/* Values that cannot be are listed under "invalid", never passed off
	 * as a working configuration. */
	printf("{\"src\":\"%s\",\"dst\":\"%s\",\"invalid\":[", fab_addr_format(src, s, sizeof(s)),
	       fab_addr_format(dst, d, sizeof(d)));
	if (cfg_why) {
		snprintf(text, sizeof(text), "configuration: %s", cfg_why);
		json_str(text, sizeof(text));
	}
	for (size_t i = 0; i < nprob; i++, problems += strlen(problems) + 1) {
		if (cfg_why || i)
			putchar(',');
		json_str(problems, strlen(problems) + 1);
	}
	printf("],");
	if (cfg_why) {
		printf("\"config\":null,\"stats\":{");
		goto stats;
	}
	printf("\"config\":{\"down\":%s,\"latency_ns\":%llu,"
	       "\"jitter_ns\":%llu,\"rate_mbps\":%u,\"loss_ppb\":%u,\"dup_ppb\":%u,"
	       "\"reorder_ppb\":%u,\"reorder_gap_ns\":%llu,\"corrupt_ppb\":%u,"
	       "\"delay_ns\":%llu,\"delay_ppb\":%u,\"drop_nth\":%u,",
	       cfg->flags & FAB_LINK_DOWN ? "true" : "false", (unsigned long long)cfg->latency_ns,
	       (unsigned long long)cfg->jitter_ns, cfg->rate_mbps, cfg->loss_ppb, cfg->dup_ppb,
	       cfg->reorder_ppb, (unsigned long long)cfg->reorder_gap_ns, cfg->corrupt_ppb,
	       (unsigned long long)cfg->delay_ns, cfg->delay_ppb, cfg->nth);
	if (cfg->nth && cfg->nth_opcode != FAB_ANY)
		printf("\"opcode\":%u,", cfg->nth_opcode);
	if (cfg->nth && cfg->nth_qpn != FAB_ANY)
		printf("\"qpn\":%u,", cfg->nth_qpn);
	printf("\"seed\":%llu,\"settings\":", (unsigned long long)cfg->seed);
	json_str(fab_link_describe(cfg, text, sizeof(text)), sizeof(text));
	printf("},\"stats\":{");
stats:
#define TX_COUNTER(name, desc) printf("\"%s\":%llu,", #name, (unsigned long long)st->tx.name);
#define RX_COUNTER(name, desc) printf("\"%s\":%llu,", #name, (unsigned long long)st->rx.name);
	FAB_LINK_TX_COUNTERS(TX_COUNTER)
	FAB_LINK_RX_COUNTERS(RX_COUNTER)
#undef TX_COUNTER
#undef RX_COUNTER
	printf("\"queued\":%u,\"nth_matched\":%u}}", st->queued, st->nth_matched);
}

static void print_port_json(const struct fab_port_info *p, const struct fab_cap_port_counters *cc)
{
	char a[FAB_ADDR_STRLEN];
	const char *sep = "";

	printf("{\"addr\":\"%s\",\"slot\":%u,\"open\":%s,\"live\":%s,\"pid\":%u,\"gen\":%u,"
	       "\"opened_ns\":%llu,\"frames_held\":%u,\"counters\":{",
	       fab_addr_format(p->addr, a, sizeof(a)), p->slot, p->open ? "true" : "false",
	       p->live ? "true" : "false", p->pid, p->gen, (unsigned long long)p->opened_ns,
	       p->frames_held);
#define PORT_COUNTER(name, desc)                                                   \
	printf("%s\"%s\":%llu", sep, #name, (unsigned long long)p->counters.name); \
	sep = ",";
	FAB_PORT_COUNTERS(PORT_COUNTER)
#undef PORT_COUNTER
	printf("},\"capture\":{\"records\":%llu,\"not_captured\":%llu,\"stalled\":%llu,"
	       "\"filtered\":%llu}}",
	       (unsigned long long)cc->records, (unsigned long long)cc->not_captured,
	       (unsigned long long)cc->stalled, (unsigned long long)cc->filtered);
}

static int run_link_show(struct cli_opts *o)
{
	struct fab_port_info *ports = NULL;
	struct fab_cap_port_counters cc;
	struct fab_cap_status cs;
	struct fab_link_config cfg;
	struct fab_link_stats st;
	struct fab_info info;
	struct fab *fab;
	size_t n = 0, i, j, shown = 0;
	int rc;

	rc = link_fabric_open(o, &fab);
	if (rc)
		return rc;
	rc = fab_info(fab, &info);
	if (!rc)
		rc = fab_port_list(fab, &ports, &n);
	if (rc) {
		cli_err("cannot read the fabric in %s: %s", o->dir, strerror(-rc));
		fab_close(fab);
		return CLI_EXIT_FAIL;
	}
	if (o->json) {
		printf("{\"fabric\":{\"path\":");
		json_str(o->dir, sizeof(o->dir));
		printf(",\"seed\":%llu,\"max_ports\":%u,\"ports_bound\":%u,\"frames\":%u,"
		       "\"slot_bytes\":%u,\"ring_depth\":%u,\"frames_free\":%u,\"frames_held\":%u,"
		       "\"frames_in_flight\":%u,\"created_ns\":%llu},\n",
		       (unsigned long long)info.seed, info.max_ports, info.ports_bound,
		       info.nframes, info.slot_bytes, info.ring_depth, info.frames_free,
		       info.frames_held, info.frames_in_flight,
		       (unsigned long long)info.created_ns);
		fab_cap_status(fab, &cs);
		printf("\"capture\":{\"ever\":%s,\"attached\":%s,\"pid\":%u,\"lossy\":%s,"
		       "\"last_pass_ns\":%llu},\n\"ports\":[",
		       cs.ever ? "true" : "false", cs.attached ? "true" : "false", cs.pid,
		       cs.lossy ? "true" : "false", (unsigned long long)cs.last_pass_ns);
		for (i = 0; i < n; i++) {
			printf("%s\n", i ? "," : "");
			fab_cap_port_counters(fab, ports[i].addr, &cc);
			print_port_json(&ports[i], &cc);
		}
		printf("],\n\"links\":[");
	} else {
		printf("fabric %s/" FAB_SEG_FILE ": seed %llu, %u of %u port slots bound, %u "
		       "frames of %u bytes (%u free, %u held, %u in flight)\n",
		       o->dir, (unsigned long long)info.seed, info.ports_bound, info.max_ports,
		       info.nframes, info.slot_bytes, info.frames_free, info.frames_held,
		       info.frames_in_flight);
		fab_cap_status(fab, &cs);
		print_capture_text(&cs);
		for (i = 0; i < n; i++) {
			if (o->nic_set && ports[i].addr != o->nic)
				continue;
			fab_cap_port_counters(fab, ports[i].addr, &cc);
			print_port_text(&ports[i], &cc);
		}
	}
	for (i = 0; i < n; i++) {
		for (j = 0; j < n; j++) {
			uint32_t src = ports[i].addr, dst = ports[j].addr;
			char why[256], problems[1024];
			const char *cfg_why = NULL;
			size_t nprob;

			if (!link_wanted(o, src, dst))
				continue;
			rc = fab_link_get(fab, src, dst, &cfg);
			if (rc == -EBADMSG) {
				fab_link_config_check(&cfg, why, sizeof(why));
				cfg_why = why;
			} else if (rc) {
				continue;
			}
			if (fab_link_stats(fab, src, dst, &st))
				continue;
			nprob =
			    link_stats_problems(&st, info.ring_depth, problems, sizeof(problems));
			if (!cfg_why && !nprob && !link_shown(&cfg, &st, src, dst))
				continue;
			if (o->json) {
				printf("%s\n", shown ? "," : "");
				print_link_json(src, dst, &cfg, cfg_why, &st, problems, nprob);
			} else {
				print_link_text(src, dst, &cfg, cfg_why, &st, problems, nprob);
			}
			shown++;
		}
	}
	if (o->json)
		printf("\n]}\n");
	else if (!shown)
		printf("no links%s\n", n ? "" : ": no port is bound yet");
	free(ports);
	fab_close(fab);
	return CLI_EXIT_OK;
}

/* SRC or DST of `link set`: an address, or "all" (*all set).  Prints why not. */
static int link_end_parse(const char *what, const char *text, uint32_t *addr, bool *all)
{
	int rc;

	*all = !strcmp(text, "all");
	if (*all)
		return 0;
	rc = fab_addr_parse(text, addr);
	if (rc == -EADDRNOTAVAIL)
		cli_err("%s %s: not a NIC address (198.18.0.1 to 198.19.255.254 of 198.18.0.0/15)",
			what, text);
	else if (rc)
		cli_err("%s %s: not an address (expected e.g. 198.18.0.1, or 'all')", what, text);
	return rc ? CLI_EXIT_USAGE : 0;
}

static bool port_bound(const struct fab_port_info *ports, size_t n, uint32_t addr)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ports[i].addr == addr)
			return true;
	return false;
}

static void print_bound(const struct fab_port_info *ports, size_t n)
{
	char a[FAB_ADDR_STRLEN];
	size_t i;

	fprintf(stderr, "nicsim: the fabric's ports:");
	for (i = 0; i < n; i++)
		fprintf(stderr, " %s", fab_addr_format(ports[i].addr, a, sizeof(a)));
	fprintf(stderr, "%s\n", n ? "" : " none");
}

static int run_link_set(struct cli_opts *o)
{
	struct fab_port_info *ports = NULL;
	struct fab_link_config cfg, now;
	char err[512], a[FAB_ADDR_STRLEN];
	uint32_t src = 0, dst = 0, fields;
	bool src_all, dst_all;
	struct fab *fab;
	size_t n = 0, i, j, done = 0;
	int rc, status = CLI_EXIT_OK;

	if (o->nargs < 3) {
		cli_err("'nicsim link set' needs SRC DST and at least one setting, e.g. "
			"'nicsim link set 198.18.0.1 198.18.0.2 loss 5'; see 'nicsim link set "
			"--help'");
		return CLI_EXIT_USAGE;
	}
	rc = link_end_parse("SRC", o->args[0], &src, &src_all);
	if (!rc)
		rc = link_end_parse("DST", o->args[1], &dst, &dst_all);
	if (rc)
		return rc;
	if (fab_link_parse(o->args + 2, o->nargs - 2, &cfg, &fields, err, sizeof(err))) {
		cli_err("%s", err);
		return CLI_EXIT_USAGE;
	}
	rc = link_fabric_open(o, &fab);
	if (rc)
		return rc;
	rc = fab_port_list(fab, &ports, &n);
	if (rc) {
		cli_err("cannot read the fabric in %s: %s", o->dir, strerror(-rc));
		status = CLI_EXIT_FAIL;
		goto out;
	}
	if (o->remote && (src_all || dst_all || !port_bound(ports, n, src))) {
		cli_err("--remote: SRC must be a NIC of the fabric in %s and DST one address, "
			"e.g. 'nicsim link set --remote 198.18.0.1 198.18.7.1 loss 1'",
			o->dir);
		status = CLI_EXIT_USAGE;
		goto out;
	}
	if (o->remote && !port_bound(ports, n, dst)) {
		/* A NIC beyond this fabric, reached over UDP (nicsimd --udp): its
		 * link gets a slot here, for rules and counters. */
		rc = fab_port_claim(fab, dst);
		if (rc) {
			cli_err("no room for the link to %s on the fabric in %s: %s",
				fab_addr_format(dst, a, sizeof(a)), o->dir, strerror(-rc));
			status = CLI_EXIT_FAIL;
			goto out;
		}
		printf("%s is not a NIC of this fabric: the rules apply to the frames its "
		       "NICs send it over UDP (nicsimd --udp)\n",
		       fab_addr_format(dst, a, sizeof(a)));
		free(ports);
		ports = NULL;
		rc = fab_port_list(fab, &ports, &n);
		if (rc) {
			cli_err("cannot read the fabric in %s: %s", o->dir, strerror(-rc));
			status = CLI_EXIT_FAIL;
			goto out;
		}
	}
	if ((!src_all && !port_bound(ports, n, src)) || (!dst_all && !port_bound(ports, n, dst))) {
		bool src_missing = !src_all && !port_bound(ports, n, src);

		cli_err("no port %s on the fabric in %s%s",
			fab_addr_format(src_missing ? src : dst, a, sizeof(a)), o->dir,
			src_missing ? "" : " (a NIC beyond it, reached over UDP: add --remote)");
		print_bound(ports, n);
		status = CLI_EXIT_FAIL;
		goto out;
	}
	for (i = 0; !src_all && i < n; i++) {
		/*
		 * Rules act where frames are sent.  A slot that no NIC ever
		 * opened is a NIC beyond this fabric (or one not started yet):
		 * its frames come over UDP and meet the rules of its own
		 * machine's fabric, never this link's.
		 */
		if (ports[i].addr == src && !ports[i].open && !ports[i].gen)
			fprintf(
			    stderr,
			    "nicsim: note: %s has never opened its port on this fabric: if it "
			    "is a NIC beyond it (nicsimd --udp), this link's rules never apply, "
			    "since rules act where frames are sent; set them on that NIC's own "
			    "fabric (nicsim link set --dir ITS_DIR %s ...)\n",
			    fab_addr_format(src, a, sizeof(a)), a);
	}
	for (i = 0; i < n; i++) {
		for (j = 0; j < n; j++) {
			uint32_t s = ports[i].addr, d = ports[j].addr;

			if ((!src_all && s != src) || (!dst_all && d != dst) ||
			    (s == d && (src_all || dst_all)))
				continue;
			rc = fab_link_set(fab, s, d, &cfg, fields);
			if (!rc)
				rc = fab_link_get(fab, s, d, &now);
			if (rc) {
				cli_err("link %s -> %s: %s", fab_addr_format(s, a, sizeof(a)),
					fab_addr_format(d, err, sizeof(err)),
					rc == -EBUSY ? "another writer kept it busy for a second"
						     : strerror(-rc));
				status = CLI_EXIT_FAIL;
				continue;
			}
			print_link_text(s, d, &now, NULL, NULL, NULL, 0);
			done++;
		}
	}
	if (!done && status == CLI_EXIT_OK) {
		cli_err("no link to change: 'all' needs at least two ports");
		status = CLI_EXIT_FAIL;
	}
out:
	free(ports);
	fab_close(fab);
	return status;
}
