#!/bin/sh
# tests/abi.sh — the ABI that applications and third-party plugins were built
# against must not break: libweft.so (every exported function and the types
# it reaches, the plugin-facing structs among them) and a plugin's entry
# descriptor (tests/plugins/good.c's weft_plugin_entry) are compared with
# the baselines in tests/abi/ by libabigail's abidiff.  Added functions and
# appended fields at the end of a versioned struct are compatible; anything
# abidiff calls incompatible fails, and so does any other change to what the
# baseline has (a changed type, a removed function) unless the baseline is
# updated in the same commit: `make abi-baseline` rewrites it.  Prints TAP.
builddir=${WEFT_BUILDDIR:-.}
srcdir=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v abidiff >/dev/null 2>&1; then
    echo "1..0 # SKIP abidiff is not installed (./quickstart installs abigail-tools)"
    exit 0
fi
n=0
fail=0
check_one() { # name baseline binary
    n=$((n + 1))
    out=$(abidiff --no-added-syms --headers-dir2 "$srcdir/include/weft" "$2" "$3" 2>&1)
    rc=$?
    # abidiff's exit status is a bit set: 1 error, 2 usage, 4 ABI change,
    # 8 incompatible ABI change
    if [ $rc -eq 0 ]; then
        echo "ok $n - $1: the ABI is the baseline's (added symbols aside)"
    elif [ $((rc & 3)) -ne 0 ]; then
        echo "not ok $n - $1: abidiff failed (status $rc)"
        printf '%s\n' "$out" | sed 's/^/# /' | head -40
        fail=1
    else
        what="changed"
        [ $((rc & 8)) -ne 0 ] && what="broken incompatibly"
        echo "not ok $n - $1: the ABI is $what (make abi-baseline if intended)"
        printf '%s\n' "$out" | sed 's/^/# /' | head -80
        fail=1
    fi
}
check_one libweft.so "$srcdir/tests/abi/libweft.abi" "$builddir/.libs/libweft.so"
check_one "a plugin's entry descriptor" "$srcdir/tests/abi/plugin-entry.abi" \
    "$builddir/tests/plugins/.libs/test-good.so"
echo "1..$n"
exit $fail
