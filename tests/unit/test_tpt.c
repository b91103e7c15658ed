/*
 * Unit tests of the translation/protection table (nicsim/tpt.h): keys and
 * their reuse, the order of the access checks, overflow-safe ranges,
 * capacity, windows, the drain of in-flight DMA on invalidation, teardown of
 * a context, the fault log and the listing cursor.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nstest.h"
#include "tpt.h"

#define PAGE 4096u
#define QP_A 7u
#define QP_B 8u

static const struct tpt_owner owner_a = {.ctx_id = 1, .pid = 101};
static const struct tpt_owner owner_b = {.ctx_id = 2, .pid = 202};

static struct tpt *make_tpt(uint32_t capacity)
{
	struct tpt *t = NULL;

	NST_REQUIRE_EQ(tpt_create(&t, capacity, PAGE), 0);
	NST_REQUIRE(t != NULL);
	return t;
}

static uint32_t reg(struct tpt *t, const struct tpt_owner *o, uint64_t va, uint64_t len,
		    uint32_t access)
{
	uint32_t key = 0;

	NST_REQUIRE_EQ(tpt_reg_mr(t, o, va, len, access, &key), 0);
	return key;
}

static uint32_t alloc_mw(struct tpt *t, const struct tpt_owner *o)
{
	uint32_t key = 0;

	NST_REQUIRE_EQ(tpt_alloc_mw(t, o, &key), 0);
	return key;
}

static uint32_t bind_mw(struct tpt *t, const struct tpt_owner *o, uint32_t mw, uint32_t mr,
			uint64_t va, uint64_t len, uint32_t access, uint32_t qpn)
{
	uint32_t key = 0;

	NST_REQUIRE_EQ(tpt_bind_mw(t, o, mw, mr, va, len, access, qpn, &key), 0);
	return key;
}

/*
 * One access, ended at once when granted.  Returns NIC_TPT_R_NONE for a
 * grant, else the refusal reason; a refusal must come with -EACCES.
 */
static enum nic_tpt_reason try_access(struct tpt *t, const struct tpt_owner *who, uint32_t key,
				      uint32_t access, uint32_t qpn, uint64_t va, uint64_t len)
{
	struct tpt_grant g;
	enum nic_tpt_reason r = NIC_TPT_R_MAX_;
	int rc = tpt_check(t, who, key, access, qpn, va, len, &g, &r);

	if (rc == 0) {
		NST_EQ_U(g.index, NIC_KEY_INDEX(key));
		tpt_put(t, g.index, NULL);
	} else {
		NST_EQ(rc, -EACCES);
	}
	return r;
}

