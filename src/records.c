/*
 * records.c: timer records, their handles, the free lists, and the table's
 * memory (given back from the top once a burst is over).
 *
 * A record holds one timer in 40 bytes: its state word, deadline, callback
 * and argument (a periodic timer's period sits in a side array made for
 * the chunks that need one). Records live in a type-stable table: chunk j
 * holds 1024 << j records and is mapped on first use (zeroed, so pages of
 * records never used are never touched), and unmapped only by tw_destroy,
 * so a thread holding a stale index always reads a record (never freed
 * memory). Pages of a chunk given back read as zeros (below).
 * That is how we answer the ABA trap: generation tags, not grace periods.
 *
 *   - A handle is (generation << 32 | index); generations never take the
 *     value 0, so 0 is never a handle. Each service starts its records'
 *     generations at its own base, so another service's handle is refused.
 *   - The state word carries the generation (see internal.h). Every change
 *     of a live record is a CAS on that word that includes the generation,
 *     so a stale handle's CAS fails: a handle never acts on another timer.
 *   - Freeing a record stores FREE with the next generation, then pushes it
 *     on a free list. Any slot entry still naming the old generation is
 *     skipped by the drain (entries are hints; the state word is the truth).
 *
 * Why not RCU (liburcu) or ck_epoch for reclamation: every API call would
 * have to run inside a read-side section, which means registering every
 * user thread with a flavour of RCU (or paying urcu-bp's cost), and freeing
 * a cancelled record only after a grace period. Generation tags need
 * nothing from the user's threads and free the record at cancel time.
 *
 * Free lists: each thread that owns a counter stripe (TW_OWNED_STRIPES at
 * a time, service.c) keeps up to TW_MAGAZINE freed records to itself, so
 * churn on one thread does not touch shared memory (a full magazine hands
 * half of itself over, one CAS per chunk it spans; an empty one takes
 * never-used records 16 at a time). Beyond that, each chunk has its own
 * free list, a Treiber stack of blocks of records (a block: the records
 * pushed together, as a tree in their deadline and arg words; see "the
 * free lists" below) with a tag in the head word, one 64-bit CAS; a pop
 * takes a block from the lowest chunk that has one. ck_stack would need
 * the double-width CAS that our TSan build cannot see
 * (notes/DEPENDENCIES.md), and liburcu's lfstack pops need RCU or a mutex;
 * indexes into a type-stable table make a single-word tagged stack enough.
 * A pop reads the word of a root that another thread may have popped and
 * reused meanwhile (its deadline word then holds a deadline): that read
 * is atomic and its value is discarded when the tag CAS fails.
 *
 * Giving the top back. The table used to keep its high-water mark: a burst
 * of a million timers left 40 MB of records for the service's life, reused
 * but never returned. Lowest-first pops let the top chunk fall idle once
 * fewer timers are pending; the drainer then gives it back (under
 * shrink_lock; decisions once per trim period in tw__rec_trim, the work in
 * bounded steps, one per drainer loop, in tw__rec_trim_step):
 *   1. Close: when the timers pending stayed at most half of what the
 *      chunks below the top hold for two trims in a row, the top chunk
 *      (from TW_REC_KEEP_CHUNKS up) is closed: TW_REC_SHUT in `next` stops
 *      fresh indexes (one word with the high-water mark, so no fresh CAS
 *      lands after it), and the closed bit in its list's head stops pops
 *      (a pop's CAS fails on it). Records freed into it still go there.
 *   2. Drain: the records in use come back as their timers end. Those
 *      that sit in magazines are taken out by the trimmer at each period
 *      (below).
 *   3. Check: each list counts its records (free_n: added after a push's
 *      CAS, taken off before a pop's: a block's size as its root says,
 *      read before the CAS, given back if the CAS fails or read anew).
 *      Once the closed list counts every record handed out of the
 *      chunk, nobody else holds one, and none can be taken: the trimmer
 *      bumps the head's tag (a seq_cst RMW), then reads the count
 *      (seq_cst); a pop the count did not see took its count off after
 *      that read, so its CAS comes after the bump and fails on the
 *      closed head.
 *   4. Scan, TW_SCAN_SLICE records a step: the furthest generation, or
 *      placement tag (generation + seq: the discard zeroes seq), any
 *      record reached. Then the trimmer takes the list (nobody else can
 *      touch it now) and sets chunk_gen past that generation, so a stale
 *      handle is mistaken only after 2^31 reuses or more of its record (a
 *      chunk whose generations spread wider is kept instead) within one
 *      life of the chunk; across lives, every record's generation moves on
 *      by the busiest record's reuses at each give-back, so a handle kept
 *      that long is mistaken after 2^32 reuses of the chunk's busiest
 *      records, summed over its lives, however little its own was used.
 *   5. Give the pages back (MADV_DONTNEED), TW_DISCARD_SLICE pages a step
 *      from the end, then the chunk's side array and what the cursor
 *      populated above it; then the high-water mark goes down to the
 *      chunk's start. A stale handle finds nothing (beyond the mark), or
 *      zeros (generation 0, never a handle's); a stale slot entry reads a
 *      FREE record and is dropped, as any stale entry is.
 *   Steps are bounded so that a give-back never holds a tick up for long:
 *   done in one go, reading a big chunk's records and freeing its pages
 *   put 10 ms into WL3's worst lateness. A producer that needs a record
 *   while the top is closed, and finds none below it, reopens it (reopen:
 *   the lock, a rare path): during 1-4 it opens the list again; during 5 it
 *   ends the give-back there (the pages not yet given back stay) and the
 *   whole chunk is fresh again. A chunk stays while a timer in it is
 *   pending: records are not moved.
 *
 * Magazines and the trimmer. A magazine's owner uses it with plain loads
 * and stores, and may be idle for good (a thread that armed a burst and
 * sleeps), holding records of the closed chunk. The trimmer empties it
 * anyway with an asymmetric handshake, the store-buffering shape of
 * threads.c: the owner stores busy = 1, then (a compiler barrier) loads
 * steal, and uses the magazine only if steal is 0; the trimmer stores
 * steal = 1, makes every thread execute a full barrier (tw__fence_heavy,
 * membarrier), then loads busy, and touches the magazine only if it is 0.
 * One of the two sees the other's store. busy = 0 (release) ends a use;
 * steal = 0 (release) ends the trimmer's. The owner's price: two stores
 * and a load, on its magazine's own line.
 *
 * The table is not what max_timers caps: that counts pending timers
 * (service.c, budgets), and a one-shot's record stays in use while its
 * callback runs. Records in use are at most the pending timers plus the
 * callbacks running plus the records the magazines keep.
 *
 * Populating ahead (MONOTONIC services): a record chunk's pages are
 * faulted in on first touch, and the producer that touches one pays for
 * zeroing it (with huge pages 2 MiB at a time; on a virtual machine perf put
 * 40% of WL2's schedule time in that zeroing, and its cost swung 2x with
 * where the guest's free memory came from; with the faults moved to the
 * cursor, WL2's 10M schedules ran 1.5x faster, median of 5 pairs). So as the table's high-water
 * mark crosses each TW_PREFAULT_STEP records, the producer raises
 * prefault_want to TW_PREFAULT_AHEAD records past it and wakes the cursor
 * (on_grow), which populates those pages (an atomic write of 0 over 0 on a record
 * of each page: populate says why not madvise) a step at a time while it
 * is idle (cursor.c). Ahead by two huge pages, so that a producer does not
 * reach the next one first. Memory populated ahead: at most
 * TW_PREFAULT_AHEAD records (5 MiB), plus the rest of a huge page. Under
 * the MANUAL clock (no cursor), producers fault the pages in themselves.
 *
 * Limits: at most 2^31 - 1 records (TW_REC_MAX); a
 * generation is reused after 2^32 reuses of one record (2^31 across a
 * chunk's give-back), and a stale handle would have to be kept across
 * that many to be mistaken.
 */
#include "internal.h"

