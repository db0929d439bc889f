/* test_stats.c: counters, lateness, histogram, quantile. */
#include "tw_test.h"

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    t_seq = 0;
    return 0;
}

static void fresh_service_counts_nothing(void **state)
{
    (void)state;
    tw_service *s = t_default();
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.scheduled, 0);
    assert_int_equal(st.fired, 0);
    assert_int_equal(st.cancelled, 0);
    assert_int_equal(st.rescheduled, 0);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.ticks, 0);
    assert_int_equal(st.overflowed, 0);
    assert_int_equal(st.max_lateness_ns, 0);
    uint64_t h[TW_LATENESS_BUCKETS];
    memset(h, 0xa5, sizeof h);
    tw_lateness_histogram(s, h);
    for (int i = 0; i < TW_LATENESS_BUCKETS; i++)
        assert_int_equal(h[i], 0);
    assert_int_equal(tw_lateness_quantile(s, 0.99), 0);
    assert_int_equal(tw_lateness_quantile(s, 1.0), 0);
    tw_destroy(s);
}

/* q outside (0, 1], NaN included: UINT64_MAX (no such quantile), with or
 * without runs; NULL outputs are ignored, as for tw_stats_get. */
static void quantile_outside_range_and_null_outputs(void **state)
{
    (void)state;
    tw_service *s = t_default();
    static const double bad[] = {0.0, -0.5, 1.0000001, 1.5, 1e300, -1e300};
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
            assert_true(tw_lateness_quantile(s, bad[i]) == UINT64_MAX);
        assert_true(tw_lateness_quantile(s, __builtin_nan("")) == UINT64_MAX);
        assert_true(tw_lateness_quantile(s, __builtin_inf()) == UINT64_MAX);
        t_timer x;
        t_arm(s, &x, 2 * T_MS);
        ADVANCE(s, 5 * T_MS * (uint64_t)(round + 1));
    }
    assert_true(tw_lateness_quantile(s, 1.0) != UINT64_MAX);
    assert_true(tw_lateness_quantile(s, 1e-9) != UINT64_MAX);
    tw_lateness_histogram(s, NULL); /* no crash, nothing done */
    tw_lateness_histogram(NULL, NULL);
    tw_stats_get(s, NULL);
    tw_stats_get(NULL, NULL);
    tw_config_init(NULL);
    ASSERT_RC(tw_create(NULL, NULL), TW_EINVAL);
    ASSERT_RC(tw_schedule(s, T_MS, t_noop, NULL, NULL), TW_OK); /* out is optional */
    tw_destroy(s);
}

static void ticks_count_processed_ticks(void **state)
{
    (void)state;
    static const uint64_t ticks[] = {1000, T_MS, 7 * T_MS};
    for (size_t i = 0; i < sizeof ticks / sizeof ticks[0]; i++) {
        tw_service *s = t_service(ticks[i], 16, 4);
        static const uint64_t at[] = {0, 1, 999, 1000, 5 * T_MS + 3, 123 * T_MS, 9 * T_S};
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
            ADVANCE(s, at[k]);
            tw_stats st;
            t_stats(s, &st);
            if (st.ticks != at[k] / ticks[i])
                fail_msg("tick %" PRIu64 ", now %" PRIu64 ": stats.ticks %" PRIu64
                         ", expected %" PRIu64, ticks[i], at[k], st.ticks,
                         at[k] / ticks[i]);
        }
        tw_destroy(s);
    }
}

static unsigned bucket_of(uint64_t late)
{
    if (late < 1024)
        return 0;
    unsigned b = 0;
    while (b + 1 < TW_LATENESS_BUCKETS && (late >> (b + 11)) != 0)
        b++;
    return b + 1 > TW_LATENESS_BUCKETS - 1 ? TW_LATENESS_BUCKETS - 1 : b + 1;
}

