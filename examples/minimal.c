/* minimal: create a service, arm a one-shot and a periodic timer, cancel, stop. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <timerwheel.h>

static atomic_int ticks;
static void on_tick(tw_timer t, void *arg) { (void)t; (void)arg; atomic_fetch_add(&ticks, 1); }
static void on_timeout(tw_timer t, void *arg) { (void)t; printf("timeout: %s\n", (const char *)arg); }

#define CHECK(call) do { int rc_ = (call); if (rc_ != TW_OK) { \
    fprintf(stderr, "%s: %s\n", #call, tw_strerror(rc_)); return 1; } } while (0)

int main(void)
{
    tw_service *s;
    tw_timer once, every;
    CHECK(tw_create(NULL, &s));                       /* defaults: 1 ms tick, 2 workers */
    CHECK(tw_schedule(s, 50000000, on_timeout, "50 ms passed", &once));
    CHECK(tw_schedule_every(s, 0, 10000000, on_tick, NULL, &every));   /* every 10 ms */
    nanosleep(&(struct timespec){ .tv_nsec = 200000000 }, NULL);        /* 200 ms */
    CHECK(tw_cancel_sync(s, every));                  /* no tick runs after this */
    int rc = tw_cancel(s, once);                      /* it fired already: TW_ENOENT */
    printf("ticks: %d, cancel one-shot: %s\n", atomic_load(&ticks), tw_strerror(rc));
    CHECK(tw_stop(s, NULL));                          /* discard whatever is still armed */
    tw_destroy(s);
    return 0;
}
