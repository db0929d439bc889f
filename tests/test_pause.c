/* test_pause.c: tw_pause and tw_resume (issue 15), on MONOTONIC services:
 * with the worker pool, with workers = 0, with the lookahead (1 ms tick and
 * a pool) and without it (100 us tick), and idle (tickless). One test per
 * sentence of the contract in timerwheel.h.
 *
 * Real time is involved, so every check is one that cannot fail by the
 * machine being slow: "nothing started after tw_pause returned" is read
 * from stats.fired (counted before a run's gate opens, so it is final when
 * tw_pause returns); "keeps the time it had left" is checked in service
 * time and as a lower bound in real time; CPU use while paused is compared
 * with a generous ceiling. */
#include "tw_test.h"

#include <pthread.h>
#include <unistd.h>

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    return 0;
}

static uint64_t mono(void)
{
    return tw__clock_monotonic();
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * T_S + (uint64_t)ts.tv_nsec;
}

static tw_service *monotonic(uint32_t workers, uint64_t tick)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = workers;
    cfg.tick_ns = tick;
    return t_service_cfg(&cfg);
}

static uint64_t fired(tw_service *s)
{
    tw_stats st;
    tw_stats_get(s, &st);
    return st.fired;
}

/* A timer that records when it ran, on both clocks. */
typedef struct ran {
    tw_service *s;
    uint64_t deadline;          /* service time */
    _Atomic uint64_t at_service;
    _Atomic uint64_t at_mono;
    _Atomic int runs;
} ran;

static _Atomic uint64_t callback_ns; /* how long each on_ran takes */

static void on_ran(tw_timer t, void *arg)
{
    (void)t;
    ran *r = arg;
    uint64_t now = tw_now(r->s);
    if (atomic_load(&callback_ns))
        t_sleep_ns(atomic_load(&callback_ns));
    atomic_store(&r->at_mono, mono());
    atomic_store(&r->at_service, now);
    atomic_fetch_add(&r->runs, 1);
}

static void wait_runs(ran *r, int n, uint64_t limit_ns)
{
    uint64_t end = mono() + limit_ns;
    while (atomic_load(&r->runs) < n && mono() < end)
        t_sleep_ns(T_MS);
}

/* ---- arguments ------------------------------------------------------------ */

static void manual_and_null_are_einval(void **state)
{
    (void)state;
    ASSERT_RC(tw_pause(NULL), TW_EINVAL);
    ASSERT_RC(tw_resume(NULL), TW_EINVAL);
    tw_service *s = t_default();
    ASSERT_RC(tw_pause(s), TW_EINVAL);
    ASSERT_RC(tw_resume(s), TW_EINVAL);
    tw_destroy(s);
}

/* ---- the clock -------------------------------------------------------------- */

/* "tw_now(s) stays at the pause instant until tw_resume"; idempotent. */
static void now_stays_at_the_pause_instant(void **state)
{
    (void)state;
    tw_service *s = monotonic(1, T_MS);
    uint64_t before = tw_now(s);
    ASSERT_RC(tw_pause(s), TW_OK);
    uint64_t frozen = tw_now(s);
    assert_true(frozen >= before);
    t_sleep_ns(30 * T_MS);
    assert_true(tw_now(s) == frozen);
    ASSERT_RC(tw_pause(s), TW_OK); /* idempotent: the instant stays */
    t_sleep_ns(10 * T_MS);
    assert_true(tw_now(s) == frozen);
    /* Service time moves again from the resume's clock reading, which is
     * after r0, to tw_now's, which is before r1: at most r1 - r0, however
     * long this thread is held up. Had it gone on from CLOCK_MONOTONIC, it
     * would have moved by the 40 ms slept as well. */
    uint64_t r0 = mono();
    ASSERT_RC(tw_resume(s), TW_OK);
    uint64_t after = tw_now(s);
    uint64_t r1 = mono();
    assert_true(after >= frozen); /* it goes on from where it stopped */
    if (after - frozen > r1 - r0) /* ... not from CLOCK_MONOTONIC */
        fail_msg("tw_now moved %" PRIu64 " ns across a tw_resume that took %" PRIu64 " ns",
                 after - frozen, r1 - r0);
    ASSERT_RC(tw_resume(s), TW_OK); /* idempotent */
    assert_true(tw_now(s) >= after);
    tw_destroy(s);
}

/* "tw_now of a MONOTONIC service is CLOCK_MONOTONIC minus the total time
 * spent paused" */
