/* test_batch.c: tw_schedule_many and tw_cancel_many, one test per sentence
 * of their contract in timerwheel.h. */
#include "tw_test.h"

#include <limits.h>

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    t_seq = 0;
    return 0;
}

#define GARBAGE 0xdeadbeefcafef00dull

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void assert_distinct_nonzero(const tw_timer *h, size_t n)
{
    tw_timer *c = malloc(n * sizeof *c);
    assert_non_null(c);
    memcpy(c, h, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_u64);
    for (size_t i = 0; i < n; i++) {
        if (c[i] == 0)
            fail_msg("handle 0 among %zu", n);
        if (i > 0 && c[i] == c[i - 1])
            fail_msg("handle %#" PRIx64 " twice among %zu", c[i], n);
    }
    free(c);
}

/* Arm v[0..n) with one tw_schedule_many, args[i] = &v[i], recorder
 * callback; v[i].deadline = tw_now + delays[i]. Returns what it returned. */
static int batch_arm(tw_service *s, t_timer *v, size_t n, const uint64_t *delays,
                     tw_timer *out)
{
    void **args = malloc((n ? n : 1) * sizeof *args);
    assert_non_null(args);
    uint64_t now = tw_now(s);
    for (size_t i = 0; i < n; i++) {
        memset(&v[i], 0, sizeof v[i]);
        v[i].s = s;
        v[i].deadline = now + delays[i];
        args[i] = &v[i];
        out[i] = GARBAGE;
    }
    int rc = tw_schedule_many(s, n, delays, t_on_fire, args, out);
    /* callbacks run only inside tw_advance: the handles may be filled in */
    for (size_t i = 0; i < n; i++)
        v[i].h = out[i];
    free(args);
    return rc;
}

static tw_service *capped(uint64_t max)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.workers = 0;
    cfg.max_timers = max;
    cfg.wheel_slots = 16;
    return t_service_cfg(&cfg);
}

/* ---- tw_schedule_many ---------------------------------------------------- */

/* "arms n one-shot timers ... handle into out[i] ... n on success" */
static void schedule_many_arms_n_with_distinct_nonzero_handles(void **state)
{
    (void)state;
    enum { N = 777 };
    tw_service *s = t_service(T_MS, 16, 2);
    uint64_t *d = calloc(N, sizeof *d);
    tw_timer *h = calloc(N, sizeof *h);
    assert_non_null(d);
    assert_non_null(h);
    for (size_t i = 0; i < N; i++) {
        d[i] = (uint64_t)(i % 97) * 313 * T_US;
        h[i] = GARBAGE;
    }
    assert_int_equal(tw_schedule_many(s, N, d, t_noop, NULL, h), N);
    CHECK(s);
    assert_distinct_nonzero(h, N);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, N);
    assert_int_equal(st.pending, N);
    /* one-shots: each ends with its single run */
    ADVANCE(s, 100 * T_S);
    t_stats(s, &st);
    assert_int_equal(st.fired, N);
    assert_int_equal(st.pending, 0);
    ASSERT_STATS_IDENTITY(st);
    for (size_t i = 0; i < N; i += 50)
        ASSERT_RC(tw_cancel(s, h[i]), TW_ENOENT);
    free(d);
    free(h);
    tw_destroy(s);
}

/* "delays_ns[i] from one clock reading": each element is due at
 * tw_now + delays_ns[i]; never early, by deadline + tick. */
static void schedule_many_each_fires_at_now_plus_its_delay(void **state)
{
    (void)state;
    static const uint64_t ticks[] = {T_MS, 1000, 7 * T_MS};
    for (size_t t = 0; t < sizeof ticks / sizeof ticks[0]; t++) {
        uint64_t tk = ticks[t];
        const uint64_t delays[] = {
            0, 1, tk - 1, tk, tk + 1, 2 * tk - 1, 2 * tk, 7 * tk + tk / 3,
            255 * tk, 256 * tk, 257 * tk + 1, 4096 * tk + 3, 65536 * tk - 1,
            65536 * tk + 17, 3 * tk, 1, /* duplicates are fine */
        };
        enum { N = sizeof delays / sizeof delays[0] };
        tw_service *s = t_service(tk, 16, 2);
        ADVANCE(s, 12345 * tk + tk / 2 + 7); /* mid-tick */
        t_timer v[N];
        tw_timer out[N];
        assert_int_equal(batch_arm(s, v, N, delays, out), N);
        CHECK(s);
        for (size_t i = 0; i < N; i++)
            assert_int_equal(v[i].runs, 0); /* never inside the call */
        /* checkpoints: every deadline - 1 ns and every deadline + tick */
        uint64_t cp[2 * N];
        for (size_t i = 0; i < N; i++) {
            cp[2 * i] = v[i].deadline - 1;
            cp[2 * i + 1] = v[i].deadline + tk;
        }
        qsort(cp, 2 * N, sizeof cp[0], cmp_u64);
        for (size_t i = 0; i < 2 * N; i++) {
            if (cp[i] < tw_now(s))
                continue;
            ADVANCE(s, cp[i]);
            t_expect_due(v, N, cp[i], tk);
        }
        for (size_t i = 0; i < N; i++)
            assert_int_equal(v[i].runs, 1);
        tw_destroy(s);
    }
}

