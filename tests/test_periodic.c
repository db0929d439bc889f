/* test_periodic.c: tw_schedule_every; fixed rate, no drift, missed runs skipped. */
#include "tw_test.h"

#include <pthread.h>
#include <stdatomic.h>

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    t_seq = 0;
    return 0;
}

/* A periodic timer with its own oracle: the deadline of its next run,
 * advanced in the callback by the documented rule (the smallest
 * deadline + k * period that is later than the clock). */
typedef struct per {
    tw_service *s;
    tw_timer h;
    uint64_t period;
    uint64_t next;      /* expected deadline of the next run */
    int runs;
    int runs_this_advance;
    uint64_t ran_at[64];
} per;

static void per_run(tw_timer t, void *arg)
{
    per *p = arg;
    uint64_t now = tw_now(p->s);
    CB_EXPECT(t == p->h, "periodic run got handle %#" PRIx64 ", armed %#" PRIx64, t, p->h);
    CB_EXPECT(now >= p->next, "periodic run early: at %" PRIu64 ", deadline %" PRIu64,
              now, p->next);
    if (p->runs < 64)
        p->ran_at[p->runs] = now;
    p->runs++;
    p->runs_this_advance++;
    /* The skip rule (MANUAL): a run is missed only if its due tick was
     * processed already, i.e. its deadline is at or before the last tick
     * boundary tw_advance reached; the clock's value past it is not. */
    uint64_t d = p->next, tick = p->s->cfg.tick_ns, passed = now / tick * tick;
    p->next = d + p->period > passed ? d + p->period
                                     : d + ((passed - d) / p->period + 1) * p->period;
}

static void per_arm(tw_service *s, per *p, uint64_t first, uint64_t period)
{
    memset(p, 0, sizeof *p);
    p->s = s;
    p->period = period;
    p->next = tw_now(s) + first;
    ASSERT_RC(tw_schedule_every(s, first, period, per_run, p, &p->h), TW_OK);
    assert_true(p->h != 0);
    CHECK(s);
}

/* after an advance: nothing overdue by a tick, never two runs at once */
static void per_expect(per *p, size_t n, uint64_t now, uint64_t tick)
{
    for (size_t i = 0; i < n; i++) {
        if (t_sat_add(p[i].next, tick) <= now)
            fail_msg("periodic %zu (period %" PRIu64 "): run due at %" PRIu64
                     " has not started by %" PRIu64, i, p[i].period, p[i].next, now);
        if (p[i].runs_this_advance > 1)
            fail_msg("periodic %zu ran %d times in one advance (missed runs must be skipped)",
                     i, p[i].runs_this_advance);
        p[i].runs_this_advance = 0;
    }
}

/* 1.3 ms period on a 1 ms tick, one-tick steps for 2 s. The oracle keeps
 * the deadlines on the grid first + k * period: a timer that re-armed from
 * its run time instead (drift) would be a tick late within a few runs. */
/* advance, then check the periodic timers p[0 .. n) */
#define PADVANCE(s, p, n, now)                       \
    do {                                             \
        ADVANCE(s, now);                             \
        per_expect(p, n, now, (s)->cfg.tick_ns);     \
    } while (0)

static void fixed_rate_no_drift_period_not_multiple_of_tick(void **state)
{
    (void)state;
    const uint64_t tick = T_MS, period = 1300 * T_US, first = 500 * T_US;
    tw_service *s = t_default();
    per p;
    per_arm(s, &p, first, period);
    for (uint64_t i = 1; i <= 2000; i++) {
        ADVANCE(s, i * tick);
        per_expect(&p, 1, i * tick, tick);
    }
    /* runs are at most two ticks apart from their grid point, so at most
     * one in two grid points is skipped */
    assert_true(p.runs >= 1539 / 2);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, (uint64_t)p.runs);
    assert_int_equal(st.scheduled, 1);
    assert_int_equal(st.pending, 1);
    tw_destroy(s);
}

