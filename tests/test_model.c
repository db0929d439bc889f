/*
 * test_model.c: seeded random operation sequences held against a
 * brute-force oracle.
 *
 * The oracle is a plain array of every timer ever armed, with its expected
 * deadline, period and state, plus a list of the live ones and a map from
 * handle to timer. Each seed picks a tiny wheel (2, 4 or 16 slots per
 * level, slot capacity 1, 2 or 8, tick 1 ms, 1 us or 7 ms) and runs a long
 * random sequence of schedule / schedule_every / cancel / cancel_sync /
 * reschedule / advance (steps of 0..3 ticks, medium steps, and now and
 * then up to 2^30 ticks). Callbacks do the same operations from inside
 * (their own handle included). Checked:
 *
 *   - in every callback: the clock is >= the deadline (never early), the
 *     timer is live in the oracle (exactly once; cancelled timers never
 *     run), deadlines within one advance come earliest first;
 *   - after every advance(now): every live timer with deadline + tick <=
 *     now has run (periodic timers move on by the documented skip rule),
 *     tw__check passes, and every stats counter equals the oracle's;
 *   - every return code equals the oracle's expectation exactly;
 *   - every handle is new (never one handed out before);
 *   - at the end, tw_stop hands each live timer to on_pending exactly once.
 *
 * Environment: TW_MODEL_OPS (total operations, default 200000) and
 * TW_MODEL_SEED (run just that seed). A failure names its seed and
 * operation: rerun with TW_MODEL_SEED=<seed>.
 */
#include "tw_test.h"

typedef struct m_timer {
    tw_timer h;
    uint64_t deadline;  /* expected deadline of the next run */
    uint64_t period;    /* 0 = one-shot */
    uint32_t id;
    int live;           /* armed: a run will start unless cancelled */
    int running;        /* inside its own callback */
    int moved;          /* periodic: rescheduled from its own run */
    int cancelled_in_run;
    uint64_t moved_to;
    uint64_t runs;
    int dropped;
    size_t live_pos;
} m_timer;

typedef struct model {
    uint64_t seed, rng;
    long op;
    tw_service *s;
    uint64_t tick, max_delay;
    uint32_t slots, cap;
    m_timer **all;
    size_t nall, capall;
    m_timer **live;
    size_t nlive, caplive;
    size_t nperiodic;   /* live periodic timers */
    m_timer **ht;       /* handle -> timer, open addressing */
    size_t htcap, htn;
    m_timer *cur;       /* timer whose callback is running */
    int in_advance;
    uint64_t adv_target;
    uint64_t last_deadline;
    uint64_t n_sched, n_fired, n_cancel, n_resched;
    size_t max_live;
    int nerr;
    char err[1024];
} model;

static model M;

enum { LIVE_CAP = 3000, PERIODIC_CAP = 40 };

