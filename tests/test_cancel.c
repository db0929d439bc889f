/* test_cancel.c: tw_cancel / tw_cancel_sync; exactly once, stale handles. */
#include "tw_test.h"

#include <pthread.h>

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    t_seq = 0;
    return 0;
}

static void cancel_pending_is_ok_and_never_fires(void **state)
{
    (void)state;
    static const uint64_t delays[] = {0, 1, T_MS, 5 * T_MS + 3, 300 * T_MS,
                                      70 * T_S, 86400 * T_S, (1ull << 40) * T_MS};
    enum { N = sizeof delays / sizeof delays[0] };
    tw_service *s = t_service(T_MS, 16, 2);
    t_timer v[N], keep[N];
    for (size_t i = 0; i < N; i++) {
        t_arm(s, &v[i], delays[i]);
        t_arm(s, &keep[i], delays[i]);
    }
    for (size_t i = 0; i < N; i++) {
        ASSERT_RC(tw_cancel(s, v[i].h), TW_OK);
        v[i].cancelled = 1;
        CHECK(s);
    }
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.cancelled, N);
    assert_int_equal(st.pending, N);
    uint64_t now = 0;
    for (int k = 0; k < 30; k++) {
        now += (k < 10) ? T_MS : (1ull << 36) * T_MS;
        ADVANCE(s, now);
        t_expect_due(v, N, now, T_MS);
        t_expect_due(keep, N, now, T_MS);
    }
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(v[i].runs, 0);
        assert_int_equal(keep[i].runs, 1);
    }
    t_stats(s, &st);
    assert_int_equal(st.fired, N);
    assert_int_equal(st.pending, 0);
    ASSERT_STATS_IDENTITY(st);
    tw_destroy(s);
}

static void cancel_twice_is_enoent(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, 3 * T_MS);
    ASSERT_RC(tw_cancel(s, x.h), TW_OK);
    x.cancelled = 1;
    CHECK(s);
    ASSERT_RC(tw_cancel(s, x.h), TW_ENOENT);
    ASSERT_RC(tw_cancel_sync(s, x.h), TW_ENOENT);
    ASSERT_RC(tw_reschedule(s, x.h, T_MS), TW_ENOENT);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.cancelled, 1);
    assert_int_equal(st.rescheduled, 0);
    ADVANCE(s, T_S);
    assert_int_equal(x.runs, 0);
    tw_destroy(s);
}

static void cancel_after_fire_is_enoent(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, 2 * T_MS);
    ADVANCE(s, 3 * T_MS);
    assert_int_equal(x.runs, 1);
    ASSERT_RC(tw_cancel(s, x.h), TW_ENOENT);
    ASSERT_RC(tw_cancel_sync(s, x.h), TW_ENOENT);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.cancelled, 0);
    assert_int_equal(st.fired, 1);
    tw_destroy(s);
}

/* stale handles: their record now holds another timer, which stays intact */
static void stale_handle_is_enoent(void **state)
{
    (void)state;
    enum { N = 64 };
    tw_service *s = t_service(T_MS, 8, 1);
    t_timer old[N], fresh[N];
    for (int i = 0; i < N; i++)
        t_arm(s, &old[i], (uint64_t)(i % 4 + 1) * T_MS);
    for (int i = 0; i < N; i += 2) {
        ASSERT_RC(tw_cancel(s, old[i].h), TW_OK);
        old[i].cancelled = 1;
    }
    ADVANCE(s, 10 * T_MS); /* the odd ones fire */
    t_expect_due(old, N, 10 * T_MS, T_MS);
    /* every record is free again; new timers take them */
    for (int i = 0; i < N; i++)
        t_arm(s, &fresh[i], 10 * T_MS); /* due at 20 ms */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            assert_true(fresh[i].h != old[j].h);
    for (int i = 0; i < N; i++) {
        ASSERT_RC(tw_cancel(s, old[i].h), TW_ENOENT);
        ASSERT_RC(tw_cancel_sync(s, old[i].h), TW_ENOENT);
        ASSERT_RC(tw_reschedule(s, old[i].h, 1 * T_MS), TW_ENOENT);
        CHECK(s);
    }
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.pending, N);
    assert_int_equal(st.cancelled, N / 2);
    assert_int_equal(st.rescheduled, 0);
    /* the fresh timers were not moved by the stale reschedules */
    ADVANCE(s, 20 * T_MS - 1);
    for (int i = 0; i < N; i++)
        assert_int_equal(fresh[i].runs, 0);
    ADVANCE(s, 21 * T_MS);
    t_expect_due(fresh, N, 21 * T_MS, T_MS);
    for (int i = 0; i < N; i++)
        assert_int_equal(fresh[i].runs, 1);
    tw_destroy(s);
}

