#!/usr/bin/env bash
# Install what building and testing timerwheel needs on Debian (12) or a
# close relative: compilers (with their sanitizer runtimes), CMake, make,
# pkg-config, Concurrency Kit, liburcu and cmocka.
# Idempotent; prints nothing when everything is already installed.
set -euo pipefail

installed() {
    [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

# --no-install-recommends leaves out what the compilers only recommend:
# libc6-dev (gcc), make (cmake) and clang's sanitizer runtimes, so name them.
want=(cmake make gcc clang libc6-dev pkg-config libck-dev liburcu-dev libcmocka-dev)
# scripts/test-consumer.sh compiles the header as C++ (g++; clang++ comes with
# clang); scripts/test-manpages.sh renders the man pages (groff, man).
want+=(g++ groff-base man-db)

missing=()
for p in "${want[@]}"; do
    installed "$p" || missing+=("$p")
done

sudo=()
apt_install() {
    echo "deps.sh: installing $*"
    if [ "$(id -u)" -ne 0 ] && [ "${#sudo[@]}" -eq 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "deps.sh: cannot install $* (not root, no sudo)" >&2
            exit 1
        fi
        sudo=(sudo)
    fi
    if [ -z "${updated:-}" ]; then
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        updated=1
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" </dev/null
}

if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}"
fi

# clang's sanitizer runtimes: Debian 12 ships them in libclang-rt-N-dev,
# which clang only recommends. Look for the runtime file itself, so that
# releases that ship it elsewhere are left alone.
rtfile="$(clang -print-file-name="libclang_rt.tsan-$(uname -m).a" 2>/dev/null || true)"
if [ ! -f "$rtfile" ]; then
    major="$(clang -dumpversion | cut -d. -f1)"
    apt_install "libclang-rt-${major}-dev"
fi
