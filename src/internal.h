/*
 * internal.h: what the parts of timerwheel share. Never installed.
 *
 * Parts (one file each, each with its own design comment):
 *   records.c  timer records: type-stable table, handles, state word, free
 *              lists, giving the table's top back
 *   slots.c    one lock-free slot: epoch-tagged counter, reserve, publish, drain
 *   segments.c the slots' segment memory and its reclamation (grace periods);
 *              huge-page advice
 *   wheel.c    levels, placement, the cursor step over a range of ticks, idle scan,
 *              the invariant checker
 *   clock.c    the service clock: monotonic, manual, absolute sleeps
 *   workers.c  running due timers: inline or on a pool, periodic re-arm,
 *              waiting for a run to finish
 *   cursor.c   the cursor thread of a MONOTONIC service
 *   service.c  configuration, the public calls, stop, destroy, stats
 *
 * Atomics: our own protocol words are C11 <stdatomic.h> with the order
 * written on each operation, so ThreadSanitizer checks exactly the orders
 * we ship. liburcu (wfcqueue, futex) and Concurrency Kit (ck_backoff) do
 * the jobs they are made for; see tsan_shim.h for how TSan sees them.
 */
#ifndef TW_INTERNAL_H
#define TW_INTERNAL_H

#include "timerwheel.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <urcu/arch.h> /* caa_cpu_relax */
#include <urcu/wfcqueue.h>

/* CAS retry back-off (Concurrency Kit): exponential, capped at 4095 spins.
 * CK's default cap (2^20 spins) lets a contended loop sleep-spin for
 * milliseconds; our retries are short and re-read the word afterwards. */
#define CK_BACKOFF_CEILING ((1u << 12) - 1)
#include <ck_backoff.h>

/* One step of a wait on a thread a few instructions from done (leaving a
 * window, lowering a gate, releasing a lease) unless it was preempted: the
 * first TW_WAIT_SPINS steps relax the CPU, later ones yield it, so that a
 * holder preempted on our CPU gets to run. No nap: these waits are short,
 * and a nanosleep is a cancellation point. */
#define TW_WAIT_SPINS 64
static inline void tw__wait_step(unsigned step)
{
    if (step < TW_WAIT_SPINS)
        caa_cpu_relax();
    else
        sched_yield();
}

#define TW_CACHELINE 64
#define TW_ALIGNED __attribute__((aligned(TW_CACHELINE)))

/* Yield points for the injected-interleaving build (TW_INJECT_YIELDS):
 * every delicate step of the protocol names itself here, so a stress run
 * can make rare interleavings common. Empty in a normal build. */
#ifdef TW_INJECT_YIELDS
void tw__inject(int point);
#define TW_INJECT(point) tw__inject(point)
#else
#define TW_INJECT(point) ((void)0)
#endif
enum {
    TW_INJ_RESERVE_PUBLISH, /* slot reserved, entry not yet published */
    TW_INJ_STATE_CAS,       /* state word read, CAS not yet tried */
    TW_INJ_CLOSE_DRAIN,     /* slot closed, entries not yet taken */
    TW_INJ_CASCADE,         /* entry taken, not yet re-placed or claimed */
    TW_INJ_SEG_INSTALL,     /* segment made (or taken from the cache), not
                               yet installed */
    TW_INJ_STEAL,           /* a stealer read a worker's batch pointer, not
                               yet the batch */
    TW_INJ_OWNED_TAKE,      /* a stripe's owner read its budget's counts,
                               not yet stored taken (service.c) */
    TW_INJ_POINTS
};

/* Rare paths, counted so that stress runs can prove they were taken. */
enum {
    TW_RARE_TOMBSTONED,   /* a publish found its reservation tombstoned */
    TW_RARE_NEWER,        /* a reservation found the slot already past its epoch */
    TW_RARE_LATE_SLOT,    /* a placement went to a late slot (target closed) */
    TW_RARE_CANCEL_LOST,  /* a cancel found its timer already started */
    TW_RARE_LEASE_MET,    /* the drain met a timer whose deadline was being moved */
    TW_RARE_RESCHED_FIRING, /* a reschedule took back a due, not started timer */
    TW_RARE_HANDED_OVER,  /* a reschedule handed its deadline to a periodic
                             timer's re-arm (stress/periodic_handover.c) */
    TW_RARE_RAN_AWAY,     /* a producer stalled across 2^29 rotations dropped
                             its reservation (wheel.c; tests/test_stall.c) */
    TW_RARE_EARLY_CLAIM,  /* a claim of a large slot began before its tick (wheel.c,
                             early claims; tests/test_workers.c) */
    TW_RARE_EARLY_LATE,   /* an early claim's tick came before it was done: it
                             handed over what it had and delivered the rest as
                             the step does (wheel.c; tests/test_workers.c) */
    TW_RARE_SEG_LOST,     /* a segment's install lost to another producer's: the
                             copy went to the drainer (segments.c, tw__seg_unused) */
    TW_RARE_EARLY_WAITED, /* an early claim left the rest of its slot to the step to
                             its tick rather than grow its staged list close to it
                             (wheel.c, staged_may_grow) */
    TW_RARE_EARLY_YIELDED,/* an early claim gave the cursor back for an earlier
                             tick that came due, to go on after it (wheel.c,
                             suspended claims; tests/test_workers.c) */
    TW_RARE_STOLEN,       /* an idle worker took a handle from a busy one's batch
                             (workers.c, stealing; stress/steal_runs.c) */
    TW_RARE_JOINED_STUCK, /* an idle worker joined one that made no progress in a
                             callback (workers.c, joining; tests/test_workers.c) */
    TW_RARE_JOINED_PAYS,  /* an idle worker joined one whose runs it speeds up
                             (workers.c, joining; tests/test_workers.c) */
    TW_RARE_MOVED_OFF,    /* a watcher left the CPU of the runner it watched
                             (workers.c, joining; its move: tests/test_workers.c) */
    TW_RARE_SPILL_OPENED, /* a full log's owner opened a page of its spill (defer.c) */
    TW_RARE_SPILL_REFUSED,/* ... and was refused one: it held as many entries as
                             timers were pending, or it was full, or no memory */
    TW_RARE_SPILL_HUGE,   /* ... asked for a page behind a backlog to be huge (defer.c) */
    TW_RARE_EARLY_CASCADE,/* a large slot of a level above 0 was drained before its
                             epoch, into level 0 (wheel.c, early cascades;
                             tests/test_workers.c) */
    TW_RARE_CASCADE_YIELDED,/* ... and gave the cursor back for an earlier tick
                             half way through (wheel.c, early cascades) */
    TW_RARE_PRESSURE,     /* a producer found the wheel far over compaction's
                             allowance and paid for it (wheel.c, back-pressure) */
    TW_RARE_PRESSURE_LEFT,/* ... and stopped waiting, compaction taking nothing out
                             for TW_PRESSURE_STILL looks (wheel.c, back-pressure) */
    TW_RARE_ROLE_TAKEN,   /* a producer under back-pressure found the drainer role
                             free and compacted (wheel.c, the drainer role) */
    TW_RARE_COMPACT_PIECES,/* a crowded slot was compacted in pieces (wheel.c,
                             compaction in pieces) ... */
    TW_RARE_COMPACT_YIELDED,/* ... and gave the cursor back for a tick half way */
    TW_RARE_COUNT
};

/* Every thread-local of the library. Initial-exec: in the shared library
 * the default (general-dynamic) model calls __tls_get_addr on every
 * access, six calls in one cancel. They come to 113 bytes, which a library
 * loaded late (dlopen) takes from glibc's static TLS surplus;
 * scripts/test-consumer.sh checks both (at most 256 bytes). */
#define TW_TLS _Thread_local __attribute__((tls_model("initial-exec")))

/* The calling thread's counter stripe (service.c): an index, and whether
 * this thread alone uses that index (an owned stripe, held until the
 * thread exits; TW_OWNED_STRIPES threads at a time). */
extern TW_TLS uint32_t tw__stripe_mine; /* UINT32_MAX: not assigned */
extern TW_TLS bool tw__stripe_owned;

/* The same, with what a cancel's free path asks besides, in one word: the
 * owned stripe's index (TW_LEAN_STRIPE), or TW_LEAN_SLOW when the thread
 * owns none (or has none yet) or the light fence is a real one
 * (tw__fence_real: no membarrier; such a thread's cancels take the general
 * path, which leaves its log entries to the drain); TW_LEAN_FORGETS while
 * our cancels clear their log entries (tw__defer_forget). Written by
 * this thread only: service.c (the stripe), defer.c (forgets).
 *
 * Why one word: a cancel in random order waits on its record's CAS, and
 * what comes behind it holds back the next cancel's miss: WL2's cancel
 * loop with 8, 16 and 32 more stores to a line it has took about 12, 30
 * and 65 ns longer a cancel (AMD guest, 1M pending, 2026-11-29). The three
 * thread-locals and the global this replaces were four loads and three
 * branches; with the give's look done once a block (tw__budget_give_to)
 * and the path keeping no frame (service.c, cancel_freed), WL2's cancels
 * at 1M gained 1.20x with max_timers set and 1.06x without (medians of 17
 * farm-bench pairs of twbench against e060318). */
extern TW_TLS uint32_t tw__stripe_lean;
#define TW_LEAN_STRIPE  0xffffu
#define TW_LEAN_FORGETS (1u << 30)
#define TW_LEAN_SLOW    (1u << 31)

/* ---- records.c --------------------------------------------------------- */

/* State word: gen (32) | ver (24) | flags (8). */
#define TW_ST_MASK       0x7u
#define TW_ST_FREE       0u  /* on a free list, in a magazine, or never used */
#define TW_ST_PENDING    1u  /* armed; has an entry in a slot at or before its deadline */
#define TW_ST_FIRING     2u  /* due, claimed by the cursor, callback not started */
#define TW_ST_RUNNING    3u  /* callback running */
#define TW_ST_ZOMBIE     4u  /* ended (cancelled or dropped) while a lease was held:
                                the lease holder frees it */
#define TW_F_LEASE       0x08u /* a reschedule owns the deadline word */
#define TW_F_CANCELREQ   0x10u /* periodic, running: cancelled, do not re-arm */
#define TW_F_DONE        0x20u /* periodic, running: run returned while a lease was
                                  held. PENDING|LEASE: the lease is the runner's
                                  re-arm (workers.c, finish_periodic) */
#define TW_F_MOVED       0x40u /* periodic, running: deadline word holds the next run.
                                  PENDING|LEASE|DONE: a reschedule claimed the re-arm
                                  (service.c, hand_over) */
#define TW_F_HANDED      TW_F_CANCELREQ /* PENDING|LEASE|DONE|MOVED: the claimant's
                                  deadline is in tw_periodic.handed (the bit means
                                  CANCELREQ only for a RUNNING timer) */
#define TW_F_PERIODIC    0x80u
#define TW_VER_SHIFT     8
#define TW_VER_MASK      0xffffffull
#define TW_GEN_SHIFT     32

static inline uint32_t tw__st(uint64_t w) { return (uint32_t)(w & TW_ST_MASK); }
static inline uint32_t tw__gen(uint64_t w) { return (uint32_t)(w >> TW_GEN_SHIFT); }
static inline uint64_t tw__ver_bump(uint64_t w)
{
    uint64_t ver = ((w >> TW_VER_SHIFT) + 1) & TW_VER_MASK;
    return (w & ~(TW_VER_MASK << TW_VER_SHIFT)) | (ver << TW_VER_SHIFT);
}
static inline uint64_t tw__with_st(uint64_t w, uint32_t st)
{
    return (w & ~(uint64_t)TW_ST_MASK) | st;
}

/* 40 bytes: a pending one-shot timer costs a record and an 8-byte slot
 * entry. A periodic timer's period lives in a side array (tw__periodic),
 * made only for chunks that hold one.
 *
 * seq numbers the record's placements that supersede the one before: a
 * lease holder that places the timer (a move earlier, a take-back, a
 * periodic re-arm) bumps it before its release, and every slot entry
 * carries the tag gen + seq of the placement that wrote it (tw__tag). The
 * drain re-places only an entry whose tag is the record's current one, so
 * an entry left behind by a timer moved earlier is dropped when its slot
 * comes round, never copied (issue 12: a timer moved earlier and later on
 * every tick otherwise gained an entry per round trip, and every copy was
 * re-placed until the timer ended). seq is never reset: gen and seq only
 * grow, so a tag repeats only after 2^31 frees and moves of one record.
 * (A chunk given back reads as zeros, seq too; its records' next life
 * starts its generations past every tag they reached: records.c, scan.)
 * Why a word of its own, not bits of the state word: the state word has
 * none to spare (a 32-bit generation, a 24-bit version against ABA, the
 * flags), and a tag of a few bits repeats after a few hundred moves, which
 * a peer choosing the pattern can time.
 *
 * The order of the fields: state, seq and logged first, the words a
 * cancel and the cursor's drain read; at a 40-byte stride their 16 bytes
 * share one cache line in 7 records of 8 (the other fields in 4 of 8). */
typedef struct tw_record {
    _Atomic uint64_t state;    /* see above; changes by CAS only (or by its owner) */
    _Atomic uint32_t seq;      /* placement sequence; written by lease holders only */
    _Atomic uint32_t logged;   /* the position in its arming thread's log of its last
                                  logged entry (defer.c, tw__defer_forget): a hint,
                                  written by the arming thread */
    _Atomic uint64_t deadline; /* live: ns since the service's origin, written by
                                  the owner (scheduler, lease holder, re-arming
                                  runner). FREE, on a free list: a block's
                                  root holds the next block and its size, the
                                  others their children (records.c, the free
                                  lists); in a magazine, what it held there */
    _Atomic(tw_callback) cb;   /* written by the scheduler before it publishes
                                  PENDING, read by owners; atomic (relaxed) for
                                  tw_foreach_pending, which reads it as the
                                  stop sweep reads arg (service.c) */
    _Atomic(void *) arg;       /* as cb; atomic for the stop sweep, which reads
                                  it before its CAS decides (service.c). FREE,
                                  a block's root: its children (records.c) */
} tw_record;
_Static_assert(sizeof(tw_record) == 40, "a record is 40 bytes");

