/*
 * idle_server: an epoll TCP echo server on loopback whose connections time
 * out when idle, on a timerwheel service, run in one of two ways:
 *
 *   threaded (default)  a MONOTONIC service: its own cursor thread and W
 *                       worker threads run the timer callbacks, which hand
 *                       their work to the epoll thread and wake it.
 *   --loop              the whole server on one thread: a MANUAL service (no
 *                       thread at all) driven by the epoll loop, whose
 *                       callbacks run inside tw_advance on that thread.
 *
 *     idle_server [--loop] [--port P] [--idle-ms M] [--heartbeat-ms H]
 *                 [--workers W] [--verbose]
 *
 * Listens on 127.0.0.1:P (default 0: an ephemeral port) and prints
 * "idle_server: listening on 127.0.0.1:<port>" on stdout. Echoes every byte
 * it reads. A connection from which nothing has been read for M ms (default
 * 10000) is closed by the server. SIGINT or SIGTERM stops it: it prints one
 * line "idle_server: stats accepted=... idle_closed=..." and exits 0.
 *
 * Timers (one service, default configuration but W workers, default 1, or
 * in loop mode a MANUAL clock and no worker):
 *
 *   idle       one one-shot timer per connection, armed at accept with
 *              tw_schedule(M ms) and pushed back with tw_reschedule(M ms) on
 *              every read that returns data: the same timer moves, no new one
 *              is armed. (Loop mode: tw_schedule_at and tw_reschedule_at, see
 *              below.)
 *   heartbeat  one periodic timer, tw_schedule_every(H ms, default 1000): it
 *              counts beats, and the epoll thread does its housekeeping
 *              (resume accepting after EMFILE, print a status line with
 *              --verbose): woken for it (threaded) or in the callback (loop).
 *
 * Threaded mode: who touches a connection, and when its memory is freed.
 *   One thread, the epoll thread, owns every struct conn: it alone reads and
 *   writes the socket, the buffers and the lists, closes the fd and frees the
 *   memory. Timer callbacks run on timerwheel's worker threads and never
 *   touch a socket. The idle callback does one thing: it pushes its conn on
 *   the "expired" stack (a lock-free LIFO: CAS push, the epoll thread takes
 *   the whole stack with one atomic exchange) and then writes the eventfd
 *   that wakes the epoll thread. The push (its `next_expired` field, written
 *   before the release CAS) is the callback's last access to the conn; the
 *   eventfd is the server's, not the conn's.
 *
 *   So the conn's memory has two potential users, the epoll thread and the
 *   idle timer, and it is freed only when both are done with it:
 *     - the epoll thread closes a connection itself (peer closed, error):
 *       it closes the fd, then tw_cancel(idle). TW_OK means the callback has
 *       not started and never will (documented guarantee), so the conn is
 *       freed. TW_ENOENT means the callback has started: the conn is marked
 *       CLOSED_WAITING and freed only when it comes off the expired stack.
 *     - the conn comes off the expired stack: if it is OPEN (or DOOMED,
 *       below), the timeout closes it (idle_closed); in every case the timer
 *       is done with it and it is freed.
 *   A read whose tw_reschedule returns TW_ENOENT came too late: the timer has
 *   already fired. The conn is DOOMED: its fd leaves the epoll set and the
 *   expired stack will bring it back to be closed as idle.
 *   Frees happen after the whole batch of epoll events has been handled, so
 *   a later event of the same batch never points at freed memory.
 *
 *   The heartbeat's argument is the server itself, which outlives the
 *   service. At shutdown the epoll thread (never the heartbeat callback:
 *   tw_cancel_sync of a timer from its own callback is TW_EDEADLK) calls
 *   tw_cancel_sync(heartbeat), then tw_stop: when it returns, every callback
 *   that started has returned (and pushed its conn), and every idle timer
 *   that never started is discarded. A last pass over the expired stack and
 *   the list of open connections then frees everything.
 *
 * Loop mode (--loop): a MANUAL service (TW_CLOCK_MANUAL, workers = 0) starts
 *   no thread; its clock moves only when the loop calls tw_advance, and due
 *   callbacks run inside that call. One iteration of the epoll loop:
 *
 *       due = tw_next_due(s);                  // also empties tw_wake_fd
 *       n = epoll_wait(ep, evs, N, ms_until(due));
 *       handle the n socket events;            // reads push deadlines back
 *       tw_advance(s, CLOCK_MONOTONIC - start); // idle closes, heartbeat
 *
 *   Clock: service time is CLOCK_MONOTONIC minus `start`, read just before
 *   tw_create (a MANUAL clock starts at 0), so "now" for the service is one
 *   clock_gettime away at any moment. ms_until(due): -1 (block) when due is
 *   UINT64_MAX (nothing pending), 0 when due has passed, else whole ms
 *   rounded up. Rounded down, epoll_wait would return just before due,
 *   tw_advance would find nothing due, and the loop would spin on 0 ms
 *   waits until due; rounded up it never returns before due (the stats
 *   line's early_wakes counts such returns: 0) and adds at most 1 ms.
 *
 *   Arming: a MANUAL clock stands still between advances, so tw_now(s)
 *   lags real time by up to a whole epoll_wait, and a delay given to
 *   tw_schedule or tw_reschedule would count from the last advance: the
 *   connection would close early. The loop computes each deadline from the
 *   monotonic clock and passes it to tw_schedule_at / tw_reschedule_at.
 *
 *   What the threaded mode needs and this one does not: a callback runs on
 *   the thread that owns the conns, at a known point of the iteration, so a
 *   conn never has two users at once. tw_advance comes after the socket
 *   events: no event of the batch is left to name a conn a callback closes,
 *   and a byte this wake-up reported pushes its deadline back first. So
 *   there is no expired stack, no eventfd, no CLOSED_WAITING or DOOMED
 *   state, nothing that needs an atomic (beats is one only because the
 *   struct is shared with the threaded mode): the idle callback closes and
 *   frees its conn itself; tw_cancel in close_conn always returns TW_OK (the
 *   timer could only have fired inside tw_advance, whose callback would
 *   have closed the conn already), and for the same reason a read always
 *   finds its timer pending; at shutdown no callback can be running, so no
 *   tw_cancel_sync. The frees after the batch remain only for connections
 *   close_conn closes while their event is being handled, as in any epoll
 *   loop.
 *
 *   The wake fd: tw_wake_fd(s) becomes readable when a timer is armed or
 *   moved earlier than the last tw_next_due answer. Here that happens only
 *   on the loop thread (an accept may arm a timer due before the next
 *   heartbeat), always before the tw_next_due that precedes the next
 *   epoll_wait, and that call counts the timer in its answer and empties
 *   the descriptor. So epoll_wait never finds it readable (wake_fd_wakes in
 *   the stats line: 0, and the test checks it), and it costs nothing. It is
 *   there for another thread (a database reply, a second loop) that calls
 *   tw_schedule on this service while the loop sleeps on a timeout computed
 *   before: the loop then wakes, just goes round, and the next tw_next_due
 *   counts the new timer.
 *
 * Signals: SIGINT and SIGTERM are blocked before the service starts its
 * threads (they inherit the mask) and read from a signalfd; SIGPIPE is
 * ignored and every send uses MSG_NOSIGNAL.
 *
 * Statistics: SIGTERM's line counts accepted connections, and how they
 * ended (idle_closed, peer_closed, error_closed, unsent_at_error); the
 * idle closes seen before their deadline (early_closes: must be 0) and the
 * worst delay after it (max_close_late_ms, up to the epoll thread's close);
 * beats, and the longest time the epoll thread went without seeing one
 * (max_beat_gap_ms: about one heartbeat period unless the machine starves
 * the server). Loop mode adds wake_fd_wakes and early_wakes (above).
 *
 * Flow control: a connection's echo buffer holds 4 KiB. When the peer does
 * not read and the buffer is full, the server stops reading from it (and so
 * stops pushing its idle timer back: a peer that sends but never reads idles
 * out). The statistics count connections that ended by an error (e.g. a
 * peer's RST) with echo data still unsent (unsent_at_error).
 *
 * examples/idle_server_test.c drives it with a few thousand connections, in
 * both modes (ctest idle_server and idle_server_loop).
 * Exit status: 0 after a signal, 1 on a startup or system error, 2 bad
 * command line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <timerwheel.h>

#define MS 1000000ull
#define OUT_CAP 4096
#define MAX_EVENTS 256

enum conn_state {
    C_OPEN,           /* fd open, in the epoll set, idle timer pending or firing */
    C_DOOMED,         /* threaded: the idle timer fired before a read could push
                         it back: fd out of the epoll set, waiting for the
                         expired stack */
    C_CLOSED_WAITING, /* threaded: closed by the epoll thread, tw_cancel said
                         TW_ENOENT: waiting for the expired stack */
    C_DEAD,           /* closed, timer done with it: freed after the batch */
};

