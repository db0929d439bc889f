/*
 * twbench: the six workloads of shared/bench/WORKLOADS.md, run against every
 * implementation behind the operations table of twbench.h: this library
 * twice, with defaults and configured for the workload (impl_timerwheel.c),
 * a mutex + min-heap + condvar baseline (heap_timer.c) and libevent 2.1
 * (impl_libevent.c). Netty's HashedWheelTimer and java.util.Timer run the
 * same workloads in Java (peers/netty/), Go's runtime timers in Go
 * (peers/go/); bench/run.sh runs everything and prints one table.
 *
 *   twbench [--impl NAME[,NAME...]]... [--wl LIST] [--repeat N] [--p P] [--n N]
 *           [--workers W] [--quick]
 *
 *   --impl    timerwheel, timerwheel-cfg, heap, libevent or all (default
 *             all); repeatable
 *   --wl      workloads, e.g. 1,3,5 or WL2 (default 1,1b,2,3,4,5,6); 1b is
 *             WL1 armed and cancelled in blocks of 16 with the batch calls
 *             (tw_schedule_many, tw_cancel_many): timerwheel columns only,
 *             the others print n/a
 *   --repeat  run each selected workload N times (default 1)
 *   --p       WL1 and WL1b with P = 1, 2 or 8 producers only (default all
 *             three)
 *   --n       WL2 at this N only (run.sh runs each N in a fresh process, so
 *             that memory freed by one size does not hide the next's RSS)
 *   --workers callback threads of timerwheel (0: callbacks on the cursor)
 *             and the heap (default 2, the table's); each line then names
 *             the count in its impl (impl=timerwheel@w0), so that
 *             run.sh's sweep (bench/run.sh, "workers") stays out of the table
 *   --quick   scaled-down sizes and durations, for a smoke run
 *
 * Output: one line per figure on stdout, `WLn name param=value figure=value
 * unit`, impl=NAME being the first param. Notes go to stderr. Every
 * workload checks its own correctness condition; when it fails, twbench says
 * FAIL on stderr and exits 1 at once: a fast wrong answer is not a result.
 * All times are CLOCK_MONOTONIC.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "twbench.h"

#define MS UINT64_C(1000000)
#define SEC UINT64_C(1000000000)

static const bench_impl *const all_impls[] = {
    &bench_impl_timerwheel, &bench_impl_timerwheel_cfg, &bench_impl_heap, &bench_impl_libevent,
};
#define N_IMPLS (sizeof all_impls / sizeof all_impls[0])

/* Workload sizes: full (WORKLOADS.md) and --quick. */
typedef struct sizes {
    uint64_t wl1_k;            /* iterations per producer */
    uint64_t wl2_n[2];         /* pending timers */
    uint64_t wl3_n;            /* timers, over wl3_span_ns, 4 threads */
    uint64_t wl3_span_ns;
    uint64_t wl3_max_delay_ns;
    uint64_t wl4_ns;           /* idle wall time */
    uint64_t wl5_n;            /* timers in the burst */
    uint64_t wl6_sessions;
    uint64_t wl6_ns;           /* touching time */
} sizes;

static const sizes full_sizes = {
    .wl1_k = 2000000, .wl2_n = { 1000000, 10000000 },
    .wl3_n = 1000000, .wl3_span_ns = 1 * SEC, .wl3_max_delay_ns = 2 * SEC,
    .wl4_ns = 10 * SEC, .wl5_n = 1000000, .wl6_sessions = 100000, .wl6_ns = 5 * SEC,
};
static const sizes quick_sizes = {
    .wl1_k = 200000, .wl2_n = { 100000, 1000000 },
    .wl3_n = 100000, .wl3_span_ns = SEC / 2, .wl3_max_delay_ns = SEC / 2,
    .wl4_ns = 2 * SEC, .wl5_n = 100000, .wl6_sessions = 10000, .wl6_ns = 1 * SEC,
};
static const sizes *sz = &full_sizes;
static uint64_t wl2_only_n;    /* --n: WL2 at this N only */
static unsigned wl1_only_p;    /* --p: WL1 and WL1b with this P only */

#define WL1_RING 1024
#define WL3_THREADS 4
#define WL4_TIMERS 10000
#define WL5_BASE_DELAY_NS (200 * MS)
#define WL5_WORKERS 2
#define WL6_THREADS 4
#define WL6_TIMEOUT_NS (30 * SEC)
#define MAX_THREADS 8

/* ---- helpers --------------------------------------------------------------- */

static void fail(const char *wl, const bench_impl *im, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

static void fail(const char *wl, const bench_impl *im, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "twbench: FAIL %s impl=%s: ", wl, im->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        fprintf(stderr, "twbench: out of memory (%zu x %zu)\n", n, size);
        exit(2);
    }
    return p;
}

/* working_set: the most timers the workload has in use at once (bench_cfg). */
/* --workers: callback threads of the implementations that have a pool
 * (timerwheel: 0 runs callbacks on the cursor; the heap: at least 1). */
static unsigned bench_workers = WL5_WORKERS;

static void *create_or_die(const char *wl, const bench_impl *im, uint64_t tick_ns,
                           uint64_t working_set)
{
    bench_cfg cfg = { .tick_ns = tick_ns, .workers = bench_workers, .max_timers = working_set };
    void *svc = im->create(&cfg);
    if (!svc)
        fail(wl, im, "create failed");
    return svc;
}