#define TW_REC_CHUNK0_SHIFT 10            /* chunk j holds 1024 << j records */
#define TW_REC_CHUNKS       22            /* 1024 * (2^22 - 1) >= 2^31 records */
#define TW_REC_MAX          0x7fffffffu   /* indexes 0 .. 2^31 - 2 */

/* A thread's cache of free records (owned counter stripes only): records
 * it freed, and never-used ones it took as a block; churn (schedule,
 * cancel, schedule...) reuses records without touching the shared free
 * lists. `n` and `idx` are the owner's, except while the table's trimmer
 * holds the magazine: `busy` and `steal` decide who (records.c, the
 * asymmetric handshake). A full magazine hands half of itself to the
 * shared lists, one CAS and one count per chunk those records lie in: at
 * 32 records, that was 8% of WL2's cancels; at 128 the same CASes serve
 * four times the records (WL2 10M cancels 1.10, schedules 1.06, 8 pairs). */
#define TW_MAGAZINE 128
typedef struct tw_magazine {
    _Atomic uint32_t busy;  /* written by the owner: inside a magazine use */
    _Atomic uint32_t steal; /* written by the trimmer: it wants the magazine */
    uint32_t n;
    uint32_t idx[TW_MAGAZINE];
} TW_ALIGNED tw_magazine;

/* Stripes 0 .. TW_OWNED_STRIPES-1 each have at most one owner thread at a
 * time (plain load + store counts, a record magazine); the others are
 * shared round-robin by threads beyond that (atomic adds, no magazine). */
#define TW_OWNED_STRIPES 16
#define TW_SHARED_STRIPES 4
#define TW_STRIPES (TW_OWNED_STRIPES + TW_SHARED_STRIPES)

/* Populating the record table ahead of the producers (records.c). */
#define TW_PREFAULT_STEP  32768u  /* records (1.25 MiB): the producers' request grain */
#define TW_PREFAULT_AHEAD 131072u /* records (5 MiB) populated past the high-water mark */

/* Giving the table's top back (records.c): chunks below this one (31,744
 * records, 1.2 MiB) are kept for the service's life. */
#define TW_REC_KEEP_CHUNKS 5

/* The free records of one chunk: a Treiber stack over indexes (head: tag
 * << 33 | closed << 32 | index + 1; closed: pops leave it alone). */
typedef struct tw_rec_list {
    _Atomic uint64_t head;
    _Atomic int32_t free_n; /* records on it: added after a push, taken off
                               before a pop (records.c, giving the top back) */
} TW_ALIGNED tw_rec_list;

/* Where giving the top chunk back is (records.c, giving the top back). */
enum {
    TW_SHRINK_OPEN,    /* nothing closed */
    TW_SHRINK_CLOSED,  /* the top is closed, its records coming back */
    TW_SHRINK_SCAN,    /* all back: reading their generations, a slice a step */
    TW_SHRINK_DISCARD, /* giving its pages back, a slice a step, from the end */
};

typedef struct tw_records {
    _Atomic(tw_record *) chunk[TW_REC_CHUNKS];
    _Atomic(struct tw_periodic *) periodic[TW_REC_CHUNKS]; /* per chunk, on demand */
    /* A chunk's records take this generation when handed out fresh: the
     * service's base, then past every generation of the chunk's last life. */
    _Atomic uint32_t chunk_gen[TW_REC_CHUNKS];
    tw_rec_list list[TW_REC_CHUNKS];      /* free records, one list per chunk */
    /* TW_REC_SHUT (the top chunk hands out no fresh index) | never-used
     * indexes start here (the low 32 bits). */
    _Atomic uint64_t next TW_ALIGNED;
    _Atomic uint32_t prefault_want;       /* populate the table up to here (records.c) */
    uint32_t limit;                       /* max records (TW_REC_MAX) */
    uint32_t gen_base;                    /* this service's first generation */
    uint32_t prefault_done;               /* the populating thread's only */
    /* Called by a producer that raised prefault_want; set before the first
     * producer, never changed. NULL (MANUAL clock): nobody populates ahead. */
    void (*on_grow)(struct tw_records *r);
    /* Closing, reopening and giving back the top chunk (rare paths). */
    pthread_mutex_t shrink_lock;
    uint32_t quiet;       /* under the lock: trims in a row the top chunk was little used */
    uint32_t stuck;       /* under the lock: trims in a row a closed chunk did not drain */
    uint32_t keep_from;   /* under the lock: chunks from here are never closed again */
    _Atomic uint32_t phase; /* written under the lock: TW_SHRINK_* (records.c) */
    uint32_t step_at;     /* under the lock: the scan's next index, the discard's end (bytes / 4096) */
    uint32_t far;         /* under the lock: the scan's furthest generation past chunk_gen */
    int32_t  last_free;   /* under the lock: the closed list's count at the last trim */
    bool reopened;        /* under the lock: a producer needed the closed chunk */
    _Atomic uint64_t reopens;    /* statistics and tests */
    _Atomic uint64_t given_back; /* chunks given back; statistics and tests */
    tw_magazine mag[TW_OWNED_STRIPES];    /* one per owned stripe (its owner only) */
} tw_records;

int  tw__records_init(tw_records *r);
void tw__records_fini(tw_records *r);
/* The record at idx, or NULL if its chunk was never allocated. Inline:
 * it is on every path. Chunk j covers [1024 (2^j - 1), 1024 (2^(j+1) - 1)). */
static inline tw_record *tw__rec(const tw_records *r, uint32_t idx)
{
    uint32_t q = (idx >> TW_REC_CHUNK0_SHIFT) + 1;
    uint32_t j = 31u - (uint32_t)__builtin_clz(q);
    if (j >= TW_REC_CHUNKS)
        return NULL;
    /* Acquire: pairs with the release CAS that installed the chunk, so its
     * initialised records are visible. */
    tw_record *c = atomic_load_explicit(&((tw_records *)r)->chunk[j], memory_order_acquire);
    return c ? &c[idx - (((1u << j) - 1u) << TW_REC_CHUNK0_SHIFT)] : NULL;
}
/* Fetch the line at p for writing: it comes in exclusive, so the write
 * or CAS that follows does not fetch it a second time. A record (or slot
 * entry) last written on another core and read first comes in shared, and
 * the CAS then waits for a second hand-off to own it: WL6's touch, a
 * reschedule of a random session, spent 26% of its time on that CAS after
 * 65% on the load (perf, AMD guest, hand-offs of 420 ns). GCC and clang
 * turn __builtin_prefetch(p, 1, 3) into a plain prefetcht0 unless built
 * for a CPU with PREFETCHW (-mprfchw), so on x86-64 we issue it ourselves
 * when CPUID says the CPU has it (tw__cpu_prefetchw, records.c). A hint:
 * it never faults and changes no value. */
#if defined(__x86_64__)
extern bool tw__cpu_prefetchw;
static inline void tw__prefetch_for_write(const void *p)
{
    if (__builtin_expect(tw__cpu_prefetchw, 1))
        __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
    else
        __builtin_prefetch(p, 1, 3);
}
#else
static inline void tw__prefetch_for_write(const void *p)
{
    __builtin_prefetch(p, 1, 3);
}
#endif
/* The chunk record idx lies in. */
static inline uint32_t tw__rec_chunk(uint32_t idx)
{
    return 31u - (uint32_t)__builtin_clz((idx >> TW_REC_CHUNK0_SHIFT) + 1);
}
/* A periodic timer's side words: its period (written at arming, read by
 * owners), and the deadline a reschedule that claimed the runner's re-arm
 * hands it (service.c, hand_over; written only after a successful claim). */
typedef struct tw_periodic {
    _Atomic uint64_t period;   /* atomic (relaxed): tw_foreach_pending reads it */
    _Atomic uint64_t handed;
} tw_periodic;
/* Record idx's side words; with make, allocate the chunk's side array if
 * needed (NULL: out of memory). */
tw_periodic *tw__periodic(tw_records *r, uint32_t idx, bool make);
/* A periodic timer's period (its side array exists: made at arming). */
static inline uint64_t tw__period_of(tw_records *r, uint32_t idx)
{
    /* Relaxed: written before the arming's release publish, which every
     * reader acquired through the state word. */
    return atomic_load_explicit(&tw__periodic(r, idx, false)->period, memory_order_relaxed);
}
/* Take a FREE record: its index, address and state word. TW_EAGAIN, TW_ENOMEM. */
int  tw__rec_alloc(tw_records *r, uint32_t *idx, tw_record **rec, uint64_t *state);
/* Give back a record its owner has taken out of every live state: stores
 * FREE with the next generation (release) and pushes it on a free list. */
void tw__rec_free(tw_records *r, uint32_t idx, uint64_t old_state);
/* Push n records whose state words the caller already CAS-ed to FREE
 * (n <= TW_MAGAZINE; one record: tw__rec_push_free, below). */
void tw__rec_push_free_many(tw_records *r, const uint32_t *idx, uint32_t n);
/* FREE, next generation (never 0). */
static inline uint64_t tw__rec_free_state(uint64_t old_state)
{
    uint32_t gen = tw__gen(old_state) + 1;
    if (gen == 0)
        gen = 1;
    return (uint64_t)gen << TW_GEN_SHIFT | TW_ST_FREE;
}
/* The populating thread (the cursor): fault in the next piece of the
 * records the producers asked for ahead of the high-water mark. Returns
 * true while more is asked for than done. */
bool tw__rec_prefault(tw_records *r);
/* Whether producers asked for more than was populated (seq_cst: the
 * cursor's look before it sleeps, cursor.c). */
bool tw__rec_prefault_asked(tw_records *r);
static inline tw_timer tw__handle(uint32_t gen, uint32_t idx)
{
    return ((uint64_t)gen << 32) | idx;
}
static inline uint32_t tw__handle_idx(tw_timer t) { return (uint32_t)t; }
static inline uint32_t tw__handle_gen(tw_timer t) { return (uint32_t)(t >> 32); }
/* Never-used indexes start here (the low 32 bits of tw_records.next). */
static inline uint32_t tw__rec_next_index(uint64_t next_word)
{
    return (uint32_t)next_word;
}
/* The record a handle names, or NULL (0, never allocated index). The caller
 * still checks the generation against the state word. Inline, as the
 * record's own line is the miss of every cancel and reschedule: each
 * instruction around it keeps the next call's miss from starting sooner
 * (out-of-order cores overlap a caller's independent calls only when they
 * are short; WL2 cancels). A handle with generation 0 (0 among them) is
 * never one. */
static inline tw_record *tw__rec_of(const tw_records *r, tw_timer t)
{
    if (tw__handle_gen(t) == 0)
        return NULL;
    uint32_t idx = tw__handle_idx(t);
    /* Relaxed: only bounds the lookup; the chunk pointer load is acquire. */
    if (idx >= tw__rec_next_index(atomic_load_explicit(&((tw_records *)r)->next,
                                                       memory_order_relaxed)))
        return NULL;
    return tw__rec(r, idx);
}
uint32_t tw__records_high(const tw_records *r); /* indexes handed out (the table's top) */
/* tw__check's walk of chunk j's free list (records.c): records met, or -1. */
int64_t tw__rec_list_walk(tw_records *r, uint32_t j, uint32_t limit,
                          bool (*visit)(void *ctx, uint32_t idx), void *ctx);
/* Once per trim period (the drainer, wheel.c tw__wheel_trim): close the top
 * chunk once it is little used (in_use: the timers pending), and take its
 * records out of the magazines. */
void tw__rec_trim(tw_records *r, uint64_t in_use);
/* Every loop of the drainer: a bounded step of giving the closed top back
 * once all of it is free. True while a step remains (come back soon). */
bool tw__rec_trim_step(tw_records *r);
/* The trimming thread: whether a trim may still give something back (the
 * top is little used, or closed and draining); the idle cursor comes back
 * for it while so. */
bool tw__rec_may_trim(tw_records *r, uint64_t in_use);
extern bool tw__rec_plant_no_handshake; /* stress/table_shrink.c only */
extern bool tw__budget_plant_no_busy;   /* stress/budget_steal.c only */
extern _Atomic uint64_t tw__budget_owner_waits; /* ... and its statistic */
/* Watchers stay where the kernel put them (workers.c, leave_runners_cpu):
 * stress/table_shrink.c's planted run only (it says why). */
extern bool tw__watchers_stay;
/* Tests only (stress/periodic_handover.c): called by a runner that holds a
 * periodic timer's re-arm lease, just before it releases it, so that a
 * test can make a reschedule meet that window however loaded the machine
 * is. NULL (the default): nothing is called. Set before the service runs. */
extern void (*_Atomic tw__rearm_window_hook)(void);
/* Tests only (tests/test_periodic.c): called by a reschedule that has just
 * claimed a periodic timer's re-arm, before it stores its deadline in
 * `handed` (service.c, hand_over). NULL (the default): nothing is called.
 * Set before the service runs. */
extern void (*_Atomic tw__handover_claimed_hook)(void);
/* Tests only (tests/test_pause.c): called by a runner that has claimed a
 * timer for its run (FIRING -> RUNNING), before its callback's call, with
 * the pause gate still up. NULL (the default): nothing is called. Set
 * before the service runs. */
extern void (*_Atomic tw__run_claimed_hook)(void);
/* Tests only (tests/test_pause.c): called by a worker as it begins to
 * watch the others (workers.c, watch_and_judge), before it reads the word
 * it waits on. NULL (the default): nothing is called. Set before the
 * service runs. */
