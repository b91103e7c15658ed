/*
 * The scenario runner: one process per scenario, one event loop, the steps
 * in file order (scn_run_priv.h), and the parent that checks every file,
 * runs the scenarios (-j N side by side) and prints their reports in order
 * (scn_run.h).
 */

#include "scn_run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fab.h"
#include "fab_addr.h"
#include "nicsim_rundir.h"
#include "scn.h"
#include "scn_agent_client.h"
#include "scn_run_priv.h"
#include "ws2san.h"

#define AGENT_NAME "nicsim-agent"
#define AGENT_CLOSE_MS 1000 /* an agent's end after its channel closes, then SIGKILL */
#define PROG_TERM_MS 1000   /* a program's SIGTERM before SIGKILL at the end */
#define DESCENDANTS_MS 2000 /* bound on ending what the programs left behind */
#define OUT_CHUNK 4096
#define RE_PIECE 4096       /* bytes of a line an ERE is matched against at a time */
#define PROG_READ_CHUNKS 64 /* reads of OUT_CHUNK bytes a program's turn takes at most */
#define OUT_HEAD (1u << 20) /* a program's first output bytes kept */
#define OUT_TAIL (1u << 20) /* and its latest */
#define LOG_MAX (16u << 20) /* the most of a program's output its log keeps */

/* ---- Small helpers --------------------------------------------------------- */

/* A signal's name without "SIG" ("INT"), or its number when it has none. */
static const char *sig_abbrev(int sig)
{
	static __thread char num[16];
	const char *name = sig > 0 ? sigabbrev_np(sig) : NULL;

	if (name)
		return name;
	snprintf(num, sizeof(num), "%d", sig);
	return num;
}

/* Make room for one more element of size elem in *v (count n, capacity
 * *cap).  0 or -ENOMEM. */
static int grow(void *v, size_t n, size_t *cap, size_t elem)
{
	void **p = v, *bigger;
	size_t ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? 2 * *cap : 8;
	bigger = realloc(*p, ncap * elem);
	if (!bigger)
		return -ENOMEM;
	memset((char *)bigger + *cap * elem, 0, (ncap - *cap) * elem);
	*p = bigger;
	*cap = ncap;
	return 0;
}

static void loc_str(const struct scn_stmt *st, char *buf, size_t size)
{
	snprintf(buf, size, "%s:%u", st->loc.file ? st->loc.file : "?", st->loc.line);
}

void scn_fail(struct scn_runner *r, const struct scn_stmt *st, const char *fmt, ...)
{
	char at[SCN_OUT_TEXT], msg[SCN_OUT_TEXT];
	va_list ap;

	if (r->out->status != SCN_PASSED)
		return;
	if (st)
		loc_str(st, at, sizeof(at));
	else
		snprintf(at, sizeof(at), "%s", r->script->path);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	scn_outcome_fail(r->out, at, st && st->text ? st->text : "", "%s", msg);
}

uint64_t scn_after_ns(uint64_t now, uint64_t ns, double slow)
{
	double v = (double)ns * slow;
	uint64_t d;

	/* 2^63 ns is some 292 years: past that (or NaN), never; below it the
	 * conversion is defined, and the sum is checked against wrapping. */
	if (!(v < 9.2e18))
		return UINT64_MAX;
	d = v > 0 ? (uint64_t)v : 0;
	return d > UINT64_MAX - now ? UINT64_MAX : now + d;
}

uint64_t scn_step_deadline(const struct scn_runner *r, const struct scn_stmt *st)
{
	uint64_t ns = st->within_ns ? st->within_ns : SCN_DEFAULT_STEP_NS;
	uint64_t d = scn_after_ns(scn_now_ns(), ns, r->slow);

	return d < r->deadline ? d : r->deadline;
}

struct scn_nicd *scn_rt_nic(struct scn_runner *r, const char *name)
{
	return scn_topo_nic(&r->topo, name);
}

struct scn_rt_host *scn_rt_host(struct scn_runner *r, const char *name)
{
	for (size_t i = 0; i < r->nhosts; i++)
		if (!strcmp(r->hosts[i].name, name))
			return &r->hosts[i];
	return NULL;
}

struct scn_rt_prog *scn_rt_prog(struct scn_runner *r, const char *name)
{
	for (size_t i = 0; i < r->nprogs; i++)
		if (!strcmp(r->progs[i].decl->name, name))
			return &r->progs[i];
	return NULL;
}

/* The newest operation of that name: a name may be made again by a later
 * step. */
struct scn_rt_op *scn_rt_op(struct scn_runner *r, const char *name)
{
	for (size_t i = r->nops; i-- > 0;)
		if (!strcmp(r->ops[i].name, name))
			return &r->ops[i];
	return NULL;
}

struct scn_rt_desc *scn_rt_desc(struct scn_runner *r, const char *name)
{
	for (size_t i = 0; i < r->ndescs; i++)
		if (!strcmp(r->descs[i].name, name))
			return &r->descs[i];
	return NULL;
}

struct scn_rt_buf *scn_rt_buf(struct scn_runner *r, const char *name)
{
	for (size_t i = 0; i < r->nbufs; i++)
		if (!strcmp(r->bufs[i].name, name))
			return &r->bufs[i];
	return NULL;
}

static struct scn_rt_handle *rt_handle(struct scn_runner *r, const char *name)
{
	for (size_t i = 0; i < r->nhandles; i++)
		if (!strcmp(r->handles[i].name, name))
			return &r->handles[i];
	return NULL;
}

int scn_rt_mark_take(struct scn_runner *r, const char *name, const struct scn_stmt *st)
{
	struct scn_rt_mark *m;
	char why[SCN_WHY_MAX];
	int rc;

	if (grow(&r->marks, r->nmarks, &r->cap_marks, sizeof(*r->marks)))
		return -ENOMEM;
	m = &r->marks[r->nmarks];
	snprintf(m->name, sizeof(m->name), "%s", name);
	{
		/* The clock of a NIC's refusal records (`expect refusal ... since`). */
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		m->realtime_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}
	m->stats = calloc(r->topo.nnics ? r->topo.nnics : 1, sizeof(*m->stats));
	m->have = calloc(r->topo.nnics ? r->topo.nnics : 1, sizeof(*m->have));
	if (!m->stats || !m->have) {
		free(m->stats);
		free(m->have);
		return -ENOMEM;
	}
	r->nmarks++;
	for (size_t i = 0; i < r->topo.nnics; i++) {
		if (r->topo.nics[i].pid <= 0)
			continue;
		rc = scn_topo_stats(&r->topo, &r->topo.nics[i], &m->stats[i], why, sizeof(why));
		if (rc && st) {
			scn_fail(r, st, "cannot take the counters of NIC %s: %s",
				 r->topo.nics[i].name, why);
			return rc;
		}
		m->have[i] = !rc;
	}
	return 0;
}

/* ---- Hosts ---------------------------------------------------------------------- */

static struct scn_rt_op *op_find(struct scn_runner *r, struct scn_rt_host *h, long long id)
{
	for (size_t i = r->nops; i-- > 0;)
		if (r->ops[i].host == h && r->ops[i].id == id)
			return &r->ops[i];
	return NULL;
}

static struct scn_rt_host *host_new(struct scn_runner *r, const char *name, struct scn_nicd *nic)
{
	struct scn_rt_host *h;
	size_t i;

	/* Hosts point to each other (parent): keep the table where it is by
	 * sizing it once for every host the script can make. */
	if (r->nhosts == r->cap_hosts)
		return NULL;
	i = r->nhosts++;
	h = &r->hosts[i];
	memset(h, 0, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "%s", name);
	h->nic = nic;
	h->pidfd = -1;
	h->status = -1;
	return h;
}

/* Open a log file of the run directory for a host or a program. */
static int run_log(struct scn_runner *r, const char *kind, const char *name, bool append)
{
	char path[PATH_MAX + 128];

	snprintf(path, sizeof(path), "%s/%s-%s.log", r->topo.dir, kind, name);
	return open(path,
		    O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC) | O_CLOEXEC | O_NOFOLLOW,
		    0600);
}

static int host_spawn(struct scn_runner *r, const struct scn_stmt *st)
{
	const char *env[2] = {NULL, NULL};
	struct scn_agent_spawn how;
	struct scn_rt_host *h;
	struct scn_nicd *nic = scn_rt_nic(r, st->u.host.nic);
	int log_fd, rc;

	h = nic ? host_new(r, st->name, nic) : NULL;
	if (!h) {
		scn_fail(r, st, "host %s: its NIC %s is unknown", st->name, st->u.host.nic);
		return -EINVAL;
	}
	if (st->u.host.cache >= 0)
		env[0] = st->u.host.cache ? "NICSIM_CACHE=on" : "NICSIM_CACHE=off";
	log_fd = run_log(r, "host", st->name, false);
	how = (struct scn_agent_spawn){.program = r->agent_path,
				       .run_dir = r->topo.dir,
				       .addr = nic->addr_str,
				       .env = env,
				       .stderr_fd = log_fd};
	rc = scn_agent_spawn(&how, &h->agent);
	if (log_fd >= 0)
		close(log_fd);
	if (rc) {
		scn_fail(r, st, "cannot start host %s (%s): %s", st->name, r->agent_path,
			 strerror(-rc));
		return rc;
	}
	h->pid = scn_agent_pid(h->agent);
	h->pidfd = scn_pidfd_open(h->pid);
	return 0;
}

/* The agent exited: record its status without reaping it (scn_agent_close
 * reaps it at the end, so its pid is never recycled before). */
static void host_exited(struct scn_rt_host *h)
{
	siginfo_t si;

	h->gone = true;
	h->exited = true;
	memset(&si, 0, sizeof(si));
	if (h->pid > 0 && !waitid(P_PID, (id_t)h->pid, &si, WEXITED | WNOHANG | WNOWAIT) &&
	    si.si_pid == h->pid)
		h->status = si.si_code == CLD_EXITED   ? W_EXITCODE(si.si_status, 0)
			    : si.si_code == CLD_DUMPED ? (si.si_status & 0x7f) | 0x80
						       : si.si_status & 0x7f;
	if (h->pidfd >= 0)
		close(h->pidfd);
	h->pidfd = -1;
}

static void op_side_effects(struct scn_runner *r, struct scn_rt_op *op,
			    const struct scn_reply *rep);

static bool host_ended(struct scn_runner *r, void *arg)
{
	const struct scn_rt_host *h = arg;

	(void)r;
	return h->exited || (h->parent && h->parent->exited);
}

/*
 * Host h took no more calls (its channel closed): before its end is
 * reported, wait a little (bounded, in the loop) for its exit status,
 * which comes a moment later through its pidfd, or for a forked host with
 * its parent's reply to the fork.
 */
static void host_settle(struct scn_runner *r, struct scn_rt_host *h)
{
	uint64_t d = scn_after_ns(scn_now_ns(), AGENT_CLOSE_MS * 1000000ull, r->slow);

	if (!h->exited)
		scn_loop_until(r, host_ended, h, d < r->deadline ? d : r->deadline);
}

/* How host h ended, in words ("killed by signal 9 (SIGKILL)"). */
static void host_end_text(const struct scn_rt_host *h, char *buf, size_t size)
{
	int st = h->status;

	if (!h->exited || st < 0)
		snprintf(buf, size, "gone, its exit status not known yet");
	else if (WIFEXITED(st))
		snprintf(buf, size, "exited with status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, size, "killed by signal %d (SIG%s)", WTERMSIG(st),
			 sig_abbrev(WTERMSIG(st)));
	else
		snprintf(buf, size, "ended (wait status 0x%x)", (unsigned)st);
}

/* The number of a signal named as sigabbrev_np names it ("KILL"), or 0. */
static int sig_number(const char *name)
{
	for (int i = 1; i < NSIG; i++) {
		const char *n = sigabbrev_np(i);

		if (n && !strcmp(n, name))
			return i;
	}
	return (int)strtol(name, NULL, 10);
}

