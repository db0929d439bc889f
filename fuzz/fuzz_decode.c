/* fuzz_decode.c: see fuzz_decode.h.
 *
 * Layout of an input: one byte picks service A's shape (tick, wheel slots,
 * slot capacity, max_timers), then a sequence of operations, each an opcode
 * byte followed by its argument bytes. Missing bytes read as 0, so every
 * input is valid. Service B (same tick, 2 slots, no cap) provides foreign
 * handles.
 *
 * An opcode byte: bit 7 picks service B; bit 6 picks the second table (the
 * calls of issue 15); the low four bits are the opcode; bits 4 and 5 are
 * ignored. The first table is the original one, unchanged, so inputs
 * written for it decode as they always did (they never set bit 6; some of
 * the older seeds set bits 4 and 5):
 *
 *   0, 1  tw_schedule           delay, action, action byte
 *   2     tw_schedule_every     delay, p (bit 7: a period delay follows,
 *                               else period (p & 127) * tick / 2), action,
 *                               action byte
 *   3, 4  tw_cancel, _sync      timer index
 *   5     tw_reschedule         timer index, delay
 *   6, 7  tw_advance a little   a, b: now + a * tick / 3 + b
 *   8     tw_advance far        k, b: now + (tick << k % 42) + b
 *   9     tw_advance backwards  b: now - (b + 1)
 *   10    garbage handle        k, [8 bytes], delay
 *   11    stale handle          k, delay
 *   12    the other service's   k, delay
 *   13    tw_stop               b (only if b & 1)
 *   14    a bad configuration   k, 8 bytes
 *   15    a finished timer      timer index, [k, delay]
 *
 * The second table (bit 6 set):
 *
 *   0     tw_schedule_at        when, action, action byte
 *   1     tw_reschedule_at      timer index, when
 *   2     tw_schedule_many      f (n = f & 15; bit 4: args NULL; bit 5: out
 *                               NULL; bit 6: call again for the rest after a
 *                               partial failure; bit 7: action, action byte
 *                               follow), then n delays
 *   3     tw_cancel_many        f (n = f & 15; bit 4: rcs NULL), then n
 *                               handle choices (kind, argument)
 *   4     tw_next_due
 *   5     tw_wake_fd
 *   6     tw_foreach_pending    mode, 8 bytes of mask (what fn does to the
 *                               timers it is given: nothing, cancel,
 *                               reschedule, reschedule_at, arm a new one)
 *   7     tw_pause, tw_resume   (MANUAL: TW_EINVAL)
 *   8     event-loop step       b: tw_next_due, tw_advance to it + b,
 *                               tw_next_due
 *   9     bad arguments         k
 *   10    schedule with one of the callback actions of issue 15's calls:
 *                               kind (bit 0: periodic), delay, [p as in 2],
 *                               action, action byte
 *   11    a not-pending handle through tw_reschedule_at / tw_cancel_many:
 *                               k, [8 bytes], when
 *   12    tw_advance to a tick boundary: k: (last processed tick + k) * tick
 *   13-15 reserved (nothing)
 *
 * A "when" (absolute deadline) is a byte w, then per w % 8: the past, now,
 * the last processed tick boundary, the next one, now + a delay, now +
 * tw_max_delay (+ 1 if w & 8), 8 raw bytes, a boundary further on.
 *
 * The oracle keeps, per service, up to FZ_TIMERS timers it armed: their
 * handle, state, deadline and due tick (the first tick boundary at or after
 * the deadline that was not processed when it was armed or moved: the
 * MANUAL due rule), so that it checks, besides return codes:
 *   - a callback runs at most once per arming, never before its deadline,
 *     only in a tw_advance that processed its due tick, and every timer due
 *     has run when tw_advance returns;
 *   - tw_next_due: UINT64_MAX iff nothing is pending; else never later than
 *     the earliest due time, equal to it when it is within wheel_slots
 *     ticks, never at or before the last processed boundary (outside a
 *     callback); inside a callback, a lower bound;
 *   - tw_wake_fd, polled after each operation: readable exactly when, since
 *     the last tw_next_due, a timer was armed or moved due before the known
 *     answer (a descriptor made after a tw_next_due starts readable);
 *   - tw_foreach_pending reports the pending set, each timer once, with its
 *     deadline, period, callback and argument; none from a callback.
 * A batch armed with out NULL leaves its handles unknown until a callback,
 * tw_foreach_pending or on_pending shows them; with args NULL too, its
 * timers differ only in their deadlines, and a callback is matched to the
 * unknown one of least due tick (a valid matching exists iff that one is
 * due). */
#include "fuzz_decode.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
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
#define FZ_BATCH 16
/* The MANUAL clock stays below 2^62 ns (146 years) so that now + any
 * accepted delay (at most 2^63) cannot overflow: the library refuses a
 * delay <= tw_max_delay with TW_ERANGE once now + delay + tick would pass
 * 2^64 (reported; see tests/test_bad_input.c, max_delay_near_clock_end). */
#define FZ_CLOCK_LIMIT (1ull << 62)

/* ST_BATCH: set aside for a tw_schedule_many call under way */
enum { ST_UNUSED, ST_PENDING, ST_FIRED, ST_CANCELLED, ST_DROPPED, ST_BATCH };

/* what a callback does on its own service; ACT_COUNT and beyond only for
 * timers armed by the second table (the first keeps its a % ACT_COUNT) */
enum {
    ACT_NONE, ACT_ADVANCE, ACT_STOP, ACT_CANCEL_SYNC_SELF, ACT_CANCEL_SELF,
    ACT_RESCHEDULE_SELF, ACT_SCHEDULE_NEW, ACT_COUNT,
    ACT_NEXT_DUE = ACT_COUNT, ACT_FOREACH, ACT_CANCEL_MANY, ACT_RESCHEDULE_AT,
    ACT_SCHEDULE_AT, ACT_SCHEDULE_MANY, ACT_EXT_COUNT
};

struct fz_svc;

typedef struct fz_timer {
    struct fz_svc *svc;
    tw_timer h;          /* 0 while unknown (a batch armed with out NULL) */
    int state;
    bool periodic;
    bool anon;           /* armed with arg NULL (callback on_fire_anon) */
    bool running;
    bool moved_in_cb;
    bool expect;         /* tw_foreach_pending: pending when the walk began */
    bool seen;           /* tw_foreach_pending: reported by this walk */
    uint64_t period;
    uint64_t next_min;   /* the deadline of the next run: none before it */
    uint64_t due_tick;   /* the tick it is due at (MANUAL due rule) */
    uint64_t runs;
    uint64_t drops;
    int action;
    uint8_t raw;         /* the action byte */
    uint64_t action_arg; /* raw * tick / 4 */
} fz_timer;

typedef struct fz_svc {
    tw_service *s;
    int id;
    bool stopped;
    bool in_callback;
    uint64_t tick;
    uint32_t nslots;
    uint64_t cur;        /* last processed tick (during tw_advance: its last) */
    uint64_t max_timers;
    uint64_t in_use;
    uint64_t cancels;
    uint64_t fired;
    unsigned unknown;    /* pending timers whose handle is not known yet */
    int fd;              /* tw_wake_fd, -1 until asked */
    bool readable;       /* what poll must say about fd */
    uint64_t known_due;  /* what the last tw_next_due told (0: no call yet),
                            lowered by each arming due sooner */
    fz_timer t[FZ_TIMERS];
    tw_timer stale[FZ_STALE];
    unsigned nstale;
} fz_svc;

typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in;

static fz_svc *g_a, *g_b;
static fz_svc *g_run;  /* the service whose tw_advance runs callbacks */
static fz_svc *g_drop; /* the service whose tw_stop runs on_pending */
static int g_op = -1;  /* the operation being decoded, for messages */

static void fz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "timerwheel fuzz oracle (operation %d): ", g_op);
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

/* ---- time: ticks and due times ------------------------------------------- */

static uint64_t ceil_tick(const fz_svc *v, uint64_t ns)
{
    return ns / v->tick + (ns % v->tick != 0);
}

/* tick k's boundary in ns; UINT64_MAX - 1 past the end (as the library:
 * UINT64_MAX means "nothing") */
static uint64_t ns_of_tick(const fz_svc *v, uint64_t k)
{
    return k > (UINT64_MAX - 1) / v->tick ? UINT64_MAX - 1 : k * v->tick;
}

/* An arming or a move due at tick k: the loop's wake-up descriptor becomes
 * readable if that is sooner than what the loop knows. */
static void wake_note(fz_svc *v, uint64_t k)
{
    uint64_t due = ns_of_tick(v, k);
    if (v->known_due == 0 || due >= v->known_due)
        return;
    v->known_due = due;
    if (v->fd >= 0)
        v->readable = true;
}

/* x's next run is at `deadline` (armed or moved now): due at the first
 * tick boundary at or after it that is not processed yet. */
static void set_deadline(fz_svc *v, fz_timer *x, uint64_t deadline)
{
    uint64_t k = ceil_tick(v, deadline);
    x->next_min = deadline;
    x->due_tick = k > v->cur ? k : v->cur + 1;
    wake_note(v, x->due_tick);
}

static void check_wake(fz_svc *v, const char *when)
{
    if (v->fd < 0)
        return;
    struct pollfd p = {.fd = v->fd, .events = POLLIN, .revents = 0};
    /* Even a zero timeout returns EINTR when a signal is pending and no
     * descriptor is ready: libFuzzer's SIGALRM (its -timeout watchdog)
     * lands here now and then. Ask again; any other error is ours. */
    int r;
    do {
        r = poll(&p, 1, 0);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        fz_fail("service %d: poll of the wake fd failed after %s: %s", v->id, when,
                strerror(errno));
    bool readable = r > 0 && (p.revents & POLLIN);
    if (readable != v->readable)
        fz_fail("service %d: wake fd %s after %s; the oracle expects it %s (last "
                "tw_next_due answer, lowered by armings since: %" PRIu64 ", now %" PRIu64
                ")", v->id, readable ? "readable" : "not readable", when,
                v->readable ? "readable" : "not readable", v->known_due, tw_now(v->s));
}

/* ---- inputs ---------------------------------------------------------------- */

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

/* an absolute deadline on v's clock, around now */
static uint64_t get_when(fz_in *in, fz_svc *v)
{
    uint8_t w = get8(in);
    uint64_t now = tw_now(v->s), back;
    switch (w % 8) {
    case 0:
        back = (uint64_t)get8(in) * v->tick / 3 + 1;
        return now > back ? now - back : 0;
    case 1:
        return now;
    case 2:
        return v->cur * v->tick;
    case 3:
        return (v->cur + 1) * v->tick;
    case 4:
        return sat_add(now, get_delay(in, v));
    case 5:
        return sat_add(sat_add(now, tw_max_delay(v->s)), (w & 8) ? 1 : 0);
    case 6:
        return get64(in);
    default:
        return sat_add(v->cur + 2, get8(in)) * v->tick;
    }
}

/* ---- the oracle's timers ----------------------------------------------------- */

static fz_timer *find_live(fz_svc *v, tw_timer h)
{
    for (int i = 0; i < FZ_TIMERS; i++)
        if (v->t[i].state == ST_PENDING && v->t[i].h == h && h != 0)
            return &v->t[i];
    return NULL;
}

static void add_stale(fz_svc *v, tw_timer h)
{
    v->stale[v->nstale++ % FZ_STALE] = h;
}

/* the i-th remembered stale handle of v (0 if none) */
static tw_timer stale_at(const fz_svc *v, unsigned i)
{
    if (v->nstale == 0)
        return 0;
    return v->stale[i % (v->nstale < FZ_STALE ? v->nstale : FZ_STALE)];
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
        if (!x->running && x->state != ST_PENDING && x->state != ST_BATCH) {
            add_stale(v, x->h);
            return x;
        }
    }
    return NULL;
}

/* a timer the oracle armed, with a known handle */
static fz_timer *pick(fz_svc *v, uint8_t b)
{
    fz_timer *x = &v->t[b % FZ_TIMERS];
    return x->state == ST_UNUSED || x->h == 0 ? NULL : x;
}

/* x (pending) was cancelled by a call that returned TW_OK */
static void note_cancel(fz_svc *v, fz_timer *x)
{
    x->state = ST_CANCELLED;
    v->cancels++;
    v->in_use--;
    add_stale(v, x->h);
}

/* The library shows x's handle (callback, tw_foreach_pending, on_pending):
 * learn it if unknown, else it must be the same. */
static void learn_handle(fz_svc *v, fz_timer *x, tw_timer h, const char *who)
{
    if (x->h == h && h != 0)
        return;
    if (x->h != 0 || h == 0)
        fz_fail("service %d: %s got handle %#" PRIx64 ", armed %#" PRIx64, v->id, who, h,
                x->h);
    if (find_live(v, h) != NULL)
        fz_fail("service %d: %s got handle %#" PRIx64 " of another pending timer", v->id,
                who, h);
    x->h = h;
    v->unknown--;
}

/* The pending timer of unknown handle and NULL arg that a callback (or
 * on_pending) with handle h can be: of least due tick. */
static fz_timer *match_anon(fz_svc *v, tw_timer h, const char *who)
{
    fz_timer *best = NULL;
    for (int i = 0; i < FZ_TIMERS; i++) {
        fz_timer *x = &v->t[i];
        if (x->h == h && h != 0 && x->state != ST_UNUSED)
            return x; /* known (its state is checked by the caller) */
        if (x->state == ST_PENDING && x->anon && x->h == 0 &&
            (best == NULL || x->due_tick < best->due_tick))
            best = x;
    }
    if (best == NULL)
        fz_fail("service %d: %s with handle %#" PRIx64 " and arg NULL: no such timer",
                v->id, who, h);
    return best;
}

static void on_fire(tw_timer h, void *arg);
static void on_fire_anon(tw_timer h, void *arg);
static void on_drop(tw_timer h, void *arg);

/* ---- arming ---------------------------------------------------------------- */

typedef enum { ARM_DELAY, ARM_EVERY, ARM_AT } arm_kind;

