# tests/stage.sh — sourced by the tests that use weft as installed, as an
# outside program or plugin author would (tests/install.sh, tests/opencl.sh).
# Needs $builddir.
#
# stage_install DIR: `make install DESTDIR=DIR`, then sets $prefix, $libdir
# and $root and points pkg-config at the staged .pc files, so that
# `pkg-config --cflags --libs weft-plugin` gives the staged paths.
#
# One staging serves both tests (tests/opencl.sh runs after tests/install.sh
# and reuses $builddir/tests/staged when it is there): with a prefix outside
# the system's library path (distcheck) `make install` relinks libraries
# inside .libs, and tests running meanwhile may find them half written, so
# the suite installs once.
STAGED_DIR="$builddir/tests/staged"

stage_install() {
    rm -rf "$1"
    # a make of our own, not a part of the make that runs the tests
    (unset MAKEFLAGS MFLAGS MAKELEVEL && make -s -C "$builddir" install DESTDIR="$1") || return 1
    : >"$1/.complete"
    stage_use "$1"
}

# stage_use DIR: the variables of stage_install for an existing staging.
stage_use() {
    root=$1
    prefix=$(sed -n 's/^prefix=//p' "$builddir/weft.pc")
    libdir=$(cd "$builddir" && unset MAKEFLAGS MFLAGS MAKELEVEL &&
        make -s --no-print-directory -f Makefile print-libdir 2>/dev/null)
    [ -n "$libdir" ] || libdir="$prefix/lib"
    PKG_CONFIG_SYSROOT_DIR="$root"
    PKG_CONFIG_PATH="$root$libdir/pkgconfig"
    export PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH
}