/* An access that stays in flight; returns the grant's index for tpt_put(). */
static uint32_t hold(struct tpt *t, const struct tpt_owner *who, uint32_t key, uint32_t access,
		     uint32_t qpn, uint64_t va, uint64_t len)
{
	struct tpt_grant g = {0};

	NST_REQUIRE_EQ(tpt_check(t, who, key, access, qpn, va, len, &g, NULL), 0);
	return g.index;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Resident set size of this process in bytes, from /proc/self/statm. */
static uint64_t resident_bytes(void)
{
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	NST_REQUIRE(f != NULL);
	NST_REQUIRE_EQ(fscanf(f, "%lu %lu", &size, &resident), 2);
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* ---- Creation and capacity ------------------------------------------------ */

static void test_create_rejects_bad_capacity_and_page_size(void)
{
	struct tpt *t = (struct tpt *)&t;

	NST_EQ(tpt_create(&t, 0, PAGE), -EINVAL);
	NST_TRUE(t == NULL);
	NST_EQ(tpt_create(&t, NIC_TPT_MAX_CAPACITY + 1, PAGE), -EINVAL);
	NST_EQ(tpt_create(&t, UINT32_MAX, PAGE), -EINVAL);
	NST_EQ(tpt_create(&t, 16, 0), -EINVAL);
	NST_EQ(tpt_create(&t, 16, 3000), -EINVAL);
	NST_EQ(tpt_create(&t, 16, PAGE + 1), -EINVAL);
	NST_REQUIRE_EQ(tpt_create(&t, 1, PAGE), 0);
	NST_EQ_U(tpt_capacity(t), 1);
	NST_EQ_U(tpt_in_use(t), 0);
	NST_EQ_U(tpt_high_water(t), 0);
	tpt_destroy(t);
	tpt_destroy(NULL);
}

static void test_max_capacity_costs_no_memory_until_used(void)
{
	uint64_t before = resident_bytes();
	struct tpt *t = make_tpt(NIC_TPT_MAX_CAPACITY);
	uint32_t key;

	NST_EQ_U(tpt_capacity(t), NIC_TPT_MAX_CAPACITY);
	key = reg(t, &owner_a, 0x10000, PAGE, 0);
	NST_EQ_U(NIC_KEY_INDEX(key), 1);
	/* 16M entries would be 1 GiB if touched; an unused table must not be. */
	NST_TRUE(resident_bytes() - before < 16u << 20);
	tpt_destroy(t);
}

static void test_capacity_1m_fills_to_the_top_under_128mib(void)
{
	const uint32_t cap = 1u << 20;
	uint64_t before = resident_bytes();
	struct tpt *t = make_tpt(cap);
	struct tpt_entry_view v;
	uint32_t key = 0, last = 0;
	int rc = 0;

	for (uint32_t i = 1; i <= cap && rc == 0; i++) {
		rc =
		    tpt_reg_mr(t, &owner_a, (uint64_t)i * PAGE, PAGE, NIC_ACCESS_LOCAL_WRITE, &key);
		last = key;
	}
	NST_REQUIRE_EQ(rc, 0);
	NST_EQ_U(NIC_KEY_INDEX(last), cap);
	NST_EQ_U(tpt_in_use(t), cap);
	NST_EQ_U(tpt_high_water(t), cap);
	NST_EQ(tpt_reg_mr(t, &owner_a, 0x1000, PAGE, 0, &key), -ENOSPC);
	NST_EQ(tpt_alloc_mw(t, &owner_a, &key), -ENOSPC);
	NST_TRUE(resident_bytes() - before < 128u << 20);

	NST_EQ(try_access(t, &owner_a, last, NIC_ACCESS_LOCAL_WRITE, NIC_QPN_NONE,
			  (uint64_t)cap * PAGE, PAGE),
	       NIC_TPT_R_NONE);
	NST_REQUIRE_EQ(tpt_lookup(t, last, &v), 0);
	NST_EQ_U(v.va, (uint64_t)cap * PAGE);

	/* The top index is reusable and its key changes. */
	NST_EQ(tpt_dereg_mr(t, 1, last), 0);
	NST_REQUIRE_EQ(tpt_reg_mr(t, &owner_b, 0x5000, PAGE, 0, &key), 0);
	NST_EQ_U(NIC_KEY_INDEX(key), cap);
	NST_NE(key, last);
	NST_EQ(try_access(t, &owner_a, last, 0, NIC_QPN_NONE, (uint64_t)cap * PAGE, 1),
	       NIC_TPT_R_STALE_KEY);
	tpt_destroy(t);
}

static void test_exhaustion_returns_enospc_and_recovers_after_a_free(void)
{
	struct tpt *t = make_tpt(3);
	uint32_t k1 = reg(t, &owner_a, 0x1000, PAGE, 0);
	uint32_t k2 = alloc_mw(t, &owner_a);
	uint32_t k3 = reg(t, &owner_b, 0x1000, PAGE, 0);
	uint32_t key = 0xdeadbeef;

	NST_EQ(tpt_reg_mr(t, &owner_a, 0x9000, PAGE, 0, &key), -ENOSPC);
	NST_EQ(tpt_alloc_mw(t, &owner_a, &key), -ENOSPC);
	NST_EQ_U(key, 0xdeadbeef);
	NST_EQ_U(tpt_in_use(t), 3);

	NST_EQ(tpt_dealloc_mw(t, 1, k2), 0);
	NST_EQ_U(tpt_in_use(t), 2);
	NST_REQUIRE_EQ(tpt_reg_mr(t, &owner_a, 0x9000, PAGE, 0, &key), 0);
	NST_EQ_U(NIC_KEY_INDEX(key), NIC_KEY_INDEX(k2));
	NST_EQ_U(tpt_in_use(t), 3);
	NST_EQ(tpt_reg_mr(t, &owner_a, 0xa000, PAGE, 0, &key), -ENOSPC);
	NST_EQ(try_access(t, &owner_a, k1, 0, NIC_QPN_NONE, 0x1000, 1), NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_b, k3, 0, NIC_QPN_NONE, 0x1000, 1), NIC_TPT_R_NONE);
	tpt_destroy(t);
}

static void test_high_water_is_the_peak_in_use(void)
{
	struct tpt *t = make_tpt(8);
	uint32_t k[5];

	for (int i = 0; i < 3; i++)
		k[i] = reg(t, &owner_a, 0x1000, PAGE, 0);
	NST_EQ_U(tpt_high_water(t), 3);
	NST_EQ(tpt_dereg_mr(t, 1, k[0]), 0);
	NST_EQ(tpt_dereg_mr(t, 1, k[1]), 0);
	NST_EQ_U(tpt_in_use(t), 1);
	NST_EQ_U(tpt_high_water(t), 3);
	/* Freed indices are reused (last freed first) before a fresh one is taken. */
	k[0] = reg(t, &owner_a, 0x1000, PAGE, 0);
	NST_EQ_U(NIC_KEY_INDEX(k[0]), NIC_KEY_INDEX(k[1]));
	k[1] = reg(t, &owner_a, 0x1000, PAGE, 0);
	NST_EQ_U(tpt_high_water(t), 3);
	k[3] = reg(t, &owner_a, 0x1000, PAGE, 0);
	k[4] = alloc_mw(t, &owner_a);
	NST_EQ_U(NIC_KEY_INDEX(k[3]), 4);
	NST_EQ_U(NIC_KEY_INDEX(k[4]), 5);
	NST_EQ_U(tpt_high_water(t), 5);
	NST_EQ(tpt_release_owner(t, 1), 5);
	NST_EQ_U(tpt_in_use(t), 0);
	NST_EQ_U(tpt_high_water(t), 5);
	tpt_destroy(t);
}

/* ---- Keys ----------------------------------------------------------------- */

static void test_key_byte_changes_on_every_reuse_of_an_index(void)
{
	struct tpt *t = make_tpt(4);
	uint32_t first = reg(t, &owner_a, 0x1000, PAGE, 0);
	uint32_t prev = first, key;
	bool seen[256] = {false};

	NST_TRUE(first != 0);
	seen[NIC_KEY_BYTE(first)] = true;
	/* 255 reuses give 255 new bytes; the 256th wraps back, as on hardware. */
	for (int i = 1; i < 256; i++) {
		NST_REQUIRE_EQ(tpt_dereg_mr(t, 1, prev), 0);
		key = reg(t, &owner_a, 0x1000, PAGE, 0);
		NST_REQUIRE_EQ(NIC_KEY_INDEX(key), NIC_KEY_INDEX(first));
		NST_EQ_U(NIC_KEY_BYTE(key), (NIC_KEY_BYTE(prev) + 1) & 0xff);
		NST_TRUE(!seen[NIC_KEY_BYTE(key)]);
		seen[NIC_KEY_BYTE(key)] = true;
		prev = key;
	}
	NST_EQ(tpt_dereg_mr(t, 1, prev), 0);
	NST_EQ_U(reg(t, &owner_a, 0x1000, PAGE, 0), first);
	tpt_destroy(t);
}

static void test_stale_key_refused_after_dereg(void)
{
	struct tpt *t = make_tpt(4);
	uint32_t key = reg(t, &owner_a, 0x1000, PAGE, NIC_ACCESS_LOCAL_WRITE);
	struct tpt_entry_view v;

	NST_EQ(try_access(t, &owner_a, key, 0, NIC_QPN_NONE, 0x1000, 16), NIC_TPT_R_NONE);
	NST_EQ(tpt_dereg_mr(t, 1, key), 0);
	/* Not reused yet: the key still names the entry, which is no longer valid. */
	NST_EQ(try_access(t, &owner_a, key, 0, NIC_QPN_NONE, 0x1000, 16), NIC_TPT_R_BAD_STATE);
	NST_EQ(tpt_lookup(t, key, &v), -ENOENT);
	NST_EQ(tpt_dereg_mr(t, 1, key), -ENOENT);
	NST_EQ_U(tpt_in_use(t), 0);
	tpt_destroy(t);
}

static void test_stale_key_refused_after_reuse_of_the_index(void)
{
	struct tpt *t = make_tpt(4);
	uint32_t old = reg(t, &owner_a, 0x1000, PAGE, 0);
	uint32_t cur;

	NST_EQ(tpt_dereg_mr(t, 1, old), 0);
	cur = reg(t, &owner_a, 0x1000, PAGE, 0);
	NST_REQUIRE_EQ(NIC_KEY_INDEX(cur), NIC_KEY_INDEX(old));
	NST_EQ(try_access(t, &owner_a, old, 0, NIC_QPN_NONE, 0x1000, 16), NIC_TPT_R_STALE_KEY);
	NST_EQ(try_access(t, &owner_a, cur, 0, NIC_QPN_NONE, 0x1000, 16), NIC_TPT_R_NONE);
	NST_EQ(tpt_dereg_mr(t, 1, old), -ENOENT);
	NST_EQ_U(tpt_in_use(t), 1);
	tpt_destroy(t);
}

static void test_never_issued_and_out_of_table_keys_refused(void)
{
	struct tpt *t = make_tpt(4);
	uint32_t key = reg(t, &owner_a, 0x1000, PAGE, 0);
	struct tpt_entry_view v;

	NST_EQ(try_access(t, &owner_a, 0, 0, NIC_QPN_NONE, 0x1000, 1), NIC_TPT_R_BAD_INDEX);
	NST_EQ(
	    try_access(t, &owner_a, NIC_KEY_MAKE(0, NIC_KEY_BYTE(key)), 0, NIC_QPN_NONE, 0x1000, 1),
	    NIC_TPT_R_BAD_INDEX);
	NST_EQ(try_access(t, &owner_a, NIC_KEY_MAKE(5, 1), 0, NIC_QPN_NONE, 0x1000, 1),
	       NIC_TPT_R_BAD_INDEX);
	NST_EQ(try_access(t, &owner_a, UINT32_MAX, 0, NIC_QPN_NONE, 0x1000, 1),
	       NIC_TPT_R_BAD_INDEX);
	/* Inside the table but never handed out, whatever the byte: a forged key. */
	NST_EQ(try_access(t, &owner_a, NIC_KEY_MAKE(2, 0), 0, NIC_QPN_NONE, 0x1000, 1),
	       NIC_TPT_R_STALE_KEY);
	NST_EQ(try_access(t, &owner_a, NIC_KEY_MAKE(4, 1), 0, NIC_QPN_NONE, 0x1000, 1),
	       NIC_TPT_R_STALE_KEY);
	NST_EQ(tpt_lookup(t, NIC_KEY_MAKE(2, 0), &v), -ENOENT);
	NST_EQ(tpt_lookup(t, NIC_KEY_MAKE(4, 1), &v), -ENOENT);
	NST_EQ(tpt_dereg_mr(t, 1, NIC_KEY_MAKE(2, 1)), -ENOENT);
	NST_EQ(tpt_dereg_mr(t, 1, NIC_KEY_MAKE(5, 1)), -ENOENT);
	tpt_destroy(t);
}

/* ---- Check order ----------------------------------------------------------- */

/*
 * Fixture for the order tests: a region of A with local write, remote read
 * and window binding (no remote write), and a window of A bound to part of
 * it for remote read on QP_A.
 */
struct order_fixture {
	struct tpt *t;
	uint32_t mr, mw;
};

#define MR_VA 0x100000u
#define MR_LEN 0x10000u
#define MW_VA 0x104000u
#define MW_LEN 0x1000u
#define MR_ACCESS (NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_READ | NIC_ACCESS_MW_BIND)

static struct order_fixture order_setup(void)
{
	struct order_fixture f;

	f.t = make_tpt(16);
	f.mr = reg(f.t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	f.mw = bind_mw(f.t, &owner_a, alloc_mw(f.t, &owner_a), f.mr, MW_VA, MW_LEN,
		       NIC_ACCESS_REMOTE_READ, QP_A);
	return f;
}

static uint32_t other_byte(uint32_t key)
{
	return NIC_KEY_MAKE(NIC_KEY_INDEX(key), NIC_KEY_BYTE(key) + 1);
}

/*
 * Break every rule at once, then mend them one at a time in check order: each
 * step must report the earliest rule still broken.
 */
static void test_check_order_reports_earliest_broken_rule(void)
{
	struct order_fixture f = order_setup();
	struct tpt *t = f.t;
	const uint32_t rw = NIC_ACCESS_REMOTE_WRITE;
	const uint64_t out_va = MW_VA + MW_LEN; /* in the region, outside the window */
	uint32_t key;

	NST_REQUIRE_EQ(tpt_invalidate_mw(t, 1, f.mw), 0);
	NST_EQ(try_access(t, &owner_b, other_byte(f.mw), rw, QP_B, out_va, 8), NIC_TPT_R_STALE_KEY);
	NST_EQ(try_access(t, &owner_b, f.mw, rw, QP_B, out_va, 8), NIC_TPT_R_WRONG_PD);
	NST_EQ(try_access(t, &owner_a, f.mw, rw, QP_B, out_va, 8), NIC_TPT_R_NO_ACCESS);
	NST_EQ(try_access(t, &owner_a, f.mw, NIC_ACCESS_REMOTE_READ, QP_B, out_va, 8),
	       NIC_TPT_R_BAD_STATE);
	key = bind_mw(t, &owner_a, f.mw, f.mr, MW_VA, MW_LEN, NIC_ACCESS_REMOTE_READ, QP_A);
	NST_EQ(try_access(t, &owner_a, key, NIC_ACCESS_REMOTE_READ, QP_B, out_va, 8),
	       NIC_TPT_R_WRONG_QP);
	NST_EQ(try_access(t, &owner_a, key, NIC_ACCESS_REMOTE_READ, QP_A, out_va, 8),
	       NIC_TPT_R_OUT_OF_RANGE);
	NST_EQ(try_access(t, &owner_a, key, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8),
	       NIC_TPT_R_NONE);

	for (int r = NIC_TPT_R_STALE_KEY; r <= NIC_TPT_R_OUT_OF_RANGE; r++)
		NST_EQ_U(tpt_refusals(t, (enum nic_tpt_reason)r), 1);
	NST_EQ_U(tpt_refusals(t, NIC_TPT_R_BAD_INDEX), 0);
	NST_EQ_U(tpt_refusals_total(t), 6);
	tpt_destroy(t);
}

/* Exactly two adjacent rules broken at a time: the earlier one wins. */
static void test_check_order_each_adjacent_pair(void)
{
	struct order_fixture f = order_setup();
	struct tpt *t = f.t;
	uint32_t mr2, idx;

	/* index, key: an index past the table, with a byte no entry has. */
	NST_EQ(try_access(t, &owner_a, NIC_KEY_MAKE(17, 0x99), 0, NIC_QPN_NONE, MR_VA, 8),
	       NIC_TPT_R_BAD_INDEX);
	/* key, owner. */
	NST_EQ(try_access(t, &owner_b, other_byte(f.mr), 0, NIC_QPN_NONE, MR_VA, 8),
	       NIC_TPT_R_STALE_KEY);
	/* owner, access. */
	NST_EQ(try_access(t, &owner_b, f.mr, NIC_ACCESS_REMOTE_WRITE, NIC_QPN_NONE, MR_VA, 8),
	       NIC_TPT_R_WRONG_PD);
	/* access, state: a region being invalidated, asked for a right it lacks. */
	mr2 = reg(t, &owner_a, 0x200000, PAGE, NIC_ACCESS_REMOTE_READ);
	idx = hold(t, &owner_a, mr2, 0, NIC_QPN_NONE, 0x200000, 8);
	NST_REQUIRE_EQ(tpt_dereg_mr(t, 1, mr2), -EINPROGRESS);
	NST_EQ(try_access(t, &owner_a, mr2, NIC_ACCESS_LOCAL_WRITE, NIC_QPN_NONE, 0x200000, 8),
	       NIC_TPT_R_NO_ACCESS);
	NST_EQ(try_access(t, &owner_a, mr2, NIC_ACCESS_REMOTE_READ, NIC_QPN_NONE, 0x200000, 8),
	       NIC_TPT_R_BAD_STATE);
	NST_TRUE(tpt_put(t, idx, NULL));
	/* connection, range: valid window, wrong QP and outside it. */
	NST_EQ(try_access(t, &owner_a, f.mw, NIC_ACCESS_REMOTE_READ, QP_B, MR_VA, 8),
	       NIC_TPT_R_WRONG_QP);
	/* state, connection: the same, once revoked. */
	NST_REQUIRE_EQ(tpt_invalidate_mw(t, 1, f.mw), 0);
	NST_EQ(try_access(t, &owner_a, f.mw, NIC_ACCESS_REMOTE_READ, QP_B, MW_VA, 8),
	       NIC_TPT_R_BAD_STATE);
	tpt_destroy(t);
}

static void test_access_bits_local_read_implied_others_required(void)
{
	struct tpt *t = make_tpt(8);
	uint32_t none = reg(t, &owner_a, 0x1000, PAGE, 0);
	uint32_t lw = reg(t, &owner_a, 0x1000, PAGE, NIC_ACCESS_LOCAL_WRITE);
	uint32_t rr = reg(t, &owner_a, 0x1000, PAGE, NIC_ACCESS_REMOTE_READ | NIC_ACCESS_MW_BIND);
	uint32_t all = reg(t, &owner_a, 0x1000, PAGE, NIC_ACCESS_ALL);
	const uint32_t remote = NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE;

	NST_EQ(try_access(t, &owner_a, none, 0, NIC_QPN_NONE, 0x1000, 8), NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_a, none, NIC_ACCESS_LOCAL_WRITE, NIC_QPN_NONE, 0x1000, 8),
	       NIC_TPT_R_NO_ACCESS);
	NST_EQ(try_access(t, &owner_a, lw, NIC_ACCESS_LOCAL_WRITE, NIC_QPN_NONE, 0x1000, 8),
	       NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_a, lw, NIC_ACCESS_REMOTE_READ, QP_A, 0x1000, 8),
	       NIC_TPT_R_NO_ACCESS);
	/* A remote access to a region (not a window) is not tied to a connection. */
	NST_EQ(try_access(t, &owner_a, rr, NIC_ACCESS_REMOTE_READ, QP_A, 0x1000, 8),
	       NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_a, rr, remote, QP_A, 0x1000, 8), NIC_TPT_R_NO_ACCESS);
	NST_EQ(try_access(t, &owner_a, rr, NIC_ACCESS_LOCAL_WRITE, NIC_QPN_NONE, 0x1000, 8),
	       NIC_TPT_R_NO_ACCESS);
	NST_EQ(try_access(t, &owner_a, all, remote | NIC_ACCESS_LOCAL_WRITE, QP_B, 0x1000, 8),
	       NIC_TPT_R_NONE);
	/* Binding is not a data access, and unknown bits are never granted. */
	NST_EQ(try_access(t, &owner_a, all, NIC_ACCESS_MW_BIND, NIC_QPN_NONE, 0x1000, 8),
	       NIC_TPT_R_NO_ACCESS);
	NST_EQ(try_access(t, &owner_a, all, 0x10, NIC_QPN_NONE, 0x1000, 8), NIC_TPT_R_NO_ACCESS);
	tpt_destroy(t);
}

