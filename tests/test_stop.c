/* test_stop.c: tw_stop, on_pending, tw_destroy, the stats identity. */
#include "tw_test.h"

#include <pthread.h>

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    t_seq = 0;
    return 0;
}

/* what on_pending received */
enum { MAXP = 4096 };
static struct {
    tw_timer h;
    void *arg;
} g_pend[MAXP];
static int g_npend;
static int g_pend_wrong_thread;
static pthread_t g_stopper;

static void on_pending(tw_timer t, void *arg)
{
    if (!pthread_equal(pthread_self(), g_stopper))
        g_pend_wrong_thread++;
    if (g_npend < MAXP) {
        g_pend[g_npend].h = t;
        g_pend[g_npend].arg = arg;
    }
    g_npend++;
}

static int stop(tw_service *s)
{
    g_npend = 0;
    g_pend_wrong_thread = 0;
    g_stopper = pthread_self();
    return tw_stop(s, on_pending);
}

/* how many times on_pending got (h, arg) */
static int pend_count(tw_timer h, const void *arg)
{
    int n = 0;
    for (int i = 0; i < g_npend && i < MAXP; i++)
        if (g_pend[i].h == h) {
            if (g_pend[i].arg != arg)
                fail_msg("on_pending got handle %#" PRIx64 " with the wrong arg", h);
            n++;
        }
    return n;
}

static int g_per_runs;
static void per_count(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    g_per_runs++;
}

static void on_pending_gets_every_pending_timer_exactly_once_with_its_arg(void **state)
{
    (void)state;
    enum { N = 400 };
    tw_service *s = t_service(T_MS, 4, 1);
    t_timer *v = calloc(N, sizeof *v);
    assert_non_null(v);
    /* i % 5: 0 fires, 1 cancelled, 2 pending far (upper levels),
     * 3 pending near, 4 rescheduled (pending) */
    for (int i = 0; i < N; i++) {
        uint64_t delay;
        switch (i % 5) {
        case 0: delay = (uint64_t)(i % 7 + 1) * T_MS; break;
        case 1: delay = (uint64_t)i * T_S; break;
        case 2: delay = ((uint64_t)1 << (i % 30)) * T_S + (uint64_t)i; break;
        case 3: delay = 30 * T_MS + (uint64_t)i; break;
        default: delay = 2 * T_MS; break;
        }
        t_arm(s, &v[i], delay);
    }
    g_per_runs = 0;
    tw_timer per = 0;
    int per_arg;
    ASSERT_RC(tw_schedule_every(s, T_MS, 4 * T_MS, per_count, &per_arg, &per), TW_OK);
    for (int i = 1; i < N; i += 5) {
        ASSERT_RC(tw_cancel(s, v[i].h), TW_OK);
        v[i].cancelled = 1;
    }
    for (int i = 4; i < N; i += 5) {
        ASSERT_RC(tw_reschedule(s, v[i].h, 100 * T_S), TW_OK);
        v[i].deadline = 100 * T_S;
    }
    CHECK(s);
    for (uint64_t now = T_MS; now <= 10 * T_MS; now += T_MS)
        ADVANCE(s, now);
    t_expect_due(v, N, 10 * T_MS, T_MS);
    assert_int_equal(g_per_runs, 3); /* at 1, 5 and 9 ms */
    ASSERT_RC(stop(s), TW_OK);
    CHECK(s);
    assert_int_equal(g_pend_wrong_thread, 0);
    int want = 0;
    for (int i = 0; i < N; i++) {
        int c = pend_count(v[i].h, &v[i]);
        int pending = (i % 5 == 2 || i % 5 == 3 || i % 5 == 4);
        if (c != pending)
            fail_msg("timer %d (kind %d): handed to on_pending %d times, expected %d", i,
                     i % 5, c, pending);
        if (i % 5 == 0)
            assert_int_equal(v[i].runs, 1);
        else
            assert_int_equal(v[i].runs, 0);
        want += pending;
    }
    /* the periodic timer was dropped too */
    assert_int_equal(pend_count(per, &per_arg), 1);
    want++;
    assert_int_equal(g_npend, want);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.dropped, (uint64_t)want);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.cancelled, N / 5);
    free(v);
    tw_destroy(s);
}

