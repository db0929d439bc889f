/*
 * threads.c: the library's own threads, and the waits of callers on
 * callbacks.
 *
 * Starting a thread (tw__thread_start). The cursor and the workers are
 * started with every asynchronous signal blocked (SIGINT, SIGTERM,
 * SIGCHLD, SIGUSR1, ...): the kernel hands a process-directed signal to
 * any thread that does not block it, and an application's handler must not
 * run on tw-cursor or tw-worker, where it could interrupt a callback or
 * take a lock the application's own threads hold. The mask is set in the
 * creating thread around pthread_create, so the new thread starts with it
 * (no window before it could block them itself), and restored at once.
 * Synchronous signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS)
 * stay unblocked: they are raised by the thread's own fault and belong to
 * it; blocked, a fault would kill the process without its handler.
 *
 * A started thread's hints to the kernel (tw__thread_hint_latency, first
 * thing in the cursor and in each worker). Their wake-ups are what
 * lateness is made of, so they ask for no timer slack (50 us by default),
 * and for a time slice of TW_THREAD_SLICE_NS (100 us, the least Linux
 * takes) where the thread runs under SCHED_OTHER: since Linux 6.12 the
 * fair scheduler (EEVDF) gives a task a deadline of its slice past its
 * virtual runtime and runs the earliest, so a short slice is run soon
 * after it wakes, ahead of threads that run for long, as the cursor and
 * a worker with a due timer should. Its share of the CPU stays the same.
 * Why: on 2 cores beside 4 producer threads (WL3), the cursor woke on
 * time, was left off a CPU for 3 to 10 ms, and every timer due meanwhile
 * was that late (a trace of the cursor's loop, 2026-11-29). The policy,
 * nice value and reset-on-fork flag the thread inherited from the caller
 * of tw_create are kept; a thread under another policy (real time,
 * SCHED_BATCH, SCHED_IDLE) is left as it is: its creator chose. An older
 * kernel takes the request and ignores the slice; one that refuses it
 * (a sandbox) costs nothing but the hint.
 *
 * Waits that form a cycle. tw_cancel_sync waits for a callback of a timer,
 * tw_stop for every callback of its service (and for a tw_advance in
 * progress), tw_advance for another tw_advance of the same service. Each
 * may be called from a callback of another service or the same one, so
 * waits can form a cycle through other callbacks (A's callback waits for
 * B's while B's waits for A's): every thread in it would sleep for good.
 * Only threads that wait can close a cycle, and only while they hold
 * something others may wait for: a callback they run, or a service whose
 * tw_advance or tw_stop they are inside. So a thread about to wait while it
 * holds something publishes, in a process-wide registry of waiters (one
 * record per thread, made on its first such wait, reused after it exits),
 * what it holds and what it waits for (seq_cst), and then follows the
 * waits from its target: to every published waiter that holds the target,
 * to what that one waits for, and so on. If the search comes back to the
 * caller, the call answers TW_EDEADLK and does nothing. Of the threads of
 * a cycle, the last to publish sees every other's entry (each publishes
 * before it searches): at least one of them is refused, and its callback
 * returns, which ends the others' waits. A thread that holds nothing (not
 * in a callback, tw_advance or tw_stop) cannot be waited for and does not
 * publish: waits from ordinary threads cost nothing here.
 *
 * The search reads a moving registry; a cycle it finds is looked for once
 * more before the refusal, so a wait that ended meanwhile does not make a
 * spurious TW_EDEADLK. Holdings nest (a callback that calls tw_stop of
 * another service, whose on_pending calls tw_cancel_sync): the thread
 * knows every one (a list on its stack: internal.h, tw_hold), and
 * publishes the callback and up to TW_HOLDS_SHOWN services. A thread
 * nested deeper than that is refused its waits (TW_EDEADLK): a cycle
 * through a hold it could not show would go unseen, and sleep for good.
 *
 * Asymmetric fences. Pairings between a frequent side and a rare caller
 * have the store-buffering shape, where each side stores, then loads what
 * the other stored, and both need a store-load fence: the end of a run
 * against a tw_cancel_sync or tw_stop that waits for it (workers.c), the
 * start of a run against tw_pause (pause.c), a magazine's use against the
 * trimmer (records.c), and since 2026-11-29 two of every arming: its
 * PENDING against tw_stop's announcement (service.c, schedule_deadline;
 * a seq_cst exchange before), and a logged arming's tail against the
 * cursor's plan before it sleeps (defer.c, cursor.c; a seq_cst fence
 * before). A fence on the frequent side is a locked instruction (or an
 * mfence) per callback or arming, for a call made rarely or a sleep of
 * the cursor, so that side has only a compiler barrier (tw__fence_light)
 * and the rare side makes every running thread of the process execute a
 * full barrier, membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)
 * (tw__fence_heavy), which orders each thread's store before its load as
 * the rare side sees them. Where the kernel lacks it or a sandbox refuses
 * it, both sides fence for real. This is what liburcu's membarrier flavour
 * (urcu-memb) does for RCU readers; we use it for a few flags rather than
 * through a read-side section, which would cost each callback two calls
 * into liburcu with its thread-local reader, and a grace period that
 * waits for every reader in the process, the application's own included.
 * ThreadSanitizer sees the flags as atomics; what it cannot judge is the
 * fences: tests/test_pause.c fails without the gate, and a lost wake-up of
 * a tw_cancel_sync waiter would cost it its wait's 10 ms time-out, not the
 * wait's end (workers.c).
 */
