/*
 * burst_claim: the early claim of a burst's slot (src/wheel.c, early
 * claims and suspended claims) while other threads arm, cancel and move
 * timers, with exact accounting.
 *
 *     burst_claim [threads=2] [burst=40000] [seconds=$TW_STRESS_SECONDS|3]
 *                 [configured=0] [require=1] [seed] [workers=2] [slots=0]
 *
 * Rounds until `seconds` have passed, each on a fresh MONOTONIC service
 * (`workers` workers, 0: the cursor runs the callbacks itself, after its
 * steps; slots > 0: that many slots a level, 64 puts the burst beyond
 * level 0, where the cursor drains its level-1 slot before its epoch
 * (wheel.c, early cascades, which give way to the touchers' ticks);
 * `require` asks for the path the run is
 * about, required_seen says which;
 * 1 ms tick; configured = 1: 1024 slots and max_timers at the
 * burst plus room for the rest): the main thread arms `burst` timers due
 * at one instant D, 150 ms after the arming began (time enough to arm
 * them under TSan, so that their slot is claimed early: they are more than
 * TW_EARLY_MIN; doubled, up to 2 s, after a round whose arming ended within
 * the claim's lead of D, as on a loaded machine); meanwhile `threads` touchers each
 * arm a short timer due 2 ms later every 1-3 ms (work in the ticks before
 * D, which a claim must give the cursor back for), and cancel or move
 * burst timers of their own share: to another instant up to 20 ms after
 * D, to D itself, or an hour away (dropped by the round's tw_stop). The
 * claim (begun 100 ticks ahead: tw__early_lead_override) may be anywhere
 * then: taking the slot, staging, suspended with its stash, resumed,
 * parked, or handed to the step. (The moves stay after D: until
 * 2026-11-29 a claim started only once the burst's tick was the next with
 * work, and timers moved just before it kept every claim from starting
 * until too late to give way to anything. It now starts at its lead
 * whatever comes before it: cursor.c, start_burst.)
 *
 * Checked, per timer: fired + cancelled-OK + dropped == 1 (exactly once),
 * never early (the callback's tw_now() >= the deadline of its last
 * successful arming: absolute, so exact), its own handle; the library's
 * counters equal the sums. Prints the early-claim counts; with require = 1
 * the run goes on past `seconds` (up to 10x) until it has seen its path
 * (required_seen: by default a claim that gave the cursor back), and
 * fails if it never did.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "stress_common.h"

#include "internal.h" /* tw__rare_total */

#define MS 1000000ull
#define LEAD_NS (150 * MS)    /* the burst's instant, after the arming began */
#define CLAIM_TICKS 100       /* the claim's lead (tw__early_lead_override) */

#define FAR_NS (3600000 * MS) /* an hour: dropped at the round's stop */

typedef struct bc_rec {
    tw_timer handle;          /* through the arming call's out: before the run */
    uint64_t lb;              /* owner: deadline of the last successful arming */
    bool far;                 /* owner: last moved an hour away */
    _Atomic uint32_t cancelled;
    _Atomic uint32_t fired;
    _Atomic uint32_t dropped;
    _Atomic uint32_t bad_handle;
    _Atomic uint64_t fire_now;
} bc_rec;

typedef struct toucher {
    pthread_t th;
    int id;
    st_rng rng;
    st_arena shorts;          /* this round's short timers */
} toucher;

static tw_service *g_s;
static bc_rec *g_burst;       /* this round's burst */
static size_t g_nburst;
static uint64_t g_due;        /* D, service time */
static int g_threads;
static atomic_bool g_round_done;
static atomic_bool g_armed;   /* the burst is armed: touchers may move it */

static void bc_run(tw_timer t, void *arg)
{
    bc_rec *r = arg;
    if (t != r->handle)
        atomic_fetch_add_explicit(&r->bad_handle, 1, memory_order_relaxed);
    atomic_store_explicit(&r->fire_now, tw_now(g_s), memory_order_relaxed);
    atomic_fetch_add_explicit(&r->fired, 1, memory_order_relaxed);
}