static void now_is_monotonic_minus_time_paused(void **state)
{
    (void)state;
    tw_service *s = monotonic(0, T_MS);
    uint64_t lo = 0, hi = 0;
    for (int round = 0; round < 3; round++) {
        uint64_t m0 = mono();
        ASSERT_RC(tw_pause(s), TW_OK);
        uint64_t m1 = mono();
        t_sleep_ns(15 * T_MS);
        uint64_t m2 = mono();
        ASSERT_RC(tw_resume(s), TW_OK);
        uint64_t m3 = mono();
        lo += m2 - m1; /* surely paused between these */
        hi += m3 - m0; /* at most between these */
    }
    /* tw_now reads CLOCK_MONOTONIC between m_before and m_after and takes
     * the total paused off it, so m_before - now <= paused <= hi and
     * m_after - now >= paused >= lo, however long this thread is held up
     * between the reads. (Compared as sums: m_before - now is negative if
     * the thread was held up longer than the time paused.) */
    uint64_t m_before = mono();
    uint64_t now = tw_now(s);
    uint64_t m_after = mono();
    if (m_before > now + hi || m_after < now + lo)
        fail_msg("CLOCK_MONOTONIC - tw_now = %" PRId64 " to %" PRId64 " ns; paused between %"
                 PRIu64 " and %" PRIu64 " ns", (int64_t)(m_before - now),
                 (int64_t)(m_after - now), lo, hi);
    tw_destroy(s);
}

/* ---- nothing starts while paused ------------------------------------------ */

/* "once it returns, no callback starts": timers spread over the next 20
 * ms, paused in the middle of them; the runs counted when tw_pause returns
 * are all there are until tw_resume; afterwards every timer runs, never
 * early in service time. */
static bool no_callback_starts_after_pause_returns_once(uint32_t workers, uint64_t tick,
                                                        uint64_t spread, uint64_t cb_ns)
{
    enum { N = 400 };
    tw_service *s = monotonic(workers, tick);
    ran *v = calloc(N, sizeof *v);
    assert_non_null(v);
    atomic_store(&callback_ns, cb_ns);
    for (int i = 0; i < N; i++) {
        v[i].s = s;
        uint64_t delay = (uint64_t)i * spread / N;
        v[i].deadline = tw_now(s) + delay;
        ASSERT_RC(tw_schedule(s, delay, on_ran, &v[i], NULL), TW_OK);
    }
    t_sleep_ns(10 * T_MS);
    ASSERT_RC(tw_pause(s), TW_OK);
    uint64_t at_pause = fired(s), frozen = tw_now(s);
    t_sleep_ns(60 * T_MS); /* three times the timers' spread */
    uint64_t later = fired(s);
    if (later != at_pause)
        fail_msg("workers %u tick %" PRIu64 ": %" PRIu64 " runs started while paused",
                 workers, tick, later - at_pause);
    ASSERT_RC(tw_resume(s), TW_OK);
    for (int i = 0; i < N; i++)
        wait_runs(&v[i], 1, 10 * T_S);
    for (int i = 0; i < N; i++) {
        assert_int_equal(atomic_load(&v[i].runs), 1);
        if (atomic_load(&v[i].at_service) < v[i].deadline)
            fail_msg("timer %d ran at %" PRIu64 ", before its deadline %" PRIu64, i,
                     atomic_load(&v[i].at_service), v[i].deadline);
        /* one that was not due at the pause ran after it, in service time */
        if (v[i].deadline > frozen)
            assert_true(atomic_load(&v[i].at_service) >= frozen);
    }
    /* Did the pause come before the last run started? (A test thread
     * preempted for the timers' whole spread and their runs paused after
     * them all: that run shows nothing; the caller tries again.) */
    bool meaningful = at_pause < N;
    atomic_store(&callback_ns, 0);
    free(v);
    tw_destroy(s);
    return meaningful;
}

static void no_callback_starts_after_pause_returns(uint32_t workers, uint64_t tick,
                                                   uint64_t spread, uint64_t cb_ns)
{
    for (int attempt = 0; attempt < 5; attempt++)
        if (no_callback_starts_after_pause_returns_once(workers, tick, spread, cb_ns))
            return;
    fail_msg("workers %u: in 5 attempts every run had started before the pause (the "
             "machine held this thread back for the timers' whole spread)", workers);
}

/* Timers spread over 20 ms, and quick callbacks: the pause finds some due
 * in the wheel, some claimed ahead (the lookahead), some in batches. */
static void no_start_while_paused_pool_lookahead(void **state)
{
    (void)state;
    no_callback_starts_after_pause_returns(2, T_MS, 20 * T_MS, 0);
}

static void no_start_while_paused_pool_no_lookahead(void **state)
{
    (void)state;
    no_callback_starts_after_pause_returns(3, 100 * T_US, 20 * T_MS, 0);
}

static void no_start_while_paused_cursor_runs_callbacks(void **state)
{
    (void)state;
    no_callback_starts_after_pause_returns(0, T_MS, 20 * T_MS, 0);
}

/* All due within 2 ms, callbacks of 100 us: at the pause a backlog of due
 * timers is claimed and queued, which only the runners' gate holds back
 * (the frozen clock does not: they are due). */
