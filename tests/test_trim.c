/* test_trim.c: what a burst grows beyond the slots (the drainer's lists,
 * the workers' batches) is given back once bursts like it stop coming
 * (wheel.c tw__wheel_trim, workers.c tw__pool_trim): a server that saw one
 * burst of a million timers does not keep tens of MB for its life, and a
 * burst that comes back every period keeps its memory (no reallocation per
 * burst). The trim period is lowered to 100 ms here. */
#include "tw_test.h"

#include <stdlib.h>

#define PERIOD (100 * T_MS)

static void arm_burst_at(tw_service *s, int n, uint64_t at)
{
    for (int i = 0; i < n; i++) {
        tw_timer h;
        ASSERT_RC(tw_schedule_at(s, at, t_noop, NULL, &h), TW_OK);
    }
}

static tw_service *manual_service(void)
{
    tw__trim_period_override = PERIOD;
    tw_service *s = t_service(T_MS, 256, 16);
    tw__trim_period_override = 0;
    return s;
}

/* The four lists' capacity, in entries. */
static size_t lists_cap(const tw_service *s)
{
    const tw_wheel *w = &s->wheel;
    return w->taken.cap + w->due.cap + w->spare.cap + w->staged.cap;
}

static void assert_lists_kept_small(const tw_service *s)
{
    const tw_wheel *w = &s->wheel;
    const tw_vec *v[] = {&w->taken, &w->due, &w->spare, &w->staged};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        if (v[i]->cap > TW_VEC_KEEP)
            fail_msg("list %zu keeps %zu entries (at most %u once idle)", i, v[i]->cap,
                     TW_VEC_KEEP);
    }
}

/* Idle ticks: tw__check once at the end, not at each (sanitizers). */
static uint64_t advance_ms(tw_service *s, uint64_t ms)
{
    for (uint64_t i = 0; i < ms; i++)
        ASSERT_RC(tw_advance(s, tw_now(s) + T_MS), TW_OK);
    CHECK(s);
    return tw_now(s);
}

/* One burst of 40,000 timers: its step grows the lists to ten times what
 * they keep; two or three periods later they are back to their minimum. */
static void burst_lists_are_given_back(void **state)
{
    (void)state;
    enum { N = 40000 };
    tw_service *s = manual_service();
    arm_burst_at(s, N, 5 * T_MS);
    ADVANCE(s, 6 * T_MS);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, N);
    size_t grown = lists_cap(s);
    if (grown < 2 * (size_t)N)
        fail_msg("the burst's lists hold %zu entries: the test does not grow them", grown);
    advance_ms(s, 4 * PERIOD / T_MS);
    printf("lists: %zu entries after a burst of %d, %zu four periods later\n", grown, N,
           lists_cap(s));
    assert_lists_kept_small(s);
    tw_destroy(s);
}

/* A burst every half period: the lists keep what the bursts need the
 * whole time (the same arrays, never cut below a burst); once the bursts
 * stop, they are given back. */
static void recurring_burst_keeps_its_lists(void **state)
{
    (void)state;
    enum { N = 20000, BURSTS = 6 };
    tw_service *s = manual_service();
    size_t least = SIZE_MAX;
    for (int b = 0; b < BURSTS; b++) {
        uint64_t at = tw_now(s) + 2 * T_MS;
        arm_burst_at(s, N, at);
        advance_ms(s, PERIOD / 2 / T_MS);
        size_t due = s->wheel.due.cap + s->wheel.spare.cap;
        least = due < least ? due : least;
    }
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, (uint64_t)N * BURSTS);
    printf("lists: at least %zu entries of due lists between recurring bursts of %d\n", least,
           N);
    if (least < 2 * (size_t)N)
        fail_msg("the due lists were cut to %zu entries between bursts of %d", least, N);
    advance_ms(s, 4 * PERIOD / T_MS);
    assert_lists_kept_small(s);
    tw_destroy(s);
}

/* Callbacks held until the test lets them go: the workers' batches stay
 * out, so the drainer makes one for every TW_BATCH timers of the burst. */
