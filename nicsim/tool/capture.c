/*
 * `nicsim capture` (capture.h): attach to the tap of a run directory's
 * fabric (or, with --follow, of every fabric that appears in it or in a
 * directory directly below it), drain the rings, filter, and write pcap
 * through libpcap, pcapng through nicsim's own writer (pcapng.h), or text.
 *
 * The loop: one pass reads every ring of every attached fabric; when a
 * pass finds nothing, the capture sleeps 1 ms (5 ms once the fabric has
 * been quiet for 100 ms).  By default the capture misses nothing: a port
 * whose ring is full waits for the capture to make room, so the fabric
 * runs at the capture's pace, and the capture reads as fast as it can.  A
 * capture that makes no pass for FAB_TAP_STALL_NS (stopped, its output
 * blocked) holds the ports back no longer: they leave frames out and count
 * them, and the capture says so when it runs again and in its summary.
 * With --lossy the ports never wait: what does not fit their rings is
 * counted as not captured, and when that happens the capture rests after
 * each pass in proportion to its work, so that it takes at most --cpu
 * percent of a CPU: the NICs keep theirs (docs/capture.md).  The filters
 * are the ports' too: a frame they turn away takes no room in a ring.
 */
#include "capture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pcap/pcap.h>

#include "cli.h"
#include "fab.h"
#include "fab_addr.h"
#include "fab_capture.h"
#include "fab_wire.h"
#include "pcapng.h"
#include "opts.h"
#include "nicsim_rundir.h"

#define MAX_SOURCES 64u
#define SCAN_NS 20000000ull    /* look for new, replaced or removed fabrics */
#define IDLE_SHORT_NS 1000000L /* sleep after an empty pass ... */
#define IDLE_LONG_NS 5000000L  /* ... or this once quiet for QUIET_NS */
#define QUIET_NS 100000000ull
#define DRAIN_WAIT_NS 2000000L  /* after turning the tap off: records being written */
#define DEFAULT_SNAPLEN 262144u /* as tcpdump: every nicsim frame whole */
#define DEFAULT_CPU 5u
#define FLUSH_NS 100000000ull /* a file is flushed at least this often */
#define OUT_BUFFER (1u << 20)
#define MAX_SNAPLEN 262144u
#define FLOWS 4096u /* flows whose PSNs are followed */
#define FLOW_PROBES 8u
#define RETRANS_BEHIND 65536u /* a PSN this far behind is sent again, further a new flow */
#define BTH_OFF (FAB_ETH_HLEN + FAB_IP4_HLEN + FAB_UDP_HLEN)

enum cap_format { FMT_TEXT, FMT_PCAP, FMT_PCAPNG };

struct cap_opts {
	char dir[PATH_MAX];
	const char *out; /* -w: a path, "-" for stdout; NULL: text on stdout */
	enum cap_format format;
	bool follow, lossy, cpu_set;
	struct fab_cap_filter filter; /* --host, --qp, --opcode */
	uint32_t snaplen;
	uint32_t cpu;   /* --lossy: percent of a CPU the capture takes at most */
	uint64_t count; /* 0: no limit */
};

/* One fabric the capture follows. */
struct source {
	char dir[PATH_MAX];
	dev_t dev;
	ino_t ino;
	struct fab *fab;
	struct fab_cap *cap; /* NULL: refused (reported once, not retried for this file) */
	uint32_t ifid;       /* its pcapng interface ... */
	bool announced;      /* ... once written */
	uint64_t start_ns;   /* CLOCK_REALTIME of the attach */
	uint64_t written;
};

/* The PSNs a flow (source, destination, destination QP) has sent. */
struct flow {
	uint32_t src, dst, qpn;
	uint32_t next_psn; /* the first PSN it has not used yet */
	bool used;
};

struct capture {
	struct cap_opts o;
	FILE *out;
	bool stream; /* flush every frame: stdout, a pipe, a terminal */
	bool pipe;   /* a pipe or socket: notice a reader that goes away */
	pcap_t *pcap;
	pcap_dumper_t *dumper;
	struct source src[MAX_SOURCES];
	size_t nsrc;
	struct source *cur; /* the source being read */
	uint32_t nif;       /* pcapng interfaces written */
	struct flow *flows; /* [FLOWS] */
	int64_t mono_to_real;
	uint64_t seen, written, filtered, not_captured, stalled, bad;
	/* What other processes wrote in the capture's fields (fab_cap_stats). */
	uint64_t mode_written, filter_written, pos_written;
	uint64_t stall_told;  /* frames left out while stalled, as last reported */
	uint64_t stall_check; /* CLOCK_MONOTONIC of the last look at them */
	int werr;             /* errno of a failed write */
	bool reader_gone;     /* the pipe's reader closed it */
	bool done;            /* --count reached */
	bool gone;            /* without --follow: the fabric was removed or replaced */
	bool started;         /* attached, or following */
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pause_ns(long ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};

	nanosleep(&ts, NULL);
}

/* ---- Command line ----------------------------------------------------------- */