#include <sched.h>
#include <stdlib.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <sys/mman.h>
#include <unistd.h>


#define TW_REC_SHUT   (1ull << 32) /* in `next`: no fresh index */
#define LIST_CLOSED   (1ull << 32) /* in a list's head: no pop */
#define LIST_TAG      (1ull << 33) /* a list head's tag unit */
#define REC_CLOSED    1            /* internal: fresh indexes are shut */

#define TW_SCAN_SLICE    16384u  /* records read per step (640 KiB) */
#define TW_DISCARD_SLICE 256u    /* pages given back per step (1 MiB of 4 KiB pages) */

#if defined(__x86_64__)
/* The CPU has PREFETCHW (CPUID 0x80000001, ECX bit 8: every AMD64 CPU,
 * Intel's since Broadwell), which tw__prefetch_for_write issues. Written
 * once, by the loader, before any thread of ours exists; read-only after,
 * so its plain reads race with nothing. */
bool tw__cpu_prefetchw;

__attribute__((constructor)) static void probe_prefetchw(void)
{
    unsigned a, b, c, d;
    tw__cpu_prefetchw = __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & bit_PRFCHW);
}
#endif

static uint32_t chunk_of(uint32_t idx, uint32_t *offset)
{
    /* Chunk j covers [1024 * (2^j - 1), 1024 * (2^(j+1) - 1)). */
    uint32_t q = (idx >> TW_REC_CHUNK0_SHIFT) + 1;
    uint32_t j = 31u - (uint32_t)__builtin_clz(q);
    *offset = idx - (((1u << j) - 1u) << TW_REC_CHUNK0_SHIFT);
    return j;
}

static uint32_t chunk_len(uint32_t j)
{
    return 1u << (TW_REC_CHUNK0_SHIFT + j);
}

static uint32_t chunk_base(uint32_t j)
{
    return ((1u << j) - 1u) << TW_REC_CHUNK0_SHIFT;
}

static size_t chunk_bytes(uint32_t j)
{
    return (size_t)chunk_len(j) * sizeof(tw_record);
}

static size_t periodic_bytes(uint32_t j)
{
    return (size_t)chunk_len(j) * sizeof(tw_periodic);
}

/* Chunks are mapped, not allocated, so that their pages can be given back
 * (MADV_DONTNEED) and read as zeros after. */
static void *table_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Each service's generations start from its own base, spread over the
 * 32-bit space (golden-ratio steps), so a handle of another service names
 * a generation this service's record reaches only after as many reuses as
 * the two bases lie apart: TW_ENOENT until then, not another service's
 * timer. Golden-ratio steps keep the first k bases about 2^32 / (2.3 k)
 * apart at the closest (the three-gap theorem: 1 / (sqrt(5) k) of the
 * circle), so the bound shrinks as a process creates services: ~10^9
 * reuses for the first two, ~3 * 10^6 among 600 created (README, Limits). */
static _Atomic uint32_t service_serial;

static uint32_t next_gen_base(void)
{
    /* Relaxed: any distinct serial will do. */
    uint32_t n = atomic_fetch_add_explicit(&service_serial, 1, memory_order_relaxed) + 1;
    uint32_t base = n * 0x9e3779b9u;
    return base ? base : 1;
}

int tw__records_init(tw_records *r)
{
    if (pthread_mutex_init(&r->shrink_lock, NULL) != 0)
        return TW_ENOMEM;
    r->gen_base = next_gen_base();
    for (int j = 0; j < TW_REC_CHUNKS; j++) {
        atomic_init(&r->chunk[j], NULL);
        atomic_init(&r->periodic[j], NULL);
        atomic_init(&r->chunk_gen[j], r->gen_base);
        atomic_init(&r->list[j].head, 0);
        atomic_init(&r->list[j].free_n, 0);
    }
    for (int i = 0; i < TW_OWNED_STRIPES; i++) {
        atomic_init(&r->mag[i].busy, 0);
        atomic_init(&r->mag[i].steal, 0);
        r->mag[i].n = 0;
    }
    atomic_init(&r->next, 0);
    atomic_init(&r->prefault_want, 0);
    atomic_init(&r->reopens, 0);
    atomic_init(&r->given_back, 0);
    r->limit = TW_REC_MAX;
    r->prefault_done = 0;
    r->on_grow = NULL;
    r->quiet = r->stuck = 0;
    r->keep_from = TW_REC_CHUNKS;
    atomic_init(&r->phase, TW_SHRINK_OPEN);
    r->step_at = r->far = 0;
    r->last_free = -1;
    r->reopened = false;
    return TW_OK;
}

void tw__records_fini(tw_records *r)
{
    for (uint32_t j = 0; j < TW_REC_CHUNKS; j++) {
        /* Relaxed: tw_destroy runs alone; thread joins ordered everything. */
        tw_record *c = atomic_load_explicit(&r->chunk[j], memory_order_relaxed);
        tw_periodic *p = atomic_load_explicit(&r->periodic[j], memory_order_relaxed);
        if (c)
            munmap(c, chunk_bytes(j));
        if (p)
            munmap(p, periodic_bytes(j));
    }
    pthread_mutex_destroy(&r->shrink_lock);
}

tw_periodic *tw__periodic(tw_records *r, uint32_t idx, bool make)
{
    uint32_t off;
    uint32_t j = chunk_of(idx, &off);
    /* Acquire: pairs with the release CAS that installed the array. */
    tw_periodic *p = atomic_load_explicit(&r->periodic[j], memory_order_acquire);
    if (!p && make) {
        tw_periodic *fresh = table_map(periodic_bytes(j));
        if (!fresh)
            return NULL;
        /* Release on success publishes the zeroed array; the loser unmaps. */
        if (atomic_compare_exchange_strong_explicit(&r->periodic[j], &p, fresh,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire))
            p = fresh;
        else
            munmap(fresh, periodic_bytes(j));
    }
    return p ? &p[off] : NULL;
}

uint32_t tw__records_high(const tw_records *r)
{
    /* Seq_cst: tw_stop's sweep reads the high-water mark after announcing
     * the stop; pairs with the seq_cst CAS in fresh_indexes(). */
    uint32_t n = tw__rec_next_index(atomic_load_explicit(&((tw_records *)r)->next, memory_order_seq_cst));
    return n < r->limit ? n : r->limit;
}

size_t tw__rec_table_bytes(const tw_records *r)
{
    uint32_t n = tw__records_high(r);
    if (n == 0)
        return 0;
    uint32_t top = tw__rec_chunk(n - 1);
    return (size_t)chunk_base(top + 1) * sizeof(tw_record);
}

static int ensure_chunk(tw_records *r, uint32_t j)
{
    /* Acquire: see the records of a chunk another thread installed. */
    if (atomic_load_explicit(&r->chunk[j], memory_order_acquire))
        return TW_OK;
    /* Zeroed: state 0 (generation 0) is "never used"; fresh_indexes gives a
     * record its first generation when it hands it out. */
    tw_record *c = table_map(chunk_bytes(j));
    if (!c)
        return TW_ENOMEM;
    /* 10M pending timers are 400 MB of records: without huge pages a
     * cancel in random order pays a TLB miss on top of the cache miss, and
     * a schedule a page fault every 102 records. */
    tw__advise_huge_pages(c, chunk_bytes(j));
    tw_record *expected = NULL;
    /* Release on success: publishes the initialised chunk. Acquire on
     * failure: we use the winner's chunk instead. */
    if (!atomic_compare_exchange_strong_explicit(&r->chunk[j], &expected, c,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire))
        munmap(c, chunk_bytes(j));
    return TW_OK;
}
/* The high-water mark reached `high`: ask for the records up to
 * TW_PREFAULT_AHEAD past it to be populated (see the top). */
