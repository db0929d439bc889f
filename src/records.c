/*
 * records.c: timer records, their handles, and the free list.
 *
 * A record holds one timer in 40 bytes: its state word, deadline, callback
 * and argument (a periodic timer's period sits in a side array made for
 * the chunks that need one). Records live in a type-stable table: chunk j
 * holds 1024 << j records and is allocated on first use (zeroed, so pages
 * of records never used are never touched), never freed before tw_destroy,
 * so a thread holding a stale index always reads a record (never freed
 * memory).
 * That is how we answer the ABA trap: generation tags, not grace periods.
 *
 *   - A handle is (generation << 32 | index); generations never take the
 *     value 0, so 0 is never a handle. Each service starts its records'
 *     generations at its own base, so another service's handle is refused.
 *   - The state word carries the generation (see internal.h). Every change
 *     of a live record is a CAS on that word that includes the generation,
 *     so a stale handle's CAS fails: a handle never acts on another timer.
 *   - Freeing a record stores FREE with the next generation, then pushes it
 *     on the free list. Any slot entry still naming the old generation is
 *     skipped by the drain (entries are hints; the state word is the truth).
 *
 * Why not RCU (liburcu) or ck_epoch for reclamation: every API call would
 * have to run inside a read-side section, which means registering every
 * user thread with a flavour of RCU (or paying urcu-bp's cost), and freeing
 * a cancelled record only after a grace period. Generation tags need
 * nothing from the user's threads and free the record at cancel time.
 *
 * Free list: each thread that owns a counter stripe (TW_OWNED_STRIPES at a
 * time, service.c) keeps up to TW_MAGAZINE
 * freed records to itself, so churn on one
 * thread does not touch shared memory (a full magazine hands half of
 * itself over as one chain, one CAS; an empty one takes never-used records
 * 16 at a time); beyond that, a Treiber stack over
 * record indexes with a 32-bit tag in the
 * head word (tag | index + 1), one 64-bit CAS; a FREE record's deadline
 * word holds its link. ck_stack would need the
 * double-width CAS that our TSan build cannot see (notes/DEPENDENCIES.md),
 * and liburcu's lfstack pops need RCU or a mutex; indexes into a
 * type-stable table make a single-word tagged stack enough. A pop reads the
 * `free_next` of a record that another thread may have popped and reused
 * meanwhile (its deadline word then holds a deadline): that read is atomic
 * and its value is discarded when the tag CAS fails.
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
 * (on_grow), which populates those pages (madvise MADV_POPULATE_WRITE:
 * no write, so no race with a producer initialising a record there) a step
 * at a time while it is idle (cursor.c). Ahead by two huge pages, so that
 * a producer does not reach the next one first. Memory populated ahead:
 * at most TW_PREFAULT_AHEAD records (5 MiB), plus the rest of a huge page. Without
 * kernel support (before Linux 5.14), or under the MANUAL clock (no
 * cursor), producers fault the pages in themselves, as before.
 *
 * Limits: at most 2^31 - 1 records (TW_REC_MAX); a
 * generation is reused after 2^32 reuses of one record, and a stale handle
 * would have to be kept across exactly that many to be mistaken.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older headers lack it */
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

/* Each service's generations start from its own base, spread over the
 * 32-bit space (golden-ratio steps), so a handle of another service names
 * a generation this service's record will not reach for ~2^31 reuses:
 * TW_ENOENT, not another service's timer. */
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
    r->gen_base = next_gen_base();
    for (int j = 0; j < TW_REC_CHUNKS; j++) {
        atomic_init(&r->chunk[j], NULL);
        atomic_init(&r->periodic[j], NULL);
    }
    atomic_init(&r->free_head, 0);
    atomic_init(&r->next_unused, 0);
    atomic_init(&r->prefault_want, 0);
    r->limit = TW_REC_MAX;
    r->prefault_done = 0;
    r->prefault_off = false;
    r->on_grow = NULL;
    return TW_OK;
}

