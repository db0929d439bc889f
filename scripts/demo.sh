#!/usr/bin/env bash
# Build timerwheel (Release) with its examples and run the session-timeouts
# demo; arguments are passed on to it.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/scripts/deps.sh"

build="$repo/build/release"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! { cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTW_BUILD_EXAMPLES=ON \
             -DTW_BUILD_TESTS=OFF -DTW_BUILD_STRESS=OFF &&
       cmake --build "$build" -j2; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "demo.sh: build failed" >&2
    exit 1
fi

demo="$build/examples/session_timeouts"
if [ ! -x "$demo" ]; then
    echo "demo.sh: $demo was not built (is examples/CMakeLists.txt there?)" >&2
    exit 1
fi
rm -f "$log"
trap - EXIT
exec "$demo" "$@"
