/*
 * thread_churn: threads that come and go, against the per-thread state.
 *
 * The library gives a thread a counter stripe (and, with it, a cache of
 * free records) the first time it calls in. This program runs more threads
 * than there are owned stripes, some for the whole run and waves of
 * short-lived ones beside them, all scheduling and cancelling on one
 * MANUAL-clock service (nothing fires: every timer is far out). Then it
 * checks, exactly:
 *   - stats.scheduled and stats.cancelled equal the calls that returned
 *     TW_OK, summed over every thread (no counter update lost between an
 *     owner's plain load + store and another thread's atomic add);
 *   - nothing is pending after every thread cancelled what it armed, and
 *     the invariant checker passes (records handed between threads through
 *     recycled stripes are whole);
 *   - under TSan, no data race on a stripe or record cache handed from an
 *     exited thread to its successor.
 *
 *   thread_churn [threads] [iterations] [seconds] [waves] [batch] [seed]
 * threads: long-lived threads (the rest of the 2 * TW_STRIPES-plus threads
 * come in waves); iterations: schedule/cancel pairs per thread and wave;
 * batch: each thread arms up to this many (default 8), then cancels them
 * in a shuffled order. Past TW_MAGAZINE, records go through the shared
 * free lists in blocks (records.c), which the threads without an owned
 * stripe take apart a root at a time while the others take them whole: a
 * record handed out twice makes one of its timers' cancels fail.
 */
#include "stress_common.h"

#include "internal.h"

typedef struct worker {
    pthread_t th;
    st_rng rng;
    uint64_t pairs;          /* schedule/cancel pairs to do */
    uint64_t scheduled, cancelled;
} worker;

static tw_service *g_s;
static uint64_t g_end_ns;
static unsigned g_batch = 8;

static void never_runs(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    st_fail("a callback ran; every timer was cancelled before it was due");
}

static void shuffle(st_rng *rng, tw_timer *h, unsigned n)
{
    for (unsigned i = n; i > 1; i--) {
        unsigned j = (unsigned)st_below(rng, i);
        tw_timer t = h[i - 1];
        h[i - 1] = h[j];
        h[j] = t;
    }
}

/* Arm up to g_batch timers, then cancel them all in a shuffled order;
 * repeat. */
static void *worker_main(void *p)
{
    worker *w = p;
    tw_timer *h = calloc(g_batch, sizeof *h);
    if (!h) {
        st_fail("out of memory");
        return NULL;
    }
    for (uint64_t i = 0; i < w->pairs && st_mono_ns() < g_end_ns;) {
        unsigned n = 1 + (unsigned)st_below(&w->rng, g_batch);
        unsigned armed = 0;
        for (; armed < n; armed++) {
            uint64_t delay = 1000000000ull + st_below(&w->rng, 1000000000ull);
            int rc = tw_schedule(g_s, delay, never_runs, NULL, &h[armed]);
            if (rc != TW_OK) {
                st_fail("tw_schedule: %s", tw_strerror(rc));
                break;
            }
            w->scheduled++;
        }
        shuffle(&w->rng, h, armed);
        for (unsigned k = 0; k < armed; k++) {
            int rc = tw_cancel(g_s, h[k]);
            if (rc != TW_OK)
                st_fail("tw_cancel of a pending timer: %s", tw_strerror(rc));
            else
                w->cancelled++;
        }
        i += armed ? armed : 1;
    }
    free(h);
    return NULL;
}

static void start_all(worker *w, uint64_t n, uint64_t pairs, uint64_t seed, uint64_t stream)
{
    for (uint64_t i = 0; i < n; i++) {
        w[i].pairs = pairs;
        w[i].scheduled = w[i].cancelled = 0;
        st_rng_seed(&w[i].rng, seed, stream + i);
        st_start(&w[i].th, worker_main, &w[i]);
    }
}

static void join_all(worker *w, uint64_t n, uint64_t *scheduled, uint64_t *cancelled)
{
    for (uint64_t i = 0; i < n; i++) {
        pthread_join(w[i].th, NULL);
        *scheduled += w[i].scheduled;
        *cancelled += w[i].cancelled;
    }
}

int main(int argc, char **argv)
{
    uint64_t nlong = st_arg(argc, argv, 1, 4);
    uint64_t iterations = st_arg(argc, argv, 2, 200000);
    double seconds = st_arg_seconds(argc, argv, 3);
    uint64_t waves = st_arg(argc, argv, 4, 6);
    uint64_t batch = st_arg(argc, argv, 5, 8);
    uint64_t seed = st_arg(argc, argv, 6, st_seed_default());
    uint64_t per_wave = TW_STRIPES / 2;
    if (nlong < 1 || nlong > 64 || waves < 1 || waves > 1000 || batch < 1 || batch > 4096) {
        fprintf(stderr, "threads: 1 .. 64, waves: 1 .. 1000, batch: 1 .. 4096\n");
        return 2;
    }
    g_batch = (unsigned)batch;
    printf("thread_churn: long-lived %" PRIu64 " iterations %" PRIu64 " seconds %.1f"
           " waves %" PRIu64 " x %" PRIu64 " threads batch %" PRIu64 " seed %" PRIu64 "\n",
           nlong, iterations, seconds, waves, per_wave, batch, seed);
    fflush(stdout);

    g_s = st_create_manual(64, 4);
    g_end_ns = st_mono_ns() + (uint64_t)(seconds * 1e9);
    uint64_t scheduled = 0, cancelled = 0;
    worker *lw = calloc(nlong, sizeof *lw);
    worker *ww = calloc(per_wave, sizeof *ww);
    if (!lw || !ww) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    start_all(lw, nlong, iterations, seed, 0);
    /* Waves beside them: each wave's threads exit before the next starts,
     * so their stripes are handed on; 6 waves of TW_STRIPES / 2 threads
     * are more threads in all than there are stripes. */
    for (uint64_t v = 0; v < waves; v++) {
        start_all(ww, per_wave, iterations / waves + 1, seed, 1000 + v * per_wave);
        join_all(ww, per_wave, &scheduled, &cancelled);
    }
    join_all(lw, nlong, &scheduled, &cancelled);

    tw_stats st;
    tw_stats_get(g_s, &st);
    char buf[512];
    if (tw__check(g_s, buf, sizeof buf) != 0)
        st_fail("tw__check: %s", buf);
    if (st.scheduled != scheduled)
        st_fail("stats.scheduled %" PRIu64 " but %" PRIu64 " schedules returned TW_OK",
                st.scheduled, scheduled);
    if (st.cancelled != cancelled)
        st_fail("stats.cancelled %" PRIu64 " but %" PRIu64 " cancels returned TW_OK",
                st.cancelled, cancelled);
    if (st.pending != 0)
        st_fail("stats.pending %" PRIu64 " after every timer was cancelled", st.pending);
    if (scheduled != cancelled)
        st_fail("%" PRIu64 " scheduled but %" PRIu64 " cancelled", scheduled, cancelled);
    tw_destroy(g_s);
    free(lw);
    free(ww);
    printf("thread_churn: scheduled %" PRIu64 " cancelled %" PRIu64 " -> %s\n", scheduled,
           cancelled, st_failed() ? "FAILED" : "OK");
    return st_failed() ? 1 : 0;
}
