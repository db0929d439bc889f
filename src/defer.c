/*
 * defer.c: deferred placement. A MONOTONIC service's producer thread that
 * arms a timer due a while from now writes its entry into a log of its
 * own instead of placing it in the wheel; the cursor drains the logs and
 * places what is still current. Netty's HashedWheelTimer has the same
 * shape (a queue of new timeouts that its worker moves into the wheel
 * each tick).
 *
 * Why. A placement is most of an arming's cost: the aim, a slot header that
 * is a cache miss more often than not, the reserve and publish CASes, the
 * occupancy bit, the wake-up check (perf, WL1 P=1, 2026-11-28: 37% of the
 * producer's time). An append to a log the thread owns is two stores and
 * a release. The placement moves to the cursor's core, and a timer
 * cancelled before the cursor comes by (a retransmission timer, a request
 * timeout: the common case) is never placed at all: the cursor drops its
 * entry as it drops any stale one.
 *
 * Owns: one log per owned counter stripe (service.c: a thread owns a
 * stripe until it exits, the next owner takes it over with an acquire), made
 * on the owner's first deferred arming: TW_DEFER_LOG entries of (entry,
 * tick), a tail the owner writes, a head the cursor writes, and a bound
 * per page of TW_DEFER_PAGE positions, a lower bound on the ticks of the
 * entries in the page (owner only; a page's bound starts afresh when the
 * owner starts the page). The cursor's bound on a log is the least bound
 * of the pages that [head, tail) touches, so it rises as pages drain.
 *
 * Invariants:
 *   - only entries due more than TW_DEFER_AHEAD ticks after the cursor as
 *     the producer read it are logged. The cursor drains on every pass of
 *     its loop (cursor.c): after a step has handed its timers over, or
 *     before the step when a logged timer may be due by its target (a
 *     cursor that fell that far behind); and in an early claim's looks for
 *     earlier work (wheel.c). It looks ahead at most two ticks, so an
 *     entry is in the wheel before its tick's step unless its producer
 *     stalled for most of TW_DEFER_AHEAD ticks between its read of the
 *     cursor and its append; then it is placed at the next tick, late like
 *     a placement stalled as long, never early;
 *   - an entry is a placement as any other (its tag names the record's
 *     placement): cancelled, superseded or reused records make it stale,
 *     and the drain drops a stale entry without placing it;
 *   - the loop's drains leave a log's newest TW_DEFER_KEEP entries in it
 *     while the log's bound is more than 2 TW_DEFER_AHEAD ticks past the
 *     cursor (drain_log says why); every other drain takes the whole log.
 *     The cursor's plan (below) brings it back by TW_DEFER_AHEAD ticks
 *     before that bound, when the loop's drain takes the whole log;
 *   - the cursor does not sleep past a logged timer: it plans its wake-up
 *     no later than TW_DEFER_AHEAD ticks before the logs' bound
 *     (tw__defer_bound), and an append lowers that plan
 *     (tw__cursor_poke) when its timer is due before it; an append that
 *     fills half of the log (three quarters of one whose drains leave
 *     its newest entries) wakes it at once. The pairing is the occupancy
 *     bits' one (cursor.c, top): the producer publishes its tail, then
 *     (seq_cst fence) reads wake_tick; the cursor publishes wake_tick
 *     (seq_cst), then reads every tail (seq_cst) again. One sees the
 *     other. A thread that arms a trickle of timers thus wakes the cursor
 *     about once per TW_DEFER_AHEAD ticks' worth of them, not once each;
 *   - tw_next_due answers no later than a logged timer, and exactly: it
 *     reads each log's live entries between head and tail, and the drain
 *     advances the head (every DRAIN_GIVE entries, and at its end) only
 *     past what it has placed or dropped (release), so what a reader does
 *     not find in a log it finds in the wheel, which it reads next
 *     (tw__defer_next_due has the case of an entry overwritten under the
 *     reader);
 *   - memory: at most TW_OWNED_STRIPES logs of TW_DEFER_LOG entries a
 *     service (16 x 128 KiB), whatever the load, freed with the service. A
 *     full log is not waited for: the producer places the timer itself.
 *
 * Out of memory at the drain (a slot's next segment) keeps the entry in the
 * log for the next pass: the timer is late while memory is short, never
 * lost. The arming call had already answered TW_OK; a timer within
 * TW_DEFER_AHEAD ticks, or on a thread without a log, is placed by the
 * call and can still answer TW_ENOMEM.
 *
 * MANUAL services never defer: tw_advance's step and tw_next_due's exact
 * answer for an event loop stay as they were.
 */