#include "internal.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- asymmetric fences ------------------------------------------------------ */

/* Decided once per process, before the first service runs a callback
 * (tw_create), so every runner reads a settled value. */
bool tw__fence_real;
bool tw__fence_force_real; /* tests only (internal.h) */
static pthread_once_t fence_once = PTHREAD_ONCE_INIT;

static long membarrier_cmds; /* what the query offered; set with tw__fence_real */

static void membarrier_register(void)
{
    long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0);
    membarrier_cmds = cmds < 0 ? 0 : cmds;
    tw__fence_real =
        tw__fence_force_real || cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
        syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) != 0;
}

void tw__fence_setup(void)
{
    pthread_once(&fence_once, membarrier_register);
}

/* Where membarrier was registered, the light sides have only a compiler
 * barrier, so a failed membarrier must not be answered by a local fence:
 * that orders this thread alone, and an owner's take or a callback's flag
 * would go unordered (a unit counted twice, a wake-up lost) with nothing
 * said. The man page documents no failure of the command for a process
 * that queried and registered it (EINVAL, ENOSYS and EPERM are what those
 * two rule out); the kernel's code may still answer ENOMEM (a CPU mask it
 * could not allocate) or a seccomp filter installed later EPERM. So: the
 * expedited call, tried again on ENOMEM; then the global command where
 * the query offered it (every thread of the system through a grace
 * period: milliseconds, but as strong, and it needs no registration);
 * else stop with the reason, as liburcu's membarrier flavour does
 * (urcu_die). */
enum { FENCE_HEAVY_TRIES = 3 };

_Atomic bool tw__fence_refuse_expedited;  /* tests only (internal.h) */
_Atomic uint64_t tw__fence_global_calls; /* tests only (internal.h) */

bool tw__fence_global_offered(void)
{
    tw__fence_setup();
    return (membarrier_cmds & MEMBARRIER_CMD_GLOBAL) != 0;
}

static bool membarrier_expedited(void)
{
    /* Relaxed: a test's switch, set before the calls it is for. */
    if (atomic_load_explicit(&tw__fence_refuse_expedited, memory_order_relaxed)) {
        errno = EPERM;
        return false;
    }
    for (int i = 0; i < FENCE_HEAVY_TRIES; i++) {
        if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) == 0)
            return true;
        if (errno != ENOMEM)
            return false;
    }
    return false;
}

