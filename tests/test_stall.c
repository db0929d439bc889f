/* test_stall.c: a producer stalled inside tw_schedule, between its read
 * of the cursor and its reservation, while a MANUAL tw_advance moves the
 * cursor 2^35 ticks (2^23 turns of level 0). A slot's round carries the
 * whole epoch it collects for, so the slot the producer aimed at reads as
 * newer than its target however far the cursor went (once a rotation
 * number, it wrapped at such jumps and the timer fired 4095 ticks late or
 * never): the producer recomputes and the timer runs at the next tick.
 *
 * The stall: this executable defines sched_getcpu, which the library's
 * my_lane calls (machines with more than one CPU) between its read of the
 * cursor and its reservation; on the gated thread it waits for the main
 * thread's advance. On one CPU it is never called: the test is skipped. */
#include "tw_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

static _Thread_local bool t_gated;
static atomic_bool g_entered, g_open;

int sched_getcpu(void)
{
    if (t_gated) {
        t_gated = false;
        atomic_store(&g_entered, true);
        while (!atomic_load(&g_open)) {
        }
    }
    return 0;
}

static atomic_int g_fired;

static void count(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_fetch_add(&g_fired, 1);
}

typedef struct producer {
    tw_service *s;
    int rc;
    atomic_bool done;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    t_gated = true;
    p->rc = tw_schedule(p->s, 1000, count, NULL, NULL); /* due at tick 1 */
    atomic_store(&p->done, true);
    return NULL;
}

static void stalled_producer_across_huge_advance(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.workers = 0;
    cfg.tick_ns = 1000;
    cfg.wheel_slots = 4096; /* level 0: 2^12 ticks a rotation */
    tw_service *s = t_service_cfg(&cfg);
    producer p = {.s = s, .rc = -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, produce, &p), 0);
    while (!atomic_load(&g_entered) && !atomic_load(&p.done)) {
    }
    if (!atomic_load(&g_entered)) { /* one lane: no stall point */
        pthread_join(th, NULL);
        tw_destroy(s);
        skip();
    }
    /* 2^35 ticks: level 0's slots move 2^23 rotations (the wrap of a
     * 23-bit rotation number: the slot of tick 1 would read as the
     * producer's own round). */
    uint64_t T = 1ull << 35;
    ASSERT_RC(tw_advance(s, T * 1000), TW_OK);
    atomic_store(&g_open, true);
    pthread_join(th, NULL);
    ASSERT_RC(p.rc, TW_OK);
    assert_int_equal(atomic_load(&g_fired), 0);
    /* Its deadline (tick 1) is long past: it runs at the next tick. */
    ASSERT_RC(tw_advance(s, (T + 1) * 1000), TW_OK);
    assert_int_equal(atomic_load(&g_fired), 1);
    assert_int_equal(tw__rare_total(s, TW_RARE_NEWER), 1); /* recomputed once */
    assert_int_equal(tw__rare_total(s, TW_RARE_RAN_AWAY), 0);
    CHECK(s);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stalled_producer_across_huge_advance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