/* splitmix64: small, fast, good enough to draw delays and indices. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
    return lo + rng_next(s) % (hi - lo + 1);
}

static void sleep_until(uint64_t abs_ns)
{
    struct timespec ts = bench_ns_to_timespec(abs_ns);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void sleep_ns(uint64_t ns)
{
    sleep_until(bench_now_ns() + ns);
}

static uint64_t rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu %lu", &size, &resident) != 2) {
        fprintf(stderr, "twbench: cannot read /proc/self/statm\n");
        exit(2);
    }
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static double secs(uint64_t ns)
{
    return (double)ns / 1e9;
}

/* Starts n threads on fn(args[i]) behind one barrier and joins them. */
typedef struct team {
    pthread_barrier_t start;
    pthread_t th[MAX_THREADS];
    unsigned n;
} team;

static void team_run(team *t, unsigned n, void *(*fn)(void *), void *args, size_t argsize)
{
    t->n = n;
    pthread_barrier_init(&t->start, NULL, n);
    for (unsigned i = 0; i < n; i++) {
        if (pthread_create(&t->th[i], NULL, fn, (char *)args + i * argsize) != 0) {
            fprintf(stderr, "twbench: cannot start a thread\n");
            exit(2);
        }
    }
    for (unsigned i = 0; i < n; i++)
        pthread_join(t->th[i], NULL);
    pthread_barrier_destroy(&t->start);
}

static atomic_uint_fast64_t fired;     /* callbacks that must not run */

static void count_fire(uint64_t handle, void *arg)
{
    (void)handle;
    (void)arg;
    atomic_fetch_add_explicit(&fired, 1, memory_order_relaxed);
}

/* ---- WL1 churn --------------------------------------------------------------- */

/* A WL1 timer may only fire if its producer stalled for longer than the
 * timer's delay (>= 100 ms) between scheduling it and cancelling it 1024
 * operations later: on an oversubscribed, shared machine that happens. To
 * tell such a stall from an implementation firing early, each producer
 * reads the clock once per WL1_BATCH iterations and remembers, per ring
 * slot, the batch and delay of the timer in it; a failed cancel is then
 * judged afterwards: possible only if batch_time[cancel batch + 1] -
 * batch_time[schedule batch] >= delay. A run with only such failures is
 * retried (the figure must come from a run where nothing fired); any other
 * failure is a bug and fails at once. */
#define WL1_BATCH 64
#define WL1_MAX_FAILS 65536
#define WL1_ATTEMPTS 10

typedef struct wl1_fail {
    uint32_t sched_batch, cancel_batch;
    uint64_t delay;
} wl1_fail;

typedef struct wl1_arg {
    const bench_impl *im;
    void *svc;
    team *team;
    uint64_t seed;
    uint64_t t_start, t_end;
    uint64_t sched_ok, sched_fail, cancel_ok, cancel_fail;
    uint64_t *batch_time;          /* clock at the start of each batch, + end */
    wl1_fail fails[WL1_MAX_FAILS];
} wl1_arg;

typedef struct wl1_ring {
    uint64_t handle[WL1_RING];
    uint64_t delay[WL1_RING];
    uint32_t batch[WL1_RING];
} wl1_ring;

/* A failed cancel of ring slot `slot` in clock batch `batch`, for the
 * stall check. */
static void wl1_record_fail(wl1_arg *a, const wl1_ring *r, unsigned slot, uint32_t batch)
{
    if (a->cancel_fail < WL1_MAX_FAILS)
        a->fails[a->cancel_fail] = (wl1_fail){ r->batch[slot], batch, r->delay[slot] };
    a->cancel_fail++;
}

static void wl1_cancel(wl1_arg *a, const wl1_ring *r, unsigned slot, uint32_t batch)
{
    if (a->im->cancel(a->svc, r->handle[slot]))
        a->cancel_ok++;
    else
        wl1_record_fail(a, r, slot, batch);
}

static void *wl1_producer(void *p)
{
    wl1_arg *a = p;
    wl1_ring *r = xcalloc(1, sizeof *r);
    uint64_t n = 0, k = sz->wl1_k;
    uint32_t batch = 0;
    pthread_barrier_wait(&a->team->start);
    a->t_start = bench_now_ns();
    for (uint64_t i = 0; i < k; i++) {
        if (i % WL1_BATCH == 0)
            a->batch_time[batch = (uint32_t)(i / WL1_BATCH)] = bench_now_ns();
        uint64_t delay = rng_range(&a->seed, 100 * MS, 10 * SEC);
        uint64_t h = a->im->schedule(a->svc, delay, count_fire, NULL);
        if (!h) {
            a->sched_fail++;
            continue;
        }
        a->sched_ok++;
        unsigned slot = (unsigned)(n++ % WL1_RING);
        if (r->handle[slot])
            wl1_cancel(a, r, slot, batch);   /* the oldest handle */
        r->handle[slot] = h;
        r->delay[slot] = delay;
        r->batch[slot] = batch;
    }
    a->batch_time[++batch] = bench_now_ns();
    for (unsigned i = 0; i < WL1_RING; i++)
        if (r->handle[i])
            wl1_cancel(a, r, i, batch);
    a->t_end = a->batch_time[batch + 1] = bench_now_ns();
    free(r);
    return NULL;
}

/* ---- WL1b churn in batches of 16 ------------------------------------------------ */

/* WL1 with the batch calls (issue 14): each producer arms WL1B_N timers with
 * one schedule_many (one clock reading for the block), cancels the WL1B_N
 * oldest handles of its ring with one cancel_many, then stores the new
 * block in their place. The same ring of 1024 handles, the same rule (the
 * oldest go once new ones are armed, so a producer has 1024 + 16 in use),
 * the same stall check and retry as WL1 (clock read once per WL1_BATCH
 * timers, i.e. every 4 blocks). ops/s counts timers armed and cancelled, as
 * WL1 does, not calls. A service without batch calls prints n/a. */
