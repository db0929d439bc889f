/* test_segments.c: the slots' segment memory (src/segments.c): every
 * timer in overflow segments fires once; a drained slot gives its overflow
 * segments back after a grace period, so a wheel turned by bursts holds
 * what its pending timers need, not every slot's largest burst; a reader
 * inside delays the frees, and a stalled one bounds what waits; freed
 * segments are taken again from a bounded cache; out of memory is
 * TW_ENOMEM. */
#include "tw_test.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>


/* Through the wheel: with a slot capacity of 1, thousands of timers in a
 * few slots live in overflow segments; every one fires once, never early,
 * in deadline order. */
static const t_timer *by_deadline_v;

static int by_deadline(const void *a, const void *b)
{
    uint64_t x = by_deadline_v[*(const int *)a].deadline;
    uint64_t y = by_deadline_v[*(const int *)b].deadline;
    return (x > y) - (x < y);
}

static void overflow_segments_hold_every_timer(void **state)
{
    (void)state;
    enum { N = 20000 };
    static t_timer v[N];
    static int order[N];
    t_reset_cb_errors();
    t_seq = 0;
    tw_service *s = t_service(T_MS, 64, 1);
    for (int i = 0; i < N; i++)
        t_arm_nocheck(s, &v[i], (uint64_t)(1 + i % 3) * T_MS + (uint64_t)i);
    CHECK(s);
    ADVANCE(s, 4 * T_MS);
    t_expect_due(v, N, 4 * T_MS, T_MS);
    for (int i = 0; i < N; i++) {
        assert_int_equal(v[i].runs, 1);
        order[i] = i;
    }
    by_deadline_v = v;
    qsort(order, N, sizeof order[0], by_deadline);
    for (int i = 1; i < N; i++) {
        if (v[order[i]].seq < v[order[i - 1]].seq)
            fail_msg("deadline %" PRIu64 " ran before deadline %" PRIu64,
                     v[order[i]].deadline, v[order[i - 1]].deadline);
    }
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, N);
    if (st.overflowed < N - 64)
        fail_msg("stats.overflowed %" PRIu64 ", expected >= %d", st.overflowed, N - 64);
    ASSERT_STATS_IDENTITY(st);
    tw_destroy(s);
}

/* ---- giving segments back ---------------------------------------------------- */

static uint64_t held(tw_service *s)
{
    return tw__seg_held_bytes(s); /* overflow segments and tables, not fixed arrays */
}

static void arm_burst(tw_service *s, int n, uint64_t delay)
{
    for (int i = 0; i < n; i++) {
        tw_timer h;
        ASSERT_RC(tw_schedule(s, delay, t_noop, NULL, &h), TW_OK);
    }
}

/* A MANUAL service whose budget's minimum (256 KiB by default) is 1 byte:
 * its drains give back whatever the remaining entries do not need. */
static tw_service *strict_service(uint32_t slots)
{
    tw__seg_keep_min_override = 1;
    tw_service *s = t_service(T_MS, slots, 16);
    tw__seg_keep_min_override = 0;
    return s;
}

/* A burst of 20,000 timers in one tick grows its slot's overflow segments
 * (64 + 128 + ... + 16384 entries, 256 KiB); once the slot is drained and
 * two grace steps have passed (the next tw_advance), nothing is left. */
static void burst_segments_are_given_back_after_the_drain(void **state)
{
    (void)state;
    enum { N = 20000 };
    tw_service *s = strict_service(256);
    arm_burst(s, N, 5 * T_MS);
    uint64_t burst = held(s);
    if (burst < (uint64_t)(N - 64) * sizeof(uint64_t))
        fail_msg("a burst of %d holds %" PRIu64 " bytes of segments", N, burst);
    ADVANCE(s, 6 * T_MS);
    ADVANCE(s, 7 * T_MS);
    uint64_t after = held(s);
    printf("burst of %d: %" PRIu64 " bytes of overflow segments, %" PRIu64
           " after its drain\n", N, burst, after);
    if (after != 0)
        fail_msg("%" PRIu64 " bytes of overflow segments kept after the drain", after);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, N);
    tw_destroy(s);
}

/* Under the budget's minimum (TW_SEG_KEEP_MIN, 256 KiB), a drained slot
 * keeps its segments for its next round: a slot refilled every turn
 * allocates nothing. Past it, the same drain gives them back. */
