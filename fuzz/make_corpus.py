#!/usr/bin/env python3
"""Write the seed inputs of fuzz/corpus/ (see fuzz/fuzz_decode.c for the
byte layout: a shape byte, then opcode + argument bytes). Re-run after
changing the decoder's layout:  python3 fuzz/make_corpus.py

The first nine seeds use the first opcode table only and are kept byte for
byte as they were written (some are misaligned here and there: the decoder
reads them all the same). The others use the second table (X: issue 15's
calls), built from the helpers below."""
import os

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
B = 0x80  # opcode bit: act on service B
X = 0x40  # opcode bit: the second table

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

# ---- the second table --------------------------------------------------------

# shape byte: tick (bits 0-1: 1 us, 1 ms, 7 us, 1 s), wheel slots (bits 2-3:
# 2, 4, 8, 2), slot capacity (bits 4-5: 1, 2, 4, 1), max_timers (bits 6-7:
# none, none, 8, 3)
def shape(tick=1, slots=0, cap=0, maxt=0):
    return tick | slots << 2 | cap << 4 | maxt << 6

# delays (get_delay)
def ticks(n):            # n ticks
    return [0x60, n]
def thirds(k, ns=0):     # k thirds of a tick + ns (k < 32)
    return [k, ns]
MAX_DELAY = [0xa1]       # tw_max_delay
OVER_MAX = [0xc1]        # tw_max_delay + 1: TW_ERANGE

# absolute deadlines (get_when)
PAST = [0, 3]            # a tick before now
NOW = [1]
CUR_BOUNDARY = [2]       # the last processed tick boundary
NEXT_BOUNDARY = [3]
def later(delay):        # now + a delay
    return [4] + delay
AT_MAX = [5]             # now + tw_max_delay
AT_OVER = [13]           # now + tw_max_delay + 1: TW_ERANGE
def boundary(k):         # (last processed tick + 2 + k) * tick
    return [7, k]

# actions of the second table's timers (a % 13; 10: a % 6 picks 7..12)
NEXT_DUE, FOREACH, CANCEL_MANY, RESCHEDULE_AT, SCHEDULE_AT, SCHEDULE_MANY = range(7, 13)

def advance(thirds_of_tick, ns=0):
    return [6, thirds_of_tick, ns]
def advance_far(shift):
    return [8, shift, 0]
def schedule(delay, action=0, raw=0):
    return [0] + delay + [action, raw]
def every(delay, period_halves, action=0, raw=0):
    return [2] + delay + [period_halves, action, raw]
def schedule_at(when, action=0, raw=0):
    return [X | 0] + when + [action, raw]
def reschedule_at(index, when):
    return [X | 1, index] + when
def schedule_many(delays, args=True, out=True, retry=False, action=None, raw=0):
    f = len(delays) | (0 if args else 0x10) | (0 if out else 0x20) | (0x40 if retry else 0)
    head = [X | 2, f | (0x80 if action is not None else 0)]
    if action is not None:
        head += [action, raw]
    return head + sum(delays, [])
# cancel_many handle choices
def own(i):
    return [0, i]
def stale(i):
    return [3, i]
def foreign(i):
    return [4, i]
def garbage(h):
    return [5] + list(h.to_bytes(8, "big"))
def dup(i):
    return [6, i]
ZERO = [7]
def cancel_many(handles, rcs=True):
    return [X | 3, len(handles) | (0 if rcs else 0x10)] + sum(handles, [])
NEXT_DUE_OP = [X | 4]
WAKE_FD = [X | 5]
def foreach(mode, mask=0):  # mode: 0 look, 1 cancel, 2 reschedule, 3 reschedule_at, 4 arm
    return [X | 6, mode] + list(mask.to_bytes(8, "big"))
PAUSE = [X | 7]
def loop_step(past=0):
    return [X | 8, past]
def bad_args(k):
    return [X | 9, k]
def schedule_ext(delay, action, raw=0, period_halves=None):
    if period_halves is None:
        return [X | 10, 0] + delay + [action - 7, raw]
    return [X | 10, 1] + delay + [period_halves, action - 7, raw]
def not_pending(k, when=NOW, h=None):
    return [X | 11, k] + (list(h.to_bytes(8, "big")) if h is not None else []) + when
def to_boundary(k):
    return [X | 12, k]
STOP = [13, 1]

def seq(*parts):
    return sum(parts, [])

