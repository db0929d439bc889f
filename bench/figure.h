/*
 * figure.h: what the standalone figure programs of bench/ share (pool.c,
 * crowd.c): a clock reading in ns, and a small xorshift generator whose
 * sequence is the same on every run.
 */
#ifndef TW_BENCH_FIGURE_H
#define TW_BENCH_FIGURE_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t next_random(void)
{
    static uint64_t rng = 88172645463325252ull;
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

#endif
