/*
 * twfloor: the hardware and OS floor under any timer library on this
 * machine. twbench measures what the implementations reach; twfloor measures
 * the costs none of them can go below, so that a target can be judged against
 * them ("N ops/s per core needs each op under X ns, and one clock read alone
 * costs Y ns").
 *
 *   twfloor [--quick]
 *
 *   --quick   smaller loops, 3 repetitions, a 64 MiB buffer in place of the
 *             400 MiB one (a smoke run, a few seconds)
 *
 * Output: one line per figure on stdout, in the style of twbench,
 *
 *   FLOOR name [param=value] figure=value unit # min .. max
 *
 * the value being the median of 5 repetitions (3 with --quick) and the
 * comment the fastest and slowest repetition. Notes go to stderr. The figures:
 *
 *   clock_gettime          one clock_gettime(CLOCK_MONOTONIC) call, ns: what
 *                          every schedule that reads the clock pays (vDSO;
 *                          on a VM the clocksource decides: kvm-clock, tsc).
 *   clock_gettime_coarse   the same with CLOCK_MONOTONIC_COARSE (tick
 *                          resolution, no hardware counter read).
 *   atomic_cas_seq_cst, atomic_fetch_add_relaxed, atomic_exchange_seq_cst
 *                          one uncontended read-modify-write on a cache line
 *                          no other thread touches, ns per op, each op
 *                          depending on the previous one's result. On x86-64
 *                          every one is a locked instruction whatever the
 *                          memory order. A lock-free op that needs k RMWs
 *                          costs at least k times this.
 *   store_load             a store and a dependent load of the same private
 *                          word, ns per pair: the same work without the
 *                          atomic RMW; the difference is the RMW premium.
 *   chase size=S           one dependent load at a random place in a buffer
 *                          of S bytes (pointer chasing through a random
 *                          cycle, one pointer per 64-byte line), ns per load.
 *                          32KiB is L1, 1MiB L2, 16MiB L3 (or its share),
 *                          400MiB is DRAM plus TLB misses: 10M timer records
 *                          of 40 bytes. A structure that touches m random
 *                          lines per op on N pending timers pays m times the
 *                          row for its size.
 *   pingpong               one cache line handed from one core to another:
 *                          two threads pinned to two CPUs take turns with a
 *                          CAS on one word, ns per one-way hand-off. The
 *                          least a producer pays to publish to a consumer
 *                          on another core that is watching.
 *   futex_wake             wake-to-run: thread A reads CLOCK_MONOTONIC,
 *                          stores a word and calls FUTEX_WAKE; thread B,
 *                          blocked in FUTEX_WAIT on it, reads the clock when
 *                          it runs; p50 and p99 over 2000 wakes (300 with
 *                          --quick), microseconds. The least a timer thread
 *                          that sleeps can be late by, before any timer
 *                          code runs. Wakes where B had not yet blocked are
 *                          left out (counted on stderr).
 *   burst_run runners=R callback=C
 *                          running a burst of due timers' callbacks, million
 *                          runs per second: WL5's burst (1,000,000 timers due
 *                          in one tick; 200,000 with --quick) with nothing of
 *                          a timer library around it. A table of 40-byte
 *                          records laid out like tw_record, every one FIRING
 *                          and out of cache (a 64 MiB buffer, larger than the
 *                          L3, is written after the reset, as the cursor
 *                          claimed the records long before the burst), and their
 *                          handles in index order. A run is what a worker
 *                          does per handle: prefetch the record 8 handles
 *                          ahead for writing, acquire-load its state, CAS
 *                          FIRING -> RUNNING (seq_cst), load cb and arg, call
 *                          cb through the pointer, release-store FREE.
 *                          callback=shared is WL5's callback, a relaxed
 *                          fetch_add on one global counter; callback=own is
 *                          the same fetch_add on a counter of the runner's
 *                          own. runners=1: one thread runs the whole burst;
 *                          runners=2: two threads pinned to two CPUs each run
 *                          a contiguous half, timed from the first's start to
 *                          the last's end (the runs per second a benchmark
 *                          would report). Why it matters: a design that runs
 *                          a burst on two cores at once pays for the shared
 *                          counter's line going from core to core on nearly
 *                          every callback, so its WL5 rate (callbacks per
 *                          second from the first callback's start to the
 *                          last's end) cannot exceed the runners=2
 *                          callback=shared row (it comes near the runners=1
 *                          row only by leaving most of the burst to one core);
 *                          a design that runs a burst on one worker cannot
 *                          exceed the runners=1 callback=shared row. The
 *                          callback=own rows are what the same runs reach
 *                          when the callbacks share nothing.
 *                          callback=shared_work is the shared counter after
 *                          BURST_WORK_OPS dependent multiply-adds of the
 *                          runner's own (some 7 ns on the AMD guest, less
 *                          than a timer library adds to a run): with that
 *                          much between two increments the line is at the
 *                          other core on nearly every one, and two runners
 *                          fall far below one (2026-11-27, AMD guest:
 *                          48M runs/s on one runner, 8.8M on two).
 *   random_cas records=N work=W
 *                          one cancel's memory traffic with W steps of
 *                          other work around it, ns per op: N records of
 *                          40 bytes (as tw_record; N = 1,000,000, WL2's
 *                          smaller size, 40 MB; 200,000 with --quick), each
 *                          op an acquire load and a seq_cst CAS on the state
 *                          word of a record at a random place (a shuffled
 *                          order, read in sequence, as WL2 cancels), then a
 *                          call doing W steps of work that touch no new
 *                          line (a load, an add, a store: about 5
 *                          instructions each). Independent ops overlap their
 *                          misses only as far as the CPU's window of
 *                          instructions reaches the next op's load: work=0
 *                          is the floor of a cancel loop, and the rows with
 *                          work show what each instruction a cancel runs
 *                          besides its CAS costs (2026-11-27, AMD guest:
 *                          20 ns at work=0, 40 at work=8, 70 at work=24,
 *                          197 at work=64, about 330 instructions, where
 *                          the misses no longer overlap: the chase row for
 *                          16 MiB is 168).
 *   wl2_cancel records=N book=B
 *                          WL2's cancel loop as twbench makes it, with
 *                          nothing of a timer library around it: N records
 *                          of 40 bytes and N handles (a generation above
 *                          the index, the handle of the timer armed i-th in
 *                          slot i), the handles read in a shuffled order (as
 *                          twbench's h[perm[i]]: one random 8-byte read,
 *                          then the record it names: two dependent misses),
 *                          each an acquire load of the state word, the
 *                          generation compared, a seq_cst CAS; N = 1,000,000
 *                          and 10,000,000 as WL2 (100,000 and 1,000,000 with
 *                          --quick). book=0 is that alone: the least any
 *                          cancel through a handle pays. book=1 adds the
 *                          least bookkeeping that keeps a freed record and
 *                          the counts exact: the index stored into a
 *                          thread's own 128-entry log and a thread-own count
 *                          bumped, no handshake and no hand-over when the
 *                          log fills. A design that answers each cancel
 *                          exactly at the call cannot beat book=1.
 *   wl2_cancel records=N book=0 record_bytes=8
 *                          the same with the state words apart, 8 bytes a
 *                          record (8 MB at 1M, within a 32 MB L3; the 40-byte
 *                          records are 40 MB): what a table of state words
 *                          beside the records would give a cancel's miss
 *                          (2026-11-29, AMD guest: 21.6 ns against 36.4
 *                          at 1M, 45.5 against 49.3 at 10M, whose 80 MB
 *                          no cache holds).
 *   wl6_touch prefetch=F   WL6's touch with nothing of a timer library
 *                          around it, million touches per second: two
 *                          threads pinned to two CPUs each touch records at
 *                          random in one table of 100,000 40-byte records
 *                          (WL6's sessions), a touch being an acquire load
 *                          of the state word, a seq_cst CAS (the lease), a
 *                          store of the deadline word and a seq_cst CAS
 *                          (its release), as tw_reschedule to later does;
 *                          timed from the first start to the last end.
 *                          Half the records a thread meets were last
 *                          written by the other CPU, so the row moves with
 *                          pingpong's hand-off. prefetch=0 loads first: the
 *                          line comes in shared and the CAS waits for it a
 *                          second time; prefetch=1 first fetches both the
 *                          state's and the deadline's lines for writing
 *                          (PREFETCHW; n/a where the CPU lacks it), as the
 *                          library does (src/internal.h).
 *   first_touch page=P     the first write to a page of fresh anonymous
 *                          memory, 4 KiB pages (ns a page) and, where
 *                          transparent huge pages may be asked for
 *                          (MADV_HUGEPAGE), 2 MiB ones (ns a MiB): what a
 *                          list that grows into new memory pays, on a VM
 *                          the host's fault as well as the zeroing.
 *
 * All figures but burst_run's are wall-clock times (CLOCK_MONOTONIC) divided
 * by the number of operations, loop overhead included (a counter and a
 * branch, which the CPU overlaps with the measured chain); burst_run's is the
 * inverse, runs divided by wall-clock time. On a shared machine the median is
 * the figure to quote; a max far from it (a min, for burst_run) means another
 * process got the CPU.
 *
 * Threads share nothing but C11 atomics; the threads' arguments are written
 * before pthread_create and never changed, and their results are read after
 * pthread_join.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KIB ((size_t)1024)
#define MIB (1024 * KIB)
#define MS UINT64_C(1000000)
#define SEC UINT64_C(1000000000)

/* One pointer per cache line in the chase buffers; the atomics under test
 * each get a line of their own. 64 bytes on every x86-64 and most ARM64. */
