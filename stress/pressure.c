/*
 * pressure: producers that leave entries in the wheel faster than anybody
 * takes them out, as a peer can make a server do: every timer armed an
 * hour ahead and cancelled at once, or moved earlier and later. The
 * wheel's entries must stay under the back-pressure line (wheel.c) plus
 * what each producer may add between its looks, whoever drains:
 *
 *   mode 0  MONOTONIC, more producers than cores: the cursor gets a
 *           fraction of a core (a review's program: 13 GB in 60 s, ticks
 *           standing still for seconds, before 2026-11-30);
 *   mode 1  MONOTONIC, paused all along: its cursor sleeps, and must
 *           still compact (240 MB after 30M arm-and-cancels), and never
 *           tick;
 *   mode 2  MANUAL, never advanced (an event loop whose tw_next_due says
 *           an hour): the producers compact for themselves;
 *   mode 3  MONOTONIC, timers moved earlier and later (the earlier move
 *           places an entry, the later one leaves it);
 *   mode 4  as mode 1, the timers due at once or within two ticks: they
 *           go to the next tick's slot, which no step drains while paused,
 *           so the paused cursor compacts it while producers fill it
 *           (before, each 1024 placements waited 0.1 s for a compaction
 *           that could not take them, and the wheel grew);
 *   mode 5  as mode 2, the timers due within two ticks of the frozen
 *           clock (a producer compacts the slot the others fill);
 *   mode 6  MONOTONIC, workers = 0: the cursor runs the callbacks, and a
 *           timer due every tick arms and cancels a batch of its own (the
 *           drainer's own callback pays), every 16th run going on until
 *           the drainer role was taken to compact (wheel.c) or 10 s
 *           passed: the callback compacts itself, and the cursor takes
 *           the role back after it (before 2026-11-30 the drainer kept the
 *           role while it ran callbacks, and such a callback grew the
 *           wheel until it returned). The producers stand aside during
 *           those long runs: beside a long callback on the cursor they
 *           would wait 0.1 s, then leave their entries until it returns
 *           (README, Limits);
 *   mode 7  as mode 6 with the MANUAL clock: a thread advances it a tick
 *           a millisecond, its tw_advance running the driver's callbacks,
 *           and the producers too take the role beside them.
 *
 * Exact accounting: every arming is cancelled with TW_OK, by its thread or
 * at the end; nothing fires (modes 0 to 3, 6, 7: every deadline is at
 * least 10 s away; modes 4 and 5: the clock stands still) but the
 * driver's timers (modes 6 and 7), each armed once and run once. The
 * main thread samples the entries (tw__wheel_entries, a walk) meanwhile.
 * Modes 1 and 2 fail if no producer met the line, modes 6 and 7 if nobody
 * took the drainer role beside the drainer (the paths under test).
 *
 *   pressure [producers] [-] [seconds] [mode]
 */
#include "stress_common.h"

#include "internal.h"

#define MOVERS 16 /* timers each producer of mode 3 keeps and moves */

static tw_service *g_s;
static int g_mode;
static bool g_paused, g_manual, g_near, g_driven; /* from the mode */
static uint64_t g_near_at, g_near_spread; /* modes 4, 5: delays g_near_at - [0, spread) */
static atomic_bool g_quit;
static _Atomic uint64_t g_armed, g_cancelled, g_fired;

static void fired(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_fetch_add(&g_fired, 1);
}

/* `at_once`: due at once (the driver's: nothing runs while its callback
 * does, and such timers are placed by the caller, never logged: defer.c). */
static void arm_and_cancel_as(st_rng *r, bool at_once)
{
    tw_timer x;
    uint64_t delay = at_once ? 0 : g_near ? g_near_at - st_below(r, g_near_spread)
                                          : 3600 * TW_SEC;
    int rc = tw_schedule(g_s, delay, fired, NULL, &x);
    if (rc != TW_OK) {
        st_fail("tw_schedule: %s", tw_strerror(rc));
        return;
    }
    atomic_fetch_add_explicit(&g_armed, 1, memory_order_relaxed);
    rc = tw_cancel(g_s, x);
    if (rc != TW_OK)
        st_fail("tw_cancel of a pending timer: %s", tw_strerror(rc));
    else
        atomic_fetch_add_explicit(&g_cancelled, 1, memory_order_relaxed);
}

