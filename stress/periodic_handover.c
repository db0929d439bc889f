/*
 * periodic_handover: a reschedule that meets the end of a periodic timer's
 * run, where the runner re-arms it under a lease (workers.c,
 * finish_periodic). A reschedule that finds that lease hands its deadline
 * over (service.c, hand_over); before, it answered TW_OK and the re-arm's
 * own deadline won, so the timer ran again one period later.
 *
 *     periodic_handover [threads (ignored)] [iterations=10^9]
 *                       [seconds=$TW_STRESS_SECONDS|3] [require=0] [seed]
 *
 * One MANUAL service, one periodic timer (period: one tick). Per round the
 * advancer moves the clock one tick, so the timer runs inside tw_advance;
 * its callback wakes the pusher thread, which after a random pause of a
 * few dozen spins pushes the timer an hour back (tw_reschedule) while the
 * run ends. Checked per round: the push returned TW_OK (the timer is
 * alive); the timer ran exactly once; after two more ticks it has not run
 * again (a push lost to the re-arm lets it run at the next tick). Then the
 * advancer brings it back to the next tick (tw_reschedule 0). Every
 * CANCEL_EVERY-th round a third thread also cancels the timer as the run
 * ends: the cancel must answer TW_OK, the push TW_OK or TW_ENOENT, and the
 * timer never run again; the advancer then arms a new one. With require =
 * 1 (as ctest runs it) the run also fails if no push landed on the
 * re-arm's lease (TW_RARE_HANDED_OVER); every 16th round holds that
 * window open until the push is over (hold_the_rearm), so that a loaded
 * machine still meets it. tw__check at the end checks the
 * counters against the records (nothing leaked, nothing freed twice).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stress_common.h"

#include <sched.h>
#include <semaphore.h>

#include "internal.h" /* tw__rare_total, tw__check */

#define TICK_NS  1000000ull
#define FAR_NS   (3600ull * 1000000000ull)
#define CANCEL_EVERY 8

static tw_service *g_s;
static _Atomic tw_timer g_timer;
static _Atomic uint64_t g_round;   /* the round the advancer is in (1, 2, ...) */
static _Atomic uint64_t g_ran;     /* runs of the timer */
static _Atomic uint64_t g_woke;    /* the round whose run woke the pusher */
static _Atomic uint64_t g_pushed;  /* the round whose push is over */
static _Atomic int g_push_rc;
static _Atomic uint64_t g_cancelled; /* the round whose cancel is over */
static _Atomic int g_cancel_rc;
static sem_t g_cancel_round;         /* posted before a round with a cancel */
static _Atomic bool g_quit;

static void on_run(tw_timer t, void *arg)
{
    (void)arg;
    if (t != atomic_load(&g_timer))
        st_fail("callback got handle %" PRIx64 ", armed %" PRIx64, t, atomic_load(&g_timer));
    atomic_fetch_add(&g_ran, 1);
    atomic_store(&g_woke, atomic_load(&g_round));
}

/* Three threads wait on two cores: spin a while, then let the others run. */
static void spin_wait(unsigned *spins)
{
    if (++*spins % 256 == 0)
        sched_yield();
}

/* Wait for the next round's run; false when the run is over. */
static bool wait_for_run(uint64_t done, uint64_t *woke)
{
    for (unsigned spins = 0; (*woke = atomic_load(&g_woke)) == done; spin_wait(&spins))
        if (atomic_load(&g_quit))
            return false;
    return true;
}

/* Land anywhere from inside the callback's end to after the re-arm: the
 * lease window is a few dozen instructions, and where it falls against
 * the push depends on the machine and its load (two runs side by side on
 * two cores met it in two of six runs). So the pause is a random part of
 * a range whose start the advancer moves on every PAUSE_BLOCK rounds that
 * met no re-arm, through PAUSE_STARTS, until pushes land on it again. */
#define PAUSE_BLOCK 1024
static const uint64_t pause_starts[] = {0, 32, 64, 128, 256, 512, 1024, 2048};
#define PAUSE_STARTS (sizeof pause_starts / sizeof pause_starts[0])
static _Atomic uint64_t g_pause_start;

