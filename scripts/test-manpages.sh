#!/usr/bin/env bash
# Ship check: the man pages (man/*.3).
#
#   scripts/test-manpages.sh [build-dir]     (default build/gcc)
#
# Installs the build into a temporary prefix (mktemp -d), then:
# 1. Every page renders without a warning at 80 columns
#    (`groff -t -man -Tutf8 -ww -z`); it has NAME, SYNOPSIS, DESCRIPTION,
#    RETURN VALUE (or ERRORS), EXAMPLE and SEE ALSO sections.
# 2. Every alias is a relative symlink to a page beside it (man/<alias>.3 ->
#    <page>.3; not a `.so` include, which man -l resolves from the current
#    directory), the page lists the alias in its NAME section, and it is
#    installed as the same symlink.
# 2b. Every page and alias renders, with `man --warnings`, no warning and
#    non-empty output, both as README says to read it in the tree (`man -l
#    man/<name>.3` from the repository root) and installed (`man -M
#    <prefix>/share/man 3 <name>`), and the two renderings are the same.
# 3. Every TW_API function of timerwheel.h has a page or an alias, and every
#    page is installed in share/man/man3.
# 4. Each EXAMPLE (the lines between `.\" example-begin` and
#    `.\" example-end`, roff escapes undone) is compiled with -std=c11 -Wall
#    -Wextra -Wpedantic -Werror against the installed header and library
#    (pkg-config): built with gcc and run (it must exit 0 within 20 s), and
#    checked by clang (-fsyntax-only).
# Needs groff and man (scripts/deps.sh installs groff-base and man-db).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${1:-build/gcc}"
jobs="${TW_JOBS:-2}"

say() { echo "test-manpages: $*"; }
die() { echo "test-manpages: FAILED: $*" >&2; exit 1; }

for tool in groff man gcc clang pkg-config; do
    command -v "$tool" >/dev/null || die "$tool not found (scripts/deps.sh installs it)"
done

# shellcheck source=scripts/install-tmp.sh
. "$repo/scripts/install-tmp.sh"
install_into_tmp manpages
mandir="$prefix/share/man"
export MANWIDTH=80 LC_ALL=C.UTF-8 MANPAGER=cat PAGER=cat

