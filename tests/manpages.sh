#!/bin/sh
# tests/manpages.sh — the man pages (man/*.1) cannot drift from the tools:
# every option a tool's --help names must be in its man page, and every
# option the man page names must be in --help.  Where groff is installed,
# each page must also format without a warning.  TAP.
builddir=${WEFT_BUILDDIR:-.}
srcdir=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fail=0
result() { # result STATUS DESCRIPTION [DETAILS-FILE]
    n=$((n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        [ -n "${3:-}" ] && sed 's/^/# /' "$3"
        fail=1
    fi
}
# long options named in a text, one a line, sorted
options() { grep -o -- '--[a-z0-9][a-z0-9-]*' | sort -u; }
for tool in weft-info weft-train weft-conformance; do
    page="$srcdir/man/$tool.1"
    if ! "$builddir/$tool" --help >"$tmp/help" 2>&1; then
        result 1 "$tool --help exits 0" "$tmp/help"
        continue
    fi
    options <"$tmp/help" >"$tmp/from-help"
    # the page without its comment lines, roff's \- read as -
    grep -v '^\.\\"' "$page" | sed 's/\\-/-/g' | options >"$tmp/from-page"
    comm -23 "$tmp/from-help" "$tmp/from-page" >"$tmp/missing"
    comm -13 "$tmp/from-help" "$tmp/from-page" >"$tmp/extra"
    [ -s "$tmp/from-help" ] && [ ! -s "$tmp/missing" ]
    result $? "man/$tool.1 documents every option of $tool --help ($(wc -l <"$tmp/from-help"))" "$tmp/missing"
    [ ! -s "$tmp/extra" ]
    result $? "man/$tool.1 names no option that $tool --help lacks" "$tmp/extra"
    grep -q "^\\.TH $(echo "$tool" | tr a-z A-Z) 1 " "$page" && grep -q "^$tool \\\\- " "$page"
    result $? "man/$tool.1 is section 1 and its NAME line names $tool"
    if command -v groff >/dev/null 2>&1; then
        groff -man -Tutf8 -ww -z "$page" >"$tmp/groff" 2>&1 && [ ! -s "$tmp/groff" ]
        result $? "man/$tool.1 formats without a warning" "$tmp/groff"
    fi
done
echo "1..$n"
exit $fail