/* Arm one timer: tw_schedule (ARM_DELAY, `when` a delay), tw_schedule_every
 * (ARM_EVERY) or tw_schedule_at (ARM_AT, `when` a deadline). Returns the
 * oracle's entry, or NULL if none was free or the call failed. */
static fz_timer *do_arm(fz_svc *v, arm_kind kind, uint64_t when, uint64_t period,
                        int action, uint8_t raw)
{
    fz_timer *x = free_entry(v);
    if (x == NULL)
        return NULL;
    bool periodic = kind == ARM_EVERY;
    uint64_t max = tw_max_delay(v->s);
    uint64_t now = tw_now(v->s);
    uint64_t ahead = kind != ARM_AT ? when : when > now ? when - now : 0;
    unsigned allowed = 0;
    if (v->stopped)
        allowed |= MASK(TW_ESHUTDOWN);
    if (ahead > max || (periodic && period > max))
        allowed |= MASK(TW_ERANGE);
    if (periodic && period == 0)
        allowed |= MASK(TW_EINVAL);
    if (v->max_timers != 0 && v->in_use >= v->max_timers)
        allowed |= MASK(TW_EAGAIN);
    tw_timer h = 0x5a5a5a5a5a5a5a5aull;
    memset(x, 0, sizeof *x);
    x->svc = v;
    x->periodic = periodic;
    x->period = period;
    x->action = action;
    x->raw = raw;
    x->action_arg = raw * (uint64_t)v->tick / 4;
    x->state = ST_PENDING; /* before the call: ready for a callback */
    int rc = kind == ARM_EVERY ? tw_schedule_every(v->s, when, period, on_fire, x, &h)
           : kind == ARM_AT    ? tw_schedule_at(v->s, when, on_fire, x, &h)
                               : tw_schedule(v->s, when, on_fire, x, &h);
    char what[192];
    snprintf(what, sizeof what, "service %d: %s(%" PRIu64 ", period %" PRIu64
             ") at %" PRIu64 " [in use %" PRIu64 "/%" PRIu64 "%s]", v->id,
             kind == ARM_EVERY ? "tw_schedule_every" : kind == ARM_AT ? "tw_schedule_at"
                                                                      : "tw_schedule",
             when, period, now, v->in_use, v->max_timers, v->stopped ? ", stopped" : "");
    fz_expect(what, rc, allowed);
    if (rc != TW_OK) {
        if (h != 0x5a5a5a5a5a5a5a5aull)
            fz_fail("%s failed but wrote *out", what);
        x->state = ST_UNUSED;
        return NULL;
    }
    if (h == 0)
        fz_fail("%s returned handle 0", what);
    x->h = h;
    for (int i = 0; i < FZ_TIMERS; i++)
        if (&v->t[i] != x && v->t[i].state == ST_PENDING && v->t[i].h == h)
            fz_fail("%s returned the handle of another pending timer", what);
    set_deadline(v, x, kind == ARM_AT ? (when > now ? when : now) : sat_add(now, when));
    v->in_use++;
    return x;
}

/* schedule (period 0: one-shot) */
static void do_schedule(fz_svc *v, bool periodic, uint64_t delay, uint64_t period,
                        int action, uint8_t raw)
{
    (void)do_arm(v, periodic ? ARM_EVERY : ARM_DELAY, delay, period, action, raw);
}

/* ---- batches ----------------------------------------------------------------- */

typedef struct fz_batch {
    size_t n;
    uint64_t delays[FZ_BATCH];
    bool no_args, no_out, retry;
    int action;
    uint8_t raw;
} fz_batch;

/* The first element of b that must fail, from `now`, and the codes it may
 * fail with (*allowed); b->n if none. */
static size_t batch_first_failure(fz_svc *v, const fz_batch *b, unsigned *allowed)
{
    uint64_t max = tw_max_delay(v->s);
    for (size_t i = 0; i < b->n; i++) {
        *allowed = 0;
        if (v->stopped)
            *allowed |= MASK(TW_ESHUTDOWN);
        if (b->delays[i] > max)
            *allowed |= MASK(TW_ERANGE);
        if (v->max_timers != 0 && v->in_use + i >= v->max_timers)
            *allowed |= MASK(TW_EAGAIN);
        if (*allowed)
            return i;
    }
    return b->n;
}

static void batch_check_out(fz_svc *v, const tw_timer *out, size_t n, size_t k,
                            const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (i >= k) {
            if (out[i] != 0)
                fz_fail("%s: out[%zu] is %#" PRIx64 ", not 0 (armed %zu)", what, i, out[i],
                        k);
            continue;
        }
        if (out[i] == 0)
            fz_fail("%s: out[%zu] is 0 though it was armed", what, i);
        if (find_live(v, out[i]) != NULL)
            fz_fail("%s: out[%zu] is the handle of another pending timer", what, i);
        for (size_t j = 0; j < i; j++)
            if (out[j] == out[i])
                fz_fail("%s: out[%zu] == out[%zu]", what, j, i);
    }
    if (out[n] != 0x5a5a5a5a5a5a5a5aull)
        fz_fail("%s: wrote out[n]", what);
}

/* The rest of a batch that failed at element k: the same error again. */
static void batch_retry(fz_svc *v, const fz_batch *b, size_t k, unsigned allowed,
                        void *const *args, tw_callback cb, const char *what)
{
    tw_timer out[FZ_BATCH + 1];
    for (size_t i = 0; i <= FZ_BATCH; i++)
        out[i] = 0x5a5a5a5a5a5a5a5aull;
    int rc = tw_schedule_many(v->s, b->n - k, b->delays + k, cb, b->no_args ? NULL : args + k,
                              b->no_out ? NULL : out);
    char again[224];
    snprintf(again, sizeof again, "%s, called again for the rest", what);
    fz_expect(again, rc, allowed);
    if (!b->no_out)
        batch_check_out(v, out, b->n - k, 0, again);
}

/* tw_schedule_many of b: exactly the first k (the first failure) are
 * armed, out[k..n) are 0. */
static void do_schedule_many(fz_svc *v, fz_batch *b)
{
    fz_timer *x[FZ_BATCH];
    void *args[FZ_BATCH];
    tw_timer out[FZ_BATCH + 1];
    size_t n = 0;
    while (n < b->n && (x[n] = free_entry(v)) != NULL) {
        memset(x[n], 0, sizeof *x[n]);
        x[n]->state = ST_BATCH;
        args[n] = x[n];
        n++;
    }
    b->n = n;
    for (size_t i = 0; i <= FZ_BATCH; i++)
        out[i] = 0x5a5a5a5a5a5a5a5aull;
    unsigned allowed = 0;
    size_t k = batch_first_failure(v, b, &allowed);
    tw_callback cb = b->no_args ? on_fire_anon : on_fire;
    uint64_t now = tw_now(v->s);
    int rc = tw_schedule_many(v->s, n, b->delays, cb, b->no_args ? NULL : args,
                              b->no_out ? NULL : out);
    char what[192];
    snprintf(what, sizeof what, "service %d: tw_schedule_many(n %zu, args %s, out %s) at %"
             PRIu64 ", %zu to arm [in use %" PRIu64 "/%" PRIu64 "%s]", v->id, n,
             b->no_args ? "NULL" : "set", b->no_out ? "NULL" : "set", now, k, v->in_use,
             v->max_timers, v->stopped ? ", stopped" : "");
    if (k == 0 && n > 0)
        fz_expect(what, rc, allowed);
    else if (rc != (int)k)
        fz_fail("%s returned %d (%s), expected %zu", what, rc, rc < 0 ? fz_code(rc) : "",
                k);
    if (!b->no_out)
        batch_check_out(v, out, n, k, what);
    for (size_t i = 0; i < n; i++) {
        memset(x[i], 0, sizeof *x[i]);
        if (i >= k)
            continue; /* ST_UNUSED */
        x[i]->svc = v;
        x[i]->state = ST_PENDING;
        x[i]->anon = b->no_args;
        x[i]->h = b->no_out ? 0 : out[i];
        x[i]->action = b->action;
        x[i]->raw = b->raw;
        x[i]->action_arg = b->raw * (uint64_t)v->tick / 4;
        set_deadline(v, x[i], now + b->delays[i]);
        v->in_use++;
        v->unknown += x[i]->h == 0;
    }
    if (b->retry && k > 0 && k < n)
        batch_retry(v, b, k, allowed, args, cb, what);
}

