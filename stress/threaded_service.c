/*
 * threaded_service: producers, workers, periodic timers and a concurrent
 * tw_stop against one MONOTONIC service.
 *
 *     threaded_service [threads=4] [iterations=200000] [seconds=$TW_STRESS_SECONDS|3]
 *                      [workers=2] [tick_us=250] [seed]
 *
 * threads producers arm one-shot timers (up to `iterations` each, spread
 * over the run) and
 * periodic ones, cancel them (tw_cancel, tw_cancel_sync), reschedule
 * them, and keep going until they see the service stopped. Callbacks run on
 * the cursor (workers 0) or on the pool; some arm child timers, periodic
 * ones cancel themselves after a few runs. Two stopper threads call tw_stop
 * at a random point of the second half of the run, while everything else
 * is still going on (the second call must wait for the first).
 *
 * Checked, per timer:
 *   one-shot   fired + cancelled-OK + dropped == 1, never early (callback's
 *              tw_now() >= tw_now() before the last successful arming +
 *              its delay); refused (TW_ESHUTDOWN) timers: none of the three
 *   periodic   cancelled-OK + dropped == 1; runs never overlap; run k (from
 *              0) starts no earlier than first deadline + k * period; no run
 *              starts after tw_cancel_sync returned or after a cancel from
 *              its own callback; at most one after a plain tw_cancel returned
 *   cancel_sync no run of the timer in progress when it returns, and the
 *              runs' plain writes visible (TSan checks the ordering)
 *   tw_stop    no callback starts after it returned; on_pending runs on a
 *              thread inside tw_stop, at most once per timer; after the
 *              first TW_ESHUTDOWN a producer never gets TW_OK again
 * and the library's counters equal the records' sums, pending == 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stress_common.h"

#include "internal.h" /* tw__rare_total, tw__check */

#define LIVE_MAX 256     /* one-shots a producer keeps handles of */
#define PLIVE_MAX 12     /* periodic timers a producer keeps at once */

enum { PM_ONESHOT, PM_SELF, PM_CANCEL, PM_SYNC, PM_NONE };
enum { CD_NONE = 0, CD_PLAIN = 1, CD_SYNC = 2, CD_SELF = 3 };

typedef struct ts_rec {
    /* Written before the arming call (the callback and on_pending read them). */
    uint64_t lb0;             /* tw_now() before the call + first delay */
    uint64_t period;          /* 0: one-shot */
    uint32_t self_after;      /* PM_SELF: cancel itself in this run (1-based) */
    uint8_t mode;             /* PM_* */
    uint8_t child;
    /* Written through tw_schedule's out, before the callback may run. */
    tw_timer handle;
    /* Owner (arming thread) only, read by main after everything ended. */
    int sched_rc;
    uint64_t lb;              /* one-shot: lower bound of the last arming's deadline */
    uint32_t reschedules;
    /* Shared. */
    _Atomic uint32_t cancelled;  /* cancel / cancel_sync said OK */
    _Atomic uint32_t fired;      /* runs started (callback entries) */
    _Atomic uint32_t dropped;    /* on_pending calls */
    _Atomic uint32_t in_cb;      /* a run is executing */
    _Atomic uint32_t overlap;    /* entries that found another run executing */
    _Atomic uint32_t early;      /* periodic runs before their lower bound */
    _Atomic uint32_t after_stop; /* entries after tw_stop returned */
    _Atomic uint32_t cancel_done;/* CD_*: which cancel has returned OK */
    _Atomic uint32_t after_cancel; /* entries after a plain cancel returned OK */
    _Atomic uint32_t after_sync; /* entries after cancel_sync / self-cancel returned */
    _Atomic uint64_t fire_now;   /* one-shot: tw_now() at the callback */
    _Atomic uint32_t bad_handle;
    uint64_t payload;            /* plain: every run writes its number (1-based) */
} ts_rec;

