/* test_workers.c: the worker pool (MONOTONIC clock, real threads). A due
 * timer waits for a worker only while every worker is busy: a callback
 * that blocks does not hold back the timers handed over with it (issue 12,
 * workers.c: stealing). The bounds are generous (a loaded 2-core machine,
 * sanitizers): what is asserted is "while the blocker still blocks", and
 * the blocker blocks for seconds. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getcpu, sched_[gs]etaffinity, CPU_* */
#endif
#include "tw_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#define BLOCK_NS (3 * T_S)      /* how long a blocker blocks, at most */
#define WITHIN_NS (500 * T_MS)  /* the others start within this of their deadline */

typedef struct blockers {
    tw_service *s;
    int nblock;                 /* callbacks that block, the first ones to start */
    atomic_int started;
    atomic_int returned;        /* blockers that have stopped blocking */
    atomic_bool release;
    _Atomic uint64_t start_at[16];
    _Atomic int ran[16];
    _Atomic int beside[16];     /* blockers still blocking when this one started */
} blockers;

typedef struct btimer {
    blockers *b;
    int i;
} btimer;

static uint64_t mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * T_S + (uint64_t)ts.tv_nsec;
}

/* The first nblock callbacks to start block until released (or BLOCK_NS);
 * the rest only record when they started, and how many blockers were
 * still blocking then (every blocker had taken its turn in `started`
 * before them). Each notes its run last, so a test that sees the run sees
 * the rest. */
static void maybe_block(tw_timer t, void *arg)
{
    (void)t;
    btimer *x = arg;
    blockers *b = x->b;
    atomic_store(&b->start_at[x->i], mono());
    if (atomic_fetch_add(&b->started, 1) >= b->nblock) {
        atomic_store(&b->beside[x->i], b->nblock - atomic_load(&b->returned));
        atomic_fetch_add(&b->ran[x->i], 1);
        return;
    }
    atomic_fetch_add(&b->ran[x->i], 1);
    uint64_t until = mono() + BLOCK_NS;
    while (!atomic_load(&b->release) && mono() < until)
        t_sleep_ns(T_MS);
    atomic_fetch_add(&b->returned, 1);
}

/* Wait until n callbacks of b have run, in all, or cap_ns has passed;
 * returns how many have. */
static int wait_runs(blockers *b, int ntimers, int n, uint64_t cap_ns)
{
    uint64_t give_up = mono() + cap_ns;
    for (;;) {
        int runs = 0;
        for (int i = 0; i < ntimers; i++)
            runs += atomic_load(&b->ran[i]);
        if (runs >= n || mono() > give_up)
            return runs;
        t_sleep_ns(T_MS);
    }
}

/* n timers due together on a pool of `workers`, nblock of them blocking:
 * every other one starts within WITHIN_NS of the deadline, while the
 * blockers still block. */
static void run_blockers(uint32_t workers, int n, int nblock)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = workers;
    tw_service *s = t_service_cfg(&cfg);
    blockers b = {.s = s, .nblock = nblock};
    btimer x[16];
    uint64_t deadline = mono() + 50 * T_MS;
    for (int i = 0; i < n; i++) {
        x[i] = (btimer){&b, i};
        ASSERT_RC(tw_schedule(s, 50 * T_MS, maybe_block, &x[i], NULL), TW_OK);
    }
    /* Wait for the non-blockers, with the blockers blocked. */
    uint64_t give_up = deadline + BLOCK_NS;
    int others = 0;
    while (mono() < give_up) {
        others = 0;
        for (int i = 0; i < n; i++)
            others += atomic_load(&b.ran[i]);
        if (others == n)
            break;
        t_sleep_ns(T_MS);
    }
    uint64_t seen = mono();
    atomic_store(&b.release, true);
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    if (others != n)
        fail_msg("%d of %d callbacks ran while %d blocked (%u workers)", others, n, nblock,
                 workers);
    /* The last start among all: the non-blockers started while the
     * blockers blocked, i.e. well before BLOCK_NS. */
    uint64_t last = 0;
    for (int i = 0; i < n; i++) {
        uint64_t at = atomic_load(&b.start_at[i]);
        last = at > last ? at : last;
    }
    print_message("      %u workers, %d timers, %d blocking: all started %.1f ms after "
                  "the deadline\n", workers, n, nblock, (double)(last - deadline) / 1e6);
    assert_true(last >= deadline); /* never early */
    assert_true(last - deadline < WITHIN_NS);
    assert_true(seen - deadline < BLOCK_NS);
    tw_destroy(s);
}

/* The case: two timers due in the same tick, two workers. */
static void blocked_callback_does_not_hold_its_batch_mate(void **state)
{
    (void)state;
    run_blockers(2, 2, 1);
}

/* A batch of 12 with one blocker: the other worker runs the other 11. */
static void blocked_callback_does_not_hold_a_batch(void **state)
{
    (void)state;
    run_blockers(2, 12, 1);
}

/* Three workers, two blockers in one batch: the third worker runs the rest
 * (the first stealer wakes another sleeper when it leaves some behind). */
static void two_blockers_three_workers(void **state)
{
    (void)state;
    run_blockers(3, 10, 2);
}

/* A pool wider than the CPUs: at most as many watch at once as there are
 * CPUs (workers.c, "Joining"); a watcher that joins leaves its place
 * before it runs what it joined, so each of eleven blockers in one batch
 * still gets its own worker, one after the other. Planted (the place kept
 * while it runs: a blocked joiner held it): 3 of 12 ran. */
static void eleven_blockers_on_a_pool_wider_than_the_cpus(void **state)
{
    (void)state;
    run_blockers(16, 12, 11);
}

/* Callbacks that spin 100 us each, 20 thousand due over 200 ms on a pool
 * of 64 workers: the pool is busy throughout, batches wait, and every
 * woken worker would watch. At most as many watch at once as there are
 * CPUs (before 2026-11-30 every woken worker watched, each looking at
 * every worker each watch: with 512 workers on 2 CPUs both were full at
 * 100 thousand timers a second). Every timer runs once. Planted (no
 * bound): more watchers than CPUs. */
static atomic_int g_spun;

static void spin_100us(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    uint64_t until = mono() + 100 * T_US;
    while (mono() < until) {
    }
    atomic_fetch_add(&g_spun, 1);
}

static void watchers_stay_within_the_cpus(void **state)
{
    (void)state;
    enum { TIMERS = 20000 };
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 64;
    tw_service *s = t_service_cfg(&cfg);
    atomic_store(&g_spun, 0);
    for (int i = 0; i < TIMERS; i++)
        ASSERT_RC(tw_schedule(s, (uint64_t)(i % 200) * T_MS, spin_100us, NULL, NULL), TW_OK);
    uint32_t most = 0;
    uint64_t give_up = mono() + 60 * T_S;
    while (atomic_load(&g_spun) < TIMERS && mono() < give_up) {
        uint32_t n = atomic_load(&s->pool.watchers);
        most = n > most ? n : most;
        t_sleep_ns(20 * T_US);
    }
    cpu_set_t mine;
    assert_int_equal(sched_getaffinity(0, sizeof mine, &mine), 0);
    uint32_t cpus = (uint32_t)CPU_COUNT(&mine);
    print_message("      64 workers on %u CPUs: at most %u watching; %d of %d ran\n", cpus, most,
                  atomic_load(&g_spun), TIMERS);
    assert_int_equal(atomic_load(&g_spun), TIMERS);
    assert_true(most <= cpus);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, TIMERS);
    tw_destroy(s);
}

/* One worker, one blocker: its batch-mate waits, as every worker is busy;
 * it runs once the blocker returns, exactly once. */
static void one_worker_waits_for_the_blocker(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 1;
    tw_service *s = t_service_cfg(&cfg);
    blockers b = {.s = s, .nblock = 1};
    btimer x[2] = {{&b, 0}, {&b, 1}};
    for (int i = 0; i < 2; i++)
        ASSERT_RC(tw_schedule(s, 20 * T_MS, maybe_block, &x[i], NULL), TW_OK);
    if (wait_runs(&b, 2, 1, 10 * T_S) < 1)
        fail_msg("neither timer ran within 10 s of its deadline");
    /* The blocker blocks: leave its batch-mate time to start wrongly
     * beside it. Whether it did is what beside[] says, however late this
     * thread wakes (were the blocker to time out first, the batch-mate
     * would rightly start after it and find it gone). */
    t_sleep_ns(300 * T_MS);
    atomic_store(&b.release, true);
    /* Then it runs: wait for it (10 s at most), as tw_stop drops a timer
     * that has not started. */
    wait_runs(&b, 2, 2, 10 * T_S);
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    assert_int_equal(atomic_load(&b.ran[0]), 1);
    assert_int_equal(atomic_load(&b.ran[1]), 1);
    for (int i = 0; i < 2; i++)
        if (atomic_load(&b.beside[i]) != 0)
            fail_msg("timer %d started while the blocker blocked, with one worker", i);
    tw_destroy(s);
}

/* Many small batches and blockers among them, on four workers: every timer
 * runs exactly once (stealing never runs a handle twice or drops one). */
static atomic_int g_runs[4096];
static void count_run(tw_timer t, void *arg)
{
    (void)t;
    int i = (int)(intptr_t)arg;
    atomic_fetch_add(&g_runs[i], 1);
    if (i % 512 == 0)
        t_sleep_ns(20 * T_MS);
}

static void stealing_runs_each_timer_once(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 4;
    tw_service *s = t_service_cfg(&cfg);
    for (int i = 0; i < 4096; i++) {
        atomic_store(&g_runs[i], 0);
        ASSERT_RC(tw_schedule(s, (uint64_t)(i % 40) * T_MS, count_run,
                              (void *)(intptr_t)i, NULL), TW_OK);
    }
    /* Wait until every timer has run (10 s at most; 40 ms of deadlines
     * and 160 ms of sleeps on four workers): tw_stop drops what has not
     * started, which would look like a timer stealing lost. */
    uint64_t give_up = mono() + 10 * T_S;
    for (int i = 0; i < 4096 && mono() < give_up;) {
        if (atomic_load(&g_runs[i]) != 0)
            i++;
        else
            t_sleep_ns(T_MS);
    }
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    tw_stats st;
    t_stats(s, &st);
    for (int i = 0; i < 4096; i++)
        if (atomic_load(&g_runs[i]) != 1)
            fail_msg("timer %d ran %d times", i, atomic_load(&g_runs[i]));
    assert_int_equal(st.fired, 4096);
    tw_destroy(s);
}

