#!/usr/bin/env bash
# Ship check: install timerwheel into a temporary prefix and use it from
# outside the tree, as a user would.
#
#   scripts/test-consumer.sh [build-dir]     (default build/gcc)
#
# 1. `cmake --install` into mktemp -d; the expected files are there: the
#    header (one self-contained file), libtimerwheel.so with its
#    SOVERSION links, libtimerwheel.a, timerwheel.pc, the CMake package and
#    its version file, the man pages.
# 2. Versions agree with project(VERSION): TW_VERSION_* in the installed
#    header, tw_version(), pkg-config --modversion, the CMake package, the
#    SONAME (libtimerwheel.so.<major>).
# 3. Exported symbols: `nm -D --defined-only` of the installed shared library
#    lists exactly the TW_API functions of timerwheel.h; every global symbol
#    of the static library starts with tw_.
# 4. consumer/ built with find_package(timerwheel) (shared and static) and
#    run; consumer/main.c built with `pkg-config --cflags --libs timerwheel`
#    (gcc and clang, rpath) and with `pkg-config --static` (every library
#    from its archive) and run. `pkg-config --cflags` (also --static) is the
#    include directory alone: no -D, nothing of ck or liburcu (no
#    Requires.private); `--libs` is timerwheel alone.
# 5. The public header as C++11 (g++ and clang++, -Wall -Wextra -Werror):
#    -fsyntax-only, then linked and run (extern "C").
# 6. The shared library loaded with dlopen (consumer/dlopen.c) and used from
#    threads started after the load; its static TLS stays small.
# The build dir is configured (gcc, -DTW_WERROR=ON) if it does not exist;
# the libraries are (re)built in it. Takes a few seconds.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${1:-build/gcc}"
jobs="${TW_JOBS:-2}"

say() { echo "test-consumer: $*"; }
die() { echo "test-consumer: FAILED: $*" >&2; exit 1; }

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          -DTW_WERROR=ON >/dev/null
fi
cmake --build "$build" -j "$jobs" --target timerwheel timerwheel_static >/dev/null

tmp="$(mktemp -d "${TMPDIR:-/tmp}/tw-consumer.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null

version="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")"
[ -n "$version" ] || die "no CMAKE_PROJECT_VERSION in $build/CMakeCache.txt"
major="${version%%.*}"
libdir="$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")"
libdir="$prefix/${libdir:-lib}"
say "version $version, installed in $prefix"

# ---- 1. files ----------------------------------------------------------------
for f in include/timerwheel.h share/man/man3/timerwheel.3 \
         share/timerwheel/tsan.supp; do
    [ -f "$prefix/$f" ] || die "not installed: $f"
done
for f in libtimerwheel.so libtimerwheel.so.$major libtimerwheel.so.$version libtimerwheel.a \
         pkgconfig/timerwheel.pc cmake/timerwheel/timerwheelConfig.cmake \
         cmake/timerwheel/timerwheelConfigVersion.cmake cmake/timerwheel/timerwheelTargets.cmake; do
    [ -e "$libdir/$f" ] || die "not installed: $libdir/$f"
done
[ -L "$libdir/libtimerwheel.so" ] && [ -L "$libdir/libtimerwheel.so.$major" ] ||
    die "libtimerwheel.so and .so.$major are not symlinks"
soname="$(readelf -d "$libdir/libtimerwheel.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
[ "$soname" = "libtimerwheel.so.$major" ] || die "SONAME is '$soname', expected libtimerwheel.so.$major"

# ---- 2. versions -----------------------------------------------------------
hdr="$(sed -n 's/^#define TW_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
       "$prefix/include/timerwheel.h" | paste -sd.)"
[ "$hdr" = "$version" ] || die "installed header says $hdr, project(VERSION) is $version"
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pcv="$(pkg-config --modversion timerwheel)"
[ "$pcv" = "$version" ] || die "pkg-config --modversion says $pcv, expected $version"