typedef struct producer {
    pthread_t th;
    int id;
    st_rng rng;
    st_arena recs;
    ts_rec *live[LIVE_MAX];
    size_t nlive;
    ts_rec *plive[PLIVE_MAX];
    size_t nplive;
    bool saw_shutdown;
    uint64_t scheduled;          /* one-shots armed (any result) */
    uint64_t ops, refused;
} producer;

/* Child records: armed by callbacks on library threads. Each such thread
 * gets its own arena, hung on a global list by a CAS push. */
typedef struct arena_node {
    st_arena a;
    st_rng rng;
    struct arena_node *next;
} arena_node;

static tw_service *g_s;
static uint64_t g_tick;
static uint64_t g_iterations;
static uint64_t g_seed;
static uint64_t g_start_ns, g_span_ns; /* the run, CLOCK_MONOTONIC */
static pthread_barrier_t g_barrier;
static _Atomic int g_stop_begun;      /* a stopper is about to call tw_stop (seq_cst) */
static _Atomic int g_stop_returned;   /* a tw_stop call has returned (seq_cst) */
static _Atomic(arena_node *) g_arenas;
static _Atomic uint32_t g_arena_ids;
static _Atomic uint64_t g_pending_calls_outside_stop;
static ts_rec g_dummy;                /* arg of calls that must be refused */
static _Thread_local arena_node *t_arena;
static _Thread_local bool t_in_stop;

static arena_node *my_arena(void)
{
    if (!t_arena) {
        arena_node *n = calloc(1, sizeof *n);
        if (!n) {
            perror("calloc");
            exit(2);
        }
        st_arena_init(&n->a, sizeof(ts_rec));
        st_rng_seed(&n->rng, g_seed, 10000 + atomic_fetch_add(&g_arena_ids, 1));
        /* release: main walks the list after every thread is joined anyway. */
        n->next = atomic_load_explicit(&g_arenas, memory_order_relaxed);
        while (!atomic_compare_exchange_weak_explicit(&g_arenas, &n->next, n,
                                                      memory_order_release,
                                                      memory_order_relaxed)) {
        }
        t_arena = n;
    }
    return t_arena;
}

/* ---- delays ------------------------------------------------------------------ */

static uint64_t ts_delay(st_rng *r)
{
    uint64_t p = st_below(r, 100);
    if (p < 10)
        return 0;
    if (p < 70)
        return st_below(r, 20) * g_tick + st_below(r, g_tick);
    if (p < 90)
        return (20 + st_below(r, 400)) * g_tick + st_below(r, g_tick);
    return 1000000000ull + st_below(r, 9000000000ull); /* left for tw_stop */
}

/* ---- callbacks ----------------------------------------------------------------- */

static void ts_callback(tw_timer t, void *arg);

static void ts_arm_child(void)
{
    arena_node *n = my_arena();
    ts_rec *c = st_arena_new(&n->a);
    uint64_t delay = st_below(&n->rng, 10) * g_tick;
    c->child = 1;
    c->mode = PM_ONESHOT;
    uint64_t before = tw_now(g_s);
    c->lb0 = before + delay;
    c->lb = c->lb0;
    c->sched_rc = tw_schedule(g_s, delay, NULL, NULL, NULL); /* EINVAL: cb NULL */
    if (c->sched_rc != TW_EINVAL && c->sched_rc != TW_ESHUTDOWN)
        st_fail("tw_schedule with a NULL callback: %s", tw_strerror(c->sched_rc));
    c->sched_rc = tw_schedule(g_s, delay, ts_callback, c, &c->handle);
    if (c->sched_rc != TW_OK && c->sched_rc != TW_ESHUTDOWN)
        st_fail("tw_schedule from a callback: %s", tw_strerror(c->sched_rc));
}

/* The callback of every timer. Race: runs of one periodic timer on several
 * workers (must not overlap), a run against the cancel / cancel_sync /
 * tw_stop of its own timer, child arming against tw_stop. */
