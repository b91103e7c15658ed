/*
 * The RoCEv2 codec of the nicsim fabric: opcode table, encoder, decoder,
 * CRC-32 and ICRC.  fab_wire.h describes the format and the contracts.
 */
#include "fab_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

/* ---- Opcode table ---------------------------------------------------------- */

#define HDRS_LEN(h)                                                                            \
	((((h)&FAB_HDR_DETH) ? FAB_DETH_LEN : 0) + (((h)&FAB_HDR_RETH) ? FAB_RETH_LEN : 0) +   \
	 (((h)&FAB_HDR_AETH) ? FAB_AETH_LEN : 0) +                                             \
	 (((h)&FAB_HDR_ATOMICETH) ? FAB_ATOMICETH_LEN : 0) +                                   \
	 (((h)&FAB_HDR_ATOMICACKETH) ? FAB_ATOMICACKETH_LEN : 0) +                             \
	 (((h)&FAB_HDR_IETH) ? FAB_IETH_LEN : 0) + (((h)&FAB_HDR_IMMDT) ? FAB_IMMDT_LEN : 0) + \
	 (((h)&FAB_HDR_CNP_PAD) ? FAB_CNP_PAD_LEN : 0))

/* One entry; the length of the extension headers follows from the headers. */
#define OP(name, hdrs, flags)                         \
	{                                             \
		name, (hdrs), HDRS_LEN(hdrs), (flags) \
	}

#define PAY FAB_OPF_PAYLOAD
#define FIRST FAB_OPF_FIRST
#define MIDDLE FAB_OPF_MIDDLE
#define LAST FAB_OPF_LAST
#define ONLY FAB_OPF_ONLY
#define REQ FAB_OPF_REQUEST
#define RSP FAB_OPF_RESPONSE
#define SUP FAB_OPF_SUPPORTED

/*
 * IBTA volume 1, table 38 (RC and UD) and annex A17 (CNP).  Atomics,
 * invalidate and CNP are here so that their frames are refused as
 * unsupported rather than misparsed as unknown.
 */
static const struct fab_opcode_info op_table[256] = {
    [FAB_OP_SEND_FIRST] = OP("RC_SEND_FIRST", 0, PAY | FIRST | REQ | SUP),
    [FAB_OP_SEND_MIDDLE] = OP("RC_SEND_MIDDLE", 0, PAY | MIDDLE | REQ | SUP),
    [FAB_OP_SEND_LAST] = OP("RC_SEND_LAST", 0, PAY | LAST | REQ | SUP),
    [FAB_OP_SEND_LAST_WITH_IMMEDIATE] =
	OP("RC_SEND_LAST_WITH_IMMEDIATE", FAB_HDR_IMMDT, PAY | LAST | REQ | SUP),
    [FAB_OP_SEND_ONLY] = OP("RC_SEND_ONLY", 0, PAY | ONLY | REQ | SUP),
    [FAB_OP_SEND_ONLY_WITH_IMMEDIATE] =
	OP("RC_SEND_ONLY_WITH_IMMEDIATE", FAB_HDR_IMMDT, PAY | ONLY | REQ | SUP),
    [FAB_OP_RDMA_WRITE_FIRST] = OP("RC_RDMA_WRITE_FIRST", FAB_HDR_RETH, PAY | FIRST | REQ | SUP),
    [FAB_OP_RDMA_WRITE_MIDDLE] = OP("RC_RDMA_WRITE_MIDDLE", 0, PAY | MIDDLE | REQ | SUP),
    [FAB_OP_RDMA_WRITE_LAST] = OP("RC_RDMA_WRITE_LAST", 0, PAY | LAST | REQ | SUP),
    [FAB_OP_RDMA_WRITE_LAST_WITH_IMMEDIATE] =
	OP("RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", FAB_HDR_IMMDT, PAY | LAST | REQ | SUP),
    [FAB_OP_RDMA_WRITE_ONLY] = OP("RC_RDMA_WRITE_ONLY", FAB_HDR_RETH, PAY | ONLY | REQ | SUP),
    [FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE] = OP(
	"RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", FAB_HDR_RETH | FAB_HDR_IMMDT, PAY | ONLY | REQ | SUP),
    [FAB_OP_RDMA_READ_REQUEST] = OP("RC_RDMA_READ_REQUEST", FAB_HDR_RETH, ONLY | REQ | SUP),
    [FAB_OP_RDMA_READ_RESPONSE_FIRST] =
	OP("RC_RDMA_READ_RESPONSE_FIRST", FAB_HDR_AETH, PAY | FIRST | RSP | SUP),
    [FAB_OP_RDMA_READ_RESPONSE_MIDDLE] =
	OP("RC_RDMA_READ_RESPONSE_MIDDLE", 0, PAY | MIDDLE | RSP | SUP),
    [FAB_OP_RDMA_READ_RESPONSE_LAST] =
	OP("RC_RDMA_READ_RESPONSE_LAST", FAB_HDR_AETH, PAY | LAST | RSP | SUP),
    [FAB_OP_RDMA_READ_RESPONSE_ONLY] =
	OP("RC_RDMA_READ_RESPONSE_ONLY", FAB_HDR_AETH, PAY | ONLY | RSP | SUP),
    [FAB_OP_ACKNOWLEDGE] = OP("RC_ACKNOWLEDGE", FAB_HDR_AETH, ONLY | RSP | SUP),
    [FAB_OP_ATOMIC_ACKNOWLEDGE] =
	OP("RC_ATOMIC_ACKNOWLEDGE", FAB_HDR_AETH | FAB_HDR_ATOMICACKETH, ONLY | RSP),
    [FAB_OP_COMPARE_SWAP] = OP("RC_COMPARE_SWAP", FAB_HDR_ATOMICETH, ONLY | REQ),
    [FAB_OP_FETCH_ADD] = OP("RC_FETCH_ADD", FAB_HDR_ATOMICETH, ONLY | REQ),
    [FAB_OP_SEND_LAST_WITH_INVALIDATE] =
	OP("RC_SEND_LAST_WITH_INVALIDATE", FAB_HDR_IETH, PAY | LAST | REQ),
    [FAB_OP_SEND_ONLY_WITH_INVALIDATE] =
	OP("RC_SEND_ONLY_WITH_INVALIDATE", FAB_HDR_IETH, PAY | ONLY | REQ),
    [FAB_OP_UD_SEND_ONLY] = OP("UD_SEND_ONLY", FAB_HDR_DETH, PAY | ONLY | REQ | SUP),
    [FAB_OP_UD_SEND_ONLY_WITH_IMMEDIATE] =
	OP("UD_SEND_ONLY_WITH_IMMEDIATE", FAB_HDR_DETH | FAB_HDR_IMMDT, PAY | ONLY | REQ | SUP),
    [FAB_OP_CNP] = OP("CNP", FAB_HDR_CNP_PAD, ONLY),
};

