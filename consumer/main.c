/*
 * consumer/main.c: a program outside timerwheel's tree, built against an
 * installed timerwheel (scripts/test-consumer.sh): once with CMake
 * (find_package(timerwheel), consumer/CMakeLists.txt) and once with
 * pkg-config (`pkg-config --cflags --libs timerwheel`).
 *
 *   consumer [expected-version]
 *
 * Prints "timerwheel <version>"; exits 0 if the header's TW_VERSION_*
 * macros, tw_version(), tw_version_number() and the expected version (if
 * given) agree and a MANUAL-clock service fires, reschedules and cancels
 * as documented; 1 otherwise.
 */
#include <timerwheel.h>

#include <stdio.h>
#include <string.h>

#define MS 1000000ull

static int fired_a, fired_b;

static void on_a(tw_timer t, void *arg)
{
    (void)t;
    (void)arg;
    fired_a++;
}

static void on_b(tw_timer t, void *arg)
{
    (void)t;
    *(int *)arg += 1;
}

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "consumer: %s:%d: check failed: %s\n",        \
                    __FILE__, __LINE__, #cond);                           \
            return 1;                                                     \
        }                                                                 \
    } while (0)

int main(int argc, char **argv)
{
    char hdr[32];
    snprintf(hdr, sizeof hdr, "%d.%d.%d", TW_VERSION_MAJOR, TW_VERSION_MINOR,
             TW_VERSION_PATCH);
    printf("timerwheel %s\n", tw_version());
    CHECK(strcmp(hdr, tw_version()) == 0);
    CHECK(tw_version_number() == (unsigned)(TW_VERSION_MAJOR * 10000 +
                                            TW_VERSION_MINOR * 100 + TW_VERSION_PATCH));
    if (argc > 1)
        CHECK(strcmp(argv[1], tw_version()) == 0);

    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    cfg.tick_ns = 1 * MS;
    tw_service *s;
    CHECK(tw_create(&cfg, &s) == TW_OK);

    tw_timer a, b, c;
    CHECK(tw_schedule(s, 10 * MS, on_a, NULL, &a) == TW_OK);
    CHECK(tw_schedule_every(s, 5 * MS, 5 * MS, on_b, &fired_b, &b) == TW_OK);
    CHECK(tw_schedule(s, 100 * MS, on_a, NULL, &c) == TW_OK);
    CHECK(tw_reschedule(s, a, 20 * MS) == TW_OK);   /* a: 20 ms */

    /* One tick at a time: a periodic timer whose later deadlines have also
     * passed when a run returns skips them (one jump = one run). */
    for (uint64_t now = 1; now <= 19; now++)
        CHECK(tw_advance(s, now * MS) == TW_OK);
    CHECK(fired_a == 0);                            /* never early */
    CHECK(tw_advance(s, 21 * MS) == TW_OK);
    CHECK(fired_a == 1);                            /* at most a tick late */
    CHECK(fired_b == 4);                            /* 5, 10, 15, 20 ms */
    CHECK(tw_cancel(s, a) == TW_ENOENT);            /* fired */
    CHECK(tw_cancel(s, c) == TW_OK);
    CHECK(tw_cancel_sync(s, b) == TW_OK);
    CHECK(tw_advance(s, 200 * MS) == TW_OK);
    CHECK(fired_a == 1 && fired_b == 4);

    tw_stats st;
    tw_stats_get(s, &st);
    CHECK(st.scheduled == 3 && st.fired == 5 && st.cancelled == 2 && st.pending == 0);
    CHECK(tw_stop(s, NULL) == TW_OK);
    CHECK(tw_schedule(s, 0, on_a, NULL, NULL) == TW_ESHUTDOWN);
    printf("consumer: %s\n", tw_strerror(TW_ESHUTDOWN));
    tw_destroy(s);
    return 0;
}
