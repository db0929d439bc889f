/* test_bad_input.c: every call with bad arguments, stale, garbage and
 * foreign handles, calls after tw_stop, configuration fields at and past
 * their limits, time going backwards, delays past the maximum. After each
 * bad call the service's invariants hold and a timer armed before the bad
 * calls still fires exactly once, at its time. */
#include "tw_test.h"

#define SENTINEL_DELAY (50 * T_MS)

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    t_seq = 0;
    return 0;
}

/* a MANUAL service with a small wheel and a sentinel timer armed at 50 ms */
static tw_service *with_sentinel(t_timer *sentinel)
{
    tw_service *s = t_service(T_MS, 4, 2);
    t_arm(s, sentinel, SENTINEL_DELAY);
    return s;
}

/* the sentinel has not run yet, runs exactly once at its time, and the
 * service is then empty (if nothing else was armed) */
static void expect_sentinel_fires(tw_service *s, t_timer *x)
{
    assert_int_equal(x->runs, 0);
    uint64_t now = tw_now(s);
    assert_true(now < x->deadline);
    ADVANCE(s, x->deadline - 1);
    assert_int_equal(x->runs, 0);
    ADVANCE(s, x->deadline + T_MS);
    assert_int_equal(x->runs, 1);
    assert_true(x->ran_at >= x->deadline);
    ADVANCE(s, x->deadline + 100 * T_MS);
    assert_int_equal(x->runs, 1);
    CB_ASSERT_CLEAN();
}

/* every call on a handle that is not pending: TW_ENOENT, nothing changed */
static void expect_not_pending(tw_service *s, tw_timer h)
{
    tw_stats before, after;
    t_stats(s, &before);
    ASSERT_RC(tw_cancel(s, h), TW_ENOENT);
    CHECK(s);
    ASSERT_RC(tw_cancel_sync(s, h), TW_ENOENT);
    CHECK(s);
    ASSERT_RC(tw_reschedule(s, h, T_MS), TW_ENOENT);
    CHECK(s);
    ASSERT_RC(tw_reschedule(s, h, 0), TW_ENOENT);
    CHECK(s);
    t_stats(s, &after);
    assert_int_equal(before.cancelled, after.cancelled);
    assert_int_equal(before.rescheduled, after.rescheduled);
    assert_int_equal(before.pending, after.pending);
}

static void null_service_and_arguments(void **state)
{
    (void)state;
    t_timer x;
    tw_service *s = with_sentinel(&x);
    tw_timer out = 12345;

    ASSERT_RC(tw_schedule(NULL, T_MS, t_noop, NULL, &out), TW_EINVAL);
    ASSERT_RC(tw_schedule(s, T_MS, NULL, NULL, &out), TW_EINVAL);
    CHECK(s);
    ASSERT_RC(tw_schedule_every(NULL, T_MS, T_MS, t_noop, NULL, &out), TW_EINVAL);
    ASSERT_RC(tw_schedule_every(s, T_MS, T_MS, NULL, NULL, &out), TW_EINVAL);
    /* A NULL callback is EINVAL whatever else is wrong. */
    ASSERT_RC(tw_schedule_every(s, T_MS, UINT64_MAX, NULL, NULL, &out), TW_EINVAL);
    ASSERT_RC(tw_schedule_every(NULL, T_MS, UINT64_MAX, t_noop, NULL, &out), TW_EINVAL);
    CHECK(s);
    assert_int_equal(out, 12345); /* untouched on error */
    ASSERT_RC(tw_reschedule(NULL, x.h, T_MS), TW_EINVAL);
    ASSERT_RC(tw_cancel(NULL, x.h), TW_EINVAL);
    ASSERT_RC(tw_cancel_sync(NULL, x.h), TW_EINVAL);
    ASSERT_RC(tw_advance(NULL, T_MS), TW_EINVAL);
    ASSERT_RC(tw_stop(NULL, NULL), TW_EINVAL);
    ASSERT_RC(tw_create(NULL, NULL), TW_EINVAL);
    tw_destroy(NULL);
    CHECK(s);

    /* out == NULL is allowed: the timer is armed, handle discarded */
    tw_stats st;
    ASSERT_RC(tw_schedule(s, 10 * T_MS, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule_every(s, 10 * T_MS, 10 * T_MS, t_noop, NULL, NULL), TW_OK);
    CHECK(s);
    t_stats(s, &st);
    assert_int_equal(st.pending, 3);
    expect_sentinel_fires(s, &x);
    tw_destroy(s);
}

static void zero_and_garbage_handles(void **state)
{
    (void)state;
    t_timer x;
    tw_service *s = with_sentinel(&x);
    expect_not_pending(s, 0);
    expect_not_pending(s, UINT64_MAX);
    expect_not_pending(s, UINT64_MAX - 1);
    expect_not_pending(s, (uint64_t)UINT32_MAX);
    expect_not_pending(s, 1ull << 63);
    /* the sentinel's index with other generations, its generation with
     * other indexes */
    expect_not_pending(s, x.h ^ (1ull << 32));
    expect_not_pending(s, x.h + (1ull << 32));
    expect_not_pending(s, x.h - (1ull << 32));
    expect_not_pending(s, x.h ^ 1);
    expect_not_pending(s, (x.h & 0xffffffff00000000ull) | 0x7fffffffull);
    expect_not_pending(s, (x.h & 0xffffffff00000000ull) | 0xffffffffull);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 2000; i++) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        if (r == x.h)
            continue;
        expect_not_pending(s, r);
        /* low index, random generation: hits records that exist */
        uint64_t h = (r & 0xffffffff00000000ull) | (r & 3);
        if (h != x.h)
            expect_not_pending(s, h);
    }
    expect_sentinel_fires(s, &x);
    tw_destroy(s);
}