/* Joining (workers.c): a worker that wakes to batches another runs joins
 * it only when that one is stuck or when running beside it is faster. A
 * burst of callbacks on two workers; each callback notes which thread ran
 * it, then sleeps or spins for `us` microseconds. */
enum { JOIN_N = 600 };
typedef struct join_burst {
    int sleep;                  /* sleep (else spin) */
    uint32_t us;
    atomic_int runs;
    _Atomic(pthread_t) first;   /* the first thread to run one */
    atomic_int by_first;        /* runs on that thread */
} join_burst;

static void join_run(tw_timer t, void *arg)
{
    (void)t;
    join_burst *j = arg;
    pthread_t none = 0, me = pthread_self();
    atomic_compare_exchange_strong(&j->first, &none, me);
    if (pthread_equal(atomic_load(&j->first), me))
        atomic_fetch_add(&j->by_first, 1);
    if (j->sleep) {
        t_sleep_ns((uint64_t)j->us * 1000u);
    } else {
        uint64_t until = mono() + (uint64_t)j->us * 1000u;
        while (mono() < until) {
        }
    }
    atomic_fetch_add(&j->runs, 1);
}

/* One burst of JOIN_N due together on two workers; returns how many ran
 * on a thread other than the first one's, and the joins counted. */
static int join_burst_run(int sleep, uint32_t us, uint64_t *stuck, uint64_t *pays)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 2;
    tw_service *s = t_service_cfg(&cfg);
    static join_burst j;
    memset(&j, 0, sizeof j);
    j.sleep = sleep;
    j.us = us;
    for (int i = 0; i < JOIN_N; i++)
        ASSERT_RC(tw_schedule(s, 20 * T_MS, join_run, &j, NULL), TW_OK);
    uint64_t give_up = mono() + 30 * T_S;
    while (atomic_load(&j.runs) < JOIN_N && mono() < give_up)
        t_sleep_ns(T_MS);
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    assert_int_equal(atomic_load(&j.runs), JOIN_N);
    *stuck = tw__rare_total(s, TW_RARE_JOINED_STUCK);
    *pays = tw__rare_total(s, TW_RARE_JOINED_PAYS);
    tw_destroy(s);
    return JOIN_N - atomic_load(&j.by_first);
}

/* Callbacks that sleep 200 us: the runner makes no progress for longer
 * than a watcher allows (STUCK_NS), so the other worker joins and runs a
 * share. */
static void a_worker_joins_a_stuck_one(void **state)
{
    (void)state;
    /* Up to three bursts: where the first runner starts late (another
     * process holds the CPUs: a CI run of 2026-11-28 beside a test of
     * ours), the second worker finds batches no one runs and takes them
     * without joining (300 of 600, no join). Every burst must share out;
     * one must show the join. */
    for (int attempt = 1;; attempt++) {
        uint64_t stuck, pays;
        int other = join_burst_run(1, 200, &stuck, &pays);
        print_message("      sleeping callbacks, burst %d: %d of %d on the second worker, %" PRIu64
                      " joins as stuck, %" PRIu64 " as paying\n", attempt, other, JOIN_N, stuck,
                      pays);
        assert_true(other >= JOIN_N / 10);
        if (stuck >= 1)
            return;
        if (attempt == 3)
            fail_msg("no burst of three had the second worker join a stuck one");
    }
}

/* Callbacks that spin 20 us and share nothing: no single one is stuck,
 * but two runners finish them twice as fast, and the watcher's probe
 * sees it. Needs two free CPUs: five bursts, one must show it. Under
 * ThreadSanitizer on a loaded machine the runner is off its CPU for more
 * than 50 us in every burst (CI, 2026-11-28: each of three bursts joined
 * as stuck), so there a join of either kind is what is asserted. */
static void a_worker_joins_where_it_pays(void **state)
{
    (void)state;
    /* Valgrind runs one thread at a time: two runners are never faster
     * there (its run: no burst of five had either kind of join). Nor on
     * one CPU: the process's mask counts, not the machine's CPUs (pinned
     * with taskset -c 0, it failed 30 runs of 30, 2026-11-29). */
    const char *pre = getenv("LD_PRELOAD");
    cpu_set_t mask;
    assert_int_equal(sched_getaffinity(0, sizeof mask, &mask), 0);
    if ((pre && strstr(pre, "vgpreload")) || CPU_COUNT(&mask) < 2) {
        print_message("      one thread runs at a time here: nothing to measure\n");
        skip();
    }
    for (int attempt = 1;; attempt++) {
        uint64_t stuck, pays;
        int other = join_burst_run(0, 20, &stuck, &pays);
        print_message("      spinning callbacks, burst %d: %d of %d on the second worker, %" PRIu64
                      " joins as paying, %" PRIu64 " as stuck\n", attempt, other, JOIN_N, pays,
                      stuck);
#ifdef TW_SAN_THREAD
        pays += stuck;
#endif

        if (pays >= 1 && other >= JOIN_N / 10)
            return;
        if (attempt == 5)
            fail_msg("no burst of five had the second worker join where it pays");
    }
}

/* A watcher that finds itself on a runner's CPU moves off it (workers.c,
 * leave_runners_cpu): tw__move_off_cpu takes the calling thread to a CPU
 * of its mask that is not busy, and leaves the mask as it found it.
 * Where there is none (every CPU of the mask busy, or the thread pinned),
 * it answers false and changes nothing. A running thread is moved only by
 * its own mask's change, or by a balance or wake in the few microseconds
 * between the call's return and the look here: rare, so each round has
 * three tries. */
