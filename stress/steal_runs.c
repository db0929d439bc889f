/*
 * steal_runs: idle workers steal from busy ones' batches while the drainer
 * hands runs out and uses their memory again (src/workers.c, runs).
 *
 *     steal_runs [producers] [-] [seconds] [plant] [require] [seed]
 *                (defaults: 2, -, TW_STRESS_SECONDS else 3, 0, 0)
 *
 * A MONOTONIC service with 3 workers and a 1 ms tick. Each producer arms
 * groups of 100 to 800 timers due at one instant 2 to 6 ms ahead (each
 * group a run of several batches), cancels a few of each group at once,
 * and goes on. One callback in 48 spins for 50 to 200 us, so that the
 * worker running it is busy while its batch-mates wait: an idle worker
 * steals them (the race each producer's groups aim at: a stealer that
 * read a batch's run just as its owner finished, against the drainer
 * that takes the run's memory for its next due list). Every callback
 * checks it did not start before its deadline.
 *
 * At the end: tw_stop hands back what never started; every timer either
 * ran once, was cancelled (TW_OK) or was handed back, never two of these;
 * the stats equal the sums; with `require` (ctest) some handles were
 * stolen and some runs used again, else the run proved nothing.
 *
 *   plant 1  tw__runs_plant_no_wait: spent runs are used again without the
 *            look at stealers. A stealer's read of a run's pair then has no
 *            order with the drainer's next writes into that memory, and
 *            TSan must report it (stress.steal_runs.plant, through
 *            expect_sanitizer_report.cmake: a report naming batch_steal and
 *            src/slots.c, where the drainer's list is written).
 *
 * Exit 0 when every check held, 1 on a failed check, 2 on a setup error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stress_common.h"

#include "internal.h" /* tw__runs_plant_no_wait, tw__rare_total, the pool */

#define MAX_PRODUCERS 8
#define GROUP_MIN 100
#define GROUP_MAX 800
#define SLOW_ONE_IN 48

typedef struct rec {
    tw_timer h;
    uint64_t deadline;      /* service time */
    _Atomic uint32_t runs;
    _Atomic uint32_t early;
    uint32_t cancelled;     /* the producer's: cancel said TW_OK */
    _Atomic uint32_t dropped;
    uint32_t slow_us;       /* 0, or how long its callback spins */
} rec;

static tw_service *g_s;

typedef struct producer {
    pthread_t th;
    st_rng rng;
    uint64_t end_ns;
    st_arena recs;
    uint64_t armed, cancelled;
} producer;

static void spin_us(uint32_t us)
{
    uint64_t until = st_mono_ns() + (uint64_t)us * 1000u;
    while (st_mono_ns() < until) {
    }
}

static void on_fire(tw_timer t, void *arg)
{
    rec *r = arg;
    if (t != r->h)
        st_fail("callback got handle %" PRIx64 ", armed as %" PRIx64, t, r->h);
    if (tw_now(g_s) < r->deadline)
        atomic_fetch_add_explicit(&r->early, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->runs, 1, memory_order_relaxed);
    if (r->slow_us)
        spin_us(r->slow_us);
}

static void on_pending(tw_timer t, void *arg)
{
    (void)t;
    rec *r = arg;
    atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
}

/* One group: n timers due at one instant, a few of them cancelled at once. */
static void arm_group(producer *p)
{
    uint64_t n = GROUP_MIN + st_below(&p->rng, GROUP_MAX - GROUP_MIN + 1);
    uint64_t at = tw_now(g_s) + (2 + st_below(&p->rng, 5)) * 1000000u;
    size_t first = p->recs.n;
    for (uint64_t i = 0; i < n; i++) {
        rec *r = st_arena_new(&p->recs);
        r->deadline = at;
        r->slow_us = st_below(&p->rng, SLOW_ONE_IN) == 0
                         ? 50 + (uint32_t)st_below(&p->rng, 151)
                         : 0;
        int rc = tw_schedule_at(g_s, at, on_fire, r, &r->h);
        if (rc != TW_OK) {
            st_fail("tw_schedule_at: %s", tw_strerror(rc));
            return;
        }
        p->armed++;
    }
    for (uint64_t k = 0; k < n / 16; k++) {
        rec *r = st_arena_get(&p->recs, first + st_below(&p->rng, n));
        if (!r->cancelled && tw_cancel(g_s, r->h) == TW_OK) {
            r->cancelled = 1;
            p->cancelled++;
        }
    }
}