static void no_start_while_paused_backlog_pool(void **state)
{
    (void)state;
    no_callback_starts_after_pause_returns(2, T_MS, 2 * T_MS, 100 * T_US);
}

static void no_start_while_paused_backlog_workers_0(void **state)
{
    (void)state;
    no_callback_starts_after_pause_returns(0, T_MS, 2 * T_MS, 100 * T_US);
}

/* ---- pending timers keep the time they had left ---------------------------- */

static void pending_timers_keep_their_time_left(uint32_t workers)
{
    tw_service *s = monotonic(workers, T_MS);
    ran r = {.s = s};
    /* 300 ms: the pause must come before the deadline (with 80 ms, a stall
     * of 60 ms failed the test: a review of valgrind's pace). */
    r.deadline = tw_now(s) + 300 * T_MS;
    ASSERT_RC(tw_schedule(s, 300 * T_MS, on_ran, &r, NULL), TW_OK);
    t_sleep_ns(20 * T_MS);
    ASSERT_RC(tw_pause(s), TW_OK);
    uint64_t frozen = tw_now(s);
    assert_true(frozen < r.deadline); /* else the machine stalled 280 ms: say so */
    t_sleep_ns(r.deadline - frozen + 50 * T_MS); /* past the deadline in real time */
    assert_int_equal(atomic_load(&r.runs), 0);
    uint64_t resumed = mono();
    ASSERT_RC(tw_resume(s), TW_OK);
    wait_runs(&r, 1, 10 * T_S);
    assert_int_equal(atomic_load(&r.runs), 1);
    assert_true(atomic_load(&r.at_service) >= r.deadline);
    /* in real time: no sooner than the time it had left after the resume */
    uint64_t left = r.deadline - frozen;
    if (atomic_load(&r.at_mono) < resumed + left)
        fail_msg("ran %" PRIu64 " ns after tw_resume, had %" PRIu64 " ns left",
                 atomic_load(&r.at_mono) - resumed, left);
    tw_destroy(s);
}

static void keep_time_left_pool(void **state)
{
    (void)state;
    pending_timers_keep_their_time_left(2);
}

static void keep_time_left_workers_0(void **state)
{
    (void)state;
    pending_timers_keep_their_time_left(0);
}

/* "Scheduling, rescheduling and cancelling keep working meanwhile (delays
 * count from the frozen clock)" */
typedef struct seen {
    tw_timer h;
    uint64_t deadline;
} seen;

static void find_deadline(const tw_timer_info *info, void *ctx)
{
    seen *x = ctx;
    if (info->timer == x->h)
        x->deadline = info->deadline_ns;
}

static void calls_work_while_paused(void **state)
{
    (void)state;
    tw_service *s = monotonic(2, T_MS);
    ASSERT_RC(tw_pause(s), TW_OK);
    uint64_t frozen = tw_now(s);
    ran a = {.s = s}, b = {.s = s}, c = {.s = s};
    tw_timer ha, hb, hc;
    a.deadline = frozen + 30 * T_MS;
    ASSERT_RC(tw_schedule(s, 30 * T_MS, on_ran, &a, &ha), TW_OK);
    ASSERT_RC(tw_schedule(s, 5 * T_MS, on_ran, &b, &hb), TW_OK);
    ASSERT_RC(tw_schedule_at(s, frozen + 40 * T_MS, on_ran, &c, &hc), TW_OK);
    t_sleep_ns(10 * T_MS);
    seen x = {.h = ha};
    tw_foreach_pending(s, find_deadline, &x);
    assert_true(x.deadline == frozen + 30 * T_MS); /* from the frozen clock */
    ASSERT_RC(tw_reschedule(s, hb, 50 * T_MS), TW_OK);
    b.deadline = frozen + 50 * T_MS;
    x.h = hb;
    tw_foreach_pending(s, find_deadline, &x);
    assert_true(x.deadline == frozen + 50 * T_MS);
    ASSERT_RC(tw_cancel(s, hc), TW_OK);
    t_sleep_ns(60 * T_MS);
    assert_int_equal(atomic_load(&a.runs) + atomic_load(&b.runs), 0);
    ASSERT_RC(tw_resume(s), TW_OK);
    wait_runs(&a, 1, 10 * T_S);
    wait_runs(&b, 1, 10 * T_S);
    assert_int_equal(atomic_load(&a.runs), 1);
    assert_int_equal(atomic_load(&b.runs), 1);
    assert_true(atomic_load(&a.at_service) >= a.deadline);
    assert_true(atomic_load(&b.at_service) >= b.deadline);
    t_sleep_ns(50 * T_MS);
    assert_int_equal(atomic_load(&c.runs), 0); /* cancelled while paused */
    tw_destroy(s);
}

/* ---- periodic timers: no bunching after a resume ---------------------------- */

