/*
 * The scenario language's data model: what the parser makes of a .scn file
 * and what the checker, the runner and the host agent work from.
 *
 * A script is parsed into one struct scn_script: the statements of the file,
 * with every `include` expanded in place and every `${NAME}` replaced, in
 * file order (struct scn_stmt, one per statement line), plus tables of the
 * set-up (NICs, links, hosts, programs, parameters) that point into that
 * list.  Every statement keeps where it was written (file, line, column)
 * and its text, so that anything reported about it names `file:line`.
 *
 * Names are global in a scenario and have a kind (enum scn_kind): a name
 * made by `-> NAME` (a socket, a handle, a descriptor, an operation, a
 * forked host), by a declaration (nic, host, program, fault, mark, desc) or
 * by `h1: buffer NAME`.  The parser records names as written; scn_check()
 * resolves them and checks kinds, order and values.
 *
 * Units are resolved by the parser: sizes in bytes, times in nanoseconds,
 * addresses in network byte order.  Link settings stay words, in the form
 * `nicsim link set` takes them (fab_link_parse() in fab.h): the parser turns
 * "latency 10us loss 1%" into the words "latency" "10" "loss" "1".
 *
 * Errors and warnings are collected in a struct scn_diag as
 * "file:line:col: message" lines, up to SCN_DIAG_MAX of them; nothing here
 * prints unless asked (scn_diag_print()).
 *
 * Functions return 0 or a negative errno: -EINVAL when the script has
 * errors (they are in the diag), -ENOMEM, or the error of opening the top
 * file (also in the diag).
 */
#ifndef SCN_AST_H
#define SCN_AST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "scn_pattern.h" /* the patterns of fill and ==: the host agent's generator */
#include "timer_opts.h"

/* ---- Limits --------------------------------------------------------------- */

#define SCN_NAME_MAX 64       /* a name or word, with its NUL: at most 63 bytes */
#define SCN_TEXT_MAX 256      /* a quoted string (title, output text, command), with NUL */
#define SCN_LINE_MAX 4096     /* one physical or continued line, in bytes */
#define SCN_INCLUDE_DEPTH 16  /* includes nested deeper are an error */
#define SCN_INCLUDES_MAX 1000 /* include lines read in one scenario, repeats counted */
#define SCN_LINK_WORDS_MAX 24 /* words of link settings in one statement */
#define SCN_LINK_WORD_MAX 32  /* one such word, with its NUL */
#define SCN_DIAG_MAX 50       /* messages a struct scn_diag keeps; the rest are counted */
#define SCN_DIAG_TEXT 512     /* one message, with "file:line:col: " */

/* Defaults the language documents. */
#define SCN_DEFAULT_TIMEOUT_NS (60ull * 1000000000ull) /* `timeout`: the whole scenario */
#define SCN_DEFAULT_STEP_NS (10ull * 1000000000ull)    /* a step without `within` */
#define SCN_TIME_MAX_NS (86400ull * 1000000000ull)     /* the longest time a script may write */

/* ---- Where ---------------------------------------------------------------- */

/* A place in a source file.  file points to a string the script owns
 * (script->files); line and col count from 1 (0: none); col counts bytes. */
struct scn_loc {
	const char *file;
	uint32_t line;
	uint32_t col;
};

/* A line and column in the statement's file. */
struct scn_pos {
	uint32_t line, col;
};

/* ---- Kinds of names ------------------------------------------------------- */

enum scn_kind {
	SCN_KIND_NONE = 0,
	SCN_KIND_SOCKET,  /* `socket -> s`, `accept s -> c` */
	SCN_KIND_HANDLE,  /* `register ... -> h`: a local registration handle */
	SCN_KIND_DESC,    /* `register-rdma ... -> d`, `desc NAME = ...`: 32 bytes */
	SCN_KIND_OP,      /* `write/read/send/recv ... -> w`: an operation */
	SCN_KIND_BUFFER,  /* `h1: buffer NAME SIZE` */
	SCN_KIND_HOST,    /* `host NAME on NIC`, `fork -> NAME` */
	SCN_KIND_PROGRAM, /* `program NAME on NIC "command"` */
	SCN_KIND_NIC,     /* `nic NAME ADDR` */
	SCN_KIND_FAULT,   /* `fault NAME ...` */
	SCN_KIND_MARK,    /* `mark NAME` */
	SCN_KIND_PARAM,   /* `param NAME = VALUE` */
	SCN_KIND_STREAM,  /* `stream-socket -> s`, `stream-accept s -> c`: a switch socket */
	SCN_KIND_COUNT_
};