static void ask_prefault(tw_records *r, uint32_t high)
{
    uint32_t want = r->limit - high < TW_PREFAULT_AHEAD ? r->limit : high + TW_PREFAULT_AHEAD;
    /* Relaxed: only a guess for the CAS, which checks it. */
    uint32_t cur = atomic_load_explicit(&r->prefault_want, memory_order_relaxed);
    while (cur < want) {
        /* Seq_cst: the request comes before the look at whether the cursor
         * sleeps (cursor.c, the nudge), against the cursor's publish of
         * its sleep before its look at the request: one of the two sees
         * the other. Relaxed on failure: we only compare again. */
        if (atomic_compare_exchange_weak_explicit(&r->prefault_want, &cur, want,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed)) {
            r->on_grow(r);
            return;
        }
    }
}

bool tw__rec_prefault_asked(tw_records *r)
{
    /* Seq_cst: see ask_prefault. */
    return atomic_load_explicit(&r->prefault_want, memory_order_seq_cst) > r->prefault_done;
}

/* Fault in (writable) the pages of records [from, to) of chunk c: a
 * compare-and-swap of 0 for 0 on the state word of the first record that starts in
 * each page. Why a write of our own rather than madvise
 * (MADV_POPULATE_WRITE, as before 2026-11-28): madvise holds the process's
 * mmap lock (read) for the whole range, and zeroing a huge page took 4 ms
 * and more when the host had to back the guest's memory first. Every
 * mmap meanwhile (a producer's new segment, segments.c) waited for it: in
 * WL2's slow runs at 1M, a third of the schedule phase was spent blocked
 * in mmap (perf sched). A page fault takes only its own mapping's lock, so
 * other mappings come and go beside it. Why an atomic write: a
 * producer may be initialising a record there (fresh_indexes); an atomic
 * compare-and-swap of 0 for 0 changes nothing, and is a write, so the page
 * comes in writable (a read would map the zero page). */
static void populate(tw_record *c, uint32_t from, uint32_t to)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)&c[from], hi = (uintptr_t)&c[to];
    for (uintptr_t p = lo; p < hi; p = (p & ~(page - 1)) + page) {
        uint32_t i = (uint32_t)((p - (uintptr_t)c + sizeof *c - 1) / sizeof *c);
        if (i >= to)
            break;
        /* Relaxed: nothing is published; the CAS only makes the page ours.
         * A fresh page holds 0, so the CAS writes (0 again); a record in
         * use fails it and keeps its state. Not an add of 0: compilers may
         * turn an idempotent add into a load (clang on x86 does). */
        uint64_t zero = 0;
        atomic_compare_exchange_strong_explicit(&c[i].state, &zero, 0, memory_order_relaxed,
                                                memory_order_relaxed);
    }
}

bool tw__rec_prefault(tw_records *r)
{
    /* Seq_cst: see ask_prefault. */
    uint32_t want = atomic_load_explicit(&r->prefault_want, memory_order_seq_cst);
    uint32_t from = r->prefault_done;
    if (from >= want)
        return false;
    uint32_t off;
    uint32_t j = chunk_of(from, &off);
    uint32_t to = from - off + chunk_len(j); /* the chunk's end */
    if (to > want)
        to = want;
    if (to - from > TW_PREFAULT_STEP)
        to = from + TW_PREFAULT_STEP; /* a step per call: then plan again */
    /* A chunk made here ahead of any producer costs address space only
     * until populated. On failure (no memory) the producers fault the
     * pages in themselves, or find no memory as they would have. */
    if (ensure_chunk(r, j) == TW_OK) {
        /* Acquire: as in tw__rec (the chunk may be another thread's). */
        tw_record *c = atomic_load_explicit(&r->chunk[j], memory_order_acquire);
        populate(c, off, off + (to - from));
    }
    r->prefault_done = to;
    return to < want;
}

/* Take up to `want` (a power of two) never-used indexes [*first, *first +
 * *got), one CAS, so the table never grows past the limit. A block ends on
 * a multiple of `want`: blocks of different threads never share a cache
 * line, and never straddle a chunk (chunks start at multiples of 1024), so
 * the chunk is made before the CAS and a failure (ENOMEM) burns no index.
 * Each record gets its chunk's first generation (FREE). REC_CLOSED while
 * the top chunk is closed (see the top). */
static int fresh_indexes(tw_records *r, uint32_t want, uint32_t *first, uint32_t *got)
{
    /* Seq_cst (the load and the CAS): tw_stop reads the high-water mark
     * after it announces the stop; a producer that takes a fresh index
     * after that read sees the announcement when it re-checks (see
     * service.c, schedule_commit). The CAS also reads the trimmer's
     * seq_cst store that reopened the chunk, and with it chunk_gen. */
    uint64_t w = atomic_load_explicit(&r->next, memory_order_seq_cst);
    uint32_t n, k;
    for (;;) {
        if (w & TW_REC_SHUT)
            return REC_CLOSED;
        n = tw__rec_next_index(w);
        if (n >= r->limit)
            return TW_EAGAIN;
        uint32_t off;
        int rc = ensure_chunk(r, chunk_of(n, &off));
        if (rc != TW_OK)
            return rc;
        k = want - (n & (want - 1));
        k = r->limit - n < k ? r->limit - n : k;
        if (atomic_compare_exchange_weak_explicit(&r->next, &w, w + k, memory_order_seq_cst,
                                                  memory_order_seq_cst))
            break;
    }
    if (r->on_grow && (n + k) / TW_PREFAULT_STEP != n / TW_PREFAULT_STEP)
        ask_prefault(r, n + k);
    /* Relaxed: written before the trimmer's seq_cst store we read above. */
    uint64_t gen = atomic_load_explicit(&r->chunk_gen[tw__rec_chunk(n)], memory_order_relaxed);
    for (uint32_t i = n; i < n + k; i++) {
        /* Relaxed: ours until published PENDING (release) by the scheduler. */
        atomic_store_explicit(&tw__rec(r, i)->state, gen << TW_GEN_SHIFT,
                              memory_order_relaxed);
    }
    *first = n;
    *got = k;
    return TW_OK;
}

/* ---- the free lists ---------------------------------------------------------- */

/*
 * Blocks. A list is a stack of blocks, each up to TW_BLOCK records of its
 * chunk pushed together (half a magazine, a batch of frees). A block's
 * records b[0..n) form a binary tree in heap order, b[0] its root: record
 * b[k]'s children b[2k+1] + 1 and b[2k+2] + 1 (low and high 32 bits; 0:
 * none) are in its deadline word, the root's in its arg word; the root's
 * deadline word holds the next block's root + 1 (low 32 bits; 0: the end)
 * and n (high 32 bits). The head names a root. The deadline word shares
 * the state word's line in six records of eight (40-byte records), which
 * the freeing thread has in its cache: the arg word, in half of them on
 * the next line, cost WL2's cancels a miss every other record when every
 * node kept its children there.
 *
 * Why a tree: a thread that takes a block learns the indexes of its
 * records a level at a time, each level's loads independent of each other
 * (tw__prefetch_for_write brings every record in as it is named), so the
 * 64 records of a block cost about 7 memory latencies, not 64. As a chain
 * (each record's deadline naming the next, until 2026-11-29) the records
 * came one after the other: after a million timers were cancelled in
 * random order, a schedule took 150-185 ns against 69 ns fresh, the
 * chain's misses end to end.
 *
 * Readers of arg on records they do not own (pending_info, the stop
 * sweep, tw_foreach_pending) validate what they read by the state word,
 * which says FREE here; a popper that lost the race for a root reads
 * another timer's words and discards them when its tagged CAS fails.
 * A thread without a magazine (no owned counter stripe) takes one record,
 * the root, and pushes its two subtrees back as blocks (one CAS): each is
 * a tree in the same order already, and only its root's words are
 * written.
 */
#define TW_BLOCK 64
_Static_assert(TW_BLOCK <= TW_MAGAZINE, "a block fits an empty magazine");
_Static_assert(sizeof(void *) >= 8, "two indexes fit an arg word");

/* A root's deadline word: the next block (root + 1, 0: none), its size. */
static uint64_t block_word(uint32_t next_plus_one, uint32_t n)
{
    return (uint64_t)n << 32 | next_plus_one;
}

