/*
 * clock.c: the service's clock. Time is an input to the wheel: the core
 * works in ticks of a `now` it is given; this thin layer reads it.
 *
 *   - MONOTONIC: CLOCK_MONOTONIC in ns, minus the time spent paused
 *     (pause.c; clock_state), frozen while paused. Tick 0 is the service's
 *     origin (its creation), so tick k begins at origin + k * tick_ns of
 *     service time.
 *   - MANUAL: an atomic the caller sets with tw_advance; starts at 0.
 *   - Sleeps are absolute (clock_nanosleep with TIMER_ABSTIME): a cursor
 *     that sleeps to tick boundaries never accumulates drift, and when it
 *     wakes late it simply finds several ticks due.
 *
 * A deadline is stored as ns since the origin; its tick is the first tick
 * boundary at or after it (ceil), so a timer never runs before its
 * deadline: tick k is processed only once now >= origin + k * tick_ns.
 */
#include "internal.h"

#include <errno.h>
#include <time.h>

uint64_t tw__clock_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A pause in two steps, so that no reading of the clock is ever later than
 * the value it freezes at. The pause first marks the state PAUSING (one
 * CAS: the freeze as runners and tw_pause's look at them see it), then
 * reads the clock and stores PAUSED | that reading's service time. A
 * reader that meets PAUSING does the second step itself (whoever's CAS
 * lands decides the value), so nobody waits for a pauser that was
 * preempted. A reader that met the running state checks it again after
 * its clock read: a reading taken before the mark is earlier than the
 * frozen value (read after the mark), one that straddles it is retried.
 * Before 2026-11-28 a reader preempted between its look at the state and
 * its clock read returned a time past the frozen one, and a runner ran a
 * timer due in between early after tw_resume; a pauser preempted between
 * its clock read and its CAS froze the clock behind times already read
 * (a review's programs). One window is left, on a clock whose readings
 * 100 ns apart can be equal: a pauser preempted in finish_pause while
 * another thread finishes the pause, resumes at the same reading (the
 * paused total then unchanged) and pauses again; its stale CAS then
 * matches. With CLOCK_MONOTONIC in ns (TSC, kvm-clock) readings differ. */
static void finish_pause(tw_service *s, uint64_t pausing)
{
    uint64_t frozen = tw__clock_monotonic() - (pausing & ~TW_CLOCK_PAUSING);
    /* Seq_cst: as the mark's CAS. Strong: a failure means another
     * reader or the pauser finished it (only this step leaves PAUSING). */
    atomic_compare_exchange_strong_explicit(&s->clock_state, &pausing,
                                            TW_CLOCK_PAUSED | frozen,
                                            memory_order_seq_cst, memory_order_relaxed);
}

uint64_t tw__clock_read(const tw_service *s)
{
    if (s->cfg.clock == TW_CLOCK_MANUAL) {
        /* Acquire: pairs with tw_advance's release store, so a thread that
         * sees the new time also sees what the advancing thread did first. */
        return atomic_load_explicit(&((tw_service *)s)->manual_now, memory_order_acquire);
    }
    tw_service *w = (tw_service *)s;
    /* Acquire: pairs with tw_pause / tw_resume's CAS, so a reader that
     * sees the frozen or restarted clock sees what came before it. */
    uint64_t st = atomic_load_explicit(&w->clock_state, memory_order_acquire);
    for (;;) {
        if (st & TW_CLOCK_PAUSED)
            return st & ~TW_CLOCK_PAUSED;
        uint64_t now = 0;
        if (st & TW_CLOCK_PAUSING)
            finish_pause(w, st);
        else
            now = tw__clock_monotonic() - st;
        /* Acquire: as above. Unchanged after a clock read, the reading was
         * taken while the clock ran with this total (see finish_pause). */
        uint64_t again = atomic_load_explicit(&w->clock_state, memory_order_acquire);
        if (again == st && !(st & TW_CLOCK_PAUSING))
            return now;
        st = again;
    }
}

bool tw__clock_paused(const tw_service *s)
{
    /* Seq_cst: waiters read their futex word, then this (pause.c). */
    return s->cfg.clock == TW_CLOCK_MONOTONIC &&
           (atomic_load_explicit(&((tw_service *)s)->clock_state, memory_order_seq_cst) &
            TW_CLOCK_FROZEN);
}

bool tw__clock_pause(tw_service *s)
{
    /* Relaxed: a first guess; the CAS decides. */
    uint64_t st = atomic_load_explicit(&s->clock_state, memory_order_relaxed);
    for (;;) {
        if (st & TW_CLOCK_PAUSED)
            return false;
        if (st & TW_CLOCK_PAUSING) {
            finish_pause(s, st); /* another pause's: done once this returns */
            return false;
        }
        /* Seq_cst: the mark comes before tw_pause's look at the runners'
         * gates (pause.c) and before any waiter's look at the state. */
        if (atomic_compare_exchange_weak_explicit(&s->clock_state, &st, st | TW_CLOCK_PAUSING,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed)) {
            finish_pause(s, st | TW_CLOCK_PAUSING);
            return true;
        }
    }
}

bool tw__clock_resume(tw_service *s)
{
    /* Relaxed: a first guess; the CAS decides. */
    uint64_t st = atomic_load_explicit(&s->clock_state, memory_order_relaxed);
    for (;;) {
        if (st & TW_CLOCK_PAUSING) {
            finish_pause(s, st); /* a pause on its way: finish it first */
            /* Relaxed: as above. */
            st = atomic_load_explicit(&s->clock_state, memory_order_relaxed);
            continue;
        }
        if (!(st & TW_CLOCK_PAUSED))
            return false;
        /* Service time goes on from the frozen value: the new paused total
         * is now minus it (>= the old total: time only moves forward). A
         * resumer preempted before its CAS restarts the clock from its
         * reading: forward, by the preemption, never back. */
        uint64_t paused_total = tw__clock_monotonic() - (st & ~TW_CLOCK_PAUSED);
        /* Seq_cst: before the wake-ups that follow (pause.c, gate_wait). */
        if (atomic_compare_exchange_weak_explicit(&s->clock_state, &st, paused_total,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed))
            return true;
    }
}

void tw__clock_sleep_until(uint64_t mono_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(mono_ns / 1000000000ull),
                          .tv_nsec = (long)(mono_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

void tw__clock_sleep_until_service(const tw_service *s, uint64_t t)
{
    if (s->cfg.clock != TW_CLOCK_MONOTONIC) {
        tw__clock_sleep_until(t);
        return;
    }
    /* Acquire: as in tw__clock_read. */
    uint64_t st = atomic_load_explicit(&((tw_service *)s)->clock_state, memory_order_acquire);
    if (st & TW_CLOCK_FROZEN || t > UINT64_MAX - st)
        return;
    tw__clock_sleep_until(t + st); /* a resume meanwhile only wakes us early */
}

/* Division by tick_ns is on every placement; a 64-bit divide costs tens
 * of cycles, a multiply by the precomputed reciprocal a few. The estimate
 * floor(d * ceil(2^64 / tick) / 2^64) is exact or one too high; one
 * compare corrects it. */
uint64_t tw__tick_recip(uint64_t tick_ns)
{
    return (uint64_t)(((unsigned __int128)1 << 64) / tick_ns) + 1;
}

uint64_t tw__tick_floor(const tw_service *s, uint64_t ns)
{
    uint64_t q = (uint64_t)(((unsigned __int128)ns * s->tick_recip) >> 64);
    if (q * s->cfg.tick_ns > ns)
        q--;
    return q;
}

uint64_t tw__tick_of(const tw_service *s, uint64_t deadline_ns)
{
    uint64_t q = tw__tick_floor(s, deadline_ns);
    return q + (q * s->cfg.tick_ns != deadline_ns);
}

#ifdef TW_INJECT_YIELDS
/* Injected interleavings (build option TW_INJECT_YIELDS): at each delicate
 * point of the protocol (internal.h, TW_INJ_*) yield the CPU now and then,
 * and sleep a few microseconds more rarely, so that the windows between
 * reserve and publish, read and CAS, close and drain are hit often. The
 * generator is per thread, so the injection itself shares nothing. */
#include <sched.h>

static TW_TLS uint64_t inject_rng;

void tw__inject(int point)
{
    if (inject_rng == 0)
        inject_rng = tw__clock_monotonic() | 1;
    inject_rng ^= inject_rng << 13;
    inject_rng ^= inject_rng >> 7;
    inject_rng ^= inject_rng << 17;
    uint64_t r = (inject_rng + (uint64_t)point) % 64;
    if (r < 8) {
        sched_yield();
    } else if (r == 8) {
        struct timespec ts = {0, (long)(1000 + inject_rng % 20000)};
        nanosleep(&ts, NULL);
    }
}
#endif