/* The kind's name as messages print it ("socket", "descriptor"). */
const char *scn_kind_name(enum scn_kind kind);

/* ---- Statements ----------------------------------------------------------- */

enum scn_stmt_kind {
	/* Set-up: before the first step. */
	SCN_TITLE = 1, /* title "TEXT"                           u.text */
	SCN_SEED,      /* seed N                                 u.seed */
	SCN_PARAM,     /* param NAME = VALUE                     name, u.param */
	SCN_TIMEOUT,   /* timeout T                              u.time_ns */
	SCN_NIC,       /* nic NAME ADDR OPTION...                name, u.nic */
	SCN_LINK,      /* link SRC -> DST | SRC <-> DST WORD...   u.link */
	SCN_HOST,      /* host NAME on NIC [cache on|off]        name, u.host */
	SCN_PROGRAM,   /* program NAME on NIC "COMMAND"          name, u.program */
	SCN_CAPTURE,   /* capture on|off                         u.flag */
	/* Steps, in file order. */
	SCN_CALL,        /* HOST: VERB ARGS [-> NAME] [= R] [within T] [&]   u.call */
	SCN_DESC,        /* desc NAME = DESC with FIELD VALUE | truncated N  name, u.desc */
	SCN_START,       /* start PROGRAM                        u.target */
	SCN_KILL,        /* kill HOST | kill PROGRAM [SIGNAL]    u.kill */
	SCN_KILL_NIC,    /* kill nic NIC (SIGKILL nicsimd)       u.target */
	SCN_RESTART_NIC, /* restart nic NIC                     u.target */
	SCN_STOP_NIC,    /* stop nic NIC (SIGSTOP)               u.target */
	SCN_CONT_NIC,    /* cont nic NIC (SIGCONT)               u.target */
	SCN_FAULT, /* fault NAME SRC ->|<-> DST WORD... [trigger] [for ...] [optional]  name, u.fault */
	SCN_HEAL,         /* heal FAULT                           u.target */
	SCN_MARK,         /* mark NAME: a counter snapshot        name */
	SCN_WAIT_OP,      /* wait NAME [= R] [within T]           u.target, result */
	SCN_WAIT_EXIT,    /* wait PROGRAM|HOST exit [CODE] [within T]  u.exit */
	SCN_WAIT_OUTPUT,  /* wait PROGRAM output "TEXT"|/ERE/ [within T]  u.output */
	SCN_WAIT_COUNTER, /* wait counter NIC.NAME [delta [from MARK]] CMP [within T]  u.counter */
	SCN_WAIT_FRAME,   /* wait frame SRC -> DST FILTER... [within T]  u.frames */
	SCN_SETTLE,       /* settle T [no frame SRC -> DST FILTER...]  u.settle */
	SCN_EXPECT_MEM, /* expect HOST RANGE == PATTERN | == HOST RANGE | unchanged | checksum N  u.mem */
	SCN_EXPECT_TPT, /* expect tpt NIC entries CMP [of HOST] | key DESC valid|invalid|free  u.tpt */
	SCN_EXPECT_COUNTER, /* expect counter NIC.NAME [delta [from MARK]] CMP  u.counter */
	SCN_EXPECT_REFUSAL, /* expect refusal NIC reason REASON [from NIC]  u.refusal */
	SCN_EXPECT_FRAMES,  /* expect frames SRC -> DST FILTER... count CMP  u.frames */
	SCN_EXPECT_OUTPUT,  /* expect PROGRAM output "TEXT"|/ERE/  u.output */
	SCN_EXPECT_STREAM,  /* expect stream SOCK path [in|out] read|write | STAT CMP  u.stream */
	SCN_STMT_KIND_COUNT_
};

/* True for the set-up kinds (SCN_TITLE .. SCN_CAPTURE). */
bool scn_stmt_is_setup(enum scn_stmt_kind kind);

/* The statement's keyword as written ("nic", "wait", "expect"), for messages. */
const char *scn_stmt_kind_name(enum scn_stmt_kind kind);

/* Host calls: the verbs a host agent (nicsim-agent) performs.  The argument
 * shapes, in struct scn_call's fields (ARGS written in the script order): */
