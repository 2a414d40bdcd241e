# tests/stage.sh — sourced by the tests that install weft into a staging
# directory and then use it as an outside program or plugin author would
# (tests/install.sh, tests/opencl.sh).  Needs $builddir.
#
# stage_install DIR: `make install DESTDIR=DIR`, then sets $prefix, $libdir
# and $root and points pkg-config at the staged .pc files, so that
# `pkg-config --cflags --libs weft-plugin` gives the staged paths.
stage_install() {
    # a make of our own, not a part of the make that runs the tests; a lock,
    # because two tests relinking the same libraries at once would collide
    (
        unset MAKEFLAGS MFLAGS MAKELEVEL
        if command -v flock >/dev/null 2>&1; then
            flock "$builddir/tests/.install-lock" make -s -C "$builddir" install DESTDIR="$1"
        else
            make -s -C "$builddir" install DESTDIR="$1"
        fi
    ) || return 1
    root=$1
    prefix=$(sed -n 's/^prefix=//p' "$builddir/weft.pc")
    libdir=$(cd "$builddir" && unset MAKEFLAGS MFLAGS MAKELEVEL &&
        make -s --no-print-directory -f Makefile print-libdir 2>/dev/null)
    [ -n "$libdir" ] || libdir="$prefix/lib"
    PKG_CONFIG_SYSROOT_DIR="$root"
    PKG_CONFIG_PATH="$root$libdir/pkgconfig"
    export PKG_CONFIG_SYSROOT_DIR PKG_CONFIG_PATH
}