/* many batches at random times, random delays: never early, by + tick */
static void schedule_many_random_batches_fire_in_time(void **state)
{
    (void)state;
    enum { N = 4000 };
    const uint64_t tick = T_MS;
    tw_service *s = t_service(tick, 8, 2);
    t_timer *v = calloc(N, sizeof *v);
    tw_timer *out = calloc(N, sizeof *out);
    uint64_t *d = calloc(N, sizeof *d);
    assert_non_null(v);
    assert_non_null(out);
    assert_non_null(d);
    uint64_t rnd = 0x9e3779b97f4a7c15ull, now = 0;
    size_t armed = 0;
    while (armed < N) {
        rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
        size_t k = 1 + (size_t)(rnd % 40);
        if (k > N - armed)
            k = N - armed;
        for (size_t i = 0; i < k; i++) {
            rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
            uint64_t bits = 4 + (rnd >> 58) % 32;
            d[armed + i] = (rnd & ((1ull << bits) - 1)) % (20 * T_S);
        }
        assert_int_equal(batch_arm(s, v + armed, k, d + armed, out + armed), (int)k);
        armed += k;
        CHECK(s);
        rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
        now += (rnd % 8 == 0) ? rnd % (2 * T_S) : rnd % (3 * tick);
        ADVANCE(s, now);
        t_expect_due(v, armed, now, tick);
    }
    assert_distinct_nonzero(out, N); /* across batches too */
    now += 21 * T_S;
    ADVANCE(s, now);
    t_expect_due(v, N, now, tick);
    for (size_t i = 0; i < N; i++)
        assert_int_equal(v[i].runs, 1);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, N);
    assert_int_equal(st.fired, N);
    ASSERT_STATS_IDENTITY(st);
    free(v);
    free(out);
    free(d);
    tw_destroy(s);
}

typedef struct got {
    tw_timer h;
    void *arg;
    int runs;
} got;

static got g_got[64];
static size_t g_ngot;

static void record_got(tw_timer t, void *arg)
{
    CB_EXPECT(g_ngot < 64, "too many runs");
    if (g_ngot < 64) {
        g_got[g_ngot].h = t;
        g_got[g_ngot].arg = arg;
        g_ngot++;
    }
}

/* "argument args ? args[i] : NULL" (args NULL) */
static void schedule_many_args_null_gives_null_args(void **state)
{
    (void)state;
    enum { N = 20 };
    tw_service *s = t_default();
    uint64_t d[N];
    tw_timer h[N];
    for (size_t i = 0; i < N; i++)
        d[i] = (uint64_t)i * T_MS;
    g_ngot = 0;
    assert_int_equal(tw_schedule_many(s, N, d, record_got, NULL, h), N);
    CHECK(s);
    ADVANCE(s, N * T_MS + T_MS);
    assert_int_equal(g_ngot, N);
    for (size_t i = 0; i < N; i++) {
        assert_null(g_got[i].arg);
        assert_true(g_got[i].h == h[i]); /* delays ascending: run in order */
    }
    tw_destroy(s);
}

/* "argument args ? args[i] : NULL" (args given), "handle into out[i]":
 * element i's callback gets args[i] and out[i]. */
static void schedule_many_gives_args_i_and_out_i_to_element_i(void **state)
{
    (void)state;
    enum { N = 40 };
    tw_service *s = t_default();
    uint64_t d[N];
    tw_timer h[N];
    void *args[N];
    char mark[N];
    for (size_t i = 0; i < N; i++) {
        d[i] = (uint64_t)((i * 17) % N) * T_MS; /* shuffled deadlines */
        args[i] = (i % 5 == 4) ? NULL : &mark[i]; /* NULL elements pass as NULL */
        h[i] = GARBAGE;
    }
    g_ngot = 0;
    assert_int_equal(tw_schedule_many(s, N, d, record_got, args, h), N);
    CHECK(s);
    assert_distinct_nonzero(h, N);
    ADVANCE(s, N * T_MS + T_MS);
    assert_int_equal(g_ngot, N);
    for (size_t r = 0; r < N; r++) {
        size_t i = 0;
        while (i < N && h[i] != g_got[r].h)
            i++;
        if (i == N)
            fail_msg("run %zu got handle %#" PRIx64 ", not one of out[]", r, g_got[r].h);
        assert_ptr_equal(g_got[r].arg, args[i]);
    }
    tw_destroy(s);
}

/* "k < n when element k failed (out[k..n) are 0 and calling again for the
 * rest returns that error)", "the first ones" armed: TW_ERANGE at k. */
