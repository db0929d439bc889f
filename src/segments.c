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
 * whatever pattern of bursts made it, plus the cache (below).
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
 * Why a cache of freed segments. Segments go back and forth at the rate
 * slots drain: the large-table soak made and freed about 90,000 a second
 * (74 MB/s).
 * Given back to malloc, producers' allocations and the drainer's frees
 * from other threads' arenas left glibc keeping more freed memory every
 * minute (the soak's "freed and kept by malloc": 1.6 -> 2.1 MB in
 * 120 s, the RSS with it, while the memory in use stayed flat). So what
 * the drainer frees after the grace period goes to a cache, one
 * lock-free stack per size class under 64 KiB, and
 * producers take from it before they allocate (the same run: 38
 * allocations and no frees in 14 s, malloc's kept memory flat; WL1, WL2
 * and WL5 ran as fast as before, pair-ratio medians 0.98-1.03).
 *   - Bound: the cache holds at most its allowance, the larger of
 *     TW_SEG_CACHE_MIN (1 MiB) and the overflow bytes in use at the step's
 *     start; a free that would go past it goes to the system. Once the
 *     segments in use shrink (a burst has run), a cache past twice its
 *     allowance gives the excess back (trim_cache), so the cache never
 *     keeps much more than the wheel needs now.
 *   - Pops are safe by the grace period (the rule liburcu gives for its
 *     lfstack's pop: pop inside a read-side section, push a node again
 *     only after a grace period): a producer pops only inside its
 *     tw_seg_guard (it is placing into an overflow position), and a
 *     segment reaches a stack only from a retire list, past two steps.
 *     A popper that read head X and X's link and then lost X to another
 *     producer cannot see X at the head again while it is inside, so its
 *     CAS never acts on a stale link (no ABA), and X is never freed under
 *     its load. The winner clears the link word with an atomic store: the
 *     loser may still be loading it.
 *   - For the same reason a producer whose install lost the race
 *     (another producer installed the segment first) may not free or push
 *     its copy, which may have come from the cache: it hands it to the
 *     drainer on a second stack (tw__seg_unused), and the drainer retires
 *     it like a detached one.
 *   - Why not liburcu's lfstack, which is this stack: its inline push
 *     stores &head->node with head NULL when the stack is empty (and its
 *     for_each does the same), member access through a null pointer that
 *     our UBSan build reports and stops on. The stack below is the same
 *     Treiber stack in C11 atomics, which TSan also sees as they are.
 *   - The cache is not in tw__seg_held_bytes (the slots' budget counts
 *     what slots hold); tw__seg_cached_bytes reads it.
 *
 * Invariants:
 *   - A segment is reachable from exactly one place: its slot's pointer,
 *     the cache, the unused stack, or one retire list (the drainer's
 *     alone), until it is freed.
 *   - Everything the drainer frees was retired at least two completed
 *     grace steps before; a retired overflow table's late installs (a
 *     producer that loaded the table before its detach and lost its
 *     reserve) are freed with it (tw__slot_table_free).
 *   - tw__seg_held_bytes equals the bytes of every overflow segment and
 *     table allocated and neither freed nor in the cache (tests read it);
 *     tw__seg_cached_bytes, those in the cache (at rest; a pop takes its
 *     bytes off just after). Fixed arrays stay with their slots and are
 *     not counted.
 *   - The cache never holds more than its allowance at the time of a push,
 *     and a trim brings it back under it once it is past twice that.
 */
#include "internal.h"
#include "sanitizers.h" /* TW_SAN_ANY */

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* Segments of a page and more (g->map_from) are mapped one by one: their
 * pages stay unbacked until entries are written, so the unused tail of a
 * slot's last segment costs no memory, and unmapping gives them back to
 * the system. Smaller ones (the overflow tables, segments of 512 bytes to
 * 2 KiB) come from malloc. Segments under 64 KiB were all malloc'd once:
 * after a burst the cache gave its excess back, and glibc kept what it
 * could not return (a 3M-timer burst left malloc holding 4.1 MB with no
 * timer pending; the segments of 4 to 32 KiB were most of it). Under
 * AddressSanitizer and ThreadSanitizer every segment under
 * TW_SEG_MAP_BYTES stays malloc'd: ASan's redzones catch an overflow of
 * one, and both report a use after its free (a missing grace period:
 * stress/planted_early_free.c) where a use of an unmapped segment is a
 * SEGV that names nothing, or, if the address is mapped again meanwhile,
 * no error at all. The larger ones, mapped in every build, test the
 * mapped path there; the gcc and clang builds run every test on it. */

