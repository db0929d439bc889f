/* test_schedule.c: arming one-shot timers; never early, at most one tick late. */
#include "tw_test.h"

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    t_seq = 0;
    return 0;
}

static void delay_zero_fires_next_tick(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer a, b, c;

    t_arm(s, &a, 0); /* at now = 0 */
    assert_int_equal(a.runs, 0); /* never inside tw_schedule */
    ADVANCE(s, 1 * T_MS);
    assert_int_equal(a.runs, 1);
    assert_true(a.ran_at >= a.deadline);

    ADVANCE(s, 2 * T_MS + 500 * T_US); /* mid-tick */
    t_arm(s, &b, 0);
    assert_int_equal(b.runs, 0);
    ADVANCE(s, 3 * T_MS + 500 * T_US);
    assert_int_equal(b.runs, 1);
    assert_true(b.ran_at >= 2 * T_MS + 500 * T_US);

    ADVANCE(s, 5 * T_MS); /* on a tick boundary */
    t_arm(s, &c, 0);
    assert_int_equal(c.runs, 0);
    ADVANCE(s, 6 * T_MS);
    assert_int_equal(c.runs, 1);
    assert_true(c.ran_at >= 5 * T_MS);
    assert_int_equal(a.runs + b.runs, 2);
    tw_destroy(s);
}

/* for a deadline D: nothing at D - 1 ns, run by D + tick */
static void expect_exact(uint64_t tick, uint64_t start, uint64_t delay)
{
    tw_service *s = t_service(tick, 256, 16);
    t_timer x;
    if (start)
        ADVANCE(s, start);
    t_arm(s, &x, delay);
    uint64_t d = start + delay;
    if (d - 1 > start)
        ADVANCE(s, d - 1);
    if (x.runs != 0)
        fail_msg("tick %" PRIu64 " start %" PRIu64 " delay %" PRIu64
                 ": ran at %" PRIu64 " before its deadline %" PRIu64,
                 tick, start, delay, x.ran_at, d);
    ADVANCE(s, d + tick);
    if (x.runs != 1)
        fail_msg("tick %" PRIu64 " start %" PRIu64 " delay %" PRIu64
                 ": %d runs by deadline + tick", tick, start, delay, x.runs);
    assert_true(x.ran_at >= d);
    tw_destroy(s);
}

static void never_early_at_exact_deadline_minus_one_ns(void **state)
{
    (void)state;
    static const uint64_t ticks[] = {T_MS, 1000, 7 * T_MS};
    static const uint64_t starts[] = {0, 1, 999, 123456789};
    for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {
        uint64_t tk = ticks[i];
        const uint64_t delays[] = {
            1, 2, tk - 1, tk, tk + 1, 2 * tk - 1, 2 * tk, 7 * tk + tk / 3,
            255 * tk, 256 * tk, 257 * tk + 1, 65536 * tk - 1, 65536 * tk + 17,
            (1ull << 24) * tk + 5, (1ull << 33) * tk - 1,
        };
        for (size_t j = 0; j < sizeof starts / sizeof starts[0]; j++)
            for (size_t k = 0; k < sizeof delays / sizeof delays[0]; k++)
                expect_exact(tk, starts[j], delays[k]);
    }
}

static void fires_by_deadline_plus_one_tick(void **state)
{
    (void)state;
    enum { N = 600 };
    const uint64_t tick = T_MS;
    tw_service *s = t_service(tick, 16, 2);
    t_timer *v = calloc(N, sizeof *v);
    assert_non_null(v);
    uint64_t rnd = 0x9e3779b97f4a7c15ull;
    uint64_t now = 0;
    size_t armed = 0;
    for (int step = 0; step < 400; step++) {
        /* arm a few at the current time, deadlines within ~40 s */
        for (int k = 0; k < 2 && armed < N; k++) {
            rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
            uint64_t bits = 4 + (rnd >> 58) % 32;
            uint64_t delay = (rnd & ((1ull << bits) - 1)) % (40 * T_S);
            t_arm(s, &v[armed++], delay);
        }
        rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
        now += (step % 10 == 9) ? rnd % (5 * T_S) : rnd % (3 * tick);
        ADVANCE(s, now);
        t_expect_due(v, armed, now, tick);
    }
    now += 41 * T_S;
    ADVANCE(s, now);
    t_expect_due(v, armed, now, tick);
    for (size_t i = 0; i < armed; i++)
        assert_int_equal(v[i].runs, 1);
    free(v);
    tw_destroy(s);
}

typedef struct seen {
    tw_timer h;
    void *arg;
    int runs;
} seen;

static void record_seen(tw_timer t, void *arg)
{
    seen *x = arg;
    x->h = t;
    x->arg = arg;
    x->runs++;
}