static void ts_callback(tw_timer t, void *arg)
{
    ts_rec *r = arg;
    /* acq_rel: the previous run's release of in_cb must be seen here. */
    if (atomic_exchange_explicit(&r->in_cb, 1, memory_order_acq_rel) != 0)
        atomic_fetch_add_explicit(&r->overlap, 1, memory_order_relaxed);
    uint64_t now = tw_now(g_s);
    if (atomic_load(&g_stop_returned)) /* seq_cst: pairs with the stopper's store */
        atomic_fetch_add_explicit(&r->after_stop, 1, memory_order_relaxed);
    uint32_t cd = atomic_load(&r->cancel_done); /* seq_cst: pairs with the canceller */
    if (cd == CD_PLAIN)
        atomic_fetch_add_explicit(&r->after_cancel, 1, memory_order_relaxed);
    else if (cd == CD_SYNC || cd == CD_SELF)
        atomic_fetch_add_explicit(&r->after_sync, 1, memory_order_relaxed);
    if (t != r->handle)
        atomic_fetch_add_explicit(&r->bad_handle, 1, memory_order_relaxed);
    uint32_t n = atomic_fetch_add_explicit(&r->fired, 1, memory_order_relaxed);
    r->payload = (uint64_t)n + 1; /* plain: a cancel_sync caller reads it */
    arena_node *an = my_arena();

    if (r->period == 0) {
        atomic_store_explicit(&r->fire_now, now, memory_order_relaxed);
        if (n != 0)
            st_fail("one-shot %#" PRIx64 " ran twice", t);
        uint64_t p = st_below(&an->rng, 16);
        if (p == 0 && tw_cancel(g_s, t) != TW_ENOENT)
            st_fail("tw_cancel of a running one-shot from its callback was not ENOENT");
        if (p == 1) {
            int rc = tw_reschedule(g_s, t, g_tick);
            if (rc != TW_ENOENT && !(rc == TW_ESHUTDOWN && atomic_load(&g_stop_begun)))
                st_fail("tw_reschedule of a running one-shot from its callback: %s",
                        tw_strerror(rc));
        }
        if (p == 2 && tw_cancel_sync(g_s, t) != TW_EDEADLK)
            st_fail("tw_cancel_sync from its own callback was not EDEADLK");
        if (p == 3 && !r->child)
            ts_arm_child();
    } else {
        if (now < r->lb0 + (uint64_t)n * r->period)
            atomic_fetch_add_explicit(&r->early, 1, memory_order_relaxed);
        if (r->mode == PM_SELF && n + 1 == r->self_after) {
            if (tw_cancel_sync(g_s, t) != TW_EDEADLK)
                st_fail("tw_cancel_sync from its own periodic callback was not EDEADLK");
            int rc = tw_cancel(g_s, t);
            if (rc == TW_OK) {
                atomic_fetch_add_explicit(&r->cancelled, 1, memory_order_relaxed);
                atomic_store(&r->cancel_done, CD_SELF);
            } else if (rc != TW_ENOENT || !atomic_load(&g_stop_begun)) {
                st_fail("periodic self-cancel: %s", tw_strerror(rc));
            }
        }
        uint64_t p = st_below(&an->rng, 8);
        if (p == 0)
            st_sleep_ns(st_below(&an->rng, 3 * g_tick)); /* overrun: skipped runs */
        else if (p == 1)
            sched_yield();
    }
    /* release: pairs with the next run's exchange and cancel_sync's check. */
    atomic_store_explicit(&r->in_cb, 0, memory_order_release);
}

/* Race: on_pending against producers still cancelling the same timers. */
static void ts_on_pending(tw_timer t, void *arg)
{
    ts_rec *r = arg;
    if (!t_in_stop)
        atomic_fetch_add_explicit(&g_pending_calls_outside_stop, 1, memory_order_relaxed);
    if (t != r->handle)
        atomic_fetch_add_explicit(&r->bad_handle, 1, memory_order_relaxed);
    /* Plain reads of what was written before scheduling: ordered by the
     * library (on_pending sees every write made before the timer was armed). */
    if (r->mode > PM_NONE || (r->mode == PM_ONESHOT) != (r->period == 0))
        st_fail("on_pending: record of %#" PRIx64 " not visible", t);
    if (atomic_load_explicit(&r->dropped, memory_order_relaxed) != 0)
        st_fail("on_pending twice for %#" PRIx64, t);
    atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
}