static void schedule_many_erange_at_k_arms_the_first_k(void **state)
{
    (void)state;
    enum { N = 10 };
    static const size_t ks[] = {1, 4, N - 1};
    for (size_t c = 0; c < sizeof ks / sizeof ks[0]; c++) {
        size_t k = ks[c];
        tw_service *s = t_default();
        ADVANCE(s, 5 * T_MS + 1);
        uint64_t d[N];
        for (size_t i = 0; i < N; i++)
            d[i] = (uint64_t)(i + 1) * T_MS;
        d[k] = tw_max_delay(s) + 1;
        if (k + 2 < N)
            d[k + 2] = UINT64_MAX; /* a later bad element changes nothing */
        t_timer v[N];
        tw_timer out[N];
        assert_int_equal(batch_arm(s, v, N, d, out), (int)k);
        CHECK(s);
        assert_distinct_nonzero(out, k);
        for (size_t i = k; i < N; i++)
            if (out[i] != 0)
                fail_msg("k %zu: out[%zu] = %#" PRIx64 ", expected 0", k, i, out[i]);
        tw_stats st;
        t_stats(s, &st);
        assert_int_equal(st.scheduled, k);
        assert_int_equal(st.pending, k);
        /* the rest: its first element fails, so the error itself */
        for (size_t i = k; i < N; i++)
            out[i] = GARBAGE;
        ASSERT_RC(tw_schedule_many(s, N - k, d + k, t_noop, NULL, out + k), TW_ERANGE);
        for (size_t i = k; i < N; i++)
            assert_true(out[i] == 0);
        t_stats(s, &st);
        assert_int_equal(st.scheduled, k);
        /* the first k fire, in time; the others were never armed */
        for (size_t i = k; i < N; i++)
            v[i].cancelled = 1; /* "must not run" */
        ADVANCE(s, 5 * T_MS + 1 + (N + 1) * T_MS);
        t_expect_due(v, k, tw_now(s), T_MS);
        for (size_t i = 0; i < k; i++)
            assert_int_equal(v[i].runs, 1);
        t_stats(s, &st);
        assert_int_equal(st.fired, k);
        assert_int_equal(st.pending, 0);
        ASSERT_STATS_IDENTITY(st);
        tw_destroy(s);
    }
}

/* the same, with TW_EAGAIN at k: max_timers reached inside the batch */
static void schedule_many_eagain_at_k_with_max_timers(void **state)
{
    (void)state;
    enum { N = 8 };
    static const uint64_t pre[] = {0, 3, 6}; /* timers pending before the batch */
    for (size_t c = 0; c < sizeof pre / sizeof pre[0]; c++) {
        const uint64_t cap = 7;
        tw_service *s = capped(cap);
        for (uint64_t i = 0; i < pre[c]; i++)
            ASSERT_RC(tw_schedule(s, 50 * T_MS, t_noop, NULL, NULL), TW_OK);
        size_t k = (size_t)(cap - pre[c]);
        uint64_t d[N];
        for (size_t i = 0; i < N; i++)
            d[i] = (uint64_t)(i + 1) * T_MS;
        t_timer v[N];
        tw_timer out[N];
        assert_int_equal(batch_arm(s, v, N, d, out), (int)k);
        CHECK(s);
        assert_distinct_nonzero(out, k);
        for (size_t i = k; i < N; i++)
            if (out[i] != 0)
                fail_msg("pre %" PRIu64 ": out[%zu] = %#" PRIx64 ", expected 0", pre[c], i,
                         out[i]);
        tw_stats st;
        t_stats(s, &st);
        assert_int_equal(st.scheduled, cap);
        assert_int_equal(st.pending, cap);
        for (size_t i = k; i < N; i++)
            out[i] = GARBAGE;
        ASSERT_RC(tw_schedule_many(s, N - k, d + k, t_noop, NULL, out + k), TW_EAGAIN);
        for (size_t i = k; i < N; i++)
            assert_true(out[i] == 0);
        t_stats(s, &st);
        assert_int_equal(st.scheduled, cap);
        for (size_t i = k; i < N; i++)
            v[i].cancelled = 1;
        ADVANCE(s, (N + 1) * T_MS);
        t_expect_due(v, k, tw_now(s), T_MS);
        for (size_t i = 0; i < k; i++)
            assert_int_equal(v[i].runs, 1);
        /* their runs freed k places: that much of the rest now goes in */
        size_t room = (size_t)(cap - pre[c]) < N - k ? (size_t)(cap - pre[c]) : N - k;
        assert_int_equal(tw_schedule_many(s, N - k, d + k, t_noop, NULL, out + k),
                         (int)room);
        CHECK(s);
        tw_destroy(s);
    }
}

