/*
 * batch_foreach: the batch calls (tw_schedule_many, tw_cancel_many) and the
 * walk of pending timers (tw_foreach_pending) racing producers and the
 * drain, on a MANUAL-clock wheel another thread advances (issue 15).
 *
 *     batch_foreach [threads=3] [iterations=-] [seconds=$TW_STRESS_SECONDS|3]
 *                   [wheel_slots=64] [slot_capacity=2] [seed]
 *
 * The threads, and the race each body aims at:
 *
 *   producers (threads)  arm batches of 1 .. 32 one-shots (tw_schedule_many;
 *                        random delays, one in sixteen batches with an
 *                        element beyond tw_max_delay: a partial batch, and
 *                        the call again for the rest answers TW_ERANGE),
 *                        cancel random subsets of their own live handles
 *                        (tw_cancel_many, now and then with a 0 handle or a
 *                        handle twice), and move single timers
 *                        (tw_reschedule): the batch loops against the drain
 *                        claiming and running the same timers, and against
 *                        the walk reading their records.
 *   advancer             tw_advance in steps of 1 .. 64 ticks, one in four
 *                        up to 2064: the drain,
 *                        which runs the callbacks (and frees records that
 *                        producers' next batches reuse under the walk).
 *   walker               tw_foreach_pending over and over: every timer it
 *                        reports was armed (its id was published before the
 *                        batch call), is not known to have ended before the
 *                        walk started (fired or cancelled: each end takes a
 *                        stamp from one counter, which the walker reads
 *                        first), carries the handle, callback and period of
 *                        that arming, and has deadline_ns >= the clock before
 *                        its arming; the walk returns its number of calls.
 *                        The race: the seqlock read of a record against its
 *                        claim, run, cancel, move and reuse.
 *   next_due             tw_next_due over and over (only that it returns:
 *                        its bitmap walk against placements and the drain).
 *
 * Per-timer state lives in per-producer tables indexed by an id that the
 * callback argument carries ((producer + 1) << 48 | id); table chunks are
 * published (release) before their ids are handed out and never move.
 *
 * At the end (every thread joined): a walk of the quiescent service reports
 * exactly the timers neither fired nor cancelled, once each, and as many as
 * stats.pending; tw__check holds; then, after a jump past every deadline,
 * every arming fired exactly once (with its handle, never before the
 * deadline of its last arming or successful move) or was cancelled exactly
 * once (TW_OK), never both; the elements of partial batches after the
 * failing one never ran; stats match our counts and the one-shot identity.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stress_common.h"

#include "internal.h" /* tw__check */

#define TICK       1000ull       /* stress_common: 1 us */
#define BATCH_MAX  32
#define LIVE_SOFT  4096          /* a producer's live timers before it prunes */
#define CHUNK      65536u        /* ids per table chunk */
#define CHUNKS     1024u         /* 64 M ids per producer at most */
#define ID_BITS    48

enum { ARM_NONE = 0, ARM_ARMED = 1, ARM_CANCELLED = 2 };

/* One arming. Fields read by other threads are atomics (relaxed: each is
 * ordered by what the comment says). */
typedef struct bf_arm {
    _Atomic uint64_t handle;   /* producer, after the batch call: out[i]; 0 before */
    _Atomic uint64_t armed_at; /* producer, before the batch call: tw_now() */
    _Atomic uint64_t ended_at; /* end stamp (g_end_clock), 0 while not known ended */
    _Atomic uint64_t got;      /* callback: the handle it was given */
    _Atomic uint64_t fire_now; /* callback: tw_now() at its run */
    _Atomic uint32_t fired;    /* callback runs */
    _Atomic uint32_t seen;     /* reports in the final, quiescent walk */
    uint64_t lb;               /* producer only: deadline lower bound */
    uint8_t state;             /* producer only: ARM_* */
} bf_arm;

