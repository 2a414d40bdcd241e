#!/bin/sh
# tests/conv_libraries.sh — tests/test_conv_library once per value of
# WEFT_CPU_CONV (im2col, onednn, auto, and one it must refuse), then auto
# and onednn with WEFT_ONEDNN_LIBRARY naming a file that does not exist
# (auto falls back to im2col, onednn is an error naming the file).  Only
# the CPU plugin is loaded (the quantized plugin links oneDNN, and even a
# plugin the loader skips leaves it mapped) and the GEMM is held on
# OpenBLAS, so that oneDNN is mapped only when the convolutions opened it.  onednn SKIPs where libdnnl.so.2 is not
# installed (./quickstart installs it).  Prints TAP, one line per run.
builddir=${WEFT_BUILDDIR:-.}
plugins=$(cd "${WEFT_PLUGIN_PATH:-$builddir/.libs}" && pwd)
WEFT_PLUGIN_PATH=$(mktemp -d)
trap 'rm -rf "$WEFT_PLUGIN_PATH"' EXIT
for f in "$plugins"/libweft-cpu*.so; do
    ln -s "$f" "$WEFT_PLUGIN_PATH/"
done
WEFT_CPU_GEMM=openblas
export WEFT_PLUGIN_PATH WEFT_CPU_GEMM
if /sbin/ldconfig -p 2>/dev/null | grep -q 'libdnnl\.so\.2'; then
    WEFT_TEST_ONEDNN_INSTALLED=1
else
    WEFT_TEST_ONEDNN_INSTALLED=0
fi
export WEFT_TEST_ONEDNN_INSTALLED
echo "1..6"
n=0
fail=0
out=$(mktemp)
for run in im2col onednn auto bogus-library auto:missing onednn:missing; do
    n=$((n + 1))
    value=${run%%:*}
    library=
    [ "$value" != "$run" ] && library=$builddir/libdnnl-missing.so.2
    if [ "$run" = onednn ] && [ $WEFT_TEST_ONEDNN_INSTALLED = 0 ]; then
        echo "ok $n # SKIP onednn: libdnnl.so.2 is not installed"
        continue
    fi
    if WEFT_CPU_CONV=$value WEFT_ONEDNN_LIBRARY=$library "$builddir/tests/test_conv_library" \
        >"$out" 2>&1 && ! grep -q '^not ok' "$out" && grep -q '^ok' "$out"; then
        echo "ok $n - test_conv_library with WEFT_CPU_CONV=$value${library:+ WEFT_ONEDNN_LIBRARY=$library}"
    else
        echo "not ok $n - test_conv_library with WEFT_CPU_CONV=$value${library:+ WEFT_ONEDNN_LIBRARY=$library}:"
        sed 's/^/# /' "$out"
        fail=1
    fi
done
rm -f "$out"
exit $fail