_Static_assert(HDRS_LEN(FAB_HDR_ATOMICETH) == FAB_EXT_MAX, "atomics have the longest headers");
_Static_assert(HDRS_LEN(FAB_HDR_RETH | FAB_HDR_IMMDT) + FAB_HDR_BASE + FAB_MTU + FAB_ICRC_LEN ==
		   FAB_FRAME_MAX,
	       "FAB_FRAME_MAX is the longest payload-carrying frame");

const struct fab_opcode_info *fab_opcode_info(uint8_t opcode)
{
	const struct fab_opcode_info *oi = &op_table[opcode];

	return oi->name ? oi : NULL;
}

const char *fab_opcode_name(uint8_t opcode)
{
	return op_table[opcode].name ? op_table[opcode].name : "UNKNOWN";
}

int fab_opcode_parse(const char *name, uint8_t *opcode)
{
	if (!name)
		return -ENOENT;
	for (unsigned i = 0; i < 256; i++) {
		if (op_table[i].name && strcasecmp(op_table[i].name, name) == 0) {
			*opcode = (uint8_t)i;
			return 0;
		}
	}
	return -ENOENT;
}

size_t fab_pkt_hdr_len(uint8_t opcode)
{
	return op_table[opcode].name ? FAB_HDR_BASE + op_table[opcode].ext_len : 0;
}

/* ---- AETH ------------------------------------------------------------------- */

bool fab_aeth_syndrome_valid(uint8_t syndrome)
{
	switch (syndrome & ~FAB_AETH_VALUE_MASK) {
	case FAB_AETH_ACK:
	case FAB_AETH_RNR_NAK: return true;
	case FAB_AETH_NAK: return (syndrome & FAB_AETH_VALUE_MASK) <= FAB_NAK_CODE_MAX_;
	default: return false; /* bit 7 set, or the reserved kind 10 */
	}
}

uint32_t fab_rnr_timer_us(unsigned code)
{
	static const uint32_t us[32] = {
	    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,    320,
	    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
	    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
	};

	return us[code & FAB_AETH_VALUE_MASK];
}

/* ---- Errors ------------------------------------------------------------------ */

static const char *const err_names[] = {
#define ERR_NAME(name, desc) #name,
    FAB_WIRE_ERRORS(ERR_NAME)
#undef ERR_NAME
};

static const char *const err_descs[] = {
#define ERR_DESC(name, desc) desc,
    FAB_WIRE_ERRORS(ERR_DESC)
#undef ERR_DESC
};

_Static_assert(sizeof(err_names) / sizeof(err_names[0]) == FAB_WIRE_E_MAX_, "one name a reason");

const char *fab_wire_err_name(enum fab_wire_err err)
{
	return (unsigned)err < FAB_WIRE_E_MAX_ ? err_names[err] : "?";
}

const char *fab_wire_err_str(enum fab_wire_err err)
{
	return (unsigned)err < FAB_WIRE_E_MAX_ ? err_descs[err] : "unknown reason";
}

/* ---- CRC-32 ------------------------------------------------------------------ */

/*
 * Slicing-by-8 (Intel's method, as in zlib and Linux crc32_le): eight tables
 * of 256 entries, table k giving the CRC register after one byte followed by
 * k zero bytes, so that 8 bytes take 8 lookups and no bit loop: about 2 GB/s
 * on the project's machines.  On x86-64 CPUs with carry-less multiply, runs
 * of 64 bytes or more are folded with PCLMULQDQ instead (crc_clmul below,
 * several times faster), since every frame is checksummed twice, by the
 * sender and by the receiver.
 *
 * The tables are built by the compiler, not at run time (no mutable state):
 * the CRC register update is linear over GF(2), so entry n of a table is the
 * XOR of the entries for the bits of n, and only those 8 single-bit entries
 * per table are spelled out below.  Table k's entry for the byte 1 << i is
 * x^(8k + 7 - i) applied to the polynomial, i.e. the reflected polynomial
 * 0xedb88320 shifted through 8k + 7 - i more steps of the bitwise CRC.  The
 * unit tests compare every table against a bitwise CRC.
 */
#define CRC_B0                                                                                     \
	0x77073096u, 0xee0e612cu, 0x076dc419u, 0x0edb8832u, 0x1db71064u, 0x3b6e20c8u, 0x76dc4190u, \
	    0xedb88320u
#define CRC_B1                                                                                     \
	0x191b3141u, 0x32366282u, 0x646cc504u, 0xc8d98a08u, 0x4ac21251u, 0x958424a2u, 0xf0794f05u, \
	    0x3b83984bu
#define CRC_B2                                                                                     \
	0x01c26a37u, 0x0384d46eu, 0x0709a8dcu, 0x0e1351b8u, 0x1c26a370u, 0x384d46e0u, 0x709a8dc0u, \
	    0xe1351b80u
#define CRC_B3                                                                                     \
	0xb8bc6765u, 0xaa09c88bu, 0x8f629757u, 0xc5b428efu, 0x5019579fu, 0xa032af3eu, 0x9b14583du, \
	    0xed59b63bu
#define CRC_B4                                                                                     \
	0x3d6029b0u, 0x7ac05360u, 0xf580a6c0u, 0x30704bc1u, 0x60e09782u, 0xc1c12f04u, 0x58f35849u, \
	    0xb1e6b092u
#define CRC_B5                                                                                     \
	0xcb5cd3a5u, 0x4dc8a10bu, 0x9b914216u, 0xec53826du, 0x03d6029bu, 0x07ac0536u, 0x0f580a6cu, \
	    0x1eb014d8u
#define CRC_B6                                                                                     \
	0xa6770bb4u, 0x979f1129u, 0xf44f2413u, 0x33ef4e67u, 0x67de9cceu, 0xcfbd399cu, 0x440b7579u, \
	    0x8816eaf2u
#define CRC_B7                                                                                     \
	0xccaa009eu, 0x4225077du, 0x844a0efau, 0xd3e51bb5u, 0x7cbb312bu, 0xf9766256u, 0x299dc2edu, \
	    0x533b85dau

#define CRC_E_(n, b0, b1, b2, b3, b4, b5, b6, b7)                                   \
	((((n) >> 0 & 1u) * b0) ^ (((n) >> 1 & 1u) * b1) ^ (((n) >> 2 & 1u) * b2) ^ \
	 (((n) >> 3 & 1u) * b3) ^ (((n) >> 4 & 1u) * b4) ^ (((n) >> 5 & 1u) * b5) ^ \
	 (((n) >> 6 & 1u) * b6) ^ (((n) >> 7 & 1u) * b7))