struct conn {
    int fd;
    enum conn_state state;
    tw_timer idle;
    uint64_t deadline;           /* lower bound of the idle deadline (loop: exact) */
    uint32_t events;             /* epoll interest now registered */
    struct conn *prev, *next;    /* list of C_OPEN / C_DOOMED conns */
    struct conn *next_dead;      /* freed at the end of the batch */
    struct conn *next_expired;   /* written by the idle callback, before its push */
    size_t out_off, out_len;     /* echo data not yet sent: out[out_off, out_len) */
    unsigned char out[OUT_CAP];
};

struct server {
    tw_service *tw;
    bool loop;                       /* --loop: MANUAL service, one thread */
    uint64_t start_ns;               /* loop: CLOCK_MONOTONIC at service time 0 */
    uint64_t idle_ns;
    int epfd, lfd, efd, sfd;         /* efd: threaded only (-1 in loop mode) */
    bool accept_paused, verbose, running;
    tw_timer heartbeat;
    _Atomic(struct conn *) expired;  /* threaded: pushed by idle callbacks */
    atomic_uint_fast64_t beats;      /* written by the heartbeat callback */
    struct conn live;                /* list head of C_OPEN / C_DOOMED conns */
    struct conn *dead;               /* to free after this batch */
    uint64_t open, accepted, idle_closed, peer_closed, error_closed,
             unsent_at_error, early_closes, max_close_late_ns, bytes;
    uint64_t beats_seen, last_beat_seen_ns, max_beat_gap_ns; /* epoll thread seeing beats */
    uint64_t wake_fd_wakes, early_wakes;                     /* loop mode */
};