void tw__fence_heavy(void)
{
    if (tw__fence_real) {
        atomic_thread_fence(memory_order_seq_cst);
        return;
    }
    if (membarrier_expedited())
        return;
    int err = errno;
    if ((membarrier_cmds & MEMBARRIER_CMD_GLOBAL) &&
        syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0) == 0) {
        /* Relaxed: a count for tests. */
        atomic_fetch_add_explicit(&tw__fence_global_calls, 1, memory_order_relaxed);
        return;
    }
    fprintf(stderr, "timerwheel: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed "
                    "after registering: %s\n", strerror(err));
    abort();
}

/* ---- starting a thread ------------------------------------------------------ */

int tw__thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *name)
{
    sigset_t all, saved;
    sigfillset(&all);
    static const int synchronous[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof synchronous / sizeof synchronous[0]; i++)
        sigdelset(&all, synchronous[i]);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (rc != 0)
        return TW_EAGAIN;
    /* Named here, not by the thread, so the name is there when tw_create
     * returns (top -H, perf, gdb). Failure only costs the name. */
    (void)pthread_setname_np(*t, name);
    return TW_OK;
}

/* ---- a started thread's hints ---------------------------------------------- */

/* tw_sched_attr: internal.h. */

#define TW_SCHED_OTHER          0u
#define TW_SCHED_RESET_ON_FORK  1u /* SCHED_FLAG_RESET_ON_FORK */

static void ask_short_slice(void)
{
#if defined(SYS_sched_getattr) && defined(SYS_sched_setattr)
    tw_sched_attr a = {0};
    if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof a, 0u) != 0 ||
        a.policy != TW_SCHED_OTHER)
        return;
    a.size = sizeof a;
    a.flags &= TW_SCHED_RESET_ON_FORK; /* the only flag a SCHED_OTHER thread carries */
    a.runtime = TW_THREAD_SLICE_NS;
    (void)syscall(SYS_sched_setattr, 0, &a, 0u);
#endif
}

void tw__thread_hint_latency(void)
{
    /* Failure only costs the slack. */
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    ask_short_slice();
}

/* ---- the registry of waiters ------------------------------------------------ */

typedef struct tw_waiter {
    /* What the thread holds (valid while `kind` says it waits). */
    _Atomic(tw_service *) run_s;      /* the callback it runs: service ... */
    _Atomic tw_timer run_t;           /* ... and handle (0: none) */
    _Atomic(tw_service *) holds[TW_HOLDS_SHOWN]; /* services whose tw_advance
                                         or tw_stop it is inside (NULL: none) */
    _Atomic(tw_service *) outer_s[TW_HOLDS_SHOWN]; /* the callbacks it runs outside */
    _Atomic tw_timer outer_t[TW_HOLDS_SHOWN];    /* those (tw_hold) */
    /* What it waits for. */
    _Atomic int kind;                 /* TW_WAIT_*; NONE: not waiting */
    _Atomic(tw_service *) wait_s;
    _Atomic tw_timer wait_t;
    struct tw_waiter *next;           /* registry link, set before it is linked */
    _Atomic bool taken;               /* a thread owns it */
} tw_waiter;

static _Atomic(tw_waiter *) g_waiters;  /* push-only list; records never freed */
static pthread_key_t g_waiter_key;
static bool g_waiter_key_ok;
static pthread_once_t g_waiter_once = PTHREAD_ONCE_INIT;
static TW_TLS tw_waiter *t_waiter;

static void waiter_release(void *w)
{
    /* Release: the next owner starts from our last stores. */
    atomic_store_explicit(&((tw_waiter *)w)->taken, false, memory_order_release);
}

static void waiter_key_create(void)
{
    g_waiter_key_ok = pthread_key_create(&g_waiter_key, waiter_release) == 0;
}

