/*
 * session_timeouts: a server's session timeouts on one timerwheel service.
 *
 *     session_timeouts [--sessions N] [--threads T] [--seconds S] [--idle-ms M]
 *                      [--ping-ms P] [--close-permille X] [--rate R] [--seed K]
 *
 * N sessions (default 100000) each own two timers on one MONOTONIC service
 * with the default configuration (1 ms tick, 2 workers):
 *
 *   idle  a one-shot, M ms (default 3000) after the last request. Every request
 *         pushes it back with tw_reschedule: the same timer moves, no new one
 *         is armed. When it fires, the session is closed by the timer.
 *   ping  a periodic timer, every P ms (default 1000), the first run spread at
 *         random over one period so that pings are not synchronised.
 *
 * T request threads (default 4) each own N/T sessions (only the owner touches,
 * closes or reopens a session; timer callbacks race with it). A thread makes
 * R requests per second (default 50000; 0 = as fast as it can) on random
 * sessions of an "active window": half of its sessions, a window that slides
 * once round them every 4 * M ms. A session that leaves the window gets no
 * more requests and idles out M ms later; one that enters it is touched, and
 * reopened if it was closed. So sessions keep idling out at a steady rate and
 * the population stays roughly steady (about 70% of N). X per mille of the
 * requests (default 1) close their session instead.
 *
 * Closing. A session's state (OPEN / CLOSED) changes OPEN -> CLOSED by one
 * compare-and-swap; whoever wins, the request thread or the idle callback, is
 * the one closer and does the accounting:
 *   - request thread: tw_cancel_sync(ping), so that when it returns no ping
 *     callback of that session runs any more; then tw_cancel(idle). If that
 *     returns TW_ENOENT the idle callback has already started: it will lose
 *     the CAS and only count itself as fired.
 *   - idle callback: tw_cancel(ping), not tw_cancel_sync. Cancelling another
 *     timer synchronously from a callback is allowed, but it would park this
 *     worker while the ping's run finishes on another one, delaying every other
 *     due timer; and nothing needs the wait: a ping callback only counts, in
 *     the session array that lives until the end. A ping run already started
 *     completes, none starts after tw_cancel returned TW_OK.
 * A closed session is reopened (new timers, new handles) by its owner when the
 * window comes round to it, but only once its idle callback, if one started,
 * has returned (idle_live == 0): so callbacks of an old incarnation never
 * meet a new one.
 *
 * Never early: every idle callback compares tw_now() with a lower bound of its
 * deadline (tw_now() read before the last successful arming or reschedule +
 * M ms, stored by the owner after the call returned TW_OK).
 *
 * At the end, the request threads are joined, tw_stop hands every timer that
 * never started to on_pending, and the program checks exactly-once accounting
 * for every timer and against tw_stats. Exit status: 0 accounting OK, 1
 * mismatch, early fire or library error, 2 bad command line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <timerwheel.h>

#define MS 1000000ull
#define SEC 1000000000ull

enum { S_CLOSED = 0, S_OPEN = 1 };

typedef struct session {
    _Atomic uint32_t state;     /* S_OPEN / S_CLOSED: OPEN -> CLOSED by CAS only */
    _Atomic uint32_t idle_live; /* 1 from arming until the idle timer is cancelled
                                   or its callback has returned */
    _Atomic uint64_t bound;     /* lower bound of the idle deadline (tw_now() ns) */
    _Atomic tw_timer idle;      /* handles: written by the owner only */
    _Atomic tw_timer ping;
} session;

typedef struct options {
    uint64_t sessions, threads, seconds, idle_ms, ping_ms, close_permille, rate, seed;
} options;

typedef struct counters {       /* all shared: relaxed atomic counts, read at the end */
    _Atomic uint64_t opened, closed_req, closed_idle;
    _Atomic int64_t live;
    _Atomic uint64_t idle_armed, idle_fired, idle_cancelled, idle_dropped, idle_lost;
    _Atomic uint64_t ping_armed, ping_fired, ping_cancelled, ping_dropped, ping_gone;
    _Atomic uint64_t touches, touches_late, early, worst_early_ns;
    _Atomic uint64_t unexpected, unknown_dropped;
} counters;

