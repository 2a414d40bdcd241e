#!/bin/sh
# tests/sanitizers.sh — builds weft again with ./configure --enable-sanitizers
# (AddressSanitizer with LeakSanitizer, and UBSan) in a scratch directory and
# runs every C TAP program of the suite there (the Makefile passes its list
# as WEFT_TAP_TESTS, so a new test is covered without anyone adding it here).
# Any sanitizer report fails that program.  Prints one TAP line per program;
# the build's time is a comment line.  The build makes only the
# `tap-programs` target (the core, the CPU plugin's variants, the test
# plugins and the programs), at -O1 as the sanitizers' documentation
# advises: reports keep their frames, and the build is quicker.  The CUDA
# plugin, the Python module and the libtorch comparison are left out.  Says
# SKIP where the compiler cannot build, or this machine cannot run, a
# sanitized program.
#   WEFT_SANITIZER_CFLAGS  CFLAGS of that build (default: -g -O1)
#   WEFT_SANITIZER_KEEP    a directory to build in and keep, for a look at
#                          a failure (default: a temporary one, removed at
#                          the end); emptied first if this script made it
srcdir=$(cd "$(dirname "$0")/.." && pwd)
cc=${WEFT_CC:-cc}
tests=${WEFT_TAP_TESTS:-}

skip() {
    echo "1..0 # SKIP $*"
    exit 0
}

[ -n "$tests" ] || skip "WEFT_TAP_TESTS is not set (run through make check)"
if [ -n "${WEFT_SANITIZER_KEEP:-}" ]; then
    tmp=$WEFT_SANITIZER_KEEP
    # never empty a directory this script did not make
    if [ -d "$tmp" ] && [ -n "$(ls -A "$tmp")" ] && [ ! -f "$tmp/.weft-sanitizer-build" ]; then
        skip "WEFT_SANITIZER_KEEP=$tmp is a directory this script did not make"
    fi
    if ! { rm -rf "$tmp" && mkdir -p "$tmp" && : >"$tmp/.weft-sanitizer-build"; }; then
        skip "cannot create $tmp"
    fi
else
    tmp=$(mktemp -d) || skip "mktemp failed"
    trap 'rm -rf "$tmp"' EXIT
fi

# Can this compiler build, and this machine run, a sanitized program?  And
# does LeakSanitizer work here (it needs to stop the process's threads,
# which some containers forbid)?
cat >"$tmp/probe.c" <<'PROBE'
#include <stdlib.h>
int main(int argc, char **argv)
{
    (void)argv;
    void *volatile p = malloc(16);
    if (argc > 1)
        p = NULL; /* a leak, for LeakSanitizer to find */
    else
        free(p);
    return 0;
}
PROBE
if ! $cc -fsanitize=address,undefined -g "$tmp/probe.c" -o "$tmp/probe" >"$tmp/probe.log" 2>&1; then
    skip "$cc cannot build with -fsanitize=address,undefined: $(head -1 "$tmp/probe.log")"
fi
if ! ASAN_OPTIONS=detect_leaks=0 "$tmp/probe" >"$tmp/probe.log" 2>&1; then
    skip "AddressSanitizer programs do not run here: $(grep -m1 -i 'error' "$tmp/probe.log")"
fi
leaks=1
if ASAN_OPTIONS=detect_leaks=1 "$tmp/probe" leak >"$tmp/probe.log" 2>&1 ||
    ! grep -q 'detected memory leaks' "$tmp/probe.log"; then
    leaks=0
fi