static void stale_handles_after_fire_and_cancel(void **state)
{
    (void)state;
    t_timer x;
    tw_service *s = with_sentinel(&x);
    t_timer a, b, p;
    t_arm(s, &a, 2 * T_MS);
    t_arm(s, &b, 3 * T_MS);
    ASSERT_RC(tw_cancel(s, b.h), TW_OK);
    b.cancelled = 1;
    CHECK(s);
    expect_not_pending(s, b.h);
    ADVANCE(s, 5 * T_MS);
    assert_int_equal(a.runs, 1);
    assert_int_equal(b.runs, 0);
    expect_not_pending(s, a.h);
    expect_not_pending(s, b.h);
    /* a cancelled periodic timer is stale too */
    memset(&p, 0, sizeof p);
    ASSERT_RC(tw_schedule_every(s, T_MS, T_MS, t_noop, NULL, &p.h), TW_OK);
    ADVANCE(s, 8 * T_MS);
    ASSERT_RC(tw_cancel_sync(s, p.h), TW_OK);
    CHECK(s);
    expect_not_pending(s, p.h);
    /* records get reused: the stale handles still do not reach them */
    t_timer fresh[8];
    for (int i = 0; i < 8; i++)
        t_arm(s, &fresh[i], 20 * T_MS);
    expect_not_pending(s, a.h);
    expect_not_pending(s, b.h);
    expect_not_pending(s, p.h);
    ADVANCE(s, 8 * T_MS + 20 * T_MS - 1);
    for (int i = 0; i < 8; i++)
        assert_int_equal(fresh[i].runs, 0);
    ADVANCE(s, 8 * T_MS + 21 * T_MS);
    for (int i = 0; i < 8; i++)
        assert_int_equal(fresh[i].runs, 1);
    expect_sentinel_fires(s, &x);
    tw_destroy(s);
}

static void handles_of_another_service(void **state)
{
    (void)state;
    t_timer x, o[4];
    tw_service *s = with_sentinel(&x);
    tw_service *other = t_service(T_MS, 4, 2);
    for (int i = 0; i < 4; i++)
        t_arm(other, &o[i], (uint64_t)(i + 1) * 5 * T_MS);
    for (int i = 0; i < 4; i++) {
        if (o[i].h == x.h)
            continue; /* same index and generation: indistinguishable */
        expect_not_pending(s, o[i].h);
    }
    /* the other service's timers were not touched either */
    tw_stats st;
    t_stats(other, &st);
    assert_int_equal(st.pending, 4);
    assert_int_equal(st.cancelled, 0);
    ADVANCE(other, 30 * T_MS);
    for (int i = 0; i < 4; i++)
        assert_int_equal(o[i].runs, 1);
    for (int i = 0; i < 4; i++)
        if (o[i].h != x.h)
            expect_not_pending(s, o[i].h);
    expect_sentinel_fires(s, &x);
    tw_destroy(other);
    tw_destroy(s);
}

static int t_dropped_runs;
static void count_drop(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    t_dropped_runs++;
}