/* ---- producers ------------------------------------------------------------------ */

static void note_rc(producer *p, int rc, const char *what)
{
    if (rc == TW_ESHUTDOWN) {
        p->saw_shutdown = true;
        return;
    }
    st_fail("producer %d: %s: %s", p->id, what, tw_strerror(rc));
}

/* Race: arming against the cursor's drain and against tw_stop (a timer
 * refused with TW_ESHUTDOWN must never run nor reach on_pending). */
static void prod_schedule(producer *p)
{
    /* Spread the `iterations` arming calls over the run, so that producers
     * are still arming when tw_stop comes. */
    uint64_t el = st_mono_ns() - g_start_ns;
    if (p->scheduled >= g_iterations ||
        (el < g_span_ns && p->scheduled > (uint64_t)((double)g_iterations * el / g_span_ns)))
        return;
    ts_rec *r = st_arena_new(&p->recs);
    uint64_t delay = ts_delay(&p->rng);
    int stopped_before = atomic_load(&g_stop_returned);
    r->mode = PM_ONESHOT;
    uint64_t before = tw_now(g_s);
    r->lb0 = before + delay;
    r->lb = r->lb0;
    r->sched_rc = tw_schedule(g_s, delay, ts_callback, r, &r->handle);
    p->scheduled++;
    if (r->sched_rc == TW_OK) {
        if (p->saw_shutdown || stopped_before)
            st_fail("producer %d: tw_schedule OK after the service stopped", p->id);
        if (p->nlive == LIVE_MAX)
            p->live[st_below(&p->rng, LIVE_MAX)] = p->live[--p->nlive];
        p->live[p->nlive++] = r;
    } else {
        p->refused++;
        note_rc(p, r->sched_rc, "tw_schedule");
    }
}

/* Race: a periodic timer's re-arm (after each run) against producers and
 * the stop. */
static void prod_schedule_periodic(producer *p)
{
    if (p->nplive == PLIVE_MAX)
        return;
    ts_rec *r = st_arena_new(&p->recs);
    uint64_t first = st_below(&p->rng, 10) * g_tick + st_below(&p->rng, g_tick);
    r->period = (2 + st_below(&p->rng, 15)) * g_tick;
    r->mode = (uint8_t)(PM_SELF + st_below(&p->rng, 4));
    r->self_after = 1 + (uint32_t)st_below(&p->rng, 20);
    uint64_t before = tw_now(g_s);
    r->lb0 = before + first;
    r->sched_rc = tw_schedule_every(g_s, first, r->period, ts_callback, r, &r->handle);
    if (r->sched_rc == TW_OK) {
        if (p->saw_shutdown)
            st_fail("producer %d: tw_schedule_every OK after TW_ESHUTDOWN", p->id);
        p->plive[p->nplive++] = r;
    } else {
        p->refused++;
        note_rc(p, r->sched_rc, "tw_schedule_every");
    }
}

/* Race: cancel against the cursor claiming the timer and the worker
 * starting it; cancel_sync against a run in progress. */
static void prod_cancel(producer *p, bool sync)
{
    size_t i = st_below(&p->rng, p->nlive);
    ts_rec *r = p->live[i];
    p->live[i] = p->live[--p->nlive];
    int stop_begun = atomic_load(&g_stop_begun);
    int rc = sync ? tw_cancel_sync(g_s, r->handle) : tw_cancel(g_s, r->handle);
    if (rc == TW_OK) {
        atomic_fetch_add_explicit(&r->cancelled, 1, memory_order_relaxed);
        return;
    }
    if (rc != TW_ENOENT) {
        st_fail("producer %d: tw_cancel%s: %s", p->id, sync ? "_sync" : "", tw_strerror(rc));
        return;
    }
    if (!sync)
        return;
    /* ENOENT from cancel_sync: the run started and has finished (or tw_stop
     * took the timer). acquire: pairs with the callback's release of in_cb. */
    if (atomic_load_explicit(&r->in_cb, memory_order_acquire))
        st_fail("producer %d: one-shot callback running after tw_cancel_sync returned", p->id);
    uint32_t fired = atomic_load_explicit(&r->fired, memory_order_relaxed);
    if (r->payload != fired) /* plain read: ordered by tw_cancel_sync's return */
        st_fail("producer %d: cancel_sync returned, payload %" PRIu64 " != runs %u",
                p->id, r->payload, fired);
    if (fired == 0 && !stop_begun && !atomic_load(&g_stop_begun))
        st_fail("producer %d: tw_cancel_sync ENOENT on a pending one-shot", p->id);
}

