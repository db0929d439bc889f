package main

// WL2 pending scale: one goroutine schedules N timers with delays in
// [60 s, 3600 s], then Stops them all in random order.
//
// RSS is read after debug.FreeOSMemory (a forced GC that then returns free
// pages to the OS) where twbench.c calls malloc_trim, before scheduling and
// again after: what is left is what the pending timers hold (the Timer
// objects and the per-P heaps' arrays), not garbage the GC has yet to
// collect.

import (
	"runtime/debug"
	"time"
)

// wl2Perm is a random permutation of 0..n-1 (Fisher-Yates, as twbench.c).
func wl2Perm(n uint64, seed *uint64) []uint32 {
	perm := make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	for i := n - 1; i > 0; i-- {
		j := rngNext(seed) % (i + 1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm
}

func wl2Pending(n uint64) {
	seed := uint64(0x2000)
	h := make([]*time.Timer, n)
	perm := wl2Perm(n, &seed)
	// Resident before the baseline: a fresh allocation's pages are not
	// touched yet (the runtime knows fresh OS memory is zero).
	for i := uint64(0); i < n; i += 512 {
		h[i] = nil
	}
	fired.Store(0)
	debug.FreeOSMemory()
	sleepNs(50 * ms)
	rss0 := rssBytes()
	t0 := nowNs()
	for i := range h {
		h[i] = time.AfterFunc(time.Duration(rngRange(&seed, 60*sec, 3600*sec)), countFire)
	}
	t1 := nowNs()
	sleepNs(200 * ms)
	debug.FreeOSMemory()
	rss1 := rssBytes()
	var stopFail uint64
	t2 := nowNs()
	for _, i := range perm {
		if !h[i].Stop() {
			stopFail++
		}
	}
	t3 := nowNs()
	if f := fired.Load(); stopFail != 0 || f != 0 {
		fail("WL2", "N=%d: %d Stops failed, %d callbacks ran (all must be 0)", n, stopFail, f)
	}
	perTimer := 0.0
	if rss1 > rss0 {
		perTimer = float64(rss1-rss0) / float64(n)
	}
	line("WL2 pending impl=%s N=%d schedule_ops_per_s=%.0f ops/s", impl, n, float64(n)/secs(t1-t0))
	line("WL2 pending impl=%s N=%d cancel_ops_per_s=%.0f ops/s", impl, n, float64(n)/secs(t3-t2))
	line("WL2 pending impl=%s N=%d bytes_per_timer=%.1f bytes", impl, n, perTimer)
}
