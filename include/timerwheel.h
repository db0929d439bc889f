/*
 * timerwheel: a lock-free, multi-producer timer service.
 *
 * Millions of timeouts armed, cancelled and pushed back from any thread at
 * once; a hierarchical timing wheel (after Varghese and Lauck) ticked by one
 * cursor, due timers run by a pool of workers. Never early; at most one tick
 * late unless callbacks or the machine are overloaded.
 *
 * Errors. Every int-returning call returns 0 (TW_OK) or one negative code of
 * the enum below; tw_strerror names it. A call that returns an error has done
 * nothing: it armed nothing, cancelled nothing, moved nothing, and no
 * callback runs because of it.
 *
 * What may run concurrently with what (one service):
 *
 *   call                 | any thread | inside a callback | concurrently with
 *   ---------------------+------------+-------------------+---------------------------
 *   tw_schedule(_every,  | yes        | yes               | everything but tw_destroy
 *     _at, _many)        |            |                   |
 *   tw_reschedule(_at)   | yes        | yes (own timer ok)| everything but tw_destroy
 *   tw_cancel(_many)     | yes        | yes (own timer ok)| everything but tw_destroy
 *   tw_cancel_sync       | yes        | yes, not on its   | everything but tw_destroy
 *                        |            | own timer (EDEADLK)|
 *   tw_advance (MANUAL)  | yes        | no (EDEADLK)      | everything; two advances
 *                        |            |                   | run one after the other
 *   tw_now, tw_stats_get,| yes        | yes               | everything but tw_destroy
 *   tw_next_due,         |            |                   |
 *   tw_wake_fd           |            |                   |
 *   tw_pause, tw_resume  | yes        | yes (no wait for  | everything but tw_destroy
 *     (MONOTONIC)        |            | running callbacks)|
 *   tw_foreach_pending   | yes        | no (returns 0)    | everything but tw_destroy
 *   tw_stop              | yes        | no (EDEADLK), nor | everything but tw_destroy
 *                        |            | from on_pending   |
 *   tw_destroy           | yes        | no (ignored)      | nothing: the caller makes
 *                        |            |                   | sure no other call is made
 *
 * Progress. tw_schedule, tw_schedule_every, tw_schedule_at, tw_schedule_many,
 * tw_reschedule, tw_reschedule_at, tw_cancel, tw_cancel_many and tw_next_due
 * take no lock and never wait: a thread stopped half-way through one of them
 * blocks neither other callers nor the cursor. One exception, with
 * max_timers set: an arming that finds no unit free elsewhere waits for a
 * thread stopped while handing units back (inside tw_cancel, or a
 * callback's start), or stopped inside its own arming's take while its
 * stripe holds units, rather than answer a TW_EAGAIN that would be false.
 * And one
 * wait for the drainer: an arming or move that finds the wheel holding more
 * than twice its compaction allowance (about twice the pending timers plus
 * two entries a slot) plus 2^18 entries compacts itself, under the
 * drainer's lock (tried, never waited for), where it may: with the MANUAL
 * clock, whenever no tw_advance is under way or the one under way runs
 * callbacks; with MONOTONIC, in a callback the cursor runs itself
 * (workers = 0). Else it waits (yielding) until the cursor has compacted,
 * paused or not: producers that leave entries behind faster than anybody
 * drains (more busy threads than cores; an event loop that does not
 * advance; a long callback inside tw_advance) pay for them, every
 * callback too, the drainer's own included. The cursor never waits for a
 * producer; a tw_advance may wait for one that compacts: for its rounds if
 * it took the drain lock first, else, once the advance's callbacks return,
 * until it finishes the slot it is at. A wait that makes no progress for about
 * 0.1 s goes on without it (a long callback on the cursor with workers =
 * 0 holds the other producers' compaction so: README, Limits), and no
 * arming waits again until the drainer has taken something out.
 * tw_wake_fd, tw_now,
 * tw_stats_get and tw_resume take no lock either; tw_pause and
 * tw_foreach_pending take none but may wait a few instructions for another
 * thread (a runner about to start a callback; a move of the timer being
 * looked at). tw_cancel_sync, tw_stop and
 * tw_destroy may wait (for running callbacks); tw_advance serialises with
 * other tw_advance calls on the same service. A wait that would close a
 * cycle (a callback waits for another callback, which waits, through any
 * number of others, for the first; or for a tw_stop or tw_advance that
 * waits for it) is refused: at least one of the callers gets TW_EDEADLK,
 * with nothing done, and the others proceed. So is a call of tw_cancel_sync,
 * tw_stop or tw_advance made from inside more than 16 nested tw_advance and
 * tw_stop calls (a callback of one service advancing or stopping another,
 * and so on): the search for cycles sees 16. A due timer waits for a
 * worker only while every worker is busy: an idle worker takes timers that
 * a busy one has not started. Busy means stuck or slower alone: an idle
 * worker watches a running one for 50 us (up to 400 us, or half a tick,
 * after looks that found joining does not pay) and joins it when it made
 * no progress for 50 us (a callback that blocks) or when running beside
 * it is faster; short callbacks that share data run on one worker.
 *
 * Ordering. A callback sees every write the scheduling thread made before
 * the call that armed or moved it (tw_schedule, tw_schedule_every,
 * tw_schedule_at, tw_schedule_many, tw_reschedule, tw_reschedule_at)
 * returned: TW_OK, or for tw_schedule_many a count that includes it.
 * tw_cancel_sync returning means every write of the timer's callback runs is
 * visible to the caller. on_pending (tw_stop) sees every write made before
 * the timer was scheduled.
 *
 * Memory. Timer records live in chunks owned by the service and are reused
 * after a timer ends; a handle carries a generation, so a stale handle (one
 * whose timer fired, was cancelled or dropped) is refused with TW_ENOENT and
 * never acts on another timer. Record memory stays mapped until
 * tw_destroy, so a stale handle always reads a record; the pages of the
 * table's top chunk go back to the system once no timer uses it. A
 * pending timer has one entry in the wheel; a cancel, or a move earlier,
 * leaves the old entry behind, to be dropped when its slot comes round,
 * and the wheel compacts slots so that it never holds more than about
 * twice the pending timers plus two entries per slot, whatever the timers'
 * history (a timer moved earlier and later on every tick costs nothing
 * more). A new service costs tens of KiB: slots cost memory once they are
 * used (README has a table).
 *
 * Signals. The library's threads (tw-cursor, tw-worker) block every
 * asynchronous signal (SIGINT, SIGTERM, SIGCHLD, SIGUSR1, ...), so a
 * process-directed signal never runs the application's handler on them;
 * synchronous ones (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS)
 * stay with the fault that raises them.
 *
 * fork(). A service belongs to the process that created it: a child has
 * none of its threads, so make no call on it there (timers would never
 * fire, tw_stop and tw_destroy would wait for threads that do not exist).
 *
 * Thread sanitizer: a build of this library with -fsanitize=thread switches
 * on what ThreadSanitizer needs by itself; see README for the suppressions
 * file (share/timerwheel/tsan.supp) that covers the dependencies only.
 */