static void get_batch(fz_in *in, fz_svc *v, fz_batch *b)
{
    uint8_t f = get8(in);
    memset(b, 0, sizeof *b);
    b->n = f & 15;
    b->no_args = f & 0x10;
    b->no_out = f & 0x20;
    b->retry = f & 0x40;
    if (f & 0x80) {
        b->action = get8(in) % ACT_EXT_COUNT;
        b->raw = get8(in);
    }
    for (size_t i = 0; i < b->n; i++)
        b->delays[i] = get_delay(in, v);
}

/* tw_cancel_many of h[0..n): per handle, TW_OK iff it names a pending timer
 * (once: a second copy is TW_ENOENT). */
static void do_cancel_many(fz_svc *v, size_t n, const tw_timer *h, bool with_rcs)
{
    int rcs[FZ_BATCH + 1], want[FZ_BATCH];
    fz_timer *hit[FZ_BATCH];
    int ok = 0;
    for (size_t i = 0; i <= FZ_BATCH; i++)
        rcs[i] = 0x7eadbeef;
    for (size_t i = 0; i < n; i++) {
        hit[i] = v->stopped ? NULL : find_live(v, h[i]);
        for (size_t j = 0; j < i && hit[i] != NULL; j++)
            if (hit[j] == hit[i])
                hit[i] = NULL; /* cancelled by an earlier element */
        want[i] = hit[i] ? TW_OK : TW_ENOENT;
        ok += hit[i] != NULL;
    }
    int rc = tw_cancel_many(v->s, n, h, with_rcs ? rcs : NULL);
    char what[128];
    snprintf(what, sizeof what, "service %d: tw_cancel_many(n %zu, rcs %s)%s%s", v->id, n,
             with_rcs ? "set" : "NULL", v->in_callback ? " from a callback" : "",
             v->stopped ? " after tw_stop" : "");
    if (rc != ok)
        fz_fail("%s returned %d, expected %d", what, rc, ok);
    for (size_t i = 0; with_rcs && i < n; i++)
        if (rcs[i] != want[i])
            fz_fail("%s: rcs[%zu] (handle %#" PRIx64 ") is %d, expected %d", what, i, h[i],
                    rcs[i], want[i]);
    if (rcs[n] != 0x7eadbeef || (!with_rcs && n > 0 && rcs[0] != 0x7eadbeef))
        fz_fail("%s wrote past rcs or into an rcs it was not given", what);
    for (size_t i = 0; i < n; i++)
        if (hit[i] != NULL)
            note_cancel(v, hit[i]);
}

/* ---- tw_foreach_pending ------------------------------------------------------ */

enum { FE_LOOK, FE_CANCEL, FE_RESCHEDULE, FE_RESCHEDULE_AT, FE_ARM, FE_COUNT };

typedef struct fe_ctx {
    fz_svc *v;
    int mode;
    uint64_t mask; /* bit (call % 64): act on that call's timer */
    size_t calls;
} fe_ctx;

/* the oracle's timer that a report names */
static fz_timer *fe_identify(fz_svc *v, const tw_timer_info *i)
{
    if (i->cb == on_fire) {
        for (int j = 0; j < FZ_TIMERS; j++)
            if (&v->t[j] == i->arg)
                return &v->t[j];
        fz_fail("service %d: tw_foreach_pending reported arg %p, none of its timers", v->id,
                i->arg);
    }
    if (i->cb != on_fire_anon || i->arg != NULL)
        fz_fail("service %d: tw_foreach_pending reported a callback or arg never armed",
                v->id);
    fz_timer *x = find_live(v, i->timer);
    if (x != NULL)
        return x;
    for (int j = 0; j < FZ_TIMERS; j++) {
        x = &v->t[j];
        if (x->state == ST_PENDING && x->anon && x->h == 0 && !x->seen &&
            x->next_min == i->deadline_ns)
            return x;
    }
    fz_fail("service %d: tw_foreach_pending reported handle %#" PRIx64 ", arg NULL, "
            "deadline %" PRIu64 ": no such pending timer", v->id, i->timer, i->deadline_ns);
    return NULL;
}

static void fe_check(fz_svc *v, fz_timer *x, const tw_timer_info *i)
{
    if (x->state != ST_PENDING)
        fz_fail("service %d: tw_foreach_pending reported a timer in state %d", v->id,
                x->state);
    if (x->anon != (i->cb == on_fire_anon))
        fz_fail("service %d: tw_foreach_pending reported the wrong callback", v->id);
    learn_handle(v, x, i->timer, "tw_foreach_pending");
    if (x->seen)
        fz_fail("service %d: tw_foreach_pending reported %#" PRIx64 " twice", v->id, x->h);
    x->seen = true;
    if (i->deadline_ns != x->next_min || i->period_ns != (x->periodic ? x->period : 0))
        fz_fail("service %d: tw_foreach_pending reported %#" PRIx64 " with deadline %"
                PRIu64 ", period %" PRIu64 "; the oracle has %" PRIu64 ", %" PRIu64, v->id,
                x->h, i->deadline_ns, i->period_ns, x->next_min,
                x->periodic ? x->period : 0);
}

/* what fn does to the timer it was given (the mode's action) */
static void fe_act(fe_ctx *c, fz_timer *x, const tw_timer_info *i)
{
    fz_svc *v = c->v;
    uint64_t now = tw_now(v->s), n = c->calls;
    char what[128];
    snprintf(what, sizeof what, "service %d: mode %d of tw_foreach_pending's fn on %#" PRIx64,
             v->id, c->mode, i->timer);
    switch (c->mode) {
    case FE_CANCEL:
        fz_expect(what, tw_cancel(v->s, i->timer), 0);
        note_cancel(v, x);
        break;
    case FE_RESCHEDULE: {
        uint64_t d = n % 4 * v->tick / 2;
        fz_expect(what, tw_reschedule(v->s, i->timer, d), 0);
        set_deadline(v, x, now + d);
        break;
    }
    case FE_RESCHEDULE_AT: {
        uint64_t at = (n & 1) ? (now > v->tick ? now - v->tick : 0) : now + n * v->tick / 3;
        fz_expect(what, tw_reschedule_at(v->s, i->timer, at), 0);
        set_deadline(v, x, at > now ? at : now);
        break;
    }
    case FE_ARM: /* armed during the walk: reported at most once (seen) */
        (void)do_arm(v, ARM_DELAY, n % 4 * v->tick, 0, ACT_NONE, 0);
        break;
    default:
        break;
    }
}