static tw_service *svc;         /* set before any timer is armed */
static session *sessions;
static options opt;
static uint64_t idle_ns, ping_ns;
static counters C;
static atomic_bool stopping;    /* main is about to stop / has stopped the service */

static void count(_Atomic uint64_t *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }
static uint64_t get(_Atomic uint64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }

static void unexpected(const char *what, int rc)
{
    if (atomic_fetch_add_explicit(&C.unexpected, 1, memory_order_relaxed) < 10)
        fprintf(stderr, "session_timeouts: %s: %s\n", what, tw_strerror(rc));
}

static uint64_t rng_next(uint64_t *x) /* xorshift64* */
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / SEC), .tv_nsec = (long)(ns % SEC) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* ---- timer callbacks --------------------------------------------------- */

static void on_ping(tw_timer t, void *arg)
{
    (void)t; (void)arg;         /* a real server would queue a ping frame here */
    count(&C.ping_fired);
}

static void on_idle(tw_timer t, void *arg)
{
    session *ss = arg;
    uint64_t now = tw_now(svc);
    /* Any value the owner stored is a lower bound of this timer's deadline. */
    uint64_t bound = atomic_load_explicit(&ss->bound, memory_order_acquire);
    (void)t;
    count(&C.idle_fired);
    if (now < bound) {
        count(&C.early);
        uint64_t e = bound - now, w = get(&C.worst_early_ns);
        while (e > w && !atomic_compare_exchange_weak_explicit(&C.worst_early_ns, &w, e,
                        memory_order_relaxed, memory_order_relaxed)) {}
    }
    uint32_t st = S_OPEN;
    /* Race with the owner's close: exactly one OPEN -> CLOSED wins. */
    if (atomic_compare_exchange_strong_explicit(&ss->state, &st, S_CLOSED,
                                                memory_order_acq_rel, memory_order_acquire)) {
        count(&C.closed_idle);
        atomic_fetch_sub_explicit(&C.live, 1, memory_order_relaxed);
        int rc = tw_cancel(svc, atomic_load_explicit(&ss->ping, memory_order_relaxed));
        if (rc == TW_OK)
            count(&C.ping_cancelled);
        else if (rc == TW_ENOENT && atomic_load(&stopping))
            count(&C.ping_gone); /* tw_stop got it first: on_pending counts it */
        else
            unexpected("tw_cancel(ping) from the idle callback", rc);
    } else {
        count(&C.idle_lost);    /* the owner closed it; its tw_cancel(idle) said ENOENT */
    }
    /* Last touch of the session: lets the owner reopen it (pairs with the
     * acquire load in request_one). */
    atomic_store_explicit(&ss->idle_live, 0, memory_order_release);
}

static void on_pending(tw_timer t, void *arg)
{
    session *ss = arg;          /* request threads are joined: handles are stable */
    if (t == atomic_load_explicit(&ss->idle, memory_order_relaxed))
        count(&C.idle_dropped);
    else if (t == atomic_load_explicit(&ss->ping, memory_order_relaxed))
        count(&C.ping_dropped);
    else
        count(&C.unknown_dropped);
}

/* ---- session life cycle (owner thread, or main before the threads) ----- */