#ifndef TIMERWHEEL_H
#define TIMERWHEEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TW_STATIC_DEFINE) || !defined(__GNUC__)
#define TW_API
#else
#define TW_API __attribute__((visibility("default")))
#endif

#define TW_VERSION_MAJOR 0
#define TW_VERSION_MINOR 1
#define TW_VERSION_PATCH 0

typedef struct tw_service tw_service; /* opaque */

/* Time units, for delays and periods in nanoseconds. */
#define TW_US  1000ull
#define TW_MS  1000000ull
#define TW_SEC 1000000000ull

/* A timer's handle. 0 is never a valid timer. A handle names one arming
 * of one timer: after that timer fired (one-shot), was cancelled or dropped,
 * every call on the handle returns TW_ENOENT. */
typedef uint64_t tw_timer;

/* Runs once per due timer, on the cursor thread (workers = 0), on a worker
 * thread, or (MANUAL clock) inside tw_advance. `timer` is the handle that
 * tw_schedule returned; `arg` is the argument given to it. A callback may
 * call every function of this API on the same service except tw_advance,
 * tw_stop, tw_destroy and tw_cancel_sync of its own timer (and
 * tw_foreach_pending, which calls nothing from there and returns 0). */
typedef void (*tw_callback)(tw_timer timer, void *arg);