/*
 * Table k's entry n.  k travels as a bare number and is pasted into the name
 * of its basis only here; the extra level then expands that name into the
 * eight arguments of CRC_E_.
 */
#define CRC_E(n, k) CRC_E1(n, CRC_B##k)
#define CRC_E1(n, basis) CRC_E_(n, basis)
#define CRC_R4(n, k) CRC_E(n, k), CRC_E(n + 1, k), CRC_E(n + 2, k), CRC_E(n + 3, k)
#define CRC_R16(n, k) CRC_R4(n, k), CRC_R4(n + 4, k), CRC_R4(n + 8, k), CRC_R4(n + 12, k)
#define CRC_R64(n, k) CRC_R16(n, k), CRC_R16(n + 16, k), CRC_R16(n + 32, k), CRC_R16(n + 48, k)
#define CRC_TABLE(k)                                                            \
	{                                                                       \
		CRC_R64(0, k), CRC_R64(64, k), CRC_R64(128, k), CRC_R64(192, k) \
	}

static const uint32_t crc_tab[8][256] = {
    CRC_TABLE(0), CRC_TABLE(1), CRC_TABLE(2), CRC_TABLE(3),
    CRC_TABLE(4), CRC_TABLE(5), CRC_TABLE(6), CRC_TABLE(7),
};

/* Little-endian load; compilers turn it into one load on x86. */
static inline uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Advance the raw CRC register (no inversion) over n bytes with the tables. */
static uint32_t crc_sliced(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint32_t lo = crc ^ le32(p);
		uint32_t hi = le32(p + 4);

		crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		      crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^
		      crc_tab[2][(hi >> 8) & 0xff] ^ crc_tab[1][(hi >> 16) & 0xff] ^
		      crc_tab[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_CLMUL 1

/*
 * Folding with carry-less multiplication (Intel, "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ", 2009).  The message is read as four
 * 128-bit lanes; each step multiplies a lane by x^512 modulo the polynomial
 * (as two 64x64 carry-less products) and adds the next 64 bytes, which keeps
 * the message's remainder unchanged.  The lanes are then folded into one
 * with x^128, and that last 16 bytes plus the tail go through the tables
 * from a zero register, which gives the same CRC as the whole message, so no
 * Barrett reduction is needed.  The constants, in the bit-reflected domain
 * and shifted left by one as the method requires: (x^(n) mod P) for n =
 * 4*128+32 and 4*128-32 (fold by 512 bits), 128+32 and 128-32 (by 128).
 */
#define CLMUL_K1 0x154442bd4ll
#define CLMUL_K2 0x1c6e41596ll
#define CLMUL_K3 0x1751997d0ll
#define CLMUL_K4 0x0ccaa009ell

__attribute__((target("pclmul,sse2"))) static inline __m128i clmul_fold(__m128i x, __m128i k,
									__m128i data)
{
	__m128i lo = _mm_clmulepi64_si128(x, k, 0x00); /* low half by the low constant */
	__m128i hi = _mm_clmulepi64_si128(x, k, 0x11); /* high half by the high one */

	return _mm_xor_si128(_mm_xor_si128(lo, hi), data);
}

/*
 * The end of the folding: the last 16 bytes, as a 128-bit value, reduced to
 * the 32-bit register with carry-less products instead of the tables (which
 * the data just folded has pushed out of the L1 cache): 128 bits to 96 with
 * x^96, 96 to 64 with x^64, then Barrett's reduction modulo P with
 * mu = floor(x^64 / P).  Constants as above, for the IEEE 802.3 polynomial
 * (the same values as in Linux's crc32-pclmul and in the Intel paper).
 */
#define CLMUL_X64 0x163cd6124ll /* x^64 mod P */
#define CLMUL_P 0x1db710641ll   /* P */
#define CLMUL_MU 0x1f7011641ll  /* floor(x^64 / P) */

__attribute__((target("pclmul,sse2,sse4.1"))) static inline uint32_t clmul_reduce(__m128i x)
{
	const __m128i k34 = _mm_set_epi64x(CLMUL_K4, CLMUL_K3);
	const __m128i x64 = _mm_set_epi64x(0, CLMUL_X64);
	const __m128i pmu = _mm_set_epi64x(CLMUL_MU, CLMUL_P);
	const __m128i lo32 = _mm_set_epi32(0, 0, 0, -1);
	__m128i t;

	t = _mm_clmulepi64_si128(x, k34, 0x10); /* low 64 bits by x^96 */
	x = _mm_xor_si128(_mm_srli_si128(x, 8), t);
	t = _mm_srli_si128(x, 4);
	x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, lo32), x64, 0x00), t);
	t = _mm_clmulepi64_si128(_mm_and_si128(x, lo32), pmu, 0x10); /* quotient */
	t = _mm_clmulepi64_si128(_mm_and_si128(t, lo32), pmu, 0x00); /* times P */
	return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x, t), 1);
}

/*
 * The end both folding loops share: four lanes x0..x3 (the last 64 bytes
 * folded) into one, then the whole 16-byte blocks left, then the reduction
 * and the tables for the last few bytes.
 */
__attribute__((target("pclmul,sse2,sse4.1"))) static inline uint32_t
clmul_finish(__m128i x0, __m128i x1, __m128i x2, __m128i x3, const uint8_t *p, size_t n)
{
	const __m128i k34 = _mm_set_epi64x(CLMUL_K4, CLMUL_K3);

	x0 = clmul_fold(x0, k34, x1);
	x0 = clmul_fold(x0, k34, x2);
	x0 = clmul_fold(x0, k34, x3);
	for (; n >= 16; p += 16, n -= 16)
		x0 = clmul_fold(x0, k34, _mm_loadu_si128((const __m128i *)p));
	return crc_sliced(clmul_reduce(x0), p, n);
}

/* As crc_sliced, for n >= 64 on a CPU with PCLMULQDQ. */
__attribute__((target("pclmul,sse2,sse4.1"))) static uint32_t crc_clmul(uint32_t crc,
									const uint8_t *p, size_t n)
{
	const __m128i k12 = _mm_set_epi64x(CLMUL_K2, CLMUL_K1);
	__m128i x0 = _mm_loadu_si128((const __m128i *)p);
	__m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
	__m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
	__m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));

	x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)crc));
	for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
		x0 = clmul_fold(x0, k12, _mm_loadu_si128((const __m128i *)p));
		x1 = clmul_fold(x1, k12, _mm_loadu_si128((const __m128i *)(p + 16)));
		x2 = clmul_fold(x2, k12, _mm_loadu_si128((const __m128i *)(p + 32)));
		x3 = clmul_fold(x3, k12, _mm_loadu_si128((const __m128i *)(p + 48)));
	}
	return clmul_finish(x0, x1, x2, x3, p, n);
}