static const char usage_text[] =
    "usage: nicsim capture [--dir D] [-w FILE|-] [--format pcap|pcapng|text] [--host ADDR]\n"
    "                      [--qp N] [--opcode NAME] [--snaplen N] [--count N]\n"
    "                      [--lossy [--cpu PCT]] [--follow]\n"
    "\n"
    "Captures the frames of the fabric of run directory D as they are sent, with no\n"
    "change to the NICs. Every frame is a RoCEv2 packet, so Wireshark and tshark\n"
    "decode it as InfiniBand (opcode, PSN, RETH, AETH) with no configuration:\n"
    "  nicsim capture --dir D -w run.pcapng\n"
    "  nicsim capture --dir D -w - | tshark -r - -l\n"
    "Frames that fault rules drop, duplicate, delay, reorder or corrupt are captured\n"
    "too; pcapng says so per frame (a comment, and the CRC-error flag for corrupted\n"
    "frames); plain pcap cannot. Every frame is captured: when the capture falls\n"
    "behind, the NICs wait for it (the fabric runs at its pace). A capture that makes\n"
    "no progress for 1 s (stopped, or its output blocked) holds them back no longer:\n"
    "frames are then left out and counted, and the capture says so. --lossy is for\n"
    "measuring speed with a capture running: the NICs never wait, and frames the\n"
    "capture cannot keep up with are counted as not captured. Stops on SIGINT or\n"
    "SIGTERM, after --count frames, or when the reader of -w - goes away, and prints\n"
    "its counts on stderr. One capture per fabric at a time. docs/capture.md has the\n"
    "details.\n"
    "A SEND of fewer than 16 bytes shows as [Malformed Packet: RPCoRDMA] in Wireshark\n"
    "4.0, whose RPC-over-RDMA heuristic reads past such a payload; the frame is fine:\n"
    "tshark --disable-protocol rpcordma decodes it as a plain SEND.\n"
    "\n"
    "Options:\n"
    "  --dir D              run directory (default: $NICSIM_DIR, else\n"
    "                       $XDG_RUNTIME_DIR/nicsim, else /tmp/nicsim-UID)\n"
    "  -w, --write FILE     write pcap (pcapng if FILE ends in .pcapng) to FILE, or to\n"
    "                       stdout with '-', flushed frame by frame; without -w, one\n"
    "                       line of text per frame on stdout\n"
    "  --format F           pcap, pcapng or text, whatever FILE's name\n"
    "  --host ADDR          only frames from or to this address (the filters are\n"
    "                       applied by the NICs' ports: other frames cost nothing)\n"
    "  --qp N               only frames to this destination QP (BTH DestQP)\n"
    "  --opcode NAME        only frames with this BTH opcode: a name as the text\n"
    "                       output prints it (RC_SEND_ONLY, RC_RDMA_WRITE_FIRST,\n"
    "                       RC_ACKNOWLEDGE; case and the RC_ prefix optional, ACK)\n"
    "                       or a number\n"
    "  --snaplen N          keep at most N bytes of each frame (default 262144: all)\n"
    "  --count N            stop after writing N frames\n"
    "  --lossy              never slow the NICs down: frames the capture cannot keep\n"
    "                       up with are left out (counted); for measuring speed\n"
    "                       with a capture running\n"
    "  --cpu PCT            with --lossy, when the fabric outpaces the capture, take\n"
    "                       at most PCT percent of a CPU (default 5)\n"
    "  --follow             wait for a fabric in D or in a directory directly below it,\n"
    "                       capture every one that appears, and carry on when one is\n"
    "                       removed or created again (test harnesses use this)\n"
    "  --help               show this help and exit\n"
    "\n"
    "Exit status: 0 success (also when stopped), 1 failure, 2 usage error.\n";

/* Options that take a value, the capture's and the tool's common ones, so
 * that the command word can be found before the tool parses anything. */
static const char *const value_opts[] = {
    "-w",          "--write",      "--format", "--host", "--qp",    "--opcode",       "--snaplen",
    "--count",     "--cpu",        "--dir",    "--nic",  "--hosts", "--tpt-capacity", "--max-reg",
    "--log-level", "--timeout-ms", "--seed",
};

static bool takes_value(const char *arg)
{
	size_t i;

	for (i = 0; i < sizeof(value_opts) / sizeof(value_opts[0]); i++)
		if (!strcmp(arg, value_opts[i]))
			return true;
	return false;
}

/* The first two words of the command line (NULL when absent). */
static void command_words(int argc, char **argv, const char **w0, const char **w1)
{
	bool words_only = false;
	int i;

	*w0 = *w1 = NULL;
	for (i = 1; i < argc; i++) {
		if (!words_only && !strcmp(argv[i], "--")) {
			words_only = true;
			continue;
		}
		if (!words_only && argv[i][0] == '-' && argv[i][1]) {
			if (takes_value(argv[i]))
				i++;
			continue;
		}
		if (!*w0) {
			*w0 = argv[i];
		} else {
			*w1 = argv[i];
			return;
		}
	}
}

bool cli_capture_cmd(int argc, char **argv)
{
	const char *w0, *w1;

	command_words(argc, argv, &w0, &w1);
	return w0 &&
	       (!strcmp(w0, "capture") || (!strcmp(w0, "help") && w1 && !strcmp(w1, "capture")));
}

static int usage_error(const char *what, const char *value, const char *expected)
{
	cli_err("%s%s%s: %s; see 'nicsim capture --help'", what, value ? " " : "",
		value ? value : "", expected);
	return CLI_EXIT_USAGE;
}

static int parse_number(const char *opt, const char *text, uint64_t min, uint64_t max, uint64_t *v)
{
	char want[80];

	if (opts_parse_u64(text, v) == 0 && *v >= min && *v <= max)
		return 0;
	snprintf(want, sizeof(want), "expected a number from %llu to %llu", (unsigned long long)min,
		 (unsigned long long)max);
	return usage_error(opt, text, want);
}