static int session_open(session *ss, uint64_t *rng)
{
    tw_timer ping, idle;
    atomic_store_explicit(&ss->idle_live, 1, memory_order_relaxed);
    atomic_store_explicit(&ss->bound, tw_now(svc) + idle_ns, memory_order_release);
    int rc = tw_schedule_every(svc, rng_next(rng) % ping_ns, ping_ns, on_ping, ss, &ping);
    if (rc != TW_OK) {
        atomic_store_explicit(&ss->idle_live, 0, memory_order_relaxed);
        return rc;
    }
    count(&C.ping_armed);
    atomic_store_explicit(&ss->ping, ping, memory_order_relaxed);
    atomic_fetch_add_explicit(&C.live, 1, memory_order_relaxed);
    /* OPEN before the idle timer can fire; tw_schedule orders it for the callback. */
    atomic_store_explicit(&ss->state, S_OPEN, memory_order_release);
    rc = tw_schedule(svc, idle_ns, on_idle, ss, &idle);
    if (rc != TW_OK) {
        atomic_store_explicit(&ss->state, S_CLOSED, memory_order_relaxed);
        atomic_fetch_sub_explicit(&C.live, 1, memory_order_relaxed);
        if (tw_cancel_sync(svc, ping) == TW_OK)
            count(&C.ping_cancelled);
        atomic_store_explicit(&ss->idle_live, 0, memory_order_relaxed);
        return rc;
    }
    count(&C.idle_armed);
    count(&C.opened);
    atomic_store_explicit(&ss->idle, idle, memory_order_relaxed);
    return TW_OK;
}

static void session_close(session *ss)
{
    uint32_t st = S_OPEN;
    if (!atomic_compare_exchange_strong_explicit(&ss->state, &st, S_CLOSED,
                                                 memory_order_acq_rel, memory_order_acquire))
        return;                 /* the idle callback closed it first */
    count(&C.closed_req);
    atomic_fetch_sub_explicit(&C.live, 1, memory_order_relaxed);
    int rc = tw_cancel_sync(svc, atomic_load_explicit(&ss->ping, memory_order_relaxed));
    if (rc == TW_OK)
        count(&C.ping_cancelled);
    else
        unexpected("tw_cancel_sync(ping)", rc); /* a periodic timer is always pending */
    rc = tw_cancel(svc, atomic_load_explicit(&ss->idle, memory_order_relaxed));
    if (rc == TW_OK) {
        count(&C.idle_cancelled);
        atomic_store_explicit(&ss->idle_live, 0, memory_order_relaxed);
    } else if (rc != TW_ENOENT) {
        unexpected("tw_cancel(idle)", rc);
    } /* TW_ENOENT: the idle callback started; it clears idle_live when done */
}

static void session_touch(session *ss)
{
    uint64_t before = tw_now(svc);
    int rc = tw_reschedule(svc, atomic_load_explicit(&ss->idle, memory_order_relaxed), idle_ns);
    if (rc == TW_OK) {
        count(&C.touches);
        /* Only this thread stores bounds of this session, in call order, so a
         * stored bound never exceeds the timer's deadline. */
        atomic_store_explicit(&ss->bound, before + idle_ns, memory_order_release);
    } else if (rc == TW_ENOENT) {
        count(&C.touches_late); /* the idle timeout fired first */
    } else {
        unexpected("tw_reschedule(idle)", rc);
    }
}

/* ---- request threads --------------------------------------------------- */

typedef struct worker {
    pthread_t th;
    size_t first, count;        /* the sessions this thread owns */
    uint64_t rng, start_ns, cycle_ns;
} worker;

static void request_one(worker *w, uint64_t now)
{
    size_t win = w->count / 2 ? w->count / 2 : 1;
    uint64_t phase = (now - w->start_ns) % w->cycle_ns;
    size_t off = (size_t)((double)phase / (double)w->cycle_ns * (double)w->count);
    session *ss = &sessions[w->first + (off + rng_next(&w->rng) % win) % w->count];

    if (atomic_load_explicit(&ss->state, memory_order_acquire) == S_OPEN) {
        if (rng_next(&w->rng) % 1000 < opt.close_permille)
            session_close(ss);
        else
            session_touch(ss);
    } else if (atomic_load_explicit(&ss->idle_live, memory_order_acquire) == 0) {
        int rc = session_open(ss, &w->rng); /* reopen: the window came round */
        if (rc != TW_OK)
            unexpected("reopen", rc);
    } /* else: its idle callback is still running; leave it for now */
}

