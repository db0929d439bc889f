/* test_wheel_shapes.c: tiny wheels (2, 4, 8 slots per level: 42, 21, 14
 * levels) with delays on both sides of every level boundary, armed at
 * several cursor phases; every timer is checked at deadline - 1 ns (not
 * run) and at deadline + tick (run). */
#include "tw_test.h"

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    t_seq = 0;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* delays (ns) around every power of `slots` ticks up to the horizon */
static size_t level_delays(uint64_t tick, uint32_t slots, uint64_t max, uint64_t *out,
                           size_t cap)
{
    size_t n = 0;
    for (uint64_t span = 1; span <= (1ull << 42) && span <= max / tick / 2; span *= slots) {
        const uint64_t cand[] = {
            (span - 1) * tick, span * tick - 1, span * tick, span * tick + 1,
            (span + 1) * tick, span * tick + span * tick / 2 + 3, 2 * span * tick - 1,
        };
        for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
            if (cand[i] <= max && n < cap)
                out[n++] = cand[i];
        if (span > UINT64_MAX / slots)
            break;
    }
    return n;
}

static void run_shape(uint32_t slots, uint64_t tick)
{
    enum { CAP = 2048 };
    tw_service *s = t_service(tick, slots, 2);
    uint64_t max = tw_max_delay(s);
    uint64_t delays[512];
    size_t nd = level_delays(tick, slots, max / 2, delays, 512);
    t_timer *v = calloc(CAP, sizeof *v);
    uint64_t *stops = calloc(2 * CAP, sizeof *stops);
    assert_non_null(v);
    assert_non_null(stops);
    size_t n = 0;
    /* arm at four cursor phases: 0, mid-tick, a few ticks in, past a
     * level-1 rotation */
    const uint64_t phases[] = {0, tick / 2 + 1, 3 * tick, (uint64_t)slots * tick * 3 + 5};
    for (size_t p = 0; p < 4; p++) {
        ADVANCE(s, phases[p]);
        t_expect_due(v, n, phases[p], tick);
        for (size_t i = 0; i < nd && n < CAP; i++)
            t_arm(s, &v[n++], delays[i]);
    }
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        stops[ns++] = v[i].deadline ? v[i].deadline - 1 : 0; /* no wrap to UINT64_MAX */
        stops[ns++] = v[i].deadline + tick;
    }
    qsort(stops, ns, sizeof *stops, cmp_u64);
    uint64_t now = tw_now(s);
    for (size_t i = 0; i < ns; i++) {
        if (stops[i] <= now)
            continue;
        now = stops[i];
        ADVANCE(s, now);
        t_expect_due(v, n, now, tick);
    }
    for (size_t i = 0; i < n; i++)
        if (v[i].runs != 1)
            fail_msg("slots %u tick %" PRIu64 ": timer with deadline %" PRIu64 " ran %d times",
                     slots, tick, v[i].deadline, v[i].runs);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, n);
    assert_int_equal(st.pending, 0);
    free(v);
    free(stops);
    tw_destroy(s);
}

static void two_slots_every_level_boundary(void **state)
{
    (void)state;
    run_shape(2, T_MS);
    run_shape(2, 1000);
}

static void four_slots_every_level_boundary(void **state)
{
    (void)state;
    run_shape(4, T_MS);
    run_shape(4, 7 * T_MS);
}

static void eight_slots_every_level_boundary(void **state)
{
    (void)state;
    run_shape(8, T_MS);
    run_shape(8, 1000);
}

/* random arms between random advances: timers enter every level at every
 * cursor phase and cascade down through partly drained levels */
static void random_arms_and_steps_cascade(void **state)
{
    (void)state;
    enum { N = 3000 };
    static const uint32_t shapes[] = {2, 4, 8};
    for (size_t k = 0; k < 3; k++) {
        const uint64_t tick = T_MS;
        tw_service *s = t_service(tick, shapes[k], 1);
        t_timer *v = calloc(N, sizeof *v);
        assert_non_null(v);
        uint64_t rnd = 0x1234567 + k, now = 0;
        size_t n = 0;
        for (int step = 0; step < 4000; step++) {
            rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
            if (n < N && (rnd & 1)) {
                uint64_t bits = (rnd >> 1) % 24; /* up to 2^24 ticks */
                uint64_t delay = ((rnd >> 8) & ((1ull << bits) - 1)) * tick + (rnd >> 40) % tick;
                t_arm(s, &v[n++], delay);
            } else {
                uint64_t bits = (rnd >> 1) % 20;
                now += ((rnd >> 8) & ((1ull << bits) - 1)) * (tick / 4) + (rnd >> 50) % 3;
                ADVANCE(s, now);
                t_expect_due(v, n, now, tick);
            }
        }
        now += (1ull << 25) * tick;
        ADVANCE(s, now);
        t_expect_due(v, n, now, tick);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(v[i].runs, 1);
        free(v);
        tw_destroy(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(two_slots_every_level_boundary, setup),
        cmocka_unit_test_setup(four_slots_every_level_boundary, setup),
        cmocka_unit_test_setup(eight_slots_every_level_boundary, setup),
        cmocka_unit_test_setup(random_arms_and_steps_cascade, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
