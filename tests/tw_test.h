/*
 * tw_test.h: what the unit tests share.
 *
 * Tests run a MANUAL-clock service on the test's own thread, so time is an
 * input and nothing sleeps; the few that need the service's threads
 * (MONOTONIC: test_overload, test_pool_oom, test_config's thread names)
 * wait for them with t_sleep_ns. After every step a test calls CHECK(s)
 * (the internal invariant checker tw__check, on a quiescent service).
 *
 * Callbacks run inside tw_advance: a cmocka assertion there would longjmp
 * out of the library with its locks held, so callbacks record their first
 * failure with CB_EXPECT and the test asserts it after the advance
 * (ADVANCE does so).
 */
#ifndef TW_TEST_H
#define TW_TEST_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "sanitizers.h" /* src/: TW_SAN_ANY, as the library decides it */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "timerwheel.h"
#include "internal.h"

#define T_US 1000ull
#define T_MS 1000000ull
#define T_S  1000000000ull

/* A watchdog for a call that must return (tw_pause, tw_stop on a paused
 * service): if it has not returned after `secs`, the test prints what hung,
 * then every thread's stack (gdb, when the machine has it: a hang seen once
 * in CI, 2026-11-29, left only the message), and exits 2. Off again with
 * t_watchdog_off. One at a time; SIGALRM is the test's. */
static char t_watch_msg[160];
static size_t t_watch_len;
static char t_watch_pid[24];

static void t_watch_fired(int sig)
{
    (void)sig;
    /* Only async-signal-safe calls here. */
    if (write(2, t_watch_msg, t_watch_len) < 0) {
    }
    signal(SIGALRM, SIG_DFL);
    alarm(60); /* a gdb that hangs too ends the test */
    pid_t child = fork();
    if (child == 0) {
        execlp("gdb", "gdb", "-p", t_watch_pid, "-batch", "-nx", "-ex",
               "thread apply all bt", (char *)NULL);
        _exit(127); /* no gdb: the message is all there is */
    }
    if (child > 0)
        (void)waitpid(child, NULL, 0);
    _exit(2);
}

static inline void t_watchdog(const char *what, unsigned secs)
{
    t_watch_len = (size_t)snprintf(t_watch_msg, sizeof t_watch_msg,
                                   "watchdog: %s has not returned after %u s; every thread:\n",
                                   what, secs);
    if (t_watch_len >= sizeof t_watch_msg)
        t_watch_len = sizeof t_watch_msg - 1;
    snprintf(t_watch_pid, sizeof t_watch_pid, "%ld", (long)getpid());
#ifdef PR_SET_PTRACER
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* gdb may attach to us */
#endif
    signal(SIGALRM, t_watch_fired);
    alarm(secs);
}

static inline void t_watchdog_off(void)
{
    alarm(0);
}