static void a_watcher_moves_off_a_busy_cpu_keeping_its_mask(void **state)
{
    (void)state;
    cpu_set_t mask, busy, now;
    assert_int_equal(sched_getaffinity(0, sizeof mask, &mask), 0);
    if (CPU_COUNT(&mask) < 2) {
        print_message("      one CPU in the mask: nowhere to move to\n");
        skip();
    }
    for (int round = 0; round < 20; round++) {
        /* The look after the call may come after a balance or a wake on
         * another CPU (valgrind runs one thread at a time and hands its
         * lock over through sleeps: a fresh-clone CI run saw one round in
         * twenty back on its CPU). A move that did not happen fails all
         * three tries. */
        bool moved = false;
        for (int try = 0; try < 3 && !moved; try++) {
            int here = sched_getcpu();
            assert_true(here >= 0);
            CPU_ZERO(&busy);
            CPU_SET(here, &busy);
            assert_true(tw__move_off_cpu(&busy));
            moved = sched_getcpu() != here;
            assert_int_equal(sched_getaffinity(0, sizeof now, &now), 0);
            assert_true(CPU_EQUAL(&now, &mask));
        }
        assert_true(moved);
    }
    /* Every CPU of the mask busy: nowhere to go. */
    int here = sched_getcpu();
    assert_false(tw__move_off_cpu(&mask));
    assert_int_equal(sched_getaffinity(0, sizeof now, &now), 0);
    assert_true(CPU_EQUAL(&now, &mask));
    /* Pinned to its CPU: a mask of one, which it keeps. */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(here, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    CPU_ZERO(&busy);
    CPU_SET(here, &busy);
    assert_false(tw__move_off_cpu(&busy));
    assert_int_equal(sched_getcpu(), here);
    assert_int_equal(sched_getaffinity(0, sizeof now, &now), 0);
    assert_true(CPU_EQUAL(&now, &one));
    assert_int_equal(sched_setaffinity(0, sizeof mask, &mask), 0);
}

/* A slot of many timers is claimed before its tick (wheel.c, early
 * claims), and the timers so claimed stay pending as any other: a cancel
 * keeps them from running, a reschedule moves them, tw_next_due and
 * tw_foreach_pending count them, and every other one runs once, never
 * before its deadline. */
/* Under ThreadSanitizer every acquire and release on a slot entry or a
 * record costs a vector clock's join (perf: 37% of the cursor in
 * __tsan::VectorClock), and the take of a 200,000-entry slot took 0.2 to
 * 3.9 s on the 2-core AMD guest, longer as the process made more threads:
 * past the hooked tests' lead, so they missed their cue in three tries
 * out of three. There the slot is a quarter as large (still past
 * TW_EARLY_MIN, wheel.c), and the hooked tests claim it 1.5 s ahead. */
#ifdef TW_SAN_THREAD
enum { EARLY_N = 50000 };
#define HOOK_LEAD 1500u             /* ticks (1 ms): the hooked claims' lead */
#define HOOK_DUE (2000 * T_MS)      /* the slot's tick, from the arming */
#define PLAIN_LEAD HOOK_LEAD        /* the other claims' lead (0: by size) */
#else
enum { EARLY_N = 200000 };
#define HOOK_LEAD 400u
#define HOOK_DUE (800 * T_MS)
#define PLAIN_LEAD 0u
#endif

/* Three tries of a claim's timing all missed. Under valgrind (memcheck,
 * tens of times slower, two programs at a time: scripts/test-proof.sh) a
 * cursor kept off the CPU past a lead is its pace, not ours: a fresh-clone
 * CI run (2026-11-30) missed the moved-in burst's early claim three times
 * there, with memcheck clean. There the tries' runs are still checked
 * (each timer once, none early) and the timing is left to the other
 * builds; elsewhere it fails. */
static void three_tries_missed(const char *what)
{
    if (t_under_valgrind())
        print_message("      under valgrind: %s (its pace; not asserted there)\n", what);
    else
        fail_msg("%s", what);
}

/* As three_tries_missed; where it lets the miss pass (valgrind), the test
 * has no service to check further: its arrays freed, it is skipped. */
static void three_tries_missed_skip(const char *what, void *e, void *h)
{
    three_tries_missed(what);
    free(e);
    free(h);
    skip();
}

typedef struct early {
    tw_service *s;
    uint64_t deadline;     /* service time */
    atomic_int runs;
    atomic_int early;      /* ran before its deadline */
    int cancelled;
} early;

static atomic_int g_before_step; /* runs that started before the step to their tick */

static void early_run(tw_timer t, void *arg)
{
    (void)t;
    early *e = arg;
    if (tw_now(e->s) < e->deadline)
        atomic_fetch_add(&e->early, 1);
    /* Relaxed: the drainer's cur, a reading for a count. */
    if (atomic_load_explicit(&e->s->wheel.cur, memory_order_relaxed) <
        tw__tick_of(e->s, e->deadline - e->s->origin))
        atomic_fetch_add(&g_before_step, 1);
    atomic_fetch_add(&e->runs, 1);
}

static void count_pending(const tw_timer_info *info, void *ctx)
{
    (void)info;
    (*(size_t *)ctx)++;
}

/* Every timer neither cancelled nor moved away ran once, none before its
 * deadline. stats.fired counts a run as it starts: the last callbacks may
 * still be on their way to their own count, so wait for them (5 s at most). */
static void expect_runs(tw_service *s, early *e)
{
    uint64_t give_up = tw_now(s) + 5 * T_S;
    for (int i = 0; i < EARLY_N; i++) {
        bool want_run = !e[i].cancelled && e[i].deadline != UINT64_MAX;
        while (want_run && atomic_load(&e[i].runs) == 0 && tw_now(s) < give_up)
            t_sleep_ns(T_MS);
    }
    for (int i = 0; i < EARLY_N; i++) {
        int want = e[i].cancelled || e[i].deadline == UINT64_MAX ? 0 : 1;
        if (atomic_load(&e[i].runs) != want)
            fail_msg("timer %d ran %d times, expected %d", i, atomic_load(&e[i].runs), want);
        if (atomic_load(&e[i].early))
            fail_msg("timer %d ran before its deadline", i);
    }
}

/* One try: a fresh service, EARLY_N timers due at *due, and a wait for
 * the early claim of their slot. The cursor claims it when it wakes, the
 * claim's lead (cursor.c early_lead: 250 ns an entry, some 50 ms here;
 * PLAIN_LEAD under TSan) before the tick; a cursor kept off the CPU for all of those 50 ms steps
 * to the tick and claims the slot there, as any other. That is the host's
 * doing, so it returns NULL and the caller tries again. */
static tw_service *early_try(tw_config *cfg, early *e, tw_timer *h, uint64_t *due)
{
    tw__early_lead_override = PLAIN_LEAD;
    tw_service *s = t_service_cfg(cfg);
    tw__early_lead_override = 0;
    /* Armed with the clock paused: a slow build (valgrind) takes longer
     * than the 800 ms to arm 200,000 timers, and the tick would come
     * before the cursor could see the slot whole (the test failed so in
     * CI, before and after d46f35a). */
    ASSERT_RC(tw_pause(s), TW_OK);
    *due = tw_now(s) + HOOK_DUE; /* one tick for all of them */
    for (int i = 0; i < EARLY_N; i++) {
        e[i].s = s;
        e[i].deadline = *due;
        atomic_store(&e[i].runs, 0);
        atomic_store(&e[i].early, 0);
        e[i].cancelled = 0;
        ASSERT_RC(tw_schedule_at(s, *due, early_run, &e[i], &h[i]), TW_OK);
    }
    ASSERT_RC(tw_resume(s), TW_OK);
    /* Wait for the early claim (it comes tens of ticks before the tick),
     * or for the first run, which comes after the step to the tick. */
    uint64_t limit = *due + 5 * T_S;
    for (;;) {
        if (tw__rare_total(s, TW_RARE_EARLY_CLAIM) != 0)
            return s;
        tw_stats st;
        t_stats(s, &st);
        if (st.fired != 0)
            break;
        if (tw_now(s) >= limit)
            fail_msg("no early claim and no run 5 s after the tick");
        t_sleep_ns(T_MS);
    }
    /* An early claim counts itself as it starts, before any of its timers
     * can run (it may hand them over before it ends: wheel.c). */
    if (tw__rare_total(s, TW_RARE_EARLY_CLAIM) != 0)
        return s;
    tw_destroy(s);
    return NULL;
}

/* A service with `workers` workers (0: the cursor runs the callbacks)
 * whose EARLY_N timers (*e, *h) due at *due were claimed early. Three
 * tries: a cursor that never claims early fails all three. */
static tw_service *claimed_early_on(unsigned workers, tw_config *cfg, early **e, tw_timer **h,
                                    uint64_t *due)
{
    tw_config_init(cfg);
    cfg->workers = workers;
    *e = calloc(EARLY_N, sizeof **e);
    *h = calloc(EARLY_N, sizeof **h);
    assert_non_null(*e);
    assert_non_null(*h);
    tw_service *s = NULL;
    for (int attempt = 1; attempt <= 3 && !s; attempt++) {
        s = early_try(cfg, *e, *h, due);
        if (!s)
            print_message("      try %d: the slot was claimed at its tick, not early\n",
                          attempt);
    }
    if (!s) {
        three_tries_missed_skip(
            "3 tries, no early claim: each time the slot was claimed at its tick", *e, *h);
    }
    return s;
}

static tw_service *claimed_early(tw_config *cfg, early **e, tw_timer **h, uint64_t *due)
{
    return claimed_early_on(2, cfg, e, h, due);
}

static void large_slot_claimed_early_on(unsigned workers)
{
    tw_config cfg;
    early *e;
    tw_timer *h;
    uint64_t due;
    atomic_store(&g_before_step, 0);
    tw_service *s = claimed_early_on(workers, &cfg, &e, &h, &due);
    /* Claimed timers are pending until they start: they are all counted,
     * and the next due time is at most the tick's. The walk is made with
     * the service paused: under TSan the claim is seen only after the
     * tick, and the walk of 200,000 is long enough for runs to start
     * during it, which rightly leave the count. Paused, no run starts
     * (pause.c: the gate) and stats.fired holds every one that did: all
     * the others are claimed and not started, before the tick or after
     * it, and must be counted. */
    ASSERT_RC(tw_pause(s), TW_OK);
    uint64_t walked_at = tw_now(s); /* frozen until tw_resume */
    tw_stats walk;
    t_stats(s, &walk);
    if (walked_at < due)
        assert_int_equal(walk.fired, 0); /* none ran before its deadline */
    size_t n = 0;
    tw_foreach_pending(s, count_pending, &n);
    assert_int_equal(n, EARLY_N - walk.fired);
    if (n != 0)
        assert_true(tw_next_due(s) <= due + cfg.tick_ns);
    print_message("      walked at %+.1f ms from the tick: %zu claimed, not started\n",
                  ((double)walked_at - (double)due) / 1e6, n);
    ASSERT_RC(tw_resume(s), TW_OK);
    /* Cancel some, move some an hour away: the claim does not stand in
     * the way. */
    int cancelled = 0, moved = 0;
    for (int i = 0; i < EARLY_N; i += 7) {
        int rc = tw_cancel(s, h[i]);
        if (rc == TW_OK) {
            e[i].cancelled = 1;
            cancelled++;
        } else {
            ASSERT_RC(rc, TW_ENOENT); /* it started meanwhile */
        }
    }
    for (int i = 3; i < EARLY_N; i += 11) {
        if (e[i].cancelled)
            continue;
        int rc = tw_reschedule(s, h[i], 3600 * T_S);
        if (rc == TW_OK) {
            e[i].deadline = UINT64_MAX; /* must not run in this test */
            moved++;
        } else {
            ASSERT_RC(rc, TW_ENOENT);
        }
    }
    /* Wait for the rest to start (30 s at most: under TSan on a loaded
     * host the claim alone ended up to 1.4 s after the tick, and 2 s
     * after it was not always enough for all to start). */
    uint64_t limit = tw_now(s) + 30 * T_S;
    while (tw_now(s) < limit) {
        tw_stats st;
        t_stats(s, &st);
        if (st.fired == (uint64_t)(EARLY_N - cancelled - moved))
            break;
        t_sleep_ns(10 * T_MS);
    }
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.pending, (uint64_t)moved);
    expect_runs(s, e);
    print_message("      %d cancelled, %d moved after the early claim; %d started before "
                  "the step to their tick\n", cancelled, moved, atomic_load(&g_before_step));
    /* Without workers the cursor runs what it staged before it steps to
     * the tick (wheel.c, tw__wheel_take_staged), not behind the step's
     * drains (planted: without it, none does). */
    if (workers == 0)
        assert_true(atomic_load(&g_before_step) > 0);
    tw_destroy(s);
    free(e);
    free(h);
}

/* workers = 0: timers an early claim staged are pending, claimed, and in
 * no slot; a timer of an earlier tick run on the cursor meanwhile must not
 * take them off tw_next_due (wheel.c, tw__claim_floor_set: its list's
 * floor went to UINT64_MAX at its end, "nothing pending", while the burst
 * waited; a review's program, 2026-11-29). Asked inside that timer's
 * callback and after it, both before the burst's tick. */
static _Atomic uint64_t g_next_in_cb;
static tw_service *_Atomic g_next_s;

static void ask_next_due(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&g_next_in_cb, tw_next_due(atomic_load(&g_next_s)));
}

static void run_nothing(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
}

/* workers = 0: STAGED_N timers run by cb, due HOOK_DUE ahead (*due), armed
 * with the clock paused and claimed early (HOOK_LEAD ahead). Skips the
 * test if no claim came `margin` ns before the tick: the host kept the
 * cursor off its CPU. */
enum { STAGED_N = 20000 };