static void after_stop_calls_eshutdown_or_enoent(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x, y;
    t_arm(s, &x, 5 * T_MS);
    t_arm(s, &y, T_MS);
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(y.runs, 1);
    ASSERT_RC(stop(s), TW_OK);
    assert_int_equal(g_npend, 1);
    tw_timer h = 777;
    ASSERT_RC(tw_schedule(s, T_MS, t_noop, NULL, &h), TW_ESHUTDOWN);
    ASSERT_RC(tw_schedule_every(s, T_MS, T_MS, t_noop, NULL, &h), TW_ESHUTDOWN);
    assert_true(h == 777);
    ASSERT_RC(tw_reschedule(s, x.h, T_MS), TW_ESHUTDOWN);
    ASSERT_RC(tw_advance(s, 10 * T_MS), TW_ESHUTDOWN);
    ASSERT_RC(tw_cancel(s, x.h), TW_ENOENT); /* it was handed to on_pending */
    ASSERT_RC(tw_cancel_sync(s, x.h), TW_ENOENT);
    ASSERT_RC(tw_cancel(s, y.h), TW_ENOENT);
    assert_true(tw_now(s) == 2 * T_MS);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 2);
    assert_int_equal(st.fired, 1);
    assert_int_equal(st.dropped, 1);
    assert_int_equal(st.cancelled, 0);
    assert_int_equal(x.runs, 0);
    tw_destroy(s);
}

static void stop_idempotent(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, 5 * T_MS);
    ASSERT_RC(stop(s), TW_OK);
    assert_int_equal(g_npend, 1);
    ASSERT_RC(stop(s), TW_OK);
    assert_int_equal(g_npend, 0); /* nothing is handed over twice */
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.dropped, 1);
    tw_destroy(s);
}

static void stop_empty_service(void **state)
{
    (void)state;
    tw_service *s = t_default();
    ASSERT_RC(stop(s), TW_OK);
    assert_int_equal(g_npend, 0);
    tw_destroy(s);
}

typedef struct stopper {
    tw_service *s;
    int rc;
    int runs;
} stopper;

static void stop_inside(tw_timer t, void *arg)
{
    (void)t;
    stopper *x = arg;
    x->runs++;
    x->rc = tw_stop(x->s, on_pending);
}

static void stop_from_callback_is_edeadlk(void **state)
{
    (void)state;
    tw_service *s = t_default();
    stopper x = {.s = s, .rc = 99};
    t_timer later;
    ASSERT_RC(tw_schedule(s, T_MS, stop_inside, &x, NULL), TW_OK);
    t_arm(s, &later, 3 * T_MS);
    g_npend = 0;
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(x.runs, 1);
    ASSERT_RC(x.rc, TW_EDEADLK);
    assert_int_equal(g_npend, 0);
    /* nothing was stopped */
    t_timer more;
    t_arm(s, &more, T_MS);
    ADVANCE(s, 4 * T_MS);
    assert_int_equal(later.runs, 1);
    assert_int_equal(more.runs, 1);
    tw_destroy(s);
}

static void destroy_without_stop(void **state)
{
    (void)state;
    tw_service *s = t_service(T_MS, 2, 1);
    for (int i = 0; i < 1000; i++)
        ASSERT_RC(tw_schedule(s, (uint64_t)i * T_MS, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule_every(s, 0, T_MS, t_noop, NULL, NULL), TW_OK);
    ADVANCE(s, 500 * T_MS);
    tw_destroy(s); /* stops, discards the rest, frees everything */
}

static void stop_with_null_on_pending_discards(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer v[10];
    for (int i = 0; i < 10; i++)
        t_arm(s, &v[i], (uint64_t)(i + 1) * T_MS);
    ADVANCE(s, 5 * T_MS);
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.fired, 5);
    ASSERT_STATS_IDENTITY(st);
    ASSERT_RC(tw_advance(s, 20 * T_MS), TW_ESHUTDOWN);
    for (int i = 5; i < 10; i++)
        assert_int_equal(v[i].runs, 0);
    tw_destroy(s);
}