/* A root's children (index + 1 in the low and high 32 bits, 0: none) as
 * its arg word. */
static void *kids_word(uint64_t kids)
{
    return (void *)(uintptr_t)kids;
}

/* Relaxed, both: the block's records are ours (a pop's acquire and
 * seq_cst CAS ordered the pusher's stores before). */
static uint64_t root_kids(tw_record *rec)
{
    return (uint64_t)(uintptr_t)atomic_load_explicit(&rec->arg, memory_order_relaxed);
}

static uint64_t node_kids(tw_record *rec)
{
    return atomic_load_explicit(&rec->deadline, memory_order_relaxed);
}

/* Nodes in the subtree at heap position p of a tree of n. */
static uint32_t subtree_size(uint32_t p, uint32_t n)
{
    uint32_t size = 0;
    for (uint64_t lo = p, hi = p; lo < n; lo = 2 * lo + 1, hi = 2 * hi + 2)
        size += (uint32_t)((hi < n ? hi : n - 1) - lo + 1);
    return size;
}

/* A head with a new top, the tag bumped and the closed bit kept. */
static uint64_t list_with_top(uint64_t head, uint32_t top_plus_one)
{
    return ((head & ~0xffffffffull) + LIST_TAG) | top_plus_one;
}

/* The size a root's word gives, bounded: a root read after another
 * thread took it holds anything, and its count comes back off when the
 * CAS fails. */
static uint32_t block_size(uint64_t word)
{
    uint32_t n = (uint32_t)(word >> 32);
    return n == 0 ? 1 : n > TW_BLOCK ? TW_BLOCK : n;
}

/* Pop a block off chunk j's list, unless it is empty or closed: its root
 * in *idx and *out, its size in *n. */
static bool pop_block(tw_records *r, uint32_t j, uint32_t *idx, tw_record **out, uint32_t *n)
{
    tw_rec_list *l = &r->list[j];
    /* Acquire: the pushed block's words and FREE states are visible. */
    uint64_t head = atomic_load_explicit(&l->head, memory_order_acquire);
    ck_backoff_t backoff = CK_BACKOFF_INITIALIZER;
    int32_t off = 0; /* count taken off free_n */
    while ((uint32_t)head && !(head & LIST_CLOSED)) {
        uint32_t top = (uint32_t)head;
        tw_record *rec = tw__rec(r, top - 1);
        /* Relaxed: a stale read is discarded by the tagged CAS below. */
        uint64_t word = atomic_load_explicit(&rec->deadline, memory_order_relaxed);
        int32_t size = (int32_t)block_size(word);
        if (size > off) {
            /* Seq_cst: the count comes off before our CAS, so the
             * trimmer's count (read after its seq_cst bump of the head)
             * never includes a record a CAS of ours could still take (see
             * the top). */
            atomic_fetch_sub_explicit(&l->free_n, size - off, memory_order_seq_cst);
            off = size;
        }
        /* Seq_cst on success: after our count, and we own the block from
         * here, reading what the freeing thread wrote before its release
         * push. Acquire on failure: the new head's root. The CAS fails on
         * a head closed or bumped since our load. */
        if (atomic_compare_exchange_weak_explicit(&l->head, &head,
                                                  list_with_top(head, (uint32_t)word),
                                                  memory_order_seq_cst,
                                                  memory_order_acquire)) {
            if (off > size) /* Relaxed: as below; it only ever lags */
                atomic_fetch_add_explicit(&l->free_n, off - size, memory_order_relaxed);
            *idx = top - 1;
            *out = rec;
            *n = (uint32_t)size;
            return true;
        }
        ck_backoff_eb(&backoff);
        /* Acquire: re-read after backing off; the CAS's copy is stale by now. */
        head = atomic_load_explicit(&l->head, memory_order_acquire);
    }
    /* Relaxed: gives back the count we took; it only ever lags. */
    if (off)
        atomic_fetch_add_explicit(&l->free_n, off, memory_order_relaxed);
    return false;
}

/* The lowest chunk's free block: the top chunks fall idle when fewer
 * timers are pending, and can be given back. Its chunk in *j. */
static bool pop_lowest(tw_records *r, uint32_t *j, uint32_t *idx, tw_record **out, uint32_t *n)
{
    /* Relaxed: only bounds the scan (lists above the top are empty). */
    uint32_t next = tw__rec_next_index(atomic_load_explicit(&r->next, memory_order_relaxed));
    if (next == 0)
        return false;
    uint32_t top = tw__rec_chunk(next - 1);
    for (*j = 0; *j <= top; (*j)++) {
        if (pop_block(r, *j, idx, out, n))
            return true;
    }
    return false;
}

/* Push a chain of chunk j's blocks, holding n records in all, from the
 * root first to the root last (indexes + 1; FREE, owned by the caller;
 * every root's word written but last's link), in one CAS. */
static void push_blocks(tw_records *r, uint32_t j, uint32_t first, uint32_t last,
                        uint32_t last_n, uint32_t n)
{
    tw_rec_list *l = &r->list[j];
    tw_record *end = tw__rec(r, last - 1);
    ck_backoff_t backoff = CK_BACKOFF_INITIALIZER;
    uint64_t head = atomic_load_explicit(&l->head, memory_order_relaxed);
    for (;;) {
        /* Relaxed: published by the release CAS below. */
        atomic_store_explicit(&end->deadline, block_word((uint32_t)head, last_n),
                              memory_order_relaxed);
        /* Release: the next popper, or the trimmer counting a closed
         * list (acquire), sees the blocks' words and the FREE states. */
        if (atomic_compare_exchange_weak_explicit(&l->head, &head, list_with_top(head, first),
                                                  memory_order_release,
                                                  memory_order_relaxed))
            break;
        ck_backoff_eb(&backoff);
        /* Relaxed: re-read after backing off; the CAS's copy is stale by now. */
        head = atomic_load_explicit(&l->head, memory_order_relaxed);
    }
    /* Release, after the CAS: a trimmer that reads this count (acquire)
     * sees the records on the list, words written, before it gives their
     * memory back; counted after, never before, they are there. */
    atomic_fetch_add_explicit(&l->free_n, (int32_t)n, memory_order_release);
}

/* Node k's children in the block idx[0..n), as a word. */
static uint64_t kids_at(const uint32_t *idx, uint32_t n, uint32_t k)
{
    uint32_t left = 2 * k + 1, right = 2 * k + 2;
    return (uint64_t)(right < n ? idx[right] + 1 : 0) << 32 | (left < n ? idx[left] + 1 : 0);
}

/* One chunk's records from one base: push_chunk's records all lie in one
 * chunk, so each is found without tw__rec's lookup (a chunk's load and a
 * bit scan a record: push_chunk ran 43% fewer instructions for it in a
 * mass cancel of 200,000 timers, callgrind, 2026-11-29). */
typedef struct chunk_view {
    tw_record *c;
    uint32_t first; /* the index of c[0] */
} chunk_view;

static chunk_view chunk_view_of(tw_records *r, uint32_t j)
{
    /* Acquire: as tw__rec (the chunk's records are initialised). */
    return (chunk_view){atomic_load_explicit(&r->chunk[j], memory_order_acquire),
                        chunk_base(j)};
}

static tw_record *view_rec(chunk_view v, uint32_t idx)
{
    return &v.c[idx - v.first];
}

/* Records idx[0..n) of one chunk (n <= TW_BLOCK) as a block: the root's
 * children in its arg word, every other node's in its deadline word. The
 * root's deadline word is the caller's. */
static void block_link(chunk_view v, const uint32_t *idx, uint32_t n)
{
    /* Relaxed, both: published by push_blocks' release CAS. */
    atomic_store_explicit(&view_rec(v, idx[0])->arg, kids_word(kids_at(idx, n, 0)),
                          memory_order_relaxed);
    for (uint32_t k = 1; k < n; k++)
        atomic_store_explicit(&view_rec(v, idx[k])->deadline, kids_at(idx, n, k),
                              memory_order_relaxed);
}

