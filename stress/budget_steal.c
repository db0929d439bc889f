/*
 * budget_steal: max_timers' units are never counted twice nor lost while
 * sweeps meet the owners' takes. An owned stripe's owner takes a unit with
 * a load and a store inside its busy window; a sweep moves the stripe's
 * `taken` only under the handshake of busy and steal (service.c,
 * acct_take_owned and budget_sweep). Threads fill a small cap until they
 * are refused (each refusal sweeps every account, twice or more), then
 * cancel some of what they hold, over and over, so sweeps run beside
 * other threads' takes all the time.
 *
 * Each thread gives way to a new one after a random number of rounds,
 * keeping its handles for the next (a stripe's owner changes mid-run:
 * stripe_release, take_owned_stripe); past 16 threads some share stripes.
 *
 * Checked: the handles the threads hold (counted after an arming returns
 * and before its cancel, so never more than the pending timers) never
 * exceed max_timers (a unit counted twice: a sweep's move undone by an
 * owner's store). At the end, with the threads gone and their handles
 * kept, the main thread arms exactly max_timers minus those handles (the
 * idle units in their stripes are found: no unit lost, none made), and
 * one more arming is refused; then, everything cancelled, exactly
 * max_timers again.
 *
 *   budget_steal [threads] [-] [seconds] [max_timers] [plant] [require] [real]
 *
 * real = 1: the library acts as without membarrier (tw__fence_force_real):
 * owners take by CAS, sweeps CAS every stripe, and the other asymmetric
 * pairings (magazines, the stop) fence on both sides.
 *
 * require = 1: a sweep must have met an owner inside its window
 * (tw__budget_owner_waits; the injected yields' build makes it common).
 * Without membarrier (tw__fence_real) owners take by CAS and there is no
 * window: plant and require then exit 77 (skipped).
 *
 * plant = 1: the sweep ignores the owners' busy windows
 * (tw__budget_plant_no_busy, service.c): the run must see a unit counted
 * twice; it exits 0 once it has, 1 if it has not by the end.
 */
#include "stress_common.h"

#include <pthread.h>

#include "internal.h" /* tw__budget_plant_no_busy */

static tw_service *g_s;
static uint64_t g_max;
static atomic_bool g_quit;
static _Atomic uint64_t g_held;    /* handles the threads hold */
static _Atomic uint64_t g_over;    /* times g_held went past g_max */
static _Atomic uint64_t g_refused; /* TW_EAGAIN answers */
static _Atomic uint64_t g_armed;

static void st_noop(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
}

typedef struct filler {
    pthread_t th;
    uint64_t seed;
    tw_timer *h;
    uint64_t n;
    atomic_bool gone; /* its thread gave way: the main thread starts the next */
} filler;

/* Arm until refused (or the cap's worth held). */
static void fill(filler *f)
{
    while (f->n < g_max) {
        tw_timer h;
        int rc = tw_schedule(g_s, 3600 * TW_SEC, st_noop, NULL, &h);
        if (rc == TW_EAGAIN) {
            atomic_fetch_add_explicit(&g_refused, 1, memory_order_relaxed);
            return;
        }
        if (rc != TW_OK) {
            st_fail("tw_schedule: %d", rc);
            return;
        }
        f->h[f->n++] = h;
        atomic_fetch_add_explicit(&g_armed, 1, memory_order_relaxed);
        if (atomic_fetch_add_explicit(&g_held, 1, memory_order_relaxed) + 1 > g_max)
            atomic_fetch_add_explicit(&g_over, 1, memory_order_relaxed);
    }
}

/* Cancel the last k held. */
static void drop(filler *f, uint64_t k)
{
    while (k-- > 0 && f->n > 0) {
        atomic_fetch_sub_explicit(&g_held, 1, memory_order_relaxed);
        if (tw_cancel(g_s, f->h[--f->n]) != TW_OK)
            st_fail("tw_cancel of a held timer failed");
    }
}

/* Rounds of fill and drop; then give way to a new thread, the handles
 * kept. */
static void *run(void *arg)
{
    filler *f = arg;
    st_rng r;
    st_rng_seed(&r, f->seed++, (uint64_t)(uintptr_t)f);
    uint64_t rounds = 1 + st_below(&r, 400);
    while (rounds-- > 0 && !atomic_load_explicit(&g_quit, memory_order_relaxed)) {
        fill(f);
        drop(f, st_below(&r, f->n + 1));
    }
    atomic_store(&f->gone, true);
    return NULL;
}

static uint64_t held_by(const filler *f, unsigned threads)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < threads; i++)
        n += f[i].n;
    return n;
}

