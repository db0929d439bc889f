package main

// Clock, sleeping, random numbers, output and /proc readings shared by the
// workloads.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// epoch anchors nowNs: time.Since reads Go's monotonic clock, which is
// CLOCK_MONOTONIC on Linux (runtime.nanotime), the clock of every figure.
var epoch = time.Now()

// nowNs is CLOCK_MONOTONIC in ns since the process started.
func nowNs() int64 {
	return int64(time.Since(epoch))
}

func sleepUntil(deadline int64) {
	for left := deadline - nowNs(); left > 0; left = deadline - nowNs() {
		time.Sleep(time.Duration(left))
	}
}

func sleepNs(ns int64) {
	sleepUntil(nowNs() + ns)
}

func secs(ns int64) float64 {
	return float64(ns) / 1e9
}

// rngNext is splitmix64, as twbench.c: the same seeds draw the same delays.
func rngNext(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// rngRange draws uniformly from [lo, hi].
func rngRange(s *uint64, lo, hi int64) int64 {
	return lo + int64(rngNext(s)%uint64(hi-lo+1))
}

func fail(wl string, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gobench: FAIL %s impl=%s: %s\n", wl, impl, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// line prints one figure (not during warm-up).
func line(format string, args ...any) {
	if emit {
		fmt.Printf(format+"\n", args...)
	}
}

// note says something on stderr (not during warm-up).
func note(format string, args ...any) {
	if emit {
		fmt.Fprintf(os.Stderr, "gobench: "+format+"\n", args...)
	}
}

// runTeam runs body(0..n-1) on n goroutines released together, and waits.
func runTeam(n int, body func(id int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func(id int) {
			defer done.Done()
			start.Wait()
			body(id)
		}(i)
	}
	start.Done()
	done.Wait()
}

// fired counts callbacks that must not run (WL1, WL2, WL4, WL6).
var fired atomic.Int64

// countFire is a package-level func, so AfterFunc allocates no closure.
func countFire() {
	fired.Add(1)
}

// rssBytes is the resident set from /proc/self/statm.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 2 {
		fmt.Fprintln(os.Stderr, "gobench: cannot read /proc/self/statm")
		os.Exit(2)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobench: cannot parse /proc/self/statm")
		os.Exit(2)
	}
	return pages * int64(os.Getpagesize())
}

// cpuNs is the process's user + system time. The kernel scales getrusage's
// tick-sampled user/system split so that the two add up to the scheduler's
// exact runtime (cputime_adjust), so the sum is good to the microsecond.
func cpuNs() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "gobench: getrusage:", err)
		os.Exit(2)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// voluntaryCtxSwitches sums voluntary_ctxt_switches over the live threads
// (Go's Ms), as NettyBench does: /proc/self/status alone counts the main
// thread only. A thread that exits between two readings takes its count
// with it; the Go runtime keeps its Ms.
func voluntaryCtxSwitches() int64 {
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobench: /proc/self/task:", err)
		os.Exit(2)
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited meanwhile
		}
		for _, l := range strings.Split(string(b), "\n") {
			const key = "voluntary_ctxt_switches:"
			if strings.HasPrefix(l, key) {
				n, _ := strconv.ParseInt(strings.TrimSpace(l[len(key):]), 10, 64)
				sum += n
			}
		}
	}
	return sum
}