static tw_service *staged_burst_without_workers(tw_callback cb, uint64_t *due, uint64_t margin)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 0;
    tw__early_lead_override = HOOK_LEAD; /* claimed well before the tick */
    tw_service *s = t_service_cfg(&cfg);
    tw__early_lead_override = 0;
    ASSERT_RC(tw_pause(s), TW_OK);
    *due = tw_now(s) + HOOK_DUE;
    for (int i = 0; i < STAGED_N; i++)
        ASSERT_RC(tw_schedule_at(s, *due, cb, NULL, NULL), TW_OK);
    ASSERT_RC(tw_resume(s), TW_OK);
    while (tw__rare_total(s, TW_RARE_EARLY_CLAIM) == 0) {
        if (tw_now(s) + margin >= *due)
            skip();
        t_sleep_ns(T_MS);
    }
    return s;
}

static void next_due_sees_staged_timers_without_workers(void **state)
{
    (void)state;
    atomic_store(&g_next_in_cb, 0);
    uint64_t due;
    tw_service *s = staged_burst_without_workers(run_nothing, &due, 0);
    atomic_store(&g_next_s, s);
    ASSERT_RC(tw_schedule(s, 20 * T_MS, ask_next_due, NULL, NULL), TW_OK);
    while (atomic_load(&g_next_in_cb) == 0 && tw_now(s) < due)
        t_sleep_ns(T_MS);
    uint64_t after = tw_next_due(s);
    tw_stats st;
    t_stats(s, &st);
    if (tw_now(s) >= due || st.fired > 1)
        skip(); /* the burst's tick came first: nothing left to ask about */
    print_message("      next due %+.1f ms (in the callback), %+.1f ms (after), from the "
                  "burst's deadline\n",
                  ((double)atomic_load(&g_next_in_cb) - (double)due) / 1e6,
                  ((double)after - (double)due) / 1e6);
    assert_true(atomic_load(&g_next_in_cb) <= due + T_MS);
    assert_true(after <= due + T_MS);
    tw_destroy(s);
}

/* workers = 0, a cursor late past an early-claimed tick T (a callback of
 * an earlier tick took 15 ms): a timer due between that callback's tick
 * and T starts before the burst staged for T, as earliest first asks
 * (wheel.c, tw__wheel_take_staged: running what was staged before the
 * step made it wait for the whole burst; a review's program, 2026-11-29). */
static _Atomic uint64_t g_order_first_burst, g_order_y;
static tw_service *_Atomic g_order_s;

static void order_burst(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    uint64_t zero = 0;
    atomic_compare_exchange_strong(&g_order_first_burst, &zero, tw_now(atomic_load(&g_order_s)));
}

static void order_slow(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    t_sleep_ns(15 * T_MS);
}

static void order_y(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&g_order_y, tw_now(atomic_load(&g_order_s)));
}

static void late_cursor_runs_earlier_ticks_before_a_staged_burst(void **state)
{
    (void)state;
    atomic_store(&g_order_first_burst, 0);
    atomic_store(&g_order_y, 0);
    uint64_t due;
    tw_service *s = staged_burst_without_workers(order_burst, &due, 30 * T_MS);
    atomic_store(&g_order_s, s);
    while (tw_now(s) < due - 60 * T_MS)
        t_sleep_ns(T_MS);
    if (tw_now(s) >= due - 30 * T_MS)
        skip(); /* the test itself was kept off its CPU */
    ASSERT_RC(tw_schedule_at(s, due - 10 * T_MS, order_slow, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule_at(s, due - 5 * T_MS, order_y, NULL, NULL), TW_OK);
    uint64_t give_up = t_mono_ns() + 30 * T_S;
    while ((atomic_load(&g_order_y) == 0 || atomic_load(&g_order_first_burst) == 0) &&
           t_mono_ns() < give_up)
        t_sleep_ns(T_MS);
    uint64_t y = atomic_load(&g_order_y), b = atomic_load(&g_order_first_burst);
    print_message("      the timer due 5 ms before the burst started %+.1f ms from the burst's "
                  "deadline, the burst's first %+.1f ms\n",
                  ((double)y - (double)due) / 1e6, ((double)b - (double)due) / 1e6);
    assert_true(y != 0 && b != 0);
    assert_true(y <= b);
    tw_destroy(s);
}

static void large_slot_claimed_early(void **state)
{
    (void)state;
    large_slot_claimed_early_on(2);
}

/* Arm n timers of e: the first `burst` due at `due` (run by burst_cb),
 * the others one a tick from the tick after `now` (run by tick_cb). */
static void arm_burst_and_ticks(tw_service *s, early *e, size_t burst, size_t n, uint64_t now,
                                uint64_t due, tw_callback burst_cb, tw_callback tick_cb)
{
    for (size_t i = 0; i < n; i++) {
        e[i].s = s;
        e[i].deadline = i < burst ? due : now + (i - burst + 1) * s->cfg.tick_ns;
        ASSERT_RC(tw_schedule_at(s, e[i].deadline, i < burst ? burst_cb : tick_cb, &e[i], NULL),
                  TW_OK);
    }
}

/* Wait until n timers have started, 30 s after `due` at most. */
static void wait_fired(tw_service *s, uint64_t n, uint64_t due)
{
    uint64_t limit = due + 30 * T_S;
    for (;;) {
        tw_stats st;
        t_stats(s, &st);
        if (st.fired == n)
            return;
        if (tw_now(s) >= limit)
            fail_msg("%" PRIu64 " of %" PRIu64 " ran 30 s after the tick", st.fired, n);
        t_sleep_ns(T_MS);
    }
}

/* Every one of e[0..n) ran once, none before its deadline (after tw_stop:
 * every callback returned). */
static void expect_each_once(const early *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&e[i].runs) != 1)
            fail_msg("timer %zu ran %d times", i, atomic_load(&e[i].runs));
        if (atomic_load(&e[i].early))
            fail_msg("timer %zu ran before its deadline", i);
    }
}

/* A burst beyond level 0 (SMALL_SLOTS a level: level 0 spans 256 ms, the
 * burst is HOOK_DUE ahead, not at its level-1 slot's epoch) waits in a
 * level-1 slot; the cursor drains that slot into level 0 before its epoch
 * (wheel.c, early cascades), and the level-0 slot it fills is then
 * claimed early as any other. Before, the step to the level-1 epoch placed
 * a million again just before their tick, and the first callback came
 * 115-150 ms late. Checked: the drain came (TW_RARE_EARLY_CASCADE; planted,
 * the cursor's call removed: none, and no early claim either), and every
 * timer ran once, none early, on 2 workers and on none. Whether the early
 * claim then comes in time is the host's speed (valgrind's is not
 * enough): printed, not asked. CASCADE_N is past TW_EARLY_MIN, small
 * enough for valgrind to drain in time. */
enum { CASCADE_N = 20000 };
enum { SMALL_SLOTS = 256, SMALL_LEVEL1_TICKS = 16 }; /* 16: wheel.c, step_for(8) */

static void burst_beyond_level_0_on(unsigned workers)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = workers;
    cfg.wheel_slots = SMALL_SLOTS;
    early *e = calloc(CASCADE_N, sizeof *e);
    assert_non_null(e);
    tw_service *s = t_service_cfg(&cfg);
    ASSERT_RC(tw_pause(s), TW_OK); /* armed whole before the cursor looks */
    uint64_t due = tw_now(s) + HOOK_DUE;
    while (tw__tick_of(s, due - s->origin) % SMALL_LEVEL1_TICKS == 0)
        due += cfg.tick_ns;
    for (int i = 0; i < CASCADE_N; i++) {
        e[i].s = s;
        e[i].deadline = due;
        ASSERT_RC(tw_schedule_at(s, due, early_run, &e[i], NULL), TW_OK);
    }
    ASSERT_RC(tw_resume(s), TW_OK);
    wait_fired(s, CASCADE_N, due);
    uint64_t cascades = tw__rare_total(s, TW_RARE_EARLY_CASCADE);
    print_message("      workers %u: %" PRIu64 " early cascade(s), %" PRIu64 " early claim(s)\n",
                  workers, cascades, tw__rare_total(s, TW_RARE_EARLY_CLAIM));
    assert_true(cascades >= 1);
    ASSERT_RC(tw_stop(s, NULL), TW_OK); /* every callback returned */
    expect_each_once(e, CASCADE_N);
    tw_destroy(s);
    free(e);
}

static void burst_beyond_level_0_cascaded_early(void **state)
{
    (void)state;
    burst_beyond_level_0_on(2);
    burst_beyond_level_0_on(0);
}

/* A busy service: beside a burst, a timer due at every tick from the
 * first after the arming to BUSY_PAST ticks after the burst's. The cursor
 * then always has the next tick's work; before (until 2026-11-29) it
 * looked for a burst only when it had not (cursor.c, start_burst), so such
 * a burst was claimed, or drained into level 0, at its tick (bench/beside
 * with its probes armed 20-50 ms ahead: a million's first callback 2-20
 * ms after the deadline). Checked: the early claim (`beyond` 0: the burst
 * in level 0) or the early drain (1: a level-1 slot of a 256-slot wheel)
 * came, and every timer ran once, none early. Planted (the cursor's
 * return before start_burst when the next work is the next tick): none,
 * in three tries (a try whose cursor was kept off the CPU past the lead
 * is the host's doing, as in early_try). */
enum { BUSY_PAST = 16 };

static atomic_int g_ticker_runs; /* the busy service's timers of every tick */
static uint64_t g_busy_lead = PLAIN_LEAD; /* tw__early_lead_override for busy_burst_try */

static void ticker_run(tw_timer t, void *arg)
{
    early_run(t, arg);
    atomic_fetch_add(&g_ticker_runs, 1);
}

