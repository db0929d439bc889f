/*
 * slots.c: one lock-free wheel slot. Producers fill it through a
 * CAS-incremented counter; the drainer (the cursor) closes and empties it.
 *
 * A slot collects, at any moment, for one round: a wheel slot's round is
 * one epoch (the tick at which the cursor will drain it); a late slot's
 * rounds are just numbered. The slot's header holds
 *
 *     word  = seq (31) | closed (1) | count (32)
 *     seq   the round's number: every drain and every compaction starts a
 *           new one (64 bits; the word carries its low 31 bits)
 *     epoch the epoch the round collects for (wheel slots); 0 until the
 *           slot's first drain: its first round, whose epoch is the one a
 *           producer aims at (the wheel's slots start as zero pages, so a
 *           slot costs memory only once it is used)
 *
 * and entries compare by round number: an EMPTY(k) entry admits a publish
 * from a round k or later. The drainer writes epoch and seq before it
 * reopens the word (release); a producer reads them after the word
 * (acquire), so a successful CAS on the word vouches for both.
 *
 * Protocol (producer, target epoch e):
 *   1. reserve: read seq (a lower bound q0), then the word; if closed ->
 *      CLOSED (go elsewhere); if the round's epoch is later than e ->
 *      NEWER (re-read the cursor: the "cursor race" of the seed design, a
 *      write landing in a slot that will not come round again for a whole
 *      rotation, cannot happen); else CAS count -> count + 1. The position
 *      is ours in that round: e's, or an older one the drainer has not
 *      reached yet (an older epoch drains sooner, which is never late, and
 *      the drain re-places timers that are not yet due). Our round number
 *      is the one whose low 31 bits the word showed, at or after q0.
 *   2. publish: CAS the entry from EMPTY(k), k <= our round, to our VALUE.
 *      If the drainer got there first, the entry holds EMPTY of a later
 *      round (a tombstone) or another producer's VALUE: the publish fails
 *      and the producer places the timer again. Nobody waits.
 * Protocol (drainer):
 *   3. close: fetch_or the closed bit; count n is now final.
 *   4. take: for every position < n, exchange the entry with EMPTY(next
 *      round). A VALUE is taken; an EMPTY means "reserved, not published":
 *      that producer's publish will now fail (the tombstone).
 *   5. reopen: store epoch and seq, then (release) the word: next round,
 *      open, count 0.
 * A producer delayed across a reopen can therefore never publish into a
 * later round. A drain reopens for the slot's next epoch; a compaction
 * (tw__slot_compact) for the same one: it takes the entries early, the
 * drainer places the live ones again (wheel.c), and producers reserve
 * from position 0 again. Why compaction: a cancelled timer and a
 * superseded placement leave an entry that is dropped only when its slot
 * comes round; a slot an hour away would hold one for every such call by
 * then. Compaction gives that room back (wheel.c decides when).
 *
 * Why 64-bit round numbers rather than bits of the word: a slot an hour
 * away stays in one round for an hour and may be compacted thousands of
 * times meanwhile; any few-bit count would wrap, and a producer stalled
 * across the wrap could publish into a round that will not take its
 * position. The word's 31 bits only have to tell rounds apart between a
 * producer's read of q0 and its CAS: a producer that finds 2^30 rounds
 * passed by then (it stalled that long) drops its position unpublished and
 * places again (TW_SLOT_RAN_AWAY), and a CAS that an exact 2^31 rounds'
 * wrap let through is caught there too.
 *
 * Room: segment 0 holds slot_capacity entries, overflow segment j >= 1
 * holds 64 << (j - 1); each is made on first use (CAS-installed; the loser
 * hands its copy to the drainer, tw__seg_unused), segment 0 too, so a slot that is never used costs
 * its header only. The pointers to segments 0..TW_SLOT_NEAR-1 sit in the
 * slot's own line, the rest in a table made on first use. Segments of a
 * page or more are mapped one by one, smaller ones come from malloc
 * (segments.c).
 * A producer makes the segment for position p before it reserves p, so a
 * reserved position always has memory and the drainer never allocates.
 * Nothing is ever refused for lack of room.
 *
 * Giving segments back (tw__slot_detach): the fixed array (segment 0)
 * stays with the slot; every overflow segment, and the table, is detached
 * by the drainer after it has taken every position and before it reopens
 * (an exchange with NULL: a producer may install concurrently), and freed
 * after a grace period (segments.c). Why that is safe:
 *   - A producer publishes into the entry its reservation returned (the
 *     segment it loaded before its reserve CAS), never one looked up
 *     again. A stale producer's position was tombstoned in that segment,
 *     so its publish fails there, even though the slot may hold a fresh
 *     segment (all EMPTY(0)) at the same position by then. Looking the
 *     entry up again at publish would let it succeed into the fresh one, a
 *     round too late (stress/model: BROKEN_REDERIVE_SEGMENT).
 *   - A successful reserve CAS saw the word unchanged since the producer
 *     read it, open, so no drain closed the slot in between: the segment
 *     it loaded after that read (acquire, after the reopen's release that
 *     follows every detach) is the round's own.
 *   - A producer that read the word before a close may install a segment
 *     after the drainer detached: the install stays with the slot (fresh,
 *     for the next round) and its reserve fails; one installed into a
 *     detached table is never reserved and is freed with the table. If
 *     the next round reserves nothing, no drain may come for a long time
 *     (a wheel slot reopened a turn away, an idle cursor): a producer
 *     that installed and then lost its reservation marks the slot, and
 *     the trim gives such a segment back
 *     (tw__slot_give_back; wheel.c, strays).
 *   - Readers of segments (reserving past the fixed array, publishing,
 *     tw_next_due's walk, the checker) stay inside a tw_seg_guard until
 *     they are done with the pointer.
 */
