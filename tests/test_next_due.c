/* test_next_due.c: what an event loop embedding a MANUAL service relies on
 * (issue 15): tw_next_due, tw_wake_fd, and absolute deadlines
 * (tw_schedule_at, tw_reschedule_at). One test per sentence of their
 * contracts in timerwheel.h. */
#include "tw_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    t_seq = 0;
    return 0;
}

/* The due time of a deadline with tick `tick` on a MANUAL service whose
 * last processed boundary is `processed`: the first boundary at or after
 * the deadline that is not processed yet. */
static uint64_t due_of(uint64_t deadline, uint64_t tick, uint64_t processed)
{
    uint64_t k = (deadline + tick - 1) / tick * tick;
    return k > processed ? k : processed + tick;
}

static bool fd_readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;
    do { /* a pending signal fails even a zero-timeout poll with EINTR */
        n = poll(&p, 1, 0);
    } while (n < 0 && errno == EINTR);
    return n == 1 && (p.revents & POLLIN);
}

/* ---- tw_next_due ---------------------------------------------------------- */

static void nothing_pending_is_uint64_max(void **state)
{
    (void)state;
    tw_service *s = t_default();
    assert_true(tw_next_due(s) == UINT64_MAX);
    t_timer a;
    t_arm(s, &a, 3 * T_MS);
    assert_true(tw_next_due(s) != UINT64_MAX);
    ADVANCE(s, 3 * T_MS);
    assert_int_equal(a.runs, 1);
    assert_true(tw_next_due(s) == UINT64_MAX); /* fired */
    t_arm(s, &a, 5 * T_MS);
    ASSERT_RC(tw_cancel(s, a.h), TW_OK);
    assert_true(tw_next_due(s) == UINT64_MAX); /* cancelled: its entry is stale */
    /* far away (a slot the call answers with its tick, unread): the stale
     * entry of a cancelled timer does not count either (found by the fuzz
     * target: fuzz/regressions/next_due_not_max_after_far_timer_cancelled) */
    t_arm(s, &a, 3600 * T_S);
    ASSERT_RC(tw_cancel(s, a.h), TW_OK);
    assert_true(tw_next_due(s) == UINT64_MAX);
    /* nor after tw_stop, whose timers were all handed to on_pending */
    t_arm(s, &a, 3600 * T_S);
    t_arm(s, &a, 2 * T_MS);
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    assert_true(tw_next_due(s) == UINT64_MAX);
    assert_true(tw_next_due(NULL) == UINT64_MAX);
    tw_destroy(s);
}

/* Exact for every timer within wheel_slots ticks: the first boundary at or
 * after its deadline (on a boundary, just after one, mid-tick). */
static void exact_due_time_within_wheel_slots(void **state)
{
    (void)state;
    const uint64_t tick = T_MS;
    const uint64_t deltas[] = {1, tick - 1, tick, tick + 1, 7 * tick + tick / 2,
                               100 * tick, 255 * tick, 255 * tick + 1};
    const uint64_t starts[] = {0, 1, tick / 2, 5 * tick, 12345 * tick + 17};
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++) {
        for (size_t j = 0; j < sizeof deltas / sizeof deltas[0]; j++) {
            tw_service *s = t_service(tick, 256, 16);
            if (starts[i])
                ADVANCE(s, starts[i]);
            t_timer x;
            t_arm(s, &x, deltas[j]);
            uint64_t processed = starts[i] / tick * tick;
            uint64_t want = due_of(starts[i] + deltas[j], tick, processed);
            if (tw_next_due(s) != want)
                fail_msg("start %" PRIu64 " delay %" PRIu64 ": tw_next_due %" PRIu64
                         ", due at %" PRIu64, starts[i], deltas[j], tw_next_due(s), want);
            /* and the loop that sleeps until it finds the timer due there */
            ADVANCE(s, want - 1);
            assert_int_equal(x.runs, 0);
            ADVANCE(s, want);
            assert_int_equal(x.runs, 1);
            tw_destroy(s);
        }
    }
}

/* "due time (first tick boundary at or after the deadline)", and the due
 * rule of tw_advance: a deadline at or before the last processed boundary
 * is due at the next one. */
