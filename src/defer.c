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
 *     and the drain drops a stale entry without placing it. While the
 *     log's drains find most entries stale (keep), its owner's cancels
 *     clear their timers' entries to 0 (tw__defer_forget), which the
 *     drain drops without reading the record: its look took the record's
 *     line from the owner's core, which the owner's next write took back;
 *   - the owner counts the entries it appended to each chunk of
 *     TW_DEFER_CHUNK positions in the chunk's current lap, less those it
 *     cleared, before the tail that publishes them, and a drain passes a
 *     chunk whose count it reads 0 without reading its entries (chunks,
 *     below: each read took a line of the owner's);
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
 *     its newest entries) wakes it at once. A cursor awake (ticking, or
 *     napping while producers log fast: cursor.c) is not poked; a nap
 *     ends by the plan's tick and lasts 200 us at most. The pairing is
 *     the occupancy bits' one (cursor.c, top): the producer publishes its
 *     tail, then (tw__fence_light, a compiler barrier) reads wake_tick; the cursor
 *     publishes wake_tick (seq_cst), makes every thread execute a full
 *     barrier (tw__fence_heavy), then reads every tail (seq_cst) again.
 *     One sees the other. A thread that arms a trickle of timers thus
 *     wakes the cursor about once per TW_DEFER_AHEAD ticks' worth of
 *     them, not once each;
 *   - tw_next_due answers no later than a logged timer, and exactly: it
 *     reads each log's live entries between head and tail, and the drain
 *     advances the head (every DRAIN_GIVE entries, and at its end) only
 *     past what it has placed or dropped (release), so what a reader does
 *     not find in a log it finds in the wheel, which it reads next
 *     (tw__defer_next_due has the case of an entry overwritten under the
 *     reader);
 *   - memory: at most TW_OWNED_STRIPES logs of TW_DEFER_LOG entries a
 *     service (16 x 128 KiB), whatever the load, freed with the service,
 *     and their spills (below), which hold no more than the timers
 *     pending. A full log is not waited for: the producer appends to its
 *     spill, or places the timer itself.
 *
 * The spill. A burst of far timers from one thread (a million sessions
 * armed at start-up, WL2) outruns the cursor: an append costs the
 * producer about 40 ns, a placement by the drain 80-150 ns. The log then
 * stays full, and the producer placed the rest itself, at the cost of a
 * placement and beside the cursor in the same slots (counted, 2026-11-28:
 * 22-28% of WL2 1M's armings, 48% of 10M's). With the spill none are, and
 * WL2's schedules ran 1.14x (1M) and 1.08x (10M) as fast, medians of
 * farm-bench pairs of twbench. So a full log's owner appends
 * to a second ring, its spill: TW_SPILL_LOG entries of address space
 * (mmap, MAP_NORESERVE) made on the first need, with a bound per
 * TW_SPILL_PAGE entries as the log has per page. The cursor drains it
 * after the log. Each page it drains it keeps, or gives back
 * (MADV_DONTNEED), before it gives the page's room to the owner: kept
 * while the pages kept since it last gave them back could hold no more
 * entries than the timers pending, given back otherwise; and at each trim
 * period (wheel.c, 1 s) that finds the spill empty, every page the owner
 * may not be writing goes back (tw__defer_trim, give_kept_back). So the
 * memory it holds is the entries not yet drained and a page, during a
 * burst as much again at most, for the pending timers, and a period or
 * two after it only the page its owner last opened, which it writes when
 * it next spills (huge pages, below). Why keep: a page's first write is a
 * page fault, which on a virtual machine whose host takes freed memory back
 * costs 13 us a 4 KiB page (twfloor first_touch; 1.2 us when backed),
 * and a burst longer than the ring (4M entries) writes its pages again:
 * WL2 10M's schedules 1.32x (defaults) and 1.16x (configured), 1M's
 * 1.11x and 1.06x, medians of farm-bench pairs of twbench against
 * d9764bf, 2026-11-29 (bytes a timer 1.14x-1.24x: the kept pages are
 * still there when WL2 reads the resident set). Why not at once when a
 * drain empties it: a cursor that keeps pace empties it again and again
 * during a burst, and the pages it gave back were written anew. Why not a
 * smaller ring, which comes round sooner to its kept pages: at 2^20
 * entries a burst's backlog met refusals, and its arming thread placed
 * the rest itself (WL2 10M configured 0.84x).
 *
 * Huge pages. A page of the spill is 2 MiB, aligned, so that it can be one
 * huge page, and the owner asks for that (MADV_HUGEPAGE, the page's bit in
 * spill->huge) when it opens a page behind a backlog: the cursor had not
 * drained the page before. Its first write is then one fault for the page,
 * not 512: a loop of 1M far armings paid about 4,500 faults of 4 KiB,
 * 2-34 ms of a 27-87 ms burst, and 2 MiB written took 155 us as one huge page
 * against 750 us as small ones (AMD guest, 2026-11-29). WL2's schedules in
 * a process a column: 1M 1.67x (defaults) and 1.39x (configured), 10M
 * 1.15x both, cancels and bytes a timer 0.98-1.06x, medians of farm-bench
 * pairs of twbench after twwarm against abc5c4f (pages of 256 KiB, small),
 * 2026-11-29. Why only behind a backlog: the page a burst ends in stays
 * resident as far as it was written (above), and a huge one is 2 MiB
 * however little was. The first page of a burst, opened with the spill
 * drained, stays small; a thread keeps a huge page after a burst only if
 * the burst outran the cursor by a page, 131,072 armings beyond its log,
 * whose timers took some 9 MiB. A page opened with the spill drained is
 * asked for small pages again if it had been asked for a huge one. Why the
 * pages are given back whole (256 KiB at a time before): giving back part
 * of a huge page splits it, and khugepaged (max_ptes_none 511) made a
 * partly given-back huge page whole and resident again. A spilling owner
 * pokes the cursor every TW_SPILL_POKE entries, as often as it did with
 * pages of 256 KiB. Its rules:
 *   - the owner opens a page of the spill only while the spill holds no
 *     more entries than the timers pending (tw__pending, read once a page:
 *     every spilled entry was a pending timer when armed), so it holds at
 *     most the pending timers' entries plus a page: a thread that arms and
 *     cancels faster than the cursor drains (a peer choosing the pattern)
 *     meets a refusal and places its timers itself, as before the spill.
 *     A refused owner asks again only after TW_SPILL_RETRY more armings
 *     (the sum over stripes is not read per arming);
 *   - the spill's entries follow the log's protocol: the tail publishes
 *     them, the fences (ours light, the cursor's heavy) then order it
 *     before the look at wake_tick, the cursor reads the spill pointer
 *     and tail seq_cst after publishing its plan, its bound is the least
 *     page bound between its head and tail, and tw_next_due reads its
 *     live entries (all of them: a reader
 *     during a burst pays for the burst's backlog, and a page given back
 *     under it reads as zeros, an entry that is never live);
 *   - the cursor gives kept pages back only beyond the owner's open page:
 *     it raises `giving` and then reads open_until; the owner stores
 *     open_until when it opens a page and then reads `giving` (both
 *     seq_cst), and opens none while it is up (it places that timer
 *     itself). One sees the other;
 *   - entries are independent: the cursor drains the log, then the spill,
 *     and the order between them matters to nobody.
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
#include <sys/mman.h>

/* A ring of entries, the log's or its spill's: the owner appends at the
 * tail, the cursor drains from the head, and a bound per page of `page`
 * positions (bound[page number % bounds]) is a lower bound on the ticks
 * of the page's entries. Sizes are powers of two; `bounds` exceeds the
 * pages a full ring spans. */
typedef struct ring {
    _Atomic uint32_t *tail, *head;
    _Atomic uint64_t *bound;
    _Atomic uint8_t *live; /* a log's chunk counts (below); NULL: a spill's */
    tw_defer_entry *e;
    uint32_t size, page, bounds;
} ring;

static ring log_ring(tw_defer_log *d)
{
    return (ring){&d->tail, &d->head, d->bound, d->live, d->e,
                  TW_DEFER_LOG, TW_DEFER_PAGE, TW_DEFER_BOUNDS};
}

static ring spill_ring(tw_defer_spill *p)
{
    return (ring){&p->tail, &p->head, p->bound, NULL, p->e,
                  TW_SPILL_LOG, TW_SPILL_PAGE, TW_SPILL_BOUNDS};
}

/* Whether our log's last drain found most entries stale, as an append
 * last read it (the log's keep): then our cancels clear their entries
 * (tw__defer_forget). A bit of tw__stripe_lean, which the cancel
 * reads anyway; written only when it changes, as every append asks. */
static void forgets(bool keeps)
{
    uint32_t lean = tw__stripe_lean;
    uint32_t want = keeps ? lean | TW_LEAN_FORGETS : lean & ~TW_LEAN_FORGETS;
    if (__builtin_expect(want != lean, 0))
        tw__stripe_lean = want;
}

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
    atomic_init(&d->passed, 0);
    atomic_init(&d->spill, NULL);
    for (uint32_t i = 0; i < TW_DEFER_CHUNKS; i++)
        atomic_init(&d->live[i], 0);
    d->spill_retry = 0;
    for (uint32_t i = 0; i < TW_DEFER_BOUNDS; i++)
        atomic_init(&d->bound[i], UINT64_MAX);
    /* Release: the drainer's acquire load sees the log initialised. */
    atomic_store_explicit(slot, d, memory_order_release);
    return d;
}

