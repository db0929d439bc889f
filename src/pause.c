/*
 * pause.c: pausing a MONOTONIC service (tw_pause, tw_resume): the frozen
 * clock and the runners' gate.
 *
 * The clock (clock.c reads it): clock_state holds, while running, the time
 * spent paused so far, and service time is CLOCK_MONOTONIC minus it; while
 * paused, TW_CLOCK_PAUSED | the service time at the pause, which tw_now
 * returns until tw_resume. tw_resume stores the new paused total so that
 * service time goes on from the frozen value: every deadline (ns since the
 * origin, on the service clock) keeps the time it had left, and nothing
 * is caught up on, so periodic timers are not bunched. Both are one CAS on
 * the word; a second pause or resume finds it done (idempotent).
 *
 * What stops while paused: the cursor sees a clock that does not move and
 * processes no tick (it sleeps on its futex until tw_resume or tw_stop);
 * a worker waiting for a deadline it claimed ahead sleeps without a
 * timeout; and no callback starts: every runner (the cursor with
 * workers = 0, a worker) passes the gate below right before it claims a
 * timer for its run.
 *
 * The gate. Invariant: once tw_pause returns, no runner claims a timer
 * until tw_resume. A runner raises its own `starting` word (its own cache
 * line), looks at the clock state, claims, and lowers the word before the
 * callback's call; tw_pause freezes the clock, then waits until every
 * runner's word is down. A runner that looked before the freeze has
 * claimed by then (its callback has started, or is a few instructions
 * from it: started before tw_pause returned); one that looks after sees
 * PAUSED, lowers its word and sleeps. This is Dekker's pattern (each side
 * stores, then loads what the other stored): the runner's side has only a
 * compiler barrier, tw_pause's the heavy fence (threads.c, asymmetric
 * fences), so runners pay no fence per callback. TSan sees the gate's
 * words as atomics; tests/test_pause.c fails without the gate (a backlog
 * of due timers starts while paused).
 */
#include "internal.h"

#include <limits.h>
#include <urcu/futex.h>

TW_TLS tw_gate_tls tw__gate;

/* Sleep until tw_resume or quit: the futex word and quit flag of the
 * calling runner (workers: the pool's; the cursor: its own). Returns false
 * when quitting. */
static bool gate_wait(tw_service *s)
{
    /* Seq_cst: read the word, then the state (tw_resume changes the state,
     * then bumps the word: no lost wake-up). */
    int32_t seq = atomic_load_explicit(tw__gate.word, memory_order_seq_cst);
    /* Acquire: pairs with the quit flag's release store. */
    if (atomic_load_explicit(tw__gate.quit, memory_order_acquire))
        return false;
    if (!tw__clock_paused(s))
        return true;
    /* The cursor (workers = 0) waits here half way through a list of
     * callbacks: what producers leave meanwhile is compacted here, as the
     * paused cursor's loop does (a producer under back-pressure wakes us:
     * its bump ends the wait). Before (2026-11-30) a pause that came while
     * the cursor ran a list left every arm-and-cancel's entry until
     * tw_resume (a review's program: 20M calls, 166 MB). */
    if (tw__gate.word == &s->wake_seq)
        tw__wheel_compact_at_gate(s);
    futex_async((int32_t *)tw__gate.word, FUTEX_WAIT, seq, NULL, NULL, 0);
    return true;
}

bool tw__gate_blocked(tw_service *s)
{
    _Atomic uint32_t *g = tw__gate.starting;
    for (;;) {
        /* Release: tw_pause's acquire load sees us out. */
        atomic_store_explicit(g, 0, memory_order_release);
        if (!gate_wait(s))
            return false;
        /* Relaxed: ordered before the load below by the fence (see top). */
        atomic_store_explicit(g, 1, memory_order_relaxed);
        tw__fence_light();
        /* Relaxed: as in tw__gate_enter. */
        if (!(atomic_load_explicit(&s->clock_state, memory_order_relaxed) & TW_CLOCK_FROZEN))
            return true;
    }
}

void tw__gate_bind(_Atomic uint32_t *starting, _Atomic int32_t *word, _Atomic bool *quit)
{
    tw__gate.starting = starting;
    tw__gate.word = word;
    tw__gate.quit = quit;
}

/* Wait until runner word g is down (a runner between its look and its
 * callback's start: a few instructions, unless it was preempted). */
static void wait_gate_down(_Atomic uint32_t *g)
{
    /* Acquire: pairs with the runner's release store of 0. */
    for (unsigned step = 0; atomic_load_explicit(g, memory_order_acquire); step++)
        tw__wait_step(step);
}

int tw_pause(tw_service *s)
{
    if (!s || s->cfg.clock != TW_CLOCK_MONOTONIC)
        return TW_EINVAL;
    tw__clock_pause(s);
    tw__fence_heavy();
    wait_gate_down(&s->cursor_starting);
    for (uint32_t i = 0; i < s->pool.nworkers; i++)
        wait_gate_down(&s->pool.worker[i].starting);
    return TW_OK;
}

static void wake_word(_Atomic int32_t *word)
{
    /* Seq_cst: after the state change (see gate_wait). */
    atomic_fetch_add_explicit(word, 1, memory_order_seq_cst);
    futex_async((int32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int tw_resume(tw_service *s)
{
    if (!s || s->cfg.clock != TW_CLOCK_MONOTONIC)
        return TW_EINVAL;
    if (tw__clock_resume(s)) {
        wake_word(&s->wake_seq);       /* the cursor, and itself as a runner */
        wake_word(&s->pool.quit_seq);  /* workers at the gate or waiting for a deadline */
    }
    return TW_OK;
}
