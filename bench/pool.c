/*
 * pool: what a large worker pool costs under a steady load, as a figure.
 *
 * A MONOTONIC service (1 ms tick) with W workers; the main thread arms
 * `rate` timers a second, each due 1-100 ms later (random), for `seconds`,
 * their callbacks doing nothing. Sized past the CPUs, a pool's idle
 * workers wake to batches and watch the runners before they join
 * (src/workers.c, "Joining"): what that costs shows in the process's CPU
 * time and in the timers' lateness.
 *
 *   twpool [rate] [seconds] [workers ...]
 *          (defaults: 100000 5 2 128 512)
 *
 * Prints, per pool size: CPU-seconds a second of the whole process (the
 * arming thread's share included: the same at every size), the timers'
 * p99 and worst lateness (ms, tw_lateness_quantile and max_lateness_ns),
 * and the timers fired. A figure, not a test: tests/test_workers.c
 * (watchers_stay_within_the_cpus) asserts the bound on watchers. Public API
 * only, so that an older build can run it too.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "timerwheel.h"
#include "figure.h"

#define MS 1000000ull

static void nothing(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
}

static int one_pool(uint32_t workers, uint64_t rate, double seconds)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = workers;
    tw_service *s;
    int rc = tw_create(&cfg, &s);
    if (rc != TW_OK) {
        fprintf(stderr, "twpool: tw_create(%u workers): %s\n", workers, tw_strerror(rc));
        return 1;
    }
    uint64_t t0 = clock_ns(CLOCK_MONOTONIC), cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t span = (uint64_t)(seconds * 1e9), armed = 0;
    for (;;) {
        uint64_t el = clock_ns(CLOCK_MONOTONIC) - t0;
        if (el >= span)
            break;
        for (uint64_t want = el * rate / 1000000000ull; armed < want; armed++) {
            rc = tw_schedule(s, MS + next_random() % (99 * MS), nothing, NULL, NULL);
            if (rc != TW_OK) {
                fprintf(stderr, "twpool: tw_schedule: %s\n", tw_strerror(rc));
                return 1;
            }
        }
        struct timespec nap = {0, 500000};
        nanosleep(&nap, NULL);
    }
    uint64_t cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    uint64_t wall = clock_ns(CLOCK_MONOTONIC) - t0;
    tw_stats st;
    tw_stats_get(s, &st);
    printf("workers %4u: %.2f CPU-s/s, lateness p99 %.2f ms, worst %.2f ms, %" PRIu64
           " of %" PRIu64 " fired\n", workers, (double)cpu / (double)wall,
           (double)tw_lateness_quantile(s, 0.99) / 1e6, (double)st.max_lateness_ns / 1e6,
           st.fired, armed);
    fflush(stdout);
    tw_destroy(s);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t rate = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000;
    double seconds = argc > 2 ? strtod(argv[2], NULL) : 5.0;
    if (rate == 0 || seconds <= 0) {
        fprintf(stderr, "usage: twpool [rate] [seconds] [workers ...]\n");
        return 2;
    }
    printf("twpool: %" PRIu64 " timers a second, due in 1-100 ms, %.1f s a pool size\n", rate,
           seconds);
    if (argc <= 3) {
        uint32_t sizes[] = {2, 128, 512};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            if (one_pool(sizes[i], rate, seconds) != 0)
                return 1;
        return 0;
    }
    for (int i = 3; i < argc; i++)
        if (one_pool((uint32_t)strtoul(argv[i], NULL, 10), rate, seconds) != 0)
            return 1;
    return 0;
}
