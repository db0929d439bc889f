/*
 * workers.c: running due timers. The cursor's step claims due timers
 * (PENDING -> FIRING) into a local list; this file runs them: inline on
 * the drainer's thread (MANUAL clock, or workers = 0), or on a pool of
 * worker threads, so that a slow callback delays only its worker.
 *
 * Hand-off: the list itself goes to the pool (a run, below: no copy), cut
 * into batches (a quarter of the list per worker, at least TW_BATCH_MIN
 * and at most TW_BATCH handles) that point into it and are enqueued on a
 * liburcu wait-free concurrent queue (wfcqueue): the cursor's enqueue
 * never blocks; workers dequeue one batch at a time (the queue's dequeue
 * lock is held for the dequeue only, never across a callback). A batch
 * holds handles, not record pointers: a timer cancelled while queued fails
 * the FIRING -> RUNNING CAS and is skipped, whatever became of its record.
 *
 * Batch size is the trade between hand-off cost and isolation: with a
 * quarter of the due list per worker in each batch, a slow callback holds up
 * only its few batch-mates while the other workers take the rest; a burst
 * of a million still moves in 256s. The floor of TW_BATCH_MIN keeps a
 * tick of a few dozen timers in one batch, so it costs one worker wake-up,
 * not one per worker: on a VM each wake-up of an idle CPU is tens of us,
 * and it was the largest part of the lateness at a 100 us tick (WL3 p99
 * 2.2 -> 0.7 ms). A worker prefetches the records of the timers a few
 * places ahead in its batch: the cursor's claim left them in another
 * core's cache. (Handing the rest of a batch back
 * before each callback isolated slow callbacks fully, but two workers then
 * passed batches back and forth with a wake-up per callback, which made
 * lateness worse for everyone.)
 *
 * Sleeping: workers and cancel_sync waiters sleep on futex words
 * (urcu/futex.h). Each wait follows the same pattern: read the word's
 * sequence number, check for work, announce yourself as a sleeper
 * (seq_cst), wait on the number read. A waker bumps the word (seq_cst)
 * before it looks for sleepers, so either it sees the sleeper and wakes it,
 * or the sleeper's futex_wait finds the word changed: no lost wake-up.
 *
 * Runs of one periodic timer never overlap: the next run is armed (placed
 * in the wheel) only after the callback returned. A run that overran whole
 * periods skips the missed ones: the next deadline is the first
 * deadline + k * period after the run ended (fixed rate, no drift).
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <urcu/futex.h>

TW_TLS tw_running_tls tw__self;
TW_TLS tw_worker *tw__worker_mine;

/* A run's path inlined into the batch loop: called, run_timer_at's frame
 * (six saved registers) and run_handle's were a tenth of a burst's runs
 * (WL5 on two workers: 60M -> 66M callbacks/s). */
#define TW_RUN_INLINE static inline __attribute__((always_inline))