/* One try: whether the burst was started on early. */
static bool busy_burst_try(unsigned workers, int beyond)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = workers;
    if (beyond)
        cfg.wheel_slots = SMALL_SLOTS;
    size_t burst = beyond ? CASCADE_N : EARLY_N;
    size_t ticks = HOOK_DUE / cfg.tick_ns + BUSY_PAST;
    early *e = calloc(burst + ticks, sizeof *e);
    assert_non_null(e);
    tw__early_lead_override = g_busy_lead;
    tw_service *s = t_service_cfg(&cfg);
    tw__early_lead_override = 0;
    ASSERT_RC(tw_pause(s), TW_OK); /* armed whole before the cursor looks */
    uint64_t now = tw_now(s), due = now + HOOK_DUE;
    while (beyond && tw__tick_of(s, due - s->origin) % SMALL_LEVEL1_TICKS == 0)
        due += cfg.tick_ns; /* not the level-1 epoch itself: the step claims that */
    arm_burst_and_ticks(s, e, burst, burst + ticks, now, due, early_run, ticker_run);
    ASSERT_RC(tw_resume(s), TW_OK);
    wait_fired(s, burst + ticks, due);
    uint64_t cascades = tw__rare_total(s, TW_RARE_EARLY_CASCADE);
    uint64_t claims = tw__rare_total(s, TW_RARE_EARLY_CLAIM);
    print_message("      workers %u, %s: %" PRIu64 " early drain(s) (%" PRIu64
                  " gave way), %" PRIu64 " early claim(s)\n",
                  workers, beyond ? "beyond level 0" : "level 0", cascades,
                  tw__rare_total(s, TW_RARE_CASCADE_YIELDED), claims);
    ASSERT_RC(tw_stop(s, NULL), TW_OK); /* every callback returned */
    expect_each_once(e, burst + ticks);
    tw_destroy(s);
    free(e);
    return beyond ? cascades >= 1 : claims >= 1;
}

/* Whether a try started on the burst early (false only where
 * three_tries_missed lets a miss pass: valgrind). */
static bool busy_burst_on(unsigned workers, int beyond)
{
    for (int attempt = 1; attempt <= 3; attempt++) {
        if (busy_burst_try(workers, beyond))
            return true;
        print_message("      try %d: the burst was started on at its tick, not early\n",
                      attempt);
    }
    three_tries_missed("3 tries, and the burst was never started on early");
    return false;
}

static void burst_started_early_beside_timers_due_every_tick(void **state)
{
    (void)state;
    busy_burst_on(2, 0);
    busy_burst_on(0, 0);
    busy_burst_on(2, 1);
    busy_burst_on(0, 1);
}

/* A burst while the cursor compacts: steady cancel churn keeps the
 * wheel's compaction going tick after tick, and the cursor then passes
 * its loop through the compaction branch, never through cursor_sleep,
 * where bursts were started (a review, 2026-11-29: a burst was claimed at
 * its tick). The hook stands in for the churn: compaction says it has
 * more to do on every pass. Planted (no start_burst in that branch): the
 * burst at level 0 was claimed at its tick in 3 tries of 3. */
static bool always_more_to_compact(void)
{
    return true;
}

static void burst_started_early_while_compacting(void **state)
{
    (void)state;
    atomic_store(&tw__compacting_hook, always_more_to_compact);
    busy_burst_on(2, 0);
    busy_burst_on(2, 1);
    atomic_store(&tw__compacting_hook, NULL);
}

/* An early drain gives the cursor back to an earlier tick's work between
 * its pieces, and goes on after (wheel.c, early cascades): done in one
 * go, a million held every tick up for 25-40 ms (bench/beside, 256 slots
 * a level). The busy service above; the hook holds the drain after its
 * first piece until the next tick's timer is due (3 ms), then, at each
 * later piece, waits (up to 2 s) for a timer of the ticks to run: one
 * must, while the drain still has entries left. Planted (no yield in
 * cascade_pieces): none ran mid-drain, and nothing gave way. */
static atomic_int g_drain_pieces, g_ran_mid_drain, g_runs_at_hold;

static void drain_piece_hook(size_t placed, size_t n)
{
    if (atomic_fetch_add(&g_drain_pieces, 1) == 0) {
        atomic_store(&g_runs_at_hold, atomic_load(&g_ticker_runs));
        t_sleep_ns(3 * T_MS); /* past the next tick's boundary: its timer is due */
        return;
    }
    if (placed == n || atomic_load(&g_ran_mid_drain))
        return;
    for (int k = 0; k < 2000 && !atomic_load(&g_ran_mid_drain); k++) {
        if (atomic_load(&g_ticker_runs) > atomic_load(&g_runs_at_hold))
            atomic_store(&g_ran_mid_drain, 1);
        else
            t_sleep_ns(T_MS);
    }
}

static void early_drain_gives_way_to_an_earlier_tick(void **state)
{
    (void)state;
    for (unsigned workers = 0; workers <= 2; workers += 2) {
        atomic_store(&g_drain_pieces, 0);
        atomic_store(&g_ran_mid_drain, 0);
        atomic_store(&tw__cascade_piece_hook, drain_piece_hook);
        g_busy_lead = HOOK_LEAD; /* the drain begins its room's 240 ticks ahead, so
                                    that a held-up cursor still finds pieces left */
        bool met = busy_burst_on(workers, 1);
        g_busy_lead = PLAIN_LEAD;
        atomic_store(&tw__cascade_piece_hook, NULL);
        print_message("      workers %u: %d pieces seen, a timer ran mid-drain: %d\n", workers,
                      atomic_load(&g_drain_pieces), atomic_load(&g_ran_mid_drain));
        if (!met)
            continue; /* no early drain to give way (valgrind's pace, above) */
        assert_true(atomic_load(&g_drain_pieces) > 1);
        assert_int_equal(atomic_load(&g_ran_mid_drain), 1);
    }
}

/* A burst moved in from one lane of two: one thread, kept on one CPU,
 * pulls MOVED_N timers armed an hour away in to one tick (a move earlier
 * is placed by the mover itself, in its CPU's lane). A slot's lane is
 * marked as it fills (wheel.c, bursts); marked only once, at TW_EARLY_MIN
 * / lanes, the cursor saw half a burst, dropped it, and nothing told it
 * again (a review's program, 2026-11-29: claimed at its tick). Now the
 * mark comes again at each doubling, and a marked slot still small is
 * looked at again before its tick. Checked: the early claim came (three
 * tries: a cursor kept off the CPU past the lead is the host's doing);
 * every timer ran once, none early. Planted (one mark, no second look):
 * no early claim in three tries. MOVED_N stays below the 2^16
 * placements at which a stripe wakes the cursor anyway. */
enum { MOVED_N = 20000 };

static bool moved_in_try(unsigned workers)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = workers;
    early *e = calloc(MOVED_N, sizeof *e);
    tw_timer *h = calloc(MOVED_N, sizeof *h);
    assert_non_null(e);
    assert_non_null(h);
    tw__lanes_override = 2;
    tw__early_lead_override = PLAIN_LEAD;
    tw_service *s = t_service_cfg(&cfg);
    tw__early_lead_override = 0;
    tw__lanes_override = 0;
    for (int i = 0; i < MOVED_N; i++) {
        e[i].s = s;
        e[i].deadline = UINT64_MAX; /* not to run at this arming */
        ASSERT_RC(tw_schedule(s, 3600 * T_S, early_run, &e[i], &h[i]), TW_OK);
    }
    t_sleep_ns(50 * T_MS); /* the logs drained into the wheel: the moves below place */
    cpu_set_t mask, one;
    assert_int_equal(sched_getaffinity(0, sizeof mask, &mask), 0);
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    uint64_t due = tw_now(s) + HOOK_DUE;
    for (int i = 0; i < MOVED_N; i++) {
        e[i].deadline = due;
        ASSERT_RC(tw_reschedule_at(s, h[i], due), TW_OK);
    }
    assert_int_equal(sched_setaffinity(0, sizeof mask, &mask), 0);
    wait_fired(s, MOVED_N, due);
    uint64_t claims = tw__rare_total(s, TW_RARE_EARLY_CLAIM);
    print_message("      workers %u: %" PRIu64 " early claim(s)\n", workers, claims);
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    expect_each_once(e, MOVED_N);
    tw_destroy(s);
    free(e);
    free(h);
    return claims >= 1;
}

static void burst_moved_in_from_one_lane_claimed_early(void **state)
{
    (void)state;
    for (unsigned workers = 0; workers <= 2; workers += 2) {
        for (int attempt = 1; !moved_in_try(workers); attempt++) {
            print_message("      try %d: claimed at its tick, not early\n", attempt);
            if (attempt == 3) {
                three_tries_missed("3 tries, and the burst moved in was never claimed early");
                break;
            }
        }
    }
}

/* A claim short of time beside an earlier tick's work: with a lead of 2
 * ticks (tw__early_lead_override), the cursor comes to the burst with no
 * time left to make its room, and the tick before it has a timer. Before
 * (a review's program, 2026-11-29), the claim went ahead, went late while
 * taking the slot, and ran the burst (workers = 0: inline) before that
 * timer, 190 ms late; now the claim is declined and the step claims the
 * burst after the earlier tick (wheel.c, no_time_left), and a claim gone
 * late never hands over before an earlier tick's work
 * (hand_over_once_due). Checked on workers = 0, where the order of runs
 * is the cursor's: the timer of the tick before the burst's ran before
 * the burst's first; every timer once, none early. Planted (the claim
 * goes ahead and goes late regardless, its take held past the tick by
 * the test's hook): the burst ran first. */
static atomic_int g_run_order, g_before_seq, g_burst_first_seq;
static _Atomic uint64_t g_before_due;

static void ordered_ticker_run(tw_timer t, void *arg)
{
    early *e = arg;
    early_run(t, arg);
    int seq = atomic_fetch_add(&g_run_order, 1);
    if (e->deadline == atomic_load(&g_before_due))
        atomic_store(&g_before_seq, seq);
}

static void ordered_burst_run(tw_timer t, void *arg)
{
    early_run(t, arg);
    int seq = atomic_fetch_add(&g_run_order, 1);
    int none = -1;
    atomic_compare_exchange_strong(&g_burst_first_seq, &none, seq);
}