/* Race: the deadline lease against the drain (later) and re-placement
 * against the claim (earlier). */
static void prod_reschedule(producer *p)
{
    size_t i = st_below(&p->rng, p->nlive);
    ts_rec *r = p->live[i];
    uint64_t delay = ts_delay(&p->rng);
    uint64_t before = tw_now(g_s);
    int rc = tw_reschedule(g_s, r->handle, delay);
    if (rc == TW_OK) {
        r->lb = before + delay;
        r->reschedules++;
    } else if (rc == TW_ENOENT) {
        p->live[i] = p->live[--p->nlive];
    } else {
        note_rc(p, rc, "tw_reschedule");
    }
}

/* Race: cancel of a periodic timer against its run on a worker and its
 * re-arm; cancel_sync must leave no run in progress. */
static void prod_cancel_periodic(producer *p)
{
    size_t i = st_below(&p->rng, p->nplive);
    ts_rec *r = p->plive[i];
    if (r->mode == PM_NONE) {         /* left for tw_stop; forget some */
        if (st_below(&p->rng, 8) == 0)
            p->plive[i] = p->plive[--p->nplive];
        return;
    }
    if (r->mode == PM_SELF) {
        /* it cancels itself; forget it once it has */
        if (atomic_load(&r->cancel_done) == CD_SELF)
            p->plive[i] = p->plive[--p->nplive];
        return;
    }
    p->plive[i] = p->plive[--p->nplive];
    if (r->mode == PM_CANCEL) {
        int rc = tw_cancel(g_s, r->handle);
        if (rc == TW_OK) {
            atomic_fetch_add_explicit(&r->cancelled, 1, memory_order_relaxed);
            atomic_store(&r->cancel_done, CD_PLAIN); /* seq_cst: the callback's load */
        } else if (rc != TW_ENOENT || !atomic_load(&g_stop_begun)) {
            st_fail("producer %d: tw_cancel periodic: %s", p->id, tw_strerror(rc));
        }
        return;
    }
    int rc = tw_cancel_sync(g_s, r->handle);
    if (rc == TW_OK)
        atomic_fetch_add_explicit(&r->cancelled, 1, memory_order_relaxed);
    else if (rc != TW_ENOENT || !atomic_load(&g_stop_begun))
        st_fail("producer %d: tw_cancel_sync periodic: %s", p->id, tw_strerror(rc));
    atomic_store(&r->cancel_done, CD_SYNC); /* seq_cst: the callback's load */
    /* acquire: pairs with the last run's release of in_cb. */
    if (atomic_load_explicit(&r->in_cb, memory_order_acquire))
        st_fail("producer %d: periodic callback running after tw_cancel_sync returned", p->id);
    uint32_t fired = atomic_load_explicit(&r->fired, memory_order_relaxed);
    if (r->payload != fired) /* plain read: ordered by tw_cancel_sync's return */
        st_fail("producer %d: periodic cancel_sync returned, payload %" PRIu64 " != runs %u",
                p->id, r->payload, fired);
}

/* Producer thread body. Races: arming, cancel, cancel_sync and reschedule
 * against the cursor's drain, the workers' runs and tw_stop (see each
 * operation above); after the stop, its calls against the stop's sweep. */