#define LINE_BYTES 64
#define MAX_REPS 5
#define N_CHASE_SIZES 4
/* How long the waker waits for the sleeper's acknowledgement before it calls
 * the futex test broken. */
#define WAKE_ACK_TIMEOUT_NS (2 * SEC)

_Static_assert(sizeof(_Atomic uint32_t) == sizeof(uint32_t),
               "the futex word must be a plain 32-bit int to the kernel");

/* ---- sizes -------------------------------------------------------------------- */

typedef struct floor_sizes {
    unsigned reps;                       /* repetitions per figure, <= MAX_REPS */
    uint64_t clock_calls;                /* per repetition */
    uint64_t rmw_ops;                    /* per repetition, also store_load pairs */
    uint64_t chase_loads;                /* timed loads per repetition */
    size_t chase_bytes[N_CHASE_SIZES];
    uint64_t pingpong_hops;              /* one-way hand-offs per repetition, even */
    uint64_t pingpong_limit_ns;          /* a repetition stops early after this */
    uint32_t wakes;
    uint64_t wake_gap_ns;                /* waker sleeps this long before each wake */
    uint32_t burst_timers;               /* records in burst_run's burst */
    uint32_t cas_records;                /* random_cas's table */
    uint32_t wl2_records[2];             /* wl2_cancel's tables (WL2's sizes) */
    uint64_t touch_ops;                  /* touches per thread and repetition */
    size_t evict_bytes;                  /* written before each burst_run repetition */
} floor_sizes;

static const floor_sizes full_sizes = {
    .reps = 5, .clock_calls = 2000000, .rmw_ops = 5000000, .chase_loads = 2000000,
    .chase_bytes = { 32 * KIB, 1 * MIB, 16 * MIB, 400 * MIB },
    .pingpong_hops = 1000000, .pingpong_limit_ns = 1 * SEC,
    .wakes = 2000, .wake_gap_ns = 200000,
    .burst_timers = 1000000, .evict_bytes = 64 * MIB, .cas_records = 1000000,
    .wl2_records = { 1000000, 10000000 },
    .touch_ops = 4000000,
};
static const floor_sizes quick_sizes = {
    .reps = 3, .clock_calls = 200000, .rmw_ops = 500000, .chase_loads = 200000,
    .chase_bytes = { 32 * KIB, 1 * MIB, 16 * MIB, 64 * MIB },
    .pingpong_hops = 100000, .pingpong_limit_ns = SEC / 4,
    .wakes = 300, .wake_gap_ns = 200000,
    .burst_timers = 200000, .evict_bytes = 64 * MIB, .cas_records = 200000,
    .wl2_records = { 100000, 1000000 },
    .touch_ops = 400000,
};

_Static_assert(MAX_REPS >= 5, "full runs take 5 repetitions");

/* ---- helpers ------------------------------------------------------------------ */

_Noreturn static void die(const char *what)
{
    fflush(stdout);
    fprintf(stderr, "twfloor: FAIL %s\n", what);
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / SEC), .tv_nsec = (long)(ns % SEC) };
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
        ;
}

/* Results of the timed loops end up here, so that the compiler cannot drop a
 * loop whose result nobody reads. Only the main thread touches it; relaxed
 * suffices, nothing is published through it. */
static _Atomic uint64_t sink;

static void keep(uint64_t v)
{
    atomic_fetch_add_explicit(&sink, v, memory_order_relaxed);
}

/* splitmix64, as in twbench.c. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* ---- repetitions and output ------------------------------------------------------ */

typedef struct spread {
    double median, min, max;
} spread;

static spread spread_of(double *v, unsigned n)
{
    qsort(v, n, sizeof *v, cmp_double);
    double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return (spread){ .median = median, .min = v[0], .max = v[n - 1] };
}

/* Small figures get two decimals, so that 1.2 ns and 1.3 ns stay apart. */
static int decimals(double v)
{
    return v < 10 ? 2 : 1;
}

static void print_floor(const char *name, const char *figure, spread s, const char *unit)
{
    printf("FLOOR %s %s=%.*f %s # min %.*f .. max %.*f\n", name, figure,
           decimals(s.median), s.median, unit, decimals(s.min), s.min,
           decimals(s.max), s.max);
    fflush(stdout);
}

/* A loop to time: runs n operations on ctx, returns something derived from
 * their results. */
typedef uint64_t (*timed_loop)(void *ctx, uint64_t n);

/* reps runs of loop(ctx, n): nanoseconds per operation. */
static spread time_per_op(timed_loop loop, void *ctx, uint64_t n, unsigned reps)
{
    double ns_per_op[MAX_REPS];
    for (unsigned r = 0; r < reps; r++) {
        uint64_t t0 = now_ns();
        keep(loop(ctx, n));
        ns_per_op[r] = (double)(now_ns() - t0) / (double)n;
    }
    return spread_of(ns_per_op, reps);
}

/* ---- 1. clock reads ------------------------------------------------------------- */

static uint64_t read_clock_n(clockid_t id, uint64_t n)
{
    uint64_t acc = 0;
    struct timespec ts;
    for (uint64_t i = 0; i < n; i++) {
        clock_gettime(id, &ts);
        acc += (uint64_t)ts.tv_nsec;
    }
    return acc;
}

static uint64_t loop_clock_monotonic(void *ctx, uint64_t n)
{
    (void)ctx;
    return read_clock_n(CLOCK_MONOTONIC, n);
}

static uint64_t loop_clock_coarse(void *ctx, uint64_t n)
{
    (void)ctx;
    return read_clock_n(CLOCK_MONOTONIC_COARSE, n);
}

static void note_clocksource(void)
{
    char src[64] = "unknown";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f) {
        if (!fgets(src, sizeof src, f))
            strcpy(src, "unknown");
        fclose(f);
    }
    src[strcspn(src, "\n")] = '\0';
    fprintf(stderr, "twfloor: clocksource %s\n", src);
}

static void measure_clocks(const floor_sizes *sz)
{
    note_clocksource();
    print_floor("clock_gettime", "ns_per_call",
                time_per_op(loop_clock_monotonic, NULL, sz->clock_calls, sz->reps), "ns");
    print_floor("clock_gettime_coarse", "ns_per_call",
                time_per_op(loop_clock_coarse, NULL, sz->clock_calls, sz->reps), "ns");
}

/* ---- 2, 3. uncontended RMW and plain store + load ----------------------------------- */

/* A word alone on its cache line; only the main thread ever touches it, so
 * no operation on it orders anything for another thread. The memory orders
 * below are the ones whose cost is being measured, not ones the program
 * needs. */