static void bc_dropped(tw_timer t, void *arg)
{
    (void)t;
    bc_rec *r = arg;
    atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
}

/* The short timer of the ticks before D. */
static void arm_short(toucher *me)
{
    bc_rec *r = st_arena_new(&me->shorts);
    uint64_t at = tw_now(g_s) + 2 * MS;
    r->lb = at;
    int rc = tw_schedule_at(g_s, at, bc_run, r, &r->handle);
    if (rc != TW_OK)
        st_fail("toucher %d: a short timer was refused (%d)", me->id, rc);
}

/* Cancel or move one of this toucher's burst timers. */
static void touch_burst(toucher *me)
{
    size_t share = g_nburst / (size_t)g_threads;
    if (share == 0)
        return;
    size_t i = (size_t)me->id + (size_t)g_threads * st_below(&me->rng, share);
    bc_rec *r = &g_burst[i];
    if (atomic_load_explicit(&r->cancelled, memory_order_relaxed))
        return;
    uint64_t op = st_below(&me->rng, 8), at;
    if (op == 0) {
        if (tw_cancel(g_s, r->handle) == TW_OK)
            atomic_store_explicit(&r->cancelled, 1, memory_order_relaxed);
        return;
    }
    if (op == 1)
        at = tw_now(g_s) + FAR_NS;
    else if (op == 2)
        at = g_due;
    else
        at = g_due + st_below(&me->rng, 21) * MS;
    if (tw_reschedule_at(g_s, r->handle, at) == TW_OK) {
        r->lb = at;
        r->far = op == 1;
    }
}

static void *toucher_main(void *arg)
{
    toucher *me = arg;
    while (!atomic_load(&g_round_done)) {
        arm_short(me);
        for (int k = 0; k < 4 && atomic_load(&g_armed); k++)
            touch_burst(me);
        st_sleep_ns((1 + st_below(&me->rng, 3)) * MS);
    }
    return NULL;
}

/* One record's fate: exactly once, never early, its own handle. */
static void check_rec(const char *who, size_t i, const bc_rec *r, uint64_t *fired,
                      uint64_t *cancelled, uint64_t *dropped)
{
    uint32_t f = atomic_load(&r->fired), c = atomic_load(&r->cancelled),
             d = atomic_load(&r->dropped);
    if (f + c + d != 1)
        st_fail("%s #%zu: fired %u, cancelled %u, dropped %u", who, i, f, c, d);
    if (f && atomic_load(&r->fire_now) < r->lb)
        st_fail("%s #%zu: ran at %" PRIu64 ", before its deadline %" PRIu64, who, i,
                atomic_load(&r->fire_now), r->lb);
    if (atomic_load(&r->bad_handle))
        st_fail("%s #%zu: its callback got another handle", who, i);
    *fired += f;
    *cancelled += c;
    *dropped += d;
}

/* The burst's instant after the arming began: LEAD_NS, doubled (up to 2 s)
 * after a round whose arming ended less than the claim's lead before it.
 * Such a round has no early claim worth the name: on a loaded machine
 * (beside a busy loop, with injected yields) 8 claims in 111 rounds, none
 * that gave the cursor back, and the run failed its `require`. */
static uint64_t g_lead_ns = LEAD_NS;
static uint32_t g_workers = 2;
static uint32_t g_slots;     /* 0: the defaults' */

static void lengthen_lead_if_late(uint64_t armed_at)
{
    if (armed_at + CLAIM_TICKS * MS > g_due && g_lead_ns < 2000 * MS)
        g_lead_ns *= 2;
}

typedef struct totals {
    uint64_t rounds, claims, yields, late, waited, cascades, cascade_yields;
} totals;