static void *producer_main(void *arg)
{
    producer *p = arg;
    uint64_t after = 0;
    pthread_barrier_wait(&g_barrier);
    for (;;) {
        if (atomic_load_explicit(&g_stop_returned, memory_order_relaxed) && ++after > 300)
            break; /* keep going a little after the stop: ENOENT / ESHUTDOWN paths */
        p->ops++;
        uint64_t x = st_below(&p->rng, 1000);
        if (x < 20)
            prod_schedule_periodic(p);
        else if (x < 60 && p->nplive)
            prod_cancel_periodic(p);
        else if (x < 500 || p->nlive == 0)
            prod_schedule(p);
        else if (x < 700)
            prod_cancel(p, false);
        else if (x < 760)
            prod_cancel(p, true);
        else if (x < 990)
            prod_reschedule(p);
        else {
            tw_stats st;
            tw_stats_get(g_s, &st);
            (void)tw_lateness_quantile(g_s, 0.99);
        }
        if ((p->ops & 15) == 0)
            sched_yield(); /* leave some CPU to the cursor and workers */
    }
    return NULL;
}

/* ---- stoppers ---------------------------------------------------------------------- */

typedef struct stopper {
    pthread_t th;
    int id;
    uint64_t at_ns;   /* CLOCK_MONOTONIC time to call tw_stop */
} stopper;

/* Race: tw_stop against everything (producers arming, cancelling and
 * rescheduling, callbacks running and arming children, cancel_sync
 * waiting); stopper 1 races stopper 0 (the second call waits). */
static void *stopper_main(void *arg)
{
    stopper *st = arg;
    pthread_barrier_wait(&g_barrier);
    uint64_t now = st_mono_ns();
    if (st->at_ns > now)
        st_sleep_ns(st->at_ns - now);
    t_in_stop = true;
    atomic_store(&g_stop_begun, 1); /* seq_cst: producers' and callbacks' loads */
    int rc = tw_stop(g_s, ts_on_pending);
    t_in_stop = false;
    if (rc != TW_OK)
        st_fail("stopper %d: tw_stop: %s", st->id, tw_strerror(rc));
    atomic_store(&g_stop_returned, 1); /* seq_cst: callbacks' loads */
    if (tw_schedule(g_s, 0, ts_callback, &g_dummy, NULL) != TW_ESHUTDOWN)
        st_fail("stopper %d: tw_schedule after tw_stop returned was not ESHUTDOWN", st->id);
    return NULL;
}

/* ---- accounting ---------------------------------------------------------------------- */

typedef struct totals {
    uint64_t timers, periodic, children, scheduled, refused, fired, cancelled, dropped,
        rescheduled, runs_periodic, after_cancel;
} totals;