static void host_reply(struct scn_runner *r, struct scn_rt_host *h, const char *line)
{
	struct scn_reply rep;
	struct scn_rt_op *op;
	char val[64];

	if (scn_reply_parse(line, &rep))
		return;
	op = op_find(r, h, rep.id);
	if (!op)
		return;
	op->replied = true;
	if (rep.kind == SCN_REPLY_PENDING) {
		if (op->st && op->st->kind == SCN_CALL && op->st->u.call.verb == SCN_V_FORK &&
		    scn_reply_get(&rep, "pid", val, sizeof(val))) {
			struct scn_rt_host *child = scn_rt_host(r, op->st->name);

			if (child) {
				child->pid = (pid_t)strtol(val, NULL, 10);
				scn_agent_set_pid(child->agent, child->pid);
			}
		}
		return;
	}
	op->done = true;
	op->end_ns = scn_now_ns();
	op->bad = rep.kind == SCN_REPLY_BAD;
	snprintf(op->code, sizeof(op->code), "%s",
		 rep.kind == SCN_REPLY_ERR || rep.kind == SCN_REPLY_DONE_ERR ? rep.code : "");
	snprintf(op->reply, sizeof(op->reply), "%s", rep.rest ? rep.rest : "");
	if (op->bad)
		snprintf(op->code, sizeof(op->code), "bad");
	if (!op->bad && !op->code[0])
		op_side_effects(r, op, &rep);
	/* A forked host's fork request is done when the child ended. */
	if (op->st && op->st->kind == SCN_CALL && op->st->u.call.verb == SCN_V_FORK) {
		struct scn_rt_host *child = scn_rt_host(r, op->st->name);

		if (child) {
			child->gone = true;
			child->exited = true;
			if (scn_reply_get(&rep, "exit", val, sizeof(val)))
				child->status = W_EXITCODE((int)strtol(val, NULL, 10), 0);
			else if (scn_reply_get(&rep, "signal", val, sizeof(val)))
				child->status = sig_number(val) & 0x7f;
		}
	}
}

static void host_drain(struct scn_runner *r, struct scn_rt_host *h)
{
	char line[SCN_AGENT_LINE_MAX];
	int n;

	if (!h->agent)
		return;
	for (;;) {
		n = scn_agent_recv(h->agent, line, sizeof(line), 0);
		if (n == -EMSGSIZE)
			continue;
		if (n < 0)
			break;
		host_reply(r, h, line);
	}
	/* The end of its channel: no more calls.  Its exit status comes with
	 * its pidfd (or, for a forked host, its fork request's end). */
	if (n == -EPIPE)
		h->gone = true;
}

/* ---- Programs ------------------------------------------------------------------- */

static void prog_end(struct scn_runner *r, struct scn_rt_prog *p);

static int prog_start(struct scn_runner *r, struct scn_rt_prog *p, const struct scn_stmt *st)
{
	char *command;
	int pipefd[2], null_fd;
	sigset_t none;
	pid_t pid;

	if (p->started && !p->exited) {
		scn_fail(r, st,
			 "program %s is still running (pid %d): `kill %s` or `wait %s exit` "
			 "first",
			 p->decl->name, (int)p->pid, p->decl->name, p->decl->name);
		return -EALREADY;
	}
	/* Started again: its output from now on is what `wait ... output` and
	 * `expect ... output` look at; its log keeps both runs. */
	if (p->started) {
		prog_end(r, p);
		p->outlen = p->taillen = 0;
		p->dropped = 0;
		p->head_full = false;
		for (size_t k = 0; k < p->nwatches; k++)
			p->watches[k].hit = false;
		p->partlen = 0;
		if (p->out)
			p->out[0] = '\0';
		if (p->tail)
			p->tail[0] = '\0';
		p->exited = false;
	}
	p->killed = p->exit_waited = false;
	p->exit_during = NULL;
	/* ${RUN_DIR} is known now. */
	command = scn_subst_run_dir(p->decl->u.program.command, r->topo.dir);
	if (!command) {
		scn_fail(r, st, "cannot start program %s: out of memory", p->decl->name);
		return -ENOMEM;
	}
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		int err = errno;

		free(command);
		return -err;
	}
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	p->log_fd = run_log(r, "prog", p->decl->name, p->started);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		if (dup2(null_fd, 0) < 0 || dup2(pipefd[1], 1) < 0 || dup2(pipefd[1], 2) < 0)
			_exit(127);
		setenv("NICSIM_DIR", r->topo.dir, 1);
		setenv("NICSIM_ADDR", p->nic->addr_str, 1);
		if (r->prog_path)
			setenv("PATH", r->prog_path, 1);
		execl("/bin/sh", "sh", "-c", command, (char *)NULL);
		_exit(127);
	}
	free(command);
	close(pipefd[1]);
	if (null_fd >= 0)
		close(null_fd);
	if (pid < 0) {
		close(pipefd[0]);
		scn_fail(r, st, "cannot start program %s: %s", p->decl->name, strerror(errno));
		return -errno;
	}
	setpgid(pid, pid); /* both sides: whichever runs first */
	p->pid = pid;
	if ((size_t)(p - r->progs) < SCN_PGIDS_MAX)
		r->out->pgids[p - r->progs] = pid;
	p->pidfd = scn_pidfd_open(pid);
	p->out_fd = pipefd[0];
	fcntl(p->out_fd, F_SETFL, O_NONBLOCK);
	p->started = true;
	return 0;
}

/*
 * Whether a line of text[0..len) contains o's text (or matches re, o's
 * ERE compiled).  An ERE is matched against pieces of at most RE_PIECE
 * bytes, each overlapping the one before by half, as lines too long for
 * the watch are (prog_watch): regexec's time grows faster than a line's
 * length (a 1 MB line once took minutes), a piece's is bounded.  Past
 * deadline (CLOCK_MONOTONIC ns) no more pieces are matched.
 */
static bool text_match(const char *text, size_t len, const struct scn_output *o, const regex_t *re,
		       uint64_t deadline)
{
	const char *line = text, *end = text + len, *nl;
	size_t tlen = strlen(o->text), llen, at, n;
	char *copy;
	bool found = false;

	for (; line < end && !found; line = nl ? nl + 1 : end) {
		nl = memchr(line, '\n', (size_t)(end - line));
		llen = (size_t)((nl ? nl : end) - line);
		if (!o->regex) {
			found = memmem(line, llen, o->text, tlen) != NULL;
			continue;
		}
		for (at = 0; !found && (at == 0 || at + RE_PIECE / 2 < llen); at += RE_PIECE / 2) {
			if (deadline != UINT64_MAX && scn_now_ns() >= deadline)
				return false;
			n = llen - at < RE_PIECE ? llen - at : RE_PIECE;
			copy = strndup(line + at, n);
			found = copy && !regexec(re, copy, 0, NULL, 0);
			free(copy);
		}
	}
	return found;
}

/* Compile an output step's ERE: 0, or nonzero when the C library refuses
 * it or it has a back-reference (scn_ere_backref). */
static int ere_compile(regex_t *re, const char *ere)
{
	if (scn_ere_backref(ere))
		return REG_ESUBREG;
	return regcomp(re, ere, REG_EXTENDED | REG_NOSUB);
}

/* Whether a line of text[0..len) contains o's text (or matches its ERE). */
static bool text_has(const char *text, size_t len, const struct scn_output *o, uint64_t deadline)
{
	regex_t re;
	bool found;

	if (!o->regex)
		return text_match(text, len, o, NULL, deadline);
	if (ere_compile(&re, o->text))
		return false;
	found = text_match(text, len, o, &re, deadline);
	regfree(&re);
	return found;
}

/* Append data[0..n) to a NUL-terminated buffer.  0 or -ENOMEM. */
static int text_add(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
	char *bigger;
	size_t ncap;

	if (*len + n + 1 > *cap) {
		ncap = (*len + n + 1) * 2;
		bigger = realloc(*buf, ncap);
		if (!bigger)
			return -ENOMEM;
		*buf = bigger;
		*cap = ncap;
	}
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

/* Match text[0..n), a line or a piece of one, against the output being
 * waited for. */
static void prog_watch_text(struct scn_rt_prog *p, const char *text, size_t n)
{
	struct scn_rt_watch *w;

	for (size_t k = 0; n && k < p->nwatches; k++) {
		w = &p->watches[k];
		if (!w->hit && (w->compiled || !w->st->u.output.regex))
			w->hit = text_match(text, n, &w->st->u.output, &w->re, UINT64_MAX);
	}
}

/* The watch of an output step st of program p (NULL: none). */
static struct scn_rt_watch *prog_watch_of(struct scn_rt_prog *p, const struct scn_stmt *st)
{
	for (size_t k = 0; k < p->nwatches; k++)
		if (p->watches[k].st == st)
			return &p->watches[k];
	return NULL;
}

/*
 * Give each program the watches of the output steps that name it, their
 * EREs compiled (one the C library refuses fails its step when it runs).
 * 0 or -ENOMEM.
 */
static int prog_watches_setup(struct scn_runner *r)
{
	const struct scn_script *s = r->script;
	struct scn_rt_watch *w;
	struct scn_rt_prog *p;

	for (size_t i = 0; i < s->nstmts; i++) {
		const struct scn_stmt *st = &s->stmts[i];

		if (st->kind != SCN_WAIT_OUTPUT && st->kind != SCN_EXPECT_OUTPUT)
			continue;
		p = scn_rt_prog(r, st->u.output.target);
		if (!p)
			continue;
		w = realloc(p->watches, (p->nwatches + 1) * sizeof(*w));
		if (!w)
			return -ENOMEM;
		p->watches = w;
		w = &p->watches[p->nwatches++];
		memset(w, 0, sizeof(*w));
		w->st = st;
		w->compiled = st->u.output.regex && !ere_compile(&w->re, st->u.output.text);
	}
	return 0;
}

/* Match each line that text[0..n) ends (with its start, kept in p->part
 * from before) against the output being waited for, as it arrives, and
 * keep the line not ended yet in p->part. */
static void prog_watch(struct scn_rt_prog *p, const char *text, size_t n)
{
	const char *end = text + n, *nl;
	size_t len, keep;

	while (text < end) {
		nl = memchr(text, '\n', (size_t)(end - text));
		len = (size_t)((nl ? nl : end) - text);
		if (p->partlen + len > sizeof(p->part)) {
			/* Too long a line: its pieces are matched apart, and a
			 * piece's end is kept to meet the next one. */
			prog_watch_text(p, p->part, p->partlen);
			p->partlen = 0;
			if (len > sizeof(p->part)) {
				prog_watch_text(p, text, len);
				keep = nl ? 0 : sizeof(p->part) / 2;
				text += len - keep;
				len = keep;
			}
		}
		memcpy(p->part + p->partlen, text, len);
		p->partlen += len;
		if (nl) {
			prog_watch_text(p, p->part, p->partlen);
			p->partlen = 0;
		}
		text += len + (nl != NULL);
	}
}

/* Keep text[0..n) of program p's output: into its head until that is
 * full (ending at a line's end where one is near), then into its tail,
 * which is cut back to OUT_TAIL bytes (at a line's start) when it reaches
 * twice that.  Each line is matched first against the output a `wait`
 * step waits for, so that none goes unseen. */
static void prog_keep(struct scn_rt_prog *p, const char *text, size_t n)
{
	const char *nl;
	size_t take, cut;

	prog_watch(p, text, n);
	if (!p->head_full) {
		take = n < OUT_HEAD - p->outlen ? n : OUT_HEAD - p->outlen;
		if (take < n) {
			nl = memrchr(text, '\n', take);
			if (nl)
				take = (size_t)(nl - text) + 1;
			p->head_full = true;
		}
		if (text_add(&p->out, &p->outlen, &p->outcap, text, take))
			return;
		text += take;
		n -= take;
	}
	if (!n || text_add(&p->tail, &p->taillen, &p->tailcap, text, n))
		return;
	if (p->taillen < 2 * OUT_TAIL)
		return;
	cut = p->taillen - OUT_TAIL;
	nl = memrchr(p->tail, '\n', cut);
	if (nl)
		cut = (size_t)(nl - p->tail) + 1;
	memmove(p->tail, p->tail + cut, p->taillen - cut + 1);
	p->taillen -= cut;
	p->dropped += cut;
}

/* Write n bytes of program p's output to its log, up to LOG_MAX bytes in
 * all; the first time it goes past, a line says so. */
static void prog_log(struct scn_rt_prog *p, const char *data, size_t n)
{
	static const char cut[] = "\n[nicsim scenario: the output goes on past the log's "
				  "16 MiB; the rest is not kept]\n";
	size_t room = p->logged < LOG_MAX ? LOG_MAX - p->logged : 0;
	size_t take = n < room ? n : room;

	if (p->log_fd < 0)
		return;
	if (take && write(p->log_fd, data, take) < 0) {
		close(p->log_fd);
		p->log_fd = -1;
		return;
	}
	p->logged += take;
	if (take < n) {
		if (!p->unlogged && write(p->log_fd, cut, sizeof(cut) - 1) < 0) {
			close(p->log_fd);
			p->log_fd = -1;
		}
		p->unlogged += n - take;
	}
}

/* Read what program p wrote, at most PROG_READ_CHUNKS reads: true when
 * it stopped at that bound (more may be waiting), false at the pipe's
 * end or when it is empty for now. */
static bool prog_read(struct scn_rt_prog *p)
{
	char chunk[OUT_CHUNK], text[2 * OUT_CHUNK];
	ssize_t n;
	size_t len;

	/* At most PROG_READ_CHUNKS reads at a time: a program that writes
	 * as fast as it is read leaves the loop its turn to see the
	 * deadline and signals; what is left is read on its next turn. */
	for (int turn = 0; turn < PROG_READ_CHUNKS; turn++) {
		n = read(p->out_fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0 || errno != EAGAIN) {
				close(p->out_fd);
				p->out_fd = -1;
			}
			return false;
		}
		prog_log(p, chunk, (size_t)n);
		/* A NUL byte would end the kept text: keep it as "\0". */
		len = 0;
		for (ssize_t i = 0; i < n; i++) {
			if (chunk[i]) {
				text[len++] = chunk[i];
			} else {
				text[len++] = '\\';
				text[len++] = '0';
			}
		}
		prog_keep(p, text, len);
	}
	return true;
}

