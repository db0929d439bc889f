/*
 * heap_timer.c: the classic timer service, done well in C, as the baseline
 * the wheel is measured against.
 *
 * Design. One binary min-heap ordered by deadline, one pthread mutex over
 * everything, a dispatcher thread and a pool of worker threads.
 *
 *  - The heap array holds {deadline, node} pairs, so sifting compares keys
 *    that sit in the array rather than chasing node pointers; each node
 *    knows its index in the heap, so cancel and reschedule are O(log n)
 *    (remove or re-sift in place), not a search.
 *  - Nodes live in chunks of HT_CHUNK and are recycled through a free list;
 *    a handle is (generation << 32 | index), generation >= 1, so a stale
 *    handle is refused and never touches a recycled node.
 *  - The dispatcher sleeps on a condition variable bound to CLOCK_MONOTONIC
 *    (pthread_condattr_setclock) until the earliest deadline. A schedule or
 *    reschedule that makes a new earliest deadline signals it, but only when
 *    it sleeps for longer than that. Due timers are popped HT_BATCH at a time
 *    (the mutex is dropped between batches so producers keep going in a
 *    burst) and handed to the workers through a run queue with its own
 *    mutex and condition variable.
 *  - Callbacks run on the workers, outside both locks, so a callback may
 *    call anything, including cancel or reschedule of itself.
 *
 * States of a node (changed under `lock`, except QUEUED -> RUNNING, which a
 * worker makes by CAS without the heap lock):
 *
 *   FREE -> PENDING (in heap) -> QUEUED (in run queue) -> RUNNING -> FREE
 *   PENDING -> FREE by cancel
 *   QUEUED -> CANCELLED by cancel: the worker frees it without running it
 *   QUEUED -> REARM by reschedule: the worker puts it back into the heap
 *
 * So cancel succeeds iff the callback has not started, and reschedule moves
 * a due timer whose callback has not started, as timerwheel does.
 *
 * Accuracy: never early (deadline = CLOCK_MONOTONIC read in the call plus
 * the delay, fired when CLOCK_MONOTONIC >= deadline); late by the
 * condition-variable wake-up latency plus queueing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twbench.h"

#define HT_CHUNK_SHIFT 16                 /* 65536 nodes per chunk */
#define HT_CHUNK (1u << HT_CHUNK_SHIFT)
#define HT_BATCH 256                      /* due timers popped per lock hold */
#define HT_TAKE 64                        /* timers a worker takes at once */
#define HT_MAX_WORKERS 64

enum { HT_FREE, HT_PENDING, HT_QUEUED, HT_RUNNING, HT_CANCELLED, HT_REARM };

typedef struct ht_node {
    uint64_t deadline;
    bench_cb cb;
    void *arg;
    struct ht_node *next;                 /* free list or run queue */
    uint32_t heap_idx;
    uint32_t gen;                         /* >= 1; bumped when freed */
    uint32_t self;                        /* own index */
    _Atomic uint32_t state;
} ht_node;

typedef struct ht_entry {
    uint64_t deadline;
    ht_node *node;
} ht_entry;

typedef struct heap_timer {
    pthread_mutex_t lock;                 /* heap, pool, node states */
    pthread_cond_t wake;                  /* dispatcher: new earliest, stop */
    ht_entry *heap;
    size_t len, cap;
    ht_node **chunks;
    size_t nchunks, chunks_cap;
    uint32_t nnodes;                      /* nodes carved from chunks */
    ht_node *free_list;
    uint64_t sleep_until;                 /* dispatcher asleep until; 0 = awake */
    int stopping;

    pthread_mutex_t qlock;                /* run queue */
    pthread_cond_t qcond;
    ht_node *qhead, *qtail;
    int qstop;

    pthread_t dispatcher;
    pthread_t workers[HT_MAX_WORKERS];
    unsigned nworkers;
} heap_timer;

/* ---- heap ---------------------------------------------------------------- */

static void ht_heap_set(heap_timer *h, size_t i, ht_entry e)
{
    h->heap[i] = e;
    e.node->heap_idx = (uint32_t)i;
}

static void ht_sift_up(heap_timer *h, size_t i)
{
    ht_entry e = h->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->heap[parent].deadline <= e.deadline)
            break;
        ht_heap_set(h, i, h->heap[parent]);
        i = parent;
    }
    ht_heap_set(h, i, e);
}