void tw__records_fini(tw_records *r)
{
    for (int j = 0; j < TW_REC_CHUNKS; j++) {
        /* Relaxed: tw_destroy runs alone; thread joins ordered everything. */
        free(atomic_load_explicit(&r->chunk[j], memory_order_relaxed));
        free(atomic_load_explicit(&r->periodic[j], memory_order_relaxed));
    }
}

tw_periodic *tw__periodic(tw_records *r, uint32_t idx, bool make)
{
    uint32_t off;
    uint32_t j = chunk_of(idx, &off);
    /* Acquire: pairs with the release CAS that installed the array. */
    tw_periodic *p = atomic_load_explicit(&r->periodic[j], memory_order_acquire);
    if (!p && make) {
        tw_periodic *fresh = calloc(chunk_len(j), sizeof *fresh);
        if (!fresh)
            return NULL;
        /* Release on success publishes the zeroed array; the loser frees. */
        if (atomic_compare_exchange_strong_explicit(&r->periodic[j], &p, fresh,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire))
            p = fresh;
        else
            free(fresh);
    }
    return p ? &p[off] : NULL;
}

tw_record *tw__rec_of(const tw_records *r, tw_timer t)
{
    if (t == 0 || tw__handle_gen(t) == 0)
        return NULL;
    uint32_t idx = tw__handle_idx(t);
    /* Relaxed: only bounds the lookup; the chunk pointer load is acquire. */
    if (idx >= atomic_load_explicit(&((tw_records *)r)->next_unused,
                                    memory_order_relaxed))
        return NULL;
    return tw__rec(r, idx);
}

uint32_t tw__records_high(const tw_records *r)
{
    /* Seq_cst: tw_stop's sweep reads the high-water mark after announcing
     * the stop; pairs with the seq_cst CAS in fresh_indexes(). */
    uint32_t n = atomic_load_explicit(&((tw_records *)r)->next_unused,
                                      memory_order_seq_cst);
    return n < r->limit ? n : r->limit;
}

static int ensure_chunk(tw_records *r, uint32_t j)
{
    /* Acquire: see the records of a chunk another thread installed. */
    if (atomic_load_explicit(&r->chunk[j], memory_order_acquire))
        return TW_OK;
    uint32_t n = chunk_len(j);
    /* Zeroed: state 0 (generation 0) is "never used"; fresh_indexes gives a
     * record its first generation when it hands it out. */
    tw_record *c = calloc(n, sizeof *c);
    if (!c)
        return TW_ENOMEM;
    /* 10M pending timers are 400 MB of records: without huge pages a
     * cancel in random order pays a TLB miss on top of the cache miss, and
     * a schedule a page fault every 102 records. */
    tw__advise_huge_pages(c, (size_t)n * sizeof *c);
    tw_record *expected = NULL;
    /* Release on success: publishes the initialised chunk. Acquire on
     * failure: we use the winner's chunk instead. */
    if (!atomic_compare_exchange_strong_explicit(&r->chunk[j], &expected, c,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire))
        free(c);
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

/* Fault in (writable) the whole pages inside bytes [lo, hi) of a chunk:
 * pages it shares with the heap or another mapping stay to the producer. */
static void populate(tw_records *r, char *lo, char *hi)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)lo + page - 1) & ~(page - 1);
    uintptr_t b = (uintptr_t)hi & ~(page - 1);
    if (b <= a)
        return;
    if (madvise((void *)a, b - a, MADV_POPULATE_WRITE) != 0 && errno == EINVAL)
        r->prefault_off = true; /* the kernel does not know the advice */
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
    if (!r->prefault_off && ensure_chunk(r, j) == TW_OK) {
        /* Acquire: as in tw__rec (the chunk may be another thread's). */
        char *c = (char *)atomic_load_explicit(&r->chunk[j], memory_order_acquire);
        populate(r, c + (size_t)off * sizeof(tw_record),
                 c + ((size_t)off + (to - from)) * sizeof(tw_record));
    }
    r->prefault_done = to;
    return to < want;
}

