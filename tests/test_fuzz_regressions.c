/* test_fuzz_regressions.c: replay every file of fuzz/regressions/ and
 * fuzz/corpus/ through the fuzzer's decoder (fuzz/fuzz_decode.c), whose
 * oracle aborts on a violation. TW_FUZZ_DIRS: colon-separated directories,
 * set by tests/CMakeLists.txt. */
#include "tw_test.h"

#include <dirent.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>

#include "fuzz_decode.h"

#ifndef TW_FUZZ_DIRS
#error "TW_FUZZ_DIRS must name the directories to replay"
#endif

static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        fail_msg("cannot open %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue; /* ., .., .gitkeep */
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (f == NULL)
            continue; /* a directory or unreadable: skip */
        static uint8_t buf[1 << 20];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        print_message("replay %s (%zu bytes)\n", path, len);
        fflush(stdout);
        tw_fuzz_run(buf, len);
        n++;
    }
    closedir(d);
    return n;
}

static void replay_all(void **state)
{
    (void)state;
    char dirs[] = TW_FUZZ_DIRS;
    int total = 0;
    for (char *save = NULL, *dir = strtok_r(dirs, ":", &save); dir != NULL;
         dir = strtok_r(NULL, ":", &save))
        total += replay_dir(dir);
    assert_true(total > 0);
}

static void empty_and_tiny_inputs(void **state)
{
    (void)state;
    uint8_t b[4] = {0, 0, 0, 0};
    tw_fuzz_run(NULL, 0);
    for (unsigned i = 0; i < 256; i++) {
        b[0] = (uint8_t)i;
        tw_fuzz_run(b, 1);
        b[1] = (uint8_t)(i * 7);
        b[2] = (uint8_t)(i * 13);
        tw_fuzz_run(b, sizeof b);
    }
}

/* A program that links us has signals: libFuzzer's own SIGALRM watchdog
 * once failed the oracle's zero-timeout poll of the wake descriptor with
 * EINTR (fuzz/regressions/wake_poll_interrupted_by_a_signal). Replay that
 * input under a SIGALRM every 20 us, with a handler installed without
 * SA_RESTART, as libFuzzer's is: the oracle must tell an interrupted poll
 * from a failed one. */
static void ignore_alarm(int sig)
{
    (void)sig;
}

static void replay_under_a_storm_of_signals(void **state)
{
    (void)state;
    char path[] = TW_FUZZ_REGRESSIONS "/wake_poll_interrupted_by_a_signal";
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    uint8_t buf[4096];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(len > 0);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ignore_alarm; /* sa_flags 0: no SA_RESTART */
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
    struct itimerval every = {{0, 20}, {0, 20}}, off = {{0, 0}, {0, 0}};
    assert_int_equal(setitimer(ITIMER_REAL, &every, NULL), 0);
    /* two seconds at most: unbound, valgrind's pass (test-proof.sh) would take
     * minutes; without the fix the first replays already fail */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int runs = 0;
    do {
        tw_fuzz_run(buf, len);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (++runs < 3000 && t.tv_sec - t0.tv_sec < 2);
    assert_int_equal(setitimer(ITIMER_REAL, &off, NULL), 0);
    /* SIG_IGN, not the default back: a last alarm may still be pending
     * (valgrind delivers late), and the default action ends the process */
    assert_true(signal(SIGALRM, SIG_IGN) != SIG_ERR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_and_tiny_inputs),
        cmocka_unit_test(replay_all),
        cmocka_unit_test(replay_under_a_storm_of_signals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
