/*
 * wheel.c: the hierarchical timing wheel (after Varghese and Lauck): levels,
 * where a timer is placed, the cursor's step, compaction and the producers'
 * back-pressure on it (which keep the entries bounded by the pending
 * timers whoever drains), the idle scan, and the invariant checker.
 *
 * Levels. Every level has S = 2^b slots (wheel_slots) and uses the same
 * lock-free slots (slots.c). Level 0's slots are one tick wide; each level
 * above is 2^g times coarser, g = min(ceil(b / 2), 4) (the step), so level
 * l's slots are 2^(g*l) ticks wide and the level spans 2^(g*l + b) ticks.
 * Slot i of level l collects for the epochs e with e = i * 2^(g*l)
 * (mod 2^(g*l + b)): level 0 slot i drains at tick e itself, a higher slot
 * at the first tick of its span, where its timers cascade down. Levels are
 * added until the wheel spans 2^42 ticks:
 *
 *   level  granularity (ticks)  spans (ticks)   with 1 ms tick, S = 4096
 *   0      1                    2^12            1 ms    .. 4.1 s
 *   1      2^4                  2^16            4.1 s   .. 65 s
 *   2      2^8                  2^20            65 s    .. 17 min
 *   3      2^12                 2^24            17 min  .. 4.7 h
 *   ...    (9 levels in all)
 *   8      2^32                 2^44            .. 557 years
 *
 * Why S = 4096 by default: delays up to 4 s (retransmits, pings, most
 * request timeouts) never cascade. Why a step g smaller than b: a cascade
 * re-places, in one cursor step, every timer of the slot it drains, and the
 * ticks due meanwhile wait for it. With g = b (the classic geometry), a
 * level-1 slot held 2^b ticks' worth of timers: at a million timers a
 * second and a 100 us tick (level 0 spans 0.4 s) each level-1 drain moved
 * ~200,000 timers and made everything due meanwhile ~20 ms late (measured,
 * WL3 p99: 18 ms with g = b; 0.9-1.0 ms with g = 6, 0.6 ms with g = 4;
 * a g = 4 wheel cost ~10% of WL1's churn rate). With g = 4 a drain
 * moves at most 16 ticks' worth; a long timer pays a few more hops (one per
 * 4 bits of its delay, each a single placement). Adjacent levels overlap
 * (level l+1's slots nearest the cursor are never used): placement picks
 * the lowest level that spans the distance. Every slot exists once per
 * lane (one lane per CPU, up to 4: see my_lane). The cost is memory at
 * creation: lanes * 9 levels * 4096 slots * 64 bytes of counters (2.3 MiB
 * a lane), plus the fixed arrays (as many slots * capacity * 8 bytes, zero
 * pages until used).
 *
 * The longest delay is 2^41 - 1 ticks (TW_HORIZON_TICKS), at least the 2^40
 * the contract asks for; TW_ERANGE beyond.
 *
 * Placement (any thread). With the cursor at c (every tick <= c is being or
 * has been processed) a timer due at tick k goes for t = max(k, c + 1), at
 * distance d = t - c >= 1, to the lowest level l that spans d (level_for),
 * in the slot whose epoch e = t rounded down to a multiple of 2^(g*l).
 * Then c < e <= t (for l >= 1, d >= 2^(g*(l-1) + b) >= 2^(g*l) as g <= b)
 * and e - c < 2^(g*l + b): e is that slot's next epoch, drained no later
 * than t (never late) and the drain re-places what is not yet due (never
 * early: the deadline is checked against the record, not inferred from the
 * slot). Entries are hints; the record's state word and deadline are the
 * truth, so a stale or duplicate entry costs a skip, never a wrong fire.
 *
 * The step (the cursor, one thread at a time). Processing the ticks in
 * (c, T] -- one tick when on time, many when catching up or when the
 * MANUAL clock jumps -- is:
 *   1. publish cur = T, so producers from now on aim past T;
 *   2. drain every slot whose epoch lies in (c, T] (at most S per level,
 *      however long the range) and both late slots, each reopened for its
 *      next epoch after T;
 *   3. for each entry taken: skip it if the record moved on (other
 *      generation, not PENDING); claim it (PENDING -> FIRING, one CAS that
 *      races cancel and reschedule) if its deadline tick <= T; otherwise
 *      place it again relative to T (the cascade, and the re-placement of a
 *      timer whose deadline was pushed later);
 *   4. order the claimed timers earliest first: by deadline with the
 *      MANUAL clock, by sixteenths of a tick otherwise (due_order_key); a
 *      list already in order (the common case) is not sorted.
 * No callback runs inside the step: the claimed list is run afterwards
 * (workers.c), so callbacks may call anything.
 *
 * A producer that finds its slot closed (the step is draining it right
 * now) does not wait: it publishes into one of two late slots, which the
 * next step drains like any other. The two are drained one after the
 * other, so at least one is always open.
 *
 * Occupancy: one bit per slot, set by a producer once it has reserved,
 * cleared by the step just before it closes the slot. The cursor thread
 * uses the bits to sleep until the next occupied epoch (tickless idle).
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#define LATE_SLOTS 2
#define TW_EARLY_MIN 16384 /* entries in a slot worth claiming early (early claims) */
#define TW_ORDER_SPAN 4096 /* widest key range order_due sorts by counting */

/* log2 of level l's granularity: level l slots are 2^(step * l) ticks wide. */
static uint32_t level_shift(const tw_wheel *w, uint32_t l) { return w->step * l; }

/* The lowest level whose span reaches distance d >= 1: level l spans
 * 2^(step * l + bits) ticks. */
static uint32_t level_for(const tw_wheel *w, uint64_t d)
{
    return w->level_of_log2[63u - (uint32_t)__builtin_clzll(d)];
}

/* level_for's table: a division by the run-time step on every placement
 * cost more than the rest of the level choice. */
static void init_level_table(tw_wheel *w)
{
    for (uint32_t lg = 0; lg < 64; lg++)
        w->level_of_log2[lg] = (uint8_t)(lg < w->bits ? 0 : (lg - w->bits) / w->step + 1);
}

/* Cascade granularity: at most 2^TW_LEVEL_STEP_MAX ticks' worth of timers
 * move down in one drain (see the top comment). */
#define TW_LEVEL_STEP_MAX 4

static uint32_t step_for(uint32_t bits)
{
    uint32_t half = (bits + 1) / 2;
    return half < TW_LEVEL_STEP_MAX ? half : TW_LEVEL_STEP_MAX;
}

/* The first epoch of slot (l, i) strictly after tick x. */
static uint64_t next_epoch_after(const tw_wheel *w, uint32_t l, uint32_t i, uint64_t x)
{
    uint32_t sh = level_shift(w, l);
    uint64_t turn = 1ull << (sh + w->bits);
    uint64_t e = (x & ~(turn - 1)) + ((uint64_t)i << sh);
    return e > x ? e : e + turn;
}

/* Slot i of level l in one lane. Lanes are whole wheels of counters apart,
 * so no two lanes of a slot share a cache line or its prefetch pair. */
static tw_slot *slot_at(const tw_wheel *w, uint32_t l, uint32_t i, uint32_t lane)
{
    return &w->slot[((size_t)lane * w->levels + l) * w->nslots + i];
}

static size_t slots_total(const tw_wheel *w)
{
    return (size_t)w->lanes * w->levels * w->nslots;
}

static size_t slot_bytes(const tw_wheel *w)
{
    return slots_total(w) * sizeof(tw_slot);
}

/* Lanes: one per CPU, up to TW_MAX_LANES. Every placement is a CAS on its
 * slot's counter and a write to the slot's next entry; when producers on
 * two cores aim at the same slots (random delays, a few thousand live
 * slots) each of those lines crosses between the cores (~200 ns here,
 * bench/floor.c) on most placements. With a lane per CPU, producers on one
 * CPU never run at once, so a lane's lines stay in that core's cache; the
 * drain takes every lane of a slot. Segments come from malloc (or the
 * cache of freed ones, segments.c), whose
 * per-thread arenas keep two producers' segments apart (with one shared
 * bump arena, both cores faulted in and wrote the same huge pages and
 * bumped one counter: WL1 P=2 20-21M -> 23-31M ops/s with one per lane). */
uint32_t tw__lanes_override; /* tests only (test_memory.c): 0 = one per CPU */

static uint32_t lanes_for_machine(void)
{
    if (tw__lanes_override)
        return tw__lanes_override > TW_MAX_LANES ? TW_MAX_LANES : tw__lanes_override;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > TW_MAX_LANES ? TW_MAX_LANES : (uint32_t)n;
}

static uint32_t my_lane(const tw_wheel *w)
{
    if (w->lanes == 1)
        return 0;
    int cpu = sched_getcpu(); /* a hint: a migration costs sharing, not safety */
    return cpu < 0 ? 0 : (uint32_t)cpu % w->lanes;
}

