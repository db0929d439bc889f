/* test_clock.c: the MONOTONIC clock across tw_pause (src/clock.c). A
 * reading of tw_now is never later than the value the pause freezes at,
 * and never goes backwards, however the reader's or the pauser's thread is
 * preempted between its look at the clock's state and its clock read.
 *
 * This executable is linked with --wrap=clock_gettime: the library's clock
 * reads come here, and a thread that set `hold_next` is held inside its
 * next one (before the real read, or after it) until the test lets it go,
 * which stands for a preemption at that point. */
#include "tw_test.h"

#include <pthread.h>
#include <stdatomic.h>

int __real_clock_gettime(clockid_t c, struct timespec *ts);
int __wrap_clock_gettime(clockid_t c, struct timespec *ts);

static _Thread_local int hold_next;   /* 1: hold before the read, 2: after */
static _Atomic int held, let_go;

static void wait_flag(_Atomic int *f)
{
    for (int i = 0; !atomic_load(f) && i < 10000; i++) {
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
    }
}

int __wrap_clock_gettime(clockid_t c, struct timespec *ts)
{
    int mode = hold_next;
    hold_next = 0;
    if (mode == 1) {
        atomic_store(&held, 1);
        wait_flag(&let_go);
    }
    int rc = __real_clock_gettime(c, ts);
    if (mode == 2) {
        atomic_store(&held, 1);
        wait_flag(&let_go);
    }
    return rc;
}

static tw_service *monotonic_service(void)
{
    tw_config cfg;
    tw_config_init(&cfg);
    return t_service_cfg(&cfg);
}

/* A reader looks at the state (running), then is held before its clock
 * read while the service is paused. It used to return its later reading,
 * past the frozen value (a runner holding such a `now` ran a timer early
 * after tw_resume; a review's program). */
static tw_service *g_s;
static _Atomic uint64_t g_read;

static void *read_held(void *arg)
{
    (void)arg;
    hold_next = 1;
    atomic_store(&g_read, tw_now(g_s));
    return NULL;
}

static void a_reading_across_the_pause_is_not_past_it(void **state)
{
    (void)state;
    atomic_store(&held, 0);
    atomic_store(&let_go, 0);
    g_s = monotonic_service();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, read_held, NULL), 0);
    wait_flag(&held);
    assert_true(atomic_load(&held));
    ASSERT_RC(tw_pause(g_s), TW_OK);
    uint64_t frozen = tw_now(g_s);
    t_sleep_ns(5 * T_MS); /* real time moves on past the freeze */
    atomic_store(&let_go, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    uint64_t got = atomic_load(&g_read);
    if (got > frozen)
        fail_msg("a reading %" PRIu64 " ns past the frozen clock", got - frozen);
    ASSERT_RC(tw_resume(g_s), TW_OK);
    assert_true(tw_now(g_s) >= frozen);
    tw_destroy(g_s);
}

/* The pauser is held after its clock read, before the state changes,
 * while another thread reads the clock. The pause used to freeze at its
 * own (earlier) reading, behind what the other thread had been told: the
 * clock went backwards (a review's program). */
static void *pause_held(void *arg)
{
    (void)arg;
    hold_next = 2;
    tw_pause(g_s);
    return NULL;
}

static void the_clock_never_goes_back_across_a_held_pause(void **state)
{
    (void)state;
    atomic_store(&held, 0);
    atomic_store(&let_go, 0);
    g_s = monotonic_service();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, pause_held, NULL), 0);
    wait_flag(&held);
    assert_true(atomic_load(&held));
    uint64_t max_seen = 0;
    for (int i = 0; i < 1000; i++) { /* while the pauser is held */
        uint64_t now = tw_now(g_s);
        max_seen = now > max_seen ? now : max_seen;
    }
    t_sleep_ns(2 * T_MS);
    max_seen = tw_now(g_s) > max_seen ? tw_now(g_s) : max_seen;
    atomic_store(&let_go, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    uint64_t frozen = tw_now(g_s);
    if (frozen < max_seen)
        fail_msg("paused at %" PRIu64 " ns before a time already read", max_seen - frozen);
    ASSERT_RC(tw_resume(g_s), TW_OK);
    tw_destroy(g_s);
}

/* ---- the late clock (clock.c): what armings read ---------------------- */

static uint64_t true_ns(void)
{
    struct timespec ts;
    __real_clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * T_S + (uint64_t)ts.tv_nsec;
}

#define LATE_RUN_NS (80 * T_MS)   /* past the rate's 20 ms and many rebases */
#define LATE_BOUND_NS (50 * 1000) /* how much later than the clock it may be */

typedef struct late_check {
    uint64_t reads, early, too_late, worst_early;
} late_check;

/* Reads the late clock between two true reads for LATE_RUN_NS: counts
 * readings below the one before (early) and above the one after by more
 * than LATE_BOUND_NS. */