static void callback_gets_handle_and_arg(void **state)
{
    (void)state;
    tw_service *s = t_default();
    seen v[3];
    tw_timer h[3];
    memset(v, 0, sizeof v);
    for (int i = 0; i < 3; i++) {
        ASSERT_RC(tw_schedule(s, (uint64_t)(i + 1) * T_MS, record_seen, &v[i], &h[i]),
                  TW_OK);
        assert_true(h[i] != 0);
        CHECK(s);
    }
    assert_true(h[0] != h[1] && h[1] != h[2] && h[0] != h[2]);
    /* out may be NULL: the callback still gets a real handle */
    seen anon;
    memset(&anon, 0, sizeof anon);
    ASSERT_RC(tw_schedule(s, 2 * T_MS, record_seen, &anon, NULL), TW_OK);
    CHECK(s);
    ADVANCE(s, 10 * T_MS);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(v[i].runs, 1);
        assert_true(v[i].h == h[i]);
        assert_ptr_equal(v[i].arg, &v[i]);
    }
    assert_int_equal(anon.runs, 1);
    assert_true(anon.h != 0);
    assert_true(anon.h != h[0] && anon.h != h[1] && anon.h != h[2]);
    tw_destroy(s);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* distinct deadlines, one advance, runs sorted by deadline */
static void expect_order(uint32_t slots, uint64_t span, int n, uint64_t seed)
{
    tw_service *s = t_service(T_MS, slots, 4);
    t_timer *v = calloc((size_t)n, sizeof *v);
    uint64_t *d = calloc((size_t)n, sizeof *d);
    assert_non_null(v);
    assert_non_null(d);
    ADVANCE(s, 3 * T_MS + 1);
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        /* unique: the low bits carry i */
        uint64_t delay = ((seed >> 20) % (span / (uint64_t)n)) * (uint64_t)n + (uint64_t)i;
        t_arm(s, &v[i], delay);
        d[i] = v[i].deadline;
    }
    qsort(d, (size_t)n, sizeof *d, cmp_u64);
    ADVANCE(s, 3 * T_MS + 1 + span + T_MS);
    for (int i = 0; i < n; i++) {
        assert_int_equal(v[i].runs, 1);
        const uint64_t *pos = bsearch(&v[i].deadline, d, (size_t)n, sizeof *d, cmp_u64);
        assert_non_null(pos);
        uint64_t rank = (uint64_t)(pos - d) + 1; /* 1-based */
        if (v[i].seq != rank)
            fail_msg("slots %u span %" PRIu64 ": timer with deadline %" PRIu64
                     " ran %" PRIu64 "th, its deadline ranks %" PRIu64 "th",
                     slots, span, v[i].deadline, v[i].seq, rank);
    }
    free(v);
    free(d);
    tw_destroy(s);
}

static void fires_in_deadline_order_within_one_advance(void **state)
{
    (void)state;
    t_seq = 0;
    expect_order(256, 50 * T_MS, 300, 1); /* many share a tick */
    t_seq = 0;
    expect_order(256, 600 * T_S, 300, 2); /* across levels and cascades */
    t_seq = 0;
    expect_order(4, 10 * T_S, 500, 3);
    t_seq = 0;
    expect_order(2, 2 * T_MS, 200, 4); /* all within two ticks */
}

typedef struct chain {
    tw_service *s;
    uint64_t delay;     /* for the next link */
    uint64_t deadline;  /* of the pending link */
    int left;
    int runs;
    int rc_bad;
} chain;

static void chain_link(tw_timer t, void *arg)
{
    (void)t;
    chain *c = arg;
    uint64_t now = tw_now(c->s);
    CB_EXPECT(now >= c->deadline, "chain link early: %" PRIu64 " < %" PRIu64, now,
              c->deadline);
    c->runs++;
    if (c->left-- > 0) {
        c->deadline = now + c->delay;
        int rc = tw_schedule(c->s, c->delay, chain_link, c, NULL);
        CB_EXPECT(rc == TW_OK, "tw_schedule from a callback: %s", t_code(rc));
    }
}

static void schedule_from_callback(void **state)
{
    (void)state;
    static const uint64_t delays[] = {0, 1, 999 * T_US, T_MS, 3 * T_MS + 7, 300 * T_MS};
    for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++) {
        tw_service *s = t_service(T_MS, 8, 1);
        chain c = {.s = s, .delay = delays[i], .deadline = 5 * T_MS, .left = 20};
        ASSERT_RC(tw_schedule(s, 5 * T_MS, chain_link, &c, NULL), TW_OK);
        CHECK(s);
        uint64_t now = 0;
        for (int k = 0; k < 21 && c.runs < 21; k++) {
            /* each link is due by deadline + tick */
            uint64_t target = c.deadline + T_MS;
            int before = c.runs;
            now = target > now ? target : now;
            ADVANCE(s, now);
            assert_true(c.runs > before);
        }
        assert_int_equal(c.runs, 21);
        tw_stats st;
        t_stats(s, &st);
        assert_int_equal(st.scheduled, 21);
        assert_int_equal(st.fired, 21);
        assert_int_equal(st.pending, 0);
        tw_destroy(s);
    }
}