typedef struct producer {
    tw_service *s;
    pthread_t th;
    uint32_t index;
    st_rng rng;
    uint64_t deadline_ns;
    bf_arm *_Atomic chunk[CHUNKS]; /* release-published, then ids in it handed out */
    _Atomic uint64_t published;    /* ids below it may be reported (release) */
    uint64_t n;                    /* ids taken (producer only) */
    uint64_t *live;                /* ids armed and not known ended (producer only) */
    size_t nlive, cap_live;
    uint64_t batches, partial, armed, cancel_calls, cancelled, moves, enoent;
} producer;

static producer *g_prod;
static uint64_t g_nprod;
static tw_service *g_s;
static _Atomic uint64_t g_end_clock;   /* stamps: one per known end */
static _Atomic bool g_stop;
static pthread_barrier_t g_start;

/* ---- the table ------------------------------------------------------------ */

static bf_arm *arm_of(producer *p, uint64_t id)
{
    /* Acquire: pairs with the release store that installed the chunk. */
    bf_arm *c = atomic_load_explicit(&p->chunk[id / CHUNK], memory_order_acquire);
    return c ? &c[id % CHUNK] : NULL;
}

static uint64_t new_id(producer *p)
{
    uint64_t id = p->n;
    if (id / CHUNK >= CHUNKS) {
        fprintf(stderr, "batch_foreach: producer %u ran out of ids\n", p->index);
        exit(2);
    }
    if (id % CHUNK == 0) {
        bf_arm *c = calloc(CHUNK, sizeof *c);
        if (!c) {
            perror("calloc");
            exit(2);
        }
        /* Release: the zeroed chunk, before any id in it is published. */
        atomic_store_explicit(&p->chunk[id / CHUNK], c, memory_order_release);
    }
    p->n++;
    return id;
}

static void *arg_of(const producer *p, uint64_t id)
{
    return (void *)(uintptr_t)(((uint64_t)(p->index + 1) << ID_BITS) | id);
}

/* The arming an argument names, or NULL if it names none published. */
static bf_arm *decode(void *arg, producer **pp, uint64_t *idp)
{
    uint64_t a = (uint64_t)(uintptr_t)arg;
    uint64_t pi = a >> ID_BITS, id = a & ((1ull << ID_BITS) - 1);
    if (pi == 0 || pi > g_nprod)
        return NULL;
    producer *p = &g_prod[pi - 1];
    /* Acquire: pairs with the producer's release before its batch call;
     * the library's arming (release) and its walk or run (acquire) carry
     * it to the walker and the callback. */
    if (id >= atomic_load_explicit(&p->published, memory_order_acquire))
        return NULL;
    if (pp)
        *pp = p;
    if (idp)
        *idp = id;
    return arm_of(p, id);
}

/* An end became known: stamp it, once. */
static void mark_ended(bf_arm *a)
{
    /* Seq_cst: the walker's seq_cst load of g_end_clock before its walk
     * either sees this stamp (then the end happened before the walk) or
     * not (then it may report the timer). */
    uint64_t stamp = atomic_fetch_add_explicit(&g_end_clock, 1, memory_order_seq_cst) + 1;
    uint64_t zero = 0;
    atomic_compare_exchange_strong_explicit(&a->ended_at, &zero, stamp,
                                            memory_order_seq_cst, memory_order_relaxed);
}

static void on_fire(tw_timer t, void *arg)
{
    bf_arm *a = decode(arg, NULL, NULL);
    if (!a) {
        st_fail("callback with argument %p: no published arming", arg);
        return;
    }
    /* Relaxed: read back after every thread is joined. */
    atomic_store_explicit(&a->fire_now, tw_now(g_s), memory_order_relaxed);
    atomic_store_explicit(&a->got, t, memory_order_relaxed);
    atomic_fetch_add_explicit(&a->fired, 1, memory_order_relaxed);
    mark_ended(a);
}

/* ---- producers ------------------------------------------------------------ */