#define WL1B_N 16
_Static_assert(WL1_RING % WL1B_N == 0 && WL1_BATCH % WL1B_N == 0,
               "WL1b's blocks tile the ring and the clock batches");

/* Cancels ring slots [slot, slot + WL1B_N) with one call. */
static void wl1b_cancel_block(wl1_arg *a, const wl1_ring *r, unsigned slot, uint32_t batch)
{
    int ok[WL1B_N];
    a->im->cancel_many(a->svc, WL1B_N, &r->handle[slot], ok);
    for (unsigned j = 0; j < WL1B_N; j++) {
        if (ok[j])
            a->cancel_ok++;
        else
            wl1_record_fail(a, r, slot + j, batch);
    }
}

/* Arms one block and stores it at ring slots [slot, slot + WL1B_N), after
 * cancelling the block it replaces. Returns 0, with the block counted as
 * schedule failures and what was armed of it cancelled, on a short count. */
static int wl1b_block(wl1_arg *a, wl1_ring *r, unsigned slot, uint32_t batch)
{
    uint64_t delay[WL1B_N], h[WL1B_N];
    for (unsigned j = 0; j < WL1B_N; j++)
        delay[j] = rng_range(&a->seed, 100 * MS, 10 * SEC);
    int armed = a->im->schedule_many(a->svc, WL1B_N, delay, count_fire, h);
    if (armed != WL1B_N) {
        int ok[WL1B_N];
        a->sched_fail += WL1B_N;
        a->im->cancel_many(a->svc, (size_t)armed, h, ok);
        return 0;
    }
    a->sched_ok += WL1B_N;
    if (r->handle[slot])
        wl1b_cancel_block(a, r, slot, batch);   /* the WL1B_N oldest */
    for (unsigned j = 0; j < WL1B_N; j++) {
        r->handle[slot + j] = h[j];
        r->delay[slot + j] = delay[j];
        r->batch[slot + j] = batch;
    }
    return 1;
}

static void *wl1b_producer(void *p)
{
    wl1_arg *a = p;
    wl1_ring *r = xcalloc(1, sizeof *r);
    uint64_t n = 0, k = sz->wl1_k - sz->wl1_k % WL1B_N;
    uint32_t batch = 0;
    pthread_barrier_wait(&a->team->start);
    a->t_start = bench_now_ns();
    for (uint64_t i = 0; i < k; i += WL1B_N) {
        if (i % WL1_BATCH == 0)
            a->batch_time[batch = (uint32_t)(i / WL1_BATCH)] = bench_now_ns();
        if (wl1b_block(a, r, (unsigned)(n % WL1_RING), batch))
            n += WL1B_N;
    }
    a->batch_time[++batch] = bench_now_ns();
    for (unsigned slot = 0; slot < WL1_RING; slot += WL1B_N)
        if (r->handle[slot])               /* blocks are stored whole */
            wl1b_cancel_block(a, r, slot, batch);
    a->t_end = a->batch_time[batch + 1] = bench_now_ns();
    free(r);
    return NULL;
}

/* How a WL1 run arms and cancels: one timer a call, or blocks of WL1B_N. */
typedef struct wl1_variant {
    const char *wl, *name;        /* the figure's first two words */
    void *(*producer)(void *);
    unsigned extra;               /* timers a producer has in use beyond its ring */
} wl1_variant;

static const wl1_variant wl1_single = { "WL1", "churn", wl1_producer, 1 };
static const wl1_variant wl1_blocks = { "WL1b", "churn16", wl1b_producer, WL1B_N };

/* ---- WL1 and WL1b: runs, checks, figures ------------------------------------------ */

/* 1 if every failed cancel of a may be a legitimate fire (its producer
 * stalled for longer than the timer's delay), -1 if one cannot be (a fire
 * before the delay had passed), 0 if there were too many to check. */
static int wl1_failures_explained(const wl1_arg *a, uint64_t *worst_stall)
{
    if (a->cancel_fail > WL1_MAX_FAILS)
        return 0;
    for (uint64_t i = 0; i < a->cancel_fail; i++) {
        const wl1_fail *f = &a->fails[i];
        uint64_t span = a->batch_time[f->cancel_batch + 1] - a->batch_time[f->sched_batch];
        *worst_stall = span > *worst_stall ? span : *worst_stall;
        if (span < f->delay)
            return -1;
    }
    return 1;
}

/* One attempt; returns 1 with *rate set, or 0 when timers fired that a
 * producer stall explains. */