int tw__wheel_init(tw_wheel *w, uint32_t nslots, uint32_t cap)
{
    memset(w, 0, sizeof *w);
    w->bits = (uint32_t)__builtin_ctz(nslots);
    w->step = step_for(w->bits);
    w->nslots = nslots;
    /* Enough levels that the top one spans 2^TW_WHEEL_SPAN_BITS ticks. */
    w->levels = 1 + (TW_WHEEL_SPAN_BITS - w->bits + w->step - 1) / w->step;
    init_level_table(w);
    w->cap = cap;
    w->occ_words = (nslots + 63) / 64;
    w->lanes = lanes_for_machine();
    /* A slot of TW_EARLY_MIN has a lane of ceil(TW_EARLY_MIN / lanes):
     * big_at is at most that, a power of two (bursts). */
    w->big_at = 1u << (31 - __builtin_clz((TW_EARLY_MIN + w->lanes - 1) / w->lanes));
    w->segs.max_bytes = tw__retire_max_override ? tw__retire_max_override
                                                : TW_RETIRE_MAX_BYTES;
    w->segs.keep_min = tw__seg_keep_min_override ? tw__seg_keep_min_override
                                                 : TW_SEG_KEEP_MIN;
    w->trim_period = tw__trim_period_override ? tw__trim_period_override : TW_TRIM_PERIOD_NS;
    w->grow_ns_per_kib = tw__grow_ns_per_kib_override ? tw__grow_ns_per_kib_override
                                                      : TW_GROW_NS_PER_KIB;
    atomic_init(&w->segs.phase, 0);
    tw__seg_cache_init(&w->segs);
    /* Zero pages: a slot's header is all zeros until it is first used
     * (epoch 0: its first round, slots.c), so an idle wheel costs no memory
     * for its slots, however many. */
    void *mem = mmap(NULL, slot_bytes(w), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    w->slot = mem == MAP_FAILED ? NULL : mem;
    w->occ = calloc((size_t)w->levels * w->occ_words, sizeof *w->occ);
    w->grew = calloc((size_t)w->levels * w->occ_words, sizeof *w->grew);
    w->barren = calloc((size_t)w->levels * w->occ_words, sizeof *w->barren);
    w->big = calloc((size_t)w->levels * w->occ_words, sizeof *w->big);
    w->strays = calloc((size_t)w->levels * w->occ_words + 1, sizeof *w->strays);
    w->counts = malloc(TW_ORDER_SPAN * sizeof *w->counts);
    if (!w->slot || !w->occ || !w->grew || !w->barren || !w->big || !w->strays ||
        !w->counts) {
        tw__wheel_fini(w);
        return TW_ENOMEM;
    }
    for (int j = 0; j < LATE_SLOTS; j++)
        tw__slot_init(&w->late[j], 0);
    atomic_init(&w->cur, 0);
    atomic_init(&w->step_seq, 0);
    atomic_init(&w->step_from, 1);
    atomic_init(&w->claims, 0);
    atomic_init(&w->claim_floor, UINT64_MAX);
    w->due_from = 1;
    /* Compaction's samples (worth_compacting): never 0 (xorshift), and
     * not the same from one service or run to the next. */
    w->sample_seed = (tw__clock_monotonic() ^ (uint64_t)(uintptr_t)w) | 1;
    w->fixed_capacity = (uint64_t)slots_total(w) * cap;
    /* Compaction's slack beyond twice the pending timers (see there): two
     * entries a slot (or the fixed capacity, if smaller) make a pass over
     * every slot pay for itself. */
    w->compact_slack = (uint64_t)slots_total(w) * 2 < w->fixed_capacity
                           ? (uint64_t)slots_total(w) * 2 : w->fixed_capacity;
    return TW_OK;
}

void tw__wheel_fini(tw_wheel *w)
{
    /* The wheel lives in its service, whose stripes count segment memory. */
    tw_service *s = (tw_service *)(void *)((char *)w - offsetof(tw_service, wheel));
    tw__segs_fini(s);
    if (w->slot) {
        for (size_t i = 0; i < slots_total(w); i++)
            tw__slot_fini(s, &w->slot[i], w->cap);
    }
    for (int j = 0; j < LATE_SLOTS; j++)
        tw__slot_fini(s, &w->late[j], w->cap);
    if (w->slot)
        munmap(w->slot, slot_bytes(w));
    free((void *)w->occ);
    free((void *)w->grew);
    free(w->barren);
    free((void *)w->big);
    free((void *)w->strays);
    tw__vec_free(&w->taken);
    tw__vec_free(&w->due);
    tw__vec_free(&w->staged);
    tw__vec_free(&w->stash);
    tw__vec_free(&w->cascade);
    tw__vec_free(&w->spare);
    free(w->counts);
    w->counts = NULL;
    w->slot = NULL;
    w->occ = NULL;
    w->grew = NULL;
    w->barren = NULL;
    w->big = NULL;
    w->strays = NULL;
}

/* ---- placement (any thread) ---------------------------------------------- */

static void occupancy_mark(tw_wheel *w, uint32_t l, uint32_t i)
{
    _Atomic uint64_t *word = &w->occ[(size_t)l * w->occ_words + i / 64];
    uint64_t bit = 1ull << (i % 64);
    /* Seq_cst load and RMW: with the cursor's seq_cst store of wake_tick
     * and its seq_cst re-scan of these bits, either the cursor sees our bit
     * or we see its planned wake-up (and wake it if we are earlier). A bit
     * already set stays set until the cursor drains this slot, which it has
     * not done for our epoch. */
    if (!(atomic_load_explicit(word, memory_order_seq_cst) & bit))
        atomic_fetch_or_explicit(word, bit, memory_order_seq_cst);
}

/* A lane of slot (l, i) reached big_at reservations in this round, or
 * twice as many, or four times...: the slot may hold a burst (bursts,
 * below). Exactly one reservation a round and lane takes each such
 * position, so this is rare, and the cursor is told at once: it plans by
 * these marks, busy or asleep, and a burst's growth moves its plan (the
 * lead grows with it) at each doubling. Seq_cst RMW, then the
 * poke's seq_cst look at wake_tick: against the cursor's seq_cst store of
 * its plan, the heavy fence and its second look at the marks
 * (cursor.c, cursor_sleep), one of the two sees the other. */
static void big_mark(tw_service *s, uint32_t l, uint32_t i)
{
    tw_wheel *w = &s->wheel;
    atomic_fetch_or_explicit(&w->big[(size_t)l * w->occ_words + i / 64], 1ull << (i % 64),
                             memory_order_seq_cst);
    /* Relaxed: a hint for the wake-up; cur + 1 is before any plan. */
    tw__cursor_poke(s, atomic_load_explicit(&w->cur, memory_order_relaxed) + 1);
}

/* A slot whose reservations reach a new segment beyond its first
 * TW_GROW_AT overflow entries is marked for compaction (wheel.c,
 * compaction): a slot gives its segments back only when it is emptied
 * (segments.c), so if stale entries were allowed to pile up in a slot an
 * hour away until its drain or the round robin came by, it would hold
 * their memory all that time. */
#define TW_GROW_AT 64

static void grew_mark(tw_wheel *w, uint32_t l, uint32_t i)
{
    _Atomic uint64_t *word = &w->grew[(size_t)l * w->occ_words + i / 64];
    /* Relaxed: a hint for the drainer; a lost one costs only memory. */
    if (!(atomic_load_explicit(word, memory_order_relaxed) & (1ull << (i % 64))))
        atomic_fetch_or_explicit(word, 1ull << (i % 64), memory_order_relaxed);
}

/* Slot (l, i) may hold overflow segments that no drain is coming for
 * (wheel.c, strays, by the trim): mark it, or only the summary word for a
 * late slot (l == UINT32_MAX). Release, both: the trim's acquire exchange
 * of either word then sees our install. An RMW every time, without a look
 * first: marks are rare, and a mark skipped because the bit was set could
 * be cleared by a look that does not see our install. The bit comes
 * before the summary, so a look that misses the bit leaves the summary
 * set for the next one. */
static void stray_mark(tw_wheel *w, uint32_t l, uint32_t i)
{
    size_t words = (size_t)w->levels * w->occ_words;
    if (l != UINT32_MAX)
        atomic_fetch_or_explicit(&w->strays[(size_t)l * w->occ_words + i / 64],
                                 1ull << (i % 64), memory_order_release);
    atomic_store_explicit(&w->strays[words], 1, memory_order_release);
}

/* After a reservation attempt through g in slot (l, i): if it installed
 * an overflow segment or table and then lost its reservation (the slot
 * closed, or reopened for a later epoch, or its round ran away), nothing
 * of its own brings a drain, so the trim is to look at the slot (strays
 * below). A reservation that succeeded needs no mark: the slot holds a
 * reserved position from the install on, in this round or a later one,
 * so a drain or a compaction comes, detaches the segments and marks the
 * slot itself if it must keep them (kept_mark). Marking every install
 * made an idle service's cursor wake once a trim period after arming a
 * batch of far timers (WL4; a wake-up within a second of arming 10,000
 * far timers in 4 runs of 15 before, 0 of 15 after, 2026-11-25). */
static void stray_mark_if_lost(tw_wheel *w, tw_seg_guard *g, int rc, uint32_t l, uint32_t i)
{
    if (!g->installed)
        return;
    g->installed = false;
    if (rc != TW_SLOT_OK)
        stray_mark(w, l, i);
}

/* After a drain reopened slot (l, i) (l == UINT32_MAX: a late slot): if it
 * still holds segments past the budget, the trim is to look at it (see
 * strays below). Within the budget a slot keeps them on purpose. */
static void kept_mark(tw_wheel *w, tw_slot *sl, uint32_t l, uint32_t i)
{
    if (!tw__seg_within_budget(&w->segs) && tw__slot_holds_overflow(sl))
        stray_mark(w, l, i);
}

/* Every reserved position is counted on the producer's own stripe, so the
 * drainer can tell how many entries the wheel holds without walking it
 * (compaction, below). Every 2^16 reservations of a stripe wake the cursor,
 * so that a service whose cursor sleeps through a long idle spell still
 * looks at them. */
static void count_reserved(tw_service *s)
{
    tw_stripe *st = tw__stripe(s);
    tw__count_add(&st->reserved, 1);
    /* Relaxed: a hint for when to look. */
    if ((atomic_load_explicit(&st->reserved, memory_order_relaxed) & 0xffff) == 0)
        tw__cursor_poke(s, atomic_load_explicit(&s->wheel.cur, memory_order_relaxed) + 1);
}

static int place_late(tw_service *s, tw_seg_guard *g, uint64_t value)
{
    tw_wheel *w = &s->wheel;
    for (uint32_t j = 0;; j ^= 1) {
        uint32_t pos;
        uint64_t round;
        _Atomic uint64_t *entry;
        int rc = tw__slot_reserve_any(&w->late[j], g, w->cap, &pos, &entry, &round);
        stray_mark_if_lost(w, g, rc, UINT32_MAX, 0);
        if (rc == TW_SLOT_CLOSED_NOW)
            continue; /* the step is draining it; the other one is open */
        if (rc == TW_SLOT_RAN_AWAY) {
            count_reserved(s);
            tw__count_rare(s, TW_RARE_RAN_AWAY);
            return 1; /* left unpublished; the drain tombstones it */
        }
        if (rc != TW_SLOT_OK)
            return rc;
        count_reserved(s);
        if (tw__slot_publish(entry, w->cap, pos, round, value)) {
            /* Seq_cst fence: our reservation (an acq_rel CAS) before the
             * poke's seq_cst look at wake_tick, against the cursor's
             * seq_cst store of wake_tick before its look at the late
             * slots: one of the two sees the other (store buffering). */
            atomic_thread_fence(memory_order_seq_cst);
            /* Relaxed: a hint for the wake-up only. */
            tw__cursor_poke(s, atomic_load_explicit(&w->cur, memory_order_relaxed) + 1);
            return TW_OK;
        }
        tw__count_rare(s, TW_RARE_TOMBSTONED);
        return 1; /* tombstoned: place again from the top */
    }
}

/* One attempt: 0 placed, 1 try again, < 0 error. The slot may be open for
 * an older round of its own than the epoch we aim at (the step is still
 * on its way there): that round drains sooner, which is never late, and
 * its drain places the timer again. */
/* Where a timer due at tick k goes with the cursor at c (see the top):
 * level l, slot i, epoch e; t is the tick it is due at, max(k, c + 1). */
typedef struct aim {
    uint64_t t, e;
    uint32_t l, i;
} aim;

static void aim_at(const tw_wheel *w, uint64_t k, uint64_t c, aim *a)
{
    uint64_t t = k > c ? k : c + 1;
    a->t = t;
    uint32_t l = level_for(w, t - c);
    if (l >= w->levels) {
        l = w->levels - 1; /* beyond the span: the top level's drain re-places */
        t = c + (1ull << (level_shift(w, l) + w->bits)) - 1;
    }
    uint32_t sh = level_shift(w, l);
    a->l = l;
    a->e = (t >> sh) << sh;
    a->i = (uint32_t)((a->e >> sh) & (w->nslots - 1));
}

/* `growth`: a reservation that reaches a new segment marks its slot as
 * grown (grew_mark); compaction's own placements of the live entries it
 * took out do so only after a compaction that took something out
 * (compact_one). */
static int place_once(tw_service *s, tw_seg_guard *g, uint64_t value, uint64_t k,
                      uint64_t *due, bool growth)
{
    tw_wheel *w = &s->wheel;
    /* Acquire: pairs with the step's release store of cur. */
    aim a;
    aim_at(w, k, atomic_load_explicit(&w->cur, memory_order_acquire), &a);
    *due = a.t;
    uint32_t l = a.l, i = a.i;
    uint64_t e = a.e;
    uint32_t lane = my_lane(w);
    tw_slot *sl = slot_at(w, l, i, lane);
    uint32_t pos;
    uint64_t round, epoch;
    _Atomic uint64_t *entry;
    int rc = tw__slot_reserve(sl, g, w->cap, e, &pos, &entry, &round, &epoch);
    stray_mark_if_lost(w, g, rc, l, i);
    if (rc == TW_SLOT_NEWER) {
        tw__count_rare(s, TW_RARE_NEWER);
        return 1; /* the cursor moved past our epoch: recompute */
    }
    if (rc == TW_SLOT_CLOSED_NOW) {
        tw__count_rare(s, TW_RARE_LATE_SLOT);
        return place_late(s, g, value);
    }
    if (rc != TW_SLOT_OK && rc != TW_SLOT_RAN_AWAY)
        return rc;
    count_reserved(s);
    occupancy_mark(w, l, i); /* reserved: the drain must come, published or not */
    if (pos + 1 >= w->big_at && ((pos + 1) & pos) == 0)
        big_mark(s, l, i); /* big_at, 2 big_at, 4 big_at ... reservations in our lane */
    if (growth && pos >= w->cap + TW_GROW_AT && tw__slot_segment_start(w->cap, pos))
        grew_mark(w, l, i);
    if (rc == TW_SLOT_RAN_AWAY) {
        tw__count_rare(s, TW_RARE_RAN_AWAY);
        return 1; /* left unpublished (the drain tombstones it): place again */
    }
    if (!tw__slot_publish(entry, w->cap, pos, round, value)) {
        tw__count_rare(s, TW_RARE_TOMBSTONED);
        return 1;
    }
    tw__cursor_poke(s, epoch);
    return TW_OK;
}

static int place_entry(tw_service *s, uint64_t entry, uint64_t tick, bool growth)
{
    /* Entered by the first reservation past a fixed array, left once the
     * timer is placed (segments.c): the retries in between stay inside. */
    tw_seg_guard g = TW_SEG_GUARD(s);
    for (;;) {
        uint64_t due;
        int rc = place_once(s, &g, entry, tick, &due, growth);
        if (rc <= 0) {
            tw__seg_done(&g);
            if (rc == TW_OK && s->cfg.clock == TW_CLOCK_MANUAL)
                tw__wake_if_sooner(s, due); /* embed.c: the event loop's wake-up */
            return rc;
        }
    }
}

int tw__place(tw_service *s, uint64_t entry, uint64_t tick)
{
    return place_entry(s, entry, tick, true);
}

/* Internal placements (cascade, re-arm, reschedule) cannot hand an error
 * to anybody without losing a timer; out of memory there is fatal. */
static void place_entry_or_die(tw_service *s, uint64_t entry, uint64_t tick, bool growth)
{
    if (place_entry(s, entry, tick, growth) != TW_OK) {
        fputs("timerwheel: out of memory placing a timer\n", stderr);
        abort();
    }
}

static void place_or_die(tw_service *s, uint64_t entry, uint64_t tick)
{
    place_entry_or_die(s, entry, tick, true);
}

void tw__place_internal(tw_service *s, uint64_t entry, uint64_t tick)
{
    place_or_die(s, entry, tick);
}

/* ---- the step (the drainer only) ------------------------------------------ */

static void occupancy_clear(tw_wheel *w, uint32_t l, uint32_t i)
{
    /* Relaxed is enough here: clearing before the close means a producer of
     * the epoch being drained that sets the bit afterwards leaves a spurious
     * bit (one needless wake-up), and producers of the next epoch reserve
     * after the reopen (release), so their bits come after this clear. The
     * burst mark likewise (a spurious one costs a look at the slot's count). */
    size_t k = (size_t)l * w->occ_words + i / 64;
    atomic_fetch_and_explicit(&w->occ[k], ~(1ull << (i % 64)), memory_order_relaxed);
    atomic_fetch_and_explicit(&w->big[k], ~(1ull << (i % 64)), memory_order_relaxed);
    w->barren[k] &= ~(1ull << (i % 64)); /* a new round (compact_one) */
}

/* Whether slot i of level l (any lane) may hold entries: its occupancy
 * bit, set by every producer that reserved in it and cleared only before
 * a drain or compaction empties it. Walks over many slots look at a
 * header only when its bit is set. The slot array starts as untouched
 * anonymous memory, and a kernel may back even a read of such a page with
 * a page of its own: on the AMD guest's Linux 6.18 (2026-11-27) reading
 * 64 MiB never written made all of it resident, and compaction's round
 * robin, which read every header's word, made the whole slot array
 * resident in seconds or minutes (4.6 MiB with the defaults; the soak's
 * RSS check failed on it). A bit set late only leaves a slot for the next
 * round: these walks are a statistic and compaction, never a due time. */
static bool slot_marked(const tw_wheel *w, uint32_t l, uint32_t i)
{
    /* Relaxed: a hint, as above. */
    uint64_t bits = atomic_load_explicit(&w->occ[(size_t)l * w->occ_words + i / 64],
                                         memory_order_relaxed);
    return (bits >> (i % 64)) & 1;
}

/* The level and slot of w->slot[k] (any lane). */
static bool slot_k_marked(const tw_wheel *w, size_t k)
{
    size_t per_lane = (size_t)w->levels * w->nslots;
    size_t in_lane = k % per_lane;
    return slot_marked(w, (uint32_t)(in_lane / w->nslots), (uint32_t)(in_lane % w->nslots));
}

/* Placements beyond the fixed arrays are counted here, by the drainer, from
 * each slot's final count, not by an atomic add on every placement;
 * tw__wheel_overflowed adds what the slots hold now. The drainer also
 * counts every position it takes out (compaction's bookkeeping). n is the
 * sum over a slot's lanes. */
static void count_removed(tw_wheel *w, uint32_t n)
{
    /* Relaxed (both): only the drainer writes it; producers under
     * back-pressure read it as a hint (tw__wheel_pressure). */
    atomic_store_explicit(&w->removed,
                          atomic_load_explicit(&w->removed, memory_order_relaxed) + n,
                          memory_order_relaxed);
    if (n > w->cap) {
        /* Relaxed: a statistic; only the drainer writes it. */
        atomic_store_explicit(&w->overflowed,
                              atomic_load_explicit(&w->overflowed, memory_order_relaxed) +
                                  (n - w->cap),
                              memory_order_relaxed);
    }
}

static void take_entries(tw_service *s, uint64_t T);
static void cascade_pieces(tw_service *s, bool yield);
static void hand_over_staged(tw_service *s, uint64_t T);
static void claim_stash(tw_service *s, uint64_t T, uint64_t c);

/* Drain slot (l, i), every lane, and claim or re-place what it held: a
 * chunk of TW_DRAIN_CHUNK positions at a time, so that a slot of a
 * million timers hands its first ones to the workers (take_entries)
 * before it has taken the rest (issue 14: the first callback of a
 * million-timer tick started 45-100 ms late when the whole slot was taken
 * first). The slot stays closed until every position was taken; a
 * producer that meets it meanwhile goes to a late slot, as in any drain. */
#define TW_DRAIN_CHUNK 4096

static void drain_slot(tw_service *s, uint32_t l, uint32_t i, uint64_t T)
{
    tw_wheel *w = &s->wheel;
    uint64_t next = next_epoch_after(w, l, i, T);
    occupancy_clear(w, l, i);
    for (uint32_t lane = 0; lane < w->lanes; lane++) {
        tw_slot *sl = slot_at(w, l, i, lane);
        uint32_t n = tw__slot_close(sl);
        for (uint32_t p = 0; p < n; p += TW_DRAIN_CHUNK) {
            tw__slot_take(sl, w->cap, p, n - p < TW_DRAIN_CHUNK ? n : p + TW_DRAIN_CHUNK,
                          &w->taken);
            take_entries(s, T);
        }
        tw__slot_detach(sl, w->cap, &w->segs);
        tw__slot_reopen(sl, next);
        kept_mark(w, sl, l, i);
        count_removed(w, n);
    }
}

static uint64_t slot_overflow_now(const tw_wheel *w, tw_slot *sl)
{
    /* Relaxed: a statistic. */
    uint64_t n = atomic_load_explicit(&sl->word, memory_order_relaxed) & TW_SLOT_COUNT_MASK;
    return n > w->cap ? n - w->cap : 0;
}

uint64_t tw__wheel_overflowed(tw_service *s)
{
    tw_wheel *w = &s->wheel;
    /* Relaxed: a statistic, summed while producers may be placing. */
    uint64_t sum = atomic_load_explicit(&w->overflowed, memory_order_relaxed);
    for (size_t i = 0; i < slots_total(w); i++) {
        if (slot_k_marked(w, i)) /* see slot_marked: unmarked headers stay untouched */
            sum += slot_overflow_now(w, &w->slot[i]);
    }
    for (int j = 0; j < LATE_SLOTS; j++)
        sum += slot_overflow_now(w, &w->late[j]);
    return sum;
}

static uint64_t slot_count_now(tw_slot *sl)
{
    /* Relaxed: a statistic. */
    return atomic_load_explicit(&sl->word, memory_order_relaxed) & TW_SLOT_COUNT_MASK;
}

uint64_t tw__wheel_entries(tw_service *s)
{
    tw_wheel *w = &s->wheel;
    uint64_t sum = 0;
    for (size_t i = 0; i < slots_total(w); i++) {
        if (slot_k_marked(w, i)) /* see slot_marked */
            sum += slot_count_now(&w->slot[i]);
    }
    for (int j = 0; j < LATE_SLOTS; j++)
        sum += slot_count_now(&w->late[j]);
    return sum;
}

/* Drain every slot of level l whose epoch lies in (c, T]. */
static void drain_level(tw_service *s, uint32_t l, uint64_t c, uint64_t T)
{
    tw_wheel *w = &s->wheel;
    uint32_t sh = level_shift(w, l);
    uint64_t first = (c >> sh) + 1, last = T >> sh;
    if (last < first)
        return;
    if (last - first + 1 >= w->nslots) {
        for (uint32_t i = 0; i < w->nslots; i++)
            drain_slot(s, l, i, T);
        return;
    }
    for (uint64_t m = first; m <= last; m++)
        drain_slot(s, l, (uint32_t)(m & (w->nslots - 1)), T);
}

/* What the due list is ordered by: the deadline itself with the MANUAL
 * clock (tests and event loops see exact deadline order); otherwise the
 * deadline in sixteenths of a tick. Why order within a tick at all: a
 * tick's timers all start at or after its boundary, one after another, so
 * a timer's lateness is its rounding (boundary - deadline, up to a tick)
 * plus its place in the queue. Earliest deadline first gives the largest
 * rounding the front of the queue, so the two do not add up. And with the
 * cursor's lookahead (cursor.c) the workers start a tick's timers at their
 * deadlines, which they can do in order only if the list is in order. */
#define TW_SUBTICKS 16

static uint64_t due_order_key(const tw_service *s, uint64_t deadline, uint64_t tick)
{
    if (s->cfg.clock == TW_CLOCK_MANUAL)
        return deadline;
    /* deadline is in ((tick - 1) * tick_ns, tick * tick_ns]. */
    uint64_t early = tick * s->cfg.tick_ns - deadline; /* 0 .. tick_ns - 1 */
    return tick * TW_SUBTICKS + (TW_SUBTICKS - 1) - tw__tick_floor(s, early * TW_SUBTICKS);
}

/* The step's window for tw_next_due (below): while the drainer holds
 * entries it took out of slots and has not placed again or claimed yet,
 * step_seq is odd and step_from is the first tick any of them can be due
 * at; a reader that sees the window (or a change of step_seq across its
 * scan) takes step_from as its answer's bound. */
static void hands_full(tw_wheel *w, uint64_t from)
{
    if (w->hands_held++ > 0)
        return; /* a suspended claim's window is open, its bound lower still */
    /* Release: a reader that reads it (acquire) after seeing the odd
     * step_seq has this step's from, or a later one, whose step then
     * finished before (and its placements are visible). */
    atomic_store_explicit(&w->step_from, from, memory_order_release);
    /* Seq_cst: the window opens before the first slot is closed, in the
     * order tw_next_due's seq_cst loads of slots see. */
    atomic_fetch_add_explicit(&w->step_seq, 1, memory_order_seq_cst);
}

static void hands_empty(tw_wheel *w, uint64_t from)
{
    /* Release: as in hands_full; every placement of the step comes before. */
    atomic_store_explicit(&w->step_from, from, memory_order_release);
    if (--w->hands_held > 0)
        return; /* a suspended claim still holds entries, due at its tick,
                   which is at or after `from` (wheel.c, suspended claims) */
    /* Seq_cst: as in hands_full, for the window's close. */
    atomic_fetch_add_explicit(&w->step_seq, 1, memory_order_seq_cst);
}

/* Timers claimed and not yet started are pending too: count the step's
 * claims and lower the claim floor to their least due tick (max(deadline
 * tick, from): a deadline already passed was due at the first tick not
 * processed when it was placed, from at the earliest). The floor is raised
 * only when no claim is left unstarted (all claims counted out), so it is
 * at or before every claimed timer still FIRING.
 *
 * Which exits: those read before the first claim not yet counted
 * (out_before). Exits read now would include those of the claims being
 * counted (a cancel of a timer this step has just claimed), which `claims`
 * does not hold yet, and an older claim still FIRING looked done: the
 * floor went past it, and tw_next_due answered later than its due tick (a
 * review's program: an early claim's piece, a cancel in the burst). */
static uint64_t exits_so_far(tw_service *s)
{
    /* Relaxed: counters; a stale (smaller) sum only keeps the floor lower. */
    return tw__fired_total(s) + tw__firing_left_total(s);
}

static uint64_t claims_left(tw_service *s)
{
    /* Relaxed: only the drainer writes claims. */
    uint64_t in = atomic_load_explicit(&s->wheel.claims, memory_order_relaxed);
    uint64_t out = s->wheel.out_before;
    return in > out ? in - out : 0;
}

static void count_claims(tw_service *s, uint64_t from)
{
    tw_wheel *w = &s->wheel;
    uint64_t n = w->claimed;
    if (n == 0)
        return;
    w->claimed = 0;
    uint64_t floor = w->step_min_tick > from ? w->step_min_tick : from;
    if (claims_left(s) > 0) {
        /* Relaxed: only the drainer writes the floor. */
        uint64_t old = atomic_load_explicit(&w->claim_floor, memory_order_relaxed);
        floor = old < floor ? old : floor;
    }
    /* Relaxed: published by the release add below. */
    atomic_store_explicit(&w->claim_floor, floor, memory_order_relaxed);
    /* Release: a reader that sees these claims (acquire) sees the floor. */
    atomic_fetch_add_explicit(&w->claims, n, memory_order_release);
    w->step_min_tick = UINT64_MAX;
}

uint64_t tw__due_tick_of_key(const tw_service *s, uint64_t key)
{
    uint64_t k = s->cfg.clock == TW_CLOCK_MANUAL ? tw__tick_of(s, key) : key / TW_SUBTICKS;
    return k > s->wheel.due_from ? k : s->wheel.due_from;
}

void tw__claim_floor_set(tw_service *s, uint64_t tick)
{
    /* Timers an early claim staged (workers = 0: the cursor runs them
     * itself, wheel.c) are claimed and not in the list being run: the
     * floor stays at or below their tick. Without this, a list of an
     * earlier tick run meanwhile raised the floor past them, to UINT64_MAX
     * at its end, and tw_next_due answered "nothing pending" (a review's
     * program, 2026-11-29). */
    const tw_wheel *w = &s->wheel;
    if (w->staged.n != 0 && w->staged_tick < tick)
        tick = w->staged_tick;
    /* Release: pairs with tw_next_due's acquire; the inline runner is the
     * drainer, the floor's only writer. */
    atomic_store_explicit(&s->wheel.claim_floor, tick, memory_order_release);
}

/* Whether the record's state moved on while we read its deadline (into
 * *st, then): the timer was freed meanwhile, and the word may be a free
 * list's (records.c, blocks: up to 2^63 ns), or another timer's. Placed
 * by that, the stale entry would wait in a far slot until compaction took
 * it out (a review, 2026-11-29). A hint that narrows the window, no more:
 * entries are hints, and what meets a stale one drops it. Acquire fence,
 * then relaxed: the reload is not done before the deadline's load. */
static bool deadline_read_changed(tw_record *rec, uint64_t *st)
{
    atomic_thread_fence(memory_order_acquire);
    uint64_t now = atomic_load_explicit(&rec->state, memory_order_relaxed);
    if (now == *st)
        return false;
    *st = now;
    return true;
}

/* Claim a due timer for running, or place it again; drop a dead entry.
 * Dead: the record moved on (another generation, not PENDING) or the
 * entry is not its current placement (its tag is not the record's: the
 * timer was placed again since, e.g. moved earlier, and that placement is
 * in the wheel or about to be). Only a current entry is re-placed, and
 * with its own tag, so the entries of a timer never outnumber its
 * placements however often it moves. */
static void take_entry(tw_service *s, uint64_t v, uint64_t T, tw_vec *into, uint64_t keep_at)
{
    uint32_t idx = (uint32_t)v;
    tw_record *rec = tw__rec(&s->rec, idx);
    /* Acquire: the record as its arming thread (or last owner) left it,
     * and (tw__rec_tag) the seq its last lease release published. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    for (;;) {
        if (tw__st(st) != TW_ST_PENDING || tw__entry_tag(v) != tw__rec_tag(rec, st))
            return; /* cancelled, fired, claimed, reused, or superseded */
        if (st & TW_F_LEASE) {
            /* A reschedule is writing the deadline: do not wait for it. Keep
             * this entry alive at the next tick, tag and all; if the holder
             * places the timer itself, that placement's new tag retires it. */
            tw__count_rare(s, TW_RARE_LEASE_MET);
            place_or_die(s, v, keep_at);
            return;
        }
        /* Relaxed: ordered by the acquire of st; the CAS below fails if a
         * lease was taken since, so a torn view of a move is never used. */
        uint64_t deadline = atomic_load_explicit(&rec->deadline, memory_order_relaxed);
        uint64_t k = tw__tick_of(s, deadline);
        if (k > T) {
            if (deadline_read_changed(rec, &st))
                continue;
            place_or_die(s, v, k); /* cascade / pushed later */
            return;
        }
        TW_INJECT(TW_INJ_CASCADE);
        if (s->wheel.claimed == 0)
            s->wheel.out_before = exits_so_far(s); /* before our first claim */
        /* Acq_rel: acquire what a reschedule published; release our claim
         * to whoever runs it. Fails if cancel, reschedule or stop won. */
        if (atomic_compare_exchange_strong_explicit(
                &rec->state, &st, tw__with_st(st, TW_ST_FIRING),
                memory_order_acq_rel, memory_order_acquire)) {
            if (k < s->wheel.step_min_tick)
                s->wheel.step_min_tick = k;
            s->wheel.claimed++;
            s->wheel.claimed_ever++;
            tw__vec_push(into, due_order_key(s, deadline, k));
            tw__vec_push(into, tw__handle(tw__gen(st), idx));
            return;
        }
    }
}