static void prog_reap(struct scn_rt_prog *p)
{
	pid_t w;

	do
		w = waitpid(p->pid, &p->status, WNOHANG);
	while (w < 0 && errno == EINTR);
	if (w == 0)
		return;
	p->exited = true;
	p->exit_ns = scn_now_ns();
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->pidfd = -1;
}

/* How program p ended, in words: "exited with status 127 (command not
 * found or not executable)", "killed by signal 9 (SIGKILL)". */
static void prog_end_text(const struct scn_rt_prog *p, char *buf, size_t size)
{
	int st = p->status;

	if (!p->exited)
		snprintf(buf, size, "still running");
	else if (WIFEXITED(st))
		snprintf(buf, size, "exited with status %d%s", WEXITSTATUS(st),
			 WEXITSTATUS(st) == 127   ? " (command not found or not executable)"
			 : WEXITSTATUS(st) == 126 ? " (found but not executable)"
						  : "");
	else if (WIFSIGNALED(st))
		snprintf(buf, size, "killed by signal %d (SIG%s)", WTERMSIG(st),
			 sig_abbrev(WTERMSIG(st)));
	else
		snprintf(buf, size, "ended (wait status 0x%x)", (unsigned)st);
}

static void prog_end(struct scn_runner *r, struct scn_rt_prog *p)
{
	struct pollfd pf;
	uint64_t deadline;

	if (!p->started || p->pid <= 0)
		goto out;
	if (!p->exited)
		prog_reap(p);
	if (!p->exited) {
		kill(-p->pid, SIGCONT);
		kill(-p->pid, SIGTERM);
		deadline = scn_now_ns() + PROG_TERM_MS * 1000000ull;
		while (!p->exited && p->pidfd >= 0 && scn_now_ns() < deadline) {
			pf = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
			poll(&pf, 1, (int)((deadline - scn_now_ns()) / 1000000 + 1));
			prog_reap(p);
		}
		if (!p->exited) {
			kill(-p->pid, SIGKILL);
			while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR)
				;
			p->exited = true;
		}
	}
	/* What the group left behind (a command's own children). */
	kill(-p->pid, SIGKILL);
	if ((size_t)(p - r->progs) < SCN_PGIDS_MAX)
		r->out->pgids[p - r->progs] = 0;
out:
	if (p->out_fd >= 0)
		prog_read(p);
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->log_fd >= 0 && p->unlogged)
		dprintf(p->log_fd, "[nicsim scenario: %llu bytes of output not kept]\n",
			(unsigned long long)p->unlogged);
	p->unlogged = 0;
	if (p->log_fd >= 0)
		close(p->log_fd);
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->out_fd = p->log_fd = p->pidfd = -1;
}

/* A NIC's daemon ended on its own (`kill nic` reaps its NIC itself): say
 * so, whatever the scenario makes of it. */
static void nic_exited(struct scn_runner *r, struct scn_nicd *n)
{
	pid_t pid = n->pid;

	if (scn_topo_nic_reap(n))
		scn_outcome_add(r->out->notes, sizeof(r->out->notes),
				"NIC %s (nicsimd pid %d) exited during the scenario; its log: "
				"nic-%s.log",
				n->name, (int)pid, n->addr_str);
}

/* ---- The event loop ----------------------------------------------------------- */

enum { PF_SIG, PF_CAP, PF_HOST_CHAN, PF_HOST_PID, PF_PROG_OUT, PF_PROG_PID, PF_NIC };