static uint64_t random_delay(producer *p)
{
    uint64_t r = st_below(&p->rng, 100);
    if (r < 70)
        return st_below(&p->rng, 200) * TICK + st_below(&p->rng, TICK);
    if (r < 95)
        return (200 + st_below(&p->rng, 20000)) * TICK;
    return st_below(&p->rng, 1000000) * TICK; /* up to 1 s */
}

static void live_add(producer *p, uint64_t id)
{
    if (p->nlive == p->cap_live) {
        p->cap_live = p->cap_live ? 2 * p->cap_live : 1024;
        p->live = realloc(p->live, p->cap_live * sizeof *p->live);
        if (!p->live) {
            perror("realloc");
            exit(2);
        }
    }
    p->live[p->nlive++] = id;
}

/* Move a random live id to the end of the list; returns it (nlive > 0). */
static uint64_t live_pick_to_end(producer *p, size_t from_end)
{
    size_t last = p->nlive - 1 - from_end;
    size_t i = (size_t)st_below(&p->rng, last + 1);
    uint64_t id = p->live[i];
    p->live[i] = p->live[last];
    p->live[last] = id;
    return id;
}

static void do_batch(producer *p)
{
    size_t k = 1 + (size_t)st_below(&p->rng, BATCH_MAX);
    size_t bad = k; /* the element beyond tw_max_delay, if any */
    if (st_below(&p->rng, 16) == 0)
        bad = (size_t)st_below(&p->rng, k);
    uint64_t ids[BATCH_MAX], delays[BATCH_MAX];
    void *args[BATCH_MAX];
    tw_timer out[BATCH_MAX];
    uint64_t max = tw_max_delay(p->s);
    uint64_t before = tw_now(p->s);
    for (size_t i = 0; i < k; i++) {
        ids[i] = new_id(p);
        bf_arm *a = arm_of(p, ids[i]);
        delays[i] = random_delay(p);
        if (i == bad)
            delays[i] = max + 1 + st_below(&p->rng, 1000) * TICK;
        else if (i > bad && st_below(&p->rng, 4) == 0)
            delays[i] = UINT64_MAX; /* after the failure: never looked at */
        args[i] = arg_of(p, ids[i]);
        out[i] = 0x5a5a5a5a5a5a5a5aull;
        /* Relaxed: published by the release store of `published` below. */
        atomic_store_explicit(&a->armed_at, before, memory_order_relaxed);
        a->lb = before + delays[i];
    }
    /* Release: the arms' fields, before the library can report them. */
    atomic_store_explicit(&p->published, p->n, memory_order_release);
    int rc = tw_schedule_many(p->s, k, delays, on_fire, args, out);
    p->batches++;
    int want = bad == k ? (int)k : bad == 0 ? TW_ERANGE : (int)bad;
    if (rc != want)
        st_fail("tw_schedule_many(%zu, bad element %zu) returned %d, expected %d", k, bad, rc,
                want);
    size_t armed = rc > 0 ? (size_t)rc : 0;
    for (size_t i = 0; i < k; i++) {
        bf_arm *a = arm_of(p, ids[i]);
        if (i < armed) {
            if (out[i] == 0 || out[i] == 0x5a5a5a5a5a5a5a5aull)
                st_fail("tw_schedule_many: element %zu of %zu armed, out %#" PRIx64, i, k,
                        out[i]);
            /* Relaxed: the walker compares it when it is not 0. */
            atomic_store_explicit(&a->handle, out[i], memory_order_relaxed);
            a->state = ARM_ARMED;
            live_add(p, ids[i]);
        } else if (out[i] != 0) {
            st_fail("tw_schedule_many: element %zu of %zu (armed %zu) out %#" PRIx64
                    ", expected 0", i, k, armed, out[i]);
        }
    }
    p->armed += armed;
    if (bad < k) {
        p->partial++;
        /* "calling again for the rest returns that error" */
        for (size_t i = bad; i < k; i++)
            out[i] = 0x5a5a5a5a5a5a5a5aull;
        rc = tw_schedule_many(p->s, k - bad, delays + bad, on_fire, args + bad, out + bad);
        if (rc != TW_ERANGE)
            st_fail("tw_schedule_many for the rest returned %d, expected TW_ERANGE", rc);
        for (size_t i = bad; i < k; i++)
            if (out[i] != 0)
                st_fail("tw_schedule_many for the rest: out[%zu] %#" PRIx64, i - bad, out[i]);
    }
}