/* lateness = the clock at the callback's start - the deadline */
static void lateness_max_and_histogram(void **state)
{
    (void)state;
    tw_service *s = t_default();
    enum { N = 40 };
    t_timer v[N];
    for (int i = 0; i < N; i++)
        t_arm(s, &v[i], (uint64_t)i * 997 * T_US + (uint64_t)i * 13);
    uint64_t now = 0;
    for (int k = 0; k < 8; k++) {
        now += (uint64_t)(k + 1) * 1700 * T_US;
        ADVANCE(s, now);
    }
    ADVANCE(s, 60 * T_S);
    uint64_t want[TW_LATENESS_BUCKETS] = {0}, max = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(v[i].runs, 1);
        uint64_t late = v[i].ran_at - v[i].deadline;
        want[bucket_of(late)]++;
        if (late > max)
            max = late;
    }
    tw_stats st;
    t_stats(s, &st);
    assert_true(st.max_lateness_ns == max);
    uint64_t h[TW_LATENESS_BUCKETS];
    tw_lateness_histogram(s, h);
    for (int i = 0; i < TW_LATENESS_BUCKETS; i++)
        if (h[i] != want[i])
            fail_msg("lateness bucket %d: %" PRIu64 ", expected %" PRIu64, i, h[i], want[i]);
    uint64_t q = tw_lateness_quantile(s, 1.0);
    assert_true(q >= max);
    assert_true(q <= (max < 1024 ? 1024 : 2 * max));
    /* the median is within a factor of two above the true median */
    uint64_t lat[N];
    for (int i = 0; i < N; i++)
        lat[i] = v[i].ran_at - v[i].deadline;
    for (int i = 1; i < N; i++)
        for (int j = i; j > 0 && lat[j - 1] > lat[j]; j--) {
            uint64_t t = lat[j];
            lat[j] = lat[j - 1];
            lat[j - 1] = t;
        }
    uint64_t med = lat[N / 2 - 1];
    uint64_t qm = tw_lateness_quantile(s, 0.5);
    assert_true(qm >= med);
    assert_true(qm <= (med < 1024 ? 1024 : 2 * med));
    tw_destroy(s);
}

/* A worker counts its batch's lateness runs at a time: the clock read
 * some runs before (every 1 to 64, workers.c), each run's bucket by a
 * range check against the last one's. One worker, a burst of BURST_N
 * timers due at one instant (tw_schedule_at: the deadline is exact), each
 * callback spinning about 2 us: lateness grows through the burst across
 * several buckets. The library's lateness of run k lies between the
 * start of run k - 64 (the read comes after it) and its own start, less
 * the deadline; for the first 64 runs, between the deadline (the batch's
 * first read may come before the first run's start: a runner that claimed
 * ahead reads the clock when its wait ends, and 1 run in about 25 fell a
 * bucket below the first start's, 2026-11-28) and its own start. So,
 * bucket by bucket, the runs it counts at or below b lie
 * between those whose upper bound is there and those whose lower bound
 * is. A bucket's range off by one power of two breaks it (planted: the
 * width doubled, lo halved). */
enum { BURST_N = 3000 };

typedef struct burst_rec {
    tw_service *s;
    atomic_int runs;
    uint64_t start[BURST_N]; /* service time at each run's start, in order */
} burst_rec;

static void burst_run(tw_timer t, void *arg)
{
    (void)t;
    burst_rec *b = arg;
    uint64_t now = tw_now(b->s);
    int k = atomic_load_explicit(&b->runs, memory_order_relaxed); /* one worker */
    b->start[k] = now;
    while (tw_now(b->s) < now + 2 * T_US) {
    }
    atomic_store_explicit(&b->runs, k + 1, memory_order_release);
}