/* Push idx[0..n), every one in chunk j, as blocks of up to TW_BLOCK, in
 * one CAS. */
static void push_chunk(tw_records *r, uint32_t j, const uint32_t *idx, uint32_t n)
{
    chunk_view v = chunk_view_of(r, j);
    uint32_t prev_root = 0, prev_n = 0;
    for (uint32_t at = 0; at < n; at += TW_BLOCK) {
        uint32_t k = n - at < TW_BLOCK ? n - at : TW_BLOCK;
        block_link(v, &idx[at], k);
        if (prev_root) {
            /* Relaxed: published by push_blocks' release CAS. */
            atomic_store_explicit(&view_rec(v, prev_root - 1)->deadline,
                                  block_word(idx[at] + 1, prev_n), memory_order_relaxed);
        }
        prev_root = idx[at] + 1;
        prev_n = k;
    }
    push_blocks(r, j, idx[0] + 1, prev_root, prev_n, n);
}

/* Push records idx[0..n) (FREE, owned by the caller; n <= TW_MAGAZINE;
 * push_shared takes any n), grouped by the chunk they lie in. Records
 * freed in order (a burst's runs) lie in one chunk; records freed in
 * random order (WL2's cancels) lie in chunks no branch predicts, so the
 * grouping is a counting sort whose loops do not branch on the chunk.
 * (The early stop of the one-chunk look, the sort's bound at the highest
 * chunk met and push_chunk's chunk_view take a third of a random
 * hand-over's instructions away, callgrind; WL2 1M's cancels 1.04x and
 * 1.02x, WL5 1.01x and 0.99x, within the noise: 17 and 9 farm-bench pairs
 * of twbench against 0ac8391, 2026-11-29.) */
static void push_grouped(tw_records *r, const uint32_t *idx, uint32_t n)
{
    /* One chunk (a burst's runs) or not: records freed in random order
     * differ within a few, so the look stops at the first that does. */
    uint32_t j0 = tw__rec_chunk(idx[0]), i = 1;
    while (i < n && tw__rec_chunk(idx[i]) == j0)
        i++;
    if (i == n) {
        push_chunk(r, j0, idx, n);
        return;
    }
    /* The sort's passes over the chunks go only as far as the highest
     * chunk met (the table's top, 9 at WL2's million, not 22). */
    uint32_t count[TW_REC_CHUNKS + 1] = {0}, sorted[TW_MAGAZINE], top = 0;
    for (i = 0; i < n; i++) {
        uint32_t j = tw__rec_chunk(idx[i]);
        count[j + 1]++;
        top = j > top ? j : top;
    }
    for (uint32_t j = 1; j <= top + 1; j++)
        count[j] += count[j - 1];
    uint32_t at[TW_REC_CHUNKS];
    for (uint32_t j = 0; j <= top; j++)
        at[j] = count[j];
    for (i = 0; i < n; i++)
        sorted[at[tw__rec_chunk(idx[i])]++] = idx[i];
    for (uint32_t j = 0; j <= top; j++) {
        if (count[j + 1] > count[j])
            push_chunk(r, j, &sorted[count[j]], count[j + 1] - count[j]);
    }
}

static void push_shared(tw_records *r, const uint32_t *idx, uint32_t n)
{
    for (uint32_t at = 0; at < n; at += TW_MAGAZINE)
        push_grouped(r, &idx[at], n - at < TW_MAGAZINE ? n - at : TW_MAGAZINE);
}

/* The records of the block at root (size n) in out[0..n), root first, a
 * level of its tree at a time: each named record is fetched as it is
 * named, so a level's loads overlap (see the top of this section). */
static void block_collect(tw_records *r, uint32_t root, tw_record *root_rec, uint32_t n,
                          uint32_t *out)
{
    out[0] = root;
    for (uint32_t k = 0; 2 * k + 1 < n; k++) {
        uint64_t kids = k == 0 ? root_kids(root_rec) : node_kids(tw__rec(r, out[k]));
        out[2 * k + 1] = (uint32_t)kids - 1;
        tw__prefetch_for_write(tw__rec(r, out[2 * k + 1]));
        if (2 * k + 2 < n) {
            out[2 * k + 2] = (uint32_t)(kids >> 32) - 1;
            tw__prefetch_for_write(tw__rec(r, out[2 * k + 2]));
        }
    }
}

/* A node of a block made a root: its children move to its arg word (its
 * deadline word is the caller's to write). */
static tw_record *make_root(tw_records *r, uint32_t idx)
{
    tw_record *rec = tw__rec(r, idx);
    /* Relaxed: published by push_blocks' release CAS. */
    atomic_store_explicit(&rec->arg, kids_word(node_kids(rec)), memory_order_relaxed);
    return rec;
}

/* A thread without a magazine took the block at root (size n > 1) for
 * its root alone: the root's two subtrees go back as blocks. */
static void push_subtrees(tw_records *r, uint32_t j, tw_record *root_rec, uint32_t n)
{
    uint64_t kids = root_kids(root_rec);
    uint32_t left = (uint32_t)kids, right = (uint32_t)(kids >> 32);
    uint32_t left_n = subtree_size(1, n);
    tw_record *left_rec = make_root(r, left - 1);
    if (!right) {
        push_blocks(r, j, left, left, left_n, left_n);
        return;
    }
    uint32_t right_n = subtree_size(2, n);
    make_root(r, right - 1);
    /* Relaxed: published by push_blocks' release CAS. */
    atomic_store_explicit(&left_rec->deadline, block_word(right, left_n), memory_order_relaxed);
    push_blocks(r, j, left, right, right_n, left_n + right_n);
}

/* block_collect for the checker: each child's index is checked to lie in
 * chunk j's [at, end) before the walk follows it, so a broken tree is
 * reported, not followed into memory that is not a record (a crash).
 * False if one does not lie there. */
static bool block_collect_checked(tw_records *r, uint32_t root, tw_record *root_rec,
                                  uint32_t n, uint32_t at, uint32_t end, uint32_t *out)
{
    out[0] = root;
    for (uint32_t k = 0; 2 * k + 1 < n; k++) {
        uint64_t kids = k == 0 ? root_kids(root_rec) : node_kids(tw__rec(r, out[k]));
        for (uint32_t c = 1; c <= 2 && 2 * k + c < n; c++) {
            /* 0 (no child) becomes UINT32_MAX here: out of every chunk. */
            uint32_t kid = (uint32_t)(kids >> (32 * (c - 1))) - 1;
            if (kid - at >= end - at)
                return false;
            out[2 * k + c] = kid;
        }
    }
    return true;
}

/* For tw__check (wheel.c), on a quiet service only: chunk j's list, block
 * by block and each block's tree level by level, each record passed to
 * visit (false stops the walk). Returns the records met, or -1 if the walk
 * broke: an index out of chunk j, a tree that does not hold its root's
 * size, or more than `limit` records (a cycle). */
int64_t tw__rec_list_walk(tw_records *r, uint32_t j, uint32_t limit,
                          bool (*visit)(void *ctx, uint32_t idx), void *ctx)
{
    /* Acquire, and acquire below: quiet, so any order would do; these
     * match the pops'. */
    uint32_t root = (uint32_t)atomic_load_explicit(&r->list[j].head, memory_order_acquire);
    uint32_t at = chunk_base(j), end = at + chunk_len(j);
    int64_t met = 0;
    uint32_t got[TW_BLOCK];
    while (root) {
        tw_record *rec = root - 1 - at < end - at ? tw__rec(r, root - 1) : NULL;
        if (!rec) /* out of the chunk, or the chunk is not there */
            return -1;
        uint64_t word = atomic_load_explicit(&rec->deadline, memory_order_acquire);
        uint32_t n = (uint32_t)(word >> 32);
        if (n == 0 || n > TW_BLOCK || met + n > limit ||
            !block_collect_checked(r, root - 1, rec, n, at, end, got))
            return -1;
        for (uint32_t k = 0; k < n; k++) {
            if (!visit(ctx, got[k]))
                return -1;
        }
        met += n;
        root = (uint32_t)word;
    }
    return met;
}