/* Tags for the non-connection fds in the epoll set. */
static char tag_listen, tag_event, tag_wake, tag_signal;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The service's clock, read now. Threaded: tw_now (a MONOTONIC service
 * reads the clock). Loop: tw_now is the last tw_advance, so map the
 * monotonic clock ourselves, as the loop does for tw_advance. */
static uint64_t svc_now(const struct server *srv)
{
    return srv->loop ? mono_ns() - srv->start_ns : tw_now(srv->tw);
}

/* ---- timer callbacks, threaded mode (worker threads) --------------------- */

static void wake(struct server *srv)
{
    uint64_t one = 1;
    /* EAGAIN only if the counter is about to overflow: it is awake anyway. */
    ssize_t n = write(srv->efd, &one, sizeof one);
    (void)n;
}

static struct server *g_srv; /* the one server: the idle callback's context */

static void on_idle(tw_timer t, void *arg)
{
    (void)t;
    struct server *srv = g_srv;
    struct conn *c = arg;
    struct conn *head = atomic_load_explicit(&srv->expired, memory_order_relaxed);
    do {
        c->next_expired = head;
    } while (!atomic_compare_exchange_weak_explicit(&srv->expired, &head, c,
                                                    memory_order_release,
                                                    memory_order_relaxed));
    /* c is not touched after the push: the epoll thread may free it now. */
    wake(srv);
}

