/*
 * clock.c: the service's clock. Time is an input to the wheel: the core
 * works in ticks of a `now` it is given; this thin layer reads it.
 *
 *   - MONOTONIC: CLOCK_MONOTONIC in ns, minus the time spent paused
 *     (pause.c; clock_state), frozen while paused. Tick 0 is the service's
 *     origin (its creation), so tick k begins at origin + k * tick_ns of
 *     service time.
 *   - MANUAL: an atomic the caller sets with tw_advance; starts at 0.
 *   - The cursor's sleeps to a tick are absolute (tw__clock_service_to_mono,
 *     a FUTEX_WAIT_BITSET timeout on CLOCK_MONOTONIC: cursor.c, tick_wait):
 *     a cursor that sleeps to tick boundaries never accumulates drift, and
 *     when it wakes late it simply finds several ticks due.
 *
 * A deadline is stored as ns since the origin; its tick is the first tick
 * boundary at or after it (ceil), so a timer never runs before its
 * deadline: tick k is processed only once now >= origin + k * tick_ns.
 */
#include "internal.h"

#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

uint64_t tw__clock_monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The late clock: what an arming reads to compute a deadline (now +
 * delay). An arming needs a reading no earlier than CLOCK_MONOTONIC at some
 * instant of its call; a later one only makes the timer later, by at most
 * the over-estimate. clock_gettime cost 23 ns on the AMD guest, a third of
 * a schedule + cancel pair (WL1), and the same in every reschedule (WL6).
 * On x86-64 this reads the TSC instead (rdtsc, 10 ns) and converts it
 * from a base of this thread's own, an over-estimate by construction:
 *
 *   - The base: a = rdtsc; m = clock_gettime (which orders its own TSC read
 *     after a); b = rdtsc after it. Kept only if b - a is under
 *     LATE_BRACKET ticks (not preempted): then tick a came no later than
 *     the instant m was read, so m + (t - a) ns-per-tick is no earlier
 *     than the clock at tick t, if ns-per-tick is no less than the true.
 *   - ns-per-tick (late_mult, 32.32 fixed point): from two bases at least
 *     LATE_CALIBRATE_NS apart, (m2 - m1) / (a2 - b1), an upper bound of the
 *     true rate (at least a2 - b1 ticks passed), plus 1/1024 (NTP slews
 *     CLOCK_MONOTONIC by 500 ppm at most).
 *   - A base is used for LATE_REFRESH ticks (about 1 ms), then read again:
 *     the over-estimate is at most the rate's margin over that (1 us)
 *     plus LATE_MARGIN_NS, which covers the TSC read being done out of
 *     order ahead of the call and the CPUs' TSCs differing by a little.
 *   - Checked at every new base: the old base's estimate for tick b must
 *     be at least m (the clock at b was). If not, the TSC ran slower than
 *     measured (a host that changed its rate): the late clock turns itself
 *     off for the process (late_mult = LATE_OFF) and every arming reads
 *     clock_gettime again.
 *   - The first base is read when the process creates its first
 *     MONOTONIC service (tw__late_clock_start), not at its first arming.
 *     Until the rate is known every late reading is a true one and a
 *     bracket (late_rebase, 40-50 ns), and a server that arms a million
 *     timers at start-up spent the first 20 ms of them so: WL2 1M's
 *     schedules ran at 19.8-22.7M/s against 10M's 31.6-33.3M/s (its
 *     service made 50 ms before the first arming, 2026-11-29).
 * Until the rate is known, and off x86-64, the late clock is
 * clock_gettime. Runners, the cursor and tw_now never use it: what is due
 * is decided on the true clock only.
 */
#define LATE_BRACKET       4096u               /* ticks: a base read unpreempted */
#define LATE_REFRESH       (1ull << 21)        /* ticks a base serves */
#define LATE_CALIBRATE_NS  20000000ull         /* 20 ms between the rate's bases */
#define LATE_MARGIN_NS     2000u
#define LATE_OFF           UINT64_MAX

static _Atomic uint64_t late_mult;            /* 0: not known yet; LATE_OFF */
static _Atomic uint64_t late_cal_tick, late_cal_ns; /* the first base: b, m */

typedef struct late_base {
    uint64_t tick, ns; /* a, m */
    bool set;
} late_base;
static TW_TLS late_base late_mine;

uint64_t (*_Atomic tw__late_mult_hook)(uint64_t mult); /* tests only (internal.h) */

#if defined(__x86_64__)
static uint64_t late_estimate(const late_base *b, uint64_t mult, uint64_t t)
{
    return b->ns + LATE_MARGIN_NS + (uint64_t)(((unsigned __int128)(t - b->tick) * mult) >> 32);
}

/* The rate from the process's first base (its bracket's end b1, m1) to
 * this one (its start a2, m2), once far enough apart; 0 while not. The first base is written by the
 * thread whose CAS takes late_cal from 0 to 1, and published by its
 * release store of 2. */
static _Atomic uint32_t late_cal;