/* Real time, for the tests that run the service's threads. */
static inline void t_sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / T_S), (long)(ns % T_S)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Under valgrind, whose preload library is in LD_PRELOAD (checked at run
 * time: scripts/test-proof.sh runs build/gcc's executables under it). Its
 * allocator pads and fills what it hands out, so tests that read resident
 * memory skip those reads there. */
static inline bool t_under_valgrind(void)
{
    const char *pre = getenv("LD_PRELOAD");
    return pre && strstr(pre, "vgpreload") != NULL;
}

/* Whether malloc is a sanitizer's or valgrind's: they fill or pad what
 * they hand out, so which pages are resident says nothing about ours. */
static inline bool t_foreign_malloc(void)
{
#ifdef TW_SAN_ANY /* sanitizers.h */
    return true;
#else
    return t_under_valgrind();
#endif
}

/* ---- failures found inside callbacks --------------------------------- */

static char t_cb_error[512];
static int t_cb_errors;

#define CB_EXPECT(cond, ...)                                                  \
    do {                                                                      \
        if (!(cond)) {                                                        \
            if (t_cb_errors++ == 0) {                                         \
                int n_ = snprintf(t_cb_error, sizeof t_cb_error, "%s:%d: ",   \
                                  __FILE__, __LINE__);                        \
                if (n_ > 0 && (size_t)n_ < sizeof t_cb_error)                 \
                    snprintf(t_cb_error + n_, sizeof t_cb_error - (size_t)n_, \
                             __VA_ARGS__);                                    \
            }                                                                 \
        }                                                                     \
    } while (0)

#define CB_ASSERT_CLEAN()                                                     \
    do {                                                                      \
        if (t_cb_errors != 0)                                                 \
            fail_msg("%d failure(s) inside callbacks; first: %s",            \
                     t_cb_errors, t_cb_error);                                \
    } while (0)

static inline void t_reset_cb_errors(void)
{
    t_cb_errors = 0;
    t_cb_error[0] = '\0';
}

/* ---- return codes ----------------------------------------------------- */

static inline const char *t_code(int rc)
{
    switch (rc) {
    case TW_OK: return "TW_OK";
    case TW_EINVAL: return "TW_EINVAL";
    case TW_ENOMEM: return "TW_ENOMEM";
    case TW_EAGAIN: return "TW_EAGAIN";
    case TW_ERANGE: return "TW_ERANGE";
    case TW_ENOENT: return "TW_ENOENT";
    case TW_ESHUTDOWN: return "TW_ESHUTDOWN";
    case TW_EDEADLK: return "TW_EDEADLK";
    default: return "(unknown code)";
    }
}

/* assert that `expr` returns the code `want`, naming both on failure */
#define ASSERT_RC(expr, want)                                                 \
    do {                                                                      \
        int got_ = (expr);                                                    \
        int want_ = (want);                                                   \
        if (got_ != want_)                                                    \
            fail_msg("%s returned %s (%d), expected %s (%d)", #expr,          \
                     t_code(got_), got_, t_code(want_), want_);               \
    } while (0)

/* ---- the invariant checker -------------------------------------------- */

#define CHECK(s)                                                              \
    do {                                                                      \
        char chk_[1024];                                                      \
        chk_[0] = '\0';                                                       \
        if (tw__check((s), chk_, sizeof chk_) != 0)                           \
            fail_msg("tw__check failed: %s", chk_);                           \
    } while (0)

/* advance, then: OK, invariants hold, no callback failed */
#define ADVANCE(s, now)                                                       \
    do {                                                                      \
        ASSERT_RC(tw_advance((s), (now)), TW_OK);                             \
        assert_true(tw_now(s) == (uint64_t)(now));                            \
        CHECK(s);                                                             \
        CB_ASSERT_CLEAN();                                                    \
    } while (0)

/* ---- services ------------------------------------------------------------ */

static inline tw_service *t_service_cfg(tw_config *cfg)
{
    tw_service *s = NULL;
    int rc = tw_create(cfg, &s);
    if (rc != TW_OK)
        fail_msg("tw_create returned %s (%d)", t_code(rc), rc);
    assert_non_null(s);
    /* tw__check wants a quiescent service: a MONOTONIC one's cursor runs
     * from creation (and, with a pool, steps a tick ahead at once). */
    if (cfg->clock == TW_CLOCK_MANUAL)
        CHECK(s);
    return s;
}

static inline tw_service *t_service(uint64_t tick_ns, uint32_t slots, uint32_t cap)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.workers = 0;
    cfg.tick_ns = tick_ns;
    cfg.wheel_slots = slots;
    cfg.slot_capacity = cap;
    return t_service_cfg(&cfg);
}

/* 1 ms tick, default wheel */
static inline tw_service *t_default(void)
{
    return t_service(T_MS, 256, 16);
}

/* Real time, for the tests of MONOTONIC services: a service with that
 * many workers and tick, CLOCK_MONOTONIC now, and what has fired. */
static inline tw_service *t_monotonic(uint32_t workers, uint64_t tick_ns)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MONOTONIC;
    cfg.workers = workers;
    cfg.tick_ns = tick_ns;
    return t_service_cfg(&cfg);
}

static inline uint64_t t_mono_ns(void)
{
    return tw__clock_monotonic();
}

static inline uint64_t t_fired(tw_service *s)
{
    tw_stats st;
    tw_stats_get(s, &st);
    return st.fired;
}

/* A cmocka setup that clears what callbacks reported. */
static inline int t_setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    return 0;
}

static inline uint64_t t_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- a timer that records its runs ------------------------------------- */

typedef struct t_timer {
    tw_service *s;
    tw_timer h;          /* as returned by tw_schedule */
    uint64_t deadline;   /* expected (next) deadline */
    int runs;
    uint64_t ran_at;     /* tw_now at the last run */
    uint64_t seq;        /* global order of the last run */
    int cancelled;       /* the test cancelled it (must not run afterwards) */
} t_timer;