static atomic_bool g_release;

static void held_callback(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    while (!atomic_load(&g_release))
        t_sleep_ns(100 * T_US);
}

/* Whether the idle cursor has stopped coming back for trims. Its lists are
 * its own (a look from here would race with its trims), but its plan is
 * not: while tw__wheel_trim_due finds anything above what is kept, its
 * lists included, the cursor plans to wake up (wake_tick, cursor.c
 * cursor_sleep) at most a period and a tick past its tick cur; a plan
 * further out, or never (UINT64_MAX), means it found nothing left. 0 is
 * its "awake". */
static bool cursor_done_trimming(tw_service *s)
{
    /* Seq_cst: the cursor's store of its plan. Read before cur: a newer cur
     * only makes the plan look nearer. */
    uint64_t w = atomic_load(&s->wake_tick);
    /* Relaxed: the cursor's own variable. */
    uint64_t c = atomic_load_explicit(&s->wheel.cur, memory_order_relaxed);
    return w != 0 && w > c && w - c > 2 * PERIOD / s->cfg.tick_ns;
}

/* With workers and a cursor: a burst's batches go back once the cursor,
 * idle with nothing armed, comes back at the trim period for them (it
 * must not wait for the next timer, which may never come). */
static void idle_cursor_gives_back_a_burst_s_batches(void **state)
{
    (void)state;
    enum { N = 30000 };
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 2;
    tw__trim_period_override = PERIOD;
    tw_service *s = t_service_cfg(&cfg);
    tw__trim_period_override = 0;
    atomic_store(&g_release, false);
    uint64_t at = tw_now(s) + 20 * T_MS;
    for (int i = 0; i < N; i++) {
        tw_timer h;
        ASSERT_RC(tw_schedule_at(s, at, held_callback, NULL, &h), TW_OK);
    }
    /* Relaxed: a statistic the cursor writes. */
    uint64_t made = 0;
    for (int i = 0; i < 5000 && made < N / TW_BATCH; i++) {
        t_sleep_ns(T_MS);
        made = atomic_load_explicit(&s->pool.made, memory_order_relaxed);
    }
    atomic_store(&g_release, true);
    tw_stats st;
    for (int i = 0; i < 5000; i++) {
        tw_stats_get(s, &st);
        if (st.fired == N)
            break;
        t_sleep_ns(T_MS);
    }
    assert_int_equal(st.fired, N);
    if (made <= TW_BATCH_KEEP)
        fail_msg("the burst made %" PRIu64 " batches: the test does not grow them", made);
    int waited = 0;
    while (atomic_load_explicit(&s->pool.made, memory_order_relaxed) > TW_BATCH_KEEP &&
           waited < 3000) {
        t_sleep_ns(T_MS);
        waited++;
    }
    uint64_t left = atomic_load_explicit(&s->pool.made, memory_order_relaxed);
    printf("batches: %" PRIu64 " made for a burst of %d, %" PRIu64 " about %d ms later\n", made,
           N, left, waited);
    if (left > TW_BATCH_KEEP)
        fail_msg("%" PRIu64 " batches kept %d ms after the burst (keep %u)", left, waited,
                 TW_BATCH_KEEP);
    /* The lists are cut on the same periods, but only once two have passed
     * without the burst (a batch count can fall sooner: the pool keeps
     * twice the most one step handed out, and a slow run hands a burst out
     * over several steps). The lists are the cursor's: look after it is
     * joined, once it stops coming back for trims (up to 10 s: a loaded
     * machine may hold it back for periods). A cursor that never cuts them
     * keeps coming back, and one that forgets them sleeps: both fail here. */
    int idle = 0;
    while (!cursor_done_trimming(s) && idle < 10000) {
        t_sleep_ns(T_MS);
        idle++;
    }
    printf("cursor done trimming about %d ms after the batches\n", idle);
    /* Done: nothing past what is kept, the burst's due lists handed to
     * the workers (workers.c, runs) included, or it would come back. */
    if (!cursor_done_trimming(s))
        fail_msg("the idle cursor still comes back to trim 10 s after the burst");
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    assert_lists_kept_small(s);
    tw_destroy(s);
}