#include "internal.h"

#include <stdlib.h>
#include <sys/mman.h>

#define EMPTY_KEY_MASK (~TW_ENTRY_VALUE)

/* Segment 0 is the fixed array (cap entries). Overflow position p = pos -
 * cap lies in segment j >= 1, which holds TW_OVF0 << (j - 1) entries and
 * covers p in [TW_OVF0 (2^(j-1) - 1), TW_OVF0 (2^j - 1)): shifts and a
 * count of leading zeros, no division on the hot path. */
#define TW_OVF0_SHIFT 6
static uint32_t seg_of(uint32_t cap, uint32_t pos, uint32_t *off)
{
    if (pos < cap) {
        *off = pos;
        return 0;
    }
    uint32_t p = pos - cap;
    uint64_t q = ((uint64_t)p >> TW_OVF0_SHIFT) + 1;
    uint32_t k = 63u - (uint32_t)__builtin_clzll(q);
    *off = p - (uint32_t)(((1ull << k) - 1) << TW_OVF0_SHIFT);
    return k + 1;
}

bool tw__slot_segment_start(uint32_t cap, uint32_t pos)
{
    uint32_t off;
    return seg_of(cap, pos, &off) > 0 && off == 0;
}

static size_t seg_len(uint32_t cap, uint32_t j)
{
    return j == 0 ? cap : (size_t)1 << (TW_OVF0_SHIFT + j - 1);
}

/* Where segment j's pointer lives: in the slot's own line for the first
 * TW_SLOT_NEAR (a reservation then touches one line before its entry: perf
 * of WL1 put 40% of tw__slot_reserve on the load of a pointer from a
 * separate table), else in the overflow table, made here if `make`.
 * NULL: no table (and not `make`), or no memory for one. */