# ---- 3. exported symbols ---------------------------------------------------
api="$(sed -n 's/^TW_API[^(]*[ *]\(tw_[a-z0-9_]*\)(.*/\1/p' "$prefix/include/timerwheel.h" | sort -u)"
[ "$(echo "$api" | wc -l)" -ge 15 ] || die "could not read the TW_API functions of timerwheel.h"
exported="$(nm -D --defined-only "$libdir/libtimerwheel.so.$version" | awk '{print $3}' | sort -u)"
if [ "$api" != "$exported" ]; then
    diff <(echo "$api") <(echo "$exported") | sed 's/^</  in timerwheel.h, not exported:/; s/^>/  exported, not in timerwheel.h:/' >&2 || true
    die "the shared library's exported symbols are not exactly the public API"
fi
stray="$(nm -g --defined-only "$libdir/libtimerwheel.a" | awk 'NF == 3 {print $3}' | grep -v '^tw_' || true)"
[ -z "$stray" ] || die "libtimerwheel.a defines global symbols outside tw_*: $stray"
say "exports exactly the $(echo "$api" | wc -l) API functions; static library symbols all tw_*"

# ---- 4. consumers ----------------------------------------------------------
cflags=(-std=c11 -Wall -Wextra -Wpedantic -Werror)

cmake -S consumer -B "$tmp/cmake" -DCMAKE_C_COMPILER=gcc -DCMAKE_PREFIX_PATH="$prefix" \
      -DTW_EXPECT_VERSION="$version" >"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log" >&2; die "configuring consumer/ (find_package) failed"; }
cmake --build "$tmp/cmake" -j "$jobs" >"$tmp/build.log" 2>&1 ||
    { cat "$tmp/build.log" >&2; die "building consumer/ (find_package) failed"; }
# The shared library is found through the build tree's rpath (CMake).
"$tmp/cmake/consumer" "$version" >/dev/null || die "consumer (find_package, shared) failed"
"$tmp/cmake/consumer_static" "$version" >/dev/null || die "consumer (find_package, static) failed"
# Capture first: `ldd | grep -q` under pipefail fails when grep exits early
# and ldd dies of SIGPIPE.
deps="$(ldd "$tmp/cmake/consumer")"
grep -q "$libdir/libtimerwheel.so.$major" <<<"$deps" ||
    die "consumer (find_package) does not use the installed libtimerwheel.so.$major"
deps="$(ldd "$tmp/cmake/consumer_static")"
if grep -q libtimerwheel <<<"$deps"; then
    die "consumer_static is linked with the shared library"
fi
say "find_package: consumer (shared) and consumer_static run"

for cc in gcc clang; do
    command -v "$cc" >/dev/null || die "$cc not found"
    # shellcheck disable=SC2046  # pkg-config output is a list of words
    "$cc" "${cflags[@]}" consumer/main.c -o "$tmp/pc_$cc" \
        $(pkg-config --cflags --libs timerwheel) -Wl,-rpath,"$libdir" ||
        die "pkg-config build of consumer/main.c with $cc failed"
    "$tmp/pc_$cc" "$version" >/dev/null || die "consumer (pkg-config, $cc) failed"
done
# Run through LD_LIBRARY_PATH too (no rpath).
# shellcheck disable=SC2046
gcc "${cflags[@]}" consumer/main.c -o "$tmp/pc_norpath" $(pkg-config --cflags --libs timerwheel)
LD_LIBRARY_PATH="$libdir" "$tmp/pc_norpath" "$version" >/dev/null ||
    die "consumer (pkg-config, LD_LIBRARY_PATH) failed"
# Static link (pkg-config --static --libs): timerwheel, ck and liburcu-common
# all from their archives (-Wl,-Bstatic), so a library missing from
# Libs.private fails here; libc and the -pthread flag stay as usual.
# shellcheck disable=SC2046
gcc "${cflags[@]}" consumer/main.c -o "$tmp/pc_static" $(pkg-config --cflags timerwheel) \
    -Wl,-Bstatic $(pkg-config --static --libs-only-L --libs-only-l timerwheel) -Wl,-Bdynamic \
    $(pkg-config --static --libs-only-other timerwheel) ||
    die "pkg-config --static link of consumer/main.c failed (Libs.private incomplete?)"
