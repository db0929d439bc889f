/*
 * manual_producers: many producers against one MANUAL-clock wheel that
 * another thread advances at the same time.
 *
 *     manual_producers [threads=4] [iterations=1000000] [seconds=$TW_STRESS_SECONDS|3]
 *                      [wheel_slots=4] [slot_capacity=1] [seed]
 *
 * threads producers each arm up to `iterations` one-shot timers (until
 * `seconds` have passed), cancel and reschedule random ones of their own,
 * and try stale handles. One advancer thread moves the clock in small
 * random steps with tw_advance (callbacks run there), a second one jumps in
 * now and then (two tw_advance callers must serialise). Tiny wheels (4
 * slots, 1 entry per slot) make cascades, overflow segments and closed
 * slots the common case rather than the rare one.
 *
 * Every timer has an accounting record (the callback's arg). At the end,
 * with every thread joined: a last tw_advance, tw__check, tw_stop with
 * on_pending, and then per timer
 *     fired + cancelled-OK + dropped == 1       (refused timers: 0)
 *     callback's tw_now() >= tw_now() before the arming call + delay
 *                                               (never early, last arming)
 *     a dropped timer was not overdue at the quiescent final advance
 *                                               (ub + tick > final now)
 * and the library's counters equal ours. Exit 0 only if all of it holds.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stress_common.h"

#include "internal.h" /* tw__rare_total, tw__check */

#define LIVE_MAX 512 /* timers a producer keeps handles of, for cancel/reschedule */
/* Pacing: a producer waits for the clock to move after `ops_per_tick`
 * operations, a value it redraws every PACE_EVERY operations from 8 ..
 * 1024: from "the clock races ahead, everything fires at once" to "the
 * wheel fills up, cancels and reschedules win". Both ends find bugs. */
#define PACE_EVERY 4096

typedef struct mp_rec {
    tw_timer handle;          /* written through tw_schedule's out: before the
                                 callback can run (library guarantee) */
    uint64_t lb;              /* owner: tw_now() before the last successful
                                 arming + its delay: the deadline is >= lb */
    uint64_t ub;              /* owner: tw_now() after that call + delay: >= deadline */
    uint64_t n_after;         /* owner: tw_now() after that call */
    uint64_t prev_lb;         /* owner: lb of the arming before (diagnostics) */
    int sched_rc;             /* owner: what tw_schedule returned */
    uint32_t reschedules;     /* owner: successful tw_reschedule calls */
    uint8_t cancelled;        /* owner: tw_cancel returned TW_OK */
    uint8_t child;            /* armed by a callback */
    uint8_t late_armed;       /* armed during the final advance (no overdue check) */
    _Atomic uint32_t fired;   /* callback runs (release: producers test staleness) */
    _Atomic uint32_t dropped; /* on_pending calls */
    _Atomic uint64_t fire_now;/* tw_now() seen by the callback */
    _Atomic uint64_t fire_prev;/* clock read before the tw_advance that ran it */
    _Atomic uint32_t bad_handle; /* callback/on_pending got another handle */
} mp_rec;

typedef struct producer {
    pthread_t th;
    int id;
    st_rng rng;
    st_arena recs;
    mp_rec *live[LIVE_MAX];
    size_t nlive;
    mp_rec *hot;              /* a timer due within a few ticks, for prod_touch */
    uint64_t sched_ok, sched_refused, cancel_ok, resched_ok, stale_checks;
} producer;

typedef struct advancer {
    pthread_t th;
    int id;
    st_rng rng;
    st_arena children;        /* records armed by callbacks on this thread */
    uint64_t advances, einval, children_ok;
} advancer;

static tw_service *g_s;
static uint64_t g_tick;               /* tick_ns */
static uint64_t g_max_delay;
static uint64_t g_iterations;
static uint64_t g_end_ns;             /* CLOCK_MONOTONIC end of the run */
static pthread_barrier_t g_barrier;
static _Atomic bool g_producers_done; /* advancers stop after producers */
static bool g_final_phase;            /* main, after every thread was joined */
static mp_rec g_dummy;                /* arg of calls that must be refused */
static _Thread_local st_arena *t_children; /* where a callback puts child records */
static _Thread_local st_rng *t_rng;
static _Thread_local uint64_t t_prev; /* tw_now() read before this thread's tw_advance */

