/*
 * service.c: the public calls. Configuration and creation; schedule,
 * reschedule and cancel (lock-free: CAS on the record's state word, then a
 * placement in the wheel, or for a far timer an append to the arming
 * thread's log, which the cursor places: defer.c); tw_advance for the
 * MANUAL clock; stop, destroy, stats.
 *
 * State machine of a record (state word in internal.h; every arrow a CAS
 * that includes the generation, so only one of racing parties wins):
 *
 *   FREE --schedule--> PENDING --step: due--> FIRING --runner--> RUNNING
 *     ^                 |  ^  \                 |  \                |
 *     |          cancel |  |   `--reschedule----'   cancel/stop     | one-shot ends,
 *     +-----------------+  |      (takes it back)   |               | periodic cancelled
 *     +--------------------|------------------------'               |
 *     +--------------------|----------------------------------------+
 *                          `---- periodic re-arm (lease) <----------'
 *
 * Exactly once: a one-shot leaves PENDING/FIRING exactly one way: the
 * runner's FIRING -> RUNNING CAS (fired), a cancel's CAS (TW_OK), or the
 * stop sweep's CAS (on_pending). Moving a deadline uses the lease
 * (records.c), never a plain write into a record someone else may own.
 *
 * Stop and in-flight producers, without waiting for them: a producer
 * publishes PENDING (release, then tw__fence_light) and then re-reads the
 * stop state (seq_cst); tw_stop announces the stop (seq_cst), makes every
 * thread execute a full barrier (tw__fence_heavy: the asymmetric fences of
 * threads.c) and then sweeps every record ever handed out. Either the
 * sweep sees the timer (and hands it to on_pending), or the producer sees
 * the stop and takes its timer back (TW_ESHUTDOWN).
 *
 * Statistics are striped per thread (TW_STRIPES cache lines), so the hot
 * paths never share a counter line across threads; a snapshot sums them.
 * A thread owns its stripe until it exits (tw__stripe_assign).
 */
#include "internal.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define TW_MAX_WORKERS   1024u
#define TW_MAX_CAPACITY  (1u << 20)
#define TW_MAX_SLOTS     65536u

/* ---- errors, version, config ------------------------------------------- */

const char *tw_strerror(int err)
{
    switch (err) {
    case TW_OK: return "success";
    case TW_EINVAL: return "invalid argument or configuration";
    case TW_ENOMEM: return "out of memory";
    case TW_EAGAIN: return "max_timers timers are pending";
    case TW_ERANGE: return "delay beyond the longest delay the service accepts";
    case TW_ENOENT: return "not a pending timer (fired, cancelled, dropped, unknown or stale)";
    case TW_ESHUTDOWN: return "the service is stopped";
    case TW_EDEADLK: return "the call would wait for itself: its own callback, or a cycle of waits";
    default: return "unknown timerwheel error";
    }
}

#define TW_STR2(x) #x
#define TW_STR(x) TW_STR2(x)
const char *tw_version(void)
{
    return TW_STR(TW_VERSION_MAJOR) "." TW_STR(TW_VERSION_MINOR) "." TW_STR(TW_VERSION_PATCH);
}

unsigned tw_version_number(void)
{
    return TW_VERSION_MAJOR * 10000u + TW_VERSION_MINOR * 100u + TW_VERSION_PATCH;
}

void tw_config_init(tw_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->tick_ns = 1000000;
    cfg->wheel_slots = 4096; /* see wheel.c: delays up to 4 s never cascade */
    cfg->slot_capacity = 16;
    cfg->workers = 2;
    cfg->max_timers = 0;
    cfg->clock = TW_CLOCK_MONOTONIC;
}

static bool config_valid(const tw_config *c)
{
    uint32_t n = c->wheel_slots;
    return c->tick_ns >= 1000 && c->tick_ns <= 1000000000ull &&
           n >= 2 && n <= TW_MAX_SLOTS && (n & (n - 1)) == 0 &&
           c->slot_capacity >= 1 && c->slot_capacity <= TW_MAX_CAPACITY &&
           c->workers <= TW_MAX_WORKERS && c->max_timers <= TW_REC_MAX &&
           (c->clock == TW_CLOCK_MONOTONIC || c->clock == TW_CLOCK_MANUAL);
}

static uint64_t max_delay_of(uint64_t tick_ns)
{
    const uint64_t cap = 1ull << 63;
    if (tick_ns > cap / TW_HORIZON_TICKS)
        return cap;
    return TW_HORIZON_TICKS * tick_ns;
}

uint64_t tw_max_delay(const tw_service *s)
{
    return s ? s->max_delay : 0;
}

/* ---- statistics -------------------------------------------------------------- */

/* Owned stripes are process-wide indexes (every service has TW_STRIPES
 * stripes and TW_OWNED_STRIPES magazines), taken by a thread on its first
 * call and given back when it exits, through a pthread key destructor: so
 * a server whose threads come and go keeps per-thread counting and record
 * caches, and two threads never own one stripe at once (an owner's load +
 * store would lose a concurrent add). */
static _Atomic uint32_t stripes_owned; /* bit i: stripe i has an owner */
static _Atomic uint32_t shared_next;
static pthread_key_t stripe_key;
static bool stripe_key_ok;
static pthread_once_t stripe_once = PTHREAD_ONCE_INIT;
TW_TLS uint32_t tw__stripe_mine = UINT32_MAX;
TW_TLS bool tw__stripe_owned;
TW_TLS uint32_t tw__stripe_lean = TW_LEAN_SLOW;

static uint32_t shared_stripe(void)
{
    /* Relaxed: spreading threads over the shared stripes orders nothing. */
    uint32_t n = atomic_fetch_add_explicit(&shared_next, 1, memory_order_relaxed);
    return TW_OWNED_STRIPES + n % TW_SHARED_STRIPES;
}

/* Thread exit (or a later tw_ call from another key's destructor, which
 * then counts on a shared stripe). */
static void stripe_release(void *owned_plus_one)
{
    uint32_t i = (uint32_t)(uintptr_t)owned_plus_one - 1;
    tw__stripe_owned = false;
    tw__stripe_mine = shared_stripe();
    tw__stripe_lean = TW_LEAN_SLOW;
    /* Release: the next owner of stripe i sees our last counts and our
     * magazines' contents (its acquire CAS below). */
    atomic_fetch_and_explicit(&stripes_owned, ~(1u << i), memory_order_release);
}

static void stripe_key_create(void)
{
    stripe_key_ok = pthread_key_create(&stripe_key, stripe_release) == 0;
}

static bool take_owned_stripe(uint32_t *out)
{
    /* Relaxed: a first guess; the CAS checks it. */
    uint32_t m = atomic_load_explicit(&stripes_owned, memory_order_relaxed);
    const uint32_t all = (1u << TW_OWNED_STRIPES) - 1;
    while (m != all) {
        uint32_t i = (uint32_t)__builtin_ctz(~m);
        /* Acquire: the previous owner's counts and magazines (its release
         * at exit) happen before our first plain load + store. */
        if (atomic_compare_exchange_weak_explicit(&stripes_owned, &m, m | 1u << i,
                                                  memory_order_acquire,
                                                  memory_order_relaxed)) {
            if (pthread_setspecific(stripe_key, (void *)(uintptr_t)(i + 1)) == 0) {
                *out = i;
                return true;
            }
            /* Release: nobody used it; hand it straight back. */
            atomic_fetch_and_explicit(&stripes_owned, ~(1u << i), memory_order_release);
            return false;
        }
    }
    return false;
}

uint32_t tw__stripe_assign(void)
{
    pthread_once(&stripe_once, stripe_key_create);
    uint32_t i = 0;
    tw__stripe_owned = stripe_key_ok && take_owned_stripe(&i);
    tw__stripe_mine = tw__stripe_owned ? i : shared_stripe();
    /* tw__fence_real is settled by then: every service's tw_create sets
     * it up, and a thread takes a stripe only through a service; setting
     * it up here as well costs a pthread_once a thread. */
    tw__fence_setup();
    tw__stripe_lean = tw__stripe_owned && !tw__fence_real ? i : TW_LEAN_SLOW;
    return tw__stripe_mine;
}

void tw__count_rare(tw_service *s, int which)
{
    tw__count_add(&tw__stripe(s)->rare[which], 1);
}

/* ---- max_timers: budgets of pending timers -------------------------------- */