static void huge_delay_2_pow_40_ticks_fires_after_cascades(void **state)
{
    (void)state;
    static const uint32_t slots[] = {256, 2, 16, 65536};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        tw_service *s = t_service(T_MS, slots[i], 16);
        const uint64_t big = (1ull << 40) * T_MS;
        t_timer v[4];
        ADVANCE(s, 12345678);
        t_arm(s, &v[0], big);
        t_arm(s, &v[1], big - 1);
        t_arm(s, &v[2], big / 2 + 3);
        t_arm(s, &v[3], 5 * T_MS);
        uint64_t d = v[0].deadline;
        ADVANCE(s, d / 3);
        t_expect_due(v, 4, d / 3, T_MS);
        assert_int_equal(v[3].runs, 1);
        assert_int_equal(v[2].runs, 0);
        ADVANCE(s, 2 * (d / 3));
        t_expect_due(v, 4, 2 * (d / 3), T_MS);
        assert_int_equal(v[2].runs, 1);
        ADVANCE(s, d - 2);
        assert_int_equal(v[1].runs, 0);
        ADVANCE(s, d - 1);
        assert_int_equal(v[0].runs, 0);
        ADVANCE(s, d + T_MS);
        t_expect_due(v, 4, d + T_MS, T_MS);
        for (int k = 0; k < 4; k++)
            assert_int_equal(v[k].runs, 1);
        assert_true(v[1].seq < v[0].seq);
        tw_destroy(s);
    }
}

static void max_delay_is_at_least_2_pow_40_ticks(void **state)
{
    (void)state;
    static const uint64_t ticks[] = {1000, T_MS, 7 * T_MS, T_S};
    for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {
        tw_service *s = t_service(ticks[i], 256, 16);
        uint64_t want = ticks[i] >= (1ull << 23) ? (1ull << 63) : (1ull << 40) * ticks[i];
        uint64_t m = tw_max_delay(s);
        if (m < want)
            fail_msg("tick %" PRIu64 ": tw_max_delay %" PRIu64 " < %" PRIu64, ticks[i],
                     m, want);
        assert_true(m < UINT64_MAX);
        ASSERT_RC(tw_schedule(s, m, t_noop, NULL, NULL), TW_OK);
        CHECK(s);
        tw_destroy(s);
    }
}

static void max_delay_timer_fires_at_its_deadline(void **state)
{
    (void)state;
    tw_service *s = t_service(T_MS, 256, 16);
    t_timer x;
    ADVANCE(s, 777 * T_US + 3);
    uint64_t m = tw_max_delay(s);
    t_arm(s, &x, m);
    uint64_t d = x.deadline;
    for (int k = 1; k <= 4; k++) {
        ADVANCE(s, 777 * T_US + 3 + (m / 5) * (uint64_t)k);
        assert_int_equal(x.runs, 0);
    }
    ADVANCE(s, d - 1);
    assert_int_equal(x.runs, 0);
    ADVANCE(s, d + T_MS);
    assert_int_equal(x.runs, 1);
    tw_destroy(s);
}

static void erange_beyond_horizon(void **state)
{
    (void)state;
    static const uint64_t ticks[] = {1000, T_MS, 7 * T_MS};
    for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {
        tw_service *s = t_service(ticks[i], 4, 1);
        uint64_t m = tw_max_delay(s);
        int ran = 0;
        tw_timer h = 77;
        ASSERT_RC(tw_schedule(s, m + 1, t_noop, &ran, &h), TW_ERANGE);
        assert_true(h == 77); /* nothing stored on error */
        ASSERT_RC(tw_schedule(s, m + 1000 * ticks[i], t_noop, NULL, NULL), TW_ERANGE);
        ASSERT_RC(tw_schedule_every(s, m + 1, T_MS, t_noop, NULL, NULL), TW_ERANGE);
        ASSERT_RC(tw_schedule_every(s, 0, m + 1, t_noop, NULL, NULL), TW_ERANGE);
        CHECK(s);
        tw_stats st;
        t_stats(s, &st);
        assert_int_equal(st.scheduled, 0);
        assert_int_equal(st.pending, 0);
        tw_destroy(s);
    }
}