static void zero_handle_is_enoent(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, 5 * T_MS);
    ASSERT_RC(tw_cancel(s, 0), TW_ENOENT);
    ASSERT_RC(tw_cancel_sync(s, 0), TW_ENOENT);
    ASSERT_RC(tw_reschedule(s, 0, T_MS), TW_ENOENT);
    CHECK(s);
    ADVANCE(s, 5 * T_MS - 1);
    assert_int_equal(x.runs, 0);
    ADVANCE(s, 6 * T_MS);
    assert_int_equal(x.runs, 1);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.cancelled, 0);
    assert_int_equal(st.rescheduled, 0);
    tw_destroy(s);
}

static void garbage_handles_are_enoent(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, 5 * T_MS);
    const tw_timer bad[] = {
        UINT64_MAX,
        x.h ^ (1ull << 32),          /* same record, other generation */
        x.h + (1ull << 32),
        x.h - (1ull << 32),
        (x.h & 0xffffffff00000000ull) | 0x7ffffff0u, /* never allocated */
        (x.h & 0xffffffff00000000ull) | 0xffffffffu,
        (x.h & 0xffffffff00000000ull) | ((x.h + 1) & 0xffffffffu),
        x.h & 0xffffffffu,           /* generation 0 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (bad[i] == x.h)
            continue;
        ASSERT_RC(tw_cancel(s, bad[i]), TW_ENOENT);
        ASSERT_RC(tw_cancel_sync(s, bad[i]), TW_ENOENT);
        ASSERT_RC(tw_reschedule(s, bad[i], 100 * T_MS), TW_ENOENT);
        CHECK(s);
    }
    ADVANCE(s, 6 * T_MS);
    assert_int_equal(x.runs, 1);
    tw_destroy(s);
}

/* Two services: a handle of one is refused by the other, which keeps its
 * own timers intact (even when the two handles have the same index). */
static void other_service_handle_is_enoent(void **state)
{
    (void)state;
    tw_service *a = t_default();
    tw_service *b = t_default();
    t_timer xa, xb;
    t_arm(a, &xa, 5 * T_MS);
    t_arm(b, &xb, 5 * T_MS);
    if (xa.h == xb.h)
        fail_msg("two services handed out the same handle %#" PRIx64
                 ": a handle of one service cannot be refused by the other", xa.h);
    ASSERT_RC(tw_cancel(b, xa.h), TW_ENOENT);
    ASSERT_RC(tw_cancel_sync(b, xa.h), TW_ENOENT);
    ASSERT_RC(tw_reschedule(b, xa.h, 50 * T_MS), TW_ENOENT);
    ASSERT_RC(tw_cancel(a, xb.h), TW_ENOENT);
    CHECK(a);
    CHECK(b);
    ADVANCE(a, 6 * T_MS);
    ADVANCE(b, 6 * T_MS);
    assert_int_equal(xa.runs, 1);
    assert_int_equal(xb.runs, 1);
    tw_destroy(a);
    tw_destroy(b);
}

/* a service that never allocated a record refuses every foreign handle */
static void other_service_handle_unknown_index_is_enoent(void **state)
{
    (void)state;
    tw_service *a = t_default();
    tw_service *b = t_default();
    t_timer xa;
    t_arm(a, &xa, 5 * T_MS);
    ASSERT_RC(tw_cancel(b, xa.h), TW_ENOENT);
    ASSERT_RC(tw_reschedule(b, xa.h, T_MS), TW_ENOENT);
    CHECK(b);
    ADVANCE(a, 6 * T_MS);
    assert_int_equal(xa.runs, 1);
    tw_destroy(a);
    tw_destroy(b);
}

typedef struct self_op {
    tw_service *s;
    tw_timer h;
    int runs;
    int stop_at;     /* run number at which the operation is made */
    int rc_cancel;
    int rc_cancel2;
    int rc_sync;
    int rc_resched;
    uint64_t last_now;
} self_op;

static void cancel_self(tw_timer t, void *arg)
{
    self_op *x = arg;
    CB_EXPECT(t == x->h, "handle mismatch");
    x->runs++;
    x->last_now = tw_now(x->s);
    if (x->runs == x->stop_at) {
        x->rc_cancel = tw_cancel(x->s, t);
        x->rc_cancel2 = tw_cancel(x->s, t);
        x->rc_resched = tw_reschedule(x->s, t, T_MS);
    }
}

static void cancel_from_own_callback_oneshot_is_enoent(void **state)
{
    (void)state;
    tw_service *s = t_default();
    self_op x = {.s = s, .stop_at = 1, .rc_cancel = 99};
    ASSERT_RC(tw_schedule(s, 2 * T_MS, cancel_self, &x, &x.h), TW_OK);
    CHECK(s);
    ADVANCE(s, 3 * T_MS);
    assert_int_equal(x.runs, 1);
    ASSERT_RC(x.rc_cancel, TW_ENOENT);   /* it had started */
    ASSERT_RC(x.rc_cancel2, TW_ENOENT);
    ASSERT_RC(x.rc_resched, TW_ENOENT);  /* a running one-shot is not pending */
    ADVANCE(s, 100 * T_MS);
    assert_int_equal(x.runs, 1);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, 1);
    assert_int_equal(st.cancelled, 0);
    assert_int_equal(st.pending, 0);
    ASSERT_STATS_IDENTITY(st);
    tw_destroy(s);
}