/* This thread's record: a free one from the registry, else a new one. */
static tw_waiter *my_waiter(void)
{
    if (t_waiter)
        return t_waiter;
    pthread_once(&g_waiter_once, waiter_key_create);
    tw_waiter *w;
    /* Acquire: the records linked before, and their release at exit. */
    for (w = atomic_load_explicit(&g_waiters, memory_order_acquire); w; w = w->next) {
        bool free_one = false;
        /* Acq_rel: take it over from the thread that released it. */
        if (atomic_compare_exchange_strong_explicit(&w->taken, &free_one, true,
                                                    memory_order_acq_rel,
                                                    memory_order_relaxed))
            break;
    }
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w)
            return NULL;
        atomic_init(&w->taken, true);
        tw_waiter *head = atomic_load_explicit(&g_waiters, memory_order_relaxed);
        do {
            w->next = head;
            /* Release: the record's initial state before it is reachable. */
        } while (!atomic_compare_exchange_weak_explicit(&g_waiters, &head, w,
                                                        memory_order_release,
                                                        memory_order_relaxed));
    }
    if (g_waiter_key_ok)
        (void)pthread_setspecific(g_waiter_key, w);
    t_waiter = w;
    return w;
}

/* ---- what a waiter holds ---------------------------------------------------- */

static bool holds_anything(void)
{
    return tw__self.s || tw__self.holds;
}

/* Does w run callback t of s (any callback of s if t is 0), innermost or
 * outside one of its holds? */
static bool waiter_runs(tw_waiter *w, tw_service *s, tw_timer t)
{
    /* Acquire (all loads): pairs with the publisher's seq_cst stores. */
    if (atomic_load_explicit(&w->run_s, memory_order_acquire) == s &&
        (!t || atomic_load_explicit(&w->run_t, memory_order_acquire) == t))
        return true;
    for (int i = 0; i < TW_HOLDS_SHOWN; i++)
        if (atomic_load_explicit(&w->outer_s[i], memory_order_acquire) == s &&
            (!t || atomic_load_explicit(&w->outer_t[i], memory_order_acquire) == t))
            return true;
    return false;
}

/* Does w (a snapshot of its fields) hold what (kind, s, t) waits for? */
static bool waiter_holds(tw_waiter *w, int kind, tw_service *s, tw_timer t)
{
    if (kind == TW_WAIT_TIMER)
        return waiter_runs(w, s, t);
    if (kind == TW_WAIT_CALLBACKS && waiter_runs(w, s, 0))
        return true;
    for (int i = 0; i < TW_HOLDS_SHOWN; i++)
        /* Acquire: as above. */
        if (atomic_load_explicit(&w->holds[i], memory_order_acquire) == s)
            return true;
    return false;
}

/* ---- the search ------------------------------------------------------------- */

#define TW_SEARCH_MAX 256 /* waiters a search looks at, at most */

typedef struct search {
    tw_waiter *me;
    tw_waiter *seen[TW_SEARCH_MAX];
    int nseen;
} search;

static bool seen_before(search *x, tw_waiter *w)
{
    for (int i = 0; i < x->nseen; i++)
        if (x->seen[i] == w)
            return true;
    if (x->nseen < TW_SEARCH_MAX)
        x->seen[x->nseen++] = w;
    return false;
}

/* Is there a path of waits from (kind, s, t) back to x->me? */
static bool leads_back(search *x, int kind, tw_service *s, tw_timer t, int depth)
{
    if (depth > TW_SEARCH_MAX)
        return false;
    /* Acquire: every record linked so far. */
    for (tw_waiter *w = atomic_load_explicit(&g_waiters, memory_order_acquire); w;
         w = w->next) {
        /* Seq_cst: the searcher's half of the publish-then-search pairing. */
        int wk = atomic_load_explicit(&w->kind, memory_order_seq_cst);
        if (wk == TW_WAIT_NONE || !waiter_holds(w, kind, s, t))
            continue;
        if (w == x->me)
            return true;
        if (seen_before(x, w))
            continue;
        tw_service *ws = atomic_load_explicit(&w->wait_s, memory_order_acquire);
        tw_timer wt = atomic_load_explicit(&w->wait_t, memory_order_acquire);
        if (leads_back(x, wk, ws, wt, depth + 1))
            return true;
    }
    return false;
}

static bool cycle_from(tw_waiter *me, int kind, tw_service *s, tw_timer t)
{
    search x = {.me = me};
    return leads_back(&x, kind, s, t, 0);
}