static void do_cancel(producer *p)
{
    if (p->nlive == 0)
        return;
    size_t m = 1 + (size_t)st_below(&p->rng, BATCH_MAX);
    if (m > p->nlive)
        m = p->nlive;
    tw_timer hs[BATCH_MAX + 2];
    uint64_t ids[BATCH_MAX + 2];
    int rcs[BATCH_MAX + 2];
    for (size_t j = 0; j < m; j++) {
        ids[j] = live_pick_to_end(p, j);
        /* Relaxed: our own store. */
        hs[j] = atomic_load_explicit(&arm_of(p, ids[j])->handle, memory_order_relaxed);
    }
    size_t n = m;
    if (st_below(&p->rng, 8) == 0) { /* one handle twice: one TW_OK at most */
        size_t dup = (size_t)st_below(&p->rng, m);
        ids[n] = ids[dup];
        hs[n++] = hs[dup];
    }
    if (st_below(&p->rng, 8) == 0) {
        ids[n] = UINT64_MAX;
        hs[n++] = 0;
    }
    for (size_t j = 0; j < n; j++)
        rcs[j] = 12345;
    int ok = tw_cancel_many(p->s, n, hs, rcs);
    p->cancel_calls++;
    int count = 0;
    for (size_t j = 0; j < n; j++) {
        if (rcs[j] == TW_OK) {
            count++;
            if (ids[j] == UINT64_MAX) {
                st_fail("tw_cancel_many: handle 0 answered TW_OK");
                continue;
            }
            bf_arm *a = arm_of(p, ids[j]);
            if (a->state == ARM_CANCELLED) {
                st_fail("tw_cancel_many: handle %#" PRIx64 " cancelled twice", hs[j]);
                continue;
            }
            a->state = ARM_CANCELLED;
            mark_ended(a);
            p->cancelled++;
        } else if (rcs[j] == TW_ENOENT) {
            p->enoent++;
        } else {
            st_fail("tw_cancel_many: rcs[%zu] = %d", j, rcs[j]);
        }
    }
    if (ok != count)
        st_fail("tw_cancel_many returned %d, %d TW_OK in rcs", ok, count);
    p->nlive -= m; /* cancelled, or fired already: no longer live */
}

static void do_move(producer *p)
{
    if (p->nlive == 0)
        return;
    uint64_t id = live_pick_to_end(p, 0);
    bf_arm *a = arm_of(p, id);
    uint64_t delay = random_delay(p);
    uint64_t before = tw_now(p->s);
    /* Relaxed: our own store. */
    int rc = tw_reschedule(p->s, atomic_load_explicit(&a->handle, memory_order_relaxed),
                           delay);
    if (rc == TW_OK) {
        a->lb = before + delay;
        p->moves++;
    } else if (rc == TW_ENOENT) {
        p->nlive--; /* it ran (or is about to): no longer ours to move */
    } else {
        st_fail("tw_reschedule: %s", tw_strerror(rc));
    }
}

static void *produce(void *arg)
{
    producer *p = arg;
    pthread_barrier_wait(&g_start);
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed) &&
           st_mono_ns() < p->deadline_ns) {
        uint64_t r = st_below(&p->rng, 100);
        if (p->nlive > LIVE_SOFT)
            r = 60; /* prune: cancel */
        if (r < 50)
            do_batch(p);
        else if (r < 75)
            do_cancel(p);
        else
            do_move(p);
    }
    return NULL;
}

/* ---- advancer, walker, next_due ------------------------------------------- */