/* A BTH opcode by the names `nicsim link set ... opcode` takes. */
static int parse_opcode(const char *text, uint8_t *op)
{
	const char *words[] = {"drop-nth", "1", "opcode", text};
	struct fab_link_config cfg;
	uint32_t fields;
	char err[256];

	if (fab_link_parse(words, 4, &cfg, &fields, err, sizeof(err)) || cfg.nth_opcode > 0xff)
		return usage_error(
		    "--opcode", text,
		    "expected a BTH opcode name such as RC_SEND_ONLY, RC_RDMA_WRITE_FIRST, "
		    "RC_RDMA_READ_REQUEST or RC_ACKNOWLEDGE (case and the RC_ prefix "
		    "optional, ACK), or a number");
	*op = (uint8_t)cfg.nth_opcode;
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcasecmp(s + n - m, suffix);
}

static int parse_args(int argc, char **argv, struct cap_opts *o, bool *help)
{
	const char *dir = NULL, *format = NULL, *arg, *val, *eq;
	char why[NIC_RUN_WHY_MAX];
	bool words_only = false, seen_cmd = false;
	char name[32];
	uint64_t v;
	int i, rc;

	*help = false;
	o->snaplen = DEFAULT_SNAPLEN;
	o->cpu = DEFAULT_CPU;
	for (i = 1; i < argc; i++) {
		arg = argv[i];
		if (!words_only && !strcmp(arg, "--")) {
			words_only = true;
			continue;
		}
		if (words_only || arg[0] != '-' || !arg[1]) {
			if (!seen_cmd && !strcmp(arg, "help")) {
				*help = true;
				continue;
			}
			if (!seen_cmd && !strcmp(arg, "capture")) {
				seen_cmd = true;
				continue;
			}
			return usage_error("unexpected argument", arg,
					   "'nicsim capture' takes options only");
		}
		if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			*help = true;
			continue;
		}
		if (!strcmp(arg, "--follow")) {
			o->follow = true;
			continue;
		}
		if (!strcmp(arg, "--lossy")) {
			o->lossy = true;
			continue;
		}
		eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
		snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
		if (!takes_value(name))
			return usage_error("unknown option", name,
					   "'nicsim capture' does not take it");
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else
			return usage_error("option", name, "needs a value");
		if (!strcmp(name, "--dir")) {
			dir = val;
		} else if (!strcmp(name, "-w") || !strcmp(name, "--write")) {
			if (!*val)
				return usage_error("-w", "''",
						   "expected a file name, or - for stdout");
			o->out = val;
		} else if (!strcmp(name, "--format")) {
			format = val;
		} else if (!strcmp(name, "--host")) {
			rc = fab_addr_parse(val, &o->filter.host);
			if (rc)
				return usage_error(
				    "--host", val,
				    rc == -EADDRNOTAVAIL
					? "address outside 198.18.0.0/15, where nicsim "
					  "NICs live"
					: "expected an address such as 198.18.0.1");
			o->filter.host_set = true;
		} else if (!strcmp(name, "--qp")) {
			if (parse_number("--qp", val, 0, FAB_MASK24, &v))
				return CLI_EXIT_USAGE;
			o->filter.qpn = (uint32_t)v;
			o->filter.qpn_set = true;
		} else if (!strcmp(name, "--opcode")) {
			if (parse_opcode(val, &o->filter.opcode))
				return CLI_EXIT_USAGE;
			o->filter.opcode_set = true;
		} else if (!strcmp(name, "--snaplen")) {
			if (parse_number("--snaplen", val, 1, MAX_SNAPLEN, &v))
				return CLI_EXIT_USAGE;
			o->snaplen = (uint32_t)v;
		} else if (!strcmp(name, "--cpu")) {
			if (parse_number("--cpu", val, 1, 100, &v))
				return CLI_EXIT_USAGE;
			o->cpu = (uint32_t)v;
			o->cpu_set = true;
		} else if (!strcmp(name, "--count")) {
			if (parse_number("--count", val, 1, UINT64_MAX, &o->count))
				return CLI_EXIT_USAGE;
		} else {
			return usage_error("option", name, "does not apply to 'nicsim capture'");
		}
	}
	/* Without --lossy the capture never rests: it must not be asked to. */
	if (o->cpu_set && !o->lossy)
		return usage_error(
		    "--cpu", NULL,
		    "applies with --lossy only (without it the capture takes what it "
		    "needs and the NICs wait for it)");
	if (format && !strcmp(format, "pcap"))
		o->format = FMT_PCAP;
	else if (format && !strcmp(format, "pcapng"))
		o->format = FMT_PCAPNG;
	else if (format && !strcmp(format, "text"))
		o->format = FMT_TEXT;
	else if (format)
		return usage_error("--format", format, "expected pcap, pcapng or text");
	else if (!o->out)
		o->format = FMT_TEXT;
	else
		o->format = ends_with(o->out, ".pcapng") ? FMT_PCAPNG : FMT_PCAP;
	rc = nic_run_dir(o->dir, sizeof(o->dir), dir);
	if (rc == -EINVAL)
		return usage_error("--dir", NULL, "needs a directory path");
	if (rc == -ENAMETOOLONG)
		return usage_error("run directory path too long:", dir, "use a shorter --dir");
	if (rc) {
		cli_err("cannot resolve a relative run directory (working directory: %s): give an "
			"absolute --dir or NICSIM_DIR",
			strerror(-rc));
		return CLI_EXIT_FAIL;
	}
	/* Never map a fabric in a directory another user controls. */
	rc = nic_run_dir_check(o->dir, why, sizeof(why));
	if (rc && rc != -ENOENT) {
		cli_err("%s", why);
		return CLI_EXIT_FAIL;
	}
	return 0;
}

