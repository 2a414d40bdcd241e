#!/bin/sh
# tests/fuzz.sh — builds the libFuzzer harness of the DLPack import path
# (tests/fuzz/fuzz_dlpack_import.c) with the core's sources, instrumented
# with clang's -fsanitize=fuzzer,address,undefined, and runs it briefly.
# Prints TAP; skips when clang with libFuzzer is missing.
#   WEFT_FUZZ_SECONDS  how long to fuzz (default 20)
#   WEFT_FUZZ_CC       the compiler (default: the first clang found)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=${WEFT_BUILDDIR:-.}
seconds=${WEFT_FUZZ_SECONDS:-20}

cc=${WEFT_FUZZ_CC:-}
if [ -z "$cc" ]; then
    for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
        if command -v "$c" >/dev/null 2>&1; then
            cc=$c
            break
        fi
    done
fi
if [ -z "$cc" ]; then
    echo "1..0 # SKIP clang is not installed (libFuzzer comes with it)"
    exit 0
fi
if [ ! -f "$builddir/dispatch/ops_gen.c" ]; then
    echo "1..0 # SKIP $builddir/dispatch/ops_gen.c is missing: build weft first"
    exit 0
fi

work="$builddir/tests/fuzz" # where a failing input is saved
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Does this clang have libFuzzer?
cat >"$tmp/probe.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { (void)data; (void)size; return 0; }
EOF
if ! "$cc" -fsanitize=fuzzer,address "$tmp/probe.c" -o "$tmp/probe" >"$tmp/probe.log" 2>&1; then
    echo "1..0 # SKIP $cc cannot build with -fsanitize=fuzzer,address (libFuzzer runtime missing)"
    exit 0
fi

echo "1..2"
# The core's sources, instrumented too so that the fuzzer sees their
# branches: the list comes from Makefile.am (a make of our own, not a part of
# the make that runs the tests); generated ones live in the build tree.
list=$( (unset MAKEFLAGS MFLAGS MAKELEVEL; cd "$builddir" &&
    make -s --no-print-directory -f Makefile print-libweft-sources) 2>/dev/null)
sources=""
for f in $list; do
    case $f in *.c) ;; *) continue ;; esac
    if [ -f "$builddir/$f" ]; then sources="$sources $builddir/$f"; else sources="$sources $srcdir/$f"; fi
done
if [ -z "$sources" ]; then
    echo "not ok 1 - make print-libweft-sources gave no source list"
    echo "not ok 2 - fuzzing skipped: no harness"
    exit 1
fi
prog="$tmp/fuzz_dlpack_import" # rebuilt every run, never left behind
# shellcheck disable=SC2086
if "$cc" -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -fno-omit-frame-pointer -pthread \
    -I"$builddir/include" -I"$srcdir/include" -I"$builddir" -I"$srcdir" \
    -DWEFT_PLUGINDIR='"/nonexistent"' -DWEFT_VERSION_STRING='"fuzz"' \
    "$srcdir/tests/fuzz/fuzz_dlpack_import.c" $sources -o "$prog" -lm -ldl >"$tmp/build.log" 2>&1; then
    echo "ok 1 - the harness builds with $cc -fsanitize=fuzzer,address,undefined"
else
    echo "not ok 1 - the harness does not build"
    sed 's/^/# /' "$tmp/build.log" | tail -40
    echo "not ok 2 - fuzzing skipped: no harness"
    exit 1
fi

mkdir -p "$tmp/corpus" "$work"
if WEFT_NO_AUTOLOAD=1 ASAN_OPTIONS=detect_leaks=1 "$prog" -max_total_time="$seconds" \
    -max_len=512 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/" "$tmp/corpus" >"$tmp/run.log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/run.log")
    echo "ok 2 - ${runs:-?} inputs in ${seconds}s: no crash, leak or broken invariant"
else
    echo "not ok 2 - the fuzzer found a failure (the input is saved in $work/)"
    grep -v '^#[0-9]' "$tmp/run.log" | sed 's/^/# /' | tail -60
    exit 1
fi
exit 0