static int wl1_try(const wl1_variant *v, const bench_impl *im, unsigned p, double *rate)
{
    wl1_arg *args = xcalloc(p, sizeof *args);
    uint64_t batches = sz->wl1_k / WL1_BATCH + 3;
    team t;
    /* Each producer schedules before it cancels its oldest: 1024 + 1 in use
     * (1024 + 16 for WL1b). */
    void *svc = create_or_die(v->wl, im, 1 * MS, (uint64_t)p * (WL1_RING + v->extra));
    atomic_store(&fired, 0);
    for (unsigned i = 0; i < p; i++)
        args[i] = (wl1_arg){ .im = im, .svc = svc, .team = &t, .seed = 0x1000 + i,
                             .batch_time = xcalloc(batches, sizeof(uint64_t)) };
    team_run(&t, p, v->producer, args, sizeof args[0]);
    uint64_t f = atomic_load(&fired);
    im->destroy(svc);
    uint64_t t0 = UINT64_MAX, t1 = 0, ok = 0, sfail = 0, cfail = 0, stall = 0;
    int explained = 1;                 /* as wl1_failures_explained, the worst */
    for (unsigned i = 0; i < p; i++) {
        t0 = args[i].t_start < t0 ? args[i].t_start : t0;
        t1 = args[i].t_end > t1 ? args[i].t_end : t1;
        ok += args[i].sched_ok + args[i].cancel_ok;
        sfail += args[i].sched_fail;
        cfail += args[i].cancel_fail;
        int e = wl1_failures_explained(&args[i], &stall);
        explained = e < explained ? e : explained;
        free(args[i].batch_time);
    }
    free(args);
    if (sfail || cfail != f || explained != 1)
        fail(v->wl, im, "P=%u: %" PRIu64 " schedules failed, %" PRIu64 " cancels failed, %"
             PRIu64 " callbacks ran (all must be 0)%s", p, sfail, cfail, f,
             explained < 0 ? "; a timer fired before its delay had passed" :
             explained == 0 ? "; too many failed cancels to check them" : "");
    if (cfail) {
        fprintf(stderr, "twbench: %s impl=%s P=%u: %" PRIu64 " timers fired because a producer "
                "stalled (up to %.0f ms across 1024 operations); run discarded\n",
                v->wl, im->name, p, cfail, (double)stall / 1e6);
        return 0;
    }
    *rate = (double)ok / secs(t1 - t0);
    return 1;
}

static void wl1_churn(const wl1_variant *v, const bench_impl *im, unsigned p)
{
    double rate = 0;
    for (int attempt = 1; !wl1_try(v, im, p, &rate); attempt++)
        if (attempt == WL1_ATTEMPTS)
            fail(v->wl, im, "P=%u: timers fired in %d runs in a row (producers stalled "
                 "past the 100 ms minimum delay; machine overloaded?)", p, attempt);
    printf("%s %s impl=%s P=%u ops_per_s=%.0f ops/s\n", v->wl, v->name, im->name, p, rate);
    fflush(stdout);
}

/* ---- WL2 pending scale ------------------------------------------------------- */

