/*
 * segments.c: the memory of the slots' segments (their fixed arrays and
 * overflow segments, slots.c) and its reclamation: a drained slot gives
 * its overflow segments back, and they are freed once no thread can still
 * hold them. Also the huge-page advice for the other large allocations.
 *
 * Why give segments back. A slot used to keep every segment it ever grew
 * until tw_destroy, so a wheel held the sum of each slot's largest pile
 * ever: a peer that makes a server arm a burst of timers into one slot,
 * then into the next one a tick later, and so on round the wheel, left
 * every slot holding a burst's memory while one burst was pending (the
 * soak with 48,000 sessions grew from 28 to 40 MB over its first minutes
 * and kept creeping). Now the drainer detaches a slot's overflow segments
 * each time it empties the slot (drain, compaction, early claim; slots.c
 * tw__slot_detach), so the wheel holds the segments of the rounds now
 * collecting: what its entries need, and compaction bounds the entries
 * by the pending timers. Within a budget of TW_SEG_KEEP_MIN (256 KiB)
 * of overflow memory, drains leave slots their segments: a small wheel
 * refilled every turn then allocates and frees nothing, and pays no grace
 * steps. Past it, drains give back (read once per step, tw__seg_budget).
 * A budget that grew with the entries held (32 bytes an entry was tried)
 * let the soak's kept memory creep towards it for a minute, so it is a
 * constant. A slot that kept its segments gives them back
 * at its next drain if the wheel is past the budget then. So the overflow
 * memory is what the entries now in the slots need, plus at most 256 KiB,
 * whatever pattern of bursts made it.
 *
 * Why a grace period. A producer loads a segment pointer, reserves a
 * position, then publishes into that segment (slots.c); a producer
 * delayed after its load may still CAS an entry of a segment the drainer
 * has detached (its publish then fails on the tombstone and it places
 * again). So a detached segment is freed only after every producer, and
 * every tw_next_due scan, that might have loaded its pointer is done.
 *
 * Readers (the protocol is SRCU's, with liburcu-memb's asymmetric fence):
 *   - A reader (a placement that reaches an overflow position, a scan of
 *     entries) enters once: it reads `phase` (acquire) and adds one to its
 *     stripe's readers[phase] (a plain load and store on an owned stripe,
 *     an atomic add on a shared one), then only a compiler barrier
 *     (tw__fence_light). It leaves by taking one off the same counter
 *     (release). Placements that stay in a slot's fixed array (positions
 *     below slot_capacity, never detached) do not enter at all.
 *   - The drainer retires what it detached into `fresh`. A grace step
 *     flips `phase`, makes every thread of the process execute a full
 *     barrier (tw__fence_heavy: membarrier), and is complete once it has
 *     seen readers[old phase] at zero on every stripe (acquire, pairing
 *     with the readers' release). The heavy fence is the other half of the
 *     reader's compiler barrier: either the drainer sees a reader's count,
 *     or that reader sees every detach made before the fence, so it never
 *     loads a retired pointer.
 *   - Memory retired before a step began is freed when that step and the
 *     next one have completed. One step is not enough: a reader that read
 *     the old phase before a flip and counted itself after the drainer had
 *     looked belongs to a counter that the next step does not look at, but
 *     the one after it does.
 * The drainer polls at the end of every step over the ticks (wheel.c) and,
 * while anything waits, wakes within TW_RETIRE_POLL_NS (cursor.c); a grace
 * step begins at most every TW_RETIRE_STEP_NS. So a burst's segments are
 * freed a few milliseconds after its drain, without waiting for the next
 * timer. A reader stalled inside (a descheduled
 * producer) only delays the frees; while more than TW_RETIRE_MAX_BYTES
 * wait, drains stop detaching and slots keep their segments, as before,
 * so a stalled thread cannot make the waiting list grow without bound.
 *
 * Invariants:
 *   - A segment is reachable from exactly one place: its slot's pointer,
 *     or one retire list (the drainer's alone), until it is freed.
 *   - Everything the drainer frees was retired at least two completed
 *     grace steps before; a retired overflow table's late installs (a
 *     producer that loaded the table before its detach and lost its
 *     reserve) are freed with it (tw__slot_table_free).
 *   - tw__seg_held_bytes equals the bytes of every overflow segment and
 *     table allocated and not yet freed (tests read it); fixed arrays stay
 *     with their slots and are not counted.
 */