static void on_heartbeat(tw_timer t, void *arg)
{
    (void)t;
    struct server *srv = arg;
    atomic_fetch_add_explicit(&srv->beats, 1, memory_order_relaxed);
    wake(srv);
}

/* ---- connections (epoll thread) ------------------------------------------ */

static void list_remove(struct conn *c)
{
    c->prev->next = c->next;
    c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void bury(struct server *srv, struct conn *c)
{
    c->next_dead = srv->dead;
    srv->dead = c;
}

static void set_events(struct server *srv, struct conn *c, uint32_t ev)
{
    if (ev == c->events)
        return;
    struct epoll_event e = { .events = ev, .data.ptr = c };
    if (epoll_ctl(srv->epfd, EPOLL_CTL_MOD, c->fd, &e) != 0)
        die("epoll_ctl(MOD)");
    c->events = ev;
}

static void resume_accept(struct server *srv)
{
    if (!srv->accept_paused)
        return;
    struct epoll_event e = { .events = EPOLLIN, .data.ptr = &tag_listen };
    if (epoll_ctl(srv->epfd, EPOLL_CTL_MOD, srv->lfd, &e) != 0)
        die("epoll_ctl(listen)");
    srv->accept_paused = false;
}

enum close_reason { R_PEER, R_ERROR };

/* The epoll thread closes c for a reason of its own. */
static void close_conn(struct server *srv, struct conn *c, enum close_reason why)
{
    if (why == R_ERROR) {
        srv->error_closed++;
        if (c->out_len > c->out_off)
            srv->unsent_at_error++;
    } else {
        srv->peer_closed++;
    }
    close(c->fd); /* also leaves the epoll set */
    c->fd = -1;
    list_remove(c);
    srv->open--;
    resume_accept(srv);
    if (tw_cancel(srv->tw, c->idle) == TW_OK) {
        c->state = C_DEAD;           /* its callback never runs */
        bury(srv, c);
    } else {
        c->state = C_CLOSED_WAITING; /* threaded only: the callback started */
    }
}

/* The idle timeout closes c (C_OPEN, or C_DOOMED). now: the service's clock
 * when the timer was seen due, never below c->deadline (counted if it is). */
static void close_idle(struct server *srv, struct conn *c, uint64_t now)
{
    if (now < c->deadline)
        srv->early_closes++;
    else if (now - c->deadline > srv->max_close_late_ns)
        srv->max_close_late_ns = now - c->deadline;
    srv->idle_closed++;
    close(c->fd);
    list_remove(c);
    srv->open--;
    resume_accept(srv);
}

/* Threaded: take the expired stack: close what the timeouts closed, free
 * what is done. */
static void drain_expired(struct server *srv)
{
    struct conn *c = atomic_exchange_explicit(&srv->expired, NULL, memory_order_acquire);
    uint64_t now = c ? tw_now(srv->tw) : 0;
    while (c) {
        struct conn *next = c->next_expired;
        if (c->state != C_CLOSED_WAITING)
            close_idle(srv, c, now);
        c->state = C_DEAD;
        bury(srv, c);
        c = next;
    }
}

static void print_stats(const struct server *srv, const char *what)
{
    printf("idle_server: %s accepted=%" PRIu64 " open=%" PRIu64 " idle_closed=%" PRIu64
           " peer_closed=%" PRIu64 " error_closed=%" PRIu64 " unsent_at_error=%" PRIu64
           " early_closes=%" PRIu64 " max_close_late_ms=%.3f beats=%" PRIu64
           " max_beat_gap_ms=%.3f bytes=%" PRIu64,
           what, srv->accepted, srv->open, srv->idle_closed, srv->peer_closed,
           srv->error_closed, srv->unsent_at_error, srv->early_closes,
           (double)srv->max_close_late_ns / 1e6,
           (uint64_t)atomic_load(&srv->beats), (double)srv->max_beat_gap_ns / 1e6,
           srv->bytes);
    if (srv->loop)
        printf(" wake_fd_wakes=%" PRIu64 " early_wakes=%" PRIu64, srv->wake_fd_wakes,
               srv->early_wakes);
    printf("\n");
    fflush(stdout);
}

/* Housekeeping when the epoll thread sees beat number `beats`: how long
 * since it saw the last one (more than a period or two means the machine
 * starved the server), accepting again after EMFILE, the status line. */
static void see_beat(struct server *srv, uint64_t beats)
{
    uint64_t now = svc_now(srv);
    if (srv->beats_seen && now - srv->last_beat_seen_ns > srv->max_beat_gap_ns)
        srv->max_beat_gap_ns = now - srv->last_beat_seen_ns;
    srv->last_beat_seen_ns = now;
    srv->beats_seen = beats;
    resume_accept(srv);  /* retry after EMFILE */
    if (srv->verbose)
        print_stats(srv, "heartbeat");
}

/* ---- timer callbacks, loop mode (inside tw_advance, on the epoll thread) - */

/* After the batch's socket events: nothing else can still name c. */
static void on_idle_loop(tw_timer t, void *arg)
{
    (void)t;
    struct conn *c = arg;
    close_idle(g_srv, c, tw_now(g_srv->tw));
    free(c);
}

static void on_heartbeat_loop(tw_timer t, void *arg)
{
    (void)t;
    struct server *srv = arg;
    see_beat(srv, atomic_fetch_add_explicit(&srv->beats, 1, memory_order_relaxed) + 1);
}

/* ---- idle timers ---------------------------------------------------------- */

/* Arm c's idle timer (accept) or push it back (a read), and set
 * c->deadline. Threaded: a delay; the service reads its clock inside the
 * call, so the bound read before is at or below the deadline it sets.
 * Loop: the service's clock stands still between advances, so the deadline
 * is computed from the monotonic clock and given as such (exact). */
static int idle_start(struct server *srv, struct conn *c)
{
    uint64_t deadline = svc_now(srv) + srv->idle_ns;
    int rc = srv->loop ? tw_schedule_at(srv->tw, deadline, on_idle_loop, c, &c->idle)
                       : tw_schedule(srv->tw, srv->idle_ns, on_idle, c, &c->idle);
    if (rc == TW_OK)
        c->deadline = deadline;
    return rc;
}

static int idle_push_back(struct server *srv, struct conn *c)
{
    uint64_t deadline = svc_now(srv) + srv->idle_ns;
    int rc = srv->loop ? tw_reschedule_at(srv->tw, c->idle, deadline)
                       : tw_reschedule(srv->tw, c->idle, srv->idle_ns);
    if (rc == TW_OK)
        c->deadline = deadline;
    return rc;
}

/* ---- socket events (epoll thread) ---------------------------------------- */

/* Send what is buffered; false if the connection was closed. */
static bool flush(struct server *srv, struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out_off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            close_conn(srv, c, R_ERROR); /* EPIPE, ECONNRESET, ... */
            return false;
        }
    }
    if (c->out_off == c->out_len) {
        c->out_off = c->out_len = 0;
    } else if (c->out_off > 0 && c->out_len == OUT_CAP) {
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    uint32_t ev = 0;
    if (c->out_len < OUT_CAP)
        ev |= EPOLLIN;              /* room for more: read */
    if (c->out_off < c->out_len)
        ev |= EPOLLOUT;             /* something to send */
    set_events(srv, c, ev);
    return true;
}