static void wl2_pending(const bench_impl *im, uint64_t n)
{
    uint64_t *h = xcalloc(n, sizeof *h);
    uint32_t *perm = xcalloc(n, sizeof *perm);
    uint64_t seed = 0x2000;
    for (uint64_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (uint64_t i = n - 1; i > 0; i--) {     /* Fisher-Yates */
        uint64_t j = rng_next(&seed) % (i + 1);
        uint32_t x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    /* Resident before the baseline: write every page through a volatile
     * pointer (a zero memset right after calloc is an optimiser's to drop). */
    for (uint64_t i = 0; i < n; i += 512)
        ((volatile uint64_t *)h)[i] = 0;
    void *svc = create_or_die("WL2", im, 1 * MS, n);
    atomic_store(&fired, 0);
    malloc_trim(0);                            /* hand back what earlier runs freed */
    sleep_ns(50 * MS);
    uint64_t rss0 = rss_bytes();
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        h[i] = im->schedule(svc, rng_range(&seed, 60 * SEC, 3600 * SEC), count_fire, NULL);
        if (!h[i])
            fail("WL2", im, "N=%" PRIu64 ": schedule %" PRIu64 " failed", n, i);
    }
    uint64_t t1 = bench_now_ns();
    sleep_ns(200 * MS);                        /* let background placement settle */
    uint64_t rss1 = rss_bytes();
    uint64_t cfail = 0;
    uint64_t t2 = bench_now_ns();
    for (uint64_t i = 0; i < n; i++)
        cfail += !im->cancel(svc, h[perm[i]]);
    uint64_t t3 = bench_now_ns();
    uint64_t f = atomic_load(&fired);
    im->destroy(svc);
    free(h);
    free(perm);
    if (cfail || f)
        fail("WL2", im, "N=%" PRIu64 ": %" PRIu64 " cancels failed, %" PRIu64
             " callbacks ran (all must be 0)", n, cfail, f);
    printf("WL2 pending impl=%s N=%" PRIu64 " schedule_ops_per_s=%.0f ops/s\n",
           im->name, n, (double)n / secs(t1 - t0));
    printf("WL2 pending impl=%s N=%" PRIu64 " cancel_ops_per_s=%.0f ops/s\n",
           im->name, n, (double)n / secs(t3 - t2));
    printf("WL2 pending impl=%s N=%" PRIu64 " bytes_per_timer=%.1f bytes\n",
           im->name, n, rss1 > rss0 ? (double)(rss1 - rss0) / (double)n : 0.0);
    fflush(stdout);
}

/* ---- WL3 accuracy under load ------------------------------------------------ */

typedef struct wl3_rec {
    uint64_t expected;            /* time read before schedule + delay */
    _Atomic uint64_t start;       /* callback start */
    atomic_uint fires;
} wl3_rec;

static atomic_uint_fast64_t wl3_fired;

static void wl3_cb(uint64_t handle, void *arg)
{
    (void)handle;
    wl3_rec *r = arg;
    atomic_store_explicit(&r->start, bench_now_ns(), memory_order_relaxed);
    atomic_fetch_add_explicit(&r->fires, 1, memory_order_relaxed);
    /* Publishes the record to the main thread's acquire load. */
    atomic_fetch_add_explicit(&wl3_fired, 1, memory_order_release);
}

typedef struct wl3_arg {
    _Alignas(64) const bench_impl *im; /* a line of its own: seed is written per schedule */
    void *svc;
    team *team;
    wl3_rec *recs;                /* this thread's share */
    uint64_t n, seed, sched_fail;
} wl3_arg;

static void *wl3_producer(void *p)
{
    wl3_arg *a = p;
    uint64_t batches = sz->wl3_span_ns / MS;   /* one batch per millisecond */
    pthread_barrier_wait(&a->team->start);
    uint64_t t0 = bench_now_ns();
    uint64_t i = 0;
    for (uint64_t b = 0; b < batches; b++) {
        uint64_t end = a->n * (b + 1) / batches;
        sleep_until(t0 + b * MS);
        for (; i < end; i++) {
            uint64_t delay = rng_range(&a->seed, 1 * MS, sz->wl3_max_delay_ns);
            wl3_rec *r = &a->recs[i];
            r->expected = bench_now_ns() + delay;
            if (!a->im->schedule(a->svc, delay, wl3_cb, r))
                a->sched_fail++;
        }
    }
    return NULL;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static void wl3_accuracy(const bench_impl *im, uint64_t tick_ns)
{
    uint64_t n = sz->wl3_n, per = n / WL3_THREADS;
    n = per * WL3_THREADS;
    wl3_rec *recs = xcalloc(n, sizeof *recs);
    wl3_arg args[WL3_THREADS];
    team t;
    char param[32] = "";
    if (tick_ns != 1 * MS)
        snprintf(param, sizeof param, " tick_us=%" PRIu64, tick_ns / 1000);
    void *svc = create_or_die("WL3", im, tick_ns, n);
    atomic_store(&wl3_fired, 0);
    for (unsigned i = 0; i < WL3_THREADS; i++)
        args[i] = (wl3_arg){ .im = im, .svc = svc, .team = &t, .recs = recs + i * per,
                             .n = per, .seed = 0x3000 + i };
    team_run(&t, WL3_THREADS, wl3_producer, args, sizeof args[0]);
    uint64_t sfail = 0, last = 0;
    for (unsigned i = 0; i < WL3_THREADS; i++)
        sfail += args[i].sched_fail;
    if (sfail)
        fail("WL3", im, "%" PRIu64 " schedules failed", sfail);
    for (uint64_t i = 0; i < n; i++)
        last = recs[i].expected > last ? recs[i].expected : last;
    /* Wait for every callback, then a little longer to catch extra runs. */
    uint64_t give_up = last + 30 * SEC;
    while (atomic_load_explicit(&wl3_fired, memory_order_acquire) < n && bench_now_ns() < give_up)
        sleep_ns(10 * MS);
    sleep_ns(100 * MS);
    uint64_t got = atomic_load_explicit(&wl3_fired, memory_order_acquire);
    im->destroy(svc);
    if (got != n)
        fail("WL3", im, "%" PRIu64 " callbacks ran, expected exactly %" PRIu64, got, n);
    int64_t *late = xcalloc(n, sizeof *late);
    uint64_t early = 0, dup = 0;
    int64_t worst_early = 0;
    for (uint64_t i = 0; i < n; i++) {
        dup += atomic_load_explicit(&recs[i].fires, memory_order_relaxed) != 1;
        late[i] = (int64_t)(atomic_load_explicit(&recs[i].start, memory_order_relaxed) -
                            recs[i].expected);
        if (late[i] < 0) {
            early++;
            worst_early = late[i] < worst_early ? late[i] : worst_early;
        }
    }
    if (dup || early)
        fail("WL3", im, "%" PRIu64 " timers did not run exactly once; %" PRIu64
             " ran early (worst by %" PRId64 " ns)", dup, early, -worst_early);
    qsort(late, n, sizeof *late, cmp_i64);
    static const struct { const char *name; double q; } qs[] = {
        { "lateness_p50", 0.5 }, { "lateness_p99", 0.99 }, { "lateness_p999", 0.999 },
        { "lateness_max", 1.0 },
    };
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        uint64_t k = (uint64_t)(qs[i].q * (double)n + 0.999999);
        k = k == 0 ? 0 : k - 1;
        printf("WL3 accuracy impl=%s%s %s=%.3f ms\n", im->name, param, qs[i].name,
               (double)late[k] / 1e6);
    }
    fflush(stdout);
    free(late);
    free(recs);
}

/* The 100 us tick variant is timerwheel's (both columns): the heap and
 * libevent have no tick (they fire at the deadline itself, as their 1 ms rows
 * show). */
static int has_tick(const bench_impl *im)
{
    /* By its calls, not its address: --workers runs a renamed copy. */
    return im->create == bench_impl_timerwheel.create ||
           im->create == bench_impl_timerwheel_cfg.create;
}

/* n/a lines for a service without a tick, so its column still has the rows. */
static void wl3_no_tick(const bench_impl *im)
{
    static const char *const names[] = { "lateness_p50", "lateness_p99", "lateness_p999",
                                         "lateness_max" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        printf("WL3 accuracy impl=%s tick_us=100 %s=n/a ms\n", im->name, names[i]);
    fflush(stdout);
}

/* ---- WL4 idle cost ------------------------------------------------------------- */

static void wl4_idle(const bench_impl *im)
{
    uint64_t *h = xcalloc(WL4_TIMERS, sizeof *h);
    void *svc = create_or_die("WL4", im, 1 * MS, WL4_TIMERS);
    atomic_store(&fired, 0);
    for (unsigned i = 0; i < WL4_TIMERS; i++)
        if (!(h[i] = im->schedule(svc, 3600 * SEC, count_fire, NULL)))
            fail("WL4", im, "schedule %u failed", i);
    sleep_ns(200 * MS);
    /* CPU time from CLOCK_PROCESS_CPUTIME_ID (exact, every thread); getrusage's
     * times are sampled at the scheduler tick (4 ms here), too coarse for an
     * idle process. Context switches still come from getrusage. */
    struct rusage r0, r1;
    struct timespec c0, c1;
    getrusage(RUSAGE_SELF, &r0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    uint64_t t0 = bench_now_ns();
    sleep_until(t0 + sz->wl4_ns);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    getrusage(RUSAGE_SELF, &r1);
    uint64_t t1 = bench_now_ns();
    uint64_t cfail = 0;
    for (unsigned i = 0; i < WL4_TIMERS; i++)
        cfail += !im->cancel(svc, h[i]);
    uint64_t f = atomic_load(&fired);
    im->destroy(svc);
    free(h);
    if (f || cfail)
        fail("WL4", im, "%" PRIu64 " callbacks ran, %" PRIu64 " cancels failed (must be 0)",
             f, cfail);
    double wall = secs(t1 - t0);
    uint64_t cpu = (uint64_t)(c1.tv_sec - c0.tv_sec) * 1000000000ull +
                   (uint64_t)c1.tv_nsec - (uint64_t)c0.tv_nsec;
    printf("WL4 idle impl=%s cpu_per_wall_s=%.5f s/s\n", im->name, secs(cpu) / wall);
    printf("WL4 idle impl=%s vol_ctxsw_per_s=%.1f switches/s\n", im->name,
           (double)(r1.ru_nvcsw - r0.ru_nvcsw) / wall);
    fflush(stdout);
}

/* ---- WL5 burst fire --------------------------------------------------------------- */

static atomic_uint_fast64_t wl5_count, wl5_first, wl5_last;
static uint64_t wl5_n;

static void wl5_cb(uint64_t handle, void *arg)
{
    (void)handle;
    (void)arg;
    uint64_t c = atomic_fetch_add_explicit(&wl5_count, 1, memory_order_relaxed) + 1;
    if (c == 1)
        atomic_store_explicit(&wl5_first, bench_now_ns(), memory_order_relaxed);
    if (c == wl5_n)
        atomic_store_explicit(&wl5_last, bench_now_ns(), memory_order_relaxed);
}

/* One burst with all deadlines at base + delay_ns. Returns 0 when the
 * scheduling took longer than delay_ns (the burst is not one tick then). */
static int wl5_try(const bench_impl *im, uint64_t delay_ns, double *rate, double *first_ms)
{
    uint64_t n = sz->wl5_n;
    void *svc = create_or_die("WL5", im, 1 * MS, n);
    wl5_n = n;
    atomic_store(&wl5_count, 0);
    atomic_store(&wl5_first, 0);
    atomic_store(&wl5_last, 0);
    uint64_t due = bench_now_ns() + delay_ns, overran = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t now = bench_now_ns();
        if (now >= due) {
            overran = n - i;
            break;
        }
        if (!im->schedule(svc, due - now, wl5_cb, NULL))
            fail("WL5", im, "schedule %" PRIu64 " failed", i);
    }
    uint64_t scheduled = n - overran;
    uint64_t give_up = due + 60 * SEC;
    while (atomic_load(&wl5_count) < scheduled && bench_now_ns() < give_up)
        sleep_ns(5 * MS);
    sleep_ns(100 * MS);
    uint64_t got = atomic_load(&wl5_count);
    im->destroy(svc);
    if (got != scheduled)
        fail("WL5", im, "%" PRIu64 " callbacks ran, expected exactly %" PRIu64, got, scheduled);
    if (overran) {
        fprintf(stderr, "twbench: WL5 impl=%s: scheduling %" PRIu64 " timers took longer than "
                "the %" PRIu64 " ms delay; retrying with twice the delay\n",
                im->name, n, delay_ns / MS);
        return 0;
    }
    uint64_t first = atomic_load(&wl5_first), last = atomic_load(&wl5_last);
    *rate = (double)n / secs(last > first ? last - first : 1);
    /* the deadline is `due` (all share it); a first start before it would
     * be a peer firing early, shown as a negative figure */
    *first_ms = ((double)first - (double)due) / 1e6;
    return 1;
}

static void wl5_burst(const bench_impl *im)
{
    double rate = 0, first_ms = 0;
    uint64_t delay = WL5_BASE_DELAY_NS;
    while (!wl5_try(im, delay, &rate, &first_ms)) {
        delay *= 2;
        if (delay > 20 * SEC)
            fail("WL5", im, "cannot schedule %" PRIu64 " timers within 20 s", sz->wl5_n);
    }
    if (delay != WL5_BASE_DELAY_NS)
        fprintf(stderr, "twbench: WL5 impl=%s: common delay was %" PRIu64 " ms\n", im->name,
                delay / MS);
    printf("WL5 burst impl=%s callbacks_per_s=%.0f callbacks/s\n", im->name, rate);
    printf("WL5 first impl=%s first_callback_after_deadline_ms=%.3f ms\n", im->name, first_ms);
    fflush(stdout);
}

/* ---- WL6 touch --------------------------------------------------------------------- */

typedef struct wl6_session {
    _Atomic uint64_t handle;
    atomic_flag busy;              /* cancel + schedule peers only */
} wl6_session;

/* A thread's own line (or two): a toucher used to update seed and ok here
 * on every touch, and with four threads' args 72 bytes apart each touch
 * wrote a line a thread on the other core also wrote (a 240 ns hand-off
 * on the AMD guest, as much as a touch). The loop now keeps them in
 * locals, as the Go and Java harnesses do; the alignment keeps the
 * results apart as well. */
typedef struct wl6_arg {
    _Alignas(64) const bench_impl *im;
    void *svc;
    team *team;
    wl6_session *sessions;
    uint64_t seed, ok, failed, t_start, t_end;
} wl6_arg;

/* A peer without reschedule: cancel + schedule, one toucher per session at
 * a time (two would each cancel the same handle). */
static int wl6_touch_by_replace(wl6_arg *a, wl6_session *s)
{
    while (atomic_flag_test_and_set_explicit(&s->busy, memory_order_acquire))
        ;
    uint64_t h = atomic_load_explicit(&s->handle, memory_order_relaxed);
    int ok = a->im->cancel(a->svc, h);
    if (ok) {
        h = a->im->schedule(a->svc, WL6_TIMEOUT_NS, count_fire, s);
        atomic_store_explicit(&s->handle, h, memory_order_relaxed);
        ok = h != 0;
    }
    atomic_flag_clear_explicit(&s->busy, memory_order_release);
    return ok;
}

static void *wl6_toucher(void *p)
{
    wl6_arg *a = p;
    uint64_t n = sz->wl6_sessions;
    uint64_t seed = a->seed, ok = 0, failed = 0;
    pthread_barrier_wait(&a->team->start);
    uint64_t start = bench_now_ns();
    uint64_t stop = start + sz->wl6_ns, now = start;
    while (now < stop) {
        for (int k = 0; k < 256; k++) {
            wl6_session *s = &a->sessions[rng_next(&seed) % n];
            int touched = a->im->reschedule
                ? a->im->reschedule(a->svc, atomic_load_explicit(&s->handle, memory_order_relaxed),
                                    WL6_TIMEOUT_NS)
                : wl6_touch_by_replace(a, s);
            if (touched)
                ok++;
            else
                failed++;
        }
        now = bench_now_ns();
    }
    a->seed = seed;
    a->ok = ok;
    a->failed = failed;
    a->t_start = start;
    a->t_end = now;
    return NULL;
}

static void wl6_touch(const bench_impl *im)
{
    uint64_t n = sz->wl6_sessions;
    wl6_session *sessions = xcalloc(n, sizeof *sessions);
    wl6_arg args[WL6_THREADS];
    team t;
    void *svc = create_or_die("WL6", im, 1 * MS, n);
    atomic_store(&fired, 0);
    for (uint64_t i = 0; i < n; i++) {
        atomic_flag_clear(&sessions[i].busy);
        uint64_t h = im->schedule(svc, WL6_TIMEOUT_NS, count_fire, &sessions[i]);
        if (!h)
            fail("WL6", im, "schedule of session %" PRIu64 " failed", i);
        atomic_store(&sessions[i].handle, h);
    }
    for (unsigned i = 0; i < WL6_THREADS; i++)
        args[i] = (wl6_arg){ .im = im, .svc = svc, .team = &t, .sessions = sessions,
                             .seed = 0x6000 + i };
    team_run(&t, WL6_THREADS, wl6_toucher, args, sizeof args[0]);
    uint64_t t0 = UINT64_MAX, t1 = 0, ok = 0, tfail = 0, cfail = 0;
    for (unsigned i = 0; i < WL6_THREADS; i++) {
        t0 = args[i].t_start < t0 ? args[i].t_start : t0;
        t1 = args[i].t_end > t1 ? args[i].t_end : t1;
        ok += args[i].ok;
        tfail += args[i].failed;
    }
    uint64_t timeouts = atomic_load(&fired);
    for (uint64_t i = 0; i < n; i++)
        cfail += !im->cancel(svc, atomic_load(&sessions[i].handle));
    im->destroy(svc);
    free(sessions);
    if (tfail || timeouts || cfail)
        fail("WL6", im, "%" PRIu64 " touches failed, %" PRIu64 " sessions timed out, %" PRIu64
             " final cancels failed (all must be 0)", tfail, timeouts, cfail);
    if (!im->reschedule)
        fprintf(stderr, "twbench: WL6 impl=%s: no reschedule, touched by cancel + schedule\n",
                im->name);
    printf("WL6 touch impl=%s touches_per_s=%.0f touches/s\n", im->name,
           (double)ok / secs(t1 - t0));
    fflush(stdout);
}

/* ---- main ----------------------------------------------------------------------------- */

/* Workloads in the order they run: WORKLOADS.md's six, and WL1b (WL1 in
 * blocks of 16 with the batch calls) after WL1. --wl takes these ids. */
#define WL_1B 7                        /* run_workload's number for WL1b */
static const char *const wl_ids[] = { "1", "1b", "2", "3", "4", "5", "6" };
static const int wl_nums[] = { 1, WL_1B, 2, 3, 4, 5, 6 };
#define N_WLS (sizeof wl_ids / sizeof wl_ids[0])
#define WL_ALL "1,1b,2,3,4,5,6"
_Static_assert(sizeof wl_nums / sizeof wl_nums[0] == N_WLS, "one number per id");

static void usage(void)
{
    fprintf(stderr,
            "usage: twbench [--impl NAME[,NAME...]]... [--wl LIST] [--repeat N] [--p P] [--n N]\n"
            "               [--workers W] [--quick]\n"
            "  --impl    timerwheel, timerwheel-cfg, heap, libevent or all (default all);\n"
            "            repeatable\n"
            "  --wl      workloads, e.g. 1,3,5 or WL2; 1b is WL1 in blocks of 16\n"
            "            (tw_schedule_many, tw_cancel_many) (default " WL_ALL ")\n"
            "  --repeat  run each selected workload N times (default 1)\n"
            "  --p       WL1 and WL1b with P = 1, 2 or 8 producers only (default all three)\n"
            "  --n       WL2 at this N only (default both sizes; a fresh process per N\n"
            "            keeps one size's freed memory out of the next one's RSS)\n"
            "  --workers callback threads of timerwheel (0: on the cursor) and the heap\n"
            "            (default 2); each line then names it: impl=heap@w4\n"
            "  --quick   scaled-down sizes and durations (smoke run)\n");
    exit(2);
}

static void add_impls(const char *list, int chosen[N_IMPLS])
{
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (size_t i = 0; i < N_IMPLS; i++) {
            if (!strcmp(tok, "all") || !strcmp(tok, all_impls[i]->name)) {
                chosen[i] = 1;
                found = 1;
            }
        }
        if (!found) {
            fprintf(stderr, "twbench: unknown implementation '%s'\n", tok);
            usage();
        }
    }
    free(copy);
}

static void add_wls(const char *list, int wl[N_WLS])
{
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strncasecmp(tok, "WL", 2))
            tok += 2;
        size_t w = 0;
        while (w < N_WLS && strcasecmp(tok, wl_ids[w]))
            w++;
        if (w == N_WLS) {
            fprintf(stderr, "twbench: unknown workload '%s'\n", tok);
            usage();
        }
        wl[w] = 1;
    }
    free(copy);
}