/* ---- Output -------------------------------------------------------------------- */

/* Close an output that could not be started, without a word: out_open has
 * said what went wrong, and out_close must not say it again. */
static void out_abandon(struct capture *c)
{
	if (c->dumper) {
		pcap_dump_close(c->dumper); /* closes c->out */
		c->dumper = NULL;
		c->out = NULL;
	}
	if (c->pcap) {
		pcap_close(c->pcap);
		c->pcap = NULL;
	}
	if (c->out)
		fclose(c->out);
	c->out = NULL;
}

/* Open the output and write its header.  0, or an exit status after saying
 * why (the output is then closed). */
static int out_open(struct capture *c)
{
	struct stat st;
	int fd;

	if (!c->o.out || !strcmp(c->o.out, "-")) {
		/* A stream of our own over stdout, which we close at the end. */
		fd = dup(STDOUT_FILENO);
		c->out = fd < 0 ? NULL : fdopen(fd, "w");
		if (!c->out) {
			cli_err("cannot write to stdout: %s", strerror(errno));
			if (fd >= 0)
				close(fd);
			return CLI_EXIT_FAIL;
		}
	} else {
		c->out = fopen(c->o.out, "we");
		if (!c->out) {
			cli_err("cannot create %s: %s", c->o.out, strerror(errno));
			return CLI_EXIT_FAIL;
		}
		setvbuf(c->out, NULL, _IOFBF, OUT_BUFFER);
	}
	if (fstat(fileno(c->out), &st) == 0) {
		c->pipe = S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
		c->stream = !S_ISREG(st.st_mode);
	}
	c->stream |= !c->o.out || !strcmp(c->o.out, "-");
	if (c->o.format == FMT_PCAP) {
		c->pcap = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, (int)c->o.snaplen,
							       PCAP_TSTAMP_PRECISION_NANO);
		c->dumper = c->pcap ? pcap_dump_fopen(c->pcap, c->out) : NULL;
		if (!c->dumper) {
			cli_err("cannot start the pcap output: %s",
				c->pcap ? pcap_geterr(c->pcap) : "out of memory");
			out_abandon(c);
			return CLI_EXIT_FAIL;
		}
	} else if (c->o.format == FMT_PCAPNG) {
		pcapng_begin(c->out, "nicsim capture " NICSIM_VERSION);
	}
	if (fflush(c->out) == EOF || ferror(c->out)) {
		cli_err("cannot write %s: %s", c->o.out ? c->o.out : "stdout",
			strerror(errno ? errno : EIO));
		out_abandon(c);
		return CLI_EXIT_FAIL;
	}
	return 0;
}

/* Flush; a failure is remembered (the reader of a pipe going away is not
 * an error).  Returns 0 or -1. */
static int out_flush(struct capture *c)
{
	int err;

	if (c->werr || c->reader_gone)
		return -1;
	errno = 0;
	if (c->dumper)
		err = pcap_dump_flush(c->dumper) ? -1 : 0;
	else
		err = fflush(c->out) == EOF ? -1 : 0;
	if (!err && !ferror(c->out))
		return 0;
	if (errno == EPIPE)
		c->reader_gone = true;
	else
		c->werr = errno ? errno : EIO;
	return -1;
}

/* A pipe whose reader closed it polls as an error. */
static void check_reader(struct capture *c)
{
	struct pollfd p = {.fd = fileno(c->out), .events = POLLOUT};

	if (c->pipe && poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)))
		c->reader_gone = true;
}

/* Close the output; a failure to write its end is reported. */
static void out_close(struct capture *c)
{
	if (!c->out)
		return;
	out_flush(c);
	if (c->dumper) {
		pcap_dump_close(c->dumper); /* closes c->out */
		c->out = NULL;
	}
	if (c->pcap)
		pcap_close(c->pcap);
	if (c->out && fclose(c->out) == EOF && !c->werr && !c->reader_gone)
		c->werr = errno == EPIPE ? 0 : errno ? errno : EIO;
	c->out = NULL;
}

/* ---- One frame -------------------------------------------------------------------- */

/* The ports filter before they write a record; the capture checks again,
 * since anyone can write the filter in the segment. */
static bool wanted(const struct cap_opts *o, const struct fab_cap_rec *r)
{
	return fab_cap_filter_match(&o->filter, r->data, r->caplen, r->src, r->dst);
}

/*
 * Whether a request or RDMA READ response re-uses a PSN its flow has sent
 * already: a go-back-N, an RNR retry, a READ asked again.  ACKs, copies
 * made by the dup rule and frames recorded again when dropped on delivery
 * do not count.  A PSN far behind (more than RETRANS_BEHIND) starts the
 * flow over (a QP number used by a new connection).
 */