/* "a negative code when the first one failed": nothing armed, out zeroed */
static void schedule_many_first_element_failing_returns_its_code(void **state)
{
    (void)state;
    enum { N = 6 };
    tw_service *s = capped(3);
    uint64_t d[N];
    tw_timer out[N];
    for (size_t i = 0; i < N; i++)
        d[i] = T_MS;
    d[0] = tw_max_delay(s) + 1;
    for (size_t i = 0; i < N; i++)
        out[i] = GARBAGE;
    ASSERT_RC(tw_schedule_many(s, N, d, t_noop, NULL, out), TW_ERANGE);
    for (size_t i = 0; i < N; i++)
        assert_true(out[i] == 0);
    d[0] = UINT64_MAX;
    ASSERT_RC(tw_schedule_many(s, N, d, t_noop, NULL, NULL), TW_ERANGE);
    ASSERT_RC(tw_schedule_many(s, 1, d, t_noop, NULL, out), TW_ERANGE);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 0);
    assert_int_equal(st.pending, 0);
    CHECK(s);
    /* the cap full: TW_EAGAIN at element 0 */
    d[0] = T_MS;
    assert_int_equal(tw_schedule_many(s, 3, d, t_noop, NULL, NULL), 3);
    for (size_t i = 0; i < N; i++)
        out[i] = GARBAGE;
    ASSERT_RC(tw_schedule_many(s, N, d, t_noop, NULL, out), TW_EAGAIN);
    for (size_t i = 0; i < N; i++)
        assert_true(out[i] == 0);
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 3);
    assert_int_equal(st.pending, 3);
    CHECK(s);
    ADVANCE(s, 2 * T_MS);
    t_stats(s, &st);
    assert_int_equal(st.fired, 3);
    ASSERT_STATS_IDENTITY(st);
    tw_destroy(s);
}

static int g_dropped;
static void count_dropped(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    g_dropped++;
}

/* errors "as tw_schedule": TW_ESHUTDOWN once tw_stop has started */
static void schedule_many_after_stop_is_eshutdown(void **state)
{
    (void)state;
    enum { N = 5 };
    tw_service *s = t_default();
    uint64_t d[N] = {T_MS, 2 * T_MS, 0, 9 * T_MS, T_S};
    assert_int_equal(tw_schedule_many(s, N, d, t_noop, NULL, NULL), N);
    g_dropped = 0;
    ASSERT_RC(tw_stop(s, count_dropped), TW_OK);
    assert_int_equal(g_dropped, N); /* batch-armed timers are dropped too */
    tw_timer out[N];
    for (size_t i = 0; i < N; i++)
        out[i] = GARBAGE;
    g_ngot = 0;
    ASSERT_RC(tw_schedule_many(s, N, d, record_got, NULL, out), TW_ESHUTDOWN);
    for (size_t i = 0; i < N; i++)
        assert_true(out[i] == 0);
    ASSERT_RC(tw_schedule_many(s, 1, d, record_got, NULL, NULL), TW_ESHUTDOWN);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, N);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.dropped, N);
    ASSERT_RC(tw_advance(s, T_S), TW_ESHUTDOWN);
    assert_int_equal(g_ngot, 0);
    tw_destroy(s);
}

/* "Also: TW_EINVAL (nothing armed) for s or cb NULL, delays_ns NULL with
 * n > 0, or n > INT_MAX" */
static void schedule_many_einval_arms_nothing(void **state)
{
    (void)state;
    tw_service *s = t_default();
    uint64_t d[4] = {T_MS, T_MS, T_MS, T_MS};
    void *args[4] = {NULL, NULL, NULL, NULL};
    tw_timer out[4];
    ASSERT_RC(tw_schedule_many(NULL, 4, d, t_noop, args, out), TW_EINVAL);
    ASSERT_RC(tw_schedule_many(NULL, 4, d, t_noop, NULL, NULL), TW_EINVAL);
    ASSERT_RC(tw_schedule_many(s, 4, d, NULL, args, out), TW_EINVAL);
    ASSERT_RC(tw_schedule_many(s, 4, d, NULL, NULL, NULL), TW_EINVAL);
    ASSERT_RC(tw_schedule_many(s, 4, NULL, t_noop, args, out), TW_EINVAL);
    ASSERT_RC(tw_schedule_many(s, 1, NULL, t_noop, NULL, NULL), TW_EINVAL);
    /* n > INT_MAX: refused before any element is read (the arrays are 4 long) */
    ASSERT_RC(tw_schedule_many(s, (size_t)INT_MAX + 1, d, t_noop, args, out), TW_EINVAL);
    ASSERT_RC(tw_schedule_many(s, SIZE_MAX, d, t_noop, NULL, NULL), TW_EINVAL);
    /* s or cb NULL is refused whatever n is */
    ASSERT_RC(tw_schedule_many(NULL, 0, d, t_noop, NULL, NULL), TW_EINVAL);
    ASSERT_RC(tw_schedule_many(s, 0, d, NULL, NULL, NULL), TW_EINVAL);
    /* n == INT_MAX is not refused as too many; a bad element 0 ends it */
    uint64_t bad = UINT64_MAX;
    ASSERT_RC(tw_schedule_many(s, INT_MAX, &bad, t_noop, NULL, NULL), TW_ERANGE);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 0);
    assert_int_equal(st.pending, 0);
    ADVANCE(s, T_S);
    t_stats(s, &st);
    assert_int_equal(st.fired, 0);
    tw_destroy(s);
}