int scn_loop_until(struct scn_runner *r, scn_cond_fn cond, void *arg, uint64_t deadline)
{
	size_t cap = 2 + 2 * r->nhosts + 2 * r->nprogs + r->topo.nnics;
	struct pollfd *pf = calloc(cap, sizeof(*pf));
	unsigned char *what = calloc(cap, 1);
	size_t *idx = calloc(cap, sizeof(*idx));
	struct signalfd_siginfo si;
	uint64_t now, next, poll_ns;
	int64_t wait_ms;
	size_t n, i;
	int rc = 0;

	if (!pf || !what || !idx) {
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		for (i = 0; i < r->nhosts; i++)
			host_drain(r, &r->hosts[i]);
		now = scn_now_ns();
		poll_ns = 0;
		next = scn_fault_tick(r, now, &poll_ns);
		if (r->interrupted) {
			rc = -EINTR;
			break;
		}
		if (cond && cond(r, arg))
			break;
		if (now >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		n = 0;
		pf[n] = (struct pollfd){.fd = r->sigfd, .events = POLLIN};
		what[n++] = PF_SIG;
		if (r->topo.capture.wake_fd >= 0) {
			pf[n] = (struct pollfd){.fd = r->topo.capture.wake_fd, .events = POLLIN};
			what[n++] = PF_CAP;
		}
		for (i = 0; i < r->nhosts; i++) {
			if (r->hosts[i].agent && !r->hosts[i].gone) {
				pf[n] = (struct pollfd){.fd = scn_agent_fd(r->hosts[i].agent),
							.events = POLLIN};
				idx[n] = i;
				what[n++] = PF_HOST_CHAN;
			}
			if (r->hosts[i].pidfd >= 0) {
				pf[n] = (struct pollfd){.fd = r->hosts[i].pidfd, .events = POLLIN};
				idx[n] = i;
				what[n++] = PF_HOST_PID;
			}
		}
		for (i = 0; i < r->nprogs; i++) {
			if (r->progs[i].out_fd >= 0) {
				pf[n] = (struct pollfd){.fd = r->progs[i].out_fd, .events = POLLIN};
				idx[n] = i;
				what[n++] = PF_PROG_OUT;
			}
			if (r->progs[i].pidfd >= 0) {
				pf[n] = (struct pollfd){.fd = r->progs[i].pidfd, .events = POLLIN};
				idx[n] = i;
				what[n++] = PF_PROG_PID;
			}
		}
		for (i = 0; i < r->topo.nnics; i++) {
			if (r->topo.nics[i].pidfd >= 0) {
				pf[n] =
				    (struct pollfd){.fd = r->topo.nics[i].pidfd, .events = POLLIN};
				idx[n] = i;
				what[n++] = PF_NIC;
			}
		}
		/* Block until the nearest of: the deadline, a fault's timer, a
		 * counter re-read, a link re-read for a fault counting frames. */
		{
			uint64_t until = deadline;

			if (next && next < until)
				until = next;
			if (r->counter_poll && r->counter_next_ns < until)
				until = r->counter_next_ns;
			if (poll_ns && scn_after_ns(now, poll_ns, 1.0) < until)
				until = now + poll_ns;
			wait_ms = until > now ? (int64_t)((until - now + 999999) / 1000000) : 0;
		}
		if (poll(pf, n, (int)(wait_ms > 60000 ? 60000 : wait_ms)) < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		for (i = 0; i < n; i++) {
			if (!pf[i].revents)
				continue;
			switch (what[i]) {
			case PF_SIG:
				if (read(r->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
					r->interrupted = true;
					r->signo = (int)si.ssi_signo;
				}
				break;
			case PF_CAP: scn_capture_ack(&r->topo); break;
			case PF_HOST_CHAN: host_drain(r, &r->hosts[idx[i]]); break;
			case PF_HOST_PID: host_exited(&r->hosts[idx[i]]); break;
			case PF_PROG_OUT: prog_read(&r->progs[idx[i]]); break;
			case PF_PROG_PID:
				prog_reap(&r->progs[idx[i]]);
				if (r->progs[idx[i]].exited)
					r->progs[idx[i]].exit_during = r->cur;
				/* What it wrote is all in once it exited: the
				 * pipe is read dry (at most 8 turns, past the
				 * largest pipe an unprivileged program makes). */
				for (int t = 0; t < 8 && r->progs[idx[i]].out_fd >= 0 &&
						prog_read(&r->progs[idx[i]]);
				     t++)
					;
				break;
			case PF_NIC: nic_exited(r, &r->topo.nics[idx[i]]); break;
			}
		}
	}
out:
	free(pf);
	free(what);
	free(idx);
	return rc;
}

/* ---- Host calls ------------------------------------------------------------------ */

static void hex_blob(const uint8_t *b, size_t len, char *out, size_t size)
{
	size_t o = 0;

	o += (size_t)snprintf(out, size, "x:");
	for (size_t i = 0; i < len && o + 3 < size; i++)
		o += (size_t)snprintf(out + o, size - o, "%02x", b[i]);
}

static size_t unhex_blob(const char *text, uint8_t *b, size_t size)
{
	size_t n = 0;
	unsigned v;

	if (!strncmp(text, "x:", 2))
		text += 2;
	while (n < size && sscanf(text, "%2x", &v) == 1 && text[1]) {
		b[n++] = (uint8_t)v;
		text += 2;
	}
	return n;
}

/* The bytes range rg names in its buffer: 0, or an error after failing
 * step st (or quietly when st is NULL). */
static int range_of(struct scn_runner *r, const struct scn_stmt *st, const struct scn_range *rg,
		    uint64_t *off, uint64_t *len)
{
	struct scn_rt_buf *b = scn_rt_buf(r, rg->name);

	if (!b) {
		if (st)
			scn_fail(r, st, "%s is not a buffer made by a `buffer` step", rg->name);
		return -ENOENT;
	}
	switch (rg->form) {
	case SCN_RANGE_WHOLE: *off = 0, *len = b->size; break;
	case SCN_RANGE_SPAN: *off = rg->off, *len = rg->end - rg->off; break;
	case SCN_RANGE_FROM:
	case SCN_RANGE_AT: *off = rg->off, *len = rg->off <= b->size ? b->size - rg->off : 0; break;
	}
	if (*off > b->size || *len > b->size - *off) {
		if (!st)
			return -ERANGE;
		scn_fail(r, st, "%s[%llu..%llu] lies outside buffer %s of %llu bytes", rg->name,
			 (unsigned long long)*off, (unsigned long long)(*off + *len), rg->name,
			 (unsigned long long)b->size);
		return -ERANGE;
	}
	return 0;
}

static const char *access_word(enum scn_access a)
{
	return a == SCN_ACCESS_READ ? "read" : a == SCN_ACCESS_WRITE ? "write" : "readwrite";
}

static const char *path_word(enum scn_path p)
{
	return p == SCN_PATH_READ ? "read" : p == SCN_PATH_WRITE ? "write" : "auto";
}

static const char *advice_word(enum scn_advice a)
{
	return a == SCN_ADV_FREE ? "free" : a == SCN_ADV_REMOVE ? "remove" : "dontneed";
}

/* The request line of a call (after its ID).  0, or an error with the
 * step failed. */
static int call_line(struct scn_runner *r, const struct scn_stmt *st, char *line, size_t size)
{
	const struct scn_call *c = &st->u.call;
	char blob[2 * SCN_RT_DESC_MAX + 8], pat[64];
	struct scn_nicd *nic;
	struct scn_rt_desc *d;
	struct scn_rt_handle *hd;
	uint64_t off = 0, len = 0;

	switch (c->verb) {
	case SCN_V_STARTUP: snprintf(line, size, "startup"); break;
	case SCN_V_CLEANUP: snprintf(line, size, "cleanup"); break;
	case SCN_V_SOCKET: snprintf(line, size, "socket %s", st->name); break;
	case SCN_V_BIND:
	case SCN_V_CONNECT:
		nic = scn_rt_nic(r, c->nic);
		if (!nic) {
			scn_fail(r, st, "%s is not a NIC of this scenario", c->nic);
			return -ENOENT;
		}
		snprintf(line, size, "%s %s %s %u", c->verb == SCN_V_BIND ? "bind" : "connect",
			 c->sock, nic->addr_str, c->port);
		break;
	case SCN_V_LISTEN:
		if (c->backlog)
			snprintf(line, size, "listen %s %u", c->sock, c->backlog);
		else
			snprintf(line, size, "listen %s", c->sock);
		break;
	case SCN_V_ACCEPT: snprintf(line, size, "accept %s %s", c->sock, st->name); break;
	case SCN_V_CLOSE: snprintf(line, size, "close %s", c->sock); break;
	case SCN_V_BUFFER:
		scn_pattern_words(r, &c->fill, pat, sizeof(pat));
		snprintf(line, size, "buffer %s %llu %s %s", c->local.name,
			 (unsigned long long)c->size, c->use_malloc ? "malloc" : "mmap", pat);
		break;
	case SCN_V_REGISTER:
	case SCN_V_REGISTER_RDMA:
		if (range_of(r, st, &c->local, &off, &len))
			return -EINVAL;
		snprintf(line, size, "%s %s %s %llu %llu %s%s%s",
			 c->verb == SCN_V_REGISTER ? "register" : "register-rdma", c->sock,
			 c->local.name, (unsigned long long)off, (unsigned long long)len,
			 access_word(c->access), c->verb == SCN_V_REGISTER ? " " : "",
			 c->verb == SCN_V_REGISTER ? st->name : "");
		break;
	case SCN_V_DEREGISTER:
		hd = rt_handle(r, c->target);
		if (hd && hd->host != scn_rt_host(r, c->host))
			snprintf(line, size, "deregister %s 0x%llx", c->sock,
				 (unsigned long long)hd->value);
		else
			snprintf(line, size, "deregister %s %s", c->sock, c->target);
		break;
	case SCN_V_DEREGISTER_RDMA:
		d = scn_rt_desc(r, c->target);
		if (!d) {
			scn_fail(r, st, "%s is not a descriptor made by an earlier step",
				 c->target);
			return -ENOENT;
		}
		hex_blob(d->bytes, d->len, blob, sizeof(blob));
		snprintf(line, size, "deregister-rdma %s %s", c->sock, blob);
		break;
	case SCN_V_WRITE:
	case SCN_V_READ:
		if (range_of(r, st, &c->local, &off, &len))
			return -EINVAL;
		if (c->verb == SCN_V_READ && c->size)
			len = c->size;
		d = scn_rt_desc(r, c->remote.name);
		if (!d) {
			scn_fail(r, st, "%s is not a descriptor made by an earlier step",
				 c->remote.name);
			return -ENOENT;
		}
		hex_blob(d->bytes, d->len, blob, sizeof(blob));
		snprintf(
		    line, size, "%s %s %s %llu %llu desc=%s at=%llu",
		    c->verb == SCN_V_WRITE ? "write" : "read", c->sock, c->local.name,
		    (unsigned long long)off, (unsigned long long)len, blob,
		    (unsigned long long)(c->remote.form == SCN_RANGE_WHOLE ? 0 : c->remote.off));
		break;
	case SCN_V_SEND:
	case SCN_V_RECV:
		if (range_of(r, st, &c->local, &off, &len))
			return -EINVAL;
		snprintf(line, size, "%s %s %s %llu %llu", c->verb == SCN_V_SEND ? "send" : "recv",
			 c->sock, c->local.name, (unsigned long long)off, (unsigned long long)len);
		break;
	case SCN_V_CACHE_CALLBACK:
	case SCN_V_MADVISE:
		if (range_of(r, st, &c->local, &off, &len))
			return -EINVAL;
		if (c->verb == SCN_V_CACHE_CALLBACK)
			snprintf(line, size, "cache-callback %s %llu %llu", c->local.name,
				 (unsigned long long)off, (unsigned long long)len);
		else if (c->local.form == SCN_RANGE_WHOLE)
			snprintf(line, size, "madvise %s %s", c->local.name,
				 advice_word(c->advice));
		else
			snprintf(line, size, "madvise %s %s %llu %llu", c->local.name,
				 advice_word(c->advice), (unsigned long long)off,
				 (unsigned long long)len);
		break;
	case SCN_V_MUNMAP: snprintf(line, size, "munmap %s", c->local.name); break;
	case SCN_V_MMAP: snprintf(line, size, "mmap %s", c->local.name); break;
	case SCN_V_FREE: snprintf(line, size, "free %s", c->local.name); break;
	case SCN_V_MREMAP:
	case SCN_V_REALLOC:
		snprintf(line, size, "%s %s %llu", c->verb == SCN_V_MREMAP ? "mremap" : "realloc",
			 c->local.name, (unsigned long long)c->size);
		break;
	case SCN_V_EXIT: snprintf(line, size, "exit %d", c->exit_code); break;
	case SCN_V_STREAM_SOCKET: snprintf(line, size, "stream-socket %s", st->name); break;
	case SCN_V_STREAM_BIND:
	case SCN_V_STREAM_CONNECT:
		nic = scn_rt_nic(r, c->nic);
		if (!nic) {
			scn_fail(r, st, "%s is not a NIC of this scenario", c->nic);
			return -ENOENT;
		}
		if (c->verb == SCN_V_STREAM_BIND)
			snprintf(line, size, "stream-bind %s %s %u", c->sock, nic->addr_str,
				 c->port);
		else
			snprintf(line, size, "stream-connect %s %s %u %s", c->sock, nic->addr_str,
				 c->port, path_word(c->path));
		break;
	case SCN_V_STREAM_LISTEN:
		snprintf(line, size, "stream-listen %s %u %s", c->sock, c->backlog,
			 path_word(c->path));
		break;
	case SCN_V_STREAM_ACCEPT:
		snprintf(line, size, "stream-accept %s %s", c->sock, st->name);
		break;
	case SCN_V_STREAM_SEND:
	case SCN_V_STREAM_RECV:
		if (range_of(r, st, &c->local, &off, &len))
			return -EINVAL;
		snprintf(line, size, "%s %s %s %llu %llu", scn_verb_name(c->verb), c->sock,
			 c->local.name, (unsigned long long)off, (unsigned long long)len);
		break;
	case SCN_V_STREAM_SHUTDOWN:
		snprintf(line, size, "stream-shutdown %s %s", c->sock,
			 c->how == SCN_SHUT_READ    ? "read"
			 : c->how == SCN_SHUT_WRITE ? "write"
						    : "both");
		break;
	case SCN_V_STREAM_CLOSE: snprintf(line, size, "stream-close %s", c->sock); break;
	default: scn_fail(r, st, "the runner does not know verb %d", (int)c->verb); return -EINVAL;
	}
	return 0;
}

/* What a successful call leaves behind: descriptors, handles, buffers. */
static void op_side_effects(struct scn_runner *r, struct scn_rt_op *op, const struct scn_reply *rep)
{
	const struct scn_call *c;
	char val[2 * SCN_RT_DESC_MAX + 8];
	struct scn_rt_buf *b;

	if (!op->st || op->st->kind != SCN_CALL)
		return;
	c = &op->st->u.call;
	switch (c->verb) {
	case SCN_V_REGISTER_RDMA:
		if (op->st->name[0] && scn_reply_get(rep, "desc", val, sizeof(val)) &&
		    !grow(&r->descs, r->ndescs, &r->cap_descs, sizeof(*r->descs))) {
			struct scn_rt_desc *d = scn_rt_desc(r, op->st->name);

			if (!d) {
				d = &r->descs[r->ndescs++];
				snprintf(d->name, sizeof(d->name), "%s", op->st->name);
			}
			d->len = unhex_blob(val, d->bytes, sizeof(d->bytes));
		}
		break;
	case SCN_V_REGISTER:
		if (op->st->name[0] && scn_reply_get(rep, "handle", val, sizeof(val)) &&
		    !grow(&r->handles, r->nhandles, &r->cap_handles, sizeof(*r->handles))) {
			struct scn_rt_handle *h = &r->handles[r->nhandles++];

			snprintf(h->name, sizeof(h->name), "%s", op->st->name);
			h->host = op->host;
			h->value = strtoull(val, NULL, 0);
		}
		break;
	case SCN_V_BUFFER:
		b = scn_rt_buf(r, c->local.name);
		if (!b && !grow(&r->bufs, r->nbufs, &r->cap_bufs, sizeof(*r->bufs)))
			b = &r->bufs[r->nbufs++];
		if (!b)
			break;
		scn_mem_forget(b);
		snprintf(b->name, sizeof(b->name), "%s", c->local.name);
		b->host = op->host;
		b->size = c->size;
		b->fill = c->fill;
		if (scn_reply_get(rep, "len", val, sizeof(val)))
			b->size = strtoull(val, NULL, 0);
		break;
	case SCN_V_MREMAP:
	case SCN_V_REALLOC:
		b = scn_rt_buf(r, c->local.name);
		if (b)
			b->size = c->size;
		break;
	default: break;
	}
}

static struct scn_rt_op *op_new(struct scn_runner *r, const struct scn_stmt *st,
				struct scn_rt_host *h, long long id)
{
	struct scn_rt_op *op;

	if (grow(&r->ops, r->nops, &r->cap_ops, sizeof(*r->ops)))
		return NULL;
	op = &r->ops[r->nops++];
	memset(op, 0, sizeof(*op));
	/* Named by what the call made (an operation, a socket, a handle ...):
	 * `wait NAME` collects it and `fault ... after NAME` waits for its end. */
	snprintf(op->name, sizeof(op->name), "%s", st->name);
	op->st = st;
	op->host = h;
	op->id = id;
	return op;
}

static bool op_settled(struct scn_runner *r, void *arg)
{
	struct scn_rt_op *op = &r->ops[(size_t)(uintptr_t)arg];

	return op->done || op->host->gone;
}

static bool op_replied(struct scn_runner *r, void *arg)
{
	struct scn_rt_op *op = &r->ops[(size_t)(uintptr_t)arg];

	return op->replied || op->host->gone;
}

static const char *result_text(const struct scn_result *res)
{
	return res->kind == SCN_RES_OK ? "ok" : res->kind == SCN_RES_ANY ? "any" : res->name;
}

/* Compare a finished operation with the result the statement wants
 * (st is the call, or the `wait` that collects it). */
static int op_check(struct scn_runner *r, const struct scn_stmt *st, struct scn_rt_op *op,
		    const struct scn_result *want)
{
	const char *got = op->code[0] ? op->code : "ok";

	op->collected = true;
	if (!op->done) {
		char how[128];

		host_settle(r, op->host);
		host_end_text(op->host, how, sizeof(how));
		scn_fail(r, st, "host %s ended before the call's result came", op->host->name);
		scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "result: %s",
				result_text(want));
		scn_outcome_add(r->out->found, sizeof(r->out->found), "host %s: %s", op->host->name,
				how);
		return -EPIPE;
	}
	if (op->bad) {
		scn_fail(r, st, "the host agent refused the request: %s", op->reply);
		return -EINVAL;
	}
	/* A stream-recv that met the end of the stream says EOF. */
	if (want->kind == SCN_RES_ANY || (want->kind == SCN_RES_OK && !op->code[0]) ||
	    ((want->kind == SCN_RES_WSA || want->kind == SCN_RES_ERRNO) &&
	     !strcmp(op->code, want->name)) ||
	    (want->kind == SCN_RES_EOF && !strcmp(op->code, "EOF")))
		return 0;
	if (!strcmp(got, "EOF"))
		got = "eof";
	scn_fail(r, st, "%s: the call returned %s, not %s", op->host->name, got, result_text(want));
	scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "result: %s", result_text(want));
	scn_outcome_add(r->out->found, sizeof(r->out->found), "result: %s%s%s", got,
			op->reply[0] ? " " : "", op->reply);
	return -EINVAL;
}

/* Whether an `unchanged` expectation of the script names buffer name: a
 * copy of a buffer is of use to those only, and reading one (a MiB takes
 * a thousand peeks) would slow every large receive down. */
static bool unchanged_wanted(const struct scn_runner *r, const char *name)
{
	for (size_t i = 0; i < r->script->nstmts; i++) {
		const struct scn_stmt *st = &r->script->stmts[i];

		if (st->kind == SCN_EXPECT_MEM && st->u.mem.check == SCN_MEM_UNCHANGED &&
		    !strcmp(st->u.mem.range.name, name))
			return true;
	}
	return false;
}

/*
 * After a call ended: when it was one that writes into a buffer of its own
 * host (recv, read, madvise, mmap, mremap, realloc and stream-recv), keep a
 * copy of what it may have written, which `unchanged` wants from then on.
 */
static void snapshot_written(struct scn_runner *r, const struct scn_rt_op *op)
{
	const struct scn_call *c = &op->st->u.call;
	struct scn_rt_buf *b = scn_rt_buf(r, c->local.name);
	uint64_t off = 0, len;

	if (!op->done || op->bad || !b || b->host != op->host || !unchanged_wanted(r, b->name))
		return;
	switch (c->verb) {
	case SCN_V_RECV:
	case SCN_V_STREAM_RECV:
	case SCN_V_READ:
	case SCN_V_MADVISE:
		if (range_of(r, NULL, &c->local, &off, &len))
			return;
		if (c->verb == SCN_V_READ && c->size && c->size < b->size - off)
			len = c->size;
		break;
	case SCN_V_MMAP:
	case SCN_V_MREMAP:
	case SCN_V_REALLOC: len = b->size; break;
	default: return;
	}
	scn_mem_snapshot(r, op->st, b, off, len);
}

/* Fail step st: host h has ended and can make no call; how it ended is
 * waited for (bounded) and said.  -EPIPE. */
static int host_ended_fail(struct scn_runner *r, const struct scn_stmt *st, struct scn_rt_host *h)
{
	char how[128];

	host_settle(r, h);
	host_end_text(h, how, sizeof(how));
	scn_fail(r, st, "host %s has ended (%s): it can make no call", h->name, how);
	return -EPIPE;
}

static int call_step(struct scn_runner *r, const struct scn_stmt *st)
{
	const struct scn_call *c = &st->u.call;
	struct scn_rt_host *h = scn_rt_host(r, c->host), *child;
	char line[SCN_AGENT_LINE_MAX];
	struct scn_agent *ca = NULL;
	struct scn_rt_op *op;
	long long id;
	size_t i;
	int rc;

	if (!h || !h->agent) {
		scn_fail(r, st, "%s is not a running host", c->host);
		return -ENOENT;
	}
	if (h->gone)
		return host_ended_fail(r, st, h);
	if (c->verb == SCN_V_FORK) {
		id = scn_agent_fork(h->agent, &ca);
		if (id > 0) {
			child = host_new(r, st->name, h->nic);
			if (!child) {
				scn_agent_close(ca, AGENT_CLOSE_MS);
				id = -ENOMEM;
			} else {
				child->agent = ca;
				child->parent = h;
				child->fork_id = id;
			}
		}
	} else {
		if (call_line(r, st, line, sizeof(line)))
			return -EINVAL;
		id = scn_agent_request(h->agent, "%s", line);
	}
	/* A host that ended since the last step (its channel not yet seen
	 * closed) refuses the call: say how it ended, as for one seen gone. */
	if (id == -EPIPE || id == -ECONNRESET)
		return host_ended_fail(r, st, h);
	if (id < 0) {
		scn_fail(r, st, "cannot send the call to host %s: %s", h->name, strerror((int)-id));
		return (int)id;
	}
	op = op_new(r, st, h, id);
	if (!op)
		return -ENOMEM;
	i = (size_t)(op - r->ops);
	/* Fork and `&` calls end their step with the first reply; the others
	 * wait for the result. */
	rc = scn_loop_until(r, c->verb == SCN_V_FORK || st->async ? op_replied : op_settled,
			    (void *)(uintptr_t)i, scn_step_deadline(r, st));
	op = &r->ops[i];
	if (rc)
		return rc;
	if (c->verb == SCN_V_FORK) {
		if (op->done && (op->bad || op->code[0]))
			return op_check(r, st, op, &st->result);
		return 0;
	}
	if (st->async) {
		if (op->bad)
			return op_check(r, st, op, &st->result);
		return 0;
	}
	rc = op_check(r, st, op, &st->result);
	if (!rc)
		snapshot_written(r, op);
	return rc;
}

/* ---- Other steps ------------------------------------------------------------------ */

static int desc_step(struct scn_runner *r, const struct scn_stmt *st)
{
	const struct scn_desc *dd = &st->u.desc;
	struct scn_rt_desc *base = scn_rt_desc(r, dd->base), *d;
	struct nicsim_rdma_desc v;
	struct scn_nicd *nic;
	uint64_t x;

	if (!base) {
		scn_fail(r, st, "%s is not a descriptor made by an earlier step", dd->base);
		return -ENOENT;
	}
	if (grow(&r->descs, r->ndescs, &r->cap_descs, sizeof(*r->descs)))
		return -ENOMEM;
	base = scn_rt_desc(r, dd->base);
	d = scn_rt_desc(r, st->name);
	if (!d) {
		d = &r->descs[r->ndescs++];
		snprintf(d->name, sizeof(d->name), "%s", st->name);
	}
	if (d != base)
		memcpy(d->bytes, base->bytes, sizeof(d->bytes)), d->len = base->len;
	if (dd->field == SCN_DF_TRUNCATED) {
		d->len = dd->value < d->len ? (size_t)dd->value : d->len;
		return 0;
	}
	memset(&v, 0, sizeof(v));
	memcpy(&v, d->bytes, d->len < sizeof(v) ? d->len : sizeof(v));
#define SCN_SET(field)                                                                        \
	do {                                                                                  \
		x = (uint64_t)v.field;                                                        \
		x = !dd->relative ? dd->value : dd->negative ? x - dd->value : x + dd->value; \
		v.field = (__typeof__(v.field))x;                                             \
	} while (0)
	switch (dd->field) {
	case SCN_DF_RKEY: SCN_SET(rkey); break;
	case SCN_DF_VA: SCN_SET(va); break;
	case SCN_DF_LEN: SCN_SET(len); break;
	case SCN_DF_MAGIC: SCN_SET(magic); break;
	case SCN_DF_VERSION: SCN_SET(version); break;
	case SCN_DF_ACCESS: SCN_SET(access); break;
	case SCN_DF_NIC:
		nic = dd->nic[0] ? scn_rt_nic(r, dd->nic) : NULL;
		if (nic)
			v.nic_addr = nic->addr;
		else
			SCN_SET(nic_addr);
		break;
	default: break;
	}
#undef SCN_SET
	memcpy(d->bytes, &v, sizeof(v));
	if (d->len < sizeof(v))
		d->len = sizeof(v);
	return 0;
}

static int nic_step(struct scn_runner *r, const struct scn_stmt *st)
{
	struct scn_nicd *n = scn_rt_nic(r, st->u.target);
	char why[SCN_WHY_MAX];
	unsigned renewals;
	int rc;

	if (!n) {
		scn_fail(r, st, "%s is not a NIC of this scenario", st->u.target);
		return -ENOENT;
	}
	switch (st->kind) {
	case SCN_KILL_NIC: rc = scn_topo_nic_signal(&r->topo, n, SIGKILL); break;
	case SCN_STOP_NIC: rc = scn_topo_nic_signal(&r->topo, n, SIGSTOP); break;
	case SCN_CONT_NIC: rc = scn_topo_nic_signal(&r->topo, n, SIGCONT); break;
	default:
		if (n->pid > 0 && !scn_topo_nic_reap(n)) {
			scn_fail(r, st, "NIC %s is still running: `kill nic %s` first", n->name,
				 n->name);
			return -EBUSY;
		}
		renewals = r->topo.fab_renewals;
		scn_fault_rebase(r, false);
		rc = scn_topo_nic_path_check(&r->topo, r->opts->dir, n->addr_str, why, sizeof(why));
		if (!rc)
			rc = scn_topo_nic_start(&r->topo, n, why, sizeof(why));
		if (rc) {
			scn_fail(r, st, "%s", why);
			return rc;
		}
		if (r->topo.fab_renewals != renewals)
			scn_fault_rebase(r, true);
		return 0;
	}
	if (rc)
		scn_fail(r, st, "NIC %s is not running (nicsimd exited)", n->name);
	return rc;
}

static int kill_step(struct scn_runner *r, const struct scn_stmt *st)
{
	struct scn_rt_host *h = scn_rt_host(r, st->u.kill.target);
	struct scn_rt_prog *p = scn_rt_prog(r, st->u.kill.target);

	if (h) {
		if (!h->gone && h->agent && scn_agent_kill(h->agent, SIGKILL)) {
			scn_fail(r, st, "cannot kill host %s", h->name);
			return -ESRCH;
		}
		h->killed = true;
		return 0;
	}
	if (p && p->started && !p->exited) {
		kill(-p->pid, st->u.kill.signal ? st->u.kill.signal : SIGKILL);
		p->killed = true;
		return 0;
	}
	scn_fail(r, st, "%s is not a running host or program", st->u.kill.target);
	return -ESRCH;
}

static int wait_op_step(struct scn_runner *r, const struct scn_stmt *st)
{
	struct scn_rt_op *op = scn_rt_op(r, st->u.target);
	size_t i;
	int rc;

	if (!op) {
		scn_fail(r, st, "%s is not an operation started earlier", st->u.target);
		return -ENOENT;
	}
	i = (size_t)(op - r->ops);
	rc = scn_loop_until(r, op_settled, (void *)(uintptr_t)i, scn_step_deadline(r, st));
	if (rc)
		return rc;
	rc = op_check(r, st, &r->ops[i], &st->result);
	if (!rc)
		snapshot_written(r, &r->ops[i]);
	return rc;
}

struct exit_wait {
	struct scn_rt_host *h;
	struct scn_rt_prog *p;
};

static bool exited(struct scn_runner *r, void *arg)
{
	struct exit_wait *w = arg;

	(void)r;
	return w->h ? w->h->exited || (w->h->parent && w->h->parent->exited) : w->p->exited;
}

static int wait_exit_step(struct scn_runner *r, const struct scn_stmt *st)
{
	struct exit_wait w = {scn_rt_host(r, st->u.exit.target), scn_rt_prog(r, st->u.exit.target)};
	int rc, status;

	if (!w.h && !w.p) {
		scn_fail(r, st, "%s is not a host or a program", st->u.exit.target);
		return -ENOENT;
	}
	if (w.p && !w.p->started) {
		scn_fail(r, st, "program %s was never started", st->u.exit.target);
		return -ESRCH;
	}
	rc = scn_loop_until(r, exited, &w, scn_step_deadline(r, st));
	if (rc)
		return rc;
	if (w.p)
		w.p->exit_waited = true;
	status = w.h ? w.h->status : w.p->status;
	if (!st->u.exit.has_code)
		return 0;
	if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == st->u.exit.code)
		return 0;
	scn_fail(r, st, "%s did not exit with status %d", st->u.exit.target, st->u.exit.code);
	scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "exit: %d", st->u.exit.code);
	if (w.p) {
		char how[128];

		prog_end_text(w.p, how, sizeof(how));
		scn_outcome_add(r->out->found, sizeof(r->out->found), "program %s: %s",
				w.p->decl->name, how);
	} else if (status < 0)
		scn_outcome_add(r->out->found, sizeof(r->out->found), "exit: unknown");
	else if (WIFEXITED(status))
		scn_outcome_add(r->out->found, sizeof(r->out->found), "exit: %d",
				WEXITSTATUS(status));
	else
		scn_outcome_add(r->out->found, sizeof(r->out->found), "killed by signal %d (SIG%s)",
				WIFSIGNALED(status) ? WTERMSIG(status) : status,
				sig_abbrev(WIFSIGNALED(status) ? WTERMSIG(status) : status));
	return -EINVAL;
}