/* ---- Ranges ---------------------------------------------------------------- */

static void test_access_range_edges(void)
{
	struct tpt *t = make_tpt(4);
	uint32_t k = reg(t, &owner_a, 0x10000, 0x1000, 0);
	struct tpt_grant g = {0};

	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, 0x10000, 0x1000), NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, 0x10fff, 1), NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, 0x10000, 0x1001),
	       NIC_TPT_R_OUT_OF_RANGE);
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, 0x10fff, 2), NIC_TPT_R_OUT_OF_RANGE);
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, 0xffff, 1), NIC_TPT_R_OUT_OF_RANGE);
	/* An empty access is inside iff its address is in [start, end]. */
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, 0x11000, 0), NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, 0x11001, 0), NIC_TPT_R_OUT_OF_RANGE);
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, 0xffff, 0), NIC_TPT_R_OUT_OF_RANGE);

	NST_REQUIRE_EQ(tpt_check(t, &owner_a, k, 0, NIC_QPN_NONE, 0x10800, 0x100, &g, NULL), 0);
	NST_EQ_U(g.va, 0x10800);
	NST_EQ_U(g.len, 0x100);
	NST_EQ_U(g.pid, owner_a.pid);
	NST_EQ_U(g.index, NIC_KEY_INDEX(k));
	NST_TRUE(!tpt_put(t, g.index, NULL));
	tpt_destroy(t);
}