static void account(ts_rec *r, totals *t, const char *who, size_t idx)
{
    uint32_t fired = atomic_load(&r->fired), dropped = atomic_load(&r->dropped);
    uint32_t cancelled = atomic_load(&r->cancelled);
    t->timers++;
    t->periodic += r->period != 0;
    t->children += r->child;
    if (atomic_load(&r->bad_handle))
        st_fail("%s #%zu: callback/on_pending received another handle", who, idx);
    if (atomic_load(&r->overlap))
        st_fail("%s #%zu %#" PRIx64 ": %u overlapping runs", who, idx, r->handle,
                atomic_load(&r->overlap));
    if (atomic_load(&r->after_stop))
        st_fail("%s #%zu %#" PRIx64 ": %u runs started after tw_stop returned", who, idx,
                r->handle, atomic_load(&r->after_stop));
    if (atomic_load(&r->in_cb))
        st_fail("%s #%zu: callback still running at the end", who, idx);
    if (r->sched_rc != TW_OK) {
        t->refused++;
        if (fired || dropped || cancelled)
            st_fail("%s #%zu: refused (%s) timer fired %u dropped %u cancelled %u", who, idx,
                    tw_strerror(r->sched_rc), fired, dropped, cancelled);
        return;
    }
    t->scheduled++;
    t->fired += fired;
    t->cancelled += cancelled;
    t->dropped += dropped;
    t->rescheduled += r->reschedules;
    if (r->period == 0) {
        uint64_t fire_now = atomic_load(&r->fire_now);
        if (fired + cancelled + dropped != 1)
            st_fail("%s #%zu %#" PRIx64 ": fired %u + cancelled %u + dropped %u != 1"
                    " (resched %u)", who, idx, r->handle, fired, cancelled, dropped,
                    r->reschedules);
        if (fired && fire_now < r->lb)
            st_fail("%s #%zu %#" PRIx64 ": early by %" PRIu64 " ns (resched %u)", who, idx,
                    r->handle, r->lb - fire_now, r->reschedules);
        return;
    }
    t->runs_periodic += fired;
    t->after_cancel += atomic_load(&r->after_cancel);
    if (cancelled + dropped != 1)
        st_fail("%s #%zu periodic mode %u %#" PRIx64 ": cancelled %u + dropped %u != 1"
                " (runs %u)", who, idx, r->mode, r->handle, cancelled, dropped, fired);
    if (atomic_load(&r->early))
        st_fail("%s #%zu periodic %#" PRIx64 ": %u early runs", who, idx, r->handle,
                atomic_load(&r->early));
    if (atomic_load(&r->after_sync))
        st_fail("%s #%zu periodic mode %u %#" PRIx64 ": %u runs after cancel_sync /"
                " self-cancel returned", who, idx, r->mode, r->handle,
                atomic_load(&r->after_sync));
    if (atomic_load(&r->after_cancel) > 1)
        st_fail("%s #%zu periodic %#" PRIx64 ": %u runs after tw_cancel returned OK", who,
                idx, r->handle, atomic_load(&r->after_cancel));
}