typedef struct private_line {
    _Alignas(LINE_BYTES) _Atomic uint64_t word;
    char pad[LINE_BYTES - sizeof(_Atomic uint64_t)];
} private_line;

static uint64_t loop_cas_seq_cst(void *ctx, uint64_t n)
{
    _Atomic uint64_t *w = &((private_line *)ctx)->word;
    /* Private word: relaxed reads the current value, nothing to pair with. */
    uint64_t cur = atomic_load_explicit(w, memory_order_relaxed);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t expected = cur;
        /* seq_cst: the order under test (what a lock-free push would use);
         * never fails, nobody else writes the word. The next value comes
         * from this CAS's result, so the ops form one dependent chain. */
        bool ok = atomic_compare_exchange_strong(w, &expected, expected + 1);
        cur = expected + ok;
    }
    return cur;
}

static uint64_t loop_fetch_add_relaxed(void *ctx, uint64_t n)
{
    _Atomic uint64_t *w = &((private_line *)ctx)->word;
    uint64_t x = 0;
    for (uint64_t i = 0; i < n; i++) {
        /* relaxed: the order under test (a counter); private word. The
         * addend is 1 while the word stays below 2^63, but the compiler
         * cannot know that: each add waits for the previous result. */
        x = atomic_fetch_add_explicit(w, (x >> 63) + 1, memory_order_relaxed);
    }
    return x;
}

static uint64_t loop_exchange_seq_cst(void *ctx, uint64_t n)
{
    _Atomic uint64_t *w = &((private_line *)ctx)->word;
    uint64_t x = 0;
    for (uint64_t i = 0; i < n; i++) {
        /* seq_cst: the order under test (a take-all swap); private word.
         * Stores one more than it took: a dependent chain. */
        x = atomic_exchange(w, x + 1);
    }
    return x;
}

static uint64_t loop_store_load(void *ctx, uint64_t n)
{
    _Atomic uint64_t *w = &((private_line *)ctx)->word;
    uint64_t x = 0;
    for (uint64_t i = 0; i < n; i++) {
        /* relaxed store and load compile to a plain mov each on x86-64 and
         * ARM64 (unlike a plain variable, the compiler may not fold them);
         * private word, nothing to order. The load waits for the store
         * (store-to-load forwarding), the next store for the load. */
        atomic_store_explicit(w, x + 1, memory_order_relaxed);
        x = atomic_load_explicit(w, memory_order_relaxed);
    }
    return x;
}

static void measure_private_atomics(const floor_sizes *sz)
{
    private_line *line = aligned_alloc(LINE_BYTES, sizeof *line);
    if (!line)
        die("out of memory");
    /* Before any other access, single-threaded: relaxed. */
    atomic_init(&line->word, 0);
    uint64_t n = sz->rmw_ops;
    print_floor("atomic_cas_seq_cst", "ns_per_op",
                time_per_op(loop_cas_seq_cst, line, n, sz->reps), "ns");
    print_floor("atomic_fetch_add_relaxed", "ns_per_op",
                time_per_op(loop_fetch_add_relaxed, line, n, sz->reps), "ns");
    print_floor("atomic_exchange_seq_cst", "ns_per_op",
                time_per_op(loop_exchange_seq_cst, line, n, sz->reps), "ns");
    print_floor("store_load", "ns_per_pair",
                time_per_op(loop_store_load, line, n, sz->reps), "ns");
    free(line);
}

/* ---- 4. dependent random reads -------------------------------------------------- */

typedef struct chase_line {
    struct chase_line *next;
    char pad[LINE_BYTES - sizeof(struct chase_line *)];
} chase_line;

_Static_assert(sizeof(chase_line) == LINE_BYTES, "one pointer per cache line");

typedef struct chase_buffer {
    chase_line *lines;
    size_t n;
    chase_line *at;            /* where the next timed run starts */
} chase_buffer;

/* Sattolo's algorithm: a uniformly random permutation with a single cycle,
 * so that following next from any line visits every line once. */
static void sattolo_shuffle(uint32_t *perm, size_t n, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(rng_next(seed) % i);    /* j < i, never i itself */
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static chase_buffer chase_buffer_make(size_t bytes)
{
    size_t n = bytes / LINE_BYTES;
    chase_line *lines = aligned_alloc(LINE_BYTES, n * LINE_BYTES);
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!lines || !perm)
        die("out of memory for a chase buffer");
    memset(lines, 0, n * LINE_BYTES);         /* prefault every page */
    uint64_t seed = 42;
    sattolo_shuffle(perm, n, &seed);
    for (size_t i = 0; i < n; i++)
        lines[i].next = &lines[perm[i]];
    free(perm);
    return (chase_buffer){ .lines = lines, .n = n, .at = lines };
}

/* Follows the cycle once round: checks that it is one cycle through every
 * line, and leaves a buffer that fits in cache warm. */
static void chase_buffer_check(const chase_buffer *b)
{
    const chase_line *p = b->lines;
    size_t steps = 0;
    do {
        p = p->next;
        steps++;
    } while (p != b->lines && steps <= b->n);
    if (steps != b->n)
        die("chase: the permutation is not a single cycle");
}

static uint64_t loop_chase(void *ctx, uint64_t n)
{
    chase_buffer *b = ctx;
    chase_line *p = b->at;
    for (uint64_t i = 0; i < n; i++)
        p = p->next;
    b->at = p;                 /* the next repetition goes on from here */
    return (uint64_t)(uintptr_t)p;
}

static void note_transparent_hugepages(void)
{
    char mode[128] = "unknown";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(mode, sizeof mode, f))
            strcpy(mode, "unknown");
        fclose(f);
    }
    mode[strcspn(mode, "\n")] = '\0';
    fprintf(stderr, "twfloor: transparent hugepages: %s (chase buffers are plain "
            "aligned_alloc, no madvise)\n", mode);
}

static void size_label(char *buf, size_t len, size_t bytes)
{
    if (bytes >= MIB)
        snprintf(buf, len, "chase size=%zuMiB", bytes / MIB);
    else
        snprintf(buf, len, "chase size=%zuKiB", bytes / KIB);
}

static void measure_chase(const floor_sizes *sz)
{
    note_transparent_hugepages();
    for (unsigned i = 0; i < N_CHASE_SIZES; i++) {
        char name[64];
        chase_buffer b = chase_buffer_make(sz->chase_bytes[i]);
        chase_buffer_check(&b);
        size_label(name, sizeof name, sz->chase_bytes[i]);
        print_floor(name, "ns_per_load",
                    time_per_op(loop_chase, &b, sz->chase_loads, sz->reps), "ns");
        free(b.lines);
    }
}

/* ---- 5. cross-core ping-pong --------------------------------------------------- */

typedef struct pingpong {
    /* The contended line: even values are player 0's turn, odd player 1's. */
    _Alignas(LINE_BYTES) _Atomic uint64_t ball;
    /* Everything else on another line, so that it does not bounce with the ball. */
    _Alignas(LINE_BYTES) _Atomic unsigned ready;
    _Atomic bool stop;                /* player 0 ran out of time */
    _Atomic uint64_t elapsed_ns;      /* written by player 0, read after join */
    _Atomic uint64_t hops_done;       /* ditto */
    uint64_t hops;                    /* even; set before the threads start */
    uint64_t limit_ns;                /* ditto */
} pingpong;

typedef struct player {
    pingpong *pp;
    unsigned parity;                  /* 0 or 1 */
} player;

/* Spins until the ball says v (our turn). False if player 0 called time. */
static bool ball_await(pingpong *pp, uint64_t v)
{
    unsigned spins = 0;
    /* acquire: pairs with the other player's CAS release; no data rides on
     * the ball, but a real hand-off pays for this order, so we time it. */
    while (atomic_load_explicit(&pp->ball, memory_order_acquire) != v) {
        /* relaxed: stop carries no data; seen a few spins late is fine. */
        if (++spins % 1024 == 0 && atomic_load_explicit(&pp->stop, memory_order_relaxed))
            return false;
    }
    return true;
}