static void fe_fn(const tw_timer_info *i, void *ctx)
{
    fe_ctx *c = ctx;
    fz_svc *v = c->v;
    if (v->in_callback)
        fz_fail("service %d: tw_foreach_pending called fn from a callback", v->id);
    fz_timer *x = fe_identify(v, i);
    fe_check(v, x, i);
    if ((c->mask >> (c->calls % 64)) & 1)
        fe_act(c, x, i);
    c->calls++;
}

static void fe_never(const tw_timer_info *i, void *ctx)
{
    (void)i;
    (void)ctx;
    fz_fail("tw_foreach_pending called fn where it must call nothing");
}

/* A walk: every timer pending throughout is reported once, as the oracle
 * has it; one armed during it at most once. Learns unknown handles. */
static void do_foreach(fz_svc *v, int mode, uint64_t mask)
{
    for (int i = 0; i < FZ_TIMERS; i++) {
        v->t[i].expect = v->t[i].state == ST_PENDING;
        v->t[i].seen = false;
    }
    fe_ctx c = {.v = v, .mode = mode, .mask = mask, .calls = 0};
    size_t n = tw_foreach_pending(v->s, fe_fn, &c);
    if (n != c.calls)
        fz_fail("service %d: tw_foreach_pending returned %zu after %zu calls", v->id, n,
                c.calls);
    for (int i = 0; i < FZ_TIMERS; i++) {
        fz_timer *x = &v->t[i];
        if (x->expect && !x->seen)
            fz_fail("service %d: tw_foreach_pending did not report pending timer %#" PRIx64
                    " (deadline %" PRIu64 ", periodic %d, arg %s)", v->id, x->h,
                    x->next_min, x->periodic, x->anon ? "NULL" : "set");
    }
}

/* Handles that the oracle does not know may be anyone's: learn them before
 * a call that must say TW_ENOENT to a handle not ours. */
static void learn_unknown(fz_svc *v)
{
    if (v->unknown > 0)
        do_foreach(v, FE_LOOK, 0);
    if (v->unknown > 0)
        fz_fail("service %d: %u pending timers not reported by tw_foreach_pending", v->id,
                v->unknown);
}

/* ---- tw_next_due ------------------------------------------------------------- */

/* the least due tick of the pending timers (a running periodic one, which
 * has no next due time until its run returns, excluded); false if none */
static bool least_due(const fz_svc *v, uint64_t *k)
{
    bool any = false;
    for (int i = 0; i < FZ_TIMERS; i++) {
        const fz_timer *x = &v->t[i];
        if (x->state != ST_PENDING || x->running)
            continue;
        uint64_t d = x->due_tick > v->cur ? x->due_tick : v->cur + 1;
        if (v->in_callback)
            d = x->due_tick; /* claimed in this advance: due at or before cur */
        if (!any || d < *k)
            *k = d;
        any = true;
    }
    return any;
}

/* tw_next_due against the oracle; the loop now knows its answer. */
static uint64_t do_next_due(fz_svc *v)
{
    uint64_t got = tw_next_due(v->s), k = 0;
    bool any = least_due(v, &k);
    uint64_t due = any ? ns_of_tick(v, k) : UINT64_MAX;
    const char *where = v->in_callback ? " from a callback" : "";
    if (!any && got != UINT64_MAX)
        fz_fail("service %d: tw_next_due%s answered %" PRIu64 " with nothing pending", v->id,
                where, got);
    if (any && got > due)
        fz_fail("service %d: tw_next_due%s answered %" PRIu64 ", after the earliest due time %"
                PRIu64 " (now %" PRIu64 ")", v->id, where, got, due, tw_now(v->s));
    if (any && !v->in_callback && k <= v->cur + v->nslots && got != due)
        fz_fail("service %d: tw_next_due answered %" PRIu64 ", not the earliest due time %"
                PRIu64 " within %" PRIu32 " ticks (now %" PRIu64 ")", v->id, got, due,
                v->nslots, tw_now(v->s));
    if (any && !v->in_callback && got < ns_of_tick(v, v->cur + 1))
        fz_fail("service %d: tw_next_due answered %" PRIu64 ", at or before the last "
                "processed tick boundary %" PRIu64, v->id, got, ns_of_tick(v, v->cur));
    v->known_due = got;
    v->readable = false;
    return got;
}

/* ---- callbacks --------------------------------------------------------------- */

/* a callback's tw_cancel_many of itself and two timers picked by raw */
static void cb_cancel_many(fz_svc *v, fz_timer *x, tw_timer h)
{
    tw_timer hs[3] = {h, v->t[x->raw % FZ_TIMERS].h, v->t[x->raw / 3 % FZ_TIMERS].h};
    do_cancel_many(v, 3, hs, x->raw & 1);
}

/* a callback's tw_reschedule_at of a timer picked by raw (itself maybe) */
static void cb_reschedule_at(fz_svc *v, fz_timer *x, tw_timer h, uint64_t now)
{
    fz_timer *y = &v->t[x->raw % FZ_TIMERS];
    if (x->raw & 0x80)
        y = x;
    tw_timer hy = y == x ? h : y->h;
    if (hy == 0)
        return;
    uint64_t at = (x->raw & 0x40) ? (now > v->tick ? now - v->tick : 0)
                                  : now + x->raw % 8 * v->tick / 2;
    bool movable = y->state == ST_PENDING && find_live(v, hy) == y;
    char what[128];
    snprintf(what, sizeof what, "service %d: tw_reschedule_at(%" PRIu64 ") from a callback "
             "of a %s timer in state %d%s", v->id, at, y == x ? "its own" : "another",
             y->state, y->running ? ", running" : "");
    fz_expect(what, tw_reschedule_at(v->s, hy, at), movable ? 0 : MASK(TW_ENOENT));
    if (!movable)
        return;
    set_deadline(v, y, at > now ? at : now);
    if (y == x)
        x->moved_in_cb = true;
}

static void cb_schedule_many(fz_svc *v, fz_timer *x)
{
    fz_batch b;
    memset(&b, 0, sizeof b);
    b.n = 1 + x->raw % 3;
    b.no_args = x->raw & 0x10;
    b.no_out = x->raw & 0x20;
    for (size_t i = 0; i < b.n; i++)
        b.delays[i] = (x->raw >> 2) % 4 * i * v->tick / 2;
    do_schedule_many(v, &b);
}