static size_t map_threshold(void)
{
#ifdef TW_SAN_ANY
    return TW_SEG_MAP_BYTES;
#else
    long page = sysconf(_SC_PAGESIZE);
    if (page < 4096)
        page = 4096;
    return (size_t)page < TW_SEG_MAP_BYTES ? (size_t)page : TW_SEG_MAP_BYTES;
#endif
}

static bool is_mapped(const tw_segs *g, size_t bytes)
{
    return bytes >= g->map_from;
}

/* Back to the system (or malloc), uncounted. */
static void release(const tw_segs *g, void *p, size_t bytes)
{
    if (is_mapped(g, bytes))
        munmap(p, bytes);
    else
        free(p);
}

static void count_made(tw_service *s, int64_t bytes)
{
    tw__count_add(&tw__stripe(s)->seg_bytes, (uint64_t)bytes);
}

/* ---- the cache ------------------------------------------------------------------ */

uint64_t tw__seg_cache_min_override; /* tests (test_segments.c) */

/* The stacks (see the top for why they are safe, and why our own). */
static void stack_push(tw_seg_stack *st, tw_seg_node *n)
{
    /* Relaxed: the CAS below publishes. */
    tw_seg_node *h = atomic_load_explicit(st, memory_order_relaxed);
    do {
        /* Relaxed: n is ours until the CAS; a stale popper may load this
         * word (atomically) only if n was popped under it, see the top. */
        atomic_store_explicit(&n->next, h, memory_order_relaxed);
        /* Release: a popper that takes n (acquire) sees its link and what
         * the drainer did to the segment before. */
    } while (!atomic_compare_exchange_weak_explicit(st, &h, n, memory_order_release,
                                                    memory_order_relaxed));
}

/* Only inside a tw_seg_guard (the top: no ABA, no free under the load). */
static tw_seg_node *stack_pop(tw_seg_stack *st)
{
    /* Acquire: pairs with the push's release; we read the node's link. */
    tw_seg_node *h = atomic_load_explicit(st, memory_order_acquire);
    while (h) {
        /* Relaxed: ordered by the acquire that gave us h; if another
         * popper took h meanwhile, the CAS below fails. */
        tw_seg_node *next = atomic_load_explicit(&h->next, memory_order_relaxed);
        /* Acquire on failure: the new head's link, as above. */
        if (atomic_compare_exchange_weak_explicit(st, &h, next, memory_order_acquire,
                                                  memory_order_acquire))
            return h;
    }
    return NULL;
}

/* The whole stack as a chain: needs no guard (nothing is compared with a
 * stale head). Acquire: every node's link, pushed with release. */
static tw_seg_node *stack_take_all(tw_seg_stack *st)
{
    return atomic_exchange_explicit(st, NULL, memory_order_acquire);
}

static tw_seg_node *chain_next(tw_seg_node *n)
{
    /* Relaxed: the chain is ours (stack_take_all's acquire). */
    return atomic_load_explicit(&n->next, memory_order_relaxed);
}

/* The stack a segment of `bytes` goes to, or -1: those past the largest
 * class (back to the system) and any size that is not an overflow
 * segment's or table's. Mapped or not, a segment of a class is cached. */
static int cache_class(size_t bytes)
{
    if (bytes == sizeof(tw_overflow))
        return 0;
    if (bytes < TW_SEG_CACHE_SMALLEST || (bytes & (bytes - 1)))
        return -1;
    int c = 1 + __builtin_ctzll(bytes) - __builtin_ctzll(TW_SEG_CACHE_SMALLEST);
    return c < TW_SEG_CACHE_CLASSES ? c : -1;
}

static size_t class_bytes(int c)
{
    return c == 0 ? sizeof(tw_overflow) : (size_t)TW_SEG_CACHE_SMALLEST << (c - 1);
}

void tw__seg_cache_init(tw_segs *g)
{
    for (int c = 0; c < TW_SEG_CACHE_CLASSES; c++)
        atomic_init(&g->cache.head[c], NULL);
    atomic_init(&g->cache.unused, NULL);
    atomic_init(&g->cache.bytes, 0);
    g->cache.min = tw__seg_cache_min_override ? tw__seg_cache_min_override : TW_SEG_CACHE_MIN;
    g->cache.allow = g->cache.min;
    g->map_from = map_threshold();
}

/* A producer inside its guard takes a segment from the cache, zeroed.
 * Why the guard makes the pop safe (liburcu's rule for its lfstack's pop:
 * pop inside an RCU read-side section, and push a node again only after a
 * grace period): a popper that has read the head X and then X's link may
 * lose X to another producer, which uses it as a segment; X can only come
 * back to the stack after its slot detached it and a grace period passed,
 * which waits for the first popper to leave. So the head it compares
 * against is never X again while it might act on a stale link (no ABA),
 * and X's memory is never freed under it. */