static void futex_wake_all(_Atomic int32_t *word)
{
    futex_async((int32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait_ns(_Atomic int32_t *word, int32_t seen, uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    futex_async((int32_t *)word, FUTEX_WAIT, seen, ns ? &ts : NULL, NULL, 0);
}

/* ---- waiting for a run to end (cancel_sync, stop) ------------------------- */

/*
 * A waiter shows the record it waits for in one of TW_SYNC_SHOWN entries
 * (its index + 1), or, with all taken, counts itself in sync_unshown. A
 * run's end wakes the waiters only if one waits for its record, or one is
 * unshown. Before (2026-11-30) every run's end woke every waiter while
 * any waited: one tw_cancel_sync on a callback that ran a second made
 * each other run a FUTEX_WAKE and each waiter's wake-up, and a burst of a
 * million ran 8 times slower (a review's program: 2.3M callbacks/s
 * against 12-20M, 0.4 s late).
 */

/* Whether a waiter waits for record idx's run (or for any run). Relaxed:
 * ordered after the end's store by wake_sync_waiters' fence pairing (the
 * waiter shows itself before its heavy fence). */
static bool sync_waited_for(tw_service *s, uint32_t idx)
{
    if (atomic_load_explicit(&s->sync_unshown, memory_order_relaxed) != 0)
        return true;
    for (int i = 0; i < TW_SYNC_SHOWN; i++) {
        if (atomic_load_explicit(&s->sync_waited[i], memory_order_relaxed) == idx + 1)
            return true;
    }
    return false;
}

/* After the end of record idx's run was stored: wake the waiters, if one
 * waits for it. The end's store and these loads against a waiter's
 * showing and its load of the state are the store-buffering pattern; the
 * runner's fence is the light one (threads.c, asymmetric fences), the
 * waiter's the heavy one. */
TW_RUN_INLINE void wake_sync_waiters(tw_service *s, uint32_t idx)
{
    tw__fence_light();
    /* Relaxed: ordered after the end's store by the fence pairing above. */
    if (atomic_load_explicit(&s->sync_waiters, memory_order_relaxed) == 0 ||
        !sync_waited_for(s, idx))
        return;
    atomic_fetch_add_explicit(&s->run_seq, 1, memory_order_seq_cst);
    futex_wake_all(&s->run_seq);
}

/* Show idx as waited for: the entry taken, or -1 (counted as unshown). */
static int sync_show(tw_service *s, uint32_t idx)
{
    for (int i = 0; i < TW_SYNC_SHOWN; i++) {
        uint32_t free_entry = 0;
        /* Relaxed: the heavy fence after it orders it before our look at
         * the state (wake_sync_waiters' pairing); the CAS only claims. */
        if (atomic_compare_exchange_strong_explicit(&s->sync_waited[i], &free_entry, idx + 1,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed))
            return i;
    }
    /* Relaxed: as above. */
    atomic_fetch_add_explicit(&s->sync_unshown, 1, memory_order_relaxed);
    return -1;
}

static void sync_unshow(tw_service *s, int entry)
{
    /* Relaxed: a runner that still sees it wakes us for nothing. */
    if (entry >= 0)
        atomic_store_explicit(&s->sync_waited[entry], 0, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&s->sync_unshown, 1, memory_order_relaxed);
}

static bool still_running(uint64_t st, uint32_t gen)
{
    return tw__gen(st) == gen && tw__st(st) == TW_ST_RUNNING && !(st & TW_F_DONE);
}

void tw__wait_not_running(tw_service *s, tw_record *rec, uint32_t idx, uint32_t gen)
{
    /* Acquire: a run that ended is over for us (its writes visible). */
    if (!still_running(atomic_load_explicit(&rec->state, memory_order_acquire), gen))
        return;
    int shown = sync_show(s, idx);
    /* Seq_cst: announce ourselves, then the heavy fence (see
     * wake_sync_waiters) before we look at the state again. */
    atomic_fetch_add_explicit(&s->sync_waiters, 1, memory_order_seq_cst);
    tw__fence_heavy();
    for (unsigned spins = 0;; spins++) {
        /* Seq_cst: read the sequence before the state, so a run that ends
         * after our look changes the word we wait on. */
        int32_t seq = atomic_load_explicit(&s->run_seq, memory_order_seq_cst);
        uint64_t st = atomic_load_explicit(&rec->state, memory_order_seq_cst);
        if (!still_running(st, gen))
            break;
        if (spins < 64) {
            caa_cpu_relax();
            continue;
        }
        futex_wait_ns(&s->run_seq, seq, 10 * 1000 * 1000);
    }
    atomic_fetch_sub_explicit(&s->sync_waiters, 1, memory_order_seq_cst);
    sync_unshow(s, shown);
}

/* ---- running one timer ----------------------------------------------------- */

/* The deadline of a periodic timer's next run, when the run due at
 * `deadline` ends: the next on its grid (deadline + k * period, k >= 1,
 * fixed rate) that is not missed. A run is missed when, as this one ends,
 * MANUAL: its due tick was processed already (tw_advance ran that tick
 * while this run was pending or running), MONOTONIC: its deadline has
 * passed. The MANUAL rule does not look at the clock given to tw_advance:
 * a clock past a deadline whose tick is still to come misses nothing
 * (issue 12: a quarter-tick step, then a tick's, ran the timer every other
 * tick). */
uint64_t tw__next_period_deadline(const tw_service *s, uint64_t deadline, uint64_t period)
{
    uint64_t passed; /* runs at or before this are missed */
    if (s->cfg.clock == TW_CLOCK_MANUAL) {
        /* Relaxed: the runner is the advancing thread, which wrote cur. */
        uint64_t cur = atomic_load_explicit(&((tw_service *)s)->wheel.cur,
                                            memory_order_relaxed);
        passed = cur > UINT64_MAX / s->cfg.tick_ns ? UINT64_MAX : cur * s->cfg.tick_ns;
    } else {
        passed = tw__clock_read(s) - s->origin;
    }
    uint64_t next = deadline + period;
    if (next > passed)
        return next;
    /* Missed whole periods: skip them, keep the phase. */
    return deadline + ((passed - deadline) / period + 1) * period;
}

void (*_Atomic tw__rearm_window_hook)(void); /* tests only (internal.h) */

/* The re-arm's lease is held: a reschedule now hands its deadline over.
 * On two loaded cores a stress test's push met this window in none of
 * 10,000 rounds (18 s); its hook holds the window open in some rounds. */
static void rearm_window_hook(void)
{
    /* Relaxed: set before the service runs; a pointer to code, no data. */
    void (*hook)(void) = atomic_load_explicit(&tw__rearm_window_hook, memory_order_relaxed);
    if (__builtin_expect(hook != NULL, 0))
        hook();
}

static void finish_periodic(tw_service *s, tw_record *rec, uint32_t idx,
                            uint64_t deadline)
{
    /* Acquire: a lease holder's MOVED deadline, a cancel's request. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    for (;;) {
        uint64_t want;
        if (st & TW_F_LEASE) {
            want = st | TW_F_DONE; /* the reschedule in flight re-arms it */
        } else if (st & TW_F_CANCELREQ) {
            want = tw__rec_free_state(st);
        } else {
            /* The re-arm's lease, marked DONE: a reschedule that meets
             * it hands its deadline over instead of being overtaken. */
            want = tw__with_st(st & ~(uint64_t)TW_F_MOVED, TW_ST_PENDING) | TW_F_LEASE |
                   TW_F_DONE;
        }
        /* Seq_cst: the end of the run, which cancel_sync waiters and the
         * stop sweep observe; acquire on failure re-reads the requests. */
        if (!atomic_compare_exchange_weak_explicit(&rec->state, &st, want,
                                                   memory_order_seq_cst,
                                                   memory_order_acquire))
            continue;
        if (st & TW_F_LEASE)
            return;
        if (st & TW_F_CANCELREQ) {
            TW_COUNT(s, cancelled, 1); /* cancelled during its run (service.c) */
            tw__rec_push_free(&s->rec, idx);
            return;
        }
        /* We hold the lease now: we alone write the deadline. Relaxed: the
         * lease release below publishes it. */
        uint64_t next = (st & TW_F_MOVED)
            ? atomic_load_explicit(&rec->deadline, memory_order_relaxed)
            : tw__next_period_deadline(s, deadline, tw__period_of(&s->rec, idx));
        atomic_store_explicit(&rec->deadline, next, memory_order_relaxed);
        rearm_window_hook();
        tw__lease_publish(s, rec, idx, true, tw__tick_of(s, next));
        return;
    }
}

/* Claim timer h for its run (FIRING -> RUNNING), but not before its
 * deadline: the cursor claims ticks ahead (cursor.c). Returns 0 when the
 * run is ours (*st the RUNNING state, *deadline its deadline), 1 when the
 * timer is gone (cancelled, taken back by a reschedule, dropped), 2 when
 * its deadline (in *deadline) is after `now`. */
enum { CLAIM_OK, CLAIM_GONE, CLAIM_EARLY };

TW_RUN_INLINE int claim_run(tw_record *rec, tw_timer h, uint64_t now, uint64_t *st,
                     uint64_t *deadline)
{
    /* Acquire: pairs with the step's claim (and the arming before it). */
    *st = atomic_load_explicit(&rec->state, memory_order_acquire);
    for (;;) {
        if (tw__gen(*st) != tw__handle_gen(h) || tw__st(*st) != TW_ST_FIRING)
            return CLAIM_GONE;
        /* Relaxed: ordered after the acquire of *st. A FIRING record's
         * deadline changes only after a reschedule took it back (a state
         * change), so if the CAS below succeeds, this is the deadline of
         * the run we claim. */
        *deadline = atomic_load_explicit(&rec->deadline, memory_order_relaxed);
        TW_INJECT(TW_INJ_STATE_CAS);
        if (*deadline > now) {
            /* Early, unless the deadline we read is a reschedule's, written
             * after it took the timer back: read the state again (the
             * seqlock pattern; move_pending's release fence is the writer's
             * half), and if it moved, look at it afresh. */
            atomic_thread_fence(memory_order_acquire);
            uint64_t again = atomic_load_explicit(&rec->state, memory_order_relaxed);
            if (again != *st) {
                *st = again;
                continue;
            }
            return CLAIM_EARLY;
        }
        TW_INJECT(TW_INJ_STATE_CAS);
        uint64_t run = tw__with_st(*st, TW_ST_RUNNING);
        /* Seq_cst: the start of the run, which the stop sweep and cancel
         * must order against their own CAS on the same word. */
        if (atomic_compare_exchange_weak_explicit(&rec->state, st, run,
                                                  memory_order_seq_cst,
                                                  memory_order_acquire)) {
            *st = run;
            return CLAIM_OK;
        }
    }
}

/* The inline runner's place in the due list (MANUAL clock, workers = 0):
 * after each claim it raises the claim floor (wheel.c, tw_next_due) to the
 * due tick of the next timer in the list still claimed, so a callback that
 * asks for the next due time hears of the rest of the list exactly, not
 * of the list's first tick. The list is the drainer's own, and so is this
 * (thread-local: a callback may advance another service inside). */
typedef struct inline_list {
    tw_service *s;
    const uint64_t *pairs; /* (key, handle) */
    size_t n, at, next;    /* running pairs[at]; pairs[next] the next claimed */
} inline_list;
static TW_TLS inline_list *inline_now;

static void raise_claim_floor(tw_service *s, inline_list *l)
{
    size_t j = l->next > l->at + 1 ? l->next : l->at + 1;
    for (; j < l->n; j++) {
        tw_timer h = l->pairs[2 * j + 1];
        tw_record *rec = tw__rec(&s->rec, tw__handle_idx(h));
        /* Relaxed: a hint; a timer that leaves FIRING later only leaves
         * the floor lower than it could be. */
        uint64_t st = rec ? atomic_load_explicit(&rec->state, memory_order_relaxed) : 0;
        if (tw__gen(st) == tw__handle_gen(h) && tw__st(st) == TW_ST_FIRING)
            break;
    }
    l->next = j;
    tw__claim_floor_set(s, j < l->n ? tw__due_tick_of_key(s, l->pairs[2 * j]) : UINT64_MAX);
}

/* What a runner carries from one run to the next: the service time the
 * next start is measured from (callers refresh it: see run_handle), and
 * the lateness of the runs not yet counted, as (bucket, how many, worst):
 * consecutive runs of a batch mostly fall in one bucket, so the stripe's
 * counters are written when the bucket changes or the runner stops, not
 * on every run (a TLS lookup and two stores of the stripe's lines). */
/* One-shots' records given back together (tw__rec_push_free_many): the
 * handshake of the magazine they go to is paid once per FREED_BATCH runs,
 * not per run (a burst's runs are ~22 ns; per run it cost WL5 5%). */
#define FREED_BATCH 16

typedef struct run_ctx {
    tw_service *s;
    tw_worker *w; /* the worker running a batch, or NULL (watched: "Joining") */
    uint64_t now;
    uint32_t bucket, n;
    uint64_t worst;
    uint64_t lo, width;          /* the bucket's lateness: [lo, lo + width) */
    tw_stripe *stripe;           /* this thread's counters (tw__stripe) */
    bool owned;                  /* ... and whether it owns them (tw__count_add) */
    /* max_timers (service.c, budgets): the worker's account its one-shots
     * give to, or NULL (through the stripe); its given count, which only
     * this batch writes meanwhile; and the count at which it may hold two
     * blocks (hand_at). */
    tw_budget_acct *acct;
    uint64_t given, hand_at;
    uint32_t nfreed;
    uint32_t freed[FREED_BATCH]; /* FREE records not yet given back */
} run_ctx;

static void lateness_flush(run_ctx *c)
{
    if (c->n)
        tw__note_lateness_runs(c->s, c->bucket, c->n, c->worst);
    c->n = 0;
    c->worst = 0;
}

/* A run whose lateness lies outside the current bucket: the runs so far
 * are counted, and the bucket becomes that run's. */
__attribute__((noinline, cold)) static void lateness_move(run_ctx *c, uint64_t late)
{
    lateness_flush(c);
    uint32_t b = tw__lateness_bucket(late);
    c->bucket = b;
    c->lo = tw__lateness_bucket_lo(b);
    c->width = b == TW_LATENESS_BUCKETS - 1 ? UINT64_MAX - c->lo
                                            : tw__lateness_bucket_lo(b + 1) - c->lo;
    c->n = 1;
    c->worst = late;
}

/* Per run, a range check rather than the bucket's computation (a bsr,
 * its clamp, a compare and a store of the bucket). Unsigned: a lateness
 * below lo wraps past width. Why it matters: a burst's run is ~40 cycles
 * (two locked instructions among them: the claim's and WL5's callback's),
 * and every instruction shows. This, the stripe looked up once per run_ctx
 * and lo written at clock reads took WL5's burst on one worker from
 * 71.5-72.6M to 74.6-79.4M runs/s in its fast runs and from 40-52M to
 * 47-57M in its slow ones (14 alternating runs each, AMD guest); without
 * any lateness bookkeeping it ran 86M. */
static inline void lateness_add(run_ctx *c, uint64_t late)
{
    if (__builtin_expect(late - c->lo >= c->width, 0)) {
        lateness_move(c, late);
        return;
    }
    c->n++;
    if (late > c->worst)
        c->worst = late;
}

static void run_ctx_init(run_ctx *c, tw_service *s)
{
    c->s = s;
    c->w = NULL;
    c->now = c->worst = 0;
    c->bucket = c->n = c->nfreed = 0;
    c->lo = c->width = 0; /* the first run moves to its bucket */
    c->stripe = tw__stripe(s);
    c->owned = tw__stripe_owned;
    c->acct = NULL;
}

/* Where a ctx's next hand-back comes: when its account would hold two
 * blocks (sweepers only lower that, by taking: then the give looks early
 * and finds less). */
static void ctx_hand_at(run_ctx *c)
{
    /* Relaxed: a guess; the hand-back's CAS decides. */
    uint64_t taken = atomic_load_explicit(&c->acct->taken, memory_order_relaxed);
    c->hand_at = taken + 2 * (uint64_t)c->s->budget_block;
}

/* A worker's batch gives its one-shots' units to the worker's account. */
static void ctx_use_worker_account(run_ctx *c, tw_worker *w)
{
    c->acct = &w->budget;
    /* Relaxed: our own word (only this worker's batches write it). */
    c->given = atomic_load_explicit(&c->acct->given, memory_order_relaxed);
    ctx_hand_at(c);
}

__attribute__((noinline, cold)) static void ctx_hand_block(run_ctx *c)
{
    tw__budget_hand_if_two(c->s, c->acct, c->given, c->s->budget_block);
    ctx_hand_at(c);
}

/* A one-shot's unit back (max_timers set): a plain store to the worker's
 * account, whose count the ctx keeps, or the stripe's give. */
static inline void ctx_give(run_ctx *c)
{
    if (!c->acct) {
        tw__budget_give_to(c->s, &c->stripe->budget, c->owned, c->s->budget_block);
        return;
    }
    /* Release: as tw__budget_give_to's. Our own word: no update to lose. */
    atomic_store_explicit(&c->acct->given, ++c->given, memory_order_release);
    if (__builtin_expect(c->given >= c->hand_at, 0))
        ctx_hand_block(c);
}

/* One more of a counter of this thread's stripe, its ownership as read
 * once per run_ctx. */
static inline void ctx_count(const run_ctx *c, _Atomic uint64_t *field)
{
    tw__count_add_owned(field, 1, c->owned);
}

static void freed_flush(run_ctx *c)
{
    if (c->nfreed)
        tw__rec_push_free_many(&c->s->rec, c->freed, c->nfreed);
    c->nfreed = 0;
}

/* The end of a run of handles: its lateness noted, its records given back. */
static void run_ctx_done(run_ctx *c)
{
    lateness_flush(c);
    freed_flush(c);
}

static void finish_oneshot(tw_record *rec, uint32_t idx, uint64_t st, run_ctx *ctx)
{
    /* Nothing else changes a running one-shot's state (cancel and
     * reschedule answer ENOENT, stop waits), so a plain store suffices.
     * Release: a waiter (cancel_sync, the stop sweep) that sees it sees the
     * callback's writes; wake_sync_waiters orders it before its look for
     * waiters (a seq_cst store here was a locked instruction per run). */
    atomic_store_explicit(&rec->state, tw__rec_free_state(st), memory_order_release);
    ctx->freed[ctx->nfreed++] = idx; /* FREE already; ours until given back */
    if (ctx->nfreed == FREED_BATCH)
        freed_flush(ctx);
}

void (*_Atomic tw__run_claimed_hook)(void); /* tests only (internal.h) */


static void run_claimed_hook(void)
{
    /* Acquire: a test may set it while the workers run (test_pause.c);
     * what the test wrote before (its release store) is then seen. */
    void (*hook)(void) = atomic_load_explicit(&tw__run_claimed_hook, memory_order_acquire);
    if (__builtin_expect(hook != NULL, 0))
        hook();
}

/* Run timer h (its record rec) if it is still FIRING and due by ctx->now
 * (service time, read at or before the run's start; also its lateness
 * reading). Returns 0 when done with h (run, or gone), else h's deadline,
 * which is after now. `batch` (a constant where inlined): run_batch's
 * runs, whose batch sets tw__self.s once and restores it after (a save and
 * restore of both words per run was six thread-local accesses in a run of
 * ~40 cycles). */
TW_RUN_INLINE uint64_t run_timer_at(tw_service *s, tw_timer h, tw_record *rec, run_ctx *ctx,
                                    bool batch)
{
    uint64_t now = ctx->now;
    uint32_t idx = tw__handle_idx(h);
    uint64_t st, deadline;
    if (!rec)
        return 0;
    if (!tw__gate_enter(s))
        return 0; /* stopping while paused: the stop sweep drops it */
    int claim = claim_run(rec, h, now, &st, &deadline);
    if (claim != CLAIM_OK) {
        tw__gate_leave();
        return claim == CLAIM_EARLY ? deadline : 0;
    }
    bool periodic = (st & TW_F_PERIODIC) != 0;
    /* A periodic run is counted as one before it is counted as fired: a
     * reader of stats.pending (fired, then periodic_runs: tw__pending)
     * never takes it for a one-shot's end. Counted before the gate opens:
     * once tw_pause returns, stats.fired holds every run that will start
     * before tw_resume (tests/test_pause.c). */
    if (periodic)
        ctx_count(ctx, &ctx->stripe->periodic_runs);
    ctx_count(ctx, &ctx->stripe->fired);
    run_claimed_hook();
    if (inline_now && inline_now->s == s)
        raise_claim_floor(s, inline_now);
    /* Relaxed: ordered after the claim, which acquired the arming. */
    tw_callback cb = atomic_load_explicit(&rec->cb, memory_order_relaxed);
    void *arg = atomic_load_explicit(&rec->arg, memory_order_relaxed);
    /* A one-shot is no longer pending once it starts. The cap's test
     * inline: a call per run for nothing, without max_timers. */
    if (!periodic && s->cfg.max_timers != 0)
        ctx_give(ctx);
    lateness_add(ctx, now - deadline);

    tw_service *outer_s = NULL; /* a callback we run nested in (tw_advance) */
    tw_timer outer_t = 0;
    if (!batch) {
        outer_s = tw__self.s;
        outer_t = tw__self.t;
        tw__self.s = s;
    }
    tw__self.t = h;
    /* The gate opens at the callback's call, not at the claim: a runner
     * preempted between the two (the budget, the lateness figures) started
     * its callback after tw_pause had returned (a review, 2026-11-28). */
    tw__gate_leave();
    cb(h, arg);
    if (!batch) {
        tw__self.s = outer_s;
        tw__self.t = outer_t;
    }

    if (periodic) {
        /* Counted before the re-arm is placed: a tw_next_due that finds
         * the new entry then counts the timer as pending with a due time,
         * not as running. Counted after, one that found the entry only as
         * a far slot's bound (beyond wheel_slots ticks) took the timer for
         * a running one and answered "nothing pending", and the re-arm's
         * wake-up check had read the loop's previous answer: the loop
         * slept for good (a review's program, 2026-11-28). */
        TW_COUNT(s, periodic_ended, 1);
        finish_periodic(s, rec, idx, deadline);
    } else {
        finish_oneshot(rec, idx, st, ctx);
    }
    wake_sync_waiters(s, idx);
    return 0;
}

/* ---- the pool -------------------------------------------------------------- */

/* Wake one sleeping worker, if any: for a new batch, or to help with one. */
static void wake_one_worker(tw_pool *p)
{
    /* Seq_cst: bump the word before looking for sleepers (see top). */
    atomic_fetch_add_explicit(&p->work_seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst))
        futex_async((int32_t *)&p->work_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static void pool_enqueue(tw_service *s, tw_batch *b)
{
    tw_pool *p = &s->pool;
    cds_wfcq_node_init(&b->node);
    cds_wfcq_enqueue(&p->head, &p->tail, &b->node);
    /* Relaxed: a hint (holding_back); the queue itself hands the batch. */
    atomic_fetch_add_explicit(&p->queued, 1, memory_order_relaxed);
    wake_one_worker(p);
}

/* Relaxed: the drainer is the only writer; tests read a statistic. */
static void made_note(tw_pool *p)
{
    atomic_store_explicit(&p->made, (uint64_t)p->nslabs * TW_SLAB_BATCHES,
                          memory_order_relaxed);
}

/* ---- batch memory (the drainer's) ------------------------------------------- */

/* Batches live in slabs of TW_SLAB_BATCHES, mapped and unmapped whole.
 * They were malloc'd one by one: after a burst the drainer freed them,
 * and glibc kept the memory (2.9 MB after a million timers, 9 MB after
 * three million: the kept batches pinned the arena's pages). Workers never
 * free a batch either way: a free() of the drainer's malloc() from a worker
 * took the drainer's malloc arena lock, and in a burst the two met there
 * often enough that perf found a worker asleep on that lock for 15% of
 * WL5; they give batches back to the spare queue, and the drainer alone
 * takes them from there and puts them back in their slabs. */
static void slab_link(tw_pool *p, tw_batch_slab *sl)
{
    sl->prev = NULL;
    sl->next = p->slabs;
    if (p->slabs)
        p->slabs->prev = sl;
    p->slabs = sl;
    p->nslabs++;
}

static void slab_unlink(tw_pool *p, tw_batch_slab *sl)
{
    if (sl->prev)
        sl->prev->next = sl->next;
    else
        p->slabs = sl->next;
    if (sl->next)
        sl->next->prev = sl->prev;
    p->nslabs--;
}

static tw_batch_slab *slab_map(tw_pool *p)
{
    void *m = mmap(NULL, sizeof(tw_batch_slab), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    tw_batch_slab *sl = m;
    sl->free = NULL;
    sl->nfree = TW_SLAB_BATCHES;
    for (uint32_t i = TW_SLAB_BATCHES; i-- > 0;) {
        tw_batch *b = &sl->b[i];
        atomic_init(&b->lo, 0);
        atomic_init(&b->take, 0);
        atomic_init(&b->h, NULL);
        b->run = NULL;
        b->slab = sl;
        b->node.next = sl->free;
        sl->free = &b->node;
    }
    slab_link(p, sl);
    made_note(p);
    return sl;
}

/* A slab with a batch not handed out, or a new one. A scan: a burst maps a
 * slab per TW_SLAB_BATCHES batches, and the slabs are few (a million
 * timers: 123). */
static tw_batch *slab_take(tw_pool *p)
{
    tw_batch_slab *sl = p->slabs;
    while (sl && !sl->nfree)
        sl = sl->next;
    if (!sl && !(sl = slab_map(p)))
        return NULL;
    struct cds_wfcq_node *node = sl->free;
    sl->free = node->next;
    sl->nfree--;
    return caa_container_of(node, tw_batch, node);
}

static void slab_put(tw_batch *b)
{
    tw_batch_slab *sl = b->slab;
    b->node.next = sl->free;
    sl->free = &b->node;
    sl->nfree++;
}

/* A batch for the drainer to fill: one the workers gave back, else one
 * from a slab. */
static tw_batch *batch_get(tw_pool *p)
{
    p->step_handed++;
    /* The double-underscore dequeue leaves mutual exclusion among dequeuers
     * to us: only the drainer (one thread at a time) takes spare batches. */
    struct cds_wfcq_node *node = __cds_wfcq_dequeue_blocking(&p->spare_head, &p->spare_tail);
    if (node)
        return caa_container_of(node, tw_batch, node);
    return slab_take(p);
}

/* Unmap the slabs trimmed so far, unless a worker is stealing: a stealer
 * may have read a batch's pointer from a worker's `cur` just before its
 * owner gave it back, and reads the batch after (batch_steal). Batches
 * were freed at once until this was seen: a stealer preempted between the
 * two for a trim period read freed memory. The owner clears `cur`
 * (seq_cst) before it gives the batch back, and a stealer raises
 * `stealing` (seq_cst) before it reads `cur`: if we read every worker's
 * `stealing` as 0 after taking the batch, a stealer that read the batch's
 * pointer has lowered it again, and a later one reads `cur` after the
 * clear. Else they wait for the next trim (a steal lasts microseconds). */
static bool no_stealer(const tw_pool *p)
{
    for (uint32_t i = 0; i < p->nworkers; i++) {
        /* Seq_cst: see above. */
        if (atomic_load_explicit(&p->worker[i].stealing, memory_order_seq_cst))
            return false;
    }
    return true;
}

static void unmap_retired(tw_pool *p)
{
    if (!p->retired || !no_stealer(p))
        return;
    for (tw_batch_slab *sl = p->retired, *next; sl; sl = next) {
        next = sl->next;
        munmap(sl, sizeof *sl);
    }
    p->retired = NULL;
}

/* ---- runs --------------------------------------------------------------------- */

/*
 * A delivery hands the due list's pairs to the pool as they are: the
 * list's memory becomes a run, its batches point into it, and the list
 * takes a spare run's memory in exchange. Until 2026-11-27 each batch held
 * a copy of its handles: handing over a million-timer burst cost the
 * cursor 20-24 ms of a core on the 2-core AMD guest (8 MB copied into
 * batch memory that the burst faulted in), while both workers wanted both
 * cores, and a timer due in another tick waited for the cursor meanwhile.
 *
 * A run's memory is used again only once every batch pointing into it is
 * done (refs: one per batch, and the drainer's own while it hands out; an
 * owner releases at its batch's end and the last one queues the run as
 * spent) and no worker is stealing: a stealer may have read a batch from
 * its owner's cur before the batch ended, and it reads its pair after its
 * CAS (batch_steal). The argument is unmap_retired's: the owner clears cur
 * (seq_cst) before it releases, a stealer raises `stealing` (seq_cst)
 * before it reads cur, so once the drainer reads every `stealing` as 0
 * after a run was spent, no stealer holds a pointer into it; while one
 * steals, the run waits for a later look.
 */
static void run_release(tw_pool *p, tw_run *r)
{
    /* Acq_rel: every access to the run's pairs comes before the last
     * release, which the drainer's next use of the memory follows (the
     * spent queue hands it over). */
    if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1) {
        cds_wfcq_node_init(&r->node);
        cds_wfcq_enqueue(&p->spent_head, &p->spent_tail, &r->node);
    }
}

bool tw__runs_plant_no_wait; /* stress/steal_runs.c only (internal.h) */

/* Spent runs go to the waiting list. */
static void runs_take_spent(tw_pool *p)
{
    /* As in batch_get: the drainer alone dequeues spent runs. */
    for (struct cds_wfcq_node *node;
         (node = __cds_wfcq_dequeue_blocking(&p->spent_head, &p->spent_tail));) {
        tw_run *r = caa_container_of(node, tw_run, node);
        r->next = p->runs_wait;
        p->runs_wait = r;
    }
}

/* Spent runs wait; the waiting ones become spare once no worker steals. */
static void runs_collect(tw_pool *p)
{
    runs_take_spent(p);
    if (!p->runs_wait || (!tw__runs_plant_no_wait && !no_stealer(p)))
        return;
    tw_run *last = p->runs_wait;
    p->runs_out--;
    while (last->next) {
        last = last->next;
        p->runs_out--;
    }
    last->next = p->runs_spare;
    p->runs_spare = p->runs_wait;
    p->runs_wait = NULL;
}

/* The due list's n pairs become a run, held by the drainer (one ref); the
 * list takes a spare run's memory, if any (else it grows when pushed to).
 * NULL, the list untouched: no memory for a run. */
static tw_run *run_begin(tw_pool *p, tw_vec *due, size_t n)
{
    runs_collect(p);
    tw_run *r = p->runs_spare;
    if (r) {
        p->runs_spare = r->next;
        p->runs_reused++;
    } else if (!(r = calloc(1, sizeof *r))) {
        return NULL;
    }
    tw__vec_note(due);
    uint64_t *v = r->v;
    size_t cap = r->cap;
    r->v = due->v;
    r->cap = due->cap;
    due->v = v;
    due->cap = cap;
    due->n = due->touched = 0;
    if (2 * n > p->run_peak)
        p->run_peak = 2 * n;
    if (++p->runs_out > p->runs_out_peak)
        p->runs_out_peak = p->runs_out;
    /* Relaxed: nobody else sees the run until a batch is queued. */
    atomic_store_explicit(&r->refs, 1, memory_order_relaxed);
    return r;
}

/* How many spare runs a trim keeps: as many as were out at once in this
 * trim period or the last (a steady service hands the same ones round and
 * allocates none), at least TW_RUNS_KEEP; and the largest run memory it
 * keeps: twice the most one run held then, at least TW_VEC_KEEP entries. */
static uint32_t runs_keep(const tw_pool *p)
{
    uint32_t peak = p->runs_out_peak > p->runs_out_peak_prev ? p->runs_out_peak
                                                             : p->runs_out_peak_prev;
    return peak > TW_RUNS_KEEP ? peak : TW_RUNS_KEEP;
}

static size_t runs_keep_cap(const tw_pool *p)
{
    size_t need = p->run_peak > p->run_peak_prev ? p->run_peak : p->run_peak_prev;
    return 2 * need > TW_VEC_KEEP ? 2 * need : TW_VEC_KEEP;
}

/* Trim period's end: spare runs past what runs_keep and runs_keep_cap
 * allow go back to malloc. */
static void runs_trim(tw_pool *p)
{
    runs_collect(p);
    uint32_t keep = runs_keep(p), kept = 0;
    size_t keep_cap = runs_keep_cap(p);
    for (tw_run **at = &p->runs_spare; *at;) {
        tw_run *r = *at;
        if (kept < keep && r->cap <= keep_cap) {
            kept++;
            at = &r->next;
            continue;
        }
        *at = r->next;
        free(r->v);
        free(r);
    }
    p->run_peak_prev = p->run_peak;
    p->run_peak = 0;
    p->runs_out_peak_prev = p->runs_out_peak;
    p->runs_out_peak = p->runs_out;
}

/* More than an idle pool keeps (TW_RUNS_KEEP spare runs of at most
 * TW_VEC_KEEP entries): the idle cursor comes back at the trim periods
 * until the peaks have passed and runs_trim gave the rest back. */
static bool runs_above_keep(tw_pool *p)
{
    runs_collect(p);
    if (p->runs_wait)
        return true;
    uint32_t n = 0;
    for (const tw_run *r = p->runs_spare; r; r = r->next) {
        if (++n > TW_RUNS_KEEP || r->cap > TW_VEC_KEEP)
            return true;
    }
    return false;
}

static void runs_free_list(tw_run *r)
{
    for (tw_run *next; r; r = next) {
        next = r->next;
        free(r->v);
        free(r);
    }
}

/* tw__pool_quit, the workers joined: every run is spent or spare. */
static void runs_fini(tw_pool *p)
{
    runs_take_spent(p);
    runs_free_list(p->runs_wait);
    runs_free_list(p->runs_spare);
    p->runs_wait = p->runs_spare = NULL;
}

/* Trim period's end: put the spare batches back in their slabs, and
 * unmap slabs none of whose batches is out, past what the last two
 * periods' largest step needed (at least TW_BATCH_KEEP): a burst's
 * batches (8 bytes per timer of it) stay while bursts like it come back,
 * not for the service's life. */
void tw__pool_trim(tw_service *s)
{
    tw_pool *p = &s->pool;
    runs_trim(p);
    unmap_retired(p); /* what the last trim took, if no stealer held on */
    size_t need = p->peak > p->peak_prev ? p->peak : p->peak_prev;
    p->peak_prev = p->peak;
    p->peak = 0;
    uint64_t keep = 2 * need > TW_BATCH_KEEP ? 2 * need : TW_BATCH_KEEP;
    if ((uint64_t)p->nslabs * TW_SLAB_BATCHES <= keep)
        return;
    /* As in batch_get: the drainer alone dequeues spare batches. The rest
     * are still being run; a later trim finds them back. */
    for (struct cds_wfcq_node *node;
         (node = __cds_wfcq_dequeue_blocking(&p->spare_head, &p->spare_tail));)
        slab_put(caa_container_of(node, tw_batch, node));
    for (tw_batch_slab *sl = p->slabs, *next; sl; sl = next) {
        next = sl->next;
        if (sl->nfree == TW_SLAB_BATCHES &&
            (uint64_t)(p->nslabs - 1) * TW_SLAB_BATCHES >= keep) {
            slab_unlink(p, sl);
            sl->next = p->retired;
            p->retired = sl;
        }
    }
    made_note(p);
    unmap_retired(p);
}

bool tw__pool_above_keep(tw_service *s)
{
    return (uint64_t)s->pool.nslabs * TW_SLAB_BATCHES > TW_BATCH_KEEP ||
           runs_above_keep(&s->pool);
}

/* The end of a step's deliveries: its batches count towards the peak. */
static void step_delivered(tw_pool *p)
{
    if (p->step_handed > p->peak)
        p->peak = p->step_handed;
    p->step_handed = 0;
}

/* Point b at n due pairs of run r, from `pairs` on. A stealer may still
 * hold b from its last use (workers.c, stealing): the batch first goes
 * empty in a new generation, then gets its pairs, then its count in the
 * generation after. A stealer whose CAS on take succeeds read take, then
 * h, inside one generation (see batch_steal), so it never indexes one
 * fill's pairs with another's count. */
static void batch_fill(tw_batch *b, tw_run *r, const uint64_t *pairs, size_t n)
{
    /* Relaxed (take, lo): ordered before the release store of h below. */
    uint64_t gen = (atomic_load_explicit(&b->take, memory_order_relaxed) >> 32) + 1;
    atomic_store_explicit(&b->take, gen << 32, memory_order_relaxed);
    atomic_store_explicit(&b->lo, 0, memory_order_relaxed);
    b->run = r; /* the owner's: handed over by the queue */
    /* Release: a stealer that reads these pairs' address (acquire) sees
     * the pairs and the empty generation before them. */
    atomic_store_explicit(&b->h, pairs, memory_order_release);
    /* Release: a stealer that reads this generation (acquire) sees h; the
     * queue's own hand-off orders all of it for the owner. */
    atomic_store_explicit(&b->take, (gen + 1) << 32 | n, memory_order_release);
}

static void batch_give_back(tw_pool *p, tw_batch *b)
{
    cds_wfcq_node_init(&b->node);
    cds_wfcq_enqueue(&p->spare_head, &p->spare_tail, &b->node);
}

static tw_batch *pool_take(tw_pool *p)
{
    struct cds_wfcq_node *node = cds_wfcq_dequeue_blocking(&p->head, &p->tail);
    if (!node)
        return NULL;
    /* Relaxed: a hint, as in pool_enqueue (it may dip below 0 for a while:
     * an enqueue counts after its batch is in the queue). */
    atomic_fetch_sub_explicit(&p->queued, 1, memory_order_relaxed);
    return caa_container_of(node, tw_batch, node);
}

/* How far ahead the owner prefetches records. How often a runner reads
 * the clock for the lateness figures: every CLOCK_EVERY runs (stolen and
 * inline runs), and in a batch every `every` runs, adapted so that about
 * CLOCK_GAP_NS of runs lie between two reads (1 to CLOCK_EVERY_MAX). A
 * read costs as much as a short callback (23 ns on the AMD guest's TSC
 * clock): every 8th run it was 13% of a burst of WL5's callbacks, while a
 * slow callback wants a read before each run. */
#define PREFETCH_AHEAD  8
#define CLOCK_EVERY     8
#define CLOCK_EVERY_MAX 64
#define CLOCK_GAP_NS    4000u

static tw_record *prefetch_record(tw_service *s, tw_timer h)
{
    /* The record was last written by the cursor's claim on another core:
     * fetch its line for writing while earlier callbacks run. A handle
     * whose record is gone is harmless here (no access, a hint only). */
    tw_record *rec = tw__rec(&s->rec, tw__handle_idx(h));
    if (rec)
        tw__prefetch_for_write(rec);
    return rec;
}

/* The batch runner's records, looked up once: when prefetched, for the
 * run PREFETCH_AHEAD later (the table's chunks stay mapped while the
 * service lives, records.c). A lookup is ten instructions, a run ~40
 * cycles. */
typedef struct rec_ring {
    tw_record *rec[PREFETCH_AHEAD];
} rec_ring;

static void ring_fetch(tw_service *s, rec_ring *r, uint32_t i, tw_timer h)
{
    r->rec[i % PREFETCH_AHEAD] = prefetch_record(s, h);
}

/* When a timer claimed ahead of its deadline may start: the end of the
 * step of the service's time its deadline lies in, a sixteenth of a tick
 * but at least RELEASE_MIN_NS (and never more than a quarter tick). Never
 * before the deadline; a worker sleeps at most 16 times a tick (and at
 * most once per 50 us), not once per timer: every sleep is a wake-up the
 * scheduler may delay. Quarters were used until 2026-11-24, after an
 * older run had sixteenths make the tail worse on a busy 2-core VM (WL3,
 * 1 ms tick: p99 0.5-0.7 ms with quarters, 0.5-5.8 ms with sixteenths).
 * Measured again then, with the cursor and the hand-off as they are now
 * (6 alternating pairs each, 1 ms tick): eighths gave p99 0.73 and p50
 * 0.63 of quarters; sixteenths p99 0.79 and p50 0.64 of eighths, with
 * p99.9 and max no worse (0.83, 0.78), and p99 below the heap's in the
 * same minutes. The lookahead that makes workers wait starts at a 400 us
 * tick (cursor.c), where a sixteenth is 25 us: the floor keeps wake-ups
 * at most 20,000 a second per worker. The price is those wake-ups when
 * timers are due in most steps: 50,000 timers a second with delays over
 * 1-100 ms (one producer, default service) cost the process 0.30-0.32
 * CPU-seconds a second against 0.16-0.19 with quarters (0.24-0.28 with
 * eighths; 16,700 context switches a second against 7,800). A service
 * with few timers a tick wakes once per timer either way. */
#define RELEASE_STEPS  16
#define RELEASE_MIN_NS 50000u

static uint64_t release_step_for(uint64_t tick_ns)
{
    uint64_t fine = tick_ns / RELEASE_STEPS, quarter = tick_ns / 4;
    uint64_t floor = quarter < RELEASE_MIN_NS ? quarter : RELEASE_MIN_NS;
    return fine > floor ? fine : floor;
}

static uint64_t release_time(const tw_service *s, uint64_t deadline)
{
    uint64_t q = s->pool.release_step;
    return tw__ceil_div(deadline, q) * q;
}

/* Sleep until service time t, or until the service stops (false then).
 * While the service is paused, sleep with no timeout: tw_resume bumps
 * quit_seq (pause.c), and so does tw_stop as it starts (tw__pool_stopping).
 * Why the stop's start and not only the pool's quit: the cursor waits
 * here too when it runs timers itself (run_here, no memory for a batch),
 * and tw_stop joins the cursor before the pool quits; paused, that wait
 * had no end (a review's program, 2026-11-28: tw_stop blocked for good).
 * The timer it waited for stays claimed, and the stop sweep drops it. */
static bool wait_until(tw_service *s, uint64_t t)
{
    tw_pool *p = &s->pool;
    for (;;) {
        /* Seq_cst: read the word before the quit flag, the stop state and
         * the clock state (see top, and pause.c). */
        int32_t seq = atomic_load_explicit(&p->quit_seq, memory_order_seq_cst);
        /* Acquire: pairs with tw__pool_quit's release store. Seq_cst: the
         * stop state, against tw__pool_stopping's bump of the word. */
        if (atomic_load_explicit(&p->quit, memory_order_acquire) ||
            atomic_load_explicit(&s->stop_state, memory_order_seq_cst) != TW_RUN)
            return false;
        if (tw__clock_paused(s)) {
            futex_wait_ns(&p->quit_seq, seq, 0);
            continue;
        }
        uint64_t now = tw__clock_read(s) - s->origin;
        if (now >= t)
            return true;
        futex_wait_ns(&p->quit_seq, seq, t - now);
    }
}

/* Run handle h, waiting for its deadline if it was claimed ahead of it.
 * *now is the service time the lateness is measured from (a clock read
 * costs as much as a short callback, 26 ns on a VM's kvm-clock, so callers
 * refresh it every CLOCK_EVERY runs: each run's lateness is measured at
 * most that many batch-mates before its start, an under-estimate by at
 * most their run time). */
TW_RUN_INLINE void run_handle_at(tw_service *s, tw_timer h, tw_record *rec, run_ctx *ctx,
                                 bool batch)
{
    for (uint64_t early; (early = run_timer_at(s, h, rec, ctx, batch)) != 0;) {
        /* Relaxed (waiting, stamp): hints for watchers ("Joining"): a
         * runner asleep until a deadline is not stuck in a callback. */
        if (ctx->w) {
            ctx->w->waited = true;
            atomic_store_explicit(&ctx->w->waiting, 1, memory_order_relaxed);
        }
        bool go = wait_until(s, release_time(s, early));
        ctx->now = tw__clock_read(s) - s->origin;
        if (ctx->w) {
            atomic_store_explicit(&ctx->w->stamp, ctx->now, memory_order_relaxed);
            atomic_store_explicit(&ctx->w->waiting, 0, memory_order_relaxed);
        }
        if (!go)
            return; /* stopping: the stop sweep has dropped it */
    }
}

TW_RUN_INLINE void run_handle(tw_service *s, tw_timer h, run_ctx *ctx)
{
    run_handle_at(s, h, tw__rec(&s->rec, tw__handle_idx(h)), ctx, false);
}

static void run_handles(tw_service *s, const tw_timer *h, uint32_t n)
{
    run_ctx ctx;
    run_ctx_init(&ctx, s);
    for (uint32_t i = 0; i < n; i++) {
        if (i + PREFETCH_AHEAD < n)
            prefetch_record(s, h[i + PREFETCH_AHEAD]);
        if (i % CLOCK_EVERY == 0)
            ctx.now = tw__clock_read(s) - s->origin;
        run_handle(s, h[i], &ctx);
    }
    run_ctx_done(&ctx);
}

/* One handle, alone (stolen). */
static void run_one(tw_service *s, tw_timer h)
{
    run_ctx ctx;
    run_ctx_init(&ctx, s);
    ctx.now = tw__clock_read(s) - s->origin;
    run_handle(s, h, &ctx);
    run_ctx_done(&ctx);
}

/*
 * Stealing. A batch holds up to a quarter of a step's due timers per
 * worker; its owner runs them from the front. A callback that blocks would
 * hold its batch-mates back while another worker idles, so an idle worker
 * takes handles from the back of a batch another worker is running: it
 * lowers `hi` by a CAS on the batch's take word (generation | hi), one
 * handle at a time, and runs that handle. The owner stores its progress in
 * `lo` and stops when it reaches `hi`. Near the meeting point both may try
 * the same handle; the record's FIRING -> RUNNING CAS lets one run it, as
 * it does for a cancel racing a run. A stealer reads the handle before its
 * CAS, which succeeds only if the batch is still in the generation it read
 * (the drainer stores a new one when it fills a batch again), so a stealer
 * with a stale pointer never takes a handle out of a newer batch without
 * running it.
 *
 * Who steals: the owner of a batch of two or more wakes one sleeping
 * worker when it starts (a worker asleep then would sleep through the
 * owner's blocking callback); a worker with nothing queued looks for a
 * batch to steal from before it sleeps; and a stealer that leaves more
 * behind wakes one more sleeper. The owner publishes its batch (seq_cst)
 * and then looks for sleepers; a worker announces itself a sleeper
 * (seq_cst) and then looks at the batches: one of the two sees the other.
 * So a due timer waits for a worker only while every worker is busy
 * (issue 12: two timers due in one tick used to share a batch, and the
 * second waited for the first's blocking callback with a worker idle).
 * Before, handing the rest of a batch back before each callback isolated
 * slow callbacks too, but two workers then passed batches back and forth
 * with a wake-up per callback; stealing costs the owner a relaxed store
 * and a load per callback and a wake-up per batch when a worker is asleep.
 */

/* The plant (tw__runs_plant_no_wait) only: a stealer that has won its
 * position holds the run's pointer for 2 ms before it reads its pair, so
 * that the owner's batch ends, the run is spent and the drainer writes a
 * due list into it meanwhile. Without the hold, the window was a few
 * instructions wide and most runs of the plant ended clean (with injected
 * yields, 14-28 clean runs before a report, 2026-11-28). */
static void plant_hold_steal(void)
{
    struct timespec ts = {0, 2 * 1000 * 1000};
    (void)nanosleep(&ts, NULL);
}

static bool batch_steal(tw_batch *b, tw_timer *h)
{
    /* Acquire: this generation's h and lo (batch_fill's release). */
    uint64_t t = atomic_load_explicit(&b->take, memory_order_acquire);
    for (;;) {
        uint32_t hi = (uint32_t)t;
        /* Relaxed: a stale lo only makes us try a handle its owner tries too. */
        if (hi == 0 || hi <= atomic_load_explicit(&b->lo, memory_order_relaxed))
            return false;
        /* Acquire: the pairs h points to. If this is a later fill's h, that
         * fill's empty generation is visible to the CAS below, which fails. */
        const uint64_t *pairs = atomic_load_explicit(&b->h, memory_order_acquire);
        /* Acquire: as the first load, on failure too. */
        if (atomic_compare_exchange_weak_explicit(&b->take, &t, t - 1, memory_order_acquire,
                                                  memory_order_acquire)) {
            /* Position hi - 1 of generation t is ours; its run cannot be
             * used again while we are marked stealing (runs below). */
            if (__builtin_expect(tw__runs_plant_no_wait, 0))
                plant_hold_steal();
            *h = pairs[2 * (hi - 1) + 1];
            return true;
        }
    }
}

/* Take one handle from another worker's batch; *more: some remain there. */
static bool steal_one(tw_service *s, tw_worker *me, tw_timer *h, bool *more)
{
    tw_pool *p = &s->pool;
    bool took = false;
    /* Seq_cst: before we read any worker's cur, against the trim's look
     * at it (free_retired). */
    atomic_store_explicit(&me->stealing, 1, memory_order_seq_cst);
    for (uint32_t k = 1; k < p->nworkers && !took; k++) {
        tw_worker *w = &p->worker[(me->idx + k) % p->nworkers];
        /* Seq_cst: the sleeper's half of the pairing with the owner's
         * publish (see above). */
        tw_batch *b = atomic_load_explicit(&w->cur, memory_order_seq_cst);
        TW_INJECT(TW_INJ_STEAL);
        if (b && batch_steal(b, h)) {
            *more = (uint32_t)atomic_load_explicit(&b->take, memory_order_relaxed) >
                    atomic_load_explicit(&b->lo, memory_order_relaxed);
            took = true;
        }
    }
    /* Release: our reads of the batch come before a trim that sees 0. */
    atomic_store_explicit(&me->stealing, 0, memory_order_release);
    return took;
}

static void run_stolen(tw_service *s, tw_worker *me)
{
    tw_timer h;
    bool more;
    while (steal_one(s, me, &h, &more)) {
        tw__count_rare(s, TW_RARE_STOLEN);
        if (more)
            wake_one_worker(&s->pool);
        run_one(s, h);
    }
}

/* The runs between two clock reads of a batch's runner: twice as many
 * while `gap` ns of runs lay between two reads is less than half of
 * CLOCK_GAP_NS, half as many while it is more than CLOCK_GAP_NS. */
static uint32_t clock_every_next(uint32_t every, uint64_t gap)
{
    if (gap < CLOCK_GAP_NS / 2 && every < CLOCK_EVERY_MAX)
        return every * 2;
    if (gap > CLOCK_GAP_NS && every > 1)
        return every / 2;
    return every;
}

/* A runner's clock reads over a list of runs (a batch, an inline list):
 * before run `next`, then `every` runs later (clock_every_next). */
typedef struct clock_cadence {
    uint32_t every;
    size_t next;
    uint64_t read_at;
} clock_cadence;

/* Before run i: true, with ctx->now read again, when the cadence asks. */
static inline bool clock_read_due(tw_service *s, clock_cadence *k, size_t i, run_ctx *ctx)
{
    if (i != k->next)
        return false;
    ctx->now = tw__clock_read(s) - s->origin;
    if (i != 0)
        k->every = clock_every_next(k->every, ctx->now - k->read_at);
    k->read_at = ctx->now;
    k->next = i + k->every;
    return true;
}

/* Relaxed (stamp, done): hints for watchers ("Joining"); nothing is read
 * through them but a judgement of speed. */
static void note_progress(tw_worker *me, uint64_t now, uint64_t done)
{
    atomic_store_explicit(&me->stamp, now, memory_order_relaxed);
    atomic_store_explicit(&me->done, done, memory_order_relaxed);
    /* Relaxed, as above. sched_getcpu reads the rseq area glibc keeps
     * (a load), or the vDSO where there is none. */
    atomic_store_explicit(&me->cpu, sched_getcpu(), memory_order_relaxed);
}

static void run_batch(tw_service *s, tw_worker *me, tw_batch *b)
{
    /* Seq_cst: stealers find it (the owner's half of the pairing). */
    atomic_store_explicit(&me->cur, b, memory_order_seq_cst);
    /* Relaxed (take, h): the owner received it through the queue; only
     * stealers lower hi. */
    uint32_t n = (uint32_t)atomic_load_explicit(&b->take, memory_order_relaxed);
    const uint64_t *pairs = atomic_load_explicit(&b->h, memory_order_relaxed);
    tw_run *run = b->run;
    if (n >= 2 && atomic_load_explicit(&s->pool.sleepers, memory_order_seq_cst))
        wake_one_worker(&s->pool);
    run_ctx ctx;
    run_ctx_init(&ctx, s);
    ctx.w = me;
    if (s->cfg.max_timers != 0)
        ctx_use_worker_account(&ctx, me);
    clock_cadence cadence = {.every = me->every, .next = 0, .read_at = 0};
    uint32_t i = 0;
    /* Relaxed: our own word (only watchers read it). */
    uint64_t done = atomic_load_explicit(&me->done, memory_order_relaxed);
    /* The callbacks' service for the whole batch (run_timer_at, batch). */
    tw_service *outer_s = tw__self.s;
    tw_timer outer_t = tw__self.t;
    tw__self.s = s;
    rec_ring ring;
    for (uint32_t k = 0; k < PREFETCH_AHEAD && k < n; k++)
        ring_fetch(s, &ring, k, pairs[2 * k + 1]);
    for (;; i++) {
        /* Relaxed: a stale hi only makes us try a handle a stealer took. */
        uint32_t hi = (uint32_t)atomic_load_explicit(&b->take, memory_order_relaxed);
        if (i >= hi)
            break;
        tw_record *rec = ring.rec[i % PREFETCH_AHEAD];
        if (i + PREFETCH_AHEAD < hi)
            ring_fetch(s, &ring, i + PREFETCH_AHEAD, pairs[2 * (i + PREFETCH_AHEAD) + 1]);
        if (clock_read_due(s, &cadence, i, &ctx)) {
            note_progress(me, ctx.now, done + i);
            /* Relaxed: progress for stealers and watchers, a hint: a stale
             * lo only makes a stealer try handles we run too (their claim
             * decides), and a watcher see runs waiting. Here, not per run:
             * a run is ~40 cycles, and every store in it shows. */
            atomic_store_explicit(&b->lo, i + 1, memory_order_relaxed);
        }
        run_handle_at(s, pairs[2 * i + 1], rec, &ctx, true);
    }
    run_ctx_done(&ctx);
    tw__self.s = outer_s;
    tw__self.t = outer_t;
    me->every = cadence.every;
    /* Relaxed: a hint for watchers, as note_progress. */
    atomic_store_explicit(&me->done, done + i, memory_order_relaxed);
    /* Release: stealers that still see the batch read a finished one.
     * Seq_cst: before the give-back, against a trim's look at stealers
     * (free_retired); one locked store per batch. */
    atomic_store_explicit(&me->cur, NULL, memory_order_seq_cst);
    batch_give_back(&s->pool, b);
    run_release(&s->pool, run);
}

/* Inline runs (MANUAL clock, workers = 0): the due list the step claimed,
 * on the drainer's thread, between steps. One ctx for the whole list, as
 * a worker's batch has: the clock read as a batch reads it (clock_every_next:
 * about CLOCK_GAP_NS of runs between two reads, so a slow callback's
 * successor reads it again; every 8th run, fixed, put a run 141 ms late
 * beside seven slow ones in the figures as 1 ms: a review, 2026-11-29),
 * records fetched ahead, the records given back FREED_BATCH at a time and
 * the lateness counted when its bucket changes. The step claimed only
 * timers due by the clock it was given, and every reading here comes after
 * it, so none can be early: one that is would be a bug. Per run (a ctx, a
 * clock read and a give-back each, until 2026-11-29) a million due at once
 * ran at 18.7M callbacks/s on workers = 0, against 59M on two workers
 * (WL5, twbench --workers). */
static void run_inline(tw_service *s, const uint64_t *pairs, size_t n)
{
    inline_list list = {.s = s, .pairs = pairs, .n = n}, *outer = inline_now;
    inline_now = &list;
    run_ctx ctx;
    run_ctx_init(&ctx, s);
    clock_cadence cadence = {.every = 1, .next = 0, .read_at = 0};
    for (size_t i = 0; i < n; i++) {
        list.at = i;
        if (i + PREFETCH_AHEAD < n)
            prefetch_record(s, pairs[2 * (i + PREFETCH_AHEAD) + 1]);
        (void)clock_read_due(s, &cadence, i, &ctx);
        tw_timer h = pairs[2 * i + 1];
        if (run_timer_at(s, h, tw__rec(&s->rec, tw__handle_idx(h)), &ctx, false) != 0) {
            fputs("timerwheel: a timer claimed inline is not yet due\n", stderr);
            abort();
        }
    }
    run_ctx_done(&ctx);
    inline_now = outer;
}

/* No memory for a batch: the drainer runs these n (at most TW_BATCH) due
 * pairs itself, as a worker would, waiting for deadlines it claimed
 * ahead (run_inline would take such a timer for a bug). */
static void run_here(tw_service *s, const uint64_t *pairs, size_t n)
{
    tw_timer h[TW_BATCH];
    for (size_t k = 0; k < n; k++)
        h[k] = pairs[2 * k + 1];
    run_handles(s, h, (uint32_t)n);
}

/* Batches small enough that every worker gets several (a slow callback
 * then holds up only its few batch-mates until a stealer comes), large
 * enough that a burst of a million moves in 256s. */
static size_t batch_size(const tw_service *s, size_t n)
{
    size_t per = (n + 4 * (size_t)s->pool.nthreads - 1) / (4 * (size_t)s->pool.nthreads);
    if (per < TW_BATCH_MIN)
        per = TW_BATCH_MIN;
    return per > TW_BATCH ? TW_BATCH : per;
}

/* Hand pairs [0, n) of run r out in batches, as far as there are batches
 * for them; returns how many went. */
static size_t hand_out(tw_service *s, tw_run *r, size_t n)
{
    size_t per = batch_size(s, n), i = 0;
    while (i < n) {
        tw_batch *b = batch_get(&s->pool);
        if (!b)
            break;
        size_t take = n - i < per ? n - i : per;
        /* Relaxed: the owner's release comes after the queue's hand-over. */
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
        batch_fill(b, r, r->v + 2 * i, take);
        pool_enqueue(s, b);
        i += take;
    }
    return i;
}

/* No memory for a batch (or a run): the drainer runs pairs [i, n) itself,
 * TW_BATCH at a time, so that no due timer is lost; its state lent
 * meanwhile, as for inline runs. */
static void run_rest_here(tw_service *s, const uint64_t *pairs, size_t i, size_t n)
{
    if (i == n)
        return;
    tw__drainer_lend(s);
    while (i < n) {
        size_t take = n - i < TW_BATCH ? n - i : TW_BATCH;
        run_here(s, pairs + 2 * i, take);
        i += take;
    }
    tw__drainer_reclaim(s);
}

/* The drainer lends its state while it runs callbacks (wheel.c, the
 * drainer role): what they arm and cancel is compacted meanwhile, by
 * themselves or (MANUAL) by other producers, under back-pressure. The
 * list they run from (the due list, or a run's copy) is not lent:
 * compaction leaves it alone. */
static void run_inline_unheld(tw_service *s, tw_vec *due, size_t n)
{
    if (n == 0)
        return;
    tw__drainer_lend(s);
    run_inline(s, due->v, n);
    tw__drainer_reclaim(s);
}

void tw__deliver(tw_service *s)
{
    tw_vec *due = &s->wheel.due;
    size_t n = due->n / 2;
    if (s->pool.nthreads == 0) {
        run_inline_unheld(s, due, n);
        tw__vec_clear(due);
        return;
    }
    tw_run *r = n ? run_begin(&s->pool, due, n) : NULL;
    if (r) {
        run_rest_here(s, r->v, hand_out(s, r, n), n);
        run_release(&s->pool, r);
    } else {
        run_rest_here(s, due->v, 0, n);
        tw__vec_clear(due);
    }
    step_delivered(&s->pool);
}

void tw__deliver_early(tw_service *s)
{
    tw_vec *due = &s->wheel.due;
    size_t n = due->n / 2;
    if (s->pool.nthreads == 0)
        return; /* callbacks run on this thread, between steps (tw__deliver) */
    tw_run *r = n ? run_begin(&s->pool, due, n) : NULL;
    if (!r)
        return; /* the step's end runs them (tw__deliver) */
    size_t i = hand_out(s, r, n);
    if (i < n) {
        /* No batch for the rest: the list keeps it for tw__deliver. */
        tw__vec_reserve(due, 2 * (n - i));
        memcpy(due->v, r->v + 2 * i, (n - i) * 2 * sizeof *due->v);
        due->n = 2 * (n - i);
    }
    run_release(&s->pool, r);
}

/*
 * Joining. A worker that wakes to batches while another worker is taking
 * them does not take one at once: it watches the other for a while
 * (watch_ns, a timed sleep that enqueues do not cut short) and joins only
 * when that helps:
 *   - stuck: a runner made no progress for STUCK_NS while not asleep for
 *     a deadline (a callback that blocks, or a runner the scheduler left
 *     off its CPU). The watcher joins: it takes queued batches and steals
 *     from that runner's batch (guarantee 7, a watch period late at most).
 *   - pays: else it tries queued batches beside the others, for at least
 *     PROBE_MIN_NS (one batch may be a few microseconds of runs, which
 *     one interrupt on either CPU makes look 20% faster or slower: such
 *     probes joined 20-35 times in one burst of WL5, at two thirds of
 *     one runner's rate), and counts the runs finished by all of them
 *     while it ran them. If that rate beats
 *     the others' own rate over the watch by JOIN_GAIN_PCT, and theirs
 *     beside it kept at least half of that, it joins;
 *     else it leaves the rest to them, and watches twice as long next
 *     time (up to WATCH_MAX_NS, or half a tick if that is less: a runner
 *     that blocks later is seen within a tick).
 * A probe that does not pay costs what running beside costs (WL5: a
 * third of its runs), so the watcher probes every probe_every watches,
 * which doubles after each probe that did not pay, up to PROBE_EVERY_MAX
 * (at the longest watch, one probe in 6.4 ms); stuck runners are looked
 * for at every watch.
 * A joined worker takes batches for JOIN_NS (or until none is left) and
 * then watches again: a runner the scheduler left off its CPU for a while
 * is back by then, and runs that sped up beside it may not any more. In
 * time, not batches: a burst's batches may hold a few microseconds of
 * runs each (the cursor hands a large slot out as it claims it).
 * Why: runs share what their callbacks share. WL5's callbacks all add to
 * one counter; on two cores each add then waits for the counter's line to
 * come from the other core, and two runners run a burst at a third of
 * one's rate (bench/floor.c, burst_run: 64 against 182 million runs/s on
 * the AMD guest). Runs that share nothing go at twice the rate on two, and
 * the probe finds that. A watcher wakes only while runs wait in the queue or in a
 * runner's batch, and not at all while the service is paused. A watcher
 * on a runner's CPU moves off it (leave_runners_cpu).
 *
 * At most watch_places workers watch at once: the CPUs the pool may run
 * on (its affinity at creation), since more watchers than CPUs only take
 * CPU from the runners. A worker woken while every place is taken sleeps
 * again at once, without a look at the others (sleep_unplaced); a watcher
 * that leaves its place (it joins, or goes back to sleep) while runs
 * still wait wakes a sleeper to take it over, so every stuck runner still
 * gets a watcher in turn. Before (2026-11-30) every woken worker watched:
 * each batch woke one more, each watcher looked at every worker each
 * watch, and with 512 workers on 2 CPUs both CPUs were full at 100
 * thousand timers a second, lateness up to 72 ms (a review's program;
 * 0.87 CPU-seconds a second with 128 workers at 10 thousand, against 0.06
 * with 2).
 */
#define WATCH_MIN_NS  50000u
#define WATCH_MAX_NS  400000u
#define STUCK_NS      50000u
#define JOIN_GAIN_PCT 120u
#define JOIN_NS         1000000u
#define PROBE_MIN_NS    100000u
#define PROBE_EVERY_MAX 16u

/* Running: it takes batches (active), or holds one (cur; its active store
 * may not be seen yet). Relaxed: hints. */
static bool worker_running(tw_worker *w)
{
    return atomic_load_explicit(&w->active, memory_order_relaxed) ||
           atomic_load_explicit(&w->cur, memory_order_relaxed) != NULL;
}

/* w's batch has runs not yet started; between peek_begin and peek_end.
 * Acquire on cur: a batch from a slab just mapped had its words set by
 * atomic_init (plain stores) on the drainer, and the worker's seq_cst store
 * of cur is what orders them before our reads; a relaxed load left the two
 * unordered, and ThreadSanitizer saw the race on a new slab's first batch.
 * The words themselves are hints (relaxed): the take word's CAS decides
 * (batch_steal). */
static bool batch_waits(tw_worker *w)
{
    tw_batch *b = atomic_load_explicit(&w->cur, memory_order_acquire);
    if (!b)
        return false;
    uint32_t hi = (uint32_t)atomic_load_explicit(&b->take, memory_order_relaxed);
    return hi > atomic_load_explicit(&b->lo, memory_order_relaxed);
}

/* What the workers other than me do, for a watcher. */
typedef struct others_view {
    uint32_t running;  /* how many are running */
    bool batch_waits;  /* one's batch has runs not yet started */
    bool stuck;        /* one made no progress for STUCK_NS, not asleep for
                          a deadline (its batch, or the queue, waits) */
    bool waiting;      /* one is asleep until a deadline */
    bool beside_me;    /* one runs on the CPU I run on (as of its last clock
                          read): see leave_runners_cpu */
    uint64_t done;     /* the runs they finished */
    cpu_set_t busy;    /* the CPUs they run on, as of their last clock reads */
} others_view;

/* Reading other workers' batches: marked as a stealer is (steal_one), so
 * that a trim does not unmap a batch we read through a stale `cur`. */
static void peek_begin(tw_worker *me)
{
    /* Seq_cst: before we read any worker's cur, against the trim's look
     * at it (no_stealer), as in steal_one. */
    atomic_store_explicit(&me->stealing, 1, memory_order_seq_cst);
}

static void peek_end(tw_worker *me)
{
    /* Release: our reads of the batches come before a trim that sees 0. */
    atomic_store_explicit(&me->stealing, 0, memory_order_release);
}

static others_view view_others(tw_pool *p, tw_worker *me, uint64_t now)
{
    others_view v = {0};
    int here = now ? sched_getcpu() : -1;
    CPU_ZERO(&v.busy);
    peek_begin(me);
    for (uint32_t k = 1; k < p->nworkers; k++) {
        tw_worker *w = &p->worker[(me->idx + k) % p->nworkers];
        if (!worker_running(w))
            continue;
        v.running++;
        /* Relaxed: hints (note_progress). */
        v.done += atomic_load_explicit(&w->done, memory_order_relaxed);
        bool waiting = atomic_load_explicit(&w->waiting, memory_order_relaxed) != 0;
        v.waiting |= waiting;
        v.batch_waits |= batch_waits(w);
        uint64_t stamp = atomic_load_explicit(&w->stamp, memory_order_relaxed);
        if (now && !waiting && now > stamp && now - stamp > STUCK_NS)
            v.stuck = true;
        int32_t cpu = atomic_load_explicit(&w->cpu, memory_order_relaxed);
        if (!waiting && cpu >= 0 && cpu < CPU_SETSIZE) {
            CPU_SET(cpu, &v.busy);
            v.beside_me |= cpu == here;
        }
    }
    peek_end(me);
    return v;
}

/* Hold back from the queue: I came from idle (a worker that runs goes on
 * taking batches), another worker runs, and runs wait for it. */
static bool holding_back(tw_service *s, tw_worker *me)
{
    tw_pool *p = &s->pool;
    /* Relaxed: our own word. Acquire: pairs with tw__pool_quit's release
     * store; quitting, take what is left (the stop sweep dropped its
     * timers). */
    if (me->joined_until || atomic_load_explicit(&me->active, memory_order_relaxed) ||
        atomic_load_explicit(&p->quit, memory_order_acquire))
        return false;
    others_view v = view_others(p, me, 0);
    /* Relaxed: a hint; signed, as it may dip below 0 for a moment. */
    int32_t queued = (int32_t)atomic_load_explicit(&p->queued, memory_order_relaxed);
    return v.running && (v.batch_waits || queued > 0);
}

/* Leave the CPU I run on for one in my affinity mask that no runner is
 * on: narrow the mask (the kernel moves the thread at once), then put it
 * back as it was (which leaves the thread where it now is). False, and
 * nothing changed, where there is no such CPU (the thread pinned, every
 * CPU running a runner) or the mask does not fit a cpu_set_t. Were the
 * mask changed by someone else between our read and our put-back, theirs
 * would be lost: nobody but the thread itself sets a worker's mask (a
 * callback may; it is not running now). */
bool tw__move_off_cpu(const cpu_set_t *busy)
{
    cpu_set_t mine, away;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0)
        return false;
    CPU_XOR(&away, &mine, busy);
    CPU_AND(&away, &away, &mine); /* mine and not busy */
    if (CPU_COUNT(&away) == 0 || sched_setaffinity(0, sizeof away, &away) != 0)
        return false;
    (void)sched_setaffinity(0, sizeof mine, &mine);
    return true;
}

/* A watcher that finds itself on a runner's CPU moves off it. Why: the
 * kernel wakes a sleeper where it last ran, or where its waker runs (the
 * runner's wake at a batch's start, a timer that fires there), and a
 * runner loses its CPU to the watcher on every look, every watch period,
 * while the other CPU may stand idle: on the AMD guest (sched_switch
 * traced) one burst of WL5 ran at 41.6 million runs a second so, its
 * runner preempted 47 times by its watcher and the other CPU idle
 * throughout, against 64.8 and 67.1 million in runs of the same minutes
 * with the watcher on the other CPU. Once moved, its timed sleeps fire
 * there and it wakes there. */
bool tw__watchers_stay; /* stress/table_shrink.c only (internal.h) */

static void leave_runners_cpu(tw_service *s, others_view *v)
{
    if (v->beside_me && !tw__watchers_stay && tw__move_off_cpu(&v->busy))
        tw__count_rare(s, TW_RARE_MOVED_OFF);
}

static uint64_t service_now(tw_service *s)
{
    return tw__clock_read(s) - s->origin;
}

/* Not running, not joined, and watching longer next time (up to
 * the pool's watch_max): the runners keep on alone. */
static void stay_back(tw_worker *me)
{
    /* Relaxed: a hint (worker_running). */
    atomic_store_explicit(&me->active, 0, memory_order_relaxed);
    if (me->watch_ns < me->s->pool.watch_max)
        me->watch_ns *= 2;
}

/* Join the runners for JOIN_NS from now. */
static void join_now(tw_worker *me, uint64_t now)
{
    me->joined_until = now + JOIN_NS;
}

/* A probe did not pay: the next comes after twice as many watches. */
static void probe_later(tw_worker *me)
{
    if (me->probe_every < PROBE_EVERY_MAX)
        me->probe_every *= 2;
    me->probe_in = me->probe_every - 1;
}

/* A watch place, if one is free (or mine already). Relaxed: the count only
 * bounds how many watch; the seq_cst below orders a leaving watcher's
 * give-back against an unplaced sleeper (sleep_unplaced). */
static bool watch_place_take(tw_pool *p, tw_worker *me)
{
    if (me->watching)
        return true;
    uint32_t n = atomic_load_explicit(&p->watchers, memory_order_relaxed);
    while (n < p->watch_places) {
        if (atomic_compare_exchange_weak_explicit(&p->watchers, &n, n + 1,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
            me->watching = true;
            return true;
        }
    }
    return false;
}

static bool watch_places_full(tw_pool *p)
{
    /* Seq_cst: after the sleeper counted itself (sleep_unplaced). */
    return atomic_load_explicit(&p->watchers, memory_order_seq_cst) >= p->watch_places;
}

/* Leave my watch place; if runs still wait, a sleeper takes it over. */
static void watch_place_give(tw_pool *p, tw_worker *me)
{
    if (!me->watching)
        return;
    me->watching = false;
    /* Seq_cst: before wake_one_worker's bump and look at the sleepers,
     * against sleep_unplaced's count and look at the places. */
    atomic_fetch_sub_explicit(&p->watchers, 1, memory_order_seq_cst);
    /* Relaxed: a hint, as in holding_back. */
    if ((int32_t)atomic_load_explicit(&p->queued, memory_order_relaxed) > 0 ||
        view_others(p, me, 0).batch_waits)
        wake_one_worker(p);
}

/* Every watch place is taken: sleep until a watcher leaves one (or a batch
 * comes), as an idle worker does. `seq`: the work word, read before the
 * look at the places. A watcher that leaves its place after our look
 * bumps the word (wake_one_worker) after its give-back; we count ourselves
 * a sleeper and look at the places again: either we see the place free,
 * or it sees us and wakes us, or our wait finds the word changed. */
static void sleep_unplaced(tw_pool *p, int32_t seq)
{
    atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
    /* Acquire: pairs with tw__pool_quit's release store. */
    if (watch_places_full(p) && !atomic_load_explicit(&p->quit, memory_order_acquire))
        futex_wait_ns(&p->work_seq, seq, 0);
    atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_seq_cst);
}

void (*_Atomic tw__watch_hook)(void); /* tests only (internal.h) */

/* Watch the running workers for watch_ns, then judge (see "Joining"). */
static void watch_and_judge(tw_service *s, tw_worker *me)
{
    tw_pool *p = &s->pool;
    /* Relaxed: set before the service runs; a pointer to code, no data. */
    void (*hook)(void) = atomic_load_explicit(&tw__watch_hook, memory_order_relaxed);
    if (__builtin_expect(hook != NULL, 0))
        hook();
    /* Seq_cst: read the word before the quit flag and the clock state, as
     * wait_until does: tw_resume and tw_stop bump it. */
    int32_t seq = atomic_load_explicit(&p->quit_seq, memory_order_seq_cst);
    /* Acquire: pairs with tw__pool_quit's release store, made before its
     * bump of the word. holding_back looked at quit before we read the
     * word; a tw_stop in between bumped it already, and nothing bumps it
     * again: on a paused service the wait below, which has no time-out,
     * then never ended, and tw_stop waited in its join for good (CI once,
     * 2026-11-29; 3 in 11,000 runs of stop_paused_pool on a loaded CPU). */
    if (atomic_load_explicit(&p->quit, memory_order_acquire))
        return;
    if (tw__clock_paused(s)) {
        futex_wait_ns(&p->quit_seq, seq, 0); /* nothing runs until tw_resume */
        return;
    }
    uint64_t t0 = service_now(s);
    others_view v0 = view_others(p, me, t0);
    leave_runners_cpu(s, &v0);
    futex_wait_ns(&p->quit_seq, seq, me->watch_ns);
    uint64_t t1 = service_now(s);
    others_view v1 = view_others(p, me, t1);
    leave_runners_cpu(s, &v1);
    if (v1.stuck) {
        /* The stuck runner's batch-mates first: they wait longest. Our
         * watch place to a sleeper first: our runs may block too. */
        join_now(me, t1);
        tw__count_rare(s, TW_RARE_JOINED_STUCK);
        watch_place_give(p, me);
        run_stolen(s, me);
        return;
    }
    /* A rate over a sleep until a deadline, or over a change of who runs,
     * measures nothing: watch again, longer (a runner may wait for a
     * deadline claimed ahead for a while). */
    if (v0.waiting || v1.waiting || v0.running != v1.running || v1.done <= v0.done ||
        t1 <= t0 || me->probe_in > 0) {
        if (me->probe_in > 0)
            me->probe_in--;
        stay_back(me);
        return;
    }
    tw_batch *b = pool_take(p);
    if (!b)
        return; /* nothing queued: the runners finish their batches */
    watch_place_give(p, me); /* the probe runs: as when joining */
    /* Relaxed: a hint (worker_running). */
    atomic_store_explicit(&me->active, 1, memory_order_relaxed);
    me->waited = false;
    uint64_t n = 0, t2;
    do {
        /* Relaxed: as in run_batch (the queue handed us the batch). */
        n += (uint32_t)atomic_load_explicit(&b->take, memory_order_relaxed);
        run_batch(s, me, b);
        t2 = service_now(s);
    } while (t2 - t1 < PROBE_MIN_NS && (b = pool_take(p)) != NULL);
    others_view v2 = view_others(p, me, t2);
    /* The rates as runs per ns, compared by cross-multiplying: the others'
     * alone, all of us beside them, and the others' own beside us. The
     * last must stay above half their rate alone: a runner the scheduler
     * left off its CPU during the probe lets the probe run at full speed,
     * which says nothing of running beside it (such probes joined a burst
     * of WL5 now and then). */
    double alone = (double)(v1.done - v0.done) * (double)(t2 - t1);
    double beside = (double)(v2.done - v1.done + n) * (double)(t1 - t0);
    double theirs = (double)(v2.done - v1.done) * (double)(t1 - t0);
#ifdef TW_DEBUG_JOIN
    fprintf(stderr, "join? alone %.1f/us beside %.1f/us (n %u, %lu us)\n",
            (double)(v1.done - v0.done) * 1e3 / (double)(t1 - t0),
            (double)(v2.done - v1.done + n) * 1e3 / (double)(t2 - t1), (unsigned)n,
            (unsigned long)((t2 - t1) / 1000));
#endif
    if (!me->waited && v2.done >= v1.done && t2 > t1 && v2.running == v1.running &&
        beside * 100.0 > alone * JOIN_GAIN_PCT && theirs * 2.0 > alone) {
        join_now(me, t2);
        me->watch_ns = WATCH_MIN_NS;
        me->probe_every = 1;
        tw__count_rare(s, TW_RARE_JOINED_PAYS);
    } else {
        probe_later(me);
        stay_back(me);
    }
}

/* Out of batches: not running, not joined. */
static void stop_running(tw_worker *me)
{
    /* Relaxed: a hint (worker_running). */
    atomic_store_explicit(&me->active, 0, memory_order_relaxed);
    me->joined_until = 0;
    me->watch_ns = WATCH_MIN_NS;
    me->probe_every = 1;
    me->probe_in = 0;
}

static void *worker_main(void *arg)
{
    tw_worker *me = arg;
    tw_service *s = me->s;
    /* Releases a tick's timers in steps of a sixteenth, and a due timer
     * waits for it: no timer slack, a short slice (threads.c). */
    tw__thread_hint_latency();
    tw_pool *p = &s->pool;
    tw__gate_bind(&me->starting, &p->quit_seq, &p->quit);
    tw__worker_mine = me; /* budget_take (service.c) */
    for (;;) {
        /* Seq_cst: read the word before looking for work (see top). */
        int32_t seq = atomic_load_explicit(&p->work_seq, memory_order_seq_cst);
        /* Relaxed: our own word. Acquire (quit): as below. */
        if (!me->watching && !me->joined_until && watch_places_full(p) &&
            !atomic_load_explicit(&me->active, memory_order_relaxed) &&
            !atomic_load_explicit(&p->quit, memory_order_acquire)) {
            /* The watchers awake take the queue once nobody runs. */
            sleep_unplaced(p, seq);
            continue;
        }
        if (holding_back(s, me)) {
            if (watch_place_take(p, me))
                watch_and_judge(s, me);
            else
                sleep_unplaced(p, seq);
            continue;
        }
        watch_place_give(p, me); /* it runs, or goes to sleep */
        tw_batch *b = pool_take(p);
        if (b) {
            /* Relaxed: a hint (worker_running). */
            atomic_store_explicit(&me->active, 1, memory_order_relaxed);
            run_batch(s, me, b);
            if (me->joined_until && service_now(s) >= me->joined_until) {
                me->joined_until = 0;
                /* Relaxed: a hint. */
                atomic_store_explicit(&me->active, 0, memory_order_relaxed);
            }
            continue;
        }
        if (me->joined_until)
            run_stolen(s, me);
        stop_running(me);
        /* Acquire: pairs with tw__pool_quit's release store. */
        if (atomic_load_explicit(&p->quit, memory_order_acquire))
            return NULL;
        atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
        /* Look again, now that an owner that starts a batch sees us: its
         * runs are watched (holding_back), not left to a sleeper. */
        if (view_others(p, me, 0).batch_waits) {
            atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_seq_cst);
            continue;
        }
        futex_wait_ns(&p->work_seq, seq, 0);
        atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_seq_cst);
    }
}

