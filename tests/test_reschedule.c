/* test_reschedule.c: moving pending timers earlier and later. */
#include "tw_test.h"

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    t_seq = 0;
    return 0;
}

/* move x to now + delay, keeping the expected deadline in step */
static void resched(tw_service *s, t_timer *x, uint64_t delay)
{
    uint64_t d = tw_now(s) + delay;
    ASSERT_RC(tw_reschedule(s, x->h, delay), TW_OK);
    x->deadline = d;
    CHECK(s);
}

static void reschedule_later(void **state)
{
    (void)state;
    static const uint64_t from[] = {T_MS, 10 * T_MS, 300 * T_MS, 100 * T_S};
    static const uint64_t to[] = {2 * T_MS, 20 * T_MS + 7, 5 * T_S, 1000 * T_S,
                                  (1ull << 30) * T_MS};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++)
        for (size_t j = 0; j < sizeof to / sizeof to[0]; j++) {
            if (to[j] <= from[i])
                continue;
            tw_service *s = t_service(T_MS, 8, 2);
            t_timer x;
            ADVANCE(s, 333);
            t_arm(s, &x, from[i]);
            tw_timer h = x.h;
            resched(s, &x, to[j]);
            uint64_t past_old = 333 + from[i] + T_MS; /* the old deadline passes */
            if (past_old > x.deadline - 1)
                past_old = x.deadline - 1;
            ADVANCE(s, past_old);
            assert_int_equal(x.runs, 0);
            ADVANCE(s, x.deadline - 1);
            assert_int_equal(x.runs, 0);
            ADVANCE(s, x.deadline + T_MS);
            assert_int_equal(x.runs, 1);
            assert_true(x.ran_at >= x.deadline);
            assert_true(x.h == h); /* the handle stays */
            tw_stats st;
            t_stats(s, &st);
            assert_int_equal(st.rescheduled, 1);
            assert_int_equal(st.fired, 1);
            assert_int_equal(st.scheduled, 1);
            ASSERT_STATS_IDENTITY(st);
            tw_destroy(s);
        }
}

static void reschedule_earlier(void **state)
{
    (void)state;
    static const uint64_t from[] = {10 * T_MS, 5 * T_S, 3600 * T_S, (1ull << 40) * T_MS};
    static const uint64_t to[] = {0, 1, T_MS, 2 * T_MS + 5, 4 * T_S};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++)
        for (size_t j = 0; j < sizeof to / sizeof to[0]; j++) {
            if (to[j] >= from[i])
                continue;
            tw_service *s = t_service(T_MS, 4, 1);
            t_timer x;
            t_arm(s, &x, from[i]);
            ADVANCE(s, 1 * T_MS + 100);
            resched(s, &x, to[j]);
            if (x.deadline > tw_now(s) + 1)
                ADVANCE(s, x.deadline - 1);
            assert_int_equal(x.runs, 0);
            ADVANCE(s, x.deadline + T_MS);
            if (x.runs != 1)
                fail_msg("from %" PRIu64 " to %" PRIu64 ": %d runs by new deadline + tick",
                         from[i], to[j], x.runs);
            assert_true(x.ran_at >= x.deadline);
            ADVANCE(s, 1 * T_MS + 100 + from[i] + T_MS); /* the old deadline */
            assert_int_equal(x.runs, 1);
            tw_destroy(s);
        }
}

/* session-timeout style: pushed back on every request, fires once at the
 * last deadline */
static void many_touches_then_fires_once_at_last_deadline(void **state)
{
    (void)state;
    tw_service *s = t_service(T_MS, 16, 1);
    t_timer x;
    t_arm(s, &x, 30 * T_MS);
    uint64_t now = 0;
    for (int i = 0; i < 5000; i++) {
        now += 3 * T_MS + (uint64_t)(i % 7) * 100 * T_US; /* requests every ~3 ms */
        ADVANCE(s, now);
        assert_int_equal(x.runs, 0);
        resched(s, &x, 30 * T_MS);
    }
    ADVANCE(s, x.deadline - 1);
    assert_int_equal(x.runs, 0);
    ADVANCE(s, x.deadline + T_MS);
    assert_int_equal(x.runs, 1);
    ADVANCE(s, x.deadline + 10 * T_S);
    assert_int_equal(x.runs, 1);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.rescheduled, 5000);
    assert_int_equal(st.fired, 1);
    ASSERT_STATS_IDENTITY(st);
    tw_destroy(s);
}