static void on_readable(struct server *srv, struct conn *c)
{
    ssize_t n = recv(c->fd, c->out + c->out_len, OUT_CAP - c->out_len, MSG_DONTWAIT);
    if (n == 0) {
        close_conn(srv, c, R_PEER);
        return;
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            close_conn(srv, c, R_ERROR);
        return;
    }
    srv->bytes += (uint64_t)n;
    c->out_len += (size_t)n;
    /* Data: push the idle timeout back. */
    if (idle_push_back(srv, c) != TW_OK) {
        /* TW_ENOENT (threaded only): the timer fired before this read; the
         * expired stack brings the conn back to be closed. Stop watching it
         * meanwhile. */
        if (epoll_ctl(srv->epfd, EPOLL_CTL_DEL, c->fd, NULL) != 0)
            die("epoll_ctl(DEL)");
        c->state = C_DOOMED;
        return;
    }
    flush(srv, c);
}

static void on_accept(struct server *srv)
{
    for (;;) {
        int fd = accept4(srv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: stop accepting until a connection
                 * closes or the next heartbeat. */
                struct epoll_event e = { .events = 0, .data.ptr = &tag_listen };
                if (epoll_ctl(srv->epfd, EPOLL_CTL_MOD, srv->lfd, &e) != 0)
                    die("epoll_ctl(listen)");
                srv->accept_paused = true;
            }
            return; /* EAGAIN, or paused */
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->state = C_OPEN;
        int rc = idle_start(srv, c);
        if (rc != TW_OK) {
            fprintf(stderr, "idle_server: tw_schedule: %s\n", tw_strerror(rc));
            close(fd);
            free(c);
            continue;
        }
        /* Linked before the epoll registration: from here on, the timer may
         * fire and the expired stack may bring c back at any time. */
        c->next = srv->live.next;
        c->prev = &srv->live;
        c->next->prev = c;
        srv->live.next = c;
        srv->open++;
        srv->accepted++;
        c->events = EPOLLIN;
        struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
        if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &e) != 0)
            die("epoll_ctl(ADD)");
    }
}

