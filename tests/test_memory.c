/* test_memory.c: what a service costs in memory, as README's table says
 * (issue 13: the formula needed the number of levels, and the figures
 * were nowhere). For each configuration of the table: the resident set
 * added by tw_create, and by 100,000 pending timers (delays uniform in
 * 1 s .. 1 h, MANUAL clock). The test prints the table in README's format
 * and fails if README's figures are off by more than a quarter (or 256 KiB):
 * so the table stays true. Measured without transparent huge pages, each
 * row after malloc_trim (main, measure). Sanitizers' shadow memory and quarantine make
 * RSS meaningless there, and so does valgrind's allocator (it pads and
 * keeps freed blocks): the comparison is skipped (the table still prints). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getcpu, sched_setaffinity */
#endif
#include "tw_test.h"

#include <malloc.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define N_TIMERS 100000

typedef struct row {
    uint32_t slots;
    uint64_t tick;
    uint32_t lanes;
    const char *tick_s;
    /* measured */
    uint32_t levels;
    double create_kib, timers_mib, per_timer;
} row;

static row rows[] = {
    {256, T_MS, 2, "1 ms", 0, 0, 0, 0},
    {4096, T_MS, 2, "1 ms", 0, 0, 0, 0},
    {65536, T_MS, 2, "1 ms", 0, 0, 0, 0},
    {4096, T_US, 2, "1 us", 0, 0, 0, 0},
    {4096, T_S, 2, "1 s", 0, 0, 0, 0},
    {4096, T_MS, 1, "1 ms", 0, 0, 0, 0},
    {4096, T_MS, 4, "1 ms", 0, 0, 0, 0},
};
#define NROWS (sizeof rows / sizeof rows[0])

static uint64_t rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu %lu", &size, &resident) != 2)
        fail_msg("cannot read /proc/self/statm");
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static tw_timer h[N_TIMERS];

static void measure(row *r)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.wheel_slots = r->slots;
    cfg.tick_ns = r->tick;
    tw__lanes_override = r->lanes;
    /* What the last row's tw_destroy gave malloc goes back to the system
     * first: else this row's mallocs reuse it and count nothing for it
     * (the rows after the first read 0.4-1 MiB low). */
    malloc_trim(0);
    uint64_t r0 = rss_bytes();
    tw_service *s = NULL;
    ASSERT_RC(tw_create(&cfg, &s), TW_OK);
    uint64_t r1 = rss_bytes();
    uint64_t seed = 0x5eed;
    for (int i = 0; i < N_TIMERS; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t delay = T_S + (seed >> 20) % (3599 * T_S);
        ASSERT_RC(tw_schedule(s, delay, t_noop, NULL, &h[i]), TW_OK);
    }
    uint64_t r2 = rss_bytes();
    r->levels = s->wheel.levels;
    /* The resident set may also shrink meanwhile (valgrind frees the blocks
     * it held back from the last row's tw_destroy while tw_create mallocs):
     * no memory added is 0, not a wrapped difference. */
    r->create_kib = r1 > r0 ? (double)(r1 - r0) / 1024.0 : 0.0;
    r->timers_mib = (double)(r2 - r0) / 1048576.0;
    r->per_timer = (double)(r2 - r1) / N_TIMERS;
    for (int i = 0; i < N_TIMERS; i++)
        ASSERT_RC(tw_cancel(s, h[i]), TW_OK);
    tw_destroy(s);
    tw__lanes_override = 0;
}

#ifndef TW_SAN_ANY /* (compared only without a sanitizer) */
/* README's row for r, or NULL: "| slots | tick | lanes | levels | create
 * KiB | 100k MiB | bytes/timer |". */
static bool readme_row(const char *readme, const row *r, double *create, double *mib,
                       double *per)
{
    char key[96];
    snprintf(key, sizeof key, "| %u | %s | %u |", r->slots, r->tick_s, r->lanes);
    const char *p = strstr(readme, key);
    if (!p)
        return false;
    unsigned levels;
    return sscanf(p + strlen(key), " %u | %lf | %lf | %lf |", &levels, create, mib, per) == 4;
}