static void late_deadline_is_due_at_the_next_boundary(void **state)
{
    (void)state;
    tw_service *s = t_default();
    ADVANCE(s, 2 * T_MS + 500 * T_US);
    t_timer x;
    t_arm(s, &x, 0);
    assert_true(tw_next_due(s) == 3 * T_MS);
    ADVANCE(s, 3 * T_MS);
    assert_int_equal(x.runs, 1);
    /* on a boundary that is processed already */
    t_arm(s, &x, 0);
    assert_true(tw_next_due(s) == 4 * T_MS);
    ADVANCE(s, 4 * T_MS);
    assert_int_equal(x.runs, 1);
    tw_destroy(s);
}

/* "never later than the earliest": a far timer (beyond wheel_slots ticks,
 * in a higher level) gets a lower bound, exact once it is within reach. */
static void lower_bound_for_far_timers_exact_when_near(void **state)
{
    (void)state;
    const uint64_t tick = T_MS;
    tw_service *s = t_service(tick, 64, 4);
    uint64_t delays[] = {100 * tick + 3, 5000 * tick + tick / 3, 987654 * tick + 1};
    for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++) {
        t_timer x;
        uint64_t start = tw_now(s);
        t_arm(s, &x, delays[i]);
        uint64_t want = due_of(start + delays[i], tick, start / tick * tick);
        for (;;) {
            uint64_t got = tw_next_due(s);
            if (got > want)
                fail_msg("tw_next_due %" PRIu64 " is after the due time %" PRIu64, got, want);
            if (want - tw_now(s) <= 64 * tick && got != want)
                fail_msg("within wheel_slots ticks: tw_next_due %" PRIu64 ", due %" PRIu64,
                         got, want);
            if (got == want)
                break;
            assert_true(got > tw_now(s)); /* the loop advances to it, never stuck */
            ADVANCE(s, got);
            assert_int_equal(x.runs, 0);
        }
        ADVANCE(s, want);
        assert_int_equal(x.runs, 1);
    }
    tw_destroy(s);
}

/* Stale and moved entries do not count: a cancelled earlier timer, a timer
 * pushed later (its entry stays in the earlier slot), a timer moved earlier
 * (its old entry stays in the later slot). */
static void follows_cancel_and_moves(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer a, b;
    t_arm(s, &a, 10 * T_MS);
    t_arm(s, &b, 50 * T_MS);
    assert_true(tw_next_due(s) == 10 * T_MS);
    ASSERT_RC(tw_cancel(s, a.h), TW_OK);
    a.cancelled = 1;
    assert_true(tw_next_due(s) == 50 * T_MS);
    ASSERT_RC(tw_reschedule(s, b.h, 80 * T_MS), TW_OK); /* later */
    b.deadline = 80 * T_MS;
    assert_true(tw_next_due(s) == 80 * T_MS);
    ASSERT_RC(tw_reschedule(s, b.h, 20 * T_MS), TW_OK); /* earlier */
    b.deadline = 20 * T_MS;
    assert_true(tw_next_due(s) == 20 * T_MS);
    ASSERT_RC(tw_reschedule(s, b.h, 30 * T_MS + 1), TW_OK); /* later again */
    b.deadline = 30 * T_MS + 1;
    assert_true(tw_next_due(s) == 31 * T_MS);
    ADVANCE(s, 31 * T_MS);
    assert_int_equal(b.runs, 1);
    assert_int_equal(a.runs, 0);
    assert_true(tw_next_due(s) == UINT64_MAX);
    tw_destroy(s);
}

/* Inside its own run a periodic timer has no due time (the header): with
 * only stale entries left elsewhere, the answer is UINT64_MAX. */
static uint64_t asked_in_run;
static void ask_in_run(tw_timer t, void *arg)
{
    (void)t;
    asked_in_run = tw_next_due(arg);
}

static void periodic_in_its_run_has_no_due_time(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer far;
    t_arm(s, &far, 3600 * T_S);
    ASSERT_RC(tw_cancel(s, far.h), TW_OK); /* a stale entry, far away */
    tw_timer p;
    ASSERT_RC(tw_schedule_every(s, 2 * T_MS, 5 * T_MS, ask_in_run, s, &p), TW_OK);
    asked_in_run = 0;
    ADVANCE(s, 2 * T_MS);
    assert_true(asked_in_run == UINT64_MAX);
    assert_true(tw_next_due(s) == 7 * T_MS); /* re-armed once the run returned */
    tw_destroy(s);
}