static void calls_after_stop(void **state)
{
    (void)state;
    t_timer x;
    tw_service *s = with_sentinel(&x);
    t_dropped_runs = 0;
    ASSERT_RC(tw_stop(s, count_drop), TW_OK);
    assert_int_equal(t_dropped_runs, 1);
    assert_int_equal(x.runs, 0);
    CHECK(s);
    tw_timer out = 777;
    ASSERT_RC(tw_schedule(s, T_MS, t_noop, NULL, &out), TW_ESHUTDOWN);
    ASSERT_RC(tw_schedule_every(s, T_MS, T_MS, t_noop, NULL, &out), TW_ESHUTDOWN);
    assert_int_equal(out, 777);
    ASSERT_RC(tw_reschedule(s, x.h, T_MS), TW_ESHUTDOWN);
    ASSERT_RC(tw_advance(s, T_S), TW_ESHUTDOWN);
    ASSERT_RC(tw_cancel(s, x.h), TW_ENOENT);
    ASSERT_RC(tw_cancel_sync(s, x.h), TW_ENOENT);
    ASSERT_RC(tw_cancel(s, 0), TW_ENOENT);
    ASSERT_RC(tw_cancel_sync(s, UINT64_MAX), TW_ENOENT);
    ASSERT_RC(tw_stop(s, count_drop), TW_OK); /* idempotent, no second hand-over */
    assert_int_equal(t_dropped_runs, 1);
    CHECK(s);
    assert_int_equal(tw_now(s), 0);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 1);
    assert_int_equal(st.dropped, 1);
    assert_int_equal(st.fired, 0);
    assert_int_equal(st.pending, 0);
    assert_int_equal(x.runs, 0);
    tw_destroy(s);
}

/* ---- configuration fields at and past their limits ------------------ */

static void base_cfg(tw_config *cfg)
{
    tw_config_init(cfg);
    cfg->clock = TW_CLOCK_MANUAL;
    cfg->workers = 0;
    cfg->tick_ns = T_MS;
    cfg->wheel_slots = 4;
    cfg->slot_capacity = 2;
}

/* create with cfg: want TW_OK (then the service works: a timer fires once
 * at its time) or TW_EINVAL (then *out untouched) */
static void try_cfg(const tw_config *cfg, int want, const char *what)
{
    tw_service *s = (tw_service *)(uintptr_t)0x5a5a;
    int rc = tw_create(cfg, &s);
    if (rc != want)
        fail_msg("%s: tw_create returned %s, expected %s", what, t_code(rc),
                 t_code(want));
    if (want != TW_OK) {
        assert_true(s == (tw_service *)(uintptr_t)0x5a5a);
        return;
    }
    CHECK(s);
    if (cfg->clock == TW_CLOCK_MANUAL) {
        t_timer x;
        uint64_t d = 3 * cfg->tick_ns + 1;
        t_arm(s, &x, d);
        ADVANCE(s, d - 1);
        assert_int_equal(x.runs, 0);
        ADVANCE(s, d + cfg->tick_ns);
        assert_int_equal(x.runs, 1);
        ASSERT_RC(tw_cancel(s, x.h), TW_ENOENT);
        CHECK(s);
    }
    tw_destroy(s);
}