typedef _Atomic(_Atomic uint64_t *) seg_ptr;
static seg_ptr *seg_ptr_of(tw_slot *sl, uint32_t j, tw_seg_guard *make)
{
    if (j < TW_SLOT_NEAR)
        return &sl->near[j];
    /* Acquire: pairs with the release CAS that installed it. */
    tw_overflow *o = atomic_load_explicit(&sl->ovf, memory_order_acquire);
    if (!o && make) {
        tw_overflow *fresh = tw__seg_alloc(make, sizeof *fresh, true);
        if (!fresh)
            return NULL;
        /* Release on success publishes the zeroed table; acquire on
         * failure reads the winner's. */
        if (atomic_compare_exchange_strong_explicit(&sl->ovf, &o, fresh,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire)) {
            o = fresh;
            make->installed = true; /* see wheel.c, strays: marked if the reserve is lost */
        } else
            tw__seg_unused(make, fresh, sizeof *fresh);
    }
    return o ? &o->seg[j - TW_SLOT_NEAR] : NULL;
}

void tw__slot_init(tw_slot *sl, uint64_t epoch)
{
    atomic_init(&sl->word, 0);
    atomic_init(&sl->seq, 0);
    atomic_init(&sl->epoch, epoch);
    atomic_init(&sl->ovf, NULL);
    for (uint32_t j = 0; j < TW_SLOT_NEAR; j++)
        atomic_init(&sl->near[j], NULL);
}

_Atomic uint64_t *tw__slot_entry(tw_slot *sl, uint32_t cap, uint32_t pos)
{
    uint32_t off;
    uint32_t j = seg_of(cap, pos, &off);
    seg_ptr *sp = seg_ptr_of(sl, j, NULL);
    /* Acquire: the segment's zeroed (EMPTY(0)) entries are visible. */
    _Atomic uint64_t *seg = sp ? atomic_load_explicit(sp, memory_order_acquire) : NULL;
    return seg ? &seg[off] : NULL;
}

static size_t seg_bytes(uint32_t cap, uint32_t j)
{
    return seg_len(cap, j) * sizeof(_Atomic uint64_t);
}

/* Make sure position pos has memory before anyone reserves it; *entry
 * is its entry. An overflow position enters the segments' read side
 * first (g), so the segment cannot be freed while we hold it. */
static int ensure_room(tw_slot *sl, tw_seg_guard *g, uint32_t cap, uint32_t pos,
                       _Atomic uint64_t **entry)
{
    uint32_t off;
    uint32_t j = seg_of(cap, pos, &off);
    if (j > 0)
        tw__seg_enter(g);
    seg_ptr *sp = seg_ptr_of(sl, j, g);
    if (!sp)
        return TW_ENOMEM;
    /* Acquire: as in tw__slot_entry. */
    _Atomic uint64_t *have = atomic_load_explicit(sp, memory_order_acquire);
    if (have) {
        /* The entry we are about to reserve: its line (last written by the
         * drain's tombstones, on another core) comes in while we reserve. */
        tw__prefetch_for_write(&have[off]);
        *entry = &have[off];
        return TW_OK;
    }
    _Atomic uint64_t *seg = tw__seg_alloc(g, seg_bytes(cap, j), j > 0);
    if (!seg)
        return TW_ENOMEM;
    TW_INJECT(TW_INJ_SEG_INSTALL);
    /* Release publishes the zeroed segment; acquire on failure reads the
     * winner's, and the loser frees its copy (never published). */
    if (atomic_compare_exchange_strong_explicit(sp, &have, seg, memory_order_acq_rel,
                                                memory_order_acquire)) {
        have = seg;
        if (j > 0)
            g->installed = true; /* see wheel.c, strays: marked if the reserve is lost */
    } else {
        if (j > 0)
            tw__seg_unused(g, seg, seg_bytes(cap, j));
        else
            tw__seg_free(g->s, seg, seg_bytes(cap, j), false); /* seen by nobody */
    }
    *entry = &have[off];
    return TW_OK;
}

/* The round number whose low 31 bits the word `w` shows, given q0, a
 * value of seq read before the word: the first such number >= q0. */
static uint64_t round_of(uint64_t w, uint64_t q0)
{
    uint32_t low = (uint32_t)(w >> TW_SLOT_SEQ_SHIFT) & TW_SLOT_SEQ_MASK;
    return q0 + ((low - (uint32_t)q0) & TW_SLOT_SEQ_MASK);
}