static void periodic_timer_next_run(void **state)
{
    (void)state;
    tw_service *s = t_default();
    tw_timer p;
    ASSERT_RC(tw_schedule_every(s, 5 * T_MS, 7 * T_MS, t_noop, NULL, &p), TW_OK);
    assert_true(tw_next_due(s) == 5 * T_MS);
    ADVANCE(s, 5 * T_MS);
    assert_true(tw_next_due(s) == 12 * T_MS);
    ADVANCE(s, 12 * T_MS);
    assert_true(tw_next_due(s) == 19 * T_MS);
    ASSERT_RC(tw_cancel(s, p), TW_OK);
    assert_true(tw_next_due(s) == UINT64_MAX);
    tw_destroy(s);
}

/* A callback inside tw_advance asks: the timers of the same advance not yet
 * started are pending (claimed), and the answer is exact for them too. */
typedef struct asking {
    tw_service *s;
    uint64_t answer;
    tw_timer cancel; /* a later timer of the same advance to cancel first */
} asking;

static void ask_next_due(tw_timer t, void *arg)
{
    (void)t;
    asking *a = arg;
    if (a->cancel)
        CB_EXPECT(tw_cancel(a->s, a->cancel) == TW_OK, "cancel from a callback");
    a->answer = tw_next_due(a->s);
}

static void asked_from_a_callback_counts_the_rest_of_the_advance(void **state)
{
    (void)state;
    tw_service *s = t_default();
    asking first = {.s = s}, second = {.s = s}, third = {.s = s};
    tw_timer h3;
    ASSERT_RC(tw_schedule(s, 1 * T_MS, ask_next_due, &first, NULL), TW_OK);
    ASSERT_RC(tw_schedule(s, 2 * T_MS + 1, ask_next_due, &second, NULL), TW_OK);
    ASSERT_RC(tw_schedule(s, 4 * T_MS, ask_next_due, &third, &h3), TW_OK);
    ASSERT_RC(tw_schedule(s, 9 * T_MS, t_noop, NULL, NULL), TW_OK);
    ADVANCE(s, 6 * T_MS); /* all three run in this one advance */
    assert_true(first.answer == 3 * T_MS);  /* the second, claimed */
    assert_true(second.answer == 4 * T_MS); /* the third, claimed */
    assert_true(third.answer == 9 * T_MS);  /* in the wheel */
    /* the first cancels the second, claimed in the same advance */
    tw_timer h2;
    asking a = {.s = s}, b = {.s = s};
    ASSERT_RC(tw_schedule(s, 1 * T_MS, t_noop, NULL, NULL), TW_OK); /* 7 ms */
    ASSERT_RC(tw_schedule(s, 2 * T_MS, ask_next_due, &b, &h2), TW_OK);
    ASSERT_RC(tw_schedule(s, 1 * T_MS, ask_next_due, &a, NULL), TW_OK);
    a.cancel = h2;
    ADVANCE(s, 8 * T_MS);
    assert_true(a.answer <= 9 * T_MS); /* a lower bound at least */
    assert_true(a.answer >= 7 * T_MS);
    assert_true(b.answer == 0);        /* cancelled: never ran */
    tw_destroy(s);
}

/* The oracle: many timers, random arms, cancels, moves and advances; the
 * answer is never later than the earliest due time, and equal to it when
 * that is within wheel_slots ticks. */
