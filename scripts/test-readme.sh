#!/usr/bin/env bash
# Ship check: every C code block of README.md compiles as shown.
#
#   scripts/test-readme.sh [build-dir]     (default build/gcc)
#
# Installs the build into a temporary prefix (mktemp -d), then takes every
# ```c fenced block of README.md (indented fences too; other languages are
# left alone) as one translation unit, as a reader would paste it:
# 1. compiled with gcc -std=c11 -Wall -Wextra -Wpedantic -Werror against the
#    installed header and library (pkg-config), and checked with clang
#    (same flags, -fsyntax-only);
# 2. a block with a main() is linked and run: it must exit 0 within 20 s.
#    A block without one is compiled (-c) only.
# Each block starts with `#line <n> "README.md"`, so a compiler message
# points at README's own line; a failure names the block by the line of its
# opening fence and prints the compiler's (or the program's) output.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${1:-build/gcc}"
jobs="${TW_JOBS:-2}"
readme=README.md

say() { echo "test-readme: $*"; }
die() { echo "test-readme: FAILED: $*" >&2; exit 1; }

for tool in gcc clang pkg-config timeout; do
    command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh installs it)"
done

# shellcheck source=scripts/install-tmp.sh
. "$repo/scripts/install-tmp.sh"
install_into_tmp readme

# ---- extract: $tmp/block_<fence line>.c, one per ```c block ----------------
# Any fence (```sh, ```cmake, plain ```) is tracked, so a ```c line inside
# another block is not taken for an opening. An indented block loses its
# fence's indentation.
awk -v dir="$tmp" -v readme="$readme" '
    function indent(s) { match(s, /^ */); return RLENGTH }
    !inb && /^ *```/ {
        inb = 1; start = NR; ind = indent($0)
        out = ($0 ~ /^ *```c *$/) ? sprintf("%s/block_%05d.c", dir, NR) : ""
        if (out != "") printf "#line %d \"%s\"\n", NR + 1, readme > out
        next
    }
    inb && /^ *``` *$/ { if (out != "") close(out); inb = 0; next }
    inb && out != "" {
        line = $0
        if (indent(line) >= ind) line = substr(line, ind + 1)
        print line > out
    }
    END { if (inb) { printf "%s:%d: fence never closed\n", readme, start > "/dev/stderr"; exit 1 } }
' "$readme" || die "$readme: a code fence is not closed"

cflags=(-std=c11 -Wall -Wextra -Wpedantic -Werror)
# shellcheck disable=SC2207  # pkg-config output is a list of words
pc_cflags=($(pkg-config --cflags timerwheel)) pc_libs=($(pkg-config --libs timerwheel))

blocks=0 ran=0
for src in "$tmp"/block_*.c; do
    [ -f "$src" ] || continue
    n="${src##*/block_}"; n="${n%.c}"; n=$((10#$n))
    what="$readme: the \`\`\`c block at line $n"
    exe="${src%.c}"
    has_main=0
    grep -Eq '(^|[^[:alnum:]_])main[[:space:]]*\(' "$src" && has_main=1
    if [ "$has_main" = 1 ]; then
        gcc "${cflags[@]}" "${pc_cflags[@]}" "$src" -o "$exe" "${pc_libs[@]}" \
            -Wl,-rpath,"$libdir" -pthread >"$tmp/cc.log" 2>&1 ||
            { cat "$tmp/cc.log" >&2; die "$what does not compile with gcc (above)"; }
    else
        gcc "${cflags[@]}" "${pc_cflags[@]}" -c "$src" -o "$exe.o" >"$tmp/cc.log" 2>&1 ||
            { cat "$tmp/cc.log" >&2; die "$what does not compile with gcc (above)"; }
    fi
    clang "${cflags[@]}" "${pc_cflags[@]}" -fsyntax-only "$src" >"$tmp/cc.log" 2>&1 ||
        { cat "$tmp/cc.log" >&2; die "$what does not compile with clang (above)"; }
    if [ "$has_main" = 1 ]; then
        rc=0
        timeout 20 "$exe" >"$tmp/run.log" 2>&1 || rc=$?
        if [ "$rc" != 0 ]; then
            cat "$tmp/run.log" >&2
            [ "$rc" = 124 ] && die "$what did not finish within 20 s (its output above)"
            die "$what exited with status $rc (its output above)"
        fi
        ran=$((ran + 1))
    fi
    blocks=$((blocks + 1))
done
[ "$blocks" -gt 0 ] || die "$readme has no \`\`\`c block (has the fence syntax changed?)"
say "$blocks C block(s) of $readme compile as shown (gcc, clang; -std=c11 -Wpedantic" \
    "-Werror, installed header); $ran with a main() ran and exited 0"