enum {                    /* every int-returning call: 0 or one of these (all < 0) */
    TW_OK        =  0,
    TW_EINVAL    = -1,    /* bad argument or configuration */
    TW_ENOMEM    = -2,    /* out of memory */
    TW_EAGAIN    = -3,    /* the configured max_timers are all pending */
    TW_ERANGE    = -4,    /* delay beyond the longest delay the service accepts */
    TW_ENOENT    = -5,    /* not a pending timer: fired, cancelled, dropped, unknown or stale */
    TW_ESHUTDOWN = -6,    /* the service is stopped */
    TW_EDEADLK   = -7,    /* the call would wait for itself: its own callback, or a
                             cycle of waits (see Progress) */
};

/* A static English sentence for `err`; never NULL, also for unknown codes.
 * Any thread. */
TW_API const char *tw_strerror(int err);

typedef enum { TW_CLOCK_MONOTONIC = 0, TW_CLOCK_MANUAL = 1 } tw_clock;

typedef struct tw_config {
    uint64_t tick_ns;        /* slot interval; default 1 ms; valid 1 us .. 1 s */
    uint32_t wheel_slots;    /* slots per wheel level; power of two, 2 .. 65536;
                                default 4096. The number of levels follows from
                                it (tw_max_delay has the horizon). */
    uint32_t slot_capacity;  /* entries in a slot's fixed array before overflow
                                handling; 1 .. 2^20, default 16. The array is
                                made when its slot is first used and kept until
                                tw_destroy (README, Limits: the ceiling). A
                                fuller slot grows (stats.overflowed), it never
                                refuses. */
    uint32_t workers;        /* worker threads, 0 .. 1024, default 2;
                                0 = callbacks run on the cursor thread, after
                                its step to their tick (tick-rounded: no
                                start inside a tick, README guarantee 1) */
    uint64_t max_timers;     /* cap on pending timers (armed, and not yet
                                started, cancelled or dropped), 0 .. 2^31 - 1;
                                0 = memory is the limit. Past it the arming
                                calls (tw_schedule, _every, _at, _many)
                                answer TW_EAGAIN, only when max_timers
                                timers are pending. A one-shot
                                stops counting when its callback starts (that
                                callback can arm a replacement); a periodic
                                timer counts until cancelled or dropped. The
                                cap is kept with per-thread budgets: no memory
                                shared by all threads is touched per call.
                                A unit freed before an arming began is
                                found by it; to be sure of that before it
                                refuses, an arming that finds none free
                                waits (yielding) for a thread preempted
                                while moving units, the one wait of the
                                arming calls (see Progress). */
    tw_clock clock;          /* MONOTONIC: own cursor thread; MANUAL: caller drives tw_advance */
} tw_config;

typedef struct tw_stats {
    uint64_t pending;        /* armed and not yet started, cancelled or dropped
                                (periodic: until cancelled or dropped; one
                                cancelled during its run: until that run
                                returns) */
    uint64_t scheduled;      /* timers armed: successful tw_schedule,
                                tw_schedule_every, tw_schedule_at, and each
                                timer tw_schedule_many armed */
    uint64_t fired;          /* callback runs started */
    uint64_t cancelled;      /* successful tw_cancel, tw_cancel_sync, and each
                                TW_OK of tw_cancel_many (a periodic timer's
                                during its run: counted when the run returns) */
    uint64_t rescheduled;    /* successful tw_reschedule + tw_reschedule_at */
    uint64_t dropped;        /* timers handed to on_pending by tw_stop */
    uint64_t ticks;          /* ticks the cursor has processed */
    uint64_t overflowed;     /* slot placements beyond a slot's fixed array,
                                the library's own included (cascades to lower
                                levels, moves, compaction), so it may exceed
                                scheduled: a measure of crowded slots, not a
                                fault */
    uint64_t max_lateness_ns;/* worst (callback start - deadline) seen */
} tw_stats;

/* Fill `cfg` with the defaults: 1 ms tick, 4096 slots per level, capacity
 * 16, 2 workers, no cap, MONOTONIC clock. Any thread. */
TW_API void tw_config_init(tw_config *cfg);