/* The actions of issue 15's calls, from a callback. */
static void cb_act_ext(fz_svc *v, fz_timer *x, tw_timer h, uint64_t now)
{
    switch (x->action) {
    case ACT_NEXT_DUE:
        (void)do_next_due(v);
        break;
    case ACT_FOREACH:
        if (tw_foreach_pending(v->s, fe_never, NULL) != 0)
            fz_fail("service %d: tw_foreach_pending from a callback returned non-zero",
                    v->id);
        break;
    case ACT_CANCEL_MANY:
        cb_cancel_many(v, x, h);
        break;
    case ACT_RESCHEDULE_AT:
        cb_reschedule_at(v, x, h, now);
        break;
    case ACT_SCHEDULE_AT: {
        uint64_t back = x->raw % 8 * v->tick / 2;
        uint64_t at = (x->raw & 8) ? (now > back ? now - back : 0) : now + back;
        (void)do_arm(v, ARM_AT, at, 0, ACT_NONE, 0);
        break;
    }
    case ACT_SCHEDULE_MANY:
        cb_schedule_many(v, x);
        break;
    default:
        break;
    }
}

static void cb_act(fz_svc *v, fz_timer *x, tw_timer h, uint64_t now)
{
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
            x->state = ST_CANCELLED; /* as note_cancel, but not remembered as stale: */
            v->cancels++;            /* the first table's inputs decode as before */
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
                set_deadline(v, x, now + d);
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
        cb_act_ext(v, x, h, now);
        break;
    }
}

/* A periodic timer's run returned: its next run, unless moved by its
 * callback, is the next grid point whose tick this advance has not
 * processed yet (the documented MANUAL rule). */
static void rearm_periodic(fz_svc *v, fz_timer *x)
{
    if (x->state != ST_PENDING || x->moved_in_cb)
        return;
    uint64_t d = x->next_min, p = x->period, passed = v->cur * v->tick;
    set_deadline(v, x, d + p > passed ? sat_add(d, p)
                                      : sat_add(d, ((passed - d) / p + 1) * p));
}

static void fire(fz_svc *v, fz_timer *x, tw_timer h)
{
    uint64_t now = tw_now(v->s);
    if (x->state != ST_PENDING)
        fz_fail("callback of a timer in state %d (1 pending, 2 fired, 3 cancelled, "
                "4 dropped), runs %" PRIu64, x->state, x->runs);
    learn_handle(v, x, h, "a callback");
    if (x->running)
        fz_fail("callback runs overlap");
    if (now < x->next_min)
        fz_fail("early: service %d ran a timer at %" PRIu64 " < %" PRIu64
                " (periodic %d, runs %" PRIu64 ")", v->id, now, x->next_min,
                x->periodic, x->runs);
    if (x->due_tick > v->cur)
        fz_fail("early: service %d ran a timer due at tick %" PRIu64 " in the advance to tick %"
                PRIu64 " (deadline %" PRIu64 ", periodic %d)", v->id, x->due_tick, v->cur,
                x->next_min, x->periodic);
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
    cb_act(v, x, h, now);
    v->in_callback = was_in_cb;
    x->running = false;
    if (x->periodic)
        rearm_periodic(v, x);
}

static void on_fire(tw_timer h, void *arg)
{
    fz_timer *x = arg;
    if (x->anon)
        fz_fail("on_fire ran for a timer armed with on_fire_anon");
    fire(x->svc, x, h);
}

static void on_fire_anon(tw_timer h, void *arg)
{
    if (arg != NULL || g_run == NULL)
        fz_fail("on_fire_anon: arg %p, outside tw_advance %d", arg, g_run == NULL);
    fz_timer *x = match_anon(g_run, h, "a callback");
    if (!x->anon)
        fz_fail("on_fire_anon ran for a timer armed with on_fire");
    fire(g_run, x, h);
}

static void on_drop(tw_timer h, void *arg)
{
    fz_timer *x = arg;
    fz_svc *v = x ? x->svc : g_drop;
    if (x == NULL)
        x = match_anon(v, h, "on_pending");
    if (x->state != ST_PENDING)
        fz_fail("on_pending for a timer in state %d (runs %" PRIu64 ")", x->state,
                x->runs);
    learn_handle(v, x, h, "on_pending");
    x->state = ST_DROPPED;
    x->drops++;
    x->svc->in_use--;
}

/* ---- the first table ---------------------------------------------------------- */

static void after_advance(fz_svc *v, const char *what)
{
    uint64_t now = tw_now(v->s);
    fz_check(v, what);
    for (int i = 0; i < FZ_TIMERS; i++) {
        fz_timer *x = &v->t[i];
        if (x->state != ST_PENDING)
            continue;
        if (sat_add(x->next_min, v->tick) <= now || x->due_tick <= v->cur)
            fz_fail("late: service %d, timer due %" PRIu64 " (tick %" PRIu64 ", periodic %d, "
                    "runs %" PRIu64 ") has not run by %" PRIu64 " (%s)", v->id, x->next_min,
                    x->due_tick, x->periodic, x->runs, now, what);
    }
}

/* tw_advance(to) against the oracle; true if it returned TW_OK */
static bool do_advance(fz_svc *v, uint64_t to)
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
    uint64_t cur = v->cur;
    if (allowed == 0)
        v->cur = to / v->tick; /* the callbacks run after the ticks are processed */
    fz_svc *outer = g_run;
    g_run = v;
    int rc = tw_advance(v->s, to);
    g_run = outer;
    fz_expect(what, rc, allowed);
    if (rc != TW_OK) {
        v->cur = cur;
        if (tw_now(v->s) != now)
            fz_fail("%s failed but moved the clock to %" PRIu64, what, tw_now(v->s));
        fz_check(v, what);
        return false;
    }
    if (tw_now(v->s) != to)
        fz_fail("%s: tw_now is %" PRIu64 " afterwards", what, tw_now(v->s));
    after_advance(v, what);
    return true;
}

static void do_cancel(fz_svc *v, fz_timer *x, bool sync)
{
    char what[96];
    snprintf(what, sizeof what, "service %d: %s of a timer in state %d", v->id,
             sync ? "tw_cancel_sync" : "tw_cancel", x->state);
    int rc = sync ? tw_cancel_sync(v->s, x->h) : tw_cancel(v->s, x->h);
    if (x->state == ST_PENDING && !v->stopped) {
        fz_expect(what, rc, 0);
        note_cancel(v, x);
    } else {
        fz_expect(what, rc, MASK(TW_ENOENT));
    }
}

/* tw_reschedule (delay) or tw_reschedule_at (at: deadline) */
static void do_reschedule(fz_svc *v, fz_timer *x, uint64_t when, bool at)
{
    uint64_t now = tw_now(v->s);
    uint64_t ahead = !at ? when : when > now ? when - now : 0;
    unsigned allowed = 0;
    if (v->stopped)
        allowed |= MASK(TW_ESHUTDOWN);
    if (x->state != ST_PENDING)
        allowed |= MASK(TW_ENOENT);
    if (ahead > tw_max_delay(v->s))
        allowed |= MASK(TW_ERANGE);
    char what[128];
    snprintf(what, sizeof what, "service %d: %s(%" PRIu64 ") at %" PRIu64
             " of a timer in state %d", v->id, at ? "tw_reschedule_at" : "tw_reschedule",
             when, now, x->state);
    int rc = at ? tw_reschedule_at(v->s, x->h, when) : tw_reschedule(v->s, x->h, when);
    fz_expect(what, rc, allowed);
    if (rc == TW_OK)
        set_deadline(v, x, now + ahead);
}