static void resumed_periodic_timers_are_not_bunched(uint32_t workers)
{
    tw_service *s = monotonic(workers, T_MS);
    ASSERT_RC(tw_schedule_every(s, 10 * T_MS, 10 * T_MS, t_noop, NULL, NULL), TW_OK);
    t_sleep_ns(55 * T_MS);
    ASSERT_RC(tw_pause(s), TW_OK);
    /* Runs started (stats.fired), not runs counted by the callback: a run
     * that started before tw_pause returned (it does not wait for it) may
     * count itself after this. */
    uint64_t before = fired(s);
    t_sleep_ns(300 * T_MS); /* 30 periods */
    uint64_t paused = fired(s);
    if (paused != before)
        fail_msg("%" PRIu64 " runs started while paused", paused - before);
    uint64_t r0 = mono();
    ASSERT_RC(tw_resume(s), TW_OK);
    t_sleep_ns(50 * T_MS);
    uint64_t after = fired(s) - before;
    uint64_t span = mono() - r0;
    /* a bunch would be up to 30 runs at once; without one, about span / 10 ms */
    if (after > span / (10 * T_MS) + 2)
        fail_msg("%" PRIu64 " runs in %" PRIu64 " ms after tw_resume", after,
                 (uint64_t)(span / T_MS));
    tw_destroy(s);
}

static void periodic_not_bunched_pool(void **state)
{
    (void)state;
    resumed_periodic_timers_are_not_bunched(2);
}

static void periodic_not_bunched_workers_0(void **state)
{
    (void)state;
    resumed_periodic_timers_are_not_bunched(0);
}

/* ---- a paused service burns no CPU ------------------------------------------- */

/* Due timers held back (claimed ahead by the cursor with the lookahead, in
 * workers' batches), a periodic timer of a tick, and the tickless idle
 * path: while paused, the process's threads sleep. The ceiling is loose
 * (a spinning thread would burn the whole 300 ms). */