/* The claim's first look at the clock (if it goes ahead): held until the
 * burst's tick has passed, as a host that kept the cursor off its CPU. */
static tw_service *_Atomic g_short_s;

static int hold_past_the_tick(bool late, size_t staged)
{
    tw_service *s = atomic_load(&g_short_s);
    if (late || staged != 0 || !s)
        return 0;
    uint64_t past = atomic_load(&g_before_due) + 3 * T_MS; /* the burst's tick + 2 ms */
    while (tw_now(s) < past)
        t_sleep_ns(T_MS / 4);
    return 0;
}

/* The shape of the ordered tests: a service with `workers` workers and an
 * early claim's lead of `lead` ticks, paused; its burst's tick *due, HOOK_DUE
 * ahead of *now; room in *e for EARLY_N and *ticks timers of the ticks;
 * the order of runs reset. */
static tw_service *ordered_service(unsigned workers, uint64_t lead, early **e, size_t *ticks,
                                   uint64_t *now, uint64_t *due)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = workers;
    *ticks = HOOK_DUE / cfg.tick_ns + BUSY_PAST;
    *e = calloc(EARLY_N + *ticks, sizeof **e);
    assert_non_null(*e);
    atomic_store(&g_run_order, 0);
    atomic_store(&g_before_seq, -1);
    atomic_store(&g_burst_first_seq, -1);
    tw__early_lead_override = lead;
    tw_service *s = t_service_cfg(&cfg);
    tw__early_lead_override = 0;
    ASSERT_RC(tw_pause(s), TW_OK);
    *now = tw_now(s);
    *due = *now + HOOK_DUE;
    atomic_store(&g_before_due, *due - cfg.tick_ns);
    return s;
}

/* Arm, run all, take the hooks out and stop; the order the timer of the
 * tick before the burst's and the burst's first started in. */
static void run_ordered(tw_service *s, early *e, size_t ticks, uint64_t now, uint64_t due,
                        int *before, int *first)
{
    arm_burst_and_ticks(s, e, EARLY_N, EARLY_N + ticks, now, due, ordered_burst_run,
                        ordered_ticker_run);
    ASSERT_RC(tw_resume(s), TW_OK);
    wait_fired(s, EARLY_N + ticks, due);
    atomic_store(&tw__cursor_plan_hook, NULL);
    atomic_store(&tw__early_piece_hook, NULL);
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    *before = atomic_load(&g_before_seq);
    *first = atomic_load(&g_burst_first_seq);
}

static void claim_short_of_time_leaves_the_tick_before_first(void **state)
{
    (void)state;
    early *e;
    size_t ticks;
    uint64_t now, due;
    tw_service *s = ordered_service(0, 2, &e, &ticks, &now, &due);
    atomic_store(&g_short_s, s);
    atomic_store(&tw__early_piece_hook, hold_past_the_tick);
    int before, first;
    run_ordered(s, e, ticks, now, due, &before, &first);
    print_message("      the tick before's timer ran %d-th, the burst's first %d-th; %" PRIu64
                  " early claim(s), %" PRIu64 " gone late\n", before, first,
                  tw__rare_total(s, TW_RARE_EARLY_CLAIM), tw__rare_total(s, TW_RARE_EARLY_LATE));
    uint64_t claims = tw__rare_total(s, TW_RARE_EARLY_CLAIM);
    expect_each_once(e, EARLY_N + ticks);
    tw_destroy(s);
    free(e);
    assert_int_equal(claims, 0); /* declined (planted, no decline: 1, gone late) */
    assert_true(before >= 0 && first >= 0);
    assert_true(before < first);
}

/* A host that keeps the cursor off its CPU past an early claim's tick,
 * beside timers due every tick (2 workers, a burst claimed HOOK_LEAD
 * ahead). Either way the timer of the tick before the claim's must start
 * before the burst's first:
 *  - `hold_claim` 1: the claim held at its first look at the clock until
 *    2 ms past its tick. The ticks before it have work, so it does not go
 *    late (wheel.c, hand_over_once_due), which handed the burst to the
 *    workers at once, 60-315 ms ahead of those ticks' timers (a review's
 *    program); it gives the cursor back and the steps run them first.
 *    Planted (late by the clock alone): the burst first.
 *  - 0: the cursor held (tw__cursor_plan_hook) from a few ticks before the
 *    claim's tick, the claim staged, until 2 ms past it. It then steps to
 *    the tick before the claim's first (cursor.c, tw__wheel_step_to);
 *    before, one step handed the staged list over first, and the timer of
 *    the tick before ran behind the burst (the review: 45-66 ms late).
 *    Planted (one step): the burst first.
 * The workers' runs are ordered by when they start: three tries, one must
 * see the right order. */
static tw_service *_Atomic g_hold_s;
static atomic_int g_cursor_held;

static void hold_the_cursor_past_the_tick(tw_service *s)
{
    uint64_t before = atomic_load(&g_before_due); /* the tick before the claim's */
    /* Relaxed: the cursor's own variable, read on the cursor. */
    uint64_t cur = atomic_load_explicit(&s->wheel.cur, memory_order_relaxed);
    if (s != atomic_load(&g_hold_s) || atomic_load(&g_cursor_held) || s->wheel.staged.n == 0 ||
        cur + 3 < tw__tick_of(s, before - s->origin))
        return;
    atomic_store(&g_cursor_held, 1);
    while (tw_now(s) < before + 3 * T_MS)
        t_sleep_ns(T_MS / 4);
}

static bool late_cursor_try(int hold_claim)
{
    atomic_store(&g_cursor_held, 0);
    early *e;
    size_t ticks;
    uint64_t now, due;
    tw_service *s = ordered_service(2, HOOK_LEAD, &e, &ticks, &now, &due);
    if (hold_claim) {
        atomic_store(&g_short_s, s);
        atomic_store(&tw__early_piece_hook, hold_past_the_tick);
    } else {
        atomic_store(&g_hold_s, s);
        atomic_store(&tw__cursor_plan_hook, hold_the_cursor_past_the_tick);
    }
    int before, first;
    run_ordered(s, e, ticks, now, due, &before, &first);
    int held = hold_claim ? tw__rare_total(s, TW_RARE_EARLY_CLAIM) != 0
                          : atomic_load(&g_cursor_held);
    print_message("      held %d; the tick before's timer ran %d-th, the burst's first %d-th\n",
                  held, before, first);
    expect_each_once(e, EARLY_N + ticks);
    tw_destroy(s);
    free(e);
    return held && before >= 0 && first >= 0 && before < first;
}

/* Under ThreadSanitizer the order of two workers' starts is its pace, not
 * ours: a fresh-clone CI run (2026-11-30, ctest -j2) saw the burst's first
 * start 40-345 runs before the timer of the tick before in three tries of
 * three, with the claim held as it should be. There the runs are still
 * checked (each once, none early) and the order is left to the other
 * builds, as under valgrind (three_tries_missed). */
static void order_missed(const char *what)
{
#ifdef TW_SAN_THREAD
    print_message("      under ThreadSanitizer: %s (its pace; not asserted there)\n", what);
#else
    three_tries_missed(what);
#endif
}

static void late_cursor_runs_the_tick_before_a_claim_first(void **state)
{
    (void)state;
    for (int hold_claim = 1; hold_claim >= 0; hold_claim--) {
        for (int attempt = 1; !late_cursor_try(hold_claim); attempt++) {
            if (attempt == 3) {
                order_missed(hold_claim ? "3 tries (the claim held): the timer of the tick "
                                          "before never started before the burst"
                                        : "3 tries (the cursor held): the timer of the "
                                          "tick before never started before the burst");
                break;
            }
        }
    }
}

/* workers = 0: the cursor claims the slot early as well, and runs its
 * timers itself after the step to their tick (wheel.c): before, it
 * claimed a million at the tick and only then ran the first (WL5 on
 * workers = 0: 75 ms after the deadline). The same checks: claimed
 * timers pending until they start, cancel and move still work, every
 * other one runs once, none early (an inline run of a timer not yet due
 * aborts: workers.c, run_inline). */
static void large_slot_claimed_early_without_workers(void **state)
{
    (void)state;
    large_slot_claimed_early_on(0);
}

/* An early claim that its tick overtakes (a slot still filling while it is
 * claimed, a slow host) hands what it has staged to the workers at the
 * tick and claims and delivers the rest as the step does (wheel.c); before,
 * the whole claim held the tick up (WL5's first callback 2-50 ms late). No
 * host is slow on cue, so once LATE_AT timers are staged the test's hook
 * (tw__early_piece_hook) makes the claim late: by holding it until its
 * tick has come, so that the claim's own look at the clock finds it late,
 * or (well before the tick) by its return. Then it holds the claim at its
 * next piece until a callback has run: the staged timers must start while
 * the claim is still going. Timers cancelled and moved before the claim
 * meet it as dead entries; every other one must run exactly once, none
 * before its deadline. */
enum { LATE_AT = 10000 };

static atomic_int g_runs_total;   /* every early_run */
static atomic_int g_by_clock;      /* 1: make the claim late by holding it past its
                                      tick (its own look at the clock); 0: by the
                                      hook's return */
static _Atomic uint64_t g_due;     /* the timers' deadline (service time) */
static tw_service *_Atomic g_late_s;
static atomic_size_t g_staged_seen;
static atomic_int g_held;          /* the claim was held once it went late */
static atomic_int g_ran_while_held;

static void counted_run(tw_timer t, void *arg)
{
    early_run(t, arg);
    atomic_fetch_add(&g_runs_total, 1);
}

/* The shape of the hooked early-claim tests: 2 workers, a 1 ms tick (the
 * lead is in ticks), room for EARLY_N timers. */
static void hooked_shape(tw_config *cfg, early **e, tw_timer **h)
{
    tw_config_init(cfg);
    cfg->workers = 2;
    cfg->tick_ns = T_MS;
    *e = calloc(EARLY_N, sizeof **e);
    *h = calloc(EARLY_N, sizeof **h);
    assert_non_null(*e);
    assert_non_null(*h);
}

