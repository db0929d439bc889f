#!/usr/bin/env bash
# stress/model/run.sh: model-check the slot protocol (stress/model/slot.pml)
# with Spin. Exhaustive searches (-DCOLLAPSE: exact state compression) of
# small configurations must end with "errors: 0" and a complete search;
# every rare path must be reachable (-DREACH=n); and each deliberately
# broken variant must give a counterexample. About 2.5 minutes, 1.2 GB.
#
#   stress/model/run.sh            the checks above
#   TW_MODEL_FULL=1 stress/model/run.sh
#                                  also two ticks under load, and two-tick
#                                  jumps (about 7 more minutes, 6.5 GB)
# Work files go to build/model (TW_MODEL_DIR). Installs spin and gcc (Debian
# packages) if they are missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="${TW_MODEL_DIR:-$repo/build/model}"
if [ "${TW_MODEL_FULL:-0}" = "1" ]; then
    memlim="${TW_MODEL_MEMLIM:-8192}"   # MB per search
else
    memlim="${TW_MODEL_MEMLIM:-3072}"
fi

need=()
command -v spin >/dev/null 2>&1 || need+=(spin)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ "${#need[@]}" -gt 0 ]; then
    echo "model: installing ${need[*]}"
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null
fi

mkdir -p "$work"
cp "$here/slot.pml" "$work/slot.pml"
cd "$work"

failures=0
t_all=$SECONDS

# build <name> <pan cc flags> <spin defines...>: pan for one configuration
# (-O2 for the long searches; -O0 compiles in a second for the short ones)
build() {
    local name="$1" ccflags="$2"; shift 2
    rm -rf "$name" && mkdir "$name"
    (cd "$name" && cp ../slot.pml . &&
     spin "$@" -a slot.pml >spin.log 2>&1 &&
     gcc -w $ccflags -DMEMLIM="$memlim" -o pan pan.c) || {
        echo "model: FAILED to build $name ($*)" >&2
        cat "$name/spin.log" >&2 || true
        return 1
    }
}

summary() { # the lines of a pan report worth keeping
    grep -E "errors:|states, stored|elapsed time|assertion violated|cycle" "$1" |
        sed 's/^/      /'
}

# pass <name> <description> <pan flags> <pan cc flags> <spin defines...>
pass() {
    local name="$1" what="$2" panflags="$3" ccflags="$4"; shift 4
    local t0=$SECONDS
    echo "---- model: $what ($*)"
    if ! build "$name" "$ccflags" "$@"; then failures=$((failures + 1)); return; fi
    (cd "$name" && ./pan $panflags -m200000 >pan.out 2>&1) || true
    summary "$name/pan.out"
    if grep -q "errors: 0" "$name/pan.out" &&
       ! grep -qE "reached -DMEMLIM|max search depth too small|Search not completed" "$name/pan.out"; then
        echo "      ok ($((SECONDS - t0)) s)"
    else
        echo "model: FAILED: $what: see $work/$name/pan.out" >&2
        if [ -f "$name/slot.pml.trail" ]; then
            echo "      replay: (cd $work/$name && spin -t -p $* slot.pml)" >&2
        fi
        failures=$((failures + 1))
    fi
}

# fail <name> <description> <expected assertion text> <spin defines...>:
# the search must find a violation (and, if given, of that assertion)
fail() {
    local name="$1" what="$2" want="$3"; shift 3
    local t0=$SECONDS
    echo "---- model: $what must fail ($*)"
    if ! build "$name" "-O0 -DSAFETY" "$@"; then failures=$((failures + 1)); return; fi
    (cd "$name" && ./pan -m200000 >pan.out 2>&1) || true
    summary "$name/pan.out"
    if grep -qE "errors: [1-9]" "$name/pan.out" &&
       { [ -z "$want" ] || grep -qF -- "$want" "$name/pan.out"; }; then
        echo "      ok: counterexample found ($((SECONDS - t0)) s; trail: $work/$name)"
    else
        echo "model: FAILED: $what was not caught" >&2
        failures=$((failures + 1))
    fi
}

C="-O2 -DSAFETY -DCOLLAPSE"
pass base   "2 producers, 1 level, capacity 1"        "" "$C" -DMAXT=1 -DDMAX=2
pass levels "2 producers, 2 levels (cascade)"         "" "$C" -DLEVELS=2 -DMAXT=1 -DDMAX=2
pass cap2   "2 producers, capacity 2"                 "" "$C" -DCAP=2 -DMAXT=1 -DDMAX=1
pass three  "3 producers on one wheel (overflow)"     "" "$C" -DNPROD=3 -DNO_SECOND -DMAXT=1 -DDMAX=1
pass np     "no non-progress cycle (lock-free loops)" "-l" "-O2 -DNP -DCOLLAPSE" -DMAXT=1 -DDMAX=1
if [ "${TW_MODEL_FULL:-0}" = "1" ]; then
    pass two  "2 producers, two ticks under load"     "" "$C" -DMAXT=2 -DDMAX=1
    pass jump "2 producers, two-tick jumps"           "" "$C" -DMAXT=2 -DDMAX=1 -DJUMP
fi

# Every rare path can be taken in the model.
names=(tombstoned newer late_slot cancel_lost lease_met resched_firing overflow)
for n in 1 2 3 4 5 6 7; do
    fail "reach$n" "rare path ${names[$((n - 1))]} reached" "assertion violated ($n!=$n)" \
        -DMAXT=1 -DDMAX=2 -DREACH=$n
done

# The broken variants: the checks must catch each.
fail no_tombstone "BROKEN_NO_TOMBSTONE (late publish lands a rotation late)" "" \
    -DMAXT=1 -DDMAX=1 -DBROKEN_NO_TOMBSTONE
fail no_version "BROKEN_NO_VERSION (claim on a stale deadline fires early)" "dl[ti]<=T" \
    -DMAXT=1 -DDMAX=1 -DBROKEN_NO_VERSION

echo
if [ "$failures" -ne 0 ]; then
    echo "model: $failures check(s) FAILED ($((SECONDS - t_all)) s)" >&2
    exit 1
fi
echo "model: all checks passed ($((SECONDS - t_all)) s)"