enum scn_verb {
	SCN_V_STARTUP = 1, /* startup                             WSPStartupEx 2.2 */
	SCN_V_SOCKET,      /* socket -> SOCKET                    WSPSocket(AF_INET, STREAM, TCP) */
	SCN_V_BIND,        /* bind SOCK NIC PORT                  sock, nic, port (0: any) */
	SCN_V_LISTEN,      /* listen SOCK [BACKLOG]               sock, backlog (0: default) */
	SCN_V_ACCEPT,      /* accept SOCK -> SOCKET               sock */
	SCN_V_CONNECT,     /* connect SOCK NIC PORT               sock, nic, port */
	SCN_V_BUFFER, /* buffer NAME SIZE [fill PATTERN] [malloc]   local.name (the new name), size, fill, use_malloc */
	SCN_V_REGISTER,        /* register SOCK RANGE [ACCESS] -> HANDLE      sock, local, access */
	SCN_V_DEREGISTER,      /* deregister SOCK HANDLE              sock, target */
	SCN_V_REGISTER_RDMA,   /* register-rdma SOCK RANGE [ACCESS] -> DESC   sock, local, access */
	SCN_V_DEREGISTER_RDMA, /* deregister-rdma SOCK DESC           sock, target */
	SCN_V_WRITE, /* write SOCK RANGE DESC[OFF] -> OP    sock, local, remote: RDMA write of local to remote */
	SCN_V_READ, /* read SOCK RANGE DESC[OFF] [len N] -> OP   sock, local, remote, size (0: local's length) */
	SCN_V_SEND,           /* send SOCK RANGE -> OP               sock, local */
	SCN_V_RECV,           /* recv SOCK RANGE -> OP               sock, local */
	SCN_V_CLOSE,          /* close SOCK                          sock */
	SCN_V_CLEANUP,        /* cleanup                             WSPCleanup */
	SCN_V_CACHE_CALLBACK, /* cache-callback RANGE                local */
	SCN_V_MUNMAP,         /* munmap NAME (a whole buffer)        local */
	SCN_V_MMAP,           /* mmap BUF: a new mapping at the same address   local */
	SCN_V_MREMAP,         /* mremap BUF SIZE                     local, size */
	SCN_V_MADVISE,        /* madvise RANGE ADVICE                local, advice */
	SCN_V_FREE,           /* free BUF (a malloc buffer)          local */
	SCN_V_REALLOC,        /* realloc BUF SIZE                    local, size */
	SCN_V_FORK, /* fork -> HOST                        a child agent on the same NIC */
	SCN_V_EXIT, /* exit CODE                           code */
	/* The switch's stream sockets (nicsim_switch.h): results are errno names. */
	SCN_V_STREAM_SOCKET,   /* stream-socket -> STREAM              nsw_socket */
	SCN_V_STREAM_BIND,     /* stream-bind SOCK NIC PORT            sock, nic, port */
	SCN_V_STREAM_LISTEN,   /* stream-listen SOCK [BACKLOG] [path P]   sock, backlog, path */
	SCN_V_STREAM_ACCEPT,   /* stream-accept SOCK -> STREAM         sock */
	SCN_V_STREAM_CONNECT,  /* stream-connect SOCK NIC PORT [path P]   sock, nic, port, path */
	SCN_V_STREAM_SEND,     /* stream-send SOCK RANGE -> OP         sock, local: all of it */
	SCN_V_STREAM_RECV,     /* stream-recv SOCK RANGE -> OP         sock, local: all of it */
	SCN_V_STREAM_SHUTDOWN, /* stream-shutdown SOCK read|write|both   sock, how */
	SCN_V_STREAM_CLOSE,    /* stream-close SOCK                    sock */
	SCN_VERB_COUNT_
};

/* The verb as written ("register-rdma"), or NULL; and back (0 if unknown). */
const char *scn_verb_name(enum scn_verb verb);
enum scn_verb scn_verb_parse(const char *word);

/* The kind of name `-> NAME` makes for verb, or SCN_KIND_NONE when the verb
 * takes no `-> NAME`. */
enum scn_kind scn_verb_makes(enum scn_verb verb);

/* True when the agent runs the verb without blocking later requests
 * (accept, connect, write, read, send, recv and their stream-* forms):
 * such a call may end in `&`. */
bool scn_verb_async(enum scn_verb verb);

