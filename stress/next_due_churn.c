/*
 * next_due_churn: tw_next_due never answers "nothing pending" (UINT64_MAX)
 * while a timer is pending. One far timer Y (further than wheel_slots ticks,
 * so the scan's answer is only a slot bound and the pending count decides)
 * stays pending all along; producers arm and cancel timers as fast as they
 * can; the main thread calls tw_next_due meanwhile. The pending count read
 * the armings before the ends (clang's order of the sums), and a timer
 * armed and cancelled between the two reads made Y vanish: 3-5 answers of
 * UINT64_MAX in a million calls (a review's program, 2026-11-28).
 *
 *   next_due_churn [producers] [-] [seconds]
 */
#include "stress_common.h"

#include <pthread.h>

static tw_service *g_s;

static void st_noop(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
}
static atomic_bool g_quit;
static _Atomic uint64_t g_churned;

static void *churn(void *arg)
{
    (void)arg;
    uint64_t n = 0;
    while (!atomic_load_explicit(&g_quit, memory_order_relaxed)) {
        tw_timer x;
        if (tw_schedule(g_s, 20 * TW_SEC, st_noop, NULL, &x) != TW_OK) {
            st_fail("tw_schedule failed");
            break;
        }
        if (tw_cancel(g_s, x) != TW_OK)
            st_fail("tw_cancel of a fresh timer failed");
        n++;
    }
    atomic_fetch_add(&g_churned, n);
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned producers = (unsigned)st_arg(argc, argv, 1, 2);
    double seconds = st_arg_seconds(argc, argv, 3);
    if (producers < 1 || producers > 16)
        producers = 2;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.workers = 0;
    if (tw_create(&cfg, &g_s) != TW_OK) {
        fprintf(stderr, "next_due_churn: tw_create failed\n");
        return 1;
    }
    tw_timer y;
    if (tw_schedule(g_s, 10 * TW_SEC, st_noop, NULL, &y) != TW_OK)
        st_fail("tw_schedule of Y failed");
    pthread_t th[16];
    for (unsigned i = 0; i < producers; i++)
        pthread_create(&th[i], NULL, churn, NULL);
    uint64_t end = st_mono_ns() + (uint64_t)(seconds * 1e9), calls = 0, nothing = 0;
    while (st_mono_ns() < end) {
        for (int k = 0; k < 256; k++, calls++)
            if (tw_next_due(g_s) == UINT64_MAX)
                nothing++;
    }
    atomic_store(&g_quit, true);
    for (unsigned i = 0; i < producers; i++)
        pthread_join(th[i], NULL);
    if (nothing)
        st_fail("tw_next_due answered UINT64_MAX %" PRIu64 " times in %" PRIu64
                " calls while Y was pending", nothing, calls);
    if (tw_cancel(g_s, y) != TW_OK)
        st_fail("Y was not pending at the end");
    printf("next_due_churn: %u producers, %" PRIu64 " armed and cancelled, %" PRIu64
           " calls, %" PRIu64 " answered nothing pending\n",
           producers, atomic_load(&g_churned), calls, nothing);
    tw_destroy(g_s);
    if (st_failed()) {
        fprintf(stderr, "next_due_churn: %" PRIu64 " failed checks\n", st_failed());
        return 1;
    }
    printf("next_due_churn: ok\n");
    return 0;
}