static void free_dead(struct server *srv)
{
    while (srv->dead) {
        struct conn *c = srv->dead;
        srv->dead = c->next_dead;
        free(c);
    }
}

/* Handle one batch of epoll events (both modes). Returns true if the
 * threaded mode's eventfd was among them. */
static bool handle_events(struct server *srv, const struct epoll_event *evs, int n)
{
    bool woken = false;
    for (int i = 0; i < n; i++) {
        void *p = evs[i].data.ptr;
        uint32_t ev = evs[i].events;
        if (p == &tag_listen) {
            on_accept(srv);
        } else if (p == &tag_event) {
            woken = true;
        } else if (p == &tag_wake) {
            srv->wake_fd_wakes++;    /* the next tw_next_due empties it */
        } else if (p == &tag_signal) {
            struct signalfd_siginfo si;
            while (read(srv->sfd, &si, sizeof si) == (ssize_t)sizeof si)
                srv->running = false;
        } else {
            struct conn *c = p;
            if (c->state != C_OPEN)
                continue;
            if (ev & EPOLLERR) {
                close_conn(srv, c, R_ERROR);
                continue;
            }
            if (ev & (EPOLLIN | EPOLLHUP)) {
                if (c->events & EPOLLIN)
                    on_readable(srv, c);
                else if (ev & EPOLLHUP) {
                    close_conn(srv, c, R_ERROR);
                    continue;
                }
            }
            if (c->state == C_OPEN && (ev & EPOLLOUT))
                flush(srv, c);
        }
    }
    return woken;
}

/* ---- the two loops ------------------------------------------------------- */

