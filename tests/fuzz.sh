#!/bin/sh
# tests/fuzz.sh — builds weft's libFuzzer harnesses (tests/fuzz/fuzz_*.c)
# with the core's sources, all instrumented with clang's
# -fsanitize=fuzzer,address,undefined, and runs each briefly from its seed
# corpus (tests/fuzz/corpus/NAME/); then the Python fuzzer
# (tests/fuzz/fuzz_python_ops.py) where atheris is installed.  Prints TAP:
# one line for the instrumented build, one per harness.  Skips when clang
# with libFuzzer is missing.  A finding fails the test; the input is saved
# in the build's tests/fuzz/findings/ (NAME-crash-*, NAME-leak-*, ...) and
# printed; tests/fuzz/build/fuzz_NAME FILE replays it (with the environment
# this script sets).
#   WEFT_FUZZ_SECONDS  how long each harness runs (default 15)
#   WEFT_FUZZ_CC       the compiler (default: the first clang found)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=$(cd "${WEFT_BUILDDIR:-.}" && pwd)
seconds=${WEFT_FUZZ_SECONDS:-15}
harnesses="dlpack_import parameters call_boxed plugin_descriptor"

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

work="$builddir/tests/fuzz/findings" # where a failing input is saved
out="$builddir/tests/fuzz/build"     # the instrumented objects and programs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out" "$work"

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

n_c=$(echo $harnesses | wc -w)
echo "1..$((n_c + 2))"

# Source lists come from Makefile.am (a make of our own, not a part of the
# make that runs the tests); generated ones live in the build tree.
sources_of() {
    list=$( (unset MAKEFLAGS MFLAGS MAKELEVEL; cd "$builddir" &&
        make -s --no-print-directory -f Makefile "$1") 2>/dev/null)
    for f in $list; do
        case $f in *.c) ;; *) continue ;; esac
        if [ -f "$builddir/$f" ]; then echo "$builddir/$f"; else echo "$srcdir/$f"; fi
    done
}
fail_rest() { # first-number reason
    i=$1
    while [ "$i" -le $((n_c + 2)) ]; do
        echo "not ok $i - not run: $2"
        i=$((i + 1))
    done
    exit 1
}
core=$(sources_of print-libweft-sources)
cpu=$(sources_of print-cpu-plugin-sources)
if [ -z "$core" ] || [ -z "$cpu" ]; then
    echo "not ok 1 - make print-libweft-sources / print-cpu-plugin-sources gave no list"
    fail_rest 2 "no source list"
fi