#include "internal.h"

#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE (2u * 1024u * 1024u)

/* Large allocations (record chunks, the drainer's lists, large segments)
 * ask for transparent huge pages (where the system has them in "madvise"
 * mode, as Debian's default): one fault per 2 MiB instead of 512, and
 * fewer TLB misses. Only whole, aligned 2 MiB pages inside the allocation
 * are advised (small ones have none: no system call); failure costs only
 * speed. */
void tw__advise_huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uintptr_t e = ((uintptr_t)p + bytes) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* ---- allocation -------------------------------------------------------------- */

/* Segments of TW_SEG_MAP_BYTES and more are mapped one by one: their pages
 * stay unbacked until entries are written, so the unused tail of a slot's
 * last segment costs no memory, and unmapping gives them back to the
 * system. Smaller ones come from malloc, which reuses what the drainer
 * gives back (already faulted in: no page fault for a slot that fills
 * again). */
static bool is_mapped(size_t bytes)
{
    return bytes >= TW_SEG_MAP_BYTES;
}

static void count_made(tw_service *s, int64_t bytes)
{
    tw__count_add(&tw__stripe(s)->seg_bytes, (uint64_t)bytes);
}

void *tw__seg_alloc(tw_service *s, size_t bytes, bool counted)
{
    void *p;
    if (is_mapped(bytes)) {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        tw__advise_huge_pages(p, bytes);
    } else {
        p = calloc(1, bytes);
        if (!p)
            return NULL;
    }
    if (counted)
        count_made(s, (int64_t)bytes);
    return p;
}

void tw__seg_free(tw_service *s, void *p, size_t bytes, bool counted)
{
    if (!p)
        return;
    if (is_mapped(bytes))
        munmap(p, bytes);
    else
        free(p);
    if (counted)
        count_made(s, -(int64_t)bytes);
}

uint64_t tw__seg_held_bytes(tw_service *s)
{
    uint64_t sum = 0;
    for (int i = 0; i < TW_STRIPES; i++) {
        /* Relaxed: a statistic; exact at rest (tests). */
        sum += atomic_load_explicit(&s->stripe[i].seg_bytes, memory_order_relaxed);
    }
    return sum;
}

/* ---- readers ------------------------------------------------------------------- */

void tw__seg_enter(tw_seg_guard *g)
{
    if (g->held)
        return;
    tw_service *s = g->s;
    /* Acquire: pairs with the flip's release; a reader that sees the new
     * phase sees every detach made before it. */
    uint32_t ph = atomic_load_explicit(&s->wheel.segs.phase, memory_order_acquire);
    g->held = &tw__stripe(s)->seg_readers[ph & 1];
    g->owned = tw__stripe_owned;
    /* Relaxed: the order against our loads of segment pointers comes from
     * the fence below and the drainer's heavy fence (see the top). An
     * owned stripe has one writer, so load + store loses no count. */
    if (g->owned)
        atomic_store_explicit(g->held, atomic_load_explicit(g->held, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    else
        atomic_fetch_add_explicit(g->held, 1, memory_order_relaxed);
    tw__fence_light();
}

void tw__seg_leave(tw_seg_guard *g)
{
    /* Release: every access we made to a segment happens before the
     * drainer's acquire load that sees the count drop, and so before its
     * free. */
    if (g->owned)
        atomic_store_explicit(g->held, atomic_load_explicit(g->held, memory_order_relaxed) - 1,
                              memory_order_release);
    else
        atomic_fetch_sub_explicit(g->held, 1, memory_order_release);
    g->held = NULL;
}

/* ---- the drainer's side ------------------------------------------------------- */

static bool list_room(tw_retire_list *l, size_t more)
{
    if (l->n + more <= l->cap)
        return true;
    size_t cap = l->cap ? l->cap : 64;
    while (cap < l->n + more)
        cap *= 2;
    tw_retired *v = realloc(l->v, cap * sizeof *v);
    if (!v)
        return false;
    l->v = v;
    l->cap = cap;
    return true;
}

uint64_t tw__retire_max_override;   /* tests (test_segments.c): 0 = TW_RETIRE_MAX_BYTES */
/* A planted bug, for stress/planted_early_free.c only: tw__seg_poll frees
 * what was detached at once, without a grace period, so that the stress
 * build shows the use after free a missing grace period causes. Never set
 * outside that program. */
bool tw__seg_plant_no_grace;
uint64_t tw__seg_keep_min_override; /* tests (test_segments.c): 0 = TW_SEG_KEEP_MIN */

void tw__seg_budget(tw_service *s)
{
    tw_segs *g = &s->wheel.segs;
    g->budget_held = tw__seg_held_bytes(s);
}

bool tw__seg_may_retire(tw_segs *g, size_t items)
{
    if (g->budget_held <= g->keep_min)
        return false; /* the slot keeps them for its next round */
    if (g->waiting_bytes >= g->max_bytes)
        return false; /* a stalled reader: keep segments in their slots */
    return list_room(&g->fresh, items);
}

void tw__seg_retire(tw_segs *g, void *p, size_t bytes, bool table)
{
    /* Room was made by tw__seg_may_retire. */
    g->fresh.v[g->fresh.n++] = (tw_retired){.p = p, .bytes = bytes, .table = table};
    g->waiting_bytes += bytes;
    g->budget_held -= bytes < g->budget_held ? bytes : g->budget_held;
}

static void free_list(tw_service *s, tw_retire_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].table)
            tw__slot_table_free(s, l->v[i].p);
        else
            tw__seg_free(s, l->v[i].p, l->v[i].bytes, true);
        s->wheel.segs.waiting_bytes -= l->v[i].bytes;
    }
    l->n = 0;
}