static void uint64_max_is_erange(void **state)
{
    (void)state;
    static const uint64_t ticks[] = {1000, T_MS, T_S};
    for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {
        tw_service *s = t_service(ticks[i], 65536, 1);
        ASSERT_RC(tw_schedule(s, UINT64_MAX, t_noop, NULL, NULL), TW_ERANGE);
        if (tw_max_delay(s) < UINT64_MAX - 1)
            ASSERT_RC(tw_schedule(s, UINT64_MAX - 1, t_noop, NULL, NULL), TW_ERANGE);
        ASSERT_RC(tw_schedule_every(s, UINT64_MAX, T_S, t_noop, NULL, NULL), TW_ERANGE);
        ASSERT_RC(tw_schedule_every(s, 0, UINT64_MAX, t_noop, NULL, NULL), TW_ERANGE);
        CHECK(s);
        tw_stats st;
        t_stats(s, &st);
        assert_int_equal(st.scheduled, 0);
        tw_destroy(s);
    }
}

static void handles_are_distinct_and_nonzero(void **state)
{
    (void)state;
    enum { N = 3000 };
    tw_service *s = t_service(T_MS, 16, 4);
    tw_timer *h = calloc(N, sizeof *h);
    assert_non_null(h);
    for (int i = 0; i < N; i++) {
        ASSERT_RC(tw_schedule(s, (uint64_t)(i % 50) * T_MS, t_noop, NULL, &h[i]), TW_OK);
        assert_true(h[i] != 0);
    }
    CHECK(s);
    qsort(h, N, sizeof *h, cmp_u64);
    for (int i = 1; i < N; i++)
        assert_true(h[i] != h[i - 1]);
    free(h);
    tw_destroy(s);
}

static void advance_to_same_time_is_ok_and_below_is_einval(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, 10 * T_MS);
    ADVANCE(s, 4 * T_MS);
    ADVANCE(s, 4 * T_MS);
    ASSERT_RC(tw_advance(s, 4 * T_MS - 1), TW_EINVAL);
    assert_true(tw_now(s) == 4 * T_MS);
    ASSERT_RC(tw_advance(s, 0), TW_EINVAL);
    CHECK(s);
    assert_int_equal(x.runs, 0);
    ADVANCE(s, 11 * T_MS);
    assert_int_equal(x.runs, 1);
    tw_destroy(s);
}

static void now_starts_at_zero_and_follows_advance(void **state)
{
    (void)state;
    tw_service *s = t_default();
    assert_true(tw_now(s) == 0);
    ADVANCE(s, 1);
    ADVANCE(s, 123456789);
    ADVANCE(s, (1ull << 50) + 3);
    tw_destroy(s);
}

typedef struct now_probe {
    tw_service *s;
    uint64_t seen;
} now_probe;

static void probe_now(tw_timer t, void *arg)
{
    (void)t;
    now_probe *p = arg;
    p->seen = tw_now(p->s);
}

/* the deadline is tw_now read inside the call + delay */
static void deadline_is_now_plus_delay(void **state)
{
    (void)state;
    tw_service *s = t_default();
    ADVANCE(s, 10 * T_MS + 400 * T_US);
    now_probe p = {.s = s};
    ASSERT_RC(tw_schedule(s, 2 * T_MS, probe_now, &p, NULL), TW_OK);
    CHECK(s);
    ADVANCE(s, 12 * T_MS + 400 * T_US - 1);
    assert_true(p.seen == 0);
    ADVANCE(s, 13 * T_MS + 400 * T_US);
    assert_true(p.seen >= 12 * T_MS + 400 * T_US);
    assert_true(p.seen <= 13 * T_MS + 400 * T_US);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(delay_zero_fires_next_tick, setup),
        cmocka_unit_test_setup(never_early_at_exact_deadline_minus_one_ns, setup),
        cmocka_unit_test_setup(fires_by_deadline_plus_one_tick, setup),
        cmocka_unit_test_setup(callback_gets_handle_and_arg, setup),
        cmocka_unit_test_setup(fires_in_deadline_order_within_one_advance, setup),
        cmocka_unit_test_setup(schedule_from_callback, setup),
        cmocka_unit_test_setup(huge_delay_2_pow_40_ticks_fires_after_cascades, setup),
        cmocka_unit_test_setup(max_delay_is_at_least_2_pow_40_ticks, setup),
        cmocka_unit_test_setup(max_delay_timer_fires_at_its_deadline, setup),
        cmocka_unit_test_setup(erange_beyond_horizon, setup),
        cmocka_unit_test_setup(uint64_max_is_erange, setup),
        cmocka_unit_test_setup(handles_are_distinct_and_nonzero, setup),
        cmocka_unit_test_setup(advance_to_same_time_is_ok_and_below_is_einval, setup),
        cmocka_unit_test_setup(now_starts_at_zero_and_follows_advance, setup),
        cmocka_unit_test_setup(deadline_is_now_plus_delay, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