static void ball_pass(pingpong *pp, uint64_t v)
{
    uint64_t expected = v;
    /* acq_rel: releases our turn to the other player's acquire load (and
     * would publish anything written before it); the x86 lock cmpxchg is a
     * full barrier whatever the order. It cannot fail: only the player
     * whose turn it is writes the ball. */
    if (!atomic_compare_exchange_strong_explicit(&pp->ball, &expected, v + 1,
                                                 memory_order_acq_rel, memory_order_acquire))
        die("pingpong: the ball moved out of turn");
}

static void players_await_start(pingpong *pp)
{
    /* acq_rel / acquire: both players see each other started, so the clock
     * starts with both threads on their CPUs; no data is published. */
    atomic_fetch_add_explicit(&pp->ready, 1, memory_order_acq_rel);
    while (atomic_load_explicit(&pp->ready, memory_order_acquire) < 2)
        ;
}

static bool out_of_time(pingpong *pp, uint64_t v, uint64_t t0)
{
    if (v % 4096 != 0 || now_ns() - t0 < pp->limit_ns)
        return false;
    /* relaxed: player 1 only needs to stop spinning; it reads nothing else. */
    atomic_store_explicit(&pp->stop, true, memory_order_relaxed);
    return true;
}

static void *player_run(void *arg)
{
    const player *me = arg;
    pingpong *pp = me->pp;
    players_await_start(pp);
    uint64_t t0 = now_ns(), v = me->parity;
    for (; v < pp->hops; v += 2) {
        if (me->parity == 0 && out_of_time(pp, v, t0))
            break;
        if (!ball_await(pp, v))
            return NULL;
        ball_pass(pp, v);
    }
    if (me->parity == 1)
        return NULL;
    if (v >= pp->hops) {
        ball_await(pp, pp->hops);     /* player 1's last hand-off */
        v = pp->hops;
    }
    /* relaxed: read by main after pthread_join, which orders it. */
    atomic_store_explicit(&pp->elapsed_ns, now_ns() - t0, memory_order_relaxed);
    atomic_store_explicit(&pp->hops_done, v, memory_order_relaxed);
    return NULL;
}

/* The first two CPUs this process may run on, or false if there are fewer. */
static bool two_cpus(int cpu[2])
{
    cpu_set_t set;
    int found = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return false;
    for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
        if (CPU_ISSET(c, &set))
            cpu[found++] = c;
    return found == 2;
}

/* Starts run(arg) on a thread of its own, pinned to cpu unless cpu is
 * negative; who names the figure in a failure. */
static void thread_start(pthread_t *th, void *(*run)(void *), void *arg, int cpu,
                         const char *who)
{
    char what[96];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (pthread_attr_setaffinity_np(&attr, sizeof set, &set) != 0) {
            snprintf(what, sizeof what, "%s: cannot pin a thread", who);
            die(what);
        }
    }
    if (pthread_create(th, &attr, run, arg) != 0) {
        snprintf(what, sizeof what, "%s: cannot start a thread", who);
        die(what);
    }
    pthread_attr_destroy(&attr);
}

/* One repetition: ns per one-way hand-off. */
static double pingpong_once(const floor_sizes *sz, const int cpu[2])
{
    pingpong *pp = aligned_alloc(LINE_BYTES, sizeof *pp);
    if (!pp)
        die("out of memory");
    /* atomic_init: before the threads exist; pthread_create publishes. */
    atomic_init(&pp->ball, 0);
    atomic_init(&pp->ready, 0);
    atomic_init(&pp->stop, false);
    atomic_init(&pp->elapsed_ns, 0);
    atomic_init(&pp->hops_done, 0);
    pp->hops = sz->pingpong_hops;
    pp->limit_ns = sz->pingpong_limit_ns;
    player players[2] = { { pp, 0 }, { pp, 1 } };
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        thread_start(&th[i], player_run, &players[i], cpu[i], "pingpong");
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    /* relaxed: pthread_join ordered player 0's stores before these loads. */
    uint64_t done = atomic_load_explicit(&pp->hops_done, memory_order_relaxed);
    uint64_t ns = atomic_load_explicit(&pp->elapsed_ns, memory_order_relaxed);
    free(pp);
    if (done == 0)
        die("pingpong: no hand-off in the time limit");
    if (done < sz->pingpong_hops)
        fprintf(stderr, "twfloor: pingpong: time limit after %" PRIu64 " of %" PRIu64
                " hand-offs (CPU taken by someone else?)\n", done, sz->pingpong_hops);
    return (double)ns / (double)done;
}

static void measure_pingpong(const floor_sizes *sz)
{
    int cpu[2];
    if (!two_cpus(cpu)) {
        fprintf(stderr, "twfloor: pingpong: needs two CPUs, skipped\n");
        printf("FLOOR pingpong ns_per_handoff=n/a ns\n");
        return;
    }
    fprintf(stderr, "twfloor: pingpong: CPUs %d and %d\n", cpu[0], cpu[1]);
    double ns[MAX_REPS];
    for (unsigned r = 0; r < sz->reps; r++)
        ns[r] = pingpong_once(sz, cpu);
    print_floor("pingpong", "ns_per_handoff", spread_of(ns, sz->reps), "ns");
}

/* ---- 6. futex wake-to-run ------------------------------------------------------ */

static long futex_wait(_Atomic uint32_t *word, uint32_t val, const struct timespec *rel)
{
    return syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val, rel, NULL, 0);
}