static void within_the_budget_a_slot_keeps_its_segments(void **state)
{
    (void)state;
    enum { SMALL = 10000, LARGE = 200000 };
    tw_service *s = t_service(T_MS, 256, 16);
    arm_burst(s, SMALL, 5 * T_MS);
    uint64_t small = held(s);
    ADVANCE(s, 6 * T_MS);
    ADVANCE(s, 7 * T_MS);
    if (held(s) != small)
        fail_msg("a burst of %" PRIu64 " bytes (under 256 KiB) went from %" PRIu64
                 " to %" PRIu64 " bytes after its drain", small, small, held(s));
    arm_burst(s, LARGE, 5 * T_MS);
    uint64_t large = held(s);
    ADVANCE(s, 13 * T_MS);
    ADVANCE(s, 14 * T_MS);
    printf("within the budget: %" PRIu64 " bytes kept; past it, %" PRIu64 " -> %" PRIu64
           "\n", small, large, held(s));
    if (held(s) > small)
        fail_msg("%" PRIu64 " bytes (over 256 KiB) still held after the drain", held(s));
    tw_destroy(s);
}

/* The pattern a peer can choose: a burst into one slot, the next burst a
 * tick later into the next slot, round the wheel twice. Only two bursts
 * are pending at a time, and the memory follows: a wheel whose slots kept
 * their segments held every slot's burst (256 x 32 KiB). */
static void wheel_turned_by_bursts_holds_about_one_burst(void **state)
{
    (void)state;
    enum { SLOTS = 256, B = 2000, ROUNDS = 2 * SLOTS };
    tw_service *s = strict_service(SLOTS);
    uint64_t most = 0;
    for (int r = 0; r < ROUNDS; r++) {
        arm_burst(s, B, 2 * T_MS);
        uint64_t h = held(s);
        most = h > most ? h : most;
        ASSERT_RC(tw_advance(s, tw_now(s) + T_MS), TW_OK);
    }
    /* Every burst has run; a slot drained while later bursts were still
     * pending may have kept its segments within the budget then (32
     * bytes an entry): its next drain, a turn later, gives them back. */
    for (int r = 0; r < SLOTS + 4; r++)
        ASSERT_RC(tw_advance(s, tw_now(s) + T_MS), TW_OK);
    CHECK(s);
    uint64_t end = held(s);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, (uint64_t)B * ROUNDS);
    printf("bursts of %d round the wheel: at most %" PRIu64 " bytes of overflow segments, %"
           PRIu64 " at the end\n", B, most, end);
    /* The bursts pending and the one drained last, waiting for its grace
     * steps (segments double: up to twice a burst's entries). */
    uint64_t bound = 4 * B * sizeof(uint64_t);
    if (most > bound)
        fail_msg("segments reached %" PRIu64 " bytes, bound %" PRIu64, most, bound);
    if (end != 0)
        fail_msg("%" PRIu64 " bytes of overflow segments kept at the end", end);
    tw_destroy(s);
}

/* A reader inside (a producer descheduled between loading a segment
 * pointer and publishing into it, played by this thread) keeps every
 * segment detached after it entered from being freed; once it leaves,
 * the next steps free them. */
static void reader_inside_delays_the_free(void **state)
{
    (void)state;
    enum { N = 20000 };
    tw_service *s = strict_service(256);
    tw_seg_guard g = TW_SEG_GUARD(s);
    tw__seg_enter(&g);
    arm_burst(s, N, 5 * T_MS);
    uint64_t burst = held(s);
    for (uint64_t t = 6; t <= 12; t++)
        ADVANCE(s, t * T_MS);
    if (held(s) < burst)
        fail_msg("freed with a reader inside: %" PRIu64 " of %" PRIu64 " bytes left",
                 held(s), burst);
    assert_true(s->wheel.segs.waiting_bytes >= burst);
    tw__seg_done(&g);
    ADVANCE(s, 13 * T_MS);
    ADVANCE(s, 14 * T_MS);
    if (held(s) != 0)
        fail_msg("%" PRIu64 " bytes kept after the reader left", held(s));
    tw_destroy(s);
}