static void *producer_main(void *arg)
{
    producer *p = arg;
    while (st_mono_ns() < p->end_ns && st_failed() == 0) {
        arm_group(p);
        st_sleep_ns(st_below(&p->rng, 3) * 1000000u);
    }
    return NULL;
}

/* Every timer ran once, was cancelled or was handed back: exactly one. */
static void check_timers(producer *p, uint64_t *ran, uint64_t *dropped)
{
    for (size_t i = 0; i < p->recs.n; i++) {
        rec *r = st_arena_get(&p->recs, i);
        uint32_t runs = atomic_load(&r->runs), drop = atomic_load(&r->dropped);
        if (runs + r->cancelled + drop != 1)
            st_fail("timer %zu: %u runs, cancelled %u, dropped %u", i, runs, r->cancelled,
                    drop);
        if (atomic_load(&r->early))
            st_fail("timer %zu started before its deadline", i);
        *ran += runs;
        *dropped += drop;
    }
}

int main(int argc, char **argv)
{
    uint64_t nprod = st_arg(argc, argv, 1, 2);
    double seconds = st_arg_seconds(argc, argv, 3);
    bool plant = st_arg(argc, argv, 4, 0) != 0;
    bool require = st_arg(argc, argv, 5, 0) != 0;
    uint64_t seed = st_arg(argc, argv, 6, st_seed_default());
    if (nprod < 1 || nprod > MAX_PRODUCERS) {
        fprintf(stderr, "producers: 1 .. %d\n", MAX_PRODUCERS);
        return 2;
    }
    printf("steal_runs: seed %" PRIu64 ", %" PRIu64 " producers, %.1f s%s\n", seed, nprod,
           seconds, plant ? ", planted: runs used again without the look at stealers" : "");
    tw__runs_plant_no_wait = plant;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 3;
    int rc = tw_create(&cfg, &g_s);
    if (rc != TW_OK) {
        fprintf(stderr, "tw_create: %s\n", tw_strerror(rc));
        return 2;
    }
    producer p[MAX_PRODUCERS];
    uint64_t end = st_mono_ns() + (uint64_t)(seconds * 1e9);
    for (uint64_t i = 0; i < nprod; i++) {
        memset(&p[i], 0, sizeof p[i]);
        st_rng_seed(&p[i].rng, seed, i);
        st_arena_init(&p[i].recs, sizeof(rec));
        p[i].end_ns = end;
        st_start(&p[i].th, producer_main, &p[i]);
    }
    for (uint64_t i = 0; i < nprod; i++)
        pthread_join(p[i].th, NULL);
    st_sleep_ns(20 * 1000000u); /* the last groups come due and run */
    rc = tw_stop(g_s, on_pending);
    if (rc != TW_OK)
        st_fail("tw_stop: %s", tw_strerror(rc));

    uint64_t armed = 0, cancelled = 0, ran = 0, dropped = 0;
    for (uint64_t i = 0; i < nprod; i++) {
        check_timers(&p[i], &ran, &dropped);
        armed += p[i].armed;
        cancelled += p[i].cancelled;
    }
    tw_stats st;
    tw_stats_get(g_s, &st);
    if (st.scheduled != armed || st.cancelled != cancelled || st.fired != ran ||
        st.dropped != dropped || st.pending != 0)
        st_fail("stats: scheduled %" PRIu64 " cancelled %" PRIu64 " fired %" PRIu64
                " dropped %" PRIu64 " pending %" PRIu64 "; counted %" PRIu64 " %" PRIu64
                " %" PRIu64 " %" PRIu64 " 0", st.scheduled, st.cancelled, st.fired,
                st.dropped, st.pending, armed, cancelled, ran, dropped);
    uint64_t stolen = tw__rare_total(g_s, TW_RARE_STOLEN);
    uint64_t reused = g_s->pool.runs_reused; /* the drainer's; the service is stopped */
    printf("armed %" PRIu64 ", ran %" PRIu64 ", cancelled %" PRIu64 ", handed back %" PRIu64
           "; %" PRIu64 " handles stolen, %" PRIu64 " runs used again\n",
           armed, ran, cancelled, dropped, stolen, reused);
    if (require && (stolen == 0 || reused == 0))
        st_fail("nothing stolen or no run used again: the run tested nothing");
    tw_destroy(g_s);
    for (uint64_t i = 0; i < nprod; i++)
        st_arena_free(&p[i].recs);
    if (st_failed()) {
        fprintf(stderr, "steal_runs: %" PRIu64 " failed checks\n", st_failed());
        return 1;
    }
    printf("steal_runs: ok\n");
    return 0;
}
