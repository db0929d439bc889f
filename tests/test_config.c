/* test_config.c: configuration limits, defaults, bad input, tw_strerror. */
#define _GNU_SOURCE /* SCHED_BATCH */
#include "tw_test.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int setup(void **state)
{
    (void)state;
    t_reset_cb_errors();
    return 0;
}

static void manual_cfg(tw_config *cfg)
{
    tw_config_init(cfg);
    cfg->clock = TW_CLOCK_MANUAL;
}

/* tw_create with cfg must return want; on error *out is untouched */
static void expect_create(const tw_config *cfg, int want, const char *what)
{
    tw_service *sentinel = (tw_service *)(uintptr_t)0x5a5a5a5a;
    tw_service *s = sentinel;
    int rc = tw_create(cfg, &s);
    if (rc != want)
        fail_msg("%s: tw_create returned %s (%d), expected %s", what, t_code(rc), rc,
                 t_code(want));
    if (rc != TW_OK) {
        if (s != sentinel)
            fail_msg("%s: tw_create failed but wrote *out", what);
        return;
    }
    assert_true(s != NULL && s != sentinel);
    CHECK(s);
    tw_destroy(s);
}

/* a valid boundary value: accepted, or refused only for lack of memory */
static void expect_valid(const tw_config *cfg, const char *what)
{
    tw_service *s = NULL;
    int rc = tw_create(cfg, &s);
    if (rc != TW_OK && rc != TW_ENOMEM)
        fail_msg("%s: valid configuration refused with %s (%d)", what, t_code(rc), rc);
    if (rc == TW_OK) {
        /* The checker walks every entry; a 2^20-entry fixed array per slot
         * makes that tens of millions, minutes under a sanitizer. */
        if (cfg->slot_capacity <= 4096)
            CHECK(s);
        tw_destroy(s);
    }
}

static void config_init_defaults(void **state)
{
    (void)state;
    tw_config cfg;
    memset(&cfg, 0xff, sizeof cfg);
    tw_config_init(&cfg);
    assert_true(cfg.tick_ns == 1000000);
    assert_int_equal(cfg.wheel_slots, 4096);
    assert_int_equal(cfg.slot_capacity, 16);
    assert_int_equal(cfg.workers, 2);
    assert_true(cfg.max_timers == 0);
    assert_int_equal(cfg.clock, TW_CLOCK_MONOTONIC);
}

static void create_with_defaults_and_null_cfg(void **state)
{
    (void)state;
    tw_service *s = NULL;
    ASSERT_RC(tw_create(NULL, &s), TW_OK); /* MONOTONIC, 2 workers */
    assert_non_null(s);
    ASSERT_RC(tw_advance(s, 1), TW_EINVAL); /* not a MANUAL service */
    assert_true(tw_max_delay(s) >= (1ull << 40) * T_MS);
    tw_destroy(s);

    tw_config cfg;
    manual_cfg(&cfg);
    expect_create(&cfg, TW_OK, "manual defaults");
}

static void create_null_out_is_einval(void **state)
{
    (void)state;
    tw_config cfg;
    manual_cfg(&cfg);
    ASSERT_RC(tw_create(&cfg, NULL), TW_EINVAL);
    ASSERT_RC(tw_create(NULL, NULL), TW_EINVAL);
}

static void tick_bounds(void **state)
{
    (void)state;
    static const uint64_t bad[] = {0, 1, 999, 1000000001ull, 2000000000ull, UINT64_MAX};
    static const uint64_t good[] = {1000, 1001, 1000000, 7000000, 1000000000ull};
    tw_config cfg;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        manual_cfg(&cfg);
        cfg.tick_ns = bad[i];
        expect_create(&cfg, TW_EINVAL, "bad tick_ns");
    }
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        manual_cfg(&cfg);
        cfg.tick_ns = good[i];
        expect_create(&cfg, TW_OK, "good tick_ns");
    }
}