static bool retransmission(struct capture *c, const struct fab_cap_rec *r)
{
	const uint8_t *bth = r->data + BTH_OFF;
	uint32_t qpn, psn, span = 1, h, i, behind, dmalen;
	struct flow *f = NULL;
	uint8_t op;

	if (r->caplen < FAB_HDR_BASE || r->rx_drop || (r->marks & FAB_MARK_DUPLICATE))
		return false;
	op = bth[0];
	if (op > FAB_OP_RDMA_READ_RESPONSE_ONLY)
		return false;
	qpn = fab_get24(bth + 5);
	psn = fab_get24(bth + 9);
	if (op == FAB_OP_RDMA_READ_REQUEST && r->caplen >= FAB_HDR_BASE + FAB_RETH_LEN) {
		dmalen = fab_get32(bth + FAB_BTH_LEN + 12);
		span = dmalen ? (uint32_t)(((uint64_t)dmalen + FAB_MTU - 1) / FAB_MTU) : 1;
	}
	h = (r->src * 2654435761u ^ r->dst * 2246822519u ^ qpn * 3266489917u) % FLOWS;
	for (i = 0; i < FLOW_PROBES; i++) {
		struct flow *e = &c->flows[(h + i) % FLOWS];

		if (!e->used || (e->src == r->src && e->dst == r->dst && e->qpn == qpn)) {
			f = e;
			break;
		}
	}
	if (!f)
		f = &c->flows[h]; /* every probe taken: forget the oldest guess */
	if (f->used && f->src == r->src && f->dst == r->dst && f->qpn == qpn) {
		behind = (f->next_psn - psn) & FAB_MASK24;
		if (behind >= 1 && behind <= RETRANS_BEHIND)
			return true;
	}
	*f = (struct flow){.src = r->src,
			   .dst = r->dst,
			   .qpn = qpn,
			   .next_psn = (psn + span) & FAB_MASK24,
			   .used = true};
	return false;
}

static const char *nak_name(uint8_t syndrome)
{
	static const char *const codes[] = {
	    "NAK: PSN sequence error", "NAK: invalid request", "NAK: remote access error",
	    "NAK: remote operational error", "NAK: invalid RD request"};

	switch (syndrome & FAB_AETH_KIND_MASK) {
	case FAB_AETH_ACK: return "ACK";
	case FAB_AETH_RNR_NAK: return "RNR NAK";
	case FAB_AETH_NAK:
		return (syndrome & FAB_AETH_VALUE_MASK) <= FAB_NAK_CODE_MAX_
			   ? codes[syndrome & FAB_AETH_VALUE_MASK]
			   : "NAK: reserved code";
	default: return "reserved";
	}
}

/* One line: time, addresses, opcode, QP, PSN, RETH, AETH, length, marks. */
static void print_text(struct capture *c, const struct fab_cap_rec *r, uint64_t ts,
		       const char *note)
{
	const uint8_t *bth = r->data + BTH_OFF, *ext = bth + FAB_BTH_LEN;
	char s[FAB_ADDR_STRLEN], d[FAB_ADDR_STRLEN], when[32];
	const struct fab_opcode_info *info;
	time_t sec = (time_t)(ts / 1000000000u);
	struct tm tm;

	localtime_r(&sec, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	fprintf(c->out, "%s.%09u %s > %s", when, (unsigned)(ts % 1000000000u),
		fab_addr_format(r->src, s, sizeof(s)), fab_addr_format(r->dst, d, sizeof(d)));
	if (r->caplen < FAB_HDR_BASE) {
		fprintf(c->out, " len %u (headers not captured)", r->len);
	} else {
		info = fab_opcode_info(bth[0]);
		fprintf(c->out, " %s qp %u psn %u", fab_opcode_name(bth[0]), fab_get24(bth + 5),
			fab_get24(bth + 9));
		if (info && (info->hdrs & FAB_HDR_RETH) && !(info->hdrs & FAB_HDR_DETH) &&
		    r->caplen >= FAB_HDR_BASE + FAB_RETH_LEN)
			fprintf(c->out, " va 0x%llx rkey 0x%x dmalen %u",
				(unsigned long long)fab_get64(ext), fab_get32(ext + 8),
				fab_get32(ext + 12));
		if (info && (info->hdrs & FAB_HDR_AETH) &&
		    !(info->hdrs & (FAB_HDR_RETH | FAB_HDR_DETH)) &&
		    r->caplen >= FAB_HDR_BASE + FAB_AETH_LEN)
			fprintf(c->out, " syndrome 0x%02x (%s) msn %u", ext[0], nak_name(ext[0]),
				fab_get24(ext + 1));
		fprintf(c->out, " len %u", r->len);
	}
	if (*note)
		fprintf(c->out, " [%s]", note);
	fputc('\n', c->out);
}

static int emit(struct capture *c, const struct fab_cap_rec *r, bool retrans)
{
	uint64_t ts = r->ts_ns + (uint64_t)c->mono_to_real;
	uint32_t caplen = r->caplen < c->o.snaplen ? r->caplen : c->o.snaplen;
	struct pcap_pkthdr ph;
	char note[320];
	size_t n;

	fab_cap_describe(r->marks, r->rx_drop, note, sizeof(note));
	if (retrans) {
		n = strlen(note);
		snprintf(note + n, sizeof(note) - n, "%s retransmission", n ? "," : "nicsim:");
	}
	switch (c->o.format) {
	case FMT_TEXT: print_text(c, r, ts, note); break;
	case FMT_PCAP:
		/* With nanosecond precision, libpcap takes tv_usec as nanoseconds. */
		ph.ts.tv_sec = (time_t)(ts / 1000000000u);
		ph.ts.tv_usec = (suseconds_t)(ts % 1000000000u);
		ph.caplen = caplen;
		ph.len = r->len;
		pcap_dump((u_char *)c->dumper, &ph, r->data);
		break;
	case FMT_PCAPNG:
		pcapng_packet(c->out,
			      &(struct pcapng_pkt){
				  .ifid = c->cur->ifid,
				  .ts_ns = ts,
				  .data = r->data,
				  .caplen = caplen,
				  .len = r->len,
				  .flags = r->marks & FAB_MARK_CORRUPTED ? PCAPNG_CRC_ERROR : 0,
				  .dropcount = r->lost_before,
				  .comment = note,
			      });
		break;
	}
	if (ferror(c->out))
		return out_flush(c);
	return c->stream ? out_flush(c) : 0;
}

static int on_record(void *arg, const struct fab_cap_rec *r)
{
	struct capture *c = arg;
	bool retrans = retransmission(c, r);

	c->seen++;
	/* A frame dropped on delivery was captured when it was sent; only
	 * pcapng and text can say what became of it. */
	if (!wanted(&c->o, r) || (c->o.format == FMT_PCAP && r->rx_drop)) {
		c->filtered++;
		return 0;
	}
	if (emit(c, r, retrans))
		return 1;
	c->written++;
	c->cur->written++;
	if (c->o.count && c->written >= c->o.count) {
		c->done = true;
		return 1;
	}
	return 0;
}

/* ---- Fabrics ---------------------------------------------------------------------- */

/* Read every ring of every fabric once; the number of records read. */
static size_t read_all(struct capture *c)
{
	size_t total = 0, n, i;

	for (i = 0; i < c->nsrc && !c->done && !c->werr && !c->reader_gone; i++) {
		if (!c->src[i].cap)
			continue;
		c->cur = &c->src[i];
		fab_cap_read(c->src[i].cap, on_record, c, &n);
		total += n;
	}
	return total;
}

static void fab_err(const char *dir, int rc, uint32_t pid)
{
	if (rc == -EBUSY)
		cli_err("another capture (pid %u) is attached to the fabric in %s; one at a time",
			pid, dir);
	else if (rc == -EPROTO)
		cli_err("%s/" FAB_SEG_FILE
			" is not a nicsim fabric of this version (or is damaged)",
			dir);
	else if (rc == -ENOENT)
		cli_err("no fabric in %s (no " FAB_SEG_FILE " there): 'nicsim up --dir %s' creates "
			"it; --follow waits for one",
			dir, dir);
	else if (rc == -ELOOP) {
		char path[PATH_MAX + 16];

		snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, dir);
		cli_err("%s", cli_link_planted(path));
	} else if (rc == -EACCES) {
		cli_err("cannot capture the fabric in %s: %s/" FAB_SEG_FILE
			" is readable only by the user who started its NICs (and root); a group "
			"they let attach hosts (--allow-group) may not capture",
			dir, dir);
	} else if (rc == -ENOSPC || rc == -EDQUOT) {
		char why[PATH_MAX + 512];

		/* The rings live in the fabric's file, not in the output:
		 * say which file system is short. */
		cli_err("cannot capture the fabric in %s: a capture reserves its rings in "
			"%s/" FAB_SEG_FILE " when it attaches, and %s",
			dir, dir, nic_run_dir_full(dir, rc, 0, why, sizeof(why)));
	} else
		cli_err("cannot capture the fabric in %s: %s", dir, strerror(-rc));
}