/* The CPUs the creating thread may run on (the workers inherit its mask),
 * at least 1: how many watch at once ("Joining"). */
static uint32_t watch_places_for_pool(void)
{
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0)
        return 1;
    int n = CPU_COUNT(&mine);
    return n > 0 ? (uint32_t)n : 1;
}

int tw__pool_start(tw_service *s, uint32_t nthreads)
{
    tw_pool *p = &s->pool;
    cds_wfcq_init(&p->head, &p->tail);
    cds_wfcq_init(&p->spare_head, &p->spare_tail);
    cds_wfcq_init(&p->spent_head, &p->spent_tail);
    p->runs_spare = p->runs_wait = NULL;
    p->run_peak = p->run_peak_prev = 0;
    p->runs_reused = 0;
    p->runs_out = p->runs_out_peak = p->runs_out_peak_prev = 0;
    atomic_init(&p->made, 0);
    p->slabs = p->retired = NULL;
    p->nslabs = 0;
    atomic_init(&p->work_seq, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->queued, 0);
    atomic_init(&p->quit, false);
    atomic_init(&p->quit_seq, 0);
    p->nthreads = 0;
    p->release_step = release_step_for(s->cfg.tick_ns);
    if (nthreads == 0)
        return TW_OK;
    p->threads = calloc(nthreads, sizeof *p->threads);
    p->worker = aligned_alloc(TW_CACHELINE, nthreads * sizeof *p->worker);
    if (!p->threads || !p->worker)
        return TW_ENOMEM;
    for (uint32_t i = 0; i < nthreads; i++) {
        p->worker[i].s = s;
        p->worker[i].idx = i;
        atomic_init(&p->worker[i].cur, NULL);
        atomic_init(&p->worker[i].starting, 0);
        atomic_init(&p->worker[i].stealing, 0);
        atomic_init(&p->worker[i].active, 0);
        atomic_init(&p->worker[i].waiting, 0);
        atomic_init(&p->worker[i].stamp, 0);
        atomic_init(&p->worker[i].done, 0);
        atomic_init(&p->worker[i].cpu, -1);
        p->worker[i].watch_ns = WATCH_MIN_NS;
        p->worker[i].every = 1;
        p->worker[i].joined_until = 0;
        atomic_init(&p->worker[i].budget.given, 0);
        atomic_init(&p->worker[i].budget.taken, 0);
        atomic_init(&p->worker[i].budget.busy, 0);
        atomic_init(&p->worker[i].budget.steal, 0);
        p->worker[i].probe_every = 1;
        p->worker[i].probe_in = 0;
        p->worker[i].waited = false;
        p->worker[i].watching = false;
    }
    /* A slab ready before the first burst: mapping one and touching its
     * pages took tens of microseconds off the first callback's start
     * (WL5). Without memory, the first batch maps it (or runs inline). */
    (void)slab_map(p);
    p->nworkers = nthreads; /* seen by every worker: written before they start */
    atomic_init(&p->watchers, 0);
    p->watch_places = watch_places_for_pool();
    p->watch_max = s->cfg.tick_ns / 2 < WATCH_MAX_NS ? s->cfg.tick_ns / 2 : WATCH_MAX_NS;
    if (p->watch_max < WATCH_MIN_NS)
        p->watch_max = WATCH_MIN_NS;
    for (uint32_t i = 0; i < nthreads; i++) {
        int rc = tw__thread_start(&p->threads[i], worker_main, &p->worker[i], "tw-worker");
        if (rc != TW_OK)
            return rc;
        p->nthreads++;
    }
    return TW_OK;
}

