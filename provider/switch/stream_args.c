/*
 * stream_args.c: nicsim-stream's command line.  Options take their value
 * as "--opt VALUE" or "--opt=VALUE"; --sweep's list and --loopback's two
 * addresses may be left out.  Every mistake is one line naming the option
 * and what it expects, and exit status 2.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"
#include "stream.h"

static const char usage_text[] =
    "usage: nicsim-stream --server [--bind ADDR[:PORT]] [--once] [OPTIONS]\n"
    "       nicsim-stream --client ADDR[:PORT] [--bind ADDR] [OPTIONS]\n"
    "       nicsim-stream --loopback [ADDR_A ADDR_B[:PORT]] [OPTIONS]\n"
    "\n"
    "Moves a byte stream between a client and a server over the switch's stream\n"
    "sockets (libnicsimsw) and measures it, as rstream and iperf do: bandwidth\n"
    "(GB/s and Gbit/s), messages per second, and with --pingpong the half round\n"
    "trip (p50, p90, p99, max).  The client runs the tests; the server answers.\n"
    "\n"
    "Roles:\n"
    "  --server             accept clients, one at a time, until stopped\n"
    "  --once               with --server: end after the first client\n"
    "  --client ADDR[:PORT] run the tests against the server at ADDR (port 7472)\n"
    "  --loopback [A B]     both ends in one command: the client on NIC A, the\n"
    "                       server on NIC B in a child process (default 198.18.0.1\n"
    "                       and 198.18.0.2:7472, the NICs `nicsim up` starts; with\n"
    "                       --transport tcp, 127.0.0.1 and any free port)\n"
    "  --bind ADDR[:PORT]   this end's address: the server listens there (default\n"
    "                       0.0.0.0:7472, for the switch its lowest NIC), the\n"
    "                       client connects from there (its NIC)\n"
    "\n"
    "Workload (the client's; the server takes it from the client):\n"
    "  --size SIZE          message size, suffix K, M or G (default 64K, or 8 with\n"
    "                       --pingpong), at most 1G\n"
    "  --sweep [LIST]       several sizes in turn, comma-separated (default\n"
    "                       64,4K,64K,1M,16M)\n"
    "  --count N            messages per size (ping-pong: round trips); default:\n"
    "                       1 GiB's worth, from 64 to 100000 (ping-pong: 10000,\n"
    "                       or 1 GiB's worth if fewer, at least 16)\n"
    "  --duration SECONDS   run each size this long instead\n"
    "  --warmup N           untimed messages before each size (default 10)\n"
    "  --pingpong           the server sends each message back at once; the client\n"
    "                       times the half round trips\n"
    "  --verify             every byte derived from a seed and its message's number\n"
    "                       and checked on arrival, in both directions, and a\n"
    "                       checksum of all that arrived sent back; a difference is\n"
    "                       an error naming the message and the offset\n"
    "  --seed N             the seed of --verify's data (default: from the clock)\n"
    "\n"
    "Transports:\n"
    "  --transport T        switch (default), tcp, or both\n"
    "  --tcp                also run every test over the kernel's TCP on loopback\n"
    "                       (127.0.0.1, against a server this command starts), for\n"
    "                       comparison; the same as --transport both\n"
    "  --path P             how the switch moves large messages: read (the sink\n"
    "                       RDMA-reads them: both NICs must have RDMA read, not\n"
    "                       started with --no-rdma-read, and the sink's provider\n"
    "                       must read), write (the source RDMA-writes into a buffer\n"
    "                       the sink advertised) or auto (default: read where the\n"
    "                       sink can); write sets NSW_PATH on both sides'\n"
    "                       sockets; the run fails when the connection runs\n"
    "                       another path than asked\n"
    "  --rdma-threshold SIZE  the smallest send that moves by RDMA\n"
    "  --max-rdma SIZE      the largest single RDMA, at least 4K (larger sends\n"
    "                       are split)\n"
    "\n"
    "Output and limits:\n"
    "  --json               the results as one JSON document, one object per size\n"
    "                       and transport\n"
    "  --timeout SECONDS    give up when nothing has moved for this long (default 30)\n"
    "  --dir D              the NICs' run directory (default: $NICSIM_DIR, else\n"
    "                       $XDG_RUNTIME_DIR/nicsim, else /tmp/nicsim-UID)\n"
    "  --help               show this help and exit\n"
    "\n"
    "Examples:\n"
    "  nicsim up; nicsim-stream --loopback --sweep --tcp\n"
    "  nicsim-stream --loopback --pingpong --tcp --json\n"
    "  nicsim-stream --server --bind 198.18.0.2 &\n"
    "  nicsim-stream --client 198.18.0.2 --bind 198.18.0.1 --size 1M --duration 5 --verify\n"
    "  nicsim-stream --loopback --transport tcp --sweep 64,1M --verify\n"
    "\n"
    "Exit status: 0 success, 1 failure (connection, check, path, server), 2 usage\n"
    "error, 128+N after signal N (130 for ^C: the JSON report still ends).\n";

enum opt_id {
	O_SERVER,
	O_ONCE,
	O_CLIENT,
	O_LOOPBACK,
	O_BIND,
	O_SIZE,
	O_SWEEP,
	O_COUNT,
	O_DURATION,
	O_WARMUP,
	O_PINGPONG,
	O_VERIFY,
	O_SEED,
	O_TRANSPORT,
	O_TCP,
	O_PATH,
	O_RDMA_THRESHOLD,
	O_MAX_RDMA,
	O_JSON,
	O_TIMEOUT,
	O_DIR,
	O_HELP,
	O_COUNT_OF,
};

enum opt_arg { ARG_NONE, ARG_VALUE, ARG_OPTIONAL };

static const struct opt_spec {
	const char *name;
	enum opt_arg arg;
	bool workload; /* the client's: refused with --server */
	bool switch_only;
} specs[O_COUNT_OF] = {
    [O_SERVER] = {"server", ARG_NONE, false, false},
    [O_ONCE] = {"once", ARG_NONE, false, false},
    [O_CLIENT] = {"client", ARG_VALUE, false, false},
    [O_LOOPBACK] = {"loopback", ARG_OPTIONAL, false, false},
    [O_BIND] = {"bind", ARG_VALUE, false, false},
    [O_SIZE] = {"size", ARG_VALUE, true, false},
    [O_SWEEP] = {"sweep", ARG_OPTIONAL, true, false},
    [O_COUNT] = {"count", ARG_VALUE, true, false},
    [O_DURATION] = {"duration", ARG_VALUE, true, false},
    [O_WARMUP] = {"warmup", ARG_VALUE, true, false},
    [O_PINGPONG] = {"pingpong", ARG_NONE, true, false},
    [O_VERIFY] = {"verify", ARG_NONE, true, false},
    [O_SEED] = {"seed", ARG_VALUE, true, false},
    [O_TRANSPORT] = {"transport", ARG_VALUE, false, false},
    [O_TCP] = {"tcp", ARG_NONE, true, false},
    [O_PATH] = {"path", ARG_VALUE, false, true},
    [O_RDMA_THRESHOLD] = {"rdma-threshold", ARG_VALUE, false, true},
    [O_MAX_RDMA] = {"max-rdma", ARG_VALUE, false, true},
    [O_JSON] = {"json", ARG_NONE, true, false},
    [O_TIMEOUT] = {"timeout", ARG_VALUE, false, false},
    [O_DIR] = {"dir", ARG_VALUE, false, false},
    [O_HELP] = {"help", ARG_NONE, false, false},
};