/* ---- magazines ---------------------------------------------------------------- */

/* The magazine itself (tw__mag_enter, tw__mag_leave) is inline in
 * internal.h: a cancel's free is one store into it. */

/* A thread with a magazine takes never-used records in aligned blocks of
 * up to TW_MAGAZINE / 2: its records then sit together, so two threads'
 * fresh timers do not share cache lines (one index at a time gives threads
 * that schedule at once alternate records, two to a line), and the shared
 * counter takes one RMW per TW_MAGAZINE / 2 records. Hands out the lowest; keeps the
 * rest (the magazine is empty when this is called). */
static int refill_fresh(tw_records *r, tw_magazine *m, uint32_t *idx)
{
    uint32_t first, got;
    int rc = fresh_indexes(r, TW_MAGAZINE / 2, &first, &got);
    if (rc != TW_OK)
        return rc;
    for (uint32_t k = got - 1; k > 0; k--)
        m->idx[m->n++] = first + k;
    *idx = first;
    return TW_OK;
}

/* We took a block of n > 1 for its root: the rest into our (empty)
 * magazine, in the order they are named, the first named taken first;
 * without a magazine, back on the list. */
static void take_rest(tw_records *r, tw_magazine *m, uint32_t j, uint32_t root,
                      tw_record *root_rec, uint32_t n)
{
    if (!m) {
        push_subtrees(r, j, root_rec, n);
        return;
    }
    uint32_t got[TW_BLOCK];
    block_collect(r, root, root_rec, n, got);
    for (uint32_t k = n - 1; k > 0; k--)
        m->idx[m->n++] = got[k];
}

/* A FREE record from the magazine m (or NULL), the lists, or never used. */
static int take_record(tw_records *r, tw_magazine *m, uint32_t *idx, tw_record **rec)
{
    if (m && m->n) {
        *idx = m->idx[--m->n];
        *rec = tw__rec(r, *idx);
        return TW_OK;
    }
    uint32_t j, n;
    if (pop_lowest(r, &j, idx, rec, &n)) {
        if (n > 1)
            take_rest(r, m, j, *idx, *rec, n);
        return TW_OK;
    }
    uint32_t one;
    int rc = m ? refill_fresh(r, m, idx) : fresh_indexes(r, 1, idx, &one);
    if (rc == TW_OK)
        *rec = tw__rec(r, *idx);
    return rc;
}

static void reopen(tw_records *r);

int tw__rec_alloc(tw_records *r, uint32_t *idx, tw_record **rec, uint64_t *state)
{
    int rc;
    do {
        tw_magazine *m = tw__mag_enter(r);
        rc = take_record(r, m, idx, rec);
        tw__mag_leave(m);
        if (rc == REC_CLOSED)
            reopen(r); /* nothing below the closed top: it is needed after all */
    } while (rc == REC_CLOSED);
    if (rc != TW_OK)
        return rc;
    /* Relaxed: we own a FREE record; its state was ordered by the pop's
     * acquire (or the chunk's). */
    *state = atomic_load_explicit(&(*rec)->state, memory_order_relaxed);
    return TW_OK;
}

/* A full magazine hands half of itself to the shared lists (one CAS per
 * chunk it spans), so a thread that only frees (a worker running a burst)
 * pays a contended RMW per TW_MAGAZINE / 2 records, not one per record. */
void tw__rec_push_free_many(tw_records *r, const uint32_t *idx, uint32_t n)
{
    tw_magazine *m = tw__mag_enter(r);
    if (!m) {
        push_shared(r, idx, n);
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (m->n == TW_MAGAZINE) {
            m->n -= TW_MAGAZINE / 2;
            push_shared(r, &m->idx[m->n], TW_MAGAZINE / 2);
        }
        m->idx[m->n++] = idx[i]; /* FREE already; ours until we hand it out */
    }
    tw__mag_leave(m);
}

void tw__rec_free(tw_records *r, uint32_t idx, uint64_t old_state)
{
    tw_record *rec = tw__rec(r, idx);
    /* Release: whoever next sees FREE (a pop, a stale CAS) sees the end of
     * our use of the record, e.g. the callback's last read of arg. */
    atomic_store_explicit(&rec->state, tw__rec_free_state(old_state),
                          memory_order_release);
    tw__rec_push_free(r, idx);
}

/* ---- giving the top back (see the top; under shrink_lock) -------------------- */

static uint32_t shrink_phase(tw_records *r)
{
    /* Relaxed: written under the lock; a look outside it is a hint. */
    return atomic_load_explicit(&r->phase, memory_order_relaxed);
}

static void set_phase(tw_records *r, uint32_t phase)
{
    /* Relaxed: under the lock (see shrink_phase). */
    atomic_store_explicit(&r->phase, phase, memory_order_relaxed);
}

static uint32_t top_of(tw_records *r)
{
    /* Relaxed: under the lock, `next` does not move while the top is shut. */
    return tw__rec_chunk(tw__rec_next_index(atomic_load_explicit(&r->next, memory_order_relaxed)) - 1);
}

/* Shut fresh indexes, then close the top chunk's list. */
static void close_top(tw_records *r)
{
    /* Seq_cst: fresh CASes expect a word without TW_REC_SHUT, so none
     * lands after this; it also fixes which chunk is the top. */
    uint64_t w = atomic_fetch_or_explicit(&r->next, TW_REC_SHUT, memory_order_seq_cst);
    uint32_t top = tw__rec_chunk(tw__rec_next_index(w) - 1);
    /* Seq_cst: a pop that reads the head after this leaves the list
     * alone; one that read it before fails its CAS on the new head. */
    atomic_fetch_or_explicit(&r->list[top].head, LIST_CLOSED, memory_order_seq_cst);
    r->stuck = 0;
    r->last_free = -1;
    set_phase(r, TW_SHRINK_CLOSED);
}

static void open_top(tw_records *r, uint32_t top)
{
    /* Seq_cst: pops may take from the list again, then fresh CASes may
     * land; both after the reopener's failed look below the top. */
    atomic_fetch_and_explicit(&r->list[top].head, ~LIST_CLOSED, memory_order_seq_cst);
    atomic_fetch_and_explicit(&r->next, ~TW_REC_SHUT, memory_order_seq_cst);
    set_phase(r, TW_SHRINK_OPEN);
}

/* The top's records are off its list and their generations known: the
 * whole chunk becomes never-used again, at its new generation. The end
 * of a give-back; also early (reopen), with pages not yet given back. */
static void end_give_back(tw_records *r, uint32_t top)
{
    tw_rec_list *l = &r->list[top];
    /* Relaxed: nobody can push or pop here (see the top). */
    uint64_t head = atomic_load_explicit(&l->head, memory_order_relaxed);
    /* Seq_cst: open (and empty) before fresh indexes open below. */
    atomic_store_explicit(&l->head, (head & ~(LIST_CLOSED | 0xffffffffull)) + LIST_TAG,
                          memory_order_seq_cst);
    /* Seq_cst: reopens fresh indexes at the chunk's start; a fresh CAS
     * that reads it sees the chunk's generation and its empty list. */
    atomic_store_explicit(&r->next, chunk_base(top), memory_order_seq_cst);
    set_phase(r, TW_SHRINK_OPEN);
}

/* A producer found no record below the closed top chunk: open it again.
 * Closed, or read for its generations: its list is whole, open it. Being
 * given back: end the give-back now, the chunk's pages not yet given back
 * stay. */