seeds.update({
    # absolute deadlines: the past, now, boundaries, the range's edge
    "at": seq([shape(tick=1, slots=1)],
              schedule_at(NOW), schedule_at(later(ticks(5))), schedule_at(PAST),
              schedule_at(AT_MAX), schedule_at(AT_OVER), schedule_at(boundary(2)),
              schedule_at(NEXT_BOUNDARY), schedule_at(CUR_BOUNDARY),
              advance(3), reschedule_at(1, later(ticks(9))), reschedule_at(0, NOW),
              reschedule_at(2, PAST), reschedule_at(3, AT_OVER), NEXT_DUE_OP,
              loop_step(), loop_step(5), advance_far(20), NEXT_DUE_OP),
    # batches: all armed, args NULL, out NULL, a failure part-way and the rest again
    "batch": seq([shape(tick=1, slots=2)],
                 schedule_many([ticks(1), ticks(2), thirds(1), ticks(40)]),
                 schedule_many([ticks(3), ticks(3), ticks(1)], args=False, out=False),
                 schedule_many([ticks(2), ticks(4)], args=False),
                 schedule_many([ticks(5)], out=False),
                 schedule_many([ticks(1), ticks(2), OVER_MAX, ticks(3), ticks(4)], retry=True),
                 schedule_many([OVER_MAX, ticks(1)]),
                 schedule_many([ticks(6), MAX_DELAY], action=NEXT_DUE, raw=3),
                 schedule_many([]),
                 advance(3), foreach(0), advance(9), NEXT_DUE_OP, advance(30), advance_far(40)),
    # a batch meeting max_timers (8) part-way
    "batch_cap": seq([shape(tick=1, maxt=2)],
                     schedule_many([ticks(2)] * 5),
                     schedule_many([ticks(3)] * 5, retry=True),
                     schedule_many([ticks(3)] * 2, args=False, out=False),
                     advance(6), schedule_many([ticks(1)] * 4, out=False, retry=True),
                     advance(30)),
    # tw_cancel_many: own, duplicate, stale, foreign, garbage and 0 handles
    "cancel_many": seq([shape(tick=1, slots=1)],
                       schedule(ticks(5)), schedule(ticks(6)), schedule(ticks(7)),
                       every(ticks(2), 4), schedule(ticks(1)), advance(6),
                       cancel_many([own(0), own(1), dup(0), own(4), stale(0), foreign(0),
                                    garbage(0x0000000100000002), ZERO, own(3)]),
                       cancel_many([own(2), own(2)], rcs=False),
                       schedule_many([ticks(2), ticks(3)], out=False),
                       cancel_many([foreign(1), garbage(1)]),
                       cancel_many([]), STOP, cancel_many([own(0), own(5)])),
    # the event loop's calls: tw_next_due, tw_wake_fd, both services
    "wake": seq([shape(tick=1, slots=1)],
                WAKE_FD, schedule(ticks(50)), NEXT_DUE_OP, schedule(ticks(60)),
                schedule(ticks(20)), schedule(ticks(30)), NEXT_DUE_OP, schedule(ticks(10)),
                WAKE_FD, schedule_at(NOW), NEXT_DUE_OP, loop_step(), loop_step(),
                [B | X | 4], [B | X | 5], [B | 0] + ticks(1) + [0, 0], [B | X | 5],
                [B | X | 8, 0], advance_far(30), NEXT_DUE_OP, schedule(ticks(2)),
                STOP, NEXT_DUE_OP, WAKE_FD),
    # tw_wake_fd made after a tw_next_due starts readable
    "wake_late": seq([shape(tick=0, slots=3)],
                     schedule(ticks(9)), NEXT_DUE_OP, WAKE_FD, NEXT_DUE_OP,
                     reschedule_at(0, NEXT_BOUNDARY), every(ticks(3), 2), loop_step(),
                     loop_step(1), loop_step(2)),
    # tw_foreach_pending: look, then fn cancels, reschedules, moves, arms
    "foreach": seq([shape(tick=1, slots=1)],
                   schedule(ticks(5)), every(ticks(3), 4), schedule_at(later(ticks(8))),
                   schedule_many([ticks(2), ticks(9)], args=False, out=False),
                   foreach(0), foreach(2, 0x5), foreach(3, 0xa), advance(3),
                   foreach(4, 0x3), foreach(1, 0x9), foreach(0), advance(60), foreach(0)),
    # pause and resume (TW_EINVAL on MANUAL), and every refused argument
    "bad_args": seq([shape()], PAUSE, [B | X | 7], *[bad_args(k) for k in range(12)],
                    STOP, *[bad_args(k) for k in range(12)], PAUSE),
    # callbacks that call the new functions
    "callbacks_ext": seq([shape(tick=1, slots=1)],
                         schedule(ticks(9)), every(ticks(8), 6),
                         schedule_ext(ticks(1), NEXT_DUE),
                         schedule_ext(ticks(1), FOREACH),
                         schedule_ext(ticks(2), CANCEL_MANY, raw=0),
                         schedule_ext(ticks(2), CANCEL_MANY, raw=0x31),
                         schedule_ext(ticks(3), RESCHEDULE_AT, raw=0x01),
                         schedule_ext(ticks(3), RESCHEDULE_AT, raw=0x80),
                         schedule_ext(ticks(3), SCHEDULE_AT, raw=0x0b),
                         schedule_ext(ticks(4), SCHEDULE_MANY, raw=0x36),
                         schedule_ext(ticks(1), NEXT_DUE, period_halves=2),
                         schedule_ext(ticks(2), RESCHEDULE_AT, raw=0xc0, period_halves=4),
                         schedule_ext(ticks(2), CANCEL_MANY, raw=0x01, period_halves=2),
                         schedule_ext(ticks(2), SCHEDULE_AT, raw=0x05, period_halves=3),
                         WAKE_FD, NEXT_DUE_OP, advance(3), advance(3), advance(6),
                         advance(12), foreach(0), advance(30), advance_far(12)),
    # handles that are not pending, through tw_reschedule_at and tw_cancel_many
    "not_pending": seq([shape(tick=1)],
                       schedule(ticks(2)), advance(9), schedule(ticks(3)), [3, 1],
                       not_pending(0, NOW, h=0x0000000200000000), not_pending(1),
                       not_pending(2), not_pending(3), not_pending(0x81),
                       not_pending(0x82, AT_OVER), not_pending(0x80, NOW, h=7),
                       STOP, not_pending(1), not_pending(0x83)),
    # the clock on tick boundaries: due rule, tw_next_due at the boundary
    "boundary": seq([shape(tick=1, slots=1)],
                    to_boundary(3), schedule_at(NOW), schedule_at(CUR_BOUNDARY),
                    schedule(thirds(0)), NEXT_DUE_OP, to_boundary(1), NEXT_DUE_OP,
                    every(thirds(3), 2), to_boundary(2), to_boundary(0), NEXT_DUE_OP,
                    loop_step(), to_boundary(5), schedule_at(boundary(0)), loop_step(0)),
})

os.makedirs(here, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(bytes(data))
print(f"wrote {len(seeds)} seeds to {here}")