/* Create a service from `cfg` (NULL = defaults) and store it in *out.
 * MONOTONIC: starts the cursor thread and cfg->workers worker threads,
 * named "tw-cursor" and "tw-worker" (as top -H, perf and gdb show them),
 * with every asynchronous signal blocked; the caller's mask is unchanged.
 * They inherit the caller's scheduling policy and nice value; under
 * SCHED_OTHER each asks the kernel for a 100 us time slice (Linux 6.12 and
 * later; ignored before), so that on busy CPUs they run soon after they
 * wake, with their share of the CPU unchanged. Under any other policy
 * they are left as inherited.
 * MANUAL: starts no thread; time starts at 0 and moves only by tw_advance.
 * Returns TW_OK; TW_EINVAL for out == NULL or a field outside its range
 * (then *out is untouched); TW_ENOMEM; TW_EAGAIN if a thread could not be
 * started.
 *
 *     tw_service *s;
 *     if (tw_create(NULL, &s) != TW_OK) abort();
 */
TW_API int tw_create(const tw_config *cfg, tw_service **out);

/* Arm a one-shot timer: cb(timer, arg) runs once, no earlier than
 * tw_now() (read inside this call) + delay_ns; delay 0 means at the next
 * tick. (The reading is never below tw_now() at some instant of the call;
 * on x86-64 it is a TSC reading that may be a few microseconds above it,
 * as for every call that arms or moves a timer by a delay.) Never runs inside this call. Any thread, also from callbacks.
 * Lock-free. *out (if out is not NULL) receives the handle before the
 * callback can run.
 * Returns TW_OK; TW_EINVAL (s or cb NULL); TW_ERANGE (delay beyond
 * tw_max_delay(s); UINT64_MAX always is); TW_EAGAIN (max_timers timers
 * pending); TW_ENOMEM; TW_ESHUTDOWN (tw_stop has started).
 *
 *     tw_timer t;
 *     int rc = tw_schedule(s, 30 * 1000000000ull, on_idle, session, &t);
 */
TW_API int tw_schedule(tw_service *s, uint64_t delay_ns,
                       tw_callback cb, void *arg, tw_timer *out);

/* Arm a periodic timer: first run at tw_now() + first_delay_ns, then every
 * period_ns after the previous *deadline* (fixed rate, no drift). Runs never
 * overlap: the next run is armed when the previous one returns, at the
 * first deadline of the grid first + k * period after the last run's that
 * is not missed; missed runs are skipped, not bunched. A run is missed if,
 * when the run before it ends, MANUAL clock: its due tick was already
 * processed (a clock passed to tw_advance beyond its deadline misses
 * nothing while its tick is still to come); MONOTONIC: its deadline has
 * passed. It runs until cancelled or dropped. Errors as tw_schedule, plus
 * TW_EINVAL for period_ns == 0 and TW_ERANGE for a period beyond
 * tw_max_delay(s).
 *
 *     tw_schedule_every(s, 0, 1000000000ull, send_ping, conn, &conn->ping);
 */
TW_API int tw_schedule_every(tw_service *s, uint64_t first_delay_ns, uint64_t period_ns,
                             tw_callback cb, void *arg, tw_timer *out);

/* Absolute deadlines. deadline_ns <= tw_now(s) means "at the next tick".
 * Same errors as tw_schedule / tw_reschedule; TW_ERANGE when
 * deadline_ns - tw_now(s) > tw_max_delay(s). deadline_ns is on the
 * service's clock (tw_now: MANUAL, the time given to tw_advance;
 * MONOTONIC, CLOCK_MONOTONIC minus the time spent paused). Lock-free.
 *
 *     tw_schedule_at(s, tw_now(s) + 5 * TW_SEC, on_deadline, req, &req->t);
 */
TW_API int tw_schedule_at(tw_service *s, uint64_t deadline_ns,
                          tw_callback cb, void *arg, tw_timer *out);
TW_API int tw_reschedule_at(tw_service *s, tw_timer t, uint64_t deadline_ns);

/* Move a pending timer to tw_now() + delay_ns, earlier or later, keeping its
 * handle. Pushing a deadline later is one update of the record; the wheel
 * re-places the timer when its old slot comes round. Moving it earlier
 * places it again; the entry it leaves behind is dropped (never placed
 * again) when its slot comes round or compacted, so a timer moved both
 * ways, however often, costs no more memory or work than one that is not. On a periodic timer it
 * moves the next run (also from inside the run's own callback); the period
 * stays. A timer that is due but whose callback has not started is still
 * pending and is moved. Any thread. Lock-free.
 * Returns TW_OK; TW_ENOENT (not pending: fired, running one-shot, cancelled,
 * dropped, stale, 0, another service's); TW_ERANGE; TW_EINVAL (s NULL);
 * TW_ESHUTDOWN.
 *
 *     tw_reschedule(s, conn->idle, 30 * 1000000000ull);   // on every request
 */