extern void (*_Atomic tw__watch_hook)(void);
/* Tests only (tests/test_workers.c): called by the cursor before each
 * piece of an early claim (wheel.c), with whether the claim has gone late
 * (its tick came) and how many claims it has staged; a nonzero return
 * makes it late now. NULL (the default): nothing is called. Set before
 * the service runs. */
extern int (*_Atomic tw__early_piece_hook)(bool late, size_t staged);
/* Tests only (tests/test_workers.c): called by the cursor after each
 * piece of an early drain it may give way in (wheel.c, early cascades),
 * with how many of its entries are placed so far and of how many. NULL
 * (the default): nothing is called. */
extern void (*_Atomic tw__cascade_piece_hook)(size_t placed, size_t n);
/* Tests only (tests/test_reschedule.c): the same after each piece of a
 * compaction in pieces (wheel.c). */
extern void (*_Atomic tw__compact_piece_hook)(size_t placed, size_t n);
/* Tests only (tests/test_workers.c): when it returns true, the cursor's
 * compaction says it has more to do (tw__wheel_maintain), as under steady
 * cancel churn, so the cursor stays in its compaction branch, a tick at a
 * time. NULL (the default): nothing is called. */
extern bool (*_Atomic tw__compacting_hook)(void);
/* Tests only (tests/test_reschedule.c): called by compaction (wheel.c,
 * keep_entry) with the record of a live entry it keeps, between its read
 * of the deadline and its second look at the state. NULL: nothing. */
extern void (*_Atomic tw__keep_entry_hook)(uint32_t idx);
/* Bytes of record chunks below the table's top (tests, soak). */
size_t tw__rec_table_bytes(const tw_records *r);
/* Release a lease on a record in PENDING|LEASE (deadline already written):
 * TW_OK, placing the timer at `tick` if `place`; or TW_ENOENT if a cancel
 * or stop ended it meanwhile (the record is then freed). */
int tw__lease_publish(tw_service *s, tw_record *rec, uint32_t idx, bool place,
                      uint64_t tick);

/* ---- slots.c ----------------------------------------------------------- */

/* A slot entry: VALUE (bit 63 set): tag (31) | record index (32);
 * EMPTY(e) (bit 63 clear): free for producers of epochs <= e. The tag names
 * the placement that wrote the entry: the record's generation plus its
 * placement sequence (tw_record.seq), 31 bits of their sum. */
#define TW_ENTRY_VALUE (1ull << 63)
#define TW_TAG_MASK    0x7fffffffu
static inline uint32_t tw__tag(uint32_t gen, uint32_t seq)
{
    return (gen + seq) & TW_TAG_MASK;
}
static inline uint64_t tw__entry(uint32_t tag, uint32_t idx)
{
    return TW_ENTRY_VALUE | ((uint64_t)(tag & TW_TAG_MASK) << 32) | idx;
}
static inline uint32_t tw__entry_tag(uint64_t entry)
{
    return (uint32_t)(entry >> 32) & TW_TAG_MASK;
}
/* The record's current tag: state word st (its generation) and seq read
 * after it (acquire on st orders the read: a lease release publishes a
 * bumped seq together with the new state). */
static inline uint32_t tw__rec_tag(const tw_record *rec, uint64_t st)
{
    /* Relaxed: see above. */
    return tw__tag((uint32_t)(st >> 32),
                   atomic_load_explicit(&((tw_record *)rec)->seq, memory_order_relaxed));
}

/* ---- segments.c -------------------------------------------------------- */

/* Ask for transparent huge pages on the whole 2 MiB pages inside an
 * allocation (none if it holds none); a hint. */
void  tw__advise_huge_pages(void *p, size_t bytes);

#define TW_SEG_MAP_BYTES (64u * 1024u) /* segments this large are mapped alone in
                                          every build; from a page up, outside
                                          ASan (segments.c, map_threshold) */
#define TW_RETIRE_MAX_BYTES (64ull << 20) /* retired, not yet freed: past this,
                                             drains stop detaching */
#define TW_SEG_KEEP_MIN (256u << 10) /* overflow bytes drains leave in the slots */
/* Tests only: the limit and the minimum above for the services created
 * from now on (0: the defaults). */
extern uint64_t tw__retire_max_override;
extern uint64_t tw__seg_keep_min_override;
extern bool tw__seg_plant_no_grace; /* stress/planted_early_free.c only */
#define TW_RETIRE_POLL_NS (2u * 1000u * 1000u) /* an idle cursor with retired
                                                  memory looks again this soon */
#define TW_RETIRE_STEP_NS (1000u * 1000u) /* grace steps begin at most this often */

/* The cache of freed overflow segments (segments.c): one stack per size
 * class, the overflow table's (192 bytes) and 512 bytes .. 32 KiB; larger
 * ones are mapped and go back to the system. */
#define TW_SEG_CACHE_CLASSES 8
#define TW_SEG_CACHE_SMALLEST 512u /* class 1; class c holds 512 << (c - 1) */
#define TW_SEG_CACHE_MIN (1u << 20) /* the cache may hold this much, or as
                                       much as the overflow segments in use */
extern uint64_t tw__seg_cache_min_override; /* tests: 0 = TW_SEG_CACHE_MIN */
/* A node of the cache's stacks: a free segment's first word (segments.c). */
typedef struct tw_seg_node {
    _Atomic(struct tw_seg_node *) next;
} tw_seg_node;
typedef _Atomic(tw_seg_node *) tw_seg_stack;

typedef struct tw_seg_cache {
    tw_seg_stack head[TW_SEG_CACHE_CLASSES] TW_ALIGNED; /* pushed by the
                                     drainer, popped by producers */
    _Atomic uint64_t bytes TW_ALIGNED; /* in the stacks, or just popped */
    tw_seg_stack unused;                /* segments producers made and could not
                                           install, for the drainer to retire */
    uint64_t min;                       /* TW_SEG_CACHE_MIN (tests: override) */
    uint64_t allow;                     /* drainer: max(min, overflow bytes in use
                                           at the step's start) */
} tw_seg_cache;

typedef struct tw_retired {
    void *p;
    size_t bytes;
    bool table; /* a tw_overflow table (freed with its late installs) */
    bool trimmed; /* taken from the cache: back to the system, uncounted */
} tw_retired;
typedef struct tw_retire_list {
    tw_retired *v;
    size_t n, cap;
} tw_retire_list;

/* The wheel's reclamation state (segments.c has the protocol). */
typedef struct tw_segs {
    _Atomic uint32_t phase TW_ALIGNED; /* readers count on readers[phase & 1];
                                          only the drainer writes it */
    uint32_t old_phase;    /* drainer: the phase the step in progress waits on */
    bool stepping;         /* drainer: a grace step is in progress */
    tw_retire_list fresh;  /* drainer: retired since the step in progress began */
    tw_retire_list one;    /* drainer: retired before it began */
    tw_retire_list two;    /* drainer: one step done since their retirement */
    uint64_t waiting_bytes;/* drainer: bytes in the three lists */
    uint64_t began_at;     /* drainer: service clock at the last step's
                              beginning (0: none yet) */
    uint64_t max_bytes;    /* TW_RETIRE_MAX_BYTES (tests: tw__retire_max_override) */
    uint64_t keep_min;     /* TW_SEG_KEEP_MIN (tests: tw__seg_keep_min_override) */
    uint64_t budget_held;  /* drainer: overflow bytes held at the step's start,
                              less those retired since */
    tw_seg_cache cache;    /* freed segments, for producers to take again */
    size_t map_from;       /* segments this large are mapped (a page, or
                              TW_SEG_MAP_BYTES under ASan); set at create */
} tw_segs;

/* A reader of segments: a placement that reaches an overflow position, a
 * scan of entries. Entered on first need, left once at the end. */
typedef struct tw_seg_guard {
    tw_service *s;
    _Atomic uint64_t *held; /* the count we raised; NULL: not entered */
    bool owned;             /* on an owned stripe: plain load + store */
    bool installed;         /* an overflow segment or table was installed
                               through it; the placement clears it, and
                               marks the slot if it lost its reservation
                               (wheel.c, strays) */
} tw_seg_guard;
#define TW_SEG_GUARD(svc) {.s = (svc), .held = NULL, .owned = false, .installed = false}
void tw__seg_enter(tw_seg_guard *g);
void tw__seg_leave(tw_seg_guard *g);
static inline void tw__seg_done(tw_seg_guard *g)
{
    if (g->held)
        tw__seg_leave(g);
}
/* Zeroed segment memory; NULL: no memory. Overflow segments and tables
 * are counted in tw__seg_held_bytes (`counted`), fixed arrays are not. A
 * counted one may come from the cache, so `g` must be entered (a fixed
 * array's allocation needs no guard). */
void *tw__seg_alloc(tw_seg_guard *g, size_t bytes, bool counted);
/* Back to the system (fixed arrays, tw_destroy). */
void  tw__seg_free(tw_service *s, void *p, size_t bytes, bool counted);
/* A producer, inside `g`: a counted segment it made and could not install
 * (another producer's install won). It may have come from the cache, so
 * it goes to the drainer, which retires it like a detached one. */
void  tw__seg_unused(tw_seg_guard *g, void *p, size_t bytes);
/* Drainer, after a grace period: a counted segment nobody can reach goes
 * to the cache while it has room, else back to the system. */
void  tw__seg_recycle(tw_service *s, void *p, size_t bytes);
uint64_t tw__seg_held_bytes(tw_service *s); /* overflow: allocated, not yet freed,
                                               not in the cache */
uint64_t tw__seg_cached_bytes(tw_service *s); /* overflow: in the cache */
uint64_t tw__seg_reused(tw_service *s);       /* segments taken from the cache */
void tw__seg_cache_init(tw_segs *g); /* create */
/* Drainer, before a step or a compaction pass: read the overflow memory
 * held (segments.c: drains give segments back past TW_SEG_KEEP_MIN). */
void  tw__seg_budget(tw_service *s);
/* Drainer: room to retire `items` more (false: keep them attached). */
bool  tw__seg_may_retire(tw_segs *g, size_t items);
/* Drainer: the overflow memory is within the budget (TW_SEG_KEEP_MIN) at
 * the last tw__seg_budget: slots keep their segments. */
bool  tw__seg_within_budget(const tw_segs *g);
void  tw__seg_retire(tw_segs *g, void *p, size_t bytes, bool table);
/* Drainer: advance the grace steps, free what is past them. True while
 * anything waits to be freed. */
bool  tw__seg_poll(tw_service *s);
/* The MANUAL clock's drainer (tw_advance) when nothing is left pending:
 * finish the grace periods now, since a loop told nothing is pending may
 * not advance again; a reader still inside leaves the rest to a later
 * step (no wait). True if some memory still waits. */
bool  tw__seg_settle(tw_service *s);
bool  tw__seg_waiting(const tw_segs *g);
void  tw__segs_fini(tw_service *s);

#define TW_SLOT_SEGS 28 /* the fixed array, then 27 doubling overflow segments
                           (64 << 26 >= 2^32 positions) */
#define TW_SLOT_NEAR 4  /* segments 0..3 (the fixed array, then 64 to 256
                           entries): their pointers live in the slot's own line */

/* A slot's header, one cache line (slots.c has the protocol). */
typedef struct tw_slot {
    _Atomic uint64_t word;   /* seq (31) | closed (1) | count (32) */
    _Atomic uint64_t seq;    /* the round's number (drains + compactions);
                                written by the drainer before it reopens */
    _Atomic uint64_t epoch;  /* the tick the round collects for (wheel slots);
                                written by the drainer before it reopens */
    _Atomic(struct tw_overflow *) ovf;  /* segments past TW_SLOT_NEAR, made on
                                           first use */
    _Atomic(_Atomic uint64_t *) near[TW_SLOT_NEAR]; /* segments 0 .. 3, made on
                                           first use */
} TW_ALIGNED tw_slot;
_Static_assert(sizeof(tw_slot) == TW_CACHELINE, "a slot's header is one line");

typedef struct tw_overflow {
    _Atomic(_Atomic uint64_t *) seg[TW_SLOT_SEGS - TW_SLOT_NEAR]; /* segment
                                           TW_SLOT_NEAR + k at seg[k] */
} tw_overflow;

#define TW_SLOT_COUNT_MASK 0xffffffffull
#define TW_SLOT_CLOSED     (1ull << 32)
#define TW_SLOT_SEQ_SHIFT  33
#define TW_SLOT_SEQ_MASK   0x7fffffffu
/* A producer that finds this many rounds passed between its first look at
 * a slot and its reservation drops the reservation (slots.c). Lowered in
 * the injected-interleaving build, so that the stress runs take the path. */
#ifdef TW_INJECT_YIELDS
#define TW_SLOT_RAN_AWAY_ROUNDS 4ull
#else
#define TW_SLOT_RAN_AWAY_ROUNDS (1ull << 30)
#endif

enum { TW_SLOT_OK = 0, TW_SLOT_NEWER = 1, TW_SLOT_CLOSED_NOW = 2, TW_SLOT_RAN_AWAY = 3 };

/* Reserve a position in a wheel slot for epoch `epoch` (or an older round
 * still open: *round_epoch gets the round's epoch, *round its number, the
 * key to publish with). TW_SLOT_OK; TW_SLOT_NEWER (the slot is past
 * `epoch`: re-read the cursor); TW_SLOT_CLOSED_NOW (being drained: go to a
 * late slot); TW_SLOT_RAN_AWAY (the producer stalled across 2^30 rounds:
 * the position is left unpublished, place again); TW_ENOMEM. *entry: the
 * position's entry, to publish into; `g` enters the segments' read side
 * when the position is in an overflow segment (the caller leaves it once
 * it is done with the entry: tw__seg_done). */
