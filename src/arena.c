/*
 * arena.c: the memory of the slots' small overflow segments (under 64 KiB;
 * larger ones are mapped one by one, slots.c), and the huge-page advice
 * for the other large allocations. A bump allocator over
 * chunks that are never freed before tw_destroy, which is all a segment
 * needs: segments stay with their slot for the service's life.
 *
 * Why not malloc: a busy wheel writes fresh slot memory all the time (WL1
 * churn: ~50 MB/s of entries for timers that will be cancelled), and on a
 * virtual machine every first touch of a 4 KiB page is a trap that costs
 * microseconds. perf put 15-18% of WL1 in page faults under calloc. Chunks
 * of 2 MiB and more ask for transparent huge pages: one fault per 2 MiB.
 * Chunks start at 256 KiB and double up to 2 MiB, so a quiet service does
 * not pay 2 MiB for its first overflow.
 *
 * Invariants:
 *   - Memory handed out is zero (fresh anonymous mappings) and belongs to
 *     one caller. The only memory handed out twice is a piece given back
 *     by tw__arena_undo: the most recent piece of the current chunk, never
 *     accessed (an install race's loser, slots.c); the undo's release and
 *     the next taker's acquire order even a read before the hand-over.
 *   - Every chunk ever installed is reachable from `cur` through `prev`.
 *   - `used` may run past a chunk's end (a request that did not fit); such
 *     a chunk hands out nothing more and is replaced (when memory allows).
 */
#include "internal.h"

#include <sys/mman.h>

#define ARENA_FIRST (256u * 1024u)
#define ARENA_HUGE  (2u * 1024u * 1024u)
#define ARENA_ALIGN 64u
#define ARENA_MAX_PIECE ((size_t)1 << 30) /* larger requests: NULL */

struct tw_arena_chunk {
    struct tw_arena_chunk *prev; /* written before the chunk is installed */
    size_t size;                 /* bytes, header included */
    _Atomic size_t used;         /* bytes handed out, header included */
};

#define ARENA_HEADER \
    ((sizeof(struct tw_arena_chunk) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))

/* Large allocations (arena chunks of 2 MiB, record chunks, the drainer's
 * lists) ask for transparent huge pages (where the system has them in
 * "madvise" mode, as Debian's default): one fault per 2 MiB instead of
 * 512, and fewer TLB misses. Only whole, aligned 2 MiB pages inside the
 * allocation are advised (small ones have none: no system call); failure
 * costs only speed. */
void tw__advise_huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
    uintptr_t a = ((uintptr_t)p + ARENA_HUGE - 1) & ~(uintptr_t)(ARENA_HUGE - 1);
    uintptr_t e = ((uintptr_t)p + bytes) & ~(uintptr_t)(ARENA_HUGE - 1);
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

void tw__arena_init(tw_arena *a)
{
    atomic_init(&a->cur, NULL);
}

void tw__arena_fini(tw_arena *a)
{
    /* Relaxed: tw_destroy runs alone. */
    struct tw_arena_chunk *c = atomic_load_explicit(&a->cur, memory_order_relaxed);
    while (c) {
        struct tw_arena_chunk *prev = c->prev;
        munmap(c, c->size);
        c = prev;
    }
}

/* A mapping of `size` bytes; 2 MiB chunks are aligned to 2 MiB (map more,
 * trim the ends), as a huge page must be. */
static void *map_chunk(size_t size)
{
    size_t align = size >= ARENA_HUGE ? ARENA_HUGE : 4096;
    size_t len = size + align - 4096;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *start = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    if (start > p)
        munmap(p, (size_t)(start - p));
    if (start + size < p + len)
        munmap(start + size, (size_t)(p + len - (start + size)));
    tw__advise_huge_pages(start, size);
    return start;
}

/* Replace `old` (NULL or full) by a fresh chunk that already holds our
 * piece of `bytes`. NULL: out of memory. *lost: another thread installed
 * a chunk first (ours was unmapped; try that one). */
static void *new_chunk(tw_arena *a, struct tw_arena_chunk *old, size_t bytes, bool *lost)
{
    /* Acquire: as in tw__arena_alloc. Someone replaced `old` already: use
     * theirs rather than map (and fault in) a chunk only to throw it away. */
    if (atomic_load_explicit(&a->cur, memory_order_acquire) != old) {
        *lost = true;
        return NULL;
    }
    size_t size = old ? old->size * 2 : ARENA_FIRST;
    if (size > ARENA_HUGE)
        size = ARENA_HUGE;
    while (size < ARENA_HEADER + bytes)
        size *= 2;
    *lost = false;
    struct tw_arena_chunk *c = map_chunk(size);
    if (!c)
        return NULL;
    c->prev = old;
    c->size = size;
    atomic_init(&c->used, ARENA_HEADER + bytes);
    /* Release on success: the header we wrote is seen by whoever loads cur
     * (acquire). Acquire on failure: we read the winner's header next. */
    if (atomic_compare_exchange_strong_explicit(&a->cur, &old, c, memory_order_acq_rel,
                                                memory_order_acquire))
        return (char *)c + ARENA_HEADER;
    munmap(c, size);
    *lost = true;
    return NULL;
}

static size_t piece_size(size_t bytes)
{
    return (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
}

void *tw__arena_alloc(tw_arena *a, size_t bytes)
{
    if (bytes > ARENA_MAX_PIECE)
        return NULL;
    bytes = piece_size(bytes);
    for (;;) {
        /* Acquire: pairs with the install CAS; the header is initialised. */
        struct tw_arena_chunk *c = atomic_load_explicit(&a->cur, memory_order_acquire);
        if (c) {
            /* Acquire: pairs with an undo's release, for a piece handed
             * out again. Fresh memory needs no ordering (zero from the
             * kernel, ours alone), and a segment is published by its own
             * release CAS (slots.c). */
            size_t off = atomic_fetch_add_explicit(&c->used, bytes, memory_order_acquire);
            if (off + bytes <= c->size)
                return (char *)c + off;
        }
        bool lost;
        void *p = new_chunk(a, c, bytes, &lost);
        if (p || !lost)
            return p;
    }
}

void tw__arena_undo(tw_arena *a, void *p, size_t bytes)
{
    if (bytes > ARENA_MAX_PIECE)
        return; /* never handed out */
    bytes = piece_size(bytes);
    /* Acquire: as in tw__arena_alloc. */
    struct tw_arena_chunk *c = atomic_load_explicit(&a->cur, memory_order_acquire);
    if (!c || (char *)p < (char *)c || (char *)p >= (char *)c + c->size)
        return; /* an older chunk: the piece stays unused */
    size_t end = (size_t)((char *)p - (char *)c) + bytes;
    /* Release: the next taker of the piece (acquire) is ordered after our
     * last access. Succeeds only if nobody took memory after ours, which
     * we never wrote, so the next taker finds it zero as promised. */
    (void)atomic_compare_exchange_strong_explicit(&c->used, &end, end - bytes,
                                                  memory_order_release,
                                                  memory_order_relaxed);
}
