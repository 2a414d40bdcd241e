#!/bin/sh
# tests/symbols.sh — libweft exports exactly its public API: every dynamic
# symbol it defines is a function declared WEFT_API in an installed header,
# and every such function is exported.  Plugins export only their entry.
# Prints TAP.
builddir=${WEFT_BUILDDIR:-.}
srcdir=$(cd "$(dirname "$0")/.." && pwd)
lib="$builddir/.libs/libweft.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! command -v nm >/dev/null 2>&1 || [ ! -f "$lib" ]; then
    echo "1..0 # SKIP nm or $lib missing"
    exit 0
fi
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort -u >"$tmp/exported"
cat "$srcdir/include/weft/weft.h" "$srcdir/include/weft/plugin.h" "$srcdir/include/weft/dlpack.h" "$srcdir/include/weft/nn.h" "$builddir/include/weft/ops.h" |
    tr '\n' ' ' | grep -o 'WEFT_API [^(;]*(' | sed 's/($//; s/.*[ *]//' | grep '^weft_' | sort -u >"$tmp/declared"
n=0
fail=0
n=$((n + 1))
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
if [ -z "$extra" ]; then
    echo "ok $n - libweft exports nothing beyond the declared API ($(wc -l <"$tmp/exported") symbols)"
else
    echo "not ok $n - libweft exports undeclared symbols:"
    echo "$extra" | sed 's/^/#   /'
    fail=1
fi
n=$((n + 1))
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
if [ -z "$missing" ]; then
    echo "ok $n - every declared WEFT_API function is exported"
else
    echo "not ok $n - declared but not exported:"
    echo "$missing" | sed 's/^/#   /'
    fail=1
fi
for plugin in "$builddir"/.libs/libweft-*.so; do
    [ -f "$plugin" ] || continue
    n=$((n + 1))
    syms=$(nm -D --defined-only "$plugin" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort -u | tr '\n' ' ')
    if [ "$syms" = "weft_plugin_entry " ]; then
        echo "ok $n - $(basename "$plugin") exports only weft_plugin_entry"
    else
        echo "not ok $n - $(basename "$plugin") exports: $syms"
        fail=1
    fi
done
n=$((n + 1))
if ldd "$lib" | grep -Eqi 'blas|cuda|torch'; then
    echo "not ok $n - libweft links a heavy dependency:"
    ldd "$lib" | sed 's/^/#   /'
    fail=1
else
    echo "ok $n - libweft links no BLAS, CUDA or torch"
fi
echo "1..$n"
exit $fail