static void *cache_pop(tw_seg_guard *g, size_t bytes)
{
    int c = cache_class(bytes);
    if (c < 0)
        return NULL;
    tw_seg_cache *k = &g->s->wheel.segs.cache;
    tw_seg_node *n = stack_pop(&k->head[c]);
    if (!n)
        return NULL;
    /* Relaxed: a bound the drainer checks; it only ever overestimates (we
     * take off after the pop, it adds before the push). */
    atomic_fetch_sub_explicit(&k->bytes, bytes, memory_order_relaxed);
    /* The link is the segment's first word, which a popper that lost X
     * may still load (atomically): clear it with an atomic store. The rest
     * nobody else reads. */
    _Atomic uint64_t *seg = (_Atomic uint64_t *)(void *)n;
    atomic_store_explicit(&seg[0], 0, memory_order_relaxed);
    memset((char *)n + sizeof seg[0], 0, bytes - sizeof seg[0]);
    return n;
}

void tw__seg_recycle(tw_service *s, void *p, size_t bytes)
{
    tw_seg_cache *k = &s->wheel.segs.cache;
    int c = cache_class(bytes);
    /* Relaxed: only the drainer adds, so what it reads is at least what is
     * in the stacks, and the cache never holds more than it allows. */
    if (c < 0 || atomic_load_explicit(&k->bytes, memory_order_relaxed) + bytes > k->allow) {
        tw__seg_free(s, p, bytes, true);
        return;
    }
    count_made(s, -(int64_t)bytes);
    /* Relaxed: see cache_pop; the push's CAS publishes the node. */
    atomic_fetch_add_explicit(&k->bytes, bytes, memory_order_relaxed);
    stack_push(&k->head[c], p);
}

uint64_t tw__seg_reused(tw_service *s)
{
    return TW_STRIPES_SUM(s, seg_reused);
}

uint64_t tw__seg_cached_bytes(tw_service *s)
{
    /* Relaxed: a statistic; exact at rest (tests). */
    return atomic_load_explicit(&s->wheel.segs.cache.bytes, memory_order_relaxed);
}

/* A segment a producer made and could not install, on its way to the
 * drainer. Its first word is left alone: a popper that lost this segment
 * to our producer may still load it as the cache's link. Every segment
 * and table has room for three words. */
typedef struct unused_seg {
    _Atomic uint64_t first;
    tw_seg_node node;
    size_t bytes;
} unused_seg;
_Static_assert(sizeof(unused_seg) <= sizeof(tw_overflow), "an unused table holds its header");
_Static_assert(sizeof(unused_seg) <= TW_SEG_CACHE_SMALLEST, "an unused segment holds its header");

void tw__seg_unused(tw_seg_guard *g, void *p, size_t bytes)
{
    /* Why not free it: a popper that read this segment as the cache's head
     * may still load its link (cache_pop), so it waits a grace period like
     * any detached segment. The push's CAS publishes `bytes`. */
    unused_seg *u = p;
    u->bytes = bytes;
    stack_push(&g->s->wheel.segs.cache.unused, &u->node);
    tw__count_rare(g->s, TW_RARE_SEG_LOST);
}

/* tw_destroy: no reader is left. */
static void cache_fini(tw_service *s)
{
    tw_seg_node *n, *next;
    for (n = stack_take_all(&s->wheel.segs.cache.unused); n; n = next) {
        next = chain_next(n);
        unused_seg *u = caa_container_of(n, unused_seg, node);
        tw__seg_free(s, u, u->bytes, true);
    }
    tw_seg_cache *k = &s->wheel.segs.cache;
    for (int c = 0; c < TW_SEG_CACHE_CLASSES; c++) {
        size_t bytes = class_bytes(c);
        for (n = stack_take_all(&k->head[c]); n; n = next) {
            next = chain_next(n);
            atomic_fetch_sub_explicit(&k->bytes, bytes, memory_order_relaxed);
            release(&s->wheel.segs, n, bytes);
        }
    }
}

/* ---- allocation, continued ------------------------------------------------------- */

