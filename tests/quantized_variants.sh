#!/bin/sh
# tests/quantized_variants.sh — tests/test_quantized once per block-kernel
# variant of the quantized plugin (scalar, avx2, avx512) that this machine
# runs, pinned with WEFT_QUANTIZED_KERNELS, and once per int8 GEMM of
# quantized linear (oneDNN's; the AVX2 one, layouts/quantized/igemm.c),
# pinned with WEFT_QUANTIZED_GEMM: the rest of make check tests
# only the widest, so the scalar code (what a machine without AVX2 runs)
# and the AVX2 code on an AVX-512 machine would otherwise go unseen.  The
# test itself checks that the pinned variant is the one running.  A variant
# the CPU (as the kernel reports it in /proc/cpuinfo) lacks is skipped with
# the reason.  Prints TAP, one line per variant.
builddir=${WEFT_BUILDDIR:-.}
WEFT_PLUGIN_PATH=${WEFT_PLUGIN_PATH:-$builddir/.libs}
export WEFT_PLUGIN_PATH
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
has() { for f in "$@"; do case " $flags " in *" $f "*) ;; *) return 1 ;; esac; done; }
echo "1..6"
n=0
fail=0
out=$(mktemp)
# run_pinned VARIABLE VALUE NEEDLE WHAT: test_quantized with VARIABLE=VALUE,
# passing when it does and its output says NEEDLE (the pinned code runs)
run_pinned() {
    if env "$1=$2" "$builddir/tests/test_quantized" >"$out" 2>&1 &&
        ! grep -q '^not ok' "$out" && grep -q "$3" "$out"; then
        echo "ok $n - test_quantized with $4"
    else
        echo "not ok $n - test_quantized with $4:"
        sed 's/^/# /' "$out"
        fail=1
    fi
}
for variant in scalar avx2 avx512; do
    n=$((n + 1))
    case $variant in
    avx2) has avx2 fma f16c || { echo "ok $n # SKIP avx2: this CPU lacks avx2, fma or f16c"; continue; } ;;
    avx512) has avx2 fma f16c avx512f avx512bw avx512vl ||
        { echo "ok $n # SKIP avx512: this CPU lacks avx512f, avx512bw or avx512vl"; continue; } ;;
    esac
    run_pinned WEFT_QUANTIZED_KERNELS $variant "$variant kernels" "the $variant block kernels"
done
for gemm in onednn avx2; do
    n=$((n + 1))
    case $gemm in
    avx2) has avx2 || { echo "ok $n # SKIP the avx2 int8 GEMM: this CPU lacks avx2"; continue; } ;;
    esac
    run_pinned WEFT_QUANTIZED_GEMM $gemm "int8 linear GEMM: $gemm" "the $gemm int8 GEMM"
done
# a value the plugin cannot honour fails its load, naming the variable
n=$((n + 1))
if WEFT_QUANTIZED_GEMM=vnni "$builddir/weft-info" 2>&1 |
    grep -q 'WEFT_QUANTIZED_GEMM=vnni: expected onednn or avx2'; then
    echo "ok $n - WEFT_QUANTIZED_GEMM=vnni: the plugin's load fails, saying what it takes"
else
    echo "not ok $n - WEFT_QUANTIZED_GEMM=vnni: no load failure naming it in weft-info"
    fail=1
fi
rm -f "$out"
exit $fail