static void test_registration_that_wraps_is_refused(void)
{
	struct tpt *t = make_tpt(4);
	const uint64_t top = UINT64_MAX - 10;
	uint32_t key = 0x12345678;

	/* top + 11 == 2^64: the end is not representable. */
	NST_EQ(tpt_reg_mr(t, &owner_a, top, 11, 0, &key), -EINVAL);
	NST_EQ(tpt_reg_mr(t, &owner_a, top, 12, 0, &key), -EINVAL);
	NST_EQ(tpt_reg_mr(t, &owner_a, 1, UINT64_MAX, 0, &key), -EINVAL);
	NST_EQ(tpt_reg_mr(t, &owner_a, UINT64_MAX, UINT64_MAX, 0, &key), -EINVAL);
	NST_EQ(tpt_reg_mr(t, &owner_a, 0x1000, 0, 0, &key), -EINVAL);
	NST_EQ(tpt_reg_mr(t, &owner_a, 0x1000, 1, NIC_ACCESS_ALL + 1, &key), -EINVAL);
	NST_EQ(tpt_reg_mr(t, &owner_a, 0x1000, 1, 0x80000000u, &key), -EINVAL);
	NST_EQ_U(key, 0x12345678);
	NST_EQ_U(tpt_in_use(t), 0);
	NST_EQ_U(tpt_high_water(t), 0);
	/* Up to the last representable end is fine, as is the whole space from 0. */
	NST_EQ(tpt_reg_mr(t, &owner_a, top, 10, 0, &key), 0);
	NST_EQ(tpt_reg_mr(t, &owner_a, 0, UINT64_MAX, 0, &key), 0);
	NST_EQ_U(tpt_in_use(t), 2);
	tpt_destroy(t);
}

static void test_huge_access_at_top_of_address_space_does_not_wrap(void)
{
	struct tpt *t = make_tpt(4);
	const uint64_t start = UINT64_MAX - 0x1000; /* region [start, UINT64_MAX) */
	uint32_t k = reg(t, &owner_a, start, 0x1000, 0);

	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, start, 0x1000), NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, UINT64_MAX - 1, 1), NIC_TPT_R_NONE);
	/* va + len wraps to just below va: a naive end check would pass. */
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, start + 0x10, UINT64_MAX),
	       NIC_TPT_R_OUT_OF_RANGE);
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, start + 0x10, UINT64_MAX - 0x20),
	       NIC_TPT_R_OUT_OF_RANGE);
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, UINT64_MAX, 1), NIC_TPT_R_OUT_OF_RANGE);
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, UINT64_MAX, UINT64_MAX),
	       NIC_TPT_R_OUT_OF_RANGE);
	NST_EQ(try_access(t, &owner_a, k, 0, NIC_QPN_NONE, 0, UINT64_MAX), NIC_TPT_R_OUT_OF_RANGE);
	tpt_destroy(t);
}

static void test_lookup_view_and_page_list(void)
{
	struct tpt *t = make_tpt(8);
	uint64_t before = realtime_ns();
	const struct tpt_owner o = {.ctx_id = 9, .pid = 909};
	uint32_t k1 = reg(t, &o, 0x1234, 0x2000, NIC_ACCESS_REMOTE_WRITE);
	uint32_t k2 = reg(t, &o, 0x2000, 0x1000, 0);
	uint32_t k3 = reg(t, &o, UINT64_MAX - 0xfff, 0xfff, 0);
	uint32_t k4 = reg(t, &o, 0x1fff, 2, 0);
	uint64_t after = realtime_ns();
	struct tpt_entry_view v;

	NST_REQUIRE_EQ(tpt_lookup(t, k1, &v), 0);
	NST_EQ_U(v.key, k1);
	NST_EQ(v.type, TPT_MR);
	NST_EQ(v.state, TPT_VALID);
	NST_EQ_U(v.access, NIC_ACCESS_REMOTE_WRITE);
	NST_EQ_U(v.va, 0x1234);
	NST_EQ_U(v.len, 0x2000);
	NST_EQ_U(v.ctx_id, 9);
	NST_EQ_U(v.pid, 909);
	NST_EQ_U(v.changed_pid, 909);
	NST_EQ_U(v.page_va, 0x1000);
	NST_EQ_U(v.npages, 3); /* 0x1234..0x3233 touches pages 0x1000, 0x2000, 0x3000 */
	NST_TRUE(v.reg_ns >= before && v.reg_ns <= after);
	NST_TRUE(v.changed_ns >= before && v.changed_ns <= after);
	NST_EQ_U(v.inflight, 0);
	NST_EQ_U(v.mr_key, 0);
	NST_REQUIRE_EQ(tpt_lookup(t, k2, &v), 0);
	NST_EQ_U(v.page_va, 0x2000);
	NST_EQ_U(v.npages, 1);
	NST_REQUIRE_EQ(tpt_lookup(t, k3, &v), 0);
	NST_EQ_U(v.page_va, UINT64_MAX - 0xfff);
	NST_EQ_U(v.npages, 1);
	NST_REQUIRE_EQ(tpt_lookup(t, k4, &v), 0);
	NST_EQ_U(v.page_va, 0x1000);
	NST_EQ_U(v.npages, 2);
	NST_EQ(tpt_lookup(t, other_byte(k4), &v), -ENOENT);
	tpt_destroy(t);
}

/* ---- Windows ---------------------------------------------------------------- */

static void test_window_allocated_revoked_and_unbound(void)
{
	struct tpt *t = make_tpt(4);
	uint32_t mw = alloc_mw(t, &owner_a);
	struct tpt_entry_view v;

	NST_REQUIRE_EQ(tpt_lookup(t, mw, &v), 0);
	NST_EQ(v.type, TPT_MW);
	NST_EQ(v.state, TPT_REVOKED);
	NST_EQ_U(v.mr_key, 0);
	NST_EQ_U(v.access, 0);
	NST_EQ_U(v.qpn, NIC_QPN_NONE);
	NST_EQ(try_access(t, &owner_a, mw, 0, NIC_QPN_NONE, 0, 0), NIC_TPT_R_BAD_STATE);
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, 0, 0),
	       NIC_TPT_R_NO_ACCESS);
	tpt_destroy(t);
}

static void test_window_bind_grants_region_owner_memory_on_its_qp_only(void)
{
	struct tpt *t = make_tpt(8);
	/* Same context, distinct pids: the grant must name the region's owner. */
	const struct tpt_owner reg_owner = {.ctx_id = 1, .pid = 555};
	uint32_t mr = reg(t, &reg_owner, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t mw0 = alloc_mw(t, &owner_a);
	uint32_t mw = bind_mw(t, &owner_a, mw0, mr, MW_VA, MW_LEN, NIC_ACCESS_REMOTE_READ, QP_A);
	struct tpt_entry_view v;
	struct tpt_grant g = {0};

	NST_EQ_U(NIC_KEY_INDEX(mw), NIC_KEY_INDEX(mw0));
	NST_EQ_U(NIC_KEY_BYTE(mw), (NIC_KEY_BYTE(mw0) + 1) & 0xff);
	NST_REQUIRE_EQ(tpt_lookup(t, mw, &v), 0);
	NST_EQ(v.state, TPT_VALID);
	NST_EQ_U(v.mr_key, mr);
	NST_EQ_U(v.qpn, QP_A);
	NST_EQ_U(v.va, MW_VA);
	NST_EQ_U(v.len, MW_LEN);
	NST_EQ_U(v.access, NIC_ACCESS_REMOTE_READ);

	NST_REQUIRE_EQ(
	    tpt_check(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA + 8, 16, &g, NULL), 0);
	NST_EQ_U(g.pid, 555);
	NST_EQ_U(g.va, MW_VA + 8);
	NST_EQ_U(g.len, 16);
	NST_EQ_U(g.index, NIC_KEY_INDEX(mw));
	NST_TRUE(!tpt_put(t, g.index, NULL));

	NST_EQ(try_access(t, &owner_a, mw0, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8),
	       NIC_TPT_R_STALE_KEY);
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_B, MW_VA, 8),
	       NIC_TPT_R_WRONG_QP);
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA - 1, 8),
	       NIC_TPT_R_OUT_OF_RANGE);
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA + MW_LEN - 4, 8),
	       NIC_TPT_R_OUT_OF_RANGE);
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_WRITE, QP_A, MW_VA, 8),
	       NIC_TPT_R_NO_ACCESS);
	/* A local access does not go through a connection; the window's rights still apply. */
	NST_EQ(try_access(t, &owner_a, mw, 0, NIC_QPN_NONE, MW_VA, 8), NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_LOCAL_WRITE, NIC_QPN_NONE, MW_VA, 8),
	       NIC_TPT_R_NO_ACCESS);
	tpt_destroy(t);
}

static void test_window_bound_to_no_qp_refuses_every_connection(void)
{
	struct tpt *t = make_tpt(4);
	uint32_t mr = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t mw = bind_mw(t, &owner_a, alloc_mw(t, &owner_a), mr, MW_VA, MW_LEN,
			      NIC_ACCESS_REMOTE_READ, NIC_QPN_NONE);

	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8),
	       NIC_TPT_R_WRONG_QP);
	tpt_destroy(t);
}