static int by_key(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

static bool due_in_order(const tw_vec *due)
{
    for (size_t i = 2; i < due->n; i += 2) {
        if (due->v[i] < due->v[i - 2])
            return false;
    }
    return true;
}

/* Keys within TW_ORDER_SPAN of each other (a tick or a few, the common
 * case) are ordered by counting, in two passes; wider ranges by qsort. */
static bool order_by_counting(tw_wheel *w, tw_vec *due)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < due->n; i += 2) {
        lo = due->v[i] < lo ? due->v[i] : lo;
        hi = due->v[i] > hi ? due->v[i] : hi;
    }
    if (hi - lo >= TW_ORDER_SPAN)
        return false;
    uint32_t span = (uint32_t)(hi - lo) + 1, at = 0;
    memset(w->counts, 0, span * sizeof *w->counts);
    for (size_t i = 0; i < due->n; i += 2)
        w->counts[due->v[i] - lo]++;
    for (uint32_t k = 0; k < span; k++) {
        uint32_t c = w->counts[k];
        w->counts[k] = at;
        at += c;
    }
    tw_vec *out = &w->spare;
    tw__vec_reserve(out, due->n);
    for (size_t i = 0; i < due->n; i += 2) {
        uint32_t pos = w->counts[due->v[i] - lo]++;
        out->v[2 * (size_t)pos] = due->v[i];
        out->v[2 * (size_t)pos + 1] = due->v[i + 1];
    }
    out->n = due->n;
    tw__vec_swap(due, out);
    tw__vec_clear(out); /* scratch: its peak is the list's */
    return true;
}

/* Earliest first. Often the list is in order already (level-0 slots drain
 * in epoch order, a burst's deadlines are one key), and one pass finds
 * out. Otherwise it is sorted, stably by counting when the keys are close. */
static void order_list(tw_wheel *w, tw_vec *list)
{
    if (due_in_order(list))
        return;
    if (!order_by_counting(w, list))
        qsort(list->v, list->n / 2, 2 * sizeof(uint64_t), by_key);
}

static void order_due(tw_wheel *w)
{
    order_list(w, &w->due);
}

void tw__wheel_step(tw_service *s, uint64_t T)
{
    tw_wheel *w = &s->wheel;
    /* Relaxed: only the drainer writes cur. */
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    if (T <= c)
        return;
    uint64_t claimed_before = w->claimed_ever;
    if (w->cascade.n != 0 && T >= w->cascade_tick)
        cascade_pieces(s, false); /* an early drain's rest, relative to c, first */
    hands_full(w, c + 1);
    /* Release: producers that read T (acquire) aim past it; the slots'
     * reopen stores come later, so a producer that sees a reopened slot
     * also sees this cursor. */
    atomic_store_explicit(&w->cur, T, memory_order_release);
    tw__vec_clear(&w->taken);
    w->step_min_tick = UINT64_MAX;
    w->due_from = c + 1;
    tw__seg_budget(s);
    hand_over_staged(s, T);
    for (uint32_t l = w->levels; l-- > 0;)
        drain_level(s, l, c, T);
    for (int j = 0; j < LATE_SLOTS; j++) {
        count_removed(w, tw__slot_drain_late(&w->late[j], w->cap, &w->taken, &w->segs));
        kept_mark(w, &w->late[j], UINT32_MAX, 0);
        take_entries(s, T);
    }
    claim_stash(s, T, c);
    order_due(w);
    count_claims(s, c + 1);
    hands_empty(w, T + 1);
    tw__seg_poll(s); /* free what earlier drains detached (segments.c) */
    w->idle_steps = w->claimed_ever != claimed_before ? 0 : w->idle_steps + 1;
    tw__count_add_owned(&w->steps, 1, true); /* the drainer's only: tests read it */
}

/* Claim or re-place the entries just taken. With a worker pool, claims
 * go to the workers as soon as TW_PIPELINE of them are ready, while the
 * step goes on (a burst's callbacks then start within a chunk's time of
 * their deadline); each such part is ordered earliest first, the step's
 * whole list only when it is handed over at once. Inline runners (the
 * MANUAL clock, workers = 0) get the whole list after the step: they run
 * callbacks on this thread, and never inside a step. */
#define TW_PIPELINE 4096

/* How far ahead the claims fetch records: a burst's records were last
 * written by the threads that armed them, so each is a cache miss that
 * the prefetch overlaps with the claims before it. */
#define TAKE_AHEAD 8

/* Claim or re-place the entries [from, to) of `list` (taken, or a
 * suspended claim's stash) for tick T; the claims go to `into`; an entry
 * whose timer is being moved is kept at `keep_at` (take_entry). */
static void claim_list(tw_service *s, const tw_vec *list, uint64_t T, size_t from, size_t to,
                       tw_vec *into, uint64_t keep_at)
{
    for (size_t n = from; n < to; n++) {
        if (n + TAKE_AHEAD < list->n) {
            tw_record *ahead = tw__rec(&s->rec, (uint32_t)list->v[n + TAKE_AHEAD]);
            if (ahead)
                tw__prefetch_for_write(ahead);
        }
        take_entry(s, list->v[n], T, into, keep_at);
    }
}

static void claim_range(tw_service *s, uint64_t T, size_t from, size_t to, tw_vec *into,
                        uint64_t keep_at)
{
    claim_list(s, &s->wheel.taken, T, from, to, into, keep_at);
}

/* Claim or re-place every entry taken so far (from taken_at: before it, a
 * resumed claim's are done with), and empty w->taken. */
static void claim_taken(tw_service *s, uint64_t T, tw_vec *into, uint64_t keep_at)
{
    tw_wheel *w = &s->wheel;
    claim_range(s, T, w->taken_at, w->taken.n, into, keep_at);
    tw__vec_clear(&w->taken);
    w->taken_at = 0;
}

/* With a worker pool, hand the claims made so far to the workers once
 * there are at least `min` of them: ordered, counted, then delivered. */
static void deliver_claims(tw_service *s, size_t min)
{
    tw_wheel *w = &s->wheel;
    if (s->pool.nthreads > 0 && w->due.n / 2 >= min) {
        order_due(w);
        count_claims(s, w->due_from);
        tw__deliver_early(s);
    }
}

static void take_entries(tw_service *s, uint64_t T)
{
    tw_wheel *w = &s->wheel;
    claim_taken(s, T, &w->due, T + 1); /* T is being processed: keep at the next */
    deliver_claims(s, TW_PIPELINE);
}

/* ---- early claims of a large slot (the cursor) ---------------------------- */

/*
 * A million timers due in one tick cost the drainer some 40 ns each to
 * claim (a record it has never seen, by CAS): 40 ms of one core, which the
 * pipelined step (take_entries) spends while the workers run the first
 * callbacks, on the cores they need (issue 14: WL5's callbacks/s). So when
 * a level-0 slot holds TW_EARLY_MIN entries or more (a burst: bursts,
 * below, says how the cursor finds it), the cursor claims them before its
 * tick (tw__wheel_claim_early): the slot's entries are copied out and it
 * is reopened for the same epoch (closed only for the copy); then every live
 * entry due at that tick is claimed (PENDING -> FIRING, counted and under
 * the claim floor as any claim) into `staged`, the others placed again.
 * The step to that tick hands `staged` to the workers first, before it
 * drains anything.
 *
 * An early claim never holds the tick up. The cursor starts it a lead
 * before the tick (cursor.c) that is meant to be enough, but a slot still
 * being filled grows while it is claimed, and on a slow host a claim costs
 * 100-200 ns: on 2026-11-24 (an Intel guest) the claim of a slot that was
 * still growing outlasted its tick in 5 runs of 15, and WL5's first
 * callback came 2-50 ms after its deadline. So the claim reads the clock
 * every TW_EARLY_PIECE entries; once the tick is due (stop_at, the time
 * the cursor would step to it), it does what the step would do first:
 * hands `staged` to the workers, then claims the rest of the slot into the
 * due list, delivered TW_PIPELINE at a time as the step's drain does
 * (TW_RARE_EARLY_LATE counts it). A claim that would grow its staged list
 * with too little time left leaves the rest to the step to the tick
 * rather than risk a slow growth there (staged_may_grow). The workers
 * start each timer at its deadline, never before, whoever handed it over.
 *
 * Nor does an early claim hold up the ticks before its own. Between two
 * pieces it looks for work in them (tw__wheel_next_work, as the idle
 * cursor does): once such a tick is due, it gives the cursor back
 * (claim_suspend); one that would come before a growth of the staged list
 * could end parks the claim instead (staged_may_grow):
 * the entries it has not claimed wait in `stash`, the window for
 * tw_next_due stays open over them, and the cursor steps to the due
 * ticks (hands_full and hands_empty nest: step_seq moves only with the
 * outermost window, and an inner one's end lowers step_from no further
 * than the stash allows, its entries being due at T). Caught up, the
 * cursor resumes the claim (tw__wheel_claim_resumable): it takes what was
 * placed in the slot since, and goes on where it stopped. If T comes
 * first, or the claim parked its stash for lack of time to grow, the step
 * to T claims the stash after the ticks it drains (claim_stash), into the
 * due list, TW_PIPELINE at a time. Before (2026-11-25), a timer armed
 * 3 ms ahead beside WL5's burst on the Intel guest came 40-90 ms late:
 * the claim of a million entries held the cursor for up to 150 ms. What
 * still cannot give way: taking the slot (its entries are copied out
 * while it is closed: 11 ms a million on the Intel guest of 2026-11-25,
 * a few ms on the AMD guest of 2026-11-27 with its room made first) and
 * a single piece.
 *
 * Fresh memory is slow on a VM (12 us a page on the AMD guest, bench/floor
 * first_touch): before a claim closes its slot it makes room in `taken`
 * and `staged` for the slot's entries and faults it in a piece at a time,
 * giving way to earlier ticks between pieces (claim_room), so neither the
 * take (the slot closed) nor the pieces after it wait for page faults.
 *
 * Without workers (workers = 0: the cursor runs the callbacks itself,
 * between steps, never inside one) the claim is made early all the same;
 * the cursor runs what it staged just before the step to T
 * (tw__wheel_take_staged), and a hand-over inside a step (a claim gone
 * late) leaves it in the due list (tw__deliver_early), which runs after. Claimed at the tick instead, a burst's first
 * callback waited for the claim of the whole slot: WL5 on workers = 0
 * started its first callback 75 ms after the deadline, against 0.06 ms
 * with two workers (twbench --workers 0, 2026-11-29).
 *
 * Claimed early, a timer is still pending and behaves as any claimed one:
 * a cancel frees it (its staged handle then finds nothing to run), a
 * reschedule takes it back and places it again, tw_stop drops it,
 * tw_next_due counts it, tw_foreach_pending reports it; a worker still
 * starts it at its deadline, never before. Nothing about the other ticks
 * changes: cur does not move, so timers armed meanwhile are due when they
 * would have been. One tick is staged at a time.
 */
#define TW_EARLY_PIECE 512  /* entries claimed between two looks at the clock */

static uint64_t slot_entries(const tw_wheel *w, uint32_t l, uint32_t i)
{
    uint64_t n = 0;
    for (uint32_t lane = 0; lane < w->lanes; lane++)
        n += slot_count_now(slot_at(w, l, i, lane));
    return n;
}

/* Slot (l, i), its next epoch e after c, as a burst the cursor can start
 * on: enough entries; for level 0, a tick the step is not next to and no
 * other tick's claim in hand (one tick staged at a time); above, a level
 * whose slots fit level 0's turn and no claim in hand at all. */
static bool burst_at(tw_wheel *w, uint32_t l, uint32_t i, uint64_t c, tw_burst *b)
{
    uint32_t sh = level_shift(w, l);
    uint64_t e = next_epoch_after(w, l, i, c);
    bool held = w->staged.n != 0 || w->stash.n != 0;
    if (w->cascade.n != 0)
        return false; /* an early drain's rest first: it may add to this slot */
    if (l == 0 ? e <= c + 1 || e == w->declined_tick || (held && w->staged_tick != e) ||
                     (w->stash.n != 0 && w->stash_parked)
               : held || sh >= w->bits)
        return false;
    /* Fewer than TW_EARLY_MIN: a burst still growing in other lanes (or a
     * spurious mark): looked at again when one of TW_EARLY_MIN would be
     * started on (tw__wheel_next_burst). */
    uint64_t n = slot_entries(w, l, i);
    *b = (tw_burst){.tick = e, .n = n < TW_EARLY_MIN ? TW_EARLY_MIN : n, .level = l,
                    .grows = n < TW_EARLY_MIN,
                    .room = l == 0 ? 0 : (1ull << w->bits) - (1ull << sh)};
    return true;
}

uint64_t tw__wheel_big_slot(tw_service *s, uint64_t T)
{
    tw_wheel *w = &s->wheel;
    /* Relaxed: only the drainer writes cur. */
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    uint32_t i = (uint32_t)(T & (w->nslots - 1));
    tw_burst b;
    return next_epoch_after(w, 0, i, c) == T && burst_at(w, 0, i, c, &b) && !b.grows ? b.n : 0;
}

/* The early claim's tick is due: hand what it staged to the workers now,
 * as the step to it would first (hand_over_staged). The claims were
 * counted as they were made; the part this claim added is handed over in
 * the order it was claimed (see tw__wheel_claim_early). */
static void hand_over_staged_now(tw_service *s, uint64_t T)
{
    tw_wheel *w = &s->wheel;
    w->staged_tick = T;
    count_claims(s, w->due_from);
    hand_over_staged(s, T);
}

int (*_Atomic tw__early_piece_hook)(bool late, size_t staged); /* tests (internal.h) */

/* A test may make the claim late at a piece of its choosing, and hold it
 * there (tests/test_workers.c): no host is slow on cue. */
static bool early_piece_hook(const tw_wheel *w, bool late)
{
    /* Relaxed: set before the service runs; a pointer to code, no data. */
    int (*hook)(bool, size_t) = atomic_load_explicit(&tw__early_piece_hook,
                                                     memory_order_relaxed);
    return __builtin_expect(hook != NULL, 0) && hook(late, w->staged.n / 2) != 0;
}

static uint64_t earlier_work_at(tw_service *s, uint64_t T);

/* One look at the clock, before each piece of the claim. Once T's step is
 * due, and only the first time, it hands over what is staged; true from
 * then on: the claims go to the due list and out at once. Not while a
 * tick before T has work (a claim begun beside earlier ticks' timers, or
 * a cursor held up): the claim then takes its slot whole, gives the
 * cursor back at its next piece (claim_suspend), and the step claims the
 * rest after those ticks, earliest first. Gone late, it handed the burst
 * to the workers, or ran it inline, before a timer of the tick before:
 * 60-315 ms late (a review's program, 2026-11-29, once claims could start
 * beside earlier work). */
