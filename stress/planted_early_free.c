/*
 * planted_early_free: a free without a grace period, which the sanitizer
 * builds MUST report.
 *
 *     planted_early_free plant|clean [seconds] [producers]
 *
 * A drained slot detaches its overflow segments (and their pointer table)
 * and frees them only after every thread that may still hold a pointer
 * into them has left its placement (segments.c: the grace period). This
 * program shows that the stress setup would catch a free that does not
 * wait, so that the clean runs of the other stress tests say something.
 *
 * Both modes run the same load: a MANUAL service with a 1 us tick, a
 * 64-slot wheel whose slots hold one entry in their fixed arrays (so every
 * further entry lands in an overflow segment), the kept-segment budget
 * lowered to one byte (every drain detaches), `producers` threads arming
 * timers 0-3 ticks ahead as fast as they can, and the main thread
 * advancing the clock a tick at a time without pause: the producers
 * reserve in the very slots being drained and detached, and a producer
 * that loses its CPU between its reservation and its publish (two cores,
 * more threads) finds the drain past it.
 *
 *   plant  tw__seg_plant_no_grace: what a step detached is freed at the
 *          step's end. A producer between its reservation and its publish
 *          then writes into freed memory (malloc'd: this program has
 *          every segment come from malloc, whatever its size). ctest
 *          runs this mode under ASan and TSan through
 *          expect_sanitizer_report.cmake, up to 60 runs of 2 s: the test
 *          passes at the first report that names the free (tw__seg_free)
 *          and the use (src/slots.c), and fails on any other failure or
 *          when no run is reported. A run stops at its first report; one
 *          that reaches its end unreported exits 0.
 *   clean  the library as shipped: exact accounting (every arming ran its
 *          callback once, or tw_stop handed it back), no report.
 *
 * Exit 0 when the program ran through, 1 on a failed check, 2 on a setup
 * error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stress_common.h"

#include "internal.h" /* tw__seg_plant_no_grace, tw__seg_keep_min_override */

#define TICK_NS 1000ull
#define MAX_PRODUCERS 8

static tw_service *g_s;
static _Atomic uint64_t g_fired, g_dropped;

typedef struct producer {
    pthread_t th;
    st_rng rng;
    uint64_t end_ns;
    uint64_t armed;
} producer;

static void on_fire(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    /* Relaxed: a count read after tw_stop joined every runner. */
    atomic_fetch_add_explicit(&g_fired, 1, memory_order_relaxed);
}

static void on_pending(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    /* Relaxed: as g_fired. */
    atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
}

static void *produce(void *arg)
{
    producer *p = arg;
    while (st_mono_ns() < p->end_ns) {
        for (int i = 0; i < 256; i++) {
            uint64_t delay = st_below(&p->rng, 4 * TICK_NS);
            tw_timer h;
            int rc = tw_schedule(g_s, delay, on_fire, NULL, &h);
            if (rc != TW_OK) {
                st_fail("tw_schedule: %s", tw_strerror(rc));
                return NULL;
            }
            p->armed++;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "plant") != 0 && strcmp(argv[1], "clean") != 0)) {
        fprintf(stderr, "usage: planted_early_free plant|clean [seconds] [producers]\n");
        return 2;
    }
    bool plant = strcmp(argv[1], "plant") == 0;
    double seconds = st_arg_seconds(argc, argv, 2);
    uint64_t np = st_arg(argc, argv, 3, 3);
    if (np == 0 || np > MAX_PRODUCERS)
        return 2;
    printf("planted_early_free: %s, %.0f s, %" PRIu64 " producers\n", argv[1], seconds, np);
    fflush(stdout);

    tw__seg_keep_min_override = 1; /* read by tw_create: every drain detaches */
    tw__seg_plant_no_grace = plant;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.tick_ns = TICK_NS;
    cfg.wheel_slots = 64;
    cfg.slot_capacity = 1;
    int rc = tw_create(&cfg, &g_s);
    if (rc != TW_OK) {
        fprintf(stderr, "tw_create: %s\n", tw_strerror(rc));
        return 2;
    }
    /* Every segment from malloc, before any is made: a slot that grows a
     * segment of TW_SEG_MAP_BYTES (the main thread off its CPU while the
     * producers arm) would have it mapped, and a use after its munmap is a
     * SEGV that names nothing, not the report this test waits for (seen
     * once in CI, 2026-11-28, on the sixth run). */
    g_s->wheel.segs.map_from = SIZE_MAX;
    producer p[MAX_PRODUCERS] = {0};
    uint64_t end = st_mono_ns() + (uint64_t)(seconds * 1e9);
    for (uint64_t i = 0; i < np; i++) {
        st_rng_seed(&p[i].rng, st_seed_default(), i);
        p[i].end_ns = end;
        st_start(&p[i].th, produce, &p[i]);
    }
    /* Advance a tick at a time while the producers run: drains (and, with
     * the plant, frees) follow each other without pause. */
    uint64_t now = 0;
    while (st_mono_ns() < end) {
        now += TICK_NS;
        if (tw_advance(g_s, now) != TW_OK) {
            st_fail("tw_advance");
            break;
        }
    }
    uint64_t armed = 0;
    for (uint64_t i = 0; i < np; i++) {
        pthread_join(p[i].th, NULL);
        armed += p[i].armed;
    }
    tw_stats st;
    tw_stats_get(g_s, &st);
    uint64_t lost = tw__rare_total(g_s, TW_RARE_SEG_LOST);
    if (tw_stop(g_s, on_pending) != TW_OK)
        st_fail("tw_stop");
    tw_destroy(g_s);
    uint64_t fired = atomic_load(&g_fired), dropped = atomic_load(&g_dropped);
    printf("planted_early_free: %" PRIu64 " armed, %" PRIu64 " fired, %" PRIu64
           " dropped at stop; %" PRIu64 " overflowed; %" PRIu64 " segment installs lost\n",
           armed, fired, dropped, st.overflowed, lost);
    if (fired + dropped != armed)
        st_fail("%" PRIu64 " armed, but %" PRIu64 " fired + %" PRIu64 " dropped", armed, fired,
                dropped);
    if (st.overflowed == 0)
        st_fail("no entry reached an overflow segment: the load does not test them");
    if (plant)
        printf("planted_early_free: ran through with the plant: no sanitizer report\n");
    return st_failed() ? 1 : 0;
}