static void test_window_rebind_changes_key_and_moves_to_new_region(void)
{
	struct tpt *t = make_tpt(8);
	uint32_t mr1 = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t mr2 = reg(t, &owner_a, 0x800000, MR_LEN, MR_ACCESS | NIC_ACCESS_REMOTE_WRITE);
	uint32_t k1 = bind_mw(t, &owner_a, alloc_mw(t, &owner_a), mr1, MW_VA, MW_LEN,
			      NIC_ACCESS_REMOTE_READ, QP_A);
	uint32_t k2, k3;
	struct tpt_entry_view v;

	NST_EQ(tpt_dereg_mr(t, 1, mr1), -EBUSY);
	k2 = bind_mw(t, &owner_a, k1, mr2, 0x800000, 0x2000,
		     NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE, QP_B);
	NST_EQ_U(NIC_KEY_INDEX(k2), NIC_KEY_INDEX(k1));
	NST_NE(k2, k1);
	NST_EQ(try_access(t, &owner_a, k1, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8),
	       NIC_TPT_R_STALE_KEY);
	NST_EQ(try_access(t, &owner_a, k2, NIC_ACCESS_REMOTE_WRITE, QP_B, 0x801000, 8),
	       NIC_TPT_R_NONE);
	NST_REQUIRE_EQ(tpt_lookup(t, k2, &v), 0);
	NST_EQ_U(v.mr_key, mr2);
	NST_EQ_U(v.qpn, QP_B);
	/* The old region lost its window; the new one has it. */
	NST_EQ(tpt_dereg_mr(t, 1, mr2), -EBUSY);
	NST_EQ(tpt_dereg_mr(t, 1, mr1), 0);
	/* Rebinding to the same region also changes the key. */
	k3 = bind_mw(t, &owner_a, k2, mr2, 0x800000, 0x1000, NIC_ACCESS_REMOTE_READ, QP_B);
	NST_NE(k3, k2);
	NST_EQ(try_access(t, &owner_a, k2, NIC_ACCESS_REMOTE_READ, QP_B, 0x800000, 8),
	       NIC_TPT_R_STALE_KEY);
	NST_EQ(tpt_dereg_mr(t, 1, mr2), -EBUSY);
	NST_EQ(tpt_dealloc_mw(t, 1, k3), 0);
	NST_EQ(tpt_dereg_mr(t, 1, mr2), 0);
	NST_EQ_U(tpt_in_use(t), 0);
	tpt_destroy(t);
}

static void test_window_invalidate_revokes_at_once_and_keeps_key(void)
{
	struct tpt *t = make_tpt(8);
	uint32_t mr = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t mw = bind_mw(t, &owner_a, alloc_mw(t, &owner_a), mr, MW_VA, MW_LEN,
			      NIC_ACCESS_REMOTE_READ, QP_A);
	struct tpt_entry_view v;
	uint32_t again;

	NST_EQ(tpt_invalidate_mw(t, 2, mw), -ENOENT);
	NST_EQ(tpt_invalidate_mw(t, 1, mr), -EINVAL);
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8), NIC_TPT_R_NONE);
	NST_EQ(tpt_invalidate_mw(t, 1, mw), 0);
	/* "Revoked", not "stale": the key is the same. */
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8),
	       NIC_TPT_R_BAD_STATE);
	NST_REQUIRE_EQ(tpt_lookup(t, mw, &v), 0);
	NST_EQ_U(v.key, mw);
	NST_EQ(v.state, TPT_REVOKED);
	NST_EQ_U(v.mr_key, 0);
	NST_EQ(tpt_invalidate_mw(t, 1, mw), 0);
	/* An invalidated window no longer holds its region. */
	NST_EQ(tpt_dereg_mr(t, 1, mr), 0);
	/* It can be bound again, to another region. */
	mr = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	again = bind_mw(t, &owner_a, mw, mr, MW_VA, MW_LEN, NIC_ACCESS_REMOTE_READ, QP_A);
	NST_NE(again, mw);
	NST_EQ(try_access(t, &owner_a, again, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8),
	       NIC_TPT_R_NONE);
	tpt_destroy(t);
}

static void test_window_dealloc_frees_it_and_its_region_hold(void)
{
	struct tpt *t = make_tpt(8);
	uint32_t mr = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t mw = bind_mw(t, &owner_a, alloc_mw(t, &owner_a), mr, MW_VA, MW_LEN,
			      NIC_ACCESS_REMOTE_READ, QP_A);
	struct tpt_entry_view v;

	NST_EQ(tpt_dealloc_mw(t, 2, mw), -ENOENT);
	NST_EQ(tpt_dealloc_mw(t, 1, mr), -EINVAL);
	NST_EQ(tpt_dereg_mr(t, 1, mw), -EINVAL);
	NST_EQ(tpt_dereg_mr(t, 1, mr), -EBUSY);
	NST_REQUIRE_EQ(tpt_lookup(t, mr, &v), 0);
	NST_EQ(v.state, TPT_VALID);
	NST_EQ(try_access(t, &owner_a, mr, NIC_ACCESS_LOCAL_WRITE, NIC_QPN_NONE, MR_VA, 8),
	       NIC_TPT_R_NONE);
	NST_EQ(tpt_dealloc_mw(t, 1, mw), 0);
	NST_EQ(tpt_lookup(t, mw, &v), -ENOENT);
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8),
	       NIC_TPT_R_BAD_STATE);
	NST_EQ(tpt_dealloc_mw(t, 1, mw), -ENOENT);
	NST_EQ(tpt_dereg_mr(t, 1, mr), 0);
	NST_EQ_U(tpt_in_use(t), 0);
	tpt_destroy(t);
}

/* Each failing bind leaves both entries exactly as they were. */
static void test_window_bind_errors_change_nothing(void)
{
	struct tpt *t = make_tpt(16);
	uint32_t mr = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t mr_nobind = reg(t, &owner_a, MR_VA, MR_LEN, NIC_ACCESS_ALL & ~NIC_ACCESS_MW_BIND);
	uint32_t mr_readonly = reg(t, &owner_a, MR_VA, MR_LEN, NIC_ACCESS_MW_BIND);
	uint32_t mr_b = reg(t, &owner_b, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t mw = alloc_mw(t, &owner_a);
	uint32_t mw_b = alloc_mw(t, &owner_b);
	const uint32_t rr = NIC_ACCESS_REMOTE_READ;
	struct tpt_entry_view before, after;
	uint32_t out = 0x5a5a5a5a, idx;

	NST_REQUIRE_EQ(tpt_lookup(t, mw, &before), 0);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw_b, mr, MW_VA, MW_LEN, rr, QP_A, &out), -ENOENT);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr_b, MW_VA, MW_LEN, rr, QP_A, &out), -ENOENT);
	NST_EQ(tpt_bind_mw(t, &owner_a, other_byte(mw), mr, MW_VA, MW_LEN, rr, QP_A, &out),
	       -ENOENT);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, other_byte(mr), MW_VA, MW_LEN, rr, QP_A, &out),
	       -ENOENT);
	NST_EQ(tpt_bind_mw(t, &owner_a, mr, mr, MW_VA, MW_LEN, rr, QP_A, &out), -EINVAL);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mw, MW_VA, MW_LEN, rr, QP_A, &out), -EINVAL);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr, MW_VA, MW_LEN, 0, QP_A, &out), -EINVAL);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr, MW_VA, MW_LEN, NIC_ACCESS_LOCAL_WRITE, QP_A, &out),
	       -EINVAL);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr, MW_VA, MW_LEN, rr | NIC_ACCESS_MW_BIND, QP_A, &out),
	       -EINVAL);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr, MW_VA, 0, rr, QP_A, &out), -EINVAL);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr, MR_VA - 1, MW_LEN, rr, QP_A, &out), -EINVAL);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr, MR_VA + MR_LEN - 8, 16, rr, QP_A, &out), -EINVAL);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr, MR_VA + 8, UINT64_MAX, rr, QP_A, &out), -EINVAL);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr_nobind, MW_VA, MW_LEN, rr, QP_A, &out), -EACCES);
	/* A remotely writable window needs a locally writable region. */
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr_readonly, MW_VA, MW_LEN, NIC_ACCESS_REMOTE_WRITE,
			   QP_A, &out),
	       -EACCES);
	NST_EQ_U(out, 0x5a5a5a5a);
	NST_REQUIRE_EQ(tpt_lookup(t, mw, &after), 0);
	NST_EQ_U(after.key, before.key);
	NST_EQ(after.state, TPT_REVOKED);
	NST_EQ_U(after.mr_key, 0);
	NST_EQ(tpt_dereg_mr(t, 1, mr), 0);
	NST_EQ(tpt_dereg_mr(t, 1, mr_nobind), 0);
	NST_EQ(tpt_dereg_mr(t, 1, mr_readonly), 0);

	/* A window with DMA in flight cannot be rebound. */
	mr = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	mw = bind_mw(t, &owner_a, mw, mr, MW_VA, MW_LEN, rr, QP_A);
	idx = hold(t, &owner_a, mw, rr, QP_A, MW_VA, 8);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr, MW_VA, MW_LEN, rr, QP_B, &out), -EBUSY);
	NST_EQ(try_access(t, &owner_a, mw, rr, QP_A, MW_VA, 8), NIC_TPT_R_NONE);
	NST_TRUE(!tpt_put(t, idx, NULL));
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr, MW_VA, MW_LEN, rr, QP_B, &out), 0);
	tpt_destroy(t);
}

