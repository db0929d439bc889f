/* test_overflow.c: full slots grow and never refuse; max_timers. */
#include "tw_test.h"

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    t_seq = 0;
    return 0;
}

static void slot_capacity_1_ten_timers_in_one_tick_all_fire(void **state)
{
    (void)state;
    tw_service *s = t_service(T_MS, 256, 1);
    t_timer v[10];
    for (int i = 0; i < 10; i++)
        t_arm(s, &v[i], 5 * T_MS);
    tw_stats st;
    t_stats(s, &st);
    if (st.overflowed < t_overflow_floor(10, 1, 1))
        fail_msg("stats.overflowed %" PRIu64 ", expected >= %" PRIu64, st.overflowed,
                 t_overflow_floor(10, 1, 1));
    ADVANCE(s, 6 * T_MS);
    t_expect_due(v, 10, 6 * T_MS, T_MS);
    for (int i = 0; i < 10; i++)
        assert_int_equal(v[i].runs, 1);
    t_stats(s, &st);
    assert_int_equal(st.fired, 10);
    ASSERT_STATS_IDENTITY(st);
    tw_destroy(s);
}

/* thousands in one tick, each deadline distinct: all run once, in order */
static void thousands_in_one_tick_all_fire_once_in_order(void **state)
{
    (void)state;
    enum { N = 5000 };
    static const uint32_t caps[] = {1, 3, 16};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        t_seq = 0;
        tw_service *s = t_service(T_MS, 8, caps[c]);
        t_timer *v = calloc(N, sizeof *v);
        assert_non_null(v);
        ADVANCE(s, 2 * T_MS);
        /* deadlines 7 ms + (N - i) * 100 ns: the same tick, reverse order */
        for (int i = 0; i < N; i++) {
            t_arm_nocheck(s, &v[i], 4 * T_MS + (uint64_t)(N - i) * 100);
            if (i % 256 == 0 || i == N - 1)
                CHECK(s); /* the checker walks every entry: not after each */
        }
        tw_stats st;
        t_stats(s, &st);
        if (st.overflowed < t_overflow_floor(N, 1, caps[c]))
            fail_msg("cap %u: stats.overflowed %" PRIu64 ", expected >= %" PRIu64, caps[c],
                     st.overflowed, t_overflow_floor(N, 1, caps[c]));
        ADVANCE(s, 6 * T_MS);
        for (int i = 0; i < N; i++)
            assert_int_equal(v[i].runs, 0);
        ADVANCE(s, 8 * T_MS);
        t_expect_due(v, N, 8 * T_MS, T_MS);
        for (int i = 0; i < N; i++) {
            assert_int_equal(v[i].runs, 1);
            if (v[i].seq != (uint64_t)(N - i))
                fail_msg("cap %u: timer %d ran %" PRIu64 "th, expected %d th", caps[c], i,
                         v[i].seq, N - i);
        }
        t_stats(s, &st);
        assert_int_equal(st.fired, N);
        assert_int_equal(st.pending, 0);
        free(v);
        tw_destroy(s);
    }
}

/* an overflowing slot of an upper level cascades every timer down */
static void overflowed_upper_level_slot_cascades_all(void **state)
{
    (void)state;
    enum { N = 3000 };
    tw_service *s = t_service(T_MS, 4, 1);
    t_timer *v = calloc(N, sizeof *v);
    assert_non_null(v);
    for (int i = 0; i < N; i++) { /* ticks 1024 .. 1087: one upper slot */
        t_arm_nocheck(s, &v[i], 1024 * T_MS + (uint64_t)(i % 64) * T_MS + (uint64_t)i);
        if (i % 256 == 0 || i == N - 1)
            CHECK(s);
    }
    tw_stats st;
    t_stats(s, &st);
    assert_true(st.overflowed >= t_overflow_floor(N, 64, 1)); /* at most one slot a tick */
    uint64_t now = 0;
    while (now < 1200 * T_MS) {
        now += 7 * T_MS + 300 * T_US;
        ADVANCE(s, now);
        t_expect_due(v, N, now, T_MS);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(v[i].runs, 1);
    free(v);
    tw_destroy(s);
}

/* the same slot fills, drains and fills again, round after round */
static void overflowed_slot_is_reused_every_rotation(void **state)
{
    (void)state;
    enum { ROUNDS = 20, PER = 700 };
    tw_service *s = t_service(T_MS, 16, 2);
    t_timer *v = calloc(PER, sizeof *v);
    assert_non_null(v);
    uint64_t fired = 0;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t base = tw_now(s);
        for (int i = 0; i < PER; i++) { /* every round: the same slot */
            t_arm_nocheck(s, &v[i], 5 * T_MS + (uint64_t)i);
            if (i % 128 == 0 || i == PER - 1)
                CHECK(s);
        }
        for (int i = 0; i < PER; i += 7) {
            ASSERT_RC(tw_cancel(s, v[i].h), TW_OK);
            v[i].cancelled = 1;
        }
        ADVANCE(s, base + 16 * T_MS);
        t_expect_due(v, PER, base + 16 * T_MS, T_MS);
        for (int i = 0; i < PER; i++)
            fired += (uint64_t)v[i].runs;
    }
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, fired);
    assert_int_equal(fired, (uint64_t)ROUNDS * (PER - (PER + 6) / 7));
    assert_int_equal(st.pending, 0);
    ASSERT_STATS_IDENTITY(st);
    free(v);
    tw_destroy(s);
}