static void m_fail(int line, const char *fmt, ...) CMOCKA_PRINTF_ATTRIBUTE(2, 3);
static void m_fail(int line, const char *fmt, ...)
{
    if (M.nerr++)
        return;
    int n = snprintf(M.err, sizeof M.err,
                     "seed %" PRIu64 " (slots %u, cap %u, tick %" PRIu64 ") op %ld%s, line %d: ",
                     M.seed, M.slots, M.cap, M.tick, M.op, M.cur ? " (in a callback)" : "",
                     line);
    if (n < 0 || (size_t)n >= sizeof M.err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(M.err + n, sizeof M.err - (size_t)n, fmt, ap);
    va_end(ap);
}

#define MCHECK(cond, ...)                      \
    do {                                       \
        if (!(cond))                           \
            m_fail(__LINE__, __VA_ARGS__);     \
    } while (0)

#define M_ASSERT_CLEAN()                                                        \
    do {                                                                        \
        if (M.nerr)                                                             \
            fail_msg("%s\n(rerun: TW_MODEL_SEED=%" PRIu64 ")", M.err, M.seed); \
    } while (0)

/* ---- random numbers -------------------------------------------------------- */

static uint64_t rnd(void)
{
    uint64_t z = (M.rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }

static uint64_t bits(unsigned b) { return b >= 64 ? rnd() : rnd() & ((1ull << b) - 1); }

/* ---- the oracle's bookkeeping ----------------------------------------------- */

static size_t ht_slot(tw_timer h)
{
    uint64_t z = h * 0x9e3779b97f4a7c15ull;
    return (size_t)(z ^ (z >> 29)) & (M.htcap - 1);
}

static m_timer *m_lookup(tw_timer h)
{
    if (h == 0 || M.htcap == 0)
        return NULL;
    for (size_t i = ht_slot(h);; i = (i + 1) & (M.htcap - 1)) {
        if (!M.ht[i])
            return NULL;
        if (M.ht[i]->h == h)
            return M.ht[i];
    }
}

static void ht_put(m_timer *m)
{
    if (2 * (M.htn + 1) > M.htcap) {
        size_t oldcap = M.htcap;
        m_timer **old = M.ht;
        M.htcap = oldcap ? 2 * oldcap : 1024;
        M.ht = calloc(M.htcap, sizeof *M.ht);
        assert_non_null(M.ht);
        M.htn = 0;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i])
                ht_put(old[i]);
        free(old);
    }
    size_t i = ht_slot(m->h);
    while (M.ht[i])
        i = (i + 1) & (M.htcap - 1);
    M.ht[i] = m;
    M.htn++;
}

static void m_make_live(m_timer *m)
{
    if (M.nlive == M.caplive) {
        M.caplive = M.caplive ? 2 * M.caplive : 1024;
        M.live = realloc(M.live, M.caplive * sizeof *M.live);
        assert_non_null(M.live);
    }
    m->live = 1;
    m->live_pos = M.nlive;
    M.live[M.nlive++] = m;
    if (M.nlive > M.max_live)
        M.max_live = M.nlive;
    if (m->period)
        M.nperiodic++;
}

static void m_unlive(m_timer *m)
{
    m->live = 0;
    m_timer *last = M.live[--M.nlive];
    M.live[m->live_pos] = last;
    last->live_pos = m->live_pos;
    if (m->period)
        M.nperiodic--;
}

/* ---- random arguments ---------------------------------------------------------- */

static uint64_t m_delay(void)
{
    uint64_t tk = M.tick, r = below(1000);
    uint64_t sub = (rnd() & 1) ? below(tk) : 0;
    if (r < 550)
        return below(5) * tk + sub;                        /* 0 .. 4 ticks */
    if (r < 800)
        return below(2ull * M.slots * M.slots + 1) * tk + sub;
    if (r < 950)
        return bits((unsigned)below(31)) * tk + sub;      /* up to 2^30 ticks */
    if (r < 990)
        return bits(31 + (unsigned)below(10)) * tk + sub; /* up to 2^40 ticks */
    switch (below(4)) {                                    /* the horizon's edge */
    case 0: return M.max_delay;
    case 1: return M.max_delay - below(3 * tk);
    case 2: return M.max_delay + 1 + below(tk);
    default: return UINT64_MAX;
    }
}

static uint64_t m_period(void)
{
    uint64_t tk = M.tick, r = below(100);
    if (r < 25)
        return 1 + below(tk);                   /* shorter than a tick */
    if (r < 75)
        return 1 + below(8 * tk);
    if (r < 95)
        return 1 + below((uint64_t)M.slots * M.slots * M.slots * tk);
    return 1 + bits(20 + (unsigned)below(16)) * tk;
}

static tw_timer m_pick_handle(void)
{
    uint64_t r = below(100);
    if (M.cur && r < 25)
        return M.cur->h;
    if (r < 75 && M.nlive)
        return M.live[below(M.nlive)]->h;
    if (r < 92 && M.nall)
        return M.all[below(M.nall)]->h;
    tw_timer any = M.nall ? M.all[below(M.nall)]->h : 1;
    switch (below(6)) {
    case 0: return 0;
    case 1: return any ^ (1ull << 32);                    /* other generation */
    case 2: return any + (1ull << 32);
    case 3: return (any & ~0xffffffffull) | ((any + 1) & 0xffffffffull); /* neighbour */
    case 4: return (any & ~0xffffffffull) | 0x7ffffff0u;  /* never allocated */
    default: return rnd();
    }
}