/* EARLY_N timers due at `due` (the caller has paused the clock, so that
 * they are armed whole before the cursor looks at their slot). */
static void arm_one_slot(tw_service *s, early *e, tw_timer *h, uint64_t due, tw_callback cb)
{
    for (int i = 0; i < EARLY_N; i++) {
        e[i].s = s;
        e[i].deadline = due;
        atomic_store(&e[i].runs, 0);
        atomic_store(&e[i].early, 0);
        e[i].cancelled = 0;
        ASSERT_RC(tw_schedule_at(s, due, cb, &e[i], &h[i]), TW_OK);
    }
}

static int late_piece_hook(bool late, size_t staged)
{
    if (!late) {
        atomic_store(&g_staged_seen, staged);
        if (staged < LATE_AT)
            return 0;
        if (!atomic_load(&g_by_clock))
            return 1;
        /* Hold the claim until its tick has come (30 s at most). */
        tw_service *s = atomic_load(&g_late_s);
        for (int ms = 0; ms < 30000 && tw_now(s) < atomic_load(&g_due); ms++)
            t_sleep_ns(T_MS);
        return 0;
    }
    if (atomic_exchange(&g_held, 1) || atomic_load(&g_staged_seen) == 0)
        return 0; /* held already, or nothing was handed over to wait for */
    /* The staged timers are the workers' now, due at their deadline. */
    for (int ms = 0; ms < 30000 && atomic_load(&g_runs_total) == 0; ms++)
        t_sleep_ns(T_MS);
    atomic_store(&g_ran_while_held, atomic_load(&g_runs_total) > 0);
    return 0;
}

static tw_service *late_try(tw_config *cfg, early *e, tw_timer *h, int *cancelled, int *moved)
{
    atomic_store(&g_runs_total, 0);
    atomic_store(&g_staged_seen, 0);
    atomic_store(&g_held, 0);
    atomic_store(&g_ran_while_held, 0);
    /* A lead of half the 800 ms: under TSan taking the slot alone outlasted
     * the lead by size (some 50 ms), and the claim went late on its own
     * with nothing staged yet. */
    tw__early_lead_override = HOOK_LEAD;
    tw_service *s = t_service_cfg(cfg);
    tw__early_lead_override = 0;
    ASSERT_RC(tw_pause(s), TW_OK); /* armed whole before the cursor looks */
    uint64_t due = tw_now(s) + HOOK_DUE; /* as early_try: valgrind arms slowly */
    atomic_store(&g_late_s, s);
    atomic_store(&g_due, due);
    *cancelled = *moved = 0;
    arm_one_slot(s, e, h, due, counted_run);
    for (int i = 0; i < EARLY_N; i += 7) {
        ASSERT_RC(tw_cancel(s, h[i]), TW_OK);
        e[i].cancelled = 1;
        (*cancelled)++;
    }
    for (int i = 3; i < EARLY_N; i += 11) {
        if (e[i].cancelled)
            continue;
        ASSERT_RC(tw_reschedule(s, h[i], 3600 * T_S), TW_OK);
        e[i].deadline = UINT64_MAX; /* must not run in this test */
        (*moved)++;
    }
    ASSERT_RC(tw_resume(s), TW_OK);
    uint64_t want = (uint64_t)(EARLY_N - *cancelled - *moved);
    uint64_t limit = due + 30 * T_S; /* TSan on a loaded host: see above */
    for (;;) {
        tw_stats st;
        t_stats(s, &st);
        if (st.fired >= want)
            break;
        if (tw_now(s) >= limit)
            fail_msg("%" PRIu64 " of %" PRIu64 " ran 30 s after the tick", st.fired, want);
        t_sleep_ns(10 * T_MS);
    }
    if (atomic_load(&g_held) && atomic_load(&g_staged_seen) != 0)
        return s;
    /* No early claim (the cursor was kept off the CPU through its lead and
     * stepped to the tick), or it went late on its own with nothing staged:
     * the host's doing. */
    tw_destroy(s);
    return NULL;
}

static void early_claim_late(int by_clock)
{
    atomic_store(&g_by_clock, by_clock);
    tw_config cfg;
    early *e;
    tw_timer *h;
    hooked_shape(&cfg, &e, &h);
    atomic_store(&tw__early_piece_hook, late_piece_hook);
    tw_service *s = NULL;
    int cancelled = 0, moved = 0;
    for (int attempt = 1; attempt <= 3 && !s; attempt++) {
        s = late_try(&cfg, e, h, &cancelled, &moved);
        if (!s)
            print_message("      try %d: no early claim went late with timers staged\n", attempt);
    }
    atomic_store(&tw__early_piece_hook, NULL);
    if (!s)
        three_tries_missed_skip("3 tries, and no early claim went late with timers staged", e, h);
    assert_true(tw__rare_total(s, TW_RARE_EARLY_LATE) >= 1);
    if (!atomic_load(&g_ran_while_held))
        fail_msg("%zu staged timers handed over, none ran while the claim was held",
                 atomic_load(&g_staged_seen));
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, (uint64_t)(EARLY_N - cancelled - moved));
    assert_int_equal(st.pending, (uint64_t)moved);
    expect_runs(s, e);
    print_message("      %zu staged when the claim went late; a run came while it was held\n",
                  atomic_load(&g_staged_seen));
    tw_destroy(s);
    free(e);
    free(h);
}

/* Held past its tick: the claim's own look at the clock makes it late. */
static void early_claim_overtaken_by_its_tick(void **state)
{
    (void)state;
    early_claim_late(1);
}

/* Made late by the hook well before the tick: the workers hold the
 * handed-over timers until their deadline. */
static void early_claim_handed_over_before_its_tick(void **state)
{
    (void)state;
    early_claim_late(0);
}

/* An early claim that would have to grow its staged list with too little
 * time left before its tick (here: any growth, the override making a KiB
 * cost 1000 s) waits for the tick instead, then hands the slot's timers
 * over through the due list as the step does: all run once, none early,
 * and the staged list never grew. Fresh memory on a VM took 26-32 ms to
 * grow that list near the tick, and WL5's first callback came that late. */
static void early_claim_waits_rather_than_grow_near_its_tick(void **state)
{
    (void)state;
    tw_config cfg;
    early *e;
    tw_timer *h;
    uint64_t due;
    tw__grow_ns_per_kib_override = 1000 * T_S;
    tw_service *s = claimed_early(&cfg, &e, &h, &due);
    tw__grow_ns_per_kib_override = 0;
    expect_runs(s, e);
    /* Waited, or (TSan) the tick came while the slot was still being
     * taken, before any growth: either way late, and nothing staged. */
    print_message("      %" PRIu64 " waits for the tick\n",
                  tw__rare_total(s, TW_RARE_EARLY_WAITED));
    assert_true(tw__rare_total(s, TW_RARE_EARLY_LATE) >= 1);
    ASSERT_RC(tw_stop(s, NULL), TW_OK); /* joins the cursor: its lists are ours to read */
    assert_int_equal(s->wheel.staged.cap, 0);
    tw_destroy(s);
    free(e);
    free(h);
}

/* An early claim gives the cursor back when a tick before its own comes
 * due with work in it, and goes on after that step: a timer due then runs
 * while the claim is still going, not after it. Before, the whole claim
 * (a million entries: 40-150 ms on a 2-core VM) held up every tick before
 * its own, and a timer armed 3 ms ahead beside WL5's burst came 40-90 ms
 * late. No host is slow on cue, so the hook (tw__early_piece_hook) holds
 * the claim, once YIELD_AT timers are staged, until the test has armed a
 * timer due a few ticks later and that timer's tick has come; at a later
 * piece it waits (5 s at most) for that timer to run. Every timer runs
 * once, none before its deadline. */
enum { YIELD_AT = 2048 };

static _Atomic uint64_t g_probe_due;  /* service time; 0 until armed */
static atomic_int g_claim_held;       /* 1: held, waiting for the probe's tick */
static atomic_int g_probe_ran;
static atomic_int g_probe_early;
static atomic_int g_probe_checked;    /* the later piece has looked */
static atomic_int g_ran_mid_claim;    /* ... and found the probe run */
static tw_service *_Atomic g_yield_s;

static void probe_run(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    if (tw_now(atomic_load(&g_yield_s)) < atomic_load(&g_probe_due))
        atomic_fetch_add(&g_probe_early, 1);
    atomic_fetch_add(&g_probe_ran, 1);
}

static int yield_piece_hook(bool late, size_t staged)
{
    tw_service *s = atomic_load(&g_yield_s);
    if (late || staged < YIELD_AT)
        return 0;
    if (atomic_load(&g_claim_held) == 0) {
        atomic_store(&g_claim_held, 1);
        /* The test arms the probe now; hold until its tick has come. */
        for (int ms = 0; ms < 30000 && atomic_load(&g_probe_due) == 0; ms++)
            t_sleep_ns(T_MS);
        uint64_t until = atomic_load(&g_probe_due) + 3 * T_MS;
        for (int ms = 0; ms < 30000 && tw_now(s) < until; ms++)
            t_sleep_ns(T_MS);
        atomic_store(&g_claim_held, 2);
        return 0;
    }
    if (atomic_exchange(&g_probe_checked, 1))
        return 0;
    for (int ms = 0; ms < 5000 && atomic_load(&g_probe_ran) == 0; ms++)
        t_sleep_ns(T_MS);
    atomic_store(&g_ran_mid_claim, atomic_load(&g_probe_ran) != 0);
    return 0;
}

/* A service of the hooked shape with its lead at HOOK_LEAD, in g_yield_s,
 * whose EARLY_N timers are due at *due, armed whole before the cursor
 * looks at their slot (the clock paused meanwhile). */
