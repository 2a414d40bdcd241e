#!/bin/sh
# tests/opencl.sh — the out-of-tree plugin example, end to end: install weft
# into a staging directory, build examples/opencl-backend against it with
# nothing but its own Makefile and `pkg-config weft-plugin`, load it, and
# run weft-conformance on the OpenCL device: its own kernels (float32 add,
# sub, mul, relu, exp, mm) and the CPU fallback for the rest must all agree
# with the CPU.  Says SKIP, with the reason, without OpenCL headers, library
# or platform.  TAP.
builddir=${WEFT_BUILDDIR:-.}
srcdir=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$srcdir/tests/stage.sh"

skip() {
    echo "1..0 # SKIP $*"
    exit 0
}
# PoCL compiles each kernel at its first use (seconds); its cache lives in
# the build tree so that later runs skip that
POCL_CACHE_DIR=${POCL_CACHE_DIR:-$(cd "$builddir" && pwd)/tests/pocl-cache}
export POCL_CACHE_DIR

cat >"$tmp/probe.c" <<'PROBE'
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
int main(void) { cl_uint n = 0; return clGetPlatformIDs(0, NULL, &n) == CL_SUCCESS && n > 0 ? 0 : 3; }
PROBE
${CC:-cc} -o "$tmp/probe" "$tmp/probe.c" -lOpenCL >"$tmp/probe.log" 2>&1 ||
    skip "OpenCL headers or library missing (Debian: opencl-headers ocl-icd-opencl-dev): $(head -1 "$tmp/probe.log")"
"$tmp/probe" || skip "no OpenCL platform found (Debian: pocl-opencl-icd runs OpenCL on the CPU)"

n=0
fail=0
check() { # check DESCRIPTION COMMAND...
    n=$((n + 1))
    desc=$1
    shift
    if "$@" >"$tmp/out" 2>&1; then
        echo "ok $n - $desc"
    else
        echo "not ok $n - $desc"
        sed 's/^/# /' "$tmp/out" | tail -40
        fail=1
    fi
}

if [ -f "$STAGED_DIR/.complete" ]; then
    check "use the staging of tests/install.sh" stage_use "$STAGED_DIR"
else
    check "make install DESTDIR=..." stage_install "$tmp/stage"
fi
cp -R "$srcdir/examples/opencl-backend" "$tmp/example"
chmod -R u+w "$tmp/example"
rm -f "$tmp/example/libweft-opencl.so"
check "the example builds with its own Makefile and pkg-config weft-plugin" \
    make -C "$tmp/example" OPENCL_LIBS=-lOpenCL
check "the plugin exports weft_plugin_entry and nothing else" \
    sh -c "nm -D --defined-only '$tmp/example/libweft-opencl.so' | awk '\$2 != \"A\" {print \$3}' | grep -qx weft_plugin_entry &&
           [ \$(nm -D --defined-only '$tmp/example/libweft-opencl.so' | awk '\$2 != \"A\"' | wc -l) = 1 ]"

# the staged weft, not the build tree's: no WEFT_PLUGIN_PATH
unset WEFT_PLUGIN_PATH
kit="$root$prefix/bin/weft-conformance"
LD_LIBRARY_PATH="$root$libdir" "$kit" --plugin "$tmp/example/libweft-opencl.so" opencl \
    >"$tmp/conformance" 2>&1
status=$?
sed 's/^/# /' "$tmp/conformance"
check "weft-conformance passes on the OpenCL device" \
    sh -c "[ $status = 0 ] && grep -q '^# opencl: [0-9]* cases, 0 failed' '$tmp/conformance'"
# the plugin's own kernels ran (no "(CPU fallback)" on these lines)
check "its own float32 kernels ran: add, sub, mul, relu, exp, mm" \
    sh -c "for op in add sub mul relu exp mm; do
               grep -q \"^ok [0-9]* - \$op float32 \\[5,7\\]\$\" '$tmp/conformance' || { echo \"\$op did not run its own kernel\"; exit 1; }
           done"
check "strided and float64 operands went through the CPU fallback" \
    sh -c "grep -q '^ok [0-9]* - add float32 \\[4,6\\]^T (CPU fallback)' '$tmp/conformance' &&
           grep -q '^ok [0-9]* - add float64 \\[5,7\\] (CPU fallback)' '$tmp/conformance'"
LD_LIBRARY_PATH="$root$libdir" "$kit" --plugin "$tmp/example/libweft-opencl.so" --no-fallback \
    --float32-only --only mm opencl >"$tmp/own" 2>&1
check "--no-fallback: mm runs on the device alone" \
    sh -c "grep -q '^ok [0-9]* - mm float32 \\[5,7\\]\$' '$tmp/own' && ! grep -q '^not ok' '$tmp/own'"
echo "1..$n"
exit $fail