static bool hand_over_once_due(tw_service *s, uint64_t T, uint64_t stop_at, bool *late)
{
    bool forced = early_piece_hook(&s->wheel, *late);
    if (!*late && (forced || (tw__clock_read(s) >= stop_at &&
                              earlier_work_at(s, T) == UINT64_MAX))) {
        *late = true;
        tw__count_rare(s, TW_RARE_EARLY_LATE);
        hand_over_staged_now(s, T);
    }
    return *late;
}

/* Late: claim what was taken (the slot is closed while it is taken, so an
 * entry whose timer is being moved goes to a late slot, which the step
 * drains) and deliver it as the step's drain does. */
static void claim_and_deliver(tw_service *s, uint64_t T)
{
    claim_taken(s, T, &s->wheel.due, T);
    deliver_claims(s, TW_PIPELINE);
}

/* A claim that must grow the staged list with less than this much time
 * a KiB of the new list left before its tick (stop_at), or before an
 * earlier tick with work in it, does not grow it: it parks the rest
 * (claim_suspend), and the step to the tick hands over what it staged and
 * claims the rest into the due list, TW_PIPELINE at a time (lists that
 * small stay warm). (Giving the cursor back to come again after the
 * earlier tick would be no better beside timers due every tick.) Fresh
 * memory is slow on a VM: on 2026-11-25 (a 2-core Intel guest) growing
 * the staged list from 8 to 16 MiB took 26-32 ms in one realloc, host
 * page faults mostly, inside one piece of a claim begun
 * 9-20 ms before the tick with half of WL5's burst still to claim; the
 * clock is read between pieces, so the hand-over came that much late, and
 * WL5's first callback 15-27 ms after the deadline in 3 runs of 60. 2 ms a
 * MiB: a 16 MiB list needs 32 ms to spare. */
uint64_t tw__grow_ns_per_kib_override; /* tests (test_workers.c) */

static bool staged_may_grow(tw_service *s, size_t pairs, uint64_t limit)
{
    const tw_vec *v = &s->wheel.staged;
    size_t need = v->n + 2 * pairs;
    if (need <= v->cap)
        return true;
    uint64_t kib = (uint64_t)tw__vec_cap_for(v, need) * sizeof *v->v / 1024;
    return tw__clock_read(s) + kib * s->wheel.grow_ns_per_kib < limit;
}

/* Take T's slot, every lane, into w->taken, and reopen it for T. A
 * producer that meets the slot closed goes to a late slot, which the next
 * step drains and places again: so the slot is closed only while its
 * entries are copied out, not while they are claimed (a claim costs ten
 * times a copy; claiming out of the closed slot sent a third of WL5's
 * burst through the late slots, and a step then spent 20-35 ms placing
 * them again). Once late, each chunk is claimed and delivered as it is
 * taken, as drain_slot does. */
static void take_slot_for(tw_service *s, uint64_t T, uint64_t stop_at, bool *late)
{
    tw_wheel *w = &s->wheel;
    uint32_t i = (uint32_t)(T & (w->nslots - 1));
    occupancy_clear(w, 0, i); /* set again by what is placed back */
    for (uint32_t lane = 0; lane < w->lanes; lane++) {
        tw_slot *sl = slot_at(w, 0, i, lane);
        uint32_t count = tw__slot_close(sl);
        for (uint32_t p = 0; p < count; p += TW_DRAIN_CHUNK) {
            tw__slot_take(sl, w->cap, p,
                          count - p < TW_DRAIN_CHUNK ? count : p + TW_DRAIN_CHUNK, &w->taken);
            if (hand_over_once_due(s, T, stop_at, late))
                claim_and_deliver(s, T);
        }
        tw__slot_detach(sl, w->cap, &w->segs);
        tw__slot_reopen(sl, T);
        kept_mark(w, sl, 0, i);
        count_removed(w, count);
    }
}

/* The staged list is ordered after each early claim if the clock leaves
 * time for it, at about this much a pair (a counting sort of 656,000 pairs
 * took 12 ms on a 2-core guest, where the claim was due in less), and if
 * that takes at most TW_EARLY_SLICE_NS; else it is handed over in the
 * order it was claimed (its timers are all due in one tick: only the
 * order within it is lost). The ordering cannot give the cursor back half
 * way, and a timer armed meanwhile for a tick before T waits for it: a
 * million pairs took 11-36 ms on the Intel guest (2026-11-25), and a
 * timer armed 3 ms ahead beside WL5's burst came that late. */
#define TW_ORDER_NS_PER_PAIR 50u /* 25 until 2026-11-25: 30-45 measured into a fresh scratch list */
#define TW_EARLY_SLICE_NS    2000000u

static void order_staged(tw_service *s, uint64_t limit)
{
    tw_wheel *w = &s->wheel;
    uint64_t cost = (uint64_t)(w->staged.n / 2) * TW_ORDER_NS_PER_PAIR;
    if (cost <= TW_EARLY_SLICE_NS && tw__clock_read(s) + cost < limit)
        order_list(w, &w->staged);
}

/* When the cursor must step to the first tick before T with work in it
 * (its lookahead included), or UINT64_MAX if there is none. Work: an
 * occupied slot, or a late slot's entries (then the next tick), as the
 * cursor's idle scan finds it. */
static uint64_t earlier_work_at(tw_service *s, uint64_t T)
{
    /* Timers logged since the cursor's last drain may be due first: they
     * count only once placed (defer.c). A drain short of memory leaves
     * them for the cursor's loop, which tries again a tick later. */
    (void)tw__defer_drain(s, false);
    uint64_t x = tw__wheel_next_work(s);
    return x < T ? tw__cursor_tick_start(s, x) : UINT64_MAX;
}

/* Give the cursor back with taken's entries [p, n) not yet claimed: they
 * wait in the stash, the window held open, for the claim to go on once
 * the cursor has caught up (tw__wheel_claim_resumable) or, parked, for
 * the step to T. The claims made so far are counted. */
static void claim_suspend(tw_service *s, uint64_t T, size_t p, bool parked, bool late)
{
    tw_wheel *w = &s->wheel;
    tw__vec_swap(&w->stash, &w->taken); /* the stash was empty: one claim at a time */
    w->taken_at = 0;
    w->stash_at = p;
    w->stash_parked = parked;
    w->stash_late = late; /* counted already (hand_over_once_due) */
    w->staged_tick = T; /* the cursor learns of T from it (tw__wheel_next_work) */
    if (!parked)
        tw__count_rare(s, TW_RARE_EARLY_YIELDED);
}

bool tw__wheel_claim_resumable(tw_service *s, uint64_t *T)
{
    tw_wheel *w = &s->wheel;
    /* Relaxed: only the drainer writes cur. */
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    if (w->stash.n == 0 || w->stash_parked || w->staged_tick <= c + 1)
        return false; /* none, or the step to its tick takes the rest */
    *T = w->staged_tick;
    return true;
}

/* The step to T claims what a suspended claim for T or before left,
 * after everything else it drained (the earlier ticks' timers first),
 * and delivers it TW_PIPELINE at a time; that claim's window closes. */
static void claim_stash(tw_service *s, uint64_t T, uint64_t c)
{
    tw_wheel *w = &s->wheel;
    if (w->stash.n == 0 || w->staged_tick > T)
        return;
    if (!w->stash_late)
        tw__count_rare(s, TW_RARE_EARLY_LATE); /* its tick came first */
    for (size_t p = w->stash_at; p < w->stash.n; p += TW_PIPELINE) {
        size_t end = w->stash.n - p < TW_PIPELINE ? w->stash.n : p + TW_PIPELINE;
        claim_list(s, &w->stash, T, p, end, &w->due, T + 1);
        deliver_claims(s, TW_PIPELINE);
    }
    tw__vec_clear(&w->stash);
    tw__vec_swap(&w->taken, &w->stash); /* taken is empty here: keep the larger list for it */
    w->stash_at = 0;
    w->stash_parked = w->stash_late = false;
    hands_empty(w, c + 1); /* the claim's; the step's own stays open */
}

/* The entries of `v` that its growth to `want` would fault in. */
static size_t fresh_entries(const tw_vec *v, size_t want)
{
    size_t ready = v->touched > v->n ? v->touched : v->n;
    return want > ready ? want - ready : 0;
}

enum { ROOM_DECLINED = -1, ROOM_GIVE_WAY = 0, ROOM_READY = 1, ROOM_NO_TIME = 2 };

/* Room in v for `want` entries, faulted in a piece at a time
 * (tw__vec_touch): ROOM_READY; ROOM_NO_TIME once the clock reaches
 * stop_at; ROOM_GIVE_WAY once the work of a tick before T is due. The
 * room made so far stays. */
static int fault_in(tw_service *s, tw_vec *v, size_t want, uint64_t T, uint64_t stop_at)
{
    tw__vec_reserve(v, want);
    while (tw__vec_touch(v, want)) {
        uint64_t now = tw__clock_read(s);
        if (now >= stop_at)
            return ROOM_NO_TIME;
        if (now >= earlier_work_at(s, T))
            return ROOM_GIVE_WAY;
    }
    return ROOM_READY;
}

/* No time left to make a claim's room before T: it goes ahead as it is,
 * unless a tick before T has work, which its take of the slot (growing
 * lists as it goes: 50 ms for a million on the AMD guest) would hold up;
 * then it is declined, and the step to T claims the slot, pipelined, after
 * those ticks (a review's program, 2026-11-29: a cursor held up, or a lead
 * too short, made the tick before the burst's 50-300 ms late). Declined
 * for good (declined_tick): a claim begun in a gap between earlier ticks'
 * work, a few ms before T with no room made, grew its lists inside the
 * take and went late, and the burst's first callback came 4-26 ms after
 * its deadline (the second review, bench/beside with 64 slots a level);
 * the step claims it pipelined, its first callbacks within a chunk's time. */
static int no_time_left(tw_service *s, uint64_t T)
{
    if (earlier_work_at(s, T) == UINT64_MAX)
        return ROOM_READY;
    s->wheel.declined_tick = T; /* for good: a claim begun later still lacks the room */
    return ROOM_DECLINED;
}

/* Before a claim takes its slot: room for the slot's n entries in `taken`
 * and for their pairs in `staged`, faulted in a piece at a time
 * (tw__vec_touch), between which the cursor looks for an earlier tick's
 * work. Fresh memory is what a claim waited for on a VM: on the 2-core AMD
 * guest (2026-11-27) a first touch cost 11 us a 4 KiB page, and the take
 * of a million-timer slot, with the slot closed and every earlier tick
 * held up, took 39-54 ms, 7-8 ms of it the take itself once `taken` was
 * faulted in beforehand (bench/beside: ordinary timers came up to 50 ms
 * late beside the burst). ROOM_GIVE_WAY when an earlier tick's work came
 * due first: the cursor steps to it and comes back, and the room made so
 * far stays. With no time left before T, no_time_left says. */
static int claim_room(tw_service *s, uint64_t T, uint64_t stop_at, size_t n)
{
    tw_wheel *w = &s->wheel;
    size_t want[2] = {w->taken.n + n, w->staged.n + 2 * n};
    tw_vec *lists[2] = {&w->taken, &w->staged};
    uint64_t kib = (fresh_entries(lists[0], want[0]) + fresh_entries(lists[1], want[1])) *
                   sizeof(uint64_t) / 1024;
    if (tw__clock_read(s) + kib * w->grow_ns_per_kib >= stop_at)
        return no_time_left(s, T); /* the claim would grow what it must (staged_may_grow) */
    for (size_t k = 0; k < 2; k++) {
        int rc = fault_in(s, lists[k], want[k], T, stop_at);
        if (rc != ROOM_READY)
            return rc == ROOM_NO_TIME ? no_time_left(s, T) : rc;
    }
    return ROOM_READY;
}

bool tw__wheel_claim_early(tw_service *s, uint64_t T, uint64_t stop_at)
{
    tw_wheel *w = &s->wheel;
    /* Relaxed: only the drainer writes cur. */
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    uint32_t i = (uint32_t)(T & (w->nslots - 1));
    if (T <= c + 1 || next_epoch_after(w, 0, i, c) != T)
        return false; /* the step is next, or the slot is not T's */
    bool resumed = w->stash.n != 0;
    if (resumed && (w->stash_parked || w->staged_tick != T))
        return false; /* the step to its tick takes it (not reached: see callers) */
    bool late = false;
    if (resumed) {
        tw__vec_swap(&w->taken, &w->stash); /* taken is empty between claims and steps */
        w->taken_at = w->stash_at;
        w->stash_at = 0;
    } else {
        int room = claim_room(s, T, stop_at, slot_entries(w, 0, i));
        if (room != ROOM_READY)
            return room == ROOM_GIVE_WAY; /* an earlier tick first; the claim comes back */
        /* Counted as it starts: the workers may run the slot's first
         * timers before it ends (tests/test_workers.c looks for either). */
        tw__count_rare(s, TW_RARE_EARLY_CLAIM);
        tw__vec_clear(&w->taken);
        hands_full(w, c + 1);
    }
    w->staged_tick = T; /* what is staged is for T (earlier_work_at) */
    w->step_min_tick = UINT64_MAX;
    w->due_from = c + 1;
    tw__seg_budget(s);
    take_slot_for(s, T, stop_at, &late); /* what was placed since, if resumed */
    /* The slot is open again: an entry whose timer is being moved is kept
     * in it, for T. Empty here if the claim went late while taking. */
    bool suspended = false;
    uint64_t yield_at = UINT64_MAX; /* the earlier tick's step, as last seen */
    for (size_t p = w->taken_at; p < w->taken.n && !suspended; p += TW_EARLY_PIECE) {
        size_t end = w->taken.n - p < TW_EARLY_PIECE ? w->taken.n : p + TW_EARLY_PIECE;
        yield_at = earlier_work_at(s, T);
        if (tw__clock_read(s) >= yield_at) {
            claim_suspend(s, T, p, false, late); /* back after the earlier tick */
            suspended = true;
        } else if (!late && !staged_may_grow(s, end - p, stop_at < yield_at ? stop_at : yield_at)) {
            tw__count_rare(s, TW_RARE_EARLY_WAITED);
            claim_suspend(s, T, p, true, late); /* the step to T takes the rest */
            suspended = true;
        } else {
            bool now_late = hand_over_once_due(s, T, stop_at, &late);
            claim_range(s, T, p, end, now_late ? &w->due : &w->staged, T);
            if (now_late)
                deliver_claims(s, TW_PIPELINE);
        }
    }
    if (!suspended) {
        tw__vec_clear(&w->taken);
        w->taken_at = 0;
        if (!late) /* off the tick's path (and the earlier ones'), if time allows */
            order_staged(s, stop_at < yield_at ? stop_at : yield_at);
    }
    order_due(w); /* what the late part claimed and did not deliver yet */
    count_claims(s, c + 1);
    if (!suspended)
        hands_empty(w, c + 1);
    if (late && earlier_work_at(s, T) == UINT64_MAX)
        tw__deliver(s); /* it may run them here (no batch memory); else the step
                           orders them after the earlier ticks' */
    return true;
}

/* The step to T (>= the staged tick) hands what was claimed early to the
 * workers before it drains anything. Its claims were counted already. A
 * late cursor steps to the tick before the staged one first
 * (tw__wheel_step_to), so that nothing due before it waits behind it. */
static void hand_over_staged(tw_service *s, uint64_t T)
{
    tw_wheel *w = &s->wheel;
    if (w->staged.n == 0 || w->staged_tick > T)
        return;
    if (w->due.n == 0) {
        /* The common case (a step starts with an empty list): swap. */
        tw__vec_swap(&w->due, &w->staged); /* ordered if time allowed (order_staged) */
    } else {
        tw__vec_reserve(&w->due, w->due.n + w->staged.n);
        memcpy(w->due.v + w->due.n, w->staged.v, w->staged.n * sizeof *w->staged.v);
        w->due.n += w->staged.n;
    }
    tw__vec_clear(&w->staged);
    tw__deliver_early(s);
}

uint64_t tw__wheel_step_to(tw_service *s, uint64_t target)
{
    tw_wheel *w = &s->wheel;
    /* Relaxed: only the drainer writes cur. */
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    if (w->staged.n != 0 && c + 1 < w->staged_tick && w->staged_tick <= target &&
        tw__wheel_next_work(s) < w->staged_tick)
        return w->staged_tick - 1;
    return target;
}

/* Without workers, what an early claim staged for a tick the cursor is
 * about to step to (T: at or past it) runs before that step, as a pool
 * has it handed over first (hand_over_staged): the step would put it
 * behind its drains, the claim of a parked stash and the ordering of the
 * whole list. Every staged timer is due: there is no lookahead without
 * workers (cursor.c), so the cursor steps to T only at T's boundary. Not
 * when a tick before the staged one has work (a late cursor): the cursor
 * steps to the tick before first (tw__wheel_step_to), and the step runs
 * that work; a burst run first made a timer of an earlier tick wait for
 * the whole burst (45-50 ms instead of 12: a review, 2026-11-29). */
bool tw__wheel_take_staged(tw_service *s, uint64_t T)
{
    tw_wheel *w = &s->wheel;
    if (s->pool.nthreads != 0 || w->staged.n == 0 || w->staged_tick > T || w->due.n != 0 ||
        tw__wheel_next_work(s) < w->staged_tick)
        return false;
    tw__vec_swap(&w->due, &w->staged);
    return true;
}

/* ---- bursts and early cascades (the cursor) --------------------------------- */

/*
 * Bursts: how the cursor finds the slots worth starting on early. A
 * producer whose reservation is the big_at-th of its lane of a slot (a
 * power of two at most TW_EARLY_MIN / lanes), or the 2 big_at-th, 4
 * big_at-th..., marks the slot in `big` and pokes the cursor (big_mark):
 * a few marks a slot, lane and round. A slot of TW_EARLY_MIN entries has
 * a lane at least that full, so none is missed. A marked slot with fewer
 * (a burst still growing in other lanes, or spread over them) is looked
 * at again when one of TW_EARLY_MIN would be started on; a burst that
 * grows is marked again at each doubling of a lane, and the cursor plans
 * again with the larger lead. (Marked once, at TW_EARLY_MIN / lanes, a
 * burst placed from one lane of two was seen at half its size, dropped,
 * and claimed at its tick: a review's program, 2026-11-29.) A mark may
 * outlive its burst (cancelled and compacted away, or set by a producer
 * of the round being drained), which costs a look at the slot's count,
 * at most one wake-up, and about 8 ns a plan (a review measured 2 us a
 * plan with 256 such marks). The drain and the compaction clear it with
 * the occupancy bit. The cursor reads the marks of the levels whose
 * slots fit level 0's turn (the others cannot be drained early) whenever
 * it plans, busy, idle or compacting: 192 words with the defaults, 115
 * ns. Before (until 2026-11-29) it looked only at the slot of its next
 * work, and only when that was not the next tick: beside timers due every
 * tick, or one due just before it, a burst was claimed at its tick.
 */