static void pause_a_little(st_rng *rng)
{
    uint64_t k = atomic_load_explicit(&g_pause_start, memory_order_relaxed) + st_below(rng, 96);
    for (; k > 0; k--)
        atomic_signal_fence(memory_order_seq_cst);
}

/* The advancer, every PAUSE_BLOCK rounds: no push met the re-arm in the
 * last block: try the next range. */
static void tune_pause(uint64_t *handed_before, unsigned *at)
{
    uint64_t handed = tw__rare_total(g_s, TW_RARE_HANDED_OVER);
    if (handed == *handed_before) {
        *at = (*at + 1) % PAUSE_STARTS;
        atomic_store_explicit(&g_pause_start, pause_starts[*at], memory_order_relaxed);
    }
    *handed_before = handed;
}

/* Every HOLD_EVERY-th round (never a cancel round) the re-arm's lease
 * window is held open (tw__rearm_window_hook) until that round's push is
 * over, for at most HOLD_NS: on two loaded cores the random pauses alone
 * met the window in none of 5,000 to 10,000 rounds (18 s, TSan, beside
 * CPU hogs), and the run failed its require. The other rounds keep the
 * race as it comes. */
#define HOLD_EVERY 16
#define HOLD_NS (50 * TICK_NS)

static void hold_the_rearm(void)
{
    uint64_t r = atomic_load(&g_round);
    if (r % HOLD_EVERY != 5)
        return;
    uint64_t until = st_mono_ns() + HOLD_NS;
    for (unsigned spins = 0; atomic_load(&g_pushed) != r && st_mono_ns() < until;)
        spin_wait(&spins);
}

static void *pusher(void *arg)
{
    st_rng *rng = arg;
    for (uint64_t done = 0, woke; wait_for_run(done, &woke); done = woke) {
        pause_a_little(rng);
        atomic_store(&g_push_rc, tw_reschedule(g_s, atomic_load(&g_timer), FAR_NS));
        atomic_store(&g_pushed, woke);
    }
    return NULL;
}

/* Asleep between its rounds, so that the other rounds have the two cores
 * to the advancer and the pusher. */
static void *canceller(void *arg)
{
    st_rng *rng = arg;
    for (uint64_t woke;;) {
        while (sem_wait(&g_cancel_round) != 0) {
        }
        if (atomic_load(&g_quit) || !wait_for_run(atomic_load(&g_round) - 1, &woke))
            return NULL;
        pause_a_little(rng);
        atomic_store(&g_cancel_rc, tw_cancel(g_s, atomic_load(&g_timer)));
        atomic_store(&g_cancelled, woke);
    }
    return NULL;
}

static void advance_or_fail(uint64_t now)
{
    int rc = tw_advance(g_s, now);
    if (rc != TW_OK)
        st_fail("tw_advance(%" PRIu64 "): %s", now, tw_strerror(rc));
}