/*
 * The same folding four 128-bit lanes at a time with the 512-bit
 * VPCLMULQDQ: four 512-bit registers take 256 bytes per step, each folded
 * by x^2048 (constants as above for n = 2048+32 and 2048-32), then one
 * register by x^512 per 64 bytes; its four lanes are then x0..x3 of
 * crc_clmul.  About four times the bytes per cycle of crc_clmul, which
 * matters because every frame is checksummed by its sender and its
 * receiver.
 */
#define CLMUL_K5 0x11542778all /* n = 2048+32 */
#define CLMUL_K6 0x1322d1430ll /* n = 2048-32 */
#define CLMUL_K7 0x01072db28ll /* n = 4096+32 */
#define CLMUL_K8 0x1d741f35cll /* n = 4096-32 */

#define VPCLMUL_TARGET "pclmul,sse2,sse4.1,avx2,avx512f,avx512vl,vpclmulqdq"

__attribute__((target(VPCLMUL_TARGET))) static inline __m512i zfold(__m512i x, __m512i k,
								    __m512i data)
{
	__m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
	__m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);

	return _mm512_ternarylogic_epi64(lo, hi, data, 0x96); /* lo ^ hi ^ data */
}

/*
 * As crc_sliced, on a CPU with AVX-512 and VPCLMULQDQ, for the 256 bytes
 * held in z0..z3 followed by the n bytes at p.
 */
__attribute__((target(VPCLMUL_TARGET))) static inline uint32_t
crc_vpclmul_z(uint32_t crc, __m512i z0, __m512i z1, __m512i z2, __m512i z3, const uint8_t *p,
	      size_t n)
{
	const __m512i k4096 = _mm512_broadcast_i32x4(_mm_set_epi64x(CLMUL_K8, CLMUL_K7));
	const __m512i k2048 = _mm512_broadcast_i32x4(_mm_set_epi64x(CLMUL_K6, CLMUL_K5));
	const __m512i k512 = _mm512_broadcast_i32x4(_mm_set_epi64x(CLMUL_K2, CLMUL_K1));

	z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
	if (n >= 256) {
		/* Eight registers, 512 bytes a step, each folded by x^4096:
		 * twice the independent work of four, which the multiplier's
		 * latency otherwise leaves idle. */
		__m512i z4 = _mm512_loadu_si512(p);
		__m512i z5 = _mm512_loadu_si512(p + 64);
		__m512i z6 = _mm512_loadu_si512(p + 128);
		__m512i z7 = _mm512_loadu_si512(p + 192);

		for (p += 256, n -= 256; n >= 512; p += 512, n -= 512) {
			z0 = zfold(z0, k4096, _mm512_loadu_si512(p));
			z1 = zfold(z1, k4096, _mm512_loadu_si512(p + 64));
			z2 = zfold(z2, k4096, _mm512_loadu_si512(p + 128));
			z3 = zfold(z3, k4096, _mm512_loadu_si512(p + 192));
			z4 = zfold(z4, k4096, _mm512_loadu_si512(p + 256));
			z5 = zfold(z5, k4096, _mm512_loadu_si512(p + 320));
			z6 = zfold(z6, k4096, _mm512_loadu_si512(p + 384));
			z7 = zfold(z7, k4096, _mm512_loadu_si512(p + 448));
		}
		z0 = zfold(z0, k2048, z4);
		z1 = zfold(z1, k2048, z5);
		z2 = zfold(z2, k2048, z6);
		z3 = zfold(z3, k2048, z7);
	}
	for (; n >= 256; p += 256, n -= 256) {
		z0 = zfold(z0, k2048, _mm512_loadu_si512(p));
		z1 = zfold(z1, k2048, _mm512_loadu_si512(p + 64));
		z2 = zfold(z2, k2048, _mm512_loadu_si512(p + 128));
		z3 = zfold(z3, k2048, _mm512_loadu_si512(p + 192));
	}
	z0 = zfold(z0, k512, z1);
	z0 = zfold(z0, k512, z2);
	z0 = zfold(z0, k512, z3);
	for (; n >= 64; p += 64, n -= 64)
		z0 = zfold(z0, k512, _mm512_loadu_si512(p));
	return clmul_finish(_mm512_extracti32x4_epi32(z0, 0), _mm512_extracti32x4_epi32(z0, 1),
			    _mm512_extracti32x4_epi32(z0, 2), _mm512_extracti32x4_epi32(z0, 3), p,
			    n);
}

/* The same, for the 256 bytes at head followed by the n bytes at p (head
 * may be p - 256: one buffer). */
__attribute__((target(VPCLMUL_TARGET))) static uint32_t
crc_vpclmul(uint32_t crc, const uint8_t *head, const uint8_t *p, size_t n)
{
	return crc_vpclmul_z(crc, _mm512_loadu_si512(head), _mm512_loadu_si512(head + 64),
			     _mm512_loadu_si512(head + 128), _mm512_loadu_si512(head + 192), p, n);
}

/* The CPU model is read once by libgcc's constructor: a load and a test. */
static inline bool have_vpclmul(void)
{
	return __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512vl");
}
#endif

/* Advance the raw CRC register (no inversion) over n bytes. */
static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n)
{
#ifdef HAVE_CLMUL
	if (n >= 256 && have_vpclmul())
		return crc_vpclmul(crc, p, p + 256, n - 256);
	if (n >= 64 && __builtin_cpu_supports("pclmul"))
		return crc_clmul(crc, p, n);
#endif
	return crc_sliced(crc, p, n);
}

uint32_t fab_crc32(uint32_t crc, const void *buf, size_t len)
{
	return ~crc_update(~crc, buf, len);
}

uint32_t fab_crc32_sliced(uint32_t crc, const void *buf, size_t len)
{
	return ~crc_sliced(~crc, buf, len);
}

/* Offsets of the parts of the ICRC pseudo-header. */
enum {
	PH_LRH = 0,
	PH_IP = 8,
	PH_UDP = PH_IP + FAB_IP4_HLEN,
	PH_BTH = PH_UDP + FAB_UDP_HLEN,
	PH_LEN = PH_BTH + FAB_BTH_LEN,
};

/*
 * The pseudo-header is the frame from PH_AT on (IPv4, UDP and BTH headers
 * behind the 8 bytes of source MAC and EtherType, which stand for the
 * LRH) with these bytes set to all ones: the LRH, what routers may change
 * (TOS, TTL, and the IPv4 checksum that follows them), the UDP checksum,
 * and the BTH byte with FECN and BECN.
 */