/* A reader that stays inside must not make the detached memory pile up:
 * past the limit (lowered here to 256 KiB), drains leave slots their
 * segments. Once it leaves, the next turn of the wheel frees them all. */
static void stalled_reader_bounds_what_waits(void **state)
{
    (void)state;
    enum { SLOTS = 64, B = 8000, ROUNDS = 40 };
    const uint64_t limit = 256 * 1024;
    tw__retire_max_override = limit;
    tw_service *s = strict_service(SLOTS);
    tw__retire_max_override = 0;
    tw_seg_guard g = TW_SEG_GUARD(s);
    tw__seg_enter(&g);
    uint64_t most_waiting = 0;
    for (int r = 0; r < ROUNDS; r++) {
        arm_burst(s, B, 2 * T_MS);
        ASSERT_RC(tw_advance(s, tw_now(s) + T_MS), TW_OK);
        uint64_t w = s->wheel.segs.waiting_bytes;
        most_waiting = w > most_waiting ? w : most_waiting;
    }
    /* One slot's segments may go past the limit: it is checked per slot. */
    uint64_t bound = limit + 2 * B * sizeof(uint64_t) * TW_MAX_LANES;
    printf("stalled reader: at most %" PRIu64 " bytes waiting (limit %" PRIu64 ")\n",
           most_waiting, limit);
    if (most_waiting > bound)
        fail_msg("%" PRIu64 " bytes waiting with a reader inside, bound %" PRIu64,
                 most_waiting, bound);
    if (most_waiting < limit)
        fail_msg("only %" PRIu64 " bytes ever waited: the limit was not reached",
                 most_waiting);
    tw__seg_done(&g);
    for (int r = 0; r < 2 * SLOTS; r++)
        ASSERT_RC(tw_advance(s, tw_now(s) + T_MS), TW_OK);
    CHECK(s);
    if (held(s) != 0)
        fail_msg("%" PRIu64 " bytes kept once the reader left and the wheel turned",
                 held(s));
    assert_int_equal(s->wheel.segs.waiting_bytes, 0);
    tw_destroy(s);
}

/* Where overflow memory is kept (a failure's report): every slot, wheel
 * or late, that still holds an overflow segment or table, with its round
 * (the word's count and closed bit, its epoch against the cursor), and
 * the rare paths that leave such segments. Read while the cursor may run:
 * relaxed loads, a report, not a check. */
static void print_kept_segments(tw_service *s)
{
    tw_wheel *w = &s->wheel;
    uint64_t c = atomic_load_explicit(&w->cur, memory_order_relaxed);
    size_t total = (size_t)w->lanes * w->levels * w->nslots;
    printf("kept: cur %" PRIu64 ", %" PRIu64 " bytes held, %" PRIu64 " cached, "
           "rare: seg_lost %" PRIu64 ", early_claim %" PRIu64 ", late_slot %" PRIu64
           ", newer %" PRIu64 "\n",
           c, tw__seg_held_bytes(s), tw__seg_cached_bytes(s),
           tw__rare_total(s, TW_RARE_SEG_LOST), tw__rare_total(s, TW_RARE_EARLY_CLAIM),
           tw__rare_total(s, TW_RARE_LATE_SLOT), tw__rare_total(s, TW_RARE_NEWER));
    for (size_t k = 0; k <= total + 1; k++) {
        tw_slot *sl = k < total ? &w->slot[k] : &w->late[k - total];
        bool any = atomic_load_explicit(&sl->ovf, memory_order_relaxed) != NULL;
        for (uint32_t j = 1; j < TW_SLOT_NEAR; j++)
            any |= atomic_load_explicit(&sl->near[j], memory_order_relaxed) != NULL;
        if (!any)
            continue;
        uint64_t word = atomic_load_explicit(&sl->word, memory_order_relaxed);
        uint64_t epoch = atomic_load_explicit(&sl->epoch, memory_order_relaxed);
        if (k < total)
            printf("kept: level %u slot %u lane %u", (unsigned)(k / w->nslots % w->levels),
                   (unsigned)(k % w->nslots), (unsigned)(k / w->nslots / w->levels));
        else
            printf("kept: late[%u]", (unsigned)(k - total));
        printf(": count %" PRIu64 "%s, epoch %" PRIu64 " (cur %+" PRId64 "), seq %" PRIu64
               ", segments", (uint64_t)(word & TW_SLOT_COUNT_MASK),
               word & TW_SLOT_CLOSED ? " closed" : "", epoch, (int64_t)(epoch - c),
               atomic_load_explicit(&sl->seq, memory_order_relaxed));
        for (uint32_t j = 1; j < TW_SLOT_NEAR; j++) {
            if (atomic_load_explicit(&sl->near[j], memory_order_relaxed))
                printf(" %u", j);
        }
        if (atomic_load_explicit(&sl->ovf, memory_order_relaxed))
            printf(" +table");
        printf("\n");
    }
}