static void lateness_counted_on(unsigned workers)
{
    tw_service *s = t_monotonic(workers, T_MS);
    static burst_rec b;
    memset(&b, 0, sizeof b);
    b.s = s;
    uint64_t at = tw_now(s) + 50 * T_MS;
    for (int i = 0; i < BURST_N; i++)
        ASSERT_RC(tw_schedule_at(s, at, burst_run, &b, NULL), TW_OK);
    uint64_t give_up = t_mono_ns() + 30 * T_S;
    while (atomic_load_explicit(&b.runs, memory_order_acquire) < BURST_N && t_mono_ns() < give_up)
        t_sleep_ns(T_MS);
    assert_int_equal(atomic_load(&b.runs), BURST_N);
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    tw_stats st;
    t_stats(s, &st);
    uint64_t h[TW_LATENESS_BUCKETS];
    tw_lateness_histogram(s, h);
    uint64_t total = 0, lo_max = 0, hi_max = 0;
    uint64_t by_hi[TW_LATENESS_BUCKETS] = {0}, by_lo[TW_LATENESS_BUCKETS] = {0};
    for (int k = 0; k < BURST_N; k++) {
        assert_true(b.start[k] >= at); /* never early */
        uint64_t hi = b.start[k] - at, lo = k < 64 ? 0 : b.start[k - 64] - at;
        by_hi[bucket_of(hi)]++;
        by_lo[bucket_of(lo)]++;
        lo_max = lo > lo_max ? lo : lo_max;
        hi_max = hi > hi_max ? hi : hi_max;
    }
    uint64_t got = 0, under_hi = 0, under_lo = 0;
    int used = 0;
    for (int i = 0; i < TW_LATENESS_BUCKETS; i++) {
        total += h[i];
        got += h[i];
        under_hi += by_hi[i];
        under_lo += by_lo[i];
        used += h[i] != 0;
        if (got < under_hi || got > under_lo)
            fail_msg("lateness buckets 0..%d: %" PRIu64 " runs, expected %" PRIu64 " to %" PRIu64,
                     i, got, under_hi, under_lo);
    }
    print_message("      %d buckets used, worst %" PRIu64 " ns (between %" PRIu64 " and %" PRIu64
                  ")\n", used, st.max_lateness_ns, lo_max, hi_max);
    assert_int_equal(total, BURST_N);
    /* The burst spreads over buckets (7 natively), so the checks above
     * compare more than one. Under valgrind, whose burst starts late (10-20
     * ms), it may lie in one bucket (a review): said, not asserted. */
    if (!t_under_valgrind())
        assert_true(used >= 2);
    else if (used < 2)
        print_message("      under valgrind: the burst lay in one bucket (its pace)\n");
    assert_true(st.max_lateness_ns >= lo_max && st.max_lateness_ns <= hi_max);
    tw_destroy(s);
}

static void lateness_counted_in_batches(void **state)
{
    (void)state;
    lateness_counted_on(1);
}

/* workers = 0: the cursor runs the burst itself, one list (workers.c,
 * run_inline), with the clock read every few runs as a worker's batch
 * does; the same bounds hold (planted: one read for the whole list put
 * every run in the first one's bucket). */
static void lateness_counted_inline(void **state)
{
    (void)state;
    lateness_counted_on(0);
}

/* workers = 0, callbacks that take 20 ms each, all due at one instant: the
 * cursor reads the clock before each (a slow run spaces the reads as a
 * batch does, workers.c), so the last one's lateness, 140 ms, is counted
 * as such (planted: a read every 8th run counted it as under 1 ms, a
 * review's program, 2026-11-29). */
enum { SLOW_N = 8 };
static uint64_t g_slow_start[SLOW_N];
static atomic_int g_slow_k;
static tw_service *_Atomic g_slow_s;

static void slow_run(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    g_slow_start[atomic_fetch_add(&g_slow_k, 1)] = tw_now(atomic_load(&g_slow_s));
    t_sleep_ns(20 * T_MS);
}

