/* fuzz_decode.c: see fuzz_decode.h.
 *
 * Layout of an input: one byte picks service A's shape (tick, wheel slots,
 * slot capacity, max_timers), then a sequence of operations, each an opcode
 * byte followed by its argument bytes. Missing bytes read as 0, so every
 * input is valid. Service B (same shape, no cap) provides foreign handles.
 *
 * The oracle keeps, per service, up to FZ_TIMERS timers it armed: their
 * handle, state, earliest allowed next run, and whether that deadline is
 * exact (just armed or moved) so that liveness can be checked too. */
#include "fuzz_decode.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timerwheel.h"
#include "internal.h"

#define FZ_TIMERS 48
#define FZ_STALE 16
#define FZ_MAX_OPS 4000
/* The MANUAL clock stays below 2^62 ns (146 years) so that now + any
 * accepted delay (at most 2^63) cannot overflow: the library refuses a
 * delay <= tw_max_delay with TW_ERANGE once now + delay + tick would pass
 * 2^64 (reported; see tests/test_bad_input.c, max_delay_near_clock_end). */
#define FZ_CLOCK_LIMIT (1ull << 62)

enum { ST_UNUSED, ST_PENDING, ST_FIRED, ST_CANCELLED, ST_DROPPED };

/* what a callback does on its own service */
enum {
    ACT_NONE, ACT_ADVANCE, ACT_STOP, ACT_CANCEL_SYNC_SELF, ACT_CANCEL_SELF,
    ACT_RESCHEDULE_SELF, ACT_SCHEDULE_NEW, ACT_COUNT
};

struct fz_svc;

typedef struct fz_timer {
    struct fz_svc *svc;
    tw_timer h;
    int state;
    bool periodic;
    bool running;
    bool exact;          /* next_min is the exact deadline (not a lower bound) */
    bool moved_in_cb;
    uint64_t period;
    uint64_t next_min;   /* no run before this */
    uint64_t runs;
    uint64_t drops;
    int action;
    uint64_t action_arg;
} fz_timer;

typedef struct fz_svc {
    tw_service *s;
    int id;
    bool stopped;
    bool in_callback;
    uint64_t tick;
    uint64_t max_timers;
    uint64_t in_use;
    uint64_t cancels;
    uint64_t fired;
    fz_timer t[FZ_TIMERS];
    tw_timer stale[FZ_STALE];
    unsigned nstale;
} fz_svc;

typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in;

static fz_svc *g_a, *g_b;