static void arm_and_cancel(st_rng *r)
{
    arm_and_cancel_as(r, false);
}

/* Modes 6 and 7: the driver, a timer due every tick whose callback (run by
 * the drainer: workers = 0, or inside tw_advance) arms and cancels
 * DRIVER_BATCH timers, arms its successor, and every DRIVER_HOLD_EVERY
 * runs goes on, a batch at a time, until the role was taken or 10 s
 * passed. */
#define DRIVER_BATCH 2048
#define DRIVER_HOLD_EVERY 16
static _Atomic uint64_t g_driver_armed, g_driver_ran, g_driver_held;
static atomic_bool g_driver_long; /* mode 6: producers stand aside */
static atomic_bool g_driver_off; /* the last run saw g_quit and armed none */

static void driver(tw_timer t, void *arg)
{
    (void)t;
    st_rng *r = arg;
    uint64_t run = atomic_fetch_add(&g_driver_ran, 1);
    bool hold = run % DRIVER_HOLD_EVERY == DRIVER_HOLD_EVERY - 1;
    uint64_t taken = tw__rare_total(g_s, TW_RARE_ROLE_TAKEN);
    uint64_t end = st_mono_ns() + 10 * TW_SEC; /* ThreadSanitizer: a few seconds */
    atomic_store(&g_driver_long, hold && !g_manual);
    do {
        for (int k = 0; k < DRIVER_BATCH; k++)
            arm_and_cancel_as(r, true);
    } while (hold && tw__rare_total(g_s, TW_RARE_ROLE_TAKEN) == taken && st_mono_ns() < end &&
             !atomic_load(&g_quit));
    atomic_store(&g_driver_long, false);
    atomic_fetch_add(&g_driver_held, hold);
    if (atomic_load(&g_quit)) {
        atomic_store(&g_driver_off, true);
        return;
    }
    int rc = tw_schedule(g_s, g_s->cfg.tick_ns, driver, r, NULL);
    if (rc != TW_OK)
        st_fail("the driver's tw_schedule: %s", tw_strerror(rc));
    else
        atomic_fetch_add(&g_driver_armed, 1);
}

/* Mode 7: a tick a millisecond, until the driver is off. */
static void *advancer(void *arg)
{
    (void)arg;
    uint64_t now = 0;
    while (!atomic_load(&g_driver_off)) {
        now += g_s->cfg.tick_ns;
        int rc = tw_advance(g_s, now);
        if (rc != TW_OK)
            st_fail("tw_advance: %s", tw_strerror(rc));
        st_sleep_ns(TW_MS);
    }
    return NULL;
}

static atomic_int g_stepped;

static void stepped(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&g_stepped, 1);
}

/* Modes 4 and 5: stop the clock (MONOTONIC: pause it) within the tick of
 * the cursor's last step, and aim every timer at the next tick's slot:
 * due in the half tick before that tick's start. MONOTONIC: a timer due
 * at once makes the cursor step to now first (its tick is 100 ms, so the
 * pause comes in that tick). False if the pause came too late 20 times. */
static bool aim_at_the_next_tick(void)
{
    uint64_t tick = g_s->cfg.tick_ns;
    for (int attempt = 0; attempt < 20; attempt++) {
        if (g_paused) {
            atomic_store(&g_stepped, 0);
            if (tw_schedule(g_s, 0, stepped, NULL, NULL) != TW_OK)
                return false;
            while (!atomic_load(&g_stepped))
                st_sleep_ns(TW_MS);
            if (tw_pause(g_s) != TW_OK)
                return false;
        }
        uint64_t frozen = tw__clock_read(g_s) - g_s->origin;
        /* Relaxed: a look at the cursor's word; it sleeps (or, MANUAL,
         * nobody advances). */
        uint64_t c = atomic_load_explicit(&g_s->wheel.cur, memory_order_relaxed);
        if ((c + 1) * tick > frozen) {
            g_near_at = (c + 1) * tick - frozen;
            g_near_spread = g_near_at < tick / 2 ? g_near_at : tick / 2;
            return true;
        }
        if (g_paused && tw_resume(g_s) != TW_OK)
            return false;
    }
    return false;
}

