#!/bin/sh
# tests/gemm_libraries.sh — tests/test_gemm_library once per value of
# WEFT_CPU_GEMM (openblas, onednn, and one it must refuse): make check
# runs the test alone with the default (auto), which on an AVX2 machine is
# OpenBLAS and on an AVX-512 one oneDNN, so each library is otherwise seen
# on one kind of machine only.  onednn SKIPs where libdnnl.so.2 is not
# installed (./quickstart installs it).  Prints TAP, one line per value.
builddir=${WEFT_BUILDDIR:-.}
WEFT_PLUGIN_PATH=${WEFT_PLUGIN_PATH:-$builddir/.libs}
export WEFT_PLUGIN_PATH
echo "1..3"
n=0
fail=0
out=$(mktemp)
for value in openblas onednn bogus-library; do
    n=$((n + 1))
    if [ "$value" = onednn ] && ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libdnnl\.so\.2'; then
        echo "ok $n # SKIP onednn: libdnnl.so.2 is not installed"
        continue
    fi
    if WEFT_CPU_GEMM=$value "$builddir/tests/test_gemm_library" >"$out" 2>&1 &&
        ! grep -q '^not ok' "$out" && grep -q '^ok' "$out"; then
        echo "ok $n - test_gemm_library with WEFT_CPU_GEMM=$value"
    else
        echo "not ok $n - test_gemm_library with WEFT_CPU_GEMM=$value:"
        sed 's/^/# /' "$out"
        fail=1
    fi
done
rm -f "$out"
exit $fail
