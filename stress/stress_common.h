/*
 * stress_common.h: what the stress programs share: argument parsing, a
 * per-thread random generator, the clock, an arena of accounting records,
 * and the failure counter. Header-only (static functions), so each program
 * stays one translation unit.
 *
 * Every program takes
 *     prog [threads] [iterations] [seconds] [extra...] [seed]
 * with defaults; "-" keeps a default. seconds defaults to the environment
 * variable TW_STRESS_SECONDS, else 3. The seed is printed first so that a
 * failing run can be repeated (thread interleavings still differ).
 */
#ifndef TW_STRESS_COMMON_H
#define TW_STRESS_COMMON_H

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "timerwheel.h"

/* ---- failures ------------------------------------------------------------ */

static _Atomic uint64_t st_failures; /* every violated check adds one */

/* Report a violated check (the first 50 are printed, all are counted). */
__attribute__((format(printf, 1, 2)))
static inline void st_fail(const char *fmt, ...)
{
    uint64_t n = atomic_fetch_add_explicit(&st_failures, 1, memory_order_relaxed);
    if (n >= 50)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static inline uint64_t st_failed(void)
{
    return atomic_load_explicit(&st_failures, memory_order_relaxed);
}

/* ---- arguments ----------------------------------------------------------- */

static inline uint64_t st_arg(int argc, char **argv, int i, uint64_t def)
{
    if (i >= argc || strcmp(argv[i], "-") == 0)
        return def;
    char *end;
    unsigned long long v = strtoull(argv[i], &end, 0);
    if (*end != '\0') {
        fprintf(stderr, "bad argument %d: '%s'\n", i, argv[i]);
        exit(2);
    }
    return v;
}

static inline double st_default_seconds(void)
{
    const char *e = getenv("TW_STRESS_SECONDS");
    double d = e ? strtod(e, NULL) : 0.0;
    return d > 0.0 ? d : 3.0;
}

static inline double st_arg_seconds(int argc, char **argv, int i)
{
    if (i >= argc || strcmp(argv[i], "-") == 0)
        return st_default_seconds();
    double d = strtod(argv[i], NULL);
    return d > 0.0 ? d : st_default_seconds();
}

/* ---- time ---------------------------------------------------------------- */

static inline uint64_t st_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void st_sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The process's resident set, in MB (/proc/self/statm). */
static inline double st_rss_mb(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu %lu", &size, &resident) != 2) {
        fprintf(stderr, "cannot read /proc/self/statm\n");
        exit(2);
    }
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

/* ---- random (xorshift64*, one per thread) -------------------------------- */

typedef struct st_rng { uint64_t x; } st_rng;

static inline void st_rng_seed(st_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (stream + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    r->x = (z ^ (z >> 31)) | 1;
}

static inline uint64_t st_rand(st_rng *r)
{
    r->x ^= r->x >> 12;
    r->x ^= r->x << 25;
    r->x ^= r->x >> 27;
    return r->x * 0x2545f4914f6cdd1dull;
}

static inline uint64_t st_below(st_rng *r, uint64_t n) /* 0 .. n-1; n > 0 */
{
    return st_rand(r) % n;
}

static inline uint64_t st_seed_default(void)
{
    return st_mono_ns() ^ ((uint64_t)getpid() << 32);
}

/* ---- arena: records that live until the end of the program --------------- */

/* Records are handed to the library as callback arguments, so they must
 * stay put until every callback and on_pending call is over: the arena
 * only grows, in chunks, and is walked at the end. One arena per owning
 * thread (no locking). */
#define ST_ARENA_CHUNK 4096
typedef struct st_arena {
    void **chunk;
    size_t nchunks, cap_chunks;
    size_t n;          /* records handed out */
    size_t size;       /* bytes per record */
} st_arena;

static inline void st_arena_init(st_arena *a, size_t size)
{
    memset(a, 0, sizeof *a);
    a->size = size;
}

static inline void *st_arena_get(st_arena *a, size_t i)
{
    return (char *)a->chunk[i / ST_ARENA_CHUNK] + (i % ST_ARENA_CHUNK) * a->size;
}

static inline void *st_arena_new(st_arena *a) /* zeroed */
{
    if (a->n == a->nchunks * ST_ARENA_CHUNK) {
        if (a->nchunks == a->cap_chunks) {
            a->cap_chunks = a->cap_chunks ? 2 * a->cap_chunks : 16;
            a->chunk = realloc(a->chunk, a->cap_chunks * sizeof *a->chunk);
            if (!a->chunk) {
                perror("realloc");
                exit(2);
            }
        }
        a->chunk[a->nchunks] = calloc(ST_ARENA_CHUNK, a->size);
        if (!a->chunk[a->nchunks]) {
            perror("calloc");
            exit(2);
        }
        a->nchunks++;
    }
    return st_arena_get(a, a->n++);
}

static inline void st_arena_free(st_arena *a)
{
    for (size_t i = 0; i < a->nchunks; i++)
        free(a->chunk[i]);
    free(a->chunk);
    memset(a, 0, sizeof *a);
}

/* ---- threads ------------------------------------------------------------- */

static inline void st_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(t, NULL, fn, arg);
    if (rc != 0) {
        fprintf(stderr, "pthread_create: %s\n", strerror(rc));
        exit(2);
    }
}

/* A MANUAL-clock service with a 1 us tick and the given wheel; exits 2 if
 * tw_create refuses. */
static inline tw_service *st_create_manual(uint64_t wheel_slots, uint64_t slot_capacity)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.tick_ns = 1000;
    cfg.wheel_slots = (uint32_t)wheel_slots;
    cfg.slot_capacity = (uint32_t)slot_capacity;
    tw_service *s = NULL;
    int rc = tw_create(&cfg, &s);
    if (rc != TW_OK) {
        fprintf(stderr, "tw_create: %s\n", tw_strerror(rc));
        exit(2);
    }
    return s;
}

#endif /* TW_STRESS_COMMON_H */
