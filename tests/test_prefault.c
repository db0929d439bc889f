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

/* Whether the whole pages inside records [lo, hi) (one chunk) are each a
 * page of the process's own, written, rather than the kernel's one shared
 * zero page that a read maps (a write to such a page then copies it, and
 * flushes every core's TLB): their frame numbers are all different
 * (/proc/self/pagemap). 1: own pages; 0: a frame seen twice; -1: the
 * kernel shows no frame numbers here (not root). */
static int own_pages(tw_service *s, uint32_t lo, uint32_t hi)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t from = ((uintptr_t)tw__rec(&s->rec, lo) + page - 1) & ~(page - 1);
    uintptr_t to = (uintptr_t)(tw__rec(&s->rec, hi - 1) + 1) & ~(page - 1);
    FILE *f = fopen("/proc/self/pagemap", "rb");
    if (!f)
        return -1;
    size_t n = (to - from) / page;
    uint64_t *pfn = calloc(n, sizeof *pfn);
    assert_non_null(pfn);
    int rc = fseek(f, (long)(from / page * sizeof(uint64_t)), SEEK_SET) == 0 &&
             fread(pfn, sizeof *pfn, n, f) == n ? 1 : -1;
    fclose(f);
    for (size_t i = 0; rc == 1 && i < n; i++) {
        pfn[i] &= (1ull << 55) - 1; /* bits 0-54: the frame */
        if (pfn[i] == 0)
            rc = -1;
    }
    for (size_t i = 0; rc == 1 && i < n; i++)
        for (size_t j = i + 1; rc == 1 && j < n; j++)
            if (pfn[i] == pfn[j])
                rc = 0;
    free(pfn);
    return rc;
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
    bool near = false, whole = false;
    for (int waited = 0; waited < 1000 && !(near && whole); waited++) { /* up to 10 s */
        /* The 16384 records past the high-water mark: for
         * N_TIMERS = 200000 chunk 7 ([130048, 261120)) holds them all. */
        if (!near && tw__rec(&s->rec, high + 16384) != NULL) {
            resident_pages(s, high, high + 16384, &pages, &resident);
            near = pages > 0 && resident == pages;
        }
        /* The last 16384 records of the request (chunk 8, [261120,
         * 523264)): the cursor got to the end of it. */
        size_t p2 = 0, r2 = 0;
        if (!whole && tw__rec(&s->rec, asked - 1) != NULL) {
            resident_pages(s, asked - 16384, asked, &p2, &r2);
            whole = p2 > 0 && r2 == p2;
        }
        t_sleep_ns(10 * T_MS);
    }
    print_message("records past the high-water mark (%u): %zu of %zu pages resident\n",
                  high, resident, pages);
    assert_true(pages > 100);
    assert_int_equal(resident, pages);
    assert_true(whole);
    /* Populated by writes: no page of them is the shared zero page. */
    int own = own_pages(s, high, high + 16384);
    if (own < 0)
        print_message("no frame numbers in /proc/self/pagemap: written pages not checked\n");
    else
        assert_int_equal(own, 1);

    /* Nothing a step past the request: the population stops there, though
     * the chunk goes on. (Sanitizers' and valgrind's allocators fill what
     * they hand out.) */
    if (!t_foreign_malloc()) {
        assert_non_null(tw__rec(&s->rec, asked + 1024 + 16384));
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