static void cancel_periodic_from_own_callback_stops_it(void **state)
{
    (void)state;
    tw_service *s = t_default();
    self_op x = {.s = s, .stop_at = 3, .rc_cancel = 99};
    ASSERT_RC(tw_schedule_every(s, T_MS, 2 * T_MS, cancel_self, &x, &x.h), TW_OK);
    CHECK(s);
    uint64_t now = 0;
    for (int k = 0; k < 20; k++) {
        now += T_MS;
        ADVANCE(s, now);
    }
    assert_int_equal(x.runs, 3);
    ASSERT_RC(x.rc_cancel, TW_OK);       /* no further run */
    ASSERT_RC(x.rc_cancel2, TW_ENOENT);
    ASSERT_RC(x.rc_resched, TW_ENOENT);
    ASSERT_RC(tw_cancel(s, x.h), TW_ENOENT);
    ASSERT_RC(tw_reschedule(s, x.h, T_MS), TW_ENOENT);
    ADVANCE(s, 10 * T_S);
    assert_int_equal(x.runs, 3);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, 3);
    assert_int_equal(st.cancelled, 1);
    assert_int_equal(st.pending, 0);
    tw_destroy(s);
}

static void cancel_sync_self(tw_timer t, void *arg)
{
    self_op *x = arg;
    x->runs++;
    if (x->runs == x->stop_at)
        x->rc_sync = tw_cancel_sync(x->s, t);
}

static void cancel_sync_from_own_callback_is_edeadlk(void **state)
{
    (void)state;
    tw_service *s = t_default();
    /* one-shot */
    self_op a = {.s = s, .stop_at = 1, .rc_sync = 99};
    ASSERT_RC(tw_schedule(s, T_MS, cancel_sync_self, &a, &a.h), TW_OK);
    /* periodic: nothing is done, it keeps running */
    self_op b = {.s = s, .stop_at = 2, .rc_sync = 99};
    ASSERT_RC(tw_schedule_every(s, T_MS, T_MS, cancel_sync_self, &b, &b.h), TW_OK);
    CHECK(s);
    uint64_t now = 0;
    for (int k = 0; k < 10; k++) {
        now += T_MS;
        ADVANCE(s, now);
    }
    assert_int_equal(a.runs, 1);
    ASSERT_RC(a.rc_sync, TW_EDEADLK);
    ASSERT_RC(b.rc_sync, TW_EDEADLK);
    assert_int_equal(b.runs, 10); /* at 1 .. 10 ms: the refused cancel_sync did nothing */
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.cancelled, 0);
    /* from outside it works */
    ASSERT_RC(tw_cancel_sync(s, b.h), TW_OK);
    CHECK(s);
    int runs = b.runs;
    ADVANCE(s, now + 10 * T_MS);
    assert_int_equal(b.runs, runs);
    tw_destroy(s);
}