static const uint64_t default_sweep[] = {64, 4u << 10, 64u << 10, 1u << 20, 16u << 20};

static int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_err(const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	fflush(stdout);
	fprintf(stderr, STREAM_PROG ": %s; see '" STREAM_PROG " --help'\n", text);
	return 2;
}

const char *stream_size_str(uint64_t size, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
	unsigned u = 0;

	while (u < 3 && size && !(size & 1023)) {
		size >>= 10;
		u++;
	}
	snprintf(buf, len, "%" PRIu64 " %s", size, units[u]);
	return buf;
}

const char *stream_addr_str(const struct sockaddr_in *a, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u", ip, ntohs(a->sin_port));
	return buf;
}

/* ADDR[:PORT] into *a; a missing port is def_port.  0, or 2 after saying
 * what was wrong. */
static int parse_addr(const char *opt, const char *text, uint16_t def_port, bool port_allowed,
		      struct sockaddr_in *a)
{
	const char *colon = strchr(text, ':');
	char ip[INET_ADDRSTRLEN + 1];
	uint64_t port = def_port;
	size_t n = colon ? (size_t)(colon - text) : strlen(text);

	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	if (n < sizeof(ip)) {
		memcpy(ip, text, n);
		ip[n] = '\0';
	}
	if (n >= sizeof(ip) || inet_pton(AF_INET, ip, &a->sin_addr) != 1)
		return usage_err("%s %s: expected an IPv4 address%s, e.g. 198.18.0.2%s", opt, text,
				 port_allowed ? " with an optional :PORT" : "",
				 port_allowed ? ":7472" : "");
	if (colon && !port_allowed)
		return usage_err("%s %s: expected an address without a port", opt, text);
	if (colon && (opts_parse_u64(colon + 1, &port) || port > 65535))
		return usage_err("%s %s: expected a port from 0 to 65535 after the colon", opt,
				 text);
	a->sin_port = htons((uint16_t)port);
	return 0;
}