void tw__pool_stopping(tw_service *s)
{
    tw_pool *p = &s->pool;
    /* Seq_cst: after the stop state's store (tw_stop), before the wake:
     * a runner waiting for a deadline sees the stop or finds the word
     * changed. */
    atomic_fetch_add_explicit(&p->quit_seq, 1, memory_order_seq_cst);
    futex_wake_all(&p->quit_seq);
}

void tw__pool_quit(tw_service *s)
{
    tw_pool *p = &s->pool;
    /* Release: workers that see quit have seen every batch enqueued before. */
    atomic_store_explicit(&p->quit, true, memory_order_release);
    atomic_fetch_add_explicit(&p->work_seq, 1, memory_order_seq_cst);
    futex_wake_all(&p->work_seq);
    /* Seq_cst: after quit, before the wake: a worker waiting for a
     * deadline either sees quit or finds the word changed. */
    atomic_fetch_add_explicit(&p->quit_seq, 1, memory_order_seq_cst);
    futex_wake_all(&p->quit_seq);
    for (uint32_t i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    p->nthreads = 0;
    for (tw_batch *b; (b = pool_take(p));)
        run_release(p, b->run); /* every handle in it was dropped by the stop sweep */
    runs_fini(p);
    while (__cds_wfcq_dequeue_blocking(&p->spare_head, &p->spare_tail)) {
    }
    /* The workers are joined: no stealer is left. */
    for (tw_batch_slab *sl = p->slabs, *next; sl; sl = next) {
        next = sl->next;
        munmap(sl, sizeof *sl);
    }
    for (tw_batch_slab *sl = p->retired, *next; sl; sl = next) {
        next = sl->next;
        munmap(sl, sizeof *sl);
    }
    p->slabs = p->retired = NULL;
    p->nslabs = 0;
    atomic_store_explicit(&p->made, 0, memory_order_relaxed); /* tw_stop: alone */
    free(p->threads);
    p->threads = NULL;
    cds_wfcq_destroy(&p->head, &p->tail);
    cds_wfcq_destroy(&p->spare_head, &p->spare_tail);
    cds_wfcq_destroy(&p->spent_head, &p->spent_tail);
}

/* The workers' lines stay until tw_destroy: tw_pause may look at their
 * gates while tw_stop runs (pause.c). */
void tw__pool_fini(tw_service *s)
{
    free(s->pool.worker);
    s->pool.worker = NULL;
    s->pool.nworkers = 0;
}
