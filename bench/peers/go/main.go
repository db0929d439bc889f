// gobench: the six workloads of shared/bench/WORKLOADS.md against Go's
// runtime timers, printing the same lines as bench/twbench.c with impl=go.
// bench/run.sh builds it offline (GOPROXY=off; standard library only) with
// Debian's golang-go and runs it.
//
//	gobench [--wl LIST] [--repeat N] [--p P] [--n N] [--quick]
//
// --wl takes WORKLOADS.md's ids 1-6 and 1b, twbench's WL1 in blocks of 16
// with the batch calls: Go's timers have no batch call, so 1b prints n/a
// lines (the table's row keeps a cell for go).
//
// The operations: time.AfterFunc arms a timer; Timer.Stop cancels it (true
// iff the call stopped a pending timer; false if it had fired, its callback
// then already started on a goroutine of its own, or had been stopped);
// Timer.Reset moves it (true iff it was pending; on a fired or stopped
// AfterFunc timer it arms the callback to run once more and returns false,
// which WL6 counts as a failed touch: the session had timed out). AfterFunc
// cannot fail, so no schedule fails here.
//
// How Go differs, so the figures are read right: there is no timer service
// to create. Timers live in the runtime, in one 4-ary heap per P
// (GOMAXPROCS of them, default nproc), checked by the scheduler between
// goroutines and by the netpoller's timed wait; Stop only marks a timer
// deleted (the heap drops it later). A due AfterFunc timer starts its
// callback as a new goroutine, so WL5's "2 workers" are the GOMAXPROCS Ps
// running those goroutines. WL6 uses Reset, the runtime's own reschedule,
// from 4 goroutines without a lock (the runtime serialises operations on a
// timer).
//
// --n runs WL2 at that N only: run.sh measures each N in a fresh process, so
// that memory one size grew does not hide the next size's RSS; WL2's
// warm-up schedules only 10,000 timers for that reason. Each selected
// workload first runs once at --quick size with its output suppressed
// (warm-up: heaps, stacks, page faults, as NettyBench.java does for its
// JIT), then measured. WL4 has no warm-up: it measures the cost of doing
// nothing.
//
// Output: one line per figure on stdout, `WLn name param=value figure=value
// unit`, impl=go being the first param; notes on stderr. Every workload
// checks its own correctness condition; when it fails, gobench says FAIL on
// stderr and exits 1. All times are CLOCK_MONOTONIC (Go's monotonic clock).
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

const (
	ms  = int64(1000000)
	sec = int64(1000000000)

	impl = "go"

	wl1Ring         = 1024
	wl3Threads      = 4
	wl4Timers       = 10000
	wl5BaseDelayNs  = 200 * ms
	wl6Threads      = 4
	wl6TimeoutNs    = 30 * sec
	wl2WarmupN      = 10000 // small: a big warm-up would leave resident heap behind
	wl1AttemptLimit = 10
)

// sizes are the workload sizes: full (WORKLOADS.md) and --quick, as twbench.c.
type sizes struct {
	wl1K          uint64   // iterations per producer
	wl2N          []uint64 // pending timers
	wl3N          int      // timers, over wl3SpanNs, 4 goroutines
	wl3SpanNs     int64
	wl3MaxDelayNs int64
	wl4Ns         int64 // idle wall time
	wl5N          int64 // timers in the burst
	wl6Sessions   int
	wl6Ns         int64 // touching time
}

var fullSizes = sizes{
	wl1K: 2000000, wl2N: []uint64{1000000, 10000000},
	wl3N: 1000000, wl3SpanNs: sec, wl3MaxDelayNs: 2 * sec,
	wl4Ns: 10 * sec, wl5N: 1000000, wl6Sessions: 100000, wl6Ns: 5 * sec,
}

var quickSizes = sizes{
	wl1K: 200000, wl2N: []uint64{100000, 1000000},
	wl3N: 100000, wl3SpanNs: sec / 2, wl3MaxDelayNs: sec / 2,
	wl4Ns: 2 * sec, wl5N: 100000, wl6Sessions: 10000, wl6Ns: sec,
}

var (
	sz       = &fullSizes
	emit     = true // false during warm-up
	wl2OnlyN uint64 // --n: WL2 at this N only
	wl1OnlyP int    // --p: WL1 with this P only
)

// wlIDs are the workloads in the order they run, as twbench.c's.
var wlIDs = []string{"1", "1b", "2", "3", "4", "5", "6"}

