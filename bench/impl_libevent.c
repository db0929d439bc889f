/*
 * impl_libevent.c: libevent 2.1 as a multi-producer timer service.
 *
 * What a C programmer would write with libevent: evthread_use_pthreads(),
 * one event_base, one thread in event_base_loop(EVLOOP_NO_EXIT_ON_EMPTY),
 * and producer threads that evtimer_new + event_add, event_del, and push a
 * deadline with event_add on the pending event (libevent replaces the old
 * timeout: that is its reschedule). libevent keeps timers in a min-heap
 * under the base's lock; callbacks run on the loop thread.
 *
 * The base is configured for honest timing: EVENT_BASE_FLAG_PRECISE_TIMER
 * (CLOCK_MONOTONIC and timerfd rather than CLOCK_MONOTONIC_COARSE and
 * millisecond epoll timeouts) and EVENT_BASE_FLAG_NO_CACHE_TIME (a producer
 * adding a timer while the loop runs callbacks would otherwise start its
 * delay from the loop's cached, older, time and fire early). Delays are
 * rounded up to whole microseconds plus one, since libevent truncates its
 * clock to microseconds.
 *
 * Each timer is a small record around its struct event with a state word:
 * the loop's callback claims PENDING -> FIRED, cancel claims PENDING ->
 * CANCELLED, so exactly one of "callback runs" and "cancel succeeds"
 * happens. A cancelled record is freed at once (event_del waits for a
 * callback of that event running on the loop thread); a fired one goes to
 * a list the loop thread owns and is freed at destroy, so a stale handle
 * still points at a record that answers "not pending". Limit: a cancel must
 * not race with another operation on the same handle (the workloads never
 * do that).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "twbench.h"

enum { LEV_PENDING, LEV_FIRED, LEV_CANCELLED };

struct lev_service;

typedef struct lev_timer {
    struct event *ev;
    bench_cb cb;
    void *arg;
    struct lev_service *svc;
    struct lev_timer *next;      /* fired list, loop thread only */
    _Atomic unsigned state;
} lev_timer;

typedef struct lev_service {
    struct event_base *base;
    pthread_t loop;
    lev_timer *fired;            /* loop thread only, then destroy */
} lev_service;

static pthread_once_t lev_threads_once = PTHREAD_ONCE_INIT;
static int lev_threads_rc;

static void lev_threads_init(void)
{
    lev_threads_rc = evthread_use_pthreads();
}

static struct timeval lev_tv(uint64_t delay_ns)
{
    uint64_t us = delay_ns / 1000 + (delay_ns % 1000 != 0) + 1;
    struct timeval tv = { .tv_sec = (time_t)(us / 1000000),
                          .tv_usec = (suseconds_t)(us % 1000000) };
    return tv;
}

static void *lev_loop_main(void *arg)
{
    lev_service *s = arg;
    if (event_base_loop(s->base, EVLOOP_NO_EXIT_ON_EMPTY) < 0)
        fprintf(stderr, "libevent: event_base_loop failed\n");
    return NULL;
}

static void *lev_create(const bench_cfg *cfg)
{
    (void)cfg; /* no tick (a heap), no worker pool: callbacks on the loop thread */
    pthread_once(&lev_threads_once, lev_threads_init);
    if (lev_threads_rc != 0) {
        fprintf(stderr, "libevent: evthread_use_pthreads failed\n");
        return NULL;
    }
    lev_service *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    struct event_config *ec = event_config_new();
    if (!ec) {
        free(s);
        return NULL;
    }
    event_config_set_flag(ec, EVENT_BASE_FLAG_PRECISE_TIMER);
    event_config_set_flag(ec, EVENT_BASE_FLAG_NO_CACHE_TIME);
    s->base = event_base_new_with_config(ec);
    event_config_free(ec);
    if (!s->base) {
        fprintf(stderr, "libevent: event_base_new_with_config failed\n");
        free(s);
        return NULL;
    }
    if (pthread_create(&s->loop, NULL, lev_loop_main, s) != 0) {
        fprintf(stderr, "libevent: cannot start the loop thread\n");
        event_base_free(s->base);
        free(s);
        return NULL;
    }
    return s;
}

static void lev_destroy(void *svc)
{
    lev_service *s = svc;
    event_base_loopbreak(s->base);
    pthread_join(s->loop, NULL);
    for (lev_timer *t = s->fired, *next; t; t = next) {
        next = t->next;
        event_free(t->ev);
        free(t);
    }
    event_base_free(s->base);
    free(s);
}

/* Loop thread. */
static void lev_fire(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    lev_timer *t = arg;
    unsigned expect = LEV_PENDING;
    /* Claims the run against cancel's CAS PENDING -> CANCELLED. A record
     * already FIRED (re-added by a reschedule that lost a race with this
     * callback) or CANCELLED is left to whoever owns it. */
    if (!atomic_compare_exchange_strong_explicit(&t->state, &expect, LEV_FIRED,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire))
        return;
    t->cb((uint64_t)(uintptr_t)t, t->arg);
    t->next = t->svc->fired;
    t->svc->fired = t;
}

static uint64_t lev_schedule(void *svc, uint64_t delay_ns, bench_cb cb, void *arg)
{
    lev_service *s = svc;
    lev_timer *t = malloc(sizeof *t);
    if (!t)
        return 0;
    t->cb = cb;
    t->arg = arg;
    t->svc = s;
    t->next = NULL;
    atomic_init(&t->state, LEV_PENDING);
    t->ev = evtimer_new(s->base, lev_fire, t);
    struct timeval tv = lev_tv(delay_ns);
    if (!t->ev || event_add(t->ev, &tv) != 0) {
        if (t->ev)
            event_free(t->ev);
        free(t);
        return 0;
    }
    return (uint64_t)(uintptr_t)t;
}

static int lev_cancel(void *svc, uint64_t handle)
{
    (void)svc;
    lev_timer *t = (lev_timer *)(uintptr_t)handle;
    unsigned expect = LEV_PENDING;
    if (!t)
        return 0;
    /* Against lev_fire's CAS PENDING -> FIRED. */
    if (!atomic_compare_exchange_strong_explicit(&t->state, &expect, LEV_CANCELLED,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire))
        return 0;
    /* event_free = event_del (which waits for lev_fire if it is running
     * this event on the loop thread) + free. */
    event_free(t->ev);
    free(t);
    return 1;
}

static int lev_reschedule(void *svc, uint64_t handle, uint64_t delay_ns)
{
    (void)svc;
    lev_timer *t = (lev_timer *)(uintptr_t)handle;
    if (!t || atomic_load_explicit(&t->state, memory_order_acquire) != LEV_PENDING)
        return 0;
    struct timeval tv = lev_tv(delay_ns);
    if (event_add(t->ev, &tv) != 0)
        return 0;
    /* Fired between the check and event_add: the add re-armed a spent
     * event; take it back out (lev_fire ignores it anyway). */
    if (atomic_load_explicit(&t->state, memory_order_acquire) != LEV_PENDING) {
        event_del(t->ev);
        return 0;
    }
    return 1;
}

const bench_impl bench_impl_libevent = {
    .name = "libevent",
    .create = lev_create,
    .destroy = lev_destroy,
    .schedule = lev_schedule,
    .cancel = lev_cancel,
    .reschedule = lev_reschedule,
    .callbacks_on = "loop thread",
};