/* ---- Drain of in-flight DMA ------------------------------------------------- */

static void test_dereg_with_dma_in_flight_completes_on_last_put(void)
{
	struct tpt *t = make_tpt(4);
	uint32_t mr = reg(t, &owner_a, 0x1000, PAGE, NIC_ACCESS_LOCAL_WRITE);
	uint32_t i1 = hold(t, &owner_a, mr, 0, NIC_QPN_NONE, 0x1000, 8);
	uint32_t i2 = hold(t, &owner_a, mr, NIC_ACCESS_LOCAL_WRITE, NIC_QPN_NONE, 0x1100, 8);
	struct tpt_entry_view v;
	uint32_t done = 0;

	NST_EQ(tpt_dereg_mr(t, 1, mr), -EINPROGRESS);
	NST_REQUIRE_EQ(tpt_lookup(t, mr, &v), 0);
	NST_EQ(v.state, TPT_INVALIDATING);
	NST_EQ_U(v.inflight, 2);
	NST_EQ(try_access(t, &owner_a, mr, 0, NIC_QPN_NONE, 0x1000, 8), NIC_TPT_R_BAD_STATE);
	NST_EQ(tpt_dereg_mr(t, 1, mr), -ENOENT);
	NST_EQ_U(tpt_in_use(t), 1);
	NST_TRUE(!tpt_put(t, i1, &done));
	NST_EQ_U(done, 0);
	NST_EQ_U(tpt_in_use(t), 1);
	NST_TRUE(tpt_put(t, i2, &done));
	NST_EQ_U(done, mr);
	NST_EQ_U(tpt_in_use(t), 0);
	NST_EQ(tpt_lookup(t, mr, &v), -ENOENT);
	/* A put with nothing in flight is ignored. */
	NST_TRUE(!tpt_put(t, i2, &done));
	NST_TRUE(!tpt_put(t, 0, &done));
	NST_TRUE(!tpt_put(t, 1000, &done));
	NST_EQ_U(tpt_in_use(t), 0);
	tpt_destroy(t);
}

static void test_dealloc_window_with_dma_in_flight_holds_region_until_drained(void)
{
	struct tpt *t = make_tpt(4);
	uint32_t mr = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t mw = bind_mw(t, &owner_a, alloc_mw(t, &owner_a), mr, MW_VA, MW_LEN,
			      NIC_ACCESS_REMOTE_READ, QP_A);
	uint32_t idx = hold(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8);
	uint32_t done = 0;

	NST_EQ(tpt_dealloc_mw(t, 1, mw), -EINPROGRESS);
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8),
	       NIC_TPT_R_BAD_STATE);
	/* The window's DMA reaches the region's pages: the region must stay. */
	NST_EQ(tpt_dereg_mr(t, 1, mr), -EBUSY);
	NST_TRUE(tpt_put(t, idx, &done));
	NST_EQ_U(done, mw);
	NST_EQ(tpt_dereg_mr(t, 1, mr), 0);
	NST_EQ_U(tpt_in_use(t), 0);
	tpt_destroy(t);
}

static void test_invalidate_window_with_dma_in_flight_holds_region_until_drained(void)
{
	struct tpt *t = make_tpt(4);
	uint32_t mr = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t mw = bind_mw(t, &owner_a, alloc_mw(t, &owner_a), mr, MW_VA, MW_LEN,
			      NIC_ACCESS_REMOTE_READ, QP_A);
	uint32_t idx = hold(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8);
	struct tpt_entry_view v;
	uint32_t done = 0;

	NST_EQ(tpt_invalidate_mw(t, 1, mw), 0);
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8),
	       NIC_TPT_R_BAD_STATE);
	NST_EQ(tpt_dereg_mr(t, 1, mr), -EBUSY);
	NST_EQ(tpt_bind_mw(t, &owner_a, mw, mr, MW_VA, MW_LEN, NIC_ACCESS_REMOTE_READ, QP_A, &done),
	       -EBUSY);
	/* Invalidation needs no acknowledgement after the drain: the put reports none. */
	NST_TRUE(!tpt_put(t, idx, &done));
	NST_REQUIRE_EQ(tpt_lookup(t, mw, &v), 0);
	NST_EQ(v.state, TPT_REVOKED);
	NST_EQ_U(v.mr_key, 0);
	NST_EQ(tpt_dereg_mr(t, 1, mr), 0);
	NST_EQ_U(tpt_in_use(t), 1);
	tpt_destroy(t);
}

/* ---- Teardown of a context -------------------------------------------------- */

static void test_release_owner_frees_only_that_owners_entries(void)
{
	struct tpt *t = make_tpt(16);
	uint32_t a1 = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t a2 = reg(t, &owner_a, 0x900000, PAGE, 0);
	uint32_t aw = bind_mw(t, &owner_a, alloc_mw(t, &owner_a), a1, MW_VA, MW_LEN,
			      NIC_ACCESS_REMOTE_READ, QP_A);
	uint32_t b1 = reg(t, &owner_b, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t bw = bind_mw(t, &owner_b, alloc_mw(t, &owner_b), b1, MW_VA, MW_LEN,
			      NIC_ACCESS_REMOTE_READ, QP_B);
	uint32_t a_unbound = alloc_mw(t, &owner_a);
	struct tpt_entry_view v;

	NST_EQ(tpt_release_owner(t, 1), 4);
	NST_EQ(tpt_lookup(t, a_unbound, &v), -ENOENT);
	NST_EQ_U(tpt_in_use(t), 2);
	NST_EQ(tpt_lookup(t, a1, &v), -ENOENT);
	NST_EQ(tpt_lookup(t, a2, &v), -ENOENT);
	NST_EQ(tpt_lookup(t, aw, &v), -ENOENT);
	NST_EQ(try_access(t, &owner_a, a2, 0, NIC_QPN_NONE, 0x900000, 8), NIC_TPT_R_BAD_STATE);
	NST_EQ(try_access(t, &owner_b, b1, 0, NIC_QPN_NONE, MR_VA, 8), NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_b, bw, NIC_ACCESS_REMOTE_READ, QP_B, MW_VA, 8), NIC_TPT_R_NONE);
	NST_EQ(tpt_release_owner(t, 1), 0);
	NST_EQ(tpt_release_owner(t, 3), 0);
	NST_EQ_U(tpt_in_use(t), 2);
	NST_EQ(tpt_release_owner(t, 2), 2);
	NST_EQ_U(tpt_in_use(t), 0);
	tpt_destroy(t);
}

static void test_release_owner_with_dma_in_flight_frees_on_last_put(void)
{
	struct tpt *t = make_tpt(16);
	uint32_t mr = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	uint32_t mw = bind_mw(t, &owner_a, alloc_mw(t, &owner_a), mr, MW_VA, MW_LEN,
			      NIC_ACCESS_REMOTE_READ, QP_A);
	uint32_t mr2 = reg(t, &owner_a, 0x900000, PAGE, 0);
	uint32_t i_mw = hold(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8);
	uint32_t i_mr2 = hold(t, &owner_a, mr2, 0, NIC_QPN_NONE, 0x900000, 8);
	uint32_t i_mr = hold(t, &owner_a, mr, 0, NIC_QPN_NONE, MR_VA, 8);
	uint32_t b1 = reg(t, &owner_b, 0x1000, PAGE, 0);
	struct tpt_entry_view v;
	uint32_t done = 0;

	NST_EQ(tpt_release_owner(t, 1), 3);
	/* Window and mr2 drain; mr drains and also waits for its window. */
	NST_EQ_U(tpt_in_use(t), 4);
	NST_REQUIRE_EQ(tpt_lookup(t, mr, &v), 0);
	NST_EQ(v.state, TPT_INVALIDATING);
	NST_EQ(try_access(t, &owner_a, mr, 0, NIC_QPN_NONE, MR_VA, 8), NIC_TPT_R_BAD_STATE);
	NST_TRUE(!tpt_put(t, i_mr, &done));
	NST_EQ_U(done, 0);
	NST_EQ_U(tpt_in_use(t), 4);
	NST_TRUE(tpt_put(t, i_mr2, &done));
	NST_EQ_U(done, mr2);
	NST_EQ_U(tpt_in_use(t), 3);
	NST_TRUE(tpt_put(t, i_mw, &done));
	NST_EQ_U(done, mw);
	NST_EQ_U(tpt_in_use(t), 1);
	NST_EQ(tpt_lookup(t, mr, &v), -ENOENT);
	NST_EQ(tpt_lookup(t, b1, &v), 0);
	tpt_destroy(t);
}