static tw_service *hooked_armed(tw_config *cfg, early *e, tw_timer *h, uint64_t *due)
{
    tw__early_lead_override = HOOK_LEAD; /* as late_try: a slow build claims slowly */
    tw_service *s = t_service_cfg(cfg);
    tw__early_lead_override = 0;
    atomic_store(&g_yield_s, s);
    ASSERT_RC(tw_pause(s), TW_OK);
    *due = tw_now(s) + HOOK_DUE;
    arm_one_slot(s, e, h, *due, early_run);
    ASSERT_RC(tw_resume(s), TW_OK);
    return s;
}

/* One try: NULL if the claim never reached the hold before its tick (the
 * cursor kept off the CPU: the host's doing). */
static tw_service *yield_try(tw_config *cfg, early *e, tw_timer *h)
{
    atomic_store(&g_probe_due, 0);
    atomic_store(&g_claim_held, 0);
    atomic_store(&g_probe_ran, 0);
    atomic_store(&g_probe_early, 0);
    atomic_store(&g_probe_checked, 0);
    atomic_store(&g_ran_mid_claim, 0);
    uint64_t due;
    tw_service *s = hooked_armed(cfg, e, h, &due);
    while (atomic_load(&g_claim_held) == 0 && tw_now(s) < due)
        t_sleep_ns(T_MS / 4);
    bool held = atomic_load(&g_claim_held) != 0;
    if (held) {
        /* A few ticks ahead; due well before the slot's tick (the hold
         * ends 3 ms after it, the slot's tick is hundreds of ms away). */
        tw_timer p;
        uint64_t at = tw_now(s) + 5 * T_MS;
        ASSERT_RC(tw_schedule_at(s, at, probe_run, NULL, &p), TW_OK);
        atomic_store(&g_probe_due, at);
    }
    uint64_t limit = due + 30 * T_S;
    for (;;) {
        tw_stats st;
        t_stats(s, &st);
        if (st.fired >= (uint64_t)EARLY_N + (held ? 1 : 0))
            break;
        if (tw_now(s) >= limit)
            fail_msg("%" PRIu64 " ran 30 s after the tick", st.fired);
        t_sleep_ns(10 * T_MS);
    }
    if (held && atomic_load(&g_probe_checked) && atomic_load(&g_probe_due) < due)
        return s;
    tw_destroy(s);
    return NULL;
}

static void early_claim_gives_way_to_an_earlier_tick(void **state)
{
    (void)state;
    tw_config cfg;
    early *e;
    tw_timer *h;
    hooked_shape(&cfg, &e, &h);
    atomic_store(&tw__early_piece_hook, yield_piece_hook);
    tw_service *s = NULL;
    for (int attempt = 1; attempt <= 3 && !s; attempt++) {
        s = yield_try(&cfg, e, h);
        if (!s)
            print_message("      try %d: the claim was not held before its tick\n", attempt);
    }
    atomic_store(&tw__early_piece_hook, NULL);
    if (!s)
        three_tries_missed_skip("3 tries, and no early claim was held before its tick", e, h);
    if (!atomic_load(&g_ran_mid_claim))
        fail_msg("the timer due during the claim did not run until the claim was done");
    assert_int_equal(atomic_load(&g_probe_ran), 1);
    assert_int_equal(atomic_load(&g_probe_early), 0);
    assert_true(tw__rare_total(s, TW_RARE_EARLY_YIELDED) >= 1);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, (uint64_t)EARLY_N + 1);
    assert_int_equal(st.pending, 0);
    expect_runs(s, e);
    print_message("      %" PRIu64 " yields; the earlier timer ran while the claim was held\n",
                  tw__rare_total(s, TW_RARE_EARLY_YIELDED));
    tw_destroy(s);
    free(e);
    free(h);
}

/* An early claim makes its room before it closes the slot: at its first
 * look at the clock (after the first chunk taken), `taken` had room for
 * every entry of the slot, faulted in beforehand, and `staged` for all of
 * their pairs, faulted in too (wheel.c, claim_room). Before, both grew
 * while the claim ran, the first with the slot closed and every earlier
 * tick held up: on the 2-core AMD guest a first touch of a page cost 11 us,
 * and taking a million-entry slot took 39-54 ms, 7-8 ms of it once the
 * room was made beforehand. */
static _Atomic size_t g_room_taken, g_room_taken_touched, g_room_staged_cap,
    g_room_staged_touched;
static atomic_int g_room_seen;

static int room_piece_hook(bool late, size_t staged)
{
    if (late || staged != 0 || atomic_exchange(&g_room_seen, 1))
        return 0;
    /* The cursor's own lists, read on the cursor's thread. */
    const tw_wheel *w = &atomic_load(&g_yield_s)->wheel;
    atomic_store(&g_room_taken, w->taken.n);
    atomic_store(&g_room_taken_touched, w->taken.touched);
    atomic_store(&g_room_staged_cap, w->staged.cap);
    atomic_store(&g_room_staged_touched, w->staged.touched);
    return 0;
}

static void early_claim_makes_its_room_before_taking_the_slot(void **state)
{
    (void)state;
    tw_config cfg;
    early *e;
    tw_timer *h;
    hooked_shape(&cfg, &e, &h);
    atomic_store(&g_room_seen, 0);
    atomic_store(&tw__early_piece_hook, room_piece_hook);
    uint64_t due;
    tw_service *s = hooked_armed(&cfg, e, h, &due); /* its lead leaves time for the room */
    expect_runs(s, e);
    atomic_store(&tw__early_piece_hook, NULL);
    if (!atomic_load(&g_room_seen))
        fail_msg("no early claim reached its first piece");
    size_t n = atomic_load(&g_room_taken);
    print_message("      first look: %zu taken, room for %zu faulted in; staged room %zu, "
                  "%zu faulted in\n", n, atomic_load(&g_room_taken_touched),
                  atomic_load(&g_room_staged_cap), atomic_load(&g_room_staged_touched));
    assert_true(n > 0);
    assert_true(atomic_load(&g_room_taken_touched) >= EARLY_N);
    assert_true(atomic_load(&g_room_staged_cap) >= 2 * EARLY_N);
    assert_true(atomic_load(&g_room_staged_touched) >= 2 * EARLY_N);
    tw_destroy(s);
    free(e);
    free(h);
}

/* After each test, passed or failed: a failed test leaves by a long jump
 * (cmocka), past the lines that take its hooks out, reset its overrides
 * and give the process its CPUs back; left so, the tests after it ran
 * with a hook of another test's, or pinned to one CPU beside its running
 * services, and failed or starved in turn (a helper's hunt, 2026-11-29).
 * Its services are not destroyed here: one may hold a callback blocked
 * on the failed test's flag, and tw_destroy would wait for it. */
static cpu_set_t g_mask_at_start;

static int reset_after(void **state)
{
    (void)state;
    atomic_store(&tw__early_piece_hook, NULL);
    atomic_store(&tw__cascade_piece_hook, NULL);
    atomic_store(&tw__cursor_plan_hook, NULL);
    atomic_store(&tw__compacting_hook, NULL);
    tw__early_lead_override = 0;
    tw__lanes_override = 0;
    tw__grow_ns_per_kib_override = 0;
    g_busy_lead = PLAIN_LEAD;
    atomic_store(&g_short_s, NULL);
    atomic_store(&g_hold_s, NULL);
    return sched_setaffinity(0, sizeof g_mask_at_start, &g_mask_at_start);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(blocked_callback_does_not_hold_its_batch_mate, reset_after),
        cmocka_unit_test_teardown(blocked_callback_does_not_hold_a_batch, reset_after),
        cmocka_unit_test_teardown(two_blockers_three_workers, reset_after),
        cmocka_unit_test_teardown(eleven_blockers_on_a_pool_wider_than_the_cpus, reset_after),
        cmocka_unit_test_teardown(watchers_stay_within_the_cpus, reset_after),
        cmocka_unit_test_teardown(one_worker_waits_for_the_blocker, reset_after),
        cmocka_unit_test_teardown(stealing_runs_each_timer_once, reset_after),
        cmocka_unit_test_teardown(a_worker_joins_a_stuck_one, reset_after),
        cmocka_unit_test_teardown(a_worker_joins_where_it_pays, reset_after),
        cmocka_unit_test_teardown(a_watcher_moves_off_a_busy_cpu_keeping_its_mask, reset_after),
        cmocka_unit_test_teardown(large_slot_claimed_early, reset_after),
        cmocka_unit_test_teardown(large_slot_claimed_early_without_workers, reset_after),
        cmocka_unit_test_teardown(burst_beyond_level_0_cascaded_early, reset_after),
        cmocka_unit_test_teardown(burst_started_early_beside_timers_due_every_tick, reset_after),
        cmocka_unit_test_teardown(burst_started_early_while_compacting, reset_after),
        cmocka_unit_test_teardown(early_drain_gives_way_to_an_earlier_tick, reset_after),
        cmocka_unit_test_teardown(burst_moved_in_from_one_lane_claimed_early, reset_after),
        cmocka_unit_test_teardown(claim_short_of_time_leaves_the_tick_before_first, reset_after),
        cmocka_unit_test_teardown(late_cursor_runs_the_tick_before_a_claim_first, reset_after),
        cmocka_unit_test_teardown(next_due_sees_staged_timers_without_workers, reset_after),
        cmocka_unit_test_teardown(late_cursor_runs_earlier_ticks_before_a_staged_burst, reset_after),
        cmocka_unit_test_teardown(early_claim_overtaken_by_its_tick, reset_after),
        cmocka_unit_test_teardown(early_claim_handed_over_before_its_tick, reset_after),
        cmocka_unit_test_teardown(early_claim_waits_rather_than_grow_near_its_tick, reset_after),
        cmocka_unit_test_teardown(early_claim_gives_way_to_an_earlier_tick, reset_after),
        cmocka_unit_test_teardown(early_claim_makes_its_room_before_taking_the_slot, reset_after),
    };
    assert_int_equal(sched_getaffinity(0, sizeof g_mask_at_start, &g_mask_at_start), 0);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