/*
 * max_timers caps the pending timers (armed, not yet started, cancelled or
 * dropped). Each of them holds one unit of budget from tw_schedule until it
 * leaves pending: a one-shot when its callback starts (so that callback can
 * arm a replacement), any timer when a cancel says TW_OK, when tw_stop drops
 * it, or when its arming is undone.
 *
 * Units live in a service-wide pool, in the counter stripes (one per
 * thread, service.c above) and in the workers' accounts (below): a
 * schedule takes a unit from its own stripe, an
 * uncontended RMW on a line no other thread writes; an empty stripe takes
 * a block of units from the pool; a unit given back goes to the giving
 * thread's stripe, which hands a block back to the pool when it holds two
 * (looked at once a block of gives: it holds less than three).
 * So no shared line is touched on each schedule and cancel, as there was
 * when the cap was the record table's size and every call met the shared
 * free list (issue 14: WL1 on two threads 4x slower with the cap set).
 *
 * An account's idle units (a stripe's, or a worker's: below) are two
 * counters' difference (tw_budget_acct, internal.h): `given`, which only
 * the givers write (an owner with a plain load and store: no locked
 * instruction per give, as a worker gives one per run of a burst), and
 * `taken`, which takers, the block's hand-back and sweepers advance by CAS,
 * never past the given count they read; an owned stripe's owner takes with
 * a load and a store where membarrier works, which sweeps keep out of by a
 * handshake (acct_take_owned: the CAS on every arming cost WL1 at P = 1
 * 7-12%).
 * (One word that every give added
 * to and a sweep exchanged needed a locked add and a flag read in Dekker's
 * pattern on each give.) A worker's batches give to the worker's own
 * account, counted in the batch's run context (workers.c, run_batch): a
 * store and a compare per run, where the stripe's give loads the count
 * first, since a callback may give to the same stripe (a cancel). WL5's
 * burst on one worker with the cap set, against the same burst without it
 * (medians of 30 pairs alternated in one process, AMD guest, 2026-11-28):
 * 0.89-0.90 with the locked add, 0.92 with the stripe's plain give, 0.94-
 * 0.96 with the worker's account. stress/model/budget.pml checks the
 * protocol below.
 *
 * TW_EAGAIN is exact: a unit given back before a schedule began is found by
 * it unless another arming took it (the give happens before the schedule's
 * reads, which coherence then makes see it). When the pool is empty, the
 * scheduler sweeps every account's units into the pool and tries again. A
 * unit can still evade one sweep:
 *   - on its way between a stripe and the pool in another thread's hands
 *     (a block taken, a sweep, a block handed back): every such move counts
 *     itself in `budget_moves` (begun, then ended: slow paths only);
 *   - given back to an account the sweep had passed: the sweep notes the
 *     given counts it read, and reads them again after its look at the
 *     pool (`given` only grows, so equal sums mean no give between);
 *   - idle in an owned stripe the sweep left to its owner (one that looked
 *     empty at the sweep's start, or whose owner stayed inside its take's
 *     window: acct_take_owned): the sweep notes that it saw idle units
 *     there (pass_acct).
 * TW_EAGAIN is answered only after two sweeps in a row found nothing, with
 * no other move begun before or during them, no give during them and no
 * stripe left with idle units;
 * otherwise the scheduler sweeps again (yielding now and then: a move whose
 * thread was preempted mid-way ends only when it runs). A give that does
 * not happen before the schedule may be missed by both reads: it is ordered
 * after the refusal, as it may be. And when the pool holds less than two
 * blocks a taker takes one unit, not a block: near the cap a block would
 * park units another thread needs in one stripe (twbench WL1 at P = 8 on
 * two cores was refused about once in ten million calls with the cap at
 * the working set, before).
 */
/* budget_moves: the moves in flight (low 32 bits; a begin adds one, its
 * end takes it back, so it never wraps) and the moves ended (high 32 bits,
 * wrapping harmlessly: only compared for equality over one sweep). */
#define MOVE_BEGUN 1ull
#define MOVE_ENDED ((1ull << 32) - 1)
#define MOVES_IN_FLIGHT(w) ((uint32_t)(w))

static void budget_init(tw_service *s)
{
    uint64_t max = s->cfg.max_timers;
    uint64_t block = max / (4 * TW_STRIPES);
    block = block < 1 ? 1 : block > 64 ? 64 : block;
    /* A power of two: a give looks at its account once a block of gives
     * (tw__budget_give_to). 0 without a cap: the one word a cancel reads
     * for both (cancel_freed). */
    block = (uint64_t)1 << (63 - __builtin_clzll(block));
    s->budget_block = max == 0 ? 0 : (int64_t)block;
    atomic_init(&s->budget_pool, (int64_t)max);
    atomic_init(&s->budget_moves, 0);
}

static bool budget_capped(const tw_service *s)
{
    return s->budget_block != 0; /* max_timers set (budget_init) */
}

/* A move of units between the pool and a stripe begins (before units
 * leave where they are) and ends (after they arrive). Seq_cst: a sweeper
 * that reads the counter after its own sweep and pool look, and sees no
 * move begun, knows no unit was in another thread's hands meanwhile. */
static void move_begin(tw_service *s)
{
    atomic_fetch_add_explicit(&s->budget_moves, MOVE_BEGUN, memory_order_seq_cst);
}

static void move_end(tw_service *s)
{
    atomic_fetch_add_explicit(&s->budget_moves, MOVE_ENDED, memory_order_seq_cst);
}

/* Take up to `want` units from the pool; how many it got. Less than two
 * blocks left: one unit (see above). */
static int64_t pool_take(tw_service *s, int64_t want)
{
    /* Relaxed: a first guess; the CAS decides. */
    int64_t have = atomic_load_explicit(&s->budget_pool, memory_order_relaxed);
    while (have > 0) {
        int64_t got = have < 2 * s->budget_block ? 1 : want;
        /* Seq_cst: ordered with the sweeps' and moves' counting (above);
         * units carry no data, the count is all that matters. */
        if (atomic_compare_exchange_weak_explicit(&s->budget_pool, &have, have - got,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed))
            return got;
    }
    return 0;
}

static void pool_give(tw_service *s, int64_t n)
{
    if (n > 0) /* Seq_cst: as in pool_take. */
        atomic_fetch_add_explicit(&s->budget_pool, n, memory_order_seq_cst);
}

/* An account's given count, for a sweep. Seq_cst: read in the sweep's order
 * with the moves' counting (budget_take_slow); the givers' release store
 * is enough for a give that happens before the sweep, and a give that
 * does not may be missed (see above). */
static uint64_t given_seen(tw_budget_acct *a)
{
    return atomic_load_explicit(&a->given, memory_order_seq_cst);
}

/* Every idle unit of one account into the pool; the given count it read. */
static uint64_t sweep_acct(tw_service *s, tw_budget_acct *a)
{
    /* Relaxed: a first guess; the CAS decides. */
    uint64_t taken = atomic_load_explicit(&a->taken, memory_order_relaxed);
    for (;;) {
        uint64_t given = given_seen(a);
        /* Signed: taken may count takes of gives this read missed. */
        if ((int64_t)(given - taken) <= 0)
            return given;
        /* Seq_cst: in the order of the moves' counting, as the old
         * exchange of the stripe's word; a taker or a hand-back that
         * moved `taken` meanwhile makes us read again. */
        if (atomic_compare_exchange_weak_explicit(&a->taken, &taken, given,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed)) {
            pool_give(s, (int64_t)(given - taken));
            return given;
        }
    }
}

/* The accounts: one per counter stripe, one per worker (its batches'
 * runs give there: workers.c, run_batch). i < budget_accts(s). The worker
 * array and its count are set before tw_create returns and kept until
 * tw_destroy. */
static uint32_t budget_accts(const tw_service *s)
{
    return TW_STRIPES + (s->pool.worker ? s->pool.nworkers : 0);
}

static tw_budget_acct *budget_acct(tw_service *s, uint32_t i)
{
    return i < TW_STRIPES ? &s->stripe[i].budget : &s->pool.worker[i - TW_STRIPES].budget;
}

/* An owned stripe's owner takes by load and store (acct_take_owned),
 * where membarrier works: a sweep moves its `taken` only under the
 * handshake (see there). The shared stripes' takers, the workers'
 * accounts' and, without membarrier, every owner take by CAS. */
static bool acct_plain_taken(uint32_t i)
{
    return i < TW_OWNED_STRIPES && !tw__fence_real;
}

/* The account holds idle units as a first look reads it. Relaxed: a guess
 * that decides only whether to ask for the handshake; the sweep's own
 * reads and the round's second look decide. */
static bool acct_looks_idle(tw_budget_acct *a)
{
    uint64_t taken = atomic_load_explicit(&a->taken, memory_order_relaxed);
    return (int64_t)(given_seen(a) - taken) > 0;
}

/* The sweep's half of the handshake with the owners' takes: raise steal on
 * every owned stripe that looks idle (where membarrier works:
 * acct_plain_taken), then make every thread execute a full barrier. A
 * mask of the stripes raised. */
static uint32_t steal_begin(tw_service *s)
{
    uint32_t raised = 0;
    for (uint32_t i = 0; i < TW_OWNED_STRIPES; i++) {
        tw_budget_acct *a = &s->stripe[i].budget;
        if (!acct_plain_taken(i) || !acct_looks_idle(a))
            continue;
        /* Relaxed: ordered before our loads of busy by the heavy fence
         * (the owner's store of busy before its load of steal, with the
         * light fence between: threads.c). A count, as sweeps of several
         * arming threads may overlap. */
        atomic_fetch_add_explicit(&a->steal, 1, memory_order_relaxed);
        raised |= 1u << i;
    }
    if (raised)
        tw__fence_heavy();
    return raised;
}

static void steal_end(tw_service *s, uint32_t raised)
{
    for (uint32_t i = 0; i < TW_OWNED_STRIPES; i++) {
        /* Release: our CAS of taken happens before an owner's next load of
         * it by load and store (its acquire of steal). */
        if (raised & 1u << i)
            atomic_fetch_sub_explicit(&s->stripe[i].budget.steal, 1, memory_order_release);
    }
}

/* An owned stripe we did not raise steal on (it looked empty), or whose
 * owner stayed inside its window: its owner may be taking by load and
 * store, so leave its `taken` alone this sweep. Idle units seen there make
 * the round unclean (budget_take_slow), as a move in flight does; the next
 * round raises steal there again. The given count read, for the round's
 * sum. */
static uint64_t pass_acct(tw_budget_acct *a, bool *held)
{
    /* Relaxed: as in acct_looks_idle. */
    uint64_t taken = atomic_load_explicit(&a->taken, memory_order_relaxed);
    uint64_t given = given_seen(a);
    if ((int64_t)(given - taken) > 0)
        *held = true;
    return given;
}

/* Test statistic (stress/budget_steal.c): a sweep's looks that met an
 * owner inside its window. Relaxed: a count. */
_Atomic uint64_t tw__budget_owner_waits;