static void reopen(tw_records *r)
{
    pthread_mutex_lock(&r->shrink_lock);
    uint32_t phase = shrink_phase(r);
    if (phase != TW_SHRINK_OPEN) {
        if (phase == TW_SHRINK_DISCARD)
            end_give_back(r, top_of(r));
        else
            open_top(r, top_of(r));
        r->reopened = true;
        /* Relaxed: a statistic. */
        atomic_fetch_add_explicit(&r->reopens, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&r->shrink_lock);
}

/* The trimmer's half of the handshake (see the top): take the records at
 * `from` and above out of every magazine it can, onto their lists. A
 * magazine in use right now is left for the next trim. */
static void take_from_magazine(tw_records *r, tw_magazine *m, uint32_t from)
{
    uint32_t out[TW_MAGAZINE], k = 0, kept = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        if (m->idx[i] >= from)
            out[k++] = m->idx[i];
        else
            m->idx[kept++] = m->idx[i];
    }
    m->n = kept;
    if (k)
        push_shared(r, out, k);
}

/* A planted bug, for stress/table_shrink.c only: the trimmer empties
 * magazines without looking whether their owners are inside. TSan must
 * report it (ctest stress.table_shrink.plant). */
bool tw__rec_plant_no_handshake;

static void steal_magazines(tw_records *r, uint32_t from)
{
    for (int i = 0; i < TW_OWNED_STRIPES; i++) {
        /* Relaxed: ordered before the loads of busy by the heavy fence. */
        atomic_store_explicit(&r->mag[i].steal, 1, memory_order_relaxed);
    }
    tw__fence_heavy();
    for (int i = 0; i < TW_OWNED_STRIPES; i++) {
        tw_magazine *m = &r->mag[i];
        /* Acquire: pairs with the owner's release of busy; its last use
         * of the magazine happens before ours. */
        if (tw__rec_plant_no_handshake ||
            !atomic_load_explicit(&m->busy, memory_order_acquire))
            take_from_magazine(r, m, from);
        /* Release: the owner's next acquire of steal sees what we left. */
        atomic_store_explicit(&m->steal, 0, memory_order_release);
    }
}

/* Chunks above the top hold no record handed out: only the cursor's
 * populating ahead (or a fresh index's lost race) made them. Their pages
 * go back with the top's. */
static void discard_above(tw_records *r, uint32_t top)
{
    for (uint32_t j = top + 1; j < TW_REC_CHUNKS; j++) {
        /* Acquire: as in tw__rec (another thread may have made it). */
        tw_record *c = atomic_load_explicit(&r->chunk[j], memory_order_acquire);
        if (c)
            (void)madvise(c, chunk_bytes(j), MADV_DONTNEED);
    }
}

/* Closed: once the top's list counts every record handed out of it,
 * nobody else holds one and none can be taken; read their generations. */
static void check_drained(tw_records *r, uint32_t top, uint32_t n)
{
    /* Seq_cst: bump the head's tag, then read the count (see the top). */
    atomic_fetch_add_explicit(&r->list[top].head, LIST_TAG, memory_order_seq_cst);
    int32_t listed = atomic_load_explicit(&r->list[top].free_n, memory_order_seq_cst);
    if (listed == (int32_t)(n - chunk_base(top))) {
        r->step_at = chunk_base(top);
        r->far = 0;
        set_phase(r, TW_SHRINK_SCAN);
    }
}

/* A slice of the records' generations: how far past the chunk's first
 * generation any of them went. Then take the list (all of it is the
 * chunk's records, and nobody else can touch it) and give pages back. */
static void scan_step(tw_records *r, uint32_t top, uint32_t n)
{
    /* Relaxed: the trimmer's own word. */
    uint32_t from = atomic_load_explicit(&r->chunk_gen[top], memory_order_relaxed);
    uint32_t end = n - r->step_at > TW_SCAN_SLICE ? r->step_at + TW_SCAN_SLICE : n;
    for (uint32_t i = r->step_at; i < end; i++) {
        /* Past the generation and the placement tag (gen + seq) a record
         * reached: the discard zeroes seq, so a record's first tag in its
         * next life is its fresh generation, and one no further than its
         * last tag named an entry it left in a slot (a cancelled timer's)
         * as current: the drain placed that entry for the new timer, a
         * second current entry (a review's test, 2026-11-28). seq only
         * grows, so gen + seq is past every tag the record's entries
         * carry. Relaxed: ordered by check_drained's acquire of the count
         * (every record is free: no lease holder writes seq). */
        tw_record *rec = tw__rec(r, i);
        uint32_t gen = tw__gen(atomic_load_explicit(&rec->state, memory_order_relaxed));
        uint32_t seq = atomic_load_explicit(&rec->seq, memory_order_relaxed);
        uint32_t d = gen - from, t = gen + seq - from;
        d = t > d ? t : d;
        r->far = d > r->far ? d : r->far;
    }
    r->step_at = end;
    if (end < n)
        return;
    if (r->far >= 1u << 31) {
        r->keep_from = top; /* a hot chunk: keep it, and the 2^31 promise */
        open_top(r, top);
        return;
    }
    tw_rec_list *l = &r->list[top];
    /* Relaxed: closed, and every record on it: no push or pop succeeds. */
    uint64_t head = atomic_load_explicit(&l->head, memory_order_relaxed);
    atomic_store_explicit(&l->head, (head & ~0xffffffffull) + LIST_TAG, memory_order_relaxed);
    atomic_fetch_sub_explicit(&l->free_n, (int32_t)(n - chunk_base(top)),
                              memory_order_relaxed);
    uint32_t gen = from + r->far + 1;
    /* Relaxed: published by end_give_back's seq_cst store of `next`. */
    atomic_store_explicit(&r->chunk_gen[top], gen ? gen : 1, memory_order_relaxed);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    r->step_at = (uint32_t)((chunk_bytes(top) + page - 1) / page);
    set_phase(r, TW_SHRINK_DISCARD);
}

/* A slice of the chunk's pages given back, from its end; with the last,
 * what lies above it and its periodic side array, and the chunk is
 * never-used again. */
static void discard_step(tw_records *r, uint32_t top)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    /* Relaxed: installed long before (records were handed out of it). */
    char *c = (char *)atomic_load_explicit(&r->chunk[top], memory_order_relaxed);
    uint32_t lo = r->step_at > TW_DISCARD_SLICE ? r->step_at - TW_DISCARD_SLICE : 0;
    (void)madvise(c + (size_t)lo * page, (size_t)(r->step_at - lo) * page, MADV_DONTNEED);
    r->step_at = lo;
    if (lo)
        return;
    tw_periodic *p = atomic_load_explicit(&r->periodic[top], memory_order_relaxed);
    if (p)
        (void)madvise(p, periodic_bytes(top), MADV_DONTNEED);
    discard_above(r, top);
    if (r->on_grow) {
        /* The populating thread is us (the cursor): populate the chunk
         * again only when producers grow into it again. */
        uint32_t base = chunk_base(top);
        r->prefault_done = r->prefault_done < base ? r->prefault_done : base;
        /* Relaxed: fresh indexes are shut, but a producer that took one
         * before and is only now asking (ask_prefault) may raise it again
         * after this store: the cursor then populates up to
         * TW_PREFAULT_AHEAD records here again, the bound at the top; a
         * request this store overwrites only loses a populate ahead. */
        atomic_store_explicit(&r->prefault_want, r->prefault_done, memory_order_relaxed);
    }
    end_give_back(r, top);
    /* Relaxed: a statistic. */
    atomic_fetch_add_explicit(&r->given_back, 1, memory_order_relaxed);
}

/* Whether the top chunk is little used: at most half of what the chunks
 * below it hold is pending. */
static bool top_little_used(const tw_records *r, uint32_t n, uint64_t in_use)
{
    uint32_t top = tw__rec_chunk(n - 1);
    return top >= TW_REC_KEEP_CHUNKS && top < r->keep_from && in_use <= chunk_base(top) / 2;
}