static uint64_t late_rate(uint64_t a2, uint64_t b2, uint64_t m2)
{
    /* Acquire: pairs with the release store of 2 below: the pair is whole. */
    uint32_t cal = atomic_load_explicit(&late_cal, memory_order_acquire);
    if (cal == 0) {
        /* Relaxed: only who writes the pair is decided here. */
        if (atomic_compare_exchange_strong_explicit(&late_cal, &cal, 1, memory_order_relaxed,
                                                    memory_order_relaxed)) {
            /* Relaxed: published by the release store that follows. */
            atomic_store_explicit(&late_cal_tick, b2, memory_order_relaxed);
            atomic_store_explicit(&late_cal_ns, m2, memory_order_relaxed);
            atomic_store_explicit(&late_cal, 2, memory_order_release);
        }
        return 0;
    }
    if (cal != 2)
        return 0;
    /* Relaxed: ordered by the acquire load of late_cal. */
    uint64_t b1 = atomic_load_explicit(&late_cal_tick, memory_order_relaxed);
    uint64_t m1 = atomic_load_explicit(&late_cal_ns, memory_order_relaxed);
    if (m2 < m1 + LATE_CALIBRATE_NS || a2 <= b1)
        return 0;
    long double rate = (long double)(m2 - m1) / (long double)(a2 - b1);
    return (uint64_t)(rate * (1.0L + 1.0L / 1024.0L) * 4294967296.0L) + 1;
}

/* A new base for this thread, or none (preempted): the clock read either way. */
static uint64_t late_rebase(late_base *mine, uint64_t mult)
{
    uint64_t a = __rdtsc();
    uint64_t m = tw__clock_monotonic();
    _mm_lfence(); /* b is read after m's read completed */
    uint64_t b = __rdtsc();
    if (b - a > LATE_BRACKET)
        return m;
    if (mult != 0 && mine->set && late_estimate(mine, mult, b) < m) {
        /* Relaxed: a flag; every reader falls back to the true clock. */
        atomic_store_explicit(&late_mult, LATE_OFF, memory_order_relaxed);
        return m;
    }
    *mine = (late_base){.tick = a, .ns = m, .set = true};
    if (mult == 0 && (mult = late_rate(a, b, m)) != 0) {
        /* Relaxed: set by a test before any arming; a pointer to code. */
        uint64_t (*hook)(uint64_t) = atomic_load_explicit(&tw__late_mult_hook,
                                                          memory_order_relaxed);
        if (hook)
            mult = hook(mult);
        uint64_t none = 0;
        /* Relaxed: a number; any thread's first value serves. */
        atomic_compare_exchange_strong_explicit(&late_mult, &none, mult, memory_order_relaxed,
                                                memory_order_relaxed);
    }
    return m;
}

/* Bases tw__late_clock_start tries: one preempted bracket is not the end
 * of it. */
#define LATE_START_TRIES 4

void tw__late_clock_start(void)
{
    for (int i = 0; i < LATE_START_TRIES; i++) {
        /* Relaxed: as in tw__clock_monotonic_late. Known or off: nothing
         * to start; set: this thread's base, and so the first, is read. */
        if (atomic_load_explicit(&late_mult, memory_order_relaxed) != 0 || late_mine.set)
            return;
        (void)late_rebase(&late_mine, 0);
    }
}

uint64_t tw__clock_monotonic_late(void)
{
    /* Relaxed: a number, written once (or turned off). */
    uint64_t mult = atomic_load_explicit(&late_mult, memory_order_relaxed);
    if (__builtin_expect(mult == LATE_OFF, 0))
        return tw__clock_monotonic();
    late_base *mine = &late_mine;
    uint64_t t = __rdtsc();
    if (__builtin_expect(mult != 0 && mine->set && t - mine->tick < LATE_REFRESH, 1))
        return late_estimate(mine, mult, t);
    return late_rebase(mine, mult);
}
#else
uint64_t tw__clock_monotonic_late(void)
{
    return tw__clock_monotonic();
}

void tw__late_clock_start(void)
{
}
#endif

/* tests only (internal.h): forget the rate and this thread's base. Seq_cst
 * (both functions): a test's calls, between its phases; no order is
 * asked of them. */
void tw__late_clock_reset(void)
{
    atomic_store(&late_mult, 0);
    atomic_store(&late_cal, 0);
    late_mine.set = false;
}

bool tw__late_clock_on(void)
{
    uint64_t mult = atomic_load(&late_mult);
    return mult != 0 && mult != LATE_OFF;
}

uint64_t tw__clock_read_late(const tw_service *s)
{
    if (s->cfg.clock == TW_CLOCK_MANUAL)
        return tw__clock_read(s);
    /* Acquire: as in tw__clock_read. A pause that begins after this load
     * may freeze the clock below our reading: the deadline is then later
     * than it could be, never earlier. */
    uint64_t st = atomic_load_explicit(&((tw_service *)s)->clock_state, memory_order_acquire);
    if (st & (TW_CLOCK_PAUSED | TW_CLOCK_PAUSING))
        return tw__clock_read(s);
    return tw__clock_monotonic_late() - st;
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

bool tw__clock_service_to_mono(const tw_service *s, uint64_t t, uint64_t *mono)
{
    if (s->cfg.clock != TW_CLOCK_MONOTONIC) {
        *mono = t;
        return true;
    }
    /* Acquire: as in tw__clock_read. */
    uint64_t st = atomic_load_explicit(&((tw_service *)s)->clock_state, memory_order_acquire);
    if (st & TW_CLOCK_FROZEN || t > UINT64_MAX - st)
        return false;
    *mono = t + st; /* a resume meanwhile only makes it early */
    return true;
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