static int reserve_at(tw_slot *sl, tw_seg_guard *g, uint32_t cap, uint64_t *w,
                      uint32_t *pos, _Atomic uint64_t **entry)
{
    uint32_t count = (uint32_t)(*w & TW_SLOT_COUNT_MASK);
    if (count == UINT32_MAX)
        return TW_SLOT_CLOSED_NOW; /* cannot count further: go elsewhere */
    int rc = ensure_room(sl, g, cap, count, entry);
    if (rc != TW_OK)
        return rc;
    /* Seq_cst on success (acq_rel would do for the slot itself, and costs
     * the same locked instruction). Acquire: we read the word the drainer
     * reopened with its release store, so the entries it reset (and the
     * round's epoch and seq) are visible. Release: the drainer's close
     * (acquire) that counts our position also sees the segment we (or
     * another producer, before its own release here) installed for it, so
     * it never finds the pointer NULL. Seq_cst: tw_next_due's seq_cst load
     * of the word counts our position if the loop's wake-up word missed us
     * (embed.c). Acquire on failure: we look at the new word. */
    if (atomic_compare_exchange_weak_explicit(&sl->word, w, *w + 1,
                                              memory_order_seq_cst,
                                              memory_order_acquire)) {
        *pos = count;
        return TW_SLOT_OK;
    }
    return -100; /* word changed: caller re-examines *w */
}

/* After a successful reservation: the round it is in (*round), unless the
 * slot went through 2^30 rounds since q0, which makes that ambiguous. */
static int settle_round(tw_slot *sl, uint64_t w, uint64_t q0, uint64_t *round)
{
    /* Acquire: the round numbers the drainer stored before its reopens. */
    uint64_t q1 = atomic_load_explicit(&sl->seq, memory_order_acquire);
    if (q1 - q0 >= TW_SLOT_RAN_AWAY_ROUNDS)
        return TW_SLOT_RAN_AWAY;
    *round = round_of(w, q0);
    return TW_SLOT_OK;
}

int tw__slot_reserve(tw_slot *sl, tw_seg_guard *g, uint32_t cap, uint64_t epoch,
                     uint32_t *pos, _Atomic uint64_t **entry, uint64_t *round,
                     uint64_t *round_epoch)
{
    ck_backoff_t backoff = CK_BACKOFF_INITIALIZER;
    /* Acquire: the lower bound q0 comes before the word. */
    uint64_t q0 = atomic_load_explicit(&sl->seq, memory_order_acquire);
    /* Acquire: see the drainer's reopen (and, through it, the cursor). */
    uint64_t w = atomic_load_explicit(&sl->word, memory_order_acquire);
    for (;;) {
        if (w & TW_SLOT_CLOSED)
            return TW_SLOT_CLOSED_NOW;
        /* Relaxed: ordered after the word (acquire); if a drain came in
         * between, the CAS below fails and we look again. */
        uint64_t e = atomic_load_explicit(&sl->epoch, memory_order_relaxed);
        if (e == 0)
            e = epoch; /* never drained: its first round, the one we aim at */
        if (e > epoch)
            return TW_SLOT_NEWER;
        int rc = reserve_at(sl, g, cap, &w, pos, entry);
        if (rc == TW_SLOT_OK) {
            *round_epoch = e;
            return settle_round(sl, w, q0, round);
        }
        if (rc != -100)
            return rc;
        ck_backoff_eb(&backoff);
        /* Acquire: re-read after backing off; the CAS's copy is stale by now. */
        w = atomic_load_explicit(&sl->word, memory_order_acquire);
    }
}

