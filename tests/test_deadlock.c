/* test_deadlock.c: waits that would never end (issue 13). Callbacks that
 * tw_cancel_sync each other, in a cycle of two or three, or through
 * tw_stop's wait; tw_stop and tw_advance from on_pending and from a
 * callback nested 17 services deep. One caller of a cycle gets TW_EDEADLK
 * and does nothing, the others proceed, and the service stops. Each test
 * runs under a watchdog (t_watchdog): a regression ends the program with
 * every thread's stack instead of hanging CI. MONOTONIC with real workers,
 * but for the nesting (MANUAL services, driven from their callbacks). */
#include "tw_test.h"

#include <stdatomic.h>
#include <unistd.h>

#define WATCHDOG_S 30

static int setup(void **state)
{
    (void)state;
    t_watchdog("the test of the last [ RUN ] line", WATCHDOG_S);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    t_watchdog_off();
    return 0;
}

/* ---- a cycle of tw_cancel_sync between callbacks ---------------------------- */

#define RING_MAX 3

typedef struct ring {
    tw_service *s;
    int n;                      /* callbacks in the cycle */
    tw_timer h[RING_MAX];
    atomic_int started;
    atomic_int rc[RING_MAX];
    atomic_int returned;
} ring;

typedef struct ring_arg {
    ring *r;
    int i;
} ring_arg;

/* Callback i waits until every callback of the ring has started, then
 * cancel_syncs callback i + 1 (the last one a little later, so that the
 * cycle closes with its call). */
static void ring_member(tw_timer t, void *arg)
{
    (void)t;
    ring_arg *a = arg;
    ring *r = a->r;
    atomic_fetch_add(&r->started, 1);
    while (atomic_load(&r->started) < r->n)
        t_sleep_ns(T_MS);
    if (a->i == r->n - 1)
        t_sleep_ns(50 * T_MS); /* the others are waiting by then */
    int rc = tw_cancel_sync(r->s, r->h[(a->i + 1) % r->n]);
    atomic_store(&r->rc[a->i], rc);
    atomic_fetch_add(&r->returned, 1);
}

static void run_ring(int n)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = (uint32_t)n;
    tw_service *s = t_service_cfg(&cfg);
    static ring r;
    memset(&r, 0, sizeof r);
    r.s = s;
    r.n = n;
    static ring_arg args[RING_MAX];
    for (int i = 0; i < n; i++) {
        args[i] = (ring_arg){&r, i};
        atomic_store(&r.rc[i], 1);
        /* Due 10, 30, 50 ms: different ticks, so each runs on its own worker
         * (stealing spreads them anyway). */
        ASSERT_RC(tw_schedule(s, (uint64_t)(10 + 20 * i) * T_MS, ring_member, &args[i],
                              &r.h[i]), TW_OK);
    }
    while (atomic_load(&r.returned) < n)
        t_sleep_ns(T_MS);
    int refused = 0;
    for (int i = 0; i < n; i++) {
        int rc = atomic_load(&r.rc[i]);
        if (rc == TW_EDEADLK)
            refused++;
        else if (rc != TW_ENOENT) /* the others waited for a one-shot that ran */
            fail_msg("callback %d: tw_cancel_sync returned %s", i, t_code(rc));
    }
    assert_true(refused >= 1);
    print_message("      a cycle of %d: %d refused with TW_EDEADLK\n", n, refused);
    ASSERT_RC(tw_stop(s, NULL), TW_OK);
    tw_destroy(s);
}

static void cancel_sync_cycle_of_two_is_refused(void **state)
{
    (void)state;
    run_ring(2);
}

static void cancel_sync_cycle_of_three_is_refused(void **state)
{
    (void)state;
    run_ring(3);
}

/* A chain that is not a cycle waits, and ends: A waits for B, which
 * sleeps and returns. */
static atomic_int chain_rc;
static tw_service *chain_s;
static tw_timer chain_b;
static atomic_bool chain_b_started;
static void chain_b_run(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&chain_b_started, true);
    t_sleep_ns(100 * T_MS);
}
static void chain_a_run(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    while (!atomic_load(&chain_b_started))
        t_sleep_ns(T_MS);
    atomic_store(&chain_rc, tw_cancel_sync(chain_s, chain_b));
}