static void ht_sift_down(heap_timer *h, size_t i)
{
    ht_entry e = h->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->len)
            break;
        if (c + 1 < h->len && h->heap[c + 1].deadline < h->heap[c].deadline)
            c++;
        if (e.deadline <= h->heap[c].deadline)
            break;
        ht_heap_set(h, i, h->heap[c]);
        i = c;
    }
    ht_heap_set(h, i, e);
}

static int ht_heap_push(heap_timer *h, ht_node *n)
{
    if (h->len == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 1024;
        ht_entry *a = realloc(h->heap, cap * sizeof *a);
        if (!a)
            return -1;
        h->heap = a;
        h->cap = cap;
    }
    h->heap[h->len] = (ht_entry){ n->deadline, n };
    n->heap_idx = (uint32_t)h->len;
    h->len++;
    ht_sift_up(h, h->len - 1);
    return 0;
}

static void ht_heap_remove(heap_timer *h, size_t i)
{
    h->len--;
    if (i == h->len)
        return;
    ht_heap_set(h, i, h->heap[h->len]);
    if (i > 0 && h->heap[(i - 1) / 2].deadline > h->heap[i].deadline)
        ht_sift_up(h, i);
    else
        ht_sift_down(h, i);
}

/* Re-sift node n after its deadline changed. */
static void ht_heap_update(heap_timer *h, ht_node *n)
{
    size_t i = n->heap_idx;
    h->heap[i].deadline = n->deadline;
    if (i > 0 && h->heap[(i - 1) / 2].deadline > n->deadline)
        ht_sift_up(h, i);
    else
        ht_sift_down(h, i);
}

/* Wake the dispatcher if n became the earliest and it sleeps past it. */
static void ht_maybe_wake(heap_timer *h, ht_node *n)
{
    if (n->heap_idx == 0 && n->deadline < h->sleep_until)
        pthread_cond_signal(&h->wake);
}

/* ---- node pool (under lock) ------------------------------------------------ */

static ht_node *ht_node_at(heap_timer *h, uint32_t idx)
{
    return &h->chunks[idx >> HT_CHUNK_SHIFT][idx & (HT_CHUNK - 1)];
}

static ht_node *ht_node_alloc(heap_timer *h)
{
    ht_node *n = h->free_list;
    if (n) {
        h->free_list = n->next;
        return n;
    }
    if ((h->nnodes & (HT_CHUNK - 1)) == 0) {
        if (h->nnodes == UINT32_MAX - HT_CHUNK + 1)
            return NULL;
        if (h->nchunks == h->chunks_cap) {
            size_t cap = h->chunks_cap ? 2 * h->chunks_cap : 16;
            ht_node **c = realloc(h->chunks, cap * sizeof *c);
            if (!c)
                return NULL;
            h->chunks = c;
            h->chunks_cap = cap;
        }
        ht_node *chunk = malloc(HT_CHUNK * sizeof *chunk);
        if (!chunk)
            return NULL;
        h->chunks[h->nchunks++] = chunk;
    }
    n = ht_node_at(h, h->nnodes);
    n->self = h->nnodes++;
    n->gen = 1;
    return n;
}

static void ht_node_free(heap_timer *h, ht_node *n)
{
    n->gen = n->gen == UINT32_MAX ? 1 : n->gen + 1;
    atomic_store_explicit(&n->state, HT_FREE, memory_order_relaxed);
    n->next = h->free_list;
    h->free_list = n;
}

static uint64_t ht_handle(const ht_node *n)
{
    return (uint64_t)n->gen << 32 | n->self;
}

static ht_node *ht_lookup(heap_timer *h, uint64_t handle)
{
    uint32_t idx = (uint32_t)handle;
    if (handle == 0 || idx >= h->nnodes)
        return NULL;
    ht_node *n = ht_node_at(h, idx);
    return n->gen == (uint32_t)(handle >> 32) ? n : NULL;
}

/* ---- threads ----------------------------------------------------------------- */

static void ht_queue_push(heap_timer *h, ht_node *first, ht_node *last, unsigned n)
{
    pthread_mutex_lock(&h->qlock);
    if (h->qtail)
        h->qtail->next = first;
    else
        h->qhead = first;
    h->qtail = last;
    if (n > 1)
        pthread_cond_broadcast(&h->qcond);
    else
        pthread_cond_signal(&h->qcond);
    pthread_mutex_unlock(&h->qlock);
}

