#!/usr/bin/env bash
# bench/run.sh: the workloads of shared/bench/WORKLOADS.md side by side.
#
#   bench/run.sh [--quick] [--no-install]
#
# Installs what is missing (Debian packages: the library's build
# dependencies via scripts/deps.sh when present, libevent-dev,
# default-jdk-headless, libnetty-java, golang-go), builds twbench and twfloor
# (cmake Release, -DTW_BUILD_BENCH=ON, into build/bench), the Java peers
# (javac against the packaged netty-common.jar) and the Go peer (go build,
# offline: GOPROXY=off, standard library only, into build/bench/go), and runs
# every workload, one fresh process per implementation and workload (WL4
# once, the others in three rounds that take every implementation in turn:
# min/median/max; each WL2 process after
# twwarm, bench/warm.c, which touches and frees more memory than it takes),
# against:
#
#   timerwheel      this library with defaults (4096 slots per level, no cap)
#   timerwheel-cfg  this library configured for the workload: 1024 slots per
#                   level, max_timers = the workload's working set
#   heap            mutex + min-heap + condvar baseline (bench/heap_timer.c)
#   libevent        libevent 2.1 (bench/impl_libevent.c)
#   netty           Netty's HashedWheelTimer (bench/peers/netty/)
#   jdktimer        java.util.Timer (bench/peers/netty/, --impl jdktimer)
#   go              Go's runtime timers: time.AfterFunc, Stop, Reset
#                   (bench/peers/go/)
#
# It prints one table: a row per figure, a column per implementation (the
# two timerwheel columns first), and the ratio of the worse of the two
# timerwheel columns to the best other column. Then twfloor (bench/floor.c,
# ~10 s) measures what no timer library here can go below (clock reads,
# uncontended atomics, memory latency up to 400 MiB, a cache-line hand-off
# between cores, futex wake-to-run, a burst's runs, a first touch, random
# CASes with work around them); its FLOOR lines follow the table as
# "# hardware floor (bench/floor.c)". Then beside (bench/beside.c, ~10 s):
# the lateness of ordinary timers armed beside a million-timer burst while
# the cursor claims the burst (timerwheel only: both columns' settings,
# and a busy service whose wheel has work in every tick).
# Then a sweep of the callback threads (WL5 and WL3 on 0, 1, 2 and 4
# workers) and farburst (bench/farburst.c, ~1 min): a burst armed beyond
# level 0.
#
#   --quick       scaled-down sizes and durations (a smoke run, ~2 minutes)
#   --no-install  do not touch packages
#
# WL1b is WL1 armed and cancelled in blocks of 16 with the batch calls
# (tw_schedule_many, tw_cancel_many): timerwheel columns only, n/a for the
# peers, which have no batch call.
#
# Environment: BUILD_DIR (default build/bench), IMPLS (default
# "timerwheel timerwheel-cfg heap libevent netty jdktimer go"), WLS (default
# "1 1b 2 3 4 5 6").
# Raw lines go to $BUILD_DIR/results.txt, each program's stderr to
# $BUILD_DIR/logs/. Exits 1 if any workload failed its correctness check
# or twfloor failed.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build/bench}
IMPLS=${IMPLS:-"timerwheel timerwheel-cfg heap libevent netty jdktimer go"}
WLS=${WLS:-"1 1b 2 3 4 5 6"}
QUICK=
INSTALL=1
for a in "$@"; do
  case $a in
    --quick) QUICK=--quick ;;
    --no-install) INSTALL= ;;
    -h|--help) sed -n '2,47p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $a" >&2; exit 2 ;;
  esac
done

echo "# timerwheel benchmarks${QUICK:+ (--quick: scaled-down sizes)}"
echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "# nproc: $(nproc)"
echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
echo "# commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (dirty)')"

# ---- packages ------------------------------------------------------------------

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else echo "run.sh: need root to run: $*" >&2; exit 1
  fi
}

installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

if [ -n "$INSTALL" ]; then
  if [ -f scripts/deps.sh ]; then
    bash scripts/deps.sh
    need=()
  else
    need=(cmake make gcc pkg-config liburcu-dev libck-dev)
  fi
  need+=(libevent-dev default-jdk-headless libnetty-java golang-go)
  missing=()
  for p in "${need[@]}"; do installed "$p" || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "# installing: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" </dev/null >/dev/null
  fi