#define PH_AT (FAB_ETH_HLEN - PH_IP)
static const uint8_t ph_ones[64] __attribute__((aligned(64))) = {
    [PH_LRH] = 0xff,
    [PH_LRH + 1] = 0xff,
    [PH_LRH + 2] = 0xff,
    [PH_LRH + 3] = 0xff,
    [PH_LRH + 4] = 0xff,
    [PH_LRH + 5] = 0xff,
    [PH_LRH + 6] = 0xff,
    [PH_LRH + 7] = 0xff,
    [PH_IP + offsetof(struct fab_ip4_hdr, tos)] = 0xff,
    [PH_IP + offsetof(struct fab_ip4_hdr, ttl)] = 0xff,
    [PH_IP + offsetof(struct fab_ip4_hdr, csum)] = 0xff,
    [PH_IP + offsetof(struct fab_ip4_hdr, csum) + 1] = 0xff,
    [PH_UDP + offsetof(struct fab_udp_hdr, csum)] = 0xff,
    [PH_UDP + offsetof(struct fab_udp_hdr, csum) + 1] = 0xff,
    [PH_BTH + offsetof(struct fab_bth, fb)] = 0xff,
};
_Static_assert(PH_LEN <= sizeof(ph_ones), "the mask covers the pseudo-header");
_Static_assert(PH_AT + PH_LEN == FAB_HDR_BASE, "the pseudo-header ends with the BTH");

#ifdef HAVE_CLMUL
/*
 * fab_icrc of a frame of at least PH_AT + 256 bytes on a CPU with
 * VPCLMULQDQ: the first 256 bytes of the message are loaded from the frame
 * and the pseudo-header made in a register, rather than copied out (which
 * costs a store-forwarding stall on every frame).
 */
__attribute__((target(VPCLMUL_TARGET))) static uint32_t icrc_vpclmul(const uint8_t *frame,
								     size_t len)
{
	const uint8_t *ph = frame + PH_AT;
	__m512i z0 = _mm512_or_si512(_mm512_loadu_si512(ph), _mm512_load_si512(ph_ones));

	return ~crc_vpclmul_z(0xffffffffu, z0, _mm512_loadu_si512(ph + 64),
			      _mm512_loadu_si512(ph + 128), _mm512_loadu_si512(ph + 192), ph + 256,
			      len - PH_AT - 256);
}
#endif

uint32_t fab_icrc(const uint8_t *frame, size_t len_without_icrc)
{
	/* The pseudo-header, then the first bytes of the rest of the frame:
	 * one message for the folding, which would otherwise start again
	 * (and end through the tables) after the 48 bytes of the first part. */
	uint8_t msg[256];
	const uint8_t *rest;
	size_t n, first;
	uint32_t crc;

	if (!frame || len_without_icrc < FAB_HDR_BASE)
		return 0;
#ifdef HAVE_CLMUL
	if (len_without_icrc >= PH_AT + sizeof(msg) && have_vpclmul())
		return icrc_vpclmul(frame, len_without_icrc);
#endif
	for (size_t i = 0; i < PH_LEN; i++)
		msg[i] = frame[PH_AT + i] | ph_ones[i];
	n = len_without_icrc - FAB_HDR_BASE;
	first = n < sizeof(msg) - PH_LEN ? n : sizeof(msg) - PH_LEN;
	memcpy(msg + PH_LEN, frame + FAB_HDR_BASE, first);
	rest = frame + FAB_HDR_BASE + first;
	n -= first;
	crc = crc_update(0xffffffffu, msg, PH_LEN + first);
	return ~crc_update(crc, rest, n);
}

/*
 * fab_icrc of a frame whose first hlen bytes (at least FAB_HDR_BASE, or the
 * whole message) are taken from hdr, a private copy of them, and the rest
 * from the frame where it lies.  The decoder checks the ICRC this way, so
 * that the headers it goes on to decode are the bytes the ICRC covered.
 * The message's first 256 bytes are assembled in msg as fab_icrc's are,
 * from the copy for the headers and from the frame after them.
 */
static uint32_t icrc_from_copy(const uint8_t *hdr, size_t hlen, const uint8_t *frame,
			       size_t len_without_icrc)
{
	uint8_t msg[256];
	const uint8_t *rest;
	size_t n, first, copied;

	for (size_t i = 0; i < PH_LEN; i++)
		msg[i] = hdr[PH_AT + i] | ph_ones[i];
	n = len_without_icrc - FAB_HDR_BASE;
	first = n < sizeof(msg) - PH_LEN ? n : sizeof(msg) - PH_LEN;
	copied = hlen - FAB_HDR_BASE < first ? hlen - FAB_HDR_BASE : first;
	memcpy(msg + PH_LEN, hdr + FAB_HDR_BASE, copied);
	memcpy(msg + PH_LEN + copied, frame + FAB_HDR_BASE + copied, first - copied);
	rest = frame + FAB_HDR_BASE + first;
	n -= first;
#ifdef HAVE_CLMUL
	if (PH_LEN + first == sizeof(msg) && have_vpclmul())
		return ~crc_vpclmul(0xffffffffu, msg, rest, n);
#endif
	return ~crc_update(crc_update(0xffffffffu, msg, PH_LEN + first), rest, n);
}

/* The ICRC goes on the wire least significant byte first, as rxe writes it. */
static void put_icrc(uint8_t *frame, size_t len_without_icrc)
{
	uint32_t crc = fab_icrc(frame, len_without_icrc);
	uint8_t *p = frame + len_without_icrc;

	p[0] = (uint8_t)crc;
	p[1] = (uint8_t)(crc >> 8);
	p[2] = (uint8_t)(crc >> 16);
	p[3] = (uint8_t)(crc >> 24);
}

/* ---- Internet checksums --------------------------------------------------------- */