/* We raised steal on a stripe whose owner is inside its window: it is a
 * few instructions from leaving, and every window it opens from now on
 * sees steal and takes by CAS. So wait a little for it (spins, then
 * yields), rather than leave the stripe's units and sweep again at once
 * (a review, 2026-11-30: a round per look, each with a membarrier). But
 * not for good: an owner stopped there (a debugger, a CPU taken by a
 * thread of higher priority) would hold up every arming whose own stripe
 * is empty, units idle elsewhere or not (a second review); past the
 * yields the sweep leaves this stripe for the next round. No nap: a
 * nanosleep is a cancellation point, and a thread cancelled here would
 * leave its move in flight for good. True if the owner left. Acquire: the
 * owner's release of busy; its store of taken happens before our CAS. */
static bool owner_left(tw_budget_acct *a)
{
    if (atomic_load_explicit(&a->busy, memory_order_acquire) == 0)
        return true;
    atomic_fetch_add_explicit(&tw__budget_owner_waits, 1, memory_order_relaxed);
    for (unsigned step = 0; step < 2 * TW_WAIT_SPINS; step++) {
        tw__wait_step(step);
        if (atomic_load_explicit(&a->busy, memory_order_acquire) == 0)
            return true;
    }
    return false;
}

/* A planted bug, for stress/budget_steal.c only: the sweep moves an owned
 * stripe's `taken` without looking at busy. The run must see a unit
 * counted twice (ctest stress.budget_steal.plant). */
bool tw__budget_plant_no_busy;

/* Move every account's idle units into the pool (one counted move); the
 * sum of the given counts it read. *held: idle units were left in an
 * owned stripe its owner may be taking from (pass_acct); the round is not
 * clean. */
static uint64_t budget_sweep(tw_service *s, bool *held)
{
    uint64_t given = 0;
    move_begin(s);
    uint32_t raised = steal_begin(s);
    for (uint32_t i = 0; i < budget_accts(s); i++) {
        tw_budget_acct *a = budget_acct(s, i);
        bool ours = !acct_plain_taken(i) || tw__budget_plant_no_busy ||
                    ((raised & 1u << i) && owner_left(a));
        given += ours ? sweep_acct(s, a) : pass_acct(a, held);
    }
    steal_end(s, raised);
    move_end(s);
    return given;
}

/* The sum of every account's given count now (wrapping: only compared). */
static uint64_t budget_given_sum(tw_service *s)
{
    uint64_t given = 0;
    for (uint32_t i = 0; i < budget_accts(s); i++)
        given += given_seen(budget_acct(s, i));
    return given;
}

/* Up to a block from the pool, one unit of it for the caller and the rest
 * to its stripe (added to its given count, by an atomic add: the stripe
 * may be shared): one counted move (the units are in our hands between).
 * True if it got any. */
static bool pool_refill(tw_service *s, tw_stripe *st)
{
    move_begin(s);
    int64_t got = pool_take(s, s->budget_block);
    if (got > 1) /* Relaxed: the counting move orders it (see above). */
        atomic_fetch_add_explicit(&st->budget.given, (uint64_t)(got - 1),
                                  memory_order_relaxed);
    move_end(s);
    return got > 0;
}

/* A unit from the pool, after sweeps if need be: true, or false when two
 * sweeps in a row found none, no other move began before or during them,
 * and no unit was given back during them (see above). */
static bool budget_take_slow(tw_service *s, tw_stripe *st)
{
    if (pool_refill(s, st))
        return true;
    for (unsigned clean = 0, round = 1;; round++) {
        /* Seq_cst: as in move_begin. */
        uint64_t before = atomic_load_explicit(&s->budget_moves, memory_order_seq_cst);
        bool held = false;
        uint64_t given = budget_sweep(s, &held);
        if (pool_refill(s, st))
            return true;
        /* Seq_cst: as in move_begin. Our own two moves (the sweep and the
         * refill) are the only ones allowed. */
        uint64_t after = atomic_load_explicit(&s->budget_moves, memory_order_seq_cst);
        bool alone = !held && MOVES_IN_FLIGHT(before) == 0 &&
                     after == before + 2 * (MOVE_BEGUN + MOVE_ENDED) &&
                     budget_given_sum(s) == given;
        clean = alone ? clean + 1 : 0;
        if (clean == 2)
            return false;
        if (round % 8 == 0)
            sched_yield(); /* a move's thread was preempted mid-way: let it run */
    }
}

/* One unit from account a if it holds any: true if taken. The owner's
 * count of given read once: a give it misses waits for the next take or a
 * sweep. */
static bool acct_take(tw_budget_acct *a)
{
    /* Relaxed: the CAS decides; the unit carries no data. */
    uint64_t taken = atomic_load_explicit(&a->taken, memory_order_relaxed);
    uint64_t given = atomic_load_explicit(&a->given, memory_order_relaxed);
    while ((int64_t)(given - taken) > 0) {
        /* Relaxed: as the loads above. */
        if (atomic_compare_exchange_weak_explicit(&a->taken, &taken, taken + 1,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed))
            return true;
    }
    return false;
}

/* acct_take by the owner of an owned stripe, without a locked
 * instruction: the CAS on every arming cost WL1 at P = 1 with the cap set
 * 7-12% (a sweep's CAS or a hand-back's may move `taken` beside us, so the
 * take could not be a plain load and store). The handshake, the
 * store-buffering shape of the record magazines' (records.c) and of
 * threads.c: we store busy = 1, then (a compiler barrier: the caller
 * comes here only where membarrier works) load steal, and
 * take by load and store only if steal is 0; a sweep raises steal, makes
 * every thread execute a full barrier (tw__fence_heavy), then loads busy,
 * waiting a little for 0 (owner_left), and moves `taken` only if busy is 0
 * (budget_sweep). One of the two sees the other's store. Our own
 * hand-backs are CASes made outside the window, in our order.
 * stress/model/budget.pml and steal.pml check it. */