typedef struct helper {
    pthread_t th;
    st_rng rng;
    uint64_t rounds, reports;
} helper;

static void *advance(void *arg)
{
    helper *h = arg;
    pthread_barrier_wait(&g_start);
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        uint64_t step = st_below(&h->rng, 4) ? 1 + st_below(&h->rng, 64)
                                              : 64 + st_below(&h->rng, 2000);
        uint64_t to = tw_now(g_s) + step * TICK;
        int rc = tw_advance(g_s, to);
        if (rc != TW_OK)
            st_fail("tw_advance: %s", tw_strerror(rc));
        h->rounds++;
    }
    return NULL;
}

typedef struct walk_ctx {
    uint64_t started;   /* g_end_clock before the walk */
    uint64_t calls;
} walk_ctx;

static void check_report(const tw_timer_info *info, void *ctx)
{
    walk_ctx *w = ctx;
    w->calls++;
    producer *p;
    uint64_t id;
    bf_arm *a = decode(info->arg, &p, &id);
    if (!a) {
        st_fail("walk: timer %#" PRIx64 " with argument %p, no published arming", info->timer,
                info->arg);
        return;
    }
    /* Seq_cst: see mark_ended. The other fields: relaxed, ordered by the
     * library's publication of the arming (see decode). */
    uint64_t ended = atomic_load_explicit(&a->ended_at, memory_order_seq_cst);
    if (ended != 0 && ended <= w->started)
        st_fail("walk: timer %#" PRIx64 " (producer %u id %" PRIu64 ") ended (stamp %" PRIu64
                ") before the walk started (stamp %" PRIu64 ")", info->timer, p->index, id,
                ended, w->started);
    uint64_t h = atomic_load_explicit(&a->handle, memory_order_relaxed);
    if (h != 0 && h != info->timer)
        st_fail("walk: handle %#" PRIx64 " reported with the argument of %#" PRIx64,
                info->timer, h);
    if (info->timer == 0)
        st_fail("walk: handle 0 reported");
    uint64_t armed_at = atomic_load_explicit(&a->armed_at, memory_order_relaxed);
    if (info->deadline_ns < armed_at)
        st_fail("walk: timer %#" PRIx64 " deadline_ns %" PRIu64 " before its arming at %" PRIu64,
                info->timer, info->deadline_ns, armed_at);
    if (info->period_ns != 0)
        st_fail("walk: one-shot %#" PRIx64 " with period_ns %" PRIu64, info->timer,
                info->period_ns);
    if (info->cb != on_fire)
        st_fail("walk: timer %#" PRIx64 " with another callback", info->timer);
}

static void *walker(void *arg)
{
    helper *h = arg;
    pthread_barrier_wait(&g_start);
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        walk_ctx w = {0, 0};
        /* Seq_cst: see mark_ended. */
        w.started = atomic_load_explicit(&g_end_clock, memory_order_seq_cst);
        size_t calls = tw_foreach_pending(g_s, check_report, &w);
        if (calls != w.calls)
            st_fail("tw_foreach_pending returned %zu, fn called %" PRIu64 " times", calls,
                    w.calls);
        h->rounds++;
        h->reports += w.calls;
    }
    return NULL;
}

static void *next_due(void *arg)
{
    helper *h = arg;
    pthread_barrier_wait(&g_start);
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        (void)tw_next_due(g_s);
        h->rounds++;
    }
    return NULL;
}

/* ---- the end ---------------------------------------------------------------- */

static void final_seen(const tw_timer_info *info, void *ctx)
{
    (void)ctx;
    bf_arm *a = decode(info->arg, NULL, NULL);
    if (!a) {
        st_fail("final walk: timer %#" PRIx64 " not ours", info->timer);
        return;
    }
    atomic_fetch_add_explicit(&a->seen, 1, memory_order_relaxed);
}

