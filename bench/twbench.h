/*
 * twbench.h: the one small table of operations that every implementation
 * benchmarked by twbench.c provides (shared/bench/WORKLOADS.md).
 *
 * An implementation is a timer service: create it, arm one-shot timers with
 * a relative delay, cancel them, optionally move them, destroy it. Callbacks
 * may run on any thread the implementation owns. Handles are opaque 64-bit
 * values, 0 meaning "no timer"; an adapter must answer a stale handle (one
 * whose timer fired or was cancelled) with "not pending" rather than act on
 * another timer, at least as long as no cancel races with another operation
 * on the same handle (the workloads never do that).
 */
#ifndef TWBENCH_H
#define TWBENCH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Same shape as tw_callback, so the timerwheel adapter passes callbacks
 * through unchanged: `handle` is what schedule returned. */
typedef void (*bench_cb)(uint64_t handle, void *arg);

typedef struct bench_cfg {
    uint64_t tick_ns;   /* slot interval for tick-based services (1 ms default) */
    unsigned workers;   /* callback threads where the service has a pool (2) */
    uint64_t max_timers; /* the workload's working set: the most timers it
                            has in use at once (a sizing hint; only
                            timerwheel-cfg uses it, as its max_timers) */
} bench_cfg;

typedef struct bench_impl {
    const char *name;
    /* NULL on failure (after saying why on stderr). */
    void *(*create)(const bench_cfg *cfg);
    /* Stops every thread of the service; timers still pending never run. */
    void (*destroy)(void *svc);
    /* Arms cb(handle, arg) to run no earlier than now + delay_ns, where now
     * is read inside the call. Returns the handle, 0 on failure. */
    uint64_t (*schedule)(void *svc, uint64_t delay_ns, bench_cb cb, void *arg);
    /* 1 iff the timer was pending and now never runs; 0 otherwise. */
    int (*cancel)(void *svc, uint64_t handle);
    /* Moves a pending timer to now + delay_ns, keeping its handle: 1 iff it
     * was pending. NULL when the service has no such operation (then WL6
     * uses cancel + schedule). */
    int (*reschedule)(void *svc, uint64_t handle, uint64_t delay_ns);
    /* Arms n timers cb(out[i], NULL) at now + delays_ns[i], now read once
     * for the whole batch inside the call. Returns how many were armed,
     * which are the first ones (out[armed..n) are 0). NULL when the service
     * has no batch call (then WL1b prints n/a). */
    int (*schedule_many)(void *svc, size_t n, const uint64_t *delays_ns, bench_cb cb,
                         uint64_t *out);
    /* Cancels n handles in one call: ok[i] = 1 iff handle i was pending and
     * now never runs, else 0. Returns how many were cancelled. NULL exactly
     * when schedule_many is. */
    int (*cancel_many)(void *svc, size_t n, const uint64_t *handles, int *ok);
    /* Where callbacks run, for the record ("2 workers", "loop thread"). */
    const char *callbacks_on;
} bench_impl;

extern const bench_impl bench_impl_timerwheel;
extern const bench_impl bench_impl_timerwheel_cfg;
extern const bench_impl bench_impl_heap;
extern const bench_impl bench_impl_libevent;

/* CLOCK_MONOTONIC in ns: the clock of every figure. */
static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline struct timespec bench_ns_to_timespec(uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
                           .tv_nsec = (long)(ns % 1000000000ull) };
    return ts;
}

#endif /* TWBENCH_H */