static void random_against_an_oracle(void **state)
{
    (void)state;
    enum { N = 400 };
    const uint64_t tick = T_MS;
    const uint32_t slots = 32;
    tw_service *s = t_service(tick, slots, 2);
    t_timer *v = calloc(N, sizeof *v);
    bool *live = calloc(N, sizeof *live);
    assert_non_null(v);
    assert_non_null(live);
    uint64_t rnd = 0x2545f4914f6cdd1dull, now = 0;
    for (int step = 0; step < 3000; step++) {
        rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
        size_t i = rnd % N;
        uint64_t delay = (rnd >> 20) % ((rnd >> 60) < 4 ? 5000 * tick : 40 * tick);
        switch ((rnd >> 10) % 5) {
        case 0:
        case 1:
            if (!live[i] || v[i].runs) {
                t_arm_nocheck(s, &v[i], delay);
                live[i] = true;
            }
            break;
        case 2:
            if (live[i] && !v[i].runs) {
                ASSERT_RC(tw_cancel(s, v[i].h), TW_OK);
                live[i] = false;
            }
            break;
        case 3:
            if (live[i] && !v[i].runs) {
                ASSERT_RC(tw_reschedule(s, v[i].h, delay), TW_OK);
                v[i].deadline = now + delay;
            }
            break;
        default:
            now += (rnd >> 30) % (3 * tick);
            ADVANCE(s, now);
            break;
        }
        uint64_t processed = now / tick * tick, earliest = UINT64_MAX;
        for (size_t k = 0; k < N; k++) {
            if (live[k] && !v[k].runs) {
                uint64_t d = due_of(v[k].deadline, tick, processed);
                earliest = d < earliest ? d : earliest;
            }
        }
        uint64_t got = tw_next_due(s);
        if (got > earliest)
            fail_msg("step %d: tw_next_due %" PRIu64 " after the earliest due %" PRIu64, step,
                     got, earliest);
        if (earliest - now <= slots * tick && got != earliest)
            fail_msg("step %d: tw_next_due %" PRIu64 ", earliest due %" PRIu64
                     " within wheel_slots ticks of %" PRIu64, step, got, earliest, now);
        if (earliest == UINT64_MAX && got != UINT64_MAX)
            fail_msg("step %d: nothing pending, tw_next_due %" PRIu64, step, got);
    }
    free(v);
    free(live);
    tw_destroy(s);
}

/* A service whose slots drain in steps of many ticks, and whose cursor has
 * moved far: the answer is in ns on the service's clock. */
static void answer_is_on_the_service_clock(void **state)
{
    (void)state;
    tw_service *s = t_service(7 * T_MS, 16, 1);
    ADVANCE(s, 1000 * T_S + 3);
    t_timer x;
    t_arm(s, &x, 20 * T_MS);
    uint64_t want = due_of(1000 * T_S + 3 + 20 * T_MS, 7 * T_MS, (1000 * T_S + 3) / (7 * T_MS) * (7 * T_MS));
    assert_true(tw_next_due(s) == want);
    ADVANCE(s, want);
    assert_int_equal(x.runs, 1);
    tw_destroy(s);
}

/* ---- tw_wake_fd ------------------------------------------------------------- */

static void wake_fd_is_manual_only_and_always_the_same(void **state)
{
    (void)state;
    ASSERT_RC(tw_wake_fd(NULL), TW_EINVAL);
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 0;
    tw_service *m = t_service_cfg(&cfg); /* MONOTONIC */
    ASSERT_RC(tw_wake_fd(m), TW_EINVAL);
    tw_destroy(m);

    tw_service *s = t_default();
    int fd = tw_wake_fd(s);
    assert_true(fd >= 0);
    assert_int_equal(tw_wake_fd(s), fd);
    assert_int_equal(tw_wake_fd(s), fd);
    /* non-blocking, close-on-exec; not readable before any tw_next_due */
    assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    assert_false(fd_readable(fd));
    tw_destroy(s);
    /* "tw_destroy closes it" (nothing opened since: the number is free) */
    errno = 0;
    assert_int_equal(fcntl(fd, F_GETFD), -1);
    assert_int_equal(errno, EBADF);
}

static void readable_when_armed_sooner_cleared_by_next_due(void **state)
{
    (void)state;
    tw_service *s = t_default();
    int fd = tw_wake_fd(s);
    t_timer a, b, c;
    t_arm(s, &a, 50 * T_MS);
    assert_true(tw_next_due(s) == 50 * T_MS);
    assert_false(fd_readable(fd));
    t_arm(s, &b, 60 * T_MS); /* after what the loop knows: no wake-up */
    assert_false(fd_readable(fd));
    t_arm(s, &c, 50 * T_MS); /* at it: no wake-up either */
    assert_false(fd_readable(fd));
    t_timer d;
    t_arm(s, &d, 20 * T_MS); /* before it: readable */
    assert_true(fd_readable(fd));
    assert_true(fd_readable(fd)); /* stays readable until tw_next_due */
    assert_true(tw_next_due(s) == 20 * T_MS);
    assert_false(fd_readable(fd));
    /* a move earlier than the answer wakes; a move later does not */
    ASSERT_RC(tw_reschedule(s, b.h, 30 * T_MS), TW_OK);
    assert_false(fd_readable(fd));
    ASSERT_RC(tw_reschedule(s, b.h, 10 * T_MS), TW_OK);
    b.deadline = 10 * T_MS;
    assert_true(fd_readable(fd));
    assert_true(tw_next_due(s) == 10 * T_MS);
    assert_false(fd_readable(fd));
    /* absolute deadlines too */
    tw_timer e;
    ASSERT_RC(tw_schedule_at(s, 4 * T_MS, t_noop, NULL, &e), TW_OK);
    assert_true(fd_readable(fd));
    assert_true(tw_next_due(s) == 4 * T_MS);
    ASSERT_RC(tw_reschedule_at(s, e, 2 * T_MS), TW_OK);
    assert_true(fd_readable(fd));
    assert_true(tw_next_due(s) == 2 * T_MS);
    assert_false(fd_readable(fd));
    /* a tw_advance wakes nothing by itself; the loop asks again after it */
    ADVANCE(s, 60 * T_MS);
    assert_false(fd_readable(fd));
    assert_true(tw_next_due(s) == UINT64_MAX);
    t_arm(s, &a, 1000 * T_S); /* nothing pending was known: anything wakes */
    assert_true(fd_readable(fd));
    tw_destroy(s);
}