/* Hand `from`'s items to `to`, which is empty: `one` at a step's
 * beginning (its items went to `two` when the last step completed), `two`
 * just after it was freed. The arrays are swapped, so nothing allocates. */
static void list_hand_over(tw_retire_list *to, tw_retire_list *from)
{
    tw_retire_list t = *to;
    *to = *from;
    *from = t;
}

static bool readers_gone(tw_service *s, uint32_t ph)
{
    for (int i = 0; i < TW_STRIPES; i++) {
        /* Acquire: pairs with the readers' release in tw__seg_leave. */
        if (atomic_load_explicit(&s->stripe[i].seg_readers[ph & 1], memory_order_acquire))
            return false;
    }
    return true;
}

static void step_begin(tw_service *s)
{
    tw_segs *g = &s->wheel.segs;
    list_hand_over(&g->one, &g->fresh);
    /* Relaxed: only the drainer writes phase. */
    uint32_t ph = atomic_load_explicit(&g->phase, memory_order_relaxed);
    g->old_phase = ph;
    /* Release: a reader that reads the new phase sees the detaches before. */
    atomic_store_explicit(&g->phase, ph + 1, memory_order_release);
    tw__fence_heavy();
    g->stepping = true;
}

/* A step begins at most once per TW_RETIRE_STEP_NS of the service's
 * clock: its heavy fence interrupts every CPU running a thread of the
 * process (microseconds), and with a 1 us tick the cursor steps far more
 * often than memory needs freeing. */
static bool may_begin(tw_service *s)
{
    tw_segs *g = &s->wheel.segs;
    if (g->stepping || !tw__seg_waiting(g))
        return false;
    uint64_t now = tw__clock_read(s);
    if (g->began_at && now - g->began_at < TW_RETIRE_STEP_NS)
        return false;
    g->began_at = now ? now : 1;
    return true;
}

bool tw__seg_poll(tw_service *s)
{
    tw_segs *g = &s->wheel.segs;
    if (__builtin_expect(tw__seg_plant_no_grace, 0))
        free_list(s, &g->fresh); /* the planted bug: no grace period */
    if (may_begin(s))
        step_begin(s);
    if (g->stepping && readers_gone(s, g->old_phase)) {
        g->stepping = false;
        free_list(s, &g->two); /* retired before the step before this one */
        list_hand_over(&g->two, &g->one);
    }
    return tw__seg_waiting(g);
}

bool tw__seg_waiting(const tw_segs *g)
{
    return g->stepping || g->fresh.n || g->one.n || g->two.n;
}

void tw__segs_fini(tw_service *s)
{
    /* tw_destroy: no reader is left. */
    tw_segs *g = &s->wheel.segs;
    free_list(s, &g->fresh);
    free_list(s, &g->one);
    free_list(s, &g->two);
    free(g->fresh.v);
    free(g->one.v);
    free(g->two.v);
    g->fresh = g->one = g->two = (tw_retire_list){0};
}