static void one_round(toucher *t, int configured, totals *tot)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = g_workers;
    cfg.tick_ns = MS;
    if (g_slots)
        cfg.wheel_slots = g_slots;
    if (configured) {
        cfg.wheel_slots = 1024;
        cfg.max_timers = (uint64_t)g_nburst + 4096; /* the burst, and the shorts pending */
    }
    /* A lead of 100 ticks, not 250 ns an entry (10 ms here): under TSan a
     * claim costs ten times as much and went late before its first piece,
     * with no tick before it to give way to. */
    tw__early_lead_override = CLAIM_TICKS;
    int rc = tw_create(&cfg, &g_s);
    tw__early_lead_override = 0;
    if (rc != TW_OK) {
        fprintf(stderr, "tw_create: %d\n", rc);
        exit(2);
    }
    memset(g_burst, 0, g_nburst * sizeof *g_burst);
    atomic_store(&g_round_done, false);
    atomic_store(&g_armed, false);
    g_due = tw_now(g_s) + g_lead_ns;
    for (int k = 0; k < g_threads; k++) {
        st_arena_init(&t[k].shorts, sizeof(bc_rec));
        st_start(&t[k].th, toucher_main, &t[k]);
    }
    for (size_t i = 0; i < g_nburst; i++) {
        g_burst[i].lb = g_due;
        rc = tw_schedule_at(g_s, g_due, bc_run, &g_burst[i], &g_burst[i].handle);
        if (rc != TW_OK)
            st_fail("burst #%zu refused (%d)", i, rc);
    }
    atomic_store(&g_armed, true);
    lengthen_lead_if_late(tw_now(g_s));
    /* The burst's instant, the moved ones' (up to +20 ms), and the runs. */
    while (tw_now(g_s) < g_due + 40 * MS)
        st_sleep_ns(MS);
    atomic_store(&g_round_done, true);
    for (int k = 0; k < g_threads; k++)
        pthread_join(t[k].th, NULL);
    uint64_t far = 0;
    for (size_t i = 0; i < g_nburst; i++)
        far += g_burst[i].far && !atomic_load(&g_burst[i].cancelled);
    /* Everything not moved an hour away runs; wait for it (60 s at most). */
    for (uint64_t give_up = st_mono_ns() + 60000 * MS;;) {
        tw_stats st;
        tw_stats_get(g_s, &st);
        if (st.pending <= far || st_mono_ns() > give_up)
            break;
        st_sleep_ns(MS);
    }
    rc = tw_stop(g_s, bc_dropped);
    if (rc != TW_OK)
        st_fail("tw_stop: %d", rc);
    uint64_t fired = 0, cancelled = 0, dropped = 0;
    for (size_t i = 0; i < g_nburst; i++)
        check_rec("burst", i, &g_burst[i], &fired, &cancelled, &dropped);
    for (int k = 0; k < g_threads; k++) {
        for (size_t i = 0; i < t[k].shorts.n; i++)
            check_rec("short", i, st_arena_get(&t[k].shorts, i), &fired, &cancelled, &dropped);
    }
    if (dropped != far)
        st_fail("round %" PRIu64 ": %" PRIu64 " dropped at the stop, %" PRIu64
                " were an hour away", tot->rounds, dropped, far);
    tw_stats st;
    tw_stats_get(g_s, &st);
    if (st.fired != fired || st.cancelled != cancelled || st.dropped != dropped)
        st_fail("round %" PRIu64 ": stats fired %" PRIu64 " cancelled %" PRIu64
                " dropped %" PRIu64 ", counted %" PRIu64 " %" PRIu64 " %" PRIu64,
                tot->rounds, st.fired, st.cancelled, st.dropped, fired, cancelled, dropped);
    tot->rounds++;
    tot->claims += tw__rare_total(g_s, TW_RARE_EARLY_CLAIM);
    tot->yields += tw__rare_total(g_s, TW_RARE_EARLY_YIELDED);
    tot->late += tw__rare_total(g_s, TW_RARE_EARLY_LATE);
    tot->waited += tw__rare_total(g_s, TW_RARE_EARLY_WAITED);
    tot->cascades += tw__rare_total(g_s, TW_RARE_EARLY_CASCADE);
    tot->cascade_yields += tw__rare_total(g_s, TW_RARE_CASCADE_YIELDED);
    tw_destroy(g_s);
    g_s = NULL;
    for (int k = 0; k < g_threads; k++)
        st_arena_free(&t[k].shorts);
}