static void futex_wake_one(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

typedef struct wakeup {
    /* The futex word the sleeper blocks on: the number of the current wake. */
    _Alignas(LINE_BYTES) _Atomic uint32_t seq;
    _Atomic uint64_t sent_ns;         /* when the waker called this wake */
    /* The sleeper's acknowledgement, a futex word the waker blocks on. */
    _Alignas(LINE_BYTES) _Atomic uint32_t acked;
    /* Sleeper's results, read after pthread_join. */
    _Atomic uint64_t p50_ns, p99_ns, min_ns, max_ns;
    _Atomic uint32_t samples, missed;
    uint32_t wakes;                   /* set before the sleeper starts */
} wakeup;

/* Blocks until seq moves past seen. True if it really blocked in the kernel
 * (the wake found it asleep), false if the new value was there first. */
static bool sleeper_await(wakeup *w, uint32_t seen)
{
    bool slept = false;
    /* acquire: pairs with the waker's release store of seq, so that sent_ns
     * of this wake is visible once seq is. */
    while (atomic_load_explicit(&w->seq, memory_order_acquire) == seen) {
        if (futex_wait(&w->seq, seen, NULL) == 0)
            slept = true;
    }
    return slept;
}

/* Nearest-rank percentile of sorted v[0..n). */
static uint64_t percentile(const uint64_t *v, uint32_t n, unsigned pct)
{
    uint64_t rank = ((uint64_t)n * pct + 99) / 100;
    return v[rank ? rank - 1 : 0];
}

static void sleeper_publish(wakeup *w, uint64_t *lat, uint32_t n, uint32_t missed)
{
    qsort(lat, n, sizeof *lat, cmp_u64);
    /* relaxed: all read by main after pthread_join, which orders them. */
    atomic_store_explicit(&w->samples, n, memory_order_relaxed);
    atomic_store_explicit(&w->missed, missed, memory_order_relaxed);
    if (n == 0)
        return;
    atomic_store_explicit(&w->p50_ns, percentile(lat, n, 50), memory_order_relaxed);
    atomic_store_explicit(&w->p99_ns, percentile(lat, n, 99), memory_order_relaxed);
    atomic_store_explicit(&w->min_ns, lat[0], memory_order_relaxed);
    atomic_store_explicit(&w->max_ns, lat[n - 1], memory_order_relaxed);
}

static void *sleeper_run(void *arg)
{
    wakeup *w = arg;
    uint64_t *lat = malloc(w->wakes * sizeof *lat);
    uint32_t n = 0, missed = 0;
    if (!lat)
        die("out of memory");
    for (uint32_t i = 1; i <= w->wakes; i++) {
        bool slept = sleeper_await(w, i - 1);
        uint64_t ran = now_ns();
        /* relaxed: ordered by the acquire of seq in sleeper_await. */
        uint64_t sent = atomic_load_explicit(&w->sent_ns, memory_order_relaxed);
        if (slept)
            lat[n++] = ran - sent;
        else
            missed++;
        /* release: the waker's acquire load sees this wake done; the waker
         * writes sent_ns again only after that. */
        atomic_store_explicit(&w->acked, i, memory_order_release);
        futex_wake_one(&w->acked);
    }
    sleeper_publish(w, lat, n, missed);
    free(lat);
    return NULL;
}

/* Blocks until the sleeper has acknowledged wake i, or dies. */
static void waker_await_ack(wakeup *w, uint32_t i)
{
    uint64_t deadline = now_ns() + WAKE_ACK_TIMEOUT_NS;
    uint32_t a;
    /* acquire: pairs with the sleeper's release store of acked. */
    while ((a = atomic_load_explicit(&w->acked, memory_order_acquire)) != i) {
        uint64_t now = now_ns();
        if (now >= deadline)
            die("futex_wake: the sleeper did not run within 2 s of a wake");
        uint64_t left = deadline - now;
        struct timespec rel = { .tv_sec = (time_t)(left / SEC), .tv_nsec = (long)(left % SEC) };
        futex_wait(&w->acked, a, &rel);
    }
}

static void waker_run(wakeup *w, uint64_t gap_ns)
{
    for (uint32_t i = 1; i <= w->wakes; i++) {
        sleep_ns(gap_ns);             /* time for the sleeper to block again */
        /* relaxed: published by the release store of seq just below. */
        atomic_store_explicit(&w->sent_ns, now_ns(), memory_order_relaxed);
        /* release: makes sent_ns visible to the sleeper's acquire load. */
        atomic_store_explicit(&w->seq, i, memory_order_release);
        futex_wake_one(&w->seq);
        waker_await_ack(w, i);
    }
}

static void print_wake_figure(const char *figure, uint64_t ns, const wakeup *w, uint32_t n)
{
    /* relaxed: after pthread_join (see sleeper_publish). */
    double min = (double)atomic_load_explicit(&w->min_ns, memory_order_relaxed) / 1e3;
    double max = (double)atomic_load_explicit(&w->max_ns, memory_order_relaxed) / 1e3;
    printf("FLOOR futex_wake %s=%.1f us # min %.1f .. max %.1f over %" PRIu32 " wakes\n",
           figure, (double)ns / 1e3, min, max, n);
    fflush(stdout);
}

static void measure_futex_wake(const floor_sizes *sz)
{
    wakeup *w = aligned_alloc(LINE_BYTES, sizeof *w);
    if (!w)
        die("out of memory");
    /* atomic_init: before the sleeper exists; pthread_create publishes. */
    atomic_init(&w->seq, 0);
    atomic_init(&w->sent_ns, 0);
    atomic_init(&w->acked, 0);
    atomic_init(&w->p50_ns, 0);
    atomic_init(&w->p99_ns, 0);
    atomic_init(&w->min_ns, 0);
    atomic_init(&w->max_ns, 0);
    atomic_init(&w->samples, 0);
    atomic_init(&w->missed, 0);
    w->wakes = sz->wakes;
    pthread_t th;
    if (pthread_create(&th, NULL, sleeper_run, w) != 0)
        die("futex_wake: cannot start a thread");
    waker_run(w, sz->wake_gap_ns);
    pthread_join(th, NULL);
    /* relaxed: after pthread_join (see sleeper_publish). */
    uint32_t n = atomic_load_explicit(&w->samples, memory_order_relaxed);
    uint32_t missed = atomic_load_explicit(&w->missed, memory_order_relaxed);
    if (missed)
        fprintf(stderr, "twfloor: futex_wake: %" PRIu32 " of %" PRIu32 " wakes found the "
                "sleeper not yet blocked, left out\n", missed, sz->wakes);
    if (n < sz->wakes / 2)
        die("futex_wake: fewer than half the wakes found the sleeper blocked");
    print_wake_figure("wake_to_run_p50", atomic_load_explicit(&w->p50_ns, memory_order_relaxed), w, n);
    print_wake_figure("wake_to_run_p99", atomic_load_explicit(&w->p99_ns, memory_order_relaxed), w, n);
    free(w);
}

/* ---- 7. running a burst of due timers ------------------------------------------ */

/* A record as the library lays out tw_record (src/internal.h): 40 bytes,
 * so that a burst of N touches as many lines as the real one. */
typedef void (*burst_cb)(uint64_t handle, void *arg);

typedef struct burst_record {
    _Atomic uint64_t state;
    _Atomic uint64_t deadline;
    _Atomic(burst_cb) cb;
    _Atomic(void *) arg;
    uint32_t seq;
    uint32_t unused;
} burst_record;

_Static_assert(sizeof(burst_record) == 40, "a record is 40 bytes, as tw_record");

/* The states a run passes through; the library's words carry a generation
 * and a version as well, which cost nothing more to compare. */
#define BURST_FREE    UINT64_C(0)
#define BURST_FIRING  UINT64_C(1)
#define BURST_RUNNING UINT64_C(2)
/* A handle: a generation above the record's index, as tw_timer. */
#define BURST_GEN     UINT64_C(1)
/* How far ahead a runner prefetches records: the workers' PREFETCH_AHEAD. */
#define BURST_AHEAD   8

/* WL5's counter: every callback=shared callback adds to it. Alone on its
 * cache line, so that the only line the runners share is this one. */
static struct {
    _Alignas(LINE_BYTES) _Atomic uint64_t runs;
    char pad[LINE_BYTES - sizeof(_Atomic uint64_t)];
} burst_shared;

/* callback=own's counter: one per thread, in its thread-local storage. */
static _Thread_local _Atomic uint64_t burst_own_runs;

/* noinline: the runs call through the record's pointer, as a worker does;
 * the callbacks must exist as functions to be called so. */
__attribute__((noinline)) static void burst_cb_shared(uint64_t handle, void *arg)
{
    (void)handle;
    (void)arg;
    /* relaxed: WL5's callback, a counter; nothing is published through it,
     * and main reads it after pthread_join. */
    atomic_fetch_add_explicit(&burst_shared.runs, 1, memory_order_relaxed);
}

__attribute__((noinline)) static void burst_cb_own(uint64_t handle, void *arg)
{
    (void)handle;
    (void)arg;
    /* relaxed: only this thread touches its counter. The same locked add as
     * burst_cb_shared, so that the rows differ only in sharing the line. */
    atomic_fetch_add_explicit(&burst_own_runs, 1, memory_order_relaxed);
}

/* burst_cb_shared after BURST_WORK_OPS dependent multiply-adds of the
 * runner's own, which the CPU cannot overlap with each other. */
#define BURST_WORK_OPS 16

__attribute__((noinline)) static void burst_cb_shared_work(uint64_t handle, void *arg)
{
    (void)arg;
    uint64_t x = handle;
    for (unsigned k = 0; k < BURST_WORK_OPS; k++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    keep(x);
    /* relaxed: as burst_cb_shared. */
    atomic_fetch_add_explicit(&burst_shared.runs, 1, memory_order_relaxed);
}

typedef struct burst {
    burst_record *recs;               /* n records; set before the runners start */
    uint64_t *handles;                /* n handles, in index order; ditto */
    uint32_t n;
    unsigned runners;                 /* 1 or 2; ditto */
    unsigned char *evict;             /* main thread only */
    size_t evict_bytes;
    unsigned evictions;               /* main thread only */
    /* The runners' start barrier, on a line of its own. */
    _Alignas(LINE_BYTES) _Atomic unsigned ready;
} burst;

typedef struct burst_runner {
    _Alignas(LINE_BYTES) burst *b;    /* set before the thread starts */
    uint32_t lo, hi;                  /* its handles: [lo, hi); ditto */
    /* Results, read by main after pthread_join. */
    _Atomic uint64_t start_ns, end_ns, ran, own_runs;
} burst_runner;

/* Runs the records of handles [lo, hi) in order: the number run. */
static uint64_t burst_run_range(burst_record *recs, const uint64_t *h, uint32_t lo, uint32_t hi)
{
    uint64_t ran = 0;
    for (uint32_t i = lo; i < hi; i++) {
        if (i + BURST_AHEAD < hi)
            __builtin_prefetch(&recs[(uint32_t)h[i + BURST_AHEAD]], 1, 3);
        burst_record *r = &recs[(uint32_t)h[i]];
        /* acquire: what a runner needs, pairing with the release that made
         * the record FIRING, before it reads cb and arg (here pthread_create
         * has ordered main's reset already; the order is part of the cost). */
        uint64_t st = atomic_load_explicit(&r->state, memory_order_acquire);
        if (st != BURST_FIRING)
            continue;
        /* seq_cst: the library's order for claiming a run, which a cancel
         * racing it decides by. Never fails here: every record is in one
         * runner's range only. */
        if (!atomic_compare_exchange_strong(&r->state, &st, BURST_RUNNING))
            continue;
        /* relaxed: ordered by the acquire load of state above. */
        burst_cb cb = atomic_load_explicit(&r->cb, memory_order_relaxed);
        void *arg = atomic_load_explicit(&r->arg, memory_order_relaxed);
        cb(h[i], arg);
        /* release: publishes the callback's effects to whoever takes the
         * record next, as the library's free does; here main, after join. */
        atomic_store_explicit(&r->state, BURST_FREE, memory_order_release);
        ran++;
    }
    return ran;
}

static void *burst_runner_run(void *arg)
{
    burst_runner *me = arg;
    burst *b = me->b;
    /* acq_rel / acquire: the runners see each other started, so that they
     * run at once; no data is published (pthread_create did that). */
    atomic_fetch_add_explicit(&b->ready, 1, memory_order_acq_rel);
    while (atomic_load_explicit(&b->ready, memory_order_acquire) < b->runners)
        ;
    uint64_t t0 = now_ns();
    uint64_t ran = burst_run_range(b->recs, b->handles, me->lo, me->hi);
    uint64_t t1 = now_ns();
    /* relaxed: all read by main after pthread_join, which orders them; the
     * thread-local counter is this thread's own. */
    atomic_store_explicit(&me->start_ns, t0, memory_order_relaxed);
    atomic_store_explicit(&me->end_ns, t1, memory_order_relaxed);
    atomic_store_explicit(&me->ran, ran, memory_order_relaxed);
    atomic_store_explicit(&me->own_runs, atomic_load_explicit(&burst_own_runs, memory_order_relaxed),
                          memory_order_relaxed);
    return NULL;
}

static burst burst_make(const floor_sizes *sz)
{
    burst b = { .n = sz->burst_timers, .evict_bytes = sz->evict_bytes };
    b.recs = aligned_alloc(LINE_BYTES, ((size_t)b.n * sizeof *b.recs + LINE_BYTES - 1)
                                       / LINE_BYTES * LINE_BYTES);
    b.handles = malloc((size_t)b.n * sizeof *b.handles);
    b.evict = malloc(b.evict_bytes);
    if (!b.recs || !b.handles || !b.evict)
        die("out of memory for burst_run");
    memset(b.recs, 0, (size_t)b.n * sizeof *b.recs);     /* prefault every page */
    memset(b.evict, 0, b.evict_bytes);
    for (uint32_t i = 0; i < b.n; i++) {
        b.handles[i] = BURST_GEN << 32 | i;
        /* atomic_init: no runner exists yet. */
        atomic_init(&b.recs[i].state, BURST_FREE);
        atomic_init(&b.recs[i].deadline, 0);
        atomic_init(&b.recs[i].cb, NULL);
        atomic_init(&b.recs[i].arg, NULL);
    }
    return b;
}

/* Makes every record FIRING with callback cb, then writes the eviction
 * buffer so that the records are in DRAM when the burst starts. */
static void burst_reset(burst *b, burst_cb cb)
{
    /* relaxed: no runner exists; pthread_create publishes all of it. */
    for (uint32_t i = 0; i < b->n; i++) {
        atomic_store_explicit(&b->recs[i].state, BURST_FIRING, memory_order_relaxed);
        atomic_store_explicit(&b->recs[i].cb, cb, memory_order_relaxed);
    }
    atomic_store_explicit(&burst_shared.runs, 0, memory_order_relaxed);
    memset(b->evict, (int)(++b->evictions & 0xff), b->evict_bytes);
    keep(b->evict[b->evict_bytes - 1]);
}

/* Every record run once and FREE, every callback counted, or dies. */
static void burst_check(const burst *b, burst_cb cb, uint64_t ran, uint64_t own)
{
    if (ran != b->n)
        die("burst_run: a record was not run once");
    /* relaxed: after pthread_join, which ordered the runners' writes. */
    uint64_t shared = atomic_load_explicit(&burst_shared.runs, memory_order_relaxed);
    bool counted = cb == burst_cb_own ? (own == b->n && shared == 0) : shared == b->n;
    if (!counted)
        die("burst_run: the callbacks' count is not the number of records");
    for (uint32_t i = 0; i < b->n; i++)
        if (atomic_load_explicit(&b->recs[i].state, memory_order_relaxed) != BURST_FREE)
            die("burst_run: a record did not end FREE");
}

/* One repetition with runners threads (on cpu[0], cpu[1]; a negative cpu
 * leaves the thread unpinned): million runs per second. */
static double burst_once(burst *b, unsigned runners, burst_cb cb, const int cpu[2])
{
    burst_reset(b, cb);
    b->runners = runners;
    /* atomic_init: no runner exists yet; pthread_create publishes. */
    atomic_init(&b->ready, 0);
    burst_runner r[2];
    pthread_t th[2];
    for (unsigned i = 0; i < runners; i++) {
        r[i].b = b;
        r[i].lo = (uint32_t)((uint64_t)b->n * i / runners);
        r[i].hi = (uint32_t)((uint64_t)b->n * (i + 1) / runners);
        atomic_init(&r[i].start_ns, 0);
        atomic_init(&r[i].end_ns, 0);
        atomic_init(&r[i].ran, 0);
        atomic_init(&r[i].own_runs, 0);
        thread_start(&th[i], burst_runner_run, &r[i], cpu[i], "burst_run");
    }
    for (unsigned i = 0; i < runners; i++)
        pthread_join(th[i], NULL);
    uint64_t start = UINT64_MAX, end = 0, ran = 0, own = 0;
    for (unsigned i = 0; i < runners; i++) {
        /* relaxed: after pthread_join (see burst_runner_run). */
        uint64_t t0 = atomic_load_explicit(&r[i].start_ns, memory_order_relaxed);
        uint64_t t1 = atomic_load_explicit(&r[i].end_ns, memory_order_relaxed);
        start = t0 < start ? t0 : start;
        end = t1 > end ? t1 : end;
        ran += atomic_load_explicit(&r[i].ran, memory_order_relaxed);
        own += atomic_load_explicit(&r[i].own_runs, memory_order_relaxed);
    }
    burst_check(b, cb, ran, own);
    keep(ran);
    /* runs per ns, times 1000: million runs per second. */
    return (double)b->n / (double)(end > start ? end - start : 1) * 1e3;
}

static void measure_burst_run(const floor_sizes *sz)
{
    static const struct {
        unsigned runners;
        burst_cb cb;
        const char *callback;
    } rows[] = {
        { 1, burst_cb_shared, "shared" },
        { 2, burst_cb_shared, "shared" },
        { 1, burst_cb_own, "own" },
        { 2, burst_cb_own, "own" },
        { 1, burst_cb_shared_work, "shared_work" },
        { 2, burst_cb_shared_work, "shared_work" },
    };
    int cpu[2];
    bool two = two_cpus(cpu);
    if (!two)
        cpu[0] = cpu[1] = -1;         /* runners=1 unpinned, runners=2 skipped */
    if (two)
        fprintf(stderr, "twfloor: burst_run: %" PRIu32 " records (%zu MiB), CPUs %d and %d, "
                "%zu MiB written before each repetition\n", sz->burst_timers,
                (size_t)sz->burst_timers * sizeof(burst_record) / MIB, cpu[0], cpu[1],
                sz->evict_bytes / MIB);
    else
        fprintf(stderr, "twfloor: burst_run: runners=2 needs two CPUs, skipped; runners=1 "
                "unpinned\n");
    burst b = burst_make(sz);
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        char name[64];
        snprintf(name, sizeof name, "burst_run runners=%u callback=%s", rows[k].runners,
                 rows[k].callback);
        if (rows[k].runners == 2 && !two) {
            printf("FLOOR %s runs_per_s=n/a M/s\n", name);
            continue;
        }
        double rate[MAX_REPS];
        for (unsigned r = 0; r < sz->reps; r++)
            rate[r] = burst_once(&b, rows[k].runners, rows[k].cb, cpu);
        print_floor(name, "runs_per_s", spread_of(rate, sz->reps), "M/s");
    }
    free(b.recs);
    free(b.handles);
    free(b.evict);
}

/* ---- 8. first touch of fresh memory ----------------------------------------------- */

#define TOUCH_BYTES (32 * MIB)

/* One repetition: map TOUCH_BYTES, ask for huge pages if `huge`, write a
 * byte a 4 KiB page, unmap: ns for the writes. */
static uint64_t touch_once(bool huge)
{
    unsigned char *p = mmap(NULL, TOUCH_BYTES, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        die("first_touch: mmap");
    if (huge)
        (void)madvise(p, TOUCH_BYTES, MADV_HUGEPAGE); /* a hint; may do nothing */
    uint64_t t0 = now_ns();
    for (size_t off = 0; off < TOUCH_BYTES; off += 4 * KIB)
        p[off] = 1;
    uint64_t t = now_ns() - t0;
    keep(p[TOUCH_BYTES - 4 * KIB]);
    munmap(p, TOUCH_BYTES);
    return t;
}

static void measure_first_touch(const floor_sizes *sz)
{
    double small[MAX_REPS], huge[MAX_REPS];
    for (unsigned r = 0; r < sz->reps; r++) {
        small[r] = (double)touch_once(false) / (double)(TOUCH_BYTES / (4 * KIB));
        huge[r] = (double)touch_once(true) / (double)(TOUCH_BYTES / MIB);
    }
    print_floor("first_touch page=4KiB", "ns_per_page", spread_of(small, sz->reps), "ns");
    print_floor("first_touch page=huge", "ns_per_mib", spread_of(huge, sz->reps), "ns");
}

/* ---- 8. random CAS with work around it ------------------------------------------ */

/* A record as random_cas sees it: the state word first, 40 bytes in all. */
typedef struct cas_record {
    _Atomic uint64_t state;
    uint64_t rest[4];
} cas_record;

_Static_assert(sizeof(cas_record) == 40, "a record is 40 bytes, as tw_record");

typedef struct cas_table {
    cas_record *recs;
    uint32_t *order;                  /* a random permutation of the indexes */
    uint32_t n;
    unsigned work;                    /* steps of other work per op */
    uint32_t at;                      /* where the next repetition starts */
} cas_table;

/* W steps of work on a line the caller already has (noinline: a call, as
 * the library's is). */
__attribute__((noinline)) static void cas_work(unsigned w)
{
    static uint64_t mine[8];
    for (unsigned k = 0; k < w; k++)
        mine[k & 7] += k;
    __asm__ volatile("" : : "r"(mine) : "memory"); /* keep the stores */
}

static uint64_t loop_random_cas(void *ctx, uint64_t n)
{
    cas_table *t = ctx;
    uint64_t won = 0;
    uint32_t at = t->at;
    for (uint64_t i = 0; i < n; i++) {
        _Atomic uint64_t *w = &t->recs[t->order[at]].state;
        at = at + 1 == t->n ? 0 : at + 1;
        /* acquire, then a seq_cst CAS: tw_cancel's two accesses to the
         * state word. */
        uint64_t v = atomic_load_explicit(w, memory_order_acquire);
        won += atomic_compare_exchange_strong_explicit(w, &v, v + 1, memory_order_seq_cst,
                                                       memory_order_acquire);
        cas_work(t->work);
    }
    t->at = at;
    return won;
}

static void measure_random_cas(const floor_sizes *sz)
{
    static const unsigned works[] = { 0, 8, 24, 64 };
    cas_table t = { .n = sz->cas_records };
    t.recs = calloc(t.n, sizeof *t.recs);
    t.order = malloc((size_t)t.n * sizeof *t.order);
    if (!t.recs || !t.order)
        die("out of memory for random_cas");
    uint64_t seed = 7;
    sattolo_shuffle(t.order, t.n, &seed);
    for (uint32_t i = 0; i < t.n; i++)  /* every page resident before timing */
        atomic_store_explicit(&t.recs[i].state, 0, memory_order_relaxed);
    for (size_t k = 0; k < sizeof works / sizeof works[0]; k++) {
        char name[64];
        t.work = works[k];
        snprintf(name, sizeof name, "random_cas records=%" PRIu32 " work=%u", t.n, t.work);
        print_floor(name, "ns_per_op", time_per_op(loop_random_cas, &t, t.n, sz->reps), "ns");
    }
    free(t.recs);
    free(t.order);
}

/* ---- 9. WL2's cancel loop, with and without bookkeeping ---------------------------- */

#define WL2_GEN_SHIFT 32
#define WL2_LOG 128u

typedef struct wl2_table {
    cas_record *recs;
    uint64_t *handles;                /* generation << 32 | index */
    uint32_t *order;                  /* the order the handles are read in */
    uint32_t n;
    uint32_t at;
    uint32_t log_n;                   /* book=1: the thread's own log ... */
    uint32_t log[WL2_LOG];
    uint64_t count;                   /* ... and its count */
    _Atomic uint64_t *dense;          /* record_bytes=8: the state words alone */
} wl2_table;

/* One op: the handle, its record, the generation check, the CAS. The CAS
 * adds 1 below the generation, so every repetition finds it unchanged. */
/* The next handle in the shuffled order. */
static inline uint64_t wl2_next_handle(wl2_table *t)
{
    uint64_t h = t->handles[t->order[t->at]];
    t->at = t->at + 1 == t->n ? 0 : t->at + 1;
    return h;
}

/* The generation compared and the CAS, on state word w of handle h. */
static inline bool wl2_cas(_Atomic uint64_t *w, uint64_t h)
{
    uint64_t v = atomic_load_explicit(w, memory_order_acquire);
    if ((v >> WL2_GEN_SHIFT) != (h >> WL2_GEN_SHIFT))
        return false;
    return atomic_compare_exchange_strong_explicit(w, &v, v + 1, memory_order_seq_cst,
                                                   memory_order_acquire);
}

static inline bool wl2_cancel_one(wl2_table *t, uint32_t *idx)
{
    uint64_t h = wl2_next_handle(t);
    *idx = (uint32_t)h;
    return wl2_cas(&t->recs[*idx].state, h);
}

/* wl2_cancel_one on the state words apart (record_bytes=8). */
static inline bool wl2_cancel_one_dense(wl2_table *t)
{
    uint64_t h = wl2_next_handle(t);
    return wl2_cas(&t->dense[(uint32_t)h], h);
}

__attribute__((noinline)) static uint64_t loop_wl2_cancel_dense(void *ctx, uint64_t n)
{
    wl2_table *t = ctx;
    uint64_t won = 0;
    for (uint64_t i = 0; i < n; i++)
        won += wl2_cancel_one_dense(t);
    return won;
}

__attribute__((noinline)) static uint64_t loop_wl2_cancel(void *ctx, uint64_t n)
{
    wl2_table *t = ctx;
    uint64_t won = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t idx;
        won += wl2_cancel_one(t, &idx);
    }
    return won;
}

__attribute__((noinline)) static uint64_t loop_wl2_cancel_book(void *ctx, uint64_t n)
{
    wl2_table *t = ctx;
    uint64_t won = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t idx;
        if (wl2_cancel_one(t, &idx)) {
            t->log[t->log_n++ & (WL2_LOG - 1)] = idx; /* wraps: no hand-over */
            t->count++;
            won++;
        }
    }
    return won;
}