int main(int argc, char **argv)
{
    unsigned threads = (unsigned)st_arg(argc, argv, 1, 4);
    double seconds = st_arg_seconds(argc, argv, 3);
    g_max = st_arg(argc, argv, 4, 512);
    bool plant = st_arg(argc, argv, 5, 0) != 0;
    bool require = st_arg(argc, argv, 6, 0) != 0;
    tw__fence_force_real = st_arg(argc, argv, 7, 0) != 0;
    if (threads < 2 || threads > 32)
        threads = 4;
    tw__budget_plant_no_busy = plant;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.workers = 0;
    cfg.max_timers = g_max;
    if (tw_create(&cfg, &g_s) != TW_OK) {
        fprintf(stderr, "budget_steal: tw_create failed\n");
        return 1;
    }
    if ((plant || require) && tw__fence_real) { /* settled by tw_create */
        printf("budget_steal: no membarrier here: owners take by CAS, no window to meet "
               "(skipped)\n");
        tw_destroy(g_s);
        return 77;
    }
    static filler f[32];
    uint64_t seed = st_seed_default();
    for (unsigned i = 0; i < threads; i++) {
        f[i] = (filler){.seed = seed + i, .h = calloc(g_max, sizeof(tw_timer))};
        if (!f[i].h) {
            fprintf(stderr, "budget_steal: out of memory\n");
            return 1;
        }
    }
    for (unsigned i = 0; i < threads; i++)
        pthread_create(&f[i].th, NULL, run, &f[i]);
    uint64_t end = st_mono_ns() + (uint64_t)(seconds * 1e9);
    uint64_t handovers = 0;
    while (st_mono_ns() < end && !(plant && atomic_load(&g_over))) {
        for (unsigned i = 0; i < threads; i++) {
            if (!atomic_load(&f[i].gone))
                continue;
            pthread_join(f[i].th, NULL);
            atomic_store(&f[i].gone, false);
            pthread_create(&f[i].th, NULL, run, &f[i]);
            handovers++;
        }
        st_sleep_ns(1000 * 1000);
    }
    atomic_store(&g_quit, true);
    for (unsigned i = 0; i < threads; i++)
        pthread_join(f[i].th, NULL);
    uint64_t over = atomic_load(&g_over);
    uint64_t waits = atomic_load(&tw__budget_owner_waits);
    if (tw__fence_force_real && !tw__fence_real)
        st_fail("real fences asked for, but the library uses membarrier");
    printf("budget_steal: %u threads, max_timers %" PRIu64 "%s: %" PRIu64 " armed, %" PRIu64
           " refused, %" PRIu64 " threads gave way, %" PRIu64 " looks met an owner inside, %" PRIu64
           " times more held than the cap%s\n",
           threads, g_max, tw__fence_real ? " (no membarrier: real fences)" : "",
           atomic_load(&g_armed), atomic_load(&g_refused), handovers, waits, over,
           plant ? " (planted: the sweep ignores busy)" : "");
    if (plant) {
        /* What the run holds afterwards is the plant's mess: not checked. */
        tw_destroy(g_s);
        for (unsigned i = 0; i < threads; i++)
            free(f[i].h);
        printf("budget_steal: plant %s\n", over ? "caught" : "NOT caught");
        return over ? 0 : 1;
    }
    if (over)
        st_fail("handles held went past max_timers %" PRIu64 " times", over);
    if (atomic_load(&g_refused) == 0)
        st_fail("never refused: the sweeps under test never ran");
    if (require && waits == 0)
        st_fail("no sweep met an owner inside its window");
    /* The threads are gone, their handles kept: the rest of the cap is
     * found (in their stripes, the pool), and no more. */
    uint64_t kept = held_by(f, threads);
    filler m = {.h = calloc(g_max, sizeof(tw_timer))};
    if (!m.h) {
        fprintf(stderr, "budget_steal: out of memory\n");
        return 1;
    }
    fill(&m);
    if (kept + m.n != g_max)
        st_fail("the threads held %" PRIu64 ", the main thread then armed %" PRIu64
                " of max_timers %" PRIu64, kept, m.n, g_max);
    tw_timer extra;
    if (tw_schedule(g_s, TW_SEC, st_noop, NULL, &extra) != TW_EAGAIN)
        st_fail("an arming past max_timers was not refused");
    /* Everything cancelled: one thread fills the cap exactly. */
    for (unsigned i = 0; i < threads; i++)
        drop(&f[i], f[i].n);
    drop(&m, m.n);
    fill(&m);
    if (m.n != g_max)
        st_fail("after the run one thread armed %" PRIu64 " of max_timers %" PRIu64, m.n, g_max);
    if (tw_schedule(g_s, TW_SEC, st_noop, NULL, &extra) != TW_EAGAIN)
        st_fail("an arming past max_timers was not refused");
    tw_stats st;
    tw_stats_get(g_s, &st);
    if (st.pending != g_max)
        st_fail("pending %" PRIu64 ", max_timers %" PRIu64, (uint64_t)st.pending, g_max);
    tw_destroy(g_s);
    for (unsigned i = 0; i < threads; i++)
        free(f[i].h);
    free(m.h);
    if (st_failed()) {
        fprintf(stderr, "budget_steal: %" PRIu64 " failed checks\n", st_failed());
        return 1;
    }
    printf("budget_steal: ok\n");
    return 0;
}