static void *producer(void *arg)
{
    st_rng r;
    st_rng_seed(&r, (uint64_t)(uintptr_t)arg, 7);
    tw_timer h[MOVERS];
    if (g_mode == 3) {
        for (int i = 0; i < MOVERS; i++) {
            if (tw_schedule(g_s, 3600 * TW_SEC, fired, NULL, &h[i]) != TW_OK)
                st_fail("tw_schedule of a mover");
            atomic_fetch_add(&g_armed, 1);
        }
    }
    bool earlier = true;
    while (!atomic_load_explicit(&g_quit, memory_order_relaxed)) {
        if (atomic_load_explicit(&g_driver_long, memory_order_relaxed)) {
            sched_yield(); /* mode 6: aside while the cursor's callback runs long */
            continue;
        }
        if (g_mode != 3) {
            arm_and_cancel(&r);
            continue;
        }
        for (int i = 0; i < MOVERS; i++) {
            uint64_t d = earlier ? 10 * TW_SEC + st_below(&r, TW_SEC)
                                 : 3000 * TW_SEC + st_below(&r, 600 * TW_SEC);
            int rc = tw_reschedule(g_s, h[i], d);
            if (rc != TW_OK)
                st_fail("tw_reschedule: %s", tw_strerror(rc));
        }
        earlier = !earlier;
    }
    if (g_mode == 3) {
        for (int i = 0; i < MOVERS; i++) {
            if (tw_cancel(g_s, h[i]) == TW_OK)
                atomic_fetch_add(&g_cancelled, 1);
            else
                st_fail("tw_cancel of a mover");
        }
    }
    return NULL;
}

/* The main thread's look at the entries, every 10 ms. */
typedef struct sampled {
    uint64_t bound, worst, samples;
} sampled;

static void sample_entries(sampled *sm)
{
    st_sleep_ns(10 * 1000 * 1000);
    uint64_t e = tw__wheel_entries(g_s);
    sm->worst = e > sm->worst ? e : sm->worst;
    sm->samples++;
    if (e > sm->bound)
        st_fail("%" PRIu64 " entries in the wheel, above the bound %" PRIu64, e, sm->bound);
}