/* "n == 0 returns 0" (delays, args, out may all be NULL then) */
static void schedule_many_n_zero_returns_zero(void **state)
{
    (void)state;
    tw_service *s = t_default();
    uint64_t d[1] = {T_MS};
    tw_timer out[1] = {GARBAGE};
    assert_int_equal(tw_schedule_many(s, 0, NULL, t_noop, NULL, NULL), 0);
    assert_int_equal(tw_schedule_many(s, 0, d, t_noop, NULL, out), 0);
    assert_true(out[0] == GARBAGE); /* no element: nothing stored */
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 0);
    /* after tw_stop too: there is nothing to refuse */
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    assert_int_equal(tw_schedule_many(s, 0, NULL, t_noop, NULL, NULL), 0);
    tw_destroy(s);
}

/* "out may be NULL (handles not stored)": armed all the same */
static void schedule_many_out_null_arms_all(void **state)
{
    (void)state;
    enum { N = 30 };
    tw_service *s = t_default();
    uint64_t d[N];
    void *args[N];
    int mark[N];
    for (size_t i = 0; i < N; i++) {
        d[i] = (uint64_t)(N - i) * T_MS;
        args[i] = &mark[i];
    }
    g_ngot = 0;
    assert_int_equal(tw_schedule_many(s, N, d, record_got, args, NULL), N);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.pending, N);
    ADVANCE(s, (N + 1) * T_MS);
    assert_int_equal(g_ngot, N);
    tw_timer h[N];
    for (size_t r = 0; r < N; r++) {
        h[r] = g_got[r].h;
        /* descending delays: the last element runs first */
        assert_ptr_equal(g_got[r].arg, args[N - 1 - r]);
    }
    assert_distinct_nonzero(h, N);
    tw_destroy(s);
}

typedef struct walk_deadlines {
    uint64_t *deadline;
    tw_timer *handle;
    size_t n, cap;
} walk_deadlines;

static void collect_deadline(const tw_timer_info *info, void *ctx)
{
    walk_deadlines *w = ctx;
    if (w->n < w->cap) {
        w->deadline[w->n] = info->deadline_ns;
        w->handle[w->n] = info->timer;
    }
    w->n++;
}

/* "delays_ns[i] from one clock reading", on a clock that moves (MONOTONIC,
 * ns resolution): n timers with one delay share one deadline; with distinct
 * delays, deadline - delay is one value, between two tw_now around the call. */
static void schedule_many_reads_the_clock_once(void **state)
{
    (void)state;
    enum { N = 1000 };
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MONOTONIC;
    cfg.workers = 0;
    tw_service *s = t_service_cfg(&cfg);
    uint64_t *d = calloc(N, sizeof *d);
    tw_timer *h = calloc(N, sizeof *h);
    walk_deadlines w = {calloc(N, sizeof(uint64_t)), calloc(N, sizeof(tw_timer)), 0, N};
    assert_non_null(d);
    assert_non_null(h);
    assert_non_null(w.deadline);
    assert_non_null(w.handle);
    for (int round = 0; round < 2; round++) {
        const uint64_t base = 3600 * T_S;
        for (size_t i = 0; i < N; i++)
            d[i] = round == 0 ? base : base + (uint64_t)i * 1001;
        uint64_t before = tw_now(s);
        assert_int_equal(tw_schedule_many(s, N, d, t_noop, NULL, h), N);
        uint64_t after = tw_now(s);
        w.n = 0;
        assert_int_equal(tw_foreach_pending(s, collect_deadline, &w), N);
        assert_int_equal(w.n, N);
        uint64_t reading = 0;
        for (size_t r = 0; r < N; r++) {
            size_t i = 0;
            while (i < N && h[i] != w.handle[r])
                i++;
            if (i == N)
                fail_msg("walk reported %#" PRIx64 ", not armed", w.handle[r]);
            uint64_t at = w.deadline[r] - d[i];
            if (r == 0)
                reading = at;
            if (at != reading)
                fail_msg("round %d: element %zu armed at %" PRIu64 ", another at %" PRIu64
                         " (two clock readings)", round, i, at, reading);
        }
        if (reading < before || reading > after)
            fail_msg("clock reading %" PRIu64 " outside [%" PRIu64 ", %" PRIu64 "]", reading,
                     before, after);
        assert_int_equal(tw_cancel_many(s, N, h, NULL), N);
    }
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    free(d);
    free(h);
    free(w.deadline);
    free(w.handle);
    tw_destroy(s);
}