int  tw__slot_reserve(tw_slot *sl, tw_seg_guard *g, uint32_t cap, uint64_t epoch,
                      uint32_t *pos, _Atomic uint64_t **entry, uint64_t *round,
                      uint64_t *round_epoch);
/* Reserve in whatever round is open (late slots). */
int  tw__slot_reserve_any(tw_slot *sl, tw_seg_guard *g, uint32_t cap, uint32_t *pos,
                          _Atomic uint64_t **entry, uint64_t *round);
/* Publish `value` into the entry of a position reserved in round `round`
 * (the entry the reservation returned: never looked up again, as the
 * drain may have detached its segment since); false if the drainer
 * tombstoned it first (then place the timer again). */
bool tw__slot_publish(_Atomic uint64_t *entry, uint32_t cap, uint32_t pos, uint64_t round,
                      uint64_t value);
typedef struct tw_vec {
    uint64_t *v;
    size_t n, cap;
    size_t peak;      /* the most held since the last trim (tw__vec_clear) */
    size_t peak_prev; /* ... and in the trim period before */
    size_t touched;   /* entries of v known to be faulted in (tw__vec_touch) */
} tw_vec;
void tw__vec_push(tw_vec *vec, uint64_t x);
void tw__vec_reserve(tw_vec *vec, size_t n); /* aborts on OOM (drainer) */
size_t tw__vec_cap_for(const tw_vec *vec, size_t n); /* the capacity reserve would give */
void tw__vec_note(tw_vec *vec);              /* the peak noted, before n drops */
void tw__vec_clear(tw_vec *vec);             /* n = 0, the peak noted */
void tw__vec_swap(tw_vec *a, tw_vec *b);     /* contents, capacities and peaks */
/* Trim period's end: give back capacity past TW_VEC_KEEP entries that
 * neither this period nor the last one needed (a quarter of it or less). */
void tw__vec_trim(tw_vec *vec);
/* True while the list holds more than it keeps and is not using it. */
bool tw__vec_above_keep(const tw_vec *vec);
/* Fault in the next piece (TW_TOUCH_PIECE bytes) of the list's room
 * between what it holds and `upto` entries (at most its capacity), so that
 * pushes there take no page fault; true while some of it remains. */
bool tw__vec_touch(tw_vec *vec, size_t upto);
#define TW_TOUCH_PIECE (256u << 10)
void tw__vec_free(tw_vec *vec);
#define TW_VEC_KEEP 8192u /* entries (64 KiB) a drainer's list always keeps */
#define TW_TRIM_PERIOD_NS (1000u * 1000u * 1000u) /* lists and batches: slots.c, tw__vec_trim */
#define TW_GROW_NS_PER_KIB 2048u /* wheel.c, staged_may_grow: 2 ms a MiB */
extern uint64_t tw__grow_ns_per_kib_override; /* tests: 0 = TW_GROW_NS_PER_KIB */
extern uint64_t tw__trim_period_override; /* tests: 0 = TW_TRIM_PERIOD_NS */
/* Tests only (test_workers.c): the lead, in ticks, at which the cursors of
 * services created from now on claim a large slot early (cursor.c); 0 =
 * from the slot's size. Set before tw_create, on the creating thread. */
extern uint64_t tw__early_lead_override;
/* Tests only (test_defer.c): the entries logged per TW_NAP_NS that make
 * the cursors of services created from now on nap (cursor.c); 0 =
 * TW_NAP_ENTRIES. Set before tw_create, on the creating thread. */
extern uint32_t tw__nap_entries_override;
/* Tests only (test_defer.c): called by the cursor as it starts to plan a
 * sleep (cursor.c, cursor_sleep), before it looks at the wheel or the
 * logs, so that a test can log a timer at that instant. NULL (the
 * default): nothing is called. */
extern void (*_Atomic tw__cursor_plan_hook)(tw_service *s);
/* Tests only (test_defer.c): called by the cursor after each of its loop's
 * drains of the logs, the ones that may leave a log's newest entries
 * (defer.c). NULL (the default): nothing is called. */
extern void (*_Atomic tw__defer_drained_hook)(tw_service *s);
/* Tests only (test_defer.c): called by the cursor each time a drain gives
 * its log's owner room before the drain's end (defer.c, DRAIN_GIVE). NULL
 * (the default): nothing is called. */
extern void (*_Atomic tw__defer_gave_hook)(tw_service *s);

/* The drain in three steps, so that a large slot can be taken a chunk at
 * a time (wheel.c, bursts): close (returns the final count), take
 * positions [from, to) (published values to out, tombstones left), reopen
 * for `epoch` once every position was taken. */
uint32_t tw__slot_close(tw_slot *sl);
void tw__slot_take(tw_slot *sl, uint32_t cap, uint32_t from, uint32_t to, tw_vec *out);
void tw__slot_reopen(tw_slot *sl, uint64_t epoch);
/* Drainer, between the take and the reopen: hand the slot's overflow
 * segments to `g` to be freed after a grace period (segments.c); the next
 * round grows new ones as it needs them. False: it may not retire now
 * (tw__seg_may_retire) and left them attached. */
bool tw__slot_detach(tw_slot *sl, uint32_t cap, tw_segs *g);
/* Drainer: if nobody has reserved in the slot's round, give back its
 * overflow segments (close, detach, reopen the same round); a slot with
 * reserved positions is left as it was (its drain gives them back).
 * False: segments are left that tw__seg_may_retire refused. */
bool tw__slot_give_back(tw_slot *sl, uint32_t cap, tw_segs *g);
/* Drainer: the slot holds an overflow segment or table (a first look: an
 * install racing it may be missed). */
bool tw__slot_holds_overflow(tw_slot *sl);
/* Drainer: close, take, detach and reopen for the same epoch (compaction:
 * the caller places the live entries again). */
uint32_t tw__slot_compact(tw_slot *sl, uint32_t cap, tw_vec *out, tw_segs *g);
/* Drainer: the same for a late slot (a new round only if something was
 * reserved in this one). */
uint32_t tw__slot_drain_late(tw_slot *sl, uint32_t cap, tw_vec *out, tw_segs *g);
/* Free a retired overflow table, and any segment installed in it after
 * its detach (segments.c, after the grace period). */
void tw__slot_table_free(tw_service *s, void *table, bool recycle);
_Atomic uint64_t *tw__slot_entry(tw_slot *sl, uint32_t cap, uint32_t pos);
/* True if position pos is the first of an overflow segment. */
bool tw__slot_segment_start(uint32_t cap, uint32_t pos);
/* A slot collecting for `epoch` (create). */
void tw__slot_init(tw_slot *sl, uint64_t epoch);
void tw__slot_fini(tw_service *s, tw_slot *sl, uint32_t cap);

/* ---- wheel.c ----------------------------------------------------------- */

/* The latest time a MANUAL clock may be set to (292 years): with delays up
 * to 2^63 ns, now + delay + one tick then always fits in 64 bits, so
 * tw_max_delay holds at every clock value. CLOCK_MONOTONIC never gets there. */
#define TW_CLOCK_MAX_NS ((1ull << 63) - (1ull << 31))
#define TW_WHEEL_SPAN_BITS 42 /* levels are added until the wheel spans 2^42 ticks */
#define TW_HORIZON_TICKS   ((1ull << 41) - 1) /* longest delay, in ticks */

#define TW_MAX_LANES 4 /* copies of every slot, one per CPU (wheel.c) */
/* Tests only: lanes for the wheels created from now on (0: one per CPU,
 * the default). Set before tw_create, on the creating thread. */
extern uint32_t tw__lanes_override;

typedef struct tw_wheel {
    uint32_t bits;           /* log2(slots per level) */
    uint32_t step;           /* log2(granularity of level l+1 / level l) */
    uint32_t nslots;         /* slots per level */
    uint32_t levels;
    uint32_t lanes;          /* copies of every slot, one per CPU (wheel.c) */
    uint32_t cap;            /* slot_capacity */
    uint8_t level_of_log2[64]; /* level_for: the level for distances in [2^i, 2^(i+1)) */
    tw_slot *slot;           /* lanes * levels * nslots */
    _Atomic uint64_t *occ;   /* occupancy: levels * occ_words bits */
    _Atomic uint64_t *grew;  /* slots that grew a new segment (compaction) */
    uint64_t *barren;        /* drainer-private: slots whose last compaction
                                took nothing out (wheel.c, compact_one) */
    _Atomic uint64_t *big;   /* slots whose reservations in one lane reached
                                big_at this round: bursts (wheel.c, bursts) */
    uint32_t big_at;         /* a power of two <= TW_EARLY_MIN / lanes (bursts) */
    _Atomic uint64_t *strays;/* slots given an overflow segment since the trim
                                last looked (levels * occ_words bits), then
                                one word: any slot, late ones too (wheel.c) */
    uint32_t occ_words;      /* 64-bit words per level */
    tw_slot late[2];         /* always-open refuges for placements whose target
                                slot was closed under them */
    _Atomic uint64_t cur TW_ALIGNED; /* end tick of the last range whose
                                        processing has started */
    _Atomic uint64_t overflowed; /* beyond-capacity placements of drained slots */
    /* What tw_next_due reads besides the slots (wheel.c, the next due time):
     * the step's window, and the timers claimed and not yet started. */
    _Atomic uint64_t step_seq;   /* odd while a step, a compaction or a suspended
                                    early claim has entries in hand (taken out,
                                    not yet placed again or claimed) */
    _Atomic uint64_t step_from;  /* a tick at or before the due tick of every
                                    timer not yet claimed: cur + 1, or in a step
                                    the cur + 1 from before it */
    _Atomic uint64_t claims;     /* timers claimed for running, ever */
    _Atomic uint64_t claim_floor;/* a tick at or before the due tick of every
                                    claimed timer that has not left FIRING */
    uint64_t due_from;           /* drainer: step_from of the last step */
    uint64_t claimed;            /* drainer: claims not yet counted in `claims` */
    uint64_t out_before;         /* drainer: exits (fired + firing_left) read
                                    before the first of those claims (wheel.c,
                                    claims_left) */
    tw_vec staged;               /* drainer: (key, handle) pairs claimed early for
                                    staged_tick (wheel.c, early claims) */
    uint64_t staged_tick;        /* also the tick of a suspended claim's stash */
    tw_vec stash;                /* drainer: a suspended early claim's entries, taken
                                    out of staged_tick's slot, not yet claimed:
                                    [stash_at, n); the step window stays open while
                                    it holds any (wheel.c, suspended claims) */
    size_t stash_at;
    bool stash_parked;           /* the stash waits for the step to its tick (the
                                    claim would have had to grow its list) */
    bool stash_late;             /* its claim had gone late (counted) */
    uint64_t declined_tick;      /* drainer: an early claim of this tick was declined
                                    (wheel.c, no_time_left): the step claims it */
    size_t taken_at;             /* drainer: taken's entries before it are done
                                    with (a resumed claim's); 0 elsewhere */
    uint32_t hands_held;         /* drainer: windows open (a suspended claim's and
                                    a step's or compaction's in it): step_seq moves
                                    only with the outermost */
    uint64_t step_min_tick;      /* drainer: least deadline tick claimed in it */
    /* Drainer-private (the cursor thread, or the tw_advance caller). */
    _Atomic uint64_t removed;/* positions drained or compacted, ever (its
                                only writer; producers read it: wheel.c,
                                back-pressure) */
    _Atomic uint64_t pressure_left_at; /* removed + 1 when a producer last gave
                                up a back-pressure wait; 0: none (wheel.c) */
    _Atomic uint32_t compacting; /* the drainer is inside a round of compaction
                                (its only writer; producers read it) */
    uint64_t compacted;      /* positions compacted, ever */
    uint64_t fixed_capacity; /* slots * slot_capacity */
    uint64_t compact_slack;  /* entries compaction allows beyond twice the
                                pending timers: 2 a slot, at most fixed_capacity */
    size_t compact_at;       /* the next slot compaction looks at */
    uint64_t sample_seed;    /* compaction's samples of large slots (wheel.c) */
    uint64_t sampled_out;    /* large slots a sample left alone, ever: the
                                round robin's budget counts them; tests */
    uint64_t compact_idle;   /* slots the round robin passed since a round
                                last took a position out (compact_round_now) */
    uint64_t claimed_ever;   /* claims the steps made, ever (the sweep ahead) */
    uint32_t idle_steps;     /* steps in a row that claimed nothing (the sweep) */
    _Atomic uint64_t steps;  /* steps, ever (the drainer's; tests read it) */
    tw_vec taken;            /* entries taken out of slots in this step */
    tw_vec due;              /* (key, handle) pairs claimed in this step */
    tw_vec spare;            /* order_due's scratch, swapped with due */
    tw_vec cascade;          /* an early drain's entries, [cascade_at, n) not yet
                                placed again; its window held open (wheel.c,
                                early cascades) */
    size_t cascade_at;
    uint64_t cascade_tick;   /* the drained slot's epoch: every live entry in
                                `cascade` is due at or after it */
    bool cascade_keep;       /* `cascade` holds a compaction's entries, placed
                                back as compaction does (wheel.c, compaction
                                in pieces) ... */
    bool cascade_growth;     /* ... their placements may mark slots as grown */
    uint32_t cascade_level, cascade_slot; /* ... the slot compacted */
    size_t cascade_kept;     /* ... its live entries placed back so far */
    uint32_t *counts;        /* order_due's histogram, TW_ORDER_SPAN entries */
    uint64_t trim_at;        /* service clock: the next trim of the lists and the
                                workers' batches (tw__wheel_trim) */
    uint64_t trim_period;    /* TW_TRIM_PERIOD_NS (tests: tw__trim_period_override) */
    uint64_t grow_ns_per_kib;/* TW_GROW_NS_PER_KIB (tests: the override): what an
                                early claim allows a KiB of staged list to grow */
    bool rec_stepping;       /* the record table's give-back has steps left */
    tw_segs segs;            /* detached segments on their way to free (segments.c) */
} tw_wheel;