/* Whether program p wrote a line that step st looks for: a line matched as
 * it arrived (w), the line not ended yet, or, for a match across the
 * pieces of a line too long to match whole, what is kept. */
static bool output_has(struct scn_rt_prog *p, const struct scn_stmt *st, bool kept,
		       uint64_t deadline)
{
	struct scn_rt_watch *w = prog_watch_of(p, st);
	const struct scn_output *o = &st->u.output;

	if (!w)
		return text_has(p->part, p->partlen, o, deadline) ||
		       (p->out && text_has(p->out, p->outlen, o, deadline)) ||
		       (p->tail && text_has(p->tail, p->taillen, o, deadline));
	if (w->hit || text_match(p->part, p->partlen, o, &w->re, deadline))
		return true;
	return kept && ((p->out && text_match(p->out, p->outlen, o, &w->re, deadline)) ||
			(p->tail && text_match(p->tail, p->taillen, o, &w->re, deadline)));
}

static bool output_seen(struct scn_runner *r, void *arg)
{
	const struct scn_stmt *st = arg;
	struct scn_rt_prog *p = scn_rt_prog(r, st->u.output.target);

	/* Each line was matched as it arrived: only the one not ended yet is
	 * left to look at.  Once the program has exited, what it wrote is all
	 * in (the loop reads its pipe dry when it sees the exit): the line
	 * can no longer come, whatever processes it left behind still hold
	 * its pipe. */
	return output_has(p, st, false, r->deadline) || p->exited;
}