int tw__slot_reserve_any(tw_slot *sl, tw_seg_guard *g, uint32_t cap, uint32_t *pos,
                         _Atomic uint64_t **entry, uint64_t *round)
{
    ck_backoff_t backoff = CK_BACKOFF_INITIALIZER;
    /* Acquire: as in tw__slot_reserve. */
    uint64_t q0 = atomic_load_explicit(&sl->seq, memory_order_acquire);
    uint64_t w = atomic_load_explicit(&sl->word, memory_order_acquire);
    for (;;) {
        if (w & TW_SLOT_CLOSED)
            return TW_SLOT_CLOSED_NOW;
        int rc = reserve_at(sl, g, cap, &w, pos, entry);
        if (rc == TW_SLOT_OK)
            return settle_round(sl, w, q0, round);
        if (rc != -100)
            return rc;
        ck_backoff_eb(&backoff);
        /* Acquire: re-read after backing off; the CAS's copy is stale by now. */
        w = atomic_load_explicit(&sl->word, memory_order_acquire);
    }
}

/* What position pos most likely holds when its reserver publishes in
 * round `round`: an overflow segment serves one round (the drain detaches
 * it) and is made zeroed, EMPTY(0); an entry of the fixed array was reset
 * by the last take to EMPTY(the round after it), ours, if it was reserved
 * in the round before. A wrong guess costs one more CAS, never a wrong
 * answer: the CAS checks it. */
static uint64_t expected_empty(uint32_t cap, uint32_t pos, uint64_t round)
{
    return pos < cap ? round & EMPTY_KEY_MASK : 0;
}

bool tw__slot_publish(_Atomic uint64_t *e, uint32_t cap, uint32_t pos, uint64_t round,
                      uint64_t value)
{
    TW_INJECT(TW_INJ_RESERVE_PUBLISH);
    /* A guess, not a load, for the first CAS: on a page nobody has touched
     * yet (a new segment's), a load maps the shared zero page, and the
     * CAS's write then copies it and shoots the old mapping out of every
     * core's TLB: an IPI to each core the process runs on, which a VM
     * pays in exits on both sides (perf, WL2 at 1M, 2026-11-28: 3-7% of
     * the samples, in do_wp_page, most of it waiting for the IPI). A
     * CAS's first touch is a write fault, which maps a page of our own. */
    uint64_t cur = expected_empty(cap, pos, round);
    for (;;) {
        /* Release: the drainer's exchange (acq_rel) then sees the record
         * as we armed it. Seq_cst: as the reservation, for tw_next_due's
         * look at the entry (embed.c); the same locked instruction.
         * Relaxed on failure: cur is only looked at, below. */
        if (atomic_compare_exchange_weak_explicit(e, &cur, value,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed))
            return true;
        if ((cur & TW_ENTRY_VALUE) || (cur & EMPTY_KEY_MASK) > round)
            return false; /* tombstoned, or a later round's */
    }
}

size_t tw__vec_cap_for(const tw_vec *vec, size_t n)
{
    size_t cap = vec->cap ? vec->cap : 1024;
    while (cap < n)
        cap *= 2;
    return cap;
}

void tw__vec_reserve(tw_vec *vec, size_t n)
{
    if (vec->cap >= n)
        return;
    size_t cap = tw__vec_cap_for(vec, n);
    uint64_t *v = realloc(vec->v, cap * sizeof *v);
    if (!v)
        abort(); /* the drainer cannot refuse work: see README, limits */
    /* A burst of a million timers grows the drainer's lists to tens of MB
     * in one step: one fault per 2 MiB, not per 4 KiB (page faults were
     * half of such a step in perf). */
    tw__advise_huge_pages(v, cap * sizeof *v);
    vec->v = v;
    vec->cap = cap;
}

bool tw__vec_touch(tw_vec *vec, size_t upto)
{
    const size_t page = 4096 / sizeof *vec->v;
    upto = upto < vec->cap ? upto : vec->cap;
    size_t from = vec->touched > vec->n ? vec->touched : vec->n;
    if (from >= upto)
        return false;
    size_t end = from + TW_TOUCH_PIECE / sizeof *vec->v;
    end = end < upto ? end : upto;
    /* Room past n: its contents are ours to overwrite. A write a page
     * faults the page in (or its whole huge page). */
    for (size_t i = from; i < end; i += page)
        vec->v[i] = 0;
    vec->v[end - 1] = 0;
    vec->touched = end;
    return end < upto;
}