static void paused_service_burns_no_cpu(uint32_t workers, uint64_t tick)
{
    tw_service *s = monotonic(workers, tick);
    for (int i = 0; i < 1000; i++)
        ASSERT_RC(tw_schedule(s, 5 * T_MS + (uint64_t)i * 10 * T_US, t_noop, NULL, NULL),
                  TW_OK);
    ASSERT_RC(tw_schedule_every(s, tick, tick, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule(s, 3600 * T_S, t_noop, NULL, NULL), TW_OK);
    t_sleep_ns(8 * T_MS); /* some due, some claimed, some waiting */
    ASSERT_RC(tw_pause(s), TW_OK);
    t_sleep_ns(20 * T_MS); /* let every thread reach its sleep */
    uint64_t c0 = cpu_ns(), m0 = mono();
    t_sleep_ns(300 * T_MS);
    uint64_t used = cpu_ns() - c0, wall = mono() - m0;
    if (used > wall / 20)
        fail_msg("workers %u tick %" PRIu64 ": %" PRIu64 " us of CPU in %" PRIu64
                 " us paused", workers, tick, used / 1000, wall / 1000);
    ASSERT_RC(tw_resume(s), TW_OK);
    tw_destroy(s);
}

static void no_cpu_paused_pool_lookahead(void **state)
{
    (void)state;
    paused_service_burns_no_cpu(2, T_MS);
}

static void no_cpu_paused_pool_short_tick(void **state)
{
    (void)state;
    paused_service_burns_no_cpu(2, 100 * T_US);
}

static void no_cpu_paused_workers_0(void **state)
{
    (void)state;
    paused_service_burns_no_cpu(0, T_MS);
}

/* ---- from callbacks, without waiting for running callbacks ------------------ */

typedef struct blocker {
    tw_service *s;
    _Atomic int entered;
    _Atomic int release;
    _Atomic int pause_rc;
    _Atomic uint64_t fired_at_pause; /* stats.fired when its tw_pause returned */
} blocker;

static void block_until_released(tw_timer t, void *arg)
{
    (void)t;
    blocker *b = arg;
    atomic_store(&b->entered, 1);
    while (!atomic_load(&b->release))
        t_sleep_ns(100 * T_US);
}

/* "tw_pause does not wait for running callbacks": a callback blocks until
 * the test releases it after tw_pause returned (a wait would hang: the
 * alarm ends the test). */
static void pause_does_not_wait_for_running_callbacks(void **state)
{
    (void)state;
    tw_service *s = monotonic(2, T_MS);
    blocker b = {.s = s};
    ASSERT_RC(tw_schedule(s, T_MS, block_until_released, &b, NULL), TW_OK);
    while (!atomic_load(&b.entered))
        t_sleep_ns(T_MS);
    t_watchdog("tw_pause, with a callback running", 20);
    ASSERT_RC(tw_pause(s), TW_OK);
    t_watchdog_off();
    atomic_store(&b.release, 1);
    ASSERT_RC(tw_resume(s), TW_OK);
    tw_destroy(s);
}

static void pause_from_callback(tw_timer t, void *arg)
{
    (void)t;
    blocker *b = arg;
    atomic_store(&b->pause_rc, tw_pause(b->s));
    atomic_store(&b->fired_at_pause, fired(b->s));
    atomic_store(&b->entered, 1);
}

/* "callable from any thread and from callbacks": a callback pauses its own
 * service; nothing else starts until the test resumes it. Runs are read
 * from stats.fired, which is final when the callback's tw_pause returns.
 * `later` is due 10 ms after the pausing callback: if that callback is
 * held up 10 ms (another worker, or a cursor catching up on both ticks at
 * once, may start `later` first), the run shows nothing and the caller
 * tries again. */
static bool pause_and_resume_from_callbacks_once(uint32_t workers)
{
    tw_service *s = monotonic(workers, T_MS);
    blocker b = {.s = s};
    atomic_store(&b.pause_rc, 99);
    ASSERT_RC(tw_schedule(s, 5 * T_MS, pause_from_callback, &b, NULL), TW_OK);
    ran later = {.s = s};
    ASSERT_RC(tw_schedule(s, 15 * T_MS, on_ran, &later, NULL), TW_OK);
    t_watchdog("tw_pause from a callback", 20);
    while (!atomic_load(&b.entered))
        t_sleep_ns(T_MS);
    t_watchdog_off();
    ASSERT_RC(atomic_load(&b.pause_rc), TW_OK);
    uint64_t at_pause = atomic_load(&b.fired_at_pause);
    t_sleep_ns(60 * T_MS); /* past `later`'s deadline in real time */
    uint64_t paused = fired(s);
    if (paused != at_pause)
        fail_msg("workers %u: %" PRIu64 " runs started while paused from a callback",
                 workers, paused - at_pause);
    ASSERT_RC(tw_resume(s), TW_OK);
    wait_runs(&later, 1, 10 * T_S);
    assert_int_equal(atomic_load(&later.runs), 1);
    tw_destroy(s);
    return at_pause == 1; /* only the pausing callback: `later` was held back */
}

static void pause_and_resume_from_callbacks(uint32_t workers)
{
    for (int attempt = 0; attempt < 5; attempt++)
        if (pause_and_resume_from_callbacks_once(workers))
            return;
    fail_msg("workers %u: in 5 attempts `later` had started before the callback's "
             "tw_pause (the machine held the callback back 10 ms each time)", workers);
}

static void from_callbacks_pool(void **state)
{
    (void)state;
    pause_and_resume_from_callbacks(2);
}

static void from_callbacks_workers_0(void **state)
{
    (void)state;
    pause_and_resume_from_callbacks(0);
}

/* ---- tw_stop on a paused service --------------------------------------------- */

static _Atomic int dropped;

static void count_dropped(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_fetch_add(&dropped, 1);
}

static void stop_works_on_a_paused_service(uint32_t workers, uint64_t tick)
{
    tw_service *s = monotonic(workers, tick);
    enum { N = 300 };
    for (int i = 0; i < N; i++)
        ASSERT_RC(tw_schedule(s, (uint64_t)i * 20 * T_US, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule_every(s, T_MS, T_MS, t_noop, NULL, NULL), TW_OK);
    t_sleep_ns(3 * T_MS); /* some ran, some claimed, some in the wheel */
    ASSERT_RC(tw_pause(s), TW_OK);
    uint64_t ran_before = fired(s);
    atomic_store(&dropped, 0);
    t_watchdog("tw_stop on a paused service", 20);
    ASSERT_RC(tw_stop(s, count_dropped), TW_OK);
    t_watchdog_off();
    tw_stats st;
    tw_stats_get(s, &st);
    assert_true(st.fired == ran_before); /* nothing started after the pause */
    assert_true(st.pending == 0);
    /* the rest was handed to on_pending, the periodic timer among them */
    assert_true(st.dropped == (uint64_t)atomic_load(&dropped));
    assert_true(st.dropped >= 1);
    assert_true(st.scheduled == N + 1);
    /* pause and resume still move tw_now after the stop */
    ASSERT_RC(tw_resume(s), TW_OK);
    ASSERT_RC(tw_pause(s), TW_OK);
    uint64_t f = tw_now(s);
    t_sleep_ns(5 * T_MS);
    assert_true(tw_now(s) == f);
    tw_destroy(s);
}

static void stop_paused_pool(void **state)
{
    (void)state;
    stop_works_on_a_paused_service(2, T_MS);
}

static void stop_paused_workers_0(void **state)
{
    (void)state;
    stop_works_on_a_paused_service(0, 100 * T_US);
}

/* A worker that held back to watch a runner parked in the pause gate
 * with a batch in hand, and was preempted before it read the word it
 * waits on, while tw_stop raised quit and bumped that word: it waited on a
 * paused service with no time-out, and tw_stop never returned (CI once,
 * 2026-11-29). The hook stands in for the preemption, 2 ms at the start
 * of every watch: each round's watcher then reads the word after the
 * stop's last bump. */
static _Atomic int watches;

static void slow_watch(void)
{
    atomic_fetch_add(&watches, 1);
    t_sleep_ns(2 * T_MS);
}

static void stop_paused_pool_with_a_slow_watcher(void **state)
{
    (void)state;
    atomic_store(&watches, 0);
    atomic_store(&tw__watch_hook, slow_watch);
    for (int round = 0; round < 5; round++)
        stop_works_on_a_paused_service(2, T_MS);
    atomic_store(&tw__watch_hook, NULL);
    assert_true(atomic_load(&watches) > 0); /* the path was taken */
}

/* A runner that has claimed a timer is not yet at its callback: the
 * budget and the lateness figures come first. tw_pause waits for it there
 * (its gate is up until the callback's call): the gate used to open at the
 * claim, and a runner preempted in between started its callback after
 * tw_pause had returned (a review, 2026-11-28). The runner is held after
 * its claim (tw__run_claimed_hook); tw_pause, on another thread, must not
 * return meanwhile. */
static _Atomic int held_in, held_go, paused_back, cb_started;

static void hold_after_claim(void)
{
    atomic_store(&held_in, 1);
    uint64_t end = mono() + 10 * T_S;
    while (!atomic_load(&held_go) && mono() < end)
        t_sleep_ns(100 * T_US);
}

static void note_start(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&cb_started, 1);
}

static void *pause_it(void *arg)
{
    tw_pause(arg);
    atomic_store(&paused_back, 1);
    return NULL;
}

static void pause_waits_for_a_claimed_run(void **state)
{
    (void)state;
    atomic_store(&held_in, 0);
    atomic_store(&held_go, 0);
    atomic_store(&paused_back, 0);
    atomic_store(&cb_started, 0);
    tw_config cfg;
    tw_config_init(&cfg);
    tw_service *s = t_service_cfg(&cfg);
    atomic_store(&tw__run_claimed_hook, hold_after_claim);
    ASSERT_RC(tw_schedule(s, 5 * T_MS, note_start, NULL, NULL), TW_OK);
    uint64_t end = mono() + 10 * T_S;
    while (!atomic_load(&held_in) && mono() < end)
        t_sleep_ns(100 * T_US);
    assert_true(atomic_load(&held_in));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pause_it, s), 0);
    t_sleep_ns(50 * T_MS);
    assert_int_equal(atomic_load(&paused_back), 0); /* waits for the claimed run */
    assert_int_equal(atomic_load(&cb_started), 0);
    atomic_store(&held_go, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    atomic_store(&tw__run_claimed_hook, NULL);
    tw_stats st;
    tw_stats_get(s, &st);
    assert_int_equal(st.fired, 1);
    ASSERT_RC(tw_resume(s), TW_OK);
    end = mono() + 10 * T_S;
    while (!atomic_load(&cb_started) && mono() < end)
        t_sleep_ns(100 * T_US);
    assert_true(atomic_load(&cb_started));
    tw_destroy(s);
}