/* Pops up to HT_BATCH due timers into a list; returns how many. */
static unsigned ht_pop_due(heap_timer *h, uint64_t now, ht_node **first, ht_node **last)
{
    unsigned n = 0;
    *first = *last = NULL;
    while (n < HT_BATCH && h->len > 0 && h->heap[0].deadline <= now) {
        ht_node *node = h->heap[0].node;
        ht_heap_remove(h, 0);
        /* Taken by a worker's CAS QUEUED -> RUNNING; the run queue's mutex
         * orders this store before it. */
        atomic_store_explicit(&node->state, HT_QUEUED, memory_order_relaxed);
        node->next = NULL;
        if (*last)
            (*last)->next = node;
        else
            *first = node;
        *last = node;
        n++;
    }
    return n;
}

static void *ht_dispatcher_main(void *arg)
{
    heap_timer *h = arg;
    pthread_mutex_lock(&h->lock);
    while (!h->stopping) {
        if (h->len == 0) {
            h->sleep_until = UINT64_MAX;
            pthread_cond_wait(&h->wake, &h->lock);
            h->sleep_until = 0;
            continue;
        }
        uint64_t now = bench_now_ns();
        if (h->heap[0].deadline > now) {
            h->sleep_until = h->heap[0].deadline;
            struct timespec ts = bench_ns_to_timespec(h->sleep_until);
            pthread_cond_timedwait(&h->wake, &h->lock, &ts);
            h->sleep_until = 0;
            continue;
        }
        ht_node *first, *last;
        unsigned n = ht_pop_due(h, now, &first, &last);
        pthread_mutex_unlock(&h->lock);
        ht_queue_push(h, first, last, n);
        pthread_mutex_lock(&h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

/* After the callbacks of a take: free what ran or was cancelled, put back
 * what was rescheduled while queued. */
static void ht_settle(heap_timer *h, ht_node **nodes, unsigned n)
{
    pthread_mutex_lock(&h->lock);
    for (unsigned i = 0; i < n; i++) {
        ht_node *node = nodes[i];
        if (atomic_load_explicit(&node->state, memory_order_relaxed) == HT_REARM) {
            atomic_store_explicit(&node->state, HT_PENDING, memory_order_relaxed);
            if (ht_heap_push(h, node) == 0) {
                ht_maybe_wake(h, node);
                continue;
            }
            fprintf(stderr, "heap: out of memory re-arming a timer; dropped\n");
        }
        ht_node_free(h, node);
    }
    pthread_mutex_unlock(&h->lock);
}

static void *ht_worker_main(void *arg)
{
    heap_timer *h = arg;
    ht_node *take[HT_TAKE];
    pthread_mutex_lock(&h->qlock);
    for (;;) {
        while (!h->qhead && !h->qstop)
            pthread_cond_wait(&h->qcond, &h->qlock);
        if (!h->qhead)
            break;
        unsigned n = 0;
        while (n < HT_TAKE && h->qhead) {
            take[n++] = h->qhead;
            h->qhead = h->qhead->next;
        }
        if (!h->qhead)
            h->qtail = NULL;
        pthread_mutex_unlock(&h->qlock);
        for (unsigned i = 0; i < n; i++) {
            uint32_t expect = HT_QUEUED;
            /* Claims the run against cancel/reschedule's CAS on QUEUED
             * (made under the heap lock). */
            if (atomic_compare_exchange_strong_explicit(&take[i]->state, &expect, HT_RUNNING,
                                                        memory_order_acq_rel,
                                                        memory_order_acquire))
                take[i]->cb(ht_handle(take[i]), take[i]->arg);
        }
        ht_settle(h, take, n);
        pthread_mutex_lock(&h->qlock);
    }
    pthread_mutex_unlock(&h->qlock);
    return NULL;
}

/* ---- API ---------------------------------------------------------------------- */

static void ht_destroy(void *svc);

static void *ht_create(const bench_cfg *cfg)
{
    heap_timer *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->wake, &ca);
    pthread_mutex_init(&h->qlock, NULL);
    pthread_cond_init(&h->qcond, NULL);
    pthread_condattr_destroy(&ca);
    h->nworkers = cfg->workers ? cfg->workers : 1;
    if (h->nworkers > HT_MAX_WORKERS)
        h->nworkers = HT_MAX_WORKERS;
    if (pthread_create(&h->dispatcher, NULL, ht_dispatcher_main, h) != 0) {
        fprintf(stderr, "heap: cannot start the dispatcher\n");
        free(h);
        return NULL;
    }
    for (unsigned i = 0; i < h->nworkers; i++) {
        if (pthread_create(&h->workers[i], NULL, ht_worker_main, h) != 0) {
            fprintf(stderr, "heap: cannot start worker %u\n", i);
            h->nworkers = i;
            ht_destroy(h);
            return NULL;
        }
    }
    return h;
}

static void ht_destroy(void *svc)
{
    heap_timer *h = svc;
    pthread_mutex_lock(&h->lock);
    h->stopping = 1;
    pthread_cond_signal(&h->wake);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->dispatcher, NULL);
    pthread_mutex_lock(&h->qlock);
    h->qstop = 1;
    pthread_cond_broadcast(&h->qcond);
    pthread_mutex_unlock(&h->qlock);
    for (unsigned i = 0; i < h->nworkers; i++)
        pthread_join(h->workers[i], NULL);
    for (size_t i = 0; i < h->nchunks; i++)
        free(h->chunks[i]);
    free(h->chunks);
    free(h->heap);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->wake);
    pthread_mutex_destroy(&h->qlock);
    pthread_cond_destroy(&h->qcond);
    free(h);
}