static char *read_readme(void)
{
    FILE *f = fopen(TW_README, "r");
    if (!f)
        return NULL;
    /* Large enough for README as it grows (its runs' tables: 142 KiB on
     * 2026-11-28, when 128 KiB cut off the memory table); a README that
     * fills it is refused rather than read in part. */
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    if (n == sizeof buf - 1)
        return NULL;
    buf[n] = '\0';
    return buf;
}

static bool close_enough(double got, double want, double abs_slack)
{
    double d = got > want ? got - want : want - got;
    return d <= abs_slack || d <= want / 4;
}
#endif

static void memory_table_matches_readme(void **state)
{
    (void)state;
    /* A first service pays what the process pays once: the library's code
     * faulted in, malloc's first arena pages, stdio's. Measured without a
     * warm-up, the first row's "at create" read 84-344 KiB from run to run
     * (README: 76), and failed its 256 KiB slack on a loaded machine. */
    row warm = rows[0];
    measure(&warm);
    for (size_t i = 0; i < NROWS; i++)
        measure(&rows[i]);
    print_message("| wheel_slots | tick | lanes | levels | at create (KiB) | with 100k timers "
                  "(MiB) | bytes per timer |\n");
    print_message("|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < NROWS; i++) {
        row *r = &rows[i];
        print_message("| %u | %s | %u | %u | %.0f | %.1f | %.1f |\n", r->slots, r->tick_s,
                      r->lanes, r->levels, r->create_kib, r->timers_mib, r->per_timer);
    }
    /* Whatever the wheel: no slot costs memory until it is used. */
    for (size_t i = 0; i < NROWS; i++)
        if (rows[i].create_kib > 1024)
            fail_msg("wheel_slots %u: %.0f KiB at create", rows[i].slots, rows[i].create_kib);
#ifdef TW_SAN_ANY
    print_message("      (sanitizer build: README's figures not compared)\n");
#else
    if (t_under_valgrind()) {
        print_message("      (under valgrind: README's figures not compared)\n");
        return;
    }
    const char *readme = read_readme();
    if (!readme)
        fail_msg("cannot read %s", TW_README);
    for (size_t i = 0; i < NROWS; i++) {
        row *r = &rows[i];
        double c, m, p;
        if (!readme_row(readme, r, &c, &m, &p))
            fail_msg("README has no row \"| %u | %s | %u |\" in its memory table", r->slots,
                     r->tick_s, r->lanes);
        if (!close_enough(r->create_kib, c, 256) || !close_enough(r->timers_mib, m, 0.25) ||
            !close_enough(r->per_timer, p, 2.5))
            fail_msg("README's row %u / %s / %u lanes says %.0f KiB, %.1f MiB, %.1f B/timer; "
                     "measured %.0f, %.1f, %.1f: update README (the table above)",
                     r->slots, r->tick_s, r->lanes, c, m, p, r->create_kib, r->timers_mib,
                     r->per_timer);
    }
#endif
}

/* Bytes of [p, p + bytes) in memory (mincore), whole pages inside. */
static uint64_t resident_bytes(const void *p, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t e = ((uintptr_t)p + bytes) & ~(uintptr_t)(page - 1);
    if (e <= a)
        return 0;
    size_t n = (e - a) / page;
    unsigned char *vec = malloc(n);
    if (!vec || mincore((void *)a, e - a, vec) != 0)
        fail_msg("mincore failed");
    uint64_t in = 0;
    for (size_t i = 0; i < n; i++)
        in += vec[i] & 1;
    free(vec);
    return in * page;
}

/* The slot array starts as untouched memory, and a kernel may back even a
 * read of such a page with a page of its own (the AMD guest's Linux 6.18:
 * reading 64 MiB never written made it all resident). Walks over every
 * slot (tw_stats_get's sum of what slots hold past their fixed arrays,
 * compaction's round robin) look at a header only when the slot's
 * occupancy bit is set (wheel.c, slot_marked), so the headers of slots
 * never used stay out of memory: with 4096 slots (4.5 MiB of headers) a
 * compaction over the whole wheel and a stats read leave the array's
 * resident part near what the placements wrote; with 65536 (72 MiB), a
 * stats read adds next to nothing. Before, the first made all 4.5 MiB
 * resident on that kernel, and the soak's RSS check failed on it. */