fi

# ---- build -------------------------------------------------------------------------

mkdir -p "$BUILD_DIR/logs"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTW_BUILD_BENCH=ON \
  -DTW_BUILD_TESTS=OFF -DTW_BUILD_STRESS=OFF -DTW_BUILD_EXAMPLES=OFF \
  >"$BUILD_DIR/logs/cmake.log" 2>&1 || { cat "$BUILD_DIR/logs/cmake.log" >&2; exit 1; }
cmake --build "$BUILD_DIR" --target twbench twfloor beside twwarm farburst -j "$(nproc)" \
  >"$BUILD_DIR/logs/build.log" 2>&1 || { cat "$BUILD_DIR/logs/build.log" >&2; exit 1; }
TWBENCH=$BUILD_DIR/bench/twbench
TWFLOOR=$BUILD_DIR/bench/twfloor
TWBESIDE=$BUILD_DIR/bench/beside
TWFARBURST=$BUILD_DIR/bench/farburst
TWWARM=$BUILD_DIR/bench/twwarm

NETTY_JAR=
for j in /usr/share/java/netty-common.jar /usr/share/java/netty-common-*.jar /usr/share/java/netty-all.jar; do
  if [ -f "$j" ]; then NETTY_JAR=$j; break; fi
done
wants() { [[ " $IMPLS " == *" $1 "* ]]; }

# netty and jdktimer: one Java program (NettyBench --impl netty|jdktimer).
if wants netty || wants jdktimer; then
  if [ -z "$NETTY_JAR" ] || ! command -v javac >/dev/null; then
    echo "run.sh: netty-common.jar or javac not found (libnetty-java, default-jdk-headless)" >&2
    exit 1
  fi
  mkdir -p "$BUILD_DIR/netty"
  javac -Xlint:all -Werror -d "$BUILD_DIR/netty" -cp "$NETTY_JAR" bench/peers/netty/NettyBench.java
fi

# go: offline (GOPROXY=off; go.mod has no requirements), with the Debian
# toolchain as it is (GOTOOLCHAIN=local), caches inside the build directory.
GOBENCH=
if wants go; then
  if ! command -v go >/dev/null; then
    echo "run.sh: go not found (golang-go)" >&2
    exit 1
  fi
  mkdir -p "$BUILD_DIR/go"
  GO_OUT=$(cd "$BUILD_DIR/go" && pwd)
  GOBENCH=$GO_OUT/gobench
  (cd bench/peers/go && env GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local \
    GOCACHE="$GO_OUT/cache" GOPATH="$GO_OUT/gopath" go build -o "$GOBENCH" .) \
    >"$BUILD_DIR/logs/go-build.log" 2>&1 || { cat "$BUILD_DIR/logs/go-build.log" >&2; exit 1; }
fi

# ---- run ------------------------------------------------------------------------------

RESULTS=$BUILD_DIR/results.txt
: >"$RESULTS"
FAILED=()
if [ -n "$QUICK" ]; then WL2_NS="100000 1000000"; else WL2_NS="1000000 10000000"; fi

# run IMPL WL [args...]: one fresh process per implementation and workload, so
# that a failure loses one cell and one run's memory never shows in another's.
run() {
  local impl=$1 wl=$2 tag
  shift 2
  tag="$impl-wl$wl${*:+-$(echo "$*" | tr -c 'a-zA-Z0-9' '_')}"
  local cmd
  case $impl in
    netty|jdktimer)
      cmd=(java -Dclk.tck="$(getconf CLK_TCK)" -cp "$BUILD_DIR/netty:$NETTY_JAR" NettyBench --impl "$impl") ;;
    go) cmd=("$GOBENCH") ;;
    *) cmd=("$TWBENCH" --impl "$impl") ;;
  esac
  echo "# running WL$wl impl=$impl $*" >&2
  if "${cmd[@]}" --wl "$wl" $QUICK "$@" >>"$RESULTS" 2>"$BUILD_DIR/logs/$tag.log"; then
    grep -h 'stalled\|delay was\|retrying' "$BUILD_DIR/logs/$tag.log" >&2 || true
  else
    FAILED+=("WL$wl impl=$impl $*")
    echo "FAILED WL$wl $impl" >>"$RESULTS"
    sed 's/^/#   /' "$BUILD_DIR/logs/$tag.log" >&2
  fi
}