static void wheel_slots_bounds(void **state)
{
    (void)state;
    static const uint32_t bad[] = {0, 1, 3, 6, 100, 255, 257, 65535, 65537, 131072,
                                   1u << 31, UINT32_MAX};
    static const uint32_t good[] = {2, 4, 8, 256, 1024, 65536};
    tw_config cfg;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        manual_cfg(&cfg);
        cfg.wheel_slots = bad[i];
        expect_create(&cfg, TW_EINVAL, "bad wheel_slots");
    }
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        manual_cfg(&cfg);
        cfg.wheel_slots = good[i];
        expect_create(&cfg, TW_OK, "good wheel_slots");
    }
}

static void slot_capacity_bounds(void **state)
{
    (void)state;
    static const uint32_t bad[] = {0, (1u << 20) + 1, 1u << 21, UINT32_MAX};
    tw_config cfg;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        manual_cfg(&cfg);
        cfg.slot_capacity = bad[i];
        expect_create(&cfg, TW_EINVAL, "bad slot_capacity");
    }
    manual_cfg(&cfg);
    cfg.slot_capacity = 1;
    expect_create(&cfg, TW_OK, "slot_capacity 1");
    manual_cfg(&cfg);
    cfg.slot_capacity = 1000; /* not a power of two: fine */
    expect_create(&cfg, TW_OK, "slot_capacity 1000");
    manual_cfg(&cfg);
    cfg.wheel_slots = 2;
    cfg.slot_capacity = 1u << 20;
    expect_valid(&cfg, "slot_capacity 2^20");
}

static void workers_bounds(void **state)
{
    (void)state;
    tw_config cfg;
    manual_cfg(&cfg);
    cfg.workers = 1025;
    expect_create(&cfg, TW_EINVAL, "workers 1025");
    manual_cfg(&cfg);
    cfg.workers = UINT32_MAX;
    expect_create(&cfg, TW_EINVAL, "workers UINT32_MAX");
    manual_cfg(&cfg);
    cfg.workers = 1024; /* MANUAL starts no thread */
    expect_create(&cfg, TW_OK, "workers 1024");
    manual_cfg(&cfg);
    cfg.workers = 0;
    expect_create(&cfg, TW_OK, "workers 0");
}

static void max_timers_bounds(void **state)
{
    (void)state;
    tw_config cfg;
    manual_cfg(&cfg);
    cfg.max_timers = 1ull << 31;
    expect_create(&cfg, TW_EINVAL, "max_timers 2^31");
    manual_cfg(&cfg);
    cfg.max_timers = UINT64_MAX;
    expect_create(&cfg, TW_EINVAL, "max_timers UINT64_MAX");
    manual_cfg(&cfg);
    cfg.max_timers = (1ull << 31) - 1;
    expect_create(&cfg, TW_OK, "max_timers 2^31-1");
    manual_cfg(&cfg);
    cfg.max_timers = 1;
    expect_create(&cfg, TW_OK, "max_timers 1");
}

static void unknown_clock_is_einval(void **state)
{
    (void)state;
    tw_config cfg;
    manual_cfg(&cfg);
    cfg.clock = (tw_clock)2;
    expect_create(&cfg, TW_EINVAL, "clock 2");
    manual_cfg(&cfg);
    cfg.clock = (tw_clock)77;
    expect_create(&cfg, TW_EINVAL, "clock 77");
}

static void null_arguments_are_einval(void **state)
{
    (void)state;
    tw_service *s = t_default();
    tw_timer h = 4242;
    ASSERT_RC(tw_schedule(NULL, T_MS, t_noop, NULL, &h), TW_EINVAL);
    ASSERT_RC(tw_schedule(s, T_MS, NULL, NULL, &h), TW_EINVAL);
    ASSERT_RC(tw_schedule_every(NULL, T_MS, T_MS, t_noop, NULL, &h), TW_EINVAL);
    ASSERT_RC(tw_schedule_every(s, T_MS, T_MS, NULL, NULL, &h), TW_EINVAL);
    assert_true(h == 4242);
    ASSERT_RC(tw_reschedule(NULL, 1, T_MS), TW_EINVAL);
    ASSERT_RC(tw_cancel(NULL, 1), TW_EINVAL);
    ASSERT_RC(tw_cancel_sync(NULL, 1), TW_EINVAL);
    ASSERT_RC(tw_advance(NULL, 1), TW_EINVAL);
    ASSERT_RC(tw_stop(NULL, NULL), TW_EINVAL);
    tw_destroy(NULL);
    CHECK(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.scheduled, 0);
    tw_destroy(s);
}