static void cancel_sync_pending_is_ok_and_never_fires(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, 5 * T_MS);
    ASSERT_RC(tw_cancel_sync(s, x.h), TW_OK);
    x.cancelled = 1;
    CHECK(s);
    ASSERT_RC(tw_cancel_sync(s, x.h), TW_ENOENT);
    ADVANCE(s, T_S);
    assert_int_equal(x.runs, 0);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.cancelled, 1);
    ASSERT_STATS_IDENTITY(st);
    tw_destroy(s);
}

/* A and B are both due in one advance; A (earlier) cancels B: B never runs. */
typedef struct pair {
    tw_service *s;
    t_timer *victim;
    int sync;
    int rc;
    int runs;
} pair;

static void cancel_victim(tw_timer t, void *arg)
{
    (void)t;
    pair *p = arg;
    p->runs++;
    p->rc = p->sync ? tw_cancel_sync(p->s, p->victim->h) : tw_cancel(p->s, p->victim->h);
    if (p->rc == TW_OK)
        p->victim->cancelled = 1;
}

static void cancel_due_timer_from_earlier_callback_in_same_advance(void **state)
{
    (void)state;
    for (int sync = 0; sync < 2; sync++) {
        tw_service *s = t_service(T_MS, 4, 1);
        t_timer b;
        pair p = {.s = s, .victim = &b, .sync = sync, .rc = 99};
        ASSERT_RC(tw_schedule(s, 1 * T_MS + 200 * T_US, cancel_victim, &p, NULL), TW_OK);
        t_arm(s, &b, 1 * T_MS + 500 * T_US); /* same tick, later */
        ADVANCE(s, 50 * T_MS);
        assert_int_equal(p.runs, 1);
        ASSERT_RC(p.rc, TW_OK);
        assert_int_equal(b.runs, 0);
        ADVANCE(s, 100 * T_MS);
        assert_int_equal(b.runs, 0);
        tw_stats st;
        t_stats(s, &st);
        assert_int_equal(st.fired, 1);
        assert_int_equal(st.cancelled, 1);
        ASSERT_STATS_IDENTITY(st);
        tw_destroy(s);
    }
}

/* one callback cancels a far timer of another level */
static void cancel_from_other_callback(void **state)
{
    (void)state;
    tw_service *s = t_service(T_MS, 2, 1);
    t_timer far;
    pair p = {.s = s, .victim = &far, .rc = 99};
    t_arm(s, &far, 3600 * T_S);
    ASSERT_RC(tw_schedule(s, 7 * T_MS, cancel_victim, &p, NULL), TW_OK);
    ADVANCE(s, 8 * T_MS);
    ASSERT_RC(p.rc, TW_OK);
    ADVANCE(s, 7200 * T_S);
    assert_int_equal(far.runs, 0);
    tw_destroy(s);
}

/* A cancelled record is freed at once and reused: 100000 arm/cancel cycles
 * of one-hour timers use a handful of records, and every handle is new. */
