/*
 * embed.c: what an event loop that drives a MANUAL service needs: when to
 * wake up (tw_next_due; the scan itself is wheel.c's), and a descriptor
 * that wakes it sooner when a timer is armed or moved earlier than that
 * (tw_wake_fd), for example by another thread.
 *
 * known_due is the last answer the loop was given (ns; 0: no tw_next_due
 * call yet, so nothing to wake for). A placement due before it lowers it
 * by CAS and writes the eventfd: so a loop is woken once per new earliest
 * timer, and a placement at or after what the loop knows costs one load.
 *
 * No lost wake-up: tw_next_due stores UINT64_MAX in known_due, empties the
 * eventfd, scans, and lowers known_due to its answer; a producer reserves
 * and publishes its entry (seq_cst, slots.c), then loads known_due
 * (seq_cst). Either the scan's seq_cst loads see the entry (the answer
 * counts it), or the producer's load comes after the store of UINT64_MAX
 * and it writes the eventfd (after the emptying, or before it and then
 * the scan sees the entry: the write follows the publish). A write that
 * races the scan may leave the descriptor readable for a timer the answer
 * already counts: one spurious wake-up, never a missed one.
 */
#include "internal.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

uint64_t tw__ns_of_tick(const tw_service *s, uint64_t tick)
{
    const uint64_t top = UINT64_MAX - 1; /* UINT64_MAX means "nothing" */
    if (tick > (top - s->origin) / s->cfg.tick_ns)
        return top;
    return s->origin + tick * s->cfg.tick_ns;
}

static void poke_fd(tw_service *s)
{
    /* Seq_cst: pairs with the CAS that installed it, and against its
     * installer's look at known_due (tw_wake_fd): a producer lowered
     * known_due, then reads the descriptor; the installer stored it, then
     * reads known_due; store-buffering, so one of the two sees the other
     * only with both seq_cst (acquire was enough on x86 only; a review). */
    int fd = atomic_load_explicit(&s->wake_fd, memory_order_seq_cst);
    uint64_t one = 1;
    if (fd >= 0 && write(fd, &one, sizeof one) < 0) {
        /* EAGAIN: the counter is full, so the descriptor is readable. */
    }
}

void tw__wake_if_sooner(tw_service *s, uint64_t due_tick)
{
    /* Seq_cst: the producer's half of the pairing at the top. */
    uint64_t known = atomic_load_explicit(&s->known_due, memory_order_seq_cst);
    if (known == 0)
        return; /* no loop is waiting on an answer yet */
    uint64_t due = tw__ns_of_tick(s, due_tick);
    while (due < known) {
        /* Seq_cst: one producer lowers it and wakes the loop; the others
         * see the lower value and need not. */
        if (atomic_compare_exchange_weak_explicit(&s->known_due, &known, due,
                                                  memory_order_seq_cst,
                                                  memory_order_seq_cst)) {
            poke_fd(s);
            return;
        }
    }
}

static void empty_fd(tw_service *s)
{
    /* Acquire: as in poke_fd. */
    int fd = atomic_load_explicit(&s->wake_fd, memory_order_acquire);
    uint64_t n;
    if (fd >= 0 && read(fd, &n, sizeof n) < 0) {
        /* EAGAIN: it was not readable. */
    }
}

uint64_t tw_next_due(tw_service *s)
{
    if (!s)
        return UINT64_MAX;
    bool manual = s->cfg.clock == TW_CLOCK_MANUAL;
    if (manual) {
        /* Seq_cst: the loop's half of the pairing at the top. */
        atomic_store_explicit(&s->known_due, UINT64_MAX, memory_order_seq_cst);
        empty_fd(s);
    }
    /* The logs first: an entry that has left its log by then is in the
     * wheel when the wheel is read (defer.c). */
    uint64_t logged = tw__defer_next_due(s);
    uint64_t tick = tw__wheel_next_due(s);
    tick = logged < tick ? logged : tick;
    uint64_t due = tick == UINT64_MAX ? UINT64_MAX : tw__ns_of_tick(s, tick);
    if (manual) {
        /* Seq_cst: as above; lower only (a producer may have lowered it
         * further since our store, and written the descriptor). */
        uint64_t known = atomic_load_explicit(&s->known_due, memory_order_seq_cst);
        while (due < known &&
               !atomic_compare_exchange_weak_explicit(&s->known_due, &known, due,
                                                      memory_order_seq_cst,
                                                      memory_order_seq_cst)) {
        }
    }
    return due;
}

int tw_wake_fd(tw_service *s)
{
    if (!s || s->cfg.clock != TW_CLOCK_MANUAL)
        return TW_EINVAL;
    /* Acquire: as in poke_fd. */
    int fd = atomic_load_explicit(&s->wake_fd, memory_order_acquire);
    if (fd >= 0)
        return fd;
    int mine = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (mine < 0)
        return errno == ENOMEM ? TW_ENOMEM : TW_EAGAIN;
    /* Seq_cst: publish ours, or read the winner's; and see poke_fd. */
    if (!atomic_compare_exchange_strong_explicit(&s->wake_fd, &fd, mine,
                                                 memory_order_seq_cst,
                                                 memory_order_acquire)) {
        close(mine);
        return fd;
    }
    /* A producer that lowered known_due before the descriptor existed
     * wrote nothing: start readable, so the loop asks again. Seq_cst: as
     * the producers' load. */
    if (atomic_load_explicit(&s->known_due, memory_order_seq_cst) != 0)
        poke_fd(s);
    return mine;
}

void tw__wake_fd_close(tw_service *s)
{
    /* Relaxed: tw_destroy runs alone. */
    int fd = atomic_load_explicit(&s->wake_fd, memory_order_relaxed);
    if (fd >= 0)
        close(fd);
}