static bool acct_take_owned(tw_budget_acct *a)
{
    /* Relaxed: ordered before the load of steal by the fence pairing. */
    atomic_store_explicit(&a->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* the compiler's order only (above) */
    bool took;
    /* Acquire: a sweep's release of steal; its CAS of taken happens
     * before our load of it. */
    if (__builtin_expect(atomic_load_explicit(&a->steal, memory_order_acquire) == 0, 1)) {
        /* Relaxed: nobody else moves taken while we are inside (above). */
        uint64_t taken = atomic_load_explicit(&a->taken, memory_order_relaxed);
        uint64_t given = atomic_load_explicit(&a->given, memory_order_relaxed);
        took = (int64_t)(given - taken) > 0;
        TW_INJECT(TW_INJ_OWNED_TAKE);
        if (took) /* Relaxed: published by the release of busy below. */
            atomic_store_explicit(&a->taken, taken + 1, memory_order_relaxed);
        /* Release: a sweep that reads busy 0 (acquire) sees our taken. */
        atomic_store_explicit(&a->busy, 0, memory_order_release);
        return took;
    }
    /* Release: as above (we did not move taken). */
    atomic_store_explicit(&a->busy, 0, memory_order_release);
    return acct_take(a);
}

/* A unit for a timer about to be armed: TW_OK or TW_EAGAIN. On a worker
 * thread of s, the worker's account is looked at too: its callbacks'
 * units go there (workers.c, run_batch), and a callback that arms a
 * replacement under a full cap takes its own unit back without a sweep. */
static int budget_take(tw_service *s)
{
    if (!budget_capped(s))
        return TW_OK;
    tw_stripe *st = tw__stripe(s);
    /* Without membarrier (tw__fence_real) the window's light fence is a
     * real one, dearer than the CAS: take by CAS; sweeps then CAS these
     * stripes as any other (acct_plain_taken). */
    bool windowed = tw__stripe_owned && !tw__fence_real;
    if (windowed ? acct_take_owned(&st->budget) : acct_take(&st->budget))
        return TW_OK;
    tw_worker *w = tw__worker_mine;
    if (w && w->s == s && acct_take(&w->budget))
        return TW_OK;
    return budget_take_slow(s, st) ? TW_OK : TW_EAGAIN;
}

void tw__budget_give(tw_service *s)
{
    if (budget_capped(s))
        tw__budget_give_capped(s);
}

/* An account holds two blocks at a give's look (tw__budget_give_to, internal.h;
 * workers.c, run_batch): hand one to the pool, counted. `taken` as the
 * giver read it. */
void tw__budget_hand_block(tw_service *s, tw_budget_acct *a, uint64_t taken)
{
    move_begin(s);
    /* Seq_cst: a sweep whose CAS reads what this CAS left must also see
     * our move_begin, or it may count itself alone having missed the
     * block in our hands (store-buffering: relaxed was enough on x86
     * only; a review, 2026-11-28). A sweep or take that moved `taken`
     * meanwhile wins: the block stays. */
    if (atomic_compare_exchange_strong_explicit(&a->taken, &taken,
                                                taken + (uint64_t)s->budget_block,
                                                memory_order_seq_cst,
                                                memory_order_relaxed))
        pool_give(s, s->budget_block);
    move_end(s);
}

__attribute__((noinline, cold)) void tw__budget_look(tw_service *s, tw_budget_acct *a,
                                                     uint64_t given, int64_t block)
{
    tw__budget_hand_if_two(s, a, given, block);
}

void tw__note_lateness_runs(tw_service *s, uint32_t bucket, uint32_t n, uint64_t worst)
{
    tw_stripe *st = tw__stripe(s);
    tw__count_add(&st->lateness[bucket], n);
    uint64_t late_ns = worst;
    /* Relaxed: a running maximum orders nothing. */
    uint64_t m = atomic_load_explicit(&st->max_lateness, memory_order_relaxed);
    while (late_ns > m &&
           !atomic_compare_exchange_weak_explicit(&st->max_lateness, &m, late_ns,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

uint64_t tw__stripes_sum(tw_service *s, size_t off)
{
    uint64_t sum = 0;
    for (int i = 0; i < TW_STRIPES; i++) {
        /* Relaxed: counters. */
        sum += atomic_load_explicit((_Atomic uint64_t *)((char *)&s->stripe[i] + off),
                                    memory_order_relaxed);
    }
    return sum;
}
#define SUM(s, field) TW_STRIPES_SUM((s), field)

const char *tw__rare_name(int which)
{
    static const char *const name[TW_RARE_COUNT] = {
        "tombstoned", "newer", "late_slot", "cancel_lost", "lease_met", "resched_firing",
        "handed_over", "ran_away", "early_claim", "early_late", "seg_lost", "early_waited",
        "early_yielded", "stolen", "joined_stuck", "joined_pays", "moved_off",
        "spill_opened", "spill_refused", "spill_huge", "early_cascade", "cascade_yielded",
        "pressure", "pressure_left", "role_taken", "compact_pieces", "compact_yielded",
    };
    return which >= 0 && which < TW_RARE_COUNT ? name[which] : "?";
}

uint64_t tw__rare_total(tw_service *s, int which)
{
    return tw__stripes_sum(s, offsetof(tw_stripe, rare) + (size_t)which * sizeof(uint64_t));
}

/* pending = scheduled - cancelled - dropped - one-shot runs (see tw_stripe),
 * clamped at zero for a snapshot taken while busy. */
static uint64_t pending_of(uint64_t scheduled, uint64_t cancelled, uint64_t dropped,
                           uint64_t fired, uint64_t periodic_runs)
{
    uint64_t left = cancelled + dropped + (fired - periodic_runs);
    return scheduled > left ? scheduled - left : 0;
}

/* Ends first, then armings, each group after an acquire fence (the counts
 * are release: tw__count_add): a timer armed and ended between the reads
 * counts as pending, never a pending timer as ended, so a busy service
 * never reads 0 while a timer is pending (tw_next_due's "nothing pending"
 * answer: with the armings read first, clang's order, a timer armed and
 * cancelled meanwhile made another pending one vanish; a review's
 * program). fired before periodic_runs: a periodic run counts as such
 * before it counts as fired (workers.c), so no periodic run in `fired`
 * is taken for a one-shot's end. */
uint64_t tw__pending(tw_service *s)
{
    uint64_t fired = SUM(s, fired);
    atomic_thread_fence(memory_order_acquire);
    uint64_t periodic_runs = SUM(s, periodic_runs);
    uint64_t cancelled = SUM(s, cancelled), dropped = SUM(s, dropped);
    uint64_t aborted = SUM(s, aborted);
    atomic_thread_fence(memory_order_acquire);
    uint64_t armed = SUM(s, armed);
    return pending_of(armed - aborted, cancelled, dropped, fired, periodic_runs);
}

uint64_t tw__pending_due(tw_service *s)
{
    /* Ended runs first: a run that ends meanwhile is counted as running
     * (a larger number running, a smaller answer: never "nothing" wrongly). */
    uint64_t ended = SUM(s, periodic_ended);
    uint64_t pending = tw__pending(s);
    uint64_t running = SUM(s, periodic_runs) - ended;
    return pending > running ? pending - running : 0;
}

uint64_t tw__reserved_total(tw_service *s)
{
    return SUM(s, reserved);
}

uint64_t tw__fired_total(tw_service *s)
{
    return SUM(s, fired);
}

uint64_t tw__firing_left_total(tw_service *s)
{
    return SUM(s, firing_left);
}

void tw_stats_get(tw_service *s, tw_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!s)
        return;
    uint64_t armed = SUM(s, armed), aborted = SUM(s, aborted);
    uint64_t periodic_runs = SUM(s, periodic_runs);
    out->scheduled = armed - aborted;
    out->fired = SUM(s, fired);
    out->cancelled = SUM(s, cancelled);
    out->rescheduled = SUM(s, rescheduled);
    out->dropped = SUM(s, dropped);
    out->overflowed = tw__wheel_overflowed(s);
    /* Summed one after the other: a busy service can show a transient
     * imbalance, so clamp at zero; at rest the identity is exact. */
    out->pending = pending_of(out->scheduled, out->cancelled, out->dropped, out->fired,
                              periodic_runs);
    /* Relaxed: a statistic. */
    out->ticks = atomic_load_explicit(&s->wheel.cur, memory_order_relaxed);
    for (int i = 0; i < TW_STRIPES; i++) {
        uint64_t m = atomic_load_explicit(&s->stripe[i].max_lateness, memory_order_relaxed);
        if (m > out->max_lateness_ns)
            out->max_lateness_ns = m;
    }
}

void tw_lateness_histogram(tw_service *s, uint64_t buckets[TW_LATENESS_BUCKETS])
{
    if (!buckets)
        return; /* as tw_stats_get(s, NULL): nothing to fill */
    for (int b = 0; b < TW_LATENESS_BUCKETS; b++)
        buckets[b] = s ? tw__stripes_sum(s, offsetof(tw_stripe, lateness) +
                                          (size_t)b * sizeof(uint64_t))
                       : 0;
}

uint64_t tw_lateness_quantile(tw_service *s, double q)
{
    if (!(q > 0 && q <= 1))
        return UINT64_MAX; /* no such quantile (NaN included): documented */
    uint64_t h[TW_LATENESS_BUCKETS], total = 0;
    tw_lateness_histogram(s, h);
    for (int b = 0; b < TW_LATENESS_BUCKETS; b++)
        total += h[b];
    if (total == 0)
        return 0;
    uint64_t want = (uint64_t)(q * (double)total + 0.999999), seen = 0;
    for (int b = 0; b < TW_LATENESS_BUCKETS; b++) {
        seen += h[b];
        if (seen >= want)
            return tw__lateness_bucket_lo((uint32_t)b + 1) - 1;
    }
    return UINT64_MAX;
}

/* ---- create / destroy ------------------------------------------------------ */

static void service_free(tw_service *s)
{
    tw__pool_fini(s);
    tw__wake_fd_close(s);
    tw__defer_fini(s);
    tw__wheel_fini(&s->wheel);
    tw__records_fini(&s->rec);
    pthread_mutex_destroy(&s->drain_lock);
    pthread_mutex_destroy(&s->role_lock);
    pthread_mutex_destroy(&s->stop_lock);
    free(s);
}

int tw_create(const tw_config *cfg, tw_service **out)
{
    tw_config c;
    if (!out)
        return TW_EINVAL;
    if (cfg)
        c = *cfg;
    else
        tw_config_init(&c);
    if (!config_valid(&c))
        return TW_EINVAL;
    tw_service *s = aligned_alloc(TW_CACHELINE, sizeof *s);
    if (!s)
        return TW_ENOMEM;
    memset(s, 0, sizeof *s);
    s->cfg = c;
    s->max_delay = max_delay_of(c.tick_ns);
    s->tick_recip = tw__tick_recip(c.tick_ns);
    pthread_mutex_init(&s->drain_lock, NULL);
    pthread_mutex_init(&s->role_lock, NULL);
    pthread_mutex_init(&s->stop_lock, NULL);
    atomic_init(&s->role_wanted, 0);
    atomic_init(&s->role_lendable, 0);
    atomic_init(&s->role_lent, 0);
    atomic_init(&s->stop_state, TW_RUN);
    atomic_init(&s->manual_now, 0);
    atomic_init(&s->clock_state, 0);
    atomic_init(&s->cursor_starting, 0);
    atomic_init(&s->wake_fd, -1);
    atomic_init(&s->known_due, 0);
    tw__records_init(&s->rec);
    budget_init(s);
    if (tw__wheel_init(&s->wheel, c.wheel_slots, c.slot_capacity) != TW_OK) {
        service_free(s);
        return TW_ENOMEM;
    }
    bool threaded = c.clock == TW_CLOCK_MONOTONIC;
    tw__fence_setup(); /* before any callback runs (threads.c) */
    s->origin = threaded ? tw__clock_monotonic() : 0;
    if (threaded)
        tw__late_clock_start();
    int rc = tw__pool_start(s, threaded ? c.workers : 0);
    if (rc == TW_OK && threaded)
        rc = tw__cursor_start(s);
    if (rc != TW_OK) {
        tw__cursor_quit(s);
        tw__pool_quit(s);
        service_free(s);
        return rc;
    }
    *out = s;
    return TW_OK;
}

/* From a callback of s or from inside its tw_stop (on_pending) or
 * tw_advance, destroying s would free what the caller is running on: that
 * call is refused and does nothing (documented). So is one whose stop is
 * refused (TW_EDEADLK: from a callback of another service, its wait for
 * s's callbacks would close a cycle): s's callbacks still run, and freeing
 * s under them (as it did before 2026-11-28) was a use after free. */
void tw_destroy(tw_service *s)
{
    if (!s || tw__in_callback_of(s) || tw__holds(s))
        return;
    if (tw_stop(s, NULL) != TW_OK)
        return;
    service_free(s);
}

/* ---- schedule ---------------------------------------------------------------- */

/* The service's time since its origin: what deadlines are kept in. */
static uint64_t since_origin(const tw_service *s)
{
    return tw__clock_read(s) - s->origin;
}

/* now (since origin) + delay, or TW_ERANGE. */
static int deadline_after(const tw_service *s, uint64_t now, uint64_t delay,
                          uint64_t *deadline)
{
    if (delay > s->max_delay)
        return TW_ERANGE;
    /* now <= TW_CLOCK_MAX_NS and delay <= 2^63: the sum and one more tick
     * fit in 64 bits. */
    *deadline = now + delay;
    return TW_OK;
}

/* now + delay, now read on the late clock (clock.c): never early, and a
 * third of a schedule + cancel pair cheaper than clock_gettime. */
static int deadline_of(const tw_service *s, uint64_t delay, uint64_t *deadline)
{
    return deadline_after(s, tw__clock_read_late(s) - s->origin, delay, deadline);
}

/* An absolute deadline on the service's clock, since origin; one at or
 * before now is now (due at the next tick, as a delay of 0), or TW_ERANGE. */
static int deadline_at(const tw_service *s, uint64_t deadline_ns, uint64_t *deadline)
{
    uint64_t now = tw__clock_read(s);
    if (deadline_ns <= now) {
        *deadline = now - s->origin;
        return TW_OK;
    }
    return deadline_after(s, now - s->origin, deadline_ns - now, deadline);
}

/* Undo an arming that cannot complete: true if we took the timer back,
 * false if a cancel, the stop sweep or a run got it first (its fate is
 * settled and the arming stands). The handle is out already (*out), so a
 * reschedule may hold or have released a lease meanwhile: that changes the
 * word (flag, version) but not the fate, so we look again rather than
 * take a failed CAS for a lost race. A lease held now is ended the way a
 * cancel ends it (ZOMBIE: the holder frees the record). */
static bool take_back(tw_service *s, tw_record *rec, uint32_t idx, uint64_t st)
{
    uint32_t gen = tw__gen(st);
    for (;;) {
        if (tw__gen(st) != gen || tw__st(st) != TW_ST_PENDING)
            return false;
        bool leased = (st & TW_F_LEASE) != 0;
        uint64_t want = leased ? tw__with_st(st, TW_ST_ZOMBIE) : tw__rec_free_state(st);
        /* Acq_rel: one CAS decides between us and a cancel, the sweep or a
         * claim; acquire on failure reads what changed. */
        if (atomic_compare_exchange_weak_explicit(&rec->state, &st, want,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
    }
    if (!(st & TW_F_LEASE))
        tw__rec_push_free(&s->rec, idx);
    TW_COUNT(s, aborted, 1);
    tw__budget_give(s);
    return true;
}

/* The record is armed and PENDING: place it, unless stop came meanwhile. */
static int schedule_commit(tw_service *s, tw_record *rec, uint32_t idx, uint64_t st,
                           uint64_t deadline)
{
    if (tw__stopping(s))
        return take_back(s, rec, idx, st) ? TW_ESHUTDOWN : TW_OK;
    /* The record's current tag: a reschedule on the handle (already in
     * *out) may have bumped seq, then this entry is superseded at once. */
    uint64_t entry = tw__entry(tw__rec_tag(rec, st), idx);
    uint64_t tick = tw__tick_of(s, deadline);
    if (tw__defer_place(s, rec, entry, tick))
        return TW_OK; /* the cursor places it (defer.c) */
    if (tw__place(s, entry, tick) != TW_OK)
        return take_back(s, rec, idx, st) ? TW_ENOMEM : TW_OK;
    tw__pressure_count(s); /* placed by us: we pay for what we leave (wheel.c) */
    return TW_OK;
}

/* Arm a timer with its deadline (since origin) known; the caller checked
 * s, cb and the stop. */
static int schedule_deadline(tw_service *s, uint64_t deadline, uint64_t period,
                             tw_callback cb, void *arg, tw_timer *out)
{
    int rc;
    uint32_t idx;
    uint64_t st;
    tw_record *rec;
    (void)tw__stripe(s); /* a thread's first call: its stripe decides its magazine */
    rc = budget_take(s);
    if (rc != TW_OK)
        return rc;
    rc = tw__rec_alloc(&s->rec, &idx, &rec, &st);
    if (rc != TW_OK) {
        tw__budget_give(s);
        return rc;
    }
    if (period) {
        tw_periodic *p = tw__periodic(&s->rec, idx, true);
        if (!p) {
            tw__rec_push_free(&s->rec, idx); /* still FREE and ours */
            tw__budget_give(s);
            return TW_ENOMEM;
        }
        /* Relaxed: published by the release store of the state below. */
        atomic_store_explicit(&p->period, period, memory_order_relaxed);
    }
    /* Relaxed (cb, arg, deadline): published by the release store of the
     * state below. */
    atomic_store_explicit(&rec->cb, cb, memory_order_relaxed);
    atomic_store_explicit(&rec->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&rec->deadline, deadline, memory_order_relaxed);
    st = (st & ~0xffffffffull) | TW_ST_PENDING | (period ? TW_F_PERIODIC : 0);
    tw_timer h = tw__handle(tw__gen(st), idx);
    if (out)
        *out = h;
    TW_COUNT(s, armed, 1);
    /* Release: publishes the record. The store-load order of the stop
     * pairing (see top) against schedule_commit's look at the stop comes
     * from the asymmetric fence: tw_stop makes every thread execute a full
     * barrier after its announcement (tw__fence_heavy, threads.c). A
     * seq_cst store here was an exchange, a locked instruction on every
     * arming for a call made once. */
    atomic_store_explicit(&rec->state, st, memory_order_release);
    tw__fence_light();
    rc = schedule_commit(s, rec, idx, st, deadline);
    if (rc != TW_OK) {
        if (out)
            *out = 0;
        return rc;
    }
    return TW_OK;
}

static int schedule_common(tw_service *s, uint64_t delay, uint64_t period,
                           tw_callback cb, void *arg, tw_timer *out)
{
    if (!s || !cb)
        return TW_EINVAL;
    if (tw__stopping(s))
        return TW_ESHUTDOWN;
    uint64_t deadline;
    int rc = deadline_of(s, delay, &deadline);
    if (rc != TW_OK)
        return rc;
    return schedule_deadline(s, deadline, period, cb, arg, out);
}

int tw_schedule(tw_service *s, uint64_t delay_ns, tw_callback cb, void *arg, tw_timer *out)
{
    return schedule_common(s, delay_ns, 0, cb, arg, out);
}

int tw_schedule_at(tw_service *s, uint64_t deadline_ns, tw_callback cb, void *arg,
                   tw_timer *out)
{
    if (!s || !cb)
        return TW_EINVAL;
    if (tw__stopping(s))
        return TW_ESHUTDOWN;
    uint64_t deadline;
    int rc = deadline_at(s, deadline_ns, &deadline);
    if (rc != TW_OK)
        return rc;
    return schedule_deadline(s, deadline, 0, cb, arg, out);
}

/* One clock reading for the batch (the contract), then each element as
 * tw_schedule arms it; the first failure ends the batch. */
int tw_schedule_many(tw_service *s, size_t n, const uint64_t *delays_ns, tw_callback cb,
                     void *const *args, tw_timer *out)
{
    if (!s || !cb || (n > 0 && !delays_ns) || n > INT_MAX)
        return TW_EINVAL;
    if (n == 0)
        return 0;
    if (tw__stopping(s)) {
        if (out)
            memset(out, 0, n * sizeof *out);
        return TW_ESHUTDOWN;
    }
    uint64_t now = since_origin(s);
    for (size_t i = 0; i < n; i++) {
        uint64_t deadline;
        int rc = deadline_after(s, now, delays_ns[i], &deadline);
        if (rc == TW_OK)
            rc = schedule_deadline(s, deadline, 0, cb, args ? args[i] : NULL,
                                   out ? &out[i] : NULL);
        if (rc != TW_OK) {
            if (out)
                memset(out + i, 0, (n - i) * sizeof *out);
            return i > 0 ? (int)i : rc;
        }
    }
    return (int)n;
}

int tw_schedule_every(tw_service *s, uint64_t first_delay_ns, uint64_t period_ns,
                      tw_callback cb, void *arg, tw_timer *out)
{
    if (!s || !cb || period_ns == 0)
        return TW_EINVAL; /* bad arguments first, as tw_schedule answers them */
    if (period_ns > s->max_delay)
        return TW_ERANGE;
    return schedule_common(s, first_delay_ns, period_ns, cb, arg, out);
}

/* ---- cancel ------------------------------------------------------------------ */

/* The CAS a cancel makes from state st, or 0 if cancel must answer ENOENT. */
static uint64_t cancel_target(uint64_t st)
{
    switch (tw__st(st)) {
    case TW_ST_PENDING:
        if (st & TW_F_LEASE)
            return tw__with_st(st, TW_ST_ZOMBIE); /* the lease holder frees it */
        return tw__rec_free_state(st);
    case TW_ST_FIRING:
        return tw__rec_free_state(st);
    case TW_ST_RUNNING:
        if (!(st & TW_F_PERIODIC) || (st & TW_F_CANCELREQ))
            return 0;
        return st | TW_F_CANCELREQ; /* no further runs */
    default:
        return 0;
    }
}

static int cancel_record(tw_service *s, tw_record *rec, tw_timer t)
{
    /* Acquire: the state as its last writer left it. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    uint64_t want;
    for (;;) {
        if (tw__gen(st) != tw__handle_gen(t))
            return TW_ENOENT;
        want = cancel_target(st);
        if (!want) {
            tw__count_rare(s, TW_RARE_CANCEL_LOST);
            return TW_ENOENT;
        }
        TW_INJECT(TW_INJ_STATE_CAS);
        /* Seq_cst: the cancel races the claim, the run, the sweep; one CAS
         * on this word decides, and cancel_sync's wait follows it. */
        if (atomic_compare_exchange_weak_explicit(&rec->state, &st, want,
                                                  memory_order_seq_cst,
                                                  memory_order_acquire))
            break;
    }
    if (tw__st(want) == TW_ST_FREE)
        tw__rec_push_free(&s->rec, tw__handle_idx(t));
    if (tw__st(st) == TW_ST_FIRING)
        TW_COUNT(s, firing_left, 1); /* a claim that will not run (wheel.c) */
    /* A periodic timer cancelled during its run is counted as cancelled
     * when its run returns (whoever frees it: workers.c finish_periodic,
     * move_running), so that it leaves stats.pending when it leaves the
     * runs in progress: tw_next_due counts pending less running, and a
     * cancel counted at once took such a timer off twice until the run
     * returned (a far timer beside it vanished: UINT64_MAX; a review). */
    if (tw__st(st) != TW_ST_RUNNING)
        TW_COUNT(s, cancelled, 1);
    tw__budget_give(s);
    return TW_OK;
}

/* The rest of a cancel that took a pending timer (no lease) to FREE: the
 * record into the magazine, the count, the unit of max_timers, as
 * cancel_record does them, with one look at the thread's stripe.
 *
 * Why apart and lean: a cancel in random order waits for its record's
 * cache miss, and what the core can do meanwhile is start the next
 * cancels' misses; the instructions behind the wait fill its reorder
 * window and decide how many (WL2, 1M pending, AMD guest: 45-50 ns a
 * cancel with load and CAS alone, 85-95 ns with cancel_record's general
 * path around them; this one gained 1.05x at 1M and 1.02x at 10M, medians
 * of farm-bench pairs of twbench, 2026-11-28).
 *
 * Why it leaves the rarer cases (no owned stripe, a real fence, a
 * magazine being emptied or full, a give's look for a block to hand back)
 * to cancel_freed_rest, in one cold call: every call those make stays out
 * of tw_cancel, whose common path is then a leaf that keeps no frame (ten
 * instructions fewer a cancel: WL2 1M's cancels 1.16x with the defaults,
 * 1.01x configured, medians of 9 farm-bench pairs of twbench against
 * 981364e; 7-8% both ways in a loop of tw_cancel alone, 2026-11-29; the
 * look moved there too with 0ac8391). The thread's stripe and what else
 * the path asks are one thread-local word (tw__stripe_lean, internal.h). */
enum {
    CANCEL_DONE, /* nothing left */
    CANCEL_REST, /* everything but the state's CAS, by the general calls */
    CANCEL_LOOK, /* the give's look for a block to hand back */
};

static inline int cancel_freed(tw_service *s, const tw_record *rec, uint32_t idx)
{
    uint32_t lean = tw__stripe_lean; /* one load for all of it (internal.h) */
    if (__builtin_expect(lean & TW_LEAN_SLOW, 0))
        return CANCEL_REST;
    uint32_t mine = lean & TW_LEAN_STRIPE;
    if (__builtin_expect(lean & TW_LEAN_FORGETS, 0))
        tw__defer_forget(s, mine, rec, idx);
    tw_magazine *m = &s->rec.mag[mine];
    if (__builtin_expect(!tw__mag_enter_at(m, false), 0))
        return CANCEL_REST;
    uint32_t n = m->n;
    if (__builtin_expect(n >= TW_MAGAZINE, 0)) {
        tw__mag_leave(m);
        return CANCEL_REST;
    }
    m->idx[n] = idx; /* FREE already; ours until we hand it out */
    m->n = n + 1;
    tw__mag_leave(m);
    tw_stripe *st = &s->stripe[mine];
    tw__count_add_owned(&st->cancelled, 1, true);
    int64_t block = s->budget_block; /* 0: no cap (budget_capped), one load for both */
    if (__builtin_expect(block != 0, 0) &&
        tw__budget_looks(tw__budget_give_unit(&st->budget, true), block))
        return CANCEL_LOOK;
    return CANCEL_DONE;
}

/* What cancel_freed left (one cold call, so that its common path keeps no
 * frame): the look for a block to hand back, or the same three steps
 * through the general calls (a full magazine hands half of itself over,
 * tw__rec_push_free_many). */
__attribute__((noinline, cold)) static void cancel_freed_rest(tw_service *s, uint32_t idx,
                                                              int left)
{
    if (left == CANCEL_LOOK) {
        tw_budget_acct *a = &s->stripe[tw__stripe_mine].budget;
        /* Relaxed: our own word, as the give left it. */
        tw__budget_look(s, a, atomic_load_explicit(&a->given, memory_order_relaxed),
                        s->budget_block);
        return;
    }
    tw__rec_push_free(&s->rec, idx);
    TW_COUNT(s, cancelled, 1);
    tw__budget_give(s);
}

int tw_cancel(tw_service *s, tw_timer t)
{
    if (!s)
        return TW_EINVAL;
    tw_record *rec = tw__rec_of(&s->rec, t);
    if (!rec)
        return TW_ENOENT;
    /* The common case first: a pending timer without a lease, one CAS.
     * Anything else (a lease, a claim, a run, a lost race) takes
     * cancel_record, which reads the state again. Acquire: the state as
     * its last writer left it. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    if (__builtin_expect(tw__gen(st) == tw__handle_gen(t) && tw__st(st) == TW_ST_PENDING &&
                         !(st & TW_F_LEASE), 1)) {
        TW_INJECT(TW_INJ_STATE_CAS);
        /* Seq_cst: as cancel_record's CAS (the one word decides). */
        if (__builtin_expect(atomic_compare_exchange_strong_explicit(
                                 &rec->state, &st, tw__rec_free_state(st),
                                 memory_order_seq_cst, memory_order_acquire), 1)) {
            int left = cancel_freed(s, rec, tw__handle_idx(t));
            if (__builtin_expect(left != CANCEL_DONE, 0))
                cancel_freed_rest(s, tw__handle_idx(t), left);
            return TW_OK;
        }
    }
    return cancel_record(s, rec, t);
}

/* Each handle as tw_cancel does it; the records a few places ahead are
 * fetched meanwhile (a batch's records are usually far apart). */
#define CANCEL_AHEAD 4

int tw_cancel_many(tw_service *s, size_t n, const tw_timer *handles, int *rcs)
{
    if (!s || (n > 0 && !handles) || n > INT_MAX)
        return TW_EINVAL;
    int ok = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + CANCEL_AHEAD < n) {
            tw_record *ahead = tw__rec_of(&s->rec, handles[i + CANCEL_AHEAD]);
            if (ahead)
                tw__prefetch_for_write(ahead);
        }
        int rc = tw_cancel(s, handles[i]);
        if (rcs)
            rcs[i] = rc;
        ok += rc == TW_OK;
    }
    return ok;
}

/* The wait may close a cycle through other callbacks (threads.c): then
 * TW_EDEADLK, before the cancel, so nothing is done. */
int tw_cancel_sync(tw_service *s, tw_timer t)
{
    if (!s)
        return TW_EINVAL;
    if (tw__in_callback(s, t))
        return TW_EDEADLK;
    tw_record *rec = tw__rec_of(&s->rec, t);
    if (!rec)
        return TW_ENOENT;
    tw_wait_saved outer;
    int rc = tw__wait_begin(s, TW_WAIT_TIMER, t, &outer);
    if (rc != TW_OK)
        return rc;
    rc = cancel_record(s, rec, t);
    tw__wait_not_running(s, rec, tw__handle_idx(t), tw__handle_gen(t));
    tw__wait_end(&outer);
    return rc;
}

/* ---- reschedule -------------------------------------------------------------- */

/* We hold the lease of a RUNNING periodic timer and wrote its next deadline. */
static int move_running(tw_service *s, tw_record *rec, uint32_t idx, uint64_t deadline)
{
    /* Acquire: the runner's DONE, a cancel's request, a stop's mark. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    for (;;) {
        uint64_t want;
        if (tw__st(st) == TW_ST_ZOMBIE || ((st & TW_F_CANCELREQ) && (st & TW_F_DONE)))
            want = tw__rec_free_state(st);              /* ended: we free it */
        else if (st & TW_F_CANCELREQ)
            want = st & ~(uint64_t)TW_F_LEASE;          /* the runner frees it */
        else if (st & TW_F_DONE)                        /* run over: we re-arm */
            want = tw__with_st(st & ~(uint64_t)(TW_F_DONE | TW_F_MOVED), TW_ST_PENDING);
        else                                            /* the runner re-arms */
            want = tw__ver_bump(st & ~(uint64_t)TW_F_LEASE) | TW_F_MOVED;
        /* Seq_cst: ends our part in the run's hand-over; waiters see it. */
        if (!atomic_compare_exchange_weak_explicit(&rec->state, &st, want,
                                                   memory_order_seq_cst,
                                                   memory_order_acquire))
            continue;
        if (tw__st(want) == TW_ST_FREE) {
            if (tw__st(st) == TW_ST_RUNNING && (st & TW_F_CANCELREQ))
                TW_COUNT(s, cancelled, 1); /* cancelled during its run (cancel_record) */
            tw__rec_push_free(&s->rec, idx);
            return TW_ENOENT;
        }
        if (st & TW_F_CANCELREQ)
            return TW_ENOENT;
        if (tw__st(want) == TW_ST_PENDING)
            return tw__lease_publish(s, rec, idx, true, tw__tick_of(s, deadline));
        return TW_OK;
    }
}