/* A table on huge pages where they may be asked for, as the library's
 * record table asks (records.c): the floor is the best case. */
static void *wl2_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        die("out of memory for wl2_cancel");
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint; may do nothing */
#endif
    return p;
}

static void measure_wl2_cancel_size(uint32_t n, unsigned reps)
{
    wl2_table *t = calloc(1, sizeof *t);
    if (!t)
        die("out of memory for wl2_cancel");
    t->n = n;
    size_t rec_bytes = (size_t)n * sizeof *t->recs;
    t->recs = wl2_map(rec_bytes);
    t->handles = malloc((size_t)n * sizeof *t->handles);
    t->order = malloc((size_t)n * sizeof *t->order);
    if (!t->recs || !t->handles || !t->order)
        die("out of memory for wl2_cancel");
    uint64_t seed = 11;
    sattolo_shuffle(t->order, n, &seed);
    for (uint32_t i = 0; i < n; i++) { /* every page resident before timing */
        t->handles[i] = (uint64_t)1 << WL2_GEN_SHIFT | i;
        atomic_store_explicit(&t->recs[i].state, (uint64_t)1 << WL2_GEN_SHIFT,
                              memory_order_relaxed);
    }
    char name[64];
    snprintf(name, sizeof name, "wl2_cancel records=%" PRIu32 " book=0", n);
    print_floor(name, "ns_per_op", time_per_op(loop_wl2_cancel, t, n, reps), "ns");
    snprintf(name, sizeof name, "wl2_cancel records=%" PRIu32 " book=1", n);
    print_floor(name, "ns_per_op", time_per_op(loop_wl2_cancel_book, t, n, reps), "ns");
    keep(t->count + t->log[0]);
    munmap(t->recs, rec_bytes);
    size_t dense_bytes = (size_t)n * sizeof *t->dense;
    t->dense = wl2_map(dense_bytes);
    for (uint32_t i = 0; i < n; i++)
        atomic_store_explicit(&t->dense[i], (uint64_t)1 << WL2_GEN_SHIFT, memory_order_relaxed);
    t->at = 0;
    snprintf(name, sizeof name, "wl2_cancel records=%" PRIu32 " book=0 record_bytes=8", n);
    print_floor(name, "ns_per_op", time_per_op(loop_wl2_cancel_dense, t, n, reps), "ns");
    munmap(t->dense, dense_bytes);
    free(t->handles);
    free(t->order);
    free(t);
}