static void wl1_each_p(const wl1_variant *v, const bench_impl *im)
{
    static const unsigned wl1_p[] = { 1, 2, 8 };
    for (size_t i = 0; i < sizeof wl1_p / sizeof wl1_p[0]; i++) {
        if (wl1_only_p && wl1_only_p != wl1_p[i])
            continue;
        if (im->schedule_many || v == &wl1_single)
            wl1_churn(v, im, wl1_p[i]);
        else    /* no batch calls: n/a, so the column still has the rows */
            printf("%s %s impl=%s P=%u ops_per_s=n/a ops/s\n", v->wl, v->name, im->name,
                   wl1_p[i]);
    }
    fflush(stdout);
}

static void run_workload(const bench_impl *im, int w)
{
    switch (w) {
    case 1:
        wl1_each_p(&wl1_single, im);
        break;
    case WL_1B:
        wl1_each_p(&wl1_blocks, im);
        break;
    case 2:
        if (wl2_only_n) {
            wl2_pending(im, wl2_only_n);
        } else {
            wl2_pending(im, sz->wl2_n[0]);
            wl2_pending(im, sz->wl2_n[1]);
        }
        break;
    case 3:
        wl3_accuracy(im, 1 * MS);
        if (has_tick(im))
            wl3_accuracy(im, 100 * 1000);  /* the 100 us tick variant */
        else
            wl3_no_tick(im);
        break;
    case 4:
        wl4_idle(im);
        break;
    case 5:
        wl5_burst(im);
        break;
    case 6:
        wl6_touch(im);
        break;
    }
}

