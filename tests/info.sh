#!/bin/sh
# tests/info.sh — weft-info as a new user reads it: only device types that a
# loaded plugin provides, with their kinds; the operator list only with
# --ops; a relative WEFT_PLUGIN_PATH entry reported as ignored; usage
# errors.  TAP.
builddir=${WEFT_BUILDDIR:-.}
plugins=${WEFT_TEST_PLUGIN_DIR:-$builddir/tests/plugins/.libs}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fail=0
check() { # check DESCRIPTION COMMAND...
    n=$((n + 1))
    desc=$1
    shift
    if "$@" >"$tmp/why" 2>&1; then
        echo "ok $n - $desc"
    else
        echo "not ok $n - $desc"
        sed 's/^/# /' "$tmp/why" | tail -20
        fail=1
    fi
}
info() { "$builddir/weft-info" "$@"; }
# the device type rows: "  ID   NAME   KIND   N devices"
types() { sed -n '/^device types:/,/^$/p' "$1" | sed -n 's/^  [0-9][0-9]* *\([a-z_0-9]*\) .*/\1/p'; }

# with the CUDA (and any HIP) plugin disabled, their reserved names are
# provided by nothing and must not be listed
WEFT_DISABLE_PLUGINS=cuda,hip info >"$tmp/plain"
check "weft-info lists the CPU as the host" grep -Eq '^  0 +cpu +host +1 device$' "$tmp/plain"
types "$tmp/plain" >"$tmp/plain-types"
check "and no device type without a loaded plugin (cuda, hip are disabled): $(echo $(cat "$tmp/plain-types"))" \
    sh -c "[ \"\$(cat '$tmp/plain-types')\" = cpu ] || { cat '$tmp/plain'; exit 1; }"
WEFT_DISABLE_PLUGINS=cuda,hip info --plugin "$plugins/test-hostdev.so" --plugin "$plugins/test-good.so" \
    >"$tmp/fakes"
check "a loaded plugin's types are listed with their kind and count" \
    sh -c "grep -Eq '^  [0-9]+ +hostdev +emulated +2 devices\$' '$tmp/fakes' &&
           grep -Eq '^  [0-9]+ +testdev +kind unknown +2 devices\$' '$tmp/fakes' ||
           { cat '$tmp/fakes'; exit 1; }"
check "without --ops, the operators are counted, not listed" \
    sh -c "grep -Eq '^operators: [0-9]+ \\(--ops lists them' '$tmp/plain' && ! grep -q '^  add(Tensor' '$tmp/plain'"
info --ops >"$tmp/ops"
count=$(sed -n 's/^operators (\([0-9]*\)):$/\1/p' "$tmp/ops")
listed=$(sed -n '/^operators (/,$p' "$tmp/ops" | grep -c '^  [a-z_0-9]*(')
check "--ops lists every operator's schema ($listed of $count)" \
    sh -c "[ -n '$count' ] && [ '$count' = '$listed' ] && grep -q '^  add(Tensor self, Tensor other' '$tmp/ops'"
WEFT_PLUGIN_PATH="${WEFT_PLUGIN_PATH:-/nonexistent}:relative/plugins" info >"$tmp/rel"
check "a relative WEFT_PLUGIN_PATH entry is reported as ignored" \
    grep -q "^  ignored: 'relative/plugins' from WEFT_PLUGIN_PATH is a relative directory" "$tmp/rel"
info --frobnicate >"$tmp/usage" 2>&1
status=$?
check "an unknown option is a usage error (exit status $status)" \
    sh -c "[ $status = 2 ] && grep -q '^usage: weft-info' '$tmp/usage'"
info --plugin /nonexistent/libweft-x.so >"$tmp/missing" 2>&1
status=$?
check "a --plugin that cannot be loaded says so and exits 1 (exit status $status)" \
    sh -c "[ $status = 1 ] && grep -q 'weft-info: plugin .*/nonexistent/libweft-x.so' '$tmp/missing'"
echo "1..$n"
exit $fail