void tw__vec_push(tw_vec *vec, uint64_t x)
{
    if (vec->n == vec->cap)
        tw__vec_reserve(vec, vec->n + 1);
    vec->v[vec->n++] = x;
}

void tw__vec_note(tw_vec *vec)
{
    if (vec->n > vec->peak)
        vec->peak = vec->n;
}

void tw__vec_clear(tw_vec *vec)
{
    tw__vec_note(vec);
    vec->n = 0;
}

void tw__vec_swap(tw_vec *a, tw_vec *b)
{
    tw_vec t = *a;
    *a = *b;
    *b = t;
}

/* Why trim: a burst grows the drainer's lists in one step, and a list
 * that never shrank kept them for the service's life (a million timers in
 * one tick: 21 MB of lists with two workers, plus 3.6 MB of their
 * batches, workers.c). Why a quarter and two periods: a burst that comes
 * back every period or so keeps its lists (no reallocation and page
 * faults per burst); a list is cut to twice what it needed. */
void tw__vec_trim(tw_vec *vec)
{
    size_t need = vec->peak > vec->peak_prev ? vec->peak : vec->peak_prev;
    need = need > vec->n ? need : vec->n;
    vec->peak_prev = vec->peak > vec->n ? vec->peak : vec->n;
    vec->peak = 0;
    if (vec->cap > TW_VEC_KEEP && vec->cap / 4 >= need) {
        size_t cap = TW_VEC_KEEP;
        while (cap < 2 * need)
            cap *= 2;
        uint64_t *v = realloc(vec->v, cap * sizeof *v);
        if (v) { /* else keep the larger array: always safe */
            vec->v = v;
            vec->cap = cap;
            vec->touched = vec->touched < cap ? vec->touched : cap;
        }
    }
}

bool tw__vec_above_keep(const tw_vec *vec)
{
    /* Unused from now on, a trim would cut it (within two more periods). */
    return vec->cap > TW_VEC_KEEP && vec->cap / 4 >= vec->n;
}

void tw__vec_free(tw_vec *vec)
{
    free(vec->v);
    vec->v = NULL;
    vec->peak = vec->peak_prev = 0;
    vec->n = vec->cap = vec->touched = 0;
}

static uint32_t slot_close(tw_slot *sl)
{
    /* Acq_rel: acquire the producers' reservations (their release CAS
     * on the word), and with them the segments of the positions counted;
     * release nothing in particular but keep the close ordered before the
     * entry exchanges below. */
    uint64_t w = atomic_fetch_or_explicit(&sl->word, TW_SLOT_CLOSED,
                                          memory_order_acq_rel);
    return (uint32_t)(w & TW_SLOT_COUNT_MASK);
}

uint32_t tw__slot_close(tw_slot *sl)
{
    return slot_close(sl);
}

void tw__slot_take(tw_slot *sl, uint32_t cap, uint32_t from, uint32_t to, tw_vec *out)
{
    /* Relaxed: only the drainer writes seq (it does in tw__slot_reopen). */
    uint64_t next = atomic_load_explicit(&sl->seq, memory_order_relaxed) + 1;
    TW_INJECT(TW_INJ_CLOSE_DRAIN);
    tw__vec_reserve(out, out->n + (to - from));
    /* A segment at a time: its pointer is looked up once, not per position
     * (the take of a million-entry slot holds the slot closed). */
    for (uint32_t p = from; p < to;) {
        uint32_t off;
        uint32_t j = seg_of(cap, p, &off);
        uint32_t end = p + (uint32_t)(seg_len(cap, j) - off);
        end = end < to ? end : to;
        _Atomic uint64_t *e = tw__slot_entry(sl, cap, p);
        for (; p < end; p++, e++) {
            /* Acq_rel: acquire a published VALUE (pairs with the producer's
             * release CAS); release our tombstone so a late producer's
             * failing CAS is ordered after our close. */
            uint64_t v = atomic_exchange_explicit(e, next & EMPTY_KEY_MASK, memory_order_acq_rel);
            if (v & TW_ENTRY_VALUE)
                out->v[out->n++] = v; /* room reserved above */
        }
    }
}

