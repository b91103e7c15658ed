/*
 * CRC-32 and the ICRC of RoCEv2 frames (fab_wire.h): slicing-by-8 tables,
 * and on x86-64 CPUs that have them, folding with PCLMULQDQ and VPCLMULQDQ.
 * fab_crc_priv.h is what the rest of the fabric library uses beside the
 * public functions.
 */
#include "fab_crc_priv.h"

#include <stdbool.h>
#include <string.h>

#include "fab_wire.h"

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

/* Advance the raw CRC register (no inversion) over n bytes with the tables. */
static uint32_t crc_sliced(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint32_t lo = crc ^ fab_le32(p);
		uint32_t hi = fab_le32(p + 4);

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
uint32_t fab_icrc_from_copy(const uint8_t *hdr, size_t hlen, const uint8_t *frame,
			    size_t len_without_icrc)
{
	uint8_t msg[256];
	const uint8_t *rest;
	size_t n, first, copied;

	for (size_t i = 0; i < PH_LEN; i++)
		msg[i] = hdr[PH_AT + i] | ph_ones[i];
	n = len_without_icrc - FAB_HDR_BASE;
	first = n < sizeof(msg) - PH_LEN ? n : sizeof(msg) - PH_LEN;
	/* A constant length in the common case, so that the compiler copies
	 * it inline: the frame's extension headers, whatever its opcode. */
	if (hlen == FAB_HDR_COPY && first >= FAB_HDR_COPY - FAB_HDR_BASE) {
		copied = FAB_HDR_COPY - FAB_HDR_BASE;
		memcpy(msg + PH_LEN, hdr + FAB_HDR_BASE, FAB_HDR_COPY - FAB_HDR_BASE);
	} else {
		copied = hlen - FAB_HDR_BASE < first ? hlen - FAB_HDR_BASE : first;
		memcpy(msg + PH_LEN, hdr + FAB_HDR_BASE, copied);
	}
	memcpy(msg + PH_LEN + copied, frame + FAB_HDR_BASE + copied, first - copied);
	rest = frame + FAB_HDR_BASE + first;
	n -= first;
#ifdef HAVE_CLMUL
	if (PH_LEN + first == sizeof(msg) && have_vpclmul())
		return ~crc_vpclmul(0xffffffffu, msg, rest, n);
#endif
	return ~crc_update(crc_update(0xffffffffu, msg, PH_LEN + first), rest, n);
}
