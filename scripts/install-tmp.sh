# scripts/install-tmp.sh: sourced by scripts/test-readme.sh and
# scripts/test-manpages.sh. What both need before their checks: the build
# (configured as scripts/test.sh gcc if it is not yet), installed into a
# temporary prefix that is removed on exit, found by pkg-config.
#
# install_into_tmp <name>  (with $build and $jobs set; uses die)
#   sets tmp (the temporary directory), prefix, libdir, and exports
#   PKG_CONFIG_PATH with the installed timerwheel.pc first.
install_into_tmp() {
    local name="$1"
    if [ ! -f "$build/CMakeCache.txt" ]; then
        cmake -S . -B "$build" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
              -DTW_WERROR=ON >/dev/null
    fi
    cmake --build "$build" -j "$jobs" --target timerwheel timerwheel_static >/dev/null
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/tw-$name.XXXXXX")"
    # shellcheck disable=SC2064 # expand now: $tmp is set
    trap "rm -rf '$tmp'" EXIT
    prefix="$tmp/prefix"
    cmake --install "$build" --prefix "$prefix" >/dev/null
    libdir="$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")"
    libdir="$prefix/${libdir:-lib}"
    export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
}