# run_wl2 IMPL N: WL2 at size N in a process that starts on memory the host
# backs. This guest returns freed memory to the host a few seconds after it
# is freed (virtio-balloon free page reporting), and the first large
# allocation after that pays the host's fault on every page: the same
# timerwheel binary armed 10M timers at 11.7-15.7M/s after 8 s idle and at
# 32-34M/s right after twwarm (2026-11-29; the heap's 14.7-16.1M either
# way). Without it a column's figure hung on what ran before it. twwarm
# (bench/warm.c) touches and frees 300 bytes a timer, more than any column
# takes (libevent, the largest, 216), before every WL2 process alike.
run_wl2() {
  "$TWWARM" $(($2 * 300)) || echo "run.sh: twwarm failed; WL2 impl=$1 N=$2 runs unwarmed" >&2
  run "$1" 2 --n "$2"
}

for wl in $WLS; do
  for impl in $IMPLS; do
    case $wl in
      2) for n in $WL2_NS; do run_wl2 "$impl" "$n"; done ;;
      *) run "$impl" "$wl" ;;
    esac
  done
done

# WL5 and WL6 hang on a cache-line hand-off between the CPUs, and the host
# of a virtual machine changes that for minutes at a time (on the AMD guest
# of 2026-11-28 a hand-off took 27-38 ns, then 160-175 ns for the next ten
# minutes, and WL6 went from 29-32M to 14.4-15.0M touches/s with it; Go's
# column moves the same way). One run each let a column meet one spell and
# the next column another. Two more rounds, every implementation in turn,
# so that each column's median comes from the same spells as the others'.
# WL2 too: one process a figure varied 2x between two runs of the same
# binary (schedules at 1M: 8.8M and 13.9M, 2026-11-28), and each of its
# processes measures one size, so its rounds are fresh processes as well.
# WL1, WL1b and WL3 as well: their three runs were one process each
# (--repeat 3), and a spell of a minute took a whole column (WL1 P=1 of the
# configured column at 26-29M in all three of one process, the defaults'
# 47-55M in the process before it, 2026-11-29 12:35).
#
# WL5 and WL6 two rounds more again, and every even round takes the
# columns in reverse order: on the AMD guest of 2026-11-30 WL6's figure
# switched between two levels (timerwheel 24-27M and 67-72M, Go 11-12M
# and 28-32M) for spells of seconds to minutes, in the middle of one
# process as well, and the time went to the record's cache miss in both
# (perf); a column takes about ten seconds, so with three rounds in one
# order the timerwheel columns met the slow level in two rounds and Go,
# a minute later, the fast one in all three (the 08:46 run: 27.1M
# against 37.9M, where matched spells give 2.0-2.5x). Five rounds, in
# both orders, give each column's median the same chance of either.
reversed_impls() {
  local out="" impl
  for impl in $IMPLS; do out="$impl${out:+ $out}"; done
  echo "$out"
}
for round in 2 3 4 5; do
  order=$IMPLS
  [ $((round % 2)) -eq 0 ] && order=$(reversed_impls)
  for wl in $WLS; do
    case $wl in
      4) continue ;;
      5|6) ;;
      *) [ "$round" -le 3 ] || continue ;;
    esac
    for impl in $order; do
      if [ "$wl" = 2 ]; then
        for n in $WL2_NS; do run_wl2 "$impl" "$n"; done
      else
        run "$impl" "$wl"
      fi
    done
  done
done

# The hardware floor: FLOOR lines in the same results file (the table below
# reads only WLn lines), printed after the table.
echo "# running twfloor $QUICK" >&2
if ! "$TWFLOOR" $QUICK >>"$RESULTS" 2>"$BUILD_DIR/logs/twfloor.log"; then
  FAILED+=("twfloor (bench/floor.c)")
  echo "FAILED FLOOR twfloor" >>"$RESULTS"
  sed 's/^/#   /' "$BUILD_DIR/logs/twfloor.log" >&2
fi