/* ---- operations, each with the oracle's expectation ------------------------------- */

static void m_cb(tw_timer t, void *arg);

/* tw_schedule needs the oracle entry as arg before the handle is known:
 * the entry is made first and filled in after the call. */
static m_timer *m_alloc_pending(void)
{
    m_timer *m = calloc(1, sizeof *m);
    assert_non_null(m);
    return m;
}

static void m_adopt(m_timer *m, tw_timer h, uint64_t deadline, uint64_t period)
{
    MCHECK(h != 0, "TW_OK with handle 0");
    m_timer *dup = m_lookup(h);
    MCHECK(dup == NULL, "handle %#" PRIx64 " handed out again (first to timer %u)", h,
           dup ? dup->id : 0);
    m->h = h;
    m->deadline = deadline;
    m->period = period;
    m->id = (uint32_t)M.nall;
    if (M.nall == M.capall) {
        M.capall = M.capall ? 2 * M.capall : 1024;
        M.all = realloc(M.all, M.capall * sizeof *M.all);
        assert_non_null(M.all);
    }
    M.all[M.nall++] = m;
    if (!dup)
        ht_put(m);
    m_make_live(m);
    M.n_sched++;
}

static void schedule_delay(uint64_t delay)
{
    if (M.nlive >= LIVE_CAP)
        return;
    uint64_t now = tw_now(M.s);
    int want = delay > M.max_delay ? TW_ERANGE : TW_OK;
    m_timer *m = m_alloc_pending();
    tw_timer h = 0;
    int rc = tw_schedule(M.s, delay, m_cb, m, &h);
    MCHECK(rc == want, "tw_schedule(delay %" PRIu64 ") = %s, expected %s", delay, t_code(rc),
           t_code(want));
    if (rc == TW_OK)
        m_adopt(m, h, now + delay, 0);
    else
        free(m);
}

static void do_schedule(void)
{
    schedule_delay(m_delay());
}

/* many timers into one tick, or one upper-level slot: overflow, cascades */
static void do_burst(void)
{
    uint64_t base = m_delay(), n = 10 + below(100);
    uint64_t spread = (rnd() & 1) ? M.tick : (uint64_t)M.slots * M.slots * M.tick;
    if (base > M.max_delay - spread)
        base = below(8 * M.tick);
    for (uint64_t i = 0; i < n && !M.nerr; i++)
        schedule_delay(base + below(spread));
}

static void do_schedule_every(void)
{
    if (M.nlive >= LIVE_CAP || M.nperiodic >= PERIODIC_CAP)
        return;
    uint64_t first = m_delay(), period = m_period(), now = tw_now(M.s);
    uint64_t r = below(200);
    if (r == 0)
        period = 0;
    else if (r == 1)
        period = M.max_delay + 1;
    if (first > M.max_delay && period == 0)
        first = 0; /* one error at a time */
    int want = period == 0 ? TW_EINVAL
             : (first > M.max_delay || period > M.max_delay) ? TW_ERANGE : TW_OK;
    m_timer *m = m_alloc_pending();
    tw_timer h = 0;
    int rc = tw_schedule_every(M.s, first, period, m_cb, m, &h);
    MCHECK(rc == want, "tw_schedule_every(%" PRIu64 ", %" PRIu64 ") = %s, expected %s", first,
           period, t_code(rc), t_code(want));
    if (rc == TW_OK)
        m_adopt(m, h, now + first, period);
    else
        free(m);
}