static void run_threaded(struct server *srv)
{
    struct epoll_event evs[MAX_EVENTS];
    while (srv->running) {
        int n = epoll_wait(srv->epfd, evs, MAX_EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        /* After the batch: nothing below frees a conn that a later event of
         * the same batch could still name. */
        if (handle_events(srv, evs, n)) {
            uint64_t cnt;
            ssize_t r = read(srv->efd, &cnt, sizeof cnt);
            (void)r;
            drain_expired(srv);
            uint64_t beats = atomic_load_explicit(&srv->beats, memory_order_relaxed);
            if (beats != srv->beats_seen)
                see_beat(srv, beats);
        }
        free_dead(srv);
    }

    /* Shutdown, on the epoll thread: the heartbeat first (synchronously: no
     * run of it is in progress when this returns), then the service. */
    int rc = tw_cancel_sync(srv->tw, srv->heartbeat);
    if (rc != TW_OK)
        fprintf(stderr, "idle_server: tw_cancel_sync(heartbeat): %s\n", tw_strerror(rc));
    rc = tw_stop(srv->tw, NULL);  /* callbacks returned; idle timers discarded */
    if (rc != TW_OK)
        fprintf(stderr, "idle_server: tw_stop: %s\n", tw_strerror(rc));
    drain_expired(srv);           /* what the last callbacks pushed */
    free_dead(srv);
}

/* epoll_wait's timeout until the service's time `due`: -1 (block) for
 * UINT64_MAX, 0 if it has come, else whole ms rounded up, so that the wait
 * never ends before it. */
static int timeout_until(const struct server *srv, uint64_t due)
{
    if (due == UINT64_MAX)
        return -1;
    uint64_t now = svc_now(srv);
    if (due <= now)
        return 0;
    uint64_t ms = (due - now + MS - 1) / MS;
    return ms >= INT_MAX ? INT_MAX : (int)ms;
}

static void run_loop(struct server *srv)
{
    struct epoll_event evs[MAX_EVENTS];
    while (srv->running) {
        uint64_t due = tw_next_due(srv->tw);  /* also empties tw_wake_fd */
        int timeout = timeout_until(srv, due);
        int n = epoll_wait(srv->epfd, evs, MAX_EVENTS, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        if (n == 0 && timeout > 0 && timeout < INT_MAX && svc_now(srv) < due)
            srv->early_wakes++;       /* never, with the timeout rounded up */
        handle_events(srv, evs, n);
        free_dead(srv);
        /* The due callbacks run here, on this thread: idle closes, heartbeat. */
        int rc = tw_advance(srv->tw, svc_now(srv));
        if (rc != TW_OK) {
            fprintf(stderr, "idle_server: tw_advance: %s\n", tw_strerror(rc));
            exit(1);
        }
    }
    /* Shutdown: no callback runs outside tw_advance, so none is running and
     * none will; tw_stop discards the idle timers and the heartbeat. */
    int rc = tw_stop(srv->tw, NULL);
    if (rc != TW_OK)
        fprintf(stderr, "idle_server: tw_stop: %s\n", tw_strerror(rc));
}

/* ---- setup, shutdown ----------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: idle_server [--loop] [--port P] [--idle-ms M] [--heartbeat-ms H]"
                    " [--workers W] [--verbose]\n");
    exit(2);
}

static unsigned long arg_num(const char *s, unsigned long max)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v > max)
        usage();
    return v;
}

static void epoll_add(int epfd, int fd, void *tag, const char *what)
{
    struct epoll_event e = { .events = EPOLLIN, .data.ptr = tag };
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) != 0)
        die(what);
}

int main(int argc, char **argv)
{
    unsigned long port = 0, idle_ms = 10000, heartbeat_ms = 1000, workers = 1;
    bool verbose = false, loop = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--verbose")) { verbose = true; continue; }
        if (!strcmp(a, "--loop")) { loop = true; continue; }
        if (i + 1 >= argc)
            usage();
        if (!strcmp(a, "--port")) port = arg_num(argv[++i], 65535);
        else if (!strcmp(a, "--idle-ms")) idle_ms = arg_num(argv[++i], 86400000);
        else if (!strcmp(a, "--heartbeat-ms")) heartbeat_ms = arg_num(argv[++i], 86400000);
        else if (!strcmp(a, "--workers")) workers = arg_num(argv[++i], 64);
        else usage();
    }
    if (idle_ms == 0 || heartbeat_ms == 0)
        usage();

    /* As many descriptors as we are allowed. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    static struct server srv_storage;
    struct server *srv = &srv_storage;
    g_srv = srv;
    srv->loop = loop;
    srv->idle_ns = idle_ms * MS;
    srv->verbose = verbose;
    srv->running = true;
    srv->efd = -1;
    srv->live.next = srv->live.prev = &srv->live;
    atomic_init(&srv->expired, NULL);
    atomic_init(&srv->beats, 0);

    /* Signals: blocked in every thread (the service's threads inherit the
     * mask), read from a signalfd by the epoll thread. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &sigs, NULL) != 0)
        die("sigprocmask");
    if ((srv->sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
        die("signalfd");
    if (!loop && (srv->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        die("eventfd");
    if ((srv->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
        die("epoll_create1");

    srv->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (srv->lfd < 0)
        die("socket");
    int one = 1;
    setsockopt(srv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(srv->lfd, (struct sockaddr *)&addr, sizeof addr) != 0)
        die("bind 127.0.0.1");
    if (listen(srv->lfd, 4096) != 0)
        die("listen");
    socklen_t alen = sizeof addr;
    if (getsockname(srv->lfd, (struct sockaddr *)&addr, &alen) != 0)
        die("getsockname");

    epoll_add(srv->epfd, srv->lfd, &tag_listen, "epoll_ctl(listen)");
    if (!loop)
        epoll_add(srv->epfd, srv->efd, &tag_event, "epoll_ctl(eventfd)");
    epoll_add(srv->epfd, srv->sfd, &tag_signal, "epoll_ctl(signalfd)");

    tw_config cfg;
    tw_config_init(&cfg);
    cfg.workers = loop ? 0 : (uint32_t)workers;
    cfg.clock = loop ? TW_CLOCK_MANUAL : TW_CLOCK_MONOTONIC;
    srv->start_ns = mono_ns();  /* loop: service time 0 */
    int rc = tw_create(&cfg, &srv->tw);
    if (rc != TW_OK) {
        fprintf(stderr, "idle_server: tw_create: %s\n", tw_strerror(rc));
        return 1;
    }
    if (loop) {
        int wfd = tw_wake_fd(srv->tw);  /* the service's: tw_destroy closes it */
        if (wfd < 0) {
            fprintf(stderr, "idle_server: tw_wake_fd: %s\n", tw_strerror(wfd));
            return 1;
        }
        epoll_add(srv->epfd, wfd, &tag_wake, "epoll_ctl(wake fd)");
    }
    rc = tw_schedule_every(srv->tw, heartbeat_ms * MS, heartbeat_ms * MS,
                           loop ? on_heartbeat_loop : on_heartbeat, srv, &srv->heartbeat);
    if (rc != TW_OK) {
        fprintf(stderr, "idle_server: tw_schedule_every: %s\n", tw_strerror(rc));
        return 1;
    }

    printf("idle_server: listening on 127.0.0.1:%u\n", (unsigned)ntohs(addr.sin_port));
    fflush(stdout);

    if (loop)
        run_loop(srv);
    else
        run_threaded(srv);

    /* No callback runs any more: free what is left. */
    uint64_t left = srv->open;
    while (srv->live.next != &srv->live) {
        struct conn *c = srv->live.next;
        if (c->fd >= 0)
            close(c->fd);
        list_remove(c);
        srv->open--;
        free(c);
    }
    tw_destroy(srv->tw);
    close(srv->lfd);
    if (srv->efd >= 0)
        close(srv->efd);
    close(srv->sfd);
    close(srv->epfd);
    srv->open = left;
    print_stats(srv, "stats");
    return 0;
}
