/* test_arena.c: the overflow segments' arena (src/arena.c): zeroed, aligned,
 * disjoint pieces across chunk growth; undo gives back only the last piece. */
#include "tw_test.h"

#include <stdlib.h>
#include <string.h>

static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i])
            return false;
    }
    return true;
}

/* 40 MiB in pieces of 512 B .. 32 KiB (the small segment sizes): every
 * piece zero and 64-byte aligned when handed out, and none overlaps
 * another (each is filled with its number, all checked at the end). */
static void pieces_are_zeroed_aligned_and_disjoint_across_chunks(void **state)
{
    (void)state;
    enum { N = 2600 };
    static unsigned char *piece[N];
    static size_t len[N];
    tw_arena a;
    tw__arena_init(&a);
    for (int i = 0; i < N; i++) {
        len[i] = (size_t)512 << (i % 7);
        piece[i] = tw__arena_alloc(&a, len[i]);
        assert_non_null(piece[i]);
        assert_int_equal((uintptr_t)piece[i] % 64, 0);
        if (!all_zero(piece[i], len[i]))
            fail_msg("piece %d (%zu bytes) not zero when handed out", i, len[i]);
        memset(piece[i], i % 251 + 1, len[i]);
    }
    for (int i = 0; i < N; i++) {
        for (size_t k = 0; k < len[i]; k += 64) {
            if (piece[i][k] != i % 251 + 1)
                fail_msg("piece %d overwritten at byte %zu", i, k);
        }
    }
    tw__arena_fini(&a);
}

static void undo_gives_back_only_the_last_piece(void **state)
{
    (void)state;
    tw_arena a;
    tw__arena_init(&a);
    void *p = tw__arena_alloc(&a, 4096);
    void *q = tw__arena_alloc(&a, 4096);
    assert_non_null(p);
    assert_non_null(q);
    tw__arena_undo(&a, p, 4096); /* not the last: stays unused */
    void *r = tw__arena_alloc(&a, 4096);
    assert_ptr_not_equal(r, p);
    assert_ptr_not_equal(r, q);
    tw__arena_undo(&a, r, 4096); /* the last: handed out again, still zero */
    void *r2 = tw__arena_alloc(&a, 4096);
    assert_ptr_equal(r2, r);
    assert_true(all_zero(r2, 4096));
    tw__arena_fini(&a);
}

/* A piece larger than the chunk size the arena is at gets a chunk of its
 * own size; the arena goes on handing out pieces after it. */
static void piece_larger_than_a_chunk(void **state)
{
    (void)state;
    tw_arena a;
    tw__arena_init(&a);
    size_t big = 5u * 1024u * 1024u;
    unsigned char *p = tw__arena_alloc(&a, big);
    assert_non_null(p);
    assert_true(all_zero(p, big));
    memset(p, 0xab, big);
    unsigned char *q = tw__arena_alloc(&a, 1024);
    assert_non_null(q);
    assert_true(all_zero(q, 1024));
    assert_true(q + 1024 <= p || q >= p + big);
    tw__arena_fini(&a);
}

/* Through the wheel: with a slot capacity of 1, thousands of timers in a
 * few slots live in arena segments; every one fires once, never early, in
 * deadline order. */
static const t_timer *by_deadline_v;

static int by_deadline(const void *a, const void *b)
{
    uint64_t x = by_deadline_v[*(const int *)a].deadline;
    uint64_t y = by_deadline_v[*(const int *)b].deadline;
    return (x > y) - (x < y);
}

static void overflow_segments_from_the_arena_hold_every_timer(void **state)
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pieces_are_zeroed_aligned_and_disjoint_across_chunks),
        cmocka_unit_test(undo_gives_back_only_the_last_piece),
        cmocka_unit_test(piece_larger_than_a_chunk),
        cmocka_unit_test(overflow_segments_from_the_arena_hold_every_timer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