/* a handle that is not one of v's pending timers: every call says ENOENT */
static void do_not_pending(fz_svc *v, tw_timer h, int which, uint64_t delay)
{
    learn_unknown(v);
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
    fz_svc *outer = g_drop;
    g_drop = v;
    int rc = tw_stop(v->s, on_drop);
    g_drop = outer;
    fz_expect("tw_stop", rc, 0);
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

static void run_first(fz_in *in, fz_svc *v, uint8_t op)
{
    switch (op & 0x0f) {
    case 0: case 1: {
        uint64_t d = get_delay(in, v);
        uint8_t a = get8(in);
        do_schedule(v, false, d, 0, a % ACT_COUNT, get8(in));
        break;
    }
    case 2: {
        uint64_t d = get_delay(in, v);
        uint8_t p = get8(in);
        uint64_t period = (p & 0x80) ? get_delay(in, v)
                                     : (uint64_t)(p & 0x7f) * v->tick / 2;
        uint8_t a = get8(in);
        do_schedule(v, true, d, period, a % ACT_COUNT, get8(in));
        break;
    }
    case 3: case 4: {
        fz_timer *x = pick(v, get8(in));
        if (x != NULL)
            do_cancel(v, x, (op & 0x0f) == 4);
        break;
    }
    case 5: {
        fz_timer *x = pick(v, get8(in));
        uint64_t d = get_delay(in, v);
        if (x != NULL)
            do_reschedule(v, x, d, false);
        break;
    }
    case 6: case 7: { /* advance a little */
        uint64_t a = get8(in);
        do_advance(v, tw_now(v->s) + a * v->tick / 3 + get8(in));
        break;
    }
    case 8: { /* advance far */
        uint8_t k = get8(in);
        unsigned sh = k % 42;
        uint64_t step = v->tick > (UINT64_MAX >> sh) ? UINT64_MAX / 4 : v->tick << sh;
        do_advance(v, sat_add(tw_now(v->s), step + get8(in)));
        break;
    }
    case 9: { /* time going backwards */
        uint64_t now = tw_now(v->s);
        uint64_t back = (uint64_t)get8(in) + 1;
        if (now >= back)
            do_advance(v, now - back);
        break;
    }
    case 10: { /* garbage handles */
        uint8_t k = get8(in);
        tw_timer h;
        switch (k & 3) {
        case 0: h = 0; break;
        case 1: h = UINT64_MAX; break;
        case 2: h = get64(in); break;
        default: h = (get64(in) & 0xffffffff00000000ull) | (k >> 2); break;
        }
        do_not_pending(v, h, k >> 2, get_delay(in, v));
        break;
    }
    case 11: { /* stale handles */
        uint8_t k = get8(in);
        if (v->nstale > 0)
            do_not_pending(v, v->stale[k % FZ_STALE % (v->nstale < FZ_STALE ? v->nstale : FZ_STALE)],
                           k, get_delay(in, v));
        break;
    }
    case 12: { /* the other service's handles */
        fz_svc *o = v == g_a ? g_b : g_a;
        uint8_t k = get8(in);
        fz_timer *x = pick(o, k);
        if (x != NULL)
            do_not_pending(v, x->h, k, get_delay(in, v));
        break;
    }
    case 13:
        if (get8(in) & 1)
            do_stop(v);
        break;
    case 14:
        do_bad_config(in);
        break;
    default: { /* a handle of a finished timer of v, or a live one re-used */
        fz_timer *x = pick(v, get8(in));
        if (x != NULL && x->state != ST_PENDING) {
            uint8_t which = get8(in); /* before the delay (the order clang used) */
            do_not_pending(v, x->h, which, get_delay(in, v));
        }
        break;
    }
    }
}

/* ---- the second table: issue 15's calls ------------------------------------- */

/* the handle a cancel_many element names: kind byte, then its argument */
static tw_timer get_handle(fz_in *in, fz_svc *v, const tw_timer *earlier, size_t i,
                           bool *foreign)
{
    uint8_t k = get8(in);
    switch (k % 8) {
    case 0: case 1: case 2:
        return v->t[get8(in) % FZ_TIMERS].h; /* 0 if unused or unknown */
    case 3:
        return stale_at(v, get8(in));
    case 4:
        *foreign = true;
        return (v == g_a ? g_b : g_a)->t[get8(in) % FZ_TIMERS].h;
    case 5:
        *foreign = true;
        return get64(in);
    case 6:
        return i > 0 ? earlier[get8(in) % i] : 0;
    default:
        return 0;
    }
}

static void op_cancel_many(fz_in *in, fz_svc *v)
{
    uint8_t f = get8(in);
    size_t n = f & 15;
    tw_timer h[FZ_BATCH];
    bool foreign = false;
    for (size_t i = 0; i < n; i++)
        h[i] = get_handle(in, v, h, i, &foreign);
    if (foreign)
        learn_unknown(v); /* a handle from outside may be one the oracle does not know */
    do_cancel_many(v, n, h, !(f & 0x10));
}

static void op_wake_fd(fz_svc *v)
{
    int fd = tw_wake_fd(v->s);
    if (v->fd < 0) {
        if (fd < 0)
            fz_fail("service %d: tw_wake_fd returned %d (%s)", v->id, fd, fz_code(fd));
        v->fd = fd;
        v->readable = v->known_due != 0; /* made after a tw_next_due: readable */
    } else if (fd != v->fd) {
        fz_fail("service %d: tw_wake_fd returned %d, then %d", v->id, v->fd, fd);
    }
}

static void op_pause(fz_svc *v)
{
    uint64_t now = tw_now(v->s);
    fz_expect("tw_pause of a MANUAL service", tw_pause(v->s), MASK(TW_EINVAL));
    fz_expect("tw_resume of a MANUAL service", tw_resume(v->s), MASK(TW_EINVAL));
    fz_expect("tw_resume of a MANUAL service", tw_resume(v->s), MASK(TW_EINVAL));
    if (tw_now(v->s) != now)
        fz_fail("service %d: tw_pause / tw_resume moved the MANUAL clock", v->id);
}

/* what an event loop does: sleep until tw_next_due, advance to it */
static void op_loop_step(fz_in *in, fz_svc *v)
{
    uint64_t past = get8(in);
    uint64_t due = do_next_due(v);
    if (due == UINT64_MAX || due > FZ_CLOCK_LIMIT)
        return;
    if (!do_advance(v, due + past))
        return; /* stopped */
    uint64_t again = do_next_due(v);
    if (again != UINT64_MAX && again <= due)
        fz_fail("service %d: tw_next_due answered %" PRIu64 " after tw_advance(%" PRIu64
                "): the loop is stuck", v->id, again, due + past);
}

/* the arguments that every new call refuses, or takes as nothing to do */
static void op_bad_args(fz_in *in, fz_svc *v)
{
    uint8_t k = get8(in);
    const uint64_t d[2] = {v->tick, v->tick};
    const tw_timer hs[2] = {1, 2};
    const size_t huge = (size_t)INT_MAX + 1;
    tw_timer out[2];
    int rcs[2], rc;
    const char *what;
    tw_callback cb = on_fire_anon;
    switch (k % 12) {
    case 0:
        what = "tw_schedule_at(NULL)";
        rc = tw_schedule_at(NULL, 0, cb, NULL, out);
        break;
    case 1:
        what = "tw_schedule_at(cb NULL)";
        rc = tw_schedule_at(v->s, 0, NULL, NULL, out);
        break;
    case 2:
        what = "tw_reschedule_at(NULL)";
        rc = tw_reschedule_at(NULL, 1, 0);
        break;
    case 3:
        what = "tw_schedule_many(NULL)";
        rc = tw_schedule_many(NULL, 2, d, cb, NULL, out);
        break;
    case 4:
        what = "tw_schedule_many(cb NULL)";
        rc = tw_schedule_many(v->s, 2, d, NULL, NULL, out);
        break;
    case 5:
        what = "tw_schedule_many(delays NULL)";
        rc = tw_schedule_many(v->s, 2, NULL, cb, NULL, out);
        break;
    case 6:
        what = "tw_schedule_many(n > INT_MAX)";
        rc = tw_schedule_many(v->s, huge, d, cb, NULL, out);
        break;
    case 7:
        what = "tw_cancel_many(NULL)";
        rc = tw_cancel_many(NULL, 2, hs, rcs);
        break;
    case 8:
        what = "tw_cancel_many(handles NULL)";
        rc = tw_cancel_many(v->s, 2, NULL, rcs);
        break;
    case 9:
        what = "tw_cancel_many(n > INT_MAX)";
        rc = tw_cancel_many(v->s, huge, hs, rcs);
        break;
    case 10:
        what = "tw_wake_fd(NULL)";
        rc = tw_wake_fd(NULL);
        break;
    default:
        if (tw_schedule_many(v->s, 0, NULL, cb, NULL, NULL) != 0 ||
            tw_cancel_many(v->s, 0, NULL, NULL) != 0 || tw_next_due(NULL) != UINT64_MAX ||
            tw_foreach_pending(NULL, fe_never, NULL) != 0 ||
            tw_foreach_pending(v->s, NULL, NULL) != 0)
            fz_fail("n 0 or NULL: tw_schedule_many, tw_cancel_many, tw_next_due or "
                    "tw_foreach_pending did not answer 0 (UINT64_MAX)");
        what = "tw_pause(NULL), tw_resume(NULL)";
        rc = tw_pause(NULL) == TW_EINVAL ? tw_resume(NULL) : TW_OK;
        break;
    }
    fz_expect(what, rc, MASK(TW_EINVAL));
}

/* a handle that is not pending, through the new calls */
static void op_not_pending(fz_in *in, fz_svc *v)
{
    uint8_t k = get8(in);
    fz_svc *o = v == g_a ? g_b : g_a;
    tw_timer h = (k & 3) == 0 ? get64(in)
               : (k & 3) == 1 ? stale_at(v, k >> 2)
               : (k & 3) == 2 ? o->t[(k >> 2) % FZ_TIMERS].h
                              : 0;
    uint64_t at = get_when(in, v), now = tw_now(v->s);
    learn_unknown(v);
    if (find_live(v, h) != NULL)
        return;
    if (k & 0x80) {
        do_cancel_many(v, 1, &h, true);
        return;
    }
    unsigned allowed = MASK(TW_ENOENT) | (v->stopped ? MASK(TW_ESHUTDOWN) : 0) |
                       (at > now && at - now > tw_max_delay(v->s) ? MASK(TW_ERANGE) : 0);
    fz_expect("tw_reschedule_at of a not-pending handle", tw_reschedule_at(v->s, h, at),
              allowed);
}

static void run_second(fz_in *in, fz_svc *v, uint8_t op)
{
    switch (op & 0x0f) {
    case 0: {
        uint64_t at = get_when(in, v);
        uint8_t a = get8(in);
        (void)do_arm(v, ARM_AT, at, 0, a % ACT_EXT_COUNT, get8(in));
        break;
    }
    case 1: {
        fz_timer *x = pick(v, get8(in));
        uint64_t at = get_when(in, v);
        if (x != NULL)
            do_reschedule(v, x, at, true);
        break;
    }
    case 2: {
        fz_batch b;
        get_batch(in, v, &b);
        do_schedule_many(v, &b);
        break;
    }
    case 3:
        op_cancel_many(in, v);
        break;
    case 4:
        (void)do_next_due(v);
        break;
    case 5:
        op_wake_fd(v);
        break;
    case 6: {
        uint8_t m = get8(in);
        do_foreach(v, m % FE_COUNT, get64(in));
        break;
    }
    case 7:
        op_pause(v);
        break;
    case 8:
        op_loop_step(in, v);
        break;
    case 9:
        op_bad_args(in, v);
        break;
    case 10: {
        uint8_t kind = get8(in);
        uint64_t d = get_delay(in, v), period = 0;
        if (kind & 1) {
            uint8_t p = get8(in);
            period = (p & 0x80) ? get_delay(in, v) : (uint64_t)(p & 0x7f) * v->tick / 2;
        }
        uint8_t a = get8(in);
        do_schedule(v, kind & 1, d, period, ACT_COUNT + a % (ACT_EXT_COUNT - ACT_COUNT),
                    get8(in));
        break;
    }
    case 11:
        op_not_pending(in, v);
        break;
    case 12:
        do_advance(v, sat_add(v->cur, get8(in)) * v->tick);
        break;
    default:
        break; /* reserved */
    }
}

/* ---- services ------------------------------------------------------------------ */

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
    v->nslots = slots;
    v->max_timers = maxt;
    v->fd = -1;
    fz_check(v, "after tw_create");
    return v;
}

