/*
 * Ring index helpers for the rings of nicsim_abi.h.
 *
 * Indices are free-running uint32_t; the slot of index i is i & (depth - 1).
 * Each index has exactly one writer.  The producer fills the slot, then
 * publishes prod with a release store; the consumer reads prod with an acquire
 * load before it reads the slot, and publishes cons with a release store after
 * it has copied the slot out, so the producer never overwrites a slot that is
 * still being read.  The barrier sits between filling (or emptying) the slot
 * and publishing the index: getting that order wrong loses entries.
 *
 * The fields are plain uint32_t in the ABI so that the layout is the same for
 * any compiler; the GCC/Clang __atomic builtins give them C11 semantics.
 */
#ifndef NICSIM_RING_H
#define NICSIM_RING_H

#include <stdint.h>

/* Producer side: publish prod after filling slots (release). */
static inline void ring_publish(uint32_t *idx, uint32_t v)
{
	__atomic_store_n(idx, v, __ATOMIC_RELEASE);
}

/* Either side: observe the other side's index (acquire). */
static inline uint32_t ring_observe(const uint32_t *idx)
{
	return __atomic_load_n(idx, __ATOMIC_ACQUIRE);
}

/* Own index: only this side writes it, so a relaxed read is enough. */
static inline uint32_t ring_own(const uint32_t *idx)
{
	return __atomic_load_n(idx, __ATOMIC_RELAXED);
}

/* Entries between cons and prod; more than depth means a broken peer. */
static inline uint32_t ring_count(uint32_t prod, uint32_t cons)
{
	return prod - cons;
}

/*
 * Sleep/wake handshake (Dekker style): the sleeper stores its flag, issues a
 * full fence, then re-checks the ring; the waker publishes its index, issues a
 * full fence, then reads the flag.  At least one of them sees the other.
 */
static inline void ring_fence(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline void ring_flag_set(uint32_t *flag, uint32_t v)
{
	__atomic_store_n(flag, v, __ATOMIC_RELAXED);
}

static inline uint32_t ring_flag_get(const uint32_t *flag)
{
	return __atomic_load_n(flag, __ATOMIC_RELAXED);
}

/* Pause inside a short spin. */
static inline void ring_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#endif /* NICSIM_RING_H */