bool tw__wheel_next_burst(tw_service *s, uint64_t (*when)(const tw_service *, const tw_burst *),
                          tw_burst *best, uint64_t *at)
{
    tw_wheel *w = &s->wheel;
    /* Relaxed: only the drainer writes cur. */
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    *at = UINT64_MAX;
    for (uint32_t l = 0; l < w->levels && level_shift(w, l) < w->bits; l++) {
        for (uint32_t k = 0; k < w->occ_words; k++) {
            /* Seq_cst: see big_mark (the cursor's second look). */
            uint64_t bits = atomic_load_explicit(&w->big[(size_t)l * w->occ_words + k],
                                                 memory_order_seq_cst);
            for (; bits; bits &= bits - 1) {
                tw_burst b;
                if (!burst_at(w, l, k * 64 + (uint32_t)__builtin_ctzll(bits), c, &b))
                    continue;
                uint64_t t = when(s, &b);
                if (b.grows && t <= c)
                    continue; /* its look is past: a mark of the next size brings another */
                if (t < *at) {
                    *at = t;
                    *best = b;
                }
            }
        }
    }
    return *at != UINT64_MAX;
}

/*
 * A burst armed further ahead than a level-0 turn (a million sessions
 * armed at start-up with a 10 s timeout) waits in a slot of level 1 or
 * above, whose epoch lies up to 2^(step * l) - 1 ticks before the burst's
 * tick. The step to that epoch placed it again entry by entry, 80-150 ns
 * each: a million took 100-150 ms there, so the level-0 slot it filled
 * came too late for its early claim, and the first callback 115-150 ms
 * after the deadline whenever the tick was not the epoch itself (defaults
 * and 1024 slots alike; WL5 with 16 or 64 slots a level, whose +200 ms is
 * beyond level 0: 132 ms; 2026-11-29). So when such a slot holds at
 * least TW_EARLY_MIN entries (a burst, below), the cursor drains it
 * before its epoch, as soon as every entry in it falls within level 0's
 * turn once placed again (tw__wheel_cascade_early, with the lead cursor.c
 * gives it): the entries go to their level-0 slots, the slot reopens for
 * the same epoch, and the large level-0 slot that results is claimed
 * early as any other, in pieces that give way to earlier ticks' work
 * (below). Nothing in the slot is due (its epoch is after cur), and no
 * producer aims at it meanwhile: a placement within level 0's turn goes
 * to level 0.
 */

/* The drain in pieces. The slot's entries are copied out whole into
 * `cascade` (the slot closed only for the copy, as an early claim's is;
 * the room for them made first, a piece at a time, giving way to an
 * earlier tick's work), and placed again TW_CASCADE_PIECE at a time.
 * Between pieces the cursor looks for an earlier tick's work and, once
 * one is due, gives the cursor back (TW_RARE_CASCADE_YIELDED): the rest
 * waits in `cascade`, the window for tw_next_due held open over it (its
 * entries are due at cascade_tick or after, bounded by step_from as a
 * suspended claim's are), and the cursor goes on once it has caught up
 * (tw__wheel_cascade_resume). The step to cascade_tick, if it comes
 * first, places the rest before anything else (cascade_pieces with no
 * yield). Done in one go, the drain of a million held the cursor 25-40
 * ms, and ordinary timers due meanwhile came that late (bench/beside with
 * 256 slots a level, 2026-11-29). */
#define TW_CASCADE_PIECE 4096

void (*_Atomic tw__cascade_piece_hook)(size_t placed, size_t n); /* tests (internal.h) */
void (*_Atomic tw__compact_piece_hook)(size_t placed, size_t n);  /* tests (internal.h) */

static void cascade_piece_hook(const tw_wheel *w)
{
    /* Acquire: the hook's code and data as the test set them. */
    void (*hook)(size_t, size_t) = atomic_load_explicit(
        w->cascade_keep ? &tw__compact_piece_hook : &tw__cascade_piece_hook,
        memory_order_acquire);
    if (hook)
        hook(w->cascade_at, w->cascade.n);
}

static void keep_list(tw_service *s, size_t from, size_t to);
static void compaction_done(tw_wheel *w);

/* Place the drain's entries relative to cur (a compaction's as compaction
 * does: keep_list); with `yield`, stop once an earlier tick's work is due.
 * The window closes with the last entry. */
static void cascade_pieces(tw_service *s, bool yield)
{
    tw_wheel *w = &s->wheel;
    /* Relaxed: only the drainer writes cur. */
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    w->step_min_tick = UINT64_MAX;
    w->due_from = c + 1;
    tw__seg_budget(s);
    for (bool first = true; w->cascade_at < w->cascade.n; first = false) {
        if (yield && !first && tw__clock_read(s) >= earlier_work_at(s, w->cascade_tick)) {
            tw__count_rare(s, w->cascade_keep ? TW_RARE_COMPACT_YIELDED
                                              : TW_RARE_CASCADE_YIELDED);
            break;
        }
        size_t end = w->cascade.n - w->cascade_at < TW_CASCADE_PIECE
                         ? w->cascade.n : w->cascade_at + TW_CASCADE_PIECE;
        if (w->cascade_keep)
            keep_list(s, w->cascade_at, end);
        else
            claim_list(s, &w->cascade, c, w->cascade_at, end, &w->due, c + 1);
        w->cascade_at = end;
        if (yield)
            cascade_piece_hook(w);
    }
    order_due(w); /* empty: every live entry is due after c */
    count_claims(s, c + 1);
    if (w->cascade_at == w->cascade.n) {
        if (w->cascade_keep)
            compaction_done(w);
        tw__vec_clear(&w->cascade);
        w->cascade_at = 0;
        hands_empty(w, c + 1);
    }
    tw__seg_poll(s);
}

bool tw__wheel_cascade_early(tw_service *s, uint64_t e, uint32_t l)
{
    tw_wheel *w = &s->wheel;
    /* Relaxed: only the drainer writes cur. */
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    uint32_t sh = level_shift(w, l);
    uint32_t i = (uint32_t)((e >> sh) & (w->nslots - 1));
    if (w->cascade.n != 0 && w->cascade_keep)
        cascade_pieces(s, false); /* a compaction's rest (at most a slot's) first */
    if (w->cascade.n != 0 || e <= c || sh >= w->bits || next_epoch_after(w, l, i, c) != e ||
        e + (1ull << sh) - 1 - c >= (1ull << w->bits))
        return false; /* the step is next, or some would not land in level 0 yet */
    if (fault_in(s, &w->cascade, slot_entries(w, l, i), e, UINT64_MAX) != ROOM_READY)
        return true; /* an earlier tick first; the drain comes back */
    tw__count_rare(s, TW_RARE_EARLY_CASCADE);
    w->cascade_keep = false;
    hands_full(w, c + 1); /* until the last entry is placed again (cascade_pieces) */
    occupancy_clear(w, l, i);
    for (uint32_t lane = 0; lane < w->lanes; lane++) {
        tw_slot *sl = slot_at(w, l, i, lane);
        uint32_t n = tw__slot_close(sl);
        tw__slot_take(sl, w->cap, 0, n, &w->cascade);
        tw__slot_detach(sl, w->cap, &w->segs);
        tw__slot_reopen(sl, e); /* for the same epoch: nothing aims at it meanwhile */
        kept_mark(w, sl, l, i);
        count_removed(w, n);
    }
    w->cascade_tick = e;
    w->cascade_at = 0;
    if (w->cascade.n == 0)
        hands_empty(w, c + 1); /* cancelled and compacted away since the look */
    else
        cascade_pieces(s, true);
    return true;
}

bool tw__wheel_cascade_resume(tw_service *s)
{
    if (s->wheel.cascade.n == 0)
        return false;
    cascade_pieces(s, true);
    return true;
}

/* ---- compaction (the drainer only) ---------------------------------------- */

/*
 * A cancelled timer, or a placement superseded by a move earlier, leaves its
 * entry in a slot until that slot comes round, where the drain drops it
 * (take_entry). One entry per such call is cheap while slots come round
 * soon; a wheel whose timers are cancelled or pulled in long before their
 * slots drain collects them (a session timeout of an hour, armed and
 * cancelled a million times a second, would hold 3.6 billion). So the
 * drainer keeps the entries in the wheel below twice the pending timers
 * plus two per slot (or the slots' fixed capacity, if less): past that, it
 * compacts slots (slots.c, tw__slot_compact), a few at a time after each
 * step, round robin over the whole wheel, and places the live entries again.
 * It learns the entry count from the producers' per-stripe reservation
 * counts minus what it took out itself, so looking costs a read of each
 * stripe's first line, not a walk of the wheel.
 *
 * Cost: each compacted position costs a read of its record, paid at most
 * once per cancel or move that made it stale (a position is compacted only
 * while stale ones are at least half of all), so it adds O(1) per call. A
 * step compacts a sixteenth of the excess, between TW_COMPACT_MIN and
 * TW_COMPACT_MAX positions (plus one slot), so a large excess goes in
 * tens of steps without making one step long.
 */
#define TW_COMPACT_MIN 8192   /* positions a step compacts, at least ... */
#define TW_COMPACT_MAX 65536  /* ... and at most (a sixteenth of the excess) */

void (*_Atomic tw__keep_entry_hook)(uint32_t idx); /* tests (internal.h) */

static void keep_entry_hook(uint32_t idx)
{
    /* Acquire: the hook's code and data as the test set them. */
    void (*hook)(uint32_t) = atomic_load_explicit(&tw__keep_entry_hook, memory_order_acquire);
    if (__builtin_expect(hook != NULL, 0))
        hook(idx);
}

/* A live entry taken out of a slot collecting for `epoch` by compaction:
 * place it again where its deadline says (most go back to the same slot),
 * or, while a reschedule holds the lease, back at `epoch`, tag and all.
 * `growth`: the placement may mark its slot as grown (place_once). False
 * if the entry was stale (dropped). */
static bool keep_entry(tw_service *s, uint64_t v, uint64_t epoch, bool growth)
{
    uint32_t idx = (uint32_t)v;
    tw_record *rec = tw__rec(&s->rec, idx);
    /* Acquire: as in take_entry. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    for (;;) {
        if (tw__st(st) != TW_ST_PENDING || tw__entry_tag(v) != tw__rec_tag(rec, st))
            return false; /* stale: what compaction is for */
        if (st & TW_F_LEASE) {
            place_entry_or_die(s, v, epoch, growth);
            return true;
        }
        /* Relaxed: as in take_entry. A deadline moved meanwhile is fine:
         * the entry is a hint, and the drain that meets it reads the
         * record. A state moved meanwhile is looked at again: a move
         * later places nothing and keeps this entry (its tag), so the
         * entry must stay; a free or a placement of its own retires it. */
        uint64_t deadline = atomic_load_explicit(&rec->deadline, memory_order_relaxed);
        keep_entry_hook(idx);
        if (!deadline_read_changed(rec, &st)) {
            place_entry_or_die(s, v, tw__tick_of(s, deadline), growth);
            return true;
        }
    }
}

/* Compaction in pieces. A slot holding a crowd of live timers (200
 * thousand sessions armed within a few seconds, each with an hour's
 * timeout) costs its compaction some 65 ns an entry to place again, 13
 * ms for the crowd, and compacted in one piece it held the cursor that
 * long: a review's server-shaped program (those sessions, and 50 thousand
 * request timeouts of 60 s a second, each cancelled after 1 s) saw a 12
 * ms step about every 2 s, 0.1% of its probe timers more than 5 ms late
 * (2026-11-30). So the running cursor takes a slot of TW_COMPACT_PIECES_MIN
 * entries or more out whole (a copy, the slot closed only for it, the
 * room made first as an early cascade's is) into `cascade`, reopens it
 * for the same epoch, and places the live entries back TW_CASCADE_PIECE
 * at a time, giving the cursor back between pieces once a tick's work is
 * due, as an early cascade does (cascade_pieces): every live entry of a
 * slot whose epoch is after the next tick is due at that epoch or later
 * (placement puts a timer due at k in a slot whose epoch is at most k),
 * so the step to that epoch places what is left first, and the window
 * for tw_next_due stays open over them meanwhile. Where no step comes
 * (`next`: a paused cursor, a MANUAL service, a callback's compaction;
 * past the back-pressure line) a slot is still taken in one piece. */
#define TW_COMPACT_PIECES_MIN 16384

enum { COMPACT_ON = 0, COMPACT_AGAIN = 1, COMPACT_STOP = 2 };

static void keep_list(tw_service *s, size_t from, size_t to)
{
    tw_wheel *w = &s->wheel;
    for (size_t n = from; n < to; n++) {
        if (n + TAKE_AHEAD < to) {
            tw_record *ahead = tw__rec(&s->rec, (uint32_t)w->cascade.v[n + TAKE_AHEAD]);
            if (ahead)
                tw__prefetch_for_write(ahead);
        }
        w->cascade_kept += keep_entry(s, w->cascade.v[n], w->cascade_tick, w->cascade_growth);
    }
}

/* Its live entries, placed back, mark the slot as grown again (to be
 * looked at again: what they leave behind later), unless its last
 * compaction took nothing out either. Marked every time, a slot holding
 * a crowd of live timers was compacted on every loop of the cursor,
 * taking nothing out (a review's program, 2026-11-30: 200 thousand
 * sessions in one slot beside 250 thousand cancelled timers spread thin,
 * 30 million positions compacted a second, a whole core, timers 14 ms
 * late; a MANUAL tw_advance of one tick took 7 ms). Producers that fill
 * it to a new segment mark it again; a drain starts it afresh. */
static void barren_set(tw_wheel *w, uint32_t l, uint32_t i, bool barren)
{
    uint64_t *word = &w->barren[(size_t)l * w->occ_words + i / 64];
    uint64_t bit = 1ull << (i % 64);
    *word = barren ? *word | bit : *word & ~bit;
}

static bool barren_of(const tw_wheel *w, uint32_t l, uint32_t i)
{
    return (w->barren[(size_t)l * w->occ_words + i / 64] >> (i % 64)) & 1;
}

static void compaction_done(tw_wheel *w)
{
    barren_set(w, w->cascade_level, w->cascade_slot, w->cascade_kept == w->cascade.n);
}

/* Sampling a large slot first. The wheel stays within twice the pending
 * timers plus slack (above); a slot whose entries are mostly live adds
 * little to what is over, and compacting it reads and places every entry
 * again to take a few out. A slot of 200 thousand live sessions, a few of
 * them ending each second, was compacted on every cycle of the round
 * robin while cancelled requests elsewhere kept the wheel over its
 * allowance (its last compaction took something out, so it was never
 * barren): some 65 ns an entry each time, 13 ms of the cursor for 200
 * thousand (tests/test_reschedule.c,
 * a_crowd_with_a_trickle_of_ends_is_left_alone, counts the positions);
 * sessions armed over an hour spread the same over hundreds of slots of
 * a few hundred. So a slot of TW_SAMPLE_MIN entries or more is compacted
 * only when a sample of TW_SAMPLE_N of its positions (with replacement)
 * finds a quarter or more of them stale.
 * Why that keeps the bound: a wheel over its allowance holds more stale
 * entries than live ones, so some slot is more than half stale; smaller
 * slots are compacted as before, and a large one half stale shows fewer
 * than 16 stale in 64 with a chance near 1e-5 (and is sampled again the
 * next cycle). A slot left alone is mostly live: one 30% stale is left
 * alone one time in six, 40% one in 250, so a cycle that compacts what
 * the samples pick leaves the wheel well under twice the pending (about
 * 1.7 times at worst), plus what producers add meanwhile. The positions
 * come from the drainer's own generator, so a peer cannot aim at what is
 * sampled, nor keep a slot stale out of its sight.
 * Cost: 64 reads of entries and 64 of records a large slot a look (each
 * counted against the round robin's budget as 64 positions; a retry of a
 * slot whose room for pieces was not ready samples again), against its
 * size in reads and placements; a slot compacted is likely a quarter
 * stale or more, so each stale entry taken out pays for about four
 * positions. A sample that leaves a grown slot alone takes its mark
 * (compact_grown): producers mark it again at their next new segment,
 * and the round robin comes by while the wheel is over its allowance. */
#define TW_SAMPLE_MIN 256u
#define TW_SAMPLE_N   64u

static uint64_t sample_next(tw_wheel *w)
{
    uint64_t x = w->sample_seed; /* xorshift64: drainer-private */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w->sample_seed = x;
    return x;
}

/* Whether entry v (taken from a slot or read there) names a live
 * placement: its record pending, with the tag the entry carries (as
 * keep_entry decides, without its wait for a move in flight). */