/* What `require` asks for: the path the run is about. A claim that gave
 * the cursor back (the defaults); with workers = 0, an early claim at all
 * (a plain build's claim of 40,000 is over in a few ms: 0 yields in 152
 * rounds, while TSan's gave way 106 times in 8); with `slots`, a level-1
 * slot drained early (under TSan that drain outlasts its lead, so the
 * early claim after it does not come: 0 in 68 rounds, 2026-11-29). */
static bool required_seen(const totals *t)
{
    if (g_slots)
        return t->cascades > 0 && t->cascade_yields > 0; /* a drain that gave way */
    return g_workers == 0 ? t->claims > 0 : t->yields > 0;
}

int main(int argc, char **argv)
{
    g_threads = (int)st_arg(argc, argv, 1, 2);
    g_nburst = (size_t)st_arg(argc, argv, 2, 40000);
    double seconds = st_arg_seconds(argc, argv, 3);
    int configured = (int)st_arg(argc, argv, 4, 0);
    int require = (int)st_arg(argc, argv, 5, 1);
    uint64_t seed = st_arg(argc, argv, 6, st_seed_default());
    g_workers = (uint32_t)st_arg(argc, argv, 7, 2);
    g_slots = (uint32_t)st_arg(argc, argv, 8, 0);
    if (g_threads < 1 || g_threads > 16 || g_nburst < 20000) {
        fprintf(stderr, "burst_claim: 1..16 threads, a burst of 20000 or more\n");
        return 2;
    }
    printf("burst_claim seed=%llu threads=%d burst=%zu seconds=%.1f configured=%d\n",
           (unsigned long long)seed, g_threads, g_nburst, seconds, configured);
    g_burst = calloc(g_nburst, sizeof *g_burst);
    toucher *t = calloc((size_t)g_threads, sizeof *t);
    if (!g_burst || !t)
        return 2;
    for (int k = 0; k < g_threads; k++) {
        t[k].id = k;
        st_rng_seed(&t[k].rng, seed, (uint64_t)k);
    }
    totals tot = {0};
    uint64_t start = st_mono_ns(), want = (uint64_t)(seconds * 1e9);
    while (st_failed() == 0) {
        one_round(t, configured, &tot);
        uint64_t spent = st_mono_ns() - start;
        if (spent >= want && tot.rounds >= 2 && (!require || required_seen(&tot)))
            break;
        if (spent >= 10 * want)
            break;
    }
    printf("burst_claim: %" PRIu64 " rounds, early claims %" PRIu64 ", yields %" PRIu64
           ", handed to the step %" PRIu64 ", parked %" PRIu64 ", early cascades %" PRIu64
           " (%" PRIu64 " gave way); the burst %" PRIu64 " ms after its arming began\n",
           tot.rounds, tot.claims, tot.yields, tot.late, tot.waited, tot.cascades,
           tot.cascade_yields,
           (uint64_t)(g_lead_ns / MS));
    if (require && !required_seen(&tot))
        st_fail("%s in %" PRIu64 " rounds",
                g_slots ? "no level-1 slot was drained early"
                : g_workers == 0 ? "no early claim" : "no early claim gave the cursor back",
                tot.rounds);
    free(t);
    free(g_burst);
    if (st_failed()) {
        fprintf(stderr, "burst_claim: %" PRIu64 " failures\n", st_failed());
        return 1;
    }
    puts("burst_claim: OK");
    return 0;
}
