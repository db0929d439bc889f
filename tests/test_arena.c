/* test_arena.c: the overflow segments' arena (src/arena.c): zeroed, aligned,
 * disjoint pieces across chunk growth; undo gives back only the last piece. */
#include "tw_test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define T_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define T_SANITIZED 1
#endif
#endif

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

/* Out of address space (RLIMIT_AS, in a child): the arena answers NULL
 * and tw_schedule TW_ENOMEM for a timer that needs a new segment, at
 * once, and the service stays consistent. Sanitizers reserve terabytes of
 * address space, and valgrind's own memory falls under the child's limit,
 * so there it is skipped. */
#ifndef T_SANITIZED
static int enomem_child(void)
{
    tw_service *s = t_service(T_MS, 64, 1);
    tw_timer h;
    if (tw_schedule(s, 5 * T_MS, t_noop, NULL, &h) != TW_OK)
        return 10; /* makes the slot's fixed array: the arena's first chunk */
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu", &pages) != 1)
        return 11;
    fclose(f);
    rlim_t now = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
    struct rlimit lim = {now + 64 * 1024, now + 64 * 1024};
    if (setrlimit(RLIMIT_AS, &lim) != 0)
        return 12;
    tw_arena a;
    tw__arena_init(&a);
    if (tw__arena_alloc(&a, 4096) != NULL)
        return 13; /* a 256 KiB chunk cannot be mapped */
    /* The slot's segments fill what is left of the first chunk (256 KiB,
     * fewer than 32768 entries); the segment after that needs a new chunk. */
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
#ifdef T_SANITIZED
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pieces_are_zeroed_aligned_and_disjoint_across_chunks),
        cmocka_unit_test(undo_gives_back_only_the_last_piece),
        cmocka_unit_test(piece_larger_than_a_chunk),
        cmocka_unit_test(overflow_segments_from_the_arena_hold_every_timer),
        cmocka_unit_test(out_of_memory_is_enomem_not_a_hang),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