/* Add n bytes as big-endian 16-bit words (a last odd byte padded with 0). */
static uint64_t sum16(uint64_t sum, const uint8_t *p, size_t n)
{
	for (; n >= 2; p += 2, n -= 2)
		sum += fab_get16(p);
	if (n)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

/* Fold a sum to 16 bits with end-around carry (ones' complement sum). */
static uint16_t fold16(uint64_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/*
 * The folded ones' complement sum of an IPv4 header's ten 16-bit words,
 * the checksum field counted as zero when without_csum.  The sum does not
 * depend on byte order (RFC 1071, section 2): the words are added as the
 * CPU loads them, and the sum is in that order too.
 */
static uint16_t ip4_sum(const struct fab_ip4_hdr *hdr, bool without_csum)
{
	uint16_t w[FAB_IP4_HLEN / 2];
	uint64_t sum = 0;

	memcpy(w, hdr, sizeof(w));
	if (without_csum)
		w[offsetof(struct fab_ip4_hdr, csum) / 2] = 0;
	for (size_t i = 0; i < FAB_IP4_HLEN / 2; i++)
		sum += w[i];
	return fold16(sum);
}

uint16_t fab_ip4_csum(const struct fab_ip4_hdr *hdr)
{
	return (uint16_t)~ntohs(ip4_sum(hdr, true));
}

/*
 * The checksum of the header write_headers builds, from its values: the
 * frame's header was just written a byte at a time, and reading it back
 * as words would wait for those stores.  Identical to fab_ip4_csum of it.
 */
static uint16_t ip4_csum_of(uint32_t saddr, uint32_t daddr, size_t ip_len)
{
	uint8_t a[8];
	uint64_t sum =
	    0x4500u + ip_len + FAB_IP4_DF + ((unsigned)FAB_IP4_TTL << 8 | FAB_IPPROTO_UDP);

	memcpy(a, &saddr, 4);
	memcpy(a + 4, &daddr, 4);
	sum = sum16(sum, a, sizeof(a));
	return (uint16_t)~fold16(sum);
}

/* ---- Addresses ------------------------------------------------------------------ */

void fab_mac_from_ip(uint32_t ip, uint8_t mac[6])
{
	mac[0] = 0x02; /* locally administered, unicast */
	mac[1] = 0x00;
	memcpy(mac + 2, &ip, 4); /* network order: the address bytes as written */
}

uint16_t fab_udp_sport(uint32_t qpn)
{
	/* Fibonacci hashing: the top 14 bits of the product spread any QPN. */
	return (uint16_t)(0xc000u | ((qpn & FAB_MASK24) * 0x9e3779b1u) >> 18);
}

/* ---- Encoder -------------------------------------------------------------------- */

/* Check everything about p before anything is written. */
static int check_pkt(const struct fab_pkt *p, const struct fab_opcode_info **oip)
{
	const struct fab_opcode_info *oi = fab_opcode_info(p->opcode);

	if (!oi)
		return -EINVAL;
	if (!(oi->flags & FAB_OPF_SUPPORTED))
		return -EOPNOTSUPP;
	if (p->has_reth != !!(oi->hdrs & FAB_HDR_RETH) ||
	    p->has_aeth != !!(oi->hdrs & FAB_HDR_AETH) ||
	    p->has_imm != !!(oi->hdrs & FAB_HDR_IMMDT) ||
	    p->has_deth != !!(oi->hdrs & FAB_HDR_DETH))
		return -EINVAL;
	if (p->dest_qpn > FAB_MASK24 || p->psn > FAB_MASK24)
		return -EINVAL;
	if (p->has_aeth && (p->msn > FAB_MASK24 || !fab_aeth_syndrome_valid(p->syndrome)))
		return -EINVAL;
	if (p->has_deth && p->src_qpn > FAB_MASK24)
		return -EINVAL;
	if (p->payload_len && !(oi->flags & FAB_OPF_PAYLOAD))
		return -EINVAL;
	if (p->payload_len > FAB_MTU)
		return -EMSGSIZE;
	*oip = oi;
	return 0;
}

static void write_headers(const struct fab_pkt *p, const struct fab_opcode_info *oi, uint8_t *frame,
			  size_t total, unsigned pad)
{
	struct fab_roce_hdr *h = (struct fab_roce_hdr *)frame;
	uint8_t *ext = frame + FAB_HDR_BASE;
	size_t ip_len = total - FAB_ETH_HLEN;

	fab_mac_from_ip(p->dst_ip, h->eth.dst);
	fab_mac_from_ip(p->src_ip, h->eth.src);
	fab_put16(h->eth.type, FAB_ETHERTYPE_IPV4);

	h->ip.ver_ihl = 0x45;
	h->ip.tos = 0;
	fab_put16(h->ip.tot_len, (uint16_t)ip_len);
	fab_put16(h->ip.id, 0); /* allowed with DF set (RFC 6864) */
	fab_put16(h->ip.frag, FAB_IP4_DF);
	h->ip.ttl = FAB_IP4_TTL;
	h->ip.proto = FAB_IPPROTO_UDP;
	memcpy(h->ip.saddr, &p->src_ip, 4);
	memcpy(h->ip.daddr, &p->dst_ip, 4);
	fab_put16(h->ip.csum, ip4_csum_of(p->src_ip, p->dst_ip, ip_len));

	fab_put16(h->udp.sport, p->udp_sport);
	fab_put16(h->udp.dport, FAB_ROCE_PORT);
	fab_put16(h->udp.len, (uint16_t)(ip_len - FAB_IP4_HLEN));
	fab_put16(h->udp.csum, 0);

	h->bth.opcode = p->opcode;
	h->bth.flags = (uint8_t)((p->se ? FAB_BTH_SE : 0) | (p->mig ? FAB_BTH_MIG : 0) |
				 pad << FAB_BTH_PAD_SHIFT); /* TVer 0 */
	fab_put16(h->bth.pkey, p->pkey);
	h->bth.fb = (uint8_t)((p->fecn ? FAB_BTH_FECN : 0) | (p->becn ? FAB_BTH_BECN : 0));
	fab_put24(h->bth.qpn, p->dest_qpn);
	h->bth.ack_req = p->ack_req ? FAB_BTH_ACKREQ : 0;
	fab_put24(h->bth.psn, p->psn);

	/* Extension headers in wire order: DETH, RETH, AETH, ImmDt. */
	if (oi->hdrs & FAB_HDR_DETH) {
		struct fab_deth *d = (struct fab_deth *)ext;

		fab_put32(d->qkey, p->qkey);
		d->reserved = 0;
		fab_put24(d->src_qpn, p->src_qpn);
		ext += sizeof(*d);
	}
	if (oi->hdrs & FAB_HDR_RETH) {
		struct fab_reth *r = (struct fab_reth *)ext;

		fab_put64(r->va, p->va);
		fab_put32(r->rkey, p->rkey);
		fab_put32(r->dma_len, p->dma_len);
		ext += sizeof(*r);
	}
	if (oi->hdrs & FAB_HDR_AETH) {
		struct fab_aeth *a = (struct fab_aeth *)ext;

		a->syndrome = p->syndrome;
		fab_put24(a->msn, p->msn);
		ext += sizeof(*a);
	}
	if (oi->hdrs & FAB_HDR_IMMDT) {
		fab_put32(((struct fab_immdt *)ext)->imm, p->imm);
	}
}

int fab_pkt_init(struct fab_pkt *p, uint8_t opcode)
{
	const struct fab_opcode_info *oi = fab_opcode_info(opcode);

	if (!p)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->opcode = opcode;
	p->pkey = FAB_PKEY_DEFAULT;
	if (!oi)
		return -EINVAL;
	p->has_reth = oi->hdrs & FAB_HDR_RETH;
	p->has_aeth = oi->hdrs & FAB_HDR_AETH;
	p->has_imm = oi->hdrs & FAB_HDR_IMMDT;
	p->has_deth = oi->hdrs & FAB_HDR_DETH;
	return oi->flags & FAB_OPF_SUPPORTED ? 0 : -EOPNOTSUPP;
}

int fab_pkt_encode(const struct fab_pkt *p, uint8_t *frame, size_t cap, size_t *len)
{
	const struct fab_opcode_info *oi;
	size_t hdr, total;
	unsigned pad;
	int rc;

	if (!p || !frame || !len)
		return -EINVAL;
	rc = check_pkt(p, &oi);
	if (rc)
		return rc;
	hdr = FAB_HDR_BASE + oi->ext_len;
	pad = (4u - (p->payload_len & 3u)) & 3u;
	total = hdr + p->payload_len + pad + FAB_ICRC_LEN;
	if (cap < total)
		return -ENOSPC;

	write_headers(p, oi, frame, total, pad);
	/* memmove: a caller may hand back a payload pointer into this frame. */
	if (p->payload && p->payload_len && p->payload != frame + hdr)
		memmove(frame + hdr, p->payload, p->payload_len);
	memset(frame + hdr + p->payload_len, 0, pad);
	put_icrc(frame, total - FAB_ICRC_LEN);
	*len = total;
	return 0;
}

int fab_pkt_seal(uint8_t *frame, size_t len)
{
	struct fab_roce_hdr *h = (struct fab_roce_hdr *)frame;

	if (!frame || len < FAB_FRAME_MIN || len > FAB_FRAME_MAX)
		return -EINVAL;
	if (fab_get16(h->eth.type) != FAB_ETHERTYPE_IPV4 || h->ip.ver_ihl != 0x45 ||
	    fab_get16(h->ip.tot_len) != len - FAB_ETH_HLEN)
		return -EINVAL;
	fab_put16(h->ip.csum, fab_ip4_csum(&h->ip));
	fab_put16(h->udp.csum, 0);
	put_icrc(frame, len - FAB_ICRC_LEN);
	return 0;
}

/* ---- Decoder -------------------------------------------------------------------- */

/* The shortest IPv4 packet: IPv4, UDP, BTH and ICRC. */
#define IP_MIN (FAB_IP4_HLEN + FAB_UDP_HLEN + FAB_BTH_LEN + FAB_ICRC_LEN)
/* Ethernet's minimum frame without FCS; shorter packets are padded to it. */
#define ETH_ZLEN 60u

static bool mac_matches(const uint8_t mac[6], const uint8_t ip[4])
{
	return mac[0] == 0x02 && mac[1] == 0x00 && memcmp(mac + 2, ip, 4) == 0;
}

/*
 * Verify a non-zero UDP checksum over the pseudo-header and the datagram of
 * udp_len bytes, whose first bytes, up to hlen of the frame, are in the
 * header copy hdr and the rest in the frame.  hlen is even or the end of
 * the datagram, so no 16-bit word straddles the two.
 */
static bool udp_csum_ok(const uint8_t *hdr, size_t hlen, const uint8_t *frame, size_t udp_len)
{
	const size_t at = FAB_ETH_HLEN + FAB_IP4_HLEN;
	size_t copied = hlen - at < udp_len ? hlen - at : udp_len;
	uint64_t sum = sum16(0, ((const struct fab_roce_hdr *)hdr)->ip.saddr, 8);

	sum += FAB_IPPROTO_UDP + udp_len;
	sum = sum16(sum, hdr + at, copied);
	sum = sum16(sum, frame + at + copied, udp_len - copied);
	return fold16(sum) == 0xffff;
}

/*
 * The checks before the ICRC: those that find the IPv4 packet and its end,
 * on the header copy hdr (hlen bytes of the frame's len).  Returns the
 * reason, and *ip_len on success.
 */
static enum fab_wire_err check_ip_udp(const uint8_t *hdr, size_t hlen, const uint8_t *frame,
				      size_t len, size_t *ip_len)
{
	const struct fab_roce_hdr *h = (const struct fab_roce_hdr *)hdr;
	size_t tot, udp_len;
	uint16_t csum;

	if (fab_get16(h->eth.type) != FAB_ETHERTYPE_IPV4)
		return FAB_WIRE_E_NOT_IPV4;
	if (h->ip.ver_ihl != 0x45)
		return FAB_WIRE_E_IP_HDR;
	tot = fab_get16(h->ip.tot_len);
	if (tot < IP_MIN || FAB_ETH_HLEN + tot > len ||
	    (FAB_ETH_HLEN + tot < len && len > ETH_ZLEN))
		return FAB_WIRE_E_IP_LEN;
	if (fab_get16(h->ip.frag) & ~FAB_IP4_DF)
		return FAB_WIRE_E_IP_FRAG;
	if (ip4_sum(&h->ip, false) != 0xffff)
		return FAB_WIRE_E_IP_CSUM;
	if (!mac_matches(h->eth.dst, h->ip.daddr) || !mac_matches(h->eth.src, h->ip.saddr))
		return FAB_WIRE_E_ETH_ADDR;
	if (h->ip.proto != FAB_IPPROTO_UDP)
		return FAB_WIRE_E_NOT_UDP;
	if (fab_get16(h->udp.dport) != FAB_ROCE_PORT)
		return FAB_WIRE_E_UDP_PORT;
	udp_len = fab_get16(h->udp.len);
	if (udp_len != tot - FAB_IP4_HLEN)
		return FAB_WIRE_E_UDP_LEN;
	csum = fab_get16(h->udp.csum);
	if (csum && !udp_csum_ok(hdr, hlen, frame, udp_len))
		return FAB_WIRE_E_UDP_CSUM;
	*ip_len = tot;
	return FAB_WIRE_E_NONE;
}

/* Read the extension headers the opcode has into pkt. */
static void read_ext(const uint8_t *ext, uint8_t hdrs, struct fab_pkt *pkt)
{
	if (hdrs & FAB_HDR_DETH) {
		const struct fab_deth *d = (const struct fab_deth *)ext;

		pkt->has_deth = true;
		pkt->qkey = fab_get32(d->qkey);
		pkt->src_qpn = fab_get24(d->src_qpn);
		ext += sizeof(*d);
	}
	if (hdrs & FAB_HDR_RETH) {
		const struct fab_reth *r = (const struct fab_reth *)ext;

		pkt->has_reth = true;
		pkt->va = fab_get64(r->va);
		pkt->rkey = fab_get32(r->rkey);
		pkt->dma_len = fab_get32(r->dma_len);
		ext += sizeof(*r);
	}
	if (hdrs & FAB_HDR_AETH) {
		const struct fab_aeth *a = (const struct fab_aeth *)ext;

		pkt->has_aeth = true;
		pkt->syndrome = a->syndrome;
		pkt->msn = fab_get24(a->msn);
		ext += sizeof(*a);
	}
	if (hdrs & FAB_HDR_IMMDT) {
		pkt->has_imm = true;
		pkt->imm = fab_get32(((const struct fab_immdt *)ext)->imm);
	}
}

/*
 * Bytes of a frame the decoder copies before it looks at any: the longest
 * headers of any opcode.  An even number (udp_csum_ok).
 */
#define HDR_COPY (FAB_HDR_BASE + FAB_EXT_MAX)
_Static_assert(HDR_COPY % 2 == 0, "the copy ends between two 16-bit words");
_Static_assert(HDRS_LEN(FAB_HDR_RETH | FAB_HDR_IMMDT) <= FAB_EXT_MAX &&
		   HDRS_LEN(FAB_HDR_DETH | FAB_HDR_IMMDT) <= FAB_EXT_MAX &&
		   HDRS_LEN(FAB_HDR_AETH | FAB_HDR_ATOMICACKETH) <= FAB_EXT_MAX &&
		   HDRS_LEN(FAB_HDR_IETH) <= FAB_EXT_MAX &&
		   HDRS_LEN(FAB_HDR_CNP_PAD) <= FAB_EXT_MAX,
	       "the copy holds the extension headers of every opcode in the table");

/*
 * The frame may lie in shared memory that another process can write while
 * it is decoded (the fabric's frame pool: fab.h).  So its headers are copied
 * out first, in one pass, and every check and every field decoded reads the
 * copy, never the frame: a header checked is the header used.  The ICRC is
 * checked over the copy's headers followed by the payload where it lies.
 * The payload is not copied: a writer that changes it after the check
 * changes the data of a packet it could have sent with that data in the
 * first place, while the headers, which decide where the data goes and how
 * much of it there is, are the ones the ICRC covered.
 */
static enum fab_wire_err decode(const uint8_t *frame, size_t len, struct fab_pkt *pkt)
{
	uint8_t hdr[HDR_COPY];
	const struct fab_roce_hdr *h = (const struct fab_roce_hdr *)hdr;
	size_t hlen = len < sizeof(hdr) ? len : sizeof(hdr);
	const struct fab_opcode_info *oi;
	enum fab_wire_err err;
	size_t ip_len, end, data;
	uint8_t icrc[FAB_ICRC_LEN];
	unsigned pad;

	if (len < FAB_FRAME_MIN)
		return FAB_WIRE_E_SHORT;
	/* A constant length for the common case: the compiler copies it
	 * with a few vector moves instead of a call. */
	if (hlen == sizeof(hdr))
		memcpy(hdr, frame, sizeof(hdr));
	else
		memcpy(hdr, frame, hlen);
	/* A compiler barrier: the decoder reads hdr from here on, and the
	 * compiler may not read the frame again in its place. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	err = check_ip_udp(hdr, hlen, frame, len, &ip_len);
	if (err != FAB_WIRE_E_NONE)
		return err;
	end = FAB_ETH_HLEN + ip_len - FAB_ICRC_LEN; /* where the ICRC starts */
	memcpy(icrc, frame + end, sizeof(icrc));
	if (icrc_from_copy(hdr, hlen, frame, end) != le32(icrc))
		return FAB_WIRE_E_ICRC;

	if (h->bth.flags & FAB_BTH_TVER_MASK)
		return FAB_WIRE_E_BTH_TVER;
	oi = fab_opcode_info(h->bth.opcode);
	if (!oi)
		return FAB_WIRE_E_OPCODE_UNKNOWN;
	if (!(oi->flags & FAB_OPF_SUPPORTED))
		return FAB_WIRE_E_OPCODE_UNSUPPORTED;
	if (end - FAB_HDR_BASE < oi->ext_len)
		return FAB_WIRE_E_EXT_TRUNC;
	data = end - FAB_HDR_BASE - oi->ext_len; /* payload and pad */
	pad = (h->bth.flags & FAB_BTH_PAD_MASK) >> FAB_BTH_PAD_SHIFT;
	if (data && !(oi->flags & FAB_OPF_PAYLOAD))
		return FAB_WIRE_E_PAYLOAD;
	if (data % 4 || pad > data)
		return FAB_WIRE_E_PAD;
	if (data - pad > FAB_MTU)
		return FAB_WIRE_E_MTU;

	memset(pkt, 0, sizeof(*pkt));
	/* The extension headers end before the ICRC and within HDR_COPY. */
	read_ext(hdr + FAB_HDR_BASE, oi->hdrs, pkt);
	if (pkt->has_aeth && !fab_aeth_syndrome_valid(pkt->syndrome))
		return FAB_WIRE_E_AETH_SYNDROME;

	memcpy(&pkt->src_ip, h->ip.saddr, 4);
	memcpy(&pkt->dst_ip, h->ip.daddr, 4);
	pkt->udp_sport = fab_get16(h->udp.sport);
	pkt->opcode = h->bth.opcode;
	pkt->se = h->bth.flags & FAB_BTH_SE;
	pkt->mig = h->bth.flags & FAB_BTH_MIG;
	pkt->pad = (uint8_t)pad;
	pkt->pkey = fab_get16(h->bth.pkey);
	pkt->fecn = h->bth.fb & FAB_BTH_FECN;
	pkt->becn = h->bth.fb & FAB_BTH_BECN;
	pkt->dest_qpn = fab_get24(h->bth.qpn);
	pkt->ack_req = h->bth.ack_req & FAB_BTH_ACKREQ;
	pkt->psn = fab_get24(h->bth.psn);
	pkt->payload = frame + FAB_HDR_BASE + oi->ext_len;
	pkt->payload_len = (uint32_t)(data - pad);
	return FAB_WIRE_E_NONE;
}

int fab_pkt_decode(const uint8_t *frame, size_t len, struct fab_pkt *out, enum fab_wire_err *why)
{
	struct fab_pkt pkt;
	enum fab_wire_err err;

	if (!frame || !out)
		return -EINVAL;
	err = decode(frame, len, &pkt);
	if (why)
		*why = err;
	if (err != FAB_WIRE_E_NONE)
		return -EBADMSG;
	*out = pkt;
	return 0;
}