static void config_limits(void **state)
{
    (void)state;
    tw_config c;
    struct { uint64_t v; int want; } ticks[] = {
        {0, TW_EINVAL}, {999, TW_EINVAL}, {1000, TW_OK}, {T_S, TW_OK},
        {T_S + 1, TW_EINVAL}, {UINT64_MAX, TW_EINVAL}};
    for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {
        base_cfg(&c);
        c.tick_ns = ticks[i].v;
        char what[64];
        snprintf(what, sizeof what, "tick_ns %" PRIu64, ticks[i].v);
        try_cfg(&c, ticks[i].want, what);
    }
    struct { uint32_t v; int want; } slots[] = {
        {0, TW_EINVAL}, {1, TW_EINVAL}, {2, TW_OK}, {3, TW_EINVAL}, {6, TW_EINVAL},
        {65536, TW_OK}, {65535, TW_EINVAL}, {131072, TW_EINVAL}, {UINT32_MAX, TW_EINVAL},
        {1u << 31, TW_EINVAL}};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        base_cfg(&c);
        c.wheel_slots = slots[i].v;
        char what[64];
        snprintf(what, sizeof what, "wheel_slots %" PRIu32, slots[i].v);
        try_cfg(&c, slots[i].want, what);
    }
    struct { uint32_t v; int want; } caps[] = {
        {0, TW_EINVAL}, {1, TW_OK}, {1u << 20, TW_OK}, {(1u << 20) + 1, TW_EINVAL},
        {UINT32_MAX, TW_EINVAL}};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        base_cfg(&c);
        c.slot_capacity = caps[i].v;
        char what[64];
        snprintf(what, sizeof what, "slot_capacity %" PRIu32, caps[i].v);
        try_cfg(&c, caps[i].want, what);
    }
    struct { uint32_t v; int want; } workers[] = {
        {0, TW_OK}, {1024, TW_OK}, {1025, TW_EINVAL}, {UINT32_MAX, TW_EINVAL}};
    for (size_t i = 0; i < sizeof workers / sizeof workers[0]; i++) {
        base_cfg(&c);
        c.workers = workers[i].v;
        char what[64];
        snprintf(what, sizeof what, "workers %" PRIu32, workers[i].v);
        try_cfg(&c, workers[i].want, what);
    }
    struct { uint64_t v; int want; } maxt[] = {
        {0, TW_OK}, {1, TW_OK}, {(1ull << 31) - 1, TW_OK}, {1ull << 31, TW_EINVAL},
        {UINT64_MAX, TW_EINVAL}};
    for (size_t i = 0; i < sizeof maxt / sizeof maxt[0]; i++) {
        base_cfg(&c);
        c.max_timers = maxt[i].v;
        char what[64];
        snprintf(what, sizeof what, "max_timers %" PRIu64, maxt[i].v);
        try_cfg(&c, maxt[i].want, what);
    }
    base_cfg(&c);
    c.clock = (tw_clock)2;
    try_cfg(&c, TW_EINVAL, "clock 2");
    base_cfg(&c);
    c.clock = (tw_clock)-1;
    try_cfg(&c, TW_EINVAL, "clock -1");
}

/* a bad config next to a live service does not disturb it */
static void bad_configs_leave_other_service_alone(void **state)
{
    (void)state;
    t_timer x;
    tw_service *s = with_sentinel(&x);
    tw_config c;
    base_cfg(&c);
    c.wheel_slots = 3;
    tw_service *o = NULL;
    ASSERT_RC(tw_create(&c, &o), TW_EINVAL);
    assert_null(o);
    CHECK(s);
    expect_sentinel_fires(s, &x);
    tw_destroy(s);
}

/* ---- time and delays -------------------------------------------------- */

static void time_going_backwards(void **state)
{
    (void)state;
    t_timer x;
    tw_service *s = with_sentinel(&x);
    ADVANCE(s, 10 * T_MS);
    ASSERT_RC(tw_advance(s, 10 * T_MS - 1), TW_EINVAL);
    assert_int_equal(tw_now(s), 10 * T_MS);
    CHECK(s);
    ASSERT_RC(tw_advance(s, 0), TW_EINVAL);
    assert_int_equal(tw_now(s), 10 * T_MS);
    CHECK(s);
    ADVANCE(s, 10 * T_MS); /* same time: fine */
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, 0);

    /* a MONOTONIC service refuses tw_advance */
    tw_config c;
    tw_config_init(&c);
    c.workers = 0;
    c.wheel_slots = 4;
    tw_service *m = t_service_cfg(&c);
    ASSERT_RC(tw_advance(m, UINT64_MAX), TW_EINVAL);
    tw_destroy(m);

    expect_sentinel_fires(s, &x);
    tw_destroy(s);
}