static void *request_thread(void *arg)
{
    worker *w = arg;
    uint64_t per_ms = opt.rate / 1000, extra = opt.rate % 1000, next = mono_ns();
    for (uint64_t ms = 0; !atomic_load_explicit(&stopping, memory_order_relaxed); ms++) {
        /* R requests per second: a burst every millisecond, then sleep. */
        uint64_t n = opt.rate ? per_ms + (extra * (ms + 1) / 1000 - extra * ms / 1000) : 256;
        uint64_t now = mono_ns();
        for (uint64_t i = 0; i < n; i++)
            request_one(w, now);
        if (opt.rate) {
            next += MS;
            sleep_until(next);
        }
    }
    return NULL;
}

/* ---- command line ------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: session_timeouts [options]\n"
        "  Simulates a server's sessions on one timerwheel service: an idle timeout\n"
        "  per session pushed back by every request (tw_reschedule), a periodic ping,\n"
        "  sessions closed by requests or by their idle timeout; checks that every\n"
        "  timer ends exactly once and that none fires early.\n"
        "options (value as --name N or --name=N):\n"
        "  --sessions N        sessions (default 100000)\n"
        "  --threads T         request threads, 1 .. 256 (default 4)\n"
        "  --seconds S         run time, 1 .. 86400 (default 10)\n"
        "  --idle-ms M         idle timeout in ms (default 3000)\n"
        "  --ping-ms P         ping period in ms (default 1000)\n"
        "  --close-permille X  requests that close their session, 0 .. 1000 (default 1)\n"
        "  --rate R            requests per second per thread, 0 = unlimited (default 50000)\n"
        "  --seed K            random seed (default: from the clock)\n"
        "  --help              this text\n"
        "exit status: 0 accounting OK, 1 mismatch or early fire, 2 bad command line\n");
}

static int parse_args(int argc, char **argv)
{
    static const struct { const char *name; uint64_t *dst, min, max; } flags[] = {
        { "sessions", &opt.sessions, 1, 10000000 },
        { "threads", &opt.threads, 1, 256 },
        { "seconds", &opt.seconds, 1, 86400 },
        { "idle-ms", &opt.idle_ms, 1, 86400000 },
        { "ping-ms", &opt.ping_ms, 1, 86400000 },
        { "close-permille", &opt.close_permille, 0, 1000 },
        { "rate", &opt.rate, 0, 100000000 },
        { "seed", &opt.seed, 0, UINT64_MAX },
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "session_timeouts: unexpected argument '%s' (try --help)\n", a);
            return -1;
        }
        size_t len = strcspn(a + 2, "=");
        size_t k = 0;
        while (k < sizeof flags / sizeof flags[0] &&
               (strlen(flags[k].name) != len || strncmp(flags[k].name, a + 2, len)))
            k++;
        if (k == sizeof flags / sizeof flags[0]) {
            fprintf(stderr, "session_timeouts: unknown option '%s' (try --help)\n", a);
            return -1;
        }
        if (a[2 + len] == '=')
            val = a + 3 + len;
        else if (i + 1 < argc)
            val = argv[++i];
        if (!val || !*val) {
            fprintf(stderr, "session_timeouts: option --%s needs a value\n", flags[k].name);
            return -1;
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(val, &end, 10);
        if (errno || *end || val[0] == '-' || v < flags[k].min || v > flags[k].max) {
            fprintf(stderr, "session_timeouts: --%s: '%s' is not a number in %" PRIu64
                    " .. %" PRIu64 "\n", flags[k].name, val, flags[k].min, flags[k].max);
            return -1;
        }
        *flags[k].dst = v;
    }
    if (opt.threads > opt.sessions) {
        fprintf(stderr, "session_timeouts: --threads (%" PRIu64 ") exceeds --sessions (%"
                PRIu64 "): each thread owns at least one session\n", opt.threads, opt.sessions);
        return -1;
    }
    return 0;
}

/* ---- main -------------------------------------------------------------- */