int  tw__wheel_init(tw_wheel *w, uint32_t nslots, uint32_t cap);
void tw__wheel_fini(tw_wheel *w);
/* Place the slot entry `entry` (tw__entry: tag and record index) for tick
 * `tick` (any thread). 0 or TW_ENOMEM. */
int  tw__place(tw_service *s, uint64_t entry, uint64_t tick);
/* The same for the library's own placements (cascade, re-arm, moves),
 * which cannot hand an error to anyone: out of memory there aborts. */
void tw__place_internal(tw_service *s, uint64_t entry, uint64_t tick);
/* The cursor step: process every tick in (cur, target]; claimed timers end
 * in w->due as (key, handle) pairs, earliest first; the key is the deadline
 * with the MANUAL clock, the deadline in sixteenths of a tick otherwise.
 * Drainer only. */
void tw__wheel_step(tw_service *s, uint64_t target);
/* Placements that did not fit a slot's fixed array, drained or not. */
uint64_t tw__wheel_overflowed(tw_service *s);
/* Slot positions reserved and not yet drained, over every slot (late ones
 * included): the wheel's entries, live or stale. Tests and bench/bothways
 * assert and print it; O(slots), a snapshot when producers are busy. */
uint64_t tw__wheel_entries(tw_service *s);
/* The earliest tick after cur with work, or UINT64_MAX. Drainer only. */
uint64_t tw__wheel_next_work(tw_service *s);
/* The cursor, before it plans a sleep after steps that claimed nothing:
 * compact the stale slots it would wake for first, while the clock is
 * below `until` (the next tick's start) (wheel.c, the sweep ahead). True
 * if its budget ended it with more to sweep: the loop passes again. */
bool tw__wheel_sweep_ahead(tw_service *s, uint64_t until);
/* Early claims (wheel.c; the cursor). Tests (test_defer.c): the entries
 * in T's level-0 slot if they are a burst the cursor may claim now (else
 * 0). Claim the slot of T, for the step to T to hand over first. stop_at:
 * the service clock reading at which the cursor would step to T; a claim
 * still going then hands over what it has and delivers the rest itself.
 * False if nothing was done: declined (no time left before T to make its
 * room, and an earlier tick has work), or not T's to claim. */
uint64_t tw__wheel_big_slot(tw_service *s, uint64_t T);
bool tw__wheel_claim_early(tw_service *s, uint64_t T, uint64_t stop_at);
/* Where the cursor's next step goes, on its way to `target`: the tick
 * before an early claim's, if a tick before that has work (a late cursor),
 * so that its list goes to the workers after those ticks' timers, and
 * unsorted; else target. */
uint64_t tw__wheel_step_to(tw_service *s, uint64_t target);
/* workers = 0: what a claim staged for a tick at or before T, moved to the
 * due list for tw__deliver before the step to T; false if nothing. */
bool tw__wheel_take_staged(tw_service *s, uint64_t T);
/* Bursts (wheel.c): a slot of TW_EARLY_MIN entries or more that the
 * cursor may claim (level 0) or drain into level 0 (above) before its
 * epoch `tick`; room (level > 0): the most ticks before it that all of
 * its entries fall within level 0's turn once placed again. */
typedef struct tw_burst {
    uint64_t tick, n, room;
    uint32_t level;
    bool grows; /* fewer than TW_EARLY_MIN so far: n says TW_EARLY_MIN, and
                   `when` is only a time to look again, never to start */
} tw_burst;
/* Of the bursts in the wheel, the one whose `when` (the tick at which
 * the cursor must start on it) is least, in *b and that tick in *at;
 * false if there is none. Found by the producers' marks (big), not by a
 * walk of the slots: O(levels * slots / 64) words. */
bool tw__wheel_next_burst(tw_service *s, uint64_t (*when)(const tw_service *, const tw_burst *),
                          tw_burst *b, uint64_t *at);
/* Drain that slot now, into level 0, giving the cursor back to an
 * earlier tick's work half way if it comes due; false (nothing done) if
 * it is not yet within room of cur, or no longer e's. */
bool tw__wheel_cascade_early(tw_service *s, uint64_t e, uint32_t level);
/* An early drain that gave the cursor back has entries left to place:
 * place them (giving way again if need be); false if it has none. */
bool tw__wheel_cascade_resume(tw_service *s);
/* A claim that gave the cursor back for an earlier tick (wheel.c,
 * suspended claims) and may go on now: true, and its tick in *T. */
bool tw__wheel_claim_resumable(tw_service *s, uint64_t *T);
/* The service clock reading at which the cursor processes `tick` (its
 * boundary, a lookahead early; cursor.c). */
uint64_t tw__cursor_tick_start(const tw_service *s, uint64_t tick);
/* After a step (drainer only): compact slots while the wheel holds more
 * entries than twice the pending timers plus compact_slack. True if
 * it is still over after this round (call again soon). */
bool tw__wheel_maintain(tw_service *s);
/* The same where no step comes meanwhile (a paused cursor): the late
 * slots too (wheel.c, back-pressure). */
bool tw__wheel_maintain_alone(tw_service *s);
/* The wheel's entries are past the back-pressure line: producers wait
 * (wheel.c), so the drainer compacts on without sleeping. */
bool tw__wheel_pressed(tw_service *s);
/* Drainer (the cursor once per loop, or tw_advance), `now` a reading of
 * the service's clock: at each trim period's end, give back what a burst
 * grew and the last two periods did not need (the lists, the workers'
 * spare batches, the record table's top). */
void tw__wheel_trim(tw_service *s, uint64_t now);
/* True while something is above what it keeps, or the record table could
 * give its top back: the idle cursor comes back at *at (the service
 * clock), the next trim, to look again. */
bool tw__wheel_trim_due(tw_service *s, uint64_t *at);
/* Entries the wheel holds, from the reservation counts (exact for the
 * drainer at rest; a hint for a producer). */
uint64_t tw__wheel_entries_estimate(tw_service *s);
/* Back-pressure (wheel.c): a producer that places its timers itself calls
 * tw__pressure_count after each placement; once every TW_PRESSURE_EVERY
 * of its stripe's, tw__wheel_pressure looks at the wheel, and past its
 * line compacts where it may take the drainer role (MANUAL; the cursor's
 * own callbacks), or waits for the cursor to (MONOTONIC). */
#define TW_PRESSURE_EVERY 1024u
#define TW_PRESSURE_MIN (1u << 18) /* entries (2 MiB) past twice the allowance */
void tw__wheel_pressure(tw_service *s);
/* The line: twice compaction's allowance for `pending`, plus TW_PRESSURE_MIN. */
uint64_t tw__wheel_pressure_line(tw_service *s, uint64_t pending);
/* The drainer lends its state around the callbacks it runs itself
 * (tw__deliver), so that they, and with MANUAL other producers, compact
 * (wheel.c, the drainer role); reclaim waits out a producer's compaction
 * (MANUAL). */
void tw__drainer_lend(tw_service *s);
void tw__drainer_reclaim(tw_service *s);
/* The cursor held at the pause gate with callbacks of its list still to
 * run (workers = 0; pause.c), its role given up for them: past the
 * back-pressure line it compacts there, as the paused cursor does
 * (guarantees 6 and 9); nobody else may (wheel.c, the drainer role). */
void tw__wheel_compact_at_gate(tw_service *s);
static inline void tw__pressure_count(tw_service *s); /* below tw__stripe */
/* A tick at or before the due tick of every pending timer (UINT64_MAX:
 * none), exact as tw_next_due's contract says. Any thread, no lock. */
uint64_t tw__wheel_next_due(tw_service *s);
/* The due tick of a claimed timer whose due-list key is `key` (drainer:
 * the last step's list). */
uint64_t tw__due_tick_of_key(const tw_service *s, uint64_t key);
/* The inline runner (drainer) lowers no floor; it raises it past a timer
 * it claimed to the due tick of the next one still claimed (workers.c). */
void tw__claim_floor_set(tw_service *s, uint64_t tick);

/* ---- clock.c ----------------------------------------------------------- */

/* clock_state (MONOTONIC): running, the ns spent paused so far; paused,
 * TW_CLOCK_PAUSED | the frozen service time (pause.c); on the way there,
 * TW_CLOCK_PAUSING | the ns spent paused so far (clock.c: any reader
 * finishes the pause). Runners treat both as paused (TW_CLOCK_FROZEN). */
#define TW_CLOCK_PAUSED  (1ull << 63)
#define TW_CLOCK_PAUSING (1ull << 62)
#define TW_CLOCK_FROZEN  (TW_CLOCK_PAUSED | TW_CLOCK_PAUSING)
uint64_t tw__clock_read(const tw_service *s);      /* ns, the service's clock */
uint64_t tw__clock_monotonic(void);
/* No earlier than tw__clock_read at some instant of the call, and at most a
 * few microseconds later: what an arming reads for now + delay (clock.c,
 * "The late clock"); never for deciding what is due. */
uint64_t tw__clock_read_late(const tw_service *s);
uint64_t tw__clock_monotonic_late(void);
/* Read the late clock's first base now, unless its rate is known, off, or
 * the calling thread has a base (clock.c): tw_create of a MONOTONIC
 * service, so that the rate is known LATE_CALIBRATE_NS later. */
void tw__late_clock_start(void);
/* Tests only (tests/test_clock.c): start the late clock afresh; whether it
 * is on (its rate known and not turned off); a hook that may change the
 * rate it measured (a planted under-estimate). */
void tw__late_clock_reset(void);
bool tw__late_clock_on(void);
/* Move the calling thread off its CPU to one of its mask not in busy;
 * its mask is as before after (workers.c, joining). False where there is
 * none. Tests call it directly. */
bool tw__move_off_cpu(const cpu_set_t *busy);
extern uint64_t (*_Atomic tw__late_mult_hook)(uint64_t mult);
/* Service time t as CLOCK_MONOTONIC (the cursor's absolute sleeps);
 * false while the clock is paused (the caller looks at the state again). */
bool     tw__clock_service_to_mono(const tw_service *s, uint64_t t, uint64_t *mono);
bool     tw__clock_paused(const tw_service *s);
bool     tw__clock_pause(tw_service *s);   /* true if it froze the clock */
bool     tw__clock_resume(tw_service *s);  /* true if it restarted it */

/* ---- embed.c ----------------------------------------------------------- */

/* A placement made timer due at tick `due` (MANUAL): if that is sooner
 * than the last tw_next_due answer, make tw_wake_fd readable. */
void tw__wake_if_sooner(tw_service *s, uint64_t due);
/* The ns of tick `tick` on the service's clock (saturated below UINT64_MAX). */
uint64_t tw__ns_of_tick(const tw_service *s, uint64_t tick);
void tw__wake_fd_close(tw_service *s); /* tw_destroy */

/* ---- pause.c ----------------------------------------------------------- */

/* The calling thread's gate, if it is a library runner (pause.c): its
 * `starting` word, and the futex word and quit flag it sleeps on while
 * the service is paused. All NULL on other threads. */
typedef struct tw_gate_tls {
    _Atomic uint32_t *starting;
    _Atomic int32_t *word;
    _Atomic bool *quit;
} tw_gate_tls;
extern TW_TLS tw_gate_tls tw__gate;
void tw__gate_bind(_Atomic uint32_t *starting, _Atomic int32_t *word, _Atomic bool *quit);
/* The gate's slow path: the service is paused; lower the word, sleep
 * until tw_resume or quit, raise it again. False if quitting. */
bool tw__gate_blocked(tw_service *s);
static inline uint64_t tw__ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

/* ---- workers.c --------------------------------------------------------- */

#define TW_BATCH 256
#define TW_BATCH_MIN 64 /* see tw__deliver */
/* The due pairs of one delivery, handed to the pool whole (workers.c,
 * runs): batches point into its memory instead of copying their handles
 * out of it. The drainer's due list gives its memory to the run and takes
 * a spare run's memory in exchange. */
typedef struct tw_run {
    struct cds_wfcq_node node; /* on the pool's spent queue */
    struct tw_run *next;       /* drainer: on its spare or waiting list */
    _Atomic uint32_t refs;     /* batches not done, + 1 while the drainer hands out */
    uint64_t *v;               /* (key, handle) pairs (malloc) */
    size_t cap;                /* entries of v */
} tw_run;

/* Due handles for one worker, which runs them from the front while idle
 * workers may take them from the back (workers.c, stealing). 64 bytes: a
 * line of its own, as its owner stores lo before every run. */
struct tw_batch_slab;
typedef struct tw_batch {
    struct cds_wfcq_node node;
    _Atomic uint32_t lo;   /* owner: the next index it runs (stealers read it) */
    _Atomic uint64_t take; /* gen (32) | hi (32): indexes < hi are left to run;
                              stealers CAS hi down; the drainer moves gen on
                              twice when it fills the batch again (an empty
                              generation first: workers.c, batch_fill) */
    _Atomic(const uint64_t *) h; /* its first (key, handle) pair, in its run */
    tw_run *run;           /* its run: the owner releases it at the end */
    struct tw_batch_slab *slab; /* the mapping it lives in (set once) */
} TW_ALIGNED tw_batch;
_Static_assert(sizeof(tw_batch) == TW_CACHELINE, "a batch is one line");

/* Batches are mapped TW_SLAB_BATCHES at a time (workers.c): a slab whose
 * batches are all back is unmapped whole, so a burst's batches go back to
 * the system, not into malloc's free lists. The drainer's alone. */
#define TW_SLAB_BATCHES 32
typedef struct tw_batch_slab {
    struct tw_batch_slab *next, *prev; /* the pool's slabs */
    struct cds_wfcq_node *free;        /* its batches not handed out (node.next) */
    uint32_t nfree;
    tw_batch b[TW_SLAB_BATCHES];
} tw_batch_slab;