static void measure_wl2_cancel(const floor_sizes *sz)
{
    measure_wl2_cancel_size(sz->wl2_records[0], sz->reps);
    measure_wl2_cancel_size(sz->wl2_records[1], sz->reps);
}

/* ---- 10. WL6's touch ----------------------------------------------------------- */

#define TOUCH_RECORDS 100000u

typedef struct touch_record {
    _Atomic uint64_t state;
    uint64_t seq;
    _Atomic uint64_t deadline;
    uint64_t cb, arg;
} touch_record;

_Static_assert(sizeof(touch_record) == 40, "a record is 40 bytes, as tw_record");

typedef struct toucher {
    touch_record *recs;
    uint64_t ops, seed;
    bool prefetch;
    _Atomic uint32_t *ready;
    _Atomic uint64_t t0, t1;       /* read by main after pthread_join */
} toucher;

#if defined(__x86_64__)
#include <cpuid.h>
static bool cpu_has_prefetchw(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & bit_PRFCHW);
}

static inline void prefetchw(const void *p)
{
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
}
#else
static bool cpu_has_prefetchw(void)
{
    return false;
}

static inline void prefetchw(const void *p)
{
    (void)p;
}
#endif

static void *wl6_touch_run(void *arg)
{
    toucher *t = arg;
    /* relaxed: a start line; nothing is published through it. */
    atomic_fetch_add_explicit(t->ready, 1, memory_order_relaxed);
    while (atomic_load_explicit(t->ready, memory_order_relaxed) < 2)
        ;
    uint64_t seed = t->seed, t0 = now_ns();
    for (uint64_t i = 0; i < t->ops; i++) {
        touch_record *r = &t->recs[rng_next(&seed) % TOUCH_RECORDS];
        if (t->prefetch) {
            prefetchw(&r->state);
            prefetchw(&r->deadline);
        }
        /* The library's orders: acquire, the lease's CAS, a relaxed store
         * under it, the release's CAS (src/service.c, src/records.c). */
        uint64_t v = atomic_load_explicit(&r->state, memory_order_acquire);
        while (!atomic_compare_exchange_weak_explicit(&r->state, &v, v | 1,
                                                      memory_order_seq_cst,
                                                      memory_order_acquire))
            v &= ~(uint64_t)1; /* the other thread holds it: wait for its release */
        atomic_store_explicit(&r->deadline, t0 + i, memory_order_relaxed);
        atomic_store_explicit(&r->state, (v & ~(uint64_t)1) + 2, memory_order_seq_cst);
    }
    /* relaxed: main reads them after pthread_join. */
    atomic_store_explicit(&t->t0, t0, memory_order_relaxed);
    atomic_store_explicit(&t->t1, now_ns(), memory_order_relaxed);
    return NULL;
}

