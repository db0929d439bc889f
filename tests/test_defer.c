/* test_defer.c: deferred placement (src/defer.c), on MONOTONIC services.
 *
 * A producer logs a timer due more than TW_DEFER_AHEAD ticks ahead, and the
 * cursor places it. To look at the logs with nothing drained behind our
 * back, the tests hold the cursor: with workers = 0 the cursor runs the
 * callbacks itself, so a callback that waits on a gate keeps it from its
 * next drain until the gate opens. Every check is one that cannot fail by
 * the machine being slow: counts while the cursor is held, and bounded
 * waits (seconds) for what the cursor does once let go. */
#include "tw_test.h"

#include <pthread.h>


/* ---- holding the cursor --------------------------------------------------- */

typedef struct gate {
    _Atomic int in;     /* the callback is running (the cursor is held) */
    _Atomic int open;   /* let it return */
} gate;

static void wait_at_gate(tw_timer t, void *arg)
{
    (void)t;
    gate *g = arg;
    atomic_store(&g->in, 1);
    while (!atomic_load(&g->open))
        t_sleep_ns(100 * T_US);
}

/* Arm the gate's timer and wait until the cursor is inside it. */
static void hold_cursor(tw_service *s, gate *g)
{
    atomic_store(&g->in, 0);
    atomic_store(&g->open, 0);
    ASSERT_RC(tw_schedule(s, 0, wait_at_gate, g, NULL), TW_OK);
    uint64_t end = t_mono_ns() + 10 * T_S;
    while (!atomic_load(&g->in) && t_mono_ns() < end)
        t_sleep_ns(T_MS);
    assert_true(atomic_load(&g->in));
}

static void release_cursor(gate *g)
{
    atomic_store(&g->open, 1);
}

/* Wait (bounded) until f(s) reaches want; return what it is then. */
static uint64_t wait_for(tw_service *s, uint64_t (*f)(tw_service *), uint64_t want)
{
    uint64_t end = t_mono_ns() + 10 * T_S;
    while (f(s) < want && t_mono_ns() < end)
        t_sleep_ns(T_MS);
    return f(s);
}

/* ---- the tests ------------------------------------------------------------ */

/* Far timers wait in the log (nothing reserved in the wheel) until the
 * cursor drains it; then only the ones still pending are placed, each
 * once. */
static void only_live_logged_timers_are_placed(void **state)
{
    (void)state;
    tw_service *s = t_monotonic(0, T_MS);
    gate g;
    hold_cursor(s, &g);
    uint64_t before = tw__reserved_total(s);
    enum { N = 1000 };
    static tw_timer h[N];
    for (int i = 0; i < N; i++)
        ASSERT_RC(tw_schedule(s, 3600 * T_S, t_noop, NULL, &h[i]), TW_OK);
    for (int i = 0; i < N; i += 2)
        ASSERT_RC(tw_cancel(s, h[i]), TW_OK);
    assert_int_equal(tw__reserved_total(s), before); /* all logged */
    release_cursor(&g);
    assert_int_equal(wait_for(s, tw__reserved_total, before + N / 2), before + N / 2);
    t_sleep_ns(20 * T_MS); /* more passes of the cursor: nothing more placed */
    assert_int_equal(tw__reserved_total(s), before + N / 2);
    for (int i = 1; i < N; i += 2)
        ASSERT_RC(tw_cancel(s, h[i]), TW_OK);
    tw_stats st;
    tw_stats_get(s, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.cancelled, N);
    tw_destroy(s);
}

/* tw_next_due answers no later than a timer that is only in a log, and
 * exactly: a cancelled timer's entry in the log does not count. */
