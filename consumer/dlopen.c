/*
 * consumer/dlopen.c: an installed libtimerwheel.so loaded at run time, as a
 * plugin host loads it (dlopen after start-up, threads created after the
 * load), built by scripts/test-consumer.sh.
 *
 *   consumer_dlopen <path to libtimerwheel.so.N>
 *
 * The library's thread-locals use the initial-exec TLS model (the hot
 * paths read them on every call; src/internal.h, TW_TLS). A library
 * loaded by dlopen takes such storage from glibc's static TLS surplus,
 * and a load that does not fit fails ("cannot allocate memory in static
 * TLS block"). This program checks that the load works and that the
 * library then works from threads the host starts afterwards: three
 * threads arm 1,000 timers each on a MONOTONIC service, every one fires
 * exactly once, a cancel of a pending timer succeeds. Exits 0, or 1 with
 * the reason on stderr.
 */
#include <timerwheel.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#define MS 1000000ull
#define THREADS 3
#define PER_THREAD 1000

static void (*p_config_init)(tw_config *);
static int (*p_create)(const tw_config *, tw_service **);
static int (*p_schedule)(tw_service *, uint64_t, tw_callback, void *, tw_timer *);
static int (*p_cancel)(tw_service *, tw_timer);
static void (*p_destroy)(tw_service *);

static atomic_uint fired;
static atomic_uint failed;

static void on_fire(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    atomic_fetch_add(&fired, 1);
}

static void *arm_some(void *arg)
{
    tw_service *s = arg;
    for (unsigned i = 0; i < PER_THREAD; i++)
        if (p_schedule(s, (1 + i % 20) * MS, on_fire, NULL, NULL) != TW_OK)
            atomic_fetch_add(&failed, 1);
    return NULL;
}

/* dlsym's object pointer stored into a function pointer: the form POSIX
 * gives for it, which ISO C (-Wpedantic) accepts. */
#define RESOLVE(lib, ptr, name)                                                \
    do {                                                                       \
        *(void **)(&(ptr)) = dlsym((lib), (name));                             \
        if (!(ptr)) {                                                          \
            fprintf(stderr, "consumer_dlopen: %s not found: %s\n", (name),     \
                    dlerror());                                                \
            return 1;                                                          \
        }                                                                      \
    } while (0)

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "consumer_dlopen: %s:%d: check failed: %s\n",      \
                    __FILE__, __LINE__, #cond);                                \
            return 1;                                                          \
        }                                                                      \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer_dlopen <path to libtimerwheel.so.N>\n");
        return 1;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "consumer_dlopen: dlopen failed: %s\n", dlerror());
        return 1;
    }
    RESOLVE(lib, p_config_init, "tw_config_init");
    RESOLVE(lib, p_create, "tw_create");
    RESOLVE(lib, p_schedule, "tw_schedule");
    RESOLVE(lib, p_cancel, "tw_cancel");
    RESOLVE(lib, p_destroy, "tw_destroy");

    tw_config cfg;
    p_config_init(&cfg);
    tw_service *s;
    CHECK(p_create(&cfg, &s) == TW_OK);
    tw_timer far;
    CHECK(p_schedule(s, 3600000 * MS, on_fire, NULL, &far) == TW_OK);

    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, arm_some, s) == 0);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(th[i], NULL) == 0);
    CHECK(atomic_load(&failed) == 0);

    /* The last deadline is 20 ms away; 10 s is for a loaded machine. */
    for (int waited = 0; atomic_load(&fired) < THREADS * PER_THREAD && waited < 10000; waited++)
        nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
    CHECK(atomic_load(&fired) == THREADS * PER_THREAD);
    CHECK(p_cancel(s, far) == TW_OK);
    p_destroy(s);
    CHECK(atomic_load(&fired) == THREADS * PER_THREAD); /* the cancelled one never ran */
    CHECK(dlclose(lib) == 0);
    printf("consumer_dlopen: %d timers fired from %d threads started after dlopen\n",
           THREADS * PER_THREAD, THREADS);
    return 0;
}
