package main

// WL1 churn: P producers each schedule K timers, keep the last 1024 handles
// in a ring and Stop the oldest once the ring is full (after scheduling the
// new one, as twbench.c), then Stop what is left.
//
// As in twbench.c: a timer may only fire when its producer stalled longer
// than its delay (>= 100 ms) between scheduling it and stopping it 1024
// operations later. Each producer reads the clock once per wl1Batch
// iterations and remembers, per ring slot, the batch and delay of its timer;
// a failed Stop is then judged afterwards: possible only if
// batchTime[stop batch + 1] - batchTime[schedule batch] >= delay. A run with
// only such failures is retried (the figure must come from a run where
// nothing fired); any other failure is a bug and fails at once.
//
// Each producer yields (runtime.Gosched) once per batch. Without it, at
// P = 8 on 2 Ps, some producer went unscheduled for 120-350 ms in every run
// on this machine (still up to 130 ms with GOGC=off: Go preempts a running
// goroutine only after 10 ms and queues it on the global run queue), so
// timers fired and all 10 attempts were discarded. The yield gives the
// round robin an OS scheduler gives twbench's producer threads; it costs
// one scheduler pass per 64 operations.

import (
	"runtime"
	"time"
)

const (
	wl1Batch    = 64
	wl1MaxFails = 65536
)

type wl1Fail struct {
	schedBatch, stopBatch uint32
	delay                 int64
}

type wl1Producer struct {
	seed                      uint64
	tStart, tEnd              int64
	schedOK, stopOK, stopFail uint64
	batchTime                 []int64 // clock at the start of each batch, + end
	fails                     []wl1Fail
	ring                      [wl1Ring]*time.Timer
	ringDelay                 [wl1Ring]int64
	ringBatch                 [wl1Ring]uint32
}

func (a *wl1Producer) stop(slot int, batch uint32) {
	if a.ring[slot].Stop() {
		a.stopOK++
		return
	}
	if len(a.fails) < wl1MaxFails {
		a.fails = append(a.fails, wl1Fail{a.ringBatch[slot], batch, a.ringDelay[slot]})
	}
	a.stopFail++
}

func (a *wl1Producer) run() {
	k := sz.wl1K
	a.batchTime = make([]int64, k/wl1Batch+3)
	var n uint64
	var batch uint32
	a.tStart = nowNs()
	for i := uint64(0); i < k; i++ {
		if i%wl1Batch == 0 {
			batch = uint32(i / wl1Batch)
			a.batchTime[batch] = nowNs()
			runtime.Gosched()
		}
		delay := rngRange(&a.seed, 100*ms, 10*sec)
		t := time.AfterFunc(time.Duration(delay), countFire)
		a.schedOK++
		slot := int(n % wl1Ring)
		n++
		if a.ring[slot] != nil {
			a.stop(slot, batch) // the oldest handle
		}
		a.ring[slot], a.ringDelay[slot], a.ringBatch[slot] = t, delay, batch
	}
	batch++
	a.batchTime[batch] = nowNs()
	for i := range a.ring {
		if a.ring[i] != nil {
			a.stop(i, batch)
		}
	}
	a.tEnd = nowNs()
	a.batchTime[batch+1] = a.tEnd
}

// explained is 1 if every failed Stop may be a legitimate fire (the producer
// stalled longer than the timer's delay), -1 if one cannot be (a fire before
// the delay had passed), 0 if there were too many to check; worst is the
// longest such stall.
func (a *wl1Producer) explained(worst *int64) int {
	if a.stopFail > wl1MaxFails {
		return 0
	}
	for _, f := range a.fails {
		span := a.batchTime[f.stopBatch+1] - a.batchTime[f.schedBatch]
		if span > *worst {
			*worst = span
		}
		if span < f.delay {
			return -1
		}
	}
	return 1
}

// wl1Try is one attempt: the rate, or ok == false when timers fired that a
// producer stall explains.
func wl1Try(p int) (rate float64, ok bool) {
	fired.Store(0)
	pr := make([]*wl1Producer, p)
	for i := range pr {
		pr[i] = &wl1Producer{seed: 0x1000 + uint64(i)}
	}
	runTeam(p, func(id int) { pr[id].run() })
	f := fired.Load()
	t0, t1 := int64(1<<63-1), int64(0)
	var ops, stopFail uint64
	var stall int64
	explained := 1 // as wl1Producer.explained, the worst
	for _, a := range pr {
		t0, t1 = min64(t0, a.tStart), max64(t1, a.tEnd)
		ops += a.schedOK + a.stopOK
		stopFail += a.stopFail
		if e := a.explained(&stall); e < explained {
			explained = e
		}
	}
	if int64(stopFail) != f || explained != 1 {
		fail("WL1", "P=%d: %d Stops failed, %d callbacks ran (all must be 0)%s", p, stopFail, f,
			wl1Why(explained))
	}
	if stopFail != 0 {
		note("WL1 impl=%s P=%d: %d timers fired because a producer stalled (up to %.0f ms across "+
			"1024 operations); run discarded", impl, p, stopFail, float64(stall)/1e6)
		return 0, false
	}
	return float64(ops) / secs(t1-t0), true
}

func wl1Why(explained int) string {
	switch explained {
	case -1:
		return "; a timer fired before its delay had passed"
	case 0:
		return "; too many failed Stops to check them"
	}
	return ""
}

func wl1Churn(p int) {
	for attempt := 1; ; attempt++ {
		if rate, ok := wl1Try(p); ok {
			line("WL1 churn impl=%s P=%d ops_per_s=%.0f ops/s", impl, p, rate)
			return
		}
		if attempt == wl1AttemptLimit {
			fail("WL1", "P=%d: timers fired in %d runs in a row (producers stalled past the "+
				"100 ms minimum delay; machine overloaded?)", p, attempt)
		}
	}
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