/* ---- delays ---------------------------------------------------------------- */

/* Mostly a few hundred ticks, some 0, some exact ticks, some huge (they are
 * dropped at stop), rarely exactly the maximum. */
static uint64_t mp_delay(st_rng *r)
{
    uint64_t p = st_below(r, 1000);
    if (p < 100)
        return 0;
    if (p < 250)
        return (1 + st_below(r, 4)) * g_tick;
    if (p < 850)
        return (1 + st_below(r, 300)) * g_tick + st_below(r, g_tick);
    if (p < 900)
        return (300 + st_below(r, 5000)) * g_tick + st_below(r, g_tick);
    if (p < 998) {
        uint64_t lo = (1ull << 20) * g_tick;
        return lo + st_below(r, g_max_delay - lo);
    }
    return g_max_delay;
}

/* ---- callbacks --------------------------------------------------------------- */

static void mp_arm_child(void);

/* Runs inside tw_advance, on an advancer thread (or main at the end). */
static void mp_callback(tw_timer t, void *arg)
{
    mp_rec *r = arg;
    uint64_t now = tw_now(g_s);
    if (t != r->handle) /* plain read: written before the callback may run */
        atomic_fetch_add_explicit(&r->bad_handle, 1, memory_order_relaxed);
    /* relaxed: read after the fired increment below is seen (release). */
    atomic_store_explicit(&r->fire_now, now, memory_order_relaxed);
    atomic_store_explicit(&r->fire_prev, t_prev, memory_order_relaxed);
    /* release: publishes fire_now to a producer that sees fired == 1. */
    if (atomic_fetch_add_explicit(&r->fired, 1, memory_order_release) != 0)
        st_fail("timer %#" PRIx64 " fired twice", t);
    uint64_t p = st_below(t_rng, 64);
    if (p == 0 && tw_advance(g_s, now + g_tick) != TW_EDEADLK)
        st_fail("tw_advance from a callback did not return TW_EDEADLK");
    if (p < 4)
        mp_arm_child(); /* race: arming while this very drain is in progress */
}

static void mp_arm_child(void)
{
    mp_rec *c = st_arena_new(t_children);
    uint64_t delay = st_below(t_rng, 20) * g_tick + st_below(t_rng, g_tick);
    uint64_t before = tw_now(g_s);
    c->child = 1;
    c->late_armed = g_final_phase;
    c->sched_rc = tw_schedule(g_s, delay, mp_callback, c, &c->handle);
    c->lb = before + delay;
    c->n_after = tw_now(g_s);
    c->ub = c->n_after + delay;
    if (c->sched_rc != TW_OK)
        st_fail("tw_schedule from a callback: %s", tw_strerror(c->sched_rc));
}