/* A slot left holding segments in a round that reserves nothing (here: its
 * drain could not detach them, a reader being inside; in a server: a
 * producer installed one and then lost its reservation, see
 * idle_cursor_frees_a_burst) is not drained again for a whole turn. The
 * trim gives such segments back (wheel.c, strays): within a few trim
 * periods, not a turn of the wheel later. */
static void empty_slot_gives_back_its_segments_at_the_trim(void **state)
{
    (void)state;
    enum { N = 2000, SLOTS = 256 };
    tw__retire_max_override = 1; /* anything waiting stops the drains' detaches */
    tw__trim_period_override = 5 * T_MS;
    tw_service *s = strict_service(SLOTS);
    tw__retire_max_override = 0;
    tw__trim_period_override = 0;
    tw_seg_guard g = TW_SEG_GUARD(s);
    tw__seg_enter(&g);            /* a reader inside: nothing detached is freed */
    arm_burst(s, N, 3 * T_MS);    /* its drain detaches: then something waits */
    arm_burst(s, N, 5 * T_MS);    /* its drain may not: its slot keeps them */
    for (uint64_t t = 1; t <= 5; t++)
        ADVANCE(s, t * T_MS);
    assert_true(s->wheel.segs.waiting_bytes > 0);
    uint64_t kept = held(s) - s->wheel.segs.waiting_bytes;
    if (kept < (uint64_t)(N - 64) * sizeof(uint64_t))
        fail_msg("the second burst's slot kept %" PRIu64 " bytes, not its segments", kept);
    tw__seg_done(&g);
    /* Well before the slot's next round (tick 5 + SLOTS). */
    uint64_t t = 6;
    for (; t < 40 && held(s) != 0; t++)
        ADVANCE(s, t * T_MS);
    printf("empty slot: %" PRIu64 " bytes kept, %" PRIu64 " left at tick %" PRIu64
           " (its next round: tick %d)\n", kept, held(s), t, 5 + SLOTS);
    if (held(s) != 0)
        fail_msg("%" PRIu64 " bytes still kept at tick %" PRIu64, held(s), t);
    tw_destroy(s);
}

static bool strays_marked(tw_service *s)
{
    const tw_wheel *w = &s->wheel;
    /* Relaxed: the test's thread is the only one placing. */
    return atomic_load_explicit(&w->strays[(size_t)w->levels * w->occ_words],
                                memory_order_relaxed) != 0;
}

/* Arming timers whose slots grow overflow segments, on levels 0 and 1,
 * leaves the trim nothing to come back for: each placement kept its
 * reservation, so the slots' drains give the segments back. Marking
 * every install (before 2026-11-25) woke an idle cursor once a trim
 * period after such an arming (WL4). The segments still go at the drains. */
static void arming_leaves_the_trim_nothing_to_come_back_for(void **state)
{
    (void)state;
    enum { N = 2000 };
    tw_service *s = strict_service(256);
    arm_burst(s, N, 100 * T_MS);  /* a level-0 slot */
    arm_burst(s, N, 3000 * T_MS); /* a level-1 slot */
    if (held(s) < 2 * (uint64_t)(N - 64) * sizeof(uint64_t))
        fail_msg("the arming holds %" PRIu64 " bytes of segments", held(s));
    assert_false(strays_marked(s));
    uint64_t at;
    assert_false(tw__wheel_trim_due(s, &at));
    ADVANCE(s, 3001 * T_MS);
    ADVANCE(s, 3002 * T_MS);
    assert_int_equal(held(s), 0);
    tw_destroy(s);
}

