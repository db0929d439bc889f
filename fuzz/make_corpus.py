#!/usr/bin/env python3
"""Write the seed inputs of fuzz/corpus/ (see fuzz/fuzz_decode.c for the
byte layout: a shape byte, then opcode + argument bytes). Re-run after
changing the decoder's layout:  python3 fuzz/make_corpus.py"""
import os

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
B = 0x80  # opcode bit: act on service B

seeds = {
    # schedule a few one-shots, advance a little, then far
    "basic": [0x01, 0, 10, 0, 0, 1, 40, 0, 0, 6, 20, 0, 6, 200, 0, 8, 20, 0],
    # periodic timers, reschedule, cancel, advance
    "periodic": [0x05, 2, 3, 4, 0, 0, 2, 0, 0x81, 5, 0, 0, 6, 30, 0,
                 5, 1, 12, 3, 0, 6, 60, 0, 8, 30, 0, 4, 1, 6, 10, 0],
    # callbacks acting on their service: advance/stop/cancel_sync/cancel/reschedule/schedule
    "callbacks": [0x00, 0, 1, 1, 4, 0, 2, 2, 4, 0, 3, 3, 2, 3, 0, 4, 4, 2, 3, 0, 5, 5,
                  2, 3, 0, 6, 6, 6, 40, 0, 6, 60, 0, 8, 3, 0],
    # garbage, stale, foreign handles; time going backwards
    "handles": [0x02, 0, 3, 0, 0, 3, 0, 6, 20, 0, 10, 0, 0, 10, 1, 0, 10, 2, 1, 2, 3, 4,
                5, 6, 7, 8, 0, 11, 0, 0, 12, 0, 0, 12, 1, 0, 9, 5, 15, 0, 0],
    # huge delays: max, max+1, UINT64_MAX-ish, shifted ticks
    "huge": [0x01, 0, 0xa1, 0, 0, 0, 0xc1, 0, 0, 0, 0xe0, 0xff, 0xff, 0xff, 0xff, 0xff,
             0xff, 0xff, 0xff, 0, 0, 0, 0x9f, 0, 0, 2, 3, 0xc1, 0, 0, 8, 40, 0, 8, 41, 0],
    # max_timers cap 8 (shape bits 6-7 = 2)
    "cap": [0x80] + [0, 5, 0, 0] * 10 + [3, 0, 3, 1, 0, 5, 0, 0, 6, 30, 0],
    # stop with pending timers, then calls after stop
    "stop": [0x03, 0, 10, 0, 0, 2, 4, 4, 0, 0, 13, 1, 0, 2, 0, 0, 3, 0, 5, 1, 4, 6, 5, 0,
             10, 0, 13, 1],
    # bad configurations
    "configs": [0x00] + sum(([14, k] + [0, 0, 0, 0, 0, 0, 0, k] for k in range(7)), []),
    # service B as well
    "service_b": [0x00, B | 0, 4, 0, 0, B | 2, 2, 2, 0, 0, B | 6, 30, 0, 12, 0, 0,
                  B | 12, 0, 0, B | 13, 1, 6, 10, 0],
}

os.makedirs(here, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(bytes(data))
print(f"wrote {len(seeds)} seeds to {here}")