static void walks_leave_unused_slot_headers_alone(void **state)
{
    (void)state;
    enum { STALE = 200000 };
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    tw_service *s = NULL; /* tw_create, not t_service_cfg: tw__check reads every header */
    ASSERT_RC(tw_create(&cfg, &s), TW_OK);
    size_t bytes = (size_t)s->wheel.lanes * s->wheel.levels * s->wheel.nslots * sizeof(tw_slot);
    static tw_timer stale[STALE];
    for (int i = 0; i < STALE; i++) /* an hour away, cancelled: entries left behind */
        ASSERT_RC(tw_schedule(s, 3600 * T_S - (uint64_t)i * T_MS, t_noop, NULL, &stale[i]),
                  TW_OK);
    for (int i = 0; i < STALE; i++)
        ASSERT_RC(tw_cancel(s, stale[i]), TW_OK);
    uint64_t placed = resident_bytes(s->wheel.slot, bytes);
    for (int k = 0; k < 4; k++) /* each advance compacts, round robin over the wheel */
        ASSERT_RC(tw_advance(s, tw_now(s) + T_MS), TW_OK);
    tw_stats st;
    tw_stats_get(s, &st);
    uint64_t walked = resident_bytes(s->wheel.slot, bytes);
    print_message("      4096 slots: %zu KiB of headers; resident %" PRIu64 " KiB after the "
                  "placements, %" PRIu64 " KiB after compaction and a stats read (%" PRIu64
                  " compacted)\n", bytes / 1024, placed / 1024, walked / 1024,
                  s->wheel.compacted);
    assert_true(s->wheel.compacted >= STALE / 2); /* the walks did run */
    tw_destroy(s);

    cfg.wheel_slots = 65536;
    ASSERT_RC(tw_create(&cfg, &s), TW_OK);
    bytes = (size_t)s->wheel.lanes * s->wheel.levels * s->wheel.nslots * sizeof(tw_slot);
    tw_timer one;
    ASSERT_RC(tw_schedule(s, 10 * T_S, t_noop, NULL, &one), TW_OK);
    tw_stats_get(s, &st);
    uint64_t read65536 = resident_bytes(s->wheel.slot, bytes);
    print_message("      65536 slots: %zu KiB of headers; resident %" PRIu64 " KiB after a "
                  "stats read\n", bytes / 1024, read65536 / 1024);
    ASSERT_RC(tw_cancel(s, one), TW_OK);
    tw_destroy(s);
#ifdef TW_SAN_ANY
    print_message("      (sanitizer build: resident sizes not compared)\n");
#else
    if (walked > placed + 256 * 1024)
        fail_msg("compaction and a stats read made %" PRIu64 " KiB of slot headers resident",
                 (walked - placed) / 1024);
    if (read65536 > 1024 * 1024)
        fail_msg("a stats read made %" PRIu64 " KiB of 65536 slots' headers resident",
                 read65536 / 1024);
#endif
}

/* A producer places into the lane of the CPU it runs on (wheel.c,
 * my_lane), and each lane has slot headers of its own: a thread that
 * moved to the other CPU while it armed filled a second lane's headers
 * too. With 65536 slots, where the 1,800 timers of level 0 touch a page
 * of headers each, the row read 23.3 MiB instead of 16.4 (4 runs in 12
 * beside another test process). The table is for one thread on one CPU. */
static void stay_on_this_cpu(void)
{
    int cpu = sched_getcpu();
    if (cpu < 0)
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        print_message("      (cannot stay on CPU %d: a lane's figure may double)\n", cpu);
}

int main(void)
{
    /* Transparent huge pages (Debian's "madvise" mode) back a record chunk
     * with whole 2 MiB pages where one fits its mapping's alignment: the
     * same row read 5.2 or 6.3 MiB from run to run. Measured without them;
     * README says what they may add. The handles' array is touched before
     * any row: the first row counted its 800 KB. */
    (void)prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    stay_on_this_cpu();
    memset(h, 0xff, sizeof h);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(memory_table_matches_readme),
        cmocka_unit_test(walks_leave_unused_slot_headers_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