static int output_step(struct scn_runner *r, const struct scn_stmt *st)
{
	struct scn_rt_prog *p = scn_rt_prog(r, st->u.output.target);
	const char *tail;
	uint64_t t0 = scn_now_ns();
	char what[SCN_TEXT_MAX + 16], how[128];
	struct scn_rt_watch *w;
	size_t len;
	bool found, timed_out = false;
	int rc;

	if (!p || !p->started) {
		scn_fail(r, st, "%s is not a program that was started", st->u.output.target);
		return -ENOENT;
	}
	w = prog_watch_of(p, st);
	if (st->u.output.regex && (!w || !w->compiled)) {
		if (scn_ere_backref(st->u.output.text))
			scn_fail(r, st,
				 "regular expression /%s/: back-references (\\1 to \\9) are not "
				 "allowed: their matching time has no bound",
				 st->u.output.text);
		else
			scn_fail(r, st, "bad regular expression /%s/", st->u.output.text);
		return -EINVAL;
	}
	if (st->kind == SCN_WAIT_OUTPUT) {
		rc = scn_loop_until(r, output_seen, (void *)st, scn_step_deadline(r, st));
		if (rc && rc != -ETIMEDOUT)
			return rc;
		timed_out = rc == -ETIMEDOUT;
	} else if (p->out_fd >= 0) {
		prog_read(p);
	}
	found = output_has(p, st, true, r->deadline);
	if (found)
		return 0;
	if (scn_now_ns() >= r->deadline)
		return -ETIMEDOUT;
	snprintf(what, sizeof(what), "%s %s%s%s", st->u.output.regex ? "matching" : "containing",
		 st->u.output.regex ? "/" : "\"", st->u.output.text,
		 st->u.output.regex ? "/" : "\"");
	prog_end_text(p, how, sizeof(how));
	if (timed_out)
		scn_fail(r, st, "timed out after %.3f s waiting for program %s to write a line %s",
			 (double)(scn_now_ns() - t0) / 1e9, p->decl->name, what);
	else if (st->kind == SCN_WAIT_OUTPUT && p->exited)
		scn_fail(r, st, "program %s %s before writing a line %s", p->decl->name, how, what);
	else
		scn_fail(r, st, "program %s wrote no line %s", p->decl->name, what);
	scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "output: %s", st->u.output.text);
	if (p->exited) {
		scn_outcome_add(r->out->found, sizeof(r->out->found), "program %s: %s",
				p->decl->name, how);
		p->exit_waited = true; /* said here: not again with the other exits */
	}
	tail = p->taillen ? p->tail : p->out ? p->out : "";
	len = strlen(tail);
	if (len > 1500)
		tail += len - 1500;
	if (p->dropped)
		scn_outcome_add(r->out->found, sizeof(r->out->found),
				"output: every line was looked at as it came; %llu bytes of its "
				"middle are not kept (below, the end of the last MiB; the log has "
				"up to 16 MiB)",
				(unsigned long long)p->dropped);
	scn_outcome_add(r->out->found, sizeof(r->out->found), "output%s: %s",
			p->taillen || len > 1500 ? " (its end)" : "", *tail ? tail : "(nothing)");
	return -EINVAL;
}

/* Run one step.  0, or an error with the outcome failed (or -ETIMEDOUT /
 * -EINTR for the caller to report). */
static int step(struct scn_runner *r, const struct scn_stmt *st)
{
	switch (st->kind) {
	case SCN_CALL: return call_step(r, st);
	case SCN_DESC: return desc_step(r, st);
	case SCN_START: {
		struct scn_rt_prog *p = scn_rt_prog(r, st->u.target);

		if (!p) {
			scn_fail(r, st, "%s is not a program of this scenario", st->u.target);
			return -ENOENT;
		}
		return prog_start(r, p, st);
	}
	case SCN_KILL: return kill_step(r, st);
	case SCN_KILL_NIC:
	case SCN_RESTART_NIC:
	case SCN_STOP_NIC:
	case SCN_CONT_NIC: return nic_step(r, st);
	case SCN_FAULT: return scn_fault_step(r, st);
	case SCN_HEAL: return scn_fault_heal_step(r, st);
	case SCN_MARK: return scn_rt_mark_take(r, st->name, st);
	case SCN_WAIT_OP: return wait_op_step(r, st);
	case SCN_WAIT_EXIT: return wait_exit_step(r, st);
	case SCN_WAIT_OUTPUT:
	case SCN_EXPECT_OUTPUT: return output_step(r, st);
	default: return scn_expect_step(r, st);
	}
}

/* What a step that timed out was waiting for, in words. */
static void pending_what(const struct scn_stmt *st, char *buf, size_t size)
{
	switch (st->kind) {
	case SCN_CALL:
		snprintf(buf, size, "the result of %s's call %s", st->u.call.host,
			 scn_verb_name(st->u.call.verb));
		break;
	case SCN_WAIT_OP: snprintf(buf, size, "operation %s to end", st->u.target); break;
	case SCN_WAIT_EXIT: snprintf(buf, size, "%s to exit", st->u.exit.target); break;
	case SCN_WAIT_OUTPUT:
		snprintf(buf, size, "a line of %s's output with \"%s\"", st->u.output.target,
			 st->u.output.text);
		break;
	case SCN_WAIT_COUNTER:
		snprintf(buf, size, "counter %s.%s", st->u.counter.nic, st->u.counter.counter);
		break;
	case SCN_WAIT_FRAME:
		snprintf(buf, size, "a frame %s -> %s%s%s%s%s", st->u.frames.filter.link.src,
			 st->u.frames.filter.link.dst,
			 st->u.frames.filter.opcode_name[0] ? " opcode " : "",
			 st->u.frames.filter.opcode_name,
			 st->u.frames.filter.syndrome_name[0] ? " syndrome " : "",
			 st->u.frames.filter.syndrome_name);
		break;
	default: snprintf(buf, size, "the step to end"); break;
	}
}

/* ---- One scenario ------------------------------------------------------------ */

static uint64_t random_seed(void)
{
	uint64_t seed;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
		seed = scn_now_ns() ^ (uint64_t)getpid() << 32;
	return seed;
}

static int topo_setup(struct scn_runner *r)
{
	const struct scn_script *s = r->script;
	char why[SCN_WHY_MAX];
	size_t i;
	int rc;

	r->topo.nics = calloc(s->nnics ? s->nnics : 1, sizeof(*r->topo.nics));
	r->progs = calloc(s->nprograms ? s->nprograms : 1, sizeof(*r->progs));
	/* Every host the script can make: declared ones and one per fork. */
	r->cap_hosts = s->nhosts;
	for (i = 0; i < s->nstmts; i++)
		r->cap_hosts +=
		    s->stmts[i].kind == SCN_CALL && s->stmts[i].u.call.verb == SCN_V_FORK;
	r->hosts = calloc(r->cap_hosts ? r->cap_hosts : 1, sizeof(*r->hosts));
	if (!r->topo.nics || !r->progs || !r->hosts)
		return -ENOMEM;
	rc = scn_topo_make_dir(&r->topo, r->opts->dir, why, sizeof(why));
	if (rc) {
		scn_fail(r, NULL, "%s", why);
		return rc;
	}
	snprintf(r->out->work_dir, sizeof(r->out->work_dir), "%s", r->topo.dir);
	for (i = 0; i < s->nnics; i++) {
		const struct scn_stmt *st = s->nics[i];
		struct scn_nicd *n = &r->topo.nics[r->topo.nnics++];

		n->name = st->name;
		n->addr = st->u.nic.addr;
		n->pidfd = -1;
		fab_addr_format(n->addr, n->addr_str, sizeof(n->addr_str));
		if (st->u.nic.tpt_capacity)
			snprintf(n->tpt_capacity, sizeof(n->tpt_capacity), "%u",
				 st->u.nic.tpt_capacity);
		if (st->u.nic.max_reg)
			snprintf(n->max_reg, sizeof(n->max_reg), "%llu",
				 (unsigned long long)st->u.nic.max_reg);
		n->no_mw = st->u.nic.no_windows;
		n->no_rdma_read = st->u.nic.no_rdma_read;
		for (size_t k = 0; k < NIC_TIMER_OPTS; k++)
			if (st->u.nic.timer[k] >= 0)
				snprintf(n->timer[k], sizeof(n->timer[k]), "%d",
					 st->u.nic.timer[k]);
		rc = scn_topo_nic_path_check(&r->topo, r->opts->dir, n->addr_str, why, sizeof(why));
		if (!rc)
			rc = scn_topo_nic_start(&r->topo, n, why, sizeof(why));
		if (rc) {
			scn_fail(r, st, "%s", why);
			return rc;
		}
	}
	rc = scn_links_setup(r);
	if (rc)
		return rc;
	/* `capture off`: no tap at all, so no capture.pcapng, no decisions.log,
	 * and no frame for `wait frame` or `expect frames` to find. */
	if (r->topo.fab && s->capture) {
		rc = scn_capture_start(&r->topo, why, sizeof(why));
		if (rc) {
			scn_fail(r, NULL, "the capture: %s", why);
			return rc;
		}
	}
	for (i = 0; i < s->nprograms; i++) {
		struct scn_rt_prog *p = &r->progs[r->nprogs++];

		p->decl = s->programs[i];
		p->nic = scn_rt_nic(r, p->decl->u.program.nic);
		p->pidfd = p->out_fd = p->log_fd = -1;
	}
	rc = prog_watches_setup(r);
	if (rc)
		return rc;
	for (i = 0; i < s->nhosts; i++) {
		rc = host_spawn(r, s->hosts[i]);
		if (rc)
			return rc;
	}
	return scn_rt_mark_take(r, "", NULL);
}

/* A process teardown waits for: an agent or a program. */
struct end_wait {
	pid_t pid;  /* the process (a program's is its group too) */
	int pidfd;  /* -1: none (then looked at every 5 ms) */
	bool child; /* ours: never reaped here, only looked at */
	bool group; /* a program: signals go to its process group */
	bool done;
};