static void made_after_a_next_due_starts_readable(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer a;
    t_arm(s, &a, 50 * T_MS);
    assert_true(tw_next_due(s) == 50 * T_MS);
    t_arm(s, &a, 5 * T_MS); /* no descriptor yet to write */
    int fd = tw_wake_fd(s);
    assert_true(fd >= 0);
    assert_true(fd_readable(fd)); /* the loop asks again */
    assert_true(tw_next_due(s) == 5 * T_MS);
    assert_false(fd_readable(fd));
    tw_destroy(s);
}

/* Another thread arms a timer while the loop blocks in poll with the
 * timeout tw_next_due gave: the loop wakes in time. */
typedef struct arming {
    tw_service *s;
    t_timer x;
} arming;

static void *arm_soon(void *arg)
{
    arming *a = arg;
    t_sleep_ns(20 * T_MS);
    a->x.s = a->s;
    a->x.deadline = tw_now(a->s) + 2 * T_MS;
    if (tw_schedule(a->s, 2 * T_MS, t_on_fire, &a->x, &a->x.h) != TW_OK)
        abort();
    return NULL;
}

static void another_thread_wakes_the_loop(void **state)
{
    (void)state;
    tw_service *s = t_default();
    int fd = tw_wake_fd(s);
    t_timer far;
    t_arm(s, &far, 3600 * T_S);
    uint64_t due = tw_next_due(s); /* beyond wheel_slots ticks: a bound */
    assert_true(due > 2 * T_MS && due <= 3600 * T_S);
    arming a;
    memset(&a, 0, sizeof a);
    a.s = s;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, arm_soon, &a), 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    /* the loop would sleep an hour; it must wake up within the test's time */
    int n;
    do { /* a signal's EINTR is not the wake-up: wait again */
        n = poll(&p, 1, 30 * 1000);
    } while (n < 0 && errno == EINTR);
    assert_int_equal(n, 1);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(tw_next_due(s) == 2 * T_MS);
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(a.x.runs, 1);
    tw_destroy(s);
}

/* ---- absolute deadlines ---------------------------------------------------- */

static void schedule_at_fires_at_the_deadline(void **state)
{
    (void)state;
    tw_service *s = t_default();
    ADVANCE(s, 10 * T_MS + 300 * T_US);
    const uint64_t at[] = {10 * T_MS + 301 * T_US, 11 * T_MS, 11 * T_MS + 1, 17 * T_MS,
                           900 * T_MS + 5};
    t_timer v[5];
    for (int i = 0; i < 5; i++) {
        memset(&v[i], 0, sizeof v[i]);
        v[i].s = s;
        v[i].deadline = at[i];
        ASSERT_RC(tw_schedule_at(s, at[i], t_on_fire, &v[i], &v[i].h), TW_OK);
        assert_true(v[i].h != 0);
        CHECK(s);
    }
    for (int i = 0; i < 5; i++) {
        if (at[i] - 1 > tw_now(s))
            ADVANCE(s, at[i] - 1);
        if (tw_now(s) < at[i]) /* never early (t_on_fire checks it too) */
            assert_int_equal(v[i].runs, 0);
        ADVANCE(s, (at[i] + T_MS - 1) / T_MS * T_MS);
        assert_int_equal(v[i].runs, 1);
    }
    tw_destroy(s);
}