/* True for the switch's verbs (stream-*): they take stream sockets, and
 * their results are errno names (ENOBUFS) rather than WSA codes. */
bool scn_verb_stream(enum scn_verb verb);

/* A piece of a buffer or a descriptor, as written after its name. */
enum scn_range_form {
	SCN_RANGE_WHOLE = 0, /* x             the whole buffer (or descriptor) */
	SCN_RANGE_SPAN,      /* x[OFF..END]   bytes OFF up to END, END excluded */
	SCN_RANGE_FROM,      /* x[OFF..]      bytes OFF to the end */
	SCN_RANGE_AT,        /* d[OFF]        an offset only (a descriptor's target) */
};

struct scn_range {
	char name[SCN_NAME_MAX]; /* the buffer or descriptor */
	enum scn_range_form form;
	uint64_t off; /* SPAN, FROM, AT: first byte */
	uint64_t end; /* SPAN: one past the last byte (end >= off, checked by the parser) */
};

/* Access of a registration (WSPRegisterMemory / WSPRegisterRdmaMemory). */
enum scn_access {
	SCN_ACCESS_READWRITE = 0, /* the default */
	SCN_ACCESS_READ,
	SCN_ACCESS_WRITE,
};

/* madvise advice. */
enum scn_advice {
	SCN_ADV_DONTNEED = 0,
	SCN_ADV_FREE,
	SCN_ADV_REMOVE,
};

/* An expected result: `= ok` (the default), `= WSAE...`, `= any`; for
 * the stream-* calls `= ENOBUFS` (an errno name) and `= eof`. */
enum scn_result_kind {
	SCN_RES_OK = 0,
	SCN_RES_WSA, /* code and name */
	SCN_RES_ANY,
	SCN_RES_ERRNO, /* code and name: an errno (105 for ENOBUFS) */
	SCN_RES_EOF,   /* stream-recv: end-of-file came before the range was full */
};

struct scn_result {
	enum scn_result_kind kind;
	int code;                /* WSA: the code's value (10022 for WSAEINVAL); ERRNO: errno */
	char name[SCN_NAME_MAX]; /* as written ("eof" for EOF) */
};

/* How a stream socket's data moves (NSW_PATH_*): `path read|write|auto`. */
enum scn_path {
	SCN_PATH_AUTO = 0, /* the switch reads when it can (NSW_PATH_READ is the same) */
	SCN_PATH_READ,
	SCN_PATH_WRITE,
};

/* stream-shutdown's direction. */
enum scn_shut {
	SCN_SHUT_READ = 0,
	SCN_SHUT_WRITE,
	SCN_SHUT_BOTH,
};

/* A comparison: `== N`, `!= N`, `< N`, `<= N`, `> N`, `>= N`, `in A..B`. */
enum scn_cmp_op {
	SCN_CMP_EQ = 0,
	SCN_CMP_NE,
	SCN_CMP_LT,
	SCN_CMP_LE,
	SCN_CMP_GT,
	SCN_CMP_GE,
	SCN_CMP_IN, /* a <= value <= b */
};

struct scn_cmp {
	enum scn_cmp_op op;
	uint64_t a; /* the operand; IN: the low bound */
	uint64_t b; /* IN: the high bound (b >= a), included */
};

/* True when value satisfies cmp. */
bool scn_cmp_holds(const struct scn_cmp *cmp, uint64_t value);

/* A directed link or both directions: `SRC -> DST`, `SRC <-> DST`. */
struct scn_link_ends {
	char src[SCN_NAME_MAX]; /* a NIC */
	char dst[SCN_NAME_MAX]; /* a NIC */
	bool both;              /* <->: also DST -> SRC */
};

/* Link settings in `nicsim link set` words (numbers in its units:
 * microseconds, Gbit/s, percent), for fab_link_parse(). */
struct scn_link_words {
	char word[SCN_LINK_WORDS_MAX][SCN_LINK_WORD_MAX];
	size_t n;
	struct scn_loc loc; /* of the first word, for messages about them */
};

/* Which frames: `opcode NAME|NUM` (as fab_link_parse and the capture name
 * them; ACK), `syndrome NAME` (ACK, RNR-NAK, NAK-PSN-SEQ,
 * NAK-INVALID-REQUEST, NAK-REMOTE-ACCESS, NAK-REMOTE-OP, NAK-INVALID-RD),
 * `qpn N`. */