static tw_service *capped(uint64_t max)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.max_timers = max;
    cfg.wheel_slots = 16;
    return t_service_cfg(&cfg);
}

typedef struct inner {
    tw_service *s;
    int rc[2];
    int runs;
} inner;

/* Arms two replacements from inside its own run. */
static void schedule_inside(tw_timer t, void *arg)
{
    (void)t;
    inner *x = arg;
    x->runs++;
    x->rc[0] = tw_schedule(x->s, T_MS, t_noop, NULL, NULL);
    x->rc[1] = tw_schedule(x->s, T_MS, t_noop, NULL, NULL);
}

static void max_timers_eagain_then_recovery(void **state)
{
    (void)state;
    tw_service *s = capped(4);
    t_timer v[4];
    for (int i = 0; i < 4; i++) /* 1, 6, 7, 8 ms */
        t_arm(s, &v[i], i == 0 ? T_MS : (uint64_t)(i + 5) * T_MS);
    tw_timer h = 555;
    ASSERT_RC(tw_schedule(s, T_MS, t_noop, NULL, &h), TW_EAGAIN);
    ASSERT_RC(tw_schedule_every(s, T_MS, T_MS, t_noop, NULL, &h), TW_EAGAIN);
    assert_true(h == 555);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 4);
    assert_int_equal(st.pending, 4);
    /* a cancel frees one */
    ASSERT_RC(tw_cancel(s, v[3].h), TW_OK);
    v[3].cancelled = 1;
    t_timer w;
    t_arm(s, &w, 10 * T_MS);
    ASSERT_RC(tw_schedule(s, T_MS, t_noop, NULL, NULL), TW_EAGAIN);
    /* a fired one-shot frees one */
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(v[0].runs, 1);
    t_timer y;
    t_arm(s, &y, 10 * T_MS);
    ASSERT_RC(tw_schedule(s, T_MS, t_noop, NULL, NULL), TW_EAGAIN);
    /* a periodic timer stays in use after its runs, until cancelled */
    ADVANCE(s, 20 * T_MS); /* v[1], v[2], w, y fire: 0 in use */
    tw_timer p[4];
    for (int i = 0; i < 4; i++)
        ASSERT_RC(tw_schedule_every(s, T_MS, T_MS, t_noop, NULL, &p[i]), TW_OK);
    ADVANCE(s, 25 * T_MS);
    ASSERT_RC(tw_schedule(s, T_MS, t_noop, NULL, NULL), TW_EAGAIN);
    ASSERT_RC(tw_cancel(s, p[0]), TW_OK);
    ASSERT_RC(tw_schedule(s, T_MS, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule(s, T_MS, t_noop, NULL, NULL), TW_EAGAIN);
    CHECK(s);
    tw_destroy(s);
}

/* max_timers counts pending timers (the contract): a one-shot stops being
 * pending when its callback starts, so that callback can arm one
 * replacement; a second one finds the cap full (issue 12: the cap used to
 * count the running one until it returned). */
static void max_timers_counts_pending_not_running(void **state)
{
    (void)state;
    tw_service *s = capped(3);
    inner x = {.s = s, .rc = {99, 99}};
    ASSERT_RC(tw_schedule(s, T_MS, schedule_inside, &x, NULL), TW_OK);
    ASSERT_RC(tw_schedule(s, 10 * T_MS, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule(s, 10 * T_MS, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule(s, 10 * T_MS, t_noop, NULL, NULL), TW_EAGAIN);
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(x.runs, 1);
    ASSERT_RC(x.rc[0], TW_OK);
    ASSERT_RC(x.rc[1], TW_EAGAIN);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.pending, 3);
    ASSERT_RC(tw_schedule(s, T_MS, t_noop, NULL, NULL), TW_EAGAIN);
    tw_destroy(s);
}

static void max_timers_one_many_cycles(void **state)
{
    (void)state;
    tw_service *s = capped(1);
    uint64_t now = 0;
    for (int i = 0; i < 5000; i++) {
        t_timer x;
        t_arm(s, &x, (uint64_t)(i % 3) * T_MS);
        ASSERT_RC(tw_schedule(s, T_MS, t_noop, NULL, NULL), TW_EAGAIN);
        if (i % 2) {
            ASSERT_RC(tw_cancel(s, x.h), TW_OK);
        } else {
            now += 3 * T_MS;
            ADVANCE(s, now);
            assert_int_equal(x.runs, 1);
        }
    }
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 5000);
    assert_int_equal(st.pending, 0);
    ASSERT_STATS_IDENTITY(st);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(slot_capacity_1_ten_timers_in_one_tick_all_fire, setup),
        cmocka_unit_test_setup(thousands_in_one_tick_all_fire_once_in_order, setup),
        cmocka_unit_test_setup(overflowed_upper_level_slot_cascades_all, setup),
        cmocka_unit_test_setup(overflowed_slot_is_reused_every_rotation, setup),
        cmocka_unit_test_setup(max_timers_eagain_then_recovery, setup),
        cmocka_unit_test_setup(max_timers_counts_pending_not_running, setup),
        cmocka_unit_test_setup(max_timers_one_many_cycles, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