/* "deadline_ns <= tw_now(s) means at the next tick" */
static void past_deadline_means_next_tick(void **state)
{
    (void)state;
    tw_service *s = t_default();
    ADVANCE(s, 5 * T_MS + 200 * T_US);
    const uint64_t past[] = {0, 1, 3 * T_MS, 5 * T_MS, 5 * T_MS + 200 * T_US};
    t_timer v[5];
    for (int i = 0; i < 5; i++) {
        memset(&v[i], 0, sizeof v[i]);
        v[i].s = s;
        v[i].deadline = 5 * T_MS + 200 * T_US;
        ASSERT_RC(tw_schedule_at(s, past[i], t_on_fire, &v[i], &v[i].h), TW_OK);
    }
    assert_true(tw_next_due(s) == 6 * T_MS);
    ADVANCE(s, 5 * T_MS + 900 * T_US);
    for (int i = 0; i < 5; i++)
        assert_int_equal(v[i].runs, 0);
    ADVANCE(s, 6 * T_MS);
    for (int i = 0; i < 5; i++)
        assert_int_equal(v[i].runs, 1);
    /* tw_reschedule_at to the past: the next tick */
    t_timer x;
    t_arm(s, &x, 50 * T_MS);
    ASSERT_RC(tw_reschedule_at(s, x.h, 1), TW_OK);
    x.deadline = 6 * T_MS;
    assert_true(tw_next_due(s) == 7 * T_MS);
    ADVANCE(s, 7 * T_MS);
    assert_int_equal(x.runs, 1);
    tw_destroy(s);
}

/* "Same errors as tw_schedule / tw_reschedule; TW_ERANGE when
 * deadline_ns - tw_now(s) > tw_max_delay(s)" */