# The core and the CPU plugin are compiled two files at a time, with
# coverage for the fuzzer and both sanitizers; each harness links the core's
# objects.  The CPU plugin is a shared module as the real one, but resolves
# the core's symbols from the harness (-rdynamic), so that the kernels that
# fuzz_call_boxed reaches are instrumented too.  The objects are kept in
# the build tree and only those whose source or headers changed are
# compiled again (the first build takes minutes).  The flags travel in the
# environment (their words hold double quotes, never spaces).
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
flags="-std=gnu11 -g -O1 $san -fno-omit-frame-pointer -pthread -fPIC \
-I$builddir/include -I$srcdir/include -I$builddir -I$srcdir"
blas=$(pkg-config --libs openblas 2>/dev/null || echo -lopenblas)
blas_cflags=$(pkg-config --cflags openblas 2>/dev/null)
ignore="$srcdir/tests/fuzz/coverage-ignore.txt"
core_extra="-fsanitize=fuzzer-no-link -fsanitize-coverage-ignorelist=$ignore \
-DWEFT_PLUGINDIR=\"/nonexistent\" -DWEFT_VERSION_STRING=\"fuzz\""
cpu_extra="-fsanitize=fuzzer-no-link $blas_cflags -DCPU_VARIANT=\"baseline\""
build_log="$tmp/build.log"
# objects built with other flags, another compiler or another ignore list
# are not reused
stamp="$($cc --version | head -1) $flags $core_extra $cpu_extra $(cksum <"$ignore")"
if [ "$(cat "$out/flags" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$out/core" "$out/cpu" "$out/score"
    echo "$stamp" >"$out/flags"
fi
cat >"$tmp/cc1.sh" <<'CC1'
# cc1.sh SOURCE OBJECT: compiles unless OBJECT is newer than its source
# and every header the last compile read
if [ -f "$2" ] && [ -f "$2.d" ]; then
    stale=0
    for dep in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$2.d"); do
        if [ ! -e "$dep" ] || [ "$dep" -nt "$2" ]; then
            stale=1
            break
        fi
    done
    [ $stale = 1 ] || exit 0
fi
# shellcheck disable=SC2086
exec $FUZZ_CC $FUZZ_FLAGS $FUZZ_EXTRA -MMD -MF "$2.d" -c "$1" -o "$2"
CC1
compile_all() { # out-dir extra-flags sources...; the objects in $odir.objects
    odir=$1
    extra=$2
    shift 2
    mkdir -p "$odir"
    : >"$odir.objects"
    for f in "$@"; do
        # one object per source, named after its path (plugin.c is in two);
        # only the listed ones are linked, not leftovers of removed sources
        o=$(echo "${f#"$srcdir"/}" | sed -e "s|^$builddir/||" -e 's|/|_|g' -e 's|\.c$|.o|')
        echo "$odir/$o" >>"$odir.objects"
        echo "$f $odir/$o"
    done | FUZZ_CC=$cc FUZZ_FLAGS=$flags FUZZ_EXTRA=$extra xargs -P 2 -n 2 sh "$tmp/cc1.sh" >>"$build_log" 2>&1
}
# shellcheck disable=SC2086
if compile_all "$out/core" "$core_extra" $core &&
    compile_all "$out/cpu" "$cpu_extra" $cpu &&
    compile_all "$out/score" "-DCPU_VARIANT_AVX2=0" "$srcdir/backends/cpu/score.c" &&
    mkdir -p "$out/plugins" &&
    $cc $san -shared -o "$out/plugins/libweft-cpu.so" $(cat "$out/cpu.objects" "$out/score.objects") $blas -lm -pthread >>"$build_log" 2>&1 &&
    # the plugin the descriptor fuzzer corrupts: loaded and closed once per
    # input, so it carries no instrumentation whose registration would
    # outlive it
    $cc -std=gnu11 -O1 -fPIC -shared -I"$builddir/include" -I"$srcdir/include" \
        "$srcdir/tests/plugins/good.c" -o "$out/test-good.so" >>"$build_log" 2>&1; then
    echo "ok 1 - the core and the CPU plugin build with $cc -fsanitize=fuzzer-no-link,address,undefined"
else
    echo "not ok 1 - the instrumented build failed"
    sed 's/^/# /' "$build_log" | tail -40
    fail_rest 2 "no instrumented build"
fi

# The TAP line of a run that ended well: N NAME LOG WHAT-IT-SHOWS.  The C
# harnesses and the Python one report alike.
report_ok() {
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$3")
    echo "ok $1 - $2: ${runs:-?} inputs in ${seconds}s, $4"
}
# A finding: N NAME LOG ARTIFACT-PREFIX.  The log without libFuzzer's
# progress lines, and every input it saved, in hex, so that a CI log alone
# is enough to reproduce it.
report_finding() {
    echo "not ok $1 - $2 found a failure"
    grep -v '^#[0-9]\|^INFO:\|^MS:\|^base64:\|NEW_FUNC\|^WARNING: Failed to find' "$3" | sed 's/^/# /' | tail -60
    for f in "$4"*; do
        [ -f "$f" ] || continue
        echo "# the input, saved as $f:"
        od -A x -t x1z -v "$f" | head -32 | sed 's/^/#   /'
    done
    status=1
}

n=1
status=0
for h in $harnesses; do
    n=$((n + 1))
    prog="$out/fuzz_$h"
    # shellcheck disable=SC2086
    if ! $cc $flags -fsanitize=fuzzer -rdynamic "$srcdir/tests/fuzz/fuzz_$h.c" $(cat "$out/core.objects") \
        -o "$prog" -lm -ldl -lz >"$tmp/build-$h.log" 2>&1; then
        echo "not ok $n - fuzz_$h does not build"
        sed 's/^/# /' "$tmp/build-$h.log" | tail -40
        status=1
        continue
    fi
    # New inputs go to a scratch corpus; the committed seeds are read only.
    mkdir -p "$tmp/corpus-$h"
    autoload=1
    [ "$h" = call_boxed ] && autoload=0
    # A load leaves memory behind until the next one (its report rows, the
    # loader's retired registrations), so libFuzzer's leak check after each
    # such input would run LeakSanitizer every time: six times slower.
    # Leaks still fail the run: LeakSanitizer checks at exit, without
    # naming the input.
    per_input_leaks=1
    [ "$h" = plugin_descriptor ] && per_input_leaks=0
    seeds="$srcdir/tests/fuzz/corpus/$h"
    [ -d "$seeds" ] || seeds=""
    rm -f "$work/$h-"*
    # allocator_may_return_null and the 256 MiB cap: an operator asked for a
    # huge tensor fails with WEFT_ENOMEM, as it would for a user, instead of
    # being reported as a finding; -malloc_limit_mb agrees with it
    # shellcheck disable=SC2086
    if WEFT_NO_AUTOLOAD=$autoload WEFT_PLUGIN_PATH="$out/plugins" WEFT_FUZZ_PLUGIN="$out/test-good.so" \
        WEFT_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 WEFT_CPU_FALLBACK=silent \
        ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:max_allocation_size_mb=256:$ASAN_OPTIONS" \
        UBSAN_OPTIONS="print_stacktrace=1:$UBSAN_OPTIONS" \
        "$prog" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
        -malloc_limit_mb=4096 -detect_leaks=$per_input_leaks -print_final_stats=1 -artifact_prefix="$work/$h-" \
        "$tmp/corpus-$h" $seeds >"$tmp/run-$h.log" 2>&1; then
        report_ok "$n" "fuzz_$h" "$tmp/run-$h.log" "no crash, leak or broken invariant"
    else
        report_finding "$n" "fuzz_$h" "$tmp/run-$h.log" "$work/$h-"
    fi
done

# The Python bindings with atheris (PyPI), where it is installed.
n=$((n + 1))
python=${WEFT_PYTHON:-python3}
if [ ! -f "$builddir/python/pkg/weft/_C.so" ]; then
    echo "ok $n - fuzz_python_ops # SKIP the Python module was not built"
elif ! "$python" -c 'import atheris' >"$tmp/atheris.log" 2>&1; then
    echo "ok $n - fuzz_python_ops # SKIP atheris is not installed for $python ($(tail -1 "$tmp/atheris.log"); ./quickstart installs it)"
else
    mkdir -p "$tmp/corpus-python"
    rm -f "$work/python_ops-"*
    if PYTHONPATH="$builddir/python/pkg" WEFT_PLUGIN_PATH="$builddir/.libs" \
        PYTHONDONTWRITEBYTECODE=1 WEFT_NUM_THREADS=1 WEFT_CPU_FALLBACK=silent \
        "$python" "$srcdir/tests/fuzz/fuzz_python_ops.py" -max_total_time="$seconds" \
        -print_final_stats=1 -artifact_prefix="$work/python_ops-" -timeout=10 \
        "$tmp/corpus-python" "$srcdir/tests/fuzz/corpus/python_ops" >"$tmp/run-python.log" 2>&1; then
        report_ok "$n" fuzz_python_ops "$tmp/run-python.log" "only Python exceptions"
    else
        report_finding "$n" fuzz_python_ops "$tmp/run-python.log" "$work/python_ops-"
    fi
fi
exit $status