int main(int argc, char **argv)
{
    int chosen[N_IMPLS] = { 0 }, any_impl = 0, wl[N_WLS] = { 0 }, any_wl = 0;
    long repeat = 1;
    int workers_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quick")) {
            sz = &quick_sizes;
        } else if (!strcmp(a, "--impl") && i + 1 < argc) {
            add_impls(argv[++i], chosen);
            any_impl = 1;
        } else if (!strcmp(a, "--wl") && i + 1 < argc) {
            add_wls(argv[++i], wl);
            any_wl = 1;
        } else if (!strcmp(a, "--p") && i + 1 < argc) {
            wl1_only_p = (unsigned)strtoul(argv[++i], NULL, 10);
            if (wl1_only_p != 1 && wl1_only_p != 2 && wl1_only_p != 8)
                usage();
        } else if (!strcmp(a, "--n") && i + 1 < argc) {
            wl2_only_n = strtoull(argv[++i], NULL, 10);
            if (wl2_only_n < 2 || wl2_only_n > UINT32_MAX)
                usage();
        } else if (!strcmp(a, "--workers") && i + 1 < argc) {
            char *end;
            unsigned long w = strtoul(argv[++i], &end, 10);
            if (*end || w > 64)
                usage();
            bench_workers = (unsigned)w;
            workers_given = 1;
        } else if (!strcmp(a, "--repeat") && i + 1 < argc) {
            repeat = strtol(argv[++i], NULL, 10);
            if (repeat < 1)
                usage();
        } else {
            usage();
        }
    }
    if (!any_impl)
        add_impls("all", chosen);
    if (!any_wl)
        add_wls(WL_ALL, wl);
    for (size_t i = 0; i < N_IMPLS; i++) {
        if (!chosen[i])
            continue;
        /* With --workers, every line names the count (impl=heap@w4), so
         * that such runs never mix with the table's (2 workers). */
        bench_impl named = *all_impls[i];
        char name[64];
        if (workers_given) {
            snprintf(name, sizeof name, "%s@w%u", named.name, bench_workers);
            named.name = name;
        }
        fprintf(stderr, "twbench: impl=%s (callbacks on: %s)%s\n", named.name,
                named.callbacks_on, sz == &quick_sizes ? " --quick" : "");
        for (size_t w = 0; w < N_WLS; w++)
            for (long r = 0; wl[w] && r < repeat; r++)
                run_workload(&named, wl_nums[w]);
    }
    return 0;
}