/* Take up to `want` (a power of two) never-used indexes [*first, *first +
 * *got), one CAS, so the table never grows past the limit. A block ends on
 * a multiple of `want`: blocks of different threads never share a cache
 * line, and never straddle a chunk (chunks start at multiples of 1024), so
 * the chunk is made before the CAS and a failure (ENOMEM) burns no index.
 * Each record gets its first generation (FREE). */
static int fresh_indexes(tw_records *r, uint32_t want, uint32_t *first, uint32_t *got)
{
    /* Seq_cst (the load and the CAS): tw_stop reads the high-water mark
     * after it announces the stop; a producer that takes a fresh index
     * after that read sees the announcement when it re-checks (see
     * service.c, schedule_commit). */
    uint32_t n = atomic_load_explicit(&r->next_unused, memory_order_seq_cst);
    uint32_t k;
    for (;;) {
        if (n >= r->limit)
            return TW_EAGAIN;
        uint32_t off;
        int rc = ensure_chunk(r, chunk_of(n, &off));
        if (rc != TW_OK)
            return rc;
        k = want - (n & (want - 1));
        k = r->limit - n < k ? r->limit - n : k;
        if (atomic_compare_exchange_weak_explicit(&r->next_unused, &n, n + k,
                                                  memory_order_seq_cst,
                                                  memory_order_seq_cst))
            break;
    }
    if (r->on_grow && (n + k) / TW_PREFAULT_STEP != n / TW_PREFAULT_STEP)
        ask_prefault(r, n + k);
    for (uint32_t i = n; i < n + k; i++) {
        /* Relaxed: ours until published PENDING (seq_cst) by the scheduler. */
        atomic_store_explicit(&tw__rec(r, i)->state,
                              (uint64_t)r->gen_base << TW_GEN_SHIFT, memory_order_relaxed);
    }
    *first = n;
    *got = k;
    return TW_OK;
}

static bool pop_free(tw_records *r, uint32_t *idx, tw_record **out)
{
    ck_backoff_t backoff = CK_BACKOFF_INITIALIZER;
    /* Acquire: the pushed record's link and FREE state are visible. */
    uint64_t head = atomic_load_explicit(&r->free_head, memory_order_acquire);
    for (;;) {
        uint32_t top = (uint32_t)head;
        if (top == 0)
            return false;
        tw_record *rec = tw__rec(r, top - 1);
        /* Relaxed: a stale read is discarded by the tagged CAS below. */
        uint32_t next = (uint32_t)atomic_load_explicit(&rec->deadline, memory_order_relaxed);
        uint64_t want = (head & 0xffffffff00000000ull) + (1ull << 32) + next;
        /* Acquire on success: we own the record from here and read what the
         * freeing thread wrote before its release push. */
        if (atomic_compare_exchange_weak_explicit(&r->free_head, &head, want,
                                                  memory_order_acquire,
                                                  memory_order_acquire)) {
            *idx = top - 1;
            *out = rec;
            return true;
        }
        ck_backoff_eb(&backoff);
        /* Acquire: re-read after backing off; the CAS's copy is stale by now. */
        head = atomic_load_explicit(&r->free_head, memory_order_acquire);
    }
}

/* This thread's magazine, if it has one: an owned stripe. (It used to be
 * off under max_timers, when the cap was the table's size: then every
 * schedule and cancel met the one shared free list, 4x slower on two
 * threads; the cap is a budget now, service.c.) */
static tw_magazine *my_magazine(tw_records *r)
{
    if (!tw__stripe_owned)
        return NULL;
    return &r->mag[tw__stripe_mine];
}

