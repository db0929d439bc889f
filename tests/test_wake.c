/* test_wake.c: tw_wake_fd and tw_next_due against a thread that is inside
 * tw_advance when the loop asks (MANUAL clock). The loop must never be
 * told a time later than a pending timer's with the descriptor left quiet.
 *
 * This executable is linked with --wrap=tw__wake_if_sooner: the library's
 * wake-up checks come here, and the first one made while `hold_after` is
 * set is held, after the library's own check, until the loop has asked
 * again; that stands for the advancing thread being preempted there. */
#include "tw_test.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

void __real_tw__wake_if_sooner(tw_service *s, uint64_t due_tick);
void __wrap_tw__wake_if_sooner(tw_service *s, uint64_t due_tick);

static _Atomic int hold_after, stage;

static void wait_stage(int want)
{
    for (int i = 0; atomic_load(&stage) != want && i < 10000; i++)
        t_sleep_ns(T_MS);
}

void __wrap_tw__wake_if_sooner(tw_service *s, uint64_t due_tick)
{
    __real_tw__wake_if_sooner(s, due_tick);
    if (atomic_exchange(&hold_after, 0)) {
        atomic_store(&stage, 1); /* the loop asks now */
        wait_stage(2);
    }
}

static tw_service *g_s;

static void rearmed(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&hold_after, 1); /* the re-arm's placement comes next */
}

static void *advance_it(void *arg)
{
    (void)arg;
    CB_EXPECT(tw_advance(g_s, T_S) == TW_OK, "tw_advance");
    return NULL;
}

static bool readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

/* A periodic timer, a second apart, on a wheel of 64 slots (its re-arm is
 * only a far slot's bound to the scan). Another thread advances to its
 * run; the loop asks while that thread places the re-arm. Its answer is
 * finite, or the descriptor is readable: the run used to be counted as
 * over only after the re-arm was placed, so the loop was told UINT64_MAX,
 * the re-arm's check had read its earlier answer, and nothing woke it. */
static void a_periodic_rearm_beside_the_loop_is_seen(void **state)
{
    (void)state;
    atomic_store(&hold_after, 0);
    atomic_store(&stage, 0);
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.workers = 0;
    cfg.wheel_slots = 64;
    g_s = t_service_cfg(&cfg);
    ASSERT_RC(tw_schedule_every(g_s, T_S, T_S, rearmed, NULL, NULL), TW_OK);
    int fd = tw_wake_fd(g_s);
    assert_true(fd >= 0);
    assert_true(tw_next_due(g_s) <= T_S); /* a bound: 1 s is past the 64 slots */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, advance_it, NULL), 0);
    wait_stage(1);
    assert_int_equal(atomic_load(&stage), 1);
    uint64_t answer = tw_next_due(g_s); /* the loop, woken by other I/O */
    atomic_store(&stage, 2);
    assert_int_equal(pthread_join(t, NULL), 0);
    CB_ASSERT_CLEAN();
    if (answer == UINT64_MAX && !readable(fd))
        fail_msg("told nothing is pending, descriptor quiet, with the periodic timer re-armed");
    uint64_t after = tw_next_due(g_s);
    assert_true(after > T_S && after <= 2 * T_S);
    tw_destroy(g_s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_periodic_rearm_beside_the_loop_is_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