typedef struct in_cb {
    tw_service *s;
    tw_timer others[3];
    int rcs[4];
    int ok;
    int armed;
    tw_timer self;
    int runs;
} in_cb;

static void batch_inside(tw_timer t, void *arg)
{
    in_cb *x = arg;
    x->runs++;
    x->self = t;
    uint64_t d[2] = {0, T_MS};
    x->armed = tw_schedule_many(x->s, 2, d, t_noop, NULL, NULL);
    tw_timer hs[4] = {x->others[0], t, x->others[1], x->others[2]};
    x->ok = tw_cancel_many(x->s, 4, hs, x->rcs);
}

/* The table: both from callbacks, a cancel of the running one-shot itself
 * included (TW_ENOENT: it has started). */
static void batches_from_a_callback(void **state)
{
    (void)state;
    tw_service *s = t_default();
    in_cb x = {.s = s};
    tw_timer self;
    ASSERT_RC(tw_schedule(s, T_MS, batch_inside, &x, &self), TW_OK);
    uint64_t d[3] = {5 * T_MS, 6 * T_MS, 7 * T_MS};
    assert_int_equal(tw_schedule_many(s, 3, d, t_noop, NULL, x.others), 3);
    ASSERT_RC(tw_cancel(s, x.others[2]), TW_OK);
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(x.runs, 1);
    assert_true(x.self == self);
    assert_int_equal(x.armed, 2);
    assert_int_equal(x.ok, 2);
    ASSERT_RC(x.rcs[0], TW_OK);
    ASSERT_RC(x.rcs[1], TW_ENOENT);
    ASSERT_RC(x.rcs[2], TW_OK);
    ASSERT_RC(x.rcs[3], TW_ENOENT);
    ADVANCE(s, 20 * T_MS);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 6);
    assert_int_equal(st.cancelled, 3);
    assert_int_equal(st.fired, 3); /* batch_inside and the two it armed */
    ASSERT_STATS_IDENTITY(st);
    tw_destroy(s);
}

/* ---- tw_cancel_many ------------------------------------------------------ */

static tw_timer reuse_of(tw_service *s, tw_timer old, tw_timer *extra, size_t *nextra)
{
    /* arm until a timer takes old's record: old is then stale */
    for (int i = 0; i < 10000; i++) {
        tw_timer h;
        ASSERT_RC(tw_schedule(s, 40 * T_MS, t_noop, NULL, &h), TW_OK);
        if (tw__handle_idx(h) == tw__handle_idx(old)) {
            assert_true(h != old);
            return h;
        }
        extra[(*nextra)++] = h;
    }
    fail_msg("no timer reused the record of %#" PRIx64, old);
    return 0;
}

/* "cancels n handles, stores each result in rcs[i] ..., and returns how many
 * returned TW_OK": each handle answered as tw_cancel would. */
static void cancel_many_stores_each_result_and_counts_ok(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer p0, p1, fired, cancelled, stale_src;
    t_arm(s, &p0, 10 * T_MS);
    t_arm(s, &p1, 11 * T_MS);
    t_arm(s, &fired, 1 * T_MS);
    t_arm(s, &cancelled, 12 * T_MS);
    t_arm(s, &stale_src, 13 * T_MS);
    tw_timer per;
    ASSERT_RC(tw_schedule_every(s, 2 * T_MS, 3 * T_MS, t_noop, NULL, &per), TW_OK);
    ADVANCE(s, 2 * T_MS); /* fired runs */
    assert_int_equal(fired.runs, 1);
    ASSERT_RC(tw_cancel(s, cancelled.h), TW_OK);
    cancelled.cancelled = 1;
    ASSERT_RC(tw_cancel(s, stale_src.h), TW_OK);
    stale_src.cancelled = 1;
    tw_timer extra[10000];
    size_t nextra = 0;
    tw_timer reused = reuse_of(s, stale_src.h, extra, &nextra);
    const tw_timer hs[] = {
        p0.h,             /* TW_OK */
        0,                /* TW_ENOENT: 0 */
        stale_src.h,      /* TW_ENOENT: stale (its record holds `reused`) */
        fired.h,          /* TW_ENOENT: fired */
        cancelled.h,      /* TW_ENOENT: already cancelled */
        per,              /* TW_OK: periodic, after a run */
        p0.h,             /* TW_ENOENT: cancelled by this very call */
        ~0ull,            /* TW_ENOENT: no such record */
        p1.h,             /* TW_OK */
    };
    static const int want[] = {TW_OK, TW_ENOENT, TW_ENOENT, TW_ENOENT, TW_ENOENT,
                               TW_OK, TW_ENOENT, TW_ENOENT, TW_OK};
    enum { N = sizeof hs / sizeof hs[0] };
    int rcs[N];
    for (size_t i = 0; i < N; i++)
        rcs[i] = 12345;
    tw_stats st0, st;
    t_stats(s, &st0);
    assert_int_equal(tw_cancel_many(s, N, hs, rcs), 3);
    p0.cancelled = p1.cancelled = 1;
    for (size_t i = 0; i < N; i++)
        if (rcs[i] != want[i])
            fail_msg("rcs[%zu] = %s (%d), expected %s", i, t_code(rcs[i]), rcs[i],
                     t_code(want[i]));
    CHECK(s);
    t_stats(s, &st);
    assert_int_equal(st.cancelled, st0.cancelled + 3);
    /* the stale handle did not touch the timer that reuses its record */
    ASSERT_RC(tw_cancel(s, reused), TW_OK);
    ADVANCE(s, 100 * T_MS);
    t_timer *all[] = {&p0, &p1, &fired, &cancelled, &stale_src};
    for (size_t i = 0; i < 5; i++)
        t_expect_due(all[i], 1, tw_now(s), T_MS);
    assert_int_equal(fired.runs, 1);
    t_stats(s, &st);
    assert_int_equal(st.fired, 1 + 1 + nextra); /* fired, per's one run, extras */
    assert_int_equal(st.cancelled, st0.cancelled + 3 + 1);
    assert_int_equal(st.pending, 0);
    tw_destroy(s);
}

