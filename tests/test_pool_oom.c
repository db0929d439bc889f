/* test_pool_oom.c: with no memory for a batch of due handles, the cursor
 * runs them itself: each once, never early, though it claimed them a tick
 * ahead of their deadlines (default config: 1 ms tick, 2 workers).
 *
 * This executable is linked with --wrap=mmap: the library's mmap calls
 * come here, and while g_fail_batches is set a mapping of a slab of
 * batches (workers.c) is refused. */
#include "tw_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

static atomic_bool g_fail_batches;
static atomic_uint g_refused;

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (len == sizeof(tw_batch_slab) && atomic_load(&g_fail_batches)) {
        atomic_fetch_add(&g_refused, 1);
        return MAP_FAILED;
    }
    return __real_mmap(addr, len, prot, flags, fd, off);
}

typedef struct probe {
    tw_service *s;
    uint64_t not_before; /* tw_now() read before the schedule call + delay */
    atomic_int runs;
    atomic_int early;
} probe;

static void note_run(tw_timer t, void *arg)
{
    (void)t;
    probe *p = arg;
    if (tw_now(p->s) < p->not_before)
        atomic_fetch_add(&p->early, 1);
    atomic_fetch_add(&p->runs, 1);
}

enum { N = 300 };
static probe g_probe[N];

static void due_timers_run_without_batch_memory(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg); /* MONOTONIC, 1 ms tick, 2 workers: claims 2 ticks ahead */
    atomic_store(&g_refused, 0);
    atomic_store(&g_fail_batches, true); /* from the start: no slab at all */
    tw_service *s = t_service_cfg(&cfg);
    for (int i = 0; i < N; i++) {
        probe *p = &g_probe[i];
        uint64_t delay = (uint64_t)(1 + i % 20) * T_MS;
        p->s = s;
        atomic_init(&p->runs, 0);
        atomic_init(&p->early, 0);
        p->not_before = tw_now(s) + delay;
        ASSERT_RC(tw_schedule(s, delay, note_run, p, NULL), TW_OK);
    }
    /* Wait for the callbacks themselves (10 s at most), not stats.fired:
     * a run is counted before its callback starts, so the count can reach
     * N while the last callback has yet to note its run. */
    for (int i = 0, waited = 0; i < N && waited < 10000; waited++) {
        while (i < N && atomic_load(&g_probe[i].runs) != 0)
            i++;
        if (i < N)
            t_sleep_ns(T_MS);
    }
    atomic_store(&g_fail_batches, false);
    assert_true(atomic_load(&g_refused) > 0); /* the path under test was taken */
    for (int i = 0; i < N; i++) {
        if (atomic_load(&g_probe[i].runs) != 1 || atomic_load(&g_probe[i].early) != 0)
            fail_msg("timer %d: %d runs, %d early", i, atomic_load(&g_probe[i].runs),
                     atomic_load(&g_probe[i].early));
    }
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, N);
    assert_int_equal(st.pending, 0);
    tw_destroy(s);
}

/* The cursor, running a timer itself, waits for the deadline it claimed
 * ahead; paused then, it waits with no timeout. tw_stop joins the cursor
 * before the pool quits, and the wait used to hear only the pool's quit:
 * tw_stop never returned (a review's program, 2026-11-28). Now the stop's
 * start ends the wait, and the claimed timer goes to on_pending. A 1 s
 * tick: the cursor claims the next tick's timers a tick ahead, so the
 * timer (due 900 ms into the tick after next) is claimed a good while
 * before its deadline, which the test waits to see (state FIRING); it
 * pauses the service then, and stops it once the deadline has passed. */
static atomic_int g_ran, g_pended;

static void count_run(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_fetch_add(&g_ran, 1);
}

static void count_pending(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_fetch_add(&g_pended, 1);
}

typedef struct stopper {
    tw_service *s;
    atomic_int done;
    int rc;
} stopper;

static void *stop_it(void *arg)
{
    stopper *st = arg;
    st->rc = tw_stop(st->s, count_pending);
    atomic_store(&st->done, 1);
    return NULL;
}

static void a_paused_stop_ends_the_cursors_wait(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.tick_ns = T_S;
    atomic_store(&g_ran, 0);
    atomic_store(&g_pended, 0);
    atomic_store(&g_refused, 0);
    atomic_store(&g_fail_batches, true);
    tw_service *s = t_service_cfg(&cfg);
    /* Ticks begin at the service's origin (clock.c). */
    uint64_t since = tw_now(s) - s->origin;
    uint64_t deadline = s->origin + (since / T_S + 2) * T_S + 900 * T_MS;
    tw_timer h;
    ASSERT_RC(tw_schedule_at(s, deadline, count_run, NULL, &h), TW_OK);
    tw_record *rec = tw__rec_of(&s->rec, h);
    assert_non_null(rec);
    while (tw__st(atomic_load(&rec->state)) != TW_ST_FIRING && tw_now(s) < deadline - 100 * T_MS)
        t_sleep_ns(T_MS);
    assert_int_equal(tw__st(atomic_load(&rec->state)), TW_ST_FIRING); /* claimed ahead */
    ASSERT_RC(tw_pause(s), TW_OK);
    /* Past the deadline on the real clock: the cursor's timed wait ends,
     * and it waits again, paused, with no timeout. */
    while (t_mono_ns() < deadline + 50 * T_MS)
        t_sleep_ns(T_MS);

    stopper st = {.s = s};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_it, &st), 0);
    uint64_t end = t_mono_ns() + 10 * T_S;
    while (!atomic_load(&st.done) && t_mono_ns() < end)
        t_sleep_ns(T_MS);
    if (!atomic_load(&st.done))
        fail_msg("tw_stop of a paused service still blocked after 10 s");
    assert_int_equal(pthread_join(t, NULL), 0);
    ASSERT_RC(st.rc, TW_OK);
    atomic_store(&g_fail_batches, false);
    assert_true(atomic_load(&g_refused) > 0); /* the cursor ran it itself */
    assert_int_equal(atomic_load(&g_ran), 0);
    assert_int_equal(atomic_load(&g_pended), 1);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(due_timers_run_without_batch_memory),
        cmocka_unit_test(a_paused_stop_ends_the_cursors_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
