/*
 * rare_paths: a workload built to take every rare path of the protocol,
 * with exact accounting, and (with "require") to fail if one was never
 * taken.
 *
 *     rare_paths [threads=3] [iterations=2000000] [seconds=$TW_STRESS_SECONDS|3]
 *                [wheel_slots=4] [slot_capacity=1] [require=0] [seed]
 *
 * One MANUAL-clock service with a tiny wheel (4 slots, capacity 1), one
 * advancer thread that moves the clock by a tick (now and then half a tick,
 * or 2 .. 4 ticks) as fast as it can (callbacks run there, inside
 * tw_advance), and `threads` producers. The advancer announces each step
 * (g_steps) just before it calls tw_advance; each producer then runs a
 * burst: arm a timer due now, push back its "hot" timer again and again,
 * then arm timers due within a tick or two, cancel and push back ("touch")
 * the ones it armed last, which are the ones falling due right now, and
 * cancel whatever slow callback is running (g_running). The paths and the
 * race each one needs:
 *
 *   TW_RARE_TOMBSTONED      a producer reserved a place in the slot the step
 *                           drains; the drain tombstones it before the
 *                           publish
 *   TW_RARE_NEWER           a producer read the cursor, the step moved it and
 *                           reopened the slot for its next rotation before
 *                           the producer's reservation (bursts aimed at the
 *                           same slot collide, and a losing CAS backs off)
 *   TW_RARE_LATE_SLOT       a producer finds its slot closed: the drain is
 *                           exchanging its entries (capacity 1: long slots;
 *                           multi-tick steps drain several slots in turn)
 *   TW_RARE_CANCEL_LOST     a cancel of the timer whose (slow, a few us)
 *                           callback is running
 *   TW_RARE_LEASE_MET       the drain meets the hot timer while its producer
 *                           holds the deadline lease
 *   TW_RARE_RESCHED_FIRING  a touch of a timer the step has claimed but whose
 *                           callback has not started (it waits behind the
 *                           slow callbacks of the same advance)
 *   overflow                (stats.overflowed) many timers in one slot
 *
 * Checked, per timer: fired + cancelled-OK + dropped == 1 (refused: 0),
 * never early (callback's tw_now() >= tw_now() before the last successful
 * arming + its delay), its own handle; the library's counters equal the
 * sums; tw__check after the run. Then each rare path's count is printed;
 * with require = 1 (as ctest runs it) the run goes on past `seconds`
 * while a path has not been taken (up to 10x as long: time_is_up), and a
 * path never taken fails it.
 * Measured in 3 s on 2 cores, the least frequent path (NEWER) was taken
 * ~1000 .. 1800 times under TSan alone or ASan, 30 .. 50 times with
 * injected yields (TW_INJECT_YIELDS: the advancer steps 8x less often);
 * on 2026-11-24, with other builds and tests running, 2 .. 154 times
 * under TSan.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stress_common.h"

#include <sched.h>

#include "internal.h" /* tw__rare_total, tw__check */

#define RING 64          /* timers a producer keeps handles of (the latest) */
#define SLOW_NS 3000     /* a slow callback spins this long */

typedef struct rp_rec {
    tw_timer handle;          /* through tw_schedule's out: before the callback */
    int sched_rc;             /* owner */
    uint64_t lb;              /* owner: tw_now() before the last successful
                                 arming + its delay: the deadline is >= lb */
    uint32_t reschedules;     /* owner: successful tw_reschedule calls */
    _Atomic uint32_t cancelled; /* tw_cancel returned TW_OK (owner or sniper) */
    uint8_t slow;             /* written before arming: the callback spins */
    _Atomic uint32_t fired;   /* callback runs */
    _Atomic uint32_t dropped; /* on_pending calls */
    _Atomic uint32_t bad_handle;
    _Atomic uint64_t fire_now;/* tw_now() in the callback */
} rp_rec;

typedef struct producer {
    pthread_t th;
    int id;
    st_rng rng;
    st_arena recs;
    rp_rec *ring[RING];       /* the latest timers, most recent at head - 1 */
    unsigned head;
    rp_rec *hot;              /* a timer pushed back by a tick at every step */
    uint64_t sched_ok, cancel_ok, cancel_enoent, resched_ok, resched_enoent, snipes;
} producer;