TW_API int tw_reschedule(tw_service *s, tw_timer t, uint64_t delay_ns);

/* Cancel a timer. Returns TW_OK iff no run of the timer starts after this
 * call: a one-shot that had not started (it never will), or a periodic
 * timer (no further runs; a run in progress completes). Frees the timer's
 * record at once (what stays in a wheel slot is an 8-byte tagged index).
 * Otherwise TW_ENOENT (already started one-shot, cancelled, dropped, stale,
 * 0, another service's); TW_EINVAL (s NULL). Any thread, also a callback on
 * its own timer. Lock-free. Works after tw_stop too (returns TW_ENOENT: every
 * timer was handed to on_pending).
 */
TW_API int tw_cancel(tw_service *s, tw_timer t);

/* As tw_cancel, and returns only once no callback run of that timer is in
 * progress, whatever it returns (spins briefly, then sleeps). TW_EDEADLK,
 * with nothing done, when called from that timer's own callback, or when
 * the wait would close a cycle of waits (this callback waits for that
 * timer's, which waits, directly or through others, for this one; see
 * Progress at the top): at least one caller of such a cycle is refused,
 * the others wait and proceed. */
TW_API int tw_cancel_sync(tw_service *s, tw_timer t);

/* Batches. tw_schedule_many arms n one-shot timers, delays_ns[i] from one
 * clock reading, callback cb, argument args ? args[i] : NULL, handle into
 * out[i]. Returns the number armed, which are the first ones (like
 * sendmmsg): n on success; k < n when element k failed (out[k..n) are 0
 * and calling again for the rest returns that error); a negative code when
 * the first one failed. tw_cancel_many cancels n handles, stores each
 * result in rcs[i] when rcs is not NULL, and returns how many returned
 * TW_OK; TW_EINVAL for s NULL or (n > 0 and handles NULL). Lock-free as
 * their single forms.
 * Also: tw_schedule_many answers TW_EINVAL (nothing armed, out untouched)
 * for s or cb NULL (whatever n), delays_ns NULL with n > 0, or n > INT_MAX;
 * out may be NULL (handles not stored); otherwise n == 0 returns 0. When
 * the first element fails, out[0..n) are 0. As tw_schedule, out[i] holds
 * timer i's handle before its callback can run. "Calling again returns
 * that error" holds for errors that last (TW_ERANGE, TW_ESHUTDOWN); a
 * TW_EAGAIN or TW_ENOMEM may have cleared by then. tw_cancel_many answers
 * TW_EINVAL for n > INT_MAX too.
 *
 *     uint64_t d[16]; void *a[16]; tw_timer h[16];  // filled by the caller
 *     int armed = tw_schedule_many(s, 16, d, on_timeout, a, h);
 */
TW_API int tw_schedule_many(tw_service *s, size_t n, const uint64_t *delays_ns,
                            tw_callback cb, void *const *args, tw_timer *out);
TW_API int tw_cancel_many(tw_service *s, size_t n, const tw_timer *handles, int *rcs);

/* TW_CLOCK_MANUAL only: set the service's clock to now_ns, process every
 * tick boundary up to the last one at or before now_ns, and run, on the
 * calling thread and before returning, every timer those made due,
 * earliest deadline first. A timer is due at the first tick boundary that
 * is at or after its deadline and has not been processed yet: so a
 * deadline at or before the last processed boundary (delay 0, say, right
 * after tw_advance(2 ms) with a 1 ms tick) is due at the next one (3 ms),
 * not at a second tw_advance(2 ms). Other threads may schedule, cancel and
 * reschedule meanwhile. A timer with deadline D has started when
 * tw_advance(now) returns for any now >= D + tick_ns.
 * Returns TW_OK; TW_EINVAL (s NULL, MONOTONIC service, now_ns below the
 * current clock or above 2^63 - 2^31 ns, 292 years); TW_EDEADLK (called
 * from a callback of this service or from its on_pending, or waiting for
 * another thread's tw_advance of s would close a cycle of waits);
 * TW_ESHUTDOWN (after tw_stop). */
TW_API int tw_advance(tw_service *s, uint64_t now_ns);