/* Idle units of max_timers held in one place (a counter stripe, a worker):
 * given - taken (service.c, budgets). Given: written by the givers alone
 * (an owner: load + store); taken: by CAS (takers, the block's hand-back,
 * sweepers), never past the given count they read, except the take of an
 * owned stripe's owner where membarrier works: a load and a store inside
 * its busy window, which
 * sweepers keep out of by the handshake of busy and steal (service.c,
 * acct_take_owned). */
typedef struct tw_budget_acct {
    _Atomic uint64_t given;
    _Atomic uint64_t taken;
    _Atomic uint32_t busy;  /* the owner: inside a take by load and store */
    _Atomic uint32_t steal; /* sweepers that will move taken by CAS */
} tw_budget_acct;

/* A worker thread's own line: the batch it is running, for stealers. */
typedef struct tw_worker {
    tw_service *s;
    uint32_t idx;
    _Atomic(tw_batch *) cur;
    _Atomic uint32_t starting;   /* its gate (pause.c) */
    _Atomic uint32_t stealing;   /* it may hold another worker's batch pointer
                                    (steal_one; tw__pool_trim waits for 0) */
    /* What an idle worker watches before it joins this one (workers.c,
     * "Joining"): hints written by the owner alone, relaxed both ways. */
    _Atomic uint32_t active;     /* taking batches from the queue in turn */
    _Atomic uint32_t waiting;    /* asleep until a claimed-ahead deadline */
    _Atomic uint64_t stamp;      /* service time of its last clock read */
    _Atomic uint64_t done;       /* runs it finished, as of that read */
    _Atomic int32_t cpu;         /* the CPU it ran on at that read (-1: unknown) */
    uint64_t watch_ns;           /* its own: how long it watches (workers.c) */
    uint32_t every;              /* its own: runs between two clock reads */
    uint64_t joined_until;       /* its own: service time until which it takes
                                    batches beside the others (0: not joined) */
    uint32_t probe_every;        /* its own: watches per probe (workers.c) */
    uint32_t probe_in;           /* its own: watches until the next probe */
    bool waited;                 /* its own: a run of its batch waited for a
                                    deadline (its timing is no measure) */
    bool watching;               /* its own: it holds one of the pool's watch
                                    places (workers.c, "Joining") */
    /* Units of max_timers its batches' one-shots gave back (workers.c,
     * run_batch; given: its batches alone write it), on a line of its own:
     * sweepers read it, watchers read the line above. */
    tw_budget_acct budget TW_ALIGNED;
} TW_ALIGNED tw_worker;
/* The calling thread's tw_worker if it is a worker thread (of its ->s),
 * else NULL (workers.c). */
extern TW_TLS tw_worker *tw__worker_mine;

typedef struct tw_pool {
    struct cds_wfcq_head head;   /* batches of due handles; workers dequeue */
    struct cds_wfcq_tail tail;
    struct cds_wfcq_head spare_head; /* run batches, back for reuse: workers */
    struct cds_wfcq_tail spare_tail; /* enqueue, the drainer alone dequeues */
    _Atomic uint64_t made;       /* batches mapped (slabs x TW_SLAB_BATCHES): the
                                    drainer writes, tests read */
    size_t step_handed;          /* drainer: batches handed out in this step */
    size_t peak, peak_prev;      /* drainer: the most handed out in one step,
                                    this trim period and the one before */
    tw_batch_slab *slabs;        /* drainer: every slab mapped */
    uint32_t nslabs;             /* drainer: how many */
    tw_batch_slab *retired;      /* drainer: slabs trimmed, which a stealer may
                                    still read (linked through next) */
    struct cds_wfcq_head spent_head; /* runs whose batches are all done: */
    struct cds_wfcq_tail spent_tail; /* workers enqueue, the drainer dequeues */
    tw_run *runs_spare;          /* drainer: runs whose memory may be used again */
    tw_run *runs_wait;           /* drainer: spent runs a stealer may still read */
    size_t run_peak, run_peak_prev; /* drainer: the most entries one run held,
                                    this trim period and the one before */
    uint64_t runs_reused;        /* drainer: runs whose memory was used again
                                    (stress/steal_runs.c reads it once stopped) */
    uint32_t runs_out;           /* drainer: runs handed out, not spare again */
    uint32_t runs_out_peak, runs_out_peak_prev; /* drainer: the most out at once,
                                    this trim period and the one before */
    _Atomic int32_t work_seq;    /* futex word: bumped on every enqueue */
    _Atomic uint32_t queued;     /* batches in the queue, a hint for watchers
                                    (workers.c, "Joining"; cds_wfcq_empty's
                                    read races, for TSan, with the dequeue's
                                    plain store to the head) */
    _Atomic uint32_t sleepers;   /* workers in (or going into) futex_wait */
    _Atomic uint32_t watchers;   /* workers holding a watch place (workers.c,
                                    "Joining") ... */
    uint32_t watch_places;       /* ... at most this many: the CPUs the pool may
                                    run on; set before the first worker starts */
    _Atomic bool quit;
    _Atomic int32_t quit_seq;    /* futex word: bumped when the pool quits
                                    (wakes workers waiting for a deadline) */
    uint32_t nthreads;           /* threads started (the creator and joiner's) */
    uint32_t nworkers;           /* workers configured: written before the first
                                    starts, read by stealers */
    uint64_t watch_max;          /* the longest a watcher watches (workers.c,
                                    "Joining"); set before the first worker
                                    starts */
    uint64_t release_step;       /* when a timer claimed early may start: a
                                    multiple of this (workers.c); set before
                                    the first worker starts */
    pthread_t *threads;
    tw_worker *worker;           /* nworkers of them */
} tw_pool;

/* Hand the step's due list to the pool (or run it inline if no pool). */
void tw__deliver(tw_service *s);
/* In the middle of a step: hand the due list to the pool as far as there
 * are batches for it; what is left stays for tw__deliver, which runs it
 * all on this thread when there is no pool (workers = 0). */
void tw__deliver_early(tw_service *s);
int  tw__pool_start(tw_service *s, uint32_t nthreads);
/* tw_stop has begun: runners waiting for a deadline give it up. */
void tw__pool_stopping(tw_service *s);
void tw__pool_quit(tw_service *s);
void tw__pool_fini(tw_service *s);  /* tw_destroy: what tw__pool_quit keeps */
/* Drainer, at a trim period's end: free spare batches past what the last
 * two periods' largest step needed. */
void tw__pool_trim(tw_service *s);
bool tw__pool_above_keep(tw_service *s); /* more batches made than kept */
#define TW_BATCH_KEEP 64u /* batches (two slabs, 8 KiB) always kept */
#define TW_RUNS_KEEP 4u   /* spare runs always kept (workers.c, runs_trim) */
/* stress/steal_runs.c only: spent runs become spare without the look at
 * stealers (workers.c, runs), which TSan must then report. */
extern bool tw__runs_plant_no_wait;
/* Wait until timer h is not running (spin, then sleep). */
void tw__wait_not_running(tw_service *s, tw_record *rec, uint32_t idx, uint32_t gen);
/* Periodic: compute and arm the next run after the run that was due at
 * `deadline` (owner only). */
void tw__rearm(tw_service *s, tw_record *rec, uint32_t idx, uint64_t state,
               uint64_t next_deadline);
uint64_t tw__next_period_deadline(const tw_service *s, uint64_t deadline, uint64_t period);

/* What the current thread is inside (TW_EDEADLK checks, threads.c): the
 * callback it runs, and the services whose tw_advance or tw_stop it is
 * inside (nested: a callback may stop another service), each with the
 * callback the thread was running when it entered it: a callback of A
 * that calls tw_advance of B runs B's callbacks nested in its own, and
 * A's stays held all along (before 2026-11-28 only the innermost was
 * known, and a wait for the outer one from a nested callback slept for
 * good instead of answering TW_EDEADLK). Each hold lives in its caller's
 * frame, so nesting has no depth limit the thread itself cannot see: with
 * four slots in the thread-local state (until 2026-11-30) a fifth service
 * nested went unrecorded, and a callback six deep that called tw_advance
 * of the fifth locked the drain lock its own thread held, for good (a
 * review's program). */
typedef struct tw_hold {
    tw_service *s;          /* the service whose tw_advance or tw_stop it is in */
    tw_service *outer_s;    /* the callback it ran when it entered s ... */
    tw_timer outer_t;       /* ... (NULL, 0: none) */
    struct tw_hold *prev;   /* the hold it is nested in (NULL: none) */
} tw_hold;
/* The holds other threads' searches see (threads.c): the innermost
 * TW_HOLDS_SHOWN; a thread nested deeper is refused its waits. */
#define TW_HOLDS_SHOWN 16
typedef struct tw_running_tls {
    tw_service *s;       /* the callback it runs: service (NULL: none) ... */
    tw_timer t;          /* ... and handle */
    tw_hold *holds;      /* innermost first, on the holders' stacks (NULL: none) */
    uint32_t depth;      /* holds in that list */
} tw_running_tls;
extern TW_TLS tw_running_tls tw__self;

/* ---- threads.c --------------------------------------------------------- */

/* Asymmetric fences (threads.c): a runner's store-load ordering against a
 * rare caller's. Setup once per process before any callback runs. */
extern bool tw__fence_real; /* no membarrier: both sides fence */
/* Tests only: set before the process's first tw_create, the library acts
 * as on a kernel without membarrier (stress/budget_steal.c). */
extern bool tw__fence_force_real;
/* Tests only: the expedited membarrier fails (EPERM) after registering, as
 * under a seccomp filter installed later; tw__fence_heavy then takes the
 * global command (counted in tw__fence_global_calls), which
 * tw__fence_global_offered says the kernel has (tests/test_pause.c). */
extern _Atomic bool tw__fence_refuse_expedited;
extern _Atomic uint64_t tw__fence_global_calls;
bool tw__fence_global_offered(void);
void tw__fence_setup(void);
void tw__fence_heavy(void);  /* the rare side: every thread of the process */
static inline void tw__fence_light(void)
{
    if (__builtin_expect(tw__fence_real, 0))
        atomic_thread_fence(memory_order_seq_cst);
    else
        atomic_signal_fence(memory_order_seq_cst); /* the compiler's order only */
}

/* ---- record magazines (records.c owns them; inline for the free paths) ---- */

/* This thread's magazine, if it has one (an owned stripe) and the trimmer
 * is not emptying it: the owner's half of the handshake (see the top).
 * Inline with tw__rec_push_free, the free of every cancel.
 * (It used to be off under max_timers, when the cap was the table's size:
 * then every schedule and cancel met the one shared free list, 4x slower
 * on two threads; the cap is a budget now, service.c.) */
static inline bool tw__mag_enter_at(tw_magazine *m, bool real_fence)
{
    /* Relaxed: ordered before the load of steal by the fence pairing. */
    atomic_store_explicit(&m->busy, 1, memory_order_relaxed);
    /* tw__fence_light, with tw__fence_real as the caller read it (a cancel
     * on its lean path knows it false: TW_LEAN_SLOW otherwise). */
    if (__builtin_expect(real_fence, 0))
        atomic_thread_fence(memory_order_seq_cst);
    else
        atomic_signal_fence(memory_order_seq_cst); /* the compiler's order only */
    /* Acquire: 0 written by a trimmer that emptied the magazine: we see
     * what it left. */
    if (__builtin_expect(atomic_load_explicit(&m->steal, memory_order_acquire) == 0, 1))
        return true;
    /* Release: as in tw__mag_leave (we did not touch it). */
    atomic_store_explicit(&m->busy, 0, memory_order_release);
    return false;
}

static inline tw_magazine *tw__mag_enter_mine(tw_records *r, uint32_t mine)
{
    tw_magazine *m = &r->mag[mine];
    return tw__mag_enter_at(m, tw__fence_real) ? m : NULL;
}

/* The same for a thread that reads its stripe itself. */
static inline tw_magazine *tw__mag_enter(tw_records *r)
{
    return tw__stripe_owned ? tw__mag_enter_mine(r, tw__stripe_mine) : NULL;
}

static inline void tw__mag_leave(tw_magazine *m)
{
    /* Release: a trimmer that reads 0 (acquire) sees our use of it done. */
    if (m)
        atomic_store_explicit(&m->busy, 0, memory_order_release);
}

/* tw__rec_push_free for a thread known to own stripe `mine` (the caller
 * read tw__stripe_owned): the same handshake and store, without reading
 * the thread's stripe again. */
static inline void tw__rec_push_free_mine(tw_records *r, uint32_t mine, uint32_t idx)
{
    tw_magazine *m = tw__mag_enter_mine(r, mine);
    if (__builtin_expect(m && m->n < TW_MAGAZINE, 1)) {
        m->idx[m->n++] = idx; /* FREE already; ours until we hand it out */
        tw__mag_leave(m);
        return;
    }
    tw__mag_leave(m);
    tw__rec_push_free_many(r, &idx, 1);
}

/* Push a record whose state word the caller already CAS-ed to FREE: into
 * this thread's magazine while it has room, else tw__rec_push_free_many. */
static inline void tw__rec_push_free(tw_records *r, uint32_t idx)
{
    if (__builtin_expect(tw__stripe_owned, 1))
        tw__rec_push_free_mine(r, tw__stripe_mine, idx);
    else
        tw__rec_push_free_many(r, &idx, 1);
}

/* Start a library thread with asynchronous signals blocked, named `name`.
 * TW_OK or TW_EAGAIN. */
int  tw__thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *name);
/* First thing in the cursor and each worker: no timer slack, and a short
 * time slice under SCHED_OTHER (threads.c says why). */
#define TW_THREAD_SLICE_NS 100000u
void tw__thread_hint_latency(void);
/* struct sched_attr as the kernel reads it in its first version (48
 * bytes), for the hint and the tests that read it back: glibc before 2.41
 * has no declaration, and <linux/sched/types.h> clashes with <sched.h>. */