func usage() {
	fmt.Fprint(os.Stderr, `usage: gobench [--wl LIST] [--repeat N] [--p P] [--n N] [--quick]
  --wl      workloads, e.g. 1,3,5 or WL2; 1b (WL1 in blocks of 16) is n/a
            here (default 1,1b,2,3,4,5,6)
  --repeat  run each selected workload N times (default 1)
  --p       WL1 (and 1b) with P = 1, 2 or 8 producers only (default all three)
  --n       WL2 at this N only (default both sizes)
  --quick   scaled-down sizes and durations (smoke run)
`)
	os.Exit(2)
}

// parseWorkloads marks the workloads of a list like "1,3,WL5" (indices
// into wlIDs).
func parseWorkloads(list string, wl []bool) {
	for _, t := range strings.Split(list, ",") {
		if len(t) >= 2 && strings.EqualFold(t[:2], "WL") {
			t = t[2:]
		}
		found := false
		for i, id := range wlIDs {
			if strings.EqualFold(t, id) {
				wl[i], found = true, true
			}
		}
		if !found {
			fmt.Fprintf(os.Stderr, "gobench: unknown workload '%s'\n", t)
			usage()
		}
	}
}

// argValue returns the value after flag i, or exits with the usage.
func argValue(args []string, i int) string {
	if i+1 >= len(args) {
		usage()
	}
	return args[i+1]
}

func parseArgs(args []string) (wl []bool, repeat int) {
	wl, repeat = make([]bool, len(wlIDs)), 1
	anyWl := false
	for i := 0; i < len(args); i++ {
		var err error
		switch args[i] {
		case "--quick":
			sz = &quickSizes
			continue
		case "--impl": // accepted for symmetry with twbench
			if argValue(args, i) != impl {
				usage()
			}
		case "--wl":
			parseWorkloads(argValue(args, i), wl)
			anyWl = true
		case "--repeat":
			repeat, err = strconv.Atoi(argValue(args, i))
			if repeat < 1 {
				usage()
			}
		case "--p":
			wl1OnlyP, err = strconv.Atoi(argValue(args, i))
			if wl1OnlyP != 1 && wl1OnlyP != 2 && wl1OnlyP != 8 {
				usage()
			}
		case "--n":
			wl2OnlyN, err = strconv.ParseUint(argValue(args, i), 10, 64)
			if wl2OnlyN < 2 || wl2OnlyN > 1<<32-1 {
				usage()
			}
		default:
			usage()
		}
		if err != nil {
			usage()
		}
		i++
	}
	if !anyWl {
		for w := range wl {
			wl[w] = true
		}
	}
	return wl, repeat
}

func runWorkload(w string) {
	switch w {
	case "1":
		for _, p := range []int{1, 2, 8} {
			if wl1OnlyP == 0 || wl1OnlyP == p {
				wl1Churn(p)
			}
		}
	case "1b":
		// WL1 in blocks of 16 is timerwheel's (tw_schedule_many,
		// tw_cancel_many): Go's timers have no batch call.
		for _, p := range []int{1, 2, 8} {
			if wl1OnlyP == 0 || wl1OnlyP == p {
				line("WL1b churn16 impl=%s P=%d ops_per_s=n/a ops/s", impl, p)
			}
		}
	case "2":
		switch {
		case !emit:
			wl2Pending(wl2WarmupN)
		case wl2OnlyN != 0:
			wl2Pending(wl2OnlyN)
		default:
			for _, n := range sz.wl2N {
				wl2Pending(n)
			}
		}
	case "3":
		wl3Accuracy()
		// The 100 us tick variant is timerwheel's: Go's timers have no
		// tick (they fire at the deadline itself, as the 1 ms rows show).
		for _, q := range wl3Quantiles {
			line("WL3 accuracy impl=%s tick_us=100 %s=n/a ms", impl, q.name)
		}
	case "4":
		wl4Idle()
	case "5":
		wl5Burst()
	case "6":
		wl6Touch()
	}
}

func main() {
	wl, repeat := parseArgs(os.Args[1:])
	measured := sz
	quick := ""
	if sz == &quickSizes {
		quick = " --quick"
	}
	fmt.Fprintf(os.Stderr, "gobench: impl=go (%s, GOMAXPROCS=%d, callbacks on: a goroutine each)%s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), quick)
	for i, w := range wlIDs {
		if !wl[i] {
			continue
		}
		if w != "4" { // warm-up at --quick size, output suppressed
			sz, emit = &quickSizes, false
			runWorkload(w)
			sz, emit = measured, true
		}
		for r := 0; r < repeat; r++ {
			runWorkload(w)
		}
	}
}