static void do_cancel(int sync)
{
    tw_timer h = m_pick_handle();
    m_timer *m = m_lookup(h);
    int own = M.cur && h == M.cur->h;
    if (sync && own && M.cur->cancelled_in_run)
        sync = 0; /* cancel_sync of a timer cancelled in its own run: not specified */
    int want;
    if (sync && own)
        want = TW_EDEADLK;
    else if (!m || !m->live)
        want = TW_ENOENT;
    else
        want = TW_OK;
    int rc = sync ? tw_cancel_sync(M.s, h) : tw_cancel(M.s, h);
    MCHECK(rc == want, "%s(%#" PRIx64 "%s%s) = %s, expected %s",
           sync ? "tw_cancel_sync" : "tw_cancel", h, m ? (m->period ? ", periodic" : ", one-shot") : "",
           own ? ", own" : "", t_code(rc), t_code(want));
    if (rc == TW_OK && want == TW_OK) {
        if (m->running)
            m->cancelled_in_run = 1;
        m_unlive(m);
        M.n_cancel++;
    }
}

static void do_reschedule(void)
{
    tw_timer h = m_pick_handle();
    m_timer *m = m_lookup(h);
    uint64_t delay = m_delay(), now = tw_now(M.s);
    int live = m && m->live;
    if (!live && delay > M.max_delay)
        delay = below(3 * M.tick); /* which error wins is not specified */
    int want = !live ? TW_ENOENT : delay > M.max_delay ? TW_ERANGE : TW_OK;
    int rc = tw_reschedule(M.s, h, delay);
    MCHECK(rc == want, "tw_reschedule(%#" PRIx64 "%s%s, %" PRIu64 ") = %s, expected %s", h,
           m ? (m->period ? ", periodic" : ", one-shot") : "",
           M.cur && h == M.cur->h ? ", own" : "", delay, t_code(rc), t_code(want));
    if (rc == TW_OK && want == TW_OK) {
        if (m->running) {
            m->moved = 1;
            m->moved_to = now + delay;
        } else {
            m->deadline = now + delay;
        }
        M.n_resched++;
    }
}

static void do_inner_forbidden(void)
{
    int rc = tw_advance(M.s, tw_now(M.s) + M.tick);
    MCHECK(rc == TW_EDEADLK, "tw_advance from a callback = %s", t_code(rc));
    rc = tw_stop(M.s, NULL);
    MCHECK(rc == TW_EDEADLK, "tw_stop from a callback = %s", t_code(rc));
}

/* one random operation; returns 1 when the caller should advance */
static int m_random_op(int in_cb)
{
    uint64_t r = below(1000);
    if (in_cb) {
        if (r < 350)
            do_schedule();
        else if (r < 400)
            do_schedule_every();
        else if (r < 630)
            do_cancel(0);
        else if (r < 720)
            do_cancel(1);
        else if (r < 990)
            do_reschedule();
        else
            do_inner_forbidden();
        return 0;
    }
    if (r < 5)
        do_burst();
    else if (r < 240)
        do_schedule();
    else if (r < 300)
        do_schedule_every();
    else if (r < 450)
        do_cancel(0);
    else if (r < 510)
        do_cancel(1);
    else if (r < 690)
        do_reschedule();
    else
        return 1;
    return 0;
}

static void m_cb(tw_timer t, void *arg)
{
    m_timer *m = arg;
    uint64_t now = tw_now(M.s);
    MCHECK(M.in_advance, "callback outside tw_advance");
    MCHECK(M.cur == NULL, "callback inside another callback");
    MCHECK(t == m->h, "callback got handle %#" PRIx64 ", timer %u has %#" PRIx64, t, m->id,
           m->h);
    MCHECK(m->live, "timer %u (%s, handle %#" PRIx64 ") ran but is not live: "
           "cancelled, or already fired", m->id, m->period ? "periodic" : "one-shot", m->h);
    MCHECK(!m->running, "timer %u runs twice at once", m->id);
    MCHECK(now >= m->deadline, "timer %u ran early: clock %" PRIu64 " < deadline %" PRIu64,
           m->id, now, m->deadline);
    MCHECK(now <= M.adv_target, "clock %" PRIu64 " beyond the advance target %" PRIu64, now,
           M.adv_target);
    MCHECK(m->deadline >= M.last_deadline,
           "timer %u (deadline %" PRIu64 ") ran after a timer with deadline %" PRIu64
           " in the same advance", m->id, m->deadline, M.last_deadline);
    M.n_fired++;
    m->runs++;
    if (M.nerr || !m->live)
        return;
    M.last_deadline = m->deadline;
    if (m->period == 0)
        m_unlive(m);
    m->running = 1;
    m->moved = 0;
    m->cancelled_in_run = 0;
    M.cur = m;
    if (below(100) < 30)
        for (uint64_t k = 1 + below(3); k > 0 && !M.nerr; k--)
            m_random_op(1);
    M.cur = NULL;
    m->running = 0;
    if (m->period && m->live) {
        if (m->moved) {
            m->deadline = m->moved_to;
        } else {
            /* Missed: a run whose due tick this advance processed already
             * (MANUAL's rule, workers.c tw__next_period_deadline). */
            uint64_t d = m->deadline, p = m->period, passed = now / M.tick * M.tick;
            m->deadline = d + p > passed ? d + p : d + ((passed - d) / p + 1) * p;
        }
    }
}