/* odd steps, some spanning several periods: the phase is kept */
static void periodic_with_random_steps_follows_skip_rule(void **state)
{
    (void)state;
    static const uint64_t periods[] = {1, 999, 100 * T_US, T_MS - 1, T_MS, T_MS + 1,
                                       1300 * T_US, 7 * T_MS, 64 * T_MS, 1000 * T_MS + 3};
    enum { N = sizeof periods / sizeof periods[0] };
    static const uint64_t ticks[] = {T_MS, 1000, 7 * T_MS};
    for (size_t ti = 0; ti < sizeof ticks / sizeof ticks[0]; ti++) {
        uint64_t tick = ticks[ti];
        tw_service *s = t_service(tick, 4, 1);
        per p[N];
        for (size_t i = 0; i < N; i++)
            per_arm(s, &p[i], (uint64_t)i * 333 * T_US, periods[i]);
        uint64_t now = 0, rnd = 12345 + ti;
        for (int step = 0; step < 3000; step++) {
            rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t r = rnd >> 33;
            now += (step % 100 == 99) ? r % (5 * T_S) : r % (3 * tick + 1);
            ADVANCE(s, now);
            per_expect(p, N, now, tick);
        }
        tw_stats st;
        t_stats(s, &st);
        uint64_t runs = 0;
        for (size_t i = 0; i < N; i++)
            runs += (uint64_t)p[i].runs;
        assert_int_equal(st.fired, runs);
        assert_int_equal(st.pending, N);
        tw_destroy(s);
    }
}

/* The issue's case: tick 1 ms, clock at 0.2 ms, period 1 ms, first delay
 * 0; then steps of a quarter tick and a tick, alternately (0.45, 1.45,
 * 1.7, 2.7, 2.95, ...). Grid point 0.2 + k ms is due at tick k + 1, so after
 * tw_advance(t) the timer has run once for every tick processed: floor(t /
 * tick) times, not about every other tick (the old rule took a run as
 * missed when the clock was past its deadline, tick processed or not). */
static void periodic_manual_runs_every_processed_tick(void **state)
{
    (void)state;
    tw_service *s = t_service(T_MS, 256, 16);
    ADVANCE(s, 200 * T_US);
    per p;
    per_arm(s, &p, 0, T_MS);
    uint64_t now = 200 * T_US;
    for (int step = 0; step < 2000; step++) {
        now += step % 2 == 0 ? 250 * T_US : T_MS;
        ADVANCE(s, now);
        per_expect(&p, 1, now, T_MS);
        uint64_t ticks = now / T_MS;
        if ((uint64_t)p.runs != ticks)
            fail_msg("after tw_advance(%" PRIu64 " ns): %d runs, %" PRIu64 " ticks processed",
                     now, p.runs, ticks);
    }
    tw_destroy(s);
}

/* MONOTONIC: a run is missed only if its deadline had passed when the run
 * before it ended. A period of one tick, under the machine's wake-up
 * jitter, on workers = 0, 1, 2: each run records its deadline (from the
 * record), its start and its end; then for each run and the next one:
 *   - never early: start >= deadline;
 *   - the next deadline is on the grid: deadline + k * period, k >= 1;
 *   - every grid point at or before the end of the run (passed when it
 *     ended) is skipped: the next deadline is after the end;
 *   - none is skipped that had not passed a good while after the run
 *     ended: the last one skipped is at most end + SLACK (the re-arm reads
 *     the clock just after the callback returns; SLACK covers that gap,
 *     a preemption included).
 * The period is larger than SLACK, so that skipping one point too many is
 * seen: with a 1 ms period and 20 ms of slack, a re-arm that skipped three
 * points too many passed this test. Every seventh run overruns two to
 * three periods. */
#define MONO_RUNS 30
#define MONO_PERIOD (50 * T_MS)
typedef struct mono_per {
    tw_service *s;
    atomic_int runs;          /* the test thread polls it */
    uint64_t deadline[MONO_RUNS], start[MONO_RUNS], end[MONO_RUNS];
} mono_per;

static uint64_t mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * T_S + (uint64_t)ts.tv_nsec;
}

static void mono_run(tw_timer t, void *arg)
{
    mono_per *m = arg;
    uint64_t start = tw_now(m->s);
    int i = atomic_load(&m->runs);
    if (i >= MONO_RUNS)
        return;
    tw_record *rec = tw__rec_of(&m->s->rec, t);
    /* The run's deadline (since the origin): the record holds it until the
     * re-arm, which comes after this callback returns. */
    m->deadline[i] = atomic_load(&rec->deadline) + m->s->origin;
    m->start[i] = start;
    if (i % 7 == 3) /* now and then a run that overruns a period */
        t_sleep_ns(2 * MONO_PERIOD + (uint64_t)(i % 3) * MONO_PERIOD / 2);
    m->end[i] = mono_now();
    atomic_store(&m->runs, i + 1); /* runs never overlap: one writer at a time */
}

