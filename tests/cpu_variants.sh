#!/bin/sh
# tests/cpu_variants.sh — the CPU plugin's variant rules (backends/cpu/variants.am,
# included by Makefile.am) are what backends/cpu/gen-variants.sh makes from
# the table backends/cpu/variants, and every variant in the table is built.
# TAP.
srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=${WEFT_BUILDDIR:-.}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "1..2"
sh "$srcdir/backends/cpu/gen-variants.sh" "$srcdir/backends/cpu/variants" >"$tmp"
if cmp -s "$tmp" "$srcdir/backends/cpu/variants.am"; then
    echo "ok 1 - backends/cpu/variants.am is generated from backends/cpu/variants"
else
    echo "not ok 1 - backends/cpu/variants.am is stale: run sh backends/cpu/gen-variants.sh > backends/cpu/variants.am"
    diff "$tmp" "$srcdir/backends/cpu/variants.am" | sed 's/^/# /'
fi
missing=""
arch=$(uname -m)
for name in $(grep -v '^#' "$srcdir/backends/cpu/variants" | awk 'NF && ($2 == "no" || "'"$arch"'" == "x86_64") {print $1}'); do
    lib=libweft-cpu-$name.so
    [ "$name" = baseline ] && lib=libweft-cpu.so
    [ -f "$builddir/.libs/$lib" ] || missing="$missing $lib"
done
if [ -z "$missing" ]; then
    echo "ok 2 - every variant of the table is built"
else
    echo "not ok 2 - not built:$missing"
fi
