#!/usr/bin/env bash
# Proof under fire: the checks beyond the unit and stress tests.
#
#   model     Spin model of the slot protocol (stress/model/run.sh):
#             exhaustive searches of small configurations, every rare path
#             reachable, and the deliberately broken variants caught
#   fuzz      libFuzzer + ASan/UBSan on the API against an oracle
#             (scripts/test-fuzz.sh; TW_FUZZ_SECONDS, default 40 when
#             CI=true, else 30)
#   inject    a ThreadSanitizer build with TW_INJECT_YIELDS (build/inject):
#             the stress programs with yields injected at the protocol's
#             delicate points, rare_paths requiring every rare path
#   valgrind  memcheck over every unit test executable of build/gcc
#             (definite and indirect leaks are errors)
#
#   scripts/test-proof.sh                  all four, in that order
#   scripts/test-proof.sh inject valgrind  only those
# Environment: TW_FUZZ_SECONDS, TW_STRESS_SECONDS (each stress test of the
# inject step; default 3 when CI=true, else 5), TW_MODEL_FULL=1 (larger
# model searches, ~5 more minutes), TW_JOBS (parallelism, default 2).
# Stops at the first failing step. About 10 minutes on 2 cores with CI=true.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

me=test-proof.sh kind=step tag=proof/
all_steps=(model fuzz inject valgrind)
# shellcheck source=scripts/lib.sh
. "$repo/scripts/lib.sh"
select_steps "$@"

apt_install() { # packages...
    echo "test-proof.sh: installing $*"
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" </dev/null
}

# ---- model ------------------------------------------------------------------

step_model() {
    run "Spin model (stress/model/run.sh)" env TW_MODEL_DIR="$repo/build/model" \
        "$repo/stress/model/run.sh"
}

# ---- fuzz -------------------------------------------------------------------

step_fuzz() {
    [ -x "$repo/scripts/test-fuzz.sh" ] || fail "scripts/test-fuzz.sh is missing"
    run "libFuzzer (scripts/test-fuzz.sh)" "$repo/scripts/test-fuzz.sh"
}

# ---- inject -----------------------------------------------------------------

step_inject() {
    mkdir -p build/inject
    tsan_probe build/inject proof/inject
    run "configure (clang, TSan, TW_INJECT_YIELDS)" \
        cmake -S . -B build/inject -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
              -DTW_WERROR=ON -DTW_SANITIZE=thread -DTW_INJECT_YIELDS=ON \
              -DTW_BUILD_STRESS=ON -DTW_BUILD_TESTS=OFF -DTW_BUILD_EXAMPLES=OFF
    run "build" cmake --build build/inject -j "$jobs"
    # $jobs at a time: an injected yield gives the CPU away only where
    # another thread waits for it, which a neighbour's threads make more
    # often; the programs whose paths need the CPU to themselves (pressure,
    # spill_burst) run alone (RUN_SERIAL, stress/CMakeLists.txt), and
    # rare_paths goes on while a path is missing. halt_on_error=0: every
    # race of a run is reported; TSan still exits 66 if it saw one.
    run "ctest -L stress with injected yields (TW_STRESS_SECONDS=$TW_STRESS_SECONDS)" \
        env TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 suppressions=$repo/share/timerwheel/tsan.supp" \
        "${tsan_wrap[@]}" ctest --test-dir build/inject -L stress --output-on-failure \
            --no-tests=error --timeout 600 -j "$jobs"
    local log="build/inject/Testing/Temporary/LastTest.log"
    if [ -f "$log" ]; then
        echo "---- [proof/inject] rare paths taken:"
        awk '/ Testing: /{name=$3} /^rare paths:/{sub(/^rare paths: */, ""); printf "      %-38s %s\n", name, $0}' \
            "$log" || true
    fi
}

# ---- valgrind -----------------------------------------------------------------