/* Chunks. The cursor's read of a log's entries is a line the owner
 * wrote, and the owner's next write there, a lap later, has to take it
 * back: one hand-off between the two cores per four entries, whether the
 * entry is live or not. When the host made a hand-off slow (twfloor's
 * pingpong at 190-215 ns against 40), WL1 P=1, whose timers are all
 * cancelled before the drain comes by (cleared: tw__defer_forget), ran at
 * 28-30M operations a second against 48-54M with the process on one
 * CPU, and a cursor that passed the entries unread ran at 52M in the same
 * spell (AMD guest, 2026-11-30). So the owner counts, per chunk of
 * TW_DEFER_CHUNK positions, the entries it appended there in the chunk's
 * current lap, less those its cancels cleared, and the drain passes a
 * chunk whose count reads 0 without a look at its entries: one line of
 * counts a drain, not 32 lines a chunk.
 * Why it is safe: a count of 0 the cursor reads for a chunk the tail it
 * acquired has passed counts every append of the chunk's lap (each
 * written before the tail's release), and each clear takes one entry of
 * it out once (tw__defer_forget clears only an entry with the value bit
 * set), so each of those entries was cleared, and a cleared entry's timer
 * was FREE before (tw__defer_forget clears after the cancel's CAS):
 * stale, which the drain would have dropped. A clear of an entry of a lap before counts against nothing:
 * tw__defer_forget leaves the count alone once an append has started the
 * chunk's next lap. A count read too high (a clear not yet seen) only
 * costs the read. The counts are bytes: a chunk holds 128 entries. */