void tw__rec_trim(tw_records *r, uint64_t in_use)
{
    pthread_mutex_lock(&r->shrink_lock);
    /* Relaxed: TW_REC_SHUT changes only under our lock; n may grow. */
    uint32_t n = tw__rec_next_index(atomic_load_explicit(&r->next, memory_order_relaxed));
    uint32_t phase = shrink_phase(r);
    bool reopened = r->reopened;
    r->reopened = false;
    if (n && phase == TW_SHRINK_OPEN) {
        if (reopened || !top_little_used(r, n, in_use))
            r->quiet = 0;
        else if (++r->quiet >= 2) /* little used at two trims in a row */
            close_top(r);
    }
    if (shrink_phase(r) == TW_SHRINK_CLOSED) {
        uint32_t top = top_of(r);
        steal_magazines(r, chunk_base(top));
        /* Relaxed: progress, for the idle cursor's plan. */
        int32_t listed = atomic_load_explicit(&r->list[top].free_n, memory_order_relaxed);
        r->stuck = listed == r->last_free ? r->stuck + 1 : 0;
        r->last_free = listed;
    }
    pthread_mutex_unlock(&r->shrink_lock);
}

bool tw__rec_trim_step(tw_records *r)
{
    uint32_t phase = shrink_phase(r);
    if (phase == TW_SHRINK_OPEN)
        return false;
    if (phase == TW_SHRINK_CLOSED) {
        /* Relaxed: a first look, without the lock; check_drained decides. */
        uint32_t n = tw__rec_next_index(atomic_load_explicit(&r->next, memory_order_relaxed));
        uint32_t top = tw__rec_chunk(n - 1);
        if (atomic_load_explicit(&r->list[top].free_n, memory_order_relaxed) !=
            (int32_t)(n - chunk_base(top)))
            return false;
    }
    pthread_mutex_lock(&r->shrink_lock);
    uint32_t n = tw__rec_next_index(atomic_load_explicit(&r->next, memory_order_relaxed));
    switch (shrink_phase(r)) {
    case TW_SHRINK_CLOSED:
        check_drained(r, top_of(r), n);
        break;
    case TW_SHRINK_SCAN:
        scan_step(r, top_of(r), n);
        break;
    case TW_SHRINK_DISCARD:
        discard_step(r, top_of(r));
        break;
    default:
        break;
    }
    phase = shrink_phase(r);
    pthread_mutex_unlock(&r->shrink_lock);
    return phase == TW_SHRINK_SCAN || phase == TW_SHRINK_DISCARD;
}

bool tw__rec_may_trim(tw_records *r, uint64_t in_use)
{
    uint32_t phase = shrink_phase(r);
    if (phase == TW_SHRINK_SCAN || phase == TW_SHRINK_DISCARD)
        return true;
    /* Relaxed: a hint for the idle cursor's plan; stuck and keep_from are
     * written by this thread (the trimmer). */
    uint32_t n = tw__rec_next_index(atomic_load_explicit(&r->next, memory_order_relaxed));
    if (n == 0)
        return false;
    if (phase == TW_SHRINK_CLOSED)
        return r->stuck < 3; /* a pending timer holds it: stop coming back */
    return top_little_used(r, n, in_use);
}

/*
 * The lease: how a deadline changes without a lock and without a stale
 * writer. Whoever moves a live timer's deadline (tw_reschedule, or a runner
 * re-arming a periodic timer) first sets TW_F_LEASE with a CAS that checks
 * the generation; only the lease holder writes `deadline` and `seq`;
 * releasing the lease bumps the version, so a drainer that read the old
 * deadline fails its claim CAS instead of firing on a stale value. Others
 * never wait for a lease: the drain keeps an entry at the next tick, a
 * cancel or a stop marks the timer ZOMBIE (ended) and the holder frees it
 * on release (or, a periodic re-arm that a reschedule has claimed, the
 * second of the two to meet the ZOMBIE: service.c, hand_over), a second
 * reschedule is overtaken (it is ordered just before the holder's).
 *
 * A holder that places the timer (`place`) gives the placement a new tag
 * first: it bumps seq before its release, so from the release on every
 * entry written before is superseded and dropped when met (internal.h,
 * tw_record), and then places the entry carrying the new tag. Between the
 * two, a drain finds no current entry and drops what it meets: the
 * placement is on its way (or the timer ended), and it is never later than
 * the next tick the drain has not processed.
 */
int tw__lease_publish(tw_service *s, tw_record *rec, uint32_t idx, bool place,
                      uint64_t tick)
{
    /* seq is read only by a holder that places. Records are 40 bytes, so
     * half of them have seq on the line after their state word, and a
     * move later (WL6's touch, a session's idle timeout pushed back)
     * places nothing: reading it anyway cost those moves a second line,
     * often from the other core. Relaxed: we hold the lease, and only
     * lease holders write seq. */
    uint32_t seq = place ? atomic_load_explicit(&rec->seq, memory_order_relaxed) : 0;
    /* Acquire: see a ZOMBIE mark's writer (cancel/stop) before freeing. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    for (;;) {
        if (tw__st(st) == TW_ST_ZOMBIE && (st & TW_F_DONE) && (st & TW_F_MOVED) &&
            !(st & TW_F_HANDED)) {
            /* Our lease is a periodic timer's re-arm, a reschedule claimed
             * it, and then a cancel or the stop ended the timer: the
             * claimant may not have stored its deadline in `handed` yet
             * (service.c, hand_over), so the record must outlive that
             * store. We leave the free to it: clear DONE. Release: our
             * writes before its free. */
            if (atomic_compare_exchange_weak_explicit(&rec->state, &st,
                                                      tw__ver_bump(st & ~(uint64_t)TW_F_DONE),
                                                      memory_order_release,
                                                      memory_order_acquire))
                return TW_ENOENT;
            continue;
        }
        if (tw__st(st) == TW_ST_ZOMBIE) {
            uint64_t freed = tw__rec_free_state(st);
            /* Seq_cst: an end of life that cancel_sync waiters and the stop
             * sweep must observe; also releases our use of the record. */
            if (atomic_compare_exchange_weak_explicit(&rec->state, &st, freed,
                                                      memory_order_seq_cst,
                                                      memory_order_acquire)) {
                tw__rec_push_free(&s->rec, idx);
                return TW_ENOENT;
            }
            continue;
        }
        if (tw__st(st) == TW_ST_PENDING && (st & TW_F_DONE) && (st & TW_F_MOVED)) {
            /* Our lease is a periodic timer's re-arm and a reschedule
             * claimed it (service.c, hand_over). */
            if (!(st & TW_F_HANDED)) {
                /* Its deadline is not there yet: leave the lease to it
                 * (it writes the deadline and publishes). Release: our
                 * deadline store comes before its own. */
                if (atomic_compare_exchange_weak_explicit(
                        &rec->state, &st, tw__ver_bump(st & ~(uint64_t)TW_F_DONE),
                        memory_order_release, memory_order_acquire))
                    return TW_OK;
                continue;
            }
            /* Its deadline replaces ours. Relaxed: ordered after our
             * acquire of st, which read its HANDED CAS (release); a later
             * claimant's store changes the state first, so our CAS below
             * fails if we read that. */
            uint64_t d = atomic_load_explicit(&tw__periodic(&s->rec, idx, false)->handed,
                                              memory_order_relaxed);
            atomic_store_explicit(&rec->deadline, d, memory_order_relaxed);
            tick = tw__tick_of(s, d);
            if (!place) /* Relaxed: as above; read once, before our store */
                seq = atomic_load_explicit(&rec->seq, memory_order_relaxed);
            place = true;
        }
        if (place) {
            /* Relaxed: published by the release CAS below (the same value
             * on every pass of this loop). */
            atomic_store_explicit(&rec->seq, seq + 1, memory_order_relaxed);
        }
        uint64_t open = tw__ver_bump(
            st & ~(uint64_t)(TW_F_LEASE | TW_F_DONE | TW_F_MOVED | TW_F_HANDED));
        /* Release: publishes the deadline (and seq) we wrote under the lease. */
        if (atomic_compare_exchange_weak_explicit(&rec->state, &st, open,
                                                  memory_order_release,
                                                  memory_order_acquire))
            break;
    }
    if (place)
        tw__place_internal(s, tw__entry(tw__tag(tw__gen(st), seq + 1), idx), tick);
    return TW_OK;
}
