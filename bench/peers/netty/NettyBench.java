/*
 * NettyBench: the six workloads of shared/bench/WORKLOADS.md against the JVM's
 * timers, printing the same lines as bench/twbench.c:
 *
 *   --impl netty     Netty's HashedWheelTimer (tick 1 ms, 1024 slots); the
 *                    default
 *   --impl jdktimer  java.util.Timer (one binary heap, one thread, under one
 *                    monitor)
 *
 * bench/run.sh compiles it against the Debian-packaged netty-common.jar and
 * runs each peer in its own JVM.
 *
 *   java -cp <classes>:/usr/share/java/netty-common.jar NettyBench
 *        [--impl netty|jdktimer] [--wl LIST] [--repeat N] [--n N] [--quick]
 *
 * --wl takes WORKLOADS.md's ids 1-6 and 1b, twbench's WL1 in blocks of 16
 * with the batch calls: neither peer has a batch call, so 1b prints n/a
 * lines (the table's row keeps a cell for each).
 *
 * --n runs WL2 at that N only: run.sh measures each N in a fresh JVM, since
 * a heap grown and touched by one size stays resident and would hide the
 * next size's RSS. WL2's warm-up schedules only 10,000 timers for that
 * reason.
 *
 * Each selected workload first runs once at --quick size with its output
 * suppressed (warm-up: class loading, JIT), then measured. WL4 has no
 * warm-up: it measures the cost of doing nothing.
 *
 * How Netty differs, so the figures are read right: one worker thread both
 * ticks the wheel and runs every callback (WL5's "2 workers" cannot be
 * given); there is no reschedule, so WL6 touches by cancel + newTimeout, one
 * toucher per session at a time; newTimeout enqueues on an MPSC queue that
 * the worker moves into the wheel, at most 100,000 per tick.
 *
 * How java.util.Timer differs: its one thread runs every callback, and every
 * schedule, cancel and fire takes the queue's monitor. Delays are whole
 * milliseconds on System.currentTimeMillis(), a wall clock read truncated to
 * the millisecond: a task scheduled with delay d runs once that clock
 * reaches (its reading at the call) + d, which can be up to 1 ms less than
 * d after the call. To never fire early the adapter asks for the delay
 * rounded up to whole milliseconds plus 1 ms (JdkTimerPeer.delayMs): that
 * ms shows in WL3's lateness and is the price of this API, not of the
 * queue. TimerTask.cancel() is true iff it stopped a pending task; a
 * cancelled task stays in the queue until its time comes (purge() is not
 * called, as most programs do not). WL6: cancel + a new task, as Netty's.
 *
 * WL4 reads process CPU from /proc/self/stat (utime + stime, in clock ticks:
 * -Dclk.tck, default 100) and voluntary context switches from
 * /proc/self/task/<tid>/status summed over all threads (/proc/self/status
 * alone counts the main thread only). WL2 reads RSS from /proc/self/statm
 * after System.gc().
 */
import io.netty.util.HashedWheelTimer;
import io.netty.util.Timeout;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

public final class NettyBench {
    static final long MS = 1_000_000L;
    static final long SEC = 1_000_000_000L;
    static String impl = "netty";          /* --impl */

    /* Workload sizes: full (WORKLOADS.md) and --quick. */
    static final class Sizes {
        final long wl1K;
        final int[] wl2N;
        final int wl3N;
        final long wl3SpanNs, wl3MaxDelayNs, wl4Ns;
        final int wl5N, wl6Sessions;
        final long wl6Ns;

        Sizes(long wl1K, int[] wl2N, int wl3N, long wl3SpanNs, long wl3MaxDelayNs, long wl4Ns,
              int wl5N, int wl6Sessions, long wl6Ns) {
            this.wl1K = wl1K;
            this.wl2N = wl2N;
            this.wl3N = wl3N;
            this.wl3SpanNs = wl3SpanNs;
            this.wl3MaxDelayNs = wl3MaxDelayNs;
            this.wl4Ns = wl4Ns;
            this.wl5N = wl5N;
            this.wl6Sessions = wl6Sessions;
            this.wl6Ns = wl6Ns;
        }
    }