static void periodic_monotonic_skips_only_passed_runs(void **state)
{
    (void)state;
    const uint64_t SLACK = 25 * T_MS, P = MONO_PERIOD;
    for (uint32_t workers = 0; workers <= 2; workers++) {
        tw_config cfg;
        tw_config_init(&cfg);
        cfg.workers = workers;
        tw_service *s = t_service_cfg(&cfg);
        static mono_per m;
        memset(&m, 0, sizeof m);
        m.s = s;
        tw_timer h;
        ASSERT_RC(tw_schedule_every(s, 0, P, mono_run, &m, &h), TW_OK);
        for (int i = 0; i < 30000 && atomic_load(&m.runs) < MONO_RUNS; i++)
            t_sleep_ns(T_MS); /* 2 s, or up to 30 on a loaded machine */
        ASSERT_RC(tw_cancel_sync(s, h), TW_OK);
        ASSERT_RC(tw_stop(s, NULL), TW_OK);
        int runs = atomic_load(&m.runs);
        assert_int_equal(runs, MONO_RUNS);
        int skipped = 0;
        for (int i = 0; i + 1 < runs; i++) {
            uint64_t d = m.deadline[i], nd = m.deadline[i + 1];
            if (m.start[i] < d)
                fail_msg("workers %u: run %d started %" PRIu64 " ns early", workers, i,
                         d - m.start[i]);
            if (nd <= d || (nd - d) % P != 0)
                fail_msg("workers %u: run %d's deadline %" PRIu64 " is not on the grid of %"
                         PRIu64 " + k * %" PRIu64, workers, i + 1, nd, d, P);
            uint64_t k = (nd - d) / P;
            if (nd <= m.end[i])
                fail_msg("workers %u: run %d ended at %" PRIu64 ", after its next deadline "
                         "%" PRIu64 ", which was not skipped", workers, i, m.end[i], nd);
            if (k >= 2 && d + (k - 1) * P > m.end[i] + SLACK)
                fail_msg("workers %u: run %d ended at %" PRIu64 ", %" PRIu64 " grid points "
                         "skipped, the last (%" PRIu64 ") more than %" PRIu64 " ns after it",
                         workers, i, m.end[i], k - 1, d + (k - 1) * P, SLACK);
            skipped += (int)(k - 1);
        }
        print_message("      workers %u: %d runs, %d grid points skipped (runs that overran)\n",
                      workers, runs, skipped);
        tw_destroy(s);
    }
}

static void missed_periods_skipped(void **state)
{
    (void)state;
    tw_service *s = t_default();
    per p;
    per_arm(s, &p, T_MS, T_MS); /* 1, 2, 3, ... ms */
    PADVANCE(s, &p, 1, 10 * T_MS + 500 * T_US);
    assert_int_equal(p.runs, 1); /* once, not ten times */
    assert_true(p.next == 11 * T_MS);
    PADVANCE(s, &p, 1, 11 * T_MS - 1);
    assert_int_equal(p.runs, 1);
    PADVANCE(s, &p, 1, 12 * T_MS);
    assert_int_equal(p.runs, 2);
    PADVANCE(s, &p, 1, 1000 * T_MS + 300 * T_US);
    assert_int_equal(p.runs, 3);
    PADVANCE(s, &p, 1, 1001 * T_MS - 1);
    assert_int_equal(p.runs, 3); /* the next is 1001 ms, not 1000.3 + 1 */
    PADVANCE(s, &p, 1, 1002 * T_MS);
    assert_int_equal(p.runs, 4);
    tw_destroy(s);
}

static void period_zero_einval(void **state)
{
    (void)state;
    tw_service *s = t_default();
    tw_timer h = 12345;
    ASSERT_RC(tw_schedule_every(s, 0, 0, t_noop, NULL, &h), TW_EINVAL);
    ASSERT_RC(tw_schedule_every(s, T_MS, 0, t_noop, NULL, &h), TW_EINVAL);
    ASSERT_RC(tw_schedule_every(s, T_MS, T_MS, NULL, NULL, &h), TW_EINVAL);
    ASSERT_RC(tw_schedule_every(NULL, T_MS, T_MS, t_noop, NULL, &h), TW_EINVAL);
    assert_true(h == 12345);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 0);
    assert_int_equal(st.pending, 0);
    ADVANCE(s, 10 * T_MS);
    t_stats(s, &st);
    assert_int_equal(st.fired, 0);
    tw_destroy(s);
}

