/*
 * cursor.c: the cursor thread of a MONOTONIC service: it drives the wheel's
 * step (wheel.c) from CLOCK_MONOTONIC and hands what is due to the runners
 * (workers.c). It never waits for a producer and never runs a callback
 * inside a step (workers = 0 runs them between steps: after a step, what
 * an early claim staged just before the step to its tick, and on an early
 * claim's late path at the claim's end, wheel.c).
 *
 * The loop:
 *   - while the service is paused (pause.c), sleep until tw_resume: the
 *     clock it reads is the service's, frozen then, so no tick is due;
 *     but compact, while the wheel is over its allowance (armings and
 *     cancels go on during a pause), woken for it by producers under
 *     back-pressure (wheel.c);
 *   - when ticks are due (now >= origin + T * tick_ns for T > cur), step to
 *     T at once: a late cursor (stalled machine, long cascade, slow inline
 *     callback) catches up in one step, without sleeping (two, if an early
 *     claim's tick is among them and a tick before it has work:
 *     tw__wheel_step_to);
 *   - when caught up with an early claim of a large slot, or an early drain
 *     of one above level 0, that gave the cursor back for the ticks before
 *     it (wheel.c), go on with it;
 *   - when caught up, start on a burst whose lead has come (the producers'
 *     marks: start_burst), busy, idle or compacting;
 *   - when caught up and the next tick has work (or compaction more to
 *     do), sleep to that tick's absolute boundary (tick_wait: a futex
 *     wait with an absolute timeout, no drift), or until a wake (tw_stop,
 *     tw_resume, back-pressure); past the back-pressure line, do
 *     not sleep between compaction rounds;
 *   - when the next work is further away (occupancy bitmaps), publish the
 *     planned wake-up tick and sleep on a futex until then: an idle service
 *     wakes only when something is due, or when a producer arms a timer
 *     earlier than the planned wake-up (tw__cursor_poke);
 *   - on every pass, place what producers logged (defer.c): after the
 *     step has handed its timers over, or before it when a logged timer
 *     may be due by its target; and plan no wake-up later than
 *     TW_DEFER_AHEAD ticks before the earliest logged timer.
 *
 * Lookahead: with a worker pool, the cursor processes each tick ahead of
 * it (two ticks early below a 2 ms tick, one from 2 ms up) and the
 * workers start each timer at its deadline, in sixteenths of a tick of at
 * least 50 us (workers.c), never before: so lateness is not the tick's
 * rounding (up to a whole tick for a deadline just after a boundary) but
 * one such step plus the wake-up. A
 * claimed timer can still be cancelled or moved until it starts. With
 * workers = 0 the cursor itself runs the callbacks, so it does not look
 * ahead (a callback would otherwise run early); nor with ticks shorter than
 * TW_LOOKAHEAD_MIN_TICK, whose rounding is small anyway.
 *
 * When it has nothing to do for a while, the cursor also populates the
 * record table ahead of the producers (records.c): a producer whose arming
 * crossed a step of the table asks for it and wakes a sleeping cursor
 * (records_grew). Only when idle: a step can take milliseconds of page
 * zeroing on a VM, which must not delay a tick; a cursor busy every tick
 * leaves the faults to the producers, as before. A spill that holds
 * entries (defer.c) comes first: its drain is what keeps the producers
 * from placing their timers themselves.
 *
 * No lost wake-up: the cursor reads wake_seq, publishes wake_tick, makes
 * every thread execute a full barrier (tw__fence_heavy), then re-scans the
 * bitmaps and the logs' tails (all seq_cst); a producer marks its slot's
 * bit (a seq_cst RMW), or publishes its log's tail (release, then only a
 * compiler barrier, tw__fence_light: defer.c), then reads wake_tick
 * (seq_cst). Either the re-scan sees the bit or the tail, or the
 * producer sees the planned tick and, if it is earlier, lowers wake_tick by
 * CAS and bumps wake_seq, which makes the futex wait return at once. The
 * heavy fence is once per sleep of the cursor (a membarrier: 1.5-9 us on
 * the AMD guest with another thread of the process running, and an
 * interrupt of each CPU that runs one), where a fence of the appending
 * producer's was one per logged arming (since 2026-11-29: the threads.c
 * shape of a frequent and a rare side). A cursor with work every tick
 * sleeps to the next tick without a plan, and without the fence.
 *
 * Naps. While producers log armings fast (TW_NAP_ENTRIES or more every
 * TW_NAP_NS, millions a second), the cursor sleeps TW_NAP_NS at a time
 * (or less, to its next work) with wake_tick AWAKE, as to the next tick:
 * no plan, no heavy fence, and no pokes. Before, each sleep published a
 * plan and paid the fence, and a producer's log then filled half-way in
 * a few hundred microseconds and woke it (the urgent poke, defer.c):
 * WL1 at P=1 on the Intel guest slept and was woken about 4,000 times a
 * second, 8% of the producer's time in futex_wake and 5% of the cursor's
 * in membarrier, whose interrupt lands on the producer's CPU too (perf,
 * 2026-12-01). Napping, the cursor's own timer wakes it, on its own CPU,
 * and each log holds 200 us of armings. What it costs: a timer armed
 * during a nap that is placed in the wheel at once (due within
 * TW_DEFER_AHEAD ticks) is seen at the nap's end, as by a cursor busy
 * that long (a nap is at most a tick); never early. Idle when idle: the
 * first look after the armings stop finds fewer than TW_NAP_ENTRIES, and
 * the cursor plans and sleeps as before. With the rate measured between
 * two looks, a thread that logs a few hundred timers in a burst now and
 * then makes the cursor nap once or twice, no more.
 */