/* We hold the lease of a PENDING timer: write the deadline, release. */
static int move_pending(tw_service *s, tw_record *rec, uint32_t idx, uint64_t deadline,
                        bool taken_back)
{
    /* Relaxed: we own the deadline word under the lease. The release fence
     * keeps the new deadline after the lease CAS for a runner that reads
     * the deadline of a FIRING timer and then the state again (workers.c,
     * claim_run): if it sees the new deadline, it sees the state moved. */
    uint64_t old = atomic_load_explicit(&rec->deadline, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&rec->deadline, deadline, memory_order_relaxed);
    uint64_t tick = tw__tick_of(s, deadline);
    /* Later: the entry it has (at or before the old tick) re-places it when
     * met. Earlier, or taken back from the run list: place it now. */
    bool place = taken_back || tick < tw__tick_of(s, old);
    int rc = tw__lease_publish(s, rec, idx, place, tick);
    if (place)
        tw__pressure_count(s); /* as schedule_commit's */
    return rc;
}

/* The runner's re-arm holds the lease (PENDING|LEASE|DONE). It is not a
 * move we could be ordered before (the run's end would then override
 * us), so we take the re-arm over without waiting for it:
 *   1. claim it: CAS in MOVED (a version bump fails a re-arm that read
 *      the state before). A claim already there and not yet delivered is
 *      a move that will land: we are ordered just before it (TW_OK);
 *   2. store our deadline in tw_periodic.handed, then CAS in HANDED: the
 *      re-arm, which re-reads the state before it opens the lease, takes
 *      it (tw__lease_publish);
 *   3. if instead the re-arm found our claim undelivered, it left the
 *      lease to us (DONE cleared): we write the deadline and publish.
 * Only a claimant stores into `handed`, after its claim changed the
 * state, so a re-arm never applies a deadline whose reschedule then
 * fails or moves again.
 *
 * A cancel or the stop may end the timer (ZOMBIE) between our claim and
 * our store. The record must then outlive the store: freed at once and
 * reused, it would take our deadline as another timer's handed one (a
 * review found it, 2026-11-28: a stale reschedule moved the next timer of
 * the record 970 ms early). So of the re-arm and us, the second to meet
 * the ZOMBIE frees it: the first leaves its mark, the re-arm by clearing
 * DONE (tw__lease_publish), we by setting HANDED, which says we are done
 * with the record. Returns true with *rc when done, false to look again
 * at *st. */