/* A compaction that takes a slot's entries (all cancelled) but may not
 * detach its segments (too much memory waits for a grace period: a reader
 * is inside) leaves a slot with no entry and no drain before its next
 * epoch: it marks the slot, and the trim gives the segments back once the
 * reader is gone, long before that epoch. */
static void compaction_that_keeps_segments_marks_the_slot(void **state)
{
    (void)state;
    enum { N = 2000 };
    tw__retire_max_override = 1; /* anything waiting refuses further detaches */
    tw__trim_period_override = 5 * T_MS;
    tw_service *s = strict_service(256);
    tw__retire_max_override = 0;
    tw__trim_period_override = 0;
    tw_seg_guard g = TW_SEG_GUARD(s);
    tw__seg_enter(&g);           /* a reader inside: nothing detached is freed */
    arm_burst(s, N, 3 * T_MS);   /* its drain detaches: then something waits */
    tw_timer far[N];
    for (int i = 0; i < N; i++)
        ASSERT_RC(tw_schedule(s, 3000 * T_MS, t_noop, NULL, &far[i]), TW_OK);
    ADVANCE(s, 3 * T_MS);
    assert_true(s->wheel.segs.waiting_bytes > 0);
    for (int i = 0; i < N; i++)
        ASSERT_RC(tw_cancel(s, far[i]), TW_OK);
    uint64_t compacted = s->wheel.compacted;
    ADVANCE(s, 4 * T_MS); /* entries > 2 x pending: compaction */
    if (s->wheel.compacted == compacted)
        fail_msg("no compaction after %d cancels", N);
    uint64_t kept = held(s) - s->wheel.segs.waiting_bytes;
    if (kept < (uint64_t)(N - 64) * sizeof(uint64_t))
        fail_msg("the compacted slot kept %" PRIu64 " bytes, not its segments", kept);
    assert_true(strays_marked(s));
    tw__seg_done(&g);
    uint64_t t = 5;
    for (; t < 60 && held(s) != 0; t++)
        ADVANCE(s, t * T_MS);
    if (held(s) != 0)
        fail_msg("%" PRIu64 " bytes still kept at tick %" PRIu64 " (the slot's epoch: 3000)",
                 held(s), t);
    tw_destroy(s);
}

/* With a cursor thread: after a burst has fired and nothing else is
 * armed, the idle cursor still comes back for the grace steps and frees
 * the burst's segments within milliseconds (TW_RETIRE_POLL_NS); a segment
 * a placement installed as its slot drained, and left in a slot with no
 * entry, at the next trim (wheel.c, strays: a trim period, 1 s). */
static void idle_cursor_frees_a_burst(void **state)
{
    (void)state;
    enum { N = 20000 };
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = 1;
    tw__seg_keep_min_override = 1;
    tw_service *s = t_service_cfg(&cfg);
    tw__seg_keep_min_override = 0;
    /* One deadline for all, so one slot holds them however long the
     * arming takes: at its drain no entry is left to keep memory for.
     * Where the arming outlasts the deadline (TSan beside CPU hogs), the
     * rest go to the next ticks' slots, tens a slot: that is where
     * placements racing the drains left segments in empty slots. */
    uint64_t at = tw_now(s) + 50 * T_MS;
    for (int i = 0; i < N; i++) {
        tw_timer h;
        ASSERT_RC(tw_schedule_at(s, at, t_noop, NULL, &h), TW_OK);
    }
    uint64_t burst = held(s);
    tw_stats st;
    for (int i = 0; i < 2000; i++) {
        tw_stats_get(s, &st);
        if (st.fired == N)
            break;
        t_sleep_ns(T_MS);
    }
    assert_int_equal(st.fired, N);
    int waited = 0;
    while (held(s) != 0 && waited < 10000) { /* strays wait for the trim (1 s) */
        t_sleep_ns(T_MS);
        waited++;
    }
    printf("idle cursor: %" PRIu64 " bytes of overflow segments, %" PRIu64
           " about %d ms after the last run\n", burst, held(s), waited);
    if (held(s) != 0) {
        print_kept_segments(s); /* where, for the next one to look at this */
        fail_msg("%" PRIu64 " bytes kept 10 s after the burst ran", held(s));
    }
    tw_destroy(s);
}

/* Bytes malloc has handed out and not had back (glibc's count, its own
 * mapped blocks included). */