/* pcapng: the interface description of s's fabric, before its frames. */
static void source_announce(struct capture *c, struct source *s)
{
	char name[PATH_MAX + 32];

	if (c->o.format != FMT_PCAPNG || s->announced)
		return;
	snprintf(name, sizeof(name), "nicsim fabric %s", s->dir);
	s->ifid = c->nif++;
	s->announced = true;
	pcapng_interface(c->out, name, c->o.snaplen);
}

/* Attach to the fabric of dir (whose fabric.shm is st).  Returns 0, or the
 * error (reported; the source stays, refused, so it is not tried again). */
static int source_add(struct capture *c, const char *dir, const struct stat *st)
{
	struct source *s;
	uint32_t pid = 0;
	int rc;

	if (c->nsrc == MAX_SOURCES) {
		cli_err("more than %u fabrics: not capturing the one in %s", MAX_SOURCES, dir);
		return -ENOSPC;
	}
	s = &c->src[c->nsrc++];
	*s = (struct source){.dev = st->st_dev, .ino = st->st_ino};
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	rc = fab_open(dir, &s->fab);
	if (!rc) {
		const struct fab_cap_config cfg = {
		    .copy_bytes = c->o.snaplen, .lossy = c->o.lossy, .filter = c->o.filter};

		rc = fab_cap_attach_cfg(s->fab, &cfg, &s->cap);
		if (rc == -EBUSY)
			fab_cap_attached(s->fab, &pid);
	}
	if (rc) {
		fab_err(dir, rc, pid);
		fab_close(s->fab);
		s->fab = NULL;
		return rc;
	}
	s->start_ns = clock_ns(CLOCK_REALTIME);
	/* Said once the output is open (run()): a capture whose output
	 * cannot be created never claims to be capturing. */
	if (c->out) {
		source_announce(c, s);
		fprintf(stderr, "nicsim capture: capturing the fabric in %s\n", dir);
	}
	return 0;
}