static int parse_size(const char *opt, const char *text, uint64_t *v)
{
	if (opts_parse_size(text, v) || *v < 1 || *v > STREAM_MAX_SIZE)
		return usage_err(
		    "%s %s: expected a size from 1 to 1G, with an optional suffix K, M "
		    "or G (e.g. 64K)",
		    opt, text);
	return 0;
}

static int parse_num(const char *opt, const char *text, uint64_t min, uint64_t max, uint64_t *v)
{
	if (opts_parse_u64(text, v) || *v < min || *v > max)
		return usage_err("%s %s: expected a whole number from %" PRIu64 " to %" PRIu64, opt,
				 text, min, max);
	return 0;
}

static int parse_sweep(const char *text, struct stream_opts *o)
{
	const char *p = text;

	o->nsizes = 0;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		char item[32];
		int rc;

		if (!n || n >= sizeof(item))
			return usage_err("--sweep %s: expected sizes separated by commas, e.g. "
					 "64,4K,64K,1M,16M",
					 text);
		if (o->nsizes == STREAM_MAX_SIZES)
			return usage_err("--sweep %s: at most %d sizes", text, STREAM_MAX_SIZES);
		memcpy(item, p, n);
		item[n] = '\0';
		rc = parse_size("--sweep", item, &o->sizes[o->nsizes]);
		if (rc)
			return rc;
		o->nsizes++;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* The option spec named by arg ("--name" or "--name=value"); *value is the
 * text after '='. */
static int find_opt(const char *arg, const char **value)
{
	const char *eq = strchr(arg, '=');
	size_t n = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);

	*value = eq ? eq + 1 : NULL;
	for (int i = 0; i < O_COUNT_OF; i++)
		if (strlen(specs[i].name) == n && !strncmp(arg + 2, specs[i].name, n))
			return i;
	return -1;
}

static bool is_value(const char *arg)
{
	return arg && arg[0] && arg[0] != '-';
}

/* After parsing: the combinations that make no sense, and the defaults
 * that depend on the role. */
static int check_opts(struct stream_opts *o, const bool *seen, const char *transport)
{
	bool switch_used;

	if (o->role == ROLE_NONE)
		return usage_err("say which end to run: --server, --client ADDR or --loopback");
	if (seen[O_ONCE] && o->role != ROLE_SERVER)
		return usage_err("--once applies to --server only");
	if (seen[O_SIZE] && seen[O_SWEEP])
		return usage_err("--size and --sweep exclude each other: give one size or a list");
	if (seen[O_COUNT] && seen[O_DURATION])
		return usage_err("--count and --duration exclude each other");
	if (seen[O_BIND] && o->role == ROLE_LOOPBACK)
		return usage_err("--bind does not apply to --loopback: give its two addresses "
				 "after it");
	if (o->role == ROLE_SERVER) {
		for (int i = 0; i < O_COUNT_OF; i++)
			if (seen[i] && specs[i].workload)
				return usage_err("--%s is the client's: the server takes the "
						 "workload from each client",
						 specs[i].name);
	}
	if (transport) {
		if (!strcmp(transport, "switch")) {
			o->transports = ST_SWITCH;
		} else if (!strcmp(transport, "tcp")) {
			o->transports = ST_TCP;
		} else if (!strcmp(transport, "both")) {
			o->transports = ST_SWITCH | ST_TCP;
		} else {
			return usage_err("--transport %s: expected switch, tcp or both", transport);
		}
		if (seen[O_TCP] && o->transports == ST_TCP)
			return usage_err("--tcp adds TCP beside the switch; with --transport tcp "
					 "there is nothing to add");
	}
	if (o->role == ROLE_SERVER && o->transports == (ST_SWITCH | ST_TCP))
		return usage_err("--transport both: a server serves one transport, switch or tcp");
	if (seen[O_TCP])
		o->transports |= ST_SWITCH | ST_TCP;
	switch_used = o->transports & ST_SWITCH;
	for (int i = 0; i < O_COUNT_OF; i++)
		if (seen[i] && specs[i].switch_only && !switch_used)
			return usage_err("--%s applies to the switch, and --transport tcp leaves "
					 "it out",
					 specs[i].name);
	/* TCP beside the switch always runs on loopback against a server of
	 * this command; TCP alone runs between the addresses given. */
	o->tcp_on_loopback = o->transports == (ST_SWITCH | ST_TCP) || o->role == ROLE_LOOPBACK;
	if (o->role == ROLE_CLIENT && o->peer.sin_port == 0)
		return usage_err("--client: port 0 names no server: give the server's port");
	if (!o->nsizes) {
		o->sizes[0] = o->pingpong ? 8 : 64u << 10;
		o->nsizes = 1;
	}
	return 0;
}