#include "internal.h"

#include <stdlib.h>

/* The log of the calling thread's owned stripe, made on first use; NULL
 * when the thread owns no stripe or there is no memory for it. */
static tw_defer_log *my_log(tw_service *s)
{
    if (!tw__stripe_owned)
        return NULL;
    _Atomic(tw_defer_log *) *slot = &s->defer[tw__stripe_mine];
    /* Relaxed: only the stripe's owner stores it, and the owners of one
     * stripe are ordered by the stripe's hand-over (service.c). */
    tw_defer_log *d = atomic_load_explicit(slot, memory_order_relaxed);
    if (__builtin_expect(d != NULL, 1))
        return d;
    d = aligned_alloc(TW_CACHELINE, sizeof *d);
    if (!d)
        return NULL;
    /* The entries are written before the tail that publishes them: left
     * as they are, their pages cost memory only once the log reaches them. */
    atomic_init(&d->tail, 0);
    atomic_init(&d->head, 0);
    atomic_init(&d->keep, false);
    for (uint32_t i = 0; i < TW_DEFER_BOUNDS; i++)
        atomic_init(&d->bound[i], UINT64_MAX);
    /* Release: the drainer's acquire load sees the log initialised. */
    atomic_store_explicit(slot, d, memory_order_release);
    return d;
}

bool tw__defer_place(tw_service *s, uint64_t entry, uint64_t tick)
{
    if (s->cfg.clock != TW_CLOCK_MONOTONIC)
        return false;
    /* Relaxed: a stale cursor only makes the test stricter than it needs
     * to be; being late is what TW_DEFER_AHEAD's margin covers. */
    uint64_t cur = atomic_load_explicit(&s->wheel.cur, memory_order_relaxed);
    if (tick <= cur + TW_DEFER_AHEAD)
        return false;
    tw_defer_log *d = my_log(s);
    if (!d)
        return false;
    /* Relaxed: we are the tail's only writer. */
    uint32_t t = atomic_load_explicit(&d->tail, memory_order_relaxed);
    /* Acquire: the drainer is done with the entries below the head. */
    uint32_t h = atomic_load_explicit(&d->head, memory_order_acquire);
    if (t - h >= TW_DEFER_LOG)
        return false; /* full: place it ourselves */
    tw_defer_entry *e = &d->e[t % TW_DEFER_LOG];
    /* Release (both, the tick first): for the drainer, the tail publishes
     * them; these orders are for tw_next_due, which may read an entry as
     * we overwrite it (tw__defer_next_due). */
    atomic_store_explicit(&e->tick, tick, memory_order_release);
    atomic_store_explicit(&e->entry, entry, memory_order_release);
    /* Relaxed (load and store): we are its only writer, and the tail's
     * release below publishes it to the cursor. A page starts a new bound:
     * the one of the page TW_DEFER_BOUNDS back, drained long ago (a log
     * holds at most TW_DEFER_LOG entries, which span 5 pages). */
    _Atomic uint64_t *b = &d->bound[t / TW_DEFER_PAGE % TW_DEFER_BOUNDS];
    uint64_t min = t % TW_DEFER_PAGE == 0 ? UINT64_MAX
                                          : atomic_load_explicit(b, memory_order_relaxed);
    if (tick < min)
        atomic_store_explicit(b, tick, memory_order_relaxed);
    /* Release: the entry (and its page's bound) before the drainer's acquire. */
    atomic_store_explicit(&d->tail, t + 1, memory_order_release);
    /* Seq_cst fence: our tail before the poke's look at wake_tick, against
     * the cursor's wake_tick before its look at the tails (see the top). */
    atomic_thread_fence(memory_order_seq_cst);
    /* Relaxed: a hint for when to wake the cursor. A log whose drains
     * leave its newest TW_DEFER_KEEP entries wakes it that much later, so
     * that each drain still takes half a log. */
    bool keeps = atomic_load_explicit(&d->keep, memory_order_relaxed);
    if (t + 1 - h == TW_DEFER_LOG / 2 + (keeps ? TW_DEFER_KEEP : 0))
        tw__cursor_poke(s, cur + 1); /* filling up: drain it now */
    else
        tw__cursor_poke(s, tick - TW_DEFER_AHEAD);
    return true;
}

