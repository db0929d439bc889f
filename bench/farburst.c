/*
 * farburst: a burst armed beyond level 0, as a figure.
 *
 *   farburst [timers] [slots] [workers] [offset...]
 *                           (defaults: 1000000 4096 2, offsets 20 150 1000)
 *
 * A MONOTONIC service (1 ms tick, `slots` a level, `workers` workers;
 * slots = 1024 also sets max_timers to the burst, as the table's
 * configured column) gets `timers` timers due at one instant D, armed at
 * once from one thread more than a level-0 turn ahead, so that they wait
 * in a slot of level 1. D lies `offset` ticks past a multiple of `slots`
 * ticks; level-1 slots are 16 ticks wide (8 for 64 slots), so an offset
 * that is not a multiple of that puts D after its slot's epoch: the step
 * to the epoch placed the burst again one entry at a time, and before
 * early cascades (src/wheel.c, 2026-11-29) the first callback came
 * 115-150 ms after D.
 * Prints, per offset, the first callback's start after D, the last one's,
 * and the early cascades and early claims the service counted. A figure,
 * not a test: tests/test_workers.c checks the path
 * (burst_beyond_level_0_cascaded_early).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "timerwheel.h"
#include "internal.h" /* the service's origin, its rare-path counters */

#define MS 1000000ull

static _Atomic uint64_t first_start, runs;
static tw_service *_Atomic the_service;

static void on_fire(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    uint64_t now = tw_now(atomic_load(&the_service)), zero = 0;
    atomic_compare_exchange_strong(&first_start, &zero, now);
    atomic_fetch_add(&runs, 1);
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
    nanosleep(&ts, NULL);
}

static int one_burst(uint64_t n, uint32_t slots, uint32_t workers, uint64_t offset)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.tick_ns = MS;
    cfg.wheel_slots = slots;
    cfg.workers = workers;
    if (slots == 1024)
        cfg.max_timers = n;
    tw_service *s;
    int rc = tw_create(&cfg, &s);
    if (rc != TW_OK) {
        fprintf(stderr, "farburst: tw_create: %s\n", tw_strerror(rc));
        return 1;
    }
    atomic_store(&the_service, s);
    atomic_store(&first_start, 0);
    atomic_store(&runs, 0);
    /* The first level-1 span that starts a whole level-0 turn from now:
     * armed now, the burst goes to level 1. */
    uint64_t now_tick = (tw_now(s) - s->origin) / MS;
    uint64_t span = slots;
    uint64_t d = s->origin + ((now_tick / span + 2) * span + offset) * MS;
    for (uint64_t i = 0; i < n; i++) {
        rc = tw_schedule_at(s, d, on_fire, NULL, NULL);
        if (rc != TW_OK) {
            fprintf(stderr, "farburst: tw_schedule_at: %s\n", tw_strerror(rc));
            return 1;
        }
    }
    uint64_t give_up = d + 60000 * MS;
    while (atomic_load(&runs) < n && tw_now(s) < give_up)
        sleep_ns(MS);
    uint64_t last = tw_now(s), first = atomic_load(&first_start);
    if (atomic_load(&runs) != n) {
        fprintf(stderr, "farburst: %" PRIu64 " of %" PRIu64 " ran\n", atomic_load(&runs), n);
        return 1;
    }
    printf("slots=%u workers=%u offset=%" PRIu64 " first_ms=%.3f last_ms=%.3f "
           "early_cascades=%" PRIu64 " early_claims=%" PRIu64 "\n",
           slots, workers, offset, (double)(first - d) / 1e6, (double)(last - d) / 1e6,
           tw__rare_total(s, TW_RARE_EARLY_CASCADE), tw__rare_total(s, TW_RARE_EARLY_CLAIM));
    fflush(stdout);
    tw_stop(s, NULL);
    tw_destroy(s);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    uint32_t slots = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 4096;
    uint32_t workers = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 2;
    static const uint64_t dflt[] = { 20, 150, 1000 };
    int bad = 0;
    if (argc > 4) {
        for (int i = 4; i < argc; i++)
            bad |= one_burst(n, slots, workers, strtoull(argv[i], NULL, 10) % slots);
    } else {
        for (size_t i = 0; i < sizeof dflt / sizeof dflt[0]; i++)
            bad |= one_burst(n, slots, workers, dflt[i] % slots);
    }
    return bad;
}