/* "when rcs is not NULL": rcs NULL, same effect and count */
static void cancel_many_rcs_null(void **state)
{
    (void)state;
    enum { N = 50 };
    tw_service *s = t_default();
    t_timer v[N];
    tw_timer hs[N + 2];
    for (size_t i = 0; i < N; i++) {
        t_arm(s, &v[i], (uint64_t)(i + 1) * T_MS);
        hs[i] = v[i].h;
    }
    hs[N] = 0;
    hs[N + 1] = v[3].h; /* twice */
    ADVANCE(s, 10 * T_MS); /* v[0..9] fired */
    assert_int_equal(tw_cancel_many(s, N + 2, hs, NULL), N - 10);
    for (size_t i = 10; i < N; i++)
        v[i].cancelled = 1;
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.cancelled, N - 10);
    assert_int_equal(st.pending, 0);
    ADVANCE(s, 100 * T_MS);
    t_expect_due(v, N, tw_now(s), T_MS);
    ASSERT_STATS_IDENTITY(st);
    tw_destroy(s);
}

/* "TW_EINVAL for s NULL or (n > 0 and handles NULL)", "Also: ... for
 * n > INT_MAX too": nothing cancelled, rcs untouched */
static void cancel_many_einval_cancels_nothing(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer v[2];
    t_arm(s, &v[0], T_MS);
    t_arm(s, &v[1], 2 * T_MS);
    tw_timer hs[2] = {v[0].h, v[1].h};
    int rcs[2] = {777, 777};
    ASSERT_RC(tw_cancel_many(NULL, 2, hs, rcs), TW_EINVAL);
    ASSERT_RC(tw_cancel_many(NULL, 2, hs, NULL), TW_EINVAL);
    ASSERT_RC(tw_cancel_many(NULL, 0, hs, rcs), TW_EINVAL);
    ASSERT_RC(tw_cancel_many(NULL, 0, NULL, NULL), TW_EINVAL);
    ASSERT_RC(tw_cancel_many(s, 2, NULL, rcs), TW_EINVAL);
    ASSERT_RC(tw_cancel_many(s, 1, NULL, NULL), TW_EINVAL);
    ASSERT_RC(tw_cancel_many(s, (size_t)INT_MAX + 1, hs, rcs), TW_EINVAL);
    ASSERT_RC(tw_cancel_many(s, SIZE_MAX, hs, NULL), TW_EINVAL);
    assert_int_equal(rcs[0], 777);
    assert_int_equal(rcs[1], 777);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.cancelled, 0);
    assert_int_equal(st.pending, 2);
    ADVANCE(s, 3 * T_MS);
    assert_int_equal(v[0].runs, 1);
    assert_int_equal(v[1].runs, 1);
    tw_destroy(s);
}

/* n == 0: 0, with handles and rcs NULL too */
static void cancel_many_n_zero_returns_zero(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, T_MS);
    int rcs[1] = {777};
    assert_int_equal(tw_cancel_many(s, 0, NULL, NULL), 0);
    assert_int_equal(tw_cancel_many(s, 0, NULL, rcs), 0);
    assert_int_equal(tw_cancel_many(s, 0, &x.h, rcs), 0);
    assert_int_equal(rcs[0], 777);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.cancelled, 0);
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(x.runs, 1);
    tw_destroy(s);
}

/* "returns how many returned TW_OK": a random half of many, mixed with
 * fired ones; the cancelled never run, stats.cancelled counts exactly */