/* One repetition: million touches a second over both threads. */
static double wl6_touch_once(touch_record *recs, uint64_t ops, bool prefetch, const int cpu[2])
{
    _Atomic uint32_t ready;
    atomic_init(&ready, 0);
    toucher t[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        t[i] = (toucher){ .recs = recs, .ops = ops, .seed = 0x7000u + (uint64_t)i,
                          .prefetch = prefetch, .ready = &ready };
        thread_start(&th[i], wl6_touch_run, &t[i], cpu[i], "wl6_touch");
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    uint64_t a0 = atomic_load_explicit(&t[0].t0, memory_order_relaxed);
    uint64_t b0 = atomic_load_explicit(&t[1].t0, memory_order_relaxed);
    uint64_t a1 = atomic_load_explicit(&t[0].t1, memory_order_relaxed);
    uint64_t b1 = atomic_load_explicit(&t[1].t1, memory_order_relaxed);
    uint64_t ns = (a1 > b1 ? a1 : b1) - (a0 < b0 ? a0 : b0);
    return (double)(2 * ops) / (double)ns * 1e3;
}

static void measure_wl6_touch(const floor_sizes *sz)
{
    int cpu[2];
    if (!two_cpus(cpu)) {
        fprintf(stderr, "twfloor: wl6_touch: needs two CPUs, skipped\n");
        printf("FLOOR wl6_touch prefetch=0 mtouches_per_s=n/a M/s\n");
        printf("FLOOR wl6_touch prefetch=1 mtouches_per_s=n/a M/s\n");
        return;
    }
    touch_record *recs = calloc(TOUCH_RECORDS, sizeof *recs);
    if (!recs)
        die("out of memory for wl6_touch");
    for (int prefetch = 0; prefetch <= 1; prefetch++) {
        char name[48];
        snprintf(name, sizeof name, "wl6_touch prefetch=%d", prefetch);
        if (prefetch && !cpu_has_prefetchw()) {
            printf("FLOOR %s mtouches_per_s=n/a M/s\n", name);
            continue;
        }
        double m[MAX_REPS];
        for (unsigned r = 0; r < sz->reps; r++)
            m[r] = wl6_touch_once(recs, sz->touch_ops, prefetch, cpu);
        print_floor(name, "mtouches_per_s", spread_of(m, sz->reps), "M/s");
    }
    free(recs);
}

/* ---- main ------------------------------------------------------------------------ */

static void usage(FILE *to)
{
    fprintf(to, "usage: twfloor [--quick]\n");
}

int main(int argc, char **argv)
{
    const floor_sizes *sz = &full_sizes;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            sz = &quick_sizes;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "twfloor: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    uint64_t t0 = now_ns();
    measure_clocks(sz);
    measure_private_atomics(sz);
    measure_chase(sz);
    measure_pingpong(sz);
    measure_wl6_touch(sz);
    measure_futex_wake(sz);
    measure_burst_run(sz);
    measure_first_touch(sz);
    measure_random_cas(sz);
    measure_wl2_cancel(sz);
    fprintf(stderr, "twfloor: done in %.1f s (checksum %" PRIu64 ")\n",
            (double)(now_ns() - t0) / 1e9, atomic_load_explicit(&sink, memory_order_relaxed));
    return 0;
}
