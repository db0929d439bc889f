# scripts/lib.sh: sourced by scripts/test.sh and scripts/test-proof.sh.
# What both need: the stress duration and job defaults, choosing steps by
# name, running them with a summary, the one-line failure report, and the
# ThreadSanitizer start-up probe.
#
# The sourcing script sets, before sourcing:
#   me         its name, for messages ("test.sh")
#   kind       what a step is called in messages ("configuration")
#   tag        prefix of its log lines ("" or "proof/")
#   all_steps  the step names, in order; step <n> runs function <prefix><n>

if [ "${CI:-}" = "true" ]; then
    : "${TW_STRESS_SECONDS:=3}"
else
    : "${TW_STRESS_SECONDS:=5}"
fi
export TW_STRESS_SECONDS
jobs="${TW_JOBS:-2}"

current=""
summary=()
start_all=$SECONDS

fail() {
    echo >&2
    echo "$me: FAILED in $kind '$current': $*" >&2
    if [ "${#summary[@]}" -gt 0 ]; then
        printf '  passed before it: %s\n' "${summary[@]}" >&2
    fi
    exit 1
}

run() { # description, command...
    local what="$1"; shift
    echo "---- [$tag$current] $what"
    "$@" || fail "$what"
}

# select_steps [name...]: sets steps to the names given (all_steps if none);
# an unknown name exits 2.
select_steps() {
    if [ "$#" -gt 0 ]; then steps=("$@"); else steps=("${all_steps[@]}"); fi
    local st
    for st in "${steps[@]}"; do
        case " ${all_steps[*]} " in *" $st "*) ;; *)
            echo "$me: unknown $kind '$st' (known: ${all_steps[*]})" >&2; exit 2;;
        esac
    done
}

# run_steps <function prefix> [summary note]: runs the selected steps in
# order, stops at the first failure, prints how long each took.
run_steps() {
    local prefix="$1" note="${2:-}" st t0
    for st in "${steps[@]}"; do
        current="$st"
        t0=$SECONDS
        echo "==== [$tag$st] ===================================================="
        "$prefix$st"
        summary+=("$st ($((SECONDS - t0)) s)")
    done
    echo
    echo "$me: all passed in $((SECONDS - start_all)) s$note:"
    printf '  %s\n' "${summary[@]}"
}

# Older clang TSan runtimes fail to start ("unexpected memory mapping") on
# kernels with many bits of mmap randomisation; run them without ASLR then.
# tsan_probe <work dir> <label>: sets tsan_wrap to the command prefix that
# makes a TSan program start here (empty, or setarch -R).
tsan_wrap=()
tsan_probe() {
    local dir="$1/probe" label="$2"
    mkdir -p "$dir"
    printf 'int main(void) { return 0; }\n' >"$dir/probe.c"
    clang -fsanitize=thread "$dir/probe.c" -o "$dir/probe" || fail "clang -fsanitize=thread cannot link"
    if "$dir/probe" >/dev/null 2>&1; then return 0; fi
    if setarch "$(uname -m)" -R "$dir/probe" >/dev/null 2>&1; then
        echo "---- [$label] TSan runtime needs ASLR off here: running tests under setarch -R"
        tsan_wrap=(setarch "$(uname -m)" -R)
        return 0
    fi
    fail "a ThreadSanitizer program does not start on this machine"
}