int main(int argc, char **argv)
{
    unsigned producers = (unsigned)st_arg(argc, argv, 1, 8);
    double seconds = st_arg_seconds(argc, argv, 3);
    g_mode = (int)st_arg(argc, argv, 4, 0);
    if (producers < 1 || producers > 64 || g_mode < 0 || g_mode > 7) {
        fprintf(stderr, "pressure: 1..64 producers, mode 0..7\n");
        return 2;
    }
    g_paused = g_mode == 1 || g_mode == 4;
    g_manual = g_mode == 2 || g_mode == 5 || g_mode == 7;
    g_near = g_mode == 4 || g_mode == 5;
    g_driven = g_mode >= 6;
    tw_config cfg;
    tw_config_init(&cfg);
    if (g_manual || g_driven)
        cfg.workers = 0;
    if (g_manual)
        cfg.clock = TW_CLOCK_MANUAL;
    if (g_near)
        cfg.tick_ns = 100 * TW_MS; /* a pause within the tick of a step */
    if (tw_create(&cfg, &g_s) != TW_OK) {
        fprintf(stderr, "pressure: tw_create failed\n");
        return 1;
    }
    if (g_near && !aim_at_the_next_tick())
        st_fail("twenty pauses came a tick after the cursor's step");
    else if (g_paused && !g_near && tw_pause(g_s) != TW_OK)
        st_fail("tw_pause");
    tw_stats st0;
    tw_stats_get(g_s, &st0);

    pthread_t t[64], adv;
    st_rng driver_rng;
    st_rng_seed(&driver_rng, 99, 7);
    if (g_driven) {
        if (tw_schedule(g_s, 0, driver, &driver_rng, NULL) != TW_OK)
            st_fail("the driver's first tw_schedule");
        atomic_fetch_add(&g_driver_armed, 1);
        if (g_manual)
            st_start(&adv, advancer, NULL);
    }
    for (unsigned i = 0; i < producers; i++)
        st_start(&t[i], producer, (void *)(uintptr_t)(i + 1));
    /* The line for the most timers that can be pending, plus what each
     * producer may place between two looks, plus what the cursor's own
     * placements add while it compacts (it re-places live entries). */
    uint64_t pending_max = producers * (g_mode == 3 ? MOVERS : 1);
    /* Twice more a producer: one that stopped waiting (compaction took
     * nothing out for TW_PRESSURE_STILL looks: under TSan one slot's
     * compaction outlasts them, in about one wait of three) places
     * another TW_PRESSURE_EVERY before its next look. Where compaction
     * cannot take what producers leave, every wait ends so, and the
     * entries pass any such bound within a second. */
    uint64_t payers = producers + (g_driven ? 1 : 0); /* the driver's callbacks pay too */
    uint64_t bound = tw__wheel_pressure_line(g_s, pending_max) +
                     3 * payers * TW_PRESSURE_EVERY + pending_max;
    sampled sm = {.bound = bound};
    uint64_t end = st_mono_ns() + (uint64_t)(seconds * 1e9);
    while (st_mono_ns() < end)
        sample_entries(&sm);
    /* Driven: on, sampling, until the role was taken (ThreadSanitizer's
     * pace may need longer than the run's seconds), a minute at most. */
    for (uint64_t more = st_mono_ns() + 60 * TW_SEC;
         g_driven && tw__rare_total(g_s, TW_RARE_ROLE_TAKEN) == 0 && st_mono_ns() < more;)
        sample_entries(&sm);
    uint64_t worst = sm.worst, samples = sm.samples;
    atomic_store(&g_quit, true);
    for (unsigned i = 0; i < producers; i++)
        pthread_join(t[i], NULL);
    if (g_driven) {
        uint64_t off_by = st_mono_ns() + 30 * TW_SEC;
        while (!atomic_load(&g_driver_off) && st_mono_ns() < off_by)
            st_sleep_ns(TW_MS);
        if (!atomic_load(&g_driver_off))
            st_fail("the driver did not stop within 30 s");
        else if (g_manual)
            pthread_join(adv, NULL);
    }

    tw_stats st;
    tw_stats_get(g_s, &st);
    uint64_t met = tw__rare_total(g_s, TW_RARE_PRESSURE);
    uint64_t left = tw__rare_total(g_s, TW_RARE_PRESSURE_LEFT);
    uint64_t taken = tw__rare_total(g_s, TW_RARE_ROLE_TAKEN);
    printf("pressure mode %d: %u producers, %" PRIu64 " armed, at most %" PRIu64
           " entries in %" PRIu64 " samples (bound %" PRIu64 "), line met %" PRIu64
           " times, waits given up %" PRIu64 ", role taken %" PRIu64 ", %.1f MB\n", g_mode,
           producers, atomic_load(&g_armed), worst, samples, bound, met, left, taken,
           st_rss_mb());
    if (g_driven)
        printf("pressure mode %d: the driver ran %" PRIu64 " times, %" PRIu64 " of them long"
               "\n", g_mode, atomic_load(&g_driver_ran), atomic_load(&g_driver_held));

    if (atomic_load(&g_cancelled) != atomic_load(&g_armed))
        st_fail("%" PRIu64 " armed, %" PRIu64 " cancelled", atomic_load(&g_armed),
                atomic_load(&g_cancelled));
    if (atomic_load(&g_fired) != 0)
        st_fail("%" PRIu64 " fired (nothing was due)", atomic_load(&g_fired));
    if (st.fired != st0.fired + atomic_load(&g_driver_ran))
        st_fail("%" PRIu64 " fired, the driver ran %" PRIu64 " times", st.fired - st0.fired,
                atomic_load(&g_driver_ran));
    if (atomic_load(&g_driver_ran) != atomic_load(&g_driver_armed))
        st_fail("the driver was armed %" PRIu64 " times and ran %" PRIu64,
                atomic_load(&g_driver_armed), atomic_load(&g_driver_ran));
    if (g_driven && taken == 0)
        st_fail("nobody took the drainer role: the path was not taken");
    if (st.pending != 0)
        st_fail("%" PRIu64 " pending at the end", st.pending);
    if ((g_paused || g_manual) && met == 0)
        st_fail("no producer met the line: the path was not taken");
    if (g_paused && st.ticks != st0.ticks)
        st_fail("the paused cursor ticked: %" PRIu64 " ticks, %" PRIu64 " before",
                st.ticks, st0.ticks);
    if (g_paused && tw_resume(g_s) != TW_OK)
        st_fail("tw_resume");
    tw_destroy(g_s);
    if (st_failed()) {
        fprintf(stderr, "pressure: %" PRIu64 " failures\n", st_failed());
        return 1;
    }
    return 0;
}