static tw_service *g_s;
static uint64_t g_tick;
static uint64_t g_iterations;
static uint64_t g_end_ns;              /* written before the threads start */
static uint64_t g_extended_ns;         /* the latest end (g_end_ns without require) */
static _Atomic bool g_all_taken;       /* every required path seen taken */
static pthread_barrier_t g_barrier;
static _Atomic bool g_producers_done;
static _Atomic uint64_t g_steps;       /* bumped just before each tw_advance */
static _Atomic(rp_rec *) g_running;    /* a slow callback's timer, while it runs */

/* Whether every path `require` asks for has been taken so far: the rare
 * paths before HANDED_OVER (the later ones are other programs' to take)
 * and an overflowed slot. The counters are the library's stripes, summed
 * while producers add to them (atomic; a sum only lags). */
static bool all_paths_taken(void)
{
    if (atomic_load_explicit(&g_all_taken, memory_order_relaxed))
        return true;
    for (int i = 0; i < TW_RARE_HANDED_OVER; i++)
        if (tw__rare_total(g_s, i) == 0)
            return false;
    tw_stats st;
    tw_stats_get(g_s, &st);
    if (st.overflowed == 0)
        return false;
    /* Relaxed: a flag that only saves the sums; the paths stay taken. */
    atomic_store_explicit(&g_all_taken, true, memory_order_relaxed);
    return true;
}

/* The run ends `seconds` after its start. With require it goes on while a
 * path has not been taken, up to ten times as long: the races need the
 * threads to run at the same time, which a loaded machine grants less
 * often (beside CPU hogs a TSan run took NEWER 2 to 6 times in 3 s, and
 * once missed two paths in 18 s; alone, hundreds to thousands of times;
 * on one CPU, never), and a run that stopped on time with a path missing
 * failed CI for nothing. */
static bool time_is_up(void)
{
    uint64_t now = st_mono_ns();
    if (now < g_end_ns)
        return false;
    if (now >= g_extended_ns)
        return true;
    return all_paths_taken();
}

/* CPUs this process may run on (1 if unknown). */
static int cpus_allowed(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    return CPU_COUNT(&set);
}

/* ---- callbacks --------------------------------------------------------------- */

/* Runs inside tw_advance on the advancer (or main, at the end). */
static void rp_callback(tw_timer t, void *arg)
{
    rp_rec *r = arg;
    if (t != r->handle) /* written before the callback may run (library guarantee) */
        atomic_fetch_add_explicit(&r->bad_handle, 1, memory_order_relaxed);
    atomic_store_explicit(&r->fire_now, tw_now(g_s), memory_order_relaxed);
    if (atomic_fetch_add_explicit(&r->fired, 1, memory_order_relaxed) != 0)
        st_fail("timer %#" PRIx64 " fired twice", t);
    if (r->slow) {
        /* Race: keep the callback running (state RUNNING) while a producer
         * that sees it in g_running cancels it (TW_RARE_CANCEL_LOST), and
         * the timers claimed after it in this advance waiting (FIRING)
         * while producers touch them (TW_RARE_RESCHED_FIRING). Release:
         * the sniper reads r->handle. */
        atomic_store_explicit(&g_running, r, memory_order_release);
        uint64_t until = st_mono_ns() + SLOW_NS;
        while (st_mono_ns() < until) {
        }
        atomic_store_explicit(&g_running, NULL, memory_order_relaxed);
    }
}