_Static_assert(TW_DEFER_CHUNK <= UINT8_MAX && TW_DEFER_LOG % TW_DEFER_CHUNK == 0 &&
                   TW_DEFER_CHUNKS <= TW_CACHELINE,
               "a chunk's count fits a byte, the chunks tile the log, their counts a line");

static void chunk_count(_Atomic uint8_t *live, uint32_t t)
{
    _Atomic uint8_t *c = &live[t / TW_DEFER_CHUNK % TW_DEFER_CHUNKS];
    /* Relaxed (load and store): we are its only writer, and the tail's
     * release publishes it to the cursor. An append at a chunk's start
     * starts its lap's count. */
    uint8_t n = t % TW_DEFER_CHUNK == 0 ? 0 : atomic_load_explicit(c, memory_order_relaxed);
    atomic_store_explicit(c, (uint8_t)(n + 1), memory_order_relaxed);
}

/* The counts of r's chunks as a drain finds them after its acquire of the
 * tail: read once, since the owner writes their line on every append (a
 * read per entry would take it back and forth throughout the drain). For
 * the chunks below that tail they only fall later (clears), until the
 * drain has passed them; a spill has none (all read as live). */
typedef struct chunk_counts {
    uint8_t n[TW_DEFER_CHUNKS];
} chunk_counts;

static void chunks_read(const ring *r, chunk_counts *c)
{
    for (uint32_t i = 0; i < TW_DEFER_CHUNKS; i++) {
        /* Relaxed: ordered after the tail our caller acquired. */
        c->n[i] = r->live ? atomic_load_explicit(&r->live[i], memory_order_relaxed) : 1;
    }
}

/* Whether the drain may pass the chunk at position k unread: it starts
 * there, lies below the tail t the drain acquired, and its count read 0. */
static bool chunk_passable(const chunk_counts *c, uint32_t k, uint32_t t)
{
    return k % TW_DEFER_CHUNK == 0 && t - k >= TW_DEFER_CHUNK &&
           c->n[k / TW_DEFER_CHUNK % TW_DEFER_CHUNKS] == 0;
}

/* Append (entry, tick) at position t of r, t below the head + r->size:
 * the entry, its page's bound (and its chunk's count in a log), then the
 * tail that publishes them. */
static void ring_append(const ring *r, uint32_t t, uint64_t entry, uint64_t tick)
{
    tw_defer_entry *e = &r->e[t % r->size];
    /* Release (both, the tick first): for the drainer, the tail publishes
     * them; these orders are for tw_next_due, which may read an entry as
     * we overwrite it (tw__defer_next_due). */
    atomic_store_explicit(&e->tick, tick, memory_order_release);
    atomic_store_explicit(&e->entry, entry, memory_order_release);
    /* Relaxed (load and store): we are its only writer, and the tail's
     * release below publishes it to the cursor. A page starts a new bound:
     * the one of the page r->bounds back, drained long ago (a full ring
     * spans fewer pages than that). */
    _Atomic uint64_t *b = &r->bound[t / r->page % r->bounds];
    uint64_t min = t % r->page == 0 ? UINT64_MAX
                                    : atomic_load_explicit(b, memory_order_relaxed);
    if (tick < min)
        atomic_store_explicit(b, tick, memory_order_relaxed);
    if (r->live)
        chunk_count(r->live, t);
    /* Release: the entry (and its page's bound, its chunk's count) before
     * the drainer's acquire. */
    atomic_store_explicit(r->tail, t + 1, memory_order_release);
}

/* The spill's ring, TW_SPILL_LOG entries of address space aligned to its
 * pages, so that a page can be one huge page; NULL if there is none. */