static uint64_t ht_deadline(uint64_t delay_ns)
{
    uint64_t now = bench_now_ns();
    return delay_ns > UINT64_MAX - now ? UINT64_MAX : now + delay_ns;
}

static uint64_t ht_schedule(void *svc, uint64_t delay_ns, bench_cb cb, void *arg)
{
    heap_timer *h = svc;
    uint64_t deadline = ht_deadline(delay_ns);
    uint64_t handle = 0;
    pthread_mutex_lock(&h->lock);
    ht_node *n = ht_node_alloc(h);
    if (n) {
        n->deadline = deadline;
        n->cb = cb;
        n->arg = arg;
        atomic_store_explicit(&n->state, HT_PENDING, memory_order_relaxed);
        if (ht_heap_push(h, n) == 0) {
            ht_maybe_wake(h, n);
            handle = ht_handle(n);
        } else {
            ht_node_free(h, n);
        }
    }
    pthread_mutex_unlock(&h->lock);
    return handle;
}

static int ht_cancel(void *svc, uint64_t handle)
{
    heap_timer *h = svc;
    int ok = 0;
    pthread_mutex_lock(&h->lock);
    ht_node *n = ht_lookup(h, handle);
    if (n) {
        uint32_t st = atomic_load_explicit(&n->state, memory_order_relaxed);
        if (st == HT_PENDING) {
            ht_heap_remove(h, n->heap_idx);
            ht_node_free(h, n);
            ok = 1;
        } else if (st == HT_QUEUED || st == HT_REARM) {
            /* Against the worker's CAS QUEUED -> RUNNING. */
            ok = atomic_compare_exchange_strong_explicit(&n->state, &st, HT_CANCELLED,
                                                         memory_order_acq_rel,
                                                         memory_order_acquire);
        }
    }
    pthread_mutex_unlock(&h->lock);
    return ok;
}

static int ht_reschedule(void *svc, uint64_t handle, uint64_t delay_ns)
{
    heap_timer *h = svc;
    uint64_t deadline = ht_deadline(delay_ns);
    int ok = 0;
    pthread_mutex_lock(&h->lock);
    ht_node *n = ht_lookup(h, handle);
    if (n) {
        uint32_t st = atomic_load_explicit(&n->state, memory_order_relaxed);
        if (st == HT_PENDING) {
            n->deadline = deadline;
            ht_heap_update(h, n);
            ht_maybe_wake(h, n);
            ok = 1;
        } else if (st == HT_REARM) {
            n->deadline = deadline;
            ok = 1;
        } else if (st == HT_QUEUED) {
            /* Against the worker's CAS QUEUED -> RUNNING; the worker reads
             * the deadline under this lock once it sees REARM. */
            ok = atomic_compare_exchange_strong_explicit(&n->state, &st, HT_REARM,
                                                         memory_order_acq_rel,
                                                         memory_order_acquire);
            if (ok)
                n->deadline = deadline;
        }
    }
    pthread_mutex_unlock(&h->lock);
    return ok;
}

const bench_impl bench_impl_heap = {
    .name = "heap",
    .create = ht_create,
    .destroy = ht_destroy,
    .schedule = ht_schedule,
    .cancel = ht_cancel,
    .reschedule = ht_reschedule,
    .callbacks_on = "worker pool",
};
