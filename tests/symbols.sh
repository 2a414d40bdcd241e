#!/bin/sh
# tests/symbols.sh — libweft exports exactly its public API: every dynamic
# symbol it defines is a function declared WEFT_API in an installed header,
# and every such function is exported.  Plugins export only their entry.
# Prints TAP.
builddir=$(cd "${WEFT_BUILDDIR:-.}" && pwd)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
lib="$builddir/.libs/libweft.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! command -v nm >/dev/null 2>&1 || [ ! -f "$lib" ]; then
    echo "1..0 # SKIP nm or $lib missing"
    exit 0
fi
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort -u >"$tmp/exported"
# The declared API as the compiler sees the installed headers: every public
# header run through the preprocessor, where WEFT_API becomes the visibility
# attribute, so a WEFT_API in a comment or in code the preprocessor drops
# does not count, and one that a macro produces does.
cc=${WEFT_CC:-cc}
{
    for h in "$srcdir"/include/weft/*.h "$builddir"/include/weft/*.h; do
        [ -f "$h" ] && echo "#include \"$h\""
    done
} | sort -u >"$tmp/all.c"
if ! $cc -E -P -I"$srcdir/include" -I"$builddir/include" -x c "$tmp/all.c" \
    >"$tmp/all.i" 2>"$tmp/cpp.err"; then
    echo "not ok 1 - the public headers do not preprocess:"
    sed 's/^/#   /' "$tmp/cpp.err"
    echo "1..1"
    exit 1
fi
tr '\n' ' ' <"$tmp/all.i" | sed 's/__attribute__((visibility("default")))/@WEFT_API@/g' |
    grep -o '@WEFT_API@[^(;]*(' | sed 's/($//; s/.*[ *]//' | sort -u >"$tmp/declared"
n=0
fail=0
n=$((n + 1))
if [ -s "$tmp/declared" ] && ! grep -qv '^weft_' "$tmp/declared"; then
    echo "ok $n - the headers declare $(wc -l <"$tmp/declared") WEFT_API functions, all named weft_*"
else
    echo "not ok $n - no WEFT_API declarations found, or some lack the weft_ prefix:"
    grep -v '^weft_' "$tmp/declared" | sed 's/^/#   /'
    fail=1
fi
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