# A VPATH build needs a source tree that is not configured in place; the
# usual one is, so the build gets a copy: the files git tracks or would
# track, and autoreconf's output as it is (mtimes kept, so make does not
# run autotools again).
if [ -f "$srcdir/config.status" ]; then
    if ! command -v git >/dev/null 2>&1 || ! git -C "$srcdir" rev-parse --git-dir >/dev/null 2>&1; then
        skip "$srcdir is configured in place and is not a git checkout: nothing tells which files to copy for a separate build"
    fi
    src=$tmp/src
    mkdir -p "$src"
    if ! (cd "$srcdir" && {
        git ls-files -co --exclude-standard
        echo configure Makefile.in aclocal.m4 config.h.in build-aux/* m4/*.m4 | tr ' ' '\n'
    } | while read -r f; do
        # a tracked file deleted in the work tree is not copied
        if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi
    done | tar -cf - -T - | tar -xf - -C "$src") 2>"$tmp/copy.log"; then
        skip "copying the source tree failed: $(head -1 "$tmp/copy.log")"
    fi
else
    src=$srcdir
fi

echo "1..$(echo "$tests" | wc -w)"
build=$tmp/build
mkdir -p "$build"
log=$tmp/build.log
start=$(date +%s)
if (unset MAKEFLAGS MFLAGS MAKELEVEL; cd "$build" && "$src/configure" --enable-sanitizers --disable-python --without-libtorch \
    --without-cuda --without-hip CC="$cc" CFLAGS="${WEFT_SANITIZER_CFLAGS:--g -O1}" &&
    make -j"$(nproc 2>/dev/null || echo 2)" tap-programs) >"$log" 2>&1; then
    built=1
else
    built=0
fi
echo "# the sanitizer build took $(($(date +%s) - start)) s"

n=0
fail=0
out=$tmp/run.log
# run_prog PROGRAM LSAN_OPTIONS: the environment make check gives the
# programs (AM_TESTS_ENVIRONMENT), pointing into the sanitizer build
run_prog() {
    WEFT_PLUGIN_PATH="$build/.libs" WEFT_TEST_PLUGIN_DIR="$build/tests/plugins/.libs" \
        WEFT_BUILDDIR="$build" \
        ASAN_OPTIONS="detect_leaks=$leaks${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
        LSAN_OPTIONS="$2${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
        UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
        "$1" >"$out" 2>&1
}
printf 'leak:_dlerror_run\nleak:_dl_exception_create\n' >"$tmp/lsan-tls.supp"
for t in $tests; do
    t=${t#tests/}
    n=$((n + 1))
    prog="$build/tests/$t"
    if [ "$built" = 0 ]; then
        echo "not ok $n - $t: not run, the sanitizer build failed"
        [ "$n" = 1 ] && sed 's/^/# /' "$log" | tail -40
        fail=1
        continue
    fi
    if [ ! -x "$prog" ]; then
        case $t in
        test_cuda* | test_hip* | test_sparse_cuda | test_nccl)
            # nvcc's and hipcc's objects carry no instrumentation, and the
            # GPU drivers map memory where ASan keeps its shadow
            echo "ok $n - $t # SKIP the GPU plugins are not built with sanitizers"
            ;;
        *)
            echo "not ok $n - $t: the sanitizer build made no such program"
            fail=1
            ;;
        esac
        continue
    fi
    note=""
    if run_prog "$prog" "" && ! grep -q '^not ok' "$out"; then
        clean=1
    elif [ "$leaks" = 1 ] && grep -q '^Tracer caught signal' "$out" && ! grep -q '^not ok' "$out"; then
        # LeakSanitizer's own thread walk crashed: glibc left a stale
        # dynamic-TLS entry in a worker thread that outlived a library
        # (oneDNN's OpenMP threads, test_quantized), and LSan reads it as
        # a block.  Again without TLS as a root: what only TLS holds
        # (dlerror's per-thread buffer) is then a known false leak.
        note=" (LSan without TLS roots: its thread walk crashed on a stale dynamic-TLS block)"
        if run_prog "$prog" "use_tls=0:suppressions=$tmp/lsan-tls.supp" && ! grep -q '^not ok' "$out"; then
            clean=1
        else
            clean=0
        fi
    else
        clean=0
    fi
    if [ "$clean" = 1 ]; then
        if grep -q '^1\.\.0 # SKIP' "$out"; then
            echo "ok $n - $t # SKIP$(sed -n 's/^1\.\.0 # SKIP//p' "$out" | head -1)"
        else
            echo "ok $n - $t is clean under ASan$([ "$leaks" = 1 ] && echo ", LSan") and UBSan ($(grep -c '^ok' "$out") checks)$note"
        fi
    else
        echo "not ok $n - $t under ASan$([ "$leaks" = 1 ] && echo ", LSan") and UBSan:"
        # the sanitizer's report, else the failed checks
        if grep -q 'Sanitizer\|runtime error' "$out"; then
            grep -v '^ok ' "$out" | sed 's/^/# /' | head -60
        else
            grep -v '^ok ' "$out" | sed 's/^/# /' | tail -30
        fi
        fail=1
    fi
done
[ "$leaks" = 1 ] || echo "# LeakSanitizer cannot run on this machine: leaks were not checked"
exit $fail
