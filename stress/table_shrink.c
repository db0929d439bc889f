/*
 * table_shrink: the record table's top given back (records.c, "Giving the
 * top back") while producers keep arming, cancelling and pushing back
 * timers, with exact accounting.
 *
 *     table_shrink [threads=2] [bursts=1000000] [seconds=$TW_STRESS_SECONDS|3]
 *                  [workers=2] [burst=40000] [seed] [plant]
 *
 * One MONOTONIC service, trim period 10 ms (tw__trim_period_override).
 * Each producer repeats: a burst of `burst` timers due 20 .. 40 ms after
 * it is armed (one in a thousand 100 .. 300 ms after; a tenth cancelled or
 * pushed back at once), then a quiet spell of
 * 20 .. 60 ms with a trickle of timers. Together the bursts take the table
 * past chunk 5; each quiet spell lets the cursor close the top, take its
 * records out of every magazine (the producers' own, idle or not, and
 * the workers'), and give it back, while the trickle allocates, frees into
 * magazines and, when the chunks below run dry at the next burst, reopens
 * the closed top. Meanwhile every producer probes handles of timers it
 * knows are over (fired, or cancelled with TW_OK): tw_cancel and
 * tw_reschedule of such a stale handle must say TW_ENOENT, whether its
 * record's chunk was given back, used again or neither.
 *
 * Checked: per timer, fired + cancelled-OK == 1 once the service is idle;
 * every callback gets its own handle; no stale handle acts; the library's
 * counters equal the sums; tw__check at the end; and at least one chunk
 * was given back (else the run did not test what it is for). Under TSan:
 * no data race between the trimmer and a magazine's owner (the handshake),
 * or on records whose pages were given back and used again.
 *
 * With "plant" the trimmer skips the handshake (tw__rec_plant_no_handshake)
 * and empties magazines whatever their owners do: the TSan build must
 * report a race in steal_magazines (ctest stress.table_shrink.plant),
 * which shows TSan sees the magazines' plain accesses, and that only the
 * handshake orders them. The planted run keeps idle workers on the CPU
 * the kernel gives them (tw__watchers_stay; main says why).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stress_common.h"

#include "internal.h" /* tw__trim_period_override, tw__check, rec.given_back */

#define PROBES 256 /* handles of timers known to be over, per producer */

typedef struct ts_rec {
    tw_timer handle;         /* owner's: set before the callback can run */
    _Atomic tw_timer seen;   /* the handle the callback got */
    _Atomic uint32_t fired;
    uint32_t cancelled;      /* owner's: tw_cancel said TW_OK */
} ts_rec;

typedef struct producer {
    pthread_t th;
    int id;
    st_rng rng;
    st_arena recs;
    tw_timer probe[PROBES];  /* handles of timers that are over */
    unsigned nprobe;
    uint64_t scheduled, cancelled, stale_probes;
    uint64_t arm_ns;         /* how long the last burst took to arm */
} producer;

static tw_service *g_s;
static uint64_t g_end_ns, g_bursts, g_burst;
static _Atomic uint64_t g_bursts_done;

static void on_fire(tw_timer t, void *arg)
{
    ts_rec *r = arg;
    atomic_store_explicit(&r->seen, t, memory_order_relaxed);
    /* Release: the owner's acquire sees the callback's writes. */
    atomic_fetch_add_explicit(&r->fired, 1, memory_order_release);
}

static ts_rec *arm_at(producer *p, uint64_t at_ns)
{
    ts_rec *r = st_arena_new(&p->recs);
    int rc = tw_schedule_at(g_s, at_ns, on_fire, r, &r->handle);
    if (rc != TW_OK) {
        st_fail("producer %d: tw_schedule: %s", p->id, tw_strerror(rc));
        r->cancelled = 1; /* accounted as over */
        return NULL;
    }
    p->scheduled++;
    return r;
}

static ts_rec *arm(producer *p, uint64_t delay_ns)
{
    return arm_at(p, tw_now(g_s) + delay_ns);
}

static void remember_over(producer *p, tw_timer h)
{
    p->probe[p->nprobe++ % PROBES] = h;
}

/* Stale handles must not act, whatever happened to their records. */
static void probe_stale(producer *p)
{
    unsigned n = p->nprobe < PROBES ? p->nprobe : PROBES;
    for (unsigned i = 0; i < n; i++) {
        tw_timer h = p->probe[st_below(&p->rng, n)];
        int rc = st_below(&p->rng, 2) ? tw_cancel(g_s, h)
                                      : tw_reschedule(g_s, h, 1000 * 1000000ull);
        if (rc != TW_ENOENT)
            st_fail("producer %d: a stale handle %016llx got %s", p->id,
                    (unsigned long long)h, tw_strerror(rc));
        p->stale_probes++;
    }
}