/* ---- back-pressure while paused ------------------------------------------ */

/* "a paused service's threads sleep (no CPU), but for the cursor's
 * compaction of what armings and cancels leave past the wheel's
 * back-pressure line": the timers armed and cancelled while paused may be
 * due within the frozen clock's next tick, whose slot no step drains
 * while paused. The paused cursor compacts that slot too. Before
 * (2026-11-30), it compacted every slot but that one: each 1024 such
 * arm-and-cancels past the line waited 0.1 s for a compaction that took
 * nothing, then left their entries for good, 8 bytes a call (20M calls
 * of a program ran at 10 thousand a second). Planted (the next tick's
 * slot skipped): the entries pass the bound. A timer live in the slot
 * keeps its entry and runs after tw_resume. */
static void paused_churn_due_next_tick_stays_bounded(void **state)
{
    (void)state;
    const uint64_t tick = 100 * T_MS; /* a pause in the tick of a fire */
    tw_service *s = monotonic(2, tick);
    uint64_t c = 0, frozen = 0;
    for (int attempt = 0;; attempt++) {
        ran step = {.s = s};
        ASSERT_RC(tw_schedule(s, 0, on_ran, &step, NULL), TW_OK);
        wait_runs(&step, 1, 10 * T_S); /* the cursor has stepped to now */
        assert_int_equal(atomic_load(&step.runs), 1);
        ASSERT_RC(tw_pause(s), TW_OK);
        frozen = tw__clock_read(s) - s->origin; /* where deadlines count from */
        /* Relaxed: a look at the cursor's word; it sleeps now. */
        c = atomic_load_explicit(&s->wheel.cur, memory_order_relaxed);
        if ((c + 1) * tick > frozen)
            break;
        ASSERT_RC(tw_resume(s), TW_OK);
        if (attempt == 20)
            fail_msg("twenty pauses all came a tick after a fire");
    }
    uint64_t d = (c + 1) * tick - frozen; /* due at the next tick's start */
    assert_int_equal(tw__tick_of(s, frozen + d), c + 1);
    ran live = {.s = s, .deadline = tw_now(s) + d};
    ASSERT_RC(tw_schedule(s, d, on_ran, &live, NULL), TW_OK);
    /* Plus two waits given up (a compaction that outlasts the looks:
     * sanitizers, valgrind), each followed by TW_PRESSURE_EVERY more. */
    uint64_t bound = tw__wheel_pressure_line(s, 1) + 3 * TW_PRESSURE_EVERY + 1;
    uint64_t calls = bound + 64 * TW_PRESSURE_EVERY, worst = 0;
    for (uint64_t k = 0; k < calls; k++) {
        tw_timer h;
        ASSERT_RC(tw_schedule(s, d, t_noop, NULL, &h), TW_OK);
        ASSERT_RC(tw_cancel(s, h), TW_OK);
        t_entries_within(s, k, calls, bound, &worst);
    }
    print_message("      %" PRIu64 " arm-and-cancels due at tick %" PRIu64
                  " (the cursor's %" PRIu64 "), paused: at most %" PRIu64
                  " entries (bound %" PRIu64 ")\n",
                  calls, c + 1, c, worst, bound);
    /* The path was taken, unless the paused cursor's own compaction kept
     * the entries well under the line: under valgrind it was still in its
     * rounds as the calls began (a run of scripts/test-proof.sh valgrind,
     * 2026-11-30: 393 thousand at most, the line 557 thousand); the bound
     * is what holds then. Where the producers' waits hold them, they stay
     * at the line, a few under it as the samples (every 4096 calls) find
     * them: 557058 natively. */
    if (worst + 2 * TW_PRESSURE_EVERY > tw__wheel_pressure_line(s, 1))
        assert_true(tw__rare_total(s, TW_RARE_PRESSURE) > 0);
    /* Relaxed: as above; the paused cursor never stepped. */
    assert_int_equal(atomic_load_explicit(&s->wheel.cur, memory_order_relaxed), c);
    assert_int_equal(atomic_load(&live.runs), 0);
    ASSERT_RC(tw_resume(s), TW_OK);
    wait_runs(&live, 1, 10 * T_S);
    assert_int_equal(atomic_load(&live.runs), 1);
    assert_true(atomic_load(&live.at_service) >= live.deadline);
    tw_destroy(s);
}