static void next_due_sees_logged_timers(void **state)
{
    (void)state;
    tw_service *s = t_monotonic(0, T_MS);
    gate g;
    hold_cursor(s, &g);
    uint64_t before = tw__reserved_total(s);
    uint64_t t0 = tw_now(s);
    ASSERT_RC(tw_schedule(s, 7200 * T_S, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule(s, 3600 * T_S, t_noop, NULL, NULL), TW_OK);
    tw_timer gone;
    ASSERT_RC(tw_schedule(s, 60 * T_S, t_noop, NULL, &gone), TW_OK);
    ASSERT_RC(tw_cancel(s, gone), TW_OK); /* its entry stays in the log, stale */
    uint64_t t1 = tw_now(s);
    uint64_t due = tw_next_due(s);
    assert_int_equal(tw__reserved_total(s), before); /* still logged */
    /* The first tick boundary at or after the earlier deadline: exact. */
    assert_true(due >= t0 + 3600 * T_S);
    assert_true(due <= t1 + 3600 * T_S + T_MS);
    release_cursor(&g);
    assert_int_equal(wait_for(s, tw__reserved_total, before + 2), before + 2);
    due = tw_next_due(s); /* from the wheel now: never later */
    assert_true(due <= t1 + 3600 * T_S + T_MS);
    tw_destroy(s);
}

/* A log the cursor emptied forgets its bound: a timer cancelled before
 * the drain no longer pulls tw_next_due earlier once the log is empty. */
static void next_due_forgets_a_drained_log(void **state)
{
    (void)state;
    tw_service *s = t_monotonic(0, T_MS);
    gate g1, g2;
    hold_cursor(s, &g1);
    tw_timer soon;
    ASSERT_RC(tw_schedule(s, 60 * T_S, t_noop, NULL, &soon), TW_OK);
    ASSERT_RC(tw_cancel(s, soon), TW_OK);
    release_cursor(&g1);
    hold_cursor(s, &g2); /* the cursor drained (and dropped) it before */
    assert_int_equal(tw_next_due(s), UINT64_MAX);
    uint64_t t0 = tw_now(s);
    ASSERT_RC(tw_schedule(s, 3600 * T_S, t_noop, NULL, NULL), TW_OK);
    assert_true(tw_next_due(s) >= t0 + 3600 * T_S);
    release_cursor(&g2);
    tw_destroy(s);
}

/* A full log is not waited for: the producer places the rest itself. */
static void a_full_log_places_the_rest(void **state)
{
    (void)state;
    tw_service *s = t_monotonic(0, T_MS);
    gate g;
    hold_cursor(s, &g);
    uint64_t before = tw__reserved_total(s);
    for (uint32_t i = 0; i < TW_DEFER_LOG + 10; i++)
        ASSERT_RC(tw_schedule(s, 60 * T_S, t_noop, NULL, NULL), TW_OK);
    assert_int_equal(tw__reserved_total(s), before + 10);
    release_cursor(&g);
    uint64_t all = before + TW_DEFER_LOG + 10;
    assert_int_equal(wait_for(s, tw__reserved_total, all), all);
    tw_destroy(s);
}

/* A timer due within TW_DEFER_AHEAD ticks is placed by the call. */
static void near_timers_are_placed_by_the_call(void **state)
{
    (void)state;
    tw_service *s = t_monotonic(0, T_MS);
    gate g;
    hold_cursor(s, &g);
    uint64_t before = tw__reserved_total(s);
    ASSERT_RC(tw_schedule(s, 2 * T_MS, t_noop, NULL, NULL), TW_OK);
    assert_int_equal(tw__reserved_total(s), before + 1);
    release_cursor(&g);
    tw_destroy(s);
}

static _Atomic uint64_t dropped;

static void count_dropped(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_fetch_add(&dropped, 1);
}

/* tw_stop hands every pending timer to on_pending once, logged or placed,
 * and tw_destroy frees the logs (the sanitizer and valgrind runs). */
static void stop_drops_logged_timers_once(void **state)
{
    (void)state;
    tw_service *s = t_monotonic(0, T_MS);
    gate g;
    hold_cursor(s, &g);
    for (int i = 0; i < 100; i++)
        ASSERT_RC(tw_schedule(s, 3600 * T_S, t_noop, NULL, NULL), TW_OK);
    atomic_store(&dropped, 0);
    release_cursor(&g); /* the drain may run before, during or after the stop */
    ASSERT_RC(tw_stop(s, count_dropped), TW_OK);
    assert_int_equal(atomic_load(&dropped), 100);
    tw_destroy(s);
}

/* Fires, never early, at the time it was armed for. */
typedef struct due_at {
    tw_service *s;
    uint64_t deadline;          /* service time */
} due_at;

static _Atomic uint64_t early;

static void check_not_early(tw_timer t, void *arg)
{
    (void)t;
    due_at *d = arg;
    if (tw_now(d->s) < d->deadline)
        atomic_fetch_add(&early, 1);
}

typedef struct armer {
    tw_service *s;
    due_at *d;
    int n;
} armer;

static void *arm_and_exit(void *p)
{
    armer *a = p;
    for (int i = 0; i < a->n; i++) {
        a->d[i].s = a->s;
        a->d[i].deadline = tw_now(a->s) + 30 * T_MS;
        CB_EXPECT(tw_schedule(a->s, 30 * T_MS, check_not_early, &a->d[i], NULL) == TW_OK,
                  "tw_schedule");
    }
    return NULL;
}

/* A thread that logged timers and exited leaves them to the cursor: they
 * fire, none early. */
static void a_threads_log_outlives_it(void **state)
{
    (void)state;
    tw_service *s = t_monotonic(2, T_MS);
    atomic_store(&early, 0);
    enum { N = 50 };
    static due_at d[N];
    armer a = {s, d, N};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, arm_and_exit, &a), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    CB_ASSERT_CLEAN();
    assert_int_equal(wait_for(s, t_fired, N), N);
    assert_int_equal(atomic_load(&early), 0);
    tw_destroy(s);
}