int stream_parse_args(int argc, char **argv, struct stream_opts *o)
{
	bool seen[O_COUNT_OF] = {false};
	const char *transport = NULL, *lb_a = NULL, *lb_b = NULL, *bind = NULL;
	uint64_t v;
	int rc, i;

	memset(o, 0, sizeof(*o));
	o->transports = ST_SWITCH;
	o->warmup = 10;
	o->timeout_s = 30;
	for (i = 1; i < argc; i++) {
		const char *arg = argv[i], *val = NULL;
		const struct opt_spec *sp;
		int id;

		if (arg[0] != '-' || arg[1] != '-' || !arg[2])
			return usage_err("unexpected argument '%s'", arg);
		id = find_opt(arg, &val);
		if (id < 0) {
			int n = (int)strcspn(arg, "=");

			return usage_err("unknown option '%.*s'", n, arg);
		}
		sp = &specs[id];
		if (seen[id])
			return usage_err("--%s given twice", sp->name);
		seen[id] = true;
		if (val && sp->arg == ARG_NONE)
			return usage_err("--%s takes no value", sp->name);
		if (!val && sp->arg == ARG_VALUE) {
			if (i + 1 >= argc)
				return usage_err("--%s needs a value", sp->name);
			val = argv[++i];
		}
		if (!val && sp->arg == ARG_OPTIONAL && id == O_SWEEP && is_value(argv[i + 1]))
			val = argv[++i];
		rc = 0;
		switch ((enum opt_id)id) {
		case O_SERVER:
		case O_CLIENT:
		case O_LOOPBACK:
			if (o->role != ROLE_NONE)
				return usage_err("--server, --client and --loopback exclude each "
						 "other: give one");
			o->role = id == O_SERVER   ? ROLE_SERVER
				  : id == O_CLIENT ? ROLE_CLIENT
						   : ROLE_LOOPBACK;
			if (id == O_CLIENT)
				rc = parse_addr("--client", val, STREAM_PORT, true, &o->peer);
			if (id == O_LOOPBACK && val)
				return usage_err("--loopback takes its two addresses after it, not "
						 "after '='");
			if (id == O_LOOPBACK && is_value(argv[i + 1])) {
				if (!is_value(argv[i + 2]))
					return usage_err("--loopback %s: give two addresses (the "
							 "client's NIC, then the server's) or none",
							 argv[i + 1]);
				lb_a = argv[++i];
				lb_b = argv[++i];
			}
			break;
		case O_ONCE: o->once = true; break;
		case O_BIND:
			/* Parsed once the role is known: a server's port
			 * defaults to 7472, a client's to any. */
			bind = val;
			o->bind_set = true;
			break;
		case O_SIZE:
			rc = parse_size("--size", val, &o->sizes[0]);
			o->nsizes = 1;
			break;
		case O_SWEEP:
			if (val) {
				rc = parse_sweep(val, o);
			} else {
				memcpy(o->sizes, default_sweep, sizeof(default_sweep));
				o->nsizes = sizeof(default_sweep) / sizeof(default_sweep[0]);
			}
			break;
		case O_COUNT: rc = parse_num("--count", val, 1, STREAM_MAX_COUNT, &o->count); break;
		case O_DURATION:
			rc = parse_num("--duration", val, 1, STREAM_MAX_DURATION, &v);
			o->duration = (unsigned)v;
			break;
		case O_WARMUP:
			rc = parse_num("--warmup", val, 0, STREAM_MAX_COUNT, &o->warmup);
			break;
		case O_PINGPONG: o->pingpong = true; break;
		case O_VERIFY: o->verify = true; break;
		case O_SEED: rc = parse_num("--seed", val, 0, UINT64_MAX, &o->seed); break;
		case O_TRANSPORT: transport = val; break;
		case O_TCP: break;
		case O_PATH:
			if (!strcmp(val, "read"))
				o->path = SP_READ;
			else if (!strcmp(val, "write"))
				o->path = SP_WRITE;
			else if (!strcmp(val, "auto"))
				o->path = SP_AUTO;
			else
				return usage_err("--path %s: expected read, write or auto", val);
			break;
		case O_RDMA_THRESHOLD:
			/* NSW_RDMA_THRESHOLD takes no less than 2 KiB. */
			rc = parse_size("--rdma-threshold", val, &o->rdma_threshold);
			if (!rc && o->rdma_threshold < 2048)
				rc =
				    usage_err("--rdma-threshold %s: expected a size from 2K to 1G, "
					      "with an optional suffix K, M or G (e.g. 64K)",
					      val);
			break;
		case O_MAX_RDMA:
			/* NSW_MAX_RDMA takes no less than 4 KiB. */
			rc = parse_size("--max-rdma", val, &o->max_rdma);
			if (!rc && o->max_rdma < 4096)
				rc = usage_err("--max-rdma %s: expected a size from 4K to 1G, "
					       "with an optional suffix K, M or G (e.g. 1M)",
					       val);
			break;
		case O_JSON: o->json = true; break;
		case O_TIMEOUT:
			rc = parse_num("--timeout", val, 1, STREAM_MAX_TIMEOUT, &v);
			o->timeout_s = (unsigned)v;
			break;
		case O_DIR:
			if (!*val)
				return usage_err("--dir needs a directory");
			if (setenv("NICSIM_DIR", val, 1))
				return usage_err("--dir %s: %s", val, strerror(errno));
			break;
		case O_HELP: fputs(usage_text, stdout); return 1;
		case O_COUNT_OF: break;
		}
		if (rc)
			return rc;
	}
	rc = check_opts(o, seen, transport);
	if (rc)
		return rc;
	if (bind) {
		rc = parse_addr("--bind", bind, o->role == ROLE_SERVER ? STREAM_PORT : 0, true,
				&o->bind);
		if (rc)
			return rc;
		/* The SPI has no getsockname: a switch socket bound to port 0
		 * cannot learn the port its listen took, nor tell a client. */
		if (o->role == ROLE_SERVER && (o->transports & ST_SWITCH) && !o->bind.sin_port)
			return usage_err("--bind %s: a switch server needs a port: the switch "
					 "cannot say which port 0 would give (leave the port out "
					 "for 7472)",
					 bind);
	}
	if (o->role == ROLE_LOOPBACK) {
		bool tcp_only = o->transports == ST_TCP;

		rc = parse_addr("--loopback",
				lb_a       ? lb_a
				: tcp_only ? "127.0.0.1"
					   : "198.18.0.1",
				0, false, &o->bind);
		if (!rc)
			rc = parse_addr("--loopback",
					lb_b       ? lb_b
					: tcp_only ? "127.0.0.1"
						   : "198.18.0.2",
					tcp_only ? 0 : STREAM_PORT, true, &o->peer);
		/* As for a server's --bind: the switch's server needs a port. */
		if (!rc && (o->transports & ST_SWITCH) && !o->peer.sin_port)
			rc = usage_err("--loopback %s: a switch server needs a port: the switch "
				       "cannot say which port 0 would give (leave the port out "
				       "for 7472)",
				       lb_b);
	} else if (o->role == ROLE_SERVER && !o->bind_set) {
		o->bind.sin_family = AF_INET;
		o->bind.sin_addr.s_addr = htonl(INADDR_ANY);
		o->bind.sin_port = htons(STREAM_PORT);
	} else if (o->role == ROLE_CLIENT && !o->bind_set) {
		o->bind.sin_family = AF_INET;
		o->bind.sin_addr.s_addr = htonl(INADDR_ANY);
	}
	o->seed_set = seen[O_SEED];
	return rc;
}