static void lateness_of_slow_inline_runs(void **state)
{
    (void)state;
    tw_service *s = t_monotonic(0, T_MS);
    atomic_store(&g_slow_s, s);
    atomic_store(&g_slow_k, 0);
    uint64_t at = tw_now(s) + 50 * T_MS;
    for (int i = 0; i < SLOW_N; i++)
        ASSERT_RC(tw_schedule_at(s, at, slow_run, NULL, NULL), TW_OK);
    uint64_t give_up = t_mono_ns() + 30 * T_S;
    while (atomic_load(&g_slow_k) < SLOW_N && t_mono_ns() < give_up)
        t_sleep_ns(T_MS);
    ASSERT_RC(tw_stop(s, NULL), TW_OK); /* the last callback returned */
    assert_int_equal(atomic_load(&g_slow_k), SLOW_N);
    uint64_t worst = 0;
    for (int i = 0; i < SLOW_N; i++) {
        assert_true(g_slow_start[i] >= at); /* never early */
        worst = g_slow_start[i] - at > worst ? g_slow_start[i] - at : worst;
    }
    tw_stats st;
    t_stats(s, &st);
    print_message("      worst start %.1f ms late, counted %.1f ms\n", (double)worst / 1e6,
                  (double)st.max_lateness_ns / 1e6);
    /* Read before the run's start, after the run before it returned. */
    assert_true(st.max_lateness_ns <= worst);
    /* 10 ms: the cursor's clock read and the run's own are one call apart,
     * a preemption between them aside (2 ms was a short one: a review); the
     * miscount this guards against was 140 ms short. */
    assert_true(st.max_lateness_ns + 10 * T_MS >= worst);
    tw_destroy(s);
}

static void counters_match_operations(void **state)
{
    (void)state;
    tw_service *s = t_service(T_MS, 4, 1);
    t_timer v[20];
    for (int i = 0; i < 20; i++)
        t_arm(s, &v[i], (uint64_t)(i + 1) * T_MS);
    tw_timer p;
    ASSERT_RC(tw_schedule_every(s, T_MS, 2 * T_MS, t_noop, NULL, &p), TW_OK);
    for (int i = 0; i < 5; i++) {
        ASSERT_RC(tw_cancel(s, v[i].h), TW_OK);
        v[i].cancelled = 1;
    }
    for (int i = 5; i < 12; i++) {
        ASSERT_RC(tw_reschedule(s, v[i].h, 100 * T_MS), TW_OK);
        v[i].deadline = 100 * T_MS;
    }
    ASSERT_RC(tw_reschedule(s, v[0].h, T_MS), TW_ENOENT); /* not counted */
    ASSERT_RC(tw_cancel(s, v[0].h), TW_ENOENT);
    for (uint64_t now = T_MS; now <= 50 * T_MS; now += T_MS)
        ADVANCE(s, now);
    t_expect_due(v, 20, 50 * T_MS, T_MS);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 21);
    assert_int_equal(st.cancelled, 5);
    assert_int_equal(st.rescheduled, 7);
    /* one-shots 12..19 fired, the periodic ran at 1, 3, ..., 49 ms */
    assert_int_equal(st.fired, 8 + 25);
    assert_int_equal(st.pending, 7 + 1);
    ASSERT_RC(tw_cancel(s, p), TW_OK);
    t_stats(s, &st);
    assert_int_equal(st.pending, 7);
    assert_int_equal(st.cancelled, 6);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(fresh_service_counts_nothing, setup),
        cmocka_unit_test_setup(quantile_outside_range_and_null_outputs, setup),
        cmocka_unit_test_setup(ticks_count_processed_ticks, setup),
        cmocka_unit_test_setup(lateness_max_and_histogram, setup),
        cmocka_unit_test_setup(lateness_counted_in_batches, setup),
        cmocka_unit_test_setup(lateness_counted_inline, setup),
        cmocka_unit_test_setup(lateness_of_slow_inline_runs, setup),
        cmocka_unit_test_setup(counters_match_operations, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