    static final Sizes FULL = new Sizes(2_000_000, new int[] {1_000_000, 10_000_000},
            1_000_000, SEC, 2 * SEC, 10 * SEC, 1_000_000, 100_000, 5 * SEC);
    static final Sizes QUICK = new Sizes(200_000, new int[] {100_000, 1_000_000},
            100_000, SEC / 2, SEC / 2, 2 * SEC, 100_000, 10_000, SEC);

    static Sizes sz = FULL;
    static boolean emit = true;                 /* false during warm-up */
    static int wl2OnlyN;                        /* --n: WL2 at this N only */
    static final int WL2_WARMUP_N = 10_000;     /* small: a big warm-up would leave
                                                   resident heap behind for the RSS figure */

    static final int WL1_RING = 1024;
    static final int WL1_BATCH = 64;
    static final int WL1_ATTEMPTS = 10;
    static final int WL3_THREADS = 4;
    static final int WL4_TIMERS = 10_000;
    static final long WL5_BASE_DELAY_NS = 200 * MS;
    static final int WL6_THREADS = 4;
    static final long WL6_TIMEOUT_NS = 30 * SEC;

    /* ---- helpers ---------------------------------------------------------- */

    static void fail(String wl, String fmt, Object... args) {
        System.out.flush();
        System.err.println("nettybench: FAIL " + wl + " impl=" + impl + ": "
                + String.format(Locale.ROOT, fmt, args));
        System.exit(1);
    }

    static void line(String fmt, Object... args) {
        if (emit) {
            System.out.println(String.format(Locale.ROOT, fmt, args));
            System.out.flush();
        }
    }

    static void note(String fmt, Object... args) {
        if (emit || Boolean.getBoolean("verbose"))
            System.err.println("nettybench: " + String.format(Locale.ROOT, fmt, args));
    }

    /* ---- the peers ---------------------------------------------------------- */

    /* A callback. It is Netty's TimerTask too, so Netty gets it as it is
     * (no wrapper object per timer to add to WL2's bytes). */
    interface Task extends io.netty.util.TimerTask {
        void fire();

        @Override
        default void run(Timeout t) {
            fire();
        }
    }

    /* The operations the workloads use; a handle is what schedule returned.
     * schedule throws a RuntimeException when it cannot arm the timer. */
    interface Peer {
        Object schedule(Task task, long delayNs);

        /* true iff the timer was pending and now never runs */
        boolean cancel(Object handle);

        /* stops the peer's thread; pending timers never run */
        void stop();
    }

    static final class NettyPeer implements Peer {
        final HashedWheelTimer timer;

        NettyPeer() {
            ThreadFactory tf = r -> {
                Thread t = new Thread(r, "netty-wheel");
                t.setDaemon(true);
                return t;
            };
            timer = new HashedWheelTimer(tf, 1, TimeUnit.MILLISECONDS, 1024, false);
            timer.start();
        }

        @Override
        public Object schedule(Task task, long delayNs) {
            return timer.newTimeout(task, delayNs, TimeUnit.NANOSECONDS);
        }

        @Override
        public boolean cancel(Object handle) {
            return ((Timeout) handle).cancel();
        }

        @Override
        public void stop() {
            timer.stop();
        }
    }

    static final class JdkTimerPeer implements Peer {
        final java.util.Timer timer = new java.util.Timer("jdk-timer", true);

        /* A java.util.TimerTask runs once: a new one per schedule. */
        static final class Entry extends java.util.TimerTask {
            final Task task;

            Entry(Task task) {
                this.task = task;
            }

            @Override
            public void run() {
                task.fire();
            }
        }