static void fz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("timerwheel fuzz oracle: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

static const char *fz_code(int rc)
{
    return tw_strerror(rc);
}

#define MASK(rc) (1u << (unsigned)(-(rc)))

/* rc must be TW_OK if `allowed` is 0, else one of the codes in `allowed` */
static void fz_expect(const char *what, int rc, unsigned allowed)
{
    if (allowed == 0) {
        if (rc != TW_OK)
            fz_fail("%s returned %d (%s), expected TW_OK", what, rc, fz_code(rc));
        return;
    }
    if (rc > 0 || rc < -31 || rc == TW_OK || !(allowed & MASK(rc)))
        fz_fail("%s returned %d (%s), expected an error from mask %#x", what, rc,
                fz_code(rc), allowed);
}

static uint8_t get8(fz_in *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

static uint64_t get64(fz_in *in)
{
    uint64_t x = 0;
    for (int i = 0; i < 8; i++)
        x = x << 8 | get8(in);
    return x;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static void fz_check(fz_svc *v, const char *when)
{
    char buf[1024];
    buf[0] = '\0';
    if (tw__check(v->s, buf, sizeof buf) != 0)
        fz_fail("tw__check (service %d, %s): %s", v->id, when, buf);
}

/* a delay: mostly small, sometimes huge or past the maximum */
static uint64_t get_delay(fz_in *in, fz_svc *v)
{
    uint8_t k = get8(in);
    uint64_t max = tw_max_delay(v->s);
    switch (k >> 5) {
    case 0: case 1: case 2:
        return (uint64_t)(k & 31) * v->tick / 3 + get8(in);
    case 3:
        return (uint64_t)get8(in) * v->tick;
    case 4:
        return v->tick > (UINT64_MAX >> (k & 31)) ? max : v->tick << (k & 31);
    case 5:
        return (k & 1) ? max : max - (k & 30);
    case 6:
        return (k & 1) ? max + 1 : UINT64_MAX - (k & 30);
    default:
        return get64(in);
    }
}

static fz_timer *find_live(fz_svc *v, tw_timer h)
{
    for (int i = 0; i < FZ_TIMERS; i++)
        if (v->t[i].state == ST_PENDING && v->t[i].h == h)
            return &v->t[i];
    return NULL;
}

static void add_stale(fz_svc *v, tw_timer h)
{
    v->stale[v->nstale++ % FZ_STALE] = h;
}

static fz_timer *free_entry(fz_svc *v)
{
    for (int i = 0; i < FZ_TIMERS; i++) {
        fz_timer *x = &v->t[i];
        if (x->running)
            continue;
        if (x->state == ST_UNUSED)
            return x;
    }
    for (int i = 0; i < FZ_TIMERS; i++) {
        fz_timer *x = &v->t[i];
        if (!x->running && x->state != ST_PENDING) {
            add_stale(v, x->h);
            return x;
        }
    }
    return NULL;
}

static fz_timer *pick(fz_svc *v, uint8_t b)
{
    fz_timer *x = &v->t[b % FZ_TIMERS];
    return x->state == ST_UNUSED ? NULL : x;
}

static void on_fire(tw_timer h, void *arg);
static void on_drop(tw_timer h, void *arg);

/* schedule (period 0: one-shot); in_cb: called from a callback */
static void do_schedule(fz_svc *v, bool periodic, uint64_t delay, uint64_t period,
                        int action, uint64_t action_arg)
{
    fz_timer *x = free_entry(v);
    if (x == NULL)
        return;
    uint64_t max = tw_max_delay(v->s);
    unsigned allowed = 0;
    if (v->stopped)
        allowed |= MASK(TW_ESHUTDOWN);
    if (delay > max || (periodic && period > max))
        allowed |= MASK(TW_ERANGE);
    if (periodic && period == 0)
        allowed |= MASK(TW_EINVAL);
    if (v->max_timers != 0 && v->in_use >= v->max_timers)
        allowed |= MASK(TW_EAGAIN);
    uint64_t now = tw_now(v->s);
    tw_timer h = 0x5a5a5a5a5a5a5a5aull;
    memset(x, 0, sizeof *x);
    x->svc = v;
    x->periodic = periodic;
    x->period = period;
    x->next_min = sat_add(now, delay);
    x->exact = true;
    x->action = action;
    x->action_arg = action_arg;
    x->state = ST_PENDING; /* before the call: ready for a callback */
    int rc = periodic ? tw_schedule_every(v->s, delay, period, on_fire, x, &h)
                      : tw_schedule(v->s, delay, on_fire, x, &h);
    char what[160];
    snprintf(what, sizeof what, "service %d: %s(delay %" PRIu64 ", period %" PRIu64
             ") [in use %" PRIu64 "/%" PRIu64 "%s]", v->id,
             periodic ? "tw_schedule_every" : "tw_schedule", delay, period,
             v->in_use, v->max_timers, v->stopped ? ", stopped" : "");
    fz_expect(what, rc, allowed);
    if (rc != TW_OK) {
        if (h != 0x5a5a5a5a5a5a5a5aull)
            fz_fail("%s failed but wrote *out", what);
        x->state = ST_UNUSED;
        return;
    }
    if (h == 0)
        fz_fail("%s returned handle 0", what);
    x->h = h;
    for (int i = 0; i < FZ_TIMERS; i++)
        if (&v->t[i] != x && v->t[i].state == ST_PENDING && v->t[i].h == h)
            fz_fail("%s returned the handle of another pending timer", what);
    v->in_use++;
}

static void on_drop(tw_timer h, void *arg)
{
    fz_timer *x = arg;
    if (x->h != h)
        fz_fail("on_pending got handle %#" PRIx64 ", armed %#" PRIx64, h, x->h);
    if (x->state != ST_PENDING)
        fz_fail("on_pending for a timer in state %d (runs %" PRIu64 ")", x->state,
                x->runs);
    x->state = ST_DROPPED;
    x->drops++;
    x->svc->in_use--;
}

static void on_fire(tw_timer h, void *arg)
{
    fz_timer *x = arg;
    fz_svc *v = x->svc;
    uint64_t now = tw_now(v->s);
    if (x->h != h)
        fz_fail("callback got handle %#" PRIx64 ", armed %#" PRIx64, h, x->h);
    if (x->state != ST_PENDING)
        fz_fail("callback of a timer in state %d (1 pending, 2 fired, 3 cancelled, "
                "4 dropped), runs %" PRIu64, x->state, x->runs);
    if (x->running)
        fz_fail("callback runs overlap");
    if (now < x->next_min)
        fz_fail("early: service %d ran a timer at %" PRIu64 " < %" PRIu64
                " (periodic %d, runs %" PRIu64 ")", v->id, now, x->next_min,
                x->periodic, x->runs);
    x->runs++;
    v->fired++;
    x->running = true;
    x->moved_in_cb = false;
    if (!x->periodic) {
        x->state = ST_FIRED;
        v->in_use--; /* max_timers counts pending timers: not one that started */
    }
    bool was_in_cb = v->in_callback;
    v->in_callback = true;
    char what[96];
    switch (x->action) {
    case ACT_ADVANCE:
        snprintf(what, sizeof what, "tw_advance from a callback");
        fz_expect(what, tw_advance(v->s, now + x->action_arg), MASK(TW_EDEADLK));
        break;
    case ACT_STOP:
        snprintf(what, sizeof what, "tw_stop from a callback");
        fz_expect(what, tw_stop(v->s, on_drop), MASK(TW_EDEADLK));
        break;
    case ACT_CANCEL_SYNC_SELF:
        snprintf(what, sizeof what, "tw_cancel_sync of its own timer from its callback");
        fz_expect(what, tw_cancel_sync(v->s, h), MASK(TW_EDEADLK));
        break;
    case ACT_CANCEL_SELF:
        snprintf(what, sizeof what, "tw_cancel of its own %s timer from its callback",
                 x->periodic ? "periodic" : "one-shot");
        if (x->periodic) {
            fz_expect(what, tw_cancel(v->s, h), 0);
            x->state = ST_CANCELLED;
            v->cancels++;
            v->in_use--;
        } else {
            fz_expect(what, tw_cancel(v->s, h), MASK(TW_ENOENT));
        }
        break;
    case ACT_RESCHEDULE_SELF: {
        uint64_t d = x->action_arg % (8 * v->tick);
        snprintf(what, sizeof what, "tw_reschedule of its own %s timer from its callback",
                 x->periodic ? "periodic" : "one-shot");
        if (x->periodic) {
            fz_expect(what, tw_reschedule(v->s, h, d), v->stopped ? MASK(TW_ESHUTDOWN) : 0);
            if (!v->stopped) {
                x->next_min = now + d;
                x->moved_in_cb = true;
            }
        } else {
            fz_expect(what, tw_reschedule(v->s, h, d),
                      MASK(TW_ENOENT) | (v->stopped ? MASK(TW_ESHUTDOWN) : 0));
        }
        break;
    }
    case ACT_SCHEDULE_NEW:
        do_schedule(v, false, x->action_arg % (8 * v->tick), 0, ACT_NONE, 0);
        break;
    default:
        break;
    }
    v->in_callback = was_in_cb;
    x->running = false;
    if (x->periodic) {
        if (x->state == ST_PENDING) {
            if (x->moved_in_cb) {
                x->exact = true;
            } else if (x->exact) {
                /* The documented rule (MANUAL): the next grid point whose
                 * tick this advance has not processed yet. */
                uint64_t d = x->next_min, p = x->period, passed = now / v->tick * v->tick;
                x->next_min = d + p > passed ? sat_add(d, p)
                                             : sat_add(d, ((passed - d) / p + 1) * p);
            } else {
                x->next_min = sat_add(x->next_min, x->period);
            }
        }
    }
}

static void after_advance(fz_svc *v, const char *what)
{
    uint64_t now = tw_now(v->s);
    fz_check(v, what);
    for (int i = 0; i < FZ_TIMERS; i++) {
        fz_timer *x = &v->t[i];
        if (x->state != ST_PENDING || !x->exact)
            continue;
        if (sat_add(x->next_min, v->tick) <= now)
            fz_fail("late: service %d, timer due %" PRIu64 " (periodic %d, runs %" PRIu64
                    ") has not run by %" PRIu64 " (%s)", v->id, x->next_min,
                    x->periodic, x->runs, now, what);
    }
}

static void do_advance(fz_svc *v, uint64_t to)
{
    uint64_t now = tw_now(v->s);
    if (to > FZ_CLOCK_LIMIT && to > now)
        to = now > FZ_CLOCK_LIMIT ? now : FZ_CLOCK_LIMIT;
    unsigned allowed = 0;
    if (v->stopped)
        allowed |= MASK(TW_ESHUTDOWN);
    if (to < now)
        allowed |= MASK(TW_EINVAL);
    char what[96];
    snprintf(what, sizeof what, "service %d: tw_advance(%" PRIu64 ") from %" PRIu64,
             v->id, to, now);
    int rc = tw_advance(v->s, to);
    fz_expect(what, rc, allowed);
    if (rc != TW_OK) {
        if (tw_now(v->s) != now)
            fz_fail("%s failed but moved the clock to %" PRIu64, what, tw_now(v->s));
        fz_check(v, what);
        return;
    }
    if (tw_now(v->s) != to)
        fz_fail("%s: tw_now is %" PRIu64 " afterwards", what, tw_now(v->s));
    after_advance(v, what);
}

static void do_cancel(fz_svc *v, fz_timer *x, bool sync)
{
    char what[96];
    snprintf(what, sizeof what, "service %d: %s of a timer in state %d", v->id,
             sync ? "tw_cancel_sync" : "tw_cancel", x->state);
    int rc = sync ? tw_cancel_sync(v->s, x->h) : tw_cancel(v->s, x->h);
    if (x->state == ST_PENDING && !v->stopped) {
        fz_expect(what, rc, 0);
        x->state = ST_CANCELLED;
        v->cancels++;
        v->in_use--;
        add_stale(v, x->h);
    } else {
        fz_expect(what, rc, MASK(TW_ENOENT));
    }
}

static void do_reschedule(fz_svc *v, fz_timer *x, uint64_t delay)
{
    unsigned allowed = 0;
    if (v->stopped)
        allowed |= MASK(TW_ESHUTDOWN);
    if (x->state != ST_PENDING)
        allowed |= MASK(TW_ENOENT);
    if (delay > tw_max_delay(v->s))
        allowed |= MASK(TW_ERANGE);
    char what[128];
    snprintf(what, sizeof what, "service %d: tw_reschedule(delay %" PRIu64
             ") of a timer in state %d", v->id, delay, x->state);
    uint64_t now = tw_now(v->s);
    int rc = tw_reschedule(v->s, x->h, delay);
    fz_expect(what, rc, allowed);
    if (rc == TW_OK) {
        x->next_min = now + delay;
        x->exact = true;
    }
}

/* a handle that is not one of v's pending timers: every call says ENOENT */
static void do_not_pending(fz_svc *v, tw_timer h, int which, uint64_t delay)
{
    if (find_live(v, h) != NULL)
        return; /* happens to be live (e.g. a foreign handle equal to ours) */
    char what[128];
    snprintf(what, sizeof what, "service %d: call %d on not-pending handle %#" PRIx64,
             v->id, which, h);
    switch (which % 3) {
    case 0:
        fz_expect(what, tw_cancel(v->s, h), MASK(TW_ENOENT));
        break;
    case 1:
        fz_expect(what, tw_cancel_sync(v->s, h), MASK(TW_ENOENT));
        break;
    default:
        fz_expect(what, tw_reschedule(v->s, h, delay),
                  MASK(TW_ENOENT) | (v->stopped ? MASK(TW_ESHUTDOWN) : 0) |
                      (delay > tw_max_delay(v->s) ? MASK(TW_ERANGE) : 0));
        break;
    }
}

static void do_stop(fz_svc *v)
{
    uint64_t pending = 0;
    for (int i = 0; i < FZ_TIMERS; i++)
        pending += v->t[i].state == ST_PENDING;
    int rc = tw_stop(v->s, on_drop);
    fz_expect("tw_stop", rc, 0);
    bool first = !v->stopped;
    v->stopped = true;
    for (int i = 0; i < FZ_TIMERS; i++) {
        fz_timer *x = &v->t[i];
        if (x->state == ST_PENDING)
            fz_fail("service %d: tw_stop left a timer pending (not handed to on_pending)",
                    v->id);
        if (x->drops > 1)
            fz_fail("service %d: a timer was handed to on_pending %" PRIu64 " times",
                    v->id, x->drops);
    }
    (void)first;
    (void)pending;
    fz_check(v, "after tw_stop");
}

/* a configuration with at least one field out of range: TW_EINVAL */
static void do_bad_config(fz_in *in)
{
    tw_config c;
    tw_config_init(&c);
    c.clock = TW_CLOCK_MANUAL;
    c.workers = 0;
    c.wheel_slots = 4;
    c.slot_capacity = 2;
    uint8_t k = get8(in);
    uint64_t r = get64(in);
    switch (k % 7) {
    case 0: c.tick_ns = r % 1000; break;
    case 1: c.tick_ns = 1000000000ull + 1 + r % 1000; break;
    case 2: {
        static const uint32_t bad[] = {0, 1, 3, 5, 6, 7, 12, 100, 65535, 65537, 131072,
                                       1u << 31, UINT32_MAX};
        c.wheel_slots = bad[r % (sizeof bad / sizeof bad[0])];
        break;
    }
    case 3: c.slot_capacity = (r & 1) ? 0 : (1u << 20) + 1 + (uint32_t)(r % 1000); break;
    case 4: c.workers = 1025 + (uint32_t)(r % 100000); break;
    case 5: c.max_timers = (1ull << 31) + r % 1000000; break;
    default: c.clock = (tw_clock)(2 + (int)(r % 100)); break;
    }
    tw_service *s = (tw_service *)(uintptr_t)0x1234;
    int rc = tw_create(&c, &s);
    char what[160];
    snprintf(what, sizeof what, "tw_create(tick %" PRIu64 ", slots %" PRIu32 ", cap %" PRIu32
             ", workers %" PRIu32 ", max %" PRIu64 ", clock %d)", c.tick_ns, c.wheel_slots,
             c.slot_capacity, c.workers, c.max_timers, (int)c.clock);
    fz_expect(what, rc, MASK(TW_EINVAL));
    if (s != (tw_service *)(uintptr_t)0x1234)
        fz_fail("%s failed but wrote *out", what);
}

static fz_svc *svc_new(int id, uint64_t tick, uint32_t slots, uint32_t cap, uint64_t maxt)
{
    fz_svc *v = calloc(1, sizeof *v);
    if (v == NULL)
        abort();
    tw_config c;
    tw_config_init(&c);
    c.clock = TW_CLOCK_MANUAL;
    c.workers = 0;
    c.tick_ns = tick;
    c.wheel_slots = slots;
    c.slot_capacity = cap;
    c.max_timers = maxt;
    int rc = tw_create(&c, &v->s);
    if (rc != TW_OK)
        fz_fail("tw_create of a valid config returned %s", fz_code(rc));
    v->id = id;
    v->tick = tick;
    v->max_timers = maxt;
    fz_check(v, "after tw_create");
    return v;
}

static void svc_finish(fz_svc *v)
{
    tw_stats st;
    tw_stats_get(v->s, &st);
    uint64_t pending = 0;
    for (int i = 0; i < FZ_TIMERS; i++)
        pending += v->t[i].state == ST_PENDING;
    if (!v->stopped && st.pending != pending)
        fz_fail("service %d: stats.pending %" PRIu64 ", oracle %" PRIu64, v->id,
                st.pending, pending);
    if (st.fired != v->fired)
        fz_fail("service %d: stats.fired %" PRIu64 ", oracle %" PRIu64, v->id, st.fired,
                v->fired);
    if (st.cancelled != v->cancels)
        fz_fail("service %d: stats.cancelled %" PRIu64 ", oracle %" PRIu64, v->id,
                st.cancelled, v->cancels);
    if (!v->stopped)
        do_stop(v);
    tw_destroy(v->s);
    free(v);
}

int tw_fuzz_run(const uint8_t *data, size_t size)
{
    fz_in in = {data, size};
    static const uint64_t ticks[] = {1000, 1000000, 7000, 1000000000};
    static const uint32_t slots[] = {2, 4, 8, 2};
    static const uint32_t caps[] = {1, 2, 4, 1};
    static const uint64_t maxts[] = {0, 0, 8, 3};
    uint8_t shape = get8(&in);
    uint64_t tick = ticks[shape & 3];
    g_a = svc_new(0, tick, slots[(shape >> 2) & 3], caps[(shape >> 4) & 3],
                  maxts[(shape >> 6) & 3]);
    g_b = svc_new(1, tick, 2, 1, 0);
    do_schedule(g_b, false, tick, 0, ACT_NONE, 0);
    do_schedule(g_b, true, 2 * tick, tick, ACT_NONE, 0);

    for (int ops = 0; ops < FZ_MAX_OPS && in.n > 0; ops++) {
        uint8_t op = get8(&in);
        fz_svc *v = (op & 0x80) ? g_b : g_a;
        switch (op & 0x0f) {
        case 0: case 1: {
            uint64_t d = get_delay(&in, v);
            uint8_t a = get8(&in);
            do_schedule(v, false, d, 0, a % ACT_COUNT, get8(&in) * (uint64_t)v->tick / 4);
            break;
        }
        case 2: {
            uint64_t d = get_delay(&in, v);
            uint8_t p = get8(&in);
            uint64_t period = (p & 0x80) ? get_delay(&in, v)
                                         : (uint64_t)(p & 0x7f) * v->tick / 2;
            uint8_t a = get8(&in);
            do_schedule(v, true, d, period, a % ACT_COUNT, get8(&in) * (uint64_t)v->tick / 4);
            break;
        }
        case 3: case 4: {
            fz_timer *x = pick(v, get8(&in));
            if (x != NULL)
                do_cancel(v, x, (op & 0x0f) == 4);
            break;
        }
        case 5: {
            fz_timer *x = pick(v, get8(&in));
            uint64_t d = get_delay(&in, v);
            if (x != NULL)
                do_reschedule(v, x, d);
            break;
        }
        case 6: case 7: /* advance a little */
            do_advance(v, tw_now(v->s) + (uint64_t)get8(&in) * v->tick / 3 + get8(&in));
            break;
        case 8: { /* advance far */
            uint8_t k = get8(&in);
            unsigned sh = k % 42;
            uint64_t step = v->tick > (UINT64_MAX >> sh) ? UINT64_MAX / 4 : v->tick << sh;
            do_advance(v, sat_add(tw_now(v->s), step + get8(&in)));
            break;
        }
        case 9: { /* time going backwards */
            uint64_t now = tw_now(v->s);
            uint64_t back = (uint64_t)get8(&in) + 1;
            if (now >= back)
                do_advance(v, now - back);
            break;
        }
        case 10: { /* garbage handles */
            uint8_t k = get8(&in);
            tw_timer h;
            switch (k & 3) {
            case 0: h = 0; break;
            case 1: h = UINT64_MAX; break;
            case 2: h = get64(&in); break;
            default: h = (get64(&in) & 0xffffffff00000000ull) | (k >> 2); break;
            }
            do_not_pending(v, h, k >> 2, get_delay(&in, v));
            break;
        }
        case 11: { /* stale handles */
            uint8_t k = get8(&in);
            if (v->nstale > 0)
                do_not_pending(v, v->stale[k % FZ_STALE % (v->nstale < FZ_STALE ? v->nstale : FZ_STALE)],
                               k, get_delay(&in, v));
            break;
        }
        case 12: { /* the other service's handles */
            fz_svc *o = v == g_a ? g_b : g_a;
            uint8_t k = get8(&in);
            fz_timer *x = pick(o, k);
            if (x != NULL)
                do_not_pending(v, x->h, k, get_delay(&in, v));
            break;
        }
        case 13:
            if (get8(&in) & 1)
                do_stop(v);
            break;
        case 14:
            do_bad_config(&in);
            break;
        default: { /* a handle of a finished timer of v, or a live one re-used */
            fz_timer *x = pick(v, get8(&in));
            if (x != NULL && x->state != ST_PENDING)
                do_not_pending(v, x->h, get8(&in), get_delay(&in, v));
            break;
        }
        }
    }
    /* drain: everything due runs, then stop hands over the rest */
    if (!g_a->stopped)
        do_advance(g_a, sat_add(tw_now(g_a->s), 64 * g_a->tick));
    svc_finish(g_a);
    svc_finish(g_b);
    g_a = g_b = NULL;
    return 0;
}