/* ---- advance and the checks at quiescence -------------------------------------------- */

static void m_check_quiescent(void)
{
    char buf[1024];
    buf[0] = '\0';
    if (tw__check(M.s, buf, sizeof buf) != 0)
        m_fail(__LINE__, "tw__check: %s", buf);
    uint64_t now = tw_now(M.s);
    for (size_t i = 0; i < M.nlive && !M.nerr; i++) {
        m_timer *m = M.live[i];
        uint64_t due = m->deadline > UINT64_MAX - M.tick ? UINT64_MAX : m->deadline + M.tick;
        MCHECK(due > now, "timer %u (%s, deadline %" PRIu64 ", %" PRIu64 " runs) has not "
               "started by %" PRIu64, m->id, m->period ? "periodic" : "one-shot", m->deadline,
               m->runs, now);
    }
    tw_stats st;
    tw_stats_get(M.s, &st);
    MCHECK(st.scheduled == M.n_sched, "stats.scheduled %" PRIu64 ", oracle %" PRIu64,
           st.scheduled, M.n_sched);
    MCHECK(st.fired == M.n_fired, "stats.fired %" PRIu64 ", oracle %" PRIu64, st.fired,
           M.n_fired);
    MCHECK(st.cancelled == M.n_cancel, "stats.cancelled %" PRIu64 ", oracle %" PRIu64,
           st.cancelled, M.n_cancel);
    MCHECK(st.rescheduled == M.n_resched, "stats.rescheduled %" PRIu64 ", oracle %" PRIu64,
           st.rescheduled, M.n_resched);
    MCHECK(st.pending == M.nlive, "stats.pending %" PRIu64 ", oracle %zu", st.pending, M.nlive);
    MCHECK(st.dropped == 0, "stats.dropped %" PRIu64 " before stop", st.dropped);
}

static void do_advance(void)
{
    uint64_t tk = M.tick, r = below(100), step;
    if (r < 80)
        step = below(4) * tk + ((rnd() & 1) ? below(tk) : 0);
    else if (r < 97)
        step = below(4ull * M.slots * M.slots * tk);
    else
        step = bits(10 + (unsigned)below(21)) * tk; /* up to 2^30 ticks */
    uint64_t now = tw_now(M.s);
    if (now + step > (1ull << 61))
        step = below(4) * tk;
    M.in_advance = 1;
    M.adv_target = now + step;
    M.last_deadline = 0;
    int rc = tw_advance(M.s, now + step);
    M.in_advance = 0;
    MCHECK(rc == TW_OK, "tw_advance(%" PRIu64 ") = %s", now + step, t_code(rc));
    MCHECK(tw_now(M.s) == now + step, "tw_now %" PRIu64 " after tw_advance(%" PRIu64 ")",
           tw_now(M.s), now + step);
    m_check_quiescent();
}

/* ---- one seed ------------------------------------------------------------------------ */

static void on_pending(tw_timer t, void *arg)
{
    m_timer *m = arg;
    MCHECK(t == m->h, "on_pending got handle %#" PRIx64 ", timer %u has %#" PRIx64, t, m->id,
           m->h);
    MCHECK(m->live, "on_pending got timer %u, which is not live", m->id);
    MCHECK(!m->dropped, "on_pending got timer %u twice", m->id);
    m->dropped = 1;
}

