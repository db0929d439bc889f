#!/usr/bin/env bash
# Fuzz the API with libFuzzer (fuzz/fuzz_api.c, oracle in fuzz/fuzz_decode.c).
#
# Configures build/fuzz with clang, -DTW_BUILD_FUZZ=ON and
# -DTW_SANITIZE=address,undefined, builds the target tw_fuzz_api, and runs it
# for TW_FUZZ_SECONDS (default 40 when CI=true, else 30) over a copy of
# fuzz/corpus/ plus fuzz/regressions/ (the seeds in the tree are not
# modified), in TW_JOBS processes at once (libFuzzer's -fork). Fails on a
# crash, an oracle violation, a leak, an out-of-memory or a timeout; the
# reproducer is kept in build/fuzz/artifacts/.
# Environment: TW_FUZZ_SECONDS, TW_JOBS (build parallelism and fuzzing
# processes, default 2).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

if [ "${CI:-}" = "true" ]; then
    : "${TW_FUZZ_SECONDS:=40}"
else
    : "${TW_FUZZ_SECONDS:=30}"
fi
jobs="${TW_JOBS:-2}"
dir="build/fuzz"

cmake -S . -B "$dir" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTW_WERROR=ON -DTW_BUILD_FUZZ=ON -DTW_SANITIZE=address,undefined \
    -DTW_BUILD_STRESS=OFF -DTW_BUILD_EXAMPLES=OFF
cmake --build "$dir" -j "$jobs" --target tw_fuzz_api

fuzzer="$dir/fuzz/tw_fuzz_api"
work="$dir/corpus-work"
artifacts="$dir/artifacts"
rm -rf "$work"
mkdir -p "$work" "$artifacts"
cp fuzz/corpus/* "$work"/
find fuzz/regressions -maxdepth 1 -type f ! -name '.*' -exec cp {} "$work"/ \;

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

echo "test-fuzz.sh: fuzzing for ${TW_FUZZ_SECONDS} s, $jobs processes"
# The target is single-threaded (workers 0): one process left a core idle.
# -fork runs $jobs at once: 40 s of it executed 73 thousand inputs on the
# 2-core guest, where 60 s of one process would execute some 80 thousand
# (1,360 a second; 2026-11-30). In fork mode libFuzzer ignores
# out-of-memory and timeouts unless told: the ignore_* flags keep them
# failures, as in a single process.
set +e
"$fuzzer" -fork="$jobs" -ignore_crashes=0 -ignore_ooms=0 -ignore_timeouts=0 \
    -max_total_time="$TW_FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$artifacts/" "$work"
rc=$?
set -e

if [ "$rc" -ne 0 ]; then
    echo >&2
    echo "test-fuzz.sh: the fuzzer failed (exit $rc). Reproducer(s):" >&2
    ls -l "$artifacts" >&2 || true
    cat >&2 <<MSG

Reproduce:   $fuzzer $artifacts/<crash-file>
Make it a regression test (replayed by ctest -L unit, unit_fuzz_regressions):
    cp $artifacts/<crash-file> fuzz/regressions/<short-name>
MSG
    exit 1
fi
echo "test-fuzz.sh: no failure in ${TW_FUZZ_SECONDS} s"
