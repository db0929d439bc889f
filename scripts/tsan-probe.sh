# Sourced by scripts/test.sh and scripts/test-proof.sh (they define fail()).
#
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
