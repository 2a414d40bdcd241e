#!/bin/sh
# tests/memcheck.sh — runs the C test programs again under valgrind's
# memcheck: any invalid access or leaked block fails the test.  Prints TAP.
if ! command -v valgrind >/dev/null 2>&1; then
    echo "1..0 # SKIP valgrind is not installed (./quickstart installs it)"
    exit 0
fi
builddir=${WEFT_BUILDDIR:-.}
# Every TAP program of the suite (the Makefile passes its list), so a new
# test is checked under valgrind without anyone remembering to add it here.
tests=${WEFT_TAP_TESTS:-}
if [ -z "$tests" ]; then
    echo "1..0 # SKIP WEFT_TAP_TESTS is not set (run through make check)"
    exit 0
fi
n=0
fail=0
out=$(mktemp)
for t in $tests; do
    t=${t#tests/}
    n=$((n + 1))
    prog="$builddir/tests/$t"
    if [ ! -x "$prog" ]; then
        echo "not ok $n - $t: program missing"
        fail=1
        continue
    fi
    # libtool wrappers: run the real binary with the build's libraries
    # --fair-sched: threads take turns, so a thread waiting for a lock that
    # others keep taking (test_stress's loader) is not starved
    if "$builddir/libtool" --mode=execute valgrind --fair-sched=yes --quiet --error-exitcode=99 \
        --leak-check=full --errors-for-leak-kinds=definite,indirect \
        --suppressions=/dev/null "$prog" >"$out" 2>&1; then
        echo "ok $n - $t is clean under valgrind"
    else
        echo "not ok $n - $t under valgrind"
        sed 's/^/# /' "$out" | tail -60
        fail=1
    fi
done
rm -f "$out"
echo "1..$n"
exit $fail
