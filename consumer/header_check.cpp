// consumer/header_check.cpp: the public header compiles as C++11 and its
// functions link with C linkage (extern "C" in timerwheel.h).
// scripts/test-consumer.sh: g++/clang++ -std=c++11 -Wall -Wextra -Werror,
// -fsyntax-only and a real link against the installed library.
#include <timerwheel.h>

#include <cstdio>

static void on_timer(tw_timer, void *arg)
{
    ++*static_cast<int *>(arg);
}

int main()
{
    tw_config cfg;
    tw_config_init(&cfg);
    cfg.clock = TW_CLOCK_MANUAL;
    tw_service *s = nullptr;
    if (tw_create(&cfg, &s) != TW_OK)
        return 1;
    int fired = 0;
    tw_timer t = 0;
    tw_callback cb = on_timer;
    if (tw_schedule(s, 1000000, cb, &fired, &t) != TW_OK)
        return 1;
    if (tw_advance(s, 3000000) != TW_OK || fired != 1)
        return 1;
    uint64_t hist[TW_LATENESS_BUCKETS];
    tw_lateness_histogram(s, hist);
    std::printf("C++: timerwheel %s, %s\n", tw_version(), tw_strerror(tw_cancel(s, t)));
    tw_destroy(s);
    return 0;
}