/* Stop capturing s: turn its tap off, read what is left, account for it. */
static void source_end(struct capture *c, struct source *s)
{
	struct fab_cap_stats st;
	size_t n;

	if (s->cap) {
		fab_cap_stop(s->cap);
		pause_ns(DRAIN_WAIT_NS);
		c->cur = s;
		do {
			n = 0;
			/* No output (it could not be opened): nothing to write. */
			if (c->out && !c->done && !c->werr && !c->reader_gone)
				fab_cap_read(s->cap, on_record, c, &n);
		} while (n);
		fab_cap_get_stats(s->cap, &st);
		c->not_captured += st.not_captured;
		c->stalled += st.stalled;
		c->filtered += st.filtered;
		c->bad += st.bad;
		c->mode_written += st.mode_written;
		c->filter_written += st.filter_written;
		c->pos_written += st.pos_written;
		if (c->out && c->o.format == FMT_PCAPNG && !c->werr && !c->reader_gone)
			pcapng_stats(c->out, s->ifid, s->start_ns, clock_ns(CLOCK_REALTIME),
				     st.read + st.not_captured, st.not_captured, s->written);
		fab_cap_detach(s->cap);
		s->cap = NULL;
	}
	fab_close(s->fab);
	s->fab = NULL;
}

static void source_remove(struct capture *c, size_t i)
{
	source_end(c, &c->src[i]);
	c->src[i] = c->src[--c->nsrc];
}

static struct source *source_find(struct capture *c, const char *dir)
{
	size_t i;

	for (i = 0; i < c->nsrc; i++)
		if (!strcmp(c->src[i].dir, dir))
			return &c->src[i];
	return NULL;
}

/* dir's fabric as it is now: attach to a new one, let go of one removed or
 * replaced.  present: set when dir has a fabric. */
static void watch_dir(struct capture *c, const char *dir, bool *present)
{
	char path[PATH_MAX + 16];
	struct source *s = source_find(c, dir);
	struct stat st;
	bool has;

	snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, dir);
	has = stat(path, &st) == 0 && S_ISREG(st.st_mode);
	if (present)
		*present = has;
	if (s && (!has || s->dev != st.st_dev || s->ino != st.st_ino)) {
		source_remove(c, (size_t)(s - c->src));
		s = NULL;
	}
	if (has && !s)
		source_add(c, dir, &st);
}

/* Whether s's directory still holds the fabric s maps. */
static bool same_file(const struct source *s)
{
	char path[PATH_MAX + 16];
	struct stat st;

	snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, s->dir);
	return stat(path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino;
}

/* --follow: D and the directories directly below it. */
static void scan(struct capture *c)
{
	char sub[PATH_MAX];
	struct dirent *de;
	struct stat st;
	size_t i;
	DIR *d;

	watch_dir(c, c->o.dir, NULL);
	d = opendir(c->o.dir);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' || (size_t)snprintf(sub, sizeof(sub), "%s/%s", c->o.dir,
							     de->d_name) >= sizeof(sub))
			continue;
		if ((de->d_type == DT_DIR ||
		     (de->d_type == DT_UNKNOWN && stat(sub, &st) == 0 && S_ISDIR(st.st_mode))))
			watch_dir(c, sub, NULL);
	}
	if (d)
		closedir(d);
	/* Directories that went away take their fabrics with them. */
	for (i = 0; i < c->nsrc;) {
		if (stat(c->src[i].dir, &st) < 0) {
			source_remove(c, i);
			continue;
		}
		i++;
	}
}

/* ---- The command ---------------------------------------------------------------- */

/* Whether the ports left frames out since the last call (*missed: the
 * count then). */
static bool behind(struct capture *c, uint64_t *missed)
{
	struct fab_cap_stats st;
	uint64_t total = 0;
	bool more;
	size_t i;

	for (i = 0; i < c->nsrc; i++) {
		if (!c->src[i].cap)
			continue;
		fab_cap_get_stats(c->src[i].cap, &st);
		total += st.not_captured;
	}
	more = total != *missed;
	*missed = total;
	return more;
}

/*
 * Lossless mode: whether the ports left frames out because the capture had
 * stalled (made no pass for FAB_TAP_STALL_NS) since it last said so; if
 * they did, it says so now that it runs again.  Looked at once a second.
 */
static void report_stall(struct capture *c, uint64_t now)
{
	struct fab_cap_stats st;
	uint64_t total = c->stalled;
	size_t i;

	if (c->o.lossy || now - c->stall_check < 1000000000u)
		return;
	c->stall_check = now;
	for (i = 0; i < c->nsrc; i++) {
		if (!c->src[i].cap)
			continue;
		fab_cap_get_stats(c->src[i].cap, &st);
		total += st.stalled;
	}
	if (total <= c->stall_told)
		return;
	fprintf(stderr,
		"nicsim capture: fell behind: no progress for over %.1f s (the capture was "
		"stopped, or its output blocked: a full disk, a reader that stopped); the NICs "
		"stopped waiting for it and left %llu frames out so far\n",
		(double)FAB_TAP_STALL_NS / 1e9, (unsigned long long)(total - c->stall_told));
	c->stall_told = total;
}

/* What, of the capture's fields another process wrote, made the ports
 * leave frames out without waiting in lossless mode: as true as the
 * capture's passes found it. */
static const char *written_cause(const struct capture *c)
{
	if (c->mode_written && c->pos_written)
		return "the capture's mode and the rings' positions were";
	if (c->mode_written)
		return "the capture's mode (lossless) was";
	if (c->pos_written)
		return "the rings' positions were";
	return "the capture's control fields were";
}