/* Every arming: fired once xor cancelled once; the rest never ran. */
static void account(producer *p, uint64_t *armed, uint64_t *fired, uint64_t *cancelled,
                    bool quiescent_walk)
{
    for (uint64_t id = 0; id < p->n; id++) {
        bf_arm *a = arm_of(p, id);
        if (!a) { /* below p->n every chunk is installed */
            st_fail("producer %u id %" PRIu64 " has no arming record", p->index, id);
            continue;
        }
        uint32_t f = atomic_load_explicit(&a->fired, memory_order_relaxed);
        uint64_t h = atomic_load_explicit(&a->handle, memory_order_relaxed);
        if (quiescent_walk) {
            uint32_t want = a->state == ARM_ARMED && f == 0;
            uint32_t seen = atomic_load_explicit(&a->seen, memory_order_relaxed);
            if (seen != want)
                st_fail("quiescent walk: producer %u id %" PRIu64 " (%#" PRIx64 ", state %u, "
                        "fired %u) reported %u times", p->index, id, h, a->state, f, seen);
            continue;
        }
        if (a->state == ARM_NONE) {
            if (f != 0)
                st_fail("producer %u id %" PRIu64 ": never armed, ran %u times", p->index, id, f);
            continue;
        }
        uint32_t c = a->state == ARM_CANCELLED;
        if (f + c != 1)
            st_fail("arming %#" PRIx64 ": fired %u, cancelled %u", h, f, c);
        if (f == 1) {
            uint64_t got = atomic_load_explicit(&a->got, memory_order_relaxed);
            uint64_t at = atomic_load_explicit(&a->fire_now, memory_order_relaxed);
            if (got != h)
                st_fail("arming %#" PRIx64 ": its callback got %#" PRIx64, h, got);
            if (at < a->lb)
                st_fail("arming %#" PRIx64 " ran at %" PRIu64 ", before its deadline %" PRIu64,
                        h, at, a->lb);
        }
        *armed += 1;
        *fired += f;
        *cancelled += c;
    }
}