/* many moves between two advances, later and earlier alternately */
static void many_moves_without_advance_last_one_wins(void **state)
{
    (void)state;
    tw_service *s = t_service(T_MS, 2, 1);
    t_timer x;
    t_arm(s, &x, 50 * T_MS);
    for (int i = 0; i < 1000; i++)
        resched(s, &x, (i & 1) ? 3 * T_MS + (uint64_t)i : (1ull << (i % 40)) * T_MS);
    resched(s, &x, 17 * T_MS + 5);
    ADVANCE(s, 17 * T_MS + 4);
    assert_int_equal(x.runs, 0);
    ADVANCE(s, 18 * T_MS + 5);
    assert_int_equal(x.runs, 1);
    ADVANCE(s, (1ull << 41) * T_MS);
    assert_int_equal(x.runs, 1);
    tw_destroy(s);
}

static void reschedule_fired_is_enoent(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, T_MS);
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(x.runs, 1);
    ASSERT_RC(tw_reschedule(s, x.h, T_MS), TW_ENOENT);
    CHECK(s);
    ADVANCE(s, 10 * T_MS);
    assert_int_equal(x.runs, 1);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.rescheduled, 0);
    tw_destroy(s);
}

static void reschedule_cancelled_is_enoent(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, 5 * T_MS);
    ASSERT_RC(tw_cancel(s, x.h), TW_OK);
    x.cancelled = 1;
    ASSERT_RC(tw_reschedule(s, x.h, T_MS), TW_ENOENT);
    CHECK(s);
    ADVANCE(s, 10 * T_MS);
    assert_int_equal(x.runs, 0);
    tw_destroy(s);
}

static void reschedule_erange_leaves_timer_unchanged(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, 5 * T_MS);
    ASSERT_RC(tw_reschedule(s, x.h, UINT64_MAX), TW_ERANGE);
    ASSERT_RC(tw_reschedule(s, x.h, tw_max_delay(s) + 1), TW_ERANGE);
    ASSERT_RC(tw_reschedule(NULL, x.h, T_MS), TW_EINVAL);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.rescheduled, 0);
    ADVANCE(s, 5 * T_MS - 1);
    assert_int_equal(x.runs, 0);
    ADVANCE(s, 6 * T_MS);
    assert_int_equal(x.runs, 1);
    tw_destroy(s);
}

static void reschedule_to_max_delay_is_ok(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, 5 * T_MS);
    resched(s, &x, tw_max_delay(s));
    ADVANCE(s, 1000 * T_S);
    assert_int_equal(x.runs, 0);
    ADVANCE(s, x.deadline - 1);
    assert_int_equal(x.runs, 0);
    ADVANCE(s, x.deadline + T_MS);
    assert_int_equal(x.runs, 1);
    tw_destroy(s);
}

typedef struct self_move {
    tw_service *s;
    tw_timer h;
    int runs;
    uint64_t ran_at[16];
    uint64_t move;      /* delay for the reschedule in run `at` */
    int at;
    int rc;
} self_move;

static void move_self(tw_timer t, void *arg)
{
    self_move *x = arg;
    CB_EXPECT(t == x->h, "handle mismatch");
    if (x->runs < 16)
        x->ran_at[x->runs] = tw_now(x->s);
    x->runs++;
    if (x->runs == x->at)
        x->rc = tw_reschedule(x->s, t, x->move);
}