static uint64_t malloc_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
#else
    return 0;
#endif
}

/* Segments of a page and more are mapped, not malloc'd (segments.c), so
 * that their memory goes back to the system when they are freed: glibc
 * kept 4.1 MB of the 4-32 KiB ones after a 3M-timer burst when they came
 * from malloc. A burst of 20,000 timers in one slot holds segments of 64
 * to 16384 entries (256 KiB); malloc gives only the overflow table and the
 * segments under a page (3.5 KiB of them; with the 4-32 KiB ones from
 * malloc it gave 64 KiB). Under a sanitizer every segment under 64 KiB
 * stays malloc'd (redzones, reports of a use after free), and valgrind's
 * malloc keeps its own counts: skipped there. */
static void page_sized_segments_are_mapped(void **state)
{
    (void)state;
#if !defined(__GLIBC__) || __GLIBC__ < 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ < 33)
    skip();
#endif
    if (t_foreign_malloc())
        skip();
    enum { N = 20000 };
    tw_service *s = strict_service(256);
    arm_burst(s, 1, 5 * T_MS); /* the slot's fixed array (malloc'd) */
    uint64_t before = malloc_in_use();
    arm_burst(s, N - 1, 5 * T_MS);
    uint64_t grew = malloc_in_use() - before, burst = held(s);
    printf("a burst's segments: %" PRIu64 " bytes, of which malloc gave %" PRIu64 "\n",
           burst, grew);
    if (burst < 200 * 1024)
        fail_msg("a burst of %d holds only %" PRIu64 " bytes of segments", N, burst);
    if (grew > 16 * 1024)
        fail_msg("malloc gave %" PRIu64 " bytes for a burst's %" PRIu64 " bytes of segments: "
                 "the page-sized ones are not mapped", grew, burst);
    ADVANCE(s, 6 * T_MS);
    ADVANCE(s, 7 * T_MS);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, N);
    tw_destroy(s);
}

/* ---- the cache of freed segments ---------------------------------------------- */

static uint64_t cached(tw_service *s)
{
    return tw__seg_cached_bytes(s);
}

/* A burst's segments, once past their grace period, wait in the cache
 * (within its 1 MiB minimum), and the next burst of the same shape takes
 * every one of them back: the cache and the segments in use together hold
 * exactly what the first burst made, so nothing new was allocated. 8000
 * timers need segments of 64 .. 4096 entries, all under the 64 KiB of the
 * mapped ones (those go back to the system). */
static void freed_segments_are_taken_again_from_the_cache(void **state)
{
    (void)state;
    enum { N = 8000 };
    tw_service *s = strict_service(256);
    arm_burst(s, N, 5 * T_MS);
    uint64_t burst = held(s);
    assert_int_equal(cached(s), 0);
    ADVANCE(s, 6 * T_MS);
    ADVANCE(s, 7 * T_MS);
    assert_int_equal(held(s), 0);
    if (cached(s) != burst)
        fail_msg("%" PRIu64 " bytes cached after a burst of %" PRIu64 " was freed", cached(s),
                 burst);
    arm_burst(s, N, 5 * T_MS);
    printf("cache: a burst of %" PRIu64 " bytes freed into it; the same burst again holds %"
           PRIu64 ", %" PRIu64 " left in the cache\n", burst, held(s), cached(s));
    if (held(s) != burst || cached(s) != 0)
        fail_msg("the second burst made new segments: %" PRIu64 " held, %" PRIu64 " cached",
                 held(s), cached(s));
    ADVANCE(s, 13 * T_MS);
    ADVANCE(s, 14 * T_MS);
    tw_stats st;
    t_stats(s, &st);
    assert_int_equal(st.fired, 2 * N);
    tw_destroy(s);
}

/* The cache holds at most its minimum or the overflow bytes in use, the
 * larger: many slots' bursts fill it as far as the segments in use
 * allow, and once the wheel has drained them all it gives back what is
 * past twice its minimum (lowered here to 64 KiB). */