static void *late_reads(void *arg)
{
    late_check *c = arg;
    uint64_t end = true_ns() + LATE_RUN_NS;
    for (uint64_t before = true_ns(); before < end; before = true_ns()) {
        uint64_t r = tw__clock_monotonic_late();
        uint64_t after = true_ns();
        c->reads++;
        if (r < before) {
            c->early++;
            if (before - r > c->worst_early)
                c->worst_early = before - r;
        }
        if (r > after + LATE_BOUND_NS)
            c->too_late++;
    }
    return NULL;
}

static void late_reads_on_two_threads(late_check *c)
{
    pthread_t th;
    memset(c, 0, 2 * sizeof *c);
    assert_int_equal(pthread_create(&th, NULL, late_reads, &c[1]), 0);
    late_reads(&c[0]);
    assert_int_equal(pthread_join(th, NULL), 0);
    c[0].reads += c[1].reads;
    c[0].early += c[1].early;
    c[0].too_late += c[1].too_late;
    if (c[1].worst_early > c[0].worst_early)
        c[0].worst_early = c[1].worst_early;
}

/* No reading of the late clock is earlier than CLOCK_MONOTONIC read before
 * it, none more than LATE_BOUND_NS later than one read after it, on two
 * threads (each its own base), and on x86-64 it measures its rate and
 * stays on. */
static void the_late_clock_is_never_early(void **state)
{
    (void)state;
    tw__late_clock_reset();
    late_check c[2];
    late_reads_on_two_threads(c);
    print_message("      %" PRIu64 " reads, %" PRIu64 " early, %" PRIu64 " over %d us late; on: %d\n",
                  c[0].reads, c[0].early, c[0].too_late, LATE_BOUND_NS / 1000,
                  (int)tw__late_clock_on());
    assert_int_equal(c[0].early, 0);
    assert_int_equal(c[0].too_late, 0);
#if defined(__x86_64__)
    /* Under valgrind a clock read takes microseconds: no base is read
     * unpreempted, and the late clock rightly stays the true one. */
    const char *pre = getenv("LD_PRELOAD");
    if (!pre || !strstr(pre, "vgpreload"))
        assert_true(tw__late_clock_on());
#endif
}

/* A planted under-estimate: the rate measured is made 10% too low, so
 * readings fall behind the clock by a tenth of a base's age. The next new
 * base finds its old one's estimate below the clock and turns the late
 * clock off; after that every reading is the true clock's. */
static uint64_t slow_rate(uint64_t mult)
{
    return mult - mult / 10;
}

static void an_under_estimating_late_clock_turns_itself_off(void **state)
{
    (void)state;
#if defined(__x86_64__)
    tw__late_clock_reset();
    atomic_store(&tw__late_mult_hook, slow_rate);
    late_check c[2];
    late_reads_on_two_threads(c);
    atomic_store(&tw__late_mult_hook, NULL);
    print_message("      planted: %" PRIu64 " early readings (worst %" PRIu64 " ns) before it "
                  "turned off; on: %d\n", c[0].early, c[0].worst_early,
                  (int)tw__late_clock_on());
    assert_false(tw__late_clock_on()); /* off, or (valgrind) never on */
    /* Off: the true clock from now on. */
    late_reads_on_two_threads(c);
    assert_int_equal(c[0].early, 0);
    tw__late_clock_reset();
#else
    skip();
#endif
}

/* The first MONOTONIC service reads the late clock's first base, so that
 * its rate is known LATE_CALIBRATE_NS (20 ms) after tw_create, not 20 ms
 * after the first arming (until then every arming reads clock_gettime
 * and a bracket): a reading 25 ms after the creation finds the rate. */
static void the_late_clock_is_ready_for_the_first_arming(void **state)
{
    (void)state;
#if defined(__x86_64__)
    const char *pre = getenv("LD_PRELOAD");
    if (pre && strstr(pre, "vgpreload"))
        skip(); /* no bracket is unpreempted under valgrind (above) */
    tw__late_clock_reset();
    tw_service *s = t_monotonic(0, T_MS);
    t_sleep_ns(25 * T_MS);
    bool on = false;
    for (int i = 0; i < 3 && !on; i++) { /* a preempted bracket reads again */
        (void)tw__clock_monotonic_late();
        on = tw__late_clock_on();
    }
    assert_true(on);
    tw_destroy(s);
    tw__late_clock_reset();
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_reading_across_the_pause_is_not_past_it),
        cmocka_unit_test(the_clock_never_goes_back_across_a_held_pause),
        cmocka_unit_test(the_late_clock_is_never_early),
        cmocka_unit_test(an_under_estimating_late_clock_turns_itself_off),
        cmocka_unit_test(the_late_clock_is_ready_for_the_first_arming),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