# Timers beside a burst: BESIDE lines, printed after the floor.
echo "# running beside" >&2
BESIDE_N=1000000
[ -n "$QUICK" ] && BESIDE_N=200000
# The third: a busy service, a probe every tick armed 50 ms ahead, so
# the wheel has work in every tick before the burst's (the burst must be
# claimed early all the same: cursor.c, start_burst). The fourth: the
# same with 256 slots a level, the burst beyond level 0 (its early drain
# gives way to the probes' ticks: wheel.c, early cascades).
for spec in "0 2000 3000" "1 2000 3000" "0 1000 50000" "0 1000 50000 256"; do
  # shellcheck disable=SC2086 # the spec is three or four words
  if ! "$TWBESIDE" 4 "$BESIDE_N" $spec 2>"$BUILD_DIR/logs/beside.log" | sed 's/^/BESIDE /' >>"$RESULTS" ||
     [ -s "$BUILD_DIR/logs/beside.log" ]; then
    FAILED+=("beside (bench/beside.c)")
    sed 's/^/#   /' "$BUILD_DIR/logs/beside.log" >&2
  fi
done

# ---- table ------------------------------------------------------------------------------
# Callback threads: WL5 (a burst) and WL3 (lateness under load) with 0, 1,
# 2 and 4 workers (tw_config.workers; 0: the cursor runs the callbacks
# itself) for timerwheel's two columns and the heap (whose dispatcher
# needs at least one worker: its 0 is 1): WORKERS lines, printed after
# BESIDE. One process each: figures for choosing the count, outside the
# table and its ratios. Every configuration field is a path users take;
# this one had none until 2026-11-29, when its first run found a burst's
# first callback 75 ms late and 18.7M callbacks/s on workers = 0.
echo "# running the workers sweep" >&2
for w in 0 1 2 4; do
  for impl in timerwheel timerwheel-cfg heap; do
    wants "$impl" || continue
    if ! "$TWBENCH" --impl "$impl" --wl 5,3 --workers "$w" $QUICK \
         2>"$BUILD_DIR/logs/workers-$impl-$w.log" | sed 's/^/WORKERS /' >>"$RESULTS"; then
      FAILED+=("workers sweep: $impl, workers=$w")
      echo "FAILED WORKERS $impl $w" >>"$RESULTS"
      sed 's/^/#   /' "$BUILD_DIR/logs/workers-$impl-$w.log" >&2
    fi
  done
done

# A burst beyond level 0 (bench/farburst.c): a million timers (200,000
# with --quick) due at one instant, armed a level-0 turn or more ahead,
# with the defaults, the configured column's settings, and no workers:
# FARBURST lines, printed last. Until 2026-11-29 the first callback came
# 115-150 ms after the deadline there (src/wheel.c, early cascades).
echo "# running farburst" >&2
FAR_N=1000000
[ -n "$QUICK" ] && FAR_N=200000
for far in "4096 2" "1024 2" "4096 0"; do
  # shellcheck disable=SC2086 # two words: slots and workers
  if ! "$TWFARBURST" "$FAR_N" $far 2>"$BUILD_DIR/logs/farburst.log" | sed 's/^/FARBURST /' >>"$RESULTS" ||
     [ -s "$BUILD_DIR/logs/farburst.log" ]; then
    FAILED+=("farburst $far (bench/farburst.c)")
    sed 's/^/#   /' "$BUILD_DIR/logs/farburst.log" >&2
  fi
done