/* Whether e's process has ended (a child: it is a zombie, not reaped). */
static bool end_seen(const struct end_wait *e)
{
	struct pollfd pf = {.fd = e->pidfd, .events = POLLIN};
	siginfo_t si;

	if (e->pidfd >= 0)
		return poll(&pf, 1, 0) == 1;
	if (e->child) {
		memset(&si, 0, sizeof(si));
		return waitid(P_PID, (id_t)e->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 ||
		       si.si_pid == e->pid;
	}
	return kill(e->pid, 0) < 0 && errno == ESRCH;
}

/* Wait until every process of e[0..n) has ended or the deadline passed:
 * one deadline for all, so that n stuck processes cost it once. */
static void ends_wait(struct end_wait *e, size_t n, uint64_t deadline)
{
	struct pollfd *pf = calloc(n ? n : 1, sizeof(*pf));
	uint64_t now;
	size_t np, i;
	bool blind;
	int ms;

	for (;;) {
		np = 0;
		blind = false;
		for (i = 0; i < n; i++) {
			if (e[i].done || (e[i].done = end_seen(&e[i])))
				continue;
			if (e[i].pidfd >= 0 && pf)
				pf[np++] = (struct pollfd){.fd = e[i].pidfd, .events = POLLIN};
			else
				blind = true;
		}
		now = scn_now_ns();
		if ((!np && !blind) || now >= deadline)
			break;
		ms = (int)((deadline - now) / 1000000 + 1);
		if (blind && ms > 5)
			ms = 5;
		if (poll(pf, np, ms) < 0 && errno != EINTR)
			break;
	}
	free(pf);
}

/*
 * End every process the scenario started, by pid, whatever state it is in,
 * all at once: every agent's channel is closed and every program's group
 * gets SIGTERM, then one deadline (AGENT_CLOSE_MS, PROG_TERM_MS) for all
 * of them, then SIGKILL for what is left; then the NICs, the same way
 * (scn_topo_destroy).  Stuck processes cost one budget, however many.
 */
static void teardown(struct scn_runner *r, bool keep)
{
	struct end_wait *e = calloc(r->nhosts + r->nprogs + 1, sizeof(*e));
	size_t i, n = 0;
	uint64_t budget = AGENT_CLOSE_MS > PROG_TERM_MS ? AGENT_CLOSE_MS : PROG_TERM_MS;

	/* A NIC stopped by `stop nic` would hold its hosts' clean-up back. */
	for (i = 0; i < r->topo.nnics; i++)
		if (r->topo.nics[i].stopped && r->topo.nics[i].pid > 0)
			scn_topo_nic_signal(&r->topo, &r->topo.nics[i], SIGCONT);
	for (i = 0; i < r->nhosts; i++) {
		struct scn_rt_host *h = &r->hosts[i];

		scn_agent_hangup(h->agent);
		if (!e || !h->agent || h->pid <= 0)
			continue;
		if (h->pidfd < 0 && !h->exited)
			h->pidfd = scn_pidfd_open(h->pid);
		e[n++] = (struct end_wait){
		    .pid = h->pid, .pidfd = h->pidfd, .child = !h->parent, .done = h->exited};
	}
	for (i = 0; i < r->nprogs; i++) {
		struct scn_rt_prog *p = &r->progs[i];

		if (!p->started || p->pid <= 0 || p->exited)
			continue;
		kill(-p->pid, SIGCONT);
		kill(-p->pid, SIGTERM);
		if (e)
			e[n++] = (struct end_wait){
			    .pid = p->pid, .pidfd = p->pidfd, .child = true, .group = true};
	}
	ends_wait(e, n, scn_now_ns() + budget * 1000000ull);
	for (i = 0; i < n; i++)
		if (!e[i].done)
			kill(e[i].group ? -e[i].pid : e[i].pid, SIGKILL);
	ends_wait(e, n, scn_now_ns() + 10000000000ull);
	free(e);
	/* Every one has ended (or outlived SIGKILL for 10 s): reap them.
	 * Forked hosts first: their channels are ours too. */
	for (i = r->nhosts; i-- > 0;) {
		if (r->hosts[i].pidfd >= 0)
			close(r->hosts[i].pidfd);
		r->hosts[i].pidfd = -1;
		scn_agent_close(r->hosts[i].agent, 0);
		r->hosts[i].agent = NULL;
	}
	for (i = 0; i < r->nprogs; i++)
		prog_end(r, &r->progs[i]);
	scn_topo_destroy(&r->topo, keep);
}

static void free_runner(struct scn_runner *r)
{
	for (size_t i = 0; i < r->nprogs; i++) {
		free(r->progs[i].out);
		free(r->progs[i].tail);
		for (size_t k = 0; k < r->progs[i].nwatches; k++)
			if (r->progs[i].watches[k].compiled)
				regfree(&r->progs[i].watches[k].re);
		free(r->progs[i].watches);
	}
	for (size_t i = 0; i < r->nmarks; i++) {
		free(r->marks[i].stats);
		free(r->marks[i].have);
	}
	free(r->marks);
	free(r->progs);
	free(r->hosts);
	free(r->ops);
	free(r->descs);
	for (size_t i = 0; i < r->nbufs; i++)
		scn_mem_forget(&r->bufs[i]);
	free(r->bufs);
	free(r->handles);
	free(r->faults);
	for (size_t i = 0; i < r->nlinks; i++)
		free(r->links[i].armed);
	free(r->links);
	free(r->topo.nics);
	free(r->prog_path);
}

static void record_step(struct scn_runner *r, const struct scn_stmt *st, uint64_t t_start, bool ok)
{
	struct scn_outcome *o = r->out;
	struct scn_step_rec *rec;
	uint64_t now = scn_now_ns();

	o->nsteps++;
	if (o->nrecs >= SCN_STEPS_MAX)
		return;
	rec = &o->recs[o->nrecs++];
	if (st->loc.file && strcmp(st->loc.file, r->script->path)) {
		const char *base = strrchr(st->loc.file, '/');

		snprintf(rec->at, sizeof(rec->at), "%s:%u", base ? base + 1 : st->loc.file,
			 st->loc.line);
	} else {
		snprintf(rec->at, sizeof(rec->at), "line %u", st->loc.line);
	}
	rec->ok = ok;
	rec->start_ns = t_start - r->t0;
	rec->dur_ns = now - t_start;
	snprintf(rec->text, sizeof(rec->text), "%s", st->text ? st->text : "");
}

/* The artefacts of a kept run directory, by name, sorted: what a report
 * names and JUnit attaches. */
static void list_files(struct scn_outcome *o)
{
	struct dirent **names;
	size_t len = 0;
	int n;

	n = scandir(o->run_dir, &names, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		const char *d = names[i]->d_name;
		size_t l = strlen(d);

		if (((l > 4 && !strcmp(d + l - 4, ".log")) ||
		     (l > 7 && !strcmp(d + l - 7, ".pcapng"))) &&
		    len + l + 2 < sizeof(o->files))
			len += (size_t)snprintf(o->files + len, sizeof(o->files) - len, "%s%s",
						len ? " " : "", d);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

/* A failed scenario: say which programs ended on their own without a
 * step waiting for it, and how, since a wait that ran out (a counter, a
 * frame) may have been waiting for what such a program would have done. */
static void note_prog_exits(struct scn_runner *r)
{
	char how[128], at[64];

	for (size_t i = 0; i < r->nprogs; i++) {
		const struct scn_rt_prog *p = &r->progs[i];

		if (!p->started || !p->exited || p->killed || p->exit_waited)
			continue;
		prog_end_text(p, how, sizeof(how));
		if (p->exit_during)
			snprintf(at, sizeof(at), ", while line %u ran", p->exit_during->loc.line);
		else
			at[0] = '\0';
		scn_outcome_add(r->out->detail, sizeof(r->out->detail),
				"program %s %s %.3f s into the scenario%s", p->decl->name, how,
				(double)(p->exit_ns - r->t0) / 1e9, at);
	}
}

/* Add directory dir (the part of path before its last '/', when
 * dir_of) to the colon-separated list list[0..size), once. */
static void path_add(char *list, size_t size, const char *path, bool dir_of)
{
	char dir[PATH_MAX], real[PATH_MAX];
	const char *slash = dir_of ? strrchr(path, '/') : NULL;
	size_t len = strlen(list), n;
	const char *p;

	if (dir_of && !slash)
		return;
	snprintf(dir, sizeof(dir), "%.*s", dir_of ? (int)(slash - path) : (int)strlen(path), path);
	if (!dir[0] || !realpath(dir, real))
		return;
	n = strlen(real);
	for (p = list; *p; p += strcspn(p, ":"), p += *p == ':')
		if (strcspn(p, ":") == n && !strncmp(p, real, n))
			return;
	if (len + n + 2 < size)
		snprintf(list + len, size - len, "%s%s", len ? ":" : "", real);
}

/*
 * The PATH of the scenario's programs: the directory of the running nicsim,
 * then the agent's and nicsimd's when they are elsewhere, before the
 * runner's own PATH, so that a command finds the binaries of the build or
 * installation that runs it (nicsim-pingpong, nicsim ...) first.
 */
static char *prog_path(const char *exe_dir, const char *agent)
{
	char dirs[3 * PATH_MAX + 3] = "", nicsimd[PATH_MAX], unused[PATH_MAX], *out;
	const char *old = getenv("PATH");
	size_t size;

	if (exe_dir[0])
		path_add(dirs, sizeof(dirs), exe_dir, false);
	path_add(dirs, sizeof(dirs), agent, true);
	if (!cli_find_program("nicsimd", nicsimd, sizeof(nicsimd), unused, sizeof(unused)))
		path_add(dirs, sizeof(dirs), nicsimd, true);
	if (!old || !*old)
		old = "/usr/local/bin:/usr/bin:/bin";
	size = strlen(dirs) + strlen(old) + 2;
	out = malloc(size);
	if (out)
		snprintf(out, size, "%s%s%s", dirs, dirs[0] ? ":" : "", old);
	return out;
}

/*
 * Before each step: a signal that came (SIGINT, SIGTERM, SIGHUP) or the
 * scenario's budget spent ends the run here, so that no number of steps
 * that do not wait (faults, marks) runs past --timeout or past a signal.
 * 0, -EINTR or -ETIMEDOUT.
 */
static int step_gate(struct scn_runner *r)
{
	struct signalfd_siginfo si;

	if (!r->interrupted && r->sigfd >= 0 &&
	    read(r->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		r->interrupted = true;
		r->signo = (int)si.ssi_signo;
	}
	if (r->interrupted)
		return -EINTR;
	return scn_now_ns() >= r->deadline ? -ETIMEDOUT : 0;
}

/* Run one parsed and checked scenario in this process; fills out. */
static void run_scenario(const struct scn_script *s, const struct scn_run_opts *opts,
			 struct scn_outcome *out, int sigfd)
{
	struct scn_runner r;
	char what[SCN_OUT_TEXT], exe_dir[PATH_MAX] = "";
	uint64_t budget;
	bool keep;
	size_t i;
	int rc = 0;

	memset(&r, 0, sizeof(r));
	r.script = s;
	r.opts = opts;
	r.out = out;
	r.sigfd = sigfd;
	r.topo.capture.wake_fd = -1;
	r.slow = opts->slow > 0 ? opts->slow : 1.0;
	r.topo.capture_max = opts->capture_max;
	out->seed = r.topo.seed = opts->seed_set ? opts->seed
				  : s->seed_set  ? s->seed
						 : random_seed();
	snprintf(out->title, sizeof(out->title), "%s", s->title);
	r.t0 = scn_now_ns();
	budget = opts->timeout_s > 0 ? (uint64_t)(opts->timeout_s * 1e9) : s->timeout_ns;
	r.deadline = scn_after_ns(r.t0, budget, r.slow);
	if (opts->agent)
		snprintf(r.agent_path, sizeof(r.agent_path), "%s", opts->agent);
	else if (cli_find_program(AGENT_NAME, r.agent_path, sizeof(r.agent_path), exe_dir,
				  sizeof(exe_dir)))
		snprintf(r.agent_path, sizeof(r.agent_path), "%s", AGENT_NAME);
	if (!exe_dir[0])
		cli_find_program(AGENT_NAME, what, sizeof(what), exe_dir, sizeof(exe_dir));
	r.prog_path = prog_path(exe_dir, r.agent_path);

	rc = topo_setup(&r);
	for (i = 0; !rc && i < s->nstmts; i++) {
		const struct scn_stmt *st = &s->stmts[i];
		uint64_t t_start = scn_now_ns();

		if (scn_stmt_is_setup(st->kind))
			continue;
		r.cur = st;
		rc = step_gate(&r);
		if (rc == -ETIMEDOUT) {
			scn_fail(&r, st, "the scenario's timeout (%.3f s) ran out before this step",
				 (double)budget * r.slow / 1e9);
			record_step(&r, st, t_start, false);
			break;
		}
		if (!rc)
			rc = step(&r, st);
		if (rc == -ETIMEDOUT) {
			pending_what(st, what, sizeof(what));
			if (scn_now_ns() >= r.deadline)
				scn_fail(&r, st,
					 "the scenario's timeout (%.3f s) ran out waiting for %s",
					 (double)budget * r.slow / 1e9, what);
			else
				scn_fail(&r, st, "timed out after %.3f s waiting for %s",
					 (scn_now_ns() - t_start) / 1e9, what);
		} else if (rc == -EINTR) {
			scn_fail(&r, st, "interrupted (SIG%s)", sig_abbrev(r.signo));
		} else if (rc && out->status == SCN_PASSED) {
			scn_fail(&r, st, "the step failed: %s", strerror(-rc));
		}
		record_step(&r, st, t_start, !rc && out->status == SCN_PASSED);
		if (out->status != SCN_PASSED)
			rc = rc ? rc : -EINVAL;
	}
	if (out->status != SCN_PASSED && !r.interrupted)
		note_prog_exits(&r);
	scn_fault_finish(&r, !rc && out->status == SCN_PASSED);
	/* Kept on a failure, but not when the user stopped the run: that is
	 * no finding, and a signal asks for everything to go. */
	keep = opts->keep || (out->status != SCN_PASSED && !r.interrupted);
	if (keep)
		snprintf(out->run_dir, sizeof(out->run_dir), "%s", r.topo.dir);
	else if (r.interrupted && r.topo.dir[0])
		scn_outcome_add(out->notes, sizeof(out->notes),
				"interrupted: the run directory %s is removed (--keep keeps it)",
				r.topo.dir);
	teardown(&r, keep);
	/* Read once the capture thread has ended (teardown joined it). */
	if (r.topo.capture.pcap_cut) {
		uint64_t max = r.topo.capture.pcap_max, cut_ns = r.topo.capture.pcap_cut_ns;

		scn_outcome_add(out->notes, sizeof(out->notes),
				"capture.pcapng was cut at %llu %s (--capture-max): %llu frames "
				"from %.3f s on are not in it (wait frame and expect frames saw "
				"them)",
				(unsigned long long)(max % (1u << 20) ? max : max >> 20),
				max % (1u << 20) ? "bytes" : "MiB",
				(unsigned long long)r.topo.capture.pcap_cut,
				cut_ns > r.t0 ? (cut_ns - r.t0) / 1e9 : 0.0);
	}
	if (keep)
		list_files(out);
	free_runner(&r);
	out->elapsed_ns = scn_now_ns() - r.t0;
}

/* ---- Many scenarios ------------------------------------------------------------ */

/* A scenario being run by a child process. */
struct job {
	const char *path;
	struct scn_script *script;
	struct scn_outcome *out; /* shared with the child (MAP_SHARED) */
	pid_t pid;
	int fd; /* the child's end of a pipe: end of file when it exits */
	bool running, finished, printed;
};

/* The parent of process pid, from /proc (0 if it cannot be read). */
static pid_t proc_ppid(pid_t pid)
{
	char path[64], stat[512], *close_paren;
	int ppid = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, stat, sizeof(stat) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	stat[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold anything, even ')'. */
	close_paren = strrchr(stat, ')');
	if (!close_paren || sscanf(close_paren + 1, " %*c %d", &ppid) != 1)
		return 0;
	return (pid_t)ppid;
}

/*
 * End every process still a child of this one once the scenario's own
 * clean-up is done: as a child subreaper it inherits what its programs
 * left behind, even those that left their process group (setsid), and
 * what they left in turn.  SIGKILL, then reaped, round after round until
 * none is left or ms have passed.
 */
static void end_descendants(int ms)
{
	uint64_t deadline = scn_now_ns() + (uint64_t)ms * 1000000u;
	pid_t self = getpid(), pid, last;
	struct dirent *e;
	DIR *d;
	int fd;

	for (;;) {
		last = 0;
		d = opendir("/proc");
		while (d && (e = readdir(d))) {
			pid = (pid_t)atoi(e->d_name);
			if (pid > 0 && pid != self && proc_ppid(pid) == self) {
				kill(pid, SIGKILL);
				last = pid;
			}
		}
		if (d)
			closedir(d);
		if (!last || scn_now_ns() >= deadline)
			break;
		/* The last one killed gone (its pidfd readable), within the
		 * bound, then every child that ended is reaped. */
		fd = scn_pidfd_open(last);
		if (fd >= 0) {
			struct pollfd p = {.fd = fd, .events = POLLIN};
			uint64_t now = scn_now_ns();

			poll(&p, 1, now < deadline ? (int)((deadline - now) / 1000000u) + 1 : 0);
			close(fd);
		}
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static int child_main(struct job *j, const struct scn_run_opts *opts, pid_t parent)
{
	sigset_t mask;
	int sigfd;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	/* The runner's death (SIGKILL) ends the scenario as SIGTERM does,
	 * through its clean-up.  SIGTERM is blocked here, so it arrives on
	 * sigfd; a runner that died before prctl is caught by getppid(). */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		kill(getpid(), SIGTERM);
	/* What the scenario's programs leave behind (a daemon that called
	 * setsid) is re-parented here, not to init: end_descendants ends it. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	run_scenario(j->script, opts, j->out, sigfd);
	end_descendants(DESCENDANTS_MS);
	j->out->complete = true;
	return j->out->status == SCN_PASSED ? 0 : 1;
}

static int job_start(struct job *j, const struct scn_run_opts *opts)
{
	int p[2];
	pid_t pid, parent = getpid();

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		close(p[0]);
		_exit(child_main(j, opts, parent));
	}
	close(p[1]);
	j->pid = pid;
	j->fd = p[0];
	j->running = true;
	return 0;
}

/*
 * The child that ran a scenario has exited (its pipe reached end of file).
 * One that died before the end (a crash, SIGKILL) left its report
 * unfinished: it says so, the process groups of the programs it had
 * running are killed, and the NICs it started, which are daemons of their
 * own, are stopped with `nicsim down`'s code (its agents had
 * PR_SET_PDEATHSIG); the run directory is kept.
 */
static void job_done(struct job *j)
{
	struct scn_outcome *o = j->out;
	struct cli_opts down;
	char buf[64], lock[PATH_MAX + 32];
	int status = 0;

	if (read(j->fd, buf, sizeof(buf)) > 0)
		return;
	close(j->fd);
	j->fd = -1;
	while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
		;
	j->running = false;
	j->finished = true;
	if (o->complete)
		return;
	o->status = SCN_FAILED;
	snprintf(o->message, sizeof(o->message),
		 "the process running this scenario (pid %d) ended before its end (wait status "
		 "0x%x)",
		 (int)j->pid, (unsigned)status);
	for (size_t i = 0; i < SCN_PGIDS_MAX; i++)
		if (o->pgids[i] > 0) {
			kill(-o->pgids[i], SIGCONT);
			kill(-o->pgids[i], SIGKILL);
		}
	if (!o->work_dir[0])
		return;
	memset(&down, 0, sizeof(down));
	snprintf(down.dir, sizeof(down.dir), "%s", o->work_dir);
	down.quiet = true;
	cli_down(&down);
	/* As the scenario's own teardown does: the NICs are down, so the
	 * fabric's files and the lock serve no one in the kept directory. */
	fab_destroy_files(o->work_dir);
	if (snprintf(lock, sizeof(lock), "%s/%s", o->work_dir, NIC_RUN_LOCK) < (int)sizeof(lock))
		unlink(lock);
	snprintf(o->run_dir, sizeof(o->run_dir), "%s", o->work_dir);
	list_files(o);
}

static void print_ready(struct job *jobs, size_t n, size_t *next, const struct scn_run_opts *opts,
			const struct scn_report_opts *ro)
{
	while (*next < n && jobs[*next].finished) {
		if (opts->tap)
			scn_report_tap(stdout, *next + 1, jobs[*next].out, ro);
		else
			scn_report_text(stdout, jobs[*next].out, ro);
		fflush(stdout);
		jobs[*next].printed = true;
		(*next)++;
	}
}

/* Whether --junit FILE would overwrite a scenario: one of the files to
 * run, or any existing .scn file (said on stderr). */
static bool junit_clobbers(const char *junit, const struct scn_files *l)
{
	size_t len = strlen(junit);
	struct stat js, ss;

	if (stat(junit, &js) < 0)
		return false;
	for (size_t i = 0; i < l->n; i++)
		if (!stat(l->path[i], &ss) && ss.st_dev == js.st_dev && ss.st_ino == js.st_ino) {
			fprintf(stderr,
				"nicsim scenario: --junit %s is the scenario file %s: the report "
				"would overwrite it; name another file (e.g. report.xml)\n",
				junit, l->path[i]);
			return true;
		}
	if (len >= 4 && !strcmp(junit + len - 4, ".scn")) {
		fprintf(stderr,
			"nicsim scenario: --junit %s is a scenario file: the report would "
			"overwrite it; name another file (e.g. report.xml)\n",
			junit);
		return true;
	}
	return false;
}

/* The seed a scenario is parsed with, so that ${SEED} is the seed it runs
 * with: --seed, else the file's, else a random one (scn_run_seed). */
static const struct scn_run_seed *run_seed(const struct scn_run_opts *opts,
					   struct scn_run_seed *seed)
{
	seed->given = opts->seed_set;
	seed->seed = opts->seed;
	seed->default_set = true;
	seed->seed_default = random_seed();
	return seed;
}

int scn_run(const char *const *paths, size_t npaths, const struct scn_run_opts *opts)
{
	struct scn_report_opts ro = {.verbose = opts->verbose,
				     .tap = opts->tap,
				     .junit = opts->junit,
				     .defs = opts->defs,
				     .seed_given = opts->seed_set,
				     .slow = opts->slow > 0 ? opts->slow : 1.0,
				     .timeout_s = opts->timeout_s};
	struct scn_files l = {0};
	const struct scn_outcome **outs = NULL;
	struct job *jobs = NULL;
	struct scn_diag *diag = NULL;
	sigset_t mask, old;
	struct pollfd *pf = NULL;
	size_t i, running = 0, started = 0, next = 0, jmax, nbad = 0, np;
	uint64_t t0 = scn_now_ns();
	bool interrupted = false;
	struct scn_run_seed seed;
	int rc, status = 0, sigfd = -1, signo = SIGTERM;

	jmax = opts->jobs ? opts->jobs : 1;
	diag = malloc(sizeof(*diag));
	if (!diag) {
		status = 2;
		goto out;
	}
	scn_diag_init(diag);
	rc = scn_find_files(paths, npaths, &l, diag);
	scn_diag_print(diag, stderr);
	if (rc || !l.n) {
		if (!rc)
			fprintf(stderr, "nicsim scenario: no .scn file in the paths given\n");
		status = 2;
		goto out;
	}
	if (opts->junit && junit_clobbers(opts->junit, &l)) {
		status = 2;
		goto out;
	}
	/* The report's file is checked before anything runs, not found
	 * unwritable after every scenario ran. */
	if (opts->junit) {
		char target[PATH_MAX], why[PATH_MAX + 128];
		bool in_place;

		if (scn_report_junit_target(opts->junit, target, sizeof(target), &in_place, why,
					    sizeof(why))) {
			fprintf(stderr, "nicsim scenario: %s\n", why);
			status = 2;
			goto out;
		}
	}
	jobs = calloc(l.n, sizeof(*jobs));
	outs = calloc(l.n, sizeof(*outs));
	pf = calloc(l.n + 1, sizeof(*pf));
	if (!jobs || !outs || !pf) {
		status = 2;
		goto out;
	}
	/* Every file is checked before anything starts. */
	for (i = 0; i < l.n; i++) {
		jobs[i].path = l.path[i];
		jobs[i].fd = -1;
		scn_diag_init(diag);
		rc = scn_parse_file_run(l.path[i], opts->defs, run_seed(opts, &seed),
					&jobs[i].script, diag);
		if (!rc)
			rc = scn_check(jobs[i].script, diag);
		if (rc || diag->n)
			scn_diag_print(diag, stderr);
		if (rc)
			nbad++;
	}
	if (nbad) {
		fprintf(stderr, "nicsim scenario: %zu of %zu script%s bad: nothing was run\n", nbad,
			l.n, l.n == 1 ? "" : "s");
		status = 2;
		goto out;
	}
	for (i = 0; i < l.n; i++) {
		jobs[i].out = mmap(NULL, sizeof(*jobs[i].out), PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (jobs[i].out == MAP_FAILED) {
			jobs[i].out = NULL;
			status = 2;
			goto out;
		}
		snprintf(jobs[i].out->path, sizeof(jobs[i].out->path), "%s", l.path[i]);
		outs[i] = jobs[i].out;
	}
	/* SIGINT, SIGTERM and SIGHUP (a closed terminal) end the scenarios
	 * cleanly: each child turns them into an end of its loop (its own
	 * signalfd); here they stop new starts and are passed on to the
	 * children running. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, &old);
	signal(SIGPIPE, SIG_IGN);
	sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (opts->tap)
		scn_report_tap_begin(stdout, l.n);
	fflush(stdout);
	while (next < l.n) {
		while (!interrupted && running < jmax && started < l.n) {
			rc = job_start(&jobs[started], opts);
			if (rc) {
				jobs[started].finished = true;
				jobs[started].out->status = SCN_FAILED;
				snprintf(
				    jobs[started].out->message, sizeof(jobs[started].out->message),
				    "cannot start a process for the scenario: %s", strerror(-rc));
			} else {
				running++;
			}
			started++;
		}
		if (interrupted)
			for (; started < l.n; started++) {
				jobs[started].finished = true;
				jobs[started].out->status = SCN_NOT_RUN;
				snprintf(jobs[started].out->message,
					 sizeof(jobs[started].out->message),
					 "not run: interrupted (SIG%s)", sig_abbrev(signo));
			}
		print_ready(jobs, l.n, &next, opts, &ro);
		if (!running)
			continue;
		np = 0;
		pf[np++] = (struct pollfd){.fd = sigfd, .events = POLLIN};
		for (i = 0; i < l.n; i++)
			if (jobs[i].running)
				pf[np++] = (struct pollfd){.fd = jobs[i].fd, .events = POLLIN};
		if (poll(pf, np, -1) < 0 && errno != EINTR)
			break;
		if (pf[0].revents) {
			struct signalfd_siginfo si;

			/* Passed on as it came, so that each scenario reports
			 * the signal the user sent (SIGINT from a terminal). */
			if (read(sigfd, &si, sizeof(si)) > 0) {
				interrupted = true;
				signo = (int)si.ssi_signo;
				for (i = 0; i < l.n; i++)
					if (jobs[i].running)
						kill(jobs[i].pid, signo);
			}
		}
		for (i = 0; i < l.n; i++)
			if (jobs[i].running) {
				struct pollfd one = {.fd = jobs[i].fd, .events = POLLIN};

				if (poll(&one, 1, 0) > 0) {
					job_done(&jobs[i]);
					if (!jobs[i].running)
						running--;
				}
			}
	}
	print_ready(jobs, l.n, &next, opts, &ro);
	for (i = 0; i < l.n; i++)
		if (jobs[i].out->status != SCN_PASSED)
			status = 1;
	if (interrupted)
		status = 1;
	scn_report_summary(stdout, outs, l.n, scn_now_ns() - t0, opts->tap);
	if (opts->junit) {
		rc = scn_report_junit(opts->junit, outs, l.n, &ro);
		if (rc) {
			fprintf(stderr, "nicsim scenario: cannot write %s: %s\n", opts->junit,
				rc == -ENXIO ? "it is a FIFO that no process is reading"
					     : strerror(-rc));
			status = status ? status : 1;
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
out:
	if (sigfd >= 0)
		close(sigfd);
	for (i = 0; jobs && i < l.n; i++) {
		scn_script_free(jobs[i].script);
		if (jobs[i].out)
			munmap(jobs[i].out, sizeof(*jobs[i].out));
	}
	scn_files_free(&l);
	free(jobs);
	free(outs);
	free(diag);
	free(pf);
	return status;
}
