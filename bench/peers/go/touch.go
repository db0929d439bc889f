package main

// WL6 touch: wl6Sessions sessions, each with a 30 s idle timeout; 4
// goroutines postpone random sessions' timeouts to now + 30 s for wl6Ns with
// Timer.Reset, Go's own reschedule. Reset is safe from several goroutines at
// once on one timer (the runtime serialises operations on a timer), so no
// per-session lock. Reset returns true iff the timer was still pending: a
// false is a session that had timed out (and Reset has armed its callback
// again), so it counts as a failed touch.

import "time"

type wl6Toucher struct {
	seed         uint64
	ok, failed   uint64
	tStart, tEnd int64
}

// run counts in locals, stored at the end: the touchers' structs share cache
// lines.
func (a *wl6Toucher) run(sessions []*time.Timer) {
	n := uint64(len(sessions))
	seed, ok, failed := a.seed, uint64(0), uint64(0)
	start := nowNs()
	stop, now := start+sz.wl6Ns, start
	for now < stop {
		for k := 0; k < 256; k++ {
			if sessions[rngNext(&seed)%n].Reset(time.Duration(wl6TimeoutNs)) {
				ok++
			} else {
				failed++
			}
		}
		now = nowNs()
	}
	a.ok, a.failed, a.tStart, a.tEnd = ok, failed, start, now
}

func wl6Touch() {
	sessions := make([]*time.Timer, sz.wl6Sessions)
	fired.Store(0)
	for i := range sessions {
		sessions[i] = time.AfterFunc(time.Duration(wl6TimeoutNs), countFire)
	}
	var th [wl6Threads]wl6Toucher
	for i := range th {
		th[i].seed = 0x6000 + uint64(i)
	}
	runTeam(wl6Threads, func(id int) { th[id].run(sessions) })
	t0, t1 := int64(1<<63-1), int64(0)
	var ok, touchFail uint64
	for i := range th {
		t0, t1 = min64(t0, th[i].tStart), max64(t1, th[i].tEnd)
		ok += th[i].ok
		touchFail += th[i].failed
	}
	timeouts := fired.Load()
	var stopFail int
	for _, t := range sessions {
		if !t.Stop() {
			stopFail++
		}
	}
	if touchFail != 0 || timeouts != 0 || stopFail != 0 {
		fail("WL6", "%d touches failed, %d sessions timed out, %d final Stops failed (all must be 0)",
			touchFail, timeouts, stopFail)
	}
	line("WL6 touch impl=%s touches_per_s=%.0f touches/s", impl, float64(ok)/secs(t1-t0))
}