/* After a spell of timers the cursor placed and that were then cancelled,
 * a slot of stale entries is no reason to wake: once steps claim nothing,
 * the cursor sweeps the slots ahead of it before it sleeps (wheel.c, the
 * sweep ahead). Here K timers, each in a level-0 slot of its own, are
 * placed (from the log), then all but one cancelled: the cursor, passing
 * the K slots, steps a few times per TW_SWEEP_SLOTS of them, not once
 * each (as before: K steps), leaves no entry, and the live one, which a
 * sweep stops at (read, not placed again), fires once, not before its
 * deadline. */
static _Atomic uint64_t live_ran_at;

static void note_live_ran(tw_timer t, void *arg)
{
    (void)t;
    atomic_store(&live_ran_at, tw_now(arg));
}

static void stale_slots_ahead_are_swept(void **state)
{
    (void)state;
    /* Callbacks on the cursor (workers = 0): one run early would show. The
     * first slot half a second away, and a timer due in 30 ms armed after
     * them, logged too: its poke brings the cursor to drain the log then
     * (the others' pokes plan the drain 8 ticks before the first of them,
     * which left the cancels a few ms: a review, 2026-11-30); then the
     * cancels, with most of half a second to spare. */
    enum { K = 600, FIRST_MS = 500, LIVE = K / 2 };
    tw_service *s = t_monotonic(0, T_MS);
    static tw_timer h[K];
    uint64_t before = tw__reserved_total(s);
    uint64_t live_due = 0;
    atomic_store(&live_ran_at, 0);
    for (int i = 0; i < K; i++) {
        uint64_t delay = (uint64_t)(FIRST_MS + 2 * i) * T_MS;
        if (i == LIVE)
            live_due = tw_now(s) + delay;
        ASSERT_RC(tw_schedule(s, delay, i == LIVE ? note_live_ran : t_noop, s, &h[i]), TW_OK);
    }
    ASSERT_RC(tw_schedule(s, 30 * T_MS, t_noop, NULL, NULL), TW_OK);
    tw_stats st;
    for (int i = 0; i < 5000; i++) {
        tw_stats_get(s, &st);
        if (st.fired == 1 && tw__wheel_entries(s) == K)
            break;
        t_sleep_ns(T_MS);
    }
    assert_int_equal(st.fired, 1); /* the 30 ms one, after the drain */
    assert_int_equal(tw__wheel_entries(s), K);
    assert_true(tw__reserved_total(s) >= before + K + 1);
    for (int i = 0; i < K; i++)
        if (i != LIVE)
            ASSERT_RC(tw_cancel(s, h[i]), TW_OK);
    /* Relaxed: the drainer's count. */
    uint64_t steps = atomic_load_explicit(&s->wheel.steps, memory_order_relaxed);
    /* Past the last slot (2 K ms of them) and a margin; the cursor runs on
     * regardless of this thread. */
    t_sleep_ns((uint64_t)(FIRST_MS + 2 * K + 200) * T_MS);
    uint64_t took = atomic_load_explicit(&s->wheel.steps, memory_order_relaxed) - steps;
    tw_stats_get(s, &st);
    printf("%d stale slots passed in %" PRIu64 " steps; %" PRIu64 " entries left\n", K, took,
           tw__wheel_entries(s));
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.fired, 2);
    assert_true(atomic_load(&live_ran_at) >= live_due);
    assert_int_equal(tw__wheel_entries(s), 0);
    if (took > K / 8)
        fail_msg("%" PRIu64 " steps for %d slots of stale entries", took, K);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(burst_lists_are_given_back),
        cmocka_unit_test(recurring_burst_keeps_its_lists),
        cmocka_unit_test(idle_cursor_gives_back_a_burst_s_batches),
        cmocka_unit_test(stale_slots_ahead_are_swept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