static void reschedule_oneshot_from_own_callback_is_enoent(void **state)
{
    (void)state;
    tw_service *s = t_default();
    self_move x = {.s = s, .move = 5 * T_MS, .at = 1, .rc = 99};
    ASSERT_RC(tw_schedule(s, T_MS, move_self, &x, &x.h), TW_OK);
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(x.runs, 1);
    ASSERT_RC(x.rc, TW_ENOENT);
    ADVANCE(s, 100 * T_MS);
    assert_int_equal(x.runs, 1);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.rescheduled, 0);
    assert_int_equal(st.pending, 0);
    tw_destroy(s);
}

/* every 10 ms from 1 ms; at 2 ms the next run moves to 5 ms; the period
 * then counts from 5 ms: 15, 25, ... */
static void reschedule_periodic_moves_next_run_keeps_period(void **state)
{
    (void)state;
    tw_service *s = t_default();
    self_move x = {.s = s};
    ASSERT_RC(tw_schedule_every(s, T_MS, 10 * T_MS, move_self, &x, &x.h), TW_OK);
    CHECK(s);
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(x.runs, 1);
    ASSERT_RC(tw_reschedule(s, x.h, 3 * T_MS), TW_OK);
    CHECK(s);
    ADVANCE(s, 5 * T_MS - 1);
    assert_int_equal(x.runs, 1);
    ADVANCE(s, 6 * T_MS);
    assert_int_equal(x.runs, 2);
    assert_true(x.ran_at[1] >= 5 * T_MS);
    ADVANCE(s, 15 * T_MS - 1);
    assert_int_equal(x.runs, 2);
    ADVANCE(s, 16 * T_MS);
    assert_int_equal(x.runs, 3);
    ADVANCE(s, 25 * T_MS - 1);
    assert_int_equal(x.runs, 3);
    ADVANCE(s, 26 * T_MS);
    assert_int_equal(x.runs, 4);
    /* a later move of the pending periodic timer, past several periods */
    ASSERT_RC(tw_reschedule(s, x.h, 100 * T_MS + 500 * T_US), TW_OK);
    ADVANCE(s, 126 * T_MS + 500 * T_US - 1);
    assert_int_equal(x.runs, 4);
    ADVANCE(s, 127 * T_MS + 500 * T_US);
    assert_int_equal(x.runs, 5);
    assert_true(x.ran_at[4] >= 126 * T_MS + 500 * T_US);
    ADVANCE(s, 136 * T_MS + 500 * T_US - 1);
    assert_int_equal(x.runs, 5);
    ADVANCE(s, 137 * T_MS + 500 * T_US);
    assert_int_equal(x.runs, 6);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.rescheduled, 2);
    assert_int_equal(st.fired, 6);
    assert_int_equal(st.pending, 1);
    ASSERT_RC(tw_cancel(s, x.h), TW_OK);
    tw_destroy(s);
}

/* from inside its 2nd run (at 20 ms), a 10 ms periodic timer moves its next
 * run to now + 3.5 ms; the period then counts from there */
static void reschedule_from_own_periodic_callback(void **state)
{
    (void)state;
    tw_service *s = t_default();
    self_move x = {.s = s, .at = 2, .move = 3 * T_MS + 500 * T_US, .rc = 99};
    ASSERT_RC(tw_schedule_every(s, 10 * T_MS, 10 * T_MS, move_self, &x, &x.h), TW_OK);
    ADVANCE(s, 10 * T_MS);
    ADVANCE(s, 11 * T_MS);
    assert_int_equal(x.runs, 1);
    ADVANCE(s, 20 * T_MS);
    ADVANCE(s, 21 * T_MS);
    assert_int_equal(x.runs, 2);
    ASSERT_RC(x.rc, TW_OK);
    uint64_t moved = x.ran_at[1] + 3 * T_MS + 500 * T_US;
    ADVANCE(s, moved - 1);
    assert_int_equal(x.runs, 2);
    ADVANCE(s, moved + T_MS);
    assert_int_equal(x.runs, 3);
    assert_true(x.ran_at[2] >= moved);
    /* not at 30 ms: the next one is moved + 10 ms */
    ADVANCE(s, moved + 10 * T_MS - 1);
    assert_int_equal(x.runs, 3);
    ADVANCE(s, moved + 11 * T_MS);
    assert_int_equal(x.runs, 4);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.rescheduled, 1);
    tw_destroy(s);
}