static void cache_is_bounded_by_what_is_in_use(void **state)
{
    (void)state;
    enum { SLOTS = 256, B = 2000 };
    const uint64_t min = 64 * 1024;
    tw__seg_cache_min_override = min;
    tw_service *s = strict_service(SLOTS);
    tw__seg_cache_min_override = 0;
    for (int i = 0; i < SLOTS / 2; i++)
        arm_burst(s, B, (uint64_t)(2 + i) * T_MS);
    uint64_t in_use = held(s), most = 0;
    for (int r = 0; r < SLOTS; r++) {
        ASSERT_RC(tw_advance(s, tw_now(s) + T_MS), TW_OK);
        uint64_t c = cached(s);
        most = c > most ? c : most;
        /* The allowance is read at each step's start, so within a step
         * the cache may hold more than what is in use by then; never more
         * than the bursts' memory. */
        if (c > in_use)
            fail_msg("%" PRIu64 " bytes cached, more than the %" PRIu64 " ever in use", c,
                     in_use);
    }
    uint64_t end = cached(s);
    printf("cache: %" PRIu64 " bytes of bursts in use, at most %" PRIu64 " cached, %" PRIu64
           " at the end (minimum %" PRIu64 ")\n", in_use, most, end, min);
    if (most <= 2 * min)
        fail_msg("the cache never went past twice its minimum (%" PRIu64 "): nothing to give "
                 "back", most);
    if (end > 2 * min)
        fail_msg("%" PRIu64 " bytes still cached once nothing was in use (minimum %" PRIu64 ")",
                 end, min);
    assert_int_equal(held(s), 0);
    assert_int_equal(s->wheel.segs.waiting_bytes, 0);
    tw_destroy(s);
}

/* A segment a producer made and could not install (another producer's
 * install won the race) is neither freed nor cached at once: it may have
 * come from the cache, where a popper that lost it may still read its
 * link. It is retired and reaches the cache after the grace steps, and a
 * reader inside holds it back like any detached segment. */
static void uninstalled_segment_waits_a_grace_period(void **state)
{
    (void)state;
    tw_service *s = strict_service(64);
    tw_seg_guard g = TW_SEG_GUARD(s);
    tw__seg_enter(&g);
    void *seg = tw__seg_alloc(&g, 4096, true);
    assert_non_null(seg);
    assert_int_equal(held(s), 4096);
    tw__seg_unused(&g, seg, 4096);
    ADVANCE(s, 1 * T_MS);
    ADVANCE(s, 2 * T_MS);
    ADVANCE(s, 3 * T_MS);
    if (held(s) != 4096 || cached(s) != 0)
        fail_msg("recycled with a reader inside: %" PRIu64 " held, %" PRIu64 " cached",
                 held(s), cached(s));
    assert_int_equal(s->wheel.segs.waiting_bytes, 4096);
    tw__seg_done(&g);
    ADVANCE(s, 4 * T_MS);
    ADVANCE(s, 5 * T_MS);
    assert_int_equal(held(s), 0);
    assert_int_equal(cached(s), 4096);
    assert_int_equal(s->wheel.segs.waiting_bytes, 0);
    /* And it is what the next producer needing that size gets, zeroed. */
    tw__seg_enter(&g);
    _Atomic uint64_t *again = tw__seg_alloc(&g, 4096, true);
    tw__seg_done(&g);
    assert_ptr_equal(again, seg);
    for (int i = 0; i < 4096 / 8; i++)
        assert_int_equal(atomic_load(&again[i]), 0);
    assert_int_equal(cached(s), 0);
    tw__seg_free(s, again, 4096, true);
    assert_int_equal(held(s), 0);
    tw_destroy(s);
}

/* Out of address space (RLIMIT_AS, in a child): tw_schedule answers
 * TW_ENOMEM for a timer that needs a new segment, at once, and the
 * service stays consistent. Sanitizers reserve terabytes of
 * address space, and valgrind's own memory falls under the child's limit,
 * so there it is skipped. */