/* The counts, and for frames not captured, why and how to get them all. */
static void summary(const struct capture *c)
{
	uint64_t rest =
	    c->not_captured - (c->stalled < c->not_captured ? c->stalled : c->not_captured);

	fprintf(stderr, "nicsim capture: %llu frames captured, %llu not captured",
		(unsigned long long)c->written, (unsigned long long)c->not_captured);
	if (c->filtered)
		fprintf(stderr, ", %llu filtered out", (unsigned long long)c->filtered);
	if (c->bad)
		fprintf(stderr, ", %llu ring records refused", (unsigned long long)c->bad);
	fprintf(stderr, "\n");
	if (c->stalled)
		fprintf(stderr,
			"nicsim capture: %llu not captured because the capture made no progress "
			"for over %.1f s (stopped, or its output blocked: a full disk, a reader "
			"that stopped) and the NICs stopped waiting for it; to get them all, keep "
			"the capture running and its output flowing\n",
			(unsigned long long)(c->not_captured < c->stalled ? c->not_captured
									  : c->stalled),
			(double)FAB_TAP_STALL_NS / 1e9);
	if (rest && c->o.lossy)
		fprintf(stderr,
			"nicsim capture: %llu not captured because the capture fell behind and "
			"--lossy lets the NICs leave frames out rather than wait; run without "
			"--lossy to capture every frame\n",
			(unsigned long long)rest);
	else if (rest)
		fprintf(stderr,
			"nicsim capture: %llu not captured because the NICs found their capture "
			"rings full and did not wait (%s written by something other than nicsim); "
			"run the capture again to capture every frame\n",
			(unsigned long long)rest, written_cause(c));
	if (c->filter_written)
		fprintf(stderr,
			"nicsim capture: the capture's filter was written by something other than "
			"nicsim (%llu times found and written back): frames may have been filtered "
			"out or kept wrongly meanwhile\n",
			(unsigned long long)c->filter_written);
}

static int run(struct capture *c)
{
	uint64_t now, busy, next_scan = 0, last_frame = 0, last_flush = 0, missed = 0;
	bool present, dirty = false;
	size_t n, i;
	int rc;

	/* The fabric first: a capture that cannot start writes nothing. */
	if (!c->o.follow) {
		watch_dir(c, c->o.dir, &present);
		if (!present)
			fab_err(c->o.dir, -ENOENT, 0);
		if (!c->nsrc || !c->src[0].cap)
			return CLI_EXIT_FAIL;
	}
	rc = out_open(c);
	if (rc)
		return rc;
	for (i = 0; i < c->nsrc; i++) {
		if (!c->src[i].cap)
			continue;
		source_announce(c, &c->src[i]);
		fprintf(stderr, "nicsim capture: capturing the fabric in %s\n", c->src[i].dir);
	}
	if (c->o.follow)
		fprintf(stderr, "nicsim capture: following %s\n", c->o.dir);
	c->started = true;
	while (!stop_signal && !c->done && !c->werr && !c->reader_gone && !c->gone) {
		now = clock_ns(CLOCK_MONOTONIC);
		if (now >= next_scan) {
			next_scan = now + SCAN_NS;
			if (c->o.follow)
				scan(c);
			else
				c->gone = !same_file(&c->src[0]);
		}
		n = read_all(c);
		report_stall(c, now);
		if (n) {
			last_frame = now;
			dirty = true;
			if (!c->stream && now - last_flush >= FLUSH_NS) {
				out_flush(c);
				last_flush = now;
				dirty = false;
			}
			/* --lossy and behind (the ports had to leave frames
			 * out): at most --cpu percent of a CPU, a rest in
			 * proportion to the work.  The NICs keep the CPU; what
			 * they send meanwhile waits in the rings, or is counted
			 * as not captured.  Without --lossy the NICs wait for
			 * the capture, which never rests while there is work. */
			busy = clock_ns(CLOCK_MONOTONIC) - now;
			if (c->o.lossy && c->o.cpu < 100 && behind(c, &missed))
				pause_ns((long)(busy * (100 - c->o.cpu) / c->o.cpu % 1000000000u));
			continue;
		}
		if (dirty) {
			out_flush(c);
			last_flush = now;
			dirty = false;
		}
		check_reader(c);
		pause_ns(now - last_frame > QUIET_NS ? IDLE_LONG_NS : IDLE_SHORT_NS);
	}
	for (i = c->nsrc; i-- > 0;)
		source_remove(c, i);
	if (c->gone)
		fprintf(stderr, "nicsim capture: the fabric in %s was removed or replaced\n",
			c->o.dir);
	return CLI_EXIT_OK;
}

int cli_capture(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_signal};
	struct capture *c;
	bool help;
	int rc;

	c = calloc(1, sizeof(*c));
	if (c)
		c->flows = calloc(FLOWS, sizeof(*c->flows));
	if (!c || !c->flows) {
		cli_err("out of memory");
		free(c);
		return CLI_EXIT_FAIL;
	}
	rc = parse_args(argc, argv, &c->o, &help);
	if (!rc && help) {
		fputs(usage_text, stdout);
		rc = fflush(stdout) == EOF ? CLI_EXIT_FAIL : CLI_EXIT_OK;
		goto out;
	}
	if (rc)
		goto out;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* A reader that goes away is an EPIPE from write, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	c->mono_to_real = (int64_t)(clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC));
	rc = run(c);
	for (size_t i = c->nsrc; i-- > 0;)
		source_remove(c, i);
	out_close(c);
	if (c->reader_gone)
		fprintf(stderr, "nicsim capture: the reader of the output went away\n");
	if (c->werr) {
		cli_err("cannot write %s: %s",
			c->o.out && strcmp(c->o.out, "-") ? c->o.out : "stdout", strerror(c->werr));
		rc = CLI_EXIT_FAIL;
	}
	if (c->started)
		summary(c);
out:
	free(c->flows);
	free(c);
	return rc;
}