void (*_Atomic tw__handover_claimed_hook)(void); /* tests (internal.h) */

static void handover_claimed_hook(void)
{
    /* Relaxed: set before the service runs; a pointer to code, no data. */
    void (*hook)(void) = atomic_load_explicit(&tw__handover_claimed_hook,
                                              memory_order_relaxed);
    if (__builtin_expect(hook != NULL, 0))
        hook();
}

static bool hand_over(tw_service *s, tw_record *rec, uint32_t idx, uint64_t *st,
                      uint64_t deadline, int *rc)
{
    if ((*st & TW_F_MOVED) && !(*st & TW_F_HANDED)) {
        *rc = TW_OK;
        return true;
    }
    uint32_t gen = tw__gen(*st);
    uint64_t claimed = tw__ver_bump(*st & ~(uint64_t)TW_F_HANDED) | TW_F_MOVED;
    /* Acquire on success: the re-arm's deadline store (if it leaves us the
     * lease, its release CAS orders it before ours). */
    if (!atomic_compare_exchange_weak_explicit(&rec->state, st, claimed,
                                               memory_order_acq_rel,
                                               memory_order_acquire))
        return false;
    *st = claimed;
    handover_claimed_hook();
    /* Relaxed: published by the release CAS below. */
    atomic_store_explicit(&tw__periodic(&s->rec, idx, false)->handed, deadline,
                          memory_order_relaxed);
    for (;;) {
        if (tw__gen(*st) != gen) {
            /* Freed: not while we can still be here (the re-arm frees a
             * ZOMBIE only once we set HANDED, below, or leaves the free to
             * us), but if so, the record may be another timer's by now:
             * touch nothing. */
            *rc = TW_ENOENT;
            return true;
        }
        if (!(*st & TW_F_DONE)) {
            /* The re-arm left us the lease (or a cancel or the stop then
             * made it ZOMBIE: the publish frees it). We own the deadline. */
            if (tw__st(*st) == TW_ST_PENDING)
                atomic_store_explicit(&rec->deadline, deadline, memory_order_relaxed);
            tw__count_rare(s, TW_RARE_HANDED_OVER);
            *rc = tw__lease_publish(s, rec, idx, true, tw__tick_of(s, deadline));
            return true;
        }
        if (tw__st(*st) == TW_ST_ZOMBIE) {
            /* Ended under the re-arm, which has not met it yet: it frees
             * the record when it does, once HANDED says we are done with
             * it. Release: our store to `handed` before that free. */
            if (atomic_compare_exchange_weak_explicit(&rec->state, st,
                                                      tw__ver_bump(*st) | TW_F_HANDED,
                                                      memory_order_release,
                                                      memory_order_acquire)) {
                *rc = TW_ENOENT;
                return true;
            }
            continue;
        }
        /* Release: the re-arm's acquire of the state sees `handed`. */
        if (atomic_compare_exchange_weak_explicit(&rec->state, st,
                                                  tw__ver_bump(*st) | TW_F_HANDED,
                                                  memory_order_release,
                                                  memory_order_acquire)) {
            tw__count_rare(s, TW_RARE_HANDED_OVER);
            *rc = TW_OK;
            return true;
        }
        /* Failed (the state moved, or spuriously: weak CAS): look again. */
    }
}