# One unit test executable under memcheck; its output goes to a log.
# --max-threads: test_extremes starts 1024 workers (valgrind's default cap
# is 500 threads, past which it aborts).
valgrind_one() { # executable, log
    local exe="$1" log="$2" t0=$SECONDS rc=0
    (cd "$(dirname "$exe")" &&
     valgrind --error-exitcode=1 --leak-check=full --max-threads=2048 \
              --errors-for-leak-kinds=definite,indirect \
              --show-leak-kinds=definite,indirect "./$(basename "$exe")") \
        >"$log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "      ok     $(basename "$exe") ($((SECONDS - t0)) s)"
    else
        echo "      FAILED $(basename "$exe") (exit $rc; $log)"
        show_failure "$log"
    fi
    return "$rc"
}

# What a failed run's log says, into CI's output: the log itself stays in
# build/, which a CI record does not keep (a run of 2026-11-30 said only
# "exit 1": a failed test and a memcheck error both exit 1). The failed
# tests with their assertions, then memcheck's first error and summary.
# Each grep may find nothing (|| true: under set -e a miss would end the
# block and hide what follows); head reads the whole list first (no
# SIGPIPE). It never changes valgrind_one's verdict: it returns 0.
show_failure() { # log
    {
        { grep -B4 -A1 -E '^\[ +(ERROR|LINE) +\]' "$1" || true; } | awk 'NR <= 30'
        grep -E '^\[ +FAILED +\] [a-z]' "$1" || true
        grep -m1 -A12 -E '^==[0-9]+== (Invalid|Conditional|Use of|Syscall param|[0-9,]+ bytes in|Process terminating)' "$1" || true
        grep -E '^timerwheel:' "$1" || true
        grep -m1 -E 'ERROR SUMMARY' "$1" || true
    } | awk '!seen[$0]++' | sed 's/^/        | /' || true
    return 0
}

step_valgrind() {
    command -v valgrind >/dev/null 2>&1 || apt_install valgrind
    if [ ! -f build/gcc/CMakeCache.txt ]; then
        run "configure build/gcc (as scripts/test.sh gcc)" \
            cmake -S . -B build/gcc -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
                  -DTW_WERROR=ON
    fi
    run "build build/gcc" cmake --build build/gcc -j "$jobs"
    local found=() exes=() slow exe
    mapfile -t found < <(find build/gcc/tests -maxdepth 1 -type f -executable -name 'tw_test_*' | sort)
    [ "${#found[@]}" -gt 0 ] || fail "no unit test executables in build/gcc/tests"
    # The slowest under memcheck first (68, 33, 32, 17, 17, 13, 13, 11 s on
    # the AMD guest, 2026-11-27; the rest take 1-7 s), so that the short
    # ones fill the other core at the end rather than one long one running
    # alone.
    for slow in extremes overload model workers wheel_shapes periodic reschedule table; do
        for exe in "${found[@]}"; do
            [ "$(basename "$exe")" = "tw_test_$slow" ] && exes+=("$exe")
        done
    done
    for exe in "${found[@]}"; do
        [[ " ${exes[*]} " == *" $exe "* ]] || exes+=("$exe")
    done
    mkdir -p build/gcc/valgrind
    echo "---- [proof/valgrind] memcheck over ${#exes[@]} unit test executables ($jobs at a time)"
    # A new one starts as soon as any one ends (wait -n), not when the
    # oldest does: waiting on the oldest left a core idle behind a long one.
    local failed=0 running=0
    for exe in "${exes[@]}"; do
        if [ "$running" -ge "$jobs" ]; then
            wait -n || failed=$((failed + 1))
            running=$((running - 1))
        fi
        valgrind_one "$exe" "build/gcc/valgrind/$(basename "$exe").log" &
        running=$((running + 1))
    done
    while [ "$running" -gt 0 ]; do
        wait -n || failed=$((failed + 1))
        running=$((running - 1))
    done
    [ "$failed" -eq 0 ] || fail "$failed unit test executable(s) failed under valgrind (logs in build/gcc/valgrind/)"
}

run_steps step_