/* The record's entry v is still its current placement. */
static bool entry_current(tw_service *s, uint64_t v)
{
    tw_record *rec = tw__rec(&s->rec, (uint32_t)v);
    if (!rec)
        return false;
    /* Acquire: the record as its arming (or last lease release) left it,
     * and with it the seq tw__rec_tag reads. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    return tw__st(st) == TW_ST_PENDING && tw__entry_tag(v) == tw__rec_tag(rec, st);
}

/* How far ahead the drain fetches the records it will look at: each is
 * in the cache of the core that armed it. */
#define DRAIN_AHEAD 8

static void prefetch_entry_record(tw_service *s, const tw_defer_log *d, uint32_t k)
{
    /* Relaxed: published by the tail we acquired (k is below it). */
    uint64_t v = atomic_load_explicit(&((tw_defer_log *)d)->e[k % TW_DEFER_LOG].entry,
                                      memory_order_relaxed);
    tw_record *rec = tw__rec(&s->rec, (uint32_t)v);
    if (rec)
        __builtin_prefetch(rec, 0, 3);
}

/* A long drain gives its log's owner room as it goes, every DRAIN_GIVE
 * entries, not only at its end. Why: a drain of half a log took longer
 * than the owner needs to fill the other half (perf, WL1 P=1, 2026-11-28:
 * the cursor reads each record, in the owner's cache, 80-150 ns an entry,
 * while an append is about 40 ns), and a full log makes the owner place
 * its timers itself, beside the cursor, in the same slots. */
#define DRAIN_GIVE 512u

/* Release: the entries below k are placed or dropped, before the owner
 * reuses their room and before a tw_next_due that reads this head looks
 * at the wheel (as at the drain's end). */
static void give_room(tw_defer_log *d, uint32_t k)
{
    atomic_store_explicit(&d->head, k, memory_order_release);
}

void (*_Atomic tw__defer_gave_hook)(tw_service *s); /* tests (internal.h) */

/* Give room before the drain's end (DRAIN_GIVE). */
static void give_room_early(tw_service *s, tw_defer_log *d, uint32_t k)
{
    give_room(d, k);
    /* Acquire: the hook's code and data as the test set them. */
    void (*hook)(tw_service *) = atomic_load_explicit(&tw__defer_gave_hook,
                                                     memory_order_acquire);
    if (hook)
        hook(s);
}

/* Page numbers wrap with the positions (2^32 / TW_DEFER_PAGE of them); the
 * bound of page p is bound[p % TW_DEFER_BOUNDS] on both sides of the wrap,
 * since TW_DEFER_BOUNDS divides their count. */
#define PAGE_MASK (UINT32_MAX / TW_DEFER_PAGE)
_Static_assert((TW_DEFER_PAGE & (TW_DEFER_PAGE - 1)) == 0 &&
               (PAGE_MASK + 1u) % TW_DEFER_BOUNDS == 0,
               "page numbers wrap with the positions, bounds with the pages");

/* The least of the page bounds over positions [h, t) (UINT64_MAX: none).
 * The page number wraps as the positions do: a plain p++ from the head's
 * page, once the tail had passed 2^32 and the head not yet, ran 2^32
 * pages round before it met the tail's (the cursor stalled for seconds,
 * once every 2^32 logged armings of a thread), taking in the bounds of
 * pages drained long ago (tests/test_defer.c). */
static uint64_t pages_bound(tw_defer_log *d, uint32_t h, uint32_t t)
{
    uint64_t min = UINT64_MAX;
    if (h == t)
        return min;
    for (uint32_t p = h / TW_DEFER_PAGE;; p = (p + 1) & PAGE_MASK) {
        /* Relaxed: ordered after the tail that published it (our caller's
         * acquire or seq_cst load). A page's bound is reset only when the
         * owner starts the page TW_DEFER_BOUNDS later, past any tail it
         * can reach before we move the head. */
        uint64_t b = atomic_load_explicit(&d->bound[p % TW_DEFER_BOUNDS], memory_order_relaxed);
        min = b < min ? b : min;
        if (p == (t - 1) / TW_DEFER_PAGE)
            return min;
    }
}

/* A drain of at least this many entries decides whether the next one
 * keeps the newest (drain_log). */
#define KEEP_JUDGE 256u

/* Place the current entries of d; false if out of memory stopped it. With
 * `some`, and if the last drain of d found at least half of its entries
 * stale (d->keep), the newest TW_DEFER_KEEP entries stay in the log while
 * its bound is more than 2 TW_DEFER_AHEAD ticks past the cursor.
 *
 * Why: a timer that is cancelled (a retransmission, a request's timeout) is
 * most likely cancelled soon after its arming, and an entry the cursor
 * reaches after the cancel is dropped, not placed: WL1 (each timer
 * cancelled 1024 armings later) placed a quarter of its timers when the
 * cursor drained whole logs, and none with the newest 2048 left. Why only
 * when most entries turn out stale: when they stay live (WL2, WL3: none
 * cancelled so soon) the entries left are placed later all the same, and
 * the log, fuller after each drain, fills before the cursor comes back
 * more often, and its thread then places timers itself (WL2's schedule
 * 0.82x, farm-bench, 2026-11-28).
 *
 * Why it is safe: the cursor plans its wake-up no later than
 * TW_DEFER_AHEAD ticks before the log's bound (cursor.c), and its drain
 * then takes the whole log: the bound is within 2 TW_DEFER_AHEAD. */
static bool drain_log(tw_service *s, tw_defer_log *d, bool some)
{
    /* Relaxed: we are the head's only writer. */
    uint32_t h = atomic_load_explicit(&d->head, memory_order_relaxed);
    /* Acquire: the entries below the tail, as the owner wrote them. */
    uint32_t t = atomic_load_explicit(&d->tail, memory_order_acquire);
    /* Relaxed: ours (the owner's loads are hints). */
    if (some && atomic_load_explicit(&d->keep, memory_order_relaxed)) {
        /* Relaxed: cur is ours. */
        uint64_t cur = atomic_load_explicit(&s->wheel.cur, memory_order_relaxed);
        if (pages_bound(d, h, t) > cur + 2 * TW_DEFER_AHEAD)
            t = t - h > TW_DEFER_KEEP ? t - TW_DEFER_KEEP : h;
        if (t == h)
            return true;
    }
    bool ok = true;
    uint32_t k, stale = 0;
    for (k = h; k != t; k++) {
        if ((k - h) % DRAIN_GIVE == 0 && k != h)
            give_room_early(s, d, k);
        if (t - k > DRAIN_AHEAD)
            prefetch_entry_record(s, d, k + DRAIN_AHEAD);
        tw_defer_entry *e = &d->e[k % TW_DEFER_LOG];
        /* Relaxed: as above. */
        uint64_t v = atomic_load_explicit(&e->entry, memory_order_relaxed);
        if (!entry_current(s, v)) {
            stale++;
            continue; /* cancelled, fired, reused or moved: nothing to place */
        }
        if (tw__place(s, v, atomic_load_explicit(&e->tick, memory_order_relaxed)) != TW_OK) {
            ok = false; /* no memory: keep it and the rest for the next pass */
            break;
        }
    }
    if (k - h >= KEEP_JUDGE)
        atomic_store_explicit(&d->keep, 2 * stale >= k - h, memory_order_relaxed);
    give_room(d, k);
    return ok;
}

/* Stripe i's log, or NULL if its owners never logged a timer. */
static tw_defer_log *log_of(tw_service *s, uint32_t i)
{
    /* Acquire: the log as its owner initialised it. Seq_cst: the cursor
     * reads the logs after it publishes its plan (wake_tick, see the top),
     * and a log made by its owner's first logged arming must be among
     * them, as its tail is (a review: acquire left that to the seq_cst
     * loads that happen to come between; a plain load on x86). */
    return atomic_load_explicit(&s->defer[i], memory_order_seq_cst);
}

/* The least of f over the logs there are (UINT64_MAX: none). */
static uint64_t least_over_logs(tw_service *s, uint64_t (*f)(tw_service *, tw_defer_log *))
{
    uint64_t best = UINT64_MAX;
    for (uint32_t i = 0; i < TW_OWNED_STRIPES; i++) {
        tw_defer_log *d = log_of(s, i);
        uint64_t v = d ? f(s, d) : UINT64_MAX;
        best = v < best ? v : best;
    }
    return best;
}

void (*_Atomic tw__defer_drained_hook)(tw_service *s); /* tests (internal.h) */

bool tw__defer_drain(tw_service *s, bool some)
{
    bool ok = true;
    for (uint32_t i = 0; i < TW_OWNED_STRIPES; i++) {
        tw_defer_log *d = log_of(s, i);
        if (d && !drain_log(s, d, some))
            ok = false;
    }
    /* Acquire: the hook's code and data as the test set them. */
    void (*hook)(tw_service *) = atomic_load_explicit(&tw__defer_drained_hook,
                                                     memory_order_acquire);
    if (some && hook)
        hook(s);
    return ok;
}

/* The cursor's bound on log d: the least page bound of its entries. */
static uint64_t log_bound(tw_service *s, tw_defer_log *d)
{
    (void)s;
    /* Relaxed: the head is the cursor's own. Seq_cst: the tail, the
     * cursor's look after it published its plan (see the top). */
    uint32_t h = atomic_load_explicit(&d->head, memory_order_relaxed);
    uint32_t t = atomic_load_explicit(&d->tail, memory_order_seq_cst);
    return pages_bound(d, h, t);
}

uint64_t tw__defer_bound(tw_service *s)
{
    return least_over_logs(s, log_bound);
}

/* The earliest tick of a live entry in log d, or UINT64_MAX. An entry may
 * be overwritten while we read it, once the drain has placed it; the owner
 * writes the tick, then the entry (release both), and we read the entry,
 * then the tick (acquire both). Reading a newer entry, or a newer tick,
 * means the one it replaced was placed before, and our caller's look at
 * the wheel, after ours, sees it; a tick we read is always a logged
 * timer's, at or after the entry's own when the entry is the newer one. So
 * the answer is never later than a logged timer's, and exact without such
 * a race. */
static uint64_t earliest_live(tw_service *s, tw_defer_log *d)
{
    /* Acquire: the placements below the head (see above). */
    uint32_t h = atomic_load_explicit(&d->head, memory_order_acquire);
    /* Acquire: the entries below the tail. */
    uint32_t t = atomic_load_explicit(&d->tail, memory_order_acquire);
    if (t - h > TW_DEFER_LOG)
        h = t - TW_DEFER_LOG; /* the head moved on between our two loads */
    uint64_t best = UINT64_MAX;
    for (uint32_t k = h; k != t; k++) {
        tw_defer_entry *e = &d->e[k % TW_DEFER_LOG];
        /* Acquire, both: see above. */
        uint64_t v = atomic_load_explicit(&e->entry, memory_order_acquire);
        uint64_t tick = atomic_load_explicit(&e->tick, memory_order_acquire);
        if (tick < best && entry_current(s, v))
            best = tick;
    }
    return best;
}

uint64_t tw__defer_next_due(tw_service *s)
{
    return least_over_logs(s, earliest_live);
}

void tw__defer_fini(tw_service *s)
{
    for (uint32_t i = 0; i < TW_OWNED_STRIPES; i++) {
        /* Relaxed: every thread that used the service is done with it. */
        free(atomic_load_explicit(&s->defer[i], memory_order_relaxed));
        atomic_store_explicit(&s->defer[i], NULL, memory_order_relaxed);
    }
}