static bool entry_live(tw_service *s, uint64_t v)
{
    tw_record *rec = tw__rec(&s->rec, (uint32_t)v);
    /* Acquire: as in keep_entry. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    return tw__st(st) == TW_ST_PENDING && tw__entry_tag(v) == tw__rec_tag(rec, st);
}

/* Whether slot (l, i), n entries over its lanes, is worth compacting (see
 * above). A position reserved and not yet published counts as live. */
static bool worth_compacting(tw_service *s, uint32_t l, uint32_t i, uint64_t n)
{
    tw_wheel *w = &s->wheel;
    if (n < TW_SAMPLE_MIN)
        return true;
    uint64_t count[TW_MAX_LANES];
    uint64_t total = 0;
    for (uint32_t lane = 0; lane < w->lanes; lane++) {
        count[lane] = slot_count_now(slot_at(w, l, i, lane));
        total += count[lane];
    }
    uint32_t stale = 0;
    for (uint32_t k = 0; k < TW_SAMPLE_N && total > 0; k++) {
        uint64_t r = sample_next(w) % total;
        uint32_t lane = 0;
        while (r >= count[lane])
            r -= count[lane++];
        /* The drainer's own look: only it retires segments, so a segment
         * it finds stays. The count was read relaxed (a statistic), so a
         * position's segment may not be seen yet: NULL, taken as live. */
        _Atomic uint64_t *e = tw__slot_entry(slot_at(w, l, i, lane), w->cap, (uint32_t)r);
        /* Acquire: a published entry's record as its producer left it
         * (pairs with the publish's release CAS). */
        uint64_t v = e ? atomic_load_explicit(e, memory_order_acquire) : 0;
        stale += (v & TW_ENTRY_VALUE) && !entry_live(s, v);
    }
    if (stale * 4 >= TW_SAMPLE_N)
        return true;
    w->sampled_out++;
    return false;
}

/* Room in `cascade` for a slot of n entries, made before the slot is
 * closed; COMPACT_AGAIN while the list holds another drain's rest or a
 * tick's work came due first (the room made so far stays). */
static int pieces_room(tw_service *s, uint64_t epoch, uint64_t n)
{
    tw_wheel *w = &s->wheel;
    if (w->cascade.n != 0)
        return COMPACT_AGAIN;
    return fault_in(s, &w->cascade, n, epoch, UINT64_MAX) == ROOM_READY ? COMPACT_ON
                                                                         : COMPACT_AGAIN;
}

/* Compact slot i of level l, every lane of it (they share an occupancy
 * bit), if it holds anything and is not about to drain anyway (`next`:
 * the next tick's slots too, which no step drains while the cursor is
 * paused or a MANUAL service's loop does not advance: back-pressure).
 * `pieces_ok`: the running cursor's compaction, which may go in pieces
 * (above). Returns the positions it took out; *stop: COMPACT_AGAIN if it
 * took none and wants to come back to this slot, COMPACT_STOP if its
 * pieces gave the cursor back. */
static uint32_t compact_one(tw_service *s, uint32_t l, uint32_t i, uint64_t c, bool next,
                            bool pieces_ok, int *stop)
{
    tw_wheel *w = &s->wheel;
    uint64_t held = 0;
    if (!slot_marked(w, l, i))
        return 0; /* nothing reserved since its last drain (slot_marked) */
    for (uint32_t lane = 0; lane < w->lanes; lane++) {
        /* Relaxed: a first look; the close decides. */
        held |= atomic_load_explicit(&slot_at(w, l, i, lane)->word, memory_order_relaxed) &
                TW_SLOT_COUNT_MASK;
    }
    if (held == 0 || (!next && next_epoch_after(w, l, i, c) <= c + 1))
        return 0; /* empty, or the next step drains it */
    uint64_t entries = slot_entries(w, l, i);
    if (!worth_compacting(s, l, i, entries))
        return 0; /* mostly live: it costs more than it gives back */
    uint64_t epoch = next_epoch_after(w, l, i, c);
    uint64_t count = pieces_ok && !next ? entries : 0;
    bool pieces = count >= TW_COMPACT_PIECES_MIN;
    if (pieces && (*stop = pieces_room(s, epoch, count)) != COMPACT_ON)
        return 0;
    tw_vec *into = pieces ? &w->cascade : &w->taken;
    bool growth = !barren_of(w, l, i); /* read before occupancy_clear clears it */
    uint32_t n = 0;
    tw__vec_clear(into);
    hands_full(w, c + 1); /* pieces: until the last is placed back (cascade_pieces) */
    occupancy_clear(w, l, i); /* set again by the entries placed back */
    for (uint32_t lane = 0; lane < w->lanes; lane++) {
        tw_slot *sl = slot_at(w, l, i, lane);
        n += tw__slot_compact(sl, w->cap, into, &w->segs);
        kept_mark(w, sl, l, i); /* its entries may all be dead: no drain then */
    }
    count_removed(w, n);
    if (pieces) {
        tw__count_rare(s, TW_RARE_COMPACT_PIECES);
        w->cascade_keep = true;
        w->cascade_growth = growth;
        w->cascade_level = l;
        w->cascade_slot = i;
        w->cascade_kept = 0;
        w->cascade_tick = epoch;
        w->cascade_at = 0;
        cascade_pieces(s, true);
        *stop = w->cascade.n != 0 ? COMPACT_STOP : COMPACT_ON;
        return n;
    }
    size_t kept = 0;
    for (size_t j = 0; j < w->taken.n; j++)
        kept += keep_entry(s, w->taken.v[j], epoch, growth);
    barren_set(w, l, i, kept == w->taken.n);
    tw__vec_clear(&w->taken); /* empty outside steps (tw__drainer_lend) */
    hands_empty(w, c + 1);
    return n;
}

uint64_t tw__wheel_entries_estimate(tw_service *s)
{
    uint64_t reserved = tw__reserved_total(s);
    /* Relaxed: a hint (the drainer's own word, or a producer's look). */
    uint64_t removed = atomic_load_explicit(&s->wheel.removed, memory_order_relaxed);
    return reserved > removed ? reserved - removed : 0;
}

static bool role_wanted(tw_service *s);

/* Compact the slots producers marked as grown (grew_mark), while left
 * behind entries are at least half of the wheel's: the growth is theirs
 * then, not a burst of live timers (which compaction would only move). */
static uint64_t compact_grown(tw_service *s, uint64_t c, bool pieces_ok, int *stop)
{
    tw_wheel *w = &s->wheel;
    uint64_t done = 0;
    for (uint32_t l = 0; l < w->levels; l++) {
        for (uint32_t k = 0; k < w->occ_words; k++) {
            _Atomic uint64_t *word = &w->grew[(size_t)l * w->occ_words + k];
            /* Relaxed: see grew_mark. */
            uint64_t bits = atomic_exchange_explicit(word, 0, memory_order_relaxed);
            while (bits) {
                if (*stop != COMPACT_ON || role_wanted(s)) {
                    /* Relaxed: as above; the marks not taken, for the
                     * next round (the cursor has a tick to step to, or
                     * the drainer wants the role). */
                    atomic_fetch_or_explicit(word, bits, memory_order_relaxed);
                    *stop = *stop == COMPACT_ON ? COMPACT_STOP : *stop;
                    return done;
                }
                uint32_t i = k * 64 + (uint32_t)__builtin_ctzll(bits);
                done += compact_one(s, l, i, c, false, pieces_ok, stop);
                if (*stop != COMPACT_AGAIN)
                    bits &= bits - 1; /* else it stays marked, for the next round */
            }
        }
    }
    return done;
}

/* ---- strays (the drainer only, at the trim) ------------------------------ */

/*
 * A producer that installed an overflow segment and then lost its
 * reservation (the drain closed the slot, or reopened it for a later
 * epoch: TW_SLOT_NEWER) leaves the segment with the slot, for its next
 * round (slots.c). A drain gives it back if that round reserves anything;
 * if it reserves nothing, the slot is not drained before its next epoch
 * (a level-0 slot: a turn later, 4 s by default; higher levels: hours),
 * and an idle cursor does not step at all. Found by test_segments'
 * idle_cursor_frees_a_burst (TSan beside CPU hogs, where arming outlasted
 * the deadline and timers went to the next ticks' slots): 512 bytes to
 * 6 KiB kept for good in level-0 slots holding no entry, reopened for a
 * turn later, with the cursor asleep. So a placement that installs an
 * overflow segment or table and then loses its reservation marks its slot
 * (stray_mark_if_lost), and once a trim period the drainer gives back the
 * segments of every marked slot that holds no reserved position
 * (tw__slot_give_back: close, detach, reopen the same round); an idle
 * cursor comes back for it (tw__wheel_trim_due). A slot with entries gives
 * its segments back at its drain; a drain or compaction that leaves a slot
 * segments past the budget (a stalled reader refused the detach, or an
 * install came after it) marks it too (kept_mark; tests/test_segments.c,
 * empty_slot_gives_back_its_segments_at_the_trim). Within the budget
 * (TW_SEG_KEEP_MIN) slots keep theirs, as at a drain, and the marks are
 * dropped, so strays kept that way stay within it. A placement that keeps
 * its reservation marks nothing, so arming far timers leaves an idle
 * cursor asleep (tests/test_segments.c,
 * arming_leaves_the_trim_nothing_to_come_back_for; WL4).
 */
static void give_back_strays(tw_service *s)
{
    tw_wheel *w = &s->wheel;
    size_t words = (size_t)w->levels * w->occ_words;
    /* Relaxed: a first look, to skip the common case; acquire: pairs with
     * stray_mark's release store (the marks made before it). */
    if (atomic_load_explicit(&w->strays[words], memory_order_relaxed) == 0 ||
        atomic_exchange_explicit(&w->strays[words], 0, memory_order_acquire) == 0)
        return;
    tw__seg_budget(s);
    bool keep = tw__seg_within_budget(&w->segs);
    for (size_t k = 0; k < words; k++) {
        /* Relaxed: a first look; a bit it misses was set after the summary
         * word's exchange above saw it, which leaves that word set. */
        if (atomic_load_explicit(&w->strays[k], memory_order_relaxed) == 0)
            continue;
        /* Acquire: pairs with stray_mark's release RMW (the installs). */
        uint64_t bits = atomic_exchange_explicit(&w->strays[k], 0, memory_order_acquire);
        uint32_t l = (uint32_t)(k / w->occ_words);
        while (bits && !keep) {
            uint32_t i = (uint32_t)(k % w->occ_words) * 64 + (uint32_t)__builtin_ctzll(bits);
            bits &= bits - 1;
            bool done = true;
            for (uint32_t lane = 0; lane < w->lanes; lane++)
                done &= tw__slot_give_back(slot_at(w, l, i, lane), w->cap, &w->segs);
            if (!done)
                stray_mark(w, l, i); /* a stalled reader: the next period */
        }
    }
    for (int j = 0; j < LATE_SLOTS && !keep; j++) {
        if (!tw__slot_give_back(&w->late[j], w->cap, &w->segs))
            stray_mark(w, UINT32_MAX, 0);
    }
}

uint64_t tw__trim_period_override; /* tests (test_trim.c) */

void tw__wheel_trim(tw_service *s, uint64_t now)
{
    tw_wheel *w = &s->wheel;
    tw_vec *lists[] = {&w->taken, &w->due, &w->spare, &w->staged, &w->stash, &w->cascade};
    /* A bounded step of the record table's give-back, every loop: its
     * reading and page freeing never hold a tick up for long (WL3). */
    w->rec_stepping = tw__rec_trim_step(&s->rec);
    if (now < w->trim_at)
        return;
    w->trim_at = now + w->trim_period;
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        tw__vec_trim(lists[i]);
    tw__pool_trim(s);
    tw__rec_trim(&s->rec, tw__pending(s));
    tw__defer_trim(s);
    give_back_strays(s);
}

bool tw__wheel_trim_due(tw_service *s, uint64_t *at)
{
    tw_wheel *w = &s->wheel;
    const tw_vec *lists[] = {&w->taken, &w->due, &w->spare, &w->staged, &w->stash,
                             &w->cascade};
    /* Steps remain: come back at once (the cursor plans the next tick). */
    *at = w->rec_stepping ? 0 : w->trim_at;
    /* Relaxed (the strays' summary word): a hint of when to come back; a
     * mark made after this look comes with a placement, which wakes the
     * cursor, or is seen at its next loop. */
    bool above = tw__pool_above_keep(s) || tw__rec_may_trim(&s->rec, tw__pending(s)) ||
                 tw__defer_keeps(s) ||
                 atomic_load_explicit(&w->strays[(size_t)w->levels * w->occ_words],
                                      memory_order_relaxed) != 0;
    for (size_t i = 0; i < sizeof lists / sizeof lists[0] && !above; i++)
        above = tw__vec_above_keep(lists[i]);
    return above;
}

bool (*_Atomic tw__compacting_hook)(void); /* tests (internal.h) */

static bool compacting_hook_says_more(void)
{
    /* Acquire: the hook's code and data as the test set them. */
    bool (*hook)(void) = atomic_load_explicit(&tw__compacting_hook, memory_order_acquire);
    return hook && hook();
}

/* The late slots (placements that met their slot closed), which every
 * step drains: compacted only where no step comes (back-pressure: a
 * paused cursor, a MANUAL service's producer), as compact_one does a
 * slot. While a paused cursor compacted the slot its producers filled,
 * they met it closed and placed into the late slots, which grew for good
 * (this program's first run: stress/pressure.c, paused). */
static uint32_t compact_late(tw_service *s, uint64_t c)
{
    tw_wheel *w = &s->wheel;
    uint32_t n = 0;
    tw__vec_clear(&w->taken);
    hands_full(w, c + 1);
    for (int j = 0; j < LATE_SLOTS; j++) {
        uint32_t k = tw__slot_drain_late(&w->late[j], w->cap, &w->taken, &w->segs);
        count_removed(w, k);
        kept_mark(w, &w->late[j], UINT32_MAX, 0);
        n += k;
    }
    for (size_t j = 0; j < w->taken.n; j++)
        keep_entry(s, w->taken.v[j], c + 1, true); /* to c + 1's slot, as new ones */
    tw__vec_clear(&w->taken);
    hands_empty(w, c + 1);
    return n;
}

/* One round of compaction: true if the wheel is still over its allowance
 * and the round took something out, or spent its budget on samples of
 * large slots short of a whole cycle without taking anything (a round
 * that found nothing to take leaves the rest to the steps). `alone`: no step comes meanwhile
 * (back-pressure: a paused cursor, a MANUAL service's producer), so the
 * late slots too, and the next tick's slots. So too past the
 * back-pressure line, where producers wait: the next step may be a long
 * tick away (a review's program, 2026-11-30: with a tick of 1 s, timers
 * armed and cancelled due at the next tick ran at 0.56M calls a second
 * with the cursor running, each 1024 past the line waiting 0.16 s). A
 * paused cursor that skipped those (before 2026-11-30) left every timer
 * armed and cancelled within the frozen clock's next tick in the wheel:
 * each 1024 such calls past the line waited 0.1 s for a compaction that
 * took none of them, then added their entries for good
 * (tests/test_pause.c, paused_churn_due_next_tick_stays_bounded). */
static bool compact_round_now(tw_service *s, bool alone)
{
    tw_wheel *w = &s->wheel;
    uint64_t entries = tw__wheel_entries_estimate(s);
    uint64_t pending = tw__pending(s);
    /* Relaxed: only the drainer writes cur. */
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    int stop = COMPACT_ON;
    /* In pieces only where a cursor comes back for them: not while it is
     * paused or in a callback, not in tw_advance (no cursor). */
    bool pieces_ok = !alone && s->cfg.clock == TW_CLOCK_MONOTONIC;
    uint64_t grown = 0;
    if (entries > 2 * pending) {
        tw__seg_budget(s); /* compaction gives segments back, as drains do */
        grown = compact_grown(s, c, pieces_ok, &stop);
        w->compacted += grown;
        entries -= grown < entries ? grown : entries;
    }
    uint64_t allowed = 2 * pending + w->compact_slack;
    if (stop != COMPACT_ON)
        return true; /* pieces wait, or a slot's room: after the tick */
    if (entries <= allowed)
        return false;
    bool all = alone || entries > tw__wheel_pressure_line(s, pending);
    uint64_t late = all ? compact_late(s, c) : 0;
    w->compacted += late;
    entries -= late < entries ? late : entries;
    bool next = all;
    uint64_t budget = (entries - allowed) / 16;
    budget = budget < TW_COMPACT_MIN ? TW_COMPACT_MIN : budget;
    budget = budget > TW_COMPACT_MAX ? TW_COMPACT_MAX : budget;
    uint64_t done = 0, looked = 0;
    size_t total = (size_t)w->levels * w->nslots, seen;
    for (seen = 0; seen < total && done + looked < budget && !role_wanted(s); seen++) {
        size_t k = w->compact_at;
        uint64_t left_alone = w->sampled_out;
        done += compact_one(s, (uint32_t)(k / w->nslots), (uint32_t)(k % w->nslots), c, next,
                            pieces_ok, &stop);
        /* A sample's reads are work as positions are, though they take
         * nothing out: a wheel of ten thousand large slots would otherwise
         * sample them all in one round (640 thousand reads). */
        looked += (w->sampled_out - left_alone) * TW_SAMPLE_N;
        if (stop == COMPACT_AGAIN)
            break; /* this slot again, next round */
        w->compact_at = (k + 1) % total;
        if (stop == COMPACT_STOP)
            break;
    }
    w->compacted += done;
    /* Slots passed since positions were last taken out (by the round
     * robin, the late slots or the grown marks): a round that spent its
     * budget on samples alone made progress round the wheel (more to
     * do), until a whole cycle found nothing to take. */
    w->compact_idle = grown + done + late > 0 ? 0 : w->compact_idle + seen;
    if (stop != COMPACT_ON)
        return true;
    bool sampled_on = done + looked >= budget && looked > 0 && w->compact_idle < total;
    return entries > done && entries - done > allowed && (done + late > 0 || sampled_on);
}

/* The round, shown to producers under back-pressure: a compaction under
 * way is progress to wait for, though `removed` moves only as each slot's
 * is done (under ThreadSanitizer one slot of half a million entries took
 * longer than a wait's looks, and the wait was given up: CI, 2026-11-30,
 * test_overload.worker_callback_churn_stays_bounded). */
static bool compact_round(tw_service *s, bool alone)
{
    /* Relaxed: a hint for the waits (tw__wheel_pressure); the drainer is
     * its only writer. */
    atomic_store_explicit(&s->wheel.compacting, 1, memory_order_relaxed);
    bool more = compact_round_now(s, alone);
    atomic_store_explicit(&s->wheel.compacting, 0, memory_order_relaxed);
    return more;
}

bool tw__wheel_maintain(tw_service *s)
{
    return compact_round(s, false) || compacting_hook_says_more();
}

bool tw__wheel_maintain_alone(tw_service *s)
{
    return compact_round(s, true);
}

/* ---- the drainer role ------------------------------------------------------ */

/*
 * The wheel's drainer-private state (the step's lists, compaction's round
 * robin and marks, hands_held, the segments' retire lists) belongs to the
 * drainer: the cursor thread (MONOTONIC), or the thread inside tw_advance
 * under the drain lock (MANUAL), or a MANUAL producer that took the drain
 * lock (trylock) to compact while no tw_advance was under way. While the
 * drainer runs callbacks itself (workers.c, tw__deliver: workers = 0, or
 * no memory for a batch) it lends its state, so that what they arm and
 * cancel is compacted meanwhile:
 *   - MONOTONIC: only the cursor's own callbacks compact (and the cursor
 *     held at the pause gate: tw__wheel_compact_at_gate), on the cursor's
 *     thread, so no lock is needed: the cursor never waits for a producer
 *     (guarantee 4), and would, for one stopped half-way through a slot.
 *   - MANUAL: tw_advance shows the state lendable; any producer under
 *     back-pressure (its own callbacks included) takes role_lock
 *     (trylock), shows itself (role_lent), and compacts if the state is
 *     still lendable. tw_advance, its callbacks done, takes the state back
 *     and, if a producer shows itself, says so (role_wanted: it stops at
 *     its next slot) and waits for it on role_lock. Both sides store their
 *     word, then load the other's, tw_advance after the light fence, the
 *     producer after the heavy one: either the producer sees the state
 *     reclaimed, or tw_advance sees the producer and waits for it;
 *     role_lock's unlock and lock order the compaction before the step.
 * An advance that runs no callback lends nothing and pays nothing (a lock
 * and unlock of role_lock on every advance cost 6-9% of a small
 * tw_advance: a review, 2026-11-30). Callbacks run between steps: nothing
 * of a step is in flight then (`taken` is empty, which tw__drainer_lend
 * checks; a suspended claim's rest waits in `stash`, a cascade's or a
 * compaction's in `cascade`, neither of which compaction of another slot
 * touches), so compaction may run as it does between the cursor's loops.
 *
 * Before (2026-11-30), the drainer kept its state while it ran callbacks,
 * so nobody could compact meanwhile: a callback inside tw_advance, or on
 * the cursor with workers = 0, that armed and cancelled timers of its own
 * service in a loop left every entry until it returned (a review's
 * program: 11M calls a second, 300 MB in 3 s), and a producer beside a
 * long callback inside tw_advance waited 0.1 s for a compaction that
 * could not come, then went on leaving entries (tests/test_overload.c,
 * drainer_callback_churn_stays_bounded and the tests beside it). What is
 * left: beside a long callback on the cursor (workers = 0), the other
 * producers wait for it as before (README, Limits).
 */
static bool role_wanted(tw_service *s)
{
    /* Relaxed: a hint; role_lock orders the state. */
    return atomic_load_explicit(&s->role_wanted, memory_order_relaxed) != 0;
}

void tw__drainer_lend(tw_service *s)
{
    if (s->wheel.taken.n != 0) {
        /* Compaction's use of it would lose a step's entries: a bug. */
        fputs("timerwheel: the drainer's state lent in the middle of a step\n", stderr);
        abort();
    }
    if (s->cfg.clock != TW_CLOCK_MANUAL)
        return; /* the cursor's own callbacks compact on its thread */
    /* Release: a producer that sees it (seq_cst load) sees the state as
     * the step left it. */
    atomic_store_explicit(&s->role_lendable, 1, memory_order_release);
}

void tw__drainer_reclaim(tw_service *s)
{
    if (s->cfg.clock != TW_CLOCK_MANUAL)
        return;
    /* Relaxed, then the light fence: our store before our look at
     * role_lent, against a producer's store to role_lent and look at
     * role_lendable, which takes the heavy one (threads.c, asymmetric
     * fences: a seq_cst store here cost 8 ns of every advance that runs
     * callbacks). Acquire: a producer that compacted and left stored 0
     * (release) after its compaction. */
    atomic_store_explicit(&s->role_lendable, 0, memory_order_relaxed);
    tw__fence_light();
    if (atomic_load_explicit(&s->role_lent, memory_order_acquire) == 0)
        return;
    /* Relaxed: a hint for the producer's rounds (role_wanted). */
    atomic_store_explicit(&s->role_wanted, 1, memory_order_relaxed);
    pthread_mutex_lock(&s->role_lock); /* its compaction happens before */
    pthread_mutex_unlock(&s->role_lock);
    atomic_store_explicit(&s->role_wanted, 0, memory_order_relaxed);
}

/* ---- back-pressure (producers) --------------------------------------------- */

/*
 * Only the drainer role compacts, and producers can leave entries behind
 * faster than it takes them out: a timer cancelled or moved earlier leaves
 * its entry in a slot, and while nobody drains or compacts, each call adds
 * one for good. A review's programs (2026-11-30) found three ways, each
 * with fewer than ten timers pending:
 *   - a MANUAL service whose event loop does not call tw_advance while
 *     nothing is due (tw_next_due said an hour), and a paused service,
 *     whose cursor sleeps: 8 bytes an arm-and-cancel, 240 MB after 30M;
 *   - more producer threads than cores, arming and cancelling (or moving)
 *     as fast as they can: the cursor got 6-10% of a core, the logs and
 *     their spills were full (defer.c: the producers placed their timers
 *     themselves), and the wheel grew by 200 MB a second, 13 GB in 60 s,
 *     while the one slot the cursor compacted filled faster than it
 *     emptied it: ticks stood still for seconds.
 * So a producer that places timers itself looks, once every
 * TW_PRESSURE_EVERY placements made on its stripe (the sum over stripes
 * is not read per call; a stripe outlives the threads that come and go),
 * at the wheel's entries against twice compaction's allowance plus
 * TW_PRESSURE_MIN, and past that it pays for what it leaves behind, until
 * the entries are back under that line or the service stops:
 *   - whenever it may take the drainer role and finds it free (MANUAL:
 *     no tw_advance under way, or one running callbacks, the producer's
 *     own included; MONOTONIC: a callback the cursor runs), it takes it
 *     and compacts, as the drainer would (compact_in_role);
 *   - else it wakes the cursor (MONOTONIC), paused or not (a paused
 *     cursor compacts and sleeps again: cursor.c), and yields its CPU
 *     between looks: producers that outrun the cursor wait for it, the
 *     one wait besides max_timers' (timerwheel.h, Progress).
 * Not inside the drainer's own code (tw_advance's or tw_stop's, outside
 * callbacks): it holds the role and places nothing of a caller's.
 */
#define TW_PRESSURE_YIELDS 64      /* yields before the waits sleep */
#define TW_PRESSURE_NAP_NS 100000  /* a nap between looks after those */
#define TW_PRESSURE_STILL 1000     /* looks without progress before giving up */

uint64_t tw__wheel_pressure_line(tw_service *s, uint64_t pending)
{
    return 2 * (2 * pending + s->wheel.compact_slack) + TW_PRESSURE_MIN;
}

bool tw__wheel_pressed(tw_service *s)
{
    return tw__wheel_entries_estimate(s) > tw__wheel_pressure_line(s, tw__pending(s));
}

/* Relaxed: a hint (the drainer's count of positions taken out). */
static uint64_t removed_now(tw_service *s)
{
    return atomic_load_explicit(&s->wheel.removed, memory_order_relaxed);
}

/* Rounds of compaction as the drainer with no step to come meanwhile,
 * to within the allowance, or until a drainer wants its state back
 * (rounds are bounded: compact_round); then the segments it detached. */
static void compact_rounds_alone(tw_service *s)
{
    while (!tw__stopping(s) && !role_wanted(s) && compact_round(s, true))
        ;
    (void)tw__seg_settle(s); /* as tw_advance's end */
}

/* MANUAL: as the drainer, if no tw_advance is under way (the drain lock,
 * tried), or the one under way lends its state (its callbacks run). */
static bool compact_manual(tw_service *s)
{
    if (pthread_mutex_trylock(&s->drain_lock) == 0) {
        compact_rounds_alone(s);
        pthread_mutex_unlock(&s->drain_lock);
        return true;
    }
    /* Relaxed: a first look, before the heavy fence below (a system call
     * that interrupts every CPU the process runs on). */
    if (atomic_load_explicit(&s->role_lendable, memory_order_relaxed) == 0 ||
        pthread_mutex_trylock(&s->role_lock) != 0)
        return false;
    /* Relaxed, then the heavy fence: against tw__drainer_reclaim's store
     * and look (the drainer role, above). Acquire: the state as the step
     * left it (tw__drainer_lend's release). */
    atomic_store_explicit(&s->role_lent, 1, memory_order_relaxed);
    tw__fence_heavy();
    bool lent = atomic_load_explicit(&s->role_lendable, memory_order_acquire) != 0;
    if (lent) {
        tw__count_rare(s, TW_RARE_ROLE_TAKEN);
        compact_rounds_alone(s);
    }
    /* Release: a reclaim that reads 0 from it sees our compaction. */
    atomic_store_explicit(&s->role_lent, 0, memory_order_release);
    pthread_mutex_unlock(&s->role_lock);
    return lent;
}

/* Compaction by a producer under back-pressure, where it may (the drainer
 * role, above). False if it may not now. */
static bool compact_in_role(tw_service *s)
{
    if (s->cfg.clock == TW_CLOCK_MANUAL)
        return compact_manual(s);
    if (!tw__in_callback_of(s) || tw__worker_mine != NULL)
        return false; /* not the cursor's own callback */
    tw__count_rare(s, TW_RARE_ROLE_TAKEN);
    compact_rounds_alone(s);
    return true;
}

void tw__wheel_compact_at_gate(tw_service *s)
{
    if (tw__wheel_pressed(s))
        compact_rounds_alone(s); /* the cursor's thread: its state (above) */
}

/* Inside the drainer's own code: tw_advance or tw_stop of s, outside the
 * callbacks they run (a callback of s is run without the role). */
static bool drains_here(tw_service *s)
{
    return tw__holds(s) && !tw__in_callback_of(s);
}

/* A wait was given up, and the drainer has taken nothing out since: it is
 * held elsewhere (a cursor descheduled for long, or a slot's compaction
 * that outlasts the looks). A wait given up lasted only until the next
 * TW_PRESSURE_EVERY placements, and the next one waited its 0.1 s again
 * (a review's program, 2026-11-30, when the drainer's callbacks kept the
 * role: 11 s for 800 thousand arm-and-cancels). Relaxed: a hint; a wait
 * more or less is all it decides. */
static bool compacting_now(tw_service *s)
{
    /* Relaxed: a hint (compact_round). */
    return atomic_load_explicit(&s->wheel.compacting, memory_order_relaxed) != 0;
}

static bool drainer_held(tw_service *s)
{
    uint64_t at = atomic_load_explicit(&s->wheel.pressure_left_at, memory_order_relaxed);
    return at != 0 && at - 1 == removed_now(s) && !compacting_now(s);
}

void tw__wheel_pressure(tw_service *s)
{
    if (!tw__wheel_pressed(s) || drains_here(s) || drainer_held(s))
        return;
    tw__count_rare(s, TW_RARE_PRESSURE);
    bool manual = s->cfg.clock == TW_CLOCK_MANUAL;
    uint64_t seen = removed_now(s);
    unsigned still = 0; /* looks without progress */
    for (unsigned n = 0; !tw__stopping(s) && tw__wheel_pressed(s); n++) {
        if (!compact_in_role(s) && !manual && n % TW_PRESSURE_YIELDS == 0)
            tw__cursor_compact_now(s); /* again now and then: a wake may meet it awake */
        uint64_t now = removed_now(s);
        still = now == seen && !compacting_now(s) ? still + 1 : 0;
        seen = now;
        if (still > TW_PRESSURE_STILL) {
            /* Compaction took nothing out for that long: the drainer is
             * held elsewhere, or one slot's compaction outlasts the looks
             * (ThreadSanitizer). */
            tw__count_rare(s, TW_RARE_PRESSURE_LEFT);
            /* Relaxed: as in drainer_held. */
            atomic_store_explicit(&s->wheel.pressure_left_at, now + 1, memory_order_relaxed);
            return;
        }
        if (n < TW_PRESSURE_YIELDS) {
            sched_yield();
        } else {
            struct timespec ts = {0, TW_PRESSURE_NAP_NS};
            nanosleep(&ts, NULL);
        }
    }
}

/* ---- the idle scan (the drainer only) ------------------------------------- */

/* Level l's first occupied slot after c's, in circular order (*i); false
 * if it has none. */
static bool level_next_slot(const tw_wheel *w, uint32_t l, uint64_t c, uint32_t *i)
{
    uint32_t start = (uint32_t)(((c >> level_shift(w, l)) + 1) & (w->nslots - 1));
    uint32_t k0 = start / 64, b0 = start % 64;
    const _Atomic uint64_t *occ = &w->occ[(size_t)l * w->occ_words];
    for (uint32_t n = 0; n <= w->occ_words; n++) {
        uint32_t k = (k0 + n) % w->occ_words;
        /* Seq_cst: the other half of occupancy_mark's pairing. */
        uint64_t bits = atomic_load_explicit(&occ[k], memory_order_seq_cst);
        if (n == 0)
            bits &= ~0ull << b0; /* from the start on */
        else if (n == w->occ_words)
            bits &= b0 ? ~(~0ull << b0) : 0; /* back round to the start */
        if (bits) {
            *i = k * 64 + (uint32_t)__builtin_ctzll(bits);
            return true;
        }
    }
    return false;
}

/* The least next epoch after c of level l's occupied slots, or
 * UINT64_MAX. Along the slots in circular order from the one after c's,
 * next_epoch_after only grows (those after c's slot collect for this
 * turn, the rest, c's own last, for the next), so the first occupied one
 * met is the answer: a look at a word or two, where taking the least of
 * every occupied slot's epoch cost a full wheel's (4096 slots, 9 levels)
 * each time, and an early claim now asks between its pieces. */
static uint64_t level_next_work(const tw_wheel *w, uint32_t l, uint64_t c)
{
    uint32_t i;
    return level_next_slot(w, l, c, &i) ? next_epoch_after(w, l, i, c) : UINT64_MAX;
}

uint64_t tw__wheel_next_work(tw_service *s)
{
    tw_wheel *w = &s->wheel;
    /* Relaxed: the drainer's own variable. */
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    for (int j = 0; j < LATE_SLOTS; j++) {
        /* Seq_cst: a late placement is seen here or it sees wake_tick. */
        if (atomic_load_explicit(&w->late[j].word, memory_order_seq_cst) &
            TW_SLOT_COUNT_MASK)
            return c + 1;
    }
    /* Claimed early, or a suspended claim's. */
    uint64_t best = w->staged.n || w->stash.n ? w->staged_tick : UINT64_MAX;
    if (w->cascade.n != 0 && w->cascade_tick < best)
        best = w->cascade_tick; /* an early drain's rest is placed by then */
    for (uint32_t l = 0; l < w->levels; l++) {
        uint64_t e = level_next_work(w, l, c);
        if (e < best)
            best = e;
    }
    return best;
}

/* ---- the sweep ahead (the cursor, before it plans a sleep) ---------------- */

/*
 * A slot whose entries are all stale (their timers cancelled or moved
 * after the cursor placed them) still wakes the cursor at its tick, and
 * compaction leaves such entries alone while the wheel is within its
 * allowance (twice the pending timers plus two entries a slot). After a
 * spell of arming and cancelling, a service with nothing pending then woke
 * at every tick for a turn of level 0: a review's program (2026-11-30,
 * MONOTONIC, 65536 slots) measured 0.062 CPU-s/s and 5004 steps in 5 s,
 * against 0.003 and none before the spell, and a turn of level 0 is 65 s
 * there (4 s with the defaults). So once TW_SWEEP_AFTER steps in a row
 * have claimed nothing, the cursor, before it plans its sleep, looks at
 * the slots its plan would wake for, nearest first: a slot whose entries
 * it reads all stale it compacts (compact_one, the next tick's slot too),
 * and it stops at the first slot with a live entry (or a position
 * reserved and not yet published), where its plan then wakes.
 * Bounds, so that no due step waits for it (a review, 2026-11-30: a
 * first version compacted up to 64 slots of 4096 entries at once, 7 ms,
 * and timers due meanwhile at a 100 us tick were 57 ticks late):
 *   - TW_SWEEP_POSITIONS read a pass, counting both reads of a slot (the
 *     look and the compaction); a pass that ends on its budget, not on a
 *     live slot, says so, the loop passes again (its drains and steps
 *     first), and the next pass goes on without two more idle steps, as
 *     it does after a pass the clock ended;
 *   - a slot of more positions than the budget is left to its tick;
 *   - between slots: the clock (not past the next tick's start), the late
 *     slots (empty), and the logs (no logged timer within TW_DEFER_AHEAD
 *     of the next tick), as the plan itself would look;
 *   - not while a logged timer lacked memory (defer_short).
 * A slot of live entries is read, never placed again (a first version
 * compacted it, and a compaction's "barren" mark then stopped every later
 * sweep at that slot once its timers were cancelled). What a sweep adds
 * to the drains it saves is those reads, after idle steps only.
 */
#define TW_SWEEP_AFTER 2
#define TW_SWEEP_POSITIONS 1024u

/* The occupied slot the cursor's plan wakes for first (of any level);
 * false if there is none. */
static bool next_occupied(const tw_wheel *w, uint64_t c, uint32_t *lo, uint32_t *io)
{
    uint64_t best = UINT64_MAX;
    for (uint32_t l = 0; l < w->levels; l++) {
        uint32_t i;
        if (!level_next_slot(w, l, c, &i))
            continue;
        uint64_t e = next_epoch_after(w, l, i, c);
        if (e < best) {
            best = e;
            *lo = l;
            *io = i;
        }
    }
    return best != UINT64_MAX;
}

/* Whether slot (l, i) holds a live entry, or a position reserved and not
 * yet published (its producer's timer is), or a segment not yet seen. The
 * drainer's own look, as worth_compacting's. */
static bool slot_has_live(tw_service *s, uint32_t l, uint32_t i)
{
    tw_wheel *w = &s->wheel;
    for (uint32_t lane = 0; lane < w->lanes; lane++) {
        tw_slot *sl = slot_at(w, l, i, lane);
        uint64_t n = slot_count_now(sl);
        for (uint64_t k = 0; k < n; k++) {
            _Atomic uint64_t *e = tw__slot_entry(sl, w->cap, (uint32_t)k);
            /* Acquire: as in worth_compacting. */
            uint64_t v = e ? atomic_load_explicit(e, memory_order_acquire) : 0;
            if (!(v & TW_ENTRY_VALUE) || entry_live(s, v))
                return true;
        }
    }
    return false;
}

static bool late_slots_hold(tw_wheel *w)
{
    for (int j = 0; j < LATE_SLOTS; j++) {
        /* Relaxed: a hint; the plan's look after this is seq_cst. */
        if (atomic_load_explicit(&w->late[j].word, memory_order_relaxed) & TW_SLOT_COUNT_MASK)
            return true;
    }
    return false;
}

bool tw__wheel_sweep_ahead(tw_service *s, uint64_t until)
{
    tw_wheel *w = &s->wheel;
    if (w->idle_steps < TW_SWEEP_AFTER || w->cascade.n != 0 || w->staged.n != 0 ||
        w->stash.n != 0 || s->defer_short)
        return false; /* busy, or an early drain's or claim's work waits */
    /* Relaxed: only the drainer writes cur. */
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    uint64_t budget = TW_SWEEP_POSITIONS;
    bool swept = false;
    /* The logs once: what is appended meanwhile has TW_DEFER_AHEAD ticks
     * of margin, and the sweep ends with the tick (the clock, below). */
    if (tw__defer_bound(s) <= c + 1 + TW_DEFER_AHEAD) {
        w->idle_steps = 0;
        return false;
    }
    tw__seg_budget(s); /* compaction gives segments back, as drains do */
    for (;;) {
        uint32_t l = 0, i = 0;
        if (tw__clock_read(s) >= until)
            return false; /* the tick's: its step, then a pass goes on (idle_steps kept) */
        if (!next_occupied(w, c, &l, &i) || late_slots_hold(w))
            break;
        uint64_t n = slot_entries(w, l, i);
        if (2 * n > budget) {
            if (swept && 2 * n <= TW_SWEEP_POSITIONS)
                return true; /* on the budget: the next pass goes on */
            break; /* too large for a pass: its tick drains it */
        }
        budget -= 2 * n;
        if (slot_has_live(s, l, i))
            break; /* the plan wakes for it */
        int stop = COMPACT_ON; /* not in pieces: compact_one leaves it */
        w->compacted += compact_one(s, l, i, c, true, false, &stop);
        if (slot_marked(w, l, i))
            break; /* a producer came meanwhile: the plan wakes for it */
        swept = true;
    }
    w->idle_steps = 0;
    return false;
}

/* ---- the next due time (any thread) --------------------------------------- */

/*
 * tw_next_due: the least due tick of the pending timers, without a lock and
 * without a walk of the timers. Pending timers are in three places:
 *   - in slots: a live entry (a PENDING record carrying the entry's tag) of
 *     a timer due at max(deadline tick, from), from = cur + 1, in a slot
 *     whose epoch is at or before that (placement never puts an entry
 *     after its deadline). So the slots are visited in epoch order (the
 *     occupancy bitmaps give them, level by level, as the cursor's idle
 *     scan does) and the walk ends at the first epoch not before the best
 *     due tick found. A slot within wheel_slots ticks of from has its
 *     entries read (exact), until one is due at the slot's own epoch,
 *     which nothing in it can beat; a slot further away, or one met after
 *     TW_NEXT_DUE_WALK entries were read, answers its epoch (a lower bound:
 *     the loop wakes early, and the tw_advance then re-places the slot);
 *   - claimed and not yet started (FIRING): the drainer counts claims and
 *     keeps claim_floor at or before every such timer's due tick; started
 *     runs and the other ways out of FIRING are counted on the stripes;
 *   - in the drainer's hands during a step or a compaction (taken out of a
 *     slot, not yet placed again or claimed): step_seq is odd meanwhile,
 *     and step_from bounds them. A scan that overlaps a window is done
 *     again, and after three tries answers at most step_from.
 * The slots' words, entries and bitmaps are read seq_cst: with the
 * producers' seq_cst reservation and publish, and the wake-up word
 * (embed.c), a placement that the scan misses sees the loop's new answer
 * and wakes it.
 */
#define TW_NEXT_DUE_WALK 4096
#define TW_MAX_LEVELS (1 + TW_WHEEL_SPAN_BITS) /* 2 slots a level: 42 levels */

typedef struct due_scan {
    tw_service *s;
    uint64_t from;    /* the first tick not processed */
    uint64_t best;    /* least due tick found */
    uint32_t budget;  /* entries left to read */
    bool bounded;     /* best is a slot's tick, not a timer's due tick */
} due_scan;

/* The due tick of slot entry v, or UINT64_MAX if v is not the current
 * entry of a pending timer. */
static uint64_t entry_due(const due_scan *x, uint64_t v)
{
    if (!(v & TW_ENTRY_VALUE))
        return UINT64_MAX; /* reserved, not yet published; or a tombstone */
    tw_record *rec = tw__rec(&x->s->rec, (uint32_t)v);
    if (!rec)
        return UINT64_MAX;
    /* Acquire: as in take_entry (the deadline and seq that go with it). */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    if (tw__st(st) != TW_ST_PENDING || tw__entry_tag(v) != tw__rec_tag(rec, st))
        return UINT64_MAX;
    /* Relaxed: ordered after the acquire of st; a deadline being moved
     * meanwhile is a concurrent call, either value will do. */
    uint64_t k = tw__tick_of(x->s, atomic_load_explicit(&rec->deadline, memory_order_relaxed));
    return k > x->from ? k : x->from;
}

/* Read a slot's entries into x->best; stop early once one is due at
 * `epoch` (nothing in the slot is due sooner). False: out of budget. */
static bool walk_slot(due_scan *x, tw_slot *sl, uint64_t epoch)
{
    const tw_wheel *w = &x->s->wheel;
    /* Seq_cst: see the top (a reservation the loop's wake-up word missed
     * is counted here). */
    uint32_t n = (uint32_t)(atomic_load_explicit(&sl->word, memory_order_seq_cst) &
                            TW_SLOT_COUNT_MASK);
    for (uint32_t p = 0; p < n && x->best > epoch; p++) {
        if (x->budget == 0)
            return false;
        x->budget--;
        _Atomic uint64_t *e = tw__slot_entry(sl, w->cap, p);
        if (!e)
            continue;
        /* Seq_cst: as the word above, for the publish. */
        uint64_t d = entry_due(x, atomic_load_explicit(e, memory_order_seq_cst));
        if (d < x->best)
            x->best = d;
    }
    return true;
}

/* Level l's occupied slots in epoch order after tick from - 1: offset d
 * from the first slot after it (index base mod S). Finds the least
 * offset >= *d whose bit is set; false if none within the turn. */
static bool occupied_from(const tw_wheel *w, uint32_t l, uint64_t base, uint32_t *d)
{
    const uint32_t mask = w->nslots - 1;
    while (*d < w->nslots) {
        uint32_t i = (uint32_t)((base + *d) & mask);
        /* Seq_cst: see the top. */
        uint64_t bits = atomic_load_explicit(&w->occ[(size_t)l * w->occ_words + i / 64],
                                             memory_order_seq_cst) >> (i % 64);
        uint32_t left = 64 - i % 64; /* bits of this word from i on ... */
        if (left > w->nslots - i)
            left = w->nslots - i;    /* ... up to the level's last slot */
        if (bits) {
            uint32_t k = (uint32_t)__builtin_ctzll(bits);
            if (k < left) {
                *d += k;
                return *d < w->nslots;
            }
        }
        *d += left;
    }
    return false;
}

/* The least due tick of the timers in the slots, at most best; or a
 * bound on it (then *bounded: a slot's tick, not a timer's). */
static uint64_t scan_slots(tw_service *s, uint64_t from, uint64_t best, bool *bounded)
{
    tw_wheel *w = &s->wheel;
    due_scan x = {.s = s, .from = from, .best = best, .budget = TW_NEXT_DUE_WALK};
    *bounded = false;
    for (int j = 0; j < LATE_SLOTS; j++) {
        if (!walk_slot(&x, &w->late[j], from)) {
            *bounded = x.best > from;
            return x.best < from ? x.best : from;
        }
    }
    uint64_t base[TW_MAX_LEVELS];
    uint32_t d[TW_MAX_LEVELS];
    bool more[TW_MAX_LEVELS];
    for (uint32_t l = 0; l < w->levels; l++) {
        base[l] = ((from - 1) >> level_shift(w, l)) + 1;
        d[l] = 0;
        more[l] = occupied_from(w, l, base[l], &d[l]);
    }
    const uint64_t exact_until = from + w->nslots; /* the contract's window */
    for (;;) {
        uint32_t pick = UINT32_MAX;
        uint64_t e = UINT64_MAX;
        for (uint32_t l = 0; l < w->levels; l++) {
            uint64_t el = more[l] ? (base[l] + d[l]) << level_shift(w, l) : UINT64_MAX;
            if (el < e) {
                e = el;
                pick = l;
            }
        }
        if (pick == UINT32_MAX || e >= x.best)
            return x.best;
        uint32_t i = (uint32_t)((base[pick] + d[pick]) & (w->nslots - 1));
        bool read = e < exact_until;
        for (uint32_t lane = 0; read && lane < w->lanes; lane++)
            read = walk_slot(&x, slot_at(w, pick, i, lane), e);
        if (!read) {
            *bounded = x.best > e;
            return x.best < e ? x.best : e;
        }
        d[pick]++;
        more[pick] = occupied_from(w, pick, base[pick], &d[pick]);
    }
}

/* A bound read off a slot may be a slot of stale entries only (cancelled
 * far-away timers): with nothing pending that has a due time (a periodic
 * timer whose run is in progress has none until the run returns), the
 * answer is UINT64_MAX, as the contract says (the counters are exact at
 * rest; under concurrent calls either answer is one of the moment). */
static uint64_t unless_nothing_pending(tw_service *s, uint64_t best, bool bounded)
{
    return bounded && tw__pending_due(s) == 0 ? UINT64_MAX : best;
}

uint64_t tw__wheel_next_due(tw_service *s)
{
    tw_wheel *w = &s->wheel;
    for (int attempt = 0;; attempt++) {
        /* Seq_cst: the window's state before the scan (see hands_full). */
        uint64_t seq = atomic_load_explicit(&w->step_seq, memory_order_seq_cst);
        /* Acquire: pairs with hands_full / hands_empty's release. */
        uint64_t from = atomic_load_explicit(&w->step_from, memory_order_acquire);
        uint64_t best = UINT64_MAX;
        /* Exits first, then claims (acquire: with the floor written before
         * them): a claim counted and its exit not yet is counted as left. */
        uint64_t out = tw__fired_total(s) + tw__firing_left_total(s);
        uint64_t in = atomic_load_explicit(&w->claims, memory_order_acquire);
        if (in > out) /* Acquire: pairs with tw__claim_floor_set. */
            best = atomic_load_explicit(&w->claim_floor, memory_order_acquire);
        bool bounded;
        tw_seg_guard g = TW_SEG_GUARD(s);
        tw__seg_enter(&g); /* the walk reads entries of overflow segments */
        best = scan_slots(s, from, best, &bounded);
        tw__seg_done(&g);
        /* Seq_cst: the window's state after it. */
        if (atomic_load_explicit(&w->step_seq, memory_order_seq_cst) == seq && !(seq & 1))
            return unless_nothing_pending(s, best, bounded);
        if (attempt == 2)
            return unless_nothing_pending(s, best < from ? best : from, best > from || bounded);
    }
}

/* ---- the invariant checker (quiescent service) ---------------------------- */

typedef struct check_ctx {
    tw_service *s;
    char *buf;
    size_t len;
    uint64_t *first_epoch; /* per record: epoch of its current entry (0: late) */
    uint32_t *current;     /* per record: entries carrying its current tag */
    uint32_t high;
    uint64_t unpublished;  /* reserved positions never published */
    uint64_t dropped;      /* reservations dropped (TW_RARE_RAN_AWAY) */
} check_ctx;

static int fail(check_ctx *x, const char *fmt, unsigned long long a, unsigned long long b,
                unsigned long long c)
{
    snprintf(x->buf, x->len, fmt, a, b, c);
    return -1;
}

static int check_entries(check_ctx *x, tw_slot *sl, uint64_t epoch, bool late)
{
    tw_wheel *w = &x->s->wheel;
    uint64_t word = atomic_load_explicit(&sl->word, memory_order_acquire);
    uint64_t round = atomic_load_explicit(&sl->seq, memory_order_acquire);
    if (((word >> TW_SLOT_SEQ_SHIFT) & TW_SLOT_SEQ_MASK) != (round & TW_SLOT_SEQ_MASK))
        return fail(x, "slot word shows round %llu, seq is %llu (epoch %llu)",
                    (word >> TW_SLOT_SEQ_SHIFT) & TW_SLOT_SEQ_MASK, round, epoch);
    uint32_t n = (uint32_t)(word & TW_SLOT_COUNT_MASK);
    if (word & TW_SLOT_CLOSED)
        return fail(x, "slot closed at rest (epoch %llu)%llu%llu", epoch, 0, 0);
    for (uint32_t p = 0;; p++) {
        _Atomic uint64_t *e = tw__slot_entry(sl, w->cap, p);
        if (!e)
            break;
        uint64_t v = atomic_load_explicit(e, memory_order_acquire);
        if (p < n && !(v & TW_ENTRY_VALUE)) {
            /* At rest only a dropped reservation (cursor_ran_away) stays
             * unpublished, until its drain tombstones it. (The bound is
             * every drop ever counted: loose once one happened.) */
            if (++x->unpublished > x->dropped)
                return fail(x, "reserved entry %llu unpublished at rest (epoch %llu)%llu",
                            p, epoch, 0);
            continue;
        }
        if (p >= n && ((v & TW_ENTRY_VALUE) || v > round))
            return fail(x, "entry %llu past count holds %llx (epoch %llu)", p, v, epoch);
        if (p < n) {
            uint32_t idx = (uint32_t)v;
            tw_record *rec = tw__rec(&x->s->rec, idx);
            if (!rec)
                return fail(x, "entry names record %llu of no chunk (top %llu)%llu", idx,
                            x->high, 0);
            uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
            if (idx >= x->high) {
                /* Above the table's top: a stale entry into a chunk given
                 * back (records.c), whose records read FREE. */
                if (tw__st(st) != TW_ST_FREE)
                    return fail(x, "entry names record %llu beyond %llu in state %llu", idx,
                                x->high, tw__st(st));
                continue;
            }
            if (tw__st(st) == TW_ST_PENDING && tw__entry_tag(v) == tw__rec_tag(rec, st)) {
                x->current[idx]++;
                if (x->first_epoch[idx] > epoch)
                    x->first_epoch[idx] = late ? 0 : epoch;
            }
        }
    }
    return 0;
}

static int check_slots(check_ctx *x)
{
    tw_wheel *w = &x->s->wheel;
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_acquire);
    for (size_t k = 0; k < slots_total(w); k++) {
        uint32_t i = (uint32_t)(k % w->nslots), l = (uint32_t)(k / w->nslots % w->levels);
        tw_slot *sl = &w->slot[k];
        uint64_t e = next_epoch_after(w, l, i, c);
        uint64_t word = atomic_load_explicit(&sl->word, memory_order_acquire);
        uint64_t open_for = atomic_load_explicit(&sl->epoch, memory_order_acquire);
        if (open_for == 0) /* never drained: its first round */
            open_for = next_epoch_after(w, l, i, 0);
        if (open_for != e)
            return fail(x, "slot %llu of level %llu not open for epoch %llu", i, l, e);
        uint64_t occ = atomic_load_explicit(&w->occ[(size_t)l * w->occ_words + i / 64],
                                            memory_order_acquire);
        if ((word & TW_SLOT_COUNT_MASK) && !(occ & (1ull << (i % 64))))
            return fail(x, "slot %llu of level %llu occupied, bit clear%llu", i, l, 0);
        if (check_entries(x, sl, e, false))
            return -1;
    }
    for (int j = 0; j < LATE_SLOTS; j++) {
        if (check_entries(x, &w->late[j], 0, true))
            return -1;
    }
    return 0;
}