void tw__slot_reopen(tw_slot *sl, uint64_t epoch)
{
    /* Relaxed: only the drainer writes seq. */
    uint64_t next = atomic_load_explicit(&sl->seq, memory_order_relaxed) + 1;
    /* Relaxed, both: published by the release store of the word below. */
    atomic_store_explicit(&sl->epoch, epoch, memory_order_relaxed);
    atomic_store_explicit(&sl->seq, next, memory_order_relaxed);
    uint64_t open = ((next & TW_SLOT_SEQ_MASK) << TW_SLOT_SEQ_SHIFT);
    /* Release: producers that see the new round (acquire) also see every
     * entry reset before, its epoch and seq, and the cursor published
     * before the close. */
    atomic_store_explicit(&sl->word, open, memory_order_release);
}

/* Take the n reserved positions of a closed slot: published values go to
 * out, every entry becomes EMPTY(the next round); then open the next
 * round, for `epoch`. Returns n. */
static uint32_t drain_reserved(tw_slot *sl, uint32_t cap, uint32_t n, uint64_t epoch,
                               tw_vec *out, tw_segs *g)
{
    tw__slot_take(sl, cap, 0, n, out);
    tw__slot_detach(sl, cap, g);
    tw__slot_reopen(sl, epoch);
    return n;
}

uint32_t tw__slot_compact(tw_slot *sl, uint32_t cap, tw_vec *out, tw_segs *g)
{
    /* Relaxed: only the drainer writes a slot's epoch. */
    uint64_t epoch = atomic_load_explicit(&sl->epoch, memory_order_relaxed);
    return drain_reserved(sl, cap, slot_close(sl), epoch, out, g);
}

uint32_t tw__slot_drain_late(tw_slot *sl, uint32_t cap, tw_vec *out, tw_segs *g)
{
    uint32_t n = slot_close(sl);
    if (n == 0) {
        /* Nobody reserved in this round, so nobody can publish into it:
         * reopen the same round. Relaxed: only the drainer writes the
         * word's round; release: as in drain_reserved. */
        uint64_t w = atomic_load_explicit(&sl->word, memory_order_relaxed);
        atomic_store_explicit(&sl->word, w & ~(TW_SLOT_CLOSED | TW_SLOT_COUNT_MASK),
                              memory_order_release);
        return 0;
    }
    return drain_reserved(sl, cap, n, 0, out, g);
}

/* Detach the pointer at sp (the drainer's exchange: a producer may be
 * installing) and retire what it held. Acquire: the installer's zeroing
 * happens before our free; release: nothing, as the reopen publishes. */
static void retire_at(seg_ptr *sp, size_t bytes, tw_segs *g)
{
    _Atomic uint64_t *seg = atomic_exchange_explicit(sp, NULL, memory_order_acquire);
    if (seg)
        tw__seg_retire(g, seg, bytes, false);
}

bool tw__slot_holds_overflow(tw_slot *sl)
{
    /* Relaxed: a look at our own slot's line, to skip the common case of
     * a round that never left the fixed array; an install we miss stays
     * for the next round (or, if that reserves nothing, for the trim:
     * wheel.c, strays). */
    bool any = atomic_load_explicit(&sl->ovf, memory_order_relaxed) != NULL;
    for (uint32_t j = 1; j < TW_SLOT_NEAR && !any; j++)
        any = atomic_load_explicit(&sl->near[j], memory_order_relaxed) != NULL;
    return any;
}