static void cancel_sync_chain_waits(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    chain_s = t_service_cfg(&cfg);
    atomic_store(&chain_rc, 1);
    atomic_store(&chain_b_started, false);
    ASSERT_RC(tw_schedule(chain_s, 10 * T_MS, chain_b_run, NULL, &chain_b), TW_OK);
    ASSERT_RC(tw_schedule(chain_s, 12 * T_MS, chain_a_run, NULL, NULL), TW_OK);
    while (atomic_load(&chain_rc) == 1)
        t_sleep_ns(T_MS);
    ASSERT_RC(atomic_load(&chain_rc), TW_ENOENT); /* it waited, B had started */
    ASSERT_RC(tw_stop(chain_s, NULL), TW_OK);
    tw_destroy(chain_s);
}

/* ---- a cycle through tw_stop's wait ---------------------------------------- */

/* A callback of service 1 stops service 2 while a callback of service 2
 * cancel_syncs the first: tw_stop(2) waits for 2's callback, which waits
 * for 1's. One of the two calls is refused. */
static tw_service *sv1, *sv2;
static tw_timer x1;
static atomic_bool x1_started, y2_started;
static atomic_int stop_rc, sync_rc;

static void stopper(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&x1_started, true);
    while (!atomic_load(&y2_started))
        t_sleep_ns(T_MS);
    atomic_store(&stop_rc, tw_stop(sv2, NULL));
}

static void syncer(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&y2_started, true);
    while (!atomic_load(&x1_started))
        t_sleep_ns(T_MS);
    t_sleep_ns(50 * T_MS); /* tw_stop(2) is waiting by then */
    atomic_store(&sync_rc, tw_cancel_sync(sv1, x1));
}

static void cycle_through_stop_is_refused(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    sv1 = t_service_cfg(&cfg);
    sv2 = t_service_cfg(&cfg);
    atomic_store(&x1_started, false);
    atomic_store(&y2_started, false);
    atomic_store(&stop_rc, 1);
    atomic_store(&sync_rc, 1);
    ASSERT_RC(tw_schedule(sv1, 10 * T_MS, stopper, NULL, &x1), TW_OK);
    ASSERT_RC(tw_schedule(sv2, 10 * T_MS, syncer, NULL, NULL), TW_OK);
    while (atomic_load(&stop_rc) == 1 || atomic_load(&sync_rc) == 1)
        t_sleep_ns(T_MS);
    int a = atomic_load(&stop_rc), b = atomic_load(&sync_rc);
    print_message("      tw_stop: %s, tw_cancel_sync: %s\n", t_code(a), t_code(b));
    assert_true(a == TW_EDEADLK || b == TW_EDEADLK);
    if (a != TW_EDEADLK)
        ASSERT_RC(a, TW_OK);
    if (b != TW_EDEADLK)
        ASSERT_RC(b, TW_ENOENT);
    ASSERT_RC(tw_stop(sv1, NULL), TW_OK);
    ASSERT_RC(tw_stop(sv2, NULL), TW_OK);
    tw_destroy(sv1);
    tw_destroy(sv2);
}

/* The same cycle through tw_destroy: a callback of 2 destroys 1 while a
 * callback of 1 cancel_syncs it. The destroy's stop is refused (TW_EDEADLK,
 * nothing done), and so the destroy must do nothing either: it used to
 * free service 1 all the same, under its running callback (a review's
 * program: a SEGV in the worker). If the calls come the other way round
 * (the cancel_sync refused), the destroy waits and completes. */
static tw_service *dv1, *dv2;
static tw_timer dy2;
static atomic_bool dwaiter_started, ddestroyer_started, ddestroy_returned;
static atomic_int dsync_rc;

static void sync_waiter(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&dwaiter_started, true);
    while (!atomic_load(&ddestroyer_started))
        t_sleep_ns(T_MS);
    atomic_store(&dsync_rc, tw_cancel_sync(dv2, dy2));
}

static void destroyer(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&ddestroyer_started, true);
    while (!atomic_load(&dwaiter_started))
        t_sleep_ns(T_MS);
    t_sleep_ns(50 * T_MS); /* the cancel_sync is waiting by then */
    tw_destroy(dv1);
    atomic_store(&ddestroy_returned, true);
}