static void rp_on_pending(tw_timer t, void *arg)
{
    rp_rec *r = arg;
    if (t != r->handle)
        atomic_fetch_add_explicit(&r->bad_handle, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
}

/* ---- producers ----------------------------------------------------------------- */

/* 0, a third of a tick, one tick, one and a half, two: all within the next
 * few slots, which are the ones the advancer is closing and draining. */
static uint64_t rp_delay(st_rng *rng)
{
    switch (st_below(rng, 5)) {
    case 0: return 0;
    case 1: return g_tick / 3;
    case 2: return g_tick;
    case 3: return g_tick + g_tick / 2;
    default: return 2 * g_tick;
    }
}

/* Race: reserve and publish in the slot of the next tick while the
 * advancer closes, tombstones and reopens it (TOMBSTONED, NEWER,
 * LATE_SLOT), with capacity 1 so that most placements overflow. With
 * `now`, delay 0: every producer aims at the same slot at the same moment,
 * so reservations also collide, and a CAS that lost backs off (ck_backoff)
 * while the drain closes and reopens the slot (NEWER). */
static void prod_schedule(producer *p, bool now)
{
    rp_rec *r = st_arena_new(&p->recs);
    uint64_t delay = now ? 0 : rp_delay(&p->rng);
    r->slow = st_below(&p->rng, 8) == 0;
    uint64_t before = tw_now(g_s);
    r->sched_rc = tw_schedule(g_s, delay, rp_callback, r, &r->handle);
    if (r->sched_rc != TW_OK) {
        st_fail("producer %d: tw_schedule: %s", p->id, tw_strerror(r->sched_rc));
        return;
    }
    r->lb = before + delay;
    p->sched_ok++;
    p->ring[p->head++ % RING] = r;
    if (!p->hot && delay == g_tick)
        p->hot = r;
}

/* one of the latest timers */
static rp_rec **prod_pick(producer *p)
{
    unsigned n = p->head < RING ? p->head : RING;
    if (n == 0)
        return NULL;
    /* half the time one of the last 4 (armed in this burst: not yet due),
     * else any of the last 32 (armed a few ticks ago: falling due now) */
    unsigned back = (unsigned)st_below(&p->rng, st_below(&p->rng, 2) ? 4 : 32);
    if (back >= n)
        back = n - 1;
    rp_rec **slot = &p->ring[(p->head - 1 - back) % RING];
    return *slot ? slot : NULL;
}

/* Race: cancel a timer that is due now against the drain's claim, and
 * against its callback (CANCEL_LOST while it runs). */
static void prod_cancel(producer *p)
{
    rp_rec **slot = prod_pick(p);
    if (!slot)
        return;
    rp_rec *r = *slot;
    int rc = tw_cancel(g_s, r->handle);
    if (rc == TW_OK) {
        atomic_fetch_add_explicit(&r->cancelled, 1, memory_order_relaxed);
        p->cancel_ok++;
    } else if (rc == TW_ENOENT) {
        p->cancel_enoent++;
    } else {
        st_fail("producer %d: tw_cancel: %s", p->id, tw_strerror(rc));
    }
    *slot = NULL; /* no longer pending, either way */
}

/* Race: push back a timer that is falling due: the lease against the
 * drain that meets it (LEASE_MET), and the take-back of a timer already
 * claimed for this advance (RESCHED_FIRING). */
static void prod_touch(producer *p)
{
    rp_rec **slot = prod_pick(p);
    if (!slot)
        return;
    rp_rec *r = *slot;
    for (int k = 0; k < 4; k++) {
        uint64_t delay = st_below(&p->rng, 3) * g_tick + st_below(&p->rng, g_tick);
        uint64_t before = tw_now(g_s);
        int rc = tw_reschedule(g_s, r->handle, delay);
        if (rc == TW_ENOENT) {
            p->resched_enoent++;
            *slot = NULL; /* it started */
            return;
        }
        if (rc != TW_OK) {
            st_fail("producer %d: tw_reschedule: %s", p->id, tw_strerror(rc));
            return;
        }
        r->lb = before + delay;
        r->reschedules++;
        p->resched_ok++;
    }
}

/* Race: cancel the timer whose callback is running right now (a slow one
 * publishes itself in g_running): the cancel must lose (CANCEL_LOST) and
 * say TW_ENOENT. */
static void prod_snipe(producer *p)
{
    /* Acquire: pairs with the callback's release store; r->handle was
     * written before the callback could run. */
    rp_rec *r = atomic_load_explicit(&g_running, memory_order_acquire);
    if (!r)
        return;
    p->snipes++;
    int rc = tw_cancel(g_s, r->handle);
    if (rc == TW_OK) /* cannot happen while it runs; the accounting will say */
        atomic_fetch_add_explicit(&r->cancelled, 1, memory_order_relaxed);
    else if (rc != TW_ENOENT)
        st_fail("producer %d: tw_cancel (snipe): %s", p->id, tw_strerror(rc));
}

/* Race: at the start of every step, push back by about a tick, again and
 * again, a timer whose entry sits in a slot this step drains: the drain
 * meets the deadline lease (LEASE_MET) or re-places the moved timer. Each
 * push is later than the one before (a step moves the clock by at least
 * half a tick), so the timer keeps a single entry: a timer moved earlier
 * and later again and again keeps one more entry per round trip for as
 * long as it lives (reported to the lead), which is not this test's
 * subject. */
static void prod_touch_hot(producer *p)
{
    rp_rec *r = p->hot;
    if (!r)
        return;
    for (int k = 0; k < 16; k++) {
        uint64_t delay = g_tick + (uint64_t)k * (g_tick / 32);
        uint64_t before = tw_now(g_s);
        int rc = tw_reschedule(g_s, r->handle, delay);
        if (rc != TW_OK) {
            if (rc != TW_ENOENT)
                st_fail("producer %d: tw_reschedule (hot): %s", p->id, tw_strerror(rc));
            p->resched_enoent++;
            p->hot = NULL; /* cancelled through the ring, or it ran */
            return;
        }
        r->lb = before + delay;
        r->reschedules++;
        p->resched_ok++;
    }
}

/* Producer thread body: the races of each operation above, against the
 * advancer's drains and against the other producers in the same slots.
 * Pacing: a burst of 1 .. 16 operations starts each time the advancer
 * announces a step (g_steps, bumped just before tw_advance), so the first
 * placements of a burst read the cursor before the step moves it and race
 * the drain of the very slots they aim at (NEWER, LATE_SLOT, TOMBSTONED).
 * It also keeps the wheel small, so the advancer keeps stepping. */
static void *producer_main(void *arg)
{
    producer *p = arg;
    pthread_barrier_wait(&g_barrier);
    uint64_t last = 0, burst = 0, budget = 1;
    for (uint64_t ops = 0; p->sched_ok < g_iterations; ops++) {
        if ((ops & 15) == 0 && time_is_up())
            break;
        if (burst++ == budget) {
            /* Acquire: a counter only; nothing else is read through it. */
            while (atomic_load_explicit(&g_steps, memory_order_acquire) == last &&
                   !time_is_up())
                sched_yield();
            last = atomic_load_explicit(&g_steps, memory_order_acquire);
            burst = 0;
            budget = 1 + st_below(&p->rng, 16);
            prod_schedule(p, true);
            prod_touch_hot(p);
            continue;
        }
        uint64_t x = st_below(&p->rng, 100);
        if (x < 40)
            prod_schedule(p, false);
        else if (x < 55)
            prod_cancel(p);
        else if (x < 60)
            prod_snipe(p);
        else
            prod_touch(p);
    }
    return NULL;
}

/* ---- the advancer ------------------------------------------------------------- */

/* Race: the drain (close, exchange, tombstone, reopen, claim, re-place) of
 * the slots the producers are filling, mostly one tick at a time, now and
 * then half a tick or 2 .. 4 ticks (one step drains several slots in turn:
 * a longer window for a producer that read the cursor before it moved), as
 * fast as it can; callbacks run here. */
static void *advancer_main(void *arg)
{
    st_rng *rng = arg;
    pthread_barrier_wait(&g_barrier);
    uint64_t now = tw_now(g_s);
    while (!atomic_load_explicit(&g_producers_done, memory_order_acquire)) {
        uint64_t x = st_below(rng, 8);
        now += x < 5 ? g_tick : x < 7 ? g_tick / 2 : (2 + st_below(rng, 3)) * g_tick;
        /* Release: a counter; producers start a burst when it moves. */
        atomic_fetch_add_explicit(&g_steps, 1, memory_order_release);
        int rc = tw_advance(g_s, now);
        if (rc != TW_OK) {
            st_fail("tw_advance: %s", tw_strerror(rc));
            break;
        }
    }
    return NULL;
}

/* ---- accounting ------------------------------------------------------------------- */

typedef struct totals {
    uint64_t scheduled, fired, cancelled, dropped, rescheduled;
} totals;

static void account(rp_rec *r, totals *t, int who, size_t idx)
{
    uint32_t fired = atomic_load_explicit(&r->fired, memory_order_relaxed);
    uint32_t dropped = atomic_load_explicit(&r->dropped, memory_order_relaxed);
    uint32_t cancelled = atomic_load_explicit(&r->cancelled, memory_order_relaxed);
    uint64_t fire_now = atomic_load_explicit(&r->fire_now, memory_order_relaxed);
    if (atomic_load_explicit(&r->bad_handle, memory_order_relaxed))
        st_fail("producer %d timer #%zu: callback or on_pending got another handle", who, idx);
    if (r->sched_rc != TW_OK) {
        if (fired || dropped)
            st_fail("producer %d timer #%zu: refused but fired %u, dropped %u", who, idx,
                    fired, dropped);
        return;
    }
    t->scheduled++;
    t->fired += fired;
    t->cancelled += cancelled;
    t->dropped += dropped;
    t->rescheduled += r->reschedules;
    if (fired + cancelled + dropped != 1)
        st_fail("producer %d timer #%zu handle %#" PRIx64 ": fired %u + cancelled %u +"
                " dropped %u != 1 (reschedules %u)", who, idx, r->handle, fired,
                cancelled, dropped, r->reschedules);
    if (fired && fire_now < r->lb)
        st_fail("producer %d timer #%zu handle %#" PRIx64 ": early: ran at %" PRIu64
                " < deadline >= %" PRIu64 " (reschedules %u)", who, idx, r->handle,
                fire_now, r->lb, r->reschedules);
}

int main(int argc, char **argv)
{
    uint64_t nthreads = st_arg(argc, argv, 1, 3);
    g_iterations = st_arg(argc, argv, 2, 2000000);
    double seconds = st_arg_seconds(argc, argv, 3);
    uint64_t wheel_slots = st_arg(argc, argv, 4, 4);
    uint64_t slot_capacity = st_arg(argc, argv, 5, 1);
    uint64_t require = st_arg(argc, argv, 6, 0);
    uint64_t seed = st_arg(argc, argv, 7, st_seed_default());
    if (nthreads < 1 || nthreads > 256) {
        fprintf(stderr, "threads: 1 .. 256\n");
        return 2;
    }
    printf("rare_paths: threads %" PRIu64 " iterations %" PRIu64 " seconds %.1f"
           " wheel_slots %" PRIu64 " slot_capacity %" PRIu64 " require %" PRIu64
           " seed %" PRIu64 "\n", nthreads, g_iterations, seconds, wheel_slots,
           slot_capacity, require, seed);
    fflush(stdout);

    g_s = st_create_manual(wheel_slots, slot_capacity);
    g_tick = 1000; /* st_create_manual's tick */
    int rc;

    producer *prod = calloc(nthreads, sizeof *prod);
    st_rng adv_rng;
    st_rng_seed(&adv_rng, seed, 1000);
    pthread_barrier_init(&g_barrier, NULL, (unsigned)nthreads + 2);
    uint64_t started_ns = st_mono_ns();
    g_end_ns = started_ns + (uint64_t)(seconds * 1e9);
    g_extended_ns = require ? g_end_ns + 9 * (uint64_t)(seconds * 1e9) : g_end_ns;
    for (uint64_t i = 0; i < nthreads; i++) {
        prod[i].id = (int)i;
        st_rng_seed(&prod[i].rng, seed, i);
        st_arena_init(&prod[i].recs, sizeof(rp_rec));
        st_start(&prod[i].th, producer_main, &prod[i]);
    }
    pthread_t adv;
    st_start(&adv, advancer_main, &adv_rng);
    pthread_barrier_wait(&g_barrier);

    for (uint64_t i = 0; i < nthreads; i++)
        pthread_join(prod[i].th, NULL);
    atomic_store_explicit(&g_producers_done, true, memory_order_release);
    pthread_join(adv, NULL);
    printf("rare_paths: ran %.1f s\n", (double)(st_mono_ns() - started_ns) / 1e9);

    /* Quiescent: check, run everything that is due, check, stop. */
    char buf[512];
    if (tw__check(g_s, buf, sizeof buf) != 0)
        st_fail("tw__check after the run: %s", buf);
    uint64_t final_now = tw_now(g_s) + 100 * g_tick;
    for (uint64_t now = tw_now(g_s) / g_tick * g_tick + g_tick; now <= final_now;
         now += g_tick) {
        if ((rc = tw_advance(g_s, now)) != TW_OK) {
            st_fail("final tw_advance: %s", tw_strerror(rc));
            break;
        }
    }
    if (tw__check(g_s, buf, sizeof buf) != 0)
        st_fail("tw__check after the final advance: %s", buf);
    if ((rc = tw_stop(g_s, rp_on_pending)) != TW_OK)
        st_fail("tw_stop: %s", tw_strerror(rc));

    tw_stats st;
    tw_stats_get(g_s, &st);
    totals t = {0};
    uint64_t cancel_enoent = 0, resched_enoent = 0, snipes = 0;
    for (uint64_t i = 0; i < nthreads; i++) {
        for (size_t j = 0; j < prod[i].recs.n; j++)
            account(st_arena_get(&prod[i].recs, j), &t, (int)i, j);
        cancel_enoent += prod[i].cancel_enoent;
        resched_enoent += prod[i].resched_enoent;
        snipes += prod[i].snipes;
    }
    if (st.scheduled != t.scheduled || st.fired != t.fired || st.cancelled != t.cancelled ||
        st.dropped != t.dropped || st.rescheduled != t.rescheduled || st.pending != 0)
        st_fail("stats: scheduled %" PRIu64 "/%" PRIu64 " fired %" PRIu64 "/%" PRIu64
                " cancelled %" PRIu64 "/%" PRIu64 " dropped %" PRIu64 "/%" PRIu64
                " rescheduled %" PRIu64 "/%" PRIu64 " pending %" PRIu64
                " (library/ours)", st.scheduled, t.scheduled, st.fired, t.fired,
                st.cancelled, t.cancelled, st.dropped, t.dropped, st.rescheduled,
                t.rescheduled, st.pending);
    if (t.dropped != 0)
        st_fail("%" PRIu64 " timers were still pending after the final advance", t.dropped);

    printf("timers %" PRIu64 ": fired %" PRIu64 " cancelled %" PRIu64 " dropped %" PRIu64
           " rescheduled %" PRIu64 " (cancel ENOENT %" PRIu64 ", reschedule ENOENT %" PRIu64
           ", snipes %" PRIu64 "), steps %" PRIu64 "\n", t.scheduled, t.fired, t.cancelled,
           t.dropped, t.rescheduled, cancel_enoent, resched_enoent, snipes,
           atomic_load_explicit(&g_steps, memory_order_relaxed));
    printf("rare paths:");
    uint64_t missing = 0;
    /* The races need two threads running at once: a process allowed one
     * CPU (taskset, a cgroup) takes none of them in any time. That is no
     * finding about the library: a required path missing there skips the
     * run (ctest's SKIP_RETURN_CODE) instead of failing it, once every
     * other check has passed. */
    bool one_cpu = cpus_allowed() < 2;
    /* The paths from HANDED_OVER on are other programs' to take
     * (periodic_handover, tests/test_stall.c). */
    for (int i = 0; i < TW_RARE_HANDED_OVER; i++) {
        uint64_t n = tw__rare_total(g_s, i);
        printf(" %s %" PRIu64, tw__rare_name(i), n);
        if (n == 0) {
            missing++;
            if (require && !one_cpu)
                st_fail("rare path %s was never taken", tw__rare_name(i));
        }
    }
    printf(" overflowed %" PRIu64 "\n", st.overflowed);
    if (st.overflowed == 0) {
        missing++;
        if (require && !one_cpu)
            st_fail("no placement overflowed a slot's fixed array");
    }
    if (missing && !require)
        printf("rare_paths: %" PRIu64 " path(s) not taken in this run (not required)\n",
               missing);
    bool skipped = missing && require && one_cpu && st_failed() == 0;
    if (skipped)
        printf("rare_paths: SKIPPED: %" PRIu64 " path(s) not taken, and this process may "
               "run on one CPU only\n", missing);

    tw_destroy(g_s);
    for (uint64_t i = 0; i < nthreads; i++)
        st_arena_free(&prod[i].recs);
    free(prod);
    pthread_barrier_destroy(&g_barrier);
    if (st_failed()) {
        fprintf(stderr, "rare_paths: %" PRIu64 " check(s) FAILED\n", st_failed());
        return 1;
    }
    if (skipped)
        return 77;
    printf("rare_paths: ok\n");
    return 0;
}
