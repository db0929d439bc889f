package main

// WL3 accuracy under load: 4 goroutines schedule wl3N timers over about
// wl3SpanNs (one batch per millisecond), delays in [1 ms, wl3MaxDelayNs].
// Each callback records its start; lateness = start - (the time read just
// before AfterFunc + delay).

import (
	"math"
	"sort"
	"sync/atomic"
	"time"
)

type wl3Rec struct {
	expected int64 // time read before AfterFunc + delay
	start    atomic.Int64
	fires    atomic.Int32
}

// wl3Fired publishes the records to the main goroutine (Go's atomics are
// sequentially consistent).
var wl3Fired atomic.Int64

// fire is the callback. The method value r.fire is one small allocation per
// timer, as any AfterFunc callback that carries an argument is.
func (r *wl3Rec) fire() {
	r.start.Store(nowNs())
	r.fires.Add(1)
	wl3Fired.Add(1)
}

var wl3Quantiles = []struct {
	name string
	q    float64
}{
	{"lateness_p50", 0.5}, {"lateness_p99", 0.99}, {"lateness_p999", 0.999}, {"lateness_max", 1.0},
}

func wl3Producer(recs []wl3Rec, seed uint64) {
	batches := sz.wl3SpanNs / ms // one batch per millisecond
	per := int64(len(recs))
	t0 := nowNs()
	i := int64(0)
	for b := int64(0); b < batches; b++ {
		end := per * (b + 1) / batches
		sleepUntil(t0 + b*ms)
		for ; i < end; i++ {
			delay := rngRange(&seed, ms, sz.wl3MaxDelayNs)
			r := &recs[i]
			r.expected = nowNs() + delay
			time.AfterFunc(time.Duration(delay), r.fire)
		}
	}
}

// wl3Wait waits for every callback (or gives up 30 s after the last
// deadline), then a little longer to catch extra runs; returns the count.
func wl3Wait(recs []wl3Rec) int64 {
	last := int64(0)
	for i := range recs {
		last = max64(last, recs[i].expected)
	}
	giveUp := last + 30*sec
	for wl3Fired.Load() < int64(len(recs)) && nowNs() < giveUp {
		sleepNs(10 * ms)
	}
	sleepNs(100 * ms)
	return wl3Fired.Load()
}

func wl3Accuracy() {
	per := sz.wl3N / wl3Threads
	n := per * wl3Threads
	recs := make([]wl3Rec, n)
	wl3Fired.Store(0)
	runTeam(wl3Threads, func(id int) {
		wl3Producer(recs[id*per:(id+1)*per], 0x3000+uint64(id))
	})
	if got := wl3Wait(recs); got != int64(n) {
		fail("WL3", "%d callbacks ran, expected exactly %d", got, n)
	}
	late := make([]int64, n)
	var early, dup, worstEarly int64
	for i := range recs {
		if recs[i].fires.Load() != 1 {
			dup++
		}
		late[i] = recs[i].start.Load() - recs[i].expected
		if late[i] < 0 {
			early++
			worstEarly = min64(worstEarly, late[i])
		}
	}
	if dup != 0 || early != 0 {
		fail("WL3", "%d timers did not run exactly once; %d ran early (worst by %d ns)",
			dup, early, -worstEarly)
	}
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	for _, q := range wl3Quantiles {
		k := int(math.Ceil(q.q * float64(n)))
		if k > 0 {
			k--
		}
		line("WL3 accuracy impl=%s %s=%.3f ms", impl, q.name, float64(late[k])/1e6)
	}
}