bool tw__slot_detach(tw_slot *sl, uint32_t cap, tw_segs *g)
{
    if (!tw__slot_holds_overflow(sl))
        return true; /* nothing to give back */
    if (!tw__seg_may_retire(g, TW_SLOT_SEGS))
        return false; /* within the budget, or too much waiting already */
    for (uint32_t j = 1; j < TW_SLOT_NEAR; j++)
        retire_at(&sl->near[j], seg_bytes(cap, j), g);
    /* Acquire: as in retire_at. */
    tw_overflow *o = atomic_exchange_explicit(&sl->ovf, NULL, memory_order_acquire);
    if (!o)
        return true;
    for (uint32_t j = TW_SLOT_NEAR; j < TW_SLOT_SEGS; j++)
        retire_at(&o->seg[j - TW_SLOT_NEAR], seg_bytes(cap, j), g);
    tw__seg_retire(g, o, sizeof *o, true);
    return true;
}

/* Why a round with no reservation may give its segments back and reopen
 * as it was (as tw__slot_drain_late's empty round): the close freezes the
 * count at 0, so no reserved position lies in an overflow segment, and a
 * producer whose CAS succeeds on the restored word read a count of 0: its
 * position is 0, in the fixed array. A producer that still holds a
 * detached pointer is inside its guard, and the segment is freed only
 * after a grace period. */
bool tw__slot_give_back(tw_slot *sl, uint32_t cap, tw_segs *g)
{
    if (!tw__slot_holds_overflow(sl))
        return true; /* nothing to give back */
    /* Relaxed: a first look (only the drainer closes); the close decides. */
    if (atomic_load_explicit(&sl->word, memory_order_relaxed) & TW_SLOT_COUNT_MASK)
        return true; /* entries: their drain gives back (or marks the slot again) */
    /* Acq_rel: as in slot_close. */
    uint64_t w = atomic_fetch_or_explicit(&sl->word, TW_SLOT_CLOSED, memory_order_acq_rel);
    bool done = (w & TW_SLOT_COUNT_MASK) == 0 && tw__slot_detach(sl, cap, g);
    /* Release: the word as it was before the close (no producer can
     * change a closed word); producers that see it see the detach. */
    atomic_store_explicit(&sl->word, w, memory_order_release);
    return done;
}

/* A counted segment nobody can reach: to the cache (`recycle`: after a
 * grace period) or back to the system (tw_destroy). */
static void give_back(tw_service *s, void *p, size_t bytes, bool recycle)
{
    if (!p)
        return;
    if (recycle)
        tw__seg_recycle(s, p, bytes);
    else
        tw__seg_free(s, p, bytes, true);
}

void tw__slot_table_free(tw_service *s, void *table, bool recycle)
{
    /* Relaxed: the grace period is over; the acquire loads of the readers'
     * counts ordered every install before this. A segment found here was
     * installed after the detach by a producer whose reserve then failed:
     * nobody else ever saw it. */
    tw_overflow *o = table;
    for (uint32_t j = TW_SLOT_NEAR; j < TW_SLOT_SEGS; j++) {
        _Atomic uint64_t *seg = atomic_load_explicit(&o->seg[j - TW_SLOT_NEAR],
                                                     memory_order_relaxed);
        give_back(s, seg, seg_bytes(1, j), recycle); /* overflow sizes do not depend on cap */
    }
    give_back(s, o, sizeof *o, recycle);
}

void tw__slot_fini(tw_service *s, tw_slot *sl, uint32_t cap)
{
    /* Relaxed: tw_destroy runs alone. Pointers are cleared, so a second
     * fini (a failed create) frees nothing twice. */
    for (uint32_t j = 0; j < TW_SLOT_NEAR; j++)
        tw__seg_free(s, atomic_exchange_explicit(&sl->near[j], NULL, memory_order_relaxed),
                     seg_bytes(cap, j), j > 0);
    tw_overflow *o = atomic_exchange_explicit(&sl->ovf, NULL, memory_order_relaxed);
    if (o)
        tw__slot_table_free(s, o, false);
}