/* The service's clock in ns: MANUAL, the last tw_advance value (0 at
 * first); MONOTONIC, CLOCK_MONOTONIC minus the total time spent paused
 * (tw_pause). Any thread, callbacks included. */
TW_API uint64_t tw_now(const tw_service *s);

/* The earliest time at which something may become due: a lower bound on
 * the due time (first tick boundary at or after the deadline) of every
 * pending timer, never later than the earliest; exact when that timer is
 * within wheel_slots ticks of tw_now(s). UINT64_MAX when nothing is
 * pending. Any thread. An event loop driving a MANUAL service sleeps until
 * it, then calls tw_advance.
 * How: the occupancy bitmaps give the slots in tick order, and the call
 * reads the entries of the nearest ones only until it meets a timer due at
 * its slot's tick (at most 4096 entries a call: past that, or in a slot
 * more than wheel_slots ticks away, it answers the slot's tick, early, and
 * the tw_advance to that time clears the way). On a MONOTONIC service it
 * also reads the live entries of the logs where threads' far timers wait
 * for the cursor (up to 8192 a thread, and the spill of a thread whose
 * burst outran the cursor: all of it, so a call during such a burst costs
 * as much as the entries not yet drained). A periodic timer whose run
 * is in progress has no next due time until the run returns. NULL s:
 * UINT64_MAX.
 *
 *     uint64_t due = tw_next_due(s);   // ns on the service's clock
 *     int ms = due == UINT64_MAX ? -1 : due <= now ? 0 : (int)((due - now + 999999) / 1000000);
 */
TW_API uint64_t tw_next_due(tw_service *s);

/* MANUAL only: a file descriptor for the event loop's poll set. It becomes
 * readable when, after the last tw_next_due call, a timer is armed or
 * moved so that it is due before what that call returned (for example by
 * another thread), so a loop blocked in epoll_wait wakes up in time.
 * tw_next_due clears it. The service owns it (tw_destroy closes it); every
 * call returns the same descriptor. Returns it (>= 0), or TW_EINVAL on a
 * MONOTONIC service, TW_ENOMEM or TW_EAGAIN if it cannot be made. The
 * scheduling calls stay lock-free; they make a system call only when they
 * make the next due time earlier than the loop knows.
 * It is an eventfd (non-blocking, close-on-exec): read it only through
 * tw_next_due. Made on the first call; if tw_next_due was called before,
 * it starts readable (the loop then asks again). TW_ENOMEM: the kernel had
 * no memory for it; TW_EAGAIN: the process or system is out of file
 * descriptors; a later call tries again. NULL s: TW_EINVAL. It serves one
 * loop: a tw_next_due from another thread clears it too and sets what
 * "the loop knows" to its own answer. */
TW_API int tw_wake_fd(tw_service *s);

/* Pause and resume (MONOTONIC only; TW_EINVAL on MANUAL). tw_pause freezes
 * the service's clock: once it returns, no callback starts and tw_now(s)
 * stays at the pause instant until tw_resume. Scheduling, rescheduling and
 * cancelling keep working meanwhile (delays count from the frozen clock).
 * tw_resume restarts the clock where it stopped, so every pending timer
 * keeps the time it had left. Both idempotent; callable from any thread
 * and from callbacks (tw_pause does not wait for running callbacks).
 * tw_stop works on a paused service. tw_now of a MONOTONIC service is
 * CLOCK_MONOTONIC minus the total time spent paused.
 * Also: a paused service's threads sleep (no CPU), but for the cursor's
 * compaction of what armings and cancels leave past the wheel's
 * back-pressure line (Progress, at the top); tw_pause waits only for
 * a runner that is between its last look at the clock and a callback's
 * start (a few instructions). A timer that was due and not started when
 * the pause began starts after tw_resume, as late on the service's clock
 * as it was (later in real time by the time paused). After tw_stop
 * both still freeze and restart tw_now. Returns TW_OK; TW_EINVAL (s NULL,
 * MANUAL). */
TW_API int tw_pause(tw_service *s);
TW_API int tw_resume(tw_service *s);

/* A snapshot of the counters (each is exact; they are read one after the
 * other, so only a quiescent service gives a consistent set). Any thread. */
TW_API void tw_stats_get(tw_service *s, tw_stats *out);