/* A and B due in one advance; A (earlier) moves B later: B does not run
 * until its new deadline; the handle stays. */
typedef struct mover {
    tw_service *s;
    t_timer *victim;
    uint64_t delay;
    int rc;
} mover;

static void move_victim(tw_timer t, void *arg)
{
    (void)t;
    mover *m = arg;
    uint64_t d = tw_now(m->s) + m->delay;
    m->rc = tw_reschedule(m->s, m->victim->h, m->delay);
    if (m->rc == TW_OK)
        m->victim->deadline = d;
}

static void reschedule_due_timer_from_earlier_callback(void **state)
{
    (void)state;
    tw_service *s = t_service(T_MS, 4, 1);
    t_timer b;
    mover m = {.s = s, .victim = &b, .delay = 40 * T_MS, .rc = 99};
    ASSERT_RC(tw_schedule(s, 2 * T_MS + 100, move_victim, &m, NULL), TW_OK);
    t_arm(s, &b, 2 * T_MS + 900);
    ADVANCE(s, 10 * T_MS);
    ASSERT_RC(m.rc, TW_OK);
    assert_int_equal(b.runs, 0);
    ADVANCE(s, b.deadline - 1);
    assert_int_equal(b.runs, 0);
    ADVANCE(s, b.deadline + T_MS);
    assert_int_equal(b.runs, 1);
    tw_destroy(s);
}

/* a far timer (top levels) moved to the next tick, and a near one moved far */
static void reschedule_across_levels(void **state)
{
    (void)state;
    static const uint32_t slots[] = {2, 4, 256};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        tw_service *s = t_service(T_MS, slots[i], 1);
        t_timer far, near;
        t_arm(s, &far, (1ull << 38) * T_MS + 3);
        t_arm(s, &near, 2 * T_MS);
        ADVANCE(s, T_MS);
        resched(s, &far, 0);
        resched(s, &near, (1ull << 35) * T_MS + 11);
        ADVANCE(s, 2 * T_MS);
        assert_int_equal(far.runs, 1);
        ADVANCE(s, 4 * T_MS);
        assert_int_equal(near.runs, 0);
        ADVANCE(s, near.deadline - 1);
        assert_int_equal(near.runs, 0);
        ADVANCE(s, near.deadline + T_MS);
        assert_int_equal(near.runs, 1);
        ADVANCE(s, (1ull << 39) * T_MS);
        assert_int_equal(far.runs, 1);
        tw_destroy(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(reschedule_later, setup),
        cmocka_unit_test_setup(reschedule_earlier, setup),
        cmocka_unit_test_setup(many_touches_then_fires_once_at_last_deadline, setup),
        cmocka_unit_test_setup(many_moves_without_advance_last_one_wins, setup),
        cmocka_unit_test_setup(reschedule_fired_is_enoent, setup),
        cmocka_unit_test_setup(reschedule_cancelled_is_enoent, setup),
        cmocka_unit_test_setup(reschedule_erange_leaves_timer_unchanged, setup),
        cmocka_unit_test_setup(reschedule_to_max_delay_is_ok, setup),
        cmocka_unit_test_setup(reschedule_oneshot_from_own_callback_is_enoent, setup),
        cmocka_unit_test_setup(reschedule_periodic_moves_next_run_keeps_period, setup),
        cmocka_unit_test_setup(reschedule_from_own_periodic_callback, setup),
        cmocka_unit_test_setup(reschedule_due_timer_from_earlier_callback, setup),
        cmocka_unit_test_setup(reschedule_across_levels, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