/* ---- publishing a wait ------------------------------------------------------- */

static void publish(tw_waiter *w, int kind, tw_service *s, tw_timer t)
{
    /* Relaxed, these: published by the seq_cst store of kind below. */
    atomic_store_explicit(&w->run_s, tw__self.s, memory_order_relaxed);
    atomic_store_explicit(&w->run_t, tw__self.t, memory_order_relaxed);
    const tw_hold *h = tw__self.holds; /* all of them: tw__wait_begin checked */
    for (int i = 0; i < TW_HOLDS_SHOWN; i++, h = h ? h->prev : NULL) {
        atomic_store_explicit(&w->holds[i], h ? h->s : NULL, memory_order_relaxed);
        atomic_store_explicit(&w->outer_s[i], h ? h->outer_s : NULL, memory_order_relaxed);
        atomic_store_explicit(&w->outer_t[i], h ? h->outer_t : 0, memory_order_relaxed);
    }
    atomic_store_explicit(&w->wait_s, s, memory_order_relaxed);
    atomic_store_explicit(&w->wait_t, t, memory_order_relaxed);
    /* Seq_cst: the publisher's half of the pairing with the searches. */
    atomic_store_explicit(&w->kind, kind, memory_order_seq_cst);
}

int tw__wait_begin(tw_service *s, int kind, tw_timer t, tw_wait_saved *saved)
{
    saved->kind = TW_WAIT_NONE;
    if (!holds_anything())
        return TW_OK; /* nobody waits for this thread: no cycle through it */
    if (tw__self.depth > TW_HOLDS_SHOWN)
        return TW_EDEADLK; /* more holds than it can show (see top) */
    tw_waiter *w = my_waiter();
    if (!w)
        return TW_OK; /* no memory for a record: wait unchecked, as before */
    /* Relaxed: our own record's fields, written only by this thread. */
    saved->kind = atomic_load_explicit(&w->kind, memory_order_relaxed);
    saved->s = atomic_load_explicit(&w->wait_s, memory_order_relaxed);
    saved->t = atomic_load_explicit(&w->wait_t, memory_order_relaxed);
    publish(w, kind, s, t);
    if (cycle_from(w, kind, s, t) && cycle_from(w, kind, s, t)) {
        tw__wait_end(saved);
        return TW_EDEADLK;
    }
    return TW_OK;
}

void tw__wait_end(const tw_wait_saved *saved)
{
    if (!t_waiter)
        return;
    if (saved->kind != TW_WAIT_NONE)
        publish(t_waiter, saved->kind, saved->s, saved->t); /* the outer wait again */
    else /* Seq_cst: as in publish. */
        atomic_store_explicit(&t_waiter->kind, TW_WAIT_NONE, memory_order_seq_cst);
}

/* ---- holdings ------------------------------------------------------------------ */

bool tw__holds(const tw_service *s)
{
    for (const tw_hold *h = tw__self.holds; h; h = h->prev)
        if (h->s == s)
            return true;
    return false;
}

/* Callback t of s (any of s's, with `any`), innermost or held outside. */
static bool runs_callback(const tw_service *s, tw_timer t, bool any)
{
    if (tw__self.s == s && (any || tw__self.t == t))
        return true;
    for (const tw_hold *h = tw__self.holds; h; h = h->prev)
        if (h->outer_s == s && (any || h->outer_t == t))
            return true;
    return false;
}

bool tw__in_callback(const tw_service *s, tw_timer t)
{
    return runs_callback(s, t, false);
}

bool tw__in_callback_of(const tw_service *s)
{
    return runs_callback(s, 0, true);
}

void tw__hold(tw_service *s, tw_hold *h)
{
    h->s = s;
    h->outer_s = tw__self.s; /* runs on, nested */
    h->outer_t = tw__self.t;
    h->prev = tw__self.holds;
    tw__self.holds = h;
    tw__self.depth++;
}

void tw__unhold(tw_hold *h)
{
    /* Holds end innermost first: each in the call that took it. */
    tw__self.holds = h->prev;
    tw__self.depth--;
}