/* An idle cursor, asleep with nothing planned, is woken by a logged timer
 * (the poke) and runs it, not early; a later one in the same way. */
static void an_idle_cursor_wakes_for_a_logged_timer(void **state)
{
    (void)state;
    tw_service *s = t_monotonic(2, T_MS);
    atomic_store(&early, 0);
    t_sleep_ns(20 * T_MS); /* the cursor goes to sleep with no plan */
    static due_at d[2];
    for (int i = 0; i < 2; i++) {
        d[i].s = s;
        d[i].deadline = tw_now(s) + 40 * T_MS;
        ASSERT_RC(tw_schedule(s, 40 * T_MS, check_not_early, &d[i], NULL), TW_OK);
        assert_int_equal(wait_for(s, t_fired, (uint64_t)i + 1), (uint64_t)i + 1);
        t_sleep_ns(20 * T_MS); /* asleep again, with nothing planned */
    }
    assert_int_equal(atomic_load(&early), 0);
    tw_destroy(s);
}

/* ---- the cursor's plan ---------------------------------------------------- */

static tw_service *_Atomic g_plan_s;
static _Atomic uint64_t g_plan_tick;
static _Atomic int g_plan_at, g_plan_logged;

/* On the cursor, as it starts to plan a sleep: the first time it does so
 * with the burst's slot large in the wheel, hold it (bounded) until the
 * test has logged a timer for the burst's tick. */
static void log_while_planning(tw_service *s)
{
    if (s != atomic_load(&g_plan_s) || atomic_load(&g_plan_at) ||
        tw__wheel_big_slot(s, atomic_load(&g_plan_tick)) == 0)
        return;
    atomic_store(&g_plan_at, 1);
    uint64_t end = t_mono_ns() + 5 * T_S;
    while (!atomic_load(&g_plan_logged) && t_mono_ns() < end)
        t_sleep_ns(100 * T_US);
}