/* tw_stop's on_pending: main thread. */
static void mp_on_pending(tw_timer t, void *arg)
{
    mp_rec *r = arg;
    if (t != r->handle)
        atomic_fetch_add_explicit(&r->bad_handle, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
}

/* ---- producers --------------------------------------------------------------- */

static void live_remove(producer *p, size_t i)
{
    p->live[i] = p->live[--p->nlive];
}

/* Race: reserve/publish into a slot the advancer is closing and draining
 * (the cursor race), overflow segments appended concurrently by several
 * producers, placement at a level that cascades under us. */
static void prod_schedule(producer *p)
{
    mp_rec *r = st_arena_new(&p->recs);
    uint64_t delay = mp_delay(&p->rng);
    uint64_t before = tw_now(g_s);
    r->sched_rc = tw_schedule(g_s, delay, mp_callback, r, &r->handle);
    r->lb = before + delay;
    r->n_after = tw_now(g_s);
    r->ub = r->n_after + delay;
    if (r->sched_rc != TW_OK) {
        st_fail("producer %d: tw_schedule(%" PRIu64 "): %s", p->id, delay,
                tw_strerror(r->sched_rc));
        p->sched_refused++;
        return;
    }
    p->sched_ok++;
    if (delay <= 4 * g_tick)
        p->hot = r;
    if (p->nlive == LIVE_MAX)
        live_remove(p, st_below(&p->rng, LIVE_MAX)); /* forget one (stays accounted) */
    p->live[p->nlive++] = r;
}

/* Race: cancel against the drain that claims the timer (FIRING) or the
 * cascade that is moving its entry; exactly one of them may win. */
static void prod_cancel(producer *p)
{
    size_t i = st_below(&p->rng, p->nlive);
    mp_rec *r = p->live[i];
    int rc = tw_cancel(g_s, r->handle);
    if (rc == TW_OK) {
        r->cancelled = 1;
        p->cancel_ok++;
    } else if (rc != TW_ENOENT) {
        st_fail("producer %d: tw_cancel: %s", p->id, tw_strerror(rc));
    }
    live_remove(p, i); /* OK or already started: either way no longer pending */
}

/* Race: moving a deadline (earlier: re-placement; later: the lease that the
 * drain meets) while the drain claims or cascades the timer. */
static void prod_reschedule(producer *p)
{
    size_t i = st_below(&p->rng, p->nlive);
    mp_rec *r = p->live[i];
    uint64_t delay = mp_delay(&p->rng);
    uint64_t before = tw_now(g_s);
    int rc = tw_reschedule(g_s, r->handle, delay);
    uint64_t after = tw_now(g_s);
    if (rc == TW_OK) {
        r->prev_lb = r->lb;
        r->lb = before + delay;
        r->n_after = after;
        r->ub = after + delay;
        r->reschedules++;
        p->resched_ok++;
    } else if (rc == TW_ENOENT) {
        live_remove(p, i); /* it started */
    } else {
        st_fail("producer %d: tw_reschedule(%" PRIu64 "): %s", p->id, delay,
                tw_strerror(rc));
    }
}

/* Race: pushing back, again and again by a tick or two, a timer that is
 * about to fall due (the session "touch"): the reschedule's deadline lease
 * against the drain that meets the timer, and the take-back of a timer the
 * drain has already claimed (due, not started). */
static void prod_touch(producer *p)
{
    mp_rec *r = p->hot;
    if (!r)
        return;
    for (int k = 0; k < 8; k++) {
        uint64_t delay = st_below(&p->rng, 3) * g_tick + st_below(&p->rng, g_tick);
        uint64_t before = tw_now(g_s);
        int rc = tw_reschedule(g_s, r->handle, delay);
        uint64_t after = tw_now(g_s);
        if (rc == TW_ENOENT) {
            p->hot = NULL; /* it started, or was cancelled through the live list */
            return;
        }
        if (rc != TW_OK) {
            st_fail("producer %d: tw_reschedule (touch): %s", p->id, tw_strerror(rc));
            return;
        }
        r->prev_lb = r->lb;
        r->lb = before + delay;
        r->n_after = after;
        r->ub = after + delay;
        r->reschedules++;
        p->resched_ok++;
    }
}

/* Race: a stale handle whose record is being reused right now by another
 * producer must be refused, never act on the new timer. */
static void prod_stale(producer *p)
{
    if (p->recs.n == 0)
        return;
    mp_rec *r = st_arena_get(&p->recs, st_below(&p->rng, p->recs.n));
    /* acquire: pairs with the callback's release increment. */
    bool dead = r->cancelled ||
                atomic_load_explicit(&r->fired, memory_order_acquire) != 0;
    if (!dead || r->sched_rc != TW_OK)
        return;
    p->stale_checks++;
    int rc = tw_cancel(g_s, r->handle);
    if (rc != TW_ENOENT)
        st_fail("producer %d: tw_cancel on a dead timer %#" PRIx64 ": %s", p->id,
                r->handle, tw_strerror(rc));
    rc = tw_reschedule(g_s, r->handle, g_tick);
    if (rc != TW_ENOENT)
        st_fail("producer %d: tw_reschedule on a dead timer %#" PRIx64 ": %s", p->id,
                r->handle, tw_strerror(rc));
}

/* Producer thread body. Races: its arming, cancelling and rescheduling
 * against the advancers' drains and cascades (see each operation above),
 * and against the other producers' reservations in the same slots and
 * overflow segments and their reuse of freed records. */
static void *producer_main(void *arg)
{
    producer *p = arg;
    uint64_t ops = 0, last_now = 0, ops_per_tick = 64;
    pthread_barrier_wait(&g_barrier);
    while (p->sched_ok + p->sched_refused < g_iterations) {
        if ((ops & 15) == 0 && st_mono_ns() >= g_end_ns)
            break;
        if (++ops % PACE_EVERY == 0)
            ops_per_tick = 8ull << (2 * st_below(&p->rng, 4)); /* 8, 32, 128, 512 */
        if (ops % ops_per_tick == 0) {
            /* Pacing: keep arming in step with the clock, so the wheel
             * holds timers of every age rather than a pile in the future. */
            while (tw_now(g_s) < last_now + g_tick && st_mono_ns() < g_end_ns)
                sched_yield();
            last_now = tw_now(g_s);
        }
        uint64_t x = st_below(&p->rng, 100);
        if (x < 45 || p->nlive == 0)
            prod_schedule(p);
        else if (x < 65)
            prod_cancel(p);
        else if (x < 85)
            prod_reschedule(p);
        else if (x < 90)
            prod_touch(p);
        else if (x < 97)
            prod_stale(p);
        else {
            tw_stats st;
            tw_stats_get(g_s, &st); /* readers beside writers */
        }
    }
    return NULL;
}

/* ---- advancers --------------------------------------------------------------- */

/* Race (id 0): the drain (close, take, tombstone, cascade, claim) of every
 * slot the producers are writing into, in small steps: whole ticks, parts
 * of a tick, several ticks, none. Race (id 1): a second tw_advance caller
 * jumping in, which must serialise with the first (EINVAL when it asks
 * for a time the first has already passed). */
static void *advancer_main(void *arg)
{
    advancer *a = arg;
    t_children = &a->children;
    t_rng = &a->rng;
    pthread_barrier_wait(&g_barrier);
    uint64_t now = tw_now(g_s);
    while (!atomic_load_explicit(&g_producers_done, memory_order_acquire)) {
        uint64_t p = st_below(&a->rng, 100);
        if (a->id == 0) {
            if (p < 60)
                now += g_tick;
            else if (p < 80)
                now += st_below(&a->rng, g_tick);
            else if (p < 95)
                now += (2 + st_below(&a->rng, 7)) * g_tick;
        } else {
            if (p < 90) {
                sched_yield();
                continue;
            }
            now = tw_now(g_s) + st_below(&a->rng, 2 * g_tick);
        }
        t_prev = tw_now(g_s);
        int rc = tw_advance(g_s, now);
        if (rc == TW_EINVAL) {
            uint64_t cur = tw_now(g_s);
            if (now >= cur)
                st_fail("advancer %d: tw_advance(%" PRIu64 ") EINVAL with clock %" PRIu64,
                        a->id, now, cur);
            a->einval++;
            now = cur;
        } else if (rc != TW_OK) {
            st_fail("advancer %d: tw_advance: %s", a->id, tw_strerror(rc));
            break;
        }
        a->advances++;
        if ((a->advances & 63) == 0)
            sched_yield(); /* let producers fill slots between drains */
    }
    return NULL;
}

/* ---- accounting ----------------------------------------------------------------- */

typedef struct totals {
    uint64_t scheduled, fired, cancelled, dropped, rescheduled, timers;
} totals;

static void account(mp_rec *r, uint64_t final_now, totals *t, const char *who, size_t idx)
{
    uint32_t fired = atomic_load_explicit(&r->fired, memory_order_relaxed);
    uint32_t dropped = atomic_load_explicit(&r->dropped, memory_order_relaxed);
    uint64_t fire_now = atomic_load_explicit(&r->fire_now, memory_order_relaxed);
    t->timers++;
    if (atomic_load_explicit(&r->bad_handle, memory_order_relaxed))
        st_fail("%s #%zu: callback/on_pending received another handle", who, idx);
    if (r->sched_rc != TW_OK) {
        if (fired || dropped)
            st_fail("%s #%zu: refused timer fired %u dropped %u", who, idx, fired, dropped);
        return;
    }
    t->scheduled++;
    t->fired += fired;
    t->cancelled += r->cancelled;
    t->dropped += dropped;
    t->rescheduled += r->reschedules;
    if (fired + r->cancelled + dropped != 1)
        st_fail("%s #%zu handle %#" PRIx64 ": fired %u + cancelled %u + dropped %u != 1"
                " (lb %" PRIu64 " ub %" PRIu64 " resched %u final now %" PRIu64 ")",
                who, idx, r->handle, fired, r->cancelled, dropped, r->lb, r->ub,
                r->reschedules, final_now);
    if (fired && fire_now < r->lb)
        st_fail("%s #%zu handle %#" PRIx64 ": fired early: now %" PRIu64 " < deadline >= %"
                PRIu64 " (resched %u)", who, idx, r->handle, fire_now, r->lb, r->reschedules);
    /* Late: the advance before the one that ran it had set the clock past
     * deadline + tick (the guarantee of tw_advance), and had set it after
     * this arming returned (clock > tw_now() read after the call), so it
     * had to run the timer. The clock moves before the drain starts. */
    uint64_t prev = atomic_load_explicit(&r->fire_prev, memory_order_relaxed);
    if (fired && prev > r->n_after && r->ub + g_tick <= prev)
        st_fail("%s #%zu handle %#" PRIx64 ": late: deadline <= %" PRIu64 ", but an advance"
                " to %" PRIu64 " (after the arming) did not run it; ran at %" PRIu64
                " (resched %u)", who, idx, r->handle, r->ub, prev, fire_now, r->reschedules);
    if (dropped && !r->late_armed && r->ub + g_tick <= final_now)
        st_fail("%s #%zu handle %#" PRIx64 ": overdue at the final advance but dropped:"
                " deadline <= %" PRIu64 ", final now %" PRIu64 " (resched %u)",
                who, idx, r->handle, r->ub, final_now, r->reschedules);
}

/* tw__check failed: print what we know of the timers that use the record
 * it names ("... record N ..."), to help whoever debugs it. */
static void explain_record(const char *msg, producer *prod, uint64_t nthreads)
{
    const char *at = strstr(msg, "record ");
    if (!at)
        return;
    unsigned long idx = strtoul(at + 7, NULL, 10);
    for (uint64_t i = 0; i < nthreads; i++) {
        for (size_t j = 0; j < prod[i].recs.n; j++) {
            mp_rec *r = st_arena_get(&prod[i].recs, j);
            if (r->sched_rc != TW_OK || (uint32_t)r->handle != idx || r->cancelled ||
                atomic_load_explicit(&r->fired, memory_order_relaxed))
                continue;
            fprintf(stderr, "  record %lu is producer %" PRIu64 "'s timer #%zu handle %#" PRIx64
                    ": clock now %" PRIu64 " ticks; last arming: %s at clock %" PRIu64
                    " ticks, deadline in [%" PRIu64 ", %" PRIu64 "] ns = ticks [%" PRIu64
                    ", %" PRIu64 "], %u reschedules, previous deadline >= %" PRIu64 " ticks\n",
                    idx, i, j, r->handle, tw_now(g_s) / g_tick,
                    r->reschedules ? "tw_reschedule" : "tw_schedule", r->n_after / g_tick,
                    r->lb, r->ub, (r->lb + g_tick - 1) / g_tick, (r->ub + g_tick - 1) / g_tick,
                    r->reschedules, (r->prev_lb + g_tick - 1) / g_tick);
        }
    }
}

int main(int argc, char **argv)
{
    uint64_t nthreads = st_arg(argc, argv, 1, 4);
    g_iterations = st_arg(argc, argv, 2, 1000000);
    double seconds = st_arg_seconds(argc, argv, 3);
    uint64_t wheel_slots = st_arg(argc, argv, 4, 4);
    uint64_t slot_capacity = st_arg(argc, argv, 5, 1);
    uint64_t seed = st_arg(argc, argv, 6, st_seed_default());
    if (nthreads < 1 || nthreads > 256) {
        fprintf(stderr, "threads: 1 .. 256\n");
        return 2;
    }
    printf("manual_producers: threads %" PRIu64 " iterations %" PRIu64 " seconds %.1f"
           " wheel_slots %" PRIu64 " slot_capacity %" PRIu64 " seed %" PRIu64 "\n",
           nthreads, g_iterations, seconds, wheel_slots, slot_capacity, seed);
    fflush(stdout);

    g_s = st_create_manual(wheel_slots, slot_capacity);
    g_tick = 1000; /* st_create_manual's tick */
    int rc;
    g_max_delay = tw_max_delay(g_s);
    if (tw_schedule(g_s, g_max_delay + 1, mp_callback, &g_dummy, NULL) != TW_ERANGE)
        st_fail("tw_schedule beyond tw_max_delay did not return TW_ERANGE");

    producer *prod = calloc(nthreads, sizeof *prod);
    advancer adv[2];
    memset(adv, 0, sizeof adv);
    st_arena main_children;
    st_arena_init(&main_children, sizeof(mp_rec));
    st_rng main_rng;
    st_rng_seed(&main_rng, seed, 1000);
    pthread_barrier_init(&g_barrier, NULL, (unsigned)nthreads + 3);
    g_end_ns = st_mono_ns() + (uint64_t)(seconds * 1e9);
    for (uint64_t i = 0; i < nthreads; i++) {
        prod[i].id = (int)i;
        st_rng_seed(&prod[i].rng, seed, i);
        st_arena_init(&prod[i].recs, sizeof(mp_rec));
        st_start(&prod[i].th, producer_main, &prod[i]);
    }
    for (int i = 0; i < 2; i++) {
        adv[i].id = i;
        st_rng_seed(&adv[i].rng, seed, 500 + (uint64_t)i);
        st_arena_init(&adv[i].children, sizeof(mp_rec));
        st_start(&adv[i].th, advancer_main, &adv[i]);
    }
    pthread_barrier_wait(&g_barrier); /* everyone starts together */

    for (uint64_t i = 0; i < nthreads; i++)
        pthread_join(prod[i].th, NULL);
    atomic_store_explicit(&g_producers_done, true, memory_order_release);
    for (int i = 0; i < 2; i++)
        pthread_join(adv[i].th, NULL);

    /* Quiescent from here: check the structure, then a last advance far
     * enough that every short timer is due, then check again. */
    char buf[512];
    if (tw__check(g_s, buf, sizeof buf) != 0) {
        st_fail("tw__check after the run: %s", buf);
        explain_record(buf, prod, nthreads);
    }
    t_children = &main_children;
    t_rng = &main_rng;
    g_final_phase = true;
    /* Tick by tick, so that a timer run late shows as late. */
    uint64_t final_now = tw_now(g_s) + 20000 * g_tick;
    for (uint64_t now = tw_now(g_s) / g_tick * g_tick + g_tick;; now += g_tick) {
        t_prev = tw_now(g_s);
        rc = tw_advance(g_s, now < final_now ? now : final_now);
        if (rc != TW_OK) {
            st_fail("final tw_advance: %s", tw_strerror(rc));
            break;
        }
        if (now >= final_now)
            break;
    }
    if (tw__check(g_s, buf, sizeof buf) != 0)
        st_fail("tw__check after the final advance: %s", buf);

    rc = tw_stop(g_s, mp_on_pending);
    if (rc != TW_OK)
        st_fail("tw_stop: %s", tw_strerror(rc));
    if (tw_advance(g_s, final_now + g_tick) != TW_ESHUTDOWN)
        st_fail("tw_advance after tw_stop did not return TW_ESHUTDOWN");
    if (tw_schedule(g_s, 0, mp_callback, &g_dummy, NULL) != TW_ESHUTDOWN)
        st_fail("tw_schedule after tw_stop did not return TW_ESHUTDOWN");

    tw_stats st;
    tw_stats_get(g_s, &st);

    totals t = { 0 };
    uint64_t ops_sched = 0, ops_cancel = 0, ops_resched = 0, stale = 0, advances = 0, einval = 0;
    for (uint64_t i = 0; i < nthreads; i++) {
        for (size_t j = 0; j < prod[i].recs.n; j++)
            account(st_arena_get(&prod[i].recs, j), final_now, &t, "producer timer", j);
        ops_sched += prod[i].sched_ok;
        ops_cancel += prod[i].cancel_ok;
        ops_resched += prod[i].resched_ok;
        stale += prod[i].stale_checks;
    }
    uint64_t children = 0;
    for (int i = 0; i < 2; i++) {
        for (size_t j = 0; j < adv[i].children.n; j++)
            account(st_arena_get(&adv[i].children, j), final_now, &t, "child timer", j);
        children += adv[i].children.n;
        advances += adv[i].advances;
        einval += adv[i].einval;
    }
    for (size_t j = 0; j < main_children.n; j++)
        account(st_arena_get(&main_children, j), final_now, &t, "late child timer", j);
    children += main_children.n;

    printf("timers %" PRIu64 " (children %" PRIu64 "): scheduled %" PRIu64 " fired %" PRIu64
           " cancelled %" PRIu64 " dropped %" PRIu64 " rescheduled %" PRIu64
           "; stale-handle checks %" PRIu64 "; advances %" PRIu64 " (einval %" PRIu64 ")\n",
           t.timers, children, t.scheduled, t.fired, t.cancelled, t.dropped, t.rescheduled,
           stale, advances, einval);
    printf("library: scheduled %" PRIu64 " fired %" PRIu64 " cancelled %" PRIu64
           " dropped %" PRIu64 " rescheduled %" PRIu64 " pending %" PRIu64
           " ticks %" PRIu64 " overflowed %" PRIu64 "\n",
           st.scheduled, st.fired, st.cancelled, st.dropped, st.rescheduled, st.pending,
           st.ticks, st.overflowed);
    printf("rare paths:");
    for (int i = 0; i < TW_RARE_COUNT; i++)
        printf(" %s %" PRIu64, tw__rare_name(i), tw__rare_total(g_s, i));
    printf("\n");

    if (st.pending != 0)
        st_fail("stats.pending %" PRIu64 " after tw_stop", st.pending);
    if (st.scheduled != st.fired + st.cancelled + st.dropped + st.pending)
        st_fail("stats: scheduled %" PRIu64 " != fired %" PRIu64 " + cancelled %" PRIu64
                " + dropped %" PRIu64 " + pending %" PRIu64,
                st.scheduled, st.fired, st.cancelled, st.dropped, st.pending);
    if (st.scheduled != t.scheduled || st.fired != t.fired || st.cancelled != t.cancelled ||
        st.dropped != t.dropped || st.rescheduled != t.rescheduled)
        st_fail("library counters differ from the records' accounting (above)");
    if (ops_sched + children != t.scheduled || ops_cancel != t.cancelled ||
        ops_resched != t.rescheduled)
        st_fail("producers' operation counts differ from the records");

    tw_destroy(g_s);
    for (uint64_t i = 0; i < nthreads; i++)
        st_arena_free(&prod[i].recs);
    for (int i = 0; i < 2; i++)
        st_arena_free(&adv[i].children);
    st_arena_free(&main_children);
    free(prod);
    pthread_barrier_destroy(&g_barrier);

    if (st_failed()) {
        printf("FAILED: %" PRIu64 " violations (seed %" PRIu64 ")\n", st_failed(), seed);
        return 1;
    }
    printf("OK\n");
    return 0;
}