        /* Whole milliseconds, rounded up, + 1 for the truncated clock
         * reading inside Timer.schedule (see the top of this file). */
        static long delayMs(long delayNs) {
            return (delayNs + MS - 1) / MS + 1;
        }

        @Override
        public Object schedule(Task task, long delayNs) {
            Entry e = new Entry(task);
            timer.schedule(e, delayMs(delayNs));
            return e;
        }

        @Override
        public boolean cancel(Object handle) {
            return ((Entry) handle).cancel();
        }

        @Override
        public void stop() {
            timer.cancel();
        }
    }

    static Peer newTimer() {
        return impl.equals("jdktimer") ? new JdkTimerPeer() : new NettyPeer();
    }

    static void sleepNs(long ns) {
        sleepUntil(System.nanoTime() + ns);
    }

    static void sleepUntil(long deadline) {
        for (long left; (left = deadline - System.nanoTime()) > 0; ) {
            try {
                TimeUnit.NANOSECONDS.sleep(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    static long rssBytes() {
        try {
            String[] f = new String(Files.readAllBytes(Paths.get("/proc/self/statm"))).trim().split("\\s+");
            return Long.parseLong(f[1]) * 4096L;   /* page size on x86-64 and arm64 Debian */
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    /* utime + stime of the whole process, in ns. */
    static long cpuNs() {
        try {
            String s = new String(Files.readAllBytes(Paths.get("/proc/self/stat")));
            String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
            long ticks = Long.parseLong(f[11]) + Long.parseLong(f[12]);  /* fields 14, 15 */
            long hz = Long.getLong("clk.tck", 100L);
            return ticks * (SEC / hz);
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    /* Voluntary context switches summed over the live threads. */
    static long voluntaryCtxSwitches() {
        long sum = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Paths.get("/proc/self/task"))) {
            for (Path t : tasks) {
                try {
                    for (String l : Files.readAllLines(t.resolve("status"))) {
                        if (l.startsWith("voluntary_ctxt_switches:"))
                            sum += Long.parseLong(l.substring(l.indexOf(':') + 1).trim());
                    }
                } catch (IOException e) {
                    /* thread exited meanwhile */
                }
            }
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
        return sum;
    }

    static void runThreads(int n, java.util.function.IntConsumer body) {
        CyclicBarrier start = new CyclicBarrier(n);
        Thread[] th = new Thread[n];
        for (int i = 0; i < n; i++) {
            final int id = i;
            th[i] = new Thread(() -> {
                try {
                    start.await();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
                body.accept(id);
            });
            th[i].start();
        }
        for (Thread t : th) {
            try {
                t.join();
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }
    }

    static final AtomicLong fired = new AtomicLong();   /* callbacks that must not run */
    static final Task COUNT_FIRE = () -> fired.incrementAndGet();

    /* ---- WL1 churn ----------------------------------------------------------
     * As in twbench.c: a timer may only fire when its producer stalled longer
     * than its delay (>= 100 ms) between scheduling and cancelling it; each
     * failed cancel is checked against batch timestamps afterwards, a run
     * whose failures a stall explains is retried, any other is a failure. */

    static final class Wl1Producer {
        long tStart, tEnd, schedOk, schedFail, cancelOk, cancelFail;
        long[] batchTime;
        long[] failSched = new long[65536], failCancel = new long[65536], failDelay = new long[65536];

        void cancel(Peer timer, Object t, long schedBatch, long delay, long batch) {
            if (timer.cancel(t)) {
                cancelOk++;
                return;
            }
            if (cancelFail < failSched.length) {
                int k = (int) cancelFail;
                failSched[k] = schedBatch;
                failCancel[k] = batch;
                failDelay[k] = delay;
            }
            cancelFail++;
        }

        void run(Peer timer, long seed) {
            SplittableRandom rnd = new SplittableRandom(seed);
            Object[] ring = new Object[WL1_RING];
            long[] ringDelay = new long[WL1_RING], ringBatch = new long[WL1_RING];
            long k = sz.wl1K, n = 0;
            int batch = 0;
            batchTime = new long[(int) (k / WL1_BATCH) + 3];
            tStart = System.nanoTime();
            for (long i = 0; i < k; i++) {
                if (i % WL1_BATCH == 0)
                    batchTime[batch = (int) (i / WL1_BATCH)] = System.nanoTime();
                long delay = 100 * MS + rnd.nextLong(10 * SEC - 100 * MS + 1);
                Object t;
                try {
                    t = timer.schedule(COUNT_FIRE, delay);
                } catch (RuntimeException e) {
                    schedFail++;
                    continue;
                }
                schedOk++;
                int slot = (int) (n++ % WL1_RING);
                if (ring[slot] != null)
                    cancel(timer, ring[slot], ringBatch[slot], ringDelay[slot], batch);
                ring[slot] = t;
                ringDelay[slot] = delay;
                ringBatch[slot] = batch;
            }
            batchTime[++batch] = System.nanoTime();
            for (int i = 0; i < WL1_RING; i++)
                if (ring[i] != null)
                    cancel(timer, ring[i], ringBatch[i], ringDelay[i], batch);
            tEnd = batchTime[batch + 1] = System.nanoTime();
        }

        /* The worst stall if every failed cancel is explained by one; -1 if a
         * timer fired before its delay had passed; -2 if too many to check. */
        long explained() {
            if (cancelFail > failSched.length)
                return -2;
            long worst = 0;
            for (int i = 0; i < cancelFail; i++) {
                long span = batchTime[(int) failCancel[i] + 1] - batchTime[(int) failSched[i]];
                if (span < failDelay[i])
                    return -1;
                worst = Math.max(worst, span);
            }
            return worst;
        }
    }

    static double wl1Try(int p) {
        Peer timer = newTimer();
        fired.set(0);
        Wl1Producer[] pr = new Wl1Producer[p];
        for (int i = 0; i < p; i++)
            pr[i] = new Wl1Producer();
        runThreads(p, id -> pr[id].run(timer, 0x1000 + id));
        long f = fired.get();
        timer.stop();
        long t0 = Long.MAX_VALUE, t1 = 0, ok = 0, sfail = 0, cfail = 0, stall = 0;
        long explained = 0;
        for (Wl1Producer w : pr) {
            t0 = Math.min(t0, w.tStart);
            t1 = Math.max(t1, w.tEnd);
            ok += w.schedOk + w.cancelOk;
            sfail += w.schedFail;
            cfail += w.cancelFail;
            long e = w.explained();
            if (e == -1 || (e == -2 && explained == 0))
                explained = e;              /* an early fire outranks "too many" */
            else if (e >= 0)
                stall = Math.max(stall, e);
        }
        if (sfail != 0 || cfail != f || explained < 0)
            fail("WL1", "P=%d: %d schedules failed, %d cancels failed, %d callbacks ran (all must be 0)%s",
                    p, sfail, cfail, f, explained == -1 ? "; a timer fired before its delay had passed"
                    : explained == -2 ? "; too many failed cancels to check them" : "");
        if (cfail != 0) {
            note("WL1 impl=%s P=%d: %d timers fired because a producer stalled (up to %.0f ms across "
                    + "1024 operations); run discarded", impl, p, cfail, stall / 1e6);
            return -1;
        }
        return ok / ((t1 - t0) / 1e9);
    }

    static void wl1() {
        for (int p : new int[] {1, 2, 8}) {
            double rate;
            int attempt = 1;
            while ((rate = wl1Try(p)) < 0) {
                if (attempt++ == WL1_ATTEMPTS)
                    fail("WL1", "P=%d: timers fired in %d runs in a row (producers stalled past the "
                            + "100 ms minimum delay; machine overloaded?)", p, WL1_ATTEMPTS);
            }
            line("WL1 churn impl=%s P=%d ops_per_s=%.0f ops/s", impl, p, rate);
        }
    }

    /* ---- WL2 pending scale ---------------------------------------------------- */

    static void wl2(int n) {
        Object[] h = new Object[n];
        int[] perm = new int[n];
        SplittableRandom rnd = new SplittableRandom(0x2000);
        for (int i = 0; i < n; i++)
            perm[i] = i;
        for (int i = n - 1; i > 0; i--) {
            int j = rnd.nextInt(i + 1);
            int x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        Peer timer = newTimer();
        fired.set(0);
        System.gc();
        sleepNs(50 * MS);
        long rss0 = rssBytes();
        long used0 = Runtime.getRuntime().totalMemory() - Runtime.getRuntime().freeMemory();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++)
            h[i] = timer.schedule(COUNT_FIRE, 60 * SEC + rnd.nextLong(3540 * SEC + 1));
        long t1 = System.nanoTime();
        sleepNs(200 * MS);                      /* let Netty's worker move them into the wheel */
        System.gc();
        long rss1 = rssBytes();
        Runtime rt = Runtime.getRuntime();
        note("WL2 N=%d: RSS %d -> %d bytes; Java heap used after GC %d -> %d bytes", n, rss0, rss1,
                used0, rt.totalMemory() - rt.freeMemory());
        long cfail = 0;
        long t2 = System.nanoTime();
        for (int i = 0; i < n; i++)
            if (!timer.cancel(h[perm[i]]))
                cfail++;
        long t3 = System.nanoTime();
        long f = fired.get();
        timer.stop();
        if (cfail != 0 || f != 0)
            fail("WL2", "N=%d: %d cancels failed, %d callbacks ran (all must be 0)", n, cfail, f);
        line("WL2 pending impl=%s N=%d schedule_ops_per_s=%.0f ops/s", impl, n, n / ((t1 - t0) / 1e9));
        line("WL2 pending impl=%s N=%d cancel_ops_per_s=%.0f ops/s", impl, n, n / ((t3 - t2) / 1e9));
        line("WL2 pending impl=%s N=%d bytes_per_timer=%.1f bytes", impl, n,
                rss1 > rss0 ? (double) (rss1 - rss0) / n : 0.0);
    }

    /* ---- WL3 accuracy under load ---------------------------------------------- */

    static final AtomicLong wl3Fired = new AtomicLong();

    static final class Rec implements Task {
        long expected;           /* time read before schedule + delay */
        long start;              /* callback start */
        int fires;

        @Override
        public void fire() {
            start = System.nanoTime();
            fires++;
            wl3Fired.incrementAndGet();   /* publishes start and fires to the main thread */
        }
    }

    static void wl3() {
        int per = sz.wl3N / WL3_THREADS, n = per * WL3_THREADS;
        Rec[] recs = new Rec[n];
        for (int i = 0; i < n; i++)
            recs[i] = new Rec();
        Peer timer = newTimer();
        wl3Fired.set(0);
        long[] sfail = new long[WL3_THREADS];
        runThreads(WL3_THREADS, id -> {
            SplittableRandom rnd = new SplittableRandom(0x3000 + id);
            long batches = sz.wl3SpanNs / MS;      /* one batch per millisecond */
            long t0 = System.nanoTime();
            int i = 0;
            for (long b = 0; b < batches; b++) {
                int end = (int) (per * (b + 1) / batches);
                sleepUntil(t0 + b * MS);
                for (; i < end; i++) {
                    long delay = MS + rnd.nextLong(sz.wl3MaxDelayNs - MS + 1);
                    Rec r = recs[id * per + i];
                    r.expected = System.nanoTime() + delay;
                    try {
                        timer.schedule(r, delay);
                    } catch (RuntimeException e) {
                        sfail[id]++;
                    }
                }
            }
        });
        long sf = Arrays.stream(sfail).sum();
        if (sf != 0)
            fail("WL3", "%d schedules failed", sf);
        long last = 0;
        for (Rec r : recs)
            last = Math.max(last, r.expected);
        long giveUp = last + 30 * SEC;
        while (wl3Fired.get() < n && System.nanoTime() - giveUp < 0)
            sleepNs(10 * MS);
        sleepNs(100 * MS);
        long got = wl3Fired.get();
        timer.stop();
        if (got != n)
            fail("WL3", "%d callbacks ran, expected exactly %d", got, n);
        long[] late = new long[n];
        long early = 0, dup = 0, worstEarly = 0;
        for (int i = 0; i < n; i++) {
            if (recs[i].fires != 1)
                dup++;
            late[i] = recs[i].start - recs[i].expected;
            if (late[i] < 0) {
                early++;
                worstEarly = Math.min(worstEarly, late[i]);
            }
        }
        if (dup != 0 || early != 0)
            fail("WL3", "%d timers did not run exactly once; %d ran early (worst by %d ns)", dup, early, -worstEarly);
        Arrays.sort(late);
        String[] names = {"lateness_p50", "lateness_p99", "lateness_p999", "lateness_max"};
        double[] qs = {0.5, 0.99, 0.999, 1.0};
        for (int i = 0; i < qs.length; i++) {
            long k = (long) Math.ceil(qs[i] * n);
            k = k == 0 ? 0 : k - 1;
            line("WL3 accuracy impl=%s %s=%.3f ms", impl, names[i], late[(int) k] / 1e6);
        }
    }

    /* ---- WL4 idle cost ------------------------------------------------------------ */

    static void wl4() {
        Peer timer = newTimer();
        fired.set(0);
        Object[] h = new Object[WL4_TIMERS];
        for (int i = 0; i < WL4_TIMERS; i++)
            h[i] = timer.schedule(COUNT_FIRE, 3600 * SEC);
        sleepNs(200 * MS);
        long cpu0 = cpuNs(), cs0 = voluntaryCtxSwitches(), t0 = System.nanoTime();
        sleepUntil(t0 + sz.wl4Ns);
        long cpu1 = cpuNs(), cs1 = voluntaryCtxSwitches(), t1 = System.nanoTime();
        long cfail = 0;
        for (Object t : h)
            if (!timer.cancel(t))
                cfail++;
        long f = fired.get();
        timer.stop();
        if (f != 0 || cfail != 0)
            fail("WL4", "%d callbacks ran, %d cancels failed (must be 0)", f, cfail);
        double wall = (t1 - t0) / 1e9;
        line("WL4 idle impl=%s cpu_per_wall_s=%.5f s/s", impl, (cpu1 - cpu0) / 1e9 / wall);
        line("WL4 idle impl=%s vol_ctxsw_per_s=%.1f switches/s", impl, Math.max(0, cs1 - cs0) / wall);
    }

    /* ---- WL5 burst fire --------------------------------------------------------------- */

    static final AtomicLong wl5Count = new AtomicLong();
    static volatile long wl5First, wl5Last;
    static long wl5N;
    static final Task WL5_TASK = () -> {
        long c = wl5Count.incrementAndGet();
        if (c == 1)
            wl5First = System.nanoTime();
        if (c == wl5N)
            wl5Last = System.nanoTime();
    };

    /* One burst, all deadlines at base + delayNs: {callbacks/s, the first
     * callback's start minus that common deadline in ms (as twbench.c's;
     * negative would be a fire before it)}, or null when scheduling
     * overran. */
    static double[] wl5Try(long delayNs) {
        int n = sz.wl5N;
        Peer timer = newTimer();
        wl5N = n;
        wl5Count.set(0);
        wl5First = wl5Last = 0;
        long due = System.nanoTime() + delayNs, overran = 0;
        for (int i = 0; i < n; i++) {
            long now = System.nanoTime();
            if (now - due >= 0) {
                overran = n - i;
                break;
            }
            timer.schedule(WL5_TASK, due - now);
        }
        long scheduled = n - overran, giveUp = due + 60 * SEC;
        while (wl5Count.get() < scheduled && System.nanoTime() - giveUp < 0)
            sleepNs(5 * MS);
        sleepNs(100 * MS);
        long got = wl5Count.get();
        timer.stop();
        if (got != scheduled)
            fail("WL5", "%d callbacks ran, expected exactly %d", got, scheduled);
        if (overran != 0) {
            note("WL5 impl=%s: scheduling %d timers took longer than the %d ms delay; retrying with "
                    + "twice the delay", impl, n, delayNs / MS);
            return null;
        }
        long first = wl5First;
        return new double[] {n / (Math.max(1, wl5Last - first) / 1e9), (first - due) / 1e6};
    }

    static void wl5() {
        long delay = WL5_BASE_DELAY_NS;
        double[] r;
        while ((r = wl5Try(delay)) == null) {
            delay *= 2;
            if (delay > 20 * SEC)
                fail("WL5", "cannot schedule %d timers within 20 s", sz.wl5N);
        }
        if (delay != WL5_BASE_DELAY_NS)
            note("WL5 impl=%s: common delay was %d ms", impl, delay / MS);
        line("WL5 burst impl=%s callbacks_per_s=%.0f callbacks/s", impl, r[0]);
        line("WL5 first impl=%s first_callback_after_deadline_ms=%.3f ms", impl, r[1]);
    }

    /* ---- WL6 touch ------------------------------------------------------------------------ */

    static final class Session {
        Object timeout;           /* guarded by this */
    }

    static void wl6() {
        int n = sz.wl6Sessions;
        Peer timer = newTimer();
        fired.set(0);
        Session[] sessions = new Session[n];
        for (int i = 0; i < n; i++) {
            sessions[i] = new Session();
            sessions[i].timeout = timer.schedule(COUNT_FIRE, WL6_TIMEOUT_NS);
        }
        long[] ok = new long[WL6_THREADS], failed = new long[WL6_THREADS];
        long[] tStart = new long[WL6_THREADS], tEnd = new long[WL6_THREADS];
        runThreads(WL6_THREADS, id -> {
            SplittableRandom rnd = new SplittableRandom(0x6000 + id);
            long start = System.nanoTime(), stop = start + sz.wl6Ns, now = start;
            long good = 0, bad = 0;
            while (now - stop < 0) {
                for (int k = 0; k < 256; k++) {
                    Session s = sessions[rnd.nextInt(n)];
                    /* No reschedule in either peer: cancel + schedule, one
                     * toucher per session at a time. */
                    synchronized (s) {
                        if (timer.cancel(s.timeout)) {
                            s.timeout = timer.schedule(COUNT_FIRE, WL6_TIMEOUT_NS);
                            good++;
                        } else {
                            bad++;
                        }
                    }
                }
                now = System.nanoTime();
            }
            ok[id] = good;
            failed[id] = bad;
            tStart[id] = start;
            tEnd[id] = now;
        });
        long timeouts = fired.get(), cfail = 0;
        for (Session s : sessions)
            if (!timer.cancel(s.timeout))
                cfail++;
        timer.stop();
        long tf = Arrays.stream(failed).sum(), good = Arrays.stream(ok).sum();
        if (tf != 0 || timeouts != 0 || cfail != 0)
            fail("WL6", "%d touches failed, %d sessions timed out, %d final cancels failed (all must be 0)",
                    tf, timeouts, cfail);
        long t0 = Arrays.stream(tStart).min().getAsLong(), t1 = Arrays.stream(tEnd).max().getAsLong();
        line("WL6 touch impl=%s touches_per_s=%.0f touches/s", impl, good / ((t1 - t0) / 1e9));
    }

    /* ---- main ----------------------------------------------------------------------------- */

    /* The workloads in the order they run, as twbench.c's: WORKLOADS.md's
     * six, and 1b, twbench's WL1 in blocks of 16 with the batch calls. */
    static final String[] WL_IDS = {"1", "1b", "2", "3", "4", "5", "6"};

    static void run(String wl) {
        switch (wl) {
            case "1": wl1(); break;
            case "1b":
                /* timerwheel's batch calls (tw_schedule_many, tw_cancel_many):
                 * neither Netty nor java.util.Timer has one. */
                for (int p : new int[] {1, 2, 8})
                    line("WL1b churn16 impl=%s P=%d ops_per_s=n/a ops/s", impl, p);
                break;
            case "2":
                if (!emit)
                    wl2(WL2_WARMUP_N);
                else if (wl2OnlyN != 0)
                    wl2(wl2OnlyN);
                else
                    for (int n : sz.wl2N)
                        wl2(n);
                break;
            case "3":
                wl3();
                /* The 100 us tick variant is timerwheel's; HashedWheelTimer
                 * sleeps in whole milliseconds, so it cannot tick faster, and
                 * java.util.Timer counts whole milliseconds. */
                for (String q : new String[] {"lateness_p50", "lateness_p99", "lateness_p999", "lateness_max"})
                    line("WL3 accuracy impl=%s tick_us=100 %s=n/a ms", impl, q);
                break;
            case "4": wl4(); break;
            case "5": wl5(); break;
            case "6": wl6(); break;
            default: throw new IllegalArgumentException();
        }
    }

    static void usage() {
        System.err.println("usage: NettyBench [--impl netty|jdktimer] [--wl LIST] [--repeat N] [--n N] [--quick]\n"
                + "  --wl  workloads, e.g. 1,3,5 or WL2; 1b (WL1 in blocks of 16) is n/a here\n"
                + "        (default 1,1b,2,3,4,5,6)");
        System.exit(2);
    }

    public static void main(String[] args) {
        boolean[] wl = new boolean[WL_IDS.length];
        boolean anyWl = false;
        int repeat = 1;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--quick":
                    sz = QUICK;
                    break;
                case "--impl":
                    if (++i >= args.length || !Arrays.asList("netty", "jdktimer").contains(args[i]))
                        usage();
                    impl = args[i];
                    break;
                case "--wl":
                    if (++i >= args.length)
                        usage();
                    for (String t : args[i].split(",")) {
                        if (t.regionMatches(true, 0, "WL", 0, 2))
                            t = t.substring(2);
                        int v = 0;
                        while (v < WL_IDS.length && !WL_IDS[v].equalsIgnoreCase(t))
                            v++;
                        if (v == WL_IDS.length)
                            usage();
                        wl[v] = anyWl = true;
                    }
                    break;
                case "--n":
                    if (++i >= args.length || (wl2OnlyN = Integer.parseInt(args[i])) < 2)
                        usage();
                    break;
                case "--repeat":
                    if (++i >= args.length || (repeat = Integer.parseInt(args[i])) < 1)
                        usage();
                    break;
                default:
                    usage();
            }
        }
        if (!anyWl)
            Arrays.fill(wl, true);
        Sizes measured = sz;
        System.err.println("nettybench: impl=" + impl + (impl.equals("jdktimer")
                ? " (java.util.Timer, delays in ms rounded up + 1, callbacks on: its timer thread)"
                : " (HashedWheelTimer 1 ms x 1024, callbacks on: wheel thread)")
                + (sz == QUICK ? " --quick" : ""));
        for (int i = 0; i < WL_IDS.length; i++) {
            String w = WL_IDS[i];
            if (!wl[i])
                continue;
            if (!w.equals("4")) {     /* warm-up at --quick size, output suppressed */
                sz = QUICK;
                emit = false;
                run(w);
                sz = measured;
                emit = true;
            }
            for (int r = 0; r < repeat; r++)
                run(w);
        }
        System.exit(0);
    }
}