static void cycle_through_destroy_does_nothing(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    dv1 = t_service_cfg(&cfg);
    dv2 = t_service_cfg(&cfg);
    atomic_store(&dwaiter_started, false);
    atomic_store(&ddestroyer_started, false);
    atomic_store(&ddestroy_returned, false);
    atomic_store(&dsync_rc, 1);
    ASSERT_RC(tw_schedule(dv1, 10 * T_MS, sync_waiter, NULL, NULL), TW_OK);
    ASSERT_RC(tw_schedule(dv2, 10 * T_MS, destroyer, NULL, &dy2), TW_OK);
    while (atomic_load(&dsync_rc) == 1 || !atomic_load(&ddestroy_returned))
        t_sleep_ns(T_MS);
    int rc = atomic_load(&dsync_rc);
    print_message("      tw_cancel_sync: %s\n", t_code(rc));
    if (rc == TW_EDEADLK) { /* the other way round: service 1 was destroyed */
        tw_destroy(dv2);
        return;
    }
    ASSERT_RC(rc, TW_ENOENT); /* waited for the destroyer's run to end */
    tw_stats st;
    tw_stats_get(dv1, &st); /* service 1 is still there */
    assert_int_equal(st.fired, 1);
    ASSERT_RC(tw_schedule(dv1, T_S, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_stop(dv1, NULL), TW_OK);
    tw_destroy(dv1);
    tw_destroy(dv2);
}

/* ---- a callback that drives another service ------------------------------------ */

/* A callback of service 1 calls tw_advance of a MANUAL service, whose
 * callback then runs nested in it, on the same thread. Waits for the outer
 * callback from the nested one are waits for the thread itself: each is
 * refused (TW_EDEADLK, nothing done), as from the outer callback itself.
 * Before 2026-11-28 only the innermost callback was known, and each of
 * these slept for good (a review's program). */
static tw_service *nv1, *nvm;
static tw_timer nouter;
static atomic_int nsync_rc, nstop_rc, nforeach, nadvance_rc, ndone;

static void count_info(const tw_timer_info *info, void *ctx)
{
    (void)info;
    (void)ctx;
}

static void nested_waiter(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_store(&nsync_rc, tw_cancel_sync(nv1, nouter));
    atomic_store(&nstop_rc, tw_stop(nv1, NULL));
    atomic_store(&nforeach, (int)tw_foreach_pending(nv1, count_info, NULL));
    tw_destroy(nv1); /* refused: does nothing */
}

static void outer_driver(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    CB_EXPECT(tw_schedule(nvm, 0, nested_waiter, NULL, NULL) == TW_OK, "tw_schedule");
    atomic_store(&nadvance_rc, tw_advance(nvm, tw_now(nvm) + T_MS));
    atomic_store(&ndone, 1);
}

static void nested_waits_for_the_outer_callback_are_refused(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    nv1 = t_service_cfg(&cfg);
    nvm = t_service(T_MS, 64, 4);
    atomic_store(&nsync_rc, 1);
    atomic_store(&nstop_rc, 1);
    atomic_store(&nforeach, -1);
    atomic_store(&ndone, 0);
    ASSERT_RC(tw_schedule(nv1, T_S, t_noop, NULL, NULL), TW_OK); /* one pending */
    ASSERT_RC(tw_schedule(nv1, 10 * T_MS, outer_driver, NULL, &nouter), TW_OK);
    while (!atomic_load(&ndone))
        t_sleep_ns(T_MS);
    CB_ASSERT_CLEAN();
    ASSERT_RC(atomic_load(&nadvance_rc), TW_OK);
    ASSERT_RC(atomic_load(&nsync_rc), TW_EDEADLK);
    ASSERT_RC(atomic_load(&nstop_rc), TW_EDEADLK);
    assert_int_equal(atomic_load(&nforeach), 0); /* from a callback of 1: nothing */
    tw_stats st;
    tw_stats_get(nv1, &st); /* not destroyed, not stopped */
    assert_int_equal(st.pending, 1);
    ASSERT_RC(tw_schedule(nv1, T_S, t_noop, NULL, NULL), TW_OK);
    tw_destroy(nvm);
    tw_destroy(nv1);
}

/* ---- calls from on_pending --------------------------------------------------- */

static tw_service *pend_s;
static int pend_calls, pend_stop_rc, pend_adv_rc;

static void on_pending_stops_again(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    pend_calls++;
    pend_stop_rc = tw_stop(pend_s, NULL);
    pend_adv_rc = tw_advance(pend_s, tw_now(pend_s) + T_MS);
    tw_destroy(pend_s); /* refused: does nothing */
}

static void stop_from_on_pending_is_edeadlk(void **state)
{
    (void)state;
    pend_s = t_service(T_MS, 64, 4);
    pend_calls = 0;
    pend_stop_rc = pend_adv_rc = 1;
    ASSERT_RC(tw_schedule(pend_s, T_S, t_noop, NULL, NULL), TW_OK);
    ASSERT_RC(tw_stop(pend_s, on_pending_stops_again), TW_OK);
    assert_int_equal(pend_calls, 1);
    ASSERT_RC(pend_stop_rc, TW_EDEADLK);
    ASSERT_RC(pend_adv_rc, TW_EDEADLK);
    ASSERT_RC(tw_stop(pend_s, NULL), TW_OK); /* stopped: returns at once */
    tw_destroy(pend_s);
}

/* ---- nesting at any depth --------------------------------------------------- */

/* MANUAL services M0 .. M17: the test calls tw_advance(M0), and the
 * callback of each Mi calls tw_advance(M(i+1)), so the callback of Mi runs
 * inside i + 1 nested tw_advance calls on one thread. The innermost that
 * runs (M16's, 17 deep) calls tw_advance and tw_stop of every Mk: each is
 * its own thread's (a callback of Mk runs outside it), so each must be
 * refused. Before 2026-11-30 the thread knew only its four outermost
 * holds: the fifth and later went unrecorded, and tw_advance(M4) from six
 * deep locked the drain lock its own thread held (a review's program;
 * here the watchdog ends it). Past 16 holds the search for cycles cannot
 * show them all: tw_advance(M17) from 17 deep is refused too (Progress). */
#define NEST_DEPTH 18
#define NEST_SHOWN 16 /* the holds a thread can show (timerwheel.h, Progress) */

static tw_service *nest[NEST_DEPTH];
static int nest_adv_rc[NEST_DEPTH];      /* tw_advance(Mi) from the callback of M(i-1) */
static int nest_inner_adv[NEST_DEPTH];   /* from the innermost callback */
static int nest_inner_stop[NEST_DEPTH];
static int nest_innermost = -1;
static bool nest_checked; /* the checks ran: later runs do nothing */

static void nest_member(tw_timer t, void *arg)
{
    (void)t;
    int i = (int)(intptr_t)arg;
    if (nest_checked)
        return;
    if (i + 1 < NEST_DEPTH) {
        nest_adv_rc[i + 1] = tw_advance(nest[i + 1], tw_now(nest[i + 1]) + T_MS);
        if (nest_adv_rc[i + 1] == TW_OK)
            return; /* a deeper callback ran the checks */
    }
    nest_innermost = i;
    for (int k = 0; k < NEST_DEPTH; k++) {
        nest_inner_adv[k] = tw_advance(nest[k], tw_now(nest[k]) + 2 * T_MS);
        nest_inner_stop[k] = tw_stop(nest[k], NULL);
    }
    nest_checked = true;
}

static void nesting_is_known_at_every_depth(void **state)
{
    (void)state;
    for (int i = 0; i < NEST_DEPTH; i++) {
        nest[i] = t_service(T_MS, 64, 4);
        ASSERT_RC(tw_schedule(nest[i], 0, nest_member, (void *)(intptr_t)i, NULL), TW_OK);
        nest_adv_rc[i] = nest_inner_adv[i] = nest_inner_stop[i] = 1;
    }
    ASSERT_RC(tw_advance(nest[0], T_MS), TW_OK);
    /* The callback of Mi runs i + 1 deep: M1 .. M16 are entered, M17 is not. */
    for (int i = 1; i < NEST_DEPTH; i++)
        ASSERT_RC(nest_adv_rc[i], i < NEST_SHOWN + 1 ? TW_OK : TW_EDEADLK);
    assert_int_equal(nest_innermost, NEST_SHOWN);
    for (int k = 0; k < NEST_DEPTH; k++) {
        ASSERT_RC(nest_inner_adv[k], TW_EDEADLK);
        ASSERT_RC(nest_inner_stop[k], TW_EDEADLK);
    }
    /* Nothing was done: every service still runs, and the one never
     * entered still has its timer. */
    tw_stats st;
    tw_stats_get(nest[NEST_DEPTH - 1], &st);
    assert_int_equal(st.pending, 1);
    for (int i = NEST_DEPTH - 1; i >= 0; i--) {
        ASSERT_RC(tw_advance(nest[i], 3 * T_MS), TW_OK); /* runs M17's timer */
        tw_stats_get(nest[i], &st);
        assert_int_equal(st.pending, 0);
        tw_destroy(nest[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(cancel_sync_cycle_of_two_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(cancel_sync_cycle_of_three_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(cancel_sync_chain_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(cycle_through_stop_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(cycle_through_destroy_does_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(nested_waits_for_the_outer_callback_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(stop_from_on_pending_is_edeadlk, setup, teardown),
        cmocka_unit_test_setup_teardown(nesting_is_known_at_every_depth, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