/* one-shots only: scheduled == fired + cancelled + dropped + pending after
 * every step, and each counter matches what the test did */
static void stats_identity(void **state)
{
    (void)state;
    enum { N = 2000 };
    tw_service *s = t_service(T_MS, 8, 2);
    t_timer *v = calloc(N, sizeof *v);
    assert_non_null(v);
    uint64_t rnd = 99, now = 0, fired = 0, cancelled = 0, resched = 0;
    int armed = 0;
    for (int step = 0; step < 6000; step++) {
        rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t r = rnd >> 33;
        switch (r % 4) {
        case 0:
            if (armed < N) {
                t_arm(s, &v[armed], (r >> 4) % (2 * T_S));
                armed++;
            }
            break;
        case 1:
            if (armed > 0) {
                t_timer *x = &v[(r >> 4) % (uint64_t)armed];
                int want = (x->runs == 0 && !x->cancelled) ? TW_OK : TW_ENOENT;
                ASSERT_RC(tw_cancel(s, x->h), want);
                if (want == TW_OK) {
                    x->cancelled = 1;
                    cancelled++;
                }
            }
            break;
        case 2:
            if (armed > 0) {
                t_timer *x = &v[(r >> 4) % (uint64_t)armed];
                int want = (x->runs == 0 && !x->cancelled) ? TW_OK : TW_ENOENT;
                uint64_t delay = (r >> 12) % T_S;
                ASSERT_RC(tw_reschedule(s, x->h, delay), want);
                if (want == TW_OK) {
                    x->deadline = now + delay;
                    resched++;
                }
            }
            break;
        default:
            now += (r >> 4) % (20 * T_MS);
            ADVANCE(s, now);
            t_expect_due(v, (size_t)armed, now, T_MS);
            break;
        }
        CHECK(s);
        fired = 0;
        uint64_t pending = 0;
        for (int i = 0; i < armed; i++) {
            fired += (uint64_t)v[i].runs;
            pending += (v[i].runs == 0 && !v[i].cancelled);
        }
        tw_stats st;
        t_stats(s, &st);
        ASSERT_STATS_IDENTITY(st);
        assert_int_equal(st.scheduled, (uint64_t)armed);
        assert_int_equal(st.fired, fired);
        assert_int_equal(st.cancelled, cancelled);
        assert_int_equal(st.rescheduled, resched);
        assert_int_equal(st.pending, pending);
        assert_int_equal(st.dropped, 0);
    }
    ASSERT_RC(stop(s), TW_OK);
    tw_stats st;
    t_stats(s, &st);
    ASSERT_STATS_IDENTITY(st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.dropped, (uint64_t)g_npend);
    for (int i = 0; i < armed; i++) {
        int c = pend_count(v[i].h, &v[i]);
        assert_int_equal(c + v[i].runs + v[i].cancelled, 1); /* exactly once */
    }
    free(v);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(on_pending_gets_every_pending_timer_exactly_once_with_its_arg,
                               setup),
        cmocka_unit_test_setup(after_stop_calls_eshutdown_or_enoent, setup),
        cmocka_unit_test_setup(stop_idempotent, setup),
        cmocka_unit_test_setup(stop_empty_service, setup),
        cmocka_unit_test_setup(stop_from_callback_is_edeadlk, setup),
        cmocka_unit_test_setup(destroy_without_stop, setup),
        cmocka_unit_test_setup(stop_with_null_on_pending_discards, setup),
        cmocka_unit_test_setup(stats_identity, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