struct scn_frame_filter {
	struct scn_link_ends link; /* both is false: frames go one way */
	int opcode;                /* BTH opcode, -1: any */
	int syndrome; /* AETH syndrome byte (low bits of an RNR NAK are ignored), -1: any */
	int64_t qpn;  /* destination QP, -1: any */
	char opcode_name[SCN_NAME_MAX];   /* as written, "" when any */
	char syndrome_name[SCN_NAME_MAX]; /* as written, "" when any */
};

/* How a fault starts and ends. */
enum scn_fault_start {
	SCN_FAULT_NOW = 0, /* armed when its line runs */
	SCN_FAULT_AFTER,   /* after NAME: when the operation or step NAME has ended */
	SCN_FAULT_AT,      /* at +T: T after its line ran (a warning: prefer events) */
};

enum scn_fault_end {
	SCN_FAULT_UNTIL_HEAL = 0, /* until `heal NAME` or the scenario's end */
	SCN_FAULT_FOR_TIME,       /* for T */
	SCN_FAULT_FOR_FRAMES,     /* for N frames on that link */
};

/* A WSA code by its name ("WSAEINVAL" -> 10022): 0 or -EINVAL; and the
 * name of a code, or NULL for one the language does not name. */
int scn_wsa_parse(const char *name, int *code);
const char *scn_wsa_name(int code);

/* An errno by its name ("ENOBUFS" -> ENOBUFS), as the C library names them
 * (strerrorname_np): 0 or -EINVAL. */
int scn_errno_parse(const char *name, int *code);

/* What `expect stream S STAT CMP` may name: the fields of struct
 * nsw_stats, in its order; scn_stream_stat_index gives -1 for another. */
#define SCN_STREAM_STATS(X) \
	X(bytes_sent)       \
	X(bytes_received)   \
	X(msgs_sent)        \
	X(msgs_received)    \
	X(large_sends)      \
	X(rdma_ops)         \
	X(registrations)    \
	X(credit_updates)   \
	X(credit_waits)
extern const char *const scn_stream_stats[];
extern const size_t scn_stream_nstats;
int scn_stream_stat_index(const char *name);

/* ---- Per-kind arguments ---------------------------------------------------- */

struct scn_nic {
	uint32_t addr; /* network order, in 198.18.0.0/15 */
	char addr_text[SCN_NAME_MAX];
	bool no_windows;       /* no-windows: nicsimd --no-mw */
	bool no_rdma_read;     /* no-rdma-read */
	uint32_t tpt_capacity; /* tpt-capacity N; 0: nicsimd's default */
	uint64_t max_reg;      /* max-reg SIZE in bytes; 0: nicsimd's default */
	/* Timer options, as nicsimd takes them (nicsimd --help), indexed by
	 * enum nic_timer_opt (timer_opts.h: ack-timeout, retry-count,
	 * rnr-retry, cm-timeout, cm-retries, rnr-timer); -1: its default. */
	int timer[NIC_TIMER_OPTS];
};

struct scn_link {
	struct scn_link_ends ends;
	struct scn_link_words words; /* the settings, never empty */
};

struct scn_host {
	char nic[SCN_NAME_MAX];
	int cache; /* -1: the provider's default; 0: cache off; 1: cache on (NICSIM_CACHE) */
};

struct scn_program {
	char nic[SCN_NAME_MAX];
	char command[SCN_TEXT_MAX]; /* run by /bin/sh -c, NICSIM_DIR and NICSIM_ADDR set */
};

struct scn_param {
	char value[SCN_TEXT_MAX]; /* the value after -D overrides, as text */
	bool overridden;          /* -D gave it */
};

struct scn_call {
	char host[SCN_NAME_MAX]; /* the host (agent) that makes the call */
	enum scn_verb verb;
	char sock[SCN_NAME_MAX];   /* the socket argument, "" when the verb takes none */
	char nic[SCN_NAME_MAX];    /* bind, connect: the NIC whose address is meant */
	uint32_t port;             /* bind, connect (0..65535) */
	uint32_t backlog;          /* listen; 0: the default */
	struct scn_range local;    /* the buffer argument (buffer: its name) */
	struct scn_range remote;   /* write, read: the descriptor and offset (form AT or WHOLE) */
	char target[SCN_NAME_MAX]; /* deregister: handle; deregister-rdma: descriptor */
	uint64_t size;             /* buffer, mremap, realloc: bytes; read: `len N` (0: local's) */
	struct scn_pattern fill;   /* buffer: fill (zero by default) */
	bool use_malloc;           /* buffer: from malloc instead of mmap */
	enum scn_access access;    /* register, register-rdma */
	enum scn_advice advice;    /* madvise */
	int exit_code;             /* exit (0..255) */
	enum scn_path path;        /* stream-listen, stream-connect */
	enum scn_shut how;         /* stream-shutdown */
};