static void cancel_many_cancelled_never_run_and_stats_count_exactly(void **state)
{
    (void)state;
    enum { N = 3000 };
    tw_service *s = t_service(T_MS, 16, 2);
    t_timer *v = calloc(N, sizeof *v);
    uint64_t *d = calloc(N, sizeof *d);
    tw_timer *out = calloc(N, sizeof *out);
    tw_timer *hs = calloc(N, sizeof *hs);
    int *rcs = calloc(N, sizeof *rcs);
    size_t *which = calloc(N, sizeof *which);
    assert_true(v && d && out && hs && rcs && which);
    uint64_t rnd = 0x2545f4914f6cdd1dull;
    for (size_t i = 0; i < N; i++) {
        rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
        d[i] = rnd % (2 * T_S);
    }
    assert_int_equal(batch_arm(s, v, N, d, out), N);
    uint64_t now = 0, cancelled = 0;
    for (int round = 0; round < 20; round++) {
        size_t n = 0;
        uint64_t expect_ok = 0;
        for (size_t i = 0; i < N; i++) {
            rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
            if (rnd % 16 == 0) {
                hs[n] = v[i].h;
                which[n++] = i;
                expect_ok += !v[i].cancelled && v[i].runs == 0;
            }
        }
        for (size_t j = 0; j < n; j++)
            rcs[j] = 12345;
        int ok = tw_cancel_many(s, n, hs, round % 2 ? rcs : NULL);
        assert_int_equal(ok, expect_ok);
        for (size_t j = 0; j < n; j++) {
            t_timer *x = &v[which[j]];
            int want = !x->cancelled && x->runs == 0 ? TW_OK : TW_ENOENT;
            if (round % 2 && rcs[j] != want)
                fail_msg("round %d: rcs[%zu] = %s, expected %s", round, j, t_code(rcs[j]),
                         t_code(want));
            if (want == TW_OK)
                x->cancelled = 1;
        }
        cancelled += (uint64_t)ok;
        CHECK(s);
        tw_stats st;
        t_stats(s, &st);
        assert_int_equal(st.cancelled, cancelled);
        now += 100 * T_MS;
        ADVANCE(s, now);
        t_expect_due(v, N, now, T_MS);
    }
    ADVANCE(s, now + 3 * T_S);
    t_expect_due(v, N, tw_now(s), T_MS);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.cancelled, cancelled);
    assert_int_equal(st.fired, N - cancelled);
    assert_int_equal(st.pending, 0);
    ASSERT_STATS_IDENTITY(st);
    free(v);
    free(d);
    free(out);
    free(hs);
    free(rcs);
    free(which);
    tw_destroy(s);
}

/* after tw_stop every timer was handed to on_pending: each is TW_ENOENT */
static void cancel_many_after_stop_is_enoent_each(void **state)
{
    (void)state;
    enum { N = 4 };
    tw_service *s = t_default();
    uint64_t d[N] = {T_MS, 2 * T_MS, 3 * T_MS, 4 * T_MS};
    tw_timer h[N];
    assert_int_equal(tw_schedule_many(s, N, d, t_noop, NULL, h), N);
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    int rcs[N] = {1, 1, 1, 1};
    assert_int_equal(tw_cancel_many(s, N, h, rcs), 0);
    for (size_t i = 0; i < N; i++)
        ASSERT_RC(rcs[i], TW_ENOENT);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.cancelled, 0);
    assert_int_equal(st.dropped, N);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(schedule_many_arms_n_with_distinct_nonzero_handles, setup),
        cmocka_unit_test_setup(schedule_many_each_fires_at_now_plus_its_delay, setup),
        cmocka_unit_test_setup(schedule_many_random_batches_fire_in_time, setup),
        cmocka_unit_test_setup(schedule_many_args_null_gives_null_args, setup),
        cmocka_unit_test_setup(schedule_many_gives_args_i_and_out_i_to_element_i, setup),
        cmocka_unit_test_setup(schedule_many_erange_at_k_arms_the_first_k, setup),
        cmocka_unit_test_setup(schedule_many_eagain_at_k_with_max_timers, setup),
        cmocka_unit_test_setup(schedule_many_first_element_failing_returns_its_code, setup),
        cmocka_unit_test_setup(schedule_many_after_stop_is_eshutdown, setup),
        cmocka_unit_test_setup(schedule_many_einval_arms_nothing, setup),
        cmocka_unit_test_setup(schedule_many_n_zero_returns_zero, setup),
        cmocka_unit_test_setup(schedule_many_out_null_arms_all, setup),
        cmocka_unit_test_setup(schedule_many_reads_the_clock_once, setup),
        cmocka_unit_test_setup(batches_from_a_callback, setup),
        cmocka_unit_test_setup(cancel_many_stores_each_result_and_counts_ok, setup),
        cmocka_unit_test_setup(cancel_many_rcs_null, setup),
        cmocka_unit_test_setup(cancel_many_einval_cancels_nothing, setup),
        cmocka_unit_test_setup(cancel_many_n_zero_returns_zero, setup),
        cmocka_unit_test_setup(cancel_many_cancelled_never_run_and_stats_count_exactly,
                               setup),
        cmocka_unit_test_setup(cancel_many_after_stop_is_enoent_each, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