/* A large slot is claimed early, its lead before its tick, even when the
 * cursor plans with a timer for that tick still in a log. The logs lower
 * the plan to TW_DEFER_AHEAD ticks before their bound; lowered first, the
 * plan hid the slot from the cursor's look for a large one, and the claim
 * came TW_DEFER_AHEAD ticks before the tick (WL5's first callback was
 * 20-49 ms late so, until 2fe89ab). Here the claim must start with more
 * than half of its lead left. */
static void an_early_claim_is_planned_before_logged_timers(void **state)
{
    (void)state;
    enum { N = 20000, LEAD = 200 }; /* ticks of 1 ms; N: a large slot */
    tw__early_lead_override = LEAD;
    tw_service *s = t_monotonic(1, T_MS);
    tw__early_lead_override = 0;
    ASSERT_RC(tw_pause(s), TW_OK); /* time stands while we arm */
    uint64_t due = tw_now(s) + 2 * LEAD * T_MS;
    for (int i = 0; i < N; i++)
        ASSERT_RC(tw_schedule_at(s, due, t_noop, NULL, NULL), TW_OK);
    atomic_store(&g_plan_tick, tw__tick_of(s, due - s->origin));
    atomic_store(&g_plan_at, 0);
    atomic_store(&g_plan_logged, 0);
    atomic_store(&g_plan_s, s);
    atomic_store(&tw__cursor_plan_hook, log_while_planning);
    ASSERT_RC(tw_resume(s), TW_OK);
    uint64_t end = t_mono_ns() + 10 * T_S;
    while (!atomic_load(&g_plan_at) && t_mono_ns() < end)
        t_sleep_ns(T_MS);
    assert_true(atomic_load(&g_plan_at)); /* the cursor plans, the burst placed */
    ASSERT_RC(tw_schedule_at(s, due, t_noop, NULL, NULL), TW_OK);
    assert_int_equal(tw__defer_next_due(s), atomic_load(&g_plan_tick)); /* in our log */
    atomic_store(&g_plan_logged, 1);
    while (tw__rare_total(s, TW_RARE_EARLY_CLAIM) == 0 && tw_now(s) < due)
        t_sleep_ns(T_MS);
    uint64_t now = tw_now(s);
    atomic_store(&tw__cursor_plan_hook, NULL);
    print_message("      the claim started %.1f ms before the tick (lead %d ms)\n",
                  now < due ? (double)(due - now) / 1e6 : 0.0, LEAD);
    assert_true(tw__rare_total(s, TW_RARE_EARLY_CLAIM) != 0);
    assert_true(now < due && due - now > (uint64_t)LEAD / 2 * T_MS);
    assert_int_equal(wait_for(s, t_fired, N + 1), N + 1);
    tw_destroy(s);
}

/* MANUAL services never log: the call places, tw_advance finds it. */
static void manual_services_place_at_once(void **state)
{
    (void)state;
    tw_service *s = t_default();
    uint64_t before = tw__reserved_total(s);
    ASSERT_RC(tw_schedule(s, 3600 * T_S, t_noop, NULL, NULL), TW_OK);
    assert_int_equal(tw__reserved_total(s), before + 1);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(only_live_logged_timers_are_placed, t_setup),
        cmocka_unit_test_setup(next_due_sees_logged_timers, t_setup),
        cmocka_unit_test_setup(next_due_forgets_a_drained_log, t_setup),
        cmocka_unit_test_setup(a_full_log_places_the_rest, t_setup),
        cmocka_unit_test_setup(near_timers_are_placed_by_the_call, t_setup),
        cmocka_unit_test_setup(stop_drops_logged_timers_once, t_setup),
        cmocka_unit_test_setup(a_threads_log_outlives_it, t_setup),
        cmocka_unit_test_setup(an_idle_cursor_wakes_for_a_logged_timer, t_setup),
        cmocka_unit_test_setup(an_early_claim_is_planned_before_logged_timers, t_setup),
        cmocka_unit_test_setup(manual_services_place_at_once, t_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