typedef struct tw_sched_attr {
    uint32_t size;
    uint32_t policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime; /* SCHED_OTHER since Linux 6.12: the slice asked for */
    uint64_t deadline;
    uint64_t period;
} tw_sched_attr;
_Static_assert(sizeof(tw_sched_attr) == 48, "SCHED_ATTR_SIZE_VER0");
/* The thread runs callback t of s (or any of s's: _of), innermost or held
 * outside one of its holds. */
bool tw__in_callback(const tw_service *s, tw_timer t);
bool tw__in_callback_of(const tw_service *s);
/* Holdings of the calling thread: is it inside tw_advance or tw_stop of s;
 * enter one (h: the caller's, until tw__unhold); leave the innermost. */
bool tw__holds(const tw_service *s);
void tw__hold(tw_service *s, tw_hold *h);
void tw__unhold(tw_hold *h);
/* Waits: before waiting for (kind, s, t), publish it and look for a cycle
 * of waits through other threads' callbacks; TW_EDEADLK (nothing
 * published) if there is one. `saved` keeps the thread's outer wait, which
 * tw__wait_end puts back. */
enum { TW_WAIT_NONE, TW_WAIT_TIMER, TW_WAIT_CALLBACKS, TW_WAIT_DRAIN };
typedef struct tw_wait_saved {
    int kind;
    tw_service *s;
    tw_timer t;
} tw_wait_saved;
int  tw__wait_begin(tw_service *s, int kind, tw_timer t, tw_wait_saved *saved);
void tw__wait_end(const tw_wait_saved *saved);

/* ---- service.c --------------------------------------------------------- */

typedef struct tw_stripe {
    /* One counter per event, so each hot call pays one uncontended RMW:
     * scheduled = armed - aborted; pending = armed - aborted - cancelled
     * - dropped - (fired - periodic_runs): every armed timer leaves
     * pending through exactly one of those. */
    _Atomic uint64_t armed, aborted, fired, periodic_runs, cancelled, rescheduled;
    /* Idle units of max_timers given back on this thread (service.c,
     * budgets); on the line of the counters a schedule, a cancel and a
     * run write, as a take or a give goes with each of them: one line
     * written per call, not two. */
    tw_budget_acct budget;
    _Atomic uint64_t dropped;
    _Atomic uint64_t periodic_ended; /* periodic runs returned: periodic_runs minus
                                  this are running, pending with no due time
                                  (tw_next_due) */
    _Atomic uint64_t reserved; /* slot positions reserved (wheel.c, compaction) */
    _Atomic uint64_t placed;   /* timers its threads placed themselves: when
                                  to look at back-pressure (tw__pressure_count) */
    _Atomic uint64_t firing_left; /* claimed timers that left FIRING other than by
                                  their run: cancelled, taken back, dropped
                                  (wheel.c, the next due time) */
    _Atomic uint64_t max_lateness;
    _Atomic uint64_t seg_readers[2]; /* readers of segments inside, by phase
                                  (segments.c) */
    _Atomic uint64_t seg_bytes;  /* segment bytes allocated less freed (wraps:
                                  summed over the stripes) */
    _Atomic uint64_t seg_reused; /* segments taken from the cache (segments.c) */
    _Atomic uint64_t lateness[TW_LATENESS_BUCKETS];
    _Atomic uint64_t rare[TW_RARE_COUNT];
} TW_ALIGNED tw_stripe;

enum { TW_RUN = 0, TW_STOPPING = 1, TW_STOPPED = 2 };
#define TW_SYNC_SHOWN 8 /* cancel_sync waiters whose record a run end can match */

struct tw_service {
    tw_config cfg;
    uint64_t origin;           /* clock value of tick 0 (MANUAL: 0) */
    uint64_t max_delay;        /* ns */
    uint64_t tick_recip;       /* ceil(2^64 / tick_ns), for tw__tick_floor */
    tw_records rec;
    tw_wheel wheel;
    tw_pool pool;

    _Atomic uint64_t manual_now TW_ALIGNED;  /* MANUAL clock, ns */
    _Atomic uint64_t clock_state; /* MONOTONIC: paused total, or PAUSED | frozen
                                     time (pause.c); read on every clock read */
    _Atomic int stop_state;    /* TW_RUN, TW_STOPPING, TW_STOPPED; seq_cst */
    pthread_mutex_t drain_lock;/* serialises tw_advance callers and stop's sweep */
    pthread_mutex_t role_lock; /* MANUAL: a producer compacting with the
                                  drainer's state lent (wheel.c, the
                                  drainer role) */
    _Atomic uint32_t role_lendable; /* MANUAL: tw_advance runs callbacks */
    _Atomic uint32_t role_lent;  /* MANUAL: a producer holds role_lock */
    _Atomic uint32_t role_wanted; /* a drainer waits for a compacting
                                     producer: it stops at its next slot */
    pthread_mutex_t stop_lock; /* serialises tw_stop callers */

    /* Cursor thread (MONOTONIC). */
    pthread_t cursor;
    bool cursor_started;
    uint64_t early_lead;       /* tests: early claims' lead in ticks, fixed
                                  (tw__early_lead_override); 0: by size */
    uint64_t prefault_ns;      /* cursor: the slowest recent step of populating
                                  records ahead, decaying (cursor.c) */
    _Atomic uint64_t wake_tick TW_ALIGNED; /* cursor sleeps until this tick */
    _Atomic int32_t wake_seq;  /* futex word: bumped to wake the cursor */
    _Atomic bool cursor_quit;
    _Atomic uint32_t cursor_starting TW_ALIGNED; /* the cursor's gate (pause.c) */

    /* max_timers: the pool of budget units (service.c, budgets). */
    _Atomic int64_t budget_pool TW_ALIGNED;
    _Atomic uint64_t budget_moves; /* moves of units between the pool and the
                                      accounts: in flight (low 32 bits),
                                      ended (high 32), for an exact
                                      TW_EAGAIN */
    int64_t budget_block;      /* units a stripe takes from / gives to the pool;
                                  0: no max_timers (service.c, budget_capped) */

    /* Event loops (MANUAL, embed.c). */
    _Atomic int wake_fd TW_ALIGNED;  /* eventfd, -1 until tw_wake_fd makes it */
    _Atomic uint64_t known_due;      /* the loop's last tw_next_due answer; 0:
                                        none yet */

    /* cancel_sync waiters: runners wake them after a run of a timer they
     * wait for ends (workers.c, waiting for a run to end). */
    _Atomic uint32_t sync_waiters TW_ALIGNED;
    _Atomic int32_t run_seq;   /* futex word: bumped after such a run ends */
    _Atomic uint32_t sync_unshown; /* waiters with no entry below: any run wakes */
    _Atomic uint32_t sync_waited[TW_SYNC_SHOWN]; /* record index + 1 a waiter
                                                    waits for; 0: free */

    tw_stripe stripe[TW_STRIPES];

    /* Deferred placement (defer.c): a log per owned stripe, made on first
     * use by the stripe's owner. */
    _Atomic(struct tw_defer_log *) defer[TW_OWNED_STRIPES];
    bool defer_short;          /* the cursor's: its last drain lacked memory */
    uint32_t nap_appended;     /* the cursor's: tw__defer_appended at its last
                                  look (cursor.c, naps) */
    uint64_t nap_looked;       /* the cursor's: service time of that look */
    uint32_t nap_entries;      /* TW_NAP_ENTRIES (tests: tw__nap_entries_override) */
    _Atomic uint64_t naps;     /* the cursor's: naps taken (tests read it) */
};

/* ---- defer.c ------------------------------------------------------------ */

/* Deferred placement: a producer's log of entries the cursor places
 * (defer.c has the protocol). */
#define TW_DEFER_LOG   8192u /* entries a log holds (a power of two) */
#define TW_DEFER_AHEAD 8u    /* only timers due more ticks than this ahead */
typedef struct tw_defer_entry {
    _Atomic uint64_t entry; /* the slot entry to place (tag | index) */
    _Atomic uint64_t tick;  /* its due tick */
} tw_defer_entry;
#define TW_DEFER_PAGE   (TW_DEFER_LOG / 4) /* entries under one bound */
#define TW_DEFER_KEEP   TW_DEFER_PAGE /* newest entries a drain may leave (defer.c) */
#define TW_DEFER_BOUNDS 8u /* bounds kept: a log spans at most 5 pages */
#define TW_DEFER_CHUNK  128u /* entries under one live count (defer.c, chunks) */
#define TW_DEFER_CHUNKS (TW_DEFER_LOG / TW_DEFER_CHUNK)
/* A log's spill (defer.c): where a full log's owner appends while a burst
 * outruns the cursor, as long as the spill holds no more than the timers
 * pending (one page over at most). Its entries are address space reserved
 * at once and backed as they are written; the cursor keeps a page it
 * drained while the pages kept could hold no more than the timers
 * pending, gives it back otherwise, and gives every page back at a trim
 * period that finds the spill empty. */
#define TW_SPILL_LOG    (1u << 22) /* entries (64 MiB of address space) */
#define TW_SPILL_PAGE   (1u << 17) /* entries under one bound, opened and given back
                                      together (2 MiB, a huge page of x86-64 and arm64) */
#define TW_SPILL_POKE   (1u << 14) /* entries between a spilling owner's pokes */
#define TW_SPILL_BOUNDS 64u        /* more than the pages a full spill spans */
#define TW_SPILL_RETRY  1024u      /* armings placed by the call before a refused owner asks again */
#define TW_SPILL_DRAIN_PAGES 1u    /* pages a loop's drain takes at most (defer.c) */
typedef struct tw_defer_spill {
    _Atomic uint32_t tail TW_ALIGNED; /* the owner's */
    /* The owner's: positions below it may be written. The cursor reads it
     * to give kept pages back (defer.c). */
    _Atomic uint32_t open_until;
    _Atomic uint64_t bound[TW_SPILL_BOUNDS]; /* the owner's, as a log's */
    uint32_t huge; /* the owner's: bit i, the ring's page i is asked to be huge */
    _Atomic uint32_t head TW_ALIGNED; /* the cursor's */
    _Atomic uint32_t giving;          /* the cursor's: it gives kept pages back */
    uint32_t kept;                    /* the cursor's: pages kept since its last give-back */
    tw_defer_entry *e;                /* TW_SPILL_LOG entries (mmap, MAP_NORESERVE) */
} tw_defer_spill;
typedef struct tw_defer_log {
    _Atomic uint32_t tail TW_ALIGNED; /* the owner's */
    /* The owner's: bound[p % TW_DEFER_BOUNDS] <= the tick of every entry
     * at positions [p, p + 1) * TW_DEFER_PAGE (page p) */
    _Atomic uint64_t bound[TW_DEFER_BOUNDS];
    _Atomic(tw_defer_spill *) spill;  /* the owner's, made on first need */
    uint32_t spill_retry;             /* the owner's: armings left before it asks again */
    /* The owner's: live[c], the entries appended to chunk c (positions
     * [c, c + 1) * TW_DEFER_CHUNK, modulo the log) since it last started
     * the chunk, less those its cancels cleared (defer.c, chunks). */
    _Atomic uint8_t live[TW_DEFER_CHUNKS] TW_ALIGNED;
    _Atomic uint32_t head TW_ALIGNED; /* the cursor's */
    _Atomic bool keep; /* the cursor's: its last drain found most entries stale */
    _Atomic uint64_t passed; /* the cursor's: chunks its drains passed unread (tests) */
    tw_defer_entry e[TW_DEFER_LOG] TW_ALIGNED;
} tw_defer_log;
/* Log the entry of rec instead of placing it (false: place it now). */
bool tw__defer_place(tw_service *s, tw_record *rec, uint64_t entry, uint64_t tick);
/* The owner of spill p opens its page at position t: huge pages for it if
 * it opens behind a backlog, small ones otherwise (defer.c). */
void tw__defer_page_size(tw_service *s, tw_defer_spill *p, uint32_t t, bool behind);
/* The cursor: place the logged entries (false: out of memory, some kept);
 * `some`: a log's newest entries may stay while none is due soon. */
bool tw__defer_drain(tw_service *s, bool some);
/* The cursor, once a trim period: give back the kept pages of every
 * spill that is empty (defer.c); and whether any spill keeps pages, so
 * that an idle cursor comes back for them. */
void tw__defer_trim(tw_service *s);
bool tw__defer_keeps(tw_service *s);
/* The cursor: a spill holds entries, which the loop's drains take
 * TW_SPILL_DRAIN_PAGES pages at a time (defer.c): do not sleep, and do not
 * populate records ahead, until it is empty. */
bool tw__defer_spilled(tw_service *s);
/* The cursor: the entries appended to the logs so far, mod 2^32 (the sum
 * of their tails): how fast producers log (cursor.c, naps). */
uint32_t tw__defer_appended(tw_service *s);
/* The cursor: a lower bound on the ticks logged (UINT64_MAX: none), for
 * its plan and its look after publishing it. */
uint64_t tw__defer_bound(tw_service *s);
/* tw_next_due: the earliest tick of a pending timer that is in a log
 * (UINT64_MAX: none); read before the wheel. */
uint64_t tw__defer_next_due(tw_service *s);