static void m_reset(void)
{
    for (size_t i = 0; i < M.nall; i++)
        free(M.all[i]);
    free(M.all);
    free(M.live);
    free(M.ht);
    memset(&M, 0, sizeof M);
}

static void run_seed(uint64_t seed, long ops)
{
    static const uint32_t slot_choices[] = {2, 4, 16};
    static const uint32_t cap_choices[] = {1, 2, 8};
    static const uint64_t tick_choices[] = {T_MS, 1000, 7 * T_MS};
    m_reset();
    M.seed = seed;
    M.rng = seed * 0x2545f4914f6cdd1dull + 1;
    M.slots = slot_choices[below(3)];
    M.cap = cap_choices[below(3)];
    M.tick = tick_choices[below(3)];
    M.s = t_service(M.tick, M.slots, M.cap);
    M.max_delay = tw_max_delay(M.s);
    MCHECK(M.max_delay >= (1ull << 40) * M.tick, "tw_max_delay %" PRIu64 " < 2^40 ticks",
           M.max_delay);
    long advances = 0;
    for (M.op = 0; M.op < ops && !M.nerr; M.op++) {
        if (m_random_op(0)) {
            do_advance();
            advances++;
        }
        M_ASSERT_CLEAN();
    }
    M_ASSERT_CLEAN();
    /* stop: every live timer to on_pending, exactly once */
    size_t live = M.nlive;
    int rc = tw_stop(M.s, on_pending);
    MCHECK(rc == TW_OK, "tw_stop = %s", t_code(rc));
    for (size_t i = 0; i < M.nall; i++) {
        m_timer *m = M.all[i];
        MCHECK(m->dropped == m->live, "timer %u (live %d) handed to on_pending %d times",
               m->id, m->live, m->dropped);
    }
    tw_stats st;
    tw_stats_get(M.s, &st);
    MCHECK(st.dropped == live, "stats.dropped %" PRIu64 ", %zu were live", st.dropped, live);
    MCHECK(st.pending == 0, "stats.pending %" PRIu64 " after stop", st.pending);
    MCHECK(st.fired == M.n_fired, "stats.fired %" PRIu64 ", oracle %" PRIu64, st.fired,
           M.n_fired);
    rc = tw_schedule(M.s, 0, t_noop, NULL, NULL);
    MCHECK(rc == TW_ESHUTDOWN, "tw_schedule after stop = %s", t_code(rc));
    if (M.nlive) {
        rc = tw_cancel(M.s, M.live[0]->h);
        MCHECK(rc == TW_ENOENT, "tw_cancel of a dropped timer = %s", t_code(rc));
    }
    char buf[1024];
    buf[0] = '\0';
    if (tw__check(M.s, buf, sizeof buf) != 0)
        m_fail(__LINE__, "tw__check after stop: %s", buf);
    M_ASSERT_CLEAN();
    print_message("seed %-3" PRIu64 " slots %-2u cap %u tick %-7" PRIu64 ": %ld ops, %ld advances, "
                  "%zu timers (%zu live at most), %" PRIu64 " runs, %" PRIu64 " cancels, %" PRIu64
                  " reschedules, %zu dropped\n",
                  seed, M.slots, M.cap, M.tick, ops, advances, M.nall, M.max_live, M.n_fired,
                  M.n_cancel, M.n_resched, live);
    tw_destroy(M.s);
    M.s = NULL;
    m_reset();
}

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    long x = strtol(v, &end, 0);
    return (*end == '\0' && x > 0) ? x : dflt;
}

static void random_operations_match_oracle(void **state)
{
    (void)state;
    long total = env_long("TW_MODEL_OPS", 200000);
    long one = env_long("TW_MODEL_SEED", 0);
    if (one > 0) {
        run_seed((uint64_t)one, total);
        return;
    }
    enum { SEEDS = 12 };
    for (uint64_t seed = 1; seed <= SEEDS; seed++)
        run_seed(seed, total / SEEDS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_operations_match_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
