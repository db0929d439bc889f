/*
 * beside: the lateness of ordinary timers beside a burst, as a figure.
 *
 * A MONOTONIC service with 2 workers (1 ms tick). One thread arms a burst
 * of B timers all due at the same instant, 400 ms after the start (WL5's
 * burst, a longer lead); meanwhile another thread arms a "probe" timer
 * every 2 ms, each due 3 ms later, until the burst has run (a server's
 * ordinary timeouts). The cursor claims the burst's slot ahead of its
 * tick (src/wheel.c, early claims), some 40-150 ms of work for a million
 * on a 2-core VM; a probe due meanwhile must not wait for that claim.
 *
 *   beside [runs] [burst] [configured] [every_us] [ahead_us] [slots]
 *          (defaults: 5 1000000 0 2000 3000 0; configured 1: max_timers =
 *          burst + 4096 and 1024 slots, as twbench's column; a probe is
 *          armed every every_us, due ahead_us later; slots > 0: that many
 *          slots a level, 256 or fewer put the burst beyond level 0, where
 *          the cursor drains it into level 0 before its epoch)
 *
 * Prints, per run, the probes due before the burst's instant: how many, the
 * median, p99 and worst lateness (ms), and how many came more than 5 ms
 * late; then the burst's first callback after its deadline (ms) and its
 * callbacks per second. Probes due within 2 ms of the burst's instant are
 * not armed (they would queue behind the burst: that is the burst's
 * figure, not the claim's). A figure, not a test: tests/test_workers.c
 * (early_claim_gives_way_to_an_earlier_tick) asserts the behaviour.
 * Public API only, so that an older build can run it too.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "timerwheel.h"

#define MS 1000000ull
#define MAX_PROBES 8192
#define BURST_AT (400 * MS)
static uint64_t g_every = 2 * MS, g_ahead = 3 * MS; /* a probe's pace and delay */
static uint32_t g_slots;                            /* wheel_slots, 0: as configured */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct run {
    tw_service *s;
    uint64_t burst_due;           /* CLOCK_MONOTONIC */
    unsigned long burst;
    _Atomic unsigned long burst_ran;
    _Atomic uint64_t burst_first, burst_last;
    atomic_bool stop;
    int nprobes;
    uint64_t probe_due[MAX_PROBES];
    _Atomic uint64_t probe_ran[MAX_PROBES];
} run;

static run R;

static void burst_cb(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    unsigned long k = atomic_fetch_add_explicit(&R.burst_ran, 1, memory_order_relaxed);
    if (k == 0)
        atomic_store(&R.burst_first, mono_ns());
    if (k + 1 == R.burst)
        atomic_store(&R.burst_last, mono_ns());
}

static void probe_cb(tw_timer t, void *arg)
{
    (void)t;
    atomic_store(&R.probe_ran[(intptr_t)arg], mono_ns());
}

static void *prober(void *arg)
{
    (void)arg;
    while (!atomic_load(&R.stop) && R.nprobes < MAX_PROBES) {
        uint64_t due = mono_ns() + g_ahead;
        if (due + 2 * MS < R.burst_due || due > R.burst_due + 2 * MS) {
            tw_timer h;
            R.probe_due[R.nprobes] = due;
            if (tw_schedule(R.s, g_ahead, probe_cb, (void *)(intptr_t)R.nprobes, &h) !=
                TW_OK) {
                fprintf(stderr, "beside: a probe was refused\n");
                exit(1);
            }
            R.nprobes++;
        }
        struct timespec ts = {0, (long)g_every};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void one_run(int r, unsigned long burst, int configured)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 2;
    cfg.tick_ns = MS;
    if (configured) {
        cfg.max_timers = burst + 4096;
        cfg.wheel_slots = 1024;
    }
    if (g_slots)
        cfg.wheel_slots = g_slots;
    R.burst = burst;
    atomic_store(&R.burst_ran, 0);
    atomic_store(&R.burst_first, 0);
    atomic_store(&R.burst_last, 0);
    atomic_store(&R.stop, false);
    R.nprobes = 0;
    for (int i = 0; i < MAX_PROBES; i++)
        atomic_store(&R.probe_ran[i], 0);
    if (tw_create(&cfg, &R.s) != TW_OK) {
        fprintf(stderr, "beside: tw_create failed\n");
        exit(2);
    }
    uint64_t start = mono_ns();
    R.burst_due = start + BURST_AT;
    pthread_t t;
    if (pthread_create(&t, NULL, prober, NULL) != 0)
        exit(2);
    for (unsigned long i = 0; i < burst; i++) {
        uint64_t now = mono_ns();
        tw_timer h;
        if (now >= R.burst_due ||
            tw_schedule(R.s, R.burst_due - now, burst_cb, NULL, &h) != TW_OK) {
            fprintf(stderr, "beside: the burst was not armed before its instant\n");
            exit(1);
        }
    }
    double armed_ms = (double)(mono_ns() - start) / 1e6;
    while (atomic_load(&R.burst_ran) < burst)
        usleep(5000);
    usleep(20000);
    atomic_store(&R.stop, true);
    pthread_join(t, NULL);
    usleep(20000);
    static double late[MAX_PROBES];
    int n = 0, over5 = 0;
    for (int i = 0; i < R.nprobes; i++) {
        if (R.probe_due[i] >= R.burst_due)
            continue;
        uint64_t ran = atomic_load(&R.probe_ran[i]);
        if (ran == 0) {
            fprintf(stderr, "beside: a probe did not run\n");
            exit(1);
        }
        late[n] = ((double)ran - (double)R.probe_due[i]) / 1e6;
        over5 += late[n] > 5.0;
        n++;
    }
    qsort(late, (size_t)n, sizeof *late, cmp_double);
    double first = ((double)atomic_load(&R.burst_first) - (double)R.burst_due) / 1e6;
    double secs = (double)(atomic_load(&R.burst_last) - atomic_load(&R.burst_first)) / 1e9;
    printf("run %d: burst armed in %.0f ms; %d probes before it: p50 %.2f p99 %.2f worst %.2f ms,"
           " %d over 5 ms; burst first callback %.3f ms, %.1fM callbacks/s\n",
           r, armed_ms, n, n ? late[n / 2] : 0.0, n ? late[(n * 99) / 100] : 0.0,
           n ? late[n - 1] : 0.0, over5, first, secs > 0 ? (double)burst / secs / 1e6 : 0.0);
    fflush(stdout);
    tw_destroy(R.s);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    unsigned long burst = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000000;
    int configured = argc > 3 ? atoi(argv[3]) : 0;
    g_every = argc > 4 ? strtoull(argv[4], NULL, 10) * 1000 : g_every;
    g_ahead = argc > 5 ? strtoull(argv[5], NULL, 10) * 1000 : g_ahead;
    g_slots = argc > 6 ? (uint32_t)strtoul(argv[6], NULL, 10) : 0;
    if (runs <= 0 || burst == 0 || g_every == 0 || g_every >= 1000 * MS || g_ahead == 0) {
        fprintf(stderr,
                "usage: beside [runs] [burst] [configured] [every_us] [ahead_us] [slots]\n");
        return 2;
    }
    printf("# beside: %lu timers due at +%llu ms, a probe armed every %.1f ms due %.1f ms"
           " later, 2 workers, %s, %u slots a level\n",
           burst, BURST_AT / MS, (double)g_every / MS, (double)g_ahead / MS,
           configured ? "max_timers = burst + 4096, 1024 slots" : "defaults",
           g_slots ? g_slots : configured ? 1024u : 4096u);
    for (int r = 0; r < runs; r++)
        one_run(r, burst, configured);
    return 0;
}
