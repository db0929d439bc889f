package main

// WL5 burst fire: wl5N timers all due at the same instant (a common base +
// 200 ms); the callback is one atomic increment. Each due AfterFunc timer
// starts its callback as a goroutine, run by the GOMAXPROCS Ps.

import (
	"sync/atomic"
	"time"
)

var (
	wl5Count, wl5First, wl5Last atomic.Int64
	wl5N                        int64
)

func wl5Callback() {
	c := wl5Count.Add(1)
	if c == 1 {
		wl5First.Store(nowNs())
	}
	if c == wl5N {
		wl5Last.Store(nowNs())
	}
}

// wl5Try is one burst with every deadline at base + delayNs; ok == false
// when scheduling took longer than delayNs (the burst is not one instant).
// firstMs is the first callback's start minus that common deadline, as
// twbench.c's (negative would be a fire before it).
func wl5Try(delayNs int64) (rate, firstMs float64, ok bool) {
	n := sz.wl5N
	wl5N = n
	wl5Count.Store(0)
	wl5First.Store(0)
	wl5Last.Store(0)
	due := nowNs() + delayNs
	overran := int64(0)
	for i := int64(0); i < n; i++ {
		now := nowNs()
		if now >= due {
			overran = n - i
			break
		}
		time.AfterFunc(time.Duration(due-now), wl5Callback)
	}
	scheduled := n - overran
	giveUp := due + 60*sec
	for wl5Count.Load() < scheduled && nowNs() < giveUp {
		sleepNs(5 * ms)
	}
	sleepNs(100 * ms)
	if got := wl5Count.Load(); got != scheduled {
		fail("WL5", "%d callbacks ran, expected exactly %d", got, scheduled)
	}
	if overran != 0 {
		note("WL5 impl=%s: scheduling %d timers took longer than the %d ms delay; retrying "+
			"with twice the delay", impl, n, delayNs/ms)
		return 0, 0, false
	}
	first := wl5First.Load()
	return float64(n) / secs(max64(1, wl5Last.Load()-first)), float64(first-due) / 1e6, true
}

func wl5Burst() {
	delay := wl5BaseDelayNs
	for {
		if rate, firstMs, ok := wl5Try(delay); ok {
			if delay != wl5BaseDelayNs {
				note("WL5 impl=%s: common delay was %d ms", impl, delay/ms)
			}
			line("WL5 burst impl=%s callbacks_per_s=%.0f callbacks/s", impl, rate)
			line("WL5 first impl=%s first_callback_after_deadline_ms=%.3f ms", impl, firstMs)
			return
		}
		if delay *= 2; delay > 20*sec {
			fail("WL5", "cannot schedule %d timers within 20 s", sz.wl5N)
		}
	}
}