int main(int argc, char **argv)
{
    uint64_t nthreads = st_arg(argc, argv, 1, 4);
    g_iterations = st_arg(argc, argv, 2, 200000);
    double seconds = st_arg_seconds(argc, argv, 3);
    uint64_t workers = st_arg(argc, argv, 4, 2);
    uint64_t tick_us = st_arg(argc, argv, 5, 250);
    g_seed = st_arg(argc, argv, 6, st_seed_default());
    if (nthreads < 1 || nthreads > 256 || tick_us < 1 || tick_us > 1000000) {
        fprintf(stderr, "threads: 1 .. 256, tick_us: 1 .. 1000000\n");
        return 2;
    }
    printf("threaded_service: threads %" PRIu64 " iterations %" PRIu64 " seconds %.1f"
           " workers %" PRIu64 " tick_us %" PRIu64 " seed %" PRIu64 "\n",
           nthreads, g_iterations, seconds, workers, tick_us, g_seed);
    fflush(stdout);

    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MONOTONIC;
    cfg.tick_ns = tick_us * 1000;
    cfg.wheel_slots = 16;
    cfg.slot_capacity = 2;
    cfg.workers = (uint32_t)workers;
    int rc = tw_create(&cfg, &g_s);
    if (rc != TW_OK) {
        fprintf(stderr, "tw_create: %s\n", tw_strerror(rc));
        return 2;
    }
    g_tick = cfg.tick_ns;

    producer *prod = calloc(nthreads, sizeof *prod);
    stopper stop[2];
    st_rng rng;
    st_rng_seed(&rng, g_seed, 999);
    uint64_t start = g_start_ns = st_mono_ns();
    uint64_t span = g_span_ns = (uint64_t)(seconds * 1e9);
    stop[0].at_ns = start + span / 2 + st_below(&rng, span / 2 + 1);
    stop[1].at_ns = stop[0].at_ns + st_below(&rng, 2000000);
    pthread_barrier_init(&g_barrier, NULL, (unsigned)nthreads + 3);
    for (uint64_t i = 0; i < nthreads; i++) {
        prod[i].id = (int)i;
        st_rng_seed(&prod[i].rng, g_seed, i);
        st_arena_init(&prod[i].recs, sizeof(ts_rec));
        st_start(&prod[i].th, producer_main, &prod[i]);
    }
    for (int i = 0; i < 2; i++) {
        stop[i].id = i;
        st_start(&stop[i].th, stopper_main, &stop[i]);
    }
    pthread_barrier_wait(&g_barrier);

    for (int i = 0; i < 2; i++)
        pthread_join(stop[i].th, NULL);
    for (uint64_t i = 0; i < nthreads; i++)
        pthread_join(prod[i].th, NULL);

    rc = tw_stop(g_s, ts_on_pending); /* idempotent: nothing left to hand over */
    if (rc != TW_OK)
        st_fail("third tw_stop: %s", tw_strerror(rc));
    char buf[512];
    if (tw__check(g_s, buf, sizeof buf) != 0)
        st_fail("tw__check after tw_stop: %s", buf);
    tw_stats st;
    tw_stats_get(g_s, &st);
    uint64_t rare[TW_RARE_COUNT];
    for (int i = 0; i < TW_RARE_COUNT; i++)
        rare[i] = tw__rare_total(g_s, i);
    uint64_t q99 = tw_lateness_quantile(g_s, 0.99);
    tw_destroy(g_s); /* joins every library thread: their writes are ours now */

    totals t = { 0 };
    uint64_t ops = 0;
    for (uint64_t i = 0; i < nthreads; i++) {
        for (size_t j = 0; j < prod[i].recs.n; j++)
            account(st_arena_get(&prod[i].recs, j), &t, "producer timer", j);
        ops += prod[i].ops;
    }
    for (arena_node *n = atomic_load(&g_arenas); n; n = n->next)
        for (size_t j = 0; j < n->a.n; j++)
            account(st_arena_get(&n->a, j), &t, "child timer", j);
    if (atomic_load(&g_pending_calls_outside_stop))
        st_fail("on_pending ran outside tw_stop %" PRIu64 " times",
                atomic_load(&g_pending_calls_outside_stop));

    printf("ops %" PRIu64 "; timers %" PRIu64 " (periodic %" PRIu64 ", children %" PRIu64
           "): scheduled %" PRIu64 " refused %" PRIu64 " fired %" PRIu64 " (periodic runs %"
           PRIu64 ") cancelled %" PRIu64 " dropped %" PRIu64 " rescheduled %" PRIu64
           "; runs after a plain cancel %" PRIu64 "\n",
           ops, t.timers, t.periodic, t.children, t.scheduled, t.refused, t.fired,
           t.runs_periodic, t.cancelled, t.dropped, t.rescheduled, t.after_cancel);
    printf("library: scheduled %" PRIu64 " fired %" PRIu64 " cancelled %" PRIu64
           " dropped %" PRIu64 " rescheduled %" PRIu64 " pending %" PRIu64 " ticks %" PRIu64
           " overflowed %" PRIu64 " max lateness %" PRIu64 " us, p99 <= %" PRIu64 " us\n",
           st.scheduled, st.fired, st.cancelled, st.dropped, st.rescheduled, st.pending,
           st.ticks, st.overflowed, st.max_lateness_ns / 1000, q99 / 1000);
    printf("rare paths:");
    for (int i = 0; i < TW_RARE_COUNT; i++)
        printf(" %s %" PRIu64, tw__rare_name(i), rare[i]);
    printf("\n");

    if (st.pending != 0)
        st_fail("stats.pending %" PRIu64 " after tw_stop", st.pending);
    if (st.scheduled != t.scheduled || st.fired != t.fired || st.cancelled != t.cancelled ||
        st.dropped != t.dropped || st.rescheduled != t.rescheduled)
        st_fail("library counters differ from the records' accounting (above)");

    for (uint64_t i = 0; i < nthreads; i++)
        st_arena_free(&prod[i].recs);
    for (arena_node *n = atomic_load(&g_arenas), *next; n; n = next) {
        next = n->next;
        st_arena_free(&n->a);
        free(n);
    }
    free(prod);
    pthread_barrier_destroy(&g_barrier);

    if (st_failed()) {
        printf("FAILED: %" PRIu64 " violations (seed %" PRIu64 ")\n", st_failed(), g_seed);
        return 1;
    }
    printf("OK\n");
    return 0;
}