static int reschedule_record(tw_service *s, tw_record *rec, tw_timer t, uint64_t deadline)
{
    uint32_t idx = tw__handle_idx(t);
    /* Acquire: the state as its last writer left it. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    for (;;) {
        if (tw__gen(st) != tw__handle_gen(t))
            return TW_ENOENT;
        uint32_t kind = tw__st(st);
        bool movable = kind == TW_ST_PENDING || kind == TW_ST_FIRING ||
                       (kind == TW_ST_RUNNING && (st & TW_F_PERIODIC) &&
                        !(st & TW_F_CANCELREQ));
        if (!movable)
            return TW_ENOENT;
        if (st & TW_F_LEASE) {
            if (kind != TW_ST_PENDING || !(st & TW_F_DONE))
                return TW_OK; /* overtaken: ordered just before the holder's move */
            int rc;
            if (hand_over(s, rec, idx, &st, deadline, &rc))
                return rc;
            continue;
        }
        uint64_t want = kind == TW_ST_RUNNING
            ? st | TW_F_LEASE
            : tw__with_st(st, TW_ST_PENDING) | TW_F_LEASE;
        TW_INJECT(TW_INJ_STATE_CAS);
        /* Acquire on success: we own the deadline word from here (the lease
         * release publishes what we write). */
        if (atomic_compare_exchange_weak_explicit(&rec->state, &st, want,
                                                  memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
    }
    if (tw__st(st) == TW_ST_RUNNING) {
        atomic_store_explicit(&rec->deadline, deadline, memory_order_relaxed);
        return move_running(s, rec, idx, deadline);
    }
    if (tw__st(st) == TW_ST_FIRING) {
        tw__count_rare(s, TW_RARE_RESCHED_FIRING);
        TW_COUNT(s, firing_left, 1); /* taken back from its claim (wheel.c) */
    }
    return move_pending(s, rec, idx, deadline, tw__st(st) == TW_ST_FIRING);
}

/* A move CASes the state word (the lease, then its release) and stores the
 * deadline, which for a record in four (40-byte records) lies on the next
 * line: both lines come in for writing at once, not one after the other
 * (tw__prefetch_for_write; WL6's touches, the AMD guest with hand-offs of
 * 420 ns between its CPUs: 23.3M to 26.5M a second, 2026-11-29). */
static void prefetch_move(tw_record *rec)
{
    tw__prefetch_for_write(&rec->state);
    tw__prefetch_for_write(&rec->deadline);
}

/* The record of handle t, its lines asked for: they come in while the
 * caller reads the clock (WL6 on the Intel guest: the record's first load
 * was 63% of a touch, the clock's TSC read 12%, one after the other). */
static tw_record *record_to_move(tw_service *s, tw_timer t)
{
    tw_record *rec = tw__rec_of(&s->rec, t);
    if (rec)
        prefetch_move(rec);
    return rec;
}

static int reschedule_to(tw_service *s, tw_record *rec, tw_timer t, uint64_t deadline)
{
    int rc = rec ? reschedule_record(s, rec, t, deadline) : TW_ENOENT;
    if (rc == TW_OK)
        TW_COUNT(s, rescheduled, 1);
    return rc;
}

int tw_reschedule(tw_service *s, tw_timer t, uint64_t delay_ns)
{
    if (!s)
        return TW_EINVAL;
    if (tw__stopping(s))
        return TW_ESHUTDOWN;
    tw_record *rec = record_to_move(s, t);
    uint64_t deadline;
    int rc = deadline_of(s, delay_ns, &deadline);
    return rc == TW_OK ? reschedule_to(s, rec, t, deadline) : rc;
}

int tw_reschedule_at(tw_service *s, tw_timer t, uint64_t deadline_ns)
{
    if (!s)
        return TW_EINVAL;
    if (tw__stopping(s))
        return TW_ESHUTDOWN;
    tw_record *rec = record_to_move(s, t);
    uint64_t deadline;
    int rc = deadline_at(s, deadline_ns, &deadline);
    return rc == TW_OK ? reschedule_to(s, rec, t, deadline) : rc;
}

/* ---- the MANUAL clock -------------------------------------------------------- */

int tw_advance(tw_service *s, uint64_t now_ns)
{
    if (!s || s->cfg.clock != TW_CLOCK_MANUAL)
        return TW_EINVAL;
    if (tw__in_callback_of(s) || tw__holds(s))
        return TW_EDEADLK; /* from its callback, its on_pending, inside itself */
    if (tw__stopping(s))
        return TW_ESHUTDOWN;
    /* Another thread's tw_advance of s may hold the lock, and a callback it
     * runs may wait for ours (threads.c). */
    tw_wait_saved outer;
    int wrc = tw__wait_begin(s, TW_WAIT_DRAIN, 0, &outer);
    if (wrc != TW_OK)
        return wrc;
    pthread_mutex_lock(&s->drain_lock);
    tw__wait_end(&outer);
    int rc = TW_OK;
    /* Relaxed: the drain lock orders the advancing threads. */
    if (tw__stopping(s))
        rc = TW_ESHUTDOWN;
    else if (now_ns < atomic_load_explicit(&s->manual_now, memory_order_relaxed) ||
             now_ns > TW_CLOCK_MAX_NS)
        rc = TW_EINVAL;
    if (rc == TW_OK) {
        /* Release: a thread that reads the new time sees what we did before. */
        atomic_store_explicit(&s->manual_now, now_ns, memory_order_release);
        tw_hold held;
        tw__hold(s, &held);
        tw__wheel_step(s, tw__tick_floor(s, now_ns));
        tw__deliver(s);
        tw__wheel_maintain(s);
        /* now_ns is the clock's reading (manual_now, stored above under
         * the drain lock). No cursor comes back for the trim: the next
         * advance does. */
        tw__wheel_trim(s, now_ns);
        /* With nothing left pending, tw_next_due answers UINT64_MAX and an
         * event loop may never advance again: what the drains detached
         * would wait for good (a review: 8 MiB of a million-timer burst's
         * segments). So free it now rather than at a later step. */
        if (tw__pending_due(s) == 0)
            (void)tw__seg_settle(s);
        tw__unhold(&held);
    }
    pthread_mutex_unlock(&s->drain_lock);
    return rc;
}