/* workers = 0: a pause that comes while the cursor runs a list of due
 * callbacks holds the cursor at the pause gate, between two of them, until
 * tw_resume. What producers arm and cancel meanwhile is compacted there,
 * as the paused cursor's loop does (guarantees 6 and 9). Before
 * (2026-11-30) it stayed: a review's program left 20M entries, 166 MB.
 * Planted (no compaction at the gate): the entries pass the bound. */
static atomic_int g_gate_first_in;

/* Both timers of the list run this: the first to start holds the cursor
 * until the pause, the other counts its run. Which of the two starts first
 * is not the test's to choose: a list's order is not its timers' arming
 * order. Before, the one armed first held the cursor, and under
 * ThreadSanitizer (a fresh-clone CI run, 2026-11-30) the one armed second
 * had run before the pause: with one runner and the gate holding, it can
 * only have started first. */
static void one_of_the_list(tw_timer t, void *arg)
{
    ran *other = arg;
    if (atomic_exchange(&g_gate_first_in, 1) == 0) {
        while (!tw__clock_paused(other->s))
            t_sleep_ns(100 * T_US);
        return;
    }
    on_ran(t, other);
}

static void paused_mid_list_without_workers_still_compacts(void **state)
{
    (void)state;
    tw_service *s = monotonic(0, T_MS);
    atomic_store(&g_gate_first_in, 0);
    ran second = {.s = s};
    uint64_t at = tw_now(s) + 20 * T_MS;
    ASSERT_RC(tw_schedule_at(s, at, one_of_the_list, &second, NULL), TW_OK);
    ASSERT_RC(tw_schedule_at(s, at, one_of_the_list, &second, NULL), TW_OK);
    uint64_t end = t_mono_ns() + 10 * T_S;
    while (!atomic_load(&g_gate_first_in) && t_mono_ns() < end)
        t_sleep_ns(100 * T_US);
    assert_true(atomic_load(&g_gate_first_in));
    ASSERT_RC(tw_pause(s), TW_OK); /* the first returns; the cursor stops at the gate */
    uint64_t bound = tw__wheel_pressure_line(s, 1) + 3 * TW_PRESSURE_EVERY + 1;
    uint64_t calls = bound + 64 * TW_PRESSURE_EVERY, worst = 0;
    for (uint64_t k = 0; k < calls; k++) {
        tw_timer h;
        ASSERT_RC(tw_schedule(s, 0, t_noop, NULL, &h), TW_OK); /* due at once: placed */
        ASSERT_RC(tw_cancel(s, h), TW_OK);
        t_entries_within(s, k, calls, bound, &worst);
    }
    print_message("      %" PRIu64 " arm-and-cancels, the cursor at the gate mid-list: at most "
                  "%" PRIu64 " entries (bound %" PRIu64 ")\n", calls, worst, bound);
    if (worst + 2 * TW_PRESSURE_EVERY > tw__wheel_pressure_line(s, 1)) /* as above */
        assert_true(tw__rare_total(s, TW_RARE_PRESSURE) > 0);
    assert_int_equal(atomic_load(&second.runs), 0);
    ASSERT_RC(tw_resume(s), TW_OK);
    wait_runs(&second, 1, 10 * T_S);
    assert_int_equal(atomic_load(&second.runs), 1);
    tw_destroy(s);
}

