#!/bin/sh
# tests/tsan.sh — builds the core, the CPU plugin, the test plugins it needs
# and tests/test_stress.c and tests/test_host_alloc.c with -fsanitize=thread
# in a scratch directory, and
# runs the stress test (plugins loaded and unloaded while threads dispatch,
# then allocate on the plugin's device as fast as they can)
# and the host allocator test (per-thread caches, thread exit, statistics)
# under ThreadSanitizer: any data race it reports fails the test.  Prints TAP;
# when the compiler or the kernel cannot run ThreadSanitizer it prints a
# SKIP plan with the reason and exits 0 (automake's TAP driver would count
# the conventional 77 as an error).
#   WEFT_TSAN_CC        the compiler (default: WEFT_CC from make check, else cc)
#   WEFT_STRESS_MS      how long the stress test runs (default here: 2000)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=$(cd "${WEFT_BUILDDIR:-.}" && pwd)
cc=${WEFT_TSAN_CC:-${WEFT_CC:-cc}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

skip() {
    echo "1..0 # SKIP $*"
    exit 0
}

[ -f "$builddir/dispatch/ops_gen.c" ] || skip "$builddir/dispatch/ops_gen.c is missing: build weft first"

# Can this compiler build, and this machine run, a ThreadSanitizer program?
cat >"$tmp/probe.c" <<'PROBE'
#include <pthread.h>
static int x;
static void *run(void *a) { (void)a; __atomic_fetch_add(&x, 1, __ATOMIC_SEQ_CST); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, run, 0); pthread_join(t, 0); return x != 1; }
PROBE
if ! $cc -fsanitize=thread -pthread "$tmp/probe.c" -o "$tmp/probe" >"$tmp/probe.log" 2>&1; then
    skip "$cc cannot build with -fsanitize=thread: $(head -1 "$tmp/probe.log")"
fi
if ! "$tmp/probe" >"$tmp/probe.log" 2>&1; then
    skip "ThreadSanitizer programs do not run here: $(grep -m1 -i 'fatal\|error' "$tmp/probe.log")"
fi

echo "1..4"
# Source lists come from Makefile.am (a make of our own, not part of the make
# that runs the tests); generated files live in the build tree.
sources_of() {
    list=$( (unset MAKEFLAGS MFLAGS MAKELEVEL; cd "$builddir" &&
        make -s --no-print-directory -f Makefile "$1") 2>/dev/null)
    for f in $list; do
        case $f in *.c) ;; *) continue ;; esac
        if [ -f "$builddir/$f" ]; then echo "$builddir/$f"; else echo "$srcdir/$f"; fi
    done
}
core=$(sources_of print-libweft-sources)
cpu=$(sources_of print-cpu-plugin-sources)
if [ -z "$core" ] || [ -z "$cpu" ]; then
    echo "not ok 1 - make print-libweft-sources / print-cpu-plugin-sources gave no list"
    echo "not ok 2 - not run"
    echo "not ok 3 - not run"
    exit 1