static void errors_as_the_relative_forms(void **state)
{
    (void)state;
    tw_service *s = t_default();
    ADVANCE(s, 3 * T_MS);
    uint64_t max = tw_max_delay(s), now = tw_now(s);
    tw_timer h = 77, t;
    ASSERT_RC(tw_schedule_at(NULL, now + T_MS, t_noop, NULL, &h), TW_EINVAL);
    ASSERT_RC(tw_schedule_at(s, now + T_MS, NULL, NULL, &h), TW_EINVAL);
    assert_true(h == 77); /* untouched on EINVAL, as tw_schedule */
    ASSERT_RC(tw_schedule_at(s, now + max + 1, t_noop, NULL, &h), TW_ERANGE);
    ASSERT_RC(tw_schedule_at(s, UINT64_MAX, t_noop, NULL, &h), TW_ERANGE);
    ASSERT_RC(tw_schedule_at(s, now + max, t_noop, NULL, &t), TW_OK);
    ASSERT_RC(tw_reschedule_at(s, t, now + max + 1), TW_ERANGE);
    ASSERT_RC(tw_reschedule_at(s, t, UINT64_MAX), TW_ERANGE);
    ASSERT_RC(tw_reschedule_at(NULL, t, now), TW_EINVAL);
    ASSERT_RC(tw_reschedule_at(s, 0, now + T_MS), TW_ENOENT);
    ASSERT_RC(tw_cancel(s, t), TW_OK);
    ASSERT_RC(tw_reschedule_at(s, t, now + T_MS), TW_ENOENT); /* stale */
    tw_stats st;
    t_stats(s, &st);
    assert_true(st.scheduled == 1 && st.pending == 0 && st.rescheduled == 0);
    /* max_timers: TW_EAGAIN */
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.workers = 0;
    cfg.max_timers = 2;
    tw_service *c = t_service_cfg(&cfg);
    ASSERT_RC(tw_schedule_at(c, 5 * T_MS, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule_at(c, 5 * T_MS, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule_at(c, 5 * T_MS, t_noop, NULL, NULL), TW_EAGAIN);
    tw_destroy(c);
    /* after tw_stop */
    ASSERT_RC(tw_schedule_at(s, now + 10 * T_MS, t_noop, NULL, &t), TW_OK);
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    ASSERT_RC(tw_schedule_at(s, now + T_MS, t_noop, NULL, &h), TW_ESHUTDOWN);
    ASSERT_RC(tw_reschedule_at(s, t, now + T_MS), TW_ESHUTDOWN);
    tw_destroy(s);
}

static void reschedule_at_moves_both_ways_and_periodic_runs(void **state)
{
    (void)state;
    tw_service *s = t_default();
    t_timer x;
    t_arm(s, &x, 40 * T_MS);
    ASSERT_RC(tw_reschedule_at(s, x.h, 90 * T_MS + 1), TW_OK);
    x.deadline = 90 * T_MS + 1;
    ADVANCE(s, 90 * T_MS);
    assert_int_equal(x.runs, 0);
    ASSERT_RC(tw_reschedule_at(s, x.h, 95 * T_MS), TW_OK);
    x.deadline = 95 * T_MS;
    ADVANCE(s, 95 * T_MS);
    assert_int_equal(x.runs, 1);
    /* a periodic timer's next run moves; the period stays */
    tw_timer p;
    int runs = 0;
    ASSERT_RC(tw_schedule_every(s, 10 * T_MS, 10 * T_MS, t_noop, &runs, &p), TW_OK);
    ASSERT_RC(tw_reschedule_at(s, p, 130 * T_MS), TW_OK);
    assert_true(tw_next_due(s) == 130 * T_MS);
    ADVANCE(s, 130 * T_MS);
    assert_true(tw_next_due(s) == 140 * T_MS);
    tw_stats st;
    t_stats(s, &st);
    assert_true(st.rescheduled == 3);
    tw_destroy(s);
}

/* ---- claimed, not yet started ------------------------------------------------- */

/* A MONOTONIC pool claims a tick's timers ahead, and a claimed timer is
 * pending until it starts: tw_next_due must not answer past it. X (tick 8)
 * is claimed at tick 7 and waits for its deadline; then the cursor claims
 * a burst of tick 10 early, in pieces, and between two pieces one of the
 * burst's claimed timers is cancelled (tw__early_piece_hook). The claim
 * floor used to count that exit against the older claims, found none left,
 * and rose to tick 10: tw_next_due answered past X (a review's program). */
#define FLOOR_TICK (100 * T_MS)
#define FLOOR_BURST 17000
static tw_service *floor_s;
static tw_timer floor_burst[FLOOR_BURST];
static atomic_int floor_cancelled, floor_x_ran;

static int cancel_a_claimed_one(bool late, size_t staged)
{
    (void)late;
    if (staged < 512 || atomic_load(&floor_cancelled))
        return 0;
    for (int i = 0; i < FLOOR_BURST; i++) {
        tw_record *rec = tw__rec(&floor_s->rec, tw__handle_idx(floor_burst[i]));
        if (tw__st(atomic_load(&rec->state)) == TW_ST_FIRING) {
            CB_EXPECT(tw_cancel(floor_s, floor_burst[i]) == TW_OK, "cancel of a claimed timer");
            atomic_store(&floor_cancelled, 1);
            break;
        }
    }
    return 0;
}

static void note_x(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&floor_x_ran, 1);
}

static void next_due_holds_at_a_claimed_timer(void **state)
{
    (void)state;
    atomic_store(&floor_cancelled, 0);
    atomic_store(&floor_x_ran, 0);
    tw__lanes_override = 1;
    tw__early_lead_override = 2;
    atomic_store(&tw__early_piece_hook, cancel_a_claimed_one);
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.tick_ns = FLOOR_TICK;
    cfg.workers = 1;
    floor_s = t_service_cfg(&cfg);
    tw__lanes_override = 0;
    tw__early_lead_override = 0;
    uint64_t o = floor_s->origin;
    ASSERT_RC(tw_schedule_at(floor_s, o + 8 * FLOOR_TICK, note_x, NULL, NULL), TW_OK);
    for (int i = 0; i < FLOOR_BURST; i++)
        ASSERT_RC(tw_schedule_at(floor_s, o + 10 * FLOOR_TICK - (uint64_t)(i % 1000) * T_US,
                                 t_noop, NULL, &floor_burst[i]),
                  TW_OK);
    while (tw_now(floor_s) < o + 7 * FLOOR_TICK + FLOOR_TICK / 2)
        t_sleep_ns(T_MS);
    uint64_t due = tw_next_due(floor_s);
    bool x_ran = atomic_load(&floor_x_ran);
    bool cancelled = atomic_load(&floor_cancelled);
    atomic_store(&tw__early_piece_hook, NULL);
    CB_ASSERT_CLEAN();
    if (!x_ran && cancelled && due > o + 8 * FLOOR_TICK)
        fail_msg("tw_next_due = origin + %.2f ticks past X, claimed and due at 8",
                 (double)(due - o) / (double)FLOOR_TICK);
    if (!cancelled || x_ran)
        print_message("      the race was not met (cancelled %d, X ran %d): nothing checked\n",
                      cancelled, x_ran);
    tw_destroy(floor_s);
}

/* A periodic timer cancelled during its run, seen from another thread
 * while that run goes on inside tw_advance: it has no due time (its run is
 * in progress), and the far one-shot beside it is still pending, so the
 * answer is finite. The cancel used to leave the pending count at once
 * and the runs in progress only when the run returned: counted off twice,
 * the one-shot vanished and the answer was UINT64_MAX (a review). */
static tw_service *cr_s;
static _Atomic int cr_in, cr_go;

static void cr_run(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&cr_in, 1);
    for (int i = 0; !atomic_load(&cr_go) && i < 10000; i++)
        t_sleep_ns(T_MS);
}

