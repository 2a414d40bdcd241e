#!/bin/sh
# tests/gpu_portable.sh — the portability header's mapping
# (backends/cuda/gpu.h) through both GPU toolchains: tests/gpu_portable.cu,
# written in CUDA's names, is compiled by nvcc as it is and by hipcc with
# WEFT_GPU_HIP, warnings as errors, and each program runs (on the host
# without a device: the conversions and the runtime's "no device"; with
# one, its kernel).  A toolchain configure did not find is a SKIP naming
# it.  make check passes the compilers and their target flags in WEFT_NVCC,
# WEFT_NVCC_FLAGS, WEFT_HIPCC and WEFT_HIPCC_FLAGS.  Prints TAP.
srcdir=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..4"
n=0
fail=0
one() { # name compiler flags...
    name=$1
    shift
    n=$((n + 1))
    if [ -z "$1" ] || ! command -v "$1" >/dev/null 2>&1; then
        echo "ok $n # SKIP $name: no compiler (configure found none)"
        n=$((n + 1))
        echo "ok $n # SKIP $name: nothing to run"
        return
    fi
    if "$@" -std=c++17 -O2 -I"$srcdir/include" -I"$srcdir" "$srcdir/tests/gpu_portable.cu" \
        -o "$tmp/$name" >"$tmp/$name.log" 2>&1; then
        echo "ok $n - $name compiles tests/gpu_portable.cu through gpu.h (warnings are errors)"
    else
        echo "not ok $n - $name compiles tests/gpu_portable.cu through gpu.h (warnings are errors)"
        sed 's/^/# /' "$tmp/$name.log" | head -40
        fail=1
        n=$((n + 1))
        echo "not ok $n - $name: nothing to run"
        return
    fi
    n=$((n + 1))
    if "$tmp/$name" >"$tmp/$name.out" 2>&1; then
        echo "ok $n - the $name program's checks pass"
    else
        echo "not ok $n - the $name program's checks pass"
        fail=1
    fi
    sed 's/^/# /' "$tmp/$name.out"
}
# shellcheck disable=SC2086 # the flags are lists
one nvcc "${WEFT_NVCC:-}" ${WEFT_NVCC_FLAGS:-} -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror
# shellcheck disable=SC2086
one hipcc "${WEFT_HIPCC:-}" -x hip ${WEFT_HIPCC_FLAGS:-} -DWEFT_GPU_HIP -Wall -Wextra -Werror
exit $fail