/* `desc NAME = BASE with FIELD VALUE` or `desc NAME = BASE truncated N`. */
enum scn_desc_field {
	SCN_DF_RKEY = 1,
	SCN_DF_VA,
	SCN_DF_LEN,
	SCN_DF_NIC,
	SCN_DF_MAGIC,
	SCN_DF_VERSION,
	SCN_DF_ACCESS,
	SCN_DF_TRUNCATED, /* truncated N: only the first N bytes are passed */
};

struct scn_desc {
	char base[SCN_NAME_MAX]; /* the descriptor it is made from */
	enum scn_desc_field field;
	bool relative; /* `+N` or `-N`: added to the field instead of replacing it */
	bool negative; /* with relative: subtracted */
	uint64_t value;
	char nic[SCN_NAME_MAX]; /* field NIC: the NIC whose address goes in */
};

struct scn_kill {
	char target[SCN_NAME_MAX]; /* a host or a program */
	int signal;                /* SIGKILL unless a signal is named (programs only) */
};

struct scn_fault {
	struct scn_link_ends ends;
	struct scn_link_words words; /* the rule, in `nicsim link set` words */
	enum scn_fault_start start;
	char after[SCN_NAME_MAX]; /* start AFTER: an operation (or a name a step made) */
	uint64_t at_ns;           /* start AT */
	enum scn_fault_end end;
	uint64_t for_ns;     /* end FOR_TIME */
	uint64_t for_frames; /* end FOR_FRAMES */
};

struct scn_exit {
	char target[SCN_NAME_MAX]; /* a program or a host */
	bool has_code;             /* `exit N` rather than `exit` */
	int code;                  /* the exit status wanted (0..255) */
};

struct scn_output {
	char target[SCN_NAME_MAX]; /* a program */
	char text[SCN_TEXT_MAX];   /* a line containing it, or the ERE */
	bool regex;                /* /ERE/ rather than "text" */
};

struct scn_counter {
	char nic[SCN_NAME_MAX];     /* the part before the first '.' */
	char counter[SCN_NAME_MAX]; /* the name `nicsim stats` prints */
	bool delta;                 /* the change since the start (or since mark) */
	char mark[SCN_NAME_MAX];    /* delta from MARK; "" for the scenario's start */
	struct scn_cmp cmp;
};

struct scn_frames {
	struct scn_frame_filter filter;
	struct scn_cmp count; /* expect frames: count CMP; wait frame: >= 1 */
};

struct scn_settle {
	uint64_t ns;
	bool no_frame; /* `no frame SRC -> DST ...`: fails if such a frame is seen */
	struct scn_frame_filter filter;
};

enum scn_mem_check {
	SCN_MEM_PATTERN = 1, /* == PATTERN */
	SCN_MEM_PEER,        /* == HOST RANGE */
	SCN_MEM_UNCHANGED,   /* unchanged */
	SCN_MEM_CHECKSUM,    /* checksum N (CRC-32) */
};

struct scn_mem {
	char host[SCN_NAME_MAX];
	struct scn_range range;
	enum scn_mem_check check;
	struct scn_pattern pattern;   /* PATTERN */
	char peer_host[SCN_NAME_MAX]; /* PEER */
	struct scn_range peer;        /* PEER */
	uint32_t checksum;            /* CHECKSUM */
};

enum scn_tpt_state {
	SCN_TPT_VALID = 1,
	SCN_TPT_INVALID,
	SCN_TPT_FREE,
};

struct scn_tpt {
	char nic[SCN_NAME_MAX];
	bool key;                /* key DESC STATE, else entries CMP [of HOST] */
	char host[SCN_NAME_MAX]; /* entries ... of HOST; "" for the whole NIC */
	struct scn_cmp cmp;
	char desc[SCN_NAME_MAX]; /* key: a descriptor (or a handle) */
	enum scn_tpt_state state;
};