static void advance_below_now_is_einval(void **state)
{
    (void)state;
    tw_service *s = t_default();
    ADVANCE(s, 5 * T_MS);
    ASSERT_RC(tw_advance(s, 5 * T_MS - 1), TW_EINVAL);
    assert_true(tw_now(s) == 5 * T_MS);
    CHECK(s);
    tw_destroy(s);
}

static void strerror_never_null(void **state)
{
    (void)state;
    static const int known[] = {TW_OK, TW_EINVAL, TW_ENOMEM, TW_EAGAIN, TW_ERANGE,
                                TW_ENOENT, TW_ESHUTDOWN, TW_EDEADLK};
    enum { K = sizeof known / sizeof known[0] };
    for (size_t i = 0; i < K; i++) {
        const char *m = tw_strerror(known[i]);
        assert_non_null(m);
        assert_true(m[0] != '\0');
        for (size_t j = 0; j < i; j++)
            if (strcmp(m, tw_strerror(known[j])) == 0)
                fail_msg("tw_strerror(%d) and tw_strerror(%d) are both \"%s\"", known[i],
                         known[j], m);
    }
    static const int unknown[] = {1, 2, -8, -9, -100, 12345, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *m = tw_strerror(unknown[i]);
        assert_non_null(m);
        assert_true(m[0] != '\0');
    }
}

static void version_matches_header(void **state)
{
    (void)state;
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", TW_VERSION_MAJOR, TW_VERSION_MINOR,
             TW_VERSION_PATCH);
    assert_non_null(tw_version());
    assert_string_equal(tw_version(), want);
    assert_int_equal(tw_version_number(),
                     TW_VERSION_MAJOR * 10000 + TW_VERSION_MINOR * 100 + TW_VERSION_PATCH);
}

typedef struct where {
    pthread_t thread;
    int runs;
    int in_advance;
} where;

static int g_in_advance;

static void note_thread(tw_timer t, void *arg)
{
    (void)t;
    where *w = arg;
    w->thread = pthread_self();
    w->in_advance = g_in_advance;
    w->runs++;
}

/* MANUAL runs callbacks inside tw_advance, on the calling thread, even
 * when workers are configured */
static void manual_clock_runs_callbacks_on_advancing_thread(void **state)
{
    (void)state;
    tw_config cfg;
    manual_cfg(&cfg);
    cfg.workers = 4;
    tw_service *s = t_service_cfg(&cfg);
    where w[8];
    memset(w, 0, sizeof w);
    for (int i = 0; i < 8; i++)
        ASSERT_RC(tw_schedule(s, (uint64_t)i * T_MS, note_thread, &w[i], NULL), TW_OK);
    g_in_advance = 1;
    ASSERT_RC(tw_advance(s, 20 * T_MS), TW_OK);
    g_in_advance = 0;
    CHECK(s);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(w[i].runs, 1);
        assert_int_equal(w[i].in_advance, 1);
        assert_true(pthread_equal(w[i].thread, pthread_self()));
    }
    tw_destroy(s);
}

/* Whether thread `tid` of this process is named `name` (false if it
 * ended while we listed). */
static bool task_named(const char *tid, const char *name)
{
    char path[300], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    if (fgets(comm, sizeof comm, f))
        comm[strcspn(comm, "\n")] = '\0';
    fclose(f);
    return strcmp(comm, name) == 0;
}

/* Threads of this process whose name (comm) is `name`. */
static int threads_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.' && task_named(e->d_name, name);
    closedir(d);
    return n;
}

/* The library's threads carry names, so top -H, perf and gdb tell them
 * apart; they are gone after tw_destroy. */