static void *cr_advance(void *arg)
{
    (void)arg;
    CB_EXPECT(tw_advance(cr_s, T_MS) == TW_OK, "tw_advance");
    return NULL;
}

static void a_periodic_cancelled_in_its_run_leaves_the_rest(void **state)
{
    (void)state;
    atomic_store(&cr_in, 0);
    atomic_store(&cr_go, 0);
    cr_s = t_service(T_MS, 64, 4);
    tw_timer far, p;
    ASSERT_RC(tw_schedule(cr_s, 10 * T_S, t_noop, NULL, &far), TW_OK); /* a bound only */
    ASSERT_RC(tw_schedule_every(cr_s, T_MS, T_MS, cr_run, NULL, &p), TW_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cr_advance, NULL), 0);
    for (int i = 0; !atomic_load(&cr_in) && i < 10000; i++)
        t_sleep_ns(T_MS);
    assert_true(atomic_load(&cr_in));
    ASSERT_RC(tw_cancel(cr_s, p), TW_OK);
    uint64_t due = tw_next_due(cr_s);
    atomic_store(&cr_go, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    CB_ASSERT_CLEAN();
    if (due == UINT64_MAX)
        fail_msg("UINT64_MAX with a timer pending 10 s away");
    assert_true(due <= 10 * T_S);
    tw_stats st;
    t_stats(cr_s, &st);
    assert_int_equal(st.cancelled, 1);
    assert_int_equal(st.pending, 1);
    ASSERT_RC(tw_cancel(cr_s, far), TW_OK);
    assert_true(tw_next_due(cr_s) == UINT64_MAX);
    tw_destroy(cr_s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(nothing_pending_is_uint64_max, setup),
        cmocka_unit_test_setup(exact_due_time_within_wheel_slots, setup),
        cmocka_unit_test_setup(late_deadline_is_due_at_the_next_boundary, setup),
        cmocka_unit_test_setup(lower_bound_for_far_timers_exact_when_near, setup),
        cmocka_unit_test_setup(follows_cancel_and_moves, setup),
        cmocka_unit_test_setup(periodic_timer_next_run, setup),
        cmocka_unit_test_setup(periodic_in_its_run_has_no_due_time, setup),
        cmocka_unit_test_setup(asked_from_a_callback_counts_the_rest_of_the_advance, setup),
        cmocka_unit_test_setup(random_against_an_oracle, setup),
        cmocka_unit_test_setup(answer_is_on_the_service_clock, setup),
        cmocka_unit_test_setup(wake_fd_is_manual_only_and_always_the_same, setup),
        cmocka_unit_test_setup(readable_when_armed_sooner_cleared_by_next_due, setup),
        cmocka_unit_test_setup(made_after_a_next_due_starts_readable, setup),
        cmocka_unit_test_setup(another_thread_wakes_the_loop, setup),
        cmocka_unit_test_setup(schedule_at_fires_at_the_deadline, setup),
        cmocka_unit_test_setup(past_deadline_means_next_tick, setup),
        cmocka_unit_test_setup(errors_as_the_relative_forms, setup),
        cmocka_unit_test_setup(reschedule_at_moves_both_ways_and_periodic_runs, setup),
        cmocka_unit_test_setup(next_due_holds_at_a_claimed_timer, setup),
        cmocka_unit_test_setup(a_periodic_cancelled_in_its_run_leaves_the_rest, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