/* A thread with a magazine takes never-used records in aligned blocks of
 * up to TW_MAGAZINE / 2: its records then sit together, so two threads'
 * fresh timers do not share cache lines (one index at a time gives threads
 * that schedule at once alternate records, two to a line), and the shared
 * counter takes one RMW per 16 records. Hands out the lowest; keeps the
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

int tw__rec_alloc(tw_records *r, uint32_t *idx, tw_record **rec, uint64_t *state)
{
    tw_magazine *m = my_magazine(r);
    if (m && m->n) {
        *idx = m->idx[--m->n];
        *rec = tw__rec(r, *idx);
    } else if (!pop_free(r, idx, rec)) {
        uint32_t one;
        int rc = m ? refill_fresh(r, m, idx) : fresh_indexes(r, 1, idx, &one);
        if (rc != TW_OK)
            return rc;
        *rec = tw__rec(r, *idx);
    }
    /* Relaxed: we own a FREE record; its state was ordered by the pop's
     * acquire (or the chunk's). */
    *state = atomic_load_explicit(&(*rec)->state, memory_order_relaxed);
    return TW_OK;
}

uint64_t tw__rec_free_state(uint64_t old_state)
{
    uint32_t gen = tw__gen(old_state) + 1;
    if (gen == 0)
        gen = 1;
    return (uint64_t)gen << TW_GEN_SHIFT | TW_ST_FREE;
}

static void push_shared(tw_records *r, const uint32_t *idx, uint32_t n);

/* A full magazine hands half of itself to the shared list in one CAS, so a
 * thread that only frees (a worker running a burst) pays one contended RMW
 * per TW_MAGAZINE / 2 records, not one per record. */
void tw__rec_push_free(tw_records *r, uint32_t idx)
{
    tw_magazine *m = my_magazine(r);
    if (!m) {
        push_shared(r, &idx, 1);
        return;
    }
    if (m->n == TW_MAGAZINE) {
        m->n -= TW_MAGAZINE / 2;
        push_shared(r, &m->idx[m->n], TW_MAGAZINE / 2);
    }
    m->idx[m->n++] = idx; /* FREE already; ours until we hand it out */
}

/* Push records idx[0..n) (FREE, owned by the caller) as one chain. */
static void push_shared(tw_records *r, const uint32_t *idx, uint32_t n)
{
    /* Relaxed: the chain's links are published by the release CAS below. */
    for (uint32_t k = 0; k + 1 < n; k++)
        atomic_store_explicit(&tw__rec(r, idx[k])->deadline, idx[k + 1] + 1,
                              memory_order_relaxed);
    tw_record *last = tw__rec(r, idx[n - 1]);
    ck_backoff_t backoff = CK_BACKOFF_INITIALIZER;
    uint64_t head = atomic_load_explicit(&r->free_head, memory_order_relaxed);
    for (;;) {
        /* Relaxed: published by the release CAS below. */
        atomic_store_explicit(&last->deadline, (uint32_t)head, memory_order_relaxed);
        uint64_t want = (head & 0xffffffff00000000ull) + (1ull << 32) + idx[0] + 1;
        /* Release: the next popper sees the link and the FREE state. */
        if (atomic_compare_exchange_weak_explicit(&r->free_head, &head, want,
                                                  memory_order_release,
                                                  memory_order_relaxed))
            return;
        ck_backoff_eb(&backoff);
        /* Relaxed: re-read after backing off; the CAS's copy is stale by now. */
        head = atomic_load_explicit(&r->free_head, memory_order_relaxed);
    }
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

/*
 * The lease: how a deadline changes without a lock and without a stale
 * writer. Whoever moves a live timer's deadline (tw_reschedule, or a runner
 * re-arming a periodic timer) first sets TW_F_LEASE with a CAS that checks
 * the generation; only the lease holder writes `deadline` and `seq`;
 * releasing the lease bumps the version, so a drainer that read the old
 * deadline fails its claim CAS instead of firing on a stale value. Others
 * never wait for a lease: the drain keeps an entry at the next tick, a
 * cancel or a stop marks the timer ZOMBIE (ended) and the holder frees it
 * on release, a second reschedule is overtaken (it is ordered just before
 * the holder's).
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
    /* Relaxed: we hold the lease, and only lease holders write seq. */
    uint32_t seq = atomic_load_explicit(&rec->seq, memory_order_relaxed);
    /* Acquire: see a ZOMBIE mark's writer (cancel/stop) before freeing. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    for (;;) {
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