static void periodic_first_delay_zero_fires_next_tick(void **state)
{
    (void)state;
    tw_service *s = t_default();
    ADVANCE(s, 3 * T_MS + 200 * T_US);
    per p;
    per_arm(s, &p, 0, 5 * T_MS);
    assert_int_equal(p.runs, 0); /* never inside the call */
    PADVANCE(s, &p, 1, 4 * T_MS + 200 * T_US);
    assert_int_equal(p.runs, 1);
    PADVANCE(s, &p, 1, 8 * T_MS + 200 * T_US - 1);
    assert_int_equal(p.runs, 1);
    PADVANCE(s, &p, 1, 9 * T_MS + 200 * T_US);
    assert_int_equal(p.runs, 2);
    tw_destroy(s);
}

static void period_smaller_than_tick_runs_once_per_advance(void **state)
{
    (void)state;
    tw_service *s = t_default();
    per p;
    per_arm(s, &p, 50 * T_US, 100 * T_US);
    for (uint64_t i = 1; i <= 50; i++) {
        ADVANCE(s, i * T_MS);
        per_expect(&p, 1, i * T_MS, T_MS);
        assert_true((uint64_t)p.runs + 1 >= i);
    }
    assert_true(p.runs >= 49 && p.runs <= 50);
    tw_destroy(s);
}

static void huge_period(void **state)
{
    (void)state;
    tw_service *s = t_service(T_MS, 2, 1);
    const uint64_t period = (1ull << 39) * T_MS + 7;
    per p;
    per_arm(s, &p, T_MS, period);
    PADVANCE(s, &p, 1, 2 * T_MS);
    assert_int_equal(p.runs, 1);
    PADVANCE(s, &p, 1, T_MS + period - 1);
    assert_int_equal(p.runs, 1);
    PADVANCE(s, &p, 1, T_MS + period + T_MS);
    assert_int_equal(p.runs, 2);
    PADVANCE(s, &p, 1, T_MS + 2 * period - 1);
    assert_int_equal(p.runs, 2);
    PADVANCE(s, &p, 1, T_MS + 2 * period + T_MS);
    assert_int_equal(p.runs, 3);
    tw_destroy(s);
}

/* many periodic timers on a tiny wheel with tiny slots, one-tick steps */
static void many_periodic_timers_keep_their_phase(void **state)
{
    (void)state;
    enum { N = 200 };
    tw_service *s = t_service(T_MS, 4, 1);
    per *p = calloc(N, sizeof *p);
    assert_non_null(p);
    for (int i = 0; i < N; i++)
        per_arm(s, &p[i], (uint64_t)(i % 13) * T_MS + (uint64_t)i,
                (uint64_t)(i % 37 + 1) * 700 * T_US + (uint64_t)i);
    for (uint64_t now = T_MS; now <= 3 * T_S; now += T_MS) {
        ADVANCE(s, now);
        per_expect(p, N, now, T_MS);
    }
    tw_stats st;
    t_stats(s, &st);
    uint64_t runs = 0;
    for (int i = 0; i < N; i++) {
        /* one-tick steps: every period has run */
        uint64_t first = (uint64_t)(i % 13) * T_MS + (uint64_t)i;
        uint64_t per_ns = (uint64_t)(i % 37 + 1) * 700 * T_US + (uint64_t)i;
        uint64_t want_min = (3 * T_S - T_MS - first) / per_ns + 1;
        /* a run starts less than two ticks after its deadline, so with a
         * period of two ticks or more nothing is skipped */
        if (per_ns >= 2 * T_MS && (uint64_t)p[i].runs < want_min)
            fail_msg("periodic %d: %d runs, expected at least %" PRIu64, i, p[i].runs,
                     want_min);
        runs += (uint64_t)p[i].runs;
    }
    assert_int_equal(st.fired, runs);
    free(p);
    tw_destroy(s);
}

/* ---- a reschedule that claims the re-arm, and a cancel under it ---------- */

/* The runner (here the advancing thread: MANUAL, no workers) holds a
 * periodic timer's re-arm lease; a reschedule on another thread claims the
 * re-arm and is held before it stores its deadline in `handed`
 * (tw__handover_claimed_hook); meanwhile the timer is cancelled. The
 * record must stay this timer's until the reschedule is done with it:
 * freed before and reused, the late store landed in the next timer of the
 * record (a review's program moved that timer 970 ms early). Of the
 * runner and the reschedule, whichever meets the cancelled timer second
 * frees the record, once; the reschedule answers TW_ENOENT. */
typedef struct claim_race {
    tw_service *s;
    tw_timer h;
    bool claimant_first; /* the reschedule ends before the runner publishes */
    _Atomic int claimed, go, cancel_rc, resched_rc, windows;
} claim_race;

static claim_race race;
static pthread_t rescheduler;

