/*
 * fuzz_decode.h: the decoder shared by the libFuzzer target (fuzz_api.c)
 * and the regression test (tests/test_fuzz_regressions.c).
 *
 * tw_fuzz_run turns bytes into a sequence of timerwheel API calls on a
 * MANUAL-clock service with a tiny wheel (and a second service whose
 * handles must be refused), and checks every return code and every
 * callback against a simple oracle: never early (nor before its due tick),
 * exactly once, a cancelled timer never runs, on_pending gets each live
 * timer once at stop, and tw__check holds after every advance. The calls
 * of issue 15 too: absolute deadlines, batches that fail part-way, the
 * event loop's tw_next_due (exact near, a lower bound far) and tw_wake_fd
 * (readable exactly when a sooner timer was armed), tw_foreach_pending
 * against the pending set, and tw_pause / tw_resume refused on MANUAL. The
 * byte layout is described at the top of fuzz_decode.c; every input is
 * valid (missing bytes read as 0).
 */
#ifndef TW_FUZZ_DECODE_H
#define TW_FUZZ_DECODE_H

#include <stddef.h>
#include <stdint.h>

/* Run the calls encoded in data[0 .. size). Returns 0; a violation of the
 * oracle prints what went wrong to stderr and abort()s, so that libFuzzer
 * keeps the input and a replaying test fails. */
int tw_fuzz_run(const uint8_t *data, size_t size);

#endif /* TW_FUZZ_DECODE_H */