/* A cancel by the owner of stripe `mine` that took record idx from
 * PENDING to FREE: clear the entry of its log where the record's last
 * logged arming put an entry of idx, if it is still there, so that the
 * cursor's drain passes it by without reading the record, and take it
 * from its chunk's live count, so that a drain passes a chunk whose
 * entries are all cleared without reading them (defer.c, chunks).
 *
 * Why: the drain's look at a record (is this entry still its placement?)
 * took the record's line to the cursor's core, and the owner's next write
 * there (the cancel's CAS, the re-arming of the reused record) had to take
 * it back. WL1, each timer cancelled 1024 armings after its arming, sent
 * every record across that way: a cancel waited 50-60% of the producer's
 * time on it when the host made a hand-off between the two vCPUs slow
 * (WL1 P=1 at 22-25M against 45-55M, and 50-55M with the process on one
 * CPU; perf, AMD guest, 2026-11-29).
 *
 * Why it is safe without the tag: only we append to our log, and once the
 * CAS wins, idx is FREE and in our hands, so any entry of idx in it is a
 * placement of a life that has ended: stale, which the drain would have
 * dropped. The cursor and tw_next_due read the entry as the old value or
 * as 0 (no timer's: TW_ENTRY_VALUE), both right. The position is a hint:
 * another thread's log, a position the ring has since reused, or an
 * arming placed directly leave an entry of another index there, and
 * nothing is done.
 *
 * Why only while TW_LEAN_FORGETS (the caller looks): the loads follow the
 * CAS, which waits for the record's line, and what follows it delays the
 * next cancel's miss
 * (tw_cancel's common path is a leaf for the same reason, service.c).
 * WL2's cancels, in random order long after their armings, took 77 to
 * 82.5 ns a cancel with the look here on every cancel (medians of 12
 * processes each, 1M pending, 2026-11-29). TW_LEAN_FORGETS is up while
 * the cursor's last drain of the thread's log found most of its entries
 * stale (the log's keep, defer.c): cancels then come before the drain,
 * as in WL1, and the look pays. Loaded before the CAS instead, the look
 * needed two registers saved, and was slower still. */
static inline void tw__defer_forget(tw_service *s, uint32_t mine, const tw_record *rec,
                                    uint32_t idx)
{
    /* Relaxed: the stripe's owner stored it (defer.c, my_log). */
    tw_defer_log *d = atomic_load_explicit(&s->defer[mine], memory_order_relaxed);
    if (!d)
        return;
    /* Relaxed: a hint (above); when it is ours, we wrote it. */
    uint32_t pos = atomic_load_explicit(&((tw_record *)rec)->logged, memory_order_relaxed);
    /* Relaxed: we are the tail's only writer. Only our last TW_DEFER_LOG
     * appends are still in the ring: an older position is not looked at
     * (WL2's cancels, long after their armings, would each load a line of
     * the log for nothing). */
    uint32_t tail = atomic_load_explicit(&d->tail, memory_order_relaxed);
    if (tail - pos - 1 >= TW_DEFER_LOG)
        return;
    _Atomic uint64_t *e = &d->e[pos % TW_DEFER_LOG].entry;
    /* Relaxed: we are the entry's only writer. The value bit first: a
     * cleared entry (0) reads as index 0, and record 0 cancelled again
     * with its `logged` still there (re-armed since without a log append:
     * placed by the call, spilled) would take the chunk's count down a
     * second time for one entry, to 0 beside a live one (a review's test,
     * 2026-11-30: that timer never fired). */
    uint64_t v = atomic_load_explicit(e, memory_order_relaxed);
    if (!(v & TW_ENTRY_VALUE) || (uint32_t)v != idx)
        return;
    /* Relaxed: its readers take either value (above). */
    atomic_store_explicit(e, 0, memory_order_relaxed);
    /* The count is the chunk's since our last append at its start: an
     * append at pos's chunk start a lap later (tail past it) started it
     * afresh for the entries of that lap, of which this is not one. */
    uint32_t start = pos & ~(TW_DEFER_CHUNK - 1);
    if (tail - start > TW_DEFER_LOG)
        return;
    _Atomic uint8_t *live = &d->live[pos / TW_DEFER_CHUNK % TW_DEFER_CHUNKS];
    /* Relaxed (load and store): we are its only writer; the cursor reads
     * it as a lower bound's hint only once our tail has passed the chunk
     * (defer.c, chunks), and a count it reads too high only costs a read. */
    atomic_store_explicit(live, (uint8_t)(atomic_load_explicit(live, memory_order_relaxed) - 1),
                          memory_order_relaxed);
}
void tw__defer_fini(tw_service *s);

/* This thread's stripe. Up to TW_OWNED_STRIPES threads at a time each own
 * one (a plain load and store count, no locked instruction), handed on when
 * the thread exits; threads beyond that share the TW_SHARED_STRIPES others
 * round-robin and count with an atomic add. Inline, as every hot call
 * counts once. */
uint32_t tw__stripe_assign(void);
static inline tw_stripe *tw__stripe(tw_service *s)
{
    uint32_t i = tw__stripe_mine;
    if (__builtin_expect(i == UINT32_MAX, 0))
        i = tw__stripe_assign();
    return &s->stripe[i];
}
/* tw__count_add with the stripe's ownership given (a runner reads it once
 * per run of many: workers.c, run_ctx). */
static inline void tw__count_add_owned(_Atomic uint64_t *c, uint64_t n, bool owned)
{
    /* Release: a reader that sums a counter, then fences (acquire), sees
     * every count made before this one, such as a timer's arming before
     * its end (tw__pending; a plain store or a locked add on x86 either
     * way). An owned stripe has one writer, so load + store loses no
     * update. */
    if (owned)
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                              memory_order_release);
    else
        atomic_fetch_add_explicit(c, n, memory_order_release);
}
static inline void tw__count_add(_Atomic uint64_t *c, uint64_t n)
{
    tw__count_add_owned(c, n, tw__stripe_owned);
}
#define TW_COUNT(s, field, n) tw__count_add(&tw__stripe(s)->field, (n))

/* Counted on the stripe, not the thread: a thread that places fewer than
 * TW_PRESSURE_EVERY timers and exits never looked, and threads that came
 * and went grew the wheel for good (a review's program, 2026-11-30: 1.7 GB
 * in 15 s, nothing pending, a paused or unadvanced MANUAL service). */
static inline void tw__pressure_count(tw_service *s)
{
    _Atomic uint64_t *c = &tw__stripe(s)->placed;
    uint64_t n;
    /* Relaxed: a count of when to look; an owned stripe has one writer
     * (load + store), a shared one an RMW, so each multiple is met once. */
    if (tw__stripe_owned) {
        n = atomic_load_explicit(c, memory_order_relaxed) + 1;
        atomic_store_explicit(c, n, memory_order_relaxed);
    } else {
        n = atomic_fetch_add_explicit(c, 1, memory_order_relaxed) + 1;
    }
    if (__builtin_expect((n & (TW_PRESSURE_EVERY - 1)) == 0, 0))
        tw__wheel_pressure(s);
}
void tw__count_rare(tw_service *s, int which);
/* The sum of one counter over every stripe (relaxed: statistics, exact at
 * rest); `off` is the counter's offset in tw_stripe. */
uint64_t tw__stripes_sum(tw_service *s, size_t off);
#define TW_STRIPES_SUM(s, field) tw__stripes_sum((s), offsetof(tw_stripe, field))
uint64_t tw__pending(tw_service *s);        /* stats.pending, summed */
/* The pending timers that have a due time: stats.pending less the periodic
 * timers whose run is in progress. */
uint64_t tw__pending_due(tw_service *s);
/* A timer left pending (one-shot started, cancelled, dropped, undone):
 * its unit of max_timers goes back (service.c, budgets). */
void tw__budget_give(tw_service *s);
void tw__budget_hand_block(tw_service *s, tw_budget_acct *a, uint64_t taken);
/* After a give that left account a at `given`: a block to the pool if the
 * account holds two (tw__budget_hand_block). `block` is s->budget_block as
 * the caller read it (the cancel reads it once, as its cap's switch). */
static inline void tw__budget_hand_if_two(tw_service *s, tw_budget_acct *a, uint64_t given,
                                          int64_t block)
{
    /* Relaxed: a guess; the hand-back's CAS decides. */
    uint64_t taken = atomic_load_explicit(&a->taken, memory_order_relaxed);
    /* Signed: on a shared stripe, taken may include units given after
     * ours. */
    if (__builtin_expect((int64_t)(given - taken) >= 2 * block, 0))
        tw__budget_hand_block(s, a, taken);
}
/* The look of a give for a block to hand back (service.c): apart, and
 * cold, so that the give's callers keep no frame for it. */
void tw__budget_look(tw_service *s, tw_budget_acct *a, uint64_t given, int64_t block);
/* tw__budget_give with max_timers set, to account a (the thread's stripe's:
 * owned as tw__stripe_owned says): inline, as every run of a one-shot gives
 * its unit back (WL5). No locked instruction where the thread owns the
 * account: a sweep finds the unit by reading `given` (service.c, budgets).
 *
 * The look for a block to hand back comes once a block of gives (block is
 * a power of two, budget_init), when `given` reaches a multiple of it:
 * an account then holds less than three blocks idle, where a look at
 * every give kept it under two. Why: a cancel in random order waits on its
 * record's line, and the instructions behind the CAS decide how soon the
 * next cancel's miss starts; the look at every give (a load of `taken`, a
 * sum, a compare) cost WL2's cancels 8% with the cap, in a loop through a
 * call as twbench makes it (AMD guest, 1M pending, medians of 8 pairs,
 * 2026-11-29). Exactness does not rest on hand-backs: a sweep takes idle
 * units from any account (stress/model/budget.pml lets a give skip it). */
static inline uint64_t tw__budget_give_unit(tw_budget_acct *a, bool owned)
{
    /* Release: as a counter (tw__count_add_owned); the unit carries no
     * data, and a give before a schedule began is found by coherence. */
    if (owned) {
        uint64_t given = atomic_load_explicit(&a->given, memory_order_relaxed) + 1;
        atomic_store_explicit(&a->given, given, memory_order_release);
        return given;
    }
    return atomic_fetch_add_explicit(&a->given, 1, memory_order_release) + 1;
}
/* Whether a give that left `given` looks for a block to hand back. */
static inline bool tw__budget_looks(uint64_t given, int64_t block)
{
    return __builtin_expect((given & (uint64_t)(block - 1)) == 0, 0);
}
static inline void tw__budget_give_to(tw_service *s, tw_budget_acct *a, bool owned,
                                      int64_t block)
{
    uint64_t given = tw__budget_give_unit(a, owned);
    if (tw__budget_looks(given, block))
        tw__budget_look(s, a, given, block);
}
static inline void tw__budget_give_capped(tw_service *s)
{
    tw__budget_give_to(s, &tw__stripe(s)->budget, tw__stripe_owned, s->budget_block);
}

/* tw_stop has begun (or ended): every wait of a caller ends (service.c, the
 * stop pairing; wheel.c, back-pressure). */
static inline bool tw__stopping(tw_service *s)
{
    /* Seq_cst: the producer's half of the stop pairing (service.c, top). */
    return atomic_load_explicit(&s->stop_state, memory_order_seq_cst) != TW_RUN;
}
uint64_t tw__reserved_total(tw_service *s); /* every stripe's `reserved` */
uint64_t tw__fired_total(tw_service *s);    /* every stripe's `fired` */
uint64_t tw__firing_left_total(tw_service *s); /* ... and `firing_left` */
/* The histogram's bucket for a lateness (TW_LATENESS_BUCKETS, timerwheel.h). */
static inline uint32_t tw__lateness_bucket(uint64_t ns)
{
    if (ns < 1024)
        return 0;
    uint32_t b = (uint32_t)(63 - __builtin_clzll(ns)) - 9;
    return b < TW_LATENESS_BUCKETS ? b : TW_LATENESS_BUCKETS - 1;
}
/* The least lateness bucket b counts (b <= TW_LATENESS_BUCKETS: the one
 * past the last is where it would begin). */
static inline uint64_t tw__lateness_bucket_lo(uint32_t b)
{
    return b == 0 ? 0 : (uint64_t)1 << (b + 9);
}
/* n runs whose lateness fell in `bucket`, the worst of them `worst` ns. */
void tw__note_lateness_runs(tw_service *s, uint32_t bucket, uint32_t n, uint64_t worst);
uint64_t tw__rare_total(tw_service *s, int which);
const char *tw__rare_name(int which); /* for reports: "late_slot" */
/* Wake the cursor if a timer now sits earlier than its planned wake-up. */
void tw__cursor_poke(tw_service *s, uint64_t tick);
/* Wake the cursor, paused or not, to compact (wheel.c, back-pressure). */
void tw__cursor_compact_now(tw_service *s);
uint64_t tw__tick_of(const tw_service *s, uint64_t deadline_ns); /* ceil */
uint64_t tw__tick_floor(const tw_service *s, uint64_t ns);
uint64_t tw__tick_recip(uint64_t tick_ns);
int  tw__cursor_start(tw_service *s);
void tw__cursor_quit(tw_service *s);

/* Right before a claim for a run (pause.c has the protocol): false if
 * quitting (claim nothing). Inline: every run passes it. A thread that is
 * not a library runner (tw_advance's caller) has no gate and never waits:
 * a MANUAL service is never paused. */
static inline bool tw__gate_enter(tw_service *s)
{
    _Atomic uint32_t *g = tw__gate.starting;
    if (!g)
        return true;
    /* Relaxed: ordered before the load below by the fence (pause.c). */
    atomic_store_explicit(g, 1, memory_order_relaxed);
    tw__fence_light();
    /* Relaxed: the fence pairing orders it against tw_pause's freeze. */
    if (__builtin_expect(!(atomic_load_explicit(&s->clock_state, memory_order_relaxed) &
                           TW_CLOCK_FROZEN), 1))
        return true;
    return tw__gate_blocked(s);
}

/* After the claim, before the callback's call. */
static inline void tw__gate_leave(void)
{
    /* Release: ends the claim's window for tw_pause (its acquire load). */
    if (tw__gate.starting)
        atomic_store_explicit(tw__gate.starting, 0, memory_order_release);
}

/* Invariant checker (quiescent service only: no call in flight). Returns 0,
 * or -1 with a description in buf. */
int tw__check(tw_service *s, char *buf, size_t len);

#endif /* TW_INTERNAL_H */
