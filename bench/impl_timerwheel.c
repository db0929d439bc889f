/*
 * impl_timerwheel.c: this library behind the benchmark's operations table.
 *
 * A thin pass-through: MONOTONIC clock, the tick the workload asks for
 * (1 ms unless WL3's 100 us variant), 2 workers, everything else default.
 * bench_cb has tw_callback's shape, so callbacks are handed over as they are.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "timerwheel.h"
#include "twbench.h"

static void *twi_create(const bench_cfg *cfg)
{
    tw_config c;
    tw_config_init(&c);
    c.clock = TW_CLOCK_MONOTONIC;
    c.tick_ns = cfg->tick_ns;
    c.workers = cfg->workers;
    tw_service *s = NULL;
    int rc = tw_create(&c, &s);
    if (rc != TW_OK) {
        fprintf(stderr, "timerwheel: tw_create: %s\n", tw_strerror(rc));
        return NULL;
    }
    return s;
}

static void twi_destroy(void *svc)
{
    tw_destroy(svc);
}

static uint64_t twi_schedule(void *svc, uint64_t delay_ns, bench_cb cb, void *arg)
{
    tw_timer t = 0;
    int rc = tw_schedule(svc, delay_ns, cb, arg, &t);
    if (rc != TW_OK) {
        static _Thread_local int said;
        if (!said++)
            fprintf(stderr, "timerwheel: tw_schedule: %s\n", tw_strerror(rc));
        return 0;
    }
    return t;
}

static int twi_cancel(void *svc, uint64_t h)
{
    return tw_cancel(svc, h) == TW_OK;
}

static int twi_reschedule(void *svc, uint64_t h, uint64_t delay_ns)
{
    return tw_reschedule(svc, h, delay_ns) == TW_OK;
}

const bench_impl bench_impl_timerwheel = {
    .name = "timerwheel",
    .create = twi_create,
    .destroy = twi_destroy,
    .schedule = twi_schedule,
    .cancel = twi_cancel,
    .reschedule = twi_reschedule,
    .callbacks_on = "worker pool",
};