fi
blas=$(pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
blas_cflags=$(pkg-config --cflags openblas 2>/dev/null)
flags="-std=gnu11 -g -O1 -fsanitize=thread -fno-omit-frame-pointer -pthread -fPIC -I$builddir/include -I$srcdir/include -I$builddir -I$srcdir"
mkdir -p "$tmp/plugins"
build_log="$tmp/build.log"
# One compile per object, two at a time; the flags travel in the
# environment (their words hold double quotes, never spaces).
cat >"$tmp/cc1.sh" <<'CC1'
# shellcheck disable=SC2086
exec $TSAN_CC $TSAN_FLAGS $TSAN_EXTRA -c "$1" -o "$2"
CC1
compile_all() { # out-dir extra-flags sources...
    out=$1
    extra=$2
    shift 2
    mkdir -p "$out"
    i=0
    for f in "$@"; do
        i=$((i + 1))
        echo "$f $out/$i.o"
    done | TSAN_CC=$cc TSAN_FLAGS=$flags TSAN_EXTRA=$extra xargs -P 2 -n 2 sh "$tmp/cc1.sh" >>"$build_log" 2>&1
}
# The core is one shared library, as the real one; plugins resolve its
# symbols from the program when they are opened.
# shellcheck disable=SC2086
if compile_all "$tmp/core" '-DWEFT_PLUGINDIR="/nonexistent" -DWEFT_VERSION_STRING="tsan"' $core &&
    $cc -fsanitize=thread -shared -o "$tmp/libweft.so" "$tmp"/core/*.o -lm -ldl -lz -pthread >>"$build_log" 2>&1 &&
    compile_all "$tmp/cpu" "$blas_cflags -DCPU_VARIANT=\"baseline\"" $cpu &&
    $cc $flags -DCPU_VARIANT_AVX2=0 -c "$srcdir/backends/cpu/score.c" -o "$tmp/cpu/score.o" >>"$build_log" 2>&1 &&
    $cc -fsanitize=thread -shared -o "$tmp/plugins/libweft-cpu.so" "$tmp"/cpu/*.o $blas -lm -pthread >>"$build_log" 2>&1 &&
    $cc $flags -shared "$srcdir/tests/plugins/good.c" -o "$tmp/plugins/test-good.so" >>"$build_log" 2>&1 &&
    $cc $flags "$srcdir/tests/test_stress.c" -o "$tmp/test_stress" -L"$tmp" -Wl,-rpath,"$tmp" -lweft >>"$build_log" 2>&1 &&
    $cc $flags "$srcdir/tests/test_host_alloc.c" -o "$tmp/test_host_alloc" -L"$tmp" -Wl,-rpath,"$tmp" -lweft >>"$build_log" 2>&1 &&
    $cc $flags "$srcdir/tests/test_profiler.c" -o "$tmp/test_profiler" -L"$tmp" -Wl,-rpath,"$tmp" -lweft >>"$build_log" 2>&1 &&
    [ -x "$tmp/test_stress" ]; then
    echo "ok 1 - core, CPU plugin, testgood and the stress test build with $cc -fsanitize=thread"
else
    echo "not ok 1 - the ThreadSanitizer build failed"
    sed 's/^/# /' "$build_log" | tail -40
    echo "not ok 2 - not run"
    exit 1
fi

# second_deadlock_stack: lock-order reports name both stacks
if WEFT_PLUGIN_PATH="$tmp/plugins" WEFT_TEST_PLUGIN_DIR="$tmp/plugins" WEFT_NUM_THREADS=2 \
    OPENBLAS_NUM_THREADS=1 WEFT_STRESS_MS=${WEFT_STRESS_MS:-2000} \
    TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 $TSAN_OPTIONS" \
    "$tmp/test_stress" >"$tmp/run.log" 2>&1; then
    echo "ok 2 - the stress test is clean under ThreadSanitizer: $(grep -m1 'loaded .* times' "$tmp/run.log" | sed 's/^ok [0-9]* - //')"
else
    echo "not ok 2 - ThreadSanitizer or the stress test reported a failure:"
    sed 's/^/# /' "$tmp/run.log" | head -80
    echo "not ok 3 - not run"
    exit 1
fi

# the host allocator's threads: per-thread caches, their exit, the stats
if WEFT_PLUGIN_PATH="$tmp/plugins" WEFT_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 \
    TSAN_OPTIONS="halt_on_error=1 exitcode=66 $TSAN_OPTIONS" \
    "$tmp/test_host_alloc" >"$tmp/host.log" 2>&1 && ! grep -q '^not ok' "$tmp/host.log"; then
    echo "ok 3 - test_host_alloc is clean under ThreadSanitizer ($(grep -c '^ok' "$tmp/host.log") checks)"
else
    echo "not ok 3 - ThreadSanitizer or test_host_alloc reported a failure:"
    sed 's/^/# /' "$tmp/host.log" | grep -v '^# ok' | head -80
    echo "not ok 4 - not run"
    exit 1
fi

# the profiler (issue 19): threads recording into their own sessions and
# into one shared session, the hooks stored and cleared as they start and
# stop, a thread exiting while recording
if WEFT_PLUGIN_PATH="$tmp/plugins" WEFT_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1 \
    TSAN_OPTIONS="halt_on_error=1 exitcode=66 $TSAN_OPTIONS" \
    "$tmp/test_profiler" >"$tmp/prof.log" 2>&1 && ! grep -q '^not ok' "$tmp/prof.log"; then
    echo "ok 4 - test_profiler is clean under ThreadSanitizer ($(grep -c '^ok' "$tmp/prof.log") checks)"
else
    echo "not ok 4 - ThreadSanitizer or test_profiler reported a failure:"
    sed 's/^/# /' "$tmp/prof.log" | grep -v '^# ok' | head -80
    exit 1
fi
exit 0