static int check_records(check_ctx *x, uint64_t *pending)
{
    for (uint32_t idx = 0; idx < x->high; idx++) {
        tw_record *rec = tw__rec(&x->s->rec, idx);
        if (!rec)
            continue;
        uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
        uint32_t kind = tw__st(st);
        if (kind != TW_ST_FREE && kind != TW_ST_PENDING)
            return fail(x, "record %llu in state %llu at rest%llu", idx, kind, 0);
        if (st & (TW_F_LEASE | TW_F_DONE | TW_F_MOVED | TW_F_CANCELREQ))
            return fail(x, "record %llu has transient flags %llx%llu", idx, st & 0xff, 0);
        if (tw__gen(st) == 0 && kind != TW_ST_FREE)
            return fail(x, "live record %llu has generation 0%llu%llu", idx, 0, 0);
        if (kind != TW_ST_PENDING)
            continue;
        (*pending)++;
        uint64_t k = tw__tick_of(x->s, atomic_load_explicit(&rec->deadline,
                                                            memory_order_acquire));
        uint64_t c = atomic_load_explicit(&x->s->wheel.cur, memory_order_acquire);
        if (k <= c)
            k = c + 1; /* already due when armed: placed for the next tick */
        if (x->first_epoch[idx] > k)
            return fail(x, "pending record %llu (due tick %llu) has no entry at or "
                           "before it (earliest %llu)", idx, k, x->first_epoch[idx]);
        /* One placement at rest: a second current entry would be a copy
         * that the drain re-places along with the first. */
        if (x->current[idx] != 1)
            return fail(x, "pending record %llu has %llu current entries, not one%llu",
                        idx, x->current[idx], 0);
    }
    return 0;
}

