/*
 * impl_timerwheel.c: this library behind the benchmark's operations table,
 * twice.
 *
 *   timerwheel      defaults: what a user gets who sets nothing (4096 slots
 *                   per level, no cap on timers in use).
 *   timerwheel-cfg  configured for the workload, as a user who knows their
 *                   load would: 1024 slots per level (a smaller wheel, as
 *                   Netty's 1024-slot HashedWheelTimer) and max_timers = the
 *                   workload's working set (bench_cfg.max_timers). The cap
 *                   is kept with per-thread budgets of pending timers (see
 *                   src/service.c) and the record allocator keeps its
 *                   per-thread magazines under it (src/records.c); this
 *                   column also shows what the cap costs.
 *
 * TWBENCH_CFG_NO_CAP=1 in the environment leaves timerwheel-cfg's
 * max_timers at 0, so that the cap's own cost can be timed against the
 * same wheel (farm-bench, one binary, the variable on one side).
 *
 * Both: MONOTONIC clock, the tick the workload asks for (1 ms unless WL3's
 * 100 us variant), 2 workers. bench_cb has tw_callback's shape, so
 * callbacks are handed over as they are. Both have the batch calls
 * (tw_schedule_many, tw_cancel_many) that WL1b uses.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "timerwheel.h"
#include "twbench.h"

#define TWI_CFG_WHEEL_SLOTS 1024u       /* timerwheel-cfg's slots per level */

static void *twi_create_with(const tw_config *c)
{
    tw_service *s = NULL;
    int rc = tw_create(c, &s);
    if (rc != TW_OK) {
        fprintf(stderr, "timerwheel: tw_create: %s\n", tw_strerror(rc));
        return NULL;
    }
    return s;
}

static void twi_config(tw_config *c, const bench_cfg *cfg)
{
    tw_config_init(c);
    c->clock = TW_CLOCK_MONOTONIC;
    c->tick_ns = cfg->tick_ns;
    c->workers = cfg->workers;
}

static void *twi_create(const bench_cfg *cfg)
{
    tw_config c;
    twi_config(&c, cfg);
    return twi_create_with(&c);
}

static void *twi_create_cfg(const bench_cfg *cfg)
{
    tw_config c;
    twi_config(&c, cfg);
    c.wheel_slots = TWI_CFG_WHEEL_SLOTS;
    const char *no_cap = getenv("TWBENCH_CFG_NO_CAP");
    c.max_timers = no_cap && *no_cap == '1' ? 0 : cfg->max_timers;
    return twi_create_with(&c);
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

/* One clock reading for the batch (tw_schedule_many). A short count means
 * element `armed` failed; its code is not returned, so say how far it got. */
static int twi_schedule_many(void *svc, size_t n, const uint64_t *delays_ns, bench_cb cb,
                             uint64_t *out)
{
    int armed = tw_schedule_many(svc, n, delays_ns, cb, NULL, out);
    if (armed != (int)n) {
        static _Thread_local int said;
        if (!said++) {
            if (armed < 0)
                fprintf(stderr, "timerwheel: tw_schedule_many: %s\n", tw_strerror(armed));
            else
                fprintf(stderr, "timerwheel: tw_schedule_many armed %d of %zu\n", armed, n);
        }
    }
    return armed < 0 ? 0 : armed;
}

/* tw_cancel_many stores each TW_OK or error in ok[]; turned into 1/0 in
 * place (all 0 when the call itself is refused and leaves ok[] as it was). */
static int twi_cancel_many(void *svc, size_t n, const uint64_t *handles, int *ok)
{
    int done = tw_cancel_many(svc, n, handles, ok);
    for (size_t i = 0; i < n; i++)
        ok[i] = done >= 0 && ok[i] == TW_OK;
    return done < 0 ? 0 : done;
}

const bench_impl bench_impl_timerwheel = {
    .name = "timerwheel",
    .create = twi_create,
    .destroy = twi_destroy,
    .schedule = twi_schedule,
    .cancel = twi_cancel,
    .reschedule = twi_reschedule,
    .schedule_many = twi_schedule_many,
    .cancel_many = twi_cancel_many,
    .callbacks_on = "worker pool",
};

const bench_impl bench_impl_timerwheel_cfg = {
    .name = "timerwheel-cfg",
    .create = twi_create_cfg,
    .destroy = twi_destroy,
    .schedule = twi_schedule,
    .cancel = twi_cancel,
    .reschedule = twi_reschedule,
    .schedule_many = twi_schedule_many,
    .cancel_many = twi_cancel_many,
    .callbacks_on = "worker pool",
};