/* Cancel r if it has not fired; either way it is over afterwards, unless
 * the cancel lost to a callback about to run (then it fires). */
static void cancel_one(producer *p, ts_rec *r)
{
    int rc = tw_cancel(g_s, r->handle);
    if (rc == TW_OK) {
        r->cancelled++;
        p->cancelled++;
        remember_over(p, r->handle);
    } else if (rc != TW_ENOENT) {
        st_fail("producer %d: tw_cancel: %s", p->id, tw_strerror(rc));
    }
}

/* A burst's timers fall due together, after it is armed (twice as long
 * as the last one took: sanitizers and a loaded machine slow arming), so
 * that all of it is pending at once. */
static void burst(producer *p)
{
    size_t first = p->recs.n;
    uint64_t start = tw_now(g_s);
    uint64_t due = start + 2 * p->arm_ns + 20 * 1000000ull;
    for (uint64_t i = 0; i < g_burst; i++) {
        /* A few long ones hold the top closed into the next burst, which
         * then needs it: a reopen. */
        uint64_t ms = st_below(&p->rng, 1000) ? st_below(&p->rng, 21)
                                               : 100 + st_below(&p->rng, 201);
        ts_rec *r = arm_at(p, due + ms * 1000000ull);
        if (!r)
            continue;
        uint64_t dice = st_below(&p->rng, 20);
        if (dice == 0)
            cancel_one(p, r);
        else if (dice == 1)
            (void)tw_reschedule(g_s, r->handle, 25000000ull); /* TW_ENOENT if it ran */
    }
    p->arm_ns = tw_now(g_s) - start;
    /* Fired ones of this burst become probes once seen over. */
    for (size_t i = first; i < p->recs.n; i += 97) {
        ts_rec *r = st_arena_get(&p->recs, i);
        /* Acquire: pairs with on_fire's release. */
        if (atomic_load_explicit(&r->fired, memory_order_acquire))
            remember_over(p, r->handle);
    }
}

static void quiet(producer *p)
{
    uint64_t until = st_mono_ns() + (20 + st_below(&p->rng, 41)) * 1000000ull;
    size_t first = p->recs.n;
    while (st_mono_ns() < until) {
        ts_rec *r = arm(p, (1 + st_below(&p->rng, 3)) * 1000000ull);
        if (r && st_below(&p->rng, 2))
            cancel_one(p, r);
        probe_stale(p);
        st_sleep_ns(2000000ull);
    }
    for (size_t i = first; i < p->recs.n; i++) {
        ts_rec *r = st_arena_get(&p->recs, i);
        if (atomic_load_explicit(&r->fired, memory_order_acquire))
            remember_over(p, r->handle);
    }
}

static void *producer_main(void *arg)
{
    producer *p = arg;
    while (st_mono_ns() < g_end_ns &&
           atomic_fetch_add_explicit(&g_bursts_done, 1, memory_order_relaxed) < g_bursts) {
        burst(p);
        quiet(p);
    }
    return NULL;
}

/* Every timer fired exactly once or was cancelled exactly once. */
static void account(producer *ps, int n, uint64_t *fired_total)
{
    for (int k = 0; k < n; k++) {
        producer *p = &ps[k];
        for (size_t i = 0; i < p->recs.n; i++) {
            ts_rec *r = st_arena_get(&p->recs, i);
            uint32_t f = atomic_load_explicit(&r->fired, memory_order_acquire);
            if (f + r->cancelled != 1)
                st_fail("producer %d timer %zu: fired %u, cancelled %u", k, i, f,
                        r->cancelled);
            if (f && atomic_load_explicit(&r->seen, memory_order_relaxed) != r->handle)
                st_fail("producer %d timer %zu: callback got another handle", k, i);
            *fired_total += f;
        }
    }
}