static void wait_set(_Atomic int *flag)
{
    uint64_t end = t_mono_ns() + 10 * T_S;
    while (!atomic_load(flag) && t_mono_ns() < end)
        t_sleep_ns(100 * T_US);
}

static void held_after_claim(void)
{
    atomic_store(&race.claimed, 1);
    wait_set(&race.go);
}

static void *reschedule_it(void *arg)
{
    (void)arg;
    atomic_store(&race.resched_rc, tw_reschedule(race.s, race.h, 40 * T_MS));
    return NULL;
}

/* In the runner's window (its re-arm lease held): the claim, the cancel,
 * and, if the claimant goes first, the rest of the reschedule. */
static void claim_then_cancel(void)
{
    if (atomic_fetch_add(&race.windows, 1) != 0)
        return;
    CB_EXPECT(pthread_create(&rescheduler, NULL, reschedule_it, NULL) == 0, "pthread_create");
    wait_set(&race.claimed);
    CB_EXPECT(atomic_load(&race.claimed), "the reschedule never claimed the re-arm");
    atomic_store(&race.cancel_rc, tw_cancel(race.s, race.h));
    if (race.claimant_first) {
        atomic_store(&race.go, 1);
        CB_EXPECT(pthread_join(rescheduler, NULL) == 0, "pthread_join");
    }
}

static void race_claim_and_cancel(bool claimant_first)
{
    race = (claim_race){.claimant_first = claimant_first};
    tw_service *s = t_service(T_MS, 256, 16);
    race.s = s;
    ASSERT_RC(tw_schedule_every(s, 10 * T_MS, 10 * T_MS, t_noop, NULL, &race.h), TW_OK);
    atomic_store(&tw__rearm_window_hook, claim_then_cancel);
    atomic_store(&tw__handover_claimed_hook, held_after_claim);
    ASSERT_RC(tw_advance(s, 10 * T_MS), TW_OK); /* the run, its window, the publish */
    atomic_store(&tw__rearm_window_hook, NULL);
    CB_ASSERT_CLEAN();
    assert_int_equal(atomic_load(&race.windows), 1);
    assert_int_equal(atomic_load(&race.cancel_rc), TW_OK);

    tw_record *rec = tw__rec_of(&s->rec, race.h);
    assert_non_null(rec);
    if (!claimant_first) {
        uint64_t st = atomic_load(&rec->state);
        assert_int_equal(tw__gen(st), tw__handle_gen(race.h)); /* not freed under it */
        assert_int_equal(tw__st(st), TW_ST_ZOMBIE);
        atomic_store(&race.go, 1);
        assert_int_equal(pthread_join(rescheduler, NULL), 0);
    }
    atomic_store(&tw__handover_claimed_hook, NULL);
    assert_int_equal(atomic_load(&race.resched_rc), TW_ENOENT);
    uint64_t st = atomic_load(&rec->state);
    assert_int_equal(tw__st(st), TW_ST_FREE); /* freed, by the second of the two */
    assert_int_not_equal(tw__gen(st), tw__handle_gen(race.h));

    tw_stats stats;
    t_stats(s, &stats);
    assert_int_equal(stats.fired, 1);
    assert_int_equal(stats.pending, 0);
    ASSERT_RC(tw_cancel(s, race.h), TW_ENOENT);
    tw_destroy(s);
}

static void a_cancelled_rearm_outlives_its_claimant(void **state)
{
    (void)state;
    race_claim_and_cancel(false);
}

static void a_cancelled_rearm_is_freed_after_its_claimant(void **state)
{
    (void)state;
    race_claim_and_cancel(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(fixed_rate_no_drift_period_not_multiple_of_tick, setup),
        cmocka_unit_test_setup(periodic_with_random_steps_follows_skip_rule, setup),
        cmocka_unit_test_setup(missed_periods_skipped, setup),
        cmocka_unit_test_setup(periodic_manual_runs_every_processed_tick, setup),
        cmocka_unit_test_setup(periodic_monotonic_skips_only_passed_runs, setup),
        cmocka_unit_test_setup(period_zero_einval, setup),
        cmocka_unit_test_setup(periodic_first_delay_zero_fires_next_tick, setup),
        cmocka_unit_test_setup(period_smaller_than_tick_runs_once_per_advance, setup),
        cmocka_unit_test_setup(huge_period, setup),
        cmocka_unit_test_setup(many_periodic_timers_keep_their_phase, setup),
        cmocka_unit_test_setup(a_cancelled_rearm_outlives_its_claimant, setup),
        cmocka_unit_test_setup(a_cancelled_rearm_is_freed_after_its_claimant, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
