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

/* The idle scan (tw__wheel_next_work) against its definition: the least
 * next epoch after the cursor of every occupied slot, every level. It
 * stops at the first occupied slot after the cursor's, level by level,
 * which is the least because a level's next epochs grow along the slots
 * from there (wheel.c, level_next_work); a wrong start, a missed wrap or
 * a partial word shows up here as another tick. */
static uint64_t least_epoch_by_definition(tw_service *s)
{
    tw_wheel *w = &s->wheel;
    uint64_t c = atomic_load(&w->cur);
    for (int j = 0; j < 2; j++)
        if (atomic_load(&w->late[j].word) & TW_SLOT_COUNT_MASK)
            return c + 1;
    uint64_t best = w->staged.n || w->stash.n ? w->staged_tick : UINT64_MAX;
    for (uint32_t l = 0; l < w->levels; l++) {
        uint32_t sh = w->step * l;
        uint64_t turn = 1ull << (sh + w->bits);
        for (uint32_t i = 0; i < w->nslots; i++) {
            if (!(atomic_load(&w->occ[(size_t)l * w->occ_words + i / 64]) & (1ull << (i % 64))))
                continue;
            uint64_t e = (c & ~(turn - 1)) + ((uint64_t)i << sh);
            e = e > c ? e : e + turn;
            if (e < best)
                best = e;
        }
    }
    return best;
}

static void idle_scan_finds_the_least_epoch(void **state)
{
    (void)state;
    static const uint32_t shapes[] = {2, 4, 8, 64, 128, 1024, 4096};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const uint64_t tick = T_MS;
        tw_service *s = t_service(tick, shapes[k], 4);
        uint64_t rnd = 0x9e3779b9 + k, now = 0;
        size_t checked = 0, armed = 0;
        for (int step = 0; step < 3000; step++) {
            rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
            if (armed < 2000 && (rnd & 1)) {
                uint64_t bits = (rnd >> 1) % 28; /* up to 2^28 ticks: several levels */
                uint64_t delay = ((rnd >> 8) & ((1ull << bits) - 1)) * tick + tick;
                tw_timer h;
                ASSERT_RC(tw_schedule(s, delay, t_noop, NULL, &h), TW_OK);
                armed++;
            } else {
                uint64_t bits = (rnd >> 1) % 22;
                now += ((rnd >> 8) & ((1ull << bits) - 1)) * (tick / 2);
                ASSERT_RC(tw_advance(s, now), TW_OK);
            }
            uint64_t want = least_epoch_by_definition(s);
            uint64_t got = tw__wheel_next_work(s);
            if (got != want)
                fail_msg("%u slots, step %d: the idle scan says tick %" PRIu64
                         ", the least epoch is %" PRIu64, shapes[k], step, got, want);
            checked += want != UINT64_MAX;
        }
        assert_true(checked > 1000);
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
        cmocka_unit_test_setup(idle_scan_finds_the_least_epoch, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