static void service_threads_are_named(void **state)
{
    (void)state;
    int cursors = threads_named("tw-cursor"), workers = threads_named("tw-worker");
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 3;
    tw_service *s = t_service_cfg(&cfg);
    assert_int_equal(threads_named("tw-cursor"), cursors + 1);
    assert_int_equal(threads_named("tw-worker"), workers + 3);
    tw_destroy(s);
    /* A joined thread may stay listed under /proc/self/task a moment
     * after pthread_join returns (its tid word is cleared before the
     * kernel releases it: a review): wait for the count, bounded. */
    uint64_t end = t_mono_ns() + 5 * T_S;
    while ((threads_named("tw-cursor") != cursors || threads_named("tw-worker") != workers) &&
           t_mono_ns() < end)
        t_sleep_ns(T_MS);
    assert_int_equal(threads_named("tw-cursor"), cursors);
    assert_int_equal(threads_named("tw-worker"), workers);
}

/* ---- the library's threads ask for a short slice (threads.c) ---- */

static tw_sched_attr attr_of(pid_t tid)
{
    tw_sched_attr a = {0};
    assert_int_equal(syscall(SYS_sched_getattr, tid, &a, (unsigned)sizeof a, 0u), 0);
    return a;
}

/* The attributes of every thread named `name`; returns how many. */
static int attrs_named(const char *name, tw_sched_attr *out, int max)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        if (e->d_name[0] == '.' || !task_named(e->d_name, name))
            continue;
        out[n++] = attr_of((pid_t)atoi(e->d_name));
    }
    closedir(d);
    return n;
}

/* Whether this kernel keeps a SCHED_OTHER thread's slice (Linux 6.12+):
 * a throwaway thread asks for one and reads it back. */
static void *probe_slice(void *arg)
{
    tw_sched_attr a = attr_of(0);
    a.size = sizeof a;
    a.flags = 0;
    a.runtime = TW_THREAD_SLICE_NS;
    *(bool *)arg = syscall(SYS_sched_setattr, 0, &a, 0u) == 0 &&
                   attr_of(0).runtime == TW_THREAD_SLICE_NS;
    return NULL;
}

static bool kernel_keeps_slices(void)
{
    bool keeps = false;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, probe_slice, &keeps), 0);
    pthread_join(t, NULL);
    return keeps;
}

/* A service made by a thread that runs with `policy` and nice `nice`;
 * the attributes of its cursor and workers are read there. */
typedef struct made_by {
    int policy, nice;
    tw_sched_attr cursor[1], workers[4];
    int cursors, nworkers;
} made_by;

/* A callback's thread: the worker's, once it has run one (its hint comes
 * first, and the cursor's before the claim). */
static _Atomic bool ran_on_worker, ran;

static void note_worker(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    char comm[32] = "";
    (void)prctl(PR_GET_NAME, comm, 0, 0, 0);
    atomic_store(&ran_on_worker, strcmp(comm, "tw-worker") == 0);
    atomic_store(&ran, true);
}

static void *make_under(void *arg)
{
    made_by *m = arg;
    struct sched_param none = {0};
    assert_int_equal(pthread_setschedparam(pthread_self(), m->policy, &none), 0);
    assert_int_equal(setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), m->nice), 0);
    int cursors = threads_named("tw-cursor"), workers = threads_named("tw-worker");
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 1;
    tw_service *s = t_service_cfg(&cfg);
    /* Both threads past their hints before their attributes are read: a
     * thread may sleep before it (ThreadSanitizer's and AddressSanitizer's
     * start-up take locks), so a first sleep proves nothing. */
    atomic_store(&ran_on_worker, false);
    atomic_store(&ran, false);
    ASSERT_RC(tw_schedule(s, T_MS, note_worker, NULL, NULL), TW_OK);
    for (int i = 0; i < 10000 && !atomic_load(&ran); i++)
        t_sleep_ns(T_MS);
    assert_true(atomic_load(&ran_on_worker));
    m->cursors = attrs_named("tw-cursor", m->cursor, 1);
    m->nworkers = attrs_named("tw-worker", m->workers, 4);
    tw_destroy(s);
    /* No other service in this process meanwhile. */
    assert_int_equal(cursors, 0);
    assert_int_equal(workers, 0);
    return NULL;
}

static made_by made_under(int policy, int nice)
{
    made_by m = {.policy = policy, .nice = nice};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, make_under, &m), 0);
    pthread_join(t, NULL);
    assert_int_equal(m.cursors, 1);
    assert_int_equal(m.nworkers, 1);
    return m;
}

