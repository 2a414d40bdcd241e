#!/bin/sh
# tests/conformance.sh — weft-conformance on a device that has only an
# allocator and copies (tests/plugins/hostdev.c): every case runs through
# the CPU fallback and must give the CPU's results.  Then the kit must
# catch a wrong kernel, skip what --no-fallback leaves without a kernel,
# and refuse an unknown device.  TAP; the kit's own TAP goes into the log
# as comments.
builddir=${WEFT_BUILDDIR:-.}
plugins="${WEFT_TEST_PLUGIN_DIR:-$builddir/tests/plugins/.libs}"
kit="$builddir/weft-conformance"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -f "$plugins/test-hostdev.so" ]; then
    echo "1..0 # SKIP $plugins/test-hostdev.so is not built"
    exit 0
fi
n=0
fail=0
result() { # result OK DESCRIPTION
    n=$((n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        fail=1
    fi
}

"$kit" --plugin "$plugins/test-hostdev.so" hostdev:1 >"$tmp/all" 2>&1
status=$?
sed 's/^/# /' "$tmp/all"
cases=$(grep -c '^ok' "$tmp/all")
[ "$status" = 0 ] && [ "$cases" -gt 1000 ] && ! grep -q '^not ok' "$tmp/all"
result $? "every case passes on hostdev:1 through the CPU fallback ($cases cases)"
grep -q '^# hostdev:1: .* 0 failed, 0 skipped' "$tmp/all"
result $? "the summary counts no failure and no skip"

"$kit" --plugin "$plugins/test-hostdev-wrong.so" --only neg hostdev >"$tmp/wrong" 2>&1
status=$?
sed 's/^/# /' "$tmp/wrong"
[ "$status" = 1 ] && grep -q '^not ok .* neg float32 \[5,7\]: element 0 is' "$tmp/wrong"
result $? "a wrong neg kernel fails the kit (exit 1) with the element that differs"

"$kit" --plugin "$plugins/test-hostdev.so" --no-fallback --only mul_scalar hostdev >"$tmp/nofb" 2>&1
status=$?
[ "$status" = 0 ] && grep -q '^ok .* # SKIP the device does not support it' "$tmp/nofb" &&
    ! grep -q '^ok [0-9]* - [^#]*$' "$tmp/nofb"
result $? "--no-fallback: every case without a kernel of the device's own is a skip"

WEFT_CPU_FALLBACK=loud "$kit" --plugin "$plugins/test-hostdev.so" --only add_scalar hostdev \
    >"$tmp/bogus" 2>&1
grep -q "WEFT_CPU_FALLBACK='loud' is not one of warn, silent, error; using warn" "$tmp/bogus"
result $? "an unknown WEFT_CPU_FALLBACK value is named in a warning"

"$kit" nosuchdevice >"$tmp/unknown" 2>&1
status=$?
sed 's/^/# /' "$tmp/unknown"
[ "$status" = 2 ] && grep -q "unknown device type 'nosuchdevice'" "$tmp/unknown"
result $? "an unknown device is a set-up error (exit 2) naming it"

echo "1..$n"
exit $fail