static void cancelled_record_is_reused_with_new_handle(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer a, b;
    t_arm(s, &a, 3600 * T_S);
    ASSERT_RC(tw_cancel(s, a.h), TW_OK);
    t_arm(s, &b, 3600 * T_S);
    assert_true(b.h != a.h);
    ASSERT_RC(tw_cancel(s, a.h), TW_ENOENT); /* does not touch b */
    CHECK(s);
    tw_timer prev = b.h;
    ASSERT_RC(tw_cancel(s, b.h), TW_OK);
    for (int i = 0; i < 100000; i++) {
        tw_timer h = 0;
        ASSERT_RC(tw_schedule(s, 3600 * T_S, t_noop, NULL, &h), TW_OK);
        if (h == prev || h == a.h)
            fail_msg("cycle %d: handle %#" PRIx64 " handed out twice", i, h);
        ASSERT_RC(tw_cancel(s, prev), TW_ENOENT);
        ASSERT_RC(tw_cancel(s, h), TW_OK);
        prev = h;
    }
    CHECK(s);
    uint32_t high = tw__records_high(&s->rec);
    if (high > 64)
        fail_msg("%u records used by 100000 arm/cancel cycles: cancel does not free", high);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.cancelled, 100002);
    ADVANCE(s, 7200 * T_S);
    t_stats(s, &st);
    assert_int_equal(st.fired, 0);
    tw_destroy(s);
}

/* overflowed slot: cancel every other timer, the rest fire once */
static void cancel_in_overflowed_slot(void **state)
{
    (void)state;
    enum { N = 100 };
    tw_service *s = t_service(T_MS, 4, 1);
    t_timer v[N];
    for (int i = 0; i < N; i++)
        t_arm(s, &v[i], 9 * T_MS + (uint64_t)i);
    for (int i = 0; i < N; i += 2) {
        ASSERT_RC(tw_cancel(s, v[i].h), TW_OK);
        v[i].cancelled = 1;
        CHECK(s);
    }
    ADVANCE(s, 20 * T_MS);
    t_expect_due(v, N, 20 * T_MS, T_MS);
    for (int i = 1; i < N; i += 2)
        assert_int_equal(v[i].runs, 1);
    tw_destroy(s);
}

static void cancel_null_service_is_einval(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, T_MS);
    ASSERT_RC(tw_cancel(NULL, x.h), TW_EINVAL);
    ASSERT_RC(tw_cancel_sync(NULL, x.h), TW_EINVAL);
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(x.runs, 1);
    tw_destroy(s);
}

/* ---- cancel_sync waiters and other runs -------------------------------------- */

static atomic_int g_blocker_in, g_blocker_go;

static void blocker(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&g_blocker_in, 1);
    while (!atomic_load(&g_blocker_go))
        t_sleep_ns(100 * T_US);
}

static void ran_once(tw_timer t, void *arg)
{
    (void)t;
    atomic_fetch_add((atomic_int *)arg, 1);
}

typedef struct sync_waiter {
    tw_service *s;
    tw_timer h;
    pthread_t th;
    atomic_int rc, back;
} sync_waiter;

static void *wait_sync(void *arg)
{
    sync_waiter *w = arg;
    atomic_store(&w->rc, tw_cancel_sync(w->s, w->h));
    atomic_store(&w->back, 1);
    return NULL;
}

/* A tw_cancel_sync waits for its timer's run alone: the ends of other
 * runs do not wake it. Before (2026-11-30) every run's end woke every
 * waiter while any waited (a FUTEX_WAKE a run): a burst of a million
 * beside one waiter ran 8 times slower. Here `waiters` threads wait for
 * one blocked callback (more than TW_SYNC_SHOWN: some are counted as
 * unshown, and every run wakes those, so the count below is asserted
 * only where all are shown); 2000 other timers run on the other worker
 * meanwhile. The wake word must not move for them; the blocked run's end
 * wakes every waiter, TW_OK each (it ran: the cancel found it running). */