int main(int argc, char **argv)
{
    int threads = (int)st_arg(argc, argv, 1, 2);
    g_bursts = st_arg(argc, argv, 2, 1000000);
    double seconds = st_arg_seconds(argc, argv, 3);
    uint32_t workers = (uint32_t)st_arg(argc, argv, 4, 2);
    g_burst = st_arg(argc, argv, 5, 40000);
    uint64_t seed = st_arg(argc, argv, 6, st_seed_default());
    tw__rec_plant_no_handshake = argc > 7 && strcmp(argv[7], "plant") == 0;
    /* The planted race shows when the trimmer takes a magazine while a
     * worker, in the middle of a batch, has filled it since its last
     * release the cursor acquired. Watchers that move off a runner's CPU
     * (workers.c) leave the runner its CPU, and under TSan the run then
     * met that moment in none of 6 tries (6 of 6 before the move, and
     * with it turned off): the planted run keeps the watchers where the
     * kernel puts them. The clean runs keep the move. */
    tw__watchers_stay = tw__rec_plant_no_handshake;
    printf("table_shrink seed=%llu threads=%d seconds=%.1f workers=%u burst=%llu\n",
           (unsigned long long)seed, threads, seconds, workers, (unsigned long long)g_burst);

    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = workers;
    tw__trim_period_override = 10 * 1000000ull;
    int rc = tw_create(&cfg, &g_s);
    tw__trim_period_override = 0;
    if (rc != TW_OK) {
        fprintf(stderr, "tw_create: %s\n", tw_strerror(rc));
        return 2;
    }
    producer *ps = calloc((size_t)threads, sizeof *ps);
    if (!ps)
        return 2;
    g_end_ns = st_mono_ns() + (uint64_t)(seconds * 1e9);
    for (int k = 0; k < threads; k++) {
        ps[k].id = k;
        st_rng_seed(&ps[k].rng, seed, (uint64_t)k);
        st_arena_init(&ps[k].recs, sizeof(ts_rec));
        st_start(&ps[k].th, producer_main, &ps[k]);
    }
    for (int k = 0; k < threads; k++)
        pthread_join(ps[k].th, NULL);

    /* Idle: everything left fires within a few ms; the cursor goes on
     * giving the top back meanwhile. */
    uint64_t deadline = st_mono_ns() + 10 * 1000000000ull;
    while (tw__pending(g_s) && st_mono_ns() < deadline)
        st_sleep_ns(5000000ull);
    /* The give-back takes a few trim periods and a few dozen cursor loops;
     * on a loaded machine (injected yields, ctest -j2) more. Keep the
     * cursor turning, as a live server's timers do, for up to 10 s. */
    static ts_rec tick;
    uint64_t ticks = 0;
    for (deadline = st_mono_ns() + 10 * 1000000000ull;
         !atomic_load_explicit(&g_s->rec.given_back, memory_order_relaxed) &&
         st_mono_ns() < deadline;
         ticks++) {
        if (tw_schedule(g_s, 1000000ull, on_fire, &tick, &tick.handle) != TW_OK)
            st_fail("a ticking timer was refused");
        st_sleep_ns(10000000ull);
    }
    for (deadline = st_mono_ns() + 5 * 1000000000ull;
         atomic_load_explicit(&tick.fired, memory_order_acquire) < ticks &&
         st_mono_ns() < deadline;)
        st_sleep_ns(1000000ull); /* the last tick's callback */
    if (atomic_load_explicit(&tick.fired, memory_order_acquire) != ticks)
        st_fail("ticking timers: %llu armed, %u fired", (unsigned long long)ticks,
                atomic_load_explicit(&tick.fired, memory_order_acquire));
    tw_stop(g_s, NULL);

    uint64_t fired = 0, scheduled = 0, cancelled = 0, probes = 0;
    account(ps, threads, &fired);
    for (int k = 0; k < threads; k++) {
        scheduled += ps[k].scheduled;
        cancelled += ps[k].cancelled;
        probes += ps[k].stale_probes;
    }
    tw_stats st;
    tw_stats_get(g_s, &st);
    scheduled += ticks;
    fired += atomic_load_explicit(&tick.fired, memory_order_acquire);
    if (st.scheduled != scheduled || st.fired != fired || st.cancelled != cancelled)
        st_fail("stats: scheduled %llu/%llu fired %llu/%llu cancelled %llu/%llu",
                (unsigned long long)st.scheduled, (unsigned long long)scheduled,
                (unsigned long long)st.fired, (unsigned long long)fired,
                (unsigned long long)st.cancelled, (unsigned long long)cancelled);
    char buf[256];
    if (tw__check(g_s, buf, sizeof buf) != 0)
        st_fail("tw__check: %s", buf);
    uint64_t back = atomic_load_explicit(&g_s->rec.given_back, memory_order_relaxed);
    uint64_t reopens = atomic_load_explicit(&g_s->rec.reopens, memory_order_relaxed);
    printf("bursts %llu scheduled %llu fired %llu cancelled %llu stale probes %llu "
           "chunks given back %llu reopened %llu top %u records\n",
           (unsigned long long)atomic_load(&g_bursts_done), (unsigned long long)scheduled,
           (unsigned long long)fired, (unsigned long long)cancelled,
           (unsigned long long)probes, (unsigned long long)back,
           (unsigned long long)reopens, tw__records_high(&g_s->rec));
    if (back == 0)
        st_fail("no chunk was given back: the run did not test the give-back");
    tw_destroy(g_s);
    for (int k = 0; k < threads; k++)
        st_arena_free(&ps[k].recs);
    free(ps);
    uint64_t failed = st_failed();
    printf("%s (%llu failures)\n", failed ? "FAILED" : "ok", (unsigned long long)failed);
    return failed ? 1 : 0;
}