int main(int argc, char **argv)
{
    uint64_t iterations = st_arg(argc, argv, 2, 1000000000ull);
    double seconds = st_arg_seconds(argc, argv, 3);
    uint64_t require = st_arg(argc, argv, 4, 0);
    uint64_t seed = st_arg(argc, argv, 5, st_seed_default());
    printf("periodic_handover: seed %" PRIu64 " iterations %" PRIu64 " seconds %.1f"
           " require %" PRIu64 "\n", seed, iterations, seconds, require);

    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.tick_ns = TICK_NS;
    if (tw_create(&cfg, &g_s) != TW_OK)
        return 2;
    tw_timer first;
    if (tw_schedule_every(g_s, 0, TICK_NS, on_run, NULL, &first) != TW_OK)
        return 2;
    atomic_store(&g_timer, first);
    atomic_store(&tw__rearm_window_hook, hold_the_rearm);
    if (sem_init(&g_cancel_round, 0, 0) != 0)
        return 2;
    st_rng rng[2];
    st_rng_seed(&rng[0], seed, 0);
    st_rng_seed(&rng[1], seed, 1);
    pthread_t th[2];
    if (pthread_create(&th[0], NULL, pusher, &rng[0]) != 0 ||
        pthread_create(&th[1], NULL, canceller, &rng[1]) != 0)
        return 2;
    uint64_t cancels = 0, push_enoent = 0, handed_before = 0;
    unsigned pause_at = 0;

    /* With require, a run that met no re-arm by its end goes on for up to
     * five times as long again (a loaded machine may not schedule the
     * pusher inside the window for seconds: with ctest -j2 beside the
     * sanitizer builds' other stress tests, 9 s went by without one). */
    uint64_t now = 0, rounds = 0, start = st_mono_ns(), span = (uint64_t)(seconds * 1e9);
    uint64_t end = start + span, extended = start + 6 * span;
    for (uint64_t r = 1; r <= iterations && st_failed() == 0; r++) {
        uint64_t t = st_mono_ns();
        if (t >= end && !(require && handed_before == 0 && t < extended))
            break;
        atomic_store(&g_round, r);
        bool cancelled = r % CANCEL_EVERY == 0;
        if (cancelled)
            sem_post(&g_cancel_round);
        uint64_t ran = atomic_load(&g_ran);
        now += TICK_NS;
        advance_or_fail(now); /* runs the timer; the push races its end */
        if (atomic_load(&g_ran) != ran + 1)
            st_fail("round %" PRIu64 ": the timer ran %" PRIu64 " times, not once", r,
                    atomic_load(&g_ran) - ran);
        for (unsigned spins = 0; atomic_load(&g_pushed) != r && !st_failed();)
            spin_wait(&spins);
        for (unsigned spins = 0; cancelled && atomic_load(&g_cancelled) != r && !st_failed();)
            spin_wait(&spins);
        int rc = atomic_load(&g_push_rc);
        if (rc != TW_OK && !(cancelled && rc == TW_ENOENT))
            st_fail("round %" PRIu64 ": tw_reschedule: %s", r, tw_strerror(rc));
        push_enoent += rc == TW_ENOENT;
        if (cancelled && (rc = atomic_load(&g_cancel_rc)) != TW_OK)
            st_fail("round %" PRIu64 ": tw_cancel: %s", r, tw_strerror(rc));
        now += 2 * TICK_NS;
        advance_or_fail(now);
        if (atomic_load(&g_ran) != ran + 1)
            st_fail("round %" PRIu64 ": %s, ran again at the next tick", r,
                    cancelled ? "cancelled (TW_OK)" : "pushed an hour back (TW_OK)");
        if (cancelled) { /* a new timer for the next round */
            tw_timer h;
            rc = tw_schedule_every(g_s, 0, TICK_NS, on_run, NULL, &h);
            atomic_store(&g_timer, h);
            cancels++;
        } else {
            rc = tw_reschedule(g_s, atomic_load(&g_timer), 0); /* back to the next tick */
        }
        if (rc != TW_OK)
            st_fail("round %" PRIu64 ": arming the next run: %s", r, tw_strerror(rc));
        if (r % PAUSE_BLOCK == 0)
            tune_pause(&handed_before, &pause_at);
        rounds = r;
    }
    atomic_store(&g_quit, true);
    sem_post(&g_cancel_round);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    sem_destroy(&g_cancel_round);

    char why[256];
    if (tw__check(g_s, why, sizeof why) != 0)
        st_fail("invariants: %s", why);
    uint64_t handed = tw__rare_total(g_s, TW_RARE_HANDED_OVER);
    printf("rounds %" PRIu64 ", pushes handed to the re-arm %" PRIu64 ", cancels %" PRIu64
           " (pushes then ENOENT %" PRIu64 ")\n", rounds, handed, cancels, push_enoent);
    if (handed == 0 && require)
        st_fail("no push landed on the re-arm's lease");
    tw_destroy(g_s);
    atomic_store(&tw__rearm_window_hook, NULL);
    if (st_failed()) {
        fprintf(stderr, "periodic_handover: %" PRIu64 " failed checks\n", st_failed());
        return 1;
    }
    printf("periodic_handover: ok\n");
    return 0;
}
