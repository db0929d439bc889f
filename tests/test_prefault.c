/* test_prefault.c: the cursor populates the record table ahead of the
 * producers (records.c, cursor.c), so that a schedule does not stop to
 * zero a page of records: the pages past the high-water mark become
 * resident while the service is idle, no further than TW_PREFAULT_AHEAD
 * records past it, and never under the MANUAL clock (no cursor). Residency
 * is read with mincore(); transparent huge pages are switched off for this
 * process, so that a page is 4 KiB and residency says exactly what was
 * populated. Under sanitizers and valgrind, whose allocators fill what they
 * hand out, only the populated side is checked. */
#include "tw_test.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define N_TIMERS 200000u

static void noop_cb(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
}

/* Whether the kernel populates on request (MADV_POPULATE_WRITE, Linux
 * 5.14): without it the library leaves the faults to the producers. */
static bool kernel_populates(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    bool ok = madvise(p, page, 23 /* MADV_POPULATE_WRITE */) == 0;
    munmap(p, page);
    return ok;
}

static int no_huge_pages(void **state)
{
    (void)state;
    return prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0 ? 0 : -1;
}

/* The whole pages inside records [lo, hi) (one chunk): how many there
 * are, and how many of them are resident. */
static void resident_pages(tw_service *s, uint32_t lo, uint32_t hi, size_t *pages,
                           size_t *resident)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    tw_record *a = tw__rec(&s->rec, lo), *b = tw__rec(&s->rec, hi - 1);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(b == a + (hi - 1 - lo)); /* one chunk */
    uintptr_t from = ((uintptr_t)a + page - 1) & ~(page - 1);
    uintptr_t to = (uintptr_t)(b + 1) & ~(page - 1);
    *pages = *resident = 0;
    if (to <= from)
        return;
    size_t n = (to - from) / page;
    unsigned char *vec = malloc(n);
    assert_non_null(vec);
    assert_int_equal(mincore((void *)from, to - from, vec), 0);
    for (size_t i = 0; i < n; i++)
        *resident += vec[i] & 1;
    *pages = n;
    free(vec);
}

static tw_timer *schedule_many(tw_service *s)
{
    tw_timer *h = malloc(N_TIMERS * sizeof *h);
    assert_non_null(h);
    for (uint32_t i = 0; i < N_TIMERS; i++)
        assert_int_equal(tw_schedule(s, 3600 * T_S, noop_cb, NULL, &h[i]), TW_OK);
    return h;
}

static void cancel_all(tw_service *s, tw_timer *h)
{
    for (uint32_t i = 0; i < N_TIMERS; i++)
        assert_int_equal(tw_cancel(s, h[i]), TW_OK);
    tw_stats st;
    tw_stats_get(s, &st);
    assert_int_equal(st.pending, 0);
    assert_int_equal(st.fired, 0);
    free(h);
}

/* The 16384 records (640 KiB) past the high-water mark become resident within a
 * few seconds (the cursor is idle: every timer is an hour away); the ones
 * more than a step past what the producers asked for stay untouched. */
static void monotonic_populates_ahead(void **state)
{
    (void)state;
    if (!kernel_populates()) {
        print_message("the kernel has no MADV_POPULATE_WRITE: nothing to test\n");
        skip();
    }
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MONOTONIC;
    cfg.workers = 1;
    tw_service *s;
    assert_int_equal(tw_create(&cfg, &s), TW_OK);
    tw_timer *h = schedule_many(s);
    uint32_t high = tw__records_high(&s->rec);
    uint32_t asked = high / TW_PREFAULT_STEP * TW_PREFAULT_STEP + TW_PREFAULT_AHEAD;

    size_t pages = 0, resident = 0;
    for (int waited = 0; waited < 1000; waited++) { /* up to 10 s (sanitizers) */
        /* The 16384 records past the high-water mark: for
         * N_TIMERS = 200000 chunk 7 ([130048, 261120)) holds them all. */
        if (tw__rec(&s->rec, high + 16384) != NULL) {
            resident_pages(s, high, high + 16384, &pages, &resident);
            if (pages > 0 && resident == pages)
                break;
        }
        t_sleep_ns(10 * T_MS);
    }
    print_message("records past the high-water mark (%u): %zu of %zu pages resident\n",
                  high, resident, pages);
    assert_true(pages > 100);
    assert_int_equal(resident, pages);

    /* Nothing a step past the request: the population stops there.
     * (Sanitizers' and valgrind's allocators fill what they hand out.) */
    if (!t_foreign_malloc()) {
        resident_pages(s, asked + 1024, asked + 1024 + 16384, &pages, &resident);
        assert_true(pages > 100);
        assert_int_equal(resident, 0);
    }

    cancel_all(s, h);
    tw_destroy(s);
}

/* MANUAL: no cursor thread, so nobody populates ahead; the producer's
 * records are resident (it wrote them), the 16384 past its block are
 * not. */
static void manual_clock_populates_nothing(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    tw_service *s;
    assert_int_equal(tw_create(&cfg, &s), TW_OK);
    tw_timer *h = schedule_many(s);
    uint32_t high = tw__records_high(&s->rec);
    size_t pages, resident;
    resident_pages(s, high - 16384, high, &pages, &resident);
    assert_int_equal(resident, pages); /* written by the producer */
    t_sleep_ns(50 * T_MS);
    if (!t_foreign_malloc() && tw__rec(&s->rec, high + 1024 + 16384) != NULL) {
        resident_pages(s, high + 1024, high + 1024 + 16384, &pages, &resident);
        assert_true(pages > 100);
        assert_int_equal(resident, 0);
    }
    cancel_all(s, h);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(monotonic_populates_ahead),
        cmocka_unit_test(manual_clock_populates_nothing),
    };
    return cmocka_run_group_tests(tests, no_huge_pages, NULL);
}