/* ---- Fault log and counters -------------------------------------------------- */

static void test_fault_record_names_key_rule_and_who_changed_the_entry(void)
{
	const struct tpt_owner binder = {.ctx_id = owner_a.ctx_id, .pid = 303};
	struct tpt *t = make_tpt(4);
	uint32_t old = reg(t, &owner_a, 0x1000, PAGE, NIC_ACCESS_LOCAL_WRITE);
	uint32_t cur;
	struct tpt_entry_view v;
	struct tpt_fault rec[4];
	enum nic_tpt_reason why = NIC_TPT_R_NONE;
	struct tpt_grant g;
	uint64_t before, after;

	NST_EQ(tpt_dereg_mr(t, 1, old), 0);
	cur = reg(t, &owner_b, 0x7000, 2 * PAGE, NIC_ACCESS_REMOTE_READ);
	NST_REQUIRE_EQ(tpt_lookup(t, cur, &v), 0);
	NST_EQ_U(tpt_faults(t, rec, 4), 0);

	before = realtime_ns();
	NST_EQ(tpt_check(t, &owner_a, old, NIC_ACCESS_LOCAL_WRITE, QP_A, 0x1010, 32, &g, &why),
	       -EACCES);
	after = realtime_ns();
	NST_EQ(why, NIC_TPT_R_STALE_KEY);
	NST_REQUIRE_EQ(tpt_faults(t, rec, 4), 1);
	NST_TRUE(rec[0].when_ns >= before && rec[0].when_ns <= after);
	NST_EQ_U(rec[0].key, old);
	NST_EQ(rec[0].reason, NIC_TPT_R_STALE_KEY);
	NST_EQ_U(rec[0].access, NIC_ACCESS_LOCAL_WRITE);
	NST_EQ_U(rec[0].va, 0x1010);
	NST_EQ_U(rec[0].len, 32);
	NST_EQ_U(rec[0].ctx_id, owner_a.ctx_id);
	NST_EQ_U(rec[0].pid, owner_a.pid);
	NST_EQ_U(rec[0].qpn, QP_A);
	NST_EQ_U(rec[0].entry_key, cur);
	NST_EQ(rec[0].entry_state, TPT_VALID);
	NST_EQ_U(rec[0].entry_va, 0x7000);
	NST_EQ_U(rec[0].entry_len, 2 * PAGE);
	NST_EQ_U(rec[0].entry_access, NIC_ACCESS_REMOTE_READ);
	NST_EQ(rec[0].entry_type, TPT_MR);
	NST_EQ_U(rec[0].entry_pid, owner_b.pid);
	NST_EQ_U(rec[0].entry_changed_ns, v.changed_ns);
	NST_EQ_U(rec[0].entry_ctx_id, owner_b.ctx_id);
	NST_EQ_U(rec[0].entry_qpn, NIC_QPN_NONE);
	/* Nobody named a remote requester. */
	NST_EQ_U(rec[0].peer_qpn, NIC_QPN_NONE);
	NST_EQ_U(rec[0].peer_addr, 0);

	/* The NIC names the requester of the refusal just recorded, and only of it. */
	tpt_fault_set_peer(t, 0x020012c6u, 77, 0x123456, 0x0a);
	NST_REQUIRE_EQ(tpt_faults(t, rec, 4), 1);
	NST_EQ_U(rec[0].peer_addr, 0x020012c6u);
	NST_EQ_U(rec[0].peer_qpn, 77);
	NST_EQ_U(rec[0].peer_psn, 0x123456);
	NST_EQ_U(rec[0].peer_opcode, 0x0a);

	/* No entry behind the index: entry fields are zero, entry key 0. */
	NST_EQ(tpt_check(t, &owner_b, NIC_KEY_MAKE(99, 3), 0, NIC_QPN_NONE, 1, 2, &g, NULL),
	       -EACCES);
	NST_REQUIRE_EQ(tpt_faults(t, rec, 4), 2);
	NST_EQ_U(rec[0].key, old);
	NST_EQ_U(rec[1].key, NIC_KEY_MAKE(99, 3));
	NST_EQ(rec[1].reason, NIC_TPT_R_BAD_INDEX);
	NST_EQ_U(rec[1].entry_key, 0);
	NST_EQ_U(rec[1].entry_va, 0);
	NST_EQ_U(rec[1].entry_pid, 0);
	NST_EQ_U(rec[1].pid, owner_b.pid);
	NST_EQ_U(rec[1].peer_qpn, NIC_QPN_NONE);
	NST_EQ_U(rec[0].peer_qpn, 77);

	/*
	 * A window refused shows its bound connection and who last changed it:
	 * here a second process of the context bound it, then the owner
	 * invalidated it.
	 */
	NST_EQ(tpt_release_owner(t, 2), 1);
	cur = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	old = bind_mw(t, &binder, alloc_mw(t, &owner_a), cur, MW_VA, MW_LEN, NIC_ACCESS_REMOTE_READ,
		      QP_A);
	NST_EQ(try_access(t, &owner_a, old, NIC_ACCESS_REMOTE_READ, QP_B, MW_VA, 8),
	       NIC_TPT_R_WRONG_QP);
	NST_EQ(tpt_invalidate_mw(t, 1, old), 0);
	NST_EQ(try_access(t, &owner_a, old, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 8),
	       NIC_TPT_R_BAD_STATE);
	NST_REQUIRE_EQ(tpt_faults(t, rec, 4), 4);
	NST_EQ_U(rec[2].entry_key, old);
	NST_EQ(rec[2].reason, NIC_TPT_R_WRONG_QP);
	NST_EQ(rec[2].entry_state, TPT_VALID);
	NST_EQ_U(rec[2].qpn, QP_B);
	NST_EQ_U(rec[2].entry_qpn, QP_A);
	NST_EQ_U(rec[2].entry_pid, binder.pid);
	NST_EQ_U(rec[3].entry_key, old);
	NST_EQ(rec[3].entry_state, TPT_REVOKED);
	NST_EQ_U(rec[3].entry_pid, owner_a.pid);
	NST_EQ_U(tpt_refusals(t, NIC_TPT_R_STALE_KEY), 1);
	NST_EQ_U(tpt_refusals(t, NIC_TPT_R_BAD_INDEX), 1);
	NST_EQ_U(tpt_refusals(t, NIC_TPT_R_WRONG_QP), 1);
	NST_EQ_U(tpt_refusals(t, NIC_TPT_R_BAD_STATE), 1);
	NST_EQ_U(tpt_refusals(t, NIC_TPT_R_MAX_), 0);
	NST_EQ_U(tpt_refusals_total(t), 4);
	tpt_destroy(t);
}

static void test_fault_log_keeps_the_newest_oldest_first(void)
{
	enum { N = TPT_FAULT_LOG + 44 };
	struct tpt *t = make_tpt(4);
	static struct tpt_fault rec[TPT_FAULT_LOG + 1];
	size_t n;

	/* The requested va numbers each refusal. */
	for (uint64_t i = 0; i < N; i++)
		NST_EQ(try_access(t, &owner_a, 0, 0, NIC_QPN_NONE, i, 1), NIC_TPT_R_BAD_INDEX);
	NST_EQ_U(tpt_refusals_total(t), N);
	NST_EQ_U(tpt_refusals(t, NIC_TPT_R_BAD_INDEX), N);
	n = tpt_faults(t, rec, TPT_FAULT_LOG + 1);
	NST_REQUIRE_EQ(n, TPT_FAULT_LOG);
	NST_EQ_U(rec[0].va, N - TPT_FAULT_LOG);
	NST_EQ_U(rec[TPT_FAULT_LOG - 1].va, N - 1);
	for (size_t i = 1; i < n; i++)
		NST_REQUIRE_EQ(rec[i].va, rec[i - 1].va + 1);
	n = tpt_faults(t, rec, 3);
	NST_REQUIRE_EQ(n, 3);
	NST_EQ_U(rec[0].va, N - 3);
	NST_EQ_U(rec[2].va, N - 1);
	NST_EQ_U(tpt_faults(t, rec, 0), 0);
	tpt_destroy(t);
}