static void delays_past_the_maximum(void **state)
{
    (void)state;
    t_timer x;
    tw_service *s = with_sentinel(&x);
    uint64_t max = tw_max_delay(s);
    assert_true(max > 0 && max < UINT64_MAX);
    tw_timer out = 42;
    ASSERT_RC(tw_schedule(s, UINT64_MAX, t_noop, NULL, &out), TW_ERANGE);
    ASSERT_RC(tw_schedule(s, max + 1, t_noop, NULL, &out), TW_ERANGE);
    ASSERT_RC(tw_schedule_every(s, UINT64_MAX, T_MS, t_noop, NULL, &out), TW_ERANGE);
    ASSERT_RC(tw_schedule_every(s, max + 1, T_MS, t_noop, NULL, &out), TW_ERANGE);
    ASSERT_RC(tw_schedule_every(s, T_MS, UINT64_MAX, t_noop, NULL, &out), TW_ERANGE);
    ASSERT_RC(tw_schedule_every(s, T_MS, max + 1, t_noop, NULL, &out), TW_ERANGE);
    ASSERT_RC(tw_schedule_every(s, T_MS, 0, t_noop, NULL, &out), TW_EINVAL);
    ASSERT_RC(tw_schedule_every(s, 0, 0, t_noop, NULL, &out), TW_EINVAL);
    assert_int_equal(out, 42);
    ASSERT_RC(tw_reschedule(s, x.h, UINT64_MAX), TW_ERANGE);
    ASSERT_RC(tw_reschedule(s, x.h, max + 1), TW_ERANGE);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 1);
    assert_int_equal(st.rescheduled, 0);
    assert_int_equal(st.pending, 1);

    /* the maximum itself is accepted, and does not fire early */
    t_timer far, farp;
    t_arm(s, &far, max);
    memset(&farp, 0, sizeof farp);
    ASSERT_RC(tw_schedule_every(s, max, max, t_noop, NULL, &farp.h), TW_OK);
    CHECK(s);
    /* a timer moved to the maximum and back */
    t_timer y;
    t_arm(s, &y, 5 * T_MS);
    ASSERT_RC(tw_reschedule(s, y.h, max), TW_OK);
    y.deadline = tw_now(s) + max;
    CHECK(s);
    expect_sentinel_fires(s, &x);
    assert_int_equal(far.runs, 0);
    assert_int_equal(y.runs, 0);
    ASSERT_RC(tw_cancel(s, far.h), TW_OK);
    ASSERT_RC(tw_cancel(s, farp.h), TW_OK);
    ASSERT_RC(tw_cancel(s, y.h), TW_OK);
    CHECK(s);
    t_stats(s, &st);
    assert_int_equal(st.pending, 0);
    ASSERT_STATS_IDENTITY(st);
    tw_destroy(s);
}

/* the maximum delay after the clock moved far: still accepted, still
 * ERANGE one past it */
static void max_delay_after_time_moved(void **state)
{
    (void)state;
    t_timer x;
    tw_service *s = t_service(T_MS, 2, 1);
    ADVANCE(s, (1ull << 40) * T_MS);
    t_arm(s, &x, SENTINEL_DELAY);
    uint64_t max = tw_max_delay(s);
    ASSERT_RC(tw_schedule(s, max + 1, t_noop, NULL, NULL), TW_ERANGE);
    t_timer far;
    t_arm(s, &far, max);
    expect_sentinel_fires(s, &x);
    assert_int_equal(far.runs, 0);
    tw_destroy(s);
}

/* the contract: tw_schedule accepts every delay <= tw_max_delay(s). With a
 * MANUAL clock moved near the end of the 64-bit range, now + delay no
 * longer fits: the maximum must still be accepted (or the contract must say
 * otherwise). */
static void max_delay_near_clock_end(void **state)
{
    (void)state;
    tw_service *s = t_service(T_S, 2, 1); /* max delay 2^63 ns */
    uint64_t max = tw_max_delay(s);
    /* The MANUAL clock stops at 2^63 - 2^31 ns (292 years): later is EINVAL
     * and leaves the clock alone; at that time the longest delay still fits. */
    const uint64_t clock_max = (1ull << 63) - (1ull << 31);
    ASSERT_RC(tw_advance(s, clock_max + 1), TW_EINVAL);
    ASSERT_RC(tw_advance(s, UINT64_MAX - max / 2), TW_EINVAL);
    assert_true(tw_now(s) == 0);
    ADVANCE(s, clock_max);
    tw_timer h = 0;
    ASSERT_RC(tw_schedule(s, max, t_noop, NULL, &h), TW_OK);
    ASSERT_RC(tw_schedule(s, max + 1, t_noop, NULL, NULL), TW_ERANGE);
    CHECK(s);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(null_service_and_arguments, setup),
        cmocka_unit_test_setup(zero_and_garbage_handles, setup),
        cmocka_unit_test_setup(stale_handles_after_fire_and_cancel, setup),
        cmocka_unit_test_setup(handles_of_another_service, setup),
        cmocka_unit_test_setup(calls_after_stop, setup),
        cmocka_unit_test_setup(config_limits, setup),
        cmocka_unit_test_setup(bad_configs_leave_other_service_alone, setup),
        cmocka_unit_test_setup(time_going_backwards, setup),
        cmocka_unit_test_setup(delays_past_the_maximum, setup),
        cmocka_unit_test_setup(max_delay_after_time_moved, setup),
        cmocka_unit_test_setup(max_delay_near_clock_end, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
