#!/bin/sh
# tests/variants/per_variant.sh — the CPU operator tests once per CPU plugin
# variant this machine can run.  The rest of make check tests only the
# variant the loader chooses, the best one here, so a bug in the baseline
# build (what a machine without AVX2 runs) or in the AVX2 build on an
# AVX-512 machine would otherwise go unseen.  Each variant whose score in
# weft-info's report is >= 0 is pinned with WEFT_PLUGIN_VARIANT=cpu:VARIANT;
# the others are skipped with the reason.  Prints TAP: one line per
# variant that it loads as asked, one per program and variant.
builddir=${WEFT_BUILDDIR:-.}
libs="$builddir/.libs"
WEFT_PLUGIN_PATH=${WEFT_PLUGIN_PATH:-$libs}
export WEFT_PLUGIN_PATH
. "$(dirname "$0")/report.sh"

programs="test_cpu_ops test_cpu_ops2 test_cpu_fastpaths test_vec_math test_nn_ops test_nn_ops2
    test_nn_norm test_linalg test_erf"
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; }
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }

# weft-info's report with the variant pinned ($1 empty: none)
report_with() {
    WEFT_PLUGIN_VARIANT=${1:+cpu:$1} "$builddir/libtool" --mode=execute "$builddir/weft-info" 2>&1
}

report=$(report_with "")
ran=
skipped=
out=$(mktemp)
for variant in baseline avx2 avx512; do
    score=$(printf '%s\n' "$report" | report_row_of_variant cpu "$variant" | row_score)
    if [ -z "$score" ]; then
        reason="the $variant build is not in the report (not built on $(uname -m))"
    elif [ "$score" -lt 0 ]; then
        reason="this CPU cannot run the $variant build (score $score)"
    else
        reason=
    fi
    if [ -n "$reason" ]; then
        skipped="$skipped $variant"
        skip "cpu:$variant: $reason"
        for p in $programs; do
            skip "$p under cpu:$variant: $reason"
        done
        continue
    fi
    ran="$ran $variant"
    # the pin must load that build, or the programs would test another
    row=$(report_with "$variant" | report_row_of_variant cpu "$variant")
    if printf '%s' "$row" | row_is loaded "chosen=yes"; then
        ok "WEFT_PLUGIN_VARIANT=cpu:$variant loads the $variant build (score $score)"
    else
        not_ok "WEFT_PLUGIN_VARIANT=cpu:$variant loads the $variant build: $row"
        continue
    fi
    for p in $programs; do
        WEFT_PLUGIN_VARIANT=cpu:$variant "$builddir/tests/$p" >"$out" 2>&1
        status=$?
        failed=$(grep -c '^not ok' "$out")
        if [ $status -eq 0 ] && [ "$failed" -eq 0 ] && ! grep -q '^1\.\.0' "$out"; then
            ok "$p under cpu:$variant ($(grep -c '^ok' "$out") checks)"
        else
            not_ok "$p under cpu:$variant (exit $status, $failed failed)"
            grep -A3 '^not ok\|^1\.\.0' "$out" | head -40 | sed 's/^/# /'
            tail -5 "$out" | sed 's/^/# /'
        fi
    done
done
rm -f "$out"
echo "# variants run:${ran:- none}; skipped:${skipped:- none}"
echo "1..$n"
exit $fail
