/*
 * The memory verbs of nicsim-agent: named buffers (mmap'd or malloc'd),
 * their patterns and checksums, and the memory events a scenario makes on
 * them (munmap, mmap at the same address, mremap, madvise, free, realloc),
 * which the provider's memory monitor sees as an application's would be.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"
#include "fab_wire.h"

#define BUFFER_MAX (1ull << 30) /* the largest buffer an agent makes */

/* Room for one more buffer: false if out of memory. */
static bool grow_bufs(struct agent *a)
{
	struct agent_buf *t = agent_grow(a->bufs, &a->cap_bufs, a->n_bufs, sizeof(*t));

	if (t)
		a->bufs = t;
	return t != NULL;
}

static size_t page_round(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (n + page - 1) / page * page;
}

/* ---- Buffers ---------------------------------------------------------------- */

void mem_buffer(struct agent_req *r)
{
	struct agent *a = r->a;
	struct scn_pattern pat = {.kind = SCN_PATTERN_ZERO};
	struct agent_buf b = {.state = BUF_LIVE};
	uint64_t size;

	if (!arg_new_name(r, r->argv[0], "buffer") ||
	    !arg_num(r, r->argv[1], "size", BUFFER_MAX, &size))
		return;
	if (!size) {
		agent_bad(r, "a buffer of 0 bytes: at least 1");
		return;
	}
	if (!strcmp(r->argv[2], "mmap"))
		b.kind = BUF_MMAP;
	else if (!strcmp(r->argv[2], "malloc"))
		b.kind = BUF_MALLOC;
	else {
		agent_bad(r, "buffer kind \"%.40s\": mmap or malloc", r->argv[2]);
		return;
	}
	if (r->argc > 3 && !arg_pattern(r, r->argv + 3, r->argc - 3, &pat))
		return;
	if (!grow_bufs(a)) {
		agent_reply_errno(r, ENOMEM);
		return;
	}
	b.len = (size_t)size;
	if (b.kind == BUF_MMAP) {
		b.map_len = page_round(b.len);
		b.addr = mmap(NULL, b.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		if (b.addr == MAP_FAILED) {
			agent_reply_errno(r, errno);
			return;
		}
	} else {
		b.addr = malloc(b.len);
		if (!b.addr) {
			agent_reply_errno(r, ENOMEM);
			return;
		}
	}
	scn_pattern_fill(&pat, 0, b.addr, b.len);
	snprintf(b.name, sizeof(b.name), "%s", r->argv[0]);
	a->bufs[a->n_bufs++] = b;
	agent_reply(a, r->id, "ok addr=%p len=%zu", (void *)b.addr, b.len);
}

void mem_fill(struct agent_req *r)
{
	struct scn_pattern pat;
	struct agent_buf *b;
	size_t off, len;

	if (!arg_range(r, r->argv, &b, &off, &len, UINT64_MAX) || !arg_touchable(r, b) ||
	    !arg_pattern(r, r->argv + 3, r->argc - 3, &pat))
		return;
	scn_pattern_fill(&pat, 0, b->addr + off, len);
	agent_ok(r);
}

void mem_peek(struct agent_req *r)
{
	char text[2 * SCN_AGENT_PEEK_MAX + 1];
	struct agent_buf *b;
	size_t off, len;

	if (!arg_range(r, r->argv, &b, &off, &len, SCN_AGENT_PEEK_MAX) || !arg_touchable(r, b))
		return;
	agent_hex(text, b->addr + off, len);
	agent_reply(r->a, r->id, "ok x:%s", text);
}

void mem_sum(struct agent_req *r)
{
	struct agent_buf *b;
	size_t off, len;

	if (!arg_range(r, r->argv, &b, &off, &len, UINT64_MAX) || !arg_touchable(r, b))
		return;
	agent_reply(r->a, r->id, "ok crc32=0x%08x len=%zu", fab_crc32(0, b->addr + off, len), len);
}

/* The buffer named by words[0], of the kind the verb needs. */
static struct agent_buf *arg_buf_of(const struct agent_req *r, const char *name,
				    enum agent_buf_kind kind)
{
	struct agent_buf *b = arg_buf(r, name);

	if (b && b->kind != kind) {
		agent_bad(r, "%s needs a%s buffer: %s is from %s", r->verb,
			  kind == BUF_MMAP ? "n mmap" : " malloc", b->name,
			  b->kind == BUF_MMAP ? "mmap" : "malloc");
		return NULL;
	}
	return b;
}

void mem_munmap(struct agent_req *r)
{
	struct agent_buf *b = arg_buf_of(r, r->argv[0], BUF_MMAP);

	/* Unmapped already: its range may be someone else's by now. */
	if (!b || !arg_touchable(r, b))
		return;
	if (munmap(b->addr, b->map_len)) {
		agent_reply_errno(r, errno);
		return;
	}
	b->state = BUF_UNMAPPED;
	agent_ok(r);
}

/*
 * A new mapping at the buffer's address.  Where the buffer is mapped,
 * `fixed` replaces its own mapping (MAP_FIXED, the memory changing under
 * whatever registered it); where it was unmapped, the range may have been
 * taken since (a later buffer, the C library), so the mapping is always
 * made with MAP_FIXED_NOREPLACE and fails with EEXIST rather than replace
 * what is there.
 */
void mem_mmap(struct agent_req *r)
{
	struct agent_buf *b = arg_buf_of(r, r->argv[0], BUF_MMAP);
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
	void *p;

	if (!b)
		return;
	if (r->argc > 1 && strcmp(r->argv[1], "fixed")) {
		agent_bad(r, "mmap's option \"%.40s\": only fixed", r->argv[1]);
		return;
	}
	if (r->argc > 1 && b->state == BUF_LIVE)
		flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
	p = mmap(b->addr, b->map_len, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED) {
		agent_reply_errno(r, errno);
		return;
	}
	if (p != b->addr) { /* a kernel that took MAP_FIXED_NOREPLACE as a hint */
		munmap(p, b->map_len);
		agent_reply_errno(r, EEXIST);
		return;
	}
	b->state = BUF_LIVE;
	agent_reply(r->a, r->id, "ok addr=%p", p);
}

void mem_mremap(struct agent_req *r)
{
	struct agent_buf *b = arg_buf_of(r, r->argv[0], BUF_MMAP);
	uint64_t size;
	size_t map_len;
	void *p;

	if (!b || !arg_touchable(r, b) || !arg_num(r, r->argv[1], "size", BUFFER_MAX, &size))
		return;
	if (!size) {
		agent_bad(r, "mremap to 0 bytes: use munmap");
		return;
	}
	map_len = page_round((size_t)size);
	p = mremap(b->addr, b->map_len, map_len, MREMAP_MAYMOVE);
	if (p == MAP_FAILED) {
		agent_reply_errno(r, errno);
		return;
	}
	agent_reply(r->a, r->id, "ok addr=%p moved=%d", p, p != b->addr);
	b->addr = p;
	b->len = (size_t)size;
	b->map_len = map_len;
}

/*
 * madvise over an mmap buffer or a range of it.  Only mmap buffers: the
 * kernel rounds the range out to whole pages, which stay inside the
 * buffer's own mapping, while around a malloc block they would reach the
 * C library's memory.
 */
void mem_madvise(struct agent_req *r)
{
	static const struct {
		const char *name;
		int advice;
	} advices[] = {{"dontneed", MADV_DONTNEED}, {"free", MADV_FREE}, {"remove", MADV_REMOVE}};
	struct agent_buf *b;
	size_t off = 0, len, i;

	if (r->argc == 3) { /* BUF ADV, or BUF ADV OFF LEN */
		arg_count(r, 2, 2);
		return;
	}
	for (i = 0; i < sizeof(advices) / sizeof(advices[0]); i++)
		if (!strcmp(r->argv[1], advices[i].name))
			break;
	if (i == sizeof(advices) / sizeof(advices[0])) {
		agent_bad(r, "advice \"%.40s\": dontneed, free or remove", r->argv[1]);
		return;
	}
	b = arg_buf_of(r, r->argv[0], BUF_MMAP);
	if (!b || !arg_touchable(r, b))
		return;
	len = b->map_len;
	if (r->argc == 4) {
		char *words[3] = {r->argv[0], r->argv[2], r->argv[3]};

		if (!arg_range(r, words, &b, &off, &len, UINT64_MAX))
			return;
	}
	if (madvise(b->addr + off, len, advices[i].advice)) {
		agent_reply_errno(r, errno);
		return;
	}
	agent_ok(r);
}

void mem_free(struct agent_req *r)
{
	struct agent_buf *b = arg_buf_of(r, r->argv[0], BUF_MALLOC);

	if (!b || !arg_touchable(r, b))
		return;
	free(b->addr);
	b->state = BUF_FREED;
	agent_ok(r);
}

void mem_realloc(struct agent_req *r)
{
	struct agent_buf *b = arg_buf_of(r, r->argv[0], BUF_MALLOC);
	uint64_t size;
	void *p;

	if (!b || !arg_touchable(r, b) || !arg_num(r, r->argv[1], "size", BUFFER_MAX, &size))
		return;
	if (!size) {
		agent_bad(r, "realloc to 0 bytes: use free");
		return;
	}
	p = realloc(b->addr, (size_t)size);
	if (!p) {
		agent_reply_errno(r, ENOMEM);
		return;
	}
	agent_reply(r->a, r->id, "ok addr=%p moved=%d", p, p != (void *)b->addr);
	b->addr = p;
	b->len = (size_t)size;
}
