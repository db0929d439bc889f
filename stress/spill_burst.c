/*
 * spill_burst: bursts of far timers that outrun the cursor, so that the
 * producers' logs fill and their spills take the rest (src/defer.c), while
 * the cursor drains them and gives their pages back, a reader calls
 * tw_next_due (which reads the spills' entries, a page given back under it
 * included), and half of each burst is cancelled before the cursor comes
 * by. A MONOTONIC service with 2 workers and 1 ms ticks.
 *
 *   spill_burst [producers=3] [burst=20000] [seconds] [require=1] [seed]
 *
 * Each producer, round after round until the time is up: arms `burst`
 * timers due in 20 .. 300 ms (all logged: more than TW_DEFER_AHEAD ticks
 * ahead), cancels every other one, then waits (bounded) until the rest
 * have fired. The last round is not waited for: the main thread stops the
 * service while its timers are pending, and on_pending counts them.
 *
 * Checked, per timer: fired + cancelled-OK + dropped == 1; never early
 * (the callback's tw_now() >= tw_now() before its arming + its delay); the
 * library's stats equal the sums, pending 0 after the stop. With require,
 * no spill page ever opened fails the run (the path is not taken), unless
 * the process may use one CPU only (exit 77, ctest's skip).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stress_common.h"

#include "internal.h" /* tw__rare_total, TW_RARE_SPILL_* */

#include <pthread.h>
#include <sched.h>

typedef struct sp_timer {
    uint64_t not_before;     /* tw_now() before arming + delay */
    _Atomic uint32_t fired, dropped;
    uint32_t cancelled;      /* the producer's own */
} sp_timer;

static tw_service *g_s;
static atomic_bool g_quit, g_last_armed_all;
static _Atomic uint64_t g_early;

static void sp_fire(tw_timer t, void *arg)
{
    (void)t;
    sp_timer *x = arg;
    if (tw_now(g_s) < x->not_before)
        atomic_fetch_add(&g_early, 1);
    atomic_fetch_add_explicit(&x->fired, 1, memory_order_release);
}

static void sp_drop(tw_timer t, void *arg)
{
    (void)t;
    sp_timer *x = arg;
    atomic_fetch_add_explicit(&x->dropped, 1, memory_order_relaxed);
}

typedef struct producer {
    uint32_t burst;
    uint64_t seed;
    unsigned id;
    st_arena timers;         /* every sp_timer it armed, kept to the end */
    tw_timer *h;
    uint64_t armed, cancelled, rounds;
} producer;

/* Arm a burst; returns how many were armed (a stop refuses the rest). */
static uint32_t arm_burst(producer *p, st_rng *r, sp_timer **mine)
{
    uint32_t n = 0;
    for (; n < p->burst; n++) {
        sp_timer *x = st_arena_new(&p->timers);
        uint64_t delay = (20 + st_below(r, 281)) * TW_MS;
        x->not_before = tw_now(g_s) + delay;
        int rc = tw_schedule(g_s, delay, sp_fire, x, &p->h[n]);
        if (rc == TW_ESHUTDOWN) {
            x->cancelled = 1; /* never armed: counts as ended */
            break;
        }
        if (rc != TW_OK) {
            st_fail("tw_schedule: %d", rc);
            x->cancelled = 1;
            break;
        }
        mine[n] = x;
        p->armed++;
    }
    return n;
}

static void *produce(void *arg)
{
    producer *p = arg;
    st_rng r;
    st_rng_seed(&r, p->seed, p->id);
    sp_timer **mine = calloc(p->burst, sizeof *mine);
    if (!mine) {
        st_fail("out of memory");
        return NULL;
    }
    for (;;) {
        bool last = atomic_load(&g_quit);
        uint32_t n = arm_burst(p, &r, mine);
        for (uint32_t i = 0; i < n; i += 2) {
            int rc = tw_cancel(g_s, p->h[i]);
            if (rc == TW_OK) {
                mine[i]->cancelled = 1;
                p->cancelled++;
            } else if (rc != TW_ENOENT) {
                st_fail("tw_cancel: %d", rc);
            }
        }
        p->rounds++;
        if (last || n < p->burst)
            break;
        /* The rest fire within 300 ms of their arming; wait for them
         * (bounded: a TSan build's cursor is slow). */
        uint64_t end = st_mono_ns() + 20 * TW_SEC;
        for (uint32_t i = 1; i < n; i += 2) {
            while (!mine[i]->cancelled &&
                   atomic_load_explicit(&mine[i]->fired, memory_order_acquire) == 0 &&
                   st_mono_ns() < end)
                st_sleep_ns(TW_MS);
        }
    }
    free(mine);
    return NULL;
}

/* tw_next_due meanwhile: it reads the spills' live entries. */
static void *read_next_due(void *arg)
{
    (void)arg;
    uint64_t calls = 0;
    while (!atomic_load(&g_last_armed_all)) {
        (void)tw_next_due(g_s);
        calls++;
        st_sleep_ns(200 * TW_US);
    }
    return (void *)(uintptr_t)calls;
}