/* The cursor and the worker run with a 100 us slice, and keep the nice
 * value they inherited from tw_create's caller (raised here, as any user
 * may). */
static void service_threads_ask_a_short_slice(void **state)
{
    (void)state;
    if (!kernel_keeps_slices())
        skip(); /* before Linux 6.12, or a sandbox that refuses it */
    made_by m = made_under(SCHED_OTHER, 3);
    assert_int_equal(m.cursor[0].policy, SCHED_OTHER);
    assert_int_equal(m.cursor[0].runtime, TW_THREAD_SLICE_NS);
    assert_int_equal(m.cursor[0].nice, 3);
    for (int k = 0; k < m.nworkers; k++) {
        assert_int_equal(m.workers[k].policy, SCHED_OTHER);
        assert_int_equal(m.workers[k].runtime, TW_THREAD_SLICE_NS);
        assert_int_equal(m.workers[k].nice, 3);
    }
}

/* A caller under SCHED_BATCH chose throughput: its service's threads
 * keep the policy and the kernel's slice. */
static void service_threads_keep_a_batch_policy(void **state)
{
    (void)state;
    if (!kernel_keeps_slices())
        skip();
    made_by m = made_under(SCHED_BATCH, 0);
    assert_int_equal(m.cursor[0].policy, SCHED_BATCH);
    assert_int_not_equal(m.cursor[0].runtime, TW_THREAD_SLICE_NS);
    for (int k = 0; k < m.nworkers; k++) {
        assert_int_equal(m.workers[k].policy, SCHED_BATCH);
        assert_int_not_equal(m.workers[k].runtime, TW_THREAD_SLICE_NS);
    }
}

typedef struct reenter {
    tw_service *s;
    int rc_advance;
    int rc_stop;
    int runs;
} reenter;

static void try_reenter(tw_timer t, void *arg)
{
    (void)t;
    reenter *r = arg;
    r->runs++;
    r->rc_advance = tw_advance(r->s, tw_now(r->s) + T_S);
    r->rc_stop = tw_stop(r->s, NULL);
}

static void advance_from_callback_is_edeadlk(void **state)
{
    (void)state;
    tw_service *s = t_default();
    reenter r = {.s = s, .rc_advance = 99, .rc_stop = 99};
    t_timer later;
    ASSERT_RC(tw_schedule(s, T_MS, try_reenter, &r, NULL), TW_OK);
    t_arm(s, &later, 500 * T_MS);
    ADVANCE(s, 2 * T_MS);
    assert_int_equal(r.runs, 1);
    ASSERT_RC(r.rc_advance, TW_EDEADLK);
    ASSERT_RC(r.rc_stop, TW_EDEADLK);
    assert_true(tw_now(s) == 2 * T_MS); /* the clock did not move */
    assert_int_equal(later.runs, 0);
    /* the service still runs */
    ADVANCE(s, 501 * T_MS);
    assert_int_equal(later.runs, 1);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(config_init_defaults, setup),
        cmocka_unit_test_setup(create_with_defaults_and_null_cfg, setup),
        cmocka_unit_test_setup(create_null_out_is_einval, setup),
        cmocka_unit_test_setup(tick_bounds, setup),
        cmocka_unit_test_setup(wheel_slots_bounds, setup),
        cmocka_unit_test_setup(slot_capacity_bounds, setup),
        cmocka_unit_test_setup(workers_bounds, setup),
        cmocka_unit_test_setup(max_timers_bounds, setup),
        cmocka_unit_test_setup(unknown_clock_is_einval, setup),
        cmocka_unit_test_setup(null_arguments_are_einval, setup),
        cmocka_unit_test_setup(advance_below_now_is_einval, setup),
        cmocka_unit_test_setup(strerror_never_null, setup),
        cmocka_unit_test_setup(version_matches_header, setup),
        cmocka_unit_test_setup(manual_clock_runs_callbacks_on_advancing_thread, setup),
        cmocka_unit_test_setup(advance_from_callback_is_edeadlk, setup),
        cmocka_unit_test_setup(service_threads_are_named, setup),
        cmocka_unit_test_setup(service_threads_ask_a_short_slice, setup),
        cmocka_unit_test_setup(service_threads_keep_a_batch_policy, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