static void svc_finish(fz_svc *v)
{
    if (!v->stopped) {
        do_foreach(v, FE_LOOK, 0);
        (void)do_next_due(v);
        check_wake(v, "the last tw_next_due");
    }
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
    g_op = -1;
    g_a = svc_new(0, tick, slots[(shape >> 2) & 3], caps[(shape >> 4) & 3],
                  maxts[(shape >> 6) & 3]);
    g_b = svc_new(1, tick, 2, 1, 0);
    do_schedule(g_b, false, tick, 0, ACT_NONE, 0);
    do_schedule(g_b, true, 2 * tick, tick, ACT_NONE, 0);

    for (int ops = 0; ops < FZ_MAX_OPS && in.n > 0; ops++) {
        uint8_t op = get8(&in);
        fz_svc *v = (op & 0x80) ? g_b : g_a;
        g_op = ops;
        if (op & 0x40)
            run_second(&in, v, op);
        else
            run_first(&in, v, op);
        char when[48];
        snprintf(when, sizeof when, "opcode %#x", op);
        check_wake(v, when);
    }
    /* drain: everything due runs, then stop hands over the rest */
    g_op = -1;
    if (!g_a->stopped)
        do_advance(g_a, sat_add(tw_now(g_a->s), 64 * g_a->tick));
    svc_finish(g_a);
    svc_finish(g_b);
    g_a = g_b = NULL;
    return 0;
}