/* Stop the service: from its start, scheduling calls return TW_ESHUTDOWN;
 * when it returns, the cursor and workers have stopped, callbacks that were
 * running have returned, no callback will start, and every timer that never
 * started was handed to on_pending(timer, arg) exactly once, on the calling
 * thread (NULL on_pending: discarded). A periodic timer whose run is in
 * progress is waited for and then handed to on_pending once (it has no
 * further run); a cancelled one is not. Idempotent: a second call waits for
 * the first to finish and returns TW_OK. Returns TW_OK; TW_EINVAL (s NULL);
 * TW_EDEADLK, with nothing done (called from a callback of this service,
 * from on_pending, i.e. inside this very tw_stop, or from a callback of
 * another service whose wait for this one's callbacks would close a cycle
 * of waits). */
TW_API int tw_stop(tw_service *s, tw_callback on_pending);

/* tw_stop(s, NULL) if needed, join every thread, free everything. NULL is
 * a no-op; so is a call from a callback of s or from its on_pending (it
 * would free what the caller runs on), and one whose tw_stop would answer
 * TW_EDEADLK (from a callback of another service, a cycle of waits): s is
 * left as it was, to be destroyed later from elsewhere. Must not race with
 * any other call on s. */
TW_API void tw_destroy(tw_service *s);

/* ---- Extensions ---------------------------------------------------------- */

/* The longest delay tw_schedule accepts, in ns, at any clock value: 2^41 - 1
 * ticks, or 2^63 ns if that is smaller: 25.5 days at a 1 us tick, 69.7
 * years at 1 ms, 292 years (the 2^63 ns cap) from a 4.2 ms tick on.
 * TW_ERANGE beyond. Any thread. */
TW_API uint64_t tw_max_delay(const tw_service *s);

/* Lateness histogram: bucket 0 counts callback starts 0 .. 1023 ns late;
 * bucket i >= 1 counts those [2^(i+9), 2^(i+10)) ns late; the last bucket
 * takes everything later. On the worker pool the clock is read before a
 * batch's first run and then every 1 to 64 runs, as many as take about
 * 4 us, so a run's lateness (here and in max_lateness_ns) may be
 * under-estimated by the run time of the batch-mates since the last read:
 * about 4 us, at most 63 of them while the spacing adapts to slower
 * callbacks. buckets NULL: nothing is done (as tw_stats_get with out
 * NULL). */
#define TW_LATENESS_BUCKETS 40
TW_API void tw_lateness_histogram(tw_service *s, uint64_t buckets[TW_LATENESS_BUCKETS]);

/* An upper bound on the given quantile (0 < q <= 1, e.g. 0.99) of callback
 * lateness in ns, from the histogram (exact to a factor of two); 0 when
 * nothing fired; UINT64_MAX (no such quantile) for q outside (0, 1], NaN
 * included. */
TW_API uint64_t tw_lateness_quantile(tw_service *s, double q);

/* Introspection. Calls fn once for each timer that is pending for the
 * whole call, at most once for a timer armed or ended during it, never for
 * a timer that ended before the call; fn may cancel or reschedule the timer
 * it is given. Returns the number of calls. Any thread but a callback of s
 * may call it concurrently with everything but tw_destroy.
 * Also: pending as in tw_stats: a one-shot until its callback starts; a
 * periodic timer until cancelled or dropped, its run in progress included
 * (deadline_ns then is the next run on its grid, or where a tw_reschedule
 * moved it). It walks every timer record the service ever used (O(most
 * timers ever at once)), takes no lock and stops no other call. From a
 * callback of s, or with s or fn NULL, it calls nothing and returns 0.
 *
 *     static void count_late(const tw_timer_info *i, void *ctx)
 *     { if (i->deadline_ns > *(uint64_t *)ctx) ... }
 *     size_t n = tw_foreach_pending(s, count_late, &limit);
 */
typedef struct tw_timer_info {
    tw_timer    timer;
    uint64_t    deadline_ns;  /* next run, on the service's clock */
    uint64_t    period_ns;    /* 0 for a one-shot */
    tw_callback cb;
    void       *arg;
} tw_timer_info;
TW_API size_t tw_foreach_pending(tw_service *s,
                                 void (*fn)(const tw_timer_info *info, void *ctx),
                                 void *ctx);

/* "major.minor.patch" of the library linked, and its number
 * (major * 10000 + minor * 100 + patch). */
TW_API const char *tw_version(void);
TW_API unsigned tw_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* TIMERWHEEL_H */