echo
echo "# WL1/WL1b/WL2/WL3: median (min-max) of 3 runs, WL5/WL6 of 5 (run.sh says why). Ratio: the worse of the two timerwheel columns (named: def"
echo "# = timerwheel, cfg = timerwheel-cfg) / the best other column ('better' means timerwheel wins:"
echo "# higher for /s rates, lower for ms, bytes, CPU and switches)."
echo "# timerwheel: defaults (4096 slots per level, no cap); timerwheel-cfg: 1024 slots per level and"
echo "# max_timers = the workload's working set (WL1 P x 1025, WL1b P x 1040, WL2 N, WL3 all, WL4 10k, WL5 burst,"
echo "# WL6 sessions)."
echo "# Callbacks: timerwheel, timerwheel-cfg and heap on 2 workers; libevent on its loop thread; netty on its"
echo "# wheel thread; jdktimer on its single timer thread; go on a goroutine each (GOMAXPROCS = nproc)."
echo "# WL6: timerwheel, heap, libevent reschedule, go Timer.Reset; netty, jdktimer cancel + schedule under a"
echo "# per-session lock. jdktimer: ms delays rounded up + 1 ms (never early on its truncated ms clock)."
echo "# go: WL1 producers yield once per 64 operations (bench/peers/go/churn.go says why)."
echo "# WL1b: WL1 in blocks of 16 (timerwheel only; the peers have no batch call): per block one tw_schedule_many"
echo "# (one clock reading) and one tw_cancel_many of the 16 oldest; ops = timers armed + cancelled, as WL1."
echo "# WL5 first: the first callback's start minus the burst's common deadline (issue 14: within 1 ms)."
echo
awk -v impls="$IMPLS" '
function fmt(v, unit) {
  if (unit ~ /\/s$/ && unit != "s/s" && unit != "switches/s") {
    if (v >= 1e6) return sprintf("%.2fM", v / 1e6)
    if (v >= 1e3) return sprintf("%.1fk", v / 1e3)
    return sprintf("%.0f", v)
  }
  if (unit == "s/s") return sprintf("%.5f", v)
  if (unit == "ms") return sprintf("%.3f", v)
  return sprintf("%.1f", v)
}
function higher_better(unit) { return unit ~ /\/s$/ && unit != "s/s" && unit != "switches/s" }
function better(a, b, unit) { return higher_better(unit) ? a > b : a < b }
function is_tw(impl) { return impl == "timerwheel" || impl == "timerwheel-cfg" }
function tw_tag(impl) { return impl == "timerwheel-cfg" ? "cfg" : "def" }
function median(key, impl,    n, i, j, a, t) {
  n = cnt[key, impl]
  for (i = 1; i <= n; i++) a[i] = val[key, impl, i]
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  lo[key, impl] = a[1]; hi[key, impl] = a[n]
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$1 == "FAILED" { failed[$2, $3] = 1; next }
$1 ~ /^WL[0-9]b?$/ {
  impl = ""; key = $1 " " $2
  for (i = 3; i < NF; i++) {
    if ($i ~ /^impl=/) { impl = substr($i, 6); continue }
    if (i == NF - 1) { split($i, kv, "="); fig = kv[1]; v = kv[2]; continue }
    key = key " " $i
  }
  key = key " " fig " [" $NF "]"
  if (!(key in seen)) { seen[key] = 1; order[++nrows] = key; unit[key] = $NF; wl[key] = $1 }
  if (v == "n/a") { na[key, impl] = 1; next }
  cnt[key, impl]++; val[key, impl, cnt[key, impl]] = v + 0
}
END {
  # The timerwheel columns lead, the others follow in IMPLS order.
  ng = split(impls, given, " ")
  ni = 0
  for (i = 1; i <= ng; i++) if (is_tw(given[i])) im[++ni] = given[i]
  for (i = 1; i <= ng; i++) if (!is_tw(given[i])) im[++ni] = given[i]
  w0 = length("figure")
  for (r = 1; r <= nrows; r++) if (length(order[r]) > w0) w0 = length(order[r])
  for (r = 1; r <= nrows; r++) {
    k = order[r]
    for (c = 1; c <= ni; c++) {
      if (cnt[k, im[c]] == 0) { cell[r, c] = failed[wl[k], im[c]] ? "FAIL" : na[k, im[c]] ? "n/a" : "-"; continue }
      m = median(k, im[c]); med[r, c] = m; have[r, c] = 1
      cell[r, c] = fmt(m, unit[k])
      if (cnt[k, im[c]] > 1) cell[r, c] = cell[r, c] " (" fmt(lo[k, im[c]], unit[k]) "-" fmt(hi[k, im[c]], unit[k]) ")"
    }
    # tw: the worse of the timerwheel columns (a failed one is the worst);
    # best: the best of the others.
    tw = 0; twfail = ""
    for (c = 1; c <= ni; c++) {
      if (!is_tw(im[c])) continue
      if (!have[r, c]) { if (failed[wl[k], im[c]]) twfail = twfail (twfail == "" ? "" : ", ") tw_tag(im[c]); continue }
      if (!tw || better(med[r, tw], med[r, c], unit[k])) tw = c
    }
    best = 0
    for (c = 1; c <= ni; c++) {
      if (is_tw(im[c]) || !have[r, c]) continue
      if (!best || better(med[r, c], med[r, best], unit[k])) best = c
    }
    ratio[r] = "-"
    if (twfail != "") ratio[r] = "FAIL (" twfail ")"
    else if (tw && best) {
      if (med[r, best] <= 0) ratio[r] = "n/a (" im[best] " is " fmt(med[r, best], unit[k]) ")"
      else {
        q = med[r, tw] / med[r, best]
        verdict = (q > 0.98 && q < 1.02) ? "on par" : ((higher_better(unit[k]) ? q > 1 : q < 1) ? "better" : "worse")
        ratio[r] = sprintf("%.2f (%s) vs %s (%s)", q, tw_tag(im[tw]), im[best], verdict)
      }
    }
  }
  for (c = 1; c <= ni; c++) { wc[c] = length(im[c]); for (r = 1; r <= nrows; r++) if (length(cell[r, c]) > wc[c]) wc[c] = length(cell[r, c]) }
  line = sprintf("%-" w0 "s", "figure")
  for (c = 1; c <= ni; c++) line = line sprintf(" | %" wc[c] "s", im[c])
  line = line " | worse timerwheel / best other"
  print line
  gsub(/./, "-", line); print line
  for (r = 1; r <= nrows; r++) {
    line = sprintf("%-" w0 "s", order[r])
    for (c = 1; c <= ni; c++) line = line sprintf(" | %" wc[c] "s", cell[r, c])
    print line " | " ratio[r]
  }
}' "$RESULTS"

echo
echo "# hardware floor (bench/floor.c)"
echo "# median of 5 runs (3 with --quick); after # the fastest and slowest run"
grep '^FLOOR ' "$RESULTS" || echo "(no figures: twfloor failed, see $BUILD_DIR/logs/twfloor.log)"

echo
echo "# timers beside a burst (bench/beside.c): probes due before the burst's instant"
grep '^BESIDE ' "$RESULTS" | sed 's/^BESIDE //' || echo "(no figures: beside failed, see $BUILD_DIR/logs/beside.log)"

echo
echo "# callback threads (tw_config.workers; 0: on the cursor; the heap's 0 is 1): one process each,"
echo "# WL5 burst and WL3 at the 1 ms tick"
awk '$1 == "WORKERS" && $2 ~ /^WL[35]$/ && $5 !~ /^tick_us=/ {
  impl = substr($4, 6); split($5, kv, "="); fig = $2 " " kv[1]
  if (!(impl in seen)) { seen[impl] = 1; rows[++nr] = impl }
  if (!(fig in fseen)) { fseen[fig] = 1; figs[++nf] = fig; unit[fig] = $6 }
  v = kv[2]
  if (unit[fig] == "callbacks/s") v = sprintf("%.2fM", v / 1e6)
  val[impl, fig] = v
}
END {
  if (nr == 0) { print "(no figures: the sweep failed, see the logs)"; exit }
  line = sprintf("%-20s", "impl@workers")
  for (f = 1; f <= nf; f++) { h = figs[f]; sub(/lateness_/, "", h); sub(/callbacks_per_s/, "cb/s", h); sub(/first_callback_after_deadline_ms/, "first", h); line = line sprintf(" | %14s", h " [" (unit[figs[f]] == "callbacks/s" ? "/s" : unit[figs[f]]) "]") }
  print line
  for (r = 1; r <= nr; r++) {
    line = sprintf("%-20s", rows[r])
    for (f = 1; f <= nf; f++) line = line sprintf(" | %14s", ((rows[r], figs[f]) in val) ? val[rows[r], figs[f]] : "-")
    print line
  }
}' "$RESULTS"

echo
echo "# a burst armed beyond level 0 (bench/farburst.c): first and last callback after the deadline"
grep '^FARBURST ' "$RESULTS" | sed 's/^FARBURST //' || echo "(no figures: farburst failed, see $BUILD_DIR/logs/farburst.log)"

if [ ${#FAILED[@]} -gt 0 ]; then
  echo
  echo "FAILED (correctness check; see $BUILD_DIR/logs/):"
  printf '  %s\n' "${FAILED[@]}"
  exit 1
fi