void *tw__seg_alloc(tw_seg_guard *g, size_t bytes, bool counted)
{
    tw_service *s = g->s;
    void *p = counted ? cache_pop(g, bytes) : NULL;
    if (p) {
        count_made(s, (int64_t)bytes);
        tw__count_add(&tw__stripe(s)->seg_reused, 1);
        return p;
    }
    if (is_mapped(&s->wheel.segs, bytes)) {
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
    release(&s->wheel.segs, p, bytes);
    if (counted)
        count_made(s, -(int64_t)bytes);
}

uint64_t tw__seg_held_bytes(tw_service *s)
{
    return TW_STRIPES_SUM(s, seg_bytes); /* wraps per stripe; the sum is exact */
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
    g->cache.allow = g->budget_held > g->cache.min ? g->budget_held : g->cache.min;
}

bool tw__seg_within_budget(const tw_segs *g)
{
    return g->budget_held <= g->keep_min;
}

bool tw__seg_may_retire(tw_segs *g, size_t items)
{
    if (tw__seg_within_budget(g))
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

/* `recycle`: to the cache (after a grace period); else back to the
 * system (tw_destroy, the plant). */
static void free_list(tw_service *s, tw_retire_list *l, bool recycle)
{
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].trimmed)
            tw__seg_free(s, l->v[i].p, l->v[i].bytes, false);
        else if (l->v[i].table)
            tw__slot_table_free(s, l->v[i].p, recycle);
        else if (recycle)
            tw__seg_recycle(s, l->v[i].p, l->v[i].bytes);
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

/* Drainer: retire what producers could not install. */
static void take_unused(tw_segs *g)
{
    tw_seg_node *n, *next;
    for (n = stack_take_all(&g->cache.unused); n; n = next) {
        next = chain_next(n);
        unused_seg *u = caa_container_of(n, unused_seg, node);
        if (list_room(&g->fresh, 1))
            tw__seg_retire(g, u, u->bytes, false);
        else
            stack_push(&g->cache.unused, n); /* no memory for the list: later */
    }
}

/* Drainer: a cache more than twice what it allows (the segments in use
 * shrank after a burst) gives the excess back. Popping needs a read-side
 * section, and what is popped waits a grace period before it is freed,
 * as in cache_pop: another popper may still hold it as the head. */
static void trim_cache(tw_service *s)
{
    tw_segs *g = &s->wheel.segs;
    /* Relaxed: a statistic-grade look; an overestimate only trims later. */
    uint64_t have = atomic_load_explicit(&g->cache.bytes, memory_order_relaxed);
    if (have <= 2 * g->cache.allow)
        return;
    tw_seg_guard guard = TW_SEG_GUARD(s);
    tw__seg_enter(&guard);
    for (int c = TW_SEG_CACHE_CLASSES - 1; c >= 0 && have > g->cache.allow; c--) {
        size_t bytes = class_bytes(c);
        while (have > g->cache.allow && list_room(&g->fresh, 1)) {
            tw_seg_node *n = stack_pop(&g->cache.head[c]);
            if (!n)
                break;
            /* Relaxed: as in cache_pop. */
            have = atomic_fetch_sub_explicit(&g->cache.bytes, bytes, memory_order_relaxed) - bytes;
            g->fresh.v[g->fresh.n++] = (tw_retired){.p = n, .bytes = bytes, .trimmed = true};
            g->waiting_bytes += bytes;
        }
    }
    tw__seg_leave(&guard);
}

bool tw__seg_poll(tw_service *s)
{
    tw_segs *g = &s->wheel.segs;
    if (__builtin_expect(tw__seg_plant_no_grace, 0))
        free_list(s, &g->fresh, false); /* the planted bug: no grace period */
    take_unused(g);
    trim_cache(s);
    if (may_begin(s))
        step_begin(s);
    if (g->stepping && readers_gone(s, g->old_phase)) {
        g->stepping = false;
        free_list(s, &g->two, true); /* retired before the step before this one */
        list_hand_over(&g->two, &g->one);
    }
    return tw__seg_waiting(g);
}

/* It does not wait for a reader still inside (a producer's publish, a
 * tw_next_due scan, preempted there): that would make tw_advance wait for
 * a stalled caller (a review: 1.5 s beside a held reader), against the
 * progress the header promises. What such a reader holds up is left to a
 * later step, as before. */
bool tw__seg_settle(tw_service *s)
{
    tw_segs *g = &s->wheel.segs;
    take_unused(g);
    trim_cache(s);
    /* Two steps take what was retired before the first to freed. */
    for (int round = 0; round < 3 && tw__seg_waiting(g); round++) {
        if (!g->stepping)
            step_begin(s);
        if (!readers_gone(s, g->old_phase))
            return true;
        g->stepping = false;
        free_list(s, &g->two, true);
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
    free_list(s, &g->fresh, false);
    free_list(s, &g->one, false);
    free_list(s, &g->two, false);
    cache_fini(s);
    free(g->fresh.v);
    free(g->one.v);
    free(g->two.v);
    g->fresh = g->one = g->two = (tw_retire_list){0};
}