static void *spill_map(void)
{
    size_t bytes = (size_t)TW_SPILL_LOG * sizeof(tw_defer_entry);
    size_t align = (size_t)TW_SPILL_PAGE * sizeof(tw_defer_entry);
    char *m = mmap(NULL, bytes + align, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *e = (char *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
    if (e != m)
        (void)munmap(m, (size_t)(e - m)); /* the slop before */
    if (e != m + align)
        (void)munmap(e + bytes, (size_t)(m + align - e)); /* and after */
    return e;
}

_Static_assert(TW_SPILL_LOG / TW_SPILL_PAGE <= 32, "a bit of spill->huge per page");

/* The owner opens the spill's page at position t: asked to be a huge page
 * if it opens behind a backlog, left to small pages otherwise (see the
 * top). The flag is the mapping's, and stays with the page when it is
 * given back: change it only when it is not already as wanted. */
void tw__defer_page_size(tw_service *s, tw_defer_spill *p, uint32_t t, bool behind)
{
    uint32_t bit = 1u << (t / TW_SPILL_PAGE % (TW_SPILL_LOG / TW_SPILL_PAGE));
    if (behind == ((p->huge & bit) != 0))
        return;
    if (madvise(&p->e[t % TW_SPILL_LOG], (size_t)TW_SPILL_PAGE * sizeof *p->e,
                behind ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
        return; /* no huge pages here (EINVAL): small ones, as before */
    p->huge ^= bit;
    if (behind)
        tw__count_rare(s, TW_RARE_SPILL_HUGE);
}

/* The spill's memory, made by the owner on its first need; NULL if the
 * system has none to give. */
static tw_defer_spill *spill_make(tw_defer_log *d)
{
    tw_defer_spill *p = aligned_alloc(TW_CACHELINE, sizeof *p);
    if (!p)
        return NULL;
    void *e = spill_map();
    if (!e) {
        free(p);
        return NULL;
    }
    p->e = e;
    p->huge = 0;
    atomic_init(&p->open_until, 0);
    atomic_init(&p->giving, 0);
    p->kept = 0;
    atomic_init(&p->tail, 0);
    atomic_init(&p->head, 0);
    for (uint32_t i = 0; i < TW_SPILL_BOUNDS; i++)
        atomic_init(&p->bound[i], UINT64_MAX);
    /* Release: the cursor's load (seq_cst) sees the spill initialised. */
    atomic_store_explicit(&d->spill, p, memory_order_release);
    return p;
}

/* The owner of a full log: its spill if an entry may go there now, else
 * NULL (the caller places the timer itself). See the top: a page opens
 * only while the spill holds no more entries than the timers pending. */
static tw_defer_spill *spill_room(tw_service *s, tw_defer_log *d)
{
    /* Relaxed: the owner's own pointer. */
    tw_defer_spill *p = atomic_load_explicit(&d->spill, memory_order_relaxed);
    /* Relaxed: the owner's own position. */
    uint32_t t = p ? atomic_load_explicit(&p->tail, memory_order_relaxed) : 0;
    /* Relaxed: the owner's own word (the cursor only reads it). */
    if (p && t != atomic_load_explicit(&p->open_until, memory_order_relaxed))
        return p; /* inside a page it opened */
    if (d->spill_retry > 0) {
        d->spill_retry--;
        return NULL;
    }
    d->spill_retry = TW_SPILL_RETRY; /* unless the page opens below */
    if (!p && !(p = spill_make(d))) {
        tw__count_rare(s, TW_RARE_SPILL_REFUSED);
        return NULL;
    }
    /* Acquire: the cursor is done with the entries below the head, and
     * with the pages it gave back. */
    uint32_t held = t - atomic_load_explicit(&p->head, memory_order_acquire);
    if (held > tw__pending(s) || held + TW_SPILL_PAGE > TW_SPILL_LOG) {
        tw__count_rare(s, TW_RARE_SPILL_REFUSED);
        return NULL;
    }
    d->spill_retry = 0;
    /* Seq_cst, the page's opening and then the look at `giving`: against
     * the cursor's flag and then its look at open_until (give_kept_back).
     * Either it sees the page open and leaves it, or we see it giving
     * pages back and open none now: we place this timer ourselves, and
     * the next arming asks again. Relaxed, the undo: the cursor gives
     * back from the open_until it read, the new one (our page is left
     * alone) or the old one (we do not write there until a later open
     * sees its flag down, after its madvise). */
    atomic_store_explicit(&p->open_until, t + TW_SPILL_PAGE, memory_order_seq_cst);
    if (atomic_load_explicit(&p->giving, memory_order_seq_cst)) {
        atomic_store_explicit(&p->open_until, t, memory_order_relaxed);
        return NULL;
    }
    tw__count_rare(s, TW_RARE_SPILL_OPENED);
    tw__defer_page_size(s, p, t, held > 0);
    return p;
}

bool tw__defer_place(tw_service *s, tw_record *rec, uint64_t entry, uint64_t tick)
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
    bool urgent;
    if (t - h < TW_DEFER_LOG) {
        ring r = log_ring(d);
        ring_append(&r, t, entry, tick);
        /* Relaxed: a hint for our own cancel (tw__defer_forget). */
        atomic_store_explicit(&rec->logged, t, memory_order_relaxed);
        /* Relaxed: a hint for when to wake the cursor. A log whose drains
         * leave its newest TW_DEFER_KEEP entries wakes it that much later,
         * so that each drain still takes half a log. */
        bool keeps = atomic_load_explicit(&d->keep, memory_order_relaxed);
        forgets(keeps); /* our cancels clear their entries (internal.h) */
        urgent = t + 1 - h == TW_DEFER_LOG / 2 + (keeps ? TW_DEFER_KEEP : 0);
    } else {
        tw_defer_spill *p = spill_room(s, d);
        if (!p)
            return false; /* full, no spill: place it ourselves */
        /* Relaxed: we are the spill's tail's only writer. */
        uint32_t pt = atomic_load_explicit(&p->tail, memory_order_relaxed);
        ring r = spill_ring(p);
        ring_append(&r, pt, entry, tick);
        urgent = pt % TW_SPILL_POKE == 0; /* spilling: the cursor is behind */
    }
    /* Our tail before the poke's look at wake_tick, against the cursor's
     * wake_tick before its look at the tails (see the top): a compiler
     * barrier here, and the cursor makes every thread execute a full
     * barrier after its store (tw__fence_heavy, cursor.c). A seq_cst fence
     * here was a locked instruction (or an mfence) on every logged arming,
     * for a pairing with the cursor's sleeps: WL2's schedules in steady
     * state 33.5 ns against 30.0 ns with it gone (2026-11-29). */
    tw__fence_light();
    if (urgent)
        tw__cursor_poke(s, cur + 1); /* filling up: drain it now */
    else
        tw__cursor_poke(s, tick - TW_DEFER_AHEAD);
    return true;
}

/* The record's entry v is still its current placement. */
static bool entry_current(tw_service *s, uint64_t v)
{
    if (!(v & TW_ENTRY_VALUE))
        return false; /* cleared by its owner's cancel (tw__defer_forget) */
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

static void prefetch_entry_record(tw_service *s, const ring *r, uint32_t k)
{
    /* Relaxed: published by the tail we acquired (k is below it). */
    uint64_t v = atomic_load_explicit(&r->e[k % r->size].entry, memory_order_relaxed);
    tw_record *rec = v & TW_ENTRY_VALUE ? tw__rec(&s->rec, (uint32_t)v) : NULL;
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
static void give_room(const ring *r, uint32_t k)
{
    atomic_store_explicit(r->head, k, memory_order_release);
}

void (*_Atomic tw__defer_gave_hook)(tw_service *s); /* tests (internal.h) */

/* Give room before the drain's end (DRAIN_GIVE). */
static void give_room_early(tw_service *s, const ring *r, uint32_t k)
{
    give_room(r, k);
    /* Acquire: the hook's code and data as the test set them. */
    void (*hook)(tw_service *) = atomic_load_explicit(&tw__defer_gave_hook,
                                                     memory_order_acquire);
    if (hook)
        hook(s);
}

/* The spill's page that ends at position k is drained: its memory is
 * kept, or goes back, then its room (so the owner never writes into a
 * page being given back: it writes there only past the head we store
 * after). Kept while the pages kept since the last give-back could hold
 * no more entries than the timers pending (read once a page). */
static void give_spill_page(tw_service *s, tw_defer_spill *p, const ring *r, uint32_t k)
{
    if ((uint64_t)(p->kept + 1) * r->page <= tw__pending(s)) {
        p->kept++;
    } else {
        tw_defer_entry *first = &r->e[(k - r->page) % r->size];
        (void)madvise(first, (size_t)r->page * sizeof *first, MADV_DONTNEED);
    }
    give_room(r, k);
}

/* Give back the memory of spill positions [from, to) (whole pages; at
 * most the ring's size), wrapping at the ring's end. */
static void give_positions(tw_defer_spill *p, uint32_t from, uint32_t to)
{
    uint32_t n = to - from, at = from % TW_SPILL_LOG;
    uint32_t first = n < TW_SPILL_LOG - at ? n : TW_SPILL_LOG - at;
    (void)madvise(&p->e[at], (size_t)first * sizeof *p->e, MADV_DONTNEED);
    if (n > first)
        (void)madvise(p->e, (size_t)(n - first) * sizeof *p->e, MADV_DONTNEED);
}

/* The spill is drained empty up to head h: give back every page its
 * owner may not be writing, the kept ones among them. The owner writes
 * only below open_until (a page it opened) until it opens the next one,
 * and spill_room opens none while `giving` is up; positions from there
 * round to the drained page before h's are free. */
static void give_kept_back(tw_defer_spill *p, uint32_t h)
{
    /* Seq_cst, the flag and then the look at open_until: see spill_room. */
    atomic_store_explicit(&p->giving, 1, memory_order_seq_cst);
    uint32_t from = atomic_load_explicit(&p->open_until, memory_order_seq_cst);
    uint32_t to = (h + TW_SPILL_LOG) & ~(TW_SPILL_PAGE - 1);
    if (to - from <= TW_SPILL_LOG)
        give_positions(p, from, to);
    /* Release: an owner that reads the flag down (seq_cst) sees our
     * madvise done before it writes there. */
    atomic_store_explicit(&p->giving, 0, memory_order_release);
    p->kept = 0;
}

/* Page numbers wrap with the positions (2^32 / page of them); the bound of
 * page p is bound[p % bounds] on both sides of the wrap, since bounds
 * divides their count (powers of two). */
_Static_assert((TW_DEFER_PAGE & (TW_DEFER_PAGE - 1)) == 0 &&
               (UINT32_MAX / TW_DEFER_PAGE + 1u) % TW_DEFER_BOUNDS == 0 &&
               (TW_SPILL_PAGE & (TW_SPILL_PAGE - 1)) == 0 &&
               (UINT32_MAX / TW_SPILL_PAGE + 1u) % TW_SPILL_BOUNDS == 0 &&
               TW_DEFER_LOG / TW_DEFER_PAGE + 1u < TW_DEFER_BOUNDS &&
               TW_SPILL_LOG / TW_SPILL_PAGE + 1u < TW_SPILL_BOUNDS,
               "page numbers wrap with the positions, bounds with the pages, "
               "and a full ring spans fewer pages than it keeps bounds");

/* The least of the page bounds over positions [h, t) of r (UINT64_MAX:
 * none). The page number wraps as the positions do: a plain p++ from the
 * head's page, once the tail had passed 2^32 and the head not yet, ran
 * 2^32 pages round before it met the tail's (the cursor stalled for
 * seconds, once every 2^32 logged armings of a thread), taking in the
 * bounds of pages drained long ago (tests/test_defer.c). */
static uint64_t pages_bound(const ring *r, uint32_t h, uint32_t t)
{
    uint64_t min = UINT64_MAX;
    if (h == t)
        return min;
    uint32_t mask = UINT32_MAX / r->page;
    for (uint32_t p = h / r->page;; p = (p + 1) & mask) {
        /* Relaxed: ordered after the tail that published it (our caller's
         * acquire or seq_cst load). A page's bound is reset only when the
         * owner starts the page r->bounds later, past any tail it can
         * reach before we move the head. */
        uint64_t b = atomic_load_explicit(&r->bound[p % r->bounds], memory_order_relaxed);
        min = b < min ? b : min;
        if (p == (t - 1) / r->page)
            return min;
    }
}

/* A drain of at least this many entries decides whether the next one
 * keeps the newest (drain_log). */
#define KEEP_JUDGE 256u

/* Place the current entries of r at [h, t); returns the position reached
 * (t, or the entry that found no memory), with the stale ones counted in
 * *stale, and the chunks passed unread in *passed. Gives room as it goes:
 * every DRAIN_GIVE entries in a log, and in a spill at each page's end,
 * after giving the page back. */
static uint32_t drain_ring(tw_service *s, const ring *r, uint32_t h, uint32_t t,
                           tw_defer_spill *spill, uint32_t *stale, uint32_t *passed)
{
    uint32_t k, given = h;
    chunk_counts counts;
    chunks_read(r, &counts);
    for (k = h; k != t; k++) {
        if (k != h && spill && k % r->page == 0) {
            give_spill_page(s, spill, r, k);
        } else if (!spill && k - given >= DRAIN_GIVE) {
            give_room_early(s, r, k);
            given = k;
        }
        if (chunk_passable(&counts, k, t)) {
            *passed += 1;
            *stale += TW_DEFER_CHUNK;
            k += TW_DEFER_CHUNK - 1; /* every entry cleared: stale */
            continue;
        }
        uint32_t ahead = k + DRAIN_AHEAD;
        if (t - k > DRAIN_AHEAD && !chunk_passable(&counts, ahead & ~(TW_DEFER_CHUNK - 1), t))
            prefetch_entry_record(s, r, ahead);
        tw_defer_entry *e = &r->e[k % r->size];
        /* Relaxed: as above. */
        uint64_t v = atomic_load_explicit(&e->entry, memory_order_relaxed);
        if (!entry_current(s, v)) {
            (*stale)++;
            continue; /* cancelled, fired, reused or moved: nothing to place */
        }
        if (tw__place(s, v, atomic_load_explicit(&e->tick, memory_order_relaxed)) != TW_OK)
            break; /* no memory: keep it and the rest for the next pass */
    }
    /* A drain that ends on a spill's page boundary gives that page back
     * too: the next one starts there, and would not. */
    if (k != h && spill && k % r->page == 0)
        give_spill_page(s, spill, r, k);
    else
        give_room(r, k);
    return k;
}

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
 * then takes the whole log: the bound is within 2 TW_DEFER_AHEAD.
 *
 * The spill is drained after the log, and with `some` (the loop's drains)
 * TW_SPILL_DRAIN_PAGES pages at most, to a page's end: a spill holds as many
 * entries as a burst left there (a million is 100 ms of placements), and
 * a drain of all of it would hold up the ticks due meanwhile. The cursor
 * neither sleeps nor populates records ahead while a spill holds entries
 * (tw__defer_spilled, cursor.c); a drain without `some` (a logged timer
 * may be due, an early claim, the stop) takes all of it. */
/* TW_SPILL_DRAIN_PAGES (internal.h): 131,072 entries, as many as the 16
 * logs can hold, so a spill holds the ticks up no longer than full logs
 * could: one page of 2 MiB. (With pages of 256 KiB, a drain of one page
 * took WL2 10M's schedules to 0.87x, farm-bench, 2026-11-28: each drain
 * comes with the loop's plan, which reads every page bound of the spills.) */
_Static_assert(TW_SPILL_DRAIN_PAGES * TW_SPILL_PAGE == TW_OWNED_STRIPES * TW_DEFER_LOG,
               "a loop's drain of a spill is as long as one of full logs");

static bool drain_log(tw_service *s, tw_defer_log *d, bool some)
{
    ring r = log_ring(d);
    /* Relaxed: we are the head's only writer. */
    uint32_t h = atomic_load_explicit(&d->head, memory_order_relaxed);
    /* Acquire: the entries below the tail, as the owner wrote them. */
    uint32_t t = atomic_load_explicit(&d->tail, memory_order_acquire);
    /* Relaxed: ours (the owner's loads are hints). */
    if (some && atomic_load_explicit(&d->keep, memory_order_relaxed)) {
        /* Relaxed: cur is ours. */
        uint64_t cur = atomic_load_explicit(&s->wheel.cur, memory_order_relaxed);
        if (pages_bound(&r, h, t) > cur + 2 * TW_DEFER_AHEAD)
            t = t - h > TW_DEFER_KEEP ? t - TW_DEFER_KEEP : h;
    }
    uint32_t stale = 0, passed = 0;
    uint32_t k = drain_ring(s, &r, h, t, NULL, &stale, &passed);
    if (k - h >= KEEP_JUDGE)
        atomic_store_explicit(&d->keep, 2 * stale >= k - h, memory_order_relaxed);
    if (passed)
        tw__count_add_owned(&d->passed, passed, true); /* the cursor's only: tests read it */
    if (k != t)
        return false;
    /* Acquire: the spill as its owner made it. */
    tw_defer_spill *p = atomic_load_explicit(&d->spill, memory_order_acquire);
    if (!p)
        return true;
    ring sr = spill_ring(p);
    /* Relaxed, acquire: as the log's head and tail above. */
    h = atomic_load_explicit(&p->head, memory_order_relaxed);
    t = atomic_load_explicit(&p->tail, memory_order_acquire);
    uint32_t most = TW_SPILL_DRAIN_PAGES * TW_SPILL_PAGE - h % TW_SPILL_PAGE;
    if (some && t - h > most)
        t = h + most; /* to a page's end */
    return drain_ring(s, &sr, h, t, p, &stale, &passed) == t;
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

/* Log d's spill holds entries (a drain with `some` left them). */
static bool spill_left(tw_defer_log *d)
{
    /* Acquire: the spill as its owner made it. */
    tw_defer_spill *p = atomic_load_explicit(&d->spill, memory_order_acquire);
    if (!p)
        return false;
    /* Relaxed: the head is the cursor's own. Relaxed: the tail is a hint
     * here; an append the cursor does not see pokes it (see the top). */
    return atomic_load_explicit(&p->tail, memory_order_relaxed) !=
           atomic_load_explicit(&p->head, memory_order_relaxed);
}

/* The cursor's bound on log d: the least page bound of its entries and
 * its spill's. */
static uint64_t log_bound(tw_service *s, tw_defer_log *d)
{
    (void)s;
    ring r = log_ring(d);
    /* Relaxed: the head is the cursor's own. Seq_cst: the tail, the
     * cursor's look after it published its plan (see the top). */
    uint32_t h = atomic_load_explicit(&d->head, memory_order_relaxed);
    uint32_t t = atomic_load_explicit(&d->tail, memory_order_seq_cst);
    uint64_t bound = pages_bound(&r, h, t);
    /* Seq_cst: as the log pointer (log_of): a spill made by its owner's
     * first spilled arming is among those this look reads. */
    tw_defer_spill *p = atomic_load_explicit(&d->spill, memory_order_seq_cst);
    if (p) {
        ring sr = spill_ring(p);
        /* Relaxed, seq_cst: as above. */
        h = atomic_load_explicit(&p->head, memory_order_relaxed);
        t = atomic_load_explicit(&p->tail, memory_order_seq_cst);
        uint64_t b = pages_bound(&sr, h, t);
        bound = b < bound ? b : bound;
    }
    return bound;
}

/* Whether f holds for one of the logs there are. */
static bool any_log(tw_service *s, bool (*f)(tw_defer_log *))
{
    for (uint32_t i = 0; i < TW_OWNED_STRIPES; i++) {
        tw_defer_log *d = log_of(s, i);
        if (d && f(d))
            return true;
    }
    return false;
}

bool tw__defer_spilled(tw_service *s)
{
    return any_log(s, spill_left);
}

uint32_t tw__defer_appended(tw_service *s)
{
    uint32_t sum = 0;
    for (uint32_t i = 0; i < TW_OWNED_STRIPES; i++) {
        tw_defer_log *d = log_of(s, i);
        /* Relaxed: a count for a rate; nothing is read through it. */
        if (d)
            sum += atomic_load_explicit(&d->tail, memory_order_relaxed);
    }
    return sum;
}

uint64_t tw__defer_bound(tw_service *s)
{
    return least_over_logs(s, log_bound);
}

/* The earliest tick of a live entry in ring r (a log or a spill), or
 * UINT64_MAX. An entry may be overwritten while we read it, once the
 * drain has placed it; the owner
 * writes the tick, then the entry (release both), and we read the entry,
 * then the tick (acquire both). Reading a newer entry, or a newer tick,
 * means the one it replaced was placed before, and our caller's look at
 * the wheel, after ours, sees it; a tick we read is always a logged
 * timer's, at or after the entry's own when the entry is the newer one. So
 * the answer is never later than a logged timer's, and exact without such
 * a race. */
static uint64_t ring_earliest_live(tw_service *s, const ring *r)
{
    /* Acquire: the placements below the head (see above). */
    uint32_t h = atomic_load_explicit(r->head, memory_order_acquire);
    /* Acquire: the entries below the tail. */
    uint32_t t = atomic_load_explicit(r->tail, memory_order_acquire);
    if (t - h > r->size)
        h = t - r->size; /* the head moved on between our two loads */
    uint64_t best = UINT64_MAX;
    for (uint32_t k = h; k != t; k++) {
        tw_defer_entry *e = &r->e[k % r->size];
        /* Acquire, both: see above. A spill's page given back reads as
         * zeros: entry 0 is no timer's (generations are never 0). */
        uint64_t v = atomic_load_explicit(&e->entry, memory_order_acquire);
        uint64_t tick = atomic_load_explicit(&e->tick, memory_order_acquire);
        if (v != 0 && tick < best && entry_current(s, v))
            best = tick;
    }
    return best;
}

static uint64_t earliest_live(tw_service *s, tw_defer_log *d)
{
    ring r = log_ring(d);
    uint64_t best = ring_earliest_live(s, &r);
    /* Acquire: the spill as its owner made it. */
    tw_defer_spill *p = atomic_load_explicit(&d->spill, memory_order_acquire);
    if (p) {
        ring sr = spill_ring(p);
        uint64_t b = ring_earliest_live(s, &sr);
        best = b < best ? b : best;
    }
    return best;
}

uint64_t tw__defer_next_due(tw_service *s)
{
    return least_over_logs(s, earliest_live);
}

/* Log d's spill, if it has pages kept. */
static tw_defer_spill *spill_keeping(tw_defer_log *d)
{
    /* Acquire: the spill as its owner made it. */
    tw_defer_spill *p = atomic_load_explicit(&d->spill, memory_order_acquire);
    return p && p->kept ? p : NULL;
}

void tw__defer_trim(tw_service *s)
{
    for (uint32_t i = 0; i < TW_OWNED_STRIPES; i++) {
        tw_defer_log *d = log_of(s, i);
        tw_defer_spill *p = d ? spill_keeping(d) : NULL;
        if (!p)
            continue;
        /* Relaxed: the head is ours. Acquire: the tail, as a drain reads
         * it; an append after this look is below open_until, which
         * give_kept_back leaves alone. */
        uint32_t h = atomic_load_explicit(&p->head, memory_order_relaxed);
        if (h == atomic_load_explicit(&p->tail, memory_order_acquire))
            give_kept_back(p, h);
    }
}

static bool keeps_pages(tw_defer_log *d)
{
    return spill_keeping(d) != NULL;
}

bool tw__defer_keeps(tw_service *s)
{
    return any_log(s, keeps_pages);
}

void tw__defer_fini(tw_service *s)
{
    for (uint32_t i = 0; i < TW_OWNED_STRIPES; i++) {
        /* Relaxed: every thread that used the service is done with it. */
        tw_defer_log *d = atomic_load_explicit(&s->defer[i], memory_order_relaxed);
        /* Relaxed: as above. */
        tw_defer_spill *p = d ? atomic_load_explicit(&d->spill, memory_order_relaxed) : NULL;
        if (p) {
            (void)munmap(p->e, (size_t)TW_SPILL_LOG * sizeof(tw_defer_entry));
            free(p);
        }
        free(d);
        atomic_store_explicit(&s->defer[i], NULL, memory_order_relaxed);
    }
}