int main(int argc, char **argv)
{
    uint64_t nthreads = st_arg(argc, argv, 1, 3);
    double seconds = st_arg_seconds(argc, argv, 3);
    uint64_t slots = st_arg(argc, argv, 4, 64);
    uint64_t cap = st_arg(argc, argv, 5, 2);
    uint64_t seed = st_arg(argc, argv, 6, st_seed_default());
    printf("batch_foreach: seed %" PRIu64 ", %" PRIu64 " producers, %.1f s, %" PRIu64
           " slots, capacity %" PRIu64 "\n", seed, nthreads, seconds, slots, cap);
    if (nthreads == 0 || nthreads > 64)
        return 2;
    g_s = st_create_manual(slots, cap);
    g_nprod = nthreads;
    g_prod = calloc(nthreads, sizeof *g_prod);
    if (!g_prod)
        return 2;
    helper adv = {0}, walk = {0}, due = {0};
    st_rng_seed(&adv.rng, seed, 1000);
    uint64_t end = st_mono_ns() + (uint64_t)(seconds * 1e9);
    for (uint64_t i = 0; i < nthreads; i++) {
        g_prod[i].s = g_s;
        g_prod[i].index = (uint32_t)i;
        g_prod[i].deadline_ns = end;
        st_rng_seed(&g_prod[i].rng, seed, i);
    }
    pthread_barrier_init(&g_start, NULL, (unsigned)nthreads + 3);
    for (uint64_t i = 0; i < nthreads; i++)
        st_start(&g_prod[i].th, produce, &g_prod[i]);
    st_start(&adv.th, advance, &adv);
    st_start(&walk.th, walker, &walk);
    st_start(&due.th, next_due, &due);
    for (uint64_t i = 0; i < nthreads; i++)
        pthread_join(g_prod[i].th, NULL);
    atomic_store(&g_stop, true);
    pthread_join(adv.th, NULL);
    pthread_join(walk.th, NULL);
    pthread_join(due.th, NULL);
    pthread_barrier_destroy(&g_start);

    /* Quiescent: the walk reports exactly the timers still pending. */
    uint64_t armed = 0, fired = 0, cancelled = 0;
    size_t reported = tw_foreach_pending(g_s, final_seen, NULL);
    for (uint64_t i = 0; i < nthreads; i++)
        account(&g_prod[i], &armed, &fired, &cancelled, true);
    tw_stats st;
    tw_stats_get(g_s, &st);
    if (reported != st.pending)
        st_fail("quiescent walk: %zu reports, stats.pending %" PRIu64, reported, st.pending);
    char why[512];
    if (tw__check(g_s, why, sizeof why) != 0)
        st_fail("tw__check: %s", why);
    /* Past every deadline (1 s at most): everything left fires. */
    if (tw_advance(g_s, tw_now(g_s) + 2 * 1000000000ull) != TW_OK)
        st_fail("jump tw_advance");
    if (tw__check(g_s, why, sizeof why) != 0)
        st_fail("tw__check after the jump: %s", why);
    if (tw_foreach_pending(g_s, final_seen, NULL) != 0)
        st_fail("a walk after the jump reported timers");
    uint64_t moves = 0, batches = 0, partial = 0, cancel_calls = 0, ours_armed = 0;
    for (uint64_t i = 0; i < nthreads; i++) {
        account(&g_prod[i], &armed, &fired, &cancelled, false);
        moves += g_prod[i].moves;
        batches += g_prod[i].batches;
        partial += g_prod[i].partial;
        cancel_calls += g_prod[i].cancel_calls;
        ours_armed += g_prod[i].armed;
    }
    tw_stats_get(g_s, &st);
    if (armed != ours_armed)
        st_fail("%" PRIu64 " armings accounted, %" PRIu64 " armed", armed, ours_armed);
    if (st.scheduled != armed || st.fired != fired || st.cancelled != cancelled ||
        st.rescheduled != moves || st.pending != 0 || st.dropped != 0)
        st_fail("stats: scheduled %" PRIu64 " (ours %" PRIu64 "), fired %" PRIu64 " (ours %"
                PRIu64 "), cancelled %" PRIu64 " (ours %" PRIu64 "), rescheduled %" PRIu64
                " (ours %" PRIu64 "), pending %" PRIu64 ", dropped %" PRIu64, st.scheduled,
                armed, st.fired, fired, st.cancelled, cancelled, st.rescheduled, moves,
                st.pending, st.dropped);
    if (st.scheduled != st.fired + st.cancelled + st.dropped + st.pending)
        st_fail("stats identity: scheduled %" PRIu64 " != fired + cancelled + dropped + pending",
                st.scheduled);
    printf("batch_foreach: %" PRIu64 " batches (%" PRIu64 " partial), %" PRIu64 " armed, %"
           PRIu64 " fired, %" PRIu64 " cancelled in %" PRIu64 " tw_cancel_many, %" PRIu64
           " moves; %" PRIu64 " advances, %" PRIu64 " walks (%" PRIu64 " reports), %" PRIu64
           " tw_next_due\n", batches, partial, armed, fired, cancelled, cancel_calls, moves,
           adv.rounds, walk.rounds, walk.reports, due.rounds);
    if (walk.rounds == 0 || walk.reports == 0 || partial == 0 || cancelled == 0)
        st_fail("a path was never taken: %" PRIu64 " walks, %" PRIu64 " reports, %" PRIu64
                " partial batches, %" PRIu64 " cancelled", walk.rounds, walk.reports, partial,
                cancelled);
    tw_destroy(g_s);
    for (uint64_t i = 0; i < nthreads; i++) {
        for (unsigned c = 0; c < CHUNKS; c++)
            free(atomic_load(&g_prod[i].chunk[c]));
        free(g_prod[i].live);
    }
    free(g_prod);
    if (st_failed()) {
        fprintf(stderr, "batch_foreach: %" PRIu64 " failures\n", st_failed());
        return 1;
    }
    return 0;
}
