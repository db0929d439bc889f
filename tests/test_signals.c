/* test_signals.c: the library's threads block asynchronous signals
 * (issue 13): a process-directed signal never runs the application's
 * handler on tw-cursor or tw-worker. MONOTONIC (the threads exist only
 * there). */
#include "tw_test.h"

#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

static tw_service *threaded(uint32_t workers)
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = workers;
    return t_service_cfg(&cfg);
}

/* The SigBlk mask of thread tid (/proc/self/task/<tid>/status). */
static unsigned long long sigblk(const char *tid)
{
    char path[320], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%s/status", tid);
    FILE *f = fopen(path, "r");
    unsigned long long mask = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "SigBlk: %llx", &mask) == 1)
            break;
    if (f)
        fclose(f);
    return mask;
}

static void thread_name(const char *tid, char *out, size_t len)
{
    char path[320];
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", tid);
    FILE *f = fopen(path, "r");
    out[0] = '\0';
    if (f && fgets(out, (int)len, f))
        out[strcspn(out, "\n")] = '\0';
    if (f)
        fclose(f);
}

static int bit(int sig)
{
    return sig - 1;
}

/* What a tw-* thread blocks, and what it leaves to the faults. */
static const int blocked[] = {SIGINT, SIGTERM, SIGCHLD, SIGUSR1, SIGUSR2, SIGHUP,
                              SIGPIPE, SIGALRM, SIGQUIT, SIGWINCH};
static const int open_[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};

static bool mask_as_expected(unsigned long long m)
{
    for (size_t i = 0; i < sizeof blocked / sizeof blocked[0]; i++)
        if (!(m >> bit(blocked[i]) & 1))
            return false;
    if (!(m >> bit(SIGRTMIN) & 1))
        return false;
    for (size_t i = 0; i < sizeof open_ / sizeof open_[0]; i++)
        if (m >> bit(open_[i]) & 1)
            return false;
    return true;
}

/* Thread tid's mask once it has left glibc's start-up, which runs with
 * every signal blocked (SIGSEGV too) until it sets the mask the thread was
 * created with; on a loaded machine a new thread may wait long for the CPU
 * to get there. Read until the mask is the expected one, for up to 5 s:
 * a thread whose mask never gets there is judged on its last reading. */
static unsigned long long settled_sigblk(const char *tid)
{
    unsigned long long m = sigblk(tid);
    for (int i = 0; i < 5000 && !mask_as_expected(m); i++) {
        t_sleep_ns(T_MS);
        m = sigblk(tid);
    }
    return m;
}

/* Every tw-* thread blocks SIGINT, SIGTERM, SIGCHLD, SIGUSR1, SIGUSR2,
 * SIGHUP, SIGPIPE, SIGALRM, SIGQUIT and the real-time signals, and leaves
 * SIGSEGV, SIGBUS, SIGFPE and SIGILL to their faults. */
static void library_threads_block_async_signals(void **state)
{
    (void)state;
    tw_service *s = threaded(3);
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int seen = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char name[64];
        thread_name(e->d_name, name, sizeof name);
        if (strncmp(name, "tw-", 3) != 0)
            continue;
        seen++;
        unsigned long long m = settled_sigblk(e->d_name);
        for (size_t i = 0; i < sizeof blocked / sizeof blocked[0]; i++)
            if (!(m >> bit(blocked[i]) & 1))
                fail_msg("%s does not block signal %d (SigBlk %llx)", name, blocked[i], m);
        if (!(m >> bit(SIGRTMIN) & 1))
            fail_msg("%s does not block SIGRTMIN", name);
        for (size_t i = 0; i < sizeof open_ / sizeof open_[0]; i++)
            if (m >> bit(open_[i]) & 1)
                fail_msg("%s blocks synchronous signal %d (SigBlk %llx)", name, open_[i], m);
    }
    closedir(d);
    assert_int_equal(seen, 4); /* the cursor and three workers */
    tw_destroy(s);
}

/* The creating thread's own mask is left as it was. */
static void creator_mask_unchanged(void **state)
{
    (void)state;
    sigset_t before, after;
    pthread_sigmask(SIG_SETMASK, NULL, &before);
    tw_service *s = threaded(2);
    pthread_sigmask(SIG_SETMASK, NULL, &after);
    for (int sig = 1; sig < 32; sig++)
        assert_int_equal(sigismember(&before, sig), sigismember(&after, sig));
    tw_destroy(s);
}

/* A process-directed SIGUSR1, while the only thread of ours that could
 * take it has it blocked: it stays pending until that thread unblocks it,
 * and its handler then runs there, never on a library thread. */
static _Atomic pid_t handled_on;
static void on_usr1(int sig)
{
    (void)sig;
    atomic_store(&handled_on, (pid_t)syscall(SYS_gettid));
}

static void process_signal_never_lands_on_a_library_thread(void **state)
{
    (void)state;
    struct sigaction sa = {.sa_handler = on_usr1}, old;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    sigset_t usr1, saved;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &usr1, &saved); /* the library starts from this mask */
    tw_service *s = threaded(2);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    atomic_store(&handled_on, 0);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(kill(getpid(), SIGUSR1), 0);
        t_sleep_ns(2 * T_MS);
        assert_int_equal(atomic_load(&handled_on), 0); /* nobody took it */
    }
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL); /* the pending one runs here */
    assert_int_equal(atomic_load(&handled_on), (pid_t)syscall(SYS_gettid));
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    sigaction(SIGUSR1, &old, NULL);
    tw_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(library_threads_block_async_signals),
        cmocka_unit_test(creator_mask_unchanged),
        cmocka_unit_test(process_signal_never_lands_on_a_library_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