static unsigned cpus_allowed(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 2;
    return (unsigned)CPU_COUNT(&set);
}

int main(int argc, char **argv)
{
    unsigned np = (unsigned)st_arg(argc, argv, 1, 3);
    uint32_t burst = (uint32_t)st_arg(argc, argv, 2, 20000);
    double seconds = st_arg_seconds(argc, argv, 3);
    bool require = st_arg(argc, argv, 4, 1) != 0;
    uint64_t seed = st_arg(argc, argv, 5, st_seed_default());
    if (np < 1 || np > 8)
        np = 3;
    if (burst < TW_DEFER_LOG / 2)
        burst = TW_DEFER_LOG / 2;
    printf("spill_burst: producers %u burst %u seconds %.1f seed %" PRIu64 "\n", np, burst,
           seconds, seed);
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 2;
    if (tw_create(&cfg, &g_s) != TW_OK) {
        fprintf(stderr, "spill_burst: tw_create failed\n");
        return 1;
    }
    producer p[8];
    pthread_t th[8], reader;
    for (unsigned i = 0; i < np; i++) {
        p[i] = (producer){.burst = burst, .seed = seed, .id = i};
        st_arena_init(&p[i].timers, sizeof(sp_timer));
        p[i].h = calloc(burst, sizeof *p[i].h);
        if (!p[i].h) {
            fprintf(stderr, "spill_burst: out of memory\n");
            return 1;
        }
    }
    st_start(&reader, read_next_due, NULL);
    for (unsigned i = 0; i < np; i++)
        st_start(&th[i], produce, &p[i]);
    st_sleep_ns((uint64_t)(seconds * 1e9));
    atomic_store(&g_quit, true);
    for (unsigned i = 0; i < np; i++)
        pthread_join(th[i], NULL);
    atomic_store(&g_last_armed_all, true);
    void *calls;
    pthread_join(reader, &calls);
    /* The last round's timers are pending (or firing): the stop hands the
     * pending ones to on_pending. */
    if (tw_stop(g_s, sp_drop) != TW_OK)
        st_fail("tw_stop failed");
    uint64_t opened = tw__rare_total(g_s, TW_RARE_SPILL_OPENED);
    uint64_t refused = tw__rare_total(g_s, TW_RARE_SPILL_REFUSED);
    tw_stats st;
    tw_stats_get(g_s, &st);

    uint64_t armed = 0, cancelled = 0, fired = 0, dropped = 0, rounds = 0, bad = 0;
    for (unsigned i = 0; i < np; i++) {
        armed += p[i].armed;
        cancelled += p[i].cancelled;
        rounds += p[i].rounds;
        for (size_t k = 0; k < p[i].timers.n; k++) {
            sp_timer *x = st_arena_get(&p[i].timers, k);
            uint32_t f = atomic_load(&x->fired), d = atomic_load(&x->dropped);
            fired += f;
            dropped += d;
            if (f + d + x->cancelled != 1 && bad++ < 5)
                st_fail("timer %zu of producer %u: fired %u dropped %u cancelled %u", k, i, f,
                        d, x->cancelled);
        }
    }
    if (atomic_load(&g_early))
        st_fail("%" PRIu64 " callbacks started early", atomic_load(&g_early));
    if (st.scheduled != armed || st.cancelled != cancelled || st.fired != fired ||
        st.dropped != dropped || st.pending != 0)
        st_fail("stats: scheduled %" PRIu64 "/%" PRIu64 " cancelled %" PRIu64 "/%" PRIu64
                " fired %" PRIu64 "/%" PRIu64 " dropped %" PRIu64 "/%" PRIu64
                " pending %" PRIu64 " (library/ours)",
                st.scheduled, armed, st.cancelled, cancelled, st.fired, fired, st.dropped,
                dropped, st.pending);
    printf("spill_burst: %" PRIu64 " rounds, armed %" PRIu64 " cancelled %" PRIu64
           " fired %" PRIu64 " dropped %" PRIu64 "; spill pages opened %" PRIu64
           " refused %" PRIu64 "; %" PRIu64 " tw_next_due calls\n",
           rounds, armed, cancelled, fired, dropped, opened, refused, (uint64_t)(uintptr_t)calls);
    bool skip = false;
    if (opened == 0 && require) {
        if (cpus_allowed() < 2)
            skip = true; /* one CPU: the cursor keeps up with one producer at a time */
        else
            st_fail("no spill page was opened: the path was not taken");
    }
    tw_destroy(g_s);
    for (unsigned i = 0; i < np; i++) {
        st_arena_free(&p[i].timers);
        free(p[i].h);
    }
    if (st_failed()) {
        fprintf(stderr, "spill_burst: %" PRIu64 " failed checks\n", st_failed());
        return 1;
    }
    if (skip) {
        printf("spill_burst: skipped (one CPU, no spill)\n");
        return 77;
    }
    printf("spill_burst: ok\n");
    return 0;
}