static uint64_t t_seq;

/* one-shot recorder: never early, the handle it was given */
static inline void t_on_fire(tw_timer t, void *arg)
{
    t_timer *x = arg;
    uint64_t now = tw_now(x->s);
    CB_EXPECT(t == x->h, "callback got handle %#" PRIx64 ", scheduled %#" PRIx64,
              t, x->h);
    CB_EXPECT(now >= x->deadline, "early: ran at %" PRIu64 " < deadline %" PRIu64,
              now, x->deadline);
    CB_EXPECT(!x->cancelled, "a cancelled timer (deadline %" PRIu64 ") ran",
              x->deadline);
    x->runs++;
    x->ran_at = now;
    x->seq = ++t_seq;
}

/* schedule x to fire delay after now; records the deadline */
static inline void t_arm_nocheck(tw_service *s, t_timer *x, uint64_t delay)
{
    memset(x, 0, sizeof *x);
    x->s = s;
    x->deadline = tw_now(s) + delay;
    ASSERT_RC(tw_schedule(s, delay, t_on_fire, x, &x->h), TW_OK);
    assert_true(x->h != 0);
}

static inline void t_arm(tw_service *s, t_timer *x, uint64_t delay)
{
    t_arm_nocheck(s, x, delay);
    CHECK(s);
}

/* after an advance to now: every timer ran at most once, never early, and
 * every timer due at least one tick ago has run */
static inline void t_expect_due(const t_timer *v, size_t n, uint64_t now, uint64_t tick)
{
    for (size_t i = 0; i < n; i++) {
        const t_timer *x = &v[i];
        if (x->cancelled) {
            if (x->runs != 0)
                fail_msg("timer %zu ran after a successful cancel", i);
            continue;
        }
        if (x->runs > 1)
            fail_msg("timer %zu ran %d times", i, x->runs);
        if (x->runs == 1 && x->ran_at < x->deadline)
            fail_msg("timer %zu ran early: at %" PRIu64 ", deadline %" PRIu64, i,
                     x->ran_at, x->deadline);
        if (x->runs == 0 && t_sat_add(x->deadline, tick) <= now)
            fail_msg("timer %zu (deadline %" PRIu64 ") has not run by %" PRIu64
                     " (tick %" PRIu64 ")", i, x->deadline, now, tick);
    }
}

static inline void t_stats(tw_service *s, tw_stats *st)
{
    memset(st, 0xa5, sizeof *st);
    tw_stats_get(s, st);
}

/* In a loop of `calls` arm-and-cancels (or moves) that must leave the
 * wheel bounded: every 4096th call and the last, the wheel's entries (a
 * walk: tw__wheel_entries) against `bound`, the most seen kept in *worst. */
static inline void t_entries_within(tw_service *s, uint64_t k, uint64_t calls, uint64_t bound,
                                    uint64_t *worst)
{
    if (k % 4096 != 0 && k + 1 != calls)
        return;
    uint64_t e = tw__wheel_entries(s);
    *worst = e > *worst ? e : *worst;
    if (e > bound)
        fail_msg("after %" PRIu64 " calls: %" PRIu64 " entries, bound %" PRIu64, k, e, bound);
}

/* the quiescent one-shot identity */
/* The fewest placements stats.overflowed counts for n timers held in
 * `slots` slots of capacity cap. Each slot has one fixed array per lane
 * (one lane per CPU, at most TW_MAX_LANES: wheel.c my_lane), and a thread
 * the scheduler moves between CPUs fills the arrays of more than one, so
 * a test cannot count on a single lane's cap. */
static inline uint64_t t_overflow_floor(uint64_t n, uint64_t slots, uint64_t cap)
{
    uint64_t fixed = slots * TW_MAX_LANES * cap;
    return n > fixed ? n - fixed : 0;
}

#define ASSERT_STATS_IDENTITY(st)                                             \
    do {                                                                      \
        if ((st).scheduled != (st).fired + (st).cancelled + (st).dropped +    \
                                  (st).pending)                               \
            fail_msg("stats: scheduled %" PRIu64 " != fired %" PRIu64         \
                     " + cancelled %" PRIu64 " + dropped %" PRIu64            \
                     " + pending %" PRIu64, (st).scheduled, (st).fired,       \
                     (st).cancelled, (st).dropped, (st).pending);             \
    } while (0)

static inline void t_noop(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
}

#endif /* TW_TEST_H */
