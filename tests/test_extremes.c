/* test_extremes.c: every configuration value the header calls valid works,
 * at its extremes, as a service that fires its timers (issue 13: a slot
 * capacity of 2^20 with the default wheel used to ask calloc for 576 GiB).
 * Memory is used as slots fill (each slot's fixed array is made on its
 * first use), so these run under the sanitizers too (ctest -L unit in the
 * asan and tsan configurations). */
#include "tw_test.h"

#include <stdatomic.h>

static atomic_int g_fired;
static void count_fire(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_fetch_add(&g_fired, 1);
}

/* MANUAL: n timers spread over `spread` ticks, each fires once at its
 * tick; the invariants hold. */
static void manual_fires(tw_config *cfg, int n, uint64_t spread)
{
    cfg->clock = TW_CLOCK_MANUAL;
    tw_service *s = t_service_cfg(cfg);
    static t_timer v[4096];
    assert_true(n <= 4096);
    for (int i = 0; i < n; i++)
        t_arm_nocheck(s, &v[i], (uint64_t)(i % (int)spread + 1) * cfg->tick_ns);
    CHECK(s);
    uint64_t now = 0;
    for (uint64_t k = 1; k <= spread + 1; k++) {
        now = k * cfg->tick_ns;
        ADVANCE(s, now);
        t_expect_due(v, (size_t)n, now, cfg->tick_ns);
    }
    for (int i = 0; i < n; i++)
        assert_int_equal(v[i].runs, 1);
    tw_destroy(s);
}

static void slot_capacity_2_20_default_wheel(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.slot_capacity = 1u << 20;
    manual_fires(&cfg, 3000, 7); /* 7 slots, about 430 timers each */
}

static void wheel_slots_65536(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.wheel_slots = 65536;
    manual_fires(&cfg, 2000, 100);
}

static void wheel_slots_65536_capacity_2_20(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.wheel_slots = 65536;
    cfg.slot_capacity = 1u << 20;
    manual_fires(&cfg, 500, 3);
}

static void tick_1us_and_1s_manual(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.tick_ns = 1000;
    manual_fires(&cfg, 1000, 50);
    tw_config_init(&cfg);
    cfg.tick_ns = T_S;
    manual_fires(&cfg, 1000, 5);
}

/* MONOTONIC: n timers due within `within` ns all fire once. */
static void monotonic_fires(tw_config *cfg, int n, uint64_t within)
{
    tw_service *s = t_service_cfg(cfg);
    atomic_store(&g_fired, 0);
    for (int i = 0; i < n; i++)
        ASSERT_RC(tw_schedule(s, within * (uint64_t)i / (uint64_t)n, count_fire, NULL, NULL),
                  TW_OK);
    uint64_t waited = 0;
    while (atomic_load(&g_fired) < n && waited < 20 * T_S) {
        t_sleep_ns(10 * T_MS);
        waited += 10 * T_MS;
    }
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    assert_int_equal(atomic_load(&g_fired), n);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, (uint64_t)n);
    assert_int_equal(st.pending, 0);
    tw_destroy(s);
}

static void workers_1024(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 1024;
    monotonic_fires(&cfg, 4096, 50 * T_MS);
}

static void tick_1us_monotonic(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.tick_ns = 1000;
    monotonic_fires(&cfg, 2000, 20 * T_MS);
    tw_config_init(&cfg);
    cfg.tick_ns = 1000;
    cfg.workers = 0;
    monotonic_fires(&cfg, 2000, 20 * T_MS);
}

static void tick_1s_monotonic(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.tick_ns = T_S;
    monotonic_fires(&cfg, 100, 0); /* delay 0: the next tick, within a second */
}

static void wheel_slots_65536_capacity_2_20_monotonic(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.wheel_slots = 65536;
    cfg.slot_capacity = 1u << 20;
    monotonic_fires(&cfg, 1000, 30 * T_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slot_capacity_2_20_default_wheel),
        cmocka_unit_test(wheel_slots_65536),
        cmocka_unit_test(wheel_slots_65536_capacity_2_20),
        cmocka_unit_test(tick_1us_and_1s_manual),
        cmocka_unit_test(workers_1024),
        cmocka_unit_test(tick_1us_monotonic),
        cmocka_unit_test(tick_1s_monotonic),
        cmocka_unit_test(wheel_slots_65536_capacity_2_20_monotonic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
