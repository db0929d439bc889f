/*
 * bothways: the "timer moved both ways" table of issue 12, as a figure.
 *
 * A MANUAL service with a 1 ms tick holds N live timers. Before every
 * tw_advance(+1 tick) each timer is moved to +5 ticks (earlier than it is)
 * and then to +10 ticks (later again), so it never fires: the pattern of a
 * retransmit timeout that shrinks and grows, or an idle timeout shortened
 * and restored (the distances are arguments). A wheel that leaves a slot entry behind on each round trip
 * and re-places every copy grows in memory and per-tick work without bound;
 * a bounded one stays flat.
 *
 *   bothways [timers] [ticks] [report_every] [near] [far]
 *                                 (defaults: 100 20000 2000 5 10; near and
 *                                  far in ticks: bothways 100 20000 2000 0
 *                                  3600000 pulls in to the next tick and
 *                                  pushes an hour out)
 *
 * Prints, every report_every ticks, the time of the last tick's advance
 * (median of the last 64 ticks, us), the resident set (MB) and, from the
 * internal counter, the slot entries that exist. Ends with the ratio of the
 * last per-tick figure to the first. A figure, not a test: the unit tests
 * assert the entry bound (tests/test_reschedule.c, both_ways_*).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "timerwheel.h"
#include "internal.h"

#define TICK 1000000ull
#define WINDOW 64

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double rss_mb(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu %lu", &size, &resident) != 2) {
        fprintf(stderr, "bothways: cannot read /proc/self/statm\n");
        exit(2);
    }
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double median_us(const uint64_t *v, size_t n)
{
    uint64_t c[WINDOW];
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_u64);
    return (double)c[n / 2] / 1000.0;
}

static void never(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    fprintf(stderr, "bothways: a timer fired (it is always pushed back)\n");
    exit(1);
}

int main(int argc, char **argv)
{
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100;
    unsigned long ticks = argc > 2 ? strtoul(argv[2], NULL, 10) : 20000;
    unsigned long every = argc > 3 ? strtoul(argv[3], NULL, 10) : 2000;
    unsigned long near = argc > 4 ? strtoul(argv[4], NULL, 10) : 5;
    unsigned long far = argc > 5 ? strtoul(argv[5], NULL, 10) : 10;
    if (n == 0 || ticks == 0 || every == 0 || every > ticks || far <= near) {
        fprintf(stderr, "usage: bothways [timers] [ticks] [report_every] [near] [far]\n");
        return 2;
    }
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.workers = 0;
    cfg.tick_ns = TICK;
    tw_service *s;
    if (tw_create(&cfg, &s) != TW_OK)
        return 2;
    tw_timer *h = calloc(n, sizeof *h);
    for (unsigned long i = 0; i < n; i++)
        if (tw_schedule(s, far * TICK, never, NULL, &h[i]) != TW_OK)
            return 2;
    uint64_t cost[WINDOW];
    double first = 0, last = 0;
    printf("# bothways: %lu timers, each moved to +%lu then +%lu ticks before every tick\n",
           n, near, far);
    printf("%10s %14s %10s %14s\n", "tick", "us_per_tick", "rss_MB", "slot_entries");
    for (unsigned long t = 1; t <= ticks; t++) {
        for (unsigned long i = 0; i < n; i++) {
            if (tw_reschedule(s, h[i], near * TICK) != TW_OK ||
                tw_reschedule(s, h[i], far * TICK) != TW_OK) {
                fprintf(stderr, "bothways: a reschedule failed at tick %lu\n", t);
                return 1;
            }
        }
        uint64_t t0 = mono_ns();
        if (tw_advance(s, t * TICK) != TW_OK)
            return 1;
        cost[t % WINDOW] = mono_ns() - t0;
        if (t % every == 0) {
            double us = median_us(cost, t < WINDOW ? t : WINDOW);
            if (first == 0)
                first = us;
            last = us;
            printf("%10lu %14.1f %10.1f %14" PRIu64 "\n", t, us, rss_mb(),
                   tw__wheel_entries(s));
            fflush(stdout);
        }
    }
    printf("# last/first per-tick: %.2fx\n", first > 0 ? last / first : 0.0);
    tw_destroy(s);
    free(h);
    return 0;
}