static int check(bool ok, const char *what)
{
    if (!ok)
        printf("  MISMATCH: %s\n", what);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    opt = (options){ 100000, 4, 10, 3000, 1000, 1, 50000, 0 };
    opt.seed = mono_ns();
    if (parse_args(argc, argv) != 0)
        return 2;
    idle_ns = opt.idle_ms * MS;
    ping_ns = opt.ping_ms * MS;

    tw_config cfg;
    tw_config_init(&cfg);       /* MONOTONIC, 1 ms tick, 2 workers */
    int rc = tw_create(&cfg, &svc);
    if (rc != TW_OK) {
        fprintf(stderr, "session_timeouts: tw_create: %s\n", tw_strerror(rc));
        return 1;
    }
    sessions = calloc(opt.sessions, sizeof *sessions);
    worker *workers = calloc(opt.threads, sizeof *workers);
    if (!sessions || !workers) {
        fprintf(stderr, "session_timeouts: out of memory\n");
        return 1;
    }
    printf("timerwheel %s: %" PRIu64 " sessions, %" PRIu64 " request threads at %" PRIu64
           " req/s each%s, idle timeout %" PRIu64 " ms, ping every %" PRIu64 " ms, %" PRIu64
           "/1000 requests close, %" PRIu64 " s, %u workers, tick %" PRIu64 " us, seed %" PRIu64 "\n",
           tw_version(), opt.sessions, opt.threads, opt.rate, opt.rate ? "" : " (unlimited)",
           opt.idle_ms, opt.ping_ms, opt.close_permille, opt.seconds, cfg.workers,
           cfg.tick_ns / 1000, opt.seed);

    uint64_t rng = opt.seed | 1;
    for (size_t i = 0; i < opt.sessions; i++) {
        if ((rc = session_open(&sessions[i], &rng)) != TW_OK) {
            fprintf(stderr, "session_timeouts: arming session %zu: %s\n", i, tw_strerror(rc));
            return 1;
        }
    }
    uint64_t start = mono_ns();
    size_t per = opt.sessions / opt.threads;
    for (size_t t = 0; t < opt.threads; t++) {
        worker *w = &workers[t];
        w->first = t * per;
        w->count = t + 1 == opt.threads ? opt.sessions - w->first : per;
        w->rng = (opt.seed + 0x9e3779b97f4a7c15ull * (t + 1)) | 1;
        w->start_ns = start;
        w->cycle_ns = 4 * idle_ns;
        if (pthread_create(&w->th, NULL, request_thread, w) != 0) {
            fprintf(stderr, "session_timeouts: pthread_create failed\n");
            return 1;
        }
    }

    printf("%7s %8s %10s %9s %11s %9s %12s\n", "elapsed", "live", "touches/s", "pings/s",
           "expiries/s", "closes/s", "p99 late ms");  /* p99: since the start */
    uint64_t last_t = 0, last_p = 0, last_e = 0, last_c = 0, now = start;
    for (uint64_t sec = 1; sec <= opt.seconds; sec++) {
        sleep_until(start + sec * SEC);
        now = mono_ns();
        uint64_t t = get(&C.touches), p = get(&C.ping_fired), e = get(&C.idle_fired),
                 c = get(&C.closed_req);
        printf("%6.1fs %8" PRId64 " %10" PRIu64 " %9" PRIu64 " %11" PRIu64 " %9" PRIu64
               " %12.2f\n", (double)(now - start) / SEC,
               atomic_load_explicit(&C.live, memory_order_relaxed), t - last_t, p - last_p,
               e - last_e, c - last_c, (double)tw_lateness_quantile(svc, 0.99) / MS);
        fflush(stdout);
        last_t = t, last_p = p, last_e = e, last_c = c;
    }

    atomic_store(&stopping, true);
    for (size_t t = 0; t < opt.threads; t++)
        pthread_join(workers[t].th, NULL);
    rc = tw_stop(svc, on_pending);
    if (rc != TW_OK)
        unexpected("tw_stop", rc);

    /* Quiescent from here: no thread but this one touches anything. */
    tw_stats st;
    tw_stats_get(svc, &st);
    uint64_t open_at_end = 0;
    for (size_t i = 0; i < opt.sessions; i++)
        open_at_end += atomic_load(&sessions[i].state) == S_OPEN;
    uint64_t opened = get(&C.opened), creq = get(&C.closed_req), cidle = get(&C.closed_idle);
    uint64_t ia = get(&C.idle_armed), ie = get(&C.idle_fired), ic = get(&C.idle_cancelled),
             id = get(&C.idle_dropped);
    uint64_t pa = get(&C.ping_armed), pf = get(&C.ping_fired), pc = get(&C.ping_cancelled),
             pd = get(&C.ping_dropped), pg = get(&C.ping_gone);
    uint64_t early = get(&C.early), unexp = get(&C.unexpected), unk = get(&C.unknown_dropped);

    printf("\nsummary after %.1f s (tw_stop handed %" PRIu64 " never-started timers to on_pending)\n",
           (double)(now - start) / SEC, id + pd + unk);
    printf("  sessions     opened %" PRIu64 " = closed by request %" PRIu64
           " + closed by idle timeout %" PRIu64 " + open at stop %" PRIu64 "\n",
           opened, creq, cidle, open_at_end);
    printf("  idle timers  armed %" PRIu64 " = expired %" PRIu64 " + cancelled %" PRIu64
           " + dropped at stop %" PRIu64 "\n", ia, ie, ic, id);
    printf("               %" PRIu64 " touches moved them (same timers, not new ones); %" PRIu64
           " touches came after the timeout had fired;\n"
           "               %" PRIu64 " expiries lost the close race to a request\n",
           get(&C.touches), get(&C.touches_late), get(&C.idle_lost));
    printf("  ping timers  armed %" PRIu64 " = cancelled %" PRIu64 " + dropped at stop %" PRIu64
           "; %" PRIu64 " pings sent\n", pa, pc, pd, pf);
    printf("  early fires  %" PRIu64 " (worst %" PRIu64 " ns early)\n", early,
           get(&C.worst_early_ns));
    printf("  tw_stats     scheduled %" PRIu64 ", fired %" PRIu64 ", cancelled %" PRIu64
           ", rescheduled %" PRIu64 ", dropped %" PRIu64 ",\n"
           "               overflowed %" PRIu64 ", pending %" PRIu64 ", ticks %" PRIu64
           ", max lateness %.3f ms\n", st.scheduled, st.fired, st.cancelled, st.rescheduled,
           st.dropped, st.overflowed, st.pending, st.ticks, (double)st.max_lateness_ns / MS);
    printf("  lateness     p50 <= %.3f ms, p99 <= %.3f ms, p99.9 <= %.3f ms\n",
           (double)tw_lateness_quantile(svc, 0.5) / MS, (double)tw_lateness_quantile(svc, 0.99) / MS,
           (double)tw_lateness_quantile(svc, 0.999) / MS);

    int bad = 0;
    bad += check(ia == ie + ic + id, "idle: armed != expired + cancelled + dropped");
    bad += check(pa == pc + pd, "ping: armed != cancelled + dropped");
    bad += check(pd == open_at_end + pg, "ping: dropped != open sessions + pings stop took first");
    bad += check(opened == creq + cidle + open_at_end, "sessions: opened != closed + open");
    bad += check(id == open_at_end, "idle: dropped != sessions open at stop");
    bad += check(ie == cidle + get(&C.idle_lost), "idle: expired != closes by timeout + lost races");
    bad += check(st.scheduled == ia + pa, "tw_stats.scheduled != timers armed");
    bad += check(st.fired == ie + pf, "tw_stats.fired != idle expiries + pings");
    bad += check(st.cancelled == ic + pc, "tw_stats.cancelled != cancels that said OK");
    bad += check(st.rescheduled == get(&C.touches), "tw_stats.rescheduled != touches");
    bad += check(st.dropped == id + pd + unk, "tw_stats.dropped != on_pending calls");
    bad += check(st.pending == 0, "tw_stats.pending != 0 after tw_stop");
    bad += check(unk == 0, "on_pending got a handle no session holds");
    bad += check(unexp == 0, "unexpected return codes (see stderr)");
    bad += check(early == 0, "idle timers fired early");
    if (bad)
        printf("accounting: MISMATCH (%d checks failed)\n", bad);
    else
        printf("accounting: OK\n");

    tw_destroy(svc);
    free(workers);
    free(sessions);
    return bad ? 1 : 0;
}