"$tmp/pc_static" "$version" >/dev/null || die "consumer (pkg-config --static) failed"
deps="$(ldd "$tmp/pc_static")"
if grep -E 'libtimerwheel|libck|liburcu' <<<"$deps" >&2; then
    die "consumer (pkg-config --static) is linked with the shared libraries above"
fi
# What a consumer's compile line gets is the header's directory and nothing
# else: timerwheel.h includes nothing of ck or liburcu, and a Requires.private
# module's Cflags (Debian's ck.pc: -D__x86_64__) would reach every user's build.
# A shared-library consumer links timerwheel alone.
for how in "--cflags" "--cflags --static"; do
    # shellcheck disable=SC2086  # $how is two words
    got="$(pkg-config $how timerwheel | xargs)"
    [ "$got" = "-I$prefix/include" ] ||
        die "pkg-config $how timerwheel says '$got', expected only -I$prefix/include (no -D, nothing of ck/urcu)"
done
got="$(pkg-config --libs timerwheel | xargs)"
[ "$got" = "-L$libdir -ltimerwheel" ] ||
    die "pkg-config --libs timerwheel says '$got', expected -L$libdir -ltimerwheel"
[ -z "$(pkg-config --print-requires --print-requires-private timerwheel)" ] ||
    die "timerwheel.pc has Requires: its modules' Cflags would reach consumers"
say "pkg-config: gcc and clang (rpath), LD_LIBRARY_PATH, --static all run;" \
    "--cflags is -I<prefix>/include alone"

# ---- 5. the header as C++ --------------------------------------------------
for cxx in g++ clang++; do
    command -v "$cxx" >/dev/null || die "$cxx not found (scripts/deps.sh installs it)"
    # shellcheck disable=SC2046
    "$cxx" -std=c++11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only \
        $(pkg-config --cflags timerwheel) consumer/header_check.cpp ||
        die "timerwheel.h does not compile as C++11 with $cxx"
    # shellcheck disable=SC2046
    "$cxx" -std=c++11 -Wall -Wextra -Wpedantic -Werror consumer/header_check.cpp \
        -o "$tmp/cxx_$cxx" $(pkg-config --cflags --libs timerwheel) -Wl,-rpath,"$libdir" ||
        die "C++ program ($cxx) does not link against timerwheel (extern \"C\"?)"
    "$tmp/cxx_$cxx" >/dev/null || die "C++ program ($cxx) failed"
done
say "timerwheel.h compiles as C++11 (g++, clang++) and links with C linkage"

# ---- 6. loaded at run time (dlopen) ----------------------------------------
# The library's thread-locals are initial-exec (src/internal.h, TW_TLS): a
# dlopen takes them from glibc's static TLS surplus (1664 bytes for every
# library loaded so, by default), so they must stay small. Then a program
# that loads the library after start-up uses it from threads it starts later.
tls_hex="$(readelf -lW "$libdir/libtimerwheel.so.$version" | awk '$1 == "TLS" {print $6}')"
[ -n "$tls_hex" ] || die "no TLS segment in libtimerwheel.so (readelf -l)"
tls=$((tls_hex))
[ "$tls" -le 256 ] ||
    die "the shared library's thread-locals take $tls bytes of static TLS: more than 256 may not fit a dlopen"
gcc "${cflags[@]}" -D_POSIX_C_SOURCE=200809L consumer/dlopen.c -o "$tmp/dlopen" \
    -I"$prefix/include" -pthread -ldl || die "building consumer/dlopen.c failed"
"$tmp/dlopen" "$libdir/libtimerwheel.so.$major" >/dev/null ||
    die "consumer_dlopen (the library loaded with dlopen) failed"
say "dlopen: loaded at run time, used from threads started after it ($tls bytes of TLS)"
say "all passed"
