/*
 * planted_race: a data race that ThreadSanitizer MUST report.
 *
 *     planted_race [monotonic|manual]
 *
 * It guards the TSan build itself: if a change to our TSan shims,
 * annotations or suppressions made TSan see a happens-before edge that the
 * library does not promise (or hid reports from our callbacks), this
 * program would run clean. ctest registers it (TSan builds only) through
 * expect_tsan_race.cmake: the test passes only when the program exits 66
 * (TSan's exit code after a report) AND the report is the planted one
 * (a data race on g_planted with planted_reader in a stack). A setup
 * error or a crash therefore fails the test instead of passing it, which
 * a bare WILL_FAIL would not tell apart.
 *
 * The race: the library orders a callback after every write the scheduling
 * thread made BEFORE tw_schedule returned, and after nothing else. Here the
 * writer writes a plain global AFTER that, with no other synchronisation
 * towards the runner of the callback, which reads the same global.
 *
 *   monotonic  main arms a delay-0 timer on a MONOTONIC service with one
 *              worker, then writes g_planted; the callback (worker thread,
 *              a tick later) reads it. Main waits for the callback through
 *              an acquire load only, which orders nothing towards the worker.
 *   manual     thread A arms a delay-0 timer on a MANUAL service, publishes
 *              "armed" (release), then writes g_planted; thread B waits for
 *              "armed" (acquire: ordered after the arming, not after the
 *              write) and calls tw_advance, whose callback reads g_planted.
 *
 * Exit 0 when the program itself ran through (TSan then turns a report
 * into exit code 66), 2 on a setup error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stress_common.h"

int g_planted;                    /* plain: the planted race (external linkage: not optimised away) */
static _Atomic int g_seen = -1;   /* what the callback read */
static _Atomic int g_done;        /* the callback ran */
static _Atomic int g_armed;       /* manual: the timer is armed */
static tw_service *g_s;

/* Race target: reads g_planted, written by the arming thread after
 * tw_schedule returned. */
static void planted_reader(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    int v = g_planted; /* RACE (planted): unordered read */
    atomic_store_explicit(&g_seen, v, memory_order_relaxed);
    atomic_store_explicit(&g_done, 1, memory_order_release);
}

static void wait_done(void)
{
    uint64_t give_up = st_mono_ns() + 10ull * 1000000000ull;
    while (!atomic_load_explicit(&g_done, memory_order_acquire)) {
        if (st_mono_ns() > give_up) {
            fprintf(stderr, "planted_race: the callback never ran\n");
            exit(2);
        }
        st_sleep_ns(100000);
    }
}

static int run_monotonic(void)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 1;
    cfg.tick_ns = 1000000;
    if (tw_create(&cfg, &g_s) != TW_OK)
        return 2;
    if (tw_schedule(g_s, 0, planted_reader, NULL, NULL) != TW_OK)
        return 2;
    g_planted = 42; /* RACE (planted): after tw_schedule returned */
    wait_done();
    tw_destroy(g_s);
    return 0;
}

/* Thread A of the manual variant. Race: its write after the arming
 * against B's callback. */
static void *manual_armer(void *arg)
{
    (void)arg;
    if (tw_schedule(g_s, 0, planted_reader, NULL, NULL) != TW_OK) {
        fprintf(stderr, "planted_race: tw_schedule failed\n");
        exit(2);
    }
    atomic_store_explicit(&g_armed, 1, memory_order_release); /* orders the arming only */
    g_planted = 42; /* RACE (planted): after the release above */
    /* Stay until the callback ran: a thread's exit hands its counter
     * stripe on (a release the next taker acquires), which would order
     * the write before the callback if B took its stripe after we left.
     * Acquire from B orders nothing from us towards B. */
    while (!atomic_load_explicit(&g_done, memory_order_acquire))
        sched_yield();
    return NULL;
}

/* Thread B of the manual variant: drives the clock, runs the callback. */
static void *manual_advancer(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&g_armed, memory_order_acquire))
        sched_yield();
    if (tw_advance(g_s, tw_now(g_s) + 2 * 1000000ull) != TW_OK) {
        fprintf(stderr, "planted_race: tw_advance failed\n");
        exit(2);
    }
    return NULL;
}

static int run_manual(void)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.tick_ns = 1000000;
    if (tw_create(&cfg, &g_s) != TW_OK)
        return 2;
    pthread_t a, b;
    st_start(&b, manual_advancer, NULL);
    st_start(&a, manual_armer, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    wait_done();
    tw_destroy(g_s);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "monotonic";
    int rc;
    if (strcmp(mode, "monotonic") == 0)
        rc = run_monotonic();
    else if (strcmp(mode, "manual") == 0)
        rc = run_manual();
    else {
        fprintf(stderr, "usage: planted_race [monotonic|manual]\n");
        return 2;
    }
    printf("planted_race %s: callback read %d; exit %d (TSan must report a race on g_planted)\n",
           mode, atomic_load(&g_seen), rc);
    return rc;
}