uint64_t tw_now(const tw_service *s)
{
    return s ? tw__clock_read(s) : 0;
}

/* ---- introspection ----------------------------------------------------------- */

/* Record idx's timer, if it is pending: a one-shot PENDING or FIRING; a
 * periodic timer in any of those, or RUNNING and not cancelled. The fields
 * are read between two loads of the state word (the seqlock pattern): cb,
 * arg and the period are written once per arming, before the state that
 * publishes it; the deadline word changes only under a lease, whose taking
 * and release both change the word (flag, version). So if both loads show
 * the same word, with no lease held, every field read belongs to that
 * state. A lease is held for a few instructions (a move, a periodic
 * re-arm): we look again until it is released; a word that changed is
 * looked at afresh. */
static bool pending_info(tw_service *s, uint32_t idx, tw_timer_info *info)
{
    tw_record *rec = tw__rec(&s->rec, idx);
    if (!rec)
        return false;
    /* Acquire: the arming that published cb, arg, the period, and the
     * lease release that published the deadline. */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_acquire);
    for (unsigned step = 0;; step++) {
        uint32_t kind = tw__st(st);
        bool periodic = (st & TW_F_PERIODIC) != 0;
        bool live = kind == TW_ST_PENDING || kind == TW_ST_FIRING ||
                    (kind == TW_ST_RUNNING && periodic && !(st & TW_F_CANCELREQ));
        if (!live)
            return false; /* ended (before, or during the call: not reported) */
        if (!(st & TW_F_LEASE)) {
            /* Relaxed, all four: ordered by the acquire above and the
             * fence below. */
            info->cb = atomic_load_explicit(&rec->cb, memory_order_relaxed);
            info->arg = atomic_load_explicit(&rec->arg, memory_order_relaxed);
            uint64_t deadline = atomic_load_explicit(&rec->deadline, memory_order_relaxed);
            info->period_ns = periodic ? tw__period_of(&s->rec, idx) : 0;
            /* Acquire fence, then the word again (seqlock). */
            atomic_thread_fence(memory_order_acquire);
            uint64_t again = atomic_load_explicit(&rec->state, memory_order_relaxed);
            if (again == st) {
                /* A run in progress: the next run is where a reschedule
                 * moved it (MOVED), else the next on its grid (a run that
                 * overruns may skip it later). */
                if (kind == TW_ST_RUNNING && !(st & TW_F_MOVED))
                    deadline += info->period_ns;
                info->timer = tw__handle(tw__gen(st), idx);
                info->deadline_ns = s->origin + deadline;
                return true;
            }
            st = again;
            continue;
        }
        tw__wait_step(step); /* a lease is held for a few instructions */
        /* Acquire: as above. */
        st = atomic_load_explicit(&rec->state, memory_order_acquire);
    }
}

size_t tw_foreach_pending(tw_service *s, void (*fn)(const tw_timer_info *info, void *ctx),
                          void *ctx)
{
    if (!s || !fn || tw__in_callback_of(s))
        return 0; /* from a callback of s: documented, nothing called */
    size_t calls = 0;
    uint32_t high = tw__records_high(&s->rec);
    for (uint32_t idx = 0; idx < high; idx++) {
        tw_timer_info info;
        if (pending_info(s, idx, &info)) {
            fn(&info, ctx);
            calls++;
        }
    }
    return calls;
}

/* ---- stop -------------------------------------------------------------------- */

/* What drop_record did with a record. */
enum { DROP_DONE, DROP_AGAIN, DROP_RUNNING };

/* Hand one never-started timer to on_pending, or leave it to its lease
 * holder's free. A running one is waited for if `wait` (then looked at
 * again: DROP_AGAIN), else left (DROP_RUNNING). DROP_AGAIN: a CAS lost
 * to a runner, a cancel or a move; look again. */
static int drop_record(tw_service *s, uint32_t idx, tw_callback on_pending, bool wait)
{
    tw_record *rec = tw__rec(&s->rec, idx);
    if (!rec)
        return DROP_DONE;
    /* Seq_cst: the sweep's loads pair with the producers' seq_cst PENDING
     * stores (see top). */
    uint64_t st = atomic_load_explicit(&rec->state, memory_order_seq_cst);
    uint32_t kind = tw__st(st);
    bool leased = (st & TW_F_LEASE) != 0;
    if (kind == TW_ST_FREE || kind == TW_ST_ZOMBIE)
        return DROP_DONE;
    if (kind == TW_ST_RUNNING && !(leased && (st & TW_F_DONE))) {
        if (!wait)
            return DROP_RUNNING;
        tw__wait_not_running(s, rec, idx, tw__gen(st));
        return DROP_AGAIN; /* look again: it may have been re-armed */
    }
    if (kind == TW_ST_RUNNING && (st & TW_F_CANCELREQ))
        return DROP_DONE; /* cancelled periodic, run over: its lease holder frees it */
    uint64_t want = leased ? tw__with_st(st, TW_ST_ZOMBIE) : tw__rec_free_state(st);
    /* Read before the CAS: once a leased record is ZOMBIE its lease holder
     * may free it, and a producer that passed its stop check may reuse it.
     * If the CAS succeeds, nothing changed since the load, so this is the
     * timer's arg (atomic: a losing CAS may have raced a new owner). */
    void *arg = atomic_load_explicit(&rec->arg, memory_order_relaxed);
    /* Seq_cst: as the load above; fails if a runner, cancel or move won. */
    if (!atomic_compare_exchange_strong_explicit(&rec->state, &st, want,
                                                 memory_order_seq_cst,
                                                 memory_order_seq_cst))
        return DROP_AGAIN;
    if (kind == TW_ST_FIRING)
        TW_COUNT(s, firing_left, 1); /* a claim that will not run (wheel.c) */
    TW_COUNT(s, dropped, 1);
    tw__budget_give(s);
    if (on_pending)
        on_pending(tw__handle(tw__gen(st), idx), arg);
    if (!leased)
        tw__rec_push_free(&s->rec, idx);
    return DROP_DONE;
}

/* Two passes. The first drops every timer that is not running and passes
 * the running ones by; the second waits for each of those and drops what
 * it re-armed. One pass that waited at each running record in index order
 * let a worker run the rest of its batch: when a callback ended, the
 * worker claimed the next timer microseconds before the woken sweep got
 * there, so tw_stop ran every claimed timer instead of dropping it
 * (test_overload saturated_worker: 100 timers of 20 ms on one worker, and
 * tw_stop took 2 s and dropped none). The cursor has quit and producers
 * are refused, so after the first pass no timer becomes FIRING again. */
static void sweep(tw_service *s, tw_callback on_pending)
{
    uint32_t high = tw__records_high(&s->rec);
    bool running = false;
    for (uint32_t idx = 0; idx < high; idx++) {
        int r;
        while ((r = drop_record(s, idx, on_pending, false)) == DROP_AGAIN) {
        }
        running |= r == DROP_RUNNING;
    }
    for (uint32_t idx = 0; running && idx < high; idx++) {
        while (drop_record(s, idx, on_pending, true) != DROP_DONE) {
        }
    }
}

/* TW_EDEADLK from a callback of s, from on_pending (the stopping thread's
 * own call inside tw_stop), and when waiting for s's callbacks would close
 * a cycle through other callbacks (threads.c): nothing is done then. */
int tw_stop(tw_service *s, tw_callback on_pending)
{
    if (!s)
        return TW_EINVAL;
    if (tw__in_callback_of(s) || tw__holds(s))
        return TW_EDEADLK;
    tw_wait_saved outer;
    int wrc = tw__wait_begin(s, TW_WAIT_CALLBACKS, 0, &outer);
    if (wrc != TW_OK)
        return wrc;
    pthread_mutex_lock(&s->stop_lock);
    /* Relaxed: stop_lock orders the stoppers. */
    if (atomic_load_explicit(&s->stop_state, memory_order_relaxed) == TW_STOPPED) {
        pthread_mutex_unlock(&s->stop_lock);
        tw__wait_end(&outer);
        return TW_OK;
    }
    tw_hold held;
    tw__hold(s, &held); /* on_pending runs inside it */
    /* Seq_cst: the stop's half of the pairing with producers (see top);
     * then every thread executes a full barrier (schedule_deadline's side
     * is a compiler barrier only), before the sweep reads any record. */
    atomic_store_explicit(&s->stop_state, TW_STOPPING, memory_order_seq_cst);
    tw__fence_heavy();
    tw__pool_stopping(s); /* runners waiting for a deadline give it up */
    tw__cursor_quit(s);
    pthread_mutex_lock(&s->drain_lock); /* waits out a running tw_advance */
    sweep(s, on_pending);
    tw__pool_quit(s);
    atomic_store_explicit(&s->stop_state, TW_STOPPED, memory_order_seq_cst);
    pthread_mutex_unlock(&s->drain_lock);
    pthread_mutex_unlock(&s->stop_lock);
    tw__unhold(&held);
    tw__wait_end(&outer);
    return TW_OK;
}
