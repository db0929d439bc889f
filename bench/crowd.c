/*
 * crowd: the lateness of ordinary timers beside a crowd of live sessions,
 * as a figure (a review's server-shaped program, 2026-11-30).
 *
 * A MONOTONIC service with the defaults. At the start, `crowd` sessions
 * connect at once, each with a 1 h idle timeout (live: none fires during
 * the run, all in one slot). Then, each second, `requests` requests arm a
 * 60 s request timeout each, cancelled 1 s later when the response comes
 * (their entries are what compaction takes out), and 20 thousand probe
 * timers are armed, due 1-100 ms later. Compaction keeps the wheel within
 * twice the pending timers (src/wheel.c); the crowd's slot, taken whole,
 * held the cursor about 13 ms each time the round robin came to it, and
 * the probes due meanwhile came that late; taken in pieces, it gives the
 * cursor back between them.
 *
 *   twcrowd [crowd] [requests] [seconds]   (defaults: 200000 50000 20)
 *
 * Prints, every 5 s, the probes fired so far, how many of them came more
 * than 5 ms late in all, the worst lateness of the last 5 s (ms) and the
 * process's CPU-seconds a second. A figure, not a test:
 * tests/test_reschedule.c (a_crowd_is_compacted_in_pieces_between_ticks)
 * asserts the behaviour. Public API only, so that an older build can run
 * it too.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "timerwheel.h"
#include "figure.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define PROBES_A_SECOND 20000u

static tw_service *g_s;
static _Atomic uint64_t g_worst, g_fired, g_late5;

static void probe(tw_timer t, void *arg)
{
    (void)t;
    uint64_t now = tw_now(g_s), due = (uint64_t)(uintptr_t)arg;
    uint64_t late = now > due ? now - due : 0;
    uint64_t worst = atomic_load_explicit(&g_worst, memory_order_relaxed);
    while (late > worst && !atomic_compare_exchange_weak(&g_worst, &worst, late)) {
    }
    if (late > 5 * MS)
        atomic_fetch_add_explicit(&g_late5, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_fired, 1, memory_order_relaxed);
}

static void nothing(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
}

static void arm(uint64_t delay, tw_callback cb, void *arg, tw_timer *out)
{
    int rc = tw_schedule(g_s, delay, cb, arg, out);
    if (rc != TW_OK) {
        fprintf(stderr, "twcrowd: tw_schedule: %s\n", tw_strerror(rc));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    uint64_t crowd = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000;
    uint64_t requests = argc > 2 ? strtoull(argv[2], NULL, 10) : 50000;
    unsigned seconds = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 20;
    if (requests == 0 || seconds == 0) {
        fprintf(stderr, "usage: twcrowd [crowd] [requests] [seconds]\n");
        return 2;
    }
    if (tw_create(NULL, &g_s) != TW_OK)
        return 1;
    for (uint64_t i = 0; i < crowd; i++)
        arm(3600 * SEC, nothing, NULL, NULL);
    /* The requests in flight, oldest first: each cancelled 1 s after it. */
    size_t room = (size_t)(2 * requests + 16);
    tw_timer *q = calloc(room, sizeof *q);
    uint64_t *q_at = calloc(room, sizeof *q_at);
    if (!q || !q_at)
        return 1;
    size_t head = 0, tail = 0;
    printf("twcrowd: %" PRIu64 " sessions of 1 h, %" PRIu64 " requests a second (60 s, "
           "answered in 1 s), %u probes a second (1-100 ms), %u s\n", crowd, requests,
           PROBES_A_SECOND, seconds);
    uint64_t t0 = clock_ns(CLOCK_MONOTONIC), cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t probes = 0, armed = 0;
    for (unsigned sec = 0; sec < seconds;) {
        uint64_t now = clock_ns(CLOCK_MONOTONIC), el = now - t0;
        for (; probes < el * PROBES_A_SECOND / SEC; probes++) {
            uint64_t d = MS + next_random() % (99 * MS);
            arm(d, probe, (void *)(uintptr_t)(tw_now(g_s) + d), NULL);
        }
        for (; armed < el * requests / SEC; armed++) {
            arm(60 * SEC, nothing, NULL, &q[head % room]);
            q_at[head % room] = now;
            head++;
        }
        for (; tail < head && now - q_at[tail % room] > SEC; tail++)
            (void)tw_cancel(g_s, q[tail % room]);
        struct timespec nap = {0, 300000};
        nanosleep(&nap, NULL);
        if (clock_ns(CLOCK_MONOTONIC) - t0 >= (uint64_t)(sec + 1) * SEC && ++sec % 5 == 0) {
            printf("t=%2us: %" PRIu64 " probes fired, %" PRIu64 " more than 5 ms late; the "
                   "worst of the last 5 s %.2f ms; %.2f CPU-s/s\n", sec,
                   atomic_load(&g_fired), atomic_load(&g_late5),
                   (double)atomic_exchange(&g_worst, 0) / 1e6,
                   (double)(clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / 1e9 / sec);
            fflush(stdout);
        }
    }
    tw_destroy(g_s);
    free(q);
    free(q_at);
    return 0;
}
