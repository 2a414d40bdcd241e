#!/bin/sh
# tests/variants/cpu_isa.sh — the CPU plugin's ISA variants as the loader
# sees them on this machine: the AVX-512 build is chosen exactly where the
# CPU and the OS support AVX-512 F/BW/VL/DQ (/proc/cpuinfo, whose flags the
# kernel clears when it does not save the ZMM state), and refused with
# score -1 elsewhere; its score function — the only code of it the loader
# runs before choosing — holds no AVX or AVX-512 instruction, while the rest
# of the build does use ZMM registers.  Prints TAP.
builddir=${WEFT_BUILDDIR:-.}
libs="$builddir/.libs"
. "$(dirname "$0")/report.sh"
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }
check() { if eval "$1"; then ok "$2"; else not_ok "$2"; fi; }

if [ "$(uname -m)" != x86_64 ]; then
    echo "1..0 # SKIP the ISA variants are built on x86-64 only"
    exit 0
fi
so="$libs/libweft-cpu-avx512.so"
check '[ -f "$so" ]' "libweft-cpu-avx512.so is built"

have=yes
for f in avx512f avx512bw avx512vl avx512dq fma f16c; do
    grep -qw "$f" /proc/cpuinfo || have=no
done
echo "# this machine supports AVX-512 F/BW/VL/DQ: $have"

report=$(WEFT_PLUGIN_PATH="$libs" "$builddir/libtool" --mode=execute "$builddir/weft-info" 2>&1)
status=$?
check '[ $status -eq 0 ]' "weft-info loads the variants and exits cleanly (status $status)"
row=$(printf '%s\n' "$report" | report_row_of_file libweft-cpu-avx512.so)
echo "# report row: $row"
if [ $have = yes ]; then
    check 'printf "%s" "$row" | row_is loaded "variant=avx512 .*score=30 chosen=yes"' \
        "the AVX-512 variant is chosen with score 30"
else
    check 'printf "%s" "$row" | row_is unsupported "variant=avx512 .*score=-1 chosen=no"' \
        "the AVX-512 variant is refused with score -1"
    chosen=$(printf '%s\n' "$report" | report_rows | awk -F '\t' '$1 == "loaded" && $3 ~ /^name=cpu / { print $3 }' |
        grep -o 'variant=[a-z0-9]*')
    check '[ "$chosen" = variant=avx2 ] || [ "$chosen" = variant=baseline ]' \
        "another variant is loaded instead ($chosen)"
fi

# The parser against an AVX-512 machine's report, in the loader's file
# order and best first: the avx2 and baseline rows' reasons name the
# avx512 file, which a grep for the file name took for its row.
plugins=/usr/lib/weft/plugins
avx2_row="  skipped     $plugins/libweft-cpu-avx2.so
              name=cpu variant=avx2 abi=1.2 score=20 chosen=no
              a better variant was chosen: avx512 (score 30) from $plugins/libweft-cpu-avx512.so, not avx2 from $plugins/libweft-cpu-avx2.so"
avx512_row="  loaded      $plugins/libweft-cpu-avx512.so
              name=cpu variant=avx512 abi=1.2 score=30 chosen=yes"
baseline_row="  skipped     $plugins/libweft-cpu.so
              name=cpu variant=baseline abi=1.2 score=10 chosen=no
              a better variant was chosen: avx512 (score 30) from $plugins/libweft-cpu-avx512.so, not baseline from $plugins/libweft-cpu.so"
cuda_row="  loaded      $plugins/libweft-cuda.so
              name=cuda variant=- abi=1.2 score=0 chosen=yes"
file_order=$(printf 'candidates:\n%s\n%s\n%s\n%s\n' "$avx2_row" "$avx512_row" "$baseline_row" "$cuda_row")
best_first=$(printf 'candidates:\n%s\n%s\n%s\n%s\n' "$avx512_row" "$avx2_row" "$baseline_row" "$cuda_row")
for order in file_order best_first; do
    eval "canned=\$$order"
    row=$(printf '%s\n' "$canned" | report_row_of_file libweft-cpu-avx512.so)
    check 'printf "%s" "$row" | row_is loaded "variant=avx512 .*score=30 chosen=yes"' \
        "an AVX-512 machine's report ($order): the avx512 row is its own"
    score=$(printf '%s\n' "$canned" | report_row_of_variant cpu avx2 | row_score)
    check '[ "$score" = 20 ]' "an AVX-512 machine's report ($order): the avx2 row's score is 20 ($score)"
done

if command -v objdump >/dev/null 2>&1; then
    score=$(objdump -d --no-show-raw-insn --disassemble=cpu__score "$so" | grep -E '^ +[0-9a-f]+:')
    check '[ -n "$score" ]' "cpu__score is found in the AVX-512 build"
    bad=$(printf '%s\n' "$score" | grep -E '%[xyz]mm(1[6-9]|2[0-9]|3[01])|%[yz]mm|%k[0-7]|	v[a-z]')
    check '[ -z "$bad" ]' "its score function uses no AVX or AVX-512 instruction"
    [ -n "$bad" ] && printf '%s\n' "$bad" | sed 's/^/# /'
    zmm=$(objdump -d --no-show-raw-insn "$so" | grep -c '%zmm')
    check '[ "$zmm" -gt 0 ]' "the rest of the build uses ZMM registers ($zmm instructions)"
else
    echo "# objdump not found: the instruction checks are skipped"
    n=$((n + 1)); echo "ok $n # skip objdump not installed"
fi
echo "1..$n"
exit $fail
