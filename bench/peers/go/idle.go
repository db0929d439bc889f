package main

// WL4 idle cost: 10,000 timers pending with a delay of 1 hour, then wl4Ns of
// wall time with nothing due: the process's CPU time per wall second and
// voluntary context switches per second (the runtime's threads: sysmon,
// the netpoller's timed wait, idle Ms).

import "time"

func wl4Idle() {
	h := make([]*time.Timer, wl4Timers)
	fired.Store(0)
	for i := range h {
		h[i] = time.AfterFunc(time.Hour, countFire)
	}
	sleepNs(200 * ms)
	cpu0, cs0, t0 := cpuNs(), voluntaryCtxSwitches(), nowNs()
	sleepUntil(t0 + sz.wl4Ns)
	cpu1, cs1, t1 := cpuNs(), voluntaryCtxSwitches(), nowNs()
	var stopFail int
	for _, t := range h {
		if !t.Stop() {
			stopFail++
		}
	}
	if f := fired.Load(); f != 0 || stopFail != 0 {
		fail("WL4", "%d callbacks ran, %d Stops failed (must be 0)", f, stopFail)
	}
	wall := secs(t1 - t0)
	line("WL4 idle impl=%s cpu_per_wall_s=%.5f s/s", impl, secs(cpu1-cpu0)/wall)
	line("WL4 idle impl=%s vol_ctxsw_per_s=%.1f switches/s", impl, float64(max64(0, cs1-cs0))/wall)
}