#include "internal.h"

#include <limits.h>
#include <time.h>
#include <urcu/futex.h>

#define AWAKE 0 /* wake_tick while the cursor is ticking: producers never poke */

void tw__cursor_poke(tw_service *s, uint64_t tick)
{
    if (s->cfg.clock != TW_CLOCK_MONOTONIC)
        return;
    /* Seq_cst: the producer's half of the pairing described at the top. */
    uint64_t w = atomic_load_explicit(&s->wake_tick, memory_order_seq_cst);
    while (tick < w) {
        /* Seq_cst: one producer wins the right to wake; the others see the
         * lowered tick and need not. */
        if (atomic_compare_exchange_weak_explicit(&s->wake_tick, &w, tick,
                                                  memory_order_seq_cst,
                                                  memory_order_seq_cst)) {
            atomic_fetch_add_explicit(&s->wake_seq, 1, memory_order_seq_cst);
            futex_async((int32_t *)&s->wake_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
            return;
        }
    }
}

void tw__cursor_compact_now(tw_service *s)
{
    /* Seq_cst: bump the futex word before the wake (see top); a paused
     * cursor reads it before its look at the wheel (cursor_main). */
    atomic_fetch_add_explicit(&s->wake_seq, 1, memory_order_seq_cst);
    futex_async((int32_t *)&s->wake_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* A producer asked for records to be populated ahead (records.c): wake
 * the cursor if it sleeps. The same pairing as the poke's: the producer's
 * request (seq_cst) then this look; the cursor's plan (seq_cst) then its
 * look at the request (cursor_sleep). An awake cursor finds the request
 * at the top of its loop. */
static void records_grew(tw_records *r)
{
    tw_service *s = caa_container_of(r, tw_service, rec);
    /* Seq_cst: see above. */
    if (atomic_load_explicit(&s->wake_tick, memory_order_seq_cst) == AWAKE)
        return;
    /* Seq_cst: bump the futex word before the wake (see top). */
    atomic_fetch_add_explicit(&s->wake_seq, 1, memory_order_seq_cst);
    futex_async((int32_t *)&s->wake_seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* Ticks the cursor processes ahead of the clock (see the top). Not below
 * TW_LOOKAHEAD_MIN_TICK: a worker then sleeps for a quarter of a tick at a
 * time (then the release step's floor, workers.c), and waking it costs
 * tens of us on a VM, which at a 100 us tick made
 * the tail worse (WL3 100 us p99 0.6-1.8 ms without, 1.8-2.9 ms with, on a
 * noisy 2-core VM), while the rounding it removes is only 100 us there.
 *
 * Two ticks below TW_LOOKAHEAD_TWO_BELOW, so that a timer's start waits
 * for one late wake-up, its worker's, not for the cursor's as well. A
 * woken thread may wait for a CPU until the kernel's next scheduler tick
 * (4 ms at HZ=250): on the Intel guest (PREEMPT_NONE), beside WL3's four
 * producers, a tw-worker and the tw-cursor sat runnable 5.4 and 3.9 ms
 * behind one producer (perf sched timehist). With one tick ahead, a late
 * cursor made every timer of the ticks it had not claimed yet late too:
 * WL3 at 1 ms, 8 alternating runs each (medians): p99.9 3.8 ms one tick
 * ahead, 0.65 two, 2.0 the heap's; max 7.0, 4.4 and 3.9. Four ticks ahead
 * made timers with delays of 0.5-6 ms start later beside four CPU-bound
 * producers (median lateness 0.08 -> 0.6 ms); two did not (0.08). From a
 * 2 ms tick up, one tick ahead is 2 ms or more already. */
#define TW_LOOKAHEAD_MIN_TICK 400000u   /* ns */
#define TW_LOOKAHEAD_TWO_BELOW 2000000u /* ns */

static uint64_t lookahead(const tw_service *s)
{
    if (s->pool.nthreads == 0 || s->cfg.tick_ns < TW_LOOKAHEAD_MIN_TICK)
        return 0;
    return s->cfg.tick_ns < TW_LOOKAHEAD_TWO_BELOW ? 2 : 1;
}

/* When the cursor processes tick `tick`: its boundary, a lookahead early;
 * UINT64_MAX if that is past the clock's range (the next work of a high
 * level may be a whole turn away: 2^44 ticks at the top level). */
uint64_t tw__cursor_tick_start(const tw_service *s, uint64_t tick)
{
    uint64_t t = tick - lookahead(s);
    if (t > (UINT64_MAX - s->origin) / s->cfg.tick_ns)
        return UINT64_MAX;
    return s->origin + t * s->cfg.tick_ns;
}

static uint64_t tick_start(const tw_service *s, uint64_t tick)
{
    return tw__cursor_tick_start(s, tick);
}

/* The last tick the cursor may process at clock reading `now` (service
 * time: frozen while paused, so no tick is processed then). */
static uint64_t current_tick(const tw_service *s, uint64_t now)
{
    return tw__tick_floor(s, now - s->origin) + lookahead(s);
}

static bool quitting(tw_service *s)
{
    /* Acquire: pairs with tw__cursor_quit's release store. */
    return atomic_load_explicit(&s->cursor_quit, memory_order_acquire);
}

#ifndef FUTEX_WAIT_BITSET
#define FUTEX_WAIT_BITSET 9 /* linux/futex.h: its absolute timeout is CLOCK_MONOTONIC */
#endif
#define TW_FUTEX_BITSET_ANY (-1) /* FUTEX_BITSET_MATCH_ANY as the int32_t val3 */

/* Sleep until service time `at` (the start of the next tick, which has a
 * timer due or compaction going on; or a nap's end), or until the futex
 * word moves from `seq` (read
 * before the caller's looks): a back-pressure wake, tw_resume, tw_stop
 * (pokes do not come while wake_tick is AWAKE). An absolute timeout, as
 * clock_nanosleep's that this replaces: no drift from a preemption before
 * the call. That sleep heard no wake: with a tick of 1 s, producers past
 * the back-pressure line waited for the next tick's compaction, and
 * tw_stop took up to a tick (987 ms; a review's program, 2026-11-30). */
static void wait_until(tw_service *s, int32_t seq, uint64_t at)
{
    uint64_t mono;
    /* The quit after our read of seq: a stop whose wake came between the
     * loop's look and that read changed nothing we wait on (a review's
     * program, a hook there: tw_stop 970 ms with a 1 s tick). */
    if (quitting(s) || !tw__clock_service_to_mono(s, at, &mono))
        return; /* quitting, or paused: the loop looks again */
    struct timespec ts = {.tv_sec = (time_t)(mono / 1000000000ull),
                          .tv_nsec = (long)(mono % 1000000000ull)};
    futex_async((int32_t *)&s->wake_seq, FUTEX_WAIT_BITSET, seq, &ts, NULL,
                TW_FUTEX_BITSET_ANY);
}

/* Sleep until the start of tick `w`, as wait_until. */
static void tick_wait(tw_service *s, int32_t seq, uint64_t w)
{
    wait_until(s, seq, tick_start(s, w));
}

/* Sleep until tick `w` or a poke, whichever comes first. */
static void idle_wait(tw_service *s, int32_t seq, uint64_t w)
{
    struct timespec ts, *timeout = NULL;
    uint64_t at = w == UINT64_MAX ? UINT64_MAX : tick_start(s, w);
    if (at != UINT64_MAX) {
        uint64_t now = tw__clock_read(s);
        if (at <= now)
            return;
        ts.tv_sec = (time_t)((at - now) / 1000000000ull);
        ts.tv_nsec = (long)((at - now) % 1000000000ull);
        timeout = &ts;
    }
    futex_async((int32_t *)&s->wake_seq, FUTEX_WAIT, seq, timeout, NULL, 0);
}

/* How many ticks before its tick a slot of n entries is claimed early
 * (wheel.c): TW_EARLY_NS_PER_ENTRY is about twice what a claim costs the
 * cursor when the host is slow, so that the claims are done before the
 * tick comes; at most half a turn. A million took 40-60 ms on a 2-core VM;
 * on 2026-11-24 the same VM's memory was 2.5x slower (a 16 MiB pointer
 * chase 150 ns a load against 62), the claim outran a lead of 100 ns an
 * entry, and WL5's first callback came 10 and 34 ms after the deadline in
 * two bench runs (the commit before this change too: 24 ms once in 5).
 * At 250 ns, 6 interleaved runs: every first callback within 0.06 ms
 * (100 ns: one at 2 ms), callbacks/s 0.97 of 100 ns's. Since 2026-11-24 a
 * claim that outruns its lead (a slot still being filled grows under it)
 * no longer holds the tick up: it hands over what it has at the tick
 * (wheel.c), so the lead now decides how much of a burst is claimed off
 * the workers' cores, not whether the first callback is on time. */
#define TW_EARLY_NS_PER_ENTRY 250u

uint64_t tw__early_lead_override; /* tests (test_workers.c) */
void (*_Atomic tw__cursor_plan_hook)(tw_service *s); /* tests (internal.h) */

static uint64_t early_lead(const tw_service *s, uint64_t n)
{
    if (s->early_lead != 0)
        return s->early_lead; /* a test's */
    uint64_t ticks = 2 + n * TW_EARLY_NS_PER_ENTRY / s->cfg.tick_ns;
    uint64_t cap = s->cfg.wheel_slots / 2;
    return ticks < cap ? ticks : cap;
}

/* How many ticks before its epoch a slot of n entries above level 0 is
 * drained into level 0 (wheel.c, early cascades): its placement (80-150
 * ns an entry: TW_CASCADE_NS_PER_ENTRY with room to spare) and then the
 * early claim of the slot it fills (early_lead's), at most `room`, where
 * every entry still lands in level 0. */
#define TW_CASCADE_NS_PER_ENTRY 250u

static uint64_t cascade_lead(const tw_service *s, uint64_t n, uint64_t room)
{
    uint64_t ticks = early_lead(s, n) + n * TW_CASCADE_NS_PER_ENTRY / s->cfg.tick_ns;
    return ticks < room ? ticks : room;
}

/* Idle long enough to populate a step of records (see the top): the
 * next work is at least TW_PREFAULT_SLACK_NS away, and twice as far as
 * the slowest recent step took. A step (1.25 MiB) took 6-15 ms on a 2-core
 * Intel guest while a producer armed a burst beside it (2026-11-24):
 * longer than the fixed slack, so a timer due just past it was late by the
 * difference. */
#define TW_PREFAULT_SLACK_NS (10u * 1000u * 1000u)

static bool may_prefault(const tw_service *s, uint64_t cur, uint64_t w)
{
    if (!tw__rec_prefault_asked(&((tw_service *)s)->rec))
        return false;
    uint64_t slack = 2 * s->prefault_ns > TW_PREFAULT_SLACK_NS ? 2 * s->prefault_ns
                                                               : TW_PREFAULT_SLACK_NS;
    return w == UINT64_MAX || (w - cur) > slack / s->cfg.tick_ns + 1;
}

/* One step of populating, timed: the slowest recent step, forgotten an
 * eighth a step, sets the slack the next one needs. */
static void prefault_step(tw_service *s)
{
    uint64_t t0 = tw__clock_read(s);
    tw__rec_prefault(&s->rec);
    uint64_t took = tw__clock_read(s) - t0; /* 0 if paused meanwhile */
    uint64_t kept = s->prefault_ns - s->prefault_ns / 8;
    s->prefault_ns = took > kept ? took : kept;
}

/* Place what the producers logged (defer.c); remember a shortage of
 * memory, which makes the cursor come back next tick (cursor_sleep). */
static void drain_logs(tw_service *s, bool some)
{
    s->defer_short = !tw__defer_drain(s, some);
}

/* Plan w, or earlier: the drain of the logs (defer.c) must come
 * TW_DEFER_AHEAD ticks before the earliest timer they may hold. Entries
 * are logged only further ahead than that, so this is after cur. */
static uint64_t plan_for_logs(tw_service *s, uint64_t w)
{
    uint64_t logged = tw__defer_bound(s);
    if (logged == UINT64_MAX)
        return w;
    return logged - TW_DEFER_AHEAD < w ? logged - TW_DEFER_AHEAD : w;
}

/* The tick at which the cursor starts on burst b (wheel.c, bursts): its
 * early claim's lead before its tick (level 0), or its drain's (above). */
static uint64_t burst_start(const tw_service *s, const tw_burst *b)
{
    uint64_t lead = b->level == 0 ? early_lead(s, b->n) : cascade_lead(s, b->n, b->room);
    return b->tick > lead ? b->tick - lead : 0;
}

static uint64_t burst_start_at(tw_service *s)
{
    tw_burst b;
    uint64_t at;
    return tw__wheel_next_burst(s, burst_start, &b, &at) ? at : UINT64_MAX;
}

/* The burst the cursor must start on first: started, if its time has come
 * (true: the loop plans again), else the plan *w brought forward to that
 * time. Found by the producers' marks, whatever the next work is: before
 * (until 2026-11-29) the cursor looked only at the slot of its next work,
 * and only when that was not the next tick, so beside timers due every
 * tick (a busy server) or a timer due a tick before it, a burst was
 * claimed at its tick: bench/beside with probes armed 20-50 ms ahead, a
 * million's first callback 2-20 ms after its deadline, against 0.06-0.1
 * ms with probes 3 ms ahead. Both the claim and the drain give way to
 * the earlier ticks (wheel.c, suspended claims, early cascades). */
static bool start_burst(tw_service *s, uint64_t cur, uint64_t *w)
{
    tw_burst b;
    uint64_t at;
    if (!tw__wheel_next_burst(s, burst_start, &b, &at))
        return false;
    if (at > cur) {
        *w = at < *w ? at : *w; /* wake up in time for it */
        return false;
    }
    if (b.level != 0) {
        if (tw__wheel_cascade_early(s, b.tick, b.level))
            return true; /* the level-0 slot it filled is a burst in turn */
        *w = cur + 1; /* not reached (burst_start keeps within room): look again a tick on */
        return false;
    }
    /* The whole logs first: the claim makes its room for what the slot
     * holds as it starts, and the loop's drains may have left a log's
     * newest entries (defer.c), the burst's own. */
    drain_logs(s, false);
    if (tw__wheel_claim_early(s, b.tick, tick_start(s, b.tick)))
        return true;
    *w = cur + 1; /* declined (wheel.c, no_time_left): the step claims it at its tick */
    return false;
}

/* Naps (see the top): while producers log at least TW_NAP_ENTRIES
 * entries every TW_NAP_NS, the cursor sleeps TW_NAP_NS at a time, awake
 * to producers (no plan, no heavy fence, no pokes). 512 in 200 us is 2.56
 * million logged armings a second; a log then holds what one producer
 * arms in 200 us: under half of it (the urgent poke's mark, which a nap
 * does not hear) up to 20 million a second, and the room its drains
 * leave (three quarters of it in a log that keeps its newest entries)
 * up to 30 million, past which its owner spills (defer.c: nothing is
 * lost, the spill is drained first). Why 200 us: WL1 on the Intel guest,
 * medians of 7 pairs against no naps, P = 1, 2, 8: 1.11, 1.02, 0.97
 * (defaults) and 1.10, 0.99, 1.02 (configured) napping 100 us; 1.13,
 * 1.04, 1.01 and 1.14, 1.08, 1.02 napping 200 us (2026-12-01). */
#define TW_NAP_NS 200000u
#define TW_NAP_ENTRIES 512u

uint32_t tw__nap_entries_override; /* tests (internal.h) */

/* Whether producers logged at least TW_NAP_ENTRIES per TW_NAP_NS since
 * the last look (service time `now`); this is the look. */
static bool logging_fast(tw_service *s, uint64_t now)
{
    uint32_t appended = tw__defer_appended(s);
    uint32_t since = appended - s->nap_appended;
    uint64_t span = now - s->nap_looked;
    s->nap_appended = appended;
    s->nap_looked = now;
    return since >= s->nap_entries &&
           (uint64_t)since * TW_NAP_NS >= (uint64_t)s->nap_entries * span;
}

/* A nap: TW_NAP_NS from `now`, or less: a tick, if shorter (a timer the
 * call placed meanwhile is then seen within a tick, guarantee 1), or to
 * the start of tick w (the next work, or the logs' plan: plan_for_logs). */
static void nap(tw_service *s, int32_t seq, uint64_t w, uint64_t now)
{
    uint64_t at = tick_start(s, w);
    uint64_t end = now + (s->cfg.tick_ns < TW_NAP_NS ? s->cfg.tick_ns : TW_NAP_NS);
    /* The cursor's own count: a plain load and store (tests read it). */
    tw__count_add_owned(&s->naps, 1, true);
    wait_until(s, seq, at < end ? at : end);
}

/* Caught up: sleep until the next work, or until poked. A burst is
 * claimed early, or drained into level 0 early (wheel.c): the cursor
 * wakes up its lead before the tick, and starts on it then. `now`: the
 * loop's clock reading (the trim's too: a second read cost about as much
 * as a short callback, 23 ns). */
static void cursor_sleep(tw_service *s, uint64_t cur, uint64_t now)
{
    /* Acquire: the hook's code and data as the test set them. */
    void (*hook)(tw_service *) = atomic_load_explicit(&tw__cursor_plan_hook,
                                                     memory_order_acquire);
    if (hook)
        hook(s);
    /* Seq_cst: read the futex word before planning (see top). */
    int32_t seq = atomic_load_explicit(&s->wake_seq, memory_order_seq_cst);
    /* Before the plan, and also when a timer is due every tick: a cursor
     * that is never idle still gives a burst's memory back (wheel.c). */
    tw__wheel_trim(s, now);
    /* Slots of stale entries only: no wake for them (wheel.c). */
    if (tw__wheel_sweep_ahead(s, tick_start(s, cur + 1)))
        return; /* more to sweep: the loop drains and steps, then plans again */
    uint64_t w = tw__wheel_next_work(s);
    if (s->defer_short)
        w = cur + 1; /* a logged timer found no memory: try again next tick */
    else if (start_burst(s, cur, &w))
        return; /* the loop plans again */
    if (logging_fast(s, now)) {
        /* A spill first, as below (the loop drains it). No step of
         * populating the record table ahead while napping: tried, it
         * grew the large-table soak's RSS from 11.6 to 18.5 MB in 30 s
         * (the table populated megabytes past a steady pending set; CI,
         * 2026-12-01); the producers fault their own pages meanwhile. */
        if (!tw__defer_spilled(s))
            nap(s, seq, plan_for_logs(s, w), now);
        return;
    }
    if (w <= cur + 1) {
        tick_wait(s, seq, cur + 1);
        return;
    }
    /* The logs after the wheel's plan, so that timers logged for a large
     * slot's tick do not put off its early claim until too late. */
    w = plan_for_logs(s, w);
    if (w <= cur + 1) {
        tick_wait(s, seq, cur + 1);
        return;
    }
    if (tw__seg_poll(s)) {
        /* Detached segments wait for grace steps (segments.c): look again
         * soon, rather than keep them until the next timer is due. */
        uint64_t soon = cur + 1 + TW_RETIRE_POLL_NS / s->cfg.tick_ns;
        w = w < soon ? w : soon;
    }
    uint64_t trim_at;
    if (tw__wheel_trim_due(s, &trim_at)) {
        /* A burst's lists and batches are given back a period or two
         * after it (wheel.c): come back for them, then sleep for good. */
        uint64_t then = trim_at > s->origin ? tw__tick_floor(s, trim_at - s->origin) + 1
                                            : cur + 1; /* steps left: the next tick */
        w = w < then ? w : then;
    }
    /* A spill's next page before populating: a drain slower than the
     * burst's arming fills the spill, and its thread then places timers
     * itself (WL2 10M: 0.71x the schedules with a populating step between
     * pages, farm-bench, 2026-11-28). */
    if (tw__defer_spilled(s))
        return; /* the loop drains it */
    if (may_prefault(s, cur, w)) {
        prefault_step(s); /* one step; the loop plans again */
        return;
    }
    /* Seq_cst: publish the plan, then look again for work placed meanwhile
     * and for records asked for (may_prefault: see records_grew). The
     * heavy fence between: an appending producer's side of the pairing is
     * a compiler barrier only (see the top). */
    atomic_store_explicit(&s->wake_tick, w, memory_order_seq_cst);
    tw__fence_heavy();
    uint64_t again = tw__wheel_next_work(s);
    if (plan_for_logs(s, w) < w || burst_start_at(s) < w)
        again = 0; /* logged or marked since our look, before our plan: plan again */
    if (again >= w && !quitting(s) && !may_prefault(s, cur, w))
        idle_wait(s, seq, w);
    /* Seq_cst: back to ticking; producers stop poking. */
    atomic_store_explicit(&s->wake_tick, AWAKE, memory_order_seq_cst);
}

/* Paused (pause.c): sleep until tw_resume, quit or back-pressure (seq:
 * the word as read before the look at the wheel), with no timeout, and
 * with wake_tick AWAKE, so producers do not poke. */
static void paused_wait(tw_service *s, int32_t seq)
{
    if (!quitting(s) && tw__clock_paused(s))
        futex_async((int32_t *)&s->wake_seq, FUTEX_WAIT, seq, NULL, NULL, 0);
}

static void *cursor_main(void *arg)
{
    tw_service *s = arg;
    /* Its wake-ups are what lateness is made of (threads.c). */
    tw__thread_hint_latency();
    /* With workers = 0 (or no memory for a batch) the cursor runs
     * callbacks: it passes the pause gate as a worker does (pause.c). */
    tw__gate_bind(&s->cursor_starting, &s->wake_seq, &s->cursor_quit);
    while (!quitting(s)) {
        if (tw__clock_paused(s)) {
            /* Seq_cst: read the word, then the state (tw_resume changes
             * the state, then bumps the word) and the wheel (a producer
             * under back-pressure counts its entries, then bumps it). */
            int32_t seq = atomic_load_explicit(&s->wake_seq, memory_order_seq_cst);
            /* No tick is due, but what armings and cancels leave behind
             * is compacted all the same (wheel.c, back-pressure). */
            if (tw__wheel_maintain_alone(s))
                continue;
            (void)tw__seg_settle(s); /* what it detached: no poll comes while paused */
            paused_wait(s, seq);
            continue;
        }
        uint64_t now = tw__clock_read(s);
        uint64_t target = current_tick(s, now);
        /* Relaxed: this thread is the only writer of cur. */
        uint64_t cur = atomic_load_explicit(&s->wheel.cur, memory_order_relaxed);
        if (target > cur) {
            /* Timers the producers logged (defer.c) go into the wheel
             * before a step can pass their ticks: first, the whole logs, if
             * one may be due by the target (a cursor late by
             * TW_DEFER_AHEAD ticks), else once the due timers are handed
             * over, which come first. The loop's drains may leave a log's
             * newest entries while they are far (defer.c, drain_log). */
            if (tw__defer_bound(s) <= target)
                drain_logs(s, false);
            target = tw__wheel_step_to(s, target); /* an early claim's tick on its own */
            if (tw__wheel_take_staged(s, target))
                tw__deliver(s); /* workers = 0: an early claim's, first (wheel.c) */
            tw__wheel_step(s, target);
            tw__deliver(s);
            drain_logs(s, true);
            continue;
        }
        drain_logs(s, true);
        /* Caught up, with an early claim that gave the cursor back for
         * the ticks just stepped (wheel.c): it goes on first. */
        uint64_t claim_tick;
        if (tw__wheel_claim_resumable(s, &claim_tick)) {
            tw__wheel_claim_early(s, claim_tick, tick_start(s, claim_tick));
            continue;
        }
        /* Likewise an early drain of a burst beyond level 0 (wheel.c). */
        if (tw__wheel_cascade_resume(s))
            continue;
        /* Caught up: compaction's turn (wheel.c). While it has more to do,
         * sleep one tick, not until the next occupied slot; past the
         * back-pressure line, where producers wait for it, not at all.
         * Seq_cst: the word read before the look, as in cursor_sleep: a
         * wake after it ends the sleep. */
        int32_t seq = atomic_load_explicit(&s->wake_seq, memory_order_seq_cst);
        if (tw__wheel_maintain(s)) {
            /* A burst still starts on time: steady cancel churn keeps
             * compaction going, tick after tick (a review, 2026-11-29). */
            uint64_t w = cur + 1;
            if (!start_burst(s, cur, &w) && !tw__wheel_pressed(s))
                tick_wait(s, seq, cur + 1);
        } else {
            cursor_sleep(s, cur, now);
        }
    }
    return NULL;
}

int tw__cursor_start(tw_service *s)
{
    atomic_init(&s->wake_tick, AWAKE);
    atomic_init(&s->wake_seq, 0);
    atomic_init(&s->cursor_quit, false);
    s->rec.on_grow = records_grew; /* before any producer: tw_create has not returned */
    s->early_lead = tw__early_lead_override; /* the cursor, started below, reads it */
    s->nap_entries = tw__nap_entries_override ? tw__nap_entries_override : TW_NAP_ENTRIES;
    s->nap_looked = tw__clock_read(s); /* the first look's span starts here */
    s->prefault_ns = 0;
    int rc = tw__thread_start(&s->cursor, cursor_main, s, "tw-cursor");
    if (rc != TW_OK)
        return rc;
    s->cursor_started = true;
    return TW_OK;
}

void tw__cursor_quit(tw_service *s)
{
    if (!s->cursor_started)
        return;
    /* Release: the cursor sees quit with everything before it. */
    atomic_store_explicit(&s->cursor_quit, true, memory_order_release);
    atomic_fetch_add_explicit(&s->wake_seq, 1, memory_order_seq_cst);
    futex_async((int32_t *)&s->wake_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    pthread_join(s->cursor, NULL);
    s->cursor_started = false;
}