# Undo the roff escapes an example may use; any other escape is an error.
unroff() {
    local out
    out="$(sed -e 's/\\e/\x01/g' -e 's/\\-/-/g' -e 's/\\&//g' -e "s/\\\\(aq/'/g" \
               -e 's/\\(dq/"/g' -e 's/\\(ti/~/g' -e 's/\\(ha/^/g' -e 's/\\(rs/\x01/g' "$1")"
    if printf '%s\n' "$out" | grep -n '\\' >&2; then
        echo "unknown roff escape (above)" >&2
        return 1
    fi
    printf '%s\n' "$out" | tr '\001' '\\'
}

# render <description> <command...>: its output; no warning, not empty.
render() {
    local what="$1" out; shift
    out="$("$@" 2>"$tmp/err")" || die "$what failed: $(cat "$tmp/err")"
    [ ! -s "$tmp/err" ] || die "$what: $(cat "$tmp/err")"
    [ -n "$out" ] || die "$what: empty output"
    printf '%s\n' "$out"
}

pages=0 aliases=0 examples=0 rendered=0
for page in man/*.3; do
    name="$(basename "$page" .3)"
    if [ -L "$page" ]; then
        # ---- alias ----
        target="$(readlink "$page")"
        [[ "$target" =~ ^[a-z0-9_]+\.3$ ]] ||
            die "$page: an alias is a symlink to a page beside it (<page>.3), not to '$target'"
        [ -f "man/$target" ] && [ ! -L "man/$target" ] ||
            die "$page: its target man/$target is missing or itself an alias"
        grep -q "\\b$name\\b" <<<"$(sed -n '/^\.SH NAME/,/^\.SH/p' "man/$target")" ||
            die "$page: man/$target does not list $name in its NAME section"
        [ -L "$mandir/man3/$name.3" ] && [ "$(readlink "$mandir/man3/$name.3")" = "$target" ] ||
            die "$page: not installed as the same symlink (-> $target)"
        aliases=$((aliases + 1))
    else
        # ---- page ----
        if grep -q '^\.so' "$page"; then
            die "$page: a .so include (man -l resolves it from the current directory," \
                "so it fails in the tree); make an alias a symlink: ln -s <page>.3 $page"
        fi
        [ -f "$mandir/man3/$name.3" ] || die "$page is not installed in share/man/man3"
        cmp -s "$page" "$mandir/man3/$name.3" || die "$page: the installed copy differs"
        # 80 columns, as man renders it (a table too wide is a warning).
        err="$(groff -t -man -Tutf8 -ww -z -rLL=78n "$page" 2>&1)" || die "$page: groff failed: $err"
        [ -z "$err" ] || die "$page: groff warnings:"$'\n'"$err"
        for sec in NAME SYNOPSIS DESCRIPTION EXAMPLE "SEE ALSO"; do
            grep -q "^\.SH \"\?$sec\"\?$" "$page" || die "$page: no $sec section"
        done
        if [ "$name" != timerwheel ]; then
            grep -q '^\.SH "\?\(RETURN VALUE\|ERRORS\)"\?$' "$page" ||
                die "$page: no RETURN VALUE section"
        fi
        # ---- examples ----
        awk -v dir="$tmp" -v name="$name" '
            /^\.\\" example-begin/ { n++; out = dir "/" name "_" n ".roff"; inb = 1; next }
            /^\.\\" example-end/   { inb = 0; next }
            inb && !/^\.(EX|EE)$/  { print > out }
            END { if (inb) exit 1 }' "$page" || die "$page: example-begin without example-end"
        found=0
        for ex in "$tmp/${name}"_*.roff; do
            [ -f "$ex" ] || continue
            found=1
            src="${ex%.roff}.c"
            unroff "$ex" >"$src" || die "$page: example $(basename "$src")"
            # shellcheck disable=SC2046  # pkg-config output is a list of words
            gcc -std=c11 -Wall -Wextra -Wpedantic -Werror $(pkg-config --cflags timerwheel) \
                "$src" -o "${src%.c}_gcc" $(pkg-config --libs timerwheel) \
                -Wl,-rpath,"$libdir" -pthread ||
                die "$page: the example ($(basename "$src")) does not compile with gcc"
            # shellcheck disable=SC2046
            clang -std=c11 -Wall -Wextra -Wpedantic -Werror $(pkg-config --cflags timerwheel) \
                -fsyntax-only "$src" ||
                die "$page: the example ($(basename "$src")) does not compile with clang"
            timeout 20 "${src%.c}_gcc" >"$tmp/out" 2>&1 ||
                { cat "$tmp/out" >&2; die "$page: the example ($(basename "$src")) failed"; }
            examples=$((examples + 1))
        done
        [ "$found" = 1 ] || die "$page: no example between .\\\" example-begin and .\\\" example-end"
        pages=$((pages + 1))
    fi
    # ---- every page and alias, as a user reads it ----
    # In the tree from the repository root, as README says; then installed.
    tree_out="$(render "man -l $page" man --warnings -l "$page")"
    inst_out="$(render "man 3 $name (installed)" man --warnings -M "$mandir" 3 "$name")"
    [ "$tree_out" = "$inst_out" ] ||
        die "man -l $page and the installed man 3 $name render differently"
    rendered=$((rendered + 1))
done

# Every public function has a page or an alias.
api="$(sed -n 's/^TW_API[^(]*[ *]\(tw_[a-z0-9_]*\)(.*/\1/p' include/timerwheel.h | sort -u)"
for fn in $api; do
    [ -f "man/$fn.3" ] || die "no man page for $fn (add man/$fn.3, or an alias: ln -s <page>.3 man/$fn.3)"
done
say "$pages pages and $aliases aliases (symlinks) render without warnings, in the tree" \
    "(man -l from the repository root) and installed ($rendered of each);" \
    "$examples examples compile (gcc, clang) and run; all $(echo "$api" | wc -l) API functions documented"