/* One record met on a free list: in use by no one (FREE), met once. */
typedef struct list_visit {
    check_ctx *x;
    uint8_t *seen;
    uint32_t bad;
} list_visit;

static bool visit_free_record(void *ctx, uint32_t idx)
{
    list_visit *v = ctx;
    tw_record *rec = tw__rec(&v->x->s->rec, idx);
    /* Acquire: a quiet service; as the pops read it. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    if (idx >= v->x->high || tw__st(st) != TW_ST_FREE || v->seen[idx]++) {
        v->bad = idx;
        return false;
    }
    return true;
}

/* Chunk j's free list, its blocks walked as trees (records.c): every
 * record FREE, in chunk j, on it once, and as many as its count says. */
static int check_free_list(check_ctx *x, uint32_t j, uint8_t *seen)
{
    list_visit v = { .x = x, .seen = seen, .bad = UINT32_MAX };
    int64_t met = tw__rec_list_walk(&x->s->rec, j, x->high, visit_free_record, &v);
    if (met < 0)
        return fail(x, "free list %llu broken at record %llu (%llu: 1 not FREE or met twice, "
                    "0 out of its chunk or a broken tree)", j, v.bad, v.bad != UINT32_MAX);
    /* Relaxed: a quiet service. */
    int32_t counted = atomic_load_explicit(&x->s->rec.list[j].free_n, memory_order_relaxed);
    if (counted != met)
        return fail(x, "free list %llu holds %llu records but counts %llu", j,
                    (unsigned long long)met, (unsigned long long)(int64_t)counted);
    return 0;
}

static int check_free_lists(check_ctx *x)
{
    uint8_t *seen = calloc((size_t)x->high + 1, 1);
    if (!seen)
        return fail(x, "checker out of memory%llu%llu%llu", 0, 0, 0);
    int rc = 0;
    for (uint32_t j = 0; j < TW_REC_CHUNKS && !rc; j++)
        rc = check_free_list(x, j, seen);
    free(seen);
    return rc;
}

int tw__check(tw_service *s, char *buf, size_t len)
{
    check_ctx x = {.s = s, .buf = buf, .len = len, .high = tw__records_high(&s->rec),
                   .dropped = tw__rare_total(s, TW_RARE_RAN_AWAY)};
    x.first_epoch = malloc(((size_t)x.high + 1) * sizeof *x.first_epoch);
    x.current = calloc((size_t)x.high + 1, sizeof *x.current);
    if (!x.first_epoch || !x.current) {
        free(x.first_epoch);
        free(x.current);
        snprintf(buf, len, "checker out of memory");
        return -1;
    }
    for (uint32_t i = 0; i <= x.high; i++)
        x.first_epoch[i] = UINT64_MAX;
    uint64_t pending = 0;
    tw_seg_guard g = TW_SEG_GUARD(s);
    tw__seg_enter(&g);
    int rc = check_slots(&x);
    tw__seg_done(&g);
    if (!rc)
        rc = check_records(&x, &pending);
    if (!rc)
        rc = check_free_lists(&x);
    if (!rc) {
        tw_stats st;
        tw_stats_get(s, &st);
        if (st.pending != pending)
            rc = fail(&x, "stats.pending %llu but %llu records pending%llu",
                      st.pending, pending, 0);
    }
    free(x.first_epoch);
    free(x.current);
    if (!rc && len)
        buf[0] = '\0';
    return rc;
}