#ifndef TW_SAN_ANY
static int enomem_child(void)
{
    tw_service *s = t_service(T_MS, 64, 1);
    tw_timer h;
    if (tw_schedule(s, 5 * T_MS, t_noop, NULL, &h) != TW_OK)
        return 10; /* makes the slot's fixed array */
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu", &pages) != 1)
        return 11;
    fclose(f);
    rlim_t now = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
    struct rlimit lim = {now + 64 * 1024, now + 64 * 1024};
    if (setrlimit(RLIMIT_AS, &lim) != 0)
        return 12;
    if (mmap(NULL, 256 * 1024, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
             0) != MAP_FAILED)
        return 13; /* the limit does not hold */
    /* The slot's segments double (64, 128, ... entries); the one of 32768
     * entries (256 KiB) cannot be mapped, if none before it failed. */
    uint64_t armed = 1;
    int rc;
    while ((rc = tw_schedule(s, 5 * T_MS, t_noop, NULL, &h)) == TW_OK) {
        if (++armed > 40000)
            return 14; /* never refused */
    }
    if (rc != TW_ENOMEM)
        return 16;
    tw_stats st;
    tw_stats_get(s, &st);
    if (st.scheduled != armed || st.pending != armed)
        return 15;
    return 0;
}
#endif

static void out_of_memory_is_enomem_not_a_hang(void **state)
{
    (void)state;
#ifdef TW_SAN_ANY
    skip();
#else
    if (t_under_valgrind())
        skip();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(10); /* a retry loop would hang: die instead */
        _exit(enomem_child());
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status))
        fail_msg("child killed by signal %d (hung or crashed)", WTERMSIG(status));
    if (WEXITSTATUS(status) != 0)
        fail_msg("child failed at step %d", WEXITSTATUS(status));
#endif
}

/* MANUAL clock, an event loop driven by tw_next_due: once a burst has
 * fired, nothing is pending and the loop is told UINT64_MAX, so it may
 * never call tw_advance again. The segments the burst's drain detached
 * must be freed by the advance that ran it, not wait for a later one (a
 * review: 8 MiB of a million-timer burst stayed). */
static void a_manual_burst_frees_its_segments_in_its_advance(void **state)
{
    (void)state;
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.workers = 0;
    tw_service *s = t_service_cfg(&cfg);
    enum { BURST = 200000 };
    for (int i = 0; i < BURST; i++)
        ASSERT_RC(tw_schedule(s, 5 * T_MS, t_noop, NULL, NULL), TW_OK);
    assert_true(tw__seg_held_bytes(s) > 4 * TW_SEG_KEEP_MIN); /* in overflow segments */
    uint64_t due = tw_next_due(s);
    ASSERT_RC(tw_advance(s, due), TW_OK);
    assert_int_equal(t_fired(s), BURST);
    assert_int_equal(tw_next_due(s), UINT64_MAX); /* the loop would sleep for good */
    assert_int_equal(s->wheel.segs.waiting_bytes, 0);
    if (tw__seg_held_bytes(s) > TW_SEG_KEEP_MIN)
        fail_msg("%" PRIu64 " bytes of segments held with nothing pending",
                 (uint64_t)tw__seg_held_bytes(s));
    tw_destroy(s);
}

int main(void)
{
    /* One lane: a burst then lands in one slot. A producer picks its lane
     * by the CPU it runs on (wheel.c), so a test thread that migrated
     * mid-burst under ctest -j2 split a burst over two slots, and the
     * cache test saw a second set of segments (once: 16,064 bytes more). */
    tw__lanes_override = 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(overflow_segments_hold_every_timer),
        cmocka_unit_test(burst_segments_are_given_back_after_the_drain),
        cmocka_unit_test(within_the_budget_a_slot_keeps_its_segments),
        cmocka_unit_test(wheel_turned_by_bursts_holds_about_one_burst),
        cmocka_unit_test(reader_inside_delays_the_free),
        cmocka_unit_test(stalled_reader_bounds_what_waits),
        cmocka_unit_test(empty_slot_gives_back_its_segments_at_the_trim),
        cmocka_unit_test(idle_cursor_frees_a_burst),
        cmocka_unit_test(arming_leaves_the_trim_nothing_to_come_back_for),
        cmocka_unit_test(compaction_that_keeps_segments_marks_the_slot),
        cmocka_unit_test(page_sized_segments_are_mapped),
        cmocka_unit_test(freed_segments_are_taken_again_from_the_cache),
        cmocka_unit_test(cache_is_bounded_by_what_is_in_use),
        cmocka_unit_test(uninstalled_segment_waits_a_grace_period),
        cmocka_unit_test(out_of_memory_is_enomem_not_a_hang),
        cmocka_unit_test(a_manual_burst_frees_its_segments_in_its_advance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