static void test_reason_names_and_texts(void)
{
	NST_TRUE(strcmp(tpt_reason_name(NIC_TPT_R_STALE_KEY), "STALE_KEY") == 0);
	NST_TRUE(strcmp(tpt_reason_name(NIC_TPT_R_OUT_OF_RANGE), "OUT_OF_RANGE") == 0);
	NST_TRUE(strcmp(tpt_reason_str(NIC_TPT_R_WRONG_QP),
			"window is bound to another connection") == 0);
	for (int r = 0; r < NIC_TPT_R_MAX_; r++) {
		NST_TRUE(tpt_reason_name((enum nic_tpt_reason)r)[0] != '\0');
		NST_TRUE(tpt_reason_str((enum nic_tpt_reason)r)[0] != '\0');
	}
	NST_TRUE(strcmp(tpt_reason_name(NIC_TPT_R_MAX_), "UNKNOWN") == 0);
	NST_TRUE(strcmp(tpt_reason_str((enum nic_tpt_reason)1000), "unknown reason") == 0);
}

/* ---- Listing ------------------------------------------------------------------ */

static void test_list_visits_live_entries_in_index_order_with_cursor(void)
{
	struct tpt *t = make_tpt(16);
	uint32_t k[6];
	struct tpt_entry_view v[4];
	uint32_t cursor = 0, held;
	size_t n;

	for (int i = 0; i < 5; i++)
		k[i] = reg(t, &owner_a, MR_VA, MR_LEN, MR_ACCESS);
	k[5] = bind_mw(t, &owner_a, alloc_mw(t, &owner_a), k[4], MW_VA, MW_LEN,
		       NIC_ACCESS_REMOTE_READ, QP_A);
	NST_EQ(tpt_dereg_mr(t, 1, k[1]), 0);
	NST_EQ(tpt_dereg_mr(t, 1, k[3]), 0);
	held = hold(t, &owner_a, k[2], 0, NIC_QPN_NONE, MR_VA, 8);
	NST_EQ(tpt_dereg_mr(t, 1, k[2]), -EINPROGRESS); /* draining entries are still listed */

	n = tpt_list(t, &cursor, v, 2);
	NST_REQUIRE_EQ(n, 2);
	NST_EQ_U(v[0].key, k[0]);
	NST_EQ_U(v[1].key, k[2]);
	NST_EQ(v[1].state, TPT_INVALIDATING);
	NST_EQ_U(cursor, NIC_KEY_INDEX(k[2]) + 1);
	n = tpt_list(t, &cursor, v, 2);
	NST_REQUIRE_EQ(n, 2);
	NST_EQ_U(v[0].key, k[4]);
	NST_EQ_U(v[1].key, k[5]);
	NST_EQ(v[1].type, TPT_MW);
	NST_EQ_U(v[1].mr_key, k[4]);
	NST_EQ(tpt_list(t, &cursor, v, 2), 0);
	NST_EQ(tpt_list(t, &cursor, v, 2), 0);

	/* One call with room for all, and a cursor that starts mid-table. */
	cursor = 0;
	NST_EQ(tpt_list(t, &cursor, v, 4), 4);
	cursor = NIC_KEY_INDEX(k[2]);
	NST_REQUIRE_EQ(tpt_list(t, &cursor, v, 1), 1);
	NST_EQ_U(v[0].key, k[2]);
	cursor = 0;
	NST_EQ(tpt_list(t, &cursor, v, 0), 0);

	NST_TRUE(tpt_put(t, held, NULL));
	NST_EQ(tpt_release_owner(t, 1), 3);
	cursor = 0;
	NST_EQ(tpt_list(t, &cursor, v, 4), 0);
	tpt_destroy(t);
}

/* R4 at the TPT: behind a window, the region's own key reaches nothing remotely. */
static void test_window_grants_remote_access_its_region_lacks(void)
{
	struct tpt *t = make_tpt(16);
	const uint32_t rw = NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE;
	uint32_t mr = reg(t, &owner_a, MR_VA, MR_LEN, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_MW_BIND);
	uint32_t mw = bind_mw(t, &owner_a, alloc_mw(t, &owner_a), mr, MW_VA, MW_LEN, rw, QP_A);

	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_WRITE, QP_A, MW_VA, 64),
	       NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_a, mw, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 64),
	       NIC_TPT_R_NONE);
	NST_EQ(try_access(t, &owner_a, mr, NIC_ACCESS_REMOTE_READ, QP_A, MW_VA, 64),
	       NIC_TPT_R_NO_ACCESS);
	NST_EQ(try_access(t, &owner_a, mr, NIC_ACCESS_REMOTE_WRITE, QP_B, MW_VA, 64),
	       NIC_TPT_R_NO_ACCESS);
	/* Locally the region works as registered. */
	NST_EQ(try_access(t, &owner_a, mr, NIC_ACCESS_LOCAL_WRITE, NIC_QPN_NONE, MR_VA, MR_LEN),
	       NIC_TPT_R_NONE);
	tpt_destroy(t);
}

static const struct nst_test tests[] = {
    {"create_rejects_bad_capacity_and_page_size", test_create_rejects_bad_capacity_and_page_size},
    {"window_grants_remote_access_its_region_lacks",
     test_window_grants_remote_access_its_region_lacks},
    {"max_capacity_costs_no_memory_until_used", test_max_capacity_costs_no_memory_until_used},
    {"capacity_1m_fills_to_the_top_under_128mib", test_capacity_1m_fills_to_the_top_under_128mib},
    {"exhaustion_returns_enospc_and_recovers_after_a_free",
     test_exhaustion_returns_enospc_and_recovers_after_a_free},
    {"high_water_is_the_peak_in_use", test_high_water_is_the_peak_in_use},
    {"key_byte_changes_on_every_reuse_of_an_index",
     test_key_byte_changes_on_every_reuse_of_an_index},
    {"stale_key_refused_after_dereg", test_stale_key_refused_after_dereg},
    {"stale_key_refused_after_reuse_of_the_index", test_stale_key_refused_after_reuse_of_the_index},
    {"never_issued_and_out_of_table_keys_refused", test_never_issued_and_out_of_table_keys_refused},
    {"check_order_reports_earliest_broken_rule", test_check_order_reports_earliest_broken_rule},
    {"check_order_each_adjacent_pair", test_check_order_each_adjacent_pair},
    {"access_bits_local_read_implied_others_required",
     test_access_bits_local_read_implied_others_required},
    {"access_range_edges", test_access_range_edges},
    {"registration_that_wraps_is_refused", test_registration_that_wraps_is_refused},
    {"huge_access_at_top_of_address_space_does_not_wrap",
     test_huge_access_at_top_of_address_space_does_not_wrap},
    {"lookup_view_and_page_list", test_lookup_view_and_page_list},
    {"window_allocated_revoked_and_unbound", test_window_allocated_revoked_and_unbound},
    {"window_bind_grants_region_owner_memory_on_its_qp_only",
     test_window_bind_grants_region_owner_memory_on_its_qp_only},
    {"window_bound_to_no_qp_refuses_every_connection",
     test_window_bound_to_no_qp_refuses_every_connection},
    {"window_rebind_changes_key_and_moves_to_new_region",
     test_window_rebind_changes_key_and_moves_to_new_region},
    {"window_invalidate_revokes_at_once_and_keeps_key",
     test_window_invalidate_revokes_at_once_and_keeps_key},
    {"window_dealloc_frees_it_and_its_region_hold",
     test_window_dealloc_frees_it_and_its_region_hold},
    {"window_bind_errors_change_nothing", test_window_bind_errors_change_nothing},
    {"dereg_with_dma_in_flight_completes_on_last_put",
     test_dereg_with_dma_in_flight_completes_on_last_put},
    {"dealloc_window_with_dma_in_flight_holds_region_until_drained",
     test_dealloc_window_with_dma_in_flight_holds_region_until_drained},
    {"invalidate_window_with_dma_in_flight_holds_region_until_drained",
     test_invalidate_window_with_dma_in_flight_holds_region_until_drained},
    {"release_owner_frees_only_that_owners_entries",
     test_release_owner_frees_only_that_owners_entries},
    {"release_owner_with_dma_in_flight_frees_on_last_put",
     test_release_owner_with_dma_in_flight_frees_on_last_put},
    {"fault_record_names_key_rule_and_who_changed_the_entry",
     test_fault_record_names_key_rule_and_who_changed_the_entry},
    {"fault_log_keeps_the_newest_oldest_first", test_fault_log_keeps_the_newest_oldest_first},
    {"reason_names_and_texts", test_reason_names_and_texts},
    {"list_visits_live_entries_in_index_order_with_cursor",
     test_list_visits_live_entries_in_index_order_with_cursor},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return nst_main(argc, argv, "tpt", tests, NULL, NULL);
}
