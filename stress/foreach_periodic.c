/*
 * foreach_periodic.c: tw_foreach_pending racing a periodic timer's life
 * (MANUAL clock, a 1 us tick, one thread advancing a tick at a time):
 *
 *   rearm  a timer of period 1 us; a walk must never report a deadline
 *          before the next run, which is after every run started before
 *          the walk (a walk that met the re-arm used to report the run
 *          that had just ended);
 *   moved  a timer of period 1 s whose every run waits for a
 *          tw_reschedule(1 us) from another thread; a walk must never
 *          report more than tw_now + the period (a walk that met the move
 *          used to add the period to the moved deadline).
 *
 * Both were found by a reproducer and fixed in pending_info (service.c):
 * a walk waits out a lease and reads between two equal state words.
 *
 *     foreach_periodic [threads: -] [iterations: -] [seconds]
 */
#include "stress_common.h"

#define TICK 1000ull
#define MOVED_PERIOD 1000000000ull

static tw_service *svc;
static tw_timer handle;
static _Atomic int quit;
static _Atomic uint64_t started; /* runs started */
static _Atomic uint64_t moved;   /* runs whose reschedule is done (moved) */

static void *advancer(void *arg)
{
    (void)arg;
    while (!atomic_load(&quit)) {
        if (tw_advance(svc, tw_now(svc) + TICK) != TW_OK)
            st_fail("tw_advance failed");
    }
    return NULL;
}

/* ---- rearm ---------------------------------------------------------------- */

static const uint64_t first = 5 * TICK, period = TICK;
static uint64_t started_before;

static void count_run(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_fetch_add(&started, 1);
}

static void check_rearm(const tw_timer_info *info, void *ctx)
{
    (void)ctx;
    /* runs 0 .. started_before - 1 began before the walk: the next run is
     * at first + started_before * period or later */
    uint64_t next = first + started_before * period;
    if (info->deadline_ns < next)
        st_fail("rearm: after %" PRIu64 " runs the walk reports %" PRIu64 " < %" PRIu64,
                started_before, info->deadline_ns, next);
    if (info->period_ns != period)
        st_fail("rearm: period %" PRIu64, info->period_ns);
}

static uint64_t run_rearm(double seconds)
{
    tw_config c;
    tw_config_init(&c);
    c.clock = TW_CLOCK_MANUAL;
    c.tick_ns = TICK;
    c.wheel_slots = 64;
    if (tw_create(&c, &svc) != TW_OK || tw_schedule_every(svc, first, period, count_run,
                                                          NULL, &handle) != TW_OK)
        st_fail("rearm: setup");
    atomic_store(&quit, 0);
    pthread_t th;
    pthread_create(&th, NULL, advancer, NULL);
    uint64_t walks = 0, end = st_mono_ns() + (uint64_t)(seconds * 1e9);
    while (st_mono_ns() < end && st_failed() == 0) {
        started_before = atomic_load(&started);
        if (tw_foreach_pending(svc, check_rearm, NULL) != 1)
            st_fail("rearm: the walk did not report the timer once");
        walks++;
    }
    atomic_store(&quit, 1);
    pthread_join(th, NULL);
    printf("rearm: %" PRIu64 " walks over %" PRIu64 " runs\n", walks, atomic_load(&started));
    tw_destroy(svc);
    return walks;
}

/* ---- moved ------------------------------------------------------------------ */

static void wait_for_move(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    uint64_t k = atomic_fetch_add(&started, 1) + 1;
    while (atomic_load(&moved) < k && !atomic_load(&quit)) {
    }
}

static void *mover(void *arg)
{
    (void)arg;
    for (uint64_t k = 1; !atomic_load(&quit); k++) {
        while (atomic_load(&started) < k && !atomic_load(&quit)) {
        }
        if (atomic_load(&quit))
            break;
        if (tw_reschedule(svc, handle, TICK) != TW_OK)
            st_fail("moved: tw_reschedule of the running timer failed");
        atomic_store(&moved, k);
    }
    return NULL;
}

static uint64_t reported;
static void note_deadline(const tw_timer_info *info, void *ctx)
{
    (void)ctx;
    reported = info->deadline_ns;
}

static uint64_t run_moved(double seconds)
{
    tw_config c;
    tw_config_init(&c);
    c.clock = TW_CLOCK_MANUAL;
    c.tick_ns = TICK;
    c.wheel_slots = 64;
    atomic_store(&started, 0);
    atomic_store(&moved, 0);
    atomic_store(&quit, 0);
    if (tw_create(&c, &svc) != TW_OK ||
        tw_schedule_every(svc, TICK, MOVED_PERIOD, wait_for_move, NULL, &handle) != TW_OK)
        st_fail("moved: setup");
    pthread_t a, m;
    pthread_create(&a, NULL, advancer, NULL);
    pthread_create(&m, NULL, mover, NULL);
    uint64_t walks = 0, end = st_mono_ns() + (uint64_t)(seconds * 1e9);
    while (st_mono_ns() < end && st_failed() == 0) {
        reported = 0;
        /* Pending for the whole walk (periodic, never cancelled here), its
         * run and its move in progress included: reported exactly once. */
        if (tw_foreach_pending(svc, note_deadline, NULL) != 1)
            st_fail("moved: the walk did not report the timer once");
        uint64_t now = tw_now(svc);
        /* the grid (a run at or before now, + the period) or a move (now +
         * a tick): never later than now + the period */
        if (reported > now + MOVED_PERIOD)
            st_fail("moved: the walk reports %" PRIu64 " > tw_now %" PRIu64 " + period",
                    reported, now);
        walks++;
    }
    atomic_store(&quit, 1);
    pthread_join(a, NULL);
    pthread_join(m, NULL);
    printf("moved: %" PRIu64 " walks over %" PRIu64 " runs\n", walks, atomic_load(&started));
    tw_destroy(svc);
    return walks;
}

int main(int argc, char **argv)
{
    double seconds = st_arg_seconds(argc, argv, 3);
    run_rearm(seconds / 2);
    run_moved(seconds / 2);
    if (atomic_load(&started) == 0)
        st_fail("no run started: the test tested nothing");
    return st_failed() ? 1 : 0;
}