/* ---- the heavy fence refused after registering ---------------------------- */

/* A seccomp filter installed after the first tw_create may refuse the
 * expedited membarrier (the kernel may also answer ENOMEM): the pause's
 * heavy fence then takes the global command, as strong, and the pause
 * holds as before (threads.c). Before (2026-11-30) a failure fell back to
 * a local fence, which orders only the caller: the gate's compiler
 * barrier on the runners' side went unpaired. Planted (the global
 * command not taken): the process aborts. */
static void pause_holds_with_the_expedited_fence_refused(void **state)
{
    (void)state;
    tw_service *s = monotonic(2, T_MS);
    if (tw__fence_real || !tw__fence_global_offered()) {
        tw_destroy(s);
        skip(); /* real fences on both sides already, or no global command */
    }
    ran r = {.s = s};
    r.deadline = tw_now(s) + 300 * T_MS;
    ASSERT_RC(tw_schedule(s, 300 * T_MS, on_ran, &r, NULL), TW_OK);
    uint64_t calls = atomic_load(&tw__fence_global_calls);
    atomic_store(&tw__fence_refuse_expedited, true);
    int rc = tw_pause(s);
    atomic_store(&tw__fence_refuse_expedited, false);
    ASSERT_RC(rc, TW_OK);
    assert_true(atomic_load(&tw__fence_global_calls) > calls);
    uint64_t frozen = tw_now(s);
    t_sleep_ns(r.deadline > frozen ? r.deadline - frozen + 50 * T_MS : 50 * T_MS);
    assert_int_equal(atomic_load(&r.runs), 0);
    ASSERT_RC(tw_resume(s), TW_OK);
    wait_runs(&r, 1, 10 * T_S);
    assert_int_equal(atomic_load(&r.runs), 1);
    assert_true(atomic_load(&r.at_service) >= r.deadline);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(manual_and_null_are_einval, setup),
        cmocka_unit_test_setup(pause_holds_with_the_expedited_fence_refused, setup),
        cmocka_unit_test_setup(now_stays_at_the_pause_instant, setup),
        cmocka_unit_test_setup(now_is_monotonic_minus_time_paused, setup),
        cmocka_unit_test_setup(no_start_while_paused_pool_lookahead, setup),
        cmocka_unit_test_setup(no_start_while_paused_pool_no_lookahead, setup),
        cmocka_unit_test_setup(no_start_while_paused_cursor_runs_callbacks, setup),
        cmocka_unit_test_setup(no_start_while_paused_backlog_pool, setup),
        cmocka_unit_test_setup(no_start_while_paused_backlog_workers_0, setup),
        cmocka_unit_test_setup(keep_time_left_pool, setup),
        cmocka_unit_test_setup(keep_time_left_workers_0, setup),
        cmocka_unit_test_setup(calls_work_while_paused, setup),
        cmocka_unit_test_setup(paused_churn_due_next_tick_stays_bounded, setup),
        cmocka_unit_test_setup(paused_mid_list_without_workers_still_compacts, setup),
        cmocka_unit_test_setup(periodic_not_bunched_pool, setup),
        cmocka_unit_test_setup(periodic_not_bunched_workers_0, setup),
        cmocka_unit_test_setup(no_cpu_paused_pool_lookahead, setup),
        cmocka_unit_test_setup(no_cpu_paused_pool_short_tick, setup),
        cmocka_unit_test_setup(no_cpu_paused_workers_0, setup),
        cmocka_unit_test_setup(pause_does_not_wait_for_running_callbacks, setup),
        cmocka_unit_test_setup(pause_waits_for_a_claimed_run, setup),
        cmocka_unit_test_setup(from_callbacks_pool, setup),
        cmocka_unit_test_setup(from_callbacks_workers_0, setup),
        cmocka_unit_test_setup(stop_paused_pool, setup),
        cmocka_unit_test_setup(stop_paused_workers_0, setup),
        cmocka_unit_test_setup(stop_paused_pool_with_a_slow_watcher, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