/* expect stream SOCK ( path [in|out] read|write | STAT CMP ) */
struct scn_stream_exp {
	char sock[SCN_NAME_MAX]; /* a stream socket */
	bool path;               /* path ..., else STAT CMP */
	bool in, out;            /* path: the directions named (both when neither is written) */
	enum scn_path want;      /* path: SCN_PATH_READ or SCN_PATH_WRITE */
	char stat[SCN_NAME_MAX]; /* STAT: a field of struct nsw_stats */
	struct scn_cmp cmp;
};

struct scn_refusal {
	char nic[SCN_NAME_MAX];    /* the NIC that refused */
	char reason[SCN_NAME_MAX]; /* as written: stale-key, no-access ... (NIC_TPT_REASONS) */
	int reason_code;           /* enum nic_tpt_reason */
	char from[SCN_NAME_MAX];   /* the requester's NIC; "" for any */
	char since[SCN_NAME_MAX];  /* a mark: refusals recorded after it only; "" for any */
};

/* One statement. */
struct scn_stmt {
	enum scn_stmt_kind kind;
	struct scn_loc loc; /* its first token */
	const char *text;   /* the statement as expanded, one line, comments removed */
	/* Where each byte of text was written: text_pos[i] for text[i] (a byte
	 * that ${NAME} made points at its '$'), so a message can point at a
	 * name inside the statement. */
	const struct scn_pos *text_pos;
	/* The name it defines: `-> NAME` of a call, or the declared name of nic,
	 * host, program, param, fault, mark, desc, and `buffer NAME`; "" if none. */
	char name[SCN_NAME_MAX];
	struct scn_loc name_loc;  /* where that name is written */
	struct scn_result result; /* calls, wait NAME: `= R` (ok when not written) */
	bool has_result;          /* `= R` was written */
	uint64_t within_ns;       /* `within T`; 0: the default (SCN_DEFAULT_STEP_NS) */
	bool async;               /* ends in `&`: collected by a later `wait NAME` */
	bool optional;            /* fault: not firing is no failure */
	union {
		char text[SCN_TEXT_MAX]; /* title */
		uint64_t seed;           /* seed */
		uint64_t time_ns;        /* timeout */
		bool flag;               /* capture on (true) | off */
		char target
		    [SCN_NAME_MAX]; /* start, kill nic, restart/stop/cont nic, heal, wait NAME */
		struct scn_param param;
		struct scn_nic nic;
		struct scn_link link;
		struct scn_host host;
		struct scn_program program;
		struct scn_call call;
		struct scn_desc desc;
		struct scn_kill kill;
		struct scn_fault fault;
		struct scn_exit exit;
		struct scn_output output;
		struct scn_counter counter;
		struct scn_frames frames;
		struct scn_settle settle;
		struct scn_mem mem;
		struct scn_tpt tpt;
		struct scn_refusal refusal;
		struct scn_stream_exp stream;
	} u;
};

/* Where word (a name, as a whole word) is written in st: the first place
 * in its text, else st->loc. */
struct scn_loc scn_stmt_word_loc(const struct scn_stmt *st, const char *word);

/* ---- Scripts --------------------------------------------------------------- */

/* A parsed script.  Every pointer below is owned by the script and freed
 * by scn_script_free(); the tables point into stmts, in file order. */
struct scn_script {
	char *path;               /* the top file as given */
	char title[SCN_TEXT_MAX]; /* `title`, else the first line of the top comment, else "" */
	uint64_t seed;            /* `seed N` (or -D SEED=N) */
	bool seed_set;            /* otherwise the runner picks one and prints it */
	uint64_t timeout_ns;      /* `timeout T`, else SCN_DEFAULT_TIMEOUT_NS */
	bool capture;             /* `capture on|off`, on by default */
	struct scn_stmt *stmts;   /* every statement, set-up first */
	size_t nstmts;
	const struct scn_stmt **nics; /* SCN_NIC */
	size_t nnics;
	const struct scn_stmt **links; /* SCN_LINK */
	size_t nlinks;
	const struct scn_stmt **hosts; /* SCN_HOST (forked hosts are made by calls) */
	size_t nhosts;
	const struct scn_stmt **programs; /* SCN_PROGRAM */
	size_t nprograms;
	const struct scn_stmt **params; /* SCN_PARAM, with their final values */
	size_t nparams;
	char **files; /* every file read (the top one first); locs point here */
	size_t nfiles;
};

