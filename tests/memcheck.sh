#!/bin/sh
# tests/memcheck.sh — runs the C test programs again under valgrind's
# memcheck: any invalid access or leaked block fails the test.  Prints TAP.
if ! command -v valgrind >/dev/null 2>&1; then
    echo "1..0 # SKIP valgrind is not installed (./quickstart installs it)"
    exit 0
fi
builddir=${WEFT_BUILDDIR:-.}
n=0
fail=0
out=$(mktemp)
for t in test_core test_views test_dispatch test_plugins test_autograd test_cpu_ops test_cpu_ops2 test_nn_ops test_nn_optim test_nn_modules test_nn_optim_state test_shape_ops test_dlpack; do
    n=$((n + 1))
    prog="$builddir/tests/$t"
    if [ ! -x "$prog" ]; then
        echo "not ok $n - $t: program missing"
        fail=1
        continue
    fi
    # libtool wrappers: run the real binary with the build's libraries
    if "$builddir/libtool" --mode=execute valgrind --quiet --error-exitcode=99 \
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