static void sync_waiters_wait_for_their_run(unsigned waiters)
{
    enum { OTHERS = 2000 };
    atomic_store(&g_blocker_in, 0);
    atomic_store(&g_blocker_go, 0);
    tw_service *s = t_monotonic(2, T_MS);
    tw_timer h;
    ASSERT_RC(tw_schedule(s, 0, blocker, NULL, &h), TW_OK);
    uint64_t end = t_mono_ns() + 10 * T_S;
    while (!atomic_load(&g_blocker_in) && t_mono_ns() < end)
        t_sleep_ns(100 * T_US);
    assert_true(atomic_load(&g_blocker_in));
    sync_waiter w[2 * TW_SYNC_SHOWN];
    assert_true(waiters <= 2 * TW_SYNC_SHOWN);
    for (unsigned i = 0; i < waiters; i++) {
        w[i].s = s;
        w[i].h = h;
        atomic_store(&w[i].back, 0);
        assert_int_equal(pthread_create(&w[i].th, NULL, wait_sync, &w[i]), 0);
    }
    /* Seq_cst: as the library's own looks; every waiter in. */
    while (atomic_load(&s->sync_waiters) < waiters && t_mono_ns() < end)
        t_sleep_ns(100 * T_US);
    assert_int_equal(atomic_load(&s->sync_waiters), waiters);
    int32_t seq0 = atomic_load(&s->run_seq);
    atomic_int others = 0;
    for (int i = 0; i < OTHERS; i++)
        ASSERT_RC(tw_schedule(s, 0, ran_once, &others, NULL), TW_OK);
    while (atomic_load(&others) < OTHERS && t_mono_ns() < end)
        t_sleep_ns(T_MS);
    assert_int_equal(atomic_load(&others), OTHERS);
    int32_t moved = atomic_load(&s->run_seq) - seq0;
    print_message("      %u waiters: the wake word moved %d times for %d other runs\n", waiters,
                  (int)moved, OTHERS);
    if (waiters <= TW_SYNC_SHOWN)
        assert_int_equal(moved, 0);
    for (unsigned i = 0; i < waiters; i++)
        assert_int_equal(atomic_load(&w[i].back), 0); /* still waiting */
    atomic_store(&g_blocker_go, 1);
    for (unsigned i = 0; i < waiters; i++) {
        assert_int_equal(pthread_join(w[i].th, NULL), 0);
        ASSERT_RC(atomic_load(&w[i].rc), TW_ENOENT); /* it ran: nothing to cancel */
    }
    assert_int_equal(atomic_load(&s->sync_waiters), 0);
    assert_int_equal(atomic_load(&s->sync_unshown), 0);
    for (int i = 0; i < TW_SYNC_SHOWN; i++)
        assert_int_equal(atomic_load(&s->sync_waited[i]), 0);
    tw_destroy(s);
}

static void one_sync_waiter_is_not_woken_by_other_runs(void **state)
{
    (void)state;
    sync_waiters_wait_for_their_run(1);
}

static void sync_waiters_beyond_the_shown_all_wake(void **state)
{
    (void)state;
    sync_waiters_wait_for_their_run(TW_SYNC_SHOWN + 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(cancel_pending_is_ok_and_never_fires, setup),
        cmocka_unit_test_setup(cancel_twice_is_enoent, setup),
        cmocka_unit_test_setup(cancel_after_fire_is_enoent, setup),
        cmocka_unit_test_setup(stale_handle_is_enoent, setup),
        cmocka_unit_test_setup(zero_handle_is_enoent, setup),
        cmocka_unit_test_setup(garbage_handles_are_enoent, setup),
        cmocka_unit_test_setup(other_service_handle_is_enoent, setup),
        cmocka_unit_test_setup(other_service_handle_unknown_index_is_enoent, setup),
        cmocka_unit_test_setup(cancel_from_own_callback_oneshot_is_enoent, setup),
        cmocka_unit_test_setup(cancel_periodic_from_own_callback_stops_it, setup),
        cmocka_unit_test_setup(cancel_sync_from_own_callback_is_edeadlk, setup),
        cmocka_unit_test_setup(cancel_sync_pending_is_ok_and_never_fires, setup),
        cmocka_unit_test_setup(cancel_due_timer_from_earlier_callback_in_same_advance, setup),
        cmocka_unit_test_setup(cancel_from_other_callback, setup),
        cmocka_unit_test_setup(cancelled_record_is_reused_with_new_handle, setup),
        cmocka_unit_test_setup(cancel_in_overflowed_slot, setup),
        cmocka_unit_test_setup(cancel_null_service_is_einval, setup),
        cmocka_unit_test_setup(one_sync_waiter_is_not_woken_by_other_runs, setup),
        cmocka_unit_test_setup(sync_waiters_beyond_the_shown_all_wake, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