/* -D NAME=VALUE overrides: replace a `param`'s default (and SEED the seed). */
struct scn_define {
	const char *name;
	const char *value;
};

struct scn_defines {
	const struct scn_define *v;
	size_t n;
};

/*
 * The seed of a run, for scn_parse_file_run().  ${SEED} is the seed the
 * scenario runs with: seed when given (--seed N), else -D SEED=N, else the
 * file's `seed N` (wherever it is written), else seed_default when
 * default_set (the random seed a run picks), else 0 (`check`, which runs
 * nothing).  The script's seed is then that seed.
 */
struct scn_run_seed {
	bool given; /* --seed N: overrides -D SEED and the file's seed */
	uint64_t seed;
	bool default_set; /* the seed when nothing else gives one */
	uint64_t seed_default;
};

/* text with every ${RUN_DIR} replaced by run_dir (the runner's run
 * directory, known only when the scenario runs), as a malloc'ed string;
 * NULL when out of memory. */
char *scn_subst_run_dir(const char *text, const char *run_dir);

/* ---- Diagnostics ------------------------------------------------------------ */

enum scn_severity {
	SCN_ERROR = 0,
	SCN_WARNING,
};

struct scn_diag_msg {
	enum scn_severity severity;
	uint32_t line, col; /* 0 when the message is about the whole file */
	char text
	    [SCN_DIAG_TEXT]; /* "file:line:col: message" (warnings: "file:line:col: warning: ...") */
};

/* Messages in the order found.  Zero it (or scn_diag_init) before use; it
 * holds no pointer, so it needs no freeing and outlives the script. */
struct scn_diag {
	struct scn_diag_msg msg[SCN_DIAG_MAX];
	size_t n;        /* kept in msg */
	size_t errors;   /* errors found, kept or not */
	size_t warnings; /* warnings found, kept or not */
	size_t dropped;  /* messages beyond SCN_DIAG_MAX */
};

void scn_diag_init(struct scn_diag *diag);

/* Add a message at loc (loc->line 0: about the whole file).  Never fails:
 * past SCN_DIAG_MAX it only counts. */
void scn_diag_add(struct scn_diag *diag, enum scn_severity sev, const struct scn_loc *loc,
		  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Print every message kept, one a line, then "... and N more" if some were
 * dropped. */
void scn_diag_print(const struct scn_diag *diag, FILE *f);

/* ---- Parsing and checking ---------------------------------------------------- */

/* scn_parse_buffer flags. */
#define SCN_PARSE_NO_INCLUDE 0x1u /* `include` is an error (e.g. input from a fuzzer) */

/*
 * Parse the file at path (includes relative to it) into *out.  defs may be
 * NULL.  Returns 0 with *out set (warnings may be in diag), or a negative
 * errno with *out NULL and the errors in diag: -EINVAL for a bad script,
 * -ENOENT and the like when path cannot be read, -ENOMEM.
 */
int scn_parse_file(const char *path, const struct scn_defines *defs, struct scn_script **out,
		   struct scn_diag *diag);

/* scn_parse_file for a run: as it, with the seed the run gives (NULL: as
 * scn_parse_file). */
int scn_parse_file_run(const char *path, const struct scn_defines *defs,
		       const struct scn_run_seed *seed, struct scn_script **out,
		       struct scn_diag *diag);

/*
 * Parse len bytes at data (need not be NUL-terminated; NUL bytes are an
 * error) as the file called name: includes resolve relative to name's
 * directory unless flags has SCN_PARSE_NO_INCLUDE.  As scn_parse_file.
 */
int scn_parse_buffer(const char *name, const void *data, size_t len, const struct scn_defines *defs,
		     unsigned flags, struct scn_script **out, struct scn_diag *diag);

/* Free a script; NULL is fine. */
void scn_script_free(struct scn_script *script);

/*
 * Resolve names and check the script (scn_check.c): names defined before
 * use, of the right kind, once; hosts and programs on declared NICs;
 * addresses valid and distinct; links between declared NICs; link settings
 * as `nicsim link set` takes them; ranges within constant buffer sizes;
 * every `&` operation waited for.  Returns 0 (warnings may be in diag) or
 * -EINVAL with the errors in diag.
 */
int scn_check(struct scn_script *script, struct scn_diag *diag);

#endif /* SCN_AST_H */
